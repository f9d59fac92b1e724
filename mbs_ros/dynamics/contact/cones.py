"""The friction cones of the contact problem (:mod:`mbs_ros.dynamics.contact.solver`): projections onto Coulomb's
cone K_μ and its dual, De Saxcé's shift, and :func:`residual`, the distance of impulses from the exact law that
every solver stage measures itself by. Compiled (:mod:`mbs_ros.dynamics.kernels.jit`)."""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit

__all__ = ["residual"]


@jit
def _project_cone(ln, lt1, lt2, mu, out):
    """Euclidean projection of (ln, lt1, lt2) onto K_μ."""
    t = math.sqrt(lt1 * lt1 + lt2 * lt2)
    if t <= mu * ln:
        out[0], out[1], out[2] = ln, lt1, lt2
    elif mu * t <= -ln:
        out[0], out[1], out[2] = 0.0, 0.0, 0.0
    else:
        n = (ln + mu * t) / (1.0 + mu * mu)
        out[0] = n
        out[1] = mu * n * lt1 / t
        out[2] = mu * n * lt2 / t


@jit
def _three_rows(G, g, lam, r):
    """Rows ``r``, ``r + 1``, ``r + 2`` of ``G λ + g`` side by side: three independent sums, each in the order of
    j (the same numbers as one row after the other, three times fewer waits on the adder)."""
    acc0, acc1, acc2 = g[r], g[r + 1], g[r + 2]
    for j in range(g.shape[0]):
        lj = lam[j]
        acc0 += G[r, j] * lj
        acc1 += G[r + 1, j] * lj
        acc2 += G[r + 2, j] * lj
    return acc0, acc1, acc2


@jit
def residual(G, g, mu, n_contacts, lam):
    """How far ``lam`` is from the exact law, in velocity units: the largest over the blocks of
    ``‖λ − P_K(λ − ρ ĉ)‖ / ρ`` (``ĉ = c + μ‖c_t‖e_n``, ρ = 1/G_nn of the block; a unilateral row alike with
    K = R₊). Zero exactly at a solution."""
    m = g.shape[0]
    c = g.copy()
    a = 0
    while a + 3 <= m:
        c[a], c[a + 1], c[a + 2] = _three_rows(G, g, lam, a)
        a += 3
    for a in range(a, m):
        for j in range(m):
            c[a] += G[a, j] * lam[j]
    worst = 0.0
    for a in range(m):
        if not (math.isfinite(c[a]) and math.isfinite(lam[a])):
            return math.inf
    out = np.empty(3)
    for i in range(n_contacts):
        r = 3 * i
        rho = 1.0 / G[r, r]
        ct = math.sqrt(c[r + 1] ** 2 + c[r + 2] ** 2)
        _project_cone(lam[r] - rho * (c[r] + mu[i] * ct), lam[r + 1] - rho * c[r + 1], lam[r + 2] - rho * c[r + 2],
                      mu[i], out)
        e = math.sqrt((lam[r] - out[0]) ** 2 + (lam[r + 1] - out[1]) ** 2 + (lam[r + 2] - out[2]) ** 2) / rho
        if e > worst:
            worst = e
    for r in range(3 * n_contacts, m):
        rho = 1.0 / G[r, r]
        p = lam[r] - rho * c[r]
        if p < 0.0:
            p = 0.0
        e = abs(lam[r] - p) / rho
        if e > worst:
            worst = e
    return worst


@jit
def _project_all(x, mu, n_contacts, out):
    """``out`` = the projection of ``x`` onto K_μ1 × … × R₊^(rest)."""
    tmp = np.empty(3)
    for i in range(n_contacts):
        r = 3 * i
        _project_cone(x[r], x[r + 1], x[r + 2], mu[i], tmp)
        out[r], out[r + 1], out[r + 2] = tmp[0], tmp[1], tmp[2]
    for r in range(3 * n_contacts, x.shape[0]):
        out[r] = x[r] if x[r] > 0.0 else 0.0


@jit
def _saxce(G, g, mu, n_contacts, lam, s):
    """De Saxcé's shift ``s`` (μ‖c_t‖ on each normal row, 0 elsewhere) at ``c = G λ + g``."""
    c = G @ lam + g
    s[:] = 0.0
    for i in range(n_contacts):
        r = 3 * i
        s[r] = mu[i] * math.sqrt(c[r + 1] * c[r + 1] + c[r + 2] * c[r + 2])


@jit
def _project_dual_all(x, mu, n_contacts, out):
    """``out`` = the projection of ``x`` onto the dual cones K_μ* = {μ‖z_t‖ ≤ z_n} × … × R₊^(rest)."""
    tmp = np.empty(3)
    for i in range(n_contacts):
        r = 3 * i
        if mu[i] > 0.0:
            _project_cone(x[r], x[r + 1], x[r + 2], 1.0 / mu[i], tmp)
            out[r], out[r + 1], out[r + 2] = tmp[0], tmp[1], tmp[2]
        else:  # K_0 is the normal ray; its dual the half-space z_n ≥ 0
            out[r] = x[r] if x[r] > 0.0 else 0.0
            out[r + 1], out[r + 2] = x[r + 1], x[r + 2]
    for r in range(3 * n_contacts, x.shape[0]):
        out[r] = x[r] if x[r] > 0.0 else 0.0


@jit
def _shift(mu, n_contacts, z, s):
    """De Saxcé's shift of a velocity-like ``z``: μ‖z_t‖ on each normal row, 0 elsewhere."""
    s[:] = 0.0
    for i in range(n_contacts):
        r = 3 * i
        s[r] = mu[i] * math.sqrt(z[r + 1] * z[r + 1] + z[r + 2] * z[r + 2])
