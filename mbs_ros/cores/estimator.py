"""The estimator node's ROS-free core: the measurements it takes from each sensor's message fields (checked and
turned into the :class:`~mbs_ros.cores.estimator_settings.Fusion` payloads: :func:`imu_payload`,
:func:`dvl_payload`, :func:`beam_payload`, :func:`depth_payload`, :func:`compass_payload`,
:func:`encoders_payload`) and how it feeds them to the filter (:func:`feed`: the first driver sample sets the time
origin off simulation time). The node (:mod:`mbs_ros.nodes.estimator_node`) calls these with message fields; a
headless run (:mod:`mbs_ros.headless`) with a reading's values as the dynamics node writes them into those fields
(:func:`reading_payloads`), so both fuse the same numbers. docs/estimator_node.md.
"""
from __future__ import annotations

import math
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.cores.dynamics import beam_range
from mbs_ros.cores.estimator_settings import Fusion, Output, Rejected

__all__ = ["MAX_ABS", "MAX_ANGULAR_RATE", "MAX_SPECIFIC_FORCE", "MAX_FLUID_PRESSURE", "MAX_STAMP_AHEAD_S",
           "check_stamp", "finite", "covariance", "beam_index", "imu_payload", "dvl_payload", "beam_payload",
           "depth_payload", "compass_payload", "encoders_payload", "feed", "reading_payloads"]

MAX_ABS = 1.0e6  # any measured component beyond this (SI) is malformed
#: The largest angular rate accepted per axis [rad/s]: ~3x the ±2000 °/s (34.9 rad/s) full scale of MEMS gyroscopes
#: (Bosch BMI088, TDK ICM-42688-P, Analog Devices ADIS16495-3): a rate no IMU reports is malformed; the propagation's
#: work grows with |ω| dt (1e6 rad/s made one message cost seconds).
MAX_ANGULAR_RATE = 100.0
#: The largest specific force accepted per axis [m/s²]: ~2x the ±24 g (235 m/s²) full scale of the BMI088's
#: accelerometer.
MAX_SPECIFIC_FORCE = 500.0
#: The largest fluid pressure accepted [Pa]: the full ocean depth (Challenger Deep, 10 935 m: ~1.086e8 Pa, 1086 bar)
#: plus 10 %. A bound of 1e6 Pa refused every real depth below ~89 m.
MAX_FLUID_PRESSURE = 1.2e8
#: How far ahead of the node's clock a stamp may be [s]: a sensor message may come before the /clock message of
#: its step (simulation time) or from a clock a little ahead (wall time); a stamp beyond this (sec = 2^31 - 1) is
#: refused, not adopted as the stream's newest time (which made every later real message "out of order").
MAX_STAMP_AHEAD_S = 5.0


def finite(values, what: str, n: Optional[int] = None) -> np.ndarray:
    """``values`` as floats; Rejected for another length than ``n`` or a component not finite or beyond MAX_ABS."""
    a = np.asarray(values, dtype=float).reshape(-1)
    if n is not None and a.size != n:
        raise Rejected(f"{what}: expected {n} values, got {a.size}")
    if not np.all(np.isfinite(a)) or np.any(np.abs(a) > MAX_ABS):
        raise Rejected(f"{what}: not finite or beyond {MAX_ABS:g}")
    return a


def covariance(values, what: str, n: int) -> np.ndarray:
    """The leading 3x3 block of an n x n row-major covariance; Rejected unless finite, symmetric and positive
    semi-definite (its eigenvalues >= 0 to rounding: an indefinite block with a non-negative diagonal raised inside
    the filter, the measurement lost and counted nowhere)."""
    c = finite(values, what, n * n).reshape(n, n)[:3, :3]
    if np.any(np.diag(c) < 0.0):
        raise Rejected(f"{what}: a negative variance")
    scale = float(np.abs(c).max())
    if np.abs(c - c.T).max() > 1e-9 * scale:
        raise Rejected(f"{what}: not symmetric")
    if scale > 0.0 and float(np.linalg.eigvalsh(0.5 * (c + c.T)).min()) < -1e-12 * scale:
        raise Rejected(f"{what}: not positive semi-definite")
    return c


def check_stamp(stamp_ns: int, now_ns: int) -> int:
    """``stamp_ns``, or Rejected when it is more than :data:`MAX_STAMP_AHEAD_S` ahead of the clock ``now_ns``."""
    ahead = (int(stamp_ns) - int(now_ns)) * 1e-9
    if ahead > MAX_STAMP_AHEAD_S:
        raise Rejected(f"stamped {ahead:.3g} s ahead of the node's clock (more than {MAX_STAMP_AHEAD_S:g} s)")
    return int(stamp_ns)


def beam_index(frame_id: str) -> int:
    """The beam of a DVL beam frame ``…/beam<i>``, i in 0..3; Rejected for another frame."""
    tail = frame_id.rsplit("/", 1)[-1]
    if not tail.startswith("beam") or tail[4:] not in ("0", "1", "2", "3"):
        raise Rejected(f"frame_id {frame_id[:80]!r} names no beam (…/beam0 … /beam3)")
    return int(tail[4:])


def imu_payload(angular_velocity, linear_acceleration) -> tuple:
    w = finite(angular_velocity, "angular_velocity", 3)
    f = finite(linear_acceleration, "linear_acceleration", 3)
    if np.any(np.abs(w) > MAX_ANGULAR_RATE):
        raise Rejected(f"angular_velocity: beyond {MAX_ANGULAR_RATE:g} rad/s, more than an IMU reports")
    if np.any(np.abs(f) > MAX_SPECIFIC_FORCE):
        raise Rejected(f"linear_acceleration: beyond {MAX_SPECIFIC_FORCE:g} m/s², more than an IMU reports")
    return w, f


def dvl_payload(velocity, covariance36) -> tuple:
    return finite(velocity, "twist.linear", 3), covariance(covariance36, "twist.covariance", 6)


def beam_payload(index: int, range_: float, min_range: float, max_range: float) -> tuple:
    """A beam's heartbeat: locked when its range is finite and within [min_range, max_range]."""
    r = float(range_)
    return "beam", index, math.isfinite(r) and min_range <= r <= max_range


def depth_payload(pressure: float, variance: float, environment) -> tuple:
    """``(depth, variance)`` from a fluid pressure: ``p = p_atm + ρ g depth`` (the pressure sensor's model,
    docs/sensors.md)."""
    p, var = float(pressure), float(variance)
    if not (math.isfinite(p) and abs(p) <= MAX_FLUID_PRESSURE):
        raise Rejected(f"fluid_pressure: not finite or beyond {MAX_FLUID_PRESSURE:g} Pa (the full ocean depth)")
    if not (math.isfinite(var) and 0.0 <= var <= MAX_FLUID_PRESSURE ** 2):
        raise Rejected("variance: negative, not finite or beyond the pressure bound squared")
    rho_g = float(environment.fluid_density) * float(np.linalg.norm(environment.gravity))
    return (p - float(environment.atmospheric_pressure)) / rho_g, var / rho_g ** 2


def compass_payload(field, covariance9) -> tuple:
    return finite(field, "magnetic_field", 3), covariance(covariance9, "magnetic_field_covariance", 3)


def encoders_payload(joint_names: Sequence[str], names: Sequence[str], position, velocity) -> tuple:
    """``(positions, velocities)`` of ``joint_names`` (their order) from an encoders JointState's fields."""
    names = list(names)
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in joint_names if n not in index]
    if missing:
        raise Rejected(f"no {', '.join(missing[:5])} among the names")
    if len(position) != len(names) or (len(velocity) not in (0, len(names))):
        raise Rejected(f"{len(names)} names, {len(position)} positions, {len(velocity)} velocities")
    pos = finite(position, "position")
    vel = finite(velocity, "velocity") if len(velocity) else np.zeros(len(names))
    order = [index[n] for n in joint_names]
    return pos[order], vel[order]


def feed(fusion: Fusion, role: str, t: int, payload) -> List[Output]:
    """Give the filter one measurement stamped ``t`` [ns]; the estimates now due. Before a time origin (off
    simulation time) the driver's first sample sets it (its estimate first) and the others wait."""
    outputs: List[Output] = []
    if fusion.origin is None:
        if role != fusion.driver:
            return outputs  # before the origin: nothing to fuse it with yet
        outputs.append(fusion.start(fusion.measurement_time(role, t)))
    return outputs + fusion.add(role, t, payload)


def reading_payloads(reading, role: str, joint_names: Sequence[str], environment,
                     beam_limits: Tuple[float, float]) -> List[tuple]:
    """``[(t, payload)]`` the estimator takes from the messages the dynamics node publishes for ``reading``
    (:func:`mbs_ros.nodes.dynamics_sensors.reading_messages`: an invalid reading gives none but a DVL's four beams)
    for the estimator's ``role`` of that sensor."""
    v, ok, t = reading.values, bool(reading.valid), int(reading.stamp_ns)
    out = []
    if role == "imu" and ok:
        out.append((t, imu_payload(v["angular_velocity"], v["linear_acceleration"])))
    elif role == "compass" and ok:
        out.append((t, compass_payload(v["magnetic_field"], v["magnetic_field_cov"])))
    elif role == "depth" and ok:
        out.append((t, depth_payload(float(v["fluid_pressure"]), float(v["variance"]), environment)))
    elif role == "encoders" and ok:
        out.append((t, encoders_payload(joint_names, [str(n) for n in v["names"]],
                                        np.asarray(v["position"], dtype=np.float64).reshape(-1),
                                        np.asarray(v["velocity"], dtype=np.float64).reshape(-1))))
    elif role == "dvl":
        if ok and v.get("velocity") is not None:
            cov = np.zeros((6, 6))
            cov[:3, :3] = np.asarray(v["velocity_cov"], dtype=np.float64).reshape(3, 3)
            cov[3, 3] = cov[4, 4] = cov[5, 5] = -1.0  # the angular part is not measured
            out.append((t, dvl_payload(v["velocity"], cov.reshape(-1))))
        lo, hi = beam_limits
        f32 = np.float32  # sensor_msgs/Range carries float32 ranges
        for i, r in enumerate(np.asarray(v["ranges"], dtype=float).reshape(-1)[:4]):
            out.append((t, beam_payload(i, float(f32(beam_range(r, lo, hi))), float(f32(lo)), float(f32(hi)))))
    return out


def roles_by_sensor(roles: Mapping[str, object]) -> dict:
    """``{sensor name: role}`` of the estimator's roles (``{role: sensor spec}``)."""
    return {spec.name: role for role, spec in roles.items()}
