"""Station-keeping and tracking on the true state vs on the estimator (issue 18's figure table).

Runs each scenario pair headless (``mbs_ros.bringup``: lockstep on simulation time, recorded), reads the
recordings and reports, per run, over the scenario's duration: the base position error (RMS and max of
|p - p_ref|), the yaw error (RMS and max), the joints' tracking error (RMS and max over all joints), all of the
TRUE state (``odom``, ``joint_states``) against the scenario's reference (its waypoints interpolated as the
controller interpolates them, :class:`mbs_ros.controllers.Reference`); for the estimator runs also the
estimation error (|p_est - p_true| RMS, max). It writes a Markdown table and a plot of the position error vs
time of both runs (matplotlib), one per pair:

    python -m mbs_ros.validation.estimation_compare --out out/estimation            # both pairs (~15 min)
    python -m mbs_ros.validation.estimation_compare --out out/estimation --pairs rov_alpha5 --duration 20
    python -m mbs_ros.validation.estimation_compare --out out/estimation --reuse   # re-read the recordings

Pairs: rov_alpha5 / rov_alpha5_sensors (60 s) and vehicle_manipulator / vehicle_manipulator_sensors (6 s; the
true-state run is made lockstep on simulation time too, ``--set lockstep=true sim_time=true``, so both runs are
reproducible and their errors sampled at the same control steps).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

PAIRS = {"rov_alpha5": "rov_alpha5_sensors", "vehicle_manipulator": "vehicle_manipulator_sensors"}

__all__ = ["PAIRS", "run_scenario", "read_run", "errors", "main"]


def run_scenario(name: str, out: Path, duration: Optional[float] = None) -> Path:
    """Run scenario ``name`` headless in lockstep on simulation time, recording into ``out/<name>.mcap``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.mcap"
    cmd = [sys.executable, "-m", "mbs_ros.bringup", name, "--record", str(path), "--log-dir", str(out / name),
           "--set", "lockstep=true", "--set", "sim_time=true"]
    if duration is not None:
        cmd += ["--duration", str(duration)]
    subprocess.run(cmd, check=True)
    return path


def _yaw(q) -> float:
    x, y, z, w = q
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def read_run(path: Path, namespace: str) -> Dict[str, dict]:
    """``{topic: {stamp_ns: values}}`` of odom, estimate/odom (p, quaternion), joint_states and
    estimate/joint_states (positions by name) of one robot."""
    from mbs_ros.analysis.reader import iter_messages

    out: Dict[str, dict] = {"odom": {}, "estimate/odom": {}, "joint_states": {}, "estimate/joint_states": {}}
    topics = [f"{namespace}/{t}" for t in out]
    for topic, _type, _log, msg in iter_messages(path, topics):
        key = topic[len(namespace) + 1:]
        t = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        if key.endswith("odom"):
            p, o = msg.pose.pose.position, msg.pose.pose.orientation
            cov = np.array(msg.pose.covariance).reshape(6, 6)
            out[key][t] = (np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w]), cov)
        else:
            out[key][t] = dict(zip(msg.name, msg.position))
    return out


def errors(scenario_name: str, data: Dict[str, dict]) -> dict:
    """The figures of one run (module docstring) against the scenario's reference."""
    from mbs_ros.scenario.schema import load_scenario
    from mbs_ros.controllers import Reference
    from mbs_ros.dynamics.model import source as ms

    sc = load_scenario(scenario_name)
    robot = sc.robots[0]
    source = ms.load_source("", robot.model_file)
    model = ms.build_multibody(source, robot.base_group, ms.default_gravity(source))
    bq = []
    for w in robot.base_reference:
        bq.append(model.configuration_from_pose(np.array(w.position), _quat(w.rpy))[:7])
    base_ref = Reference(model.group, [w.time for w in robot.base_reference], bq) if bq else None
    names = robot.joint_reference_names
    joint_ref = (Reference(len(names), [w.time for w in robot.joint_reference],
                           [np.array(w.positions) for w in robot.joint_reference]) if names else None)
    stamps = sorted(data["odom"])
    if sc.duration:
        stamps = [t for t in stamps if t <= sc.duration * 1e9 + 1]
    t_s, pos_err, yaw_err, est_err, inside, joint_err = [], [], [], [], [], []
    for t in stamps:
        p, q, _ = data["odom"][t]
        if base_ref is not None:
            qd = base_ref(t * 1e-9)[0]
            pos_err.append(np.linalg.norm(p - qd[:3]))
            yaw_err.append(abs(np.angle(np.exp(1j * (_yaw(q) - _yaw(qd[3:7]))))))
            t_s.append(t * 1e-9)
        if t in data["estimate/odom"]:
            pe, qe, cov = data["estimate/odom"][t]
            e = pe - p
            est_err.append(np.linalg.norm(e))
            inside.append(bool(np.all(np.abs(e) <= 3.0 * np.sqrt(np.maximum(np.diag(cov)[:3], 0.0)))))
        if joint_ref is not None and t in data["joint_states"]:
            qj = np.array([data["joint_states"][t][n] for n in names])
            joint_err.append(np.abs(qj - joint_ref(t * 1e-9)[0]))

    def rms(x):
        return float(np.sqrt(np.mean(np.square(x)))) if len(x) else float("nan")

    def mx(x):
        return float(np.max(x)) if len(x) else float("nan")

    je = np.array(joint_err) if joint_err else np.zeros((0,))
    return {"t": np.array(t_s), "position_error": np.array(pos_err), "pos_rms": rms(pos_err), "pos_max": mx(pos_err),
            "yaw_rms": rms(yaw_err), "yaw_max": mx(yaw_err), "joint_rms": rms(je), "joint_max": mx(je),
            "est_rms": rms(est_err), "est_max": mx(est_err),
            "inside_3sigma": float(np.mean(inside)) if inside else float("nan"), "samples": len(stamps)}


def _quat(rpy):
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", rpy).as_quat()


def table(rows: List[tuple]) -> str:
    lines = ["| scenario | state | position error RMS / max [m] | yaw error RMS / max [rad] | joint error RMS / max "
             "[rad] | estimate - truth RMS / max [m] | inside 3σ |", "|---|---|---|---|---|---|---|"]
    for name, state, f in rows:
        est = (f"{f['est_rms']:.4f} / {f['est_max']:.4f}" if np.isfinite(f["est_rms"]) else "–")
        ins = f"{100 * f['inside_3sigma']:.0f} %" if np.isfinite(f["inside_3sigma"]) else "–"
        lines.append(f"| {name} | {state} | {f['pos_rms']:.4f} / {f['pos_max']:.4f} | {f['yaw_rms']:.4f} / "
                     f"{f['yaw_max']:.4f} | {f['joint_rms']:.4f} / {f['joint_max']:.4f} | {est} | {ins} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, title: str, truth: dict, estimate: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(truth["t"], truth["position_error"], label="true state")
    ax.plot(estimate["t"], estimate["position_error"], label="estimator (sensors)")
    ax.set_xlabel("simulation time [s]")
    ax.set_ylabel("|p - p_ref| [m]")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbs_ros.validation.estimation_compare", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--out", default="out/estimation", help="directory of the recordings, table and plots")
    ap.add_argument("--pairs", nargs="*", default=list(PAIRS), choices=list(PAIRS), help="true-state scenarios")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds (default: each scenario's)")
    ap.add_argument("--reuse", action="store_true", help="read the recordings of an earlier run")
    a = ap.parse_args(argv)
    out = Path(a.out)
    rows = []
    for truth_name in a.pairs:
        est_name = PAIRS[truth_name]
        figures = {}
        for name in (truth_name, est_name):
            path = out / f"{name}.mcap"
            if not (a.reuse and path.is_file()):
                path = run_scenario(name, out, a.duration)
            from mbs_ros.scenario.schema import load_scenario

            ns = load_scenario(name).robots[0].namespace
            figures[name] = errors(name, read_run(path, ns))
        rows += [(truth_name, "true state", figures[truth_name]), (est_name, "estimator", figures[est_name])]
        plot(out / f"{truth_name}_position_error.png", f"{truth_name}: base position error",
             figures[truth_name], figures[est_name])
    text = table(rows)
    (out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
