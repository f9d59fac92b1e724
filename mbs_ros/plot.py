"""Plots of a recorded run: ``python -m mbs_ros.plot FILE.mcap --out DIR [--animate OUT.gif|OUT.mp4]``.

For each robot namespace of the file: the base (or end-effector) path, joints against the reference, tracking
errors, the energy ports and the energy balance, the contact forces (per link and summed against m g), and the
free objects' paths, every axis with its unit, from the ROS-free
:class:`mbs_ros.analysis.reader.Recording`. The stable entry point for the reader's and the series' names
(:func:`load`, :func:`joint_tracking`, ...). The figures and how references are evaluated: docs/plot.md.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from mbs_ros.analysis.reader import (  # noqa: F401 - mbs_ros.plot offers the reader's names too
    BASE_REFERENCE, DIAGNOSTICS, DIAGNOSTICS_TYPE, ENERGY, ENERGY_KEYS, JOINT_REFERENCE, JOINT_STATES, ODOM,
    PROGRESS_MIN_MESSAGES, ROBOT_DESCRIPTION, TF, TF_STATIC, TF_TYPE, TYPES, PlotError, Recording,
    TrajectoryMessage, energy_namespace, is_energy_status, iter_messages, load)
from mbs_ros.analysis.series import (  # noqa: F401
    BaseTracking, JointTracking, base_tracking, energy_series, joint_tracking, ports_series)

__all__ = ["PlotError", "Recording", "JointTracking", "BaseTracking", "load", "joint_tracking", "base_tracking",
           "energy_series", "ports_series", "is_energy_status", "plot_recording", "main", "ENERGY_KEYS"]

# ----------------------------------------------------------------------------------------- plotting


def _figure(rows: int, cols: int = 1, height: float = 2.6, width: float = 9.0, sharex: bool = False):
    """A figure of rows x cols panels; ``sharex``: one time axis for all (zoom one, all follow; tick labels on
    the bottom row)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, max(3.0, height * rows)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=sharex)
    return fig, axes


def _save(fig, path: Path, written: List[Path], figures: Optional[Dict[str, object]] = None) -> None:
    fig.savefig(path, dpi=100)
    written.append(path)
    if figures is not None:  # for callers (tests) that inspect the figures: file name -> Figure
        figures[path.name] = fig


#: unit of a joint position by URDF joint type
JOINT_UNITS = {"revolute": "rad", "continuous": "rad", "prismatic": "m"}
UNKNOWN_UNIT = "rad or m"


def joint_unit(joint_types: Dict[str, str], name: str) -> str:
    """The unit of joint ``name``'s position: rad (revolute, continuous), m (prismatic), ``rad or m`` when the
    type is not known (no robot_description in the file, no --model)."""
    return JOINT_UNITS.get(joint_types.get(name, ""), UNKNOWN_UNIT)


def norm_unit(joint_types: Dict[str, str], names: Sequence[str]) -> str:
    """The unit of ‖q − q_ref‖ over ``names``: theirs when they share one, else ``rad and m mixed``."""
    units = {joint_unit(joint_types, n) for n in names}
    if len(units) == 1:
        return units.pop()
    return UNKNOWN_UNIT if UNKNOWN_UNIT in units else "rad and m mixed"


def _sample_rate(t) -> Optional[float]:
    """Median sample rate [Hz] of a time series, None with fewer than two samples."""
    t = np.asarray(t, float)
    if len(t) < 2:
        return None
    dt = float(np.median(np.diff(t)))
    return 1.0 / dt if dt > 0 else None


#: below this rate a curve is drawn with a marker at every sample (the samples, not the line between them, are data)
MARKER_RATE = 20.0


def _from_zero(ax, values) -> None:
    """y from 0 to a little above the largest value: a constant error reads as such, not as noise."""
    finite = np.asarray(values)[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 0.0
    ax.set_ylim(0.0, top * 1.15 if top > 0 else 1.0)


def _prefix(ns: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_]+", "_", ns.strip("/"))
    return clean + "_" if clean else ""


def _label(ns: str) -> str:
    return ns or "/"


ESTIMATE = "/estimate"  # estimator_node's topics: <ns>/estimate/odom, <ns>/estimate/joint_states


def heading(quat: np.ndarray) -> np.ndarray:
    """The yaw [rad] of orientations about z (``[qx qy qz qw]`` rows), unwrapped over the finite ones."""
    psi = 2.0 * np.arctan2(quat[:, 2], quat[:, 3])
    ok = np.isfinite(psi)
    psi[ok] = np.unwrap(psi[ok])
    return psi


def planar(odom: Optional[np.ndarray]) -> bool:
    """An SE(2) motion: z constant and every orientation about z alone (a vessel): no z panels, a heading one."""
    return odom is not None and len(odom) > 0 and float(np.ptp(odom[:, 2])) < 1e-9 \
        and float(np.abs(odom[:, 3:5]).max()) < 1e-9


def estimate_of(rec: Recording, ns: str) -> Optional[str]:
    """The namespace whose odom is the truth of estimate ``ns`` (``/rov`` for ``/rov/estimate``), if recorded."""
    if ns.endswith(ESTIMATE) and ns in rec.odom and ns[:-len(ESTIMATE)] in rec.odom:
        return ns[:-len(ESTIMATE)]
    return None


def estimate_errors(rec: Recording, ns: str, truth: str) -> Dict[str, object]:
    """Estimate ``ns`` against ``truth``'s odom at the estimate's stamps (those inside the truth's span; truth
    interpolated: positions linearly, orientations by slerp): ``t`` [s], ``names``, ``estimate``, ``truth``,
    ``error`` (N, k) and ``sigma`` (N, k), the estimate's standard deviation from its pose covariance. Components:
    x, y, z and the rotation error R_truthᵀ R_estimate as a rotation vector (roll, pitch, yaw); planar motion: x,
    y and the heading."""
    from scipy.spatial.transform import Rotation, Slerp

    est, var, ts = rec.odom[ns], rec.odom_variance[ns], rec.odom_stamps[ns]
    tru, tt = rec.odom[truth], rec.odom_stamps[truth]
    keep = (ts >= tt[0]) & (ts <= tt[-1])
    est, var, ts = est[keep], var[keep], ts[keep]
    t = (ts - rec.t0()) * 1e-9
    tt_s = (tt - rec.t0()) * 1e-9
    p_true = np.stack([np.interp(t, tt_s, tru[:, i]) for i in range(3)], axis=1)
    _, first = np.unique(tt_s, return_index=True)
    r_true = Slerp(tt_s[first], Rotation.from_quat(tru[first, 3:7]))(t) if len(first) > 1 else \
        Rotation.from_quat(np.repeat(tru[:1, 3:7], len(t), axis=0))
    sigma = np.sqrt(np.maximum(var, 0.0))
    if planar(tru) and planar(est):
        psi_e, psi_t = heading(est[:, 3:7]), heading(r_true.as_quat())
        err = np.angle(np.exp(1j * (psi_e - psi_t)))
        return dict(t=t, names=("x [m]", "y [m]", "heading [deg]"),
                    estimate=np.column_stack([est[:, 0], est[:, 1], np.degrees(psi_e)]),
                    truth=np.column_stack([p_true[:, 0], p_true[:, 1], np.degrees(psi_t)]),
                    error=np.column_stack([est[:, 0] - p_true[:, 0], est[:, 1] - p_true[:, 1], np.degrees(err)]),
                    sigma=np.column_stack([sigma[:, 0], sigma[:, 1], np.degrees(sigma[:, 5])]))
    rot = (r_true.inv() * Rotation.from_quat(est[:, 3:7])).as_rotvec()
    angles_e = Rotation.from_quat(est[:, 3:7]).as_euler("xyz")
    angles_t = r_true.as_euler("xyz")
    return dict(t=t, names=("x [m]", "y [m]", "z [m]", "roll [deg]", "pitch [deg]", "yaw [deg]"),
                estimate=np.column_stack([est[:, :3], np.degrees(np.unwrap(angles_e, axis=0))]),
                truth=np.column_stack([p_true, np.degrees(np.unwrap(angles_t, axis=0))]),
                error=np.column_stack([est[:, :3] - p_true, np.degrees(rot)]),
                sigma=np.column_stack([sigma[:, :3], np.degrees(sigma[:, 3:6])]))


def _plot_estimate(e: Dict[str, object], label: str, path: Path, written: List[Path],
                   figures: Optional[Dict[str, object]]) -> None:
    """One row per component: the estimate against the truth (left), the error with its ±3σ band (right)."""
    n = len(e["names"])
    fig, ax = _figure(n, 2, height=1.9, width=11.0, sharex=True)
    t = e["t"]
    for i, name in enumerate(e["names"]):
        a = ax[i, 0]
        a.plot(t, e["truth"][:, i], "k--", lw=1, label="truth")
        a.plot(t, e["estimate"][:, i], lw=1, label="estimate")
        a.set(ylabel=name)
        a.grid(True, alpha=0.3)
        b = ax[i, 1]
        band = 3.0 * e["sigma"][:, i]
        b.fill_between(t, -band, band, color="tab:orange", alpha=0.3, lw=0, label="±3σ (estimate's covariance)")
        b.plot(t, e["error"][:, i], lw=1, label="estimate − truth")
        b.set(ylabel=f"error {name}")
        # the band's typical width, not its start (the prior's, often 100x wider), sets the scale: the error stays
        # readable; the start of the band is clipped
        lim = 1.3 * max(float(np.nanmax(np.abs(e["error"][:, i]), initial=0.0)),
                        float(np.nanmedian(band)) if len(band) else 0.0)
        if math.isfinite(lim) and lim > 0:
            b.set_ylim(-lim, lim)
        b.grid(True, alpha=0.3)
    ax[0, 0].set_title("estimate vs truth")
    ax[0, 1].set_title("error and its 3σ band")
    ax[0, 0].legend(loc="best", fontsize="small")
    ax[0, 1].legend(loc="best", fontsize="small")
    ax[-1, 0].set(xlabel="t [s]")
    ax[-1, 1].set(xlabel="t [s]")
    fig.suptitle(f"{label}: estimate against the simulation's truth")
    _save(fig, path, written, figures)


def plot_recording(rec: Recording, out_dir, base_group: str = "se3", notes: Optional[List[str]] = None,
                   model: Optional[str] = None, figures: Optional[Dict[str, object]] = None) -> List[Path]:
    """Write every plot the recording allows into ``out_dir``; returns the files, notes the skipped. ``model``:
    ``--model`` (a scenario or model file) for the joint types (axis units) and the end-effector path of a robot
    whose ``robot_description`` the file lacks; ``figures``: filled with file name -> Figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = rec.notes if notes is None else notes
    written: List[Path] = []
    namespaces = rec.namespaces
    geometry = {}
    if rec.robot_description or model:
        from mbs_ros.animate import robots
        geometry = robots(rec, model, notes)
    if not namespaces:
        notes.append(f"no <ns>/odom, joint_states, joint_reference, base_reference or energy /diagnostics in "
                     f"{rec.path.name}: nothing to plot (topics: {', '.join(sorted(rec.topics)) or 'none'})")
    energy_by_ns: Dict[str, List[str]] = {}
    for name, rows in rec.diagnostics.items():
        energy_by_ns.setdefault(energy_namespace(name, rows), []).append(name)
    t0 = rec.t0()
    for ns in namespaces:
        pre, label = _prefix(ns), _label(ns)
        base = base_tracking(rec, ns, base_group) if ns in rec.base_reference else None
        measured = "estimate" if ns.endswith(ESTIMATE) else "measured"
        truth = estimate_of(rec, ns)
        if truth is not None:
            _plot_estimate(estimate_errors(rec, ns, truth), label, out / f"{pre}estimate.png", written, figures)
        elif ns.endswith(ESTIMATE) and ns in rec.odom:
            notes.append(f"{label}: no {ns[:-len(ESTIMATE)]}/odom (the truth) in the file: estimate-error plot "
                         "skipped")
        # --- trajectory
        odom = rec.odom.get(ns)
        robot = geometry.get(ns)
        fixed = odom is None or not len(odom) or float(np.ptp(odom, axis=0).max()) < 1e-9
        ee = None
        if fixed and (rec.tf or rec.tf_static or robot is not None):
            from mbs_ros.animate import end_effector_path
            ee = end_effector_path(rec, ns, robot)
        if ee is not None:  # the base does not move: where the arm's end went is the trajectory
            _plot_end_effector(ee, label, odom, out / f"{pre}trajectory.png", written, figures)
        elif odom is None or not len(odom):
            notes.append(f"{label}: no {ns}/odom: trajectory plot skipped")
        else:
            if fixed:
                notes.append(f"{label}: the base does not move and neither /tf nor a robot_description (or --model) "
                             "gives its links: no end-effector path")
            t = (rec.odom_stamps[ns] - t0) * 1e-9
            fig, ax = _figure(1, 2, height=4.0, width=11.0)
            a = ax[0, 0]
            a.plot(odom[:, 0], odom[:, 1], label="base")
            a.plot(odom[0, 0], odom[0, 1], "go", label="start")
            a.plot(odom[-1, 0], odom[-1, 1], "rs", label="end")
            if base is not None:
                a.plot(base.p_ref[:, 0], base.p_ref[:, 1], "k--", lw=1, label="reference")
            a.set(xlabel="x [m]", ylabel="y [m]", title=f"{label}: base path (x–y)")
            a.set_aspect("equal", adjustable="datalim")
            a.legend(loc="best", fontsize="small")
            a.grid(True, alpha=0.3)
            a = ax[0, 1]
            if planar(odom):  # SE(2): z is fixed, the heading is what moves
                a.plot(t, np.degrees(heading(odom[:, 3:7])), label="heading")
                if base is not None:
                    a.plot(t, np.degrees(heading(base.quat_ref)), "k--", lw=1, label="reference")
                a.set(xlabel="t [s]", ylabel="heading ψ [deg]", title=f"{label}: heading (planar: z fixed)")
            else:
                a.plot(t, odom[:, 2], label="z")
                if base is not None:
                    a.plot(t, base.p_ref[:, 2], "k--", lw=1, label="reference")
                a.set(xlabel="t [s]", ylabel="z [m]", title=f"{label}: height")
            a.legend(loc="best", fontsize="small")
            a.grid(True, alpha=0.3)
            _save(fig, out / f"{pre}trajectory.png", written, figures)
        # --- joints
        joints = joint_tracking(rec, ns)
        if joints is None:
            if ns in rec.joint_states:
                notes.append(f"{label}: {ns}/joint_states carry no joint names: joint plot skipped")
            elif ns in rec.joint_reference:
                notes.append(f"{label}: no {ns}/joint_states: joint plot skipped")
        else:
            types = robot.joint_types if robot is not None else {}
            if robot is None:
                notes.append(f"{label}: joint types unknown (no {ns}/robot_description in the file, no --model): "
                             f"joint axes read [{UNKNOWN_UNIT}]")
            n = len(joints.names)
            cols = 2 if n > 1 else 1
            rows = (n + cols - 1) // cols
            fig, ax = _figure(rows, cols, height=2.2, width=11.0 if cols == 2 else 9.0, sharex=True)
            for i, name in enumerate(joints.names):
                a = ax[i // cols, i % cols]
                a.plot(joints.t, joints.q[:, i], label=measured)
                if np.any(~np.isnan(joints.q_ref[:, i])):
                    a.plot(joints.t, joints.q_ref[:, i], "k--", lw=1, label="reference")
                a.set(title=name, ylabel=f"q [{joint_unit(types, name)}]")
                if i + cols >= n:  # the lowest panel of its column: the time axis
                    a.set(xlabel="t [s]")
                    a.xaxis.set_tick_params(labelbottom=True)
                a.grid(True, alpha=0.3)
                if i == 0:
                    a.legend(loc="best", fontsize="small")
            for i in range(n, rows * cols):
                ax[i // cols, i % cols].set_visible(False)
            fig.suptitle(f"{label}: joint positions")
            _save(fig, out / f"{pre}joints.png", written, figures)
            if ns not in rec.joint_reference:
                notes.append(f"{label}: no {ns}/joint_reference: joints plotted without reference")
        # --- base vs reference
        if ns in rec.base_reference and base is None:
            notes.append(f"{label}: no {ns}/odom for the base reference: base plot skipped")
        if base is not None:
            referenced = ~np.isnan(base.p_ref[:, 0])
            flat = planar(np.column_stack([base.p, base.quat])) and \
                planar(np.column_stack([base.p_ref, base.quat_ref])[referenced])
            rows = [(f"{axis} [m]", base.p[:, i], base.p_ref[:, i]) for i, axis in enumerate("xy" if flat else "xyz")]
            if flat:  # SE(2): no flat z panel, the heading instead
                rows.append(("heading ψ [deg]", np.degrees(heading(base.quat)), np.degrees(heading(base.quat_ref))))
            fig, ax = _figure(len(rows) + 1, 1, height=2.0, sharex=True)
            for i, (ylabel, value, ref) in enumerate(rows):
                a = ax[i, 0]
                a.plot(base.t, value, label=measured)
                a.plot(base.t, ref, "k--", lw=1, label="reference")
                a.set(ylabel=ylabel)
                a.grid(True, alpha=0.3)
            ax[0, 0].legend(loc="best", fontsize="small")
            ax[-1, 0].plot(base.t, np.degrees(base.rotation_error))
            ax[-1, 0].set(ylabel="rotation error [deg]", xlabel="t [s]")
            _from_zero(ax[-1, 0], np.degrees(base.rotation_error))
            ax[-1, 0].grid(True, alpha=0.3)
            fig.suptitle(f"{label}: base pose vs reference")
            _save(fig, out / f"{pre}base.png", written, figures)
        # --- tracking errors
        has_joint_err = joints is not None and np.any(~np.isnan(joints.error_norm))
        if has_joint_err or base is not None:
            rows = int(has_joint_err) + (2 if base is not None else 0)
            fig, ax = _figure(rows, 1, height=2.2, sharex=True)
            series = []
            if has_joint_err:
                referenced = [name for i, name in enumerate(joints.names) if np.any(~np.isnan(joints.q_ref[:, i]))]
                unit = norm_unit(robot.joint_types if robot is not None else {}, referenced)
                series.append((joints.t, joints.error_norm, f"‖q − q_ref‖ [{unit}]", "joints"))
            if base is not None:
                series.append((base.t, base.position_error, "‖p − p_ref‖ [m]", "base position"))
                series.append((base.t, np.degrees(base.rotation_error), "angle [deg]", "base rotation"))
            for a, (t, err, ylabel, title) in zip(ax[:, 0], series):
                a.plot(t, err)
                a.set(ylabel=ylabel, title=title)
                _from_zero(a, err)
                a.grid(True, alpha=0.3)
            ax[-1, 0].set(xlabel="t [s]")
            fig.suptitle(f"{label}: tracking errors")
            _save(fig, out / f"{pre}tracking.png", written, figures)
        elif joints is not None or ns in rec.odom:
            notes.append(f"{label}: no reference ({ns}/joint_reference, {ns}/base_reference): "
                         f"tracking-error plot skipped")
        # --- per-port power flows (EnergyPorts)
        ports = ports_series(rec, ns)
        if ports is not None:
            _plot_ports(ports, label, out / f"{pre}ports.png", written, figures)
        # --- energy
        names = energy_by_ns.get(ns, [])
        if not names:
            notes.append(f"{label}: no energy status on /diagnostics: energy plot skipped")
        for k, name in enumerate(sorted(names)):
            e = energy_series(rec, name)
            suffix = "" if k == 0 else f"_{k + 1}"
            _plot_energy(e, name, label, ports, out / f"{pre}energy{suffix}.png", written, figures)
    _plot_contact_set(rec, geometry, t0, out, written, notes, figures)
    return written


def _plot_contact_set(rec: Recording, geometry, t0: int, out: Path, written: List[Path], notes: List[str],
                      figures: Optional[Dict[str, object]]) -> None:
    """``<ns>_contacts.png`` per robot with contact topics and ``objects.png`` with the free objects' paths
    (:mod:`mbs_ros.analysis.contacts`)."""
    from mbs_ros.analysis.contacts import contact_forces, object_paths

    contacts = contact_forces(rec, geometry)
    for ns, rc in contacts.items():
        notes.extend(rc.notes)
        robot = {k: v for k, v in rc.links.items() if not _is_object(rec, v.frame, contacts)}
        if robot:
            _plot_contacts(robot, rc.weight, _label(ns), t0, out / f"{_prefix(ns)}contacts.png", written, figures)
    paths = object_paths(rec, contacts)
    if paths:
        _plot_objects(paths, t0, out / "objects.png", written, figures)


def _is_object(rec: Recording, frame: str, contacts) -> bool:
    from mbs_ros.analysis.contacts import object_paths

    return frame in object_paths(rec, contacts)


def _plot_contacts(links, weight: Optional[float], label: str, t0: int, path: Path, written: List[Path],
                   figures: Optional[Dict[str, object]]) -> None:
    """Normal (world z) contact force per link that touched, and their sum against the robot's weight m g."""
    fig, ax = _figure(2, 1, height=3.0, sharex=True)
    world = all(s.force_world is not None for s in links.values())
    total, t_total = None, None
    for name, s in links.items():
        f = s.force_world[:, 2] if world else np.linalg.norm(s.force, axis=1)
        t = (s.stamps - t0) * 1e-9
        if np.any(f != 0.0):
            ax[0, 0].plot(t, f, label=name, **_marker(t))
        if total is None:
            total, t_total = f.copy(), t
        elif len(f) == len(total) and np.array_equal(t, t_total):
            total = total + f
        else:  # another grid: the sum on the first link's stamps
            total = total + np.interp(t_total, t, f)
    what = "world z" if world else "magnitude (link poses not in the file)"
    ax[0, 0].set(ylabel="F [N]", title=f"{label}: contact force per link ({what})")
    ax[0, 0].grid(True, alpha=0.3)
    if ax[0, 0].lines:
        ax[0, 0].legend(loc="best", fontsize="small", ncol=2)
    ax[1, 0].plot(t_total, total, label="sum over the links")
    if weight is not None:
        ax[1, 0].axhline(weight, color="k", ls="--", lw=1, label=f"m g = {weight:.4g} N")
    ax[1, 0].set(xlabel="t [s]", ylabel="F [N]", title=f"{label}: sum of the contact forces ({what})")
    ax[1, 0].legend(loc="best", fontsize="small")
    ax[1, 0].grid(True, alpha=0.3)
    _save(fig, path, written, figures)


def _plot_objects(paths, t0: int, path: Path, written: List[Path], figures: Optional[Dict[str, object]]) -> None:
    """The free objects' paths: x–y, and their height over time."""
    fig, ax = _figure(1, 2, height=4.0, width=11.0)
    for name, (stamps, p) in paths.items():
        line, = ax[0, 0].plot(p[:, 0], p[:, 1], label=name)
        ax[0, 0].plot(p[0, 0], p[0, 1], "o", color=line.get_color())
        ax[0, 1].plot((stamps - t0) * 1e-9, p[:, 2], label=name)
    ax[0, 0].set(xlabel="x [m]", ylabel="y [m]", title="objects: path (x–y, o the start)")
    ax[0, 0].set_aspect("equal", adjustable="datalim")
    ax[0, 1].set(xlabel="t [s]", ylabel="z [m]", title="objects: height")
    for a in ax[0]:
        a.legend(loc="best", fontsize="small")
        a.grid(True, alpha=0.3)
    _save(fig, path, written, figures)


def _marker(t) -> dict:
    """A marker at every sample of a sparse series (below :data:`MARKER_RATE`): the dots are the data."""
    rate = _sample_rate(t)
    return {"marker": ".", "ms": 4} if rate is not None and rate < MARKER_RATE else {}


def _rate_text(t) -> str:
    rate = _sample_rate(t)
    return f"{rate:.3g} Hz" if rate is not None else "one sample"


def _plot_energy(e: Dict[str, np.ndarray], name: str, label: str, ports: Optional[Dict[str, object]], path: Path,
                 written: List[Path], figures: Optional[Dict[str, object]]) -> None:
    """``<ns>_energy.png``: kinetic, potential and total energy (from the ``energy`` topic where the file has it at
    a higher rate than the /diagnostics status ``name``), E_ref + work, the power balance and the residual. The
    total is a wide pale band under the thin kinetic (dashed) and potential (dotted) lines, so that each shows
    when the other is zero; sparse samples get markers; the titles give each source's rate."""
    fig, ax = _figure(3, 1, height=2.3, sharex=True)
    a = ax[0, 0]
    t = e["t"]
    diag_rate = _sample_rate(t) or 0.0
    src = {"t": t, "kinetic": e.get("kinetic_energy"), "potential": e.get("potential_energy"),
           "total": e.get("total_energy")}
    where = f"/diagnostics at {_rate_text(t)}"
    if ports is not None and (_sample_rate(ports["t"]) or 0.0) > diag_rate and "kinetic" in ports["storages"]:
        storages = ports["storages"]
        potential = [np.nan_to_num(v) for n, v in storages.items() if n != "kinetic"]
        src = {"t": ports["t"], "kinetic": storages["kinetic"],
               "potential": sum(potential) if potential else np.zeros_like(ports["t"]), "total": ports["total_energy"]}
        where = f"the energy topic at {_rate_text(ports['t'])}"
    mk = _marker(src["t"])
    if src["total"] is not None:
        a.plot(src["t"], src["total"], color="tab:green", lw=4.0, alpha=0.35, zorder=1, label="total E", **mk)
    if src["kinetic"] is not None:
        a.plot(src["t"], src["kinetic"], color="tab:blue", lw=1.3, ls="--", zorder=3, label="kinetic", **mk)
    if src["potential"] is not None:
        a.plot(src["t"], src["potential"], color="tab:orange", lw=1.3, ls=":", zorder=3, label="potential", **mk)
    if "total_energy_ref" in e and "work_applied" in e:
        a.plot(t, e["total_energy_ref"] + e["work_applied"], "k--", lw=1, zorder=2, label="E_ref + work",
               **_marker(t))
    a.set(ylabel="energy [J]", title=f"{name} (energies from {where})")
    a.legend(loc="best", fontsize="small")
    a = ax[1, 0]
    if "power" in e:
        a.plot(t, e["power"], label="dE/dt", **_marker(t))
        if "applied_power" in e:
            a.plot(t, e["applied_power"], "k--", lw=1, label="applied power dW/dt", **_marker(t))
        a.legend(loc="best", fontsize="small")
    a.set(ylabel="power [W]", title=f"power balance (from /diagnostics at {_rate_text(t)}; finite differences)")
    a = ax[2, 0]
    if "energy_balance_residual" in e:
        a.plot(t, e["energy_balance_residual"], **_marker(t))
    a.set(ylabel="E − E_ref − W [J]", xlabel="t [s]")
    for a in ax[:, 0]:
        a.grid(True, alpha=0.3)
    fig.suptitle(f"{label}: energy and power balance")
    _save(fig, path, written, figures)


def _plot_end_effector(ee, label: str, odom, path: Path, written: List[Path],
                       figures: Optional[Dict[str, object]]) -> None:
    """``<ns>_trajectory.png`` of a robot whose base does not move: the end effector's path (x–y, and x, y, z over
    time), named by its link and where its poses came from."""
    t, p, frame, source = ee
    fig, ax = _figure(1, 2, height=4.0, width=11.0)
    a = ax[0, 0]
    a.plot(p[:, 0], p[:, 1], color="tab:red", label=f"end effector ({frame})")
    a.plot(p[0, 0], p[0, 1], "go", label="start")
    a.plot(p[-1, 0], p[-1, 1], "rs", label="end")
    if odom is not None and len(odom):
        a.plot(odom[0, 0], odom[0, 1], "k^", label="base")
    a.set(xlabel="x [m]", ylabel="y [m]", title=f"{label}: end-effector path (x–y)")
    a.set_aspect("equal", adjustable="datalim")
    a.legend(loc="best", fontsize="small")
    a.grid(True, alpha=0.3)
    a = ax[0, 1]
    for i, axis in enumerate("xyz"):
        a.plot(t, p[:, i], label=axis)
    a.set(xlabel="t [s]", ylabel="position [m]", title=f"{label}: end effector {frame} over time")
    a.legend(loc="best", fontsize="small")
    a.grid(True, alpha=0.3)
    fig.suptitle(f"{label}: the base does not move; origin of {frame} (the last link), from {source}",
                 fontsize="medium")
    _save(fig, path, written, figures)


def _plot_ports(e: Dict[str, object], label: str, path: Path, written: List[Path],
                figures: Optional[Dict[str, object]] = None) -> None:
    """``<ns>_ports.png``: port and dissipator powers, storages, residual and entropy (docs/plot.md)."""
    t = e["t"]
    fig, ax = _figure(4, 1, height=2.4, width=10.0, sharex=True)
    a = ax[0, 0]
    for name, p in e["ports"].items():
        a.plot(t, p, lw=1, label=name)
    for name, p in e["dissipators"].items():
        a.plot(t, -p, lw=1, ls="--", label=f"−{name}")
    a.axhline(0.0, color="k", lw=0.5)
    a.set(ylabel="power [W]", title="power into the system through each port (dissipators negative, dashed)")
    a.legend(loc="upper left", fontsize="x-small", ncol=4)
    a = ax[1, 0]
    total_in = sum(np.nan_to_num(p) for p in e["ports"].values()) if e["ports"] else np.zeros_like(t)
    total_diss = sum(np.nan_to_num(p) for p in e["dissipators"].values()) if e["dissipators"] else np.zeros_like(t)
    a.plot(t, total_in, label="Σ ports")
    a.plot(t, total_diss, label="Σ dissipated")
    if len(t) >= 2:
        a.plot(t, np.gradient(e["total_energy"], t), "k--", lw=1, label="dE/dt")
    a.set(ylabel="power [W]", title="balance: dE/dt = Σ ports − Σ dissipated")
    a.legend(loc="best", fontsize="small")
    a = ax[2, 0]
    for name, E in e["storages"].items():
        a.plot(t, E - E[0], label=name)
    a.set(ylabel="E − E(0) [J]", title="storages")
    a.legend(loc="best", fontsize="small")
    a = ax[3, 0]
    a.plot(t, e["balance_residual"], label="residual E − E_ref − ∫(P_in − P_diss) [J]")
    b = a.twinx()
    b.plot(t, e["entropy_produced"], color="tab:red", lw=1, label="entropy produced [J/K]")
    b.set(ylabel="entropy [J/K]")
    a.set(ylabel="residual [J]", xlabel="t [s]")
    lines = a.get_lines() + b.get_lines()
    a.legend(lines, [ln.get_label() for ln in lines], loc="best", fontsize="small")
    for x in ax[:, 0]:
        x.grid(True, alpha=0.3)
    fig.suptitle(f"{label}: energy ports (EPHS)")
    _save(fig, path, written, figures)


# ----------------------------------------------------------------------------------------------- CLI


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m mbs_ros.plot",
        description="PNG plots of a recorded run (MCAP): base trajectory (end-effector path for a fixed base), "
                    "joints vs reference, tracking errors, energy and power balance; --animate: the robot over "
                    "time as a GIF or MP4.")
    p.add_argument("file", help="an MCAP file (mbs_ros.recording, ros2 bag record -s mcap)")
    p.add_argument("--out", "-o", default=None,
                   help="output folder for the PNGs (created; default ./plots; with --animate only when given)")
    p.add_argument("--animate", metavar="OUT.gif|OUT.mp4", default=None,
                   help="draw the robots' links over time into this file (.gif: Pillow; .mp4: needs ffmpeg on "
                        "PATH), from <ns>/robot_description (else --model, else /tf frames as points)")
    p.add_argument("--model", metavar="SCENARIO|MODEL_FILE", default=None,
                   help="the robot when the file has no <ns>/robot_description: a scenario (name or file; its "
                        "robots by namespace) or a URDF/xacro/robot YAML file (every robot)")
    p.add_argument("--fps", type=float, default=None, help="animation frames per second (default 15)")
    p.add_argument("--max-frames", type=int, default=None,
                   help="at most this many frames (default 150; a longer run is shown faster)")
    p.add_argument("--base-group", choices=["se3", "so3xr3"], default="se3",
                   help="group to interpolate base references on (se3 covers schoenflies, se2, so3)")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help=f"progress on stderr (auto: from {PROGRESS_MIN_MESSAGES} messages on)")
    args = p.parse_args(argv)
    try:
        rec = load(args.file, progress=args.progress)
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for warning in rec.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    status = 0
    from mbs_ros.animate import DEFAULT_FPS, DEFAULT_MAX_FRAMES, AnimationError, animate
    if args.animate:
        try:
            result = animate(rec, args.animate, model=args.model, fps=args.fps or DEFAULT_FPS,
                             max_frames=args.max_frames or DEFAULT_MAX_FRAMES)
        except (PlotError, AnimationError) as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
        else:
            speed = "real time" if result.speed == 1.0 else f"{result.speed:.3g}x real time"
            print(f"wrote {result.path}: {result.frames} frames, {result.size[0]}x{result.size[1]} px, "
                  f"{result.fps:g} fps ({speed})")
    if args.out is not None or not args.animate:
        try:
            written = plot_recording(rec, args.out or "plots", base_group=args.base_group, model=args.model)
        except (PlotError, AnimationError) as e:  # a --model that cannot be read
            print(f"error: {e}", file=sys.stderr)
            return 2
        if written:
            print(f"wrote {len(written)} plots:")
            for path in written:
                print(f"  {path}")
        else:
            print("wrote no plots")
    for note in dict.fromkeys(rec.notes):
        print(f"note: {note}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
