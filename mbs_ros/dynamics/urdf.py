"""URDF (and xacro) to the neutral kinematic-tree description that :class:`~mbs_ros.dynamics.Model` is built from.

Parsing is done by the ROS parser ``urdf_parser_py`` (PyPI ``urdfdom-py``), xacro expansion by the ``xacro``
package; this module only reads their objects. What is kept: every link's inertial (mass, centre of mass and the
inertia about it, rotated into link axes) and every joint's type, parent, child, origin (URDF ``rpy``: fixed axes
x, y, z, i.e. ``R = Rz(yaw) Ry(pitch) Rx(roll)``) and axis (normalised; URDF's default ``1 0 0``). Visuals,
collisions, limits and dynamics tags are ignored by the dynamics.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from transforms3d.euler import euler2mat

__all__ = ["LinkSpec", "JointSpec", "RobotSpec", "JOINT_TYPES", "parse_urdf", "load_urdf_xml", "origin_matrix"]

#: URDF joint types a tree may have.
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


@dataclass(frozen=True)
class LinkSpec:
    """A URDF link: ``mass`` (kg, 0 for a link without inertial), ``com`` (3,) in the link frame, ``inertia``
    (3×3) about the centre of mass in link axes."""

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray


@dataclass(frozen=True)
class JointSpec:
    """A URDF joint: ``origin`` is the 4×4 pose of the joint (= child link) frame in the parent link frame at
    zero joint position; ``axis`` (3,) unit vector in the joint frame."""

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray


@dataclass(frozen=True)
class RobotSpec:
    name: str
    root: str
    links: dict  # name -> LinkSpec, in URDF order
    joints: tuple  # JointSpec, in URDF order
    xml: str


def origin_matrix(xyz=None, rpy=None) -> np.ndarray:
    """4×4 homogeneous matrix of a URDF ``<origin xyz rpy>`` (R = Rz(y) Ry(p) Rx(r))."""
    T = np.eye(4)
    if rpy is not None:
        T[:3, :3] = euler2mat(*[float(a) for a in rpy], axes="sxyz")
    if xyz is not None:
        T[:3, 3] = [float(a) for a in xyz]
    return T


def _is_xml(text: str) -> bool:
    return text.lstrip().startswith("<")


def load_urdf_xml(source, xacro: bool | None = None, mappings: dict | None = None) -> str:
    """The URDF XML text of ``source``: an XML string, or a path to a URDF file or a xacro file (expanded by the
    ``xacro`` package with ``mappings`` as its ``name:=value`` arguments). ``xacro=None`` decides by the file name
    (ending in ``.xacro``); an XML string is also run through xacro when ``xacro=True``."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TypeError(f"expected URDF XML text or a path, got {type(source).__name__}")
    if _is_xml(source):
        if not xacro:
            return source
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".urdf.xacro", delete=False) as f:
            f.write(source)
        try:
            return _run_xacro(f.name, mappings)
        finally:
            os.unlink(f.name)
    if not os.path.isfile(source):
        raise FileNotFoundError(f"URDF file not found: {source}")
    if xacro or (xacro is None and source.endswith(".xacro")):
        return _run_xacro(source, mappings)
    with open(source, encoding="utf-8") as f:
        return f.read()


def _run_xacro(path: str, mappings: dict | None) -> str:
    import xacro  # the ROS package (PyPI "xacro")

    doc = xacro.process_file(path, mappings={str(k): str(v) for k, v in (mappings or {}).items()})
    return doc.toxml()


def parse_urdf(source, xacro: bool | None = None, mappings: dict | None = None) -> RobotSpec:
    """Parse ``source`` (see :func:`load_urdf_xml`) with ``urdf_parser_py`` into a :class:`RobotSpec`."""
    from urdf_parser_py.urdf import URDF

    xml = load_urdf_xml(source, xacro=xacro, mappings=mappings)
    try:
        robot = URDF.from_xml_string(xml.encode("utf-8"))
    except Exception as exc:  # the parser raises bare Exceptions and lxml errors
        raise ValueError(f"invalid URDF: {exc}") from exc
    if not robot.links:
        raise ValueError("invalid URDF: no link")

    links = {}
    for link in robot.links:
        if link.name in links:
            raise ValueError(f"invalid URDF: link {link.name!r} defined twice")
        links[link.name] = _link_spec(link)
    joints = []
    seen = set()
    for joint in robot.joints:
        if joint.name in seen:
            raise ValueError(f"invalid URDF: joint {joint.name!r} defined twice")
        seen.add(joint.name)
        joints.append(_joint_spec(joint, links))
    children = {j.child for j in joints}
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise ValueError(f"invalid URDF: expected one root link, found {roots}")
    if len(children) != len(joints):
        raise ValueError("invalid URDF: a link is the child of two joints (closed loops are not supported)")
    return RobotSpec(robot.name or "robot", roots[0], links, tuple(joints), xml)


def _link_spec(link) -> LinkSpec:
    inertial = link.inertial
    if inertial is None:
        return LinkSpec(link.name, 0.0, np.zeros(3), np.zeros((3, 3)))
    mass = float(inertial.mass) if inertial.mass is not None else 0.0
    if not (np.isfinite(mass) and mass >= 0.0):
        raise ValueError(f"link {link.name!r}: mass must be finite and >= 0, got {mass!r}")
    T = origin_matrix(*(_xyz_rpy(inertial.origin)))
    if inertial.inertia is None:
        J = np.zeros((3, 3))
    else:
        i = inertial.inertia
        J = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]], dtype=float)
    R = T[:3, :3]
    J = R @ J @ R.T
    if not np.all(np.isfinite(J)):
        raise ValueError(f"link {link.name!r}: inertia must be finite")
    if mass > 0.0 and np.linalg.eigvalsh(J)[0] < -1e-12 * max(1.0, np.abs(J).max()):
        raise ValueError(f"link {link.name!r}: inertia must be positive semi-definite, "
                         f"principal moments {np.linalg.eigvalsh(J).tolist()}")
    return LinkSpec(link.name, mass, T[:3, 3].copy(), 0.5 * (J + J.T))


def _xyz_rpy(origin):
    if origin is None:
        return None, None
    return origin.xyz, origin.rpy


def _joint_spec(joint, links) -> JointSpec:
    if joint.type not in JOINT_TYPES:
        raise ValueError(f"joint {joint.name!r}: type {joint.type!r} is not supported "
                         f"(supported: {', '.join(JOINT_TYPES)})")
    for role, name in (("parent", joint.parent), ("child", joint.child)):
        if name not in links:
            raise ValueError(f"joint {joint.name!r}: {role} link {name!r} is not defined")
    axis = np.array(joint.axis if joint.axis is not None else (1.0, 0.0, 0.0), dtype=float).reshape(3)
    n = np.linalg.norm(axis)
    if joint.type != "fixed" and not (np.isfinite(n) and n > 1e-12):
        raise ValueError(f"joint {joint.name!r}: axis must be a non-zero vector, got {axis.tolist()}")
    if n > 0:
        axis = axis / n
    return JointSpec(joint.name, joint.type, joint.parent, joint.child, origin_matrix(*_xyz_rpy(joint.origin)), axis)
