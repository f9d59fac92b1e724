"""The nodes' logger: rclpy's log lines (console, ``/rosout``, the log file) at what rcutils costs.

rclpy's ``RcutilsLogger`` finds the calling line with ``inspect.getframeinfo`` on every call, which reads the
caller's source lines and resolves its path, frame after frame: 0.5-0.9 ms of CPU per printed line in a node (the
first one 30-50 ms), inside whichever callback logs, against a 1 ms control period. :class:`FastLogger` hands
rcutils the same record (severity, logger name, message, function, file, line) read from the caller's frame:
20-40 us. rclpy's filters (``throttle_duration_sec``, ``once``, ``skip_first``) are kept per call site here, as
rclpy keeps them; the nodes' own rate limiting is :class:`~mbs_ros.cores.ratelimit.RateLimitedLog`.

The nodes' ``get_logger()`` is :func:`fast_get_logger`. Without rclpy's C logging function, or with another
signature of it (an rclpy other than the ones this was written against), the lines go through rclpy's logger, at
its cost, with this module's line as theirs.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Dict, Tuple

from rclpy.logging import LoggingSeverity, get_logger
from rclpy.node import Node

try:
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    _LOG = _rclpy.rclpy_logging_rcutils_log
    _ENABLED = _rclpy.rclpy_logging_logger_is_enabled_for
except (ImportError, AttributeError):  # pragma: no cover - another rclpy: its own logger
    _LOG = _ENABLED = None

__all__ = ["FastLogger", "fast_get_logger"]

# rclpy's logger where rcutils' function is not there: one call site per severity (rclpy keeps a state per calling
# line and refuses a second severity on one), the filters applied here before
_RCLPY = {
    LoggingSeverity.DEBUG: lambda logger, text: logger.debug(text),
    LoggingSeverity.INFO: lambda logger, text: logger.info(text),
    LoggingSeverity.WARN: lambda logger, text: logger.warning(text),
    LoggingSeverity.ERROR: lambda logger, text: logger.error(text),
    LoggingSeverity.FATAL: lambda logger, text: logger.fatal(text),
}
_FILTERS = ("throttle_duration_sec", "throttle_time_source_type", "once", "skip_first")
# frames between the caller and rcutils that are not the caller: this module and the rate limiter in front of it
_INTERNAL = {__file__, os.path.abspath(__file__)}
try:
    from mbs_ros.cores import ratelimit as _ratelimit

    _INTERNAL.update((_ratelimit.__file__, os.path.abspath(_ratelimit.__file__)))
except ImportError:  # pragma: no cover
    pass


class FastLogger:
    """``logger`` (an rclpy ``RcutilsLogger``) with its calls costing what rcutils' does: the same methods
    (``debug`` ... ``fatal``, ``log``, ``get_child``, ``set_level``, ``get_effective_level``, ``is_enabled_for``,
    ``name``), the same lines."""

    def __init__(self, logger):
        self._logger = logger
        self.name = logger.name
        self._sites: Dict[Tuple[str, int, int], list] = {}  # call site -> [calls, last printed (s)]
        self._others: Dict[str, "FastLogger"] = {}  # log(name=...)

    def _emit(self, severity: LoggingSeverity, message, kwargs) -> bool:
        global _LOG
        if not (_ENABLED(self.name, severity) if _LOG is not None else self._logger.is_enabled_for(severity)):
            return False
        f = sys._getframe(1)
        while f.f_back is not None and f.f_code.co_filename in _INTERNAL:
            f = f.f_back
        if kwargs and not self._passes(f, kwargs):
            return False
        if _LOG is not None:
            code = f.f_code
            try:
                _LOG(severity, self.name, str(message), code.co_name, os.path.abspath(code.co_filename), f.f_lineno)
                return True
            except TypeError:  # pragma: no cover - another signature: rclpy's logger from now on
                _LOG = None
        return _RCLPY[severity](self._logger, str(message))

    def _passes(self, frame, kwargs) -> bool:
        """rclpy's filters at the call site ``frame``: whether this call prints."""
        unknown = set(kwargs) - set(_FILTERS)
        if unknown:
            raise TypeError(f"unknown logging arguments: {', '.join(sorted(unknown))}")
        site = self._sites.setdefault((frame.f_code.co_filename, frame.f_lineno, frame.f_lasti), [0, None])
        site[0] += 1
        if kwargs.get("once") and site[0] > 1:
            return False
        if kwargs.get("skip_first") and site[0] == 1:
            return False
        period = kwargs.get("throttle_duration_sec")
        if period is not None:
            clock = kwargs.get("throttle_time_source_type")
            now = clock.now().nanoseconds * 1e-9 if clock is not None else time.monotonic()
            if site[1] is not None and now - site[1] < period:
                return False
            site[1] = now
        return True

    def debug(self, message, **kwargs) -> bool:
        return self._emit(LoggingSeverity.DEBUG, message, kwargs)

    def info(self, message, **kwargs) -> bool:
        return self._emit(LoggingSeverity.INFO, message, kwargs)

    def warning(self, message, **kwargs) -> bool:
        return self._emit(LoggingSeverity.WARN, message, kwargs)

    warn = warning

    def error(self, message, **kwargs) -> bool:
        return self._emit(LoggingSeverity.ERROR, message, kwargs)

    def fatal(self, message, **kwargs) -> bool:
        return self._emit(LoggingSeverity.FATAL, message, kwargs)

    def log(self, message, severity, name=None, **kwargs) -> bool:
        if name is not None and name != self.name:  # rclpy's name= (a logger of that name, its own call sites)
            other = self._others.get(name)
            if other is None:
                other = self._others[name] = FastLogger(get_logger(name))
            return other.log(message, severity, **kwargs)
        return self._emit(LoggingSeverity(severity), message, kwargs)

    def get_child(self, name: str) -> "FastLogger":
        return FastLogger(self._logger.get_child(name))

    def set_level(self, level) -> None:
        self._logger.set_level(level)

    def get_effective_level(self):
        return self._logger.get_effective_level()

    def is_enabled_for(self, severity) -> bool:
        return self._logger.is_enabled_for(severity)


def fast_get_logger(node) -> FastLogger:
    """``node.get_logger()`` of the nodes (``get_logger = fast_get_logger`` in their class): rclpy's logger of the
    node as a :class:`FastLogger`, made once."""
    fast = node.__dict__.get("_fast_logger")
    if fast is None:
        fast = node.__dict__["_fast_logger"] = FastLogger(Node.get_logger(node))
    return fast
