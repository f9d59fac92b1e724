"""mbs_ros.ephs against seed 000 (Lohmayer et al., EPHS): closed forms of eqs. (5) and (8), structure properties
of the primitive components, invariants of the free rigid body (22) and our own Model."""
import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation.integrators import simulate
from mbs_ros.dynamics.lie import SE3
from mbs_ros.ephs import (Dirac, Environment, Onsager, Pattern, Port, Storage, body_spring_damper,
                          canonical_coupling, coadjoint_matrix, damped_oscillator, harmonic_oscillator,
                          linear_spring, mechanical_friction, paper_order, point_mass, rigid_body, spring)

THETA0 = 300.0


def _solve(system, x0, t):
    sol = solve_ivp(lambda _, x: system(x), (0.0, t[-1]), x0, method="DOP853", rtol=1e-12, atol=1e-13, t_eval=t)
    assert sol.success
    return sol.y.T


def _underdamped(m, k, d, y0, v0, t):
    """Closed form of m ÿ + d ẏ + k y = 0: (y, ẏ)."""
    g, w0 = d / (2 * m), np.sqrt(k / m)
    wd = np.sqrt(w0**2 - g**2)
    c, s, e = np.cos(wd * t), np.sin(wd * t), np.exp(-g * t)
    return e * (y0 * c + (v0 + g * y0) / wd * s), e * (v0 * c - (w0**2 * y0 + g * v0) / wd * s)


def test_oscillator_matches_closed_form():
    """Eq. (5) from storage pe, ke and the canonical Dirac structure pkc (Fig. 5)."""
    m, k, q0, p0 = 1.7, 5.3, 0.4, -0.9
    system = harmonic_oscillator(m, k).flatten()
    assert [b.name for b in system.layout] == ["pe", "ke"]
    t = np.linspace(0.0, 10.0, 201)
    xs = _solve(system, system.state({"pe": q0, "ke": p0}), t)
    w = np.sqrt(k / m)
    np.testing.assert_allclose(xs[:, 0], q0 * np.cos(w * t) + p0 / (m * w) * np.sin(w * t), rtol=0, atol=1e-8)
    np.testing.assert_allclose(xs[:, 1], -m * w * q0 * np.sin(w * t) + p0 * np.cos(w * t), rtol=0, atol=1e-8)
    # the outer port p (eq. 5: ṗ = −kq + p.f)
    np.testing.assert_allclose(system(np.array([q0, p0]), {"p": [0.7]}), [p0 / m, -k * q0 + 0.7], rtol=1e-15)


def test_damped_oscillator_closed_form_entropy_and_energy():
    """Eqs. (6)–(8): trajectory, ṡ = dυ²/θ₀ ≥ 0, E_mech + θ₀ s conserved, Dirac power 0, Onsager power ≥ 0."""
    m, k, d, q0, p0, s0 = 1.3, 6.0, 0.7, 0.8, 0.5, 0.1
    system = damped_oscillator(m, k, d, THETA0).flatten()
    assert [b.name for b in system.layout] == ["osc.pe", "osc.ke", "env"]
    t = np.linspace(0.0, 8.0, 161)
    xs = _solve(system, np.array([q0, p0, s0]), t)
    y, v = _underdamped(m, k, d, q0, p0 / m, t)
    np.testing.assert_allclose(xs[:, 0], y, rtol=0, atol=1e-8)
    np.testing.assert_allclose(xs[:, 1], m * v, rtol=0, atol=1e-8)
    s_closed = [s0 + quad(lambda tau: d * _underdamped(m, k, d, q0, p0 / m, tau)[1] ** 2 / THETA0, 0, ti,
                          epsabs=1e-14, epsrel=1e-12, limit=200)[0] for ti in t[::20]]
    np.testing.assert_allclose(xs[::20, 2], s_closed, rtol=0, atol=1e-11)
    total = 0.5 * k * xs[:, 0] ** 2 + xs[:, 1] ** 2 / (2 * m) + THETA0 * xs[:, 2]
    np.testing.assert_allclose(total, total[0], rtol=1e-10)
    np.testing.assert_allclose([system.energy(x) for x in xs], total, rtol=1e-14)
    assert xs[-1, 2] - s0 > 0.9 * (total[0] - THETA0 * s0) / THETA0  # most of the energy has become entropy
    for x in xs:
        sigma, powers = system.entropy_production(x), system.powers(x)
        assert sigma >= 0.0
        np.testing.assert_allclose(sigma, d * (x[1] / m) ** 2 / THETA0, rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(system(x)[2], sigma, rtol=1e-13, atol=1e-300)
        assert abs(powers["osc.pkc"]) <= 1e-12 * (k * abs(x[0]) * abs(x[1]) / m + 1e-300)
        np.testing.assert_allclose(powers["mf"], THETA0 * sigma, rtol=1e-13, atol=1e-300)


def _library():
    return {"oscillator": harmonic_oscillator(1.0, 2.0), "damped": damped_oscillator(1.0, 2.0, 0.3, THETA0),
            "bsd": body_spring_damper(2.0, 3.0, 0.4, q0=0.2, theta0=THETA0),
            "rigid_body": rigid_body(2.0, np.diag([.2, .3, .4])),
            "rigid_body_gravity": rigid_body(2.0, np.diag([.2, .3, .4]), g=(0, 0, 9.81)),
            "friction6": Pattern({"mf": mechanical_friction(np.diag([1., 2., 0., .5, 0., 3.]) + 0.1, THETA0, 6,
                                                            "rigid_body_momentum"),
                                  "ke": Storage(Port("p", "rigid_body_momentum", 6), lambda p: 0.5 * p @ p,
                                                lambda p: p),
                                  "env": Environment(THETA0)}, {"p": ["mf.p", "ke.p"], "s": ["mf.s", "env.s"]})}


def _random_states(rng, ports):
    return [p.group.random(rng) if p.group is not None else rng.normal(size=p.dim) for p in ports]


def test_structures_power_neutral_and_onsager_psd():
    """Every Dirac structure of the library: Σ⟨e|f⟩ = 0; every Onsager matrix symmetric ≥ 0 with the driving
    forces (energy-picture efforts, eq. 6: (υ, θ)) in its kernel, exergy destruction ≥ 0, energy conserved."""
    rng = np.random.default_rng(0)
    counts = {Dirac: 0, Onsager: 0}
    for name, pattern in _library().items():
        for path, comp in pattern.primitives():
            if not isinstance(comp, (Dirac, Onsager)):
                continue
            counts[type(comp)] += 1
            for _ in range(50):
                states = _random_states(rng, comp.ports)
                efforts = [None if not p.power else (rng.uniform(-0.6, 3.0, 1) * THETA0 if p.kind == "entropy"
                                                    else 3.0 * rng.normal(size=p.dim)) for p in comp.ports]
                flows = comp.flows(states, efforts)
                power = sum(e @ f for e, f in zip(efforts, flows) if e is not None)
                scale = sum(np.linalg.norm(e) * np.linalg.norm(f) for e, f in zip(efforts, flows) if e is not None)
                if isinstance(comp, Dirac):
                    assert abs(power) <= 1e-12 * scale, (name, path)
                    continue
                M, drive = comp.matrix(states, efforts), comp.driving_forces(efforts)
                nM = np.linalg.norm(M)
                np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-14 * nM)
                assert np.linalg.eigvalsh(M)[0] >= -1e-12 * nM, (name, path)
                assert np.linalg.norm(M @ drive) <= 1e-12 * nM * np.linalg.norm(drive), (name, path)
                assert power >= -1e-12 * scale, (name, path)
                energy_rate = sum(drive[i:i + p.dim] @ f for p, f, i in
                                  zip(comp.ports, flows, np.cumsum([0] + [p.dim for p in comp.ports])))
                assert abs(energy_rate) <= 1e-12 * np.linalg.norm(drive) * np.linalg.norm(np.concatenate(flows))
    assert counts[Dirac] >= 7 and counts[Onsager] >= 3


def test_coadjoint_is_eq_15_in_both_orderings():
    """coadjoint_matrix(p) u = ad*_u p: our SE3.ad(u)ᵀ p, and eq. (15) written in the paper's (ω, υ) order."""
    rng = np.random.default_rng(1)
    for _ in range(10):
        u, p = rng.normal(size=6), rng.normal(size=6)
        K = coadjoint_matrix(p)
        np.testing.assert_allclose(K @ u, SE3.ad(u).T @ p, rtol=0, atol=1e-14)
        w, ups = paper_order(u)[:3], paper_order(u)[3:]
        pw, pu = paper_order(p)[:3], paper_order(p)[3:]
        np.testing.assert_allclose(paper_order(K @ u), np.concatenate([np.cross(pw, w) + np.cross(pu, ups),
                                                                        np.cross(pu, w)]), rtol=0, atol=1e-14)


def _rigid_setup(seed=2):
    rng = np.random.default_rng(seed)
    m = 2.5
    R = SE3.as_matrix(SE3.random(rng))[:3, :3]
    J = R @ np.diag([0.2, 0.45, 0.6]) @ R.T
    return rng, m, J, SE3.random(rng), rng.normal(size=6) * np.array([1.0, 1.0, 1.0, 0.4, 0.4, 0.4])


@pytest.mark.slow
def test_free_rigid_body_invariants():
    """Eq. (22) without gravity conserves E, |p_υ|², p_ω·p_υ and Ad*_{q⁻¹} p (world-frame momentum)."""
    _, m, J, q0, p0 = _rigid_setup()
    system = rigid_body(m, J).flatten()
    assert [(b.name, b.x, b.dx) for b in system.layout] == [("pe", slice(0, 7), slice(0, 6)),
                                                            ("ke", slice(7, 13), slice(6, 12))]
    _, xs = system.simulate(system.state({"pe": q0, "ke": p0}), 1e-3, 4000)
    qs, ps = xs[:, :7], xs[:, 7:]
    E = 0.5 * np.einsum("ni,ni->n", ps[:, 3:], np.linalg.solve(J, ps[:, 3:].T).T) + 0.5 * np.sum(ps[:, :3] ** 2, 1) / m
    np.testing.assert_allclose(E, E[0], rtol=1e-11)
    np.testing.assert_allclose([system.energy(x) for x in xs[::400]], E[::400], rtol=1e-14)
    np.testing.assert_allclose(np.sum(ps[:, :3] ** 2, axis=1), p0[:3] @ p0[:3], rtol=1e-11)
    np.testing.assert_allclose(np.sum(ps[:, :3] * ps[:, 3:], axis=1), p0[:3] @ p0[3:], rtol=0, atol=1e-11)
    h = np.array([SE3.adjoint(SE3.inverse(q)).T @ p for q, p in zip(qs, ps)])
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), rtol=0, atol=1e-10)
    assert np.linalg.norm(ps[-1, 3:] - p0[3:]) > 0.1  # the body momentum does move (gyroscopic terms)


@pytest.mark.slow
@pytest.mark.parametrize("gravity", [None, (0.0, 0.0, -9.81)])
def test_rigid_body_matches_model(gravity):
    """The layer's eq. (22) and Model.rigid_body("se3") integrate to the same pose and body momentum
    (Model's gravity is an acceleration; the paper's g a covector, its negative)."""
    _, m, J, q0, p0 = _rigid_setup(3)
    g_acc = np.zeros(3) if gravity is None else np.array(gravity)
    system = rigid_body(m, J, g=None if gravity is None else -g_acc).flatten()
    model = Model.rigid_body("se3", mass=m, inertia=J, gravity=g_acc)
    v0 = np.linalg.solve(model.I_b, p0)
    dt, steps = 1e-3, 3000
    _, qs, vs = simulate(model, q0, v0, np.zeros(6), dt, steps)
    _, xs = system.simulate(system.state({"pe": q0, "ke": p0}), dt, steps)
    for n in range(0, steps + 1, 500):
        np.testing.assert_allclose(SE3.as_matrix(xs[n, :7]), SE3.as_matrix(qs[n]), rtol=0, atol=1e-8)
        np.testing.assert_allclose(xs[n, 7:], model.I_b @ vs[n], rtol=0, atol=1e-8)
    if gravity is not None:
        assert qs[-1][2] < q0[2] - 10.0  # it fell
        E = [system.energy(x) for x in xs]
        np.testing.assert_allclose(E, E[0], rtol=0, atol=1e-9 * max(1.0, abs(E[0])))


BSD_URDF = """<robot name="body_spring_damper">
  <link name="base"/>
  <link name="slider"><inertial><origin xyz="0 0 0"/><mass value="{m}"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="slider"/><axis xyz="1 0 0"/>
    <limit lower="-10" upper="10" effort="100" velocity="100"/>
    <dynamics damping="{d}" spring_stiffness="{k}" spring_reference="{q0}"/></joint>
</robot>"""


def test_body_spring_damper_matches_model():
    """Mass + spring + damper composed by the layer = Model.from_urdf of a prismatic joint with
    <dynamics damping spring_stiffness spring_reference>; E and s against closed forms."""
    m, k, d, q0, x0, v0 = 2.0, 8.0, 0.6, 0.25, 1.0, 0.5
    dt, steps = 1e-3, 4000
    model = Model.from_urdf(BSD_URDF.format(m=m, k=k, d=d, q0=q0))
    t, qs, vs = simulate(model, np.array([x0]), np.array([v0]), np.zeros(1), dt, steps)
    system = body_spring_damper(m, k, d, q0=q0, theta0=THETA0).flatten()
    assert [b.name for b in system.layout] == ["body", "spring.pe", "damper.env"]
    _, xs = system.simulate(system.state({"body": m * v0, "spring.pe": x0}), dt, steps)
    np.testing.assert_allclose(xs[:, 1], qs[:, 0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(xs[:, 0] / m, vs[:, 0], rtol=0, atol=1e-8)
    y, v = _underdamped(m, k, d, x0 - q0, v0, t)
    E_closed = 0.5 * m * v**2 + 0.5 * k * y**2
    E_layer = np.array([system.exergy(x) for x in xs])  # kinetic + spring (the environment's exergy is 0)
    np.testing.assert_allclose(E_layer, E_closed, rtol=0, atol=1e-9)
    s_closed = [quad(lambda tau: d * _underdamped(m, k, d, x0 - q0, v0, tau)[1] ** 2 / THETA0, 0, ti,
                     epsabs=1e-14, epsrel=1e-12, limit=200)[0] for ti in t[::500]]
    np.testing.assert_allclose(xs[::500, 2], s_closed, rtol=0, atol=1e-11)
    assert E_closed[-1] < 0.5 * E_closed[0]


def test_nesting_is_functorial():
    """Fig. 6 with the oscillator of Fig. 5 nested, the flat Fig. 7 and the body + spring + damper regrouping all
    flatten to the same ODE (eq. 8)."""
    m, k, d = 1.1, 3.0, 0.4
    pe, ke = spring(k), point_mass(m)
    flat = Pattern({"pe": pe, "ke": ke, "pkc": canonical_coupling(pe.port, ke.port),
                    "mf": mechanical_friction(d, THETA0), "env": Environment(THETA0)},
                   {"q": ["pe.q", "pkc.q"], "p": ["ke.p", "pkc.p", "mf.p"], "s": ["mf.s", "env.s"]}).flatten()
    nested = damped_oscillator(m, k, d, THETA0).flatten()
    regrouped = body_spring_damper(m, k, d, theta0=THETA0).flatten()
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, p, s = rng.normal(size=3)
        np.testing.assert_array_equal(nested(np.array([q, p, s])), flat(np.array([q, p, s])))
        np.testing.assert_allclose(regrouped(np.array([p, q, s]))[[1, 0, 2]], flat(np.array([q, p, s])),
                                   rtol=1e-15, atol=0)


def test_pattern_checks():
    """Junctions join ports of one quantity; an explicit ODE needs one storage per junction."""
    pe, ke = spring(1.0), point_mass(1.0)
    with pytest.raises(ValueError, match="junction 'q'"):
        Pattern({"pe": pe, "ke": ke}, {"q": ["pe.q", "ke.p"]})
    with pytest.raises(ValueError, match="not joined"):
        Pattern({"pe": pe, "ke": ke}, {"q": ["pe.q"]})
    with pytest.raises(ValueError, match="without a storage"):
        linear_spring(1.0).flatten()
    with pytest.raises(ValueError, match="two storages"):
        Pattern({"a": point_mass(1.0), "b": point_mass(2.0)}, {"p": ["a.p", "b.p"]}).flatten()


def test_state_port_modulates_a_dirac_structure():
    """A state port (dashed line, Fig. 3) feeds the state c of a storage into J(c) = c [[0, -1], [1, 0]] acting
    on a planar momentum: ṗ = −J(c) p/m rotates p at rate c/m, and c, which exchanges no power, stays put."""
    m, c0, p0 = 2.0, 0.7, np.array([1.0, -0.5])
    P, C = Port("p", "momentum", 2), Port("c", "displacement")
    gyro = Dirac([P, C.as_state_port()], lambda p, c: c[0] * np.array([[0.0, -1.0], [1.0, 0.0]]))
    pattern = Pattern({"ke": Storage(P, lambda p: 0.5 * p @ p / m, lambda p: p / m),
                       "c": Storage(C, lambda c: 0.5 * c[0] ** 2), "gyro": gyro},
                      {"p": ["ke.p", "gyro.p"], "c": ["c.c", "gyro.c"]})
    system = pattern.flatten()
    t = np.linspace(0.0, 5.0, 11)
    xs = _solve(system, system.state({"ke": p0, "c": c0}), t)
    a = -c0 * t / m
    np.testing.assert_allclose(xs[:, 0], np.cos(a) * p0[0] - np.sin(a) * p0[1], rtol=0, atol=1e-9)
    np.testing.assert_allclose(xs[:, 1], np.sin(a) * p0[0] + np.cos(a) * p0[1], rtol=0, atol=1e-9)
    np.testing.assert_allclose(xs[:, 2], c0, rtol=0, atol=1e-15)


def test_numerical_effort_matches_gradient():
    """Storage without a gradient: central differences (vector and left-trivialised on SE(3))."""
    rng = np.random.default_rng(5)
    E = lambda x: np.sin(x[0]) * x[1] ** 2 + np.exp(0.3 * x[0])  # noqa: E731
    dE = lambda x: np.array([np.cos(x[0]) * x[1] ** 2 + 0.3 * np.exp(0.3 * x[0]),  # noqa: E731
                             2 * np.sin(x[0]) * x[1]])
    port = Port("x", "displacement", 2)
    for _ in range(5):
        x = rng.normal(size=2) * 3
        np.testing.assert_allclose(Storage(port, E).effort(x), dE(x), rtol=1e-8, atol=1e-8)
    analytic = dict(rigid_body(2.0, np.eye(3), g=(0.3, -0.2, 9.81)).primitives())["pe"]
    numeric = Storage(analytic.port, analytic.energy)
    for _ in range(5):
        q = SE3.random(rng)
        np.testing.assert_allclose(numeric.effort(q), analytic.effort(q), rtol=0, atol=1e-8)
