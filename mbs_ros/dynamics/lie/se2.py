"""SE(2): q = [x, y, cos t, sin t], xi = [u, v, r] (body surge, sway, yaw rate)."""

from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.lie._base import LieGroup, _floats, _readonly, cos_coeff, dexp_inv_coeffs, sin_coeff, sinc


def planar_exp(u: float, v: float, r: float) -> tuple:
    """(x, y, cos r, sin r) of exp([u, v, r]): translation [[S, -rB], [rB, S]] [u, v],
    S = sin r / r, rB = (1 - cos r)/r."""
    S = sinc(r)
    rB = r * cos_coeff(r)
    return (S * u - rB * v, rB * u + S * v, math.cos(r), math.sin(r))


def planar_log(x: float, y: float, c: float, s: float) -> tuple:
    """(u, v, r), r = atan2(s, c) in (-pi, pi]; V^-1 = [[hc, r/2], [-r/2, hc]],
    hc = (r/2) cot(r/2) (exact at 0 and at pi, where hc = 0)."""
    r = math.atan2(s, c)
    hc = dexp_inv_coeffs(r)[1]
    h = 0.5 * r
    return (hc * x + h * y, -h * x + hc * y, r)


def planar_dexp(u: float, v: float, r: float) -> tuple:
    """Entries of I + B ad + C ad^2, ad = [[0, -r, v], [r, 0, -u], [0, 0, 0]] (min. polynomial
    z(z^2 + r^2), as for so(3)); returned as (d, Br, Bv + Cru, -Bu + Crv), d = 1 - C r^2 = sinc r."""
    B, C = cos_coeff(r), sin_coeff(r)
    return (sinc(r), B * r, B * v + C * r * u, -B * u + C * r * v)


def planar_dexp_inv(u: float, v: float, r: float) -> tuple:
    """Entries of I - ad/2 + a ad^2 (seed 001 eq. 11's coefficient a), same layout as planar_dexp."""
    a, hc = dexp_inv_coeffs(r)
    return (hc, -0.5 * r, -0.5 * v + a * r * u, 0.5 * u + a * r * v)


class _SE2(LieGroup):
    """SE(2) as 3x3 [[R(t), p], [0, 1]]; the subgroup of SE(3) with H = [e1 e2 e6] (seed 004 eq. 77).
    ad_[u,v,r] = [[0, -r, v], [r, 0, -u], [0, 0, 0]], ad~_p = [[0, 0, -p2], [0, 0, p1], [p2, -p1, 0]]
    (eq. 83), Ad = [[R, (y, -x)^T], [0, 1]]."""

    name = "se2"
    nq = 4
    dim = 3
    matrix_dim = 3
    H = _readonly(np.eye(6)[:, [0, 1, 5]])

    def identity(self):
        return np.array([0.0, 0.0, 1.0, 0.0])

    def compose(self, a, b):
        x1, y1, c1, s1 = _floats(a)
        x2, y2, c2, s2 = _floats(b)
        return np.array([x1 + c1 * x2 - s1 * y2, y1 + s1 * x2 + c1 * y2,
                         c1 * c2 - s1 * s2, s1 * c2 + c1 * s2])

    def inverse(self, a):
        x, y, c, s = _floats(a)
        return np.array([-c * x - s * y, s * x - c * y, c, -s])

    def normalize(self, q):
        x, y, c, s = _floats(q)
        n = 1.0 / math.hypot(c, s)
        return np.array([x, y, c * n, s * n])

    def exp(self, xi):
        return np.array(planar_exp(*_floats(xi)))

    def log(self, q):
        return np.array(planar_log(*_floats(q)))

    def integrate(self, q, xi):
        x1, y1, c1, s1 = _floats(q)
        x2, y2, c2, s2 = planar_exp(*_floats(xi))
        c, s = c1 * c2 - s1 * s2, s1 * c2 + c1 * s2
        n = 1.0 / math.hypot(c, s)
        return np.array([x1 + c1 * x2 - s1 * y2, y1 + s1 * x2 + c1 * y2, c * n, s * n])

    def as_matrix(self, q):
        x, y, c, s = _floats(q)
        return np.array([[c, -s, x], [s, c, y], [0.0, 0.0, 1.0]])

    def from_matrix(self, T):
        T = np.asarray(T, dtype=float)
        return self.normalize(np.array([T[0, 2], T[1, 2], T[0, 0], T[1, 0]]))

    def pose_matrix(self, q):
        x, y, c, s = _floats(q)
        return np.array([[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, 0.0],
                         [0.0, 0.0, 0.0, 1.0]])

    def hat(self, xi):
        u, v, r = _floats(xi)
        return np.array([[0.0, -r, u], [r, 0.0, v], [0.0, 0.0, 0.0]])

    def vee(self, X):
        return np.array([X[0][2], X[1][2], X[1][0]], dtype=float)

    def adjoint(self, q):
        x, y, c, s = _floats(q)
        return np.array([[c, -s, y], [s, c, -x], [0.0, 0.0, 1.0]])

    def ad(self, xi):
        u, v, r = _floats(xi)
        return np.array([[0.0, -r, v], [r, 0.0, -u], [0.0, 0.0, 0.0]])

    def ad_tilde(self, p):
        p1, p2, _ = _floats(p)
        return np.array([[0.0, 0.0, -p2], [0.0, 0.0, p1], [p2, -p1, 0.0]])

    def dexp(self, xi):
        u, v, r = _floats(xi)
        d, k, e1, e2 = planar_dexp(u, v, r)
        return np.array([[d, -k, e1], [k, d, e2], [0.0, 0.0, 1.0]])

    def dexp_inv(self, xi):
        u, v, r = _floats(xi)
        d, k, e1, e2 = planar_dexp_inv(u, v, r)
        return np.array([[d, -k, e1], [k, d, e2], [0.0, 0.0, 1.0]])

    def random(self, rng):
        x, y = rng.standard_normal(2).tolist()
        t = rng.uniform(-math.pi, math.pi)
        return np.array([x, y, math.cos(t), math.sin(t)])


SE2 = _SE2()
