#!/usr/bin/env bash
# Sets up the environment `make test` and `make demo` run in (called by `make setup`). Idempotent: a second
# run does no network work and takes about a second.
#
# With a sourced ROS 2 (see tools/env.sh): checks that the distro provides what package.xml declares, builds
# our interface package mbs_ros_msgs/ against the distro into build/dev_prefix with cmake (skipped while
# build/dev_prefix/.mbs_msgs_stamp matches a hash of mbs_ros_msgs/, the distro, its python and the build steps)
# and links build/dev_prefix/share/mbs_ros to this checkout. Creates no venv.
#
# Without ROS 2: creates .venv and
#   1. pip installs requirements-dev.txt (ROS 2 kilted wheels, numerics, test tools, interface build tools);
#   2. patches the wheels' exported cmake files, which name the wheel builder's Python and numpy include dirs;
#   3. builds tf2_msgs (on no reachable registry) into .venv with cmake, from upstream's one-line definition,
#      and checks that its type hash is upstream's, so real tf2/RViz peers accept our /tf; control_msgs'
#      FollowJointTrajectory action (no wheel either) likewise, its type hashes checked against upstream's, so
#      that MoveIt and other clients match the controller's action server; then builds our own
#      interface package mbs_ros_msgs/ (EnergyPorts) the same way and checks that it imports and publishes;
#   4. pip installs this package editable, without touching the network;
#   5. links .venv/share/mbs_ros/{package.xml,launch,config} and the ament index entry to this checkout, and
#      writes .venv/lib/mbs_ros/<console script> (what ros2 run and launch_ros start; build/dev_prefix too).
# Steps 1-3 are skipped while .venv/.mbs_env_stamp matches a hash of the requirement files, this script and
# the files under mbs_ros_msgs/ (so an edited .msg is rebuilt),
# step 4 while .venv/.mbs_pkg_stamp matches a hash of setup.py, setup.cfg and the checkout's path.
#
# Environment: MBS_ENV=auto|ros|venv, MBS_VENV (default .venv), PYTHON (interpreter for a new venv).
set -euo pipefail
# shellcheck source=tools/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$MBS_ROOT"

# tf2_msgs/msg/TFMessage as upstream (ros2/geometry2) defines it, and the type hash ROS 2 computes for it
# (the one `ros2 topic info -v /tf` shows on a distro install).
TF2_DEFINITION='geometry_msgs/TransformStamped[] transforms'
TF2_TYPE_HASH='RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087'

# control_msgs/action/FollowJointTrajectory and the two messages it uses, byte for byte as upstream
# (ros-controls/control_msgs, branch master = rolling and kilted, tag 6.8.0, commit 13dacdd) defines them;
# control_msgs has no wheel either. Built by build_control_msgs, checked by check_control_msgs.
IFS= read -r -d '' CONTROL_MSGS_FOLLOW_JOINT_TRAJECTORY <<'END_OF_DEFINITION' || true
# The trajectory for all revolute, continuous or prismatic joints
trajectory_msgs/JointTrajectory trajectory
# The trajectory for all planar or floating joints (i.e. individual joints with more than one DOF)
trajectory_msgs/MultiDOFJointTrajectory multi_dof_trajectory

# Tolerances for the trajectory.  If the measured joint values fall
# outside the tolerances the trajectory goal is aborted.  Any
# tolerances that are not specified (by being omitted or set to 0) are
# set to the defaults for the action server (often taken from the
# parameter server).

# Tolerances applied to the joints as the trajectory is executed.  If
# violated, the goal aborts with error_code set to
# PATH_TOLERANCE_VIOLATED.
JointTolerance[] path_tolerance
JointComponentTolerance[] component_path_tolerance

# To report success, the joints must be within goal_tolerance of the
# final trajectory value.  The goal must be achieved by time the
# trajectory ends plus goal_time_tolerance.  (goal_time_tolerance
# allows some leeway in time, so that the trajectory goal can still
# succeed even if the joints reach the goal some time after the
# precise end time of the trajectory).
#
# If the joints are not within goal_tolerance after "trajectory finish
# time" + goal_time_tolerance, the goal aborts with error_code set to
# GOAL_TOLERANCE_VIOLATED
JointTolerance[] goal_tolerance
JointComponentTolerance[] component_goal_tolerance
builtin_interfaces/Duration goal_time_tolerance

---
int32 error_code
int32 SUCCESSFUL = 0
int32 INVALID_GOAL = -1
int32 INVALID_JOINTS = -2
int32 OLD_HEADER_TIMESTAMP = -3
int32 PATH_TOLERANCE_VIOLATED = -4
int32 GOAL_TOLERANCE_VIOLATED = -5

# Human readable description of the error code. Contains complementary
# information that is especially useful when execution fails, for instance:
# - INVALID_GOAL: The reason for the invalid goal (e.g., the requested
#   trajectory is in the past).
# - INVALID_JOINTS: The mismatch between the expected controller joints
#   and those provided in the goal.
# - PATH_TOLERANCE_VIOLATED and GOAL_TOLERANCE_VIOLATED: Which joint
#   violated which tolerance, and by how much.
string error_string

---
std_msgs/Header header
string[] joint_names
trajectory_msgs/JointTrajectoryPoint desired
trajectory_msgs/JointTrajectoryPoint actual
trajectory_msgs/JointTrajectoryPoint error
# the currently used point from trajectory.points array
int32 index

string[] multi_dof_joint_names
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_desired
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_actual
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_error
# the currently used point from multi_dof_trajectory.points array
int32 multi_dof_index
END_OF_DEFINITION
IFS= read -r -d '' CONTROL_MSGS_JOINT_TOLERANCE <<'END_OF_DEFINITION' || true
# The tolerances specify the amount the position, velocity, and
# accelerations can vary from the setpoints.  For example, in the case
# of trajectory control, when the actual position varies beyond
# (desired position + position tolerance), the trajectory goal may
# abort.
#
# There are two special values for tolerances:
#  * 0 - The tolerance is unspecified and will remain at whatever the default is
#  * -1 - The tolerance is "erased".  If there was a default, the joint will be
#         allowed to move without restriction.

string name
float64 position  # in radians or meters (for a revolute or prismatic joint, respectively)
float64 velocity  # in rad/sec or m/sec
float64 acceleration  # in rad/sec^2 or m/sec^2
END_OF_DEFINITION
IFS= read -r -d '' CONTROL_MSGS_JOINT_COMPONENT_TOLERANCE <<'END_OF_DEFINITION' || true
# Version of JointTolerance.msg with added component field for joints with multiple degrees of freedom
# The difference between two MultiDOFJointTrajectoryPoint cannot be represented as a single number,
# hence we use the component field to represent how to calculate the difference in a way that can
# be represented as a single number.

# Since each joint has multiple degrees of freedom,
# there can be multiple tolerances for each joint, each looking
# at different components.

# If the component is X_AXIS, Y_AXIS, or Z_AXIS, then the tolerance
# is only applied for the specific axis.
# However, if the component is TRANSLATION, then the tolerance is for
# the overall Euclidean distance.
# For these components, the units are meters, meters/sec and meters/sec^2.
# Z_AXIS is only valid with a floating joint, not planar.

# If the component is ROTATION the tolerance is measured in
# radians, radians/sec and radians/sec^2, computed
# between the difference in quaternions.

uint16 X_AXIS=1
uint16 Y_AXIS=2
uint16 Z_AXIS=3
uint16 TRANSLATION=4
uint16 ROTATION=5

string joint_name
uint16 component
float64 position
float64 velocity
float64 acceleration
END_OF_DEFINITION
# The type hashes of what build_control_msgs builds, as upstream's build of those definitions has them. Those
# the 6.3.0 change (the feedback's index and multi_dof_index) left alone are the values published in a colcon
# build of control_msgs (the rosidl_generator_c output follow_joint_trajectory__description.c and
# follow_joint_trajectory__struct.h of github.com/saahu27/aprs, aprs_ws/build/control_msgs). For the feedback,
# its message and the action no build of >= 6.3.0 was found published: those are the values rosidl computes
# from the text above, which the same rosidl reproduces upstream's published values from for the text before
# 6.3.0 (feedback RIHS01_3fd0aaec…, action RIHS01_738ebcb7…). A hash is a function of the field names and
# types alone (not of comments or constants), so a definition that differs in a field fails the check.
CONTROL_MSGS_TYPE_HASHES='
control_msgs/msg/JointTolerance RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648
control_msgs/msg/JointComponentTolerance RIHS01_739ea7566931944d33830fa10f1bf5e7a7fbdc3172bce7a7eaac642bd6e3ffa4
control_msgs/action/FollowJointTrajectory_Goal RIHS01_8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205
control_msgs/action/FollowJointTrajectory_Result RIHS01_8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220
control_msgs/action/FollowJointTrajectory_SendGoal RIHS01_b13789dddc325a7a962825c45e28c77d37237ec129dd0c34dc5994562938c57f
control_msgs/action/FollowJointTrajectory_GetResult RIHS01_e3ceb38e3e1867c8dc0f46014df26e90eb93422f27e9e97f936e07f94be4bc8b
control_msgs/action/FollowJointTrajectory_Feedback RIHS01_0bb018d181bdc6384dd75365480967bd1d6eaee4ef3dd597c64cd0b8bdc10867
control_msgs/action/FollowJointTrajectory_FeedbackMessage RIHS01_95618cc73912d99b9acaa17d2da5e832cb0bfdeede7534fa8ec600feca2a6c4b
control_msgs/action/FollowJointTrajectory RIHS01_ff29901b2693f5deb847e96084a1c2cdb26e70b7c847be21859b70a55fb29cf0
'

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# The ament prefix entries that make ament_index_python find mbs_ros in this checkout (live: symlinks).
link_share() {
  local prefix=$1 share=$1/share/mbs_ros
  mkdir -p "$share" "$prefix/share/ament_index/resource_index/packages"
  : > "$prefix/share/ament_index/resource_index/packages/mbs_ros"
  ln -sfn "$MBS_ROOT/package.xml" "$share/package.xml"
  ln -sfn "$MBS_ROOT/launch" "$share/launch"
  ln -sfn "$MBS_ROOT/config" "$share/config"
  # colcon must not crawl into the prefix and find a second mbs_ros (or the wheels' package.xml files).
  : > "$prefix/COLCON_IGNORE"
  libexec_scripts "$prefix"
}

libexec_scripts() {
  # PREFIX/lib/mbs_ros/<name> for every console script of setup.py, as colcon installs them: ament_index
  # finds mbs_ros in PREFIX, so `ros2 run` and launch_ros look for its executables there (without them:
  # "libexec directory '.../lib/mbs_ros' does not exist"). Each runs $MBS_PYTHON; in ros mode it needs the
  # environment of tools/env.sh (PYTHONPATH, LD_LIBRARY_PATH), as everything else there. Rewritten in place
  # (a launch starting meanwhile finds every script), names no longer in setup.py removed.
  "$MBS_PYTHON" - "$MBS_ROOT/setup.py" "$1/lib/mbs_ros" "$MBS_PYTHON" <<'PY'
import ast, os, sys
setup_py, libexec, python = sys.argv[1:]
scripts = {}
for node in ast.walk(ast.parse(open(setup_py).read())):
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup":
        entry = ast.literal_eval(next(k.value for k in node.keywords if k.arg == "entry_points"))
        for line in entry["console_scripts"]:
            name, target = (part.strip() for part in line.split("="))
            scripts[name] = target.split(":")
os.makedirs(libexec, exist_ok=True)
for name, (module, func) in scripts.items():
    path = os.path.join(libexec, name)
    text = (f"#!{python}\n# console script '{name}' of mbs_ros for ros2 run and launch_ros (tools/setup_env.sh)\n"
            f"import sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    if os.path.isfile(path) and open(path).read() == text and os.access(path, os.X_OK):
        continue
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)
for name in set(os.listdir(libexec)) - set(scripts):
    os.remove(os.path.join(libexec, name))
PY
}

unimportable() {
  # The modules among "$@" that $MBS_PYTHON cannot import (one interpreter start for all of them).
  "$MBS_PYTHON" - "$@" <<'PY'
import importlib, sys
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        missing.append(name)
print(" ".join(missing))
PY
}

ros_setup() {
  say "sourced ROS 2 $ROS_DISTRO: using $MBS_PYTHON and the distro's packages (no venv)"
  local missing optional
  missing=$(unimportable rclpy numpy scipy transforms3d yaml tf2_msgs.msg control_msgs.action geometry_msgs.msg \
    ament_index_python urdf_parser_py xacro pytest sympy)
  optional=$(unimportable pinocchio catkin_pkg numba)
  [ -z "$optional" ] || say "warning: not importable (some tests need them): $optional"
  if [ -n "$missing" ]; then
    die "not importable: $missing. Install the declared dependencies with:
    rosdep install --from-paths $MBS_ROOT $MBS_ROOT/mbs_ros_msgs --ignore-src -y
or run without ROS: MBS_ENV=venv make test"
  fi
  ros_build_mbs_ros_msgs
  link_share "$MBS_PREFIX"
}

ros_build_mbs_ros_msgs() {
  # mbs_ros_msgs into $MBS_PREFIX, against the sourced distro (its cmake, generators and python). tools/env.sh
  # puts $MBS_PREFIX/lib/pythonX.Y/site-packages on PYTHONPATH and $MBS_PREFIX/lib on LD_LIBRARY_PATH; the
  # install dir is given to cmake so that both agree.
  local stamp=$MBS_PREFIX/.mbs_msgs_stamp pyver h
  pyver=$("$MBS_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  h=$(hash_of <(msgs_files) "${MSGS_FILES[@]}" \
    <(echo "$ROS_DISTRO $MBS_PYTHON $pyver"; declare -f ros_build_mbs_ros_msgs build_mbs_ros_msgs cmake_install))
  if [ "$(cat "$stamp" 2>/dev/null)" = "$h" ] &&
     [ -f "$MBS_PREFIX/lib/python$pyver/site-packages/mbs_ros_msgs/__init__.py" ]; then
    return 0
  fi
  command -v cmake >/dev/null 2>&1 ||
    die "cmake is needed to build mbs_ros_msgs (Debian/Ubuntu: apt-get install cmake, or ros-dev-tools)"
  command -v c++ >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 ||
    die "a C/C++ compiler is needed to build mbs_ros_msgs (Debian/Ubuntu: apt-get install build-essential)"
  rm -f "$stamp"
  # The distro's prefixes (AMENT_PREFIX_PATH, which holds them and $MBS_PREFIX) for cmake's find_package too.
  build_mbs_ros_msgs "$MBS_PREFIX" "$MBS_PYTHON" \
    "CMAKE_PREFIX_PATH=$AMENT_PREFIX_PATH${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" \
    -- -DPYTHON_INSTALL_DIR="lib/python$pyver/site-packages"
  check_mbs_ros_msgs
  echo "$h" > "$stamp"
}

pick_python() {
  local cand
  for cand in ${PYTHON:-} python3.11 python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  return 1
}

pip_q() {
  # pip, minus the warnings about this machine's local extra indexes that lack a package.
  "$MBS_VENV/bin/python" -m pip "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# The files of our interface package (relative paths, sorted): their names and contents go into the stamps.
msgs_files() { LC_ALL=C find mbs_ros_msgs -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort; }
mapfile -t MSGS_FILES < <(msgs_files)
[ ${#MSGS_FILES[@]} -gt 0 ] || die "no mbs_ros_msgs/ in $MBS_ROOT"

check_build_tools() {
  command -v c++ >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 ||
    die "a C/C++ compiler is needed to build tf2_msgs and mbs_ros_msgs (Debian/Ubuntu: apt-get install build-essential)"
  local inc
  inc=$("$MBS_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [ -f "$inc/Python.h" ] || die "Python headers missing in $inc (Debian/Ubuntu: apt-get install python3-dev)"
  if ! command -v cmake >/dev/null 2>&1; then
    say "no cmake on PATH: installing the cmake wheel into the venv"
    pip_q install -q cmake
  fi
}

patch_cmake_exports() {
  # The wheels were built in a manylinux container; their exported targets name its include dirs.
  local inc npinc files
  inc=$("$MBS_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  npinc=$("$MBS_VENV/bin/python" -c 'import numpy; print(numpy.get_include())')
  mapfile -t files < <(grep -rl --include='*.cmake' '/opt/python/cp311-cp311' "$MBS_VENV/share" || true)
  [ ${#files[@]} -eq 0 ] && return 0
  say "patching ${#files[@]} exported cmake files"
  sed -i -e "s#/opt/python/cp311-cp311/include/python3.11#$inc#g" \
    -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$npinc#g" "${files[@]}"
}

build_upstream_subset() {
  # build_upstream_subset NAME VERSION "DEPENDENCIES" "WHAT" PATH TEXT [PATH TEXT ...]: the ament_cmake interface
  # package NAME (upstream's name and VERSION) holding only the definitions given (PATH relative to the package,
  # e.g. msg/TFMessage.msg, with its TEXT written as it is), depending on DEPENDENCIES (space-separated interface
  # packages), built into .venv: for interface packages published as no wheel (tf2_msgs, control_msgs).
  local name=$1 version=$2 deps=$3 what=$4
  shift 4
  local src=$MBS_VENV/build/$name/src bld=$MBS_VENV/build/$name/build files="" dep
  rm -rf "$MBS_VENV/build/$name"
  while [ $# -gt 0 ]; do
    mkdir -p "$src/$(dirname "$1")"
    printf '%s' "$2" > "$src/$1"
    files+=" \"$1\""
    shift 2
  done
  {
    printf '%s\n' '<?xml version="1.0"?>' '<package format="3">' "  <name>$name</name>" "  <version>$version</version>"
    printf '  <description>%s only, generated by mbs_ros tools/setup_env.sh from upstream'"'"'s definitions because\n' \
      "$what"
    printf '    %s is not published as a wheel.</description>\n' "$name"
    printf '%s\n' '  <maintainer email="mbs-ros@example.org">mbs_ros developers</maintainer>' \
      '  <license>BSD-3-Clause</license>' '  <buildtool_depend>ament_cmake</buildtool_depend>' \
      '  <buildtool_depend>rosidl_default_generators</buildtool_depend>'
    for dep in $deps; do printf '  <depend>%s</depend>\n' "$dep"; done
    printf '%s\n' '  <exec_depend>rosidl_default_runtime</exec_depend>' \
      '  <member_of_group>rosidl_interface_packages</member_of_group>' \
      '  <export>' '    <build_type>ament_cmake</build_type>' '  </export>' '</package>'
  } > "$src/package.xml"
  {
    printf '%s\n' 'cmake_minimum_required(VERSION 3.20)' "project($name)" 'find_package(ament_cmake REQUIRED)'
    for dep in $deps; do printf 'find_package(%s REQUIRED)\n' "$dep"; done
    printf '%s\n' 'find_package(rosidl_default_generators REQUIRED)' \
      "rosidl_generate_interfaces(\${PROJECT_NAME}$files DEPENDENCIES $deps)" \
      'ament_export_dependencies(rosidl_default_runtime)' 'ament_package()'
  } > "$src/CMakeLists.txt"
  cmake_install "$name" "$src" "$bld" "$MBS_VENV" "$MBS_VENV/bin/python" \
    "AMENT_PREFIX_PATH=$MBS_VENV" "CMAKE_PREFIX_PATH=$MBS_VENV"
}

build_tf2_msgs() {
  build_upstream_subset tf2_msgs 0.42.0 "builtin_interfaces geometry_msgs" "tf2_msgs/msg/TFMessage" \
    msg/TFMessage.msg "$TF2_DEFINITION"$'\n'
}

build_control_msgs() {
  # FollowJointTrajectory and the two messages it uses only (the definitions above)
  build_upstream_subset control_msgs 6.8.0 "action_msgs builtin_interfaces std_msgs trajectory_msgs" \
    "control_msgs/action/FollowJointTrajectory, control_msgs/msg/JointTolerance and control_msgs/msg/JointComponentTolerance" \
    action/FollowJointTrajectory.action "$CONTROL_MSGS_FOLLOW_JOINT_TRAJECTORY" \
    msg/JointTolerance.msg "$CONTROL_MSGS_JOINT_TOLERANCE" \
    msg/JointComponentTolerance.msg "$CONTROL_MSGS_JOINT_COMPONENT_TOLERANCE"
}

cmake_install() {
  # cmake_install NAME SRC BUILD PREFIX PYTHON [VAR=VALUE...] [-- CMAKE_ARGS...]: configures, builds and installs
  # the ament_cmake package in SRC into PREFIX with PYTHON, the VAR=VALUE pairs exported; log: BUILD.log.
  local name=$1 src=$2 bld=$3 prefix=$4 python=$5 t0=$SECONDS
  shift 5
  local vars=() args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  mkdir -p "$(dirname "$bld")"
  say "building $name into $prefix (log: $bld.log)"
  if ! (for v in "${vars[@]}"; do export "${v?}"; done
        cmake -S "$src" -B "$bld" -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_TESTING=OFF \
          -DPython3_EXECUTABLE="$python" -DCMAKE_BUILD_TYPE=Release "${args[@]}" &&
        cmake --build "$bld" -j "$(nproc 2>/dev/null || echo 2)" &&
        cmake --install "$bld") > "$bld.log" 2>&1; then
    tail -n 40 "$bld.log" >&2
    die "$name build failed (full log: $bld.log)"
  fi
  say "$name built in $((SECONDS - t0)) s"
}

build_mbs_ros_msgs() {
  # build_mbs_ros_msgs PREFIX PYTHON [VAR=VALUE...] [-- CMAKE_ARGS...]: mbs_ros_msgs/ of this checkout into
  # PREFIX, from a fresh build tree in PREFIX/build/mbs_ros_msgs. The files the previous build installed go
  # first, so that a renamed or removed .msg leaves no stale type behind.
  local prefix=$1 bld=$1/build/mbs_ros_msgs/build
  [ -f "$bld/install_manifest.txt" ] && xargs -r -d '\n' rm -f -- < "$bld/install_manifest.txt"
  rm -rf "$prefix/build/mbs_ros_msgs"
  cmake_install mbs_ros_msgs "$MBS_ROOT/mbs_ros_msgs" "$bld" "$@"
}

announced_type() {
  # announced_type MODULE CLASS [VAR=VALUE...]: publishes MODULE.CLASS with $MBS_PYTHON (in an environment with
  # the VAR=VALUE settings, loopback-only discovery and a domain of its own) and prints the topic type name and
  # type hash the rmw announces for it.
  local module=$1 cls=$2
  shift 2
  env "$@" ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST FASTDDS_BUILTIN_TRANSPORTS=UDPv4 \
    ROS_DOMAIN_ID=$(( $$ % 100 + 1 )) "$MBS_PYTHON" -c '
import importlib, sys
import rclpy
msg_type = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
topic = "/mbs_setup_check_" + sys.argv[1].split(".")[0]
rclpy.init()
node = rclpy.create_node("mbs_setup_type_check")
node.create_publisher(msg_type, topic, 1)
info = node.get_publishers_info_by_topic(topic)[0]
print(info.topic_type, info.topic_type_hash)
node.destroy_node()
rclpy.shutdown()' "$module" "$cls"
}

# A clean environment: nothing sourced, the venv alone.
CLEAN_ENV=(-u AMENT_PREFIX_PATH -u CMAKE_PREFIX_PATH)

check_tf2_msgs() {
  # From a clean environment, import it and read the type hash rmw announces for it.
  local got
  got=$(announced_type tf2_msgs.msg TFMessage "${CLEAN_ENV[@]}") ||
    die "tf2_msgs does not import or publish from $MBS_VENV"
  [ "${got#* }" = "$TF2_TYPE_HASH" ] ||
    die "tf2_msgs/msg/TFMessage type hash ${got#* } differs from upstream's $TF2_TYPE_HASH"
  say "tf2_msgs imports without sourcing anything; type hash is upstream's"
}

check_control_msgs() {
  # From a clean environment: every hash of CONTROL_MSGS_TYPE_HASHES is the one rosidl installed for the type
  # (share/control_msgs/*/*.json, the values compiled into the type support), and an action server of
  # FollowJointTrajectory imports, starts and announces its feedback topic with the table's hash.
  local got
  got=$(env "${CLEAN_ENV[@]}" ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST FASTDDS_BUILTIN_TRANSPORTS=UDPv4 \
    ROS_DOMAIN_ID=$(( $$ % 100 + 1 )) "$MBS_PYTHON" - "$MBS_VENV/share/control_msgs" "$CONTROL_MSGS_TYPE_HASHES" <<'PY'
import glob, json, sys
import rclpy
from rclpy.action import ActionServer
from control_msgs.action import FollowJointTrajectory

expected = dict(line.split() for line in sys.argv[2].splitlines() if line.strip())
built = {}
for path in glob.glob(sys.argv[1] + "/*/*.json"):
    for entry in json.load(open(path))["type_hashes"]:
        built[entry["type_name"]] = entry["hash_string"]
bad = [f"{name}: {built.get(name, 'not built')} instead of upstream's {h}" for name, h in expected.items()
       if built.get(name) != h]
rclpy.init()
node = rclpy.create_node("mbs_setup_type_check")
server = ActionServer(node, FollowJointTrajectory, "/mbs_setup_check_fjt", lambda goal: FollowJointTrajectory.Result())
info = node.get_publishers_info_by_topic("/mbs_setup_check_fjt/_action/feedback")
name = "control_msgs/action/FollowJointTrajectory_FeedbackMessage"
announced = [(i.topic_type, str(i.topic_type_hash)) for i in info]
if announced != [(name, expected[name])]:
    bad.append(f"the feedback topic of an action server announces {announced}, not [{name!r}, {expected[name]!r}]")
server.destroy()
node.destroy_node()
rclpy.shutdown()
print("\n".join(bad) if bad else f"ok {len(expected)}")
PY
  ) || die "control_msgs does not import or serve FollowJointTrajectory from $MBS_VENV"
  [ "$got" = "ok $(grep -c . <<<"$CONTROL_MSGS_TYPE_HASHES")" ] || die "control_msgs type hashes differ from upstream's:
$got"
  say "control_msgs (FollowJointTrajectory) imports without sourcing anything; ${got#ok } type hashes are upstream's"
}

check_mbs_ros_msgs() {
  # Import and publish EnergyPorts: in venv mode from a clean environment, in ros mode in the one
  # tools/env.sh makes (the distro's, with $MBS_PREFIX's python and lib dirs).
  local got env_args=()
  [ "$MBS_MODE" = venv ] && env_args=("${CLEAN_ENV[@]}")
  got=$(announced_type mbs_ros_msgs.msg EnergyPorts "${env_args[@]}") ||
    die "mbs_ros_msgs does not import or publish from $MBS_PREFIX (build log: $MBS_PREFIX/build/mbs_ros_msgs/build.log)"
  [ "${got%% *}" = mbs_ros_msgs/msg/EnergyPorts ] ||
    die "a publisher of mbs_ros_msgs.msg.EnergyPorts announces the type '${got%% *}'"
  env "${env_args[@]}" "$MBS_PYTHON" -c 'from mbs_ros_msgs.srv import Step; Step.Response(step_index=1)' ||
    die "mbs_ros_msgs.srv.Step does not import from $MBS_PREFIX (build log: $MBS_PREFIX/build/mbs_ros_msgs/build.log)"
  say "mbs_ros_msgs imports and publishes ${got%% *}; its Step service imports"
}

venv_setup() {
  local env_hash pkg_hash
  env_hash=$(hash_of requirements.txt requirements-dev.txt tools/setup_env.sh <(msgs_files) "${MSGS_FILES[@]}")
  pkg_hash=$(hash_of setup.py setup.cfg <(echo "$MBS_ROOT"))

  if [ ! -x "$MBS_VENV/bin/python" ]; then
    local py
    py=$(pick_python) || die "need Python >= 3.10 (3.11 for the ROS 2 wheels) as python3.11 or python3"
    "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
      say "warning: $py is not Python 3.11; the ROS 2 kilted wheels are published for CPython 3.11 only"
    say "creating $MBS_VENV with $("$py" --version 2>&1)"
    "$py" -m venv "$MBS_VENV" || die "could not create the venv (Debian/Ubuntu: apt-get install python3-venv)"
    rm -f "$MBS_VENV/.mbs_env_stamp" "$MBS_VENV/.mbs_pkg_stamp"
  fi

  if [ "$(cat "$MBS_VENV/.mbs_env_stamp" 2>/dev/null)" != "$env_hash" ]; then
    local t0=$SECONDS
    say "installing requirements-dev.txt into $MBS_VENV"
    pip_q install -q -r requirements-dev.txt
    check_build_tools
    patch_cmake_exports
    build_tf2_msgs
    check_tf2_msgs
    build_control_msgs
    check_control_msgs
    build_mbs_ros_msgs "$MBS_VENV" "$MBS_VENV/bin/python" "AMENT_PREFIX_PATH=$MBS_VENV" "CMAKE_PREFIX_PATH=$MBS_VENV"
    check_mbs_ros_msgs
    echo "$env_hash" > "$MBS_VENV/.mbs_env_stamp"
    rm -f "$MBS_VENV/.mbs_pkg_stamp"
    say "environment ready in $((SECONDS - t0)) s"
  fi

  if [ "$(cat "$MBS_VENV/.mbs_pkg_stamp" 2>/dev/null)" != "$pkg_hash" ]; then
    say "installing mbs_ros (editable) into $MBS_VENV"
    # --no-build-isolation: build with the venv's setuptools instead of fetching one; --no-deps: the
    # requirements above already hold the dependencies.
    pip_q install -q --no-deps --no-build-isolation -e .
    echo "$pkg_hash" > "$MBS_VENV/.mbs_pkg_stamp"
  fi
  link_share "$MBS_VENV"
}

warm_compiled() {
  # numba compiles the kernels (mbs_ros/dynamics/kernels, the contact solver's, the sensors', a series in
  # controllers/space.py) once (~100 s) into its on-disk cache next to the source; do it here so that no node or
  # test pays for it (mbs_ros/dynamics/kernels/jit.py locks the cache for those that still compile). numba
  # keys its cache on the file's mtime, so the stamp does too (a fresh clone or a checkout that touches the file
  # compiles again, here).
  local stamp=$1/.mbs_compiled_stamp h py=$2
  local sources=(mbs_ros/dynamics/kernels/*.py mbs_ros/dynamics/contact/*.py mbs_ros/sensors/suite.py
    mbs_ros/controllers/space.py mbs_ros/headless/fast.py mbs_ros/headless/run.py)
  h=$(hash_of "${sources[@]}" mbs_ros/dynamics/lie/_base.py \
    <(stat -c %Y "${sources[@]}"; "$py" -c 'import numba; print(numba.__version__)' 2>&1))
  [ "$(cat "$stamp" 2>/dev/null)" = "$h" ] && return 0
  "$py" -c 'import numba' 2>/dev/null || { say "warning: numba is not importable: the numpy reference kernels will be used (slow)"; return 0; }
  say "compiling the numba kernels into their on-disk cache"
  "$py" -c 'from mbs_ros.dynamics.kernels import compiled, contact_terms, derivatives, laws; from mbs_ros.controllers import space; from mbs_ros.headless import run; print(f"[setup] kernels ready in {compiled.warm_up() + derivatives.warm_up() + laws.warm_up() + contact_terms.warm_up() + space.warm_up() + run.warm_up():.1f} s")' ||
    die "the numba kernels did not compile"
  echo "$h" > "$stamp"
}

if [ "$MBS_MODE" = ros ]; then
  ros_setup
  warm_compiled "$MBS_PREFIX" "$MBS_PYTHON"
else
  venv_setup
  warm_compiled "$MBS_VENV" "$MBS_VENV/bin/python"
fi
