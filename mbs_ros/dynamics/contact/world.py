"""A contact scene: models, shapes, the pairs that may touch, the contact step with its warm start, and how far
the scene can move before anything comes within the margin (``docs/contact.md``, "Wiring into the Simulator").

:meth:`ContactWorld.free_steps` is what lets the Simulator keep today's batched integrator, bit-identical, where
nothing is near: given a batch of states the ordinary integrator computed, it returns how many of its steps
certainly stay out of every pair's margin and every joint's limit margin. The bound is rigorous for the states it
is given: between two states a body moves along the group's exponential of their relative pose, and a point at
distance ≤ r from the body's origin travels at most ``‖Δp‖ + r·‖Δθ‖`` (translation and rotation of that
relative pose); the sum over the batch of two bodies' bounds must stay below the pair's distance at the start
less the margin.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time

import coal
import numpy as np

from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.geometry import _plan, _transform, check_separated, find_contacts
from mbs_ros.dynamics.contact.step import ContactArrays, limited_joints, step

__all__ = ["ContactWorld"]

_SCRATCH = threading.local()  # per thread: Coal's distance request and result (near)
#: States whose body poses a look-ahead computes between two checkpoints (tens of µs for Solo12's 13 bodies)
POSE_SLICE = 16


def _reach(shape) -> float:
    """Largest distance of a point of ``shape`` from its body's origin (its local AABB's corners)."""
    g = shape.geometry
    g.computeLocalAABB()
    box = g.aabb_local
    lo, hi = np.asarray(box.min_), np.asarray(box.max_)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    T = shape.T_body_shape
    return float(np.max(np.linalg.norm(corners @ T[:3, :3].T + T[:3, 3], axis=1)))


def _body_poses(model, q) -> np.ndarray:
    """World poses (nb, 4, 4) of ``model``'s bodies at ``q``: the compiled kernel's (3 µs for Solo12, numpy's
    :func:`~mbs_ros.dynamics.algorithms.multibody.body_placements` 30 µs; equal to rounding), numpy's where the
    model has no compiled kernels (the numpy backend, mimic joints)."""
    compiled = model.compiled_kernels
    if compiled is None or model.mimic_reduction is not None:
        return alg.body_placements(model, q)
    return compiled.body_poses(q)


def _rotation_angle(R: np.ndarray) -> np.ndarray:
    """(n,) rotation angles of (n, 3, 3) rotation matrices."""
    c = np.clip((np.trace(R, axis1=1, axis2=2) - 1.0) * 0.5, -1.0, 1.0)
    return np.arccos(c)


class ContactWorld:
    """``models`` (a robot, free objects), ``shapes`` (:class:`~mbs_ros.dynamics.contact.geometry.Shape`, on ``(model, body)`` or the
    world), the index pairs that never collide (``excluded``), joint limits on or off, the margin [m]."""

    def __init__(self, models, shapes, excluded=frozenset(), limits: bool = True, margin: float = 1e-3):
        if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0.0):
            raise ValueError(f"margin must be a positive number of metres, got {margin!r}")
        for s in shapes:
            if not (math.isfinite(s.mu) and s.mu >= 0.0):
                raise ValueError(f"shape {s.name!r}: friction mu must be finite and non-negative, got {s.mu!r}")
        self.models = list(models)
        self.shapes = list(shapes)
        self.excluded = frozenset(excluded)
        self.limits = bool(limits)
        self.margin = float(margin)
        self.reach = [_reach(s) if s.body is not None else 0.0 for s in self.shapes]
        self._warm = {}
        self._left_out = {}
        self._limits_of = {}
        self._pairs = {}  # among -> the shape pairs that may touch
        self._near_pair = {}  # among -> the pair last found within the margin (asked first next time)
        self._poses = None  # (per model (model, q's bytes), body poses): the last poses() asked
        # what the contact steps cost (the thread's CPU time: a busy machine's preemptions do not count;
        # information for the diagnostics and the benchmark, never a result)
        self.step_count, self.step_ns, self.step_ns_max = 0, 0, 0
        #: called between the slices of a contact step's solve (None: no slices; a node suspends the step there
        #: when its callback's time is up: :class:`~mbs_ros.cores.work.Slices`); the numbers are the same. It
        #: returns the thread CPU time [ns] other work took while the step was stopped (or None: not counted)
        self.checkpoint = None
        self._away = 0  # CPU time spent inside checkpoint() during the step (another callback's, not the step's)

    def _checkpoint(self) -> None:
        self._away += self.checkpoint() or 0  # the CPU time spent elsewhere while the step was stopped there

    def warm_up(self, qs, vs) -> None:
        """Run once, at the states ``qs``, ``vs``, what the first contact step would otherwise load at its first
        call (tens of milliseconds to seconds on a busy machine, inside a node's callback): the solver's compiled
        kernels, each model's mass matrix, forward dynamics, energies and kinematics, SciPy's Cholesky, the geometry's
        compiled kernels. Nothing is kept but the pairs' constants of :func:`find_contacts` (a mesh hull's vertices: a few
        milliseconds per shape list), which are what the steps use."""
        from mbs_ros.dynamics.contact.geometry import warm_up as warm_up_geometry
        from mbs_ros.dynamics.contact.solver import warm_up
        from mbs_ros.dynamics.contact.step import _cho_solve, row_kinematics
        from mbs_ros.dynamics.kernels import contact_terms

        warm_up()
        warm_up_geometry()
        for among in ("all", "robot", "objects"):
            _plan(self.shapes, self.left_out(among))
        shaped = {s.body[0] for s in self.shapes if s.body is not None}
        for k, (model, q, v) in enumerate(zip(self.models, qs, vs)):
            M = model.mass_matrix(q)
            _cho_solve(M, np.ones((model.nv, 1)))
            model.forward_dynamics(q, v, np.zeros(model.nv))
            model.potential_energy(q) + model.kinetic_energy(q, v)  # the post-stabilisation's energy balance
            if k in shaped:  # the contact rows' kinematics only a model with shapes needs
                row_kinematics(model, q)
        contact_terms.warm_up()  # a one-model island's compiled path (compiled for the array types: any model)

    def forget(self) -> None:
        """Drop the warm start (after a reset: the last impulses belong to another state)."""
        self._warm = {}

    def left_out(self, among: str = "all") -> frozenset:
        """The index pairs of shapes not considered under ``among``: ``"all"`` (none but the excluded ones),
        ``"robot"`` (the pairs with no shape on model 0), ``"objects"`` (the pairs with a shape on model 0, and
        world–world pairs)."""
        if among not in self._left_out:
            if among not in ("all", "robot", "objects"):
                raise ValueError(f"among must be all, robot or objects, got {among!r}")
            on_robot = [s.body is not None and s.body[0] == 0 for s in self.shapes]
            n = len(self.shapes)
            out = set(self.excluded)
            for i in range(n):
                for j in range(i + 1, n):
                    if (among == "robot" and not (on_robot[i] or on_robot[j])) or (
                            among == "objects" and (on_robot[i] or on_robot[j])):
                        out.add((i, j))
            self._left_out[among] = frozenset(out)
        return self._left_out[among]

    def poses(self, qs):
        """The models' body poses at ``qs`` (:func:`~mbs_ros.dynamics.algorithms.multibody.body_placements`; the
        last ones kept: the look-ahead's first state and the contact step's are the same, bit for bit). Read only."""
        key = [(m, np.asarray(q, dtype=float).tobytes()) for m, q in zip(self.models, qs)]
        last = self._poses
        if last is not None and len(last[0]) == len(key) and all(
                a[0] is b[0] and a[1] == b[1] for a, b in zip(last[0], key)):
            return last[1]
        poses = [_body_poses(m, q) for m, q in zip(self.models, qs)]
        self._poses = (key, poses)
        return poses

    def check_start(self, qs) -> None:
        """ValueError naming the pairs that interpenetrate at ``qs`` (:func:`~mbs_ros.dynamics.contact.geometry.check_separated`)."""
        check_separated(self.poses(qs), self.shapes, self.excluded)

    def step(self, qs, vs, taus, h: float, among: str = "all"):
        """One contact step (:func:`~mbs_ros.dynamics.contact.step.step`) with this world's contacts at ``qs``; keeps a warm start per
        ``among`` (:meth:`left_out`). With ``among="objects"`` only the free objects move (model 0's entries of
        ``qs`` place its shapes and are returned as given; no joint limit rows). Returns ``(qs⁺, vs⁺, info,
        engaged)``, ``engaged`` the set of model indices with a contact or limit row in the step."""
        t0, self._away = time.thread_time_ns(), 0
        if self.checkpoint is not None:
            self._checkpoint()
        first = 1 if among == "objects" else 0
        models = self.models[first:]
        margin = self.margin + h * max((float(np.abs(v).max()) if len(v) else 0.0) for v in vs[first:])
        poses = self.poses(qs)
        if self.checkpoint is not None:
            self._checkpoint()
        contacts = find_contacts(poses, self.shapes, margin=margin, excluded=self.left_out(among),
                                 checkpoint=None if self.checkpoint is None else self._checkpoint, arrays=not first)
        if self.checkpoint is not None:
            self._checkpoint()
        if first:
            contacts = [dataclasses.replace(c, a=(c.a[0] - 1, c.a[1]),
                                            b=None if c.b is None else (c.b[0] - 1, c.b[1])) for c in contacts]
        q1, v1, info = step(models, qs[first:], vs[first:], taus[first:], h, contacts,
                            limits=self.limits and not first, margin=margin, warm=self._warm.get(among),
                            checkpoint=None if self.checkpoint is None else self._checkpoint, poses=poses[first:])
        self._warm[among] = info
        engaged = set()
        if isinstance(info.contacts, ContactArrays):  # first is 0
            engaged.update(info.contacts.sides[:, 0].tolist())
            engaged.update(info.contacts.sides[:, 2].tolist())
            engaged.discard(-1)
        else:
            for c in info.contacts:
                engaged.add(c.a[0] + first)
                if c.b is not None:
                    engaged.add(c.b[0] + first)
        engaged.update(int(name.split(":", 1)[0]) + first for name in info.limit_names)
        d = time.thread_time_ns() - t0 - self._away
        self.step_count, self.step_ns = self.step_count + 1, self.step_ns + d
        self.step_ns_max = max(self.step_ns_max, d)
        return list(qs[:first]) + list(q1), list(vs[:first]) + list(v1), info, engaged

    # --------------------------------------------------------------------------------- nothing near
    def pair_distances(self, qs, among: str = "all"):
        """``{(i, j): distance}`` of every shape pair that may touch (different bodies, not left out under
        ``among``: :meth:`left_out`), at ``qs``."""
        left_out = self.left_out(among)
        poses = self.poses(qs)
        placed = []
        for s in self.shapes:
            T = s.T_body_shape if s.body is None else poses[s.body[0]][s.body[1]] @ s.T_body_shape
            placed.append(_transform(T))
        req = coal.DistanceRequest()
        out = {}
        for i, a in enumerate(self.shapes):
            for j in range(i + 1, len(self.shapes)):
                b = self.shapes[j]
                if a.body == b.body or (i, j) in left_out or not (a.group & b.mask and b.group & a.mask):
                    continue
                if self.checkpoint is not None:  # a look-ahead may stop here too (a pure query: nothing changes)
                    self.checkpoint()
                res = coal.DistanceResult()
                out[(i, j)] = float(coal.distance(a.geometry, placed[i], b.geometry, placed[j], req, res))
        return out

    def pairs(self, among: str = "all") -> list:
        """The shape pairs ``(i, j)`` that may touch under ``among`` (:meth:`pair_distances`' pairs), kept."""
        if among not in self._pairs:
            left_out = self.left_out(among)
            self._pairs[among] = [(i, j) for i, a in enumerate(self.shapes) for j in range(i + 1, len(self.shapes))
                                  if not (a.body == self.shapes[j].body or (i, j) in left_out
                                          or not (a.group & self.shapes[j].mask and self.shapes[j].group & a.mask))]
        return self._pairs[among]

    def near(self, qs, among: str = "all") -> bool:
        """Whether some pair is within the margin at ``qs``: :meth:`pair_distances`' ``any(d <= margin)``, the
        same distances, asked until the first such pair: the one found last time first (a resting contact is found
        with one query), then the pairs whose bounds come within the margin (the broad phase of
        :func:`~mbs_ros.dynamics.contact.geometry.find_contacts`: a pair it leaves out is farther than the
        margin)."""
        poses = self.poses(qs)
        last = self._near_pair.get(among)
        if last is not None and self._distance(poses, *last) <= self.margin:
            return True
        for pair in _plan(self.shapes, self.left_out(among)).broad(poses, self.margin):
            if self.checkpoint is not None:
                self.checkpoint()
            if pair.ij != last and self._distance(poses, *pair.ij) <= self.margin:
                self._near_pair[among] = pair.ij
                return True
        return False

    def _distance(self, poses, i: int, j: int) -> float:
        """Coal's distance between shapes i and j at the body poses ``poses`` (:meth:`pair_distances`' numbers:
        the same placements, ``pose @ T_body_shape``; this thread's request, result (cleared) and transforms)."""
        scratch = getattr(_SCRATCH, "distance", None)
        if scratch is None:
            scratch = _SCRATCH.distance = (coal.DistanceRequest(), coal.DistanceResult(), coal.Transform3s(),
                                           coal.Transform3s())
        req, res, ta, tb = scratch
        a, b = self.shapes[i], self.shapes[j]
        for shape, tf in ((a, ta), (b, tb)):
            T = shape.T_body_shape if shape.body is None else np.asarray(
                poses[shape.body[0]][shape.body[1]]).dot(shape.T_body_shape)
            tf.setTransform(T[:3, :3], T[:3, 3])
        res.clear()
        return float(coal.distance(a.geometry, ta, b.geometry, tb, req, res))

    def _state_poses(self, model, qb) -> np.ndarray:
        """The body poses at each state of ``qb`` (s, nb, 4, 4), with a checkpoint every :data:`POSE_SLICE` states
        (a look-ahead's batch can be long)."""
        out = []
        for i, q in enumerate(qb):
            if i and i % POSE_SLICE == 0 and self.checkpoint is not None:
                self.checkpoint()
            out.append(_body_poses(model, q))
        return np.array(out)

    def free_steps(self, q_batches, v_batches=None, among: str = "all") -> int:
        """The largest k such that the states 0..k of a batch (per model, states ``(n + 1, nq)``: the start and
        after each step) keep every pair outside the margin and every joint outside its limit margin. Each pair's
        distance is measured at an anchor state and carried forward by the travel bound (module docstring) until
        the bound could use up the room; there the distances are measured again (a new anchor). Rigorous at the
        states; a handful of distance queries per batch where nothing is near (``v_batches`` is not needed).
        ``among`` (:meth:`left_out`): the pairs considered; with ``"objects"`` no joint limit, and model 0's batch
        only places its shapes (one state is enough)."""
        qbs = [np.asarray(qb) for qb in q_batches]
        n = min(qb.shape[0] for qb in qbs[1 if among == "objects" else 0:]) - 1
        if n < 0:
            return -1
        last = n
        if self.limits and among != "objects":
            last = min(last, self.limit_free(qbs, n))
        if not self.shapes or last < 0:
            return last
        if self.near([qb[0] for qb in qbs], among):  # the first state is within the margin already (resting)
            return -1
        # per model and body: travel bound increments of each step (linear, angular)
        steps_lin, steps_ang = [], []
        for k, (model, qb) in enumerate(zip(self.models, qbs)):
            if among == "objects" and k == 0:  # model 0 stands still here: its shapes are left out
                steps_lin.append(None)
                steps_ang.append(None)
                continue
            poses = self._state_poses(model, qb[:n + 1])  # (n+1, nb, 4, 4)
            rel_R = np.einsum("snji,snjk->snik", poses[:-1, :, :3, :3], poses[1:, :, :3, :3])
            dp = np.linalg.norm(poses[1:, :, :3, 3] - poses[:-1, :, :3, 3], axis=2)  # (n, nb)
            dth = _rotation_angle(rel_R.reshape(-1, 3, 3)).reshape(dp.shape)
            steps_lin.append(np.concatenate([[np.zeros(dp.shape[1])], np.cumsum(dp, axis=0)]))
            steps_ang.append(np.concatenate([[np.zeros(dth.shape[1])], np.cumsum(dth, axis=0)]))
            if self.checkpoint is not None:
                self.checkpoint()
        anchor = 0
        while True:
            distances = self.pair_distances([qb[min(anchor, qb.shape[0] - 1)] for qb in qbs], among)
            if any(d <= self.margin for d in distances.values()):
                return anchor - 1
            reach_to = last
            for (i, j), d in distances.items():
                room = d - self.margin
                bound = np.zeros(last + 1 - anchor)
                for s_idx in (i, j):
                    body = self.shapes[s_idx].body
                    if body is None:
                        continue
                    k, b = body
                    lin, ang = steps_lin[k][anchor:last + 1, b], steps_ang[k][anchor:last + 1, b]
                    bound = bound + (lin - lin[0]) + self.reach[s_idx] * (ang - ang[0])
                over = np.nonzero(bound >= room)[0]
                if over.size:
                    reach_to = min(reach_to, anchor + int(over[0]) - 1)
            if reach_to >= last:
                return last
            anchor = max(reach_to, anchor + 1)  # measure again where the bound ran out (at least one state on)

    def limit_free(self, qbs, n) -> int:
        """The largest k with every limited joint outside its limit margin at the states 0..k (-1: not even
        the start)."""
        ok = n
        for k, qb in enumerate(qbs):
            iq, lo, hi = self._limited(k)  # lo, hi: the limits moved in by the margin
            if not iq.size:
                continue
            x = qb[:n + 1, iq]
            if (x - lo).min() > 0.0 and (hi - x).min() > 0.0:  # the common case: nowhere near, two reductions
                continue
            near = np.flatnonzero(((x <= lo) | (x >= hi)).any(axis=1))
            if near.size:
                ok = min(ok, int(near[0]) - 1)
        return ok

    def _limited(self, k: int):
        """``(iq, lower + margin, upper - margin)`` of model k's joints with a finite limit (kept per model
        object): a joint is near a limit where it is at or beyond these."""
        model = self.models[k]
        cached = self._limits_of.get(k)
        if cached is None or cached[0] is not model:
            iq, _, lower, upper, _ = limited_joints(model)  # the limit rows' own (contact.step)
            cached = (model, iq, lower + self.margin, upper - self.margin)
            self._limits_of[k] = cached
        return cached[1:]
