"""Checks of raw ROS parameter values shared by the nodes: each returns the clean value or raises
:class:`~mbs_ros.nodes.model_source.ParameterError` whose message is the reason (ints are accepted for doubles)."""
from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

from mbs_ros.nodes.model_source import ParameterError

__all__ = ["text", "number", "vector", "flag"]


def text(values: Mapping, name: str, choices: Optional[Sequence[str]] = None, allow_empty: bool = False) -> str:
    v = values[name]
    if not isinstance(v, str):
        raise ParameterError(f"{name} must be a string, got {v!r}")
    v = v.strip()
    if choices is not None and v not in choices:
        raise ParameterError(f"{name} must be one of {', '.join(choices)}, got {v!r}")
    if not v and not allow_empty:
        raise ParameterError(f"{name} must not be empty")
    return v


def number(values: Mapping, name: str, lo=None, lo_open: bool = False, hi=None) -> float:
    v = values[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ParameterError(f"{name} must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ParameterError(f"{name} must be finite, got {v}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ParameterError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {v:g}")
    if hi is not None and v > hi:
        raise ParameterError(f"{name} must be <= {hi:g}, got {v:g}")
    return v


def vector(values: Mapping, name: str, n: Optional[int]) -> tuple:
    """A list of ``n`` finite numbers (any length when ``n`` is None: checked against the model later)."""
    v = values[name]
    if n is None:
        if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
            raise ParameterError(f"{name} must be a list of numbers, got {v!r}")
    elif isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != n:
        raise ParameterError(f"{name} must be a list of {n} numbers, got {v!r}")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
        raise ParameterError(f"{name} must be a list of numbers, got {list(v)!r}")
    out = tuple(float(x) for x in v)
    if not all(math.isfinite(x) for x in out):
        raise ParameterError(f"{name} must be finite, got {list(out)}")
    return out


def flag(values: Mapping, name: str) -> bool:
    v = values[name]
    if not isinstance(v, bool):
        raise ParameterError(f"{name} must be true or false, got {v!r}")
    return v
