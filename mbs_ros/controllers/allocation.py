"""Thrust allocation: the thrusts ``T`` that give a base wrench ``W``, ``W = B_T T`` with ``lower ≤ T ≤ upper``.

``B_T`` (6 × n): column k is thruster k's base wrench per newton, ``[d_k; r_k × d_k]`` (:attr:`Model.thruster_matrix`).
The method is the weighted pseudo-inverse (Fossen, *Handbook of Marine Craft Hydrodynamics*, 2021, §11.2.2:
``T = W⁻¹B_Tᵀ(B_T W⁻¹ B_Tᵀ)⁻¹ τ``, the least ``Σ w_k T_k²`` that meets the wrench) with saturation redistributed:
a thruster the solution drives past a limit is fixed at that limit and the rest are solved again for what is left,
until none is past its limit (at most n rounds). Where the limits cannot meet the wrench, the result is the
saturated thrusts and the wrench they do give (``achieved``; the rest is ``residual``). Only the wrench components
the base can have are allocated (``rows``: e.g. surge, sway and yaw for an SE(2) vessel); where the thrusters do not
span them (two propellers cannot push sideways), the wrench is met in least squares.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ThrusterAllocation", "Allocated", "for_model"]


@dataclass(frozen=True)
class Allocated:
    """``thrust`` (n,) [N]; ``achieved`` = ``B_T thrust`` (6,); ``residual`` = the asked wrench minus it, on the
    allocated rows; ``saturated``: some thruster is at a limit the unconstrained solution went past."""

    thrust: np.ndarray
    achieved: np.ndarray
    residual: np.ndarray
    saturated: bool


class ThrusterAllocation:
    """``ThrusterAllocation(B_T, lower, upper, weights=None, rows=None)(W) -> Allocated`` (module docstring)."""

    def __init__(self, B_T, lower, upper, weights=None, rows=None):
        B = np.array(B_T, dtype=float)
        if B.ndim != 2 or B.shape[0] != 6:
            raise ValueError(f"the thruster matrix must be 6 x n, got shape {B.shape}")
        n = B.shape[1]
        self.B = B
        self.lower = np.broadcast_to(np.asarray(lower, dtype=float), (n,)).copy()
        self.upper = np.broadcast_to(np.asarray(upper, dtype=float), (n,)).copy()
        if np.any(self.lower > self.upper):
            raise ValueError("thrust lower limits must not exceed the upper ones")
        w = np.ones(n) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), (n,)).copy()
        if np.any(~np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("thruster weights must be finite and positive")
        self.w_inv = 1.0 / w
        self.rows = np.arange(6) if rows is None else np.asarray(rows, dtype=int)
        Br = B[self.rows]
        #: how many wrench directions of the base the thrusters cannot produce (an underactuated vessel: its sway);
        #: the allocation then meets the wrench in least squares (the part they cannot give is ``residual``)
        self.missing_directions = len(self.rows) - (np.linalg.matrix_rank(Br) if n else 0)

    @property
    def n(self) -> int:
        return self.B.shape[1]

    def __call__(self, W) -> Allocated:
        W = np.asarray(W, dtype=float).reshape(6)
        rows, B, n = self.rows, self.B[self.rows], self.n
        target = W[rows]
        T = np.zeros(n)
        free = np.ones(n, dtype=bool)
        saturated = False
        for _ in range(n + 1):
            if not free.any():
                break
            rest = target - B[:, ~free] @ T[~free]
            Bf = B[:, free]
            Wi = self.w_inv[free]
            # weighted minimum-norm solution; lstsq on the normal matrix keeps rank-deficient subsets finite
            G = (Bf * Wi) @ Bf.T
            T[free] = Wi * (Bf.T @ np.linalg.lstsq(G, rest, rcond=None)[0])
            over = free & ((T > self.upper) | (T < self.lower))
            if not over.any():
                break
            saturated = True
            T[over] = np.clip(T[over], self.lower[over], self.upper[over])
            free &= ~over
        T = np.clip(T, self.lower, self.upper)
        achieved = self.B @ T
        residual = np.zeros(6)
        residual[rows] = target - achieved[rows]
        return Allocated(T, achieved, residual, saturated)


def for_model(model, weights=()) -> ThrusterAllocation:
    """The allocation of ``model``'s thrusters (:attr:`Model.thruster_matrix`, ``thrust_limits``) over the wrench
    components its base can have; ``weights`` one per thruster or empty (all 1). ValueError with the reason, naming
    the parameter (``thruster_weights``, ``allocate_thrusters``)."""
    names = model.thruster_names
    if weights and len(weights) != len(names):
        raise ValueError(f"thruster_weights must have one entry per thruster ({len(names)}: {', '.join(names)}) "
                         f"or be empty, got {len(weights)}")
    lo, hi = model.thrust_limits
    rows = np.flatnonzero(np.abs(model.velocity_map(model.neutral())).sum(axis=1) > 0.5)
    try:
        return ThrusterAllocation(model.thruster_matrix, lo, hi, weights or None, rows)
    except ValueError as e:
        raise ValueError(f"allocate_thrusters: {e}") from None
