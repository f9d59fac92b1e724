# Sourced by tools/setup_env.sh and tools/in_env.sh: decides which Python environment mbs_ros runs in and
# exports what that environment needs. Not meant to be run on its own.
#
# Two modes (MBS_ENV=auto|ros|venv overrides the detection; auto is the default):
#   ros   a sourced ROS 2 (ROS_DISTRO set and the system python3 imports rclpy from outside .venv):
#         the distro's python3, messages (tf2_msgs too) and Python packages; mbs_ros from this checkout via
#         PYTHONPATH, and a small ament prefix (build/dev_prefix) whose share/mbs_ros links back to it and
#         into which tools/setup_env.sh builds mbs_ros_msgs (its lib/pythonX.Y/site-packages on PYTHONPATH,
#         its lib on LD_LIBRARY_PATH, for the Python modules and the type support libraries they load).
#   venv  no ROS 2: .venv, made by tools/setup_env.sh from the ROS 2 wheels on PyPI, with tf2_msgs and
#         mbs_ros_msgs built into it and mbs_ros installed editable; share/mbs_ros inside .venv links back to
#         this checkout.
# Exports: MBS_ROOT, MBS_MODE, MBS_VENV, MBS_PREFIX (the ament prefix holding mbs_ros and mbs_ros_msgs),
# MBS_PYTHON, and AMENT_PREFIX_PATH (+ PATH in venv mode, PYTHONPATH and LD_LIBRARY_PATH in ros mode).
# MBS_PREFIX is also a complete ament prefix for mbs_ros: share/mbs_ros and lib/mbs_ros/<executables>.

MBS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MBS_VENV=${MBS_VENV:-$MBS_ROOT/.venv}

_mbs_system_rclpy() {
  # True when the python3 on PATH imports rclpy from a ROS install (not from our own wheel venv).
  [ -n "${ROS_DISTRO:-}" ] || return 1
  local where
  where=$(python3 -c 'import rclpy; print(rclpy.__file__)' 2>/dev/null) || return 1
  case "$where" in "$MBS_VENV"/*) return 1 ;; esac
  return 0
}

case "${MBS_ENV:-auto}" in
  ros) MBS_MODE=ros ;;
  venv) MBS_MODE=venv ;;
  auto) if _mbs_system_rclpy; then MBS_MODE=ros; else MBS_MODE=venv; fi ;;
  *) echo "MBS_ENV must be auto, ros or venv (got '$MBS_ENV')" >&2; return 2 ;;
esac

if [ "$MBS_MODE" = ros ]; then
  MBS_PREFIX=$MBS_ROOT/build/dev_prefix
  MBS_PYTHON=$(command -v python3)
  # The dir tools/setup_env.sh installs mbs_ros_msgs' Python package into (it passes this one to cmake).
  _mbs_pyver=$("$MBS_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  export PYTHONPATH=$MBS_ROOT:$MBS_PREFIX/lib/python$_mbs_pyver/site-packages${PYTHONPATH:+:$PYTHONPATH}
  export LD_LIBRARY_PATH=$MBS_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  unset _mbs_pyver
else
  MBS_PREFIX=$MBS_VENV
  MBS_PYTHON=$MBS_VENV/bin/python
  export PATH=$MBS_VENV/bin:$PATH
fi
# Our prefix goes first, unless a prefix already on AMENT_PREFIX_PATH provides mbs_ros (the caller sourced a
# colcon install/ of it): that overlay is then found first, as ROS 2 overlays are, and ours comes after it.
_mbs_overlay=false
IFS=: read -r -a _mbs_prefixes <<< "${AMENT_PREFIX_PATH:-}"
for _mbs_p in "${_mbs_prefixes[@]}"; do
  [ -n "$_mbs_p" ] && [ "$_mbs_p" != "$MBS_PREFIX" ] &&
    [ -e "$_mbs_p/share/ament_index/resource_index/packages/mbs_ros" ] && _mbs_overlay=true
done
if $_mbs_overlay; then
  export AMENT_PREFIX_PATH=$AMENT_PREFIX_PATH:$MBS_PREFIX
else
  export AMENT_PREFIX_PATH=$MBS_PREFIX${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}
fi
unset _mbs_overlay _mbs_prefixes _mbs_p
export MBS_ROOT MBS_MODE MBS_VENV MBS_PREFIX MBS_PYTHON
