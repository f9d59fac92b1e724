"""The controller never dies from input (issue 9): real node processes, real topics.

- fuzz: a controller on the SE(3) vehicle-manipulator (``config/uvms_6dof.yaml``) whose state the test plays (a
  sane, motionless state stream). At least 10⁴ malformed-but-type-valid messages per input topic (``odom``,
  ``joint_states``, ``joint_reference``, ``base_reference``: huge, NaN, Inf, wrong lengths and names, absurd
  stamps, huge trajectories, references far but within bounds), then complete states with absurd stamps (single
  ones, and a run that the controller must take as a new time base, and the sane stream taking it back), all
  while the sane state stream runs. Then: the process is alive, every command it published is finite and within
  the saturation limits, saturations were counted, and a new sane reference is tracked again (the command equals
  the control law's for the state and that reference, as before the flood);
- runtime parameter changes: ``use_sim_time`` (and a read-only parameter) refused with a reason;
- restart: dynamics node + controller + reference node on one rigid body; the controller is killed, the body
  pushed away, and a restarted controller gets the reference (transient local on both sides) and brings the body
  back to the goal;
- no processes: the bounds and limits the node derives from the model.

Every wait is for a graph match, a message, a log line or a process exit, with a generous timeout.
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from builtin_interfaces.msg import Duration, Time  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import Quaternion, Transform, Twist, Vector3, WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.msg import Parameter as ParameterMsg  # noqa: E402
from rcl_interfaces.msg import ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import (  # noqa: E402
    JointTrajectory,
    JointTrajectoryPoint,
    MultiDOFJointTrajectory,
    MultiDOFJointTrajectoryPoint,
)

from mbs_ros.controllers import ComputedTorque, Reference  # noqa: E402
from mbs_ros.dynamics import Model  # noqa: E402
from mbs_ros.nodes import controller_node as cn  # noqa: E402
from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UVMS_PARAMS = ROOT / "config" / "uvms_6dof.yaml"
UVMS_ROBOT = ROOT / "config" / "robots" / "uvms_6dof.yaml"
BODY_PARAMS = ROOT / "config" / "rigid_body.yaml"
CONTROLLER = "mbs_ros.nodes.controller_node"
DYNAMICS = "mbs_ros.nodes.dynamics_node"
REFERENCE = "mbs_ros.nodes.reference_node"
TIMEOUT = 60.0  # generous: two shared cores
FLOOD = 10_000  # messages per input topic
RATE = 4000.0  # messages per second in the flood (a few seconds per topic)
NS = 1_000_000_000
T0 = 100 * NS  # the sane state stream starts here, 10 ms per state
STEP = 10_000_000
KP, KD = 9.0, 6.0  # config/uvms_6dof.yaml
REFERENCE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)
NAN, INF, HUGE = float("nan"), float("inf"), 1e308


@pytest.fixture(scope="module")
def model():
    return Model.from_yaml(UVMS_ROBOT)


@pytest.fixture(scope="module")
def fuzz_controller(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("robustness_logs")
    # its commands in both forms (unstamped_commands): the bounds hold on cmd_joint_effort too
    proc = NodeProcess(CONTROLLER, name="controller_node", namespace="fuzz", params_file=UVMS_PARAMS,
                       parameters=dict(unstamped_commands=True), log_file=logs / "fuzz_controller.log")
    with running([proc]):
        yield proc


@pytest.fixture(scope="module")
def probe(fuzz_controller):
    with Probe("test_robustness_probe", TIMEOUT) as p:
        yield p


# ------------------------------------------------------------------------------------------ messages


def _time(sec, nanosec=0):
    return Time(sec=int(sec), nanosec=int(nanosec))


def _stamp(ns):
    return _time(ns // NS, ns % NS)


def _dur(seconds, nanosec=None):
    if nanosec is not None:
        return Duration(sec=int(seconds), nanosec=int(nanosec))
    sec = int(math.floor(seconds))
    return Duration(sec=sec, nanosec=int(round((seconds - sec) * 1e9)))


def _vec3(x, y, z):
    return Vector3(x=float(x), y=float(y), z=float(z))


def _quat(x, y, z, w):
    return Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))


class SaneState:
    """The motionless state the test plays: base at P0, identity attitude, joints at J0, at rest."""

    P0 = np.array([1.0, 2.0, -5.0])
    J0 = np.array([0.0, 0.6, -1.2, 0.0, 0.6, 0.0])

    def __init__(self, model, ns):
        self.model, self.ns = model, ns
        self.q = model.configuration_from_pose(self.P0, [0.0, 0.0, 0.0, 1.0], joints=self.J0)
        self.v = np.zeros(model.nv)

    def messages(self, stamp_ns, pose=None, joints=None):
        p, quat = (self.P0, np.array([0.0, 0.0, 0.0, 1.0])) if pose is None else pose
        odom = cv.odometry_msg(stamp_ns, "world", f"{self.ns}/vehicle", p, quat, np.zeros(6))
        js = cv.joint_state_msg(stamp_ns, self.model.joint_names, self.J0 if joints is None else joints,
                                np.zeros(6))
        return odom, js


def _joint_traj(names, points, stamp=None):
    """points: (time_from_start Duration, positions, velocities, accelerations)."""
    m = JointTrajectory()
    m.header.stamp = stamp if stamp is not None else _time(0)
    m.joint_names = list(names)
    for t, pos, vel, acc in points:
        m.points.append(JointTrajectoryPoint(positions=[float(x) for x in pos], velocities=[float(x) for x in vel],
                                             accelerations=[float(x) for x in acc], time_from_start=t))
    return m


def _base_traj(points, stamp=None, names=()):
    """points: (time_from_start Duration, [Transform...], [Twist...], [Twist...])."""
    m = MultiDOFJointTrajectory()
    m.header.stamp = stamp if stamp is not None else _time(0)
    m.header.frame_id = "world"
    m.joint_names = list(names)
    for t, tfs, vels, accs in points:
        m.points.append(MultiDOFJointTrajectoryPoint(transforms=list(tfs), velocities=list(vels),
                                                     accelerations=list(accs), time_from_start=t))
    return m


def _tf(p, quat=(0.0, 0.0, 0.0, 1.0)):
    return Transform(translation=_vec3(*p), rotation=_quat(*quat))


def _twist(*v):
    return Twist(linear=_vec3(*v[:3]), angular=_vec3(*v[3:]))


def fuzz_odom(model, ns):
    """Odometry: absurd stamps (with otherwise valid content), non-finite and huge values, unnormalisable
    quaternions."""
    out = []
    p0 = SaneState.P0
    bad_stamps = [_time(-100), _time(-1, 999_999_999), _time(5, 4_294_967_295), _time(2 ** 31 - 1, 999_999_999),
                  _time(2 ** 31 - 1), _time(0), _time(7)]
    for st in bad_stamps:  # a lone odom never completes a state with these stamps: rejected or left unpaired
        m = cv.odometry_msg(0, "world", f"{ns}/vehicle", p0, [0, 0, 0, 1.0], np.zeros(6))
        m.header.stamp = st
        out.append(m)
    for pos in ([HUGE, 0, 0], [NAN, 0, 0], [INF, 0, 0], [0, -INF, 0], [1e7, 0, 0], [-HUGE, HUGE, -HUGE]):
        m = Odometry()
        m.header.stamp = _time(300)
        m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z = (float(x) for x in pos)
        m.pose.pose.orientation.w = 1.0
        out.append(m)
    for quat in ([0, 0, 0, 0], [NAN, 0, 0, 1], [HUGE, HUGE, HUGE, HUGE], [1e-20, 0, 0, 0], [0, 0, 0, 5.0],
                 [INF, 0, 0, 0], [0, 0, 0, 0.1]):
        m = Odometry()
        m.header.stamp = _time(301)
        m.pose.pose.orientation = _quat(*quat)
        out.append(m)
    for tw in ([NAN] * 6, [INF, 0, 0, 0, 0, 0], [0, 0, 0, HUGE, 0, 0], [1e5, 0, 0, 0, 0, 0]):
        m = Odometry()
        m.header.stamp = _time(302)
        m.pose.pose.orientation.w = 1.0
        m.twist.twist = _twist(*tw)
        out.append(m)
    return out


def fuzz_joint_states(model, ns):
    names = list(model.joint_names)
    out = []
    for st in (_time(-100), _time(3, 4_294_967_295), _time(2 ** 31 - 2), _time(11)):
        m = cv.joint_state_msg(0, names, SaneState.J0, np.zeros(6))
        m.header.stamp = st
        out.append(m)

    def js(nm, pos, vel, sec=400):
        m = JointState()
        m.header.stamp = _time(sec)
        m.name, m.position, m.velocity = list(nm), [float(x) for x in pos], [float(x) for x in vel]
        return m

    z = [0.0] * 6
    out += [js(names, [HUGE] * 6, z), js(names, [NAN] + z[1:], z), js(names, z, [INF] + z[1:]),
            js(names, z, [-HUGE] * 6), js(names, [1e7] * 6, z),
            js(names[:5], z[:5], z[:5]), js(names, z[:5], z), js(names, z, z[:3]), js([], [], []),
            js(names + ["joint1"], z + [1.0], z + [0.0]), js(["a", "b", "c", "d", "e", "f"], z, z),
            js(names, [], []), js([n.upper() for n in names], z, z),
            js(names * 2000, [0.0] * 12000, [0.0] * 12000)]  # 12000 entries, every joint named 2000 times
    return out


def fuzz_joint_reference(model, big=True):
    names = list(model.joint_names)
    z, d = [0.0] * 6, _dur(1.0)
    J0 = SaneState.J0
    out = [
        _joint_traj(["nope"], [(d, [0.1], [], [])]),
        _joint_traj(names + ["joint1"], [(d, z + [0.0], [], [])]),
        _joint_traj([], [(d, [], [], [])]),
        _joint_traj(names, []),
        _joint_traj(names, [(d, [HUGE] * 6, [], [])]),
        _joint_traj(names, [(d, [NAN] * 6, [], [])]),
        _joint_traj(names, [(d, [INF] + z[1:], [], [])]),
        _joint_traj(names, [(d, [1e6] * 6, [], [])]),
        _joint_traj(names, [(d, J0 + 4.0, [], [])]),  # beyond the URDF limits (±pi) widened by 10 %
        _joint_traj(names, [(d, z[:5], [], [])]),
        _joint_traj(names, [(d, z, z[:2], [])]),
        _joint_traj(names, [(d, z, [], [1.0] * 7)]),
        _joint_traj(names, [(d, z, [1e300] * 6, [])]),
        _joint_traj(names, [(d, z, [], [NAN] * 6)]),
        _joint_traj(names, [(d, z, [2e3] * 6, [])]),
        _joint_traj(names, [(d, z, [], [2e4] * 6)]),
        _joint_traj(names, [(_dur(-1, 0), z, [], [])]),
        _joint_traj(names, [(_dur(1, 4_294_967_295), z, [], [])]),
        _joint_traj(names, [(_dur(2 ** 31 - 1, 0), z, [], [])]),
        _joint_traj(names, [(_dur(1.0), z, [], []), (_dur(1.0), z, [], [])]),
        _joint_traj(names, [(_dur(2.0), z, [], []), (_dur(1.0), z, [], [])]),
        _joint_traj(names, [(_dur(0, 1), J0 + 1.5, [], [])]),  # a 1.5 rad step in 1 ns
        _joint_traj(names, [(_dur(0.0), J0, [], []), (_dur(0, 100), J0 + 0.5, [], [])]),
        _joint_traj(names, [(_dur(0.0), J0, [], []), (_dur(0.0011), J0 + 1.5, [], [])]),  # 1e6 rad/s^2
        _joint_traj(names, [(d, J0, [], [])], stamp=_time(-100)),
        _joint_traj(names, [(d, J0, [], [])], stamp=_time(5, 4_294_967_295)),
        _joint_traj(names, [(d, J0, [], [])], stamp=_time(2 ** 31 - 1)),
        _joint_traj(names, [(_dur(0.0), [-3.3, 3.7, -3.3, 3.6, -3.4, 3.7], [], [])]),  # far but valid: saturates
    ]
    if big:
        many = [(_dur(0.01 * (i + 1)), J0, [], []) for i in range(cn.MAX_POINTS + 1)]
        out.append(_joint_traj(names, many))  # one point too many
        huge = JointTrajectory(joint_names=names)
        huge.points = [JointTrajectoryPoint(positions=list(J0), time_from_start=_dur(0.01 * (i + 1)))
                       for i in range(100_000)]
        out.append(huge)  # 10^5 points: refused before it is decoded
        out.append(_joint_traj(names, [(d, [0.0] * 1_000_000, [], [])]))  # 10^6 positions in one point
        valid = [(_dur(0.01 * i), J0 + 0.05 * math.sin(0.01 * i), [], []) for i in range(cn.MAX_POINTS)]
        out.append(_joint_traj(names, valid))  # 10^4 valid points: built on the worker thread
    return out


def fuzz_base_reference(model, ns, big=True):
    d = _dur(1.0)
    p0 = SaneState.P0
    ok = _tf(p0)
    out = [
        _base_traj([(d, [_tf([1e308, 0, 0])], [], [])]),  # the finding: killed the controller
        _base_traj([(d, [_tf([NAN, 0, 0])], [], [])]),
        _base_traj([(d, [_tf([0, INF, 0])], [], [])]),
        _base_traj([(d, [_tf([1e7, 0, 0])], [], [])]),
        _base_traj([(d, [_tf(p0, (0, 0, 0, 0))], [], [])]),
        _base_traj([(d, [_tf(p0, (NAN, 0, 0, 1))], [], [])]),
        _base_traj([(d, [_tf(p0, (HUGE, HUGE, 0, 0))], [], [])]),
        _base_traj([(d, [_tf(p0, (0, 0, 0, 1e-30))], [], [])]),
        _base_traj([(d, [], [], [])]),
        _base_traj([(d, [ok, ok], [], [])]),
        _base_traj([(d, [ok], [_twist(0, 0, 0, 0, 0, 0)] * 2, [])]),
        _base_traj([(d, [ok], [_twist(NAN, 0, 0, 0, 0, 0)], [])]),
        _base_traj([(d, [ok], [_twist(1e300, 0, 0, 0, 0, 0)], [])]),
        _base_traj([(d, [ok], [], [_twist(0, 0, 0, 0, 0, 1e5)])]),
        _base_traj([]),
        _base_traj([(d, [ok], [], [])], names=["not_the_base"]),
        _base_traj([(d, [ok], [], [])], names=[f"{ns}/vehicle", "x"]),
        _base_traj([(_dur(-5, 0), [ok], [], [])]),
        _base_traj([(_dur(1, 2_000_000_000), [ok], [], [])]),
        _base_traj([(_dur(2.0), [ok], [], []), (_dur(2.0), [ok], [], [])]),
        _base_traj([(_dur(0, 1), [_tf(p0 + [1.5, 0, 0])], [], [])]),
        _base_traj([(_dur(0.0), [ok], [], []), (_dur(0.0011), [_tf(p0 + [1.5, 0, 0])], [], [])]),
        _base_traj([(d, [ok], [], [])], stamp=_time(-1)),
        _base_traj([(d, [ok], [], [])], stamp=_time(2 ** 31 - 1, 999_999_999)),
        _base_traj([(_dur(0.0), [_tf([9e5, -9e5, 9e5], (0.3, -0.5, 0.7, 0.2))], [], [])]),  # far but valid
    ]
    if big:
        out.append(_base_traj([(_dur(0.01 * (i + 1)), [ok], [], []) for i in range(cn.MAX_POINTS + 1)]))
        huge = MultiDOFJointTrajectory()
        huge.points = [MultiDOFJointTrajectoryPoint(transforms=[ok], time_from_start=_dur(0.01 * (i + 1)))
                       for i in range(100_000)]
        out.append(huge)
        out.append(_base_traj([(_dur(0.01 * i), [_tf(p0 + [0.02 * math.sin(0.01 * i), 0, 0])], [], [])
                               for i in range(cn.MAX_POINTS)]))
    return out


# ------------------------------------------------------------------------------------------ commands


def limits(model):
    return cn.command_limits(model, cn.ControllerSettings())


def expected_command(model, q, v, q_d):
    """The wrench and the efforts the controller publishes for state (q, v) and a held reference q_d."""
    tau = ComputedTorque(model, kp=KP, kd=KD)(q, v, q_d, np.zeros(model.nv), np.zeros(model.nv))
    B = model.velocity_map(q)
    W = np.linalg.pinv(B.T) @ tau[:6]
    return W, tau[6:]


def _reference_messages(model, ns, dp, yaw, dj):
    """A held reference: one point at time 0 (stamp 0: from the newest state), and its configuration."""
    p = SaneState.P0 + dp
    quat = cv.quaternion_from_rpy([0.0, 0.0, yaw])
    joints = SaneState.J0 + dj
    base = _base_traj([(_dur(0.0), [_tf(p, quat)], [], [])], names=[f"{ns}/vehicle"])
    jt = _joint_traj(model.joint_names, [(_dur(0.0), joints, [], [])])
    return base, jt, model.configuration_from_pose(p, quat, joints=joints)


class Commands:
    def __init__(self, probe, ns):
        self.wrench = Recorder(probe, WrenchStamped, f"/{ns}/cmd_wrench", depth=20000)
        self.joint = Recorder(probe, JointState, f"/{ns}/joint_command", depth=20000)
        self.effort = Recorder(probe, Float64MultiArray, f"/{ns}/cmd_joint_effort", depth=20000)

    def latest_match(self, W, effort, since_stamp, tol=1e-9):
        """A command pair stamped >= since_stamp equal to (W, effort)."""
        scale_w = max(1.0, float(np.abs(W).max()))
        scale_e = max(1.0, float(np.abs(effort).max()))
        ws = {cv.ns_from_time(m.header.stamp) for m in self.wrench.messages[-50:]
              if cv.ns_from_time(m.header.stamp) >= since_stamp
              and np.abs(cv.wrench_from_msg(m.wrench) - W).max() <= tol * scale_w}
        js = {cv.ns_from_time(m.header.stamp) for m in self.joint.messages[-50:]
              if cv.ns_from_time(m.header.stamp) >= since_stamp
              and np.abs(np.array(m.effort) - effort).max() <= tol * scale_e}
        return bool(ws & js)

    def check_bounds(self, max_force, max_torque, max_effort):
        """(commands checked, non-finite, beyond limits), asserting nothing."""
        n, nonfinite, beyond = 0, 0, 0
        for m in self.wrench.messages:
            W = cv.wrench_from_msg(m.wrench)
            n += 1
            if not np.all(np.isfinite(W)):
                nonfinite += 1
            elif (np.linalg.norm(W[:3]) > max_force * (1 + 1e-12)
                  or np.linalg.norm(W[3:]) > max_torque * (1 + 1e-12)):
                beyond += 1
        for e in [np.array(m.effort) for m in self.joint.messages] + [np.array(m.data) for m in self.effort.messages]:
            n += 1
            if not np.all(np.isfinite(e)):
                nonfinite += 1
            elif np.any(np.abs(e) > max_effort * (1 + 1e-12)):
                beyond += 1
        return n, nonfinite, beyond


# --------------------------------------------------------------------------------------------- tests


def test_bounds_and_limits_from_the_model(model):
    max_force, max_torque, max_effort = limits(model)
    assert max_force == pytest.approx(100.0 * 138.1) and max_torque == pytest.approx(100.0 * 138.1)
    assert max_effort.tolist() == [150.0, 150.0, 80.0, 30.0, 30.0, 20.0]  # the URDF's <limit effort>
    lo, hi = cn.reference_position_bounds(model)
    assert np.allclose(lo, -math.pi - 0.2 * math.pi) and np.allclose(hi, math.pi + 0.2 * math.pi)
    custom = cn.ControllerSettings(max_wrench=(50.0, 5.0), max_effort=7.0)
    assert cn.command_limits(model, custom)[:2] == (50.0, 5.0)
    assert cn.command_limits(model, custom)[2].tolist() == [7.0] * 6
    with pytest.raises(cn.ParameterError, match="one value per joint"):
        cn.command_limits(model, cn.ControllerSettings(max_effort=(1.0, 2.0)))
    body = Model.rigid_body("se3", mass=2.0, inertia=np.diag([0.1, 0.2, 0.3]))
    assert cn.command_limits(body, cn.ControllerSettings())[:2] == (200.0, 200.0)
    # a 1.5 rad step in 1 ns asks for ~1e19 rad/s^2: far beyond MAX_ACCELERATION
    vmax, amax = Reference(1, [0.0, 1e-9], [[0.0], [1.5]]).peak_rates()
    assert amax[0] > 1e18 and vmax[0] > 1e9
    vmax, amax = Reference(1, [0.0, 1.0], [[0.0], [1.0]]).peak_rates()
    assert vmax[0] == pytest.approx(1.875) and amax[0] == pytest.approx(10 / math.sqrt(3), rel=0.02)


def test_fuzzed_inputs_never_kill_the_controller(probe, fuzz_controller, model):
    proc, ns = fuzz_controller, "fuzz"
    alive = [proc]
    sane = SaneState(model, ns)
    odom_pub = probe.node.create_publisher(Odometry, f"/{ns}/odom", 10)
    js_pub = probe.node.create_publisher(JointState, f"/{ns}/joint_states", 10)
    jref_pub = probe.node.create_publisher(JointTrajectory, f"/{ns}/joint_reference", REFERENCE_QOS)
    bref_pub = probe.node.create_publisher(MultiDOFJointTrajectory, f"/{ns}/base_reference", REFERENCE_QOS)
    cmds = Commands(probe, ns)
    diags = Recorder(probe, DiagnosticArray, f"/{ns}/controller_node/diagnostics")
    pubs = {"odom": odom_pub, "joint_states": js_pub, "joint_reference": jref_pub, "base_reference": bref_pub}
    probe.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values())
                     and cmds.wrench.sub.get_publisher_count() > 0 and diags.sub.get_publisher_count() > 0,
                     what="the controller's topics", alive=alive)
    t = [T0]

    def feed(pose=None, joints=None, stamp=None):
        if stamp is None:
            t[0] += STEP
        odom, js = sane.messages(t[0] if stamp is None else stamp, pose, joints)
        publish(odom_pub, odom)  # the flood's writer: it may still be sending a large odom sample
        publish(js_pub, js)

    def publish(pub, data):
        for _ in range(200):  # a writer still sending a large sample refuses the next one for a while
            try:
                return pub.publish(data)
            except Exception:  # noqa: BLE001 - rclpy's RCLError: "cannot publish data"
                probe.spin_for(0.02)
        pub.publish(data)

    def feed_until(predicate, what, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{proc.log_tail()}"
            proc.check_running()
            feed()
            probe.spin_for(0.01)

    max_force, max_torque, max_effort = limits(model)

    def track(dp, yaw, dj):
        base, jt, q_d = _reference_messages(model, ns, dp, yaw, dj)
        W, effort = expected_command(model, sane.q, sane.v, q_d)
        assert np.linalg.norm(W[:3]) < max_force and np.linalg.norm(W[3:]) < max_torque
        assert np.all(np.abs(effort) < max_effort), "the sane reference must not saturate"
        since = t[0]
        bref_pub.publish(base)
        jref_pub.publish(jt)
        feed_until(lambda: cmds.latest_match(W, effort, since), "the command of the sane reference")
        return W, effort

    # before: a sane reference is tracked (the command is the law's for the state and that reference)
    feed_until(lambda: len(cmds.wrench) > 0 and len(cmds.joint) > 0, "the first commands")
    W_a, e_a = track([0.3, -0.2, 0.1], 0.2, [0.2, -0.1, 0.1, 0.2, -0.2, 0.1])

    # the flood: every topic in turn, a sane state every 5 ms of wall clock meanwhile
    sets = {"odom": fuzz_odom(model, ns), "joint_states": fuzz_joint_states(model, ns),
            "joint_reference": fuzz_joint_reference(model), "base_reference": fuzz_base_reference(model, ns)}
    sent, wall = {}, {}
    for topic, msgs in sets.items():
        small = [serialize_message(m) for m in msgs if len(getattr(m, "points", ())) < 1000
                 and len(getattr(m, "name", ())) < 1000]
        big = [serialize_message(m) for m in msgs
               if (len(getattr(m, "points", ())) >= 1000 or len(getattr(m, "name", ())) >= 1000)]
        pub = pubs[topic]
        n, k = 0, 0
        start = last_feed = time.monotonic()
        while n < FLOOD:
            if big and n % (FLOOD // len(big)) == 0 and n // (FLOOD // len(big)) < len(big):
                publish(pub, big[n // (FLOOD // len(big))])
                probe.spin_for(0.05)  # let a large sample leave the writer's history before the next one
            else:
                publish(pub, small[k % len(small)])
                k += 1
            n += 1
            now = time.monotonic()
            if now - last_feed > 0.005:
                feed()
                last_feed = now
            while n > RATE * (time.monotonic() - start):  # paced: the controller sees most of them
                probe.executor.spin_once(timeout_sec=0.0005)
        sent[topic], wall[topic] = n, time.monotonic() - start
        proc.check_running()
        probe.spin_for(0.05)

    # complete states with absurd stamps: single ones (rejected), ...
    rng = np.random.default_rng(9)
    singles = 0
    for s in rng.integers(0, 2 ** 31 - 1, size=300):
        stamp = int(s) * NS + int(rng.integers(0, NS))
        if abs(stamp - t[0]) < 60 * NS:
            continue
        feed(stamp=stamp)
        singles += 1
        feed()
        feed()
        probe.spin_for(0.002)
    # ... a run on a far time line, which becomes the time base at its 3rd state, and the sane stream, which
    # takes it back after 3 states
    far = (2 ** 31 - 100) * NS
    for k in range(5):
        feed(stamp=far + k * STEP, pose=(SaneState.P0 + [0.5, 0, 0], np.array([0.0, 0.0, 0.0, 1.0])))
        probe.spin_for(0.01)
    assert proc.wait_for_log("time base changed", timeout=TIMEOUT), proc.log_tail()

    # a far but valid base reference, alone (the flood's own may be among the references a busy controller drops):
    # installed and tracked, its command saturates at the limits
    def saturated() -> int:
        return int(cv.values_from_status(diags.messages[-1].status[0]).get("saturated_commands", 0)) if diags.messages \
            else 0

    bref_pub.publish(_base_traj([(_dur(0.0), [_tf([9e5, -9e5, 9e5], (0.3, -0.5, 0.7, 0.2))], [], [])],
                                names=[f"{ns}/vehicle"]))
    feed_until(lambda: saturated() > 0, "a saturated command for the far reference (diagnostics)")

    # after: alive, and a new sane reference is tracked again
    proc.check_running()
    W_b, e_b = track([-0.2, 0.1, 0.0], -0.1, [-0.15] * 6)
    assert not np.allclose(W_a, W_b) and not np.allclose(e_a, e_b)
    mark = time.monotonic()
    feed_until(lambda: any(a > mark for a in diags.arrival), "the controller's diagnostics")
    stats = cv.values_from_status(diags.messages[-1].status[0])
    proc.check_running()

    n, nonfinite, beyond = cmds.check_bounds(max_force, max_torque, max_effort)
    report = (f"sent per topic {sent} (wall s {({k: round(v, 1) for k, v in wall.items()})}), "
              f"{singles} single absurd-stamp states; controller counts {stats}; "
              f"commands checked {n}, non-finite {nonfinite}, beyond the limits {beyond}")
    print(report)
    assert all(v >= FLOOD for v in sent.values())
    assert nonfinite == 0 and beyond == 0, report
    assert stats["saturated_commands"] > 0, report  # the far-but-valid reference saturates
    assert stats["control_errors"] == 0, report  # every malformed input was refused by a check, none by a crash
    for topic in sets:
        assert stats[f"rejected_{topic}"] > 0, report
    assert stats["time_base_changes"] == 2, report
    assert "Traceback" not in proc.log_text()


def _set_parameter(probe, ns, name, value_msg):
    req = SetParameters.Request(parameters=[ParameterMsg(name=name, value=value_msg)])
    return probe.call(SetParameters, f"/{ns}/controller_node/set_parameters", req).results[0]


def test_unsafe_parameter_changes_are_refused(probe, fuzz_controller):
    proc = fuzz_controller
    res = _set_parameter(probe, "fuzz", "use_sim_time", ParameterValue(type=ParameterType.PARAMETER_BOOL,
                                                                       bool_value=True))
    assert not res.successful and "use_sim_time is fixed at start-up" in res.reason, res
    res = _set_parameter(probe, "fuzz", "kp", ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                             double_value=1e9))
    assert not res.successful and "read-only" in res.reason, res
    res = _set_parameter(probe, "fuzz", "max_effort", ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                                     double_value=1e9))
    assert not res.successful and res.reason, res
    proc.check_running()


def test_restarted_controller_receives_its_reference(tmp_path):
    """dynamics_node + controller_node + reference_node on one rigid body (``config/rigid_body.yaml``). The
    controller brings the body to the goal; it is killed (SIGKILL) and the body pushed away; a new controller
    process must get the reference (published once, before it existed) and bring the body back."""
    ros_env_defaults()
    ns = "restart"
    goal = np.array([1.5, -0.5, 1.0])
    ref_params = dict(base_times=[1.0], base_positions=goal.tolist(), base_rpy=[0.0, 0.0, 0.3])

    def controller(k):
        return NodeProcess(CONTROLLER, name="controller_node", namespace=ns, params_file=BODY_PARAMS,
                           log_file=tmp_path / f"controller{k}.log")

    dyn = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=BODY_PARAMS,
                      log_file=tmp_path / "dynamics.log")
    ctl = controller(1)
    ref = NodeProcess(REFERENCE, name="reference_node", namespace=ns, parameters=ref_params,
                      log_file=tmp_path / "reference.log")
    ctl2 = controller(2)
    with Probe("test_restart_probe", TIMEOUT) as probe, running([dyn, ctl, ref]):
        odom = Recorder(probe, Odometry, f"/{ns}/odom", depth=100)
        push = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10)

        def distance():
            if not odom.messages:
                return math.inf
            p, _ = cv.pose_from_msg(odom.messages[-1].pose.pose)
            return float(np.linalg.norm(p - goal))

        probe.spin_until(lambda: distance() < 0.02, timeout=3 * TIMEOUT, what="the body at the goal",
                         alive=[dyn, ctl, ref])
        assert ref.wait_for_log("reference published", timeout=TIMEOUT), ref.log_tail()
        ctl.send_signal(signal.SIGKILL)
        assert ctl.wait(timeout=TIMEOUT) is not None
        # push the body away (held by the dynamics node for cmd_timeout, 0.5 s): it drifts at 0.5 m/s
        probe.spin_until(lambda: push.get_subscription_count() > 0, what="the dynamics node's cmd_wrench",
                         alive=[dyn, ref])
        pushed = WrenchStamped()
        pushed.wrench.force.x = 1.0
        push.publish(pushed)
        probe.spin_until(lambda: distance() > 0.3, timeout=TIMEOUT, what="the body pushed away", alive=[dyn, ref])
        probe.node.destroy_publisher(push)
        with running([ctl2]):
            assert ctl2.wait_for_log("first state", timeout=TIMEOUT), ctl2.log_tail()
            probe.spin_for(0.1)
            away = distance()
            assert ctl2.wait_for_log("base_reference: 2 points", timeout=TIMEOUT), (
                "the restarted controller did not get the reference:\n" + ctl2.log_tail())
            probe.spin_until(lambda: distance() < 0.02, timeout=3 * TIMEOUT,
                             what=f"the body back at the goal (it was {away:.2f} m away)", alive=[dyn, ctl2, ref])
        print(f"restart: the body was {away:.2f} m from the goal when the new controller took its first state; "
              f"back within 0.02 m")
