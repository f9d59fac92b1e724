"""Compiled control laws: the computed-torque and PD + gravity laws of :mod:`mbs_ros.controllers.laws` as numba
kernels, for a base on SE(3) or a fixed base with revolute and prismatic joints.

The same equations, in the same order, as the numpy reference (``laws.py`` keeps it and uses it for every other
space): the geometric error ``e = log(q⁻¹ q_d)`` (quaternion log, ``v = J(ω)⁻¹ p``), ``Ad_E``, the twist error
``ε = Ad_E v_d − v``, ``ė = dexp(e)⁻¹ ε`` (seed 001 eq. 10 blockwise), the derivative of ``dexp`` by the block
triangular series of :mod:`mbs_ros.controllers.space` (Higham, *Functions of Matrices*, thm 3.6), and the torque
``τ = M(q) a + C(q, v) v + g(q)`` as one RNEA pass ``rnea(q, v, a)`` (Featherstone 2008, table 5.1) instead of
building M: a period's law costs one recursion, and agrees with the reference to rounding. Why compiled: the
headless campaigns run the law once per control period, where Python's per-call overhead was most of its cost.
:func:`reference_segment` evaluates one segment of a waypoint reference
(:class:`~mbs_ros.controllers.reference.Reference`) on SE(3) or on plain coordinates the same way.
"""
from __future__ import annotations

import math
import time

import numpy as np

from mbs_ros.dynamics.kernels.compiled import _f64
from mbs_ros.dynamics.kernels.jit import AVAILABLE, jit
from mbs_ros.dynamics.kernels.multibody import _rnea_core
from mbs_ros.dynamics.kernels.layout import IM_HDR
from mbs_ros.dynamics.kernels.spatial import (_beta, _cos_coeff, _cross, _dexp_inv_coeffs, _quat_to_R, _series, _series_table,
                             _sin_coeff, _sinc)
from mbs_ros.dynamics.lie import SE3_DEXP_C3_SERIES, SE3_DEXP_C4_SERIES

__all__ = ["AVAILABLE", "CompiledComputedTorque", "CompiledPDGravity", "compiled_law_support", "reference_segment",
           "warm_up"]

_C3_TMAX, _C3_TAB, _C3_LEN = _series_table(SE3_DEXP_C3_SERIES)
_C4_TMAX, _C4_TAB, _C4_LEN = _series_table(SE3_DEXP_C4_SERIES)
_SERIES_MAX_TERMS = 400
_FIXED, _SE3 = 0, 1


@jit
def _se3_dexp_coeffs(theta):
    t = abs(theta)
    t2 = theta * theta
    ok3, c3 = _series(_C3_TMAX, _C3_TAB, _C3_LEN, t, t2)
    if ok3:
        ok4, c4 = _series(_C4_TMAX, _C4_TAB, _C4_LEN, t, t2)
        return c3, c4
    s, c = math.sin(theta), math.cos(theta)
    t4 = theta ** 4
    return (2.0 - theta * s - 2.0 * c) / (2.0 * t4), (2.0 * theta - 3.0 * s + theta * c) / (2.0 * t4 * theta)


@jit
def _poly_matrix(w, v, d, k1, k2, e, m1, m2, m3, m4, out):
    """out (6×6) = [[TL, TR], [0, TL]], TL = d I + k1 ŵ + k2 w wᵀ, TR = e I + m1 v̂ + m2 ŵ + m3 (v wᵀ + w vᵀ)
    + m4 w wᵀ (``lie.se3._se3_poly_matrix``)."""
    wx, wy, wz = w[0], w[1], w[2]
    vx, vy, vz = v[0], v[1], v[2]
    xx, yy, zz = k2 * wx * wx + d, k2 * wy * wy + d, k2 * wz * wz + d
    xy, xz, yz = k2 * wx * wy, k2 * wx * wz, k2 * wy * wz
    a0, a1, a2 = k1 * wx, k1 * wy, k1 * wz
    sx, sy, sz = m1 * vx + m2 * wx, m1 * vy + m2 * wy, m1 * vz + m2 * wz
    Sxx = e + 2.0 * m3 * vx * wx + m4 * wx * wx
    Syy = e + 2.0 * m3 * vy * wy + m4 * wy * wy
    Szz = e + 2.0 * m3 * vz * wz + m4 * wz * wz
    Sxy = m3 * (vx * wy + wx * vy) + m4 * wx * wy
    Sxz = m3 * (vx * wz + wx * vz) + m4 * wx * wz
    Syz = m3 * (vy * wz + wy * vz) + m4 * wy * wz
    TL = ((xx, xy - a2, xz + a1), (xy + a2, yy, yz - a0), (xz - a1, yz + a0, zz))
    TR = ((Sxx, Sxy - sz, Sxz + sy), (Sxy + sz, Syy, Syz - sx), (Sxz - sy, Syz + sx, Szz))
    for i in range(3):
        for j in range(3):
            out[i, j] = TL[i][j]
            out[i, 3 + j] = TR[i][j]
            out[3 + i, j] = 0.0
            out[3 + i, 3 + j] = TL[i][j]


@jit
def _se3_dexp(xi, out):
    """dexp(ξ) of SE(3) (``lie.se3.se3_dexp``)."""
    v, w = xi[:3], xi[3:6]
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = math.sqrt(t2)
    B, C = _cos_coeff(theta), _sin_coeff(theta)
    c3, c4 = _se3_dexp_coeffs(theta)
    s2 = -2.0 * (w[0] * v[0] + w[1] * v[1] + w[2] * v[2])
    _poly_matrix(w, v, _sinc(theta), B, C, s2 * (C - t2 * c4), B, s2 * c3, C, s2 * c4, out)


@jit
def _se3_dexp_inv(xi, out):
    """dexp(ξ)⁻¹ of SE(3), seed 001 eq. 10 (``lie.se3.se3_dexp_inv``)."""
    v, w = xi[:3], xi[3:6]
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = math.sqrt(t2)
    a, u = _dexp_inv_coeffs(theta)
    beta = _beta(theta, a, u)
    s2 = -2.0 * (w[0] * v[0] + w[1] * v[1] + w[2] * v[2])
    _poly_matrix(w, v, u, -0.5, a, s2 * (a - t2 * beta), -0.5, 0.0, a, s2 * beta, out)


@jit
def _quat_rotate(x, y, z, w, vx, vy, vz):
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    return vx + w * tx + y * tz - z * ty, vy + w * ty + z * tx - x * tz, vz + w * tz + x * ty - y * tx


@jit
def _se3_error(q, qd, Ad, e):
    """Ad (6×6) = Ad_E and e[:6] = log(E) for E = q⁻¹ q_d (base blocks; ``SE3.compose(SE3.inverse(q), q_d)``,
    ``SE3.log``, ``SE3.adjoint``)."""
    qx, qy, qz, qw = -q[3], -q[4], -q[5], q[6]
    r0, r1, r2 = _quat_rotate(qx, qy, qz, qw, q[0], q[1], q[2])
    s0, s1, s2 = _quat_rotate(qx, qy, qz, qw, qd[0], qd[1], qd[2])
    px, py, pz = -r0 + s0, -r1 + s1, -r2 + s2
    bx, by, bz, bw = qd[3], qd[4], qd[5], qd[6]
    ex = qw * bx + qx * bw + qy * bz - qz * by
    ey = qw * by - qx * bz + qy * bw + qz * bx
    ez = qw * bz + qx * by - qy * bx + qz * bw
    ew = qw * bw - qx * bx - qy * by - qz * bz
    # quaternion log (lie._base.quat_log)
    lx, ly, lz, lw = ex, ey, ez, ew
    if lw < 0.0:
        lx, ly, lz, lw = -lx, -ly, -lz, -lw
    n = math.sqrt(lx * lx + ly * ly + lz * lz)
    if n < 1e-8 * lw:
        r2_ = (n / lw) ** 2
        k = 2.0 / lw * (1.0 - r2_ / 3.0)
    else:
        k = 2.0 * math.atan2(n, lw) / n
    wx, wy, wz = k * lx, k * ly, k * lz
    a = _dexp_inv_coeffs(math.sqrt(wx * wx + wy * wy + wz * wz))[0]
    cx, cy, cz = _cross(wx, wy, wz, px, py, pz)
    ccx, ccy, ccz = _cross(wx, wy, wz, cx, cy, cz)
    e[0], e[1], e[2] = px - 0.5 * cx + a * ccx, py - 0.5 * cy + a * ccy, pz - 0.5 * cz + a * ccz
    e[3], e[4], e[5] = wx, wy, wz
    R = np.empty((3, 3))
    _quat_to_R(ex, ey, ez, ew, R)
    P = ((0.0, -pz, py), (pz, 0.0, -px), (-py, px, 0.0))
    for i in range(3):
        for j in range(3):
            Ad[i, j] = R[i, j]
            Ad[3 + i, 3 + j] = R[i, j]
            Ad[3 + i, j] = 0.0
            Ad[i, 3 + j] = P[i][0] * R[0, j] + P[i][1] * R[1, j] + P[i][2] * R[2, j]


@jit
def _ad_matrix(xi, out):
    """out (6×6) = ad_ξ = [[ω̂, v̂], [0, ω̂]] (``SE3.ad``)."""
    vx, vy, vz, wx, wy, wz = xi[0], xi[1], xi[2], xi[3], xi[4], xi[5]
    W = ((0.0, -wz, wy), (wz, 0.0, -wx), (-wy, wx, 0.0))
    V = ((0.0, -vz, vy), (vz, 0.0, -vx), (-vy, vx, 0.0))
    for i in range(3):
        for j in range(3):
            out[i, j] = W[i][j]
            out[i, 3 + j] = V[i][j]
            out[3 + i, j] = 0.0
            out[3 + i, 3 + j] = W[i][j]


@jit
def _dexp_derivative(xi, dxi, x, transpose, out):
    """out[:6] = (D dexp(ξ)[δξ]) x (its transpose with ``transpose``): ``ConfigurationSpace.dexp_derivative``'s
    series Σ_k X^k w/(k+1)! with X = [[ad_ξ, ad_δξ], [0, ad_ξ]] (transposed), stopped after two terms below 1e-17
    of the sum."""
    A = np.empty((6, 6))
    B = np.empty((6, 6))
    _ad_matrix(xi, A)
    _ad_matrix(dxi, B)
    X = np.zeros((12, 12))
    term = np.zeros(12)
    for i in range(6):
        for j in range(6):
            if transpose:
                X[i, j] = A[j, i]
                X[6 + i, j] = B[j, i]
                X[6 + i, 6 + j] = A[j, i]
            else:
                X[i, j] = A[i, j]
                X[i, 6 + j] = B[i, j]
                X[6 + i, 6 + j] = A[i, j]
    for i in range(6):
        term[i if transpose else 6 + i] = x[i]
    total = term.copy()
    nxt = np.empty(12)
    negligible = 0
    converged = False
    for k in range(1, _SERIES_MAX_TERMS):
        inv = 1.0 / (k + 1)
        for i in range(12):
            acc = 0.0
            for j in range(12):
                acc += X[i, j] * term[j]
            nxt[i] = acc * inv
        tt = 0.0
        TT = 0.0
        for i in range(12):
            term[i] = nxt[i]
            total[i] += nxt[i]
            tt += nxt[i] * nxt[i]
        for i in range(12):
            TT += total[i] * total[i]
        if tt <= 1e-34 * TT:
            negligible += 1
            if negligible == 2:
                converged = True
                break
        else:
            negligible = 0
    if not converged:
        raise FloatingPointError("dexp derivative series did not converge")
    for i in range(6):
        out[i] = total[6 + i] if transpose else total[i]


@jit
def _mv(M, x, out, n):
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * x[j]
        out[i] = acc


@jit
def _errors(code, q, v, qd, vd, e, eps, edot, Ad):
    """e, ε, ė and Ad_E (``_Law._errors``); joints plain."""
    nv = v.shape[0]
    nqb, nvb = (7, 6) if code == _SE3 else (0, 0)
    for k in range(nv - nvb):
        e[nvb + k] = qd[nqb + k] - q[nqb + k]
        eps[nvb + k] = vd[nvb + k] - v[nvb + k]
        edot[nvb + k] = eps[nvb + k]
    if code == _SE3:
        _se3_error(q, qd, Ad, e)
        w = np.empty(6)
        _mv(Ad, vd, w, 6)
        for r in range(6):
            eps[r] = w[r] - v[r]
        D = np.empty((6, 6))
        _se3_dexp_inv(e, D)
        _mv(D, eps, edot, 6)


@jit
def _ct_acceleration(code, q, v, qd, vd, ad, kp, kd, acc):
    """The commanded acceleration of computed torque (``ComputedTorque._acceleration``)."""
    nv = v.shape[0]
    e = np.empty(nv)
    eps = np.empty(nv)
    edot = np.empty(nv)
    Ad = np.empty((6, 6))
    _errors(code, q, v, qd, vd, e, eps, edot, Ad)
    for k in range(nv):
        acc[k] = ad[k]
    if code == _SE3:
        t = np.empty(6)
        _mv(Ad, ad, acc, 6)
        adv = np.empty((6, 6))
        _ad_matrix(v, adv)
        _mv(adv, eps, t, 6)
        dd = np.empty(6)
        _dexp_derivative(e, edot, edot, False, dd)
        for r in range(6):
            acc[r] = acc[r] - t[r] - dd[r]
    g = np.empty(nv)
    g2 = np.empty(nv)
    _mv(kd, edot, g, nv)
    _mv(kp, e, g2, nv)
    for k in range(nv):
        g[k] += g2[k]
    if code == _SE3:
        D = np.empty((6, 6))
        _se3_dexp(e, D)
        _mv(D, g, g2, 6)
        for r in range(6):
            g[r] = g2[r]
    for k in range(nv):
        acc[k] += g[k]


@jit
def _ct_torque(im, fm, I6, code, q, v, qd, vd, ad, kp, kd, tau):
    """τ = rnea(q, v, a) with a the computed-torque acceleration."""
    acc = np.empty(v.shape[0])
    _ct_acceleration(code, q, v, qd, vd, ad, kp, kd, acc)
    _rnea_core(im, fm, I6, q, v, acc, np.empty((1, 6)), 3, tau, np.empty((im[IM_HDR, 1], 6)))


@jit
def _pd_torque(im, fm, I6, code, q, v, qd, vd, kp, kd, tau):
    """τ = dexp(e)⁻ᵀ K_p e + K_d ε + g(q) (``PDGravity.__call__``)."""
    nv = v.shape[0]
    e = np.empty(nv)
    eps = np.empty(nv)
    edot = np.empty(nv)
    Ad = np.empty((6, 6))
    _errors(code, q, v, qd, vd, e, eps, edot, Ad)
    kpe = np.empty(nv)
    _mv(kp, e, kpe, nv)
    if code == _SE3:
        D = np.empty((6, 6))
        _se3_dexp_inv(e, D)
        t = np.empty(6)
        for i in range(6):
            acc = 0.0
            for j in range(6):
                acc += D[j, i] * kpe[j]
            t[i] = acc
        for i in range(6):
            kpe[i] = t[i]
    kde = np.empty(nv)
    _mv(kd, eps, kde, nv)
    z = np.zeros(nv)
    _rnea_core(im, fm, I6, q, z, z, np.empty((1, 6)), 0, tau, np.empty((im[IM_HDR, 1], 6)))
    for k in range(nv):
        tau[k] = kpe[k] + kde[k] + tau[k]


def compiled_law_support(model) -> str:
    """Why ``model`` cannot use the compiled laws, or "" when it can: the compiled backend, a base on SE(3) or
    fixed (including one rigid body on SE(3)), and only revolute and prismatic joints (nq = nv on the joints)."""
    if not AVAILABLE:
        return "numba is unavailable (or MBS_BACKEND=numpy)"
    kernels = getattr(model, "compiled_kernels", None)
    if kernels is None:
        return "the model has no compiled backend (numpy backend or mimic joints)"
    if model.base not in ("se3", "fixed"):
        return f"the compiled laws cover se3 and fixed bases, not {model.base}"
    nqb, nvb = (7, 6) if model.base == "se3" else (0, 0)
    if model.nq - nqb != model.nv - nvb:
        return "continuous joints (two coordinates per joint) are not compiled"
    return ""


class _CompiledLaw:
    """Inputs checked as the numpy laws do; the kernel called with C-contiguous float64 arrays."""

    def __init__(self, model, kp, kd):
        reason = compiled_law_support(model)
        if reason:
            raise ValueError(f"no compiled law for this model: {reason}")
        c = model.compiled_kernels
        self.im, self.fm, self.I6 = c.im, c.fm, c.I6
        self.code = _SE3 if model.base == "se3" else _FIXED
        self.nq, self.nv = model.nq, model.nv
        self.kp = np.ascontiguousarray(kp, dtype=np.float64)
        self.kd = np.ascontiguousarray(kd, dtype=np.float64)


class CompiledComputedTorque(_CompiledLaw):
    """``(q, v, q_d, v_d, a_d) -> τ`` of :class:`~mbs_ros.controllers.laws.ComputedTorque` (module docstring)."""

    def __call__(self, q, v, q_d, v_d, a_d) -> np.ndarray:
        tau = np.empty(self.nv)
        _ct_torque(self.im, self.fm, self.I6, self.code, _f64(q, self.nq), _f64(v, self.nv), _f64(q_d, self.nq),
                   _f64(v_d, self.nv), _f64(a_d, self.nv), self.kp, self.kd, tau)
        return tau

    def acceleration(self, q, v, q_d, v_d, a_d) -> np.ndarray:
        acc = np.empty(self.nv)
        _ct_acceleration(self.code, _f64(q, self.nq), _f64(v, self.nv), _f64(q_d, self.nq), _f64(v_d, self.nv),
                         _f64(a_d, self.nv), self.kp, self.kd, acc)
        return acc


class CompiledPDGravity(_CompiledLaw):
    """``(q, v, q_d, v_d) -> τ`` of :class:`~mbs_ros.controllers.laws.PDGravity`."""

    def __call__(self, q, v, q_d, v_d) -> np.ndarray:
        tau = np.empty(self.nv)
        _pd_torque(self.im, self.fm, self.I6, self.code, _f64(q, self.nq), _f64(v, self.nv), _f64(q_d, self.nq),
                   _f64(v_d, self.nv), self.kp, self.kd, tau)
        return tau


@jit
def _se3_integrate(q, xi, out):
    """out = q·exp(ξ) on SE(3) (``SE3.integrate``: p + R J(ω) v, the quaternion times exp(ω), renormalised)."""
    vx, vy, vz, wx, wy, wz = xi[0], xi[1], xi[2], xi[3], xi[4], xi[5]
    theta = math.sqrt(wx * wx + wy * wy + wz * wz)
    B, C = _cos_coeff(theta), _sin_coeff(theta)
    cx, cy, cz = _cross(wx, wy, wz, vx, vy, vz)
    ccx, ccy, ccz = _cross(wx, wy, wz, cx, cy, cz)
    t0, t1, t2 = vx + B * cx + C * ccx, vy + B * cy + C * ccy, vz + B * cz + C * ccz
    x, y, z, w = q[3], q[4], q[5], q[6]
    r0, r1, r2 = _quat_rotate(x, y, z, w, t0, t1, t2)
    out[0], out[1], out[2] = q[0] + r0, q[1] + r1, q[2] + r2
    h = 0.5 * theta
    k = 0.5 * _sinc(h)
    bx, by, bz, bw = k * wx, k * wy, k * wz, math.cos(h)
    qx = w * bx + x * bw + y * bz - z * by
    qy = w * by - x * bz + y * bw + z * bx
    qz = w * bz + x * by - y * bx + z * bw
    qw = w * bw - x * bx - y * by - z * bz
    n = 1.0 / math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    out[3], out[4], out[5], out[6] = qx * n, qy * n, qz * n, qw * n


@jit
def _reference_segment(code, p0, c, tau, T, q, v, a):
    """One segment of ``Reference.__call__``: φ, φ̇, φ̈ of the polynomial ``c`` (deg + 1, nv) in τ = (t − t_i)/T,
    then q = p0·exp(φ), v = dexp(−φ) φ̇, a = dexp(−φ) φ̈ + (D dexp(−φ)[−φ̇]) φ̇ (SE(3), code 1) or q = p0 + φ,
    v = φ̇, a = φ̈ (plain coordinates, code 0)."""
    nk, nv = c.shape[0], c.shape[1]
    phi = np.zeros(nv)
    phid = np.zeros(nv)
    phidd = np.zeros(nv)
    for k in range(nk):
        p = tau ** k
        dp = k * tau ** (k - 1) if k >= 1 else 0.0
        ddp = k * (k - 1) * tau ** (k - 2) if k >= 2 else 0.0
        for j in range(nv):
            phi[j] += p * c[k, j]
            phid[j] += dp * c[k, j]
            phidd[j] += ddp * c[k, j]
    for j in range(nv):
        phid[j] = phid[j] / T
        phidd[j] = phidd[j] / (T * T)
    if code == _SE3:
        _se3_integrate(p0, phi, q)
        m = np.empty(6)
        mphid = np.empty(6)
        for j in range(6):
            m[j] = -phi[j]
            mphid[j] = -phid[j]
        D = np.empty((6, 6))
        _se3_dexp(m, D)
        _mv(D, phid, v, 6)
        _mv(D, phidd, a, 6)
        dd = np.empty(6)
        _dexp_derivative(m, mphid, phid, False, dd)
        for j in range(6):
            a[j] += dd[j]
    else:
        for j in range(nv):
            q[j] = p0[j] + phi[j]
            v[j] = phid[j]
            a[j] = phidd[j]


def reference_segment(se3: bool, p0, coeffs, tau: float, T: float):
    """``(q, v, a)`` of one reference segment (:func:`_reference_segment`): ``se3`` for a base reference on SE(3)
    (nq 7, nv 6), else plain coordinates; ``p0`` the segment's first waypoint, ``coeffs`` its polynomial."""
    nv = coeffs.shape[1]
    q, v, a = np.empty(p0.shape[0]), np.empty(nv), np.empty(nv)
    _reference_segment(_SE3 if se3 else _FIXED, _f64(p0), _f64(coeffs), float(tau), float(T), q, v, a)
    return q, v, a


def warm_up() -> float:
    """Compile (or load from numba's on-disk cache) these kernels by calling each once on the UVMS-like warm-up
    tree of :func:`mbs_ros.dynamics.kernels.compiled.warm_up`; returns the seconds it took."""
    t0 = time.perf_counter()
    if not AVAILABLE:
        return 0.0
    from mbs_ros.dynamics.kernels.compiled import CompiledModel
    from mbs_ros.dynamics.model.tree import build_tree
    from mbs_ros.dynamics.model.urdf import parse_urdf

    urdf = ('<robot name="warm"><link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"'
            ' ixz="0" iyz="0"/></inertial></link><link name="c"><inertial><mass value="1"/><inertia ixx="1" iyy="1"'
            ' izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j" type="revolute"><parent link="b"/>'
            '<child link="c"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
            '</robot>')
    c = CompiledModel("se3", build_tree(parse_urdf(urdf, warn=False), "se3"), np.array([0.0, 0.0, -9.81]))
    q = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.1])
    v, K, tau = np.zeros(7), np.eye(7), np.empty(7)
    for code in (_FIXED, _SE3):
        _ct_torque(c.im, c.fm, c.I6, code, q, v, q, v, v, K, K, tau)
        _pd_torque(c.im, c.fm, c.I6, code, q, v, q, v, K, K, tau)
    coeffs = np.zeros((6, 6))
    reference_segment(True, q[:7].copy(), coeffs, 0.5, 1.0)
    reference_segment(False, np.zeros(6), coeffs, 0.5, 1.0)
    return time.perf_counter() - t0
