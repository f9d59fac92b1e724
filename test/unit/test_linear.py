"""Linear models (mbs_ros/dynamics/algorithms/linear.py): the moving operating point's ``−ad_{v₀}`` block, the exact Jacobian of
one integrator step, the inputs, the ε² agreement of the linear response with the nonlinear simulation, the
intermediate-axis theorem, the python-control export and the argument checks.

Every expected value is built here: central differences of ``step`` / ``difference`` written in this file, closed
forms (Euler's equations, a base wrench's generalised force), scipy's matrix exponential of the linear ODE, numpy's
eigenvalues — never with the code under test.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import expm

from mbs_ros.dynamics import Model, simulate, step
from mbs_ros.dynamics.algorithms.linear import LinearModel, input_matrix, linearize

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
ARM = ROBOTS / "arm_2link_planar.urdf"
ROV = ROBOTS / "bluerov2_heavy.yaml"
BASES = ("se3", "so3xr3", "se2", "schoenflies", "so3")


def _body(base, gravity=(0.0, 0.0, -9.81)):
    return Model.rigid_body(base=base, mass=2.0, inertia=np.diag([1.0, 2.0, 3.0]), com=(0.1, -0.2, 0.05),
                            gravity=gravity)


def _hat(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


@pytest.fixture(scope="module")
def arm():
    """The planar 2-link arm on a fixed base with gravity in its plane (−y): a manipulator that must hold a pose."""
    return Model.from_urdf(str(ARM), base="fixed", gravity=(0.0, -9.81, 0.0))


@pytest.fixture(scope="module")
def rov():
    return Model.from_yaml(str(ROV))


def _holding(model, q):
    """τ with zero simulated acceleration at (q, 0): RNEA minus the passive forces."""
    tau = model.inverse_dynamics(q, np.zeros(model.nv), np.zeros(model.nv))
    if model.passive_active:
        tau = tau - model.passive_forces(q, np.zeros(model.nv))
    return tau


# ------------------------------------------------------------------ the moving operating point
@pytest.mark.parametrize("base", BASES)
def test_base_block_is_the_rate_of_the_tangent_error_along_the_moving_point(base):
    """With δv = 0 the error ``δq(t) = log((q₀ exp(t v₀))⁻¹ q₀ exp(δ) exp(t v₀))`` moves at ``−ad_{v₀} δ``: the top-left
    block of A, checked against central differences in t of the group's own difference/integrate."""
    model = _body(base)
    rng = np.random.default_rng(1)
    q0 = model.random_configuration(rng)
    v0 = rng.standard_normal(model.nv)
    lm = linearize(model, q0, v0, np.zeros(model.nv))
    nv, h = model.nv, 1e-5
    expected = np.empty((nv, nv))
    for i in range(nv):
        d = np.zeros(nv)
        d[i] = 1e-3
        q_pert = model.integrate(q0, d)

        def err(t):
            return model.difference(model.integrate(q0, t * v0), model.integrate(q_pert, t * v0))

        expected[:, i] = (err(h) - err(-h)) / (2 * h) / 1e-3
    np.testing.assert_allclose(lm.A[:nv, :nv], expected, atol=1e-6 * max(1.0, np.abs(expected).max()))
    np.testing.assert_array_equal(lm.A[:nv, nv:], np.eye(nv))
    if base in ("se3", "so3xr3", "so3") and np.abs(v0[-3:]).max() > 0.1:
        assert np.abs(lm.A[:nv, :nv]).max() > 0.1  # the block is there, not zero


# ------------------------------------------------------------------ the discrete pair: one integrator step
def _step_jacobian_by_differences(model, q, v, tau, G, dt, method, h=1e-6):
    nv, m = model.nv, G.shape[1]
    q1, v1 = step(model, q, v, tau, dt, method)

    def f(z):
        qa, va = step(model, model.integrate(q, z[:nv]), v + z[nv:2 * nv], tau + G @ z[2 * nv:], dt, method)
        return np.concatenate([model.difference(q1, qa), va - v1])

    J = np.empty((2 * nv, 2 * nv + m))
    for i in range(2 * nv + m):
        e = np.zeros(2 * nv + m)
        e[i] = h
        J[:, i] = (f(e) - f(-e)) / (2 * h)
    return J, q1, v1


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_discrete_pair_is_the_jacobian_of_one_step(base, method):
    """A large step (rotation ≈ 1 rad within it) so that the charts' derivatives (Ad, dexp, dexp⁻¹'s derivative)
    matter; central differences of ``step`` itself in the tangent coordinates about the nominal next state."""
    model = _body(base)
    rng = np.random.default_rng(2)
    q = model.random_configuration(rng)
    v = rng.standard_normal(model.nv) * 2.0
    tau = rng.standard_normal(model.nv)
    dt = 0.4
    lm = linearize(model, q, v, tau, dt=dt, method=method)
    J, q1, v1 = _step_jacobian_by_differences(model, q, v, tau, np.eye(model.nv), dt, method)
    scale = np.abs(J).max()
    np.testing.assert_allclose(np.hstack([lm.A, lm.B]), J, atol=1e-7 * scale)
    np.testing.assert_allclose(model.difference(q1, lm.q_next), 0.0, atol=1e-12)
    np.testing.assert_allclose(lm.v_next, v1, atol=1e-12)
    assert lm.dt == dt and lm.method == method


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("angle", [1e-3, 1.0, 2.8])
def test_derivative_of_dexp_inv_up_to_large_angles(base, angle):
    """The chart derivative inside the discrete pair, ``∂(dexp⁻¹(x) y)/∂x``, against central differences of the
    group's ``dexp_inv`` (for a rigid body without joints its block is the whole matrix)."""
    from mbs_ros.dynamics.algorithms.linear import _dexp_inv_derivative

    model = _body(base)
    rng = np.random.default_rng(7)
    n = model.nv
    x = rng.standard_normal(n)
    rot = slice(n - 3, n) if base in ("se3", "so3xr3", "so3") else slice(n - 1, n)
    x[rot] *= angle / np.linalg.norm(x[rot])
    y = rng.standard_normal(n)
    h = 1e-6
    expected = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = h
        expected[:, i] = (model.dexp_inv(x + e) @ y - model.dexp_inv(x - e) @ y) / (2 * h)
    np.testing.assert_allclose(_dexp_inv_derivative(model, x, y), expected,
                               atol=1e-8 * max(1.0, np.abs(expected).max()))


def test_discrete_pair_of_an_rov_with_its_water_and_thrusters(rov):
    """Passive forces (added mass, damping, buoyancy) inside every stage, thruster inputs."""
    rng = np.random.default_rng(3)
    quat = rng.standard_normal(4)
    q = rov.configuration_from_pose([0.5, -0.3, -3.0], quat / np.linalg.norm(quat))
    v = rng.standard_normal(rov.nv) * 0.5
    tau = rng.standard_normal(rov.nv)
    G = input_matrix(rov, q, "thrusters")[0]
    lm = linearize(rov, q, v, tau, inputs="thrusters", dt=0.05, method="rk4")
    J, _q1, _v1 = _step_jacobian_by_differences(rov, q, v, tau, G, 0.05, "rk4")
    np.testing.assert_allclose(np.hstack([lm.A, lm.B]), J, atol=1e-7 * np.abs(J).max())


def test_discrete_pair_of_a_floating_arm():
    """A multibody on SE(3): the base block's chart derivatives next to the joints' identity."""
    model = Model.from_urdf(str(ARM), base="se3")
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng)
    v = rng.standard_normal(model.nv)
    tau = rng.standard_normal(model.nv)
    lm = linearize(model, q, v, tau, inputs="efforts", dt=0.1, method="heun")
    J, _q1, _v1 = _step_jacobian_by_differences(model, q, v, tau, input_matrix(model, q, "efforts")[0], 0.1, "heun")
    np.testing.assert_allclose(np.hstack([lm.A, lm.B]), J, atol=1e-7 * np.abs(J).max())


# ------------------------------------------------------------------ inputs
def test_inputs_efforts_wrench_and_thrusters(rov):
    """Hand-known input maps: efforts select the joints; an SE(3) base takes a wrench as it is (B = H = I); the
    thrusters' generalised force is their allocation matrix on SE(3); se2 drops Fz, Tx, Ty."""
    arm = Model.from_urdf(str(ARM), base="se3")
    q = arm.neutral()
    G, names = input_matrix(arm, q, ["efforts", "wrench"])
    expected = np.zeros((8, 8))
    expected[6:, :2] = np.eye(2)
    expected[:6, 2:] = np.eye(6)
    np.testing.assert_array_equal(G, expected)
    assert names == ("joint1", "joint2", "Fx", "Fy", "Fz", "Tx", "Ty", "Tz")
    Gt, tnames = input_matrix(rov, rov.neutral(), "thrusters")
    np.testing.assert_allclose(Gt, rov.thruster_matrix)
    assert tnames == rov.thruster_names
    Gp = input_matrix(_body("se2"), _body("se2").neutral(), "wrench")[0]
    np.testing.assert_array_equal(Gp, np.eye(6)[[0, 1, 5]])
    lm = linearize(rov, rov.neutral(), np.zeros(6), np.zeros(6), inputs="thrusters")
    M = rov.mass_matrix(rov.neutral())
    np.testing.assert_allclose(M @ lm.B[6:], rov.thruster_matrix, atol=1e-9)


def test_so3xr3_wrench_input_map_and_its_q_derivative():
    """On SO(3)×R³ a body-frame force acts as ``R F`` on the world-axis translation (Bᵀ = diag(R, I)); with an
    operating wrench u₀ ≠ 0 the rotation of that force enters A: checked against central differences, written
    here, of the acceleration with the wrench applied at the perturbed attitude."""
    model = _body("so3xr3")
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng)
    v = rng.standard_normal(6)
    R = model.base_rotation(q)
    G = input_matrix(model, q, "wrench")[0]
    expected = np.zeros((6, 6))
    expected[:3, :3], expected[3:, 3:] = R, np.eye(3)
    np.testing.assert_allclose(G, expected, atol=1e-14)
    W0 = np.array([3.0, -1.0, 2.0, 0.5, 0.2, -0.4])
    tau_other = rng.standard_normal(6)
    lm = linearize(model, q, v, tau_other + G @ W0, inputs="wrench", u0=W0)
    h = 1e-6
    expected_dq = np.empty((6, 6))
    for i in range(6):
        e = np.zeros(6)
        e[i] = h

        def acc(qq):
            F = model.base_rotation(qq) @ W0[:3]
            return model.forward_dynamics(qq, v, tau_other + np.concatenate([F, W0[3:]]))

        expected_dq[:, i] = (acc(model.integrate(q, e)) - acc(model.integrate(q, -e))) / (2 * h)
    np.testing.assert_allclose(lm.A[6:, :6], expected_dq, atol=1e-6 * np.abs(expected_dq).max())


def test_discrete_pair_with_an_attitude_dependent_wrench_input():
    """so3xr3 with an operating wrench u₀: the held generalised force ``G(q ⊕ δq)(u₀ + δu)`` is taken at the
    perturbed attitude; central differences of ``step`` with exactly that force."""
    model = _body("so3xr3")
    rng = np.random.default_rng(6)
    q = model.random_configuration(rng)
    v = rng.standard_normal(6)
    W0 = np.array([3.0, -1.0, 2.0, 0.5, 0.2, -0.4])

    def force(qq, W):
        return np.concatenate([model.base_rotation(qq) @ W[:3], W[3:]])

    dt, nv = 0.2, 6
    lm = linearize(model, q, v, force(q, W0), inputs="wrench", u0=W0, dt=dt, method="rk4")
    q1, v1 = step(model, q, v, force(q, W0), dt, "rk4")
    h = 1e-6
    J = np.empty((12, 18))
    for i in range(18):
        z = np.zeros(18)
        z[i] = h
        out = []
        for s in (z, -z):
            qq = model.integrate(q, s[:nv])
            qa, va = step(model, qq, v + s[nv:2 * nv], force(qq, W0 + s[2 * nv:]), dt, "rk4")
            out.append(np.concatenate([model.difference(q1, qa), va - v1]))
        J[:, i] = (out[0] - out[1]) / (2 * h)
    np.testing.assert_allclose(np.hstack([lm.A, lm.B]), J, atol=1e-7 * np.abs(J).max())


# ------------------------------------------------------------------ the ε² check
def _linear_response(lm, u1, times):
    """x(t) of ẋ = A x + B u₁ from x = 0, by the matrix exponential of [[A, B], [0, 0]] (Van Loan)."""
    n, m = lm.B.shape
    big = np.zeros((n + m, n + m))
    big[:n, :n], big[:n, n:] = lm.A, lm.B
    return np.array([expm(big * t)[:n, n:] @ u1 for t in times])


def _error_orders(model, q0, v0, tau0, inputs, u1, T=0.5, dt=1e-3, eps=(1e-1, 1e-2, 1e-3)):
    """Max over the horizon of |x_nonlinear − x_linear| for δu = ε u₁, and the slope of log error vs log ε."""
    lm = linearize(model, q0, v0, tau0, inputs=inputs)
    G = input_matrix(model, q0, inputs)[0]
    steps = int(round(T / dt))
    every = steps // 5
    times = dt * np.arange(0, steps + 1, every)
    x_lin1 = _linear_response(lm, u1, times)
    nv = model.nv
    errors = []
    for e in eps:
        _t, qs, vs = simulate(model, q0, v0, tau0 + G @ (e * u1), dt, steps, method="rk4")
        x = []
        for k, t in zip(range(0, steps + 1, every), times):
            q_ref = model.integrate(q0, t * v0)  # the operating point moves with v₀ (a relative equilibrium)
            x.append(np.concatenate([model.difference(q_ref, qs[k]), vs[k] - v0]))
        errors.append(np.abs(np.array(x) - e * x_lin1).max())
    assert np.abs(x_lin1).max() > 1e-3, "the response to u₁ must be visible"
    slope = np.polyfit(np.log(eps), np.log(errors), 1)[0]
    assert nv and np.all(np.isfinite(errors))
    return slope, errors


def test_linear_response_error_shrinks_as_eps_squared_arm_holding_a_pose(arm):
    """The arm held by τ = g(q) at a pose off the hanging one (gravity −y; joint 1 at −π/2 hangs)."""
    q0 = np.array([-1.2, 0.6])
    slope, errors = _error_orders(arm, q0, np.zeros(2), _holding(arm, q0), "efforts", np.array([1.0, -0.5]))
    print(f"arm holding a pose: errors {errors}, order {slope:.3f}")
    assert 1.8 <= slope <= 2.2, (slope, errors)


def test_linear_response_error_shrinks_as_eps_squared_rov_trimmed(rov):
    """The ROV held at a tilted attitude by the wrench that cancels gravity, buoyancy and the water's loads;
    thruster inputs."""
    q0 = rov.configuration_from_pose([0.0, 0.0, -2.0], [0.1, 0.05, 0.2, 0.97])
    u1 = np.linspace(1.0, -1.0, len(rov.thruster_names)) * 20.0
    slope, errors = _error_orders(rov, q0, np.zeros(6), _holding(rov, q0), "thrusters", u1)
    print(f"ROV trimmed: errors {errors}, order {slope:.3f}")
    assert 1.8 <= slope <= 2.2, (slope, errors)


def test_linear_response_error_shrinks_as_eps_squared_spinning_body():
    """A relative equilibrium: a free body spinning about its major axis (v₀ ≠ 0), the −ad_{v₀} block at work;
    the error is measured about the moving point q₀ exp(t v₀)."""
    model = Model.rigid_body(base="se3", mass=2.0, inertia=np.diag([1.0, 2.0, 3.0]), gravity=(0.0, 0.0, 0.0))
    v0 = np.array([0.0, 0.0, 0.5, 0.0, 0.0, 2.0])  # a screw motion about the major axis: ad*_{v₀}(I v₀) = 0
    u1 = np.array([1.0, -2.0, 0.5, 0.3, 0.2, -0.1])
    slope, errors = _error_orders(model, model.neutral(), v0, np.zeros(6), "wrench", u1)
    print(f"spinning body: errors {errors}, order {slope:.3f}")
    assert 1.8 <= slope <= 2.2, (slope, errors)


# ------------------------------------------------------------------ the intermediate-axis theorem
@pytest.mark.parametrize("axis,unstable", [(0, False), (1, True), (2, False)])
def test_torque_free_spin_stable_and_unstable_axes(axis, unstable):
    """Euler's equations linearised about ω = ω₀ e_i: the other two rates obey ``ω̈_j = λ² ω_j`` with
    ``λ² = ω₀² (I_k − I_i)(I_i − I_j)/(I_j I_k)`` — real (unstable) only about the intermediate axis."""
    I = np.array([1.0, 2.0, 3.0])
    model = Model.rigid_body(base="so3", inertia=np.diag(I), gravity=(0.0, 0.0, 0.0))
    w0 = 1.5
    v0 = np.zeros(3)
    v0[axis] = w0
    lm = linearize(model, model.neutral(), v0, np.zeros(3))
    i, j, k = axis, (axis + 1) % 3, (axis + 2) % 3
    lam2 = w0 ** 2 * (I[k] - I[i]) * (I[i] - I[j]) / (I[j] * I[k])
    assert (lam2 > 0) == unstable
    eig = np.sort_complex(np.linalg.eigvals(lm.A[3:, 3:]))
    expected = np.sort_complex(np.array([0.0, np.sqrt(complex(lam2)), -np.sqrt(complex(lam2))]))
    np.testing.assert_allclose(eig, expected, atol=1e-6)
    assert (np.max(lm.eigenvalues().real) > 1e-3) == unstable


# ------------------------------------------------------------------ export
def test_to_control_continuous_and_discrete(arm):
    q0 = np.array([0.3, 0.8])
    lm = linearize(arm, q0, np.zeros(2), _holding(arm, q0), inputs="efforts")
    sys = lm.to_control()
    np.testing.assert_array_equal(sys.A, lm.A)
    np.testing.assert_array_equal(sys.B, lm.B)
    np.testing.assert_array_equal(sys.C, np.eye(4))
    assert sys.dt == 0 and sys.state_labels == list(lm.state_names) and sys.input_labels == ["joint1", "joint2"]
    np.testing.assert_allclose(np.sort_complex(sys.poles()), np.sort_complex(np.linalg.eigvals(lm.A)), atol=1e-9)
    import control

    np.testing.assert_allclose(control.dcgain(sys), -np.linalg.solve(lm.A, lm.B), rtol=1e-9, atol=1e-12)
    # Some dc gains are 0 in exact arithmetic and come out as rounding noise: the velocity rows, and the tip angle's
    # response to joint 1's torque ([1 1] K⁻¹ e₁ = 0 for the arm's gravity stiffness K; -5.6e-17 vs python-control's
    # 0.0). atol: rtol of the compared gains' scale, max|G| (0.38 and 0.66 rad/(N m) here).
    C = np.array([[1.0, 1.0, 0.0, 0.0]])
    y = lm.to_control(C=C, outputs=["tip_angle"])
    assert y.output_labels == ["tip_angle"]
    G = -C @ np.linalg.solve(lm.A, lm.B)
    np.testing.assert_allclose(control.dcgain(y), G, rtol=1e-9, atol=1e-9 * np.abs(G).max())
    ld = linearize(arm, q0, np.zeros(2), _holding(arm, q0), inputs="efforts", dt=0.01)
    sd = ld.to_control()
    assert sd.dt == 0.01
    Gd = np.linalg.solve(np.eye(4) - ld.A, ld.B)  # velocity rows ~1e-15 of noise around 0
    np.testing.assert_allclose(control.dcgain(sd), Gd, rtol=1e-9, atol=1e-9 * np.abs(Gd).max())


def test_discretize_is_zero_order_hold(arm):
    q0 = np.array([0.3, 0.8])
    lm = linearize(arm, q0, np.zeros(2), _holding(arm, q0), inputs="efforts")
    zoh = lm.discretize(0.02)
    Ad = expm(lm.A * 0.02)
    Bd = np.linalg.solve(lm.A, (Ad - np.eye(4)) @ lm.B)  # A invertible at this pose (gravity stiffness)
    np.testing.assert_allclose(zoh.A, Ad, atol=1e-12)
    np.testing.assert_allclose(zoh.B, Bd, atol=1e-10)
    exact = linearize(arm, q0, np.zeros(2), _holding(arm, q0), inputs="efforts", dt=0.02)
    np.testing.assert_allclose(exact.A, zoh.A, atol=1e-4)  # one RK4 step agrees with ZOH to O(dt⁵)
    with pytest.raises(ValueError, match="already discrete"):
        zoh.discretize(0.02)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("kwargs,match", [
    ({"q": [0.0]}, "q must have shape"),
    ({"v": [np.nan, 0.0]}, "v must be finite"),
    ({"tau": "x"}, "tau must be"),
    ({"inputs": "torques"}, "unknown inputs 'torques'"),
    ({"inputs": []}, "inputs must be"),
    ({"inputs": "wrench"}, "inputs 'wrench': a fixed base"),
    ({"inputs": "thrusters"}, "inputs 'thrusters': the model has no thrusters"),
    ({"dt": 0.0}, "dt must be a positive"),
    ({"dt": -1e-3}, "dt must be a positive"),
    ({"dt": 0.01, "method": "rk5"}, "method must be one of"),
    ({"inputs": "efforts", "u0": [1.0]}, r"u0 must have shape \(2,\)"),
])
def test_bad_arguments_are_refused_naming_the_argument(arm, kwargs, match):
    args = {"q": [0.1, 0.2], "v": [0.0, 0.0], "tau": [0.0, 0.0], **kwargs}
    q, v, tau = args.pop("q"), args.pop("v"), args.pop("tau")
    with pytest.raises(ValueError, match=match):
        linearize(arm, q, v, tau, **args)


def test_efforts_on_a_body_without_joints_is_refused():
    with pytest.raises(ValueError, match="no joints"):
        linearize(_body("se3"), _body("se3").neutral(), np.zeros(6), np.zeros(6), inputs="efforts")


def test_model_method_delegates(arm):
    lm = arm.linearize([0.1, 0.2], [0.0, 0.0], [0.0, 0.0], inputs="efforts", dt=0.01, method="rk3")
    assert isinstance(lm, LinearModel) and lm.dt == 0.01 and lm.method == "rk3"
