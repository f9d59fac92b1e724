"""Thrust allocation (mbs_ros/controllers/allocation.py): exact where the limits allow, saturated otherwise, against
the least-squares optimum computed independently (scipy's bounded least squares)."""
import numpy as np
import pytest
from scipy.optimize import lsq_linear, minimize

from mbs_ros.controllers.allocation import ThrusterAllocation, for_model
from mbs_ros.dynamics import Model


@pytest.fixture(scope="module")
def rov():
    return Model.from_yaml("config/robots/bluerov2_heavy.yaml")


def test_unsaturated_allocation_is_the_minimum_norm_solution(rov):
    B = rov.thruster_matrix
    lo, hi = rov.thrust_limits
    alloc = ThrusterAllocation(B, lo, hi)
    rng = np.random.default_rng(0)
    for _ in range(20):
        W = rng.normal(size=6) * np.array([10, 10, 10, 1, 1, 1])
        out = alloc(W)
        assert not out.saturated
        np.testing.assert_allclose(out.achieved, W, atol=1e-9)
        # minimum Σ T² subject to B T = W, by an independent solver
        ref = minimize(lambda T: T @ T, np.zeros(B.shape[1]), jac=lambda T: 2 * T,
                       constraints={"type": "eq", "fun": lambda T: B @ T - W, "jac": lambda T: B},
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        np.testing.assert_allclose(out.thrust, ref.x, atol=1e-5)


def test_saturated_allocation_stays_within_limits_and_redistributes(rov):
    B = rov.thruster_matrix
    lo, hi = rov.thrust_limits
    alloc = ThrusterAllocation(B, lo, hi)
    W = np.array([150.0, 0.0, 0.0, 0.0, 0.0, 8.0])  # more surge than four vectored T200s give, and yaw
    out = alloc(W)
    assert out.saturated
    assert np.all(out.thrust <= hi + 1e-12) and np.all(out.thrust >= lo - 1e-12)
    # what is given: at least what plain clipping of the unconstrained solution gives, and near the bounded
    # least-squares optimum
    plain = np.clip(np.linalg.pinv(B) @ W, lo, hi)
    assert np.linalg.norm(out.residual) <= np.linalg.norm(W - B @ plain) + 1e-9
    best = lsq_linear(B, W, bounds=(lo, hi))
    assert np.linalg.norm(out.residual) <= 1.5 * np.linalg.norm(W - B @ best.x) + 1e-6


def test_underactuated_vessel_gets_surge_and_yaw_and_no_sway():
    vessel = Model.from_yaml("config/robots/vessel_3dof.yaml")
    rows = np.flatnonzero(np.abs(vessel.velocity_map(vessel.neutral())).sum(axis=1) > 0.5)
    lo, hi = vessel.thrust_limits
    alloc = ThrusterAllocation(vessel.thruster_matrix, lo, hi, rows=rows)
    assert list(rows) == [0, 1, 5] and alloc.missing_directions == 1
    out = alloc(np.array([40.0, 25.0, 0, 0, 0, 6.0]))
    np.testing.assert_allclose(out.achieved[[0, 5]], [40.0, 6.0], atol=1e-9)  # two propellers: surge and yaw
    assert out.residual[1] == pytest.approx(25.0)  # sway they cannot give
    assert not out.saturated


def test_bad_allocation_input_is_refused():
    with pytest.raises(ValueError, match="6 x n"):
        ThrusterAllocation(np.zeros((3, 2)), -1, 1)
    with pytest.raises(ValueError, match="lower"):
        ThrusterAllocation(np.eye(6), 1, -1)
    with pytest.raises(ValueError, match="weights"):
        ThrusterAllocation(np.eye(6), -1, 1, weights=[1, 1, 1, 1, 1, 0])


def test_allocation_for_a_model_allocates_the_wrench_components_its_base_has():
    vessel = Model.from_yaml("config/robots/vessel_3dof.yaml")
    alloc = for_model(vessel)
    assert list(alloc.rows) == [0, 1, 5] and alloc.missing_directions == 1  # se2: surge, sway, yaw
    rov = Model.from_yaml("config/robots/bluerov2_heavy.yaml")
    assert list(for_model(rov).rows) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match=r"thruster_weights must have one entry per thruster \(8: .*got 2"):
        for_model(rov, (1.0, 2.0))
    with pytest.raises(ValueError, match="allocate_thrusters: thruster weights must be finite and positive"):
        for_model(rov, (1.0,) * 7 + (0.0,))
    weighted = for_model(rov, (1.0,) * 7 + (4.0,))
    np.testing.assert_allclose(weighted.w_inv, [1.0] * 7 + [0.25])
