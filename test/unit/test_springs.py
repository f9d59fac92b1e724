"""Joint springs (``<dynamics spring_stiffness spring_reference>``, mbs_ros/dynamics/model/passive.py) against closed
forms: each ``spring/<joint>`` storage of :meth:`Model.energy_ports` is ½k(θ − θ₀)² with k and θ₀ as the URDF text
writes them (a mimic joint's spring at its derived angle), the spring force is −k(θ − θ₀) and the storage's
derivative, and a spring-mass system without damping keeps the total of its storages at ½k x₀² while it
swings. Both backends. The energy topic of a real node with springs: test/ros/test_spring_energy.py."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from mbs_ros.dynamics import Model, ModelWarning, simulate
from urdf_text import link, robot

SPRINGS = {"j1": (2.5, 0.3), "j2": (40.0, -0.05)}  # joint: (k [N m/rad or N/m], rest [rad or m])


def joint(name, parent, child, jtype="revolute", axis="0 0 1", xyz="0 0 0", dynamics="", extra=""):
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}"/><axis xyz="{axis}"/><limit lower="-2" upper="2" effort="10" velocity="3"/>'
            f'{dynamics}{extra}</joint>')


def spring(name):
    k, rest = SPRINGS[name]
    return f'<dynamics spring_stiffness="{k!r}" spring_reference="{rest!r}"/>'


def three_joints(gravity=(0.0, 0.0, 0.0)):
    """A revolute spring j1, a prismatic spring j2 and a revolute j3 without one."""
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 0.5, xyz="0 0 0.1"),
                 link("c", 0.7, xyz="0.05 0 0"),
                 joint("j1", "base", "a", axis="0 1 0", dynamics=spring("j1")),
                 joint("j2", "a", "b", jtype="prismatic", axis="1 0 0", xyz="0.3 0 0", dynamics=spring("j2")),
                 joint("j3", "b", "c", axis="0 0 1", xyz="0 0 0.2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        return Model.from_urdf(urdf, gravity=gravity)


def backends(model):
    return [model, model.with_backend("numpy")]


def test_spring_storages_are_half_k_x_squared():
    rng = np.random.default_rng(3)
    for model in backends(three_joints()):
        assert model.joint_names == ("j1", "j2", "j3")
        for _ in range(5):
            q = rng.uniform(-1.5, 1.5, size=3)
            v = rng.normal(size=3)
            storages = model.energy_ports(q, v)["storages"]
            expected = {f"spring/{j}": 0.5 * k * (q[i] - rest) ** 2 for i, (j, (k, rest)) in
                        enumerate(SPRINGS.items())}
            assert {n: e for n, e in storages.items() if n.startswith("spring/")} == pytest.approx(expected,
                                                                                                 rel=1e-12)
            # no gravity: the potential energy is the springs' alone
            assert model.potential_energy(q) == pytest.approx(sum(expected.values()), rel=1e-12)


def test_the_spring_force_is_minus_k_x_and_the_storages_derivative():
    rng = np.random.default_rng(4)
    for model in backends(three_joints()):
        q = rng.uniform(-1.5, 1.5, size=3)
        zero = np.zeros(3)
        tau = model.passive_forces(q, zero) - model.passive_forces(q, zero, springs=False)
        expected = [-k * (q[i] - rest) for i, (k, rest) in enumerate(SPRINGS.values())] + [0.0]
        np.testing.assert_allclose(tau, expected, rtol=1e-12, atol=1e-15)
        h = 1e-6
        for i, name in enumerate(SPRINGS):
            dq = np.zeros(3)
            dq[i] = h
            e_plus = model.energy_ports(q + dq, zero)["storages"][f"spring/{name}"]
            e_minus = model.energy_ports(q - dq, zero)["storages"][f"spring/{name}"]
            assert (e_plus - e_minus) / (2 * h) == pytest.approx(-tau[i], rel=1e-7)


def test_a_spring_on_a_mimic_joint_stores_at_the_derived_angle():
    """jb follows ja (q_b = −0.5 q_a + 0.2) and carries the spring (k 3, rest 0.1): ½·3·(−0.5 q_a + 0.1)²."""
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                 joint("ja", "base", "a", axis="0 1 0"),
                 joint("jb", "a", "b", axis="0 1 0", xyz="0.3 0 0",
                       dynamics='<dynamics spring_stiffness="3" spring_reference="0.1"/>',
                       extra='<mimic joint="ja" multiplier="-0.5" offset="0.2"/>'))
    model = Model.from_urdf(urdf, gravity=(0.0, 0.0, 0.0))
    assert model.joint_names == ("ja",)
    for m in backends(model):
        for qa in (-1.0, 0.0, 0.7):
            storages = m.energy_ports(np.array([qa]), np.zeros(1))["storages"]
            assert storages["spring/jb"] == pytest.approx(0.5 * 3.0 * (-0.5 * qa + 0.2 - 0.1) ** 2, rel=1e-12)


def test_a_swinging_spring_keeps_its_total_at_half_k_x0_squared():
    """No gravity, no damping, no command, at rest away from the springs' rest positions: kinetic energy and the
    spring storages trade, their sum stays ½k₁x₁² + ½k₂x₂² (the start's closed form) within the RK4 error."""
    for model in backends(three_joints()):
        q0 = np.array([1.0, 0.25, 0.4])
        e0 = sum(0.5 * k * (q0[i] - rest) ** 2 for i, (k, rest) in enumerate(SPRINGS.values()))
        _t, qs, vs = simulate(model, q0, np.zeros(3), np.zeros(3), dt=1e-3, steps=1000, method="rk4")
        totals = np.array([sum(model.energy_ports(q, v)["storages"].values()) for q, v in zip(qs, vs)])
        kinetic = np.array([model.kinetic_energy(q, v) for q, v in zip(qs, vs)])
        assert kinetic.max() > 0.2 * e0  # it swings: the storages do trade
        assert np.abs(totals - e0).max() < 1e-6 * e0, np.abs(totals - e0).max() / e0
