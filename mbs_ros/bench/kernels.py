"""Section 1: the dynamics kernels against Pinocchio, same URDF text, same states, same layout.

Pinocchio's model is ``pin.buildModelFromXML(urdf)`` (a free-flyer root joint for an SE(3) base) with our gravity;
its coordinates are ours exactly (free-flyer q = [x y z qx qy qz qw], v = [body linear; body angular]).

| kernel | ours | Pinocchio | agreement checked on |
| --- | --- | --- | --- |
| rnea | ``inverse_dynamics(q, v, a)`` | ``rnea`` | τ |
| crba | ``mass_matrix(q)`` | ``crba`` (upper triangle; mirrored for the check only) | M |
| computeCoriolisMatrix | ``coriolis_matrix(q, v)`` | ``computeCoriolisMatrix`` | C v (C itself is not unique: both
  satisfy Ṁ − 2C skew, with different factorisations), on the scale of max|M| max|v|² |
| aba | ``forward_dynamics(q, v, τ)`` | ``aba`` | q̈ |
| computeAllTerms | ``all_terms(q, v)`` (M, C v + g, g) | ``computeAllTerms`` (which also computes Jacobians, centre of
  mass and energies: a superset) | M, nle, g |
"""
from __future__ import annotations

import numpy as np

from mbs_ros.bench import timing
from mbs_ros.bench.timing import rel_err

KERNELS = ("rnea", "crba", "computeCoriolisMatrix", "aba", "computeAllTerms")
TARGET = {"aba": 3.0}
DEFAULT_TARGET = 5.0


def pin_model(case):
    import pinocchio as pin

    model = case.model
    if model.base == "fixed":
        pm = pin.buildModelFromXML(case.urdf)
    elif model.base == "se3":
        pm = pin.buildModelFromXML(case.urdf, pin.JointModelFreeFlyer())
    else:
        raise ValueError(f"no Pinocchio root joint for base {model.base!r} here")
    pm.gravity.linear[:] = model.gravity
    if (pm.nq, pm.nv) != (model.nq, model.nv):
        raise AssertionError(f"{case.key}: Pinocchio has nq, nv = {pm.nq}, {pm.nv}, ours {model.nq}, {model.nv}")
    names = tuple(pm.names[2 if model.base != "fixed" else 1:])
    if names != model.joint_names:
        raise AssertionError(f"{case.key}: joint order differs from Pinocchio's")
    return pm


def _all_terms(model):
    if hasattr(model, "all_terms"):
        return model.all_terms
    return lambda q, v: (model.mass_matrix(q), model.nonlinear_effects(q, v), model.gravity_forces(q))


def run(case, plan: timing.Plan, tol: float, seed: int = 0):
    """One row per kernel: timings, agreement, target."""
    import pinocchio as pin

    model = case.model
    pm = pin_model(case)
    pd = pm.createData()
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
    all_terms = _all_terms(model)

    def sym(M):
        M = np.array(M)
        return np.triu(M) + np.triu(M, 1).T

    M = model.mass_matrix(q)
    checks = {
        "rnea": rel_err(model.inverse_dynamics(q, v, a), pin.rnea(pm, pd, q, v, a)),
        "crba": rel_err(M, sym(pin.crba(pm, pd, q))),
        "computeCoriolisMatrix": rel_err(model.coriolis_matrix(q, v) @ v,
                                         np.array(pin.computeCoriolisMatrix(pm, pd, q, v)) @ v,
                                         np.abs(M).max() * np.abs(v).max() ** 2),
        "aba": rel_err(model.forward_dynamics(q, v, tau), pin.aba(pm, pd, q, v, tau)),
    }
    Mo, nle, g = all_terms(q, v)
    pin.computeAllTerms(pm, pd, q, v)
    checks["computeAllTerms"] = max(rel_err(Mo, sym(pd.M)), rel_err(nle, pd.nle), rel_err(g, pd.g))
    calls = {
        "rnea": (lambda: model.inverse_dynamics(q, v, a), lambda: pin.rnea(pm, pd, q, v, a)),
        "crba": (lambda: model.mass_matrix(q), lambda: pin.crba(pm, pd, q)),
        "computeCoriolisMatrix": (lambda: model.coriolis_matrix(q, v),
                                  lambda: pin.computeCoriolisMatrix(pm, pd, q, v)),
        "aba": (lambda: model.forward_dynamics(q, v, tau), lambda: pin.aba(pm, pd, q, v, tau)),
        "computeAllTerms": (lambda: all_terms(q, v), lambda: pin.computeAllTerms(pm, pd, q, v)),
    }
    rows = []
    for k in KERNELS:
        err = checks[k]
        pair = timing.compare(*calls[k], plan)
        target = TARGET.get(k, DEFAULT_TARGET)
        rows.append(dict(section="kernels", model=case.key, label=case.label, nv=model.nv, nbodies=case.nbodies,
                         kernel=k, **pair.as_dict(), err=err, tol=tol, agree=bool(err <= tol), reference="Pinocchio",
                         target=f"<= {target:g}x", target_ratio=target, met=bool(pair.ratio <= target)))
    return rows


def run_alone(case, plan: timing.Plan, tol: float, why: str, seed: int = 0):
    """Rows without a Pinocchio side (``why`` says why): ours timed alone, agreement checked against our own
    numpy reference backend (``model.with_backend("numpy")``)."""
    model = case.model
    ref = model.with_backend("numpy") if hasattr(model, "with_backend") else model
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
    all_terms, ref_all = _all_terms(model), _all_terms(ref)
    M = ref.mass_matrix(q)
    Mo, nle, g = all_terms(q, v)
    Mr, nler, gr = ref_all(q, v)
    checks = {
        "rnea": rel_err(model.inverse_dynamics(q, v, a), ref.inverse_dynamics(q, v, a)),
        "crba": rel_err(model.mass_matrix(q), M),
        "computeCoriolisMatrix": rel_err(model.coriolis_matrix(q, v) @ v, ref.coriolis_matrix(q, v) @ v,
                                         np.abs(M).max() * np.abs(v).max() ** 2),
        "aba": rel_err(model.forward_dynamics(q, v, tau), ref.forward_dynamics(q, v, tau)),
        "computeAllTerms": max(rel_err(Mo, Mr), rel_err(nle, nler), rel_err(g, gr)),
    }
    calls = {
        "rnea": lambda: model.inverse_dynamics(q, v, a),
        "crba": lambda: model.mass_matrix(q),
        "computeCoriolisMatrix": lambda: model.coriolis_matrix(q, v),
        "aba": lambda: model.forward_dynamics(q, v, tau),
        "computeAllTerms": lambda: all_terms(q, v),
    }
    rows = []
    for k in KERNELS:
        err = checks[k]
        rows.append(dict(section="kernels", model=case.key, label=case.label, nv=model.nv, nbodies=case.nbodies,
                         kernel=k, ours_us=timing.alone(calls[k], plan), peer_us=None, ratio=None, ratio_q25=None,
                         ratio_q75=None, err=err, tol=tol, agree=bool(err <= tol), reference="ours (numpy backend)",
                         target="", target_ratio=None, met=None, note=why))
    return rows
