"""The contact step's terms for one compiled model in one call (``docs/contact.md``, "The step's parts compiled").

:func:`contact_terms` computes what :func:`mbs_ros.dynamics.contact.step.step` needs before its solve, where the
scene is one model with compiled kernels (a legged robot on the ground, an ROV on the seabed): the free velocity
``v_f = v + h M⁻¹(τ − C v − g)`` (the articulated-body algorithm, as ``Model.forward_dynamics``), the contact rows
``J`` (:func:`~mbs_ros.dynamics.contact.kernels.model_rows` on the contact frames), the mass matrix (CRBA), its
Cholesky factor ``M = L Lᵀ``, ``M⁻¹Jᵀ`` and the Delassus matrix ``G = J M⁻¹ Jᵀ = Yᵀ Y`` with ``Y = L⁻¹ Jᵀ`` (exactly
symmetric), and ``g = J v_f`` with each normal row's gap ``max(φ, 0)/h``. The numpy path of the step makes the
same terms in a dozen calls (LAPACK's Cholesky, BLAS products): the two agree to rounding
(``test_contact_terms``), and a scene takes one path or the other at every step, so a run is reproducible.
After the solve, :func:`velocity_after` gives ``v⁺ = v_f + M⁻¹Jᵀλ`` and the impulses' power, and :func:`move` the
post-stabilisation's shift with its energy balance and the step on the group (a model without passive elements:
its potential energy is gravity's, the kernel's).
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.contact.kernels import BASE_COLUMNS, contact_frames, model_rows
from mbs_ros.dynamics.kernels.compiled import AVAILABLE, _f64, warm_up_model
from mbs_ros.dynamics.kernels.jit import jit
from mbs_ros.dynamics.kernels.multibody import _aba_core, _crba_core, _SingularPivot
from mbs_ros.dynamics.kernels.step import _energy_core, _integrate

__all__ = ["contact_terms", "velocity_after", "move", "warm_up"]


@jit
def _terms(im, fm, I6, q, v, tau, h, T, points, normals, dist, sides, s_joint, support, nvb, kind, cols,
           v_free, J, MinvJt, G, g):
    """Fill ``v_free`` (nv,), ``J`` (3n, nv), ``MinvJt`` (nv, 3n), ``G`` (3n, 3n), ``g`` (3n,); returns False
    where the mass matrix is not positive definite (nothing else is then meaningful)."""
    nv, n = v.shape[0], points.shape[0]
    m = 3 * n
    a = np.empty(nv)
    _aba_core(im, fm, I6, q, v, tau, np.zeros((1, 6)), False, a)
    for c in range(nv):
        v_free[c] = v[c] + h * a[c]
    frames = np.empty((n, 3, 3))
    contact_frames(normals, frames)
    J3 = J.reshape(n, 3, nv)
    J3[:] = 0.0
    model_rows(J3, sides, 0, points, frames, T, s_joint, support, nvb, kind, cols, 0)
    M = np.empty((nv, nv))
    _crba_core(im, fm, I6, q, M)
    L = np.zeros((nv, nv))  # M = L Lᵀ (Cholesky–Banachiewicz)
    for i in range(nv):
        for j in range(i + 1):
            s = M[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if not s > 0.0:
                    return False
                L[i, i] = math.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    Y = np.empty((m, nv))  # row r: L⁻¹ J[r] (Yᵀ = L⁻¹ Jᵀ), rows contiguous
    X = np.empty(nv)
    for r in range(m):
        for i in range(nv):
            s = J[r, i]
            for k in range(i):
                s -= L[i, k] * Y[r, k]
            Y[r, i] = s / L[i, i]
        for i in range(nv - 1, -1, -1):  # Lᵀ x = y: x = M⁻¹ J[r]
            s = Y[r, i]
            for k in range(i + 1, nv):
                s -= L[k, i] * X[k]
            X[i] = s / L[i, i]
        for i in range(nv):
            MinvJt[i, r] = X[i]
    for r in range(m):  # G = Yᵀ Y
        for c in range(r, m):
            s = 0.0
            for k in range(nv):
                s += Y[r, k] * Y[c, k]
            G[r, c] = s
            G[c, r] = s
    for r in range(m):
        s = 0.0
        for k in range(nv):
            s += J[r, k] * v_free[k]
        g[r] = s
    for i in range(n):
        d = dist[i]
        if d > 0.0 or d != d:  # np.maximum(φ, 0): a NaN stays NaN
            g[3 * i] += d / h
    return True


def contact_terms(compiled, q, v, tau, h, T, points, normals, dist, sides, layout):
    """``(v_free, J, MinvJt, G, g)`` of one model with compiled kernels ``compiled``
    (:class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel`) at ``(q, v)`` under ``tau`` (passive forces
    included), its body poses ``T`` (nb, 4, 4) at ``q``, the contacts' ``points`` (n, 3), ``normals`` (n, 3),
    ``dist`` (n,), ``sides`` (n, 4; model 0 or −1) and the tree's row layout ``(s_joint, support, nvb, kind,
    cols)`` (:func:`mbs_ros.dynamics.contact.step.contact_rows`'); None where the mass matrix is singular or not
    positive definite (the numpy path then raises what it raises)."""
    nv, m = v.shape[0], 3 * points.shape[0]
    v_free, J, MinvJt, G, g = np.empty(nv), np.empty((m, nv)), np.empty((nv, m)), np.empty((m, m)), np.empty(m)
    s_joint, support, nvb, kind, cols = layout
    try:
        ok = _terms(compiled.im, compiled.fm, compiled.I6, _f64(q, compiled.nq), _f64(v, nv), _f64(tau, nv), float(h),
                    _f64(T), _f64(points), _f64(normals), _f64(dist), sides, s_joint, support, nvb, kind, cols,
                    v_free, J, MinvJt, G, g)
    except _SingularPivot:
        return None
    return (v_free, J, MinvJt, G, g) if ok else None


@jit
def _velocity_after(v_free, MinvJt, lam, J, gap, slop, h, v_next):
    """``v_next = v_f + M⁻¹Jᵀλ``; returns the impulses' mean power ``λᵀJ(v_f + v⁺)/(2h)`` and whether a gap is
    deeper than ``slop``."""
    nv, m = MinvJt.shape
    for i in range(nv):
        acc = 0.0
        for r in range(m):
            acc += MinvJt[i, r] * lam[r]
        v_next[i] = v_free[i] + acc
    power = 0.0
    for r in range(m):
        s = 0.0
        for k in range(nv):
            s += J[r, k] * (v_free[k] + v_next[k])
        power += lam[r] * s
    deep = False
    for r in range(gap.shape[0]):
        if gap[r] < -slop:
            deep = True
    return 0.5 * power / h, deep


def velocity_after(v_free, MinvJt, lam, J, gap, slop, h):
    """``(v⁺, power, deep)`` after the solve (:func:`_velocity_after`)."""
    v_next = np.empty(v_free.shape[0])
    power, deep = _velocity_after(v_free, MinvJt, _f64(lam), J, _f64(gap), float(slop), float(h), v_next)
    return v_next, float(power), bool(deep)


@jit
def _move(im, fm, I6, mc, q, v_next, MinvJt, shift, shifting, h, q_out):
    """The post-stabilisation (``shifting``: the normal rows' shift ``shift``, every third column of ``MinvJt``):
    ``q ← q·exp(M⁻¹J_nᵀ μ)``, the potential energy it restores taken from the kinetic energy (``v_next`` scaled),
    then ``q_out = q·exp(h v_next)``."""
    nv, nq = v_next.shape[0], q.shape[0]
    start = q
    if shifting:
        delta = np.zeros(nv)
        moved = False
        for i in range(nv):
            acc = 0.0
            for c in range(shift.shape[0]):
                acc += MinvJt[i, 3 * c] * shift[c]
            delta[i] = acc
            if acc != 0.0:
                moved = True
        if moved:
            start = np.empty(nq)
            _integrate(im, q, delta, start)
            e = np.empty(2)
            zero = np.zeros(nv)
            _energy_core(im, fm, I6, mc, start, zero, e)
            gained = e[1]
            _energy_core(im, fm, I6, mc, q, zero, e)
            gained -= e[1]
            if gained > 0.0:
                _energy_core(im, fm, I6, mc, start, v_next, e)
                kinetic = e[0]
                factor = math.sqrt(max(0.0, 1.0 - gained / kinetic)) if kinetic > 0.0 else 0.0
                for i in range(nv):
                    v_next[i] *= factor
    xi = np.empty(nv)
    for i in range(nv):
        xi[i] = v_next[i] * h
    _integrate(im, start, xi, q_out)


def move(compiled, q, v_next, MinvJt, shift, h):
    """``q⁺`` of a one-model scene without passive elements: the post-stabilisation's shift by the normal rows'
    impulses ``shift`` (None: no shift) with its energy balance (``v_next`` scaled in place), then the step
    ``q · exp(h v_next)`` on the group."""
    q_out = np.empty(compiled.nq)
    shifting = shift is not None
    _move(compiled.im, compiled.fm, compiled.I6, compiled.mc, _f64(q, compiled.nq), v_next, MinvJt,
          _f64(shift) if shifting else np.zeros(0), shifting, float(h), q_out)
    return q_out


def warm_up() -> float:
    """Compile (or load from the on-disk cache) the three kernels, and the compiled exponential the step calls
    beside them, by calling them once on the warm-up tree, a contact of its second body against the world (the
    environment's set-up calls this, so that no node or test compiles them: ~7 s of CPU; ``ContactWorld.warm_up``,
    so that a node's first contact step loads nothing); returns the seconds it took."""
    import time

    t0 = time.perf_counter()
    if not AVAILABLE:
        return 0.0
    c, q = warm_up_model()
    v = np.zeros(c.nv)
    layout = (np.zeros((1, 6)), np.ones((c.nb, c.nv)), 6, BASE_COLUMNS, np.arange(6, dtype=np.int64))
    terms = contact_terms(c, q, v, v, 1e-3, c.body_poses(q), np.zeros((1, 3)), np.array([[0.0, 0.0, 1.0]]),
                          np.zeros(1), np.array([[0, 1, -1, -1]], dtype=np.int64), layout)
    v_free, J, MinvJt, _, _ = terms
    v_next, _, _ = velocity_after(v_free, MinvJt, np.zeros(3), J, np.zeros(1), 1e-9, 1e-3)
    move(c, q, v_next, MinvJt, np.zeros(1), 1e-3)
    move(c, q, v_next, MinvJt, None, 1e-3)
    c.integrate(q, v)
    return time.perf_counter() - t0
