"""The controller's state input over time, ROS-free: pairing the parts of a state (a floating base's odometry and
the joints' states) by their stamps, and the time base those stamps make.

Time base: a complete state stamped after the last one and at most ``max_jump`` later is taken as time running on.
A state older than the last one (a simulation restarted or reset its clock) or more than ``max_jump`` newer is a
discontinuity: it is refused unless it is the ``confirmations``-th of consecutive states that continue each other
on the new time line; then that time line becomes the time base and the reference time is shifted by the jump
(reference time = stamp - ``offset``), so every reference continues from the point it had reached.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Tuple

__all__ = ["StatePairing", "TimeBase", "Step", "JUMP_CONFIRMATIONS", "KEEP_STAMPS", "REPEAT", "ACCEPT", "REJECT"]

JUMP_CONFIRMATIONS = 3  # consecutive states on a new time line before it becomes the time base
KEEP_STAMPS = 20  # unpaired parts kept per kind (the most recently arrived) while waiting for their partner
REPEAT, ACCEPT, REJECT = "repeat", "accept", "reject"


class StatePairing:
    """Parts of states by stamp (ns): ``add("base" | "joints", stamp, value)`` is True once every part the robot has
    (``base``, ``joints``) is there for ``stamp``. At most ``keep`` unpaired stamps per part are kept; the earliest
    arrived go first, so absurd stamps never crowd out fresh ones."""

    def __init__(self, base: bool, joints: bool, keep: int = KEEP_STAMPS):
        self._parts = {name: OrderedDict() for name, used in (("base", base), ("joints", joints)) if used}
        self.keep = keep

    def add(self, part: str, stamp: int, value) -> bool:
        d = self._parts[part]
        d[stamp] = value
        d.move_to_end(stamp)
        while len(d) > self.keep:
            d.popitem(last=False)
        return all(stamp in d for d in self._parts.values())

    def get(self, stamp: int) -> Tuple[object, object]:
        """``(base part, joints part)`` of a complete stamp (None for a part the robot has not)."""
        return tuple(self._parts[p][stamp] if p in self._parts else None for p in ("base", "joints"))

    def drop(self, stamp: int) -> None:
        for d in self._parts.values():
            d.pop(stamp, None)

    def discard(self, up_to: Optional[int]) -> None:
        """Forget every part stamped ``up_to`` or earlier (all of them when None)."""
        for d in self._parts.values():
            for k in [k for k in d if up_to is None or k <= up_to]:
                del d[k]


@dataclass(frozen=True)
class Step:
    """What to do with a complete state: ``kind`` REPEAT (the last state again), ACCEPT (``jump`` [ns] not None: a
    new time base) or REJECT (``seen`` consecutive states on the new time line so far)."""

    kind: str
    jump: Optional[int] = None
    seen: int = 0


class TimeBase:
    """The time base of the states (module docstring). :meth:`step` classifies a state's stamp, :meth:`commit`
    makes an accepted one the last (shifting ``offset`` by a jump)."""

    def __init__(self, max_jump_ns: int, confirmations: int = JUMP_CONFIRMATIONS):
        self.max_jump_ns = int(max_jump_ns)
        self.confirmations = int(confirmations)
        self.last: Optional[int] = None
        self.offset = 0  # ns: reference time = stamp - offset
        self._candidate: Optional[Tuple[int, int]] = None  # (newest stamp, states) on a new time line

    def step(self, t: int) -> Step:
        last = self.last
        if last is not None and t == last:
            return Step(REPEAT)
        if last is None or last < t <= last + self.max_jump_ns:
            self._candidate = None
            return Step(ACCEPT)
        c = self._candidate
        if c is not None and c[0] < t <= c[0] + self.max_jump_ns:
            c = (t, c[1] + 1)
        elif c is None or t != c[0]:
            c = (t, 1)
        if c[1] >= self.confirmations:
            self._candidate = None
            return Step(ACCEPT, jump=t - last)
        self._candidate = c
        return Step(REJECT, seen=c[1])

    def commit(self, t: int, jump: Optional[int]) -> None:
        """``t`` is the newest state's stamp; a ``jump`` moves the reference time with it."""
        if jump is not None:
            self.offset += jump
        self.last = t
