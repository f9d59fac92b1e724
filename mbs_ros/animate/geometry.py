"""A robot's shape for the animation: its links' visuals from the URDF (boxes, cylinders, spheres, meshes read with
trimesh and decimated to a budget per robot; the inertia box where a link has none), and the robots of a recording
(``<ns>/robot_description`` in the file, else ``--model``)."""

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

DEFAULT_COLOR = (0.65, 0.67, 0.70, 1.0)
_CYLINDER_SIDES = 20
_SPHERE_RINGS, _SPHERE_SEGMENTS = 8, 14
#: The triangles of a robot's meshes, shared among its mesh visuals (at least MIN_MESH_TRIANGLES each): matplotlib
#: draws every face of every frame in Python, so a robot of 10^5-triangle meshes is decimated to this.
MAX_ROBOT_TRIANGLES = 4000
MIN_MESH_TRIANGLES = 60


class AnimationError(PlotError):
    """The animation cannot be made: an unknown format, a missing encoder (ffmpeg), nothing to draw."""


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
    from mbs_ros.dynamics.model.urdf import origin_matrix, parse_urdf

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
    from mbs_ros.dynamics.model import source as ms

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
        from mbs_ros.scenario.schema import scenario_path
        try:
            scenario = scenario_path(text)
        except FileNotFoundError as e:
            raise AnimationError(f"--model {text}: not a file, and {e}") from None
    out: Dict[str, Tuple[str, str]] = {}
    if scenario is not None:
        from mbs_ros.scenario.schema import ScenarioError, load_scenario
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
