"""Section ``derivatives``: the analytical derivatives of the dynamics against Pinocchio's (issue 20).

Same URDF text, same state, same layout as the ``kernels`` section (:func:`mbs_ros.bench.kernels.pin_model`); the derivatives
with respect to q are along ``q ⊕ δ`` on both sides (Pinocchio's free-flyer convention is ours).

| kernel | ours | Pinocchio | agreement checked on |
| --- | --- | --- | --- |
| computeRNEADerivatives | ``Model.rnea_derivatives(q, v, a)`` | ``computeRNEADerivatives`` | ∂τ/∂q, ∂τ/∂v, M |
| computeABADerivatives | ``Model.aba_derivatives(q, v, τ)`` | ``computeABADerivatives`` | ∂q̈/∂q, ∂q̈/∂v, M⁻¹ |

Pinocchio fills the upper triangle of M and M⁻¹ (mirrored for the check only). Target: within 2x of Pinocchio,
for the Model methods (argument checks included). Beside them, for information, the compiled kernel alone
(:class:`~mbs_ros.dynamics.kernels.derivatives.DerivativeKernels` of ``model.compiled_kernels``, its own
conversions and checks only) against the same Pinocchio call: what the way through the Model costs.
"""
from __future__ import annotations

import numpy as np

from mbs_ros.bench import timing
from mbs_ros.bench.kernels import pin_model
from mbs_ros.bench.timing import rel_err

KERNELS = ("computeRNEADerivatives", "computeABADerivatives")
TARGET = 2.0


def _sym(M):
    M = np.array(M)
    return np.triu(M) + np.triu(M, 1).T


def run(case, plan: timing.Plan, tol: float, seed: int = 0):
    """One row per derivative kernel: timings, agreement (the worst of the three matrices), target."""
    import pinocchio as pin

    model = case.model
    pm = pin_model(case)
    pd = pm.createData()
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
    ours = {
        "computeRNEADerivatives": lambda: model.rnea_derivatives(q, v, a),
        "computeABADerivatives": lambda: model.aba_derivatives(q, v, tau),
    }
    dk = None
    if model.compiled_kernels is not None:
        from mbs_ros.dynamics.kernels.derivatives import DerivativeKernels

        dk = DerivativeKernels(model.compiled_kernels)
    kernel = {
        "computeRNEADerivatives": None if dk is None else (lambda: dk.rnea_derivatives(q, v, a)),
        "computeABADerivatives": None if dk is None else (lambda: dk.aba_derivatives(q, v, tau)),
    }
    peer = {
        "computeRNEADerivatives": lambda: pin.computeRNEADerivatives(pm, pd, q, v, a),
        "computeABADerivatives": lambda: pin.computeABADerivatives(pm, pd, q, v, tau),
    }
    rows = []
    for k in KERNELS:
        got = ours[k]()
        ref = [np.array(x) for x in peer[k]()]
        ref[2] = _sym(ref[2])
        err = max(rel_err(x, y) for x, y in zip(got, ref))
        if kernel[k] is not None:
            err = max(err, *(rel_err(x, y) for x, y in zip(kernel[k](), ref)))
        pair = timing.compare(ours[k], peer[k], plan)
        alone = None if kernel[k] is None else timing.compare(kernel[k], peer[k], plan)
        rows.append(dict(section="derivatives", model=case.key, label=case.label, nv=model.nv,
                         nbodies=case.nbodies, kernel=k, **pair.as_dict(),
                         kernel_us=None if alone is None else alone.ours_us,
                         kernel_ratio=None if alone is None else alone.ratio, err=err, tol=tol, agree=bool(err <= tol),
                         reference="Pinocchio", target=f"<= {TARGET:g}x", target_ratio=TARGET,
                         met=bool(pair.ratio <= TARGET)))
    return rows
