"""The compiled kernels' small pieces: the Lie groups' scalar coefficients (the same bracketed Taylor
series as :mod:`mbs_ros.dynamics.lie`), 6-vector spatial algebra in body frames, the base pose and the joints' placements. Used by
every kernel module (:mod:`mbs_ros.dynamics.kernels.multibody`, :mod:`mbs_ros.dynamics.kernels.step`, the derivative and law kernels); the layout of
their arrays: :mod:`mbs_ros.dynamics.kernels.layout`. The lie module's series tables are compiled in as constants: numba's cache
does not see a change there, so touch this file after changing them.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit
from mbs_ros.dynamics.kernels.layout import FM_HD, FM_P0, FM_PA, FM_PA2, FM_PAX, FM_R0, IM_BODY, IM_COLS, IM_HDR
from mbs_ros.dynamics.lie import DEXP_INV_SERIES, SE3_BETA_SERIES, SIN_COEFF_SERIES, SINC_THRESHOLD

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
    code, nvb = im[IM_HDR, 0], im[IM_HDR, 6]
    for k in range(nvb):
        for r in range(6):
            Sb[k, r] = 0.0
        if code == 5:
            if k < 3:
                Sb[k, 0], Sb[k, 1], Sb[k, 2] = Rw[k, 0], Rw[k, 1], Rw[k, 2]
            else:
                Sb[k, k] = 1.0
        else:
            Sb[k, im[IM_COLS, k]] = 1.0


@jit
def _joint_poses(im, fm, q, Rr, pr):
    """Rr[k], pr[k]: pose of body k in its parent's frame at q (k ≥ 1): placement × joint motion, as
    ``algorithms._joint_transforms`` (R = R_P + sin θ R_P â + (1 − cos θ) R_P â²)."""
    nb = im[IM_HDR, 1]
    for k in range(1, nb):
        jt, iq = im[IM_BODY + k, 1], im[IM_BODY + k, 2]
        row = fm[k]
        if jt == 1:  # prismatic
            d = q[iq]
            for i in range(3):
                for j in range(3):
                    Rr[k, i, j] = row[FM_R0 + 3 * i + j]
                pr[k, i] = row[FM_P0 + i] + d * row[FM_PAX + i]
        else:
            if jt == 0:
                s, c1 = math.sin(q[iq]), 1.0 - math.cos(q[iq])
            else:  # continuous: (cos, sin)
                s, c1 = q[iq + 1], 1.0 - q[iq]
            for i in range(3):
                for j in range(3):
                    m = 3 * i + j
                    Rr[k, i, j] = row[FM_R0 + m] + s * row[FM_PA + m] + c1 * row[FM_PA2 + m]
                pr[k, i] = row[FM_P0 + i]


@jit
def _base_velocity(im, Sb, v, V0):
    for r in range(6):
        acc = 0.0
        for k in range(im[IM_HDR, 6]):
            acc += Sb[k, r] * v[k]
        V0[r] = acc


@jit
def _base_bias(im, Rw, v, out):
    """out = Ḃ v_b (zero but for SO(3)×R³: [−ω × (Rᵀ ṙ); 0])."""
    for r in range(6):
        out[r] = 0.0
    if im[IM_HDR, 0] == 5:
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
    nb = im[IM_HDR, 1]
    for r in range(3):
        for m in range(3):
            G[0, 3 * m + r] = Rw[0, r] * fm[0, 3 * m] + Rw[1, r] * fm[0, 3 * m + 1] + Rw[2, r] * fm[0, 3 * m + 2]
    for i in range(1, nb):
        lam = im[IM_BODY + i, 0]
        for m in range(3):
            for r in range(3):
                G[i, 3 * m + r] = (Rr[i, 0, r] * G[lam, 3 * m] + Rr[i, 1, r] * G[lam, 3 * m + 1]
                                   + Rr[i, 2, r] * G[lam, 3 * m + 2])


@jit
def _add_fluid_weight(fm, i, G, F):
    """F[i] += D_i g_i: gravity taken off the added mass, buoyancy added (passive.py's module docstring)."""
    for r in range(6):
        F[i, r] += fm[i, FM_HD + 3 * r] * G[i, 0] + fm[i, FM_HD + 3 * r + 1] * G[i, 1] + fm[i, FM_HD + 3 * r + 2] * G[i, 2]


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
