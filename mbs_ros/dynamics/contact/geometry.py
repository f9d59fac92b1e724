"""Collision geometry through Coal (``coal``, Pinocchio's collision library): shapes on the model's bodies and in
the world, and the contact points between them (``docs/contact.md``).

A pair's contact points are Coal's contact patch (``computeContactPatch``: a box on a plane gives its touching
corners, a sphere one point), each with its own signed distance along the pair's normal, so a tilted box has
one distance per corner.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import coal
import numpy as np

from mbs_ros.dynamics.contact.step import Contact

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
    return coal.Transform3s(np.ascontiguousarray(T[:3, :3]), np.ascontiguousarray(T[:3, 3]))


def _reduce(points, distance, min_separation, max_kept):
    """Indices of at most ``max_kept`` patch points, the deepest first, then each the farthest from those kept
    while at least ``min_separation`` from them: a patch's near-coincident points (a rounded foot's hull gives a
    dozen within a millimetre) add rows but no support, and make the Delassus matrix nearly singular."""
    n = points.shape[0]
    if n <= 1:
        return list(range(n))
    kept = [int(distance.argmin())]
    x = points - points[kept[0]]
    d = np.sqrt((x * x).sum(axis=1))  # np.linalg.norm(axis=1) without its overhead: the same numbers
    while len(kept) < max_kept:
        j = int(d.argmax())
        if d[j] < min_separation:
            break
        kept.append(j)
        x = points - points[j]
        np.minimum(d, np.sqrt((x * x).sum(axis=1)), out=d)
    return kept


#: Bounds of each shape in its body's frame, computed once: ``(center (3,), radius)`` of a bounded geometry
#: (the sphere about Coal's local AABB), ``(normal (3,), offset)`` with radius None of a half-space, None for
#: what has neither (always handed to Coal).
_BOUNDS = weakref.WeakKeyDictionary()
#: Slack of the broad phase [m]: a pair is handed to Coal when its bounds are within ``margin`` + this.
BROAD_SLACK = 1e-9


def _bounds(shape):
    try:
        return _BOUNDS[shape]
    except KeyError:
        pass
    g, T = shape.geometry, shape.T_body_shape
    b = None
    if isinstance(g, coal.Halfspace):
        n = T[:3, :3] @ np.asarray(g.n, dtype=float)
        b = (n, float(g.d) + float(n @ T[:3, 3]), None)
    elif not isinstance(g, coal.Plane):
        g.computeLocalAABB()
        r = float(g.aabb_radius)
        c = T[:3, :3] @ np.asarray(g.aabb_center, dtype=float) + T[:3, 3]
        if np.isfinite(r) and np.all(np.isfinite(c)):
            b = (c, 0.0, r)
    _BOUNDS[shape] = b
    return b


class _Layout:
    """What the broad phase needs of a shape list, gathered once: per model the shapes' bodies with their
    bounding spheres' centres (body frame) and radii, the half-spaces, the world's spheres."""

    def __init__(self, shapes):
        self.shapes = tuple(shapes)  # held: the cache is keyed by their identities
        n = len(shapes)
        self.n = n
        self.radii = np.full(n, np.inf)  # unbounded: always a candidate
        self.world_centers = np.zeros((n, 3))
        self.moving = {}  # model -> (shape indices, body indices, local centres)
        self.planes = []  # (index, body or None, normal (body/world), offset)
        for k, s in enumerate(shapes):
            b = _bounds(s)
            if b is None:
                continue
            if b[2] is None:
                self.planes.append((k, s.body, b[0], b[1]))
                continue
            self.radii[k] = b[2]
            if s.body is None:
                self.world_centers[k] = b[0]
            else:
                idx, bodies, centers = self.moving.setdefault(s.body[0], ([], [], []))
                idx.append(k)
                bodies.append(s.body[1])
                centers.append(b[0])
        self.moving = {m: (np.array(i), np.array(b), np.array(c)) for m, (i, b, c) in self.moving.items()}
        self.bounded = np.isfinite(self.radii)
        self.upper = np.triu(np.ones((n, n), dtype=bool), 1)


_LAYOUTS = {}


def _layout(shapes):
    key = tuple(map(id, shapes))
    lay = _LAYOUTS.get(key)
    if lay is None or any(a is not b for a, b in zip(lay.shapes, shapes)):
        if len(_LAYOUTS) > 64:
            _LAYOUTS.clear()
        lay = _LAYOUTS[key] = _Layout(shapes)
    return lay


def _candidates(body_poses, shapes, margin):
    """The index pairs ``(i, j)``, i < j in order, whose bounds (bounding spheres, half-spaces) may come within
    ``margin``: the broad phase. A pair it drops is farther apart than ``margin`` (its bounding sphere is), so
    Coal would have found nothing; only these go to Coal."""
    n = len(shapes)
    if n < 2:
        return []
    lay = _layout(shapes)
    centers = lay.world_centers.copy()
    radii = lay.radii
    for m, (idx, bodies, local) in lay.moving.items():
        P = np.asarray(body_poses[m])[bodies]
        centers[idx] = np.einsum("kij,kj->ki", P[:, :3, :3], local) + P[:, :3, 3]
    diff = centers[:, None, :] - centers[None, :, :]
    gap = np.sqrt((diff * diff).sum(axis=2)) - radii[:, None] - radii[None, :]
    gap[np.isnan(gap)] = -np.inf
    for k, body, nrm, off in lay.planes:  # a half-space against a sphere: the centre's height over it less r
        if body is not None:
            T = body_poses[body[0]][body[1]]
            nrm = T[:3, :3] @ nrm
            off = off + float(nrm @ T[:3, 3])
        h = centers @ nrm - off - radii
        h[~lay.bounded] = -np.inf
        gap[k, :] = h
        gap[:, k] = h
    for k, *_ in lay.planes:
        for l, *_ in lay.planes:
            gap[k, l] = -np.inf  # two half-spaces (never on one body): Coal decides
    iu, ju = np.nonzero((gap <= margin + BROAD_SLACK) & lay.upper)
    return list(zip(iu.tolist(), ju.tolist()))


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
    placed = [None] * len(shapes)

    def place(i):
        if placed[i] is None:
            s = shapes[i]
            T = s.T_body_shape if s.body is None else body_poses[s.body[0]][s.body[1]] @ s.T_body_shape
            placed[i] = (s, _transform(T))
        return placed[i]

    out = []
    for i, j in _candidates(body_poses, shapes, margin):
        si, sj = shapes[i], shapes[j]
        if si.body == sj.body or not (si.group & sj.mask and sj.group & si.mask) or (i, j) in excluded:
            continue
        si, ti = place(i)
        sj, tj = place(j)
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
        body_a, body_b = tuple(sa.body), None if sb.body is None else tuple(sb.body)
        for k in range(pres.numContactPatches()):
            patch = pres.getContactPatch(k)
            n12 = np.array(patch.getNormal())  # from shape a to shape b
            size = patch.size()
            pa = np.array([patch.getPointShape1(p) for p in range(size)]).reshape(-1, 3)
            pb = np.array([patch.getPointShape2(p) for p in range(size)]).reshape(-1, 3)
            gap = pb - pa
            mid = 0.5 * (pa + pb)
            normal = -n12
            for p in _reduce(pa, gap @ n12, min_separation, max_kept):
                out.append(Contact(body_a, mid[p], normal, float(gap[p] @ n12), mu, body_b, name))
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
