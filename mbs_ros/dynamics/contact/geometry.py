"""Collision geometry through Coal (``coal``, Pinocchio's collision library): shapes on the model's bodies and in
the world, and the contact points between them (``docs/contact.md``).

A pair's contact points are Coal's contact patch (``computeContactPatch``: a box on a plane gives its touching
corners, a sphere one point), each with its own signed distance along the pair's normal, so a tilted box has
one distance per corner. Coal gives every patch point the deepest point's distance (a face tilted within the
margin would be held flush); against a half-space (the ground, a seabed) :func:`_line_interval` measures each
point's own distance instead, the gap along the normal between the two surfaces through that point (boxes,
spheres, cylinders and capsules in closed form; another shape, and a pair of two bounded shapes, keeps Coal's
distance: see PLANES_ONLY). A convex polytope (a URDF mesh's hull) against a half-space is not asked of Coal: its
patch is its vertices within the margin of its deepest one, each at its own exact distance
(:func:`_polytope_contacts`, compiled: a quadruped's four feet on the ground in one call).
"""
from __future__ import annotations

import dataclasses
import itertools
import threading
import weakref
from dataclasses import dataclass, field

import coal
import numpy as np

from mbs_ros.dynamics.contact.step import Contact, ContactArrays
from mbs_ros.dynamics.kernels.jit import jit

__all__ = ["Shape", "find_contacts", "check_separated", "halfspace", "box", "sphere", "cylinder", "warm_up"]


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


def _slab(x, n, h):
    if abs(n) < 1e-12:
        out = np.abs(x) > h
        return np.where(out, np.nan, -np.inf), np.where(out, np.nan, np.inf)
    t1, t2 = (-h - x) / n, (h - x) / n
    return np.minimum(t1, t2), np.maximum(t1, t2)


def _support_face(geometry, xl, nl):
    """The interval of the lines in the surface that carries the patch: a patch point lies on the shape's support
    set along the normal (a box's face, edge or corner; a cylinder's cap, rim or side), which lies in the box's
    face most across the normal, in a cylinder's cap (the normal nearer its axis) or on its side (nearer across:
    the infinite cylinder, a line that misses it taking its closest approach to the axis). The face's plane or
    side without its edges: a line through a corner nearly along a side face would leave through that face by
    rounding, up to (rounding / tilt) early."""
    if isinstance(geometry, coal.Box):
        i = int(np.argmax(np.abs(nl)))
        return _slab(xl[:, i], nl[i], float(geometry.halfSide[i]))
    r, hl = float(geometry.radius), float(geometry.halfLength)
    if abs(nl[2]) >= np.hypot(nl[0], nl[1]):
        return _slab(xl[:, 2], nl[2], hl)
    return _disc_interval(xl, nl, r, clamp=True)


def _capsule_interval(geometry, xl, nl):
    """A capsule's interval: its cylinder and its end spheres (convex and smooth: no edge to graze)."""
    r, hl = float(geometry.radius), float(geometry.halfLength)
    lo, hi = _disc_interval(xl, nl, r)
    zlo, zhi = _slab(xl[:, 2], nl[2], hl)
    lo, hi = np.maximum(lo, zlo), np.minimum(hi, zhi)
    lo, hi = np.where(lo <= hi, lo, np.nan), np.where(lo <= hi, hi, np.nan)
    for z in (-hl, hl):
        slo, shi = _sphere_interval(xl - np.array([0.0, 0.0, z]), nl, r)
        lo, hi = np.fmin(lo, slo), np.fmax(hi, shi)
    return lo, hi


def _line_interval(geometry, T, x, n):
    """``(lo, hi)`` (each (k,)) of the parameters ``t`` where the lines ``x + t n`` (x (k, 3), world, n (3,))
    are inside ``geometry`` placed at ``T``; NaN where a line misses it, None for a shape without a closed form."""
    R, p = T[:3, :3], T[:3, 3]
    xl = (x - p) @ R  # to the shape's frame
    nl = R.T @ n
    k = xl.shape[0]
    inf = np.full(k, np.inf)
    if isinstance(geometry, coal.Halfspace):
        nh = np.asarray(geometry.n, dtype=float)
        a = float(nh @ nl)
        if abs(a) < 1e-12:
            return None
        t = (float(geometry.d) - xl @ nh) / a
        return (t, inf) if a < 0 else (-inf, t)
    if isinstance(geometry, coal.Sphere):
        return _sphere_interval(xl, nl, float(geometry.radius))
    if isinstance(geometry, (coal.Box, coal.Cylinder)):
        return _support_face(geometry, xl, nl)
    if isinstance(geometry, coal.Capsule):
        return _capsule_interval(geometry, xl, nl)
    return None


def _sphere_interval(xl, nl, r):
    b = xl @ nl
    disc = b * b - (xl * xl).sum(axis=1) + r * r
    root = np.sqrt(np.where(disc >= 0, disc, np.nan))
    return -b - root, -b + root


def _disc_interval(xl, nl, r, clamp=False):
    """The infinite cylinder of radius r about z (``clamp``: a line that misses it, its closest approach)."""
    a = nl[0] ** 2 + nl[1] ** 2
    k = xl.shape[0]
    if a < 1e-24:
        inside = xl[:, 0] ** 2 + xl[:, 1] ** 2 <= r * r
        return np.where(inside, -np.inf, np.nan), np.where(inside, np.inf, np.nan)
    b = xl[:, 0] * nl[0] + xl[:, 1] * nl[1]
    c = xl[:, 0] ** 2 + xl[:, 1] ** 2 - r * r
    disc = b * b - a * c
    disc = np.maximum(disc, 0.0) if clamp else np.where(disc >= 0, disc, np.nan)
    root = np.sqrt(disc)
    return (-b - root) / a + np.zeros(k), (-b + root) / a


#: PLANES_ONLY: each point's own distance is taken against a half-space (the ground, a seabed) only; between two
#: shapes that both have edges (a stack of boxes) the patch's points keep Coal's one distance: with their own, a
#: 5-box stack's patches (up to 8 points, 4 kept) changed their kept corners from step to step and the stack's
#: solver stopped converging (test_contact_closed_forms' stack), which this change does not yet resolve.
#: Patch points whose own distances are within this [m] of the deepest one's take the deepest's: a face flush to
#: rounding stays flush (its redundant corners symmetric, as the solver found them before each point had its own).
FLUSH = 1e-9


def _own_distances(sa, Ta, sb, Tb, mid, n12, gap_along, points):
    """Each patch point's own signed distance along ``n12`` (from a to b) and its contact point (the middle of
    the two surface points on the line through it along the normal); Coal's values where there is no closed form
    or the line misses a shape."""
    if not isinstance(sb.geometry, coal.Halfspace):  # between two moving shapes: Coal's (see PLANES_ONLY)
        return gap_along, points
    ia = _line_interval(sa.geometry, Ta, mid, n12)
    ib = _line_interval(sb.geometry, Tb, mid, n12)
    if ia is None or ib is None:
        return gap_along, points
    ta, tb = ia[1], ib[0]
    ok = np.isfinite(ta) & np.isfinite(tb)
    dist = np.where(ok, tb - ta, gap_along)
    deepest = dist.min()
    dist = np.where(dist - deepest < FLUSH, deepest, dist)
    pts = np.where(ok[:, None], mid + (0.5 * (ta + tb))[:, None] * n12, points)
    return dist, pts


def _reduce(points, distance, min_separation, max_kept):
    """Indices (int64 array) of at most ``max_kept`` patch points, the deepest first, then each the farthest from
    those kept while at least ``min_separation`` from them: a patch's near-coincident points (a rounded foot's hull
    gives a dozen within a millimetre) add rows but no support, and make the Delassus matrix nearly singular."""
    kept = np.empty(max(int(max_kept), 1), dtype=np.int64)  # (a point may come again when min_separation is 0)
    return kept[:_reduce_into(points, distance, float(min_separation), int(max_kept), kept)]


@jit
def _first_extreme(values, sign):
    """NumPy's argmax (``sign`` 1) or argmin (-1) of ``values`` as a loop: the first NaN if there is one, else the
    first extreme."""
    for i in range(values.shape[0]):
        if values[i] != values[i]:
            return i
    best = 0
    for i in range(1, values.shape[0]):
        if sign * values[i] > sign * values[best]:
            best = i
    return best


@jit
def _reduce_into(points, distance, min_separation, max_kept, kept):
    """:func:`_reduce` into ``kept`` (at least ``max(max_kept, 1)`` long), returning how many: NumPy's
    argmin/argmax (the first extreme, a NaN first of all) and minimum (NaN wins), as loops (no array returned:
    a compiled call that returns one costs four times one that fills one)."""
    n = points.shape[0]
    if n <= 1:
        kept[0] = 0
        return n
    first = _first_extreme(distance, -1.0)
    kept[0] = first
    count = 1
    d = np.empty(n)
    for i in range(n):
        x0, x1, x2 = points[i, 0] - points[first, 0], points[i, 1] - points[first, 1], points[i, 2] - points[first, 2]
        d[i] = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
    while count < max_kept:
        j = _first_extreme(d, 1.0)
        if d[j] < min_separation:
            break
        kept[count] = j
        count += 1
        for i in range(n):
            x0, x1, x2 = points[i, 0] - points[j, 0], points[i, 1] - points[j, 1], points[i, 2] - points[j, 2]
            e = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
            if e != e or e < d[i]:
                d[i] = e
    return count


@jit
def _patch_points(points, half_depth, normal, out):
    """A patch's points on shape a (``out[0]``), ``pb - pa`` (``out[1]``) and their middles (``out[2]``) from
    Coal's points (``getPoint``), half its depth and its normal: ``getPointShape1/2``'s arithmetic
    (``p ∓ (depth / 2) n``), elementwise as NumPy would (one Coal call per point, not two)."""
    for c in range(3):
        h = half_depth * normal[c]
        for i in range(points.shape[0]):
            a, b = points[i, c] - h, points[i, c] + h
            out[0, i, c], out[1, i, c], out[2, i, c] = a, b - a, 0.5 * (a + b)


@jit
def _place(B, gidx, Tbs, r, T):
    """Shape row r's world pose into ``T`` (3, 4): ``B[gidx[r]] @ Tbs[r]``, or ``Tbs[r]`` for a world shape (the
    broad phase's and :func:`_polytope_contacts`' placements)."""
    g = gidx[r]
    for a in range(3):
        for c in range(4):
            if g < 0:
                T[a, c] = Tbs[r, a, c]
            else:
                T[a, c] = (B[g, a, 0] * Tbs[r, 0, c] + B[g, a, 1] * Tbs[r, 1, c] + B[g, a, 2] * Tbs[r, 2, c]
                           + B[g, a, 3] * Tbs[r, 3, c])


@jit
def _polytope_contacts(B, gidx, Tbs, ab, bounds, verts, vstart, margin, flush, min_separation, max_kept,
                       points, distance, normals, counts):
    """The contacts of convex polytopes (rows ``ab[k, 0]``, vertices ``verts[vstart[r]:vstart[r + 1]]``) on
    half-spaces (rows ``ab[k, 1]``, ``bounds[r]``: normal, 0, offset), poses as :func:`_place` places them. Pair k
    touches when its deepest vertex is within ``margin``; its patch is then the vertices within ``margin`` of the
    deepest (Coal's support set at ``patch_tolerance = margin``), each at its own signed distance ``n·x - d`` (exact
    for a polytope on a plane; within ``flush`` of the deepest: the deepest's, as :func:`_own_distances`), reduced
    by :func:`_reduce_into` (the deepest first, then the farthest apart). Writes ``counts[k]`` points:
    ``points[k, p]`` the middle of the vertex and its projection on the plane, ``distance[k, p]``, and
    ``normals[k]`` the half-space's outward normal in the world (from b to a)."""
    Ta, Tb = np.empty((3, 4)), np.empty((3, 4))
    kept = np.empty(max(max_kept, 1), dtype=np.int64)
    nv_max = 0
    for r in range(vstart.shape[0] - 1):
        nv_max = max(nv_max, vstart[r + 1] - vstart[r])
    x, s = np.empty((nv_max, 3)), np.empty(nv_max)
    xs, ds, raw = np.empty((nv_max, 3)), np.empty(nv_max), np.empty(nv_max)
    for k in range(ab.shape[0]):
        a, b = ab[k, 0], ab[k, 1]
        _place(B, gidx, Tbs, a, Ta)
        _place(B, gidx, Tbs, b, Tb)
        n0 = Tb[0, 0] * bounds[b, 0] + Tb[0, 1] * bounds[b, 1] + Tb[0, 2] * bounds[b, 2]
        n1 = Tb[1, 0] * bounds[b, 0] + Tb[1, 1] * bounds[b, 1] + Tb[1, 2] * bounds[b, 2]
        n2 = Tb[2, 0] * bounds[b, 0] + Tb[2, 1] * bounds[b, 1] + Tb[2, 2] * bounds[b, 2]
        d = bounds[b, 6] + n0 * Tb[0, 3] + n1 * Tb[1, 3] + n2 * Tb[2, 3]
        normals[k, 0], normals[k, 1], normals[k, 2] = n0, n1, n2
        v0, nv = vstart[a], vstart[a + 1] - vstart[a]
        low = np.inf
        for i in range(nv):
            v = v0 + i
            for c in range(3):
                x[i, c] = Ta[c, 0] * verts[v, 0] + Ta[c, 1] * verts[v, 1] + Ta[c, 2] * verts[v, 2] + Ta[c, 3]
            s[i] = n0 * x[i, 0] + n1 * x[i, 1] + n2 * x[i, 2] - d
            if s[i] < low:
                low = s[i]
        counts[k] = 0
        if not low <= margin:
            continue
        m = 0
        for i in range(nv):
            if s[i] <= low + margin:
                xs[m, 0], xs[m, 1], xs[m, 2] = x[i, 0], x[i, 1], x[i, 2]
                raw[m] = s[i]
                ds[m] = low if s[i] - low < flush else s[i]
                m += 1
        count = _reduce_into(xs[:m], ds[:m], min_separation, max_kept, kept)
        for p in range(count):
            i = kept[p]
            h = 0.5 * raw[i]
            points[k, p, 0], points[k, p, 1], points[k, p, 2] = xs[i, 0] - h * n0, xs[i, 1] - h * n1, xs[i, 2] - h * n2
            distance[k, p] = ds[i]
        counts[k] = count


def _contact_maker():
    """:class:`Contact`, or where it is a plain dataclass (these fields, an instance ``__dict__``, no
    ``__post_init__``) the same object made without its generated ``__init__``'s seven ``object.__setattr__``
    calls (a third of the time, a dozen contacts per step)."""
    fields = [f.name for f in dataclasses.fields(Contact)]
    if (fields != ["a", "point", "normal", "distance", "mu", "b", "name"] or hasattr(Contact, "__post_init__")
            or "__slots__" in vars(Contact)):
        return Contact
    new = object.__new__

    def contact(a, point, normal, distance, mu, b, name):
        c = new(Contact)
        c.__dict__.update(a=a, point=point, normal=normal, distance=distance, mu=mu, b=b, name=name)
        return c

    return contact


_contact = _contact_maker()

#: Slack of the broad phase [m]: a pair is handed to Coal when its bounds are within ``margin`` + this.
BROAD_SLACK = 1e-9
#: How the broad phase bounds a pair (_Plan.kind): two bounded shapes by their bounding spheres (about their local
#: AABBs' centres) and then their oriented boxes (their local AABBs placed), a half-space and a bounded shape by
#: the shape's local AABB (its support along the normal), any other pair (two half-spaces, a shape with no finite
#: bounds) always handed to Coal.
_SPHERES, _PLANE, _ALWAYS = 0, 1, 2
_OWN_KINDS = (coal.Halfspace, coal.Sphere, coal.Box, coal.Cylinder, coal.Capsule)  # :func:`_line_interval`'s


#: Per shape, its bounds in its own frame (_local_bounds), computed once.
_BOUNDS = weakref.WeakKeyDictionary()


def _local_bounds(shape):
    """``(kind, a (3,), b (3,), c, vertices)`` of a shape's geometry in its own frame: a half-space ``("plane",
    n, 0, d, None)``, a bounded shape ``("box", its local AABB's centre, half extents, radius of the sphere about
    it, a convex polytope's vertices (k, 3) or None)``, None otherwise (a plane, no finite bounds)."""
    try:
        return _BOUNDS[shape]
    except KeyError:
        pass
    g, out = shape.geometry, None
    if isinstance(g, coal.Halfspace):
        out = "plane", np.asarray(g.n, dtype=float), np.zeros(3), float(g.d), None
    elif not isinstance(g, coal.Plane):
        g.computeLocalAABB()
        lo, hi = np.asarray(g.aabb_local.min_, dtype=float), np.asarray(g.aabb_local.max_, dtype=float)
        c, r = np.asarray(g.aabb_center, dtype=float), float(g.aabb_radius)
        if np.isfinite(r) and np.all(np.isfinite(c)) and np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)):
            vertices = None
            if isinstance(g, coal.ConvexBase):
                vertices = np.array([g.point(v) for v in range(g.num_points)], dtype=float).reshape(-1, 3)
            out = "box", c, 0.5 * (hi - lo), r, vertices
    _BOUNDS[shape] = out
    return out


@jit
def _box_gap(T, i, j, bounds):
    """A lower bound on the distance between the oriented boxes of rows i and j (their local AABBs placed at
    ``T[i]``, ``T[j]``): the largest separation along the 15 axes of the separating-axis test (each box's three
    axes and their cross products, unit length; a cross product of near-parallel axes is skipped, which can only
    lower the bound). Each shape lies in its box, so the shapes are at least this far apart."""
    d = np.empty(3)
    for a in range(3):
        d[a] = 0.0
        for c in range(3):
            d[a] += T[j, a, c] * bounds[j, c] - T[i, a, c] * bounds[i, c]
        d[a] += T[j, a, 3] - T[i, a, 3]
    best = -np.inf
    L = np.empty(3)
    for axis in range(15):
        if axis < 3:
            for a in range(3):
                L[a] = T[i, a, axis]
        elif axis < 6:
            for a in range(3):
                L[a] = T[j, a, axis - 3]
        else:
            p, q = (axis - 6) // 3, (axis - 6) % 3
            L[0] = T[i, 1, p] * T[j, 2, q] - T[i, 2, p] * T[j, 1, q]
            L[1] = T[i, 2, p] * T[j, 0, q] - T[i, 0, p] * T[j, 2, q]
            L[2] = T[i, 0, p] * T[j, 1, q] - T[i, 1, p] * T[j, 0, q]
        norm = np.sqrt(L[0] * L[0] + L[1] * L[1] + L[2] * L[2])
        if not norm > 1e-6:
            continue
        gap = abs(L[0] * d[0] + L[1] * d[1] + L[2] * d[2])
        for c in range(3):
            gap -= abs(L[0] * T[i, 0, c] + L[1] * T[i, 1, c] + L[2] * T[i, 2, c]) * bounds[i, 3 + c]
            gap -= abs(L[0] * T[j, 0, c] + L[1] * T[j, 1, c] + L[2] * T[j, 2, c]) * bounds[j, 3 + c]
        gap /= norm
        if gap > best:
            best = gap
    return best


@jit
def _near_pairs(B, gidx, Tbs, pairs, bounds, verts, vstart, hint, thr, out):
    """Writes to ``out`` the indices of the pairs whose bounds come within ``thr``, in order, and returns how many.
    Shape row r is at ``B[gidx[r]] @ Tbs[r]`` (``B``: the bodies' world poses; gidx -1: ``Tbs[r]``, a world shape);
    ``pairs[k]``: (kind, row i, row j); ``bounds[r]``: a bounded shape's local AABB's centre, half extents and the
    radius of the sphere about it, a half-space's normal, 0 and offset. Two bounded shapes: their bounding spheres,
    and where those meet their oriented boxes (:func:`_box_gap`: a body's long box beside a leg's is apart);
    a half-space (i) and a bounded shape (j): j's box along the normal, and where that comes within ``thr`` and j is
    a convex polytope (``verts[vstart[j]:vstart[j + 1]]``), its vertices until one comes within ``thr`` (from the
    one that did last time, ``hint[j]``: a resting foot's answer at the first look; any start, the same answer)."""
    m = Tbs.shape[0]
    T = np.empty((m, 3, 4))
    for r in range(m):
        _place(B, gidx, Tbs, r, T[r])
    count = 0
    for k in range(pairs.shape[0]):
        kind, i, j = pairs[k, 0], pairs[k, 1], pairs[k, 2]
        if kind == 0:
            g2 = 0.0
            for a in range(3):
                ci = T[i, a, 0] * bounds[i, 0] + T[i, a, 1] * bounds[i, 1] + T[i, a, 2] * bounds[i, 2] + T[i, a, 3]
                cj = T[j, a, 0] * bounds[j, 0] + T[j, a, 1] * bounds[j, 1] + T[j, a, 2] * bounds[j, 2] + T[j, a, 3]
                g2 += (ci - cj) * (ci - cj)
            gap = np.sqrt(g2) - bounds[i, 6] - bounds[j, 6]
            if gap <= thr:  # the spheres meet: their boxes may still be apart (a leg beside a body)
                gap = _box_gap(T, i, j, bounds)
        elif kind == 1:  # i the half-space: its normal in the world (na) and in j's frame (nl)
            gap = -bounds[i, 6]
            nl = np.zeros(3)
            for a in range(3):
                na = T[i, a, 0] * bounds[i, 0] + T[i, a, 1] * bounds[i, 1] + T[i, a, 2] * bounds[i, 2]
                gap += na * (T[j, a, 0] * bounds[j, 0] + T[j, a, 1] * bounds[j, 1] + T[j, a, 2] * bounds[j, 2]
                             + T[j, a, 3] - T[i, a, 3])
                for c in range(3):
                    nl[c] += na * T[j, a, c]
            box = gap - (abs(nl[0]) * bounds[j, 3] + abs(nl[1]) * bounds[j, 4] + abs(nl[2]) * bounds[j, 5])
            v0, nv = vstart[j], vstart[j + 1] - vstart[j]
            if box <= thr and nv > 0:  # the polytope's vertices (from the box's centre)
                low = np.inf
                for s in range(nv):
                    v = v0 + (hint[j] + s) % nv
                    h = (nl[0] * (verts[v, 0] - bounds[j, 0]) + nl[1] * (verts[v, 1] - bounds[j, 1])
                         + nl[2] * (verts[v, 2] - bounds[j, 2]))
                    if h < low:
                        low = h
                        if gap + low <= thr:
                            hint[j] = v - v0
                            break
                gap += low
            else:
                gap = box
        else:
            gap = -np.inf
        if not gap > thr:  # NaN too: handed to Coal
            out[count] = k
            count += 1
    return count


class _Pair:
    """A pair that may touch, its constants: shape indices ``ij`` (i < j), the moving shape first (``a``: the
    normal points from b to it; ``a``, ``b`` their rows in the plan), the contact's name, friction and bodies,
    whether each point gets its own distance (:func:`_own_distances`: b a half-space, a a shape
    :func:`_line_interval` knows), whether it is a convex polytope on a half-space (``poly``:
    :func:`_polytope_contacts`)."""

    __slots__ = ("ij", "a", "b", "sa", "sb", "name", "mu", "body_a", "body_b", "own", "poly", "index")

    def __init__(self, shapes, i, j, row):
        self.ij = (i, j)
        a, b = (j, i) if shapes[i].body is None else (i, j)
        self.a, self.b = row[a], row[b]
        self.sa, self.sb = sa, sb = shapes[a], shapes[b]
        self.name = f"{sa.name}/{sb.name}"
        self.mu = min(sa.mu, sb.mu)
        self.body_a, self.body_b = tuple(sa.body), None if sb.body is None else tuple(sb.body)
        self.index = -1  # its place in its plan's pairs
        self.own = isinstance(sb.geometry, coal.Halfspace) and isinstance(sa.geometry, _OWN_KINDS)
        self.poly = (isinstance(sb.geometry, coal.Halfspace) and isinstance(sa.geometry, coal.ConvexBase)
                     and sa.geometry.getSweptSphereRadius() == 0.0)  # :func:`_polytope_contacts`, not Coal


class _Plan:
    """What :func:`find_contacts` needs of a shape list and its excluded pairs, gathered once: the pairs that may
    touch (different bodies, groups and masks that meet, not excluded; in (i, j) order) with their constants and
    broad-phase kind, and the shapes in them (rows) with their bounds and placements."""

    def __init__(self, shapes, excluded):
        self.shapes, self.excluded = tuple(shapes), excluded  # held: the cache is keyed by their identities
        n = len(shapes)
        ij = [(i, j) for i in range(n) for j in range(i + 1, n)
              if shapes[i].body != shapes[j].body and shapes[i].group & shapes[j].mask
              and shapes[j].group & shapes[i].mask and (i, j) not in excluded]
        used = sorted({k for p in ij for k in p})
        row = {k: r for r, k in enumerate(used)}
        self.pairs = [_Pair(shapes, i, j, row) for i, j in ij]
        # per pair what a ContactArrays repeats per point: friction, sides, the pair's number (equal for equal
        # names: the warm start's) and the names by number
        keys = {}
        for k, pair in enumerate(self.pairs):
            pair.index = k
            keys.setdefault(pair.name, len(keys))
        self.pair_mu = np.array([p.mu for p in self.pairs], dtype=float)
        self.pair_sides = np.array([p.body_a + ((-1, -1) if p.body_b is None else p.body_b) for p in self.pairs],
                                   dtype=np.int64).reshape(-1, 4)
        self.pair_keys = np.array([keys[p.name] for p in self.pairs], dtype=np.int64)
        self.key_names = tuple(keys)
        self.space = next(_SPACES)  # the numbering of the keys: this plan's
        m = len(used)
        self.bounds = np.zeros((m, 7))
        kinds, verts, self.vstart = [], [np.zeros((0, 3))], np.zeros(m + 1, dtype=np.int64)
        for r, k in enumerate(used):
            b = _local_bounds(shapes[k])
            kinds.append(None if b is None else b[0])
            nv = 0
            if b is not None:
                self.bounds[r] = (*b[1], *b[2], b[3])
                if b[4] is not None:
                    verts.append(b[4])
                    nv = len(b[4])
            self.vstart[r + 1] = self.vstart[r] + nv
        self.verts = np.ascontiguousarray(np.concatenate(verts))
        self.hint = np.zeros(m, dtype=np.int64)  # per polytope: where _near_pairs starts
        table = []
        for i, j in ij:
            ki, kj = kinds[row[i]], kinds[row[j]]
            kind = _SPHERES if ki == kj == "box" else _PLANE if {ki, kj} == {"plane", "box"} else _ALWAYS
            if kind == _PLANE and kj == "plane":
                i, j = j, i
            table.append((kind, row[i], row[j]))
        self.table = np.array(table, dtype=np.int64).reshape(-1, 3)
        # placements: (model, body, T_body_shape), model None for a world shape (its pose array read at each call);
        # Tbs: copies for the broad phase (bounds, like the shapes' geometry, are taken as fixed once used)
        self.Tbs = np.array([shapes[k].T_body_shape for k in used], dtype=float).reshape(m, 4, 4)
        self.where = [(*(shapes[k].body or (None, None)), shapes[k].T_body_shape) for k in used]
        self.models = sorted({w[0] for w in self.where if w[0] is not None})
        self._gidx = (None, None)

    def broad(self, body_poses, margin):
        """The pairs whose bounds come within ``margin`` (+ BROAD_SLACK), in order: a pair left out is farther
        apart than ``margin`` (its bounding sphere, box or vertices are), so Coal would have found nothing."""
        return self.candidates(body_poses, margin)[0]

    def candidates(self, body_poses, margin):
        """``(pairs, B, gidx, at)``: :meth:`broad`'s pairs, the models' body poses stacked (nb, 4, 4), each row's
        body's index in them (-1: a world shape) and the pairs' places in :attr:`pairs`."""
        sizes = (len(body_poses[self.models[0]]),) if len(self.models) == 1 else tuple(
            len(body_poses[k]) for k in self.models)
        if self._gidx[0] != sizes:  # rows' indices into the stacked body poses of the models with shapes
            start = dict(zip(self.models, np.cumsum((0,) + sizes[:-1]).tolist()))
            self._gidx = (sizes, np.array([-1 if w[0] is None else start[w[0]] + w[1] for w in self.where],
                                          dtype=np.int64))
        gidx = self._gidx[1]
        if len(self.models) == 1:
            B = np.asarray(body_poses[self.models[0]], dtype=float)
        else:
            B = np.concatenate([np.asarray(body_poses[k], dtype=float).reshape(-1, 4, 4) for k in self.models]
                               or [np.zeros((0, 4, 4))])
        B = B.reshape(-1, 4, 4)
        idx = np.empty(len(self.pairs), dtype=np.int64)
        n = _near_pairs(B, gidx, self.Tbs, self.table, self.bounds, self.verts, self.vstart, self.hint,
                        float(margin) + BROAD_SLACK, idx)
        pairs = self.pairs
        return [pairs[k] for k in idx[:n].tolist()], B, gidx, idx[:n]


_PLANS = {}
_SPACES = itertools.count()


def _plan(shapes, excluded) -> _Plan:
    """The :class:`_Plan` of these shapes (by identity) and excluded pairs, made at the first call."""
    try:
        key = (tuple(shapes), excluded)
        plan = _PLANS.get(key)
    except TypeError:  # an unhashable container of excluded pairs
        excluded = frozenset(excluded)
        key = (tuple(shapes), excluded)
        plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 64:
            _PLANS.clear()
        plan = _PLANS[key] = _Plan(shapes, excluded)
    return plan


def _candidates(body_poses, shapes, margin, excluded=frozenset()):
    """The index pairs ``(i, j)``, i < j in order, that may touch (:class:`_Plan`) and whose bounds may come
    within ``margin``: the broad phase. Only these go to Coal."""
    return [p.ij for p in _plan(shapes, excluded).broad(body_poses, margin)]


_SCRATCH = threading.local()


def _coal_objects(margin, max_points, placements):
    """This thread's Coal collision and patch request and result objects, the requests set to ``margin`` and
    ``max_points`` (a result is cleared before each use: :func:`find_contacts`; computeContactPatch clears its
    own), and at least ``placements`` transforms (written before each use)."""
    objects = getattr(_SCRATCH, "objects", None)
    if objects is None:
        req = coal.CollisionRequest()
        req.num_max_contacts = 1
        preq = coal.ContactPatchRequest()
        objects = _SCRATCH.objects = (req, coal.CollisionResult(), preq, coal.ContactPatchResult(preq), [])
    req, _, preq, _, pool = objects
    req.security_margin = preq.patch_tolerance = float(margin)
    preq.max_size_patch = int(max_points)
    while len(pool) < placements:
        pool.append(coal.Transform3s())
    return objects


def find_contacts(body_poses, shapes, margin: float = 1e-3, max_points: int = 8, excluded=frozenset(),
                  min_separation: float = 5e-3, max_kept: int = 4, checkpoint=None, arrays: bool = False):
    """The :class:`Contact` points of every pair of ``shapes`` on different bodies (world shapes never pair
    with each other) within ``margin``; ``body_poses[k]`` (nb_k, 4, 4) are model k's bodies' world poses.
    Pairs whose groups and masks do not meet, and index pairs ``(i, j)`` (i < j) in ``excluded``
    (:func:`mbs_ros.dynamics.contact.collision.excluded_pairs`), are skipped. Of a pair's contact patch at most
    ``max_kept`` points are kept, at least ``min_separation`` apart (:func:`_reduce`: a box's four corners on a
    plane stay). Friction of a pair: the smaller ``mu`` of the two. ``checkpoint()``, when given, is called
    between the pairs Coal is asked about (where a node may suspend the search: the contact step's checkpoints).
    With ``arrays`` the same contacts come as one :class:`~mbs_ros.dynamics.contact.step.ContactArrays` (the
    contact step's input: no object per point).

    Fast where it can be without changing a number: the pairs' constants are gathered once per shape list
    (:class:`_Plan`), Coal's request and result objects once per thread (a result cleared per pair: a fresh
    one's state), only the candidate pairs' shapes are placed (``pose @ T_body_shape``, as NumPy multiplies)."""
    plan = _plan(shapes, excluded)
    candidates, B, gidx, at = plan.candidates(body_poses, margin)
    if not candidates:
        return _no_contacts(plan) if arrays else []
    req, res, preq, pres, pool = _coal_objects(margin, max_points, len(plan.where))
    where, g = plan.where, gidx.tolist()
    Ts = [None] * len(where)  # the world poses of the rows placed (pool[r]: their Coal placements)
    min_separation, max_kept = float(min_separation), int(max_kept)
    kept = np.empty(max(max_kept, 1), dtype=np.int64)
    polys = [pair for pair in candidates if pair.poly]
    if polys:  # every polytope on a half-space at once, compiled (their results are this call's own arrays)
        ab = np.array([(pair.a, pair.b) for pair in polys], dtype=np.int64)
        width = max(max_kept, 1)
        poly_points, poly_distance = np.empty((len(polys), width, 3)), np.empty((len(polys), width))
        poly_normals, poly_counts = np.empty((len(polys), 3)), np.empty(len(polys), dtype=np.int64)
        _polytope_contacts(B, gidx, plan.Tbs, ab, plan.bounds, plan.verts, plan.vstart, float(margin), FLUSH,
                           min_separation, max_kept, poly_points, poly_distance, poly_normals, poly_counts)
        if arrays and len(polys) == len(candidates):  # every pair a polytope on a half-space: no loop over them
            if checkpoint is not None:  # the checkpoints the loop below would make between its pairs
                for _ in range(len(candidates) - 1):
                    checkpoint()
            return _poly_arrays(plan, at, poly_points, poly_normals, poly_distance, poly_counts)
        poly_counts = poly_counts.tolist()
    k_poly = 0
    out = []
    placed = [False] * len(where)  # rows whose Coal placement (pool[r]) holds Ts[r]
    for n, pair in enumerate(candidates):
        if n and checkpoint is not None:
            checkpoint()
            # another search in this thread (while suspended) may have set the shared request and placements
            req, res, preq, pres, pool = _coal_objects(margin, max_points, len(where))
            placed = [False] * len(where)
        if pair.poly:
            count, k = poly_counts[k_poly], k_poly
            k_poly += 1
            if count:
                if arrays:
                    out.append((pair, count, poly_points[k, :count], poly_normals[k], poly_distance[k, :count]))
                    continue
                body_a, body_b, mu, name, normal = pair.body_a, pair.body_b, pair.mu, pair.name, poly_normals[k]
                depth, at = poly_distance[k].tolist(), poly_points[k]
                out += [_contact(body_a, at[p], normal, depth[p], mu, body_b, name) for p in range(count)]
            continue
        a, b = pair.a, pair.b
        for r in (a, b):
            if not placed[r]:
                if Ts[r] is None:
                    T_body_shape = where[r][2]
                    Ts[r] = T_body_shape if g[r] < 0 else B[g[r]].dot(T_body_shape)  # pose @ T_body_shape
                T = Ts[r]
                pool[r].setTransform(T[:3, :3], T[:3, 3])
                placed[r] = True
        ga, gb, ta, tb = pair.sa.geometry, pair.sb.geometry, pool[a], pool[b]
        res.clear()
        if not coal.collide(ga, ta, gb, tb, req, res):
            continue
        coal.computeContactPatch(ga, ta, gb, tb, res, preq, pres)
        for k in range(pres.numContactPatches()):
            patch = pres.getContactPatch(k)
            n12 = patch.getNormal()  # from shape a to shape b (a new array)
            points = np.array(list(map(patch.getPoint, range(patch.size())))).reshape(-1, 3)
            three = np.empty((3,) + points.shape)
            _patch_points(points, patch.penetration_depth / 2, n12, three)
            pa, gap, mid = three
            dist = gap @ n12
            if pair.own:
                dist, mid = _own_distances(pair.sa, Ts[a], pair.sb, Ts[b], mid, n12, dist, mid)
            normal = -n12
            count = _reduce_into(pa, dist, min_separation, max_kept, kept)
            if arrays:
                if count:
                    at = kept[:count]
                    out.append((pair, count, mid[at], normal, dist[at]))
                continue
            body_a, body_b, mu, name = pair.body_a, pair.body_b, pair.mu, pair.name
            depth = dist.tolist()
            out += [_contact(body_a, mid[p], normal, depth[p], mu, body_b, name) for p in kept[:count].tolist()]
    return _as_arrays(plan, out) if arrays else out


def _no_contacts(plan) -> ContactArrays:
    return ContactArrays(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0),
                         np.zeros((0, 4), dtype=np.int64), np.zeros(0, dtype=np.int64), plan.key_names, plan.space)


def _poly_arrays(plan, at, points, normals, distance, counts) -> ContactArrays:
    """:func:`_polytope_contacts`' results for the plan's pairs ``at`` (their places in ``plan.pairs``) as one
    :class:`~mbs_ros.dynamics.contact.step.ContactArrays`: :func:`_as_arrays`' of their blocks, the same rows."""
    found = np.arange(points.shape[1]) < counts[:, None]  # (pairs, width): the first counts[k] points of pair k
    return ContactArrays(points[found], normals.repeat(counts, axis=0), distance[found],
                         plan.pair_mu[at].repeat(counts), plan.pair_sides[at].repeat(counts, axis=0),
                         plan.pair_keys[at].repeat(counts), plan.key_names, plan.space)


def _as_arrays(plan, blocks) -> ContactArrays:
    """:func:`find_contacts`' blocks ``(pair, count, points (count, 3), normal (3,), distance (count,))`` as one
    :class:`~mbs_ros.dynamics.contact.step.ContactArrays`, in order (the pair's constants from the plan's arrays)."""
    if not blocks:
        return _no_contacts(plan)
    pidx = np.array([b[0].index for b in blocks], dtype=np.int64)
    counts = np.array([b[1] for b in blocks], dtype=np.int64)
    points, distance = np.concatenate([b[2] for b in blocks]), np.concatenate([b[4] for b in blocks])
    normals = np.array([b[3] for b in blocks], dtype=float).repeat(counts, axis=0)
    return ContactArrays(points, normals, distance, plan.pair_mu[pidx].repeat(counts),
                         plan.pair_sides[pidx].repeat(counts, axis=0), plan.pair_keys[pidx].repeat(counts),
                         plan.key_names, plan.space)


def warm_up() -> None:
    """Load (or compile) the compiled kernels of :func:`find_contacts` with the types its calls use: a box and a
    convex polytope (a cube's hull) resting on a half-space (a contact step's first call would otherwise load them
    inside a node's callback)."""
    T = np.eye(4)
    T[2, 3] = 0.05
    vertices = coal.StdVec_Vec3s()
    for corner in np.array(np.meshgrid([-0.05, 0.05], [-0.05, 0.05], [-0.05, 0.05])).reshape(3, -1).T:
        vertices.append(np.ascontiguousarray(corner, dtype=float))
    hull = Shape("hull", coal.Convex.convexHull(vertices, False, None), (0, 1))
    find_contacts([np.array([T, T])], [halfspace("ground", (0.0, 0.0, 1.0)), box("box", (0.1, 0.1, 0.1), (0, 0)),
                                       hull])


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
