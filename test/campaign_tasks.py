"""Cheap, deterministic campaign tasks for the engine tests (test/unit/test_campaign_engines.py,
test/e2e/test_campaign_ray.py): real functions the engines run in real worker processes, picklable by reference
(test/ is on the workers' path), so the engines are tested without the simulator.

:class:`ToyCampaign` has what an engine reads of a campaign (name, source, runs, seed, draw). Each task leaves one
file per call in ``calls_dir`` (``<index>.<pid>.<n>``), so a test counts how often each run was attempted, and
``kill`` names the runs whose worker is killed with SIGKILL: on their first attempt only (``kill_once``, a marker
file tells the first attempt) or on every attempt (``kill_always``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BOUND = 0.5  # a run passes when its metric y = x0^2 + x1^2 is below this


@dataclass(frozen=True)
class ToyCampaign:
    name: str
    source: Path
    runs: int
    seed: int
    calls_dir: str = ""
    kill: tuple = ()
    hang: tuple = ()      # runs that sleep until killed (Ctrl-C test)
    fail: tuple = ()      # runs whose task raises (error rows)
    extra: dict = field(default_factory=dict)

    def draw(self, index: int) -> dict:
        rng = np.random.default_rng([self.seed, index])
        return {"gain": float(rng.uniform(0.5, 2.0)), "offset": rng.normal(0.0, 0.5, size=2).tolist()}


def write_source(path: Path, name: str = "toy") -> Path:
    path.write_text(f"name: {name}\nscenario: none\nruns: 0\nseed: 0\n", encoding="utf-8")
    return path


def _count(campaign: ToyCampaign, index: int) -> int:
    """Record this call; the number of earlier calls of the same run."""
    if not campaign.calls_dir:
        return 0
    d = Path(campaign.calls_dir)
    before = len(list(d.glob(f"{index}.*")))
    (d / f"{index}.{os.getpid()}.{time.monotonic_ns()}").touch()
    return before


def toy_row(campaign: ToyCampaign, index: int) -> dict:
    """The row a run gives: its drawn parameters, a metric from them, pass/fail against BOUND."""
    p = campaign.draw(index)
    x = np.asarray(p["offset"]) * p["gain"]
    y = float(x @ x)
    ok = y < BOUND
    return {"run": index, "status": "pass" if ok else "fail",
            "reason": "" if ok else f"y = {y:.3g} >= {BOUND}", "wall_s": 0.0,
            "param.gain": p["gain"], "param.offset": json.dumps(p["offset"]),
            "metric.y": y, "metric.x0": float(x[0])}


def toy_task(campaign: ToyCampaign, index: int) -> dict:
    attempt = _count(campaign, index)
    if index in campaign.fail:
        raise RuntimeError(f"run {index} fails on purpose")
    if index in campaign.hang:
        time.sleep(3600)
    if index in campaign.kill and attempt == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    return toy_row(campaign, index)


def kill_always_task(campaign: ToyCampaign, index: int) -> dict:
    _count(campaign, index)
    if index in campaign.kill:
        os.kill(os.getpid(), signal.SIGKILL)
    return toy_row(campaign, index)


def with_default_sigint(argv: list) -> list:
    """A command that runs ``argv`` (a Python command line) with SIGINT at its default action, as a program started
    in a terminal's foreground has it, whatever this process inherited: a test run started in a shell's background
    (``make test &``, ``nohup``, some CI runners) has SIGINT ignored, its children inherit that, and Python then
    installs no KeyboardInterrupt handler, so a Ctrl-C test would see a child that rightly ignores Ctrl-C. (A
    ``preexec_fn`` would do the same but is unsafe in a process with threads.)"""
    return [argv[0], "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                           "os.execv(sys.argv[1], sys.argv[1:])", *argv]


def calls(campaign: ToyCampaign) -> dict:
    """Run index -> number of calls recorded."""
    out: dict = {}
    for f in Path(campaign.calls_dir).iterdir():
        i = int(f.name.split(".")[0])
        out[i] = out.get(i, 0) + 1
    return out


def threads_task(campaign: ToyCampaign, index: int) -> dict:
    """The row of a run that reports the worker's BLAS threads (threadpoolctl's own count of the loaded pools)."""
    from threadpoolctl import threadpool_info

    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    return {"run": index, "status": "pass", "reason": "", "wall_s": 0.0, "metric.blas_threads": float(max(blas))}
