"""The controller node's input checks over plain data (mbs_ros/controllers/reference_input.py), without ROS: stamps,
point times, joint and base references (the joints a message does not name hold, the current reference is
prepended at 0, bounds and URDF ranges), measured states; and its command output (mbs_ros/controllers/command.py):
a wrench or efforts beyond the limits are saturated and counted so. Expected values are written out."""
import math

import numpy as np
import pytest

from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers.command import CommandOutput
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation import actuators
from urdf_text import joint, link, robot

Rejected = ri.Rejected


@pytest.fixture(scope="module")
def arm():
    """Two joints: a revolute one in [-2, 2] and a continuous one."""
    text = robot(link("base", 1.0), link("l1", 1.0), link("l2", 1.0),
                 joint("j1", "base", "l1"), joint("j2", "l1", "l2", jtype="continuous", limit=""))
    return Model.from_urdf(text)


def test_stamps():
    assert ri.stamp_ns(3, 5, "header.stamp") == 3_000_000_005
    with pytest.raises(Rejected, match="header.stamp is negative"):
        ri.stamp_ns(-1, 0, "header.stamp")
    with pytest.raises(Rejected, match="nanosec must be < 1e9"):
        ri.stamp_ns(0, 1_000_000_000, "header.stamp")


def test_point_times():
    np.testing.assert_allclose(ri.point_times([0, 1, 2], [500_000_000, 0, 0]), [0.5, 1.0, 2.0])
    for sec, nanosec, reason in (([1, 1], [0, 0], "increase strictly"), ([-1], [0], "must not be negative"),
                                 ([2_000_000], [0], "at most 1e\\+06 s")):
        with pytest.raises(Rejected, match=reason):
            ri.point_times(sec, nanosec)


def test_start_time_and_point_count():
    assert ri.start_time(0, 7) == 7  # unstamped: the newest state's
    assert ri.start_time(5, 7) == 5
    with pytest.raises(Rejected, match="more than 1e\\+06 s from the newest state"):
        ri.start_time(1, 2_000_000 * 1_000_000_000)
    with pytest.raises(Rejected, match="no points"):
        ri.check_point_count(0)
    with pytest.raises(Rejected, match="10001 points: at most 10000"):
        ri.check_point_count(10_001)


def test_reference_position_bounds(arm):
    lo, hi = ri.reference_position_bounds(arm)
    np.testing.assert_allclose(lo, [-2.4, -1e3])  # [-2, 2] widened by 10 % of its range; continuous: ±1e3
    np.testing.assert_allclose(hi, [2.4, 1e3])


def joints(arm):
    return ri.JointReferenceInput(("j1", "j2"), *ri.reference_position_bounds(arm))


HOLD = (np.array([0.3, -0.7]), np.zeros(2), np.zeros(2))  # the current reference (q, v, a)


def test_a_joint_reference_of_one_joint_holds_the_other_and_starts_from_the_current(arm):
    ref = joints(arm)(["j2"], np.array([1.0, 2.0]), [[0.5], [1.5]], [[], []], [[], []], HOLD)
    np.testing.assert_allclose(ref.times, [0.0, 1.0, 2.0])  # the current reference prepended at 0
    q, v, _a = ref(0.0)
    np.testing.assert_allclose(q, [0.3, -0.7])
    q, v, _a = ref(2.0)
    np.testing.assert_allclose(q, [0.3, 1.5])
    np.testing.assert_allclose(v, [0.0, 0.0], atol=1e-12)
    q, _v, _a = ref(1.0)
    np.testing.assert_allclose(q, [0.3, 0.5])


@pytest.mark.parametrize("names, positions, velocities, reason", [
    (["j3"], [[0.0]], [[]], "must be distinct names among j1, j2 \\(unknown: \\['j3'\\]\\)"),
    (["j1", "j1"], [[0.0, 0.0]], [[]], "must be distinct names"),
    ([], [[]], [[]], "must be distinct names"),
    (["j1"], [[0.0, 1.0]], [[]], "point 0: 2 positions for 1 joints"),
    (["j1"], [[0.0]], [[1.0, 2.0]], "point 0: velocities must be empty or have 1 values"),
    (["j1"], [[2.5]], [[]], "point 0: j1 at 2.5 is outside \\[-2.4, 2.4\\]"),
    (["j2"], [[1001.0]], [[]], "point 0: j2 at 1001 is outside \\[-1000, 1000\\]"),
    (["j1"], [[math.nan]], [[]], "positions must be finite"),
    (["j1"], [[0.0]], [[2e3]], "velocities must be within ±1000"),
])
def test_joint_references_refused(arm, names, positions, velocities, reason):
    with pytest.raises(Rejected, match=reason):
        joints(arm)(names, np.array([1.0]), positions, velocities, [[]], HOLD)


def test_points_closer_than_a_millisecond_are_refused(arm):
    with pytest.raises(Rejected, match="points 0.0005 s apart .* at least 0.001 s"):
        joints(arm)(["j1"], np.array([0.0005]), [[0.0]], [[]], [[]], HOLD)


def test_a_reference_too_fast_for_its_distance_is_refused(arm):
    ref = joints(arm)(["j1"], np.array([0.001]), [[1.8]], [[]], [[]], HOLD)  # 1.5 rad in 1 ms
    with pytest.raises(Rejected, match="the interpolated reference reaches"):
        ri.check_rates(ref)
    ri.check_rates(joints(arm)(["j1"], np.array([1.0]), [[1.8]], [[]], [[]], HOLD))


def test_base_references_on_se2():
    body = Model.rigid_body(base="se2", mass=2.0, inertia=np.diag([0.1, 0.1, 0.2]))
    base = ri.BaseReferenceInput(body, {"base_link"}, "base_link")
    q0 = body.neutral()
    hold = (q0.copy(), np.zeros(3), np.zeros(3))
    yaw = math.pi / 2
    pose = (np.array([1.0, 2.0, 0.0]), np.array([0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]))
    ref = base([], np.array([2.0]), [pose], [None], [None], hold, q0)
    q, _v, _a = ref(2.0)
    q_expected = body.configuration_from_pose(*pose)
    np.testing.assert_allclose(q, q_expected, atol=1e-12)
    with pytest.raises(Rejected, match="joint_names must be empty or \\['base_link'\\]"):
        base(["other"], np.array([2.0]), [pose], [None], [None], hold, q0)
    rolled = (np.zeros(3), np.array([math.sin(0.25), 0.0, 0.0, math.cos(0.25)]))
    with pytest.raises(Rejected, match="point 0: "):
        base([], np.array([2.0]), [rolled], [None], [None], hold, q0)
    with pytest.raises(Rejected, match="point 0: rotation quaternion norm 0 is not in \\[0.5, 2\\]"):
        base([], np.array([2.0]), [(np.zeros(3), np.zeros(4))], [None], [None], hold, q0)


def test_measured_states():
    pos, vel = ri.joint_state(("j1", "j2"), ["x", "j2", "j1"], [9.0, 2.0, 1.0], [9.0, 0.2, 0.1])
    np.testing.assert_array_equal(pos, [1.0, 2.0])
    np.testing.assert_array_equal(vel, [0.1, 0.2])
    with pytest.raises(Rejected, match="needs position and velocity of j2"):
        ri.joint_state(("j1", "j2"), ["j1"], [1.0], [0.1])
    with pytest.raises(Rejected, match="joint\\(s\\) j1 named twice"):
        ri.joint_state(("j1", "j2"), ["j1", "j2", "j1"], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    with pytest.raises(Rejected, match="velocity must be within ±10000"):
        ri.joint_state(("j1",), ["j1"], [1.0], [2e4])
    _p, quat, _V = ri.base_state(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.5]), np.zeros(6))
    np.testing.assert_array_equal(quat, [0.0, 0.0, 0.0, 1.0])
    with pytest.raises(Rejected, match="orientation quaternion norm 3 is not in"):
        ri.base_state(np.zeros(3), np.array([0.0, 0.0, 0.0, 3.0]), np.zeros(6))
    with pytest.raises(Rejected, match="position must be within ±1e\\+06 m"):
        ri.base_state(np.array([2e6, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(6))


def test_measured_states_by_name_whatever_order_each_message_has():
    """The joints are taken by name in every message, also when consecutive messages order them differently or
    name other joints (the index of each name list is computed once and kept)."""
    for names, position in ((["j1", "j2"], [1.0, 2.0]), (["j2", "j1"], [2.0, 1.0]), (["j2", "y", "j1"],
                                                                                      [2.0, 7.0, 1.0])):
        for _ in range(2):
            pos, vel = ri.joint_state(("j1", "j2"), names, position, [10.0 * x for x in position])
            np.testing.assert_array_equal(pos, [1.0, 2.0])
            np.testing.assert_array_equal(vel, [10.0, 20.0])
    pos, _vel = ri.joint_state(("j2",), ["j1", "j2"], [1.0, 2.0], [0.0, 0.0])
    np.testing.assert_array_equal(pos, [2.0])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_states_are_refused_as_non_finite(bad):
    with pytest.raises(Rejected, match="position must be finite"):
        ri.joint_state(("j1", "j2"), ["j1", "j2"], [0.5, bad], [0.0, 0.0])
    with pytest.raises(Rejected, match="twist must be finite"):
        ri.base_state(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, bad, 0.0, 0.0, 0.0]))
    with pytest.raises(Rejected, match="orientation quaternion must be finite"):
        ri.base_state(np.zeros(3), np.array([0.0, bad, 0.0, 1.0]), np.zeros(6))


def test_state_vector_of_a_fixed_arm(arm):
    q, v = ri.state_vector(arm, 0, None, (np.array([0.5, math.pi]), np.array([0.1, 0.2])))
    np.testing.assert_allclose(q, [0.5, -1.0, 0.0], atol=1e-12)  # the continuous joint as (cos, sin)
    np.testing.assert_array_equal(v, [0.1, 0.2])


def test_state_vector_of_a_floating_body():
    body = Model.rigid_body(base="se3", mass=2.0, inertia=np.diag([0.1, 0.1, 0.2]))
    V = np.array([0.1, 0.2, 0.3, 0.01, 0.02, 0.03])
    q, v = ri.state_vector(body, 6, (np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 0.0, 1.0]), V), None)
    np.testing.assert_allclose(q[:3], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(v, V)  # the body twist at the identity orientation
    with pytest.raises(ValueError, match="non-finite"):
        ri.state_vector(body, 6, (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), np.full(6, np.nan)), None)


def test_command_output_saturates_efforts_and_wrench():
    body = Model.rigid_body(base="se3", mass=2.0, inertia=np.diag([0.1, 0.1, 0.2]))
    out = CommandOutput(body, actuators.CommandLimits(10.0, 1.0, np.zeros(0)))
    q = body.neutral()
    cmd = out(np.array([3.0, 4.0, 0.0, 0.0, 0.0, 0.5]), q)  # within the limits: W = tau at the identity
    np.testing.assert_allclose(cmd.wrench, [3.0, 4.0, 0.0, 0.0, 0.0, 0.5])
    assert not cmd.saturated and cmd.thrust is None
    cmd = out(np.array([30.0, 40.0, 0.0, 0.0, 0.0, 0.5]), q)
    np.testing.assert_allclose(cmd.wrench, [6.0, 8.0, 0.0, 0.0, 0.0, 0.5])  # force scaled along itself to 10 N
    assert cmd.saturated
    cmd = out(np.array([30.0, 40.0, 0.0, 0.0, 0.0, 0.5]), None)  # no state: a zero wrench
    np.testing.assert_array_equal(cmd.wrench, np.zeros(6))


def test_command_output_clips_joint_efforts(arm):
    out = CommandOutput(arm, actuators.CommandLimits(1.0, 1.0, np.array([10.0, 5.0])))
    cmd = out(np.array([-12.0, 4.0]), arm.neutral())
    assert cmd.wrench is None and cmd.saturated
    np.testing.assert_array_equal(cmd.effort, [-10.0, 4.0])
    assert not out(np.array([-10.0, 5.0]), arm.neutral()).saturated
