"""URDF (and xacro) to the neutral kinematic-tree description that :class:`~mbs_ros.dynamics.Model` is built from.

Parsing is done by the ROS parser ``urdf_parser_py`` (PyPI ``urdfdom-py``), xacro expansion by the ``xacro``
package; this module only reads their objects. What is kept: every link's inertial (mass, centre of mass and the
inertia about it, rotated into link axes) and every joint's type, parent, child, origin (URDF ``rpy``: fixed axes
x, y, z, i.e. ``R = Rz(yaw) Ry(pitch) Rx(roll)``) and axis (normalised; URDF's default ``1 0 0``), and its
``<limit>`` (see :class:`JointSpec`). Visuals, collisions and dynamics tags are ignored by the dynamics.

Checks made here, each a :class:`ModelError` naming the file (when the source is a path) and the link or joint:
a mass that is negative or not finite, an inertia that is not finite or not positive semi-definite (on a link
with mass), a limit that is negative, not a number, or ``lower > upper``. An inertia whose principal moments
violate the triangle inequality (no real body has them) only warns (:class:`ModelWarning`): widely used URDFs
have such links (example-robot-data's ANYmal, Go1, B1, HyQ, Allegro, Romeo) and the equations stay well posed.
The checks of the whole tree (a singular mass matrix, the mass ratio) are the Model's, see
:meth:`mbs_ros.dynamics.Model.from_urdf`.

Errors never quote the file's content: a path that is not a URDF is reported by its path and the reason.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass

import numpy as np
from transforms3d.euler import euler2mat

__all__ = ["LinkSpec", "JointSpec", "RobotSpec", "JOINT_TYPES", "ModelError", "ModelWarning", "parse_urdf",
           "load_urdf_xml", "origin_matrix", "looks_like_xml_text"]

#: URDF joint types a tree may have.
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


class ModelError(ValueError):
    """A robot description that cannot be simulated; the message names the file (when known), the link or joint
    and the reason, never the file's content. ``file``, ``link`` and ``joint`` hold them (None when not known)."""

    def __init__(self, reason: str, *, file: str | None = None, link: str | None = None, joint: str | None = None):
        self.reason, self.file, self.link, self.joint = reason, file, link, joint
        super().__init__(f"{file}: {reason}" if file else reason)

    def with_file(self, file) -> "ModelError":
        """The same error attributed to ``file`` (unchanged if it already names one or ``file`` is empty)."""
        if self.file or not file:
            return self
        return ModelError(self.reason, file=str(file), link=self.link, joint=self.joint)


class ModelWarning(UserWarning):
    """A robot description that loads but that no real robot has (e.g. principal moments of inertia that violate
    the triangle inequality)."""


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
    zero joint position; ``axis`` (3,) unit vector in the joint frame.

    Limits from ``<limit effort velocity lower upper>``, ``inf`` (``-inf`` for ``lower``) where there is none:
    ``effort`` [N m or N] and ``velocity`` [rad/s or m/s] are none when the tag or the attribute is missing or
    when it is 0 — URDF requires both attributes on revolute and prismatic joints, and files that do not mean to
    limit a joint write 0 (a joint that may exert no effort at all would be a fixed joint); ``lower``/``upper``
    [rad or m] are none for continuous and fixed joints and when ``lower == upper`` (absent attributes default to
    0 in URDF, so ``0 0`` is how a file without a range reads)."""

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    effort: float = math.inf
    velocity: float = math.inf
    lower: float = -math.inf
    upper: float = math.inf


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


_BOM = "\ufeff"
#: Longer than any path a system accepts (Linux PATH_MAX): such a string is text, not a file name.
_MAX_PATH = 4096


def looks_like_xml_text(text: str) -> bool:
    """Whether ``text`` is (meant as) URDF/XML content rather than a file path: it starts with ``<`` after an
    optional UTF-8 byte-order mark and white space, or it could not be a path (a line break, a NUL, longer than
    PATH_MAX)."""
    text = text.lstrip(_BOM).lstrip()
    return text.startswith("<") or "\n" in text or "\0" in text or len(text) > _MAX_PATH


def _strip_bom(text: str) -> str:
    return text[1:] if text.startswith(_BOM) else text


def _describe_text(text: str) -> str:
    return f"the URDF text ({len(text)} characters)"


def load_urdf_xml(source, xacro: bool | None = None, mappings: dict | None = None) -> str:
    """The URDF XML text of ``source``: an XML string, or a path to a URDF file or a xacro file (expanded by the
    ``xacro`` package with ``mappings`` as its ``name:=value`` arguments). ``xacro=None`` decides by the file name
    (ending in ``.xacro``); an XML string is also run through xacro when ``xacro=True``. A leading UTF-8
    byte-order mark is dropped. Errors (:class:`ModelError`; FileNotFoundError for a missing file) name the path,
    or the text by its length, never the content."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelError(f"the URDF bytes ({len(source)}) are not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from None
    if not isinstance(source, str):
        raise TypeError(f"expected URDF XML text or a path, got {type(source).__name__}")
    if looks_like_xml_text(source):
        text = _strip_bom(source)
        if not text.lstrip().startswith("<"):
            raise ModelError(f"{_describe_text(text)} is not a valid URDF: it is not XML (it does not start "
                             "with '<')")
        if not xacro:
            return text
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".urdf.xacro", delete=False, encoding="utf-8") as f:
            f.write(text)
        try:
            return _run_xacro(f.name, mappings, shown_as=_describe_text(text))
        finally:
            os.unlink(f.name)
    if not os.path.isfile(source):
        raise FileNotFoundError(f"URDF file not found: {source}")
    if xacro or (xacro is None and source.endswith(".xacro")):
        return _strip_bom(_run_xacro(source, mappings, shown_as=source))
    return read_text_file(source)


def read_text_file(path: str) -> str:
    """The UTF-8 text of the file ``path`` without a leading byte-order mark; :class:`ModelError` naming the path
    and the reason (permission denied, not UTF-8 text, ...) without its content."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise ModelError(f"not a URDF: not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    except PermissionError:
        raise ModelError("cannot read it: permission denied", file=path) from None
    except IsADirectoryError:
        raise ModelError("is a directory, not a URDF file", file=path) from None
    except OSError as exc:
        raise ModelError(f"cannot read it: {exc.strerror or type(exc).__name__}", file=path) from None


def _run_xacro(path: str, mappings: dict | None, shown_as: str) -> str:
    import xacro  # the ROS package (PyPI "xacro")

    try:
        doc = xacro.process_file(path, mappings={str(k): str(v) for k, v in (mappings or {}).items()})
    except Exception as exc:  # noqa: BLE001 - xacro raises XacroException, expat and file errors
        raise ModelError(f"xacro failed: {_short(exc)}", file=shown_as) from None
    return doc.toxml()


def _short(exc: BaseException, limit: int = 300) -> str:
    """A parser's reason, one line, at most ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_urdf(source, xacro: bool | None = None, mappings: dict | None = None) -> RobotSpec:
    """Parse ``source`` (see :func:`load_urdf_xml`) with ``urdf_parser_py`` into a :class:`RobotSpec`;
    :class:`ModelError` (a ValueError) naming the file when ``source`` is a path, and the link or joint."""
    path = None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not looks_like_xml_text(source)):
        path = os.fspath(source)
    xml = load_urdf_xml(source, xacro=xacro, mappings=mappings)
    try:
        return _parse_xml(xml)
    except ModelError as exc:
        raise exc.with_file(path) from None


def _check_well_formed(xml: str) -> None:
    """ModelError unless ``xml`` is well-formed XML, giving the position only: an XML parser's message quotes tag
    names from the text, which may be anything (a secret file that happens to start with '<')."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml.encode("utf-8"))
    except ET.ParseError as exc:
        line, column = getattr(exc, "position", (None, None))
        raise ModelError(f"{_describe_text(xml)} is not a valid URDF: not well-formed XML (line {line}, column "
                         f"{column})") from None
    if root.tag != "robot":
        raise ModelError(f"{_describe_text(xml)} is not a valid URDF: its root element is not <robot>")


def _parse_xml(xml: str) -> RobotSpec:
    from urdf_parser_py.urdf import URDF

    xml = _strip_bom(xml)
    if not xml.lstrip().startswith("<"):
        raise ModelError(f"{_describe_text(xml)} is not a valid URDF: it is not XML (it does not start with '<')")
    _check_well_formed(xml)
    try:
        robot = URDF.from_xml_string(xml.encode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - the parser raises bare Exceptions and lxml errors
        raise ModelError(f"not a valid URDF: {_short(exc)}") from None
    if not robot.links:
        raise ModelError("not a valid URDF: no link")

    links = {}
    for link in robot.links:
        if link.name in links:
            raise ModelError(f"link {link.name!r} defined twice", link=link.name)
        links[link.name] = _link_spec(link)
    joints = []
    seen = set()
    for joint in robot.joints:
        if joint.name in seen:
            raise ModelError(f"joint {joint.name!r} defined twice", joint=joint.name)
        seen.add(joint.name)
        joints.append(_joint_spec(joint, links))
    children = {j.child for j in joints}
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise ModelError(f"expected one root link, found {roots}")
    if len(children) != len(joints):
        raise ModelError("a link is the child of two joints (closed loops are not supported)")
    return RobotSpec(robot.name or "robot", roots[0], links, tuple(joints), xml)


def _link_spec(link) -> LinkSpec:
    inertial = link.inertial
    if inertial is None:
        return LinkSpec(link.name, 0.0, np.zeros(3), np.zeros((3, 3)))
    mass = float(inertial.mass) if inertial.mass is not None else 0.0
    if not (np.isfinite(mass) and mass >= 0.0):
        raise ModelError(f"link {link.name!r}: mass must be finite and >= 0, got {mass!r}", link=link.name)
    T = origin_matrix(*(_xyz_rpy(inertial.origin)))
    if inertial.inertia is None:
        J = np.zeros((3, 3))
    else:
        i = inertial.inertia
        J = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]], dtype=float)
    R = T[:3, :3]
    J = R @ J @ R.T
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(T))):
        raise ModelError(f"link {link.name!r}: inertia and its origin must be finite", link=link.name)
    J = 0.5 * (J + J.T)
    if mass > 0.0:
        eig = np.linalg.eigvalsh(J)
        if eig[0] < -1e-12 * max(1.0, np.abs(J).max()):
            raise ModelError(f"link {link.name!r}: inertia must be positive semi-definite, principal moments "
                             f"{eig.tolist()}", link=link.name)
        a, b, c = eig
        if c > a + b + 1e-9 * c:
            warnings.warn(f"link {link.name!r}: principal moments of inertia {eig.tolist()} violate the triangle "
                          "inequality (no real body has them); simulating anyway", ModelWarning, stacklevel=4)
    return LinkSpec(link.name, mass, T[:3, 3].copy(), J)


def _xyz_rpy(origin):
    if origin is None:
        return None, None
    return origin.xyz, origin.rpy


def _joint_spec(joint, links) -> JointSpec:
    name = joint.name
    if joint.type not in JOINT_TYPES:
        raise ModelError(f"joint {name!r}: type {joint.type!r} is not supported "
                         f"(supported: {', '.join(JOINT_TYPES)})", joint=name)
    for role, link in (("parent", joint.parent), ("child", joint.child)):
        if link not in links:
            raise ModelError(f"joint {name!r}: {role} link {link!r} is not defined", joint=name)
    axis = np.array(joint.axis if joint.axis is not None else (1.0, 0.0, 0.0), dtype=float).reshape(3)
    n = np.linalg.norm(axis)
    if joint.type != "fixed" and not (np.isfinite(n) and n > 1e-12):
        raise ModelError(f"joint {name!r}: axis must be a non-zero vector, got {axis.tolist()}", joint=name)
    if n > 0:
        axis = axis / n
    origin = origin_matrix(*_xyz_rpy(joint.origin))
    if not np.all(np.isfinite(origin)):
        raise ModelError(f"joint {name!r}: origin must be finite", joint=name)
    return JointSpec(name, joint.type, joint.parent, joint.child, origin, axis, *_limits(joint))


def _limits(joint):
    """``(effort, velocity, lower, upper)`` of a joint's ``<limit>`` (see :class:`JointSpec`)."""
    lim = getattr(joint, "limit", None)
    if lim is None or joint.type == "fixed":
        return math.inf, math.inf, -math.inf, math.inf
    out = {}
    for key in ("effort", "velocity", "lower", "upper"):
        value = getattr(lim, key, None)
        try:
            value = None if value is None else float(value)
        except (TypeError, ValueError):
            raise ModelError(f"joint {joint.name!r}: <limit {key}> is not a number", joint=joint.name) from None
        if value is not None and math.isnan(value):
            raise ModelError(f"joint {joint.name!r}: <limit {key}> is NaN", joint=joint.name)
        out[key] = value
    rates = []
    for key in ("effort", "velocity"):
        value = out[key]
        if value is not None and value < 0.0:
            raise ModelError(f"joint {joint.name!r}: <limit {key}=\"{value!r}\"> must be >= 0 (0: no limit)",
                             joint=joint.name)
        rates.append(math.inf if not value else value)
    lower, upper = out["lower"], out["upper"]
    lower = 0.0 if lower is None else lower
    upper = 0.0 if upper is None else upper
    if joint.type == "continuous" or lower == upper:
        return rates[0], rates[1], -math.inf, math.inf
    if lower > upper:
        raise ModelError(f"joint {joint.name!r}: <limit lower=\"{lower!r}\"> is above upper=\"{upper!r}\"",
                         joint=joint.name)
    return rates[0], rates[1], lower, upper
