"""The dynamics node's simulated sensors (:class:`SensorPublishing`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`): the sensor suite of the ``sensors`` parameter
(:class:`mbs_ros.sensors.suite.SensorSuite`, ROS-free), sampled on each sensor's own step grid whatever is
subscribed (so the random streams are the same in every run of the same seeds), its readings published as they
fall due (measurement step + delay, before the state of that step), the static TF link -> sensor frame (and the
DVL's beam frames), and one /diagnostics status per sensor. Topics and message fields: docs/dynamics_node.md,
"Sensors".
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped, TwistWithCovarianceStamped, WrenchStamped
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import FluidPressure, Imu, JointState, MagneticField, NavSatFix, NavSatStatus, Range
from std_msgs.msg import Bool

from mbs_ros.dynamics.model import source as ms
from mbs_ros.nodes import conversions as cv
from mbs_ros.cores.dynamics import beam_range, load_suite  # noqa: F401 - importable from here, as the node does
from mbs_ros.sensors import dvl

__all__ = ["SensorPublishing", "sensors_path", "load_suite", "reading_messages", "beam_range", "sensor_qos",
           "SENSOR_QOS_MIN_DEPTH", "BEAM_FIELD_OF_VIEW", "MESSAGE_TYPES"]

#: each sensor topic keeps at least this many messages (RELIABLE, KEEP_LAST): see :func:`sensor_qos`
SENSOR_QOS_MIN_DEPTH = 100
#: sensor_msgs/Range field_of_view of a DVL beam [rad]: a 4° acoustic beam (the DVL model has no beam width)
BEAM_FIELD_OF_VIEW = math.radians(4.0)
#: the message type of each sensor type's main topic ``sensors/<name>``
MESSAGE_TYPES = {"imu": Imu, "magnetometer": MagneticField, "pressure": FluidPressure,
                 "dvl": TwistWithCovarianceStamped, "gnss": NavSatFix, "encoders": JointState,
                 "force_torque": WrenchStamped, "foot_contact": WrenchStamped}
NONE = ms.NO_SENSORS
sensors_path = ms.sensors_path


# ------------------------------------------------------------------------------------ loading


def sensor_qos(period_steps: int, batch_steps: int) -> QoSProfile:
    """RELIABLE, KEEP_LAST: a lockstep estimator must get every sample (its stream is deterministic only if none is
    lost), so the queue holds every sample of one batch of steps (a lockstep control period, or the most the
    timer takes at once) twice over, and at least :data:`SENSOR_QOS_MIN_DEPTH`."""
    per_batch = -(-int(batch_steps) // max(1, int(period_steps)))
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=max(SENSOR_QOS_MIN_DEPTH, 2 * per_batch),
                      reliability=ReliabilityPolicy.RELIABLE)


# ------------------------------------------------------------------------------------ Reading -> messages


def _arr(values, n: int) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"expected {n} values, got {a.size}")
    return a


def _vec3(msg, values) -> None:
    msg.x, msg.y, msg.z = (float(x) for x in _arr(values, 3))


def reading_messages(reading, frame: str, beam_frames=(), beam_limits=(0.0, math.inf),
                     field_of_view: float = BEAM_FIELD_OF_VIEW) -> List[tuple]:
    """``[(topic suffix, message)]`` of one :class:`~mbs_ros.sensors.frames.Reading` (suffix "" is
    ``sensors/<name>`` itself), stamped ``reading.stamp_ns``, ``frame_id`` ``frame``: an invalid reading gives
    none, except a DVL's beams (always) and a GNSS fix message (status NO_FIX). Field by field:
    docs/dynamics_node.md, "Sensors"."""
    t, v, ok = reading.type, reading.values, bool(reading.valid)
    stamp = cv.time_from_ns(reading.stamp_ns)
    out = []

    def header(m):
        m.header.stamp = stamp
        m.header.frame_id = frame
        return m

    if t == "imu":
        if ok:
            m = header(Imu())
            _vec3(m.linear_acceleration, v["linear_acceleration"])
            _vec3(m.angular_velocity, v["angular_velocity"])
            if v.get("orientation") is not None:
                o = _arr(v["orientation"], 4)
                m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w = (float(x) for x in o)
            m.linear_acceleration_covariance = _arr(v["linear_acceleration_cov"], 9)
            m.angular_velocity_covariance = _arr(v["angular_velocity_cov"], 9)
            m.orientation_covariance = _arr(v["orientation_cov"], 9)
            out.append(("", m))
    elif t == "magnetometer":
        if ok:
            m = header(MagneticField())
            _vec3(m.magnetic_field, v["magnetic_field"])
            m.magnetic_field_covariance = _arr(v["magnetic_field_cov"], 9)
            out.append(("", m))
    elif t == "pressure":
        if ok:
            m = header(FluidPressure())
            m.fluid_pressure, m.variance = float(v["fluid_pressure"]), float(v["variance"])
            d = header(PointStamped())
            d.point.z = float(v["depth"])
            out += [("", m), ("/depth", d)]
    elif t == "dvl":
        if ok and v.get("velocity") is not None:
            m = header(TwistWithCovarianceStamped())
            _vec3(m.twist.twist.linear, v["velocity"])
            cov = np.zeros((6, 6))
            cov[:3, :3] = _arr(v["velocity_cov"], 9).reshape(3, 3)
            cov[3, 3] = cov[4, 4] = cov[5, 5] = -1.0  # the angular part is not measured
            m.twist.covariance = cov.reshape(-1)
            out.append(("", m))
        ranges = np.asarray(v["ranges"], dtype=float).reshape(-1)
        lo, hi = beam_limits
        for i, (r, beam) in enumerate(zip(ranges, beam_frames)):
            b = Range()
            b.header.stamp, b.header.frame_id = stamp, beam
            b.radiation_type = Range.ULTRASOUND
            b.field_of_view, b.min_range, b.max_range = float(field_of_view), float(lo), float(hi)
            b.range = beam_range(r, lo, hi)
            out.append(("/beams", b))
    elif t == "gnss":
        m = header(NavSatFix())
        fix = ok and int(v.get("status", -1)) >= 0
        m.status.status = NavSatStatus.STATUS_FIX if fix else NavSatStatus.STATUS_NO_FIX
        m.status.service = NavSatStatus.SERVICE_GPS
        m.latitude, m.longitude, m.altitude = (float(v.get(k, math.nan)) for k in ("latitude", "longitude",
                                                                                   "altitude"))
        if fix:
            m.position_covariance = _arr(v["position_cov"], 9)
            m.position_covariance_type = NavSatFix.COVARIANCE_TYPE_KNOWN
        else:
            m.position_covariance_type = NavSatFix.COVARIANCE_TYPE_UNKNOWN
        out.append(("", m))
    elif t == "encoders":
        if ok:
            m = header(JointState())
            m.name = [str(n) for n in v["names"]]
            m.position = np.asarray(v["position"], dtype=np.float64).reshape(-1).tolist()
            m.velocity = np.asarray(v["velocity"], dtype=np.float64).reshape(-1).tolist()
            out.append(("", m))
    elif t in ("force_torque", "foot_contact"):
        if ok:
            m = header(WrenchStamped())
            _vec3(m.wrench.force, v["force"])
            _vec3(m.wrench.torque, v["torque"])
            out.append(("", m))
            if t == "foot_contact":  # the contact state right after its wrench (Bool has no header)
                out.append(("/contact", Bool(data=bool(v["contact"]))))
    else:
        raise ValueError(f"sensor {reading.name}: no message for type {t!r}")
    return out


# ------------------------------------------------------------------------------------ the node's part


class SensorPublishing:
    """The sensors of ``suite`` (None: no sensors) on the topics of ``node``. ``link_frame(link)`` a link's TF frame;
    ``base_frame`` the single body's; ``prefix`` the frame prefix; ``warn(key, text)`` a throttled warning; ``logs``
    the node's :class:`~mbs_ros.cores.ratelimit.RateLimitedLog`. :meth:`static_transforms` join /tf_static, then
    :meth:`create_publishers`; the simulation loop (:class:`~mbs_ros.cores.loop.SimulationLoop`) samples the suite
    and hands each reading due to :meth:`publish_reading`. Nothing is sampled before the first step: the first
    ``advance`` samples the state it starts from (when on a grid), so a paused start measures nothing."""

    def __init__(self, node, suite, *, link_frame, multibody: bool, base_frame: str, prefix: str, warn, logs):
        self.node, self.suite, self.warn, self.logs = node, suite, warn, logs
        self._link_frame, self.multibody, self.base_frame, self._prefix = link_frame, multibody, base_frame, prefix
        self._sensor_specs = tuple(suite.sensor_set.sensors) if suite is not None else ()
        self._sensor_frames = {s.name: self._sensor_frame(s.frame_id) for s in self._sensor_specs}
        self._beam_frames, self._beam_limits = {}, {}
        for s in self._sensor_specs:
            if s.type == "dvl":
                frame = self._sensor_frames[s.name]
                self._beam_frames[s.name] = tuple(f"{frame}/beam{i}" for i in range(4))
                self._beam_limits[s.name] = (float(s.params.min_range), float(s.params.max_range))
        # per sensor: counts and the last reason for diagnostics
        self._sensor_counts = {s.name: {"published": 0, "invalid": 0, "nonfinite": 0} for s in self._sensor_specs}
        self._sensor_reason: Dict[str, Optional[str]] = {s.name: None for s in self._sensor_specs}
        self._sensor_last_k: Dict[str, Optional[int]] = {s.name: None for s in self._sensor_specs}

    def text(self) -> str:
        """The sensors in the start-up line (:meth:`~mbs_ros.sensors.suite.SensorSuite.text`)."""
        return "no sensors" if self.suite is None else self.suite.text()

    def _sensor_frame(self, frame_id: str) -> str:
        """A sensor's frame_id as published: prefixed like base_frame (a leading '/': as given)."""
        if frame_id.startswith("/"):
            return frame_id.strip("/")
        return self._prefix + frame_id

    def _sensor_link_frame(self, link: str) -> str:
        return self._link_frame(link) if self.multibody else self.base_frame

    # ----------------------------------------------------------------------------- publishers, TF

    def static_transforms(self) -> list:
        """``[(parent, child, p, quat)]``: link -> sensor frame, and a DVL's beam frames."""
        out = []
        for s in self._sensor_specs:
            frame = self._sensor_frames[s.name]
            T = np.asarray(s.T_link_sensor, dtype=float)
            out.append((self._sensor_link_frame(s.link), frame, T[:3, 3].copy(),
                        cv.quaternion_from_matrix(T[:3, :3])))
            if s.type == "dvl":
                for beam, R in zip(self._beam_frames[s.name], dvl.beam_frames(s.params.beam_angle)[:, :3, :3]):
                    out.append((frame, beam, np.zeros(3), cv.quaternion_from_matrix(R)))
        return out

    def create_publishers(self, batch: int, pub_diag) -> None:
        """The sensor topics, each queue deep enough for ``batch`` steps (:func:`sensor_qos`); their diagnostics
        go out on ``pub_diag``."""
        self._sensor_pubs, self.pub_diag = {}, pub_diag
        for s in self._sensor_specs:
            qos = sensor_qos(s.period_steps, batch)
            pubs = {"": self.node.create_publisher(MESSAGE_TYPES[s.type], s.topic, qos)}
            if s.type == "pressure":
                pubs["/depth"] = self.node.create_publisher(PointStamped, s.topic + "/depth", qos)
            elif s.type == "foot_contact":
                pubs["/contact"] = self.node.create_publisher(Bool, s.topic + "/contact", qos)
            elif s.type == "dvl":
                # one topic for the four beams, each message in its own beam frame
                pubs["/beams"] = self.node.create_publisher(Range, s.topic + "/beams", qos)
            self._sensor_pubs[s.name] = pubs

    # ----------------------------------------------------------------------------- stepping

    def publish_reading(self, reading) -> None:
        name = reading.name
        pubs = self._sensor_pubs[name]
        counts = self._sensor_counts[name]
        messages = reading_messages(reading, self._sensor_frames[name], self._beam_frames.get(name, ()),
                                    self._beam_limits.get(name, (0.0, math.inf)))
        self._sensor_last_k[name] = reading.k
        bad = next((f"{type(m).__name__}.{b}" for _, m in messages if (b := cv.nonfinite_field(m))), None)
        if bad is not None:  # the promise: nothing non-finite is published (none of the reading is)
            counts["nonfinite"] += 1
            self._sensor_reason[name] = f"a non-finite {bad}: not published"
            return self.warn(f"sensor_{name}", f"sensor {name}: a non-finite {bad}: not published")
        for suffix, msg in messages:
            pubs[suffix].publish(msg)
        if reading.valid:
            counts["published"] += 1
            if self._sensor_reason[name] is not None:
                self._sensor_reason[name] = None
                self.logs.info(f"sensor_ok_{name}", f"sensor {name}: output again at t = "
                               f"{cv.seconds_text(reading.stamp_ns)} s")
            return
        counts["invalid"] += 1
        reason = reading.reason or "no output"
        self._sensor_reason[name] = reason
        self.warn(f"sensor_{name}", f"sensor {name} ({reading.type}): no output at t = "
                  f"{cv.seconds_text(reading.stamp_ns)} s: {reason}")

    def reset(self) -> None:
        """``~/reset``: the readings still queued (delayed) are dropped (:meth:`SensorSuite.reset`; the random
        streams go on); the reset state is sampled by the next step on its grid."""
        if self.suite is not None:
            self.suite.reset()

    def set_current(self, current) -> None:
        """A change of the water's ``current`` reaches the sensors' environment too (a DVL's water track)."""
        if self.suite is not None:
            self.suite.set_current(current)

    # ----------------------------------------------------------------------------- diagnostics

    def publish_diagnostics(self, stamp: int) -> None:
        """One status per sensor at ``stamp`` (after the node's own)."""
        if not self._sensor_specs or not self.pub_diag.get_subscription_count():
            return
        node = self.node.get_fully_qualified_name()
        status = []
        for s in self._sensor_specs:
            reason = self._sensor_reason[s.name]
            last = self._sensor_last_k[s.name]
            values = {"type": s.type, "topic": s.topic, "frame_id": self._sensor_frames[s.name],
                      "rate": s.rate, "period_steps": s.period_steps, "delay_steps": s.delay_steps, "seed": s.seed,
                      **self._sensor_counts[s.name],
                      "last_measured_step": "none" if last is None else last,
                      # matched subscribers of each topic: subscribers, subscribers/depth, subscribers/beams
                      **{"subscribers" + suffix: p.get_subscription_count()
                         for suffix, p in self._sensor_pubs[s.name].items()}}
            status.append(DiagnosticStatus(
                level=DiagnosticStatus.WARN if reason else DiagnosticStatus.OK,
                name=f"{node}/sensors/{s.name}: {s.type}", message=reason or "ok",
                hardware_id=self._sensor_frames[s.name], values=cv.key_values(values)))
        msg = DiagnosticArray(status=status)
        msg.header.stamp = cv.time_from_ns(stamp)
        self.pub_diag.publish(msg)
