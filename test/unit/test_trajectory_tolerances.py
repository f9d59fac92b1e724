"""The FollowJointTrajectory tolerance logic of mbs_ros.controllers.tolerances, without ROS:
joint_trajectory_controller's rules for a goal's tolerances (0 = default, -1 = erase, other negatives illegal; an
unknown joint or an illegal value makes the whole goal use the defaults), the wrapped error of continuous joints, and
the sample-by-sample outcome (path tolerance before the end and on the first sample, goal tolerance after it,
goal_time)."""

import math

import numpy as np
import pytest

from mbs_ros.controllers import tolerances as tl

JOINTS = ("j1", "j2")


def defaults(goal_time=0.0):
    return tl.SegmentTolerances.defaults(2, goal_time=goal_time, stopped_velocity=0.01)


def test_defaults_are_jtcs():
    d = defaults(1.5)
    assert np.all(d.path == 0.0)
    assert np.all(d.goal[:, 0] == 0.0) and np.all(d.goal[:, 1] == 0.01) and np.all(d.goal[:, 2] == 0.0)
    assert d.goal_time == 1.5


@pytest.mark.parametrize("default, value, expected", [
    (0.3, 0.0, 0.3),  # 0: the default
    (0.3, 0.1, 0.1),  # > 0: the goal's
    (0.3, -1.0, 0.0),  # -1: erased (not checked)
    (0.0, 2.0, 2.0),
])
def test_resolve(default, value, expected):
    assert tl.resolve(default, value) == expected


@pytest.mark.parametrize("value", [-0.5, -2.0, math.nan, math.inf])
def test_resolve_refuses_illegal_values(value):
    with pytest.raises(ValueError):
        tl.resolve(0.1, value)


def test_from_goal_applies_the_goals_tolerances_per_joint():
    tol, problem = tl.from_goal(defaults(), JOINTS, [("j2", 0.05, 0.0, -1.0)],
                                [("j1", 0.01, -1.0, 0.0), ("j2", 0.02, 0.3, 0.0)], 2.5)
    assert problem is None
    np.testing.assert_array_equal(tol.path, [[0, 0, 0], [0.05, 0, 0]])
    np.testing.assert_array_equal(tol.goal, [[0.01, 0.0, 0], [0.02, 0.3, 0]])
    assert tol.goal_time == 2.5
    assert tl.from_goal(defaults(1.0), JOINTS, [], [], 0.0)[0].goal_time == 1.0  # 0: default goal_time
    assert tl.from_goal(defaults(1.0), JOINTS, [], [], -1.0)[0].goal_time == 0.0  # -1: no limit


@pytest.mark.parametrize("path, goal, goal_time, reason", [
    ([("nope", 0.1, 0, 0)], [], 0.0, "'nope' specified in goal.path_tolerance does not exist"),
    ([], [("j1", 0.1, 0, 0), ("other", 0.1, 0, 0)], 0.0, "'other' specified in goal.goal_tolerance"),
    ([("j1", -0.5, 0, 0)], [], 0.0, "position: illegal tolerance -0.5"),
    ([], [("j2", 0.1, 0, -3.0)], 0.0, "acceleration: illegal tolerance -3"),
    ([], [], -0.25, "goal_time_tolerance"),
])
def test_from_goal_falls_back_to_the_defaults_as_jtc(path, goal, goal_time, reason):
    d = defaults(0.7)
    tol, problem = tl.from_goal(d, JOINTS, path, goal, goal_time)
    assert tol is d
    assert reason in problem


def test_joint_error_wraps_continuous_joints():
    e = tl.joint_error([3.1, 3.1, 0.5], [-3.1, -3.1, 0.2], [True, False, True])
    np.testing.assert_allclose(e, [6.2 - 2 * math.pi, 6.2, 0.3], atol=1e-12)


def test_violations_and_nan():
    tol = np.array([[0.1, 0.0, 0.0], [0.0, 0.2, 0.5]])
    assert tl.violations(tol, [0.05, 5.0], [9.0, 0.1]) == []  # unchecked components are ignored
    found = tl.violations(tol, [-0.2, 0.0], [0.0, 0.3], [0.0, 1.0])
    assert found == [(0, 0, -0.2, 0.1), (1, 1, 0.3, 0.2), (1, 2, 1.0, 0.5)]
    assert "j1 position error -0.2 (tolerance 0.1)" in tl.describe(found, JOINTS)
    assert [f[:2] for f in tl.violations(tol, [math.nan, 0.0], [0.0, 0.0])] == [(0, 0)]  # NaN violates
    assert tl.violations(tol, [0.0, 0.0], [0.0, 0.0], [0.0, 1.0]) == [(1, 2, 1.0, 0.5)]
    assert tl.violations(tol, [0.0, 0.0], [0.0, 0.0]) == []  # no measured acceleration: not checked


def make_check(path=0.1, goal=0.01, goal_time=0.5, end=2.0):
    tol = tl.SegmentTolerances(np.array([[path, 0, 0], [path, 0, 0]]), np.array([[goal, 0.05, 0], [goal, 0.05, 0]]),
                               goal_time)
    return tl.TrajectoryCheck(tol, end)


def test_running_then_success():
    check = make_check()
    assert check(0.0, [0.0, 0.0], [0.0, 0.0])[0] == tl.RUNNING
    # before the end the goal tolerances do not matter
    assert check(1.0, [0.09, -0.09], [1.0, 1.0])[0] == tl.RUNNING
    # at the end, outside the goal tolerance but within goal_time: still running
    status, found = check(2.0, [0.02, 0.0], [0.0, 0.0])
    assert status == tl.RUNNING and found == [(0, 0, 0.02, 0.01)]
    assert check(2.3, [0.005, 0.0], [0.01, 0.0]) == (tl.SUCCEEDED, [])


def test_path_violation_before_the_end_only():
    check = make_check()
    status, found = check(0.5, [0.0, 0.15], [0.0, 0.0])
    assert status == tl.PATH_VIOLATED and found == [(1, 0, 0.15, 0.1)]
    # after the end the path tolerance no longer applies (the goal tolerance does)
    later = make_check()
    later(0.0, [0.0, 0.0], [0.0, 0.0])
    assert later(2.1, [0.0, 0.15], [0.0, 0.0])[0] == tl.RUNNING


def test_first_sample_checks_the_path_even_at_the_end():
    check = make_check(end=0.0)
    assert check(0.0, [0.2, 0.0], [0.0, 0.0])[0] == tl.PATH_VIOLATED
    check = make_check(end=0.0)
    assert check(0.0, [0.0, 0.0], [0.0, 0.0])[0] == tl.SUCCEEDED


def test_goal_time_exceeded():
    check = make_check(goal_time=0.5)
    check(0.0, [0.0, 0.0], [0.0, 0.0])
    assert check(2.5, [0.0, 0.03], [0.0, 0.0])[0] == tl.RUNNING  # exactly goal_time after: not exceeded yet
    status, found = check(2.51, [0.0, 0.03], [0.0, 0.0])
    assert status == tl.GOAL_VIOLATED and found == [(1, 0, 0.03, 0.01)]
    # goal_time 0: wait as long as it takes
    patient = make_check(goal_time=0.0)
    patient(0.0, [0.0, 0.0], [0.0, 0.0])
    assert patient(1e6, [0.0, 0.03], [0.0, 0.0])[0] == tl.RUNNING
