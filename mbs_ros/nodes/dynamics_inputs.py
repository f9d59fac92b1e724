"""The dynamics node's command inputs (:class:`CommandInputs`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode` built with explicit arguments): cmd_wrench, cmd_joint_effort,
joint_command, cmd_thrust and thruster_command, each message turned into one call of the ROS-free
:class:`~mbs_ros.cores.commands.CommandIntake` (stamp, lockstep period, frame, length, names, finite values);
an accepted command goes to the simulator (``set_wrench``, ``set_joint_efforts``, ``set_thrusts``, or the node's
lockstep ``take`` in lockstep), a rejected one is counted and warned about, throttled. Raw subscriptions: the fields
straight from the bytes (:func:`~mbs_ros.nodes.runtime.subscribe_fields`)."""
from __future__ import annotations

from functools import partial
from typing import Callable, Dict

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mbs_ros.nodes import conversions as cv
from mbs_ros.cores import cdr
from mbs_ros.cores.commands import UNSTAMPED_IN_LOCKSTEP, Accepted, CommandIntake
from mbs_ros.cores.pacing import WARN_THROTTLE_S
from mbs_ros.nodes.runtime import subscribe_fields

__all__ = ["CommandInputs"]

#: the simulator's channel -> what its saturation warning calls it
_SATURATED = {"wrench": "cmd_wrench", "joints": "joint effort command", "thrusters": "thrust command"}


class CommandInputs:
    """The command subscriptions of ``node`` (cmd_wrench unless ``wrench`` is False, ``base_actuated`` false; joint
    and thruster commands when the model has them), checked by ``intake``. ``counts`` the node's counters
    (``received_<topic>``); ``guard(fn, what)`` wraps a callback so that it never raises;
    ``reject(topic, kind, reason)`` counts and warns; ``warn(key, text)`` a throttled warning; ``logs`` the node's
    :class:`~mbs_ros.cores.ratelimit.RateLimitedLog`; ``limits_text()`` the command limits as a warning names them;
    ``take(topic, value)`` a lockstep command for the current period; ``on_input()`` a command reached the lockstep
    period check (the node's waiting watch); ``body`` what a dropped-component warning calls the base."""

    def __init__(self, node, intake: CommandIntake, *, counts: Dict[str, int], guard: Callable, reject: Callable,
                 warn: Callable, logs, limits_text: Callable[[], str], take: Callable, on_input: Callable[[], None],
                 body: str, wrench: bool = True):
        self.node, self.intake, self.sim = node, intake, intake.sim
        self.lockstep = intake.lockstep
        self.counts, self.reject, self.warn, self.logs = counts, reject, warn, logs
        self.limits_text, self.take, self.on_input, self.body = limits_text, take, on_input, body
        model, subscribe = self.sim.model, partial(subscribe_fields, node, QoSProfile(depth=10), guard)  # raw
        self.sub_cmd = (subscribe(WrenchStamped, "cmd_wrench", cdr.wrench_stamped, self.wrench, self.on_cmd_wrench)
                        if wrench else None)
        self.sub_joint_command = self.sub_thruster_command = None
        if model.thruster_names:
            self.sub_thrust = subscribe(Float64MultiArray, "cmd_thrust", cdr.float64_multi_array,
                                        lambda v: self._unstamped("cmd_thrust", v), self.on_cmd_thrust)
            self.sub_thruster_command = subscribe(JointState, "thruster_command", cdr.joint_state, partial(
                self._named, "thruster_command"), self.on_thruster_command)
        if model.joint_names:
            self.sub_effort = subscribe(Float64MultiArray, "cmd_joint_effort", cdr.float64_multi_array,
                                        lambda v: self._unstamped("cmd_joint_effort", v), self.on_cmd_joint_effort)
            self.sub_joint_command = subscribe(JointState, "joint_command", cdr.joint_state,
                                               partial(self._named, "joint_command"), self.on_joint_command)

    @property
    def stamped(self) -> tuple:
        """The subscriptions of the stamped commands (the lockstep loop's command publishers match them)."""
        return tuple(s for s in (self.sub_cmd, self.sub_joint_command, self.sub_thruster_command) if s is not None)

    def _saturation_warning(self, channel: str, before: int) -> None:
        if self.sim.saturated[channel] > before:
            self.warn(f"saturated_{channel}", f"{_SATURATED[channel]} saturated ({self.limits_text()}): "
                      f"{self.sim.saturated[channel]} saturated since start-up")

    def _accepted(self, result) -> bool:
        """Was the command accepted? A rejection is logged: counted and warned about (throttled per topic and
        kind), or, in lockstep, an answer to another period logged apart without a count."""
        if result.period_checked if not isinstance(result, Accepted) else self.lockstep:
            self.on_input()
        if isinstance(result, Accepted):
            return True
        if result.kind == "stale":
            self.node.get_logger().debug(result.reason, throttle_duration_sec=WARN_THROTTLE_S)
        elif result.kind == "late":
            self.warn(f"lockstep_late_{result.topic}", result.reason)
        else:
            self.reject(result.topic, result.kind, result.reason)
        return False

    def _hold(self, result, before: int) -> None:
        """An accepted joint or thruster command: submitted (lockstep) or held from the next step."""
        if self.lockstep:
            self.take(result.topic, result.value)
        elif result.channel == "joints":
            self.sim.set_joint_efforts(result.value)
        else:
            self.sim.set_thrusts(result.value)
        self._saturation_warning(result.channel, before)

    def on_cmd_wrench(self, msg: WrenchStamped) -> None:
        stamp = msg.header.stamp
        self.wrench(stamp.sec, stamp.nanosec, msg.header.frame_id, cv.wrench_from_msg(msg.wrench))

    def wrench(self, sec: int, nanosec: int, frame_id: str, W) -> None:
        """cmd_wrench's fields: its stamp, frame and ``W = [F; τ]``."""
        self.counts["received_cmd_wrench"] += 1
        before = self.sim.saturated["wrench"]
        result = self.intake.wrench(W, frame_id, sec, nanosec)
        if not self._accepted(result):
            return
        self._saturation_warning("wrench", before)
        if result.dropped.any():
            self.warn("cmd_wrench:dropped",
                      f"cmd_wrench: a {self.body} cannot take the components {np.round(result.dropped, 12).tolist()} "
                      "(body frame [F; tau]); dropped them, applying the rest")
        if self.lockstep:
            self.take("cmd_wrench", result.value)
        else:
            self.sim.set_wrench(result.value)

    def _unstamped(self, topic: str, data) -> None:
        """cmd_joint_effort, cmd_thrust (their ``data``): ignored in lockstep (no stamp), else checked and held."""
        self.counts[f"received_{topic}"] += 1
        if self.lockstep:
            key, text = UNSTAMPED_IN_LOCKSTEP[topic]
            (self.logs.info if topic == "cmd_thrust" else self.logs.info_once)(key, text)
            return
        result = self.intake.values(topic, data)
        if self._accepted(result):
            self._hold(result, self.sim.saturated[result.channel])

    def on_cmd_joint_effort(self, msg: Float64MultiArray) -> None:
        self._unstamped("cmd_joint_effort", msg.data)

    def on_cmd_thrust(self, msg: Float64MultiArray) -> None:
        self._unstamped("cmd_thrust", msg.data)

    def _named(self, topic: str, sec: int, nanosec: int, names, efforts) -> None:
        """joint_command, thruster_command (a JointState's stamp, names and efforts): efforts by name, stamped;
        joints or thrusters not named: zero."""
        self.counts[f"received_{topic}"] += 1
        result = self.intake.named(topic, names, efforts, sec, nanosec)
        if self._accepted(result):
            self._hold(result, self.sim.saturated[result.channel])

    def on_thruster_command(self, msg: JointState) -> None:
        self._named("thruster_command", msg.header.stamp.sec, msg.header.stamp.nanosec, msg.name, msg.effort)

    def on_joint_command(self, msg: JointState) -> None:
        self._named("joint_command", msg.header.stamp.sec, msg.header.stamp.nanosec, msg.name, msg.effort)
