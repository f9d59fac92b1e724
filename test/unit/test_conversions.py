"""Unit tests of mbs_ros.nodes.conversions (message <-> numpy); no ROS graph needed."""

import math

import numpy as np
import pytest

cv = pytest.importorskip("mbs_ros.nodes.conversions")

rng = np.random.default_rng(4)


def random_unit_quaternion():
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def test_time_round_trip_is_exact():
    for ns in (0, 1, 999_999_999, 1_000_000_000, 1_732_000_000_123_456_789, 2**62):
        stamp = cv.time_from_ns(ns)
        assert 0 <= stamp.nanosec < 1_000_000_000
        assert cv.ns_from_time(stamp) == ns
    with pytest.raises(ValueError):
        cv.time_from_ns(-1)


def test_period_ns():
    assert cv.period_ns(1000.0) == 1_000_000
    assert cv.period_ns(300.0) == 3_333_333
    assert cv.period_ns(1e9) == 1
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            cv.period_ns(bad)


def test_pose_twist_wrench_round_trips_are_exact():
    for _ in range(20):
        p = rng.normal(size=3) * 10
        q = random_unit_quaternion()
        p2, q2 = cv.pose_from_msg(cv.pose_msg(p, q))
        assert np.array_equal(p, p2) and np.array_equal(q, q2)
        p3, q3 = cv.transform_from_msg(cv.transform_msg(p, q))
        assert np.array_equal(p, p3) and np.array_equal(q, q3)
        V = rng.normal(size=6)
        assert np.array_equal(cv.twist_from_msg(cv.twist_msg(V)), V)
        W = rng.normal(size=6)
        assert np.array_equal(cv.wrench_from_msg(cv.wrench_msg(W)), W)


def test_linear_first_ordering():
    t = cv.twist_msg([1, 2, 3, 4, 5, 6])
    assert (t.linear.x, t.linear.z, t.angular.x, t.angular.z) == (1, 3, 4, 6)
    w = cv.wrench_msg([1, 2, 3, 4, 5, 6])
    assert (w.force.x, w.force.z, w.torque.x, w.torque.z) == (1, 3, 4, 6)
    with pytest.raises(ValueError):
        cv.twist_msg([1, 2, 3])


def test_stamped_messages():
    V = np.arange(6.0)
    p, q = np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 0.0, 1.0])
    odom = cv.odometry_msg(1_500_000_001, "world", "robot1/base_link", p, q, V)
    assert cv.ns_from_time(odom.header.stamp) == 1_500_000_001
    assert odom.header.frame_id == "world" and odom.child_frame_id == "robot1/base_link"
    assert np.array_equal(cv.twist_from_msg(odom.twist.twist), V)
    assert np.array_equal(cv.pose_from_msg(odom.pose.pose)[0], p)
    ps = cv.pose_stamped_msg(7, "world", p, q)
    assert ps.header.frame_id == "world" and cv.ns_from_time(ps.header.stamp) == 7
    tf = cv.transform_stamped_msg(7, "world", "a/base_link", p, q)
    assert (tf.header.frame_id, tf.child_frame_id) == ("world", "a/base_link")
    ws = cv.wrench_stamped_msg(9, "a/base_link", V)
    assert np.array_equal(cv.wrench_from_msg(ws.wrench), V) and ws.header.frame_id == "a/base_link"


def test_rpy_quaternion_round_trip_and_ros_convention():
    # R = Rz(yaw) Ry(pitch) Rx(roll), quaternion [x, y, z, w]
    assert np.allclose(cv.quaternion_from_rpy([0, 0, math.pi / 2]),
                       [0, 0, math.sqrt(0.5), math.sqrt(0.5)])
    assert np.allclose(cv.quaternion_from_rpy([math.pi / 2, 0, 0]),
                       [math.sqrt(0.5), 0, 0, math.sqrt(0.5)])
    for _ in range(20):
        rpy = rng.uniform([-3, -1.5, -3], [3, 1.5, 3])
        q = cv.quaternion_from_rpy(rpy)
        assert np.isclose(np.linalg.norm(q), 1.0)
        assert np.allclose(cv.rpy_from_quaternion(q), rpy, atol=1e-12)
        r, p, y = rpy
        Rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
        Ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
        Rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
        assert np.allclose(cv.rotation_matrix(q), Rz @ Ry @ Rx, atol=1e-12)


def test_rotation_matrix_normalises_and_rejects_zero():
    q = random_unit_quaternion()
    assert np.allclose(cv.rotation_matrix(3.0 * q), cv.rotation_matrix(q))
    with pytest.raises(ValueError):
        cv.rotation_matrix([0, 0, 0, 0])


def test_rotate_wrench_round_trip():
    R = cv.rotation_matrix(random_unit_quaternion())
    W = rng.normal(size=6)
    W_rot = cv.rotate_wrench(R, W)
    assert np.allclose(W_rot[:3], R @ W[:3]) and np.allclose(W_rot[3:], R @ W[3:])
    assert np.allclose(cv.rotate_wrench(R.T, W_rot), W, atol=1e-14)


@pytest.mark.parametrize(
    "namespace, frame, expected",
    [
        ("/robot1", "base_link", "robot1/base_link"),
        ("robot1", "base_link", "robot1/base_link"),
        ("/robot1/", "base_link", "robot1/base_link"),
        ("/", "base_link", "base_link"),
        ("", "base_link", "base_link"),
        ("/fleet/robot2", "base_link", "fleet/robot2/base_link"),
        ("/robot1", "/odom", "odom"),
    ],
)
def test_frame_prefixing(namespace, frame, expected):
    assert cv.prefixed_frame(namespace, frame) == expected


def test_frame_prefix_rejects_empty_frame():
    assert cv.frame_prefix("/a/b") == "a/b/"
    with pytest.raises(ValueError):
        cv.prefixed_frame("/robot1", "")
    with pytest.raises(ValueError):
        cv.prefixed_frame("/robot1", "/")


def test_diagnostic_key_values_round_trip():
    from diagnostic_msgs.msg import DiagnosticStatus

    x = 0.1 + 0.2  # needs all 17 digits
    values = {"energy": x, "steps": 12, "paused": True, "group": "se3", "small": np.float64(-1.5e-300)}
    status = DiagnosticStatus(values=cv.key_values(values))
    back = cv.values_from_status(status)
    assert back["energy"] == x
    assert back["steps"] == 12.0
    assert back["paused"] is True
    assert back["group"] == "se3"
    assert back["small"] == -1.5e-300


def test_all_finite():
    assert cv.all_finite([1.0, 2.0])
    assert not cv.all_finite([1.0, math.nan])
    assert not cv.all_finite([math.inf])
