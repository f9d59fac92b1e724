"""The velocity-level contact problem with exact Coulomb friction, solved by block Gauss–Seidel (``docs/contact.md``).

One time step of length h (Stewart & Trinkle 1996, Anitescu & Potra 1997; ``../shared/notes/contact.md``) leaves
the impulses ``λ`` of the constraints to find from the Delassus matrix ``G = J M⁻¹ Jᵀ`` and the free velocity
``g = J v_f`` (plus a stabilisation term): the constraint velocity is ``c = G λ + g``. The rows come in blocks:

* a **contact** ``i`` has three rows, its normal then two tangents, a friction coefficient ``μ_i ≥ 0``, and obeys
  Coulomb's law exactly (the nonlinear complementarity problem on the second-order cone, not its convex
  relaxation): ``λ_i ∈ K_μ = {‖λ_t‖ ≤ μ λ_n}``, ``c_n ≥ 0``, ``λ_n c_n = 0``; sticking (``c_i = 0``) inside the
  cone, sliding on its boundary with ``λ_t = −μ λ_n c_t/‖c_t‖`` (maximal dissipation), or separating (``λ_i = 0``).
  In De Saxcé's form: ``K_μ ∋ λ ⊥ c + μ‖c_t‖ e_n ∈ K_μ*``.
* a **unilateral** row (a joint limit) has ``λ ≥ 0``, ``c ≥ 0``, ``λ c = 0``.

:func:`solve` sweeps the blocks in order, each solved exactly given the others (a contact: separation, the
sticking solution ``−W⁻¹ b``, or the sliding one, found as the root in the friction angle of ``c_t ∥ −λ_t`` on
the cone's boundary with ``c_n = 0``), until the impulses stop changing; :func:`residual` measures how far a
``λ`` is from the exact law (the natural map of De Saxcé's form, in velocity units), the number the diagnostics
report. Everything is compiled (:mod:`mbs_ros.dynamics.kernels.jit`) and allocates only per call.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit

__all__ = ["solve", "residual", "SolveResult", "local_contact", "warm_up"]

#: A solve has converged when its residual (velocity units) is within this fraction of the largest free constraint
#: velocity |g|: 1e-6 of gravity's h·g at rest (1e-8 m/s at h = 1 ms, a 1e-11 m position error per step).
#: Gauss–Seidel runs until no impulse changes by more than ``tol`` (1e-12) relative, far below it, so the closed
#: forms hold to rounding — unless it stalls within this tolerance (redundant contacts: :func:`_gauss_seidel`);
#: the tolerance decides when it hands over to ADMM and what ``converged`` reports.
RESIDUAL_TOLERANCE = 1e-6
_TWO_PI = 2.0 * math.pi
_SAMPLES = 16  # friction angles sampled to bracket the sliding root when Newton's guess fails


@jit
def _slide_conditions(W, b, mu, phi):
    """For λ = λ_n (1, μ cos φ, μ sin φ) with ``c_n = 0``: ``(λ_n, f, s)`` where ``f = c_t × d`` (zero when the
    tangential velocity is parallel to d = (cos φ, sin φ)) and ``s = c_t · d`` (must be ≤ 0: sliding opposes λ_t)."""
    cp, sp = math.cos(phi), math.sin(phi)
    denom = W[0, 0] + mu * (W[0, 1] * cp + W[0, 2] * sp)
    if denom <= 0.0:
        return -1.0, 0.0, 1.0
    ln = -b[0] / denom
    c1 = ln * (W[1, 0] + mu * (W[1, 1] * cp + W[1, 2] * sp)) + b[1]
    c2 = ln * (W[2, 0] + mu * (W[2, 1] * cp + W[2, 2] * sp)) + b[2]
    return ln, c1 * sp - c2 * cp, c1 * cp + c2 * sp


@jit
def local_contact(W, b, mu, out):
    """The exact Coulomb impulse of one contact with Delassus block ``W`` (3×3) and velocity ``c = W λ + b``;
    written to ``out`` (3,). Returns 0 (separating), 1 (sticking) or 2 (sliding); 3 when no sliding root was
    found (then ``out`` is the sticking impulse projected onto the cone, counted by the caller)."""
    if b[0] >= 0.0:  # λ = 0 gives c_n = b_n ≥ 0: the contact opens (any tangential velocity is allowed)
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        return 0
    # sticking: W λ = −b
    a00, a01, a02 = W[0, 0], W[0, 1], W[0, 2]
    a10, a11, a12 = W[1, 0], W[1, 1], W[1, 2]
    a20, a21, a22 = W[2, 0], W[2, 1], W[2, 2]
    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
    ln = lt1 = lt2 = 0.0
    if det != 0.0:
        r0, r1, r2 = -b[0], -b[1], -b[2]
        ln = (r0 * (a11 * a22 - a12 * a21) - a01 * (r1 * a22 - a12 * r2) + a02 * (r1 * a21 - a11 * r2)) / det
        lt1 = (a00 * (r1 * a22 - a12 * r2) - r0 * (a10 * a22 - a12 * a20) + a02 * (a10 * r2 - r1 * a20)) / det
        lt2 = (a00 * (a11 * r2 - r1 * a21) - a01 * (a10 * r2 - r1 * a20) + r0 * (a10 * a21 - a11 * a20)) / det
        if ln >= 0.0 and math.sqrt(lt1 * lt1 + lt2 * lt2) <= mu * ln:
            out[0] = ln
            out[1] = lt1
            out[2] = lt2
            return 1
    if mu == 0.0:  # frictionless: c_n = 0 with λ_t = 0
        out[0] = -b[0] / a00
        out[1] = 0.0
        out[2] = 0.0
        return 2
    # sliding: a root of f(φ) with λ_n ≥ 0 and s ≤ 0. Newton from the sticking impulse's direction first.
    phi = math.atan2(lt2, lt1) if (lt1 != 0.0 or lt2 != 0.0) else math.atan2(-b[2], -b[1])
    found = False
    for _ in range(30):
        ln, f, s = _slide_conditions(W, b, mu, phi)
        if ln < 0.0 or s > 0.0:
            break
        # df/dφ by a central difference of the smooth f (no closed form needed at this size)
        e = 1e-7
        _, fp, _ = _slide_conditions(W, b, mu, phi + e)
        _, fm, _ = _slide_conditions(W, b, mu, phi - e)
        d = (fp - fm) / (2.0 * e)
        if d == 0.0:
            break
        step = f / d
        phi -= step
        if abs(step) < 1e-15:
            ln, f, s = _slide_conditions(W, b, mu, phi)
            found = ln >= 0.0 and s <= 0.0
            break
    if not found:  # bracket a sign change of f among sampled angles, then bisect
        best = -1.0
        prev_phi = 0.0
        _, prev_f, _ = _slide_conditions(W, b, mu, 0.0)
        for k in range(1, _SAMPLES + 1):
            p = _TWO_PI * k / _SAMPLES
            _, fk, _ = _slide_conditions(W, b, mu, p)
            if (prev_f <= 0.0) != (fk <= 0.0):
                lo, hi, flo = prev_phi, p, prev_f
                for _ in range(80):
                    mid = 0.5 * (lo + hi)
                    _, fm, _ = _slide_conditions(W, b, mu, mid)
                    if (fm <= 0.0) == (flo <= 0.0):
                        lo, flo = mid, fm
                    else:
                        hi = mid
                mid = 0.5 * (lo + hi)
                lm, _, sm = _slide_conditions(W, b, mu, mid)
                if lm >= 0.0 and sm <= 0.0:
                    phi = mid
                    found = True
                    best = lm
                    break
            prev_phi, prev_f = p, fk
        if found:
            ln = best
    if found:
        ln, f, s = _slide_conditions(W, b, mu, phi)
        out[0] = ln
        out[1] = mu * ln * math.cos(phi)
        out[2] = mu * ln * math.sin(phi)
        return 2
    # no root (W far from symmetric positive): the sticking impulse projected on the cone
    _project_cone(ln, lt1, lt2, mu, out)
    return 3


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
def _sweeps(G, g, mu, n_contacts, lam, max_sweeps, tol):
    """Block Gauss–Seidel sweeps in place on ``lam``; returns (sweeps done, largest last change, failed local
    solves in the last sweep)."""
    m = g.shape[0]
    W = np.empty((3, 3))
    b = np.empty(3)
    out = np.empty(3)
    change = 0.0
    failed = 0
    k = 0
    for k in range(1, max_sweeps + 1):
        change = 0.0
        failed = 0
        scale = 0.0
        for i in range(n_contacts):
            r = 3 * i
            acc0, acc1, acc2 = _three_rows(G, g, lam, r)  # the block's three rows of G λ + g
            for a in range(3):
                acc = acc0 if a == 0 else (acc1 if a == 1 else acc2)
                for c in range(3):
                    W[a, c] = G[r + a, r + c]
                    acc -= G[r + a, r + c] * lam[r + c]
                b[a] = acc
            code = local_contact(W, b, mu[i], out)
            if code == 3:
                failed += 1
            for a in range(3):
                d = abs(out[a] - lam[r + a])
                if d > change:
                    change = d
                if abs(out[a]) > scale:
                    scale = abs(out[a])
                lam[r + a] = out[a]
        for r in range(3 * n_contacts, m):
            acc = g[r]
            for j in range(m):
                acc += G[r, j] * lam[j]
            acc -= G[r, r] * lam[r]
            new = -acc / G[r, r]
            if new < 0.0:
                new = 0.0
            d = abs(new - lam[r])
            if d > change:
                change = d
            if new > scale:
                scale = new
            lam[r] = new
        if change <= tol * max(scale, 1e-300) or change == 0.0:
            break
    return k, change, failed


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


@jit
def _cholesky(A, L) -> bool:
    """``L`` (lower, zeros above) with ``L Lᵀ = A``; False if ``A`` is not positive definite."""
    m = A.shape[0]
    for j in range(m):
        d = A[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 0.0:
            return False
        d = math.sqrt(d)
        L[j, j] = d
        for i in range(j):
            L[i, j] = 0.0
        for i in range(j + 1, m):
            t = A[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / d
    return True


@jit
def _proximal_factor(G, shift, A, L) -> bool:
    """``L``: the Cholesky factor of ``G + shift I`` (``A`` its storage)."""
    m = G.shape[0]
    for a in range(m):
        for b in range(m):
            A[a, b] = G[a, b]
        A[a, a] += shift
    return _cholesky(A, L)


@jit
def _admm_loop(G, g, mu, n_contacts, lam, max_iter, tol, mu_prox, rho, step, x, y, z, best):
    """The iterations of :func:`_admm` from ``x``, ``y``, ``z`` (compiled: one call per solve). Returns
    (iterations, the residual of ``lam``)."""
    m = g.shape[0]
    A = np.empty((m, m))
    L = np.empty((m, m))
    if not _proximal_factor(G, mu_prox + rho, A, L):
        return 0, best
    inverse = np.linalg.inv(A)  # A is G + (mu_prox + rho)I, finite and positive definite (its factor exists)
    s = np.empty(m)
    rhs = np.empty(m)
    tmp = np.empty(m)
    x_prev = np.empty(m)
    y_prev = np.empty(m)
    k = 0
    for k in range(1, max_iter + 1):
        x_prev[:] = x
        y_prev[:] = y
        _shift(mu, n_contacts, z, s)
        for a in range(m):
            rhs[a] = -(g[a] + s[a]) + rho * y[a] + mu_prox * x[a] + z[a]
        x[:] = inverse @ rhs  # one product: five times faster than the two triangular solves
        for a in range(m):
            tmp[a] = x[a] - z[a] / rho
        _project_all(tmp, mu, n_contacts, y)
        finite = True
        for a in range(m):
            z[a] = z[a] - rho * (x[a] - y[a])
            if not math.isfinite(y[a]):
                finite = False
        if not finite:
            break
        res = residual(G, g, mu, n_contacts, y)
        if res < best:
            best = res
            lam[:] = y
        if res <= tol:
            break
        primal = 0.0
        dual = 0.0
        for a in range(m):
            p = abs(x[a] - y[a])
            if p > primal:
                primal = p
            d = abs(rho * (y[a] - y_prev[a]) + mu_prox * (x[a] - x_prev[a]))
            if d > dual:
                dual = d
        if primal > 10.0 * dual:
            rho *= step
            if not _proximal_factor(G, mu_prox + rho, A, L):
                break
            inverse = np.linalg.inv(A)
        elif dual > 10.0 * primal:
            rho /= step
            if not _proximal_factor(G, mu_prox + rho, A, L):
                break
            inverse = np.linalg.inv(A)
    return k, best


def _admm(G, g, mu, n_contacts, lam, max_iter, tol):
    """ADMM on the cone-constrained problem with De Saxcé's shift (the exact NCP), as Pinocchio's
    ``ADMMContactSolver`` runs it (Carpentier, Le Lidec et al. 2024): a primal ``x`` from the proximal system
    ``(G + (μ_prox + ρ)I) x = −(g + s) + ρ y + μ_prox x + z``, its projection ``y = P_K(x − z/ρ)`` onto the
    friction cones, the dual velocity ``z ← z − ρ(x − y)`` whose tangential part gives the shift ``s``; ρ starts
    at ``√(L m)·(L/m)^0.2`` (L the largest eigenvalue of G, m = μ_prox) and moves by ``(L/m)^0.05`` when the primal
    and dual residuals are more than 10 apart. ``lam`` is overwritten only by an iterate with a smaller residual
    (:func:`residual`). Returns (iterations, the residual of ``lam``). The iterations are one compiled call
    (:func:`_admm_loop`, the proximal system by its inverse, checked positive definite by its Cholesky factor)."""
    m = g.shape[0]
    L = max(float(_largest_eigenvalue(G, 20)), 1e-300)  # compiled: numpy's eigvalsh took 70 us of the fallback
    mu_prox = 1e-6 * L
    cond = L / mu_prox
    rho = math.sqrt(L * mu_prox) * cond ** 0.2
    step = cond ** 0.05
    x = lam.copy()
    y = np.empty(m)
    _project_all(x, mu, n_contacts, y)
    s = np.empty(m)
    z0 = G @ y + g - (mu_prox + rho) * y
    _shift(mu, n_contacts, z0, s)
    z = np.empty(m)
    _project_dual_all(z0 + s, mu, n_contacts, z)
    best = residual(G, g, mu, n_contacts, lam)
    k, best = _admm_loop(G, g, mu, int(n_contacts), lam, int(max_iter), float(tol), mu_prox, rho, step, x, y, z,
                         best)
    return int(k), float(best)


#: Anderson-accelerated ADMM (:func:`_anderson_admm`): its fixed penalty ρ as a fraction of G's largest eigenvalue
#: (a changing ρ would void the history; 0.03 of :func:`_admm`'s starting ρ) and how many past iterates it combines,
#: chosen on the slowest solves captured from solo12_stand, uvms_grasp and rov_landing (docs/contact.md).
ANDERSON_RHO = 4.75e-4
ANDERSON_MEMORY = 6


@jit
def _largest_eigenvalue(G, iterations):
    """G's (symmetric, positive semi-definite) largest eigenvalue: the Rayleigh quotient after ``iterations`` power
    iterations from its diagonal (from below, within a few % here: all ρ's rule needs)."""
    v = np.abs(np.diag(G)) + 1e-300
    est = 0.0
    for _ in range(iterations):
        w = G @ v
        est = (v @ w) / (v @ v)
        nrm = math.sqrt(w @ w)
        if not nrm > 0.0:
            return 0.0
        v = w / nrm
    return est


@jit
def _admm_map(G, g, mu, n_contacts, inverse, mu_prox, rho, s, out, rhs, shift):
    """``out`` = one iteration of :func:`_admm` (ρ fixed, ``inverse`` = (G + (μ_prox + ρ)I)⁻¹: one product, five
    times faster than the two triangular solves) from the state ``s = (x, y, z)`` stacked (3m,); returns ‖out − s‖,
    the fixed-point residual."""
    m = g.shape[0]
    _shift(mu, n_contacts, s[2 * m:], shift)
    for a in range(m):
        rhs[a] = -(g[a] + shift[a]) + rho * s[m + a] + mu_prox * s[a] + s[2 * m + a]
    out[:m] = inverse @ rhs
    for a in range(m):
        rhs[a] = out[a] - s[2 * m + a] / rho
    _project_all(rhs, mu, n_contacts, out[m:2 * m])
    for a in range(m):
        out[2 * m + a] = s[2 * m + a] - rho * (out[a] - out[m + a])
    d = out - s
    return math.sqrt(d @ d)


@jit
def _mixing(M, dF, f, k, gamma) -> bool:
    """Anderson's weights: ``gamma[:k]`` minimising ‖f − Σ γ_i dF_i‖ from the (regularised) normal equations
    ``M γ = dF f`` (M the Gram matrix of the k rows dF_i), by Gauss elimination; False if singular."""
    K = np.empty((k, k + 1))
    tr = np.trace(M[:k, :k])
    for i in range(k):
        K[i, :k] = M[i, :k]
        K[i, i] += 1e-12 * tr + 1e-300
        K[i, k] = dF[i] @ f
    for c in range(k):
        p = c + np.argmax(np.abs(K[c:, c]))
        if not abs(K[p, c]) > 0.0:
            return False
        for j in range(k + 1):
            K[c, j], K[p, j] = K[p, j], K[c, j]
        for r in range(c + 1, k):
            K[r, c:] -= (K[r, c] / K[c, c]) * K[c, c:]
    for i in range(k - 1, -1, -1):
        gamma[i] = (K[i, k] - K[i, i + 1:k] @ gamma[i + 1:k]) / K[i, i]
    return True


@jit
def _anderson_admm(G, g, mu, n_contacts, lam, max_iter, tol, memory, rho_fraction):
    """ADMM on the exact NCP (:func:`_admm`'s iteration and start from ``lam``) at a fixed ρ = ``rho_fraction`` × G's
    largest eigenvalue, accelerated by Anderson mixing (type II, the last ``memory`` iterates) with a safeguard: a
    mixed state is kept only if its fixed-point residual ‖T(s) − s‖ is no larger than the last one, else the plain
    step is taken and the history restarts. At a Solo12 landing ADMM's slow phase is a linear drift (a foot's patch
    points trading load along modes G barely sees), which the mixing extrapolates. ``lam`` is overwritten only by
    an iterate's projected part y with a smaller :func:`residual`. Returns (ADMM maps evaluated, the residual of
    ``lam``)."""
    m = g.shape[0]
    n = 3 * m
    best = residual(G, g, mu, n_contacts, lam)
    top = _largest_eigenvalue(G, 20)
    if not (top > 0.0 and math.isfinite(best)) or memory < 1 or best <= tol:
        return 0, best
    mu_prox, rho = 1e-6 * top, rho_fraction * top
    A = np.empty((m, m))
    L = np.empty((m, m))
    if not _proximal_factor(G, mu_prox + rho, A, L):  # positive definite and finite: then invertible
        return 0, best
    inverse = np.linalg.inv(A)
    rhs, shift = np.empty(m), np.empty(m)
    s = np.empty(n)  # the state (x, y, z); Ts = T(s), f = T(s) − s
    s[:m] = lam
    _project_all(lam, mu, n_contacts, s[m:2 * m])
    z0 = G @ s[m:2 * m] + g - (mu_prox + rho) * s[m:2 * m]
    _shift(mu, n_contacts, z0, shift)
    _project_dual_all(z0 + shift, mu, n_contacts, s[2 * m:])
    Ts, cand, Tc = np.empty(n), np.empty(n), np.empty(n)
    fn = _admm_map(G, g, mu, n_contacts, inverse, mu_prox, rho, s, Ts, rhs, shift)
    evals = 1
    f = Ts - s
    dS, dF = np.empty((memory, n)), np.empty((memory, n))  # successive differences of T(s) and f, a ring
    M = np.zeros((memory, memory))  # their Gram matrix dF dFᵀ
    gamma = np.empty(memory)
    prev_T, prev_f = Ts.copy(), f.copy()
    count = 0
    while evals < max_iter and math.isfinite(fn):
        k = min(count, memory)
        accepted = False
        if k > 0 and _mixing(M, dF, f, k, gamma):
            cand[:] = Ts - gamma[:k] @ dS[:k]
            fc = _admm_map(G, g, mu, n_contacts, inverse, mu_prox, rho, cand, Tc, rhs, shift)
            evals += 1
            if fc <= fn:  # the safeguard
                accepted = True
                s[:] = cand
                Ts[:] = Tc
                fn = fc
        restart = False
        if not accepted:  # the plain step from T(s); the history restarts after a refused mixing or a growing fn
            last = fn
            s[:] = Ts
            fn = _admm_map(G, g, mu, n_contacts, inverse, mu_prox, rho, s, Ts, rhs, shift)
            evals += 1
            restart = k > 0 or fn > last
        f[:] = Ts - s
        res = residual(G, g, mu, n_contacts, Ts[m:2 * m])
        if res < best:
            best = res
            lam[:] = Ts[m:2 * m]
            if res <= tol:
                break
        if restart:
            count = 0
        else:  # (T(s), f) minus the previous pair onto the ring
            slot = count % memory
            dS[slot] = Ts - prev_T
            dF[slot] = f - prev_f
            count += 1
            for i in range(min(count, memory)):
                M[i, slot] = M[slot, i] = dF[i] @ dF[slot]
        prev_T[:] = Ts
        prev_f[:] = f
    return evals, best


@jit
def _screen(G, mu, inert_fraction):
    """:func:`solve`'s checks of its input in one pass: 1 a friction coefficient not finite or negative, 2 a
    diagonal entry of G below ``−inert_fraction`` × its largest magnitude, 3 an inert row (:func:`_inert_rows`),
    0 none of these (a NaN on the diagonal passes, as the numpy checks let it)."""
    for i in range(mu.shape[0]):
        if not (math.isfinite(mu[i]) and mu[i] >= 0.0):
            return 1
    m = G.shape[0]
    if m == 0:
        return 0
    lo, hi, big = math.inf, -math.inf, 0.0
    for i in range(m):
        d = G[i, i]
        if d != d:
            return 0
        lo = min(lo, d)
        hi = max(hi, d)
        big = max(big, abs(d))
    if lo < -inert_fraction * max(big, 1e-300):
        return 2
    threshold = inert_fraction * max(hi, 0.0)
    for i in range(m):
        if G[i, i] <= threshold:
            return 3
    return 0


#: Gauss–Seidel's sweeps between two looks at the residual (:func:`_gauss_seidel`).
STALL_CHUNK = 10


@jit
def _gauss_seidel(G, g, mu, n_contacts, lam, max_sweeps, tol, residual_tol):
    """:func:`_sweeps` on ``lam`` then its :func:`residual`, and max |g|, in one compiled call: (sweeps,
    failed local solves in the last sweep, residual, max |g|). The sweeps run in chunks of :data:`STALL_CHUNK`
    until no impulse changes by more than ``tol`` relative; after a chunk that did not get there, they stop when
    the residual is within ``residual_tol`` (< 0: the default, :data:`RESIDUAL_TOLERANCE` × max |g|) and the
    chunk did not halve it — stalled: redundant contacts (a foot's three patch points, a face's four corners)
    leave the impulses' split among them free, and the sweeps move it about for ever without changing c."""
    g_max = 0.0
    for a in range(g.shape[0]):
        g_max = max(g_max, abs(g[a]))
    if residual_tol < 0.0:
        residual_tol = RESIDUAL_TOLERANCE * g_max + 1e-15
    done, failed, last = 0, 0, np.inf
    while done < max_sweeps:
        n = min(STALL_CHUNK, max_sweeps - done)
        k, change, failed = _sweeps(G, g, mu, n_contacts, lam, n, tol)
        done += k
        if k < n:
            break
        res = residual(G, g, mu, n_contacts, lam)
        if res <= residual_tol and res > 0.5 * last:
            return done, failed, res, g_max
        last = res
    return done, failed, residual(G, g, mu, n_contacts, lam), g_max


def warm_up() -> None:
    """Call every compiled kernel of the solver (and of the contact step, :func:`kernels.warm_up`) once on a tiny
    problem (one contact, one unilateral row; both ADMMs' iterations too): numba loads them from its cache (or
    compiles them) at the first call, tens of milliseconds that a node pays at start-up instead of inside its first
    contact step."""
    from mbs_ros.dynamics.contact import kernels  # the contact step's own kernels: ContactWorld.warm_up calls this

    kernels.warm_up()
    G = np.array([[2.0, 0.1, 0.0, 0.0], [0.1, 2.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    g = np.array([-1.0, 0.3, 0.0, -0.5])
    mu = np.array([0.5])
    solve(G, g, mu, 1)
    _admm(G, g, mu, 1, np.zeros(4), 2, 0.0)
    _anderson_admm(G, g, mu, 1, np.zeros(4), 4, 0.0, ANDERSON_MEMORY, ANDERSON_RHO)
    _saxce(G, g, mu, 1, np.zeros(4), np.empty(4))


class SolveResult:
    """What :func:`solve` found: the impulses ``lam`` (m,), the constraint velocities ``c = G λ + g``, the sweeps
    done, the residual (velocity units, :func:`residual`) and whether it converged within the budget."""

    __slots__ = ("lam", "velocity", "sweeps", "residual", "converged", "failed_local")

    def __init__(self, lam, velocity, sweeps, residual, converged, failed_local):
        self.lam = lam
        self.velocity = velocity
        self.sweeps = sweeps
        self.residual = residual
        self.converged = converged
        self.failed_local = failed_local

    def __repr__(self):
        return (f"SolveResult(sweeps={self.sweeps}, residual={self.residual:.3g}, converged={self.converged}, "
                f"failed_local={self.failed_local})")


#: A row is inert when its diagonal of G is at most this fraction of G's largest (J M⁻¹ Jᵀ of a row no body can
#: move along is 0, up to the rounding of the mass matrix's factor).
INERT_FRACTION = 1e-12


def _inert_rows(G, n_contacts: int):
    """Rows no body can move along (``G_ii ≤ INERT_FRACTION · max G_jj``, or the whole matrix zero). A contact
    whose normal row is inert is inert as a whole: its normal force is carried by the joints' bearings, not
    decided by the contact (statically undetermined), so it takes no impulse and so no friction either."""
    d = np.diag(G)
    inert = d <= INERT_FRACTION * max(float(np.max(d)), 0.0)
    for i in range(n_contacts):
        if inert[3 * i]:
            inert[3 * i:3 * i + 3] = True
    return inert  # solve() keeps a contact's tangent row inert alone as a unit row with no free velocity


def solve(G, g, mu, n_contacts: int, lam0=None, max_sweeps: int = 200, tol: float = 1e-12,
          residual_tol: float | None = None, admm_iterations: int = 3000,
          fallback_sweeps: int = 5000) -> SolveResult:
    """Impulses for the rows of ``G`` (m×m, symmetric positive semi-definite) and ``g`` (m,): ``n_contacts``
    blocks of three rows (normal, two tangents) with friction ``mu`` (n_contacts,), then unilateral rows.
    ``lam0`` warm-starts (e.g. the last step's impulses). Stops when a sweep changes no impulse by more than
    ``tol`` relative to the largest, or after ``max_sweeps``; ``converged`` means the residual is within
    ``residual_tol`` (default :data:`RESIDUAL_TOLERANCE` × max|g|). Never raises on a hard problem: the caller reports
    ``converged`` and ``residual`` (the step still finishes)."""
    G = np.ascontiguousarray(G, dtype=float)
    g = np.ascontiguousarray(g, dtype=float).reshape(-1)
    m = g.shape[0]
    if G.shape != (m, m):
        raise ValueError(f"G must be {m}x{m} for {m} rows, got shape {G.shape}")
    if not (0 <= n_contacts and 3 * n_contacts <= m):
        raise ValueError(f"{n_contacts} contacts need {3 * n_contacts} rows, have {m}")
    mu = np.ascontiguousarray(mu, dtype=float).reshape(-1)
    if mu.shape[0] != n_contacts:
        raise ValueError(f"mu must have one value per contact ({n_contacts}), got {mu.shape[0]}")
    screen = _screen(G, mu, INERT_FRACTION)  # the checks below in one compiled pass (0: none applies)
    if screen == 1:
        raise ValueError(f"friction coefficients must be finite and non-negative, got {mu.tolist()}")
    if screen == 2:
        raise ValueError("the Delassus matrix must be positive semi-definite (a negative diagonal)")
    if screen == 3:  # rows no body can move along: their impulse is 0, the rest solved alone
        inert = _inert_rows(G, n_contacts)
        keep = ~inert
        tangent = np.zeros(m, dtype=bool)  # a tangent row alone inert stays in its block as a unit row with g = 0:
        tangent[:3 * n_contacts] = inert[:3 * n_contacts] & np.repeat(~inert[:3 * n_contacts:3], 3)
        keep |= tangent  # its impulse is then 0 whether the contact sticks (c = λ) or slides (c_t against λ_t)
        Gk, gk = G.copy(), g.copy()
        Gk[tangent, :] = 0.0
        Gk[:, tangent] = 0.0
        Gk[tangent, tangent] = 1.0
        gk[tangent] = 0.0
        kept_contacts = keep[:3 * n_contacts:3]
        lam_k = None if lam0 is None else np.asarray(lam0, dtype=float).reshape(m)[keep]
        sub = solve(Gk[np.ix_(keep, keep)], gk[keep], mu[kept_contacts], int(kept_contacts.sum()), lam_k, max_sweeps,
                    tol, residual_tol, admm_iterations, fallback_sweeps)
        lam = np.zeros(m)
        lam[keep] = sub.lam
        return SolveResult(lam, G @ lam + g, sub.sweeps, sub.residual, sub.converged, sub.failed_local)
    lam = np.zeros(m) if lam0 is None else np.array(lam0, dtype=float).reshape(m)
    if m:
        sweeps, failed, res, g_max = _gauss_seidel(G, g, mu, int(n_contacts), lam, int(max_sweeps), float(tol),
                                                   -1.0 if residual_tol is None else float(residual_tol))
    else:
        sweeps, failed, res, g_max = 0, 0, 0.0, 0.0
    if residual_tol is None:
        residual_tol = RESIDUAL_TOLERANCE * g_max + 1e-15
    if res > residual_tol and admm_iterations:  # Gauss–Seidel stalls (stacks, redundant contacts): ADMM from here,
        it, res = _anderson_admm(G, g, mu, int(n_contacts), lam, max(int(admm_iterations) // 8, 1),  # accelerated
                                 float(residual_tol), ANDERSON_MEMORY, ANDERSON_RHO)
        sweeps += it
    if res > residual_tol and admm_iterations:  # then the adaptive-ρ ADMM from the best iterate
        it, res = _admm(G, g, mu, n_contacts, lam, int(admm_iterations), float(residual_tol))
        sweeps += it
    if res > residual_tol and fallback_sweeps:  # then Gauss–Seidel again from the best iterate, kept if better
        trial = lam.copy()
        more, _, failed = _sweeps(G, g, mu, n_contacts, trial, int(fallback_sweeps), float(tol))
        sweeps += more
        res_trial = residual(G, g, mu, n_contacts, trial)
        if res_trial < res:
            lam, res = trial, res_trial
    return SolveResult(lam, G @ lam + g, int(sweeps), float(res), bool(res <= residual_tol), int(failed))
