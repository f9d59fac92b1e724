"""The world file (mbs_ros.dynamics.contact.world_file) and the dynamics node's make_world: every refusal names the
file and the key and never echoes the file's content; an unreadable collision mesh names the link and the file; a
world that starts interpenetrating names the pair and the depth; buoyancy as scaled gravity (free flight and the
resting normal force against the closed forms); solid inertia defaults against the textbook formulas."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from contact_fixtures import PUCK_URDF, dynamics_setup, write_puck
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.world_file import build_world, load_world
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.dynamics.model.urdf import ModelError
from mbs_ros.cores.dynamics import make_world
from mbs_ros.yamlfile import YamlFileError

G = 9.81
SECRET = "SECRET-marker-7f3a"  # in every file's comment and in a neighbour's name: never in a message
GOOD = {"name": "crate", "box": [0.2, 0.2, 0.2], "mass": 2.0, "xyz": [1.0, 0.0, 0.1]}


def _write(tmp_path, world_yaml: str, name="world.yaml"):
    path = tmp_path / name
    path.write_text(f"# {SECRET}\n" + textwrap.dedent(world_yaml))
    return path


def _obj(**changes):
    o = dict(GOOD, **changes)
    return "{" + ", ".join(f"{k}: {v!r}" if not isinstance(v, str) else f"{k}: {v}" for k, v in o.items()
                           if v is not None) + "}"


def _world_with_object(obj: str) -> str:
    # a neighbour whose name carries the marker: a message that echoed the file would show it
    return (f"world:\n  ground: {{height: 0.0}}\n  static:\n    - {{name: {SECRET}, sphere: 0.1, xyz: [5, 5, 5]}}\n"
            f"  objects:\n    - {obj}\n")


REFUSED = {
    "negative_mu": (_world_with_object(_obj(mu=-0.2)), "world.objects[0].mu"),
    "zero_mass": (_world_with_object(_obj(mass=0.0)), "world.objects[0].mass"),
    "negative_mass": (_world_with_object(_obj(mass=-1.0)), "world.objects[0].mass"),
    "missing_mass": (_world_with_object(_obj(mass=None)), "world.objects[0].mass"),
    "zero_inertia": (_world_with_object(_obj(inertia=[0.0, 0.01, 0.01])), "world.objects[0].inertia[0]"),
    "negative_inertia": (_world_with_object(_obj(inertia=[0.01, -0.01, 0.01])), "world.objects[0].inertia[1]"),
    "triangle": (_world_with_object(_obj(inertia=[0.01, 0.01, 0.03])), "world.objects[0].inertia"),
    "unknown_object_key": (_world_with_object(_obj(colour="red")), "world.objects[0].colour"),
    "unknown_world_key": ("world:\n  gravel: 1\n  ground: {height: 0.0}\n", "world.gravel"),
    "unknown_ground_key": ("world:\n  ground: {height: 0.0, slope: 3}\n", "world.ground.slope"),
    "two_kinds": (_world_with_object(_obj(sphere=0.1)), "world.objects[0]"),
    "no_kind": (_world_with_object(_obj(box=None)), "world.objects[0]"),
    "static_two_kinds": ("world:\n  static:\n    - {name: wall, box: [1, 1, 1], cylinder: [0.1, 1]}\n",
                         "world.static[0]"),
    "static_no_kind": ("world:\n  static:\n    - {name: wall, xyz: [0, 0, 1]}\n", "world.static[0]"),
    "duplicate_names": ("world:\n  static:\n    - {name: crate, box: [1, 1, 1], xyz: [0, 0, 5]}\n  objects:\n"
                        f"    - {_obj()}\n", "world"),
    "missing_srdf": ("world:\n  srdf: no_such_robot.srdf\n  ground: {height: 0.0}\n", "world.srdf"),
    "zero_normal": ("world:\n  ground: {height: 0.0, normal: [0, 0, 0]}\n", "world.ground.normal"),
    "negative_margin": ("world:\n  margin: -0.001\n", "world.margin"),
    "bad_box": (_world_with_object(_obj(box=[0.2, 0.0, 0.2])), "world.objects[0].box[1]"),
}
WHY = {"two_kinds": "exactly one", "no_kind": "exactly one", "static_two_kinds": "exactly one",
       "static_no_kind": "exactly one", "duplicate_names": "crate repeated", "missing_srdf": "no such file",
       "triangle": "triangle", "unknown_world_key": "gravel", "unknown_object_key": "colour",
       "unknown_ground_key": "slope"}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refusal_names_the_file_and_the_key_and_never_the_content(tmp_path, case):
    text, key = REFUSED[case]
    path = _write(tmp_path, text)
    with pytest.raises(YamlFileError) as info:
        load_world(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    assert f"{key}:" in msg or f"{key} " in msg or msg.endswith(key), msg
    assert case not in WHY or WHY[case] in msg, msg
    assert SECRET not in msg and "\n" not in msg
    # the dynamics node's make_world: the same refusal as a ParameterError naming the parameter
    model_path = write_puck(tmp_path, world=text.replace("world:\n", "world:\n", 1), name="r")
    model, s, q0, v0, limits, source = dynamics_setup(model_file=str(model_path), initial_position=[0.0, 0.0, 3.0])
    with pytest.raises(ParameterError) as info:
        make_world(s, source, model, q0)
    msg = str(info.value)
    assert msg.startswith(f"world: {model_path}: ") and key in msg and SECRET not in msg, msg


def test_a_good_file_loads_its_values(tmp_path):
    srdf = tmp_path / "r.srdf"
    srdf.write_text('<robot name="r"><disable_collisions link1="a" link2="b" reason="Never"/></robot>')
    path = _write(tmp_path, f"""\
        world:
          margin: 0.002
          friction: 0.4
          self_collision: true
          srdf: r.srdf
          ground: {{height: -0.5, normal: [0, 0, 2]}}
          static:
            - {{name: wall, box: [0.1, 2.0, 1.0], xyz: [1.5, 0, 0.5], mu: 0.5}}
          objects:
            - {_obj(fluid_density=500.0)}
        """)
    w = load_world(path, fluid_density=1000.0)
    assert (w.margin, w.friction, w.robot_collision, w.self_collision) == (0.002, 0.4, True, True)
    assert w.srdf == str(srdf) and w.ground["height"] == -0.5 and w.static[0]["mu"] == 0.5
    assert w.objects[0]["fluid_density"] == 500.0  # its own, not the robot YAML's
    assert load_world(_write(tmp_path, f"world:\n  objects:\n    - {_obj()}\n", "w2.yaml"),
                      fluid_density=1000.0).objects[0]["fluid_density"] == 1000.0  # the robot YAML's fluid


# ------------------------------------------------------------------------------- solid inertia


@pytest.mark.parametrize("shape,size,m,expected", [
    ("box", [0.3, 0.5, 0.7], 4.0, [4.0 * (0.5 ** 2 + 0.7 ** 2) / 12, 4.0 * (0.3 ** 2 + 0.7 ** 2) / 12,
                                   4.0 * (0.3 ** 2 + 0.5 ** 2) / 12]),
    ("sphere", 0.25, 3.0, [2.0 / 5.0 * 3.0 * 0.25 ** 2] * 3),
    # a solid cylinder along z: radius r, length L: m (3 r^2 + L^2) / 12 about x and y, m r^2 / 2 about z
    ("cylinder", [0.1, 0.8], 5.0, [5.0 * (3 * 0.1 ** 2 + 0.8 ** 2) / 12] * 2 + [0.5 * 5.0 * 0.1 ** 2]),
])
def test_an_objects_inertia_defaults_to_the_solid_shapes(tmp_path, shape, size, m, expected):
    path = _write(tmp_path, f"world:\n  objects:\n    - {{name: o, {shape}: {size}, mass: {m}, xyz: [0, 0, 5]}}\n")
    spec = load_world(path)
    np.testing.assert_allclose(spec.objects[0]["inertia"], expected, rtol=1e-14)
    robot = Model.rigid_body("se3", 1.0, np.eye(3), gravity=(0.0, 0.0, 0.0))
    world, objects = build_world(spec, robot, None, np.array([0, 0, 50.0, 0, 0, 0, 1.0]), (0.0, 0.0, -G))
    # the object's model: SO(3) x R^3, mass m and the solid's inertia about its centre, in its shape's axes
    M = world.models[1].mass_matrix(objects[0][0])
    np.testing.assert_allclose(M, np.diag([m] * 3 + expected), rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------------------- buoyancy

RHO, CRATE_M, CRATE_S = 1000.0, 12.0, 0.2  # a 12 kg crate of 8 L in water: 8 kg of buoyancy


def _crate_world(tmp_path, z, rho=RHO):
    path = _write(tmp_path, f"world:\n  ground: {{height: 0.0}}\n  objects:\n    - {{name: crate, box: [{CRATE_S}, "
                            f"{CRATE_S}, {CRATE_S}], mass: {CRATE_M}, xyz: [0.0, 0.0, {z!r}], fluid_density: {rho}}}\n")
    robot = Model.rigid_body("se3", 1.0, np.eye(3), gravity=(0.0, 0.0, 0.0))  # weightless, 50 m above
    q_robot = np.array([0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 1.0])
    world, objects = build_world(load_world(path), robot, None, q_robot, (0.0, 0.0, -G))
    return robot, q_robot, world, objects


def test_buoyancy_scales_the_objects_gravity_in_free_flight(tmp_path):
    robot, q_robot, world, objects = _crate_world(tmp_path, 10.0)
    g_eff = G * (1.0 - RHO * CRATE_S ** 3 / CRATE_M)  # 9.81 (1 - 8/12) = 3.27 m/s^2
    sim = Simulator(robot, q_robot, np.zeros(6), 1e-3, world=world, objects=objects)
    assert sim.advance(500) == 500 and sim.fault is None
    t = 0.5
    assert sim.obj_q[0][2] == pytest.approx(10.0 - 0.5 * g_eff * t * t, abs=1e-12)
    assert sim.obj_v[0][2] == pytest.approx(-g_eff * t, abs=1e-12)


def test_a_buoyant_object_rests_on_the_ground_with_weight_less_buoyancy(tmp_path):
    robot, q_robot, world, objects = _crate_world(tmp_path, CRATE_S / 2)  # resting on the ground from the start
    weight, buoyancy = CRATE_M * G, RHO * CRATE_S ** 3 * G
    h = 1e-3
    sim = Simulator(robot, q_robot, np.zeros(6), h, world=world, objects=objects)
    assert sim.advance(1000) == 1000 and sim.fault is None
    np.testing.assert_allclose(sim.obj_q[0][:3], [0.0, 0.0, CRATE_S / 2], atol=1e-12)  # it neither sinks nor rises
    assert np.abs(sim.obj_v[0]).max() < 1e-12
    # the contact step at this state: the normal impulses over h are the ground's force on it
    qs, vs, info, engaged = world.step([q_robot, sim.obj_q[0]], [np.zeros(6), sim.obj_v[0]],
                                       [np.zeros(6), np.zeros(6)], h)
    assert engaged == {1} and info.n_contacts >= 3 and info.result.converged
    lam = info.result.lam
    normal = lam[0:3 * info.n_contacts:3].sum() / h
    assert normal == pytest.approx(weight - buoyancy, rel=1e-9), (normal, weight - buoyancy)
    # no net friction on the level (the four corners are redundant: they may hold internal tangential impulses
    # that cancel), and the state stays where it is
    tangential = lam[:3 * info.n_contacts].reshape(-1, 3)[:, 1:]
    assert np.abs(tangential.sum(axis=0)).max() < 1e-9 * normal * h
    np.testing.assert_allclose(qs[1][:3], [0.0, 0.0, CRATE_S / 2], atol=1e-12)
    assert np.abs(vs[1]).max() < 1e-12


# ------------------------------------------------------------------------------- meshes and interpenetration


MESH_URDF = PUCK_URDF.replace('<box size="0.2 0.2 0.1"/>', '<mesh filename="hulls/puck_hull.stl"/>')


def test_an_unreadable_collision_mesh_names_the_link_and_the_file(tmp_path):
    assert "puck_hull.stl" in MESH_URDF
    path = write_puck(tmp_path, urdf=MESH_URDF)
    model, s, q0, v0, limits, source = dynamics_setup(model_file=str(path), initial_position=[0.0, 0.0, 1.0])
    spec = load_world(path)
    with pytest.raises(ModelError) as info:
        build_world(spec, model, source.urdf, q0, model.gravity, base_dir=str(tmp_path))
    msg = str(info.value)
    assert "base_link" in msg and "puck_hull.stl" in msg, msg
    with pytest.raises(ParameterError) as info:
        make_world(s, source, model, q0)
    msg = str(info.value)
    assert msg.startswith("world: ") and "base_link" in msg and "puck_hull.stl" in msg, msg
    # a file that is there but no mesh: named, never its bytes
    (tmp_path / "hulls").mkdir()
    (tmp_path / "hulls" / "puck_hull.stl").write_text(f"solid {SECRET}\nnot a mesh\n")
    with pytest.raises(ParameterError) as info:
        make_world(s, source, model, q0)
    msg = str(info.value)
    assert "base_link" in msg and "puck_hull.stl" in msg and SECRET not in msg, msg


@pytest.mark.parametrize("depth_mm", [10.0, 2.75])
def test_a_world_that_starts_interpenetrating_names_the_pair_and_the_depth(tmp_path, depth_mm):
    z = CRATE_S / 2 - depth_mm * 1e-3
    path = _write(tmp_path, f"world:\n  ground: {{height: 0.0}}\n  objects:\n    - {_obj(xyz=[1.0, 0.0, z])}\n")
    robot = Model.rigid_body("se3", 1.0, np.eye(3), gravity=(0.0, 0.0, 0.0))
    with pytest.raises(ValueError) as info:
        build_world(load_world(path), robot, None, np.array([0, 0, 50.0, 0, 0, 0, 1.0]), (0.0, 0.0, -G))
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and "crate" in msg and "ground" in msg, msg
    assert f"by {depth_mm:.3g} mm" in msg, msg
    # the robot's own shape into the ground, through the node's make_world
    model_path = write_puck(tmp_path)
    model, s, q0, v0, limits, source = dynamics_setup(model_file=str(model_path),
                                                      initial_position=[0.0, 0.0, 0.05 - depth_mm * 1e-3])
    with pytest.raises(ParameterError) as info:
        make_world(s, source, model, q0)
    msg = str(info.value)
    assert msg.startswith(f"world: {model_path}: ") and "ground" in msg and f"by {depth_mm:.3g} mm" in msg, msg
