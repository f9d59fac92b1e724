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
the null space of ``G_AA``, from a pivoted Cholesky factor, LAPACK's dpstrf) moves ``λ`` to the least-norm one,
shortened where a contact would leave its friction cone (bisection on the step length). ``G δ = 0``, so ``c``, the
residual and every sticking contact's complementarity are unchanged; sliding and separating contacts keep their
impulses.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack, solve_triangular

from mbs_ros.dynamics.contact.cones import residual

__all__ = ["least_norm_split", "RANK_TOLERANCE"]

#: A pivot of ``G_AA``'s Cholesky factor at most this fraction of its largest diagonal ends its rank: the null
#: directions of redundant contacts sit at rounding (1e-15 relative in uvms_grasp), the softest real ones far above.
RANK_TOLERANCE = 1e-10
_BISECTIONS = 40


def _in_cones(lam_a, rows_c, mu_c, rows_u, slack) -> bool:
    """Are the contacts' blocks (``rows_c``: (k, 3) positions in ``lam_a``) within their cones and the unilateral
    rows (``rows_u``) non-negative, to ``slack``?"""
    if rows_c.size:
        blocks = lam_a[rows_c]
        n = blocks[:, 0]
        if (n < -slack).any() or (np.hypot(blocks[:, 1], blocks[:, 2]) > mu_c * n + slack).any():
            return False
    return not (rows_u.size and (lam_a[rows_u] < -slack).any())


def least_norm_split(G, g, mu, n_contacts: int, lam, res: float, residual_tol: float):
    """``(λ, residual)``: ``lam`` (a converged solve's impulses, residual ``res``) moved along the null space of the
    sticking rows' ``G`` to the least norm the friction cones allow; ``lam`` itself (not copied) where nothing is
    redundant or the move would raise the residual above ``max(res, residual_tol)``."""
    m = lam.shape[0]
    if m < 2:
        return lam, res
    c = G @ lam + g
    stick = max(10.0 * res, residual_tol)
    nc = int(n_contacts)
    blocks = np.abs(c[:3 * nc]).reshape(nc, 3).max(axis=1) <= stick
    unilateral = np.flatnonzero(np.abs(c[3 * nc:]) <= stick) + 3 * nc
    sticking = np.flatnonzero(blocks)
    A = np.concatenate([(3 * sticking[:, None] + np.arange(3)).reshape(-1), unilateral])
    if A.size < 2:
        return lam, res
    G_aa = np.asfortranarray(G[np.ix_(A, A)])
    top = float(np.max(np.diag(G_aa)))
    if not top > 0.0:
        return lam, res
    U, piv, rank, info = lapack.dpstrf(G_aa, lower=0, tol=RANK_TOLERANCE * top)
    n = A.size
    if info < 0 or rank >= n:
        return lam, res
    piv = piv - 1
    U11, U12 = np.triu(U[:rank, :rank]), U[:rank, rank:]
    Z = np.empty((n, n - rank))
    Z[piv[:rank]] = solve_triangular(U11, -U12) if rank else np.zeros((0, n - rank))
    Z[piv[rank:]] = np.eye(n - rank)
    Q = np.linalg.qr(Z)[0]
    lam_a = lam[A]
    delta = -(Q @ (Q.T @ lam_a))
    rows_c = np.arange(3 * sticking.size).reshape(-1, 3)
    rows_u = np.arange(3 * sticking.size, n)
    mu_c = mu[sticking]
    slack = 1e-12 * max(float(np.abs(lam_a).max()), 1e-300)
    t = 1.0
    if not _in_cones(lam_a + delta, rows_c, mu_c, rows_u, slack):
        lo, hi = 0.0, 1.0  # the feasible steps are an interval from 0 (the cones are convex)
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            if _in_cones(lam_a + mid * delta, rows_c, mu_c, rows_u, slack):
                lo = mid
            else:
                hi = mid
        t = lo
    if t <= 0.0:
        return lam, res
    out = lam.copy()
    out[A] = lam_a + t * delta
    res_out = residual(G, g, mu, nc, out)
    if res_out > max(res, residual_tol):
        return lam, res
    return out, float(res_out)
