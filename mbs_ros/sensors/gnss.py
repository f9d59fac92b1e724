"""GNSS receiver (``sensor_msgs/NavSatFix``): the antenna's world position (ENU at the datum) as WGS-84 latitude,
longitude and altitude, with independent horizontal and vertical errors; no fix under water.

    p̃ = p + e_k,   (lat, lon, alt) = geodesy.enu_to_geodetic(p̃, datum)
    e_k = σ ∘ n_k (white, the default)  or  e_k = φ e_(k−1) + √(1 − φ²) σ ∘ n_k,  φ = exp(−T/τ)

σ = (σ_h, σ_h, σ_v). With ``noise.correlation_time`` τ > 0 the error is a first-order Gauss–Markov process with
stationary std σ (the first sample drawn from it), as stand-alone GNSS errors wander over minutes
(ionosphere, multipath) rather than jump per sample; T is the sensor period.

The datum is ``environment.datum`` (lat deg, lon deg, alt m); the world frame is its local tangent plane (REP 103
ENU). No fix (``status`` −1, ``valid`` False, latitude/longitude/altitude NaN, the reason) when the robot has
water and the antenna is below ``environment.water_surface_z + surface_margin`` (GNSS signals do not penetrate
water; the margin, default 0 m, stands for spray and waves); a robot without water always has a fix. The
covariance is diag(σ_h², σ_h², σ_v²) in ENU (NavSatFix's ``COVARIANCE_TYPE_DIAGONAL_KNOWN``). YAML: ``noise:
{horizontal_std, vertical_std, correlation_time}`` (m, default 1.5 / 3.0 m, a stand-alone single-frequency receiver;
s, default 0: white), ``surface_margin`` (m). Three normal draws per measurement, fix or not (the error process
goes on under water).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.geodesy import LocalTangentPlane
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor", "STATUS_FIX", "STATUS_NO_FIX"]

KEYS = ("noise", "surface_margin")
NOISE_KEYS = ("horizontal_std", "vertical_std", "correlation_time")
DEFAULT_HORIZONTAL_STD, DEFAULT_VERTICAL_STD = 1.5, 3.0  # m
STATUS_FIX, STATUS_NO_FIX = 0, -1  # sensor_msgs/NavSatStatus


@dataclass(frozen=True)
class Params:
    """Position error std [m] (horizontal per axis, vertical), its correlation time [s] (0: white) and the margin
    above the water surface [m] the antenna needs for a fix."""

    horizontal_std: float = DEFAULT_HORIZONTAL_STD
    vertical_std: float = DEFAULT_VERTICAL_STD
    surface_margin: float = 0.0
    correlation_time: float = 0.0


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The GNSS receiver's own keys."""
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    h = r.number(noise.get("horizontal_std", DEFAULT_HORIZONTAL_STD), key_prefix + "noise.horizontal_std",
                 minimum=0.0)
    v = r.number(noise.get("vertical_std", DEFAULT_VERTICAL_STD), key_prefix + "noise.vertical_std", minimum=0.0)
    tau = r.number(noise.get("correlation_time", 0.0), key_prefix + "noise.correlation_time", minimum=0.0)
    margin = r.number(raw.get("surface_margin", 0.0), key_prefix + "surface_margin", minimum=0.0)
    return Params(h, v, margin, tau)


class Sensor:
    """Evaluates one GNSS receiver (module docstring); its own seeded random stream."""

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        p = self.params
        self._plane = LocalTangentPlane(*env.datum)
        self._std = np.array([p.horizontal_std, p.horizontal_std, p.vertical_std])
        self._cov = np.diag(self._std ** 2).ravel()
        self._wet = env.fluid_density is not None
        self._surface = float(env.water_surface_z) + p.surface_margin
        tau = p.correlation_time
        self._phi = math.exp(-spec.period_steps * dt / tau) if tau > 0 else 0.0
        self._gain = math.sqrt(-math.expm1(-2.0 * spec.period_steps * dt / tau)) if tau > 0 else 1.0
        self._error = None
        self._rng = generator(spec)

    def measure(self, frame) -> Reading:
        n = self._rng.standard_normal(3)
        if self._error is None:  # the first sample: from the stationary distribution
            self._error = self._std * n
        else:
            self._error = self._phi * self._error + self._gain * self._std * n
        p = np.asarray(frame.T_world_sensor, dtype=float)[:3, 3]
        spec = self.spec
        if self._wet and p[2] < self._surface:
            values = {"latitude": float("nan"), "longitude": float("nan"), "altitude": float("nan"),
                      "status": STATUS_NO_FIX, "position_cov": self._cov.copy()}
            reason = f"no fix: antenna {self._surface - p[2]:.3g} m below the water surface (+ surface_margin)"
            return reading(spec, frame, values, False, reason)
        e, nn, u = p + self._error
        lat, lon, alt = self._plane.to_geodetic(e, nn, u)
        values = {"latitude": float(lat), "longitude": float(lon), "altitude": float(alt), "status": STATUS_FIX,
                  "position_cov": self._cov.copy()}
        return reading(spec, frame, values)
