"""Magnetometer (``sensor_msgs/MagneticField``): the environment's field rotated into the sensor frame, plus a
constant hard-iron bias and white noise.

    m = R_wsᵀ B_w + b + σ n,   n ~ N(0, I₃)

B_w is ``environment.magnetic_field`` (world ENU axes, Tesla; default ≈ a mid-latitude northern field, north along
+y). YAML keys: ``bias: [3]`` (T, default 0: the hard iron a calibration would remove) and ``noise: {std}`` (T, per
axis, white, default 1e-7 T ≈ 1 mG, the order of a MEMS magnetometer's rms noise). The covariance is diag(σ²).
Three normal draws per measurement, always (the stream does not depend on the state).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor"]

KEYS = ("bias", "noise")
NOISE_KEYS = ("std",)
DEFAULT_STD = 1.0e-7  # T


@dataclass(frozen=True)
class Params:
    """``bias`` (3,) hard-iron offset [T], ``std`` white noise per axis [T]."""

    bias: tuple = (0.0, 0.0, 0.0)
    std: float = DEFAULT_STD


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The magnetometer's own keys of the sensor mapping ``raw``; errors name ``key_prefix`` + the key."""
    bias = tuple(r.numbers(raw.get("bias", [0.0, 0.0, 0.0]), key_prefix + "bias", 3))
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    std = r.number(noise.get("std", DEFAULT_STD), key_prefix + "noise.std", minimum=0.0)
    return Params(bias, std)


class Sensor:
    """Evaluates one magnetometer (module docstring); its own seeded random stream."""

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        self._field = np.asarray(env.magnetic_field, dtype=float).reshape(3)
        self._bias = np.asarray(self.params.bias, dtype=float)
        self._cov = np.diag(np.full(3, self.params.std ** 2)).ravel()
        self._rng = generator(spec)

    def measure(self, frame) -> Reading:
        n = self._rng.standard_normal(3)
        R = frame.T_world_sensor[:3, :3]
        m = R.T @ self._field + self._bias + self.params.std * n
        return reading(self.spec, frame, {"magnetic_field": m, "magnetic_field_cov": self._cov.copy()})
