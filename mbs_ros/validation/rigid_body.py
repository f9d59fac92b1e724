"""Rigid-body study (seed 004 + seed 001): energy/momentum drift of long RKMK runs and orders of convergence.

    python -m mbs_ros.validation rigid-body [--steps 100000] [--dt 1e-3] [--method rk4] [--json]
    (also: python -m mbs_ros.validation.rigid_body ...)

Drift: a torque-free body with a centre-of-mass offset and a full inertia on each base group (no gravity), from
a fixed initial twist; relative change of kinetic energy and of the Noether momentum after ``--steps`` steps.
Orders: error at t = 1 s of Lie–Euler, Heun, RK3 and RKMK4 on SE(3) (gravity and a time-varying wrench) against
scipy's DOP853 on the embedded equations (R, p, V) at tolerance 1e-13, for h = 40, 20, 10 ms; slope of the log-log
fit.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp

from mbs_ros.dynamics import BASES, TABLEAUS, Model, simulate
from mbs_ros.dynamics.lie import hat3
from mbs_ros.validation._study import Study

BODY = dict(mass=1.7, inertia=[[0.5, 0.05, -0.02], [0.05, 0.8, 0.03], [-0.02, 0.03, 1.1]], com=(0.1, -0.05, 0.2))
TWIST = np.array([0.4, -0.3, 0.2, 1.5, -2.0, 1.0])


def drift(base: str, steps: int, dt: float, method: str = "rk4") -> dict:
    """Relative energy and Noether-momentum drift of a torque-free body after ``steps`` steps."""
    model = Model.rigid_body(base, gravity=(0.0, 0.0, 0.0), **BODY)
    q0 = model.neutral()
    v0 = model.velocity_from_twist(q0, model.twist(q0, np.linalg.lstsq(model.velocity_map(q0), TWIST, rcond=None)[0]))
    start = time.perf_counter()
    _, q, v = simulate(model, q0, v0, np.zeros(model.nv), dt, steps, method=method)
    wall = time.perf_counter() - start
    T = np.array([model.kinetic_energy(a, b) for a, b in zip(q[:: max(1, steps // 1000)], v[:: max(1, steps // 1000)])])
    mu0 = model.noether_momentum(q0, v0)
    mu = model.noether_momentum(q[-1], v[-1])
    return {
        "base": base,
        "steps": steps,
        "dt": dt,
        "method": method,
        "energy_drift_rel": float(abs(T[-1] - T[0]) / T[0]),
        "energy_max_dev_rel": float(np.abs(T - T[0]).max() / T[0]),
        "momentum_drift_rel": float(np.abs(mu - mu0).max() / np.abs(mu0).max()),
        "us_per_step": 1e6 * wall / max(1, steps),
    }


def _tau(t, q, v):
    return np.array([0.5 * np.sin(2 * t), 0.2, -0.3 * np.cos(t), 0.1 * np.cos(3 * t), -0.2, 0.05 * t])


def convergence(dts=(0.04, 0.02, 0.01), t_end: float = 1.0) -> dict:
    """Errors at t_end on SE(3) for every tableau and the fitted order."""
    from transforms3d.quaternions import mat2quat

    model = Model.rigid_body("se3", gravity=(0.0, 0.0, -9.81), **BODY)
    q0 = model.configuration_from_pose([0.1, 0.2, 0.3], [0.1, -0.2, 0.3, 0.9])
    v0 = TWIST

    def rhs(t, x):
        R, p, V = x[:9].reshape(3, 3), x[9:12], x[12:]
        w, xq, yq, zq = mat2quat(R)
        q = model.configuration_from_pose(p, [xq, yq, zq, w])
        return np.concatenate([(R @ hat3(V[3:])).ravel(), R @ V[:3], model.forward_dynamics(q, V, _tau(t, q, V))])

    T0 = model.group.pose_matrix(q0)
    sol = solve_ivp(rhs, (0.0, t_end), np.concatenate([T0[:3, :3].ravel(), T0[:3, 3], v0]), method="DOP853",
                    rtol=1e-13, atol=1e-13)
    x = sol.y[:, -1]
    out = {}
    for method, tab in TABLEAUS.items():
        errs = []
        for dt in dts:
            _, q, v = simulate(model, q0, v0, _tau, dt, int(round(t_end / dt)), method=method)
            T = model.group.pose_matrix(q[-1])
            errs.append(float(np.abs(T[:3, :3].ravel() - x[:9]).max() + np.abs(T[:3, 3] - x[9:12]).max()
                              + np.abs(v[-1] - x[12:]).max()))
        out[method] = {"dt": list(dts), "error": errs, "order": float(np.polyfit(np.log(dts), np.log(errs), 1)[0]),
                       "expected": tab.order}
    return out


def _add_arguments(ap):
    ap.add_argument("--steps", type=int, default=100_000, help="drift run length in steps (default 100000)")
    ap.add_argument("--dt", type=float, default=1e-3, help="drift run step (s), default 1e-3")
    ap.add_argument("--method", default="rk4", choices=list(TABLEAUS))


def _run(args) -> dict:
    return {"study": "rigid-body", "drift": [drift(b, args.steps, args.dt, args.method) for b in BASES],
            "convergence": convergence()}


def _report(result) -> str:
    d = result["drift"][0]
    lines = [f"Torque-free drift, {d['method']}, {d['steps']} steps of {d['dt']:g} s",
             f"{'base':<12}{'energy drift':>14}{'max |ΔT|/T':>14}{'momentum drift':>16}{'µs/step':>10}"]
    for r in result["drift"]:
        lines.append(f"{r['base']:<12}{r['energy_drift_rel']:>14.2e}{r['energy_max_dev_rel']:>14.2e}"
                     f"{r['momentum_drift_rel']:>16.2e}{r['us_per_step']:>10.1f}")
    lines.append("\nOrder of convergence on SE(3) (error at t = 1 s vs DOP853 at 1e-13)")
    lines.append(f"{'method':<8}" + "".join(f"{'h=' + format(d, 'g'):>12}" for d in result['convergence']['rk4']['dt'])
                 + f"{'order':>8}{'expected':>10}")
    for m, r in result["convergence"].items():
        lines.append(f"{m:<8}" + "".join(f"{e:>12.2e}" for e in r["error"]) + f"{r['order']:>8.2f}{r['expected']:>10d}")
    return "\n".join(lines)


HELP = __doc__ + """
Metrics (--json: {"study", "drift": [...], "convergence": {...}}):
  drift        per base group: energy_drift_rel (|T_end − T0|/T0), energy_max_dev_rel (max |T − T0|/T0),
               momentum_drift_rel (max |μ_end − μ0| / max |μ0|, Noether momentum), us_per_step, base, steps, dt, method
  convergence  per tableau: dt, error (max-entry error of R, p, V at t = 1 s), order (log-log slope), expected
Body (ours, the paper has no numbers): m = 1.7 kg, full inertia, c.o.m. (0.1, −0.05, 0.2) m.
"""

STUDY = Study("rigid-body", "drift of long runs on every base group; integrator orders on SE(3)", HELP, _add_arguments, _run, _report, ("004", "001"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbs_ros.validation.rigid_body", description=HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(ap)
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    result = _run(args)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return 0
    print(_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
