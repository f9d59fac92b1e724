"""The command messages' fields straight from their serialised bytes (ROS-free).

rclpy turns every message it takes into Python objects through the message classes' own ``__init__`` (a
``WrenchStamped`` is six nested objects, 16 µs of CPU); at 1 kHz and three command messages per control period that is
a tenth of the dynamics node's step. The node subscribes to its commands raw (rclpy hands over the serialised bytes)
and reads here the few fields it uses: the stamp, the frame, the names and the numbers.

The bytes are plain CDR (XCDR1, as every ROS 2 middleware sends these types): a 4-byte encapsulation header (its
second byte 1: little-endian, 0: big-endian), then the fields in order, each primitive aligned to its size from the
start of the payload, strings as a uint32 length (with the terminating NUL) and the bytes, sequences as a uint32
count and the elements. Each reader returns the tuple of the fields it reads, or None for anything it does not read
exactly (another encapsulation, a length past the end, a string without its NUL, more bytes left over than
padding): the caller then deserialises the message the ordinary way, so that a reader can only be faster, never
different.
"""
from __future__ import annotations

import functools
import struct
from typing import List, Optional, Tuple

import numpy as np

__all__ = ["wrench_stamped", "joint_state", "float64_multi_array"]

_U32 = {"<": struct.Struct("<I"), ">": struct.Struct(">I")}
_STAMP = {"<": struct.Struct("<iI"), ">": struct.Struct(">iI")}
_F64 = {"<": np.dtype("<f8"), ">": np.dtype(">f8")}


class _Short(Exception):
    """The bytes end before the field (or do not form one): not read here."""


def _order(data: bytes) -> Optional[str]:
    """``"<"`` or ``">"`` for plain CDR (little- or big-endian), None for another encapsulation."""
    if len(data) < 4 or data[0] != 0 or data[1] not in (0, 1):
        return None
    return "<" if data[1] == 1 else ">"


def _u32(e: str, data: bytes, p: int) -> Tuple[int, int]:
    """A uint32 at payload offset ``p`` (aligned to 4): ``(value, offset after it)``."""
    p = (p + 3) & ~3
    if p + 8 > len(data):  # 4 bytes of header before the payload
        raise _Short
    return _U32[e].unpack_from(data, p + 4)[0], p + 4


def _string(e: str, data: bytes, p: int) -> Tuple[str, int]:
    n, p = _u32(e, data, p)
    if n < 1 or p + n + 4 > len(data) or data[p + 4 + n - 1] != 0:
        raise _Short
    return data[p + 4:p + 4 + n - 1].decode("utf-8", "replace"), p + n


def _doubles(e: str, data: bytes, p: int) -> Tuple[np.ndarray, int]:
    """A sequence<double>: a float64 array in this machine's byte order (a copy)."""
    n, p = _u32(e, data, p)
    if n == 0:
        return np.zeros(0), p
    p = (p + 7) & ~7
    if p + 8 * n + 4 > len(data):
        raise _Short
    return np.frombuffer(data, dtype=_F64[e], count=n, offset=p + 4).astype(float), p + 8 * n


def _stamp(e: str, data: bytes) -> Tuple[int, int]:
    if len(data) < 12:
        raise _Short
    return _STAMP[e].unpack_from(data, 4)


#: bytes a serialiser may leave after the last field: padding, and the slack of a size computed ahead (rclpy's
#: ``serialize_message`` counts the 8-byte alignment of every empty sequence of doubles, up to 4 bytes each)
SLACK = 32


def _done(data: bytes, p: int) -> bool:
    """Nothing left after payload offset ``p`` but padding (fewer than :data:`SLACK` bytes)."""
    return 0 <= len(data) - 4 - p < SLACK


def _reader(body):
    """A reader of plain CDR: ``body(e, data)`` with the byte order ``e``; None for another encapsulation or bytes
    that end before a field (:class:`_Short`)."""

    @functools.wraps(body)
    def read(data: bytes):
        e = _order(data)
        if e is None:
            return None
        try:
            return body(e, data)
        except _Short:
            return None

    return read


@_reader
def wrench_stamped(e: str, data: bytes) -> Optional[Tuple[int, int, str, np.ndarray]]:
    """``geometry_msgs/WrenchStamped``: ``(sec, nanosec, frame_id, [F; τ])`` or None (not read here)."""
    sec, nanosec = _stamp(e, data)
    frame_id, p = _string(e, data, 8)
    p = (p + 7) & ~7
    if p + 48 + 4 > len(data) or not _done(data, p + 48):
        return None
    return sec, nanosec, frame_id, np.frombuffer(data, dtype=_F64[e], count=6, offset=p + 4).astype(float)


#: the last names read (a controller sends the same names every time): (order, start, their bytes, names, end)
_last_names = [None]


def _names(e: str, data: bytes, p: int) -> Tuple[List[str], int]:
    """A sequence<string> at payload offset ``p``: the same bytes as the last time give the same (new) list."""
    last = _last_names[0]
    if last is not None and last[0] == e and last[1] == p and data[p + 4:last[4] + 4] == last[2]:
        return list(last[3]), last[4]
    count, q = _u32(e, data, p)
    if count > len(data):
        raise _Short
    names = []
    for _ in range(count):
        name, q = _string(e, data, q)
        names.append(name)
    _last_names[0] = (e, p, data[p + 4:q + 4], tuple(names), q)
    return names, q


@_reader
def joint_state(e: str, data: bytes) -> Optional[Tuple[int, int, List[str], np.ndarray]]:
    """``sensor_msgs/JointState``: ``(sec, nanosec, name, effort)`` or None (not read here)."""
    sec, nanosec = _stamp(e, data)
    _frame, p = _string(e, data, 8)
    names, p = _names(e, data, p)
    _position, p = _doubles(e, data, p)
    _velocity, p = _doubles(e, data, p)
    effort, p = _doubles(e, data, p)
    return (sec, nanosec, names, effort) if _done(data, p) else None


@_reader
def float64_multi_array(e: str, data: bytes) -> Optional[Tuple[np.ndarray]]:
    """``std_msgs/Float64MultiArray``: ``(data,)`` or None (not read here). The layout is read past, not used (the
    node never used it)."""
    dims, p = _u32(e, data, 0)
    if dims > len(data):
        return None
    for _ in range(dims):
        _label, p = _string(e, data, p)
        _size, p = _u32(e, data, p)
        _stride, p = _u32(e, data, p)
    _offset, p = _u32(e, data, p)
    values, p = _doubles(e, data, p)
    return (values,) if _done(data, p) else None
