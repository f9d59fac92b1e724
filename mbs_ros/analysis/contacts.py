"""Contact forces and free objects' paths of a recording (issue 30, docs/plot.md "Contact"), ROS-free:

- :func:`contact_forces`: per robot namespace, each ``<ns>/contacts/<link>`` (``geometry_msgs/WrenchStamped``,
  the sum of the contact forces on that link over a physics step, in the link's frame: docs/contact.md) as a
  series, with its force turned to world axes where the link's pose over time is known (``/tf``, or the robot's
  model from ``<ns>/robot_description`` + odom + joint_states: :func:`mbs_ros.animate.link_poses`), and the robot's
  weight ``m g`` from the URDF's masses (g = 9.81 m/s², the package's gravity);
- :func:`object_paths`: the free objects' positions over time from ``/tf`` (frames that a contact topic names,
  whose parent is the world frame and that are no robot's base).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from mbs_ros.analysis.reader import Recording, iter_messages

__all__ = ["ContactSeries", "RobotContacts", "contact_forces", "object_paths", "urdf_mass", "GRAVITY",
           "CONTACT_TYPE"]

CONTACT_TYPE = "geometry_msgs/msg/WrenchStamped"
GRAVITY = 9.81  # m/s², the models' default gravity
_SKIP = ("markers",)


@dataclass
class ContactSeries:
    """One ``contacts/<link>`` topic: ``frame`` its header's frame id, ``stamps`` (N,) ns sorted, ``force`` and
    ``torque`` (N, 3) in the link's frame; ``force_world`` (N, 3) in world axes, or None when the link's pose is
    not in the file."""

    topic: str
    frame: str
    stamps: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    force_world: Optional[np.ndarray] = None


@dataclass
class RobotContacts:
    """A robot's contact topics (``links``: link token -> series) and its weight ``m g`` [N] (None without its
    URDF in the file); ``notes``: what could not be computed."""

    ns: str
    links: Dict[str, ContactSeries] = field(default_factory=dict)
    weight: Optional[float] = None
    notes: List[str] = field(default_factory=list)


def urdf_mass(urdf: str) -> Optional[float]:
    """The sum of the URDF's ``<inertial><mass value>`` [kg], None when it cannot be read or has none."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError:
        return None
    masses = [float(m.get("value", "nan")) for m in root.iter("mass")]
    total = float(np.sum(masses)) if masses else None
    return total if total is not None and np.isfinite(total) else None


def _topics(rec: Recording) -> Dict[str, List[Tuple[str, str]]]:
    """ns -> [(topic, link token)] of the file's contact wrench topics."""
    out: Dict[str, List[Tuple[str, str]]] = {}
    for topic, kind in sorted(rec.topics.items()):
        head, sep, link = topic.rpartition("/contacts/")
        if sep and kind == CONTACT_TYPE and link and "/" not in link and link not in _SKIP:
            out.setdefault(head, []).append((topic, link))
    return out


def _quat_matrices(q: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_quat(q).as_matrix()


def contact_forces(rec: Recording, robots: Optional[Dict[str, object]] = None) -> Dict[str, RobotContacts]:
    """ns -> :class:`RobotContacts` of every namespace with contact topics in the file (module docstring);
    ``robots``: ns -> :class:`mbs_ros.animate.RobotGeometry` (for the model's link poses)."""
    by_ns = _topics(rec)
    if not by_ns:
        return {}
    wanted = [t for items in by_ns.values() for t, _ in items]
    rows: Dict[str, list] = {t: [] for t in wanted}
    for topic, _kind, _log, msg in iter_messages(rec.path, wanted, rec.notes):
        if msg is None:
            continue
        f, tau = msg.wrench.force, msg.wrench.torque
        stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        rows[topic].append((stamp, msg.header.frame_id, (f.x, f.y, f.z), (tau.x, tau.y, tau.z)))
    robots = robots or {}
    out: Dict[str, RobotContacts] = {}
    for ns, items in by_ns.items():
        rc = RobotContacts(ns)
        urdf = rec.robot_description.get(ns)
        mass = urdf_mass(urdf) if urdf else None
        rc.weight = None if mass is None else mass * GRAVITY
        for topic, link in items:
            data = sorted(rows[topic], key=lambda r: r[0])
            if not data:
                continue
            stamps = np.array([r[0] for r in data], dtype=np.int64)
            rc.links[link] = ContactSeries(topic, data[-1][1], stamps, np.array([r[2] for r in data], float),
                                           np.array([r[3] for r in data], float))
        _to_world(rec, ns, rc, robots.get(ns))
        out[ns] = rc
    return out


def _to_world(rec: Recording, ns: str, rc: RobotContacts, robot) -> None:
    """Fill ``force_world`` of each series whose frame has a pose in the file."""
    from mbs_ros.animate.poses import link_poses

    pending = [s for s in rc.links.values()]
    if not pending:
        return
    stamps = np.unique(np.concatenate([s.stamps for s in pending]))
    poses = None
    try:
        poses = link_poses(rec, ns, stamps, robot)
    except Exception as exc:  # noqa: BLE001 - a figure without world axes rather than none
        rc.notes.append(f"{ns}: link poses unavailable ({type(exc).__name__}: {exc})")
    for s in pending:
        R = None
        if poses is not None and s.frame in poses.frames:
            i = poses.index(s.frame)
            R = poses.T[np.searchsorted(stamps, s.stamps), i, :3, :3]
        elif s.frame in rec.tf:  # a free object: its own /tf
            _parent, t, pq = rec.tf[s.frame]
            k = np.clip(np.searchsorted(t, s.stamps, side="right") - 1, 0, len(t) - 1)
            R = _quat_matrices(pq[k, 3:7])
        if R is None:
            rc.notes.append(f"{s.topic}: no pose of {s.frame} in the file: its force is plotted in its own frame")
            continue
        s.force_world = np.einsum("nij,nj->ni", R, s.force)


def object_paths(rec: Recording, contacts: Dict[str, RobotContacts]) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """frame -> (stamps (N,) ns, positions (N, 3)) of every free object (module docstring)."""
    named = {s.frame for rc in contacts.values() for s in rc.links.values()}
    bases = {frames[1] for frames in rec.odom_frames.values()}
    worlds = {frames[0] for frames in rec.odom_frames.values()} | {"world", "map", "odom"}
    out = {}
    for child, (parent, stamps, poses) in sorted(rec.tf.items()):
        if child in named and child not in bases and parent in worlds:
            out[child] = (stamps, poses[:, :3])
    return out
