"""The Simulator with a contact world: nothing changes where nothing is near (bit for bit), a dropped body lands
and rests, a joint stops at its limit, and the energy balance counts the contact's work."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.geometry import box, halfspace
from mbs_ros.dynamics.contact.world import ContactWorld
from mbs_ros.dynamics.simulator import Simulator

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


def test_a_world_with_free_objects_is_refused_for_now():
    model, s = _box()
    other, _ = _box()
    with pytest.raises(ValueError, match="this model alone"):
        Simulator(model, model.neutral(), np.zeros(6), 1e-3, world=ContactWorld([model, other], []))
