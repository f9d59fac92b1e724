"""LQR vs computed torque on the vehicle-manipulator and the ROV: tracking error and effort, same reference.

Each scenario (config/scenarios/vehicle_manipulator.yaml: the SE(3) vehicle with a 6-DOF arm; rov_alpha5.yaml:
the BlueROV2-Heavy-like ROV with its 4-DOF arm, in a current, thrusters allocated) runs headless
(:func:`mbs_ros.headless.run_scenario`, the controller node's own core) twice: with its computed-torque gains, and
with ``law: lqr`` (:mod:`mbs_ros.controllers.lqr`); a robot with passive forces (the ROV) runs a third time,
``lqr_water``: LQR with ``compensate_passive: false``, designed with the water's damping instead of cancelling
it. Fair tuning: the LQR weights are in acceleration units
(``lqr_scaling: mass``) with ``q = kp², q_v = kd² − 2 kp, r = 1`` per DOF from the scenario's kp, kd, so that on a
decoupled double integrator the LQR gain *is* computed torque's (the same closed-loop poles); what differs is
what each law does with the rest of the dynamics — computed torque cancels M, C, g (and the passive forces) at the
current state, LQR feeds forward τ_d at the reference and feeds back the coupled linearisation there. Both run
with the scenario's ``compensate_passive`` (true: the passive forces cancelled after the law).

Metrics per robot and law (one row per control period): base position error ‖p − p_d‖ [m], attitude error (the
angle of R_dᵀR) [rad], joint error max_j |q_j − q_d,j| [rad]: RMS and max over the run; effort: the applied base
force ‖F‖ [N], torque ‖τ‖ [N m] and joint efforts ‖τ_j‖ [N m]: RMS and peak. ``design_ms``: the time of one LQR
design (linearisation + Riccati equation) at reference points of the run, median and max; ``designs``: how many
designs a replay of the run's reference asks for. Keys of ``--json``: ``runs`` (one per robot and law, the metrics
above), ``design``. The plot (``--output``, alias ``--plot``; default out/lqr_vs_ct.png, docs/lqr.md's figure is
``--output docs/img/lqr_vs_ct.png``): the three errors against time, both laws, both robots.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from mbs_ros.validation._study import Study, table

#: the figure's default path, relative to the working directory: out/ is ignored by git, so a plain run never
#: overwrites the tracked docs/img/lqr_vs_ct.png (``--output docs/img/lqr_vs_ct.png`` regenerates that one)
DEFAULT_PLOT = "out/lqr_vs_ct.png"
SCENARIOS = ("vehicle_manipulator", "rov_alpha5")
LAWS = ("computed_torque", "lqr")
#: a third run where the model has passive forces: LQR designed with them (compensate_passive false) instead of
#: cancelling them after the law — the water's damping then works for the regulator
WATER = "lqr_water"


def _gains(scenario):
    """The scenario's kp, kd per DOF (nv)."""
    from mbs_ros.scenario.schema import load_scenario

    r = load_scenario(scenario).robots[0]
    ctl = r.controller
    kp = np.broadcast_to(np.asarray(ctl.get("kp", 9.0), float), (r.nv,)).copy()
    kd = np.broadcast_to(np.asarray(ctl.get("kd", 6.0), float), (r.nv,)).copy()
    return kp, kd


def lqr_overrides(scenario) -> dict:
    """The overrides that switch ``scenario``'s robot to ``law: lqr`` with its computed-torque poles."""
    kp, kd = _gains(scenario)
    return {"robots[0].controller.law": "lqr", "robots[0].controller.lqr_scaling": "mass",
            "robots[0].controller.lqr_q_position": [float(x) for x in kp ** 2],
            "robots[0].controller.lqr_q_velocity": [float(x) for x in kd ** 2 - 2 * kp],
            "robots[0].controller.lqr_r": 1.0}


def _attitude_angle(q, q_d):
    """Angle of R_dᵀ R from quaternions (x y z w): 2 atan2(|vec|, |w|) of q_d⁻¹ q."""
    a, b = q[:, 3:7], q_d[:, 3:7]
    dot = np.abs(np.sum(a * b, axis=1)).clip(0.0, 1.0)
    return 2.0 * np.arccos(dot)


def metrics(rec) -> dict:
    """Tracking errors and efforts of one :class:`~mbs_ros.headless.RobotRecord` (SE(3) base)."""
    q, q_d, tau = rec.q, rec.q_d, rec.tau_applied
    nqb, nvb = rec.nq_base, rec.nv_base
    pos = np.linalg.norm(q[:, :3] - q_d[:, :3], axis=1)
    att = _attitude_angle(q, q_d)
    joints = np.abs(q[:, nqb:] - q_d[:, nqb:]).max(axis=1)
    force = np.linalg.norm(tau[:, :3], axis=1)
    torque = np.linalg.norm(tau[:, 3:6], axis=1)
    effort = np.linalg.norm(tau[:, nvb:], axis=1)

    def rms(x):
        return float(np.sqrt(np.mean(x ** 2)))

    return {"position_rms": rms(pos), "position_max": float(pos.max()), "attitude_rms": rms(att),
            "attitude_max": float(att.max()), "joints_rms": rms(joints), "joints_max": float(joints.max()),
            "force_rms": rms(force), "force_peak": float(force.max()), "torque_rms": rms(torque),
            "torque_peak": float(torque.max()), "effort_rms": rms(effort), "effort_peak": float(effort.max()),
            "saturated": float(np.mean(rec.saturated)), "control_errors": int(rec.control_errors),
            "series": {"t": rec.t.tolist(), "position": pos.tolist(), "attitude": att.tolist(),
                       "joints": joints.tolist()}}


def design_timing(scenario, rec, samples: int = 20) -> dict:
    """Median and max time of one LQR design at ``samples`` reference points of the run, and the number of designs
    a replay of the run's states and reference asks for (a_d by differences of v_d)."""
    from mbs_ros.scenario.schema import load_scenario, node_specs
    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.cores import controller_settings as cs
    from mbs_ros.cores.controller import controller_setup
    from mbs_ros.cores.parameters.controller import PARAMETERS
    from mbs_ros.cores.params import model_parameter_values

    scn = load_scenario(scenario, overrides=lqr_overrides(scenario))
    spec = next(s for s in node_specs(scn) if s.role == "controller")

    def value(param, default):
        v = spec.parameters.get(param.name, default)
        return list(v) if isinstance(v, tuple) else v

    values, source = model_parameter_values(PARAMETERS, lambda n: getattr(cs.DEFAULTS, cs.field_name(n)), value,
                                            ms.load_source)
    law = controller_setup(values, source).law
    idx = np.linspace(0, len(rec.t) - 1, samples).astype(int)
    times = []
    for k in idx:
        t0 = time.perf_counter()
        law.design(rec.q_d[k], rec.v_d[k])
        times.append(time.perf_counter() - t0)
    a_d = np.gradient(rec.v_d, rec.t, axis=0)
    before = law.designs
    law.reset()
    for k in range(len(rec.t)):
        law(rec.q[k], rec.v[k], rec.q_d[k], rec.v_d[k], a_d[k])
    return {"design_ms_median": 1e3 * float(np.median(times)), "design_ms_max": 1e3 * float(np.max(times)),
            "designs": law.designs - before, "periods": len(rec.t), "states": 2 * law.nv}


def _has_water(scenario) -> bool:
    """Whether the scenario's robot model has passive forces (hydrodynamics, joint damping)."""
    from mbs_ros.scenario.schema import load_scenario
    from mbs_ros.dynamics import Model

    r = load_scenario(scenario).robots[0]
    return bool(r.model_file) and Model.from_yaml(r.model_file).passive_active


def _run(args) -> dict:
    from mbs_ros.headless import run_scenario

    runs, design = [], {}
    for scenario in SCENARIOS:
        laws = LAWS + ((WATER,) if args.water and _has_water(scenario) else ())
        for law in laws:
            over = {} if law == "computed_torque" else lqr_overrides(scenario)
            if law == WATER:
                over["robots[0].controller.compensate_passive"] = False
            t0 = time.perf_counter()
            run = run_scenario(scenario, duration=args.duration, overrides=over, energy=False)
            rec = next(iter(run.robots.values()))
            m = metrics(rec)
            m.update(scenario=scenario, law=law, duration=run.duration, fault=run.fault,
                     wall_s=time.perf_counter() - t0)
            runs.append(m)
            if law == "lqr":
                design[scenario] = design_timing(scenario, rec)
    result = {"study": "lqr-vs-ct", "runs": runs, "design": design}
    if args.plot:
        result["plot"] = str(plot(runs, Path(args.plot)))
    if not args.series:
        for r in runs:
            r.pop("series")
    return result


def plot(runs, path: Path) -> Path:
    """Errors against time: one row per robot, columns base position, attitude, joints; both laws."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(SCENARIOS), 3, figsize=(13, 6.5), sharex="row", squeeze=False)
    styles = {"computed_torque": dict(color="tab:blue", label="computed torque"),
              "lqr": dict(color="tab:red", ls="--", label="LQR")}
    for i, scenario in enumerate(SCENARIOS):
        for r in (r for r in runs if r["scenario"] == scenario and r["law"] in LAWS):
            s = r["series"]
            for j, (key, unit) in enumerate((("position", "m"), ("attitude", "rad"), ("joints", "rad"))):
                ax = axes[i, j]
                ax.semilogy(s["t"], np.maximum(s[key], 1e-6), **styles[r["law"]])
                ax.set_title(f"{scenario}: {key} error [{unit}]", fontsize=9)
                ax.grid(True, which="both", alpha=0.3)
        for j in range(3):
            axes[i, j].set_xlabel("t [s]")
    axes[0, 0].legend()
    fig.suptitle("LQR vs computed torque (same reference, same nominal poles)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _report(result) -> str:
    header = ("robot", "law", "pos RMS [m]", "pos max", "att RMS [rad]", "att max", "joints RMS [rad]",
              "joints max", "|F| RMS [N]", "|F| peak", "|T| RMS [Nm]", "|T| peak", "|tau_j| RMS", "|tau_j| peak")
    rows = [(r["scenario"], r["law"], *(f"{r[k]:.4g}" for k in (
        "position_rms", "position_max", "attitude_rms", "attitude_max", "joints_rms", "joints_max", "force_rms",
        "force_peak", "torque_rms", "torque_peak", "effort_rms", "effort_peak"))) for r in result["runs"]]
    lines = [table(header, rows), ""]
    for scenario, d in result["design"].items():
        lines.append(f"{scenario}: one LQR design ({d['states']} states) {d['design_ms_median']:.2f} ms median, "
                     f"{d['design_ms_max']:.2f} ms max; {d['designs']} designs in {d['periods']} control periods")
    faults = [f"{r['scenario']} {r['law']}: {r['fault']}" for r in result["runs"] if r["fault"]]
    lines += [f"fault: {f}" for f in faults]
    if result.get("plot"):
        lines.append(f"plot: {result['plot']}")
    return "\n".join(lines)


def _add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--duration", type=float, default=None,
                    help="simulated seconds per run (default: each scenario's own, 6 s and 60 s)")
    ap.add_argument("--output", "--plot", dest="plot", default=DEFAULT_PLOT, metavar="PNG",
                    help=f"where the figure goes ('' for none); default {DEFAULT_PLOT} under the working directory "
                         "(docs/img/lqr_vs_ct.png, the figure of docs/lqr.md, is written only when asked for)")
    ap.add_argument("--series", action="store_true", help="keep the error time series in --json")
    ap.add_argument("--no-water", dest="water", action="store_false",
                    help=f"no {WATER} run (LQR designed with the passive forces, compensate_passive false) on the "
                         "robots that have them")


HELP = __doc__
STUDY = Study("lqr-vs-ct", "LQR vs computed torque: tracking error and effort on the UVMS and the ROV", HELP,
              _add_arguments, _run, _report)

__all__ = ["STUDY", "metrics", "lqr_overrides", "design_timing", "plot"]
