"""The controller's FollowJointTrajectory goal intake (mbs_ros.nodes.controller_actions.BoundedGoalIntake): a
serialized goal request is taken as rclpy takes it (C message first, then the conversion to Python), and one
larger than any valid goal comes out with its large sequences empty and the reason remembered, the C layout
read here having been checked against rosidl's own at construction."""
import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action", reason="control_msgs not built into this environment yet (make setup)")

from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import JointTolerance  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from trajectory_msgs.msg import JointTrajectoryPoint  # noqa: E402

from mbs_ros.nodes import controller_actions as ca  # noqa: E402

Request = FollowJointTrajectory.Impl.SendGoalService.Request


def request(n_points, names=("j1", "j2"), values=2, frame_id="", path=0, multi_dof=False):
    r = Request()
    r.goal_id.uuid = np.arange(16, dtype=np.uint8)
    r.goal.trajectory.header.frame_id = frame_id
    r.goal.trajectory.joint_names = list(names)
    point = JointTrajectoryPoint(positions=[0.5] * values, time_from_start=Duration(sec=1, nanosec=7))
    r.goal.trajectory.points = [point] * n_points
    r.goal.path_tolerance = [JointTolerance(name="j1", position=0.1)] * path
    r.goal.goal_time_tolerance = Duration(sec=3, nanosec=4)
    if multi_dof:
        r.goal.multi_dof_trajectory.joint_names = ["base"]
    return serialize_message(r)


@pytest.fixture(scope="module")
def intake():
    it = ca.BoundedGoalIntake()
    assert it.usable, "the C layout read by the intake is not this rclpy's"
    return it


def test_a_valid_request_is_taken_whole(intake):
    msg = deserialize_message(request(10_000, path=3), intake.request_type)
    goal = msg.goal
    assert intake.refusal(goal) is None
    assert list(msg.goal_id.uuid) == list(range(16))
    assert len(goal.trajectory.points) == 10_000 and list(goal.trajectory.joint_names) == ["j1", "j2"]
    assert list(goal.trajectory.points[-1].positions) == [0.5, 0.5]
    assert (goal.trajectory.points[0].time_from_start.sec, goal.trajectory.points[0].time_from_start.nanosec) == (1, 7)
    assert len(goal.path_tolerance) == 3 and goal.path_tolerance[2].position == 0.1
    assert (goal.goal_time_tolerance.sec, goal.goal_time_tolerance.nanosec) == (3, 4)


@pytest.mark.parametrize("kwargs, reason", [
    (dict(n_points=10_001), "10001 points: at most 10000; not decoded"),
    (dict(n_points=1, values=3), "a point has 3 values in one array for 2 joint names; not decoded"),
    (dict(n_points=1, names=[f"j{i}" for i in range(1001)], values=0), "1001 joint names: at most 1000"),
    (dict(n_points=1, path=1001), "1001 tolerances in a list: at most 1000"),
    (dict(n_points=1, frame_id="f" * 2000), "a name or frame_id of 2000 bytes"),
    (dict(n_points=5, multi_dof=True), "multi_dof_trajectory is not supported"),
])
def test_an_oversized_request_comes_out_empty_with_its_reason(intake, kwargs, reason):
    msg = deserialize_message(request(**kwargs), intake.request_type)
    goal = msg.goal
    assert reason in intake.refusal(goal)
    assert list(msg.goal_id.uuid) == list(range(16))  # the request is still answerable
    assert len(goal.trajectory.points) == 0 and len(goal.trajectory.joint_names) == 0
    assert len(goal.path_tolerance) == 0 and goal.trajectory.header.frame_id == ""
    assert intake.refusal(goal) is None  # told once


class _OlderGoalRequest(ca.ctypes.Structure):  # control_msgs before the component tolerances
    _fields_ = [("goal_id", ca.ctypes.c_uint8 * 16), ("trajectory", ca._Trajectory),
                ("multi_dof_trajectory", ca._Trajectory), ("path_tolerance", ca._Seq), ("goal_tolerance", ca._Seq),
                ("goal_time_tolerance", ca._Time), ("component_path_tolerance", ca._Seq),
                ("component_goal_tolerance", ca._Seq)]


def test_a_layout_that_is_not_this_rclpys_is_noticed(monkeypatch):
    monkeypatch.setattr(ca, "_GoalRequest", _OlderGoalRequest)
    it = ca.BoundedGoalIntake()
    assert not it.usable and it.request_type is Request
