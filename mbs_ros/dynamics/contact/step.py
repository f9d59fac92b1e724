"""One time step with contacts and joint limits: velocity level, integrated on the group (``docs/contact.md``).

    v_f = v + h M⁻¹(τ − C v − g)              (the free velocity: ``Model.forward_dynamics``, passive forces in τ)
    c   = J v⁺ + φ₊/h,   v⁺ = v_f + M⁻¹ Jᵀ λ   (λ impulses, :mod:`mbs_ros.dynamics.contact.solver` on G = J M⁻¹ Jᵀ)
    q⁺  = q · exp(h v⁺)                        (``Model.integrate``: the group's exponential, no chart)

The symplectic (semi-implicit) Euler step of Stewart & Trinkle / Anitescu & Potra on the Lie group. ``φ`` is the
signed distance of a contact (or a joint's distance to its limit); a row is in the problem when ``φ`` is within
the margin. Stabilisation: a gap ``φ > 0`` enters as ``φ/h`` (the contact may close it within the step, no more),
a penetration ``φ < 0`` as 0 (never pushed out by a velocity: an impulse does no positive work, ``λᵀc ≤ 0``, so
the contact never injects kinetic energy). What penetration the step leaves (second order in h: a body turning
about its contact moves along the group's exponential, not along the constraint) deeper than ``slop`` is removed
from the positions alone before the step (post-stabilisation, Cline & Pai 2003: the least M-norm shift ``δ =
M⁻¹J_nᵀμ``, ``μ ≥ 0`` from the same solver with the normal rows only; a joint past its limit goes back onto it
along its own coordinate, not in the M-metric, which would move the other joints too), so no velocity comes from it; the
potential energy it restores (the height a body turning on SE(3) lost to the exponential's screw) is taken from
the kinetic energy of the bodies it moved (their velocities scaled down together), so it never adds energy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError
from scipy.linalg.lapack import dpotrf, dpotrs

from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.solver import SolveResult, solve

__all__ = ["Contact", "contact_rows", "delassus", "free_velocity", "limit_rows", "step", "StepInfo"]


@dataclass(frozen=True)
class Contact:
    """One contact point between body ``a`` and body ``b`` (each ``(model index, tree body index)`` in the
    scene; ``b`` None: the world): ``point`` in the world, ``normal`` (unit, world, pointing from b to a: a
    separating ``a`` has ``c_n > 0``), signed distance ``distance`` (negative: penetration), friction ``mu``."""

    a: tuple
    point: np.ndarray
    normal: np.ndarray
    distance: float
    mu: float
    b: tuple | None = None
    name: str = ""


def _frames(normals: np.ndarray) -> np.ndarray:
    """(n, 3, 3) contact frames, rows normal, tangent 1, tangent 2 (a right-handed orthonormal basis)."""
    n = normals.shape[0]
    e = np.zeros((n, 3))
    e[np.arange(n), np.argmin(np.abs(normals), axis=1)] = 1.0
    t1 = _cross(normals, e)
    t1 /= np.sqrt((t1 * t1).sum(axis=1))[:, None]
    return np.stack([normals, t1, _cross(normals, t1)], axis=1)


def _cross(a, b):
    """Row-wise a × b of (n, 3) arrays (np.cross's overhead dominates at these sizes)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def _side_rows(model, kin, bodies, points, frames):
    """(n, 3, nv): contact-frame velocity rows of the material points ``points`` (n, 3, world) of ``bodies``."""
    R0, t0 = kin.T_base[:3, :3], kin.T_base[:3, 3]
    p = (points - t0) @ R0  # base axes, from the base origin
    S = kin.S  # (nv, 6) base-frame columns
    # the point's velocity per column, base axes: v + ω × p = v − p × ω  → (n, nv, 3)
    lin = S[None, :, :3] - _cross(p[:, None, :], S[None, :, 3:])
    lin *= model.tree.support[bodies][:, :, None]
    FR = frames @ R0  # (n, 3, 3): contact rows in base axes
    rows = np.einsum("nij,nvj->niv", FR, lin)
    mm = model.mimic_reduction
    return rows if mm is None else rows @ mm.G  # mimic joints: the full tree's rows along v_full = G v


def contact_rows(models, kins, offsets, nv, contacts):
    """``(J (3n, nv), distance (n,), mu (n,))`` of the contacts in the scene's velocity (the models' velocities
    stacked, model ``k`` from ``offsets[k]``): rows normal, tangent 1, tangent 2 each."""
    n = len(contacts)
    J = np.zeros((n, 3, nv))
    if n == 0:
        return J.reshape(0, nv), np.zeros(0), np.zeros(0)
    points = np.array([c.point for c in contacts], dtype=float)
    frames = _frames(np.array([c.normal for c in contacts], dtype=float))
    dist = np.array([c.distance for c in contacts], dtype=float)
    mu = np.array([c.mu for c in contacts], dtype=float)
    for side, sign in ((0, 1.0), (1, -1.0)):
        groups = {}
        for i, c in enumerate(contacts):
            body = c.a if side == 0 else c.b
            if body is not None:
                groups.setdefault(body[0], []).append((i, body[1]))
        for k, items in groups.items():
            idx = np.array([i for i, _ in items])
            bodies = np.array([b for _, b in items])
            rows = _side_rows(models[k], kins[k], bodies, points[idx], frames[idx])
            J[idx, :, offsets[k]:offsets[k] + models[k].nv] += sign * rows
    return J.reshape(3 * n, nv), dist, mu


def limit_rows(model, q, margin: float):
    """``(J (k, nv), distance (k,), names)`` of the joint limits within ``margin`` of ``q``: a lower limit as
    ``+v_j``, an upper one as ``−v_j`` (so ``c ≥ 0`` keeps the joint inside)."""
    lower, upper = model.position_limits
    joint_iq, joint_iv = alg.joint_coordinates(model)
    rows, dist, names = [], [], []
    for j, name in enumerate(model.joint_names):
        lo, hi = lower[j], upper[j]
        if not (np.isfinite(lo) or np.isfinite(hi)):
            continue
        iq, iv = int(joint_iq[j]), int(joint_iv[j])
        x = q[iq]
        for sign, gap in ((1.0, x - lo), (-1.0, hi - x)):
            if np.isfinite(gap) and gap <= margin:
                r = np.zeros(model.nv)
                r[iv] = sign
                rows.append(r)
                dist.append(gap)
                names.append(f"{name} {'lower' if sign > 0 else 'upper'}")
    if not rows:
        return np.zeros((0, model.nv)), np.zeros(0), []
    return np.array(rows), np.array(dist), names


@dataclass
class StepInfo:
    """What the contact step did: the solver's result, the rows' impulses by kind, and the mean power of the
    constraints' impulses over the step (``λᵀJ(v_f + v⁺)/(2h)``: the kinetic energy they took, divided by h;
    ≤ 0, W): friction, impacts and limit stops as one dissipative port."""

    result: SolveResult | None
    n_contacts: int
    n_limits: int
    power: float
    contacts: tuple = ()
    limit_names: tuple = ()


def warm_start(info, contacts, limit_names, tolerance):
    """The last step's impulses for the rows that are still there: a contact of the same pair whose point moved
    less than ``tolerance``, a limit by its name; zero for new rows."""
    nc, nl = len(contacts), len(limit_names)
    lam = np.zeros(3 * nc + nl)
    if info is None or info.result is None:
        return lam
    old = info.result.lam
    by_name = {}
    for i, c in enumerate(info.contacts):
        by_name.setdefault(c.name, []).append(i)
    for i, c in enumerate(contacts):
        best, best_d = -1, tolerance
        for j in by_name.get(c.name, ()):
            d = float(np.linalg.norm(np.asarray(info.contacts[j].point) - np.asarray(c.point)))
            if d <= best_d:
                best, best_d = j, d
        if best >= 0:
            lam[3 * i:3 * i + 3] = old[3 * best:3 * best + 3]
    old_limits = {name: old[3 * info.n_contacts + k] for k, name in enumerate(info.limit_names)}
    for k, name in enumerate(limit_names):
        lam[3 * nc + k] = old_limits.get(name, 0.0)
    return lam


def free_velocity(models, qs, vs, taus, h: float):
    """``(offsets (n_models + 1,), v_f (nv,), kinematics per model)``: the scene's free velocity
    ``v + h M⁻¹(τ − C v − g)`` (passive forces in τ), model ``k`` from ``offsets[k]``."""
    offsets = np.concatenate([[0], np.cumsum([m.nv for m in models])]).astype(int)
    v_free = np.empty(int(offsets[-1]))
    kins = []
    for k, model in enumerate(models):
        q, v, tau = qs[k], vs[k], np.asarray(taus[k], dtype=float)
        if model.passive_active:
            tau = tau + model.passive_forces(q, v)
        v_free[offsets[k]:offsets[k + 1]] = v + h * model.forward_dynamics(q, v, tau)
        mm = model.mimic_reduction  # the contact rows: the full tree's kinematics (its bodies carry the shapes)
        kins.append(alg.kinematics(model, q, inertia=False) if mm is None else
                    alg.kinematics(mm.full, mm.q_full(q), inertia=False))
    return offsets, v_free, kins


def delassus(models, qs, offsets, J):
    """``(M⁻¹Jᵀ (nv, m), G = J M⁻¹Jᵀ (m, m))`` of the rows ``J`` (m, nv); ``M`` block diagonal, one block per
    model."""
    MinvJt = np.empty((J.shape[1], J.shape[0]))
    for k, model in enumerate(models):
        cols = slice(offsets[k], offsets[k + 1])
        MinvJt[cols] = _cho_solve(model.mass_matrix(qs[k]), J[:, cols].T)
    return MinvJt, J @ MinvJt


def _cho_solve(M, B):
    """``M⁻¹ B`` by Cholesky: what ``cho_solve(cho_factor(M), B)`` computes (LAPACK's dpotrf then dpotrs on the
    upper triangle, the same numbers), without SciPy's wrappers (their checks and dispatch cost ~7 times the two
    calls on a 18×18 mass matrix, every contact step)."""
    M, B = np.asarray(M), np.asarray(B)
    if M.dtype != np.float64 or B.dtype != np.float64 or B.size == 0 or M.ndim != 2:
        from scipy.linalg import cho_factor, cho_solve
        return cho_solve(cho_factor(M), B)
    if not (np.isfinite(M).all() and np.isfinite(B).all()):
        raise ValueError("array must not contain infs or NaNs")
    c, info = dpotrf(M, lower=False, clean=False)
    if info > 0:
        raise LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    if info < 0:
        raise ValueError(f'LAPACK reported an illegal value in {-info}-th argument on entry to "POTRF".')
    x, info = dpotrs(c, B, lower=False)
    if info != 0:
        raise ValueError(f"illegal value in {-info}th argument of internal potrs")
    return x


def step(models, qs, vs, taus, h: float, contacts=(), limits: bool = True, margin: float = 1e-3, warm=None,
         max_sweeps: int = 100, slop: float = 1e-9):
    """One contact time step of a scene (module docstring): ``models`` move independently but for the contacts
    between them; ``qs``, ``vs``, ``taus`` one array per model. Returns ``(qs⁺, vs⁺, StepInfo)``. ``contacts``
    is a sequence of :class:`Contact`; with ``limits`` each model's joint limits within ``margin`` are rows
    too. ``warm`` (the last step's :class:`StepInfo`) starts the solver from the impulses of the rows that are
    still there."""
    n_models = len(models)
    qs = [np.asarray(q, dtype=float) for q in qs]
    vs = [np.asarray(v, dtype=float) for v in vs]
    offsets, v_free, kins = free_velocity(models, qs, vs, taus, h)
    nv = int(offsets[-1])
    active = tuple(c for c in contacts if c.distance <= margin)
    Jc, dc, mu = contact_rows(models, kins, offsets, nv, active)
    Jl, dl, names = [np.zeros((0, nv))], [np.zeros(0)], []
    if limits:
        for k, model in enumerate(models):
            J_k, d_k, n_k = limit_rows(model, qs[k], margin)
            if d_k.shape[0]:
                J = np.zeros((d_k.shape[0], nv))
                J[:, offsets[k]:offsets[k + 1]] = J_k
                Jl.append(J)
                dl.append(d_k)
                names += [f"{k}:{n}" for n in n_k]
    Jl, dl = np.vstack(Jl), np.concatenate(dl)
    nc, nl = mu.shape[0], dl.shape[0]
    res = None
    power = 0.0
    v_next = v_free
    if nc or nl:
        J = np.vstack([Jc, Jl])
        MinvJt, G = delassus(models, qs, offsets, J)
        g = J @ v_free
        gap = np.concatenate([dc, dl])
        normal_rows = np.concatenate([3 * np.arange(nc), 3 * nc + np.arange(nl)])
        g[normal_rows] += np.maximum(gap, 0.0) / h
        lam0 = warm_start(warm, active, names, 10.0 * margin)
        res = solve(G, g, mu, nc, lam0=lam0, max_sweeps=max_sweeps)
        v_next = v_free + MinvJt @ res.lam
        # the impulse's exact work on the kinetic energy, λᵀJ(v_f + v⁺)/2 (= ½v⁺ᵀMv⁺ − ½v_fᵀMv_f), over the step
        power = 0.5 * float(res.lam @ (J @ (v_free + v_next))) / h
        deep = gap < -slop
        if np.any(deep):  # post-stabilisation: move q (not v) out of the penetration
            delta = np.zeros(nv)
            if np.any(deep[:nc]):  # contacts: the least M-norm shift
                rows = normal_rows[:nc]
                shift = solve(G[np.ix_(rows, rows)], np.minimum(gap[:nc] + slop, 0.0), np.zeros(0), 0,
                              max_sweeps=max_sweeps)
                delta += MinvJt[:, rows] @ shift.lam
            over = deep[nc:]
            if np.any(over):  # joints past a limit: back onto it along the joint alone (the M-metric would move
                # the other joints too, by much where M is ill-conditioned)
                delta += J[3 * nc:][over].T @ -(gap[nc:][over] + slop)
            moved = [k for k in range(n_models) if np.any(delta[offsets[k]:offsets[k + 1]] != 0.0)]
            shifted = list(qs)
            for k in moved:
                shifted[k] = models[k].integrate(qs[k], delta[offsets[k]:offsets[k + 1]], 1.0)
            # the shift must not create energy: the potential energy it restores comes out of the kinetic energy
            # of the bodies it moved (their velocities scaled down together, directions kept)
            gained = sum(models[k].potential_energy(shifted[k]) - models[k].potential_energy(qs[k]) for k in moved)
            if gained > 0.0:
                kinetic = sum(models[k].kinetic_energy(shifted[k], v_next[offsets[k]:offsets[k + 1]]) for k in moved)
                factor = math.sqrt(max(0.0, 1.0 - gained / kinetic)) if kinetic > 0.0 else 0.0
                for k in moved:
                    v_next[offsets[k]:offsets[k + 1]] *= factor
            qs = shifted
    q_out = [m.integrate(qs[k], v_next[offsets[k]:offsets[k + 1]], h) for k, m in enumerate(models)]
    v_out = [v_next[offsets[k]:offsets[k + 1]].copy() for k in range(n_models)]
    return q_out, v_out, StepInfo(res, nc, nl, power, active, tuple(names))
