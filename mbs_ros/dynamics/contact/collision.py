"""A robot's collision shapes from its URDF ``<collision>`` elements, and the pairs that never collide.

Each ``<collision>`` of a link becomes a :class:`~mbs_ros.dynamics.contact.geometry.Shape` on the body that link
belongs to (links fixed together are one body: their shapes keep each link's frame): ``<box size>``, ``<sphere
radius>``, ``<cylinder radius length>`` as Coal's primitives, ``<mesh filename scale>`` as the convex hull of the
mesh's vertices (read by trimesh; ``package://`` and ``file://`` resolved as ROS tools do,
:mod:`mbs_ros.packages`) — the hull is what MuJoCo simulates as well. Self-collision is filtered as MoveIt does:
shapes on one body or on bodies joined by a joint (adjacent links) never pair, nor the link pairs an SRDF's
``<disable_collisions link1 link2>`` names. Errors name the file and the link, never the file's content.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import coal
import numpy as np

from mbs_ros.dynamics.model.urdf import ModelError, load_urdf_xml, origin_matrix
from mbs_ros.dynamics.contact.geometry import Shape

__all__ = ["collision_shapes", "excluded_pairs", "read_srdf_disabled"]


def _error(reason, link, file) -> ModelError:
    return ModelError(f"link {link!r}: {reason}", file=None if file is None else str(file), link=link)


def _numbers(text, count, what, link, file):
    try:
        values = [float(x) for x in (text or "").split()]
    except ValueError:
        values = []
    if len(values) != count or not all(np.isfinite(values)):
        raise _error(f"{what} needs {count} finite numbers", link, file)
    return values


def _positive(value, what, link, file):
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not (np.isfinite(x) and x > 0.0):
        raise _error(f"{what} must be a positive number", link, file)
    return x


def _mesh_hull(uri, scale, link, file, base_dir):
    from mbs_ros.packages import resolve_uri

    if uri.startswith("package:///"):
        uri = "package://" + uri[len("package:///"):]
    resolved = resolve_uri(uri, base_dir)
    if resolved.path is None:
        raise _error(f"collision mesh {uri!r}: {resolved.reason or 'not found'}", link, file)
    try:
        import trimesh

        mesh = trimesh.load(resolved.path, force="mesh", process=False)
        points = np.asarray(mesh.vertices, dtype=float) * np.asarray(scale, dtype=float)
    except Exception as exc:  # noqa: BLE001 - any reader failure names the mesh file, never its content
        raise _error(f"collision mesh {os.path.basename(resolved.path)} cannot be read ({type(exc).__name__})",
                     link, file) from None
    if points.shape[0] < 4 or not np.all(np.isfinite(points)):
        raise _error(f"collision mesh {os.path.basename(resolved.path)} has no volume", link, file)
    vertices = coal.StdVec_Vec3s()
    for p in np.unique(points, axis=0):
        vertices.append(p)
    return coal.Convex.convexHull(vertices, False, None)


def collision_shapes(model, urdf, model_index: int = 0, mu: float = 0.5, base_dir=None):
    """The :class:`Shape` list of the ``<collision>`` elements of ``urdf`` (XML text or a path) for ``model``
    (built from the same URDF), tagged ``(model_index, body)``."""
    file = urdf if isinstance(urdf, (str, os.PathLike)) and not str(urdf).lstrip().startswith("<") else None
    if base_dir is None and file is not None:
        base_dir = os.path.dirname(os.path.abspath(file))
    root = ET.fromstring(load_urdf_xml(urdf))
    tree = model.tree
    link_index = {name: i for i, name in enumerate(tree.link_names)}
    shapes = []
    for link in root.findall("link"):
        name = link.get("name", "")
        if name not in link_index:
            continue  # a link the model does not keep (none today; kept for locked or merged variants)
        i = link_index[name]
        body = int(tree.link_body[i])
        T_body_link = np.asarray(tree.T_body_link[i])
        for k, col in enumerate(link.findall("collision")):
            origin = col.find("origin")
            T = origin_matrix(*(_origin(origin, name, file)))
            geom = col.find("geometry")
            shape = None if geom is None else next(iter(geom), None)
            if shape is None:
                raise _error("a <collision> without a <geometry>", name, file)
            if shape.tag == "box":
                g = coal.Box(*[_positive(x, "<box size>", name, file) for x in
                               _numbers(shape.get("size"), 3, "<box size>", name, file)])
            elif shape.tag == "sphere":
                g = coal.Sphere(_positive(shape.get("radius"), "<sphere radius>", name, file))
            elif shape.tag == "cylinder":
                g = coal.Cylinder(_positive(shape.get("radius"), "<cylinder radius>", name, file),
                                  _positive(shape.get("length"), "<cylinder length>", name, file))
            elif shape.tag == "capsule":
                g = coal.Capsule(_positive(shape.get("radius"), "<capsule radius>", name, file),
                                 _positive(shape.get("length"), "<capsule length>", name, file))
            elif shape.tag == "mesh":
                scale = _numbers(shape.get("scale", "1 1 1"), 3, "<mesh scale>", name, file)
                g = _mesh_hull(shape.get("filename", ""), scale, name, file, base_dir)
            else:
                raise _error(f"unknown collision geometry <{shape.tag}>", name, file)
            label = col.get("name") or f"{name}/{k}"
            shapes.append(Shape(label, g, (model_index, body), T_body_link @ T, mu, link=name))
    return shapes


def _origin(origin, link, file):
    if origin is None:
        return None, None
    xyz = _numbers(origin.get("xyz", "0 0 0"), 3, "<collision><origin xyz>", link, file)
    rpy = _numbers(origin.get("rpy", "0 0 0"), 3, "<collision><origin rpy>", link, file)
    return xyz, rpy


def read_srdf_disabled(srdf) -> set:
    """The link pairs an SRDF's ``<disable_collisions link1 link2>`` names (frozensets of two names)."""
    text = load_urdf_xml(srdf)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ModelError(f"not a valid SRDF: {exc.msg if hasattr(exc, 'msg') else 'XML error'}",
                         file=srdf if not str(srdf).lstrip().startswith("<") else None) from None
    return {frozenset((e.get("link1", ""), e.get("link2", ""))) for e in root.iter("disable_collisions")}


def excluded_pairs(shapes, models, disabled=frozenset(), adjacent: bool = True, touching_at=None) -> frozenset:
    """Index pairs ``(i, j)`` (i < j) of ``shapes`` that never collide: on one model, bodies that are the same
    or (``adjacent``) parent and child, link pairs in ``disabled`` (:func:`read_srdf_disabled`), and with
    ``touching_at`` (one configuration per model, e.g. the neutral one) the pairs of one model that touch there —
    MoveIt's Setup Assistant disables these as "Default" (a robot's hull meshes overlap where it is built:
    Solo12's base and upper legs, Go2's base and thighs)."""
    out = set()
    if touching_at is not None:
        from mbs_ros.dynamics.algorithms import multibody as alg
        from mbs_ros.dynamics.contact.geometry import find_contacts

        for k, (model, q) in enumerate(zip(models, touching_at)):
            own = [i for i, s in enumerate(shapes) if s.body is not None and s.body[0] == k]
            poses = [None] * len(models)
            poses[k] = alg.body_placements(model, q)
            hits = find_contacts(poses, [shapes[i] for i in own], margin=0.0)
            names = {c.name for c in hits}
            for a in range(len(own)):
                for b in range(a + 1, len(own)):
                    sa, sb = shapes[own[a]], shapes[own[b]]
                    if f"{sa.name}/{sb.name}" in names or f"{sb.name}/{sa.name}" in names:
                        out.add((own[a], own[b]))
    for i, a in enumerate(shapes):
        for j in range(i + 1, len(shapes)):
            b = shapes[j]
            if a.body is None or b.body is None or a.body[0] != b.body[0]:
                continue
            ba, bb = a.body[1], b.body[1]
            parent = models[a.body[0]].tree.parent
            if ba == bb or (adjacent and (parent[ba] == bb or parent[bb] == ba)) or \
                    frozenset((a.link, b.link)) in disabled:
                out.add((i, j))
    return frozenset(out)
