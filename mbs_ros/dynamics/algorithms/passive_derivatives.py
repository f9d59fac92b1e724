"""Derivatives of the passive forces τ_p(q, v) (:mod:`mbs_ros.dynamics.model.passive`) along ``q ⊕ δ`` and v.

``τ_p = Σ_i J_iᵀ W_i(V_i, u_i, u̇_i) + τ_joints``: each body's water loads ``W_i`` (own frame) depend on its body
twist ``V_i = J_i v`` and on the current and its rate in body axes ``u_i = R_iᵀ U``, ``u̇_i = R_iᵀ U̇`` (world
fixed, so q turns them). Along ``q ⊕ δ`` body i moves by ``T_i exp(J_i δ)``, hence (Murray, Li & Sastry 1994
§3.3; Featherstone 2008 §9.2 in body form)

* ``∂u_i/∂δ = û_i J_i^ω`` (the angular rows of J_i), the same for u̇_i;
* ``∂J_{i,c}/∂δ_k = ad_{J_{i,c}} J_{i,k}`` when column c acts before k on the path to body i (k does not move
  column c's body; on SO(3)×R³ also c a world-translation column and k a rotation column, as ``Rᵀe_c`` turns),
  zero otherwise;

so ``∂τ_p/∂v = Σ J_iᵀ (∂W_i/∂V) J_i`` and ``∂τ_p/∂δ = Σ (∂J_i/∂δ)ᵀ W_i + J_iᵀ [∂W_i/∂V (∂J_i/∂δ) v +
(∂W_i/∂u û_i + ∂W_i/∂u̇ û̇_i) J_i^ω]``. Load models (Fossen 2021 ch. 6–10; Kirchhoff with the current as the
relative velocity ``V_r = V − [u; 0]``): damping ``−Ad⁻ᵀ(D_L x + D_Q|x|x)``, ``x = Ad⁻¹ V_r``, with
``∂(|x|x)/∂x = 2|x|`` (continuous, 0 at x = 0: τ_p is C¹, so there is no convention to choose); the current's
added-mass loads ``M_A[:, :3](u × ω) − ad~_{M_A V_r} V_r + ad~_{M_A V} V + D u̇``. Joints: ``−k``, ``−d`` and
``−(f/v_f) sech²(θ̇/v_f)`` on the diagonal. Mimic joints: ``Gᵀ ∂τ_p,full G`` (chain rule through ``v_full = G v``).
Buoyancy is not a passive force here: it joins g(q) (:func:`mbs_ros.dynamics.algorithms.multibody.rnea`). The derivation
step by step: ``docs/passive_derivatives.md``. Compiled models run the numba kernel of
:mod:`~mbs_ros.dynamics.kernels.passive_derivatives` (same equations); numpy models this reference.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.passive_derivatives import passive_derivatives_core

__all__ = ["passive_derivatives"]


def _hat(x):
    """(n, 3, 3) skew matrices of (n, 3) vectors."""
    out = np.zeros(x.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2], out[..., 1, 2] = -x[..., 2], x[..., 1], -x[..., 0]
    out[..., 1, 0], out[..., 2, 0], out[..., 2, 1] = x[..., 2], -x[..., 1], x[..., 0]
    return out


def _ad(X):
    """ad_X = [[ω̂, v̂], [0, ω̂]] of twists X = [v; ω] (..., 6) -> (..., 6, 6)."""
    out = np.zeros(X.shape[:-1] + (6, 6))
    w = _hat(X[..., 3:])
    out[..., :3, :3] = w
    out[..., 3:, 3:] = w
    out[..., :3, 3:] = _hat(X[..., :3])
    return out


def _ad_tilde(h):
    """ad~_h = [[0, −ĥ_l], [−ĥ_l, −ĥ_a]] (seed 004 eq. 73), ``ad~_h X = −ad_Xᵀ h``, of (..., 6) -> (..., 6, 6)."""
    out = np.zeros(h.shape[:-1] + (6, 6))
    hl = _hat(h[..., :3])
    out[..., :3, 3:] = -hl
    out[..., 3:, :3] = -hl
    out[..., 3:, 3:] = -_hat(h[..., 3:])
    return out


def _check(model, q, v):
    """q, v as contiguous float arrays (what the kernel is compiled for); ValueError naming the bad one. A sum is
    finite exactly when every entry is (short of overflow near 1e308), and costs less than ``isfinite().all()``."""
    q = np.ascontiguousarray(q, dtype=float)
    v = np.ascontiguousarray(v, dtype=float)
    nq, nv = model.nq, model.nv
    if q.shape != (nq,) or not math.isfinite(q.sum()):
        raise ValueError(f"q must be a finite vector of {nq} numbers (the model's nq), got shape {q.shape}")
    if v.shape != (nv,) or not math.isfinite(v.sum()):
        raise ValueError(f"v must be a finite vector of {nv} numbers (the model's nv), got shape {v.shape}")
    return q, v


def passive_derivatives(model, q, v, springs: bool = True):
    """``(∂τ_p/∂q, ∂τ_p/∂v)``, each (nv, nv), of ``model.passive_forces(q, v, springs)``, ∂/∂q along
    ``q ⊕ δ = model.integrate(q, δ)``; analytical (module docstring); zeros without passive elements."""
    q, v = _check(model, q, v)
    nv = model.nv
    if not model.passive_active:
        return np.zeros((nv, nv)), np.zeros((nv, nv))
    mm = model.mimic_reduction
    if mm is not None:
        dq, dv = _full_derivatives(mm.full, mm.q_full(q), mm.v_full(v), springs)
        return mm.Gt @ dq @ mm.G, mm.Gt @ dv @ mm.G
    return _full_derivatives(model, q, v, springs)


def _full_derivatives(model, q, v, springs):
    """The compiled kernel on a compiled model (:mod:`~mbs_ros.dynamics.kernels.passive_derivatives`), else the
    numpy reference."""
    compiled = model.compiled_kernels
    if compiled is not None:
        nv = compiled.nv
        dq, dv = np.empty((nv, nv)), np.empty((nv, nv))
        passive_derivatives_core(compiled.im, compiled.fm, q, v, bool(springs), dq, dv)
        return dq, dv
    return _tree_derivatives(model, q, v, springs)


def _tree_derivatives(model, q, v, springs):
    P, tree = model.passive, model.tree
    nv, nvb = tree.nv, tree.nvb
    dq, dv = np.zeros((nv, nv)), np.zeros((nv, nv))
    if P.has_fluid and (P.elem_body.size or P.has_current):
        _fluid_derivatives(model, q, v, dq, dv)
    if tree.nj:
        j = np.arange(nvb, nv)
        if springs:
            dq[j, j] -= P.stiffness
        vf = np.where(P.friction_velocity > 0, P.friction_velocity, 1.0)
        th = np.tanh(v[nvb:] / vf)
        dv[j, j] -= P.damping + P.friction / vf * (1.0 - th * th)
    return dq, dv


def _body_jacobians(model, kin):
    """(nb, 6, nv) body Jacobians in each body's own frame: ``Ad_{T_i}⁻¹`` of the base-frame columns that move
    body i."""
    tree = model.tree
    T = kin.T
    Rt = T[:, :3, :3].transpose(0, 2, 1)
    S = kin.S.T[None, :, :] * tree.support[:, None, :]  # (nb, 6, nv) base frame
    lin = S[:, :3] - np.cross(T[:, :3, 3][:, :, None], S[:, 3:], axis=1)
    return np.concatenate([Rt @ lin, Rt @ S[:, 3:]], axis=1)


def _before(tree):
    """(nv, nv) 0/1: ``N[c, k] = 1`` when k does not move column c's body (so ∂J_{i,c}/∂δ_k = ad_{J_{i,c}} J_{i,k}
    on the bodies both move); SO(3)×R³ also has the world-translation columns turned by the rotation columns."""
    N = 1.0 - tree.support[tree.col_body]
    if tree.nvb and tree.base_cols is None:
        N[:3, 3:6] = 1.0
    return N


def _fluid_derivatives(model, q, v, dq, dv):
    """Add the water loads' derivatives (damping elements, the current) to dq, dv in place."""
    from mbs_ros.dynamics.algorithms import multibody as alg
    from mbs_ros.dynamics.model.passive import ad_inv_T

    P, tree = model.passive, model.tree
    kin = alg.kinematics(model, q, inertia=False)
    J = _body_jacobians(model, kin)
    V = J @ v
    nb = V.shape[0]
    R_world = kin.T_base[:3, :3] @ kin.T[:, :3, :3]
    u = np.einsum("nba,b->na", R_world, P.current)
    ud = np.einsum("nba,b->na", R_world, P.current_rate)
    Vr = V.copy()
    Vr[:, :3] -= u
    W = np.zeros((nb, 6))
    A = np.zeros((nb, 6, 6))  # ∂W/∂V
    Bu = np.zeros((nb, 6, 3))  # ∂W/∂u
    for e in range(P.elem_body.size):
        i = P.elem_body[e]
        Xt = ad_inv_T(P.T_body_elem[e])  # Ad⁻ᵀ: element wrenches to the body frame
        x = Xt.T @ Vr[i]
        DQ = P.D_quad[e]
        W[i] -= Xt @ (P.D_lin[e] @ x + DQ * np.abs(x) * x)
        K = Xt @ (P.D_lin[e] + np.diag(2.0 * DQ * np.abs(x))) @ Xt.T
        A[i] -= K
        Bu[i] += K[:, :3]
    Bud = None
    if P.has_current:
        MA = P.added_mass
        w = V[:, 3:]
        hV, hVr = (MA @ V[..., None])[..., 0], (MA @ Vr[..., None])[..., 0]
        W += ((MA[:, :, :3] @ np.cross(u, w)[..., None])[..., 0] - (_ad_tilde(hVr) @ Vr[..., None])[..., 0]
              + (_ad_tilde(hV) @ V[..., None])[..., 0] + (P.D @ ud[..., None])[..., 0])
        AdVr_T = _ad(Vr).transpose(0, 2, 1)
        dVr = _ad_tilde(hVr) - AdVr_T @ MA  # ∂(ad~_{M_A X} X)/∂X at X = V_r
        dV = _ad_tilde(hV) - _ad(V).transpose(0, 2, 1) @ MA
        A += dV - dVr
        A[:, :, 3:] += MA[:, :, :3] @ _hat(u)
        Bu += dVr[:, :, :3] - MA[:, :, :3] @ _hat(w)
        Bud = P.D
    JT = J.transpose(0, 2, 1)
    dv += (JT @ A @ J).sum(axis=0)
    N = _before(tree)
    # Σ_i (∂J_i/∂δ_k)ᵀ W_i, column c: N[c, k] J_{i,k}ᵀ ad_{J_{i,c}}ᵀ W_i
    Y = np.einsum("icab,ia->icb", _ad(JT), W)  # (nb, nv, 6)
    dq += N * np.einsum("icb,ibk->ck", Y, J)
    # ∂W/∂V (∂J_i/∂δ_k) v = ∂W/∂V ad_{Ṽ_ik} J_{i,k}, Ṽ_ik = Σ_c N[c, k] J_{i,c} v_c
    Vt = np.einsum("iac,ck->ika", J * v[None, None, :], N)
    dJv = (_ad(Vt) @ JT[..., None])[..., 0].transpose(0, 2, 1)  # (nb, 6, nv)
    Cq = A @ dJv + Bu @ _hat(u) @ J[:, 3:]
    if Bud is not None:
        Cq += Bud @ _hat(ud) @ J[:, 3:]
    dq += (JT @ Cq).sum(axis=0)
