"""Actuator limits and saturation, one place for the simulator and the controller node: the default limits
(the model's joint effort limits, else ``DEFAULT_LIMIT_ACCELERATION`` times the total mass), wrench scaling
along its direction and effort clipping."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_LIMIT_ACCELERATION", "CommandLimits", "command_limits", "model_effort_limits", "scale_to_norm",
           "saturate_wrench", "clip_efforts"]

#: default command limits per kg of the model's total mass: m/s^2 (force), N m/kg (torques, efforts without a
#: model limit)
DEFAULT_LIMIT_ACCELERATION = 100.0

@dataclass(frozen=True)
class CommandLimits:
    """Saturation limits: the largest norm of a base wrench's force [N] and torque [N m], and one largest
    absolute effort per joint [N m or N] (``model.joint_names`` order)."""

    max_force: float
    max_torque: float
    max_effort: np.ndarray


def model_effort_limits(model) -> np.ndarray:
    """Per joint effort limits of the model (``Model.effort_limits``' joint part), NaN where it gives none."""
    nj = len(model.joint_names)
    given = np.asarray(model.effort_limits, dtype=float).reshape(-1)[model.nv - nj:]
    return np.where(np.isfinite(given) & (given > 0.0), given, np.nan)


def command_limits(model, max_wrench=None, max_effort=None) -> CommandLimits:
    """The saturation limits in force: ``max_wrench`` ``(force, torque)`` and ``max_effort`` (a number for every
    joint, or one per joint) as given, else the model's defaults (module docstring, "Saturation"). ValueError for
    a wrong length or a limit that is not a positive number (``inf`` turns a limit off)."""
    nj = len(model.joint_names)
    per_kg = DEFAULT_LIMIT_ACCELERATION * max(model.total_mass, 1e-9)
    if max_wrench is None or len(max_wrench) == 0:
        max_force = max_torque = per_kg
    else:
        if len(max_wrench) != 2:
            raise ValueError(f"max_wrench must be [force, torque], got {list(max_wrench)}")
        max_force, max_torque = (float(x) for x in max_wrench)
    if max_effort is None or (not np.isscalar(max_effort) and len(max_effort) == 0):
        effort = model_effort_limits(model)
        effort = np.where(np.isnan(effort), per_kg, effort)
    elif np.isscalar(max_effort):
        effort = np.full(nj, float(max_effort))
    else:
        effort = np.array(max_effort, dtype=float).reshape(-1)
        if effort.shape != (nj,):
            raise ValueError(f"max_effort as a list needs one value per joint ({nj}: "
                             f"{', '.join(model.joint_names) or 'no joints'}), got {effort.size}")
    for name, x in (("max_wrench", max_force), ("max_wrench", max_torque), *(("max_effort", e) for e in effort)):
        if not x > 0.0:  # NaN too
            raise ValueError(f"{name} limits must be positive, got {x}")
    effort.setflags(write=False)
    return CommandLimits(float(max_force), float(max_torque), effort)


def scale_to_norm(x: np.ndarray, limit: float):
    """``(x scaled down to norm limit along its direction, whether it was)``; the norm without overflow (1e308
    components have an infinite 2-norm in floating point). A short vector whose 1-norm (an upper bound of its
    2-norm; NaN or inf for non-finite components) is below the limit by more than rounding is returned at once:
    the common, unsaturated case costs no numpy call."""
    if x.size <= 8:
        total = sum(map(abs, x.tolist()))
        if total <= limit * (1.0 - 1e-12):
            return x, False
    s = float(np.max(np.abs(x))) if x.size else 0.0
    if s == 0.0 or not math.isfinite(limit):
        return x, False
    u = x / s
    n_u = math.sqrt(float(u @ u))  # in [1, sqrt(len)]
    if s <= limit / n_u:
        return x, False
    return u * (limit / n_u), True


def saturate_wrench(W: np.ndarray, limits: CommandLimits):
    """``(W, saturated)``: ``W = [F; T]`` with its force and torque each scaled down along its direction to
    ``max_force`` / ``max_torque``."""
    F, f_sat = scale_to_norm(W[:3], limits.max_force)
    T, t_sat = scale_to_norm(W[3:], limits.max_torque)
    return (np.concatenate([F, T]), True) if (f_sat or t_sat) else (W, False)


def clip_efforts(tau: np.ndarray, max_effort: np.ndarray):
    """``(tau, saturated)``: joint efforts clipped to ``±max_effort``."""
    if (np.abs(tau) > max_effort).any():
        return np.clip(tau, -max_effort, max_effort), True
    return tau, False
