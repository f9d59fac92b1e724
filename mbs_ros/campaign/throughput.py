"""What a campaign costs on this machine: ``python -m mbs_ros.campaign.throughput [--engine local|ray|both]
[--tasks N] [--workers N] [--campaign FILE --runs N]``.

- Engine overhead: :func:`run_campaign` with a task that does nothing (results still written): start-up (pool spawn
  or ``ray.init``, to the first row) and the cost per task after it, in worker-milliseconds; for Ray also the
  round trip of one empty ``ray.get(f.remote())`` at a time. These give the "N runs of T s on M machines" estimate:
  wall ~ start-up + runs * (T_run + overhead) / (cores of all machines).
- With ``--campaign``: runs per minute of a real campaign (its first ``--runs`` runs) on each engine.

Measurements, not tests (timing is never asserted in the test suite); the numbers go into the issue's note.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mbs_ros.campaign.engines import run_campaign


@dataclass(frozen=True)
class BareCampaign:
    """Just what an engine reads of a campaign, for the empty tasks."""
    name: str
    runs: int
    source: Optional[Path] = None


def empty_task(campaign, index: int) -> dict:
    return {"run": index, "status": "pass", "reason": "", "wall_s": 0.0}


def engine_overhead(engine: str, tasks: int, workers: Optional[int]) -> dict:
    """Wall time of 1 and of ``tasks`` empty tasks on ``engine``: start-up = wall(1) (the pool's spawn; for Ray
    on an instance already running, whose ``ray.init`` is timed apart as ``init_s``); per task after it =
    (wall(tasks) - wall(1)) * workers / (tasks - 1) worker-seconds."""
    n_workers = workers or os.cpu_count() or 1
    walls, init = {}, math.nan
    started = False
    if engine == "ray":
        import ray

        if not ray.is_initialized():
            start = time.perf_counter()
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            init, started = time.perf_counter() - start, True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in (1, tasks):
                start = time.perf_counter()
                run_campaign(BareCampaign("empty", n), out_dir=Path(tmp) / str(n), engine=engine, workers=workers,
                             progress=False, task=empty_task)
                walls[n] = time.perf_counter() - start
    finally:
        if started:
            ray.shutdown()
    return {"engine": engine, "workers": n_workers, "tasks": tasks, "init_s": init, "startup_s": walls[1],
            "wall_s": walls[tasks], "per_task_ms": 1e3 * (walls[tasks] - walls[1]) * n_workers / max(tasks - 1, 1)}


def ray_round_trip(samples: int = 200) -> dict:
    """Median and p95 of one empty Ray task's submit-to-result time, one at a time, on a running local instance."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=False)
    try:
        f = ray.remote(lambda: None)
        ray.get([f.remote() for _ in range(20)])  # workers up
        times = []
        for _ in range(samples):
            t = time.perf_counter()
            ray.get(f.remote())
            times.append(time.perf_counter() - t)
        times.sort()
        return {"median_ms": 1e3 * statistics.median(times), "p95_ms": 1e3 * times[int(0.95 * (len(times) - 1))]}
    finally:
        if started:
            ray.shutdown()


def campaign_rate(path: str, runs: int, engine: str, workers: Optional[int]) -> dict:
    """Runs per minute of the campaign file's first ``runs`` runs on ``engine`` (workers' start-up included,
    ``ray.init`` not)."""
    from mbs_ros.campaign.spec import load_campaign

    campaign = dataclasses.replace(load_campaign(path), runs=runs)
    started = False
    if engine == "ray":  # ray.init is timed by engine_overhead, not here
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            started = True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            table = run_campaign(campaign, out_dir=tmp, engine=engine, workers=workers, progress=False)
            wall = time.perf_counter() - start
    finally:
        if started:
            ray.shutdown()
    per_run = table.column("wall_s").to_pylist()
    return {"engine": engine, "runs": runs, "wall_s": wall, "runs_per_min": 60.0 * runs / wall,
            "run_wall_median_s": statistics.median(per_run),
            "statuses": {s: table.column("status").to_pylist().count(s) for s in ("pass", "fail", "error")}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mbs_ros.campaign.throughput", description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=("local", "ray", "both"), default="both")
    p.add_argument("--tasks", type=int, default=2000, help="empty tasks per engine (default 2000)")
    p.add_argument("--workers", type=int, help="workers (default: all cores)")
    p.add_argument("--campaign", help="also time this campaign file's first --runs runs")
    p.add_argument("--runs", type=int, default=8)
    args = p.parse_args(argv)
    engines = ("local", "ray") if args.engine == "both" else (args.engine,)
    for engine in engines:
        o = engine_overhead(engine, args.tasks, args.workers)
        init = f"ray.init {o['init_s']:.2f} s, " if engine == "ray" else ""
        print(f"{engine}: {o['workers']} workers, {init}start-up {o['startup_s']:.2f} s, {o['tasks']} empty tasks in "
              f"{o['wall_s']:.2f} s: {o['per_task_ms']:.2f} worker-ms per task")
    if "ray" in engines:
        r = ray_round_trip()
        print(f"ray: empty task round trip {r['median_ms']:.2f} ms median, {r['p95_ms']:.2f} ms p95")
    if args.campaign:
        for engine in engines:
            c = campaign_rate(args.campaign, args.runs, engine, args.workers)
            print(f"{engine}: {c['runs']} runs of {args.campaign} in {c['wall_s']:.1f} s = {c['runs_per_min']:.1f} "
                  f"runs/min (one run {c['run_wall_median_s']:.2f} s median; {c['statuses']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
