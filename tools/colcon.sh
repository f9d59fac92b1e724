#!/usr/bin/env bash
# colcon in the project environment: a sourced ROS 2's own colcon, or (without ROS 2) colcon installed into
# .venv from requirements-colcon.txt on first use. `make build` calls `tools/colcon.sh build --symlink-install`.
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
exec colcon "$@"
