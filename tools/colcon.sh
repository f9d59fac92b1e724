#!/usr/bin/env bash
# colcon in the project environment: a sourced ROS 2's own colcon, or (without ROS 2) colcon installed into
# .venv from requirements-colcon.txt on first use. `make build` calls `tools/colcon.sh build --symlink-install`,
# which builds mbs_ros_msgs/ and then mbs_ros (see the base paths below).
set -euo pipefail
# shellcheck source=tools/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$MBS_ROOT"
if [ "$MBS_MODE" = venv ]; then
  stamp=$MBS_VENV/.mbs_colcon_stamp
  want=$(sha256sum requirements-colcon.txt | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "[colcon] installing requirements-colcon.txt into $MBS_VENV"
    "$MBS_PYTHON" -m pip install -q -r requirements-colcon.txt 2>&1 |
      { grep -v 'is ignored: it is neither a file nor a directory' || true; }
    echo "$want" > "$stamp"
  fi
else
  command -v colcon >/dev/null 2>&1 ||
    { echo "[colcon] no colcon on PATH (Debian/Ubuntu: apt-get install python3-colcon-common-extensions)" >&2; exit 1; }
fi
# colcon does not look inside a directory that is itself a package, and this checkout's root is one (mbs_ros):
# a verb that discovers packages, given no --base-paths or --paths of the caller's, gets both packages, the root
# and mbs_ros_msgs/ (our interfaces, ament_cmake).
args=("$@")
own_paths=false
for a in "$@"; do
  case "$a" in --base-paths | --base-paths=* | --paths | --paths=*) own_paths=true ;; esac
done
if ! $own_paths; then
  i=0
  while [ "$i" -lt ${#args[@]} ]; do
    case "${args[$i]}" in
      --log-base | --log-level) i=$((i + 2)); continue ;;  # colcon's options before the verb that take a value
      -*) ;;
      build | test | list | graph | info)
        args=("${args[@]:0:i+1}" --base-paths . mbs_ros_msgs "${args[@]:i+1}")
        break ;;
      *) break ;;
    esac
    i=$((i + 1))
  done
fi
exec colcon "${args[@]}"
