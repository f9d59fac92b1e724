"""The animation draws mesh visuals from their files (STL, DAE, OBJ through trimesh), decimated to a bounded
triangle count, so a robot with meshes is recognisable instead of boxes.

The reference geometry is read independently of the code under test: a binary STL written here with numpy (its
triangles and bounds known), and for example-robot-data's robots the count of mesh visuals in each URDF (the
standard library's XML parser) against the visuals the animation read."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trimesh", reason="trimesh reads the meshes; make setup installs it")

from mbs_ros import animate  # noqa: E402


def write_stl(path: Path, triangles: np.ndarray) -> None:
    """A binary STL of ``triangles`` (n, 3, 3): 80-byte header, count, then normal, corners and 2 bytes each."""
    rec = np.zeros(len(triangles), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["v"] = triangles
    with open(path, "wb") as f:
        f.write(b"\0" * 80)
        f.write(np.uint32(len(triangles)).tobytes())
        f.write(rec.tobytes())


def box_triangles(sides, subdivisions: int) -> np.ndarray:
    """(n, 3, 3): the surface of a box with ``sides``, centred at the origin, each face split into
    ``subdivisions``² squares of two triangles."""
    tris = []
    g = np.linspace(-0.5, 0.5, subdivisions + 1)
    for axis in range(3):
        for sign in (-0.5, 0.5):
            for i in range(subdivisions):
                for j in range(subdivisions):
                    quad = []
                    for a, b in ((g[i], g[j]), (g[i + 1], g[j]), (g[i + 1], g[j + 1]), (g[i], g[j + 1])):
                        p = np.empty(3)
                        p[axis] = sign
                        p[(axis + 1) % 3], p[(axis + 2) % 3] = a, b
                        quad.append(p * sides)
                    tris += [[quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]]
    return np.array(tris)


URDF = """<robot name="r">
  <link name="base"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><origin xyz="0 0 1"/><geometry><mesh filename="{file}" scale="{scale}"/></geometry></visual></link>
</robot>"""


@pytest.mark.parametrize("subdivisions, expect_decimated", [(2, False), (40, True)])
def test_a_mesh_visual_is_drawn_from_the_files_triangles_within_the_budget(tmp_path, subdivisions,
                                                                          expect_decimated):
    sides = np.array([0.4, 0.2, 0.1])
    tris = box_triangles(sides, subdivisions)
    write_stl(tmp_path / "part.stl", tris)
    robot = animate.robot_from_urdf(URDF.format(file="part.stl", scale="2 1 1"), "", "test",
                                    base_dir=str(tmp_path))
    assert robot.notes == []
    (visual,) = robot.visuals
    assert visual.kind == "mesh"
    pts, faces = visual.geometry()
    assert faces.shape[1] == 3
    budget = animate.MAX_ROBOT_TRIANGLES
    if expect_decimated:
        assert len(tris) > budget and 0.1 * budget < len(faces) <= budget
    else:
        assert len(faces) == len(tris)
    # the drawn frame: polygons from the mesh, placed by the visual's origin, scaled by the URDF's scale
    poses = animate.LinkPoses("", ("base",), {}, np.zeros(1), np.eye(4)[None, None], "test")
    drawn = animate._Drawn("", poses, robot, [(0, visual.T, pts, faces, visual.color)])
    polygons, colors = drawn.faces(0)
    assert len(polygons) == len(faces) == len(colors)
    corners = np.concatenate(polygons)
    half = sides * [2.0, 1.0, 1.0] / 2
    cell = 0.0 if not expect_decimated else 2 * half.max() / 10  # decimation moves corners within a grid cell
    assert np.allclose(corners.min(axis=0), -half + [0, 0, 1], atol=cell + 1e-6)
    assert np.allclose(corners.max(axis=0), half + [0, 0, 1], atol=cell + 1e-6)


def test_an_unreadable_mesh_is_a_note_naming_it_and_the_link_keeps_its_box(tmp_path):
    (tmp_path / "bad.stl").write_bytes(b"solid x\nnot an stl\n")
    robot = animate.robot_from_urdf(URDF.format(file="bad.stl", scale="1 1 1"), "", "test",
                                    base_dir=str(tmp_path))
    assert [v.kind for v in robot.visuals] == ["box"]
    assert len(robot.notes) == 1 and "bad.stl" in robot.notes[0] and "not an stl" not in robot.notes[0]
    robot = animate.robot_from_urdf(URDF.format(file="package://no_such_pkg/m.stl", scale="1 1 1"), "", "test")
    assert "no_such_pkg" in robot.notes[0] and [v.kind for v in robot.visuals] == ["box"]


def _robots_dir():
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).endswith("panda_description/urdf/panda.urdf"):
            return Path(dist.locate_file(f)).parents[2]
    return None


#: DAE (Panda, UR5), STL (Solo) and OBJ (Laikago) visuals. Every file of example-robot-data takes ~3 min (its
#: large DAE files); measured once: 1369 of its 1377 mesh visuals read (anymal_foot.dae is refused by trimesh).
SAMPLE = ["panda_description/urdf/panda.urdf", "ur_description/urdf/ur5_robot.urdf",
          "solo_description/robots/solo12.urdf", "laikago_description/urdf/laikago.urdf"]


@pytest.mark.slow
@pytest.mark.parametrize("relpath", SAMPLE)
def test_example_robot_data_mesh_visuals_are_read(relpath):
    """Every <visual> with a <mesh> (counted by the XML parser) is drawn as a mesh, within the triangle budget,
    and spans about what the robot's links span (a mesh read at the wrong scale or frame would not)."""
    robots = _robots_dir()
    if robots is None:
        pytest.skip("example-robot-data is not installed")
    path = robots / relpath
    text = path.read_text(encoding="utf-8")
    expected = sum(1 for vis in ET.fromstring(text).iter("visual") if vis.find("geometry/mesh") is not None)
    robot = animate.robot_from_urdf(text, "", path.name, base_dir=str(path.parent))
    meshes = [v for v in robot.visuals if v.kind == "mesh"]
    assert expected > 0 and len(meshes) == expected and robot.notes == [], robot.notes
    assert sum(len(v.mesh[1]) for v in meshes) <= max(animate.MAX_ROBOT_TRIANGLES,
                                                      animate.MIN_MESH_TRIANGLES * len(meshes))
    for v in meshes:  # each part is a few cm to a metre or so across (not mm read as m, nor the reverse)
        size = float(np.ptp(v.mesh[0], axis=0).max())
        assert 1e-3 < size < 2.0, (v.link, size)
