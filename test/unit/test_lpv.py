"""LPV families (mbs_ros/dynamics/algorithms/lpv.py): the stack over a payload-mass grid against the closed-form 2-link arm,
the joint-angle and current schedules held at zero acceleration, interpolation, python-control and MATLAB export.

Expected values are closed forms (the planar 2-link arm's M, g and gravity stiffness), the model's own forward
dynamics at the operating points (zero acceleration: a physical check, not the linearisation) and scipy.io.loadmat.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.io import loadmat

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms.lpv import (LPVFamily, current_schedule, holding_force, joint_angle_schedule,
                                  link_mass_schedule, lpv_family)

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
ARM = ROBOTS / "arm_2link_planar.urdf"
ROV = ROBOTS / "bluerov2_heavy.yaml"
G0 = 9.81
# arm_2link_planar.urdf: uniform rods, joints about z; link 1: m 2, com 0.25, izz 0.04177, length 0.5;
# link 2: m 1.5, com 0.2, izz 0.0203
M1, LC1, I1, L1 = 2.0, 0.25, 0.04177, 0.5
M2, LC2, I2 = 1.5, 0.2, 0.0203


def _arm_closed_form(q, p):
    """(M, g, ∂g/∂q) of the planar 2-link arm, gravity −y, link 2's mass and inertia times p (textbook, e.g.
    Spong–Hutchinson–Vidyasagar §7.4)."""
    m2, i2 = p * M2, p * I2
    c2 = np.cos(q[1])
    M = np.array([[I1 + M1 * LC1 ** 2 + i2 + m2 * (L1 ** 2 + LC2 ** 2 + 2 * L1 * LC2 * c2),
                   i2 + m2 * (LC2 ** 2 + L1 * LC2 * c2)],
                  [i2 + m2 * (LC2 ** 2 + L1 * LC2 * c2), i2 + m2 * LC2 ** 2]])
    s1, s12, c1, c12 = np.sin(q[0]), np.sin(q[0] + q[1]), np.cos(q[0]), np.cos(q[0] + q[1])
    g = np.array([G0 * (M1 * LC1 + m2 * L1) * c1 + m2 * G0 * LC2 * c12, m2 * G0 * LC2 * c12])
    K = np.array([[-G0 * (M1 * LC1 + m2 * L1) * s1 - m2 * G0 * LC2 * s12, -m2 * G0 * LC2 * s12],
                  [-m2 * G0 * LC2 * s12, -m2 * G0 * LC2 * s12]])
    return M, g, K


@pytest.fixture(scope="module")
def arm():
    return Model.from_urdf(str(ARM), base="fixed", gravity=(0.0, -G0, 0.0))


@pytest.fixture(scope="module")
def payload_family(arm):
    q = np.array([-1.2, 0.6])
    return q, lpv_family(link_mass_schedule(arm, "link2", q), [0.5, 1.0, 2.0, 4.0], name="payload",
                         inputs="efforts")


def test_payload_family_matches_the_closed_form_arm(payload_family):
    """At each payload scale p: τ₀ = g(q), A = [[0, I], [−M⁻¹ ∂g/∂q, 0]], B = [[0], [M⁻¹]]."""
    q, fam = payload_family
    assert fam.A.shape == (4, 4, 4) and fam.B.shape == (4, 4, 2) and fam.name == "payload"
    for k, p in enumerate(fam.grid):
        M, g, K = _arm_closed_form(q, p)
        Minv = np.linalg.inv(M)
        np.testing.assert_allclose(fam.tau0[k], g, rtol=1e-9, atol=1e-12)
        A = np.zeros((4, 4))
        A[:2, 2:] = np.eye(2)
        A[2:, :2] = -Minv @ K
        np.testing.assert_allclose(fam.A[k], A, rtol=1e-6, atol=1e-6 * np.abs(A).max())
        np.testing.assert_allclose(fam.B[k, 2:], Minv, rtol=1e-9)
        np.testing.assert_array_equal(fam.B[k, :2], 0.0)
        np.testing.assert_array_equal(fam.q0[k], q)


def test_interpolation_between_grid_points(payload_family, arm):
    q, fam = payload_family
    for k, p in enumerate(fam.grid):
        np.testing.assert_array_equal(fam.at(p).A, fam.A[k])
    mid = fam.at(3.0)  # half way between 2 and 4
    np.testing.assert_allclose(mid.A, 0.5 * (fam.A[2] + fam.A[3]))
    np.testing.assert_allclose(mid.B, 0.5 * (fam.B[2] + fam.B[3]))
    quarter = fam.at(0.625, model=arm)  # a quarter of the way from 0.5 to 1
    np.testing.assert_allclose(quarter.tau0, 0.75 * fam.tau0[0] + 0.25 * fam.tau0[1])
    for bad in (0.4, 4.1, np.nan):
        with pytest.raises(ValueError, match="outside the grid"):
            fam.at(bad)


def test_joint_angle_schedule_holds_each_pose(arm):
    grid = np.linspace(-2.0, -0.5, 4)
    fam = lpv_family(joint_angle_schedule(arm, "joint1", np.array([0.7, 0.4])), grid, name="joint1",
                     inputs="efforts")
    np.testing.assert_allclose(fam.q0[:, 0], grid)
    np.testing.assert_allclose(fam.q0[:, 1], 0.4)
    np.testing.assert_allclose(fam.at(-1.75, model=arm).q0, [-1.75, 0.4])  # a quarter of the way, on the group
    for k in range(grid.size):
        M, g, K = _arm_closed_form(fam.q0[k], 1.0)
        np.testing.assert_allclose(fam.tau0[k], g, rtol=1e-9)
        np.testing.assert_allclose(arm.forward_dynamics(fam.q0[k], np.zeros(2), fam.tau0[k]), 0.0, atol=1e-10)
        np.testing.assert_allclose(fam.A[k, 2:, :2], -np.linalg.solve(M, K), rtol=1e-6, atol=1e-6)


def test_current_schedule_holds_the_rov_in_each_current():
    """The holding force cancels gravity, buoyancy and the water's loads in each current (the model's own
    simulated acceleration is zero there); the mass matrix, hence B, does not depend on the current while the
    damping block of A does."""
    rov = Model.from_yaml(str(ROV))
    q = rov.configuration_from_pose([0.0, 0.0, -2.0], [0.0, 0.0, 0.0, 1.0])
    fam = lpv_family(current_schedule(rov, q, direction=(2.0, 0.0, 0.0)), [0.0, 0.5, 1.0], name="current",
                     inputs="thrusters")
    for k, c in enumerate(fam.grid):
        m = rov.with_current((c, 0.0, 0.0))
        a = m.forward_dynamics(q, np.zeros(6), fam.tau0[k] + m.passive_forces(q, np.zeros(6)))
        np.testing.assert_allclose(a, 0.0, atol=1e-9)
    assert abs(fam.tau0[2, 0]) > abs(fam.tau0[1, 0]) > 0.0  # more current, more drag to hold against
    np.testing.assert_allclose(fam.B[1], fam.B[0], rtol=1e-12)
    assert np.abs(fam.A[2, 6:, 6:] - fam.A[0, 6:, 6:]).max() > 1e-3
    with pytest.raises(ValueError, match="direction"):
        current_schedule(rov, q, direction=(0.0, 0.0, 0.0))


def test_holding_force_is_gravity_on_the_arm(arm):
    q = np.array([0.3, -0.7])
    np.testing.assert_allclose(holding_force(arm, q), _arm_closed_form(q, 1.0)[1], rtol=1e-10)


def test_to_control_list(payload_family):
    _q, fam = payload_family
    systems = fam.to_control()
    assert len(systems) == len(fam) == 4
    for k, s in enumerate(systems):
        np.testing.assert_array_equal(s.A, fam.A[k])
        np.testing.assert_array_equal(s.B, fam.B[k])
        assert s.input_labels == ["joint1", "joint2"]


def test_save_mat_round_trip(payload_family, tmp_path):
    """What a MATLAB user loads: A(:,:,k), B(:,:,k), the grid, the operating points, names as cell arrays."""
    _q, fam = payload_family
    path = tmp_path / "payload.mat"
    fam.save_mat(path)
    S = loadmat(path)
    assert S["A"].shape == (4, 4, 4) and S["B"].shape == (4, 2, 4)
    for k in range(4):
        np.testing.assert_array_equal(S["A"][:, :, k], fam.A[k])
        np.testing.assert_array_equal(S["B"][:, :, k], fam.B[k])
    np.testing.assert_array_equal(S["grid"], [[0.5, 1.0, 2.0, 4.0]])
    np.testing.assert_array_equal(S["tau0"][:, 3], fam.tau0[3])
    assert [str(x[0]) for x in S["input_names"].ravel()] == ["joint1", "joint2"]
    assert [str(x[0]) for x in S["state_names"].ravel()] == list(fam.state_names)
    assert str(S["parameter"][0]) == "payload" and S["dt"][0, 0] == 0.0
    back = LPVFamily.load_mat(path)
    np.testing.assert_array_equal(back.A, fam.A)
    np.testing.assert_array_equal(back.B, fam.B)
    np.testing.assert_array_equal(back.q0, fam.q0)
    assert back.state_names == fam.state_names and back.input_names == fam.input_names
    assert back.name == "payload" and back.dt is None


def test_discrete_family_keeps_its_step(arm):
    fam = lpv_family(joint_angle_schedule(arm, "joint2", np.array([-1.2, 0.0])), [0.0, 0.5], name="joint2",
                     inputs="efforts", dt=0.01)
    assert fam.dt == 0.01 and fam.to_control()[0].dt == 0.01


@pytest.mark.parametrize("grid,match", [([], "non-empty"), ([1.0, 1.0], "strictly increasing"),
                                        ([0.0, np.inf], "finite"), ([[1.0, 2.0]], "1-D")])
def test_bad_grids_are_refused(arm, grid, match):
    with pytest.raises(ValueError, match=match):
        lpv_family(joint_angle_schedule(arm, "joint1", np.zeros(2)), grid)


def test_bad_schedules_are_refused(arm):
    with pytest.raises(ValueError, match="joint 'elbow'"):
        joint_angle_schedule(arm, "elbow", np.zeros(2))
    with pytest.raises(ValueError, match="link 'gripper'"):
        link_mass_schedule(arm, "gripper", np.zeros(2))
    with pytest.raises(ValueError, match="mass scale of link2 must be > 0"):
        lpv_family(link_mass_schedule(arm, "link2", np.zeros(2)), [-1.0, 1.0])
    with pytest.raises(ValueError, match="build must be"):
        lpv_family(None, [1.0])
