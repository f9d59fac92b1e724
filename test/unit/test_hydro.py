"""Bodies in water (issue 11, seed 003 and Fossen): added mass over a tree, buoyancy, damping, a current, thrusters
and joint springs/friction (mbs_ros/dynamics/model/passive.py), against closed forms and invariants; the compiled
kernels against the numpy reference."""
import math

import numpy as np
import pytest

from mbs_ros.dynamics import Model

from mbs_ros.dynamics.kernels import compiled
from mbs_ros.dynamics.simulation.integrators import simulate
from mbs_ros.dynamics.model.passive import thrust_response
from mbs_ros.dynamics.model.urdf import ModelError


def _spd(rng, n=6, scale=1.0):
    A = rng.normal(size=(n, n))
    return scale * (A @ A.T / n + 0.1 * np.eye(n))


def _nums(a):
    return " ".join(repr(float(x)) for x in np.ravel(a))


def _hydro(rng, volume=0.002, damping=True, scale=1.0):
    D_L = _nums(_spd(rng, scale=0.5 * scale)) if damping else "0 0 0 0 0 0"
    D_Q = _nums(rng.uniform(0.1, 2.0, 6) * scale) if damping else "0 0 0 0 0 0"
    return (f'<hydrodynamics><origin xyz="{_nums(rng.normal(scale=0.05, size=3))}" '
            f'rpy="{_nums(rng.uniform(-1, 1, 3))}"/>'
            f'<added_mass>{_nums(_spd(rng, scale=0.3 * scale))}</added_mass>'
            f'<linear_damping>{D_L}</linear_damping><quadratic_damping>{D_Q}</quadratic_damping>'
            f'<buoyancy volume="{volume}" xyz="{_nums(rng.normal(scale=0.02, size=3))}"/></hydrodynamics>')


def _link(name, rng, hydro=True, mass=1.0, **kw):
    J = np.diag(rng.uniform(1.0, 1.5, 3)) * 0.01  # principal moments that a real body can have
    h = _hydro(rng, **kw) if hydro else ""
    return (f'<link name="{name}"><inertial><origin xyz="{_nums(rng.normal(scale=0.05, size=3))}"/>'
            f'<mass value="{mass}"/><inertia ixx="{J[0, 0]}" ixy="{J[0, 1]}" ixz="{J[0, 2]}" iyy="{J[1, 1]}" '
            f'iyz="{J[1, 2]}" izz="{J[2, 2]}"/></inertial>{h}</link>')


def _joint(name, parent, child, jtype, rng, dynamics=""):
    axis = rng.normal(size=3)
    lim = '<limit lower="-3" upper="3" effort="100" velocity="10"/>' if jtype in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{_nums(rng.normal(scale=0.2, size=3))}" rpy="{_nums(rng.uniform(-1, 1, 3))}"/>'
            f'<axis xyz="{_nums(axis)}"/>{lim}{dynamics}</joint>')


def uvms_urdf(seed=0, damping=True, joint_dynamics=False, volume=0.002, scale=1.0):
    """A random vehicle (base_link) with a fixed sensor pod (both in water) carrying a 4-joint branched arm whose
    links are in water too."""
    rng = np.random.default_rng(seed)
    dyn = ('<dynamics damping="0.3" friction="0.2" friction_velocity="0.05" spring_stiffness="2.0" '
           'spring_reference="0.1"/>') if joint_dynamics else ""
    links = [_link("base_link", rng, mass=8.0, damping=damping, volume=0.008, scale=scale),
             _link("pod", rng, mass=0.5, damping=damping, volume=volume, scale=scale),
             _link("l1", rng, damping=damping, volume=volume, scale=scale),
             _link("l2", rng, damping=damping, volume=volume, scale=scale),
             _link("l3", rng, hydro=False), _link("l4", rng, damping=damping, volume=volume, scale=scale)]
    joints = [_joint("pod_mount", "base_link", "pod", "fixed", rng),
              _joint("j1", "base_link", "l1", "revolute", rng, dyn),
              _joint("j2", "l1", "l2", "continuous", rng, dyn.replace(' spring_stiffness="2.0"', "")),
              _joint("j3", "l2", "l3", "prismatic", rng, dyn),
              _joint("j4", "l1", "l4", "revolute", rng, dyn)]
    return f'<robot name="uvms">{"".join(links)}{"".join(joints)}</robot>'


@pytest.fixture(scope="module")
def uvms():
    return Model.from_urdf(uvms_urdf(joint_dynamics=True), base="se3")


def _state(model, seed):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng, 1.0), rng.normal(size=model.nv), rng.normal(size=model.nv)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not importable (or MBS_BACKEND=numpy)")
@pytest.mark.parametrize("base", ["se3", "so3xr3", "schoenflies", "se2", "fixed"])
def test_compiled_matches_numpy_reference_with_water(base):
    model = Model.from_urdf(uvms_urdf(1, joint_dynamics=True), base=base).with_current([0.3, -0.2, 0.1],
                                                                                       [0.05, 0.02, -0.01])
    assert model.backend == "compiled"
    ref = model.with_backend("numpy")
    for seed in range(3):
        q, v, a = _state(model, seed)
        for name, args in (("mass_matrix", (q,)), ("coriolis_matrix", (q, v)), ("gravity_forces", (q,)),
                           ("nonlinear_effects", (q, v)), ("inverse_dynamics", (q, v, a)),
                           ("forward_dynamics", (q, v, a)), ("passive_forces", (q, v))):
            got, want = getattr(model, name)(*args), getattr(ref, name)(*args)
            np.testing.assert_allclose(got, want, atol=1e-10 * (1 + np.abs(want).max()), err_msg=name)
        p_c = model.passive_terms(q, v)[1]
        p_n = ref.passive_terms(q, v)[1]
        assert p_c == pytest.approx(p_n, rel=1e-10) and p_c > 0
        # one compiled step (passive forces inside) against the numpy step
        from mbs_ros.dynamics.simulation.integrators import step

        q1, v1 = step(model, q, v, a, 1e-3)
        q2, v2 = step(ref, q, v, a, 1e-3)
        np.testing.assert_allclose(v1, v2, atol=1e-11)
        np.testing.assert_allclose(q1, q2, atol=1e-12)


def test_gravity_forces_are_the_gradient_of_weight_and_buoyancy(uvms):
    """g(q) = ∂V/∂q along the group, V = gravity on the rigid mass + buoyancy + springs (added mass weightless)."""
    model = uvms.with_backend("numpy")
    for seed in range(3):
        q, _, _ = _state(model, seed)
        g = uvms.gravity_forces(q)
        tau_spring = uvms.passive_forces(q, np.zeros(uvms.nv)) - uvms.passive_forces(q, np.zeros(uvms.nv),
                                                                                        springs=False)
        grad = np.zeros(model.nv)
        h = 1e-6
        for k in range(model.nv):
            e = np.zeros(model.nv)
            e[k] = h
            grad[k] = (model.potential_energy(model.integrate(q, e)) - model.potential_energy(model.integrate(q, -e)))
            grad[k] /= 2 * h
        np.testing.assert_allclose(g - tau_spring, grad, atol=1e-6 * (1 + np.abs(grad).max()))
    # a rigid robot of the same links has a different g (the buoyancy) but the same weight part
    assert np.abs(uvms.gravity_forces(q) - Model.from_urdf(uvms_urdf(joint_dynamics=True).replace(
        "hydrodynamics", "ignored"), base="se3").gravity_forces(q)).max() > 1e-3


def test_mass_matrix_includes_added_mass_and_coriolis_stays_skew(uvms):
    rigid = Model.from_urdf(uvms_urdf(joint_dynamics=True).replace("hydrodynamics", "ignored"), base="se3")
    q, v, _ = _state(uvms, 4)
    dM = uvms.mass_matrix(q) - rigid.mass_matrix(q)
    # the fluid's inertia adds in every direction but the prismatic j3's, which moves only l3 (not in water)
    assert np.linalg.eigvalsh(dM)[0] > -1e-12
    keep = [i for i in range(uvms.nv) if i != 6 + uvms.joint_names.index("j3")]
    assert np.linalg.eigvalsh(dM[np.ix_(keep, keep)])[0] > 1e-6
    assert abs(dM[6 + uvms.joint_names.index("j3")]).max() < 1e-12
    # Ṁ − 2C skew (finite difference of M along the motion)
    h = 1e-6
    Md = (uvms.mass_matrix(uvms.integrate(q, v, h)) - uvms.mass_matrix(uvms.integrate(q, v, -h))) / (2 * h)
    N = Md - 2 * uvms.coriolis_matrix(q, v)
    assert np.abs(N + N.T).max() < 1e-6 * np.abs(Md).max()


def test_torque_free_motion_in_ideal_fluid_conserves_kirchhoff_invariants():
    """No gravity, no damping, no current: T, the spatial momentum (fluid impulse included) and, for one body,
    Kirchhoff's |P|² and P·Π are conserved (seed 003 §5)."""
    model = Model.from_urdf(uvms_urdf(2, damping=False), base="se3", gravity=(0, 0, 0))
    assert not model.passive.has_loads
    q, v, _ = _state(model, 5)
    t, qs, vs = simulate(model, q, v, np.zeros(model.nv), 1e-3, 2000)
    T = [model.kinetic_energy(a, b) for a, b in zip(qs[::200], vs[::200])]
    h = np.array([model.spatial_momentum(a, b) for a, b in zip(qs[::200], vs[::200])])
    assert np.ptp(T) < 1e-9 * T[0]
    assert np.abs(h - h[0]).max() < 1e-9 * np.abs(h[0]).max()
    rng = np.random.default_rng(3)
    body = Model.rigid_body("se3", mass=3.0, inertia=np.diag([0.1, 0.2, 0.3]), com=(0.05, 0, 0.02),
                            added_mass=_spd(rng, scale=2.0), gravity=(0, 0, 0))
    t, qs, vs = simulate(body, body.neutral(), rng.normal(size=6), np.zeros(6), 1e-3, 3000)
    P = vs @ body.I_b.T  # body momenta [P; Π]
    for inv in (np.einsum("ij,ij->i", P[:, :3], P[:, :3]), np.einsum("ij,ij->i", P[:, :3], P[:, 3:]),
                0.5 * np.einsum("ij,ij->i", vs, P)):
        assert np.ptp(inv) < 1e-9 * max(1.0, abs(inv[0]))


def test_damping_drains_energy_by_exactly_the_dissipated_power():
    model = Model.from_urdf(uvms_urdf(3, joint_dynamics=True), base="se3")
    q, v, _ = _state(model, 6)
    dt, n = 1e-3, 1500
    t, qs, vs = simulate(model, q, 3 * v, np.zeros(model.nv), dt, n)
    E = np.array([model.kinetic_energy(a, b) + model.potential_energy(a) for a, b in zip(qs, vs)])
    P = np.array([model.passive_terms(a, b)[1] for a, b in zip(qs, vs)])
    dissipated = np.concatenate([[0.0], np.cumsum(0.5 * dt * (P[1:] + P[:-1]))])
    assert dissipated[-1] > 1.0 and E[-1] < E[0] - 1.0  # the dampers took energy, and the model lost it
    residual = E - E[0] + dissipated
    assert np.abs(residual).max() < 1e-4 * dissipated[-1]
    # the port bookkeeping says the same at a state: dE/dt = −Σ dissipated (no input)
    ports = model.energy_ports(qs[700], vs[700])
    dEdt = (E[701] - E[699]) / (2 * dt)
    assert sum(ports["dissipators"].values()) == pytest.approx(P[700], rel=1e-9)
    assert dEdt == pytest.approx(-P[700], rel=1e-4)
    assert all(x >= 0 for x in ports["dissipators"].values())
    assert ports["entropy_production"] == pytest.approx(P[700] / ports["temperature"])


def _lamb_coefficients(a, b):
    """Lamb's added-mass coefficients of a prolate spheroid (semi-axes a > b = c): along and across the axis."""
    e = math.sqrt(1 - (b / a) ** 2)
    L = math.log((1 + e) / (1 - e))
    alpha0 = 2 * (1 - e * e) / e ** 3 * (0.5 * L - e)
    beta0 = 1 / e ** 2 - (1 - e * e) / (2 * e ** 3) * L
    return alpha0 / (2 - alpha0), beta0 / (2 - beta0)


def test_munk_moment_of_a_prolate_spheroid_matches_its_closed_form():
    rho, a, b = 1025.0, 1.0, 0.2
    vol = 4 / 3 * math.pi * a * b * b
    k1, k2 = _lamb_coefficients(a, b)
    m = rho * vol  # neutrally buoyant
    MA = np.diag([k1 * m, k2 * m, k2 * m, 0.0, 0.1, 0.1])
    body = Model.rigid_body("se3", mass=m, inertia=np.diag([0.4 * m * b * b, 0.2 * m * (a * a + b * b),
                                                            0.2 * m * (a * a + b * b)]), added_mass=MA,
                            gravity=(0, 0, 0))
    for alpha in (0.1, 0.5, 1.0):
        U = 2.0
        v = np.array([U * math.cos(alpha), U * math.sin(alpha), 0, 0, 0, 0])
        tau = body.inverse_dynamics(body.neutral(), v, np.zeros(6))  # what holds it in steady translation
        munk = (k2 - k1) * m * U * U * math.sin(alpha) * math.cos(alpha)  # the fluid turns it broadside
        assert tau[5] == pytest.approx(munk, rel=1e-12)
        assert np.abs(tau[:5]).max() < 1e-9 * abs(munk)


def test_body_drifting_with_the_current_feels_nothing():
    model = Model.from_urdf(uvms_urdf(4), base="se3", gravity=(0, 0, 0))
    U = np.array([0.4, -0.3, 0.2])
    model = model.with_current(U)
    q = model.configuration_from_pose([0, 0, 0], [0.1, 0.2, 0.3, 0.9], model.neutral()[7:])
    R = model.base_rotation(q)
    v = np.zeros(model.nv)
    v[:3] = R.T @ U  # every body moves with the water, no rotation
    # τ_p is not zero (it takes back the Munk moment C v of the added mass, which moves with the water), but no
    # acceleration results and no damper works
    np.testing.assert_allclose(model.forward_dynamics(q, v, model.passive_forces(q, v)), 0.0, atol=1e-12)
    assert model.passive_terms(q, v)[1] == pytest.approx(0.0, abs=1e-15)
    t, qs, vs = simulate(model, q, v, np.zeros(model.nv), 1e-3, 500)
    np.testing.assert_allclose(vs[-1], v, atol=1e-10)
    np.testing.assert_allclose(qs[-1][:3], U * 0.5, atol=1e-10)
    # at rest in the same current it is dragged along (with energy from the current port)
    q0 = model.neutral()
    tau = model.passive_forces(q0, np.zeros(model.nv))
    assert tau[:3] @ U > 0
    # at rest the body gains nothing: what the current supplies is what its drag dissipates
    ports = model.energy_ports(q0, np.zeros(model.nv))
    assert ports["ports"]["current"] == pytest.approx(sum(ports["dissipators"].values()), rel=1e-12)
    assert ports["ports"]["current"] > 0


def test_neutral_body_follows_an_accelerating_current():
    """Added mass and Froude–Krylov: a neutrally buoyant body at rest in water accelerating at U̇ accelerates at U̇."""
    rng = np.random.default_rng(5)
    rho, vol = 1000.0, 0.004
    urdf = (f'<robot name="b"><link name="base_link"><inertial><mass value="{rho * vol}"/><inertia ixx="0.01" '
            f'iyy="0.02" izz="0.03" ixy="0" ixz="0" iyz="0"/></inertial><hydrodynamics><added_mass>'
            f'{_nums(_spd(rng))}</added_mass><buoyancy volume="{vol}"/></hydrodynamics></link></robot>')
    Ud = np.array([0.3, -0.1, 0.2])
    model = Model.from_urdf(urdf, base="se3").with_current([0, 0, 0], Ud)
    q = model.neutral()
    a = model.forward_dynamics(q, np.zeros(6), model.passive_forces(q, np.zeros(6)))
    np.testing.assert_allclose(a, np.concatenate([Ud, np.zeros(3)]), atol=1e-12)


def test_joint_spring_damper_matches_the_damped_oscillator():
    m, k, d, x0 = 2.0, 50.0, 1.5, 0.3
    urdf = ('<robot name="osc"><link name="base"/><link name="slider"><inertial><mass value="2.0"/><inertia '
            'ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="x" '
            'type="prismatic"><parent link="base"/><child link="slider"/><axis xyz="1 0 0"/><limit lower="-1" '
            f'upper="1" effort="10" velocity="10"/><dynamics damping="{d}" spring_stiffness="{k}" '
            'spring_reference="0.1"/></joint></robot>')
    model = Model.from_urdf(urdf)
    t, qs, vs = simulate(model, np.array([0.1 + x0]), np.array([0.0]), np.zeros(1), 1e-3, 2000)
    w0, zeta = math.sqrt(k / m), d / (2 * math.sqrt(k * m))
    wd = w0 * math.sqrt(1 - zeta ** 2)
    x = 0.1 + x0 * np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t))
    np.testing.assert_allclose(qs[:, 0], x, atol=1e-9)
    assert model.potential_energy(np.array([0.1 + x0])) - model.potential_energy(np.array([0.1])) == \
        pytest.approx(0.5 * k * x0 * x0)


def test_coulomb_friction_is_smoothed_and_dissipative():
    urdf = ('<robot name="f"><link name="base"/><link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="1"/>'
            '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j" '
            'type="continuous"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/><dynamics friction="0.4"'
            ' friction_velocity="0.02"/></joint></robot>')
    model = Model.from_urdf(urdf)
    q = model.neutral()
    for rate in (-2.0, -0.01, 0.0, 0.01, 2.0):
        tau = model.passive_forces(q, np.array([rate]))[0]
        assert tau == pytest.approx(-0.4 * math.tanh(rate / 0.02))
        assert model.passive_terms(q, np.array([rate]))[1] >= 0


def test_thrust_response_is_the_exact_first_order_lag():
    T0, u, tc, dt = np.array([0.0, 10.0, 5.0]), np.array([20.0, -10.0, 5.0]), np.array([0.1, 0.05, 0.0]), 0.02
    end, mean = thrust_response(T0, u, tc, dt)
    for i in range(2):
        exact_end = u[i] + (T0[i] - u[i]) * math.exp(-dt / tc[i])
        ts = np.linspace(0, dt, 20001)
        exact_mean = np.trapezoid(u[i] + (T0[i] - u[i]) * np.exp(-ts / tc[i]), ts) / dt
        assert end[i] == pytest.approx(exact_end)
        assert mean[i] == pytest.approx(exact_mean, rel=1e-8)
    assert end[2] == mean[2] == 5.0


def test_thrusters_are_read_and_map_to_base_wrenches():
    urdf = ('<robot name="r"><link name="base_link"><inertial><mass value="10"/><inertia ixx="1" iyy="1" izz="1" '
            'ixy="0" ixz="0" iyz="0"/></inertial></link><link name="mount"/><joint name="m" type="fixed"><parent '
            'link="base_link"/><child link="mount"/><origin xyz="0.5 0 0" rpy="0 0 1.5707963267948966"/></joint>'
            '<thruster name="t1" link="mount"><origin xyz="0 0.2 0"/><axis xyz="1 0 0"/><limit lower="-40" '
            'upper="50"/><time_constant value="0.1"/></thruster></robot>')
    model = Model.from_urdf(urdf, base="se3")
    assert model.thruster_names == ("t1",)
    B = model.thruster_matrix
    np.testing.assert_allclose(B[:3, 0], [0, 1, 0], atol=1e-12)  # mount's x is the base's y
    np.testing.assert_allclose(B[3:, 0], np.cross([0.3, 0, 0], [0, 1, 0]), atol=1e-12)  # at (0.5 − 0.2, 0, 0)
    lo, hi = model.thrust_limits
    assert (lo[0], hi[0]) == (-40.0, 50.0)


@pytest.mark.parametrize("fragment, key", [
    ("<hydrodynamics><added_mass>1 2 3</added_mass></hydrodynamics>", "<added_mass>: expected 6 or 36"),
    ("<hydrodynamics><added_mass>-1 1 1 1 1 1</added_mass></hydrodynamics>", "positive semi-definite"),
    ("<hydrodynamics><quadratic_damping>1 1 1 1 1 -1</quadratic_damping></hydrodynamics>", ">= 0"),
    ('<hydrodynamics><buoyancy volume="-1"/></hydrodynamics>', "volume"),
    ('<hydrodynamics density="x"/>', "density"),
])
def test_bad_hydrodynamics_names_the_link(fragment, key):
    urdf = (f'<robot name="r"><link name="hull"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"'
            f' ixz="0" iyz="0"/></inertial>{fragment}</link></robot>')
    with pytest.raises(ModelError, match=key) as info:
        Model.from_urdf(urdf, base="se3")
    assert "'hull'" in str(info.value)


def test_bad_joint_dynamics_and_thrusters_are_refused_with_the_name():
    base = ('<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" '
            'ixz="0" iyz="0"/></inertial></link><link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" '
            'izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j" type="{t}"><parent link="a"/>'
            '<child link="b"/><axis xyz="0 0 1"/>{d}</joint>{x}</robot>')
    with pytest.raises(ModelError, match="'j'.*continuous"):
        Model.from_urdf(base.format(t="continuous", d='<dynamics spring_stiffness="1"/>', x=""))
    with pytest.raises(ModelError, match="'j'.*damping"):
        Model.from_urdf(base.format(t="continuous", d='<dynamics damping="-1"/>', x=""))
    with pytest.raises(ModelError, match="thruster 't'.*moves relative to the base"):
        Model.from_urdf(base.format(t="continuous", d="", x='<thruster name="t" link="b"/>'), base="se3")
    with pytest.raises(ModelError, match="thruster 't'.*nowhere"):
        Model.from_urdf(base.format(t="continuous", d="", x='<thruster name="t" link="nowhere"/>'), base="se3")


def _rov_with_thrusters(seed=3):
    return uvms_urdf(seed, joint_dynamics=True).replace('</robot>', (
        '<thruster name="t1" link="pod"><origin xyz="0 0.1 0"/><axis xyz="1 0 0"/><limit lower="-40" upper="50"/>'
        '<time_constant value="0.1"/></thruster><thruster name="t2" link="base_link"><axis xyz="0 0 1"/>'
        '<limit lower="-40" upper="50"/><time_constant value="0.05"/></thruster></robot>'))


def test_simulator_balances_energy_with_thrusters_current_and_dampers():
    """The ports' balance of the ordinary (RK4) steps, to 1e-6. Without joint limits: with them j3 stops at its
    3 rad limit after ~1.1 s and the rest is the first-order contact step (the test below)."""
    from mbs_ros.dynamics.simulation.simulator import Simulator

    model = Model.from_urdf(_rov_with_thrusters(), base="se3").with_current([0.2, 0.1, 0.0])
    sim = Simulator(model, model.neutral(), np.zeros(model.nv), 1e-3, joint_limits=False)
    assert sim.expected == ("thrusters", "joints")  # lockstep drives a thruster vehicle by its thrusters
    sim.set_thrusts([80.0, -20.0])  # t1 saturates at 50 N
    assert sim.saturated["thrusters"] == 1
    sim.set_joint_efforts([0.5, -0.2, 0.1, 0.3])
    sim.advance(1)
    # the first step applies the exact mean of the lag from 0 towards the command
    np.testing.assert_allclose(sim.thrust, [50 * (1 - math.exp(-0.01)), -20 * (1 - math.exp(-0.02))], rtol=1e-12)
    sim.advance(1999)
    sim.set_current([0.0, -0.3, 0.1], [0.01, 0.0, 0.0])
    sim.advance(2000)
    d = sim.diagnostics()
    assert sim.fault is None
    assert d["dissipated_energy"] > 10.0 and d["work_applied"] > 10.0
    assert abs(d["energy_balance_residual"]) < 1e-6 * (d["dissipated_energy"] + abs(d["work_applied"]))
    np.testing.assert_allclose(sim.thrust, [50.0, -20.0], rtol=1e-6)  # 40 and 80 time constants later
    # the port bookkeeping at the state: the thrusters' power is their thrust times the speed along them
    ports = model.energy_ports(sim.q, sim.v, thrust=sim.thrust)
    VT = model.thruster_matrix.T @ model.twist(sim.q, sim.v)
    assert ports["ports"]["thruster/t1"] == pytest.approx(sim.thrust[0] * VT[0])


def test_simulator_balances_energy_when_a_joint_stops_at_its_limit():
    """The same vehicle with its joint limits (the default): j3 hits its 3 rad stop (the impact's loss is
    ``contact_work``, about -12 J), rests on it from then on (every step the contact step, first order), and the
    current changes while it rests. The balance counts the contact work (``energy_balance_residual``); measured with
    the contact world following the new current: 2.7e-4 of the ports' energy at h = 1e-3, 1.4e-4 at h = 5e-4
    (first order), hence 1e-3."""
    from mbs_ros.dynamics.simulation.simulator import Simulator

    model = Model.from_urdf(_rov_with_thrusters(), base="se3").with_current([0.2, 0.1, 0.0])
    sim = Simulator(model, model.neutral(), np.zeros(model.nv), 1e-3)
    sim.set_thrusts([80.0, -20.0])
    sim.set_joint_efforts([0.5, -0.2, 0.1, 0.3])
    sim.advance(1500)
    assert sim.contact_steps > 0 and sim.contact_work < -1.0  # reached the stop, and its loss is counted
    sim.set_current([0.0, -0.3, 0.1], [0.01, 0.0, 0.0])
    sim.advance(500)
    d = sim.diagnostics()
    assert sim.fault is None and sim.contact_steps > 500  # resting on the stop through the change
    assert abs(d["energy_balance_residual"]) < 1e-3 * (d["dissipated_energy"] + abs(d["work_applied"])), d


def test_robot_yaml_sections_are_the_urdf_extensions(tmp_path):
    from mbs_ros.dynamics.model.robot_yaml import RobotConfigError

    text = """
robot:
  name: sub
  base: se3
  fluid: {density: 1025.0}
  links:
    - {name: hull, mass: 10.0, inertia: [0.2, 0, 0, 0.3, 0, 0.4]}
    - {name: fin, mass: 0.5, com: [0.1, 0, 0], inertia: [0.001, 0, 0, 0.002, 0, 0.002]}
  joints:
    - {name: fin_joint, type: revolute, parent: hull, child: fin, origin: {xyz: [-0.5, 0, 0]}, axis: [0, 0, 1]}
  hydrodynamics:
    hull: {added_mass: [2, 8, 8, 0.05, 0.3, 0.3], linear_damping: [5, 10, 10, 1, 2, 2],
           quadratic_damping: [10, 40, 40, 1, 4, 4], volume: 0.0099, center_of_buoyancy: [0, 0, 0.02]}
    fin: {added_mass: [0.01, 0.3, 0.01, 0, 0, 0.002], volume: 0.0004, density: 1000.0}
  joint_dynamics:
    fin_joint: {damping: 0.2, friction: 0.05, stiffness: 3.0, rest: 0.1}
  thrusters:
    - {name: aft, link: hull, position: [-0.6, 0, 0], direction: [1, 0, 0], min_thrust: -30, max_thrust: 40,
       time_constant: 0.2}
"""
    path = tmp_path / "sub.yaml"
    path.write_text(text)
    model = Model.from_yaml(path)
    P = model.passive
    assert P.density == 1025.0 and model.thruster_names == ("aft",)
    assert P.displaced[0] == pytest.approx(1025.0 * 0.0099) and P.displaced[1] == pytest.approx(1000.0 * 0.0004)
    assert (P.stiffness[0], P.rest[0], P.damping[0], P.friction[0]) == (3.0, 0.1, 0.2, 0.05)
    q = model.neutral()
    M = model.mass_matrix(q)
    assert M[0, 0] == pytest.approx(10.5 + 2 + 0.01)  # surge: both rigid masses and both added masses
    for bad, key in (("quadratic_damping: [10, 40, 40, 1, 4, 4]", "quadratic_damping: [10, 40]"),
                     ("hull: {added_mass", "hul: {added_mass"), ("direction: [1, 0, 0]", "direction: [0, 0, 0]")):
        path.write_text(text.replace(bad, key))
        with pytest.raises((RobotConfigError, ModelError)) as info:
            Model.from_yaml(path)
        assert str(path) in str(info.value)
