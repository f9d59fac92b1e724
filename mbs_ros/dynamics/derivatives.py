"""Derivatives of the dynamics with respect to the state and the inputs, on the group.

Every derivative with respect to q is taken along the right-trivialised increment the integrators use,
``q ⊕ δ = model.integrate(q, δ)`` (δ ∈ R^nv: the base group's body-frame tangent, then the joints), as
Pinocchio's ``computeRNEADerivatives`` / ``computeABADerivatives`` do for a free flyer:

* :func:`rnea_derivatives`: ``∂τ/∂q, ∂τ/∂v, ∂τ/∂a (= M)`` of the rigid inverse dynamics ``τ = ID(q, v, a)``;
* :func:`aba_derivatives`: ``∂a/∂q, ∂a/∂v, ∂a/∂τ (= M⁻¹)`` of the rigid forward dynamics ``a = FD(q, v, τ)``;
* :func:`forward_dynamics_derivatives`: the same for the acceleration the simulation integrates,
  ``a = FD(q, v, τ + τ_p(q, v))`` with the passive forces τ_p (:meth:`Model.passive_forces`);
* :func:`central_differences`: that acceleration's derivatives by central differences on the group, the
  numerical reference (like MuJoCo's ``mjd_transitionFD``), for checks and for what has no closed form.
"""
from __future__ import annotations

import numpy as np

from .passive_derivatives import passive_derivatives

__all__ = ["rnea_derivatives", "aba_derivatives", "forward_dynamics_derivatives", "central_differences",
           "simulated_acceleration"]


def simulated_acceleration(model, q, v, tau, passive: bool = True) -> np.ndarray:
    """``FD(q, v, τ + τ_p(q, v))``: the acceleration the integrators use (τ_p only with ``passive``)."""
    tau = np.asarray(tau, dtype=float)
    if passive and model.passive_active:
        tau = tau + model.passive_forces(q, v)
    return model.forward_dynamics(q, v, tau)


def central_differences(model, q, v, tau, passive: bool = True, h: float = 1e-6):
    """``(a, ∂a/∂q, ∂a/∂v, ∂a/∂τ)`` of :func:`simulated_acceleration` by central differences of step ``h`` along
    ``q ⊕ δ`` and along v and τ (error O(h²)); a reference, ~4 nv forward-dynamics calls."""
    q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau))
    nv = model.nv
    a = simulated_acceleration(model, q, v, tau, passive)
    dq, dv, dt = np.empty((nv, nv)), np.empty((nv, nv)), np.empty((nv, nv))
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        dq[:, i] = (simulated_acceleration(model, model.integrate(q, e), v, tau, passive)
                    - simulated_acceleration(model, model.integrate(q, -e), v, tau, passive)) / (2 * h)
        dv[:, i] = (simulated_acceleration(model, q, v + e, tau, passive)
                    - simulated_acceleration(model, q, v - e, tau, passive)) / (2 * h)
        dt[:, i] = (simulated_acceleration(model, q, v, tau + e, passive)
                    - simulated_acceleration(model, q, v, tau - e, passive)) / (2 * h)
    return a, dq, dv, dt


# SCAFFOLD (issue 20 contract): the three functions below return the contracted values by central differences
# until the analytical versions replace their bodies; their signatures and meanings are the contract.
def rnea_derivatives(model, q, v, a, f_ext=None):
    """``(∂τ/∂q, ∂τ/∂v, ∂τ/∂a)``, each (nv, nv), of the rigid inverse dynamics ``model.inverse_dynamics(q, v, a,
    f_ext)`` (no passive forces; ``f_ext`` body-fixed wrenches held constant in their body frames)."""
    q, v, a = (np.asarray(x, dtype=float) for x in (q, v, a))
    nv, h = model.nv, 1e-6
    ID = model.inverse_dynamics
    dq, dv = np.empty((nv, nv)), np.empty((nv, nv))
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        dq[:, i] = (ID(model.integrate(q, e), v, a, f_ext) - ID(model.integrate(q, -e), v, a, f_ext)) / (2 * h)
        dv[:, i] = (ID(q, v + e, a, f_ext) - ID(q, v - e, a, f_ext)) / (2 * h)
    return dq, dv, model.mass_matrix(q)


def aba_derivatives(model, q, v, tau, f_ext=None):
    """``(∂a/∂q, ∂a/∂v, ∂a/∂τ)`` of the rigid forward dynamics ``a = model.forward_dynamics(q, v, τ, f_ext)``:
    ``−M⁻¹ ∂ID/∂q``, ``−M⁻¹ ∂ID/∂v`` at that a, and ``M⁻¹``."""
    a = model.forward_dynamics(q, v, tau, f_ext)
    dq, dv, M = rnea_derivatives(model, q, v, a, f_ext)
    Minv = np.linalg.inv(M)
    return -Minv @ dq, -Minv @ dv, Minv


def forward_dynamics_derivatives(model, q, v, tau, passive: bool = True):
    """``(a, ∂a/∂q, ∂a/∂v, ∂a/∂τ)`` of :func:`simulated_acceleration`: ``M⁻¹(∂τ_p/∂x − ∂ID/∂x)`` at the
    simulated acceleration (x = q, v), ``M⁻¹`` for τ."""
    q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau))
    total = tau
    use_p = passive and model.passive_active
    if use_p:
        total = tau + model.passive_forces(q, v)
    a = model.forward_dynamics(q, v, total)
    dq, dv, M = rnea_derivatives(model, q, v, a)
    if use_p:
        pq, pv = passive_derivatives(model, q, v)
        dq, dv = dq - pq, dv - pv
    Minv = np.linalg.inv(M)
    return a, -Minv @ dq, -Minv @ dv, Minv
