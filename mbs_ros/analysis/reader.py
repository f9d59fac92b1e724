"""Reading a recorded run (MCAP, as :mod:`mbs_ros.recording` or ``ros2 bag record -s mcap`` writes it) into
per-topic series, ROS-free: the messages are decoded from the file's own ``ros2msg`` schemas (``mcap_ros2``).
:func:`load` gives a :class:`Recording`; a damaged file is read in file order, keeping every complete message
(see docs/plot.md). :mod:`mbs_ros.plot` and :mod:`mbs_ros.animate` draw from it."""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["PlotError", "Recording", "TrajectoryMessage", "load", "iter_messages", "is_energy_status",
           "energy_namespace", "ENERGY_KEYS", "TYPES"]

ODOM, JOINT_STATES, JOINT_REFERENCE, BASE_REFERENCE = "odom", "joint_states", "joint_reference", "base_reference"
ENERGY = "energy"
ROBOT_DESCRIPTION = "robot_description"
DIAGNOSTICS = "/diagnostics"
TF, TF_STATIC, TF_TYPE = "/tf", "/tf_static", "tf2_msgs/msg/TFMessage"
TYPES = {
    ODOM: "nav_msgs/msg/Odometry",
    JOINT_STATES: "sensor_msgs/msg/JointState",
    JOINT_REFERENCE: "trajectory_msgs/msg/JointTrajectory",
    BASE_REFERENCE: "trajectory_msgs/msg/MultiDOFJointTrajectory",
    ENERGY: "mbs_ros_msgs/msg/EnergyPorts",
    ROBOT_DESCRIPTION: "std_msgs/msg/String",
}
DIAGNOSTICS_TYPE = "diagnostic_msgs/msg/DiagnosticArray"
#: The keys a /diagnostics status must carry, as numbers, to be an energy record (the dynamics node's bookkeeping).
ENERGY_KEYS = ("kinetic_energy", "potential_energy", "total_energy")
#: The scalars of an ``<ns>/energy`` message (``mbs_ros_msgs/EnergyPorts``) a Recording keeps.
PORT_SCALARS = ("environment_temperature", "total_energy", "supplied_energy", "dissipated_energy",
                "entropy_production", "entropy_produced", "balance_residual")
PROGRESS_MIN_MESSAGES = 20000  # "auto" shows progress from this many messages on


class PlotError(RuntimeError):
    """The file cannot be read (missing, not MCAP, broken beyond its header)."""


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _duration_s(d) -> float:
    return int(d.sec) + int(d.nanosec) * 1e-9


# ------------------------------------------------------------------------------------------ reading


@dataclass
class TrajectoryMessage:
    """One JointTrajectory / MultiDOFJointTrajectory as received."""

    log_time: int
    stamp: int  # header.stamp [ns]; 0 = "start when received"
    names: Tuple[str, ...]
    times: np.ndarray  # (N,) time_from_start [s]
    positions: np.ndarray  # (N, nq)
    velocities: Optional[np.ndarray]  # (N, nv) or None
    accelerations: Optional[np.ndarray]


@dataclass
class Recording:
    """What the plots need from a file, as arrays. Stamps in integer ns."""

    path: Path
    message_count: int = 0
    notes: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)  # damage of the file: what was read, what was lost
    topics: Dict[str, str] = field(default_factory=dict)  # topic -> type, every topic in the file
    odom_stamps: Dict[str, np.ndarray] = field(default_factory=dict)  # ns -> (N,) int64, sorted
    odom: Dict[str, np.ndarray] = field(default_factory=dict)  # ns -> (N, 7) [x y z qx qy qz qw]
    # ns -> (N, 6): the pose covariance's diagonal [x y z roll pitch yaw] (an estimate's uncertainty), as odom
    odom_variance: Dict[str, np.ndarray] = field(default_factory=dict)
    joint_states: Dict[str, list] = field(default_factory=dict)  # ns -> [(log_time, stamp, names, positions)]
    joint_reference: Dict[str, List[TrajectoryMessage]] = field(default_factory=dict)
    base_reference: Dict[str, List[TrajectoryMessage]] = field(default_factory=dict)
    # energy records only (see is_energy_status): status name -> [(stamp, hardware_id, {key: float})]
    diagnostics: Dict[str, list] = field(default_factory=dict)
    # <ns>/energy (EnergyPorts): ns -> [(stamp, {storage: J}, {port: W}, {dissipator: W}, {scalar: value})]
    energy_ports: Dict[str, list] = field(default_factory=dict)
    # /tf: child frame -> (parent frame, stamps (N,) int64 sorted, poses (N, 7) [x y z qx qy qz qw])
    tf: Dict[str, tuple] = field(default_factory=dict)
    tf_static: Dict[str, tuple] = field(default_factory=dict)  # child frame -> (parent frame, (7,) pose)
    robot_description: Dict[str, str] = field(default_factory=dict)  # ns -> URDF (<ns>/robot_description, last)
    odom_frames: Dict[str, Tuple[str, str]] = field(default_factory=dict)  # ns -> (frame_id, child_frame_id)

    @property
    def namespaces(self) -> List[str]:
        found = set(self.odom) | set(self.joint_states) | set(self.joint_reference) | set(self.base_reference)
        found |= {energy_namespace(name, rows) for name, rows in self.diagnostics.items()}
        found |= set(self.energy_ports)
        return sorted(found)

    def t0(self) -> int:
        """Earliest stamp of any series (ns): the origin of every time axis."""
        firsts = [int(a[0]) for a in self.odom_stamps.values() if len(a)]
        firsts += [min(r[1] for r in rows) for rows in self.joint_states.values() if rows]
        firsts += [min(r[0] for r in rows) for rows in self.diagnostics.values() if rows]
        firsts += [min(r[0] for r in rows) for rows in self.energy_ports.values() if rows]
        return min(firsts) if firsts else 0


def is_energy_status(values: Dict[str, float]) -> bool:
    """Whether a status's numeric values (key -> float) are an energy record: every key of :data:`ENERGY_KEYS`."""
    return all(k in values for k in ENERGY_KEYS)


def energy_namespace(status_name: str, rows) -> str:
    """Namespace of a dynamics node's status: from hardware_id ``<ns>/base_link``, else the node name."""
    hardware_id = rows[0][1] if rows else ""
    if "/" in hardware_id.strip("/"):
        ns = hardware_id.strip("/").rsplit("/", 1)[0]
        return "/" + ns
    node = status_name.split(":", 1)[0].strip()  # "/robot1/dynamics_node: rigid body"
    return node.rsplit("/", 1)[0] if node.startswith("/") else ""


def _split_topic(topic: str) -> Optional[Tuple[str, str]]:
    """('/robot1', 'odom') for '/robot1/odom' (namespace '' for '/odom'), if it is a topic the plots use."""
    ns, _, leaf = topic.rpartition("/")
    return (ns, leaf) if leaf in TYPES else None


class _Progress:
    """tqdm on a terminal; otherwise a line on stderr at every 10 %."""

    def __init__(self, total: Optional[int], label: str, mode: str = "auto"):
        self.total, self.label, self.count, self._shown = total, label, 0, -1
        self.enabled = mode == "always" or (mode == "auto" and (total or 0) >= PROGRESS_MIN_MESSAGES)
        self._bar = None
        if self.enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=total, desc=label, unit="msg", file=sys.stderr, leave=False)
            except ImportError:
                pass

    def update(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
        elif self.total:
            decile = min(10, self.count * 10 // self.total)
            if decile > self._shown:
                self._shown = decile
                print(f"{self.label}: {decile * 10:3d}% ({self.count}/{self.total} messages)", file=sys.stderr,
                      flush=True)
        elif self.count % 50000 == 0:
            print(f"{self.label}: {self.count} messages", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.total and self._shown < 10:
            print(f"{self.label}: done ({self.count} messages)", file=sys.stderr, flush=True)


class _IndexUnreadable(PlotError):
    """The file's summary claims an index, but reading through it failed (damaged data)."""


def _damage_warning(path: Path, report, read: int, scope: str) -> str:
    return (f"{path} is damaged: {report.describe()}. Read {report.message_count} complete messages"
            + (f" ({read} {scope})" if scope else "")
            + f"; recover them into a complete file with: python -m mbs_ros.recording recover {path} OUT.mcap")


def iter_messages(path, topics: Optional[Sequence[str]] = None, notes: Optional[List[str]] = None,
                  progress: str = "never", *, warnings: Optional[List[str]] = None,
                  indexed: bool = True) -> Iterator[Tuple[str, str, int, object]]:
    """``(topic, type, log_time, decoded message)`` of the file (``topics``: only these). An intact file is read
    through its index, in log-time order (``indexed``). A file without summary is read in file order with
    :func:`mbs_ros.recording.read_messages`, which keeps every complete message of a damaged file; what was lost
    goes into ``warnings`` (default: ``notes``), once. Raises :class:`PlotError` if the file is not MCAP, or if
    its index cannot be read (then read it with ``indexed=False``; :func:`load` does)."""
    from mcap.exceptions import McapError
    from mcap.reader import SeekingReader
    from mcap_ros2.decoder import DecoderFactory

    from mbs_ros.analysis.mcapfile import FileReport, NotMcapError, read_messages

    path = Path(path)
    notes = notes if notes is not None else []
    warnings = warnings if warnings is not None else notes
    try:
        f = open(path, "rb")
    except OSError as e:
        raise PlotError(f"cannot open {path}: {e.strerror or e}") from e
    with f:
        if not f.read(8):
            raise PlotError(f"{path} is empty")
        f.seek(0)
        try:
            reader = SeekingReader(f)
        except McapError as e:
            raise PlotError(f"{path} is not an MCAP file ({e})") from e
        try:
            summary = reader.get_summary() if indexed else None
        except Exception:  # noqa: BLE001 - no footer: the writer never closed the file
            summary = None
        wanted = set(topics) if topics is not None else None
        factory = DecoderFactory()
        decoders: Dict[int, object] = {}

        def decode(schema, channel, message):
            if schema is None:
                return None
            if schema.id not in decoders:
                try:
                    decoders[schema.id] = factory.decoder_for(channel.message_encoding, schema)
                except Exception as e:  # noqa: BLE001 - a schema the decoder cannot parse
                    notes.append(f"cannot decode {schema.name} ({e}): its topics are skipped")
                    decoders[schema.id] = None
            fn = decoders[schema.id]
            return fn(message.data) if fn is not None else None

        if summary is not None and summary.chunk_indexes:
            counts = summary.statistics.channel_message_counts if summary.statistics else {}
            total = sum(n for cid, n in counts.items()
                        if wanted is None or summary.channels[cid].topic in wanted) or None
            bar = _Progress(total, f"reading {path.name}", progress)
            it = reader.iter_messages(topics=topics, log_time_order=True)
            try:
                while True:
                    try:
                        schema, channel, message = next(it)
                    except StopIteration:
                        break
                    except (McapError, EOFError, ValueError, struct.error) as e:  # a chunk it points to is broken
                        raise _IndexUnreadable(f"{path}: reading through its index failed "
                                               f"({type(e).__name__}: {e or 'the data ends early'})") from e
                    bar.update()
                    yield channel.topic, schema.name if schema else "", message.log_time, decode(
                        schema, channel, message)
            finally:
                bar.close()
            return

    # no summary, or its index failed: every complete message in file order, whatever the damage
    report = FileReport(path)
    count = 0
    bar = _Progress(None, f"reading {path.name}", progress)
    try:
        for schema, channel, message in read_messages(path, report):
            if wanted is not None and channel.topic not in wanted:
                continue
            count += 1
            bar.update()
            yield channel.topic, schema.name if schema else "", message.log_time, decode(schema, channel, message)
    except NotMcapError as e:
        raise PlotError(f"{path}: no readable data ({e})") from e
    finally:
        bar.close()
    if not report.counts and not report.message_count and report.damaged:
        raise PlotError(f"{path}: no readable data ({report.describe()})")
    if report.damaged:
        warnings.append(_damage_warning(path, report, count, "of the topics read" if wanted is not None else ""))


def _trajectory(msg, log_time: int, multi_dof: bool) -> Optional[TrajectoryMessage]:
    points = list(msg.points)
    if not points:
        return None
    names = tuple(msg.joint_names)
    times = np.array([_duration_s(p.time_from_start) for p in points])
    if multi_dof:
        def pose(t):
            return [t.translation.x, t.translation.y, t.translation.z,
                    t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w]

        def twist(t):
            return [t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z]

        positions = np.array([pose(p.transforms[0]) for p in points]) if all(p.transforms for p in points) else None
        vel = np.array([twist(p.velocities[0]) for p in points]) if all(p.velocities for p in points) else None
        acc = (np.array([twist(p.accelerations[0]) for p in points])
               if all(p.accelerations for p in points) else None)
    else:
        n = len(names)
        positions = np.array([list(p.positions) for p in points]) if all(len(p.positions) == n for p in points) \
            else None
        vel = np.array([list(p.velocities) for p in points]) if all(len(p.velocities) == n for p in points) \
            else None
        acc = np.array([list(p.accelerations) for p in points]) \
            if all(len(p.accelerations) == n for p in points) else None
    if positions is None:
        return None
    return TrajectoryMessage(log_time, _stamp_ns(msg.header.stamp), names, times, positions, vel, acc)


def load(path, progress: str = "auto") -> Recording:
    """Read what the plots need from an MCAP file (see :func:`iter_messages` for the errors). A damaged file
    gives what can be recovered, and one entry in ``warnings``."""
    try:
        return _load(Path(path), progress, indexed=True)
    except _IndexUnreadable as e:  # e.g. a broken record in a chunk: read every complete message in file order
        rec = _load(Path(path), progress, indexed=False)
        if not rec.warnings:  # the data is intact, its summary or index is not
            rec.warnings.append(f"{e}: read {rec.message_count} messages in file order instead")
        return rec


def _load(path: Path, progress: str, indexed: bool) -> Recording:
    rec = Recording(path)
    # first the channel list, to read only the topics the plots use
    topics = _file_topics(rec.path, rec.notes) if indexed else _scan_topics(rec.path)
    rec.topics = topics
    used = [t for t, ty in topics.items()
            if (t == DIAGNOSTICS and ty == DIAGNOSTICS_TYPE) or (t in (TF, TF_STATIC) and ty == TF_TYPE)
            or ((s := _split_topic(t)) and TYPES[s[1]] == ty)]
    odom: Dict[str, list] = {}
    tf: Dict[str, list] = {}
    if not used:
        return rec
    for topic, _type, log_time, msg in iter_messages(rec.path, used, rec.notes, progress, warnings=rec.warnings,
                                                     indexed=indexed):
        rec.message_count += 1
        if msg is None:
            continue
        if topic == DIAGNOSTICS:
            stamp = _stamp_ns(msg.header.stamp)
            for status in msg.status:
                values = {}
                for kv in status.values:
                    try:
                        values[kv.key] = float(kv.value)
                    except ValueError:
                        pass
                if is_energy_status(values):
                    rec.diagnostics.setdefault(status.name, []).append((stamp, status.hardware_id, values))
            continue
        if topic in (TF, TF_STATIC):
            for tr in msg.transforms:
                p, q = tr.transform.translation, tr.transform.rotation
                pose = (p.x, p.y, p.z, q.x, q.y, q.z, q.w)
                if topic == TF_STATIC:
                    rec.tf_static[tr.child_frame_id] = (tr.header.frame_id, np.array(pose, float))
                else:
                    tf.setdefault(tr.child_frame_id, []).append((_stamp_ns(tr.header.stamp), tr.header.frame_id,
                                                                 pose))
            continue
        ns, leaf = _split_topic(topic)
        if leaf == ROBOT_DESCRIPTION:
            rec.robot_description[ns] = str(msg.data)
            continue
        if leaf == ENERGY:
            scalars = {k: float(getattr(msg, k)) for k in PORT_SCALARS}
            rec.energy_ports.setdefault(ns, []).append((
                _stamp_ns(msg.header.stamp), dict(zip(msg.storage_names, map(float, msg.storage_energy))),
                dict(zip(msg.port_names, map(float, msg.port_power))),
                dict(zip(msg.dissipator_names, map(float, msg.dissipated_power))), scalars))
            continue
        if leaf == ODOM:
            p, q = msg.pose.pose.position, msg.pose.pose.orientation
            c = msg.pose.covariance
            odom.setdefault(ns, []).append((_stamp_ns(msg.header.stamp), p.x, p.y, p.z, q.x, q.y, q.z, q.w,
                                            c[0], c[7], c[14], c[21], c[28], c[35]))
            rec.odom_frames[ns] = (msg.header.frame_id, msg.child_frame_id)
        elif leaf == JOINT_STATES:
            rec.joint_states.setdefault(ns, []).append(
                (log_time, _stamp_ns(msg.header.stamp), tuple(msg.name), np.array(list(msg.position), float)))
        else:
            traj = _trajectory(msg, log_time, multi_dof=leaf == BASE_REFERENCE)
            target = rec.joint_reference if leaf == JOINT_REFERENCE else rec.base_reference
            if traj is None:
                rec.notes.append(f"{topic}: a message without usable points was ignored")
            else:
                target.setdefault(ns, []).append(traj)
    for ns, rows in odom.items():
        stamps = np.array([r[0] for r in rows], dtype=np.int64)
        order = np.argsort(stamps, kind="stable")
        rec.odom_stamps[ns] = stamps[order]
        table = np.array([r[1:] for r in rows], dtype=float)[order]
        rec.odom[ns], rec.odom_variance[ns] = table[:, :7], table[:, 7:]
    for child, rows in tf.items():
        rows.sort(key=lambda r: r[0])
        rec.tf[child] = (rows[-1][1], np.array([r[0] for r in rows], dtype=np.int64),
                         np.array([r[2] for r in rows], dtype=float))
    return rec


def _file_topics(path: Path, notes: List[str]) -> Dict[str, str]:
    """topic -> type of every channel (from the summary, or by a pass over an unindexed file)."""
    from mcap.exceptions import McapError
    from mcap.reader import SeekingReader
    try:
        with open(path, "rb") as f:
            if not f.read(8):
                raise PlotError(f"{path} is empty")
            f.seek(0)
            reader = SeekingReader(f)
            try:
                summary = reader.get_summary()
            except Exception:  # noqa: BLE001 - no footer
                summary = None
            if summary is not None and summary.chunk_indexes:
                return {c.topic: (summary.schemas[c.schema_id].name if c.schema_id in summary.schemas else "")
                        for c in summary.channels.values()}
    except OSError as e:
        raise PlotError(f"cannot open {path}: {e.strerror or e}") from e
    except McapError as e:
        raise PlotError(f"{path} is not an MCAP file ({e})") from e
    # unindexed: every topic is read; types come with the messages
    return _scan_topics(path)


def _scan_topics(path: Path) -> Dict[str, str]:
    """topic -> type of every channel whose definition can be read, by a pass over the whole file."""
    from mbs_ros.analysis.mcapfile import FileReport, NotMcapError, read_messages
    report = FileReport(path)
    try:
        for _ in read_messages(path, report):
            pass
    except NotMcapError as e:
        raise PlotError(f"{path}: no readable data ({e})") from e
    if not report.topics and report.damaged:
        raise PlotError(f"{path}: no readable data ({report.describe()})")
    return dict(report.topics)
