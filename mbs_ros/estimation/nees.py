"""Consistency of an estimator over Monte-Carlo runs: the NEES and its χ² bounds (Bar-Shalom, Li & Kirubarajan,
"Estimation with Applications to Tracking and Navigation", 2001, Sec. 5.4.2).

For N independent runs of a consistent filter of state dimension n, the sum over runs of ε_k = e_kᵀ P_k⁻¹ e_k at a
step k is χ²(n N), so the average NEES ε̄_k = Σ ε_k / N lies within [χ²⁻¹(α/2; nN), χ²⁻¹(1 − α/2; nN)] / N with
probability 1 − α. The steps of one run are correlated, so a fraction of steps inside is a summary, not a test of
its own nominal level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2


def nees(error, P) -> float:
    """eᵀ P⁻¹ e."""
    e = np.asarray(error, dtype=float)
    return float(e @ np.linalg.solve(np.asarray(P, dtype=float), e))


def anees_bounds(dim: int, runs: int, probability: float = 0.95) -> tuple[float, float]:
    """Two-sided bounds of the average NEES over ``runs`` runs of a ``dim``-dimensional consistent estimator."""
    if dim < 1 or runs < 1 or not 0 < probability < 1:
        raise ValueError(f"anees_bounds: need dim >= 1, runs >= 1, 0 < probability < 1; got {dim}, {runs}, "
                         f"{probability}")
    tail = (1 - probability) / 2
    return float(chi2.ppf(tail, dim * runs) / runs), float(chi2.ppf(1 - tail, dim * runs) / runs)


@dataclass(frozen=True)
class Consistency:
    """The summary of a Monte-Carlo NEES study: per-step average NEES, its bounds, the fraction of steps inside,
    and the time average of the per-step average (ANEES over the steps)."""

    anees: np.ndarray     # (K,) average NEES per checked step
    lower: float
    upper: float
    fraction_inside: float
    mean_anees: float


def consistency(nees_runs_by_steps, dim: int, probability: float = 0.95) -> Consistency:
    """From a (runs, steps) array of NEES values, the per-step averages and their standing against the bounds."""
    e = np.asarray(nees_runs_by_steps, dtype=float)
    if e.ndim != 2 or e.size == 0:
        raise ValueError(f"consistency: expected a non-empty (runs, steps) array, got shape {e.shape}")
    lower, upper = anees_bounds(dim, e.shape[0], probability)
    anees = e.mean(axis=0)
    inside = (anees >= lower) & (anees <= upper)
    return Consistency(anees, lower, upper, float(inside.mean()), float(anees.mean()))
