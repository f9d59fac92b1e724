"""The compiled Munthe-Kaas step (seed 001 eqs. 35-37) as one call: the exponential update on every base group,
``dexp⁻¹`` for the stages, the RK stages on the forward dynamics, the loops over steps (:func:`_simulate_core`,
:func:`_advance_core`), and the bodies' poses, energies and all terms at a state. The Python side:
:class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel`.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit
from mbs_ros.dynamics.kernels.multibody import _aba_alloc, _aba_work, _crba_core, _passive_core, _rnea_core
from mbs_ros.dynamics.kernels.layout import FM_ARM, FM_S, F_CURRENT, F_ELEMS, F_JOINTS, IM_BODY, IM_HDR
from mbs_ros.dynamics.kernels.spatial import (_alloc, _base_columns, _base_pose, _base_velocity, _beta, _cos_coeff, _cross,
                             _dexp_inv_coeffs, _dot6, _joint_poses, _mv6, _sin_coeff, _sinc, _to_child)

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
    code, nb = im[IM_HDR, 0], im[IM_HDR, 1]
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
        jt, iq, iv = im[IM_BODY + k, 1], im[IM_BODY + k, 2], im[IM_BODY + k, 3]
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
    code, nv, nvb = im[IM_HDR, 0], im[IM_HDR, 4], im[IM_HDR, 6]
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
    nvb = im[IM_HDR, 6]
    if nvb == 0:
        return
    Rw = np.empty((3, 3))
    pw = np.empty(3)
    Sb = np.zeros((6, 6))
    Wb = np.empty(6)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
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
    nq, nv = im[IM_HDR, 3], im[IM_HDR, 4]
    return (np.empty((ns, nv)), np.empty((ns, nv)), np.empty(nv), np.empty(nv), np.empty(nq), np.empty(nv),
            np.empty(nv), np.empty(1), np.empty((1, 6)), _aba_alloc(im[IM_HDR, 1]))


@jit
def _step_work(im, fm, I6, q, v, taus, W, has_W, dt, A, b, q_out, v_out, sw):
    """:func:`_step_core` in the workspace ``sw`` of :func:`_step_alloc`."""
    nq, nv = im[IM_HDR, 3], im[IM_HDR, 4]
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
        if im[IM_HDR, 7] & (F_CURRENT | F_ELEMS | F_JOINTS):
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
    nb = im[IM_HDR, 1]
    Rr, pr, Rw, pw, Sb, vec, tmp = _alloc(nb)
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
    for i in range(3):
        for j in range(3):
            T[0, i, j] = Rw[i, j]
        T[0, i, 3] = pw[i]
    T[0, 3, 0], T[0, 3, 1], T[0, 3, 2], T[0, 3, 3] = 0.0, 0.0, 0.0, 1.0
    for k in range(1, nb):
        lam = im[IM_BODY + k, 0]
        for i in range(3):
            for j in range(3):
                T[k, i, j] = T[lam, i, 0] * Rr[k, 0, j] + T[lam, i, 1] * Rr[k, 1, j] + T[lam, i, 2] * Rr[k, 2, j]
            T[k, i, 3] = T[lam, i, 0] * pr[k, 0] + T[lam, i, 1] * pr[k, 1] + T[lam, i, 2] * pr[k, 2] + T[lam, i, 3]
        T[k, 3, 0], T[k, 3, 1], T[k, 3, 2], T[k, 3, 3] = 0.0, 0.0, 0.0, 1.0


@jit
def _twists_in_base(im, fm, q, v, Rw, pw, V, Rb, pb):
    """The forward pass of :func:`_energy_core` and :func:`_momentum_core`: the base pose (Rw, pw), the body-frame
    twists V (the RNEA's forward pass) and the bodies' placements in the base frame (Rb, pb); returns the joints'
    armature energy ½ Σ armature v_j²."""
    nb = im[IM_HDR, 1]
    Rr, pr, Sb = np.empty((nb, 3, 3)), np.empty((nb, 3)), np.zeros((6, 6))
    _joint_poses(im, fm, q, Rr, pr)
    _base_pose(im[IM_HDR, 0], q, Rw, pw)
    _base_columns(im, Rw, Sb)
    _base_velocity(im, Sb, v, V[0])
    for i in range(3):
        for j in range(3):
            Rb[0, i, j] = 1.0 if i == j else 0.0
        pb[0, i] = 0.0
    kin = 0.0
    for i in range(1, nb):
        lam, iv = im[IM_BODY + i, 0], im[IM_BODY + i, 3]
        _to_child(Rr[i], pr[i], V[lam], V[i])
        for r in range(6):
            V[i, r] += fm[i, FM_S + r] * v[iv]
        kin += 0.5 * fm[i, FM_ARM] * v[iv] * v[iv]
        for a in range(3):
            for b in range(3):
                Rb[i, a, b] = Rb[lam, a, 0] * Rr[i, 0, b] + Rb[lam, a, 1] * Rr[i, 1, b] + Rb[lam, a, 2] * Rr[i, 2, b]
            pb[i, a] = Rb[lam, a, 0] * pr[i, 0] + Rb[lam, a, 1] * pr[i, 1] + Rb[lam, a, 2] * pr[i, 2] + pb[lam, a]
    return kin


@jit
def _energy_core(im, fm, I6, mc, q, v, out):
    """out[0] = kinetic energy ½ Σ V_iᵀ I_i V_i + ½ Σ armature v_j² (body-frame twists, the RNEA's forward pass);
    out[1] = −gᵀ Σ m_i c_i, the world centres of mass from the bodies' placements in the base frame (``mc[i]`` =
    [m_i, m_i c_i]), then the base pose (``algorithms.kinetic_energy``, ``potential_energy``)."""
    nb = im[IM_HDR, 1]
    Rw, pw, V, t6 = np.empty((3, 3)), np.empty(3), np.zeros((nb, 6)), np.empty(6)
    Rb = np.empty((nb, 3, 3))
    pb = np.empty((nb, 3))
    kin = _twists_in_base(im, fm, q, v, Rw, pw, V, Rb, pb)
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
def _momentum_core(im, fm, I6, q, v, out):
    """out = the world-frame spatial momentum ``[linear; angular about the world origin]`` = Σ_i Ad*_{T_i} I_i V_i:
    each body's momentum I_i V_i (its frame, linear first) moved to the base frame (``[R f; R n + p × R f]``),
    summed, then to the world by the base pose (``algorithms.multibody.spatial_momentum``; no armature term, as
    there)."""
    nb = im[IM_HDR, 1]
    Rw, pw, V, t6 = np.empty((3, 3)), np.empty(3), np.zeros((nb, 6)), np.empty(6)
    Rb = np.empty((nb, 3, 3))
    pb = np.empty((nb, 3))
    _twists_in_base(im, fm, q, v, Rw, pw, V, Rb, pb)
    h = np.zeros(6)
    for i in range(nb):
        _mv6(I6[i], V[i], t6)
        R, p = Rb[i], pb[i]
        f0 = R[0, 0] * t6[0] + R[0, 1] * t6[1] + R[0, 2] * t6[2]
        f1 = R[1, 0] * t6[0] + R[1, 1] * t6[1] + R[1, 2] * t6[2]
        f2 = R[2, 0] * t6[0] + R[2, 1] * t6[1] + R[2, 2] * t6[2]
        c0, c1, c2 = _cross(p[0], p[1], p[2], f0, f1, f2)
        h[0] += f0
        h[1] += f1
        h[2] += f2
        h[3] += R[0, 0] * t6[3] + R[0, 1] * t6[4] + R[0, 2] * t6[5] + c0
        h[4] += R[1, 0] * t6[3] + R[1, 1] * t6[4] + R[1, 2] * t6[5] + c1
        h[5] += R[2, 0] * t6[3] + R[2, 1] * t6[4] + R[2, 2] * t6[5] + c2
    for a in range(3):
        out[a] = Rw[a, 0] * h[0] + Rw[a, 1] * h[1] + Rw[a, 2] * h[2]
    c0, c1, c2 = _cross(pw[0], pw[1], pw[2], out[0], out[1], out[2])
    out[3] = Rw[0, 0] * h[3] + Rw[0, 1] * h[4] + Rw[0, 2] * h[5] + c0
    out[4] = Rw[1, 0] * h[3] + Rw[1, 1] * h[4] + Rw[1, 2] * h[5] + c1
    out[5] = Rw[2, 0] * h[3] + Rw[2, 1] * h[4] + Rw[2, 2] * h[5] + c2


@jit
def _all_terms_core(im, fm, I6, q, v, M, nle, g):
    """M, C v + g and g in one call (Pinocchio's computeAllTerms' dynamics part)."""
    nb = im[IM_HDR, 1]
    F = np.empty((nb, 6))
    dummy = np.empty((1, 6))
    _crba_core(im, fm, I6, q, M)
    _rnea_core(im, fm, I6, q, v, v, dummy, 1, nle, F)
    _rnea_core(im, fm, I6, q, v, v, dummy, 0, g, F)
