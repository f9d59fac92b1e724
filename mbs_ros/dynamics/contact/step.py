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

A scene of one model with compiled kernels and no joint limit within the margin makes these terms in one compiled
call and finishes the step in two more (:mod:`mbs_ros.dynamics.kernels.contact_terms`; :data:`COMPILED`); any
other scene by the numpy calls here. The two agree to rounding (``test_contact_terms``).
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import LinAlgError
from scipy.linalg.lapack import dpotrf, dpotrs

from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact import kernels
from mbs_ros.dynamics.contact.solver import SolveResult, solve

__all__ = ["Contact", "ContactArrays", "contact_rows", "delassus", "free_velocity", "limit_rows", "step", "StepInfo"]


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


class ContactArrays(Sequence):
    """A sequence of :class:`Contact` held as arrays, what :func:`~mbs_ros.dynamics.contact.geometry.find_contacts`
    gives the contact step (``arrays=True``): ``points``, ``normals`` (n, 3), ``distance``, ``mu`` (n,), ``sides``
    (n, 4) (``a``'s model and body, ``b``'s or −1, −1: :func:`contact_rows`' arrays), ``keys`` (n,): a pair's
    number, equal for equal names, in the numbering ``space`` (an int) whose names are ``key_names``. The step
    reads the arrays; the names (:attr:`names`) and the :class:`Contact` objects (the same numbers) are made when
    asked for. Read only."""

    __slots__ = ("points", "normals", "distance", "mu", "sides", "keys", "key_names", "space", "_objects", "_names")

    def __init__(self, points, normals, distance, mu, sides, keys, key_names, space: int):
        self.points, self.normals, self.distance, self.mu, self.sides = points, normals, distance, mu, sides
        self.keys, self.key_names, self.space, self._objects, self._names = keys, key_names, space, None, None

    def __len__(self) -> int:
        return self.distance.shape[0]

    @property
    def names(self) -> list:
        """Each contact's name (its pair's, :attr:`Contact.name`)."""
        if self._names is None:
            key_names = self.key_names
            self._names = [key_names[k] for k in self.keys.tolist()]
        return self._names

    def _contacts(self) -> tuple:
        if self._objects is None:
            sides = self.sides.tolist()
            self._objects = tuple(
                Contact((s[0], s[1]), self.points[k], self.normals[k], d, m, None if s[2] < 0 else (s[2], s[3]),
                        name) for k, (s, d, m, name) in enumerate(zip(sides, self.distance.tolist(),
                                                                      self.mu.tolist(), self.names)))
        return self._objects

    def __getitem__(self, i):
        return self._contacts()[i]

    def __iter__(self):
        return iter(self._contacts())

    def __repr__(self) -> str:
        return f"ContactArrays({len(self)} contacts)"

    def select(self, keep: np.ndarray) -> "ContactArrays":
        """The contacts where the boolean ``keep`` (n,) is true, in order."""
        idx = np.flatnonzero(keep)
        return ContactArrays(self.points[idx], self.normals[idx], self.distance[idx], self.mu[idx], self.sides[idx],
                             self.keys[idx], self.key_names, self.space)


def _names(contacts) -> list:
    """Each contact's name (a :class:`ContactArrays`' own list)."""
    return contacts.names if isinstance(contacts, ContactArrays) else [c.name for c in contacts]


def _frames(normals: np.ndarray) -> np.ndarray:
    """(n, 3, 3) contact frames, rows normal, tangent 1, tangent 2 (a right-handed orthonormal basis)."""
    normals = np.ascontiguousarray(normals, dtype=float)
    out = np.empty((normals.shape[0], 3, 3))
    kernels.contact_frames(normals, out)
    return out


def _cross(a, b):
    """Row-wise a × b of (n, 3) arrays (np.cross's overhead dominates at these sizes)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


class _Placed:
    """What :func:`contact_rows` needs of a model with compiled kernels: its bodies' world poses ``T`` (nb, 4, 4)
    (the compiled forward kinematics; :func:`free_velocity` makes it, :class:`~mbs_ros.dynamics.algorithms.multibody.Kinematics`
    otherwise)."""

    __slots__ = ("T",)

    def __init__(self, T):
        self.T = T


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


_NO_COLS = np.zeros(0, dtype=np.int64)
#: tree -> (s_joint, support, nvb, base kind, base columns): side_rows' arrays, kept while the tree lives
_LAYOUT = weakref.WeakKeyDictionary()


def _layout(tree):
    """The arrays :func:`~mbs_ros.dynamics.contact.kernels.side_rows` reads of ``tree`` (kept per tree)."""
    out = _LAYOUT.get(tree)
    if out is None:
        nvb = int(tree.nvb)
        if nvb == 0:
            kind, cols = kernels.BASE_NONE, _NO_COLS
        elif tree.base_cols is not None:
            kind, cols = kernels.BASE_COLUMNS, np.ascontiguousarray(tree.base_cols, dtype=np.int64)
        else:
            kind, cols = kernels.BASE_SO3XR3, _NO_COLS
        # writable copies: the kernel is compiled (and warmed up) for writable arrays, the tree's are read-only
        s_joint = np.array(np.asarray(tree.s_joint, dtype=float).reshape(-1, 6))
        out = (s_joint, np.array(tree.support, dtype=float), nvb, kind, np.array(cols, dtype=np.int64))
        _LAYOUT[tree] = out
    return out


def contact_rows(models, kins, offsets, nv, contacts):
    """``(J (3n, nv), distance (n,), mu (n,))`` of the contacts in the scene's velocity (the models' velocities
    stacked, model ``k`` from ``offsets[k]``): rows normal, tangent 1, tangent 2 each."""
    J, dist, mu, _ = _contact_rows(models, kins, offsets, nv, contacts)
    return J, dist, mu


def _contact_rows(models, kins, offsets, nv, contacts):
    """:func:`contact_rows` and the contacts' points (n, 3)."""
    n = len(contacts)
    J = np.zeros((n, 3, nv))
    if n == 0:
        return J.reshape(0, nv), np.zeros(0), np.zeros(0), np.zeros((0, 3))
    points, normals, dist, mu, sides = _contact_arrays(contacts)
    frames = _frames(normals)
    for k in range(len(models)):
        kin = kins[k]
        if isinstance(kin, _Placed):  # compiled: one call from the world poses
            s_joint, support, nvb, kind, cols = _layout(models[k].tree)
            kernels.model_rows(J, sides, k, points, frames, kin.T, s_joint, support, nvb, kind, cols, int(offsets[k]))
            continue
        for side, sign in ((0, 1.0), (1, -1.0)):
            idx = np.flatnonzero(sides[:, 2 * side] == k)
            if idx.size:
                rows = _side_rows(models[k], kin, sides[idx, 2 * side + 1], points[idx], frames[idx])
                J[idx, :, offsets[k]:offsets[k] + models[k].nv] += sign * rows
    return J.reshape(3 * n, nv), dist, mu, points


#: model -> (iq, iv, lower, upper, names): its limited joints, kept while the model lives
_LIMITS = weakref.WeakKeyDictionary()


def limited_joints(model):
    """``(iq, iv, lower, upper, names)`` of the joints of ``model`` with a finite limit (kept per model)."""
    out = _LIMITS.get(model)
    if out is None:
        lower, upper = (np.asarray(x, dtype=float) for x in model.position_limits)
        keep = np.flatnonzero(np.isfinite(lower) | np.isfinite(upper))
        iq, iv = alg.joint_coordinates(model)  # in the model's own q and v (a mimic model's reduced ones)
        out = (iq[keep], iv[keep], lower[keep], upper[keep], [model.joint_names[j] for j in keep])
        _LIMITS[model] = out
    return out


def limit_rows(model, q, margin: float):
    """``(J (k, nv), distance (k,), names)`` of the joint limits within ``margin`` of ``q``: a lower limit as
    ``+v_j``, an upper one as ``−v_j`` (so ``c ≥ 0`` keeps the joint inside)."""
    iq, iv, lower, upper, joint_names = limited_joints(model)
    if iq.size:
        q = np.asarray(q, dtype=float)
        if kernels.limits_clear(q, iq, lower, upper, float(margin)):  # the common case: nothing near (one call)
            return np.zeros((0, model.nv)), np.zeros(0), []
        x = q[iq]
        below, above = x - lower, upper - x
        gaps = np.stack([below, above], axis=1)  # (k, 2): per joint its lower then its upper gap
        near = np.isfinite(gaps) & (gaps <= margin)
        if near.any():
            rows, side = np.nonzero(near)  # joint order, lower before upper
            J = np.zeros((rows.size, model.nv))
            signs = np.where(side == 0, 1.0, -1.0)
            J[np.arange(rows.size), iv[rows]] = signs
            names = [f"{joint_names[r]} {'lower' if s == 0 else 'upper'}" for r, s in zip(rows, side)]
            return J, gaps[rows, side], names
    return np.zeros((0, model.nv)), np.zeros(0), []


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
    #: the contacts' points (n, 3) as one array (the next step's warm start and the report read it), or None
    points: np.ndarray | None = field(default=None, repr=False, compare=False)


def warm_start(info, contacts, limit_names, tolerance, points=None):
    """The last step's impulses for the rows that are still there: a contact of the same pair whose point moved
    less than ``tolerance``, a limit by its name; zero for new rows. ``points`` (n, 3): the contacts' points, if
    at hand."""
    nc, nl = len(contacts), len(limit_names)
    lam = np.zeros(3 * nc + nl)
    if info is None or info.result is None:
        return lam
    old = info.result.lam
    if nc and info.contacts:
        n_old = len(info.contacts)
        was = info.contacts
        if isinstance(was, ContactArrays) and isinstance(contacts, ContactArrays) and was.space == contacts.space:
            old_ids, new_ids = was.keys, contacts.keys  # the pairs' numbers: equal for equal names
        else:
            old_names = _names(was)
            ids = {name: k for k, name in enumerate(old_names)}  # a pair's id: any number of its own (its last index)
            old_ids = np.fromiter(map(ids.__getitem__, old_names), dtype=np.int64, count=n_old)
            new_ids = np.fromiter((ids.get(name, -1) for name in _names(contacts)), dtype=np.int64, count=nc)
        old_points = info.points
        if old_points is None or old_points.shape[0] != n_old:
            old_points = np.array([c.point for c in info.contacts], dtype=float)
        if points is None:
            points = np.array([c.point for c in contacts], dtype=float)
        best = np.empty(nc, dtype=np.int64)
        kernels.match_contacts(new_ids, points, old_ids, old_points, float(tolerance), best)
        kernels.copy_matched(best, np.ascontiguousarray(old[:3 * n_old], dtype=float), lam)
    if nl and info.limit_names:
        old_limits = {name: old[3 * info.n_contacts + k] for k, name in enumerate(info.limit_names)}
        for k, name in enumerate(limit_names):
            lam[3 * nc + k] = old_limits.get(name, 0.0)
    return lam


def free_velocity(models, qs, vs, taus, h: float, poses=None):
    """``(offsets (n_models + 1,), v_f (nv,), kinematics per model)``: the scene's free velocity
    ``v + h M⁻¹(τ − C v − g)`` (passive forces in τ), model ``k`` from ``offsets[k]``; ``poses`` (per model, its
    body poses at ``qs``: :func:`row_kinematics`), if at hand."""
    offsets = np.zeros(len(models) + 1, dtype=int)
    for k, model in enumerate(models):
        offsets[k + 1] = offsets[k] + model.nv
    v_free = np.empty(int(offsets[-1]))
    kins = []
    for k, model in enumerate(models):
        q, v, tau = qs[k], vs[k], np.asarray(taus[k], dtype=float)
        if model.passive_active:
            tau = tau + model.passive_forces(q, v)
        v_free[offsets[k]:offsets[k + 1]] = v + h * model.forward_dynamics(q, v, tau)
        kins.append(row_kinematics(model, q, None if poses is None else poses[k]))
    return offsets, v_free, kins


def row_kinematics(model, q, T=None):
    """What the contact rows of ``model`` at ``q`` are built from: the compiled world poses (one call; ``T``, the
    body poses at ``q`` the compiled kernel gave, if at hand:
    :meth:`~mbs_ros.dynamics.contact.world.ContactWorld.poses`), else the numpy kinematics (a mimic model's: the
    full tree's at E(q), its bodies carry the shapes)."""
    compiled = model.compiled_kernels
    mm = model.mimic_reduction
    if compiled is not None and mm is None:
        return _Placed(compiled.body_poses(q) if T is None else T)
    return alg.kinematics(model, q, inertia=False) if mm is None else alg.kinematics(mm.full, mm.q_full(q),
                                                                                     inertia=False)


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


def _energies_kernel(model):
    """The compiled kernel whose ``energies(q, v)`` give ``model``'s kinetic and potential energy exactly as
    :meth:`~mbs_ros.dynamics.model.model.Model.kinetic_energy` and ``potential_energy`` do (they call it, through
    the backend: a compiled model without passive elements), or None."""
    compiled = model.compiled_kernels
    if compiled is None or model.passive is not None or model.mimic_reduction is not None:
        return None
    return compiled


def _potential_energy(model, q) -> float:
    """``model.potential_energy(q)``, the compiled kernel called directly where that is what it calls."""
    compiled = _energies_kernel(model)
    return model.potential_energy(q) if compiled is None else compiled.energies(q, np.zeros(model.nv))[1]


def _kinetic_energy(model, q, v) -> float:
    """``model.kinetic_energy(q, v)``, the compiled kernel called directly where that is what it calls."""
    compiled = _energies_kernel(model)
    return model.kinetic_energy(q, v) if compiled is None else compiled.energies(q, v)[0]


#: Whether a one-model scene takes the compiled path (:func:`_fast_model`); False: the numpy path, the reference
#: the benchmark's agreement column and ``test_contact_terms`` compare it with.
COMPILED = True


def _fast_model(models):
    """The compiled kernels (:class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel`) of a one-model scene whose
    model has them (no mimic joints), or None: such a scene's contact terms are one compiled call
    (:func:`~mbs_ros.dynamics.kernels.contact_terms.contact_terms`) and it moves by the compiled exponential."""
    if len(models) != 1 or not COMPILED:
        return None
    compiled = models[0].compiled_kernels
    return None if compiled is None or models[0].mimic_reduction is not None else compiled


def _contact_arrays(contacts):
    """``(points (n, 3), normals (n, 3), distance (n,), mu (n,), sides (n, 4))`` of the contacts (:func:`contact_rows`'
    arrays; a :class:`ContactArrays`' own)."""
    if isinstance(contacts, ContactArrays):
        return contacts.points, contacts.normals, contacts.distance, contacts.mu, contacts.sides
    points = np.array([c.point for c in contacts], dtype=float)
    normals = np.array([c.normal for c in contacts], dtype=float)
    dist = np.array([c.distance for c in contacts], dtype=float)
    mu = np.array([c.mu for c in contacts], dtype=float)
    sides = np.array([(c.a[0], c.a[1]) + ((-1, -1) if c.b is None else (c.b[0], c.b[1])) for c in contacts],
                     dtype=np.int64)
    return points, normals, dist, mu, sides


def _compiled_terms(model, compiled, qs, vs, taus, h, contacts, poses):
    """``((v_free, J, MinvJt, G, g), points, distance, mu)`` of a one-model scene by its compiled kernels
    (:func:`_fast_model`), or None where the numpy path must decide (a singular mass matrix: it raises)."""
    from mbs_ros.dynamics.kernels.contact_terms import contact_terms

    q, v, tau = qs[0], vs[0], np.asarray(taus[0], dtype=float)
    if model.passive_active:
        tau = tau + model.passive_forces(q, v)
    T = compiled.body_poses(q) if poses is None else poses[0]
    points, normals, dist, mu, sides = _contact_arrays(contacts)
    terms = contact_terms(compiled, q, v, tau, h, T, points, normals, dist, sides, _layout(model.tree))
    return None if terms is None else (terms, points, dist, mu)


def _finish_compiled(compiled, q, v_free, MinvJt, G, J, gap, lam, slop, h, max_sweeps, checkpoint):
    """``(q⁺, v⁺, power)`` of a one-model scene without passive elements after its solve: what :func:`step` does
    next (the velocity, the power, the post-stabilisation and the step on the group), in two compiled calls
    around the post-stabilisation's solve."""
    from mbs_ros.dynamics.kernels.contact_terms import move, velocity_after

    v_next, power, deep = velocity_after(v_free, MinvJt, lam, J, gap, slop, h)
    shift = None
    if deep:  # post-stabilisation: the least M-norm shift out of the penetration (contact rows only here)
        shift = solve(G[0::3, 0::3], np.minimum(gap + slop, 0.0), np.zeros(0), 0, max_sweeps=max_sweeps,
                      checkpoint=checkpoint).lam
    return move(compiled, q, v_next, MinvJt, shift, h), v_next, power


def step(models, qs, vs, taus, h: float, contacts=(), limits: bool = True, margin: float = 1e-3, warm=None,
         max_sweeps: int = 100, slop: float = 1e-9, checkpoint=None, poses=None):
    """One contact time step of a scene (module docstring): ``models`` move independently but for the contacts
    between them; ``qs``, ``vs``, ``taus`` one array per model. Returns ``(qs⁺, vs⁺, StepInfo)``. ``contacts``
    is a sequence of :class:`Contact`; with ``limits`` each model's joint limits within ``margin`` are rows
    too. ``warm`` (the last step's :class:`StepInfo`) starts the solver from the impulses of the rows that are
    still there. ``checkpoint`` (a callable) is called between the solver's slices and before the solve (the
    solver's own argument): the numbers are the same with it. ``poses``: each model's body poses at ``qs`` from
    its compiled kernel (:meth:`~mbs_ros.dynamics.contact.world.ContactWorld.poses`), if at hand."""
    n_models = len(models)
    qs = [np.asarray(q, dtype=float) for q in qs]
    vs = [np.asarray(v, dtype=float) for v in vs]
    offsets = [0]  # model k's velocities from offsets[k]
    for model in models:
        offsets.append(offsets[-1] + model.nv)
    nv = offsets[-1]
    if isinstance(contacts, ContactArrays):
        keep = contacts.distance <= margin
        active = contacts if keep.all() else contacts.select(keep)
    else:
        active = tuple(c for c in contacts if c.distance <= margin)
    Jl, dl, names = [], [], []
    if limits:
        for k, model in enumerate(models):
            J_k, d_k, n_k = limit_rows(model, qs[k], margin)
            if d_k.shape[0]:
                J = np.zeros((d_k.shape[0], nv))
                J[:, offsets[k]:offsets[k + 1]] = J_k
                Jl.append(J)
                dl.append(d_k)
                names += [f"{k}:{n}" for n in n_k]
    nl = sum(d.shape[0] for d in dl)
    fast = None if nl else _fast_model(models)
    terms = None if fast is None or not active else _compiled_terms(models[0], fast, qs, vs, taus, h, active, poses)
    if checkpoint is not None:  # the rows' terms built, the warm start next
        checkpoint()
    if terms is not None:  # one model with compiled kernels, contacts and no limit: its terms in one call
        (v_free, J, MinvJt, G, g), points, gap, mu = terms
        nc = mu.shape[0]
        normal_rows = None if models[0].passive is None else np.arange(0, 3 * nc, 3)  # (None: finished compiled)
    else:
        _, v_free, kins = free_velocity(models, qs, vs, taus, h, poses)
        Jc, dc, mu, points = _contact_rows(models, kins, offsets, nv, active)
        nc = mu.shape[0]
    res = None
    power = 0.0
    v_next = v_free
    if (nc or nl) and terms is None:
        if nl:
            J = np.vstack([Jc] + Jl)
            gap = np.concatenate([dc] + dl)
        else:
            J, gap = Jc, dc
        MinvJt, G = delassus(models, qs, offsets, J)
        g = J @ v_free
        normal_rows = np.concatenate([3 * np.arange(nc), 3 * nc + np.arange(nl)])
        g[normal_rows] += np.maximum(gap, 0.0) / h
    if nc or nl:
        lam0 = warm_start(warm, active, names, 10.0 * margin, points)
        if checkpoint is not None:
            checkpoint()
        res = solve(G, g, mu, nc, lam0=lam0, max_sweeps=max_sweeps, checkpoint=checkpoint)
        if checkpoint is not None:
            checkpoint()
        if terms is not None and models[0].passive is None:  # the rest of a one-model scene compiled too
            q1, v1, power = _finish_compiled(fast, qs[0], v_free, MinvJt, G, J, gap, res.lam, slop, h, max_sweeps,
                                             checkpoint)
            return [q1], [v1], StepInfo(res, nc, nl, power, active, tuple(names), points)
        v_next = v_free + MinvJt @ res.lam
        # the impulse's exact work on the kinetic energy, λᵀJ(v_f + v⁺)/2 (= ½v⁺ᵀMv⁺ − ½v_fᵀMv_f), over the step
        power = 0.5 * float(res.lam @ (J @ (v_free + v_next))) / h
        deep = gap < -slop
        if deep.any():  # post-stabilisation: move q (not v) out of the penetration
            delta = np.zeros(nv)
            if deep[:nc].any():  # contacts: the least M-norm shift
                rows = normal_rows[:nc]
                shift = solve(G[np.ix_(rows, rows)], np.minimum(gap[:nc] + slop, 0.0), np.zeros(0), 0,
                              max_sweeps=max_sweeps, checkpoint=checkpoint)
                delta += MinvJt[:, rows] @ shift.lam
            over = deep[nc:]
            if over.any():  # joints past a limit: back onto it along the joint alone (the M-metric would move
                # the other joints too, by much where M is ill-conditioned)
                delta += J[3 * nc:][over].T @ -(gap[nc:][over] + slop)
            moved = [k for k in range(n_models) if (delta[offsets[k]:offsets[k + 1]] != 0.0).any()]
            shifted = list(qs)
            for k in moved:
                shifted[k] = (models[k].integrate(qs[k], delta[offsets[k]:offsets[k + 1]], 1.0) if fast is None
                              else fast.integrate(qs[k], delta))
            # the shift must not create energy: the potential energy it restores comes out of the kinetic energy
            # of the bodies it moved (their velocities scaled down together, directions kept)
            gained = sum(_potential_energy(models[k], shifted[k]) - _potential_energy(models[k], qs[k]) for k in moved)
            if gained > 0.0:
                kinetic = sum(_kinetic_energy(models[k], shifted[k], v_next[offsets[k]:offsets[k + 1]])
                              for k in moved)
                factor = math.sqrt(max(0.0, 1.0 - gained / kinetic)) if kinetic > 0.0 else 0.0
                for k in moved:
                    v_next[offsets[k]:offsets[k + 1]] *= factor
            qs = shifted
    if fast is not None:  # one model: its compiled exponential (Model.integrate's numpy one agrees to rounding)
        q_out = [fast.integrate(qs[0], v_next * h)]
    else:
        q_out = [m.integrate(qs[k], v_next[offsets[k]:offsets[k + 1]], h) for k, m in enumerate(models)]
    v_out = [v_next[offsets[k]:offsets[k + 1]].copy() for k in range(n_models)]
    return q_out, v_out, StepInfo(res, nc, nl, power, active, tuple(names), points)
