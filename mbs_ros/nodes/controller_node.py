"""Controller node: tracks base and joint references on the model of ``dynamics_node``, using the explicit
dynamics of :mod:`mbs_ros.controllers` (computed torque, Slotine–Li passivity-based, PD + gravity).

Run it with ``ros2 run mbs_ros controller_node --ros-args -r __ns:=/uvms --params-file config/uvms_6dof.yaml``
or, without a ROS install, ``python -m mbs_ros.nodes.controller_node`` with the same arguments. The control laws
are :mod:`mbs_ros.controllers`; this node only assembles the state, the reference and the commands.

Parameters (model source as ``dynamics_node``: ``robot_description``, ``model_file``, ``base_group``,
``gravity``, and for a single body ``mass``/``inertia``/``com``; see :mod:`mbs_ros.nodes.model_source`):

- ``mass_scale`` (1.0): multiplies every mass and inertia of the controller's model (a deliberately wrong
  model for robustness tests); centres of mass are kept.
- ``law`` (computed_torque): computed_torque | passivity | pd_gravity.
- ``kp`` (9.0), ``kd`` (6.0), ``lambda`` (3.0): a positive scalar or one positive value per velocity component
  (base components first, body frame, linear first, then the joints in ``joint_names`` order). computed_torque
  and pd_gravity use kp and kd; passivity uses lambda and kd (its kd acts through M⁻¹: scale it with the
  inertia). With a perfect model computed_torque gives each log-error component ë + kd ė + kp e = 0.
- ``control_rate`` (100 Hz): commands are computed and published at this rate from the newest complete state;
  ``state_timeout`` (0.2 s): a state older than this stops commanding: zero efforts and wrench are published
  once, with a throttled warning, and commanding resumes with the next fresh state. Both run on the node's
  clock: the wall clock, or with ``use_sim_time:=true`` the /clock time (the timer fires as /clock advances and
  not while it stands still; a state's age counts from its arrival, or from its stamp if that is later, since
  a state may arrive before the /clock message of its own time).
- ``lockstep`` (false): no timer and no staleness: one command per complete state (odom + joint_states with the
  same stamp), computed as soon as the state is complete and stamped with it, as ``dynamics_node``'s lockstep
  waits for. A state received again with the stamp of the last command (the dynamics node sends it again when
  it waited too long) gets the same command again.
- ``world_frame`` (world), ``base_frame`` (default: as dynamics_node, the robot's base link or base_link).

Topics (relative to the node's namespace):

- sub ``odom`` (``nav_msgs/Odometry``, floating bases) and ``joint_states`` (``sensor_msgs/JointState``,
  robots with joints; mapped by name, other names ignored): the state. Messages with the same stamp are paired
  into ``(q, v)`` in the model's layout (continuous joints as (cos, sin)); the newest complete pair is used.
- sub ``joint_reference`` (``trajectory_msgs/JointTrajectory``): joint names mapped by name (an unknown or
  repeated name rejects the message); points with ``time_from_start`` strictly increasing, ``positions`` (rad,
  m), optional ``velocities`` and ``accelerations`` (missing: rest). Joints the message does not name hold
  their current reference.
- sub ``base_reference`` (``trajectory_msgs/MultiDOFJointTrajectory``, floating bases): no joint name or the
  base frame's name; per point one transform (base pose in ``world_frame``), optional velocity and acceleration
  (body frame, linear first). Poses must be on the base group (e.g. no roll on se2).
- Both references start at ``header.stamp`` (simulation time, as the state stamps), or at the newest state's
  stamp when it is zero. If the first point's ``time_from_start`` is > 0, the current reference is prepended at
  0, so the reference moves smoothly from where it was. Between points: quintic interpolation on the group
  (:class:`mbs_ros.controllers.Reference`; geodesic rest-to-rest without waypoint velocities); after the last
  point it is held. Before any reference: the first state received is held (zero velocity). A message arriving
  before any state is rejected.
- pub ``cmd_wrench`` (``geometry_msgs/WrenchStamped``, floating bases): the base generalised force lifted to a
  body-frame wrench at the base origin ``W = (Bᵀ)⁺ τ_base`` (``H τ_base`` for the SE(3) subgroups),
  ``frame_id`` the base frame, stamped with the stamp of the state it was computed from.
- pub ``joint_command`` (``sensor_msgs/JointState``, robots with joints): the joint efforts by name, stamped with
  the stamp of the state they were computed from (the joints' command channel of lockstep).
- pub ``cmd_joint_effort`` (``std_msgs/Float64MultiArray``, robots with joints): the same efforts in
  ``joint_names`` order, for consumers of ros2_control's forward command interface (it carries no stamp).
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, MultiDOFJointTrajectory

from mbs_ros.controllers import ComputedTorque, PassivityBased, PDGravity, Reference
from mbs_ros.dynamics import Model
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes import model_source as ms
from mbs_ros.nodes import params as prm
from mbs_ros.nodes.model_source import ParameterError
from mbs_ros.nodes.runtime import run_node

LAWS = ("computed_torque", "passivity", "pd_gravity")
WARN_THROTTLE_S = 2.0
_KEEP_STAMPS = 20  # unpaired odom/joint_states kept while waiting for their partner

__all__ = ["ControllerNode", "ControllerSettings", "ParameterError", "settings_from_values", "make_law", "main"]


@dataclass(frozen=True)
class ControllerSettings:
    robot_description: str = ""
    model_file: str = ""
    base_group: str = "se3"
    mass: float = 1.0
    inertia: Tuple[float, ...] = (0.01, 0.0, 0.0, 0.01, 0.0, 0.01)
    com: Tuple[float, ...] = (0.0, 0.0, 0.0)
    gravity: Tuple[float, ...] = (0.0, 0.0, -9.81)
    mass_scale: float = 1.0
    law: str = "computed_torque"
    kp: object = 9.0
    kd: object = 6.0
    # "lambda" is a Python keyword: the field is lambda_, the ROS parameter "lambda"
    lambda_: object = 3.0
    control_rate: float = 100.0
    state_timeout: float = 0.2
    world_frame: str = "world"
    base_frame: str = "base_link"
    lockstep: bool = False


DEFAULTS = ControllerSettings()

_PARAMETERS: Dict[str, Tuple[str, dict]] = {
    "robot_description": ("URDF XML of the robot (as dynamics_node).", {"read_only": True}),
    "model_file": ("URDF, xacro or robot YAML file (as dynamics_node).", {"read_only": True}),
    "base_group": ("Base group (as dynamics_node): " + ", ".join(ms.TREE_BASES) + ".", {"read_only": True}),
    "mass": ("Single body only: mass [kg].", {"read_only": True}),
    "inertia": ("Single body only: [ixx, ixy, ixz, iyy, iyz, izz] about the c.o.m. [kg m^2].", {"read_only": True}),
    "com": ("Single body only: centre of mass in the body frame [m].", {"read_only": True}),
    "gravity": ("Gravity in the world frame [m/s^2] (default: the robot YAML's, else [0, 0, -9.81]).",
                {"read_only": True}),
    "mass_scale": ("Multiplies every mass and inertia of the controller's model (robustness tests); > 0.",
                   {"read_only": True}),
    "law": ("Control law: " + ", ".join(LAWS) + ".", {"read_only": True}),
    "kp": ("Position gain (computed_torque, pd_gravity): scalar or one per velocity component (nv).",
           {"read_only": True}),
    "kd": ("Velocity gain: scalar or one per velocity component (nv).", {"read_only": True}),
    "lambda": ("Slotine-Li Lambda (passivity): scalar or one per velocity component (nv).", {"read_only": True}),
    "control_rate": ("Command rate [Hz] on the node clock (the wall clock, or /clock with use_sim_time), > 0; "
                     "not used in lockstep.", {"read_only": True, "floating_point_range": (0.001, 100000.0)}),
    "state_timeout": ("A state older than this [s of the node clock] stops commanding (zero command once, "
                      "throttled warning); not used in lockstep.",
                      {"read_only": True, "floating_point_range": (0.0, 1.0e6)}),
    "lockstep": ("Compute and publish one command per complete state (odom + joint_states with equal stamps), "
                 "stamped with the state's stamp, instead of on a timer (dynamics_node lockstep).",
                 {"read_only": True}),
    "world_frame": ("Fixed frame of odom and base_reference.", {"read_only": True}),
    "base_frame": ("Base frame (as dynamics_node); prefixed with the namespace.", {"read_only": True}),
}


def _field(name: str) -> str:
    return "lambda_" if name == "lambda" else name


def _descriptor(name: str, value) -> ParameterDescriptor:
    description, extra = _PARAMETERS[name]
    d = ParameterDescriptor(name=name, description=description, read_only=bool(extra.get("read_only", False)))
    if isinstance(value, str):
        d.type = ParameterType.PARAMETER_STRING
    elif isinstance(value, bool):
        d.type = ParameterType.PARAMETER_BOOL
    else:
        d.dynamic_typing = True  # numbers: ints accepted; gains: scalar or list
    if "floating_point_range" in extra:
        lo, hi = extra["floating_point_range"]
        d.floating_point_range = [FloatingPointRange(from_value=lo, to_value=hi, step=0.0)]
    return d


def _gain(values, name):
    v = values[name]
    if isinstance(v, bool) or isinstance(v, str):
        raise ParameterError(f"{name} must be a positive number or a list of positive numbers, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if hasattr(v, "__len__") and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return tuple(float(x) for x in v)
    raise ParameterError(f"{name} must be a positive number or a list of positive numbers, got {v!r}")


def settings_from_values(values: Dict[str, object], source: ms.Source) -> ControllerSettings:
    """Validate raw parameter values; ParameterError with the reason. Gains are checked against the model in
    :func:`make_law`."""

    def text(name, choices=None, allow_empty=False):
        return prm.text(values, name, choices, allow_empty)

    s = ControllerSettings(
        robot_description=text("robot_description", allow_empty=True),
        model_file=text("model_file", allow_empty=True),
        base_group=text("base_group", ms.TREE_BASES if source.multibody else ms.BASES),
        mass=prm.number(values, "mass", lo=0.0, lo_open=True),
        inertia=prm.vector(values, "inertia", 6),
        com=prm.vector(values, "com", 3),
        gravity=prm.vector(values, "gravity", 3),
        mass_scale=prm.number(values, "mass_scale", lo=0.0, lo_open=True),
        law=text("law", LAWS),
        kp=_gain(values, "kp"),
        kd=_gain(values, "kd"),
        lambda_=_gain(values, "lambda"),
        control_rate=prm.number(values, "control_rate", lo=0.0, lo_open=True),
        state_timeout=prm.number(values, "state_timeout", lo=0.0, lo_open=True),
        world_frame=text("world_frame"),
        base_frame=text("base_frame"),
        lockstep=prm.flag(values, "lockstep"),
    )
    if source.multibody:
        from mbs_ros.nodes.dynamics_node import base_link_of

        if s.base_frame.lstrip("/") != base_link_of(source):
            raise ParameterError(f"base_frame must name the robot's base link {base_link_of(source)!r} "
                                 f"(or be left unset), got {s.base_frame!r}")
    return s


def build_model(s: ControllerSettings, source: ms.Source) -> Model:
    if source.multibody:
        return ms.build_multibody(source, s.base_group, s.gravity, mass_scale=s.mass_scale)
    ixx, ixy, ixz, iyy, iyz, izz = s.inertia
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]) * s.mass_scale
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Model.rigid_body(base=s.base_group, mass=s.mass * s.mass_scale, inertia=inertia,
                                    com=np.array(s.com), gravity=np.array(s.gravity))
    except ValueError as e:
        raise ParameterError(f"cannot build the {s.base_group} model: {e}") from None


def make_law(model: Model, s: ControllerSettings):
    """The control law of the settings on ``model``; ParameterError naming the gain and the reason."""
    try:
        if s.law == "computed_torque":
            return ComputedTorque(model, kp=s.kp, kd=s.kd)
        if s.law == "pd_gravity":
            return PDGravity(model, kp=s.kp, kd=s.kd)
        return PassivityBased(model, Lambda=s.lambda_, kd=s.kd)
    except ValueError as e:
        msg = str(e).replace("Lambda", "lambda")
        raise ParameterError(f"{s.law} gains: {msg} (velocity layout: {layout_description(model)})") from None


def layout_description(model: Model) -> str:
    nqb, nvb = ms.base_sizes(model)
    base = f"{nvb} base components" if nvb else "no base components (fixed base)"
    joints = ", ".join(model.joint_names) if model.joint_names else "no joints"
    return f"nv = {model.nv}: {base}, then {joints}"


class ControllerNode(Node):
    """See the module docstring. Construct, then call :meth:`configure` (raises ParameterError)."""

    def __init__(self, node_name: str = "controller_node", **kwargs):
        super().__init__(node_name, **kwargs)

    def _declare(self, name, default):
        default = list(default) if isinstance(default, tuple) else default
        try:
            return self.declare_parameter(name, default, _descriptor(name, default)).value
        except Exception as e:  # noqa: BLE001 - rclpy's exceptions differ between distros
            raise ParameterError(str(e) if name in str(e) else f"{name}: {e}") from None

    def configure(self) -> None:
        values = {n: self._declare(n, "") for n in ("robot_description", "model_file")}
        for name, v in values.items():
            if not isinstance(v, str):
                raise ParameterError(f"{name} must be a string, got {v!r}")
        source = ms.load_source(values["robot_description"], values["model_file"])
        defaults = {}
        if source.multibody:
            from mbs_ros.nodes.dynamics_node import base_link_of

            defaults = dict(base_group=ms.default_base(source), gravity=ms.default_gravity(source),
                            base_frame=base_link_of(source))
        for name in _PARAMETERS:
            if name not in values:
                values[name] = self._declare(name, defaults.get(name, getattr(DEFAULTS, _field(name))))
        s = settings_from_values(values, source)
        model = build_model(s, source)
        law = make_law(model, s)
        unknown = sorted(n for n in (getattr(self, "_parameter_overrides", {}) or {})
                         if n not in _PARAMETERS and n != "use_sim_time" and not n.startswith("qos_overrides."))
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))

        self.settings, self.source, self.model, self.law = s, source, model, law
        self.joint_names = tuple(model.joint_names)
        self.nj = len(self.joint_names)
        self.nq_base, self.nv_base = ms.base_sizes(model)
        self.floating = model.group is not None
        ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(ns, s.base_frame)
        self._base_names = {s.base_frame, s.base_frame.lstrip("/"), self.base_frame}

        self._odom: Dict[int, tuple] = {}
        self._joints: Dict[int, tuple] = {}
        self.state: Optional[Tuple[int, np.ndarray, np.ndarray]] = None  # (stamp ns, q, v)
        self._state_arrival_ns = 0  # node clock (wall, or /clock with use_sim_time) when the state arrived
        self._stopped = False
        self._last_tau_stamp = None
        self._last_tau = None
        # references: absolute start (ns) and Reference objects (None until the first state)
        self.base_ref: Optional[Tuple[int, Reference]] = None
        self.joint_ref: Optional[Tuple[int, Reference]] = None

        qos = QoSProfile(depth=10)
        state_qos = QoSProfile(depth=4)  # a controller that lags wants the newest state, not a backlog
        self.pub_wrench = self.create_publisher(WrenchStamped, "cmd_wrench", qos) if self.floating else None
        self.pub_effort = self.create_publisher(Float64MultiArray, "cmd_joint_effort", qos) if self.nj else None
        self.pub_joint_command = self.create_publisher(JointState, "joint_command", qos) if self.nj else None
        if self.floating:
            self.create_subscription(Odometry, "odom", self._on_odom, state_qos)
            self.create_subscription(MultiDOFJointTrajectory, "base_reference", self._on_base_reference, qos)
        if self.nj:
            self.create_subscription(JointState, "joint_states", self._on_joint_states, state_qos)
            self.create_subscription(JointTrajectory, "joint_reference", self._on_joint_reference, qos)
        # lockstep: one command per complete state, from the state callbacks; otherwise a timer on the node clock
        self.timer = None if s.lockstep else self.create_timer(1.0 / s.control_rate, self._on_timer)
        gains = (f"kp {s.kp}, kd {s.kd}" if s.law != "passivity" else f"lambda {s.lambda_}, kd {s.kd}")
        what = source.describe() if source.multibody else f"{s.base_group} body"
        timing = ("lockstep: one command per state, stamped with it" if s.lockstep
                  else f"{s.control_rate:g} Hz, state_timeout {s.state_timeout:g} s")
        self.get_logger().info(
            f"{s.law} on {what} ({s.base_group} base, {layout_description(model)}), {gains}, mass_scale "
            f"{s.mass_scale:g}, {timing}")

    # --------------------------------------------------------------------------------- state

    def _on_odom(self, msg: Odometry) -> None:
        p, quat = cv.pose_from_msg(msg.pose.pose)
        V = cv.twist_from_msg(msg.twist.twist)
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(quat)) and np.all(np.isfinite(V))):
            self.get_logger().warning("odom rejected: non-finite values", throttle_duration_sec=WARN_THROTTLE_S)
            return
        self._odom[cv.ns_from_time(msg.header.stamp)] = (p, quat, V)
        self._trim(self._odom)
        self._assemble()

    def _on_joint_states(self, msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        missing = [j for j in self.joint_names if j not in index]
        if missing or len(msg.position) != len(msg.name) or len(msg.velocity) != len(msg.name):
            self.get_logger().warning(
                f"joint_states rejected: needs position and velocity of {', '.join(missing or self.joint_names)}",
                throttle_duration_sec=WARN_THROTTLE_S)
            return
        pos = np.array([msg.position[index[j]] for j in self.joint_names], dtype=float)
        vel = np.array([msg.velocity[index[j]] for j in self.joint_names], dtype=float)
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(vel))):
            self.get_logger().warning("joint_states rejected: non-finite values",
                                      throttle_duration_sec=WARN_THROTTLE_S)
            return
        self._joints[cv.ns_from_time(msg.header.stamp)] = (pos, vel)
        self._trim(self._joints)
        self._assemble()

    @staticmethod
    def _trim(d: dict) -> None:
        while len(d) > _KEEP_STAMPS:
            del d[min(d)]

    def _assemble(self) -> None:
        """The newest stamp with every part of the state becomes the state."""
        if self.floating and self.nj:
            stamps = set(self._odom) & set(self._joints)
        else:
            stamps = set(self._odom if self.floating else self._joints)
        if not stamps:
            return
        t = max(stamps)
        if self.state is not None and t <= self.state[0]:
            if self.settings.lockstep and t == self.state[0] and self._last_tau_stamp == t:
                # lockstep: the dynamics node sent this state again (our command may have been lost)
                for d in (self._odom, self._joints):
                    d.pop(t, None)
                self._publish(t, self._last_tau, self.state[1])
            return
        model = self.model
        joints = ms.joint_positions_to_q(model, self._joints[t][0]) if self.nj else None
        try:
            if self.floating:
                p, quat, V = self._odom[t]
                q = model.configuration_from_pose(p, quat, joints=joints)
                v = np.array(model.velocity_from_twist(q, V), dtype=float)
            else:
                q = model.configuration_from_pose(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), joints=joints)
                v = np.zeros(model.nv)
        except ValueError as e:
            self.get_logger().warning(f"state rejected: {e}", throttle_duration_sec=WARN_THROTTLE_S)
            return
        if self.nj:
            v[self.nv_base:] = self._joints[t][1]
        first = self.state is None
        self.state = (t, q, v)
        clock = self.get_clock()
        self._state_arrival_ns = clock.now().nanoseconds
        if getattr(clock, "ros_time_is_active", False):
            # /clock time: a state may arrive before the /clock message of its own stamp
            self._state_arrival_ns = max(self._state_arrival_ns, t)
        for d in (self._odom, self._joints):
            for k in [k for k in d if k <= t]:
                del d[k]
        if first:  # hold the start-up state until a reference arrives
            if self.floating:
                self.base_ref = (t, Reference(model.group, [0.0], [q[: self.nq_base]]))
            if self.nj:
                self.joint_ref = (t, Reference(self.nj, [0.0], [self._joint_positions(q)]))
            self.get_logger().info(f"first state at t = {t * 1e-9:.6f} s: holding it until a reference arrives")
        if self.settings.lockstep:
            self._command()

    def _joint_positions(self, q) -> np.ndarray:
        return ms.joint_positions_from_q(self.model, q[self.nq_base:])

    # ----------------------------------------------------------------------------- references

    @staticmethod
    def _eval(ref: Tuple[int, Reference], t_ns: int):
        start, r = ref
        return r((t_ns - start) * 1e-9)

    def _desired(self, t_ns: int):
        model = self.model
        q_d, v_d, a_d = model.neutral(), np.zeros(model.nv), np.zeros(model.nv)
        if self.floating:
            qb, vb, ab = self._eval(self.base_ref, t_ns)
            q_d[: self.nq_base], v_d[: self.nv_base], a_d[: self.nv_base] = qb, vb, ab
        if self.nj:
            qj, vj, aj = self._eval(self.joint_ref, t_ns)
            q_d[self.nq_base:] = ms.joint_positions_to_q(model, qj)
            v_d[self.nv_base:], a_d[self.nv_base:] = vj, aj
        return q_d, v_d, a_d

    def _start_of(self, msg) -> Optional[int]:
        if self.state is None:
            return None
        stamp = cv.ns_from_time(msg.header.stamp)
        return stamp if stamp > 0 else self.state[0]

    @staticmethod
    def _times(points) -> np.ndarray:
        return np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in points])

    def _reject(self, topic: str, reason: str) -> None:
        self.get_logger().warning(f"{topic} rejected: {reason}", throttle_duration_sec=WARN_THROTTLE_S)

    def _on_joint_reference(self, msg: JointTrajectory) -> None:
        start = self._start_of(msg)
        if start is None:
            return self._reject("joint_reference", "no state received yet")
        names = list(msg.joint_names)
        unknown = [n for n in names if n not in self.joint_names]
        if unknown or len(set(names)) != len(names) or not names:
            return self._reject("joint_reference", f"joint names {names} must be distinct names among "
                                                   f"{', '.join(self.joint_names)} (unknown: {unknown})")
        if not msg.points:
            return self._reject("joint_reference", "no points")
        cols = [self.joint_names.index(n) for n in names]
        times = self._times(msg.points)
        n = len(names)
        cur_q, cur_v, cur_a = self._eval(self.joint_ref, start)
        P, Vel, Acc = [], [], []
        has_acc = False
        for i, pt in enumerate(msg.points):
            if len(pt.positions) != n:
                return self._reject("joint_reference", f"point {i}: {len(pt.positions)} positions for {n} joints")
            for field in ("velocities", "accelerations"):
                if len(getattr(pt, field)) not in (0, n):
                    return self._reject("joint_reference", f"point {i}: {field} must be empty or have {n} values")
            q, v, a = cur_q.copy(), np.zeros(self.nj), np.zeros(self.nj)
            q[cols] = pt.positions
            if len(pt.velocities):
                v[cols] = pt.velocities
            if len(pt.accelerations):
                a[cols] = pt.accelerations
                has_acc = True
            P.append(q), Vel.append(v), Acc.append(a)
        if times[0] > 0.0:
            times = np.concatenate([[0.0], times])
            P.insert(0, cur_q), Vel.insert(0, cur_v), Acc.insert(0, cur_a)
            has_acc = has_acc or bool(np.any(cur_a))
        if times[0] < 0.0:
            return self._reject("joint_reference", "time_from_start must not be negative")
        try:
            ref = Reference(self.nj, times, np.array(P), np.array(Vel), np.array(Acc) if has_acc else None)
        except ValueError as e:
            return self._reject("joint_reference", str(e))
        self.joint_ref = (start, ref)
        self.get_logger().info(f"joint_reference: {len(msg.points)} points over {ref.end_time:g} s from "
                               f"t = {start * 1e-9:.6f} s")

    def _on_base_reference(self, msg: MultiDOFJointTrajectory) -> None:
        start = self._start_of(msg)
        if start is None:
            return self._reject("base_reference", "no state received yet")
        names = list(msg.joint_names)
        if len(names) > 1 or (names and names[0] not in self._base_names):
            return self._reject("base_reference", f"joint_names must be empty or [{self.base_frame!r}], got {names}")
        if not msg.points:
            return self._reject("base_reference", "no points")
        model = self.model
        times = self._times(msg.points)
        cur_q, cur_v, cur_a = self._eval(self.base_ref, start)
        q_full = self.state[1].copy()
        P, Vel, Acc = [], [], []
        has_acc = False
        for i, pt in enumerate(msg.points):
            if len(pt.transforms) != 1 or len(pt.velocities) > 1 or len(pt.accelerations) > 1:
                return self._reject("base_reference", f"point {i}: needs one transform and at most one velocity "
                                                      "and acceleration")
            p, quat = cv.transform_from_msg(pt.transforms[0])
            try:
                qb = model.configuration_from_pose(p, quat)[: self.nq_base]
                q_full[: self.nq_base] = qb
                vb = np.zeros(self.nv_base)
                ab = np.zeros(self.nv_base)
                if pt.velocities:
                    vb = model.velocity_from_twist(q_full, cv.twist_from_msg(pt.velocities[0]))[: self.nv_base]
                if pt.accelerations:
                    ab = model.velocity_from_twist(q_full, cv.twist_from_msg(pt.accelerations[0]))[: self.nv_base]
                    has_acc = True
            except ValueError as e:
                return self._reject("base_reference", f"point {i}: {e}")
            P.append(qb), Vel.append(vb), Acc.append(ab)
        if times[0] > 0.0:
            times = np.concatenate([[0.0], times])
            P.insert(0, cur_q), Vel.insert(0, cur_v), Acc.insert(0, cur_a)
            has_acc = has_acc or bool(np.any(cur_a))
        if times[0] < 0.0:
            return self._reject("base_reference", "time_from_start must not be negative")
        try:
            ref = Reference(model.group, times, np.array(P), np.array(Vel), np.array(Acc) if has_acc else None)
        except ValueError as e:
            return self._reject("base_reference", str(e))
        self.base_ref = (start, ref)
        self.get_logger().info(f"base_reference: {len(msg.points)} points over {ref.end_time:g} s from "
                               f"t = {start * 1e-9:.6f} s")

    # ------------------------------------------------------------------------------- control

    def _on_timer(self) -> None:
        if self.state is None:
            return
        age = (self.get_clock().now().nanoseconds - self._state_arrival_ns) * 1e-9
        if age > self.settings.state_timeout:
            self.get_logger().warning(
                f"state is {age:.3f} s old (state_timeout {self.settings.state_timeout:g} s): not commanding",
                throttle_duration_sec=WARN_THROTTLE_S)
            if not self._stopped:
                self._publish(self.state[0], np.zeros(self.model.nv), self.state[1])
                self._stopped = True
            return
        self._stopped = False
        self._command()

    def _command(self) -> None:
        """Publish the command for the newest state (computed once per state)."""
        t, q, v = self.state
        if self._last_tau_stamp != t:
            q_d, v_d, a_d = self._desired(t)
            tau = self.law(q, v, q_d, v_d, a_d)
            if not np.all(np.isfinite(tau)):
                self.get_logger().error("the control law gave a non-finite command: publishing zero",
                                        throttle_duration_sec=WARN_THROTTLE_S)
                tau = np.zeros(self.model.nv)
            self._last_tau_stamp, self._last_tau = t, tau
        self._publish(t, self._last_tau, q)

    def _publish(self, stamp: int, tau: np.ndarray, q: np.ndarray) -> None:
        if self.pub_wrench is not None:
            B = self.model.velocity_map(q)  # V_base = B v_base; tau_base = B^T W
            W = np.linalg.pinv(B.T) @ tau[: self.nv_base]
            self.pub_wrench.publish(cv.wrench_stamped_msg(stamp, self.base_frame, W))
        if self.pub_effort is not None:
            effort = [float(x) for x in tau[self.nv_base:]]
            self.pub_joint_command.publish(cv.joint_state_msg(stamp, self.joint_names, effort=effort))
            self.pub_effort.publish(Float64MultiArray(data=effort))


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    return run_node(ControllerNode, args)


if __name__ == "__main__":
    sys.exit(main())
