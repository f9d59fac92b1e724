"""Section 5, ``headless``: the 12-DOF vehicle-manipulator (scenario ``vehicle_manipulator``) with computed torque at
500 Hz and RK4 physics at 1 kHz run by :func:`mbs_ros.headless.run_scenario`, its real-time factor against the
target (>= 50x on one core) and where a control period's time goes.

- ``law``: the compiled computed-torque law (:mod:`mbs_ros.dynamics.compiled_laws`) against its numpy reference
  (``ComputedTorque(..., compiled=False)``) on random states of the UVMS: agreement (relative) and µs per call;
- ``period``: one lockstep period (``Simulator.advance_period``, two RK4 steps in one compiled call) against the
  same two steps taken one call at a time (``advance(1)`` twice, the per-step path): the states must be identical
  (error 0), and the µs of each;
- the real-time factor: simulated seconds per second of this thread's CPU time, ``(D₂ − D₁) / (cpu₂ − cpu₁)`` of
  two runs of D₁ and D₂ simulated seconds (the set-up, loading the model files, cancels out), and the factor of
  the D₂ run as :attr:`HeadlessRun.real_time_factor` gives it (wall time, set-up included);
- the breakdown: one run under :mod:`cProfile`, each part's cumulative time as a share of the periods' time
  (the profiler's overhead weighs on Python-heavy parts more than on compiled ones, so the shares are an upper
  bound for the Python parts), scaled to the unprofiled µs per period.
"""
from __future__ import annotations

import cProfile
import pstats
import time

import numpy as np

from . import timing

SCENARIO = "vehicle_manipulator"
OVERRIDES = {"physics_rate": 1000.0, "control_rate": 500.0}
TARGET_RTF = 50.0

#: (label, file suffix, function): the parts of a period, by the functions that compute them
PARTS = (
    ("physics: 2 RK4 steps (compiled kernel)", "mbs_ros/dynamics/compiled.py", "advance"),
    ("simulator bookkeeping (checks, work, hooks)", "mbs_ros/dynamics/simulator.py", "advance"),
    ("control law (compiled computed torque)", "mbs_ros/nodes/controller_core.py", "law_command"),
    ("reference evaluation", "mbs_ros/nodes/controller_core.py", "desired"),
    ("limits (CommandOutput)", "mbs_ros/controllers/command.py", "__call__"),
    ("state in (odom, joint_states -> q, v)", "mbs_ros/headless/run.py", "controller_state"),
    ("command checks and submit", "mbs_ros/headless/run.py", "submit"),
    ("applied force (recording)", "mbs_ros/headless/run.py", "applied"),
    ("energy balance residual (balance_residual)", "mbs_ros/nodes/dynamics_core.py", "balance_residual"),
)
PERIOD_FUNCTIONS = (("mbs_ros/headless/run.py", "answer"), ("mbs_ros/headless/run.py", "step"))


def _uvms():
    from mbs_ros.dynamics import Model

    from .models import ROBOTS

    return Model.from_yaml(ROBOTS / "uvms_6dof.yaml")


def law_row(plan: timing.Plan, tol: float, seed: int = 0) -> dict:
    """The compiled computed torque against the numpy reference on random UVMS states."""
    from mbs_ros.controllers.laws import ComputedTorque

    model = _uvms()
    rng = np.random.default_rng(seed)
    kp, kd = np.diag(rng.uniform(1.0, 20.0, model.nv)), np.diag(rng.uniform(1.0, 10.0, model.nv))
    fast, ref = ComputedTorque(model, kp, kd), ComputedTorque(model, kp, kd, compiled=False)
    err = 0.0
    for _ in range(50):
        q, q_d = model.random_configuration(rng), model.random_configuration(rng)
        v, v_d, a_d = rng.normal(size=(3, model.nv))
        err = max(err, timing.rel_err(fast(q, v, q_d, v_d, a_d), ref(q, v, q_d, v_d, a_d)))
    pair = timing.compare(lambda: fast(q, v, q_d, v_d, a_d), lambda: ref(q, v, q_d, v_d, a_d), plan)
    return dict(section="headless", model="uvms", label="SE(3) vehicle + 6-DOF arm", nv=model.nv,
                kernel="computed torque", compiled=fast.compiled, **pair.as_dict(), err=err, tol=tol,
                agree=bool(fast.compiled and err <= tol), target="", met=None,
                note="peer: the numpy reference of the same law")


def _period_sims(model, seed):
    from mbs_ros.dynamics.simulator import Simulator

    rng = np.random.default_rng(seed)
    q0 = model.neutral()
    q0[2] = -5.0
    q0[model.nq - 6:] = rng.uniform(-1.0, 1.0, 6)
    return [Simulator(model, q0, np.zeros(model.nv), 1e-3, lockstep_steps=2) for _ in range(2)], rng


def period_row(plan: timing.Plan, tol: float, seed: int = 0) -> dict:
    """A lockstep period in one compiled call against its steps taken one at a time: identical states."""
    from mbs_ros.dynamics.simulator import WrenchCommand

    model = _uvms()
    (batched, single), rng = _period_sims(model, seed)
    err = 0.0
    for _ in range(200):
        W, E = 5.0 * rng.normal(size=6), 2.0 * rng.normal(size=6)
        for sim in (batched, single):
            sim.submit("wrench", WrenchCommand(W))
            sim.submit("joints", E)
        batched.advance_period()
        single.start_period()
        single.advance(1)
        single.advance(1)
        err = max(err, timing.rel_err(batched.q, single.q), timing.rel_err(batched.v, single.v),
                  abs(batched.work - single.work), float(batched.k != single.k))
    ok = err == 0.0 and batched.fault is None and single.fault is None
    W, E = 5.0 * rng.normal(size=6), 2.0 * rng.normal(size=6)
    # the timed periods alternate the command's sign (the state stays bounded over any number of calls)
    commands = [(WrenchCommand(W), E), (WrenchCommand(-W), -E)]
    calls = [0, 0]

    def one_call():
        W_k, E_k = commands[calls[0] & 1]
        calls[0] += 1
        batched.submit("wrench", W_k)
        batched.submit("joints", E_k)
        batched.advance_period()

    def per_step():
        W_k, E_k = commands[calls[1] & 1]
        calls[1] += 1
        single.submit("wrench", W_k)
        single.submit("joints", E_k)
        single.start_period()
        single.advance(1)
        single.advance(1)

    pair = timing.compare(one_call, per_step, plan)
    if batched.fault is not None or single.fault is not None:
        raise RuntimeError(f"the timed periods faulted: {batched.fault or single.fault}")
    return dict(section="headless", model="uvms", label="SE(3) vehicle + 6-DOF arm", nv=model.nv,
                kernel="lockstep period (2 RK4)", **pair.as_dict(), err=err, tol=tol, agree=bool(ok), target="",
                met=None, note="peer: the same period stepped one advance(1) at a time; err must be exactly 0")


def _run(duration):
    from mbs_ros.headless import run_scenario

    t0 = time.thread_time()
    run = run_scenario(SCENARIO, duration=duration, overrides=OVERRIDES)
    return run, time.thread_time() - t0


def real_time_factor(quick: bool) -> dict:
    """Steady-state real-time factor on this thread's CPU time (module docstring)."""
    d1, d2 = (0.5, 2.0) if quick else (1.0, 6.0)
    _run(0.1)  # compile / load the kernels' cache
    best = None
    for _ in range(1 if quick else 3):
        r1, c1 = _run(d1)
        r2, c2 = _run(d2)
        if r1.fault or r2.fault:
            raise RuntimeError(f"the run faulted: {r1.fault or r2.fault}")
        rtf = (r2.duration - r1.duration) / max(c2 - c1, 1e-9)
        if best is None or rtf > best["real_time_factor"]:
            periods = round((r2.duration - r1.duration) * r2.control_rate)
            best = dict(real_time_factor=rtf, us_per_period=1e6 * (c2 - c1) / periods,
                        wall_real_time_factor=r2.real_time_factor, duration_s=r2.duration,
                        physics_rate_hz=r2.physics_rate, control_rate_hz=r2.control_rate)
    best.update(target=f">= {TARGET_RTF:g}x", met=bool(best["real_time_factor"] >= TARGET_RTF))
    return best


def physics_floor(plan: timing.Plan) -> dict:
    """µs of the compiled kernel for one period (two RK4 steps of the UVMS) alone, and the factor it bounds."""
    model = _uvms()
    kernels = model.compiled_kernels
    if kernels is None:
        return dict(us_per_period=None, real_time_factor_bound=None)
    rng = np.random.default_rng(1)
    q, v, tau = model.random_configuration(rng), 0.3 * rng.normal(size=model.nv), rng.normal(size=model.nv)
    caps = np.full(model.nv, np.inf)
    us = timing.alone(lambda: kernels.advance(q, v, tau, 1e-3, 2, "rk4", None, caps, np.inf), plan)
    return dict(us_per_period=us, real_time_factor_bound=2000.0 / us)


def breakdown(duration: float, us_per_period: float) -> list:
    """``[(part, share of the periods' time, µs per period)]`` from one profiled run (module docstring)."""
    from mbs_ros.headless import run_scenario

    prof = cProfile.Profile()
    prof.enable()
    run_scenario(SCENARIO, duration=duration, overrides=OVERRIDES)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)

    def cum(suffix, name):
        return sum(v[3] for (f, _line, n), v in stats.items() if n == name and f.replace("\\", "/").endswith(suffix))

    total = sum(cum(f, n) for f, n in PERIOD_FUNCTIONS)
    if total <= 0.0:
        return []
    values = {label: cum(f, n) for label, f, n in PARTS}
    kernel_label, sim_label = PARTS[0][0], PARTS[1][0]
    values[sim_label] = max(0.0, values[sim_label] - values[kernel_label])
    values["other (loop, recording, state copies)"] = max(0.0, total - sum(values.values()))
    return [(label, t / total, us_per_period * t / total) for label, t in values.items()]


def run(quick: bool, plan: timing.Plan, tol: float, progress=lambda msg: None):
    """``(rows, summary)``: the agreement rows (law, period) and the real-time factor with its breakdown."""
    progress("headless: law")
    rows = [law_row(plan, tol)]
    progress("headless: period")
    rows.append(period_row(plan, tol))
    progress("headless: real-time factor")
    summary = real_time_factor(quick)
    summary["physics_floor"] = physics_floor(plan)
    progress("headless: profile")
    summary["breakdown"] = [dict(part=p, share=s, us=u)
                            for p, s, u in breakdown(1.0 if quick else 4.0, summary["us_per_period"])]
    summary["scenario"] = SCENARIO
    summary["overrides"] = dict(OVERRIDES)
    return rows, summary
