"""Foot contact sensor (a load cell in a foot, or a contact F/T sensor on any link): the sum of the contact
wrenches on its link's body from the Simulator's last contact step, at the sensor's origin in sensor axes, with
a constant bias and white noise, and a contact state from its measured normal force with hysteresis.

    [F; τ]_s = frame.contact_wrench + b + [σ_F n_F; σ_τ n_τ]
    N_meas   = frame.contact_normal + σ_F n_N        (the sum of F·n over the body's contacts [N])
    contact  = N_meas > contact_threshold, held until N_meas < release_threshold

``frame.contact_wrench`` is the body's row of :class:`mbs_ros.sensors.contact_loads.ContactLoads` (the numbers
``contacts/<link>`` publishes, summed over every link fused into the sensor link's body), zero out of contact
(no contact step, or a robot without a contact world). Published as ``geometry_msgs/WrenchStamped`` on the
sensor's topic and the state as ``std_msgs/Bool`` on ``<topic>/contact`` (docs/sensors.md, "foot_contact").
YAML: ``noise: {force_std, torque_std}`` (N, N m per axis; default 0.5 N / 0.01 N m, a foot load cell's
resolution), ``force_bias: [3]`` (N), ``torque_bias: [3]`` (N m), ``contact_threshold`` (N, default 5),
``release_threshold`` (N, default half the threshold, at most the threshold). Every parameter is bounded (stds
and biases at most :data:`MAX_FORCE` N / N m, thresholds in (0, MAX_FORCE]) so a reading of a finite contact
wrench is finite; a non-finite one is refused (an invalid reading with its reason). Seven normal draws per
measurement (six for the wrench, one for the normal force). ROS-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor", "MAX_FORCE"]

KEYS = ("noise", "force_bias", "torque_bias", "contact_threshold", "release_threshold")
NOISE_KEYS = ("force_std", "torque_std")
DEFAULT_FORCE_STD, DEFAULT_TORQUE_STD = 0.5, 0.01  # N, N m
DEFAULT_THRESHOLD = 5.0  # N
#: the bound of every force-like parameter [N, N m]: far above any contact load of the shipped robots
MAX_FORCE = 1.0e6


@dataclass(frozen=True)
class Params:
    """White noise per axis (force [N], torque [N m]), constant biases (3,) each, the contact state's
    thresholds on the measured normal force [N]."""

    force_std: float = DEFAULT_FORCE_STD
    torque_std: float = DEFAULT_TORQUE_STD
    force_bias: tuple = (0.0, 0.0, 0.0)
    torque_bias: tuple = (0.0, 0.0, 0.0)
    contact_threshold: float = DEFAULT_THRESHOLD
    release_threshold: float = 0.5 * DEFAULT_THRESHOLD


def _bounded(r, value, key, lo=0.0, positive=False) -> float:
    x = r.number(value, key, minimum=lo, positive=positive)
    if x > MAX_FORCE:
        r.fail(key, f"expected a number <= {MAX_FORCE:g}")
    return x


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The foot contact sensor's own keys (its link is read with the common keys)."""
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    fs = _bounded(r, noise.get("force_std", DEFAULT_FORCE_STD), key_prefix + "noise.force_std")
    ts = _bounded(r, noise.get("torque_std", DEFAULT_TORQUE_STD), key_prefix + "noise.torque_std")
    biases = []
    for key in ("force_bias", "torque_bias"):
        b = tuple(r.numbers(raw.get(key, [0.0, 0.0, 0.0]), key_prefix + key, 3))
        if any(abs(x) > MAX_FORCE for x in b):
            r.fail(key_prefix + key, f"expected numbers in [-{MAX_FORCE:g}, {MAX_FORCE:g}]")
        biases.append(b)
    on = _bounded(r, raw.get("contact_threshold", DEFAULT_THRESHOLD), key_prefix + "contact_threshold",
                  lo=None, positive=True)
    off = _bounded(r, raw.get("release_threshold", 0.5 * on), key_prefix + "release_threshold")
    if off > on:
        r.fail(key_prefix + "release_threshold", f"expected a number <= contact_threshold ({on:g} N)")
    return Params(fs, ts, biases[0], biases[1], on, off)


class Sensor:
    """Evaluates one foot contact sensor (module docstring); its own seeded random stream and contact state."""

    needs_acceleration = False
    needs_contact = True

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        p = self.params
        self._std = np.array([p.force_std] * 3 + [p.torque_std] * 3 + [p.force_std])
        self._bias = np.concatenate((p.force_bias, p.torque_bias, (0.0,))).astype(float)
        self._rng = generator(spec)
        self.contact = False

    def measure(self, frame) -> Reading:
        n = self._rng.standard_normal(7)
        W = frame.contact_wrench
        true = np.zeros(7)
        if W is not None:
            true[:6] = np.asarray(W, dtype=float).reshape(6)
            true[6] = float(frame.contact_normal)
        x = true + self._bias + self._std * n
        if not np.isfinite(x).all():
            return reading(self.spec, frame, {}, valid=False, reason="the contact wrench is not finite")
        p = self.params
        normal = float(x[6])
        self.contact = normal > p.contact_threshold or (self.contact and normal >= p.release_threshold)
        return reading(self.spec, frame, {"force": x[:3], "torque": x[3:6], "normal_force": normal,
                                          "contact": bool(self.contact)})


def expected_false_contact(std: float, threshold: float) -> float:
    """The probability that one sample of a foot in the air reads contact: P(σ n > threshold) (a design aid:
    keep the threshold several σ above 0)."""
    return 0.5 * math.erfc(threshold / (std * math.sqrt(2.0))) if std > 0 else 0.0
