"""Dynamics node: one rigid body, or a multibody robot (a floating or fixed base carrying a joint tree).

Run it with ``ros2 run mbs_ros dynamics_node`` or, without a ROS install, ``python -m
mbs_ros.nodes.dynamics_node --ros-args -r __ns:=/robot1 --params-file config/rigid_body.yaml``
(``config/uvms_6dof.yaml``, ``config/arm_6dof_fixed.yaml``, ... for robots).
The simulation is :class:`mbs_ros.dynamics.simulator.Simulator` (state, held commands and their timeouts,
lockstep periods, energy and work bookkeeping; ROS-free, shared with the tests and the benchmark); this node
declares and checks the parameters, turns messages into its commands, advances it from a timer and publishes its
state.

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
  step, held like ``cmd_wrench`` (its own ``cmd_timeout``), clipped to ``max_effort`` (Robustness below).
  Ignored in lockstep (it carries no stamp; one info message says so).
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
  applied on the step that ended at the stamp; then the mimic joints (``Model.mimic_joints``) with their derived
  position and velocity and the effort each carries under the applied commands; then the ``locked_joints``, at
  their lock with zero velocity and effort.
- pub ``joint_wrenches/<joint>`` (``geometry_msgs/WrenchStamped``, one per movable joint; characters not
  allowed in topic names become ``_``; at ``wrench_rate``, computed only while one of them has a subscriber):
  ``Model.joint_wrenches(q, v, a)`` with ``a`` the forward dynamics under
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
- pub ``markers`` (``visualization_msgs/MarkerArray``, at ``markers_rate`` while ``publish_markers``): one
  marker per URDF ``<visual>`` (box, cylinder, sphere; a mesh as MESH_RESOURCE with its URI and scale; the
  robot YAML's visuals are URDF visuals), at its visual origin; a link with mass but no visual shows its
  equivalent-inertia box, and so does a single body. ``frame_id`` is ``world_frame`` and each pose is the
  world pose (link pose x visual origin), stamped like ``odom``; ``ns`` is the link's TF frame, ``id`` the
  visual's index in the link (stable). Floating bases add two ARROW markers (``ns`` ``<base>/wrench``, ``id``
  0 force, 1 torque) from the base origin along the applied wrench in world axes, ``marker_wrench_scale``
  metres per N and per N m (DELETE while zero). The first array published after start-up and after a reset
  (arrays are built only while someone subscribes, so: the first one a subscriber gets) begins with a DELETEALL.
- pub ``/clock`` (``rosgraph_msgs/Clock``, with ``publish_clock``): the simulation time (below).
- pub ``energy`` (``mbs_ros_msgs/EnergyPorts``, at ``energy_rate``, built only while subscribed): the port-level
  bookkeeping after EPHS (seed 000; :func:`mbs_ros.dynamics.passive.energy_ports`) of the state at the stamp:
  each storage's energy (``kinetic`` — bodies and entrained water —, ``gravity``, ``buoyancy``,
  ``spring/<joint>``), the power into the system through each port (``effort/<joint>``, ``wrench``,
  ``thruster/<name>``, ``current``), each dissipator's power (``damper/<joint>``, ``friction/<joint>``,
  ``hydrodynamic_damping/<link>``), the entropy production at ``environment_temperature``, and the integrals since
  the reference state with the balance residual ``E − E_ref − supplied + dissipated``.

Bodies in water, joint springs and friction, thrusters (:mod:`mbs_ros.dynamics.passive`): a model whose URDF or
robot YAML has them is simulated with them (``M v̇ + C v + g = τ + τ_p``). ``current`` and ``current_rate``
(settable at run time) set the water's uniform current. A vehicle with thrusters also takes:

- sub ``cmd_thrust`` (``std_msgs/Float64MultiArray``): one thrust per thruster [N] in ``Model.thruster_names``
  order (the URDF's), clipped to each ``<limit>``; held like ``cmd_wrench`` (``cmd_timeout``); each thruster
  follows its command with its first-order lag. Ignored in lockstep (no stamp).
- sub ``thruster_command`` (``sensor_msgs/JointState``): thrust by ``name`` in ``effort`` [N]; thrusters not named
  get 0. In lockstep the thrusters' channel (then a thruster vehicle's base is driven by its thrusters: the
  period waits for ``thruster_command`` instead of ``cmd_wrench``).
- pub ``thrust`` (``sensor_msgs/JointState``, name and effort): each thruster's thrust at the stamp, with the state.

Rates (outside lockstep; each a whole number of physics steps, ``round(physics_rate / rate)``, on the grid of
step indices, so that rates that divide each other publish at common stamps): the state -- odom, pose, /tf,
joint_states, and wrench and joint_effort again -- at ``publish_rate`` (100 Hz); ``joint_wrenches`` at
``wrench_rate`` (100 Hz), ``markers`` at ``markers_rate`` (20 Hz), /diagnostics at ``diagnostics_rate`` (1 Hz);
0 turns the last three off. Every topic is built and published only while it has a subscriber
(``get_subscription_count``), so joint wrenches, markers and diagnostics cost nothing when nobody listens; the
state messages are kept and refilled rather than built anew. In lockstep the state is published once per control
period, with joint_wrenches and markers when their step grid was crossed during the period (every period at
rates >= control_rate). Start-up, reset and pause publish everything at once.

Execution: ``use_events_executor`` (true) spins with ``rclpy.experimental.EventsExecutor`` where this rclpy has it
(else the single-threaded executor, with a warning). numpy's BLAS and OpenMP pools get one thread (set before
numpy loads when this module is the program, and by :func:`mbs_ros.nodes.runtime.limit_threads`;
``OPENBLAS_NUM_THREADS`` etc. in the environment win).

Services: ``~/reset`` (``std_srvs/Trigger``): back to the initial state (time keeps running: the reset
state gets the next step's stamp), commands cleared, a fault (below) cleared: the simulation runs again
(unless it was also paused through ``~/pause``). ``~/pause`` (``std_srvs/SetBool``): stop/resume
stepping; simulation time stops while paused, and state topics are not published (the state at
which it stops is published once, and again, same stamp, whenever a subscriber of odom or joint_states or a command
publisher matches, so that a node started meanwhile gets it). Resuming a simulation halted by a fault is refused
(success false, the reason): call ``~/reset``. ``start_paused`` (false) starts the node paused at ``t0``.
``~/step`` (``mbs_ros_msgs/Step``, as Gazebo's ``multi_step``): ``steps`` physics steps of a paused simulation,
with the commands held as when running (taken in while paused, ``cmd_timeout`` counted in simulation time),
publishing on the way what falls due on the rate grids (diagnostics on the way say ``paused``: a step does not
resume the simulation) and the state it stops at (as a pause does); the reply has
``sim_time`` (the stamp of that state) and ``step_index`` (``k``, with ``t = t0 + k dt``); ``steps`` 0 steps
nothing and tells the time. Refused (success false, nothing stepped, the reason in ``message``) while running,
after a fault, or beyond 10⁶ steps per request (they run inside the service call). In lockstep it takes one
control period at a time (``steps`` = ``physics_rate / control_rate``), and only once the commands stamped with
the current state have arrived (refused otherwise: call again when the controller has answered the state the
last step published). The same parameters, the same commands and the same steps give bit-identical states
(nothing depends on the wall clock but when commands arrive, and ``~/step`` fixes that).

Robustness (issue 9): no input stops the node, and it never publishes a non-finite value.

- Every callback (subscriptions, services, timer) catches its exceptions: logged (throttled), counted
  (``callback_errors`` on /diagnostics).
- Inputs: a ``cmd_wrench``, ``cmd_joint_effort`` or ``joint_command`` with NaN/Inf, a wrong length, unknown or
  repeated joint names, a wrong ``frame_id``, or an invalid ``header.stamp`` (``sec`` < 0, ``nanosec`` >= 10⁹)
  is rejected with a warning throttled per topic and reason (one per 2 s, with how many were held back) and
  counted (``received_<topic>``, ``rejected_<topic>``); it never reaches the simulation. Valid stamps are
  otherwise ignored outside lockstep.
- Saturation (on by default): ``max_wrench`` ``[force, torque]`` [N, N m] bounds the norms of the base wrench's
  force and torque (a larger one is scaled down along its direction), ``max_effort`` (one number, or one per
  joint) clips each joint effort; empty (the default) = from the model, as ``controller_node`` does: the
  URDF's ``<limit effort>`` (``Model.effort_limits``), else 100 N m/kg x the total mass, and 100 m/s² / 100 N
  m/kg x the total mass for the wrench. Saturated commands are counted (``saturated_wrench_commands``,
  ``saturated_effort_commands``) and reported by a throttled warning; the ``wrench`` and ``joint_effort``
  topics publish what is applied, after saturation.
- Faults: a step that raises, gives a non-finite state, or runs away (an angular rate above 1 rad per step,
  i.e. ``physics_rate`` rad/s, capped at 10⁴; a linear rate above 10⁴ m/s; a configuration component beyond
  10⁶ m or rad; every 0.1 s of simulation time, energy no command did of the order of all the energy the
  initial state and the commands account for -- :mod:`mbs_ros.dynamics.simulator`, "Faults") halts the
  simulation at the last good state, the state from which the failing step started: commands cleared, that
  state published once, an ERROR on /diagnostics at once and then at ``diagnostics_rate`` (``message``: the
  reason and the simulation time; ``fault``, ``faults`` among the values), an error in the log. ``~/reset``
  resumes from the initial state.
- Physics rate: at start-up, and when ``integrator``, ``gravity``, ``max_wrench`` or ``max_effort`` change,
  :func:`mbs_ros.dynamics.simulator.rate_check` estimates the fastest gravity mode ``ω_g`` (the largest
  ``√|eig(M⁻¹ ∂g/∂q)|`` at the initial configuration and 32 sampled ones) and the full-effort rate ``ω_τ``; a
  ``physics_rate`` at which the gravity mode's energy more than doubles per period under the integrator
  (RK4: ``ω_g dt`` > 2.89, just past its stability limit 2.83; Euler: > 0.11) is refused (the node does not
  start; a runtime change is refused), and one with ``max(ω_g, ω_τ) dt`` > 1, or a gravity mode gaining > 1 %
  energy per period, is warned about. The fixed arm (``config/arm_6dof_fixed.yaml``, ``ω_g`` ≈ 6.7 rad/s) is
  refused below 2.3 Hz with rk4.
- Parameters: a change that would make the node unsafe is refused with the reason (``set_parameters`` returns
  ``successful = false``): ``cmd_timeout`` 0 at run time (0, hold forever, is only accepted at start-up: a
  controller that dies would otherwise push for ever) or outside ``(0, 60]`` s; ``publish_rate`` below
  0.1 Hz or above ``physics_rate``; ``|gravity|`` above 10³ m/s²; ``initial_joint_positions`` outside the
  URDF's ``[lower, upper]`` (joints without limits: |q| <= 10³); ``initial_position`` beyond 10⁶ m,
  ``initial_rpy`` beyond 10³ rad; initial velocities beyond the runaway bounds; ``mass`` outside
  [10⁻⁶, 10⁹] kg, principal moments of ``inertia`` outside [10⁻¹², 10⁹] kg m², ``com`` beyond 10³ m; and
  the physics-rate refusal above.

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
as fast as the controller answers). Pause holds the periods (commands are still collected, and ``~/step`` takes
one whose commands are all there); resume takes the waiting period if its commands are all there; reset publishes
the initial state at the next step's stamp and drops the commands collected for the old one. With the same
parameters, and ``use_sim_time`` so that ``t0`` is 0, two lockstep runs publish bit-identical state sequences.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "dynamics_node":
    # This process is the node: one BLAS/OpenMP thread, set before numpy loads its BLAS (runtime.limit_threads
    # also resizes loaded pools when threadpoolctl is installed). The environment's own choice is kept.
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                  "VECLIB_MAXIMUM_THREADS"):
        os.environ.setdefault(_name, "1")

import re
import time
import warnings
from array import array
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock as RclpyClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from visualization_msgs.msg import MarkerArray

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.mimic import MIMIC_MODES
from mbs_ros.dynamics.model import MAX_MASS_RATIO
from mbs_ros.dynamics.simulator import CommandLimits, Fault, RateCheck, Simulator, WrenchCommand
from mbs_ros.dynamics.simulator import command_limits as sim_command_limits
from mbs_ros.dynamics.simulator import rate_check, velocity_bounds
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes import params as prm
from mbs_ros.nodes.params import locked_joints_setting
from mbs_ros.nodes.parameters.dynamics import (INTEGRATORS, LOCKED_JOINTS_DESCRIPTION, LOCKED_POSITIONS_DESCRIPTION,
                                               MIMIC_DESCRIPTION, PARAMETERS)
from mbs_ros.nodes import markers as mk
from mbs_ros.dynamics import model_source as ms
from mbs_ros.dynamics.model_source import ParameterError
from mbs_ros.nodes.ratelimit import RateLimitedLog
from mbs_ros.nodes.runtime import descriptor, run_node, settings_executor

try:  # our interface package (mbs_ros_msgs/, built by make setup / colcon)
    from mbs_ros_msgs.msg import EnergyPorts
except ImportError:  # pragma: no cover - without it the node runs, with no energy topic (a warning says so)
    EnergyPorts = None
try:  # the ~/step service's type (mbs_ros_msgs/srv/Step); an older build of the package has only EnergyPorts
    from mbs_ros_msgs.srv import Step
except ImportError:  # pragma: no cover - without it: no ~/step (a warning says so)
    Step = None

try:  # tf2_msgs is not on PyPI: the set-up builds it; a ROS install has it.
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - reported at start-up
    TFMessage = None

BASE_GROUPS = ms.BASES  # a single rigid body
TREE_BASE_GROUPS = ms.TREE_BASES  # a robot: a group, or fixed

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
# ~/step: at most this many physics steps per request (the steps run inside the service callback)
MAX_STEP_REQUEST = 1_000_000

# Parameter bounds (module docstring, "Robustness").
MIN_PUBLISH_RATE = 0.1  # Hz
MAX_CMD_TIMEOUT = 60.0  # s of simulation time
MAX_GRAVITY = 1.0e3  # m/s^2, norm
MAX_JOINT_POSITION = 1.0e3  # rad or m: initial positions of joints without URDF limits
MAX_INITIAL_POSITION = 1.0e6  # m (the simulator's MAX_POSITION)
MAX_RPY = 1.0e3  # rad
MASS_RANGE = (1.0e-6, 1.0e9)  # kg
INERTIA_RANGE = (1.0e-12, 1.0e9)  # kg m^2, principal moments
MAX_COM = 1.0e3  # m

# lockstep: the simulator's command channels and the topics they come from
_CHANNEL = {"cmd_wrench": "wrench", "joint_command": "joints", "thruster_command": "thrusters"}
_TOPIC = {"wrench": "cmd_wrench", "joints": "joint_command", "thrusters": "thruster_command"}
_TIMEOUT_TOPIC = {"wrench": "cmd_wrench", "joints": "cmd_joint_effort", "thrusters": "cmd_thrust"}
MAX_CURRENT = 100.0  # m/s (and m/s² for its rate), per component

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
    publish_rate: float = 100.0
    wrench_rate: float = 100.0
    markers_rate: float = 20.0
    diagnostics_rate: float = 1.0
    initial_position: Tuple[float, ...] = (0.0, 0.0, 0.0)
    initial_rpy: Tuple[float, ...] = (0.0, 0.0, 0.0)
    initial_twist: Tuple[float, ...] = (0.0,) * 6
    initial_joint_positions: Tuple[float, ...] = ()
    initial_joint_velocities: Tuple[float, ...] = ()
    world_frame: str = "world"
    base_frame: str = "base_link"
    cmd_timeout: float = 0.5
    use_events_executor: bool = True
    max_mass_ratio: float = MAX_MASS_RATIO
    locked_joints: Tuple[str, ...] = ()  # joints frozen at load (Model.from_urdf's locked_joints)
    locked_joint_positions: Tuple[float, ...] = ()  # one per locked joint (zeros when given empty)
    mimic: str = "reduce"  # URDF <mimic> joints: reduce (follow their master) | independent
    publish_clock: bool = False
    real_time_factor: float = 1.0
    lockstep: bool = False
    control_rate: float = 100.0
    publish_markers: bool = True
    marker_wrench_scale: float = 0.01
    max_wrench: Tuple[float, ...] = ()  # () = from the model
    max_effort: object = ()  # () = from the model; a number (every joint) or a tuple (one per joint)
    fluid_density: float = 0.0  # kg/m³; 0 = the robot YAML's fluid.density, else 1000
    current: Tuple[float, ...] = (0.0, 0.0, 0.0)  # the water's current, world axes [m/s]
    current_rate: Tuple[float, ...] = (0.0, 0.0, 0.0)  # its rate of change [m/s²]
    environment_temperature: float = 288.15  # K, θ₀ of the entropy production
    energy_rate: float = 10.0  # Hz, the energy topic
    start_paused: bool = False  # start paused at t0 (~/pause false or ~/step advance it)

    @property
    def inertia_matrix(self) -> np.ndarray:
        ixx, ixy, ixz, iyy, iyz, izz = self.inertia
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])

    @property
    def multibody(self) -> bool:
        return bool(self.robot_description.strip() or self.model_file.strip())


DEFAULTS = Settings()


_INERTIAL = ("mass", "inertia", "com", "gravity")
_SINGLE_BODY_ONLY = ("mass", "inertia", "com")


def settings_from_values(values: Dict[str, object], source: Optional[ms.Source] = None) -> Settings:
    """Validate raw parameter values (ints accepted for doubles); raise :class:`ParameterError`.

    ``source`` is the loaded model source (see :mod:`mbs_ros.dynamics.model_source`); None: a single body."""

    def text(name, choices=None, allow_empty=False):
        return prm.text(values, name, choices, allow_empty)

    def number(name, lo=None, lo_open=False, hi=None):
        return prm.number(values, name, lo, lo_open, hi)

    def vector(name, n):
        return prm.vector(values, name, n)

    def bounded(name, n, bound, norm=False):
        return prm.bounded_vector(values, name, n, bound, norm)

    def flag(name):
        return prm.flag(values, name)

    multibody = source is not None and source.multibody
    locked = locked_joints_setting(values, multibody)
    s = Settings(
        robot_description=text("robot_description", allow_empty=True),
        model_file=text("model_file", allow_empty=True),
        base_group=text("base_group", TREE_BASE_GROUPS if multibody else BASE_GROUPS),
        mass=number("mass", lo=MASS_RANGE[0], hi=MASS_RANGE[1]),
        inertia=vector("inertia", 6),
        com=bounded("com", 3, MAX_COM),
        gravity=bounded("gravity", 3, MAX_GRAVITY, norm=True),
        integrator=text("integrator", INTEGRATORS),
        physics_rate=number("physics_rate", lo=0.0, lo_open=True, hi=1.0e5),
        publish_rate=number("publish_rate", lo=MIN_PUBLISH_RATE),
        wrench_rate=number("wrench_rate", lo=0.0),
        markers_rate=number("markers_rate", lo=0.0),
        diagnostics_rate=number("diagnostics_rate", lo=0.0),
        initial_position=bounded("initial_position", 3, MAX_INITIAL_POSITION),
        initial_rpy=bounded("initial_rpy", 3, MAX_RPY),
        initial_twist=vector("initial_twist", 6),
        initial_joint_positions=vector("initial_joint_positions", None),
        initial_joint_velocities=vector("initial_joint_velocities", None),
        world_frame=text("world_frame"),
        base_frame=text("base_frame"),
        cmd_timeout=number("cmd_timeout", lo=0.0, hi=MAX_CMD_TIMEOUT),
        max_mass_ratio=number("max_mass_ratio", lo=0.0),
        locked_joints=locked[0],
        locked_joint_positions=locked[1],
        mimic=text("mimic", MIMIC_MODES),
        use_events_executor=flag("use_events_executor"),
        publish_clock=flag("publish_clock"),
        real_time_factor=number("real_time_factor", lo=0.0),
        lockstep=flag("lockstep"),
        control_rate=number("control_rate", lo=0.0, lo_open=True),
        publish_markers=flag("publish_markers"),
        marker_wrench_scale=number("marker_wrench_scale", lo=0.0),
        max_wrench=prm.limits(values, "max_wrench", 2),
        max_effort=prm.limits(values, "max_effort", None),
        fluid_density=number("fluid_density", lo=0.0, hi=1.0e5),
        current=bounded("current", 3, MAX_CURRENT),
        current_rate=bounded("current_rate", 3, MAX_CURRENT),
        environment_temperature=number("environment_temperature", lo=0.0, lo_open=True, hi=1.0e4),
        energy_rate=number("energy_rate", lo=0.0),
        start_paused=flag("start_paused"),
    )
    if s.publish_rate > s.physics_rate:
        raise ParameterError(
            f"publish_rate ({s.publish_rate:g} Hz) must not exceed physics_rate ({s.physics_rate:g} Hz)")
    for name in ("wrench_rate", "markers_rate", "diagnostics_rate", "energy_rate"):
        if getattr(s, name) > s.physics_rate:
            raise ParameterError(
                f"{name} ({getattr(s, name):g} Hz) must not exceed physics_rate ({s.physics_rate:g} Hz)")
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


def check_runtime_change(old: Settings, new: Settings, changed) -> None:
    """Changes refused at run time only (ParameterError with the reason); see the module docstring."""
    if "cmd_timeout" in changed and new.cmd_timeout == 0.0:
        raise ParameterError(
            "cmd_timeout 0 (hold the last command forever) is refused at run time: a controller that stops or dies "
            f"would push for ever with its last command; choose a timeout in (0, {MAX_CMD_TIMEOUT:g}] s")


def command_limits(model: Model, s: Settings) -> CommandLimits:
    """The saturation limits of the settings on ``model`` (empty = the model's); ParameterError with the reason."""
    try:
        return sim_command_limits(model, s.max_wrench or None,
                                  s.max_effort if isinstance(s.max_effort, float) else (s.max_effort or None))
    except ValueError as e:
        raise ParameterError(str(e)) from None


def check_rate(model: Model, s: Settings, q0, limits: CommandLimits) -> RateCheck:
    """:func:`mbs_ros.dynamics.simulator.rate_check` at the settings' physics rate and integrator; ParameterError
    when it refuses the rate."""
    result = rate_check(model, q0, cv.period_ns(s.physics_rate) * 1e-9, s.integrator, limits)
    if result.error:
        raise ParameterError(result.error)
    return result


def joint_position_limits(model: Model) -> Tuple[np.ndarray, np.ndarray]:
    """Per joint ``(lower, upper)`` from the model's URDF (``<limit lower upper>`` of revolute and prismatic
    joints), ``∓MAX_JOINT_POSITION`` where it gives none (continuous joints, no limit tag)."""
    nj = len(model.joint_names)
    lower, upper = np.full(nj, -MAX_JOINT_POSITION), np.full(nj, MAX_JOINT_POSITION)
    given = getattr(model, "position_limits", None)  # Model's own reading of the URDF, where it has one
    if given is not None:
        lo, hi = (np.asarray(x, dtype=float).reshape(-1) for x in given)
        if lo.shape == hi.shape == (nj,):
            ok = np.isfinite(lo) & np.isfinite(hi) & (lo < hi)
            return np.where(ok, lo, lower), np.where(ok, hi, upper)
    xml = getattr(model, "urdf", None)
    if not nj or not xml:
        return lower, upper
    import xml.etree.ElementTree as ET

    index = {name: i for i, name in enumerate(model.joint_names)}
    for joint in ET.fromstring(xml).iter("joint"):
        i = index.get(joint.get("name"))
        limit = joint.find("limit")
        if i is None or limit is None or model.joint_types[i] == "continuous":
            continue
        try:
            lo, hi = float(limit.get("lower", "nan")), float(limit.get("upper", "nan"))
        except ValueError:
            continue
        if np.isfinite(lo) and np.isfinite(hi) and lo < hi:
            lower[i], upper[i] = lo, hi
    return lower, upper


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
    """Raise :class:`ParameterError` unless positive definite with principal moments in ``INERTIA_RANGE``; return
    a warning if the principal moments violate the triangle inequality (no real body has them, but some papers
    use them)."""
    eig = np.linalg.eigvalsh(inertia)
    if not eig[0] > 0.0:
        raise ParameterError(
            "inertia must be positive definite; its principal moments are "
            + ", ".join(f"{e:.6g}" for e in eig))
    if eig[0] < INERTIA_RANGE[0] or eig[-1] > INERTIA_RANGE[1]:
        raise ParameterError(
            f"inertia: principal moments must lie in [{INERTIA_RANGE[0]:g}, {INERTIA_RANGE[1]:g}] kg m^2, got "
            + ", ".join(f"{e:.6g}" for e in eig))
    a, b, c = eig
    if c > a + b + 1e-12 * c:
        return (f"inertia principal moments {a:.6g}, {b:.6g}, {c:.6g} violate the triangle inequality "
                f"({c:.6g} > {a:.6g} + {b:.6g}): no real body has them; simulating anyway")
    return None


def build_model(s: Settings, source: Optional[ms.Source] = None) -> Model:
    if source is not None and source.multibody:
        model = ms.build_multibody(source, s.base_group, s.gravity, max_mass_ratio=s.max_mass_ratio,
                                   locked_joints=dict(zip(s.locked_joints, s.locked_joint_positions)),
                                   mimic=s.mimic, fluid_density=s.fluid_density)
        return model.with_current(s.current, s.current_rate)
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
        if s.initial_joint_positions:
            lower, upper = joint_position_limits(model)
            a = np.asarray(angles, dtype=float)
            tol = 1e-9 * np.maximum(1.0, upper - lower)
            bad = [f"{n} = {x:g} outside [{lo:g}, {hi:g}]" for n, x, lo, hi, ok in
                   zip(model.joint_names, a, lower, upper, (a >= lower - tol) & (a <= upper + tol)) if not ok]
            if bad:
                raise ParameterError("initial_joint_positions: " + ", ".join(bad)
                                     + " (the URDF's limits; joints without limits: |q| <= "
                                     f"{MAX_JOINT_POSITION:g})")
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
    caps = velocity_bounds(model, cv.period_ns(s.physics_rate) * 1e-9)
    over = np.abs(v0) > caps
    if np.any(over):
        i = int(np.argmax(over))
        name = ("initial_joint_velocities" if i >= model.nv - nj else "initial_twist")
        raise ParameterError(f"{name}: velocity component {i} = {v0[i]:g} exceeds the runaway bound {caps[i]:g} "
                             f"(1 rad per physics step for angular rates, at most 1e4; 1e4 m/s)")
    return q0, v0


def _descriptor(name: str, value):
    return descriptor(PARAMETERS[name], value)


def topic_token(name: str) -> str:
    """A joint name as one token of a topic name: characters other than letters, digits and ``_`` become ``_``
    (and a leading digit gets a ``_`` before it)."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + token if token[:1].isdigit() or not token else token


# ------------------------------------------------------------------------------------------- node


def _every(physics_rate: float, rate: float) -> int:
    """Steps between two publications at ``rate`` (0: never)."""
    return max(1, int(round(physics_rate / rate))) if rate > 0 else 0


class DynamicsNode(Node):
    """See the module docstring. Construct, then call :meth:`configure` (raises ParameterError).

    The simulation itself is ``self.sim``, a :class:`mbs_ros.dynamics.simulator.Simulator`: this class declares and
    checks the parameters, turns messages into its commands, advances it from a timer (or per lockstep period)
    and publishes its state."""

    def __init__(self, node_name: str = "dynamics_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._logs = RateLimitedLog(self.get_logger(), WARN_THROTTLE_S)  # per key, free while held back

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
        for name in PARAMETERS:
            if name not in values:
                values[name] = self._declare(name, defaults.get(name, getattr(DEFAULTS, name)))
        s = settings_from_values(values, source)
        model = build_model(s, source)
        q0, v0 = initial_state(model, s)
        limits = command_limits(model, s)
        rate = check_rate(model, s, q0, limits)  # refuses a physics rate the integrator cannot hold
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
            if model.load_report:  # what the tolerant loader repaired, left out or found implausible: one line
                n = len(model.load_report)
                self.get_logger().warning(f"{source.describe()} loaded with {n} note{'s' if n > 1 else ''}: "
                                          + "; ".join(model.load_report))
            # mesh filenames RViz resolves (file:// for packages outside the ament index and plain paths); one
            # warning, at start, for those nothing resolves
            self._visual_urdf, meshes = ms.meshes_for_rviz(source)
            if meshes:
                self.get_logger().warning(meshes)
        else:
            self._warn_inertia(s)

        self.settings = s
        self.nj = len(model.joint_names)
        self.nv_base = model.nv - self.nj
        prefix_ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(prefix_ns, s.base_frame)
        self._prefix = "" if s.base_frame.startswith("/") else cv.frame_prefix(prefix_ns)
        self._body_frames = {"", s.base_frame, s.base_frame.lstrip("/"), self.base_frame}
        self._world_frames = {self.world_frame, "/" + self.world_frame}

        # the simulation: t_k = t0 + k * dt, all integer ns
        self.dt_ns = cv.period_ns(s.physics_rate)
        self.dt = self.dt_ns * 1e-9
        self.lockstep = s.lockstep
        self.sim = Simulator(model, q0, v0, self.dt, integrator=s.integrator, cmd_timeout=s.cmd_timeout,
                             lockstep_steps=lockstep_steps(s) if s.lockstep else 0,
                             t0_ns=self.get_clock().now().nanoseconds,  # 0 with use_sim_time and no /clock yet
                             max_wrench=(limits.max_force, limits.max_torque), max_effort=limits.max_effort)
        self.sim.on_wrench_applied = self._publish_wrench
        self.sim.on_efforts_applied = self._publish_effort
        self.sim.on_timeout = self._on_command_timeout
        self.sim.on_fault = self._on_fault
        if s.start_paused:
            self.sim.pause(True)
        self._rate = rate
        self._new_fault: Optional[Fault] = None
        self.nt = len(model.thruster_names)
        inputs = (["cmd_wrench"] + (["cmd_joint_effort", "joint_command"] if self.nj else [])
                  + (["cmd_thrust", "thruster_command"] if self.nt else []))
        self._counts = {**{f"received_{t}": 0 for t in inputs}, **{f"rejected_{t}": 0 for t in inputs},
                        "callback_errors": 0}
        self._reported = {}  # counts (and saturations) at the last diagnostics: what is new since
        self._setup_frames()
        self._set_rates(s)
        self._last_clock_stamp = None
        self._last_clock_wall = 0.0
        self._last_published_k = None
        self._last_diag_wall = 0.0
        self._stepping = False  # inside ~/step: still paused for everyone watching (diagnostics say so)
        # lockstep: wall-clock bookkeeping (the periods themselves are the simulator's)
        self._last_input_wall = time.monotonic()
        self._last_state_wall = 0.0
        self._graph_counts = ()

        qos = QoSProfile(depth=100)
        self.pub_odom = self.create_publisher(Odometry, "odom", qos)
        self.pub_pose = self.create_publisher(PoseStamped, "pose", qos)
        self.pub_wrench = self.create_publisher(WrenchStamped, "wrench", qos)
        self.pub_tf = self.create_publisher(TFMessage, "/tf", QoSProfile(depth=100))
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))
        self.pub_clock = self.create_publisher(Clock, "/clock", QoSProfile(depth=10)) if s.publish_clock else None
        self.pub_markers = self.create_publisher(MarkerArray, "markers", QoSProfile(depth=10))
        self.sub_cmd = self.create_subscription(WrenchStamped, "cmd_wrench",
                                                self._guard(self._on_cmd_wrench, "cmd_wrench"), QoSProfile(depth=10))
        self.sub_joint_command = None
        self.sub_thruster_command = None
        self.pub_energy = None
        if EnergyPorts is not None:
            self.pub_energy = self.create_publisher(EnergyPorts, "energy", QoSProfile(depth=10))
            self._energy_msg = EnergyPorts()
            self._energy_msg.header.frame_id = self.world_frame
        else:
            self.get_logger().warning("mbs_ros_msgs is not importable: no energy topic (make setup builds it)")
        if self.nt:
            self.pub_thrust = self.create_publisher(JointState, "thrust", qos)
            self._thrust_msg = JointState(name=list(model.thruster_names))
            self.sub_thrust = self.create_subscription(
                Float64MultiArray, "cmd_thrust", self._guard(self._on_cmd_thrust, "cmd_thrust"), QoSProfile(depth=10))
            self.sub_thruster_command = self.create_subscription(
                JointState, "thruster_command", self._guard(self._on_thruster_command, "thruster_command"),
                QoSProfile(depth=10))
            self._thruster_index = {name: i for i, name in enumerate(model.thruster_names)}
        self.pub_joint_wrenches = []
        if self.nj:
            self.pub_joint_states = self.create_publisher(JointState, "joint_states", qos)
            self.pub_joint_effort = self.create_publisher(JointState, "joint_effort", qos)
            self.pub_joint_wrenches = [
                self.create_publisher(WrenchStamped, "joint_wrenches/" + topic_token(j), qos)
                for j in model.joint_names]
            self.sub_effort = self.create_subscription(
                Float64MultiArray, "cmd_joint_effort", self._guard(self._on_cmd_joint_effort, "cmd_joint_effort"),
                QoSProfile(depth=10))
            self.sub_joint_command = self.create_subscription(
                JointState, "joint_command", self._guard(self._on_joint_command, "joint_command"),
                QoSProfile(depth=10))
            self._joint_index = {name: i for i, name in enumerate(model.joint_names)}
        self._make_messages()
        if self.multibody:
            # The URDF with the link names this node publishes on TF: RViz's RobotModel works with an empty
            # TF prefix, robot_state_publisher with an empty frame_prefix.
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)
            self.pub_robot_description = self.create_publisher(String, "robot_description", latched)
            self.pub_robot_description.publish(String(data=mk.prefixed_urdf(self._visual_urdf, self._frame)))
        self._setup_markers()
        if self._static_transforms:
            static_qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.pub_tf_static = self.create_publisher(TFMessage, "/tf_static", static_qos)
            self.pub_tf_static.publish(TFMessage(transforms=[
                cv.transform_stamped_msg(self.sim.t0_ns, parent, child, p, quat)
                for parent, child, p, quat in self._static_transforms]))
        self.srv_reset = self.create_service(Trigger, "~/reset", self._guard_service(self._on_reset, "reset"))
        self.srv_pause = self.create_service(SetBool, "~/pause", self._guard_service(self._on_pause, "pause"))
        self.srv_step = None
        if Step is not None:
            self.srv_step = self.create_service(Step, "~/step", self._guard_service(self._on_step, "step"))
        else:
            self.get_logger().warning("mbs_ros_msgs has no Step service (an older build): no ~/step (make setup "
                                      "builds it)")
        self.add_on_set_parameters_callback(self._on_set_parameters)

        # wall-clock pacing
        self._anchor()
        self._spinning = False
        self._max_batch_steps = max(1, int(round(MAX_BATCH_S / self.dt)))
        self.timer = None
        self._steady_clock = RclpyClock(clock_type=ClockType.STEADY_TIME)
        self._make_timer()

        self._publish_state(everything=True)
        self._publish_diagnostics()
        self._graph_counts = self._graph_counts_now()  # who had the state: later matches get it again (waiting)
        self._warn_unknown_overrides()
        effective = 1e9 / self.dt_ns
        if self.multibody:
            what = (f"{s.base_group} base robot {source.describe()}, {self.nj} joints "
                    f"({', '.join(model.joint_names)}), total mass {self._total_mass():g} kg")
        else:
            what = f"{s.base_group} body, mass {s.mass:g} kg"
        if s.lockstep:
            timing = (f"lockstep: {self.sim.lockstep_steps} steps per control period, waiting for "
                      f"{' and '.join(_TOPIC[ch] for ch in self.sim.expected)} stamped with each state, "
                      + (f"at most {s.real_time_factor:g}x real time" if s.real_time_factor > 0
                         else "as fast as the controller answers"))
        else:
            timing = (f"publishing {self.world_frame} -> {self.base_frame} every {self._publish_every} steps, "
                      + (f"real_time_factor {s.real_time_factor:g}" if s.real_time_factor > 0
                         else "as fast as possible") + f", cmd_timeout {s.cmd_timeout:g} s")
        self.get_logger().info(
            f"{what}, {s.integrator} at {effective:g} Hz (dt = {self.dt_ns} ns), {timing}"
            + (", publishing /clock" if s.publish_clock else "")
            + (f"; paused at t = {self.stamp() * 1e-9:.9f} s (start_paused: ~/pause false resumes, ~/step steps)"
               if s.start_paused else "")
            + f"; {self._limits_text()}; fastest modes: "
            f"gravity {rate.omega_gravity:.3g} rad/s, full effort {rate.omega_effort:.3g} rad/s; runaway beyond "
            f"{self.sim.max_angular_rate:g} rad/s")
        if rate.warning:
            self.get_logger().warning(rate.warning)

    @property
    def model(self) -> Model:
        return self.sim.model

    # ------------------------------------------------------------------------------ robustness

    def _limits_text(self) -> str:
        lim = self.sim.limits
        parts = []
        if self.model.group is not None:
            parts.append(f"max_wrench [{lim.max_force:g} N, {lim.max_torque:g} N m]")
        if self.nj:
            parts.append("max_effort [" + ", ".join(f"{x:g}" for x in lim.max_effort) + "]")
        if getattr(self, "nt", 0):
            lo, hi = self.model.thrust_limits
            parts.append("thrust [" + ", ".join(f"{a:g}..{b:g}" for a, b in zip(lo, hi)) + "] N")
        return ", ".join(parts) or "no command limits (nothing to command)"

    def _warn(self, key: str, text: str, error: bool = False) -> None:
        """A warning throttled per ``key`` (one per WARN_THROTTLE_S of wall clock), with how many were held back;
        free while held back (:mod:`mbs_ros.nodes.ratelimit`: rclpy's own throttle costs ms per call)."""
        if not self.context.ok():
            return
        try:
            (self._logs.error if error else self._logs.warning)(key, text)
        except Exception:  # noqa: BLE001 - a log line is never worth the node
            pass

    def _reject(self, topic: str, kind: str, reason: str) -> None:
        """An input rejected: counted, and a warning throttled per topic and kind of reason."""
        self._counts[f"rejected_{topic}"] += 1
        self._warn(f"{topic}:{kind}", f"{topic} rejected: {reason}")

    def _guard(self, fn, what: str):
        """``fn`` that never raises: an exception is logged (throttled) and counted."""

        def guarded(*args):
            try:
                return fn(*args)
            except Exception as e:  # noqa: BLE001 - no input may stop the node
                if not self.context.ok():
                    return None
                self._counts["callback_errors"] += 1
                self._warn(f"error_{what}", f"{what} callback failed: {type(e).__name__}: {e}", error=True)
            return None

        if what == "timer":  # rclpy passes a TimerInfo to a timer callback that takes an argument
            return lambda: guarded()
        return lambda msg: guarded(msg)

    def _guard_service(self, fn, what: str):
        """A service callback that never raises: an exception is the response's reason."""

        def guarded(request, response):
            try:
                return fn(request, response)
            except Exception as e:  # noqa: BLE001
                self._counts["callback_errors"] += 1
                self._warn(f"error_{what}", f"{what} failed: {type(e).__name__}: {e}", error=True)
                response.success = False
                response.message = f"{what} failed: {type(e).__name__}: {e}"
                return response

        return guarded

    def _on_fault(self, fault: Fault) -> None:
        """Simulator hook (inside its advance): remember the fault; :meth:`advance` reports it."""
        self._new_fault = fault

    def _report_fault(self) -> None:
        """A fault just halted the simulation: the last good state once, an ERROR on /diagnostics, the log."""
        fault, self._new_fault = self._new_fault, None
        if fault is None:
            return
        self._warn("fault", f"simulation halted at t = {fault.stamp_ns * 1e-9:.9f} s (step {fault.k}): "
                   f"{fault.reason}; commands cleared, the state at that time is kept; call ~/reset to resume",
                   error=True)
        self._grids = None
        self._publish_state(everything=True)
        self._publish_applied()
        self._publish_diagnostics()

    def _total_mass(self) -> float:
        return float(np.sum(self.model._tree.body_mass))

    def _overrides(self):
        return getattr(self, "_parameter_overrides", {}) or {}  # rclpy keeps them there (Humble..Kilted)

    def _warn_unknown_overrides(self) -> None:
        unknown = sorted(n for n in self._overrides() if n not in PARAMETERS and n != "use_sim_time"
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
        """TF layout: link indices of the base and of each joint's parent and child, static transforms; where
        each joint's position sits in q."""
        model = self.model
        self._static_transforms = []
        self._tf_joints = []  # (parent link index, child link index, parent frame, child frame)
        self._joint_child_frames = []
        self._base_link_index = None
        self._world_to_base = True
        self._base_is_root = True
        # joint positions from q: revolute/prismatic entries as they are, continuous ones as atan2(sin, cos)
        nq_joints = sum(2 if t == "continuous" else 1 for t in model.joint_types)
        lin_j, lin_q, cont_j, cont_q, i = [], [], [], [], model.nq - nq_joints
        for j, t in enumerate(model.joint_types):
            if t == "continuous":
                cont_j.append(j)
                cont_q.append(i)
                i += 2
            else:
                lin_j.append(j)
                lin_q.append(i)
                i += 1
        self._jpos = (np.array(lin_j, dtype=int), np.array(lin_q, dtype=int), np.array(cont_j, dtype=int),
                      np.array(cont_q, dtype=int))
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

    def _make_messages(self) -> None:
        """One message per published type, kept and refilled every cycle (publish serialises at once)."""
        self._odom_msg = Odometry()
        self._odom_msg.header.frame_id = self.world_frame
        self._odom_msg.child_frame_id = self.base_frame
        self._pose_msg = PoseStamped()
        self._pose_msg.header.frame_id = self.world_frame
        self._tf_base = None
        transforms = []
        if self._world_to_base:
            self._tf_base = TransformStamped()
            self._tf_base.header.frame_id, self._tf_base.child_frame_id = self.world_frame, self.base_frame
            transforms.append(self._tf_base)
        self._tf_links = []
        for _pi, _ci, parent, child in self._tf_joints:
            t = TransformStamped()
            t.header.frame_id, t.child_frame_id = parent, child
            self._tf_links.append(t)
        self._tf_msg = TFMessage(transforms=transforms + self._tf_links)
        self._wrench_msg = WrenchStamped()
        if self.nj:
            names = list(self.model.joint_names)
            # mimic joints (Model.mimic_joints) follow the moving ones with their derived position, velocity and
            # effort, then the locked joints (Model.locked_joints) at their fixed position with zero velocity and
            # effort, so a JointState consumer sees every joint the URDF moves
            self._mimic_names = list(self.model.mimic_joints)
            locked = dict(self.model.locked_joints)
            self._locked_tail = (np.array(list(locked.values()), dtype=float), np.zeros(len(locked)))
            self._joint_state_msg = JointState(name=names + self._mimic_names + list(locked))
            self._effort_msg = JointState(name=names)
            self._joint_wrench_msgs = []
            for frame in self._joint_child_frames:
                m = WrenchStamped()
                m.header.frame_id = frame
                self._joint_wrench_msgs.append(m)

    def _set_rates(self, s: Settings) -> None:
        """Steps between publications (0: never): state, joint wrenches, markers, diagnostics."""
        self._publish_every = _every(s.physics_rate, s.publish_rate)
        self._wrench_every = _every(s.physics_rate, s.wrench_rate) if self.nj else 0
        self._markers_every = _every(s.physics_rate, s.markers_rate) if s.publish_markers else 0
        self._diag_every = _every(s.physics_rate, s.diagnostics_rate)
        self._energy_every = _every(s.physics_rate, s.energy_rate) if EnergyPorts is not None else 0
        self._grids = None  # the step grids advance() stops at, from the rates and the subscribers
        self.sim.set_cmd_timeout(s.cmd_timeout)
        rtf = s.real_time_factor
        self._max_lag_steps = max(1, int(MAX_LAG_S * rtf / self.dt)) if rtf > 0 else 0

    def _anchor(self) -> None:
        self._anchor_wall_ns = time.monotonic_ns()
        self._anchor_k = self.sim.k
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
        self.timer = self.create_timer(period, self._guard(self._on_timer, "timer"), clock=self._steady_clock)

    def _setup_markers(self) -> None:
        s = self.settings
        if self.multibody:
            from mbs_ros.dynamics.urdf import parse_urdf

            spec = parse_urdf(self.source.urdf)
            inertials = {name: (l.mass, l.com, l.inertia) for name, l in spec.links.items()}
            shapes = mk.shapes_from_urdf(self._visual_urdf, self.model.link_names, self._frame, inertials)
        else:
            shapes = mk.rigid_body_shapes(s.mass, s.inertia_matrix, s.com, self.base_frame)
        self._marker_maker = mk.MarkerMaker(shapes, self.world_frame, self.base_frame,
                                            wrench_arrows=self.model.group is not None)
        self._markers_delete_all = True  # the first array clears what an earlier run left in RViz

    def stamp(self, k: Optional[int] = None) -> int:
        return self.sim.stamp(k)

    # ---------------------------------------------------------------------------- stepping

    def _on_timer(self) -> None:
        sim = self.sim
        if not self._spinning:  # the wall clock counts from the first tick, not from the set-up before the spin
            self._spinning = True
            self._anchor()
        if sim.paused:  # time stands still; keep the bookkeeping and the clock visible
            if (self._diag_every
                    and time.monotonic() - self._last_diag_wall >= 1.0 / self.settings.diagnostics_rate):
                self._publish_diagnostics()
            self._repeat_clock()
            self._paused_watch()
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
        n = min(due - sim.k, self._max_batch_steps)
        if n > 0:
            self.advance(n)
            self._publish_clock()
        behind = due - sim.k
        if behind > self._max_lag_steps:
            self._warn("behind", f"falling behind the wall clock by {behind * self.dt / rtf:.3f} s: skipping ahead "
                       f"(the simulation runs slower than real_time_factor {rtf:g})")
            self._anchor()

    def advance(self, steps: int) -> None:
        """Take ``steps`` physics steps, publishing what falls due on the way (the state every
        ``_publish_every`` steps outside lockstep, joint wrenches, markers and diagnostics on their own step
        grids, each only while someone subscribes). The one place the simulation advances (timer and lockstep)."""
        sim = self.sim
        end = sim.k + steps
        while sim.k < end and not sim.paused:
            k = sim.k
            if self._grids is None:  # asked again after every state: subscribers come and go
                self._grids = self._active_grids()
            grids = self._grids
            nxt = min([end] + [(k // every + 1) * every for every in grids])
            sim.advance(nxt - k)
            if self._new_fault is not None:
                self._report_fault()
                break
            k = sim.k
            if not self.lockstep:  # lockstep: the state and what goes with it once per period (_try_period)
                wrenches = bool(self._wrench_every) and k % self._wrench_every == 0
                markers = bool(self._markers_every) and k % self._markers_every == 0
                if k % self._publish_every == 0:
                    self._publish_state(wrenches=wrenches, markers=markers)
                    self._publish_applied()
                    self._grids = None
                else:
                    if wrenches:
                        self._publish_joint_wrenches(self.stamp())
                    if markers:
                        self._publish_markers(self.stamp())
            if self._diag_every and k % self._diag_every == 0:
                self._publish_diagnostics()
            if self._energy_every and k % self._energy_every == 0:
                self._publish_energy()

    def _active_grids(self) -> list:
        """Step grids to stop at: the state's (outside lockstep), the diagnostics', and the joint wrenches' and
        markers' while someone subscribes to them."""
        grids = []
        if self._diag_every and self.pub_diag.get_subscription_count():
            grids.append(self._diag_every)
        if self._energy_every and self.pub_energy.get_subscription_count():
            grids.append(self._energy_every)
        if self.lockstep:
            return grids
        grids.append(self._publish_every)
        if self._wrench_every and self._joint_wrenches_wanted():
            grids.append(self._wrench_every)
        if self._markers_every and self.pub_markers.get_subscription_count():
            grids.append(self._markers_every)
        return grids

    def _joint_wrenches_wanted(self) -> bool:
        return any(p.get_subscription_count() for p in self.pub_joint_wrenches)

    def _on_command_timeout(self, channel: str) -> None:
        self._logs.info(f"timeout_{channel}",
                        lambda: f"no {_TIMEOUT_TOPIC[channel]} for {self.settings.cmd_timeout:g} s: applying zero")


    # ---------------------------------------------------------------------------- lockstep

    def _lockstep_stamp_ok(self, topic: str, stamp_ns: int) -> bool:
        """Lockstep: is a command stamped ``stamp_ns`` for the current period? Logs why not (throttled)."""
        self._last_input_wall = time.monotonic()
        order = self.sim.check_stamp(_CHANNEL[topic], stamp_ns)
        if order == 0:
            return True
        current = self.stamp()
        if order < 0:  # an answer to a state sent again, or to the state before a reset
            self.get_logger().debug(
                f"lockstep: {topic} stamped {stamp_ns * 1e-9:.9f} s ignored, waiting for {current * 1e-9:.9f} s",
                throttle_duration_sec=WARN_THROTTLE_S)
        else:
            self._warn(f"lockstep_late_{topic}",
                       f"lockstep: {topic} stamped {stamp_ns * 1e-9:.9f} s ignored: it is later than the current state "
                       f"({current * 1e-9:.9f} s); commands must carry the stamp of the state they answer")
        return False

    def _lockstep_take(self, topic: str, value) -> None:
        """A valid command stamped for the current period."""
        self.sim.submit(_CHANNEL[topic], value)
        self._try_period()

    def _try_period(self) -> None:
        """Lockstep: advance one control period if its commands are all here (and the speed limit allows)."""
        sim = self.sim
        if sim.paused or not sim.period_complete():
            return
        rtf = self.settings.real_time_factor
        now = time.monotonic_ns()
        if rtf > 0.0 and now < self._not_before_ns:
            return  # the timer tries again
        self._take_period()
        if rtf > 0.0:
            self._not_before_ns = max(self._not_before_ns + int(sim.lockstep_steps * self.dt_ns / rtf), now)

    def _take_period(self) -> None:
        """Lockstep: the control period whose commands are all here (the caller checked), then its state."""
        sim = self.sim
        k0 = sim.k
        sim.start_period()
        self._grids = None
        self.advance(sim.lockstep_steps)
        k1 = sim.k
        # joint wrenches and markers with the period's state when their step grid was crossed during the period
        self._publish_state(wrenches=bool(self._wrench_every) and k1 // self._wrench_every > k0 // self._wrench_every,
                            markers=bool(self._markers_every)
                            and k1 // self._markers_every > k0 // self._markers_every)
        self._publish_applied()

    def _paused_watch(self) -> None:
        """Paused: the state again (same stamp, everything) when a subscriber of odom or joint_states or a command
        publisher matched since it was last sent, so that a node started while the time stands still (a controller,
        a reference node, a recorder; start_paused) gets the state it would otherwise wait for."""
        counts = self._graph_counts_now()
        grew = any(c > old for c, old in zip(counts, self._graph_counts))
        self._graph_counts = counts
        if grew:
            self._publish_state(everything=True)

    def _lockstep_watch(self) -> None:
        """Lockstep timer: pace, send the state again if the commands are late, warn if nothing comes."""
        if self.sim.period_complete():
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
            missing = [_TOPIC[ch] for ch in self.sim.missing()]
            seen = ", ".join(f"{_TOPIC[ch]} {t * 1e-9:.9f} s"
                             for ch, t in sorted(self.sim.last_stamp_seen.items())) or "none"
            self._logs.warning(
                "lockstep_waiting",
                f"lockstep: waiting at t = {self.stamp() * 1e-9:.9f} s for {' and '.join(missing)} stamped with it; "
                f"no command for {quiet:.1f} s (last stamps seen: {seen}). Is a lockstep controller running?",
                period=max(WARN_THROTTLE_S, LOCKSTEP_WARN_S))

    def _graph_counts_now(self) -> tuple:
        """Matched endpoints of the lockstep loop: state subscribers, command publishers."""
        counts = [self.pub_odom.get_subscription_count()]
        if self.nj:
            counts.append(self.pub_joint_states.get_subscription_count())
        for sub in (self.sub_cmd, self.sub_joint_command, self.sub_thruster_command):
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

    # -------------------------------------------------------------------------- publishing

    def _publish_state(self, controller_inputs_only: bool = False, everything: bool = False,
                       wrenches: bool = False, markers: bool = False) -> None:
        """The state at the current stamp: /clock first, then odom, pose, /tf, joint_states; joint_wrenches with
        ``wrenches`` and markers with ``markers`` (``everything``: both). Every topic only while someone
        subscribes to it. ``controller_inputs_only``: /clock, odom and joint_states (lockstep sending it again)."""
        stamp = self.stamp()
        self._publish_clock(again=controller_inputs_only)
        self._last_state_wall = time.monotonic()
        sim, model = self.sim, self.model
        q, v = sim.q, sim.v
        poses = None
        tf_wanted = not controller_inputs_only and self.pub_tf.get_subscription_count() > 0
        if self.multibody and (tf_wanted or not self._base_is_root or (everything or markers)):
            poses = model.link_poses(q)
        if self.multibody and not self._base_is_root:  # a URDF rooted at "world": the base link's fixed pose
            T = poses[self._base_link_index]
            p, quat = T[:3, 3].tolist(), cv.quaternion_from_matrix(T[:3, :3]).tolist()
        else:
            p, quat = model.pose(q)
            p, quat = p.tolist(), quat.tolist()
        if self.pub_odom.get_subscription_count():
            m = self._odom_msg
            cv.set_stamp(m.header, stamp)
            cv.set_pose(m.pose.pose, p, quat)
            cv.set_pair(m.twist.twist, "linear", "angular", model.twist(q, v).tolist())
            self.pub_odom.publish(m)
        if not controller_inputs_only:
            if self.pub_pose.get_subscription_count():
                m = self._pose_msg
                cv.set_stamp(m.header, stamp)
                cv.set_pose(m.pose, p, quat)
                self.pub_pose.publish(m)
            if tf_wanted:
                self._publish_tf(stamp, poses, p, quat)
        if self.nj and self.pub_joint_states.get_subscription_count():
            self._publish_joint_states(stamp)
        if self.nt and self.pub_thrust.get_subscription_count():
            m = self._thrust_msg
            cv.set_stamp(m.header, stamp)
            m.effort = array("d", np.ascontiguousarray(sim.thrust, dtype=float).tobytes())
            self.pub_thrust.publish(m)
        if not controller_inputs_only:
            if (everything or wrenches) and self.nj:
                self._publish_joint_wrenches(stamp)
            if (everything or markers) and self.settings.publish_markers:
                self._publish_markers(stamp, poses)
            self._last_published_k = sim.k

    def _publish_tf(self, stamp: int, poses: Optional[np.ndarray], p, quat) -> None:
        if self._tf_base is not None:
            cv.set_stamp(self._tf_base.header, stamp)
            cv.set_pose(self._tf_base.transform, p, quat)
        if self._tf_links:
            T = cv.inverse_transforms(poses[self._tf_parent]) @ poses[self._tf_child]  # T_parent_child
            quats = cv.quaternion_from_matrix(T[:, :3, :3]).tolist()
            positions = T[:, :3, 3].tolist()
            for t, p_j, quat_j in zip(self._tf_links, positions, quats):
                cv.set_stamp(t.header, stamp)
                cv.set_pose(t.transform, p_j, quat_j)
        self.pub_tf.publish(self._tf_msg)

    def _joint_positions(self, q: np.ndarray) -> np.ndarray:
        lin_j, lin_q, cont_j, cont_q = self._jpos
        out = np.empty(self.nj)
        out[lin_j] = q[lin_q]
        out[cont_j] = np.arctan2(q[cont_q + 1], q[cont_q])
        return out

    def _publish_joint_states(self, stamp: int) -> None:
        sim, m = self.sim, self._joint_state_msg
        cv.set_stamp(m.header, stamp)
        position, velocity = self._joint_positions(sim.q), sim.v[self.nv_base:]
        effort = np.ascontiguousarray(sim.applied_efforts, dtype=float)
        if self._mimic_names:  # derived: m q + o, m v, and the effort each carries under the applied commands
            q, v = sim.q, sim.v
            a = self.model.forward_dynamics(q, v, sim.generalized_force())
            mq, mv, me = self.model.mimic_joint_states(q, v, a)
            position, velocity, effort = (np.concatenate((position, mq)), np.concatenate((velocity, mv)),
                                          np.concatenate((effort, me)))
        locked_position, zeros = self._locked_tail
        if zeros.size:
            position = np.concatenate((position, locked_position))
            velocity, effort = np.concatenate((velocity, zeros)), np.concatenate((effort, zeros))
        m.position = array("d", position.tobytes())
        m.velocity = array("d", np.ascontiguousarray(velocity).tobytes())
        m.effort = array("d", effort.tobytes())
        self.pub_joint_states.publish(m)

    def _publish_joint_wrenches(self, stamp: int) -> None:
        """joint_wrenches/<joint> of the current state, computed only when someone subscribes to one of them."""
        wanted = [i for i, pub in enumerate(self.pub_joint_wrenches) if pub.get_subscription_count()]
        if not wanted:
            return
        W = self.sim.joint_wrenches().tolist()
        for i in wanted:
            m = self._joint_wrench_msgs[i]
            cv.set_stamp(m.header, stamp)
            cv.set_pair(m.wrench, "force", "torque", W[i])
            self.pub_joint_wrenches[i].publish(m)

    def _publish_markers(self, stamp: int, poses: Optional[np.ndarray] = None) -> None:
        """markers of the current state, built only when someone subscribes."""
        if not self.pub_markers.get_subscription_count():
            return
        sim, model = self.sim, self.model
        if poses is None and self.multibody:
            poses = model.link_poses(sim.q)
        p, quat = model.pose(sim.q)
        if poses is None:  # a single body: its one "link" is the body frame
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = cv.rotation_matrix(quat), p
            poses = T[None]
        elif not self._base_is_root:
            p = poses[self._base_link_index][:3, 3]
        markers = []
        if self._markers_delete_all:
            markers.append(mk.delete_all_marker(self.world_frame, stamp))
            self._markers_delete_all = False
        markers += self._marker_maker.link_markers(stamp, poses)
        F, tau = sim.applied_wrench_world()
        markers += self._marker_maker.wrench_markers(stamp, p, F, tau, self.settings.marker_wrench_scale)
        self.pub_markers.publish(MarkerArray(markers=markers))

    def _publish_applied(self) -> None:
        """``wrench`` and ``joint_effort`` again with the state, stamped with the start of the last step taken."""
        k = self.sim.k
        if k > 0:
            self._publish_wrench(k - 1, self.sim.applied_wrench)
            if self.nj:
                self._publish_effort(k - 1, self.sim.applied_efforts)

    def _publish_wrench(self, k: int, cmd: WrenchCommand) -> None:
        if not self.pub_wrench.get_subscription_count():
            return
        m = self._wrench_msg
        cv.set_stamp(m.header, self.stamp(k))
        m.header.frame_id = self.base_frame if cmd.frame == "body" else self.world_frame
        cv.set_pair(m.wrench, "force", "torque", cmd.W.tolist())
        self.pub_wrench.publish(m)

    def _publish_effort(self, k: int, effort: np.ndarray) -> None:
        if not self.pub_joint_effort.get_subscription_count():
            return
        m = self._effort_msg
        cv.set_stamp(m.header, self.stamp(k))
        m.effort = array("d", np.ascontiguousarray(effort, dtype=float).tobytes())
        self.pub_joint_effort.publish(m)

    def energy_report(self) -> dict:
        """The port-level bookkeeping of the current state (:meth:`Model.energy_ports`) with the simulator's
        integrals: what the energy topic carries."""
        sim, model = self.sim, self.model
        q, v = sim.q, sim.v
        wrench = sim.applied_wrench_body() if model.group is not None else None
        report = model.energy_ports(q, v, efforts=sim.applied_efforts if self.nj else None, wrench=wrench,
                                    thrust=sim.thrust if self.nt else None,
                                    temperature=self.settings.environment_temperature)
        theta = report["temperature"]
        total = sum(report["storages"].values())
        supplied = sim.work + sim.passive_work + sim.dissipated
        report.update(total_energy=total, supplied_energy=supplied, dissipated_energy=sim.dissipated,
                      entropy_produced=sim.dissipated / theta,
                      balance_residual=total - sim.energy_ref - supplied + sim.dissipated)
        return report

    def _publish_energy(self) -> None:
        if self.pub_energy is None or not self.pub_energy.get_subscription_count():
            return
        r = self.energy_report()
        m = self._energy_msg
        cv.set_stamp(m.header, self.stamp())
        m.environment_temperature = r["temperature"]
        m.storage_names = list(r["storages"])
        m.storage_energy = [float(x) for x in r["storages"].values()]
        m.port_names = list(r["ports"])
        m.port_power = [float(x) for x in r["ports"].values()]
        m.dissipator_names = list(r["dissipators"])
        m.dissipated_power = [float(x) for x in r["dissipators"].values()]
        for key in ("total_energy", "supplied_energy", "dissipated_energy", "entropy_production",
                    "entropy_produced", "balance_residual"):
            setattr(m, key, float(r[key]))
        self.pub_energy.publish(m)

    def _publish_diagnostics(self) -> None:
        self._last_diag_wall = time.monotonic()
        if not self.pub_diag.get_subscription_count():
            return
        sim = self.sim
        values = sim.diagnostics()
        paused = sim.paused or self._stepping  # the steps of a ~/step call do not resume the simulation
        values["paused"] = paused
        counts = dict(self._counts)
        values.update(counts)
        lim = sim.limits
        values.update(max_force=lim.max_force, max_torque=lim.max_torque,
                      max_effort=" ".join(repr(float(x)) for x in lim.max_effort),
                      max_angular_rate=sim.max_angular_rate, omega_gravity=self._rate.omega_gravity,
                      omega_effort=self._rate.omega_effort)
        # what is new since the last report: rejected inputs, saturated commands, callback errors
        now = {k: v for k, v in counts.items() if not k.startswith("received_")}
        now.update(saturated_wrench_commands=sim.saturated["wrench"], saturated_effort_commands=sim.saturated["joints"])
        if self.nt:
            now.update(saturated_thrust_commands=sim.saturated["thrusters"])
            values.update(saturated_thrust_commands=sim.saturated["thrusters"])
        new = {k: v - self._reported.get(k, 0) for k, v in now.items() if v - self._reported.get(k, 0) > 0}
        self._reported = now
        if sim.fault is not None:
            f = sim.fault
            level = DiagnosticStatus.ERROR
            message = (f"halted at t = {f.stamp_ns * 1e-9:.9f} s (step {f.k}, {f.kind}): {f.reason}; the state at "
                       "that time is kept; call ~/reset")
        else:
            level = DiagnosticStatus.WARN if new else DiagnosticStatus.OK
            message = "paused" if paused else "running"
            if new:
                message += " (since the last report: " + ", ".join(f"{k} +{v}" for k, v in sorted(new.items())) + ")"
        status = DiagnosticStatus(
            level=level,
            name=f"{self.get_fully_qualified_name()}: " + ("multibody" if self.multibody else "rigid body"),
            message=message,
            hardware_id=self.base_frame,
            values=cv.key_values(values),
        )
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = cv.time_from_ns(self.stamp())
        self.pub_diag.publish(msg)

    # ------------------------------------------------------------------------------- input

    def _stamp_error(self, stamp) -> Optional[str]:
        """Why a ``header.stamp`` is not a time (None when it is one)."""
        if stamp.sec < 0 or stamp.nanosec >= 1_000_000_000:
            return f"invalid header.stamp (sec {stamp.sec}, nanosec {stamp.nanosec}: needs sec >= 0, nanosec < 1e9)"
        return None

    def _saturation_warning(self, channel: str, before: int) -> None:
        if self.sim.saturated[channel] > before:
            self._warn(f"saturated_{channel}",
                       f"{ {'wrench': 'cmd_wrench', 'joints': 'joint effort command'}.get(channel, 'thrust command')} "
                       f"saturated ({self._limits_text()}): "
                       f"{self.sim.saturated[channel]} saturated since start-up")

    def _on_cmd_wrench(self, msg: WrenchStamped) -> None:
        self._counts["received_cmd_wrench"] += 1
        W = cv.wrench_from_msg(msg.wrench)
        frame_id = msg.header.frame_id
        if self.model.group is None:
            self._reject("cmd_wrench", "fixed", "the base is fixed (base_group fixed) and takes no wrench; drive "
                         "the joints with cmd_joint_effort or joint_command")
            return
        error = self._stamp_error(msg.header.stamp)
        if error:
            self._reject("cmd_wrench", "stamp", error)
            return
        if self.lockstep and not self._lockstep_stamp_ok("cmd_wrench", cv.ns_from_time(msg.header.stamp)):
            return
        if not np.all(np.isfinite(W)):
            self._reject("cmd_wrench", "nonfinite", f"non-finite (NaN/inf) components {W.tolist()}")
            return
        if frame_id in self._body_frames:
            frame = "body"
        elif frame_id in self._world_frames:
            frame = "world"
        else:
            self._reject("cmd_wrench", "frame", f"unknown frame_id {frame_id[:100]!r} (use '', {self.base_frame!r} "
                         f"or {self.world_frame!r})")
            return
        before = self.sim.saturated["wrench"]
        cmd, dropped = self.sim.wrench_command(W, frame)
        self._saturation_warning("wrench", before)
        if np.any(dropped):
            self._warn("cmd_wrench:dropped",
                       f"cmd_wrench: a {self.settings.base_group} {'base' if self.multibody else 'body'} cannot take "
                       f"the components {np.round(dropped, 12).tolist()} (body frame [F; tau]); dropped them, "
                       "applying the rest")
        if self.lockstep:
            self._lockstep_take("cmd_wrench", cmd)
        else:
            self.sim.set_wrench(cmd)

    def _on_cmd_joint_effort(self, msg: Float64MultiArray) -> None:
        self._counts["received_cmd_joint_effort"] += 1
        if self.lockstep:
            self._logs.info_once(
                "lockstep_cmd_joint_effort",
                "lockstep: cmd_joint_effort is ignored (it carries no stamp); joint efforts come from joint_command "
                "(sensor_msgs/JointState, efforts by name, stamped with the state they answer)")
            return
        data = np.asarray(msg.data, dtype=float)
        if data.shape != (self.nj,):
            self._reject("cmd_joint_effort", "length", f"{data.size} values, expected {self.nj} (one per joint, in "
                         f"the order {', '.join(self.model.joint_names)})")
            return
        if not np.all(np.isfinite(data)):
            self._reject("cmd_joint_effort", "nonfinite", f"non-finite (NaN/inf) entries {data.tolist()}")
            return
        before = self.sim.saturated["joints"]
        self.sim.set_joint_efforts(data)
        self._saturation_warning("joints", before)

    def _on_cmd_thrust(self, msg: Float64MultiArray) -> None:
        self._counts["received_cmd_thrust"] += 1
        if self.lockstep:
            self._logs.info("cmd_thrust_lockstep",
                            "lockstep: cmd_thrust carries no stamp and is ignored; send thruster_command")
            return
        data = np.asarray(msg.data, dtype=float)
        if data.size != self.nt:
            self._reject("cmd_thrust", "length", f"{data.size} values, expected {self.nt} (one per thruster, in "
                         f"{', '.join(self.model.thruster_names)} order)")
            return
        if not np.all(np.isfinite(data)):
            self._reject("cmd_thrust", "nonfinite", f"non-finite (NaN/inf) thrusts {data.tolist()}")
            return
        before = self.sim.saturated["thrusters"]
        self.sim.set_thrusts(data)
        self._saturation_warning("thrusters", before)

    def _named_values(self, topic: str, msg: JointState, index: Dict[str, int], what: str, unit: str = ""):
        """The ``effort`` of a stamped JointState command by ``name`` as an array in ``index`` order (names not
        given: 0), or None when it is rejected (stamp, lockstep period, names, non-finite values; reasons logged)."""
        self._counts[f"received_{topic}"] += 1
        error = self._stamp_error(msg.header.stamp)
        if error:
            self._reject(topic, "stamp", error)
            return None
        if self.lockstep and not self._lockstep_stamp_ok(topic, cv.ns_from_time(msg.header.stamp)):
            return None
        names = list(msg.name)
        unknown = [n for n in names if n not in index]
        if not names or len(msg.effort) != len(names) or unknown or len(set(names)) != len(names):
            self._reject(topic, "names",
                         f"needs one effort{unit} per name, names distinct and among {', '.join(index)} "
                         f"(got {len(names)} names, {len(msg.effort)} efforts"
                         + (f", unknown {[u[:100] for u in unknown[:5]]}" if unknown else "") + ")")
            return None
        values = np.asarray(msg.effort, dtype=float)
        if not np.all(np.isfinite(values)):
            self._reject(topic, "nonfinite", f"non-finite (NaN/inf) {what} {values.tolist()}")
            return None
        data = np.zeros(len(index))
        data[[index[n] for n in names]] = values
        return data

    def _on_thruster_command(self, msg: JointState) -> None:
        data = self._named_values("thruster_command", msg, self._thruster_index, "thrusts", " (thrust, N)")
        if data is None:
            return
        before = self.sim.saturated["thrusters"]
        if self.lockstep:
            self._lockstep_take("thruster_command", data)
        else:
            self.sim.set_thrusts(data)
        self._saturation_warning("thrusters", before)

    def _on_joint_command(self, msg: JointState) -> None:
        data = self._named_values("joint_command", msg, self._joint_index, "efforts")  # joints not named: zero
        if data is None:
            return
        before = self.sim.saturated["joints"]
        if self.lockstep:
            self._lockstep_take("joint_command", data)
        else:
            self.sim.set_joint_efforts(data)
        self._saturation_warning("joints", before)

    # ---------------------------------------------------------------------------- services

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            q0, v0 = initial_state(self.model, self.settings)
        except ParameterError as e:  # pragma: no cover - validated when set
            response.success, response.message = False, str(e)
            return response
        # The initial state becomes the state of the next step: stamps never repeat or go back. The commands
        # are cleared (the zero wrench is announced on `wrench` by the next step if it differs).
        fault = self.sim.fault
        self.sim.reset(q0, v0)
        self._anchor()
        self._markers_delete_all = True
        self._publish_state(everything=True)
        self._publish_diagnostics()
        response.success = True
        response.message = f"reset to the initial state at t = {self.stamp() * 1e-9:.9f} s" + (
            f" (the fault at t = {fault.stamp_ns * 1e-9:.9f} s cleared"
            + (", still paused: ~/pause false resumes)" if self.sim.paused else ", running)") if fault else "")
        self.get_logger().info(response.message)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        sim = self.sim
        if request.data and not sim.paused:
            sim.pause(True)
            if self._last_published_k != sim.k:
                self._publish_state(everything=True)
                self._publish_applied()
            self._publish_diagnostics()
            self._graph_counts = self._graph_counts_now()  # those matched later get the state again
            response.message = f"paused at t = {self.stamp() * 1e-9:.9f} s"
        elif not request.data and sim.fault is not None:
            sim.pause(False)  # the pause asked for ends; the fault holds until a reset
            f = sim.fault
            response.success = False
            response.message = (f"halted by a fault at t = {f.stamp_ns * 1e-9:.9f} s ({f.reason}); call ~/reset to "
                                "resume from the initial state")
            self.get_logger().warning(response.message)
            return response
        elif not request.data and sim.paused:
            sim.pause(False)
            self._anchor()
            response.message = f"resumed at t = {self.stamp() * 1e-9:.9f} s"
            if self.lockstep:
                self._try_period()  # the commands may all be here already
        else:
            response.message = "already " + ("paused" if sim.paused else "running")
        response.success = True
        self.get_logger().info(response.message)
        return response

    def _on_step(self, request, response):
        """``~/step`` (mbs_ros_msgs/Step): ``request.steps`` physics steps of a paused simulation (lockstep: one
        control period whose commands have arrived); see the module docstring, "Services"."""
        sim = self.sim
        n = int(request.steps)
        k0 = sim.k
        why = None
        if sim.fault is not None:
            f = sim.fault
            why = f"halted by a fault at t = {f.stamp_ns * 1e-9:.9f} s ({f.reason}); call ~/reset"
        elif not sim.paused:
            why = "not paused: ~/step advances a paused simulation (~/pause true first, or start_paused)"
        elif self.lockstep and n not in (0, sim.lockstep_steps):
            why = (f"lockstep: one control period at a time, steps {sim.lockstep_steps} (physics_rate / control_rate) "
                   f"or 0, not {n}: the next period needs the controller's answer to the state this one publishes")
        elif self.lockstep and n and not sim.period_complete():
            why = (f"lockstep: the period at t = {self.stamp() * 1e-9:.9f} s still waits for "
                   f"{' and '.join(_TOPIC[ch] for ch in sim.missing())} stamped with it; call again once the "
                   "controller has answered that state")
        elif n > MAX_STEP_REQUEST:
            why = f"{n} steps: at most {MAX_STEP_REQUEST} per request (they are taken inside the service call)"
        if why is None and n:
            sim.pause(False)
            self._stepping = True
            try:
                if self.lockstep:
                    self._take_period()
                else:
                    self.advance(n)
            finally:
                sim.pause(True)
                self._stepping = False
            if self._last_published_k != sim.k:  # as a pause: the state it stopped at
                self._publish_state(everything=True)
                self._publish_applied()
            self._publish_diagnostics()
        taken = sim.k - k0
        response.sim_time = cv.time_from_ns(self.stamp())
        response.step_index = sim.k
        if why is None and sim.fault is not None:
            f = sim.fault
            why = (f"halted by a fault after {taken} of {n} steps, at t = {f.stamp_ns * 1e-9:.9f} s ({f.reason}); "
                   "call ~/reset")
        response.success = why is None
        response.message = why or f"{taken} steps to t = {self.stamp() * 1e-9:.9f} s (step {sim.k})"
        self.get_logger().debug(f"~/step: {response.message}")
        return response

    # -------------------------------------------------------------------------- parameters

    def _on_set_parameters(self, params) -> SetParametersResult:
        values = {f: getattr(self.settings, f) for f in PARAMETERS}
        changed = set()
        for p in params:
            if p.name in PARAMETERS:
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
            check_runtime_change(self.settings, s, changed)
            model = build_model(s, self.source) if changed & set(_INERTIAL) else self.model
            q0, _v0 = initial_state(model, s)  # the initial pose/twist/joints must stay valid
            limits = command_limits(model, s)
            rate = self._rate
            if changed & {"integrator", "gravity", "mass", "inertia", "com", "max_wrench", "max_effort"}:
                rate = check_rate(model, s, q0, limits)
        except ParameterError as e:
            self.get_logger().warning(f"parameter change refused: {e}")
            return SetParametersResult(successful=False, reason=str(e))
        old = self.settings
        self.settings = s
        self._set_rates(s)
        self.sim.integrator = s.integrator
        if changed & {"max_wrench", "max_effort"}:
            self.sim.set_limits((limits.max_force, limits.max_torque), limits.max_effort)
            self.get_logger().info("command limits: " + self._limits_text())
        if rate is not self._rate:
            self._rate = rate
            if rate.warning:
                self.get_logger().warning(rate.warning)
        if s.real_time_factor != old.real_time_factor:
            self._anchor()
            self._make_timer()
        if model is not self.model:
            self.sim.set_model(model)  # same state, new inertia: new energy/momentum reference
            if not self.multibody:
                self._warn_inertia(s)
                self._setup_markers()  # the equivalent-inertia box changes with the inertia
        elif changed & {"current", "current_rate"}:  # the water changes, the references stay (a port of the balance)
            self.sim.set_current(s.current, s.current_rate)
        self.get_logger().info("parameters changed: " + ", ".join(sorted(changed)))
        return SetParametersResult(successful=True)


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    return run_node(DynamicsNode, args, make_executor=settings_executor)


if __name__ == "__main__":
    sys.exit(main())
