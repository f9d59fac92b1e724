"""Control laws and references of ``mbs_ros.controllers``, closed loop with the plant simulated by
``mbs_ros.dynamics.simulate``.

The checks compare against quantities the controllers do not compute: analytic solutions of the designed linear
error dynamics, rates fitted to simulated errors, finite differences along the group, closed-form references
``q_d(t) = exp(t ξ₀) q_b exp(t ξ₁)`` (body velocity and acceleration from the group's ``adjoint``/``ad``), and
bounds derived from the gains and the model mismatch computed from the two models' forward dynamics.
"""
import math

import numpy as np
import pytest

from mbs_ros.controllers import (ComputedTorque, ConfigurationSpace, PassivityBased, PDGravity, Reference,
                                 gain_matrix, stack)
from mbs_ros.dynamics import BASES, Model, simulate
from mbs_ros.dynamics.lie import GROUPS, SE3

#: tangent components of each base group that rotate (for the large-attitude-error cases)
ROTATION = {"se3": [3, 4, 5], "so3xr3": [3, 4, 5], "so3": [0, 1, 2], "se2": [2], "schoenflies": [3]}


# ----------------------------------------------------------------------------------------------------- helpers
def random_body(base, rng, scale_mass=1.0, scale_inertia=1.0, inertia=None, mass=None, com=None):
    """A body with a c.o.m. offset and a full, physically possible inertia, under gravity."""
    if inertia is None:
        s = rng.uniform(0.2, 1.0, size=3)
        R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        inertia = R @ np.diag([s[1] + s[2], s[0] + s[2], s[0] + s[1]]) @ R.T
    mass = rng.uniform(1.0, 3.0) if mass is None else mass
    com = 0.2 * rng.normal(size=3) if com is None else com
    return Model.rigid_body(base, mass=scale_mass * mass, inertia=scale_inertia * inertia, com=com)


def perturbed(model, mass_factor, inertia_factor):
    """The same rigid body with its mass and its inertia about the c.o.m. scaled."""
    return Model.rigid_body(model.base, mass=mass_factor * model.mass, inertia=inertia_factor * model.inertia,
                            com=model.com, gravity=model.gravity)


class MovingReference:
    """Closed-form reference on G × Rⁿ: base ``exp(t ξ₀) q_b exp(t ξ₁)`` — body velocity
    ``Ad_{(q_b exp(tξ₁))⁻¹} ξ₀ + ξ₁`` and acceleration ``−ad_{ξ₁}`` of its first term — and joints
    ``c + b sin(ω t + ψ)``."""

    def __init__(self, group, n_joints, rng, speed=0.5, model=None):
        self.G, self.n, self.model = group, n_joints, model
        if group is not None:
            self.xi0 = speed * rng.normal(size=group.dim)
            self.xi1 = 0.6 * speed * rng.normal(size=group.dim)
            self.qb = group.random(rng)
        self.b = 0.8 * rng.normal(size=n_joints)
        self.w, self.psi = rng.uniform(0.5, 1.5, size=n_joints), rng.uniform(0, 2 * np.pi, size=n_joints)
        # joints: c + b sin(ωt + ψ), c a random configuration; through model.integrate for a model (continuous
        # joints are (cos θ, sin θ) there)
        self.c = rng.normal(size=n_joints) if model is None else model.random_configuration(rng)

    def __call__(self, t):
        G = self.G
        ph = self.w * t + self.psi
        qj, vj, aj = self.b * np.sin(ph), self.b * self.w * np.cos(ph), -self.b * self.w ** 2 * np.sin(ph)
        if G is not None:
            B = G.exp(t * self.xi1)
            qb = G.compose(G.compose(G.exp(t * self.xi0), self.qb), B)
            w = G.adjoint(G.inverse(G.compose(self.qb, B))) @ self.xi0
            vb, ab = w + self.xi1, -G.ad(self.xi1) @ w
        else:
            qb, vb, ab = np.zeros(0), np.zeros(0), np.zeros(0)
        if self.model is None:
            q = np.concatenate([qb, self.c + qj])
        else:
            q = self.model.integrate(np.concatenate([qb, self.c[qb.size:]]), np.concatenate([np.zeros(vb.size), qj]))
        return q, np.concatenate([vb, vj]), np.concatenate([ab, aj])


def attitude_offset(space, rng, angle_deg=170.0, translation=0.5):
    """Tangent vector with a rotation of ``angle_deg`` about a random axis on the base and random other entries."""
    delta = translation * rng.normal(size=space.nv)
    if space.group is not None:
        rot = ROTATION[space.group.name]
        axis = rng.normal(size=len(rot))
        delta[rot] = np.deg2rad(angle_deg) * axis / np.linalg.norm(axis)
    return delta


def errors_along(law, t, Q, V, ref):
    out = [law.error(Q[k], V[k], *ref(t[k])[:2]) for k in range(len(t))]
    return np.array([o[0] for o in out]), np.array([o[1] for o in out])


def two_pole_solution(t, e0, edot0, lam1, lam2):
    """Solution of ë + (λ₁+λ₂) ė + λ₁λ₂ e = 0 per component (λ₁ ≠ λ₂ vectors)."""
    c2 = (edot0 + lam1 * e0) / (lam1 - lam2)
    c1 = e0 - c2
    return np.exp(-np.outer(t, lam1)) * c1 + np.exp(-np.outer(t, lam2)) * c2


def fitted_rate(t, y, window):
    """Decay rate of |y| from a least-squares line through log|y| over ``window``."""
    sel = (t >= window[0]) & (t <= window[1])
    return -np.polyfit(t[sel], np.log(np.abs(y[sel])), 1)[0]


def lyapunov_derivative(law, model, q, v, q_d, v_d, a_d, h=1e-5):
    """dV/dt along the true closed loop by central differences: every state moves along its tangent (q·exp(±hv),
    v ± h v̇, q_d·exp(±h v_d), v_d ± h a_d), which is exact to O(h²) on the group."""
    acc = model.forward_dynamics(q, v, law(q, v, q_d, v_d, a_d))

    def V(sgn):
        d = sgn * h
        return law.lyapunov(model.integrate(q, v, d), v + d * acc, model.integrate(q_d, v_d, d), v_d + d * a_d)

    return (V(1) - V(-1)) / (2 * h)


class DuindamStramigioli:
    """The model with C replaced by Duindam & Stramigioli's factorisation C_DS(v) = −ad_{Mv}ᵀ (seed 004 notes)."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def coriolis_matrix(self, q, v):
        return -self._model.group.ad(self._model.mass_matrix(q) @ v).T


# ----------------------------------------------------------------------------------------------------- gains
def test_gains_accept_scalars_vectors_and_spd_matrices():
    np.testing.assert_array_equal(gain_matrix(2.0, 3), 2 * np.eye(3))
    np.testing.assert_array_equal(gain_matrix([1, 2, 3], 3), np.diag([1.0, 2.0, 3.0]))
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_array_equal(gain_matrix(K, 2), K)


@pytest.mark.parametrize("value, match", [
    (0.0, "positive"), (-1.0, "positive"), (np.nan, "finite"), (np.inf, "finite"),
    ([1.0, 2.0], "3 entries"), ([1.0, -2.0, 3.0], "positive"), (np.eye(2), "3x3"),
    (np.array([[1.0, 0.1, 0], [0, 1, 0], [0, 0, 1]]), "symmetric"),
    (np.diag([1.0, -1.0, 1.0]), "positive definite"), (np.ones((3, 3, 3)), "3-D"), ("fast", "number"),
])
def test_gains_reject_bad_values_clearly(value, match):
    with pytest.raises(ValueError, match=match):
        gain_matrix(value, 3, "kp")


def test_laws_validate_gains_and_inputs():
    model = Model.rigid_body("se3")
    with pytest.raises(ValueError, match="kd"):
        ComputedTorque(model, kp=1.0, kd=[1.0] * 5)
    with pytest.raises(ValueError, match="Lambda"):
        PassivityBased(model, Lambda=-1.0, kd=1.0)
    with pytest.raises(ValueError, match="commute"):
        PassivityBased(model, Lambda=[1, 2, 3, 4, 5, 6], kd=np.eye(6) + 0.1 * np.ones((6, 6)))
    law = PDGravity(model, 1.0, 1.0)
    with pytest.raises(ValueError, match="q_d"):
        law(model.neutral(), np.zeros(6), np.zeros(3))
    with pytest.raises(ValueError, match="v "):
        law(model.neutral(), np.zeros(5), model.neutral())


# ----------------------------------------------------------------------------------------------------- the error
@pytest.mark.parametrize("base", BASES)
def test_error_is_left_invariant_log_and_edot_its_time_derivative(base):
    """e = log(q⁻¹q_d); ė is d/dt e along any motion (central differences of e along q·exp(tv), q_d·exp(t v_d)),
    including a 170° attitude error; both are unchanged when q and q_d are moved by the same group element (no
    world-frame chart, hence no attitude singularity)."""
    rng = np.random.default_rng(10)
    model = random_body(base, rng)
    G, law = model.group, PDGravity(model, 1.0, 1.0)
    for _ in range(3):
        q = G.random(rng)
        q_d = model.integrate(q, attitude_offset(law.space, rng))
        v, v_d = rng.normal(size=model.nv), rng.normal(size=model.nv)
        e, edot = law.error(q, v, q_d, v_d)
        np.testing.assert_allclose(e, model.difference(q, q_d), atol=1e-14)
        h = 1e-6
        e_p = law.error(model.integrate(q, v, h), v, model.integrate(q_d, v_d, h), v_d)[0]
        e_m = law.error(model.integrate(q, v, -h), v, model.integrate(q_d, v_d, -h), v_d)[0]
        np.testing.assert_allclose(edot, (e_p - e_m) / (2 * h), atol=1e-7 * max(1.0, np.abs(edot).max()))
        g = G.random(rng)
        e2, edot2 = law.error(G.compose(g, q), v, G.compose(g, q_d), v_d)
        np.testing.assert_allclose(e2, e, atol=1e-12)
        np.testing.assert_allclose(edot2, edot, atol=1e-12)


# ----------------------------------------------------------------------------------------------------- computed torque
@pytest.mark.slow
@pytest.mark.parametrize("base", BASES)
def test_computed_torque_error_decays_at_designed_rate_from_170_degrees(base):
    """Distinct real poles per DOF (slow λ₁ ∈ [1.2, 2], fast 4λ₁), moving reference, 170° initial attitude error and
    a random initial velocity: the log error follows the designed linear dynamics exactly (analytic solution from
    e(0), ė(0)), and the rate fitted to each simulated component over the slow-mode window is the designed λ₁."""
    rng = np.random.default_rng(20 + BASES.index(base))
    model = random_body(base, rng)
    space = ConfigurationSpace.of(model)
    lam1 = np.linspace(1.2, 2.0, model.nv)
    lam2 = 4.0 * lam1
    law = ComputedTorque(model, kp=lam1 * lam2, kd=lam1 + lam2)
    ref = MovingReference(model.group, 0, rng)
    q0 = model.integrate(ref(0.0)[0], -attitude_offset(space, rng))
    v0 = rng.normal(size=model.nv)
    t, Q, V = simulate(model, q0, v0, law.feedback(ref), dt=5e-3, steps=1200)
    E, Edot = errors_along(law, t, Q, V, ref)
    angle = np.linalg.norm(E[0, ROTATION[base]])
    assert angle == pytest.approx(np.deg2rad(170.0), rel=1e-9)

    E_design = two_pole_solution(t, E[0], Edot[0], lam1, lam2)
    deviation = np.abs(E - E_design).max()
    print(f"\n{base}: max |e − e_design| = {deviation:.2e} (|e(0)| = {np.abs(E[0]).max():.2f})")
    assert deviation < 1e-6 * np.abs(E[0]).max()

    window = (2.5, 6.0)
    rates = np.array([fitted_rate(t, E[:, i], window) for i in range(model.nv)])
    print(f"{base}: fitted rates {np.round(rates, 4).tolist()}\n{'':>{len(base) + 2}}designed     "
          f"{np.round(lam1, 4).tolist()}")
    np.testing.assert_allclose(rates, lam1, rtol=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("base", ["se3", "so3"])
def test_computed_torque_critically_damped_envelope(base):
    """Double pole at −λ (kp = λ², kd = 2λ): each component is (e₀ + (ė₀ + λe₀) t) e^{−λt}; fitting log|e| − log|a +
    b t| over the decay gives λ."""
    rng = np.random.default_rng(30)
    model = random_body(base, rng)
    lam = 2.5
    law = ComputedTorque(model, kp=lam ** 2, kd=2 * lam)
    ref = MovingReference(model.group, 0, rng)
    q0 = model.integrate(ref(0.0)[0], -attitude_offset(law.space, rng))
    t, Q, V = simulate(model, q0, rng.normal(size=model.nv), law.feedback(ref), dt=5e-3, steps=900)
    E, Edot = errors_along(law, t, Q, V, ref)
    poly = E[0] + np.outer(t, Edot[0] + lam * E[0])
    sel = (t > 0.5) & np.all(np.abs(poly) > 1e-3 * np.abs(poly).max(), axis=1)
    for i in range(model.nv):
        rate = -np.polyfit(t[sel], np.log(np.abs(E[sel, i] / poly[sel, i])), 1)[0]
        assert rate == pytest.approx(lam, rel=0.01)


# ----------------------------------------------------------------------------------------------------- Slotine–Li
@pytest.mark.parametrize("base", BASES)
def test_passivity_lyapunov_rate_is_the_designed_negative_form(base):
    """At random states with large errors, dV/dt along the true closed loop (finite differences) equals
    −εᵀK_dε − yᵀK_dy ≤ 0 with our C."""
    rng = np.random.default_rng(40 + BASES.index(base))
    model = random_body(base, rng)
    law = PassivityBased(model, Lambda=rng.uniform(0.5, 2.0, model.nv), kd=rng.uniform(1.0, 4.0, model.nv))
    for _ in range(10):
        q = model.group.random(rng)
        q_d = model.integrate(q, attitude_offset(law.space, rng, angle_deg=rng.uniform(0, 175)))
        v, v_d, a_d = rng.normal(size=(3, model.nv))
        rate = lyapunov_derivative(law, model, q, v, q_d, v_d, a_d)
        designed = law.lyapunov_rate(q, v, q_d, v_d)
        assert designed < 0.0
        assert rate == pytest.approx(designed, rel=1e-6, abs=1e-7)


def test_duindam_stramigioli_coriolis_makes_the_lyapunov_function_increase():
    """SE(3) body with a c.o.m. offset. With our C, V is non-increasing along the closed loop; with Duindam and
    Stramigioli's C_DS = −ad_{Mv}ᵀ in the controller (plant unchanged) V increases: pointwise (dV/dt > 0 at sampled
    states, where sᵀ C_DS s ≠ 0 breaks the skew step) and along a simulated run."""
    rng = np.random.default_rng(50)
    model = random_body("se3", rng, com=[0.3, -0.2, 0.25])
    ours = PassivityBased(model, Lambda=1.0, kd=2.0)
    ds = PassivityBased(DuindamStramigioli(model), Lambda=1.0, kd=2.0)

    # fast reference, small errors: the indefinite extra term −sᵀ(C − C_DS)v_r, of order |s||v||v_r|, then
    # outweighs the designed −εᵀK_dε − yᵀK_dy, of order |s|²
    worst_ours, worst_ds, skew_defect = -np.inf, -np.inf, 0.0
    for _ in range(20):
        q = model.group.random(rng)
        q_d = model.integrate(q, 0.1 * rng.normal(size=6))
        v_d, a_d = 3.0 * rng.normal(size=6), rng.normal(size=6)
        v = SE3.adjoint(SE3.compose(SE3.inverse(q), q_d)) @ v_d + 0.3 * rng.normal(size=6)
        worst_ours = max(worst_ours, lyapunov_derivative(ours, model, q, v, q_d, v_d, a_d))
        worst_ds = max(worst_ds, lyapunov_derivative(ds, model, q, v, q_d, v_d, a_d))
        s = ds.sliding_variable(q, v, q_d, v_d)
        skew_defect = max(skew_defect, abs(s @ ds.model.coriolis_matrix(q, v) @ s))
    print(f"\nmax dV/dt at 20 fast states: ours {worst_ours:.3e}, C_DS {worst_ds:.3e}; max |sᵀ C_DS s| = {skew_defect:.3e}")
    assert worst_ours < 0.0
    assert worst_ds > 0.1
    assert skew_defect > 0.1

    ref = MovingReference(SE3, 0, rng, speed=0.8)
    q0 = model.integrate(ref(0.0)[0], 0.3 * rng.normal(size=6))
    v0 = rng.normal(size=6)
    runs = {}
    for name, law in (("ours", ours), ("C_DS", ds)):
        t, Q, V = simulate(model, q0, v0, law.feedback(ref), dt=5e-3, steps=300)
        lyap = np.array([ours.lyapunov(Q[k], V[k], *ref(t[k])[:2]) for k in range(len(t))])
        runs[name] = np.diff(lyap).max() / lyap[0]
    print(f"largest step increase of V over 1.5 s, relative to V(0): ours {runs['ours']:.2e}, "
          f"C_DS {runs['C_DS']:.2e}")
    assert runs["ours"] < 1e-9
    assert runs["C_DS"] > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("base", BASES)
def test_passivity_tracking_converges_with_non_increasing_lyapunov(base):
    rng = np.random.default_rng(60 + BASES.index(base))
    model = random_body(base, rng)
    law = PassivityBased(model, Lambda=1.5, kd=4.0)
    ref = MovingReference(model.group, 0, rng)
    q0 = model.integrate(ref(0.0)[0], -attitude_offset(law.space, rng))
    t, Q, V = simulate(model, q0, rng.normal(size=model.nv), law.feedback(ref), dt=1e-2, steps=600)
    lyap = np.array([law.lyapunov(Q[k], V[k], *ref(t[k])[:2]) for k in range(len(t))])
    E, _ = errors_along(law, t, Q, V, ref)
    print(f"\n{base}: V {lyap[0]:.3g} -> {lyap[-1]:.3g}, |e| {np.abs(E[0]).max():.3g} -> {np.abs(E[-1]).max():.3g}")
    assert np.diff(lyap).max() <= 1e-9 * lyap[0]
    assert np.abs(E[-1]).max() < 1e-3 * np.abs(E[0]).max()


# ----------------------------------------------------------------------------------------------------- robustness
@pytest.mark.slow
@pytest.mark.parametrize("base", BASES)
def test_computed_torque_with_20_percent_model_error_stays_within_the_derived_bound(base):
    """Controller model: mass +20 %, inertia −20 %; plant: the true body. Then ë + K_d ė + K_p e = d exactly, with
    the disturbance d = −dexp(e)⁻¹ (v̇ − a_cmd) (v̇ from the plant, a_cmd = M̂⁻¹(τ − n̂) what the controller's model
    predicts). With real poles the impulse response of 1/(s² + k_d s + k_p) is non-negative with integral 1/k_p, so
    per component |e(t)| ≤ |e_hom(t)| + sup|d| / k_p (e_hom the disturbance-free solution)."""
    rng = np.random.default_rng(70 + BASES.index(base))
    plant = random_body(base, rng)
    ctrl_model = perturbed(plant, 1.2, 0.8)
    lam1, lam2 = 2.0, 5.0
    kp, kd = lam1 * lam2, lam1 + lam2
    law = ComputedTorque(ctrl_model, kp=kp, kd=kd)
    ref = MovingReference(plant.group, 0, rng)
    q0 = plant.integrate(ref(0.0)[0], -attitude_offset(law.space, rng, angle_deg=90))
    tau = law.feedback(ref)
    t, Q, V = simulate(plant, q0, np.zeros(plant.nv), tau, dt=5e-3, steps=1000)
    E, Edot = errors_along(law, t, Q, V, ref)
    D = np.empty_like(E)
    for k in range(len(t)):
        u = tau(t[k], Q[k], V[k])
        mismatch = plant.forward_dynamics(Q[k], V[k], u) - ctrl_model.forward_dynamics(Q[k], V[k], u)
        D[k] = -law.space.dexp_inv(E[k], mismatch)
    sup_d = np.maximum.accumulate(np.abs(D), axis=0)
    E_hom = two_pole_solution(t, E[0], Edot[0], np.full(plant.nv, lam1), np.full(plant.nv, lam2))
    bound = np.abs(E_hom) + 1.02 * sup_d / kp  # 2 %: sup over the grid vs the true sup
    late = t >= 3.0
    print(f"\n{base}: 20 % model error: max |e| for t ≥ 3 s = {np.abs(E[late]).max():.4f} "
          f"≤ derived bound {bound[late].max():.4f} (sup|d| = {sup_d[-1].max():.3f}, k_p = {kp})")
    assert np.all(np.abs(E) <= bound + 1e-9)
    assert np.abs(E[late]).max() > 1e-4  # the mismatch is felt: the test is not vacuous


def test_passivity_with_20_percent_model_error_stays_within_the_derived_bounds():
    """Slotine–Li with mass +20 %, inertia −20 % in the controller, scalar gains. M ṡ + (C + K_d) s = Δ with Δ the
    difference of the law's torques on the two models (v_r, a_r, s do not depend on the model). From W = ½ sᵀMs:
    √W(t) ≤ √W(0) e^{−k_d t/m̄} + m̄ sup|Δ| / (k_d √(2m)) and |s| ≤ √(2W/m) (m, m̄ the extreme eigenvalues of M).
    Then the error: with g = dexp(e)⁻ᵀe, ė = −dexp(e)⁻¹(s + Λg) and eᵀg = |e|² (dexp(e)⁻¹e = e, ad_e e = 0), so
    d|e|/dt ≤ |s| − Λ|e| where |e| ≥ |s|/(2Λ), hence |e(t)| ≤ |e(0)| e^{−Λt} + sup_{[0,t]}|s| / Λ on any group."""
    rng = np.random.default_rng(80)
    plant = random_body("se3", rng)
    ctrl_model = perturbed(plant, 1.2, 0.8)
    Lam, kd = 2.0, 10.0
    law, law_true = PassivityBased(ctrl_model, Lam, kd), PassivityBased(plant, Lam, kd)
    ref = MovingReference(SE3, 0, rng)
    q0 = plant.integrate(ref(0.0)[0], -attitude_offset(law.space, rng, angle_deg=120))
    t, Q, V = simulate(plant, q0, np.zeros(6), law.feedback(ref), dt=1e-2, steps=500)
    eig = np.linalg.eigvalsh(plant.mass_matrix(q0))
    m_lo, m_hi = eig[0], eig[-1]
    S, Delta = np.empty((len(t), 6)), np.empty(len(t))
    for k in range(len(t)):
        args = (Q[k], V[k], *ref(t[k]))
        S[k] = law.sliding_variable(*args[:4])
        Delta[k] = np.linalg.norm(law(*args) - law_true(*args))
    sup_delta = 1.02 * np.maximum.accumulate(Delta)  # 2 %: sup over the grid vs the true sup
    sqrtW0 = math.sqrt(0.5 * S[0] @ plant.mass_matrix(q0) @ S[0])
    s_bound = math.sqrt(2 / m_lo) * (sqrtW0 * np.exp(-kd * t / m_hi) + m_hi * sup_delta / (kd * math.sqrt(2 * m_lo)))
    s_norm = np.linalg.norm(S, axis=1)
    E, _ = errors_along(law, t, Q, V, ref)
    e_norm = np.linalg.norm(E, axis=1)
    decay = e_norm[0] * np.exp(-Lam * t)
    e_bound_s = decay + 1.02 * np.maximum.accumulate(s_norm) / Lam
    e_bound = decay + np.maximum.accumulate(s_bound) / Lam
    late = t >= 3.0
    print(f"\nse3 Slotine–Li, 20 % model error, t ≥ 3 s: max |s| = {s_norm[late].max():.4f} ≤ bound from Δ "
          f"{s_bound[late].max():.4f}; max |e| = {e_norm[late].max():.4f} ≤ bound from |s| "
          f"{e_bound_s[late].max():.4f} ≤ bound from Δ {e_bound[late].max():.4f}")
    assert np.all(s_norm <= s_bound)
    assert np.all(e_norm <= e_bound_s + 1e-9)
    assert np.all(e_bound_s <= e_bound + 1e-9)
    assert e_norm[late].max() > 1e-3  # the mismatch is felt


# ----------------------------------------------------------------------------------------------------- PD + gravity
@pytest.mark.slow
@pytest.mark.parametrize("base", ["so3", "se3"])
def test_pd_gravity_regulates_a_heavy_body_from_170_degrees(base):
    """A heavy top (so3, c.o.m. 0.3 m off the pivot) and a free body under gravity: constant setpoint 170° away,
    ½vᵀMv + ½eᵀK_pe is non-increasing (V̇ = −vᵀK_dv) and the error converges (LaSalle)."""
    rng = np.random.default_rng(90)
    model = random_body(base, rng, com=[0.0, 0.1, 0.3])
    law = PDGravity(model, kp=6.0, kd=4.0)
    q_d = model.group.random(rng)
    q0 = model.integrate(q_d, -attitude_offset(law.space, rng))
    t, Q, V = simulate(model, q0, np.zeros(model.nv), lambda t, q, v: law(q, v, q_d), dt=1e-2, steps=1500)
    lyap = np.array([law.lyapunov(Q[k], V[k], q_d) for k in range(len(t))])
    e_end = np.abs(law.error(Q[-1], V[-1], q_d)[0]).max()
    print(f"\n{base}: V {lyap[0]:.3g} -> {lyap[-1]:.3g}, |e| {np.deg2rad(170):.3f} -> {e_end:.2e}")
    assert np.diff(lyap).max() <= 1e-9 * lyap[0]
    assert e_end < 1e-4


# ----------------------------------------------------------------------------------------------------- references
def _random_waypoints(space, rng, n=4, with_derivatives=True):
    times = np.cumsum(rng.uniform(0.5, 1.5, size=n))
    q = space.neutral() if space.group is None else np.concatenate(
        [space.group.random(rng), rng.normal(size=space.nq - space.nq_base)])
    positions = [q]
    for _ in range(n - 1):
        positions.append(space.integrate(positions[-1], attitude_offset(space, rng, rng.uniform(10, 170), 1.0)))
    vel = rng.normal(size=(n, space.nv)) if with_derivatives else None
    acc = rng.normal(size=(n, space.nv)) if with_derivatives else None
    return times, np.array(positions), vel, acc


SPACES = [GROUPS[b] for b in BASES] + [3]


@pytest.mark.parametrize("space", SPACES, ids=[getattr(s, "name", f"r{s}") for s in SPACES])
@pytest.mark.parametrize("interpolation", ["quintic", "cubic"])
def test_reference_passes_waypoints_with_consistent_derivatives(space, interpolation):
    """Through every waypoint with its velocity (and acceleration, quintic); v_d and a_d are the first and second
    derivatives of q_d along the group: φ(±h) = log(q(t)⁻¹ q(t ± h)) = ±h v + h²/2 a + O(h³)."""
    rng = np.random.default_rng(100)
    sp = ConfigurationSpace.of(space)
    times, pos, vel, acc = _random_waypoints(sp, rng)
    ref = Reference(space, times, pos, vel, acc if interpolation == "quintic" else None, interpolation=interpolation)
    for i, ti in enumerate(times[:-1]):
        q, v, a = ref(ti)
        np.testing.assert_allclose(sp.difference(pos[i], q), 0.0, atol=1e-12)
        np.testing.assert_allclose(v, vel[i], atol=1e-12)
        if interpolation == "quintic":
            np.testing.assert_allclose(a, acc[i], atol=1e-12)
        q, v, a = ref(times[i + 1] - 1e-10)  # left limit at the next waypoint
        np.testing.assert_allclose(sp.difference(pos[i + 1], q), 0.0, atol=1e-8)
        np.testing.assert_allclose(v, vel[i + 1], atol=1e-7)
        if interpolation == "quintic":
            np.testing.assert_allclose(a, acc[i + 1], atol=1e-6)
    h = 1e-4
    for t in rng.uniform(times[0], times[-1], size=8):
        if np.min(np.abs(times - t)) < 2 * h:
            continue
        q, v, a = ref(t)
        fp, fm = sp.difference(q, ref(t + h)[0]), sp.difference(q, ref(t - h)[0])
        scale = max(1.0, np.abs(a).max())
        np.testing.assert_allclose(v, (fp - fm) / (2 * h), atol=1e-6 * scale)
        np.testing.assert_allclose(a, (fp + fm) / h ** 2, atol=1e-4 * scale)


@pytest.mark.parametrize("compiled", [None, False], ids=["compiled", "numpy"])
def test_a_waypoint_time_starts_the_next_segment(compiled):
    """At a waypoint's time exactly the reference is the segment that starts there (τ = 0: the waypoint's position
    bit for bit, its velocity and acceleration), not the end of the one before it (τ = 1: the same up to rounding);
    just before it, the segment before."""
    times = [0.0, 0.3, 1.1, 1.7]
    pos = np.array([[0.1, -0.7], [0.7, 0.3], [-0.3, 0.9], [0.2, 0.2]])
    vel = np.array([[0.0, 0.0], [0.9, -0.4], [-0.3, 1.3], [0.0, 0.0]])
    acc = np.array([[0.0, 0.0], [2.1, 0.7], [-1.9, 0.2], [0.0, 0.0]])
    ref = Reference(2, times, pos, vel, acc, compiled=compiled)
    for i in (1, 2):
        q, v, a = ref(times[i])
        assert q.tobytes() == pos[i].tobytes(), (i, q - pos[i])
        np.testing.assert_allclose(v, vel[i], atol=1e-12)
        np.testing.assert_allclose(a, acc[i], atol=1e-12)
        q_before = ref(np.nextafter(times[i], -np.inf))[0]
        np.testing.assert_allclose(q_before, pos[i], atol=1e-9)


@pytest.mark.parametrize("base", BASES)
def test_reference_without_derivatives_is_the_geodesic_and_holds_the_ends(base):
    """q(t) = q_i exp(s(t) log(q_i⁻¹ q_{i+1})) with the quintic smoothstep s; rest at the waypoints; the first/last
    point held before/after."""
    rng = np.random.default_rng(110)
    G = GROUPS[base]
    sp = ConfigurationSpace.of(G)
    times, pos, _, _ = _random_waypoints(sp, rng, n=3, with_derivatives=False)
    ref = Reference(G, times, pos)
    for i in range(2):
        xi = sp.difference(pos[i], pos[i + 1])
        T = times[i + 1] - times[i]
        for tau in (0.1, 0.35, 0.8):
            s, ds, dds = (10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5, (30 * tau ** 2 - 60 * tau ** 3 + 30 * tau ** 4) / T,
                          (60 * tau - 180 * tau ** 2 + 120 * tau ** 3) / T ** 2)
            q, v, a = ref(times[i] + tau * T)
            np.testing.assert_allclose(sp.difference(G.integrate(pos[i], s * xi), q), 0.0, atol=1e-12)
            np.testing.assert_allclose(v, ds * xi, atol=1e-12)
            np.testing.assert_allclose(a, dds * xi, atol=1e-11)
    for t, q_end in ((times[0] - 1.0, pos[0]), (times[-1], pos[-1]), (times[-1] + 5.0, pos[-1])):
        q, v, a = ref(t)
        np.testing.assert_allclose(sp.difference(q_end, q), 0.0, atol=1e-14)
        assert not v.any() and not a.any()


def test_reference_stacks_base_and_joints_into_the_model_layout_and_validates():
    rng = np.random.default_rng(120)
    base = Reference(SE3, [0.0, 2.0], [SE3.identity(), SE3.random(rng)])
    joints = Reference(2, [0.0, 1.0, 3.0], [[0.0, 0.0], [1.0, -1.0], [0.5, 0.5]])
    both = stack(base, joints)
    assert (both.nq, both.nv, both.end_time) == (9, 8, 3.0)
    q, v, a = both(0.7)
    for part, sl in ((base(0.7), slice(0, 7)), (joints(0.7), slice(7, 9))):
        np.testing.assert_array_equal(q[sl], part[0])
    np.testing.assert_array_equal(v[6:], joints(0.7)[1])
    single = Reference(2, [1.0], [[0.3, 0.4]])
    np.testing.assert_array_equal(single(0.0)[0], [0.3, 0.4])
    with pytest.raises(ValueError, match="increasing"):
        Reference(2, [0.0, 0.0], [[0, 0], [1, 1]])
    with pytest.raises(ValueError, match="shape"):
        Reference(SE3, [0.0, 1.0], [[0, 0, 0, 0, 0, 0, 1]] * 3)
    with pytest.raises(ValueError, match="cubic"):
        Reference(2, [0.0, 1.0], [[0, 0], [1, 1]], accelerations=np.zeros((2, 2)), interpolation="cubic")
    with pytest.raises(ValueError, match="finite"):
        Reference(2, [0.0, np.nan], [[0, 0], [1, 1]])


@pytest.mark.slow
def test_computed_torque_tracks_a_waypoint_reference():
    """The two pieces together: an SE(3) body follows a quintic waypoint reference (through 170° turns) with the
    designed error dynamics, then holds the last point."""
    rng = np.random.default_rng(130)
    model = random_body("se3", rng)
    sp = ConfigurationSpace.of(model)
    times, pos, vel, acc = _random_waypoints(sp, rng, n=3)
    vel[-1] = acc[-1] = 0.0  # the reference then stays C² when it starts holding the last point
    ref = Reference(model, times, pos, 0.3 * vel, 0.3 * acc)
    lam1, lam2 = 2.0, 6.0
    law = ComputedTorque(model, lam1 * lam2, lam1 + lam2)
    q0 = model.integrate(pos[0], 0.2 * rng.normal(size=6))
    steps = int((times[-1] - times[0] + 3.0) / 5e-3)
    t, Q, V = simulate(model, q0, np.zeros(6), law.feedback(ref), dt=5e-3, steps=steps, t0=times[0])
    E, Edot = errors_along(law, t, Q, V, ref)
    E_design = two_pole_solution(t - t[0], E[0], Edot[0], np.full(6, lam1), np.full(6, lam2))
    # 1e-4, not 1e-6 as with the smooth references above: the quintic's jerk jumps at the waypoints, where RK4 steps
    # that straddle a waypoint lose their order
    assert np.abs(E - E_design).max() < 1e-4 * np.abs(E[0]).max()
    np.testing.assert_allclose(model.difference(Q[-1], pos[-1]), 0.0, atol=1e-3)


# ----------------------------------------------------------------------------------------------------- multibody
def _f(x):
    return " ".join(repr(float(a)) for a in x)


def arm_parameters(rng, joint_types):
    """Random serial arm: per link a mass, a full inertia, a c.o.m. offset; per joint an origin and a unit axis."""
    params = []
    for jtype in ("base",) + tuple(joint_types):
        s = rng.uniform(0.02, 0.3, size=3)
        R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        axis = rng.normal(size=3)
        params.append(dict(type=jtype, mass=rng.uniform(0.5, 3.0), J=R @ np.diag([s[1] + s[2], s[0] + s[2], s[0] + s[1]]) @ R.T,
                           com=0.1 * rng.normal(size=3), xyz=0.3 * rng.normal(size=3), rpy=rng.uniform(-3, 3, 3),
                           axis=axis / np.linalg.norm(axis)))
    return params


def arm_urdf(params, mass_factor=1.0, inertia_factor=1.0):
    links, joints = [], []
    for k, p in enumerate(params):
        J, m = (inertia_factor * p["J"]).tolist(), float(mass_factor * p["mass"])
        links.append(f'<link name="l{k}"><inertial><origin xyz="{_f(p["com"])}" rpy="0 0 0"/><mass value="{m!r}"/>'
                     f'<inertia ixx="{J[0][0]!r}" ixy="{J[0][1]!r}" ixz="{J[0][2]!r}" iyy="{J[1][1]!r}" '
                     f'iyz="{J[1][2]!r}" izz="{J[2][2]!r}"/></inertial></link>')
        if k:
            limit = "" if p["type"] == "continuous" else '<limit lower="-3" upper="3" effort="100" velocity="10"/>'
            joints.append(f'<joint name="j{k}" type="{p["type"]}"><parent link="l{k - 1}"/><child link="l{k}"/>'
                          f'<origin xyz="{_f(p["xyz"])}" rpy="{_f(p["rpy"])}"/><axis xyz="{_f(p["axis"])}"/>{limit}'
                          f'</joint>')
    return '<robot name="arm">' + "".join(links) + "".join(joints) + "</robot>"


#: fixed-base 6-DOF arm (with a continuous and a prismatic joint) and vehicle-manipulators
MULTIBODY = {
    "fixed-arm6": ("fixed", ("revolute", "continuous", "prismatic", "revolute", "revolute", "revolute")),
    "se3-arm4": ("se3", ("revolute", "continuous", "revolute", "prismatic")),
    "se2-arm2": ("se2", ("revolute", "revolute")),
    "schoenflies-scara3": ("schoenflies", ("revolute", "revolute", "prismatic")),
}

needs_multibody = pytest.mark.skipif(not hasattr(Model, "from_urdf"), reason="multibody Model.from_urdf not available")


def multibody(name, rng, mass_factor=1.0, inertia_factor=1.0, params=None):
    base, types = MULTIBODY[name]
    params = arm_parameters(rng, types) if params is None else params
    return Model.from_urdf(arm_urdf(params, mass_factor, inertia_factor), base=base), params


@pytest.mark.slow
@needs_multibody
@pytest.mark.parametrize("name", list(MULTIBODY))
def test_multibody_computed_torque_error_decays_at_designed_rate(name):
    """As on single bodies, on a fixed-base arm and on vehicle-manipulators: base and joint errors (170° base
    attitude error, joint errors of order a radian, moving references) follow the designed dynamics exactly and
    decay at the designed per-DOF rates."""
    rng = np.random.default_rng(140 + list(MULTIBODY).index(name))
    model, _ = multibody(name, rng)
    space = ConfigurationSpace.of(model)
    lam1 = np.linspace(1.2, 2.0, model.nv)
    lam2 = 4.0 * lam1
    law = ComputedTorque(model, kp=lam1 * lam2, kd=lam1 + lam2)
    ref = MovingReference(model.group, model.nv - space.nv_base, rng, model=model)
    delta = attitude_offset(space, rng)
    delta[space.nv_base:] = rng.uniform(-1.0, 1.0, size=model.nv - space.nv_base)
    q0 = model.integrate(ref(0.0)[0], -delta)
    t, Q, V = simulate(model, q0, 0.5 * rng.normal(size=model.nv), law.feedback(ref), dt=1e-2, steps=600)
    E, Edot = errors_along(law, t, Q, V, ref)
    deviation = np.abs(E - two_pole_solution(t, E[0], Edot[0], lam1, lam2)).max()
    rates = np.array([fitted_rate(t, E[:, i], (2.5, 6.0)) for i in range(model.nv)])
    print(f"\n{name}: max |e − e_design| = {deviation:.2e}; fitted rates {np.round(rates, 4).tolist()}\n"
          f"{'':>{len(name) + 2}}designed {np.round(lam1, 4).tolist()}")
    assert deviation < 1e-6 * np.abs(E[0]).max()
    np.testing.assert_allclose(rates, lam1, rtol=0.02)


@needs_multibody
@pytest.mark.parametrize("name", ["fixed-arm6", "se3-arm4"])
def test_multibody_passivity_lyapunov_rate(name):
    rng = np.random.default_rng(150)
    model, _ = multibody(name, rng)
    space = ConfigurationSpace.of(model)
    law = PassivityBased(model, Lambda=rng.uniform(0.5, 2.0, model.nv), kd=rng.uniform(1.0, 4.0, model.nv))
    for _ in range(5):
        q = model.random_configuration(rng)
        delta = attitude_offset(space, rng, angle_deg=rng.uniform(0, 175))
        q_d = model.integrate(q, delta)
        v, v_d, a_d = rng.normal(size=(3, model.nv))
        rate = lyapunov_derivative(law, model, q, v, q_d, v_d, a_d)
        designed = law.lyapunov_rate(q, v, q_d, v_d)
        assert designed < 0.0
        assert rate == pytest.approx(designed, rel=1e-6, abs=1e-7)


@needs_multibody
def test_multibody_passivity_tracking_converges():
    rng = np.random.default_rng(160)
    model, _ = multibody("se3-arm4", rng)
    space = ConfigurationSpace.of(model)
    ref = MovingReference(model.group, model.nv - 6, rng, model=model)
    # matrix K_d shaped by the inertia (Λ scalar, so Λ K_d stays symmetric): every direction damped alike
    law = PassivityBased(model, Lambda=1.5, kd=4.0 * model.mass_matrix(ref(0.0)[0]))
    q0 = model.integrate(ref(0.0)[0], -attitude_offset(space, rng))
    t, Q, V = simulate(model, q0, np.zeros(model.nv), law.feedback(ref), dt=1e-2, steps=600)
    lyap = np.array([law.lyapunov(Q[k], V[k], *ref(t[k])[:2]) for k in range(len(t))])
    E, _ = errors_along(law, t, Q, V, ref)
    print(f"\nse3-arm4 Slotine–Li: V {lyap[0]:.3g} -> {lyap[-1]:.3g}, |e| {np.abs(E[0]).max():.3g} -> "
          f"{np.abs(E[-1]).max():.3g}")
    assert np.diff(lyap).max() <= 1e-9 * lyap[0]
    assert np.abs(E[-1]).max() < 1e-3 * np.abs(E[0]).max()


@needs_multibody
def test_multibody_computed_torque_with_20_percent_model_error_stays_within_the_derived_bound():
    """Vehicle-manipulator; every link's mass +20 % and inertia −20 % in the controller's model; the bound of the
    single-body test, |e(t)| ≤ |e_hom(t)| + sup|d| / k_p per component."""
    rng = np.random.default_rng(170)
    plant, params = multibody("se3-arm4", rng)
    ctrl_model, _ = multibody("se3-arm4", rng, 1.2, 0.8, params=params)
    lam1, lam2 = 2.0, 5.0
    kp = lam1 * lam2
    law = ComputedTorque(ctrl_model, kp=kp, kd=lam1 + lam2)
    space = law.space
    ref = MovingReference(plant.group, plant.nv - 6, rng, model=plant)
    q0 = plant.integrate(ref(0.0)[0], -attitude_offset(space, rng, angle_deg=90))
    tau = law.feedback(ref)
    t, Q, V = simulate(plant, q0, np.zeros(plant.nv), tau, dt=1e-2, steps=500)
    E, Edot = errors_along(law, t, Q, V, ref)
    D = np.empty_like(E)
    for k in range(len(t)):
        u = tau(t[k], Q[k], V[k])
        D[k] = -space.dexp_inv(E[k], plant.forward_dynamics(Q[k], V[k], u) - ctrl_model.forward_dynamics(Q[k], V[k], u))
    sup_d = np.maximum.accumulate(np.abs(D), axis=0)
    E_hom = two_pole_solution(t, E[0], Edot[0], np.full(plant.nv, lam1), np.full(plant.nv, lam2))
    bound = np.abs(E_hom) + 1.02 * sup_d / kp
    late = t >= 3.0
    print(f"\nse3-arm4: 20 % model error: max |e| for t ≥ 3 s = {np.abs(E[late]).max():.4f} ≤ derived bound "
          f"{bound[late].max():.4f} (sup|d| = {sup_d[-1].max():.3f}, k_p = {kp})")
    assert np.all(np.abs(E) <= bound + 1e-9)
    assert np.abs(E[late]).max() > 1e-4


@needs_multibody
def test_multibody_pd_gravity_regulates_a_fixed_base_arm():
    """LaSalle on the fixed-base 6-DOF arm under gravity: V = ½vᵀMv + ½eᵀK_pe non-increasing, e → 0. Matrix gains
    K_p = ω² M(q_d), K_d = 2ω M(q_d): critically damped near the setpoint whatever the link inertias."""
    rng = np.random.default_rng(180)
    model, _ = multibody("fixed-arm6", rng)
    q_d = model.random_configuration(rng)
    omega = 2.0
    law = PDGravity(model, kp=omega ** 2 * model.mass_matrix(q_d), kd=2 * omega * model.mass_matrix(q_d))
    q0 = model.random_configuration(rng)
    t, Q, V = simulate(model, q0, np.zeros(model.nv), lambda t, q, v: law(q, v, q_d), dt=1e-2, steps=1000)
    lyap = np.array([law.lyapunov(Q[k], V[k], q_d) for k in range(len(t))])
    e0, e_end = (np.abs(law.error(Q[k], V[k], q_d)[0]).max() for k in (0, -1))
    print(f"\nfixed-arm6 PD+g: V {lyap[0]:.3g} -> {lyap[-1]:.3g}, |e| {e0:.3f} -> {e_end:.2e}")
    assert np.diff(lyap).max() <= 1e-9 * lyap[0]
    assert e_end < 1e-4 * e0


@needs_multibody
def test_reference_on_a_multibody_configuration_space():
    """Waypoints in the model's layout (continuous joints as (cos, sin)): passes through them, consistent
    derivatives along the configuration space."""
    rng = np.random.default_rng(190)
    model, _ = multibody("se3-arm4", rng)
    sp = ConfigurationSpace.of(model)
    times = np.array([0.0, 1.0, 2.5])
    pos = np.array([model.random_configuration(rng) for _ in times])
    vel, acc = rng.normal(size=(2, 3, model.nv))
    ref = Reference(model, times, pos, vel, acc)
    for i in range(2):
        q, v, a = ref(times[i])
        np.testing.assert_allclose(sp.difference(pos[i], q), 0.0, atol=1e-12)
        np.testing.assert_allclose(v, vel[i], atol=1e-12)
    h = 1e-4
    for t in (0.3, 1.7):
        q, v, a = ref(t)
        fp, fm = sp.difference(q, ref(t + h)[0]), sp.difference(q, ref(t - h)[0])
        np.testing.assert_allclose(v, (fp - fm) / (2 * h), atol=1e-6 * max(1, np.abs(a).max()))
        np.testing.assert_allclose(a, (fp + fm) / h ** 2, atol=1e-4 * max(1, np.abs(a).max()))
