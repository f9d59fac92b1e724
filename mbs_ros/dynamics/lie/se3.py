"""SE(3): q = [x, y, z, qx, qy, qz, qw], xi = [v; w] (linear first, body frame)."""

from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.lie._base import (
    LieGroup,
    _floats,
    _readonly,
    cos_coeff,
    dexp_inv_coeffs,
    matrix_to_quat,
    quat_exp,
    quat_log,
    quat_mul,
    quat_normalize,
    quat_rotate,
    quat_to_matrix,
    random_quat,
    se3_dexp_coeffs,
    se3_dexp_inv_beta,
    sin_coeff,
    sinc,
)


def _se3_poly_matrix(w, v, d, k1, k2, e, m1, m2, m3, m4) -> np.ndarray:
    """6x6 [[TL, TR], [0, TL]] with TL = d I + k1 hat(w) + k2 w w^T and
    TR = e I + m1 hat(v) + m2 hat(w) + m3 (v w^T + w v^T) + m4 w w^T.

    Every polynomial in ad_[v;w] has this form (hat(w)^3 = -t^2 hat(w), hat(w)hat(v) = v w^T - (w.v) I),
    which lets dexp and dexp_inv be built from scalars without 6x6 products."""
    wx, wy, wz = w
    vx, vy, vz = v
    xx, yy, zz = k2 * wx * wx + d, k2 * wy * wy + d, k2 * wz * wz + d
    xy, xz, yz = k2 * wx * wy, k2 * wx * wz, k2 * wy * wz
    a0, a1, a2 = k1 * wx, k1 * wy, k1 * wz
    # TR: symmetric part S = e I + m3 (v w^T + w v^T) + m4 w w^T, skew part hat(m1 v + m2 w)
    sx, sy, sz = m1 * vx + m2 * wx, m1 * vy + m2 * wy, m1 * vz + m2 * wz
    Sxx = e + 2.0 * m3 * vx * wx + m4 * wx * wx
    Syy = e + 2.0 * m3 * vy * wy + m4 * wy * wy
    Szz = e + 2.0 * m3 * vz * wz + m4 * wz * wz
    Sxy = m3 * (vx * wy + wx * vy) + m4 * wx * wy
    Sxz = m3 * (vx * wz + wx * vz) + m4 * wx * wz
    Syz = m3 * (vy * wz + wy * vz) + m4 * wy * wz
    return np.array([
        xx, xy - a2, xz + a1, Sxx, Sxy - sz, Sxz + sy,
        xy + a2, yy, yz - a0, Sxy + sz, Syy, Syz - sx,
        xz - a1, yz + a0, zz, Sxz - sy, Syz + sx, Szz,
        0.0, 0.0, 0.0, xx, xy - a2, xz + a1,
        0.0, 0.0, 0.0, xy + a2, yy, yz - a0,
        0.0, 0.0, 0.0, xz - a1, yz + a0, zz]).reshape(6, 6)


def se3_dexp(v, w) -> np.ndarray:
    """Right-trivialised dexp of SE(3), sum_k ad^k/(k+1)! = [[J, Q], [0, J]] (Barfoot's block form,
    linear first) with J = I + B hat w + C hat w^2 and
    Q = B hat v + C (v w^T + w v^T) - 2 (w.v) [c3 hat w + c4 w w^T + (C - t^2 c4) I]
    (the polynomial I + c1 ad + ... + c4 ad^4 written out; B, C, c3, c4 see _base)."""
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = math.sqrt(t2)
    B, C = cos_coeff(theta), sin_coeff(theta)
    c3, c4 = se3_dexp_coeffs(theta)
    s2 = -2.0 * (w[0] * v[0] + w[1] * v[1] + w[2] * v[2])
    return _se3_poly_matrix(w, v, sinc(theta), B, C, s2 * (C - t2 * c4), B, s2 * c3, C, s2 * c4)


def se3_dexp_inv(v, w) -> np.ndarray:
    """Seed 001 eq. (10), I - ad/2 + alpha ad^2 + beta ad^4, written out blockwise:
    [[Ji, Qi], [0, Ji]], Ji = I - hat(w)/2 + a hat(w)^2 (eq. 11),
    Qi = -hat(v)/2 + a (v w^T + w v^T) - 2 (w.v) [beta w w^T + (a - t^2 beta) I]; alpha = a + t^2 beta."""
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = math.sqrt(t2)
    a, u = dexp_inv_coeffs(theta)
    beta = se3_dexp_inv_beta(theta, a, u)
    s2 = -2.0 * (w[0] * v[0] + w[1] * v[1] + w[2] * v[2])
    return _se3_poly_matrix(w, v, u, -0.5, a, s2 * (a - t2 * beta), -0.5, 0.0, a,
                            s2 * beta)


def se3_exp_translation(v, w) -> tuple:
    """J(w) v = v + B w x v + C w x (w x v) (translation part of exp([v; w]))."""
    wx, wy, wz = w
    vx, vy, vz = v
    theta = math.sqrt(wx * wx + wy * wy + wz * wz)
    B, C = cos_coeff(theta), sin_coeff(theta)
    cx, cy, cz = wy * vz - wz * vy, wz * vx - wx * vz, wx * vy - wy * vx
    ccx, ccy, ccz = wy * cz - wz * cy, wz * cx - wx * cz, wx * cy - wy * cx
    return (vx + B * cx + C * ccx, vy + B * cy + C * ccy, vz + B * cz + C * ccz)


class _SE3(LieGroup):
    """SE(3) as 4x4 [[R, p], [0, 1]]; exp per seed 001 eq. (9) with the typo fixed ((1 - cos) / t^2).
    ad = [[hat w, hat v], [0, hat w]] (seed 004 eq. 8), ad~_p = [[0, -hat p_l], [-hat p_l, -hat p_a]]
    (eq. 73), Ad = [[R, hat(p) R], [0, R]]."""

    name = "se3"
    nq = 7
    dim = 6
    matrix_dim = 4
    H = _readonly(np.eye(6))

    def identity(self):
        return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])

    def compose(self, a, b):
        a = _floats(a)
        b = _floats(b)
        qa = a[3:]
        r = quat_rotate(qa, b[:3])
        return np.array([a[0] + r[0], a[1] + r[1], a[2] + r[2], *quat_mul(qa, b[3:])])

    def inverse(self, a):
        x, y, z, qx, qy, qz, qw = _floats(a)
        qi = (-qx, -qy, -qz, qw)
        r = quat_rotate(qi, (x, y, z))
        return np.array([-r[0], -r[1], -r[2], -qx, -qy, -qz, qw])

    def normalize(self, q):
        q = _floats(q)
        return np.array([q[0], q[1], q[2], *quat_normalize(*q[3:])])

    def exp(self, xi):
        xi = _floats(xi)
        v, w = xi[:3], xi[3:]
        return np.array([*se3_exp_translation(v, w), *quat_exp(*w)])

    def log(self, q):
        x, y, z, qx, qy, qz, qw = _floats(q)
        wx, wy, wz = quat_log(qx, qy, qz, qw)
        a = dexp_inv_coeffs(math.sqrt(wx * wx + wy * wy + wz * wz))[0]
        # v = J(w)^-1 p = p - w x p / 2 + a w x (w x p)
        cx, cy, cz = wy * z - wz * y, wz * x - wx * z, wx * y - wy * x
        ccx, ccy, ccz = wy * cz - wz * cy, wz * cx - wx * cz, wx * cy - wy * cx
        return np.array([x - 0.5 * cx + a * ccx, y - 0.5 * cy + a * ccy, z - 0.5 * cz + a * ccz,
                         wx, wy, wz])

    def integrate(self, q, xi):
        q = _floats(q)
        xi = _floats(xi)
        w = xi[3:]
        qa = q[3:]
        r = quat_rotate(qa, se3_exp_translation(xi[:3], w))
        return np.array([q[0] + r[0], q[1] + r[1], q[2] + r[2],
                         *quat_normalize(*quat_mul(qa, quat_exp(*w)))])

    def as_matrix(self, q):
        q = _floats(q)
        T = np.eye(4)
        T[:3, :3] = quat_to_matrix(*q[3:])
        T[:3, 3] = q[:3]
        return T

    def from_matrix(self, T):
        T = np.asarray(T, dtype=float)
        return np.array([T[0, 3], T[1, 3], T[2, 3], *matrix_to_quat(T[:3, :3])])

    def pose_matrix(self, q):
        return self.as_matrix(q)

    def hat(self, xi):
        vx, vy, vz, wx, wy, wz = _floats(xi)
        return np.array([[0.0, -wz, wy, vx], [wz, 0.0, -wx, vy], [-wy, wx, 0.0, vz],
                         [0.0, 0.0, 0.0, 0.0]])

    def vee(self, X):
        return np.array([X[0][3], X[1][3], X[2][3], X[2][1], X[0][2], X[1][0]], dtype=float)

    def adjoint(self, q):
        x, y, z, qx, qy, qz, qw = _floats(q)
        R = quat_to_matrix(qx, qy, qz, qw)
        A = np.zeros((6, 6))
        A[:3, :3] = R
        A[3:, 3:] = R
        A[:3, 3:] = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]]) @ R
        return A

    def ad(self, xi):
        vx, vy, vz, wx, wy, wz = _floats(xi)
        return np.array([
            0.0, -wz, wy, 0.0, -vz, vy,
            wz, 0.0, -wx, vz, 0.0, -vx,
            -wy, wx, 0.0, -vy, vx, 0.0,
            0.0, 0.0, 0.0, 0.0, -wz, wy,
            0.0, 0.0, 0.0, wz, 0.0, -wx,
            0.0, 0.0, 0.0, -wy, wx, 0.0]).reshape(6, 6)

    def ad_tilde(self, p):
        fx, fy, fz, tx, ty, tz = _floats(p)
        return np.array([
            0.0, 0.0, 0.0, 0.0, fz, -fy,
            0.0, 0.0, 0.0, -fz, 0.0, fx,
            0.0, 0.0, 0.0, fy, -fx, 0.0,
            0.0, fz, -fy, 0.0, tz, -ty,
            -fz, 0.0, fx, -tz, 0.0, tx,
            fy, -fx, 0.0, ty, -tx, 0.0]).reshape(6, 6)

    def dexp(self, xi):
        xi = _floats(xi)
        return se3_dexp(xi[:3], xi[3:])

    def dexp_inv(self, xi):
        xi = _floats(xi)
        return se3_dexp_inv(xi[:3], xi[3:])

    def random(self, rng):
        return np.array([*rng.standard_normal(3).tolist(), *random_quat(rng)])


SE3 = _SE3()
