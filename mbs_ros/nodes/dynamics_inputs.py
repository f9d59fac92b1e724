"""The dynamics node's command inputs (:class:`CommandInputs`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`): cmd_wrench, cmd_joint_effort, joint_command, cmd_thrust and
thruster_command, each message turned into one call of the ROS-free
:class:`~mbs_ros.nodes.command_core.CommandIntake` (stamp, lockstep period, frame, length, names, finite values);
an accepted command goes to the simulator (``set_wrench``, ``set_joint_efforts``, ``set_thrusts``, or ``submit``
in lockstep), a rejected one is counted and warned about, throttled."""
from __future__ import annotations

import time

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.command_core import Accepted, CommandIntake
from mbs_ros.nodes.pacing import WARN_THROTTLE_S

__all__ = ["CommandInputs"]

#: the simulator's channel -> what its saturation warning calls it
_SATURATED = {"wrench": "cmd_wrench", "joints": "joint effort command", "thrusters": "thrust command"}


class CommandInputs:
    """Needs, from the node: ``sim``, ``model``, ``settings``, ``lockstep``, ``multibody``, ``nj``, ``nt``, the
    frames (``_body_frames``, ``_world_frames``, ``base_frame``, ``world_frame``), ``_counts``, ``_guard``,
    ``_reject``, ``_warn``, ``_logs``, ``_limits_text`` and the lockstep part's ``_lockstep_take``."""

    def _create_inputs(self) -> None:
        """The command subscriptions: cmd_wrench always; joint and thruster commands when the model has them."""
        qos = QoSProfile(depth=10)
        self.sub_cmd = self.create_subscription(WrenchStamped, "cmd_wrench",
                                                self._guard(self._on_cmd_wrench, "cmd_wrench"), qos)
        self.sub_joint_command = None
        self.sub_thruster_command = None
        if self.nt:
            self.sub_thrust = self.create_subscription(
                Float64MultiArray, "cmd_thrust", self._guard(self._on_cmd_thrust, "cmd_thrust"), qos)
            self.sub_thruster_command = self.create_subscription(
                JointState, "thruster_command", self._guard(self._on_thruster_command, "thruster_command"), qos)
        if self.nj:
            self.sub_effort = self.create_subscription(
                Float64MultiArray, "cmd_joint_effort", self._guard(self._on_cmd_joint_effort, "cmd_joint_effort"),
                qos)
            self.sub_joint_command = self.create_subscription(
                JointState, "joint_command", self._guard(self._on_joint_command, "joint_command"), qos)

    @property
    def intake(self) -> CommandIntake:
        """The command checks of the current simulator (built on first use, again after ``sim`` is replaced)."""
        intake = getattr(self, "_intake", None)
        if intake is None or intake.sim is not self.sim:
            intake = self._intake = CommandIntake(self.sim, lockstep=self.lockstep, body_frames=self._body_frames,
                                                  world_frames=self._world_frames, base_frame=self.base_frame,
                                                  world_frame=self.world_frame)
        return intake

    def _saturation_warning(self, channel: str, before: int) -> None:
        if self.sim.saturated[channel] > before:
            self._warn(f"saturated_{channel}", f"{_SATURATED[channel]} saturated ({self._limits_text()}): "
                       f"{self.sim.saturated[channel]} saturated since start-up")

    def _accepted(self, result) -> bool:
        """Was the command accepted? A rejection is logged: counted and warned about (throttled per topic and
        kind), or, in lockstep, an answer to another period logged apart without a count."""
        if result.period_checked if not isinstance(result, Accepted) else self.lockstep:
            self._last_input_wall = time.monotonic()  # the waiting watch: a command came
        if isinstance(result, Accepted):
            return True
        topic = result.topic
        if result.kind == "stale":
            self.get_logger().debug(result.reason, throttle_duration_sec=WARN_THROTTLE_S)
        elif result.kind == "late":
            self._warn(f"lockstep_late_{topic}", result.reason)
        else:
            self._reject(topic, result.kind, result.reason)
        return False

    def _take(self, result, before: int) -> None:
        """An accepted joint or thruster command: submitted (lockstep) or held from the next step."""
        if self.lockstep:
            self._lockstep_take(result.topic, result.value)
        elif result.channel == "joints":
            self.sim.set_joint_efforts(result.value)
        else:
            self.sim.set_thrusts(result.value)
        self._saturation_warning(result.channel, before)

    def _on_cmd_wrench(self, msg: WrenchStamped) -> None:
        self._counts["received_cmd_wrench"] += 1
        before = self.sim.saturated["wrench"]
        stamp = msg.header.stamp
        result = self.intake.wrench(cv.wrench_from_msg(msg.wrench), msg.header.frame_id, stamp.sec, stamp.nanosec)
        if not self._accepted(result):
            return
        self._saturation_warning("wrench", before)
        if np.any(result.dropped):
            self._warn("cmd_wrench:dropped",
                       f"cmd_wrench: a {self.settings.base_group} {'base' if self.multibody else 'body'} cannot take "
                       f"the components {np.round(result.dropped, 12).tolist()} (body frame [F; tau]); dropped them, "
                       "applying the rest")
        if self.lockstep:
            self._lockstep_take("cmd_wrench", result.value)
        else:
            self.sim.set_wrench(result.value)

    def _unstamped(self, topic: str, msg: Float64MultiArray) -> None:
        """cmd_joint_effort, cmd_thrust: ignored in lockstep (no stamp), else checked and held."""
        self._counts[f"received_{topic}"] += 1
        if self.lockstep:
            if topic == "cmd_thrust":
                self._logs.info("cmd_thrust_lockstep",
                                "lockstep: cmd_thrust carries no stamp and is ignored; send thruster_command")
            else:
                self._logs.info_once(
                    "lockstep_cmd_joint_effort",
                    "lockstep: cmd_joint_effort is ignored (it carries no stamp); joint efforts come from "
                    "joint_command (sensor_msgs/JointState, efforts by name, stamped with the state they answer)")
            return
        result = self.intake.values(topic, msg.data)
        if self._accepted(result):
            self._take(result, self.sim.saturated[result.channel])

    def _on_cmd_joint_effort(self, msg: Float64MultiArray) -> None:
        self._unstamped("cmd_joint_effort", msg)

    def _on_cmd_thrust(self, msg: Float64MultiArray) -> None:
        self._unstamped("cmd_thrust", msg)

    def _named(self, topic: str, msg: JointState) -> None:
        """joint_command, thruster_command: efforts by name, stamped; joints or thrusters not named: zero."""
        self._counts[f"received_{topic}"] += 1
        stamp = msg.header.stamp
        result = self.intake.named(topic, msg.name, msg.effort, stamp.sec, stamp.nanosec)
        if self._accepted(result):
            self._take(result, self.sim.saturated[result.channel])

    def _on_thruster_command(self, msg: JointState) -> None:
        self._named("thruster_command", msg)

    def _on_joint_command(self, msg: JointState) -> None:
        self._named("joint_command", msg)
