"""The controller node's inputs (:class:`Inputs`, a part of :class:`~mbs_ros.nodes.controller_node.ControllerNode`):
the state subscriptions (odom, joint_states: checked and turned into plain arrays by
:mod:`mbs_ros.controllers.reference_input`, paired by stamp and timed by :mod:`mbs_ros.controllers.timebase`) and
the reference subscriptions (joint_reference, base_reference, and the FollowJointTrajectory goals: decoded,
checked and interpolated on a worker thread, in arrival order, so that a long reference never holds the control
loop up). Bounds and time base: docs/controller_node.md."""
from __future__ import annotations

import sys
import threading
from collections import deque
from functools import partial
from typing import Optional, Tuple

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, MultiDOFJointTrajectory

from mbs_ros.controllers import Reference
from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers import timebase as tb
from mbs_ros.controllers.reference_input import MAX_POINTS, Rejected
from mbs_ros.controllers.timebase import JUMP_CONFIRMATIONS
from mbs_ros.dynamics.model import source as ms
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.runtime import subscribe_fields
from mbs_ros.cores import cdr
from mbs_ros.cores.controller import evaluate, reference_from_points
from mbs_ros.cores.controller_state import commit_state
from mbs_ros.cores.parameters.controller import STATE_TOPICS

__all__ = ["Inputs", "REFERENCE_QUEUE", "REFERENCE_TOPICS", "stamp_ns", "point_times"]

REFERENCE_QUEUE = 32  # references waiting for the worker thread; beyond, the oldest waiting one is dropped
REFERENCE_TOPICS = ("joint_reference", "base_reference")


def stamp_ns(stamp, what: str) -> int:
    """A ``builtin_interfaces/Time`` in ns; Rejected outside the bounds (sec ≥ 0, nanosec < 10⁹)."""
    return ri.stamp_ns(stamp.sec, stamp.nanosec, what)


def point_times(points) -> np.ndarray:
    """The ``time_from_start`` of trajectory points in s; Rejected unless finite, bounded and increasing."""
    return ri.point_times([p.time_from_start.sec for p in points], [p.time_from_start.nanosec for p in points])


class Inputs:
    """The state and reference inputs of ``node`` for ``model`` with ``settings``: the subscriptions (odom and
    base_reference for a floating base, joint_states and joint_reference for joints; with ``state_source:
    estimate`` the state topics are estimate/odom and estimate/joint_states) and the reference worker's queue.
    ``joint_input``/``base_input`` check references, ``pairing`` and ``timebase`` pair and time the states;
    ``lock`` guards the worker's reads of (state, offset, reference) and its installs, ``stop`` ends the worker.
    The node's ``count``, ``reject``, ``warn`` and ``guard``; ``publish_zero(stamp)`` a zero command;
    ``resend(t)`` sends the command for the state at ``t`` again (lockstep; False: there is none);
    ``forget_command()`` after a time-base change; ``on_state(t, q, v)`` a state accepted; ``prepare_goal(goal)``
    (worker thread) a FollowJointTrajectory goal checked, or the exception why not."""

    def __init__(self, node, model, settings, *, joint_input, base_input, pairing, timebase, lock, stop, count,
                 reject, warn, guard, publish_zero, resend, forget_command, on_state, prepare_goal):
        self.node, self.model, self.settings = node, model, settings
        self.joint_names = tuple(model.joint_names)
        self.nj, self.floating = len(self.joint_names), model.group is not None
        self.nq_base, self.nv_base = ms.base_sizes(model)
        self.joint_input, self.base_input, self.pairing, self.timebase = joint_input, base_input, pairing, timebase
        self._lock, self._stop, self._worker = lock, stop, None
        self._count, self._reject, self._warn, self._guard = count, reject, warn, guard
        self._publish_zero, self._resend, self._forget_command = publish_zero, resend, forget_command
        self._on_state, self._prepare_goal = on_state, prepare_goal
        self.state: Optional[Tuple[int, np.ndarray, np.ndarray]] = None  # (stamp ns, q, v)
        self.state_arrival_ns = 0  # node clock (wall, or /clock with use_sim_time) when the state arrived
        # References: (start in reference time, Reference); reference time = stamp - timebase.offset
        self.base_ref: Optional[Tuple[int, Reference]] = None
        self.joint_ref: Optional[Tuple[int, Reference]] = None
        self._queue: deque = deque()  # (topic, serialized message) for the worker, in arrival order
        self._queue_cv = threading.Condition()
        self._max_bytes = {
            "joint_reference": MAX_POINTS * (32 * max(self.nj, 1) + 128) + (1 << 20),
            "base_reference": MAX_POINTS * (32 * 6 + 128) + (1 << 20),
        }
        state_qos = QoSProfile(depth=4)  # a controller that lags wants the newest state, not a backlog
        # as reference_node publishes: a (re)started controller still gets the reference sent before it
        ref_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        odom_topic, joints_topic = STATE_TOPICS[self.settings.state_source]
        # the state raw: its fields read from the bytes (cdr.odometry, cdr.joint_state_motion; what they do not
        # read goes through rclpy's deserialisation to the message handlers), no message objects built
        raw = partial(subscribe_fields, node, state_qos)
        if self.floating:
            raw(lambda fn, _topic: self._guard(fn, "odom"), Odometry, odom_topic, cdr.odometry, self._on_odom_fields,
                self._on_odom)
            node.create_subscription(MultiDOFJointTrajectory, "base_reference",
                                     self._guard(lambda raw: self.enqueue("base_reference", raw), "base_reference"),
                                     ref_qos, raw=True)
        if self.nj:
            raw(lambda fn, _topic: self._guard(fn, "joint_states"), JointState, joints_topic, cdr.joint_state_motion,
                self._on_joint_state_fields, self._on_joint_states)
            node.create_subscription(JointTrajectory, "joint_reference",
                                     self._guard(lambda raw: self.enqueue("joint_reference", raw), "joint_reference"),
                                     ref_qos, raw=True)

    def start_worker(self) -> None:
        # the reference worker shares the interpreter with the control loop: switch threads often
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
        self._worker = threading.Thread(target=self._reference_worker, name="reference_worker", daemon=True)
        self._worker.start()

    def stop_worker(self) -> None:
        self._stop.set()
        if self._worker is not None:
            with self._queue_cv:
                self._queue_cv.notify_all()
            self._worker.join(timeout=2.0)

    # --------------------------------------------------------------------------------- state

    def _on_odom(self, msg: Odometry) -> None:
        p, quat = cv.pose_from_msg(msg.pose.pose)
        self._odom(msg.header.stamp.sec, msg.header.stamp.nanosec, p, quat, cv.twist_from_msg(msg.twist.twist))

    def _on_odom_fields(self, sec: int, nanosec: int, _frame: str, _child: str, pose: np.ndarray,
                        twist: np.ndarray) -> None:
        self._odom(sec, nanosec, pose[:3], pose[3:], twist)

    def _odom(self, sec: int, nanosec: int, p: np.ndarray, quat: np.ndarray, twist: np.ndarray) -> None:
        self._count("received_odom")
        try:
            stamp = ri.stamp_ns(sec, nanosec, "header.stamp")
            part = ri.base_state(p, quat, twist)
        except Rejected as e:
            return self._reject("odom", str(e))
        if self.pairing.add("base", stamp, part):
            self._consider(stamp)

    def _on_joint_states(self, msg: JointState) -> None:
        self._joint_states(msg.header.stamp.sec, msg.header.stamp.nanosec, msg.name, msg.position, msg.velocity)

    def _on_joint_state_fields(self, sec: int, nanosec: int, names, position: np.ndarray,
                               velocity: np.ndarray) -> None:
        self._joint_states(sec, nanosec, names, position, velocity)

    def _joint_states(self, sec: int, nanosec: int, names, position, velocity) -> None:
        self._count("received_joint_states")
        try:
            stamp = ri.stamp_ns(sec, nanosec, "header.stamp")
            part = ri.joint_state(self.joint_names, names, position, velocity)
        except Rejected as e:
            return self._reject("joint_states", str(e))
        if self.pairing.add("joints", stamp, part):
            self._consider(stamp)

    def _state_topic(self) -> str:
        return "odom" if self.floating else "joint_states"

    def _consider(self, t: int) -> None:
        """A complete state stamped ``t``: take it, answer a repeated one, or refuse a discontinuity."""
        step = self.timebase.step(t)
        if step.kind == tb.ACCEPT:
            return self._accept(t, step.jump)
        self.pairing.drop(t)
        if step.kind == tb.REPEAT:
            # lockstep: the dynamics node sent this state again (our command may have been lost): resent
            if not self._resend(t) and self.state is not None and self.state[0] == t:
                # a dynamics node standing paused sends its state again: it is as fresh as when it came
                self.state_arrival_ns = max(self.state_arrival_ns, self.node.get_clock().now().nanoseconds)
            return
        last = self.timebase.last
        side = "before" if t < last else "after"
        self._reject(self._state_topic(),
                     f"state at t = {t * 1e-9:.9f} s is {abs(t - last) * 1e-9:.6g} s {side} the last one "
                     f"(t = {last * 1e-9:.9f} s; max_time_jump {self.settings.max_time_jump:g} s): taken as the new "
                     f"time base only after {JUMP_CONFIRMATIONS} consecutive states ({step.seen} so far)")
        if self.settings.lockstep:
            self._publish_zero(t)

    def _accept(self, t: int, jump: Optional[int]) -> None:
        try:
            q, v = ri.state_vector(self.model, self.nv_base, *self.pairing.get(t))
        except ValueError as e:
            self.pairing.drop(t)
            return self._reject(self._state_topic(), f"state: {e}")
        first = self.state is None
        last = self.timebase.last
        with self._lock:
            holds = commit_state(self.timebase, self.model, t, jump, q, first)
            if holds is not None:  # hold the start-up state until a reference arrives
                self.base_ref, self.joint_ref = holds
        if jump is not None:
            self._forget_command()
            self._count("time_base_changes")
            self.node.get_logger().warning(
                f"time base changed: the states jumped from t = {last * 1e-9:.9f} s to t = {t * 1e-9:.9f} s "
                f"({JUMP_CONFIRMATIONS} consecutive states on the new time line): references re-anchored, each "
                "continues from the point it had reached")
        self.state = (t, q, v)
        clock = self.node.get_clock()
        self.state_arrival_ns = clock.now().nanoseconds
        if getattr(clock, "ros_time_is_active", False):
            # /clock time: a state may arrive before the /clock message of its own stamp
            self.state_arrival_ns = max(self.state_arrival_ns, t)
        self.pairing.discard(None if jump is not None else t)
        if first:
            self.node.get_logger().info(f"first state at t = {t * 1e-9:.6f} s: holding it until a reference arrives")
            with self._queue_cv:
                self._queue_cv.notify_all()  # references that arrived before it
        self._on_state(t, q, v)

    def joint_positions(self, q) -> np.ndarray:
        return ms.joint_positions_from_q(self.model, q[self.nq_base:])

    # ----------------------------------------------------------------------------- references

    @staticmethod
    def _eval(ref: Tuple[int, Reference], t_ref: int):
        """The reference at reference time ``t_ref`` (ns)."""
        return evaluate(ref, t_ref)

    def enqueue(self, topic: str, raw) -> None:
        """Executor thread: hand a serialized reference (or a FollowJointTrajectory goal and the future its answer
        goes to) to the worker (newest per topic before the first state; at most REFERENCE_QUEUE waiting, the
        oldest dropped beyond)."""
        self._count(f"received_{topic}")
        with self._queue_cv:
            if self.state is None:
                kept = [item for item in self._queue if item[0] != topic]
                self._queue.clear()
                self._queue.extend(kept)
            elif len(self._queue) >= REFERENCE_QUEUE:
                dropped_topic, dropped = self._queue.popleft()
                if dropped_topic == "follow_joint_trajectory":
                    dropped[1].set_result(Rejected(f"dropped: {REFERENCE_QUEUE} references were waiting"))
                self._count("dropped_references")
                self._warn("dropped_references", f"{dropped_topic} dropped: {REFERENCE_QUEUE} references were "
                                                 "already waiting to be processed")
            self._queue.append((topic, raw))
            self._queue_cv.notify_all()

    def _reference_worker(self) -> None:
        while not self._stop.is_set():
            with self._queue_cv:
                while not self._stop.is_set() and (not self._queue or self.state is None):
                    self._queue_cv.wait(timeout=0.5)
                if self._stop.is_set():
                    return
                topic, raw = self._queue.popleft()
            if topic == "follow_joint_trajectory":  # (goal, future): the checked goal, or why not, to _on_goal
                goal, answer = raw
                try:
                    answer.set_result(self._prepare_goal(goal))
                except Exception as e:  # noqa: BLE001 - Rejected, or a bug: the goal is refused either way
                    answer.set_result(e)
                continue
            try:
                self._process_reference(topic, raw)
            except Rejected as e:
                self._reject(topic, str(e))
            except Exception as e:  # noqa: BLE001 - the worker must keep running
                if not self.node.context.ok():
                    return
                self._count("control_errors")
                self._count(f"rejected_{topic}")
                self._warn(f"error_{topic}", f"{topic} rejected: {type(e).__name__}: {e}", error=True)

    def _process_reference(self, topic: str, raw: bytes) -> None:
        """Worker thread: decode, check and install a reference; counted in ``installed_<topic>``."""
        if len(raw) > self._max_bytes[topic]:
            raise Rejected(f"{len(raw)} bytes: larger than any valid reference of at most {MAX_POINTS} points "
                           f"({self._max_bytes[topic]} bytes); not decoded")
        msg_type = JointTrajectory if topic == "joint_reference" else MultiDOFJointTrajectory
        msg = deserialize_message(raw, msg_type)
        with self._lock:
            state, offset = self.state, self.timebase.offset
            current = self.joint_ref if topic == "joint_reference" else self.base_ref
        start_ns, start, ref = self.build_reference(topic, msg, state, offset, current)
        with self._lock:
            if topic == "joint_reference":
                self.joint_ref = (start, ref)
            else:
                self.base_ref = (start, ref)
        self._count(f"installed_{topic}")
        self.node.get_logger().info(f"{topic}: {len(msg.points)} points over {ref.end_time:g} s from "
                               f"t = {start_ns * 1e-9:.6f} s")

    def build_reference(self, topic: str, msg, state, offset: int, current):
        """``(start_ns, start in reference time, Reference)`` of a decoded joint_reference (JointTrajectory, also a
        FollowJointTrajectory goal's trajectory) or base_reference message; Rejected with the reason."""
        points = msg.points
        ri.check_point_count(len(points))
        stamp = stamp_ns(msg.header.stamp, "header.stamp")
        sec = [p.time_from_start.sec for p in points]
        nanosec = [p.time_from_start.nanosec for p in points]
        if topic == "joint_reference":
            values = ([p.positions for p in points], [p.velocities for p in points],
                      [p.accelerations for p in points])
        else:
            poses, twists, accels = [], [], []
            for i, pt in enumerate(points):
                if len(pt.transforms) != 1 or len(pt.velocities) > 1 or len(pt.accelerations) > 1:
                    raise Rejected(f"point {i}: needs one transform and at most one velocity and acceleration")
                poses.append(cv.transform_from_msg(pt.transforms[0]))
                twists.append(cv.twist_from_msg(pt.velocities[0]) if pt.velocities else None)
                accels.append(cv.twist_from_msg(pt.accelerations[0]) if pt.accelerations else None)
            values = (poses, twists, accels)
        return reference_from_points(topic, stamp, sec, nanosec, msg.joint_names, values, state, offset, current,
                                     self.joint_input, self.base_input)
