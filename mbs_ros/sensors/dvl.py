"""Doppler velocity log (``geometry_msgs/TwistWithCovarianceStamped`` and four ``sensor_msgs/Range``): a Janus
4-beam DVL with bottom lock on a flat seabed, water-track relative to the current, per-beam noise.

Sensor frame (REP 103 like every frame here: x forward, y left, z up): the DVL looks DOWN its −z axis, so a DVL
mounted with a zero pose on a level vehicle sees the seabed. Beam i (i = 0..3) leaves at ``beam_angle`` θ from −z
at azimuth ψ_i = 45° + 90° i about z (forward-left, back-left, back-right, forward-right):
b_i = [sin θ cos ψ_i, sin θ sin ψ_i, −cos θ]. Each beam measures the velocity along itself, u_i = b_iᵀ v + σ n_i,
and the 3-D velocity is the least-squares solution v̂ = (BᵀB)⁻¹ Bᵀ u over the beams used, covariance σ² (BᵀB)⁻¹
(Brokloff, "Matrix algorithm for Doppler sonar navigation", OCEANS 1994).

Bottom track: beam i hits the seabed plane z = ``environment.seabed_z`` at range d_i = h / (b_iᵂ · n) (h the
sensor's height over the seabed, n = −e_z, b_iᵂ the beam in world axes); it returns when min_range ≤ d_i ≤
max_range (ranges of beams without a return are NaN; returned ranges get ``noise.range_std``). Lock needs at least
``min_beams`` (3 or 4, default 3: a 3-beam solution, as RDI/Nortek DVLs give when a beam drops out) returning
beams; the velocity is then the velocity of the sensor origin over ground in sensor axes (``frame.v``).
Water track (``water_track: true``), when bottom lock fails: all four beams on the velocity relative to the water,
v − R_wsᵀ c (c the current, world axes). Neither: ``valid`` False, mode None, the reason (the first beam's problem,
or no seabed configured, or out of the water: an acoustic DVL needs to be submerged). Refused without water.
Defaults: θ = 25° (Nortek DVL1000 / Teledyne Pathfinder; the Water Linked A50 uses 22.5°, RDI Workhorse 20°),
min/max range 0.3 / 50 m, velocity_std 0.005 m/s per beam, range_std 0.01 m. Eight normal draws per measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbs_ros.yamlfile import shown

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor", "beam_directions", "beam_frames", "beam_ranges"]

KEYS = ("noise", "beam_angle", "min_range", "max_range", "min_beams", "water_track")
NOISE_KEYS = ("velocity_std", "range_std")
DEFAULT_BEAM_ANGLE = 25.0  # deg
#: The beam angles accepted [deg]: real DVLs use 20-30°; near 0 the four beams are parallel and the velocity
#: solve is singular (1e-300 raised LinAlgError at start-up), near 90 they see no seabed.
MIN_BEAM_ANGLE, MAX_BEAM_ANGLE = 1.0, 80.0
DEFAULT_MIN_RANGE, DEFAULT_MAX_RANGE = 0.3, 50.0  # m
DEFAULT_VELOCITY_STD = 0.005  # m/s per beam
DEFAULT_RANGE_STD = 0.01  # m
AZIMUTHS = (45.0, 135.0, 225.0, 315.0)  # deg about the sensor's z axis


@dataclass(frozen=True)
class Params:
    """Beam angle [deg], range window [m], beams needed for bottom lock, water-track on/off, per-beam velocity
    noise [m/s] and range noise [m]."""

    beam_angle: float = DEFAULT_BEAM_ANGLE
    min_range: float = DEFAULT_MIN_RANGE
    max_range: float = DEFAULT_MAX_RANGE
    min_beams: int = 3
    water_track: bool = False
    velocity_std: float = DEFAULT_VELOCITY_STD
    range_std: float = DEFAULT_RANGE_STD


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The DVL's own keys; refuses a robot without water."""
    if env.fluid_density is None:
        r.fail(key_prefix + "type", "no water: a DVL needs the fluid's density (robot.fluid.density, the robot's "
                                    "hydrodynamics, or environment.fluid_density); an acoustic log cannot work in air")
    angle = r.number(raw.get("beam_angle", DEFAULT_BEAM_ANGLE), key_prefix + "beam_angle", positive=True)
    if not MIN_BEAM_ANGLE <= angle <= MAX_BEAM_ANGLE:
        r.fail(key_prefix + "beam_angle", f"expected degrees in [{MIN_BEAM_ANGLE:g}, {MAX_BEAM_ANGLE:g}], got "
                                          f"{angle!r}")
    lo = r.number(raw.get("min_range", DEFAULT_MIN_RANGE), key_prefix + "min_range", minimum=0.0)
    hi = r.number(raw.get("max_range", DEFAULT_MAX_RANGE), key_prefix + "max_range", positive=True)
    if not hi > lo:
        r.fail(key_prefix + "max_range", f"expected more than min_range {lo!r}, got {hi!r}")
    beams = r.integer(raw.get("min_beams", 3), key_prefix + "min_beams", minimum=3)
    if beams > 4:
        r.fail(key_prefix + "min_beams", f"expected 3 or 4 (of the 4 beams), got {beams!r}")
    wt = raw.get("water_track", False)
    if not isinstance(wt, bool):
        r.fail(key_prefix + "water_track", f"expected true or false, got {shown(wt)}")
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    vstd = r.number(noise.get("velocity_std", DEFAULT_VELOCITY_STD), key_prefix + "noise.velocity_std", minimum=0.0)
    rstd = r.number(noise.get("range_std", DEFAULT_RANGE_STD), key_prefix + "noise.range_std", minimum=0.0)
    return Params(angle, lo, hi, int(beams), wt, vstd, rstd)


def beam_directions(beam_angle_deg: float) -> np.ndarray:
    """(4, 3) unit vectors of the beams in sensor axes (module docstring)."""
    th = math.radians(beam_angle_deg)
    psi = np.radians(AZIMUTHS)
    return np.column_stack((math.sin(th) * np.cos(psi), math.sin(th) * np.sin(psi), np.full(4, -math.cos(th))))


def beam_frames(beam_angle_deg: float) -> np.ndarray:
    """(4, 4, 4) poses ``T_sensor_beam`` of the beams' frames (``<frame_id>/beam<i>``): origin at the sensor's,
    x along the beam (``sensor_msgs/Range``'s axis), y in the sensor's xy plane."""
    out = np.tile(np.eye(4), (4, 1, 1))
    for i, b in enumerate(beam_directions(beam_angle_deg)):
        y = np.cross([0.0, 0.0, 1.0], b)
        y /= np.linalg.norm(y)
        out[i, :3, :3] = np.column_stack((b, y, np.cross(b, y)))
    return out


def beam_ranges(T_world_sensor, B: np.ndarray, seabed_z: float) -> np.ndarray:
    """(4,) slant ranges [m] along the beams (rows of ``B``, sensor axes) from the sensor origin to the plane
    z = seabed_z; ``inf`` for a beam that does not point down towards it (or a sensor at or below it)."""
    T = np.asarray(T_world_sensor, dtype=float)
    h = float(T[2, 3]) - seabed_z
    down = -(B @ T[2, :3])  # b_iᵂ · n with n = −e_z
    out = np.full(len(B), np.inf)
    if h > 0.0:
        hit = down > 0.0
        out[hit] = h / down[hit]
    return out


class Sensor:
    """Evaluates one DVL (module docstring); its own seeded random stream. The least-squares solutions of every
    usable beam subset (all four, each three) are computed once here."""

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        self._env = env
        self._B = beam_directions(self.params.beam_angle)
        self._B.setflags(write=False)
        self._current = np.asarray(env.current, dtype=float).reshape(3)
        var = self.params.velocity_std ** 2
        self._solutions = {}  # beams used -> (their indices, (BᵀB)⁻¹Bᵀ, covariance (9,))
        for used in ((True,) * 4,) + tuple(tuple(j != i for j in range(4)) for i in range(4)):
            idx = np.flatnonzero(used)
            Bu = self._B[idx]
            N = np.linalg.inv(Bu.T @ Bu)
            self._solutions[used] = (idx, N @ Bu.T, var * N.ravel())
        self._rng = generator(spec)

    def set_current(self, current) -> None:
        """The water's current [m/s], world axes, from the next measurement on (water track)."""
        self._current = np.array(current, dtype=float).reshape(3)

    def _lock(self, z, ranges):
        """(which beams return, why there is no bottom lock or None) at sensor height ``z`` (world)."""
        p, env = self.params, self._env
        if z > env.water_surface_z:
            return (False,) * 4, f"out of the water: sensor {z - env.water_surface_z:.3g} m above the surface"
        if env.seabed_z is None:
            return (False,) * 4, "no bottom lock: no seabed configured (environment.seabed_z)"
        ok = tuple(bool(p.min_range <= d <= p.max_range) for d in ranges)
        count = sum(ok)
        if count >= p.min_beams:
            return ok, None
        if z <= env.seabed_z:
            return ok, f"no bottom lock: sensor {env.seabed_z - z:.3g} m below the seabed"
        i = ok.index(False)
        d = ranges[i]
        if not np.isfinite(d):
            why = f"beam {i} points away from the seabed"
        elif d > p.max_range:
            why = f"beam {i} range {d:.3g} m > max_range {p.max_range:.3g} m"
        else:
            why = f"beam {i} range {d:.3g} m < min_range {p.min_range:.3g} m"
        return ok, f"no bottom lock: {why} ({count} of 4 beams in range, min_beams {p.min_beams})"

    def measure(self, frame) -> Reading:
        n = self._rng.standard_normal(8)
        p, env, B = self.params, self._env, self._B
        T = frame.T_world_sensor
        true_ranges = beam_ranges(T, B, env.seabed_z) if env.seabed_z is not None else np.full(4, np.inf)
        ok, reason = self._lock(float(T[2, 3]), true_ranges)
        ranges = np.where(ok, true_ranges + p.range_std * n[4:], np.nan)
        v = np.asarray(frame.v, dtype=float)
        mode, used = None, ok
        if reason is None:
            mode = "bottom"
        elif p.water_track and not reason.startswith("out of the water"):
            mode, used, reason = "water", (True,) * 4, None
            v = v - T[:3, :3].T @ self._current
        velocity, cov = None, np.zeros(9)
        if mode is not None:
            idx, pinv, cov = self._solutions[used]
            velocity = pinv @ (B[idx] @ v + p.velocity_std * n[idx])
            cov = cov.copy()
        values = {"velocity": velocity, "velocity_cov": cov, "mode": mode, "ranges": ranges, "beam_directions": B}
        return reading(self.spec, frame, values, mode is not None, reason)
