"""Packaging checks: package.xml is valid, declares what the code imports, and colcon sees an ament_python
package (colcon silently falls back to a plain Python package when catkin_pkg rejects package.xml)."""

import ast
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_XML = ROOT / "package.xml"

# Top-level Python module -> rosdep key, for modules whose key is not the module name itself.
MODULE_TO_KEY = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "numba": "python3-numba",
    "transforms3d": "python3-transforms3d",
    "yaml": "python3-yaml",
    "pytest": "python3-pytest",
    "_pytest": "python3-pytest",  # pytest's own implementation package (tools/tolerance_audit.py hooks into it)
    "sympy": "python3-sympy",
    "catkin_pkg": "python3-catkin-pkg",
    "setuptools": "python3-setuptools",
    "matplotlib": "python3-matplotlib",
    "mpmath": "python3-sympy",  # no rosdep key of its own; sympy requires it on every platform
    "pinocchio": "pinocchio",
    "urdf_parser_py": "urdfdom_py",
    "mcap": "mcap-ros2-support",  # no key of its own; mcap-ros2-support (pip) requires it
    "mcap_ros2": "mcap-ros2-support",
    "tqdm": "python3-tqdm",
    "rosbags": "python3-rosbags-pip",
    "threadpoolctl": "python3-threadpoolctl",
    "greenlet": "python3-greenlet",  # a lockstep contact step resumed across callbacks (mbs_ros/cores/work.py)
    "psutil": "python3-psutil",
    "example_robot_data": "example-robot-data",
    "mujoco": "python3-mujoco-pip",  # pip: mujoco (no distro package)
    "mpl_toolkits": "python3-matplotlib",  # part of matplotlib (3D axes of the animation)
    "PIL": "python3-pil",  # Pillow: GIF frames of the animation
    "foxglove": "python3-foxglove-sdk-pip",  # pip: foxglove-sdk (no distro package), the live view's server
    "websockets": "python3-websockets",  # the Foxglove test's WebSocket client
    "trimesh": "python3-trimesh",  # the animation's mesh visuals
    "allantools": "python3-allantools-pip",  # pip: allantools (no distro package), the IMU's Allan deviations
    "pyarrow": "python3-pyarrow-pip",  # pip: pyarrow, the campaigns' result tables
    "ray": "python3-ray-pip",  # pip: ray (no distro package), the campaigns' optional Ray engine
    "control": "python3-control-pip",  # pip: control (python-control), the linear models' StateSpace export
}
# ROS packages whose Python module has the package's name (besides *_msgs, *_srvs and *_interfaces).
ROS_MODULES = {
    "rclpy", "ament_index_python", "launch", "launch_ros", "launch_testing", "launch_testing_ros",
    "launch_pytest", "tf2_ros", "rosbag2_py", "xacro",
    "coal",  # Coal (Pinocchio's collision library): a ROS package in humble..rolling, PyPI: coal
}


def rosdep_key(module):
    """The rosdep key providing top-level `module`, or None when this file does not know it."""
    if module in MODULE_TO_KEY:
        return MODULE_TO_KEY[module]
    if module in ROS_MODULES or module.endswith(("_msgs", "_srvs", "_interfaces")):
        return module
    return None


def declared(*tags):
    root = ET.parse(PACKAGE_XML).getroot()
    return {el.text.strip() for tag in tags for el in root.iter(tag)}


def imported_modules(path):
    """Top-level names of the absolute imports in `path`, and of pytest.importorskip("...") calls."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "importorskip" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.args[0].value.split(".")[0], node.lineno


# The benchmark (python -m mbs_ros.bench) ships in the package but compares with Pinocchio and MuJoCo, which are
# test dependencies, never runtime ones: its imports are held to the test scope.
BENCH = Path("mbs_ros") / "bench"
# The campaign's pytest helper (assert_campaign, campaign_fixture) runs inside a project's tests: pytest is a test
# dependency of whoever calls it, so its imports are held to the test scope as well.
CAMPAIGN_TESTING = Path("mbs_ros") / "campaign" / "testing.py"
# The repository's tools/ (python -m tools.NAME from the checkout; not installed) are developer and comparison
# scripts that tests import (test_contact_closed_forms: tools.contact_vs_mujoco): a local package in the test
# scope, whose own imports are held to it.
TOOLS = Path("tools")


def python_files(*relative, exclude=()):
    for rel in relative:
        path = ROOT / rel
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts
                              and not any(p.is_relative_to(ROOT / e) for e in exclude))


# (files, dependency tags that may provide their imports)
SCOPES = {
    "runtime": (("mbs_ros", "launch"), ("depend", "exec_depend")),
    "build": (("setup.py",), ("depend", "build_depend", "buildtool_depend")),
    "test": (("test", BENCH, CAMPAIGN_TESTING, TOOLS), ("depend", "exec_depend", "test_depend")),
}
EXCLUDE = {"runtime": (BENCH, CAMPAIGN_TESTING)}


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_every_import_is_a_declared_dependency(scope):
    dirs, tags = SCOPES[scope]
    allowed = declared(*tags)
    files = list(python_files(*dirs, exclude=EXCLUDE.get(scope, ())))
    own = {"mbs_ros"} | {p.stem for p in files if p.is_relative_to(ROOT / "test")}
    own |= {TOOLS.name for p in files if p.is_relative_to(ROOT / TOOLS)}  # only where its files are checked
    problems = []
    for path in files:
        for module, line in imported_modules(path):
            if module in sys.stdlib_module_names or module in own:
                continue
            key = rosdep_key(module)
            where = f"{path.relative_to(ROOT)}:{line}"
            if key is None:
                problems.append(f"{where}: imports '{module}', whose rosdep key test_package.py does not know: "
                                f"add it to MODULE_TO_KEY and declare it in package.xml")
            elif key not in allowed:
                problems.append(f"{where}: imports '{module}', but package.xml declares no "
                                f"<{tags[-1]}>{key}</{tags[-1]}>")
    assert not problems, "\n".join(problems)


def test_package_xml_is_valid_format_3():
    package = pytest.importorskip("catkin_pkg.package", reason="catkin_pkg not installed (make setup installs it)")
    warnings = []
    pkg = package.parse_package(str(PACKAGE_XML), warnings=warnings)
    pkg.validate()  # raises InvalidPackage, e.g. for a maintainer e-mail catkin_pkg rejects
    assert warnings == []
    assert pkg.package_format == 3
    assert pkg.name == "mbs_ros"
    assert [e.content for e in pkg.exports if e.tagname == "build_type"] == ["ament_python"]

    setup_call = next(n for n in ast.walk(ast.parse((ROOT / "setup.py").read_text()))
                      if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "setup")
    setup_version = next(k.value.value for k in setup_call.keywords if k.arg == "version")
    assert setup_version == pkg.version, "setup.py and package.xml disagree on the version"


def _colcon():
    beside_python = Path(sys.executable).parent / "colcon"  # a venv's colcon, even when not on PATH
    return str(beside_python) if beside_python.exists() else shutil.which("colcon")


def test_colcon_identifies_ros_ament_python(tmp_path):
    colcon = _colcon()
    if colcon is None:
        pytest.skip("colcon not installed (`make build` installs it into .venv; a ROS 2 install has it)")
    env = dict(os.environ, COLCON_LOG_PATH=str(tmp_path))
    out = subprocess.run([colcon, "list", "--base-paths", str(ROOT)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [line.split("\t") for line in out.stdout.splitlines() if line.strip()]
    # Exactly one package: the prefixes inside the checkout (.venv, build/dev_prefix) carry COLCON_IGNORE.
    assert rows == [["mbs_ros", str(ROOT), "(ros.ament_python)"]], out.stdout
