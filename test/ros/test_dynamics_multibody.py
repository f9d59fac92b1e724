"""Integration tests of the dynamics node with multibody robots: real node processes, real topics.

- ``/asv``: the surface vessel + 2-link arm of ``config/robots/asv_2link.yaml`` (SE(2) base), driven by base
  wrenches and joint efforts; its odometry and joint states are compared with ``step()`` run here on the applied
  command history; joint_states, /tf, /tf_static and joint_wrenches/<joint> carry the right names, frames and
  values; bad cmd_joint_effort messages are rejected.
- ``/cont``: a fixed-base robot given as a ``robot_description`` string, with a continuous and a prismatic joint:
  cmd_wrench is rejected, odom publishes the fixed pose, continuous joints are published as angles.

All processes start at once in a module fixture; every wait is for a graph match, a message or a log line.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mbs_ros.dynamics import Model, step  # noqa: E402
from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running, stamp_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NODE = "mbs_ros.nodes.dynamics_node"
TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
ASV_ROBOT = ROOT / "config" / "robots" / "asv_2link.yaml"
ASV = dict(model_file="config/robots/asv_2link.yaml", integrator="rk4", physics_rate=500.0, publish_rate=50.0,
           initial_position=[1.0, -2.0, 0.0], initial_rpy=[0.0, 0.0, 0.4],
           initial_twist=[0.3, 0.0, 0.0, 0.0, 0.0, 0.1], initial_joint_positions=[0.5, -0.8],
           initial_joint_velocities=[0.2, -0.1], cmd_timeout=0.0)
JOINTS = ("shoulder_joint", "elbow_joint")

CONT_URDF = """<?xml version="1.0"?>
<robot name="turntable">
  <link name="base_link">
    <inertial><mass value="5.0"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
  </link>
  <link name="table">
    <inertial><origin xyz="0.1 0 0"/><mass value="2.0"/>
      <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial>
  </link>
  <link name="slider">
    <inertial><mass value="0.5"/><inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
  </link>
  <link name="sensor"/>
  <joint name="spin" type="continuous">
    <parent link="base_link"/><child link="table"/><origin xyz="0 0 0.2"/><axis xyz="0 0 1"/>
  </joint>
  <joint name="slide" type="prismatic">
    <parent link="table"/><child link="slider"/><origin xyz="0.1 0 0.05"/><axis xyz="1 0 0"/>
    <limit lower="-0.1" upper="0.1" effort="50" velocity="1"/>
  </joint>
  <joint name="sensor_mount" type="fixed">
    <parent link="slider"/><child link="sensor"/><origin xyz="0 0 0.03" rpy="0 0 1.0"/>
  </joint>
</robot>
"""


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("multibody_logs")
    cont_params = logs / "cont.yaml"
    cont_params.write_text(yaml.safe_dump({"/**": {"ros__parameters": dict(
        robot_description=CONT_URDF, gravity=[0.0, 0.0, 0.0], physics_rate=200.0, publish_rate=50.0,
        initial_joint_positions=[3.0, 0.05])}}))
    procs = {
        "asv": NodeProcess(NODE, name="dynamics_node", namespace="asv", parameters=ASV, log_file=logs / "asv.log"),
        "cont": NodeProcess(NODE, name="dynamics_node", namespace="cont", params_file=cont_params,
                            log_file=logs / "cont.log"),
    }
    with running(procs):
        yield procs


@pytest.fixture(scope="module")
def probe(nodes):
    with Probe("test_multibody_probe", TIMEOUT) as p:
        yield p


@pytest.fixture(scope="module")
def asv_model():
    return Model.from_yaml(ASV_ROBOT)


def state_of(model, odom, js):
    """(q, v) in the model's layout from an odom and a joint_states message."""
    p, quat = cv.pose_from_msg(odom.pose.pose)
    q = model.configuration_from_pose(p, quat, joints=np.array(js.position))
    v = np.array(model.velocity_from_twist(q, cv.twist_from_msg(odom.twist.twist)))
    v[model.nv - len(js.velocity):] = js.velocity
    return q, v


def generalized_force(model, W, effort):
    """What the node applies for a body-frame wrench W and joint efforts (se2: W's planar part)."""
    tau_j = np.concatenate([np.zeros(model.nv - len(effort)), effort])
    if not np.any(W):
        return tau_j
    return lambda t, q, v: model.wrench_to_generalized(q, W)[0] + tau_j


def history(msgs, value):
    """Sorted (stamp, arrival index, value) of an applied-command topic."""
    return sorted((stamp_of(m), i, value(m)) for i, m in enumerate(msgs))


def latest(hist, t_ns):
    out = None
    for stamp, _i, v in hist:
        if stamp > t_ns:
            break
        out = v
    return out


def wait_running(probe, proc, ns):
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    probe.spin_until(lambda: len(odom) > 0, what=f"/{ns}/odom", alive=[proc])
    return odom


# --------------------------------------------------------------------------------------------- tests


def test_efforts_and_wrenches_match_step(probe, nodes, asv_model):
    """Odometry and joint states equal step() run here with the applied wrench and effort history, to 1e-9."""
    proc = nodes["asv"]
    odom = wait_running(probe, proc, "asv")
    joints = Recorder(probe, JointState, "/asv/joint_states")
    wrench = Recorder(probe, WrenchStamped, "/asv/wrench")
    effort = Recorder(probe, JointState, "/asv/joint_effort")
    pub_w = probe.node.create_publisher(WrenchStamped, "/asv/cmd_wrench", 10)
    pub_e = probe.node.create_publisher(Float64MultiArray, "/asv/cmd_joint_effort", 10)
    probe.spin_until(lambda: pub_w.get_subscription_count() > 0 and pub_e.get_subscription_count() > 0
                     and len(wrench) > 0 and len(effort) > 0 and len(joints) > 0,
                     what="/asv command and applied topics", alive=[proc])
    profile = [([200.0, 0.0, 0.0, 0.0, 0.0, 30.0], [40.0, -10.0]),
               ([0.0, 80.0, 0.0, 0.0, 0.0, -20.0], [-25.0, 15.0]),
               ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [5.0, 5.0]),
               ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0])]
    for W, E in profile:
        pub_w.publish(cv.wrench_stamped_msg(0, "", W))
        pub_e.publish(Float64MultiArray(data=E))
        probe.spin_until(lambda: np.array_equal(cv.wrench_from_msg(wrench.messages[-1].wrench), W)
                         and list(effort.messages[-1].effort) == E, what=f"{W}, {E} applied", alive=[proc])
        since = max(stamp_of(wrench.messages[-1]), stamp_of(effort.messages[-1]))
        # by stamp, not by arrival: under load odometry published before the command can arrive after its echo
        probe.spin_until(lambda: sum(stamp_of(m) > since for m in odom.messages) >= 5,
                         what="odom while the command is held", alive=[proc])
    assert list(effort.messages[-1].name) == list(JOINTS)

    dt_ns = cv.period_ns(ASV["physics_rate"])
    hist_w = history(wrench.messages, lambda m: cv.wrench_from_msg(m.wrench))
    hist_e = history(effort.messages, lambda m: np.array(m.effort))
    js = {stamp_of(m): m for m in joints.messages}
    first = max(hist_w[0][0], hist_e[0][0])
    states = sorted((stamp_of(m), m) for m in odom.messages if stamp_of(m) in js and stamp_of(m) >= first)
    assert len(states) >= 10  # the profile waits for 4 × 5 odom messages; some may lack a matching joint_states
    model = asv_model
    t_prev, m0 = states[0]
    q, v = state_of(model, m0, js[t_prev])
    worst = 0.0
    for t_ns, m in states[1:]:
        assert (t_ns - t_prev) % dt_ns == 0
        for k in range((t_ns - t_prev) // dt_ns):
            t_k = t_prev + k * dt_ns
            tau = generalized_force(model, latest(hist_w, t_k), latest(hist_e, t_k))
            q, v = step(model, q, v, tau, dt_ns * 1e-9, method="rk4")
        t_prev = t_ns
        q_node, v_node = state_of(model, m, js[t_ns])
        worst = max(worst, np.abs(model.difference(q, q_node)).max(), np.abs(v - v_node).max())
    assert worst < 1e-9, f"node and step() differ by {worst:.3e}"


def test_joint_states_tf_and_joint_wrenches(probe, nodes, asv_model):
    proc = nodes["asv"]
    odom = wait_running(probe, proc, "asv")
    model = asv_model
    joints = Recorder(probe, JointState, "/asv/joint_states")
    wrench = Recorder(probe, WrenchStamped, "/asv/wrench")
    effort = Recorder(probe, JointState, "/asv/joint_effort")
    tf = Recorder(probe, TFMessage, "/tf")
    tf_static = Recorder(probe, TFMessage, "/tf_static",
                         qos=QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    jw = {j: Recorder(probe, WrenchStamped, f"/asv/joint_wrenches/{j}") for j in JOINTS}
    pub_e = probe.node.create_publisher(Float64MultiArray, "/asv/cmd_joint_effort", 10)
    probe.spin_until(lambda: pub_e.get_subscription_count() > 0, what="/asv/cmd_joint_effort", alive=[proc])
    pub_e.publish(Float64MultiArray(data=[12.0, -7.0]))  # so that the wrenches carry an actuation part

    def asv_tf_stamps():
        return {stamp_of(t) for m in tf.messages for t in m.transforms if t.child_frame_id.startswith("asv/")}

    def complete():
        stamps = ({stamp_of(m) for m in odom.messages} & {stamp_of(m) for m in joints.messages}
                  & asv_tf_stamps())
        for r in jw.values():
            stamps &= {stamp_of(m) for m in r.messages}
        applied = [stamp_of(m) for m in effort.messages if list(m.effort) == [12.0, -7.0]]
        return [s for s in stamps if applied and s > min(applied)]

    probe.spin_until(lambda: len(complete()) >= 3 and len(tf_static) > 0, what="a complete published state",
                     alive=[proc])
    t = max(complete())
    dt_ns = cv.period_ns(ASV["physics_rate"])
    js = next(m for m in joints.messages if stamp_of(m) == t)
    od = next(m for m in odom.messages if stamp_of(m) == t)
    assert tuple(js.name) == JOINTS and len(js.position) == len(js.velocity) == len(js.effort) == 2
    assert od.header.frame_id == "world" and od.child_frame_id == "asv/base_link"
    q, v = state_of(model, od, js)
    # the command of the step that ended at t: the applied topics' latest value stamped <= t - dt
    W = latest(history(wrench.messages, lambda m: cv.wrench_from_msg(m.wrench)), t - dt_ns)
    E = latest(history(effort.messages, lambda m: np.array(m.effort)), t - dt_ns)
    assert np.array_equal(E, js.effort)
    tau = generalized_force(model, W, E)
    tau = tau(0.0, q, v) if callable(tau) else tau
    W_ref = model.joint_wrenches(q, v, model.forward_dynamics(q, v, tau))
    for j, W_j in zip(JOINTS, W_ref):
        m = next(m for m in jw[j].messages if stamp_of(m) == t)
        child = {"shoulder_joint": "asv/shoulder_link", "elbow_joint": "asv/elbow_link"}[j]
        assert m.header.frame_id == child
        got = cv.wrench_from_msg(m.wrench)
        assert np.abs(got - W_j).max() <= 1e-9 * max(1.0, np.abs(W_j).max()), (j, got, W_j)
    # actuation included: the torque about the joint axis (z) is the applied effort
    for j, e in zip(JOINTS, E):
        m = next(m for m in jw[j].messages if stamp_of(m) == t)
        assert abs(m.wrench.torque.z - e) < 1e-9 * max(1.0, abs(e))

    # TF: world -> base, then parent -> child per movable joint; fixed joints on /tf_static
    poses = model.link_pose_dict(q)
    frames = {(tr.header.frame_id, tr.child_frame_id): tr for m in tf.messages for tr in m.transforms
              if stamp_of(tr) == t}
    expected = {("world", "asv/base_link"): (None, "base_link"),
                ("asv/base_link", "asv/shoulder_link"): ("base_link", "shoulder_link"),
                ("asv/shoulder_link", "asv/elbow_link"): ("shoulder_link", "elbow_link")}
    assert set(expected) <= set(frames), sorted(frames)
    for key, (parent, child) in expected.items():
        T_ref = poses[child] if parent is None else np.linalg.inv(poses[parent]) @ poses[child]
        p, quat = cv.transform_from_msg(frames[key].transform)
        assert np.abs(p - T_ref[:3, 3]).max() < 1e-9, key
        assert np.abs(cv.rotation_matrix(quat) - T_ref[:3, :3]).max() < 1e-9, key
    static = {(tr.header.frame_id, tr.child_frame_id): tr for m in tf_static.messages for tr in m.transforms}
    tr = static[("asv/elbow_link", "asv/tool0")]
    assert np.allclose(cv.transform_from_msg(tr.transform)[0], [0.8, 0.0, 0.0], atol=1e-12)
    pub_e.publish(Float64MultiArray(data=[0.0, 0.0]))


def test_bad_joint_efforts_are_rejected(probe, nodes):
    proc = nodes["asv"]
    wait_running(probe, proc, "asv")
    effort = Recorder(probe, JointState, "/asv/joint_effort")
    pub_e = probe.node.create_publisher(Float64MultiArray, "/asv/cmd_joint_effort", 10)
    probe.spin_until(lambda: pub_e.get_subscription_count() > 0 and len(effort) > 0, what="/asv/joint_effort",
                     alive=[proc])
    good = [3.0, -2.0]
    pub_e.publish(Float64MultiArray(data=good))
    probe.spin_until(lambda: list(effort.messages[-1].effort) == good, what="the good effort", alive=[proc])
    for bad, log in (([1.0, 2.0, 3.0], "3 values, expected 2"), ([math.nan, 1.0], "non-finite"),
                     ([1.0, math.inf], "non-finite")):
        pub_e.publish(Float64MultiArray(data=bad))
        assert proc.wait_for_log(log, timeout=TIMEOUT), f"no warning {log!r}:\n{proc.log_tail()}"
        n = len(effort)
        probe.spin_until(lambda: len(effort) >= n + 2, what="joint_effort after a bad command", alive=[proc])
        assert list(effort.messages[-1].effort) == good, "a rejected command must not change the applied effort"
    assert proc.running
    pub_e.publish(Float64MultiArray(data=[0.0, 0.0]))


def test_fixed_base_robot_description(probe, nodes):
    proc = nodes["cont"]
    odom = wait_running(probe, proc, "cont")
    joints = Recorder(probe, JointState, "/cont/joint_states")
    tf_static = Recorder(probe, TFMessage, "/tf_static",
                         qos=QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    pub_w = probe.node.create_publisher(WrenchStamped, "/cont/cmd_wrench", 10)
    probe.spin_until(lambda: pub_w.get_subscription_count() > 0 and len(joints) > 0
                     and any(t.child_frame_id == "cont/sensor" for m in tf_static.messages for t in m.transforms),
                     what="/cont topics", alive=[proc])
    pub_w.publish(cv.wrench_stamped_msg(0, "", [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    assert proc.wait_for_log("the base is fixed", timeout=TIMEOUT), proc.log_tail()
    m = odom.messages[-1]
    assert m.child_frame_id == "cont/base_link"
    p, quat = cv.pose_from_msg(m.pose.pose)
    assert np.array_equal(p, np.zeros(3)) and np.array_equal(quat, [0.0, 0.0, 0.0, 1.0])
    assert not np.any(cv.twist_from_msg(m.twist.twist))
    js = joints.messages[-1]
    assert list(js.name) == ["spin", "slide"]
    # no gravity, no command: the initial angle of the continuous joint stays, published as an angle
    assert abs(js.position[0] - 3.0) < 1e-12 and abs(js.position[1] - 0.05) < 1e-12
    assert proc.running
