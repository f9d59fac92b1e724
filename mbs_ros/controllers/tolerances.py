"""Tolerances of a followed joint trajectory, checked as ros2_controllers' joint_trajectory_controller (JTC, kilted)
checks those of a ``control_msgs/action/FollowJointTrajectory`` goal. ROS-free: the controller node and the unit
tests share it.

Per joint a triple (position, velocity, acceleration) [rad or m, /s, /s²]; 0 means not checked. Path tolerances
apply while the trajectory runs, goal tolerances once its last point's time has passed, and ``goal_time`` [s] is
how long after that the joints may take to come within the goal tolerances (0: as long as they take).

- :func:`resolve` is JTC's ``resolve_tolerance_source``: a goal's value > 0 replaces the default, -1 erases it
  (0: not checked), 0 keeps the default, any other negative value is illegal;
- :func:`from_goal` applies a goal's ``path_tolerance``, ``goal_tolerance`` and ``goal_time_tolerance`` to the
  defaults; as JTC, a tolerance naming an unknown joint or holding an illegal value makes the whole goal run with
  the defaults (the reason is returned for a warning);
- :func:`joint_error` is desired - actual, continuous joints wrapped to the shortest angle;
- :class:`TrajectoryCheck` decides, sample by sample, whether a trajectory runs on, violated its path
  tolerance, succeeded, or missed its goal tolerance by more than ``goal_time`` (JTC's update step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["SegmentTolerances", "resolve", "from_goal", "joint_error", "violations", "describe", "TrajectoryCheck",
           "RUNNING", "PATH_VIOLATED", "SUCCEEDED", "GOAL_VIOLATED", "COMPONENTS", "ERASE", "EPS"]

ERASE = -1.0  # a goal's tolerance of -1 erases the default (control_msgs/msg/JointTolerance)
EPS = float(np.finfo(np.float32).eps)  # JTC compares with the float epsilon
COMPONENTS = ("position", "velocity", "acceleration")
RUNNING, PATH_VIOLATED, SUCCEEDED, GOAL_VIOLATED = "running", "path_violated", "succeeded", "goal_violated"


@dataclass(frozen=True)
class SegmentTolerances:
    """``path`` and ``goal``: (nj, 3) arrays of (position, velocity, acceleration) tolerances, 0 = not checked;
    ``goal_time`` [s] after the last point, 0 = no limit."""

    path: np.ndarray
    goal: np.ndarray
    goal_time: float = 0.0

    @classmethod
    def defaults(cls, nj: int, goal_time: float = 0.0, stopped_velocity: float = 0.01) -> "SegmentTolerances":
        """JTC's defaults: no path or goal position tolerance, the goal's velocity within ``stopped_velocity``
        (its ``constraints.stopped_velocity_tolerance``), ``goal_time`` (its ``constraints.goal_time``)."""
        goal = np.zeros((nj, 3))
        goal[:, 1] = stopped_velocity
        return cls(np.zeros((nj, 3)), goal, float(goal_time))


def resolve(default: float, value: float) -> float:
    """A goal's tolerance ``value`` applied to ``default`` (JTC's resolve_tolerance_source); ValueError if illegal."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"tolerance {value} is not finite")
    if value > 0.0:
        return value
    if abs(value - ERASE) < EPS:
        return 0.0
    if value < 0.0:
        raise ValueError(f"illegal tolerance {value:g} (> 0, 0 = default, -1 = erase)")
    return float(default)


def from_goal(defaults: SegmentTolerances, joint_names: Sequence[str],
              path_tolerance: Iterable[Tuple[str, float, float, float]],
              goal_tolerance: Iterable[Tuple[str, float, float, float]],
              goal_time_tolerance: float) -> Tuple[SegmentTolerances, Optional[str]]:
    """``(tolerances, None)``, or ``(defaults, reason)`` when the goal's tolerances cannot be used (as JTC: an
    unknown joint or an illegal value anywhere). The tolerance lists hold ``(name, position, velocity,
    acceleration)``; ``goal_time_tolerance`` in s."""
    index = {n: i for i, n in enumerate(joint_names)}
    try:
        goal_time = resolve(defaults.goal_time, goal_time_tolerance)
    except ValueError as e:
        return defaults, f"goal_time_tolerance: {e}"
    out = {"path": defaults.path.copy(), "goal": defaults.goal.copy()}
    for kind, entries in (("path", path_tolerance), ("goal", goal_tolerance)):
        for name, *values in entries:
            if name not in index:
                return defaults, f"joint '{name}' specified in goal.{kind}_tolerance does not exist"
            i = index[name]
            for k, v in enumerate(values):
                try:
                    out[kind][i, k] = resolve(out[kind][i, k], v)
                except ValueError as e:
                    return defaults, f"joint '{name}' in goal.{kind}_tolerance, {COMPONENTS[k]}: {e}"
    return replace(defaults, path=out["path"], goal=out["goal"], goal_time=goal_time), None


def joint_error(desired, actual, wrap) -> np.ndarray:
    """``desired - actual``; where ``wrap`` (continuous joints) the shortest angle, in [-π, π)."""
    e = np.asarray(desired, dtype=float) - np.asarray(actual, dtype=float)
    return np.where(wrap, (e + math.pi) % (2.0 * math.pi) - math.pi, e)


def violations(tol: np.ndarray, err_pos, err_vel, err_acc=None) -> List[Tuple[int, int, float, float]]:
    """``(joint, component, error, tolerance)`` for every checked component whose |error| exceeds its tolerance
    (acceleration only when ``err_acc`` is given: without a measured acceleration it is not checked, as JTC without
    an acceleration state interface)."""
    errors = [np.asarray(err_pos, dtype=float), np.asarray(err_vel, dtype=float)]
    if err_acc is not None:
        errors.append(np.asarray(err_acc, dtype=float))
    out = []
    for k, e in enumerate(errors):
        bad = (tol[:, k] > 0.0) & ~(np.abs(e) <= tol[:, k])  # NaN errors count as violations
        out += [(int(i), k, float(e[i]), float(tol[i, k])) for i in np.flatnonzero(bad)]
    return out


def describe(found: Sequence[Tuple[int, int, float, float]], joint_names: Sequence[str]) -> str:
    return ", ".join(f"{joint_names[i]} {COMPONENTS[k]} error {e:.4g} (tolerance {tol:.4g})" for i, k, e, tol in found)


class TrajectoryCheck:
    """Outcome of each sample of a trajectory that ends at ``end_time`` [s from its start] (JTC's update step):
    ``(status, found)`` with ``status`` one of RUNNING, PATH_VIOLATED, SUCCEEDED, GOAL_VIOLATED and ``found`` the
    violations behind it (:func:`violations`). Path tolerances are checked before the end (and on the first
    sample), goal tolerances from the end on; GOAL_VIOLATED once ``goal_time`` > 0 has passed after the end
    outside them."""

    def __init__(self, tolerances: SegmentTolerances, end_time: float):
        self.tolerances = tolerances
        self.end_time = float(end_time)
        self._first = True

    def __call__(self, t: float, err_pos, err_vel, err_acc=None):
        tol = self.tolerances
        before_end = t < self.end_time
        first, self._first = self._first, False
        if before_end or first:
            found = violations(tol.path, err_pos, err_vel, err_acc)
            if found:
                return PATH_VIOLATED, found
        if before_end:
            return RUNNING, []
        found = violations(tol.goal, err_pos, err_vel, err_acc)
        if not found:
            return SUCCEEDED, []
        if tol.goal_time > 0.0 and t - self.end_time > tol.goal_time:
            return GOAL_VIOLATED, found
        return RUNNING, found
