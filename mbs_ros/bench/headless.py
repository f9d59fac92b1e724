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
  the D₂ run as :attr:`HeadlessRun.real_time_factor` gives it (wall time, set-up included); the scenario takes the
  fast path (:mod:`mbs_ros.headless.fast`, all periods in one compiled call), and the Python path's factor
  (``fast=False``, the same records) is measured beside it;
- the breakdown: one run under :mod:`cProfile`: the compiled call's time less the physics (two RK4 steps timed
  alone) is the rest of the compiled period, the Python around the call the remainder, as shares of the periods'
  time scaled to the unprofiled µs per period.
"""
from __future__ import annotations

import cProfile
import pstats
import time
from typing import Optional

import numpy as np

from . import timing

SCENARIO = "vehicle_manipulator"
OVERRIDES = {"physics_rate": 1000.0, "control_rate": 500.0}
TARGET_RTF = 50.0

#: (label, file suffix, function): the parts of a period on the fast path (mbs_ros.headless.fast), by the functions
#: that compute them; the compiled call itself is split into physics (measured alone, :func:`physics_floor`) and the
#: rest of the compiled period (state in, reference, law, limits, the node's checks, work, energy, record)
PARTS = (
    ("compiled periods (run_periods, one call per run)", "mbs_ros/headless/fast.py", "run"),
    ("packing the kernel's arguments (pack, once per run)", "mbs_ros/headless/fast.py", "pack"),
)
#: the functions whose time is the periods' (the paused start and set-up excluded)
PERIOD_FUNCTIONS = (("mbs_ros/headless/fast.py", "run"),)
PHYSICS_LABEL = "physics: 2 RK4 steps (compiled kernel, timed alone)"
REST_LABEL = "rest of the compiled period (state in, reference, law, limits, checks, work, energy, record)"


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


def _run(duration, fast=True):
    from mbs_ros.headless import run_scenario

    t0 = time.thread_time()
    run = run_scenario(SCENARIO, duration=duration, overrides=OVERRIDES, fast=fast)
    return run, time.thread_time() - t0


def _factor(d1, d2, repeats, fast=True):
    """The best of ``repeats`` thread-CPU factors ``(D₂ − D₁) / (cpu₂ − cpu₁)`` (module docstring)."""
    best = None
    for _ in range(repeats):
        r1, c1 = _run(d1, fast)
        r2, c2 = _run(d2, fast)
        if r1.fault or r2.fault:
            raise RuntimeError(f"the run faulted: {r1.fault or r2.fault}")
        rtf = (r2.duration - r1.duration) / max(c2 - c1, 1e-9)
        if best is None or rtf > best["real_time_factor"]:
            periods = round((r2.duration - r1.duration) * r2.control_rate)
            best = dict(real_time_factor=rtf, us_per_period=1e6 * (c2 - c1) / periods,
                        wall_real_time_factor=r2.real_time_factor, duration_s=r2.duration,
                        physics_rate_hz=r2.physics_rate, control_rate_hz=r2.control_rate)
    return best


def real_time_factor(quick: bool) -> dict:
    """Steady-state real-time factor on this thread's CPU time (module docstring)."""
    d1, d2 = (0.5, 2.0) if quick else (1.0, 6.0)
    _run(0.1)  # compile / load the kernels' cache
    best = _factor(d1, d2, 1 if quick else 3)
    # the same scenario the Python way (run_scenario(fast=False)): what the fast path replaces
    slow = _factor(0.2, 0.6, 1, fast=False) if quick else _factor(0.5, 2.0, 2, fast=False)
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


def breakdown(duration: float, us_per_period: float, physics_us: Optional[float] = None) -> list:
    """``[(part, share of the periods' time, µs per period)]`` from one profiled run (module docstring): the
    compiled call's time less its physics (``physics_us`` per period, timed alone) and the Python around it."""
    from mbs_ros.headless import run_scenario

    prof = cProfile.Profile()
    prof.enable()
    run = run_scenario(SCENARIO, duration=duration, overrides=OVERRIDES)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)

    def cum(suffix, name):
        return sum(v[3] for (f, _line, n), v in stats.items() if n == name and f.replace("\\", "/").endswith(suffix))

    total = sum(cum(f, n) for f, n in PERIOD_FUNCTIONS)
    if total <= 0.0:
        return []
    periods = round(run.duration * run.control_rate)
    values = {label: cum(f, n) for label, f, n in PARTS}
    kernel_label, pack_label = PARTS[0][0], PARTS[1][0]
    kernel = max(0.0, values.pop(kernel_label) - values[pack_label])
    physics = min(kernel, (physics_us or 0.0) * 1e-6 * periods)
    out = {PHYSICS_LABEL: physics, REST_LABEL: kernel - physics, **values}
    out["other (the Python around the call)"] = max(0.0, total - sum(out.values()))
    return [(label, t / total, us_per_period * t / total) for label, t in out.items()]


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
                            for p, s, u in breakdown(1.0 if quick else 4.0, summary["us_per_period"],
                                                     summary["physics_floor"]["us_per_period"])]
    summary["scenario"] = SCENARIO
    summary["overrides"] = dict(OVERRIDES)
    return rows, summary
