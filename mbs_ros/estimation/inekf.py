"""The invariant EKF on SE₂(3) with IMU biases outside the group ("imperfect" InEKF) for IMU + DVL + depth + compass.

State X = [[R, v, p], [0, 1, 0], [0, 0, 1]] ∈ SE₂(3) (R world←body, v, p world), biases b_g, b_a; covariance P of the
right-invariant error ξ = [ξ_R, ξ_v, ξ_p, δb_g, δb_a] with exp(ξ_{0:9}) = X̂ X⁻¹ and δb = b̂ − b (Barrau & Bonnabel,
"The invariant extended Kalman filter as a stable observer", IEEE TAC 2017; Hartley et al., "Contact-aided invariant
extended Kalman filtering for robot state estimation", IJRR 2020, for the bias terms). The IMU propagation is
group affine: the mean is integrated exactly for constant bias-corrected inputs over a step (the Γ₁, Γ₂ of Hartley
et al.); the error transition Φ is exact over a step too: its in-group block is constant (the right-invariant error
dynamics do not depend on the estimate), its bias block is the integral of the left-invariant error dynamics, which
are constant over a step, carried to the right-invariant error by Ad_X̂ (ξ = Ad_X̂ ζ).
Updates are EKF corrections X̂⁺ = exp(δ) X̂, b̂⁺ = b̂ + δ_b with Joseph-form covariance; DVL velocity and magnetometer
are invariant observations, depth is not (its rotational Jacobian holds the estimated position, Potokar, Norman &
Mangelson, "Invariant extended Kalman filtering for underwater navigation", IEEE RA-L 2021). docs/estimation.md is
the manual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Most sub-steps of one propagate(): the work of one IMU step is bounded whatever its rate and length. Within the
#: rates an IMU reports (±2000 °/s, ±24 g: Bosch BMI088) 100 Hz steps need at most 8; a sub-step whose ρ = |A_L| dt
#: exceeds SERIES_LIMIT then integrates its bias block by scaling and squaring (:func:`_integral_of_exp`) instead of
#: the series, whose terms would grow with ρ.
MAX_SUBSTEPS = 16
SERIES_LIMIT = 1.0

# Taylor coefficients used below this angle, where the closed forms lose digits to cancellation (the θ⁴-cancellation
# of Γ₂'s last coefficient loses ~24 eps/θ⁴ ≈ 3e-12 at 0.2; the series' first neglected term is < 1e-16 there).
_SMALL = 0.2
_I3 = np.eye(3)


@dataclass(frozen=True)
class ImuNoise:
    """Continuous-time IMU noise (Kalibr names and units): white noise densities gyro [rad/s/√Hz], accel
    [m/s²/√Hz]; bias random walks gyro [rad/s²/√Hz], accel [m/s³/√Hz]."""

    gyroscope_noise_density: float
    accelerometer_noise_density: float
    gyroscope_random_walk: float
    accelerometer_random_walk: float

    def __post_init__(self):
        for name in ("gyroscope_noise_density", "accelerometer_noise_density", "gyroscope_random_walk",
                     "accelerometer_random_walk"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"ImuNoise.{name}: expected a finite number >= 0, got {value!r}")


# ---------------------------------------------------------------------------------------------------- SO(3), SE₂(3)

def hat(w) -> np.ndarray:
    """The skew matrix of a 3-vector: hat(w) x = w × x."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _coefficients(theta: float) -> tuple[float, float, float, float]:
    """sin θ/θ, (1 − cos θ)/θ², (θ − sin θ)/θ³, (θ² + 2 cos θ − 2)/(2 θ⁴): Exp = I + a Φ + b Φ²,
    Γ₁ = I + b Φ + c Φ², Γ₂ = I/2 + c Φ + d Φ² (Φ = hat(φ), θ = |φ|)."""
    if theta < _SMALL:
        t2 = theta * theta
        return (1 - t2 / 6 * (1 - t2 / 20 * (1 - t2 / 42 * (1 - t2 / 72))),
                0.5 - t2 / 24 * (1 - t2 / 30 * (1 - t2 / 56 * (1 - t2 / 90))),
                1 / 6 - t2 / 120 * (1 - t2 / 42 * (1 - t2 / 72 * (1 - t2 / 110))),
                1 / 24 - t2 / 720 * (1 - t2 / 56 * (1 - t2 / 90 * (1 - t2 / 132))))
    s, c = math.sin(theta), math.cos(theta)
    t2 = theta * theta
    return s / theta, (1 - c) / t2, (theta - s) / (t2 * theta), (t2 + 2 * c - 2) / (2 * t2 * t2)


def so3_exp(phi) -> np.ndarray:
    """Rodrigues' formula Exp(φ) = I + (sin θ/θ) Φ + ((1 − cos θ)/θ²) Φ²."""
    phi = np.asarray(phi, dtype=float)
    a, b, _, _ = _coefficients(float(np.linalg.norm(phi)))
    P = hat(phi)
    return _I3 + a * P + b * (P @ P)


def so3_log(R) -> np.ndarray:
    """The rotation vector of R, |φ| ≤ π, through the quaternion (Shepperd's branch choice, stable near π)."""
    R = np.asarray(R, dtype=float)
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    i = int(np.argmax([tr, R[0, 0], R[1, 1], R[2, 2]]))
    if i == 0:
        w = 0.5 * math.sqrt(max(1 + tr, 0.0))
        x, y, z = (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)
    else:
        j, k = (i % 3), ((i + 1) % 3)  # the other two axes after axis i-1
        a = i - 1
        s = 2 * math.sqrt(max(1 + R[a, a] - R[j, j] - R[k, k], 0.0))
        q = [0.0, 0.0, 0.0]
        q[a] = 0.25 * s
        q[j] = (R[j, a] + R[a, j]) / s
        q[k] = (R[k, a] + R[a, k]) / s
        w = (R[k, j] - R[j, k]) / s
        x, y, z = q
    if w < 0:
        w, x, y, z = -w, -x, -y, -z
    n = math.sqrt(x * x + y * y + z * z)
    if n < 1e-300:
        return np.zeros(3)
    theta = 2 * math.atan2(n, w)
    # θ / sin(θ/2) with sin(θ/2) = n/|q|; series near 0 where n → 0
    scale = theta / n if theta > 1e-8 else 2.0 / w
    return np.array([x, y, z]) * scale


def so3_left_jacobian(phi) -> np.ndarray:
    """Γ₁(φ) = J_l(φ) = ∫₀¹ Exp(sφ) ds = I + ((1 − cos θ)/θ²) Φ + ((θ − sin θ)/θ³) Φ²."""
    _, b, c, _ = _coefficients(float(np.linalg.norm(phi)))
    P = hat(phi)
    return _I3 + b * P + c * (P @ P)


def so3_left_jacobian_inv(phi) -> np.ndarray:
    """J_l(φ)⁻¹ = I − Φ/2 + (1/θ²)(1 − θ sin θ/(2(1 − cos θ))) Φ² (θ < 2π)."""
    theta = float(np.linalg.norm(phi))
    if theta < _SMALL:
        t2 = theta * theta
        e = 1 / 12 + t2 / 720 + t2 * t2 / 30240 + t2 ** 3 / 1209600
    else:
        e = (1 - theta * math.sin(theta) / (2 * (1 - math.cos(theta)))) / (theta * theta)
    P = hat(phi)
    return _I3 - 0.5 * P + e * (P @ P)


def se23_matrix(R, v, p) -> np.ndarray:
    """The 5×5 matrix of (R, v, p) ∈ SE₂(3)."""
    X = np.eye(5)
    X[:3, :3] = R
    X[:3, 3] = v
    X[:3, 4] = p
    return X


def se23_exp(xi) -> np.ndarray:
    """exp of ξ = [φ, ρ_v, ρ_p] ∈ se₂(3): [[Exp φ, J_l(φ) ρ_v, J_l(φ) ρ_p], [0, 1, 0], [0, 0, 1]]."""
    xi = np.asarray(xi, dtype=float)
    J = so3_left_jacobian(xi[:3])
    return se23_matrix(so3_exp(xi[:3]), J @ xi[3:6], J @ xi[6:9])


def se23_log(X) -> np.ndarray:
    """The inverse of se23_exp (rotation angle ≤ π): φ = Log R, ρ = J_l(φ)⁻¹ [v, p]."""
    X = np.asarray(X, dtype=float)
    phi = so3_log(X[:3, :3])
    Jinv = so3_left_jacobian_inv(phi)
    return np.concatenate([phi, Jinv @ X[:3, 3], Jinv @ X[:3, 4]])


def se23_adjoint(R, v, p) -> np.ndarray:
    """Ad_X (9×9) with exp(Ad_X ξ) = X exp(ξ) X⁻¹: [[R, 0, 0], [v^ R, R, 0], [p^ R, 0, R]]."""
    A = np.zeros((9, 9))
    A[0:3, 0:3] = A[3:6, 3:6] = A[6:9, 6:9] = R
    A[3:6, 0:3] = hat(v) @ R
    A[6:9, 0:3] = hat(p) @ R
    return A


def _check(value, shape, what: str) -> np.ndarray:
    """A finite float array of the given shape, or ValueError naming the argument (bad input never reaches the
    state)."""
    a = np.asarray(value, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: not finite")
    return a


def _covariance(cov, n: int, what: str) -> np.ndarray:
    """A measurement covariance: a number (variance, times I), n variances, or an n×n matrix; symmetric, > 0."""
    c = np.asarray(cov, dtype=float)
    if c.ndim == 0:
        if not (math.isfinite(float(c)) and float(c) > 0):
            raise ValueError(f"{what}: expected a variance > 0, got {float(c)!r}")
        return float(c) * np.eye(n)
    elif c.shape == (n,):
        c = np.diag(c)
    elif c.shape == (n * n,):
        c = c.reshape(n, n)
    if c.shape != (n, n) or not np.all(np.isfinite(c)):
        raise ValueError(f"{what}: expected a variance, {n} variances or an {n}x{n} covariance, got shape "
                         f"{np.shape(cov)}")
    c = 0.5 * (c + c.T)
    try:
        np.linalg.cholesky(c)
    except np.linalg.LinAlgError:
        raise ValueError(f"{what}: covariance not positive definite") from None
    return c


# ------------------------------------------------------------------------------------------------------ the filter

class InvariantEKF:
    """Right-invariant EKF on SE₂(3) × R⁶ (module docstring). Attributes R, v, p, bg, ba, P (15×15, order
    [ξ_R, ξ_v, ξ_p, δb_g, δb_a]), gravity, noise, omega (the last bias-corrected gyro, body), transition (the
    last propagate's Φ) and the counts n_propagations / n_updates."""

    def __init__(self, R, v, p, P, noise: ImuNoise, gravity=(0.0, 0.0, -9.81), bg=(0.0, 0.0, 0.0),
                 ba=(0.0, 0.0, 0.0)):
        R = _check(R, (3, 3), "R")
        if np.abs(R.T @ R - _I3).max() > 1e-6 or np.linalg.det(R) <= 0:
            raise ValueError("R: not a rotation matrix")
        self.R = so3_exp(so3_log(R))  # exactly orthonormal
        self.v = _check(v, (3,), "v").copy()
        self.p = _check(p, (3,), "p").copy()
        self.bg = _check(bg, (3,), "bg").copy()
        self.ba = _check(ba, (3,), "ba").copy()
        P = _check(P, (15, 15), "P")
        P = 0.5 * (P + P.T)
        if np.linalg.eigvalsh(P).min() <= 0:
            raise ValueError("P: covariance not positive definite")
        self.P = P
        if not isinstance(noise, ImuNoise):
            raise TypeError(f"noise: expected ImuNoise, got {type(noise).__name__}")
        self.noise = noise
        self.gravity = _check(gravity, (3,), "gravity").copy()
        self.omega = np.zeros(3)
        self._gyro_variance = 0.0  # white-noise variance of the last gyro sample (σ_g²/dt)
        self.n_propagations = 0
        self.n_substeps = 0  # the propagation's work: sub-steps taken (each at most MAX_SUBSTEPS per propagate)
        self.n_updates = 0
        # continuous noise in the input coordinates (gyro, accel white noise, bias random walks): the diagonal of Q_c
        self._q_gyro = noise.gyroscope_noise_density ** 2
        self._q_accel = noise.accelerometer_noise_density ** 2
        self._Q_bias = np.diag(np.concatenate([np.zeros(9), np.full(3, noise.gyroscope_random_walk ** 2),
                                               np.full(3, noise.accelerometer_random_walk ** 2)]))
        self._Phi = np.eye(15)  # the transition of the last sub-step (its constant entries are set once)
        self.transition = np.eye(15)  # Φ of the last propagate(): ξ⁺ ≈ Φ ξ

    # ------------------------------------------------------------------------------------------------ propagation

    def propagate(self, gyro, accel, dt) -> None:
        """One IMU step: gyro [rad/s] and specific force accel [m/s²] in the body (= IMU) frame, held over dt [s].

        Mean (exact for constant ω̂ = gyro − b̂_g, â = accel − b̂_a; the Γ functions of Hartley et al. 2020):
        R⁺ = R Exp(ω̂ dt), v⁺ = v + R Γ₁ â dt + g dt, p⁺ = p + v dt + R Γ₂ â dt² + g dt²/2.
        Covariance: the exact transition of the linearised error dynamics
        ξ̇ = A ξ − Ad_X̂ [δb_g; δb_a] + Ad_X̂ [n_g; n_a] over the step: in-group block
        [[I, 0, 0], [g^ dt, I, 0], [g^ dt²/2, I dt, I]]; bias block Ad_X̂⁺ ∫₀^dt exp(A_L τ) dτ (−E), from the
        left-invariant error dynamics A_L = [[−ω̂^, 0, 0], [−â^, −ω̂^, 0], [0, I, −ω̂^]]
        (constant over the step; ξ = Ad_X̂ ζ), E = [I₆; 0₃ₓ₆]. Q_d by the trapezoidal rule of its exact integral."""
        gyro = _check(gyro, (3,), "gyro")
        accel = _check(accel, (3,), "accel")
        dt = float(dt)
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt: expected a finite time step > 0, got {dt!r}")
        w = gyro - self.bg
        a = accel - self.ba
        # the bias block's series converges fast for |A_L| dt ≤ 1/2; a longer step is cut into equal sub-steps, which
        # is exact for inputs held constant
        rho = dt * (2 * float(np.abs(w).sum()) + float(np.abs(a).sum()) + 1.0)
        # at most MAX_SUBSTEPS (the work of one call is bounded whatever the rate or the gap: 1e6 rad/s held over
        # 10 ms took 12 s); beyond, each sub-step's bias block is the exact matrix exponential (_step)
        substeps = min(max(1, math.ceil(rho / 0.5)), MAX_SUBSTEPS)
        h = dt / substeps
        transition = np.eye(15)
        for _ in range(substeps):
            self._step(w, a, h)
            transition = self._Phi @ transition
        self.transition = transition
        self.omega = w
        self._gyro_variance = self.noise.gyroscope_noise_density ** 2 / dt
        self.n_propagations += 1
        self.n_substeps += substeps
        return substeps

    def _step(self, w: np.ndarray, a: np.ndarray, dt: float) -> None:
        """propagate() over one sub-step dt with the bias-corrected rate w and specific force a."""
        phi = w * dt
        ca, cb, cc, cd = _coefficients(math.sqrt(float(phi @ phi)))
        F = hat(phi)
        F2 = F @ F
        dR = _I3 + ca * F + cb * F2
        G1 = _I3 + cb * F + cc * F2
        G2 = 0.5 * _I3 + cc * F + cd * F2
        R0, v0, p0, g = self.R, self.v, self.p, self.gravity
        R1 = R0 @ dR
        v1 = v0 + R0 @ (G1 @ a) * dt + g * dt
        p1 = p0 + v0 * dt + R0 @ (G2 @ a) * (dt * dt) + 0.5 * g * (dt * dt)

        # in-group block: exact and constant (right-invariant errors are autonomous); bias block: Ad_X̂⁺ times
        # −∫₀^dt exp(A_L τ) dτ E = −Σ_k A_L^k dt^(k+1)/(k+1)! E, summed until the bound ρ^k/k! of a term relative to
        # the first (ρ = |A_L|∞ dt) is below 1e-13
        AL = np.zeros((9, 9))
        W = hat(w)
        AL[0:3, 0:3] = AL[3:6, 3:6] = AL[6:9, 6:9] = -W
        AL[3:6, 0:3] = -hat(a)
        AL[6:9, 3:6] = _I3
        rho = dt * (2 * float(np.abs(w).sum()) + max(float(np.abs(a).sum()), 1.0))
        if rho > SERIES_LIMIT:  # only when propagate() capped its sub-steps
            BL = -_integral_of_exp(AL, dt, rho)[:, 0:6]
        else:
            bound, k = 1.0, 1
            while bound > 1e-13:
                k += 1
                bound *= rho / k
            term = np.zeros((9, 6))
            term[0:3, 0:3] = term[3:6, 3:6] = -dt * _I3
            BL = term.copy()
            for j in range(2, k + 1):
                term = AL @ term
                term *= dt / j
                BL += term
        Phi = self._Phi
        g_hat = hat(g)
        Phi[3:6, 0:3] = g_hat * dt
        Phi[6:9, 0:3] = g_hat * (0.5 * dt * dt)
        Phi[6:9, 3:6] = dt * _I3
        top = R1 @ BL[0:3]                                 # Ad_X̂⁺ BL, Ad = [[R, 0, 0], [v^R, R, 0], [p^R, 0, R]]
        Phi[0:3, 9:15] = top
        Phi[3:6, 9:15] = hat(v1) @ top + R1 @ BL[3:6]
        Phi[6:9, 9:15] = hat(p1) @ top + R1 @ BL[6:9]
        # Q_d = ∫₀^dt Φ(dt, s) G(s) Q_c G(s)ᵀ Φ(dt, s)ᵀ ds, G = diag(Ad_X̂, I₆), by the trapezoidal rule:
        # P⁺ = Φ (P + Q₀ dt/2) Φᵀ + Q₁ dt/2 with Q = G Q_c Gᵀ at either end of the step
        P = self.P + self._input_noise(v0, p0, 0.5 * dt)
        P = Phi @ P @ Phi.T + self._input_noise(v1, p1, 0.5 * dt)
        self.R = _reorthonormalise(R1)
        self.v, self.p = v1, p1
        self.P = 0.5 * (P + P.T)

    def _input_noise(self, v: np.ndarray, p: np.ndarray, dt: float) -> np.ndarray:
        """G Q_c Gᵀ dt with G = diag(Ad_X̂, I₆): isotropic white noise through the adjoint (the gyro's Ad column
        [R; v^R; p^R] gives σ_g² S Sᵀ with S = [I; v^; p^] as R Rᵀ = I; the accelerometer's [0; R; 0] gives σ_a² on
        the velocity block), bias random walks as they are."""
        S = np.empty((9, 3))
        S[0:3] = _I3
        S[3:6] = hat(v)
        S[6:9] = hat(p)
        Q = self._Q_bias * dt
        Q[:9, :9] = (self._q_gyro * dt) * (S @ S.T)
        Q[3:6, 3:6] += (self._q_accel * dt) * _I3
        return Q

    # ------------------------------------------------------------------------------------------------ updates

    def _correct(self, innovation: np.ndarray, H: np.ndarray, N: np.ndarray) -> float:
        """EKF correction with y − h(X̂) ≈ H δ + n, δ the truth relative to the estimate (X = exp(δ) X̂, b = b̂ + δ_b,
        δ = −ξ to first order): X̂⁺ = exp(K y~) X̂, b̂⁺ = b̂ + K_b y~, P⁺ = (I − KH) P (I − KH)ᵀ + K N Kᵀ.
        Returns the normalised innovation squared y~ᵀ S⁻¹ y~ (the NIS)."""
        K, Sinv = self._gain(H, N)
        self._apply(K @ innovation, K, H, N)
        return float(innovation @ Sinv @ innovation)

    def _gain(self, H: np.ndarray, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """K = P Hᵀ S⁻¹ and S⁻¹, S = H P Hᵀ + N."""
        PHt = self.P @ H.T
        S = H @ PHt + N
        Sinv = np.linalg.inv(0.5 * (S + S.T))
        return PHt @ Sinv, Sinv

    def _apply(self, d: np.ndarray, K: np.ndarray, H: np.ndarray, N: np.ndarray) -> None:
        """X̂⁺ = exp(d) X̂, b̂⁺ = b̂ + d_b, Joseph-form P⁺."""
        phi = d[0:3]
        ca, cb, cc, _ = _coefficients(math.sqrt(float(phi @ phi)))
        F = hat(phi)
        F2 = F @ F
        dR = _I3 + ca * F + cb * F2
        J = _I3 + cb * F + cc * F2
        self.R = _reorthonormalise(dR @ self.R)   # exp(d) X̂
        self.v = dR @ self.v + J @ d[3:6]
        self.p = dR @ self.p + J @ d[6:9]
        self.bg = self.bg + d[9:12]
        self.ba = self.ba + d[12:15]
        IKH = np.eye(15) - K @ H
        P = IKH @ self.P @ IKH.T + K @ N @ K.T
        self.P = 0.5 * (P + P.T)
        self.n_updates += 1

    def update_body_velocity(self, y, cov, R_body_sensor=_I3, lever_arm=(0.0, 0.0, 0.0), omega=None) -> float:
        """DVL: y = R_bsᵀ (Rᵀ v + ω × r) + n in sensor axes, r = lever_arm (body) of the sensor, ω = omega (the
        bias-corrected body rate; default the last propagated one). A left-invariant observation: with
        X = exp(δ) X̂, Rᵀ v ≈ R̂ᵀ v̂ + R̂ᵀ δ_v and ω = ω̂ − δb_g, so H = R_bsᵀ [0, R̂ᵀ, 0, r^, 0]. The gyro sample's
        white noise in ω × r (variance σ_g²/dt of the last IMU step) is added to cov. Returns the NIS."""
        y = _check(y, (3,), "y")
        N = _covariance(cov, 3, "cov")
        Rbs = _check(R_body_sensor, (3, 3), "R_body_sensor")
        r = _check(lever_arm, (3,), "lever_arm")
        w = self.omega if omega is None else _check(omega, (3,), "omega")
        predicted = Rbs.T @ (self.R.T @ self.v + np.cross(w, r))
        H = np.zeros((3, 15))
        H[:, 3:6] = Rbs.T @ self.R.T
        H[:, 9:12] = Rbs.T @ hat(r)
        if self._gyro_variance > 0 and r.any():
            C = H[:, 9:12]
            N = N + self._gyro_variance * (C @ C.T)
        return self._correct(y - predicted, H, N)

    def update_depth(self, depth, var, lever_arm=(0.0, 0.0, 0.0), water_surface_z=0.0) -> float:
        """Pressure depth of the sensor at m = p + R r (r = lever_arm, body): depth = water_surface_z − m_z + n,
        positive down. Not an invariant observation (Potokar et al. 2021): with X = exp(δ) X̂ the sensor moves by
        δ_p − m̂^ δ_R, so H = [e_zᵀ m̂^, 0, −e_zᵀ, 0, 0] carries the estimated position (the z row of their full
        position pseudo-measurement, whose x and y rows have infinite variance). Returns the NIS."""
        depth = _check(depth, (), "depth")
        N = _covariance(var, 1, "var")
        r = _check(lever_arm, (3,), "lever_arm")
        surface = float(_check(water_surface_z, (), "water_surface_z"))
        m = self.p + self.R @ r
        H = np.zeros((1, 15))
        H[0, 0:3] = hat(m)[2]
        H[0, 8] = -1.0
        return self._correct(np.array([depth - (surface - m[2])]), H, N)

    def update_magnetometer(self, m, cov, field_world, R_body_sensor=_I3, iterations: int = 20) -> float:
        """Full-field magnetometer: m = R_bsᵀ Rᵀ m_w + n [T] (no hard/soft iron: calibrate first). An invariant
        observation of the rotation alone, H = [R_bsᵀ R̂ᵀ m_w^, 0, 0, 0, 0]: it observes the rotation about every
        axis ⟂ m_w, i.e. the heading and, through the field's inclination, part of roll/pitch, which the
        accelerometer's gravity makes consistent with the same truth.

        Iterated (Gauss–Newton on the MAP cost, Bell & Cathey 1993) until the correction moves by < 1e-9 rad or
        after ``iterations`` (1 = the plain EKF update): near the truth the second iterate changes nothing that
        matters, but from a heading tens of degrees off the plain update collapses P long before the error (its
        linearisation sees sin of the error), which costs tens of seconds of convergence. The Jacobian at the
        iterate δ_i is H(exp(δ_i) X̂) J_l(δ_R,i). Returns the NIS of the first (EKF) innovation."""
        m = _check(m, (3,), "m")
        N = _covariance(cov, 3, "cov")
        mw = _check(field_world, (3,), "field_world")
        Rbs = _check(R_body_sensor, (3, 3), "R_body_sensor")
        if not (isinstance(iterations, int) and iterations >= 1):
            raise ValueError(f"iterations: expected an integer >= 1, got {iterations!r}")
        d = np.zeros(15)
        H = np.zeros((3, 15))
        nis = None
        for _ in range(iterations):
            Ri = so3_exp(d[0:3]) @ self.R
            predicted = Rbs.T @ Ri.T @ mw
            H[:, 0:3] = Rbs.T @ Ri.T @ hat(mw) @ so3_left_jacobian(d[0:3])
            K, Sinv = self._gain(H, N)
            innovation = m - predicted
            if nis is None:
                nis = float(innovation @ Sinv @ innovation)
            step = K @ (innovation + H @ d)
            moved = float(np.abs(step[0:3] - d[0:3]).max())
            d = step
            if moved < 1e-9:
                break
        self._apply(d, K, H, N)
        return nis

    def update_heading(self, yaw, var) -> float:
        """Heading (ZYX yaw of R, rad, ENU: 0 along +x, counter-clockwise) from a compass that outputs one. With
        R = Exp(δ_R) R̂: δψ = δ_R,z + tan θ (cos ψ δ_R,x + sin ψ δ_R,y) (θ pitch); innovation wrapped to (−π, π].
        Singular at ±90° pitch (refused). Returns the NIS."""
        yaw = float(_check(yaw, (), "yaw"))
        N = _covariance(var, 1, "var")
        R = self.R
        psi = math.atan2(R[1, 0], R[0, 0])
        c = math.hypot(R[0, 0], R[1, 0])
        if c < 1e-6:
            raise ValueError("update_heading: heading undefined at ±90° pitch")
        tan_theta = -R[2, 0] / c
        H = np.zeros((1, 15))
        H[0, 0:3] = [tan_theta * math.cos(psi), tan_theta * math.sin(psi), 1.0]
        innovation = math.remainder(yaw - psi, 2 * math.pi)
        return self._correct(np.array([innovation]), H, N)

    # ------------------------------------------------------------------------------------------------ read-outs

    def error(self, R, v, p, bg=None, ba=None) -> np.ndarray:
        """The estimate's error w.r.t. the truth (R, v, p, bg, ba): [log(X̂ X⁻¹); b̂_g − b_g; b̂_a − b_a] (15,), the
        vector P is the covariance of. A bias given as None contributes zeros (unknown truth)."""
        X = se23_matrix(_check(R, (3, 3), "R"), _check(v, (3,), "v"), _check(p, (3,), "p"))
        Xinv = np.eye(5)
        Xinv[:3, :3] = X[:3, :3].T
        Xinv[:3, 3:5] = -X[:3, :3].T @ X[:3, 3:5]
        xi = se23_log(se23_matrix(self.R, self.v, self.p) @ Xinv)
        dbg = np.zeros(3) if bg is None else self.bg - _check(bg, (3,), "bg")
        dba = np.zeros(3) if ba is None else self.ba - _check(ba, (3,), "ba")
        return np.concatenate([xi, dbg, dba])

    def nees(self, R, v, p, bg, ba) -> float:
        """Normalised estimation error squared eᵀ P⁻¹ e of error(R, v, p, bg, ba); χ²(15) for a consistent filter."""
        e = self.error(R, v, p, bg, ba)
        return float(e @ np.linalg.solve(self.P, e))

    def pose_covariance_ros(self) -> np.ndarray:
        """Covariance (6×6) of nav_msgs/Odometry's pose [x, y, z, rot X, rot Y, rot Z]: position error in world
        axes and the rotation as a small rotation vector about the fixed world axes (R = Exp(δθ) R̂, ROS's
        "fixed-axis representation"). δθ = −ξ_R and δp = −(ξ_p − p̂^ ξ_R) to first order, so J = [[−p̂^, 0, I, 0, 0],
        [I, 0, 0, 0, 0]] (signs cancel in J P Jᵀ)."""
        J = np.zeros((6, 15))
        J[0:3, 0:3] = -hat(self.p)
        J[0:3, 6:9] = _I3
        J[3:6, 0:3] = _I3
        C = J @ self.P @ J.T
        return 0.5 * (C + C.T)

    def twist_covariance_ros(self) -> np.ndarray:
        """Covariance (6×6) of nav_msgs/Odometry's twist [v_body; ω_body] (child frame = body): v_body = R̂ᵀ v̂ has
        the error R̂ᵀ ξ_v; ω = gyro − b̂_g has −δb_g plus the last gyro sample's white noise σ_g²/dt (per axis)."""
        J = np.zeros((6, 15))
        J[0:3, 3:6] = self.R.T
        J[3:6, 9:12] = -_I3
        C = J @ self.P @ J.T
        C[3:6, 3:6] += self._gyro_variance * _I3
        return 0.5 * (C + C.T)

    @property
    def body_velocity(self) -> np.ndarray:
        """R̂ᵀ v̂: the body-frame linear velocity (nav_msgs/Odometry's twist.linear)."""
        return self.R.T @ self.v


def _integral_of_exp(A: np.ndarray, dt: float, rho: float) -> np.ndarray:
    """∫₀^dt exp(A τ) dτ by scaling and squaring (ρ ≥ |A| dt): the series of exp(A h) and of its integral over
    h = dt / 2^m with ρ/2^m ≤ 1/2, then m doublings I(2h) = I(h) + exp(A h) I(h), exp(2Ah) = exp(Ah)²: work in
    log₂ ρ, where the series over dt needs ~e ρ terms that cancel."""
    m = max(0, math.ceil(math.log2(rho / 0.5)))
    h = dt / 2 ** m
    n = A.shape[0]
    E = np.eye(n)
    term = np.eye(n) * h  # A^k h^(k+1) / (k+1)!
    I = term.copy()
    power = np.eye(n)  # A^k h^k / k!
    r, k = rho / 2 ** m, 0
    bound = 1.0
    while bound > 1e-16:
        k += 1
        power = power @ A * (h / k)
        E += power
        term = term @ A * (h / (k + 1))
        I += term
        bound *= r / k
    for _ in range(m):
        I = I + E @ I
        E = E @ E
    return I


def _reorthonormalise(R: np.ndarray) -> np.ndarray:
    """The nearest rotation (one Newton step of the polar decomposition, R (3I − RᵀR)/2): removes the O(eps) drift of
    products of rotations without moving an orthonormal R."""
    return 0.5 * R @ (3 * _I3 - R.T @ R)
