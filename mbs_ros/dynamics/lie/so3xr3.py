"""SO(3) x R^3 (direct product): q = [x, y, z, qx, qy, qz, qw], xi = [r'; w].

Composition (r1 + r2, R1 R2); the translation part of the velocity is the spatial rate r' (not
body-fixed), the rotation part is the body angular velocity: Mueller & Terze's 'hybrid' form
(seed 001, eqs. 18-19: exp and dexp are blockwise, dexp = diag(I, dexp_SO3)). Not a subgroup of
SE(3): H is None.
"""

from __future__ import annotations

import numpy as np

from mbs_ros.dynamics.lie._base import (
    LieGroup,
    _floats,
    hat3,
    matrix_to_quat,
    quat_exp,
    quat_log,
    quat_mul,
    quat_normalize,
    quat_to_matrix,
    random_quat,
)
from mbs_ros.dynamics.lie.so3 import so3_dexp, so3_dexp_inv


def _blockdiag_i3(B: np.ndarray) -> np.ndarray:
    M = np.zeros((6, 6))
    M[0, 0] = M[1, 1] = M[2, 2] = 1.0
    M[3:, 3:] = B
    return M


class _SO3xR3(LieGroup):
    """as_matrix is the 7x7 block diagonal diag(R, [[I, r], [0, 1]]); pose_matrix is [[R, r], [0, 1]].
    Ad = diag(I, R), ad = diag(0, hat w), ad~_p = diag(0, -hat p_a)."""

    name = "so3xr3"
    nq = 7
    dim = 6
    matrix_dim = 7
    H = None

    def identity(self):
        return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])

    def compose(self, a, b):
        a = _floats(a)
        b = _floats(b)
        return np.array([a[0] + b[0], a[1] + b[1], a[2] + b[2], *quat_mul(a[3:], b[3:])])

    def inverse(self, a):
        x, y, z, qx, qy, qz, qw = _floats(a)
        return np.array([-x, -y, -z, -qx, -qy, -qz, qw])

    def normalize(self, q):
        q = _floats(q)
        return np.array([q[0], q[1], q[2], *quat_normalize(*q[3:])])

    def exp(self, xi):
        xi = _floats(xi)
        return np.array([xi[0], xi[1], xi[2], *quat_exp(*xi[3:])])

    def log(self, q):
        q = _floats(q)
        return np.array([q[0], q[1], q[2], *quat_log(*q[3:])])

    def integrate(self, q, xi):
        q = _floats(q)
        xi = _floats(xi)
        return np.array([q[0] + xi[0], q[1] + xi[1], q[2] + xi[2],
                         *quat_normalize(*quat_mul(q[3:], quat_exp(*xi[3:])))])

    def as_matrix(self, q):
        q = _floats(q)
        T = np.eye(7)
        T[:3, :3] = quat_to_matrix(*q[3:])
        T[3:6, 6] = q[:3]
        return T

    def from_matrix(self, T):
        T = np.asarray(T, dtype=float)
        return np.array([T[3, 6], T[4, 6], T[5, 6], *matrix_to_quat(T[:3, :3])])

    def pose_matrix(self, q):
        q = _floats(q)
        T = np.eye(4)
        T[:3, :3] = quat_to_matrix(*q[3:])
        T[:3, 3] = q[:3]
        return T

    def hat(self, xi):
        xi = _floats(xi)
        X = np.zeros((7, 7))
        X[:3, :3] = hat3(xi[3:])
        X[3:6, 6] = xi[:3]
        return X

    def vee(self, X):
        return np.array([X[3][6], X[4][6], X[5][6], X[2][1], X[0][2], X[1][0]], dtype=float)

    def adjoint(self, q):
        return _blockdiag_i3(quat_to_matrix(*_floats(q)[3:]))

    def ad(self, xi):
        M = np.zeros((6, 6))
        M[3:, 3:] = hat3(_floats(xi)[3:])
        return M

    def ad_tilde(self, p):
        M = np.zeros((6, 6))
        M[3:, 3:] = -hat3(_floats(p)[3:])
        return M

    def dexp(self, xi):
        return _blockdiag_i3(so3_dexp(*_floats(xi)[3:]))

    def dexp_inv(self, xi):
        return _blockdiag_i3(so3_dexp_inv(*_floats(xi)[3:]))

    def random(self, rng):
        return np.array([*rng.standard_normal(3).tolist(), *random_quat(rng)])


SO3xR3 = _SO3xR3()
