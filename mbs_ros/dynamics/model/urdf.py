"""URDF (and xacro) to the neutral kinematic-tree description that :class:`~mbs_ros.dynamics.Model` is built from.

Parsing is done by the ROS parser ``urdf_parser_py`` (PyPI ``urdfdom-py``), xacro expansion by the ``xacro``
package; this module only reads their objects. What is kept: every link's inertial (mass, centre of mass and the
inertia about it, rotated into link axes) and every joint's type, parent, child, origin (URDF ``rpy``: fixed axes
x, y, z, i.e. ``R = Rz(yaw) Ry(pitch) Rx(roll)``) and axis (normalised; URDF's default ``1 0 0``), and its
``<limit>`` (see :class:`JointSpec`).

Tolerant of everything that is not dynamics: only the elements and attributes above (plus the robot's name) are
handed to ``urdf_parser_py``, so visuals, collisions, materials and textures, transmissions of any style, gazebo,
ros2_control, sensors and any other extension tag or attribute are never parsed: they cannot fail a load (an empty
``<texture/>``, an old-style ``WristTransmission``) and nothing is printed (``urdf_parser_py`` writes "Unknown tag"
lines to stderr through its ``on_error`` hook; whatever it might still report is collected instead). Joint
``<dynamics>``, ``<calibration>`` and ``<safety_controller>`` are not read either (nothing here simulates them).

What the loader repairs, leaves out although it may matter, or finds implausible is collected in
:attr:`RobotSpec.report` (``Model.load_report``): a tuple of short strings, each naming the link or joint, and
issued once per ``Model`` load as a single :class:`ModelWarning` (:func:`parse_urdf` only with ``warn=True``):

* an inertia that is not positive semi-definite by at most :data:`INERTIA_TOLERANCE` (relative to the largest
  principal moment of any link of the robot: below what the file's digits can mean for the robot, e.g. the 1 µg
  antennas of example-robot-data's TIAGo, −3.5e-8 kg m² against 0.55) is projected onto the nearest positive
  semi-definite inertia (negative principal moments set to 0, the Frobenius-nearest; the link keeps its mass and
  centre of mass); round-off (≥ −1e-12 × max(1, |I|)) is accepted silently;
* ``<mimic>``: not simulated, the joint moves independently (Pinocchio's default too);
* principal moments that violate the triangle inequality (no real body has them): simulated as given — widely
  used URDFs have such links (example-robot-data's ANYmal, Go1, B1, HyQ, Allegro, Romeo);
* a malformed element that is not read but that a strict URDF reader refuses (a ``<texture/>`` without a file
  name, a transmission without a type, a mesh without a file name; a robot without a name);
* a link with mass 0 but a rotational inertia (no real body): simulated as given, as Pinocchio does;
* a second ``<inertial>`` in a link (the first is used).

Checks made here, each a :class:`ModelError` naming the file (when the source is a path) and the link or joint:
a mass that is negative or not finite, an inertia that is not finite or not positive semi-definite beyond the
tolerance above, a limit that is negative, not a number, or ``lower > upper``. The checks of
the whole tree (a singular mass matrix, the mass ratio) are the Model's, see
:meth:`mbs_ros.dynamics.Model.from_urdf`.

Errors never quote the file's content: a path that is not a URDF by its path and the reason; names (robot, links,
joints) are checked first (:func:`check_model_names`); a parser's or xacro's reason quotes only name-shaped texts.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np
from transforms3d.euler import euler2mat

__all__ = ["LinkSpec", "JointSpec", "RobotSpec", "JOINT_TYPES", "ModelError", "ModelWarning", "parse_urdf",
           "load_urdf_xml", "origin_matrix", "looks_like_xml_text", "INERTIA_TOLERANCE", "lock_joints",
           "joint_motion", "quiet_parser"]

#: URDF joint types a tree may have.
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")

#: A link's inertia whose most negative principal moment is at most this fraction of the largest principal moment
#: of any link of the robot is projected onto the nearest positive semi-definite one (with a note in the load
#: report); beyond it the link is refused. URDFs carry about six significant digits, so an error of 1e-6 of the
#: robot's largest moment is below what the file can express. example-robot-data: TIAGo's 1 µg antennas are at
#: 6.4e-8 (loaded), romeo_laas_small's 5 kg trunk at 0.22 (refused; its hips at 0.028).
INERTIA_TOLERANCE = 1e-6


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


#: Longest name of a robot, link or joint: far above any URDF in use (example-robot-data's longest is 56).
MAX_NAME_LENGTH = 128
_MODEL_NAME = re.compile(r"[A-Za-z0-9_./-]{1,%d}\Z" % MAX_NAME_LENGTH)


def model_name_problem(name) -> str | None:
    """None when ``name`` can name a robot, link, joint or thruster (what ROS names and TF frames take: 1 to
    :data:`MAX_NAME_LENGTH` letters, digits and ``_-./``); else why not, without quoting it."""
    if isinstance(name, str) and _MODEL_NAME.match(name):
        return None
    size = f"{len(name)} characters" if isinstance(name, str) else type(name).__name__
    return (f"not a name ({size}; a name is 1 to {MAX_NAME_LENGTH} letters, digits, '_', '-', '.' or '/', as ROS "
            "names and TF frames)")


def check_model_names(root) -> None:
    """ModelError for the first name of the URDF element tree ``root`` that :func:`model_name_problem` refuses:
    the robot's, every link's and joint's, and the links and joint a joint names (parent, child, mimic). Absent or
    empty names are left to the parser's own checks."""
    def check(value, where):
        if value:
            problem = model_name_problem(value)
            if problem is not None:
                raise ModelError(f"{where}: {problem}")

    check(root.get("name"), "<robot name>")
    for kind in ("link", "joint"):
        for i, el in enumerate(root.findall(kind), 1):
            check(el.get("name"), f"<{kind}> number {i}: its name")
    for i, el in enumerate(root.findall("joint"), 1):
        for sub, attr in (("parent", "link"), ("child", "link"), ("mimic", "joint")):
            for child in el.findall(sub):
                check(child.get(attr), f"<joint> number {i}: <{sub} {attr}>")


class ModelWarning(UserWarning):
    """A robot description that loads, but repaired, with parts left out that may matter, or that no real robot
    has (e.g. principal moments of inertia that violate the triangle inequality): one per load, listing the items
    of the load report."""


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
    #: What the loader repaired, left out or found implausible, one short string per item naming the link or joint
    #: (see the module docstring); empty for a clean file.
    report: tuple = ()


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
    """A parser's reason, one line, at most ``limit`` characters, quoting only name-shaped texts."""
    from mbs_ros.yamlfile import quiet

    text = quiet(" ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_urdf(source, xacro: bool | None = None, mappings: dict | None = None, warn: bool = False) -> RobotSpec:
    """Parse ``source`` (see :func:`load_urdf_xml`) with ``urdf_parser_py`` into a :class:`RobotSpec`;
    :class:`ModelError` (a ValueError) naming the file when ``source`` is a path, and the link or joint. The
    report is :attr:`RobotSpec.report`; with ``warn`` a non-empty one is also issued as one :class:`ModelWarning`
    (``Model.from_urdf`` issues it itself, so that readers of the same text for other purposes — markers, the
    nodes' checks — do not repeat it)."""
    path = None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not looks_like_xml_text(source)):
        path = os.fspath(source)
    xml = load_urdf_xml(source, xacro=xacro, mappings=mappings)
    try:
        spec = _parse_xml(xml)
    except ModelError as exc:
        raise exc.with_file(path) from None
    if warn and spec.report:
        warnings.warn(report_message(spec.report, path or spec.name), ModelWarning, stacklevel=2)
    return spec


def report_message(report, subject: str) -> str:
    """The one warning of a load report: ``subject`` (the file, or the robot's name) and the items, one a line."""
    n = len(report)
    return f"{subject}: loaded with {n} note{'s' if n != 1 else ''}:\n" + "\n".join(f"  - {r}" for r in report)


def _check_well_formed(xml: str):
    """The root element of ``xml``; ModelError unless it is well-formed XML with a ``<robot>`` root, giving the
    position only: an XML parser's message quotes tag names from the text, which may be anything (a secret file
    that happens to start with '<')."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml.encode("utf-8"))
    except ET.ParseError as exc:
        line, column = getattr(exc, "position", (None, None))
        raise ModelError(f"{_describe_text(xml)} is not a valid URDF: not well-formed XML (line {line}, column "
                         f"{column})") from None
    if root.tag != "robot":
        raise ModelError(f"{_describe_text(xml)} is not a valid URDF: its root element is not <robot>")
    return root


# What is handed to urdf_parser_py: {element: attributes kept}, children by parent. Nothing else is parsed.
_LINK_KEEP = {"inertial": ()}
_INERTIAL_KEEP = {"origin": ("xyz", "rpy"), "mass": ("value",),
                  "inertia": ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
_JOINT_KEEP = {"parent": ("link",), "child": ("link",), "origin": ("xyz", "rpy"), "axis": ("xyz",),
               "limit": ("lower", "upper", "effort", "velocity")}


def _copy(parent, element, attributes):
    import xml.etree.ElementTree as ET

    return ET.SubElement(parent, element.tag, {k: element.get(k) for k in attributes if element.get(k) is not None})


def _dynamics_xml(root) -> tuple:
    """``(xml, report)``: the parts of the URDF ``root`` the dynamics reads (see the module docstring), as XML text
    for urdf_parser_py, and the report items found on the way (mimic, malformed decoration, a second inertial)."""
    import xml.etree.ElementTree as ET

    report = []
    name = root.get("name")
    if not name:
        report.append("the robot has no name (URDF requires one): called 'robot'")
    out = ET.Element("robot", {"name": name or "robot"})
    mimics = []
    for link in root.findall("link"):
        new = _copy(out, link, ("name",))
        inertials = link.findall("inertial")
        if len(inertials) > 1:
            report.append(f"link {link.get('name')!r}: {len(inertials)} <inertial> elements, the first is used")
        if inertials:
            inertial = _copy(new, inertials[0], ())
            for tag, attributes in _INERTIAL_KEEP.items():
                e = inertials[0].find(tag)
                if e is not None:
                    _copy(inertial, e, attributes)
    for joint in root.findall("joint"):
        new = _copy(out, joint, ("name", "type"))
        for tag, attributes in _JOINT_KEEP.items():
            e = joint.find(tag)
            if e is not None:
                _copy(new, e, attributes)
        if joint.find("mimic") is not None and joint.get("type") != "fixed":
            mimics.append(joint.get("name"))
    if mimics:
        report.append(_mimic_item(mimics))
    report.extend(_malformed_decoration(root))
    return ET.tostring(out, encoding="unicode"), report


#: What the report item of :func:`_mimic_item` says (Model.from_urdf's mimic="reduce" replaces it).
MIMIC_NOTE = "<mimic> not simulated (each moves independently)"


def _mimic_item(mimics) -> str:
    """The report item of the movable joints that carry a ``<mimic>`` (not simulated as mimics)."""
    return f"joint{'s' if len(mimics) > 1 else ''} {_names(mimics)}: {MIMIC_NOTE}"


def _names(names, limit: int = 4) -> str:
    names = [repr(n) for n in names]
    return ", ".join(names) if len(names) <= limit else ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def _malformed_decoration(root) -> list:
    """Report items for elements the dynamics does not read but that a strict URDF reader (urdfdom,
    urdf_parser_py) refuses, as seen in real files: each kind once, with the links or transmissions that have it."""
    found = {}

    def add(kind, where):
        found.setdefault(kind, []).append(where)

    def materials(materials, where):
        for material in materials:
            for texture in material.findall("texture"):
                if not texture.get("filename"):
                    add("<texture> without a filename", where)

    for link in root.findall("link"):
        where = f"link {link.get('name')!r}"
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                materials(element.findall("material"), where)
                for mesh in element.iter("mesh"):
                    if not mesh.get("filename"):
                        add("<mesh> without a filename", where)
    materials(root.findall("material"), "the robot")
    for transmission in root.findall("transmission"):
        if not (transmission.get("type") or (transmission.findtext("type") or "").strip()):
            add("<transmission> without a type", f"transmission {transmission.get('name')!r}")
    out = []
    for kind, where in found.items():
        unique = list(dict.fromkeys(where))
        shown = ", ".join(unique[:4]) + (f" and {len(unique) - 4} more" if len(unique) > 4 else "")
        out.append(f"{kind} ({len(where)}; {shown}): not read (not dynamics), ignored")
    return out


def _parse_xml(xml: str) -> RobotSpec:
    from urdf_parser_py.urdf import URDF

    xml = _strip_bom(xml)
    if not xml.lstrip().startswith("<"):
        raise ModelError(f"{_describe_text(xml)} is not a valid URDF: it is not XML (it does not start with '<')")
    root = _check_well_formed(xml)
    check_model_names(root)
    dynamics_xml, report = _dynamics_xml(root)
    said = []
    try:
        with quiet_parser(said):
            robot = URDF.from_xml_string(dynamics_xml.encode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - the parser raises bare Exceptions and lxml errors
        raise ModelError(f"not a valid URDF: {_short(exc)}") from None
    report.extend(f"urdf_parser_py: {_short(m, 200)}" for m in dict.fromkeys(said))
    if not robot.links:
        raise ModelError("not a valid URDF: no link")

    links = {}
    for link in robot.links:
        if link.name in links:
            raise ModelError(f"link {link.name!r} defined twice", link=link.name)
        links[link.name] = _link_spec(link)
    report[:0] = _check_inertias(links)
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
    return RobotSpec(robot.name or "robot", roots[0], links, tuple(joints), xml, tuple(report))


class quiet_parser:
    """Within it, urdf_parser_py's ``on_error`` messages ("Unknown tag ...", printed to stderr by default) are
    appended to ``said`` instead. The hook is a module global of the parser: restored on exit."""

    def __init__(self, said: list):
        self.said = said

    def __enter__(self):
        from urdf_parser_py import xml_reflection
        from urdf_parser_py.xml_reflection import core

        self._modules = (core, xml_reflection)
        self._saved = [getattr(m, "on_error", None) for m in self._modules]
        for m in self._modules:
            m.on_error = self.said.append
        return self

    def __exit__(self, *exc):
        for m, hook in zip(self._modules, self._saved):
            m.on_error = hook
        return False


def _fmt(values) -> str:
    return "[" + ", ".join(f"{float(x):.3g}" for x in values) + "]"


def _check_inertias(links: dict) -> list:
    """Refuse (ModelError) or project the links' inertias that are not positive semi-definite, see
    :data:`INERTIA_TOLERANCE` (``links`` updated in place); report items for projections and triangle-inequality
    violations."""
    eigs = {name: np.linalg.eigh(spec.inertia) for name, spec in links.items()
            if spec.mass > 0.0 or np.any(spec.inertia)}
    scale = max((float(w[-1]) for w, _ in eigs.values()), default=0.0)
    report = []
    for name, (w, V) in eigs.items():
        spec = links[name]
        J = spec.inertia
        if w[0] < -1e-12 * max(1.0, np.abs(J).max()):
            ratio = -float(w[0]) / scale if scale > 0.0 else math.inf
            if not ratio <= INERTIA_TOLERANCE:
                raise ModelError(
                    f"link {name!r}: inertia must be positive semi-definite, principal moments {w.tolist()} (the "
                    f"negative one is {ratio:.2g} of the largest principal moment of the robot's links, beyond the "
                    f"{INERTIA_TOLERANCE:g} taken for rounding)", link=name)
            clipped = np.maximum(w, 0.0)
            J_new = (V * clipped) @ V.T
            links[name] = LinkSpec(name, spec.mass, spec.com, 0.5 * (J_new + J_new.T))
            report.append(f"link {name!r} ({spec.mass:.3g} kg): inertia not positive semi-definite, principal "
                          f"moments {_fmt(w)} kg m² (the negative one {ratio:.2g} of the robot's largest, within "
                          f"{INERTIA_TOLERANCE:g}): projected onto the nearest positive semi-definite inertia, "
                          f"moments {_fmt(clipped)}")
            continue
        if spec.mass == 0.0 and w[-1] > 1e-12 * max(1.0, np.abs(J).max()):
            report.append(f"link {name!r}: mass 0 with principal moments of inertia {_fmt(w)} kg m² (no body without "
                          "mass has inertia); simulated as given")
            continue
        a, b, c = w
        if c > a + b + 1e-9 * c + 1e-12 * max(1.0, np.abs(J).max()):  # round-off of a point mass is no violation
            report.append(f"link {name!r}: principal moments of inertia {_fmt(w)} violate the triangle inequality "
                          "(no real body has them); simulated as given")
    return report


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
    J = 0.5 * (J + J.T)  # positive semi-definiteness: _check_inertias, against the whole robot's scale
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


def joint_motion(joint: JointSpec, value: float) -> np.ndarray:
    """4×4 motion of ``joint`` at position ``value`` in its own frame: ``exp(axis · value)`` — a rotation by
    ``value`` rad about the axis (revolute, continuous), a translation by ``value`` m along it (prismatic)."""
    T = np.eye(4)
    a = np.asarray(joint.axis, dtype=float)
    if joint.type == "prismatic":
        T[:3, 3] = a * value
    else:
        K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
        T[:3, :3] = np.eye(3) + math.sin(value) * K + (1.0 - math.cos(value)) * (K @ K)
    return T


def lock_joints(spec: RobotSpec, locked) -> tuple:
    """``(spec', locked')``: ``spec`` with each joint of ``locked`` (a mapping ``{joint name: position}``, an angle
    [rad] for revolute and continuous joints, metres for prismatic ones) made a fixed joint whose origin includes
    its motion at that position (``origin · exp(axis · value)``), so that its child merges into the parent body as
    any fixed joint's does (Pinocchio's ``buildReducedModel``); ``locked'`` is ``{name: float position}`` in the
    file's joint order. ModelError naming the joint for a name that is no joint of the robot, a joint that is
    fixed already, a position that is not a finite number or outside the joint's ``<limit lower upper>``."""
    if locked is None:
        return spec, {}
    if not hasattr(locked, "items"):
        raise ModelError(f"locked_joints must be a mapping {{joint name: position}}, got {type(locked).__name__}")
    by_name = {j.name: j for j in spec.joints}
    values = {}
    for name, value in locked.items():
        joint = by_name.get(name)
        if joint is None:
            movable = [j.name for j in spec.joints if j.type != "fixed"]
            raise ModelError(f"locked_joints: the robot has no joint {name!r} (its movable joints: "
                             f"{_names(movable, 8) or 'none'})", joint=str(name))
        if joint.type == "fixed":
            raise ModelError(f"locked_joints: joint {name!r} is a fixed joint already (only revolute, continuous "
                             "and prismatic joints can be locked)", joint=name)
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ModelError(f"locked_joints: the position of joint {name!r} is not a number", joint=name) from None
        if not math.isfinite(x):
            raise ModelError(f"locked_joints: the position of joint {name!r} must be finite, got {x!r}", joint=name)
        if not joint.lower <= x <= joint.upper:
            unit = "m" if joint.type == "prismatic" else "rad"
            raise ModelError(f"locked_joints: the position {x!r} {unit} of joint {name!r} is outside its <limit> "
                             f"range [{joint.lower!r}, {joint.upper!r}]", joint=name)
        values[name] = x
    if not values:
        return spec, {}
    joints = []
    for j in spec.joints:
        if j.name in values:
            origin = j.origin @ joint_motion(j, values[j.name])
            j = JointSpec(j.name, "fixed", j.parent, j.child, origin, j.axis)
        joints.append(j)
    ordered = {j.name: values[j.name] for j in spec.joints if j.name in values}
    report = spec.report
    from mbs_ros.dynamics.model.mimic import mimic_elements

    mimics = [m.name for m in mimic_elements(spec.xml)]
    if any(name in values for name in mimics):  # a locked mimic joint is not an independent one: say only the rest
        rest = [name for name in mimics if name not in values]
        before = _mimic_item(mimics)
        report = tuple((_mimic_item(rest) if item == before else item) for item in report
                       if item != before or rest)
    return dataclasses.replace(spec, joints=tuple(joints), report=report), ordered
