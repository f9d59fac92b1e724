"""Rate-limited log lines that cost nothing while they are suppressed.

rclpy's own filters (``throttle_duration_sec=``, ``once=True``) identify the calling line with ``inspect`` on
EVERY call, before they decide to drop it: about 2.7 ms per call in a node that has imported numba (measured
with cProfile on the dynamics node in lockstep, where a ``once=True`` line on every ``cmd_joint_effort`` took 68 %
of the process). A flood of malformed messages must not cost that per message, so the nodes decide here, by
key and monotonic time, and only call the logger for a line that is printed::

    self.logs = RateLimitedLog(self.get_logger())
    self.logs.warning("cmd_wrench.nan", lambda: f"cmd_wrench: non-finite {values}; ignored")
    self.logs.info_once("lockstep.cmd_joint_effort", "lockstep: cmd_joint_effort is ignored")

A message may be a string or a callable (formatted only when printed). A printed line says how many of its
kind were suppressed since the previous one.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Union

Text = Union[str, Callable[[], str]]


class RateLimitedLog:
    """At most one line per ``key`` every ``period`` seconds (wall clock, monotonic), or once per key."""

    def __init__(self, logger, period: float = 2.0, clock: Callable[[], float] = time.monotonic):
        if not period > 0.0:
            raise ValueError(f"period must be > 0 s, got {period!r}")
        self.logger = logger
        self.period = float(period)
        self.clock = clock
        self._next: Dict[str, float] = {}
        self._suppressed: Dict[str, int] = {}

    def _due(self, key: str, period: float) -> bool:
        now = self.clock()
        if now < self._next.get(key, -float("inf")):
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._next[key] = now + period
        return True

    def _line(self, key: str, text: Text) -> str:
        line = text() if callable(text) else text
        n = self._suppressed.pop(key, 0)
        return line + f" ({n} more like this since the last one)" if n else line

    # One call of the logger per severity, each on its own line: rclpy keys a call site by the caller's frame and
    # raises "Logger severity cannot be changed between calls" when one site logs at two severities.
    def warning(self, key: str, text: Text, period: float | None = None) -> bool:
        """Log ``text`` as a warning unless ``key`` was logged less than ``period`` s ago; True if printed."""
        if not self._due(key, self.period if period is None else period):
            return False
        self.logger.warning(self._line(key, text))
        return True

    def error(self, key: str, text: Text, period: float | None = None) -> bool:
        if not self._due(key, self.period if period is None else period):
            return False
        self.logger.error(self._line(key, text))
        return True

    def info(self, key: str, text: Text, period: float | None = None) -> bool:
        if not self._due(key, self.period if period is None else period):
            return False
        self.logger.info(self._line(key, text))
        return True

    def info_once(self, key: str, text: Text) -> bool:
        """Log ``text`` the first time ``key`` is seen, never again."""
        return self.info(key, text, period=float("inf"))

    def suppressed(self, key: str) -> int:
        """How many lines of ``key`` were dropped since it was last printed."""
        return self._suppressed.get(key, 0)
