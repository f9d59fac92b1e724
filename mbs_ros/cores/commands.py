"""The dynamics node's command intake without ROS: a command (its values, names, frame and stamp as a message
carries them) in, :class:`Accepted` (the value to hold or submit) or :class:`Rejection` (its kind and reason) out.

The dynamics node (:mod:`mbs_ros.nodes.dynamics_inputs`) turns each message into one call of :class:`CommandIntake`
and a rejection into its throttled warning and ``rejected_<topic>`` counter; the headless run
(:mod:`mbs_ros.headless.run`) makes the same calls with the controller's command and turns a rejection into its
fault. So each check (stamp, lockstep period, frame, length, names, finite values) exists once. The checks and their
order: docs/dynamics_node.md, "Robustness".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional, Sequence, Union

import numpy as np

__all__ = ["CommandIntake", "Accepted", "Rejection", "CHANNEL", "TOPIC", "TIMEOUT_TOPIC", "NOT_COUNTED",
           "UNSTAMPED_IN_LOCKSTEP"]

# the simulator's command channels, the topics they come from, and the topics whose timeout they have
CHANNEL = {"cmd_wrench": "wrench", "joint_command": "joints", "thruster_command": "thrusters",
           "cmd_joint_effort": "joints", "cmd_thrust": "thrusters"}
TOPIC = {"wrench": "cmd_wrench", "joints": "joint_command", "thrusters": "thruster_command"}
TIMEOUT_TOPIC = {"wrench": "cmd_wrench", "joints": "cmd_joint_effort", "thrusters": "cmd_thrust"}

#: lockstep: the unstamped command topics, ignored, and their log line (key, text): cmd_thrust's each time (throttled),
#: cmd_joint_effort's once
UNSTAMPED_IN_LOCKSTEP = {
    "cmd_thrust": ("cmd_thrust_lockstep",
                   "lockstep: cmd_thrust carries no stamp and is ignored; send thruster_command"),
    "cmd_joint_effort": ("lockstep_cmd_joint_effort",
                         "lockstep: cmd_joint_effort is ignored (it carries no stamp); joint efforts come from "
                         "joint_command (sensor_msgs/JointState, efforts by name, stamped with the state they answer)"),
}

#: lockstep: rejections that are no fault of the message (an answer to an earlier state: ``stale``; to a later one:
#: ``late``); the node logs them apart and does not count them as rejected
NOT_COUNTED = ("stale", "late")


@dataclass(frozen=True)
class Accepted:
    """A command taken in: ``value`` for the simulator's ``channel`` (a ``WrenchCommand`` for ``"wrench"``, an
    array in the model's order for ``"joints"``/``"thrusters"``: entries not named are 0), ``dropped`` the wrench
    components the base cannot take (zeros when none; None for other channels)."""

    topic: str
    channel: str
    value: object
    dropped: Optional[np.ndarray] = None


@dataclass(frozen=True)
class Rejection:
    """A command refused: ``kind`` (``fixed``, ``stamp``, ``lockstep``, ``stale``, ``late``, ``nonfinite``,
    ``frame``, ``length``, ``names``) and the ``reason`` a warning says; ``period_checked`` whether it got as far
    as the lockstep period check (a command the node counts as input in the wait watch)."""

    topic: str
    kind: str
    reason: str
    period_checked: bool = False

    @property
    def counted(self) -> bool:
        return self.kind not in NOT_COUNTED


Result = Union[Accepted, Rejection]


def stamp_error(sec: int, nanosec: int) -> Optional[str]:
    """Why a ``header.stamp`` (sec, nanosec) is not a time (None when it is one)."""
    if sec < 0 or nanosec >= 1_000_000_000:
        return f"invalid header.stamp (sec {sec}, nanosec {nanosec}: needs sec >= 0, nanosec < 1e9)"
    return None


class CommandIntake:
    """The checks of one simulator's commands. ``sim`` the :class:`~mbs_ros.dynamics.simulation.simulator.Simulator`;
    ``lockstep`` whether commands carry the stamp of the period they answer; ``body_frames``/``world_frames`` the
    ``frame_id`` a wrench may name (axes of the base / of the world); ``base_frame``/``world_frame`` as a rejection
    names them."""

    def __init__(self, sim, *, lockstep: bool, body_frames: Collection[str], world_frames: Collection[str],
                 base_frame: str, world_frame: str):
        self.sim = sim
        self.lockstep = bool(lockstep)
        self.body_frames = frozenset(body_frames)
        self.world_frames = frozenset(world_frames)
        self.base_frame, self.world_frame = base_frame, world_frame
        model = sim.model
        self.index = {"joints": {name: i for i, name in enumerate(model.joint_names)},
                      "thrusters": {name: i for i, name in enumerate(model.thruster_names)}}

    # ------------------------------------------------------------------------------------------ checks

    def _stamp(self, topic: str, sec: int, nanosec: int, channel_expected: bool = True) -> Optional[Rejection]:
        """A rejection unless (sec, nanosec) is a time and, in lockstep, the periods take the command
        (``channel_expected``: a thruster-driven base takes no cmd_wrench) and it answers the current state."""
        error = stamp_error(sec, nanosec)
        if error:
            return Rejection(topic, "stamp", error)
        if not self.lockstep:
            return None
        if not channel_expected:
            return Rejection(topic, "lockstep", "lockstep: this model's periods take "
                             f"{' and '.join(TOPIC[ch] for ch in self.sim.expected)}, not {topic}")
        return self._period(topic, sec, nanosec)

    def _period(self, topic: str, sec: int, nanosec: int) -> Optional[Rejection]:
        """Lockstep: a rejection unless the command is stamped with the current period's state."""
        stamp_ns = int(sec) * 1_000_000_000 + int(nanosec)
        order = self.sim.check_stamp(CHANNEL[topic], stamp_ns)
        if order == 0:
            return None
        current = self.sim.stamp()
        if order < 0:  # an answer to a state sent again, or to the state before a reset
            waiting = ("its period is running" if stamp_ns == current
                       else f"waiting for {current * 1e-9:.9f} s")
            return Rejection(topic, "stale", f"lockstep: {topic} stamped {stamp_ns * 1e-9:.9f} s ignored, {waiting}",
                             True)
        return Rejection(topic, "late", f"lockstep: {topic} stamped {stamp_ns * 1e-9:.9f} s ignored: it is later "
                                        f"than the current state ({current * 1e-9:.9f} s); commands must carry the "
                                        "stamp of the state they answer", True)

    def wrench(self, W, frame_id: str, sec: int, nanosec: int) -> Result:
        """cmd_wrench: ``W = [F; τ]`` in the axes ``frame_id`` names, stamped (sec, nanosec): accepted as the
        simulator's ``WrenchCommand`` (saturated, counted by the simulator) with the dropped components."""
        topic, sim = "cmd_wrench", self.sim
        W = np.asarray(W, dtype=float)
        if sim.model.group is None:
            return Rejection(topic, "fixed", "the base is fixed (base_group fixed) and takes no wrench; drive the "
                                             "joints with cmd_joint_effort or joint_command")
        refused = self._stamp(topic, sec, nanosec, channel_expected="wrench" in sim.expected)
        if refused is not None:
            return refused
        if not np.isfinite(W).all():
            return Rejection(topic, "nonfinite", f"non-finite (NaN/inf) components {W.tolist()}", self.lockstep)
        if frame_id in self.body_frames:
            frame = "body"
        elif frame_id in self.world_frames:
            frame = "world"
        else:
            return Rejection(topic, "frame", f"unknown frame_id {frame_id[:100]!r} (use '', {self.base_frame!r} or "
                                             f"{self.world_frame!r})", self.lockstep)
        cmd, dropped = sim.wrench_command(W, frame)
        return Accepted(topic, "wrench", cmd, dropped)

    def values(self, topic: str, data) -> Result:
        """cmd_joint_effort or cmd_thrust (no stamp, no names: one value per joint or thruster in the model's
        order), outside lockstep."""
        channel = CHANNEL[topic]
        names = tuple(self.index[channel])
        data = np.asarray(data, dtype=float)
        if data.shape != (len(names),):
            order = (f"one per joint, in the order {', '.join(names)}" if channel == "joints"
                     else f"one per thruster, in {', '.join(names)} order")
            return Rejection(topic, "length", f"{data.size} values, expected {len(names)} ({order})")
        if not np.isfinite(data).all():
            what = "entries" if channel == "joints" else "thrusts"
            return Rejection(topic, "nonfinite", f"non-finite (NaN/inf) {what} {data.tolist()}")
        return Accepted(topic, channel, data)

    def named(self, topic: str, names: Sequence[str], efforts: Sequence[float], sec: int, nanosec: int) -> Result:
        """joint_command or thruster_command: the ``effort`` by ``name`` (a JointState's), stamped (sec, nanosec),
        as an array in the model's order (names not given: 0)."""
        channel = CHANNEL[topic]
        index = self.index[channel]
        refused = self._stamp(topic, sec, nanosec)
        if refused is not None:
            return refused
        names = list(names)
        unknown = [n for n in names if n not in index]
        if not names or len(efforts) != len(names) or unknown or len(set(names)) != len(names):
            unit = " (thrust, N)" if channel == "thrusters" else ""
            return Rejection(topic, "names",
                             f"needs one effort{unit} per name, names distinct and among {', '.join(index)} "
                             f"(got {len(names)} names, {len(efforts)} efforts"
                             + (f", unknown {[u[:100] for u in unknown[:5]]}" if unknown else "") + ")",
                             self.lockstep)
        values = np.asarray(efforts, dtype=float)
        if not np.isfinite(values).all():
            what = "thrusts" if channel == "thrusters" else "efforts"
            return Rejection(topic, "nonfinite", f"non-finite (NaN/inf) {what} {values.tolist()}", self.lockstep)
        data = np.zeros(len(index))
        data[[index[n] for n in names]] = values
        return Accepted(topic, channel, data)

    def unknown(self, channel: str, names: Sequence[str]) -> list:
        """The ``names`` this simulator has no joint or thruster of (what :meth:`named` would reject)."""
        return [n for n in names if n not in self.index[channel]]
