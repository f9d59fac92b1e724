"""The physics-rate check of a model (:func:`rate_check`, :class:`RateCheck`): the fastest gravity mode, the
effort-driven rate and the integrator's energy growth at a time step, refused or warned about (a part of
:mod:`mbs_ros.dynamics.simulation.simulator`, which re-exports it; ``docs/dynamics.md``, "Physics rate")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from mbs_ros.dynamics.simulation.actuators import CommandLimits, command_limits
from mbs_ros.dynamics.simulation.integrators import TABLEAUS, check_time_step
from mbs_ros.dynamics.model.model import Model
from mbs_ros.dynamics.simulation.types import _angular_components

# Physics-rate check (module docstring, "Physics rate").
RATE_SAMPLES = 32
RATE_WARN = 1.0  # max(omega_g, omega_tau) * dt above this: a warning (MAX_TURN_PER_STEP)
RATE_WARN_GROWTH = 1.01  # energy growth per period of the gravity mode above this: a warning
RATE_REFUSE_GROWTH = 2.0  # ... above this: refused


@dataclass(frozen=True)
class RateCheck:
    """What :func:`rate_check` found: the fastest gravity mode ``omega_gravity`` [rad/s], the effort-driven rate
    ``omega_effort`` [rad/s], the energy growth per period of the gravity mode under the integrator at ``dt``,
    ``error`` (the reason to refuse ``dt``, or None) and ``warning`` (or None)."""

    omega_gravity: float
    omega_effort: float
    growth_per_period: float
    error: Optional[str]
    warning: Optional[str]
    #: the fastest decay rate of the passive damping at the initial state [1/s]: ``max |eig(M⁻¹ ∂(−τ_p)/∂v)|`` at
    #: rest (joint dampers, the slope ``f/v_f`` of smoothed friction, linear hydrodynamic damping)
    damping_rate: float = 0.0


#: Largest ``λ dt`` on the negative real axis each explicit method is stable for (``|R(−x)| ≤ 1``).
REAL_AXIS_LIMIT = {"euler": 2.0, "heun": 2.0, "rk3": 2.5127, "rk4": 2.7853}


def _largest_rate(model: Model, q: np.ndarray, force, eps: float) -> float:
    """``max |eig(M(q)⁻¹ K)|`` with ``K`` the Jacobian of ``force(e)`` in a tangent perturbation ``e`` (nv,), by
    central differences of step ``eps``; 0 where ``K`` vanishes."""
    nv = model.nv
    K = np.empty((nv, nv))
    e = np.zeros(nv)
    for i in range(nv):
        e[i] = eps
        K[:, i] = force(e)
        e[i] = -eps
        K[:, i] -= force(e)
        e[i] = 0.0
    if not np.any(K):
        return 0.0
    K /= 2 * eps
    return float(np.max(np.abs(np.linalg.eigvals(np.linalg.solve(model.mass_matrix(q), K)))))


def _damping_rate(model: Model, q: np.ndarray) -> float:
    """``max |eig(M⁻¹ ∂(−τ_p)/∂v)|`` at ``(q, 0)``: how fast the stiffest passive damper stops its mode [1/s]."""
    if not model.passive_active:
        return 0.0
    return _largest_rate(model, q, lambda e: -model.passive_forces(q, e), 1e-7)


def _stability_growth(method: str, x: float) -> float:
    """Energy growth per period of an undamped oscillation ``ω`` with ``x = ω dt`` under ``method``:
    ``|R(ix)|^(2 · 2π/x)`` with ``R(z) = Σ_{k≤p} z^k / k!`` (explicit RK with as many stages as its order)."""
    if x <= 0.0:
        return 1.0
    order = TABLEAUS[method].order
    z, term, R = 1j * x, 1.0 + 0j, 1.0 + 0j
    for k in range(1, order + 1):
        term = term * z / k
        R += term
    log_growth = 2.0 * (2.0 * math.pi / x) * math.log(abs(R))
    return math.exp(min(log_growth, 700.0))


def _gravity_omega(model: Model, q: np.ndarray) -> float:
    """``max √|eig(M⁻¹ ∂g/∂q)|`` at ``q`` (central differences in the tangent space)."""
    return math.sqrt(_largest_rate(model, q, lambda e: model.gravity_forces(model.integrate(q, e)), 1e-6))


def rate_check(model: Model, q0, dt: float, integrator: str = "rk4", limits: Optional[CommandLimits] = None,
               samples: int = RATE_SAMPLES) -> RateCheck:
    """Is the step ``dt`` [s] fast enough for ``model`` under ``integrator``? (module docstring, "Physics rate").
    ``q0``: the initial configuration; ``limits``: the command limits (default: the model's)."""
    if integrator not in TABLEAUS:
        raise ValueError(f"unknown integrator {integrator!r}; choose one of {', '.join(TABLEAUS)}")
    dt = check_time_step(dt)
    q0 = np.asarray(q0, dtype=float)
    limits = command_limits(model) if limits is None else limits
    omega_g = 0.0
    if np.any(model.gravity):
        configs = [q0]
        rng = np.random.default_rng(20240909)
        for _ in range(int(samples)):
            q = model.random_configuration(rng, joint_range=math.pi)
            if model.group is not None:  # the base where it starts; the joints anywhere
                nqb = model.nq - sum(2 if t == "continuous" else 1 for t in model.joint_types)
                q[:nqb] = q0[:nqb]
            configs.append(q)
        omega_g = max(_gravity_omega(model, q) for q in configs)
    # the largest angular acceleration the command limits can give at q0: |M^-1| . limits, angular rows
    nj = len(model.joint_names)
    nvb = model.nv - nj
    lim = np.empty(model.nv)
    angular = _angular_components(model)
    lim[:nvb] = np.where(angular[:nvb], limits.max_torque, limits.max_force)
    lim[nvb:] = limits.max_effort
    lim = np.where(np.isfinite(lim), lim, 0.0)
    Minv = np.linalg.inv(model.mass_matrix(q0))
    acc = np.abs(Minv) @ lim
    omega_tau = float(math.sqrt(float(np.max(acc[angular])))) if np.any(angular) else 0.0
    x = omega_g * dt
    growth = _stability_growth(integrator, x)
    error = warning = None
    rate = 1.0 / dt
    lam = _damping_rate(model, q0)
    lam_limit = REAL_AXIS_LIMIT[integrator]
    if lam * dt > lam_limit:
        error = (f"physics_rate {rate:g} Hz is unstable for this model with {integrator}: its stiffest passive "
                 f"damping (joint damping, the slope friction/friction_velocity of joint friction, or linear "
                 f"hydrodynamic damping) stops its mode at {lam:.3g} 1/s, and {integrator} diverges beyond "
                 f"lambda*dt = {lam_limit:g} (here {lam * dt:.3g}); use at least {lam / lam_limit:.3g} Hz, less "
                 "damping, or a larger friction_velocity")
    elif growth > RATE_REFUSE_GROWTH:
        lo = _min_rate(integrator, omega_g, RATE_REFUSE_GROWTH)
        error = (f"physics_rate {rate:g} Hz is unstable for this model with {integrator}: its fastest gravity "
                 f"mode ({omega_g:.3g} rad/s) gains x{growth:.3g} energy per period (omega*dt = {x:.3g}; "
                 f"refused above x{RATE_REFUSE_GROWTH:g}); use at least {lo:.3g} Hz"
                 + (" or rk4" if integrator != "rk4" else ""))
    else:
        reasons = []
        fast = max(omega_g, omega_tau)
        if fast * dt > RATE_WARN:
            reasons.append(f"the fastest mode (gravity {omega_g:.3g} rad/s, full effort {omega_tau:.3g} rad/s) "
                           f"has omega*dt = {fast * dt:.3g} > {RATE_WARN:g}; at least {fast / RATE_WARN:.3g} Hz "
                           "resolves it")
        if lam * dt > 0.5 * lam_limit:
            reasons.append(f"the stiffest passive damping ({lam:.3g} 1/s) has lambda*dt = {lam * dt:.3g}, near "
                           f"{integrator}'s stability limit {lam_limit:g}; at least {2 * lam / lam_limit:.3g} Hz")
        if growth > RATE_WARN_GROWTH:
            reasons.append(f"{integrator} adds {100 * (growth - 1):.3g} % energy per period of the gravity mode "
                           f"({omega_g:.3g} rad/s); use rk4 or at least "
                           f"{_min_rate(integrator, omega_g, RATE_WARN_GROWTH):.3g} Hz")
        if reasons:
            warning = f"physics_rate {rate:g} Hz may be too low: " + "; ".join(reasons)
    return RateCheck(omega_g, omega_tau, growth, error, warning, lam)


def _min_rate(integrator: str, omega: float, growth: float) -> float:
    """The lowest rate [Hz] at which the energy growth per period of ``omega`` stays below ``growth``."""
    lo, hi = 1e-6, 10.0  # omega*dt bracket
    if _stability_growth(integrator, lo) > growth:
        return math.inf
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if _stability_growth(integrator, mid) > growth:
            hi = mid
        else:
            lo = mid
    return omega / lo
