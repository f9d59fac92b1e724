"""The reference node's set-up and its messages as the controller decodes them, without ROS
(mbs_ros.cores.reference.reference_setup, controller_points), which the reference node and the headless run
share: bad parameters are refused naming the parameter, and the points reach the controller in its layout."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.cores.parameters.reference import PARAMETERS
from mbs_ros.cores.reference import ReferenceError, controller_points, reference_setup, trajectories


def values(**given):
    v = {name: p.default for name, p in PARAMETERS.items()}
    v.update(base_times=[0.0, 2.0], base_positions=[0.0, 0.0, -1.0, 1.0, 0.0, -1.0], base_rpy=[0.0] * 6,
             joint_names=["a", "b"], joint_times=[1.0], joint_positions=[0.5, -0.5])
    v.update(given)
    return v


def test_the_parameters_become_the_setup():
    s = reference_setup(values(start_time=0.0, world_frame="/map"), PARAMETERS)
    assert s.wps.has_base and s.wps.has_joints and s.start_time_ns == 0 and s.world_frame == "map"
    assert reference_setup(values(world_frame="  "), PARAMETERS).world_frame == PARAMETERS["world_frame"].default


@pytest.mark.parametrize("given, named", [
    ({"base_times": "0 1"}, "base_times"),
    ({"joint_positions": [0.5, True]}, "joint_positions"),
    ({"joint_names": "a"}, "joint_names"),
    ({"reference_file": "x.yaml"}, "reference_file"),
    ({"base_times": [], "base_positions": [], "base_rpy": [], "joint_times": [], "joint_positions": []},
     "no waypoints"),
    ({"stamp": "later"}, "stamp"),
    ({"min_subscribers": 0}, "min_subscribers"),
    ({"command_timeout": float("nan")}, "command_timeout"),
    ({"start_time": float("inf")}, "start_time"),
])
def test_bad_parameters_are_refused_naming_the_parameter(given, named):
    with pytest.raises(ReferenceError, match=named):
        reference_setup(values(**given), PARAMETERS)


def test_the_points_reach_the_controller_in_its_layout():
    s = reference_setup(values(), PARAMETERS)
    traj = trajectories(s.wps, "state", None, 3_000_000_000, (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])),
                        {"a": 0.1, "b": 0.2}, ["a", "b"])
    (base_topic, stamp, sec, nanosec, names, (poses, twists, accels)), joints = controller_points(traj)
    assert base_topic == "base_reference" and stamp == 3_000_000_000 and names == []
    assert sec == [0, 2] and nanosec == [0, 0] and twists == accels == [None, None]
    assert poses[1][0].tolist() == [1.0, 0.0, -1.0] and poses[1][1].tolist() == [0.0, 0.0, 0.0, 1.0]
    topic, _stamp, sec, _ns, names, (positions, vel, acc) = joints
    assert topic == "joint_reference" and tuple(names) == ("a", "b")
    assert sec == [0, 1] and positions == [[0.1, 0.2], [0.5, -0.5]] and vel == acc == [[], []]  # the state first
    assert [p[0] for p in controller_points(traj, base=False)] == ["joint_reference"]
    assert controller_points(traj, base=False, joints=False) == []
