"""The lockstep periods of the simulator (:class:`LockstepPeriods`, a base of
:class:`~mbs_ros.dynamics.simulation.simulator.Simulator`): a command per expected channel stamped with the current state,
then the period's ``lockstep_steps`` steps. Needs, from the simulator: ``expected``, ``period_commands``,
``last_stamp_seen``, ``lockstep_steps``, ``paused``, ``stamp``, ``advance``, the command checks
(``_saturate_wrench``, ``thrust_commands``, ``joint_efforts``) and the held channels."""

from __future__ import annotations

from typing import Optional

from mbs_ros.dynamics.simulation.types import WrenchCommand


def expected_channels(floating: bool, nt: int, nj: int, base_actuated: bool = True) -> tuple:
    """The lockstep channels of a model: "thrusters" if it has thrusters, else "wrench" if its base floats and
    takes a wrench (``base_actuated``: not a legged robot's); "joints" if it has movable joints."""
    return tuple(ch for ch, needed in (("wrench", floating and not nt and base_actuated), ("thrusters", nt > 0),
                                       ("joints", nj > 0)) if needed)


class LockstepPeriods:
    """Lockstep: one control period at a time, once every expected channel has its command
    (``docs/dynamics.md``, "Lockstep")."""

    period_started_ns: Optional[int] = None  # the stamp of the last period started (its commands taken)

    def check_stamp(self, channel: str, stamp_ns: int) -> int:
        """Lockstep: is a command on ``channel`` stamped ``stamp_ns`` for the current period? 0: yes; -1: for an
        earlier one; 1: for a later one. Remembered in ``last_stamp_seen``. The stamp of a period already started
        whose steps are still to come (a node takes them in a later callback) is an earlier one: a copy of its
        command that comes late (the state was sent again) must not become the next period's."""
        self.last_stamp_seen[channel] = int(stamp_ns)
        current = self.stamp()
        if stamp_ns == current:
            return -1 if stamp_ns == self.period_started_ns else 0
        return -1 if stamp_ns < current else 1

    def submit(self, channel: str, value) -> None:
        """Lockstep: the command of ``channel`` (``"wrench"``: a :class:`WrenchCommand`; ``"joints"``: efforts) for
        the current period (a later one on the same channel replaces it)."""
        if channel not in self.expected:
            raise ValueError(f"this model expects {' and '.join(self.expected) or 'no command'}, not {channel!r}")
        if channel == "wrench":
            W = self._saturate_wrench(value.W)
            if W is not value.W:
                W.setflags(write=False)
                value = WrenchCommand(W, value.frame)
            self.period_commands[channel] = value
        elif channel == "thrusters":
            self.period_commands[channel] = self.thrust_commands(value)
        else:
            self.period_commands[channel] = self.joint_efforts(value)

    def missing(self) -> tuple:
        """Lockstep: the expected channels without a command for the current period."""
        return tuple(ch for ch in self.expected if ch not in self.period_commands)

    def period_complete(self) -> bool:
        return bool(self.expected) and not self.missing()

    def start_period(self) -> bool:
        """Lockstep: hold the current period's commands from the next step on (the caller then takes
        ``lockstep_steps`` steps); False (nothing changed) while paused or while a channel is missing."""
        if self.paused or not self.period_complete():
            return False
        cmds, self.period_commands = self.period_commands, {}
        self.period_started_ns = self.stamp()
        if "wrench" in cmds:
            self._wrench.pending = cmds["wrench"]
        if "joints" in cmds:
            self._efforts.pending = cmds["joints"]
        if "thrusters" in cmds:
            self._thrusts.pending = cmds["thrusters"]
        return True

    def advance_period(self) -> int:
        """Lockstep: :meth:`start_period` and take its ``lockstep_steps`` steps; the steps taken (0 while paused or
        while a channel is missing)."""
        return self.advance(self.lockstep_steps) if self.start_period() else 0
