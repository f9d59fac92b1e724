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
#      and checks that its type hash is upstream's, so real tf2/RViz peers accept our /tf; then builds our own
#      interface package mbs_ros_msgs/ (EnergyPorts) the same way and checks that it imports and publishes;
#   4. pip installs this package editable, without touching the network;
#   5. links .venv/share/mbs_ros/{package.xml,launch,config} and the ament index entry to this checkout.
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
  missing=$(unimportable rclpy numpy scipy transforms3d yaml tf2_msgs.msg geometry_msgs.msg ament_index_python \
    urdf_parser_py xacro pytest sympy)
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

build_tf2_msgs() {
  local src=$MBS_VENV/build/tf2_msgs/src bld=$MBS_VENV/build/tf2_msgs/build
  rm -rf "$MBS_VENV/build/tf2_msgs"
  mkdir -p "$src/msg"
  printf '%s\n' "$TF2_DEFINITION" > "$src/msg/TFMessage.msg"
  cat > "$src/package.xml" <<'XML'
<?xml version="1.0"?>
<package format="3">
  <name>tf2_msgs</name>
  <version>0.42.0</version>
  <description>tf2_msgs/msg/TFMessage only, generated by mbs_ros tools/setup_env.sh from upstream's definition
    because tf2_msgs is not published as a wheel.</description>
  <maintainer email="mbs-ros@example.org">mbs_ros developers</maintainer>
  <license>BSD-3-Clause</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
  <depend>builtin_interfaces</depend>
  <depend>geometry_msgs</depend>
  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>
  <export>
    <build_type>ament_cmake</build_type>
  </export>
</package>
XML
  cat > "$src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(tf2_msgs)
find_package(ament_cmake REQUIRED)
find_package(builtin_interfaces REQUIRED)
find_package(geometry_msgs REQUIRED)
find_package(rosidl_default_generators REQUIRED)
rosidl_generate_interfaces(${PROJECT_NAME} "msg/TFMessage.msg" DEPENDENCIES builtin_interfaces geometry_msgs)
ament_export_dependencies(rosidl_default_runtime)
ament_package()
CMAKE
  cmake_install tf2_msgs "$src" "$bld" "$MBS_VENV" "$MBS_VENV/bin/python" \
    "AMENT_PREFIX_PATH=$MBS_VENV" "CMAKE_PREFIX_PATH=$MBS_VENV"
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
  # numba compiles the kernels of mbs_ros/dynamics/compiled.py (and one series in controllers/space.py) once (~20 s) into its on-disk cache next to the
  # source; do it here so that no node or test pays for it. numba keys its cache on the file's mtime, so the
  # stamp does too (a fresh clone or a checkout that touches the file compiles again, here).
  local stamp=$1/.mbs_compiled_stamp h py=$2
  local sources=(mbs_ros/dynamics/compiled.py mbs_ros/controllers/space.py)
  h=$(hash_of "${sources[@]}" mbs_ros/dynamics/lie/_base.py \
    <(stat -c %Y "${sources[@]}"; "$py" -c 'import numba; print(numba.__version__)' 2>&1))
  [ "$(cat "$stamp" 2>/dev/null)" = "$h" ] && return 0
  "$py" -c 'import numba' 2>/dev/null || { say "warning: numba is not importable: the numpy reference kernels will be used (slow)"; return 0; }
  say "compiling the numba kernels into their on-disk cache"
  "$py" -c 'from mbs_ros.dynamics import compiled; print(f"[setup] kernels ready in {compiled.warm_up():.1f} s")' ||
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
