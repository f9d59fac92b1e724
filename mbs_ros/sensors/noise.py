"""The standard sensor noise models, discretised at the sensor's own sample period Δt (the Kalibr / Gazebo IMU
model; docs/sensors.md "Noise"):

- white noise of density σ (continuous time, unit/√Hz): per-sample std ``σ_d = σ / √Δt``;
- bias random walk of density σ_b (unit/s/√Hz): ``b[k] = b[k−1] + σ_b √Δt w[k]``, or with a correlation time τ
  (first-order Gauss–Markov, exact discretisation) ``b[k] = e^(−Δt/τ) b[k−1] + σ_b √(τ/2 (1 − e^(−2Δt/τ))) w[k]``;
- turn-on bias: one N(0, σ_on²) draw per run, constant;
- quantisation: rounding to a resolution.

Each sensor owns one ``numpy.random.Generator`` (:func:`generator`) and draws a fixed number of normals per sample
in a fixed order, also for terms that are off (multiplied by 0): the stream of one term never depends on another
being configured, and a seed gives a bit-identical stream. ROS-free.
"""
from __future__ import annotations

import math
import zlib

import numpy as np
from scipy.signal import lfilter

__all__ = ["generator", "white_std", "BiasProcess", "quantise"]


def generator(spec) -> np.random.Generator:
    """The random stream of sensor ``spec``: seeded by its ``seed`` and its name (crc32), so that two sensors
    left at the default seed still draw independent noise."""
    return np.random.default_rng([int(spec.seed), zlib.crc32(spec.name.encode())])


def white_std(density: float, dt: float) -> float:
    """Per-sample std of white noise of continuous density ``density`` sampled every ``dt`` s: σ/√Δt."""
    return float(density) / math.sqrt(dt)


class BiasProcess:
    """A bias of ``n`` independent axes: a turn-on part (drawn once, here) plus a random walk of density
    ``random_walk`` (per sample period ``dt``), Gauss–Markov when ``correlation_time`` > 0 (module docstring).
    :attr:`value` is the bias of the current sample; :meth:`advance` moves it one sample on with the normals
    ``w`` (n,), :meth:`path` many samples on at once (bit-identical to as many :meth:`advance` calls)."""

    def __init__(self, n: int, random_walk: float, correlation_time: float, turn_on_sigma: float, dt: float,
                 rng: np.random.Generator):
        self.turn_on = float(turn_on_sigma) * rng.standard_normal(n)
        tau = float(correlation_time)
        if tau > 0:
            self.phi = math.exp(-dt / tau)
            self.gain = float(random_walk) * math.sqrt(0.5 * tau * -math.expm1(-2.0 * dt / tau))
        else:
            self.phi, self.gain = 1.0, float(random_walk) * math.sqrt(dt)
        self.walk = np.zeros(n)

    @property
    def value(self) -> np.ndarray:
        return self.turn_on + self.walk

    @property
    def variance_rate(self) -> float:
        """Variance added to the walk per sample (``gain²``)."""
        return self.gain * self.gain

    def advance(self, w) -> None:
        self.walk = self.phi * self.walk + self.gain * np.asarray(w, dtype=float)

    def path(self, W) -> np.ndarray:
        """(m, n) biases of the next m samples (the current one first) for the normals ``W`` (m, n) of the m
        advances that follow them; leaves the process after the m advances."""
        W = np.asarray(W, dtype=float)
        m = W.shape[0]
        out = np.empty((m + 1, W.shape[1]))
        out[0] = self.walk
        for j in range(W.shape[1]):  # y[i] = phi y[i-1] + gain w[i]: the same operations as advance()
            out[1:, j] = lfilter([self.gain], [1.0, -self.phi], W[:, j], zi=[self.phi * self.walk[j]])[0]
        self.walk = out[-1].copy()
        return self.turn_on + out[:-1]


def quantise(x, resolution: float):
    """``x`` rounded to a multiple of ``resolution`` (unchanged when it is 0)."""
    if resolution <= 0:
        return x
    return np.round(np.asarray(x, dtype=float) / resolution) * resolution
