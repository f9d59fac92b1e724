"""The controller's state path without ROS (mbs_ros.cores.controller_state), which the controller node, the
estimator node and the headless run share: the estimator's output as estimate/odom and estimate/joint_states carry
it to the controller, and the time base and start-up holds of an accepted state."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers import timebase as tb
from mbs_ros.dynamics import Model
from mbs_ros.cores.controller_state import commit_state, estimate_parts, estimate_pose
from mbs_ros.cores.estimator_settings import Output

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(ROBOTS / "uvms_6dof.yaml")


def output(joints=True):
    c, s = math.cos(math.pi / 3), math.sin(math.pi / 3)  # 60° about z
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return Output(stamp_ns=20_000_000, p=np.array([1.0, -2.0, -5.0]), R=R, V=np.arange(6.0),
                  joint_positions=np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]) if joints else None,
                  joint_velocities=np.array([-0.6, -0.5, -0.4, -0.3, -0.2, -0.1]) if joints else None)


def test_estimate_odom_carries_the_quaternion_of_the_rotation():
    p, quat, V = estimate_pose(output())
    np.testing.assert_allclose(quat, [0.0, 0.0, 0.5, math.sqrt(3) / 2], atol=1e-15)
    assert p.tolist() == [1.0, -2.0, -5.0] and V.tolist() == list(range(6))


def test_the_estimate_becomes_the_controllers_state_in_its_joint_order(uvms):
    names = tuple(uvms.joint_names)
    est_names = names[::-1]  # the estimator lists the joints the other way round
    base, joints = estimate_parts(output(), names, est_names, True, True)
    q, v = ri.state_vector(uvms, 6, base, joints)
    np.testing.assert_allclose(q[:7], [1.0, -2.0, -5.0, 0.0, 0.0, 0.5, math.sqrt(3) / 2], atol=1e-15)
    assert q[7:].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert v.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6]


def test_a_part_the_estimator_does_not_publish_is_an_error(uvms):
    names = tuple(uvms.joint_names)
    with pytest.raises(RuntimeError, match="no joint states"):
        estimate_parts(output(joints=False), names, names, True, True)
    with pytest.raises(RuntimeError, match="no joint states"):
        estimate_parts(output(), names, names, True, False)
    with pytest.raises(RuntimeError, match="no base state"):
        estimate_parts(Output(stamp_ns=0), (), (), True, False)
    assert estimate_parts(output(), (), names, False, False) == (None, None)


def test_the_first_state_is_held_and_later_ones_move_the_time_base(uvms):
    base = tb.TimeBase(int(0.5e9))
    q = uvms.neutral()
    first = commit_state(base, uvms, 10_000_000, None, q, True)
    assert first is not None and base.last == 10_000_000
    base_ref, joint_ref = first
    assert base_ref is not None and joint_ref is not None
    assert commit_state(base, uvms, 20_000_000, None, q, False) is None and base.last == 20_000_000
