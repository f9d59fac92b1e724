"""gripper/command over ROS: the dynamics and controller nodes of uvms_grasp's robot (its scenario's parameters,
lockstep on simulation time, without its world and its payload: the arm swings down as in the scenario and the
fingers move in the water), a command [0.01] (10 mm half-opening) published once the controller subscribes. The fingers
reach it and stay there past the schedule's close (moved to 1.0 s; the topic took over for good: the schedule would have
squeezed them towards -0.02 m); a malformed command (max_effort above gripper_max_effort) is refused and counted in
the controller's ~/diagnostics. Every wait is on joint_states stamps (simulation time), with generous deadlines.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from mbs_ros.scenario.schema import load_scenario, node_specs  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running, stamp_of  # noqa: E402

TIMEOUT = 600.0  # per wait (a deadline, not a wait): two busy cores, 500 Hz lockstep in Python
FINGERS = ("alpha_finger_l_joint", "alpha_finger_r_joint")
TARGET = 0.01
SCHEDULED_CLOSE = 1.0  # gripper_times[1], moved from uvms_grasp's 3.0 s to keep the run short


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("gripper_command")
    specs = {s.role: s for s in node_specs(load_scenario("uvms_grasp"))}
    dyn = dict(specs["dynamics"].parameters)
    dyn.pop("world", None)  # no contact: the fingers close in the water, steps stay cheap
    ctl = dict(specs["controller"].parameters)
    for key in [k for k in ctl if k.startswith("payload_")]:  # no handle to carry
        del ctl[key]
    assert list(ctl["gripper_times"]) == [0.0, 3.0, 12.5]
    ctl["gripper_times"] = [0.0, SCHEDULED_CLOSE, 12.5]
    procs = [NodeProcess(specs[role].module, name=specs[role].name, namespace=specs[role].namespace,
                         parameters=params, log_file=logs / f"{role}.log")
             for role, params in (("dynamics", dyn), ("controller", ctl), ("reference", specs["reference"].parameters))]
    with running(procs):
        with Probe("test_gripper_command_probe", TIMEOUT) as probe:
            yield procs, probe, specs["controller"].namespace.strip("/")


def _topics(procs, probe, ns):
    """``(joint_states recorder, the controller's diagnostics values, gripper/command publisher)``, matched."""
    joints = Recorder(probe, JointState, f"/{ns}/joint_states", depth=100)
    diags = []
    probe.node.create_subscription(
        DiagnosticArray, f"/{ns}/controller_node/diagnostics",
        lambda m: diags.extend(cv.values_from_status(s) for s in m.status if s.name.endswith(": controller")), 100)
    pub = probe.node.create_publisher(Float64MultiArray, f"/{ns}/gripper/command", 10)
    probe.spin_until(lambda: pub.get_subscription_count() >= 1 and joints.messages,
                     what="the controller's gripper/command subscription and joint_states", alive=procs)
    return joints, diags, pub


def test_the_topic_drives_the_fingers_and_a_malformed_command_is_counted(nodes):
    procs, probe, ns = nodes
    joints, diags, pub = _topics(procs, probe, ns)

    def fingers(m):
        pos = dict(zip(m.name, m.position))
        return [pos[f] for f in FINGERS]

    assert all(abs(x - 0.025) < 1e-3 for x in fingers(joints.messages[-1]))  # open at the start
    pub.publish(Float64MultiArray(data=[0.0, 1.0e3]))  # max_effort above gripper_max_effort (15 N): refused
    pub.publish(Float64MultiArray(data=[TARGET]))
    sent = stamp_of(joints.messages[-1])
    # 15 mm at gripper_speed 50 mm/s: 0.3 s (0.9 s from the schedule's -0.02 m); past the schedule's close, and
    # 1.2 s after the command
    until = max(sent * 1e-9, SCHEDULED_CLOSE) + 1.2
    probe.spin_until(lambda: stamp_of(joints.messages[-1]) >= until * 1e9,
                     what=f"joint_states at {until:.2f} s (simulation time)", alive=procs)
    late = [m for m in joints.messages if stamp_of(m) >= (until - 0.2) * 1e9]
    assert late
    for m in late:  # held at the topic's target, not squeezed towards the schedule's -0.02 m
        assert all(abs(x - TARGET) < 1e-3 for x in fingers(m)), (stamp_of(m), fingers(m))
    probe.spin_until(lambda: any(d.get("rejected_gripper_command", 0) >= 1 and d.get("applied_gripper_command", 0)
                                 >= 1 for d in diags), what="/diagnostics counting the refused command",
                     alive=procs)
    d = next(d for d in reversed(diags) if d.get("applied_gripper_command", 0) >= 1)
    assert d["rejected_gripper_command"] == 1 and d["received_gripper_command"] == 2
    for p in procs:
        p.check_running()


def _fuzz_messages(rng, n):
    """``n`` gripper commands, mostly malformed: wrong lengths, NaN/Inf/huge values, positions far outside the
    fingers' range, negative or excessive efforts; some valid."""
    specials = [math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 0.0, 1e6, -1e6]
    out = []
    for _ in range(n):
        size = int(rng.choice([0, 1, 2, 2, 3, 7, 1000]))
        data = [float(rng.choice(specials)) if rng.random() < 0.5 else float(rng.uniform(-0.2, 0.2))
                for _ in range(size)]
        if size == 2 and rng.random() < 0.5:
            data[1] = float(rng.uniform(-20.0, 40.0))  # below 0 or above gripper_max_effort 15 N, or fine
        out.append(data)
    return out


def test_fuzzed_gripper_commands_never_kill_the_controller(nodes):
    """10⁴ seeded commands (mostly malformed) while the lockstep run goes on: the controller stays alive, counts
    refusals and no control error, every finger position published stays finite, and a last valid command is
    followed (the fingers reach 5 mm)."""
    procs, probe, ns = nodes
    joints, diags, pub = _topics(procs, probe, ns)
    rng = np.random.default_rng(30)
    messages = _fuzz_messages(rng, 10_000)
    for i, data in enumerate(messages):
        pub.publish(Float64MultiArray(data=data))
        if i % 20 == 0:
            probe.executor.spin_once(timeout_sec=0.001)
    for p in procs:
        p.check_running()
    pub.publish(Float64MultiArray(data=[0.005, 15.0]))
    sent = stamp_of(joints.messages[-1])
    until = sent * 1e-9 + 6.0  # from a fuzzed target within [-0.1, 0.125]: at most 0.12 m at 50 mm/s, 2.4 s
    probe.spin_until(lambda: stamp_of(joints.messages[-1]) >= until * 1e9,
                     what=f"joint_states at {until:.2f} s (simulation time)", alive=procs)
    for m in joints.messages:
        assert all(math.isfinite(x) for x in m.position) and all(math.isfinite(x) for x in m.velocity)
    pos = dict(zip(joints.messages[-1].name, joints.messages[-1].position))
    assert all(abs(pos[f] - 0.005) < 1e-3 for f in FINGERS), pos
    probe.spin_until(lambda: diags and diags[-1].get("received_gripper_command", 0) >= 3 + 1000,
                     what="~/diagnostics after the flood", alive=procs)
    d = diags[-1]
    print(f"gripper/command fuzz: {len(messages)} sent; controller counts received "
          f"{d['received_gripper_command']}, rejected {d['rejected_gripper_command']}, applied "
          f"{d['applied_gripper_command']}, control_errors {d['control_errors']}")
    assert d["rejected_gripper_command"] > 1000 and d["control_errors"] == 0, d
    for p in procs:
        p.check_running()
    assert "Traceback" not in procs[1].log_text()
