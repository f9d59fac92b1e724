"""The controller node's outputs (:class:`CommandPublishing`, a part of
:class:`~mbs_ros.nodes.controller_node.ControllerNode`): a generalised force, saturated and allocated by
:class:`mbs_ros.controllers.command.CommandOutput`, published as cmd_wrench (or thruster_command with thruster
allocation) and joint_command, stamped with the state it was computed from (with ``unstamped_commands`` also
cmd_thrust and cmd_joint_effort, the same values unstamped), each only while someone subscribes to it; and the
counters and limits on ``~/diagnostics``. Topics: docs/controller_node.md."""
from __future__ import annotations

from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from rclpy.clock import Clock, ClockType
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mbs_ros.nodes import conversions as cv

__all__ = ["CommandPublishing", "DIAGNOSTICS_PERIOD_S", "floats"]

DIAGNOSTICS_PERIOD_S = 1.0


def floats(x) -> list:
    """Python floats of an array, as message fields take them."""
    return [float(v) for v in x]


class CommandPublishing:
    """The commands of ``node`` for ``model``: ``output`` (the CommandOutput) saturates and allocates them
    (``allocation``: the thrusters', or None), published for ``joint_names`` and ``base_frame``; ``limits`` is
    ``(max_force, max_torque, max_effort)``; ``unstamped`` (the ``unstamped_commands`` parameter) also publishes
    cmd_thrust and cmd_joint_effort. ``counts`` (under ``count_lock``) and ``count(key)`` the node's counters,
    ``warn(key, text)`` its throttled warning, ``guard(fn, what)`` its callback guard; ``has_state()`` whether a
    state came. Creates the command topics (cmd_wrench or, with thruster allocation, thruster_command;
    joint_command for joints; their unstamped forms when asked) and ``~/diagnostics``."""

    def __init__(self, node, model, output, allocation, *, joint_names, base_frame: str, limits, counts: dict,
                 count_lock, count, warn, guard, has_state, unstamped: bool):
        self.node, self.model, self.output, self.allocation = node, model, output, allocation
        self.joint_names, self.nj, self.floating = joint_names, len(joint_names), model.group is not None
        self.base_frame, (self.max_force, self.max_torque, self.max_effort) = base_frame, limits
        self._counts, self._count_lock, self._count, self._warn = counts, count_lock, count, warn
        self._guard, self.has_state = guard, has_state
        qos = QoSProfile(depth=10)
        if self.allocation is not None:
            if self.allocation.missing_directions:
                rows = len(self.allocation.rows)
                node.get_logger().warning(
                    f"the {self.allocation.n} thrusters span {rows - self.allocation.missing_directions} of the "
                    f"{rows} wrench directions of the {self.model.base} base: the rest of the command is not given "
                    "(an underactuated vehicle)")
            self.pub_thruster_command = node.create_publisher(JointState, "thruster_command", qos)
            self.pub_thrust = node.create_publisher(Float64MultiArray, "cmd_thrust", qos) if unstamped else None
        self.pub_wrench = (node.create_publisher(WrenchStamped, "cmd_wrench", qos)
                           if self.floating and self.allocation is None else None)
        self.pub_joint_command = node.create_publisher(JointState, "joint_command", qos) if self.nj else None
        self.pub_effort = (node.create_publisher(Float64MultiArray, "cmd_joint_effort", qos)
                           if self.nj and unstamped else None)
        # the three as bytes written into their serialisation (conversions._templated: rclpy's bytes, less CPU)
        self._joint_command_out = cv.joint_state_out(JointState(name=list(joint_names)))
        self._effort_out, self._none = cv.float64_array_out(), np.zeros(0)
        self._wrench_out = cv.wrench_stamped_out(base_frame)
        self.pub_diagnostics = node.create_publisher(DiagnosticArray, "~/diagnostics", qos)

    def start_diagnostics(self) -> None:
        """``~/diagnostics`` once a second on the wall clock (steady: also while /clock stands still)."""
        self.diagnostics_timer = self.node.create_timer(DIAGNOSTICS_PERIOD_S,
                                                        self._guard(self.publish_diagnostics, "diagnostics"),
                                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def publish(self, stamp: int, tau: np.ndarray, q: Optional[np.ndarray]) -> None:
        cmd = self.output(tau, q)
        self._count("commands")
        if cmd.saturated:
            self._count("saturated_commands")
            self._warn("saturated", "command saturated (max_wrench "
                       f"[{self.max_force:g} N, {self.max_torque:g} N m], max_effort "
                       f"[{', '.join(f'{x:g}' for x in self.max_effort)}]): {self._counts['saturated_commands']} "
                       f"saturated commands of {self._counts['commands']}")
        # each topic only while someone subscribes to it (a publication nobody takes still costs its conversion)
        if self.pub_wrench is not None and self.pub_wrench.get_subscription_count():
            self.pub_wrench.publish(self._wrench_out(stamp, np.asarray(cmd.wrench, dtype=float)))
        if self.allocation is not None:
            thrust = floats(cmd.thrust)
            if self.pub_thruster_command.get_subscription_count():
                self.pub_thruster_command.publish(cv.joint_state_msg(stamp, list(self.model.thruster_names),
                                                                     effort=thrust))
            if self.pub_thrust is not None and self.pub_thrust.get_subscription_count():
                self.pub_thrust.publish(Float64MultiArray(data=thrust))
        if self.pub_joint_command is not None:
            values = np.asarray(cmd.effort, dtype=float)
            if self.pub_joint_command.get_subscription_count():
                self.pub_joint_command.publish(self._joint_command_out(stamp, self._none, self._none, values))
            if self.pub_effort is not None and self.pub_effort.get_subscription_count():
                self.pub_effort.publish(self._effort_out(values))

    def publish_zero(self, stamp: int) -> None:
        try:
            self.publish(stamp, np.zeros(self.model.nv), None)
        except Exception as e:  # noqa: BLE001
            self._warn("error_zero", f"cannot publish a zero command: {type(e).__name__}: {e}", error=True)

    def publish_diagnostics(self) -> None:
        with self._count_lock:
            counts = dict(self._counts)
        bad = counts["control_errors"] or any(v for k, v in counts.items() if k.startswith("rejected_"))
        values = dict(counts)
        values.update(max_force=self.max_force, max_torque=self.max_torque,
                      max_effort=" ".join(repr(float(x)) for x in self.max_effort),
                      has_state=self.has_state())
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if bad or counts["saturated_commands"] else DiagnosticStatus.OK,
            name=f"{self.node.get_fully_qualified_name()}: controller",
            message=(f"{counts['commands']} commands, {counts['saturated_commands']} saturated, "
                     f"{sum(v for k, v in counts.items() if k.startswith('rejected_'))} inputs rejected, "
                     f"{counts['control_errors']} errors"),
            hardware_id=self.base_frame if self.floating else self.node.get_namespace(),
            values=cv.key_values(values))
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub_diagnostics.publish(msg)
