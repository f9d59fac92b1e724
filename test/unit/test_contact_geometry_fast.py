""":func:`mbs_ros.dynamics.contact.geometry.find_contacts` (its cached pair constants, broad phase, reused Coal
objects, one Coal call per patch point and compiled reduction) gives the contacts Coal gives called directly
(``tools/contact_geometry_check.coal_contacts``: every pair, fresh objects, ``getPointShape1/2``, the reduction
as first written; a convex polytope on a half-space from its vertices in NumPy, and a pair whose deepest vertex is
at the margin's edge left out, found or not by rounding): same count, order, names, bodies, friction; points,
normals and distances within 1e-12 m. On
random scenes of boxes, spheres, cylinders and convex polytopes on bodies and in the world, a level and a sloped
ground, near-flush faces, edges and single corners, at margins from 0 to the shapes' size.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics.contact import geometry as geo

coal = pytest.importorskip("coal")
check = pytest.importorskip("tools.contact_geometry_check")


def _hull(rng, scale):
    vertices = coal.StdVec_Vec3s()
    for p in rng.normal(size=(30, 3)) * scale:
        vertices.append(p)
    return coal.Convex.convexHull(vertices, False, None)


def _rotation(rng, kind):
    """A random rotation, or one that leaves a face nearly flush (within 1e-7 rad, or exactly) to the ground, or
    an edge: a face's normal tilted about one axis only."""
    if kind == "any":
        return Rotation.from_rotvec(rng.normal(size=3)).as_matrix()
    yaw = Rotation.from_rotvec([0.0, 0.0, rng.uniform(-np.pi, np.pi)])
    tilt = {"flush": 0.0, "near flush": rng.normal(scale=1e-7), "edge": rng.uniform(0.1, 1.0)}[kind]
    return (yaw * Rotation.from_rotvec([tilt, 0.0, 0.0])).as_matrix()


def _scene(rng, slope):
    n = np.array([slope, 0.0, 1.0])
    block = np.eye(4)
    block[:3, 3] = (0.2, 0.2, 0.1)
    shapes = [geo.halfspace("ground", n, 0.0, mu=0.7), geo.box("block", (0.3, 0.3, 0.2), None, block, mu=0.4)]
    makers = [lambda k: geo.box(f"box{k}", rng.uniform(0.05, 0.3, size=3), (0, k)),
              lambda k: geo.sphere(f"ball{k}", rng.uniform(0.03, 0.1), (0, k)),
              lambda k: geo.cylinder(f"can{k}", rng.uniform(0.02, 0.08), rng.uniform(0.05, 0.3), (0, k)),
              lambda k: geo.Shape(f"hull{k}", _hull(rng, (0.03, 0.05, 0.08)), (0, k), np.eye(4), 0.8)]
    nb = 5
    shapes += [makers[rng.integers(4)](k) for k in range(nb)]
    shapes.append(geo.Shape("foot", _hull(rng, 0.02), (1, 0), np.eye(4), 0.9))  # a second model
    poses = [np.empty((nb, 4, 4)), np.empty((1, 4, 4))]
    for T in [*poses[0], *poses[1]]:
        T[:] = np.eye(4)
        T[:3, :3] = _rotation(rng, rng.choice(["any", "flush", "near flush", "edge"]))
        T[:2, 3] = rng.normal(scale=0.15, size=2)
    # each body's lowest point at a random height about the margin's edge over the ground below it
    margin = float(rng.choice([0.0, 1e-3, 1e-2, 0.1]))
    unit = n / np.linalg.norm(n)
    for s in shapes[2:]:
        T = poses[s.body[0]][s.body[1]]
        low = _lowest(s, T, unit)
        T[:3, 3] += unit * (margin * rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 1.0 + 1e-9, 2.0]) - low
                            + rng.choice([0.0, rng.normal(scale=1e-3)]))
    return poses, shapes, margin


def _lowest(shape, T, unit):
    """The shape's lowest height along ``unit`` at pose T (its support, sampled enough for a test)."""
    g, R, p = shape.geometry, T[:3, :3], T[:3, 3]
    if isinstance(g, coal.Box):
        return float(unit @ p - np.abs(R.T @ unit) @ np.asarray(g.halfSide))
    if isinstance(g, coal.Sphere):
        return float(unit @ p - g.radius)
    if isinstance(g, coal.Cylinder):
        nl = R.T @ unit
        return float(unit @ p - abs(nl[2]) * g.halfLength - np.hypot(nl[0], nl[1]) * g.radius)
    vertices = np.array([g.point(k) for k in range(g.num_points)])
    return float((vertices @ R.T @ unit).min() + unit @ p)


def _off(contacts, names):
    """The contacts of the pairs not named (a polytope whose deepest vertex is at the margin's edge: found or not
    by rounding, :func:`tools.contact_geometry_check.polytope_edge_pairs`)."""
    return [c for c in contacts if c.name not in names]


@pytest.mark.parametrize("seed", range(8))
def test_find_contacts_gives_what_coal_gives(seed):
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(60):
        poses, shapes, margin = _scene(rng, float(rng.choice([0.0, 0.3])))
        excluded = frozenset({(2, 3)}) if rng.random() < 0.3 else frozenset()
        got = geo.find_contacts(poses, shapes, margin=margin, excluded=excluded)
        want = check.coal_contacts(poses, shapes, margin=margin, excluded=excluded)
        edge = check.polytope_edge_pairs(poses, shapes, margin)
        why, _ = check.differences(_off(got, edge), _off(want, edge))
        assert why is None, why
        found += len(want)
        again = geo.find_contacts(poses, shapes, margin=margin, excluded=excluded)  # cached constants, hints
        assert check.differences(_off(again, edge), _off(want, edge))[0] is None
    assert found > 100  # the scenes touch


@pytest.mark.parametrize("seed", range(3))
def test_a_search_stopped_between_its_pairs_gives_what_coal_gives(seed):
    """A node may suspend a search at its checkpoints (between the pairs) and run another search in the same
    thread meanwhile, which sets this thread's Coal request and placements to its own: the resumed search still
    gives Coal's contacts, and the checkpoint comes between every two pairs asked about."""
    rng = np.random.default_rng(100 + seed)
    calls = found = 0
    for _ in range(30):
        poses, shapes, margin = _scene(rng, float(rng.choice([0.0, 0.3])))
        other = _scene(rng, 0.3)
        n_pairs = len(geo._candidates(poses, shapes, margin))

        def checkpoint():
            nonlocal calls
            calls += 1
            geo.find_contacts(other[0], other[1], margin=other[2] + 0.05, max_points=3)

        before = calls
        got = geo.find_contacts(poses, shapes, margin=margin, checkpoint=checkpoint)
        assert calls - before == max(n_pairs - 1, 0)
        want = check.coal_contacts(poses, shapes, margin=margin)
        edge = check.polytope_edge_pairs(poses, shapes, margin)
        why = check.differences(_off(got, edge), _off(want, edge))[0]
        assert why is None, why
        found += len(want)
    assert found > 50 and calls > 100


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_reduction_keeps_the_points_the_first_one_kept(seed):
    """Same indices as the reduction as first written (NumPy), with ties, repeated points, one or no point."""
    rng = np.random.default_rng(seed)
    for _ in range(400):
        n = int(rng.integers(0, 12))
        points = rng.normal(scale=0.01, size=(n, 3))
        if n > 3 and rng.random() < 0.5:  # repeated points and tied depths
            points[1] = points[0]
            points[3] = points[2]
        distance = rng.choice([0.0, -1e-4, 1e-4], size=n) if rng.random() < 0.5 else rng.normal(size=n)
        sep, kept = float(rng.choice([0.0, 5e-3, 0.02])), int(rng.integers(1, 6))
        assert geo._reduce(points, distance, sep, kept).tolist() == check.reduce_reference(points, distance, sep,
                                                                                            kept)


def test_a_plan_follows_its_shapes_and_excluded_pairs():
    """The cached constants are those of the shapes and excluded pairs of the call: another list, a pair
    excluded, a pair's group changed by a new shape object, all give Coal's answer."""
    rng = np.random.default_rng(7)
    poses, shapes, margin = _scene(rng, 0.0)
    for T in poses[0]:
        T[2, 3] -= 1.0  # everything touches the ground
    base = geo.find_contacts(poses, shapes, margin=margin)
    assert base and check.differences(base, check.coal_contacts(poses, shapes, margin=margin))[0] is None
    first_pair = (0, shapes.index(next(s for s in shapes if s.name == base[0].name.split("/")[0])))
    fewer = geo.find_contacts(poses, shapes, margin=margin, excluded={first_pair})
    assert [c.name for c in fewer] == [c.name for c in check.coal_contacts(poses, shapes, margin=margin,
                                                                           excluded={first_pair})]
    assert len(fewer) < len(base)
    ground = shapes[0]
    shapes[0] = geo.Shape(ground.name, ground.geometry, None, ground.T_body_shape, ground.mu, mask=0)
    none = geo.find_contacts(poses, shapes, margin=margin)
    assert check.differences(none, check.coal_contacts(poses, shapes, margin=margin))[0] is None
    assert not any(c.name.endswith("/ground") for c in none)


@pytest.mark.parametrize("seed", range(4))
def test_the_contacts_as_arrays_are_coals_contacts(seed):
    """``find_contacts(..., arrays=True)`` (the contact step's input: no object per point) holds Coal's contacts:
    as objects (made from the arrays) and in its own arrays, row for row, with each pair's number equal exactly
    where the names are equal."""
    rng = np.random.default_rng(200 + seed)
    found = 0
    for _ in range(40):
        poses, shapes, margin = _scene(rng, float(rng.choice([0.0, 0.3])))
        got = geo.find_contacts(poses, shapes, margin=margin, arrays=True)
        want = check.coal_contacts(poses, shapes, margin=margin)
        edge = check.polytope_edge_pairs(poses, shapes, margin)
        objects = list(got)
        assert len(objects) == len(got)
        why = check.differences(_off(objects, edge), _off(want, edge))[0]
        assert why is None, why
        for k, c in enumerate(objects):
            assert np.array_equal(got.points[k], c.point) and np.array_equal(got.normals[k], c.normal)
            assert (got.distance[k], got.mu[k], got.names[k]) == (c.distance, c.mu, c.name)
            assert tuple(got.sides[k]) == c.a + ((-1, -1) if c.b is None else c.b)
        names = got.names
        for i in range(len(got)):
            for j in range(len(got)):
                assert (got.keys[i] == got.keys[j]) == (names[i] == names[j])
        deep = got.distance <= 0.5 * margin
        picked = got.select(deep)
        assert [c.name for c in picked] == [c.name for c in objects if c.distance <= 0.5 * margin]
        found += len(want)
    assert found > 50


@pytest.mark.parametrize("seed", range(3))
def test_feet_on_the_ground_as_arrays_are_coals_contacts(seed):
    """Only convex polytopes over a half-space (a legged robot's feet: every pair compiled, no loop over them):
    the arrays hold Coal's contacts, and a search with a checkpoint makes one between every two pairs."""
    rng = np.random.default_rng(300 + seed)
    found = 0
    for _ in range(30):
        n = np.array([float(rng.choice([0.0, 0.2])), 0.0, 1.0])
        unit = n / np.linalg.norm(n)
        shapes = [geo.halfspace("ground", n, 0.0, mu=0.7)]
        shapes += [geo.Shape(f"foot{k}", _hull(rng, 0.02), (0, k), np.eye(4), float(rng.uniform(0.3, 1.0)))
                   for k in range(4)]
        margin = float(rng.choice([1e-3, 1e-2]))
        poses = [np.empty((4, 4, 4))]
        for k, T in enumerate(poses[0]):
            T[:] = np.eye(4)
            T[:3, :3] = _rotation(rng, rng.choice(["any", "flush", "edge"]))
            T[:2, 3] = (0.3 * k, rng.normal(scale=0.05))
            low = _lowest(shapes[k + 1], T, unit)
            T[:3, 3] += unit * (margin * rng.choice([-1.0, 0.0, 0.5, 2.0]) - low)
        calls = []
        got = geo.find_contacts(poses, shapes, margin=margin, arrays=True, checkpoint=lambda: calls.append(1))
        assert len(calls) == max(len(geo._candidates(poses, shapes, margin)) - 1, 0)
        want = check.coal_contacts(poses, shapes, margin=margin)
        edge = check.polytope_edge_pairs(poses, shapes, margin)
        why = check.differences(_off(list(got), edge), _off(want, edge))[0]
        assert why is None, why
        for k, c in enumerate(got):
            assert np.array_equal(got.points[k], c.point) and np.array_equal(got.normals[k], c.normal)
            assert (got.distance[k], got.mu[k], got.names[k]) == (c.distance, c.mu, c.name)
        found += len(want)
    assert found > 40
