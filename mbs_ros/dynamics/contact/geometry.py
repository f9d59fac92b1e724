"""Collision geometry through Coal (``coal``, Pinocchio's collision library): shapes on the model's bodies and in
the world, and the contact points between them (``docs/contact.md``).

A pair's contact points are Coal's contact patch (``computeContactPatch``: a box on a plane gives its touching
corners, a sphere one point), each with its own signed distance along the pair's normal, so a tilted box has
one distance per corner.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import coal
import numpy as np

from .step import Contact

__all__ = ["Shape", "find_contacts", "check_separated", "halfspace", "box", "sphere", "cylinder"]


@dataclass(frozen=True, eq=False)
class Shape:
    """A Coal geometry fixed to body ``body`` (``(model index, tree body index)``; None: the world) at
    ``T_body_shape`` (4×4), with friction ``mu``."""

    name: str
    geometry: object
    body: tuple | None = None
    T_body_shape: np.ndarray = field(default_factory=lambda: np.eye(4))
    mu: float = 0.5
    link: str = ""  #: the URDF link it belongs to ("" for world shapes and free objects)
    group: int = 1  #: collision bits: two shapes can touch when ``a.group & b.mask`` and ``b.group & a.mask``
    mask: int = 0xFFFFFFFF


def halfspace(name, normal, offset=0.0, mu=0.5) -> Shape:
    """The world's half-space ``n·x ≤ offset`` (its surface the plane ``n·x = offset``)."""
    n = np.asarray(normal, dtype=float)
    return Shape(name, coal.Halfspace(n / np.linalg.norm(n), float(offset)), None, np.eye(4), mu)


def box(name, size, body=None, T=None, mu=0.5) -> Shape:
    return Shape(name, coal.Box(*map(float, size)), body, np.eye(4) if T is None else np.asarray(T, float), mu)


def sphere(name, radius, body=None, T=None, mu=0.5) -> Shape:
    return Shape(name, coal.Sphere(float(radius)), body, np.eye(4) if T is None else np.asarray(T, float), mu)


def cylinder(name, radius, length, body=None, T=None, mu=0.5) -> Shape:
    return Shape(name, coal.Cylinder(float(radius), float(length)), body, np.eye(4) if T is None else
                 np.asarray(T, float), mu)


def _transform(T: np.ndarray):
    tf = coal.Transform3s()
    tf.setRotation(np.ascontiguousarray(T[:3, :3]))
    tf.setTranslation(np.ascontiguousarray(T[:3, 3]))
    return tf


def _reduce(points, distance, min_separation, max_kept):
    """Indices of at most ``max_kept`` patch points, the deepest first, then each the farthest from those kept
    while at least ``min_separation`` from them: a patch's near-coincident points (a rounded foot's hull gives a
    dozen within a millimetre) add rows but no support, and make the Delassus matrix nearly singular."""
    n = points.shape[0]
    if n <= 1:
        return list(range(n))
    kept = [int(np.argmin(distance))]
    d = np.linalg.norm(points - points[kept[0]], axis=1)
    while len(kept) < max_kept:
        j = int(np.argmax(d))
        if d[j] < min_separation:
            break
        kept.append(j)
        d = np.minimum(d, np.linalg.norm(points - points[j], axis=1))
    return kept


def find_contacts(body_poses, shapes, margin: float = 1e-3, max_points: int = 8, excluded=frozenset(),
                  min_separation: float = 5e-3, max_kept: int = 4):
    """The :class:`Contact` points of every pair of ``shapes`` on different bodies (world shapes never pair
    with each other) within ``margin``; ``body_poses[k]`` (nb_k, 4, 4) are model k's bodies' world poses.
    Pairs whose groups and masks do not meet, and index pairs ``(i, j)`` (i < j) in ``excluded``
    (:func:`mbs_ros.dynamics.contact.collision.excluded_pairs`), are skipped. Of a pair's contact patch at most
    ``max_kept`` points are kept, at least ``min_separation`` apart (:func:`_reduce`: a box's four corners on a
    plane stay). Friction of a pair: the smaller ``mu`` of the two."""
    req = coal.CollisionRequest()
    req.num_max_contacts = 1
    req.security_margin = float(margin)
    preq = coal.ContactPatchRequest()
    preq.max_size_patch = int(max_points)
    preq.patch_tolerance = float(margin)
    placed = []
    for s in shapes:
        T = s.T_body_shape if s.body is None else body_poses[s.body[0]][s.body[1]] @ s.T_body_shape
        placed.append((s, _transform(T)))
    out = []
    for i in range(len(placed)):
        si, ti = placed[i]
        for j in range(i + 1, len(placed)):
            sj, tj = placed[j]
            if si.body == sj.body or not (si.group & sj.mask and sj.group & si.mask) or (i, j) in excluded:
                continue
            if si.body is None:  # the moving shape first: the normal points from the world to it
                (sa, ta), (sb, tb) = (sj, tj), (si, ti)
            else:
                (sa, ta), (sb, tb) = (si, ti), (sj, tj)
            res = coal.CollisionResult()
            if not coal.collide(sa.geometry, ta, sb.geometry, tb, req, res):
                continue
            pres = coal.ContactPatchResult(preq)
            coal.computeContactPatch(sa.geometry, ta, sb.geometry, tb, res, preq, pres)
            mu = min(sa.mu, sb.mu)
            name = f"{sa.name}/{sb.name}"
            for k in range(pres.numContactPatches()):
                patch = pres.getContactPatch(k)
                n12 = np.array(patch.getNormal())  # from shape a to shape b
                pa = np.array([patch.getPointShape1(p) for p in range(patch.size())]).reshape(-1, 3)
                pb = np.array([patch.getPointShape2(p) for p in range(patch.size())]).reshape(-1, 3)
                for p in _reduce(pa, (pb - pa) @ n12, min_separation, max_kept):
                    out.append(Contact(tuple(sa.body), 0.5 * (pa[p] + pb[p]), -n12, float((pb[p] - pa[p]) @ n12),
                                       mu, None if sb.body is None else tuple(sb.body), name))
    return out


def check_separated(body_poses, shapes, excluded=frozenset(), tolerance: float = 1e-6) -> None:
    """ValueError naming every pair that interpenetrates deeper than ``tolerance`` [m] at these poses, with the
    depth (a world must not start interpenetrating: the first step would have to push the bodies apart, and the
    position projection would do it with the energy of the kinetic energy they do not have)."""
    deep = {}
    for c in find_contacts(body_poses, shapes, margin=0.0, excluded=excluded):
        if -c.distance > tolerance:
            deep[c.name] = max(deep.get(c.name, 0.0), -c.distance)
    if deep:
        pairs = ", ".join(f"{name} by {depth * 1e3:.3g} mm" for name, depth in sorted(deep.items()))
        raise ValueError(f"the world starts interpenetrating: {pairs}")
