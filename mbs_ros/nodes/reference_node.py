"""Reference node: sends a scenario's base and joint references to ``controller_node``, once, at the right time.

``controller_node`` rejects a reference that arrives before its first state, so this node publishes (reliable,
transient local) once the controller listens, a state has arrived and the controller commands (or at
``start_time``), then logs ``reference published`` and idles. Parameters: the table in
:mod:`mbs_ros.cores.parameters.reference`; topics, stamps and start time: docs/reference_node.md.
"""

from __future__ import annotations

import sys
import time
from typing import Dict, List, Optional, Tuple

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Transform, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import (
    JointTrajectory,
    JointTrajectoryPoint,
    MultiDOFJointTrajectory,
    MultiDOFJointTrajectoryPoint,
)

from mbs_ros.nodes import conversions as cv
from mbs_ros.cores.parameters.reference import PARAMETERS
from mbs_ros.cores.reference import (STAMP_MODES, ReferenceError, Waypoints,  # noqa: F401 - importable here
                                          reference_setup, trajectories, waypoints_from_file,
                                          waypoints_from_values)
from mbs_ros.nodes.logger import fast_get_logger
from mbs_ros.nodes.runtime import descriptor, run_node

__all__ = ["ReferenceNode", "ReferenceError", "Waypoints", "waypoints_from_values", "waypoints_from_file", "main"]

CHECK_PERIOD_S = 0.05  # how often the readiness is checked (wall clock)
_KEEP_STAMPS = 20



class ReferenceNode(Node):
    """Sends the references (docs/reference_node.md). Construct, then :meth:`configure` (raises ReferenceError)."""

    get_logger = fast_get_logger  # log lines at rcutils' cost (mbs_ros.nodes.logger)

    def __init__(self, node_name: str = "reference_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self.published = False

    def _declare(self, name: str):
        default = PARAMETERS[name].default
        d = descriptor(PARAMETERS[name], default)
        try:
            return self.declare_parameter(name, default, d).value
        except Exception as e:  # noqa: BLE001 - rclpy's exceptions differ between distros
            raise ReferenceError(f"{name}: {e}") from None

    def configure(self) -> None:
        setup = reference_setup({name: self._declare(name) for name in PARAMETERS}, PARAMETERS)
        wps = self.wps = setup.wps
        self.stamp_mode = setup.stamp_mode
        self.start_time_ns = setup.start_time_ns
        self.min_subscribers = setup.min_subscribers
        self.command_timeout = setup.command_timeout
        self.world_frame = setup.world_frame

        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.pub_base = (self.create_publisher(MultiDOFJointTrajectory, "base_reference", latched)
                         if wps.has_base else None)
        self.pub_joints = self.create_publisher(JointTrajectory, "joint_reference", latched) if wps.has_joints else None
        self._odom: Dict[int, tuple] = {}
        self._joints: Dict[int, Dict[str, float]] = {}
        self._joint_order: List[str] = []
        self._commanded = False
        self._ready_since: Optional[float] = None
        qos = QoSProfile(depth=4)
        self._subs = []
        if wps.has_base:
            self._subs.append(self.create_subscription(Odometry, "odom", self._on_odom, qos))
        if wps.has_joints:
            self._subs.append(self.create_subscription(JointState, "joint_states", self._on_joint_states, qos))
        for msg_type, topic in ((WrenchStamped, "cmd_wrench"), (Float64MultiArray, "cmd_joint_effort"),
                                (JointState, "joint_command"), (JointState, "thruster_command"),
                                (Float64MultiArray, "cmd_thrust")):
            self._subs.append(self.create_subscription(msg_type, topic, self._on_command, qos))
        # a wall-clock (steady) timer: it runs before the first /clock, and whatever use_sim_time says
        self.timer = self.create_timer(CHECK_PERIOD_S, self._on_timer, clock=Clock(clock_type=ClockType.STEADY_TIME))
        what = []
        if wps.has_base:
            what.append(f"base_reference ({len(wps.base_times)} waypoints over {wps.base_times[-1]:g} s)")
        if wps.has_joints:
            names = ", ".join(wps.joint_names) if wps.joint_names else "the joints of joint_states"
            what.append(f"joint_reference ({len(wps.joint_times)} waypoints over {wps.joint_times[-1]:g} s: "
                        f"{names})")
        self.get_logger().info(
            f"waiting to publish {' and '.join(what)}: for {self.min_subscribers} subscriber(s), a state"
            + (f" (start_time: t = {self.start_time_ns * 1e-9:.6f} s)" if self.start_time_ns is not None
               else f" and the controller's first command (stamp: {self.stamp_mode})"))

    # ------------------------------------------------------------------------------------ inputs

    def _on_odom(self, msg: Odometry) -> None:
        self._odom[cv.ns_from_time(msg.header.stamp)] = cv.pose_from_msg(msg.pose.pose)
        while len(self._odom) > _KEEP_STAMPS:
            del self._odom[min(self._odom)]

    def _on_joint_states(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            return
        if not self._joint_order:
            self._joint_order = list(msg.name)
        self._joints[cv.ns_from_time(msg.header.stamp)] = dict(zip(msg.name, msg.position))
        while len(self._joints) > _KEEP_STAMPS:
            del self._joints[min(self._joints)]

    def _on_command(self, _msg) -> None:
        self._commanded = True

    def _state(self) -> Optional[Tuple[int, Optional[tuple], Optional[Dict[str, float]]]]:
        """(stamp, base pose, joint positions) of the newest complete state, or None."""
        if self.wps.has_base and self.wps.has_joints:
            stamps = set(self._odom) & set(self._joints)
        else:
            stamps = set(self._odom if self.wps.has_base else self._joints)
        if not stamps:
            return None
        t = max(stamps)
        return t, self._odom.get(t), self._joints.get(t)

    # ----------------------------------------------------------------------------------- publish

    def _on_timer(self) -> None:
        if self.published:
            return
        pubs = [p for p in (self.pub_base, self.pub_joints) if p is not None]
        if any(p.get_subscription_count() < self.min_subscribers for p in pubs):
            return
        state = self._state()
        if state is None:
            return
        now = time.monotonic()
        if self._ready_since is None:
            self._ready_since = now
        if not self._commanded and self.start_time_ns is None:
            if now - self._ready_since < self.command_timeout:
                return
            self.get_logger().warning(
                f"no command from the controller seen on cmd_wrench, cmd_joint_effort or joint_command within "
                f"{self.command_timeout:g} s: publishing anyway (a controller without a state rejects it)")
        try:
            msgs = self._messages(*state)
        except ReferenceError as e:
            self.get_logger().error(f"cannot publish the reference: {e}")
            raise
        for pub, msg in zip((self.pub_base, self.pub_joints), msgs):
            if pub is not None and msg is not None:
                pub.publish(msg)
        self.published = True
        for sub in self._subs:  # the state is no longer needed: free the CPU
            self.destroy_subscription(sub)
        self._subs = []
        t = state[0] * 1e-9
        self.get_logger().info(
            "reference published: "
            + ", ".join(f"{topic} ({len(m.points)} points)" for topic, m in zip(("base_reference", "joint_reference"),
                                                                               msgs) if m is not None)
            + (f", starting at t = {self.start_time_ns * 1e-9:.6f} s (start_time; newest state t = {t:.6f} s)"
               if self.start_time_ns is not None else
               f", starting at t = {t:.6f} s" if self.stamp_mode == "state" else
               f", stamp 0 (the controller starts it at its newest state, t ~ {t:.6f} s)"))

    def _messages(self, stamp_ns: int, pose, joints):
        """The messages of :func:`mbs_ros.cores.reference.trajectories` against the newest state."""
        traj = trajectories(self.wps, self.stamp_mode, self.start_time_ns, stamp_ns, pose, joints,
                            self._joint_order)
        base_msg = joint_msg = None
        if traj.base is not None:
            base_msg = MultiDOFJointTrajectory()
            base_msg.header.stamp = cv.time_from_ns(traj.header_ns)
            base_msg.header.frame_id = self.world_frame
            for (sec, nanosec), p, quat in traj.base:
                base_msg.points.append(MultiDOFJointTrajectoryPoint(
                    transforms=[Transform(translation=cv.vector3_msg(p), rotation=cv.quaternion_msg(quat))],
                    time_from_start=Duration(sec=sec, nanosec=nanosec)))
        if traj.joints is not None:
            joint_msg = JointTrajectory()
            joint_msg.header.stamp = cv.time_from_ns(traj.header_ns)
            joint_msg.joint_names = list(traj.joint_names)
            for (sec, nanosec), q in traj.joints:
                joint_msg.points.append(JointTrajectoryPoint(positions=q,
                                                             time_from_start=Duration(sec=sec, nanosec=nanosec)))
        return base_msg, joint_msg


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    # our own SIGINT/SIGTERM handlers (a flag the spin loop checks), as the dynamics and controller nodes: with
    # rclpy's, an idle reference node once outlived SIGINT and SIGTERM (13 s) and needed SIGKILL in a CI run
    return run_node(ReferenceNode, args, errors=(ReferenceError,))


if __name__ == "__main__":
    sys.exit(main())
