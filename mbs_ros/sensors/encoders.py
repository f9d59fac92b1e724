"""Joint encoders (``sensor_msgs/JointState`` on the sensor's own topic, so the true ``joint_states`` stay
available): quantised joint positions and noisy joint velocities of the model's joints (all, or a ``joints:``
list).

    position = res · round((q_j + σ_q n) / res)        (mid-tread rounding: error within ±res/2, unbiased)
    velocity = v_j + σ_v n                               (``velocity: model``, the default)
             = (position_k − position_{k−1}) / T         (``velocity: difference``, T the sensor period)

A real encoder driver counts edges and differentiates the counts over its period (or times the edges); the
finite difference lags by half a period and carries the quantisation noise res/T, which ``velocity: difference``
reproduces (T: the steps since the previous sample, a period except across a simulator reset, whose jump shows
in one sample; the first sample reads 0; a continuous joint's difference is wrapped to (−π, π]). The default,
``velocity: model``, is the model's joint velocity plus white noise, for estimators that want an unbiased rate.
Continuous joints read their angle in (−π, π]. Units per joint: rad (revolute, continuous) or m (prismatic).
YAML: ``joints: [names]`` (default every movable joint, model order), ``resolution`` (rad per count, default
2π/2¹⁶) or ``counts_per_revolution`` (integer, not both), ``linear_resolution`` (m per count of prismatic joints,
default 1 µm), ``velocity`` (model | difference), ``noise: {position_std, velocity_std}`` (rad or m, rad/s or m/s;
default 0 and 0.005). Two normal draws per joint and measurement (positions first), always.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbs_ros.dynamics.model.source import base_sizes, joint_positions_from_q

from mbs_ros.sensors.frames import Reading, reading
from mbs_ros.sensors.noise import generator

__all__ = ["KEYS", "Params", "parse", "Sensor"]

KEYS = ("joints", "resolution", "counts_per_revolution", "linear_resolution", "velocity", "noise")
NOISE_KEYS = ("position_std", "velocity_std")
DEFAULT_RESOLUTION = 2.0 * math.pi / 2 ** 16  # rad per count (a 16-bit encoder)
DEFAULT_LINEAR_RESOLUTION = 1.0e-6  # m per count
DEFAULT_VELOCITY_STD = 0.005  # rad/s or m/s
#: Most counts per revolution accepted: 2^40 (the finest absolute encoders count 2^32; 2π / 2^40 ≈ 5.7e-12 rad
#: stays above the smallest resolution step).
MAX_COUNTS = 2 ** 40


@dataclass(frozen=True)
class Params:
    """The measured joints (names, model order as listed), their indices in ``joint_names``, quantisation per joint
    [rad or m per count], velocity source, noise [rad or m; rad/s or m/s]."""

    joints: tuple = ()
    indices: tuple = ()
    resolutions: tuple = ()
    velocity: str = "model"
    position_std: float = 0.0
    velocity_std: float = DEFAULT_VELOCITY_STD


def parse(r, raw: dict, key_prefix: str, model, env) -> Params:
    """The encoders' own keys; the joints must be movable joints of the model."""
    names = tuple(model.joint_names)
    if not names:
        r.fail(key_prefix + "type", "the model has no movable joints to measure")
    joints = names
    if "joints" in raw:
        value = raw["joints"]
        if not isinstance(value, list) or not value:
            r.fail(key_prefix + "joints", "expected a non-empty list of joint names")
        for i, j in enumerate(value):
            r.model_name(j, f"{key_prefix}joints[{i}]")
            if j not in names:
                r.fail(f"{key_prefix}joints[{i}]", f"no movable joint named {j!r} in the model")
            if j in value[:i]:
                r.fail(f"{key_prefix}joints[{i}]", f"joint {j!r} listed twice")
        joints = tuple(value)
    if "resolution" in raw and "counts_per_revolution" in raw:
        r.fail(key_prefix + "resolution", "give resolution (rad per count) or counts_per_revolution, not both")
    res = r.resolution(raw.get("resolution", DEFAULT_RESOLUTION), key_prefix + "resolution")
    if "counts_per_revolution" in raw:
        counts = r.integer(raw["counts_per_revolution"], key_prefix + "counts_per_revolution", 1)
        if counts > MAX_COUNTS:
            r.fail(key_prefix + "counts_per_revolution", f"expected at most {MAX_COUNTS} (2^40: no encoder counts "
                                                         "finer than 6e-12 rad)")
        res = 2.0 * math.pi / counts
    lin = r.resolution(raw.get("linear_resolution", DEFAULT_LINEAR_RESOLUTION), key_prefix + "linear_resolution")
    velocity = raw.get("velocity", "model")
    if velocity not in ("model", "difference"):
        r.choice(velocity, key_prefix + "velocity", ("model", "difference"))
    noise = r.mapping(raw.get("noise", {}), key_prefix + "noise", NOISE_KEYS)
    pstd = r.number(noise.get("position_std", 0.0), key_prefix + "noise.position_std", minimum=0.0)
    vstd = r.number(noise.get("velocity_std", DEFAULT_VELOCITY_STD), key_prefix + "noise.velocity_std", minimum=0.0)
    types = dict(zip(names, model.joint_types))
    resolutions = tuple(lin if types[j] == "prismatic" else res for j in joints)
    return Params(joints, tuple(names.index(j) for j in joints), resolutions, velocity, pstd, vstd)


class Sensor:
    """Evaluates one set of encoders (module docstring); its own seeded random stream; with ``velocity:
    difference`` it keeps the previous sample's positions."""

    def __init__(self, spec, env, model, dt):
        self.spec, self.params = spec, spec.params
        p = self.params
        self._model = model
        self._nq_base, self._nv_base = base_sizes(model)
        self._idx = np.array(p.indices, dtype=int)
        self._res = np.array(p.resolutions, dtype=float)
        types = np.array(model.joint_types)[self._idx] if len(self._idx) else np.array([])
        self._wrap = types == "continuous"
        self._dt = float(dt)
        self._previous = None
        self._rng = generator(spec)

    def measure(self, frame) -> Reading:
        p = self.params
        nj = len(self._idx)
        n = self._rng.standard_normal(2 * nj)
        q_all = joint_positions_from_q(self._model, np.asarray(frame.q)[self._nq_base:])
        pos = q_all[self._idx] + p.position_std * n[:nj]
        quantised = self._res > 0.0
        pos[quantised] = self._res[quantised] * np.floor(pos[quantised] / self._res[quantised] + 0.5)
        if p.velocity == "difference":
            if self._previous is None or frame.k <= self._previous[0]:
                vel = np.zeros(nj)
            else:
                d = pos - self._previous[1]
                d[self._wrap] = (d[self._wrap] + math.pi) % (2.0 * math.pi) - math.pi
                vel = d / ((frame.k - self._previous[0]) * self._dt)
            self._previous = (frame.k, pos.copy())
        else:
            vel = np.asarray(frame.v_gen)[self._nv_base:][self._idx] + p.velocity_std * n[nj:]
        return reading(self.spec, frame, {"names": p.joints, "position": pos, "velocity": vel})
