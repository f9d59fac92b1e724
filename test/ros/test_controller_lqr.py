"""The controller node with ``law: lqr`` over ROS: real dynamics_node and controller_node processes on the SE(2)
surface vessel with a 2-link arm (config/asv_2link.yaml), a goal (a base pose and joint positions, one point each,
a step at its start) published on the reference topics; the node regulates the vessel to it. Convergence is
asserted on simulated time (the states' stamps) with generous wall-clock deadlines; and bad lqr parameters make
the node exit with the reason.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import (  # noqa: E402
    JointTrajectory,
    JointTrajectoryPoint,
    MultiDOFJointTrajectory,
    MultiDOFJointTrajectoryPoint,
)
from geometry_msgs.msg import Transform, Twist  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.cores.rotations import quaternion_from_rpy  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "config" / "asv_2link.yaml"
CONTROLLER = "mbs_ros.nodes.controller_node"
DYNAMICS = "mbs_ros.nodes.dynamics_node"
TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
EXIT_TIMEOUT = 60.0
HORIZON = 6.0  # s of simulation time after the goal: the default weights give a double pole near -3/s per DOF
# the goal relative to the first state: base [dx, dy] [m] and yaw [rad], joints [rad]
GOAL_BASE, GOAL_YAW, GOAL_JOINTS = np.array([0.5, -0.3, 0.0]), 0.4, np.array([0.3, -0.3])
# m, rad: a double pole at -3/s leaves (1 + 3t) e^{-3t} ≈ 3e-7 of the 0.58 m step after 6 s (3e-6 measured: the
# coupled vessel and arm, sampling); half the gain leaves 1.6e-4
TOLERANCE = 5e-5
REFERENCE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
BAD = {"lqr_r_wrong_length": (dict(law="lqr", lqr_r=[1.0, 2.0]), "lqr_r as a per-DOF vector needs 5 entries")}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("lqr_logs")
    procs = {
        "dynamics": NodeProcess(DYNAMICS, name="dynamics_node", namespace="lqr", params_file=PARAMS,
                                log_file=logs / "dynamics.log"),
        "controller": NodeProcess(CONTROLLER, name="controller_node", namespace="lqr", params_file=PARAMS,
                                  parameters=dict(law="lqr"), log_file=logs / "controller.log"),
    }
    for key, (params, _reason) in BAD.items():
        procs[key] = NodeProcess(CONTROLLER, name="controller_node", namespace=key, params_file=PARAMS,
                                 parameters=params, log_file=logs / f"{key}.log")
    with running(procs):
        yield procs


def test_bad_lqr_parameters_exit_with_the_reason(nodes):
    for key, (_params, reason) in BAD.items():
        proc = nodes[key]
        rc = proc.wait(timeout=EXIT_TIMEOUT)
        assert rc is not None and rc != 0, f"{key}: exit code {rc}:\n{proc.log_text()}"
        assert reason in proc.log_text(), f"{key}: {reason!r} not in log:\n{proc.log_text()}"


def _duration(seconds):
    from builtin_interfaces.msg import Duration

    sec = int(math.floor(seconds))
    return Duration(sec=sec, nanosec=int(round((seconds - sec) * 1e9)))


def _yaw(quat):
    x, y, z, w = quat
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def test_lqr_regulates_the_vessel_to_a_goal(nodes):
    dyn, ctl = nodes["dynamics"], nodes["controller"]
    alive = [dyn, ctl]
    for key in BAD:  # 2 cores: let the failing node exit first
        nodes[key].wait(timeout=EXIT_TIMEOUT)
    with Probe("test_controller_lqr_probe", TIMEOUT) as probe:
        odom = Recorder(probe, Odometry, "/lqr/odom", depth=5000)
        joints = Recorder(probe, JointState, "/lqr/joint_states", depth=5000)
        base_pub = probe.node.create_publisher(MultiDOFJointTrajectory, "/lqr/base_reference", REFERENCE_QOS)
        joint_pub = probe.node.create_publisher(JointTrajectory, "/lqr/joint_reference", REFERENCE_QOS)
        probe.spin_until(lambda: base_pub.get_subscription_count() > 0 and joint_pub.get_subscription_count() > 0
                         and len(odom) > 0 and len(joints) > 0, timeout=EXIT_TIMEOUT,
                         what="both nodes running and connected", alive=alive)
        assert ctl.wait_for_log("first state", timeout=TIMEOUT), ctl.log_tail()
        assert "lqr on " in ctl.log_text(), ctl.log_tail()  # the configuration line names the law

        last = max(odom.messages, key=lambda m: cv.ns_from_time(m.header.stamp))
        T0 = cv.ns_from_time(last.header.stamp)
        p0, q0 = cv.pose_from_msg(last.pose.pose)
        j0 = np.array(max(joints.messages, key=lambda m: cv.ns_from_time(m.header.stamp)).position)
        goal_p, goal_yaw, goal_j = p0 + GOAL_BASE, _yaw(q0) + GOAL_YAW, j0 + GOAL_JOINTS
        base_msg = MultiDOFJointTrajectory(joint_names=["lqr/base_link"])
        base_msg.header.stamp = cv.time_from_ns(T0)
        quat = quaternion_from_rpy([0.0, 0.0, goal_yaw])
        base_msg.points.append(MultiDOFJointTrajectoryPoint(
            transforms=[Transform(translation=cv.vector3_msg(goal_p), rotation=cv.quaternion_msg(quat))],
            velocities=[Twist()], time_from_start=_duration(0.0)))
        joint_msg = JointTrajectory(joint_names=["shoulder_joint", "elbow_joint"])
        joint_msg.header.stamp = cv.time_from_ns(T0)
        joint_msg.points.append(JointTrajectoryPoint(positions=[float(x) for x in goal_j],
                                                     time_from_start=_duration(0.0)))
        base_pub.publish(base_msg)
        joint_pub.publish(joint_msg)
        assert ctl.wait_for_log("base_reference: 1 points", timeout=TIMEOUT), ctl.log_tail()
        assert ctl.wait_for_log("joint_reference: 1 points", timeout=TIMEOUT), ctl.log_tail()
        t_end = T0 + int(HORIZON * 1e9)
        probe.spin_until(lambda: any(cv.ns_from_time(m.header.stamp) >= t_end for m in odom.messages)
                         and any(cv.ns_from_time(m.header.stamp) >= t_end for m in joints.messages),
                         timeout=HORIZON * 6 + TIMEOUT, what=f"{HORIZON} s of simulation time", alive=alive)

    def error_at(stamp_min):
        o = min((m for m in odom.messages if cv.ns_from_time(m.header.stamp) >= stamp_min),
                key=lambda m: cv.ns_from_time(m.header.stamp))
        j = min((m for m in joints.messages if cv.ns_from_time(m.header.stamp) >= stamp_min),
                key=lambda m: cv.ns_from_time(m.header.stamp))
        p, q = cv.pose_from_msg(o.pose.pose)
        dyaw = (_yaw(q) - goal_yaw + math.pi) % (2 * math.pi) - math.pi
        return np.concatenate([p[:2] - goal_p[:2], [dyaw], np.array(j.position) - goal_j])

    early, final = error_at(T0 + int(0.2e9)), error_at(t_end)
    report = f"error after 0.2 s {np.array2string(early, precision=4)}, after {HORIZON} s " \
             f"{np.array2string(final, precision=6)}"
    print(report)
    assert np.abs(early).max() > 0.1, f"the goal was no step. {report}"
    assert np.abs(final).max() < TOLERANCE, report
