"""The compiled dynamics recursions (Featherstone 2008, ch. 5-7) in body frames: RNEA, CRBA, the articulated-
body algorithm, the structured Coriolis matrix (seed 004 eq. 57) and the passive forces of :mod:`mbs_ros.dynamics.model.passive`; the
equations and layouts of :mod:`mbs_ros.dynamics.algorithms.multibody`, which the tests compare them with. The Python side:
:class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel`.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit
from mbs_ros.dynamics.kernels.layout import (EL_BODY, EL_DLIN, EL_DQUAD, EL_P, EL_R, FM_ARM, FM_HD, FM_HMA, FM_JP, FM_S, F_CURRENT,
                            F_ELEMS, F_FLUID, F_JOINTS, IM_BODY, IM_COLS, IM_HDR)
from mbs_ros.dynamics.kernels.spatial import (_ad, _add_fluid_weight, _alloc, _base_bias, _base_columns, _base_pose, _base_velocity,
                             _bias_force, _body_vectors, _cross, _dot6, _force_to_parent, _gravity_base, _joint_poses,
                             _mv6, _to_child, _transform_add)

#: The forward dynamics stops with :class:`~mbs_ros.dynamics.kernels.compiled.SingularMassMatrix` where a joint's articulated pivot (plus
#: armature) is at most this fraction of its body's articulated inertia (the sum of its diagonal): M is singular
#: there to within rounding (a pose where joints line up, iCub's neck at 0), and no acceleration is defined.
PIVOT_TOLERANCE = 1e-12


class _SingularPivot(ArithmeticError):
    """Raised by the ABA kernel with the body index whose pivot vanished (named by :class:`CompiledModel`)."""


# ------------------------------------------------------------------------------------------ RNEA family
@jit
def _rnea_core(im, fm, I6, q, v, a, fext, flags, tau, F):
    """Recursive Newton–Euler in body frames. flags: 1 = v given, 2 = a given, 4 = fext given (else zero).
    Fills tau (nv,) and F (nb, 6): F[k] the wrench body k's parent transmits to its subtree, in body k's frame
    (gravity included)."""
    nb, nvb = im[IM_HDR, 1], im[IM_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    V, A, t6, h = vec[0], vec[1], vec[2, 0], vec[2, 1]
    use_v, use_a, use_f = (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _gravity_base(fm, Rw, A[0])
    if use_v:
        _base_velocity(im, Sb, v, V[0])
        _base_bias(im, Rw, v, t6)
        for r in range(6):
            A[0, r] += t6[r]
    if use_a:
        for k in range(nvb):
            for r in range(6):
                A[0, r] += Sb[k, r] * a[k]
    for i in range(1, nb):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        s = fm[i, FM_S:FM_S + 6]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        _to_child(Rr[i], pr[i], A[lam], A[i])
        if use_v:
            for r in range(6):
                V[i, r] += s[r] * v[iv]
                t6[r] = s[r] * v[iv]
            _ad(V[i], t6, h)
            for r in range(6):
                A[i, r] += h[r]
        if use_a:
            for r in range(6):
                A[i, r] += s[r] * a[iv]
    for i in range(nb):
        _mv6(I6[i], A[i], F[i])
        if use_v:
            _mv6(I6[i], V[i], h)
            _bias_force(V[i], h, t6)
            for r in range(6):
                F[i, r] += t6[r]
        if use_f:
            for r in range(6):
                F[i, r] -= fext[i, r]
    if im[IM_HDR, 7] & F_FLUID:
        G = np.empty((nb, 9))
        _body_vectors(im, fm, Rw, Rr, G)
        for i in range(nb):
            _add_fluid_weight(fm, i, G, F)
    for i in range(nb - 1, 0, -1):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        tau[iv] = _dot6(fm[i, FM_S:FM_S + 6], F[i])
        if use_a:
            tau[iv] += fm[i, FM_ARM] * a[iv]
        _force_to_parent(Rr[i], pr[i], F[i], t6)
        for r in range(6):
            F[lam, r] += t6[r]
    for k in range(nvb):
        tau[k] = _dot6(Sb[k], F[0])


@jit
def _crba_core(im, fm, I6, q, M):
    """Composite-rigid-body algorithm in body frames: M (nv, nv)."""
    nb, nvb = im[IM_HDR, 1], im[IM_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    Ic = I6.copy()
    F, F2 = vec[0, 0], vec[0, 1]
    M[:, :] = 0.0  # entries of bodies on different branches stay 0
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    for i in range(nb - 1, 0, -1):
        _transform_add(Rr[i], pr[i], Ic[i], Ic[im[IM_BODY + i, 0]], tmp)
    for i in range(nb - 1, 0, -1):
        di = im[IM_BODY + i, 3]
        _mv6(Ic[i], fm[i, FM_S:FM_S + 6], F)
        M[di, di] = _dot6(fm[i, FM_S:FM_S + 6], F) + fm[i, FM_ARM]
        j = i
        while True:
            _force_to_parent(Rr[j], pr[j], F, F2)
            F[:] = F2
            j = im[IM_BODY + j, 0]
            if j == 0:
                break
            dj = im[IM_BODY + j, 3]
            M[dj, di] = _dot6(fm[j, FM_S:FM_S + 6], F)
            M[di, dj] = M[dj, di]
        for k in range(nvb):
            M[k, di] = _dot6(Sb[k], F)
            M[di, k] = M[k, di]
    for l in range(nvb):
        _mv6(Ic[0], Sb[l], F)
        for k in range(l + 1):  # exactly symmetric, as the rest of M
            M[k, l] = _dot6(Sb[k], F)
            M[l, k] = M[k, l]


@jit
def _solve_small(A, b, n):
    """Solve A x = b in place (b ← x) for the leading n×n block, Gaussian elimination with partial pivoting."""
    for c in range(n):
        piv = c
        for r in range(c + 1, n):
            if abs(A[r, c]) > abs(A[piv, c]):
                piv = r
        if piv != c:
            for k in range(n):
                A[c, k], A[piv, k] = A[piv, k], A[c, k]
            b[c], b[piv] = b[piv], b[c]
        for r in range(c + 1, n):
            f = A[r, c] / A[c, c]
            for k in range(c, n):
                A[r, k] -= f * A[c, k]
            b[r] -= f * b[c]
    for c in range(n - 1, -1, -1):
        acc = b[c]
        for k in range(c + 1, n):
            acc -= A[c, k] * b[k]
        b[c] = acc / A[c, c]


@jit
def _aba_alloc(nb):
    """The ABA's workspace (:func:`_alloc`'s, the articulated inertias, pivots, the base block's system)."""
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    return (Rr, pr, Rw, pw, Sb, vec, tmp, np.empty((nb, 6, 6)), np.empty((6, 6)), np.empty(nb), np.empty(nb),
            np.empty(6), np.empty((6, 6)))


@jit
def _aba_core(im, fm, I6, q, v, tau, fext, use_f, qdd):
    """Articulated-body algorithm in body frames (Featherstone 2008, table 7.1), O(n): qdd (nv,)."""
    _aba_work(im, fm, I6, q, v, tau, fext, use_f, qdd, _aba_alloc(im[IM_HDR, 1]))


@jit
def _aba_work(im, fm, I6, q, v, tau, fext, use_f, qdd, ws):
    """:func:`_aba_core` in the workspace ``ws`` of :func:`_aba_alloc` (reused across the stages of a step: every
    entry read is written first in each call)."""
    nb, nvb = im[IM_HDR, 1], im[IM_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp, IA, Ia, Dinv, u, rhs, Mb = ws
    V, c, pA, U, A = vec[0], vec[1], vec[2], vec[3], vec[4]
    t6, h, pa = vec[5, 0], vec[5, 1], vec[5, 2]
    IA[:, :, :] = I6
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _base_velocity(im, Sb, v, V[0])
    for i in range(1, nb):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        s = fm[i, FM_S:FM_S + 6]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        for r in range(6):
            t6[r] = s[r] * v[iv]
            V[i, r] += t6[r]
        _ad(V[i], t6, c[i])
    for i in range(nb):
        _mv6(I6[i], V[i], h)
        _bias_force(V[i], h, pA[i])
        if use_f:
            for r in range(6):
                pA[i, r] -= fext[i, r]
    if im[IM_HDR, 7] & F_FLUID:
        G = np.empty((nb, 9))
        _body_vectors(im, fm, Rw, Rr, G)
        for i in range(nb):
            _add_fluid_weight(fm, i, G, pA)
    for i in range(nb - 1, 0, -1):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        s = fm[i, FM_S:FM_S + 6]
        _mv6(IA[i], s, U[i])
        d = _dot6(s, U[i]) + fm[i, FM_ARM]
        scale = IA[i, 0, 0] + IA[i, 1, 1] + IA[i, 2, 2] + IA[i, 3, 3] + IA[i, 4, 4] + IA[i, 5, 5]
        if d <= PIVOT_TOLERANCE * scale:  # NaN passes on, to the caller's finiteness check
            raise _SingularPivot(i)
        Dinv[i] = 1.0 / d
        u[i] = tau[iv] - _dot6(s, pA[i])
        for r in range(6):
            for k in range(6):
                Ia[r, k] = IA[i, r, k] - U[i, r] * U[i, k] * Dinv[i]
        _mv6(Ia, c[i], pa)
        for r in range(6):
            pa[r] += pA[i, r] + U[i, r] * u[i] * Dinv[i]
        _transform_add(Rr[i], pr[i], Ia, IA[lam], tmp)
        _force_to_parent(Rr[i], pr[i], pa, t6)
        for r in range(6):
            pA[lam, r] += t6[r]
    _gravity_base(fm, Rw, A[0])
    if nvb:
        _base_bias(im, Rw, v, t6)
        for r in range(6):
            A[0, r] += t6[r]  # κ = Ḃ v − [Rᵀ g; 0]
        _mv6(IA[0], A[0], h)
        for r in range(6):
            h[r] += pA[0, r]
        for k in range(nvb):
            rhs[k] = tau[k] - _dot6(Sb[k], h)
            _mv6(IA[0], Sb[k], t6)
            for l in range(nvb):
                Mb[l, k] = _dot6(Sb[l], t6)
        _solve_small(Mb, rhs, nvb)
        for k in range(nvb):
            qdd[k] = rhs[k]
            for r in range(6):
                A[0, r] += Sb[k, r] * rhs[k]
    for i in range(1, nb):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        _to_child(Rr[i], pr[i], A[lam], A[i])
        for r in range(6):
            A[i, r] += c[i, r]
        x = (u[i] - _dot6(U[i], A[i])) * Dinv[i]
        qdd[iv] = x
        s = fm[i, FM_S:FM_S + 6]
        for r in range(6):
            A[i, r] += s[r] * x


@jit
def _coriolis_core(im, fm, I6, q, v, C):
    """The structured Coriolis matrix C = Σ_i J_iᵀ (I_i J̇_i + ad~_{I_i V_i} J_i) (body frames) from composite
    sums Ic_b = Σ_{i ⊒ b} I_i and Nc_b = Σ_{i ⊒ b} N_i, N_i = ad~_{I_i V_i} − I_i ad_{V_i}:
    C[c, d] = S_cᵀ (Ic_b Ṡ_d + Nc_b S_d), b the deeper of the two columns' bodies (the other an ancestor)."""
    nb, nvb = im[IM_HDR, 1], im[IM_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    V, Sd = vec[0], vec[1]  # twists; Ṡ of each body's joint column
    F1, F2, F3, t6, h, e = vec[2, 0], vec[2, 1], vec[2, 2], vec[2, 3], vec[2, 4], vec[2, 5]
    Ic = I6.copy()
    Nc = np.zeros((nb, 6, 6))
    Sbd = np.zeros((6, 6))  # Ṡ of the base columns
    C[:, :] = 0.0  # entries of bodies on different branches stay 0
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _base_velocity(im, Sb, v, V[0])
    for i in range(1, nb):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        s = fm[i, FM_S:FM_S + 6]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        for r in range(6):
            V[i, r] += s[r] * v[iv]
        _ad(V[i], s, Sd[i])
    for k in range(nvb):
        _ad(V[0], Sb[k], Sbd[k])
        if im[IM_HDR, 0] == 5 and k < 3:  # Ḃ e_k = [−ω × Rᵀ e_k; 0]
            c0, c1, c2 = _cross(v[3], v[4], v[5], Sb[k, 0], Sb[k, 1], Sb[k, 2])
            Sbd[k, 0] -= c0
            Sbd[k, 1] -= c1
            Sbd[k, 2] -= c2
    for i in range(nb):
        _mv6(I6[i], V[i], h)
        # N = ad~_h − I ad_V; ad~_h = [[0, −ĥ_l], [−ĥ_l, −ĥ_a]]; column c of ad_V is ad_V e_c
        for col in range(6):
            for r in range(6):
                e[r] = 0.0
            e[col] = 1.0
            _ad(V[i], e, t6)
            _bias_force(e, h, F1)  # ad~_h e_c = −ad_{e_c}ᵀ h
            for r in range(6):
                acc = 0.0
                for k in range(6):
                    acc += I6[i, r, k] * t6[k]
                Nc[i, r, col] = F1[r] - acc
    for i in range(nb - 1, 0, -1):
        lam = im[IM_BODY + i, 0]
        _transform_add(Rr[i], pr[i], Ic[i], Ic[lam], tmp)
        _transform_add(Rr[i], pr[i], Nc[i], Nc[lam], tmp)
    for j in range(1, nb):
        d = im[IM_BODY + j, 3]
        s = fm[j, FM_S:FM_S + 6]
        _mv6(Ic[j], Sd[j], F1)
        _mv6(Nc[j], s, t6)
        for r in range(6):
            F1[r] += t6[r]
        _mv6(Ic[j], s, F2)
        for r in range(6):
            acc = 0.0
            for k in range(6):
                acc += Nc[j, k, r] * s[k]
            F3[r] = acc
        C[d, d] = _dot6(s, F1)
        a = j
        while True:
            _force_to_parent(Rr[a], pr[a], F1, t6)
            F1[:] = t6
            _force_to_parent(Rr[a], pr[a], F2, t6)
            F2[:] = t6
            _force_to_parent(Rr[a], pr[a], F3, t6)
            F3[:] = t6
            a = im[IM_BODY + a, 0]
            if a == 0:
                break
            ca = im[IM_BODY + a, 3]
            sa = fm[a, FM_S:FM_S + 6]
            C[ca, d] = _dot6(sa, F1)
            C[d, ca] = _dot6(F2, Sd[a]) + _dot6(F3, sa)
        for k in range(nvb):
            C[k, d] = _dot6(Sb[k], F1)
            C[d, k] = _dot6(F2, Sbd[k]) + _dot6(F3, Sb[k])
    for l in range(nvb):
        _mv6(Ic[0], Sbd[l], F1)
        _mv6(Nc[0], Sb[l], t6)
        for k in range(nvb):
            C[k, l] = _dot6(Sb[k], F1) + _dot6(Sb[k], t6)


# ------------------------------------------------------------------------------------------ passive forces
@jit
def _passive_core(im, fm, q, v, springs, tau, pw):
    """τ_p (passive.py's module docstring): the current's loads and hydrodynamic damping on each body, projected
    as in RNEA, and the joints' springs (if ``springs``), dampers and friction. pw[0] = the dissipated power."""
    nb, nvb, nv = im[IM_HDR, 1], im[IM_HDR, 6], im[IM_HDR, 4]
    flags = im[IM_HDR, 7]
    for k in range(nv):
        tau[k] = 0.0
    pw[0] = 0.0
    if flags & (F_CURRENT | F_ELEMS):
        Rr, pr, Rw, pwo, Sb, vec, tmp = _alloc(nb)
        V, F = vec[0], vec[1]
        t6, h, hr, Vr, w = vec[2, 0], vec[2, 1], vec[2, 2], vec[2, 3], vec[2, 4]
        G = np.empty((nb, 9))
        Re = np.empty((3, 3))
        _joint_poses(im, fm, q, Rr, pr)
        _base_pose(im[IM_HDR, 0], q, Rw, pwo)
        _base_columns(im, Rw, Sb)
        _base_velocity(im, Sb, v, V[0])
        for i in range(1, nb):
            lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
            _to_child(Rr[i], pr[i], V[lam], V[i])
            for r in range(6):
                V[i, r] += fm[i, FM_S + r] * v[iv]
        _body_vectors(im, fm, Rw, Rr, G)
        for i in range(nb):
            for r in range(6):
                F[i, r] = 0.0
        if flags & F_CURRENT:
            for i in range(nb):
                u0, u1, u2 = G[i, 3], G[i, 4], G[i, 5]
                for r in range(6):
                    Vr[r] = V[i, r]
                Vr[0] -= u0
                Vr[1] -= u1
                Vr[2] -= u2
                for r in range(6):
                    a = 0.0
                    b = 0.0
                    for c in range(6):
                        m = fm[i, FM_HMA + 6 * r + c]
                        a += m * V[i, c]
                        b += m * Vr[c]
                    h[r] = a
                    hr[r] = b
                c0, c1, c2 = _cross(V[i, 3], V[i, 4], V[i, 5], u0, u1, u2)  # ω × u
                _bias_force(V[i], h, t6)
                for r in range(6):
                    F[i, r] += t6[r] - (fm[i, FM_HMA + 6 * r] * c0 + fm[i, FM_HMA + 6 * r + 1] * c1
                                        + fm[i, FM_HMA + 6 * r + 2] * c2)
                    F[i, r] += (fm[i, FM_HD + 3 * r] * G[i, 6] + fm[i, FM_HD + 3 * r + 1] * G[i, 7]
                                + fm[i, FM_HD + 3 * r + 2] * G[i, 8])
                _bias_force(Vr, hr, t6)
                for r in range(6):
                    F[i, r] -= t6[r]
        for e in range(im[IM_COLS, 7]):
            row = nb + e
            i = int(fm[row, EL_BODY])
            for a in range(3):
                for b in range(3):
                    Re[a, b] = fm[row, EL_R + 3 * a + b]
            _to_child(Re, fm[row, EL_P:EL_P + 3], V[i], Vr)
            for r in range(3):
                Vr[r] -= Re[0, r] * G[i, 3] + Re[1, r] * G[i, 4] + Re[2, r] * G[i, 5]
            p = 0.0
            for r in range(6):
                acc = fm[row, EL_DQUAD + r] * abs(Vr[r]) * Vr[r]
                for c in range(6):
                    acc += fm[row, EL_DLIN + 6 * r + c] * Vr[c]
                w[r] = acc
                p += acc * Vr[r]
            pw[0] += p
            _force_to_parent(Re, fm[row, EL_P:EL_P + 3], w, t6)
            for r in range(6):
                F[i, r] -= t6[r]
        for i in range(nb - 1, 0, -1):
            lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
            tau[iv] += _dot6(fm[i, FM_S:FM_S + 6], F[i])
            _force_to_parent(Rr[i], pr[i], F[i], t6)
            for r in range(6):
                F[lam, r] += t6[r]
        for k in range(nvb):
            tau[k] += _dot6(Sb[k], F[0])
    if flags & F_JOINTS:
        for i in range(1, nb):
            jt, iq, iv = im[IM_BODY + i, 1], im[IM_BODY + i, 2], im[IM_BODY + i, 3]
            th = math.atan2(q[iq + 1], q[iq]) if jt == 2 else q[iq]
            rate = v[iv]
            k, rest, d, f, vf = (fm[i, FM_JP], fm[i, FM_JP + 1], fm[i, FM_JP + 2], fm[i, FM_JP + 3], fm[i, FM_JP + 4])
            fr = f * math.tanh(rate / vf) if f > 0.0 else 0.0
            t = -d * rate - fr
            if springs:
                t -= k * (th - rest)
            pw[0] += d * rate * rate + fr * rate
            tau[iv] += t
