"""Input checks of the controller node, ROS-free: plain numbers in, a checked state part or
:class:`~mbs_ros.controllers.Reference` out, or the reason it is refused (:class:`Rejected`).

A joint reference (a JointTrajectory's plain data) or a base reference (a MultiDOFJointTrajectory's poses and
twists) starts at its stamp (0: the newest state's), has the current reference prepended at 0 when its first point
is later, and is interpolated by :class:`~mbs_ros.controllers.Reference`. A measured state is a base part (pose and
body twist) and a joints part (by name), made ``(q, v)`` by :func:`state_vector`. The bounds lie far beyond what
the models can do, so no valid input is refused, and close enough that every product the laws form stays finite.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence, Tuple

import numpy as np

from mbs_ros.controllers.reference import Reference
from mbs_ros.dynamics.model import source as ms

__all__ = ["Rejected", "NS", "MAX_POSITION", "MAX_STATE_VELOCITY", "QUATERNION_NORM", "MAX_POINTS", "MAX_DURATION",
           "MIN_SEGMENT", "MAX_VELOCITY", "MAX_ACCELERATION", "MAX_JOINT_REFERENCE", "JOINT_LIMIT_MARGIN",
           "stamp_ns", "check_vector", "unit_quaternion", "point_times", "prepend", "check_point_count", "start_time",
           "check_rates", "reference_position_bounds", "JointReferenceInput", "BaseReferenceInput", "base_state",
           "joint_state", "state_vector"]

NS = 1_000_000_000
MAX_POSITION = 1.0e6  # m: base position components (states and references), joint positions of states
MAX_STATE_VELOCITY = 1.0e4  # m/s, rad/s: state velocity components
QUATERNION_NORM = (0.5, 2.0)  # a quaternion's norm must lie in this range (it is then normalised)
MAX_POINTS = 10_000  # points of a reference
MAX_DURATION = 1.0e6  # s: time_from_start of a reference; |header.stamp - newest state|
MIN_SEGMENT = 1.0e-3  # s between consecutive reference points
MAX_VELOCITY = 1.0e3  # m/s, rad/s: reference velocities (waypoints and interpolated)
MAX_ACCELERATION = 1.0e4  # m/s^2, rad/s^2: reference accelerations (waypoints and interpolated)
MAX_JOINT_REFERENCE = 1.0e3  # rad or m: reference positions of joints without URDF limits (continuous ones)
JOINT_LIMIT_MARGIN = 0.1  # fraction of a joint's URDF range its reference may exceed the range by (>= 0.1)


class Rejected(Exception):
    """An input refused; the message is the reason."""


def stamp_ns(sec: int, nanosec: int, what: str) -> int:
    """A stamp ``(sec, nanosec)`` in ns; Rejected for a negative one or ``nanosec`` ≥ 10⁹."""
    sec, nanosec = int(sec), int(nanosec)
    if sec < 0:
        raise Rejected(f"{what} is negative ({sec} s)")
    if nanosec >= NS:
        raise Rejected(f"{what}.nanosec must be < 1e9, got {nanosec}")
    return sec * NS + nanosec


def check_vector(x: np.ndarray, bound: float, what: str, unit: str) -> None:
    """Rejected unless every component is finite and within ±``bound``."""
    if x.size and np.abs(x).max() <= bound:  # one reduction: NaN fails the comparison, inf exceeds the bound
        return
    if not np.isfinite(x).all():
        raise Rejected(f"{what} must be finite, got {np.array2string(x, threshold=8)}")
    if x.size and np.abs(x).max() > bound:
        raise Rejected(f"{what} must be within ±{bound:g} {unit}, got {np.abs(x).max():.3g}")


def unit_quaternion(quat: np.ndarray, what: str) -> np.ndarray:
    """``quat`` normalised; Rejected unless finite with its norm in ``QUATERNION_NORM``."""
    scale = float(np.abs(quat).max())
    if not math.isfinite(scale):  # a NaN or inf component: the largest magnitude is one
        raise Rejected(f"{what} quaternion must be finite")
    u = quat / scale if scale > 0.0 else None  # no overflow for huge entries; |u| as np.linalg.norm computes it
    n = scale * math.sqrt(u.dot(u)) if scale > 0.0 else 0.0
    lo, hi = QUATERNION_NORM
    if not (lo <= n <= hi):
        raise Rejected(f"{what} quaternion norm {n:.3g} is not in [{lo:g}, {hi:g}]")
    return quat / n


def point_times(sec: Sequence[int], nanosec: Sequence[int]) -> np.ndarray:
    """The points' ``time_from_start`` [s]; Rejected unless ≥ 0, ≤ ``MAX_DURATION`` and strictly increasing."""
    sec = np.asarray(sec, dtype=np.int64)
    nanosec = np.asarray(nanosec, dtype=np.int64)
    if np.any(sec < 0):
        raise Rejected("time_from_start must not be negative")
    if np.any(nanosec >= NS):
        raise Rejected("time_from_start.nanosec must be < 1e9")
    times = sec + 1e-9 * nanosec
    if times[-1] > MAX_DURATION:
        raise Rejected(f"time_from_start up to {times[-1]:g} s: at most {MAX_DURATION:g} s")
    if np.any(np.diff(times) <= 0.0):
        raise Rejected("time_from_start must increase strictly")
    return times


def check_point_count(n_points: int) -> None:
    """Rejected for a reference of no points or more than ``MAX_POINTS``."""
    if not n_points:
        raise Rejected("no points")
    if n_points > MAX_POINTS:
        raise Rejected(f"{n_points} points: at most {MAX_POINTS}")


def start_time(stamp: int, newest: int) -> int:
    """The start [ns] of a reference stamped ``stamp`` (0: the newest state's, ``newest``); Rejected for a stamp
    more than ``MAX_DURATION`` from ``newest``."""
    if stamp and abs(stamp - newest) > MAX_DURATION * NS:
        raise Rejected(f"header.stamp t = {stamp * 1e-9:.9f} s is more than {MAX_DURATION:g} s from the "
                       f"newest state (t = {newest * 1e-9:.9f} s)")
    return stamp if stamp > 0 else newest


def base_state(p: np.ndarray, quat: np.ndarray, V: np.ndarray):
    """A floating base's measured pose and body twist ``(p, unit quat, V)``; Rejected outside the bounds."""
    check_vector(p, MAX_POSITION, "position", "m")
    quat = unit_quaternion(quat, "orientation")
    check_vector(V, MAX_STATE_VELOCITY, "twist", "m/s or rad/s")
    return p, quat, V


def joint_state(joint_names: Sequence[str], names: Sequence[str], position: Sequence[float],
                velocity: Sequence[float]) -> Tuple[np.ndarray, np.ndarray]:
    """``(positions, velocities)`` of ``joint_names`` from a joint state by name (other names ignored); Rejected
    for a missing or repeated joint, lengths that differ or values outside the bounds."""
    names = tuple(names)
    if len(position) != len(names) or len(velocity) != len(names):
        missing = [j for j in joint_names if j not in names]
        raise Rejected(f"needs position and velocity of {', '.join(missing or joint_names)} (one per name)")
    take = _joint_index(tuple(joint_names), names)
    pos = np.asarray(position, dtype=float)[take]
    vel = np.asarray(velocity, dtype=float)[take]
    check_vector(pos, MAX_POSITION, "position", "rad or m")
    check_vector(vel, MAX_STATE_VELOCITY, "velocity", "rad/s or m/s")
    return pos, vel


@functools.lru_cache(maxsize=64)
def _joint_index(joint_names: Tuple[str, ...], names: Tuple[str, ...]) -> np.ndarray:
    """The index in ``names`` of each of ``joint_names`` (a state names the same joints every time: computed once
    per pair); Rejected for a missing or repeated joint."""
    index = {n: i for i, n in enumerate(names)}
    missing = [j for j in joint_names if j not in index]
    if missing:
        raise Rejected(f"needs position and velocity of {', '.join(missing)} (one per name)")
    twice = sorted({j for j in joint_names if names.count(j) > 1}) if len(index) < len(names) else []
    if twice:
        raise Rejected(f"joint(s) {', '.join(twice)} named twice")
    take = np.array([index[j] for j in joint_names], dtype=np.intp)
    take.setflags(write=False)
    return take


def state_vector(model, nv_base: int, base, joints) -> Tuple[np.ndarray, np.ndarray]:
    """``(q, v)`` in ``model``'s layout (``nv_base``: the base's velocity components, as ``ms.base_sizes``) from a
    base part ``(p, quat, V)`` and a joints part ``(positions, velocities)`` (None for a part the robot has not);
    ValueError when they are not a state of the model."""
    joint_q = ms.joint_positions_to_q(model, joints[0]) if joints is not None else None
    if base is not None:
        p, quat, V = base
        q = model.configuration_from_pose(p, quat, joints=joint_q)
        v = np.array(model.velocity_from_twist(q, V), dtype=float)
    else:
        q = model.configuration_from_pose(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), joints=joint_q)
        v = np.zeros(model.nv)
    if joints is not None:
        v[nv_base:] = joints[1]
    if not (np.isfinite(q).all() and np.isfinite(v).all()):
        raise ValueError("non-finite configuration or velocity")
    return q, v


def prepend(times, P, Vel, Acc, cur):
    """Prepend the current reference ``cur = (q, v, a)`` at 0 when the first point is later; Rejected for a
    segment shorter than ``MIN_SEGMENT``."""
    if times[0] > 0.0:
        times = np.concatenate([[0.0], times])
        P, Vel, Acc = (np.concatenate([c[None, :], x]) for c, x in zip(cur, (P, Vel, Acc)))
    if times.size > 1 and np.diff(times).min() < MIN_SEGMENT:
        raise Rejected(f"points {np.diff(times).min():.3g} s apart (the prepended current reference at 0 "
                       f"included): at least {MIN_SEGMENT:g} s")
    return times, P, Vel, Acc


def check_rates(ref: Reference) -> None:
    """Rejected when the interpolated curve is faster than ``MAX_VELOCITY`` or ``MAX_ACCELERATION``."""
    vmax, amax = ref.peak_rates()
    if vmax.max() > MAX_VELOCITY or amax.max() > MAX_ACCELERATION:
        raise Rejected(f"the interpolated reference reaches {vmax.max():.3g} m/s or rad/s and {amax.max():.3g} "
                       f"m/s^2 or rad/s^2 (at most {MAX_VELOCITY:g} and {MAX_ACCELERATION:g}): points too close "
                       f"for their distance")


def _interpolate(space, times, P, Vel, Acc, cur) -> Reference:
    has_acc = bool(np.any(Acc)) or bool(np.any(cur[2]))
    times, P, Vel, Acc = prepend(times, P, Vel, Acc, cur)
    try:
        return Reference(space, times, P, Vel, Acc if has_acc else None)
    except (ValueError, FloatingPointError) as e:
        raise Rejected(str(e)) from None


def reference_position_bounds(model) -> Tuple[np.ndarray, np.ndarray]:
    """Per joint ``(lower, upper)`` a reference position must lie in: the URDF range widened by
    ``JOINT_LIMIT_MARGIN`` of it on each side (at least 0.1), else ±``MAX_JOINT_REFERENCE``."""
    lo, hi = (np.asarray(x, dtype=float) for x in model.position_limits)
    ranged = np.isfinite(lo) & np.isfinite(hi) & (lo < hi)
    margin = np.where(ranged, np.maximum(JOINT_LIMIT_MARGIN * (hi - lo), 0.1), 0.0)
    return (np.where(ranged, lo - margin, -MAX_JOINT_REFERENCE),
            np.where(ranged, hi + margin, MAX_JOINT_REFERENCE))


class JointReferenceInput:
    """Joint references over the controller's ``joint_names`` (positions within ``lower``/``upper``, e.g.
    :func:`reference_position_bounds`): ``(names, times, positions, velocities, accelerations, current)`` ->
    :class:`Reference` of every joint, the joints not named holding ``current``'s ``(q, v, a)``."""

    def __init__(self, joint_names: Sequence[str], lower: np.ndarray, upper: np.ndarray):
        self.joint_names = tuple(joint_names)
        self.nj = len(self.joint_names)
        self.lower, self.upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)

    def __call__(self, names: Sequence[str], times: np.ndarray, positions: Sequence[Sequence[float]],
                 velocities: Sequence[Sequence[float]], accelerations: Sequence[Sequence[float]],
                 current: Tuple[np.ndarray, np.ndarray, np.ndarray]) -> Reference:
        names = list(names)
        unknown = [n for n in names if n not in self.joint_names]
        if unknown or len(set(names)) != len(names) or not names:
            raise Rejected(f"joint names {names[:20]} must be distinct names among {', '.join(self.joint_names)} "
                           f"(unknown: {unknown[:20]})")
        cols = np.array([self.joint_names.index(n) for n in names])
        n, N = len(names), len(positions)
        cur_q = current[0]
        P = np.tile(cur_q, (N, 1))
        Vel, Acc = np.zeros((N, self.nj)), np.zeros((N, self.nj))
        for i in range(N):
            if len(positions[i]) != n:
                raise Rejected(f"point {i}: {len(positions[i])} positions for {n} joints")
            P[i, cols] = positions[i]
            for field, given, out in (("velocities", velocities[i], Vel), ("accelerations", accelerations[i], Acc)):
                if len(given) == n:
                    out[i, cols] = given
                elif len(given):
                    raise Rejected(f"point {i}: {field} must be empty or have {n} values")
        lo, hi = self.lower[cols], self.upper[cols]
        pos = P[:, cols]
        if not np.all(np.isfinite(pos)):
            raise Rejected("positions must be finite")
        outside = (pos < lo) | (pos > hi)
        if np.any(outside):
            i, j = np.argwhere(outside)[0]
            raise Rejected(f"point {i}: {names[j]} at {pos[i, j]:.6g} is outside [{lo[j]:.6g}, {hi[j]:.6g}] (its "
                           "URDF limits widened by 10 %, or ±1e3 without limits)")
        check_vector(Vel, MAX_VELOCITY, "velocities", "rad/s or m/s")
        check_vector(Acc, MAX_ACCELERATION, "accelerations", "rad/s^2 or m/s^2")
        return _interpolate(self.nj, times, P, Vel, Acc, current)


class BaseReferenceInput:
    """Base references of ``model`` (a floating base): per point a pose ``(p, quat)`` in the world frame and
    optional body-frame velocity and acceleration twists (linear first) -> :class:`Reference` on the base group.
    ``names`` (the message's joint names) must be empty or one of ``base_names``; ``q_state`` is the newest
    state's configuration (the twists are mapped at it with the point's base pose)."""

    def __init__(self, model, base_names: Sequence[str], base_frame: str):
        self.model = model
        self.nq_base, self.nv_base = ms.base_sizes(model)
        self.base_names = set(base_names)
        self.base_frame = base_frame

    def __call__(self, names: Sequence[str], times: np.ndarray, poses, velocities, accelerations,
                 current: Tuple[np.ndarray, np.ndarray, np.ndarray], q_state: np.ndarray) -> Reference:
        """``poses``: ``(p, quat)`` per point; ``velocities``/``accelerations``: a 6-vector or None per point."""
        names = list(names)
        if len(names) > 1 or (names and names[0] not in self.base_names):
            raise Rejected(f"joint_names must be empty or [{self.base_frame!r}], got {names[:20]}")
        model, nqb, nvb = self.model, self.nq_base, self.nv_base
        q_full = np.array(q_state, dtype=float)
        N = len(poses)
        P = np.empty((N, nqb))
        Vel, Acc = np.zeros((N, nvb)), np.zeros((N, nvb))
        for i, (p, quat) in enumerate(poses):
            try:
                check_vector(p, MAX_POSITION, "position", "m")
                quat = unit_quaternion(quat, "rotation")
                qb = model.configuration_from_pose(p, quat)[:nqb]
                q_full[:nqb] = qb
                if velocities[i] is not None:
                    check_vector(velocities[i], MAX_VELOCITY, "velocity", "m/s or rad/s")
                    Vel[i] = model.velocity_from_twist(q_full, velocities[i])[:nvb]
                if accelerations[i] is not None:
                    check_vector(accelerations[i], MAX_ACCELERATION, "acceleration", "m/s^2 or rad/s^2")
                    Acc[i] = model.velocity_from_twist(q_full, accelerations[i])[:nvb]
            except (Rejected, ValueError) as e:
                raise Rejected(f"point {i}: {e}") from None
            P[i] = qb
        return _interpolate(model.group, times, P, Vel, Acc, current)
