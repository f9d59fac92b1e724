"""The Simulator with a contact world: nothing changes where nothing is near (bit for bit), a dropped body lands
and rests, a joint stops at its limit, and the energy balance counts the contact's work."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.geometry import box, halfspace
from mbs_ros.dynamics.contact.world import ContactWorld
from mbs_ros.dynamics.simulation.simulator import Simulator

G = 9.81
ARM = """<robot name="one"><link name="base"/><link name="arm"><inertial><origin xyz="0.5 0 0"/>
  <mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
  <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint></robot>"""


def _box():
    m, s = 2.0, 0.2
    return Model.rigid_body("se3", m, np.eye(3) * m * s * s / 6, gravity=(0.0, 0.0, -G)), s


@pytest.mark.parametrize("chunks", [[400], [1] * 50 + [350], [7, 93, 300]])
def test_far_from_everything_the_states_are_todays_bit_for_bit(chunks):
    model, s = _box()
    q0 = np.array([0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 1.0])  # 50 m above the ground: 400 steps fall 0.8 m
    v0 = np.array([0.3, 0.0, 0.0, 0.2, 1.0, -0.5])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0), box("box", (s, s, s), (0, 0))])
    plain = Simulator(model, q0, v0, 1e-3)
    touching = Simulator(model, q0, v0, 1e-3, world=world)
    for sim in (plain, touching):
        sim.set_wrench([1.0, 0.0, 0.5, 0.0, 0.1, 0.0])
    for n in chunks:
        assert plain.advance(n) == touching.advance(n) == n
        assert np.array_equal(plain.q, touching.q) and np.array_equal(plain.v, touching.v)
    assert touching.contact_steps == 0 and touching.work == plain.work


def test_a_dropped_box_lands_rests_and_balances_its_energy():
    model, s = _box()
    q0 = np.array([0.0, 0.0, 0.5 * s + 0.2, 0.0, 0.0, 0.0, 1.0])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0), mu=0.6)])
    sim = Simulator(model, q0, np.zeros(6), 1e-3, world=world, energy_check_steps=10)
    assert sim.advance(1000) == 1000 and sim.fault is None
    assert abs(sim.q[2] - 0.5 * s) < 1e-9 and np.abs(sim.v).max() < 1e-9
    # it fell 0.2 m: m g 0.2 of potential energy went into the impact and the resting contact's steps
    E = model.kinetic_energy(sim.q, sim.v) + model.potential_energy(sim.q)
    assert sim.contact_work < 0.0
    assert E - sim.energy_ref - sim.contact_work == pytest.approx(0.0, abs=0.05 * 2.0 * G * 0.2)
    assert sim.contact_steps > 0 and sim.contact_unconverged == 0


def test_resting_steps_compute_no_ordinary_batch_the_look_ahead_would_drop(monkeypatch):
    """Resting, every step is a contact step: after one, advance() takes the next without first integrating the
    rest of its call ahead in a batch of ordinary steps (which the look-ahead drops at once: n(n-1)/2 wasted
    steps in a call of n, a free-running node's call when it is behind). The states are the same either way."""
    model, s = _box()
    q0 = np.array([0.0, 0.0, 0.5 * s + 0.01, 0.0, 0.0, 0.0, 1.0])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0), mu=0.6)])
    sim = Simulator(model, q0, np.zeros(6), 1e-3, world=world)
    assert sim.advance(300) == 300 and sim.contact_steps > 0  # landed, resting
    batches = []
    real = sim._batch
    monkeypatch.setattr(sim, "_batch", lambda *a: batches.append(a[4]) or real(*a))
    steps = sim.contact_steps
    assert sim.advance(20) == 20
    assert sim.contact_steps - steps == 20  # each a contact step
    assert batches == []


def test_each_contact_steps_port_takes_the_energies_of_its_own_start_and_end():
    """contact_power = min(0, ΔE − the commands' work) / dt, ΔE between the step's own start and end, whatever came
    before it: resting (a contact step at every step: the simulator keeps the end's energy for the next one), a
    landing after free flight, and after a reset (both start where no contact step ended)."""
    model, s = _box()
    q0 = np.array([0.0, 0.0, 0.5 * s + 0.05, 0.0, 0.0, 0.0, 1.0])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0), mu=0.6)])
    sim = Simulator(model, q0, np.zeros(6), 1e-3, world=world)

    def energy(q, v):
        return model.kinetic_energy(q, v) + model.potential_energy(q)

    after = {"contact": 0, "free": 0}
    was_contact = False
    for k in range(1000):
        if k == 300:
            sim.set_wrench([0.0, 0.0, 2.0 * 2.0 * G, 0.0, 0.0, 0.0])  # lifted at g: off the ground
        elif k == 400:
            sim.set_wrench(np.zeros(6))  # it falls back and lands again
        elif k == 700:
            sim.reset()
        q, v, work, n = sim.q, sim.v, sim.work, sim.contact_steps
        assert sim.advance(1) == 1 and sim.fault is None
        is_contact = sim.contact_steps > n
        if is_contact:
            expected = min(0.0, energy(sim.q, sim.v) - energy(q, v) - (sim.work - work)) / sim.dt
            assert sim.contact_power == pytest.approx(expected, rel=1e-12, abs=1e-12), k
            after["contact" if was_contact and k != 700 else "free"] += 1
        was_contact = is_contact
    assert after["contact"] > 400 and after["free"] >= 3  # the first landing, the second, the one after the reset


def test_a_joint_driven_into_its_limit_stops_there():
    model = Model.from_urdf(ARM, gravity=(0.0, 0.0, -G))
    sim = Simulator(model, np.zeros(1), np.zeros(1), 1e-3)  # limits are on by default
    sim.set_joint_efforts([2.0])
    assert sim.advance(2000) == 2000 and sim.fault is None
    assert 0.5 - 1e-3 <= sim.q[0] <= 0.5 + 1e-3 and abs(sim.v[0]) < 1e-12
    free = Simulator(model, np.zeros(1), np.zeros(1), 1e-3, joint_limits=False)  # limits off: it passes them
    free.set_joint_efforts([2.0])
    free.advance(2000)
    assert free.q[0] > 1.0


def _arm_and_box(box_xyz, v_box=(0.0,) * 6, ground=-5.0):
    """The 1-DOF arm (its link a 0.1 m box at x = 0.5 m) and a free 0.2 m box on SO(3)×R³ with the ground."""
    arm = Model.from_urdf(ARM, gravity=(0.0, 0.0, -G))
    m, s = 2.0, 0.2
    obj = Model.rigid_body("so3xr3", m, np.eye(3) * m * s * s / 6, gravity=(0.0, 0.0, -G))
    T = np.eye(4)
    T[0, 3] = 0.5
    shapes = [halfspace("ground", (0, 0, 1), ground, 0.6), box("link", (0.1, 0.1, 0.1), (0, 1), T, mu=0.6),
              box("crate", (s, s, s), (1, 0), mu=0.6)]
    world = ContactWorld([arm, obj], shapes)
    q_box = np.array([*box_xyz, 0.0, 0.0, 0.0, 1.0])
    return arm, obj, world, (q_box, np.array(v_box, dtype=float))


@pytest.mark.parametrize("chunks", [[600], [1] * 30 + [570], [13, 87, 500]])
def test_a_free_object_far_from_the_robot_flies_as_the_closed_form_and_the_robot_as_today(chunks):
    arm, obj, world, start = _arm_and_box((3.0, 0.0, 0.0), (0.5, 0.0, 2.0, 0.0, 0.0, 1.0))
    plain = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3)
    sim = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, objects=[start])
    for s in (plain, sim):
        s.set_joint_efforts([0.3])
    for n in chunks:
        assert plain.advance(n) == sim.advance(n) == n
        assert np.array_equal(plain.q, sim.q) and np.array_equal(plain.v, sim.v)
    t = 0.6
    # the free flight in closed form (RK4 is exact for a constant acceleration; the spin about z leaves it alone)
    expected = np.array([3.0 + 0.5 * t, 0.0, 2.0 * t - 0.5 * G * t * t])
    np.testing.assert_allclose(sim.obj_q[0][:3], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sim.obj_v[0][:3], [0.5, 0.0, 2.0 - G * t], rtol=0, atol=1e-12)
    # the arm falls onto its joint limit in both (the limit's steps are the contact step's, the object's not)
    assert sim.contact_steps == plain.contact_steps > 0
    # the object's free flight adds nothing to the balance (RK4 keeps its energy to rounding)
    assert sim.diagnostics()["energy_balance_residual"] == pytest.approx(
        plain.diagnostics()["energy_balance_residual"], abs=1e-9)


def test_the_arm_falls_onto_a_free_box_and_rests_on_it_the_balance_counts_both():
    # the ground at z = -0.45, the box (0.2 m) resting on it under the link's path: its top at z = -0.25; the
    # link (a 0.1 m cube at x = 0.5 about the joint's y axis) falls under gravity (q grows: x turns toward -z)
    arm, obj, world, start = _arm_and_box((0.45, 0.0, -0.35), ground=-0.45)
    with pytest.raises(ValueError, match="0 initial states for the world's 1 free objects"):
        Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, joint_limits=False)
    sim = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, objects=[start], joint_limits=False)
    assert sim.advance(600) == 600 and sim.fault is None
    d = sim.diagnostics()
    assert d["contact_steps"] > 0 and d["contact_unconverged"] == 0
    assert sim.contact_work < 0.0
    # the link rests on the box by its lowest corner (x 0.55, z -0.05 in the link): 0.55 sin q + 0.05 cos q =
    # 0.25, the box's top 0.25 m below the joint
    q_rest = math.asin(0.25 / math.hypot(0.55, 0.05)) - math.atan2(0.05, 0.55)
    assert abs(sim.q[0] - q_rest) < 1e-6 and abs(sim.v[0]) < 1e-9
    # the box, pressed, stays on the ground where it was (mu 0.6 holds it)
    np.testing.assert_allclose(sim.obj_q[0][:3], start[0][:3], atol=1e-4)
    # the port took what the link lost falling to its closed-form rest angle (the box resting from the start
    # costs nothing: a resting contact step changes no energy), and the balance closes to rounding
    assert -sim.contact_work == pytest.approx(1.0 * G * 0.5 * math.sin(q_rest), rel=1e-5)
    assert abs(d["energy_balance_residual"]) < 1e-9


def test_the_port_of_a_block_sliding_down_an_incline_is_coulombs_friction_power():
    """The contact port's power in a Simulator: the semi-implicit step's energy change, -mu N v+ - m a^2 h / 2
    per step exactly (v+ the velocity after the step, a = g (sin - mu cos)), never positive; computed here from
    the closed form, not from the code."""
    theta, mu, m, s, h = math.radians(30.0), 0.3, 2.0, 0.2, 1e-3
    block = Model.rigid_body("so3xr3", m, np.eye(3) * m * s * s / 6, gravity=(0.0, 0.0, -G))
    n = np.array([0.0, -math.sin(theta), math.cos(theta)])
    q0 = np.zeros(7)
    q0[:3] = 0.5 * s * n
    q0[3:] = [math.sin(theta / 2), 0.0, 0.0, math.cos(theta / 2)]
    world = ContactWorld([block], [halfspace("slope", n, 0.0, mu), box("block", (s, s, s), (0, 0), mu=mu)])
    sim = Simulator(block, q0, np.zeros(6), h, world=world)
    a, N = G * (math.sin(theta) - mu * math.cos(theta)), m * G * math.cos(theta)
    for k in range(1, 501):
        assert sim.advance(1) == 1
        v_plus = a * k * h  # the scheme's velocity is exact for a constant force (test_contact_closed_forms)
        assert sim.contact_power == pytest.approx(-mu * N * v_plus - 0.5 * m * a * a * h, rel=1e-7, abs=1e-9)
    assert abs(sim.diagnostics()["energy_balance_residual"]) < 1e-9


def test_reset_puts_the_objects_back():
    arm, obj, world, start = _arm_and_box((3.0, 0.0, 0.0), (0.5, 0.0, 2.0, 0.0, 0.0, 1.0))
    sim = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, objects=[start])
    sim.advance(200)
    assert not np.array_equal(sim.obj_q[0], start[0])
    sim.reset()
    assert np.array_equal(sim.obj_q[0], start[0]) and np.array_equal(sim.obj_v[0], start[1])
    again = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, objects=[start])
    sim.advance(200)
    again.advance(200)
    assert np.array_equal(sim.obj_q[0], again.obj_q[0])


TWO = """<robot name="two"><link name="base"/>
  <link name="a"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
    <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
    <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 1 0"/>
    <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><origin xyz="1 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="100" velocity="10"/></joint></robot>"""


def test_a_joint_started_past_its_limit_goes_back_onto_it_alone():
    # j1 starts 0.2 rad past its upper limit: the step puts it on the limit and leaves j2 where its own motion
    # takes it (a shift in the M-metric moved j2 by the coupling: 0.58 rad here)
    model = Model.from_urdf(TWO, gravity=(0.0, 0.0, 0.0))
    q0 = np.array([0.7, 0.3])
    sim = Simulator(model, q0, np.zeros(2), 1e-3)
    assert sim.advance(1) == 1
    assert sim.q[0] == pytest.approx(0.5, abs=1e-8)
    assert abs(sim.q[1] - q0[1]) < 1e-12  # no force, no velocity: j2 stays


def test_a_wall_clock_deadline_ends_advance_after_a_contact_step_only():
    """The node's chunks of wall clock: past its deadline, advance returns after the next contact step; steps
    where nothing touches are not cut (today's batches)."""
    model, s = _box()
    shapes = [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0), mu=0.6)]
    resting = np.array([0.0, 0.0, 0.5 * s, 0.0, 0.0, 0.0, 1.0])
    sim = Simulator(model, resting, np.zeros(6), 1e-3, world=ContactWorld([model], shapes))
    assert sim.advance(50, deadline_ns=0) == 1 and sim.k == 1  # resting: every step is a contact step
    assert sim.advance(50) == 50 and sim.k == 51
    high = np.array([0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 1.0])
    far = Simulator(model, high, np.zeros(6), 1e-3, world=ContactWorld([model], shapes))
    assert far.advance(50, deadline_ns=0) == 50 and far.contact_steps == 0


def test_the_diagnostics_time_the_contact_steps():
    """The diagnostics' contact_step_mean_ms and contact_step_longest_ms (information for the benchmark and the
    node's /diagnostics): zero before any contact step; once the box rests, the world has timed one step per
    contact step of the Simulator (a resting box: every step) and the longest is at least the mean. No bound on
    the times themselves (the wall clock)."""
    model, s = _box()
    q0 = np.array([0.0, 0.0, 0.5 * s + 0.05, 0.0, 0.0, 0.0, 1.0])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0), mu=0.6)])
    sim = Simulator(model, q0, np.zeros(6), 1e-3, world=world)
    d = sim.diagnostics()
    assert d["contact_step_mean_ms"] == d["contact_step_longest_ms"] == 0.0 and world.step_count == 0
    assert sim.advance(400) == 400 and sim.contact_steps > 0
    d = sim.diagnostics()
    assert world.step_count == sim.contact_steps == d["contact_steps"]
    assert 0.0 < d["contact_step_mean_ms"] <= d["contact_step_longest_ms"]
    assert d["contact_step_mean_ms"] == pytest.approx(world.step_ns * 1e-6 / world.step_count, rel=1e-12)
