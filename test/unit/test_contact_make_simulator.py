"""The dynamics node's make_simulator (mbs_ros.cores.dynamics) with a robot YAML carrying a ``world:``
mapping: the robot's URDF <collision> box lands on the ground and rests at the closed-form height, the contact's
work is negative, the energy report's contact dissipator never supplies and its balance stays within the contact
step's O(h) error; ``world: none`` gives no world and ``joint_limits: false`` no limits world. A free object
dropped onto the ground away from the robot counts its impact in the contact work (the balance closes)."""
from __future__ import annotations

import numpy as np
import pytest

from contact_fixtures import (ARM_GROUND, CRATE_DROP, CRATE_MASS, CRATE_SIZE, G, PUCK_MASS, PUCK_SIZE,
                              dynamics_setup, write_arm, write_puck)
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores.dynamics import balance_residual, energy_report, make_simulator

DROP = 0.2  # [m] the puck's bottom above the ground at the start
RATE = 1000.0  # physics steps per second: h = 1 ms


def _simulator(**given):
    model, s, q0, v0, limits, source = dynamics_setup(physics_rate=RATE, **given)
    return make_simulator(model, s, q0, v0, 1.0 / RATE, limits, 0, source)


def test_the_robot_yaml_world_lands_the_robot_on_the_ground(tmp_path):
    path = write_puck(tmp_path)
    rest = PUCK_SIZE[2] / 2
    sim = _simulator(model_file=str(path), initial_position=[0.0, 0.0, rest + DROP])
    assert sim.world is not None and [s.name for s in sim.world.shapes] == ["base_link/0", "ground"]
    assert sim.objects == []
    lost = PUCK_MASS * G * DROP  # 3.924 J: what the impact and the resting contact took
    h, T = 1.0 / RATE, 1.0
    t_land = (2 * DROP / G) ** 0.5  # 0.202 s
    worst_residual, reports = 0.0, 0
    for _ in range(int(T / 0.01)):  # one energy report per 10 ms period, as the node's energy topic
        assert sim.advance(10) == 10 and sim.fault is None
        r = energy_report(sim, 288.15)
        assert r["dissipators"]["contact"] >= 0.0, r["dissipators"]  # a dissipative port: never supplying
        assert r["balance_residual"] == balance_residual(sim)  # the report and the headless record agree
        assert r["dissipated_energy"] == pytest.approx(-sim.contact_work, abs=1e-15)
        worst_residual = max(worst_residual, abs(r["balance_residual"]))
        reports += 1
    # rests on its collision box's bottom face, level, still
    assert sim.q[2] == pytest.approx(rest, abs=1e-9)
    np.testing.assert_allclose(sim.q[:2], 0.0, atol=1e-12)
    np.testing.assert_allclose(sim.q[3:7], [0.0, 0.0, 0.0, 1.0], atol=1e-12)
    assert np.abs(sim.v).max() < 1e-9
    d = sim.diagnostics()
    assert d["contact_steps"] > 0 and d["contact_unconverged"] == 0 and d["contacts"] >= 3
    assert sim.contact_work < 0.0
    # the balance E - E0 + dissipated: the semi-implicit contact step's own O(h) error (docs/contact.md, "Under
    # refinement"): the landing leaves ~1 % of the fall's energy (0.039 J), and at rest each step's impulse takes
    # the free velocity's g h out again, 1/2 m (g h)^2 per step: 1/2 m g^2 h = 0.096 W (0.077 J over the 0.8 s at
    # rest). Measured: 0.116 J after 1 s at h = 1 ms (the bound: 2 % of the fall plus that)
    bound = 0.02 * lost + 0.5 * PUCK_MASS * G * G * h * (T - t_land)
    assert 0.0 < d["energy_balance_residual"] <= 1.05 * bound, (d["energy_balance_residual"], bound)
    assert worst_residual <= 1.05 * bound
    print(f"\npuck: rest {sim.q[2]:.12g} m, contact work {sim.contact_work:.6g} J of {lost:.6g} J lost, balance "
          f"residual {d['energy_balance_residual']:.3g} J (bound {bound:.3g} J), {reports} reports")


def test_the_balance_closes_and_a_resting_body_costs_nothing(tmp_path):
    """The port takes what the contact step removes, so the balance closes to rounding; at rest the step changes
    no energy, so the port's work stops growing once the puck rests."""
    path = write_puck(tmp_path)
    model, s, q0, v0, limits, source = dynamics_setup(model_file=str(path),
                                                      initial_position=[0.0, 0.0, PUCK_SIZE[2] / 2 + DROP])
    sim = make_simulator(model, s, q0, v0, 1e-3, limits, 0, source)
    assert sim.advance(500) == 500
    landed = sim.contact_work
    assert landed == pytest.approx(-2.0 * G * DROP, rel=1e-6)  # the whole fall, taken at the landing
    assert sim.advance(500) == 500
    assert sim.contact_work == landed and sim.contact_power == 0.0
    assert abs(balance_residual(sim)) < 1e-9


def test_world_none_and_joint_limits_false(tmp_path):
    path = write_puck(tmp_path)
    sim = _simulator(model_file=str(path), initial_position=[0.0, 0.0, 1.0], world="none")
    assert sim.world is None  # a floating body without joints: no limits world either
    assert "contact_work" not in sim.diagnostics() and "contact" not in energy_report(sim, 288.15)["dissipators"]
    sim.advance(600)
    assert sim.q[2] < 0.0  # nothing stops it: it falls through where the ground was
    # a robot with joint limits and no world: the limits' own world unless joint_limits is false
    arm = write_arm(tmp_path, world="")
    sim = _simulator(model_file=str(arm))
    assert sim.world is not None and sim.world.shapes == [] and sim.world.limits
    assert _simulator(model_file=str(arm), joint_limits=False).world is None
    # with its world: the world's limits follow joint_limits
    arm = write_arm(tmp_path)
    assert _simulator(model_file=str(arm)).world.limits
    sim = _simulator(model_file=str(arm), joint_limits=False)
    assert sim.world is not None and not sim.world.limits and len(sim.objects) == 1
    assert _simulator(model_file=str(arm), world="none", joint_limits=False).world is None
    # world given as a path: the puck's world around the arm
    sim = _simulator(model_file=str(arm), world=str(write_puck(tmp_path)))
    assert [s.name for s in sim.world.shapes] == ["ground"] and sim.objects == []


def test_an_object_dropped_away_from_the_robot_counts_its_impact(tmp_path):
    """The crate lands on the ground 2 m from the arm, which touches nothing: the contact work still counts
    the impact (the balance closes to the step's O(h) error, not by the whole m g Δz)."""
    sim = _simulator(model_file=str(write_arm(tmp_path)), initial_joint_positions=[0.3, -0.2])
    h, T = 1.0 / RATE, 0.6
    assert sim.advance(int(T * RATE)) == int(T * RATE) and sim.fault is None
    assert sim.obj_q[0][2] == pytest.approx(ARM_GROUND + CRATE_SIZE / 2, abs=1e-9)
    lost = CRATE_MASS * G * CRATE_DROP  # 3.924 J
    assert sim.contact_steps > 0 and sim.contact_work < -0.98 * lost
    t_land = (2 * CRATE_DROP / G) ** 0.5
    bound = 0.02 * lost + 0.5 * CRATE_MASS * G * G * h * (T - t_land)
    r = balance_residual(sim)
    assert 0.0 < r <= 1.05 * bound, (r, bound)


def test_a_single_rigid_body_gets_its_shapes_from_the_world_file(tmp_path):
    """No URDF: world.robot_shapes puts a capsule on the body's base_link; lying along x on the ground it rests
    with its axis at its radius (closed form), and a mask that meets nothing lets it fall through."""
    r, length = 0.05, 0.3
    rest = tmp_path / "rest.yaml"
    rest.write_text("world:\n  ground: {height: 0.0, mu: 0.6}\n  robot_shapes:\n"
                    f"    - {{name: hull, link: base_link, capsule: [{r}, {length}], rpy: [0, 1.5707963267948966, 0]}}\n")
    model, s, q0, v0, limits, source = dynamics_setup(world=str(rest), mass=2.0,
                                                      inertia=[0.02, 0.0, 0.0, 0.02, 0.0, 0.02],
                                                      initial_position=[0.0, 0.0, r + 0.05])
    sim = make_simulator(model, s, q0, v0, 1e-3, limits, 0, source)
    assert sim.advance(600) == 600 and sim.fault is None
    assert sim.q[2] == pytest.approx(r, abs=1e-9) and np.abs(sim.v).max() < 1e-9
    assert sim.contact_work == pytest.approx(-2.0 * G * 0.05, rel=1e-6)
    through = tmp_path / "through.yaml"
    through.write_text(rest.read_text().replace("rpy: [0, 1.5707963267948966, 0]}",
                                                "rpy: [0, 1.5707963267948966, 0], mask: 0}"))
    model, s, q0, v0, limits, source = dynamics_setup(world=str(through), initial_position=[0.0, 0.0, r + 0.05])
    sim = make_simulator(model, s, q0, v0, 1e-3, limits, 0, source)
    assert sim.advance(600) == 600 and sim.q[2] < -1.0 and sim.contact_steps == 0


def test_a_robot_shape_on_an_unknown_link_is_refused_naming_it(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("world:\n  robot_shapes:\n    - {name: hull, link: nowhere, sphere: 0.1}\n")
    model, s, q0, v0, limits, source = dynamics_setup(world=str(bad))
    with pytest.raises(ParameterError, match=r"bad.yaml: world.robot_shapes: hull: the robot has no link 'nowhere' "
                                             r"\(links: base_link\)"):
        make_simulator(model, s, q0, v0, 1e-3, limits, 0, source)


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_friction_scale_multiplies_every_mu_and_the_slide_follows_it(tmp_path, scale):
    # The puck (its URDF box takes the file's default friction 0.8) slides at 1 m/s on the ground (mu 0.6): the
    # pair's mu is the smaller, 0.6 x scale, and a box sliding to a stop covers v0^2 / (2 mu g) (0.085 m at
    # scale 1, 0.170 m at 0.5), to the scheme's v0 h / 2 = 0.5 mm.
    path = write_puck(tmp_path)
    v0 = 1.0
    sim = _simulator(model_file=str(path), friction_scale=scale, initial_position=[0.0, 0.0, PUCK_SIZE[2] / 2],
                     initial_twist=[v0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert {s.name: s.mu for s in sim.world.shapes} == pytest.approx({"base_link/0": 0.8 * scale,
                                                                       "ground": 0.6 * scale}, rel=1e-15)
    assert sim.advance(1000) == 1000 and sim.fault is None
    mu = 0.6 * scale
    assert sim.q[0] == pytest.approx(v0 ** 2 / (2 * mu * G), abs=1e-3)
    assert np.abs(sim.v).max() < 1e-9


def test_object_mass_scale_and_offset_move_and_weigh_the_free_objects(tmp_path):
    """object_offset [0.5, -0.3, 0.1, 0.7]: the crate starts at (2.5, -0.3) 0.3 m above its resting height,
    turned 0.7 rad about z (scipy's quaternion); object_mass_scale 3: 6 kg, so its landing takes 6 kg g 0.3 m
    (17.7 J) into the contact work; an offset through the ground refuses the start naming the pair."""
    from scipy.spatial.transform import Rotation

    model = str(write_arm(tmp_path))
    sim = _simulator(model_file=model, initial_joint_positions=[0.3, -0.2], object_mass_scale=3.0,
                     object_offset=[0.5, -0.3, 0.1, 0.7])
    rest = ARM_GROUND + CRATE_SIZE / 2
    np.testing.assert_allclose(sim.obj_q[0][:3], [2.5, -0.3, rest + CRATE_DROP + 0.1], atol=1e-15)
    np.testing.assert_allclose(sim.obj_q[0][3:], Rotation.from_euler("z", 0.7).as_quat(), atol=1e-15)
    assert sim.objects[0].total_mass == pytest.approx(3.0 * CRATE_MASS, rel=1e-15)
    assert sim.advance(700) == 700 and sim.fault is None
    assert sim.obj_q[0][2] == pytest.approx(rest, abs=1e-9)
    lost = 3.0 * CRATE_MASS * G * (CRATE_DROP + 0.1)
    assert -1.02 * lost < sim.contact_work < -0.98 * lost
    with pytest.raises(ParameterError, match="crate/ground"):
        _simulator(model_file=model, object_offset=[0.0, 0.0, -0.25, 0.0])
