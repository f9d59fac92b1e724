"""Lie-group integrators: Lie–Euler, Heun, Kutta's RK3 and RKMK4 (Munthe-Kaas), seed 001 eqs. 35–37.

The state is ``(q, v)``: a group element and its body-frame quasi-velocity. One step with an explicit Butcher
tableau ``(A, b, c)`` solves ``Φ̇ = dexp⁻¹_{−Φ} v`` from ``Φ = 0`` alongside ``v̇ = a(t, q·exp Φ, v)`` and resets the
chart at the end of the step (``q ← q·exp Φ``), so no chart singularity is ever met:

    Ψ_j = h Σ_l a_jl k_l,  q_j = q·exp(Ψ_j),  v_j = v + h Σ_l a_jl a_l,
    k_j = dexp⁻¹(−Ψ_j) v_j,  a_j = forward_dynamics(q_j, v_j, τ(t + c_j h, q_j, v_j)),
    q ← q·exp(h Σ_j b_j k_j),  v ← v + h Σ_j b_j a_j.

With one stage this is the Lie–Euler method. Any model with ``integrate``, ``dexp_inv``, ``forward_dynamics``,
``nq`` and ``nv`` can be integrated.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Union

import numpy as np

__all__ = ["Tableau", "TABLEAUS", "step", "simulate", "check_time_step", "warm_up"]


class Tableau(NamedTuple):
    """Explicit Runge–Kutta coefficients (strictly lower-triangular A)."""

    A: tuple
    b: tuple
    c: tuple
    order: int


TABLEAUS = {
    "euler": Tableau(A=((),), b=(1.0,), c=(0.0,), order=1),
    "heun": Tableau(A=((), (1.0,)), b=(0.5, 0.5), c=(0.0, 1.0), order=2),
    "rk3": Tableau(A=((), (0.5,), (-1.0, 2.0)), b=(1 / 6, 2 / 3, 1 / 6), c=(0.0, 0.5, 1.0), order=3),
    "rk4": Tableau(
        A=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
        b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
        c=(0.0, 0.5, 0.5, 1.0),
        order=4,
    ),
}

Torque = Union[np.ndarray, Callable[[float, np.ndarray, np.ndarray], np.ndarray]]


def _tableau(method: str) -> Tableau:
    try:
        return TABLEAUS[method]
    except KeyError:
        raise ValueError(f"unknown integrator {method!r}; choose one of {', '.join(TABLEAUS)}") from None


def check_time_step(dt, name: str = "dt") -> float:
    """``dt`` as a float when it is a positive, finite number of seconds; else ValueError naming the argument
    ``name`` (a negative step would integrate backwards, a zero one never advance)."""
    if isinstance(dt, bool) or not isinstance(dt, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a positive number of seconds, got a {type(dt).__name__}")
    value = float(dt)
    if not 0.0 < value < math.inf:
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return value


def step(model, q: np.ndarray, v: np.ndarray, tau: Torque, dt: float, method: str = "rk4", t: float = 0.0,
         wrench_world=None, steps=None, bounds=None):
    """One Munthe-Kaas step of size ``dt`` (seed 001 eqs. 35–37); returns ``(q_next, v_next)``.

    ``tau`` is a generalised-force vector held over the step, an ``(n_stages, nv)`` array (one row per stage of
    the tableau), or a function ``tau(t, q, v)`` evaluated at each stage. ``wrench_world`` (optional, ``[F; τ]``
    (6,)) is a wrench at the base origin held fixed in WORLD axes: at each stage it is rotated into the base
    axes and mapped by ``Bᵀ`` (:meth:`Model.wrench_to_generalized`; components the base cannot take are
    dropped) and added to ``tau``. ``method`` is one of ``euler`` (Lie–Euler), ``heun``, ``rk3``, ``rk4``
    (RKMK4). A :class:`~mbs_ros.dynamics.Model` with the compiled fast path takes the whole step in one compiled
    call unless ``tau`` is a function. A model's passive forces (:meth:`Model.passive_forces`: joint springs and
    friction, the water's damping and current) are added to ``tau`` at every stage.

    ``steps`` (an int) asks for that many steps with ``tau`` (nv,) held, in one compiled call
    (:attr:`Model.fast_advance`; ValueError without it): ``(qs, vs, n_within)``, rows 0 .. n_within of ``(steps + 1,
    nq)`` and ``(steps + 1, nv)`` the states from ``(q, v)`` on, each the same numbers one call per step gives;
    ``bounds = (v_caps, max_q)`` stops at the first step with a non-finite state, ``|v_i| > v_caps[i]`` or ``|q_i| >
    max_q`` (its state is the row after the ``n_within`` good ones).
    """
    try:
        positive = 0.0 < dt < math.inf and dt is not True  # the hot path's test; check_time_step says why not
    except TypeError:
        positive = False
    if not positive:
        check_time_step(dt)
    tab = _tableau(method)
    if steps is not None:
        fast = getattr(model, "fast_advance", None)
        if fast is None or callable(tau):
            raise ValueError("steps needs a model with the compiled loop (fast_advance) and a held tau")
        v_caps, max_q = (np.full(model.nv, math.inf), math.inf) if bounds is None else bounds
        return fast(q, v, tau, dt, int(steps), method, wrench_world, v_caps, max_q)
    fast = getattr(model, "fast_step", None)
    if fast is not None and not callable(tau):
        return fast(q, v, tau, dt, method, wrench_world)
    return _step(model, tab, q, np.asarray(v, dtype=float), _with_world_wrench(model, tab, tau, wrench_world), dt, t)


def warm_up(model, q, v, dt: float, method: str = "rk4") -> None:
    """Load the compiled kernels :func:`step` calls on ``model``: one step, and the compiled loop of several steps
    under a held force (``steps``, which a simulator takes when a timer tick comes late), with the argument types
    the stepping passes. From numba's on-disk cache each load takes tens of ms, which inside a node's callback
    stalls its wall-clock pacing (the demo's dynamics node fell 0.06 s behind at its first tick of two steps).
    The results are dropped."""
    tau = np.zeros(model.nv)
    step(model, q, v, tau, dt, method=method)
    if getattr(model, "fast_advance", None) is not None:
        step(model, q, v, tau, dt, method=method, steps=2, bounds=(np.full(model.nv, math.inf), math.inf))


def _with_world_wrench(model, tab: Tableau, tau, wrench_world):
    """``tau`` as :func:`_step` takes it: a vector, or a function of the stage (per-stage rows, a world-fixed
    wrench)."""
    if not callable(tau):
        tau = np.asarray(tau, dtype=float)
        if tau.ndim == 2:
            if tau.shape[0] != len(tab.b):
                raise ValueError(f"tau has {tau.shape[0]} rows; the {len(tab.b)}-stage tableau needs one per stage")
            stages = iter(tau)  # _step evaluates tau once per stage, in order
            tau = lambda t_stage, q, v: next(stages)  # noqa: E731
    if wrench_world is None:
        return tau
    W = np.asarray(wrench_world, dtype=float).reshape(6)
    base = tau

    def tau_world(t_stage, q, v):
        R_world_base = model.base_rotation(q)
        W_base = np.concatenate([R_world_base.T @ W[:3], R_world_base.T @ W[3:]])
        tau_stage = base(t_stage, q, v) if callable(base) else base
        return tau_stage + model.wrench_to_generalized(q, W_base)[0]

    return tau_world


def _step(model, tab: Tableau, q, v, tau, dt, t):
    const_tau = None if callable(tau) else np.asarray(tau, dtype=float)
    passive = getattr(model, "passive_active", False)
    ks, accs = [], []
    for j, a_row in enumerate(tab.A):
        if j == 0:
            q_j, v_j, k_j = q, v, v
        else:
            psi = dt * sum(a * k for a, k in zip(a_row, ks) if a != 0.0)
            v_j = v + dt * sum(a * acc for a, acc in zip(a_row, accs) if a != 0.0)
            q_j = model.integrate(q, psi)
            k_j = model.dexp_inv(-psi) @ v_j
        tau_j = const_tau if const_tau is not None else tau(t + tab.c[j] * dt, q_j, v_j)
        if passive:  # springs, dampers, friction, the water's loads: M v̇ + C v + g = τ + τ_p (passive.py)
            tau_j = tau_j + model.passive_forces(q_j, v_j)
        ks.append(k_j)
        accs.append(model.forward_dynamics(q_j, v_j, tau_j))
    phi = dt * sum(b * k for b, k in zip(tab.b, ks))
    v_next = v + dt * sum(b * acc for b, acc in zip(tab.b, accs))
    return model.integrate(q, phi), v_next


def simulate(model, q0, v0, tau: Torque, dt: float, steps: int, method: str = "rk4", t0: float = 0.0):
    """Integrate ``steps`` steps of size ``dt`` from ``(q0, v0)``.

    Returns ``(t, q, v)`` with shapes ``(steps+1,)``, ``(steps+1, nq)``, ``(steps+1, nv)``; row 0 is the initial
    state. ``tau`` is a constant generalised-force vector or a function ``tau(t, q, v)``.
    """
    tab = _tableau(method)
    dt = check_time_step(dt)
    steps = int(steps)
    if steps < 0:
        raise ValueError("steps must be >= 0")
    t = t0 + dt * np.arange(steps + 1)
    fast = getattr(model, "fast_simulate", None)
    if fast is not None and not callable(tau) and np.ndim(tau) == 1:
        qs, vs = fast(q0, v0, tau, dt, steps, method)
        return t, qs, vs
    qs = np.empty((steps + 1, model.nq))
    vs = np.empty((steps + 1, model.nv))
    q = np.asarray(q0, dtype=float).copy()
    v = np.asarray(v0, dtype=float).copy()
    qs[0], vs[0] = q, v
    for k in range(steps):
        q, v = _step(model, tab, q, v, tau, dt, t[k])
        qs[k + 1], vs[k + 1] = q, v
    return t, qs, vs
