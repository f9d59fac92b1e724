"""The contact solver on redundant patches (a body on three points a few mm apart, as Solo12's feet), where
Gauss–Seidel stalls and the Anderson-accelerated ADMM takes over: closed forms of the body's velocity, the law's
conditions read from c = Gλ + g, and Pinocchio's exact ADMM (a test-only reference)."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.dynamics.contact import residual, solve
from mbs_ros.dynamics.contact import admm as A
from mbs_ros.dynamics.contact import solver as S

H, GRAVITY, MASS, RADIUS, MU = 1e-3, 9.81, 1.0, 0.005, 0.8


def _puck(inertia, v_free, mu=MU):
    """A puck (mass MASS, inertia ``inertia`` about every axis through its centre) standing on three points on a
    circle of RADIUS 2 cm below its centre: 3 contacts, 9 rows, G of rank 6 whose rotation modes are
    RADIUS²/inertia against 3/MASS for translation. Returns G, g, μ, J, M⁻¹."""
    Minv = np.diag([1.0 / MASS] * 3 + [1.0 / inertia] * 3)
    rows = []
    for k in range(3):
        t = 2.0 * np.pi * k / 3.0
        p = np.array([RADIUS * np.cos(t), RADIUS * np.sin(t), -0.02])
        for e in np.eye(3)[[2, 0, 1]]:  # normal z, tangents x, y
            rows.append(np.concatenate([e, np.cross(p, e)]))
    J = np.array(rows)
    return J @ Minv @ J.T, J @ v_free, np.full(3, mu), J, Minv


def _check_law(G, g, mu, lam, tol):
    """Coulomb's law from c = Gλ + g directly, each condition within ``tol`` (velocity units) or its image in
    impulse units: λ_n ≥ 0, c_n ≥ 0, λ_n c_n = 0, ‖λ_t‖ ≤ μ λ_n, and a sliding contact's λ_t against c_t."""
    c = G @ lam + g
    scale = np.abs(lam).max()
    for i in range(len(mu)):
        ln, lt, cn, ct = lam[3 * i], lam[3 * i + 1:3 * i + 3], c[3 * i], c[3 * i + 1:3 * i + 3]
        assert ln >= 0.0 and cn >= -tol and abs(ln * cn) <= tol * scale
        assert np.linalg.norm(lt) <= mu[i] * ln * (1 + 1e-9) + 1e-12 * scale
        if np.linalg.norm(ct) > 10 * tol:  # sliding: on the cone's edge, opposite to the tangential velocity
            assert np.linalg.norm(lt) == pytest.approx(mu[i] * ln, rel=1e-6)
            assert lt @ ct <= -0.999 * np.linalg.norm(lt) * np.linalg.norm(ct)


@pytest.mark.parametrize("spin", [0.001, 0.02])
def test_a_heavy_puck_on_three_close_points_spins_down_by_the_closed_form(spin):
    """Spinning about its axis, the puck's patch brakes it with the torque μ (m g h) r at most (each point's
    friction μ λ_n tangent to the circle, the normal impulses m g h in all): below that it stops (v⁺ = 0), above
    it ω_z loses μ m g h r / I and nothing else moves. Gauss–Seidel alone stalls far above the tolerance here
    (the rotation modes are 1e-3 of the translation ones): the accelerated ADMM finishes."""
    inertia = 0.01
    v = np.array([0.0, 0.0, -GRAVITY * H, 0.0, 0.0, spin])
    G, g, mu, J, Minv = _puck(inertia, v)
    tol = S.RESIDUAL_TOLERANCE * np.abs(g).max()
    stalled = np.zeros(9)
    assert S._gauss_seidel(G, g, mu, 3, stalled, 100, 1e-12, -1.0)[2] > 10 * tol  # falls past Gauss–Seidel
    r = solve(G, g, mu, 3, max_sweeps=100, admm_iterations=8000, fallback_sweeps=0)
    assert r.converged and r.residual <= tol
    assert r.sweeps <= 100 + 8000 // 8  # the accelerated ADMM finished within its budget: no adaptive ADMM
    v_plus = v + Minv @ J.T @ r.lam
    brake = MU * MASS * GRAVITY * H * RADIUS / inertia
    expected = np.zeros(6)
    expected[5] = max(spin - brake, 0.0)
    # the tolerance on c (1e-6 of max|g|, about 1e-8 m/s) allows 1e-8 / RADIUS rad/s on the rotations
    np.testing.assert_allclose(v_plus, expected, rtol=0, atol=10 * tol / RADIUS)
    assert abs(np.sum(r.lam[0::3]) - MASS * GRAVITY * H) <= 1e-6 * MASS * GRAVITY * H
    _check_law(G, g, mu, r.lam, tol)


@pytest.mark.parametrize("inertia,v", [
    (0.01, (0.002, -0.001, -GRAVITY * H, 0.02, 0.01, 0.03)),  # tipping and spinning: some points slide
    (0.01, (0.001, 0.0, -GRAVITY * H, 0.01, -0.005, 0.0)),
    (0.001, (0.002, -0.001, -GRAVITY * H, 0.02, 0.01, 0.03)),
])
def test_the_accelerated_admm_finishes_where_gauss_seidel_stalls(inertia, v):
    """From Gauss–Seidel's stalled iterate the Anderson-accelerated ADMM alone reaches the residual tolerance;
    the impulses it writes are those whose residual it reports, and they keep the law read from c directly."""
    G, g, mu, J, Minv = _puck(inertia, np.array(v))
    tol = S.RESIDUAL_TOLERANCE * np.abs(g).max()
    lam = np.zeros(9)
    assert S._gauss_seidel(G, g, mu, 3, lam, 100, 1e-12, -1.0)[2] > tol
    maps, res = A._anderson_admm(G, g, mu, 3, lam, 1000, tol, A.ANDERSON_MEMORY, A.ANDERSON_RHO)
    assert 0 < maps < 1000 and res <= tol
    assert residual(G, g, mu, 3, lam) == res
    _check_law(G, g, mu, lam, tol)


def test_the_puck_s_velocities_from_the_accelerated_admm_are_pinocchios():
    """G singular (9 rows, rank 6): the impulses are not unique, the velocities they give are. From the stalled
    Gauss–Seidel iterate the accelerated ADMM gives Pinocchio's exact ADMM's velocities (to 1e-14) to the
    tolerance's image in velocity, and the impulses it writes are those whose residual it reports."""
    from tools.contact_solver_timing import pin_solve

    pytest.importorskip("pinocchio")
    v = np.array([0.002, -0.001, -GRAVITY * H, 0.02, 0.01, 0.03])
    G, g, mu, J, Minv = _puck(0.01, v)
    tol = S.RESIDUAL_TOLERANCE * np.abs(g).max()
    lam = np.zeros(9)
    S._gauss_seidel(G, g, mu, 3, lam, 100, 1e-12, -1.0)
    maps, res = A._anderson_admm(G, g, mu, 3, lam, 1000, tol, A.ANDERSON_MEMORY, A.ANDERSON_RHO)
    assert res <= tol and residual(G, g, mu, 3, lam) == res
    ok, reference = pin_solve(G, g, mu, 3, tol=1e-14, max_iterations=100000)
    assert ok
    # c within tol (about 1e-8 m/s) at points RADIUS from the axis: rotations to tol / RADIUS
    np.testing.assert_allclose(Minv @ J.T @ lam, Minv @ J.T @ reference, rtol=0, atol=10 * tol / RADIUS)


def test_the_largest_eigenvalue_estimate_is_numpys_from_below():
    """The power iteration that sets both ADMMs' ρ: within 2 % of numpy's eigvalsh, from below, on positive
    semi-definite matrices of full and of half rank (the Delassus matrices of redundant contacts)."""
    rng = np.random.default_rng(3)
    for rank in (36, 18, 6):
        B = rng.normal(size=(36, rank)) * np.geomspace(1.0, 1e-4, rank)
        G = B @ B.T
        exact = np.linalg.eigvalsh(G)[-1]
        est = A._largest_eigenvalue(G, 20)
        assert 0.98 * exact <= est <= exact * (1 + 1e-12)
    assert A._largest_eigenvalue(np.zeros((3, 3)), 20) == 0.0


def test_the_warm_up_compiles_both_admms_for_the_types_solve_calls_them_with():
    """After the solver's warm_up, a solve that goes through Gauss–Seidel, the accelerated ADMM and the adaptive
    one adds no compiled signature (one would compile inside a contact step: seconds in a callback)."""
    from mbs_ros.dynamics.kernels.jit import AVAILABLE

    if not AVAILABLE:
        pytest.skip("numba is not in use: nothing is compiled")
    S.warm_up()
    # the kernels solve calls from Python (those they call are compiled into them)
    compiled = (S._gauss_seidel, S._gauss_seidel_more, S._sweeps, A._anderson_begin, A._anderson_more,
                A._largest_eigenvalue, A._admm_loop)
    before = [len(k.signatures) for k in compiled]
    assert all(before)
    v = np.array([0.0, 0.0, -GRAVITY * H, 0.0, 0.0, 0.02])
    G, g, mu, _, _ = _puck(0.01, v)
    r = solve(G, g, mu, 3, max_sweeps=100, admm_iterations=800)  # 100 accelerated maps: the adaptive ADMM too
    assert r.converged and r.sweeps > 200
    # and in slices, as a node's contact step runs it (a checkpoint between the compiled calls)
    r = solve(G, g, mu, 3, max_sweeps=100, admm_iterations=800, checkpoint=lambda: None)
    assert r.converged and r.sweeps > 200
    assert [len(k.signatures) for k in compiled] == before


@pytest.mark.parametrize("v, admm_iterations, fallback", [
    ((0.002, -0.001, -GRAVITY * H, 0.02, 0.01, 0.03), 8000, 0),  # the accelerated ADMM finishes
    ((0.0, 0.0, -GRAVITY * H, 0.0, 0.0, 0.02), 800, 0),  # the adaptive ADMM finishes
    ((0.0, 0.0, -GRAVITY * H, 0.0, 0.0, 0.02), 40, 300),  # both budgets spent: the fallback sweeps
])
def test_a_solve_in_slices_stops_at_its_checkpoints_and_ends_with_the_same_impulses(v, admm_iterations, fallback):
    """With a ``checkpoint`` every stage runs in compiled slices of SLICE iterations and calls it in between (a
    node suspends the contact step there): the state each stage keeps between slices (the sweeps' count and the
    stall test; the accelerated ADMM's history, its Gram matrix and its best iterate; the adaptive ADMM's ρ and
    proximal inverse) makes the impulses, the iterations and the residual those of the solve in one call, bit for
    bit, and Coulomb's law holds."""
    G, g, mu, _, _ = _puck(0.01, np.array(v))
    whole = solve(G, g, mu, 3, max_sweeps=100, admm_iterations=admm_iterations, fallback_sweeps=fallback)
    calls = []
    sliced = solve(G, g, mu, 3, max_sweeps=100, admm_iterations=admm_iterations, fallback_sweeps=fallback,
                   checkpoint=lambda: calls.append(1))
    assert whole.sweeps > 2 * A.SLICE  # long enough to be sliced at all
    assert len(calls) >= whole.sweeps // A.SLICE - 4  # a checkpoint after (nearly) every slice of every stage
    assert np.array_equal(sliced.lam, whole.lam)
    assert (sliced.sweeps, sliced.residual, sliced.converged) == (whole.sweeps, whole.residual, whole.converged)
    if whole.converged:
        _check_law(G, g, mu, sliced.lam, 1e-6 * np.abs(g).max())
