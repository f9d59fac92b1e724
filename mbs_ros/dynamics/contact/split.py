"""The least-norm split of the impulses among redundant sticking contacts (:func:`least_norm_split`).

Where the contact rows are redundant (a bar squeezed between two flat jaws, two points per jaw; a box on four
corners; a foot's patch points), the Delassus matrix ``G`` is singular and the contact problem's solutions form a
set: every ``λ + d`` with ``G d = 0`` gives the same constraint velocities ``c = G λ + g``, so the same motion in this
step — but not in the next ones, since how the load is shared decides how much friction each point can still
give. Gauss–Seidel picks a member of the set by the order of its sweeps (the first point of a jaw takes the load,
the second what is left), and the warm start carries that choice from step to step: uvms_grasp's handle, held by
one point per jaw, pivoted about it (docs/contact.md, The scenario uvms_grasp).

We pick the member a vanishing, equal compliance at every point would pick: the least ``‖λ‖`` (the least
complementary energy of equal normal and tangential springs, Castigliano/Menabrea). Among the contacts that stick
(``c = 0`` on their three rows) and the active unilateral rows, the step ``δ = −P_N λ_A`` (``P_N`` the projector onto
the null space of ``G_AA``: ``λ_A`` projected onto its range, from a pivoted Cholesky factor, LAPACK dpstrf's
algorithm, compiled) moves ``λ`` to the least-norm one,
shortened where a contact would leave its friction cone (bisection on the step length). ``G δ = 0``, so ``c``, the
residual and every sticking contact's complementarity are unchanged; sliding and separating contacts keep their
impulses.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.contact.cones import residual
from mbs_ros.dynamics.kernels.jit import jit

__all__ = ["least_norm_split", "warm_up", "RANK_TOLERANCE"]

#: A pivot of ``G_AA``'s Cholesky factor at most this fraction of its largest diagonal ends its rank: the null
#: directions of redundant contacts sit at rounding (1e-15 relative in uvms_grasp), the softest real ones far above.
RANK_TOLERANCE = 1e-10
_BISECTIONS = 40


@jit
def _active_rows(c, n_contacts, stick, rows, sticking):
    """The rows the split may move: each contact whose three constraint velocities are within ``stick`` (its
    index to ``sticking``, its rows to ``rows``), then each unilateral row within it. Returns (rows written,
    contacts written)."""
    k = 0
    s = 0
    for i in range(n_contacts):
        if abs(c[3 * i]) <= stick and abs(c[3 * i + 1]) <= stick and abs(c[3 * i + 2]) <= stick:
            sticking[s] = i
            s += 1
            rows[k] = 3 * i
            rows[k + 1] = 3 * i + 1
            rows[k + 2] = 3 * i + 2
            k += 3
    for r in range(3 * n_contacts, c.shape[0]):
        if abs(c[r]) <= stick:
            rows[k] = r
            k += 1
    return k, s


@jit
def _in_cones(lam_a, delta, t, n_stick, mu_c, slack) -> bool:
    """Is ``lam_a + t·delta`` within the sticking contacts' cones (its first ``3·n_stick`` entries) and
    non-negative on the unilateral rows after them, to ``slack``?"""
    for i in range(n_stick):
        n = lam_a[3 * i] + t * delta[3 * i]
        if n < -slack:
            return False
        t1 = lam_a[3 * i + 1] + t * delta[3 * i + 1]
        t2 = lam_a[3 * i + 2] + t * delta[3 * i + 2]
        if math.hypot(t1, t2) > mu_c[i] * n + slack:
            return False
    for r in range(3 * n_stick, lam_a.shape[0]):
        if lam_a[r] + t * delta[r] < -slack:
            return False
    return True


@jit
def _longest_step(lam_a, delta, n_stick, mu_c, slack, bisections):
    """The largest ``t`` in [0, 1] with ``lam_a + t·delta`` in the cones (:func:`_in_cones`): 1 if the whole step
    is, else by bisection (the feasible steps are an interval from 0: the cones are convex)."""
    if _in_cones(lam_a, delta, 1.0, n_stick, mu_c, slack):
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(bisections):
        mid = 0.5 * (lo + hi)
        if _in_cones(lam_a, delta, mid, n_stick, mu_c, slack):
            lo = mid
        else:
            hi = mid
    return lo


@jit
def _least_norm_step(G_aa, lam_a, tol):
    """``(δ, rank)``: ``δ = Π λ_A − λ_A``, the step to the least-norm member of ``λ_A + null(G_AA)``: its projection
    ``Π λ_A`` onto the range of ``G_AA`` (symmetric: the orthogonal complement of its null space). From the pivoted
    Cholesky factor ``Pᵀ G_AA P = L Lᵀ`` (LAPACK dpstrf's algorithm: the largest remaining diagonal as the pivot,
    stopped at a pivot ≤ ``tol``; ``L`` n × r lower trapezoidal) the range is that of ``P L``, so
    ``Π λ = P L (LᵀL)⁻¹ Lᵀ Pᵀ λ``. ``δ`` is zero where ``G_AA`` has full rank."""
    n = G_aa.shape[0]
    W = G_aa.copy()
    perm = np.arange(n)
    rank = n
    for k in range(n):
        j = k
        for i in range(k + 1, n):
            if W[i, i] > W[j, j]:
                j = i
        if W[j, j] <= tol:
            rank = k
            break
        if j != k:  # swap rows and columns k and j
            for c in range(n):
                W[k, c], W[j, c] = W[j, c], W[k, c]
            for r in range(n):
                W[r, k], W[r, j] = W[r, j], W[r, k]
            perm[k], perm[j] = perm[j], perm[k]
        d = math.sqrt(W[k, k])
        W[k, k] = d
        for i in range(k + 1, n):
            W[i, k] /= d
        for i in range(k + 1, n):  # the whole trailing block (both triangles: a later swap reads either)
            w = W[i, k]
            for c in range(k + 1, n):
                W[i, c] -= w * W[c, k]
    delta = np.zeros(n)
    if rank == n or rank == 0:
        return delta, rank
    # L[i, k] = W[i, k] for i >= k (above the diagonal W holds stale entries: L is zero there)
    lam_p = np.empty(n)
    for i in range(n):
        lam_p[i] = lam_a[perm[i]]
    u = np.empty(rank)
    M = np.empty((rank, rank))
    for a in range(rank):
        acc = 0.0
        for i in range(a, n):
            acc += W[i, a] * lam_p[i]
        u[a] = acc
        for c in range(a + 1):  # (LᵀL)[a, c], c <= a: rows from a
            acc = 0.0
            for i in range(a, n):
                acc += W[i, a] * W[i, c]
            M[a, c] = acc
    for a in range(rank):  # LᵀL = C Cᵀ in place (lower; positive definite: L has full column rank)
        for c in range(a + 1):
            acc = M[a, c]
            for i in range(c):
                acc -= M[a, i] * M[c, i]
            if a == c:
                if acc <= 0.0:
                    return delta, n  # numerically not positive definite: no step
                M[a, a] = math.sqrt(acc)
            else:
                M[a, c] = acc / M[c, c]
    for a in range(rank):  # C y = u, then Cᵀ y' = y
        acc = u[a]
        for i in range(a):
            acc -= M[a, i] * u[i]
        u[a] = acc / M[a, a]
    for a in range(rank - 1, -1, -1):
        acc = u[a]
        for i in range(a + 1, rank):
            acc -= M[i, a] * u[i]
        u[a] = acc / M[a, a]
    for i in range(n):  # δ = P (L y) − λ
        acc = 0.0
        for a in range(min(i + 1, rank)):
            acc += W[i, a] * u[a]
        delta[perm[i]] = acc - lam_p[i]
    return delta, rank


def least_norm_split(G, g, mu, n_contacts: int, lam, res: float, residual_tol: float):
    """``(λ, residual)``: ``lam`` (a converged solve's impulses, residual ``res``) moved along the null space of the
    sticking rows' ``G`` to the least norm the friction cones allow; ``lam`` itself (not copied) where nothing is
    redundant or the move would raise the residual above ``max(res, residual_tol)``."""
    m = lam.shape[0]
    if m < 2:
        return lam, res
    nc = int(n_contacts)
    rows = np.empty(m, dtype=np.int64)
    sticking = np.empty(max(nc, 1), dtype=np.int64)
    n, n_stick = _active_rows(G @ lam + g, nc, max(10.0 * res, residual_tol), rows, sticking)
    if n < 2:
        return lam, res
    A = rows[:n]
    G_aa = G[A][:, A]
    top = float(G_aa.diagonal().max())
    if not top > 0.0:
        return lam, res
    lam_a = lam[A]
    delta, rank = _least_norm_step(G_aa, lam_a, RANK_TOLERANCE * top)
    if rank >= n:
        return lam, res
    slack = 1e-12 * max(float(np.abs(lam_a).max()), 1e-300)
    t = _longest_step(lam_a, delta, n_stick, mu[sticking[:n_stick]], slack, _BISECTIONS)
    if t <= 0.0:
        return lam, res
    out = lam.copy()
    out[A] = lam_a + t * delta
    res_out = residual(G, g, mu, nc, out)
    if res_out > max(res, residual_tol):
        return lam, res
    return out, float(res_out)


def warm_up() -> None:
    """The split once on a tiny redundant problem (two coincident contacts): numba loads its kernels (or compiles
    them) at start-up instead of inside a node's first contact step that needs them."""
    W = np.diag([2.0, 1.0, 1.0])
    G = np.block([[W, W], [W, W]])
    lam = np.array([1.0, 0.0, 0.0, 0.5, 0.0, 0.0])
    least_norm_split(G, -G @ lam, np.array([0.5, 0.5]), 2, lam, 0.0, 1e-12)
