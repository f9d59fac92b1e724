"""One schema reader for the package's YAML files: the checks every reader of a document needs (a mapping with known
keys, a number within bounds, a whole number, a flag, a text, a choice, a list of numbers or names), each raising one
error whose text names the file and the key and never echoes the file's content (values appear only as
:func:`mbs_ros.yamlfile.shown` prints them). ROS-free.

Used by the scenario (:mod:`mbs_ros.scenario.schema`), the sensors file (:mod:`mbs_ros.sensors.spec`), the
campaign file (:mod:`mbs_ros.campaign.spec`) and the robot YAML file (:mod:`mbs_ros.dynamics.model.robot_yaml`); the file
itself is read by :func:`mbs_ros.yamlfile.read_yaml`, whose errors (syntax, encoding, control characters, integers
beyond any float, nesting, size) are one line too. Each reader keeps its error class (``error``: a callable
``(path, key, reason) -> Exception``) and its phrasing: ``wording="must"`` (scenario, campaign: ``KEY: must be a
number, got 'x'``) or ``"expected"`` (robot YAML, sensors: ``KEY: expected a finite number, got 'x'``).
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Callable, Optional, Tuple

from mbs_ros.yamlfile import is_name, shown

__all__ = ["SchemaError", "Reader", "join"]


class SchemaError(ValueError):
    """A file that does not follow its schema: ``file`` and ``key`` (a dotted path such as
    ``robots[0].initial.rpy``) name where, ``reason`` (one line) says why; errors of the file itself (YAML syntax,
    encoding) have no key but a ``line`` and ``column`` (1-based): ``file:line:column: reason``."""

    def __init__(self, file, key: str, reason: str, line: Optional[int] = None, column: Optional[int] = None):
        self.file = str(file)
        self.key = key
        self.reason = reason
        self.line, self.column = line, column
        where = self.file if line is None else f"{self.file}:{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")


def join(key: str, sub) -> str:
    """``key.sub`` (``sub`` alone at the top)."""
    return f"{key}.{sub}" if key else str(sub)


def _digits(value: int) -> int:
    return len(str(abs(value))) if abs(value).bit_length() < 12000 else int(abs(value).bit_length() * 0.30103) + 1


class Reader:
    """Checks of one file's values. ``where`` (e.g. ``"sensors[2] (dvl)"``) is put before every key."""

    def __init__(self, path, *, error: Callable[[str, str, str], Exception] = SchemaError, wording: str = "must",
                 where: str = ""):
        if wording not in ("must", "expected"):
            raise ValueError(f"wording must be 'must' or 'expected', got {wording!r}")
        self.path, self.error, self.wording, self.where = path, error, wording, where

    def at(self, where: str) -> "Reader":
        """The same file's reader for its part ``where``."""
        return Reader(self.path, error=self.error, wording=self.wording, where=where)

    def fail(self, key, reason: str):
        key = ": ".join(str(k) for k in (self.where, key) if k)
        raise self.error(self.path, key, reason)

    def _want(self, what: str, value) -> str:
        return f"{'must be' if self.wording == 'must' else 'expected'} {what}, got {shown(value)}"

    # ---------------------------------------------------------------------------------------- structure

    def mapping(self, value, key: str, allowed: Sequence[str] = (), required: Sequence[str] = (),
                none_is_empty: bool = False) -> dict:
        """A mapping whose keys are names among ``allowed`` (any name when empty), with ``required`` present."""
        if value is None and none_is_empty:
            return {}
        if not isinstance(value, Mapping):
            self.fail(key, self._want("a mapping", value))
        for k in value:
            if self.wording == "expected" and not is_name(k):
                self.fail(key, f"unknown key {shown(k)}" + self._known(k, allowed))
            if not isinstance(k, str):
                self.fail(key, f"keys must be strings, got {shown(k)}")
            if not is_name(k):
                self.fail(key, f"a key that is not a name (letters, digits, '_./~*+-'): {shown(k)}")
            if allowed and k not in allowed:
                self.fail(join(key, k), "unknown key" + self._known(k, allowed))
        for k in required:
            if k not in value:
                self.fail(join(key, k), "missing")
        return dict(value)

    def _known(self, k, allowed: Sequence[str]) -> str:
        close = difflib.get_close_matches(k, allowed, n=1) if isinstance(k, str) and is_name(k) else []
        if self.wording == "expected":  # a close key that is a name (never an echo of text that is not one)
            return (f" (did you mean {close[0]!r}? allowed: " if close else " (allowed: ") + f"{', '.join(allowed)})"
        return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(allowed)})"

    def sequence(self, value, key: str, what: str, non_empty: bool = False) -> list:
        """A list (not a text or a mapping), non-empty when asked."""
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or (non_empty and not value):
            self.fail(key, self._want(f"a {'non-empty ' if non_empty else ''}list of {what}", value))
        return list(value)

    # ------------------------------------------------------------------------------------------- scalars

    def number(self, value, key: str, lo: Optional[float] = None, lo_open: bool = False,
               hi: Optional[float] = None) -> float:
        """A finite number (an int or a float, not a flag) in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, self._want("a number" if self.wording == "must" else "a finite number", value))
        try:
            v = float(value)
        except OverflowError:  # an int beyond any float (a value given in Python: the YAML reader refuses them)
            self.fail(key, f"{'must be' if self.wording == 'must' else 'expected'} a finite number, got an integer "
                           f"of {_digits(value)} digits")
        if not math.isfinite(v):
            self.fail(key, f"must be finite, got {v}" if self.wording == "must" else self._want("a finite number", v))
        if lo is not None and (v <= lo if lo_open else v < lo):
            if self.wording == "expected":
                self.fail(key, self._want("a positive number" if lo_open and lo == 0 else f"a number >= {lo:g}",
                                         value))
            self.fail(key, f"must be {'>' if lo_open else '>='} {lo:g}, got {v:g}")
        if hi is not None and v > hi:
            self.fail(key, f"must be <= {hi:g}, got {v:g}" if self.wording == "must" else
                      self._want(f"a number <= {hi:g}", value))
        return v

    def whole(self, value, key: str, lo: Optional[int] = None, floats: bool = False) -> int:
        """A whole number >= ``lo`` (``floats``: a float without a fraction too)."""
        if isinstance(value, bool) or not isinstance(value, int):
            if not (floats and isinstance(value, float) and math.isfinite(value) and value == int(value)):
                self.fail(key, self._want("a whole number", value))
        value = int(value)
        if lo is not None and value < lo:
            self.fail(key, f"must be >= {lo}, got {value}" if self.wording == "must" else
                      self._want(f"a whole number >= {lo}", value))
        return value

    def boolean(self, value, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, self._want("true or false", value))
        return value

    def text(self, value, key: str) -> str:
        """A non-empty text, stripped (``wording="expected"``: as written)."""
        if not isinstance(value, str) or not value.strip():
            self.fail(key, self._want("a non-empty string", value))
        return value.strip() if self.wording == "must" else value

    def choice(self, value, key: str, choices: Sequence[str]):
        if value not in choices:
            self.fail(key, self._want(f"one of {', '.join(choices)}", value))
        return value

    # ------------------------------------------------------------------------------------------- lists

    def vector(self, value, key: str, n: Optional[int] = None, what: str = "numbers") -> Tuple[float, ...]:
        """A list of ``n`` finite numbers (any number when None); ``what`` says what they are."""
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            count = f"{n} " if n is not None else ""
            self.fail(key, self._want(f"a list of {count}{what}", value))
        out = tuple(self.number(x, f"{key}[{i}]") for i, x in enumerate(value))
        if n is not None and len(out) != n:
            self.fail(key, f"must have {n} entries ({what}), got {len(out)}")
        return out

    def numbers(self, value, key: str, n: int) -> list:
        """Exactly ``n`` finite numbers (robot YAML's and sensors' phrasing: ``expected 3 numbers, got ...``)."""
        if not isinstance(value, (list, tuple)) or len(value) != n:
            self.fail(key, self._want(f"{n} numbers", value))
        return [self.number(x, f"{key}[{i}]") for i, x in enumerate(value)]

    def names(self, value, key: str) -> Tuple[str, ...]:
        """A non-empty list of non-empty texts."""
        items = self.sequence(value, key, "names", non_empty=True)
        return tuple(self.text(x, f"{key}[{i}]") for i, x in enumerate(items))
