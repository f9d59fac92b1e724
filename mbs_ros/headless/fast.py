"""The headless run's fast path: every control period of a robot in one compiled call
(:func:`mbs_ros.dynamics.kernels.period.run_periods`), bit-identical to the Python path of
:mod:`mbs_ros.headless.run` (which calls the nodes' cores, as the nodes do).

:func:`eligible` says whether a robot is the common case the kernel computes (None) or why not: a floating SE(3)
base or a fixed one, revolute/prismatic joints (locked ones too, no mimic joints), joint damping and friction but
no hydrodynamics, buoyancy, springs or thrusters, no estimator in the loop, no contact world beyond the joint
limits, the compiled computed-torque law without thruster allocation, the references on the compiled segments,
lockstep on simulation time. The paused
start (the first answer at t = 0 and the reference's installation) runs the Python way; :func:`run` then takes
the periods. Where the kernel meets something the Python path does differently (a joint near its limit: the
contact step; a fault, a rejected state, a failed law) it stops before that period, :func:`run` leaves the
simulator and the controller as the Python path has them there, and the caller's loop goes on the Python way from
that period, so the result is the Python path's in every case. docs/headless.md.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers.laws import ComputedTorque
from mbs_ros.dynamics.kernels import period as cp
from mbs_ros.dynamics.simulation.integrators import TABLEAUS
from mbs_ros.dynamics.simulation.simulator import MAX_POSITION, WrenchCommand, velocity_bounds

__all__ = ["eligible", "run", "pack"]


def eligible(r) -> Optional[str]:
    """None when the robot ``r`` (a :class:`mbs_ros.headless.run._Robot` after its paused start) is the common case
    (module docstring), else why not."""
    if not cp.AVAILABLE:
        return "no numba (or MBS_BACKEND=numpy)"
    sim, model, ctl, cm = r.sim, r.sim.model, r.ctl, r.cmodel
    if r.estimator is not None:
        return "an estimator in the loop"
    floating = model.base == "se3"
    if model.base not in ("se3", "fixed") or cm.base != model.base or model.compiled_kernels is None \
            or cm.compiled_kernels is None:
        return "not a compiled model on an SE(3) or a fixed base"
    if (model.nq, model.nv) != (cm.nq, cm.nv) or (floating and not np.array_equal(model.velocity_map(None),
                                                                                   np.eye(6))):
        return "another velocity map or layout"
    if not model.joint_names or any(t not in ("revolute", "prismatic") for t in model.joint_types):
        return "no joints, or a continuous joint"
    if model.mimic_joints or model.mimic_reduction is not None:
        return "mimic joints"
    P = model.passive
    if P is not None and (P.has_fluid or P.has_springs or P.displaced.any() or len(P.thruster_names)):
        return "hydrodynamics, buoyancy, joint springs or thrusters"
    if sim.nt or sim.expected != (("wrench", "joints") if floating else ("joints",)) or sim.cmd_timeout_steps \
            or sim.objects:
        return "thrusters, a command timeout or free objects"
    if sim.fault is not None or sim.paused or sim.lockstep_steps < 1 or sim.integrator not in TABLEAUS:
        return "a faulted, paused or non-lockstep simulator"
    if sim.world is not None and sim.world.shapes:
        return "a contact world with shapes"
    if ctl.settings.idle_until > 0:
        return "an idle start (idle_until)"
    if ctl.gripper is not None or ctl.payload is not None:
        return "a gripper or a payload (gripper_joints, payload_mass)"
    if not isinstance(ctl.law, ComputedTorque) or not ctl.law.compiled or ctl.allocation is not None:
        return "not the compiled computed-torque law, or thruster allocation"
    if floating and (ctl.output.wrench_map is None or not r.view.base_is_root):
        return "a velocity map that depends on q, or odom at a link above the base"
    names = tuple(r.joint_state_names)
    if any(names.index(n) >= len(model.joint_names) for n in r.joint_names):
        return "a controller joint joint_states does not give as a moving joint"
    for ref, se3 in (((r.base_ref, True),) if floating else ()) + ((r.joint_ref, False),):
        seg = None if ref is None else ref[1].compiled_segments
        if seg is None or seg[0] != se3:
            return "a reference the compiled segments do not evaluate"
    period_ns = sim.lockstep_steps * sim.dt_ns
    if r.timebase.last != sim.stamp() or r.timebase.max_jump_ns < period_ns:
        return "a time base that would not take every period's state"
    return None


def _limits(sim):
    """``(iq, lower + margin, upper - margin)`` of the joints with a finite limit (``ContactWorld._limited``), or
    empty arrays without joint limits."""
    world, model = sim.world, sim.model
    if world is None or not world.limits:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    lower, upper = (np.asarray(x, dtype=float) for x in model.position_limits)
    keep = np.flatnonzero(np.isfinite(lower) | np.isfinite(upper))
    iq = np.asarray(model.tree.iq, dtype=np.int64)[keep]
    return iq, lower[keep] + world.margin, upper[keep] - world.margin


def _tableau(method: str):
    tab = TABLEAUS[method]
    ns = len(tab.b)
    A = np.zeros((ns, ns))
    for j, row in enumerate(tab.A):
        A[j, : len(row)] = row
    return A, np.array(tab.b, dtype=np.float64)


def _reference(ref):
    start, r = ref
    _se3, coeffs = r.compiled_segments
    return int(start), np.ascontiguousarray(r.times), np.ascontiguousarray(r.positions), coeffs


def pack(r):
    """The arguments of :func:`~mbs_ros.dynamics.kernels.period.run_periods` for robot ``r`` (module docstring):
    the simulator's kernels, state, bookkeeping and limits, the period's commands, the controller's law, limits and
    references, and the record arrays from ``r.n`` on."""
    sim, model, ctl, cm = r.sim, r.sim.model, r.ctl, r.cmodel
    k, ck = model.compiled_kernels, cm.compiled_kernels
    nj = len(model.joint_names)
    A, b = _tableau(sim.integrator)
    s_max_effort = np.ascontiguousarray(np.broadcast_to(np.asarray(sim.limits.max_effort, dtype=float), (nj,)))
    sim_arrays = (k.im, k.fm, k.I6, k.mc, A, b, velocity_bounds(model, sim.dt), s_max_effort)
    sim_floats = (float(sim.dt), float(MAX_POSITION), float(model.total_mass), float(sim.limits.max_force),
                  float(sim.limits.max_torque))
    cP = cm.passive
    compensate = bool(ctl.settings.compensate_passive and cP is not None and cP.active)
    sim_ints = (int(sim.lockstep_steps), int(sim.energy_check_steps), int(sim.k_reset), int(sim.t0_ns),
                int(sim.dt_ns), int(model.passive_active), int(model.passive is not None), int(compensate))
    # the passive power at the last step's end is not known here (Simulator._passive_end): computed again
    acc = np.array([sim.work, sim.energy_ref, sim.passive_work, sim.dissipated, sim.contact_work, sim.k, 0.0, 0.0,
                    0.0, 0.0, 0.0])
    cmds = sim.period_commands
    W = np.array(cmds["wrench"].W, dtype=float) if "wrench" in cmds else np.zeros(6)
    E = np.array(cmds["joints"], dtype=float)
    c_max_effort = np.ascontiguousarray(np.broadcast_to(np.asarray(ctl.output.max_effort, dtype=float), (nj,)))
    joint_index = r.intake.index["joints"]  # where the dynamics node puts each of the controller's joints
    take = np.array([joint_index[n] for n in r.joint_names], dtype=np.int64)
    names = tuple(r.joint_state_names)
    jstate = np.array([names.index(n) for n in r.joint_names], dtype=np.int64)
    ctl_arrays = (ck.im, ck.fm, ck.I6, np.ascontiguousarray(ctl.law.kp, dtype=float),
                  np.ascontiguousarray(ctl.law.kd, dtype=float),
                  np.zeros((6, 6)) if ctl.output.wrench_map is None else np.ascontiguousarray(ctl.output.wrench_map),
                  c_max_effort, take, jstate)
    lo, hi = ri.QUATERNION_NORM
    ctl_floats = (float(ctl.output.limits.max_force), float(ctl.output.limits.max_torque), float(ri.MAX_POSITION),
                  float(ri.MAX_STATE_VELOCITY), float(lo), float(hi))
    b_start, b_times, b_pos, b_coef = (_reference(r.base_ref) if r.base_ref is not None else
                                       (0, np.zeros(1), np.zeros((1, 7)), np.zeros((0, 6, 6))))
    j_start, j_times, j_pos, j_coef = _reference(r.joint_ref)
    refs = (b_times, b_pos, b_coef, j_times, j_pos, j_coef)
    ref_ints = (int(r.timebase.offset), b_start, j_start)
    energy = r.energy if r.energy is not None else np.zeros(0)
    rec_f = (r.q, r.v, r.q_d, r.v_d, r.tau, r.tau_applied, energy)
    q, v = np.array(sim.q, dtype=float), np.array(sim.v, dtype=float)
    return (sim_arrays, sim_floats, sim_ints, q, v, acc, W, E, _limits(sim), ctl_arrays, ctl_floats, refs,
            ref_ints, r.stamp_ns, rec_f, r.saturated, int(r.n))


def _commit(r, args, end: int) -> None:
    """Robot ``r`` at the end of row ``end - 1`` as the kernel left it (``args`` its :func:`pack`): the simulator's
    state, work and the commands submitted for the next period, the controller's last state stamp, the records."""
    if end <= r.n:
        return
    sim = r.sim
    q, v, acc, W, E, stamps = args[3], args[4], args[5], args[6], args[7], args[13]
    sim.q, sim.v, sim.k, sim.work = q.copy(), v.copy(), int(acc[5]), float(acc[0])
    sim.passive_work, sim.dissipated = float(acc[2]), float(acc[3])
    W, E = W.copy(), E.copy()
    W.setflags(write=False)
    E.setflags(write=False)
    sim.period_commands = {"wrench": WrenchCommand(W, "body"), "joints": E} if "wrench" in sim.expected else \
        {"joints": E}
    sim.saturated["wrench"] += int(acc[6])
    sim.saturated["joints"] += int(acc[7])
    r.timebase.last = int(stamps[end - 1])
    if r.contact is not None:
        r.contact[0][r.n:end], r.contact[1][r.n:end] = sim.contact_work, sim.contact_power
    r.n = end


def run(robots: List) -> int:
    """The robots' periods in the kernel, as far as every robot's goes (a robot that went further is run again to
    that period: the robots step together); returns the control periods taken, from which the caller's loop goes
    on the Python way (all of them: the run is done)."""
    packs = [pack(r) for r in robots]
    rows = int(packs[0][13].shape[0])
    stops = [int(cp.run_periods(*args, rows)[0]) for args in packs]
    end = min(stops)
    for i, r in enumerate(robots):
        if stops[i] != end:  # to the common period, from the start again (the kernel only wrote rows past end)
            packs[i] = pack(r)
            cp.run_periods(*packs[i], end)
    for r, args in zip(robots, packs):
        _commit(r, args, end)
    return max(0, end - 1)

