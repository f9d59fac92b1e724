"""Integration tests of the dynamics node: real node processes, real topics and services.

All node processes are started at once by one module fixture (start-up and discovery overlap) and
stopped at the end. The test process talks to them through its own rclpy context. Never a fixed sleep:
every wait is for a graph match, a message, a log line or a process exit, with a timeout.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.srv import GetParameters, SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mbs_ros.dynamics import Model, step  # noqa: E402
from mbs_ros.dynamics.simulation.simulator import Simulator, WrenchCommand  # noqa: E402
from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NODE = "mbs_ros.nodes.dynamics_node"
NAME = "dynamics_node"
TIMEOUT = 120.0  # per wait (a deadline, not a wait): late DDS joiners, parallel test workers, two busy cores

# /profile: SE(3) body with every complication: c.o.m. offset, full inertia, gravity, initial twist.
PROFILE = dict(
    base_group="se3", mass=1.3, inertia=[0.05, 0.001, -0.002, 0.07, 0.003, 0.09], com=[0.02, -0.01, 0.03],
    gravity=[0.0, 0.0, -9.81], integrator="rk4", physics_rate=500.0, publish_rate=50.0, diagnostics_rate=10.0,
    initial_position=[0.0, 0.0, 1.0], initial_rpy=[0.1, -0.2, 0.3], initial_twist=[0.1, 0.0, 0.2, 0.3, -0.5, 1.0],
    cmd_timeout=0.0,
)
# /planar: SE(2) body, used for dropping, parameters, reset/pause and TF.
PLANAR = dict(
    base_group="se2", mass=2.0, inertia=[0.1, 0.0, 0.0, 0.1, 0.0, 0.2], com=[0.05, 0.0, 0.0],
    physics_rate=500.0, publish_rate=50.0, diagnostics_rate=20.0, initial_position=[1.0, 2.0, 0.0],
    initial_rpy=[0.0, 0.0, 0.5], initial_twist=[0.2, 0.0, 0.0, 0.0, 0.0, 0.1], cmd_timeout=0.0,
)
INVALID = {
    "negative_mass": (dict(mass=-1.0), "mass"),
    "inertia_not_pd": (dict(inertia=[0.1, 0.0, 0.0, -0.1, 0.0, 0.1]), "positive definite"),
    "publish_too_fast": (dict(physics_rate=100.0, publish_rate=200.0), "must not exceed physics_rate"),
    "unknown_group": (dict(base_group="se4"), "base_group must be one of"),
    # the true-model perturbations of campaigns: a link count the robot does not have, a seed that is no whole number
    "link_scales": (dict(model_file=str(Path(__file__).resolve().parents[2] / "config" / "robots" / "uvms_6dof.yaml"),
                         link_mass_scales=[1.0, 1.0]), "link_mass_scales must have one factor per link (9: vehicle"),
    "sensor_seed": (dict(sensor_seed=1.5), "sensor_seed must be a whole number, got 1.5"),
}


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("node_logs")

    def make(ns, params):
        return NodeProcess(NODE, name=NAME, namespace=ns, parameters=params, log_file=logs / f"{ns}.log")

    procs = {
        "profile": make("profile", PROFILE),
        "planar": make("planar", PLANAR),
        "sigterm": make("sigterm", {}),
        "triangle": make("triangle", dict(inertia=[1.0, 0.0, 0.0, 1.0, 0.0, 3.0])),
        "fifo": make("fifo", dict(thread_priority=20.0)),
    }
    procs.update({k: make(k, params) for k, (params, _reason) in INVALID.items()})
    with running(procs):
        yield procs


@pytest.fixture(scope="module")
def probe(nodes):
    with Probe("test_dynamics_probe", TIMEOUT) as p:
        yield p


def wait_for_node(probe, proc, ns):
    """Wait until the node at ``/ns`` is discovered and publishing odom; return its odom recorder."""
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    probe.spin_until(lambda: odom.sub.get_publisher_count() > 0 and len(odom) > 0, what=f"/{ns}/odom",
                     alive=[proc])
    return odom


def model_of(params):
    I = params["inertia"]
    return Model.rigid_body(
        base=params["base_group"], mass=params["mass"],
        inertia=np.array([[I[0], I[1], I[2]], [I[1], I[3], I[4]], [I[2], I[4], I[5]]]),
        com=np.array(params["com"]), gravity=np.array(params.get("gravity", [0.0, 0.0, -9.81])))


def tau_of(model, frame_kind, W):
    """The generalized force the node applies for a wrench held in the body or the world axes."""
    W = np.array(W, dtype=float)
    if not np.any(W):
        return np.zeros(model.nv)
    if frame_kind == "body":
        return lambda t, q, v: model.wrench_to_generalized(q, W)[0]
    return lambda t, q, v: model.wrench_to_generalized(
        q, cv.rotate_wrench(cv.rotation_matrix(model.pose(q)[1]).T, W))[0]


def send(pub, W, frame=""):
    pub.publish(cv.wrench_stamped_msg(0, frame, W))


# --------------------------------------------------------------------------------------------- tests


def test_wrench_profile_matches_simulate(probe, nodes):
    """The published odometry equals step() run here with the applied-wrench history, to 1e-9."""
    proc = nodes["profile"]
    odom = wait_for_node(probe, proc, "profile")
    wrench = Recorder(probe, WrenchStamped, "/profile/wrench")
    pub = probe.node.create_publisher(WrenchStamped, "/profile/cmd_wrench", 10)
    probe.spin_until(lambda: pub.get_subscription_count() > 0 and wrench.sub.get_publisher_count() > 0
                     and len(wrench) > 0, what="/profile/cmd_wrench and /profile/wrench", alive=[proc])
    profile = [
        ([0.0, 0.0, 15.0, 0.0, 0.0, 0.0], ""),
        ([1.0, -0.5, 12.0, 0.02, -0.01, 0.03], "base_link"),
        ([0.5, 0.5, 13.0, 0.0, 0.0, 0.05], "world"),
        ([0.0, 0.3, 0.0, 0.05, 0.0, 0.0], "profile/base_link"),
        ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], ""),
    ]

    def odom_after(stamp_ns):
        # by stamp, not by arrival: under load odometry published before a wrench can arrive after its echo
        return sum(1 for m in odom.messages if cv.ns_from_time(m.header.stamp) > stamp_ns)

    for W, frame in profile:
        send(pub, W, frame)
        held_in = "world" if frame == "world" else "profile/base_link"
        probe.spin_until(lambda: wrench.messages[-1].header.frame_id == held_in
                         and np.array_equal(cv.wrench_from_msg(wrench.messages[-1].wrench), W),
                         what=f"wrench {W} ({frame or 'body'}) applied", alive=[proc])
        since = cv.ns_from_time(wrench.messages[-1].header.stamp)
        probe.spin_until(lambda: odom_after(since) >= 6, what="odom while a wrench is held", alive=[proc])
    probe.spin_until(lambda: odom_after(since) >= 9, what="odom after the profile", alive=[proc])

    dt_ns = cv.period_ns(PROFILE["physics_rate"])
    base = "profile/base_link"
    applied = sorted(((cv.ns_from_time(m.header.stamp), i, m.header.frame_id, cv.wrench_from_msg(m.wrench))
                      for i, m in enumerate(wrench.messages)))  # by stamp, then arrival
    kinds = {base: "body", "world": "world"}
    assert {f for _, _, f, _ in applied} <= set(kinds), "wrench frames must be the base or the world frame"
    distinct = {(f, tuple(W)) for _, _, f, W in applied}
    assert len(distinct) >= 5, f"expected the 5 profile wrenches to be applied, saw {distinct}"
    # the applied world-frame wrench is the commanded one (nothing dropped on se3)
    assert ("world", (0.5, 0.5, 13.0, 0.0, 0.0, 0.05)) in distinct

    def wrench_at(t_ns):
        latest = None
        for stamp, _i, frame, W in applied:
            if stamp > t_ns:
                break
            latest = (kinds[frame], W)
        return latest

    states = sorted((cv.ns_from_time(m.header.stamp), m) for m in odom.messages)
    states = [s for s in states if s[0] >= applied[0][0]]
    assert len(states) > 30
    assert all(m.child_frame_id == base and m.header.frame_id == "world" for _, m in states)
    t_prev, first = states[0]
    model = model_of(PROFILE)
    p0, quat0 = cv.pose_from_msg(first.pose.pose)
    q = model.configuration_from_pose(p0, quat0)
    v = model.velocity_from_twist(q, cv.twist_from_msg(first.twist.twist))
    dt = dt_ns * 1e-9
    # two replays: step() with the force evaluated per stage here (independent of the node's code), and the
    # node's own Simulator stepped the same way in this process
    reference = model.with_backend("numpy")
    sim = Simulator(model, q, v, dt)
    worst = worst_sim = 0.0

    def error(m, q, v):
        p, quat = cv.pose_from_msg(m.pose.pose)
        p_ref, quat_ref = model.pose(q)
        quat = quat if np.dot(quat, quat_ref) >= 0 else -quat
        return max(np.abs(p - p_ref).max(), np.abs(quat - quat_ref).max(),
                   np.abs(cv.twist_from_msg(m.twist.twist) - model.twist(q, v)).max())

    for t_ns, m in states[1:]:
        assert (t_ns - t_prev) % dt_ns == 0, "stamps must lie on the integer-nanosecond step grid"
        for k in range((t_ns - t_prev) // dt_ns):
            kind, W = wrench_at(t_prev + k * dt_ns)
            q, v = step(reference, q, v, tau_of(model, kind, W), dt, method="rk4")
            sim.set_wrench(WrenchCommand(np.array(W), kind))
            sim.advance(1)
        t_prev = t_ns
        worst = max(worst, error(m, q, v))
        worst_sim = max(worst_sim, error(m, sim.q, sim.v))
    assert worst < 1e-9, f"node and step() differ by {worst:.3e}"
    assert worst_sim < 1e-12, f"node and Simulator differ by {worst_sim:.3e}"
    probe.node.destroy_publisher(pub)


def test_bad_wrenches_are_rejected_and_state_unpoisoned(probe, nodes):
    proc = nodes["profile"]
    odom = wait_for_node(probe, proc, "profile")
    wrench = Recorder(probe, WrenchStamped, "/profile/wrench")
    pub = probe.node.create_publisher(WrenchStamped, "/profile/cmd_wrench", 10)
    probe.spin_until(lambda: pub.get_subscription_count() > 0 and wrench.sub.get_publisher_count() > 0,
                     what="/profile/cmd_wrench", alive=[proc])
    good = [0.0, 0.0, 12.0, 0.0, 0.01, 0.0]
    send(pub, good)

    def applied_is(W):
        return lambda: len(wrench) > 0 and np.array_equal(cv.wrench_from_msg(wrench.messages[-1].wrench), W)

    probe.spin_until(applied_is(good), what="the good wrench to be applied", alive=[proc])

    for bad, frame, log in (([0.0, math.nan, 1.0, 0.0, 0.0, 0.0], "", "non-finite"),
                            ([0.0, 0.0, math.inf, 0.0, 0.0, 0.0], "", "non-finite"),
                            ([5.0, 0.0, 0.0, 0.0, 0.0, 0.0], "mars", "unknown frame_id 'mars'")):
        send(pub, bad, frame)
        assert proc.wait_for_log(log, timeout=TIMEOUT), f"no warning {log!r} in {proc.log_path}"
        n = len(wrench)
        probe.spin_until(lambda: len(wrench) >= n + 2, what="wrench after a bad command", alive=[proc])
        assert applied_is(good)(), "a rejected command must leave the applied wrench unchanged"
    m = odom.messages[-1]
    state = np.concatenate([*cv.pose_from_msg(m.pose.pose), cv.twist_from_msg(m.twist.twist)])
    assert np.all(np.isfinite(state))
    assert proc.running
    probe.node.destroy_publisher(pub)


def test_se2_drops_roll_torque_and_applies_the_rest(probe, nodes):
    proc = nodes["planar"]
    odom = wait_for_node(probe, proc, "planar")
    wrench = Recorder(probe, WrenchStamped, "/planar/wrench")
    pub = probe.node.create_publisher(WrenchStamped, "/planar/cmd_wrench", 10)
    probe.spin_until(lambda: pub.get_subscription_count() > 0 and wrench.sub.get_publisher_count() > 0,
                     what="/planar/cmd_wrench", alive=[proc])
    yaw_rate_before = odom.messages[-1].twist.twist.angular.z
    send(pub, [1.0, 0.0, 0.5, 2.0, -1.0, 0.3])  # fz, roll and pitch torque: not for a planar body
    expected = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.3])
    probe.spin_until(lambda: len(wrench) > 0 and np.allclose(cv.wrench_from_msg(wrench.messages[-1].wrench),
                                                             expected, atol=1e-12),
                     what="the applied wrench without fz, roll and pitch", alive=[proc])
    assert wrench.messages[-1].header.frame_id == "planar/base_link"
    assert proc.wait_for_log("cannot take the components", timeout=TIMEOUT)
    n_odom = len(odom)
    probe.spin_until(lambda: len(odom) >= n_odom + 10, what="odom", alive=[proc])
    last = odom.messages[-1]
    assert last.twist.twist.angular.z > yaw_rate_before + 0.01, "the yaw torque must apply"
    assert last.pose.pose.orientation.x == 0.0 and last.pose.pose.orientation.y == 0.0
    assert last.pose.pose.position.z == 0.0
    send(pub, [0.0] * 6)
    probe.node.destroy_publisher(pub)


def test_tf_and_odom_carry_prefixed_frames(probe, nodes):
    wait_for_node(probe, nodes["planar"], "planar")
    tf = Recorder(probe, TFMessage, "/tf")

    def found():
        return any(t.header.frame_id == "world" and t.child_frame_id == "planar/base_link"
                   for m in tf.messages for t in m.transforms)

    probe.spin_until(found, what="world -> planar/base_link on /tf", alive=[nodes["planar"]])


def test_runtime_parameter_changes(probe, nodes):
    proc = nodes["planar"]
    wait_for_node(probe, proc, "planar")
    service = "/planar/dynamics_node/set_parameters"

    def set_param(name, value):
        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return probe.call(SetParameters, service, req).results[0]

    for name, value, reason in (("mass", -1.0, "mass"),
                                ("inertia", [0.1, 0.0, 0.0, 0.1, 0.0, -0.2], "positive definite"),
                                ("publish_rate", 400.0, None),  # valid: <= physics_rate 500
                                ("publish_rate", 600.0, "physics_rate"),
                                ("wrench_rate", 600.0, "wrench_rate"),
                                ("markers_rate", 501.0, "markers_rate"),
                                ("markers_rate", 5.0, None),
                                ("wrench_rate", 0.0, None),  # off
                                ("integrator", "rk5", "integrator"),
                                ("base_group", "se3", "read")):  # read-only
        r = set_param(name, value)
        if reason is None:
            assert r.successful, r.reason
        else:
            assert not r.successful, f"{name} := {value} was accepted"
            assert reason in r.reason, r.reason
    assert set_param("publish_rate", 50.0).successful
    r = set_param("mass", 2.5)
    assert r.successful, r.reason
    got = probe.call(GetParameters, "/planar/dynamics_node/get_parameters",
                     GetParameters.Request(names=["mass", "base_group"]), resend_after=5.0)
    assert got.values[0].double_value == 2.5 and got.values[1].string_value == "se2"
    assert proc.running


def test_pause_and_reset(probe, nodes):
    proc = nodes["planar"]
    odom = wait_for_node(probe, proc, "planar")
    diags = []  # (stamp ns, values) of /planar's status

    def on_diag(m):
        diags.extend((cv.ns_from_time(m.header.stamp), cv.values_from_status(s)) for s in m.status
                     if s.name == "/planar/dynamics_node: rigid body")

    probe.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, QoSProfile(depth=100))
    probe.spin_until(lambda: len(diags) > 0, what="/diagnostics of /planar", alive=[proc])

    def last_odom_stamp():
        return max(cv.ns_from_time(m.header.stamp) for m in odom.messages)

    r = probe.call(SetBool, "/planar/dynamics_node/pause", SetBool.Request(data=True))
    assert r.success, r.message
    n = len(diags)
    probe.spin_until(lambda: sum(1 for _, d in diags[n:] if d["paused"]) >= 3,
                     what="three diagnostics while paused", alive=[proc])
    paused = {stamp for stamp, d in diags[n:] if d["paused"]}
    assert len(paused) == 1, "simulation time must stand still while paused"
    t_pause = paused.pop()
    # the state at which it stopped is published once (wait: topics are not ordered with each other)
    probe.spin_until(lambda: last_odom_stamp() >= t_pause, what="odom of the paused state", alive=[proc])
    last_stamp = last_odom_stamp()
    assert last_stamp == t_pause, "no odom beyond the pause"

    r = probe.call(Trigger, "/planar/dynamics_node/reset", Trigger.Request())
    assert r.success, r.message
    dt_ns = cv.period_ns(PLANAR["physics_rate"])
    probe.spin_until(lambda: last_odom_stamp() > last_stamp, what="odom of the reset state", alive=[proc])
    m = max(odom.messages, key=lambda m: cv.ns_from_time(m.header.stamp))
    assert cv.ns_from_time(m.header.stamp) == last_stamp + dt_ns, "reset takes the next step's stamp"
    p, quat = cv.pose_from_msg(m.pose.pose)
    assert np.allclose(p, PLANAR["initial_position"], atol=1e-12)
    assert np.allclose(cv.rpy_from_quaternion(quat), PLANAR["initial_rpy"], atol=1e-12)
    assert np.allclose(cv.twist_from_msg(m.twist.twist), PLANAR["initial_twist"], atol=1e-12)

    r = probe.call(SetBool, "/planar/dynamics_node/pause", SetBool.Request(data=False))
    assert r.success, r.message
    reset_stamp = cv.ns_from_time(m.header.stamp)
    probe.spin_until(lambda: last_odom_stamp() > reset_stamp, what="odom after resuming", alive=[proc])


def test_invalid_parameters_exit_nonzero_with_reason(nodes):
    for key, (_params, reason) in INVALID.items():
        proc = nodes[key]
        rc = proc.wait(timeout=TIMEOUT)
        assert rc is not None, f"{key}: the node did not exit"
        assert rc != 0, f"{key}: exit code 0"
        assert reason in proc.log_text(), f"{key}: {reason!r} not in log:\n{proc.log_text()}"


def test_triangle_inequality_only_warns(nodes):
    proc = nodes["triangle"]
    assert proc.wait_for_log("triangle inequality", timeout=TIMEOUT), proc.log_text()
    assert proc.wait_for_log("se3 body", timeout=TIMEOUT), proc.log_text()
    assert proc.running


def test_thread_priority_puts_the_nodes_threads_on_sched_fifo(probe, nodes):
    """thread_priority 20: every thread of the node's process on SCHED_FIFO at 20 (its executor's, where every
    callback runs, and the middleware's, Fast DDS's ``dds.*`` among them), the node stepping as before; where the
    system refuses it, a warning with its reason and the default scheduler. A node without it: the default."""
    proc = nodes["fifo"]
    wait_for_node(probe, proc, "fifo")
    assert proc.wait_for_log("thread_priority 20:", timeout=TIMEOUT), proc.log_text()
    tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
    policies = {os.sched_getscheduler(t) for t in tids}
    if "the node's threads run with SCHED_FIFO" in proc.log_text():
        assert len(tids) > 1 and policies == {os.SCHED_FIFO}, policies
        assert {os.sched_getparam(t).sched_priority for t in tids} == {20}
    else:  # refused here (no root, no CAP_SYS_NICE, no rtprio limit): said so, and nothing changed
        assert "SCHED_FIFO refused (" in proc.log_text(), proc.log_text()
        assert policies == {os.SCHED_OTHER}, policies
    assert {os.sched_getscheduler(int(t)) for t in os.listdir(f"/proc/{nodes['triangle'].pid}/task")} \
        == {os.SCHED_OTHER}
    # started as `ros2 run` would start it, without asynchronous publication: it says what to set (mbs_ros.dds)
    if (os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps")
            and "RMW_FASTRTPS_PUBLICATION_MODE" not in os.environ):
        assert "thread_priority 20: RMW_FASTRTPS_PUBLICATION_MODE is not set" in proc.log_text(), proc.log_text()
    assert proc.running


def test_sigterm_exits_cleanly(probe, nodes):
    proc = nodes["sigterm"]
    wait_for_node(probe, proc, "sigterm")
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=TIMEOUT)
    assert rc == 0, f"exit code {rc} after SIGTERM:\n{proc.log_tail()}"


def test_sigint_exits_cleanly(nodes):
    proc = nodes["triangle"]
    assert proc.wait_for_log("se3 body", timeout=TIMEOUT)
    assert proc.stop() == 0 and proc.stop_signal == "SIGINT", proc.log_tail()


def test_node_command_line():
    from mbs_ros.process import format_parameter_value, ros_arguments

    assert ros_arguments() == []
    assert ros_arguments(name="dyn", namespace="robot1", params_file="f.yaml",
                         parameters={"mass": 2.0, "base_group": "se2", "com": [0, 0.5, 1e-20], "paused": True},
                         remappings={"odom": "odometry"}) == [
        "--ros-args", "-r", "__ns:=/robot1", "-r", "__node:=dyn", "--params-file", "f.yaml",
        "-p", "mass:=2.0", "-p", "base_group:=se2", "-p", "com:=[0.0, 0.5, 1.0e-20]", "-p", "paused:=true",
        "-r", "odom:=odometry"]
    assert format_parameter_value(np.array([1.5, 2.0])) == "[1.5, 2.0]"
    assert NodeProcess(NODE, namespace="/a").command[1:3] == ["-m", NODE]


def test_rate_parameters_are_validated_and_default_to_lean_publishing():
    from mbs_ros.nodes import dynamics_node as dn
    from mbs_ros.dynamics.model.source import ParameterError

    d = dn.DEFAULTS
    assert (d.publish_rate, d.wrench_rate, d.markers_rate, d.diagnostics_rate) == (100.0, 100.0, 20.0, 1.0)
    assert d.use_events_executor is True
    values = {name: getattr(d, name) for name in dn.PARAMETERS}
    for name in ("wrench_rate", "markers_rate", "diagnostics_rate"):
        with pytest.raises(ParameterError, match=f"{name} \\(2000 Hz\\) must not exceed physics_rate"):
            dn.settings_from_values(dict(values, **{name: 2000.0}))
        with pytest.raises(ParameterError, match=f"{name} must be >= 0"):
            dn.settings_from_values(dict(values, **{name: -1.0}))
        with pytest.raises(ParameterError, match=f"{name} must be a number"):
            dn.settings_from_values(dict(values, **{name: "fast"}))
        assert getattr(dn.settings_from_values(dict(values, **{name: 0})), name) == 0.0  # int accepted; 0 = off


def test_joint_wrenches_markers_and_diagnostics_cost_nothing_without_subscribers(tmp_path):
    """In process, on the vehicle-manipulator at 1 kHz: with nobody subscribed, advancing computes no joint
    wrench, builds no marker and publishes nothing; with one subscriber each on joint_wrenches/joint1, markers and
    odom, exactly those are published, each at its own rate (counted over 1 s of simulation time)."""
    import yaml
    from rclpy.context import Context

    from mbs_ros.nodes import dynamics_node as dn

    ros_env_defaults()
    params = yaml.safe_load((ROOT / "config" / "uvms_6dof.yaml").read_text())["/**/dynamics_node"]["ros__parameters"]
    params.update(physics_rate=1000.0, publish_rate=100.0, wrench_rate=50.0, markers_rate=20.0,
                  diagnostics_rate=10.0, model_file=str(ROOT / "config" / "robots" / "uvms_6dof.yaml"))
    context = Context()
    rclpy.init(context=context)
    node = listener = None
    try:
        # the global topics moved into the namespace: the probe of the tests above subscribes to /tf, /diagnostics
        node = dn.DynamicsNode("lean_dynamics", context=context, namespace="lean",
                               cli_args=["--ros-args", "-r", "/tf:=/lean/tf", "-r", "/tf_static:=/lean/tf_static",
                                         "-r", "/diagnostics:=/lean/diagnostics"],
                               parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        node.configure()
        calls = {"joint_wrenches": 0, "markers": 0}
        joint_wrenches, link_markers = node.sim.joint_wrenches, node.publishing.marker_maker.link_markers

        def counting(name, f):
            def wrapped(*a, **kw):
                calls[name] += 1
                return f(*a, **kw)
            return wrapped

        node.sim.joint_wrenches = counting("joint_wrenches", joint_wrenches)
        node.publishing.marker_maker.link_markers = counting("markers", link_markers)
        published = {}
        for pub in node.publishers:
            def counted(msg, _publish=pub.publish, _topic=pub.topic_name):
                published[_topic] = published.get(_topic, 0) + 1
                _publish(msg)
            pub.publish = counted
        node.advance(1000)
        assert calls == {"joint_wrenches": 0, "markers": 0} and published == {}, (calls, published)
        assert node.sim.k == 1000

        listener = rclpy.create_node("lean_listener", context=context)
        from visualization_msgs.msg import MarkerArray

        subs = [listener.create_subscription(WrenchStamped, "/lean/joint_wrenches/joint1", lambda m: None, 10),
                listener.create_subscription(MarkerArray, "/lean/markers", lambda m: None, 10),
                listener.create_subscription(Odometry, "/lean/odom", lambda m: None, 10)]
        wanted = ("/lean/joint_wrenches/joint1", "/lean/markers", "/lean/odom")
        pubs = {p.topic_name: p for p in node.publishers}
        deadline = time.monotonic() + TIMEOUT
        while not all(pubs[t].get_subscription_count() for t in wanted):
            assert time.monotonic() < deadline, "the in-process subscriptions never matched"
            time.sleep(0.01)
        node.advance(1000)  # 1 s: 100 states, 50 joint wrench sets, 20 marker arrays
        assert calls == {"joint_wrenches": 50, "markers": 20}, calls
        assert published == {"/lean/joint_wrenches/joint1": 50, "/lean/markers": 20, "/lean/odom": 100}, published
        assert len(subs) == 3
    finally:
        for n in (listener, node):
            if n is not None:
                n.destroy_node()
        rclpy.shutdown(context=context)


def test_stalls_are_skipped_ahead_and_counted_and_one_soon_after_another_warned(tmp_path):
    """A real node process (the planar body, free-running at 500 Hz) stopped (SIGSTOP) for 0.3 s, twice, 1 s of
    wall clock apart: it skips ahead each time, /diagnostics counts ``skipped_ahead`` (at least the two), the log
    has the lone stall's INFO line and, for the second within PERSISTENT_LAG_S, the warning (docs/dynamics_node.md,
    "Pacing"). The stalls themselves are the subject: they are slept, nothing is waited for in them."""
    from diagnostic_msgs.msg import DiagnosticArray

    ros_env_defaults()
    proc = NodeProcess(NODE, name=NAME, namespace="stall", parameters=PLANAR, log_file=tmp_path / "stall.log",
                       remappings={"/diagnostics": "/stall/diagnostics", "/tf": "/stall/tf",
                                   "/tf_static": "/stall/tf_static"})
    with running([proc]), Probe("test_stall_probe", TIMEOUT) as probe:
        diags = Recorder(probe, DiagnosticArray, "/stall/diagnostics")

        def latest(key):
            values = [cv.values_from_status(st) for m in diags.messages[-1:] for st in m.status]
            return float(values[-1].get(key, -1)) if values else -1

        # stepping (the first diagnostics go out before the stepping's first tick, which anchors the pacing)
        probe.spin_until(lambda: latest("steps") > 0, what="the node's diagnostics while it steps", alive=[proc])
        for _ in range(2):
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                time.sleep(0.3)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            probe.spin_for(1.0)
        probe.spin_until(lambda: latest("skipped_ahead") >= 2, what="two skips ahead on /diagnostics", alive=[proc])
        assert proc.wait_for_log("s behind the wall clock: skipping ahead (a stall of the process", timeout=TIMEOUT), \
            proc.log_tail()
        assert proc.wait_for_log("[WARN]", timeout=TIMEOUT) and "falling behind the wall clock by" in proc.log_text(), \
            proc.log_tail()


def test_the_heap_is_frozen_before_the_initial_state(monkeypatch):
    """The collector's pass over the set-up (~0.1 s: :func:`mbs_ros.nodes.runtime.freeze_heap`) comes before the
    initial state goes out, not between it and the stepping's first state: after it, the demo's controller found
    its first state 0.2 s old (its state_timeout) and warned. In process: the order of the two calls."""
    from rclpy.context import Context

    from mbs_ros.nodes import dynamics_node as dn
    from mbs_ros.nodes.dynamics_publishing import StatePublishing

    ros_env_defaults()
    order = []
    publish_state = StatePublishing.publish_state
    monkeypatch.setattr(dn, "freeze_heap", lambda: order.append("freeze"))
    monkeypatch.setattr(StatePublishing, "publish_state",
                        lambda self, *a, **k: (order.append("state"), publish_state(self, *a, **k))[1])
    context = Context()
    rclpy.init(context=context)
    node = None
    try:
        node = dn.DynamicsNode("frozen_dynamics", context=context, namespace="frozen", cli_args=[
            "--ros-args", "-r", "/tf:=/frozen/tf", "-r", "/tf_static:=/frozen/tf_static", "-r",
            "/diagnostics:=/frozen/diagnostics"], parameter_overrides=[
            Parameter("model_file", value=str(ROOT / "config" / "robots" / "uvms_6dof.yaml"))])
        node.configure()
        assert order == ["freeze", "state"], order
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=context)


def test_a_node_process_runs_one_blas_thread():
    """The dynamics node's module, run as the program (argv[0] dynamics_node), sets one BLAS/OpenMP thread before
    numpy loads; runtime.limit_threads resizes pools already loaded (threadpoolctl); an explicit
    OPENBLAS_NUM_THREADS wins; a plain import (a test, a tool) changes nothing."""
    import os
    import subprocess
    import sys

    pytest.importorskip("threadpoolctl")
    show = ("from threadpoolctl import threadpool_info; "
            "print(sorted({i['internal_api']: i['num_threads'] for i in threadpool_info()}.items()))")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_THREADS")}

    def pools(code, **extra):
        out = subprocess.run([sys.executable, "-c", code + "; " + show], capture_output=True, text=True,
                             env=dict(env, **extra), check=True).stdout
        return dict(eval(out))  # noqa: S307 - our own output

    baseline = pools("import numpy")
    if baseline.get("openblas", 1) < 2:
        pytest.skip("one core, or a BLAS without a pool: nothing to limit")
    assert pools("import sys; sys.argv = ['/opt/ros/lib/mbs_ros/dynamics_node']; import mbs_ros.nodes.dynamics_node"
                 )["openblas"] == 1
    assert pools("import mbs_ros.nodes.dynamics_node")["openblas"] == baseline["openblas"]
    assert pools("import numpy; from mbs_ros.nodes.runtime import limit_threads; assert limit_threads(1)"
                 )["openblas"] == 1
    assert pools("import numpy; from mbs_ros.nodes.runtime import limit_threads; limit_threads(1)",
                 OPENBLAS_NUM_THREADS="2")["openblas"] == 2
