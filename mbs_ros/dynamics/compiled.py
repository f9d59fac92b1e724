"""The compiled fast path: numba kernels for every base group and joint type, in body frames.

The equations and layouts of :mod:`mbs_ros.dynamics.algorithms` (the tests compare the two on random trees of
every base group) as Featherstone's recursions (Featherstone 2008, ch. 5–7): RNEA, CRBA, the articulated-body
algorithm, the structured Coriolis matrix (seed 004 eq. 57) and the whole Munthe-Kaas step (seed 001 eqs. 35–37)
as one call. Compiled once and cached on disk (:func:`warm_up`); without numba or with ``MBS_BACKEND=numpy`` the
models use the numpy reference. The lie module's series tables are compiled in as constants: numba's cache does
not see a change there, so touch this file after changing them. Details: ``docs/dynamics.md``.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .jit import AVAILABLE, jit
from .lie import DEXP_INV_SERIES, SE3_BETA_SERIES, SIN_COEFF_SERIES, SINC_THRESHOLD

__all__ = ["AVAILABLE", "CompiledModel", "compile_model", "warm_up", "warm_up_model", "SingularMassMatrix",
           "PIVOT_TOLERANCE"]

BASE_CODES = {"fixed": 0, "se3": 1, "schoenflies": 2, "se2": 3, "so3": 4, "so3xr3": 5}
# fm row layout (float64, one row per body, row 0 = the base: gravity in its first three entries)
_R0, _P0, _PA, _PA2, _PAX, _S = 0, 9, 12, 21, 30, 33
# passive elements (passive.py): per body D = M_A[:, :3] + ρ∇[1; ĉ_b] (6×3), the added mass M_A (6×6), the joint's
# [stiffness, rest, damping, friction, friction velocity]; row 0 cols 3..8: the current U and its rate U̇ (world).
# Rows nb + e: damping element e [body, R (9), p (3), D_lin (36), D_quad (6)].
_HD, _HMA, _JP, _FW = 40, 58, 94, 100
_ARM = 99  # fm[k, _ARM]: joint k − 1's armature (rotor inertia on M's diagonal)
#: The forward dynamics stops with :class:`SingularMassMatrix` where a joint's articulated pivot (plus armature)
#: is at most this fraction of its body's articulated inertia (the sum of its diagonal): M is singular there to
#: within rounding (a pose where joints line up, iCub's neck at 0), and no acceleration is defined.
PIVOT_TOLERANCE = 1e-12


class SingularMassMatrix(ArithmeticError):
    """The joint-space mass matrix is singular at the configuration the forward dynamics was asked at."""


class _SingularPivot(ArithmeticError):
    """Raised by the ABA kernel with the body index whose pivot vanished (named by :class:`CompiledModel`)."""
_EB, _ER, _EP, _EDL, _EDQ = 0, 1, 10, 13, 49
# im[_HDR, 7]: passive flags; im[_COLS, 7]: the number of damping elements
_F_FLUID, _F_CURRENT, _F_ELEMS, _F_JOINTS = 1, 2, 4, 8
# im: row 0 header [code, nb, nj, nq, nv, nqb, nvb, 0], row 1 base columns (-1 padded), row 2 + k: body k
# [parent, jtype, iq, iv]
_HDR, _COLS, _BODY = 0, 1, 2


def _series_table(brackets):
    """(tmax (k,), tables (k, n) zero-padded, lengths (k,)) of :mod:`lie._base`'s bracketed Taylor series, so the
    compiled coefficient functions run the same Horner sums as the reference."""
    n = max(len(t) for _, t in brackets)
    tmax = np.array([b for b, _ in brackets])
    tables = np.zeros((len(brackets), n))
    lens = np.array([len(t) for _, t in brackets], dtype=np.int64)
    for i, (_, t) in enumerate(brackets):
        tables[i, : len(t)] = t
    return tmax, tables, lens


_SINC_T = SINC_THRESHOLD
_SC_TMAX, _SC_TAB, _SC_LEN = _series_table(SIN_COEFF_SERIES)
_DI_TMAX, _DI_TAB, _DI_LEN = _series_table(DEXP_INV_SERIES)
_BE_TMAX, _BE_TAB, _BE_LEN = _series_table(SE3_BETA_SERIES)


# ------------------------------------------------------------------------------------------ scalar coefficients
@jit
def _series(tmax, tab, lens, t, t2):
    """Horner sum of the first bracket whose bound exceeds t; returns (found, value)."""
    for i in range(tmax.shape[0]):
        if t < tmax[i]:
            r = 0.0
            for j in range(lens[i]):
                r = r * t2 + tab[i, j]
            return True, r
    return False, 0.0


@jit
def _sinc(x):
    if abs(x) < _SINC_T:
        x2 = x * x
        return 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0)
    return math.sin(x) / x


@jit
def _cos_coeff(theta):
    s = _sinc(0.5 * theta)
    return 0.5 * s * s


@jit
def _sin_coeff(theta):
    ok, r = _series(_SC_TMAX, _SC_TAB, _SC_LEN, abs(theta), theta * theta)
    if ok:
        return r
    return (theta - math.sin(theta)) / (theta * theta * theta)


@jit
def _dexp_inv_coeffs(theta):
    t2 = theta * theta
    ok, a = _series(_DI_TMAX, _DI_TAB, _DI_LEN, abs(theta), t2)
    if ok:
        return a, 1.0 - a * t2
    h = 0.5 * theta
    u = h * math.cos(h) / math.sin(h)
    return (1.0 - u) / t2, u


@jit
def _beta(theta, a, u):
    t2 = theta * theta
    ok, r = _series(_BE_TMAX, _BE_TAB, _BE_LEN, abs(theta), t2)
    if ok:
        return r
    return (0.5 * a * (2.0 + u) - 0.125) / t2


# ------------------------------------------------------------------------------------------ small spatial algebra
@jit
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@jit
def _to_child(R, p, V, out):
    """out = Ad_{(R,p)}⁻¹ V: a motion vector from the parent's frame into the child's."""
    w0, w1, w2 = V[3], V[4], V[5]
    c0, c1, c2 = _cross(p[0], p[1], p[2], w0, w1, w2)
    l0, l1, l2 = V[0] - c0, V[1] - c1, V[2] - c2
    for r in range(3):
        out[r] = R[0, r] * l0 + R[1, r] * l1 + R[2, r] * l2
        out[3 + r] = R[0, r] * w0 + R[1, r] * w1 + R[2, r] * w2


@jit
def _force_to_parent(R, p, f, out):
    """out = Ad_{(R,p)}⁻ᵀ f: a force from the child's frame into the parent's."""
    F0 = R[0, 0] * f[0] + R[0, 1] * f[1] + R[0, 2] * f[2]
    F1 = R[1, 0] * f[0] + R[1, 1] * f[1] + R[1, 2] * f[2]
    F2 = R[2, 0] * f[0] + R[2, 1] * f[1] + R[2, 2] * f[2]
    c0, c1, c2 = _cross(p[0], p[1], p[2], F0, F1, F2)
    out[0], out[1], out[2] = F0, F1, F2
    for r in range(3):
        out[3 + r] = R[r, 0] * f[3] + R[r, 1] * f[4] + R[r, 2] * f[5]
    out[3] += c0
    out[4] += c1
    out[5] += c2


@jit
def _ad(V, X, out):
    """out = ad_V X = [ω×x + v×ξ; ω×ξ] for V = [v; ω], X = [x; ξ]."""
    a0, a1, a2 = _cross(V[3], V[4], V[5], X[0], X[1], X[2])
    b0, b1, b2 = _cross(V[0], V[1], V[2], X[3], X[4], X[5])
    c0, c1, c2 = _cross(V[3], V[4], V[5], X[3], X[4], X[5])
    out[0], out[1], out[2] = a0 + b0, a1 + b1, a2 + b2
    out[3], out[4], out[5] = c0, c1, c2


@jit
def _bias_force(V, h, out):
    """out = −ad_Vᵀ h = [ω×h_l; v×h_l + ω×h_a] (= ad~_h V, seed 004 eq. 73)."""
    a0, a1, a2 = _cross(V[3], V[4], V[5], h[0], h[1], h[2])
    b0, b1, b2 = _cross(V[0], V[1], V[2], h[0], h[1], h[2])
    c0, c1, c2 = _cross(V[3], V[4], V[5], h[3], h[4], h[5])
    out[0], out[1], out[2] = a0, a1, a2
    out[3], out[4], out[5] = b0 + c0, b1 + c1, b2 + c2


@jit
def _mv6(M, x, out):
    for r in range(6):
        acc = 0.0
        for c in range(6):
            acc += M[r, c] * x[c]
        out[r] = acc


@jit
def _dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@jit
def _transform_add(R, p, M, out, tmp):
    """out += Xᵀ M X with X = Ad_{(R,p)}⁻¹ = diag(Rᵀ, Rᵀ)[[1, −p̂], [0, 1]]: a 6×6 map from motion to force (an
    inertia, an articulated inertia, the Coriolis N) moved from the child's frame to the parent's. With the rotated
    blocks [[A, B], [C, D]] = diag(R, R) M diag(Rᵀ, Rᵀ) and Z = B − A p̂ the result is
    [[A, Z], [p̂ A + C, D + p̂ Z − C p̂]]. ``tmp``: (9, 6) scratch."""
    for b in range(4):
        r0 = 3 * (b // 2)
        c0 = 3 * (b % 2)
        for i in range(3):  # rows 6..8, cols 0..2: M_b Rᵀ
            for j in range(3):
                tmp[6 + i, j] = M[r0 + i, c0] * R[j, 0] + M[r0 + i, c0 + 1] * R[j, 1] + M[r0 + i, c0 + 2] * R[j, 2]
        for i in range(3):
            for j in range(3):
                tmp[r0 + i, c0 + j] = R[i, 0] * tmp[6, j] + R[i, 1] * tmp[7, j] + R[i, 2] * tmp[8, j]
    px, py, pz = p[0], p[1], p[2]
    for i in range(3):  # Z = B − A p̂ (row i of A p̂ is A[i, :] × p), kept in rows 6..8, cols 3..5
        e0, e1, e2 = _cross(tmp[i, 0], tmp[i, 1], tmp[i, 2], px, py, pz)
        tmp[6 + i, 3] = tmp[i, 3] - e0
        tmp[6 + i, 4] = tmp[i, 4] - e1
        tmp[6 + i, 5] = tmp[i, 5] - e2
    for j in range(3):
        a0, a1, a2 = _cross(px, py, pz, tmp[0, j], tmp[1, j], tmp[2, j])  # column j of p̂ A
        z0, z1, z2 = _cross(px, py, pz, tmp[6, 3 + j], tmp[7, 3 + j], tmp[8, 3 + j])  # column j of p̂ Z
        for i in range(3):
            out[i, j] += tmp[i, j]
            out[i, 3 + j] += tmp[6 + i, 3 + j]
        out[3, j] += a0 + tmp[3, j]
        out[4, j] += a1 + tmp[4, j]
        out[5, j] += a2 + tmp[5, j]
        out[3, 3 + j] += tmp[3, 3 + j] + z0
        out[4, 3 + j] += tmp[4, 3 + j] + z1
        out[5, 3 + j] += tmp[5, 3 + j] + z2
    for i in range(3):  # − C p̂ (row i is C[i, :] × p)
        e0, e1, e2 = _cross(tmp[3 + i, 0], tmp[3 + i, 1], tmp[3 + i, 2], px, py, pz)
        out[3 + i, 3] -= e0
        out[3 + i, 4] -= e1
        out[3 + i, 5] -= e2


# ------------------------------------------------------------------------------------------ kinematics
@jit
def _quat_to_R(x, y, z, w, R):
    """R of a quaternion (x, y, z, w), normalised on the fly (transforms3d's quat2mat)."""
    n = w * w + x * x + y * y + z * z
    if n < 2.220446049250313e-16:
        for i in range(3):
            for j in range(3):
                R[i, j] = 1.0 if i == j else 0.0
        return
    s = 2.0 / n
    X, Y, Z = x * s, y * s, z * s
    wX, wY, wZ = w * X, w * Y, w * Z
    xX, xY, xZ = x * X, x * Y, x * Z
    yY, yZ, zZ = y * Y, y * Z, z * Z
    R[0, 0], R[0, 1], R[0, 2] = 1.0 - (yY + zZ), xY - wZ, xZ + wY
    R[1, 0], R[1, 1], R[1, 2] = xY + wZ, 1.0 - (xX + zZ), yZ - wX
    R[2, 0], R[2, 1], R[2, 2] = xZ - wY, yZ + wX, 1.0 - (xX + yY)


@jit
def _base_pose(code, q, Rw, pw):
    """World pose (Rw, pw) of the base body from its configuration (the group's ``pose_matrix``)."""
    if code == 1 or code == 5:
        _quat_to_R(q[3], q[4], q[5], q[6], Rw)
        pw[0], pw[1], pw[2] = q[0], q[1], q[2]
    elif code == 4:
        _quat_to_R(q[0], q[1], q[2], q[3], Rw)
        pw[0], pw[1], pw[2] = 0.0, 0.0, 0.0
    else:
        for i in range(3):
            for j in range(3):
                Rw[i, j] = 1.0 if i == j else 0.0
        pw[0], pw[1], pw[2] = 0.0, 0.0, 0.0
        if code == 2 or code == 3:
            c, s = (q[3], q[4]) if code == 2 else (q[2], q[3])
            Rw[0, 0], Rw[0, 1], Rw[1, 0], Rw[1, 1] = c, -s, s, c
            pw[0], pw[1] = q[0], q[1]
            if code == 2:
                pw[2] = q[2]


@jit
def _base_columns(im, Rw, Sb):
    """Rows k < nvb of Sb: the base's velocity columns B(q)[:, k] in the base frame (H for the subgroups of SE(3);
    [Rᵀ e_k; 0] then [0; e_k] for SO(3)×R³)."""
    code, nvb = im[_HDR, 0], im[_HDR, 6]
    for k in range(nvb):
        for r in range(6):
            Sb[k, r] = 0.0
        if code == 5:
            if k < 3:
                Sb[k, 0], Sb[k, 1], Sb[k, 2] = Rw[k, 0], Rw[k, 1], Rw[k, 2]
            else:
                Sb[k, k] = 1.0
        else:
            Sb[k, im[_COLS, k]] = 1.0


@jit
def _joint_poses(im, fm, q, Rr, pr):
    """Rr[k], pr[k]: pose of body k in its parent's frame at q (k ≥ 1): placement × joint motion, as
    ``algorithms._joint_transforms`` (R = R_P + sin θ R_P â + (1 − cos θ) R_P â²)."""
    nb = im[_HDR, 1]
    for k in range(1, nb):
        jt, iq = im[_BODY + k, 1], im[_BODY + k, 2]
        row = fm[k]
        if jt == 1:  # prismatic
            d = q[iq]
            for i in range(3):
                for j in range(3):
                    Rr[k, i, j] = row[_R0 + 3 * i + j]
                pr[k, i] = row[_P0 + i] + d * row[_PAX + i]
        else:
            if jt == 0:
                s, c1 = math.sin(q[iq]), 1.0 - math.cos(q[iq])
            else:  # continuous: (cos, sin)
                s, c1 = q[iq + 1], 1.0 - q[iq]
            for i in range(3):
                for j in range(3):
                    m = 3 * i + j
                    Rr[k, i, j] = row[_R0 + m] + s * row[_PA + m] + c1 * row[_PA2 + m]
                pr[k, i] = row[_P0 + i]


@jit
def _base_velocity(im, Sb, v, V0):
    for r in range(6):
        acc = 0.0
        for k in range(im[_HDR, 6]):
            acc += Sb[k, r] * v[k]
        V0[r] = acc


@jit
def _base_bias(im, Rw, v, out):
    """out = Ḃ v_b (zero but for SO(3)×R³: [−ω × (Rᵀ ṙ); 0])."""
    for r in range(6):
        out[r] = 0.0
    if im[_HDR, 0] == 5:
        l0 = Rw[0, 0] * v[0] + Rw[1, 0] * v[1] + Rw[2, 0] * v[2]
        l1 = Rw[0, 1] * v[0] + Rw[1, 1] * v[1] + Rw[2, 1] * v[2]
        l2 = Rw[0, 2] * v[0] + Rw[1, 2] * v[1] + Rw[2, 2] * v[2]
        c0, c1, c2 = _cross(v[3], v[4], v[5], l0, l1, l2)
        out[0], out[1], out[2] = -c0, -c1, -c2


@jit
def _gravity_base(fm, Rw, out):
    """out = −[Rᵀ g; 0]: gravity as a fictitious acceleration of the base frame."""
    g0, g1, g2 = fm[0, 0], fm[0, 1], fm[0, 2]
    for r in range(3):
        out[r] = -(Rw[0, r] * g0 + Rw[1, r] * g1 + Rw[2, r] * g2)
        out[3 + r] = 0.0


@jit
def _body_vectors(im, fm, Rw, Rr, G):
    """G[i] = [R_world_iᵀ g, R_world_iᵀ U, R_world_iᵀ U̇]: gravity, the current and its rate in each body's axes."""
    nb = im[_HDR, 1]
    for r in range(3):
        for m in range(3):
            G[0, 3 * m + r] = Rw[0, r] * fm[0, 3 * m] + Rw[1, r] * fm[0, 3 * m + 1] + Rw[2, r] * fm[0, 3 * m + 2]
    for i in range(1, nb):
        lam = im[_BODY + i, 0]
        for m in range(3):
            for r in range(3):
                G[i, 3 * m + r] = (Rr[i, 0, r] * G[lam, 3 * m] + Rr[i, 1, r] * G[lam, 3 * m + 1]
                                   + Rr[i, 2, r] * G[lam, 3 * m + 2])


@jit
def _add_fluid_weight(fm, i, G, F):
    """F[i] += D_i g_i: gravity taken off the added mass, buoyancy added (passive.py's module docstring)."""
    for r in range(6):
        F[i, r] += fm[i, _HD + 3 * r] * G[i, 0] + fm[i, _HD + 3 * r + 1] * G[i, 1] + fm[i, _HD + 3 * r + 2] * G[i, 2]


@jit
def _alloc(nb):
    """Per-call workspace: relative poses, base pose and columns, and (nb, 6) rows for twists, accelerations,
    wrenches and the ABA quantities."""
    Rr = np.empty((nb, 3, 3))
    pr = np.empty((nb, 3))
    Rw = np.empty((3, 3))
    pw = np.empty(3)
    Sb = np.zeros((6, 6))
    vec = np.zeros((8, nb, 6))
    tmp = np.empty((9, 6))
    return Rr, pr, Rw, pw, Sb, vec, tmp


# ------------------------------------------------------------------------------------------ RNEA family
@jit
def _rnea_core(im, fm, I6, q, v, a, fext, flags, tau, F):
    """Recursive Newton–Euler in body frames. flags: 1 = v given, 2 = a given, 4 = fext given (else zero).
    Fills tau (nv,) and F (nb, 6): F[k] the wrench body k's parent transmits to its subtree, in body k's frame
    (gravity included)."""
    nb, nvb = im[_HDR, 1], im[_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    V, A, t6, h = vec[0], vec[1], vec[2, 0], vec[2, 1]
    use_v, use_a, use_f = (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[_HDR, 0], q, Rw, pw)
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
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        s = fm[i, _S:_S + 6]
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
    if im[_HDR, 7] & _F_FLUID:
        G = np.empty((nb, 9))
        _body_vectors(im, fm, Rw, Rr, G)
        for i in range(nb):
            _add_fluid_weight(fm, i, G, F)
    for i in range(nb - 1, 0, -1):
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        tau[iv] = _dot6(fm[i, _S:_S + 6], F[i])
        if use_a:
            tau[iv] += fm[i, _ARM] * a[iv]
        _force_to_parent(Rr[i], pr[i], F[i], t6)
        for r in range(6):
            F[lam, r] += t6[r]
    for k in range(nvb):
        tau[k] = _dot6(Sb[k], F[0])


@jit
def _crba_core(im, fm, I6, q, M):
    """Composite-rigid-body algorithm in body frames: M (nv, nv)."""
    nb, nvb = im[_HDR, 1], im[_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    Ic = I6.copy()
    F, F2 = vec[0, 0], vec[0, 1]
    M[:, :] = 0.0  # entries of bodies on different branches stay 0
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    for i in range(nb - 1, 0, -1):
        _transform_add(Rr[i], pr[i], Ic[i], Ic[im[_BODY + i, 0]], tmp)
    for i in range(nb - 1, 0, -1):
        di = im[_BODY + i, 3]
        _mv6(Ic[i], fm[i, _S:_S + 6], F)
        M[di, di] = _dot6(fm[i, _S:_S + 6], F) + fm[i, _ARM]
        j = i
        while True:
            _force_to_parent(Rr[j], pr[j], F, F2)
            F[:] = F2
            j = im[_BODY + j, 0]
            if j == 0:
                break
            dj = im[_BODY + j, 3]
            M[dj, di] = _dot6(fm[j, _S:_S + 6], F)
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
    _aba_work(im, fm, I6, q, v, tau, fext, use_f, qdd, _aba_alloc(im[_HDR, 1]))


@jit
def _aba_work(im, fm, I6, q, v, tau, fext, use_f, qdd, ws):
    """:func:`_aba_core` in the workspace ``ws`` of :func:`_aba_alloc` (reused across the stages of a step: every
    entry read is written first in each call)."""
    nb, nvb = im[_HDR, 1], im[_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp, IA, Ia, Dinv, u, rhs, Mb = ws
    V, c, pA, U, A = vec[0], vec[1], vec[2], vec[3], vec[4]
    t6, h, pa = vec[5, 0], vec[5, 1], vec[5, 2]
    IA[:, :, :] = I6
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _base_velocity(im, Sb, v, V[0])
    for i in range(1, nb):
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        s = fm[i, _S:_S + 6]
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
    if im[_HDR, 7] & _F_FLUID:
        G = np.empty((nb, 9))
        _body_vectors(im, fm, Rw, Rr, G)
        for i in range(nb):
            _add_fluid_weight(fm, i, G, pA)
    for i in range(nb - 1, 0, -1):
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        s = fm[i, _S:_S + 6]
        _mv6(IA[i], s, U[i])
        d = _dot6(s, U[i]) + fm[i, _ARM]
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
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        _to_child(Rr[i], pr[i], A[lam], A[i])
        for r in range(6):
            A[i, r] += c[i, r]
        x = (u[i] - _dot6(U[i], A[i])) * Dinv[i]
        qdd[iv] = x
        s = fm[i, _S:_S + 6]
        for r in range(6):
            A[i, r] += s[r] * x


@jit
def _coriolis_core(im, fm, I6, q, v, C):
    """The structured Coriolis matrix C = Σ_i J_iᵀ (I_i J̇_i + ad~_{I_i V_i} J_i) (body frames) from composite
    sums Ic_b = Σ_{i ⊒ b} I_i and Nc_b = Σ_{i ⊒ b} N_i, N_i = ad~_{I_i V_i} − I_i ad_{V_i}:
    C[c, d] = S_cᵀ (Ic_b Ṡ_d + Nc_b S_d), b the deeper of the two columns' bodies (the other an ancestor)."""
    nb, nvb = im[_HDR, 1], im[_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    V, Sd = vec[0], vec[1]  # twists; Ṡ of each body's joint column
    F1, F2, F3, t6, h, e = vec[2, 0], vec[2, 1], vec[2, 2], vec[2, 3], vec[2, 4], vec[2, 5]
    Ic = I6.copy()
    Nc = np.zeros((nb, 6, 6))
    Sbd = np.zeros((6, 6))  # Ṡ of the base columns
    C[:, :] = 0.0  # entries of bodies on different branches stay 0
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _base_velocity(im, Sb, v, V[0])
    for i in range(1, nb):
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        s = fm[i, _S:_S + 6]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        for r in range(6):
            V[i, r] += s[r] * v[iv]
        _ad(V[i], s, Sd[i])
    for k in range(nvb):
        _ad(V[0], Sb[k], Sbd[k])
        if im[_HDR, 0] == 5 and k < 3:  # Ḃ e_k = [−ω × Rᵀ e_k; 0]
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
        lam = im[_BODY + i, 0]
        _transform_add(Rr[i], pr[i], Ic[i], Ic[lam], tmp)
        _transform_add(Rr[i], pr[i], Nc[i], Nc[lam], tmp)
    for j in range(1, nb):
        d = im[_BODY + j, 3]
        s = fm[j, _S:_S + 6]
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
            a = im[_BODY + a, 0]
            if a == 0:
                break
            ca = im[_BODY + a, 3]
            sa = fm[a, _S:_S + 6]
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
    nb, nvb, nv = im[_HDR, 1], im[_HDR, 6], im[_HDR, 4]
    flags = im[_HDR, 7]
    for k in range(nv):
        tau[k] = 0.0
    pw[0] = 0.0
    if flags & (_F_CURRENT | _F_ELEMS):
        Rr, pr, Rw, pwo, Sb, vec, tmp = _alloc(nb)
        V, F = vec[0], vec[1]
        t6, h, hr, Vr, w = vec[2, 0], vec[2, 1], vec[2, 2], vec[2, 3], vec[2, 4]
        G = np.empty((nb, 9))
        Re = np.empty((3, 3))
        _joint_poses(im, fm, q, Rr, pr)
        _base_pose(im[_HDR, 0], q, Rw, pwo)
        _base_columns(im, Rw, Sb)
        _base_velocity(im, Sb, v, V[0])
        for i in range(1, nb):
            lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
            _to_child(Rr[i], pr[i], V[lam], V[i])
            for r in range(6):
                V[i, r] += fm[i, _S + r] * v[iv]
        _body_vectors(im, fm, Rw, Rr, G)
        for i in range(nb):
            for r in range(6):
                F[i, r] = 0.0
        if flags & _F_CURRENT:
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
                        m = fm[i, _HMA + 6 * r + c]
                        a += m * V[i, c]
                        b += m * Vr[c]
                    h[r] = a
                    hr[r] = b
                c0, c1, c2 = _cross(V[i, 3], V[i, 4], V[i, 5], u0, u1, u2)  # ω × u
                _bias_force(V[i], h, t6)
                for r in range(6):
                    F[i, r] += t6[r] - (fm[i, _HMA + 6 * r] * c0 + fm[i, _HMA + 6 * r + 1] * c1
                                        + fm[i, _HMA + 6 * r + 2] * c2)
                    F[i, r] += (fm[i, _HD + 3 * r] * G[i, 6] + fm[i, _HD + 3 * r + 1] * G[i, 7]
                                + fm[i, _HD + 3 * r + 2] * G[i, 8])
                _bias_force(Vr, hr, t6)
                for r in range(6):
                    F[i, r] -= t6[r]
        for e in range(im[_COLS, 7]):
            row = nb + e
            i = int(fm[row, _EB])
            for a in range(3):
                for b in range(3):
                    Re[a, b] = fm[row, _ER + 3 * a + b]
            _to_child(Re, fm[row, _EP:_EP + 3], V[i], Vr)
            for r in range(3):
                Vr[r] -= Re[0, r] * G[i, 3] + Re[1, r] * G[i, 4] + Re[2, r] * G[i, 5]
            p = 0.0
            for r in range(6):
                acc = fm[row, _EDQ + r] * abs(Vr[r]) * Vr[r]
                for c in range(6):
                    acc += fm[row, _EDL + 6 * r + c] * Vr[c]
                w[r] = acc
                p += acc * Vr[r]
            pw[0] += p
            _force_to_parent(Re, fm[row, _EP:_EP + 3], w, t6)
            for r in range(6):
                F[i, r] -= t6[r]
        for i in range(nb - 1, 0, -1):
            lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
            tau[iv] += _dot6(fm[i, _S:_S + 6], F[i])
            _force_to_parent(Rr[i], pr[i], F[i], t6)
            for r in range(6):
                F[lam, r] += t6[r]
        for k in range(nvb):
            tau[k] += _dot6(Sb[k], F[0])
    if flags & _F_JOINTS:
        for i in range(1, nb):
            jt, iq, iv = im[_BODY + i, 1], im[_BODY + i, 2], im[_BODY + i, 3]
            th = math.atan2(q[iq + 1], q[iq]) if jt == 2 else q[iq]
            rate = v[iv]
            k, rest, d, f, vf = (fm[i, _JP], fm[i, _JP + 1], fm[i, _JP + 2], fm[i, _JP + 3], fm[i, _JP + 4])
            fr = f * math.tanh(rate / vf) if f > 0.0 else 0.0
            t = -d * rate - fr
            if springs:
                t -= k * (th - rest)
            pw[0] += d * rate * rate + fr * rate
            tau[iv] += t


# ------------------------------------------------------------------------------------------ the Lie-group step
@jit
def _quat_mul(ax, ay, az, aw, bx, by, bz, bw):
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


@jit
def _quat_step(q, i, wx, wy, wz, out):
    """out[i:i+4] = normalize(q[i:i+4] ⊗ exp(w)) (``lie._base.quat_exp``/``quat_mul``/``quat_normalize``)."""
    h = 0.5 * math.sqrt(wx * wx + wy * wy + wz * wz)
    k = 0.5 * _sinc(h)
    x, y, z, w = _quat_mul(q[i], q[i + 1], q[i + 2], q[i + 3], k * wx, k * wy, k * wz, math.cos(h))
    n = 1.0 / math.sqrt(x * x + y * y + z * z + w * w)
    out[i], out[i + 1], out[i + 2], out[i + 3] = x * n, y * n, z * n, w * n


@jit
def _planar_step(x1, y1, c1, s1, u, v, r):
    """SE(2) q·exp([u, v, r]) (``lie.se2.planar_exp`` composed, rotation renormalised)."""
    S = _sinc(r)
    rB = r * _cos_coeff(r)
    x2, y2, c2, s2 = S * u - rB * v, rB * u + S * v, math.cos(r), math.sin(r)
    c, s = c1 * c2 - s1 * s2, s1 * c2 + c1 * s2
    n = 1.0 / math.hypot(c, s)
    return x1 + c1 * x2 - s1 * y2, y1 + s1 * x2 + c1 * y2, c * n, s * n


@jit
def _integrate(im, q, xi, out):
    """out = q·exp(xi): the base by its group's exponential map, joints by rotation/translation
    (``Model.integrate``)."""
    code, nb = im[_HDR, 0], im[_HDR, 1]
    if code == 1:  # SE(3): p + R J(w) v, quaternion
        vx, vy, vz, wx, wy, wz = xi[0], xi[1], xi[2], xi[3], xi[4], xi[5]
        theta = math.sqrt(wx * wx + wy * wy + wz * wz)
        B, C = _cos_coeff(theta), _sin_coeff(theta)
        cx, cy, cz = _cross(wx, wy, wz, vx, vy, vz)
        ccx, ccy, ccz = _cross(wx, wy, wz, cx, cy, cz)
        t0, t1, t2 = vx + B * cx + C * ccx, vy + B * cy + C * ccy, vz + B * cz + C * ccz
        x, y, z, w = q[3], q[4], q[5], q[6]
        a0, a1, a2 = 2.0 * (y * t2 - z * t1), 2.0 * (z * t0 - x * t2), 2.0 * (x * t1 - y * t0)
        out[0] = q[0] + t0 + w * a0 + y * a2 - z * a1
        out[1] = q[1] + t1 + w * a1 + z * a0 - x * a2
        out[2] = q[2] + t2 + w * a2 + x * a1 - y * a0
        _quat_step(q, 3, wx, wy, wz, out)
    elif code == 5:  # SO(3)×R³
        out[0], out[1], out[2] = q[0] + xi[0], q[1] + xi[1], q[2] + xi[2]
        _quat_step(q, 3, xi[3], xi[4], xi[5], out)
    elif code == 4:
        _quat_step(q, 0, xi[0], xi[1], xi[2], out)
    elif code == 3:
        out[0], out[1], out[2], out[3] = _planar_step(q[0], q[1], q[2], q[3], xi[0], xi[1], xi[2])
    elif code == 2:
        out[0], out[1], out[3], out[4] = _planar_step(q[0], q[1], q[3], q[4], xi[0], xi[1], xi[3])
        out[2] = q[2] + xi[2]
    for k in range(1, nb):
        jt, iq, iv = im[_BODY + k, 1], im[_BODY + k, 2], im[_BODY + k, 3]
        if jt == 2:
            d = xi[iv]
            c, s = q[iq], q[iq + 1]
            cd, sd = math.cos(d), math.sin(d)
            c2, s2 = c * cd - s * sd, s * cd + c * sd
            n = math.hypot(c2, s2)
            out[iq], out[iq + 1] = c2 / n, s2 / n
        else:
            out[iq] = q[iq] + xi[iv]


@jit
def _dexp_inv_apply(im, xi, x, out):
    """out = dexp⁻¹(xi) x: the base block by its group (seed 001 eqs. 10, 11), identity for the joints."""
    code, nv, nvb = im[_HDR, 0], im[_HDR, 4], im[_HDR, 6]
    for k in range(nvb, nv):
        out[k] = x[k]
    if code == 1 or code == 4 or code == 5:
        w0 = 3 if code != 4 else 0
        wx, wy, wz = xi[w0], xi[w0 + 1], xi[w0 + 2]
        t2 = wx * wx + wy * wy + wz * wz
        theta = math.sqrt(t2)
        a, u = _dexp_inv_coeffs(theta)
        # Ji = u I − ŵ/2 + a w wᵀ acting on the angular part
        ox, oy, oz = x[w0], x[w0 + 1], x[w0 + 2]
        wdo = wx * ox + wy * oy + wz * oz
        c0, c1, c2 = _cross(wx, wy, wz, ox, oy, oz)
        out[w0] = u * ox - 0.5 * c0 + a * wx * wdo
        out[w0 + 1] = u * oy - 0.5 * c1 + a * wy * wdo
        out[w0 + 2] = u * oz - 0.5 * c2 + a * wz * wdo
        if code == 5:
            out[0], out[1], out[2] = x[0], x[1], x[2]
        elif code == 1:
            # [[Ji, Qi], [0, Ji]] [l; o]: Ji l + Qi o, Qi = −v̂/2 + a (v wᵀ + w vᵀ) − 2 (w·v)[β w wᵀ + (a − θ² β) I]
            vx, vy, vz = xi[0], xi[1], xi[2]
            lx, ly, lz = x[0], x[1], x[2]
            beta = _beta(theta, a, u)
            wdl = wx * lx + wy * ly + wz * lz
            d0, d1, d2 = _cross(wx, wy, wz, lx, ly, lz)
            e0, e1, e2 = _cross(vx, vy, vz, ox, oy, oz)
            wdv = wx * vx + wy * vy + wz * vz
            vdo = vx * ox + vy * oy + vz * oz
            s2 = -2.0 * wdv
            k0 = s2 * (a - t2 * beta)
            k1 = s2 * beta * wdo
            out[0] = u * lx - 0.5 * d0 + a * wx * wdl - 0.5 * e0 + a * (vx * wdo + wx * vdo) + k1 * wx + k0 * ox
            out[1] = u * ly - 0.5 * d1 + a * wy * wdl - 0.5 * e1 + a * (vy * wdo + wy * vdo) + k1 * wy + k0 * oy
            out[2] = u * lz - 0.5 * d2 + a * wz * wdl - 0.5 * e2 + a * (vz * wdo + wz * vdo) + k1 * wz + k0 * oz
    elif code == 2 or code == 3:
        ir = 3 if code == 2 else 2
        u_, v_, r = xi[0], xi[1], xi[ir]
        a, hc = _dexp_inv_coeffs(r)
        d, k, e1, e2 = hc, -0.5 * r, -0.5 * v_ + a * r * u_, 0.5 * u_ + a * r * v_
        out[0] = d * x[0] - k * x[1] + e1 * x[ir]
        out[1] = k * x[0] + d * x[1] + e2 * x[ir]
        out[ir] = x[ir]
        if code == 2:
            out[2] = x[2]


@jit
def _world_wrench_tau(im, q, W, tau):
    """tau[:nvb] += Bᵀ [Rᵀ F; Rᵀ τ]: a wrench at the base origin held in world axes, as a generalized force."""
    nvb = im[_HDR, 6]
    if nvb == 0:
        return
    Rw = np.empty((3, 3))
    pw = np.empty(3)
    Sb = np.zeros((6, 6))
    Wb = np.empty(6)
    _base_pose(im[_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    for r in range(3):
        Wb[r] = Rw[0, r] * W[0] + Rw[1, r] * W[1] + Rw[2, r] * W[2]
        Wb[3 + r] = Rw[0, r] * W[3] + Rw[1, r] * W[4] + Rw[2, r] * W[5]
    for k in range(nvb):
        tau[k] += _dot6(Sb[k], Wb)


@jit
def _step_core(im, fm, I6, q, v, taus, W, has_W, dt, A, b, q_out, v_out):
    """One Munthe-Kaas step (seed 001 eqs. 35–37) with tableau (A, b): Ψ_j = h Σ a_jl k_l, q_j = q·exp Ψ_j,
    v_j = v + h Σ a_jl a_l, k_j = dexp⁻¹(−Ψ_j) v_j, a_j = ABA(q_j, v_j, τ_j); q ← q·exp(h Σ b_j k_j),
    v ← v + h Σ b_j a_j. ``taus``: one row held over the step or one per stage; ``W`` a world-axes base wrench."""
    _step_work(im, fm, I6, q, v, taus, W, has_W, dt, A, b, q_out, v_out, _step_alloc(im, b.shape[0]))


@jit
def _step_alloc(im, ns):
    """The workspace of one Munthe-Kaas step with ``ns`` stages (reused by the steps of one call)."""
    nq, nv = im[_HDR, 3], im[_HDR, 4]
    return (np.empty((ns, nv)), np.empty((ns, nv)), np.empty(nv), np.empty(nv), np.empty(nq), np.empty(nv),
            np.empty(nv), np.empty(1), np.empty((1, 6)), _aba_alloc(im[_HDR, 1]))


@jit
def _step_work(im, fm, I6, q, v, taus, W, has_W, dt, A, b, q_out, v_out, sw):
    """:func:`_step_core` in the workspace ``sw`` of :func:`_step_alloc`."""
    nq, nv = im[_HDR, 3], im[_HDR, 4]
    ns = b.shape[0]
    ks, accs, psi, vj, qj, tj, tp, pwd, dummy, ws = sw
    for j in range(ns):
        if j == 0:
            for k in range(nq):
                qj[k] = q[k]
            for k in range(nv):
                vj[k] = v[k]
                ks[0, k] = v[k]
        else:
            for k in range(nv):
                sp = 0.0
                sa = 0.0
                for l in range(j):
                    if A[j, l] != 0.0:
                        sp += A[j, l] * ks[l, k]
                        sa += A[j, l] * accs[l, k]
                psi[k] = dt * sp
                vj[k] = v[k] + dt * sa
            _integrate(im, q, psi, qj)
            for k in range(nv):
                psi[k] = -psi[k]
            _dexp_inv_apply(im, psi, vj, ks[j])
        row = taus[j] if taus.shape[0] > 1 else taus[0]
        for k in range(nv):
            tj[k] = row[k]
        if has_W:
            _world_wrench_tau(im, qj, W, tj)
        if im[_HDR, 7] & (_F_CURRENT | _F_ELEMS | _F_JOINTS):
            _passive_core(im, fm, qj, vj, True, tp, pwd)
            for k in range(nv):
                tj[k] += tp[k]
        _aba_work(im, fm, I6, qj, vj, tj, dummy, False, accs[j], ws)
    for k in range(nv):
        sp = 0.0
        sa = 0.0
        for j in range(ns):
            sp += b[j] * ks[j, k]
            sa += b[j] * accs[j, k]
        psi[k] = dt * sp
        v_out[k] = v[k] + dt * sa
    _integrate(im, q, psi, q_out)


@jit
def _simulate_core(im, fm, I6, q0, v0, tau, W, has_W, dt, A, b, steps, qs, vs):
    """``steps`` steps with tau held: rows of qs/vs (row 0 = the initial state)."""
    taus = tau.reshape(1, tau.shape[0])
    qs[0] = q0
    vs[0] = v0
    sw = _step_alloc(im, b.shape[0])
    for n in range(steps):
        _step_work(im, fm, I6, qs[n], vs[n], taus, W, has_W, dt, A, b, qs[n + 1], vs[n + 1], sw)


@jit
def _advance_core(im, fm, I6, q0, v0, tau, W, has_W, dt, A, b, steps, v_caps, max_q, qs, vs):
    """:func:`_simulate_core` that stops at the first step whose state is not finite or leaves the bounds
    (some |v_i| > v_caps[i] or |q_i| > max_q; NaN fails every comparison); returns the number of steps within
    them (the row after them holds the failing step, when there is one)."""
    taus = tau.reshape(1, tau.shape[0])
    qs[0] = q0
    vs[0] = v0
    sw = _step_alloc(im, b.shape[0])
    nq, nv = qs.shape[1], vs.shape[1]
    for n in range(steps):
        _step_work(im, fm, I6, qs[n], vs[n], taus, W, has_W, dt, A, b, qs[n + 1], vs[n + 1], sw)
        for k in range(nv):
            if not abs(vs[n + 1, k]) <= v_caps[k]:
                return n
        for k in range(nq):
            if not abs(qs[n + 1, k]) <= max_q:
                return n
    return steps


@jit
def _body_poses_core(im, fm, q, T):
    """World poses (nb, 4, 4) of the bodies."""
    nb = im[_HDR, 1]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[_HDR, 0], q, Rw, pw)
    for i in range(3):
        for j in range(3):
            T[0, i, j] = Rw[i, j]
        T[0, i, 3] = pw[i]
    T[0, 3, 0], T[0, 3, 1], T[0, 3, 2], T[0, 3, 3] = 0.0, 0.0, 0.0, 1.0
    for k in range(1, nb):
        lam = im[_BODY + k, 0]
        for i in range(3):
            for j in range(3):
                T[k, i, j] = T[lam, i, 0] * Rr[k, 0, j] + T[lam, i, 1] * Rr[k, 1, j] + T[lam, i, 2] * Rr[k, 2, j]
            T[k, i, 3] = T[lam, i, 0] * pr[k, 0] + T[lam, i, 1] * pr[k, 1] + T[lam, i, 2] * pr[k, 2] + T[lam, i, 3]
        T[k, 3, 0], T[k, 3, 1], T[k, 3, 2], T[k, 3, 3] = 0.0, 0.0, 0.0, 1.0


@jit
def _energy_core(im, fm, I6, mc, q, v, out):
    """out[0] = kinetic energy ½ Σ V_iᵀ I_i V_i + ½ Σ armature v_j² (body-frame twists, the RNEA's forward pass);
    out[1] = −gᵀ Σ m_i c_i, the world centres of mass from the bodies' placements in the base frame (``mc[i]`` =
    [m_i, m_i c_i]), then the base pose (``algorithms.kinetic_energy``, ``potential_energy``)."""
    nb = im[_HDR, 1]
    nvb = im[_HDR, 6]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    V, t6 = vec[0], vec[2, 0]
    Rb = np.empty((nb, 3, 3))
    pb = np.empty((nb, 3))
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _base_velocity(im, Sb, v, V[0])
    for i in range(3):
        for j in range(3):
            Rb[0, i, j] = 1.0 if i == j else 0.0
        pb[0, i] = 0.0
    kin = 0.0
    for i in range(1, nb):
        lam, iv = im[_BODY + i, 0], im[_BODY + i, 3]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        for r in range(6):
            V[i, r] += fm[i, _S + r] * v[iv]
        kin += 0.5 * fm[i, _ARM] * v[iv] * v[iv]
        for a in range(3):
            for b in range(3):
                Rb[i, a, b] = Rb[lam, a, 0] * Rr[i, 0, b] + Rb[lam, a, 1] * Rr[i, 1, b] + Rb[lam, a, 2] * Rr[i, 2, b]
            pb[i, a] = Rb[lam, a, 0] * pr[i, 0] + Rb[lam, a, 1] * pr[i, 1] + Rb[lam, a, 2] * pr[i, 2] + pb[lam, a]
    body = 0.0
    for i in range(nb):
        _mv6(I6[i], V[i], t6)
        body += _dot6(V[i], t6)
    out[0] = 0.5 * body + kin
    f0, f1, f2, mass = 0.0, 0.0, 0.0, 0.0
    for i in range(nb):
        m = mc[i, 0]
        mass += m
        f0 += m * pb[i, 0] + Rb[i, 0, 0] * mc[i, 1] + Rb[i, 0, 1] * mc[i, 2] + Rb[i, 0, 2] * mc[i, 3]
        f1 += m * pb[i, 1] + Rb[i, 1, 0] * mc[i, 1] + Rb[i, 1, 1] * mc[i, 2] + Rb[i, 1, 2] * mc[i, 3]
        f2 += m * pb[i, 2] + Rb[i, 2, 0] * mc[i, 1] + Rb[i, 2, 1] * mc[i, 2] + Rb[i, 2, 2] * mc[i, 3]
    g = fm[0, 0:3]
    e = 0.0
    for a in range(3):
        w = Rw[a, 0] * f0 + Rw[a, 1] * f1 + Rw[a, 2] * f2 + mass * pw[a]
        e -= g[a] * w
    out[1] = e


@jit
def _all_terms_core(im, fm, I6, q, v, M, nle, g):
    """M, C v + g and g in one call (Pinocchio's computeAllTerms' dynamics part)."""
    nb = im[_HDR, 1]
    F = np.empty((nb, 6))
    dummy = np.empty((1, 6))
    _crba_core(im, fm, I6, q, M)
    _rnea_core(im, fm, I6, q, v, v, dummy, 1, nle, F)
    _rnea_core(im, fm, I6, q, v, v, dummy, 0, g, F)


# ------------------------------------------------------------------------------------------ Python side
def _f64(x, n=None):
    """x as a C-contiguous, writable float64 array (no copy when it already is one): the kernels are compiled
    for exactly that type, so any other input would trigger another compilation."""
    if type(x) is not np.ndarray or x.dtype != np.float64 or not x.flags.c_contiguous or not x.flags.writeable:
        x = np.array(x, dtype=np.float64)
    if n is not None and x.shape != (n,):
        raise ValueError(f"expected a vector of {n} numbers, got shape {x.shape}")
    return x


_NO_FEXT = np.zeros((1, 6))


class CompiledModel:
    """The arrays the kernels read, packed once from a model's tree (``base`` name, :class:`~.tree.Tree`, world
    gravity); one instance serves any number of calls, each call allocates its own workspace."""

    __slots__ = ("im", "fm", "I6", "nq", "nv", "nb", "_tableaus", "joint_names", "mc")

    def __init__(self, base, tree, gravity, passive=None):
        nb, nj = tree.nb, tree.nj
        im = np.full((nb + 2, 8), -1, dtype=np.int64)
        im[_HDR] = [BASE_CODES[base], nb, nj, tree.nq, tree.nv, tree.nqb, tree.nvb, 0]
        if tree.base_cols is not None:
            im[_COLS, : len(tree.base_cols)] = tree.base_cols
        im[_BODY:, 0] = tree.parent
        im[_BODY + 1:, 1] = tree.jtype
        im[_BODY + 1:, 2] = tree.iq
        im[_BODY + 1:, 3] = tree.iv
        ne = 0 if passive is None else int(passive.elem_body.size)
        fm = np.zeros((nb + ne, _FW))
        fm[0, :3] = gravity
        if nj and tree.armature is not None:
            fm[1:nb, _ARM] = tree.armature
        if nj:
            fm[1:nb, _R0:_R0 + 9] = tree.placement[:, :3, :3].reshape(nj, 9)
            fm[1:nb, _P0:_P0 + 3] = tree.placement[:, :3, 3]
            fm[1:nb, _PA:_PA + 9] = tree.PA.reshape(nj, 9)
            fm[1:nb, _PA2:_PA2 + 9] = tree.PA2.reshape(nj, 9)
            fm[1:nb, _PAX:_PAX + 3] = tree.Pa
            fm[1:nb, _S:_S + 6] = tree.s_joint
        if passive is not None:
            flags = 0
            if passive.has_fluid:
                flags |= _F_FLUID
                fm[:nb, _HD:_HD + 18] = passive.D.reshape(nb, 18)
                fm[:nb, _HMA:_HMA + 36] = passive.added_mass.reshape(nb, 36)
            if passive.has_current:
                flags |= _F_CURRENT
            fm[0, 3:6] = passive.current
            fm[0, 6:9] = passive.current_rate
            if ne:
                flags |= _F_ELEMS
                fm[nb:, _EB] = passive.elem_body
                fm[nb:, _ER:_ER + 9] = passive.T_body_elem[:, :3, :3].reshape(ne, 9)
                fm[nb:, _EP:_EP + 3] = passive.T_body_elem[:, :3, 3]
                fm[nb:, _EDL:_EDL + 36] = passive.D_lin.reshape(ne, 36)
                fm[nb:, _EDQ:_EDQ + 6] = passive.D_quad
            if nj and (passive.stiffness.any() or passive.damping.any() or passive.friction.any()):
                flags |= _F_JOINTS
                fm[1:nb, _JP] = passive.stiffness
                fm[1:nb, _JP + 1] = passive.rest
                fm[1:nb, _JP + 2] = passive.damping
                fm[1:nb, _JP + 3] = passive.friction
                fm[1:nb, _JP + 4] = np.where(passive.friction_velocity > 0, passive.friction_velocity, 1.0)
            im[_HDR, 7] = flags
            im[_COLS, 7] = ne
        else:
            im[_HDR, 7] = 0
            im[_COLS, 7] = 0
        self.im, self.fm = im, fm
        self.I6 = np.ascontiguousarray(tree.body_inertia, dtype=np.float64).copy()
        self.mc = np.ascontiguousarray(np.column_stack([tree.body_mass, tree.body_first_moment]), dtype=np.float64)
        self.nq, self.nv, self.nb = tree.nq, tree.nv, nb
        self.joint_names = tuple(tree.joint_names)
        from .integrators import TABLEAUS

        self._tableaus = {}
        for name, tab in TABLEAUS.items():
            ns = len(tab.b)
            A = np.zeros((ns, ns))
            for j, row in enumerate(tab.A):
                A[j, : len(row)] = row
            self._tableaus[name] = (A, np.array(tab.b, dtype=np.float64))

    def _fext(self, f_ext):
        if f_ext is None:
            return _NO_FEXT, 0
        f = np.array(f_ext, dtype=np.float64).reshape(self.nb, 6)
        return f, 4

    # ------------------------------------------------------------------ kernels (Model delegates to these)
    def rnea(self, q, v, a, f_ext=None):
        tau = np.empty(self.nv)
        fext, flag = self._fext(f_ext)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), _f64(a, self.nv), fext, 3 | flag,
                   tau, np.empty((self.nb, 6)))
        return tau

    def nonlinear_effects(self, q, v):
        tau = np.empty(self.nv)
        v = _f64(v, self.nv)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), v, v, _NO_FEXT, 1, tau, np.empty((self.nb, 6)))
        return tau

    def gravity_forces(self, q):
        tau = np.empty(self.nv)
        z = np.zeros(self.nv)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), z, z, _NO_FEXT, 0, tau, np.empty((self.nb, 6)))
        return tau

    def crba(self, q):
        M = np.empty((self.nv, self.nv))
        _crba_core(self.im, self.fm, self.I6, _f64(q, self.nq), M)
        return M

    def coriolis_matrix(self, q, v):
        C = np.empty((self.nv, self.nv))
        _coriolis_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), C)
        return C

    def aba(self, q, v, tau, f_ext=None):
        qdd = np.empty(self.nv)
        fext, flag = self._fext(f_ext)
        try:
            _aba_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), _f64(tau, self.nv), fext,
                      flag != 0, qdd)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return qdd

    def _singular(self, exc) -> SingularMassMatrix:
        """The :class:`SingularMassMatrix` naming the joint of the kernel's vanished pivot."""
        name = self.joint_names[int(exc.args[0]) - 1] if exc.args else "?"
        return SingularMassMatrix(
            f"the joint-space mass matrix is singular at this configuration: with the joints beyond it free, moving "
            f"joint {name!r} moves no mass (joints in line with a massless link between them); no acceleration is "
            "defined: start from, or reset to, another pose, or give the joint an armature")

    def all_terms(self, q, v):
        M = np.empty((self.nv, self.nv))
        nle = np.empty(self.nv)
        g = np.empty(self.nv)
        _all_terms_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), M, nle, g)
        return M, nle, g

    def joint_wrenches(self, q, v, a, tau=None, f_ext=None):
        """(nj, 6): the wrench each joint transmits to its child, in the child (joint) frame."""
        F = np.empty((self.nb, 6))
        fext, flag = self._fext(f_ext)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), _f64(a, self.nv), fext, 3 | flag,
                   np.empty(self.nv), F)
        W = F[1:]
        if tau is not None:  # what reaches the link: the effort less what accelerates the rotor (armature)
            nvb = int(self.im[_HDR, 6])
            tau = np.asarray(tau, dtype=float).reshape(self.nv)[nvb:]
            tau = tau - self.fm[1:self.nb, _ARM] * _f64(a, self.nv)[nvb:]
            W -= self.fm[1:self.nb, _S:_S + 6] * tau[:, None]
        return W

    def passive(self, q, v, springs=True):
        """``(τ_p (nv,), dissipated power [W])``: the passive forces of passive.py at (q, v)."""
        tau = np.empty(self.nv)
        pw = np.empty(1)
        _passive_core(self.im, self.fm, _f64(q, self.nq), _f64(v, self.nv), bool(springs), tau, pw)
        return tau, float(pw[0])

    def with_current(self, velocity, rate):
        """A copy whose current is ``velocity`` and ``rate`` (world axes; the kernels' arrays otherwise shared)."""
        out = CompiledModel.__new__(CompiledModel)
        for name in CompiledModel.__slots__:
            setattr(out, name, getattr(self, name))
        out.fm = self.fm.copy()
        out.im = self.im.copy()
        out.fm[0, 3:6] = velocity
        out.fm[0, 6:9] = rate
        if self.im[_HDR, 7] & _F_FLUID:
            if np.any(velocity) or np.any(rate):
                out.im[_HDR, 7] |= _F_CURRENT
            else:
                out.im[_HDR, 7] &= ~_F_CURRENT
        return out

    def energies(self, q, v):
        """``(kinetic, gravity potential)`` [J] at (q, v) (:func:`_energy_core`)."""
        out = np.empty(2)
        _energy_core(self.im, self.fm, self.I6, self.mc, _f64(q, self.nq), _f64(v, self.nv), out)
        return float(out[0]), float(out[1])

    def body_poses(self, q):
        T = np.empty((self.nb, 4, 4))
        _body_poses_core(self.im, self.fm, _f64(q, self.nq), T)
        return T

    def integrate(self, q, xi):
        out = np.empty(self.nq)
        _integrate(self.im, _f64(q, self.nq), _f64(xi, self.nv), out)
        return out

    def _taus(self, tau, method):
        tau = _f64(tau)
        if tau.ndim == 1:
            if tau.shape[0] != self.nv:
                raise ValueError(f"tau must have {self.nv} entries, got {tau.shape[0]}")
            return tau.reshape(1, self.nv)
        ns = self._tableaus[method][1].shape[0]
        if tau.shape != (ns, self.nv):
            raise ValueError(f"tau has shape {tau.shape}; the {ns}-stage {method} needs ({ns}, {self.nv})")
        return tau

    def step(self, q, v, tau, dt, method="rk4", wrench_world=None):
        """One Munthe-Kaas step: ``(q_next, v_next)``; ``tau`` held (nv,) or per stage (n_stages, nv)."""
        try:
            A, b = self._tableaus[method]
        except KeyError:
            raise ValueError(f"unknown integrator {method!r}; choose one of {', '.join(self._tableaus)}") from None
        q_out = np.empty(self.nq)
        v_out = np.empty(self.nv)
        W = _NO_FEXT[0] if wrench_world is None else _f64(wrench_world, 6)
        try:
            _step_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), self._taus(tau, method), W,
                       wrench_world is not None, float(dt), A, b, q_out, v_out)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return q_out, v_out

    def simulate(self, q0, v0, tau, dt, steps, method="rk4", wrench_world=None):
        """``steps`` steps with ``tau`` (nv,) held: (qs (steps+1, nq), vs (steps+1, nv))."""
        A, b = self._tableaus[method]
        qs = np.empty((steps + 1, self.nq))
        vs = np.empty((steps + 1, self.nv))
        W = _NO_FEXT[0] if wrench_world is None else _f64(wrench_world, 6)
        try:
            _simulate_core(self.im, self.fm, self.I6, _f64(q0, self.nq), _f64(v0, self.nv), _f64(tau, self.nv), W,
                           wrench_world is not None, float(dt), A, b, int(steps), qs, vs)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return qs, vs


    def advance(self, q0, v0, tau, dt, steps, method, wrench_world, v_caps, max_q):
        """:meth:`simulate` stopping at the first step out of the bounds (finite, ``|v| <= v_caps``, ``|q| <=
        max_q``): ``(qs, vs, n_within)``, rows ``0 .. n_within`` (and the failing one after them) filled."""
        A, b = self._tableaus[method]
        qs = np.empty((steps + 1, self.nq))
        vs = np.empty((steps + 1, self.nv))
        W = _NO_FEXT[0] if wrench_world is None else _f64(wrench_world, 6)
        try:
            n = _advance_core(self.im, self.fm, self.I6, _f64(q0, self.nq), _f64(v0, self.nv), _f64(tau, self.nv),
                              W, wrench_world is not None, float(dt), A, b, int(steps), _f64(v_caps, self.nv),
                              float(max_q), qs, vs)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return qs, vs, n


def compile_model(base, tree, gravity, passive=None):
    """A :class:`CompiledModel` of a tree on ``base`` (with its :class:`~.passive.Passive`, if any), or None where
    numba is unavailable (or the environment sets ``MBS_BACKEND=numpy``)."""
    return CompiledModel(base, tree, gravity, passive) if AVAILABLE else None


def warm_up_model():
    """``(CompiledModel, q)``: the two-body SE(3) tree the warm-ups call every kernel on (the kernels are compiled for
    the array types, whatever the base group or joint types)."""
    from .tree import build_tree
    from .urdf import parse_urdf

    urdf = ('<robot name="warm"><link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"'
            ' ixz="0" iyz="0"/></inertial></link><link name="c"><inertial><mass value="1"/><inertia ixx="1" iyy="1"'
            ' izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j" type="continuous"><parent link="b"/>'
            '<child link="c"/><axis xyz="0 0 1"/></joint></robot>')
    c = CompiledModel("se3", build_tree(parse_urdf(urdf, warn=False), "se3"), np.array([0.0, 0.0, -9.81]))
    return c, np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0])


def warm_up() -> float:
    """Compile (or load from the on-disk cache) every kernel by calling it once; returns the seconds it took.
    One tree suffices: the kernels are compiled for the array types, whatever the base group or joint types."""
    t0 = time.perf_counter()
    if not AVAILABLE:
        return 0.0
    c, q = warm_up_model()
    v = np.zeros(c.nv)
    c.rnea(q, v, v)
    c.rnea(q, v, v, np.zeros((c.nb, 6)))
    c.nonlinear_effects(q, v)
    c.gravity_forces(q)
    c.crba(q)
    c.coriolis_matrix(q, v)
    c.aba(q, v, v)
    c.aba(q, v, v, np.zeros((c.nb, 6)))
    c.all_terms(q, v)
    c.joint_wrenches(q, v, v)
    c.body_poses(q)
    c.energies(q, v)
    c.integrate(q, v)
    c.step(q, v, v, 1e-3)
    c.step(q, v, v, 1e-3, wrench_world=np.zeros(6))
    c.simulate(q, v, v, 1e-3, 1)
    c.advance(q, v, v, 1e-3, 2, "rk4", None, np.full(c.nv, np.inf), np.inf)
    c.passive(q, v)
    return time.perf_counter() - t0
