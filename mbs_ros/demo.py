"""The demo: a vehicle-manipulator tracking a reference, recorded and plotted, with a table of figures.

    python -m mbs_ros.demo [--duration S] [--out DIR] [--scenario NAME]      (make demo)

Runs the scenario ``config/scenarios/vehicle_manipulator.yaml`` through the no-launch runner
(:mod:`mbs_ros.bringup.runner`, the nodes the launch files start, as real processes): an SE(3) underwater vehicle
carrying a 6-DOF arm, simulated by ``dynamics_node`` and driven by ``controller_node`` (computed torque with
the explicit Coriolis matrix) along the base and joint reference that ``reference_node`` sends (a step at its
start, then quintic segments). It is the same as::

    python -m mbs_ros.bringup vehicle_manipulator --duration 6 --record out/demo.mcap --plot out/demo_plots

and then reads the recording back to print a table: the tracking errors at the start of the reference and at the
end, and the energy balance the dynamics node reports on ``/diagnostics`` (total energy change, work of the
commands, and their difference, the balance residual, which checks the integrator and the bookkeeping), then the
files written. Exit code 0; 1 if a node fails or the recording lacks what the table needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

from mbs_ros.dds import dds_defaults

SCENARIO = "vehicle_manipulator"


class DemoError(RuntimeError):
    pass


def _span(t: np.ndarray, values: np.ndarray):
    """(first, peak, last) of the samples that have a value, and the time from the first to the last [s]."""
    ok = np.nonzero(~np.isnan(values))[0]
    if not len(ok):
        raise DemoError("no sample with a reference in the recording")
    v = values[ok]
    return v[0], v[np.argmax(np.abs(v))], v[-1], t[ok[-1]] - t[ok[0]]


def figures(recording: Path) -> List[Dict[str, str]]:
    """Rows (figure, at the reference start, peak, at the end) from a recorded run."""
    from mbs_ros import plot

    rec = plot.load(recording, progress="never")
    rows: List[Dict[str, str]] = []

    def row(name, values, fmt):
        rows.append({"figure": name, "reference start": fmt(values[0]), "peak": fmt(values[1]),
                     "end": fmt(values[2])})

    namespaces = [ns for ns in rec.namespaces if ns in rec.odom or ns in rec.joint_states]
    if not namespaces:
        raise DemoError(f"{recording}: no odom or joint_states recorded")
    for ns in namespaces:
        label = ns.strip("/") or "/"
        if ns in rec.base_reference:
            base = plot.base_tracking(rec, ns)
            *values, span = _span(base.t, base.position_error)
            row(f"{label}: base position error [m]", values, "{:.2e}".format)
            *values, _ = _span(base.t, np.degrees(base.rotation_error))
            row(f"{label}: base rotation error [deg]", values, "{:.2e}".format)
        if ns in rec.joint_reference:
            joints = plot.joint_tracking(rec, ns)
            *values, span = _span(joints.t, joints.error_norm)
            row(f"{label}: joint error |q - q_ref| [rad]", values, "{:.2e}".format)
            ok = ~np.isnan(joints.error_norm)  # samples with a reference for at least one joint
            worst = np.full(len(ok), np.nan)
            worst[ok] = np.nanmax(np.abs(joints.q - joints.q_ref)[ok], axis=1)
            *values, _ = _span(joints.t, worst)
            row(f"{label}: worst single joint [rad]", values, "{:.2e}".format)
        rows[-1]["end"] += f"  (after {span:.2f} s)"
    for name in sorted(rec.diagnostics):
        e = plot.energy_series(rec, name)
        if "energy_balance_residual" not in e:
            continue
        node = name.split(":", 1)[0].strip().strip("/")
        d_e = e["total_energy"] - e.get("total_energy_ref", e["total_energy"][0])
        work = e.get("work_applied", np.zeros_like(d_e))
        res = e["energy_balance_residual"]
        signed = "{:+.3e}".format
        for text, series in (("energy change E - E_ref [J]", d_e), ("work of the commands W [J]", work),
                             ("balance residual E - E_ref - W [J]", res)):
            *values, _ = _span(e["t"], series)
            row(f"{node}: {text}", values, signed)
        scale = max(np.max(np.abs(d_e)), np.max(np.abs(work)), 1e-12)
        rows[-1]["end"] += f"  (peak {np.max(np.abs(res)) / scale:.1e} of the peak energy change)"
    if not any("balance" in r["figure"] for r in rows):
        raise DemoError(f"{recording}: no energy status from /diagnostics")
    return rows


def table(rows: List[Dict[str, str]]) -> str:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    line = lambda r: "  ".join(r[c].ljust(width[c]) for c in cols).rstrip()  # noqa: E731
    return "\n".join([line({c: c for c in cols}), "  ".join("-" * width[c] for c in cols)]
                     + [line(r) for r in rows])


FOOTNOTE = """\
Errors: base position |p - p_ref| in the world, rotation angle of R_ref^T R, joints |q - q_ref| (all joints, and
the worst one), from the recorded odom/joint_states against the references as the controller evaluates them;
"reference start": the first state after the reference was sent (its step), "peak": the largest over the run,
"end": the last recorded state. Energy: the dynamics node's /diagnostics (E_ref at its start-up, W the work of the
applied wrench and efforts): the residual E - E_ref - W checks the integrator and the bookkeeping, not the control."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mbs_ros.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds to run once the references are sent (default: the scenario's, 6 s)")
    parser.add_argument("--out", type=Path, default=Path("out"),
                        help="folder for demo.mcap and demo_plots/ (default ./out)")
    parser.add_argument("--scenario", default=SCENARIO, help=f"scenario to run (default {SCENARIO})")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="keep the nodes' logs here (default: a temporary directory, kept only on failure)")
    parser.add_argument("--quiet", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be positive")
    # Keep the demo's DDS traffic on this machine unless the user chose otherwise.
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    dds_defaults()

    from mbs_ros.bringup import ScenarioError, load_scenario
    from mbs_ros.bringup.runner import Runner

    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as e:
        print(f"mbs_ros demo: {e}", file=sys.stderr)
        return 1
    bag, plots = args.out / "demo.mcap", args.out / "demo_plots"
    if plots.is_dir():
        for old in plots.glob("*.png"):  # the list of files written is this run's
            old.unlink()
    if not args.quiet:
        print(f"mbs_ros demo: {scenario.name}: {scenario.description}", file=sys.stderr, flush=True)
    result = Runner(scenario, duration=args.duration, record=bag, plot=plots, log_dir=args.log_dir,
                    out=sys.stderr, quiet=args.quiet).run()
    if result.returncode != 0:
        print(f"mbs_ros demo failed ({result.reason})", file=sys.stderr)
        return 1
    try:
        rows = figures(bag)
    except (DemoError, OSError, ValueError) as e:
        print(f"mbs_ros demo failed: {e}", file=sys.stderr)
        return 1
    print(f"\n{scenario.name}: {scenario.description}\n")
    print(table(rows))
    if not args.quiet:
        print(FOOTNOTE)
    size = bag.stat().st_size / 1e6
    print(f"\nfiles written:\n  {bag}  ({sum(result.recorded.values())} messages on {len(result.recorded)} topics, "
          f"{size:.1f} MB; rosbag2 MCAP: ros2 bag info, Foxglove)")
    for p in result.plots:
        print(f"  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
