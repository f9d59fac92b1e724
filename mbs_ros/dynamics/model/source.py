"""Where a node's model comes from: ``robot_description``, ``model_file`` or the single-body parameters.

Shared by ``dynamics_node`` and ``controller_node`` so that both build the same model from the same parameters:

- ``robot_description`` (string): URDF XML text, as ``robot_state_publisher`` takes it;
- ``model_file`` (string): a URDF (``.urdf``), xacro (``.xacro``, expanded without arguments) or robot YAML
  (``.yaml``/``.yml``, schema in :mod:`mbs_ros.dynamics.model.robot_yaml`; it may carry its own base group, gravity and
  xacro arguments) file. A relative path is looked up in the package's share directory (found through
  ``ament_index_python``, e.g. ``config/robots/uvms_6dof.yaml``), then in the current directory; a
  ``package://PKG/PATH`` or ``file://`` URI as :mod:`mbs_ros.packages` resolves it;
- neither: a single rigid body described by the ``mass``/``inertia``/``com`` parameters.

Giving both is refused. Nothing here computes physics: it reads files and calls :class:`mbs_ros.dynamics.Model`.

Errors (:class:`ParameterError`, one line) name the parameter, the path and the reason, never a file's or a
string's content: a file that is not a URDF (``model_file:=/etc/shadow``) is reported by its path and why
(permission denied, not UTF-8 text, not XML), URDF text by its length. A leading UTF-8 byte-order mark is
dropped.
"""

from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model.model import BASES, MAX_MASS_RATIO, TREE_BASES
from mbs_ros.packages import is_uri, resolve_uri

__all__ = ["ParameterError", "Source", "load_source", "resolve_model_file", "sensors_path", "companion_path",
           "NO_SENSORS", "scale_urdf_inertia", "link_order", "build_multibody", "meshes_for_rviz", "base_link", "model_defaults",
           "BASES", "TREE_BASES", "PACKAGE"]

PACKAGE = "mbs_ros"


class ParameterError(ValueError):
    """A parameter value (or combination) the node refuses; the message is the reason."""


@dataclass(frozen=True)
class Source:
    """A loaded model source. ``kind``: ``rigid_body`` (no source given), ``robot_description``, ``urdf``,
    ``xacro`` or ``yaml``; ``urdf``: its URDF XML (None for a rigid body); ``base``/``gravity``: what a robot YAML
    file says (None otherwise); ``root_link``: the URDF's root link; ``joints``: ``(name, type, parent, child)`` of
    every URDF joint, fixed ones included (for TF)."""

    kind: str
    path: str = ""
    urdf: Optional[str] = None
    base: Optional[str] = None
    gravity: Optional[Tuple[float, float, float]] = None
    name: str = ""
    root_link: str = "base_link"
    joints: Tuple[Tuple[str, str, str, str], ...] = ()
    fluid_density: Optional[float] = None  # a robot YAML's fluid.density

    @property
    def multibody(self) -> bool:
        return self.urdf is not None

    def describe(self) -> str:
        if self.kind == "rigid_body":
            return "single rigid body"
        if self.kind == "robot_description":
            return f"robot_description ({self.name})"
        return f"{self.path} ({self.name})"


_BOM = "\ufeff"


def resolve_model_file(path: str) -> str:
    """Absolute path of ``model_file``: a ``package://`` or ``file://`` URI resolved by
    :func:`mbs_ros.packages.resolve_uri`; a path as given if absolute, else the first of ``<share>/path`` (the
    mbs_ros share directory from ament_index) and ``./path`` that exists. ParameterError naming the places tried (or, for
    a value that is URDF/XML text rather than a path, saying so without quoting it)."""
    from mbs_ros.dynamics.model.urdf import looks_like_xml_text

    if looks_like_xml_text(path):
        raise ParameterError(f"model_file is not a path but text ({len(path)} characters, e.g. URDF XML): give "
                             "URDF text as robot_description, or the file's path as model_file")
    path = path.lstrip(_BOM).strip()
    if is_uri(path):  # package://PKG/PATH (ament index, then pip prefixes) or file:///PATH
        found = resolve_uri(path)
        if found.path is None:
            raise ParameterError(f"model_file {path!r}: {found.reason}")
        return found.path
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        if os.path.isfile(path):
            return path
        raise ParameterError(f"model_file {path!r}: file not found")
    tried = []
    try:
        from ament_index_python.packages import get_package_share_directory

        share = get_package_share_directory(PACKAGE)
        candidate = os.path.join(share, path)
        tried.append(candidate)
        if os.path.isfile(candidate):
            return candidate
    except Exception:  # noqa: BLE001 - no ament index (AMENT_PREFIX_PATH unset) or package not installed
        tried.append(f"<{PACKAGE} share directory: not found through ament_index>")
    candidate = os.path.abspath(path)
    tried.append(candidate)
    if os.path.isfile(candidate):
        return candidate
    raise ParameterError(f"model_file {path!r}: file not found (tried {', '.join(tried)})")


def load_source(robot_description: str, model_file: str) -> Source:
    """Read the model source named by the parameters (see the module docstring); ParameterError with the reason."""
    from mbs_ros.dynamics.model.robot_yaml import load_robot
    from mbs_ros.dynamics.model.urdf import ModelError, load_urdf_xml, parse_urdf

    robot_description = (robot_description or "").lstrip(_BOM).strip()
    model_file = (model_file or "").lstrip(_BOM).strip()
    if robot_description and model_file:
        raise ParameterError("give either robot_description or model_file, not both")
    if not robot_description and not model_file:
        return Source("rigid_body")
    base = gravity = density = None
    name = ""
    path = ""
    if robot_description:
        kind, xml = "robot_description", robot_description
        where = "robot_description"
        if not xml.startswith("<"):
            raise ParameterError(f"robot_description ({len(xml)} characters) is not URDF XML text: it does not "
                                 "start with '<' (use model_file for a path)")
    else:
        path = resolve_model_file(model_file)
        where = f"model_file {model_file!r}" + (f" ({path})" if os.path.abspath(model_file) != path else "")
        low = path.lower()
        try:
            if low.endswith((".yaml", ".yml")):
                kind = "yaml"
                cfg = load_robot(path)
                xml, base, gravity, name = cfg.urdf, cfg.base, tuple(cfg.gravity), cfg.name
                density = cfg.fluid_density
            else:
                kind = "xacro" if low.endswith(".xacro") else "urdf"
                xml = load_urdf_xml(path)
        except ParameterError:
            raise
        except ModelError as e:  # names the file itself: keep the reason only
            raise ParameterError(f"{where}: {e.reason}") from None
        except Exception as e:  # noqa: BLE001 - robot_yaml, xacro and file errors carry their reason
            raise ParameterError(f"{where}: {e}") from None
    try:
        spec = parse_urdf(xml)
    except ModelError as e:
        # "the URDF text (N characters) is not ..." reads better as the parameter's own, with the length
        reason = e.reason.replace(f"the URDF text ({len(xml)} characters) is not a valid URDF", "not a valid URDF")
        if robot_description:
            where = f"robot_description ({len(xml)} characters)"
        raise ParameterError(f"{where}: {reason}") from None
    except Exception as e:  # noqa: BLE001
        raise ParameterError(f"{where}: {e}") from None
    joints = tuple((j.name, j.type, j.parent, j.child) for j in spec.joints)
    return Source(kind, path, spec.xml, base, gravity, name or spec.name, spec.root, joints, density)


def meshes_for_rviz(source: Source, limit: int = 3) -> Tuple[Optional[str], str]:
    """``(urdf, warning)``: the robot's URDF with every mesh filename (visual and collision) made one RViz resolves,
    and one line about those it cannot ('' when none). A ``package://`` URI found through the ament index stays as it is; one
    whose package is found only outside it (a pip wheel's prefix, :func:`mbs_ros.packages.resolve_uri`) and a plain
    path (relative ones beside the model file) that exists become ``file://`` URIs of the file, so RViz and our
    markers show them on this machine; a URI or path that does not resolve is kept and named in the warning (at most
    ``limit`` of them, then a count). ``urdf`` is None for a single rigid body."""
    if source.urdf is None:
        return None, ""
    try:
        root = ET.fromstring(source.urdf.lstrip(_BOM))
    except ET.ParseError:
        return source.urdf, ""
    base_dir = os.path.dirname(source.path) if source.path else None
    missing, rewritten = [], 0
    for mesh in root.iter("mesh"):  # visual and collision geometry: RViz shows either
        uri = (mesh.get("filename") or "").strip()
        found = resolve_uri(uri, base_dir) if uri else None
        if found is None or found.path is None:
            missing.append(f"{uri} ({found.reason})" if uri else "(empty filename)")
        elif not is_uri(uri) or (uri.startswith("package://") and not found.ament):
            mesh.set("filename", "file://" + found.path)
            rewritten += 1
    if not missing and not rewritten:
        return source.urdf, ""
    xml = '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") if rewritten else source.urdf
    if not missing:
        return xml, ""
    names = sorted(set(missing))
    shown = "; ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return xml, (f"RViz will not show {len(missing)} mesh{'es' if len(missing) > 1 else ''} of "
                 f"{source.describe()}: {shown}")


def scale_urdf_inertia(xml: str, scale: float, link_scales=None, added_mass_scale: float = 1.0) -> str:
    """The URDF with every link's mass and inertia multiplied by ``scale`` (centres of mass unchanged), link
    ``name``'s by ``link_scales[name]`` on top of it, and every ``<hydrodynamics><added_mass>`` by
    ``added_mass_scale``: a deliberately wrong model for robustness tests (the controller node's ``mass_scale``)
    or a perturbed true model for test campaigns (the dynamics node's ``mass_scale``, ``link_mass_scales``,
    ``added_mass_scale``). Scaling a link's mass and rotational inertia together scales its 6x6 spatial inertia
    by the same factor (Featherstone 2008, eq. 2.63), so the scaled model stays physical for any factor > 0."""
    link_scales = dict(link_scales or {})
    if scale == 1.0 and added_mass_scale == 1.0 and all(f == 1.0 for f in link_scales.values()):
        return xml
    root = ET.fromstring(xml)
    for link in root.iter("link"):
        factor = scale * float(link_scales.get(link.get("name"), 1.0))
        for inertial in link.findall("inertial") if factor != 1.0 else ():
            m = inertial.find("mass")
            if m is not None and "value" in m.attrib:
                m.set("value", repr(float(m.get("value")) * factor))
            i = inertial.find("inertia")
            if i is not None:
                for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
                    if k in i.attrib:
                        i.set(k, repr(float(i.get(k)) * factor))
        for added in link.findall("hydrodynamics/added_mass") if added_mass_scale != 1.0 else ():
            try:
                values = [float(x) * added_mass_scale for x in (added.text or "").replace(",", " ").split()]
            except ValueError:
                continue  # left as written: the passive elements' reader names what is wrong with it
            added.text = " ".join(repr(x) for x in values)
    return ET.tostring(root, encoding="unicode")


def link_order(source: Source) -> Tuple[str, ...]:
    """Every URDF link of a robot source in the model's order (:attr:`Model.link_names`: the tree's depth-first
    walk, children in joint-name order), the order of the dynamics node's ``link_mass_scales``."""
    from mbs_ros.dynamics.model.tree import build_tree
    from mbs_ros.dynamics.model.urdf import parse_urdf

    return tuple(build_tree(parse_urdf(source.urdf), "fixed").link_names)


MASS_RATIO_DESCRIPTION = (
    f"Largest ratio of two moving bodies' masses a robot model may have ({MAX_MASS_RATIO:g}: beyond it a step size "
    "that suits the light body is far too small for the heavy one, or the reverse, and the mass matrix is nearly "
    "singular); 0 = no bound. A robot beyond it is refused at start-up naming the two bodies.")


def build_multibody(source: Source, base: str, gravity, mass_scale: float = 1.0,
                    max_mass_ratio: float = MAX_MASS_RATIO, locked_joints=None, mimic: str = "reduce",
                    fluid_density: float = 0.0, current=None, armature=(), link_mass_scales=(),
                    added_mass_scale: float = 1.0) -> Model:
    """The multibody :class:`Model` of a loaded source on ``base`` (one of TREE_BASES); ``max_mass_ratio`` 0 lifts
    the model's mass-ratio bound; ``locked_joints`` ``{joint name: position}``: joints made fixed at that position
    (see :meth:`Model.from_urdf`); ``mimic``: ``reduce`` or ``independent`` (the same); ``fluid_density`` > 0
    [kg/m³] overrides the robot YAML's (default 1000) for links whose ``<hydrodynamics>`` names none; ``current``
    the water's current (world axes, m/s); ``armature`` the ``joint_armature`` parameter (empty: none; one
    number: every joint; else one per joint, see :meth:`Model.from_urdf`); ``link_mass_scales`` (empty: none)
    one factor per link in :func:`link_order` on top of ``mass_scale``, and ``added_mass_scale`` (see
    :func:`scale_urdf_inertia`)."""
    if base not in TREE_BASES:
        raise ParameterError(f"base_group must be one of {', '.join(TREE_BASES)}, got {base!r}")
    links = {}
    if len(link_mass_scales):
        order = link_order(source)
        if len(link_mass_scales) != len(order):
            raise ParameterError(f"link_mass_scales must have one factor per link ({len(order)}: "
                                 f"{', '.join(order)}) or none, got {len(link_mass_scales)}")
        links = dict(zip(order, (float(f) for f in link_mass_scales)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # triangle-inequality warnings: the URDF author's choice
            xml = scale_urdf_inertia(source.urdf, mass_scale, links, added_mass_scale)
            return Model.from_urdf(xml, base=base,
                                   gravity=np.asarray(gravity, dtype=float),
                                   max_mass_ratio=float(max_mass_ratio) if max_mass_ratio > 0 else None,
                                   locked_joints=locked_joints or None, mimic=mimic,
                                   fluid_density=fluid_density if fluid_density > 0 else source.fluid_density,
                                   current=current,
                                   armature=None if not armature else armature[0] if len(armature) == 1
                                   else tuple(armature))
    except Exception as e:  # noqa: BLE001 - the model's ValueErrors carry the reason
        raise ParameterError(f"cannot build the {base} model of {source.describe()}: {e}") from None


def default_base(source: Source) -> str:
    """base_group when the parameter is not given: the robot YAML's, ``fixed`` for a URDF, ``se3`` for a body."""
    if source.base is not None:
        return source.base
    return "fixed" if source.multibody else "se3"


def base_link(source: Source) -> str:
    """The link whose pose is the base's (odom's child, the nodes' default ``base_frame``): the URDF's root link,
    or the link a ``world`` root holds (the first by name when several)."""
    if source.root_link != "world":
        return source.root_link
    children = sorted(child for _n, _t, parent, child in source.joints if parent == "world")
    return children[0] if children else "world"


def default_gravity(source: Source) -> Tuple[float, float, float]:
    return source.gravity if source.gravity is not None else (0.0, 0.0, -9.81)


def model_defaults(source: Source) -> dict:
    """The parameter defaults a robot's source gives (``base_group``, ``gravity``, ``base_frame``); none for a
    single body."""
    if not source.multibody:
        return {}
    return dict(base_group=default_base(source), gravity=default_gravity(source), base_frame=base_link(source))


def joint_positions_to_q(model: Model, angles) -> np.ndarray:
    """The joints' part of q from one position per joint (``joint_names`` order): revolute/prismatic as is,
    continuous as ``(cos θ, sin θ)``."""
    angles = np.asarray(angles, dtype=float).reshape(len(model.joint_names))
    if "continuous" not in model.joint_types:  # one coordinate per joint: the angles themselves
        return angles.copy()
    out = []
    for a, t in zip(angles, model.joint_types):
        if t == "continuous":
            out += [np.cos(a), np.sin(a)]
        else:
            out.append(a)
    return np.array(out, dtype=float)


def joint_positions_from_q(model: Model, q) -> np.ndarray:
    """One position per joint from the joints' part of ``q[nq_base:]`` (angle of ``(cos θ, sin θ)`` for
    continuous joints)."""
    q = np.asarray(q, dtype=float)
    out, i = [], 0
    for t in model.joint_types:
        if t == "continuous":
            out.append(float(np.arctan2(q[i + 1], q[i])))
            i += 2
        else:
            out.append(float(q[i]))
            i += 1
    return np.array(out)


def base_sizes(model: Model) -> Tuple[int, int]:
    """``(nq_base, nv_base)``: the base group's share of q and v (0, 0 for a fixed base)."""
    if model.group is None:
        return 0, 0
    nqj = sum(2 if t == "continuous" else 1 for t in model.joint_types)
    return model.nq - nqj, model.nv - len(model.joint_names)


NO_SENSORS = "none"  # the sensors parameter's value for no sensors


def sensors_path(setting: str, source: Source) -> Optional[str]:
    """The file the ``sensors`` parameter names: ``none`` -> None; empty -> the robot YAML's own file when the
    model came from one (None otherwise; the YAML may still carry no sensors); else the path resolved as
    ``model_file`` is (:func:`resolve_model_file`). ParameterError naming it."""
    return companion_path("sensors", setting, source)


def companion_path(parameter: str, setting: str, source: Source) -> Optional[str]:
    """The file a parameter naming a companion of the model (``sensors``, ``world``) names: ``none`` -> None;
    empty -> the robot YAML's own file when the model came from one (None otherwise); else the path resolved as
    ``model_file`` is (:func:`resolve_model_file`). ParameterError naming ``parameter``."""
    setting = (setting or "").strip()
    if setting.lower() == NO_SENSORS:
        return None
    if not setting:
        return source.path if source.kind == "yaml" else None
    try:
        return resolve_model_file(setting)
    except ParameterError as e:
        text = str(e)
        raise ParameterError(parameter + text[len("model_file"):] if text.startswith("model_file") else
                             f"{parameter}: {text}") from None
