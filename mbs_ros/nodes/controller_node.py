"""Controller node: tracks base and joint references on the model of ``dynamics_node`` with the control laws of
:mod:`mbs_ros.controllers` (computed torque, Slotine–Li passivity-based, PD + gravity), and serves
``~/follow_joint_trajectory`` as ros2_controllers' joint_trajectory_controller does.

The node only turns messages into calls of ROS-free modules and back: states are checked and paired
(:mod:`mbs_ros.controllers.reference_input`, :mod:`mbs_ros.controllers.timebase`), references decoded
(:mod:`~mbs_ros.controllers.reference_input`), goals checked and monitored (:mod:`mbs_ros.controllers.goals`),
commands saturated and allocated (:mod:`mbs_ros.controllers.command`); its settings are
:mod:`mbs_ros.cores.controller_settings`. The message side is in parts: inputs
(:mod:`mbs_ros.nodes.controller_inputs`), the action (:mod:`mbs_ros.nodes.controller_actions`) and the outputs
(:mod:`mbs_ros.nodes.controller_publishing`). Parameters, topics, the action, the input bounds and the time base
are described in docs/controller_node.md.

Run: ``ros2 run mbs_ros controller_node --ros-args -r __ns:=/uvms --params-file config/uvms_6dof.yaml`` or, without
a ROS install, ``python -m mbs_ros.nodes.controller_node`` with the same arguments.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import Float64MultiArray

from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers import timebase as tb
from mbs_ros.controllers.goals import FEEDBACK_PERIOD_S
from mbs_ros.controllers.reference_input import (JOINT_LIMIT_MARGIN, MAX_ACCELERATION, MAX_DURATION,
                                                 MAX_JOINT_REFERENCE, MAX_POINTS, MAX_POSITION, MAX_STATE_VELOCITY,
                                                 MAX_VELOCITY, MIN_SEGMENT, QUATERNION_NORM,
                                                 reference_position_bounds)
from mbs_ros.controllers.timebase import JUMP_CONFIRMATIONS
from mbs_ros.dynamics.model import source as ms
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.controller_actions import TrajectoryActions
from mbs_ros.cores.controller import (controller_setup, desired, gripper_target, idle, law_command, law_for,
                                     with_gripper)
from mbs_ros.cores.gripper import GripperIntake, GripperOverride
from mbs_ros.nodes.controller_inputs import REFERENCE_QUEUE, REFERENCE_TOPICS, Inputs  # noqa: F401 - importable here
from mbs_ros.nodes.controller_publishing import DIAGNOSTICS_PERIOD_S, CommandPublishing  # noqa: F401 - as above
from mbs_ros.cores.controller_settings import (DEFAULTS, ControllerSettings, ParameterError, build_model,
                                               command_limits, field_name, layout_description, make_law,
                                               settings_from_values)
from mbs_ros.cores.parameters.controller import PARAMETERS
from mbs_ros.cores.ratelimit import RateLimitedLog
from mbs_ros.nodes.logger import fast_get_logger
from mbs_ros.nodes.runtime import declare_model_parameters, run_node, settings_executor, unknown_overrides

WARN_THROTTLE_S = 2.0
_NS = ri.NS

__all__ = ["ControllerNode", "ControllerSettings", "ParameterError", "settings_from_values", "make_law", "main",
           "command_limits", "reference_position_bounds", "build_model", "layout_description", "DEFAULTS",
           "MAX_POSITION", "MAX_STATE_VELOCITY", "QUATERNION_NORM", "MAX_POINTS", "MAX_DURATION", "MIN_SEGMENT",
           "MAX_VELOCITY", "MAX_ACCELERATION", "MAX_JOINT_REFERENCE", "JOINT_LIMIT_MARGIN", "JUMP_CONFIRMATIONS",
           "FEEDBACK_PERIOD_S"]


class ControllerNode(Node):
    """Construct, then call :meth:`configure` (raises ParameterError).

    This class builds the model, the law and the limits from the parameters and computes the command for each
    state (:meth:`_command`); its parts, built in :meth:`_create_interfaces` with explicit arguments and kept as
    attributes, turn messages into plain data and back: ``inputs``, the state and reference inputs and the
    reference worker (:class:`~mbs_ros.nodes.controller_inputs.Inputs`), ``actions``, the FollowJointTrajectory
    action (:class:`~mbs_ros.nodes.controller_actions.TrajectoryActions`) and ``commands``, the commands and
    diagnostics out (:class:`~mbs_ros.nodes.controller_publishing.CommandPublishing`). See
    docs/controller_node.md."""

    get_logger = fast_get_logger  # log lines at rcutils' cost (mbs_ros.nodes.logger)

    def __init__(self, node_name: str = "controller_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self.inputs = self.actions = self.commands = None  # built by configure
        self._stop = threading.Event()

    # ------------------------------------------------------------------------------- set-up

    def configure(self) -> None:
        """Declare the parameters (:data:`PARAMETERS`; a robot model first, as it gives some defaults), check
        them, build the model, law, limits and thruster allocation, create the topics, the action and the
        timers, and start the reference worker."""
        values, source = declare_model_parameters(self, PARAMETERS, lambda name: getattr(DEFAULTS, field_name(name)))
        unknown = unknown_overrides(self, PARAMETERS)
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))
        setup = controller_setup(values, source)
        s, model, law = setup.settings, setup.model, setup.law
        max_force, max_torque, max_effort, allocation = (setup.max_force, setup.max_torque, setup.max_effort,
                                                         setup.allocation)
        self.settings, self.source, self.model, self.law = s, source, model, law
        self.joint_names = tuple(model.joint_names)
        self.nj = len(self.joint_names)
        self.nq_base, self.nv_base = ms.base_sizes(model)
        self.floating = model.group is not None
        self.max_force, self.max_torque, self.max_effort = max_force, max_torque, max_effort
        self.allocation = allocation
        self.output = setup.output
        self.gripper = setup.gripper
        self.setup = setup
        ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(ns, s.base_frame)
        lower, upper = reference_position_bounds(model)
        self.joint_input = ri.JointReferenceInput(self.joint_names, lower, upper)
        self.base_input = (ri.BaseReferenceInput(model, {s.base_frame, s.base_frame.lstrip("/"), self.base_frame},
                                                 self.base_frame) if self.floating else None)

        self.pairing = tb.StatePairing(self.floating, bool(self.nj))
        self.timebase = tb.TimeBase(int(round(s.max_time_jump * _NS)))
        self._stopped = False
        self._last_tau_stamp = None
        self._answered_ns = 0  # node clock when the timer first answered the newest state
        self._last_tau = None
        self._lock = threading.Lock()  # the worker's reads of (state, offset, reference) and its installs
        inputs = ("odom", "joint_states", "joint_reference", "base_reference", "follow_joint_trajectory")
        self._counts = {"commands": 0, "saturated_commands": 0, **{f"received_{t}": 0 for t in inputs},
                        **{f"rejected_{t}": 0 for t in inputs}, **{f"installed_{t}": 0 for t in REFERENCE_TOPICS},
                        "dropped_references": 0, "control_errors": 0, "time_base_changes": 0, "goals_succeeded": 0,
                        "goals_aborted": 0, "goals_canceled": 0}
        if self.gripper is not None:
            self._counts.update(received_gripper_command=0, rejected_gripper_command=0, applied_gripper_command=0)
        self._count_lock = threading.Lock()
        self._logs = RateLimitedLog(self.get_logger(), WARN_THROTTLE_S)  # per key, free while suppressed
        self._create_interfaces(s)
        self.inputs.start_worker()
        self._log_configuration(s, source)

    def _create_interfaces(self, s: ControllerSettings) -> None:
        """The parts: the command topics and diagnostics, the inputs and the reference worker, the action."""
        count, warn, guard = self._count, self._warn, self._guard
        self.commands = CommandPublishing(
            self, self.model, self.output, self.allocation, joint_names=self.joint_names, base_frame=self.base_frame,
            limits=(self.max_force, self.max_torque, self.max_effort), counts=self._counts,
            count_lock=self._count_lock, count=count, warn=warn, guard=guard,
            has_state=lambda: self.inputs.state is not None, unstamped=s.unstamped_commands)
        self.inputs = Inputs(
            self, self.model, s, joint_input=self.joint_input, base_input=self.base_input, pairing=self.pairing,
            timebase=self.timebase, lock=self._lock, stop=self._stop, count=count, reject=self._reject, warn=warn,
            guard=guard, publish_zero=self.commands.publish_zero, resend=self._resend,
            forget_command=self._forget_command, on_state=self._on_state,
            prepare_goal=lambda goal: self.actions.prepare_goal(goal))
        self.actions = TrajectoryActions(self, self.model, s, self.inputs, lock=self._lock, count=count, warn=warn)
        # lockstep: one command per complete state, from the state callbacks; otherwise a timer on the node clock
        self.timer = None if s.lockstep else self.create_timer(1.0 / s.control_rate,
                                                               self._guard(self._on_timer, "timer"))
        self.grip_override = None
        if self.gripper is not None:
            self._create_gripper_input(s)
        self.commands.start_diagnostics()
        self.add_on_set_parameters_callback(self._on_set_parameters)

    def _create_gripper_input(self, s: ControllerSettings) -> None:
        """``gripper/command`` (Float64MultiArray ``[position]`` or ``[position, max_effort]``): checked by
        :class:`~mbs_ros.cores.gripper.GripperIntake`, applied at the next state the controller answers
        (:class:`~mbs_ros.cores.gripper.GripperOverride`: the topic takes over for good once used)."""
        lower, upper = reference_position_bounds(self.model)
        j = self.gripper[1] - self.nv_base
        lo, hi = max(float(np.max(lower[j])), -10.0), min(float(np.min(upper[j])), 10.0)
        self.grip_intake = GripperIntake(lo, hi, s.gripper_max_effort)
        self.grip_override = GripperOverride(s.gripper_speed)
        self.create_subscription(Float64MultiArray, "gripper/command",
                                 self._guard(self._on_gripper_command, "gripper_command"), QoSProfile(depth=10))

    def _on_gripper_command(self, msg) -> None:
        self._count("received_gripper_command")
        result = self.grip_intake.check(msg.data)
        if isinstance(result, str):
            return self._reject("gripper_command", result)
        self.grip_override.offer(result)

    def _log_configuration(self, s: ControllerSettings, source: ms.Source) -> None:
        if s.law == "passivity":
            gains = f"lambda {s.lambda_}, kd {s.kd}"
        elif s.law == "lqr":
            gains = f"Q ({s.lqr_q_position}, {s.lqr_q_velocity}), R {s.lqr_r}, {s.lqr_scaling}"
        else:
            gains = f"kp {s.kp}, kd {s.kd}"
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
        if self.actions is not None:
            self.actions.destroy()
        if self.inputs is not None:
            self.inputs.stop_worker()
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
                state = self.inputs.state if self.inputs is not None else None
                if what in ("timer", "odom", "joint_states") and state is not None and \
                        (what == "timer" or self.settings.lockstep):
                    self.commands.publish_zero(state[0])
            return None

        if what in ("timer", "diagnostics"):
            # a timer callback that takes no argument: rclpy's EventsExecutor passes a TimerInfo to one that
            # accepts *args
            return lambda: guarded()
        return guarded

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name == "use_sim_time":
                return SetParametersResult(
                    successful=False,
                    reason="use_sim_time is fixed at start-up: switching between the wall clock and /clock at run "
                           "time would re-time the control timer and state_timeout under a running loop; restart "
                           "the node with the other value")
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------------------- control

    def _on_state(self, t: int, q: np.ndarray, v: np.ndarray) -> None:
        """A state accepted (:class:`~mbs_ros.nodes.controller_inputs.Inputs`): the running goal checked against
        it; in lockstep, its command."""
        if self.actions.goal is not None:
            self.actions.monitor_goal(t, q, v)
        if self.settings.lockstep:
            self._command()

    def _resend(self, t: int) -> bool:
        """Lockstep: the command for the state at ``t`` again, if it was computed (the dynamics node sent that
        state again: our command may have been lost)."""
        if not (self.settings.lockstep and self._last_tau_stamp == t):
            return False
        self.commands.publish(t, self._last_tau, self.inputs.state[1])
        return True

    def _forget_command(self) -> None:
        """The time base changed: the last command answers no state of the new one."""
        self._last_tau_stamp = self._last_tau = None

    def _on_timer(self) -> None:
        state = self.inputs.state
        if state is None:
            return
        if self._last_tau_stamp != state[0]:
            # A new state is answered however late the timer gets to it (a loaded machine, a first call that
            # compiles), and goes stale only state_timeout after the answer went out: a dynamics node waiting for
            # its first command (wait_for_command) is started by the answer, and not stopped by a zero right after.
            self._stopped = False
            self._command()
            self._answered_ns = self.get_clock().now().nanoseconds
            return
        age = (self.get_clock().now().nanoseconds - max(self.inputs.state_arrival_ns, self._answered_ns)) * 1e-9
        if age > self.settings.state_timeout:
            self._warn("stale", f"state is {age:.3f} s old (state_timeout {self.settings.state_timeout:g} s): "
                                "not commanding")
            if not self._stopped:
                self._stopped = True
                self.commands.publish(state[0], np.zeros(self.model.nv), state[1])
            return
        self._stopped = False
        self._command()

    def _command(self) -> None:
        """Publish the command for the newest state (computed once per state; zero if it cannot be)."""
        t, q, v = self.inputs.state
        if self._last_tau_stamp != t:
            try:
                t_ref = t - self.timebase.offset
                grip = None
                if self.grip_override is not None:  # gripper/command, applied at this period boundary
                    applied = self.grip_override.applied
                    grip = self.grip_override.at(t_ref, gripper_target(self.settings, t_ref)[0])
                    self._count("applied_gripper_command", self.grip_override.applied - applied)
                if idle(self.settings, t_ref):  # idle_until: thrusters off, joints limp
                    tau = np.zeros(self.model.nv)
                else:
                    model, law = law_for(self.setup, t_ref, grip)
                    tau = law_command(law, model, self.settings.compensate_passive, q, v, *self._desired(t))
                    tau = with_gripper(self.settings, self.gripper, tau, q, v, t_ref, command=grip)
            except Exception as e:  # noqa: BLE001 - publish a safe command and keep running
                self._count("control_errors")
                self._warn("law", f"cannot compute the command ({type(e).__name__}: {e}): publishing zero",
                           error=True)
                tau = np.zeros(self.model.nv)
            self._last_tau_stamp, self._last_tau = t, tau
        self.commands.publish(t, self._last_tau, q)

    def _desired(self, t_ns: int):
        """``(q_d, v_d, a_d)`` in the model's layout at the state time ``t_ns``: the base from ``base_ref``, the
        joints from ``joint_ref`` (both in reference time ``t_ns - timebase.offset``)."""
        inputs = self.inputs
        return desired(self.model, inputs.base_ref if self.floating else None, inputs.joint_ref if self.nj else None,
                       t_ns - self.timebase.offset)


def main(args=None) -> int:
    return run_node(ControllerNode, args, make_executor=settings_executor)


if __name__ == "__main__":
    sys.exit(main())
