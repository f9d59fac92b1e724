"""Controller node: tracks base and joint references on the model of ``dynamics_node`` with the control laws of
:mod:`mbs_ros.controllers` (computed torque, Slotine–Li passivity-based, PD + gravity), and serves
``~/follow_joint_trajectory`` as ros2_controllers' joint_trajectory_controller does.

The node only turns messages into calls of ROS-free modules and back: states are checked and paired
(:mod:`mbs_ros.controllers.reference_input`, :mod:`mbs_ros.controllers.timebase`), references decoded
(:mod:`~mbs_ros.controllers.reference_input`), goals checked and monitored (:mod:`mbs_ros.controllers.goals`),
commands saturated and allocated (:mod:`mbs_ros.controllers.command`); its settings are
:mod:`mbs_ros.nodes.controller_settings`. Parameters, topics, the action, the input bounds and the time base are
described in docs/controller_node.md.

Run: ``ros2 run mbs_ros controller_node --ros-args -r __ns:=/uvms --params-file config/uvms_6dof.yaml`` or, without
a ROS install, ``python -m mbs_ros.nodes.controller_node`` with the same arguments.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
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

from mbs_ros.controllers import Reference, goals
from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers import timebase as tb
from mbs_ros.controllers import tolerances as tolerances_
from mbs_ros.controllers.allocation import for_model as allocation_for_model
from mbs_ros.controllers.command import CommandOutput
from mbs_ros.controllers.goals import FEEDBACK_PERIOD_S
from mbs_ros.controllers.reference_input import (JOINT_LIMIT_MARGIN, MAX_ACCELERATION, MAX_DURATION,
                                                 MAX_JOINT_REFERENCE, MAX_POINTS, MAX_POSITION, MAX_STATE_VELOCITY,
                                                 MAX_VELOCITY, MIN_SEGMENT, QUATERNION_NORM, Rejected,
                                                 reference_position_bounds)
from mbs_ros.controllers.timebase import JUMP_CONFIRMATIONS
from mbs_ros.dynamics import actuators
from mbs_ros.dynamics import model_source as ms
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.controller_settings import (DEFAULTS, ControllerSettings, ParameterError, base_link, build_model,
                                               command_limits, field_name, layout_description, make_law,
                                               settings_from_values)
from mbs_ros.nodes.parameters.controller import PARAMETERS
from mbs_ros.nodes.ratelimit import RateLimitedLog
from mbs_ros.nodes.runtime import descriptor, run_node, settings_executor

WARN_THROTTLE_S = 2.0
REFERENCE_QUEUE = 32  # references waiting for the worker thread; beyond, the oldest waiting one is dropped
DIAGNOSTICS_PERIOD_S = 1.0
REFERENCE_TOPICS = ("joint_reference", "base_reference")
_NS = ri.NS
_FJT = FollowJointTrajectory.Result

__all__ = ["ControllerNode", "ControllerSettings", "ParameterError", "settings_from_values", "make_law", "main",
           "command_limits", "reference_position_bounds", "build_model", "layout_description", "DEFAULTS",
           "MAX_POSITION", "MAX_STATE_VELOCITY", "QUATERNION_NORM", "MAX_POINTS", "MAX_DURATION", "MIN_SEGMENT",
           "MAX_VELOCITY", "MAX_ACCELERATION", "MAX_JOINT_REFERENCE", "JOINT_LIMIT_MARGIN", "JUMP_CONFIRMATIONS",
           "FEEDBACK_PERIOD_S"]


@dataclass
class _ActiveGoal:
    """A FollowJointTrajectory goal: its reference (start in reference time, as ``joint_ref``), its monitor and
    the future its execute callback awaits: ``(outcome, Result)`` with outcome ``succeed``, ``abort`` or
    ``canceled``."""

    goal_id: bytes
    handle: object
    start: int
    ref: Optional[Reference]
    monitor: Optional[goals.GoalMonitor]
    future: Future


def _stamp_ns(stamp, what: str) -> int:
    return ri.stamp_ns(stamp.sec, stamp.nanosec, what)


def _times(points) -> np.ndarray:
    return ri.point_times([p.time_from_start.sec for p in points], [p.time_from_start.nanosec for p in points])


def _floats(x) -> list:
    return [float(v) for v in x]


def _duration(ns: int) -> Duration:
    sec, nanosec = divmod(int(ns), _NS)
    return Duration(sec=sec, nanosec=nanosec)


class ControllerNode(Node):
    """See docs/controller_node.md. Construct, then call :meth:`configure` (raises ParameterError)."""

    def __init__(self, node_name: str = "controller_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._worker: Optional[threading.Thread] = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------------------- set-up

    def _declare(self, name, default):
        default = list(default) if isinstance(default, tuple) else default
        try:
            return self.declare_parameter(name, default, descriptor(PARAMETERS[name], default)).value
        except Exception as e:  # noqa: BLE001 - rclpy's exceptions differ between distros
            raise ParameterError(str(e) if name in str(e) else f"{name}: {e}") from None

    def _declare_parameters(self) -> Tuple[Dict[str, object], ms.Source]:
        """Declare every parameter of the table; a robot model first, as it gives some defaults."""
        values = {n: self._declare(n, PARAMETERS[n].default) for n in ("robot_description", "model_file")}
        for name, v in values.items():
            if not isinstance(v, str):
                raise ParameterError(f"{name} must be a string, got {v!r}")
        source = ms.load_source(values["robot_description"], values["model_file"])
        defaults = {}
        if source.multibody:
            defaults = dict(base_group=ms.default_base(source), gravity=ms.default_gravity(source),
                            base_frame=base_link(source))
        for name in PARAMETERS:
            if name not in values:
                values[name] = self._declare(name, defaults.get(name, getattr(DEFAULTS, field_name(name))))
        unknown = sorted(n for n in (getattr(self, "_parameter_overrides", {}) or {})
                         if n not in PARAMETERS and n != "use_sim_time" and not n.startswith("qos_overrides."))
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))
        return values, source

    def configure(self) -> None:
        values, source = self._declare_parameters()
        s = settings_from_values(values, source)
        model = build_model(s, source)
        law = make_law(model, s)
        max_force, max_torque, max_effort = command_limits(model, s)
        allocation = None
        if model.group is not None and model.thruster_names and s.allocate_thrusters:
            try:
                allocation = allocation_for_model(model, s.thruster_weights)
            except ValueError as e:
                raise ParameterError(str(e)) from None

        self.settings, self.source, self.model, self.law = s, source, model, law
        self.joint_names = tuple(model.joint_names)
        self.nj = len(self.joint_names)
        self.nq_base, self.nv_base = ms.base_sizes(model)
        self.floating = model.group is not None
        self.max_force, self.max_torque, self.max_effort = max_force, max_torque, max_effort
        self.allocation = allocation
        self.output = CommandOutput(model, actuators.CommandLimits(max_force, max_torque, max_effort), allocation)
        ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(ns, s.base_frame)
        lower, upper = reference_position_bounds(model)
        self.joint_input = ri.JointReferenceInput(self.joint_names, lower, upper)
        self.base_input = (ri.BaseReferenceInput(model, {s.base_frame, s.base_frame.lstrip("/"), self.base_frame},
                                                 self.base_frame) if self.floating else None)

        self.pairing = tb.StatePairing(self.floating, bool(self.nj))
        self.timebase = tb.TimeBase(int(round(s.max_time_jump * _NS)))
        self.state: Optional[Tuple[int, np.ndarray, np.ndarray]] = None  # (stamp ns, q, v)
        self._state_arrival_ns = 0  # node clock (wall, or /clock with use_sim_time) when the state arrived
        self._stopped = False
        self._last_tau_stamp = None
        self._last_tau = None
        # References: (start in reference time, Reference); reference time = stamp - timebase.offset
        self.base_ref: Optional[Tuple[int, Reference]] = None
        self.joint_ref: Optional[Tuple[int, Reference]] = None
        self._lock = threading.Lock()  # the worker's reads of (state, offset, reference) and its installs
        self._queue: deque = deque()  # (topic, serialized message) for the worker, in arrival order
        self._queue_cv = threading.Condition()
        inputs = ("odom", "joint_states", "joint_reference", "base_reference", "follow_joint_trajectory")
        self._counts = {"commands": 0, "saturated_commands": 0, **{f"received_{t}": 0 for t in inputs},
                        **{f"rejected_{t}": 0 for t in inputs}, **{f"installed_{t}": 0 for t in REFERENCE_TOPICS},
                        "dropped_references": 0, "control_errors": 0, "time_base_changes": 0, "goals_succeeded": 0,
                        "goals_aborted": 0, "goals_canceled": 0}
        self._count_lock = threading.Lock()
        self._logs = RateLimitedLog(self.get_logger(), WARN_THROTTLE_S)  # per key, free while suppressed
        self._max_bytes = {
            "joint_reference": MAX_POINTS * (32 * max(self.nj, 1) + 128) + (1 << 20),
            "base_reference": MAX_POINTS * (32 * 6 + 128) + (1 << 20),
        }
        self._create_interfaces(s)
        # the reference worker shares the interpreter with the control loop: switch threads often
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
        self._worker = threading.Thread(target=self._reference_worker, name="reference_worker", daemon=True)
        self._worker.start()
        self._log_configuration(s, source)

    def _create_interfaces(self, s: ControllerSettings) -> None:
        qos = QoSProfile(depth=10)
        state_qos = QoSProfile(depth=4)  # a controller that lags wants the newest state, not a backlog
        # as reference_node publishes: a (re)started controller still gets the reference sent before it
        ref_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        if self.allocation is not None:
            if self.allocation.missing_directions:
                rows = len(self.allocation.rows)
                self.get_logger().warning(
                    f"the {self.allocation.n} thrusters span {rows - self.allocation.missing_directions} of the "
                    f"{rows} wrench directions of the {self.model.base} base: the rest of the command is not given "
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
        self._wrap = np.array([t == "continuous" for t in self.model.joint_types], dtype=bool)
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

    def _log_configuration(self, s: ControllerSettings, source: ms.Source) -> None:
        gains = (f"kp {s.kp}, kd {s.kd}" if s.law != "passivity" else f"lambda {s.lambda_}, kd {s.kd}")
        what = source.describe() if source.multibody else f"{s.base_group} body"
        timing = ("lockstep: one command per state, stamped with it" if s.lockstep
                  else f"{s.control_rate:g} Hz, state_timeout {s.state_timeout:g} s")
        limits = []
        if self.floating:
            limits.append(f"max_wrench [{self.max_force:g} N, {self.max_torque:g} N m]")
        if self.nj:
            limits.append("max_effort [" + ", ".join(f"{x:g}" for x in self.max_effort) + "]")
        self.get_logger().info(
            f"{s.law} on {what} ({s.base_group} base, {layout_description(self.model)}), {gains}, mass_scale "
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

    def _on_odom(self, msg: Odometry) -> None:
        self._count("received_odom")
        try:
            stamp = _stamp_ns(msg.header.stamp, "header.stamp")
            p, quat = cv.pose_from_msg(msg.pose.pose)
            part = ri.base_state(p, quat, cv.twist_from_msg(msg.twist.twist))
        except Rejected as e:
            return self._reject("odom", str(e))
        if self.pairing.add("base", stamp, part):
            self._consider(stamp)

    def _on_joint_states(self, msg: JointState) -> None:
        self._count("received_joint_states")
        try:
            stamp = _stamp_ns(msg.header.stamp, "header.stamp")
            part = ri.joint_state(self.joint_names, msg.name, msg.position, msg.velocity)
        except Rejected as e:
            return self._reject("joint_states", str(e))
        if self.pairing.add("joints", stamp, part):
            self._consider(stamp)

    def _state_topic(self) -> str:
        return "odom" if self.floating else "joint_states"

    def _consider(self, t: int) -> None:
        """A complete state stamped ``t``: take it, answer a repeated one, or refuse a discontinuity."""
        step = self.timebase.step(t)
        if step.kind == tb.ACCEPT:
            return self._accept(t, step.jump)
        self.pairing.drop(t)
        if step.kind == tb.REPEAT:
            if self.settings.lockstep and self._last_tau_stamp == t:
                # lockstep: the dynamics node sent this state again (our command may have been lost)
                self._publish(t, self._last_tau, self.state[1])
            return
        last = self.timebase.last
        side = "before" if t < last else "after"
        self._reject(self._state_topic(),
                     f"state at t = {t * 1e-9:.9f} s is {abs(t - last) * 1e-9:.6g} s {side} the last one "
                     f"(t = {last * 1e-9:.9f} s; max_time_jump {self.settings.max_time_jump:g} s): taken as the new "
                     f"time base only after {JUMP_CONFIRMATIONS} consecutive states ({step.seen} so far)")
        if self.settings.lockstep:
            self._publish_zero(t)

    def _accept(self, t: int, jump: Optional[int]) -> None:
        try:
            q, v = ri.state_vector(self.model, self.nv_base, *self.pairing.get(t))
        except ValueError as e:
            self.pairing.drop(t)
            return self._reject(self._state_topic(), f"state: {e}")
        first = self.state is None
        last = self.timebase.last
        with self._lock:
            self.timebase.commit(t, jump)
            if first:  # hold the start-up state until a reference arrives
                start = t - self.timebase.offset
                if self.floating:
                    self.base_ref = (start, Reference(self.model.group, [0.0], [q[: self.nq_base]]))
                if self.nj:
                    self.joint_ref = (start, Reference(self.nj, [0.0], [self._joint_positions(q)]))
        if jump is not None:
            self._last_tau_stamp = self._last_tau = None
            self._count("time_base_changes")
            self.get_logger().warning(
                f"time base changed: the states jumped from t = {last * 1e-9:.9f} s to t = {t * 1e-9:.9f} s "
                f"({JUMP_CONFIRMATIONS} consecutive states on the new time line): references re-anchored, each "
                "continues from the point it had reached")
        self.state = (t, q, v)
        clock = self.get_clock()
        self._state_arrival_ns = clock.now().nanoseconds
        if getattr(clock, "ros_time_is_active", False):
            # /clock time: a state may arrive before the /clock message of its own stamp
            self._state_arrival_ns = max(self._state_arrival_ns, t)
        self.pairing.discard(None if jump is not None else t)
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
        t_ref = t_ns - self.timebase.offset
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
                    dropped[1].set_result(Rejected(f"dropped: {REFERENCE_QUEUE} references were waiting"))
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
                except Exception as e:  # noqa: BLE001 - Rejected, or a bug: the goal is refused either way
                    answer.set_result(e)
                continue
            try:
                self._process_reference(topic, raw)
            except Rejected as e:
                self._reject(topic, str(e))
            except Exception as e:  # noqa: BLE001 - the worker must keep running
                if not self.context.ok():
                    return
                self._count("control_errors")
                self._count(f"rejected_{topic}")
                self._warn(f"error_{topic}", f"{topic} rejected: {type(e).__name__}: {e}", error=True)

    def _process_reference(self, topic: str, raw: bytes) -> None:
        """Worker thread: decode, check and install a reference; counted in ``installed_<topic>``."""
        if len(raw) > self._max_bytes[topic]:
            raise Rejected(f"{len(raw)} bytes: larger than any valid reference of at most {MAX_POINTS} points "
                           f"({self._max_bytes[topic]} bytes); not decoded")
        msg_type = JointTrajectory if topic == "joint_reference" else MultiDOFJointTrajectory
        msg = deserialize_message(raw, msg_type)
        with self._lock:
            state, offset = self.state, self.timebase.offset
            current = self.joint_ref if topic == "joint_reference" else self.base_ref
        start_ns, start, ref = self._build_reference(topic, msg, state, offset, current)
        with self._lock:
            if topic == "joint_reference":
                self.joint_ref = (start, ref)
            else:
                self.base_ref = (start, ref)
        self._count(f"installed_{topic}")
        self.get_logger().info(f"{topic}: {len(msg.points)} points over {ref.end_time:g} s from "
                               f"t = {start_ns * 1e-9:.6f} s")

    def _build_reference(self, topic: str, msg, state, offset: int, current):
        """``(start_ns, start in reference time, Reference)`` of a decoded joint_reference (JointTrajectory, also a
        FollowJointTrajectory goal's trajectory) or base_reference message; Rejected with the reason."""
        points = msg.points
        ri.check_point_count(len(points))
        start_ns = ri.start_time(_stamp_ns(msg.header.stamp, "header.stamp"), state[0])
        start = start_ns - offset  # reference time
        times = _times(points)
        cur = self._eval(current, start)
        if topic == "joint_reference":
            ref = self.joint_input(msg.joint_names, times, [p.positions for p in points],
                                   [p.velocities for p in points], [p.accelerations for p in points], cur)
        else:
            poses, twists, accels = [], [], []
            for i, pt in enumerate(points):
                if len(pt.transforms) != 1 or len(pt.velocities) > 1 or len(pt.accelerations) > 1:
                    raise Rejected(f"point {i}: needs one transform and at most one velocity and acceleration")
                poses.append(cv.transform_from_msg(pt.transforms[0]))
                twists.append(cv.twist_from_msg(pt.velocities[0]) if pt.velocities else None)
                accels.append(cv.twist_from_msg(pt.accelerations[0]) if pt.accelerations else None)
            ref = self.base_input(msg.joint_names, times, poses, twists, accels, cur, state[1])
        ri.check_rates(ref)
        return start_ns, start, ref

    # ---------------------------------------------------------------------------- FollowJointTrajectory

    async def _on_goal(self, goal) -> GoalResponse:
        """Accept a goal that joint_trajectory_controller would accept and the joint_reference checks pass. The
        goal is checked and its reference built on the reference worker (in order with the references, never
        holding the control loop up); this coroutine waits for the answer. The reference is installed by
        :meth:`_on_goal_accepted`."""
        if self.state is None:
            self._count("received_follow_joint_trajectory")
            answer = Rejected("no state received yet")
        else:
            future = Future()
            self._enqueue("follow_joint_trajectory", (goal, future))
            answer = await future
        if isinstance(answer, _ActiveGoal):
            self._pending_goal = (goal, answer)  # _on_goal_accepted follows at once, in this same task
            return GoalResponse.ACCEPT
        self._count("rejected_follow_joint_trajectory")
        if not isinstance(answer, Rejected):
            self._count("control_errors")
            answer = f"{type(answer).__name__}: {answer}"
        self.get_logger().warning(f"follow_joint_trajectory: goal rejected: {answer}")
        return GoalResponse.REJECT

    def _prepare_goal(self, goal) -> _ActiveGoal:
        """Worker thread: a goal checked as joint_trajectory_controller does (:mod:`mbs_ros.controllers.goals`),
        its trajectory as joint_reference's, and its tolerances; Rejected with the reason."""
        traj = goal.trajectory
        with self._lock:
            state, offset, current = self.state, self.timebase.offset, self.joint_ref
        multi_dof = bool(goal.multi_dof_trajectory.joint_names or goal.multi_dof_trajectory.points)
        goals.check_goal(traj.joint_names, self.joint_names, self.settings.allow_partial_joints_goal,
                         len(traj.points), traj.points[-1].velocities if traj.points else (), multi_dof)
        start_ns, start, ref = self._build_reference("joint_reference", traj, state, offset, current)
        goals.check_goal_end(bool(_stamp_ns(traj.header.stamp, "header.stamp")), start_ns, ref.end_time, state[0])
        tolerances, problem = tolerances_.from_goal(
            self._default_tolerances, self.joint_names,
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.path_tolerance],
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.goal_tolerance],
            goal.goal_time_tolerance.sec + goal.goal_time_tolerance.nanosec * 1e-9)
        if problem:
            self.get_logger().warning(f"follow_joint_trajectory: {problem}: the goal runs with the default "
                                      "tolerances (as in joint_trajectory_controller)")
        monitor = goals.GoalMonitor(tolerances, ref.end_time, _times(traj.points), self._wrap, self.joint_names)
        return _ActiveGoal(b"", None, start, ref, monitor, Future())

    def _on_goal_accepted(self, goal_handle) -> None:
        """Executor thread, right after :meth:`_on_goal` accepted: preempt the running goal (aborted with
        INVALID_GOAL, as joint_trajectory_controller does) and install the new one's reference."""
        pending, self._pending_goal = self._pending_goal, None
        goal_handle.execute()
        g = pending[1] if pending is not None and pending[0] is goal_handle.request else None
        if g is None:  # not the goal _on_goal prepared (rclpy calls the two in a row): refuse it
            g = _ActiveGoal(bytes(goal_handle.goal_id.uuid), goal_handle, 0, None, None, Future())
            g.future.set_result(("abort", _FJT(error_code=_FJT.INVALID_GOAL, error_string="goal not checked")))
            self._executing[g.goal_id] = g
            return
        g.goal_id, g.handle = bytes(goal_handle.goal_id.uuid), goal_handle
        self._executing[g.goal_id] = g
        with self._lock:
            old, self._goal = self._goal, g
            self.joint_ref = (g.start, g.ref)
        if old is not None:
            self._finish(old, "abort", _FJT.INVALID_GOAL, goals.PREEMPTED)
        self.get_logger().info(f"follow_joint_trajectory: goal accepted: {len(g.monitor.times)} points over "
                               f"{g.ref.end_time:g} s from t = {(g.start + self.timebase.offset) * 1e-9:.6f} s")

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
            self.joint_ref = (t - self.timebase.offset, Reference(self.nj, [0.0], [self._joint_positions(q)]))
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
        """A new state at ``t``: check the running goal (:class:`mbs_ros.controllers.goals.GoalMonitor`), publish
        its feedback when due and end it when it succeeded or failed."""
        g = self._goal
        if self.joint_ref is None or self.joint_ref[1] is not g.ref:
            return self._finish(g, "abort", _FJT.INVALID_GOAL, "the trajectory was replaced by a joint_reference "
                                                               "message")
        t_rel = (t - self.timebase.offset - g.start) * 1e-9
        q_d, v_d, a_d = g.ref(t_rel)
        actual, velocity = self._joint_positions(q), v[self.nv_base:]
        sample = g.monitor(t, t_rel, q_d, v_d, actual, velocity, time.monotonic())
        if sample.feedback:
            since = _duration(t - self.timebase.offset - g.start)
            fb = FollowJointTrajectory.Feedback(joint_names=list(self.joint_names), index=sample.index)
            fb.header.stamp = cv.time_from_ns(t)
            fb.desired = JointTrajectoryPoint(positions=_floats(q_d), velocities=_floats(v_d),
                                              accelerations=_floats(a_d), time_from_start=since)
            fb.actual = JointTrajectoryPoint(positions=_floats(actual), velocities=_floats(velocity),
                                             time_from_start=since)
            fb.error = JointTrajectoryPoint(positions=_floats(sample.e_pos), velocities=_floats(sample.e_vel),
                                            time_from_start=since)
            try:
                g.handle.publish_feedback(fb)
            except Exception as e:  # noqa: BLE001 - a goal that just ended
                self._warn("error_feedback", f"follow_joint_trajectory: feedback not published: {e}")
        if sample.outcome is not None:
            outcome, code, text = sample.outcome
            if sample.hold:
                self._hold()
            self._finish(g, outcome, getattr(_FJT, code), text)

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
                passive = self.model.passive
                if self.settings.compensate_passive and passive is not None and passive.active:
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

    def _publish(self, stamp: int, tau: np.ndarray, q: Optional[np.ndarray]) -> None:
        cmd = self.output(tau, q)
        self._count("commands")
        if cmd.saturated:
            self._count("saturated_commands")
            self._warn("saturated", "command saturated (max_wrench "
                       f"[{self.max_force:g} N, {self.max_torque:g} N m], max_effort "
                       f"[{', '.join(f'{x:g}' for x in self.max_effort)}]): {self._counts['saturated_commands']} "
                       f"saturated commands of {self._counts['commands']}")
        if self.pub_wrench is not None:
            self.pub_wrench.publish(cv.wrench_stamped_msg(stamp, self.base_frame, cmd.wrench))
        if self.allocation is not None:
            thrust = _floats(cmd.thrust)
            self.pub_thruster_command.publish(cv.joint_state_msg(stamp, list(self.model.thruster_names),
                                                                 effort=thrust))
            self.pub_thrust.publish(Float64MultiArray(data=thrust))
        if self.pub_effort is not None:
            values = _floats(cmd.effort)
            self.pub_joint_command.publish(cv.joint_state_msg(stamp, self.joint_names, effort=values))
            self.pub_effort.publish(Float64MultiArray(data=values))


def main(args=None) -> int:
    return run_node(ControllerNode, args, make_executor=settings_executor)


if __name__ == "__main__":
    sys.exit(main())
