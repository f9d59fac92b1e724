"""The simulator's plain values: its bounds (runaway, energy balance), :class:`Fault`, :class:`WrenchCommand`,
the held command of one channel and the small arithmetic of a step's power (a part of
:mod:`mbs_ros.dynamics.simulation.simulator`, which re-exports the public names)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_ros.dynamics.simulation.integrators import check_time_step
from mbs_ros.dynamics.model.model import Model

#: Lockstep command channels: the base wrench, the joint efforts, the thrusters' thrusts.
CHANNELS = ("wrench", "joints", "thrusters")
_NEVER = 1 << 62  # a step index no run reaches

# Runaway bounds (module docstring, "Faults").
MIN_DT, MAX_DT = 1e-9, 1e6  # s: a Simulator's step, a whole number of nanoseconds of an int64 clock
MAX_TURN_PER_STEP = 1.0  # rad: largest angular rate x dt
MAX_SPEED = 1.0e4  # m/s: largest linear rate (base, prismatic joints); also caps angular rates [rad/s]
MAX_POSITION = 1.0e6  # m or rad: largest |q| component
ENERGY_RESIDUAL_FACTOR = 1.0  # |E - E_ref - work| <= this x (|E_ref| + |work| + m_total x ENERGY_FLOOR_PER_KG)
ENERGY_FLOOR_PER_KG = 1.0  # J/kg
ENERGY_CHECK_S = 0.1  # s of simulation time between two energy-balance checks


@dataclass(frozen=True)
class Fault:
    """Why the simulation stopped: ``kind`` (``exception`` | ``nonfinite`` | ``runaway``), the step ``k`` that
    failed (the state kept is the one at ``stamp_ns = t_k``, from which it started) and a readable reason."""

    kind: str
    k: int
    stamp_ns: int
    reason: str


def velocity_bounds(model: Model, dt: float) -> np.ndarray:
    """Per component of v, the largest |rate| before a run counts as a runaway (module docstring, "Faults"):
    ``min(MAX_TURN_PER_STEP / dt, MAX_SPEED)`` [rad/s] for angular components, ``MAX_SPEED`` [m/s] for linear ones."""
    return np.where(_angular_components(model), min(MAX_SPEED, MAX_TURN_PER_STEP / check_time_step(dt)), MAX_SPEED)


def _angular_components(model: Model) -> np.ndarray:
    """Which components of v are angular rates [rad/s]: the base's angular twist components, revolute and
    continuous joints (prismatic joints and linear base components are not)."""
    nj = len(model.joint_names)
    nvb = model.nv - nj
    out = np.zeros(model.nv, dtype=bool)
    if nvb:
        B = np.asarray(model.velocity_map(model.neutral()), dtype=float)  # V_base = B v_base, V = [v; ω]
        out[:nvb] = np.abs(B[3:, :]).sum(axis=0) > 0.0
    for i, t in enumerate(model.joint_types):
        out[nvb + i] = t != "prismatic"
    return out


@dataclass(frozen=True)
class WrenchCommand:
    """A base wrench as applied: ``W = [F; τ]`` [N, N m] at the base frame's origin after dropping what the base
    cannot take, held in ``frame``: ``"body"`` (the base frame's axes, turning with the body) or ``"world"``."""

    W: np.ndarray
    frame: str = "body"

    def is_zero(self) -> bool:
        return not self.W.any()

    def same(self, other: "WrenchCommand") -> bool:
        return self.frame == other.frame and _equal(self.W, other.W)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal`` of two float arrays, without its generic input handling (once per period)."""
    return a.shape == b.shape and bool((a == b).all())


ZERO_WRENCH = WrenchCommand(np.zeros(6))
ZERO_WRENCH.W.setflags(write=False)


class _Held:
    """One command channel: the value applied on the last step, the one received for the next step, the step it
    first applied to and the step it expires at."""

    __slots__ = ("zero", "applied", "pending", "start_k", "expires_k", "announced")

    def __init__(self, zero):
        self.zero = zero
        self.applied = zero
        self.pending = None
        self.start_k = 0
        self.expires_k = _NEVER
        self.announced = None  # the last value reported to the on_*_applied hook

    def clear(self):
        self.pending = None
        self.applied = self.zero
        self.expires_k = _NEVER


def _is_zero(value) -> bool:
    return value.is_zero() if isinstance(value, WrenchCommand) else not np.any(value)


def _world_wrench_power(quat, V, W) -> float:
    """``F·(R v) + τ·(R ω)`` for ``R`` of the unit quaternion ``[x, y, z, w]``, ``V = [v; ω]``, ``W = [F; τ]`` (plain
    float lists: a step's worth of numpy calls costs more than this arithmetic)."""
    x, y, z, w = quat
    a, b, c, d, e, f = V
    xx, yy, zz, xy, xz, yz, wx, wy, wz = x * x, y * y, z * z, x * y, x * z, y * z, w * x, w * y, w * z
    r00, r01, r02 = 1.0 - 2.0 * (yy + zz), 2.0 * (xy - wz), 2.0 * (xz + wy)
    r10, r11, r12 = 2.0 * (xy + wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz - wx)
    r20, r21, r22 = 2.0 * (xz - wy), 2.0 * (yz + wx), 1.0 - 2.0 * (xx + yy)
    return (W[0] * (r00 * a + r01 * b + r02 * c) + W[1] * (r10 * a + r11 * b + r12 * c)
            + W[2] * (r20 * a + r21 * b + r22 * c) + W[3] * (r00 * d + r01 * e + r02 * f)
            + W[4] * (r10 * d + r11 * e + r12 * f) + W[5] * (r20 * d + r21 * e + r22 * f))
