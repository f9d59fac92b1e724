"""Sampled sweeps inside one test: a seeded random subset of a list of cases each run, all of them on demand.

For a test whose cases re-prove one property at more sizes (more parameters refused at start-up, more repeats of
one trial) and that runs them in one test body (in batches of processes, say): :func:`sample` returns ``keep`` of
the cases, chosen by the run's sweep
seed (``MBS_SWEEP_SEED``, printed in the run's header; ``--sweep-seed S`` repeats it) and the test's own name, so
each run covers another subset; ``--full-sweeps`` (or ``MBS_FULL_SWEEPS=1``) returns every case.
"""

from __future__ import annotations

import os
import random
from typing import List, Sequence, TypeVar

T = TypeVar("T")


def full() -> bool:
    """Whether this run asked for every case (``--full-sweeps`` or ``MBS_FULL_SWEEPS=1``)."""
    return os.environ.get("MBS_FULL_SWEEPS") == "1"


def sample(cases: Sequence[T], keep: int, name: str) -> List[T]:
    """``keep`` of ``cases`` in their order (all of them with :func:`full`, or when there are no more), chosen by the
    run's sweep seed and ``name`` (the test's name: another test draws another subset)."""
    cases = list(cases)
    if full() or keep >= len(cases):
        return cases
    seed = os.environ.get("MBS_SWEEP_SEED", "0")
    chosen = set(random.Random(f"{seed}:{name}").sample(range(len(cases)), keep))
    return [c for i, c in enumerate(cases) if i in chosen]
