"""Dynamics node: one rigid body, or a multibody robot (a floating or fixed base carrying a joint tree).

Run it with ``ros2 run mbs_ros dynamics_node`` or, without a ROS install, ``python -m
mbs_ros.nodes.dynamics_node --ros-args -r __ns:=/robot1 --params-file config/rigid_body.yaml``
(``config/uvms_6dof.yaml``, ``config/arm_6dof_fixed.yaml``, ... for robots).
The physics is :mod:`mbs_ros.dynamics` (``Model``, ``step``); this node only moves data in and out.

Model. ``robot_description`` (URDF XML) or ``model_file`` (URDF, xacro or robot YAML; a relative path is looked
up in the mbs_ros share directory, then the current directory) name a robot; ``base_group`` puts its root link on
fixed | se3 | schoenflies | se2 | so3 | so3xr3 (default: the robot YAML's ``base``, else ``fixed`` for a URDF).
With neither, the node simulates one rigid body on ``base_group`` (default se3) described by ``mass``,
``inertia`` and ``com``, as it always did (those three parameters are ignored for a robot). ``gravity``
defaults to the robot YAML's. Initial state: ``initial_position``/``initial_rpy``/``initial_twist`` for the base
(a fixed base stays at the identity: place it in the URDF), ``initial_joint_positions`` and
``initial_joint_velocities`` (``joint_names`` order, rad or m; empty = zeros).

Topics (relative names live in the node's namespace; ``<ns>/`` is the namespace as a TF prefix, e.g.
``robot1/``; ``<base>`` is ``base_frame`` prefixed, ``robot1/base_link``; for a robot ``base_frame`` defaults to
the URDF's root link and must name it):

- sub ``cmd_wrench`` (``geometry_msgs/WrenchStamped``): wrench at the base origin. ``frame_id`` empty,
  ``base_frame`` or ``<base>``: body axes, held fixed in the body; ``world_frame``: world axes, held
  fixed in the world (rotated into the body axes at every integrator stage). Any other frame, NaN or
  infinite components: the message is rejected with a throttled warning. Components the group cannot
  act on (e.g. a roll torque on se2) are dropped with a throttled warning and the rest is applied.
  A fixed base takes no wrench: every cmd_wrench is rejected with a throttled warning.
  A command is applied from the next physics step on and held until the next one, or for
  ``cmd_timeout`` seconds of simulation time. ``header.stamp`` is ignored, except in lockstep (below).
- sub ``cmd_joint_effort`` (``std_msgs/Float64MultiArray``, robots with movable joints): one effort per joint
  in ``joint_names`` order [N m or N], as ros2_control's forward command controllers send (``layout`` is
  ignored). Wrong length, NaN or infinite entries: rejected with a throttled warning. Applied from the next
  step, held like ``cmd_wrench`` (its own ``cmd_timeout``). No effort limit is enforced. Ignored in lockstep
  (it carries no stamp; one info message says so).
- sub ``joint_command`` (``sensor_msgs/JointState``, robots with movable joints; as Isaac Sim's): ``effort`` by
  ``name`` [N m or N]; ``position``/``velocity`` are ignored; joints the message does not name get zero
  effort. An unknown or repeated name, a missing effort, NaN or infinite entries: rejected with a throttled
  warning. Otherwise exactly like ``cmd_joint_effort`` (the two write the same command: the later wins), and
  in lockstep the joints' command channel, ``header.stamp`` naming its period.
- pub ``odom`` (``nav_msgs/Odometry``): pose of ``<base>`` in ``world_frame``, twist in ``<base>`` (a fixed
  base: its constant pose, zero twist).
- pub ``pose`` (``geometry_msgs/PoseStamped``) and ``/tf``: ``world_frame`` -> ``<base>``, then for a robot
  one transform per movable joint, parent link -> child link (``<ns>/link1`` -> ``<ns>/link2``), as
  ``robot_state_publisher`` does; fixed joints go once to ``/tf_static`` (transient local). A URDF root link
  named ``world`` is ``world_frame`` itself (then world -> base is a fixed joint on ``/tf_static``).
- pub ``joint_states`` (``sensor_msgs/JointState``, robots with movable joints): URDF joint names (not
  prefixed), position (rad; the angle of a continuous joint, in (-pi, pi]), velocity, effort = the effort
  applied on the step that ended at the stamp.
- pub ``joint_wrenches/<joint>`` (``geometry_msgs/WrenchStamped``, one per movable joint; characters not
  allowed in topic names become ``_``): ``Model.joint_wrenches(q, v, a)`` with ``a`` the forward dynamics under
  the command applied on the step that ended at the stamp: the total wrench ``[F; tau]`` the joint transmits
  from its parent to its child link (actuation included: its component along the axis is the joint effort),
  in the child link's frame (``frame_id`` ``<ns>/<child link>``) at its origin, gravity included.
- pub ``wrench`` (``geometry_msgs/WrenchStamped``): the wrench actually applied, after dropping, in the
  frame it is held in (``<base>`` or ``world_frame``). Published whenever it changes, stamped with the
  simulation time of the first step it applies to, and again with every ``odom`` message, stamped with
  the start of the last step taken. So: the wrench applied on the step that starts at ``t`` is the
  one in the latest ``wrench`` message stamped ``<= t``.
- pub ``joint_effort`` (``sensor_msgs/JointState``, name and effort only; robots with movable joints): the
  joint efforts actually applied, published and stamped exactly like ``wrench``.
- pub ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``) at ``diagnostics_rate``: kinetic,
  potential and total energy, work done by the applied wrench and efforts, the energy balance residual
  ``E - E_ref - work``, and the world-frame spatial momentum, with their reference values taken at
  start-up, reset, and runtime changes of the inertial parameters.
- pub ``robot_description`` (``std_msgs/String``, reliable + transient local, depth 1; robots only): the
  robot's URDF, once at start-up (a late subscriber still gets it), with every link renamed to the TF frame
  this node publishes for it (``<ns>/link1``; a root link ``world`` stays ``world_frame``); joint names as in
  ``joint_states``. So RViz's RobotModel display works with its "TF Prefix" left empty, and
  ``robot_state_publisher`` fed this URDF publishes the same frames with its ``frame_prefix`` left empty
  (it is not needed: this node publishes /tf itself). See :mod:`mbs_ros.nodes.markers`.
- pub ``markers`` (``visualization_msgs/MarkerArray``, with every ``odom`` while ``publish_markers``): one
  marker per URDF ``<visual>`` (box, cylinder, sphere; a mesh as MESH_RESOURCE with its URI and scale; the
  robot YAML's visuals are URDF visuals), at its visual origin; a link with mass but no visual shows its
  equivalent-inertia box, and so does a single body. ``frame_id`` is ``world_frame`` and each pose is the
  world pose (link pose x visual origin), stamped like ``odom``; ``ns`` is the link's TF frame, ``id`` the
  visual's index in the link (stable). Floating bases add two ARROW markers (``ns`` ``<base>/wrench``, ``id``
  0 force, 1 torque) from the base origin along the applied wrench in world axes, ``marker_wrench_scale``
  metres per N and per N m (DELETE while zero). The first array after start-up and after a reset begins
  with a DELETEALL.
- pub ``/clock`` (``rosgraph_msgs/Clock``, with ``publish_clock``): the simulation time (below).

Services: ``~/reset`` (``std_srvs/Trigger``): back to the initial state (time keeps running: the reset
state gets the next step's stamp), commands cleared. ``~/pause`` (``std_srvs/SetBool``): stop/resume
stepping; simulation time stops while paused, and state topics are not published (the state at
which it stops is published once).

Time: ``t_k = t0 + k * dt`` in integer nanoseconds, ``dt`` = the integer-nanosecond period nearest
``1 / physics_rate``, ``t0`` = the node's ROS clock at start-up: the wall clock, or with ``use_sim_time:=true``
the /clock time (0 when no /clock has been published yet, e.g. when this node is the one publishing it). Every
stamp is the simulation time of the state it describes. ``publish_clock`` publishes it on /clock (reliable,
depth 10: best-effort subscribers such as rclpy's and rclcpp's time sources match): with every batch of
steps, before the state messages of a stamp, and repeated every 0.5 s while the time stands still (paused,
lockstep waiting), so late joiners get it. One node per graph should publish /clock (in a fleet, one dynamics
node); then every node can run with ``use_sim_time:=true``. This node's own stepping always runs on the steady
clock, whatever ``use_sim_time`` says.

Pacing (not lockstep): a timer steps as many steps as ``real_time_factor`` x the wall clock demands, at most
10 ms of simulation time per callback (when behind, the next callback follows at once, and commands received
meanwhile are applied between the batches); if it falls more than 50 ms of wall clock behind, it skips ahead
and warns (throttled): under load the simulation runs slower than asked rather than fast-forwarding open loop
past the controller. ``real_time_factor: 0``: a batch per callback, back to back, as fast as the machine
allows (subscriptions are served between batches). ``real_time_factor`` can be changed at runtime.

Lockstep (``lockstep: true``; needs ``physics_rate / control_rate`` to be a whole number n, else the node
refuses to start): the node publishes the state at ``t_k`` (/clock first, then odom, joint_states, /tf,
markers, ...), then waits. It advances one control period -- n physics steps with the commands held, state
published at ``t_{k+n}`` -- only once a valid command stamped ``t_k`` has arrived on every channel it
expects: ``cmd_wrench`` if the base floats, ``joint_command`` if there are movable joints (a fixed base with
no movable joint cannot run in lockstep). Commands stamped for another period are ignored (debug message for
earlier stamps, e.g. answers to a state sent twice; a throttled warning for later ones); a rejected command
does not count. It never advances without the commands: while waiting it repeats /clock, sends odom and
joint_states at ``t_k`` again (unchanged, same stamp) after 1 s or at once when a new endpoint matches (in case
a message was lost before discovery completed), and warns (throttled) after 2 s without any command. There is
no command timeout in lockstep, and ``publish_rate`` does not apply: the state is published once per control
period. ``real_time_factor`` is a maximum speed (a period starts no earlier than the wall clock allows; 0 =
as fast as the controller answers). Pause holds the periods (commands are still collected); resume takes the
waiting period if its commands are all there; reset publishes the initial state at the next step's stamp and
drops the commands collected for the old one. With the same parameters, and ``use_sim_time`` so that ``t0``
is 0, two lockstep runs publish bit-identical state sequences.
"""

from __future__ import annotations

import math
import re
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import (
    FloatingPointRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.clock import Clock as RclpyClock
from rclpy.clock import ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from visualization_msgs.msg import MarkerArray

from mbs_ros.dynamics import Model, step
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes import params as prm
from mbs_ros.nodes import markers as mk
from mbs_ros.nodes import model_source as ms
from mbs_ros.nodes.model_source import ParameterError
from mbs_ros.nodes.runtime import run_node

try:  # tf2_msgs is not on PyPI: the set-up builds it; a ROS install has it.
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - reported at start-up
    TFMessage = None

BASE_GROUPS = ms.BASES  # a single rigid body
TREE_BASE_GROUPS = ms.TREE_BASES  # a robot: a group, or fixed
INTEGRATORS = ("euler", "heun", "rk3", "rk4")

# Wall-clock pacing: the timer ticks at most this often; each tick steps what the wall clock demands.
MAX_TICK_RATE_HZ = 500.0
# If the simulation lags the wall clock by more than this, it skips ahead (and warns) instead.
MAX_LAG_S = 0.05
# At most this much simulation time per timer callback (catching up takes several callbacks, with the
# subscriptions served in between).
MAX_BATCH_S = 0.01
WARN_THROTTLE_S = 2.0
# While the simulation time stands still (paused, or waiting in lockstep), /clock is repeated this often.
CLOCK_REPEAT_S = 0.5
# Lockstep: the timer's period when it only watches (real_time_factor 0); the state t_k is published again
# after this long without the commands (or at once when a new endpoint matches), in case the first copy or the
# controller's answer was lost before discovery completed; a warning after this long without any command.
LOCKSTEP_WATCH_S = 0.05
LOCKSTEP_RESEND_S = 1.0
LOCKSTEP_WARN_S = 2.0

__all__ = ["DynamicsNode", "Settings", "ParameterError", "settings_from_values", "main"]


# ------------------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Settings:
    """Validated parameter values."""

    robot_description: str = ""
    model_file: str = ""
    base_group: str = "se3"
    mass: float = 1.0
    inertia: Tuple[float, ...] = (0.01, 0.0, 0.0, 0.01, 0.0, 0.01)  # ixx ixy ixz iyy iyz izz
    com: Tuple[float, ...] = (0.0, 0.0, 0.0)
    gravity: Tuple[float, ...] = (0.0, 0.0, -9.81)
    integrator: str = "rk4"
    physics_rate: float = 1000.0
    publish_rate: float = 50.0
    diagnostics_rate: float = 1.0
    initial_position: Tuple[float, ...] = (0.0, 0.0, 0.0)
    initial_rpy: Tuple[float, ...] = (0.0, 0.0, 0.0)
    initial_twist: Tuple[float, ...] = (0.0,) * 6
    initial_joint_positions: Tuple[float, ...] = ()
    initial_joint_velocities: Tuple[float, ...] = ()
    world_frame: str = "world"
    base_frame: str = "base_link"
    cmd_timeout: float = 0.5
    use_events_executor: bool = False
    publish_clock: bool = False
    real_time_factor: float = 1.0
    lockstep: bool = False
    control_rate: float = 100.0
    publish_markers: bool = True
    marker_wrench_scale: float = 0.01

    @property
    def inertia_matrix(self) -> np.ndarray:
        ixx, ixy, ixz, iyy, iyz, izz = self.inertia
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])

    @property
    def multibody(self) -> bool:
        return bool(self.robot_description.strip() or self.model_file.strip())


DEFAULTS = Settings()

# name -> (description, extra descriptor fields)
_PARAMETERS: Dict[str, Tuple[str, dict]] = {
    "robot_description": (
        "URDF XML of a robot (as robot_state_publisher takes it); empty: see model_file.", {"read_only": True}),
    "model_file": (
        "URDF, xacro or robot YAML file of a robot; a relative path is looked up in the mbs_ros share directory, "
        "then the current directory. Neither this nor robot_description: a single rigid body (mass, inertia, "
        "com).", {"read_only": True}),
    "base_group": (
        "Configuration group of the base: " + ", ".join(BASE_GROUPS) + "; a robot also fixed. Default: the robot "
        "YAML's base, fixed for a URDF, se3 for a single body.", {"read_only": True}),
    "mass": ("Mass [kg], > 0 (single body only).", {"floating_point_range": (0.0, 1.0e9)}),
    "inertia": (
        "Inertia about the centre of mass in body axes [kg m^2], as URDF: [ixx, ixy, ixz, iyy, iyz, izz]; "
        "must be positive definite (a warning if it violates the triangle inequality). Single body only.", {}),
    "com": ("Centre of mass in the body frame [m], as URDF: [x, y, z]. Single body only.", {}),
    "gravity": ("Acceleration of gravity in the world frame [m/s^2]: [x, y, z] (default: the robot YAML's, "
                "else [0, 0, -9.81]).", {}),
    "integrator": ("Lie-group integrator: " + ", ".join(INTEGRATORS) + ".", {}),
    "physics_rate": (
        "Physics steps per second of simulation time [Hz]; dt is the nearest whole number of ns.",
        {"read_only": True, "floating_point_range": (1.0, 100000.0)}),
    "publish_rate": (
        "odom/pose/tf/wrench/joint_states/joint_wrenches rate [Hz], <= physics_rate; published every "
        "round(physics_rate/publish_rate) steps.", {"floating_point_range": (0.001, 100000.0)}),
    "diagnostics_rate": (
        "Energy/momentum bookkeeping rate on /diagnostics [Hz], <= physics_rate; 0 = off.",
        {"floating_point_range": (0.0, 100000.0)}),
    "initial_position": ("Initial position of the base in the world [m]; used at start-up and reset.", {}),
    "initial_rpy": (
        "Initial roll, pitch, yaw [rad] (fixed axes x, y, z, as URDF); human-facing input only, "
        "converted to a rotation at once.", {}),
    "initial_twist": ("Initial body-frame twist [vx, vy, vz, wx, wy, wz] (linear first) [m/s, rad/s].", {}),
    "initial_joint_positions": (
        "Initial joint positions in joint_names order [rad or m; the angle of a continuous joint]; "
        "empty = zeros.", {}),
    "initial_joint_velocities": (
        "Initial joint velocities in joint_names order [rad/s or m/s]; empty = zeros.", {}),
    "world_frame": ("Fixed frame of odom, pose and tf.", {"read_only": True}),
    "base_frame": (
        "Base frame; prefixed with the node namespace (robot1/base_link). A leading '/' means no prefix (for "
        "every link of a robot). For a robot it names the URDF's root link (the default).", {"read_only": True}),
    "cmd_timeout": (
        "A cmd_wrench or cmd_joint_effort is held for this long [s of simulation time], then it goes to zero; "
        "0 = hold the last command forever.", {"floating_point_range": (0.0, 1.0e6)}),
    "use_events_executor": (
        "Spin with rclpy.experimental.EventsExecutor when available (falls back to the single-threaded "
        "executor).", {"read_only": True}),
    "publish_clock": (
        "Publish the simulation time on /clock (rosgraph_msgs/Clock), so that every node can run with "
        "use_sim_time:=true. One node per ROS graph should publish it.", {"read_only": True}),
    "real_time_factor": (
        "Simulation seconds per wall-clock second, >= 0; 0 = as fast as possible. In lockstep: the maximum "
        "speed (0 = as fast as the controller answers).", {"floating_point_range": (0.0, 1.0e6)}),
    "lockstep": (
        "Advance one control period (physics_rate/control_rate steps) only when the commands stamped with the "
        "current state's stamp have arrived on cmd_wrench (floating base) and joint_command (joints).",
        {"read_only": True}),
    "control_rate": (
        "Control periods per second of simulation time [Hz] (lockstep only); physics_rate/control_rate must be "
        "a whole number.", {"read_only": True, "floating_point_range": (0.001, 100000.0)}),
    "publish_markers": (
        "Publish the bodies' shapes and the applied base wrench as a visualization_msgs/MarkerArray on "
        "markers, with every state.", {}),
    "marker_wrench_scale": (
        "Length of the wrench arrows on markers [m per N and m per N m], >= 0.",
        {"floating_point_range": (0.0, 1.0e6)}),
}

_INERTIAL = ("mass", "inertia", "com", "gravity")
_SINGLE_BODY_ONLY = ("mass", "inertia", "com")


def settings_from_values(values: Dict[str, object], source: Optional[ms.Source] = None) -> Settings:
    """Validate raw parameter values (ints accepted for doubles); raise :class:`ParameterError`.

    ``source`` is the loaded model source (see :mod:`mbs_ros.nodes.model_source`); None: a single body."""

    def text(name, choices=None, allow_empty=False):
        return prm.text(values, name, choices, allow_empty)

    def number(name, lo=None, lo_open=False, hi=None):
        return prm.number(values, name, lo, lo_open, hi)

    def vector(name, n):
        return prm.vector(values, name, n)

    def flag(name):
        return prm.flag(values, name)

    multibody = source is not None and source.multibody
    s = Settings(
        robot_description=text("robot_description", allow_empty=True),
        model_file=text("model_file", allow_empty=True),
        base_group=text("base_group", TREE_BASE_GROUPS if multibody else BASE_GROUPS),
        mass=number("mass", lo=0.0, lo_open=True),
        inertia=vector("inertia", 6),
        com=vector("com", 3),
        gravity=vector("gravity", 3),
        integrator=text("integrator", INTEGRATORS),
        physics_rate=number("physics_rate", lo=0.0, lo_open=True, hi=1.0e5),
        publish_rate=number("publish_rate", lo=0.0, lo_open=True),
        diagnostics_rate=number("diagnostics_rate", lo=0.0),
        initial_position=vector("initial_position", 3),
        initial_rpy=vector("initial_rpy", 3),
        initial_twist=vector("initial_twist", 6),
        initial_joint_positions=vector("initial_joint_positions", None),
        initial_joint_velocities=vector("initial_joint_velocities", None),
        world_frame=text("world_frame"),
        base_frame=text("base_frame"),
        cmd_timeout=number("cmd_timeout", lo=0.0),
        use_events_executor=flag("use_events_executor"),
        publish_clock=flag("publish_clock"),
        real_time_factor=number("real_time_factor", lo=0.0),
        lockstep=flag("lockstep"),
        control_rate=number("control_rate", lo=0.0, lo_open=True),
        publish_markers=flag("publish_markers"),
        marker_wrench_scale=number("marker_wrench_scale", lo=0.0),
    )
    if s.publish_rate > s.physics_rate:
        raise ParameterError(
            f"publish_rate ({s.publish_rate:g} Hz) must not exceed physics_rate ({s.physics_rate:g} Hz)")
    if s.diagnostics_rate > s.physics_rate:
        raise ParameterError(
            f"diagnostics_rate ({s.diagnostics_rate:g} Hz) must not exceed physics_rate "
            f"({s.physics_rate:g} Hz)")
    if s.lockstep:
        lockstep_steps(s)  # refuses a control period that is not a whole number of physics steps
    if s.world_frame.strip("/") == s.base_frame.strip("/"):
        raise ParameterError(f"world_frame and base_frame must differ, both are {s.world_frame!r}")
    if multibody:
        base_link = base_link_of(source)
        if s.base_frame.lstrip("/") != base_link:
            raise ParameterError(
                f"base_frame must name the robot's base link {base_link!r} (or be left unset), got {s.base_frame!r}")
    else:
        check_inertia(s.inertia_matrix)
    return s


def lockstep_steps(s: Settings) -> int:
    """Physics steps per control period in lockstep: ``physics_rate / control_rate``, which must be a whole
    number >= 1 (ParameterError with the reason otherwise)."""
    ratio = s.physics_rate / s.control_rate
    n = int(round(ratio))
    if n < 1 or abs(ratio - n) > 1e-9 * ratio:
        raise ParameterError(
            f"lockstep needs a whole number of physics steps per control period: physics_rate / control_rate = "
            f"{s.physics_rate:g} / {s.control_rate:g} = {ratio:.6g} (choose control_rate = physics_rate / n)")
    return n


def base_link_of(source: ms.Source) -> str:
    """The link whose pose is the base's (odom's child): the URDF root, or the link a ``world`` root holds."""
    if source.root_link != "world":
        return source.root_link
    children = sorted(child for _n, _t, parent, child in source.joints if parent == "world")
    return children[0] if children else "world"


def check_inertia(inertia: np.ndarray) -> Optional[str]:
    """Raise :class:`ParameterError` unless positive definite; return a warning if the principal moments
    violate the triangle inequality (no real body has them, but some papers use them)."""
    eig = np.linalg.eigvalsh(inertia)
    if not eig[0] > 0.0:
        raise ParameterError(
            "inertia must be positive definite; its principal moments are "
            + ", ".join(f"{e:.6g}" for e in eig))
    a, b, c = eig
    if c > a + b + 1e-12 * c:
        return (f"inertia principal moments {a:.6g}, {b:.6g}, {c:.6g} violate the triangle inequality "
                f"({c:.6g} > {a:.6g} + {b:.6g}): no real body has them; simulating anyway")
    return None


def build_model(s: Settings, source: Optional[ms.Source] = None) -> Model:
    if source is not None and source.multibody:
        return ms.build_multibody(source, s.base_group, s.gravity)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the triangle-inequality warning is logged by the node
            return Model.rigid_body(base=s.base_group, mass=s.mass, inertia=s.inertia_matrix,
                                    com=np.array(s.com), gravity=np.array(s.gravity))
    except ValueError as e:
        raise ParameterError(f"cannot build the {s.base_group} model: {e}") from None


def initial_state(model: Model, s: Settings) -> Tuple[np.ndarray, np.ndarray]:
    """``(q0, v0)`` from ``initial_position``, ``initial_rpy``, ``initial_twist`` and the joints' values."""
    nj = len(model.joint_names)
    for name in ("initial_joint_positions", "initial_joint_velocities"):
        n = len(getattr(s, name))
        if n not in (0, nj):
            raise ParameterError(f"{name} must have one entry per joint ({nj}: {', '.join(model.joint_names)}) "
                                 f"or none, got {n}")
    joints = None
    if nj:
        angles = s.initial_joint_positions or (0.0,) * nj
        joints = ms.joint_positions_to_q(model, angles)
    try:
        q0 = model.configuration_from_pose(np.array(s.initial_position),
                                           cv.quaternion_from_rpy(s.initial_rpy), joints=joints)
    except ValueError as e:
        raise ParameterError(f"initial_position/initial_rpy: {e}") from None
    try:
        v0 = model.velocity_from_twist(q0, np.array(s.initial_twist))
    except ValueError as e:
        raise ParameterError(f"initial_twist: {e}") from None
    if nj and s.initial_joint_velocities:
        v0 = np.array(v0, dtype=float)
        v0[model.nv - nj:] = s.initial_joint_velocities
    return q0, v0


def _descriptor(name: str, value) -> ParameterDescriptor:
    description, extra = _PARAMETERS[name]
    d = ParameterDescriptor(name=name, description=description)
    d.read_only = bool(extra.get("read_only", False))
    if isinstance(value, str):
        d.type = ParameterType.PARAMETER_STRING
    elif isinstance(value, bool):
        d.type = ParameterType.PARAMETER_BOOL
    else:
        # Numbers accept integers too ("mass: 2" in YAML): the node validates and converts them.
        d.dynamic_typing = True
    if "floating_point_range" in extra:
        lo, hi = extra["floating_point_range"]
        d.floating_point_range = [FloatingPointRange(from_value=lo, to_value=hi, step=0.0)]
    return d


def topic_token(name: str) -> str:
    """A joint name as one token of a topic name: characters other than letters, digits and ``_`` become ``_``
    (and a leading digit gets a ``_`` before it)."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + token if token[:1].isdigit() or not token else token


# ------------------------------------------------------------------------------------------- node


@dataclass(frozen=True)
class Command:
    """A wrench as applied: ``W`` after dropping, held in ``frame`` ("body" or "world")."""

    W: np.ndarray
    frame: str = "body"

    def is_zero(self) -> bool:
        return not np.any(self.W)

    def same(self, other: "Command") -> bool:
        return self.frame == other.frame and np.array_equal(self.W, other.W)


ZERO = Command(np.zeros(6))


class _Held:
    """A command held from the step it first applies to, for ``cmd_timeout`` (bookkeeping of one input)."""

    def __init__(self, zero):
        self.zero = zero
        self.applied = zero  # applied on the last step taken
        self.pending = None  # received, applied from the next step
        self.start_k = 0
        self.timed_out = False
        self.announced = None  # the last value announced as a change

    def clear(self):
        self.pending = None
        self.applied = self.zero


class DynamicsNode(Node):
    """See the module docstring. Construct, then call :meth:`configure` (raises ParameterError)."""

    def __init__(self, node_name: str = "dynamics_node", **kwargs):
        super().__init__(node_name, **kwargs)

    # ------------------------------------------------------------------------------ set-up

    def _declare(self, name, default):
        default = list(default) if isinstance(default, tuple) else default
        try:
            return self.declare_parameter(name, default, _descriptor(name, default)).value
        except Exception as e:  # rclpy's range/type exceptions differ between distros
            raise ParameterError(str(e) if name in str(e) else f"{name}: {e}") from None

    def configure(self) -> None:
        values = {}
        for name in ("robot_description", "model_file"):
            values[name] = self._declare(name, getattr(DEFAULTS, name))
        for name in values:
            if not isinstance(values[name], str):
                raise ParameterError(f"{name} must be a string, got {values[name]!r}")
        source = ms.load_source(values["robot_description"], values["model_file"])
        defaults = {}
        if source.multibody:
            defaults = dict(base_group=ms.default_base(source), gravity=ms.default_gravity(source),
                            base_frame=base_link_of(source))
        for name in _PARAMETERS:
            if name not in values:
                values[name] = self._declare(name, defaults.get(name, getattr(DEFAULTS, name)))
        s = settings_from_values(values, source)
        model = build_model(s, source)
        q0, v0 = initial_state(model, s)
        if TFMessage is None:
            raise ParameterError("tf2_msgs is not installed: cannot publish /tf")
        if s.lockstep and model.group is None and not model.joint_names:
            raise ParameterError("lockstep: this robot has a fixed base and no movable joint, so there is no "
                                 "command to wait for")
        self.source = source
        self.multibody = source.multibody
        if self.multibody:
            overridden = [n for n in _SINGLE_BODY_ONLY if n in self._overrides()]
            if overridden:
                self.get_logger().warning(
                    f"{', '.join(overridden)}: ignored, the model comes from {source.describe()}")
        else:
            self._warn_inertia(s)

        self.settings = s
        self.model = model
        self.nj = len(model.joint_names)
        self.nv_base = model.nv - self.nj
        prefix_ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(prefix_ns, s.base_frame)
        self._prefix = "" if s.base_frame.startswith("/") else cv.frame_prefix(prefix_ns)
        self._body_frames = {"", s.base_frame, s.base_frame.lstrip("/"), self.base_frame}
        self._world_frames = {self.world_frame, "/" + self.world_frame}
        self._setup_frames()

        # time: t_k = t0 + k * dt, all integer ns
        self.dt_ns = cv.period_ns(s.physics_rate)
        self.dt = self.dt_ns * 1e-9
        self.t0_ns = self.get_clock().now().nanoseconds  # 0 with use_sim_time and no /clock yet
        self.k = 0
        self._set_rates(s)
        self._last_clock_stamp = None
        self._last_clock_wall = 0.0
        # lockstep bookkeeping
        self.lockstep = s.lockstep
        self._lockstep_steps = lockstep_steps(s) if s.lockstep else 0
        self._expected = tuple(name for name, needed in (("cmd_wrench", model.group is not None),
                                                         ("joint_command", self.nj > 0)) if needed)
        self._period_cmds: Dict[str, object] = {}  # channel -> command stamped with the current state's stamp
        self._last_input_wall = time.monotonic()
        self._last_seen: Dict[str, int] = {}  # channel -> stamp of the last command seen on it
        self._last_state_wall = 0.0
        self._graph_counts = ()

        # state and bookkeeping
        self.q, self.v = q0, v0
        self._wrench = _Held(ZERO)
        self._effort = _Held(np.zeros(self.nj))
        self.paused = False
        self._k_reset = 0
        self._rebaseline()

        qos = QoSProfile(depth=100)
        self.pub_odom = self.create_publisher(Odometry, "odom", qos)
        self.pub_pose = self.create_publisher(PoseStamped, "pose", qos)
        self.pub_wrench = self.create_publisher(WrenchStamped, "wrench", qos)
        self.pub_tf = self.create_publisher(TFMessage, "/tf", QoSProfile(depth=100))
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))
        self.pub_clock = self.create_publisher(Clock, "/clock", QoSProfile(depth=10)) if s.publish_clock else None
        self.pub_markers = self.create_publisher(MarkerArray, "markers", QoSProfile(depth=10))
        self.sub_cmd = self.create_subscription(WrenchStamped, "cmd_wrench", self._on_cmd_wrench,
                                                QoSProfile(depth=10))
        self.sub_joint_command = None
        if self.nj:
            self.pub_joint_states = self.create_publisher(JointState, "joint_states", qos)
            self.pub_joint_effort = self.create_publisher(JointState, "joint_effort", qos)
            self.pub_joint_wrenches = [
                self.create_publisher(WrenchStamped, "joint_wrenches/" + topic_token(j), qos)
                for j in model.joint_names]
            self.sub_effort = self.create_subscription(Float64MultiArray, "cmd_joint_effort",
                                                       self._on_cmd_joint_effort, QoSProfile(depth=10))
            self.sub_joint_command = self.create_subscription(JointState, "joint_command",
                                                              self._on_joint_command, QoSProfile(depth=10))
            self._joint_index = {name: i for i, name in enumerate(model.joint_names)}
        if self.multibody:
            # The URDF with the link names this node publishes on TF: RViz's RobotModel works with an empty
            # TF prefix, robot_state_publisher with an empty frame_prefix.
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)
            self.pub_robot_description = self.create_publisher(String, "robot_description", latched)
            self.pub_robot_description.publish(String(data=mk.prefixed_urdf(source.urdf, self._frame)))
        self._setup_markers()
        if self._static_transforms:
            static_qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.pub_tf_static = self.create_publisher(TFMessage, "/tf_static", static_qos)
            self.pub_tf_static.publish(TFMessage(transforms=[
                cv.transform_stamped_msg(self.t0_ns, parent, child, p, quat)
                for parent, child, p, quat in self._static_transforms]))
        self.srv_reset = self.create_service(Trigger, "~/reset", self._on_reset)
        self.srv_pause = self.create_service(SetBool, "~/pause", self._on_pause)
        self.add_on_set_parameters_callback(self._on_set_parameters)

        # wall-clock pacing
        self._anchor()
        self._max_batch_steps = max(1, int(round(MAX_BATCH_S / self.dt)))
        self.timer = None
        self._steady_clock = RclpyClock(clock_type=ClockType.STEADY_TIME)
        self._make_timer()

        self._publish_state()
        self._publish_diagnostics()
        self._warn_unknown_overrides()
        effective = 1e9 / self.dt_ns
        if self.multibody:
            what = (f"{s.base_group} base robot {source.describe()}, {self.nj} joints "
                    f"({', '.join(model.joint_names)}), total mass {self._total_mass():g} kg")
        else:
            what = f"{s.base_group} body, mass {s.mass:g} kg"
        if s.lockstep:
            timing = (f"lockstep: {self._lockstep_steps} steps per control period, waiting for "
                      f"{' and '.join(self._expected)} stamped with each state, "
                      + (f"at most {s.real_time_factor:g}x real time" if s.real_time_factor > 0
                         else "as fast as the controller answers"))
        else:
            timing = (f"publishing {self.world_frame} -> {self.base_frame} every {self._publish_every} steps, "
                      + (f"real_time_factor {s.real_time_factor:g}" if s.real_time_factor > 0
                         else "as fast as possible") + f", cmd_timeout {s.cmd_timeout:g} s")
        self.get_logger().info(
            f"{what}, {s.integrator} at {effective:g} Hz (dt = {self.dt_ns} ns), {timing}"
            + (", publishing /clock" if s.publish_clock else ""))

    def _total_mass(self) -> float:
        return float(np.sum(self.model._tree.body_mass))

    def _overrides(self):
        return getattr(self, "_parameter_overrides", {}) or {}  # rclpy keeps them there (Humble..Kilted)

    def _warn_unknown_overrides(self) -> None:
        unknown = sorted(n for n in self._overrides() if n not in _PARAMETERS and n != "use_sim_time"
                         and not n.startswith("qos_overrides."))
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))

    def _warn_inertia(self, s: Settings) -> None:
        msg = check_inertia(s.inertia_matrix)
        if msg:
            self.get_logger().warning(msg)

    def _frame(self, link: str) -> str:
        if link == "world" and self.source.root_link == "world":
            return self.world_frame
        return self._prefix + link

    def _setup_frames(self) -> None:
        """TF layout: link indices of the base and of each joint's parent and child, static transforms."""
        model = self.model
        self._static_transforms = []
        self._tf_joints = []  # (parent link index, child link index, parent frame, child frame)
        self._joint_child_frames = []
        self._base_link_index = None
        self._world_to_base = True
        if not self.multibody:
            return
        index = {name: i for i, name in enumerate(model.link_names)}
        base_link = base_link_of(self.source)
        self._base_link_index = index[base_link]
        self._base_is_root = base_link == self.source.root_link
        poses = model.link_poses(model.neutral())
        child_of = {}
        for name, jtype, parent, child in self.source.joints:
            child_of[name] = child
            pi, ci = index[parent], index[child]
            if jtype == "fixed":
                T = np.linalg.inv(poses[pi]) @ poses[ci]
                self._static_transforms.append((self._frame(parent), self._frame(child), T[:3, 3].copy(),
                                                cv.quaternion_from_matrix(T[:3, :3])))
                if parent == "world" and child == base_link:
                    self._world_to_base = False
            else:
                self._tf_joints.append((pi, ci, self._frame(parent), self._frame(child)))
        self._joint_child_frames = [self._frame(child_of[j]) for j in model.joint_names]
        self._tf_parent = np.array([j[0] for j in self._tf_joints], dtype=int)
        self._tf_child = np.array([j[1] for j in self._tf_joints], dtype=int)

    def _set_rates(self, s: Settings) -> None:
        self._publish_every = max(1, int(round(s.physics_rate / s.publish_rate)))
        self._diag_every = (max(1, int(round(s.physics_rate / s.diagnostics_rate)))
                            if s.diagnostics_rate > 0 else 0)
        self._timeout_steps = (int(math.ceil(s.cmd_timeout * 1e9 / self.dt_ns))
                               if s.cmd_timeout > 0 and not s.lockstep else 0)
        rtf = s.real_time_factor
        self._max_lag_steps = max(1, int(MAX_LAG_S * rtf / self.dt)) if rtf > 0 else 0

    def _rebaseline(self) -> None:
        """Reference energy and momentum for the bookkeeping; work counted from here."""
        self.work = 0.0
        self.kinetic_energy_ref = self.model.kinetic_energy(self.q, self.v)
        self.energy_ref = self._energy()
        self.momentum_ref = self.model.spatial_momentum(self.q, self.v)

    def _anchor(self) -> None:
        self._anchor_wall_ns = time.monotonic_ns()
        self._anchor_k = self.k
        self._not_before_ns = self._anchor_wall_ns  # lockstep: the next period may start from then

    def _make_timer(self) -> None:
        """(Re)create the stepping timer for the current real_time_factor."""
        if self.timer is not None:
            self.destroy_timer(self.timer)
        rtf = self.settings.real_time_factor
        if self.lockstep:  # periods start from the command callbacks; the timer paces and watches
            period = 1.0 / MAX_TICK_RATE_HZ if rtf > 0 else LOCKSTEP_WATCH_S
        else:  # rtf 0: a callback as often as the executor can, one batch each
            period = max(self.dt / rtf, 1.0 / MAX_TICK_RATE_HZ) if rtf > 0 else 0.0
        # On the steady clock: this node makes the simulation time, even when it runs with use_sim_time.
        self.timer = self.create_timer(period, self._on_timer, clock=self._steady_clock)

    def _setup_markers(self) -> None:
        s = self.settings
        if self.multibody:
            from mbs_ros.dynamics.urdf import parse_urdf

            spec = parse_urdf(self.source.urdf)
            inertials = {name: (l.mass, l.com, l.inertia) for name, l in spec.links.items()}
            shapes = mk.shapes_from_urdf(self.source.urdf, self.model.link_names, self._frame, inertials)
        else:
            shapes = mk.rigid_body_shapes(s.mass, s.inertia_matrix, s.com, self.base_frame)
        self._marker_maker = mk.MarkerMaker(shapes, self.world_frame, self.base_frame,
                                            wrench_arrows=self.model.group is not None)
        self._markers_delete_all = True  # the first array clears what an earlier run left in RViz

    def stamp(self, k: Optional[int] = None) -> int:
        return self.t0_ns + (self.k if k is None else k) * self.dt_ns

    @property
    def command(self) -> Command:
        """The wrench of the last step taken."""
        return self._wrench.applied

    # ---------------------------------------------------------------------------- stepping

    def _on_timer(self) -> None:
        if self.paused:  # time stands still; keep the bookkeeping and the clock visible
            if (self._diag_every
                    and time.monotonic() - self._last_diag_wall >= 1.0 / self.settings.diagnostics_rate):
                self._publish_diagnostics()
            self._repeat_clock()
            return
        if self.lockstep:
            self._lockstep_watch()
            return
        rtf = self.settings.real_time_factor
        if rtf == 0.0:  # as fast as possible: one batch per callback, subscriptions served in between
            self.advance(self._max_batch_steps)
            self._publish_clock()
            return
        now = time.monotonic_ns()
        due = self._anchor_k + int((now - self._anchor_wall_ns) * rtf) // self.dt_ns
        # A small batch per callback: when behind, the timer is ready again at once, and the commands that
        # arrived meanwhile are taken between batches instead of after one long open-loop burst.
        n = min(due - self.k, self._max_batch_steps)
        if n > 0:
            self.advance(n)
            self._publish_clock()
        behind = due - self.k
        if behind > self._max_lag_steps:
            self.get_logger().warning(
                f"falling behind the wall clock by {behind * self.dt / rtf:.3f} s: skipping ahead (the simulation "
                f"runs slower than real_time_factor {rtf:g})", throttle_duration_sec=WARN_THROTTLE_S)
            self._anchor()

    def advance(self, steps: int) -> None:
        """Take ``steps`` physics steps. The one place the simulation advances (timer and lockstep)."""
        for _ in range(steps):
            self._step_once()

    # ---------------------------------------------------------------------------- lockstep

    def _lockstep_take(self, channel: str, value) -> None:
        """A valid command stamped for the current period."""
        self._period_cmds[channel] = value
        self._try_period()

    def _lockstep_stamp_ok(self, channel: str, stamp_ns: int) -> bool:
        """Lockstep: is a command stamped ``stamp_ns`` for the current period? Logs why not (throttled)."""
        self._last_input_wall = time.monotonic()
        self._last_seen[channel] = stamp_ns
        current = self.stamp()
        if stamp_ns == current:
            return True
        if stamp_ns < current:  # an answer to a state sent again, or to the state before a reset
            self.get_logger().debug(
                f"lockstep: {channel} stamped {stamp_ns * 1e-9:.9f} s ignored, waiting for {current * 1e-9:.9f} s",
                throttle_duration_sec=WARN_THROTTLE_S)
        else:
            self.get_logger().warning(
                f"lockstep: {channel} stamped {stamp_ns * 1e-9:.9f} s ignored: it is later than the current state "
                f"({current * 1e-9:.9f} s); commands must carry the stamp of the state they answer",
                throttle_duration_sec=WARN_THROTTLE_S)
        return False

    def _period_complete(self) -> bool:
        return all(ch in self._period_cmds for ch in self._expected)

    def _try_period(self) -> None:
        """Lockstep: advance one control period if its commands are all here (and the speed limit allows)."""
        if self.paused or not self._period_complete():
            return
        rtf = self.settings.real_time_factor
        now = time.monotonic_ns()
        if rtf > 0.0 and now < self._not_before_ns:
            return  # the timer tries again
        n = self._lockstep_steps
        if "cmd_wrench" in self._period_cmds:
            self._wrench.pending = self._period_cmds["cmd_wrench"]
        if "joint_command" in self._period_cmds:
            self._effort.pending = self._period_cmds["joint_command"]
        self._period_cmds = {}
        self.advance(n)
        if rtf > 0.0:
            self._not_before_ns = max(self._not_before_ns + int(n * self.dt_ns / rtf), now)
        self._publish_state()
        self._publish_wrench(self.k - 1, self.command)
        if self.nj:
            self._publish_effort(self.k - 1, self._effort.applied)

    def _lockstep_watch(self) -> None:
        """Lockstep timer: pace, send the state again if the commands are late, warn if nothing comes."""
        if self._period_complete():
            self._try_period()
            return
        self._repeat_clock()
        now = time.monotonic()
        counts = self._graph_counts_now()
        grew = any(c > old for c, old in zip(counts, self._graph_counts))
        self._graph_counts = counts
        if grew or now - self._last_state_wall > LOCKSTEP_RESEND_S:
            self._publish_state(controller_inputs_only=True)  # the same stamp and values again
        quiet = now - self._last_input_wall
        if quiet > LOCKSTEP_WARN_S:
            missing = [ch for ch in self._expected if ch not in self._period_cmds]
            seen = ", ".join(f"{ch} {t * 1e-9:.9f} s" for ch, t in sorted(self._last_seen.items())) or "none"
            self.get_logger().warning(
                f"lockstep: waiting at t = {self.stamp() * 1e-9:.9f} s for {' and '.join(missing)} stamped with it; "
                f"no command for {quiet:.1f} s (last stamps seen: {seen}). Is a lockstep controller running?",
                throttle_duration_sec=max(WARN_THROTTLE_S, LOCKSTEP_WARN_S))

    def _graph_counts_now(self) -> tuple:
        """Matched endpoints of the lockstep loop: state subscribers, command publishers."""
        counts = [self.pub_odom.get_subscription_count()]
        if self.nj:
            counts.append(self.pub_joint_states.get_subscription_count())
        for sub in (self.sub_cmd, self.sub_joint_command):
            if sub is None:
                continue
            count = getattr(sub, "get_publisher_count", None)  # rclpy >= Iron; graph count before
            counts.append(count() if count is not None else self.count_publishers(sub.topic_name))
        return tuple(counts)

    # ------------------------------------------------------------------------------- clock

    def _publish_clock(self, again: bool = False) -> None:
        if self.pub_clock is None:
            return
        stamp = self.stamp()
        if stamp == self._last_clock_stamp and not again:
            return
        self.pub_clock.publish(Clock(clock=cv.time_from_ns(stamp)))
        self._last_clock_stamp = stamp
        self._last_clock_wall = time.monotonic()

    def _repeat_clock(self) -> None:
        if self.pub_clock is not None and time.monotonic() - self._last_clock_wall > CLOCK_REPEAT_S:
            self._publish_clock(again=True)

    def _step_once(self) -> None:
        k = self.k
        cmd = self._for_step(self._wrench, k, "cmd_wrench", Command.is_zero)
        effort = self._for_step(self._effort, k, "cmd_joint_effort", lambda e: not np.any(e))
        tau = self._generalized_force(cmd, effort)
        q0, v0 = self.q, self.v
        q1, v1 = step(self.model, q0, v0, tau, self.dt, method=self.settings.integrator, t=k * self.dt)
        if not (np.all(np.isfinite(q1)) and np.all(np.isfinite(v1))):
            self.get_logger().error(
                f"the step at t = {self.stamp(k) * 1e-9:.6f} s with wrench {cmd.W.tolist()} ({cmd.frame}) "
                f"and joint efforts {effort.tolist()} gave a non-finite state: commands dropped, step taken "
                "with zero wrench and efforts", throttle_duration_sec=WARN_THROTTLE_S)
            cmd, effort = ZERO, self._effort.zero
            tau = self._generalized_force(cmd, effort)
            q1, v1 = step(self.model, q0, v0, tau, self.dt, method=self.settings.integrator, t=k * self.dt)
            if not (np.all(np.isfinite(q1)) and np.all(np.isfinite(v1))):  # pragma: no cover
                q1, v1 = q0, v0
        self._wrench.applied = cmd
        self._effort.applied = effort
        if self._wrench.announced is None or not cmd.same(self._wrench.announced):
            self._publish_wrench(k, cmd)  # stamped with the start of the first step it applies to
            self._wrench.announced = cmd
        if self.nj and (self._effort.announced is None or not np.array_equal(effort, self._effort.announced)):
            self._publish_effort(k, effort)
            self._effort.announced = effort
        # work of the applied wrench and efforts over the step (trapezoidal rule on the power tau . v)
        self.work += 0.5 * self.dt * (self._power(tau, q0, v0) + self._power(tau, q1, v1))
        self.q, self.v = q1, v1
        self.k = k + 1
        if not self.lockstep and self.k % self._publish_every == 0:  # lockstep: once per control period
            self._publish_state()
            self._publish_wrench(k, self.command)
            if self.nj:
                self._publish_effort(k, self._effort.applied)
        if self._diag_every and self.k % self._diag_every == 0:
            self._publish_diagnostics()

    def _for_step(self, held: _Held, k: int, what: str, is_zero):
        """The value of one input for step k: a pending command starts now; a held one may time out."""
        if held.pending is not None:
            value, held.pending = held.pending, None
            held.start_k = k
            held.timed_out = False
            return value
        value = held.applied
        if self._timeout_steps and not is_zero(value) and k - held.start_k >= self._timeout_steps:
            if not held.timed_out:
                self.get_logger().info(
                    f"no {what} for {self.settings.cmd_timeout:g} s: applying zero",
                    throttle_duration_sec=WARN_THROTTLE_S)
            held.timed_out = True
            return held.zero
        return value

    def _generalized_force(self, cmd: Command, effort: Optional[np.ndarray] = None):
        """Generalized force for ``step``: a constant vector, or a function of the stage's q."""
        model = self.model
        tau_joints = np.zeros(model.nv)
        if effort is not None and effort.size:
            tau_joints[model.nv - effort.size:] = effort
        if cmd.is_zero():
            return tau_joints
        W = cmd.W.copy()
        if cmd.frame == "body":
            return lambda t, q, v: model.wrench_to_generalized(q, W)[0] + tau_joints

        def tau_world(t, q, v):
            R_world_base = cv.rotation_matrix(model.pose(q)[1])
            return model.wrench_to_generalized(q, cv.rotate_wrench(R_world_base.T, W))[0] + tau_joints

        return tau_world

    @staticmethod
    def _power(tau, q, v) -> float:
        t = tau(0.0, q, v) if callable(tau) else tau
        return float(np.dot(t, v))

    def _energy(self) -> float:
        return self.model.kinetic_energy(self.q, self.v) + self.model.potential_energy(self.q)

    # -------------------------------------------------------------------------- publishing

    def _publish_state(self, controller_inputs_only: bool = False) -> None:
        """The state at the current stamp: /clock first, then odom, pose, /tf, joint_states, joint_wrenches and
        markers. ``controller_inputs_only``: /clock, odom and joint_states only (lockstep sending it again)."""
        stamp = self.stamp()
        self._publish_clock(again=controller_inputs_only)
        self._last_state_wall = time.monotonic()
        model, q, v = self.model, self.q, self.v
        V = model.twist(q, v)
        poses = None
        if self.multibody:
            poses = model.link_poses(q)
        if self.multibody and not self._base_is_root:  # a URDF rooted at "world": the base link's fixed pose
            T = poses[self._base_link_index]
            p, quat = T[:3, 3].copy(), cv.quaternion_from_matrix(T[:3, :3])
        else:
            p, quat = model.pose(q)
        self.pub_odom.publish(cv.odometry_msg(stamp, self.world_frame, self.base_frame, p, quat, V))
        if controller_inputs_only:
            if self.nj:
                self._publish_joints(stamp, wrenches=False)
            return
        self.pub_pose.publish(cv.pose_stamped_msg(stamp, self.world_frame, p, quat))
        transforms = []
        if self._world_to_base:
            transforms.append(cv.transform_stamped_msg(stamp, self.world_frame, self.base_frame, p, quat))
        if self.multibody:
            if self._tf_joints:
                T = cv.inverse_transforms(poses[self._tf_parent]) @ poses[self._tf_child]  # T_parent_child
                quats = cv.quaternion_from_matrix(T[:, :3, :3])
                for (_pi, _ci, parent, child), Tj, quat_j in zip(self._tf_joints, T, quats):
                    transforms.append(cv.transform_stamped_msg(stamp, parent, child, Tj[:3, 3], quat_j))
        self.pub_tf.publish(TFMessage(transforms=transforms))
        if self.nj:
            self._publish_joints(stamp)
        if self.settings.publish_markers:
            self._publish_markers(stamp, poses, p, quat)
        self._last_published_k = self.k

    def _publish_markers(self, stamp: int, poses: Optional[np.ndarray], p, quat) -> None:
        R = cv.rotation_matrix(quat)
        if poses is None:  # a single body: its one "link" is the body frame
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = R, p
            poses = T[None]
        markers = []
        if self._markers_delete_all:
            markers.append(mk.delete_all_marker(self.world_frame, stamp))
            self._markers_delete_all = False
        markers += self._marker_maker.link_markers(stamp, poses)
        cmd = self.command
        F, tau = (R @ cmd.W[:3], R @ cmd.W[3:]) if cmd.frame == "body" else (cmd.W[:3], cmd.W[3:])
        markers += self._marker_maker.wrench_markers(stamp, p, F, tau, self.settings.marker_wrench_scale)
        self.pub_markers.publish(MarkerArray(markers=markers))

    def _publish_joints(self, stamp: int, wrenches: bool = True) -> None:
        model, q, v = self.model, self.q, self.v
        effort = self._effort.applied
        names = list(model.joint_names)
        positions = ms.joint_positions_from_q(model, q[model.nq - self._nq_joints():])
        self.pub_joint_states.publish(cv.joint_state_msg(stamp, names, positions, v[self.nv_base:], effort))
        if not wrenches:
            return
        tau = self._generalized_force(self.command, effort)
        tau = tau(0.0, q, v) if callable(tau) else tau
        a = model.forward_dynamics(q, v, tau)
        W = model.joint_wrenches(q, v, a)
        for pub, frame, Wj in zip(self.pub_joint_wrenches, self._joint_child_frames, W):
            pub.publish(cv.wrench_stamped_msg(stamp, frame, Wj))

    def _nq_joints(self) -> int:
        return sum(2 if t == "continuous" else 1 for t in self.model.joint_types)

    def _publish_wrench(self, k: int, cmd: Command) -> None:
        frame = self.base_frame if cmd.frame == "body" else self.world_frame
        self.pub_wrench.publish(cv.wrench_stamped_msg(self.stamp(k), frame, cmd.W))

    def _publish_effort(self, k: int, effort: np.ndarray) -> None:
        self.pub_joint_effort.publish(cv.joint_state_msg(self.stamp(k), list(self.model.joint_names),
                                                         effort=effort))

    def _publish_diagnostics(self) -> None:
        self._last_diag_wall = time.monotonic()
        model, q, v = self.model, self.q, self.v
        ke = model.kinetic_energy(q, v)
        pe = model.potential_energy(q)
        h = model.spatial_momentum(q, v)
        values = {
            "sim_time": self.stamp() * 1e-9,
            "steps": self.k,
            "steps_since_reset": self.k - self._k_reset,
            "paused": self.paused,
            "base_group": self.settings.base_group,
            "integrator": self.settings.integrator,
            "kinetic_energy": ke,
            "potential_energy": pe,
            "total_energy": ke + pe,
            "kinetic_energy_ref": self.kinetic_energy_ref,
            "total_energy_ref": self.energy_ref,
            "work_applied": self.work,
            "energy_balance_residual": ke + pe - self.energy_ref - self.work,
        }
        for i, axis in enumerate(("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")):
            values["momentum_" + axis] = float(h[i])
        for i, axis in enumerate(("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")):
            values["momentum_ref_" + axis] = float(self.momentum_ref[i])
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK,
            name=f"{self.get_fully_qualified_name()}: " + ("multibody" if self.multibody else "rigid body"),
            message="paused" if self.paused else "running",
            hardware_id=self.base_frame,
            values=cv.key_values(values),
        )
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = cv.time_from_ns(self.stamp())
        self.pub_diag.publish(msg)

    # ------------------------------------------------------------------------------- input

    def _on_cmd_wrench(self, msg: WrenchStamped) -> None:
        W = cv.wrench_from_msg(msg.wrench)
        frame_id = msg.header.frame_id
        if self.model.group is None:
            self.get_logger().warning(
                "cmd_wrench rejected: the base is fixed (base_group fixed) and takes no wrench; drive the joints "
                "with cmd_joint_effort or joint_command", throttle_duration_sec=WARN_THROTTLE_S)
            return
        if self.lockstep and not self._lockstep_stamp_ok("cmd_wrench", cv.ns_from_time(msg.header.stamp)):
            return
        if not np.all(np.isfinite(W)):
            self.get_logger().warning(
                f"cmd_wrench rejected: non-finite (NaN/inf) components {W.tolist()}",
                throttle_duration_sec=WARN_THROTTLE_S)
            return
        if frame_id in self._body_frames:
            frame, W_body = "body", W
        elif frame_id in self._world_frames:
            frame = "world"
            R_world_base = cv.rotation_matrix(self.model.pose(self.q)[1])
            W_body = cv.rotate_wrench(R_world_base.T, W)
        else:
            self.get_logger().warning(
                f"cmd_wrench rejected: unknown frame_id {frame_id!r} (use '', {self.base_frame!r} or "
                f"{self.world_frame!r})", throttle_duration_sec=WARN_THROTTLE_S)
            return
        _tau, _W_applied, W_dropped = self.model.wrench_to_generalized(self.q, W_body)
        if np.max(np.abs(W_dropped)) > 1e-12 * max(1.0, float(np.max(np.abs(W_body)))):
            self.get_logger().warning(
                f"cmd_wrench: a {self.settings.base_group} {'base' if self.multibody else 'body'} cannot take the "
                f"components {np.round(W_dropped, 12).tolist()} (body frame [F; tau]); dropped them, applying the "
                "rest", throttle_duration_sec=WARN_THROTTLE_S)
            W_body = W_body - W_dropped
            if frame == "world":
                W = cv.rotate_wrench(R_world_base, W_body)
            else:
                W = W_body
        cmd = Command(np.array(W, dtype=float), frame)
        if self.lockstep:
            self._lockstep_take("cmd_wrench", cmd)
        else:
            self._wrench.pending = cmd

    def _on_cmd_joint_effort(self, msg: Float64MultiArray) -> None:
        if self.lockstep:
            self.get_logger().info(
                "lockstep: cmd_joint_effort is ignored (it carries no stamp); joint efforts come from joint_command "
                "(sensor_msgs/JointState, efforts by name, stamped with the state they answer)", once=True)
            return
        data = np.asarray(msg.data, dtype=float)
        if data.shape != (self.nj,):
            self.get_logger().warning(
                f"cmd_joint_effort rejected: {data.size} values, expected {self.nj} (one per joint, in the order "
                f"{', '.join(self.model.joint_names)})", throttle_duration_sec=WARN_THROTTLE_S)
            return
        if not np.all(np.isfinite(data)):
            self.get_logger().warning(
                f"cmd_joint_effort rejected: non-finite (NaN/inf) entries {data.tolist()}",
                throttle_duration_sec=WARN_THROTTLE_S)
            return
        self._effort.pending = data.copy()

    def _on_joint_command(self, msg: JointState) -> None:
        if self.lockstep and not self._lockstep_stamp_ok("joint_command", cv.ns_from_time(msg.header.stamp)):
            return
        names = list(msg.name)
        unknown = [n for n in names if n not in self._joint_index]
        if not names or len(msg.effort) != len(names) or unknown or len(set(names)) != len(names):
            self.get_logger().warning(
                f"joint_command rejected: needs one effort per name, names distinct and among "
                f"{', '.join(self.model.joint_names)} (got {len(names)} names, {len(msg.effort)} efforts"
                + (f", unknown {unknown}" if unknown else "") + ")", throttle_duration_sec=WARN_THROTTLE_S)
            return
        effort = np.asarray(msg.effort, dtype=float)
        if not np.all(np.isfinite(effort)):
            self.get_logger().warning(
                f"joint_command rejected: non-finite (NaN/inf) efforts {effort.tolist()}",
                throttle_duration_sec=WARN_THROTTLE_S)
            return
        data = np.zeros(self.nj)
        data[[self._joint_index[n] for n in names]] = effort  # joints not named: zero
        if self.lockstep:
            self._lockstep_take("joint_command", data)
        else:
            self._effort.pending = data

    # ---------------------------------------------------------------------------- services

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            q0, v0 = initial_state(self.model, self.settings)
        except ParameterError as e:  # pragma: no cover - validated when set
            response.success, response.message = False, str(e)
            return response
        # The initial state becomes the state of the next step: stamps never repeat or go back.
        self.k += 1
        self.q, self.v = q0, v0
        self._wrench.clear()  # announced on `wrench` by the next step if it differs
        self._effort.clear()
        self._period_cmds = {}  # lockstep: commands for the state before the reset no longer count
        self._k_reset = self.k
        self._rebaseline()
        self._anchor()
        self._markers_delete_all = True
        self._publish_state()
        self._publish_diagnostics()
        response.success = True
        response.message = f"reset to the initial state at t = {self.stamp() * 1e-9:.9f} s"
        self.get_logger().info(response.message)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        if request.data and not self.paused:
            self.paused = True
            if self._last_published_k != self.k:
                self._publish_state()
                if self.k > 0:
                    self._publish_wrench(self.k - 1, self.command)
                    if self.nj:
                        self._publish_effort(self.k - 1, self._effort.applied)
            self._publish_diagnostics()
            response.message = f"paused at t = {self.stamp() * 1e-9:.9f} s"
        elif not request.data and self.paused:
            self.paused = False
            self._anchor()
            response.message = f"resumed at t = {self.stamp() * 1e-9:.9f} s"
            if self.lockstep:
                self._try_period()  # the commands may all be here already
        else:
            response.message = "already " + ("paused" if self.paused else "running")
        response.success = True
        self.get_logger().info(response.message)
        return response

    # -------------------------------------------------------------------------- parameters

    def _on_set_parameters(self, params) -> SetParametersResult:
        values = {f: getattr(self.settings, f) for f in _PARAMETERS}
        changed = set()
        for p in params:
            if p.name in _PARAMETERS:
                values[p.name] = p.value
                changed.add(p.name)
        if not changed:
            return SetParametersResult(successful=True)
        try:
            if self.multibody and changed & set(_SINGLE_BODY_ONLY):
                raise ParameterError(
                    f"{', '.join(sorted(changed & set(_SINGLE_BODY_ONLY)))}: single-body parameters; this node's "
                    f"model comes from {self.source.describe()}")
            s = settings_from_values(values, self.source)
            model = build_model(s, self.source) if changed & set(_INERTIAL) else self.model
            initial_state(model, s)  # the initial pose/twist/joints must stay valid
        except ParameterError as e:
            self.get_logger().warning(f"parameter change refused: {e}")
            return SetParametersResult(successful=False, reason=str(e))
        old = self.settings
        self.settings = s
        self._set_rates(s)
        if s.real_time_factor != old.real_time_factor:
            self._anchor()
            self._make_timer()
        if model is not self.model:
            if not self.multibody:
                self._warn_inertia(s)
            self.model = model
            self._rebaseline()  # same state, new inertia: new energy/momentum reference
            if not self.multibody:
                self._setup_markers()  # the equivalent-inertia box changes with the inertia
        self.get_logger().info("parameters changed: " + ", ".join(sorted(changed)))
        return SetParametersResult(successful=True)


# ------------------------------------------------------------------------------------------- main


def _make_executor(node: DynamicsNode):
    if node.settings.use_events_executor:
        try:
            from rclpy.experimental import EventsExecutor
            return EventsExecutor()
        except ImportError:
            node.get_logger().warning("EventsExecutor not available here: using SingleThreadedExecutor")
    return SingleThreadedExecutor()


def main(args=None) -> int:
    return run_node(DynamicsNode, args, make_executor=_make_executor)


if __name__ == "__main__":
    sys.exit(main())
