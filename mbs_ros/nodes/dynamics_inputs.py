"""The dynamics node's command inputs (:class:`CommandInputs`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`): cmd_wrench, cmd_joint_effort, joint_command, cmd_thrust and
thruster_command are checked (stamp, lockstep period, frame, length, names, finite values; a rejected message is
counted and warned about, throttled) and turned into the simulator's commands (``Simulator.wrench_command``,
``set_wrench``, ``set_joint_efforts``, ``set_thrusts``, or ``submit`` in lockstep)."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.dynamics_lockstep import TOPIC

__all__ = ["CommandInputs"]


class CommandInputs:
    """Needs, from the node: ``sim``, ``model``, ``settings``, ``lockstep``, ``nj``, ``nt``, the frames,
    ``_counts``, ``_guard``, ``_reject``, ``_warn``, ``_logs``, ``_limits_text`` and the lockstep part's
    ``_lockstep_stamp_ok``/``_lockstep_take``."""

    def _create_inputs(self) -> None:
        """The command subscriptions: cmd_wrench always; joint and thruster commands when the model has them."""
        model, qos = self.model, QoSProfile(depth=10)
        self.sub_cmd = self.create_subscription(WrenchStamped, "cmd_wrench",
                                                self._guard(self._on_cmd_wrench, "cmd_wrench"), qos)
        self.sub_joint_command = None
        self.sub_thruster_command = None
        if self.nt:
            self.sub_thrust = self.create_subscription(
                Float64MultiArray, "cmd_thrust", self._guard(self._on_cmd_thrust, "cmd_thrust"), qos)
            self.sub_thruster_command = self.create_subscription(
                JointState, "thruster_command", self._guard(self._on_thruster_command, "thruster_command"), qos)
            self._thruster_index = {name: i for i, name in enumerate(model.thruster_names)}
        if self.nj:
            self.sub_effort = self.create_subscription(
                Float64MultiArray, "cmd_joint_effort", self._guard(self._on_cmd_joint_effort, "cmd_joint_effort"),
                qos)
            self.sub_joint_command = self.create_subscription(
                JointState, "joint_command", self._guard(self._on_joint_command, "joint_command"), qos)
            self._joint_index = {name: i for i, name in enumerate(model.joint_names)}

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
        if self.lockstep and "wrench" not in self.sim.expected:  # a thruster-driven base: its thrusts instead
            self._reject("cmd_wrench", "lockstep", "lockstep: this model's periods take "
                         f"{' and '.join(TOPIC[ch] for ch in self.sim.expected)}, not cmd_wrench")
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
