"""The controller's gripper command topic without ROS: ``gripper/command`` (``std_msgs/Float64MultiArray``, as
ros2_control's forward command controllers take) ``data = [position]`` or ``[position, max_effort]`` checked by
:class:`GripperIntake` into a :class:`GripperCommand` or the reason it is refused, and :class:`GripperOverride`
holding what the controller drives the fingers with.

The rule (docs/contact.md, "The gripper over ROS"): the topic takes over for good once used. A command accepted
is applied at the next period boundary (the next state the controller answers, computed once per state, as the
other topic inputs are), and from then on the gripper follows the topic alone: its target moves from where it
was at that boundary towards the command's position at ``gripper_speed``, squeezing with at most the command's
``max_effort`` (``gripper_max_effort`` when not given); the schedule (gripper_times/gripper_positions) is not
consulted again, and a later command replaces the earlier one the same way (the last one applied wins). Why
"for good" rather than interleaving the two by time: a user who drives the gripper from a topic must not see a
later scheduled entry open the fingers under a grasp it holds; the schedule is the scenario's stand-in for such a
user. A run that never publishes on the topic is untouched (bit for bit, the headless identity).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np

__all__ = ["GripperCommand", "GripperIntake", "GripperOverride", "TOPIC"]

TOPIC = "gripper/command"


@dataclass(frozen=True)
class GripperCommand:
    """A command taken in: the fingers' target ``position`` [m or rad] and the squeeze limit ``max_effort``."""

    position: float
    max_effort: float


class GripperIntake:
    """The checks of ``gripper/command``: ``lower``/``upper`` the positions a target may take (the finger joints'
    range with the reference margin, :func:`~mbs_ros.controllers.reference_input.reference_position_bounds`, over
    all of them), ``max_effort`` the parameter ``gripper_max_effort`` (a command's limit)."""

    def __init__(self, lower: float, upper: float, max_effort: float):
        self.lower, self.upper, self.max_effort = float(lower), float(upper), float(max_effort)

    def check(self, data) -> Union[GripperCommand, str]:
        """``data`` accepted as a :class:`GripperCommand`, or the reason (a str) it is refused."""
        try:
            values = np.asarray(data, dtype=float).ravel()
        except (TypeError, ValueError):
            return "data must be numbers"
        if values.size not in (1, 2):
            return f"{values.size} values, expected [position] or [position, max_effort]"
        if not np.all(np.isfinite(values)):
            return "non-finite (NaN/inf) values"
        position = float(values[0])
        if not self.lower <= position <= self.upper:
            return (f"position {position:g} outside the finger joints' range [{self.lower:g}, {self.upper:g}] (their "
                    "limits with the reference margin)")
        effort = float(values[1]) if values.size == 2 else self.max_effort
        if not 0.0 <= effort <= self.max_effort:
            return f"max_effort {effort:g} outside [0, gripper_max_effort {self.max_effort:g}]"
        return GripperCommand(position, effort)


class GripperOverride:
    """What the gripper follows once ``gripper/command`` was used (see the module's rule). ``offer`` (any thread)
    leaves a command for the next boundary; ``at(t_ref, scheduled)`` (the control loop, once per state, at its
    reference time [ns]) applies a waiting one and gives ``(target, rate, limit)``, or None while the topic has
    not been used (the schedule drives). ``scheduled`` the schedule's target at ``t_ref`` (where the target starts
    from when the topic takes over); ``speed`` the parameter ``gripper_speed``."""

    def __init__(self, speed: float):
        self.speed = float(speed)
        self._lock = threading.Lock()
        self._pending: Optional[GripperCommand] = None
        self._active: Optional[Tuple[int, float, GripperCommand]] = None  # (t_ref applied, start target, cmd)
        self.applied = 0

    def offer(self, cmd: GripperCommand) -> None:
        with self._lock:
            self._pending = cmd

    @property
    def used(self) -> bool:
        return self._active is not None

    def _target(self, t_ref: int) -> Tuple[float, float]:
        t0, x0, cmd = self._active
        gap = cmd.position - x0
        step = self.speed * max(t_ref - t0, 0) * 1e-9
        if abs(gap) <= step:
            return cmd.position, 0.0
        return x0 + math.copysign(step, gap), math.copysign(self.speed, gap)

    def at(self, t_ref: int, scheduled: float) -> Optional[Tuple[float, float, float]]:
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            start = self._target(t_ref)[0] if self._active is not None else float(scheduled)
            self._active = (int(t_ref), start, pending)
            self.applied += 1
        if self._active is None:
            return None
        target, rate = self._target(t_ref)
        return target, rate, self._active[2].max_effort
