"""IMU (sensor_msgs/Imu): specific force and angular rate in the sensor frame at its mounting point, with the
Kalibr / Gazebo noise model, and optionally an orientation (an AHRS) with its own noise.

Specific force ``f = R_wsᵀ (a_s − g_w)``: ``a_s`` the inertial acceleration of the sensor point, from the
simulator's own accelerations with the lever-arm terms ``ω̇ × r + ω × (ω × r)`` (computed by the suite); at rest
an IMU reads ``+|g|`` along its up axis. Measured ``ω̃ = ω + b_g + n_g``, ``ã = f + b_a + n_a`` (Furgale et al.,
Kalibr IMU noise model; Gazebo's imu_sensor), the biases and noises of :mod:`mbs_ros.sensors.noise` at the IMU's
sample period. Covariances: the per-sample white-noise variances on the diagonal. ROS-free.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import BiasProcess, generator, white_std

__all__ = ["KEYS", "NOISE_KEYS", "DEFAULT_NOISE", "ImuParams", "parse", "Sensor", "NORMALS_PER_SAMPLE"]

KEYS = ("noise", "orientation")
#: ADIS16448-class defaults (the UUV simulator's IMU plugin): gyro white 2·35°/h/√Hz, gyro bias random walk
#: 2·4°/h/√Hz per s, accelerometer white 4e-3 m/s²/√Hz, bias random walk 6e-3 m/s³/√Hz, correlation times 1000 s
#: (gyro) and 300 s (accelerometer); no turn-on bias.
DEFAULT_NOISE = {
    "gyroscope_noise_density": 2 * 35 / 3600 * math.pi / 180,  # rad/s/√Hz
    "gyroscope_random_walk": 2 * 4 / 3600 * math.pi / 180,  # rad/s²/√Hz
    "gyroscope_bias_correlation_time": 1000.0,  # s; 0: pure random walk
    "gyroscope_turn_on_bias_sigma": 0.0,  # rad/s
    "accelerometer_noise_density": 4e-3,  # m/s²/√Hz
    "accelerometer_random_walk": 6e-3,  # m/s³/√Hz
    "accelerometer_bias_correlation_time": 300.0,  # s
    "accelerometer_turn_on_bias_sigma": 0.0,  # m/s²
}
NOISE_KEYS = tuple(DEFAULT_NOISE)
#: Normals drawn per sample, in this order: gyro white (3), gyro bias (3), accel white (3), accel bias (3),
#: orientation (3).
NORMALS_PER_SAMPLE = 15


@dataclass(frozen=True)
class ImuParams:
    gyroscope_noise_density: float
    gyroscope_random_walk: float
    gyroscope_bias_correlation_time: float
    gyroscope_turn_on_bias_sigma: float
    accelerometer_noise_density: float
    accelerometer_random_walk: float
    accelerometer_bias_correlation_time: float
    accelerometer_turn_on_bias_sigma: float
    orientation: bool = False
    orientation_noise_std: float = 0.0  # rad, per axis


def parse(r, raw: dict, key_prefix: str, model, env) -> ImuParams:
    """``noise:`` (the keys of :data:`DEFAULT_NOISE`, each a number >= 0, absent = the default, 0 = off) and
    ``orientation: {enabled: bool, noise_std: rad}``."""
    noise = dict(DEFAULT_NOISE)
    given = raw.get("noise", {})
    given = {} if given is None else given
    r.mapping(given, f"{key_prefix}noise", NOISE_KEYS)
    for k, value in given.items():
        noise[k] = r.number(value, f"{key_prefix}noise.{k}", minimum=0.0)
    enabled, std = False, 0.0
    if "orientation" in raw:
        o = r.mapping(raw["orientation"], f"{key_prefix}orientation", ("enabled", "noise_std"))
        enabled = r.boolean(o.get("enabled", True), f"{key_prefix}orientation.enabled")
        std = r.number(o.get("noise_std", 0.0), f"{key_prefix}orientation.noise_std", minimum=0.0)
    return ImuParams(**noise, orientation=enabled, orientation_noise_std=std)


def _diag(variance: float) -> np.ndarray:
    c = np.zeros(9)
    c[[0, 4, 8]] = variance
    return c


class Sensor:
    """An IMU of spec ``spec`` (params :class:`ImuParams`) sampled every ``spec.period_steps`` steps of ``dt``."""

    needs_acceleration = True

    def __init__(self, spec, env, model, dt: float):
        self.spec = spec
        p = spec.params
        self.gravity = np.asarray(env.gravity, dtype=float)
        self.dt = spec.period_steps * float(dt)  # the sample period: the noise's Δt
        self.rng = generator(spec)
        self.gyro_std = white_std(p.gyroscope_noise_density, self.dt)
        self.accel_std = white_std(p.accelerometer_noise_density, self.dt)
        self.gyro_bias = BiasProcess(3, p.gyroscope_random_walk, p.gyroscope_bias_correlation_time,
                                     p.gyroscope_turn_on_bias_sigma, self.dt, self.rng)
        self.accel_bias = BiasProcess(3, p.accelerometer_random_walk, p.accelerometer_bias_correlation_time,
                                      p.accelerometer_turn_on_bias_sigma, self.dt, self.rng)
        self.gyro_cov = _diag(self.gyro_std ** 2)
        self.accel_cov = _diag(self.accel_std ** 2)
        self.orientation_cov = _diag(p.orientation_noise_std ** 2) if p.orientation else np.r_[-1.0, np.zeros(8)]
        for c in (self.gyro_cov, self.accel_cov, self.orientation_cov):
            c.setflags(write=False)

    def specific_force(self, frame) -> np.ndarray:
        """``f = a − R_wsᵀ g`` in sensor axes (``frame.a`` is the inertial acceleration in sensor axes)."""
        return frame.a - self.gravity @ frame.T_world_sensor[:3, :3]  # gᵀR = (Rᵀg)ᵀ

    def measure(self, frame) -> Reading:
        Z = self.rng.standard_normal(NORMALS_PER_SAMPLE)
        gb, ab = self.gyro_bias, self.accel_bias
        acc = (frame.a - self.gravity @ frame.T_world_sensor[:3, :3]) + ab.value + self.accel_std * Z[6:9]
        gyro = frame.w + gb.value + self.gyro_std * Z[0:3]
        gb.advance(Z[3:6])
        ab.advance(Z[9:12])
        return self._reading(frame, acc, gyro, Z)

    def noisy(self, f, w, Z):
        """``(ã, ω̃)`` (m, 3) of m samples of true specific force ``f`` and rate ``w`` (m, 3) with the normals ``Z``
        (m, :data:`NORMALS_PER_SAMPLE`): the batch form of :meth:`measure`'s noise, bit-identical to m calls (the
        Allan-deviation test records hours with it)."""
        Z = np.asarray(Z, dtype=float)
        bg = self.gyro_bias.path(Z[:, 3:6])
        ba = self.accel_bias.path(Z[:, 9:12])
        return f + ba + self.accel_std * Z[:, 6:9], w + bg + self.gyro_std * Z[:, 0:3]

    def _reading(self, frame, acc, gyro, Z) -> Reading:
        p = self.spec.params
        orientation = None
        if p.orientation:
            R = frame.T_world_sensor[:3, :3]
            if p.orientation_noise_std > 0:
                R = R @ Rotation.from_rotvec(p.orientation_noise_std * Z[12:15]).as_matrix()
            orientation = Rotation.from_matrix(R).as_quat()
        values = {"linear_acceleration": acc, "angular_velocity": gyro, "orientation": orientation,
                  "linear_acceleration_cov": self.accel_cov, "angular_velocity_cov": self.gyro_cov,
                  "orientation_cov": self.orientation_cov}  # read-only, shared by the readings
        return reading(self.spec, frame, values)
