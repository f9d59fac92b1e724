"""What the dynamics node shows in RViz besides TF: the URDF it publishes on ``robot_description`` and the
``visualization_msgs/MarkerArray`` of the bodies' shapes and of the applied base wrench. No physics here.

- :func:`prefixed_urdf`: the model's URDF with every link renamed to the TF frame the node publishes for it
  (``robot1/link2``), so RViz's RobotModel display works with an empty "TF Prefix" and ``robot_state_publisher``
  with ``frame_prefix`` empty. Joint names stay as they are (they are the names in ``joint_states``).
- :func:`shapes_from_urdf`: one :class:`Shape` per URDF ``<visual>`` (box, cylinder, sphere, mesh; robot YAML
  visuals arrive here as URDF visuals), with the visual origin; a link without a visual but with mass gets its
  equivalent-inertia box instead. :func:`rigid_body_shapes`: the equivalent-inertia box of a single body.
- :class:`MarkerMaker`: the markers of one publish cycle from the link poses and the applied wrench. Every
  marker is in the world frame with its world pose (link pose composed with the visual origin), ``ns`` the
  link's frame name and ``id`` the visual's index in the link, so ids are stable from cycle to cycle; the
  wrench arrows are ``ns = "<base frame>/wrench"``, ``id`` 0 (force) and 1 (torque).
- :func:`geometry_markers`: the marker shapes of a contact world's Coal geometry (the ground as a 20 m slab whose
  top face is its plane, boxes, spheres, cylinders, capsules), for the contact topics
  (:mod:`mbs_ros.nodes.dynamics_contacts`); :func:`world_shape_entries` lists them for a world,
  :func:`shape_marker` and :func:`contact_markers` build the messages (a non-finite value skips its marker).

The equivalent-inertia box of a body of mass m with principal moments I1, I2, I3 (about its centre of mass) is
the uniform box with the same mass and inertia: side ``a_i = sqrt(6 (I_j + I_k - I_i) / m)`` along principal
axis i, centred at the centre of mass. A side the triangle inequality would make imaginary is shown thin.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np
from geometry_msgs.msg import Point
from visualization_msgs.msg import Marker

from mbs_ros.nodes import conversions as cv

__all__ = ["Shape", "MarkerMaker", "prefixed_urdf", "shapes_from_urdf", "rigid_body_shapes",
           "equivalent_inertia_box", "delete_all_marker", "geometry_markers", "world_shape_entries", "shape_marker",
           "contact_markers", "ContactMarkers", "DEFAULT_COLOR", "GROUND_SIZE"]

DEFAULT_COLOR = (0.65, 0.67, 0.70, 1.0)
FORCE_COLOR = (0.90, 0.20, 0.15, 1.0)
TORQUE_COLOR = (0.20, 0.35, 0.90, 1.0)
GROUND_SIZE = 20.0  # [m] side of the square that draws a contact world's ground (geometry_markers)
_MIN_SIDE_FRACTION = 0.02  # of the box's largest side, for sides the triangle inequality makes imaginary


@dataclass(frozen=True)
class Shape:
    """One marker shape rigidly attached to a link: ``T_link_shape`` (4x4) places it in the link frame;
    ``scale`` is Marker.scale (box sides; cylinder 2r, 2r, length; sphere 2r x3; mesh scale)."""

    link_index: int
    ns: str
    id: int
    type: int
    scale: tuple
    T_link_shape: np.ndarray = field(repr=False)
    color: tuple = DEFAULT_COLOR
    mesh_resource: str = ""


# ------------------------------------------------------------------------------------------- URDF


def prefixed_urdf(xml: str, frame_of: Callable[[str], str]) -> str:
    """The URDF with every link name (and every joint's parent/child link) replaced by ``frame_of(name)``."""
    root = ET.fromstring(xml)
    for link in root.findall("link"):
        link.set("name", frame_of(link.get("name")))
    for joint in root.findall("joint"):
        for end in ("parent", "child"):
            el = joint.find(end)
            if el is not None and el.get("link") is not None:
                el.set("link", frame_of(el.get("link")))
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode")


def _origin_matrix(origin) -> np.ndarray:
    from mbs_ros.dynamics.model.urdf import origin_matrix

    if origin is None:
        return np.eye(4)
    return origin_matrix(getattr(origin, "xyz", None), getattr(origin, "rpy", None))


def _color(material, materials: dict) -> tuple:
    if material is None:
        return DEFAULT_COLOR
    color = getattr(material, "color", None)
    if color is None and getattr(material, "name", None) in materials:
        color = getattr(materials[material.name], "color", None)
    rgba = getattr(color, "rgba", None) if color is not None else None
    if rgba is None or len(rgba) != 4:
        return DEFAULT_COLOR
    return tuple(float(c) for c in rgba)


# what a marker reads of a URDF: each kind of geometry with the attributes it needs
_GEOMETRY = {"box": ("size",), "cylinder": ("radius", "length"), "sphere": ("radius",), "mesh": ("filename",)}


def _visual_xml(xml: str) -> str:
    """The URDF reduced to what the markers read (links' visuals: origin, geometry, material name and colour;
    named materials' colours), so that what urdf_parser_py refuses elsewhere (textures without a file, old-style
    transmissions, an XML encoding declaration, extension tags) never stops the markers. A visual whose geometry
    lacks a required attribute is left out."""
    root = ET.fromstring(xml)
    out = ET.Element("robot", {"name": root.get("name") or "robot"})

    def copy(parent, element, attributes):
        return ET.SubElement(parent, element.tag, {k: element.get(k) for k in attributes
                                                   if element.get(k) is not None})

    def material(parent, m):
        new = copy(parent, m, ("name",))
        color = m.find("color")
        if color is not None and color.get("rgba"):
            copy(new, color, ("rgba",))

    for m in root.findall("material"):
        if m.get("name"):
            material(out, m)
    for link in root.findall("link"):
        new_link = copy(out, link, ("name",))
        for visual in link.findall("visual"):
            geometry = visual.find("geometry")
            shape = next((g for g in (geometry if geometry is not None else ())
                          if g.tag in _GEOMETRY and all(g.get(a) for a in _GEOMETRY[g.tag])), None)
            if shape is None:
                continue
            new = copy(new_link, visual, ("name",))
            origin = visual.find("origin")
            if origin is not None:
                copy(new, origin, ("xyz", "rpy"))
            copy(ET.SubElement(new, "geometry"), shape, _GEOMETRY[shape.tag] + (("scale",) if shape.tag == "mesh"
                                                                                  else ()))
            m = visual.find("material")
            if m is not None:
                material(new, m)
    return ET.tostring(out, encoding="unicode")


def shapes_from_urdf(xml: str, link_names: Sequence[str], frame_of: Callable[[str], str],
                     inertials: Optional[dict] = None) -> List[Shape]:
    """The marker shapes of a URDF. ``link_names``: the model's link order (the order of ``link_poses``);
    ``frame_of``: link name -> TF frame name (the marker namespace); ``inertials``: link name -> (mass, com,
    inertia about the com in link axes), for the equivalent-inertia box of links without a visual."""
    from urdf_parser_py.urdf import URDF, Box, Cylinder, Mesh, Sphere

    from mbs_ros.dynamics.model.urdf import quiet_parser

    with quiet_parser([]):  # urdf_parser_py prints what it does not know; the markers need none of it
        robot = URDF.from_xml_string(_visual_xml(xml))
    materials = {m.name: m for m in (robot.materials or []) if getattr(m, "name", None)}
    index = {name: i for i, name in enumerate(link_names)}
    shapes: List[Shape] = []
    for link in robot.links:
        if link.name not in index:
            continue
        li, ns = index[link.name], frame_of(link.name)
        visuals = list(link.visuals or [])
        for vid, vis in enumerate(visuals):
            g = vis.geometry
            T = _origin_matrix(vis.origin)
            color = _color(vis.material, materials)
            if isinstance(g, Box):
                shape = Shape(li, ns, vid, Marker.CUBE, tuple(float(s) for s in g.size), T, color)
            elif isinstance(g, Cylinder):
                d = 2.0 * float(g.radius)
                shape = Shape(li, ns, vid, Marker.CYLINDER, (d, d, float(g.length)), T, color)
            elif isinstance(g, Sphere):
                d = 2.0 * float(g.radius)
                shape = Shape(li, ns, vid, Marker.SPHERE, (d, d, d), T, color)
            elif isinstance(g, Mesh) and g.filename:
                scale = tuple(float(s) for s in g.scale) if g.scale else (1.0, 1.0, 1.0)
                shape = Shape(li, ns, vid, Marker.MESH_RESOURCE, scale, T, color, mesh_resource=g.filename)
            else:
                continue
            shapes.append(shape)
        if not visuals and inertials and link.name in inertials:
            mass, com, inertia = inertials[link.name]
            if mass > 0.0:
                size, T = equivalent_inertia_box(mass, inertia, com)
                shapes.append(Shape(li, ns, 0, Marker.CUBE, tuple(size), T, DEFAULT_COLOR))
    return shapes


def equivalent_inertia_box(mass: float, inertia, com) -> tuple:
    """``(sides (3,), T_link_box (4x4))``: the uniform box with the body's mass and inertia (module docstring)."""
    inertia = np.asarray(inertia, dtype=float).reshape(3, 3)
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    sq = 6.0 / float(mass) * (moments.sum() - 2.0 * moments)  # a_i^2 = 6 (I_j + I_k - I_i) / m
    sides = np.sqrt(np.clip(sq, 0.0, None))
    sides = np.maximum(sides, _MIN_SIDE_FRACTION * max(float(sides.max()), 1e-3))
    T = np.eye(4)
    T[:3, :3] = axes
    T[:3, 3] = np.asarray(com, dtype=float).reshape(3)
    return sides, T


def rigid_body_shapes(mass: float, inertia, com, frame: str) -> List[Shape]:
    """The single body's equivalent-inertia box (link index 0: the body itself)."""
    size, T = equivalent_inertia_box(mass, inertia, com)
    return [Shape(0, frame, 0, Marker.CUBE, tuple(float(s) for s in size), T, DEFAULT_COLOR)]


# ---------------------------------------------------------------------------------------- markers


def delete_all_marker(world_frame: str, stamp_ns: int) -> Marker:
    m = Marker(action=Marker.DELETEALL)
    m.header.frame_id = world_frame
    m.header.stamp = cv.time_from_ns(stamp_ns)
    return m


class MarkerMaker:
    """Builds one cycle's markers. ``shapes``: see :func:`shapes_from_urdf`; ``base_frame``: the arrows'
    namespace prefix (no arrows for a fixed base: ``wrench_arrows=False``)."""

    def __init__(self, shapes: Sequence[Shape], world_frame: str, base_frame: str, wrench_arrows: bool = True):
        self.shapes = list(shapes)
        self.world_frame = world_frame
        self.wrench_ns = base_frame + "/wrench"
        self.wrench_arrows = wrench_arrows
        self._link_index = np.array([s.link_index for s in self.shapes], dtype=int)
        self._T = np.array([s.T_link_shape for s in self.shapes]).reshape(-1, 4, 4)
        # arrow thickness from the size of the robot: the largest shape side (meshes excluded)
        sizes = [max(s.scale) for s in self.shapes if s.type != Marker.MESH_RESOURCE]
        length = max(sizes) if sizes else 0.5
        self.shaft_diameter = max(0.005, 0.03 * length)
        self._templates: List[Marker] = []  # reused every cycle: publish() serialises at once
        self._arrows: List[Marker] = []  # likewise, made on first use
        for shape in self.shapes:
            m = Marker(ns=shape.ns, id=shape.id, type=shape.type, action=Marker.ADD)
            m.header.frame_id = self.world_frame
            m.scale = cv.vector3_msg(shape.scale)
            m.color.r, m.color.g, m.color.b, m.color.a = shape.color
            if shape.type == Marker.MESH_RESOURCE:
                m.mesh_resource = shape.mesh_resource
                m.mesh_use_embedded_materials = True
            self._templates.append(m)

    def shape_poses(self, link_poses: np.ndarray) -> np.ndarray:
        """World poses (n_shapes, 4, 4) of the shapes from the links' world poses."""
        if not self.shapes:
            return np.zeros((0, 4, 4))
        return np.asarray(link_poses)[self._link_index] @ self._T

    def link_markers(self, stamp_ns: int, link_poses: np.ndarray) -> List[Marker]:
        poses = self.shape_poses(link_poses)
        if not len(poses):
            return []
        quats = cv.quaternion_from_matrix(poses[:, :3, :3]).tolist()
        positions = poses[:, :3, 3].tolist()
        stamp = cv.time_from_ns(stamp_ns)
        for m, (x, y, z), (qx, qy, qz, qw) in zip(self._templates, positions, quats):
            m.header.stamp = stamp
            pos, ori = m.pose.position, m.pose.orientation
            pos.x, pos.y, pos.z = x, y, z
            ori.x, ori.y, ori.z, ori.w = qx, qy, qz, qw
        return list(self._templates)

    def wrench_markers(self, stamp_ns: int, origin, force_world, torque_world, scale: float) -> List[Marker]:
        """Force (id 0) and torque (id 1) arrows from the base origin, ``scale`` metres per N and per N m; a
        zero (or zero-length) vector deletes its arrow. The two markers are kept and refilled every cycle."""
        if not self.wrench_arrows:
            return []
        if not self._arrows:
            d = self.shaft_diameter
            for i, color in enumerate((FORCE_COLOR, TORQUE_COLOR)):
                m = Marker(ns=self.wrench_ns, id=i, type=Marker.ARROW)
                m.header.frame_id = self.world_frame
                m.pose.orientation.w = 1.0
                m.scale = cv.vector3_msg([d, 2.0 * d, 3.0 * d])
                m.color.r, m.color.g, m.color.b, m.color.a = color
                self._arrows.append(m)
        origin = np.asarray(origin, dtype=float)
        for m, vec in zip(self._arrows, (force_world, torque_world)):
            cv.set_stamp(m.header, stamp_ns)
            tip = origin + scale * np.asarray(vec, dtype=float)
            if not np.all(np.isfinite(tip)) or np.linalg.norm(tip - origin) < 1e-9:
                m.action = Marker.DELETE
                m.points = []
            else:
                m.action = Marker.ADD
                m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in (origin, tip)]
        return list(self._arrows)


# ------------------------------------------------------------------------------ contact world shapes


def _z_to(n: np.ndarray) -> np.ndarray:
    """A rotation taking z onto the unit vector ``n``."""
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(z, n)
    s, c = float(np.linalg.norm(axis)), float(z @ n)
    if s < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    k = axis / s
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * K + (1 - c) * K @ K


def geometry_markers(geometry, T: np.ndarray) -> List[tuple]:
    """``[(marker type, scale, 4×4 pose)]`` drawing a Coal geometry placed at ``T`` (empty for a kind not
    drawn: meshes)."""
    import coal

    if isinstance(geometry, coal.Halfspace):
        n = np.asarray(geometry.n, dtype=float)
        P = np.eye(4)
        P[:3, :3] = _z_to(n)
        P[:3, 3] = n * (float(geometry.d) - 0.001)
        return [(Marker.CUBE, (GROUND_SIZE, GROUND_SIZE, 0.002), T @ P)]
    if isinstance(geometry, coal.Box):
        return [(Marker.CUBE, tuple(2.0 * np.asarray(geometry.halfSide, dtype=float)), T)]
    if isinstance(geometry, coal.Sphere):
        d = 2.0 * float(geometry.radius)
        return [(Marker.SPHERE, (d, d, d), T)]
    if isinstance(geometry, (coal.Cylinder, coal.Capsule)):
        d, length = 2.0 * float(geometry.radius), 2.0 * float(geometry.halfLength)
        out = [(Marker.CYLINDER, (d, d, length), T)]
        if isinstance(geometry, coal.Capsule):
            for z in (-0.5 * length, 0.5 * length):
                E = np.eye(4)
                E[2, 3] = z
                out.append((Marker.SPHERE, (d, d, d), T @ E))
        return out
    return []


# ------------------------------------------------------------------------------ contact topics' markers

POINT_COLOR = (1.0, 0.85, 0.1, 1.0)
CONTACT_FORCE_COLOR = (0.95, 0.35, 0.05, 1.0)


def finite(*values) -> bool:
    return all(math.isfinite(x) for v in values for x in np.ravel(v))


def world_shape_entries(world):
    """``(fixed, moving)`` marker entries of a contact world's shapes: ``(ns, id, type, scale, pose)`` of the
    world-fixed ones, ``(ns, id, type, scale, T_object_shape, object index)`` of the free objects' ones."""
    fixed, moving = [], []
    for s in (world.shapes if world is not None else ()):
        if s.body is None:
            for i, (kind, size, T) in enumerate(geometry_markers(s.geometry, np.asarray(s.T_body_shape))):
                fixed.append((s.name, i, kind, size, T))
        elif s.body[0] > 0:
            for i, (kind, size, T) in enumerate(geometry_markers(s.geometry, np.asarray(s.T_body_shape))):
                moving.append((s.name, i, kind, size, T, int(s.body[0]) - 1))
    return fixed, moving


def _world_marker(world_frame: str, stamp: int, ns: str, id_: int, kind, color) -> Marker:
    m = Marker(ns=ns, id=id_, type=kind, action=Marker.ADD)
    m.header.frame_id = world_frame
    cv.set_stamp(m.header, stamp)
    m.color.r, m.color.g, m.color.b, m.color.a = color
    return m


def shape_marker(world_frame: str, stamp: int, ns: str, id_: int, kind, size, T, color) -> Optional[Marker]:
    """The marker of one shape at world pose ``T``; None when a number is not finite."""
    if not finite(T, size):
        return None
    m = _world_marker(world_frame, stamp, ns, id_, kind, color)
    m.scale.x, m.scale.y, m.scale.z = (float(x) for x in size)
    cv.set_pose(m.pose, T[:3, 3].tolist(), cv.quaternion_from_matrix(T[:3, :3]).tolist())
    return m


def contact_markers(world_frame: str, stamp: int, forces, scale: float):
    """``(markers, skipped)``: a DELETEALL, then with the contact forces (``.point``, ``.force``, world axes) one
    SPHERE_LIST of their points (ns ``contacts``, id 0) and one LINE_LIST of their forces (ns ``contact_forces``,
    id 0: a segment from each point to point + ``scale`` m per N times the force, in the order of the points); a
    contact with a non-finite point, force or segment end (a finite force times a large scale may overflow) is
    skipped and counted. No contact: the DELETEALL alone."""
    return ContactMarkers(world_frame)(stamp, forces, scale)


class ContactMarkers:
    """:func:`contact_markers` with its two markers and their points made once and refilled at each call (the
    markers returned are valid until the next call; ``reserve`` contacts' points made at once). Two markers
    whatever the number of contacts: rclpy converts a message field by field, a marker per contact point and per
    force made Solo12's 16 contacts an array of 33 markers, 0.7 ms of CPU to publish, the longest piece of a
    dynamics node's callback at 1 kHz; as two point lists it is 0.2 ms."""

    def __init__(self, world_frame: str, reserve: int = 0):
        self.world_frame = world_frame
        self._delete = delete_all_marker(world_frame, 0)
        self._dots = _world_marker(world_frame, 0, "contacts", 0, Marker.SPHERE_LIST, POINT_COLOR)
        self._dots.scale.x = self._dots.scale.y = self._dots.scale.z = 0.012  # each sphere's diameter [m]
        self._lines = _world_marker(world_frame, 0, "contact_forces", 0, Marker.LINE_LIST, CONTACT_FORCE_COLOR)
        self._lines.scale.x = 0.005  # the lines' width [m]
        for m in (self._dots, self._lines):
            m.pose.orientation.w = 1.0  # the points are in the world frame
        self._pool = [Point() for _ in range(2 * reserve)]  # per contact: its point, its force's end

    def __call__(self, stamp: int, forces, scale: float):
        forces = list(forces)
        for m in (self._delete, self._dots, self._lines):
            cv.set_stamp(m.header, stamp)
        if not forces:
            return [self._delete], 0
        P = np.array([f.point for f in forces], dtype=float).reshape(-1, 3)
        F = np.array([f.force for f in forces], dtype=float).reshape(-1, 3)
        with np.errstate(over="ignore", invalid="ignore"):
            tip = P + scale * F
        ok = np.isfinite(P).all(axis=1) & np.isfinite(F).all(axis=1) & np.isfinite(tip).all(axis=1)
        n = int(np.count_nonzero(ok))
        if n == 0:
            return [self._delete], len(forces)
        pool = self._pool
        while len(pool) < 2 * n:
            pool.append(Point())
        dots, lines = pool[0:2 * n:2], []
        for a, b, p, t in zip(dots, pool[1:2 * n:2], P[ok].tolist(), tip[ok].tolist()):
            a.x, a.y, a.z = p
            b.x, b.y, b.z = t
            lines += (a, b)
        self._dots.points = dots
        self._lines.points = lines
        return [self._delete, self._dots, self._lines], len(forces) - n
