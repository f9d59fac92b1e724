"""Pressure / depth sensor (``sensor_msgs/FluidPressure`` and the depth): hydrostatic pressure at the sensor's
origin, white noise, an optional offset and quantisation.

    p_true = p_atm + ρ g (z_s − z) for z < z_s (submerged), p_atm above the surface (it reads the air)
    p      = res · round((p_true + b + σ n) / res)              (res = 0: no quantisation)
    depth  = (p − p_atm) / (ρ g)                                 (from the measured p, as a real driver computes it)

with z the sensor origin's world z (REP 103, up), z_s = ``environment.water_surface_z``, ρ the fluid density, g =
|gravity|, p_atm = ``environment.atmospheric_pressure``. The depth is positive down and not clipped: near the
surface and in air it scatters about 0 with the noise (clipping at 0 would bias it there); it is not an altitude
(p_atm is constant). Variance reported: σ² + res²/12 (white noise plus the uniform quantisation error), depth
variance = that / (ρ g)². YAML: ``noise: {std}`` (Pa, default 20 Pa ≈ 2 mm of water), ``resolution`` (Pa, default
20 Pa = 0.2 mbar, a Bar30/MS5837-class sensor), ``bias`` (Pa offset, default 0). Refused without water (no fluid
density) and without gravity: hydrostatic pressure needs both. One normal draw per measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor", "hydrostatic_pressure"]

KEYS = ("noise", "resolution", "bias")
NOISE_KEYS = ("std",)
DEFAULT_STD = 20.0  # Pa
DEFAULT_RESOLUTION = 20.0  # Pa


@dataclass(frozen=True)
class Params:
    """``std`` white noise [Pa], ``resolution`` quantisation step [Pa] (0: none), ``bias`` offset [Pa]; ``density``
    [kg/m³] and ``g`` [m/s²] taken from the environment at parse."""

    std: float = DEFAULT_STD
    resolution: float = DEFAULT_RESOLUTION
    bias: float = 0.0
    density: float = 1000.0
    g: float = 9.81


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The pressure sensor's own keys; refuses a robot without water or without gravity."""
    if env.fluid_density is None:
        r.fail(key_prefix + "type", "no water: a pressure sensor needs the fluid's density (robot.fluid.density, the "
                                    "robot's hydrodynamics, or environment.fluid_density)")
    g = float(np.linalg.norm(env.gravity))
    if not g > 0.0:
        r.fail(key_prefix + "type", "no gravity: hydrostatic pressure needs the model's gravity")
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    std = r.number(noise.get("std", DEFAULT_STD), key_prefix + "noise.std", minimum=0.0)
    res = r.resolution(raw.get("resolution", DEFAULT_RESOLUTION), key_prefix + "resolution")
    bias = r.number(raw.get("bias", 0.0), key_prefix + "bias")
    return Params(std, res, bias, float(env.fluid_density), g)


def hydrostatic_pressure(z, water_surface_z, density, g, atmospheric_pressure):
    """p_atm + ρ g (z_s − z) below the surface, p_atm at or above it [Pa]."""
    return atmospheric_pressure + density * g * max(water_surface_z - z, 0.0)


class Sensor:
    """Evaluates one pressure sensor (module docstring); its own seeded random stream."""

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        self._env = env
        p = self.params
        self._rho_g = p.density * p.g
        self._var = p.std ** 2 + p.resolution ** 2 / 12.0
        self._rng = generator(spec)

    def measure(self, frame) -> Reading:
        n = self._rng.standard_normal()
        p, env = self.params, self._env
        z = float(frame.T_world_sensor[2, 3])
        value = hydrostatic_pressure(z, env.water_surface_z, p.density, p.g, env.atmospheric_pressure)
        value += p.bias + p.std * n
        if p.resolution > 0.0:
            value = p.resolution * math.floor(value / p.resolution + 0.5)
        values = {"fluid_pressure": value, "variance": self._var,
                  "depth": (value - env.atmospheric_pressure) / self._rho_g,
                  "depth_variance": self._var / self._rho_g ** 2}
        return reading(self.spec, frame, values)
