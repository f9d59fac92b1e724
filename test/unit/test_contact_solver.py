"""The exact Coulomb contact solver against closed forms, the law's own conditions and Pinocchio's ADMM solver
(``pin.ADMMConstraintSolver`` with ``solve_ncp``, a test-only reference) on the same problems."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.dynamics.contact import local_contact, residual, solve

pin = pytest.importorskip("pinocchio")


def _pin_solve(G, g, mu, nc):
    """Pinocchio's exact (NCP) ADMM on our G, g to 1e-14 (tools/contact_solver_timing.py)."""
    from tools.contact_solver_timing import pin_solve

    return pin_solve(G, g, mu, nc, tol=1e-14, max_iterations=100000)


def _random_problem(rng, nc, nv):
    J = rng.normal(size=(3 * nc, nv))
    A = rng.normal(size=(nv, nv))
    M = A @ A.T + nv * np.eye(nv)
    return J @ np.linalg.solve(M, J.T), rng.normal(size=3 * nc), rng.uniform(0.1, 1.2, nc)


@pytest.mark.parametrize("b,expected", [
    ((0.5, 3.0, -1.0), "open"),  # moving apart: no impulse whatever the tangential velocity
    ((-1.0, 0.1, 0.0), "stick"),  # m = 2: λ = (2, -0.2, 0) inside the cone μ = 0.5
    ((-1.0, 2.0, 1.0), "slide"),
])
def test_one_contact_of_a_point_mass_closed_form(b, expected):
    m, mu = 2.0, 0.5
    W = np.eye(3) / m  # a point mass: c = λ/m + b
    b = np.array(b)
    out = np.empty(3)
    code = local_contact(W, b, mu, out)
    if expected == "open":
        assert code == 0 and np.all(out == 0.0)
    elif expected == "stick":  # c = 0: λ = -m b
        assert code == 1
        np.testing.assert_allclose(out, -m * b, rtol=0, atol=1e-15 * m)
    else:  # c_n = 0: λ_n = -m b_n; λ_t on the cone, against the tangential velocity, which keeps b_t's direction
        assert code == 2
        ln = -m * b[0]
        assert out[0] == pytest.approx(ln, rel=1e-15)
        np.testing.assert_allclose(out[1:], -mu * ln * b[1:] / np.linalg.norm(b[1:]), rtol=0, atol=1e-14 * ln)


@pytest.mark.parametrize("seed", range(8))
def test_random_problems_agree_with_pinocchios_exact_admm(seed):
    rng = np.random.default_rng(seed)
    nc = int(rng.integers(1, 6))
    G, g, mu = _random_problem(rng, nc, nv=max(6, 3 * nc + 2))
    ours = solve(G, g, mu, nc)
    assert ours.converged, ours
    ok, lam = _pin_solve(G, g, mu, nc)
    assert ok
    # G is positive definite here: the NCP's solution is unique to the conditioning; G's condition number times
    # the rounding of |λ|
    scale = np.abs(lam).max() + np.abs(g).max() / np.linalg.eigvalsh(G)[0]
    np.testing.assert_allclose(ours.lam, lam, rtol=0, atol=1e-10 * scale)


def test_the_solution_obeys_coulombs_law_row_by_row():
    rng = np.random.default_rng(11)
    nc = 5
    G, g, mu = _random_problem(rng, nc, nv=20)
    r = solve(G, g, mu, nc)
    lam, c = r.lam, G @ r.lam + g
    tol = 1e-10 * (np.abs(g).max() + np.abs(lam).max() * np.abs(G).max())
    kinds = set()
    for i in range(nc):
        ln, lt, cn, ct = lam[3 * i], lam[3 * i + 1:3 * i + 3], c[3 * i], c[3 * i + 1:3 * i + 3]
        assert ln >= 0 and np.linalg.norm(lt) <= mu[i] * ln + tol and cn >= -tol and abs(ln * cn) <= tol
        if ln == 0:
            kinds.add("open")
        elif np.linalg.norm(ct) <= tol:
            kinds.add("stick")
        else:  # sliding: on the cone's edge, against the tangential velocity (maximal dissipation)
            kinds.add("slide")
            assert np.linalg.norm(lt) == pytest.approx(mu[i] * ln, rel=1e-9)
            np.testing.assert_allclose(lt / np.linalg.norm(lt), -ct / np.linalg.norm(ct), atol=1e-8)
    assert len(kinds) >= 2, kinds  # the seed gives more than one regime


def test_unilateral_rows_are_a_complementarity_problem():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(6, 6))
    G = A @ A.T + np.eye(6)
    g = rng.normal(size=6)
    r = solve(G, g, np.zeros(0), 0)
    c = G @ r.lam + g
    assert r.converged and np.all(r.lam >= 0) and np.all(c >= -1e-12) and np.all(np.abs(r.lam * c) <= 1e-12)
    assert 0 < np.count_nonzero(r.lam) < 6


def test_redundant_contacts_of_a_resting_box_give_the_same_velocities_as_pinocchio():
    """A box's four corners on a plane: 12 rows, 6 velocities, G singular, the impulses not unique; the
    velocities they give are. The Gauss–Seidel → ADMM → Gauss–Seidel chain converges to the law's residual."""
    m, s, h, mu = 1.0, 0.2, 2e-3, 0.6
    I = m * s * s / 6.0
    Minv = np.diag([1 / m] * 3 + [1 / I] * 3)
    corners = [np.array([x, y, -s / 2]) for x in (-s / 2, s / 2) for y in (-s / 2, s / 2)]
    rows = []
    for p in corners:  # rows n = z, t1 = x, t2 = y of the corner's velocity v + ω × p
        for e in (np.array([0, 0, 1.0]), np.array([1.0, 0, 0]), np.array([0, 1.0, 0])):
            rows.append(np.concatenate([e, np.cross(p, e)]))
    J = np.array(rows)
    G = J @ Minv @ J.T
    v_free = np.array([0.3, -0.1, -9.81 * h, 0.5, 0.2, 0.1])
    g = J @ v_free
    mu_all = np.full(4, mu)
    ours = solve(G, g, mu_all, 4)
    assert ours.converged and residual(G, g, mu_all, 4, ours.lam) <= 1e-9 * np.abs(g).max()
    ok, lam = _pin_solve(G, g, mu_all, 4)
    assert ok
    np.testing.assert_allclose(Minv @ J.T @ ours.lam, Minv @ J.T @ lam, rtol=0, atol=1e-9 * np.abs(v_free).max())


def test_a_non_finite_impulse_has_an_infinite_residual():
    G, g = np.eye(3), np.array([-1.0, 0.0, 0.0])
    assert residual(G, g, np.array([0.5]), 1, np.array([math.nan, 0.0, 0.0])) == math.inf


@pytest.mark.parametrize("args,message", [
    ((np.eye(3), np.zeros(3), [-0.1], 1), "non-negative"),
    ((np.eye(3), np.zeros(3), [math.nan], 1), "non-negative"),
    ((np.eye(3), np.zeros(3), [0.1, 0.2], 1), "one value per contact"),
    ((np.diag([1.0, -1.0, 1.0]), np.zeros(3), [0.5], 1), "positive semi-definite"),
    ((np.eye(3), np.zeros(4), [0.5], 1), "must be 4x4"),
])
def test_bad_problems_are_refused_with_the_reason(args, message):
    with pytest.raises(ValueError, match=message):
        solve(*args)


def test_rows_no_body_can_move_along_take_no_impulse_and_leave_the_others_exact():
    """A contact no body can move along (its rows of J zero: G's rows and columns zero), beside a sticking and a
    sliding contact of unit Delassus blocks: the inert one takes 0, the others their closed forms (sticking
    λ = −g; sliding λ_n = −g_n, λ_t = μ λ_n against the tangential velocity). Before, the solve refused the
    problem ("needs a positive diagonal") and the contact step failed (a single-joint arm touching along its link)."""
    G = np.zeros((9, 9))
    G[3:, 3:] = np.eye(6)
    g = np.array([-1.0, 0.3, 0.0, -2.0, 0.1, -0.2, -1.0, 3.0, -4.0])
    res = solve(G, g, np.array([0.5, 0.5, 0.2]), 3)
    np.testing.assert_array_equal(res.lam[:3], 0.0)
    np.testing.assert_allclose(res.lam[3:6], [2.0, -0.1, 0.2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.lam[6:], [1.0, -0.2 * 3.0 / 5.0, 0.2 * 4.0 / 5.0], rtol=0, atol=1e-12)
    assert res.converged
    # only the normal row inert: the whole contact is (its normal force is the bearings', not the contact's)
    G2 = np.diag([0.0, 1.0, 1.0])
    np.testing.assert_array_equal(solve(G2, np.array([-1.0, -1.0, 0.5]), np.array([0.5]), 1).lam, 0.0)
    # a tangential row alone inert: the contact still holds along its normal
    G3 = np.diag([1.0, 0.0, 1.0])
    np.testing.assert_allclose(solve(G3, np.array([-1.0, 0.0, 0.0]), np.array([0.5]), 1).lam, [1.0, 0.0, 0.0],
                               rtol=0, atol=1e-12)


def test_a_world_that_starts_interpenetrating_is_refused_naming_the_pair_and_the_depth():
    from mbs_ros.dynamics.contact.geometry import box, check_separated, halfspace, sphere

    shapes = [halfspace("seabed", (0, 0, 1), 0.0), box("crate", (0.2, 0.2, 0.2), (0, 0)),
              sphere("ball", 0.1, (1, 0))]
    crate, ball = np.eye(4), np.eye(4)
    crate[:3, 3] = (0.0, 0.0, 0.097)  # 3 mm into the seabed
    ball[:3, 3] = (2.0, 0.0, 0.1)  # resting on it, touching
    with pytest.raises(ValueError, match=r"crate/seabed by 3 mm") as err:
        check_separated([crate[None], ball[None]], shapes)
    assert "ball" not in str(err.value)
    crate[2, 3] = 0.1
    check_separated([crate[None], ball[None]], shapes)  # touching is not interpenetrating
