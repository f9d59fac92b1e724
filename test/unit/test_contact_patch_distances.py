"""Each contact patch point has its own distance (mbs_ros.dynamics.contact.geometry.find_contacts): Coal's
contact patch gives every point the deepest point's distance, which held a face tilted within the margin flush
(the ROV of rov_landing rested at 9.900 deg on the 10 deg slope). Closed forms: the corners of a tilted box and
the ends of a tilted cylinder above a plane."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics.contact.geometry import box, cylinder, find_contacts, halfspace


def _pose(rotvec, z):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[2, 3] = z
    return T


@pytest.mark.parametrize("angle", [0.001, 0.005, -0.004])
def test_a_tilted_box_has_its_corners_distances(angle):
    """A 0.4 x 0.2 x 0.2 m box turned by ``angle`` about x, its centre 0.1 m above the plane z = 0: its bottom
    corners (y = ±0.1, z = -0.1 in the box) are at z = 0.1 + (±0.1) sin a - 0.1 cos a."""
    T = _pose([angle, 0, 0], 0.1)
    contacts = find_contacts([np.array([T])], [box("b", (0.4, 0.2, 0.2), body=(0, 0)),
                                               halfspace("g", (0, 0, 1), 0.0)], margin=3e-3)
    assert len(contacts) == 4
    expected = sorted(0.1 + y * np.sin(angle) - 0.1 * np.cos(angle) for y in (0.1, 0.1, -0.1, -0.1))
    got = sorted(c.distance for c in contacts)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)
    for c in contacts:  # the point lies between the corner and the plane, below the corner
        np.testing.assert_allclose(c.point[2], 0.5 * c.distance, atol=1e-15)


def test_a_tilted_cylinder_has_its_ends_distances():
    """A cylinder (r 0.02, L 0.2) lying along x, tilted by a about y (its +x end down), its centre 0.02 m above
    the plane: its bottom generator, (0, 0, 0.02) - r (sin a, 0, cos a) + s (cos a, 0, -sin a), is at
    z = 0.02 - r cos a - s sin a with s = (x + r sin a) / cos a above the world's x: each contact's distance is
    that height at its point's x. Within 1e-6 m, not rounding: Coal's patch end lies on the bottom rim to ~1e-10 m,
    and the line through it along the normal leaves through the end cap, tilted by a from the normal, up to
    1e-10/a higher (the defect this guards against is 0.2 sin a = 6e-4 m)."""
    a, r = 0.003, 0.02
    T = _pose([0, np.pi / 2, 0], 0.02)
    T[:3, :3] = Rotation.from_rotvec([0, a, 0]).as_matrix() @ T[:3, :3]
    contacts = find_contacts([np.array([T])], [cylinder("c", r, 0.2, body=(0, 0)),
                                               halfspace("g", (0, 0, 1), 0.0)], margin=3e-3)
    assert len(contacts) == 2
    for c in contacts:
        s = (c.point[0] + r * np.sin(a)) / np.cos(a)
        assert abs(s) <= 0.1 + 1e-9
        np.testing.assert_allclose(c.distance, 0.02 - r * np.cos(a) - s * np.sin(a), rtol=0, atol=1e-6)
    ends = sorted(c.distance for c in contacts)
    assert ends[1] - ends[0] > 0.19 * np.sin(a)  # the ends apart, not both at the deepest


def _cube_hull(half):
    """A cube of half-side ``half`` as Coal's convex polytope (a URDF mesh's hull): its 8 corners."""
    import coal

    vertices = coal.StdVec_Vec3s()
    for corner in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T * half:
        vertices.append(corner.astype(float))
    return coal.Convex.convexHull(vertices, False, None)


@pytest.mark.parametrize("slope", [0.0, 0.3])
@pytest.mark.parametrize("angle", [0.004, -0.006])
def test_a_tilted_polytope_has_its_vertices_distances_and_no_other_point(slope, angle):
    """A cube hull of half-side 0.05 m turned by ``angle`` about x, its centre 0.05 m from the plane along the
    plane's normal n = (sin s, 0, cos s) (a ground sloped by s about y), margin 3 mm: its four bottom corners
    (y = ±0.05, z = -0.05 in the cube, set on the slope) are at 0.05 + (±0.05) sin a - 0.05 cos a from the plane,
    each contact the middle of its corner and the corner's foot on the plane, along n, n its normal; the top four
    are 10 cm up, out of the margin."""
    from mbs_ros.dynamics.contact.geometry import Shape

    tilt = Rotation.from_rotvec([0.0, slope, 0.0])
    n = tilt.apply([0.0, 0.0, 1.0])
    T = np.eye(4)
    T[:3, :3] = (tilt * Rotation.from_rotvec([angle, 0.0, 0.0])).as_matrix()
    T[:3, 3] = 0.05 * n + np.array([0.3, -0.2, 0.0])
    offset = float(n @ [0.3, -0.2, 0.0])  # the plane through the cube's foot point
    contacts = find_contacts([np.array([T])], [Shape("cube", _cube_hull(0.05), (0, 0), np.eye(4), 0.6),
                                               halfspace("g", n, offset, mu=0.9)], margin=3e-3)
    assert len(contacts) == 4
    corners = [T[:3, :3] @ [x, y, -0.05] + T[:3, 3] for x in (-0.05, 0.05) for y in (-0.05, 0.05)]
    assert sorted(c.distance for c in contacts) == pytest.approx(
        sorted(0.05 + y * np.sin(angle) - 0.05 * np.cos(angle) for y in (0.05, 0.05, -0.05, -0.05)), abs=1e-15)
    for c in contacts:
        assert c.name == "cube/g" and c.mu == 0.6 and c.a == (0, 0) and c.b is None
        np.testing.assert_allclose(c.normal, n, atol=1e-15)
        corner = min(corners, key=lambda x: np.linalg.norm(x - c.point))
        np.testing.assert_allclose(c.point, corner - 0.5 * c.distance * n, atol=1e-15)
    assert min(c.distance for c in contacts) == contacts[0].distance  # the deepest first


def test_a_polytope_on_a_plane_is_not_asked_of_coal(monkeypatch):
    """The polytope-on-plane pairs are computed by find_contacts itself (compiled, all at once); Coal is asked only
    about the other pairs (here a box beside the cube on the same plane)."""
    import coal

    from mbs_ros.dynamics.contact import geometry as geo

    asked = []
    collide = coal.collide
    monkeypatch.setattr(geo.coal, "collide", lambda ga, *rest: asked.append(type(ga).__name__) or collide(ga, *rest))
    T_cube, T_box = np.eye(4), np.eye(4)
    T_cube[2, 3], T_box[:3, 3] = 0.049, (1.0, 0.0, 0.049)
    contacts = find_contacts([np.array([T_cube, T_box])], [geo.Shape("cube", _cube_hull(0.05), (0, 0)),
                                                           box("box", (0.1, 0.1, 0.1), body=(0, 1)),
                                                           halfspace("g", (0, 0, 1), 0.0)], margin=3e-3)
    assert asked == ["Box"]
    assert sorted(c.name for c in contacts) == ["box/g"] * 4 + ["cube/g"] * 4
    assert all(c.distance == pytest.approx(-1e-3, abs=1e-15) for c in contacts)
