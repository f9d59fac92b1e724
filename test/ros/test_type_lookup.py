"""The suite's nodes run without Fast DDS's XTypes type lookup (config/fastdds/profile.xml, mbs_ros/dds.py).

Fast DDS 3.2.3 crashed about one node start in 500 (SIGSEGV in ``TypeLookupManager::notify_callbacks`` on the
type-lookup reply thread). Here a controller runs under gdb beside a dynamics node, with breakpoints that count the
calls that send a type request and that process a reply, until the controller has its first state:

- without the profile (the control): the controller asks for types, so the counting works and the race's code runs;
- with it (the suite's environment, set by conftest.py): neither call happens once.

Skipped without gdb.
"""

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from mbs_ros.dds import PROFILE_VARIABLE  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "config" / "uvms_6dof.yaml"
TIMEOUT = 240.0  # a deadline: python and Fast DDS start under gdb on two busy cores
# the Fast DDS functions that send a type request and that process a type reply (libfastdds 3.2)
CALLS = {"request": "eprosima::fastdds::dds::builtin::TypeLookupManager::get_type_dependencies",
         "reply": "eprosima::fastdds::dds::builtin::TypeLookupReplyListener::check_get_types_reply"}
GDB = shutil.which("gdb")


def _script(path: Path) -> Path:
    lines = ["set pagination off", "set breakpoint pending on", "set confirm off"]
    for key, function in CALLS.items():
        lines += [f"break {function}", "commands", "silent", f'printf "TYPE-LOOKUP {key}\\n"', "continue", "end"]
    lines.append("run")
    path.write_text("\n".join(lines) + "\n")
    return path


def _count_lookups(tmp_path: Path, namespace: str, env) -> dict:
    """Type-lookup calls in a controller started under gdb beside a dynamics node, up to its first state."""
    ros_env_defaults()
    script = _script(tmp_path / f"{namespace}.gdb")
    gdb_prefix = [GDB, "-q", "-batch", "-x", str(script), "--args"]
    procs = {
        "dynamics": NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace=namespace,
                                params_file=PARAMS, env=env, log_file=tmp_path / f"{namespace}_dynamics.log"),
        "controller": NodeProcess(gdb_prefix + [sys.executable, "-m", "mbs_ros.nodes.controller_node"],
                                  name="controller_node", namespace=namespace, params_file=PARAMS, env=env,
                                  log_file=tmp_path / f"{namespace}_controller.log", label=f"{namespace}/gdb"),
    }
    with running(procs):
        ctl = procs["controller"]
        assert ctl.wait_for_log("first state", timeout=TIMEOUT), ctl.log_tail()
        text = ctl.log_text()
    assert all(f"Breakpoint {i}" in text for i in (1, 2)), text[-3000:]
    return {key: len(re.findall(rf"^TYPE-LOOKUP {key}$", text, flags=re.M)) for key in CALLS}


@pytest.mark.skipif(GDB is None, reason="gdb is not installed: the test counts Fast DDS calls with breakpoints")
def test_the_suites_nodes_never_run_the_type_lookup_that_crashed(tmp_path):
    assert os.environ.get(PROFILE_VARIABLE), "conftest.py did not set the Fast DDS profile"
    control = _count_lookups(tmp_path, "with_lookup", env={PROFILE_VARIABLE: None})
    assert control["request"] > 0 and control["reply"] > 0, \
        f"the control run made no type lookup {control}: the breakpoints do not observe it"
    suite = _count_lookups(tmp_path, "without_lookup", env=None)
    assert suite == {"request": 0, "reply": 0}, f"type lookups with the suite's profile: {suite}"
