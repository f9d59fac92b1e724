"""Where a robot's links are over time: from ``/tf``, else from the joint states and the base pose through
:class:`mbs_ros.dynamics.Model`; the end effector and its path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.analysis.reader import Recording
from mbs_ros.animate.geometry import RobotGeometry


@dataclass
class LinkPoses:
    """World poses of a robot's frames at the times ``t`` [s from Recording.t0()]: ``T`` (F, L, 4, 4) in
    ``frames`` order; ``parent``: frame -> parent frame (within ``frames``, or the world); ``source`` says where
    they came from (``/tf``, ``odom + joint_states + Model(<ns>/robot_description)``, ``odom``)."""

    ns: str
    frames: Tuple[str, ...]
    parent: Dict[str, str]
    t: np.ndarray
    T: np.ndarray
    source: str

    def index(self, frame: str) -> int:
        return self.frames.index(frame)


def _matrices(poses: np.ndarray) -> np.ndarray:
    """(..., 7) [x y z qx qy qz qw] -> (..., 4, 4)."""
    poses = np.asarray(poses, float)
    q = poses[..., 3:7]
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    q = np.where(n > 1e-12, q / np.where(n > 1e-12, n, 1.0), np.array([0.0, 0.0, 0.0, 1.0]))
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    T = np.zeros(poses.shape[:-1] + (4, 4))
    T[..., 0, 0] = 1 - 2 * (y * y + z * z)
    T[..., 0, 1] = 2 * (x * y - z * w)
    T[..., 0, 2] = 2 * (x * z + y * w)
    T[..., 1, 0] = 2 * (x * y + z * w)
    T[..., 1, 1] = 1 - 2 * (x * x + z * z)
    T[..., 1, 2] = 2 * (y * z - x * w)
    T[..., 2, 0] = 2 * (x * z - y * w)
    T[..., 2, 1] = 2 * (y * z + x * w)
    T[..., 2, 2] = 1 - 2 * (x * x + y * y)
    T[..., :3, 3] = poses[..., :3]
    T[..., 3, 3] = 1.0
    return T


def _at(stamps: np.ndarray, times_ns: np.ndarray) -> np.ndarray:
    """Index of the latest sample stamped at or before each time (the first sample before it)."""
    return np.clip(np.searchsorted(stamps, times_ns, side="right") - 1, 0, len(stamps) - 1)


def _tf_parents(rec: Recording) -> Dict[str, str]:
    parents = {child: v[0] for child, v in rec.tf_static.items()}
    parents.update({child: v[0] for child, v in rec.tf.items()})
    return parents


def _tf_world(rec: Recording, frames: Sequence[str], times_ns: np.ndarray) -> np.ndarray:
    """(F, len(frames), 4, 4): each frame's pose in the root of its TF tree (the world)."""
    parents = _tf_parents(rec)
    cache: Dict[str, np.ndarray] = {}
    F = len(times_ns)

    def world(frame: str, depth: int = 0) -> np.ndarray:
        if frame in cache:
            return cache[frame]
        if frame not in parents or depth > 1000:  # the root (or a loop): the world
            out = np.broadcast_to(np.eye(4), (F, 4, 4))
        else:
            if frame in rec.tf:
                _parent, stamps, poses = rec.tf[frame]
                local = _matrices(poses[_at(stamps, times_ns)])
            else:
                local = np.broadcast_to(_matrices(rec.tf_static[frame][1]), (F, 4, 4))
            out = world(parents[frame], depth + 1) @ local
        cache[frame] = out
        return out

    return np.stack([world(f) for f in frames], axis=1) if frames else np.zeros((F, 0, 4, 4))


def _tf_robot_frames(rec: Recording, ns: str, robot: Optional[RobotGeometry]) -> List[str]:
    """The robot's frames in /tf + /tf_static: its base frame and everything below it."""
    parents = _tf_parents(rec)
    known = set(parents) | set(parents.values())
    children: Dict[str, List[str]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    base = None
    candidates = [rec.odom_frames.get(ns, ("", ""))[1]]
    if robot is not None:
        candidates.append(robot.root)
    for c in candidates:
        if c and c in known:
            base = c
            break
    if base is None:
        prefix = ns.strip("/") + "/"
        tops = sorted(f for f in known if f.startswith(prefix) and not parents.get(f, "").startswith(prefix))
        if not ns.strip("/") or not tops:
            return []
        roots = tops
    else:
        roots = [base]
    out: List[str] = []
    stack = list(reversed(roots))
    while stack:
        f = stack.pop()
        if f in out:
            continue
        out.append(f)
        stack.extend(sorted(children.get(f, []), reverse=True))
    return out


def _joint_matrix(rec: Recording, ns: str, names: Sequence[str]):
    """(stamps (N,), Q (N, len(names))) of ``<ns>/joint_states``, sorted, a joint missing from a message holding its
    last value (0 before any); None without messages."""
    rows = sorted(rec.joint_states.get(ns) or [], key=lambda r: (r[1], r[0]))
    if not rows:
        return None
    col = {n: i for i, n in enumerate(names)}
    Q = np.full((len(rows), len(names)), np.nan)
    for k, (_log, _stamp, row_names, pos) in enumerate(rows):
        for name, value in zip(row_names, pos):
            if name in col:
                Q[k, col[name]] = value
    for k in range(1, len(rows)):
        gap = np.isnan(Q[k])
        Q[k, gap] = Q[k - 1, gap]
    return np.array([r[1] for r in rows], dtype=np.int64), np.nan_to_num(Q)


def _model_poses(rec: Recording, ns: str, robot: RobotGeometry, times_ns: np.ndarray) -> Optional[LinkPoses]:
    """The links from odom + joint_states with the Model of the robot's URDF (docs/plot.md)."""
    import warnings

    from mbs_ros.dynamics import Model
    from mbs_ros.dynamics.model.urdf import ModelWarning

    model = None
    for base in ("fixed", "se3"):  # the root at the identity; odom places the base
        try:
            with warnings.catch_warnings():  # what the loader repaired: the dynamics node reported it at its start
                warnings.simplefilter("ignore", ModelWarning)
                model = Model.from_urdf(robot.urdf, base=base, max_mass_ratio=None)
            break
        except ValueError:
            continue
    if model is None:
        return None
    odom = rec.odom.get(ns)
    has_odom = odom is not None and len(odom) > 0
    joints = _joint_matrix(rec, ns, model.joint_names) if model.joint_names else None
    if not has_odom and joints is None:
        return None
    F = len(times_ns)
    nqj = sum(2 if t == "continuous" else 1 for t in model.joint_types)
    q = np.tile(model.neutral(), (F, 1))
    if joints is not None:
        stamps, Q = joints
        values = Q[_at(stamps, times_ns)]
        cols, i = [], model.nq - nqj
        for j, t in enumerate(model.joint_types):
            if t == "continuous":
                q[:, i], q[:, i + 1] = np.cos(values[:, j]), np.sin(values[:, j])
                i += 2
            else:
                q[:, i] = values[:, j]
                i += 1
    links = tuple(model.link_names)
    P = np.stack([model.link_poses(qk) for qk in q])  # (F, L, 4, 4), the root at the identity
    base = rec.odom_frames.get(ns, ("", ""))[1]
    if has_odom:
        b = links.index(base) if base in links else 0
        T_wb = _matrices(odom[_at(rec.odom_stamps[ns], times_ns)])
        P = (T_wb @ np.linalg.inv(P[:, b]))[:, None] @ P
    parent = {link: robot.parent[link] for link in links if link in robot.parent}
    return LinkPoses(ns, links, parent, (times_ns - rec.t0()) * 1e-9, P,
                     f"{ns}/odom + {ns}/joint_states + Model({robot.source})")


def link_poses(rec: Recording, ns: str, times_ns, robot: Optional[RobotGeometry] = None,
               source: str = "auto") -> Optional[LinkPoses]:
    """The robot's frames at ``times_ns`` (stamps, ns). ``source``: ``tf`` (/tf + /tf_static), ``model``
    (odom + joint_states with the robot's Model: needs ``robot``), ``odom`` (the base alone) or ``auto``: tf when
    it holds the robot's links (all links with a visual, when the robot is known), else the model, else tf with
    whatever frames it has, else odom. None when none of them is in the file."""
    times_ns = np.asarray(times_ns, dtype=np.int64)
    tf_frames = _tf_robot_frames(rec, ns, robot) if source in ("auto", "tf") else []
    if source in ("auto", "model") and robot is not None:
        wanted = {v.link for v in robot.visuals} or set(robot.links)
        if source == "model" or not wanted <= set(tf_frames):
            poses = _model_poses(rec, ns, robot, times_ns)
            if poses is not None or source == "model":
                return poses
    if tf_frames:
        parents = _tf_parents(rec)
        inside = set(tf_frames)
        parent = {f: parents[f] for f in tf_frames if parents.get(f) in inside}
        return LinkPoses(ns, tuple(tf_frames), parent, (times_ns - rec.t0()) * 1e-9,
                         _tf_world(rec, tf_frames, times_ns), "/tf" + (" + /tf_static" if rec.tf_static else ""))
    if source in ("auto", "odom"):
        odom = rec.odom.get(ns)
        if odom is not None and len(odom):
            frame = rec.odom_frames.get(ns, ("", ""))[1] or f"{ns.strip('/')}/base".lstrip("/")
            T = _matrices(odom[_at(rec.odom_stamps[ns], times_ns)])[:, None]
            return LinkPoses(ns, (frame,), {}, (times_ns - rec.t0()) * 1e-9, T, f"{ns}/odom")
    return None


def end_effector(poses: LinkPoses) -> str:
    """The end effector: the frame deepest in the tree, the last such in ``poses.frames`` order."""
    def depth(f: str) -> int:
        d = 0
        while f in poses.parent and d < 1000:
            f, d = poses.parent[f], d + 1
        return d
    depths = [depth(f) for f in poses.frames]
    best = max(depths)
    return [f for f, d in zip(poses.frames, depths) if d == best][-1]


def _pose_stamps(rec: Recording, ns: str, robot: Optional[RobotGeometry]) -> Optional[np.ndarray]:
    """The stamps a robot's poses change at: joint_states, else odom, else its frames' /tf stamps."""
    rows = rec.joint_states.get(ns)
    if rows:
        return np.unique(np.array([r[1] for r in rows], dtype=np.int64))
    if ns in rec.odom_stamps and len(rec.odom_stamps[ns]):
        return np.unique(rec.odom_stamps[ns])
    stamps = [rec.tf[f][1] for f in _tf_robot_frames(rec, ns, robot) if f in rec.tf]
    return np.unique(np.concatenate(stamps)) if stamps else None


def end_effector_path(rec: Recording, ns: str, robot: Optional[RobotGeometry] = None):
    """``(t (N,) [s], p (N, 3) [m], frame, source)``: the end effector's origin at each state stamp, from /tf or
    the model (see :func:`link_poses`); None when the file has neither, or the robot has a single frame."""
    stamps = _pose_stamps(rec, ns, robot)
    if stamps is None or not len(stamps):
        return None
    poses = link_poses(rec, ns, stamps, robot)
    if poses is None or len(poses.frames) < 2 or not poses.parent:
        return None
    frame = end_effector(poses)
    return poses.t, poses.T[:, poses.index(frame), :3, 3].copy(), frame, poses.source
