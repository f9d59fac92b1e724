"""Reference node: sends a scenario's base and joint references to ``controller_node``, once, at the right time.

``controller_node`` rejects a reference that arrives before its first state, so this node publishes (reliable,
transient local) once the controller listens, a state has arrived and the controller commands (or at
``start_time``), then logs ``reference published`` and idles. Parameters: the table in
:mod:`mbs_ros.nodes.parameters.reference`; topics, stamps and start time: docs/reference_node.md.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
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
from mbs_ros.nodes.parameters.reference import PARAMETERS
from mbs_ros.nodes.runtime import descriptor, run_node

__all__ = ["ReferenceNode", "ReferenceError", "Waypoints", "waypoints_from_values", "waypoints_from_file", "main"]

STAMP_MODES = ("state", "zero")
CHECK_PERIOD_S = 0.05  # how often the readiness is checked (wall clock)
_KEEP_STAMPS = 20



class ReferenceError(ValueError):
    """Waypoints or parameters this node refuses; the message says which and why."""


class Waypoints:
    """Checked waypoints: base (times, positions (N, 3), rpy (N, 3)) and joints (names, times, positions (M, n))."""

    def __init__(self, base_times=(), base_positions=(), base_rpy=(), joint_names=(), joint_times=(),
                 joint_positions=()):
        self.base_times = _times(base_times, "base_times")
        nb = len(self.base_times)
        self.base_positions = _rows(base_positions, nb, 3, "base_positions", "x, y, z")
        self.base_rpy = (np.zeros((nb, 3)) if len(base_rpy) == 0
                         else _rows(base_rpy, nb, 3, "base_rpy", "roll, pitch, yaw"))
        self.joint_names = tuple(str(n) for n in joint_names)
        if len(set(self.joint_names)) != len(self.joint_names):
            raise ReferenceError(f"joint_names: a joint is named twice: {list(self.joint_names)}")
        self.joint_times = _times(joint_times, "joint_times")
        nj = len(self.joint_times)
        if nj and self.joint_names:
            self.joint_positions = _rows(joint_positions, nj, len(self.joint_names), "joint_positions",
                                         "one per joint of joint_names")
        else:  # names from joint_states: the row length is checked when they are known
            flat = np.asarray(list(joint_positions), dtype=float).reshape(-1)
            if nj and flat.size % nj:
                raise ReferenceError(f"joint_positions: {flat.size} values for {nj} waypoints")
            self.joint_positions = flat.reshape(nj, -1) if nj else np.zeros((0, 0))
        if nj and not self.joint_positions.shape[1]:
            raise ReferenceError("joint_positions: no values")
        if not np.all(np.isfinite(self.joint_positions)):
            raise ReferenceError("joint_positions must be finite")

    @property
    def has_base(self) -> bool:
        return len(self.base_times) > 0

    @property
    def has_joints(self) -> bool:
        return len(self.joint_times) > 0


def _times(values, name: str) -> np.ndarray:
    t = np.asarray(list(values), dtype=float).reshape(-1)
    if not np.all(np.isfinite(t)) or np.any(t < 0.0):
        raise ReferenceError(f"{name} must be finite and >= 0, got {t.tolist()}")
    if np.any(np.diff(t) <= 0.0):
        raise ReferenceError(f"{name} must increase strictly, got {t.tolist()}")
    return t


def _rows(values, n: int, width: int, name: str, what: str) -> np.ndarray:
    flat = np.asarray(list(values), dtype=float).reshape(-1)
    if flat.size != n * width:
        raise ReferenceError(f"{name}: {flat.size} values for {n} waypoints ({width} per waypoint: {what})")
    if not np.all(np.isfinite(flat)):
        raise ReferenceError(f"{name} must be finite")
    return flat.reshape(n, width)


def waypoints_from_values(values: Dict[str, object]) -> Waypoints:
    return Waypoints(values["base_times"], values["base_positions"], values["base_rpy"], values["joint_names"],
                     values["joint_times"], values["joint_positions"])


def waypoints_from_file(path: str) -> Waypoints:
    """Waypoints from a YAML file with the scenario's reference keys (top level, or under ``reference:``)."""
    from mbs_ros.yamlfile import YamlFileError, read_yaml, shown

    try:  # one line, never the content: UTF-8/16/32 by their byte-order mark, the place of a YAML error
        doc = read_yaml(path)
    except YamlFileError as e:
        raise ReferenceError(f"reference_file {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("reference"), dict):
        doc = doc["reference"]
    if not isinstance(doc, dict) or not (set(doc) & {"base", "joints"}) or set(doc) - {"base", "joints",
                                                                                          "joint_names"}:
        raise ReferenceError(f"reference_file {path!r}: needs base and/or joints (and optionally joint_names), "
                             f"got {shown(doc)}")
    try:
        base = doc.get("base") or []
        joints = doc.get("joints") or []
        return Waypoints(
            base_times=[w["time"] for w in base],
            base_positions=[x for w in base for x in w["position"]],
            base_rpy=[x for w in base for x in w.get("rpy", (0.0, 0.0, 0.0))],
            joint_names=doc.get("joint_names") or (),
            joint_times=[w["time"] for w in joints],
            joint_positions=[x for w in joints for x in w["positions"]])
    except (KeyError, TypeError) as e:
        raise ReferenceError(f"reference_file {path!r}: a waypoint lacks {e}") from None


def _duration(seconds: float) -> Duration:
    sec = int(math.floor(seconds))
    nanosec = int(round((seconds - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return Duration(sec=sec, nanosec=nanosec)


class ReferenceNode(Node):
    """Sends the references (docs/reference_node.md). Construct, then :meth:`configure` (raises ReferenceError)."""

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
        v = {name: self._declare(name) for name in PARAMETERS}
        for name in ("base_times", "base_positions", "base_rpy", "joint_times", "joint_positions"):
            if isinstance(v[name], str) or any(isinstance(x, (str, bool)) for x in (v[name] or ())):
                raise ReferenceError(f"{name} must be a list of numbers, got {v[name]!r}")
            v[name] = list(v[name] or ())
        if isinstance(v["joint_names"], str) or any(not isinstance(x, str) for x in (v["joint_names"] or ())):
            raise ReferenceError(f"joint_names must be a list of names, got {v['joint_names']!r}")
        v["joint_names"] = list(v["joint_names"] or ())
        given = [n for n in ("base_times", "joint_times") if v[n]]
        if v["reference_file"].strip():
            if given:
                raise ReferenceError(f"give either reference_file or waypoint parameters ({', '.join(given)}), "
                                     "not both")
            wps = waypoints_from_file(v["reference_file"].strip())
        else:
            wps = waypoints_from_values(v)
        if not (wps.has_base or wps.has_joints):
            raise ReferenceError("no waypoints: set base_times/base_positions, joint_times/joint_positions or "
                                 "reference_file")
        if v["stamp"] not in STAMP_MODES:
            raise ReferenceError(f"stamp must be one of {', '.join(STAMP_MODES)}, got {v['stamp']!r}")
        for name, lo in (("min_subscribers", 1), ("command_timeout", 0.0), ("start_time", -math.inf)):
            x = v[name]
            span = PARAMETERS[name].range or (lo, math.inf)  # rclpy checks the range on doubles only
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < lo \
                    or not span[0] <= x <= span[1]:
                raise ReferenceError(f"{name} must be a {'finite number' if lo == -math.inf else f'number >= {lo}'}"
                                     + (f" in [{span[0]:g}, {span[1]:g}]" if span[1] < math.inf else "")
                                     + f", got {x!r}")
        self.wps = wps
        self.stamp_mode = v["stamp"]
        self.start_time_ns = int(round(float(v["start_time"]) * 1e9)) if v["start_time"] >= 0 else None
        self.min_subscribers = int(v["min_subscribers"])
        self.command_timeout = float(v["command_timeout"])
        self.world_frame = v["world_frame"].strip().lstrip("/") or PARAMETERS["world_frame"].default

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
        wps = self.wps
        header_ns = stamp_ns if self.stamp_mode == "state" else 0
        prepend = self.stamp_mode == "state"  # the state at 0 when the first waypoint is later
        if self.start_time_ns is not None:
            header_ns, prepend = self.start_time_ns, stamp_ns == self.start_time_ns
        base_msg = joint_msg = None
        if wps.has_base:
            base_msg = MultiDOFJointTrajectory()
            base_msg.header.stamp = cv.time_from_ns(header_ns)
            base_msg.header.frame_id = self.world_frame
            rows = [(t, p, cv.quaternion_from_rpy(rpy)) for t, p, rpy in
                    zip(wps.base_times, wps.base_positions, wps.base_rpy)]
            if prepend and rows[0][0] > 0.0:
                rows.insert(0, (0.0, pose[0], pose[1]))
            for t, p, quat in rows:
                base_msg.points.append(MultiDOFJointTrajectoryPoint(
                    transforms=[Transform(translation=cv.vector3_msg(p), rotation=cv.quaternion_msg(quat))],
                    time_from_start=_duration(float(t))))
        if wps.has_joints:
            names = list(wps.joint_names) or list(self._joint_order)
            unknown = [n for n in names if n not in joints]
            if unknown:
                raise ReferenceError(f"joint(s) {', '.join(unknown)} not in joint_states ({', '.join(joints)})")
            if wps.joint_positions.shape[1] != len(names):
                raise ReferenceError(f"joint_positions: {wps.joint_positions.shape[1]} values per waypoint for "
                                     f"{len(names)} joints ({', '.join(names)})")
            joint_msg = JointTrajectory()
            joint_msg.header.stamp = cv.time_from_ns(header_ns)
            joint_msg.joint_names = names
            rows = list(zip(wps.joint_times, wps.joint_positions))
            if prepend and rows[0][0] > 0.0:
                rows.insert(0, (0.0, np.array([joints[n] for n in names])))
            for t, q in rows:
                joint_msg.points.append(JointTrajectoryPoint(positions=[float(x) for x in q],
                                                             time_from_start=_duration(float(t))))
        return base_msg, joint_msg


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    # our own SIGINT/SIGTERM handlers (a flag the spin loop checks), as the dynamics and controller nodes: with
    # rclpy's, an idle reference node once outlived SIGINT and SIGTERM (13 s) and needed SIGKILL in a CI run
    return run_node(ReferenceNode, args, errors=(ReferenceError,))


if __name__ == "__main__":
    sys.exit(main())
