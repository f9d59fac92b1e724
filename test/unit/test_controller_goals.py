"""FollowJointTrajectory goals over plain data (mbs_ros/controllers/goals.py), without ROS: the goals
joint_trajectory_controller refuses, and state by state the outcome of a running goal (path tolerance aborts and
holds, goal tolerance succeeds, goal_time aborts), its feedback throttle and the index of the next point."""
import math

import numpy as np
import pytest

from mbs_ros.controllers import goals
from mbs_ros.controllers import tolerances as tl
from mbs_ros.controllers.reference_input import Rejected

JOINTS = ("j1", "j2")


@pytest.mark.parametrize("kwargs, reason, code", [
    (dict(multi_dof=True), "multi_dof_trajectory is not supported", "INVALID_GOAL"),
    (dict(names=["j1"]), "don't match the controller's joints", "INVALID_JOINTS"),
    (dict(names=[], allow_partial=True), "empty joint names", "INVALID_JOINTS"),
    (dict(names=["j1", "elbow"]), "unknown joints \\['elbow'\\]: the controller's joints are j1, j2", "INVALID_JOINTS"),
    (dict(names=["j1", "elbow"], allow_partial=True), "unknown joints \\['elbow'\\]", "INVALID_JOINTS"),
    (dict(n_points=0), "empty trajectory", "INVALID_GOAL"),
    (dict(last_velocities=[0.0, 0.1]), "the last point's velocities are not zero: \\[0.1\\]", "INVALID_GOAL"),
])
def test_goals_jtc_refuses(kwargs, reason, code):
    """Each refusal with its reason and the FollowJointTrajectory result code the client gets (issue 31 item 22)."""
    args = dict(names=["j1", "j2"], joint_names=JOINTS, allow_partial=False, n_points=2, last_velocities=[0.0, 0.0],
                multi_dof=False)
    args.update(kwargs)
    with pytest.raises(Rejected, match=reason) as refused:
        goals.check_goal(**args)
    assert goals.result_code(refused.value) == code


def test_goals_jtc_accepts():
    goals.check_goal(["j2", "j1"], JOINTS, False, 1, [], False)
    goals.check_goal(["j2"], JOINTS, True, 1, [1e-9], False)  # partial when allowed; a velocity below float eps


def test_a_stamped_goal_that_ended_before_the_newest_state_is_refused():
    with pytest.raises(Rejected, match="before the newest state") as refused:
        goals.check_goal_end(True, 10_000_000_000, 1.5, 12_000_000_000)
    assert goals.result_code(refused.value) == "OLD_HEADER_TIMESTAMP"
    goals.check_goal_end(True, 10_000_000_000, 1.5, 11_500_000_000)  # ends exactly at the newest state
    goals.check_goal_end(False, 10_000_000_000, 1.5, 12_000_000_000)  # unstamped: starts at the newest state


def monitor(path_pos=0.0, goal_pos=0.0, goal_time=0.0, wrap=(False, False)):
    t = tl.SegmentTolerances.defaults(2, goal_time=goal_time, stopped_velocity=0.01)
    t.path[:, 0] = path_pos
    t.goal[:, 0] = goal_pos
    return goals.GoalMonitor(t, 2.0, np.array([1.0, 2.0]), np.array(wrap), JOINTS, feedback_period=0.05)


ZERO = np.zeros(2)


def test_a_path_violation_aborts_and_holds():
    m = monitor(path_pos=0.1)
    s = m(1_000_000_000, 0.5, [0.0, 0.0], ZERO, [0.0, 0.05], ZERO, now=0.0)
    assert s.outcome is None and s.status == tl.RUNNING and s.index == 0
    s = m(1_100_000_000, 0.6, [0.0, 0.0], ZERO, [0.0, 0.2], ZERO, now=0.01)
    assert s.status == tl.PATH_VIOLATED and s.hold
    assert s.outcome[:2] == ("abort", "PATH_TOLERANCE_VIOLATED")
    assert "Aborted due to path tolerance violation at t = 1.100000 s: j2 position error -0.2" in s.outcome[2]
    np.testing.assert_array_equal(s.e_pos, [0.0, -0.2])
    assert s.feedback  # the sample that ends a goal is always fed back


def test_the_goal_succeeds_within_its_tolerance_after_the_end():
    m = monitor(goal_pos=0.01)
    s = m(3_000_000_000, 1.9, [1.0, 1.0], ZERO, [0.5, 0.5], ZERO, now=0.0)  # before the end: no goal check
    assert s.outcome is None and s.index == 1
    s = m(3_200_000_000, 2.1, [1.0, 1.0], ZERO, [0.995, 1.0], [0.0, 0.005], now=1.0)
    assert s.outcome[:2] == ("succeed", "SUCCESSFUL") and not s.hold and s.index == 2
    assert "Goal successfully reached! (t = 3.200000 s, 0.100 s after the trajectory's end" in s.outcome[2]


def test_goal_time_exceeded_aborts():
    m = monitor(goal_pos=0.01, goal_time=0.5)
    assert m(0, 2.4, [1.0, 1.0], ZERO, [0.9, 1.0], ZERO, now=0.0).outcome is None  # within goal_time: waits
    s = m(0, 2.6, [1.0, 1.0], ZERO, [0.9, 1.0], ZERO, now=1.0)
    assert s.outcome[:2] == ("abort", "GOAL_TOLERANCE_VIOLATED") and s.hold
    assert "exceeding by 0.600000 seconds: j1 position error 0.1" in s.outcome[2]


def test_continuous_joints_error_is_wrapped():
    m = monitor(wrap=(True, False))
    s = m(0, 0.5, [math.pi - 0.1, 0.0], ZERO, [-math.pi + 0.1, 0.0], ZERO, now=0.0)
    assert s.e_pos[0] == pytest.approx(-0.2)


def test_feedback_is_throttled_by_the_given_clock():
    m = monitor()
    due = [m(0, 0.1 * i, ZERO, ZERO, ZERO, ZERO, now=now).feedback for i, now in enumerate([0.0, 0.02, 0.049,
                                                                                               0.05, 0.06, 0.2])]
    assert due == [True, False, False, True, False, True]


@pytest.mark.parametrize("kwargs, reason", [
    (dict(multi_dof=True), "multi_dof_trajectory is not supported"),
    (dict(n_points=10_001), "10001 points: at most 10000; not decoded"),
    (dict(n_names=1001, longest_point=0), "1001 joint names: at most 1000"),
    (dict(n_tolerances=1001), "1001 tolerances in a list: at most 1000"),
    (dict(longest_point=3), "a point has 3 values in one array for 2 joint names"),
    (dict(longest_name=1025), "a name or frame_id of 1025 bytes: at most 1024"),
])
def test_goal_sizes_beyond_any_valid_goal_are_refused(kwargs, reason):
    args = dict(n_points=10_000, n_names=2, longest_point=2, n_tolerances=1000, multi_dof=False, longest_name=1024)
    goals.check_goal_sizes(**args)  # the largest valid sizes
    args.update(kwargs)
    with pytest.raises(Rejected, match=reason):
        goals.check_goal_sizes(**args)
