"""The contact world of a recorded run for the animation: the ground (or seabed) plane, the static shapes and the
free objects as the dynamics node draws them on ``<ns>/world/markers`` (``visualization_msgs/MarkerArray``, one
marker per shape: CUBE, SPHERE or CYLINDER in the world frame; docs/contact.md, On ROS), posed over time from
the recorded arrays (a free object's marker moves with it). A plane's marker is a 20 m square: it is cut to
``limit`` (the robots' extent) around the scene so the robots stay visible. ROS-free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from mbs_ros.analysis.reader import Recording, iter_messages
from mbs_ros.animate.geometry import _unit_faces
from mbs_ros.animate.poses import LinkPoses

__all__ = ["WorldShape", "world_shapes", "world_poses", "MARKER_ARRAY_TYPE"]

MARKER_ARRAY_TYPE = "visualization_msgs/msg/MarkerArray"
_KINDS = {1: "box", 2: "sphere", 3: "cylinder"}  # visualization_msgs/Marker CUBE, SPHERE, CYLINDER


@dataclass
class WorldShape:
    """One marker of ``<ns>/world/markers``: ``name`` (``<marker ns>#<id>``), ``kind`` (box, sphere, cylinder),
    ``size`` (its scale), ``color`` RGBA, ``stamps`` (N,) ns and ``T`` (N, 4, 4) its world pose at each."""

    name: str
    kind: str
    size: Tuple[float, float, float]
    color: Tuple[float, float, float, float]
    stamps: np.ndarray
    T: np.ndarray

    @property
    def moves(self) -> bool:
        return bool(len(self.T) > 1 and np.ptp(self.T[:, :3, :], axis=0).max() > 1e-9)


def _matrix(pose) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    q = pose.orientation
    T = np.eye(4)
    quat = np.array([q.x, q.y, q.z, q.w], dtype=float)
    if np.linalg.norm(quat) > 0:
        T[:3, :3] = Rotation.from_quat(quat).as_matrix()
    T[:3, 3] = (pose.position.x, pose.position.y, pose.position.z)
    return T


def world_shapes(rec: Recording) -> List[WorldShape]:
    """Every shape of the file's ``world/markers`` topics (module docstring), in the order first seen."""
    topics = [t for t, kind in sorted(rec.topics.items())
              if t.rsplit("/", 2)[-2:] == ["world", "markers"] and kind == MARKER_ARRAY_TYPE]
    if not topics:
        return []
    rows: Dict[str, list] = {}
    meta: Dict[str, tuple] = {}
    for _topic, _kind, _log, msg in iter_messages(rec.path, topics, rec.notes):
        if msg is None:
            continue
        for m in msg.markers:
            kind = _KINDS.get(int(m.type))
            if kind is None:
                continue
            name = f"{m.ns}#{m.id}"
            stamp = int(m.header.stamp.sec) * 1_000_000_000 + int(m.header.stamp.nanosec)
            rows.setdefault(name, []).append((stamp, _matrix(m.pose)))
            meta[name] = (kind, (float(m.scale.x), float(m.scale.y), float(m.scale.z)),
                          (float(m.color.r), float(m.color.g), float(m.color.b), float(m.color.a) or 1.0))
    out = []
    for name, data in rows.items():
        data.sort(key=lambda r: r[0])
        kind, size, color = meta[name]
        out.append(WorldShape(name, kind, size, color, np.array([r[0] for r in data], dtype=np.int64),
                              np.array([r[1] for r in data])))
    return out


def _faces(kind: str, size) -> tuple:
    if kind == "box":
        return _unit_faces("box", size)
    if kind == "cylinder":
        return _unit_faces("cylinder", (size[0] / 2.0, size[2]))
    return _unit_faces("sphere", (size[0] / 2.0,))


def world_poses(shapes: List[WorldShape], times_ns, t0: int, limit: Optional[Tuple[np.ndarray, float]] = None
                ) -> Optional[Tuple[LinkPoses, list]]:
    """``(poses, drawn shapes)`` of the world at ``times_ns`` for :class:`mbs_ros.animate.drawing._Drawn`: each
    shape's pose at the newest marker stamp at or before each time (its first before its first stamp);
    ``limit`` (centre (3,), extent [m]): a plane (a box thinner than 1 % of its width) is cut to 2 × extent
    around the centre's foot on it. None without shapes."""
    if not shapes:
        return None
    times_ns = np.asarray(times_ns, dtype=np.int64)
    T = np.empty((len(times_ns), len(shapes), 4, 4))
    drawn = []
    for i, s in enumerate(shapes):
        k = np.clip(np.searchsorted(s.stamps, times_ns, side="right") - 1, 0, len(s.stamps) - 1)
        T[:, i] = s.T[k]
        size = s.size
        T_shape = np.eye(4)
        if s.kind == "box" and limit is not None and min(size) < 0.01 * max(size[:2]) and max(size) > 2 * limit[1]:
            centre, extent = limit
            R, p = s.T[0, :3, :3], s.T[0, :3, 3]
            local = R.T @ (np.asarray(centre, float) - p)  # the centre in the plane's frame: stay on the plane
            T_shape[:2, 3] = local[:2]
            size = (2.0 * extent, 2.0 * extent, size[2])
        pts, faces = _faces(s.kind, size)
        drawn.append((i, T_shape, pts, faces, s.color))
    poses = LinkPoses("world", tuple(s.name for s in shapes), {}, (times_ns - t0) * 1e-9, T, "world/markers")
    return poses, drawn
