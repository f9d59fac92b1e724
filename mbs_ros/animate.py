"""The robot of a recorded run, drawn over time: ``python -m mbs_ros.plot FILE.mcap --animate OUT.gif|OUT.mp4``.

For people without a viewer: the links from the URDF's visuals (``<ns>/robot_description`` in the file, else
``--model``) posed from ``/tf`` or from the joint states with :class:`mbs_ros.dynamics.Model`, with the base
path, the base reference and the end-effector path. Mesh visuals (STL, DAE, OBJ, ...; ``package://`` URIs as
:mod:`mbs_ros.packages` resolves them) are read with trimesh and decimated to at most
:data:`MAX_ROBOT_TRIANGLES` triangles per robot. Sources, frames and formats: docs/plot.md.
"""

from __future__ import annotations

import functools
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.analysis.reader import PlotError, Recording

__all__ = ["AnimationError", "Visual", "RobotGeometry", "LinkPoses", "AnimationResult", "robot_from_urdf",
           "robots", "link_poses", "end_effector", "end_effector_path", "frame_times", "animate",
           "DEFAULT_FPS", "DEFAULT_MAX_FRAMES", "FORMATS"]

DEFAULT_FPS = 15.0
DEFAULT_MAX_FRAMES = 150
DEFAULT_SIZE = (6.4, 4.8)  # inches; at the default 100 dpi: 640 x 480 pixels
FORMATS = {".gif": "Pillow", ".mp4": "ffmpeg"}
DEFAULT_COLOR = (0.65, 0.67, 0.70, 1.0)
_CYLINDER_SIDES = 20
_SPHERE_RINGS, _SPHERE_SEGMENTS = 8, 14
_LIGHT = np.array([0.35, -0.5, 0.8]) / np.linalg.norm([0.35, -0.5, 0.8])
#: The triangles of a robot's meshes, shared among its mesh visuals (at least MIN_MESH_TRIANGLES each): matplotlib
#: draws every face of every frame in Python, so a robot of 10^5-triangle meshes is decimated to this.
MAX_ROBOT_TRIANGLES = 4000
MIN_MESH_TRIANGLES = 60


class AnimationError(PlotError):
    """The animation cannot be made: an unknown format, a missing encoder (ffmpeg), nothing to draw."""


# ------------------------------------------------------------------------------------------- geometry


@dataclass(frozen=True)
class Visual:
    """One shape rigidly attached to a link: ``kind`` box (``size``: sides), cylinder (radius, length along z),
    sphere (radius,) or mesh (``size``: the URDF's scale; ``mesh``: (points (k, 3), triangles (n, 3)), scaled,
    in the mesh's frame); ``T`` (4x4) places it in the link frame."""

    link: str
    kind: str
    size: Tuple[float, ...]
    T: np.ndarray = field(repr=False)
    color: Tuple[float, float, float, float] = DEFAULT_COLOR
    mesh: Optional[Tuple[np.ndarray, np.ndarray]] = field(default=None, repr=False)

    def geometry(self):
        """``(points (k, 3), faces)`` in the shape's frame: index arrays (one per face) or, for a mesh, an (n, 3)
        array of triangles."""
        return self.mesh if self.mesh is not None else _unit_faces(self.kind, self.size)


@dataclass
class RobotGeometry:
    """A robot as the animation draws it: the URDF (link names as the TF frames, ``<ns>/link``), where it came
    from (``source``), its tree (``parent``: child link -> parent link), joint types (joint -> type) and the
    ``visuals``; ``notes``: what is not drawn as the file says (meshes)."""

    ns: str
    source: str
    urdf: str = field(repr=False)
    root: str
    links: Tuple[str, ...]
    parent: Dict[str, str]
    joint_types: Dict[str, str]
    visuals: List[Visual]
    notes: List[str] = field(default_factory=list)


def _floats(text: Optional[str], n: int) -> Optional[Tuple[float, ...]]:
    try:
        values = tuple(float(v) for v in (text or "").split())
    except ValueError:
        return None
    return values if len(values) == n and all(math.isfinite(v) for v in values) else None


def _rgba(material, materials: Dict[str, tuple]) -> tuple:
    if material is None:
        return DEFAULT_COLOR
    color = material.find("color")
    rgba = _floats(color.get("rgba"), 4) if color is not None else None
    if rgba is None:
        rgba = materials.get(material.get("name") or "")
    return tuple(min(max(c, 0.0), 1.0) for c in rgba) if rgba else DEFAULT_COLOR


def robot_from_urdf(xml: str, ns: str, source: str, frame_of=None, base_dir: Optional[str] = None) -> RobotGeometry:
    """The robot of a URDF text. ``frame_of``: link name -> TF frame (default: the names as they are, as in a
    ``robot_description`` the dynamics node published); ``base_dir``: the directory relative mesh file names are
    in (the URDF file's). Raises ValueError (the reason) for a URDF the dynamics cannot read either."""
    from mbs_ros.dynamics.urdf import origin_matrix, parse_urdf

    if frame_of is not None:  # as mbs_ros.nodes.markers.prefixed_urdf (which needs ROS messages to import)
        tree = ET.fromstring(xml.encode("utf-8"))
        for link in tree.findall("link"):
            link.set("name", frame_of(link.get("name")))
        for joint in tree.findall("joint"):
            for end in ("parent", "child"):
                el = joint.find(end)
                if el is not None and el.get("link") is not None:
                    el.set("link", frame_of(el.get("link")))
        xml = ET.tostring(tree, encoding="unicode")
    spec = parse_urdf(xml)
    root = ET.fromstring(xml.encode("utf-8"))
    materials = {}
    for m in root.findall("material"):
        color = m.find("color")
        rgba = _floats(color.get("rgba"), 4) if color is not None else None
        if m.get("name") and rgba:
            materials[m.get("name")] = rgba
    visuals: List[Visual] = []
    notes: List[str] = []
    meshes: List[str] = []
    n_meshes = sum(1 for link in root.findall("link") for vis in link.findall("visual")
                   if vis.find("geometry/mesh") is not None)
    budget = max(MIN_MESH_TRIANGLES, MAX_ROBOT_TRIANGLES // max(n_meshes, 1))
    for link in root.findall("link"):
        name = link.get("name")
        drawn = False
        for vis in link.findall("visual"):
            geometry = vis.find("geometry")
            shape = next(iter(geometry), None) if geometry is not None else None
            if shape is None:
                continue
            origin = vis.find("origin")
            T = origin_matrix(origin.get("xyz", "0 0 0").split(), origin.get("rpy", "0 0 0").split()) \
                if origin is not None else np.eye(4)
            color = _rgba(vis.find("material"), materials)
            if shape.tag == "box" and (size := _floats(shape.get("size"), 3)):
                visuals.append(Visual(name, "box", size, T, color))
            elif shape.tag == "cylinder" and (r := _floats(shape.get("radius"), 1)) \
                    and (h := _floats(shape.get("length"), 1)):
                visuals.append(Visual(name, "cylinder", (r[0], h[0]), T, color))
            elif shape.tag == "sphere" and (r := _floats(shape.get("radius"), 1)):
                visuals.append(Visual(name, "sphere", r, T, color))
            elif shape.tag == "mesh":
                scale = _floats(shape.get("scale"), 3) or (1.0, 1.0, 1.0)
                mesh = _read_mesh(shape.get("filename") or "", base_dir, budget)
                if isinstance(mesh, str):
                    meshes.append(f"{name} ({mesh})")
                    continue
                pts, tris = mesh
                visuals.append(Visual(name, "mesh", scale, T, color, (pts * np.asarray(scale), tris)))
            else:
                continue
            drawn = True
        if not drawn:  # no visual, or a mesh: the equivalent-inertia box, as the node's markers
            box = _inertia_box(spec.links.get(name))
            if box is not None:
                visuals.append(Visual(name, "box", box[0], box[1], DEFAULT_COLOR))
    if meshes:
        notes.append(f"{ns or '/'}: mesh visuals not read, drawn as the link's equivalent-inertia box: "
                     + "; ".join(meshes))
    parent = {j.child: j.parent for j in spec.joints}
    types = {j.name: j.type for j in spec.joints}
    return RobotGeometry(ns, source, xml, spec.root, tuple(spec.links), parent, types, visuals, notes)


def _read_mesh(uri: str, base_dir: Optional[str], budget: int):
    """``(points (k, 3), triangles (n, 3))`` of a mesh visual's file, at most ``budget`` triangles, or the reason
    (one line naming the file, never its content) it cannot be read."""
    from mbs_ros.packages import resolve_uri

    if uri.startswith("package:///"):  # an empty package name, as Pinocchio reads it: the path's first directory
        uri = "package://" + uri[len("package:///"):]
    resolved = resolve_uri(uri, base_dir)
    if resolved.path is None:
        return resolved.reason or f"{uri!r} not found"
    try:
        return _mesh_file(resolved.path, budget)
    except ImportError:
        return "trimesh is not installed (make setup installs it)"
    except Exception as e:  # noqa: BLE001 - any reader failure is one note, the robot is still drawn
        return f"{os.path.basename(resolved.path)}: cannot be read ({type(e).__name__})"


@functools.lru_cache(maxsize=256)
def _mesh_file(path: str, budget: int) -> Tuple[np.ndarray, np.ndarray]:
    """The triangles of the mesh file at ``path`` (every part of a scene, in the file's frame), decimated to at
    most ``budget`` (:func:`decimate`)."""
    import trimesh

    mesh = trimesh.load(path, force="mesh", process=False)
    pts = np.asarray(mesh.vertices, dtype=float)
    tris = np.asarray(mesh.faces, dtype=np.int64).reshape(-1, 3)
    if not len(tris) or not np.all(np.isfinite(pts)):
        raise ValueError("no finite triangles")
    pts, tris = decimate(pts, tris, budget)
    pts.setflags(write=False)
    tris.setflags(write=False)
    return pts, tris


def decimate(points: np.ndarray, triangles: np.ndarray, budget: int) -> Tuple[np.ndarray, np.ndarray]:
    """At most ``budget`` triangles of the mesh ``(points, triangles)``, by vertex clustering: the points are
    merged on a grid over the mesh's bounding box (finer grids first), triangles whose corners merge drop out, and
    the finest grid within the budget is kept. The bounding box is kept to within one grid cell."""
    if len(triangles) <= budget:
        return points, triangles
    lo, hi = points.min(axis=0), points.max(axis=0)
    span = np.maximum(hi - lo, 1e-12 * max(float((hi - lo).max()), 1e-12))
    cells = max(2, int(math.sqrt(budget)))
    while True:
        key = np.floor((points - lo) / span * cells).clip(0, cells - 1).astype(np.int64)
        flat = (key[:, 0] * (cells + 1) + key[:, 1]) * (cells + 1) + key[:, 2]
        ids, inverse = np.unique(flat, return_inverse=True)
        t = inverse.reshape(-1)[triangles]
        keep = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])
        t = np.unique(np.sort(t[keep], axis=1), axis=0)
        if len(t) <= budget or cells <= 2:
            break
        cells = max(2, int(cells * 0.8))
    sums = np.zeros((len(ids), 3))
    np.add.at(sums, inverse.reshape(-1), points)
    centres = sums / np.bincount(inverse.reshape(-1), minlength=len(ids))[:, None]
    return centres, t[:budget]


def _inertia_box(link) -> Optional[Tuple[tuple, np.ndarray]]:
    """(sides, T_link_box) of the uniform box with the link's mass and inertia (as mbs_ros.nodes.markers)."""
    if link is None or not link.mass > 0.0:
        return None
    inertia = np.asarray(link.inertia, float).reshape(3, 3)
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    sides = np.sqrt(np.clip(6.0 / float(link.mass) * (moments.sum() - 2.0 * moments), 0.0, None))
    sides = np.maximum(sides, 0.02 * max(float(sides.max()), 1e-3))
    T = np.eye(4)
    T[:3, :3] = axes
    T[:3, 3] = np.asarray(link.com, float).reshape(3)
    return tuple(float(s) for s in sides), T


def _namespaces(rec: Recording) -> List[str]:
    """The robots of a file: namespaces with states, references, energy or a robot_description."""
    return sorted(set(rec.namespaces) | set(rec.robot_description))


def _prefixer(ns: str, root: str):
    prefix = ns.strip("/") + "/" if ns.strip("/") else ""

    def frame_of(link: str) -> str:
        return link if (link == "world" and root == "world") else prefix + link
    return frame_of


def _model_sources(model: str, namespaces: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """``--model``: ns -> (URDF text, description) from a scenario (its robots by namespace) or a model file
    (every namespace)."""
    from mbs_ros.dynamics import model_source as ms

    text = str(model)
    path = Path(os.path.expanduser(text))
    scenario = None
    if path.suffix.lower() in (".yaml", ".yml") and path.is_file():
        from mbs_ros.yamlfile import YamlFileError, read_yaml
        try:
            doc = read_yaml(path)
        except YamlFileError as e:
            raise AnimationError(f"--model {e}") from None
        if isinstance(doc, dict) and "robots" in doc:
            scenario = path
    elif not path.exists():  # a scenario's name
        from mbs_ros.bringup.scenario import scenario_path
        try:
            scenario = scenario_path(text)
        except FileNotFoundError as e:
            raise AnimationError(f"--model {text}: not a file, and {e}") from None
    out: Dict[str, Tuple[str, str]] = {}
    if scenario is not None:
        from mbs_ros.bringup.scenario import ScenarioError, load_scenario
        try:
            sc = load_scenario(scenario)
        except (ScenarioError, ValueError, OSError) as e:
            raise AnimationError(f"--model {text}: {e}") from None
        for robot in sc.robots:
            dyn = robot.dynamics
            try:
                src = ms.load_source(str(dyn.get("robot_description", "") or ""),
                                     "" if dyn.get("robot_description") else (robot.model_file or ""))
            except ValueError as e:
                raise AnimationError(f"--model {text}: robot {robot.namespace}: {e}") from None
            if src.urdf:
                out[robot.namespace] = (src.urdf, f"--model {text} (robot {robot.namespace})")
        return out
    try:
        src = ms.load_source("", str(path))
    except ValueError as e:
        raise AnimationError(f"--model {text}: {e}") from None
    if not src.urdf:
        raise AnimationError(f"--model {text}: no URDF in it")
    return {ns: (src.urdf, f"--model {text}") for ns in namespaces}


def robots(rec: Recording, model: Optional[str] = None, notes: Optional[List[str]] = None
           ) -> Dict[str, RobotGeometry]:
    """ns -> the robot, from ``<ns>/robot_description`` in the file, else from ``model`` (``--model``; see
    docs/plot.md). A namespace with neither is left out, with a note."""
    notes = rec.notes if notes is None else notes
    namespaces = _namespaces(rec)
    out: Dict[str, RobotGeometry] = {}
    for ns, xml in rec.robot_description.items():
        try:
            out[ns] = robot_from_urdf(xml, ns, f"{ns}/robot_description")
        except ValueError as e:
            notes.append(f"{ns}/robot_description cannot be read ({e})")
    missing = [ns for ns in namespaces if ns not in out]
    path = Path(os.path.expanduser(str(model or "")))
    base_dir = str(path.resolve().parent) if model and path.is_file() else None  # a model file's relative meshes
    if model and missing:
        for ns, (xml, where) in _model_sources(model, missing).items():
            if ns not in missing:
                continue
            try:
                root = ET.fromstring(xml.encode("utf-8"))
                links = [link.get("name") for link in root.findall("link")]
                children = {j.find("child").get("link") for j in root.findall("joint") if j.find("child") is not None}
                top = next((n for n in links if n not in children), "")
                out[ns] = robot_from_urdf(xml, ns, where, frame_of=_prefixer(ns, top), base_dir=base_dir)
            except (ValueError, ET.ParseError) as e:
                notes.append(f"{where}: cannot be read for {ns or '/'} ({e})")
    for r in out.values():
        notes.extend(r.notes)
    return out


# ------------------------------------------------------------------------------------------- poses


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
    from mbs_ros.dynamics.urdf import ModelWarning

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


# ------------------------------------------------------------------------------------------- drawing


def _unit_faces(kind: str, size: Sequence[float]) -> Tuple[np.ndarray, List[np.ndarray]]:
    """(points (k, 3), faces: index arrays) of a shape in its own frame."""
    if kind == "box":
        h = np.asarray(size, float) / 2.0
        pts = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float) * h
        faces = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
        return pts, [np.array(f) for f in faces]
    if kind == "cylinder":
        r, length = size
        a = np.linspace(0.0, 2 * np.pi, _CYLINDER_SIDES, endpoint=False)
        ring = np.stack([r * np.cos(a), r * np.sin(a)], axis=1)
        pts = np.vstack([np.column_stack([ring, np.full(len(a), -length / 2)]),
                         np.column_stack([ring, np.full(len(a), length / 2)])])
        n = _CYLINDER_SIDES
        faces = [np.array([k, (k + 1) % n, n + (k + 1) % n, n + k]) for k in range(n)]
        faces += [np.arange(n)[::-1], np.arange(n, 2 * n)]
        return pts, faces
    r = size[0]
    theta = np.linspace(0.0, np.pi, _SPHERE_RINGS + 1)
    phi = np.linspace(0.0, 2 * np.pi, _SPHERE_SEGMENTS, endpoint=False)
    pts = np.array([[r * math.sin(t) * math.cos(p), r * math.sin(t) * math.sin(p), r * math.cos(t)]
                    for t in theta for p in phi])
    m = _SPHERE_SEGMENTS
    faces = [np.array([i * m + j, i * m + (j + 1) % m, (i + 1) * m + (j + 1) % m, (i + 1) * m + j])
             for i in range(_SPHERE_RINGS) for j in range(m)]
    return pts, faces


@dataclass
class _Drawn:
    """One robot's part of the scene: its visuals (or points), base path, reference and end effector path."""

    ns: str
    poses: LinkPoses
    robot: Optional[RobotGeometry]
    shapes: list  # (link index, T_link_shape, points (k, 3), faces, color)
    base_path: Optional[np.ndarray] = None  # (N, 3) odom positions
    base_t: Optional[np.ndarray] = None
    reference: Optional[np.ndarray] = None  # (N, 3) at base_t
    ee: Optional[int] = None  # index of the end effector frame

    def faces(self, k: int):
        """World faces and their colours at frame k."""
        out, colors = [], []
        T_links = self.poses.T[k]
        for li, T_ls, pts, faces, color in self.shapes:
            T = T_links[li] @ T_ls
            world = pts @ T[:3, :3].T + T[:3, 3]
            if isinstance(faces, np.ndarray):  # a mesh's triangles, all at once
                tri = world[faces]
                normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
                n = np.linalg.norm(normal, axis=1)
                shade = np.where(n > 1e-15, 0.45 + 0.55 * np.abs(normal @ _LIGHT) / np.maximum(n, 1e-300), 0.7)
                out.extend(tri)
                colors.extend((color[0] * x, color[1] * x, color[2] * x, color[3]) for x in shade.tolist())
                continue
            for f in faces:
                poly = world[f]
                out.append(poly)
                normal = np.cross(poly[1] - poly[0], poly[2] - poly[0])
                n = np.linalg.norm(normal)
                shade = 0.45 + 0.55 * abs(float(normal @ _LIGHT)) / n if n > 1e-15 else 0.7
                colors.append((color[0] * shade, color[1] * shade, color[2] * shade, color[3]))
        return out, colors

    def points(self) -> np.ndarray:
        """Every point the scene holds over the run (for the view's limits)."""
        chunks = [self.poses.T[:, :, :3, 3].reshape(-1, 3)]
        for li, T_ls, pts, _faces, _color in self.shapes:
            T = self.poses.T[:, li] @ T_ls  # (F, 4, 4)
            chunks.append((pts @ T[:, :3, :3].transpose(0, 2, 1) + T[:, None, :3, 3]).reshape(-1, 3))
        for extra in (self.base_path, self.reference):
            if extra is not None:
                chunks.append(extra[np.all(np.isfinite(extra), axis=1)])
        return np.vstack(chunks)


def frame_times(start_ns: int, end_ns: int, fps: float = DEFAULT_FPS, max_frames: int = DEFAULT_MAX_FRAMES):
    """``(stamps (F,) int64, speed)``: every 1/fps s of the run when that is at most ``max_frames`` frames
    (speed 1: real time), else ``max_frames`` frames evenly from start to end, played ``speed`` times faster."""
    if fps <= 0 or max_frames < 1:
        raise AnimationError(f"fps must be > 0 and max_frames >= 1, got {fps} and {max_frames}")
    duration = max(0, int(end_ns) - int(start_ns)) * 1e-9
    n = int(math.floor(duration * fps + 1e-9)) + 1
    if n <= max_frames:
        return start_ns + np.round(np.arange(n) / fps * 1e9).astype(np.int64), 1.0
    stamps = np.round(np.linspace(start_ns, end_ns, max_frames)).astype(np.int64)
    return stamps, (duration / (max_frames - 1)) * fps if max_frames > 1 else 1.0


@dataclass
class AnimationResult:
    path: Path
    frames: int
    fps: float
    speed: float  # simulation seconds per second of the animation
    size: Tuple[int, int]  # pixels
    sources: Dict[str, str]  # ns -> where the poses came from
    drawn_as: Dict[str, str]  # ns -> "shapes from …" or "frames as points"


def _writer(path: Path, fps: float):
    from matplotlib import animation

    suffix = path.suffix.lower()
    if suffix == ".gif":
        return animation.PillowWriter(fps=fps)
    if suffix == ".mp4":
        if not animation.FFMpegWriter.isAvailable():
            import matplotlib
            raise AnimationError(
                f"{path}: writing .mp4 needs ffmpeg, which is not on PATH (matplotlib's FFMpegWriter looks for "
                f"{matplotlib.rcParams['animation.ffmpeg_path']!r}). Install it (e.g. apt-get install ffmpeg) or "
                "write a .gif instead (Pillow, no ffmpeg needed)")
        return animation.FFMpegWriter(fps=fps, codec="h264", extra_args=["-pix_fmt", "yuv420p"])
    raise AnimationError(f"{path}: unknown animation format {suffix or '(no suffix)'!r}: write .gif (Pillow) or "
                         ".mp4 (ffmpeg)")


def _set(line, xyz: np.ndarray) -> None:
    """A 3D line's points (n, 3); NaN rows break it (mplot3d wants arrays for that)."""
    xyz = np.asarray(xyz, dtype=float).reshape(-1, 3)
    line.set_data_3d(xyz[:, 0].copy(), xyz[:, 1].copy(), xyz[:, 2].copy())


def animate(rec: Recording, out, *, model: Optional[str] = None, fps: float = DEFAULT_FPS,
            max_frames: int = DEFAULT_MAX_FRAMES, dpi: float = 100.0, size: Tuple[float, float] = DEFAULT_SIZE,
            view: Tuple[float, float] = (25.0, -60.0), source: str = "auto",
            notes: Optional[List[str]] = None) -> AnimationResult:
    """Write the animation of every robot in ``rec`` to ``out`` (``.gif`` or ``.mp4``); see the module
    docstring. ``model``: ``--model`` (a scenario or a model file) for robots without robot_description in the
    file; ``source``: see :func:`link_poses`. Notes (what was drawn how) go to ``notes`` (default
    ``rec.notes``). :class:`AnimationError` when nothing can be drawn or the format cannot be written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    from mbs_ros.analysis.series import base_tracking

    out = Path(out)
    notes = rec.notes if notes is None else notes
    writer = _writer(out, fps)  # fails before any work for a format that cannot be written
    geometry = robots(rec, model, notes)
    namespaces = sorted(set(_namespaces(rec)) | set(geometry))
    if not namespaces and (rec.tf or rec.tf_static):  # /tf alone: a robot per frame prefix
        namespaces = sorted({"/" + f.rsplit("/", 1)[0] for f in _tf_parents(rec) if "/" in f}) or [""]
    # the time span: every stamp a pose can change at
    spans = [s for ns in namespaces if (s := _pose_stamps(rec, ns, geometry.get(ns))) is not None and len(s)]
    if not spans:
        raise AnimationError(f"{rec.path}: nothing to animate: no /tf, no <ns>/odom and no <ns>/joint_states "
                             f"(topics: {', '.join(sorted(rec.topics)) or 'none'})")
    start, end = min(int(s[0]) for s in spans), max(int(s[-1]) for s in spans)
    stamps, speed = frame_times(start, end, fps, max_frames)
    scene: List[_Drawn] = []
    sources, drawn_as = {}, {}
    for ns in namespaces:
        robot = geometry.get(ns)
        poses = link_poses(rec, ns, stamps, robot, source)
        if poses is None:
            if robot is not None or ns in rec.odom or ns in rec.joint_states:
                notes.append(f"{ns or '/'}: no /tf frames and no {ns}/odom or joint_states to pose "
                             f"{'its links' if robot else 'it'}: not drawn")
            continue
        label = ns or "/"
        shapes = []
        if robot is not None:
            index = {f: i for i, f in enumerate(poses.frames)}
            lost = sorted({v.link for v in robot.visuals if v.link not in index})
            for v in robot.visuals:
                if v.link in index:
                    pts, faces = v.geometry()
                    shapes.append((index[v.link], v.T, pts, faces, v.color))
            if lost:
                notes.append(f"{label}: links {', '.join(lost)} are not in {poses.source}: not drawn")
            drawn_as[ns] = f"shapes from {robot.source}"
        else:
            drawn_as[ns] = "frames as points"
            what = "link frames of /tf as points" if poses.source.startswith("/tf") else "its base (odom) as a point"
            notes.append(f"{label}: no {ns}/robot_description in the file and no --model: {what} (record "
                         f"robot_description, or pass --model SCENARIO|MODEL_FILE, for the link shapes)")
        sources[ns] = poses.source
        d = _Drawn(ns, poses, robot, shapes)
        odom = rec.odom.get(ns)
        if odom is not None and len(odom) and np.ptp(odom[:, :3], axis=0).max() > 1e-6:
            d.base_path, d.base_t = odom[:, :3], (rec.odom_stamps[ns] - rec.t0()) * 1e-9
            if ns in rec.base_reference:
                bt = base_tracking(rec, ns)
                if bt is not None:
                    d.reference = bt.p_ref
        if len(poses.frames) > 1 and poses.parent:
            d.ee = poses.index(end_effector(poses))
        scene.append(d)
    if not scene:
        raise AnimationError(f"{rec.path}: nothing to animate (see the notes)")

    # the view: every point of every frame, equal scale on the three axes
    pts = np.vstack([d.points() for d in scene])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    span = hi - lo
    extent = max(float(span.max()), 0.2)
    half = np.maximum(span, 0.25 * extent) / 2.0 + 0.06 * extent
    centre = (lo + hi) / 2.0
    fig = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((-0.03, 0.0, 1.06, 0.94), projection="3d")
    ax.set_xlim(centre[0] - half[0], centre[0] + half[0])
    ax.set_ylim(centre[1] - half[1], centre[1] + half[1])
    ax.set_zlim(centre[2] - half[2], centre[2] + half[2])
    ax.set_box_aspect(tuple(half), zoom=0.96)
    ax.set(xlabel="x [m]", ylabel="y [m]", zlabel="z [m]")
    for axis in (ax.xaxis, ax.yaxis, ax.zaxis):
        axis.label.set_fontsize(8)
    ax.tick_params(labelsize=7)
    ax.view_init(elev=view[0], azim=view[1])
    # the links first, the paths over them: a base path runs inside the base's box, where it would never show
    ax.computed_zorder = False
    polys = Poly3DCollection([], edgecolors=(0.1, 0.1, 0.1, 0.25), linewidths=0.3, zorder=1)
    ax.add_collection3d(polys)
    artists = []
    tick = 0.08 * extent
    for i, d in enumerate(scene):
        color = f"C{i % 10}"
        a = {}
        if d.base_path is not None:
            ax.plot(*d.base_path.T, color="0.5", lw=0.8, ls=":", zorder=4)
            a["trail"], = ax.plot([], [], [], color=color, lw=1.5, zorder=5, label=f"{d.ns or '/'} base path")
            if d.reference is not None:
                ok = np.all(np.isfinite(d.reference), axis=1)
                ax.plot(*d.reference[ok].T, color="k", lw=0.8, ls="--", zorder=4,
                        label=f"{d.ns or '/'} base reference")
                a["ref"], = ax.plot([], [], [], "kx", ms=7, mew=1.5, zorder=6)
        if d.ee is not None:
            name = d.poses.frames[d.ee]
            a["ee"], = ax.plot([], [], [], color="tab:red", lw=1.0, alpha=0.8, zorder=5,
                               label=f"end effector ({name})")
        if not d.shapes:
            a["links"], = ax.plot([], [], [], "-", color=color, lw=1.5, marker="o", ms=3, zorder=3)
            a["triad"] = [ax.plot([], [], [], color=c, lw=1.5, zorder=3)[0]
                          for c in ("tab:red", "tab:green", "tab:blue")]
        artists.append(a)
    if any(ax.get_legend_handles_labels()[1]):
        ax.legend(loc="upper right", fontsize=7, frameon=False)
    what = ", ".join(f"{d.ns or '/'}: {drawn_as[d.ns]}; poses from {sources[d.ns]}" for d in scene)
    fig.text(0.99, 0.985, f"{rec.path.name}", ha="right", va="top", fontsize=7, color="0.3")
    fig.text(0.99, 0.955, what if len(what) < 110 else what[:107] + "…", ha="right", va="top", fontsize=6,
             color="0.4")
    clock = fig.text(0.01, 0.985, "", ha="left", va="top", fontsize=11, family="monospace")
    suffix = "" if abs(speed - 1.0) < 1e-6 else f"  (×{speed:.2g} speed)"

    def draw(k: int) -> None:
        faces, colors = [], []
        for d, a in zip(scene, artists):
            t = d.poses.t[k]
            f, c = d.faces(k)
            faces += f
            colors += c
            if "trail" in a:
                n = int(np.searchsorted(d.base_t, t, side="right"))
                _set(a["trail"], d.base_path[:max(n, 1)])
                if "ref" in a:
                    p = d.reference[max(n - 1, 0)]
                    _set(a["ref"], p[None])
            if "ee" in a:
                p = d.poses.T[:k + 1, d.ee, :3, 3]
                _set(a["ee"], p)
            if "links" in a:
                T = d.poses.T[k]
                xyz = []
                for j, frame in enumerate(d.poses.frames):
                    xyz.append(T[j, :3, 3])
                    if frame in d.poses.parent:
                        xyz += [T[d.poses.index(d.poses.parent[frame]), :3, 3], np.full(3, np.nan)]
                    else:
                        xyz.append(np.full(3, np.nan))
                _set(a["links"], np.array(xyz))
                for axis, line in enumerate(a["triad"]):
                    o = T[0, :3, 3]
                    e = o + tick * T[0, :3, axis]
                    _set(line, np.array([o, e]))
        if faces:
            # one array, every face padded to the longest by repeating its last corner (the same polygon):
            # mplot3d pads a ragged list with uninitialised memory, and projects it (overflow warnings)
            width = max(len(f) for f in faces)
            padded = np.array([f if len(f) == width else np.vstack([f, np.repeat(f[-1:], width - len(f), 0)])
                               for f in faces])
            polys.set_verts(padded)
            polys.set_facecolor(colors)
        polys.set_visible(bool(faces))
        clock.set_text(f"t = {scene[0].poses.t[k]:6.2f} s{suffix}")

    with writer.saving(fig, str(out), dpi):
        for k in range(len(stamps)):
            draw(k)
            writer.grab_frame()
    w, h = fig.canvas.get_width_height()
    return AnimationResult(out, len(stamps), fps, speed, (int(w), int(h)), sources, drawn_as)
