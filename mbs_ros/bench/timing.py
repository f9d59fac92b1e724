"""Paired timing on thread CPU time, in alternating blocks: made for a shared, loaded machine.

A *sample* is ``n`` back-to-back calls timed with ``time.thread_time_ns`` (CPU time of this thread only: time
the scheduler gives to other processes is not counted, and neither are the other side's calls); ``n`` is chosen
per side so that a sample lasts about ``Plan.sample_s``. A *block* is ``Plan.samples`` samples of one side,
summarised by their median. Blocks alternate: ours, peer, ours, peer, ... (``Plan.blocks`` of each), so a slow
spell of the machine (frequency scaling, cache pollution by neighbours) hits both sides alike. Each pair of
adjacent blocks gives one ratio (ours block median / peer block median); the result is the median of these
paired ratios with their quartiles, and each side's median over its block medians in µs per call. The
garbage collector is off while timing (collected before).
"""
from __future__ import annotations

import dataclasses
import gc
import time
from typing import Callable, Optional

import numpy as np


@dataclasses.dataclass(frozen=True)
class Plan:
    sample_s: float = 0.01  # one sample's target duration (CPU seconds)
    samples: int = 5  # samples per block
    blocks: int = 9  # blocks per side


QUICK = Plan(sample_s=0.002, samples=3, blocks=3)
FULL = Plan()


@dataclasses.dataclass
class Pair:
    ours_us: float
    peer_us: float
    ratio: float  # median of the paired block ratios
    ratio_q25: float
    ratio_q75: float
    calls_ours: int  # calls per sample
    calls_peer: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _sample(fn: Callable[[], object], n: int, reset: Optional[Callable[[], object]]) -> float:
    """ns of thread CPU time per call over ``n`` calls (``reset`` runs first, untimed)."""
    if reset is not None:
        reset()
    t0 = time.thread_time_ns()
    for _ in range(n):
        fn()
    return (time.thread_time_ns() - t0) / n


def calls_per_sample(fn, target_s: float, reset=None) -> int:
    """How many calls of ``fn`` last about ``target_s`` of thread CPU time (``fn`` is warmed up first)."""
    fn()
    fn()
    n = 1
    while True:
        per = _sample(fn, n, reset)
        if per * n >= 0.25e9 * target_s or n >= 1 << 22:
            break
        n *= 4
    return max(1, int(round(target_s * 1e9 / max(per, 1.0))))


def compare(ours, peer, plan: Plan, reset_ours=None, reset_peer=None) -> Pair:
    """Time ``ours()`` against ``peer()`` (zero-argument callables) as the module docstring says."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        n_o = calls_per_sample(ours, plan.sample_s, reset_ours)
        n_p = calls_per_sample(peer, plan.sample_s, reset_peer)
        med_o, med_p = [], []
        for _ in range(plan.blocks):
            med_o.append(np.median([_sample(ours, n_o, reset_ours) for _ in range(plan.samples)]))
            med_p.append(np.median([_sample(peer, n_p, reset_peer) for _ in range(plan.samples)]))
    finally:
        if was_enabled:
            gc.enable()
    ratios = np.array(med_o) / np.array(med_p)
    return Pair(ours_us=float(np.median(med_o)) * 1e-3, peer_us=float(np.median(med_p)) * 1e-3,
                ratio=float(np.median(ratios)), ratio_q25=float(np.percentile(ratios, 25)),
                ratio_q75=float(np.percentile(ratios, 75)), calls_ours=n_o, calls_peer=n_p)


def rel_err(x, ref, scale: float = 0.0) -> float:
    """max |x − ref| relative to max |ref| (or to ``scale`` when larger, for a quantity that may vanish)."""
    x, ref = np.asarray(x, dtype=float), np.asarray(ref, dtype=float)
    if x.shape != ref.shape:
        return float("inf")
    return float(np.abs(x - ref).max() / max(1e-300, float(np.abs(ref).max()), scale))


def alone(fn, plan: Plan, reset=None) -> float:
    """µs per call of ``fn`` alone (no peer): the median over ``plan.blocks`` block medians; ``reset`` runs
    before each sample, untimed (as :func:`compare`'s)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        n = calls_per_sample(fn, plan.sample_s, reset)
        meds = [np.median([_sample(fn, n, reset) for _ in range(plan.samples)]) for _ in range(plan.blocks)]
    finally:
        if was_enabled:
            gc.enable()
    return float(np.median(meds)) * 1e-3
