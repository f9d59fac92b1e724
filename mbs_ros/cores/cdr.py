"""The command messages' fields straight from their serialised bytes (ROS-free).

rclpy turns every message it takes into Python objects through the message classes' own ``__init__`` (a
``WrenchStamped`` is six nested objects, 16 µs of CPU); at 1 kHz and three command messages per control period that is
a tenth of the dynamics node's step. The node subscribes to its commands raw (rclpy hands over the serialised bytes)
and reads here the few fields it uses: the stamp, the frame, the names and the numbers.

The other way, the state the node sends at the control rate: rclpy's ``publish(msg)`` converts the message and, to
each of its subscribers, costs about as much again (an Odometry to two subscribers: 69 µs, against 14 µs for its
bytes). :func:`odometry_writer`, :func:`joint_state_writer` and :func:`float64_multi_array_writer` write the few
fields that change (the stamp and the numbers) into the message's own serialisation, kept (its frames, names and
covariances as rclpy wrote them), and the node publishes those bytes; a template they do not parse exactly gives None, and the node publishes the message.

The controller is the mirror: it takes its state (odometry, joint states) raw (:func:`odometry`,
:func:`joint_state_motion`) and sends its commands as bytes (:func:`wrench_stamped_writer` and the two above).

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

__all__ = ["wrench_stamped", "joint_state", "joint_state_motion", "odometry", "float64_multi_array",
           "odometry_writer", "joint_state_writer", "wrench_stamped_writer", "float64_multi_array_writer"]

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


def _last_doubles(e: str, data, p: int, n: int) -> Optional[np.ndarray]:
    """The ``n`` doubles (aligned to 8 from payload offset ``p``) that end the message, a view of ``data`` in its
    byte order (writable where ``data`` is), or None where they do not fit or more than padding follows them."""
    p = (p + 7) & ~7
    return np.frombuffer(data, dtype=_F64[e], count=n, offset=p + 4) if _done(data, p + 8 * n) else None


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
    wrench = _last_doubles(e, data, p, 6)
    return None if wrench is None else (sec, nanosec, frame_id, wrench.astype(float))


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


def _joint_state_fields(e: str, data: bytes):
    """``sensor_msgs/JointState``'s ``(sec, nanosec, name, position, velocity, effort)``, or None (bytes left over
    beyond padding)."""
    sec, nanosec = _stamp(e, data)
    _frame, p = _string(e, data, 8)
    names, p = _names(e, data, p)
    position, p = _doubles(e, data, p)
    velocity, p = _doubles(e, data, p)
    effort, p = _doubles(e, data, p)
    return (sec, nanosec, names, position, velocity, effort) if _done(data, p) else None


@_reader
def joint_state(e: str, data: bytes) -> Optional[Tuple[int, int, List[str], np.ndarray]]:
    """``sensor_msgs/JointState``: ``(sec, nanosec, name, effort)`` or None (not read here)."""
    f = _joint_state_fields(e, data)
    return None if f is None else (f[0], f[1], f[2], f[5])


@_reader
def joint_state_motion(e: str, data: bytes) -> Optional[Tuple[int, int, List[str], np.ndarray, np.ndarray]]:
    """``sensor_msgs/JointState`` as a state: ``(sec, nanosec, name, position, velocity)`` or None (not read
    here)."""
    f = _joint_state_fields(e, data)
    return None if f is None else f[:5]


@_reader
def odometry(e: str, data: bytes) -> Optional[Tuple[int, int, str, str, np.ndarray, np.ndarray]]:
    """``nav_msgs/Odometry``: ``(sec, nanosec, frame_id, child_frame_id, pose [p; quat_xyzw] (7,), twist [v; ω]
    (6,))`` or None (not read here); the covariances are read past."""
    sec, nanosec = _stamp(e, data)
    frame_id, p = _string(e, data, 8)
    child, p = _string(e, data, p)
    values = _last_doubles(e, data, p, 85)  # pose (7), its covariance (36), twist (6), its covariance (36)
    if values is None:
        return None
    values = values[:49].astype(float)
    return sec, nanosec, frame_id, child, values[0:7], values[43:49]


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


def _writer(body):
    """A maker of writers from a template (a message serialised once): ``body(e, buf)`` with its byte order and a
    writable copy of it; None for another encapsulation or a template that ends before a field (:class:`_Short`)."""

    @functools.wraps(body)
    def make(template: bytes):
        e = _order(template)
        if e is None:
            return None
        try:
            return body(e, bytearray(template))
        except _Short:
            return None

    return make


@_writer
def odometry_writer(e: str, buf: bytearray):
    """``write(sec, nanosec, p, quat_xyzw, twist) -> bytes``: ``nav_msgs/Odometry``'s bytes, the template (the
    message serialised once) with the stamp, the pose and the twist (linear, angular) written in; None where the
    template is not plain CDR or not an Odometry's exact bytes."""
    _frame, p = _string(e, buf, 8)
    _child, p = _string(e, buf, p)
    # pose (7), its covariance (36), twist (6), its covariance (36): 85 doubles in a row
    values, stamp = _last_doubles(e, buf, p, 85), _STAMP[e]
    if values is None:
        return None

    def write(sec: int, nanosec: int, p, quat, twist) -> bytes:
        stamp.pack_into(buf, 4, sec, nanosec)
        values[0:3], values[3:7], values[43:49] = p, quat, twist
        return bytes(buf)

    return write


@_writer
def joint_state_writer(e: str, buf: bytearray):
    """``write(sec, nanosec, position, velocity, effort) -> bytes``: ``sensor_msgs/JointState``'s bytes, the
    template (the message serialised once: its frame, names and the lengths of its three sequences) with the stamp
    and the three sequences (as many values each as the template's) written in; None where the template is not
    plain CDR or not a JointState's exact bytes."""
    _frame, p = _string(e, buf, 8)
    count, p = _u32(e, buf, p)
    for _ in range(min(count, len(buf))):
        _name, p = _string(e, buf, p)
    offsets, sizes = [], []
    for _ in range(3):
        n, p = _u32(e, buf, p)
        p = (p + 7) & ~7 if n else p
        offsets.append(p)
        sizes.append(n)
        p += 8 * n
    if count > len(buf) or not _done(buf, p):
        return None
    arrays, stamp = [np.frombuffer(buf, dtype=_F64[e], count=n, offset=o + 4) for o, n in zip(offsets, sizes)], _STAMP[e]

    def write(sec: int, nanosec: int, position, velocity, effort) -> bytes:
        stamp.pack_into(buf, 4, sec, nanosec)
        arrays[0][:], arrays[1][:], arrays[2][:] = position, velocity, effort
        return bytes(buf)

    return write


@_writer
def wrench_stamped_writer(e: str, buf: bytearray):
    """``write(sec, nanosec, wrench) -> bytes``: ``geometry_msgs/WrenchStamped``'s bytes, the template (the message
    serialised once: its frame) with the stamp and the wrench ``[F; τ]`` written in; None where the template is not
    plain CDR or not a WrenchStamped's exact bytes."""
    _frame, p = _string(e, buf, 8)
    values, stamp = _last_doubles(e, buf, p, 6), _STAMP[e]
    if values is None:
        return None

    def write(sec: int, nanosec: int, wrench) -> bytes:
        stamp.pack_into(buf, 4, sec, nanosec)
        values[:] = wrench
        return bytes(buf)

    return write


@_writer
def float64_multi_array_writer(e: str, buf: bytearray):
    """``write(data) -> bytes``: ``std_msgs/Float64MultiArray``'s bytes, the template (the message serialised
    once: no dimensions, its data offset and data's length) with ``data`` (as many values) written in; None where
    the template is not plain CDR or not such a message's exact bytes."""
    dims, p = _u32(e, buf, 0)
    _offset, p = _u32(e, buf, p)
    n, p = _u32(e, buf, p)
    p = (p + 7) & ~7 if n else p
    if dims or not _done(buf, p + 8 * n):
        return None
    values = np.frombuffer(buf, dtype=_F64[e], count=n, offset=p + 4)

    def write(data) -> bytes:
        values[:] = data
        return bytes(buf)

    return write
