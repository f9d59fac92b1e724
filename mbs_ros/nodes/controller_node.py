"""Controller node: tracks base and joint references on the model of ``dynamics_node``, using the explicit
dynamics of :mod:`mbs_ros.controllers` (computed torque, Slotine–Li passivity-based, PD + gravity).

Run it with ``ros2 run mbs_ros controller_node --ros-args -r __ns:=/uvms --params-file config/uvms_6dof.yaml``
or, without a ROS install, ``python -m mbs_ros.nodes.controller_node`` with the same arguments. The control laws
are :mod:`mbs_ros.controllers`; this node only assembles the state, the reference and the commands, and keeps
all three within the bounds below: no input can stop it or make it publish a non-finite or unbounded command.

Parameters (model source as ``dynamics_node``: ``robot_description``, ``model_file``, ``base_group``,
``gravity``, and for a single body ``mass``/``inertia``/``com``; see :mod:`mbs_ros.dynamics.model_source`). All are
read-only; ``use_sim_time`` too (a change at run time is refused with the reason):

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
- ``max_wrench`` ([] = from the model): ``[force, torque]`` [N, N m], the largest norm of the force and of the
  torque of ``cmd_wrench``; a larger one is scaled down along its direction. Default ``[100 m/s² × m, 100 N m/kg
  × m]`` with m the model's total mass: ten g on the whole robot, a guard against absurd commands rather than an
  actuator model (give the real thrust limits).
- ``max_effort`` ([] = from the model): one positive number for every joint, or one per joint (``joint_names``
  order) [N m or N]; each effort is clipped to ±its limit. Default: the URDF's ``<limit effort>`` of the joint
  (``Model.effort_limits`` when the model has it), else ``100 N m/kg × m`` as for the torque.
  Every command that had to be saturated is counted (diagnostics below) and reported by a throttled warning.
- ``max_time_jump`` (5.0 s): the largest forward step between the stamps of consecutive states that is taken
  as time running on (see Time below).
- ``allow_partial_joints_goal`` (false), ``goal_time_tolerance`` (0.0 s, 0 = no limit) and
  ``stopped_velocity_tolerance`` (0.01 rad/s or m/s): FollowJointTrajectory goals (below), as
  joint_trajectory_controller's ``allow_partial_joints_goal``, ``constraints.goal_time`` and
  ``constraints.stopped_velocity_tolerance``.

Topics (relative to the node's namespace):

- sub ``odom`` (``nav_msgs/Odometry``, floating bases) and ``joint_states`` (``sensor_msgs/JointState``,
  robots with joints; mapped by name, other names ignored): the state. Messages with the same stamp are paired
  into ``(q, v)`` in the model's layout (continuous joints as (cos, sin)); each pair is taken as it completes.
- sub ``joint_reference`` (``trajectory_msgs/JointTrajectory``): joint names mapped by name (an unknown or
  repeated name rejects the message); points with ``time_from_start`` strictly increasing, ``positions`` (rad,
  m), optional ``velocities`` and ``accelerations`` (missing: rest). Joints the message does not name hold
  their current reference.
- sub ``base_reference`` (``trajectory_msgs/MultiDOFJointTrajectory``, floating bases): no joint name or the
  base frame's name; per point one transform (base pose in ``world_frame``), optional velocity and acceleration
  (body frame, linear first). Poses must be on the base group (e.g. no roll on se2).
- Both reference subscriptions are reliable and **transient local** (depth 10), as ``reference_node`` publishes:
  a (re)started controller receives the reference published before it. A publisher must be transient local too
  (ROS 2 QoS: a volatile publisher does not match a transient-local subscription), e.g. ``ros2 topic pub
  --qos-durability transient_local``. References are decoded, checked and interpolated on a worker thread, in
  the order they arrive, so a long one never holds the control loop up (at most 32 wait; beyond that the oldest
  waiting one is dropped and counted).
- Both references start at ``header.stamp`` (simulation time, as the state stamps), or at the newest state's
  stamp when it is zero. If the first point's ``time_from_start`` is > 0, the current reference is prepended at
  0, so the reference moves smoothly from where it was. Between points: quintic interpolation on the group
  (:class:`mbs_ros.controllers.Reference`; geodesic rest-to-rest without waypoint velocities); after the last
  point it is held. Before any reference: the first state received is held (zero velocity). A reference that
  arrives before the first state is kept (the newest of each topic) and applied when the first state arrives.
- pub ``cmd_wrench`` (``geometry_msgs/WrenchStamped``, floating bases): the base generalised force lifted to a
  body-frame wrench at the base origin ``W = (Bᵀ)⁺ τ_base`` (``H τ_base`` for the SE(3) subgroups), saturated
  by ``max_wrench``, ``frame_id`` the base frame, stamped with the stamp of the state it was computed from.
- with thrusters (a model whose URDF or robot YAML declares them, ``allocate_thrusters`` true): instead of
  ``cmd_wrench``, pub ``thruster_command`` (``sensor_msgs/JointState``, thrust [N] by thruster name in ``effort``,
  stamped with the state: the thrusters' lockstep channel) and ``cmd_thrust`` (``std_msgs/Float64MultiArray``, the
  same in ``Model.thruster_names`` order): the saturated wrench mapped to thrusts by the weighted pseudo-inverse
  with saturation redistributed (:mod:`mbs_ros.controllers.allocation`; ``thruster_weights``), counted as
  saturated when a thruster had to be held at a limit.
- ``compensate_passive`` (true): the command also cancels the model's passive forces ``τ_p(q, v)`` (joint springs,
  dampers, friction, hydrodynamic damping and the current's loads, :meth:`Model.passive_forces`), so computed
  torque linearises the damped vehicle as it does the rigid one.
- pub ``joint_command`` (``sensor_msgs/JointState``, robots with joints): the joint efforts by name, saturated by
  ``max_effort``, stamped with the stamp of the state they were computed from (the joints' command channel of
  lockstep).
- pub ``cmd_joint_effort`` (``std_msgs/Float64MultiArray``, robots with joints): the same efforts in
  ``joint_names`` order, for consumers of ros2_control's forward command interface (it carries no stamp).
- pub ``~/diagnostics`` (``diagnostic_msgs/DiagnosticArray``, once a second on the wall clock): one status with
  counters since start-up: ``commands``, ``saturated_commands``, ``received_<topic>`` and ``rejected_<topic>``
  for the four inputs and ``follow_joint_trajectory`` (goals), ``goals_succeeded``, ``goals_aborted``,
  ``goals_canceled``,
  ``dropped_references``, ``control_errors``, ``time_base_changes``, and the limits in force. (Not on
  ``/diagnostics``, whose statuses ``mbs_ros.plot`` reads as the dynamics node's energy.)

Action ``~/follow_joint_trajectory`` (``control_msgs/action/FollowJointTrajectory``, robots with joints), beside
``joint_reference``: the node is the controller, so its name is the controller name of ros2_controllers'
joint_trajectory_controller (``<controller>/follow_joint_trajectory``); for MoveIt (moveit_simple_controller_manager,
move_group in the robot's namespace): ``controller_names: [controller_node]``, ``controller_node: {type:
FollowJointTrajectory, action_ns: follow_joint_trajectory, default: true, joints: [...]}``. It behaves as the kilted
joint_trajectory_controller with an effort interface:

- a goal is rejected (logged with the reason, counted) before the first state, for a ``multi_dof_trajectory``
  (the base follows ``base_reference``), for joint names that are not all the controller's (a subset only with
  ``allow_partial_joints_goal``; the others then hold their reference), no points, a last point with a velocity,
  a non-zero ``header.stamp`` whose trajectory ends before the newest state, and for everything
  ``joint_reference`` refuses (the same code decodes and checks it, on the reference worker, in order with the
  references; effort values are ignored). The trajectory starts at ``header.stamp``, or at the newest state when
  it is zero, and is interpolated as ``joint_reference`` (a first point after 0 starts from the current reference);
- tolerances (:mod:`mbs_ros.controllers.tolerances`): ``path_tolerance`` and ``goal_tolerance`` per joint
  (position, velocity; acceleration is accepted but not checked: no measured acceleration) over the defaults (no
  position tolerance, goal velocity within ``stopped_velocity_tolerance``), 0 = the default, -1 = not checked;
  ``goal_time_tolerance`` (0 = the parameter). A tolerance naming an unknown joint or holding an illegal value
  makes the goal run with the defaults (a warning). Each state (its stamp: simulation time, as the references)
  is checked: before the trajectory's end the path tolerance (violated: aborted with PATH_TOLERANCE_VIOLATED,
  the joints hold where the state has them), from its end on the goal tolerance (met: SUCCESSFUL, the last point
  is held; not met when ``goal_time_tolerance`` > 0 has passed: aborted with GOAL_TOLERANCE_VIOLATED, hold);
- feedback (``desired``, ``actual``, ``error`` = desired - actual, continuous joints wrapped; ``index`` of the
  next point; stamped with the state) at most every 0.05 s of wall clock and at the sample that ends the goal;
- a cancel ends the goal CANCELED and the joints hold where the newest state has them, at rest; a new goal
  preempts the running one, which is aborted with INVALID_GOAL ("Current goal preempted by new incoming
  action."); a ``joint_reference`` message that replaces the goal's trajectory aborts it (INVALID_GOAL).

The action server runs in the node's executor (the EventsExecutor or the single-threaded one; both measured):
its execute callback is a coroutine that awaits the outcome the state callbacks, a cancel or a preemption set.

Bounds. Input outside them is rejected with a throttled warning (per topic, with the number rejected since the
last one) and counted; it never reaches the controller's state or reference:

- stamps: ``sec`` ≥ 0 and ``nanosec`` < 10⁹ (states and reference headers);
- states: every value finite; base position components |x| ≤ 10⁶ m (``MAX_POSITION``), joint positions
  |q| ≤ 10⁶ (rad or m); velocity components ≤ 10⁴ (m/s, rad/s; ``MAX_STATE_VELOCITY``); the quaternion's norm in
  [0.5, 2] (then normalised: zero, non-finite or far from unit norm is not an orientation); a joint named twice;
  a pose that is not on the base group;
- references: at most 10⁴ points (``MAX_POINTS``; a message larger than the largest valid one is refused before
  it is decoded); ``time_from_start`` finite, ≥ 0, ≤ 10⁶ s (``MAX_DURATION``), strictly increasing with
  segments of at least 1 ms (``MIN_SEGMENT``, the prepended point included); ``header.stamp`` within 10⁶ s of
  the newest state; base positions |x| ≤ 10⁶ m; joint positions within the URDF's ``[lower, upper]`` widened
  by 10 % of the range on each side (``JOINT_LIMIT_MARGIN``; at least 0.1), or |q| ≤ 10³ (rad or m;
  ``MAX_JOINT_REFERENCE``) for continuous joints and joints without limits; waypoint velocities ≤ 10³ m/s or
  rad/s (``MAX_VELOCITY``) and accelerations ≤ 10⁴ m/s² or rad/s² (``MAX_ACCELERATION``), and so must be the
  interpolated curve (:meth:`~mbs_ros.controllers.Reference.peak_rates`, in its tangent coordinates): a 1.5 rad
  step over 1 ns asks for 10¹⁹ rad/s² and is refused. The bounds lie far beyond what the models can do, so
  that no valid reference is refused, and close enough that every product the laws form stays finite; the
  saturation then bounds the command.

Time. The stamps of the states are the controller's time base. A complete state stamped at most
``max_time_jump`` after the last one is taken as it comes. A state older than the last one (a simulation
restarted or reset its clock) or more than ``max_time_jump`` newer is a discontinuity: it is rejected
(warning) unless it is the 3rd (``JUMP_CONFIRMATIONS``) of consecutive states that continue each other on the
new time line; then that time line becomes the time base and the references are re-anchored: shifted by the
jump, so each continues from the point it had reached (a held reference stays held; a state stamped 2³¹ s once
is ignored, and a restarted simulation is followed after three states). In lockstep a rejected state is
answered with a zero command (so a restarted lockstep simulation can advance to its third state).

Failures. Every callback (states, references, timer) catches its exceptions: logged (throttled), counted in
``control_errors``, and where a command is due and cannot be computed a zero command is published instead.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint, MultiDOFJointTrajectory

from mbs_ros.controllers import ComputedTorque, PassivityBased, PDGravity, Reference
from mbs_ros.controllers import tolerances as tolerances_
from mbs_ros.dynamics.mimic import MIMIC_MODES
from mbs_ros.dynamics import Model, actuators
from mbs_ros.dynamics.actuators import DEFAULT_LIMIT_ACCELERATION
from mbs_ros.dynamics.model import MAX_MASS_RATIO
from mbs_ros.nodes import conversions as cv
from mbs_ros.dynamics import model_source as ms
from mbs_ros.nodes import params as prm
from mbs_ros.nodes.parameters.controller import LAWS, PARAMETERS
from mbs_ros.dynamics.model_source import ParameterError
from mbs_ros.nodes.ratelimit import RateLimitedLog
from mbs_ros.nodes.runtime import descriptor, run_node, settings_executor

WARN_THROTTLE_S = 2.0
_KEEP_STAMPS = 20  # unpaired odom/joint_states kept (the most recently arrived) while waiting for their partner

# Bounds of the inputs (see the module docstring).
MAX_POSITION = 1.0e6  # m: base position components (states and references), joint positions of states
MAX_STATE_VELOCITY = 1.0e4  # m/s, rad/s: state velocity components
QUATERNION_NORM = (0.5, 2.0)  # a quaternion's norm must lie in this range (it is then normalised)
MAX_POINTS = 10_000  # points of a reference
MAX_DURATION = 1.0e6  # s: time_from_start of a reference; |header.stamp - newest state|
MIN_SEGMENT = 1.0e-3  # s between consecutive reference points
MAX_VELOCITY = 1.0e3  # m/s, rad/s: reference velocities (waypoints and interpolated)
MAX_ACCELERATION = 1.0e4  # m/s^2, rad/s^2: reference accelerations (waypoints and interpolated)
MAX_JOINT_REFERENCE = 1.0e3  # rad or m: reference positions of joints without URDF limits (continuous ones)
JOINT_LIMIT_MARGIN = 0.1  # fraction of a joint's URDF range its reference may exceed the range by (>= 0.1)
JUMP_CONFIRMATIONS = 3  # consecutive states on a new time line before it becomes the time base
REFERENCE_QUEUE = 32  # references waiting for the worker thread; beyond, the oldest waiting one is dropped
DIAGNOSTICS_PERIOD_S = 1.0
FEEDBACK_PERIOD_S = 0.05  # wall clock between FollowJointTrajectory feedbacks (JTC's action_monitor_rate, 20 Hz)
_NS = 1_000_000_000
_FJT = FollowJointTrajectory.Result

__all__ = ["ControllerNode", "ControllerSettings", "ParameterError", "settings_from_values", "make_law", "main",
           "command_limits", "reference_position_bounds"]


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
    max_wrench: Tuple[float, ...] = ()  # () = from the model
    max_effort: object = ()  # () = from the model; a number (every joint) or a tuple (one per joint)
    max_time_jump: float = 5.0
    use_events_executor: bool = True
    max_mass_ratio: float = MAX_MASS_RATIO
    locked_joints: Tuple[str, ...] = ()  # as dynamics_node's: joints frozen at load
    locked_joint_positions: Tuple[float, ...] = ()
    mimic: str = "reduce"  # as dynamics_node's
    allocate_thrusters: bool = True  # a model with thrusters: thrusts on thruster_command instead of cmd_wrench
    thruster_weights: Tuple[float, ...] = ()  # () = all 1
    compensate_passive: bool = True  # add −τ_p(q, v) (damping, friction, springs, the water's loads)
    # FollowJointTrajectory goals, as joint_trajectory_controller's parameters of the same meaning
    allow_partial_joints_goal: bool = False
    goal_time_tolerance: float = 0.0  # JTC constraints.goal_time: 0 = no limit
    stopped_velocity_tolerance: float = 0.01  # JTC constraints.stopped_velocity_tolerance


DEFAULTS = ControllerSettings()



def _field(name: str) -> str:
    return "lambda_" if name == "lambda" else name


def _descriptor(name: str, value):
    return descriptor(PARAMETERS[name], value)


def _gain(values, name):
    v = values[name]
    if isinstance(v, bool) or isinstance(v, str):
        raise ParameterError(f"{name} must be a positive number or a list of positive numbers, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if hasattr(v, "__len__") and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return tuple(float(x) for x in v)
    raise ParameterError(f"{name} must be a positive number or a list of positive numbers, got {v!r}")


def _limits(values, name, n: Optional[int]):
    """``()`` (empty: from the model), a positive finite number (when ``n`` is None: not allowed) or a tuple of
    positive finite numbers (``n`` of them when given; any length is checked against the model later)."""
    v = values[name]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if n is not None:
            raise ParameterError(f"{name} must be a list of {n} positive numbers (or empty), got {v!r}")
        x = prm.number(values, name, lo=0.0, lo_open=True)
        return x
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise ParameterError(f"{name} must be a positive number or a list of positive numbers (or empty), "
                             f"got {v!r}")
    if len(v) == 0:
        return ()
    out = prm.vector(values, name, n)
    if any(not x > 0.0 for x in out):
        raise ParameterError(f"{name} must be positive, got {list(out)}")
    return out


def settings_from_values(values: Dict[str, object], source: ms.Source) -> ControllerSettings:
    """Validate raw parameter values; ParameterError with the reason. Gains and ``max_effort`` are checked
    against the model in :func:`make_law` and :func:`command_limits`."""

    def text(name, choices=None, allow_empty=False):
        return prm.text(values, name, choices, allow_empty)

    locked = prm.locked_joints_setting(values, source.multibody)
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
        use_events_executor=prm.flag(values, "use_events_executor"),
        max_mass_ratio=prm.number(values, "max_mass_ratio", lo=0.0),
        locked_joints=locked[0],
        locked_joint_positions=locked[1],
        mimic=text("mimic", MIMIC_MODES),
        max_wrench=_limits(values, "max_wrench", 2),
        max_effort=_limits(values, "max_effort", None),
        max_time_jump=prm.number(values, "max_time_jump", lo=0.0, lo_open=True),
        allocate_thrusters=prm.flag(values, "allocate_thrusters"),
        thruster_weights=prm.vector(values, "thruster_weights", None),
        compensate_passive=prm.flag(values, "compensate_passive"),
        allow_partial_joints_goal=prm.flag(values, "allow_partial_joints_goal"),
        goal_time_tolerance=prm.number(values, "goal_time_tolerance", lo=0.0),
        stopped_velocity_tolerance=prm.number(values, "stopped_velocity_tolerance", lo=0.0),
    )
    if source.multibody:
        from mbs_ros.nodes.dynamics_node import base_link_of

        if s.base_frame.lstrip("/") != base_link_of(source):
            raise ParameterError(f"base_frame must name the robot's base link {base_link_of(source)!r} "
                                 f"(or be left unset), got {s.base_frame!r}")
    return s


def build_model(s: ControllerSettings, source: ms.Source) -> Model:
    if source.multibody:
        return ms.build_multibody(source, s.base_group, s.gravity, mass_scale=s.mass_scale,
                                  max_mass_ratio=s.max_mass_ratio,
                                  locked_joints=dict(zip(s.locked_joints, s.locked_joint_positions)),
                                  mimic=s.mimic)
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


def _joint_limits(model: Model):
    """``(total mass, lower, upper, effort)``, the joint arrays in ``joint_names`` order with NaN where the model
    gives nothing (no ``<limit>``, a continuous joint's range, ``effort="0"``): :attr:`Model.position_limits` and
    the joints' part of :attr:`Model.effort_limits`."""
    lower, upper = (np.asarray(x, dtype=float) for x in model.position_limits)
    ranged = np.isfinite(lower) & np.isfinite(upper) & (lower < upper)
    return (model.total_mass, np.where(ranged, lower, np.nan), np.where(ranged, upper, np.nan),
            actuators.model_effort_limits(model))


def command_limits(model: Model, s: ControllerSettings):
    """``(max_force, max_torque, max_effort (nj,))`` in force: the parameters, or the model's defaults
    (:func:`mbs_ros.dynamics.actuators.command_limits`); ParameterError if ``max_effort`` has the wrong length."""
    try:
        lim = actuators.command_limits(model, s.max_wrench or None,
                                       s.max_effort if isinstance(s.max_effort, float) else (s.max_effort or None))
    except ValueError as e:
        raise ParameterError(str(e)) from None
    return lim.max_force, lim.max_torque, np.array(lim.max_effort)


def reference_position_bounds(model: Model) -> Tuple[np.ndarray, np.ndarray]:
    """Per joint ``(lower, upper)`` a reference position must lie in: the URDF range widened by
    ``JOINT_LIMIT_MARGIN`` of it on each side (at least 0.1), else ±``MAX_JOINT_REFERENCE``."""
    _total, lo, hi, _effort = _joint_limits(model)
    margin = np.maximum(JOINT_LIMIT_MARGIN * (hi - lo), 0.1)
    lower = np.where(np.isnan(lo), -MAX_JOINT_REFERENCE, lo - margin)
    upper = np.where(np.isnan(hi), MAX_JOINT_REFERENCE, hi + margin)
    return lower, upper


class _Rejected(Exception):
    """An input refused; the message is the reason."""


@dataclass
class _ActiveGoal:
    """A FollowJointTrajectory goal: its reference (start in reference time, as ``joint_ref``), the
    ``time_from_start`` of its points [s], its tolerance check, and the future its execute callback awaits:
    ``(outcome, Result)`` with outcome ``succeed``, ``abort`` or ``canceled``."""

    goal_id: bytes
    handle: object
    start: int
    ref: Reference
    times: np.ndarray
    check: tolerances_.TrajectoryCheck
    future: Future
    last_feedback: float = -math.inf


def _stamp_ns(stamp, what: str) -> int:
    sec, nanosec = int(stamp.sec), int(stamp.nanosec)
    if sec < 0:
        raise _Rejected(f"{what} is negative ({sec} s)")
    if nanosec >= _NS:
        raise _Rejected(f"{what}.nanosec must be < 1e9, got {nanosec}")
    return sec * _NS + nanosec


def _check_vector(x: np.ndarray, bound: float, what: str, unit: str) -> None:
    if not np.all(np.isfinite(x)):
        raise _Rejected(f"{what} must be finite, got {np.array2string(x, threshold=8)}")
    if x.size and np.abs(x).max() > bound:
        raise _Rejected(f"{what} must be within ±{bound:g} {unit}, got {np.abs(x).max():.3g}")


def _unit_quaternion(quat: np.ndarray, what: str) -> np.ndarray:
    if not np.all(np.isfinite(quat)):
        raise _Rejected(f"{what} quaternion must be finite")
    scale = float(np.abs(quat).max())
    n = scale * float(np.linalg.norm(quat / scale)) if scale > 0.0 else 0.0  # no overflow for huge entries
    lo, hi = QUATERNION_NORM
    if not (lo <= n <= hi):
        raise _Rejected(f"{what} quaternion norm {n:.3g} is not in [{lo:g}, {hi:g}]")
    return quat / n


class ControllerNode(Node):
    """See the module docstring. Construct, then call :meth:`configure` (raises ParameterError)."""

    def __init__(self, node_name: str = "controller_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._worker: Optional[threading.Thread] = None
        self._stop = threading.Event()

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
        for name in PARAMETERS:
            if name not in values:
                values[name] = self._declare(name, defaults.get(name, getattr(DEFAULTS, _field(name))))
        s = settings_from_values(values, source)
        model = build_model(s, source)
        law = make_law(model, s)
        max_force, max_torque, max_effort = command_limits(model, s)
        unknown = sorted(n for n in (getattr(self, "_parameter_overrides", {}) or {})
                         if n not in PARAMETERS and n != "use_sim_time" and not n.startswith("qos_overrides."))
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))

        self.settings, self.source, self.model, self.law = s, source, model, law
        self.joint_names = tuple(model.joint_names)
        self.nj = len(self.joint_names)
        self.nq_base, self.nv_base = ms.base_sizes(model)
        self.floating = model.group is not None
        self.max_force, self.max_torque, self.max_effort = max_force, max_torque, max_effort
        self._ref_lower, self._ref_upper = reference_position_bounds(model)
        self._jump_ns = int(round(s.max_time_jump * _NS))
        ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(ns, s.base_frame)
        self._base_names = {s.base_frame, s.base_frame.lstrip("/"), self.base_frame}

        self._odom: "OrderedDict[int, tuple]" = OrderedDict()
        self._joints: "OrderedDict[int, tuple]" = OrderedDict()
        self.state: Optional[Tuple[int, np.ndarray, np.ndarray]] = None  # (stamp ns, q, v)
        self._state_arrival_ns = 0  # node clock (wall, or /clock with use_sim_time) when the state arrived
        self._stopped = False
        self._last_tau_stamp = None
        self._last_tau = None
        self._candidate: Optional[Tuple[int, int]] = None  # discontinuity: (newest stamp, states) on a new time line
        # Reference time = state stamp - offset (ns); a time-base change adds the jump to the offset, so every
        # reference continues from the point it had reached. References: (start in reference time, Reference).
        self._offset_ns = 0
        self.base_ref: Optional[Tuple[int, Reference]] = None
        self.joint_ref: Optional[Tuple[int, Reference]] = None
        self._lock = threading.Lock()  # the worker's reads of (state, offset, reference) and its installs
        self._queue: deque = deque()  # (topic, serialized message) for the worker, in arrival order
        self._queue_cv = threading.Condition()
        inputs = ("odom", "joint_states", "joint_reference", "base_reference", "follow_joint_trajectory")
        self._counts = {"commands": 0, "saturated_commands": 0, **{f"received_{t}": 0 for t in inputs},
                        **{f"rejected_{t}": 0 for t in inputs}, "dropped_references": 0, "control_errors": 0,
                        "time_base_changes": 0, "goals_succeeded": 0, "goals_aborted": 0, "goals_canceled": 0}
        self._count_lock = threading.Lock()
        self._logs = RateLimitedLog(self.get_logger(), WARN_THROTTLE_S)  # per key, free while suppressed
        self._max_bytes = {
            "joint_reference": MAX_POINTS * (32 * max(self.nj, 1) + 128) + (1 << 20),
            "base_reference": MAX_POINTS * (32 * 6 + 128) + (1 << 20),
        }

        qos = QoSProfile(depth=10)
        state_qos = QoSProfile(depth=4)  # a controller that lags wants the newest state, not a backlog
        # as reference_node publishes: a (re)started controller still gets the reference sent before it
        ref_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.allocation = None
        self._thrusts = np.zeros(len(model.thruster_names))
        if self.floating and model.thruster_names and s.allocate_thrusters:
            from mbs_ros.controllers.allocation import ThrusterAllocation

            names = model.thruster_names
            if s.thruster_weights and len(s.thruster_weights) != len(names):
                raise ParameterError(f"thruster_weights must have one entry per thruster ({len(names)}: "
                                     f"{', '.join(names)}) or be empty, got {len(s.thruster_weights)}")
            lo, hi = model.thrust_limits
            rows = np.flatnonzero(np.abs(model.velocity_map(model.neutral())).sum(axis=1) > 0.5)
            try:
                self.allocation = ThrusterAllocation(model.thruster_matrix, lo, hi,
                                                     s.thruster_weights or None, rows)
            except ValueError as e:
                raise ParameterError(f"allocate_thrusters: {e}") from None
            if self.allocation.missing_directions:
                self.get_logger().warning(
                    f"the {len(names)} thrusters span {len(rows) - self.allocation.missing_directions} of the "
                    f"{len(rows)} wrench directions of the {model.base} base: the rest of the command is not given "
                    "(an underactuated vehicle)")
            self.pub_thruster_command = self.create_publisher(JointState, "thruster_command", qos)
            self.pub_thrust = self.create_publisher(Float64MultiArray, "cmd_thrust", qos)
        self.pub_wrench = (self.create_publisher(WrenchStamped, "cmd_wrench", qos)
                           if self.floating and self.allocation is None else None)
        self.pub_effort = self.create_publisher(Float64MultiArray, "cmd_joint_effort", qos) if self.nj else None
        self.pub_joint_command = self.create_publisher(JointState, "joint_command", qos) if self.nj else None
        self.pub_diagnostics = self.create_publisher(DiagnosticArray, "~/diagnostics", qos)
        if self.floating:
            self.create_subscription(Odometry, "odom", self._guard(self._on_odom, "odom"), state_qos)
            self.create_subscription(MultiDOFJointTrajectory, "base_reference",
                                     self._guard(lambda raw: self._enqueue("base_reference", raw), "base_reference"),
                                     ref_qos, raw=True)
        if self.nj:
            self.create_subscription(JointState, "joint_states", self._guard(self._on_joint_states, "joint_states"),
                                     state_qos)
            self.create_subscription(JointTrajectory, "joint_reference",
                                     self._guard(lambda raw: self._enqueue("joint_reference", raw), "joint_reference"),
                                     ref_qos, raw=True)
        # FollowJointTrajectory (robots with joints): ~/follow_joint_trajectory, as joint_trajectory_controller's
        # <controller name>/follow_joint_trajectory; the goal is checked against each state (_monitor_goal)
        self._goal: Optional[_ActiveGoal] = None  # the executing goal
        self._pending_goal = None  # (goal message, _ActiveGoal) between the goal and the accepted callback
        self._executing: Dict[bytes, _ActiveGoal] = {}  # goal id -> goal, until its execute callback takes it
        self._wrap = np.array([t == "continuous" for t in model.joint_types], dtype=bool)
        self._default_tolerances = tolerances_.SegmentTolerances.defaults(
            self.nj, s.goal_time_tolerance, s.stopped_velocity_tolerance)
        self.action_server = None
        if self.nj:
            self.action_server = ActionServer(
                self, FollowJointTrajectory, "~/follow_joint_trajectory", execute_callback=self._execute_goal,
                goal_callback=self._on_goal, handle_accepted_callback=self._on_goal_accepted,
                cancel_callback=self._on_cancel)
        # lockstep: one command per complete state, from the state callbacks; otherwise a timer on the node clock
        self.timer = None if s.lockstep else self.create_timer(1.0 / s.control_rate,
                                                               self._guard(self._on_timer, "timer"))
        self.diagnostics_timer = self.create_timer(DIAGNOSTICS_PERIOD_S, self._guard(self._publish_diagnostics,
                                                                                     "diagnostics"),
                                                   clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.add_on_set_parameters_callback(self._on_set_parameters)
        # the reference worker shares the interpreter with the control loop: switch threads often
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
        self._worker = threading.Thread(target=self._reference_worker, name="reference_worker", daemon=True)
        self._worker.start()
        gains = (f"kp {s.kp}, kd {s.kd}" if s.law != "passivity" else f"lambda {s.lambda_}, kd {s.kd}")
        what = source.describe() if source.multibody else f"{s.base_group} body"
        timing = ("lockstep: one command per state, stamped with it" if s.lockstep
                  else f"{s.control_rate:g} Hz, state_timeout {s.state_timeout:g} s")
        limits = []
        if self.floating:
            limits.append(f"max_wrench [{max_force:g} N, {max_torque:g} N m]")
        if self.nj:
            limits.append("max_effort [" + ", ".join(f"{x:g}" for x in max_effort) + "]")
        self.get_logger().info(
            f"{s.law} on {what} ({s.base_group} base, {layout_description(model)}), {gains}, mass_scale "
            f"{s.mass_scale:g}, {timing}; {', '.join(limits)}")

    def destroy_node(self):
        self._stop.set()
        if getattr(self, "action_server", None) is not None:
            self.action_server.destroy()
            self.action_server = None
        if self._worker is not None:
            with self._queue_cv:
                self._queue_cv.notify_all()
            self._worker.join(timeout=2.0)
        return super().destroy_node()

    # ------------------------------------------------------------------------------ robustness

    def _count(self, key: str, n: int = 1) -> None:
        with self._count_lock:
            self._counts[key] += n

    def _warn(self, key: str, text: str, error: bool = False) -> None:
        """A warning throttled per ``key`` (one per WARN_THROTTLE_S), with how many were held back since."""
        if self.context.ok():
            (self._logs.error if error else self._logs.warning)(key, text)

    def _reject(self, topic: str, reason: str) -> None:
        self._count(f"rejected_{topic}")
        self._warn(f"rejected_{topic}", f"{topic} rejected: {reason}")

    def _guard(self, fn, what: str):
        """``fn`` that never raises: an exception is logged (throttled), counted, and answered with a zero
        command when one is due."""

        def guarded(*args):
            try:
                return fn(*args)
            except Exception as e:  # noqa: BLE001 - the controller must keep running
                if not self.context.ok():
                    return None
                self._count("control_errors")
                self._warn(f"error_{what}", f"{what} callback failed: {type(e).__name__}: {e}", error=True)
                if what in ("timer", "odom", "joint_states") and self.state is not None and \
                        (what == "timer" or self.settings.lockstep):
                    self._publish_zero(self.state[0])
            return None

        if what in ("timer", "diagnostics"):
            # a timer callback that takes no argument: rclpy's EventsExecutor passes a TimerInfo to one that
            # accepts *args
            return lambda: guarded()
        return guarded

    def _publish_zero(self, stamp: int) -> None:
        try:
            self._publish(stamp, np.zeros(self.model.nv), None)
        except Exception as e:  # noqa: BLE001
            self._warn("error_zero", f"cannot publish a zero command: {type(e).__name__}: {e}", error=True)

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name == "use_sim_time":
                return SetParametersResult(
                    successful=False,
                    reason="use_sim_time is fixed at start-up: switching between the wall clock and /clock at run "
                           "time would re-time the control timer and state_timeout under a running loop; restart "
                           "the node with the other value")
        return SetParametersResult(successful=True)

    def _publish_diagnostics(self) -> None:
        with self._count_lock:
            counts = dict(self._counts)
        bad = counts["control_errors"] or any(v for k, v in counts.items() if k.startswith("rejected_"))
        values = dict(counts)
        values.update(max_force=self.max_force, max_torque=self.max_torque,
                      max_effort=" ".join(repr(float(x)) for x in self.max_effort),
                      has_state=self.state is not None)
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if bad or counts["saturated_commands"] else DiagnosticStatus.OK,
            name=f"{self.get_fully_qualified_name()}: controller",
            message=(f"{counts['commands']} commands, {counts['saturated_commands']} saturated, "
                     f"{sum(v for k, v in counts.items() if k.startswith('rejected_'))} inputs rejected, "
                     f"{counts['control_errors']} errors"),
            hardware_id=self.base_frame if self.floating else self.get_namespace(),
            values=cv.key_values(values))
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diagnostics.publish(msg)

    # --------------------------------------------------------------------------------- state

    @staticmethod
    def _store(d: "OrderedDict[int, tuple]", stamp: int, value) -> None:
        d[stamp] = value
        d.move_to_end(stamp)
        while len(d) > _KEEP_STAMPS:  # the earliest arrived go first: absurd stamps never crowd out fresh ones
            d.popitem(last=False)

    def _on_odom(self, msg: Odometry) -> None:
        self._count("received_odom")
        try:
            stamp = _stamp_ns(msg.header.stamp, "header.stamp")
            p, quat = cv.pose_from_msg(msg.pose.pose)
            V = cv.twist_from_msg(msg.twist.twist)
            _check_vector(p, MAX_POSITION, "position", "m")
            quat = _unit_quaternion(quat, "orientation")
            _check_vector(V, MAX_STATE_VELOCITY, "twist", "m/s or rad/s")
        except _Rejected as e:
            return self._reject("odom", str(e))
        self._store(self._odom, stamp, (p, quat, V))
        self._completed(stamp)

    def _on_joint_states(self, msg: JointState) -> None:
        self._count("received_joint_states")
        try:
            stamp = _stamp_ns(msg.header.stamp, "header.stamp")
            names = list(msg.name)
            index = {n: i for i, n in enumerate(names)}
            missing = [j for j in self.joint_names if j not in index]
            if missing or len(msg.position) != len(names) or len(msg.velocity) != len(names):
                raise _Rejected(f"needs position and velocity of {', '.join(missing or self.joint_names)} "
                                f"(one per name)")
            twice = sorted({j for j in self.joint_names if names.count(j) > 1}) if len(index) < len(names) else []
            if twice:
                raise _Rejected(f"joint(s) {', '.join(twice)} named twice")
            pos = np.array([msg.position[index[j]] for j in self.joint_names], dtype=float)
            vel = np.array([msg.velocity[index[j]] for j in self.joint_names], dtype=float)
            _check_vector(pos, MAX_POSITION, "position", "rad or m")
            _check_vector(vel, MAX_STATE_VELOCITY, "velocity", "rad/s or m/s")
        except _Rejected as e:
            return self._reject("joint_states", str(e))
        self._store(self._joints, stamp, (pos, vel))
        self._completed(stamp)

    def _completed(self, t: int) -> None:
        """A part of the state stamped ``t`` arrived: consider the state if it is complete."""
        if (self.floating and t not in self._odom) or (self.nj and t not in self._joints):
            return
        self._consider(t)

    def _drop(self, t: int) -> None:
        for d in (self._odom, self._joints):
            d.pop(t, None)

    def _consider(self, t: int) -> None:
        last = self.state[0] if self.state is not None else None
        if last is not None and t == last:
            self._drop(t)
            if self.settings.lockstep and self._last_tau_stamp == t:
                # lockstep: the dynamics node sent this state again (our command may have been lost)
                self._publish(t, self._last_tau, self.state[1])
            return
        if last is None or last < t <= last + self._jump_ns:
            self._candidate = None
            self._accept(t, None)
            return
        # a discontinuity: a step back, or forward by more than max_time_jump
        c = self._candidate
        if c is not None and c[0] < t <= c[0] + self._jump_ns:
            c = (t, c[1] + 1)
        elif c is None or t != c[0]:
            c = (t, 1)
        if c[1] >= JUMP_CONFIRMATIONS:
            self._candidate = None
            self._accept(t, t - last)
            return
        self._candidate = c
        self._drop(t)
        side = "before" if t < last else "after"
        side_s = abs(t - last) * 1e-9
        self._reject("odom" if self.floating else "joint_states",
                     f"state at t = {t * 1e-9:.9f} s is {side_s:.6g} s {side} the last one "
                     f"(t = {last * 1e-9:.9f} s; max_time_jump {self.settings.max_time_jump:g} s): taken as the new "
                     f"time base only after {JUMP_CONFIRMATIONS} consecutive states ({c[1]} so far)")
        if self.settings.lockstep:
            self._publish_zero(t)

    def _accept(self, t: int, jump: Optional[int]) -> None:
        model = self.model
        try:
            joints = ms.joint_positions_to_q(model, self._joints[t][0]) if self.nj else None
            if self.floating:
                p, quat, V = self._odom[t]
                q = model.configuration_from_pose(p, quat, joints=joints)
                v = np.array(model.velocity_from_twist(q, V), dtype=float)
            else:
                q = model.configuration_from_pose(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), joints=joints)
                v = np.zeros(model.nv)
            if self.nj:
                v[self.nv_base:] = self._joints[t][1]
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
                raise ValueError("non-finite configuration or velocity")
        except ValueError as e:
            self._drop(t)
            return self._reject("odom" if self.floating else "joint_states", f"state: {e}")
        first = self.state is None
        if jump is not None:
            last = self.state[0]
            with self._lock:
                self._offset_ns += jump
            self._last_tau_stamp = self._last_tau = None
            self._count("time_base_changes")
            self.get_logger().warning(
                f"time base changed: the states jumped from t = {last * 1e-9:.9f} s to t = {t * 1e-9:.9f} s "
                f"({JUMP_CONFIRMATIONS} consecutive states on the new time line): references re-anchored, each "
                "continues from the point it had reached")
        if first:  # hold the start-up state until a reference arrives
            with self._lock:
                if self.floating:
                    self.base_ref = (t - self._offset_ns, Reference(model.group, [0.0], [q[: self.nq_base]]))
                if self.nj:
                    self.joint_ref = (t - self._offset_ns, Reference(self.nj, [0.0], [self._joint_positions(q)]))
        self.state = (t, q, v)
        clock = self.get_clock()
        self._state_arrival_ns = clock.now().nanoseconds
        if getattr(clock, "ros_time_is_active", False):
            # /clock time: a state may arrive before the /clock message of its own stamp
            self._state_arrival_ns = max(self._state_arrival_ns, t)
        for d in (self._odom, self._joints):
            for k in [k for k in d if jump is not None or k <= t]:
                del d[k]
        if first:
            self.get_logger().info(f"first state at t = {t * 1e-9:.6f} s: holding it until a reference arrives")
            with self._queue_cv:
                self._queue_cv.notify_all()  # references that arrived before it
        if self._goal is not None:
            self._monitor_goal(t, q, v)
        if self.settings.lockstep:
            self._command()

    def _joint_positions(self, q) -> np.ndarray:
        return ms.joint_positions_from_q(self.model, q[self.nq_base:])

    # ----------------------------------------------------------------------------- references

    @staticmethod
    def _eval(ref: Tuple[int, Reference], t_ref: int):
        """The reference at reference time ``t_ref`` (ns)."""
        start, r = ref
        return r((t_ref - start) * 1e-9)

    def _desired(self, t_ns: int):
        model = self.model
        t_ref = t_ns - self._offset_ns
        q_d, v_d, a_d = model.neutral(), np.zeros(model.nv), np.zeros(model.nv)
        if self.floating:
            qb, vb, ab = self._eval(self.base_ref, t_ref)
            q_d[: self.nq_base], v_d[: self.nv_base], a_d[: self.nv_base] = qb, vb, ab
        if self.nj:
            qj, vj, aj = self._eval(self.joint_ref, t_ref)
            q_d[self.nq_base:] = ms.joint_positions_to_q(model, qj)
            v_d[self.nv_base:], a_d[self.nv_base:] = vj, aj
        return q_d, v_d, a_d

    def _enqueue(self, topic: str, raw) -> None:
        """Executor thread: hand a serialized reference (or a FollowJointTrajectory goal and the future its answer
        goes to) to the worker (newest per topic before the first state; at most REFERENCE_QUEUE waiting, the
        oldest dropped beyond)."""
        self._count(f"received_{topic}")
        with self._queue_cv:
            if self.state is None:
                kept = [item for item in self._queue if item[0] != topic]
                self._queue.clear()
                self._queue.extend(kept)
            elif len(self._queue) >= REFERENCE_QUEUE:
                dropped_topic, dropped = self._queue.popleft()
                if dropped_topic == "follow_joint_trajectory":
                    dropped[1].set_result(_Rejected(f"dropped: {REFERENCE_QUEUE} references were waiting"))
                self._count("dropped_references")
                self._warn("dropped_references", f"{dropped_topic} dropped: {REFERENCE_QUEUE} references were "
                                                 "already waiting to be processed")
            self._queue.append((topic, raw))
            self._queue_cv.notify_all()

    def _reference_worker(self) -> None:
        while not self._stop.is_set():
            with self._queue_cv:
                while not self._stop.is_set() and (not self._queue or self.state is None):
                    self._queue_cv.wait(timeout=0.5)
                if self._stop.is_set():
                    return
                topic, raw = self._queue.popleft()
            if topic == "follow_joint_trajectory":  # (goal, future): the checked goal, or why not, to _on_goal
                goal, answer = raw
                try:
                    answer.set_result(self._prepare_goal(goal))
                except Exception as e:  # noqa: BLE001 - _Rejected, or a bug: the goal is refused either way
                    answer.set_result(e)
                continue
            try:
                self._process_reference(topic, raw)
            except _Rejected as e:
                self._reject(topic, str(e))
            except Exception as e:  # noqa: BLE001 - the worker must keep running
                if not self.context.ok():
                    return
                self._count("control_errors")
                self._count(f"rejected_{topic}")
                self._warn(f"error_{topic}", f"{topic} rejected: {type(e).__name__}: {e}", error=True)

    def _process_reference(self, topic: str, raw: bytes) -> None:
        if len(raw) > self._max_bytes[topic]:
            raise _Rejected(f"{len(raw)} bytes: larger than any valid reference of at most {MAX_POINTS} points "
                            f"({self._max_bytes[topic]} bytes); not decoded")
        msg_type = JointTrajectory if topic == "joint_reference" else MultiDOFJointTrajectory
        msg = deserialize_message(raw, msg_type)
        with self._lock:
            state, offset = self.state, self._offset_ns
            current = self.joint_ref if topic == "joint_reference" else self.base_ref
        start_ns, start, ref = self._build_reference(topic, msg, state, offset, current)
        with self._lock:
            if topic == "joint_reference":
                self.joint_ref = (start, ref)
            else:
                self.base_ref = (start, ref)
        self.get_logger().info(f"{topic}: {len(msg.points)} points over {ref.end_time:g} s from "
                               f"t = {start_ns * 1e-9:.6f} s")

    def _build_reference(self, topic: str, msg, state, offset: int, current):
        """``(start_ns, start in reference time, Reference)`` of a decoded joint_reference (JointTrajectory, also a
        FollowJointTrajectory goal's trajectory) or base_reference message, checked against the bounds; _Rejected
        with the reason."""
        n_points = len(msg.points)
        if not n_points:
            raise _Rejected("no points")
        if n_points > MAX_POINTS:
            raise _Rejected(f"{n_points} points: at most {MAX_POINTS}")
        stamp = _stamp_ns(msg.header.stamp, "header.stamp")
        if stamp and abs(stamp - state[0]) > MAX_DURATION * _NS:
            raise _Rejected(f"header.stamp t = {stamp * 1e-9:.9f} s is more than {MAX_DURATION:g} s from the "
                            f"newest state (t = {state[0] * 1e-9:.9f} s)")
        start_ns = stamp if stamp > 0 else state[0]
        start = start_ns - offset  # reference time
        times = self._times(msg.points)
        if topic == "joint_reference":
            ref = self._joint_reference(msg, times, start, current)
        else:
            ref = self._base_reference(msg, times, start, current, state)
        vmax, amax = ref.peak_rates()
        if vmax.max() > MAX_VELOCITY or amax.max() > MAX_ACCELERATION:
            raise _Rejected(f"the interpolated reference reaches {vmax.max():.3g} m/s or rad/s and {amax.max():.3g} "
                            f"m/s^2 or rad/s^2 (at most {MAX_VELOCITY:g} and {MAX_ACCELERATION:g}): points too close "
                            f"for their distance")
        return start_ns, start, ref

    @staticmethod
    def _times(points) -> np.ndarray:
        sec = np.array([p.time_from_start.sec for p in points], dtype=np.int64)
        nanosec = np.array([p.time_from_start.nanosec for p in points], dtype=np.int64)
        if np.any(sec < 0):
            raise _Rejected("time_from_start must not be negative")
        if np.any(nanosec >= _NS):
            raise _Rejected("time_from_start.nanosec must be < 1e9")
        times = sec + 1e-9 * nanosec
        if times[-1] > MAX_DURATION:
            raise _Rejected(f"time_from_start up to {times[-1]:g} s: at most {MAX_DURATION:g} s")
        if np.any(np.diff(times) <= 0.0):
            raise _Rejected("time_from_start must increase strictly")
        return times

    @staticmethod
    def _prepend(times, P, Vel, Acc, cur):
        """Prepend the current reference at 0 when the first point is later; check the segment durations."""
        if times[0] > 0.0:
            times = np.concatenate([[0.0], times])
            P, Vel, Acc = (np.concatenate([c[None, :], x]) for c, x in zip(cur, (P, Vel, Acc)))
        if times.size > 1 and np.diff(times).min() < MIN_SEGMENT:
            raise _Rejected(f"points {np.diff(times).min():.3g} s apart (the prepended current reference at 0 "
                            f"included): at least {MIN_SEGMENT:g} s")
        return times, P, Vel, Acc

    def _joint_reference(self, msg: JointTrajectory, times, start: int, current) -> Reference:
        names = list(msg.joint_names)
        unknown = [n for n in names if n not in self.joint_names]
        if unknown or len(set(names)) != len(names) or not names:
            raise _Rejected(f"joint names {names[:20]} must be distinct names among {', '.join(self.joint_names)} "
                            f"(unknown: {unknown[:20]})")
        cols = np.array([self.joint_names.index(n) for n in names])
        n, N = len(names), len(msg.points)
        cur_q, cur_v, cur_a = self._eval(current, start)
        P = np.tile(cur_q, (N, 1))
        Vel, Acc = np.zeros((N, self.nj)), np.zeros((N, self.nj))
        for i, pt in enumerate(msg.points):
            if len(pt.positions) != n:
                raise _Rejected(f"point {i}: {len(pt.positions)} positions for {n} joints")
            P[i, cols] = pt.positions
            for field, out in (("velocities", Vel), ("accelerations", Acc)):
                values = getattr(pt, field)
                if len(values) == n:
                    out[i, cols] = values
                elif len(values):
                    raise _Rejected(f"point {i}: {field} must be empty or have {n} values")
        lo, hi = self._ref_lower[cols], self._ref_upper[cols]
        pos = P[:, cols]
        if not np.all(np.isfinite(pos)):
            raise _Rejected("positions must be finite")
        outside = (pos < lo) | (pos > hi)
        if np.any(outside):
            i, j = np.argwhere(outside)[0]
            raise _Rejected(f"point {i}: {names[j]} at {pos[i, j]:.6g} is outside [{lo[j]:.6g}, {hi[j]:.6g}] (its "
                            "URDF limits widened by 10 %, or ±1e3 without limits)")
        _check_vector(Vel, MAX_VELOCITY, "velocities", "rad/s or m/s")
        _check_vector(Acc, MAX_ACCELERATION, "accelerations", "rad/s^2 or m/s^2")
        has_acc = bool(np.any(Acc)) or bool(np.any(cur_a))
        times, P, Vel, Acc = self._prepend(times, P, Vel, Acc, (cur_q, cur_v, cur_a))
        try:
            return Reference(self.nj, times, P, Vel, Acc if has_acc else None)
        except (ValueError, FloatingPointError) as e:
            raise _Rejected(str(e)) from None

    def _base_reference(self, msg: MultiDOFJointTrajectory, times, start: int, current, state) -> Reference:
        names = list(msg.joint_names)
        if len(names) > 1 or (names and names[0] not in self._base_names):
            raise _Rejected(f"joint_names must be empty or [{self.base_frame!r}], got {names[:20]}")
        model = self.model
        cur_q, cur_v, cur_a = self._eval(current, start)
        q_full = state[1].copy()
        N = len(msg.points)
        P = np.empty((N, self.nq_base))
        Vel, Acc = np.zeros((N, self.nv_base)), np.zeros((N, self.nv_base))
        for i, pt in enumerate(msg.points):
            if len(pt.transforms) != 1 or len(pt.velocities) > 1 or len(pt.accelerations) > 1:
                raise _Rejected(f"point {i}: needs one transform and at most one velocity and acceleration")
            p, quat = cv.transform_from_msg(pt.transforms[0])
            try:
                _check_vector(p, MAX_POSITION, "position", "m")
                quat = _unit_quaternion(quat, "rotation")
                qb = model.configuration_from_pose(p, quat)[: self.nq_base]
                q_full[: self.nq_base] = qb
                if pt.velocities:
                    V = cv.twist_from_msg(pt.velocities[0])
                    _check_vector(V, MAX_VELOCITY, "velocity", "m/s or rad/s")
                    Vel[i] = model.velocity_from_twist(q_full, V)[: self.nv_base]
                if pt.accelerations:
                    A = cv.twist_from_msg(pt.accelerations[0])
                    _check_vector(A, MAX_ACCELERATION, "acceleration", "m/s^2 or rad/s^2")
                    Acc[i] = model.velocity_from_twist(q_full, A)[: self.nv_base]
            except (_Rejected, ValueError) as e:
                raise _Rejected(f"point {i}: {e}") from None
            P[i] = qb
        has_acc = bool(np.any(Acc)) or bool(np.any(cur_a))
        times, P, Vel, Acc = self._prepend(times, P, Vel, Acc, (cur_q, cur_v, cur_a))
        try:
            return Reference(model.group, times, P, Vel, Acc if has_acc else None)
        except (ValueError, FloatingPointError) as e:
            raise _Rejected(str(e)) from None

    # ---------------------------------------------------------------------------- FollowJointTrajectory

    async def _on_goal(self, goal) -> GoalResponse:
        """Accept a goal that joint_trajectory_controller would accept and the joint_reference checks pass. The
        goal is checked and its reference built on the reference worker (in order with the references, never
        holding the control loop up: 20 ms for 100 points, 1 s for 10⁴ on this machine); this coroutine waits
        for the answer. The reference is installed by :meth:`_on_goal_accepted`."""
        if self.state is None:
            self._count("received_follow_joint_trajectory")
            answer = _Rejected("no state received yet")
        else:
            future = Future()
            self._enqueue("follow_joint_trajectory", (goal, future))
            answer = await future
        if isinstance(answer, _ActiveGoal):
            self._pending_goal = (goal, answer)  # _on_goal_accepted follows at once, in this same task
            return GoalResponse.ACCEPT
        self._count("rejected_follow_joint_trajectory")
        if not isinstance(answer, _Rejected):
            self._count("control_errors")
            answer = f"{type(answer).__name__}: {answer}"
        self.get_logger().warning(f"follow_joint_trajectory: goal rejected: {answer}")
        return GoalResponse.REJECT

    def _prepare_goal(self, goal) -> _ActiveGoal:
        """Worker thread: a goal checked as joint_trajectory_controller does, its trajectory as joint_reference's,
        and its tolerances; _Rejected with the reason."""
        traj = goal.trajectory
        with self._lock:
            state, offset, current = self.state, self._offset_ns, self.joint_ref
        if goal.multi_dof_trajectory.joint_names or goal.multi_dof_trajectory.points:
            raise _Rejected("multi_dof_trajectory is not supported (the base follows base_reference)")
        names = list(traj.joint_names)
        if not self.settings.allow_partial_joints_goal and len(names) != self.nj:
            raise _Rejected(f"joints {names[:20]} don't match the controller's joints {', '.join(self.joint_names)} "
                            "(allow_partial_joints_goal is false)")
        if not names:
            raise _Rejected("empty joint names")
        if not traj.points:
            raise _Rejected("empty trajectory")
        moving = [x for x in traj.points[-1].velocities if not abs(x) <= tolerances_._EPS]
        if moving:
            raise _Rejected(f"the last point's velocities are not zero: {moving[:20]}")
        start_ns, start, ref = self._build_reference("joint_reference", traj, state, offset, current)
        if _stamp_ns(traj.header.stamp, "header.stamp") and start_ns + int(ref.end_time * _NS) < state[0]:
            raise _Rejected(f"the trajectory starting at t = {start_ns * 1e-9:.6f} s ends at "
                            f"t = {start_ns * 1e-9 + ref.end_time:.6f} s, before the newest state's "
                            f"t = {state[0] * 1e-9:.6f} s")
        tolerances, problem = tolerances_.from_goal(
            self._default_tolerances, self.joint_names,
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.path_tolerance],
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.goal_tolerance],
            goal.goal_time_tolerance.sec + goal.goal_time_tolerance.nanosec * 1e-9)
        if problem:
            self.get_logger().warning(f"follow_joint_trajectory: {problem}: the goal runs with the default "
                                      "tolerances (as in joint_trajectory_controller)")
        return _ActiveGoal(b"", None, start, ref, self._times(traj.points),
                           tolerances_.TrajectoryCheck(tolerances, ref.end_time), Future())

    def _on_goal_accepted(self, goal_handle) -> None:
        """Executor thread, right after :meth:`_on_goal` accepted: preempt the running goal (aborted with
        INVALID_GOAL, as joint_trajectory_controller does) and install the new one's reference."""
        pending, self._pending_goal = self._pending_goal, None
        goal_handle.execute()
        g = pending[1] if pending is not None and pending[0] is goal_handle.request else None
        if g is None:  # not the goal _on_goal prepared (rclpy calls the two in a row): refuse it
            g = _ActiveGoal(bytes(goal_handle.goal_id.uuid), goal_handle, 0, None, np.zeros(0), None, Future())
            g.future.set_result(("abort", _FJT(error_code=_FJT.INVALID_GOAL, error_string="goal not checked")))
            self._executing[g.goal_id] = g
            return
        g.goal_id, g.handle = bytes(goal_handle.goal_id.uuid), goal_handle
        self._executing[g.goal_id] = g
        with self._lock:
            old, self._goal = self._goal, g
            self.joint_ref = (g.start, g.ref)
        if old is not None:
            self._finish(old, "abort", _FJT.INVALID_GOAL, "Current goal preempted by new incoming action.")
        self.get_logger().info(f"follow_joint_trajectory: goal accepted: {len(g.times)} points over "
                               f"{g.ref.end_time:g} s from t = {(g.start + self._offset_ns) * 1e-9:.6f} s")

    async def _execute_goal(self, goal_handle):
        """The goal's execute callback: waits for its outcome (set from the state callbacks, a cancel or a
        preemption, all on the executor thread) and moves the goal to it."""
        g = self._executing.pop(bytes(goal_handle.goal_id.uuid), None)
        if g is None:
            goal_handle.abort()
            return _FJT(error_code=_FJT.INVALID_GOAL, error_string="unknown goal")
        outcome, result = await g.future
        try:
            if outcome == "succeed":
                goal_handle.succeed()
            elif outcome == "canceled" and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
        except Exception as e:  # noqa: BLE001 - e.g. a transition the goal's state no longer allows
            self._warn("error_goal", f"follow_joint_trajectory: cannot set the goal's state to {outcome}: {e}")
        return result

    def _on_cancel(self, goal_handle) -> CancelResponse:
        """As joint_trajectory_controller: the running goal is canceled and the joints hold their positions."""
        g = self._goal
        if g is not None and g.goal_id == bytes(goal_handle.goal_id.uuid):
            t = self._hold()
            self._finish(g, "canceled", _FJT.SUCCESSFUL, f"canceled at t = {t * 1e-9:.6f} s: holding position")
        return CancelResponse.ACCEPT

    def _hold(self) -> int:
        """Hold the joints where the newest state has them, at rest; that state's stamp."""
        t, q, _v = self.state
        with self._lock:
            self.joint_ref = (t - self._offset_ns, Reference(self.nj, [0.0], [self._joint_positions(q)]))
        return t

    def _finish(self, g: _ActiveGoal, outcome: str, code: int, text: str) -> None:
        if self._goal is g:
            self._goal = None
        if g.future.done():
            return
        g.future.set_result((outcome, _FJT(error_code=code, error_string=text)))
        self._count({"succeed": "goals_succeeded", "canceled": "goals_canceled"}.get(outcome, "goals_aborted"))
        if outcome == "succeed":  # one call site per severity (rclpy's logger insists)
            self.get_logger().info(f"follow_joint_trajectory: goal succeeded: {text}")
        else:
            self.get_logger().warning(f"follow_joint_trajectory: goal {outcome}: {text}")

    def _monitor_goal(self, t: int, q: np.ndarray, v: np.ndarray) -> None:
        """A new state at ``t``: check the running goal's tolerances, publish its feedback (at most every
        FEEDBACK_PERIOD_S of wall clock) and end it when it succeeded or failed."""
        g = self._goal
        if self.joint_ref is None or self.joint_ref[1] is not g.ref:
            return self._finish(g, "abort", _FJT.INVALID_GOAL, "the trajectory was replaced by a joint_reference "
                                                               "message")
        t_rel = (t - self._offset_ns - g.start) * 1e-9
        q_d, v_d, a_d = g.ref(t_rel)
        actual, velocity = self._joint_positions(q), v[self.nv_base:]
        e_pos = tolerances_.joint_error(q_d, actual, self._wrap)
        e_vel = v_d - velocity
        status, found = g.check(t_rel, e_pos, e_vel)
        now = time.monotonic()
        if status != tolerances_.RUNNING or now - g.last_feedback >= FEEDBACK_PERIOD_S:
            g.last_feedback = now
            since = _duration(t - self._offset_ns - g.start)
            fb = FollowJointTrajectory.Feedback(joint_names=list(self.joint_names),
                                                index=int(np.searchsorted(g.times, t_rel, side="right")))
            fb.header.stamp = cv.time_from_ns(t)
            fb.desired = JointTrajectoryPoint(positions=_floats(q_d), velocities=_floats(v_d),
                                              accelerations=_floats(a_d), time_from_start=since)
            fb.actual = JointTrajectoryPoint(positions=_floats(actual), velocities=_floats(velocity),
                                             time_from_start=since)
            fb.error = JointTrajectoryPoint(positions=_floats(e_pos), velocities=_floats(e_vel), time_from_start=since)
            try:
                g.handle.publish_feedback(fb)
            except Exception as e:  # noqa: BLE001 - a goal that just ended
                self._warn("error_feedback", f"follow_joint_trajectory: feedback not published: {e}")
        details = tolerances_.describe(found, self.joint_names)
        if status == tolerances_.PATH_VIOLATED:
            self._hold()
            self._finish(g, "abort", _FJT.PATH_TOLERANCE_VIOLATED,
                         f"Aborted due to path tolerance violation at t = {t * 1e-9:.6f} s: {details}")
        elif status == tolerances_.GOAL_VIOLATED:
            self._hold()
            self._finish(g, "abort", _FJT.GOAL_TOLERANCE_VIOLATED,
                         f"Aborted due to goal_time_tolerance exceeding by {t_rel - g.ref.end_time:.6f} seconds: "
                         f"{details}")
        elif status == tolerances_.SUCCEEDED:
            self._finish(g, "succeed", _FJT.SUCCESSFUL, f"Goal successfully reached! (t = {t * 1e-9:.6f} s, "
                         f"{t_rel - g.ref.end_time:.3f} s after the trajectory's end; max |position error| "
                         f"{np.abs(e_pos).max():.3g})")

    # ------------------------------------------------------------------------------- control

    def _on_timer(self) -> None:
        if self.state is None:
            return
        age = (self.get_clock().now().nanoseconds - self._state_arrival_ns) * 1e-9
        if age > self.settings.state_timeout:
            self._warn("stale", f"state is {age:.3f} s old (state_timeout {self.settings.state_timeout:g} s): "
                                "not commanding")
            if not self._stopped:
                self._stopped = True
                self._publish(self.state[0], np.zeros(self.model.nv), self.state[1])
            return
        self._stopped = False
        self._command()

    def _command(self) -> None:
        """Publish the command for the newest state (computed once per state; zero if it cannot be)."""
        t, q, v = self.state
        if self._last_tau_stamp != t:
            try:
                q_d, v_d, a_d = self._desired(t)
                tau = np.asarray(self.law(q, v, q_d, v_d, a_d), dtype=float)
                if self.settings.compensate_passive and self.model._passive_active:
                    tau = tau - self.model.passive_forces(q, v)
                if not np.all(np.isfinite(tau)):
                    raise FloatingPointError("the control law gave a non-finite command")
            except Exception as e:  # noqa: BLE001 - publish a safe command and keep running
                self._count("control_errors")
                self._warn("law", f"cannot compute the command ({type(e).__name__}: {e}): publishing zero",
                           error=True)
                tau = np.zeros(self.model.nv)
            self._last_tau_stamp, self._last_tau = t, tau
        self._publish(t, self._last_tau, q)

    def _saturate(self, tau: np.ndarray, q: Optional[np.ndarray]):
        """``(W or None, efforts, saturated)``: the base wrench and the joint efforts within the limits."""
        saturated = False
        W = None
        if self.floating:
            W = np.zeros(6)
            if q is not None and np.any(tau[: self.nv_base]):
                B = self.model.velocity_map(q)  # V_base = B v_base; tau_base = B^T W
                W = np.linalg.pinv(B.T) @ tau[: self.nv_base]
                if not np.all(np.isfinite(W)):
                    raise FloatingPointError("non-finite wrench")
            for part, limit in ((slice(0, 3), self.max_force), (slice(3, 6), self.max_torque)):
                n = float(np.linalg.norm(W[part]))
                if n > limit:
                    W[part] *= limit / n
                    saturated = True
            if self.allocation is not None:
                alloc = self.allocation(W)
                self._thrusts = alloc.thrust
                saturated = saturated or alloc.saturated
        effort = tau[self.nv_base:]
        if self.nj:
            clipped = np.clip(effort, -self.max_effort, self.max_effort)
            saturated = saturated or bool(np.any(clipped != effort))
            effort = clipped
        return W, effort, saturated

    def _publish(self, stamp: int, tau: np.ndarray, q: Optional[np.ndarray]) -> None:
        W, effort, saturated = self._saturate(np.asarray(tau, dtype=float), q)
        self._count("commands")
        if saturated:
            self._count("saturated_commands")
            self._warn("saturated", "command saturated (max_wrench "
                       f"[{self.max_force:g} N, {self.max_torque:g} N m], max_effort "
                       f"[{', '.join(f'{x:g}' for x in self.max_effort)}]): {self._counts['saturated_commands']} "
                       f"saturated commands of {self._counts['commands']}")
        if self.pub_wrench is not None:
            self.pub_wrench.publish(cv.wrench_stamped_msg(stamp, self.base_frame, W))
        if self.allocation is not None:
            thrust = [float(x) for x in self._thrusts]
            self.pub_thruster_command.publish(cv.joint_state_msg(stamp, list(self.model.thruster_names),
                                                                 effort=thrust))
            self.pub_thrust.publish(Float64MultiArray(data=thrust))
        if self.pub_effort is not None:
            values = [float(x) for x in effort]
            self.pub_joint_command.publish(cv.joint_state_msg(stamp, self.joint_names, effort=values))
            self.pub_effort.publish(Float64MultiArray(data=values))


def _floats(x) -> list:
    return [float(v) for v in x]


def _duration(ns: int) -> Duration:
    sec, nanosec = divmod(int(ns), _NS)
    return Duration(sec=sec, nanosec=nanosec)


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    return run_node(ControllerNode, args, make_executor=settings_executor)


if __name__ == "__main__":
    sys.exit(main())
