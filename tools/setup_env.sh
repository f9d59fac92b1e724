#!/usr/bin/env bash
# Sets up the environment `make test` and `make demo` run in (called by `make setup`). Idempotent: a second
# run does no network work and takes about a second.
#
# With a sourced ROS 2 (see tools/env.sh): checks that the distro provides what package.xml declares and
# links build/dev_prefix/share/mbs_ros to this checkout. Creates no venv.
#
# Without ROS 2: creates .venv and
#   1. pip installs requirements-dev.txt (ROS 2 kilted wheels, numerics, test tools, interface build tools);
#   2. patches the wheels' exported cmake files, which name the wheel builder's Python and numpy include dirs;
#   3. builds tf2_msgs (on no reachable registry) into .venv with cmake, from upstream's one-line definition,
#      and checks that its type hash is upstream's, so real tf2/RViz peers accept our /tf;
#   4. pip installs this package editable, without touching the network;
#   5. links .venv/share/mbs_ros/{package.xml,launch,config} and the ament index entry to this checkout.
# Steps 1-3 are skipped while .venv/.mbs_env_stamp matches a hash of the requirement files and this script,
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
    rosdep install --from-paths $MBS_ROOT --ignore-src -y
or run without ROS: MBS_ENV=venv make test"
  fi
  link_share "$MBS_PREFIX"
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

check_build_tools() {
  command -v c++ >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 ||
    die "a C/C++ compiler is needed to build tf2_msgs (Debian/Ubuntu: apt-get install build-essential)"
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
  say "building tf2_msgs into $MBS_VENV (log: $bld.log)"
  local t0=$SECONDS
  if ! (export AMENT_PREFIX_PATH=$MBS_VENV CMAKE_PREFIX_PATH=$MBS_VENV
        cmake -S "$src" -B "$bld" -DCMAKE_INSTALL_PREFIX="$MBS_VENV" -DBUILD_TESTING=OFF \
          -DPython3_EXECUTABLE="$MBS_VENV/bin/python" -DCMAKE_BUILD_TYPE=Release &&
        cmake --build "$bld" -j "$(nproc 2>/dev/null || echo 2)" &&
        cmake --install "$bld") > "$bld.log" 2>&1; then
    tail -n 40 "$bld.log" >&2
    die "tf2_msgs build failed (full log: $bld.log)"
  fi
  say "tf2_msgs built in $((SECONDS - t0)) s"
}

check_tf2_msgs() {
  # From a clean environment (nothing sourced), import it and read the type hash rmw announces for it.
  local got
  got=$(env -u AMENT_PREFIX_PATH -u CMAKE_PREFIX_PATH ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST \
    FASTDDS_BUILTIN_TRANSPORTS=UDPv4 ROS_DOMAIN_ID=$(( $$ % 100 + 1 )) "$MBS_VENV/bin/python" -c '
import rclpy
from tf2_msgs.msg import TFMessage
rclpy.init()
node = rclpy.create_node("mbs_setup_tf2_msgs_check")
node.create_publisher(TFMessage, "/mbs_setup_tf2_msgs_check", 1)
print(node.get_publishers_info_by_topic("/mbs_setup_tf2_msgs_check")[0].topic_type_hash)
node.destroy_node()
rclpy.shutdown()') || die "tf2_msgs does not import or publish from $MBS_VENV"
  [ "$got" = "$TF2_TYPE_HASH" ] || die "tf2_msgs/msg/TFMessage type hash $got differs from upstream's $TF2_TYPE_HASH"
  say "tf2_msgs imports without sourcing anything; type hash is upstream's"
}

venv_setup() {
  local env_hash pkg_hash
  env_hash=$(hash_of requirements.txt requirements-dev.txt tools/setup_env.sh)
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
