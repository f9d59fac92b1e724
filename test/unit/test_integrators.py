"""Lie-group integrators: order of convergence on SE(3) against an independent reference, and the gimbal-lock
comparison with the Euler-angle (ZYX) Lagrange equations."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from mbs_ros.dynamics import TABLEAUS, Model, simulate, step
from mbs_ros.validation.euler_zyx import EulerZYXBody, omega_map, rotation
from mbs_ros.validation.gimbal_lock import rk4_fixed


def _hat(w):
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


BODY = dict(mass=1.7, inertia=[[0.5, 0.05, -0.02], [0.05, 0.8, 0.03], [-0.02, 0.03, 1.1]], com=(0.1, -0.05, 0.2))


def _tau(t, q, v):
    return np.array([0.5 * np.sin(2 * t), 0.2, -0.3 * np.cos(t), 0.1 * np.cos(3 * t), -0.2, 0.05 * t])


def _reference_se3(model, q0, v0, t_end):
    """Embedded ODE Ṙ = R ω̂, ṗ = R v, V̇ = a(...) integrated by scipy's DOP853: no exponential map, no dexp."""
    T0 = model.group.pose_matrix(q0)

    def rhs(t, x):
        R, p, V = x[:9].reshape(3, 3), x[9:12], x[12:]
        q = model.configuration_from_pose(p, _quat_from_matrix(R))
        a = model.forward_dynamics(q, V, _tau(t, q, V))
        return np.concatenate([(R @ _hat(V[3:])).ravel(), R @ V[:3], a])

    x0 = np.concatenate([T0[:3, :3].ravel(), T0[:3, 3], v0])
    sol = solve_ivp(rhs, (0, t_end), x0, method="DOP853", rtol=1e-13, atol=1e-13)
    assert sol.success
    x = sol.y[:, -1]
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = x[:9].reshape(3, 3), x[9:12]
    return T, x[12:]


def _quat_from_matrix(R):
    from transforms3d.quaternions import mat2quat

    w, x, y, z = mat2quat(R)
    return np.array([x, y, z, w])


def test_order_of_convergence_on_se3():
    model = Model.rigid_body("se3", gravity=(0, 0, -9.81), **BODY)
    rng = np.random.default_rng(0)
    q0 = model.group.random(rng)
    v0 = np.array([0.4, -0.3, 0.2, 1.5, -2.0, 1.0])
    t_end = 1.0
    T_ref, V_ref = _reference_se3(model, q0, v0, t_end)
    dts = np.array([0.04, 0.02, 0.01])
    for method, tab in TABLEAUS.items():
        errors = []
        for dt in dts:
            _, q, v = simulate(model, q0, v0, _tau, dt, int(round(t_end / dt)), method=method)
            T = model.group.pose_matrix(q[-1])
            errors.append(np.abs(T - T_ref).max() + np.abs(v[-1] - V_ref).max())
        slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
        assert abs(slope - tab.order) < 0.25, (method, slope, errors)


def test_step_matches_simulate_and_rejects_unknown_method():
    model = Model.rigid_body("se2", mass=1.0, inertia=np.eye(3))
    q0, v0 = model.neutral(), np.array([1.0, 0.0, 0.5])
    _, q, v = simulate(model, q0, v0, np.array([0.1, 0.0, 0.0]), 0.01, 3, method="heun")
    qk, vk = q0, v0
    for k in range(3):
        qk, vk = step(model, qk, vk, np.array([0.1, 0.0, 0.0]), 0.01, method="heun", t=0.01 * k)
    np.testing.assert_array_equal(qk, q[-1])
    np.testing.assert_array_equal(vk, v[-1])
    with pytest.raises(ValueError, match="unknown integrator"):
        step(model, q0, v0, np.zeros(3), 0.01, method="rk5")


# ------------------------------------------------------------------------------------------------- gimbal lock
TOP = dict(mass=2.0, inertia=np.diag([0.3, 0.4, 0.5]) + 0.02, com=(0.05, 0.02, 0.3), gravity=(0.0, 0.0, -9.81))


def _torque(t, R, w):
    return np.array([0.3 * np.sin(t), 0.2 * np.cos(2 * t), -0.1])


def _euler_run(body, eta0, eta_d0, t_eval):
    return solve_ivp(lambda t, x: body.rhs(t, x, _torque), (0, t_eval[-1]), np.concatenate([eta0, eta_d0]),
                     method="DOP853", rtol=1e-12, atol=1e-12, t_eval=t_eval)


def test_euler_reference_kinematics():
    """The reference's ω = E(η) η̇ is the body angular velocity of R(η): vee(Rᵀ Ṙ) by central differences."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        eta, eta_d = rng.uniform(-1, 1, 3), rng.normal(size=3)
        h = 1e-6
        Rd = (rotation(eta + h * eta_d) - rotation(eta - h * eta_d)) / (2 * h)
        W = rotation(eta).T @ Rd
        np.testing.assert_allclose([W[2, 1], W[0, 2], W[1, 0]], omega_map(eta) @ eta_d, atol=1e-8)


def test_agrees_with_euler_angle_lagrange_away_from_gimbal_lock():
    model = Model.rigid_body("so3", **TOP)
    body = EulerZYXBody(**TOP)
    eta0, eta_d0 = np.array([0.2, -0.3, 0.5]), np.array([0.3, 0.2, -0.4])
    dt, steps = 1e-3, 4000
    t = dt * np.arange(steps + 1)
    sol = _euler_run(body, eta0, eta_d0, t[::100])
    assert sol.success
    assert np.abs(sol.y[1]).max() < 1.2  # pitch stays clear of ±π/2 on this run

    def tau(t, q, w):
        return _torque(t, None, w)

    q0 = _quat_from_matrix(rotation(eta0))
    _, q, w = simulate(model, q0, omega_map(eta0) @ eta_d0, tau, dt, steps)
    err = max(np.abs(model.group.pose_matrix(q[100 * i])[:3, :3] - rotation(sol.y[:3, i])).max()
              for i in range(sol.y.shape[1]))
    assert err <= 1e-8, err


def test_euler_angles_fail_through_pitch_90_while_lie_group_form_goes_on():
    """A heavy body swung over the top about its pitch axis, 1 mrad of roll: the same classical RK4 with the same
    step agrees in both formulations until the pitch nears +90°, then the Euler-angle form (det E = cos θ → 0)
    leaves the motion while ours passes through with its energy intact."""
    P = dict(mass=2.0, inertia=np.diag([0.3, 0.4, 0.5]), com=(0.0, 0.0, 0.3), gravity=(0.0, 0.0, -9.81))
    model, body = Model.rigid_body("so3", **P), EulerZYXBody(**P)
    eta0, w0 = np.array([1e-3, 0.0, 0.0]), np.array([0.0, 6.0, 0.0])
    dt, steps = 1e-3, 2000
    _, q, w = simulate(model, _quat_from_matrix(rotation(eta0)), w0, np.zeros(3), dt, steps)
    R = np.array([model.group.pose_matrix(qk)[:3, :3] for qk in q])
    gap = np.pi / 2 - np.abs(np.arcsin(np.clip(-R[:, 2, 0], -1, 1)))  # distance of the pitch from ±90°
    assert gap.min() < 2e-3
    k_cross = int(np.argmax(gap < 2e-2))  # first approach to ±90°

    E = np.array([model.kinetic_energy(a, b) + model.potential_energy(a) for a, b in zip(q, w)])
    assert np.abs(E - E[0]).max() < 1e-10 * abs(E[0])
    assert np.abs(np.einsum("kji,kjl->kil", R, R) - np.eye(3)).max() < 1e-12

    with np.errstate(all="ignore"):
        x = rk4_fixed(lambda t, x: body.rhs(t, x, lambda *_: np.zeros(3)),
                       np.concatenate([eta0, np.linalg.solve(omega_map(eta0), w0)]), dt, steps)
    err = np.array([np.abs(R[k] - rotation(x[k, :3])).max() for k in range(steps + 1)])
    err = np.where(np.isfinite(err), err, np.inf)
    before = int(0.8 * k_cross)
    assert err[:before].max() < 1e-8, err[:before].max()  # the two agree while the pitch is clear of 90°
    assert err[k_cross:].max() > 0.1, err[k_cross:].max()  # and the Euler form fails at it
