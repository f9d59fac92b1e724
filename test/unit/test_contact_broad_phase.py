"""The broad phase of :func:`mbs_ros.dynamics.contact.geometry.find_contacts` (``_Plan.broad``: bounding spheres,
and against a half-space a shape's box or a convex polytope's vertices) drops only pairs Coal would not report: the
contacts are the same, bit for bit, as with every pair handed to Coal (the reference), on shapes of every kind in
random poses and margins."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics.contact import geometry as geo

coal = pytest.importorskip("coal")


def _all_pairs(plan, _poses, _margin):
    return list(plan.pairs)


def _hull(rng):
    """A convex polytope (Coal's hull of random points, as collision.py makes a mesh's), an elongated one."""
    vertices = coal.StdVec_Vec3s()
    for p in rng.normal(size=(40, 3)) * (0.03, 0.05, 0.12):
        vertices.append(p)
    return coal.Convex.convexHull(vertices, False, None)


def _pose(rng, spread):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rng.normal(size=3)).as_matrix()
    T[:3, 3] = rng.normal(scale=spread, size=3)
    T[2, 3] = abs(T[2, 3]) * 0.5
    return T


def _scene(rng):
    nb = 6
    ground = geo.Shape("ground", coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0), None, np.eye(4), 0.7,
                       mask=0xFFFFFFFD)  # not against the lid (group 2): two half-spaces never touch
    shapes = [ground, geo.box("wall", (0.1, 2, 2), None, _pose(rng, 1.0))]
    for b in range(nb):
        T = _pose(rng, 0.05)
        shapes.append([geo.box, geo.sphere, geo.cylinder][b % 3](
            f"s{b}", *([(0.2, 0.1, 0.3)] if b % 3 == 0 else [0.1] if b % 3 == 1 else [0.05, 0.3]), body=(0, b),
            T=T))
        shapes.append(geo.Shape(f"h{b}", _hull(rng), (0, b), _pose(rng, 0.05), 0.6))
    shapes.append(geo.Shape("lid", coal.Halfspace(np.array([0.0, 0.0, -1.0]), -0.4), (0, 1), np.eye(4), 0.5,
                            group=2))
    poses = [np.array([_pose(rng, 0.3) for _ in range(nb)])]
    return poses, shapes


@pytest.mark.parametrize("seed", range(6))
def test_the_broad_phase_drops_only_pairs_coal_would_not_report(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(40):
        poses, shapes = _scene(rng)
        margin = float(rng.choice([0.0, 1e-3, 0.05, 0.3]))
        fast = geo.find_contacts(poses, shapes, margin=margin)
        with monkeypatch.context() as m:
            m.setattr(geo._Plan, "broad", _all_pairs)
            ref = geo.find_contacts(poses, shapes, margin=margin)
        assert [(c.name, c.a, c.b, c.distance, c.mu) for c in fast] == [(c.name, c.a, c.b, c.distance, c.mu)
                                                                          for c in ref]
        for a, b in zip(fast, ref):
            assert np.array_equal(a.point, b.point) and np.array_equal(a.normal, b.normal)
        found += len(ref)
    assert found > 20  # the scenes touch: the comparison is not between two empty lists


def test_the_broad_phase_skips_far_pairs():
    """Its reason to be: far pairs never reach Coal."""
    shapes = [geo.halfspace("ground", (0, 0, 1))] + [geo.sphere(f"b{k}", 0.1, (0, k)) for k in range(4)]
    poses = [np.array([np.eye(4)] * 4)]
    for k in range(4):
        poses[0][k][:3, 3] = (3.0 * k, 0.0, 0.5 + k)
    assert geo._candidates(poses, shapes, 1e-3) == []
    poses[0][2][:3, 3] = (6.0, 0.0, 0.1005)  # sphere 2 within the margin of the ground
    assert geo._candidates(poses, shapes, 1e-3) == [(0, 3)]


@pytest.mark.parametrize("seed", range(4))
def test_a_polytope_reaches_coal_exactly_when_a_vertex_comes_within_the_margin(seed):
    """Against a half-space a convex polytope is bounded by its vertices, not its box: tilted so that its box
    reaches far below its lowest vertex, it is a candidate once that vertex is within the margin (and Coal reports
    it), not a micrometre before (Coal would not)."""
    rng = np.random.default_rng(seed)
    hull = _hull(rng)
    hull.computeLocalAABB()
    vertices = np.array([hull.point(k) for k in range(hull.num_points)])
    shapes = [geo.halfspace("ground", (0, 0, 1)), geo.Shape("hull", hull, (0, 0), np.eye(4), 0.5)]
    req = coal.CollisionRequest()
    for _ in range(10):
        T = _pose(rng, 0.1)
        low = float((vertices @ T[:3, :3].T)[:, 2].min())
        box = np.abs(T[:3, :3]) @ (0.5 * (np.asarray(hull.aabb_local.max_) - np.asarray(hull.aabb_local.min_)))
        assert (T[:3, :3] @ np.asarray(hull.aabb_center))[2] - box[2] < low - 1e-3  # the box reaches lower
        margin = 1e-3
        req.security_margin = margin
        for delta, near in ((-1e-6, True), (1e-6, False)):
            T[2, 3] = margin + delta - low
            assert geo._candidates([np.array([T])], shapes, margin) == ([(0, 1)] if near else [])
            res = coal.CollisionResult()
            tf = coal.Transform3s(T[:3, :3], T[:3, 3])
            assert bool(coal.collide(hull, tf, shapes[0].geometry, coal.Transform3s(), req, res)) is near


def _box_pair_at(rng, margin, delta):
    """Two boxes in random orientations, box 1 moved along a random direction until Coal's distance between them
    is ``margin + delta`` (bisection on Coal's distance: the reference), and their shapes."""
    shapes = [geo.box("a", tuple(rng.uniform(0.02, 0.4, 3)), (0, 0)), geo.box("b", tuple(rng.uniform(0.02, 0.4, 3)),
                                                                            (0, 1))]
    Ta, Tb = _pose(rng, 0.0), _pose(rng, 0.0)
    Ta[:3, 3] = 0.0
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    req, target = coal.DistanceRequest(), margin + delta

    def distance(s):
        Tb[:3, 3] = s * direction
        return coal.distance(shapes[0].geometry, coal.Transform3s(Ta[:3, :3], Ta[:3, 3]), shapes[1].geometry,
                             coal.Transform3s(Tb[:3, :3], Tb[:3, 3]), req, coal.DistanceResult())

    lo, hi = 0.0, 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if distance(mid) < target else (lo, mid)
    distance(hi)
    return [np.array([Ta, Tb.copy()])], shapes


@pytest.mark.parametrize("seed", range(4))
def test_two_boxes_within_the_margin_always_reach_coal(seed):
    """The oriented boxes' bound never drops a pair Coal reports: two boxes (their own boxes, the tightest case)
    in random orientations 1 µm inside the margin are candidates and Coal collides them."""
    rng = np.random.default_rng(100 + seed)
    req = coal.CollisionRequest()
    for _ in range(25):
        margin = float(rng.choice([0.0, 1e-3, 0.05]))
        poses, shapes = _box_pair_at(rng, margin, -1e-6)
        req.security_margin = margin
        Ta, Tb = poses[0]
        assert coal.collide(shapes[0].geometry, coal.Transform3s(Ta[:3, :3], Ta[:3, 3]), shapes[1].geometry,
                            coal.Transform3s(Tb[:3, :3], Tb[:3, 3]), req, coal.CollisionResult())
        assert geo._candidates(poses, shapes, margin) == [(0, 1)]


def test_boxes_whose_bounding_spheres_meet_but_are_apart_do_not_reach_coal():
    """Its reason to be: a long thin body beside another (a leg beside a robot's trunk) has bounding spheres that
    overlap by far; their oriented boxes are apart, so the pair never reaches Coal. Face to face, the boxes' bound
    is their distance: 1 µm beyond the margin they are dropped, 1 µm within it they are kept."""
    rng = np.random.default_rng(7)
    R = Rotation.from_rotvec(rng.normal(size=3)).as_matrix()
    shapes = [geo.box("trunk", (0.45, 0.22, 0.05), (0, 0)), geo.box("leg", (0.03, 0.03, 0.2), (0, 1))]
    margin = 1e-3
    for delta, near in ((1e-6, False), (-1e-6, True), (0.05, False)):
        Ta, Tb = np.eye(4), np.eye(4)
        Ta[:3, :3] = Tb[:3, :3] = R
        Tb[:3, 3] = R @ np.array([0.0, 0.11 + 0.015 + margin + delta, 0.0])  # side by side along the trunk's y
        assert np.linalg.norm(Tb[:3, 3]) < 0.25 + 0.1  # the spheres (radii ~0.25 and ~0.1) overlap
        assert geo._candidates([np.array([Ta, Tb])], shapes, margin) == ([(0, 1)] if near else [])
