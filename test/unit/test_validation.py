"""The paper-reproduction studies (``python -m mbs_ros.validation``) and the constrained-system library under them.

Every number is checked against something independent of the code under test: closed forms, Pinocchio's ABA/RNEA,
scipy's DOP853 on other coordinates (Euler's equations about a pivot, Euler-angle Lagrange, Kirchhoff, spatial
Newton–Euler). Horizons are short to keep the module fast; the CLI defaults run longer.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import null_space

from mbs_ros.dynamics import TABLEAUS
from mbs_ros.dynamics.algorithms.constraints import Body, ConstrainedSystem, revolute, spherical
from mbs_ros.validation import constrained as con

HAS_PIN = True
try:
    import pinocchio  # noqa: F401
except ImportError:  # pragma: no cover
    HAS_PIN = False
needs_pin = pytest.mark.skipif(not HAS_PIN, reason="Pinocchio (pin, test-only dependency) is not installed")


# ------------------------------------------------------------------------------------- constrained-system library
def _mixed_system():
    """Two bodies, one on each space, c.o.m. off the frame origin, a revolute joint to the ground and a revolute
    and a spherical joint between them (over-constrained on purpose: only the Jacobians are tested here)."""
    bodies = [Body("a", 2.0, np.diag([0.1, 0.2, 0.3]), com=(0.05, -0.02, 0.1), space="se3"),
              Body("b", 1.5, np.diag([0.2, 0.1, 0.25]), com=(0.0, 0.03, -0.05), space="so3xr3")]
    joints = [revolute("hinge", 0, (0.1, 0.2, -0.3), (0.3, -0.5, 0.8), None, (0.4, -0.1, 0.2), (0.0, 0.6, 0.8)),
              revolute("elbow", 0, (-0.2, 0.1, 0.0), (1.0, 0.0, 0.0), 1, (0.3, 0.0, 0.1), (0.0, 0.0, 1.0)),
              spherical("ball", 1, (0.1, -0.2, 0.3), 0, (0.0, 0.1, 0.2))]
    return ConstrainedSystem(bodies, joints, gravity=(0.0, 0.0, -9.81))


def test_constraint_jacobian_and_bias_match_finite_differences():
    """ġ = J v and J̇ v = −η along q(t) = q·exp(t v) (constant velocity coordinates on both groups), for spherical
    and revolute joints, ground and body-to-body, at configurations that violate the constraints."""
    system = _mixed_system()
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = np.concatenate([m.group.random(rng) for m in system.models])
        v = rng.normal(size=system.nv)
        J, eta = system.jacobian(q, v)
        h = 1e-6
        g_dot = (system.constraint(system.integrate(q, v, h)) - system.constraint(system.integrate(q, v, -h))) / (2 * h)
        np.testing.assert_allclose(J @ v, g_dot, atol=1e-8)
        Jv_dot = (system.jacobian(system.integrate(q, v, h)) @ v
                  - system.jacobian(system.integrate(q, v, -h)) @ v) / (2 * h)
        np.testing.assert_allclose(-eta, Jv_dot, atol=1e-7)


def test_kkt_solution_is_gauss_principle():
    """The KKT acceleration minimises ½(a − a_free)ᵀM(a − a_free) on J a = η (seed 003's Gauss principle), solved
    here independently in the null space of J."""
    bodies = [Body("a", 2.0, np.diag([0.1, 0.2, 0.3]), com=(0.05, -0.02, 0.1), space="se3"),
              Body("b", 1.5, np.diag([0.2, 0.1, 0.25]), space="so3xr3")]
    system = ConstrainedSystem(bodies, [spherical("s", 0, (0.1, 0.2, -0.3)),
                                        revolute("r", 0, (-0.2, 0.1, 0.0), (1, 0, 0), 1, (0.3, 0, 0.1), (0, 0, 1))])
    rng = np.random.default_rng(5)
    q = np.concatenate([m.group.random(rng) for m in system.models])
    v, tau = rng.normal(size=12), rng.normal(size=12)
    a, lam = system.kkt(q, v, tau)
    M = system.mass_matrix(q)
    a_free = np.linalg.solve(M, tau - system.nonlinear_effects(q, v))
    J, eta = system.jacobian(q, v)
    N = null_space(J)
    a_p = np.linalg.lstsq(J, eta, rcond=None)[0]
    z = np.linalg.solve(N.T @ M @ N, N.T @ M @ (a_free - a_p))
    np.testing.assert_allclose(a, a_p + N @ z, atol=1e-10)
    np.testing.assert_allclose(J @ a, eta, atol=1e-10)
    np.testing.assert_allclose(M @ a + J.T @ lam, tau - system.nonlinear_effects(q, v), atol=1e-10)


def test_project_velocity_keeps_chosen_components():
    bodies = [Body("a", 2.0, np.diag([0.1, 0.2, 0.3]), com=(0.05, -0.02, 0.1), space="se3"),
              Body("b", 1.5, np.diag([0.2, 0.1, 0.25]), space="so3xr3")]
    system = ConstrainedSystem(bodies, [revolute("hinge", 0, (0.1, 0.2, -0.3), (0.3, -0.5, 0.8)),
                                        spherical("ball", 1, (0.1, -0.2, 0.3), 0, (0.0, 0.1, 0.2))])
    q = system.neutral()
    q[7:10] = (-0.1, 0.4, -0.6)
    q = system.configuration([(np.zeros(3), np.eye(3)), (system.poses(q)[1][1] + (0.2, 0.6, -0.1), np.eye(3))])
    q = system.project_configuration(system.integrate(q, np.r_[0, 0, 0, 0.3, -0.5, 0.8, np.zeros(6)]))
    assert np.abs(system.constraint(q)).max() < 1e-13  # Gauss–Newton onto g = 0
    v = np.arange(1.0, 13.0)
    keep = np.zeros(12, dtype=bool)
    keep[[5, 9, 10]] = True  # body a's ω_z (about the hinge axis, given the others) and two of body b's
    w = system.project_velocity(q, v, keep=keep)
    np.testing.assert_allclose(system.jacobian(q) @ w, 0.0, atol=1e-10)
    np.testing.assert_array_equal(w[keep], v[keep])
    w_all = system.project_velocity(q, v)  # unconstrained choice: the kinetic-energy-closest consistent velocity
    M = system.mass_matrix(q)
    N = null_space(system.jacobian(q))
    np.testing.assert_allclose(w_all, N @ np.linalg.solve(N.T @ M @ N, N.T @ M @ v), atol=1e-10)


@pytest.mark.slow
def test_revolute_pendulum_matches_its_ode_and_stays_on_the_hinge_on_se3():
    """A body hinged about world z at its end, gravity along −y: J_p φ̈ = −m g l cos φ (DOP853, 1e-12).
    On SE(3) both the hinge point and the axis stay at round-off (a lower pair to the ground)."""
    m, l, Jc = 1.3, 0.4, np.diag([0.02, 0.05, 0.06])
    Jp = Jc[2, 2] + m * l * l
    for space in ("se3", "so3xr3"):
        system = ConstrainedSystem([Body("p", m, Jc, space=space)],
                                   [revolute("hinge", 0, (-l, 0, 0), (0, 0, 1), None, (0, 0, 0), (0, 0, 1))],
                                   gravity=(0.0, -9.81, 0.0))
        q0 = system.configuration([((l, 0.0, 0.0), np.eye(3))])
        keep = np.arange(6) == 5  # ω_z given; the hinge removes ω_x, ω_y and fixes v
        v0 = system.project_velocity(q0, system.velocity_from_twists(q0, [np.r_[0, 0, 0, 0.7, -0.4, 2.0]]), keep)
        np.testing.assert_allclose(v0[3:], [0.0, 0.0, 2.0], atol=1e-12)  # the hinge removes ω_x, ω_y
        t, q, v = system.simulate(q0, v0, None, 1e-3, 1000)
        sol = solve_ivp(lambda s, x: [x[1], -m * 9.81 * l * np.cos(x[0]) / Jp], (0, 1), [0.0, 2.0],
                        method="DOP853", rtol=1e-12, atol=1e-12, t_eval=t[::50])
        R = np.array([system.poses(x)[0][0] for x in q[::50]])
        c, s_ = np.cos(sol.y[0]), np.sin(sol.y[0])
        R_ref = np.array([[[ck, -sk, 0], [sk, ck, 0], [0, 0, 1]] for ck, sk in zip(c, s_)])
        assert np.abs(R - R_ref).max() < 1e-8
        viol = max(system.violations(x)[0] for x in q)
        ang = max(system.angle_violations(x)[0] for x in q)
        if space == "se3":
            assert viol < 1e-12 and ang < 1e-12, (viol, ang)
        else:
            assert viol > 1e-12, viol  # the product group drifts (the axis stays: rotations are exact on SO(3))


@pytest.mark.slow
def test_stabilization_flags():
    """Off by default; on SO(3)×R³ over 2 s projection holds the pivot to its tolerance, Baumgarte (α = β = 10/s)
    keeps the drift bounded where it grows without."""
    viol = {}
    for stab in (None, "baumgarte", "projection"):
        system, q0, v0 = con.build("heavy-top", ("so3xr3",), stabilization=stab)
        _, q, v = system.simulate(q0, v0, None, 2e-3, 1000, "rk4")
        viol[stab] = max(system.violations(x)[0] for x in q)
        if stab == "projection":
            J = system.jacobian(q[-1])
            assert np.abs(J @ v[-1]).max() < 1e-9
    assert viol[None] > 1e-5
    assert viol["projection"] < 1e-12
    assert viol["baumgarte"] < viol[None] / 10
    with pytest.raises(ValueError, match="unknown stabilization"):
        con.build("heavy-top", ("se3",), stabilization="magic")


def test_simulate_reports_divergence():
    system, q0, v0 = con.build("heavy-top", ("so3xr3",))
    with pytest.raises(FloatingPointError, match="diverged"):
        system.simulate(q0, v0, None, 2e-2, 400, "euler")
    t, q, _ = system.simulate(q0, v0, None, 2e-2, 400, "euler", stop_on_divergence=True)
    assert t.size < 401 and np.isfinite(q).all()


# ------------------------------------------------------------------------------------------ seed 001 studies
def test_heavy_top_initial_kinetic_energy_is_the_papers():
    for space in ("se3", "so3xr3"):
        system, q0, v0 = con.build("heavy-top", (space,))
        np.testing.assert_allclose(v0[:3], [0.0, 5 * np.pi, -10 * np.pi], atol=1e-12)  # ω₀ × r₀ (R = I)
        assert abs(system.kinetic_energy(q0, v0) - 13972.4) < 0.05


@pytest.mark.slow
def test_heavy_top_se3_exact_for_every_tableau_so3xr3_drifts():
    """Paper §5.1: on SE(3) the pivot holds to round-off for every tableau; SO(3)×R³ drifts."""
    for method in TABLEAUS:
        se3 = con.run_once("heavy-top", ("se3",), method, 1e-3, 0.5, reference=False)
        so3 = con.run_once("heavy-top", ("so3xr3",), method, 1e-3, 0.5, reference=False)
        assert se3["violation_max"]["pivot"] < 1e-10, (method, se3)
        assert so3["violation_max"]["pivot"] > 1e-8, (method, so3)


def test_heavy_top_so3xr3_drift_has_the_tableaus_order():
    for method, expected in (("heun", 2), ("rk4", 4)):
        c = con.convergence("heavy-top", ("so3xr3",), method, (4e-3, 2e-3, 1e-3), 0.25)
        assert abs(c["order"]["pivot"] - expected) < 0.3, (method, c)


@pytest.mark.slow
def test_heavy_top_motion_matches_eulers_equations_about_the_pivot():
    """Against Euler's equations about the fixed point (DOP853), with gravity so that the potential enters."""
    for space in ("se3", "so3xr3"):
        r = con.run_once("heavy-top", (space,), "rk4", 5e-4, 0.3, gravity=9.81)
        ref = r["reference_error"]
        assert ref["rotation_max"] < 1e-7 and ref["com_position_max"] < 1e-7, (space, ref)
        assert r["energy_drift_rel"] < 1e-8


@pytest.mark.slow
@needs_pin
def test_double_pendulum_ground_joint_exact_on_se3_joint2_comparable_and_motion_matches_pinocchio():
    runs = {sp: con.run_once("double-pendulum", (sp, sp), "rk4", 1e-3, 1.0, reference=False)
            for sp in ("se3", "so3xr3")}
    assert runs["se3"]["violation_max"]["ground"] < 1e-10
    assert runs["so3xr3"]["violation_max"]["ground"] > 1e-8
    ratio = runs["se3"]["violation_max"]["joint2"] / runs["so3xr3"]["violation_max"]["joint2"]
    assert 0.2 < ratio < 5.0, runs  # body to body: comparable in both spaces
    for sp in ("se3", "so3xr3"):
        assert runs[sp]["violation_max"]["joint2"] < 1e-4
        r = con.run_once("double-pendulum", (sp, sp), "rk4", 2.5e-4, 0.2)
        assert r["reference_error"]["rotation_max"] < 1e-6 and r["reference_error"]["com_position_max"] < 1e-7, r


@pytest.mark.slow
@needs_pin
def test_floating_pair_comparable_in_both_spaces_momentum_conserved_matches_pinocchio():
    runs = [con.run_once("floating-pair", sp, "rk4", 1e-3, 1.0)
            for sp in (("se3", "se3"), ("so3xr3", "so3xr3"), ("se3", "so3xr3"))]
    v = [r["violation_max"]["joint2"] for r in runs]
    assert max(v) < 1e-8 and max(v) / min(v) < 5.0, v
    for r in runs:
        assert r["momentum_drift"] < 1e-8
        assert r["reference_error"]["rotation_max"] < 1e-7 and r["reference_error"]["com_position_max"] < 1e-8, r
    system, q0, v0 = con.build("floating-pair", ("se3", "se3"))
    np.testing.assert_allclose(system.spatial_momentum(q0, v0)[:3], 0.0, atol=1e-12)  # c.o.m. at rest


def test_reference_needing_pinocchio_says_so_when_it_is_missing(monkeypatch):
    from mbs_ros.validation import pin_reference

    monkeypatch.setitem(sys.modules, "pinocchio", None)  # import pinocchio -> ImportError
    with pytest.raises(RuntimeError, match="needs Pinocchio"):
        pin_reference.require_pinocchio()
    r = con.run_once("floating-pair", ("se3", "se3"), "rk4", 1e-3, 0.01)
    assert r["reference_error"]["reference"] is None and "needs Pinocchio" in r["reference_error"]["message"]


# ------------------------------------------------------------------------------------------- seed 003 study
def test_euler_angle_helpers_of_the_lagrange_form():
    """∂R/∂η by central differences, and angles() inverts rotation() away from pitch ±90°."""
    from mbs_ros.validation import euler_zyx as ez

    rng = np.random.default_rng(2)
    for _ in range(5):
        eta = rng.uniform([-3, -1.4, -3], [3, 1.4, 3])
        np.testing.assert_allclose(ez.angles(ez.rotation(eta)), eta, atol=1e-12)
        for k, dR in enumerate(ez.rotation_partials(eta)):
            e = np.eye(3)[k] * 1e-6
            np.testing.assert_allclose(dR, (ez.rotation(eta + e) - ez.rotation(eta - e)) / 2e-6, atol=1e-9)


@pytest.mark.slow
def test_formulations_agree_and_conserve_the_invariants():
    from mbs_ros.validation import formulations as fm

    for forced in (False, True):
        c = fm.run_case(forced, False, 2.0, 1e-12, 5e-4)
        assert set(c["forms"]) == {"kirchhoff", "newton_euler", "lagrange", "model"}
        assert c["max_difference"] < 1e-9, c["pairs"]
        assert c["lagrange_min_pitch_margin"] > 0.3
        if not forced:
            for form, inv in c["invariants"].items():
                assert max(inv.values()) < 1e-10, (form, inv)
    c = fm.run_case(False, True, 2.0, 1e-12, 5e-4)  # added mass: Kirchhoff with M_RB + M_A, Munk moment
    assert set(c["forms"]) == {"kirchhoff", "newton_euler", "lagrange", "model"}
    assert c["max_difference"] < 1e-9, c["pairs"]
    for form, inv in c["invariants"].items():
        assert max(inv.values()) < 1e-10, (form, inv)
    c = fm.run_case(True, True, 2.0, 1e-12, 2.5e-4)  # added mass under gravity and the drive
    assert set(c["forms"]) == {"kirchhoff", "newton_euler", "lagrange", "model"}
    assert c["max_difference"] < 1e-9, c["pairs"]
    # the added mass matters: the same run with the rigid inertia alone ends elsewhere
    R_rb = fm.kirchhoff(fm.rigid_inertia(), fm.ez.rotation(fm.ETA0), fm.B0, fm.NU0, np.array([0.0, 2.0]), False, 1e-9)
    R_am = fm.kirchhoff(fm.rigid_inertia() + fm.ADDED_MASS, fm.ez.rotation(fm.ETA0), fm.B0, fm.NU0,
                        np.array([0.0, 2.0]), False, 1e-9)
    assert np.abs(R_rb[0][-1] - R_am[0][-1]).max() > 1e-2


# ------------------------------------------------------------------------------------------- seed 004 study
def test_gimbal_lock_study():
    from mbs_ros.validation import gimbal_lock

    r = gimbal_lock.run(t_end=0.7)
    assert r["crossing_time"] is not None and r["min_pitch_margin"] < 2e-3
    assert r["error_before_max"] < 1e-8  # same RK4 and step: agreement while the pitch is clear of 90°
    assert r["reference_error_before_max"] < 1e-8
    assert r["euler_failed"]
    assert r["energy_drift_rel"] < 1e-10 and r["orthonormality_max"] < 1e-12


# ------------------------------------------------------------------------------------------- seed 002 study
@pytest.mark.slow
@needs_pin
def test_balloon_against_pinocchio_and_closed_forms():
    from mbs_ros.validation import balloon

    r = balloon.run(t_end=1.5)
    init = r["initial"]
    assert init["notes_values_match"]
    assert max(init["errors"].values()) < 1e-12, init["errors"]
    ref = r["reference"]
    assert ref["self_position_error"] < 1e-8 and ref["self_attitude_error"] < 1e-8, ref  # reference is converged
    assert ref["base_position_error"] < 1e-7 and ref["link_position_error"] < 1e-7, ref
    assert ref["base_attitude_error"] < 1e-7 and ref["joint_error"] < 1e-7, ref
    assert r["com_drift"] < 1e-7 and r["com_drift_undamped"] < 1e-7
    assert r["energy_drift_rel_undamped"] < 1e-7
    assert r["energy_balance_rel"] < 1e-7 and r["energy_dissipated"] > 10.0
    d = r["inverse_dynamics"]
    assert d["joint_force_error_exact"] < 1e-9 and d["base_residual_exact"] < 1e-9
    assert d["joint_force_error_fd"] < 1e-4 * d["joint_force_scale"] and d["base_residual_fd"] < 1e-2
    assert d["rnea_vs_pinocchio"] < 1e-9 and d["joint_wrench_vs_pinocchio"] < 1e-9


# ------------------------------------------------------------------------------------------------------ the CLI
def _cli(*args):
    out = subprocess.run([sys.executable, "-m", "mbs_ros.validation", *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.e2e
def test_cli_lists_studies_and_prints_json():
    listing = _cli("--list")
    names = [line.split()[0] for line in listing.splitlines() if not line.startswith(" ")]
    assert names == ["heavy-top", "double-pendulum", "floating-pair", "formulations", "gimbal-lock", "balloon",
                     "modes", "rigid-body", "lqr-vs-ct"]
    # each study in words and the paper by its authors and title, not by a number of the project's own (lqr-vs-ct,
    # a comparison of two laws, reproduces no paper)
    assert "seed" not in listing.lower()
    assert listing.count("after ") == len(names) - 1 and "Müller & Terze" in listing and "Massa & Vignolo" in listing
    assert 'Alazard, Sanfedino & Kassarian, "Non-linear dynamics of multibody systems"' in listing
    r = json.loads(_cli("heavy-top", "--method", "all", "--t-end", "0.2", "--no-reference", "--json"))
    assert {(x["space"], x["method"]) for x in r["runs"]} == {(s, m) for s in ("se3", "so3xr3") for m in TABLEAUS}
    for x in r["runs"]:
        assert abs(x["kinetic_energy_initial"] - 13972.4) < 0.05
        assert set(x) >= {"violation_max", "energy_drift_rel", "us_per_step"}
    table = _cli("gimbal-lock", "--t-end", "0.6")
    assert "Euler form failed at the singularity" in table and "True" in table


def test_cli_help_documents_keys_and_assumptions():
    from mbs_ros.validation.cli import studies

    for name, study in studies().items():
        assert "Metrics" in study.description, name
    assert "Assumption" in studies()["heavy-top"].description
    assert "k = 100 N/m" in studies()["balloon"].description
    assert "2.7 kg" in studies()["double-pendulum"].description
