"""Issue 9, the model side: URDF joint limits on the Model, physically impossible models refused at load with the
file, joint and link named, and model sources that never put a file's content into an error.

Expectations are independent of our code: limits are the numbers written in the URDF/YAML text of each test (or
read from the robot file with a YAML parser); singular models are built so that the joint-space mass matrix is
singular in closed form (a massless end link gives a zero row, two coaxial joints with a massless link between
them give two equal columns, ...), and their well-posed neighbours are checked against closed-form M entries
(a point mass m at distance d from a revolute axis: M = m d²).
"""
import math
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model.model import MAX_MASS_RATIO, ModelError, ModelWarning
from mbs_ros.dynamics.model.urdf import load_urdf_xml, parse_urdf
from mbs_ros.dynamics.model import source as ms

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # test/unit's shared helpers
from process_helpers import run_to_exit  # noqa: E402
from urdf_text import BOX, joint, link, robot  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-SECRET-7f3a"


# ------------------------------------------------------------------------------------------------ limits
LIMITS_URDF = robot(
    link("base_link", 5.0), link("a", 1.0, xyz="0.2 0 0"), link("b", 1.0, xyz="0.2 0 0"),
    link("c", 1.0, xyz="0.2 0 0"), link("d", 1.0, xyz="0.2 0 0"), link("e", 1.0, xyz="0.2 0 0"),
    # XML order differs from the name order the model numbers joints in (Pinocchio's depth-first, by name)
    joint("z_rev", "base_link", "a", limit='lower="-1.5" upper="2.5" effort="42" velocity="3.5"'),
    joint("y_pris", "a", "b", "prismatic", axis="1 0 0", xyz="0.4 0 0",
          limit='lower="0.1" upper="0.3" effort="120" velocity="0.25"'),
    joint("x_cont", "b", "c", "continuous", axis="0 1 0", xyz="0.4 0 0", limit='effort="7" velocity="9"'),
    joint("w_zero", "c", "d", xyz="0.4 0 0", limit='lower="0" upper="0" effort="0" velocity="0"'),
    joint("v_none", "base_link", "e", "continuous", axis="1 0 0", xyz="0 0.4 0", limit=""),  # a second branch
)
# per joint, from the text above: effort, velocity, lower, upper ("0" and an absent tag: none)
LIMITS = {"z_rev": (42, 3.5, -1.5, 2.5), "y_pris": (120, 0.25, 0.1, 0.3),
          "x_cont": (7, 9, -math.inf, math.inf), "w_zero": (math.inf,) * 2 + (-math.inf, math.inf),
          "v_none": (math.inf,) * 2 + (-math.inf, math.inf)}


@pytest.mark.parametrize("base,nvb", [("fixed", 0), ("se3", 6), ("se2", 3), ("schoenflies", 4)])
def test_limits_are_the_urdf_numbers_in_velocity_order(base, nvb):
    model = Model.from_urdf(LIMITS_URDF, base=base)
    names = model.joint_names
    assert sorted(names) == sorted(LIMITS) and list(names) != list(LIMITS)  # the reordering is exercised
    assert model.effort_limits.shape == model.velocity_limits.shape == (model.nv,) and model.nv == nvb + 5
    assert np.all(np.isinf(model.effort_limits[:nvb])) and np.all(np.isinf(model.velocity_limits[:nvb]))
    np.testing.assert_array_equal(model.effort_limits[nvb:], [LIMITS[n][0] for n in names])
    np.testing.assert_array_equal(model.velocity_limits[nvb:], [LIMITS[n][1] for n in names])
    lower, upper = model.position_limits
    np.testing.assert_array_equal(lower, [LIMITS[n][2] for n in names])
    np.testing.assert_array_equal(upper, [LIMITS[n][3] for n in names])


def test_limits_are_copies_and_a_rigid_body_has_none():
    model = Model.from_urdf(LIMITS_URDF)
    model.effort_limits[0] = -1.0
    assert model.effort_limits[0] > 0
    body = Model.rigid_body("se3")
    assert body.effort_limits.shape == (6,) and np.all(np.isinf(body.effort_limits))
    assert np.all(np.isinf(body.velocity_limits))
    assert body.position_limits[0].shape == (0,)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "config" / "robots").glob("*.yaml")))
def test_robot_files_give_their_limits(name):
    """Every robot of config/robots loads (the new checks refuse none of them) and its limits are the file's."""
    path = ROOT / "config" / "robots" / name
    model = Model.from_yaml(path)
    doc = yaml.safe_load(path.read_text())["robot"]
    if "joints" in doc:
        given = {j["name"]: j.get("limit", {}) for j in doc["joints"] if j["type"] != "fixed"}
    else:  # a xacro file: its expanded URDF, read by the standard library's XML parser
        import xml.etree.ElementTree as ET

        root = ET.fromstring(model.urdf)
        given = {j.get("name"): {k: float(v) for k, v in j.find("limit").attrib.items()}
                 for j in root.findall("joint") if j.get("type") != "fixed"}
    nvb = model.nv - len(model.joint_names)
    assert np.all(np.isinf(model.effort_limits[:nvb]))
    for i, jn in enumerate(model.joint_names):
        assert model.effort_limits[nvb + i] == pytest.approx(given[jn]["effort"], rel=1e-15)
        assert model.velocity_limits[nvb + i] == pytest.approx(given[jn]["velocity"], rel=1e-15)
        assert model.position_limits[0][i] == pytest.approx(given[jn]["lower"], rel=1e-15)
        assert model.position_limits[1][i] == pytest.approx(given[jn]["upper"], rel=1e-15)


@pytest.mark.parametrize("limit,message", [
    ('lower="-1" upper="1" effort="-5" velocity="1"', "effort"),
    ('lower="-1" upper="1" effort="5" velocity="-1"', "velocity"),
    ('lower="1" upper="-1" effort="5" velocity="1"', "lower"),
    ('lower="nan" upper="1" effort="5" velocity="1"', "NaN"),
])
def test_absurd_limits_are_refused_naming_the_joint(limit, message):
    urdf = robot(link("base_link", 1.0), link("a", 1.0, xyz="0.1 0 0"), joint("elbow", "base_link", "a", limit=limit))
    with pytest.raises(ModelError, match=message) as info:
        Model.from_urdf(urdf)
    assert info.value.joint == "elbow" and "'elbow'" in str(info.value)


# ------------------------------------------------------------------------------------ impossible models
def arm(tip_link, tip_joint="revolute", tip_axis="0 0 1", tip_xyz="0.5 0 0"):
    """base_link -j1(z)-> l1 (1 kg, c.o.m. 0.25 m out) -j2-> ``tip_link``."""
    return robot(link("base_link"), link("l1", 1.0, xyz="0.25 0 0"), tip_link,
                 joint("j1", "base_link", "l1"), joint("j2", "l1", "tip", tip_joint, axis=tip_axis, xyz=tip_xyz))


def refused(urdf, **kw) -> ModelError:
    with pytest.raises(ModelError) as info:
        Model.from_urdf(urdf, **kw)
    return info.value


@pytest.mark.parametrize("jtype", ["revolute", "continuous", "prismatic"])
def test_a_massless_end_link_is_refused_naming_joint_and_link(jtype):
    """M's row of j2 is zero (no mass moves with it): singular in closed form."""
    err = refused(arm(link("tip"), jtype))
    assert (err.joint, err.link) == ("j2", "tip")
    assert "'j2'" in str(err) and "'tip'" in str(err) and "massless" in str(err)
    assert "locked_joints={'j2': 0.0}" in str(err)  # the way to load it unchanged: freeze the joint


def test_a_point_mass_on_the_axis_is_refused_off_the_axis_it_is_a_pendulum():
    """A 2 kg link with zero inertia: on the joint's axis it has no inertia about it (M_22 = 0); 0.5 m off the
    axis it is the textbook point-mass pendulum, M_22 = m d² = 0.5 kg m², which must load."""
    zero = 'ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"'
    err = refused(arm(link("tip", 2.0, inertia=zero)))
    assert (err.joint, err.link) == ("j2", "tip") and "no inertia about its axis" in str(err)
    model = Model.from_urdf(arm(link("tip", 2.0, inertia=zero, xyz="0.5 0 0")))
    M = model.mass_matrix(model.neutral())
    assert M[1, 1] == pytest.approx(2.0 * 0.5**2, rel=1e-14)
    assert np.linalg.eigvalsh(M)[0] > 0


def test_a_tiny_inertia_on_the_axis_is_refused_but_a_thin_real_part_is_not():
    """1e-12 kg m² for 2 kg on the axis is no solid object; a 2 kg steel rod of 1 cm radius spinning about its
    own axis (½ m r² = 1e-4 kg m²) is."""
    err = refused(arm(link("tip", 2.0, inertia='ixx="1e-12" ixy="0" ixz="0" iyy="1e-12" iyz="0" izz="1e-12"')))
    assert err.link == "tip"
    rod = 'ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="1e-4"'
    model = Model.from_urdf(arm(link("tip", 2.0, inertia=rod)))
    assert model.mass_matrix(model.neutral())[1, 1] == pytest.approx(1e-4, rel=1e-12)


def test_coaxial_joints_with_a_massless_link_between_them_are_refused():
    """j1 and j2 both about z through the same point, l1 massless: M's two columns are equal (both rotate the tip
    alike), so M is singular although every diagonal entry is positive. The inner joint and link are named."""
    urdf = robot(link("base_link"), link("l1"), link("tip", 1.0, xyz="0.3 0 0"),
                 joint("j1", "base_link", "l1"), joint("j2", "l1", "tip"))
    err = refused(urdf)
    assert (err.joint, err.link) == ("j1", "l1") and "reproduce its motion" in str(err)


def test_a_massless_link_between_crossed_joints_is_fine():
    """A universal joint (z then y, massless link between, as humanoid URDFs model hips): M is positive definite;
    its entries are the tip's inertia about the two axes, in closed form."""
    urdf = robot(link("base_link"), link("l1"), link("tip", 1.0, xyz="0 0 0"),
                 joint("j1", "base_link", "l1"), joint("j2", "l1", "tip", axis="0 1 0"))
    model = Model.from_urdf(urdf)
    M = model.mass_matrix(model.neutral())
    np.testing.assert_allclose(M, [[0.02, 0.0], [0.0, 0.02]], rtol=0, atol=1e-15)  # izz, iyy of BOX


def test_a_massless_floating_base_whose_rotation_a_joint_reproduces_is_refused():
    """se3 base without mass, one link on a revolute about the base's z axis through its origin: the base's yaw
    and the joint move the link alike (equal columns of M)."""
    urdf = robot(link("base_link"), link("l1", 1.0, xyz="0.2 0 0"), joint("j1", "base_link", "l1"))
    err = refused(urdf, base="se3")
    assert err.link == "base_link" and "rotation about z" in str(err)
    assert Model.from_urdf(urdf, base="fixed").nv == 1  # on a fixed base the same robot is fine


def test_a_robot_without_mass_is_refused_on_a_floating_base():
    err = refused(robot(link("base_link")), base="se2")
    assert err.link == "base_link" and "no mass" in str(err)


def test_a_mass_ratio_beyond_the_bound_is_refused_unless_allowed():
    """1000 kg and 1e-6 kg moving bodies (ratio 1e9 > MAX_MASS_RATIO = 1e6): refused naming the light link;
    max_mass_ratio lifts it. Links fixed to a heavier body do not count (TALOS has 1 g frames on 10 kg links)."""
    assert MAX_MASS_RATIO == 1e6
    heavy_light = arm(link("tip", 1e-6, inertia='ixx="1e-9" ixy="0" ixz="0" iyy="1e-9" iyz="0" izz="1e-9"',
                           xyz="0.1 0 0")).replace('<mass value="1.0"/>', '<mass value="1000.0"/>')
    err = refused(heavy_light)
    assert err.link == "tip" and err.joint == "j2" and "1e+09" in str(err) and "max_mass_ratio" in str(err)
    for bound in (None, math.inf, 2e9):
        assert Model.from_urdf(heavy_light, max_mass_ratio=bound).nv == 2
    assert refused(heavy_light, max_mass_ratio=1e8).link == "tip"
    sensor = robot(link("base_link"), link("l1", 10.0, xyz="0.2 0 0"), link("cam", 1e-6, xyz="0.1 0 0"),
                   joint("j1", "base_link", "l1"), joint("mount", "l1", "cam", "fixed", limit=""))
    assert Model.from_urdf(sensor).nv == 1


def test_negative_mass_and_non_psd_inertia_name_the_link_and_the_file(tmp_path):
    bad_mass = arm(link("tip", -1.0, xyz="0.1 0 0"))
    path = tmp_path / "neg.urdf"
    path.write_text(bad_mass)
    err = refused(str(path))
    assert err.link == "tip" and str(err).startswith(f"{path}: ") and err.file == str(path)
    err = refused(arm(link("tip", 1.0, inertia='ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="-1"')))
    assert err.link == "tip" and "positive semi-definite" in str(err)


def test_a_triangle_inequality_violation_warns_naming_the_link():
    """Principal moments 1, 1, 3 (3 > 1 + 1): no real body, but widely used URDFs have such links; it loads."""
    urdf = arm(link("tip", 1.0, inertia='ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="3"', xyz="0.1 0 0"))
    with pytest.warns(ModelWarning, match="'tip'.*triangle"):
        model = Model.from_urdf(urdf)
    assert len(model.load_report) == 1 and "triangle" in model.load_report[0]


# ------------------------------------------------------------------ issue 10: a tolerant loader, one report
def loads_with_report(urdf, **kw):
    """``(model, warnings)``: the model and every warning its load issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = Model.from_urdf(urdf, **kw)
    return model, caught


def test_an_inertia_within_rounding_of_psd_is_projected_and_reported_once():
    """A 1 µg tip (fixed to l1, like TIAGo's antennas) whose principal moments are -1e-9, 2e-8, 3e-8 kg m²: the
    negative one is 5e-8 of the robot's largest moment (0.02, the BOX of l1), within INERTIA_TOLERANCE (1e-6). Its
    nearest positive semi-definite inertia is diag(0, 2e-8, 3e-8); the load warns once, naming the link."""
    urdf = arm(link("tip", 1e-6, inertia='ixx="-1e-9" ixy="0" ixz="0" iyy="2e-8" iyz="0" izz="3e-8"'), "fixed")
    spec = parse_urdf(urdf, warn=False)
    np.testing.assert_array_equal(spec.links["tip"].inertia, np.diag([0.0, 2e-8, 3e-8]))
    assert spec.links["tip"].mass == 1e-6
    model, caught = loads_with_report(urdf)
    assert len(caught) == 1 and caught[0].category is ModelWarning
    assert len(model.load_report) == 1 and model.load_report == spec.report
    item = model.load_report[0]
    assert item.startswith("link 'tip'") and "projected" in item and "positive semi-definite" in item
    assert item in str(caught[0].message)
    # merged into l1 through the fixed joint: M = izz_l1 + m d² + izz_tip + m_tip d_tip² about j1 (z)
    M = model.mass_matrix(np.zeros(model.nq))
    assert M[0, 0] == pytest.approx(0.02 + 1.0 * 0.25**2 + 3e-8 + 1e-6 * 0.5**2, rel=1e-12)


@pytest.mark.parametrize("ixx", ["-1e-5", "-1"])
def test_an_inertia_clearly_not_psd_is_still_refused(ixx):
    """-1e-5 is 5e-4 of the robot's largest moment (0.02): beyond INERTIA_TOLERANCE, refused naming the link."""
    err = refused(arm(link("tip", 1.0, inertia=f'ixx="{ixx}" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"',
                          xyz="0.1 0 0")))
    assert err.link == "tip" and "positive semi-definite" in str(err) and "1e-06" in str(err)


DECORATED = robot(
    '<material name="grey"><color rgba="0.5 0.5 0.5 1"/><texture/></material>',
    '<link name="base_link" custom="1"><inertial><origin xyz="0 0 0"/><mass value="5"/><inertia ' + BOX + '/>'
    '</inertial><visual name="v"><geometry><mesh filename="x.stl"/></geometry><material name="m"><texture/>'
    '</material></visual><collision name="c"><geometry><box size="1 1 1"/></geometry><material name="c"/>'
    '</collision><contact><lateral_friction value="1"/></contact><self_filter/></link>',
    '<link name="l1"><inertial><origin xyz="0.25 0 0"/><mass value="1"/><inertia ' + BOX + '/></inertial>'
    '<visual><geometry><mesh/></geometry></visual><sensor name="imu" type="imu"/></link>',
    '<link name="l2"><inertial><origin xyz="0.25 0 0"/><mass value="1"/><inertia ' + BOX + '/></inertial></link>',
    '<joint name="j1" type="revolute" dont_collapse="true"><parent link="base_link"/><child link="l1"/>'
    '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="3" current="4"/>'
    '<dynamics damping="0.1" K="3" mu_viscous="2"/><calibration rising="0" reference_position="1"/>'
    '<safety_controller k_velocity="1"/></joint>',
    '<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.5 0 0"/>'
    '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="3"/><mimic joint="j1"/></joint>',
    '<transmission type="pr2_mechanism_model/WristTransmission" name="wrist"><actuator name="a"/>'
    '<flexJoint name="j1" mechanical_reduction="1"/></transmission>',
    '<transmission name="t_new"><type>transmission_interface/SimpleTransmission</type><joint name="j1">'
    '<hardwareInterface>EffortJointInterface</hardwareInterface><role>x</role></joint></transmission>',
    '<transmission name="t_typeless"><joint name="j1"/></transmission>',
    '<gazebo reference="l1"><mu1>0.2</mu1></gazebo><ros2_control name="x" type="system"/><anything/>',
)


def test_what_is_not_dynamics_never_fails_a_load_nor_prints(capfd):
    """Empty <texture/>s, meshes without a file, old- and new-style transmissions, one without a type, gazebo,
    ros2_control, sensors and unknown tags and attributes (those urdf_parser_py prints 'Unknown tag' lines for):
    the load prints nothing and issues one warning, listing the malformed decoration and the mimic joint; the
    dynamics are those of the same robot without them (closed form at q = 0: M = [[Iz + m d1² + Iz + m d2², ...]])."""
    capfd.readouterr()
    model, caught = loads_with_report(DECORATED, mimic="independent")
    assert capfd.readouterr() == ("", "")
    assert len(caught) == 1 and caught[0].category is ModelWarning
    report = model.load_report
    assert isinstance(report, tuple) and all(isinstance(r, str) for r in report)
    assert any(r.startswith("<texture> without a filename (2;") for r in report)
    assert any(r.startswith("<mesh> without a filename (1; link 'l1')") for r in report)
    assert any(r.startswith("<transmission> without a type (1; transmission 't_typeless')") for r in report)
    assert any(r.startswith("joint 'j2': <mimic> not simulated") for r in report)
    assert len(report) == 4, report
    assert all(r in str(caught[0].message) for r in report)
    # d1 = 0.25 (l1's c.o.m. from j1), l2's c.o.m. 0.75 from j1 and 0.25 from j2
    M = model.mass_matrix(np.zeros(2))
    np.testing.assert_allclose(M, [[0.02 + 0.25**2 + 0.02 + 0.75**2, 0.02 + 0.75 * 0.25],
                                   [0.02 + 0.75 * 0.25, 0.02 + 0.25**2]], rtol=1e-12)
    assert model.effort_limits.tolist() == [10.0, 10.0]
    # by default j2 follows j1 (q2 = q1): one coordinate, M = [1 1] M_full [1 1]^T, and no mimic note
    reduced, caught = loads_with_report(DECORATED)
    assert len(reduced.load_report) == 3 and not any("mimic" in r for r in reduced.load_report)
    assert reduced.mimic_joints == {"j2": ("j1", 1.0, 0.0)} and reduced.joint_names == ("j1",)
    np.testing.assert_allclose(reduced.mass_matrix(np.zeros(1)), [[M.sum()]], rtol=1e-12)


def test_a_clean_urdf_has_an_empty_report_and_no_warning():
    model, caught = loads_with_report(LIMITS_URDF)
    assert model.load_report == () and caught == []
    assert Model.rigid_body().load_report == ()


def test_parse_urdf_reports_and_warns_only_when_told():
    """The Model's load warns; parse_urdf (also read for markers and the nodes' checks) only with warn=True."""
    urdf = arm(link("tip", 1.0, inertia='ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="3"', xyz="0.1 0 0"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(parse_urdf(urdf).report) == 1
        parse_urdf(urdf, warn=True)
    assert len(caught) == 1 and "'tip'" in str(caught[0].message)


def test_a_massless_link_with_inertia_is_simulated_as_given_and_reported():
    """Bolt's feet in example-robot-data: mass 0, inertia not 0. Pinocchio keeps the inertia; so do we (M = izz
    about the joint's axis), with a note."""
    urdf = robot(link("base_link", 1.0), link("tip", 0.0, inertia='ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" '
                                                                 'izz="0.3"'),
                 joint("j1", "base_link", "tip"))
    model, caught = loads_with_report(urdf)
    assert model.mass_matrix(np.zeros(1)) == pytest.approx(np.array([[0.3]]), rel=1e-15)
    assert len(model.load_report) == 1 and model.load_report[0].startswith("link 'tip': mass 0")
    assert len(caught) == 1


def test_yaml_robot_errors_name_the_yaml_file(tmp_path):
    path = tmp_path / "arm.yaml"
    path.write_text("robot:\n  links:\n    - {name: base_link, mass: 1.0, inertia: [1, 0, 0, 1, 0, 1]}\n"
                    "    - {name: tip}\n  joints:\n"
                    "    - {name: j1, type: revolute, parent: base_link, child: tip, axis: [0, 0, 1]}\n")
    with pytest.raises(ModelError) as info:
        Model.from_yaml(path)
    assert str(info.value).startswith(f"{path}: ") and info.value.link == "tip"
    with pytest.raises(ms.ParameterError, match=r"arm\.yaml.*'tip'"):
        source = ms.load_source("", str(path))
        ms.build_multibody(source, "fixed", (0, 0, -9.81))


ARM_YAML = ("robot:\n  links:\n    - {name: base_link, mass: 1.0, inertia: [1, 0, 0, 1, 0, 1]}\n"
            "    - {name: tip, mass: 2.0, inertia: [0.1, 0, 0, 0.1, 0, 0.1], com: [0.5, 0, 0]}\n  joints:\n"
            "    - {name: j1, type: revolute, parent: base_link, child: tip, axis: [0, 0, 1]}\n")


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_a_yaml_robot_in_any_encoding_with_a_byte_order_mark_loads(tmp_path, encoding):
    """PyYAML (and rcl's libyaml) take UTF-8/16/32 by their byte-order mark; so does the robot reader. The tip's
    2 kg at 0.5 m with izz 0.1: M = 0.1 + 2 * 0.5² = 0.6."""
    path = tmp_path / "arm.yaml"
    path.write_bytes(ARM_YAML.encode(encoding))
    assert Model.from_yaml(path).mass_matrix(np.zeros(1))[0, 0] == pytest.approx(0.6, rel=1e-14)


@pytest.mark.parametrize("data, reason", [
    (b"robot:\n  name: caf\xe9\n", r":2:\d+: not UTF-8 text: byte 0xe9"),
    (b"robot:\n  links: [\n  joints: x\n" + SECRET.encode(), r":\d+:\d+: not valid YAML"),
])
def test_a_broken_yaml_robot_or_reference_is_one_line_naming_file_and_place(tmp_path, data, reason):
    """A robot YAML file and a reference_node reference_file: undecodable bytes or bad YAML are one line with the
    file, line and column (never a traceback, never the content)."""
    path = tmp_path / "arm.yaml"
    path.write_bytes(data)
    with pytest.raises(ValueError) as info:
        Model.from_yaml(path)
    text = str(info.value)
    assert "\n" not in text and SECRET not in text and re.search(re.escape(str(path)) + reason, text), text
    pytest.importorskip("rclpy")
    from mbs_ros.nodes.reference_node import ReferenceError, waypoints_from_file

    with pytest.raises(ReferenceError) as info:
        waypoints_from_file(str(path))
    text = str(info.value)
    assert "\n" not in text and SECRET not in text and re.search(re.escape(str(path)) + reason, text), text


def _example_robot(relpath):
    sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # test/unit's shared helpers
    from test_scale import example_robot_urdf

    path = example_robot_urdf(relpath)
    if path is None:
        pytest.skip("example-robot-data is not installed")
    return path


@pytest.mark.parametrize("relpath,base", [("ur_description/urdf/ur5_robot.urdf", "fixed"),
                                          ("talos_data/robots/talos_full_v2.urdf", "se3"),
                                          ("talos_data/robots/talos_reduced.urdf", "se3")])
def test_real_robots_still_load_with_their_limits(relpath, base):
    import xml.etree.ElementTree as ET

    path = _example_robot(relpath)
    model = Model.from_urdf(path, base=base)
    joints = {j.get("name"): j.find("limit") for j in ET.parse(path).getroot().findall("joint")}
    nvb = model.nv - len(model.joint_names)
    for i, name in enumerate(model.joint_names):
        effort = float(joints[name].get("effort"))
        assert model.effort_limits[nvb + i] == (effort if effort > 0 else math.inf)
    # the total mass is every link's <mass value>, read here by ElementTree
    masses = [float(m.get("value")) for m in ET.parse(path).getroot().iter("mass")]
    assert model.total_mass == pytest.approx(sum(masses), rel=1e-12)


def test_romeo_with_its_massless_thumb_tip_is_refused():
    """example-robot-data's romeo.urdf has a revolute joint moving a link without <inertial>: a real instance of
    the issue, whose mass matrix is singular."""
    err = refused(str(_example_robot("romeo_description/urdf/romeo.urdf")), base="se3")
    assert err.link is not None and err.joint is not None and "romeo.urdf: " in str(err)


# --------------------------------------------------------------------------- sources: BOM, paths, secrets
def test_a_byte_order_mark_is_dropped_from_text_and_files(tmp_path):
    text = "\ufeff" + '<?xml version="1.0"?>' + LIMITS_URDF
    path = tmp_path / "bom.urdf"
    path.write_text(text, encoding="utf-8")
    for source in (text, str(path), path):
        assert Model.from_urdf(source).joint_names == Model.from_urdf(LIMITS_URDF).joint_names
    assert not load_urdf_xml(str(path)).startswith("\ufeff")
    assert ms.load_source(text, "").name == "r"
    assert ms.load_source("", str(path)).name == "r"
    ypath = tmp_path / "bom.yaml"
    ypath.write_text("\ufeffrobot:\n  urdf: bom.urdf\n", encoding="utf-8")
    assert Model.from_yaml(ypath).nv == 5


def test_a_missing_file_is_named_by_its_path_only():
    with pytest.raises(FileNotFoundError) as info:
        Model.from_urdf("/nonexistent/dir/robot.urdf")
    assert str(info.value) == "URDF file not found: /nonexistent/dir/robot.urdf"


def _secret_file(tmp_path, name="shadow"):
    path = tmp_path / name
    path.write_text(f"root:{SECRET}:19000:0:99999:7:::\nbob:{SECRET}x:19000:0:99999:7:::\n")
    return path


@pytest.mark.parametrize("name", ["shadow", "robot.urdf", "robot.xacro"])
def test_a_file_that_is_not_urdf_is_named_never_quoted(tmp_path, name):
    """The issue's ``model_file:=/etc/shadow`` (readable here as root) printed the whole file."""
    path = _secret_file(tmp_path, name)
    with pytest.raises(ms.ParameterError) as info:
        ms.load_source("", str(path))
    text = str(info.value)
    assert SECRET not in text and str(path) in text and "\n" not in text
    for call in (lambda: Model.from_urdf(str(path)), lambda: parse_urdf(str(path))):
        with pytest.raises(ValueError) as info:
            call()
        assert SECRET not in str(info.value) and str(path) in str(info.value)


def test_an_unreadable_file_says_permission_denied(tmp_path, monkeypatch):
    path = _secret_file(tmp_path, "robot.urdf")
    real_open = open

    def deny(file, *args, **kw):
        if os.fspath(file) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(file, *args, **kw)

    monkeypatch.setattr("builtins.open", deny)
    with pytest.raises(ms.ParameterError) as info:
        ms.load_source("", str(path))
    assert str(info.value) == f"model_file {str(path)!r}: cannot read it: permission denied"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_on_disk_says_permission_denied(tmp_path):
    path = _secret_file(tmp_path, "robot.urdf")
    path.chmod(0)
    with pytest.raises(ms.ParameterError, match="permission denied") as info:
        ms.load_source("", str(path))
    assert SECRET not in str(info.value)


def test_text_is_described_by_its_length_never_quoted():
    secret_text = f"root:{SECRET}:19000\nbob:{SECRET}"
    with pytest.raises(ms.ParameterError) as info:
        ms.load_source(secret_text, "")
    assert SECRET not in str(info.value) and f"({len(secret_text)} characters)" in str(info.value)
    with pytest.raises(ms.ParameterError) as info:  # URDF text given as model_file: not called a path
        ms.load_source("", LIMITS_URDF)
    assert "not a path" in str(info.value) and "z_rev" not in str(info.value)
    broken = f'<robot name="x"><link name="a"><{SECRET}>'
    for call in (lambda: ms.load_source(broken, ""), lambda: Model.from_urdf(f"{SECRET}\n{SECRET}")):
        with pytest.raises(ValueError) as info:
            call()
        assert SECRET not in str(info.value)


def test_the_node_logs_one_content_free_line(tmp_path):
    """The dynamics node started on a secret file and on a massless end link: exit code 2 and one FATAL line
    naming the path (and the link), without the file's content, no traceback."""
    secret = _secret_file(tmp_path, "shadow")
    massless = tmp_path / "massless.urdf"
    massless.write_text(arm(link("tip")))
    for path, expected in ((secret, "not a valid URDF"), (massless, "'tip'")):
        rc, out = run_to_exit([sys.executable, "-m", "mbs_ros.nodes.dynamics_node", "--ros-args", "-p",
                               f"model_file:={path}"], cwd=ROOT)
        fatal = [line for line in out.splitlines() if "FATAL" in line]
        assert rc == 2, out
        assert len(fatal) == 1 and str(path) in fatal[0] and expected in fatal[0], out
        assert SECRET not in out and "Traceback" not in out and "Singular matrix" not in out


def test_the_nodes_refuse_a_mass_ratio_unless_their_parameter_lifts_it(tmp_path):
    """dynamics_node and controller_node on a 1e9 mass ratio: exit code 2 naming the light link and
    max_mass_ratio; with ``max_mass_ratio:=0`` (no bound) the dynamics node builds the model and runs until it is
    stopped (SIGINT, exit code 0)."""
    path = tmp_path / "heavy_light.urdf"
    path.write_text(arm(link("tip", 1e-6, inertia='ixx="1e-9" ixy="0" ixz="0" iyy="1e-9" iyz="0" izz="1e-9"',
                             xyz="0.1 0 0")).replace('<mass value="1.0"/>', '<mass value="1000.0"/>'))
    for module in ("mbs_ros.nodes.dynamics_node", "mbs_ros.nodes.controller_node"):
        rc, out = run_to_exit([sys.executable, "-m", module, "--ros-args", "-p", f"model_file:={path}"], cwd=ROOT)
        fatal = [line for line in out.splitlines() if "FATAL" in line]
        assert rc == 2, out
        assert len(fatal) == 1 and "'tip'" in fatal[0] and "max_mass_ratio" in fatal[0], out
    run_dynamics_node(tmp_path, "ratio", model_file=str(path), max_mass_ratio=0.0)


def run_dynamics_node(tmp_path, ns, **parameters):
    """Start the dynamics node at 100 Hz, wait until it runs, stop it (SIGINT, exit code 0); returns its log."""
    from mbs_ros.process import NodeProcess

    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name=f"{ns}_node", namespace=ns,
                       parameters=dict(physics_rate=100.0, **parameters), log_file=tmp_path / f"{ns}.log")
    proc.start()
    try:
        assert proc.wait_for_log("rk4 at 100 Hz", timeout=120), proc.log_text()
    finally:
        rc = proc.stop()
    assert rc == 0, proc.log_text()
    return proc.log_text()


def test_the_dynamics_node_logs_the_load_report_once(tmp_path):
    """A URDF whose tip breaks the triangle inequality loads with one note; the dynamics node says so in one
    warning line naming the file and the link, and runs."""
    path = tmp_path / "triangle.urdf"
    path.write_text(arm(link("tip", 1.0, inertia='ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="3"', xyz="0.1 0 0")))
    log = run_dynamics_node(tmp_path, "report", model_file=str(path))
    notes = [line for line in log.splitlines() if "loaded with" in line]
    assert len(notes) == 1 and "WARN" in notes[0], log
    assert str(path) in notes[0] and "1 note:" in notes[0] and "'tip'" in notes[0] and "triangle" in notes[0]
