"""Tracking errors and energy series of a :class:`mbs_ros.analysis.reader.Recording`: the references evaluated
as the controllers evaluate them (:class:`mbs_ros.controllers.Reference`), the dynamics node's energy bookkeeping
(its ``/diagnostics`` status and ``<ns>/energy`` ports, after EPHS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from mbs_ros.analysis.reader import PORT_SCALARS, Recording, TrajectoryMessage

__all__ = ["JointTracking", "BaseTracking", "joint_tracking", "base_tracking", "energy_series", "ports_series"]



@dataclass
class JointTracking:
    t: np.ndarray  # (N,) s from Recording.t0()
    names: Tuple[str, ...]
    q: np.ndarray  # (N, n) measured (NaN where a sample lacks the joint)
    q_ref: np.ndarray  # (N, n) reference (NaN where no reference is active or it lacks the joint)
    error_norm: np.ndarray  # (N,) ‖q − q_ref‖ over the referenced joints (NaN without reference)


@dataclass
class BaseTracking:
    t: np.ndarray
    p: np.ndarray  # (N, 3)
    p_ref: np.ndarray  # (N, 3)
    position_error: np.ndarray  # (N,) ‖p − p_ref‖ [m]
    rotation_error: np.ndarray  # (N,) angle of R_refᵀ R [rad]
    quat: Optional[np.ndarray] = None  # (N, 4) [qx qy qz qw] of odom
    quat_ref: Optional[np.ndarray] = None  # (N, 4) of the reference (NaN where none is in force)


def _active(refs: List[TrajectoryMessage], log_times: np.ndarray, stamps: np.ndarray):
    """For each sample: (index of the reference in force or -1, its start stamp [ns])."""
    refs = sorted(refs, key=lambda r: r.log_time)
    ref_log = np.array([r.log_time for r in refs], dtype=np.int64)
    idx = np.searchsorted(ref_log, log_times, side="right") - 1
    starts = np.zeros(len(refs), dtype=np.int64)
    for k, r in enumerate(refs):
        if r.stamp:
            starts[k] = r.stamp
        else:  # "now": the first sample received after it
            later = np.nonzero(log_times >= r.log_time)[0]
            starts[k] = stamps[later[0]] if len(later) else 0
    return refs, idx, starts


def _reference_object(space, traj: TrajectoryMessage):
    from mbs_ros.controllers import Reference
    try:
        return Reference(space, traj.times, traj.positions, traj.velocities, traj.accelerations)
    except ValueError:
        try:  # e.g. velocities of the wrong size: positions only
            return Reference(space, traj.times, traj.positions)
        except ValueError:
            return None


def joint_tracking(rec: Recording, ns: str) -> Optional[JointTracking]:
    """Joint positions of ``<ns>/joint_states`` against ``<ns>/joint_reference`` (None without states)."""
    rows = rec.joint_states.get(ns)
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: (r[1], r[0]))
    names: List[str] = []
    for r in rows:
        names += [n for n in r[2] if n not in names]
    if not names:
        return None  # states without joint names cannot be matched to a reference or labelled
    col = {n: i for i, n in enumerate(names)}
    N, n = len(rows), len(names)
    q = np.full((N, n), np.nan)
    for k, (_log, _stamp, row_names, pos) in enumerate(rows):
        for name, value in zip(row_names, pos):
            q[k, col[name]] = value
    log_times = np.array([r[0] for r in rows], dtype=np.int64)
    stamps = np.array([r[1] for r in rows], dtype=np.int64)
    q_ref = np.full((N, n), np.nan)
    refs = rec.joint_reference.get(ns) or []
    if refs:
        refs, idx, starts = _active(refs, log_times, stamps)
        objects = [_reference_object(len(r.names), r) for r in refs]
        for k in range(N):
            j = idx[k]
            if j < 0 or objects[j] is None:
                continue
            q_d = objects[j]((stamps[k] - starts[j]) * 1e-9)[0]
            for name, value in zip(refs[j].names, q_d):
                if name in col:
                    q_ref[k, col[name]] = value
    diff = q - q_ref
    referenced = ~np.isnan(q_ref)
    with np.errstate(invalid="ignore"):
        err = np.sqrt(np.nansum(np.where(referenced, diff, 0.0) ** 2, axis=1))
    err[~referenced.any(axis=1)] = np.nan
    t = (stamps - rec.t0()) * 1e-9
    return JointTracking(t, tuple(names), q, q_ref, err)


def base_tracking(rec: Recording, ns: str, base_group: str = "se3") -> Optional[BaseTracking]:
    """Base pose of ``<ns>/odom`` against ``<ns>/base_reference`` (None unless both are there)."""
    from mbs_ros.dynamics.lie import GROUPS
    odom, refs = rec.odom.get(ns), rec.base_reference.get(ns)
    if odom is None or not len(odom) or not refs:
        return None
    group = GROUPS[base_group]
    stamps = rec.odom_stamps[ns]
    # odom carries no receive time here: activate each reference from its stamp (or its receive time)
    refs = sorted(refs, key=lambda r: r.log_time)
    objects = [_reference_object(group, r) for r in refs]
    # a zero stamp is "from the state at hand": its receive time where that is on the stamps' clock, else (receive
    # times on the wall clock, stamps on simulation time from 0: a lockstep run on sim time) the first state
    starts = np.array([r.stamp or (r.log_time if r.log_time <= stamps[-1] else stamps[0]) for r in refs],
                      dtype=np.int64)
    idx = np.searchsorted(starts, stamps, side="right") - 1
    N = len(odom)
    pose_ref = np.full((N, 7), np.nan)
    for k in range(N):
        j = idx[k]
        if j >= 0 and objects[j] is not None:
            pose_ref[k] = objects[j]((stamps[k] - starts[j]) * 1e-9)[0]
    p, quat = odom[:, :3], odom[:, 3:7]
    p_ref, quat_ref = pose_ref[:, :3], pose_ref[:, 3:7]
    pos_err = np.linalg.norm(p - p_ref, axis=1)
    dot = np.abs(np.sum(quat * quat_ref, axis=1)) / (
        np.linalg.norm(quat, axis=1) * np.linalg.norm(quat_ref, axis=1))
    rot_err = 2.0 * np.arccos(np.clip(dot, -1.0, 1.0))
    return BaseTracking((stamps - rec.t0()) * 1e-9, p, p_ref, pos_err, rot_err, quat, quat_ref)


def ports_series(rec: Recording, ns: str) -> Optional[Dict[str, object]]:
    """The ``<ns>/energy`` records as arrays, sorted by stamp (duplicates dropped): ``t`` [s], ``storages``,
    ``ports``, ``dissipators`` ({name: (N,) array}, NaN where a record lacks the name) and every scalar field."""
    rows = sorted(rec.energy_ports.get(ns, []), key=lambda r: r[0])
    keep, stamps = [], []
    for r in rows:
        if not stamps or r[0] != stamps[-1]:
            stamps.append(r[0])
            keep.append(r)
    if not keep:
        return None
    out: Dict[str, object] = {"t": (np.array(stamps, dtype=np.int64) - rec.t0()) * 1e-9}
    for i, group in ((1, "storages"), (2, "ports"), (3, "dissipators")):
        names = list(dict.fromkeys(n for r in keep for n in r[i]))
        out[group] = {n: np.array([r[i].get(n, np.nan) for r in keep]) for n in names}
    for k in PORT_SCALARS:
        out[k] = np.array([r[4][k] for r in keep])
    return out


def energy_series(rec: Recording, status_name: str) -> Dict[str, np.ndarray]:
    """Arrays ``t`` [s] and every numeric key of a status, sorted by stamp, duplicates dropped; plus the
    power balance ``power`` (dE/dt) and ``applied_power`` (dW/dt) when there are two samples or more."""
    rows = sorted(rec.diagnostics[status_name], key=lambda r: r[0])
    stamps, keep = [], []
    for r in rows:
        if not stamps or r[0] != stamps[-1]:
            stamps.append(r[0])
            keep.append(r[2])
    keys = sorted({k for v in keep for k in v})
    out = {k: np.array([v.get(k, np.nan) for v in keep]) for k in keys}
    t = (np.array(stamps, dtype=np.int64) - rec.t0()) * 1e-9
    out["t"] = t
    if len(t) >= 2 and "total_energy" in out:
        out["power"] = np.gradient(out["total_energy"], t)
        if "work_applied" in out:
            out["applied_power"] = np.gradient(out["work_applied"], t)
    return out
