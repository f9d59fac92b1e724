"""Compiled (numba) derivatives of the rigid inverse and forward dynamics, in the body frames of :mod:`.compiled`.

``∂τ/∂q, ∂τ/∂v`` of the RNEA and ``∂q̈/∂q, ∂q̈/∂v, M⁻¹`` of the forward dynamics, along ``q ⊕ δ =
model.integrate(q, δ)`` (body-frame base tangent, then the joints; Pinocchio's convention for a free flyer).
Forward-mode tangent sweeps of the RNEA (the directional derivative of each recursion, Carpentier & Mansard 2018,
RSS, §III, restricted to where a direction acts): a joint's increment ``q_j ⊕ δ`` turns body j's frame by
``exp(s_j δ)``, so the quantities body j receives from its parent move by ``−ad_{s_j}`` (twist ``δV_j = −ad_{s_j}
V_j``, acceleration ``δA_j = −ad_{s_j}(A_j − c_j) + ad_{δV_j} s_j q̇_j``, gravity), its subtree follows rigidly
(the velocity recursion linearised), and the wrench it sends to the parent turns back (``X_jᵀ(δF_j − ad_{s_j}ᵀ
F_j)``). Each direction visits its subtree and its ancestors only: O(n·depth) per matrix. The base group's
directions ``ξ = B(q) e_k`` act on body 0 alike; the parts of the base's twist and acceleration fixed in the world
(gravity; SO(3)×R³'s world-frame linear velocity and its columns ``[Rᵀ e_k; 0]``) turn with ``−ad_ξ``.
Forward dynamics: ``∂q̈/∂x = −M⁻¹ ∂τ/∂x`` at ``q̈ = ABA(q, v, τ)`` (Carpentier & Mansard 2018, eq. 7), M by the
CRBA, ``M⁻¹`` by its Cholesky factor. The numpy reference is :mod:`.derivatives`.
"""
from __future__ import annotations

import numpy as np

from .compiled import (SingularMassMatrix, _BODY, _F_FLUID, _HD, _HDR, _S, _SingularPivot, _aba_alloc, _aba_work, _ad,
                       _base_bias, _base_columns, _base_pose, _base_velocity, _bias_force, _cross, _crba_core,
                       _dot6, _f64, _force_to_parent, _gravity_base, _joint_poses, _mv6, _to_child)
from .jit import jit

__all__ = ["DerivativeKernels"]


# ------------------------------------------------------------------------------------------ workspace
def _workspace(nb, nv):
    """The sweeps' arrays, allocated once per compiled model: poses, the RNEA's V, A, c, F (subtree totals) and
    gravity per body, the q- and v-directional derivatives, the subtree mask and scratch rows."""
    return (np.empty((nb, 3, 3)), np.empty((nb, 3)), np.empty((3, 3)), np.empty(3), np.zeros((6, 6)),
            np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 6)),
            np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 6)),
            np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 6)), np.zeros(nb, dtype=np.int64),
            np.empty((8, 6)))


@jit
def _fluid_add(fm, i, Gi, out):
    """out += D_i g: the load of gravity on body i's fluid terms (compiled.py's ``_add_fluid_weight``), g given."""
    for r in range(6):
        out[r] += fm[i, _HD + 3 * r] * Gi[0] + fm[i, _HD + 3 * r + 1] * Gi[1] + fm[i, _HD + 3 * r + 2] * Gi[2]


@jit
def _force_diff(I, V, dV, dA, h, t, out):
    """out = I δA + δ(−ad_Vᵀ I V) = I δA − ad_{δV}ᵀ I V − ad_Vᵀ I δV (``h`` = I V given; ``t``: (2, 6) scratch)."""
    _mv6(I, dA, out)
    _bias_force(dV, h, t[0])
    _mv6(I, dV, t[1])
    for r in range(6):
        out[r] += t[0, r]
    _bias_force(V, t[1], t[0])
    for r in range(6):
        out[r] += t[0, r]


@jit
def _rnea_derivatives_work(im, fm, I6, q, v, a, fext, use_f, dq, dv, ws):
    """dq, dv (nv, nv) ← ∂τ/∂q (along q ⊕ δ), ∂τ/∂v of the RNEA of :func:`.compiled._rnea_core` at (q, v, a)
    with body wrenches ``fext`` (held in their body frames) if ``use_f``; ``ws`` from :func:`_workspace`."""
    nb, nvb, code = im[_HDR, 1], im[_HDR, 6], im[_HDR, 0]
    fluid = (im[_HDR, 7] & _F_FLUID) != 0
    Rr, pr, Rw, pw, Sb, V, A, C, F, G, dV, dA, dG, dF, eV, eA, eF, sub, t = ws
    t6, h, w, f, e = t[0], t[1], t[2], t[3], t[4]
    tt = t[5:7]
    # ---------------------------------------------------------------- the RNEA, keeping what the sweeps need
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(code, q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _gravity_base(fm, Rw, A[0])
    for r in range(6):
        w[r] = A[0, r]  # the world-fixed part of the base acceleration: −[Rᵀ g; 0] (+ [Rᵀ p̈; 0] on SO(3)×R³)
    _base_velocity(im, Sb, v, V[0])
    _base_bias(im, Rw, v, t6)
    for k in range(nvb):
        for r in range(6):
            A[0, r] += Sb[k, r] * a[k]
            if code == 5 and k < 3:
                w[r] += Sb[k, r] * a[k]
    for r in range(6):
        A[0, r] += t6[r]
        C[0, r] = 0.0
    for r in range(3):
        G[0, r] = Rw[0, r] * fm[0, 0] + Rw[1, r] * fm[0, 1] + Rw[2, r] * fm[0, 2]
        G[0, 3 + r] = 0.0
    for i in range(1, nb):
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        s = fm[i, _S:_S + 6]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        _to_child(Rr[i], pr[i], A[lam], A[i])
        _to_child(Rr[i], pr[i], G[lam], G[i])
        for r in range(6):
            V[i, r] += s[r] * v[iv]
            t6[r] = s[r] * v[iv]
        _ad(V[i], t6, C[i])
        for r in range(6):
            A[i, r] += C[i, r] + s[r] * a[iv]
    for i in range(nb):
        _mv6(I6[i], A[i], F[i])
        _mv6(I6[i], V[i], h)
        _bias_force(V[i], h, t6)
        for r in range(6):
            F[i, r] += t6[r]
            if use_f:
                F[i, r] -= fext[i, r]
        if fluid:
            _fluid_add(fm, i, G[i], F[i])
    for i in range(nb - 1, 0, -1):
        _force_to_parent(Rr[i], pr[i], F[i], t6)
        lam = im[_BODY + i, 0]
        for r in range(6):
            F[lam, r] += t6[r]
    dq[:, :] = 0.0
    dv[:, :] = 0.0
    # ---------------------------------------------------------------- one sweep per direction (base, then joints)
    for j in range(0 if nvb else 1, nb):
        ncols = nvb if j == 0 else 1
        for i in range(nb):
            sub[i] = 1 if i == j or (i > j and sub[im[_BODY + i, 0]] == 1 and im[_BODY + i, 0] >= j) else 0
        for kk in range(ncols):
            col = kk if j == 0 else im[_BODY + j, 3]
            # seeds at body j: q-direction into dV, dA, dG; v-direction into eV, eA
            if j == 0:
                xi = Sb[kk]
                for r in range(6):
                    dV[0, r] = 0.0
                    dA[0, r] = 0.0
                    eV[0, r] = xi[r]
                    eA[0, r] = 0.0
                c0, c1, c2 = _cross(xi[3], xi[4], xi[5], w[0], w[1], w[2])
                dA[0, 0], dA[0, 1], dA[0, 2] = -c0, -c1, -c2
                if code == 5:  # the world-frame linear velocity turns; Ḃ v = [−ω × Rᵀ ṗ; 0]
                    c0, c1, c2 = _cross(xi[3], xi[4], xi[5], V[0, 0], V[0, 1], V[0, 2])
                    dV[0, 0], dV[0, 1], dV[0, 2] = -c0, -c1, -c2
                    c0, c1, c2 = _cross(v[3], v[4], v[5], dV[0, 0], dV[0, 1], dV[0, 2])
                    dA[0, 0] -= c0
                    dA[0, 1] -= c1
                    dA[0, 2] -= c2
                    c0, c1, c2 = _cross(xi[3], xi[4], xi[5], V[0, 0], V[0, 1], V[0, 2])
                    d0, d1, d2 = _cross(v[3], v[4], v[5], xi[0], xi[1], xi[2])
                    eA[0, 0], eA[0, 1], eA[0, 2] = -c0 - d0, -c1 - d1, -c2 - d2
                c0, c1, c2 = _cross(xi[3], xi[4], xi[5], G[0, 0], G[0, 1], G[0, 2])
                dG[0, 0], dG[0, 1], dG[0, 2] = -c0, -c1, -c2
                dG[0, 3], dG[0, 4], dG[0, 5] = 0.0, 0.0, 0.0
            else:
                s = fm[j, _S:_S + 6]
                qd = v[col]
                _ad(s, V[j], dV[j])
                for r in range(6):
                    dV[j, r] = -dV[j, r]
                    t6[r] = A[j, r] - C[j, r]
                _ad(s, t6, dA[j])
                for r in range(6):
                    t6[r] = s[r] * qd
                _ad(dV[j], t6, h)
                for r in range(6):
                    dA[j, r] = h[r] - dA[j, r]
                    eV[j, r] = s[r]
                _ad(V[j], s, eA[j])
                c0, c1, c2 = _cross(s[3], s[4], s[5], G[j, 0], G[j, 1], G[j, 2])
                dG[j, 0], dG[j, 1], dG[j, 2] = -c0, -c1, -c2
                dG[j, 3], dG[j, 4], dG[j, 5] = 0.0, 0.0, 0.0
            # the subtree follows
            for i in range(j + 1, nb):
                if sub[i] == 0:
                    continue
                lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
                s = fm[i, _S:_S + 6]
                for r in range(6):
                    t6[r] = s[r] * v[iv]
                _to_child(Rr[i], pr[i], dV[lam], dV[i])
                _to_child(Rr[i], pr[i], dA[lam], dA[i])
                _ad(dV[i], t6, h)
                for r in range(6):
                    dA[i, r] += h[r]
                _to_child(Rr[i], pr[i], eV[lam], eV[i])
                _to_child(Rr[i], pr[i], eA[lam], eA[i])
                _ad(eV[i], t6, h)
                for r in range(6):
                    eA[i, r] += h[r]
                if fluid:
                    _to_child(Rr[i], pr[i], dG[lam], dG[i])
            for i in range(j, nb):
                if sub[i] == 0:
                    continue
                _mv6(I6[i], V[i], f)
                _force_diff(I6[i], V[i], dV[i], dA[i], f, tt, dF[i])
                _force_diff(I6[i], V[i], eV[i], eA[i], f, tt, eF[i])
                if fluid:
                    _fluid_add(fm, i, dG[i], dF[i])
            # subtree totals, bottom up; then the ancestors
            for i in range(nb - 1, j, -1):
                if sub[i] == 0:
                    continue
                lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
                s = fm[i, _S:_S + 6]
                dq[iv, col] += _dot6(s, dF[i])
                dv[iv, col] += _dot6(s, eF[i])
                _force_to_parent(Rr[i], pr[i], dF[i], t6)
                _force_to_parent(Rr[i], pr[i], eF[i], h)
                for r in range(6):
                    dF[lam, r] += t6[r]
                    eF[lam, r] += h[r]
            if j == 0:
                for l in range(nvb):
                    dq[l, col] += _dot6(Sb[l], dF[0])
                    dv[l, col] += _dot6(Sb[l], eF[0])
                    if code == 5 and l < 3:  # the columns [Rᵀ e_l; 0] turn with the base
                        c0, c1, c2 = _cross(Sb[kk, 3], Sb[kk, 4], Sb[kk, 5], Sb[l, 0], Sb[l, 1], Sb[l, 2])
                        dq[l, col] -= c0 * F[0, 0] + c1 * F[0, 1] + c2 * F[0, 2]
                continue
            s = fm[j, _S:_S + 6]
            dq[col, col] += _dot6(s, dF[j])
            dv[col, col] += _dot6(s, eF[j])
            _bias_force(s, F[j], t6)  # the transmitted wrench turns back: δF − ad_sᵀ F
            for r in range(6):
                t6[r] += dF[j, r]
                e[r] = eF[j, r]
            k = j
            while True:
                _force_to_parent(Rr[k], pr[k], t6, f)
                _force_to_parent(Rr[k], pr[k], e, h)
                for r in range(6):
                    t6[r] = f[r]
                    e[r] = h[r]
                k = im[_BODY + k, 0]
                if k == 0:
                    break
                ck = im[_BODY + k, 3]
                s = fm[k, _S:_S + 6]
                dq[ck, col] += _dot6(s, t6)
                dv[ck, col] += _dot6(s, e)
            for l in range(nvb):
                dq[l, col] += _dot6(Sb[l], t6)
                dv[l, col] += _dot6(Sb[l], e)


@jit
def _rnea_derivatives_core(im, fm, I6, q, v, a, fext, use_f, dq, dv, M, ws):
    """:func:`_rnea_derivatives_work` and M (the CRBA)."""
    _rnea_derivatives_work(im, fm, I6, q, v, a, fext, use_f, dq, dv, ws)
    _crba_core(im, fm, I6, q, M)


@jit
def _spd_inverse(M, L, out):
    """out = M⁻¹ of a symmetric positive definite M by its Cholesky factor (L: scratch, same shape); returns False
    where a pivot is not positive."""
    n = M.shape[0]
    for c in range(n):
        d = M[c, c]
        for k in range(c):
            d -= L[c, k] * L[c, k]
        if not d > 0.0:
            return False
        d = np.sqrt(d)
        L[c, c] = d
        for r in range(c + 1, n):
            x = M[r, c]
            for k in range(c):
                x -= L[r, k] * L[c, k]
            L[r, c] = x / d
    for c in range(n):  # L⁻¹ in place of L's lower triangle
        L[c, c] = 1.0 / L[c, c]
        for r in range(c + 1, n):
            x = 0.0
            for k in range(c, r):
                x -= L[r, k] * L[k, c]
            L[r, c] = x / L[r, r]
    for r in range(n):  # M⁻¹ = L⁻ᵀ L⁻¹
        for c in range(r + 1):
            x = 0.0
            for k in range(r, n):
                x += L[k, r] * L[k, c]
            out[r, c] = x
            out[c, r] = x
    return True


@jit
def _neg_product(A, B, out):
    """out = −A B (square, same size)."""
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
def _aba_derivatives_core(im, fm, I6, q, v, tau, fext, use_f, qdd, da_dq, da_dv, Minv, M, dq, dv, L, ws, aws):
    """q̈ = ABA(q, v, τ), then ∂q̈/∂q = −M⁻¹ ∂τ/∂q and ∂q̈/∂v = −M⁻¹ ∂τ/∂v at q̈, and M⁻¹; False where M is
    not positive definite."""
    _aba_work(im, fm, I6, q, v, tau, fext, use_f, qdd, aws)
    _rnea_derivatives_work(im, fm, I6, q, v, qdd, fext, use_f, dq, dv, ws)
    _crba_core(im, fm, I6, q, M)
    if not _spd_inverse(M, L, Minv):
        return False
    _neg_product(Minv, dq, da_dq)
    _neg_product(Minv, dv, da_dv)
    return True


# ------------------------------------------------------------------------------------------ Python side
_NO_FEXT = np.zeros((1, 6))


class DerivativeKernels:
    """The derivative kernels of one :class:`~.compiled.CompiledModel`, with their workspace (allocated once;
    one instance per model, not shared between threads that call it at the same time)."""

    def __init__(self, compiled):
        self.compiled = compiled
        nb, nv = compiled.nb, compiled.nv
        self._ws = _workspace(nb, nv)
        self._aws = _aba_alloc(nb)
        self._L = np.zeros((nv, nv))
        self._M = np.empty((nv, nv))
        self._dq = np.empty((nv, nv))
        self._dv = np.empty((nv, nv))

    def _fext(self, f_ext):
        if f_ext is None:
            return _NO_FEXT, False
        f = np.array(f_ext, dtype=np.float64)
        nb = self.compiled.nb
        if f.size != 6 * nb:
            raise ValueError(f"f_ext must hold one wrench per body, ({nb}, 6); got shape {f.shape}")
        return f.reshape(nb, 6), True

    @staticmethod
    def _vec(name, x, n):
        x = _f64(x)
        if x.shape != (n,):
            raise ValueError(f"{name} must be a vector of {n} numbers, got shape {x.shape}")
        return x

    def rnea_derivatives(self, q, v, a, f_ext=None):
        """``(∂τ/∂q, ∂τ/∂v, M)`` of the rigid RNEA at (q, v, a) (``f_ext`` (nb, 6) body wrenches, body frames)."""
        c = self.compiled
        nv = c.nv
        dq, dv, M = np.empty((nv, nv)), np.empty((nv, nv)), np.empty((nv, nv))
        fext, use_f = self._fext(f_ext)
        _rnea_derivatives_core(c.im, c.fm, c.I6, self._vec("q", q, c.nq), self._vec("v", v, nv),
                               self._vec("a", a, nv), fext, use_f, dq, dv, M, self._ws)
        return dq, dv, M

    def aba_derivatives(self, q, v, tau, f_ext=None):
        """``(∂q̈/∂q, ∂q̈/∂v, M⁻¹)`` of the rigid forward dynamics at (q, v, τ)."""
        c = self.compiled
        nv = c.nv
        da_dq, da_dv, Minv, qdd = np.empty((nv, nv)), np.empty((nv, nv)), np.empty((nv, nv)), np.empty(nv)
        fext, use_f = self._fext(f_ext)
        try:
            ok = _aba_derivatives_core(c.im, c.fm, c.I6, self._vec("q", q, c.nq), self._vec("v", v, nv),
                                       self._vec("tau", tau, nv), fext, use_f,
                                       qdd, da_dq, da_dv, Minv, self._M, self._dq, self._dv, self._L, self._ws,
                                       self._aws)
        except _SingularPivot as exc:
            raise SingularMassMatrix(f"the joint-space mass matrix is singular at this configuration (joint "
                                     f"{c.joint_names[int(exc.args[0]) - 1]!r}): no forward dynamics, no "
                                     "derivatives") from None
        if not ok:
            raise SingularMassMatrix("the joint-space mass matrix is not positive definite at this configuration: "
                                     "no forward dynamics, no derivatives")
        return da_dq, da_dv, Minv
