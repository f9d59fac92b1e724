"""A headless run's metrics (docs/campaigns.md, Metrics): tracking errors, settling time, overshoot, command
saturation, the energy balance residual and faults, computed on each robot's record, plus a user's function.

The errors are those of the true state against the desired state the controller used, on the rows where it held
a reference (``q_d`` finite): the base position error ``|p - p_d|`` [m], the base attitude error, the angle of
``R_d^T R`` [rad] (the geodesic distance on SO(3), Huynh 2009; for unit quaternions
``2 atan2(|vec(q_d^* q)|, |scalar(q_d^* q)|)``), and the joint error ``max_j |q_j - q_d,j|`` [rad or m]. The contact metrics (issue 30) read the base's height
and tilt and the free objects' positions (``RobotRecord.objects_q``) on every row: a legged robot that stays up
and holds its height after a push, an object grasped, carried and not dropped. ROS-free, numpy only.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from mbs_ros.campaign.spec import SIGNALS, MetricSpec

__all__ = ["compute_metrics", "robot_metric", "error_signal", "settling_time", "overshoot", "user_function",
           "base_position", "attitude_angle", "base_tilt", "CONTACT_METRICS"]

_POSITION = {"se3": 3, "so3xr3": 3, "schoenflies": 3, "se2": 2}  # base group -> position entries at q[0:n]
_QUATERNION = {"se3": 3, "so3xr3": 3, "so3": 0}  # base group -> first index of [qx qy qz qw] in q
_YAW = {"se2": 2, "schoenflies": 3}  # base group -> first index of [cos yaw, sin yaw] in q


def compute_metrics(campaign, run) -> Dict[str, float]:
    """Every metric of ``campaign`` on ``run`` (a :class:`mbs_ros.headless.HeadlessRun`): ``{name: value}`` for a
    one-robot scenario, ``{"<namespace>/<name>": value}`` for several; a python metric once per run (``name``,
    or ``name.key`` for each key of the dict it returns). Values are floats (NaN: not defined for this robot, e.g.
    a joint error of a robot without joints)."""
    robots = list(run.robots.values())
    out: Dict[str, float] = {}
    for spec in campaign.metrics:
        if spec.kind == "python":
            function = user_function(spec.params["function"], getattr(campaign, "python_path", ()))
            value = _contained(spec.params["function"], function, run)
            if isinstance(value, dict):
                out.update({f"{spec.name}.{k}": _float(v, f"{spec.name}.{k}") for k, v in value.items()})
            else:
                out[spec.name] = _float(value, spec.name)
            continue
        for rec in robots:
            name = spec.name if len(robots) == 1 else f"{rec.namespace}/{spec.name}"
            out[name] = robot_metric(spec, rec, run.fault)
    return out


def _float(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"metric {name}: the function returned {type(value).__name__}, not a number")
    return float(value)


def user_function(text: str, python_path: Sequence[str] = ()) -> Callable:
    """The function ``pkg.module:func`` names; ValueError saying what is missing. A campaign file is code: the
    module is imported, and runs, as the file names it, from ``python_path`` (the campaign's ``python_path:``
    directories) and the installed packages only; the working directory is not searched (a ``metrics.py`` lying
    where the campaign was started is not imported by accident) unless ``python_path`` lists it. Whatever the
    import raises, SystemExit included, is a ValueError of this run."""
    module, _, func = text.partition(":")
    try:
        with _import_path(python_path):
            f = getattr(importlib.import_module(module), func)
    except ImportError as e:
        raise ValueError(f"python metric {text}: cannot import {module}: {e}") from None
    except AttributeError:
        raise ValueError(f"python metric {text}: {module} has no {func}") from None
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001 - the user's module: this run's error
        raise ValueError(f"python metric {text}: importing {module} raised {_raised(e)}") from None
    if not callable(f):
        raise ValueError(f"python metric {text}: not a function")
    return f


def _contained(text: str, function: Callable, run):
    """``function(run)``; whatever it raises (SystemExit and KeyboardInterrupt included: neither may end the
    campaign's worker or the campaign) is a ValueError naming the metric, so the run's row is an error saying so."""
    try:
        return function(run)
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001 - contained to this run
        raise ValueError(f"python metric {text} raised {_raised(e)}") from None


def _raised(e: BaseException) -> str:
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}({text})" if text else type(e).__name__


@contextlib.contextmanager
def _import_path(python_path: Sequence[str]):
    """``sys.path`` for one import: ``python_path`` first, then the interpreter's path without the working
    directory (``''``, ``'.'`` or its absolute path, which ``python -m`` and ``python -c`` put first)."""
    cwd = os.path.realpath(os.getcwd())
    saved = list(sys.path)
    sys.path[:] = list(python_path) + [p for p in saved
                                       if p not in ("", ".") and os.path.realpath(p) != cwd]
    try:
        yield
    finally:
        sys.path[:] = saved


def robot_metric(spec: MetricSpec, rec, fault: Optional[str] = None) -> float:
    """Built-in metric ``spec`` of one robot's record (a :class:`mbs_ros.headless.RobotRecord`); ``fault`` the
    run's (counted by ``faults``)."""
    kind = spec.kind
    if kind == "faults":
        return float((1 if fault else 0) + int(rec.control_errors))
    if kind == "saturation_fraction":
        sat = np.asarray(rec.saturated, dtype=bool)
        return float(sat.mean()) if sat.size else math.nan
    if kind == "energy_residual":
        res = rec.energy_residual
        return float(np.max(np.abs(res))) if res is not None and len(res) else math.nan
    if kind in CONTACT_METRICS:
        return CONTACT_METRICS[kind](rec, spec.params)
    if kind in ("settling_time", "overshoot"):
        signal = spec.params.get("signal") or _default_signal(rec)
        if kind == "settling_time":
            t, e = error_signal(rec, signal)
            return settling_time(t, e, float(spec.params["band"]))
        return overshoot(rec, signal)
    stat, _, rest = kind.partition("_")
    signal = rest[: -len("_error")]
    if signal not in SIGNALS or stat not in ("final", "max", "rms"):
        raise ValueError(f"unknown metric {kind}")
    _t, e = error_signal(rec, signal)
    if e.size == 0:
        return math.nan
    return float({"final": e[-1], "max": np.max(e), "rms": np.sqrt(np.mean(e ** 2))}[stat])


def _default_signal(rec) -> str:
    if rec.base_group in _POSITION:
        return "base_position"
    return "base_attitude" if rec.base_group in _QUATERNION else "joint"


def _referenced(rec) -> np.ndarray:
    """Rows where the controller held a reference: every entry of q_d finite."""
    q_d = np.asarray(rec.q_d, dtype=float)
    return np.all(np.isfinite(q_d), axis=1) if q_d.size else np.zeros(len(rec.t), dtype=bool)


def base_position(q: np.ndarray, group: str) -> Optional[np.ndarray]:
    """(N, 3) base positions of configurations ``q`` (N, nq) on ``group`` (z = 0 on se2); None without one."""
    n = _POSITION.get(group)
    if n is None:
        return None
    p = np.zeros((q.shape[0], 3))
    p[:, :n] = q[:, :n]
    return p


def attitude_angle(q: np.ndarray, q_d: np.ndarray, group: str) -> Optional[np.ndarray]:
    """(N,) angle of ``R_d^T R`` [rad] in [0, pi]; None for a base without attitude (fixed)."""
    if group in _QUATERNION:
        i = _QUATERNION[group]
        a, b = q_d[:, i:i + 4], q[:, i:i + 4]
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        w = a[:, 3] * b[:, 3] + np.sum(a[:, :3] * b[:, :3], axis=1)  # scalar part of a^* b
        v = a[:, 3:4] * b[:, :3] - b[:, 3:4] * a[:, :3] - np.cross(a[:, :3], b[:, :3])
        return 2.0 * np.arctan2(np.linalg.norm(v, axis=1), np.abs(w))
    if group in _YAW:
        i = _YAW[group]
        return np.abs(_yaw_difference(q[:, i:i + 2], q_d[:, i:i + 2]))
    return None


def _yaw_difference(cs: np.ndarray, cs_d: np.ndarray) -> np.ndarray:
    """yaw - yaw_d wrapped to (-pi, pi] from (cos, sin) columns."""
    return np.arctan2(cs[:, 1] * cs_d[:, 0] - cs[:, 0] * cs_d[:, 1], cs[:, 0] * cs_d[:, 0] + cs[:, 1] * cs_d[:, 1])


def _joint_part(rec, q: np.ndarray) -> Optional[np.ndarray]:
    nj = len(rec.joint_names)
    if nj == 0:
        return None
    joints = q[:, rec.nq_base:]
    if joints.shape[1] != nj:  # continuous joints as (cos, sin): one angle per joint needs their types
        return np.full((q.shape[0], nj), math.nan)
    return joints


def error_signal(rec, signal: str):
    """``(t, e)`` on the rows with a reference: ``e`` the base position error [m], the attitude angle [rad] or the
    largest joint error [rad or m] (empty arrays when the robot has no such part)."""
    rows = _referenced(rec)
    t = np.asarray(rec.t, dtype=float)[rows]
    q, q_d = np.asarray(rec.q, dtype=float)[rows], np.asarray(rec.q_d, dtype=float)[rows]
    if signal == "base_position":
        p, p_d = base_position(q, rec.base_group), base_position(q_d, rec.base_group)
        e = None if p is None else np.linalg.norm(p - p_d, axis=1)
    elif signal == "base_attitude":
        e = attitude_angle(q, q_d, rec.base_group)
    elif signal == "joint":
        j, j_d = _joint_part(rec, q), _joint_part(rec, q_d)
        e = None if j is None else np.max(np.abs(j - j_d), axis=1)
    else:
        raise ValueError(f"unknown signal {signal!r} (one of {', '.join(SIGNALS)})")
    if e is None:
        return np.zeros(0), np.zeros(0)
    return t, e


def settling_time(t: np.ndarray, e: np.ndarray, band: float) -> float:
    """The first time ``t_k`` after which ``e`` stays inside the band (``e_j <= band`` for every ``j >= k``):
    ``t[0]`` when it never leaves it, ``inf`` when it is outside at the last row, NaN without rows. Any NaN in
    ``e`` counts as outside."""
    t, e = np.asarray(t, dtype=float), np.asarray(e, dtype=float)
    if e.size == 0:
        return math.nan
    outside = ~(e <= band)
    if outside[-1]:
        return math.inf
    if not outside.any():
        return float(t[0])
    return float(t[np.flatnonzero(outside)[-1] + 1])


def overshoot(rec, signal: str) -> float:
    """How far the state went beyond the final reference, along the step from the first referenced state to it:
    with ``d_k`` the state minus the final reference (a vector of the base position [m]; the rotation vector of
    ``R_f^T R_k`` [rad]; per joint [rad or m]) and ``u = -d_0/|d_0|`` the step's direction, ``max(0, max_k
    d_k . u)``; for joints the largest over the joints that step (``d_0 != 0``). 0 without a step, NaN without
    rows (an overshoot is a percentage only of a scalar step; a vector's is reported in its unit)."""
    rows = _referenced(rec)
    q, q_d = np.asarray(rec.q, dtype=float)[rows], np.asarray(rec.q_d, dtype=float)[rows]
    if q.shape[0] == 0:
        return math.nan
    if signal == "base_position":
        p, p_d = base_position(q, rec.base_group), base_position(q_d, rec.base_group)
        if p is None:
            return math.nan
        return _beyond(p - p_d[-1])
    if signal == "base_attitude":
        d = _rotation_vectors(q, np.repeat(q_d[-1:], len(q), axis=0), rec.base_group)
        return math.nan if d is None else _beyond(d)
    if signal != "joint":
        raise ValueError(f"unknown signal {signal!r} (one of {', '.join(SIGNALS)})")
    j, j_d = _joint_part(rec, q), _joint_part(rec, q_d)
    if j is None:
        return math.nan
    worst = 0.0
    for col in range(j.shape[1]):
        worst = max(worst, _beyond((j[:, col] - j_d[-1, col])[:, None]))
    return worst if np.all(np.isfinite(j)) else math.nan


def _beyond(d: np.ndarray) -> float:
    n0 = np.linalg.norm(d[0])
    if not np.isfinite(n0):
        return math.nan
    if n0 == 0.0:
        return 0.0
    return float(max(0.0, np.max(d @ (-d[0] / n0))))


def _rotation_vectors(q: np.ndarray, q_f: np.ndarray, group: str) -> Optional[np.ndarray]:
    """(N, 3) rotation vectors of ``R_f^T R`` (log of SO(3))."""
    if group in _QUATERNION:
        i = _QUATERNION[group]
        a, b = q_f[:, i:i + 4], q[:, i:i + 4]
        w = a[:, 3] * b[:, 3] + np.sum(a[:, :3] * b[:, :3], axis=1)
        v = a[:, 3:4] * b[:, :3] - b[:, 3:4] * a[:, :3] - np.cross(a[:, :3], b[:, :3])
        v = v * np.where(w < 0, -1.0, 1.0)[:, None]  # q and -q are one rotation: take the short way
        s = np.linalg.norm(v, axis=1)
        angle = 2.0 * np.arctan2(s, np.abs(w))
        with np.errstate(invalid="ignore", divide="ignore"):
            axis = np.where(s[:, None] > 0, v / s[:, None], 0.0)
        return axis * angle[:, None]
    if group in _YAW:
        i = _YAW[group]
        out = np.zeros((q.shape[0], 3))
        out[:, 2] = _yaw_difference(q[:, i:i + 2], q_f[:, i:i + 2])
        return out
    return None


# ------------------------------------------------------------------------------------------ contact metrics


def base_tilt(q: np.ndarray, group: str) -> Optional[np.ndarray]:
    """(N,) angle between the base's z axis and the world's [rad], yaw not counted: for a unit quaternion
    ``[x y z w]``, ``cos tilt = R_zz = w^2 + z^2 - x^2 - y^2``, so ``tilt = 2 atan2(|(x, y)|, |(z, w)|)``;
    None for a base without a quaternion."""
    if group not in _QUATERNION:
        return None
    i = _QUATERNION[group]
    x, y, z, w = (q[:, i + k] for k in range(4))
    return 2.0 * np.arctan2(np.hypot(x, y), np.hypot(z, w))


def _rows_after(rec, after: float) -> np.ndarray:
    return np.asarray(rec.t, dtype=float) >= float(after)


def _stays_up(rec, p) -> float:
    """1 if on every row from ``after`` the base is at least ``min_height`` high and tilted at most ``max_tilt``,
    else 0 (a fall); NaN without a base position and attitude or without rows."""
    q = np.asarray(rec.q, dtype=float)
    pos, tilt = base_position(q, rec.base_group), base_tilt(q, rec.base_group)
    rows = _rows_after(rec, p["after"])
    if pos is None or tilt is None or not rows.any():
        return math.nan
    up = (pos[rows, 2] >= float(p["min_height"])) & (tilt[rows] <= float(p["max_tilt"]))
    return float(np.all(up))


def _base_height_error(stat: str):
    def metric(rec, p) -> float:
        """|z - z_ref| on the rows from ``after``, its last (final) or largest (max) value: ``z_ref`` the base
        reference's height (``reference``, rows with a reference only) or the base's own height on the last row
        before ``after`` (``rest``: the height it stood at before a push at ``after``). NaN when not defined."""
        q = np.asarray(rec.q, dtype=float)
        pos = base_position(q, rec.base_group)
        if pos is None:
            return math.nan
        rows = _rows_after(rec, p["after"])
        if p["reference"] == "rest":
            before = np.flatnonzero(~rows)
            if before.size == 0:
                return math.nan
            ref = np.full(len(q), pos[before[-1], 2])
        else:
            q_d = np.asarray(rec.q_d, dtype=float)
            rows &= _referenced(rec)
            ref = base_position(np.where(np.isfinite(q_d), q_d, 0.0), rec.base_group)[:, 2]
        if not rows.any():
            return math.nan
        e = np.abs(pos[rows, 2] - ref[rows])
        return float(e[-1] if stat == "final" else np.max(e))
    return metric


def _max_base_tilt(rec, p) -> float:
    tilt = base_tilt(np.asarray(rec.q, dtype=float), rec.base_group)
    rows = _rows_after(rec, p["after"])
    return math.nan if tilt is None or not rows.any() else float(np.max(tilt[rows]))


def _object_positions(rec, p) -> Optional[np.ndarray]:
    """(N, 3) positions of object ``p["object"]`` (its configuration's first three entries: SO(3)xR3 and SE(3)
    alike), None when the run has no such object."""
    objs = rec.objects_q
    k = int(p["object"])
    if objs is None or objs.ndim != 3 or k >= objs.shape[1] or objs.shape[0] == 0:
        return None
    return np.asarray(objs[:, k, :3], dtype=float)


def _object_lifted(rec, p) -> float:
    """The object's largest height above its first row's [m] (0 if it never rose)."""
    x = _object_positions(rec, p)
    return math.nan if x is None else float(max(0.0, np.max(x[:, 2] - x[0, 2])))


def _object_tilt(rec, p) -> float:
    """The object's largest tilt from its start attitude on the rows from ``after`` [rad]. Without ``axis``: the
    angle between the world's vertical and where the rotation since the first row, ``R_k R_0ᵀ``, takes it (a turn
    about the vertical not counted), by :func:`base_tilt`'s formula on the quaternion ``q_k q_0⁻¹``. With ``axis``
    (a direction ``a`` in the object's frame, a bar's or a handle's axis): how far that direction's elevation
    moved, ``|asin((R_k a)_z) − asin((R_0 a)_z)|`` — a turn about the vertical or about ``a`` itself (a cylinder
    rolling in the jaws, invisible in its shape) not counted. A bar that pivots in the jaws about one end left on the
    seabed rises at its centre, so ``object_lifted`` alone would count it lifted."""
    objs = rec.objects_q
    k = int(p["object"])
    if objs is None or objs.ndim != 3 or k >= objs.shape[1] or objs.shape[0] == 0 or objs.shape[2] < 7:
        return math.nan
    rows = _rows_after(rec, p["after"])
    if not rows.any():
        return math.nan
    quat = np.asarray(objs[:, k, 3:7], dtype=float)  # x, y, z, w
    v, w = quat[:, :3], quat[:, 3]
    if p.get("axis") is not None:
        a = np.asarray(p["axis"], dtype=float)
        a = a / np.linalg.norm(a)
        unit = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        v, w = unit[:, :3], unit[:, 3]
        # (R a)_z for the unit quaternion (v, w): a + 2w (v × a) + 2 v × (v × a), its z row
        va = np.cross(v, a)
        up = a[2] + 2.0 * w * va[:, 2] + 2.0 * np.cross(v, va)[:, 2]
        elevation = np.arcsin(np.clip(up, -1.0, 1.0))
        return float(np.max(np.abs(elevation - elevation[0])[rows]))
    v0, w0 = -quat[0, :3], quat[0, 3]  # q_0's inverse (its conjugate)
    rel = np.empty_like(quat)  # the Hamilton product q_k q_0⁻¹
    rel[:, 3] = w * w0 - v @ v0
    rel[:, :3] = w[:, None] * v0 + w0 * v + np.cross(v, v0)
    tilt = base_tilt(rel, "so3")
    return float(np.max(tilt[rows]))


def _object_dropped(rec, p) -> float:
    """1 if, after rising ``lift`` above its start, the object came back within ``near`` of its start height
    before ``before`` [s] (a set-down after it does not count; None: the whole run), else 0: a grasped object
    that fell back to the seabed. 0 if it was never lifted."""
    x = _object_positions(rec, p)
    if x is None:
        return math.nan
    t = np.asarray(rec.t, dtype=float)
    dz = x[:, 2] - x[0, 2]
    lifted = np.flatnonzero(dz >= float(p["lift"]))
    if lifted.size == 0:
        return 0.0
    later = np.arange(len(t)) > lifted[0]
    if p["before"] is not None:
        later &= t < float(p["before"])
    return float(np.any(later & (dz <= float(p["near"]))))


def _carried_distance(rec, p) -> float:
    """The object's horizontal distance from its first row's position to its last [m]."""
    x = _object_positions(rec, p)
    return math.nan if x is None else float(np.hypot(*(x[-1, :2] - x[0, :2])))


def _time_to_carry(rec, p) -> float:
    """The first time the object's position is within ``tolerance`` of ``target`` [s]; inf if never."""
    x = _object_positions(rec, p)
    if x is None:
        return math.nan
    near = np.linalg.norm(x - np.asarray(p["target"], dtype=float), axis=1) <= float(p["tolerance"])
    return float(np.asarray(rec.t, dtype=float)[np.argmax(near)]) if near.any() else math.inf


def _grasp_success(rec, p) -> float:
    """1 if the object rose at least ``lift`` above its start (it went up with the gripper), else 0."""
    lifted = _object_lifted(rec, p)
    return lifted if math.isnan(lifted) else float(lifted >= float(p["lift"]))


#: contact metric -> f(record, params)
CONTACT_METRICS: Dict[str, Callable] = {
    "stays_up": _stays_up,
    "fell": lambda rec, p: 1.0 - _stays_up(rec, p),
    "final_base_height_error": _base_height_error("final"),
    "max_base_height_error": _base_height_error("max"),
    "max_base_tilt": _max_base_tilt,
    "object_lifted": _object_lifted,
    "object_dropped": _object_dropped,
    "object_tilt": _object_tilt,
    "carried_distance": _carried_distance,
    "time_to_carry": _time_to_carry,
    "grasp_success": _grasp_success,
}
