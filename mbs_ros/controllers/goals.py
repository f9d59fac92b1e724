"""FollowJointTrajectory goals over plain data, ROS-free, as ros2_controllers' joint_trajectory_controller (JTC,
kilted) with an effort interface: which goals are accepted (:func:`check_goal`, :func:`check_goal_end`) and, state
by state, how a running goal goes on (:class:`GoalMonitor`: its tolerances from :mod:`mbs_ros.controllers.tolerances`, feedback at
most every ``feedback_period`` and the outcome with JTC's result code and text)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from mbs_ros.controllers import tolerances as tol
from mbs_ros.controllers.reference_input import MAX_POINTS, Rejected

__all__ = ["check_goal", "check_goal_sizes", "check_goal_end", "GoalMonitor", "GoalSample", "FEEDBACK_PERIOD_S",
           "PREEMPTED", "MULTI_DOF", "MAX_GOAL_NAMES", "MAX_NAME_BYTES", "GoalRejected", "result_code"]

FEEDBACK_PERIOD_S = 0.05  # between feedbacks (JTC's action_monitor_rate, 20 Hz)
PREEMPTED = "Current goal preempted by new incoming action."  # JTC's text for a goal a new one replaces
MULTI_DOF = "multi_dof_trajectory is not supported (the base follows base_reference)"
MAX_GOAL_NAMES = 1000  # joint names, and entries of each tolerance list, of a goal
MAX_NAME_BYTES = 1024  # a goal's frame_id, joint names and tolerance names


class GoalRejected(Rejected):
    """A goal refused, with the FollowJointTrajectory result code that says why (``INVALID_JOINTS``,
    ``OLD_HEADER_TIMESTAMP``; a plain :class:`Rejected` is ``INVALID_GOAL``)."""

    def __init__(self, reason: str, code: str):
        super().__init__(reason)
        self.code = code


def result_code(refusal: BaseException) -> str:
    """The FollowJointTrajectory result code (its name) of a goal's refusal: a :class:`GoalRejected`'s own, else
    INVALID_GOAL."""
    return getattr(refusal, "code", "INVALID_GOAL")


def check_goal_sizes(n_points: int, n_names: int, longest_point: int, n_tolerances: int, multi_dof: bool,
                     longest_name: int) -> None:
    """Rejected for a goal larger than any valid one, judged from its sizes alone (before its points are
    decoded, which for 10⁶ points takes seconds): more than ``MAX_POINTS`` points, more than ``MAX_GOAL_NAMES``
    joint names or entries in a tolerance list (``n_tolerances``: the longest), a point with more values in one of
    its arrays (``longest_point``) than the goal has joint names, a name longer than ``MAX_NAME_BYTES``, or any
    ``multi_dof_trajectory``."""
    if multi_dof:
        raise Rejected(MULTI_DOF)
    if n_points > MAX_POINTS:
        raise Rejected(f"{n_points} points: at most {MAX_POINTS}; not decoded")
    for n, what in ((n_names, "joint names"), (n_tolerances, "tolerances in a list")):
        if n > MAX_GOAL_NAMES:
            raise Rejected(f"{n} {what}: at most {MAX_GOAL_NAMES}; not decoded")
    if longest_point > n_names:
        raise Rejected(f"a point has {longest_point} values in one array for {n_names} joint names; not decoded")
    if longest_name > MAX_NAME_BYTES:
        raise Rejected(f"a name or frame_id of {longest_name} bytes: at most {MAX_NAME_BYTES}; not decoded")


def check_goal(names: Sequence[str], joint_names: Sequence[str], allow_partial: bool, n_points: int,
               last_velocities: Sequence[float], multi_dof: bool) -> None:
    """Rejected, with JTC's reason, for a goal with a ``multi_dof_trajectory``, joints that are not all the
    controller's (unless ``allow_partial``), no joint names, no points, or a last point with a velocity. The
    trajectory itself is checked as a joint reference."""
    if multi_dof:
        raise Rejected(MULTI_DOF)
    names = list(names)
    if not allow_partial and len(names) != len(joint_names):
        raise GoalRejected(f"joints {names[:20]} don't match the controller's joints {', '.join(joint_names)} "
                           "(allow_partial_joints_goal is false)", "INVALID_JOINTS")
    if not names:
        raise GoalRejected("empty joint names", "INVALID_JOINTS")
    unknown = [n for n in names if n not in joint_names]
    if unknown:
        raise GoalRejected(f"unknown joints {unknown[:20]}: the controller's joints are {', '.join(joint_names)}",
                           "INVALID_JOINTS")
    if not n_points:
        raise Rejected("empty trajectory")
    moving = [x for x in last_velocities if not abs(x) <= tol.EPS]
    if moving:
        raise Rejected(f"the last point's velocities are not zero: {moving[:20]}")


def check_goal_end(stamped: bool, start_ns: int, end_time: float, newest_ns: int) -> None:
    """Rejected for a goal with a ``header.stamp`` (``stamped``) whose trajectory ends before the newest state."""
    if stamped and start_ns + int(end_time * 1e9) < newest_ns:
        raise GoalRejected(f"the trajectory starting at t = {start_ns * 1e-9:.6f} s ends at "
                           f"t = {start_ns * 1e-9 + end_time:.6f} s, before the newest state's "
                           f"t = {newest_ns * 1e-9:.6f} s", "OLD_HEADER_TIMESTAMP")


@dataclass(frozen=True)
class GoalSample:
    """One state's check of a goal: ``status`` (:mod:`mbs_ros.controllers.tolerances`' RUNNING, PATH_VIOLATED, ...), the errors
    (desired - actual, continuous joints wrapped), ``index`` of the next point, whether to publish feedback now,
    and once the goal ends ``outcome`` ``(succeed | abort, JTC result code name, text)`` (``hold``: the joints
    then hold where the state has them)."""

    status: str
    e_pos: np.ndarray
    e_vel: np.ndarray
    index: int
    feedback: bool
    outcome: Optional[Tuple[str, str, str]] = None
    hold: bool = False


class GoalMonitor:
    """A running goal: ``times`` of its points [s], its ``tolerances`` and trajectory end ``end_time`` [s],
    continuous joints ``wrap``. Call it with each state: its stamp ``t_ns`` (for the texts), the time ``t_rel``
    since the trajectory's start [s], desired ``(q_d, v_d)``, measured positions and velocities, and a monotonic
    ``now`` [s] that throttles the feedback."""

    def __init__(self, tolerances: tol.SegmentTolerances, end_time: float, times: np.ndarray, wrap: np.ndarray,
                 joint_names: Sequence[str], feedback_period: float = FEEDBACK_PERIOD_S):
        self.check = tol.TrajectoryCheck(tolerances, end_time)
        self.end_time = float(end_time)
        self.times = np.asarray(times, dtype=float)
        self.wrap = np.asarray(wrap, dtype=bool)
        self.joint_names = tuple(joint_names)
        self.feedback_period = float(feedback_period)
        self.last_feedback = -np.inf

    def __call__(self, t_ns: int, t_rel: float, q_d, v_d, actual, velocity, now: float) -> GoalSample:
        e_pos = tol.joint_error(q_d, actual, self.wrap)
        e_vel = np.asarray(v_d, dtype=float) - np.asarray(velocity, dtype=float)
        status, found = self.check(t_rel, e_pos, e_vel)
        feedback = status != tol.RUNNING or now - self.last_feedback >= self.feedback_period
        if feedback:
            self.last_feedback = now
        index = int(np.searchsorted(self.times, t_rel, side="right"))
        details = tol.describe(found, self.joint_names)
        outcome, hold = None, False
        if status == tol.PATH_VIOLATED:
            outcome, hold = ("abort", "PATH_TOLERANCE_VIOLATED",
                             f"Aborted due to path tolerance violation at t = {t_ns * 1e-9:.6f} s: {details}"), True
        elif status == tol.GOAL_VIOLATED:
            outcome, hold = ("abort", "GOAL_TOLERANCE_VIOLATED",
                             f"Aborted due to goal_time_tolerance exceeding by {t_rel - self.end_time:.6f} seconds: "
                             f"{details}"), True
        elif status == tol.SUCCEEDED:
            outcome = ("succeed", "SUCCESSFUL",
                       f"Goal successfully reached! (t = {t_ns * 1e-9:.6f} s, {t_rel - self.end_time:.3f} s after "
                       f"the trajectory's end; max |position error| {np.abs(e_pos).max():.3g})")
        return GoalSample(status, e_pos, e_vel, index, feedback, outcome, hold)
