"""Robots by URI and meshes RViz can show (issue 10): ``package://`` and ``file://`` resolution
(:mod:`mbs_ros.packages`), ``model_file`` and scenario ``model`` given as a URI, the mesh filenames of the URDF the
dynamics node publishes (:func:`mbs_ros.dynamics.model.source.meshes_for_rviz`), markers that never fail on visual
decoration, and a scenario's ``locked_joints``.

The expectations come from the files on disk (the URI's file is the file ``os.path`` finds in the share directory),
never from an earlier output of ours. example-robot-data is a test dependency; the tests that need it skip without.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mbs_ros.bringup import ScenarioError, load_scenario
from mbs_ros.nodes import markers as mk
from mbs_ros.dynamics.model import source as ms
from mbs_ros.packages import is_uri, pip_prefixes, resolve_uri, share_directory
from urdf_text import joint, link, robot

ROOT = Path(__file__).resolve().parents[2]
PANDA = "package://example-robot-data/robots/panda_description/urdf/panda.urdf"
ROBOT_DATA = share_directory("example-robot-data")[0]
needs_robot_data = pytest.mark.skipif(ROBOT_DATA is None, reason="example-robot-data is not installed (pip install "
                                      "example-robot-data; a test dependency in requirements-dev.txt)")


# ------------------------------------------------------------------------------------------ URIs


def test_a_package_uri_of_this_package_resolves_through_the_ament_index():
    found = resolve_uri("package://mbs_ros/config/robots/arm_6dof.urdf.xacro")
    assert found.ament and found.path is not None
    assert os.path.samefile(found.path, ROOT / "config" / "robots" / "arm_6dof.urdf.xacro")


@needs_robot_data
def test_a_pip_wheels_package_resolves_outside_the_ament_index():
    found = resolve_uri(PANDA)
    expected = os.path.join(ROBOT_DATA, "robots", "panda_description", "urdf", "panda.urdf")
    assert found.path == expected and os.path.isfile(expected)
    assert not found.ament  # the wheel's prefix is not on AMENT_PREFIX_PATH: RViz would not find it
    assert any(ROBOT_DATA.startswith(p) for p in pip_prefixes())


def test_file_uris_and_plain_paths(tmp_path):
    f = tmp_path / "a b.urdf"
    f.write_text("<robot/>")
    assert resolve_uri("file://" + str(f)).path == str(f)
    assert resolve_uri("file://" + str(f).replace(" ", "%20")).path == str(f)  # percent-encoded
    assert resolve_uri("a b.urdf", str(tmp_path)).path == str(f)  # relative to the given directory
    assert not is_uri(str(f)) and is_uri("file:///x") and is_uri("package://p/x")


@pytest.mark.parametrize("uri, reason", [
    ("package://no_such_package_xyz/robot.urdf", "package 'no_such_package_xyz' not found"),
    ("package://mbs_ros/config/robots/none.urdf", "'config/robots/none.urdf' not found in package 'mbs_ros'"),
    ("package://mbs_ros", "expected package://PACKAGE/PATH"),
    ("file://otherhost/etc/x.urdf", "only local file:// URIs"),
    ("file:///no/such/file.urdf", "/no/such/file.urdf not found"),
])
def test_an_unresolvable_uri_says_why_in_one_line(uri, reason):
    found = resolve_uri(uri)
    assert found.path is None and reason in found.reason and "\n" not in found.reason


def test_the_ament_index_unset_is_not_an_error(monkeypatch):
    """Without AMENT_PREFIX_PATH ament_index_python raises OSError; the lookup goes on to pip's prefixes."""
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    found = resolve_uri("package://no_such_package_xyz/robot.urdf")
    assert found.path is None and "not found" in found.reason


@needs_robot_data
def test_model_file_takes_a_package_uri():
    path = ms.resolve_model_file(PANDA)
    assert path == os.path.join(ROBOT_DATA, "robots", "panda_description", "urdf", "panda.urdf")
    source = ms.load_source("", PANDA)
    model = ms.build_multibody(source, "fixed", (0.0, 0.0, -9.81))
    assert model.joint_names[:7] == tuple(f"panda_joint{i}" for i in range(1, 8))


def test_model_file_names_an_unresolvable_uri_and_why():
    with pytest.raises(ms.ParameterError, match=r"model_file 'package://no_such_package_xyz/r.urdf': package "
                                                r"'no_such_package_xyz' not found"):
        ms.resolve_model_file("package://no_such_package_xyz/r.urdf")


# ----------------------------------------------------------------------------------------- meshes


def _meshes(xml):
    return [m.get("filename") for m in ET.fromstring(xml).iter("mesh")]


def _visual(mesh_filename):
    return f'<visual><geometry><mesh filename="{mesh_filename}"/></geometry></visual>'


def _arm_with_visuals(*visuals):
    base = '<link name="base">' + "".join(visuals) + "</link>"
    return robot(base, link("l1", 1.0, xyz="0.1 0 0"), joint("j1", "base", "l1"))


def test_meshes_rviz_resolves_stay_others_become_file_uris_missing_ones_warn(tmp_path):
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "part.stl").write_text("solid x\nendsolid x\n")
    ours = "package://mbs_ros/config/robots/arm_6dof.urdf.xacro"  # any file of an ament package will do
    urdf = tmp_path / "r.urdf"
    urdf.write_text(_arm_with_visuals(_visual(ours), _visual("meshes/part.stl"),
                                      _visual("package://no_such_package_xyz/m.dae"), _visual("missing.stl")))
    source = ms.load_source("", str(urdf))
    xml, warning = ms.meshes_for_rviz(source)
    assert _meshes(xml) == [ours, "file://" + str(tmp_path / "meshes" / "part.stl"),
                            "package://no_such_package_xyz/m.dae", "missing.stl"]
    assert warning.startswith("RViz will not show 2 meshes of " + str(urdf))
    assert "package 'no_such_package_xyz' not found" in warning and str(tmp_path / "missing.stl") in warning
    assert "\n" not in warning


def test_a_robot_whose_meshes_resolve_is_returned_as_it_is():
    source = ms.load_source(_arm_with_visuals(_visual("package://mbs_ros/package.xml")), "")
    assert ms.meshes_for_rviz(source) == (source.urdf, "")
    assert ms.meshes_for_rviz(ms.load_source("", "")) == (None, "")  # a single rigid body


def test_many_missing_meshes_are_counted_not_listed():
    source = ms.load_source(_arm_with_visuals(*(_visual(f"package://no_such_package_xyz/m{i}.stl")
                                                for i in range(7))), "")
    _, warning = ms.meshes_for_rviz(source, limit=3)
    assert "RViz will not show 7 meshes" in warning and warning.endswith("and 4 more")


@needs_robot_data
def test_panda_meshes_become_file_uris_of_the_wheels_files():
    """example-robot-data from pip is outside the ament index: every mesh of the Panda (visual and collision) becomes a file:// URI of
    the file its package:// URI names, so RViz on this machine shows it; nothing to warn about."""
    source = ms.load_source("", PANDA)
    before = _meshes(source.urdf)
    xml, warning = ms.meshes_for_rviz(source)
    assert warning == "" and len(before) >= 10
    for uri, new in zip(before, _meshes(xml)):
        assert uri.startswith("package://example-robot-data/")
        assert new == "file://" + os.path.join(ROBOT_DATA, uri[len("package://example-robot-data/"):])
        assert os.path.isfile(new[len("file://"):])


def test_markers_never_fail_on_visual_decoration():
    """What urdf_parser_py refuses outside the dynamics (an empty <texture/> as in iCub and Romeo, an old-style
    transmission as in PR2, extension tags) leaves the markers of the valid visuals; a visual whose geometry lacks a
    required attribute is left out."""
    material = '<material name="skin"><color rgba="0.1 0.2 0.3 1"/><texture/></material>'
    urdf = (robot(material,
                  '<link name="base"><visual><geometry><box size="1 2 3"/></geometry><material name="skin"/></visual>'
                  '<visual><geometry><cylinder radius="0.1"/></geometry></visual></link>',
                  link("l1", 1.0, xyz="0.1 0 0"), joint("j1", "base", "l1"),
                  '<transmission type="pr2_mechanism_model/WristTransmission" name="t"><actuator name="a"/>'
                  '</transmission><gazebo reference="base"><mu1>0.2</mu1></gazebo>'))
    shapes = mk.shapes_from_urdf(urdf, ("base", "l1"), lambda n: "r/" + n,
                                 {"l1": (1.0, (0.1, 0.0, 0.0), ((0.01, 0, 0), (0, 0.02, 0), (0, 0, 0.02)))})
    boxes = [s for s in shapes if s.link_index == 0]
    assert len(boxes) == 1 and boxes[0].scale == (1.0, 2.0, 3.0) and boxes[0].color == (0.1, 0.2, 0.3, 1.0)
    assert [s.link_index for s in shapes] == [0, 1]  # l1: its equivalent-inertia box


@needs_robot_data
@pytest.mark.filterwarnings("ignore::mbs_ros.dynamics.ModelWarning")
@pytest.mark.parametrize("relpath", ["icub_description/robots/icub_reduced.urdf", "pr2_description/urdf/pr2.urdf"])
def test_markers_of_robots_with_textures_and_old_transmissions(relpath):
    """iCub's empty <texture/> and PR2's WristTransmission made urdf_parser_py refuse the whole file: every link
    with a mesh visual gets its marker."""
    path = os.path.join(ROBOT_DATA, "robots", relpath)
    if not os.path.isfile(path):
        pytest.skip(f"{relpath} is not in this example-robot-data")
    root = ET.fromstring(Path(path).read_text())
    names = tuple(l.get("name") for l in root.findall("link"))
    with_mesh = {i for i, l in enumerate(root.findall("link"))
                 if any(m.get("filename") for v in l.findall("visual") for m in v.iter("mesh"))}
    shapes = mk.shapes_from_urdf(Path(path).read_text(), names, lambda n: n)
    assert len(with_mesh) > 5 and with_mesh <= {s.link_index for s in shapes if s.mesh_resource}


# ---------------------------------------------------------------------------------- scenarios


SCENARIO = """
name: s
robots:
  - namespace: r
    model: {model}
    base_group: fixed
{extra}
"""


def _scenario(tmp_path, model, extra=""):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(model=model, extra=extra))
    return path


def test_a_scenario_names_an_unresolvable_uri_by_key(tmp_path):
    path = _scenario(tmp_path, "package://no_such_package_xyz/robot.urdf")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.key == "robots[0].model" and "package 'no_such_package_xyz' not found" in str(info.value)


def test_a_scenario_takes_a_uri_and_hands_it_to_both_nodes(tmp_path):
    from mbs_ros.bringup import node_specs

    uri = "package://mbs_ros/config/robots/arm_6dof_fixed.yaml"
    scenario = load_scenario(_scenario(tmp_path, uri))
    dyn, ctl = node_specs(scenario)  # no reference: no reference node
    assert dyn.parameters["model_file"] == ctl.parameters["model_file"] == uri


def test_scenario_locked_joints_reach_both_nodes_and_shrink_the_robot(tmp_path):
    from mbs_ros.bringup import node_specs

    path = _scenario(tmp_path, "config/robots/arm_6dof_fixed.yaml", "    locked_joints: {joint6: 0.3, joint5: -0.2}")
    scenario = load_scenario(path)
    (robot_,) = scenario.robots
    assert robot_.joint_names == ("joint1", "joint2", "joint3", "joint4")
    dyn, ctl = node_specs(scenario)
    for spec in (dyn, ctl):
        assert spec.parameters["locked_joints"] == ["joint6", "joint5"]
        assert spec.parameters["locked_joint_positions"] == [0.3, -0.2]


@pytest.mark.parametrize("extra, key, reason", [
    ("    locked_joints: {joint6: nope}", "robots[0].locked_joints.joint6", "number"),
    ("    locked_joints: {no_such_joint: 0.0}", "robots[0]", "no_such_joint"),
    ("    dynamics: {locked_joints: [joint6]}", "robots[0].dynamics.locked_joints", "set by the scenario"),
])
def test_bad_scenario_locks_name_the_key(tmp_path, extra, key, reason):
    with pytest.raises(ScenarioError) as info:
        load_scenario(_scenario(tmp_path, "config/robots/arm_6dof_fixed.yaml", extra))
    assert info.value.key.startswith(key) and reason in str(info.value), str(info.value)


@pytest.mark.ros
def test_the_dynamics_node_warns_once_about_meshes_rviz_cannot_find(tmp_path):
    """A robot by file:// URI with one unresolvable mesh: the node runs and says so in one warning line naming the
    file and the URI (real process; stopped by SIGINT, exit code 0)."""
    from mbs_ros.process import NodeProcess

    urdf = tmp_path / "r.urdf"
    urdf.write_text(_arm_with_visuals(_visual("package://no_such_package_xyz/m.dae"),
                                      _visual("package://mbs_ros/package.xml")))
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="mesh_node", namespace="mesh",
                       parameters=dict(physics_rate=100.0, model_file="file://" + str(urdf)),
                       log_file=tmp_path / "mesh.log")
    proc.start()
    try:
        assert proc.wait_for_log("rk4 at 100 Hz", timeout=120), proc.log_text()
    finally:
        rc = proc.stop()
    log = proc.log_text()
    assert rc == 0, log
    lines = [line for line in log.splitlines() if "RViz will not show" in line]
    assert len(lines) == 1 and "WARN" in lines[0] and str(urdf) in lines[0], log
    assert "package://no_such_package_xyz/m.dae" in lines[0] and "package.xml" not in lines[0]
