"""Linear models of the dynamics at an operating point: ``ẋ = A x + B u`` on the state ``x = (δq, δv)``.

``δq`` is the tangent increment ``q = q₀ ⊕ δq`` (``model.difference(q₀, q)``), ``δv = v − v₀``; with a moving
operating point (a relative equilibrium, v₀ ≠ 0) ``δq̇ = δv − ad_{v₀} δq`` on the base (first order of
``d/dt log(q₀⁻¹ q)``), so ``A = [[−ad_{v₀}, I], [∂a/∂q, ∂a/∂v]]`` and ``B = [[0], [M⁻¹ ∂τ/∂u]]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .derivatives import forward_dynamics_derivatives

__all__ = ["LinearModel", "linearize", "input_matrix"]


@dataclass(frozen=True)
class LinearModel:
    """``ẋ = A x + B u`` (continuous, ``dt`` None) or ``x⁺ = A x + B u`` (one step of ``dt``) about
    ``(q0, v0, tau0)``: x = (δq, δv) (``state_names``), u the inputs' deviation (``input_names``)."""

    A: np.ndarray
    B: np.ndarray
    q0: np.ndarray
    v0: np.ndarray
    tau0: np.ndarray
    state_names: tuple
    input_names: tuple
    dt: float | None = None


# SCAFFOLD (issue 20 contract): continuous-time only, the inputs below; the discrete pair, LPV and export follow.
def input_matrix(model, q, inputs="generalized") -> tuple:
    """``(G, names)``: the generalised force of the inputs is ``τ = G u`` (nv × nu). ``inputs``: ``"generalized"``
    (τ itself), ``"efforts"`` (the joints' efforts), ``"wrench"`` (a base wrench ``[F; τ]`` in the base frame),
    ``"thrusters"`` (one entry per thruster, through the allocation matrix), or a list of these."""
    if not isinstance(inputs, str):
        parts = [input_matrix(model, q, k) for k in inputs]
        return np.hstack([p[0] for p in parts]), tuple(n for p in parts for n in p[1])
    nv = model.nv
    nj = len(model.joint_names)
    if inputs == "generalized":
        return np.eye(nv), tuple(f"tau[{i}]" for i in range(nv))
    if inputs == "efforts":
        G = np.zeros((nv, nj))
        G[nv - nj:, :] = np.eye(nj)
        return G, tuple(model.joint_names)
    if inputs == "wrench":
        cols = [model.wrench_to_generalized(q, e)[0] for e in np.eye(6)]
        return np.array(cols).T, ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")
    if inputs == "thrusters":
        Bt = model.thruster_matrix
        G = np.array([model.wrench_to_generalized(q, Bt[:, k])[0] for k in range(Bt.shape[1])]).reshape(-1, nv).T
        return G, tuple(model.thruster_names)
    raise ValueError(f"unknown inputs {inputs!r}: choose generalized, efforts, wrench, thrusters or a list of them")


def linearize(model, q, v, tau, inputs="generalized", passive: bool = True) -> LinearModel:
    """The continuous-time :class:`LinearModel` of the simulated dynamics at ``(q, v, τ)`` (τ: the generalised
    force applied there, nv)."""
    q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau))
    nv = model.nv
    _a, dq, dv, dtau = forward_dynamics_derivatives(model, q, v, tau, passive)
    G, names = input_matrix(model, q, inputs)
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    nb = nv - len(model.joint_names)
    if nb and model.group is not None and np.any(v[:nb]):
        A[:nb, :nb] = -_ad_base(model, v[:nb])
    A[nv:, :nv], A[nv:, nv:] = dq, dv
    B = np.vstack([np.zeros((nv, G.shape[1])), dtau @ G])
    states = tuple(f"dq[{i}]" for i in range(nv)) + tuple(f"dv[{i}]" for i in range(nv))
    return LinearModel(A, B, q, v, tau, states, names)


def _ad_base(model, v_b):
    """``ad_{v_b}`` of the base group in its velocity coordinates, by the commutator of the group's algebra."""
    # SCAFFOLD: numerical commutator through integrate/difference (second order), exact version follows.
    n, h = v_b.size, 1e-4
    out = np.zeros((n, n))
    nv = model.nv
    q0 = model.neutral()
    for i in range(n):
        x = np.zeros(nv)
        y = np.zeros(nv)
        x[:n], y[i] = v_b * h, h
        xy = model.difference(q0, model.integrate(model.integrate(q0, x), y))
        yx = model.difference(q0, model.integrate(model.integrate(q0, y), x))
        out[:, i] = (xy - yx)[:n] / h ** 2
    return out
