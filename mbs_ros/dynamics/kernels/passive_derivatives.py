"""The compiled kernel of :func:`mbs_ros.dynamics.algorithms.passive_derivatives.passive_derivatives`.

The same equations as the numpy reference there (its module docstring; ``docs/passive_derivatives.md``), on the
packed arrays of :class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel` and with its small spatial helpers: body
Jacobians by the forward recursion ``J_i[:, c] = Ad_{λ→i}⁻¹ J_λ[:, c]`` plus the joint's own axis, the loads'
partials per body, then the sums over the column pairs each body's support holds.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.compiled import _f64
from mbs_ros.dynamics.kernels.jit import jit
from mbs_ros.dynamics.kernels.layout import (EL_BODY, EL_DLIN, EL_DQUAD, EL_P, EL_R, FM_HD, FM_HMA, FM_JP, FM_S, F_CURRENT, F_ELEMS,
                            F_JOINTS, IM_BODY, IM_COLS, IM_HDR)
from mbs_ros.dynamics.kernels.spatial import (_ad, _base_columns, _base_pose, _bias_force, _body_vectors, _cross, _force_to_parent,
                             _joint_poses, _to_child, _transform_add)

__all__ = ["compiled_passive_derivatives"]


@jit
def _current_partials(fm, i, V, u, ud, W, A, Bu, ws):
    """The current's added-mass loads on body i added to W (6,), their partials to A = ∂W/∂V (6, 6) and
    Bu = ∂W/∂u (6, 3); ``D u̇`` added to W (its partial ∂W/∂u̇ = D is read where it is used). ``ws``: (7, 6)
    scratch."""
    Vr, h, hr, t6, col, e6, mcol = ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
    for r in range(6):
        Vr[r] = V[r]
    for r in range(3):
        Vr[r] -= u[r]
    for r in range(6):
        a = 0.0
        b = 0.0
        for c in range(6):
            m = fm[i, FM_HMA + 6 * r + c]
            a += m * V[c]
            b += m * Vr[c]
        h[r] = a
        hr[r] = b
    c0, c1, c2 = _cross(V[3], V[4], V[5], u[0], u[1], u[2])  # ω × u
    _bias_force(V, h, t6)
    for r in range(6):
        W[r] += t6[r] - (fm[i, FM_HMA + 6 * r] * c0 + fm[i, FM_HMA + 6 * r + 1] * c1 + fm[i, FM_HMA + 6 * r + 2] * c2)
        W[r] += fm[i, FM_HD + 3 * r] * ud[0] + fm[i, FM_HD + 3 * r + 1] * ud[1] + fm[i, FM_HD + 3 * r + 2] * ud[2]
    _bias_force(Vr, hr, t6)
    for r in range(6):
        W[r] -= t6[r]
    # F(X)[:, j] = ad~_{M X} e_j − ad_Xᵀ M e_j = bias(e_j, M X) + bias(X, M e_j); A += F(V) − F(V_r), Bu += F(V_r)
    for j in range(6):
        for r in range(6):
            e6[r] = 0.0
            mcol[r] = fm[i, FM_HMA + 6 * r + j]
        e6[j] = 1.0
        _bias_force(e6, h, t6)
        _bias_force(V, mcol, col)
        for r in range(6):
            A[r, j] += t6[r] + col[r]
        _bias_force(e6, hr, t6)
        _bias_force(Vr, mcol, col)
        for r in range(6):
            A[r, j] -= t6[r] + col[r]
            if j < 3:
                Bu[r, j] += t6[r] + col[r]
    # ∂/∂ω of M_A[:, :3](u × ω): M_A[:, :3] û; ∂/∂u: −M_A[:, :3] ω̂
    for j in range(3):
        e6[0], e6[1], e6[2] = 0.0, 0.0, 0.0
        e6[j] = 1.0
        a0, a1, a2 = _cross(u[0], u[1], u[2], e6[0], e6[1], e6[2])
        b0, b1, b2 = _cross(V[3], V[4], V[5], e6[0], e6[1], e6[2])
        for r in range(6):
            m0, m1, m2 = fm[i, FM_HMA + 6 * r], fm[i, FM_HMA + 6 * r + 1], fm[i, FM_HMA + 6 * r + 2]
            A[r, 3 + j] += m0 * a0 + m1 * a1 + m2 * a2
            Bu[r, j] -= m0 * b0 + m1 * b1 + m2 * b2


@jit
def passive_derivatives_core(im, fm, q, v, springs, dq, dv):
    """dq = ∂τ_p/∂q along q ⊕ δ, dv = ∂τ_p/∂v (each (nv, nv), overwritten)."""
    nb, nvb, nv = im[IM_HDR, 1], im[IM_HDR, 6], im[IM_HDR, 4]
    flags = im[IM_HDR, 7]
    for a in range(nv):
        for b in range(nv):
            dq[a, b] = 0.0
            dv[a, b] = 0.0
    if flags & (F_CURRENT | F_ELEMS):
        so3xr3 = im[IM_HDR, 0] == 5
        current = (flags & F_CURRENT) != 0
        Rr = np.empty((nb, 3, 3))
        pr = np.empty((nb, 3))
        Rw = np.empty((3, 3))
        pw = np.empty(3)
        Sb = np.zeros((6, 6))
        J = np.zeros((nb, nv, 6))
        sup = np.zeros((nb, nv), dtype=np.bool_)
        colb = np.zeros(nv, dtype=np.int64)
        V = np.zeros((nb, 6))
        G = np.empty((nb, 9))
        _joint_poses(im, fm, q, Rr, pr)
        _base_pose(im[IM_HDR, 0], q, Rw, pw)
        _base_columns(im, Rw, Sb)
        for k in range(nvb):
            sup[0, k] = True
            for r in range(6):
                J[0, k, r] = Sb[k, r]
        for i in range(1, nb):
            lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
            for c in range(nv):
                if sup[lam, c]:
                    sup[i, c] = True
                    _to_child(Rr[i], pr[i], J[lam, c], J[i, c])
            sup[i, iv] = True
            colb[iv] = i
            for r in range(6):
                J[i, iv, r] = fm[i, FM_S + r]
        for i in range(nb):
            for c in range(nv):
                if sup[i, c]:
                    for r in range(6):
                        V[i, r] += J[i, c, r] * v[c]
        _body_vectors(im, fm, Rw, Rr, G)
        # loads W and their partials A = ∂W/∂V, Bu = ∂W/∂u per body (own frame)
        W = np.zeros((nb, 6))
        A = np.zeros((nb, 6, 6))
        Bu = np.zeros((nb, 6, 3))
        tmp = np.empty((9, 6))
        K = np.empty((6, 6))
        Kb = np.empty((6, 6))
        Re = np.empty((3, 3))
        x = np.empty(6)
        w = np.empty(6)
        t6 = np.empty(6)
        for e in range(im[IM_COLS, 7]):
            row = nb + e
            i = int(fm[row, EL_BODY])
            for a in range(3):
                for b in range(3):
                    Re[a, b] = fm[row, EL_R + 3 * a + b]
            pe = fm[row, EL_P:EL_P + 3]
            _to_child(Re, pe, V[i], x)
            for r in range(3):
                x[r] -= Re[0, r] * G[i, 3] + Re[1, r] * G[i, 4] + Re[2, r] * G[i, 5]
            for r in range(6):
                dqr = fm[row, EL_DQUAD + r]
                acc = dqr * abs(x[r]) * x[r]
                for c in range(6):
                    K[r, c] = fm[row, EL_DLIN + 6 * r + c]
                    acc += K[r, c] * x[c]
                K[r, r] += 2.0 * dqr * abs(x[r])
                w[r] = acc
            _force_to_parent(Re, pe, w, t6)
            for r in range(6):
                W[i, r] -= t6[r]
                for c in range(6):
                    Kb[r, c] = 0.0
            _transform_add(Re, pe, K, Kb, tmp)  # Ad⁻ᵀ K Ad⁻¹: the element's slope in the body frame
            for r in range(6):
                for c in range(6):
                    A[i, r, c] -= Kb[r, c]
                for c in range(3):
                    Bu[i, r, c] += Kb[r, c]
        if current:
            ws = np.empty((7, 6))
            for i in range(nb):
                _current_partials(fm, i, V[i], G[i, 3:6], G[i, 6:9], W[i], A[i], Bu[i], ws)
        # the sums over each body's column pairs (module docstring of passive_derivatives)
        AJ = np.empty((nv, 6))
        y = np.empty((nv, 6))
        cq = np.empty(6)
        for i in range(nb):
            for l in range(nv):
                if sup[i, l]:
                    for r in range(6):
                        acc = 0.0
                        for c in range(6):
                            acc += A[i, r, c] * J[i, l, c]
                        AJ[l, r] = acc
            for k in range(nv):
                if not sup[i, k]:
                    continue
                for l in range(nv):
                    if sup[i, l]:
                        acc = 0.0
                        for r in range(6):
                            acc += J[i, k, r] * AJ[l, r]
                        dv[k, l] += acc
            for k in range(nv):
                if not sup[i, k]:
                    continue
                for r in range(6):
                    y[k, r] = 0.0
                for c in range(nv):
                    if not sup[i, c]:
                        continue
                    before = not sup[colb[c], k] or (so3xr3 and c < 3 and 3 <= k < 6)
                    if before:  # ∂J_{i,c}/∂δ_k = ad_{J_{i,c}} J_{i,k}
                        _ad(J[i, c], J[i, k], t6)
                        acc = 0.0
                        for r in range(6):
                            acc += W[i, r] * t6[r]
                            y[k, r] += v[c] * t6[r]
                        dq[c, k] += acc
            for k in range(nv):
                if not sup[i, k]:
                    continue
                a0, a1, a2 = _cross(G[i, 3], G[i, 4], G[i, 5], J[i, k, 3], J[i, k, 4], J[i, k, 5])  # ∂u/∂δ_k
                b0, b1, b2 = 0.0, 0.0, 0.0
                if current:
                    b0, b1, b2 = _cross(G[i, 6], G[i, 7], G[i, 8], J[i, k, 3], J[i, k, 4], J[i, k, 5])
                for r in range(6):
                    acc = Bu[i, r, 0] * a0 + Bu[i, r, 1] * a1 + Bu[i, r, 2] * a2
                    if current:
                        acc += fm[i, FM_HD + 3 * r] * b0 + fm[i, FM_HD + 3 * r + 1] * b1 + fm[i, FM_HD + 3 * r + 2] * b2
                    for c in range(6):
                        acc += A[i, r, c] * y[k, c]
                    cq[r] = acc
                for c in range(nv):
                    if sup[i, c]:
                        acc = 0.0
                        for r in range(6):
                            acc += J[i, c, r] * cq[r]
                        dq[c, k] += acc
    if flags & F_JOINTS:
        for i in range(1, nb):
            iv = im[IM_BODY + i, 3]
            k, d, f, vf = fm[i, FM_JP], fm[i, FM_JP + 2], fm[i, FM_JP + 3], fm[i, FM_JP + 4]
            if springs:
                dq[iv, iv] -= k
            dv[iv, iv] -= d
            if f > 0.0:
                t = math.tanh(v[iv] / vf)
                dv[iv, iv] -= f / vf * (1.0 - t * t)


def compiled_passive_derivatives(compiled, q, v, springs: bool = True):
    """``(∂τ_p/∂q, ∂τ_p/∂v)`` of a :class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel` at (q, v)."""
    nv = compiled.nv
    dq, dv = np.empty((nv, nv)), np.empty((nv, nv))
    passive_derivatives_core(compiled.im, compiled.fm, _f64(q, compiled.nq), _f64(v, nv), bool(springs), dq, dv)
    return dq, dv
