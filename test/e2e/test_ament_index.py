"""The ament prefixes that provide mbs_ros are complete ones: ``ros2 run`` and launch_ros start a package's
executables from ``<prefix>/lib/<package>`` of the prefix where ``ament_index_python`` finds the package, and
a prefix with ``share/mbs_ros`` but no ``lib/mbs_ros`` made every launched node fail with "libexec directory
'…/.venv/lib/mbs_ros' does not exist".

- The prefix the ament index gives for mbs_ros (here: ``tools/env.sh``'s, ``.venv`` or ``build/dev_prefix``) holds
  every console script of setup.py as an executable there, and the node executables run (``--help``).
- After ``make build``: colcon's ``install/mbs_ros`` holds them too, and with ``install/setup.bash`` sourced,
  ``tools/in_env.sh`` keeps that overlay first on ``AMENT_PREFIX_PATH``.
- A sourced overlay providing mbs_ros comes before ours; any other prefix on the path comes after ours.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ament = pytest.importorskip("ament_index_python.packages")

ROOT = Path(__file__).resolve().parents[2]
NODES = ("dynamics_node", "controller_node", "reference_node")
TIMEOUT = 120.0  # interpreter starts on a loaded 2-core machine


def console_scripts():
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup":
            entry = ast.literal_eval(next(k.value for k in node.keywords if k.arg == "entry_points"))
            return [line.split("=")[0].strip() for line in entry["console_scripts"]]
    raise AssertionError("no setup() call in setup.py")


def check_libexec(prefix: Path):
    libexec = prefix / "lib" / "mbs_ros"
    assert libexec.is_dir(), f"{prefix} provides mbs_ros but has no {libexec}"
    missing = [n for n in console_scripts() if not os.access(libexec / n, os.X_OK)]
    assert not missing, f"{libexec}: no executable {missing} (present: {sorted(os.listdir(libexec))})"
    assert set(NODES) <= set(console_scripts())


def in_env(code, ament_prefix_path):
    env = dict(os.environ, AMENT_PREFIX_PATH=ament_prefix_path)
    p = subprocess.run(["bash", str(ROOT / "tools" / "in_env.sh"), "python", "-c", code], env=env,
                       capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


PREFIX_OF_MBS_ROS = "from ament_index_python.packages import get_package_prefix as g; print(g('mbs_ros'))"
PATH = "import os; print(os.environ['AMENT_PREFIX_PATH'])"


def env_prefix() -> Path:
    """tools/env.sh's prefix (MBS_PREFIX, exported by in_env.sh), or this venv's for a pytest started from it."""
    if os.environ.get("MBS_PREFIX"):
        return Path(os.environ["MBS_PREFIX"])
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    pytest.skip("neither tools/in_env.sh's environment nor a venv")


def test_the_prefix_the_index_gives_has_the_executables():
    prefix = Path(ament.get_package_prefix("mbs_ros"))
    check_libexec(prefix)
    for node in NODES:  # what launch_ros runs: <prefix>/lib/mbs_ros/<executable>
        p = subprocess.run([str(prefix / "lib" / "mbs_ros" / node), "--help"], capture_output=True, text=True,
                           timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        assert p.returncode == 0 and f"ros2 run mbs_ros {node}" in p.stdout, p.stdout + p.stderr


def test_our_prefix_has_the_executables():
    prefix = env_prefix()
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "mbs_ros").exists()
    check_libexec(prefix)


def test_colcon_install_has_the_executables_and_comes_first():
    install = ROOT / "install"
    if not (install / "mbs_ros").is_dir():
        pytest.skip("no colcon build here (make build makes install/)")
    check_libexec(install / "mbs_ros")
    # what `source install/setup.bash` puts on the path (colcon's isolated layout: one prefix per package)
    sourced = os.pathsep.join(str(install / p) for p in ("mbs_ros", "mbs_ros_msgs"))
    assert Path(in_env(PREFIX_OF_MBS_ROS, sourced)) == install / "mbs_ros"


def test_a_sourced_overlay_comes_before_ours_and_anything_else_after(tmp_path):
    ours = env_prefix()
    overlay = tmp_path / "overlay"
    (overlay / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (overlay / "share" / "ament_index" / "resource_index" / "packages" / "mbs_ros").write_text("")
    other = tmp_path / "other"  # an underlay without mbs_ros (a ROS distro, another workspace)
    other.mkdir()
    path = in_env(PATH, f"{overlay}{os.pathsep}{other}").split(os.pathsep)
    assert path.index(str(overlay)) < path.index(str(ours))
    assert Path(in_env(PREFIX_OF_MBS_ROS, f"{overlay}{os.pathsep}{other}")) == overlay
    path = in_env(PATH, str(other)).split(os.pathsep)
    assert path.index(str(ours)) < path.index(str(other))
    assert Path(in_env(PREFIX_OF_MBS_ROS, str(other))) == ours


# ------------------------------------------------------------------- python -m mbs_ros.bringup.launch_file


def _has_launch():
    p = subprocess.run([sys.executable, "-c", "import launch, launch_ros; launch.LaunchService"], cwd=ROOT,
                       capture_output=True, timeout=TIMEOUT)
    return p.returncode == 0


def test_launch_file_without_launch_says_so(tmp_path):
    if _has_launch():
        pytest.skip("launch is installed here (the run below covers it)")
    p = subprocess.run([sys.executable, "-m", "mbs_ros.bringup.launch_file", "rigid_body.launch.py"], cwd=ROOT,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 2 and "launch is not installed" in p.stderr, p.stderr


def test_launch_file_runs_a_node_from_our_prefix(tmp_path):
    """The real launch and launch_ros start the dynamics node from the ament index's prefix (here without a
    colcon build: .venv/lib/mbs_ros), and Ctrl-C stops it cleanly."""
    import signal
    import time

    if not _has_launch():
        pytest.skip("launch and launch_ros are not installed (not on PyPI: README, \"ROS-native\")")
    log = tmp_path / "launch.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mbs_ros.bringup.launch_file", "rigid_body.launch.py",
                                 "namespace:=launch_file_test"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + TIMEOUT
            while "rk4 at 1000 Hz" not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=60) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = log.read_text()
    assert "/lib/mbs_ros/dynamics_node" in text or "process started" in text, text
    assert "process has finished cleanly" in text and "libexec" not in text, text
