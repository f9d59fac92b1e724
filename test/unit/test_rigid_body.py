"""Single rigid body on SE(3), Schönflies, SE(2), SO(3) and SO(3)×R³ (seed 004), checked against references that
do not share our code path: eq. 57 from finite differences of S(φ) built with scipy's matrix exponential, the
paper's scalar equations (typos fixed), energy and Noether momentum, closed-form motions, and an SE(3) run of the
same body."""
import numpy as np
import pytest
from scipy.linalg import expm, expm_frechet

from mbs_ros.dynamics import BASES, Model, simulate

SUBGROUPS = ("se3", "schoenflies", "se2", "so3")


def random_body(base, rng, com_scale=0.3, gravity=(0.0, 0.0, -9.81)):
    """A body with a c.o.m. offset and a full (non-diagonal), physically possible inertia (from random second
    moments of a mass distribution, rotated)."""
    s = rng.uniform(0.1, 1.0, size=3)
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    inertia = R @ np.diag([s[1] + s[2], s[0] + s[2], s[0] + s[1]]) @ R.T
    return Model.rigid_body(
        base=base, mass=rng.uniform(0.5, 3.0), inertia=inertia, com=com_scale * rng.normal(size=3), gravity=gravity
    )


def random_state(model, rng, scale=1.0):
    q = model.group.random(rng)
    v = scale * rng.normal(size=model.nv)
    return q, v


# ---------------------------------------------------------------------------------------------------- structure
@pytest.mark.parametrize("base", SUBGROUPS)
def test_coriolis_equals_eq57_from_finite_differences_of_S(base):
    """C_ij = Σ_k (∂S_ki/∂φ_j − ∂S_kj/∂φ_i)|₀ (Mv)_k (eq. 57), S(φ) = body velocity map of exp(φ), built from
    scipy's expm and its Fréchet derivative (not from our dexp) and differentiated with Richardson-extrapolated
    central differences."""
    rng = np.random.default_rng(1)
    model = random_body(base, rng)
    G = model.group
    m = model.nv

    def S(phi):
        A = G.hat(phi)
        E_inv = expm(-A)
        return np.column_stack([G.vee(E_inv @ expm_frechet(A, G.hat(e), compute_expm=False)) for e in np.eye(m)])

    def dS(j, h):
        e = np.eye(m)[j] * h
        return (S(e) - S(-e)) / (2 * h)

    # ∂S/∂φ_j at 0, Richardson: (4 D(h/2) − D(h)) / 3
    dS_dphi = [(4 * dS(j, 5e-4) - dS(j, 1e-3)) / 3 for j in range(m)]
    for _ in range(3):
        q, v = random_state(model, rng)
        p = model.mass_matrix(q) @ v
        C57 = np.array([[sum((dS_dphi[j][k, i] - dS_dphi[i][k, j]) * p[k] for k in range(m)) for j in range(m)]
                        for i in range(m)])
        np.testing.assert_allclose(model.coriolis_matrix(q, v), C57, atol=1e-10 * max(1, np.abs(p).max()))


@pytest.mark.parametrize("base", SUBGROUPS)
def test_coriolis_is_skew_for_subgroups(base):
    rng = np.random.default_rng(2)
    model = random_body(base, rng)
    for _ in range(5):
        q, v = random_state(model, rng)
        C = model.coriolis_matrix(q, v)
        assert np.abs(C).max() > 1e-3  # not trivially zero
        np.testing.assert_allclose(C + C.T, 0.0, atol=1e-13)


@pytest.mark.parametrize("base", BASES)
def test_mdot_minus_2c_is_skew_and_cv_matches_nonlinear_effects(base):
    """Ṁ − 2C skew (Ṁ by central differences along q·exp(εv)), and C v + g = nonlinear_effects."""
    rng = np.random.default_rng(3)
    model = random_body(base, rng)
    for _ in range(5):
        q, v = random_state(model, rng)
        eps = 1e-6
        Mdot = (model.mass_matrix(model.integrate(q, v, eps)) - model.mass_matrix(model.integrate(q, v, -eps))) / (
            2 * eps
        )
        N = Mdot - 2 * model.coriolis_matrix(q, v)
        np.testing.assert_allclose(N + N.T, 0.0, atol=1e-8)
        np.testing.assert_allclose(
            model.coriolis_matrix(q, v) @ v + model.gravity_forces(q), model.nonlinear_effects(q, v), atol=1e-12
        )


@pytest.mark.parametrize("base", BASES)
def test_inverse_forward_round_trip(base):
    rng = np.random.default_rng(4)
    model = random_body(base, rng)
    for _ in range(5):
        q, v = random_state(model, rng)
        tau = rng.normal(size=model.nv)
        a = model.forward_dynamics(q, v, tau)
        np.testing.assert_allclose(model.inverse_dynamics(q, v, a), tau, atol=1e-12)


@pytest.mark.parametrize("base", BASES)
def test_forward_dynamics_with_external_wrench(base):
    """A wrench W on the body enters as the generalised force Bᵀ W, and forward/inverse dynamics with f_ext are
    inverse to each other."""
    rng = np.random.default_rng(14)
    model = random_body(base, rng)
    q, v = random_state(model, rng)
    tau, W = rng.normal(size=model.nv), rng.normal(size=6)
    a = model.forward_dynamics(q, v, tau, f_ext=W[None, :])
    np.testing.assert_allclose(a, model.forward_dynamics(q, v, tau + model.velocity_map(q).T @ W), atol=1e-12)
    np.testing.assert_allclose(model.inverse_dynamics(q, v, a, f_ext=W[None, :]), tau, atol=1e-12)


# ------------------------------------------------------------------------------------- the paper's scalar equations
def _diag_body(base, rng):
    m = rng.uniform(1, 3)
    Ix, Iy, Iz = rng.uniform(0.5, 2.0, size=3)
    return Model.rigid_body(base, mass=m, inertia=np.diag([Ix, Iy, Iz]), gravity=(0, 0, 0)), m, Ix, Iy, Iz


def test_scalar_equations_se3():
    """§4.2 with the typo of the last equation fixed (Iy p q, not Iy r q)."""
    rng = np.random.default_rng(5)
    model, m, Ix, Iy, Iz = _diag_body("se3", rng)
    q = model.group.random(rng)
    u, v, w, p, qq, r = x = rng.normal(size=6)
    tau = rng.normal(size=6)
    du, dv, dw, dp, dq, dr = model.forward_dynamics(q, x, tau)
    residual = [
        m * du - m * r * v + m * qq * w - tau[0],
        m * dv + m * r * u - m * p * w - tau[1],
        m * dw - m * qq * u + m * p * v - tau[2],
        Ix * dp - Iy * r * qq + Iz * qq * r - tau[3],
        Iy * dq + Ix * r * p - Iz * p * r - tau[4],
        Iz * dr - Ix * qq * p + Iy * p * qq - tau[5],
    ]
    np.testing.assert_allclose(residual, 0.0, atol=1e-12)


def test_scalar_equations_se2_and_schoenflies():
    rng = np.random.default_rng(6)
    model, m, Ix, Iy, Iz = _diag_body("se2", rng)
    u, v, r = x = rng.normal(size=3)
    tau = rng.normal(size=3)
    du, dv, dr = model.forward_dynamics(model.group.random(rng), x, tau)
    np.testing.assert_allclose(
        [m * du - m * r * v - tau[0], m * dv + m * r * u - tau[1], Iz * dr - tau[2]], 0.0, atol=1e-12
    )
    model, m, Ix, Iy, Iz = _diag_body("schoenflies", rng)
    u, v, w, r = x = rng.normal(size=4)
    tau = rng.normal(size=4)
    du, dv, dw, dr = model.forward_dynamics(model.group.random(rng), x, tau)
    np.testing.assert_allclose(
        [m * du - m * r * v - tau[0], m * dv + m * r * u - tau[1], m * dw - tau[2], Iz * dr - tau[3]], 0.0, atol=1e-12
    )


def test_scalar_equations_so3_are_eulers_equations_and_c_is_minus_hat():
    """Eq. 68: C(v) = −hat(M v) (Table 1 prints +hat: typo)."""
    rng = np.random.default_rng(7)
    model, m, Ix, Iy, Iz = _diag_body("so3", rng)
    p, qq, r = w = rng.normal(size=3)
    tau = rng.normal(size=3)
    dp, dq, dr = model.forward_dynamics(model.group.random(rng), w, tau)
    np.testing.assert_allclose(
        [Ix * dp - (Iy - Iz) * qq * r - tau[0], Iy * dq - (Iz - Ix) * r * p - tau[1], Iz * dr - (Ix - Iy) * p * qq - tau[2]],
        0.0,
        atol=1e-12,
    )
    Mw = model.mass_matrix(None) @ w
    hat = np.array([[0, -Mw[2], Mw[1]], [Mw[2], 0, -Mw[0]], [-Mw[1], Mw[0], 0]])
    np.testing.assert_allclose(model.coriolis_matrix(None, w), -hat, atol=1e-14)


# ---------------------------------------------------------------------------------------- energy and momentum
@pytest.mark.parametrize("base", BASES)
def test_instantaneous_power_balance(base):
    """d/dt (T + V) = vᵀ τ along the motion, both sides independent: the left by central differences of T and V
    along (q·exp(ε v), v + ε v̇)."""
    rng = np.random.default_rng(8)
    model = random_body(base, rng)
    for _ in range(5):
        q, v = random_state(model, rng)
        tau = rng.normal(size=model.nv)
        a = model.forward_dynamics(q, v, tau)

        def E(eps):
            qe, ve = model.integrate(q, v, eps), v + eps * a
            return model.kinetic_energy(qe, ve) + model.potential_energy(qe)

        eps = 1e-5
        dE = (E(eps) - E(-eps)) / (2 * eps)
        assert dE == pytest.approx(v @ tau, abs=1e-7)


@pytest.mark.parametrize("base", BASES)
def test_torque_free_noether_momentum_and_energy(base):
    """No force at all: Noether momentum Hᵀ Ad_{g⁻¹}ᵀ I_b H v and kinetic energy are constant (RKMK4, 2 s)."""
    rng = np.random.default_rng(9)
    model = random_body(base, rng, gravity=(0, 0, 0))
    q0, v0 = random_state(model, rng, scale=2.0)
    t, q, v = simulate(model, q0, v0, np.zeros(model.nv), dt=1e-3, steps=2000, method="rk4")
    mu0 = model.noether_momentum(q0, v0)
    T0 = model.kinetic_energy(q0, v0)
    drift_mu = max(np.abs(model.noether_momentum(qk, vk) - mu0).max() for qk, vk in zip(q[::50], v[::50]))
    drift_T = max(abs(model.kinetic_energy(qk, vk) - T0) for qk, vk in zip(q[::50], v[::50]))
    assert np.abs(v[-1] - v0).max() > 1e-2  # it really moved
    assert drift_mu < 1e-8 * max(1.0, np.abs(mu0).max())
    assert drift_T < 1e-8 * T0


@pytest.mark.parametrize("base", BASES)
def test_energy_conserved_under_gravity(base):
    rng = np.random.default_rng(10)
    model = random_body(base, rng)
    q0, v0 = random_state(model, rng)
    t, q, v = simulate(model, q0, v0, np.zeros(model.nv), dt=1e-3, steps=2000, method="rk4")
    E = np.array([model.kinetic_energy(a, b) + model.potential_energy(a) for a, b in zip(q, v)])
    assert np.abs(E - E[0]).max() < 1e-8 * max(1.0, abs(E[0]))


class _DuindamStramigioli:
    """The explicit C of Duindam & Stramigioli as seed 004 reproduces it (eqs. 33/35): C_DS(v) = −ad_{Mv}ᵀ."""

    def __init__(self, model):
        self.model, self.nq, self.nv = model, model.nq, model.nv
        self.integrate, self.dexp_inv = model.integrate, model.dexp_inv

    def forward_dynamics(self, q, v, tau):
        M = self.model.mass_matrix(q)
        C_ds = -self.model.group.ad(M @ v).T
        return np.linalg.solve(M, tau - C_ds @ v)


@pytest.mark.slow
def test_duindam_stramigioli_form_is_caught_by_momentum_not_by_energy():
    """With a diagonal M the wrong C conserves energy as well as ours; momentum with a c.o.m. offset exposes it."""
    rng = np.random.default_rng(11)
    steps, dt = 5000, 1e-3
    diag = Model.rigid_body("se3", mass=2.0, inertia=np.diag([0.4, 0.9, 1.3]), gravity=(0, 0, 0))
    q0, v0 = diag.neutral(), np.array([0.3, -0.2, 0.5, 1.0, 2.0, -1.5])
    for m in (diag, _DuindamStramigioli(diag)):
        _, q, v = simulate(m, q0, v0, np.zeros(6), dt, steps)
        assert abs(diag.kinetic_energy(q[-1], v[-1]) - diag.kinetic_energy(q0, v0)) < 1e-9

    offset = Model.rigid_body("se3", mass=2.0, inertia=np.diag([0.4, 0.9, 1.3]), com=(0.2, -0.1, 0.3),
                              gravity=(0, 0, 0))
    h0 = offset.spatial_momentum(q0, v0)
    _, q, v = simulate(offset, q0, v0, np.zeros(6), dt, steps)
    ours = np.abs(offset.spatial_momentum(q[-1], v[-1]) - h0).max()
    _, q, v = simulate(_DuindamStramigioli(offset), q0, v0, np.zeros(6), dt, steps)
    theirs = np.abs(offset.spatial_momentum(q[-1], v[-1]) - h0).max()
    assert ours < 1e-9
    assert theirs > 1e-2, theirs


# ----------------------------------------------------------------------------------- closed forms and embeddings
def test_free_fall_with_spin_is_a_parabola():
    """Gravity only, c.o.m. at the origin: p(t) = p0 + ṗ0 t + ½ g t², exactly, whatever the spin."""
    model = Model.rigid_body("se3", mass=1.5, inertia=np.diag([0.1, 0.2, 0.3]), gravity=(0.0, 0.0, -9.81))
    q0 = model.configuration_from_pose([1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0])
    v0 = np.array([1.0, 0.5, 2.0, 0.0, 0.0, 0.0])  # translation only: body frame = world frame for all t
    t, q, v = simulate(model, q0, v0, np.zeros(6), dt=1e-2, steps=200)
    exact = q0[:3] + np.outer(t, v0[:3]) + 0.5 * np.outer(t**2, model.gravity)
    np.testing.assert_allclose(q[:, :3], exact, atol=1e-11)


def test_axisymmetric_top_precesses_at_the_closed_form_rate():
    """Torque-free symmetric body (I1 = I2): ω3 constant, (ω1, ω2) rotates at λ = (I3 − I1) ω3 / I1."""
    I1, I3 = 0.5, 0.9
    model = Model.rigid_body("so3", mass=1.0, inertia=np.diag([I1, I1, I3]), gravity=(0, 0, 0))
    w0 = np.array([0.4, 0.0, 3.0])
    t, q, w = simulate(model, model.neutral(), w0, np.zeros(3), dt=1e-3, steps=3000)
    lam = (I3 - I1) * w0[2] / I1
    exact = np.column_stack([0.4 * np.cos(lam * t), 0.4 * np.sin(lam * t), np.full_like(t, 3.0)])
    np.testing.assert_allclose(w, exact, atol=1e-9)


def _embed(model3, sub, q_sub, v_sub):
    pos, quat = sub.pose(q_sub)
    q3 = model3.configuration_from_pose(pos, quat) if model3.base != "so3" else quat
    return q3, model3.velocity_from_twist(q3, sub.twist(q_sub, v_sub))


@pytest.mark.slow
@pytest.mark.parametrize("base", ["se2", "schoenflies", "so3xr3"])
def test_same_motion_as_se3(base):
    """SE(2)/Schönflies keep their constraints exactly and move like an SE(3) body whose motion stays in the
    subgroup (inertia symmetric about the plane, forces in the subalgebra); SO(3)×R³ moves like SE(3) always."""
    rng = np.random.default_rng(12)
    inertia = np.array([[1.0, 0.2, 0.0], [0.2, 1.5, 0.0], [0.0, 0.0, 2.0]])
    # an offset c.o.m. with vertical motion needs roll/pitch constraint torques: none for Schönflies here
    com = (0.0, 0.0, 0.0) if base == "schoenflies" else (0.3, -0.2, 0.0)
    grav = (0, 0, -9.81) if base == "so3xr3" else (0, 0, 0)  # gravity on an offset c.o.m. would tip the SE(3) body
    sub = Model.rigid_body(base, mass=2.0, inertia=inertia, com=com, gravity=grav)
    full = Model.rigid_body("se3", mass=2.0, inertia=inertia, com=com, gravity=grav)
    q0, v0 = sub.group.random(rng), rng.normal(size=sub.nv)
    W = rng.normal(size=6)
    tau_sub, W_applied, _ = sub.wrench_to_generalized(q0, W)

    def tau_s(t, q, v):
        return sub.wrench_to_generalized(q, np.cos(t) * W_applied)[0]

    def tau_f(t, q, v):
        return full.wrench_to_generalized(q, np.cos(t) * W_applied)[0]

    _, qs, vs = simulate(sub, q0, v0, tau_s, 1e-3, 2000)
    q3, v3 = _embed(full, sub, q0, v0)
    _, qf, vf = simulate(full, q3, v3, tau_f, 1e-3, 2000)
    for k in range(0, 2001, 250):
        Ts = sub.group.pose_matrix(qs[k])
        Tf = full.group.pose_matrix(qf[k])
        np.testing.assert_allclose(Ts, Tf, atol=1e-10)
        np.testing.assert_allclose(sub.twist(qs[k], vs[k]), full.twist(qf[k], vf[k]), atol=1e-9)
    if base in ("se2", "schoenflies"):
        cs = qs[:, -2:]
        np.testing.assert_allclose(np.hypot(cs[:, 0], cs[:, 1]), 1.0, atol=1e-14)


# ------------------------------------------------------------------------------------------- model validation
def test_bad_parameters_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="mass"):
        Model.rigid_body("se3", mass=-1.0)
    with pytest.raises(ValueError, match="positive definite"):
        Model.rigid_body("se3", inertia=np.diag([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="symmetric"):
        Model.rigid_body("se3", inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match="unknown base"):
        Model.rigid_body("se4")
    with pytest.warns(UserWarning, match="triangle"):
        Model.rigid_body("se3", inertia=np.diag([3.0, 5.0, 17.0]))
    se2 = Model.rigid_body("se2")
    with pytest.raises(ValueError, match="roll or pitch"):
        se2.configuration_from_pose([0, 0, 0], [0.1, 0, 0, 1])
    with pytest.raises(ValueError, match="cannot have"):
        se2.velocity_from_twist(se2.neutral(), [0, 0, 0, 1.0, 0, 0])


def test_added_mass_enters_kinetics_not_gravity():
    """M = Hᵀ(I_b + M_A)H and T = ½ Vᵀ(I_b + M_A)V, while gravity and V stay on the rigid mass; bad M_A refused.
    (Its dynamics are checked against Kirchhoff's equations in the formulations study test.)"""
    rng = np.random.default_rng(13)
    M_A = np.diag([1.5, 3.0, 4.5, 0.2, 0.35, 0.5])
    M_A[0, 4] = M_A[4, 0] = 0.1
    rigid = Model.rigid_body("se3", mass=2.0, inertia=np.diag([0.3, 0.4, 0.5]), com=(0.1, 0.0, -0.2))
    wet = Model.rigid_body("se3", mass=2.0, inertia=np.diag([0.3, 0.4, 0.5]), com=(0.1, 0.0, -0.2), added_mass=M_A)
    q, v = random_state(wet, rng)
    np.testing.assert_allclose(wet.mass_matrix(q), rigid.mass_matrix(q) + M_A, atol=1e-14)
    assert wet.kinetic_energy(q, v) == pytest.approx(rigid.kinetic_energy(q, v) + 0.5 * v @ M_A @ v, rel=1e-14)
    np.testing.assert_allclose(wet.gravity_forces(q), rigid.gravity_forces(q), atol=1e-14)
    assert wet.potential_energy(q) == rigid.potential_energy(q) and wet.mass == 2.0
    np.testing.assert_allclose(wet.coriolis_matrix(q, v) + wet.coriolis_matrix(q, v).T, 0.0, atol=1e-13)
    with pytest.raises(ValueError, match="symmetric"):
        Model.rigid_body("se3", added_mass=np.triu(np.ones((6, 6))))
    with pytest.raises(ValueError, match="positive definite"):
        Model.rigid_body("se3", added_mass=-10 * np.eye(6))


def test_wrench_projection_drops_what_the_group_cannot_act_on():
    se2 = Model.rigid_body("se2")
    tau, applied, dropped = se2.wrench_to_generalized(se2.neutral(), [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(tau, [1, 2, 6])
    np.testing.assert_array_equal(applied, [1, 2, 0, 0, 0, 6])
    np.testing.assert_array_equal(dropped, [0, 0, 3, 4, 5, 0])


def test_model_is_immutable():
    model = Model.rigid_body("se3")
    with pytest.raises(Exception):
        model.mass = 2.0
    with pytest.raises(ValueError):
        model.I_b[0, 0] = 5.0
