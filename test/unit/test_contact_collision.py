"""Collision shapes from URDF <collision> and the self-collision filter (mbs_ros.dynamics.contact.collision)."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.collision import collision_shapes, excluded_pairs, read_srdf_disabled
from mbs_ros.dynamics.contact.geometry import find_contacts, halfspace
from mbs_ros.dynamics.model.urdf import ModelError

trimesh = pytest.importorskip("trimesh")

INERTIAL = '<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'


def _urdf(mesh_path, box="0.4 0.3 0.2", mesh_scale="2 2 2"):
    return f"""<robot name="arm">
      <link name="base">{INERTIAL}<collision><geometry><box size="{box}"/></geometry></collision></link>
      <link name="upper">{INERTIAL}<collision><origin xyz="0 0 0.25"/><geometry><sphere radius="0.05"/></geometry>
        </collision></link>
      <link name="sleeve">{INERTIAL}<collision name="sleeve_can"><origin xyz="0 0 0.1" rpy="1.5707963267948966 0 0"/>
        <geometry><cylinder radius="0.03" length="0.2"/></geometry></collision></link>
      <link name="hand">{INERTIAL}<collision><origin xyz="0 0 0.8"/>
        <geometry><mesh filename="{mesh_path}" scale="{mesh_scale}"/></geometry>
        </collision></link>
      <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/>
        <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="5"/></joint>
      <joint name="fixed_sleeve" type="fixed"><parent link="upper"/><child link="sleeve"/><origin xyz="0 0 0.3"/></joint>
      <joint name="wrist" type="revolute"><parent link="sleeve"/><child link="hand"/><origin xyz="0 0 0.5"/>
        <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="5"/></joint>
    </robot>"""


@pytest.fixture
def cube_mesh(tmp_path):
    path = tmp_path / "cube.stl"
    trimesh.creation.box(extents=(0.1, 0.1, 0.1)).export(path)
    return path


def test_shapes_their_bodies_and_placements(cube_mesh):
    urdf = _urdf(cube_mesh)
    model = Model.from_urdf(urdf, base="fixed")
    shapes = {s.link: s for s in collision_shapes(model, urdf)}
    assert set(shapes) == {"base", "upper", "sleeve", "hand"}
    assert type(shapes["base"].geometry).__name__ == "Box"
    np.testing.assert_allclose(2 * np.asarray(shapes["base"].geometry.halfSide), (0.4, 0.3, 0.2), rtol=0, atol=0)
    assert shapes["upper"].geometry.radius == 0.05
    # the sleeve is fixed to the upper arm: the same body, its frame 0.3 m up, the cylinder 0.1 m further, turned
    assert shapes["sleeve"].body == shapes["upper"].body != shapes["base"].body
    assert shapes["sleeve"].name == "sleeve_can"
    np.testing.assert_allclose(shapes["sleeve"].T_body_shape[:3, 3], (0.0, 0.0, 0.4), atol=1e-15)
    np.testing.assert_allclose(shapes["sleeve"].T_body_shape[:3, 2], (0.0, -1.0, 0.0), atol=1e-15)
    np.testing.assert_allclose(shapes["upper"].T_body_shape[:3, 3], (0.0, 0.0, 0.25), atol=1e-15)
    assert shapes["hand"].body != shapes["upper"].body


def test_a_mesh_is_its_convex_hull_scaled(cube_mesh):
    """The 0.1 m cube scaled by 2 is a 0.2 m box, 0.8 m beyond the hand's origin: with the arm straight up (the
    hand at 0.1 + 0.3 + 0.5 m) its distance to the plane z = -1 is 1 + 0.9 + 0.8 - 0.1 m."""
    urdf = _urdf(cube_mesh)
    model = Model.from_urdf(urdf, base="fixed")
    hand = [s for s in collision_shapes(model, urdf) if s.link == "hand"]
    poses = [alg.body_placements(model, model.neutral())]
    (contact, *_) = find_contacts(poses, hand + [halfspace("floor", (0, 0, 1), -1.0)], margin=5.0)
    # STL stores float32 vertices: 0.05 m is 0.05 + 7.5e-10, doubled by the scale
    assert contact.distance == pytest.approx(1.0 + 0.9 + 0.8 - 0.1, abs=2 * 2 * 0.05 * 2.0 ** -24)


@pytest.mark.parametrize("change,message", [
    (dict(mesh_path="missing.stl"), "link 'hand': collision mesh 'missing.stl'"),
    (dict(box="0.4 -0.3 0.2"), "link 'base': <box size> must be a positive number"),
    (dict(box="0.4 0.3"), "link 'base': <box size> needs 3 finite numbers"),
    (dict(mesh_scale="2 nan 2"), "link 'hand': <mesh scale> needs 3 finite numbers"),
])
def test_a_broken_collision_names_the_file_and_the_link(tmp_path, cube_mesh, change, message):
    kwargs = dict(mesh_path=cube_mesh)
    kwargs.update(change)
    path = tmp_path / "arm.urdf"
    path.write_text(_urdf(**kwargs))
    model = Model.from_urdf(_urdf(cube_mesh), base="fixed")
    with pytest.raises(ModelError) as err:
        collision_shapes(model, str(path))
    assert message in str(err.value) and str(path) in str(err.value)
    assert "<robot" not in str(err.value)  # never the file's content


def test_an_unreadable_mesh_names_it(tmp_path, cube_mesh):
    bad = tmp_path / "broken.stl"
    bad.write_bytes(b"solid nonsense\nthis is not an stl\n")
    urdf = _urdf(bad)
    model = Model.from_urdf(_urdf(cube_mesh), base="fixed")
    with pytest.raises(ModelError, match=r"link 'hand': collision mesh broken.stl (cannot be read|has no volume)"):
        collision_shapes(model, urdf)


def test_self_collision_filter_adjacent_srdf_and_touching(cube_mesh):
    urdf = _urdf(cube_mesh)
    model = Model.from_urdf(urdf, base="fixed")
    shapes = collision_shapes(model, urdf)
    index = {s.link: i for i, s in enumerate(shapes)}

    def pair(a, b):
        return tuple(sorted((index[a], index[b])))

    adjacent = excluded_pairs(shapes, [model])
    # base-upper and upper(+sleeve)-hand are joined by joints; upper and sleeve are one body
    assert pair("base", "upper") in adjacent and pair("sleeve", "hand") in adjacent and pair("upper", "sleeve") in adjacent
    assert pair("base", "hand") not in adjacent and pair("base", "sleeve") in adjacent
    srdf = '<robot name="arm"><disable_collisions link1="hand" link2="base" reason="Never"/></robot>'
    disabled = read_srdf_disabled(srdf)
    assert frozenset(("hand", "base")) in disabled
    assert pair("base", "hand") in excluded_pairs(shapes, [model], disabled)
    # the wrist folded back (pi): the hand's cube, 0.8 m beyond the wrist at 0.9 m, sits on the base's box
    # (centre 0.1 m, the box's top face): excluded only when asked to drop the pairs that touch there
    q = np.array([0.0, np.pi])
    poses = [alg.body_placements(model, q)]
    hits = find_contacts(poses, shapes, margin=0.0, excluded=adjacent)
    assert {c.name for c in hits} == {f"{shapes[index['base']].name}/{shapes[index['hand']].name}"}
    touching = excluded_pairs(shapes, [model], touching_at=[q])
    assert pair("base", "hand") in touching
    assert not find_contacts(poses, shapes, margin=0.0, excluded=touching)
