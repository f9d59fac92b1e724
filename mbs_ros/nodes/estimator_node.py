"""Estimator node: the base state of a robot from its sensors (IMU, DVL, depth, compass) with the invariant EKF
of :mod:`mbs_ros.estimation` (Barrau & Bonnabel 2017, on SE₂(3); the underwater sensor set of Potokar et al.
2021), and its joint states from the encoders; published as ``estimate/odom`` and ``estimate/joint_states`` for
a controller with ``state_source: estimate``.

It reads the same sensors file as the dynamics node (mounts, rates, delays, stamp modes and noise densities: the
filter's noise), subscribes the sensor topics dynamics_node publishes (``sensors/<name>``: sensor_msgs/Imu, the
DVL's geometry_msgs/TwistWithCovarianceStamped and its beams' sensor_msgs/Range on ``sensors/<name>/beams``,
sensor_msgs/FluidPressure, sensor_msgs/MagneticField, sensor_msgs/JointState) and publishes an estimate on a
time grid; in lockstep the grid is the control period and each estimate waits for every reading due by its stamp,
so the run is deterministic and the controller's answers carry the dynamics node's state stamps. The schedule and
the settings are ROS-free (:mod:`mbs_ros.cores.estimator_settings`); parameters, topics and the timing rule:
docs/estimator_node.md.

Run: ``ros2 run mbs_ros estimator_node --ros-args -r __ns:=/rov -p model_file:=config/robots/bluerov2_heavy_alpha5.yaml
-p sensors:=config/sensors/bluerov2_heavy_alpha5.yaml -p imu:=imu -p dvl:=dvl -p depth:=depth -p compass:=compass``
or, without a ROS install, ``python -m mbs_ros.nodes.estimator_node`` with the same arguments.
"""
from __future__ import annotations

import sys
import time
from typing import Dict, List

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import FluidPressure, Imu, JointState, MagneticField, Range

from mbs_ros.nodes import conversions as cv
from mbs_ros.cores.controller_state import estimate_pose
from mbs_ros.cores.estimator import (MAX_ABS, beam_index, beam_payload, check_stamp,  # noqa: F401
                                     compass_payload, depth_payload, dvl_payload, encoders_payload, feed,
                                     imu_payload)
from mbs_ros.cores.estimator_settings import (DEFAULTS, MAX_WORK_PER_CALL, Fusion, Output, ParameterError, Rejected,
                                              build_setup, settings_from_values)
from mbs_ros.cores.parameters.estimator import PARAMETERS
from mbs_ros.cores.ratelimit import RateLimitedLog
from mbs_ros.nodes.logger import fast_get_logger
from mbs_ros.nodes.runtime import declare_model_parameters, run_node, settings_executor, unknown_overrides

__all__ = ["EstimatorNode", "main", "SENSOR_QUEUE", "ESTIMATE_QOS_DEPTH", "RESEND_S", "MAX_ABS"]

WARN_THROTTLE_S = 2.0
SENSOR_QUEUE = 400  # RELIABLE, KEEP_LAST: every sample of a lockstep period (the dynamics node's queues hold >= 100)
#: History depth of estimate/odom and estimate/joint_states (reliable, KEEP_LAST), as the dynamics node's state topics
#: (dynamics_publishing.STATE_QOS_DEPTH): a reliable reader that lost a datagram (a recorder starved on a loaded
#: machine) asks for it again only at the writer's next heartbeat, seconds later, and gets it only while it is among
#: the writer's last samples; with 10, an estimate the recorder lost was gone for good (a recording without the
#: estimate of a state the controller answered). 1000 is 10 s of lockstep at 100 Hz; KEEP_LAST never blocks long.
ESTIMATE_QOS_DEPTH = 1000
RESEND_S = 0.25  # lockstep: the newest estimate again after this long (wall) without a new one (late joiners)
DIAGNOSTICS_PERIOD_S = 1.0
CONTINUE_S = 0.01  # a drain that stopped at its work budget (Fusion.pending) goes on this long after


def _stamp_ns(stamp) -> int:
    if stamp.sec < 0 or not 0 <= stamp.nanosec < 1_000_000_000:
        raise Rejected(f"header.stamp ({stamp.sec} s, {stamp.nanosec} ns) is not a valid time")
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _xyz(m) -> list:
    return [m.x, m.y, m.z]


class EstimatorNode(Node):
    """Construct, then call :meth:`configure` (raises ParameterError). See docs/estimator_node.md."""

    get_logger = fast_get_logger  # log lines at rcutils' cost (mbs_ros.nodes.logger)

    def __init__(self, node_name: str = "estimator_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._last: List[tuple] = []  # the newest estimate's messages (resent in lockstep)
        self._last_publish_wall = 0.0

    def configure(self) -> None:
        """Declare and check the parameters, build the model, the sensors and the filter, create the topics."""
        values, source = declare_model_parameters(self, PARAMETERS, lambda name: getattr(DEFAULTS, name))
        unknown = unknown_overrides(self, PARAMETERS)
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))
        s = settings_from_values(values, source)
        setup = build_setup(s, source)
        self.settings, self.setup = s, setup
        self.model = setup.model
        self.joint_names = tuple(self.model.joint_names)
        ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(ns, s.base_frame)
        self._logs = RateLimitedLog(self.get_logger(), WARN_THROTTLE_S)
        self.rejected: Dict[str, int] = {}
        sim_time = bool(self.get_parameter("use_sim_time").value)
        # on simulation time the sensors' grids start at 0 (the dynamics node's first step); on the wall clock at
        # the first IMU (or encoder) sample
        self.fusion = Fusion(setup, origin_ns=None)
        self.fusion.work_budget = MAX_WORK_PER_CALL  # bounded work per callback; the rest in _continue
        qos = QoSProfile(depth=ESTIMATE_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_odom = self.create_publisher(Odometry, "estimate/odom", qos) if setup.floating else None
        self.pub_joints = (self.create_publisher(JointState, "estimate/joint_states", qos)
                           if self.joint_names and "encoders" in setup.roles else None)
        self.pub_diag = self.create_publisher(DiagnosticArray, "~/diagnostics",
                                              QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self._create_subscriptions()
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(DIAGNOSTICS_PERIOD_S, lambda: self._guard(self._publish_diagnostics), clock=steady)
        self.create_timer(CONTINUE_S, lambda: self._guard(self._continue), clock=steady)
        if s.lockstep:
            self.create_timer(RESEND_S / 2, lambda: self._guard(self._resend), clock=steady)
        if sim_time:
            self._publish([self.fusion.start(0)])
        roles = ", ".join(f"{r} {spec.name} ({spec.rate:g} Hz)" for r, spec in setup.roles.items())
        grid = (f"lockstep on the control period 1/{s.control_rate:g} s" if s.lockstep
                else f"{s.publish_rate:g} Hz")
        self.get_logger().info(f"estimating from {setup.path}: {roles}; estimates at {grid}")

    def _create_subscriptions(self) -> None:
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=SENSOR_QUEUE, reliability=ReliabilityPolicy.RELIABLE)
        handlers = {"imu": (Imu, self._on_imu), "dvl": (TwistWithCovarianceStamped, self._on_dvl),
                    "depth": (FluidPressure, self._on_pressure), "compass": (MagneticField, self._on_compass),
                    "encoders": (JointState, self._on_encoders)}
        self.topics = {}
        for role, spec in self.setup.roles.items():
            kind, handler = handlers[role]
            topic = spec.topic or f"sensors/{spec.name}"
            self.topics[role] = topic
            self.create_subscription(kind, topic, self._handler(role, handler), qos)
            if role == "dvl":
                self.create_subscription(Range, f"{topic}/beams", self._handler("dvl", self._on_beam), qos)

    # ------------------------------------------------------------------------------- robustness

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - the estimator keeps running
            if self.context.ok():
                self._logs.error(f"error_{getattr(fn, '__name__', 'callback')}",
                                 f"{getattr(fn, '__name__', 'callback')} failed: {type(e).__name__}: {e}")
        return None

    def _handler(self, role: str, fn):
        def handle(msg):
            try:
                fn(msg)
            except Rejected as e:
                self.rejected[role] = self.rejected.get(role, 0) + 1
                self._logs.warning(f"rejected_{role}", f"{self.topics[role]}: message rejected: {e}")
            except Exception as e:  # noqa: BLE001
                if self.context.ok():
                    self._logs.error(f"error_{role}", f"{self.topics[role]}: {type(e).__name__}: {e}")
        return handle

    # ------------------------------------------------------------------------------------ inputs

    def _add(self, role: str, stamp, payload) -> None:
        t = check_stamp(_stamp_ns(stamp), self.get_clock().now().nanoseconds)
        self._publish(feed(self.fusion, role, t, payload))

    def _continue(self) -> None:
        """The estimates a call left due when it reached its work budget (Fusion.pending)."""
        if self.fusion.pending:
            self._publish(self.fusion.drain())

    def _on_imu(self, msg: Imu) -> None:
        self._add("imu", msg.header.stamp, imu_payload(_xyz(msg.angular_velocity), _xyz(msg.linear_acceleration)))

    def _on_dvl(self, msg: TwistWithCovarianceStamped) -> None:
        self._add("dvl", msg.header.stamp, dvl_payload(_xyz(msg.twist.twist.linear), msg.twist.covariance))

    def _on_beam(self, msg: Range) -> None:
        self._add("dvl", msg.header.stamp, beam_payload(beam_index(msg.header.frame_id), msg.range, msg.min_range,
                                                        msg.max_range))

    def _on_pressure(self, msg: FluidPressure) -> None:
        self._add("depth", msg.header.stamp, depth_payload(msg.fluid_pressure, msg.variance,
                                                           self.setup.sensor_set.environment))

    def _on_compass(self, msg: MagneticField) -> None:
        self._add("compass", msg.header.stamp, compass_payload(_xyz(msg.magnetic_field),
                                                               msg.magnetic_field_covariance))

    def _on_encoders(self, msg: JointState) -> None:
        self._add("encoders", msg.header.stamp, encoders_payload(self.joint_names, msg.name, msg.position,
                                                                 msg.velocity))

    # ----------------------------------------------------------------------------------- outputs

    def _publish(self, outputs: List[Output]) -> None:
        for out in outputs:
            msgs = []
            if self.pub_odom is not None and out.p is not None:
                m = cv.odometry_msg(out.stamp_ns, self.world_frame, self.base_frame, *estimate_pose(out))
                m.pose.covariance = [float(x) for x in out.pose_cov.reshape(-1)]
                m.twist.covariance = [float(x) for x in out.twist_cov.reshape(-1)]
                msgs.append((self.pub_odom, m))
            if self.pub_joints is not None and out.joint_positions is not None:
                msgs.append((self.pub_joints, cv.joint_state_msg(out.stamp_ns, self.joint_names,
                                                                 out.joint_positions, out.joint_velocities)))
            # the joints first: the controller pairs the two by stamp and answers on the second
            for pub, m in reversed(msgs):
                pub.publish(m)
            self._last = msgs
            self._last_publish_wall = time.monotonic()

    def _resend(self) -> None:
        """Lockstep: the newest estimate again when none followed for RESEND_S (a controller that started late,
        or whose command was lost, answers it again)."""
        if self._last and time.monotonic() - self._last_publish_wall >= RESEND_S:
            for pub, m in reversed(self._last):
                pub.publish(m)
            self._last_publish_wall = time.monotonic()

    def _publish_diagnostics(self) -> None:
        counts = dict(self.fusion.counts)
        counts.update({f"rejected_{r}": n for r, n in self.rejected.items()})
        late = sum(v for k, v in counts.items() if k.startswith("late_"))
        failed = sum(v for k, v in counts.items() if k.startswith("failed_"))
        bad = late or failed or sum(self.rejected.values()) or counts["dropped"]
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if bad else DiagnosticStatus.OK,
            name=f"{self.get_fully_qualified_name()}: estimator",
            message=f"{counts['estimates']} estimates, {sum(self.rejected.values())} messages rejected, "
                    f"{late} late measurements dropped, {failed} refused by the filter",
            hardware_id=self.base_frame, values=cv.key_values(counts))
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(msg)


def main(args=None) -> int:
    return run_node(EstimatorNode, args, make_executor=settings_executor, errors=(ParameterError,))


if __name__ == "__main__":
    sys.exit(main())
