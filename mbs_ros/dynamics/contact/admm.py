"""The ADMM stages of the contact solve (:func:`mbs_ros.dynamics.contact.solver.solve`), run where Gauss–Seidel stalls:
Anderson-accelerated ADMM at a fixed penalty, then ADMM with an adaptive penalty as Pinocchio runs it, both on the
exact NCP (De Saxcé's shift). Each runs in slices: a call takes at most a given number of iterations and leaves
its whole state in arrays, so the caller can stop between slices (a node's callback) and go on later with the same
numbers as in one call (docs/contact.md, "The solver")."""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.contact.cones import _project_all, _project_dual_all, _shift, residual
from mbs_ros.dynamics.kernels.jit import jit

#: Iterations (ADMM maps, Gauss–Seidel sweeps) per compiled call when the caller may stop between calls (a
#: ``checkpoint``): 16 keeps a Solo12 landing's slices near 0.1 ms (32 took up to 0.7 ms; docs/contact.md, "The
#: solver").
SLICE = 16


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
def _admm_loop(G, g, mu, n_contacts, lam, max_iter, tol, mu_prox, rho, step, x, y, z, best, A, L, inverse, k0,
               k_stop):
    """The iterations ``k0 + 1 .. min(k_stop, max_iter)`` of :func:`_admm` from ``x``, ``y``, ``z`` and ``rho``
    (``inverse`` = (G + (μ_prox + ρ)I)⁻¹ from the last slice; factored here at ``k0`` = 0). Returns (iterations
    done, the residual of ``lam``, ρ, whether the run is over: converged, the budget spent, or a breakdown)."""
    m = g.shape[0]
    if k0 == 0:
        if not _proximal_factor(G, mu_prox + rho, A, L):
            return 0, best, rho, True
        inverse[:] = np.linalg.inv(A)  # A is G + (mu_prox + rho)I, finite and positive definite (its factor exists)
    s = np.empty(m)
    rhs = np.empty(m)
    tmp = np.empty(m)
    x_prev = np.empty(m)
    y_prev = np.empty(m)
    k = k0
    for k in range(k0 + 1, max_iter + 1):
        if k > k_stop:
            return k - 1, best, rho, False
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
            inverse[:] = np.linalg.inv(A)
        elif dual > 10.0 * primal:
            rho /= step
            if not _proximal_factor(G, mu_prox + rho, A, L):
                break
            inverse[:] = np.linalg.inv(A)
    return k, best, rho, True


def _admm(G, g, mu, n_contacts, lam, max_iter, tol, checkpoint=None):
    """ADMM on the cone-constrained problem with De Saxcé's shift (the exact NCP), as Pinocchio's
    ``ADMMContactSolver`` runs it (Carpentier, Le Lidec et al. 2024): a primal ``x`` from the proximal system
    ``(G + (μ_prox + ρ)I) x = −(g + s) + ρ y + μ_prox x + z``, its projection ``y = P_K(x − z/ρ)`` onto the
    friction cones, the dual velocity ``z ← z − ρ(x − y)`` whose tangential part gives the shift ``s``; ρ starts
    at ``√(L m)·(L/m)^0.2`` (L the largest eigenvalue of G, m = μ_prox) and moves by ``(L/m)^0.05`` when the primal
    and dual residuals are more than 10 apart. ``lam`` is overwritten only by an iterate with a smaller residual
    (:func:`residual`). Returns (iterations, the residual of ``lam``). The iterations are compiled
    (:func:`_admm_loop`, the proximal system by its inverse, checked positive definite by its Cholesky factor), in
    slices of :data:`SLICE` with ``checkpoint()`` called between them when one is given."""
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
    # numba's inverse is Fortran-ordered, and the product with it sums in that order: kept so
    A, Lf, inverse = np.empty((m, m)), np.empty((m, m)), np.empty((m, m), order="F")
    k, max_iter = 0, int(max_iter)
    size = max_iter if checkpoint is None else SLICE
    if checkpoint is not None:  # after the set-up, before the first slice
        checkpoint()
    while True:
        k, best, rho, over = _admm_loop(G, g, mu, int(n_contacts), lam, max_iter, float(tol), mu_prox, rho, step,
                                        x, y, z, best, A, Lf, inverse, k, k + size)
        if over:
            return int(k), float(best)
        checkpoint()


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
def _anderson_begin(G, g, mu, n_contacts, lam, tol, memory, rho_fraction, mm, inverse, vm, vn, sc) -> bool:
    """:func:`_anderson_admm`' start: the proximal matrix and its factor into ``mm``, its ``inverse``, the state
    (x, y, z) from ``lam`` and its first map into ``vn`` (s, T(s), two spares, f, the previous T(s) and f), the
    scalars into ``sc`` (maps evaluated, history length, ‖f‖, the residual of ``lam``, μ_prox, ρ). False: nothing
    to iterate (converged already, no positive eigenvalue, no memory, the proximal matrix not definite)."""
    m = g.shape[0]
    best = residual(G, g, mu, n_contacts, lam)
    sc[0], sc[1], sc[3] = 0.0, 0.0, best
    top = _largest_eigenvalue(G, 20)
    if not (top > 0.0 and math.isfinite(best)) or memory < 1 or best <= tol:
        return False
    mu_prox, rho = 1e-6 * top, rho_fraction * top
    if not _proximal_factor(G, mu_prox + rho, mm[0], mm[1]):  # positive definite and finite: then invertible
        return False
    inverse[:] = np.linalg.inv(mm[0])
    s, Ts, f = vn[0], vn[1], vn[4]  # the state (x, y, z); Ts = T(s), f = T(s) − s
    s[:m] = lam
    _project_all(lam, mu, n_contacts, s[m:2 * m])
    z0 = G @ s[m:2 * m] + g - (mu_prox + rho) * s[m:2 * m]
    _shift(mu, n_contacts, z0, vm[1])
    _project_dual_all(z0 + vm[1], mu, n_contacts, s[2 * m:])
    fn = _admm_map(G, g, mu, n_contacts, inverse, mu_prox, rho, s, Ts, vm[0], vm[1])
    f[:] = Ts - s
    vn[5] = Ts
    vn[6] = f
    sc[0], sc[2], sc[4], sc[5] = 1.0, fn, mu_prox, rho
    return True


@jit
def _anderson_more(G, g, mu, n_contacts, lam, max_iter, tol, memory, inverse, vm, vn, dS, dF, M, gamma, sc,
                   stop_evals) -> bool:
    """:func:`_anderson_admm`' iterations from the state :func:`_anderson_begin` left (and the last slice), until
    ``stop_evals`` maps are evaluated; True when the run is over (converged, ``max_iter`` maps, ‖f‖ not finite)."""
    m = g.shape[0]
    rhs, shift = vm[0], vm[1]
    s, Ts, cand, Tc, f, prev_T, prev_f = vn[0], vn[1], vn[2], vn[3], vn[4], vn[5], vn[6]
    evals, count, fn, best, mu_prox, rho = int(sc[0]), int(sc[1]), sc[2], sc[3], sc[4], sc[5]
    over = True
    while evals < max_iter and math.isfinite(fn):
        if evals >= stop_evals:
            over = False
            break
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
    sc[0], sc[1], sc[2], sc[3] = evals, count, fn, best
    return over


def _anderson_admm(G, g, mu, n_contacts, lam, max_iter, tol, memory, rho_fraction, checkpoint=None):
    """ADMM on the exact NCP (:func:`_admm`'s iteration and start from ``lam``) at a fixed ρ = ``rho_fraction`` ×
    G's largest eigenvalue, accelerated by Anderson mixing (type II, the last ``memory`` iterates) with a safeguard:
    a mixed state is kept only if its fixed-point residual ‖T(s) − s‖ is no larger than the last one, else the plain
    step is taken and the history restarts. At a Solo12 landing ADMM's slow phase is a linear drift (a foot's patch
    points trading load along modes G barely sees), which the mixing extrapolates. ``lam`` is overwritten only by
    an iterate's projected part y with a smaller :func:`residual`. Returns (ADMM maps evaluated, the residual of
    ``lam``). Compiled (:func:`_anderson_begin`, :func:`_anderson_more`), in slices of :data:`SLICE` maps with
    ``checkpoint()`` called between them when one is given."""
    m, memory = g.shape[0], int(memory)
    n = 3 * m
    mm, vm, vn, sc = np.empty((2, m, m)), np.empty((2, m)), np.empty((7, n)), np.zeros(6)
    inverse = np.empty((m, m), order="F")  # as numba's inverse is ordered (the product with it sums in that order)
    if not _anderson_begin(G, g, mu, int(n_contacts), lam, float(tol), memory, float(rho_fraction), mm, inverse, vm,
                           vn, sc):
        return int(sc[0]), float(sc[3])
    # successive differences of T(s) and f (a ring), their Gram matrix dF dFᵀ, the mixing weights
    dS, dF, M, gamma = np.empty((memory, n)), np.empty((memory, n)), np.zeros((memory, memory)), np.empty(memory)
    size = int(max_iter) if checkpoint is None else SLICE
    if checkpoint is not None:  # after the set-up (the proximal system's inverse), before the first slice
        checkpoint()
    while not _anderson_more(G, g, mu, int(n_contacts), lam, int(max_iter), float(tol), memory, inverse, vm, vn, dS,
                             dF, M, gamma, sc, int(sc[0]) + size):
        checkpoint()
    return int(sc[0]), float(sc[3])
