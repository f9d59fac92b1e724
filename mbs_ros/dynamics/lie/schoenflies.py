"""Schoenflies group X(z) = SE(2) x R (x, y, z, yaw): q = [x, y, z, cos t, sin t], xi = [u, v, w, r]."""

from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.lie._base import LieGroup, _floats, _readonly
from mbs_ros.dynamics.lie.se2 import planar_dexp, planar_dexp_inv, planar_exp, planar_log


class _Schoenflies(LieGroup):
    """Translations plus rotation about z, as 4x4 [[Rz(t), p], [0, 1]]; subgroup of SE(3) with
    H = [e1 e2 e3 e6] (seed 004 eq. 88). The z-translation commutes with everything, the rest is SE(2).
    ad~_p = [[0,0,0,-p2], [0,0,0,p1], [0,0,0,0], [p2,-p1,0,0]]."""

    name = "schoenflies"
    nq = 5
    dim = 4
    matrix_dim = 4
    H = _readonly(np.eye(6)[:, [0, 1, 2, 5]])

    def identity(self):
        return np.array([0.0, 0.0, 0.0, 1.0, 0.0])

    def compose(self, a, b):
        x1, y1, z1, c1, s1 = _floats(a)
        x2, y2, z2, c2, s2 = _floats(b)
        return np.array([x1 + c1 * x2 - s1 * y2, y1 + s1 * x2 + c1 * y2, z1 + z2,
                         c1 * c2 - s1 * s2, s1 * c2 + c1 * s2])

    def inverse(self, a):
        x, y, z, c, s = _floats(a)
        return np.array([-c * x - s * y, s * x - c * y, -z, c, -s])

    def normalize(self, q):
        x, y, z, c, s = _floats(q)
        n = 1.0 / math.hypot(c, s)
        return np.array([x, y, z, c * n, s * n])

    def exp(self, xi):
        u, v, w, r = _floats(xi)
        x, y, c, s = planar_exp(u, v, r)
        return np.array([x, y, w, c, s])

    def log(self, q):
        x, y, z, c, s = _floats(q)
        u, v, r = planar_log(x, y, c, s)
        return np.array([u, v, z, r])

    def integrate(self, q, xi):
        x1, y1, z1, c1, s1 = _floats(q)
        u, v, w, r = _floats(xi)
        x2, y2, c2, s2 = planar_exp(u, v, r)
        c, s = c1 * c2 - s1 * s2, s1 * c2 + c1 * s2
        n = 1.0 / math.hypot(c, s)
        return np.array([x1 + c1 * x2 - s1 * y2, y1 + s1 * x2 + c1 * y2, z1 + w, c * n, s * n])

    def as_matrix(self, q):
        x, y, z, c, s = _floats(q)
        return np.array([[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, z],
                         [0.0, 0.0, 0.0, 1.0]])

    def from_matrix(self, T):
        T = np.asarray(T, dtype=float)
        return self.normalize(np.array([T[0, 3], T[1, 3], T[2, 3], T[0, 0], T[1, 0]]))

    def pose_matrix(self, q):
        return self.as_matrix(q)

    def hat(self, xi):
        u, v, w, r = _floats(xi)
        return np.array([[0.0, -r, 0.0, u], [r, 0.0, 0.0, v], [0.0, 0.0, 0.0, w],
                         [0.0, 0.0, 0.0, 0.0]])

    def vee(self, X):
        return np.array([X[0][3], X[1][3], X[2][3], X[1][0]], dtype=float)

    def adjoint(self, q):
        x, y, z, c, s = _floats(q)
        return np.array([[c, -s, 0.0, y], [s, c, 0.0, -x], [0.0, 0.0, 1.0, 0.0],
                         [0.0, 0.0, 0.0, 1.0]])

    def ad(self, xi):
        u, v, w, r = _floats(xi)
        return np.array([[0.0, -r, 0.0, v], [r, 0.0, 0.0, -u], [0.0, 0.0, 0.0, 0.0],
                         [0.0, 0.0, 0.0, 0.0]])

    def ad_tilde(self, p):
        p1, p2, _, _ = _floats(p)
        return np.array([[0.0, 0.0, 0.0, -p2], [0.0, 0.0, 0.0, p1], [0.0, 0.0, 0.0, 0.0],
                         [p2, -p1, 0.0, 0.0]])

    def dexp(self, xi):
        u, v, w, r = _floats(xi)
        d, k, e1, e2 = planar_dexp(u, v, r)
        return np.array([[d, -k, 0.0, e1], [k, d, 0.0, e2], [0.0, 0.0, 1.0, 0.0],
                         [0.0, 0.0, 0.0, 1.0]])

    def dexp_inv(self, xi):
        u, v, w, r = _floats(xi)
        d, k, e1, e2 = planar_dexp_inv(u, v, r)
        return np.array([[d, -k, 0.0, e1], [k, d, 0.0, e2], [0.0, 0.0, 1.0, 0.0],
                         [0.0, 0.0, 0.0, 1.0]])

    def random(self, rng):
        x, y, z = rng.standard_normal(3).tolist()
        t = rng.uniform(-math.pi, math.pi)
        return np.array([x, y, z, math.cos(t), math.sin(t)])


Schoenflies = _Schoenflies()
