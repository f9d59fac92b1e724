"""The nodes' ``joint_armature`` parameter, in real processes: a robot whose hand moves massless links is refused
with one line that suggests the parameter, and with it the dynamics node runs the robot with every joint moving
(none locked), publishing finite joint states."""
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # test/unit's shared helpers
from process_helpers import run_to_exit  # noqa: E402
import urdf_text  # noqa: E402
from urdf_text import joint, robot  # noqa: E402


def link(name, mass=None, xyz="0 0 0"):
    return urdf_text.link(name, mass, 'ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"', xyz)


def massless_hand():
    """An arm (j1 -> l1, 1 kg) carrying a 'hand' whose two joints move links without <inertial>."""
    return robot(link("base_link", 5.0), link("l1", 1.0, xyz="0.25 0 0"), link("palm"), link("finger"),
                 joint("j1", "base_link", "l1"),
                 joint("wrist", "l1", "palm", axis="1 0 0", xyz="0.5 0 0",
                       limit='lower="-1" upper="1" effort="1" velocity="1"'),
                 joint("finger_joint", "palm", "finger", xyz="0.05 0 0"))


@pytest.mark.parametrize("module", ["mbs_ros.nodes.dynamics_node", "mbs_ros.nodes.controller_node"])
def test_a_massless_hand_is_refused_with_one_line_suggesting_joint_armature(tmp_path, module):
    path = tmp_path / "hand.urdf"
    path.write_text(massless_hand())
    rc, out = run_to_exit([sys.executable, "-m", module, "--ros-args", "-p", f"model_file:={path}"], cwd=ROOT)
    fatal = [line for line in out.splitlines() if "FATAL" in line]
    assert rc == 2, out
    assert len(fatal) == 1 and "joint_armature" in fatal[0] and "'finger_joint'" in fatal[0], out


def test_the_dynamics_node_runs_a_massless_hand_with_joint_armature(tmp_path):
    from mbs_ros.process import NodeProcess

    path = tmp_path / "hand.urdf"
    path.write_text(massless_hand())
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="armature_node", namespace="armature",
                       parameters=dict(model_file=str(path), physics_rate=100.0, joint_armature=[0.01],
                                       initial_joint_velocities=[0.0, 0.5, -0.5]),
                       log_file=tmp_path / "armature.log")
    pytest.importorskip("rclpy")
    from sensor_msgs.msg import JointState

    from ros_helpers import Probe, Recorder

    proc.start()
    try:
        assert proc.wait_for_log("rk4 at 100 Hz", timeout=120), proc.log_text()
        with Probe("test_armature_probe", 60.0) as probe:
            joints = Recorder(probe, JointState, "/armature/joint_states")
            # the massless joints move: with armature only, each keeps its rate (nothing couples them to gravity)
            probe.spin_until(lambda: any(abs(m.position[2]) > 0.05 for m in joints.messages),
                             what="the finger joint moving", alive=[proc])
    finally:
        rc = proc.stop()
    assert rc == 0, proc.log_text()
    m = joints.messages[-1]
    assert list(m.name) == ["j1", "wrist", "finger_joint"]
    assert all(math.isfinite(x) for x in [*m.position, *m.velocity, *m.effort])
