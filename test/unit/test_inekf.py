"""The invariant EKF's pieces against independent references: SE₂(3) exp/log against scipy.linalg.expm of the 5×5
matrix; the IMU mean propagation against the closed form X(t) = e^{t(W−N)} X₀ e^{t(U+N)} of the group-affine
dynamics with constant inputs (Barrau & Bonnabel 2017, evaluated with scipy's expm); the transition Φ against central
differences of that closed form; every update's Jacobian through "a noise-free update matches the measurement to
second order", with the measurement functions written out here; the ROS covariances against Monte-Carlo samples;
and the χ² bounds against their textbook values.
"""

import math

import numpy as np
import pytest
import scipy.linalg

from mbs_ros.estimation import ImuNoise, InvariantEKF, anees_bounds, consistency, nees, se23_exp, se23_log
from mbs_ros.estimation import inekf

G = np.array([0.0, 0.0, -9.81])
NOISE = ImuNoise(1.7e-4, 2.0e-3, 2e-5, 3e-3)


def rot(phi):
    """Rotation matrix of a rotation vector, by scipy's expm (independent of the module's Rodrigues)."""
    return scipy.linalg.expm(np.cross(np.eye(3), np.asarray(phi, dtype=float)))


def algebra(xi):
    """The 5×5 se₂(3) matrix of ξ = [φ, ρ_v, ρ_p]."""
    W = np.zeros((5, 5))
    W[:3, :3] = np.cross(np.eye(3), xi[:3])
    W[:3, 3] = xi[3:6]
    W[:3, 4] = xi[6:9]
    return W


def state(R, v, p):
    X = np.eye(5)
    X[:3, :3], X[:3, 3], X[:3, 4] = R, v, p
    return X


def truth_step(X, gyro, accel, dt, g=G):
    """The exact flow of Ṙ = R ω^, v̇ = R f + g, ṗ = v for constant body ω, f: X(dt) = e^{dt(W−N)} X e^{dt(U+N)}
    with U = [[ω^, f, 0], 0, 0], W = [[0, g, 0], 0, 0], N = E₄₅ (Ẋ = (W − N) X + X (U + N) is the dynamics)."""
    N = np.zeros((5, 5))
    N[3, 4] = 1.0
    W = np.zeros((5, 5))
    W[:3, 3] = g
    U = np.zeros((5, 5))
    U[:3, :3] = np.cross(np.eye(3), gyro)
    U[:3, 3] = accel
    return scipy.linalg.expm(dt * (W - N)) @ X @ scipy.linalg.expm(dt * (U + N))


def log_error(Xhat, X):
    """log(X̂ X⁻¹) by scipy.linalg.logm (principal log; angles < π here)."""
    L = np.real(scipy.linalg.logm(Xhat @ np.linalg.inv(X)))
    return np.concatenate([[L[2, 1], L[0, 2], L[1, 0]], L[:3, 3], L[:3, 4]])


def filter_at(X, bg=(0, 0, 0), ba=(0, 0, 0), P=None, noise=NOISE):
    return InvariantEKF(X[:3, :3], X[:3, 3], X[:3, 4], np.eye(15) * 1e-4 if P is None else P, noise, gravity=G,
                        bg=bg, ba=ba)


# ------------------------------------------------------------------------------------------------ SE₂(3)

ANGLES = [0.0, 1e-9, 1e-5, 0.05, 0.1999, 0.2001, 1.0, 2.5, math.pi - 1e-4]


@pytest.mark.parametrize("angle", ANGLES)
def test_se23_exp_equals_the_matrix_exponential_and_log_inverts_it(angle):
    rng = np.random.default_rng(int(angle * 1e4) + 7)
    for _ in range(5):
        xi = rng.normal(size=9) * 3
        axis = rng.normal(size=3)
        xi[:3] = angle * axis / np.linalg.norm(axis)
        X = se23_exp(xi)
        assert np.abs(X - scipy.linalg.expm(algebra(xi))).max() < 1e-13 * max(1.0, np.abs(X).max())
        assert np.abs(se23_log(X) - xi).max() < 1e-10 * max(1.0, np.abs(xi).max())


def test_se23_log_of_random_elements_is_scipys_logm():
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        R = scipy.spatial.transform.Rotation.from_quat(q).as_matrix()
        X = state(R, rng.normal(size=3) * 5, rng.normal(size=3) * 50)
        xi = se23_log(X)
        assert np.abs(xi - log_error(X, np.eye(5))).max() < 1e-9 * max(1.0, np.abs(xi).max())
        assert np.abs(se23_exp(xi) - X).max() < 1e-12 * np.abs(X).max()


def test_so3_log_near_pi_picks_the_right_axis():
    for axis in np.eye(3).tolist() + [[1, 1, 0], [0.3, -0.8, 0.52]]:
        axis = np.asarray(axis, float) / np.linalg.norm(axis)
        for theta in (math.pi - 1e-7, math.pi - 1e-3):
            phi = inekf.so3_log(rot(theta * axis))
            assert np.abs(phi - theta * axis).max() < 1e-6


# ------------------------------------------------------------------------------------------------ propagation

def test_noiseless_propagation_follows_the_closed_form_over_10_s():
    """Constant body rate about a tilted axis and constant specific force: after 2000 steps of 5 ms the estimate is
    the exact flow (scipy expm of the whole 10 s at once) to 1e-9 (measured: rotation 4e-15, velocity 1e-12 m/s,
    position 2e-12 m over a 400 m path)."""
    w = np.array([0.3, -0.2, 0.5])
    f = np.array([0.4, 0.1, 9.9])
    X0 = state(rot([0.1, 0.2, 0.3]), [1.0, 0.5, -0.2], [3.0, -2.0, -10.0])
    ekf = filter_at(X0)
    for _ in range(2000):
        ekf.propagate(w, f, 0.005)
    XT = truth_step(X0, w, f, 10.0)
    assert np.linalg.norm(XT[:3, 4] - X0[:3, 4]) > 100
    assert np.abs(ekf.R - XT[:3, :3]).max() < 1e-9
    assert np.abs(ekf.v - XT[:3, 3]).max() < 1e-9
    assert np.abs(ekf.p - XT[:3, 4]).max() < 1e-9
    assert np.abs(ekf.error(XT[:3, :3], XT[:3, 3], XT[:3, 4], (0, 0, 0), (0, 0, 0))).max() < 1e-9
    assert ekf.n_propagations == 2000


def test_propagation_removes_the_biases_and_splits_a_long_step_exactly():
    """The filter's biases are subtracted from the raw IMU; one 2 s step (cut into sub-steps) equals the closed form."""
    w = np.array([0.5, 0.4, -0.6])
    f = np.array([1.0, -0.5, 9.0])
    bg, ba = np.array([0.01, -0.02, 0.03]), np.array([0.1, 0.2, -0.1])
    X0 = state(rot([0.3, -0.1, 1.0]), [0.5, 0.0, 0.1], [0.0, 1.0, -5.0])
    ekf = filter_at(X0, bg=bg, ba=ba)
    ekf.propagate(w + bg, f + ba, 2.0)
    XT = truth_step(X0, w, f, 2.0)
    assert np.abs(se23_log(inekf.se23_matrix(ekf.R, ekf.v, ekf.p) @ np.linalg.inv(XT))).max() < 1e-12


@pytest.mark.parametrize("dt", [0.01, 0.2])
def test_the_transition_is_the_jacobian_of_the_exact_flow(dt):
    """Φ against central differences: perturb the truth relative to the estimate, ξ₀ = ±ε e_i (X = exp(−ξ_R..) X̂,
    b = b̂ − δb), let both follow the same raw IMU exactly (estimate with b̂, truth with b), and difference the
    errors after dt: (ξ₁(+ε) − ξ₁(−ε)) / 2ε = Φ e_i to O(ε²). A lively step (|ω| 1.2 rad/s, |f| 11 m/s²) away from
    the origin, so every bias-coupling block is non-zero."""
    gyro = np.array([0.7, -0.6, 0.8])
    accel = np.array([2.0, -1.5, 10.5])
    Xh = state(rot([0.4, -0.3, 2.0]), [1.5, -0.7, 0.3], [12.0, -8.0, -30.0])
    bgh, bah = np.array([0.02, -0.01, 0.015]), np.array([0.05, -0.08, 0.1])
    ekf = filter_at(Xh, bg=bgh, ba=bah)
    ekf.propagate(gyro, accel, dt)
    Phi = ekf.transition
    Xh1 = state(ekf.R, ekf.v, ekf.p)
    eps = 1e-6
    fd = np.zeros((15, 15))
    for i in range(15):
        cols = []
        for s in (+1, -1):
            xi = np.zeros(15)
            xi[i] = s * eps
            X = np.linalg.inv(scipy.linalg.expm(algebra(xi[:9]))) @ Xh   # X̂ = exp(ξ) X
            bg, ba = bgh - xi[9:12], bah - xi[12:15]                      # δb = b̂ − b
            X1 = truth_step(X, gyro - bg, accel - ba, dt)
            cols.append(np.concatenate([log_error(Xh1, X1), bgh - bg, bah - ba]))
        fd[:, i] = (cols[0] - cols[1]) / (2 * eps)
    scale = np.abs(Phi).max()
    assert np.abs(Phi[:9, 9:]).min(axis=0).max() > 0  # the bias blocks are exercised
    assert np.abs(fd - Phi).max() < 1e-6 * scale, np.abs(fd - Phi).max()


def test_noise_free_covariance_propagation_is_phi_p_phi_t():
    """With zero IMU noise P⁺ = Φ P Φᵀ; with noise P⁺ − Φ P Φᵀ is the discretised Q: symmetric, ≥ 0, and its
    rotation block is σ_g² dt (the gyro white noise through Ad_X̂ = R on the rotation error)."""
    X0 = state(rot([0.2, 0.1, -0.4]), [1.0, 0.2, 0.0], [1.0, 2.0, -3.0])
    rng = np.random.default_rng(0)
    A = rng.normal(size=(15, 15))
    P0 = A @ A.T * 1e-3 + np.eye(15) * 1e-4
    quiet = filter_at(X0, P=P0, noise=ImuNoise(0, 0, 0, 0))
    quiet.propagate([0.2, 0.3, -0.1], [0.1, 0.2, 9.7], 0.01)
    assert np.abs(quiet.P - quiet.transition @ P0 @ quiet.transition.T).max() < 1e-15
    noisy = filter_at(X0, P=P0)
    noisy.propagate([0.2, 0.3, -0.1], [0.1, 0.2, 9.7], 0.01)
    Q = noisy.P - noisy.transition @ P0 @ noisy.transition.T
    assert np.abs(Q - Q.T).max() < 1e-15 * np.abs(P0).max()  # round-off of the difference of two P-sized terms
    assert np.linalg.eigvalsh(Q).min() > -1e-15
    assert np.abs(Q[:3, :3] - np.eye(3) * NOISE.gyroscope_noise_density ** 2 * 0.01).max() < 1e-3 * 2.9e-10
    assert np.abs(np.diag(Q)[9:12] / (NOISE.gyroscope_random_walk ** 2 * 0.01) - 1).max() < 1e-3


# ------------------------------------------------------------------------------------------------ updates

def _perturbed(seed, scale=1e-4):
    """A truth and a filter whose estimate is the truth moved by a small random ξ (biases too), P = I·1e-2."""
    rng = np.random.default_rng(seed)
    X = state(rot(rng.normal(size=3)), rng.normal(size=3), rng.normal(size=3) * 10)
    bg, ba = rng.normal(size=3) * 1e-2, rng.normal(size=3) * 1e-1
    xi = rng.normal(size=15) * scale
    Xh = scipy.linalg.expm(algebra(xi[:9])) @ X
    ekf = filter_at(Xh, bg=bg + xi[9:12], ba=ba + xi[12:15], P=np.eye(15) * 1e-2)
    return X, bg, ba, ekf


def dvl(X, omega, Rbs, r):
    R, v = X[:3, :3], X[:3, 3]
    return Rbs.T @ (R.T @ v + np.cross(omega, r))


def test_a_noise_free_dvl_update_matches_the_measurement_to_second_order():
    """y = R_bsᵀ (Rᵀ v + ω × r) of the truth (ω the true rate = raw gyro − true bias); after an update with a tiny
    covariance the estimate predicts y to O(|ξ|²) ≈ 1e-8, from a misfit of O(|ξ|) ≈ 1e-4 before. A wrong column of
    H (the velocity block, or the gyro-bias term of the lever arm) leaves the misfit at O(|ξ|)."""
    Rbs, r = rot([math.pi, 0.0, math.pi / 4]), np.array([0.3, -0.2, -0.5])
    for seed in range(5):
        X, bg, ba, ekf = _perturbed(seed)
        gyro = np.array([0.4, -0.3, 0.6])
        y = dvl(X, gyro - bg, Rbs, r)
        before = np.abs(y - dvl(state(ekf.R, ekf.v, ekf.p), gyro - ekf.bg, Rbs, r)).max()
        ekf.update_body_velocity(y, 1e-16, R_body_sensor=Rbs, lever_arm=r, omega=gyro - ekf.bg)
        after = np.abs(y - dvl(state(ekf.R, ekf.v, ekf.p), gyro - ekf.bg, Rbs, r)).max()
        assert before > 1e-5 and after < 1e-7, (before, after)


def test_a_noise_free_depth_update_matches_the_measurement_to_second_order():
    """depth = surface − (p + R r)_z: with a 1 m lever arm and the estimate 10 m from the origin the rotational column
    (the estimated sensor position m̂^) matters; a wrong one leaves a misfit of O(|ξ|)."""
    r = np.array([1.0, -0.5, 0.8])
    for seed in range(5):
        X, bg, ba, ekf = _perturbed(seed)
        y = 2.0 - (X[:3, 4] + X[:3, :3] @ r)[2]
        before = abs(y - (2.0 - (ekf.p + ekf.R @ r)[2]))
        ekf.update_depth(y, 1e-16, lever_arm=r, water_surface_z=2.0)
        after = abs(y - (2.0 - (ekf.p + ekf.R @ r)[2]))
        assert before > 1e-5 and after < 1e-2 * before, (before, after)


def test_a_noise_free_magnetometer_update_matches_the_measurement_to_second_order():
    mw = np.array([0.0, 2.0e-5, -4.5e-5])
    Rbs = rot([0.1, -0.2, 0.3])
    for seed in range(5):
        X, bg, ba, ekf = _perturbed(seed)
        y = Rbs.T @ X[:3, :3].T @ mw
        before = np.abs(y - Rbs.T @ ekf.R.T @ mw).max()
        ekf.update_magnetometer(y, 1e-24, mw, R_body_sensor=Rbs)
        after = np.abs(y - Rbs.T @ ekf.R.T @ mw).max()
        assert before > 1e-10 and after < 1e-2 * before, (before, after)


def test_a_noise_free_heading_update_matches_the_yaw():
    for seed in range(5):
        X, bg, ba, ekf = _perturbed(seed)
        R = X[:3, :3]
        yaw = math.atan2(R[1, 0], R[0, 0])
        est = lambda: math.atan2(ekf.R[1, 0], ekf.R[0, 0])  # noqa: E731
        before = abs(math.remainder(yaw - est(), 2 * math.pi))
        ekf.update_heading(yaw, 1e-16)
        after = abs(math.remainder(yaw - est(), 2 * math.pi))
        assert before > 1e-6 and after < 1e-2 * before, (before, after)


def test_an_update_never_lets_bad_input_reach_the_state():
    X0 = state(np.eye(3), [1.0, 0, 0], [0, 0, -5.0])
    ekf = filter_at(X0)
    snapshot = (ekf.R.copy(), ekf.v.copy(), ekf.p.copy(), ekf.P.copy())
    bad = [lambda: ekf.propagate([np.nan, 0, 0], [0, 0, 9.81], 0.01),
           lambda: ekf.propagate([0, 0, 0], [0, 0, 9.81], 0.0),
           lambda: ekf.propagate([0, 0], [0, 0, 9.81], 0.01),
           lambda: ekf.update_body_velocity([1.0, 0.0, np.inf], 1e-4),
           lambda: ekf.update_body_velocity([1.0, 0.0, 0.0], -1e-4),
           lambda: ekf.update_body_velocity([1.0, 0.0, 0.0], np.diag([1.0, -1.0, 1.0])),
           lambda: ekf.update_depth(np.nan, 1e-2),
           lambda: ekf.update_magnetometer([1e-5, 0, 0], 1e-12, [0, 2e-5])]
    for call in bad:
        with pytest.raises(ValueError):
            call()
    for before, after in zip(snapshot, (ekf.R, ekf.v, ekf.p, ekf.P)):
        assert np.array_equal(before, after)
    assert ekf.n_updates == 0 and ekf.n_propagations == 0
    with pytest.raises(ValueError, match="gyroscope_noise_density"):
        ImuNoise(-1.0, 0, 0, 0)
    with pytest.raises(ValueError, match="P"):
        filter_at(X0, P=-np.eye(15))


# ------------------------------------------------------------------------------------------------ read-outs

def _sample_truths(ekf, n, rng):
    """n truths drawn from the filter's belief: ξ ~ N(0, P), X = exp(−ξ) X̂, b = b̂ − δb (se23_exp is checked against
    scipy's expm above; it is used here for speed)."""
    L = np.linalg.cholesky(ekf.P)
    Xh = state(ekf.R, ekf.v, ekf.p)
    for _ in range(n):
        xi = L @ rng.normal(size=15)
        X = se23_exp(-xi[:9]) @ Xh
        yield xi, X, ekf.bg - xi[9:12], ekf.ba - xi[12:15]


def _correlated(seed, scale):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(15, 15))
    return (A @ A.T / 15 + 0.1 * np.eye(15)) * scale


def test_error_recovers_the_sampled_error_and_nees_is_its_quadratic_form():
    X0 = state(rot([0.5, -1.0, 2.0]), [1.0, 2.0, -0.5], [30.0, -20.0, -15.0])
    ekf = filter_at(X0, bg=[0.01, 0.0, -0.01], ba=[0.1, -0.1, 0.0], P=_correlated(1, 1e-2))
    for xi, X, bg, ba in _sample_truths(ekf, 20, np.random.default_rng(2)):
        e = ekf.error(X[:3, :3], X[:3, 3], X[:3, 4], bg, ba)
        assert np.abs(e - xi).max() < 1e-9
        assert ekf.nees(X[:3, :3], X[:3, 3], X[:3, 4], bg, ba) == pytest.approx(xi @ np.linalg.solve(ekf.P, xi),
                                                                               rel=1e-9)
        assert nees(e, ekf.P) == pytest.approx(xi @ np.linalg.solve(ekf.P, xi), rel=1e-9)


def test_the_ros_covariances_are_those_of_monte_carlo_truths():
    """Sample truths from N(0, P) in the filter's own error coordinates (P small, 1e-4, so the first-order maps are
    exact to ~1 %), measure the errors the way nav_msgs/Odometry means them — position p − p̂ in world axes,
    rotation Log(R R̂ᵀ) about the fixed world axes, body velocity Rᵀ v − R̂ᵀ v̂, body rate −(b_g − b̂_g) — and compare
    the sample covariance (20000 samples: a variance's relative standard error ≈ 1 %) with the filter's: within 5 %
    of the largest entry's scale (diagonal-normalised). A sign error in the −p̂^ coupling moves the position block by
    ~|p̂|² P_R ≫ P_p here."""
    X0 = state(rot([0.5, -1.0, 2.0]), [1.0, 2.0, -0.5], [30.0, -20.0, -15.0])
    ekf = filter_at(X0, bg=[0.01, 0.0, -0.01], ba=[0.1, -0.1, 0.0], P=_correlated(4, 1e-4))
    ekf.propagate([0.1, 0.2, 0.3], [0.0, 0.1, 9.8], 0.01)
    rng = np.random.default_rng(5)
    pose, twist = [], []
    for xi, X, bg, ba in _sample_truths(ekf, 20000, rng):
        R, v, p = X[:3, :3], X[:3, 3], X[:3, 4]
        rotv = scipy.spatial.transform.Rotation.from_matrix(R @ ekf.R.T).as_rotvec()
        pose.append(np.concatenate([p - ekf.p, rotv]))
        twist.append(np.concatenate([R.T @ v - ekf.R.T @ ekf.v, -(bg - ekf.bg)]))
    for samples, C in ((np.array(pose), ekf.pose_covariance_ros()),
                       (np.array(twist), ekf.twist_covariance_ros() - np.diag([0, 0, 0, 1, 1, 1]) *
                        NOISE.gyroscope_noise_density ** 2 / 0.01)):
        S = np.cov(samples.T)
        d = np.sqrt(np.diag(C))
        assert np.abs((S - C) / np.outer(d, d)).max() < 0.05


def test_the_twist_covariance_adds_the_gyro_sample_noise():
    ekf = filter_at(state(np.eye(3), np.zeros(3), np.zeros(3)), P=np.eye(15) * 1e-6)
    ekf.propagate([0.0, 0.0, 0.1], [0.0, 0.0, 9.81], 0.005)
    C = ekf.twist_covariance_ros()
    assert np.allclose(np.diag(C)[3:], 1e-6 * (1 + 0) + NOISE.gyroscope_noise_density ** 2 / 0.005, rtol=1e-3)


# ------------------------------------------------------------------------------------------------ χ² bounds

def test_anees_bounds_are_the_chi_square_quantiles():
    """Textbook quantiles: χ²(1) 2.5 % = 0.000982, 97.5 % = 5.024; χ²(750)/50 by the Wilson–Hilferty cube-root
    approximation (accurate to ~1e-4 relative at 750 degrees of freedom)."""
    lo, hi = anees_bounds(1, 1)
    assert lo == pytest.approx(0.000982, rel=1e-3) and hi == pytest.approx(5.0239, rel=1e-4)
    k, z = 750, 1.959964
    wh = [k * (1 - 2 / (9 * k) + s * z * math.sqrt(2 / (9 * k))) ** 3 / 50 for s in (-1, 1)]
    lo, hi = anees_bounds(15, 50)
    assert lo == pytest.approx(wh[0], rel=1e-3) and hi == pytest.approx(wh[1], rel=1e-3)
    c = consistency(np.full((50, 4), 15.0), 15)
    assert c.fraction_inside == 1.0 and c.mean_anees == 15.0
    c = consistency(np.array([[15.0, 40.0]] * 50), 15)
    assert c.fraction_inside == 0.5
    with pytest.raises(ValueError):
        anees_bounds(0, 5)


def test_the_dvl_update_counts_the_gyro_sample_noise_of_the_lever_arm():
    """With P ≈ 0 the innovation covariance is the DVL's own plus the gyro sample's white noise through ω × r:
    S = σ² I + (σ_g²/dt) r^ r^ᵀ in sensor = body axes, so the NIS of a chosen misfit is ỹᵀ S⁻¹ ỹ (hand formula)."""
    ekf = filter_at(state(np.eye(3), np.zeros(3), np.zeros(3)), P=np.eye(15) * 1e-30,
                    noise=ImuNoise(NOISE.gyroscope_noise_density, 0.0, 0.0, 0.0))  # P stays ≈ 0 but for the rotation
    ekf.propagate([0.0, 0.0, 0.0], -G, 0.01)
    r = np.array([0.0, 2.0, 0.0])
    misfit = np.array([0.01, 0.0, 0.01])
    nis = ekf.update_body_velocity(ekf.body_velocity + misfit, 1e-4, lever_arm=r, omega=np.zeros(3))
    q = NOISE.gyroscope_noise_density ** 2 / 0.01 * 4.0   # (σ_g²/dt)|r|² on the axes ⟂ r (x and z)
    assert nis == pytest.approx(0.01 ** 2 / (1e-4 + q) * 2, rel=1e-6)
