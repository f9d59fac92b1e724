"""What a sensor model is handed and what it returns: :class:`SensorFrame`, the true motion of the sensor's own
frame at one physics step (computed once per step for every due sensor by :class:`~mbs_ros.sensors.suite.
SensorSuite`), and :class:`Reading`, one measurement with its stamps. SI units, sensor axes unless named. ROS-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SensorFrame", "Reading", "reading"]


@dataclass
class SensorFrame:
    """The true state of a sensor frame S at physics step ``k`` (``stamp_ns`` its simulation time).

    ``T_world_sensor`` (4, 4); ``v`` (3,) velocity of S's origin w.r.t. the world, in S axes; ``w`` (3,) angular
    velocity in S axes; ``a`` (3,) inertial acceleration of S's origin (no gravity) in S axes; ``alpha`` (3,)
    angular acceleration in S axes (``a`` and ``alpha`` are None when no due sensor needs accelerations); ``q``,
    ``v_gen``, ``a_gen`` the model's generalised vectors (``a_gen`` None likewise); ``joint_wrench`` (6,) or None:
    for a sensor with a joint, the wrench ``[F; τ]`` the joint transmits to its child (Model.joint_wrenches),
    expressed in S axes about S's origin. ``dt_ns``: the physics step [ns] (for the stamps of :func:`reading`).
    For a sensor that reads contact (``needs_contact``): ``contact_wrench`` (6,) the sum of the last contact
    step's wrenches on the sensor link's body in S axes about S's origin (zero out of contact), ``contact_normal``
    the sum of their normal components [N] (:mod:`mbs_ros.sensors.contact_loads`)."""

    k: int
    stamp_ns: int
    T_world_sensor: np.ndarray
    v: np.ndarray
    w: np.ndarray
    a: np.ndarray | None = None
    alpha: np.ndarray | None = None
    q: np.ndarray | None = None
    v_gen: np.ndarray | None = None
    a_gen: np.ndarray | None = None
    joint_wrench: np.ndarray | None = None
    dt_ns: int = 0
    contact_wrench: np.ndarray | None = None
    contact_normal: float = 0.0


@dataclass
class Reading:
    """One measurement of sensor ``name`` (of ``type``): taken at step ``k``, published at step ``publish_k``
    (``k`` + the delay's steps), header stamp ``stamp_ns`` (the spec's ``stamp``: measurement or arrival time).
    ``values``: the type's fields (docs/sensors.md); ``valid`` False with ``reason`` when the sensor has no output
    this sample (e.g. a DVL without bottom lock), the reason saying why."""

    name: str
    type: str
    k: int
    stamp_ns: int
    publish_k: int
    values: dict = field(default_factory=dict)
    valid: bool = True
    reason: str | None = None


def reading(spec, frame: SensorFrame, values: dict, valid: bool = True, reason: str | None = None) -> Reading:
    """The :class:`Reading` of sensor ``spec`` measured at ``frame``: published ``spec.delay_steps`` steps later,
    stamped with the measurement time, or with the arrival time when ``spec.stamp`` is "arrival"."""
    arrival = spec.stamp == "arrival"
    stamp = frame.stamp_ns + (spec.delay_steps * frame.dt_ns if arrival else 0)
    return Reading(spec.name, spec.type, frame.k, stamp, frame.k + spec.delay_steps, values, valid, reason)
