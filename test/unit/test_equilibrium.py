"""find_equilibrium (issue 20): each equilibrium checked by what does not share the solver's code — Pinocchio's
``aba`` / ``rnea`` at the result, closed forms worked out by hand here, numpy's pseudo-inverse for minimum-norm
inputs — and the closed-form derivative of a world-fixed wrench against central differences written here.

Cases: the balloon chain of seed 002 hanging under gravity and buoyancy (base position and yaw fixed: the system is
neutrally buoyant and symmetric about the vertical through B), also with a world torque that tilts it so the slider
spring carries load; the BlueROV2 Heavy holding station in a current and drifting with it (8 thrusters for 6 DOF:
minimum-norm thrust); UR5 holding a pose (τ = g(q)); a free rigid body in steady spin (a relative equilibrium).
"""
import warnings
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, step
from mbs_ros.dynamics.algorithms.equilibrium import Equilibrium, find_equilibrium, world_wrench_derivative, world_wrench_force
from mbs_ros.validation import balloon as bl

ROOT = Path(__file__).resolve().parents[2]
K = 100.0  # the balloon study's slider spring (N/m)


def spring(model):
    def f(q, v):
        out = np.zeros(model.nv)
        out[6] = -K * q[7]
        return out
    return f


def buoyancy_wrench():
    return np.concatenate([bl.BUOYANCY, np.zeros(3)])


def _pin_balloon_acceleration(q, v, extra_torque=None):
    """Pinocchio's ABA on the balloon URDF, the buoyancy as fext on the free flyer, the spring as a joint force."""
    pin = pytest.importorskip("pinocchio")
    pm = bl.pinocchio_model()
    data = pm.createData()
    R = pin.Quaternion(q[6], q[3], q[4], q[5]).normalized().matrix()
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    torque = np.zeros(3) if extra_torque is None else R.T @ extra_torque
    fext[1] = pin.Force(R.T @ bl.BUOYANCY, torque)
    tau = np.zeros(pm.nv)
    tau[6] = -K * q[7]
    return pin.aba(pm, data, q, v, tau, fext)


@pytest.fixture(scope="module")
def balloon():
    return bl.build_model()


def test_balloon_hangs_upright_with_the_chain_straight_down(balloon):
    m = balloon
    q0 = m.neutral()
    q0[8], q0[9] = 0.4, -0.3
    q0 = m.integrate(q0, np.array([0.5, -0.2, 0.1, 0.2, 0.0, -0.15, 0.05, 0.0, 0.0]))
    eq = find_equilibrium(m, q0, free_q=[3, 5, 6, 7, 8], wrench_world=buoyancy_wrench(), forces=spring(m))
    assert isinstance(eq, Equilibrium) and eq.success, eq.message
    assert eq.residual < 1e-10
    np.testing.assert_allclose(eq.q[:3], q0[:3], atol=1e-14)  # the fixed base position stays
    # closed form: B above the system's centre of mass — the balloon's y axis vertical, both pendulums down, the
    # slider axis (in the balloon's x-z plane) horizontal so the spring is unloaded
    R = m.base_rotation(eq.q)
    np.testing.assert_allclose(R[:, 1], [0.0, 1.0, 0.0], atol=1e-10)
    assert abs(eq.q[7]) < 1e-10
    assert abs(np.angle(np.exp(1j * eq.q[8]))) < 1e-10 and abs(np.angle(np.exp(1j * eq.q[9]))) < 1e-10
    # independent: Pinocchio's forward dynamics at the result
    assert np.abs(_pin_balloon_acceleration(eq.q, eq.v)).max() < 1e-9


def test_jacobian_in_the_unknowns_matches_central_differences_of_pinocchios_aba(balloon):
    """``Equilibrium.jacobian`` (∂a/∂(δq_free) at q = q₀ ⊕ δq*, δq* far from 0 so the chain through the
    exponential's Jacobian matters) against central differences of Pinocchio's aba along pin.integrate(q₀, δ)."""
    pin = pytest.importorskip("pinocchio")
    m = balloon
    free = [3, 5, 6, 7, 8]
    q0 = m.neutral()
    q0[8], q0[9] = 0.4, -0.3
    q0 = m.integrate(q0, np.array([0.5, -0.2, 0.1, 0.6, 0.0, -0.5, 0.05, 0.0, 0.0]))
    eq = find_equilibrium(m, q0, free_q=free, wrench_world=buoyancy_wrench(), forces=spring(m))
    assert eq.success, eq.message
    pm = bl.pinocchio_model()
    delta = pin.difference(pm, q0, eq.q)
    assert np.abs(delta[3:6]).max() > 0.3
    h = 1e-6
    J = np.zeros((m.nv, len(free)))
    for c, i in enumerate(free):
        e = np.zeros(m.nv)
        e[i] = h
        J[:, c] = (_pin_balloon_acceleration(pin.integrate(pm, q0, delta + e), eq.v)
                   - _pin_balloon_acceleration(pin.integrate(pm, q0, delta - e), eq.v)) / (2 * h)
    np.testing.assert_allclose(eq.jacobian, J, atol=1e-7 * np.abs(J).max())


def test_jacobian_with_attitude_dependent_input_and_world_wrench_on_so3xr3():
    """SO(3)×R³ (v = [ṙ_world; ω_body], B(q) = diag(Rᵀ, I)): a body-frame wrench input and a world wrench both
    turn with the attitude. ``Equilibrium.jacobian`` against central differences of the forward dynamics with the
    generalised force written here: ``[R F_b + F_w; T_b + Rᵀ T_w]``."""
    m = Model.rigid_body("so3xr3", mass=2.0, inertia=np.diag([0.3, 0.4, 0.5]), com=(0.0, 0.0, -0.2))
    W = np.array([0.3, -0.2, 19.62, 0.1, 0.0, -0.2])
    u0 = np.array([1.0, -0.5, 0.3, 0.2, 0.1, -0.3])
    q0 = m.integrate(m.neutral(), np.array([0.0, 0.0, 0.0, 0.3, -0.4, 0.5]))
    eq = find_equilibrium(m, q0, inputs="wrench", u0=u0, free_u="none", free_q=[3, 4, 5], wrench_world=W,
                          max_nfev=3)

    def acc(q):
        R = m.base_rotation(q)
        tau = np.concatenate([R @ u0[:3] + W[:3], u0[3:] + R.T @ W[3:]])
        return m.forward_dynamics(q, np.zeros(6), tau)

    delta = m.difference(q0, eq.q)
    assert np.abs(delta[3:]).max() > 0.1
    h, J = 1e-6, np.zeros((6, 3))
    for c in range(3):
        e = np.zeros(6)
        e[3 + c] = h
        J[:, c] = (acc(m.integrate(q0, delta + e)) - acc(m.integrate(q0, delta - e))) / (2 * h)
    np.testing.assert_allclose(eq.jacobian, J, atol=1e-7 * np.abs(J).max())


def test_balloon_tilted_by_a_world_torque_loads_the_slider_spring(balloon):
    """A world torque T_z about B: the moment balance about B, −M g x_c + T_z = 0 and M g z_c = 0, puts the system's
    centre of mass at x_c = T_z / (M g), z_c = 0 from B (M = 16 kg); the tilted slider axis loads the spring."""
    m = balloon
    Tz = 5.0
    W = buoyancy_wrench() + np.array([0, 0, 0, 0, 0, Tz])
    q0 = m.neutral()
    q0[8], q0[9] = 0.2, -0.1
    eq = find_equilibrium(m, q0, free_q=[3, 5, 6, 7, 8], wrench_world=W, forces=spring(m))
    assert eq.success, eq.message
    c = bl.system_com(m, eq.q) - eq.q[:3]
    np.testing.assert_allclose(c[[0, 2]], [Tz / (bl.M_TOTAL * bl.G), 0.0], atol=1e-10)
    assert abs(eq.q[7]) > 1e-3  # the spring really balances a load
    assert np.abs(_pin_balloon_acceleration(eq.q, eq.v, np.array([0, 0, Tz]))).max() < 1e-9


def test_balloon_from_the_seed_state_reaches_its_nearest_branch(balloon):
    """Seed 002's start (θ1 = 170°, θ2 = −170°) converges to pendulum 1 upright, pendulum 2 hanging from it."""
    m = balloon
    q0, _ = bl.initial_state(m)
    eq = find_equilibrium(m, q0, free_q=[3, 5, 6, 7, 8], wrench_world=buoyancy_wrench(), forces=spring(m))
    assert eq.success, eq.message
    np.testing.assert_allclose(np.cos(eq.q[8:10]), [-1.0, -1.0], atol=1e-10)
    assert np.abs(_pin_balloon_acceleration(eq.q, eq.v)).max() < 1e-9


def _central_q(m, q, W, h):
    f = world_wrench_force
    return np.array([(f(m, m.integrate(q, h * e), W) - f(m, m.integrate(q, -h * e), W)) / (2 * h)
                     for e in np.eye(m.nv)]).T


def test_world_wrench_derivative_closed_form_matches_central_differences():
    """``∂(Bᵀ[Rᵀ F; Rᵀ T])/∂δ`` along q ⊕ δ against central differences written here, on every base group."""
    rng = np.random.default_rng(3)
    W = np.array([1.0, -2.0, 3.0, 0.5, 0.7, -0.4])
    arm = ROOT / "config/robots/arm_2link_planar.urdf"
    for base in ("se3", "schoenflies", "se2", "so3xr3"):
        m = Model.from_urdf(arm, base=base)
        q = m.random_configuration(rng)
        D = world_wrench_derivative(m, q, W)
        h = 1e-6
        Dn = _central_q(m, q, W, h)
        np.testing.assert_allclose(D, Dn, atol=1e-8, err_msg=base)
    m = Model.rigid_body("so3")
    q = m.random_configuration(rng)
    Dn = _central_q(m, q, W, h)
    np.testing.assert_allclose(world_wrench_derivative(m, q, W), Dn, atol=1e-8)


# ------------------------------------------------------------------------------------------------ the ROV
RHO, VOLUME, MASS, G0 = 1025.0, 0.0134, 13.5, 9.81  # bluerov2_heavy.urdf.xacro in sea water
X_U, X_UU = 13.7, 141.0  # surge linear and quadratic damping [vB]


@pytest.fixture(scope="module")
def rov():
    return Model.from_yaml(ROOT / "config/robots/bluerov2_heavy.yaml")


def test_rov_holds_station_in_a_current_with_minimum_norm_thrust(rov):
    """Level, at rest in a 0.3 m/s current along world x: the thrusters must cancel the surge drag at the relative
    velocity −c, X_u c + X_uu c², and the net buoyancy (ρV − m) g; of the thrusts giving that wrench, the
    minimum-norm one is pinv(B_thrust) W (8 thrusters, 6 DOF)."""
    c = 0.3
    m = rov.with_current([c, 0.0, 0.0])
    eq = find_equilibrium(m, m.neutral(), inputs="thrusters")
    assert eq.success, eq.message
    W = np.array([-(X_U * c + X_UU * c * c), 0.0, -(RHO * VOLUME - MASS) * G0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(m.thruster_matrix @ eq.u, W, atol=1e-9)
    np.testing.assert_allclose(eq.u, np.linalg.pinv(m.thruster_matrix) @ W, atol=1e-9)
    assert eq.input_names == m.thruster_names


def test_rov_drifting_with_the_current_only_cancels_the_net_buoyancy(rov):
    """A relative equilibrium: moving with the current (v = the current in body axes, yawed 30°), the water is at
    rest relative to the hull, no drag: only (ρV − m) g is left for the vertical thrusters. Surge and sway are solved
    for, from 0 (heave stays 0: with it free, heave drag could replace thrust, a family of equilibria)."""
    c = np.array([0.3, -0.1, 0.0])
    m = rov.with_current(c)
    yaw = np.deg2rad(30.0)
    q = m.configuration_from_pose([1.0, 2.0, -3.0], [0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)])
    eq = find_equilibrium(m, q, free_v=[0, 1], inputs="thrusters", free_u=[4, 5, 6, 7])
    assert eq.success, eq.message
    R = m.base_rotation(q)
    # sway has no linear damping: the drag is quadratic near v_r = 0, so |a| ≤ tol fixes v only to ~√tol
    np.testing.assert_allclose(eq.v[:3], R.T @ c, atol=1e-5)
    W = np.array([0.0, 0.0, -(RHO * VOLUME - MASS) * G0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(m.thruster_matrix @ eq.u, W, atol=1e-8)
    np.testing.assert_allclose(eq.u[:4], 0.0, atol=0.0)  # the fixed inputs stay at u0


def test_uvms_holds_station_and_arm_pose_in_a_current_under_the_rk4_step():
    """BlueROV2 Heavy with its four-joint arm in a current: thrusters and joint efforts free. Held over the RK4
    integrator's steps (not the solver's code) for 1 s, the state does not move."""
    m = Model.from_yaml(ROOT / "config/robots/bluerov2_heavy_alpha5.yaml").with_current([0.2, 0.1, 0.0])
    q = m.neutral()
    q[7:] = [0.3, 0.5, -0.4, 0.2]
    eq = find_equilibrium(m, q, inputs=["thrusters", "efforts"])
    assert eq.success, eq.message
    assert eq.input_names == m.thruster_names + m.joint_names
    qk, vk = eq.q, eq.v
    for _ in range(500):
        qk, vk = step(m, qk, vk, eq.tau, 0.002)
    assert np.abs(m.difference(eq.q, qk)).max() < 1e-12 and np.abs(vk).max() < 1e-12


# ------------------------------------------------------------------------------------------- manipulator
def test_ur5_holds_a_pose_with_the_gravity_torques_of_pinocchio():
    """A fixed-base manipulator held at rest: the efforts are τ = g(q) − τ_p = Pinocchio's rnea(q, 0, 0)."""
    pin = pytest.importorskip("pinocchio")
    from test_example_robot_data import _robots_dir  # imports Pinocchio (skips without it)

    robots = _robots_dir()
    if robots is None:
        pytest.skip("example-robot-data is not installed")
    urdf = robots / "ur_description/urdf/ur5_robot.urdf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = Model.from_urdf(urdf, base="fixed")
    pm = pin.buildModelFromUrdf(str(urdf))
    q = np.array([0.3, -1.1, 1.4, -0.6, 0.8, 0.2])
    eq = find_equilibrium(m, q, inputs="efforts")
    assert eq.success, eq.message
    ref = pin.rnea(pm, pm.createData(), q, np.zeros(6), np.zeros(6))
    np.testing.assert_allclose(eq.u, ref, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(eq.q, q, atol=0.0)


# --------------------------------------------------------------------------------------- relative equilibria
I_BODY = np.array([[3.0, 0.3, -0.2], [0.3, 4.0, 0.4], [-0.2, 0.4, 5.0]])


@pytest.mark.parametrize("base", ["se3", "so3"])
def test_free_body_spins_steadily_only_about_a_principal_axis(base):
    """Torque-free (no gravity): ω̇ = 0 needs ω × Iω = 0 (Euler), so ω lies along an eigenvector of I. With ω_z
    held at 2 rad/s and ω_x, ω_y free, the solver must find the principal axis nearest z (numpy's eigh)."""
    m = Model.rigid_body(base, mass=1.5, inertia=I_BODY, gravity=(0.0, 0.0, 0.0))
    nb = 3 if base == "se3" else 0
    v0 = np.zeros(m.nv)
    v0[nb:nb + 3] = [0.1, -0.1, 2.0]
    eq = find_equilibrium(m, m.neutral(), v0, free_v=[nb, nb + 1])
    assert eq.success, eq.message
    w = eq.v[nb:nb + 3]
    vals, vecs = np.linalg.eigh(I_BODY)
    axis = vecs[:, np.argmax(np.abs(vecs[2]))]
    np.testing.assert_allclose(w, axis * 2.0 / axis[2], atol=1e-9)
    np.testing.assert_allclose(np.cross(w, I_BODY @ w), 0.0, atol=1e-9)
    assert np.linalg.norm(eq.v) > 1.9  # v ≠ 0: a relative equilibrium


# ------------------------------------------------------------------------------------------------- errors
def test_no_equilibrium_is_reported_not_raised(balloon):
    """A free body under gravity with only its attitude free has none: success False, the reason in message."""
    m = Model.rigid_body("se3", mass=1.0)
    eq = find_equilibrium(m, m.neutral(), free_q=[3, 4, 5], max_nfev=20)
    assert not eq.success
    assert "max |a|" in eq.message and eq.residual > 1.0


@pytest.mark.parametrize("kwargs, word", [
    (dict(free_q=[9]), "free_q"), (dict(free_q=[1, 1]), "free_q"), (dict(free_q="some"), "free_q"),
    (dict(free_v=[-1]), "free_v"), (dict(wrench_world=[1.0, 2.0]), "wrench_world"), (dict(u0=[1.0]), "u0"),
    (dict(inputs="efforts", u0=[1.0, 2.0]), "u0"), (dict(inputs="efforts", free_u=[3]), "free_u"),
    (dict(free_u=[0]), "free_u"),
    (dict(inputs="jets"), "inputs"), (dict(tau=np.zeros(4)), "tau"), (dict(tol=-1.0), "tol"),
    (dict(max_nfev=0), "max_nfev"), (dict(forces=[np.nan] * 9), "forces"), (dict(v0=np.ones(3)), "v0"),
])
def test_bad_arguments_name_the_argument(balloon, kwargs, word):
    with pytest.raises(ValueError, match=word):
        find_equilibrium(balloon, balloon.neutral(), **kwargs)
    with pytest.raises(ValueError, match="q0"):
        find_equilibrium(balloon, np.zeros(3))
