"""Wall-clock pacing of a simulation stepped from a timer, ROS-free: step ``k`` is due at wall time
``anchor + (k - k_anchor) dt / real_time_factor``; a timer callback takes at most ``max_batch_steps`` of the due
steps (commands arriving meanwhile are taken between batches) and, more than ``MAX_LAG_S`` of wall clock behind,
the node re-anchors (it runs slower than asked rather than fast-forwarding open loop). In lockstep the same factor
is a speed limit: a control period of n steps starts no earlier than n dt / real_time_factor after the last one.
A skip ahead is a warning only when another came within ``PERSISTENT_LAG_S`` and together they lost more than
``PERSISTENT_LAG_FRACTION`` of that time: the simulation slower than asked; a lone one, or a few short ones, are
stalls of the process (on a busy machine, another process starting), logged at INFO and counted."""
from __future__ import annotations

from typing import List, Optional, Tuple

__all__ = ["Pacer", "timer_period", "MAX_TICK_RATE_HZ", "MAX_LAG_S", "PERSISTENT_LAG_S", "PERSISTENT_LAG_FRACTION",
           "MAX_BATCH_S", "WARN_THROTTLE_S", "LOCKSTEP_WATCH_S", "STEP_CHUNK_S"]

# The stepping timer ticks at most this often; each tick steps what the wall clock demands.
MAX_TICK_RATE_HZ = 500.0
# If the simulation lags the wall clock by more than this, it skips ahead (and warns) instead.
MAX_LAG_S = 0.05
# A skip ahead within this long of the previous one is warned about (the simulation runs slower than asked); a lone
# one (a stall of the process: the demo's dynamics node lost ~60 ms once in a third of its runs on a 2-core machine
# while the other nodes started) is logged at INFO (and counted: skipped_ahead on /diagnostics).
PERSISTENT_LAG_S = 10.0
# ... and only when the skips within PERSISTENT_LAG_S lost more than this share of it together (0.2 s in 10 s: a
# simulation 2 % slower than asked). Two stalls of ~55 ms 7 s apart (the demo's dynamics node on a slow 2-core host:
# one while the other nodes started, one as the run ended) are stalls, not a slow simulation.
PERSISTENT_LAG_FRACTION = 0.02
# At most this much simulation time per timer callback (catching up takes several callbacks, with the
# subscriptions served in between).
MAX_BATCH_S = 0.01
# A ~/step runs in chunks of at most about this much wall clock (whole batches), the executor free in between.
STEP_CHUNK_S = 0.01
# Warnings about pacing, lockstep and inputs: at most one per key this often.
WARN_THROTTLE_S = 2.0
# Lockstep with real_time_factor 0: the timer only watches (commands start the periods), this often.
LOCKSTEP_WATCH_S = 0.05


def timer_period(dt: float, real_time_factor: float, lockstep: bool) -> float:
    """Seconds between the stepping timer's callbacks: in lockstep it paces (rtf > 0) or watches; otherwise one
    step's wall time, at most ``MAX_TICK_RATE_HZ``, or 0 (back to back) as fast as possible (rtf 0)."""
    if lockstep:
        return 1.0 / MAX_TICK_RATE_HZ if real_time_factor > 0 else LOCKSTEP_WATCH_S
    return max(dt / real_time_factor, 1.0 / MAX_TICK_RATE_HZ) if real_time_factor > 0 else 0.0


class Pacer:
    """Which step is due at a wall-clock time (integer ns, a monotonic clock), for a step of ``dt_ns``."""

    def __init__(self, dt_ns: int, real_time_factor: float):
        self.dt_ns = int(dt_ns)
        self.max_batch_steps = max(1, int(round(MAX_BATCH_S / (self.dt_ns * 1e-9))))
        self.anchor_k = 0
        self.anchor_wall_ns = 0
        self.not_before_ns = 0  # lockstep: the next period may start from then
        self.skips: List[Tuple[int, float]] = []  # the skips ahead within PERSISTENT_LAG_S: (wall clock, lag [s])
        self.set_real_time_factor(real_time_factor)

    def set_real_time_factor(self, real_time_factor: float) -> None:
        self.real_time_factor = float(real_time_factor)
        rtf = self.real_time_factor
        self.max_lag_steps = max(1, int(MAX_LAG_S * rtf / (self.dt_ns * 1e-9))) if rtf > 0 else 0

    def anchor(self, k: int, now_ns: int) -> None:
        """Step ``k`` is the one due at ``now_ns`` (start, resume, reset, a change of speed, skipping ahead)."""
        self.anchor_k = k
        self.anchor_wall_ns = now_ns
        self.not_before_ns = now_ns

    def due(self, now_ns: int) -> int:
        """The index of the step due at ``now_ns`` (real_time_factor > 0)."""
        return self.anchor_k + int((now_ns - self.anchor_wall_ns) * self.real_time_factor) // self.dt_ns

    def steps_now(self, k: int, now_ns: int) -> int:
        """Steps to take in this callback from step ``k``: what is due, at most ``max_batch_steps`` (<= 0: none)."""
        return min(self.due(now_ns) - k, self.max_batch_steps)

    def lagging(self, k: int, now_ns: int) -> bool:
        """More than ``MAX_LAG_S`` of wall clock behind at step ``k``: time to re-anchor."""
        return self.due(now_ns) - k > self.max_lag_steps

    def skip(self, k: int, now_ns: int) -> Tuple[bool, str]:
        """A skip ahead from step ``k`` at ``now_ns`` (the caller re-anchors): ``(persistent, what to log)``, persistent
        (a warning) when another came at most ``PERSISTENT_LAG_S`` ago and the skips in that time, this one
        included, lost more than ``PERSISTENT_LAG_FRACTION`` of it."""
        lag = (self.due(now_ns) - k) * self.dt_ns * 1e-9 / self.real_time_factor
        self.skips = [(t, x) for t, x in self.skips if now_ns - t <= PERSISTENT_LAG_S * 1e9]
        lost = lag + sum(x for _, x in self.skips)
        another = bool(self.skips)
        self.skips.append((now_ns, lag))
        if another and lost > PERSISTENT_LAG_FRACTION * PERSISTENT_LAG_S:
            return True, (f"falling behind the wall clock by {lag:.3f} s: skipping ahead (the simulation runs slower "
                          f"than real_time_factor {self.real_time_factor:g})")
        return False, (f"{lag:.3f} s behind the wall clock: skipping ahead (a stall of the process, e.g. the machine's "
                       f"load; skips losing more than {PERSISTENT_LAG_FRACTION * PERSISTENT_LAG_S:g} s within "
                       f"{PERSISTENT_LAG_S:g} s are warned about)")

    def period_may_start(self, now_ns: int) -> bool:
        """Lockstep: may a control period start at ``now_ns`` (always, at real_time_factor 0)?"""
        return self.real_time_factor <= 0.0 or now_ns >= self.not_before_ns

    def period_started(self, steps: int, now_ns: int) -> None:
        """Lockstep: a period of ``steps`` started at ``now_ns``; the next one not before its wall time is up."""
        if self.real_time_factor > 0.0:
            self.not_before_ns = max(self.not_before_ns + int(steps * self.dt_ns / self.real_time_factor), now_ns)
