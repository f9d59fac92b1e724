"""The reference node's ROS-free core: the scenario's waypoints checked (:class:`Waypoints`) and turned into the
trajectories the node publishes (:func:`trajectories`: the header stamp, each point's ``time_from_start`` as the
``(sec, nanosec)`` of a ``builtin_interfaces/Duration`` and its values), so that the node and a headless run
(:mod:`mbs_ros.headless`) send the controller the same numbers. Stamps and start time: docs/reference_node.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.cores.rotations import quaternion_from_rpy

__all__ = ["ReferenceError", "Waypoints", "waypoints_from_values", "waypoints_from_file", "duration_parts",
           "start_time_ns", "Trajectories", "trajectories", "STAMP_MODES", "ReferenceSetup", "reference_setup",
           "controller_points"]

STAMP_MODES = ("state", "zero")


class ReferenceError(ValueError):
    """Waypoints or parameters this node refuses; the message says which and why."""


class Waypoints:
    """Checked waypoints: base (times, positions (N, 3), rpy (N, 3)) and joints (names, times, positions (M, n))."""

    def __init__(self, base_times=(), base_positions=(), base_rpy=(), joint_names=(), joint_times=(),
                 joint_positions=()):
        self.base_times = _times(base_times, "base_times")
        nb = len(self.base_times)
        self.base_positions = _rows(base_positions, nb, 3, "base_positions", "x, y, z")
        self.base_rpy = (np.zeros((nb, 3)) if len(base_rpy) == 0
                         else _rows(base_rpy, nb, 3, "base_rpy", "roll, pitch, yaw"))
        self.joint_names = tuple(str(n) for n in joint_names)
        if len(set(self.joint_names)) != len(self.joint_names):
            raise ReferenceError(f"joint_names: a joint is named twice: {list(self.joint_names)}")
        self.joint_times = _times(joint_times, "joint_times")
        nj = len(self.joint_times)
        if nj and self.joint_names:
            self.joint_positions = _rows(joint_positions, nj, len(self.joint_names), "joint_positions",
                                         "one per joint of joint_names")
        else:  # names from joint_states: the row length is checked when they are known
            flat = np.asarray(list(joint_positions), dtype=float).reshape(-1)
            if nj and flat.size % nj:
                raise ReferenceError(f"joint_positions: {flat.size} values for {nj} waypoints")
            self.joint_positions = flat.reshape(nj, -1) if nj else np.zeros((0, 0))
        if nj and not self.joint_positions.shape[1]:
            raise ReferenceError("joint_positions: no values")
        if not np.all(np.isfinite(self.joint_positions)):
            raise ReferenceError("joint_positions must be finite")

    @property
    def has_base(self) -> bool:
        return len(self.base_times) > 0

    @property
    def has_joints(self) -> bool:
        return len(self.joint_times) > 0


def _times(values, name: str) -> np.ndarray:
    t = np.asarray(list(values), dtype=float).reshape(-1)
    if not np.all(np.isfinite(t)) or np.any(t < 0.0):
        raise ReferenceError(f"{name} must be finite and >= 0, got {t.tolist()}")
    if np.any(np.diff(t) <= 0.0):
        raise ReferenceError(f"{name} must increase strictly, got {t.tolist()}")
    return t


def _rows(values, n: int, width: int, name: str, what: str) -> np.ndarray:
    flat = np.asarray(list(values), dtype=float).reshape(-1)
    if flat.size != n * width:
        raise ReferenceError(f"{name}: {flat.size} values for {n} waypoints ({width} per waypoint: {what})")
    if not np.all(np.isfinite(flat)):
        raise ReferenceError(f"{name} must be finite")
    return flat.reshape(n, width)


def waypoints_from_values(values: Dict[str, object]) -> Waypoints:
    return Waypoints(values["base_times"], values["base_positions"], values["base_rpy"], values["joint_names"],
                     values["joint_times"], values["joint_positions"])


def waypoints_from_file(path: str) -> Waypoints:
    """Waypoints from a YAML file with the scenario's reference keys (top level, or under ``reference:``)."""
    from mbs_ros.yamlfile import YamlFileError, read_yaml, shown

    try:  # one line, never the content: UTF-8/16/32 by their byte-order mark, the place of a YAML error
        doc = read_yaml(path)
    except YamlFileError as e:
        raise ReferenceError(f"reference_file {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("reference"), dict):
        doc = doc["reference"]
    if not isinstance(doc, dict) or not (set(doc) & {"base", "joints"}) or set(doc) - {"base", "joints",
                                                                                          "joint_names"}:
        raise ReferenceError(f"reference_file {path!r}: needs base and/or joints (and optionally joint_names), "
                             f"got {shown(doc)}")
    try:
        base = doc.get("base") or []
        joints = doc.get("joints") or []
        return Waypoints(
            base_times=[w["time"] for w in base],
            base_positions=[x for w in base for x in w["position"]],
            base_rpy=[x for w in base for x in w.get("rpy", (0.0, 0.0, 0.0))],
            joint_names=doc.get("joint_names") or (),
            joint_times=[w["time"] for w in joints],
            joint_positions=[x for w in joints for x in w["positions"]])
    except (KeyError, TypeError) as e:
        raise ReferenceError(f"reference_file {path!r}: a waypoint lacks {e}") from None


def duration_parts(seconds: float) -> Tuple[int, int]:
    """``(sec, nanosec)`` of a ``builtin_interfaces/Duration`` of ``seconds`` (nanoseconds rounded)."""
    sec = int(math.floor(seconds))
    nanosec = int(round((seconds - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return sec, nanosec


def start_time_ns(start_time: float) -> Optional[int]:
    """The ``start_time`` parameter [s] as a stamp [ns]; None for a negative one (no fixed start)."""
    return int(round(float(start_time) * 1e9)) if start_time >= 0 else None


@dataclass(frozen=True)
class Trajectories:
    """What the node publishes: ``header_ns`` (both headers' stamp), ``base`` (per point ``((sec, nanosec),
    position (3,), quaternion xyzw (4,))``; None without base waypoints), ``joint_names`` and ``joints`` (per point
    ``((sec, nanosec), positions)``; None without joint waypoints)."""

    header_ns: int
    base: Optional[List[tuple]]
    joint_names: Tuple[str, ...]
    joints: Optional[List[tuple]]


def trajectories(wps: Waypoints, stamp_mode: str, start_time_ns: Optional[int], stamp_ns: int, pose,
                 joints: Optional[Dict[str, float]], joint_order: Sequence[str]) -> Trajectories:
    """The trajectories of ``wps`` sent against the newest state (``stamp_ns``, base ``pose`` = (p, quat), joint
    positions by name ``joints``; ``joint_order``: the names of joint_states, for waypoints without joint_names).
    Stamp ``state``: the state's stamp, the state prepended at 0 when the first waypoint is later; ``zero``:
    stamp 0; a ``start_time_ns``: that stamp, the state prepended when it is the state at that time.
    ReferenceError when the joints do not match joint_states."""
    header_ns = stamp_ns if stamp_mode == "state" else 0
    prepend = stamp_mode == "state"  # the state at 0 when the first waypoint is later
    if start_time_ns is not None:
        header_ns, prepend = start_time_ns, stamp_ns == start_time_ns
    base = joint_rows = None
    names: Tuple[str, ...] = ()
    if wps.has_base:
        rows = [(t, p, quaternion_from_rpy(rpy)) for t, p, rpy in
                zip(wps.base_times, wps.base_positions, wps.base_rpy)]
        if prepend and rows[0][0] > 0.0:
            rows.insert(0, (0.0, pose[0], pose[1]))
        base = [(duration_parts(float(t)), p, quat) for t, p, quat in rows]
    if wps.has_joints:
        names = tuple(wps.joint_names) or tuple(joint_order)
        unknown = [n for n in names if n not in joints]
        if unknown:
            raise ReferenceError(f"joint(s) {', '.join(unknown)} not in joint_states ({', '.join(joints)})")
        if wps.joint_positions.shape[1] != len(names):
            raise ReferenceError(f"joint_positions: {wps.joint_positions.shape[1]} values per waypoint for "
                                 f"{len(names)} joints ({', '.join(names)})")
        rows = list(zip(wps.joint_times, wps.joint_positions))
        if prepend and rows[0][0] > 0.0:
            rows.insert(0, (0.0, np.array([joints[n] for n in names])))
        joint_rows = [(duration_parts(float(t)), [float(x) for x in q]) for t, q in rows]
    return Trajectories(header_ns, base, names, joint_rows)


@dataclass(frozen=True)
class ReferenceSetup:
    """The reference node's checked parameters: the waypoints, the ``stamp`` mode, ``start_time`` in ns (None:
    unset), ``min_subscribers``, ``command_timeout`` [s] and ``world_frame``."""

    wps: Waypoints
    stamp_mode: str
    start_time_ns: Optional[int]
    min_subscribers: int
    command_timeout: float
    world_frame: str


def reference_setup(v: Dict[str, object], parameters) -> ReferenceSetup:
    """The reference node's parameter values ``v`` (by name, every one of ``parameters``, the node's table)
    checked and turned into a :class:`ReferenceSetup`; ReferenceError naming the parameter."""
    from mbs_ros.cores.params import ParameterError, check_table

    try:  # the table's types, choices and ranges (mbs_ros.cores.parameters.reference): the one copy of the checks
        # an empty world_frame is the table's default here (the node's own fallback below)
        checked = check_table(v, parameters, custom={"world_frame": lambda values: str(values["world_frame"])})
        v = {**dict(v), **{k: list(x) if isinstance(x, tuple) else x for k, x in checked.items()}}
    except ParameterError as e:
        raise ReferenceError(str(e)) from None
    given = [n for n in ("base_times", "joint_times") if v[n]]
    if v["reference_file"].strip():
        if given:
            raise ReferenceError(f"give either reference_file or waypoint parameters ({', '.join(given)}), not both")
        wps = waypoints_from_file(v["reference_file"].strip())
    else:
        wps = waypoints_from_values(v)
    if not (wps.has_base or wps.has_joints):
        raise ReferenceError("no waypoints: set base_times/base_positions, joint_times/joint_positions or "
                             "reference_file")
    return ReferenceSetup(wps, v["stamp"], start_time_ns(v["start_time"]), int(v["min_subscribers"]),
                          float(v["command_timeout"]),
                          v["world_frame"].strip().lstrip("/") or parameters["world_frame"].default)


def controller_points(traj: Trajectories, base: bool = True, joints: bool = True) -> List[tuple]:
    """What the controller decodes from the reference node's messages of ``traj`` (base_reference when ``base``
    and it has one, then joint_reference when ``joints``): ``(topic, header_ns, sec, nanosec, joint_names,
    values)`` as :func:`mbs_ros.cores.controller.reference_from_points` takes them (the poses as float
    arrays without twists or accelerations; the positions without velocities or accelerations)."""
    out = []
    if base and traj.base is not None:
        poses = [(np.array([float(x) for x in p]), np.array([float(x) for x in quat])) for _d, p, quat in traj.base]
        none = [None] * len(poses)
        out.append(("base_reference", traj.header_ns, [d[0] for d, _p, _q in traj.base],
                    [d[1] for d, _p, _q in traj.base], [], (poses, none, none)))
    if joints and traj.joints is not None:
        empty = [[] for _ in traj.joints]
        out.append(("joint_reference", traj.header_ns, [d[0] for d, _q in traj.joints],
                    [d[1] for d, _q in traj.joints], traj.joint_names, ([q for _d, q in traj.joints], empty, empty)))
    return out
