"""Every contact solve of a headless scenario run, timed: how many, how many fell past Gauss–Seidel (to the
accelerated ADMM, then to the adaptive one), the slowest solve times, the solves over 0.5 ms and the largest
residual over its tolerance (docs/contact.md, "The solver"). Wall-clock times on a shared machine move by tens of
%: ``--dump FILE`` keeps the problems that fell past Gauss–Seidel and the 60 slowest (pickle of tuples
``(seconds, G, g, mu, n_contacts, lam0, max_sweeps, sweeps, residual, past_gauss_seidel, residual/tol)``) and
``--replay FILE...`` solves such problems again, best of 3, for a comparison on the same problems.

    python -m tools.contact_solver_scenarios solo12_stand 2.0 [--dump FILE]
    python -m tools.contact_solver_scenarios --replay FILE...
"""
from __future__ import annotations

import argparse
import pickle
import time

import numpy as np

import mbs_ros.dynamics.contact.solver as solver
import mbs_ros.dynamics.contact.step as contact_step


def _counting(name, counts):
    """Wrap the solver's kernel ``name`` (if it has it) to count its calls in ``counts[name]``."""
    inner = getattr(solver, name, None)
    if inner is None:
        return

    def counted(*args):
        counts[name] += 1
        return inner(*args)

    counts[name] = 0
    setattr(solver, name, counted)


def _summary(label, times, past, ratios, counts):
    times = np.asarray(times)
    slowest = np.sort(times)[::-1][:5] * 1e3
    calls = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"{label}: solves {len(times)}, past Gauss-Seidel {past} ({calls}), max residual/tol "
          f"{max(ratios, default=0.0):.3g}, 5 slowest ms {np.round(slowest, 3).tolist()}, "
          f"over 0.5 ms {int(np.sum(times > 5e-4))}, all solves {times.sum():.3f} s")


def run(scenario: str, duration: float, dump: str | None) -> None:
    from mbs_ros.headless.run import run_scenario

    counts: dict = {}
    solver.warm_up()
    for name in ("_anderson_admm", "_admm"):
        _counting(name, counts)
    records = []
    inner = contact_step.solve

    def timed(G, g, mu, nc, **kw):
        before = sum(counts.values())
        t0 = time.perf_counter()
        r = inner(G, g, mu, nc, **kw)
        dt = time.perf_counter() - t0
        tol = solver.RESIDUAL_TOLERANCE * (np.abs(g).max() if len(g) else 0.0) + 1e-15
        lam0 = kw.get("lam0")
        records.append((dt, G.copy(), g.copy(), np.array(mu, float), nc, None if lam0 is None else np.array(lam0),
                        kw.get("max_sweeps", 200), r.sweeps, r.residual, sum(counts.values()) > before,
                        r.residual / tol))
        return r

    contact_step.solve = timed
    try:
        run_scenario(scenario, duration=duration)
    finally:
        contact_step.solve = inner
    _summary(f"{scenario} {duration:g} s", [r[0] for r in records], sum(r[9] for r in records),
             [r[10] for r in records], counts)
    if dump:
        slowest = sorted(records, key=lambda r: -r[0])[:60]
        keep = {id(r): r for r in [r for r in records if r[9]] + slowest}
        with open(dump, "wb") as f:
            pickle.dump(list(keep.values()), f)


def replay(files) -> None:
    counts: dict = {}
    solver.warm_up()
    for name in ("_anderson_admm", "_admm"):
        _counting(name, counts)
    for path in files:
        with open(path, "rb") as f:
            records = pickle.load(f)
        for k in counts:
            counts[k] = 0
        times, ratios, past = [], [], 0
        for dt, G, g, mu, nc, lam0, max_sweeps, *_ in records:
            before = sum(counts.values())
            best = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                r = solver.solve(G, g, mu, nc, lam0=lam0, max_sweeps=max_sweeps)
                best = min(best, time.perf_counter() - t0)
            times.append(best)
            past += sum(counts.values()) > before
            ratios.append(r.residual / (solver.RESIDUAL_TOLERANCE * np.abs(g).max() + 1e-15))
        _summary(f"replay {path}", times, past, ratios, {k: v // 3 for k, v in counts.items()})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?")
    parser.add_argument("duration", nargs="?", type=float)
    parser.add_argument("--dump")
    parser.add_argument("--replay", nargs="+")
    args = parser.parse_args(argv)
    if args.replay:
        replay(args.replay)
    elif args.scenario and args.duration:
        run(args.scenario, args.duration, args.dump)
    else:
        parser.error("give a scenario and a duration, or --replay FILE...")


if __name__ == "__main__":
    main()
