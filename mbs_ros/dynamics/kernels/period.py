"""A lockstep run's control periods in one compiled call: the headless fast path (:mod:`mbs_ros.headless.fast`).

Per period, in the order of the lockstep run and with the same arithmetic as the Python path it replaces
(:mod:`mbs_ros.headless.run`, which calls the nodes' cores): the held commands' generalised force
(``Simulator._build_force``), the period's steps (:func:`~mbs_ros.dynamics.kernels.step._advance_core`, the kernel of
``Simulator.advance``), the joint-limit look (``ContactWorld.limit_free``), the commands' work by the trapezoid
rule and the energy-balance check (``Simulator.advance``), then at the new state the controller's state as it
arrives through odom and joint_states (``reference_input.base_state``/``state_vector``: the quaternion normalised
twice), its references (``Reference.__call__`` with :func:`~mbs_ros.dynamics.kernels.laws._reference_segment`), the computed
torque (:func:`~mbs_ros.dynamics.kernels.laws._ct_torque`), the command limits (``CommandOutput``, ``actuators.saturate_wrench``,
``clip_efforts``), the dynamics node's checks of the command (``Simulator.wrench_command``, ``submit``,
``joint_efforts``) and the period's record (``applied``, ``balance_residual``). Dot products and matrix-vector
products go through ``np.dot`` as numpy's do (the same BLAS routine, so the same bits; a test keeps that true).

Anything the Python path would do differently (a contact step near a joint limit, a fault, a rejected state, a
non-finite command, a failed energy check) is not done here: the kernel stops before that period and says why
(:data:`STOP_REASONS`), and the caller goes on the Python way from there.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.laws import _ct_torque, _reference_segment
from mbs_ros.dynamics.kernels.jit import AVAILABLE, jit
from mbs_ros.dynamics.kernels.multibody import _passive_core
from mbs_ros.dynamics.kernels.step import _advance_core, _energy_core

__all__ = ["AVAILABLE", "STOP_REASONS", "scale_to_norm", "saturate_wrench", "clip_efforts", "unit_quaternion",
           "controller_state", "reference_at", "run_periods"]

#: why :func:`run_periods` stopped, by its return code
STOP_REASONS = ("done", "a step left the runaway bounds (the simulator faults)", "a joint came near its limit (the "
                "contact step takes over)", "the commands' work became non-finite", "the energy-balance check "
                "failed", "the controller rejected the state", "the law or the limits gave a non-finite command")
_DONE, _RUNAWAY, _LIMIT, _WORK, _ENERGY, _REJECTED, _NONFINITE = range(7)


@jit
def scale_to_norm(x, limit, out):
    """``actuators.scale_to_norm`` for a vector of at most 8 entries: ``out`` = x scaled down to norm ``limit``
    along its direction (or x); whether it was."""
    n = x.shape[0]
    total = 0.0
    for i in range(n):
        out[i] = x[i]
        total += abs(x[i])
    if total <= limit * (1.0 - 1e-12):
        return False
    s = 0.0
    for i in range(n):
        s = max(s, abs(x[i]))
    if s == 0.0 or not math.isfinite(limit):
        return False
    u = np.empty(n)
    for i in range(n):
        u[i] = x[i] / s
    n_u = math.sqrt(np.dot(u, u))
    if s <= limit / n_u:
        return False
    f = limit / n_u
    for i in range(n):
        out[i] = u[i] * f
    return True


@jit
def saturate_wrench(W, max_force, max_torque, out):
    """``actuators.saturate_wrench``: ``out`` = W with force and torque each scaled down to their limit; whether
    either was."""
    F, T = np.empty(3), np.empty(3)
    x = np.empty(3)
    for i in range(3):
        x[i] = W[i]
    f_sat = scale_to_norm(x, max_force, F)
    for i in range(3):
        x[i] = W[3 + i]
    t_sat = scale_to_norm(x, max_torque, T)
    for i in range(3):
        out[i], out[3 + i] = F[i], T[i]
    return f_sat or t_sat


@jit
def clip_efforts(e, max_effort, out):
    """``actuators.clip_efforts``: ``out`` = e clipped to ±max_effort; whether any was."""
    n = e.shape[0]
    clip = False
    for i in range(n):
        out[i] = e[i]
        if abs(e[i]) > max_effort[i]:
            clip = True
    if clip:
        for i in range(n):
            out[i] = min(max(e[i], -max_effort[i]), max_effort[i])
    return clip


@jit
def unit_quaternion(quat, lo, hi, out):
    """``reference_input.unit_quaternion``: ``out`` = quat / |quat| (the norm taken after scaling by the largest
    magnitude); False (rejected) unless finite with its norm in [lo, hi]."""
    scale = 0.0
    for i in range(4):
        if not math.isfinite(quat[i]):
            return False
        scale = max(scale, abs(quat[i]))
    if not scale > 0.0:
        return False
    u = np.empty(4)
    for i in range(4):
        u[i] = quat[i] / scale
    n = scale * math.sqrt(np.dot(u, u))
    if not (lo <= n <= hi):
        return False
    for i in range(4):
        out[i] = quat[i] / n
    return True


@jit
def reference_at(code, start, times, positions, coeffs, t_ref, q, v, a):
    """``Reference.__call__`` of a reference held from ``start`` (ns of reference time) at ``t_ref`` (ns): waypoint
    ``times``, ``positions`` and per segment ``coeffs`` (nseg, deg + 1, nv); ``code`` 1 on SE(3), 0 plain."""
    t = (t_ref - start) * 1e-9
    n = times.shape[0]
    if t < times[0] or t >= times[n - 1]:
        row = 0 if t < times[0] else n - 1
        for j in range(q.shape[0]):
            q[j] = positions[row, j]
        for j in range(v.shape[0]):
            v[j] = 0.0
            a[j] = 0.0
        return
    i = 0
    while i + 1 < n and times[i + 1] <= t:  # bisect_right(times, t) - 1
        i += 1
    T = times[i + 1] - times[i]
    tau = (t - times[i]) / T
    _reference_segment(code, positions[i], coeffs[i], tau, T, q, v, a)


@jit
def controller_state(q, v, jstate, max_pos, max_vel, qn_lo, qn_hi, q_c, v_c):
    """The controller's ``(q_c, v_c)`` from the simulator's state as odom and joint_states carry it to the
    controller (``StateView``, ``reference_input.base_state``, ``joint_state``, ``state_vector``) for an SE(3) base
    with ``H = I`` (or a fixed base) and one coordinate per joint: the position as is, the quaternion normalised
    twice (``unit_quaternion``, then ``configuration_from_pose``), the twist ``H v`` (``+ 0.0``: a product by 1 and
    sums of zeros), the joints by ``jstate`` (controller joint j is joint_states entry ``jstate[j]``). False where
    the controller rejects the state (a bound, the quaternion's norm)."""
    nq, nv, nj = q_c.shape[0], v_c.shape[0], jstate.shape[0]
    nqb, nvb = nq - nj, nv - nj
    if nqb == 0:  # a fixed base: the joints alone
        for j in range(nj):
            q_c[j] = q[jstate[j]]
            v_c[j] = v[jstate[j]]
        return _check(q_c, max_pos) and _check(v_c, max_vel)
    quat, quat1 = np.empty(4), np.empty(4)
    for i in range(4):
        quat[i] = q[3 + i]
    if not (_check(q[:3], max_pos) and unit_quaternion(quat, qn_lo, qn_hi, quat1)):
        return False
    for i in range(6):
        v_c[i] = v[i] + 0.0
    if not _check(v_c[:6], max_vel):
        return False
    for j in range(nj):
        q_c[nqb + j] = q[nqb + jstate[j]]
        v_c[nvb + j] = v[nvb + jstate[j]]
    if not (_check(q_c[nqb:], max_pos) and _check(v_c[nvb:], max_vel)):
        return False
    nrm = math.sqrt(np.dot(quat1, quat1))
    for i in range(3):
        q_c[i] = q[i]
    for i in range(4):
        q_c[3 + i] = quat1[i] / nrm
    for i in range(6):
        v_c[i] = v_c[i] + 0.0  # velocity_from_twist: Hᵀ V
    return True


@jit
def _check(x, bound):
    """``reference_input.check_vector``: every component finite and within ±bound."""
    for i in range(x.shape[0]):
        if not abs(x[i]) <= bound:
            return False
    return True


@jit
def _passive_power(im, fm, q, v, taup, pw):
    """``Simulator._passive_power``: ``(v·τ_p without springs, dissipated power)`` at (q, v)."""
    _passive_core(im, fm, q, v, False, taup, pw)
    return np.dot(taup, v), pw[0]


@jit
def _energy(im, fm, I6, mc, q, v, zeros, out):
    """``(kinetic, gravity potential)`` as ``Model.kinetic_energy`` and ``potential_energy`` compute them (the
    latter calls the kernel at zero velocity; its gravity term never reads v, so one call gives both)."""
    _energy_core(im, fm, I6, mc, q, v, out)
    return out[0], out[1]


@jit
def run_periods(sim_arrays, sim_floats, sim_ints, q, v, acc, W, E, lim, ctl_arrays, ctl_floats, refs, ref_ints,
                rec_i, rec_f, rec_sat, row0, row_end):
    """The record's rows ``row0 .. row_end - 1``, each the period that ends at its stamp: ``(row_end, 0)``, or
    ``(row, code)`` where the kernel stopped (:data:`STOP_REASONS`) before that row's period, the state and the
    commands those of the end of row − 1. See :func:`mbs_ros.headless.fast.pack` for the layout of the arguments;
    ``q``, ``v``, ``acc`` (work, energy reference, passive work, dissipated, contact work, k, saturation counts,
    the passive power at the last step's end and whether it is known),
    ``W``, ``E`` (the commands submitted for the next period) are updated at the end of each row."""
    im, fm, I6, mc, A, b, v_caps, s_max_effort = sim_arrays
    dt, max_q, total_mass, s_max_force, s_max_torque = sim_floats
    steps, every, k_reset, t0_ns, dt_ns, passive, has_passive, compensate = sim_ints
    lim_iq, lim_lo, lim_hi = lim
    cim, cfm, cI6, kp, kd, BT, c_max_effort, jtake, jstate = ctl_arrays
    c_max_force, c_max_torque, max_pos, max_vel, qn_lo, qn_hi = ctl_floats
    b_times, b_pos, b_coef, j_times, j_pos, j_coef = refs
    offset, b_start, j_start = ref_ints
    stamps = rec_i
    rec_q, rec_v, rec_qd, rec_vd, rec_tau, rec_tapp, rec_energy = rec_f
    nq, nv = q.shape[0], v.shape[0]
    nj = E.shape[0]
    nvb = nv - nj
    nqb = nq - nj
    floating = nvb > 0  # an SE(3) base (``fast.eligible``), else a fixed one
    qs = np.empty((steps + 1, nq))
    vs = np.empty((steps + 1, nv))
    tau_f = np.empty(nv)
    zeros = np.zeros(nv)
    eout = np.empty(2)
    no_w = np.zeros((1, 6))
    q_c, v_c = np.empty(nq), np.empty(nv)
    q_d, v_d, a_d = np.empty(nq), np.empty(nv), np.empty(nv)
    qb, vb, ab = np.empty(nqb), np.empty(nvb), np.empty(nvb)
    qj, vj, aj = np.empty(nj), np.empty(nj), np.empty(nj)
    tau = np.empty(nv)
    tb = np.empty(nvb)
    W0, W1, W2 = np.empty(6), np.empty(6), np.empty(6)
    ej, E1, data = np.empty(nj), np.empty(nj), np.empty(nj)
    Wn, En = np.empty(6), np.empty(nj)
    taup, pw = np.empty(nv), np.empty(1)
    for row in range(row0, row_end):
        # ---- the period's physics under the held commands (Simulator._build_force, advance)
        k = int(acc[5])
        w_any = False
        for i in range(6):
            if W[i] != 0.0:
                w_any = True
        for i in range(nv):
            tau_f[i] = 0.0
        for j in range(nj):
            tau_f[nvb + j] = E[j]
        if w_any:
            for i in range(nv):
                tau_f[i] = tau_f[i] + (W[i] if i < 6 else 0.0)
        n_in = _advance_core(im, fm, I6, q, v, tau_f, no_w[0], False, dt, A, b, steps, v_caps, max_q, qs, vs)
        if n_in < steps:
            return row, _RUNAWAY
        for s in range(steps + 1):
            for i in range(lim_iq.shape[0]):
                x = qs[s, lim_iq[i]]
                if x <= lim_lo[i] or x >= lim_hi[i]:
                    return row, _LIMIT
        work, passive_work, dissipated = acc[0], acc[2], acc[3]
        pp0, pd0, p_end = acc[8], acc[9], acc[10] != 0.0
        p0 = np.dot(tau_f, vs[0])
        for s in range(steps):
            p1 = np.dot(tau_f, vs[s + 1])
            work = work + 0.5 * dt * (p0 + p1)
            if passive:  # the passive loads' work and what the dissipators took (Simulator._passive_power)
                pp1, pd1 = _passive_power(im, fm, qs[s + 1], vs[s + 1], taup, pw)
                if not p_end:
                    pp0, pd0 = _passive_power(im, fm, qs[s], vs[s], taup, pw)
                passive_work = passive_work + 0.5 * dt * (pp0 + pp1)
                dissipated = dissipated + 0.5 * dt * (pd0 + pd1)
                pp0, pd0, p_end = pp1, pd1, True
            if not math.isfinite(work):
                return row, _WORK
            p0 = p1
            if every > 0 and (k + s + 1 - k_reset) % every == 0:
                kin, grav = _energy(im, fm, I6, mc, qs[s + 1], vs[s + 1], zeros, eout)
                if has_passive:  # potential_energy: gravity + buoyancy + springs (both 0 here)
                    grav = grav + 0.0 + 0.0
                E_now = kin + grav + 0.0
                residual = E_now - acc[1] - work - passive_work - acc[4]
                scale = (abs(acc[1]) + abs(work) + abs(passive_work) + dissipated + abs(acc[4]) + 1.0 * total_mass)
                if not (math.isfinite(residual) and abs(residual) <= 1.0 * scale):
                    return row, _ENERGY
        qn, vn = qs[steps], vs[steps]  # the state at the period's end (kept in q, v once the row is done)
        t = t0_ns + (k + steps) * dt_ns
        # ---- the controller's state from odom and joint_states (base_state, joint_state, state_vector)
        if not controller_state(qn, vn, jstate, max_pos, max_vel, qn_lo, qn_hi, q_c, v_c):
            return row, _REJECTED
        # ---- the references, the law, the limits (controller_core.desired, law_command, CommandOutput)
        t_ref = t - offset
        if floating:
            reference_at(1, b_start, b_times, b_pos, b_coef, t_ref, qb, vb, ab)
        reference_at(0, j_start, j_times, j_pos, j_coef, t_ref, qj, vj, aj)
        for i in range(nqb):
            q_d[i] = qb[i]
        for i in range(nvb):
            v_d[i], a_d[i] = vb[i], ab[i]
        for j in range(nj):
            q_d[nqb + j] = qj[j]
            v_d[nvb + j], a_d[nvb + j] = vj[j], aj[j]
        _ct_torque(cim, cfm, cI6, 1 if floating else 0, q_c, v_c, q_d, v_d, a_d, kp, kd, tau)
        if compensate:  # law_command: minus the controller model's passive forces
            _passive_core(cim, cfm, q_c, v_c, True, taup, pw)
            for i in range(nv):
                tau[i] = tau[i] - taup[i]
        for i in range(nv):
            if not math.isfinite(tau[i]):
                return row, _NONFINITE
        any_b = False
        for i in range(nvb):
            tb[i] = tau[i]
            if tau[i] != 0.0:
                any_b = True
        if any_b:
            Wc = np.dot(BT, tb)
            for i in range(6):
                if not math.isfinite(Wc[i]):
                    return row, _NONFINITE
                W0[i] = Wc[i]
        else:
            for i in range(6):
                W0[i] = 0.0
        sat = saturate_wrench(W0, c_max_force, c_max_torque, W1) if floating else False
        for j in range(nj):
            ej[j] = tau[nvb + j]
        clipped = clip_efforts(ej, c_max_effort, E1)
        # ---- the dynamics node's checks (wrench_command and submit saturate twice, joint_efforts clips)
        sat_w = 0.0
        if floating:
            sat_w = 1.0 if saturate_wrench(W1, s_max_force, s_max_torque, W2) else 0.0
            if saturate_wrench(W2, s_max_force, s_max_torque, Wn):
                sat_w += 1.0
        else:  # no wrench channel: the held wrench stays zero
            for i in range(6):
                Wn[i] = 0.0
        for j in range(nj):
            data[j] = 0.0
        for j in range(nj):
            data[jtake[j]] = E1[j]
        sat_j = 1.0 if clip_efforts(data, s_max_effort, En) else 0.0
        # ---- the record (HeadlessRun's row; applied(), balance_residual())
        stamps[row] = t
        for i in range(nq):
            rec_q[row, i] = qn[i]
            rec_qd[row, i] = q_d[i]
        for i in range(nv):
            rec_v[row, i] = vn[i]
            rec_vd[row, i] = v_d[i]
            rec_tau[row, i] = tau[i]
            if not floating:  # applied(): the joint efforts alone
                rec_tapp[row, i] = En[i]
            else:
                rec_tapp[row, i] = (0.0 + Wn[i]) if i < 6 else (En[i - nvb] + 0.0)
        rec_sat[row] = sat or clipped
        if rec_energy.shape[0]:
            kin, grav = _energy(im, fm, I6, mc, qn, vn, zeros, eout)
            total = kin + grav + 0.0
            supplied = work + passive_work + dissipated
            rec_energy[row] = total - acc[1] - supplied + dissipated - acc[4]
        # ---- the row is done: the state, the work, the commands for the next period
        for i in range(nq):
            q[i] = qn[i]
        for i in range(nv):
            v[i] = vn[i]
        acc[0], acc[2], acc[3] = work, passive_work, dissipated
        acc[8], acc[9], acc[10] = pp0, pd0, 1.0 if p_end else 0.0
        acc[5] = k + steps
        acc[6] += sat_w
        acc[7] += sat_j
        for i in range(6):
            W[i] = Wn[i]
        for j in range(nj):
            E[j] = En[j]
    return row_end, _DONE
