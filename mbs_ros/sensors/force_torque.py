"""Six-axis force/torque sensor at a joint (``geometry_msgs/WrenchStamped``): the wrench the joint transmits from
its parent to its child, at the sensor's origin in sensor axes, plus a constant bias and white noise.

    [F; τ]_s = frame.joint_wrench + b + [σ_F n_F; σ_τ n_τ]

``frame.joint_wrench`` is the joint's row of :meth:`Model.joint_wrenches` (the total transmitted wrench,
actuation and gravity included: what a sensor between the actuator and the link feels; seed 002's TITOP joint
output), which the suite moves from the joint frame to the sensor: F_s = R_jsᵀ F_j, τ_s = R_jsᵀ (τ_j − r_js × F_j)
with (R_js, r_js) the sensor's pose in the joint (= child link) frame. YAML: ``noise: {force_std, torque_std}``
(N, N m per axis, default 0.06 N / 0.0015 N m, about an ATI Mini45's resolution), ``force_bias: [3]`` (N),
``torque_bias: [3]`` (N m), default 0. Six normal draws per measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor"]

KEYS = ("noise", "force_bias", "torque_bias")
NOISE_KEYS = ("force_std", "torque_std")
DEFAULT_FORCE_STD, DEFAULT_TORQUE_STD = 0.06, 0.0015  # N, N m


@dataclass(frozen=True)
class Params:
    """White noise per axis (force [N], torque [N m]) and constant biases (3,) each."""

    force_std: float = DEFAULT_FORCE_STD
    torque_std: float = DEFAULT_TORQUE_STD
    force_bias: tuple = (0.0, 0.0, 0.0)
    torque_bias: tuple = (0.0, 0.0, 0.0)


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The F/T sensor's own keys (its joint is read with the common keys)."""
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    fs = r.number(noise.get("force_std", DEFAULT_FORCE_STD), key_prefix + "noise.force_std", minimum=0.0)
    ts = r.number(noise.get("torque_std", DEFAULT_TORQUE_STD), key_prefix + "noise.torque_std", minimum=0.0)
    fb = tuple(r.numbers(raw.get("force_bias", [0.0, 0.0, 0.0]), key_prefix + "force_bias", 3))
    tb = tuple(r.numbers(raw.get("torque_bias", [0.0, 0.0, 0.0]), key_prefix + "torque_bias", 3))
    return Params(fs, ts, fb, tb)


class Sensor:
    """Evaluates one F/T sensor (module docstring); its own seeded random stream."""

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        p = self.params
        self._std = np.array([p.force_std] * 3 + [p.torque_std] * 3)
        self._bias = np.concatenate((p.force_bias, p.torque_bias)).astype(float)
        self._rng = generator(spec)

    def measure(self, frame) -> Reading:
        n = self._rng.standard_normal(6)
        spec = self.spec
        if frame.joint_wrench is None:
            raise ValueError(f"force_torque sensor {spec.name}: the frame has no joint wrench (the suite computes "
                             f"it for sensors with a joint)")
        W = np.asarray(frame.joint_wrench, dtype=float).reshape(6) + self._bias + self._std * n
        return reading(spec, frame, {"force": W[:3], "torque": W[3:]})
