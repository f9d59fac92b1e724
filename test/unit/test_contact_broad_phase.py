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
