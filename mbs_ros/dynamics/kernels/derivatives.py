"""Compiled (numba) derivatives of the rigid inverse and forward dynamics, in the body frames of :mod:`mbs_ros.dynamics.kernels.compiled`.

``∂τ/∂q, ∂τ/∂v`` of the RNEA and ``∂q̈/∂q, ∂q̈/∂v, M⁻¹`` of the forward dynamics, along ``q ⊕ δ =
model.integrate(q, δ)`` (body-frame base tangent, then the joints; Pinocchio's convention for a free flyer).
Forward-mode tangent sweeps of the RNEA (the directional derivative of each recursion, Carpentier & Mansard 2018,
RSS, restricted to where a direction acts): a joint's increment ``q_j ⊕ δ`` turns body j's frame by
``exp(s_j δ)``, so the quantities body j receives from its parent move by ``−ad_{s_j}`` (twist ``δV_j = −ad_{s_j}
V_j``, acceleration ``δA_j = −ad_{s_j}(A_j − c_j) + ad_{δV_j} s_j q̇_j``, gravity), its subtree follows rigidly
(the velocity recursion linearised), and the wrench it sends to the parent turns back (``X_jᵀ(δF_j − ad_{s_j}ᵀ
F_j)``). Each direction visits its subtree and its ancestors only: O(n·depth) per matrix, and in the base
frame each entry is a few dot products with rows built once per body from composite inertias
(:func:`_rnea_derivatives_work`). The base group's
directions ``ξ = B(q) e_k`` act on body 0 alike; the parts of the base's twist and acceleration fixed in the world
(gravity; SO(3)×R³'s world-frame linear velocity and its columns ``[Rᵀ e_k; 0]``) turn with ``−ad_ξ``.
Forward dynamics: ``∂q̈/∂x = −M⁻¹ ∂τ/∂x`` at ``q̈ = ABA(q, v, τ)`` (Carpentier & Mansard 2018), M from the same
composite inertias (the CRBA's), ``M⁻¹`` by its Cholesky factor. The numpy reference is :mod:`mbs_ros.dynamics.algorithms.derivatives`.
"""
from __future__ import annotations

import time

import numpy as np

from mbs_ros.dynamics.kernels.compiled import SingularMassMatrix, warm_up_model
from mbs_ros.dynamics.kernels.jit import AVAILABLE, jit
from mbs_ros.dynamics.kernels.multibody import _SingularPivot, _aba_work
from mbs_ros.dynamics.kernels.layout import FM_ARM, FM_HD, FM_S, F_FLUID, IM_BODY, IM_HDR
from mbs_ros.dynamics.kernels.spatial import (_ad, _base_bias, _base_columns, _base_pose, _base_velocity, _bias_force, _cross, _dot6,
                             _force_to_parent, _gravity_base, _joint_poses, _mv6, _transform_add)

__all__ = ["DerivativeKernels", "all_finite", "warm_up"]


# ------------------------------------------------------------------------------------------ workspace
def _buffer_size(nb, nv):
    """Floats in the workspace of :func:`_views` (the derivative sweeps', the dense matrices', the ABA's)."""
    return nb * (9 + 3 + 13 * 6 + 9 + 3 + 3 * 36) + 9 + 3 + 36 + 16 * 6 + 2 * 36 + 54 + 4 * nv * nv + nv \
        + nb * (9 + 3 + 8 * 6 + 36 + 2) + 9 + 3 + 36 + 54 + 36 + 6 + 36


@jit
def _take(buf, o, n):
    return buf[o:o + n], o + n


@jit
def _sweep_views(buf, sub, nb):
    """The derivative sweeps' workspace (:func:`_rnea_derivatives_work`'s ``ws``) as views of the head of the flat
    buffer, and the offset after it (the RNEA derivatives need only these: each view costs a few ns)."""
    o = 0
    x, o = _take(buf, o, nb * 9)
    Rr = x.reshape((nb, 3, 3))
    x, o = _take(buf, o, nb * 3)
    pr = x.reshape((nb, 3))
    x, o = _take(buf, o, 9)
    Rw = x.reshape((3, 3))
    pw, o = _take(buf, o, 3)
    x, o = _take(buf, o, 36)
    Sb = x.reshape((6, 6))
    x, o = _take(buf, o, 13 * nb * 6)
    vec = x.reshape((13, nb, 6))
    x, o = _take(buf, o, nb * 9)
    R0 = x.reshape((nb, 3, 3))
    x, o = _take(buf, o, nb * 3)
    p0 = x.reshape((nb, 3))
    x, o = _take(buf, o, 3 * nb * 36)
    mats = x.reshape((3, nb, 6, 6))
    x, o = _take(buf, o, 16 * 6)
    t = x.reshape((16, 6))
    x, o = _take(buf, o, 72)
    m6 = x.reshape((2, 6, 6))
    x, o = _take(buf, o, 54)
    tmp = x.reshape((9, 6))
    return (Rr, pr, Rw, pw, Sb, vec, R0, p0, mats, sub, t, m6, tmp), o


@jit
def _views(buf, sub, nb, nv):
    """The workspace as views of one flat buffer (one array crosses the Python-numba boundary, not twenty):
    (the sweeps' tuple, M, ∂τ/∂q, ∂τ/∂v, the inverse's scratch L, q̈, the offset of :func:`_aba_views`)."""
    ws, o = _sweep_views(buf, sub, nb)
    x, o = _take(buf, o, nv * nv)
    M = x.reshape((nv, nv))
    x, o = _take(buf, o, nv * nv)
    dq = x.reshape((nv, nv))
    x, o = _take(buf, o, nv * nv)
    dv = x.reshape((nv, nv))
    x, o = _take(buf, o, nv * nv)
    L = x.reshape((nv, nv))
    qdd, o = _take(buf, o, nv)
    return ws, M, dq, dv, L, qdd, o


@jit
def _aba_views(buf, o, nb):
    """The articulated-body pass's workspace (:func:`mbs_ros.dynamics.kernels.multibody._aba_alloc`'s layout) from offset o of the buffer."""
    x, o = _take(buf, o, nb * 9)
    aRr = x.reshape((nb, 3, 3))
    x, o = _take(buf, o, nb * 3)
    apr = x.reshape((nb, 3))
    x, o = _take(buf, o, 9)
    aRw = x.reshape((3, 3))
    apw, o = _take(buf, o, 3)
    x, o = _take(buf, o, 36)
    aSb = x.reshape((6, 6))
    x, o = _take(buf, o, 8 * nb * 6)
    avec = x.reshape((8, nb, 6))
    x, o = _take(buf, o, 54)
    atmp = x.reshape((9, 6))
    x, o = _take(buf, o, nb * 36)
    IA = x.reshape((nb, 6, 6))
    x, o = _take(buf, o, 36)
    Ia = x.reshape((6, 6))
    Dinv, o = _take(buf, o, nb)
    u, o = _take(buf, o, nb)
    rhs, o = _take(buf, o, 6)
    x, o = _take(buf, o, 36)
    Mb = x.reshape((6, 6))
    return (aRr, apr, aRw, apw, aSb, avec, atmp, IA, Ia, Dinv, u, rhs, Mb)


@jit
def _motion_to_parent(R, p, m, out):
    """out = Ad_{(R,p)} m: a motion vector from the child's frame into the parent's."""
    w0 = R[0, 0] * m[3] + R[0, 1] * m[4] + R[0, 2] * m[5]
    w1 = R[1, 0] * m[3] + R[1, 1] * m[4] + R[1, 2] * m[5]
    w2 = R[2, 0] * m[3] + R[2, 1] * m[4] + R[2, 2] * m[5]
    c0, c1, c2 = _cross(p[0], p[1], p[2], w0, w1, w2)
    for r in range(3):
        out[r] = R[r, 0] * m[0] + R[r, 1] * m[1] + R[r, 2] * m[2]
    out[0] += c0
    out[1] += c1
    out[2] += c2
    out[3], out[4], out[5] = w0, w1, w2


@jit
def _mtv6(M, x, out):
    """out = Mᵀ x."""
    for c in range(6):
        acc = 0.0
        for r in range(6):
            acc += M[r, c] * x[r]
        out[c] = acc


@jit
def _transform_add_sym(R, p, M, out, tmp):
    """out += Xᵀ M X as :func:`mbs_ros.dynamics.kernels.spatial._transform_add`, for a symmetric M (a spatial inertia, with or without
    added mass): with M = [[A, B], [Bᵀ, D]] only A, B and D turn (A and D as symmetric: 144 products, not 216)
    and the result is [[A', Z], [Zᵀ, D' + p̂ Z − B'ᵀ p̂]] with Z = B' − A' p̂. ``tmp``: (9, 6) scratch."""
    for b in range(3):  # tmp rows 0..2: (A, B, D)[b] Rᵀ into cols 2b.., then R · that
        r0 = 0 if b < 2 else 3
        c0 = 0 if b == 0 else 3
        for i in range(3):
            for j in range(3):
                tmp[6 + i, j] = M[r0 + i, c0] * R[j, 0] + M[r0 + i, c0 + 1] * R[j, 1] + M[r0 + i, c0 + 2] * R[j, 2]
        for i in range(3):
            for j in range(i if b != 1 else 0, 3):
                tmp[3 * (b // 2) + i, 3 * (b % 2 if b < 2 else 1) + j] = \
                    R[i, 0] * tmp[6, j] + R[i, 1] * tmp[7, j] + R[i, 2] * tmp[8, j]
    # tmp[0:3, 0:3] upper = A', tmp[0:3, 3:6] = B', tmp[3:6, 3:6] upper = D'
    for i in range(3):
        for j in range(i):
            tmp[i, j] = tmp[j, i]
            tmp[3 + i, 3 + j] = tmp[3 + j, 3 + i]
    px, py, pz = p[0], p[1], p[2]
    for i in range(3):  # Z = B' − A' p̂ (row i of A' p̂ is A'[i, :] × p) into tmp rows 6..8, cols 0..2
        e0, e1, e2 = _cross(tmp[i, 0], tmp[i, 1], tmp[i, 2], px, py, pz)
        tmp[6 + i, 0] = tmp[i, 3] - e0
        tmp[6 + i, 1] = tmp[i, 4] - e1
        tmp[6 + i, 2] = tmp[i, 5] - e2
    for j in range(3):
        z0, z1, z2 = _cross(px, py, pz, tmp[6, j], tmp[7, j], tmp[8, j])  # column j of p̂ Z
        e0, e1, e2 = _cross(tmp[0, 3 + j], tmp[1, 3 + j], tmp[2, 3 + j], px, py, pz)  # row j of B'ᵀ p̂
        for i in range(3):
            out[i, j] += tmp[i, j]
            out[i, 3 + j] += tmp[6 + i, j]
            out[3 + j, i] += tmp[6 + i, j]
        out[3, 3 + j] += tmp[3, 3 + j] + z0
        out[4, 3 + j] += tmp[4, 3 + j] + z1
        out[5, 3 + j] += tmp[5, 3 + j] + z2
        out[3 + j, 3] -= e0
        out[3 + j, 4] -= e1
        out[3 + j, 5] -= e2


@jit
def _rnea_derivatives_work(im, fm, I6, q, v, a, fext, use_f, dq, dv, M, ws, tau, Minv, Z, solve):
    """dq, dv, M (nv, nv) ← ∂τ/∂q (along q ⊕ δ), ∂τ/∂v, ∂τ/∂a of the RNEA of :func:`mbs_ros.dynamics.kernels.multibody._rnea_core` at (q, v, a)
    with body wrenches ``fext`` (held in their body frames) if ``use_f``; ``ws`` from :func:`_sweep_views`.
    With ``solve`` the acceleration is the forward dynamics' instead, found on the way: a ← M⁻¹ (τ − h) from the
    composites' M and bias h = RNEA(q, v, 0), Minv ← M⁻¹ (Z: scratch; M is overwritten by its factor), and the
    accelerations and wrenches then move by ``a`` (``Fc_i += Ic_i ΔA_i + Σ_{k in subtree, k≠i} Ic_k S_k a_k``)
    before the sweeps; False (nothing more) where M is not positive definite.

    In the base frame (frame 0) a direction acting at body j moves every body of its subtree by the same twist
    increment δV, and the accelerations by ``δA_i = α − ad_{V_i} δV`` (α fixed per direction), so with the
    composites ``δF_i = Ic_i δA_i + K_i δV + Dc_i δg`` (Ic: CRBA's; ``K_i = N_i + Σ_c (K_c − Ic_c ad_{S_c q̇_c})``,
    ``N = ad~_{I V} − ad_Vᵀ I``; Dc: the fluid's weight) each entry ``S_i · δF_i`` is three dot products with rows
    precomputed per body; the ancestors read ``S_k · (δF_j − ad_{S_j}ᵀ F_j)``."""
    nb, nvb, code = im[IM_HDR, 1], im[IM_HDR, 6], im[IM_HDR, 0]
    fluid = (im[IM_HDR, 7] & F_FLUID) != 0
    Rr, pr, Rw, pw, Sb, vec, R0, p0, mats, sub, t, m6, tmp = ws
    dA0, Q, G = vec[0], vec[1], vec[4]
    if solve:  # the bias first: everything up to M at a = 0
        a[:] = 0.0
    S0, V0, A0, C0, Fc, r1, r2, r3 = vec[5], vec[6], vec[7], vec[8], vec[9], vec[10], vec[11], vec[12]
    Ic, K, Dc = mats[0], mats[1], mats[2]
    t6, h, w, f, e, al, be, dV, dA, dG, eV, eA = t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], \
        t[10], t[11]
    N = m6[0]
    # ---------------------------------------------------------------- the RNEA in frame 0 (the base body's)
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(code, q, Rw, pw)
    _base_columns(im, Rw, Sb)
    for r in range(3):
        for c in range(3):
            R0[0, r, c] = 1.0 if r == c else 0.0
        p0[0, r] = 0.0
    for i in range(1, nb):
        lam = im[IM_BODY + i, 0]
        for r in range(3):
            for c in range(3):
                R0[i, r, c] = R0[lam, r, 0] * Rr[i, 0, c] + R0[lam, r, 1] * Rr[i, 1, c] + R0[lam, r, 2] * Rr[i, 2, c]
            p0[i, r] = R0[lam, r, 0] * pr[i, 0] + R0[lam, r, 1] * pr[i, 1] + R0[lam, r, 2] * pr[i, 2] + p0[lam, r]
    _gravity_base(fm, Rw, A0[0])
    for r in range(6):
        w[r] = A0[0, r]  # the world-fixed part of the base acceleration: −[Rᵀ g; 0] (+ [Rᵀ p̈; 0] on SO(3)×R³)
    _base_velocity(im, Sb, v, V0[0])
    _base_bias(im, Rw, v, t6)
    for k in range(nvb):
        for r in range(6):
            A0[0, r] += Sb[k, r] * a[k]
            if code == 5 and k < 3:
                w[r] += Sb[k, r] * a[k]
    for r in range(6):
        A0[0, r] += t6[r]
        C0[0, r] = 0.0
    for r in range(3):  # gravity in frame 0, the same for every body there
        G[0, r] = Rw[0, r] * fm[0, 0] + Rw[1, r] * fm[0, 1] + Rw[2, r] * fm[0, 2]
        G[0, 3 + r] = 0.0
    for i in range(1, nb):  # in one frame the recursions add: V_i = V_λ + S_i q̇_i, A_i = A_λ + c_i + S_i q̈_i
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        _motion_to_parent(R0[i], p0[i], fm[i, FM_S:FM_S + 6], S0[i])
        for r in range(6):
            V0[i, r] = V0[lam, r] + S0[i, r] * v[iv]
            t6[r] = S0[i, r] * v[iv]
        _ad(V0[i], t6, C0[i])
        for r in range(6):
            A0[i, r] = A0[lam, r] + C0[i, r] + S0[i, r] * a[iv]
    for i in range(nb):  # each body's inertia, wrench, N (and fluid D) in frame 0
        Ic[i, :, :] = 0.0
        _transform_add_sym(R0[i], p0[i], I6[i], Ic[i], tmp)
        _mv6(Ic[i], V0[i], h)
        _mv6(Ic[i], A0[i], Fc[i])
        _bias_force(V0[i], h, t6)
        for r in range(6):
            Fc[i, r] += t6[r]
        if use_f:
            _force_to_parent(R0[i], p0[i], fext[i], t6)
            for r in range(6):
                Fc[i, r] -= t6[r]
        # N = ad~_h − ad_Vᵀ I with ad~_h = [[0, −ĥ_l], [−ĥ_l, −ĥ_a]] (h = I V)
        for r in range(6):
            for c in range(6):
                K[i, r, c] = 0.0
        K[i, 0, 4], K[i, 0, 5], K[i, 1, 3], K[i, 1, 5], K[i, 2, 3], K[i, 2, 4] = h[2], -h[1], -h[2], h[0], h[1], -h[0]
        for r in range(3):
            for c in range(3):
                K[i, 3 + r, c] = K[i, r, 3 + c]
        K[i, 3, 4], K[i, 3, 5], K[i, 4, 3], K[i, 4, 5], K[i, 5, 3], K[i, 5, 4] = h[5], -h[4], -h[5], h[3], h[4], -h[3]
        for m in range(6):
            _bias_force(V0[i], Ic[i, :, m], t6)
            for r in range(6):
                K[i, r, m] += t6[r]
        if fluid:
            Dc[i, :, :] = 0.0
            for r in range(6):
                for c in range(3):
                    N[r, c] = fm[i, FM_HD + 3 * r + c]
                    N[r, 3 + c] = 0.0
            _transform_add(R0[i], p0[i], N, Dc[i], tmp)
            _mv6(Dc[i], G[0], t6)
            for r in range(6):
                Fc[i, r] += t6[r]
    for i in range(nb - 1, 0, -1):  # composites and subtree wrenches: plain sums in one frame
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        x0, x1, x2 = S0[i, 0] * v[iv], S0[i, 1] * v[iv], S0[i, 2] * v[iv]
        w0, w1, w2 = S0[i, 3] * v[iv], S0[i, 4] * v[iv], S0[i, 5] * v[iv]
        for r in range(6):  # row r of Ic ad_W, W = [x; w]: [ρ_l × w, ρ_l × x + ρ_a × w]
            l0, l1, l2 = Ic[i, r, 0], Ic[i, r, 1], Ic[i, r, 2]
            c0, c1, c2 = _cross(l0, l1, l2, w0, w1, w2)
            d0, d1, d2 = _cross(l0, l1, l2, x0, x1, x2)
            e0, e1, e2 = _cross(Ic[i, r, 3], Ic[i, r, 4], Ic[i, r, 5], w0, w1, w2)
            K[lam, r, 0] += K[i, r, 0] - c0
            K[lam, r, 1] += K[i, r, 1] - c1
            K[lam, r, 2] += K[i, r, 2] - c2
            K[lam, r, 3] += K[i, r, 3] - d0 - e0
            K[lam, r, 4] += K[i, r, 4] - d1 - e1
            K[lam, r, 5] += K[i, r, 5] - d2 - e2
            Fc[lam, r] += Fc[i, r]
            for c in range(6):
                Ic[lam, r, c] += Ic[i, r, c]
                if fluid:
                    Dc[lam, r, c] += Dc[i, r, c]
    for i in range(1, nb):
        _mv6(Ic[i], S0[i], r1[i])
        _mtv6(K[i], S0[i], r2[i])
        _bias_force(V0[i], r1[i], t6)
        for r in range(6):
            r2[i, r] += t6[r]
        if fluid:
            _mtv6(Dc[i], S0[i], r3[i])
    # M = ∂τ/∂a from the same composites (the CRBA in frame 0): M[k, i] = S_k · Ic_i S_i, k ⪯ i
    M[:, :] = 0.0
    for i in range(1, nb):
        ci = im[IM_BODY + i, 3]
        M[ci, ci] = _dot6(S0[i], r1[i]) + fm[i, FM_ARM]
        k = im[IM_BODY + i, 0]
        while k != 0:
            ck = im[IM_BODY + k, 3]
            M[ck, ci] = _dot6(S0[k], r1[i])
            M[ci, ck] = M[ck, ci]
            k = im[IM_BODY + k, 0]
        for l in range(nvb):
            M[l, ci] = _dot6(Sb[l], r1[i])
            M[ci, l] = M[l, ci]
    for l in range(nvb):
        _mv6(Ic[0], Sb[l], t6)
        for k in range(l + 1):
            M[k, l] = _dot6(Sb[k], t6)
            M[l, k] = M[k, l]
    if solve and not _accelerate(im, tau, a, M, Minv, Z, Sb, S0, r1, Ic, A0, Fc, w, dA0, Q, t6):
        return False
    dq[:, :] = 0.0
    dv[:, :] = 0.0
    # ---------------------------------------------------------------- one direction at a time (base, then joints)
    for j in range(0 if nvb else 1, nb):
        ncols = nvb if j == 0 else 1
        for i in range(nb):
            lam = im[IM_BODY + i, 0]
            sub[i] = 1 if i == j or (i > j and lam >= j and sub[lam] == 1) else 0
        for kk in range(ncols):
            col = kk if j == 0 else im[IM_BODY + j, 3]
            if j == 0:  # the base's direction ξ = B(q) e_k on body 0 (frame 0 itself)
                xi = Sb[kk]
                for r in range(6):
                    dV[r] = 0.0
                    dA[r] = 0.0
                    eV[r] = xi[r]
                    eA[r] = 0.0
                c0, c1, c2 = _cross(xi[3], xi[4], xi[5], w[0], w[1], w[2])
                dA[0], dA[1], dA[2] = -c0, -c1, -c2
                if code == 5:  # the world-frame linear velocity turns; Ḃ v = [−ω × Rᵀ ṗ; 0]
                    c0, c1, c2 = _cross(xi[3], xi[4], xi[5], V0[0, 0], V0[0, 1], V0[0, 2])
                    dV[0], dV[1], dV[2] = -c0, -c1, -c2
                    c0, c1, c2 = _cross(v[3], v[4], v[5], dV[0], dV[1], dV[2])
                    dA[0] -= c0
                    dA[1] -= c1
                    dA[2] -= c2
                    c0, c1, c2 = _cross(xi[3], xi[4], xi[5], V0[0, 0], V0[0, 1], V0[0, 2])
                    d0, d1, d2 = _cross(v[3], v[4], v[5], xi[0], xi[1], xi[2])
                    eA[0], eA[1], eA[2] = -c0 - d0, -c1 - d1, -c2 - d2
                c0, c1, c2 = _cross(xi[3], xi[4], xi[5], G[0, 0], G[0, 1], G[0, 2])
            else:  # joint j: body j's frame turns by exp(S δ)
                S = S0[j]
                _ad(S, V0[j], dV)
                for r in range(6):
                    dV[r] = -dV[r]
                    t6[r] = A0[j, r] - C0[j, r]
                _ad(S, t6, dA)
                for r in range(6):
                    t6[r] = S[r] * v[col]
                _ad(dV, t6, h)
                for r in range(6):
                    dA[r] = h[r] - dA[r]
                    eV[r] = S[r]
                _ad(V0[j], S, eA)
                c0, c1, c2 = _cross(S[3], S[4], S[5], G[0, 0], G[0, 1], G[0, 2])
            dG[0], dG[1], dG[2], dG[3], dG[4], dG[5] = -c0, -c1, -c2, 0.0, 0.0, 0.0
            _ad(V0[j], dV, h)
            _ad(V0[j], eV, t6)
            for r in range(6):
                al[r] = dA[r] + h[r]
                be[r] = eA[r] + t6[r]
            for i in range(j if j > 0 else 1, nb):  # the subtree: rows S_i · δF_i
                if sub[i] == 0:
                    continue
                iv = im[IM_BODY + i, 3]
                x = _dot6(r1[i], al) + _dot6(r2[i], dV)
                if fluid:
                    x += r3[i, 0] * dG[0] + r3[i, 1] * dG[1] + r3[i, 2] * dG[2]
                dq[iv, col] = x
                dv[iv, col] = _dot6(r1[i], be) + _dot6(r2[i], eV)
            _mv6(Ic[j], dA, f)  # δF_j
            _mv6(K[j], dV, h)
            _mv6(Ic[j], eA, e)
            _mv6(K[j], eV, t6)
            for r in range(6):
                f[r] += h[r]
                e[r] += t6[r]
            if fluid:
                _mv6(Dc[j], dG, h)
                for r in range(6):
                    f[r] += h[r]
            if j == 0:
                for l in range(nvb):
                    dq[l, col] = _dot6(Sb[l], f)
                    dv[l, col] = _dot6(Sb[l], e)
                    if code == 5 and l < 3:  # the columns [Rᵀ e_l; 0] turn with the base
                        c0, c1, c2 = _cross(Sb[kk, 3], Sb[kk, 4], Sb[kk, 5], Sb[l, 0], Sb[l, 1], Sb[l, 2])
                        dq[l, col] -= c0 * Fc[0, 0] + c1 * Fc[0, 1] + c2 * Fc[0, 2]
                continue
            _bias_force(S0[j], Fc[j], h)  # what j transmits turns with it: δF − ad_Sᵀ F
            for r in range(6):
                f[r] += h[r]
            k = im[IM_BODY + j, 0]
            while k != 0:
                ck = im[IM_BODY + k, 3]
                dq[ck, col] = _dot6(S0[k], f)
                dv[ck, col] = _dot6(S0[k], e)
                k = im[IM_BODY + k, 0]
            for l in range(nvb):
                dq[l, col] = _dot6(Sb[l], f)
                dv[l, col] = _dot6(Sb[l], e)
    return True


@jit
def _accelerate(im, tau, a, M, Minv, Z, Sb, S0, r1, Ic, A0, Fc, w, dA, Q, t6):
    """The forward dynamics inside :func:`_rnea_derivatives_work`, whose composites are at a = 0: a ← M⁻¹ (τ − h)
    with the bias h of those wrenches (joint i's ``S_i · Fc_i``, the base's ``B e_l · Fc_0``), Minv ← M⁻¹ (M
    overwritten, Z scratch); then the accelerations ``A0``, SO(3)×R³'s world-fixed part ``w`` and the subtree
    wrenches ``Fc`` as at that a (``dA``, ``Q``: (nb, 6) scratch). False where M is not positive definite."""
    nb, nvb, code = im[IM_HDR, 1], im[IM_HDR, 6], im[IM_HDR, 0]
    nv = M.shape[0]
    for l in range(nvb):
        a[l] = tau[l] - _dot6(Sb[l], Fc[0])
    for i in range(1, nb):
        iv = im[IM_BODY + i, 3]
        a[iv] = tau[iv] - _dot6(S0[i], Fc[i])
    if not _spd_inverse(M, Z, Minv):
        return False
    rhs = Z[0]  # Z is free again
    for c in range(nv):
        rhs[c] = a[c]
    for r in range(nv):
        x = 0.0
        for c in range(nv):
            x += Minv[r, c] * rhs[c]
        a[r] = x
    for r in range(6):  # ΔA_0 = B a_base, and its world-fixed part on SO(3)×R³
        x = 0.0
        y = 0.0
        for k in range(nvb):
            x += Sb[k, r] * a[k]
            if k < 3:
                y += Sb[k, r] * a[k]
        dA[0, r] = x
        A0[0, r] += x
        if code == 5:
            w[r] += y
    for i in range(1, nb):  # ΔA_i = ΔA_λ + S_i a_i
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        for r in range(6):
            dA[i, r] = dA[lam, r] + S0[i, r] * a[iv]
            A0[i, r] += dA[i, r]
    for i in range(nb):
        for r in range(6):
            Q[i, r] = 0.0
    for i in range(nb - 1, -1, -1):  # Fc_i += Ic_i ΔA_i + Q_i, Q_i = Σ_{k in subtree, k≠i} Ic_k S_k a_k
        _mv6(Ic[i], dA[i], t6)
        for r in range(6):
            Fc[i, r] += t6[r] + Q[i, r]
        if i > 0:
            lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
            for r in range(6):
                Q[lam, r] += Q[i, r] + r1[i, r] * a[iv]
    return True


@jit
def all_finite(q, v, x):
    """Whether every entry of the three vectors is finite: ``y · 0`` is 0 for a finite y and NaN for ±inf and NaN,
    so the sum stays 0 exactly when all are (no overflow, one pass; the argument check of a derivative call)."""
    s = 0.0
    for i in range(q.size):
        s += q[i] * 0.0
    for i in range(v.size):
        s += v[i] * 0.0
    for i in range(x.size):
        s += x[i] * 0.0
    return s == 0.0


@jit
def _rnea_derivatives_core(im, fm, I6, q, v, a, fext, use_f, out, buf, sub):
    """out[0], out[1], out[2] ← ∂τ/∂q, ∂τ/∂v, M (:func:`_rnea_derivatives_work`); returns 0, or 1 (nothing
    written) where an entry of q, v or a is not finite (the argument check, in the same call)."""
    if not all_finite(q, v, a):
        return 1
    ws = _sweep_views(buf, sub, im[IM_HDR, 1])[0]
    _rnea_derivatives_work(im, fm, I6, q, v, a, fext, use_f, out[0], out[1], out[2], ws, a, out[2], out[2], False)
    return 0


@jit
def _spd_inverse(M, Z, out):
    """out = M⁻¹ of a symmetric positive definite M; M is overwritten (its upper triangle by U, M = Uᵀ U) and Z
    (lower) by U⁻ᵀ, so that M⁻¹ = Zᵀ Z. Every inner loop is an axpy along a row (no reduction: numba vectorises
    it). False where a pivot is not positive."""
    n = M.shape[0]
    for c in range(n):
        d = M[c, c]
        if not d > 0.0:
            return False
        d = np.sqrt(d)
        M[c, c] = d
        inv = 1.0 / d
        for j in range(c + 1, n):
            M[c, j] *= inv
        for i in range(c + 1, n):
            x = M[c, i]
            for j in range(i, n):
                M[i, j] -= x * M[c, j]
    for r in range(n):
        for c in range(r + 1):
            Z[r, c] = 0.0
        for k in range(r):
            x = M[k, r]
            for c in range(k + 1):
                Z[r, c] += x * Z[k, c]
        inv = 1.0 / M[r, r]
        for c in range(r):
            Z[r, c] = -Z[r, c] * inv
        Z[r, r] = inv
    for r in range(n):
        for c in range(n):
            out[r, c] = 0.0
    for k in range(n):
        for r in range(k + 1):
            x = Z[k, r]
            for c in range(r, k + 1):
                out[r, c] += x * Z[k, c]
    for r in range(n):
        for c in range(r + 1, n):
            out[c, r] = out[r, c]
    return True


@jit
def _neg_product(A, B, out):
    """out = −A B (square, same size), as row axpys."""
    n = A.shape[0]
    for r in range(n):
        for c in range(n):
            out[r, c] = 0.0
        for k in range(n):
            x = -A[r, k]
            if x != 0.0:
                for c in range(n):
                    out[r, c] += x * B[k, c]


@jit
def _aba_derivatives_core(im, fm, I6, q, v, tau, fext, use_f, out, buf, sub, by_aba):
    """q̈ = FD(q, v, τ), then out[0] ← ∂q̈/∂q = −M⁻¹ ∂τ/∂q, out[1] ← ∂q̈/∂v = −M⁻¹ ∂τ/∂v at q̈, out[2] ← M⁻¹;
    returns 0, 1 where an entry of q, v or τ is not finite (nothing computed), 2 where M is not positive
    definite. q̈ is M⁻¹ (τ − h) found on the way (:func:`_accelerate`), or with ``by_aba`` the articulated-body
    pass's (:func:`mbs_ros.dynamics.kernels.multibody._aba_work`: on deep chains M's conditioning would cost q̈ digits)."""
    if not all_finite(q, v, tau):
        return 1
    nb = im[IM_HDR, 1]
    ws, M, dq, dv, L, qdd, o = _views(buf, sub, nb, im[IM_HDR, 4])
    if by_aba:
        _aba_work(im, fm, I6, q, v, tau, fext, use_f, qdd, _aba_views(buf, o, nb))
        _rnea_derivatives_work(im, fm, I6, q, v, qdd, fext, use_f, dq, dv, M, ws, tau, out[2], L, False)
        if not _spd_inverse(M, L, out[2]):
            return 2
    elif not _rnea_derivatives_work(im, fm, I6, q, v, qdd, fext, use_f, dq, dv, M, ws, tau, out[2], L, True):
        return 2
    _neg_product(out[2], dq, out[0])
    _neg_product(out[2], dv, out[1])
    return 0


# ------------------------------------------------------------------------------------------ Python side
_NO_FEXT = np.zeros((1, 6))
_F8 = np.dtype(np.float64)
_STRIDES = (8,)


#: deeper trees take q̈ of the ABA derivatives from the articulated-body pass: M⁻¹ (τ − h) loses digits with M's
#: conditioning. Worst relative error against Pinocchio's over 5 random states of the benchmark's random chains,
#: M⁻¹ (τ − h) / the pass: depth 12: 1.5e-13 / 9.3e-14, 16: 2.5e-12 / 1.8e-13, 24: 3.7e-11 / 1.2e-12, 100:
#: 1.1e-8 / 1.2e-11 (the chain of 100 is a row of ``python -m mbs_ros.bench --only derivatives``). Real robots are
#: 6–11 deep (TALOS full 11, iCub 10). The pass costs ~0.5 µs a body, a third of a 6-DOF arm's call.
FD_BY_ABA_DEPTH = 16


def tree_depth(im) -> int:
    """The most joints between the base body and a leaf of a compiled tree (its parent column)."""
    nb = int(im[IM_HDR, 1])
    depth = [0] * nb
    for i in range(1, nb):
        depth[i] = depth[int(im[IM_BODY + i, 0])] + 1
    return max(depth)


def _canonical(x, n):
    """Whether x is already a float64 vector of n contiguous entries (native byte order), the type the kernels
    are compiled for: then it is passed as it is. Strides ``(8,)`` say one dimension and contiguous at once."""
    return type(x) is np.ndarray and x.dtype is _F8 and x.strides == _STRIDES and x.size == n


def _canonical_state(q, v, x, nq, nv):
    """:func:`_canonical` of q (nq), v and x (nv) in one expression (~0.4 µs: on a small robot the Python side's
    checks are a tenth of the call; a read-only vector passes, as the kernels only read these)."""
    return (type(q) is np.ndarray and type(v) is np.ndarray and type(x) is np.ndarray and q.dtype is _F8
            and v.dtype is _F8 and x.dtype is _F8 and q.strides == _STRIDES and v.strides == _STRIDES
            and x.strides == _STRIDES and q.size == nq and v.size == nv and x.size == nv)


def _vec(name, x, n):
    """x as :func:`_canonical`'s vector (a copy only when it is not one); ValueError naming ``name``."""
    if _canonical(x, n):
        return x
    x = np.array(x, dtype=np.float64)
    if x.shape != (n,):
        raise ValueError(f"{name} must be a vector of {n} numbers, got shape {x.shape}")
    return x


def _entry(kernel, args):
    """``kernel(*args)``'s compiled entry point for these argument types: a call to it skips numba's per-call
    type dispatch (~1 µs of eleven arguments, a fifth of Pinocchio's whole call on a 6-DOF arm). Only for
    arguments of exactly these types (the caller's are fixed per model: :func:`_canonical` vectors and the
    model's own arrays; a vector in a buffer at an odd byte offset, which only ``np.frombuffer`` makes, is read
    unaligned, as x86-64 and ARM64 allow); the dispatcher itself without numba or where it keeps no such
    entry."""
    # writable copies of read-only vectors: the signature to compile (or load) is the writable one, always
    args = tuple(np.array(x) if isinstance(x, np.ndarray) and not x.flags.writeable else x for x in args)
    kernel(*args)  # compiles, or loads from numba's cache
    try:
        from numba import typeof

        return kernel.overloads[tuple(typeof(x) for x in args)].entry_point
    except (ImportError, AttributeError, KeyError):  # pragma: no cover - plain Python or another numba layout
        return kernel


class DerivativeKernels:
    """The derivative kernels of one :class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel`, with their workspace (allocated once;
    one instance per model, not shared between threads that call it at the same time)."""

    def __init__(self, compiled):
        self.compiled = compiled
        nb, nv = compiled.nb, compiled.nv
        self._nq, self._nv = compiled.nq, nv
        self._buf = np.zeros(_buffer_size(nb, nv))
        self._sub = np.zeros(nb, dtype=np.int64)
        self._rnea = self._aba = None  # the kernels' entry points (:func:`_entry`), resolved at the first call
        #: q̈ of the ABA derivatives by the articulated-body pass (deep trees), not M⁻¹ (τ − h) (the default)
        self.fd_by_aba = tree_depth(compiled.im) > FD_BY_ABA_DEPTH

    def _fext(self, f_ext):
        if f_ext is None:
            return _NO_FEXT, False
        f = np.array(f_ext, dtype=np.float64, order="C")  # C order: the type the entry points are compiled for
        nb = self.compiled.nb
        if f.size != 6 * nb:
            raise ValueError(f"f_ext must hold one wrench per body, ({nb}, 6); got shape {f.shape}")
        return f.reshape(nb, 6), True

    def _call_rnea(self, q, v, a, fext, use_f):
        c = self.compiled
        out = np.empty((3, c.nv, c.nv))
        args = (c.im, c.fm, c.I6, q, v, a, fext, use_f, out, self._buf, self._sub)
        if self._rnea is None:
            self._rnea = _entry(_rnea_derivatives_core, args)
        return out if self._rnea(*args) == 0 else None

    def _call_aba(self, q, v, tau, fext, use_f):
        c = self.compiled
        out = np.empty((3, c.nv, c.nv))
        args = (c.im, c.fm, c.I6, q, v, tau, fext, use_f, out, self._buf, self._sub, self.fd_by_aba)
        try:
            if self._aba is None:
                self._aba = _entry(_aba_derivatives_core, args)
            status = self._aba(*args)
        except _SingularPivot as exc:  # the articulated-body pass names the joint
            raise SingularMassMatrix(f"the joint-space mass matrix is singular at this configuration (joint "
                                     f"{c.joint_names[int(exc.args[0]) - 1]!r}): no forward dynamics, no "
                                     "derivatives") from None
        if status == 2:
            raise SingularMassMatrix("the joint-space mass matrix is not positive definite at this configuration: "
                                     "no forward dynamics, no derivatives")
        return out if status == 0 else None

    def try_rnea_derivatives(self, q, v, a):
        """:meth:`rnea_derivatives` without external wrenches where q, v, a are :func:`_canonical` vectors with
        finite entries, else None (nothing raised: the caller checks them and says what is wrong). The checks
        cost ~0.4 µs here, the whole argument checking of ``Model.rnea_derivatives`` on a compiled model."""
        if _canonical_state(q, v, a, self._nq, self._nv):
            out = self._call_rnea(q, v, a, _NO_FEXT, False)
            if out is not None:
                return out[0], out[1], out[2]
        return None

    def try_aba_derivatives(self, q, v, tau):
        """:meth:`aba_derivatives` as :meth:`try_rnea_derivatives`: None unless q, v, τ are canonical and finite;
        SingularMassMatrix where M is singular."""
        if _canonical_state(q, v, tau, self._nq, self._nv):
            out = self._call_aba(q, v, tau, _NO_FEXT, False)
            if out is not None:
                return out[0], out[1], out[2]
        return None

    def rnea_derivatives(self, q, v, a, f_ext=None):
        """``(∂τ/∂q, ∂τ/∂v, M)`` of the rigid RNEA at (q, v, a) (``f_ext`` (nb, 6) body wrenches, body frames);
        ValueError where an argument is the wrong size or not finite."""
        c = self.compiled
        fext, use_f = self._fext(f_ext)
        out = self._call_rnea(_vec("q", q, c.nq), _vec("v", v, c.nv), _vec("a", a, c.nv), fext, use_f)
        if out is None:
            raise ValueError("q, v and a must be finite")
        return out[0], out[1], out[2]

    def aba_derivatives(self, q, v, tau, f_ext=None):
        """``(∂q̈/∂q, ∂q̈/∂v, M⁻¹)`` of the rigid forward dynamics at (q, v, τ); ValueError where an argument is
        the wrong size or not finite, SingularMassMatrix where M is singular."""
        c = self.compiled
        fext, use_f = self._fext(f_ext)
        out = self._call_aba(_vec("q", q, c.nq), _vec("v", v, c.nv), _vec("tau", tau, c.nv), fext, use_f)
        if out is None:
            raise ValueError("q, v and tau must be finite")
        return out[0], out[1], out[2]


def warm_up() -> float:
    """Compile (or load from numba's on-disk cache) the derivative kernels, the passive forces' included, by calling
    each once on :func:`~mbs_ros.dynamics.kernels.compiled.warm_up_model`'s tree; returns the seconds it took."""
    t0 = time.perf_counter()
    if not AVAILABLE:
        return 0.0
    from mbs_ros.dynamics.kernels.passive_derivatives import compiled_passive_derivatives

    c, q = warm_up_model()
    v = np.zeros(c.nv)
    k = DerivativeKernels(c)
    all_finite(q, v, v)
    for f_ext in (None, np.zeros((c.nb, 6))):
        k.rnea_derivatives(q, v, v, f_ext)
        k.aba_derivatives(q, v, v, f_ext)
    compiled_passive_derivatives(c, q, v)
    return time.perf_counter() - t0
