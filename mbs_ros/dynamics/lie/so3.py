"""SO(3): q = [qx, qy, qz, qw] (unit quaternion), xi = w (body angular velocity)."""

from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.lie._base import (
    LieGroup,
    _floats,
    _readonly,
    cos_coeff,
    dexp_inv_coeffs,
    hat3,
    matrix_to_quat,
    quat_exp,
    quat_log,
    quat_mul,
    quat_normalize,
    quat_to_matrix,
    random_quat,
    sin_coeff,
    sinc,
)


def so3_dexp(wx: float, wy: float, wz: float) -> np.ndarray:
    """I + B hat w + C hat w^2 = (sin t / t) I + B hat w + C w w^T, B = (1-cos t)/t^2,
    C = (t - sin t)/t^3 (the right-trivialised dexp, i.e. the 'left Jacobian' of SO(3))."""
    theta = math.sqrt(wx * wx + wy * wy + wz * wz)
    B = cos_coeff(theta)
    C = sin_coeff(theta)
    d = sinc(theta)
    return np.array([
        [d + C * wx * wx, C * wx * wy - B * wz, C * wx * wz + B * wy],
        [C * wy * wx + B * wz, d + C * wy * wy, C * wy * wz - B * wx],
        [C * wz * wx - B * wy, C * wz * wy + B * wx, d + C * wz * wz]])


def so3_dexp_inv(wx: float, wy: float, wz: float) -> np.ndarray:
    """I - hat(w)/2 + a hat(w)^2 = u I - hat(w)/2 + a w w^T, a = (1 - u)/t^2,
    u = (t/2)cot(t/2) (seed 001 eq. 11)."""
    a, d = dexp_inv_coeffs(math.sqrt(wx * wx + wy * wy + wz * wz))
    return np.array([
        [d + a * wx * wx, a * wx * wy + 0.5 * wz, a * wx * wz - 0.5 * wy],
        [a * wy * wx - 0.5 * wz, d + a * wy * wy, a * wy * wz + 0.5 * wx],
        [a * wz * wx + 0.5 * wy, a * wz * wy - 0.5 * wx, d + a * wz * wz]])


class _SO3(LieGroup):
    """SO(3). ad_w = hat(w), Ad_q = R(q), ad~_p = -hat(p) (seed 004 eq. 68; its Table 1 has the
    sign wrong). H = [0; I3] (seed 004 eq. 62)."""

    name = "so3"
    nq = 4
    dim = 3
    matrix_dim = 3
    H = _readonly(np.vstack([np.zeros((3, 3)), np.eye(3)]))

    def identity(self):
        return np.array([0.0, 0.0, 0.0, 1.0])

    def compose(self, a, b):
        return np.array(quat_mul(_floats(a), _floats(b)))

    def inverse(self, a):
        x, y, z, w = _floats(a)
        return np.array([-x, -y, -z, w])

    def normalize(self, q):
        return np.array(quat_normalize(*_floats(q)))

    def exp(self, xi):
        return np.array(quat_exp(*_floats(xi)))

    def log(self, q):
        return np.array(quat_log(*_floats(q)))

    def integrate(self, q, xi):
        return np.array(quat_normalize(*quat_mul(_floats(q), quat_exp(*_floats(xi)))))

    def as_matrix(self, q):
        return quat_to_matrix(*_floats(q))

    def from_matrix(self, T):
        return np.array(matrix_to_quat(T))

    def pose_matrix(self, q):
        T = np.eye(4)
        T[:3, :3] = quat_to_matrix(*_floats(q))
        return T

    def hat(self, xi):
        return hat3(xi)

    def vee(self, X):
        return np.array([X[2][1], X[0][2], X[1][0]], dtype=float)

    def adjoint(self, q):
        return quat_to_matrix(*_floats(q))

    def ad(self, xi):
        return hat3(xi)

    def ad_tilde(self, p):
        return -hat3(p)

    def dexp(self, xi):
        return so3_dexp(*_floats(xi))

    def dexp_inv(self, xi):
        return so3_dexp_inv(*_floats(xi))

    def random(self, rng):
        return np.array(random_quat(rng))


SO3 = _SO3()
