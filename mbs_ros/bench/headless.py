"""Section 5, ``headless``: the 12-DOF vehicle-manipulator (scenario ``vehicle_manipulator``) with computed torque at
500 Hz and RK4 physics at 1 kHz run by :func:`mbs_ros.headless.run_scenario`, its real-time factor against the
target (>= 50x on one core) and where a control period's time goes.

- ``law``: the compiled computed-torque law (:mod:`mbs_ros.dynamics.kernels.laws`) against its numpy reference
  (``ComputedTorque(..., compiled=False)``) on random states of the UVMS: agreement (relative) and µs per call;
- ``period``: one lockstep period (``Simulator.advance_period``, two RK4 steps in one compiled call) against the
  same two steps taken one call at a time (``advance(1)`` twice, the per-step path): the states must be identical
  (error 0), and the µs of each;
- the real-time factor: simulated seconds per second of this thread's CPU time in the run's loop of periods
  (:attr:`HeadlessRun.loop_cpu_time`: the set-up, loading the model files, excluded), after a short run of each
  path has loaded its kernels, and the factor of the same run as :attr:`HeadlessRun.real_time_factor` gives it
  (wall time, set-up included); the scenario takes the
  fast path (:mod:`mbs_ros.headless.fast`, all periods in one compiled call), and the Python path's factor
  (``fast=False``, the same records) is measured beside it;
- the breakdown: one run with the compiled call timed on this thread's CPU: that time less the physics (two RK4
  steps timed alone) is the rest of the compiled period; the Python around the call is what is left of the µs
  per period.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from mbs_ros.bench import timing

SCENARIO = "vehicle_manipulator"
OVERRIDES = {"physics_rate": 1000.0, "control_rate": 500.0}
TARGET_RTF = 50.0

#: the parts of a period on the fast path (mbs_ros.headless.fast): the compiled call (run_periods, timed on this
#: thread's CPU around each call) split into physics (two RK4 steps timed alone, :func:`physics_floor`) and the rest
#: of the compiled period; the Python around the call is the rest of the period's thread CPU time
PARTS = (
    "physics: 2 RK4 steps (compiled kernel, timed alone)",
    "rest of the compiled period (state in, reference, law, limits, checks, work, energy, record)",
    "Python around the compiled call (packing, handing over; set-up excluded)",
)


def _uvms():
    from mbs_ros.dynamics import Model

    from mbs_ros.bench.models import ROBOTS

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
    from mbs_ros.dynamics.simulation.simulator import Simulator

    rng = np.random.default_rng(seed)
    q0 = model.neutral()
    q0[2] = -5.0
    q0[model.nq - 6:] = rng.uniform(-1.0, 1.0, 6)
    return [Simulator(model, q0, np.zeros(model.nv), 1e-3, lockstep_steps=2) for _ in range(2)], rng


def period_row(plan: timing.Plan, tol: float, seed: int = 0) -> dict:
    """A lockstep period in one compiled call against its steps taken one at a time: identical states."""
    from mbs_ros.dynamics.simulation.simulator import WrenchCommand

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


def _run(duration, fast=True):
    from mbs_ros.headless import run_scenario

    run = run_scenario(SCENARIO, duration=duration, overrides=OVERRIDES, fast=fast)
    if run.fault:
        raise RuntimeError(f"the run faulted: {run.fault}")
    return run


def _factor(duration, repeats, fast=True):
    """The best of ``repeats`` factors: simulated seconds per second of this thread's CPU time in the loop of
    periods (:attr:`HeadlessRun.loop_cpu_time`, module docstring). Measuring the loop itself, not the difference
    of two whole runs, keeps the set-up's noise (tens of ms under load) out of a signal of the same size."""
    best = None
    for _ in range(repeats):
        run = _run(duration, fast)
        cpu = run.loop_cpu_time
        if cpu is None or not cpu > 0.0:
            raise RuntimeError(f"the run measured no CPU time in its loop ({cpu})")
        rtf = run.duration / cpu
        if best is None or rtf > best["real_time_factor"]:
            periods = round(run.duration * run.control_rate)
            best = dict(real_time_factor=rtf, us_per_period=1e6 * cpu / periods,
                        wall_real_time_factor=run.real_time_factor, duration_s=run.duration,
                        physics_rate_hz=run.physics_rate, control_rate_hz=run.control_rate)
    return best


def real_time_factor(quick: bool) -> dict:
    """Steady-state real-time factor on this thread's CPU time (module docstring)."""
    _run(0.1)  # load (or compile) each path's kernels, outside the timed runs
    _run(0.1, fast=False)
    best = _factor(2.0 if quick else 6.0, 1 if quick else 3)
    # the same scenario the Python way (run_scenario(fast=False)): what the fast path replaces
    slow = _factor(0.6 if quick else 2.0, 1 if quick else 2, fast=False)
    best["python_path"] = dict(real_time_factor=slow["real_time_factor"], us_per_period=slow["us_per_period"])
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


def breakdown(duration: float, physics_us: Optional[float] = None) -> list:
    """``[(part, share of the period, µs per period)]`` of :data:`PARTS`: one run with the compiled call timed on
    this thread's CPU, less the physics (``physics_us`` per period, timed alone); the Python around it is what is
    left of the run's loop (:attr:`HeadlessRun.loop_cpu_time`, set-up excluded)."""
    from mbs_ros.headless import fast, run_scenario

    spent = []
    real = fast.cp.run_periods

    def timed(*args):
        t0 = time.thread_time()
        out = real(*args)
        spent.append(time.thread_time() - t0)
        return out

    fast.cp.run_periods = timed
    try:
        run = run_scenario(SCENARIO, duration=duration, overrides=OVERRIDES)
    finally:
        fast.cp.run_periods = real
    periods = round(run.duration * run.control_rate)
    if not spent or periods <= 0 or not run.loop_cpu_time:
        return []
    us_per_period = 1e6 * run.loop_cpu_time / periods
    kernel = 1e6 * sum(spent) / periods
    physics = min(kernel, physics_us or 0.0)
    parts = (physics, kernel - physics, max(0.0, us_per_period - kernel))
    total = sum(parts)  # us_per_period (the compiled call is timed inside the loop)
    return [(label, us / total, us) for label, us in zip(PARTS, parts)]


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
                            for p, s, u in breakdown(1.0 if quick else 4.0,
                                                     summary["physics_floor"]["us_per_period"])]
    summary["scenario"] = SCENARIO
    summary["overrides"] = dict(OVERRIDES)
    return rows, summary
