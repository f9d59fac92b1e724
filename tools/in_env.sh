#!/usr/bin/env bash
# Runs a command in the project environment (see tools/env.sh); a leading `python` means the environment's
# interpreter: the venv's without ROS 2, the distro's python3 with a sourced ROS 2.
#   tools/in_env.sh python -m pytest test
set -euo pipefail
# shellcheck source=tools/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[ $# -gt 0 ] || { echo "usage: $0 python|COMMAND [ARGS...]" >&2; exit 2; }
if [ "$1" = python ]; then shift; set -- "$MBS_PYTHON" "$@"; fi
exec "$@"
