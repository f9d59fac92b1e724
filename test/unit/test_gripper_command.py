"""gripper/command without ROS (mbs_ros.cores.gripper): the intake accepts [position] and [position, max_effort]
and refuses each malformed case; the override leaves the schedule alone until a command is applied at a period
boundary, then moves the target from the schedule's at gripper_speed and keeps it for good."""
import math

import numpy as np
import pytest

from mbs_ros.cores.gripper import GripperCommand, GripperIntake, GripperOverride

INTAKE = GripperIntake(-0.1, 0.125, 15.0)


@pytest.mark.parametrize("data, expected", [
    ([0.01], GripperCommand(0.01, 15.0)),          # effort not given: gripper_max_effort
    ([-0.02, 4.0], GripperCommand(-0.02, 4.0)),
    ([0.125, 0.0], GripperCommand(0.125, 0.0)),    # the bounds themselves
    ([-0.1, 15.0], GripperCommand(-0.1, 15.0)),
])
def test_accepted(data, expected):
    assert INTAKE.check(data) == expected


@pytest.mark.parametrize("data, words", [
    ([], "0 values"),
    ([0.0, 1.0, 2.0], "3 values"),
    ([math.nan], "non-finite"),
    ([0.0, math.inf], "non-finite"),
    ([0.2], "outside the finger joints' range"),
    ([-0.11, 1.0], "outside the finger joints' range"),
    ([0.0, -1e-9], "max_effort"),
    ([0.0, 15.000001], "max_effort"),
    (["a"], "numbers"),
])
def test_rejected(data, words):
    reason = INTAKE.check(data)
    assert isinstance(reason, str) and words in reason


def test_override_takes_over_at_the_boundary_and_for_good():
    o = GripperOverride(speed=0.05)
    assert o.at(1_000_000_000, 0.025) is None and not o.used      # not used: the schedule drives
    o.offer(GripperCommand(-0.02, 6.0))
    assert not o.used                                              # waits for the next boundary
    t0 = 2_000_000_000
    assert o.at(t0, 0.025) == (0.025, -0.05, 6.0)                  # starts from the schedule's target
    target, rate, limit = o.at(t0 + 500_000_000, 0.7)              # the schedule no longer matters
    assert target == pytest.approx(0.025 - 0.05 * 0.5) and rate == -0.05 and limit == 6.0
    assert o.at(t0 + 2_000_000_000, 0.7) == (-0.02, 0.0, 6.0)      # 45 mm at 50 mm/s: arrived after 0.9 s
    o.offer(GripperCommand(0.0, 15.0))                             # the last one applied wins
    assert o.at(t0 + 3_000_000_000, 0.7) == (-0.02, 0.05, 15.0)
    assert o.at(t0 + 4_000_000_000, 0.7) == (0.0, 0.0, 15.0)
    assert o.applied == 2


def test_with_gripper_uses_the_command_limit():
    from mbs_ros.cores.controller import with_gripper
    from mbs_ros.cores.controller_settings import DEFAULTS
    import dataclasses
    s = dataclasses.replace(DEFAULTS, gripper_gain=100.0, gripper_damping=0.0, gripper_max_effort=15.0,
                            gripper_times=(0.0,), gripper_positions=(0.05,))
    index = (np.array([0]), np.array([0]))
    # 100 N/m x 0.1 m = 10 N, clipped at the command's 4 N (the parameter's 15 N would not clip it)
    out = with_gripper(s, index, np.zeros(1), np.array([0.0]), np.array([0.0]), 0, command=(-0.1, 0.0, 4.0))
    assert out[0] == -4.0
    out = with_gripper(s, index, np.zeros(1), np.array([0.0]), np.array([0.0]), 0)
    assert out[0] == pytest.approx(5.0)  # the schedule's 0.05 m, unclipped
