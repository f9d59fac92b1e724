"""``python -m mbs_ros.headless SCENARIO [--duration S] [--set PATH=VALUE ...] [--out run.npz]``: run a scenario
without ROS (:func:`mbs_ros.headless.run_scenario`), print the real-time factor and one line per robot, and save the
records with ``--out`` (numpy ``.npz``: ``<namespace>/<field>`` arrays, a sensor's
``<namespace>/sensors/<name>/<field>``). Exit 0 after a run to the end, 1 after a fault, 2 for a scenario or usage
error. docs/headless.md.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from mbs_ros.headless.run import HeadlessError, HeadlessRun, run_scenario
from mbs_ros.process import limit_threads

EXIT_OK, EXIT_FAULT, EXIT_USAGE = 0, 1, 2
FIELDS = ("stamp_ns", "t", "q", "v", "q_d", "v_d", "tau", "tau_applied", "saturated", "estimate_q", "estimate_v",
          "energy_residual")


def parse_sets(items: List[str]) -> Dict[str, object]:
    """``KEY=VALUE`` items as overrides, each VALUE parsed as YAML (``duration=2``, ``lockstep=true``) within the
    bounds of the package's YAML files (:func:`mbs_ros.scenario.overrides.parse_set`); ValueError naming the item
    that is not one."""
    from mbs_ros.scenario.overrides import parse_set

    return dict(parse_set(item) for item in items)


def summary(run: HeadlessRun) -> List[str]:
    """The lines the CLI prints: the run, then one per robot (final base position error to the desired state, the
    largest joint error, saturated commands, control errors)."""
    lines = [f"{run.scenario}: {run.duration:.3f} s simulated in {run.wall_time:.2f} s wall "
             f"({run.real_time_factor:.1f}x real time; physics {run.physics_rate:g} Hz, control "
             f"{run.control_rate:g} Hz)" + (f"; FAULT {run.fault}" if run.fault else "")]
    for ns, r in run.robots.items():
        parts = [f"{len(r.t)} periods"]
        if r.nq_base and len(r.t):
            parts.append(f"final base position error {np.linalg.norm(r.q[-1, :3] - r.q_d[-1, :3]):.4g} m")
        nj = len(r.joint_names)
        if nj and len(r.t):
            errors = np.abs(r.q[:, r.nq_base:] - r.q_d[:, r.nq_base:]) if r.q.shape[1] == r.q_d.shape[1] else None
            if errors is not None and np.isfinite(errors).any():
                parts.append(f"max joint error {np.nanmax(errors):.4g}")
        parts.append(f"{int(r.saturated.sum())} saturated, {r.control_errors} control errors")
        lines.append(f"  {ns}: " + ", ".join(parts))
    return lines


def save(run: HeadlessRun, path: Path) -> None:
    arrays = {}
    for ns, r in run.robots.items():
        for name in FIELDS:
            value = getattr(r, name)
            if value is not None:
                arrays[f"{ns}/{name}"] = value
        arrays[f"{ns}/joint_names"] = np.array(r.joint_names, dtype=str)
        for sensor, fields in (r.sensors or {}).items():  # <ns>/sensors/<sensor>/<field>
            for name, value in fields.items():
                arrays[f"{ns}/sensors/{sensor}/{name}"] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mbs_ros.headless", description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="a scenario name (config/scenarios) or file")
    parser.add_argument("--duration", type=float, default=None, help="simulated seconds (default: the scenario's)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key (VALUE as YAML), repeatable")
    parser.add_argument("--out", type=Path, default=None, help="save the records (.npz)")
    args = parser.parse_args(argv)
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        print(f"headless: --duration must be a finite number of seconds > 0, got {args.duration}", file=sys.stderr)
        return EXIT_USAGE
    try:
        overrides = parse_sets(args.sets)
        run = run_scenario(args.scenario, duration=args.duration, overrides=overrides or None)
    except (HeadlessError, ValueError) as e:
        print(f"headless: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("headless: interrupted", file=sys.stderr)
        return 130
    for line in summary(run):
        print(line)
    if args.out is not None:
        save(run, args.out)
        print(f"records: {args.out}")
    return EXIT_FAULT if run.fault else EXIT_OK


def one_blas_thread() -> None:
    """One BLAS and OpenMP thread for this program, as the dynamics node and the campaign workers run, unless the
    environment chooses otherwise (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``): numpy is loaded by now, so its
    pools are resized with threadpoolctl. With OpenBLAS's two threads the contact step's small LAPACK calls (the
    18×18 Cholesky of the Delassus matrix) wake the second thread every step: solo12_stand took ~13 % more CPU per
    simulated second on a 2-core machine, for the same records bit for bit."""
    limit_threads(1)


if __name__ == "__main__":
    one_blas_thread()
    sys.exit(main())
