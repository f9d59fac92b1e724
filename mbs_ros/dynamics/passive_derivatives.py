"""Derivatives of the passive forces τ_p(q, v) (:mod:`mbs_ros.dynamics.passive`) along ``q ⊕ δ`` and v."""
from __future__ import annotations

import numpy as np

__all__ = ["passive_derivatives"]


# SCAFFOLD (issue 20 contract): central differences until the analytical version replaces the body.
def passive_derivatives(model, q, v, springs: bool = True):
    """``(∂τ_p/∂q, ∂τ_p/∂v)``, each (nv, nv), of ``model.passive_forces(q, v, springs)``; zeros without passive
    elements."""
    nv, h = model.nv, 1e-6
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    dq, dv = np.zeros((nv, nv)), np.zeros((nv, nv))
    if not model.passive_active:
        return dq, dv
    P = model.passive_forces
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        dq[:, i] = (P(model.integrate(q, e), v, springs) - P(model.integrate(q, -e), v, springs)) / (2 * h)
        dv[:, i] = (P(q, v + e, springs) - P(q, v - e, springs)) / (2 * h)
    return dq, dv
