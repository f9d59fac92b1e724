"""Scenario YAML -> node specs: the one piece of code the launch files and the no-launch runner share.

:func:`load_scenario` reads and checks a ``config/scenarios/*.yaml`` file (every error a :class:`ScenarioError`
naming the file and the key); :func:`node_specs` turns it into :class:`NodeSpec` s that ``launch_ros`` and
:mod:`mbs_ros.process` start. It imports neither launch, rclpy nor a node module (the nodes' parameter names
come from :mod:`mbs_ros.nodes.parameters`), so a scenario is checked without ROS. The schema: docs/bringup.md.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from mbs_ros.nodes.parameters import names as parameter_names
from mbs_ros.nodes.parameters import table as parameter_table
from mbs_ros.nodes.parameters.controller import LAWS, STATE_SOURCES
from mbs_ros.nodes.paramsfile import YamlFileError, flatten, read_params_file, read_yaml
from mbs_ros.yamlfile import shown
from mbs_ros.yamlschema import Reader, SchemaError
from mbs_ros.dynamics.mimic import MIMIC_MODES
from mbs_ros.packages import is_uri, resolve_uri

__all__ = ["ScenarioError", "Scenario", "Robot", "Waypoint", "NodeSpec", "load_scenario", "node_specs",
           "scenario_path", "list_scenarios", "package_root", "resolve_path", "record_topics",
           "DEFAULT_RECORD", "PACKAGE", "LAWS", "declared_parameters", "apply_overrides", "parse_path",
           "document_value"]

PACKAGE = "mbs_ros"
BASE_GROUPS = ("fixed", "se3", "schoenflies", "se2", "so3", "so3xr3")

# What --record takes when the scenario has no ``record`` key: every robot's state, references, commands and
# applied efforts, its URDF (robot_description: the animation's shapes), plus TF, the energy bookkeeping (the
# energy ports too), and /clock with sim time.
DEFAULT_RECORD = ("odom", "joint_states", "joint_reference", "base_reference", "cmd_wrench", "cmd_joint_effort",
                  "wrench", "joint_effort", "energy", "robot_description", "/tf", "/tf_static", "/diagnostics")

# node role -> (executable = console script, python module, node name)
NODES = {
    "dynamics": ("dynamics_node", "mbs_ros.nodes.dynamics_node", "dynamics_node"),
    "controller": ("controller_node", "mbs_ros.nodes.controller_node", "controller_node"),
    "reference": ("reference_node", "mbs_ros.nodes.reference_node", "reference_node"),
    "estimator": ("estimator_node", "mbs_ros.nodes.estimator_node", "estimator_node"),
}

_GLOBAL_KEYS = ("name", "description", "physics_rate", "publish_rate", "control_rate", "sim_time",
                "real_time_factor", "lockstep", "duration", "record", "robots")
_ROBOT_KEYS = ("namespace", "count", "offset", "model", "params", "base_group", "locked_joints", "mimic", "initial",
               "controller", "dynamics", "remappings", "reference", "sensors", "estimator")
_INITIAL_KEYS = {"position": "initial_position", "rpy": "initial_rpy", "twist": "initial_twist",
                 "joint_positions": "initial_joint_positions", "joint_velocities": "initial_joint_velocities"}
_REFERENCE_KEYS = ("base", "joints", "joint_names")
_BASE_WAYPOINT_KEYS = ("time", "position", "rpy")
_JOINT_WAYPOINT_KEYS = ("time", "positions")
# keys the scenario sets itself: not allowed in the free-form controller/dynamics mappings
_MANAGED = ("model_file", "robot_description", "base_group", "use_sim_time", "publish_clock", "lockstep",
            "locked_joints", "locked_joint_positions", "mimic")
# estimator_node parameters the scenario sets itself (from the robot's model, sensors, initial state and the global
# rates): not allowed in the estimator mapping
_ESTIMATOR_MANAGED = _MANAGED + ("sensors", "physics_rate", "control_rate", "gravity", "initial_position",
                                 "initial_rpy", "initial_velocity", "initial_joint_positions")


class ScenarioError(SchemaError):
    """A scenario that cannot be run: ``file`` and ``key`` (a dotted path such as ``robots[0].initial.rpy``)
    name where, the message (one line) says why. Errors of the file itself (YAML syntax, encoding) have no key but
    a ``line`` and ``column`` (1-based): ``file:line:column: reason``."""


# ------------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Waypoint:
    """A reference waypoint: ``time`` [s after the start]; ``position``/``rpy`` (base) or ``positions`` (joints)."""

    time: float
    position: Tuple[float, ...] = ()
    rpy: Tuple[float, ...] = ()
    positions: Tuple[float, ...] = ()


@dataclass(frozen=True)
class Robot:
    """One robot of a scenario, after fleet expansion and checks against its model."""

    namespace: str  # "/uvms"
    model_file: str  # absolute path, or "" when the params file has none (then robot_description must be there)
    base_group: str
    joint_names: Tuple[str, ...]
    nv: int
    dynamics: Dict[str, object]  # dynamics_node parameters from the robot's keys (params file merged in)
    controller: Optional[Dict[str, object]]  # None: no controller
    remappings: Tuple[Tuple[str, str], ...] = ()
    estimator: Optional[Dict[str, object]] = None  # estimator_node parameters; None: no estimator
    base_reference: Tuple[Waypoint, ...] = ()
    joint_reference_names: Tuple[str, ...] = ()
    joint_reference: Tuple[Waypoint, ...] = ()

    @property
    def name(self) -> str:
        return self.namespace.strip("/")

    @property
    def floating(self) -> bool:
        return self.base_group != "fixed"

    @property
    def has_reference(self) -> bool:
        return bool(self.base_reference or self.joint_reference)


@dataclass(frozen=True)
class Scenario:
    path: Path
    name: str
    description: str = ""
    physics_rate: Optional[float] = None
    publish_rate: Optional[float] = None
    control_rate: Optional[float] = None
    sim_time: bool = False
    real_time_factor: Optional[float] = None
    lockstep: bool = False
    duration: Optional[float] = None
    record: Union[str, Tuple[str, ...], None] = None  # "all", topics, or None (DEFAULT_RECORD)
    robots: Tuple[Robot, ...] = ()


@dataclass(frozen=True)
class NodeSpec:
    """Everything needed to start one node, with ``launch_ros.actions.Node`` or as a process.

    ``parameters`` is flat (``name -> value``; numbers are floats, lists homogeneous and never empty, as both
    launch_ros and rcl's parameter-file parser want them)."""

    role: str  # dynamics | controller | reference | estimator
    robot: str  # the robot's namespace without slashes
    package: str
    executable: str  # console script (ros2 run / launch_ros)
    module: str  # python -m module (no launch)
    name: str
    namespace: str
    parameters: Dict[str, object] = field(default_factory=dict)
    remappings: Tuple[Tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.namespace.strip('/')}/{self.name}" if self.namespace.strip("/") else self.name

    def params_document(self) -> Dict[str, object]:
        """The parameter file content (``/**: ros__parameters: ...``) for ``--params-file``."""
        return {"/**": {"ros__parameters": dict(self.parameters)}}

    def params_yaml(self) -> str:
        return yaml.safe_dump(self.params_document(), default_flow_style=None, sort_keys=False, width=100)

    def ros_arguments(self, params_file) -> List[str]:
        """``--ros-args -r __ns:=… -r __node:=… --params-file … [-r from:=to]``."""
        from mbs_ros.process import ros_arguments

        return ros_arguments(name=self.name, namespace=self.namespace, params_file=params_file,
                             remappings=dict(self.remappings))

    def command(self, params_file, python: str = sys.executable) -> List[str]:
        """The command line without launch: ``python -m <module> --ros-args …``."""
        return [python, "-m", self.module] + self.ros_arguments(params_file)


# ---------------------------------------------------------------------------------------- paths


def package_root() -> Optional[Path]:
    """The directory holding ``config/`` and ``launch/``: the source tree, else the installed share directory."""
    here = Path(__file__).resolve().parents[2]
    if (here / "config").is_dir():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except Exception:  # noqa: BLE001 - no ament index or package not installed
        return None


def resolve_path(path: Union[str, os.PathLike], beside: Optional[Path] = None) -> Optional[Path]:
    """An existing file: absolute as given; relative: in the package, beside ``beside``'s directory, then in the
    current directory. None if none exists."""
    p = Path(os.path.expanduser(str(path)))
    if p.is_absolute():
        return p if p.is_file() else None
    roots = [package_root(), beside.parent if beside is not None else None, Path.cwd()]
    for root in roots:
        if root is not None and (root / p).is_file():
            return (root / p).resolve()
    return None


def scenario_path(name_or_path: Union[str, os.PathLike]) -> Path:
    """A scenario file from a path, or a name in ``config/scenarios`` (``vehicle_manipulator`` or
    ``vehicle_manipulator.yaml``). FileNotFoundError listing the known scenarios."""
    text = str(name_or_path)
    p = Path(os.path.expanduser(text))
    if p.is_file():
        return p.resolve()
    candidates = [f"config/scenarios/{text}", f"config/scenarios/{text}.yaml"]
    for c in candidates:
        found = resolve_path(c)
        if found is not None:
            return found
    known = ", ".join(p.stem for p in list_scenarios()) or "none found"
    raise FileNotFoundError(f"scenario {text!r} not found (a file, or one of: {known})")


def list_scenarios() -> List[Path]:
    root = package_root()
    if root is None or not (root / "config" / "scenarios").is_dir():
        return []
    return sorted((root / "config" / "scenarios").glob("*.yaml"))


# -------------------------------------------------------------------------------------- checking


class _Checker(Reader):
    """The schema reader (:class:`mbs_ros.yamlschema.Reader`) raising ScenarioError naming the file and the key;
    a mapping left empty (``key:`` with nothing) is an empty one."""

    def __init__(self, path: Path):
        super().__init__(path, error=ScenarioError)

    def mapping(self, value, key: str, allowed: Sequence[str]) -> dict:
        return super().mapping(value, key, allowed, none_is_empty=True)


def _join(key: str, sub: str) -> str:
    return f"{key}.{sub}" if key else sub


def _show(value) -> str:
    """A value of the file as an error shows it: :func:`mbs_ros.yamlfile.shown` (never a foreign file's text)."""
    return shown(value)


# ------------------------------------------------------------------------------------ loading


def load_scenario(path: Union[str, os.PathLike], *, count: Optional[int] = None,
                  overrides: Optional[Mapping[str, object]] = None) -> Scenario:
    """Read and check a scenario file (a path or a name in ``config/scenarios``).

    ``count``: the number of copies of every fleet template robot (a robot with ``count``); an error if there is
    none. ``overrides``: values replacing the file's, by global key or by path (:func:`apply_overrides`, e.g.
    ``{"duration": 2.0, "robots[0].controller.kp": 4.0}``), checked as the file's own values are."""
    try:
        path = scenario_path(path)
    except FileNotFoundError as e:
        raise ScenarioError(path, "", str(e)) from None
    c = _Checker(path)
    try:
        doc = read_yaml(path)
    except YamlFileError as e:  # syntax, encoding, a byte-order mark inside: one line with the place
        raise ScenarioError(path, "", e.reason, e.line, e.column) from None
    if not isinstance(doc, Mapping):
        c.fail("", f"must be a mapping with a 'robots' list, got {_show(doc)}")
    doc = apply_overrides(path, doc, overrides)
    c.mapping(doc, "", _GLOBAL_KEYS)

    def opt_number(key, lo=None, lo_open=False):
        return None if doc.get(key) is None else c.number(doc[key], key, lo, lo_open)

    g = dict(
        physics_rate=opt_number("physics_rate", 0.0, True),
        publish_rate=opt_number("publish_rate", 0.0, True),
        control_rate=opt_number("control_rate", 0.0, True),
        real_time_factor=opt_number("real_time_factor", 0.0),
        duration=opt_number("duration", 0.0, True),
        sim_time=c.boolean(doc.get("sim_time", False), "sim_time"),
        lockstep=c.boolean(doc.get("lockstep", False), "lockstep"),
    )
    if g["physics_rate"] and g["publish_rate"] and g["publish_rate"] > g["physics_rate"]:
        c.fail("publish_rate", f"{g['publish_rate']:g} Hz exceeds physics_rate {g['physics_rate']:g} Hz")
    if g["physics_rate"] and g["control_rate"] and g["control_rate"] > g["physics_rate"]:
        c.fail("control_rate", f"{g['control_rate']:g} Hz exceeds physics_rate {g['physics_rate']:g} Hz")
    if g["real_time_factor"] == 0.0 and not (g["sim_time"] or g["lockstep"]):
        c.fail("real_time_factor", "0 (as fast as possible) needs sim_time or lockstep: the nodes' wall clocks "
                                   "would not follow the simulation")
    record = doc.get("record")
    if record is not None:
        if record == "all" or record is True:
            record = "all"
        else:
            record = c.names(record, "record")
    name = doc.get("name", path.stem)
    name = c.text(name, "name")
    description = doc.get("description") or ""
    if not isinstance(description, str):
        c.fail("description", f"must be text, got {_show(description)}")

    robots_doc = doc.get("robots")
    if isinstance(robots_doc, (str, bytes, Mapping)) or not isinstance(robots_doc, Sequence) or not robots_doc:
        c.fail("robots", f"must be a non-empty list of robots, got {_show(robots_doc)}")
    templates = [i for i, r in enumerate(robots_doc) if isinstance(r, Mapping) and "count" in r]
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ScenarioError(path, "count", f"must be a whole number >= 1, got {_show(count)}")
        if not templates:
            raise ScenarioError(path, "robots", "count given, but no robot is a fleet template (a robot with "
                                                "'count' and a namespace with '{i}')")
    robots: List[Robot] = []
    for i, r in enumerate(robots_doc):
        robots += _robots(c, r, f"robots[{i}]", count, g)
    seen = {}
    for i, r in enumerate(robots):
        if r.namespace in seen:
            c.fail("robots", f"namespace {r.namespace} is used twice")
        seen[r.namespace] = i
    if g["sim_time"] and len(robots) > 1:
        # Each dynamics node keeps its own simulation time: several would put several /clock publishers on one
        # graph, and every node's time would jump between them.
        c.fail("sim_time", f"one /clock per graph: sim_time takes a single robot, this scenario has {len(robots)} "
                           "(run the fleet on the wall clock)")
    return Scenario(path=path, name=name, description=description.strip(), record=record,
                    robots=tuple(robots), **g)


_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


def parse_path(path: Path, key: str) -> List[Union[str, int]]:
    """``robots[0].controller.kp`` -> ``["robots", 0, "controller", "kp"]``; ScenarioError naming ``key`` when it
    is not a dotted path of names with ``[i]`` indices."""
    if not isinstance(key, str) or not key.strip():
        raise ScenarioError(path, shown(key), "an override needs a key (a global setting or a path such as "
                                              "robots[0].controller.kp)")
    out: List[Union[str, int]] = []
    for part in key.strip().split("."):
        m = _PATH_PART.match(part)
        if m is None:
            raise ScenarioError(path, key, "not a path: names joined by '.', each with optional [index] (e.g. "
                                           "robots[0].initial.position)")
        out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return out


def _path_text(parts: Sequence[Union[str, int]]) -> str:
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else p)
    return text


def _allowed_keys(parts: Sequence[Union[str, int]]) -> Optional[Tuple[str, ...]]:
    """The keys the schema allows in the mapping at ``parts`` (a path of names and indices); None: a mapping
    whose keys are not listed (free-form), () : not a mapping of the schema."""
    shape = tuple("[]" if isinstance(p, int) else p for p in parts)
    known = {
        (): tuple(k for k in _GLOBAL_KEYS),
        ("robots", "[]"): _ROBOT_KEYS,
        ("robots", "[]", "initial"): tuple(_INITIAL_KEYS),
        ("robots", "[]", "reference"): _REFERENCE_KEYS,
        ("robots", "[]", "reference", "base", "[]"): _BASE_WAYPOINT_KEYS,
        ("robots", "[]", "reference", "joints", "[]"): _JOINT_WAYPOINT_KEYS,
        ("robots", "[]", "controller"): tuple(n for n in declared_parameters("controller") if n not in _MANAGED),
        ("robots", "[]", "dynamics"): tuple(n for n in declared_parameters("dynamics")
                                            if n not in _MANAGED and not n.startswith("initial_")),
        ("robots", "[]", "estimator"): tuple(n for n in declared_parameters("estimator")
                                             if n not in _ESTIMATOR_MANAGED),
    }
    if shape in known:
        return known[shape]
    if shape in (("robots", "[]", "locked_joints"), ("robots", "[]", "remappings"), ("robots", "[]", "offset")):
        return None
    return ()


def apply_overrides(path: Path, doc: Mapping, overrides: Optional[Mapping[str, object]]) -> dict:
    """The scenario document ``doc`` with ``overrides`` applied: ``{key: value}`` where a key is a global setting
    (``duration``) or a path into the document (``robots[0].controller.kp``, ``robots[0].initial.position``,
    ``robots[0].dynamics.mass_scale``, ``robots[0].reference.base[1].position``, ``robots[0].controller.kp[6]``
    for one entry of a list). Applied to the raw document before any check, so every check of the file applies
    to the new values; a fleet template's entry (``robots[i]`` with ``count``) sets every robot of the fleet.
    Mappings on the way that the file leaves out (``controller``, ``dynamics``, ``initial``) are created. A key
    that names nothing the schema allows is a ScenarioError naming it."""
    out = copy.deepcopy(dict(doc))
    for key, value in (overrides or {}).items():
        parts = parse_path(path, key)
        if parts == ["robots"]:
            raise ScenarioError(path, key, "not a setting that can be overridden: set a robot's keys by path, e.g. "
                                           "robots[0].initial.position")
        node = out
        for depth, part in enumerate(parts):
            here, last = _path_text(parts[:depth + 1]), depth == len(parts) - 1
            if isinstance(part, int):
                if isinstance(node, (str, bytes, Mapping)) or not isinstance(node, list):
                    raise ScenarioError(path, key, f"{_path_text(parts[:depth]) or 'the document'} is not a list "
                                                   f"(got {_show(node)}): no entry [{part}]")
                if part >= len(node):
                    raise ScenarioError(path, key, f"{_path_text(parts[:depth])} has {len(node)} "
                                                   f"entr{'y' if len(node) == 1 else 'ies'}: no [{part}]")
                if last:
                    node[part] = value
                else:
                    node = node[part]
                continue
            if not isinstance(node, dict):
                where = _path_text(parts[:depth]) or "the document"
                raise ScenarioError(path, key, f"{where} is not a mapping (got {_show(node)}): no key {part!r}")
            allowed = _allowed_keys(parts[:depth])
            if allowed == ():
                raise ScenarioError(path, key, f"{_path_text(parts[:depth])} has no keys to set")
            if allowed is not None and part not in allowed:
                close = difflib.get_close_matches(part, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(allowed)})"
                raise ScenarioError(path, key, ("no such setting" if here == key else f"{here}: no such setting")
                                    + hint)
            if last:
                node[part] = value
            else:
                if node.get(part) is None and not isinstance(parts[depth + 1], int):
                    node[part] = {}
                if node.get(part) is False:
                    raise ScenarioError(path, key, f"{here} is false: nothing to set in it")
                node = node.get(part)
    return out


def document_value(path: Union[str, os.PathLike], key: str):
    """The value at ``key`` (a global setting or a path, as :func:`apply_overrides` takes) in the scenario file
    ``path`` (a path or a name) as written, else the node parameter's default for a controller, dynamics or
    estimator key; ScenarioError when the file has none and there is no default."""
    try:
        file = scenario_path(path)
    except FileNotFoundError as e:
        raise ScenarioError(path, "", str(e)) from None
    try:
        node = read_yaml(file)
    except YamlFileError as e:
        raise ScenarioError(file, "", e.reason, e.line, e.column) from None
    parts = parse_path(file, key)
    for depth, part in enumerate(parts):
        missing = (part >= len(node) if isinstance(node, list) else True) if isinstance(part, int) else \
            not isinstance(node, Mapping) or node.get(part) is None
        if missing:
            roles = {"controller": "controller", "dynamics": "dynamics", "estimator": "estimator"}
            if len(parts) == 4 and parts[0] == "robots" and parts[2] in roles and depth >= 2:
                params = parameter_table(roles[parts[2]])
                if parts[3] in params and params[parts[3]].default is not None:
                    return params[parts[3]].default
            raise ScenarioError(file, key, "not set in the scenario (and no node default to start from)")
        node = node[part]
    return copy.deepcopy(node)


def _robots(c: _Checker, doc, key: str, count: Optional[int], g: dict) -> List[Robot]:
    doc = c.mapping(doc, key, _ROBOT_KEYS)
    if doc.get("namespace") is None:
        c.fail(_join(key, "namespace"), "missing (every robot needs its own namespace)")
    ns_template = c.text(doc["namespace"], _join(key, "namespace"))
    n = 1
    offset = (0.0, 0.0, 0.0)
    if "count" in doc:
        n = doc["count"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            c.fail(_join(key, "count"), f"must be a whole number >= 1, got {_show(n)}")
        if count is not None:
            n = count
        if "{i}" not in ns_template:
            c.fail(_join(key, "namespace"), "a fleet template (with count) needs '{i}' in its namespace, e.g. "
                                            "'uvms{i}'")
        if "offset" in doc:
            offset = c.vector(doc["offset"], _join(key, "offset"), 3, "x, y, z in m")
    elif "offset" in doc:
        c.fail(_join(key, "offset"), "only a fleet template (a robot with count) has an offset")
    out = []
    for k in range(1, n + 1):
        ns = ns_template.replace("{i}", str(k)) if "count" in doc else ns_template
        shift = tuple((k - 1) * o for o in offset)
        out.append(_robot(c, doc, key, ns, shift, g))
    return out


def declared_parameters(role: str) -> Tuple[str, ...]:
    """The parameters node ``role`` (dynamics, controller, reference) takes: its table in
    :mod:`mbs_ros.nodes.parameters` (ROS-free), plus ``use_sim_time``, which every rclpy node has."""
    return parameter_names(role)


def _unknown_parameter(name: str, role: str, allowed: Sequence[str], other: Optional[str] = None,
                       other_allowed: Sequence[str] = (), section: str = "") -> str:
    """Why node ``role`` does not take parameter ``name``: the other node's (``other``), or did you mean …"""
    node = NODES[role][2]
    if other is not None and name in other_allowed:
        where = f" (put it under '{section}')" if section else ""
        return f"not a {node} parameter: a {NODES[other][2]} one{where}"
    candidates = [n for n in allowed if n not in _MANAGED]
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return f"unknown {node} parameter (did you mean {close[0]!r}?)"
    return f"unknown {node} parameter (it takes: {', '.join(sorted(candidates))})"


def _params_file_sections(c: _Checker, path: Path, key: str, namespace: str) -> Dict[str, Dict[str, object]]:
    """{node name: parameters} of a ROS parameter file, for dynamics_node and controller_node in ``namespace``,
    with the rules rcl applies (``/**`` for every node; ``/**/name``, ``name``, ``/ns/name`` for one).

    Checked as the scenario's own keys are: a parameter in a section for one node must be one it declares; in a
    section for every node (``/**``) one that either declares, and each node gets only its own."""
    try:
        sections = read_params_file(path)
    except YamlFileError as e:
        c.fail(key, f"parameter file {e}")
    declared = {node: declared_parameters(role) for role, (_e, _m, node) in NODES.items() if role != "reference"}
    roles = {node: role for role, (_e, _m, node) in NODES.items()}
    out = {}
    for node in ("dynamics_node", "controller_node"):
        merged: Dict[str, object] = {}
        wildcard = ("/**", "**")
        wanted = wildcard + (f"/**/{node}", f"**/{node}", node, f"/{node}", f"{namespace}/{node}")
        for section, params in sections.items():
            if section not in wanted:
                continue
            for name, value in flatten(params).items():
                if name in declared[node] or name.startswith("qos_overrides."):
                    merged[name] = value
                elif section not in wildcard:
                    other = next(n for n in declared if n != node)
                    c.fail(key, f"{path}: {section}: {name}: " + _unknown_parameter(
                        name, roles[node], declared[node], roles[other], declared[other]))
                elif not any(name in d for d in declared.values()):
                    guess = _did_you_mean(name, sorted(set().union(*declared.values())))
                    c.fail(key, f"{path}: {section}: {name}: unknown parameter of every node (dynamics_node, "
                                f"controller_node){guess}")
        out[node] = merged
    return out


def _did_you_mean(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_file(text: str, beside: Optional[Path]) -> Tuple[Optional[str], str]:
    """``(model_file value, reason)``: a package:// or file:// URI as written (the nodes resolve it too) once it
    resolves here, a path as the absolute path :func:`resolve_path` finds; ``(None, why)`` when neither does."""
    if is_uri(text):
        resolved = resolve_uri(text)
        return (text if resolved.path is not None else None), resolved.reason
    found = resolve_path(text, beside=beside)
    return (str(found) if found is not None else None), "not found"


def _robot(c: _Checker, doc: dict, key: str, namespace: str, shift: Tuple[float, ...], g: dict) -> Robot:
    from mbs_ros.dynamics import model_source as ms  # ROS-free: reads URDF/xacro/YAML, builds the Model

    namespace = "/" + namespace.strip("/")
    if namespace == "/" or any(not part or not (part[0].isalpha() or part[0] == "_")
                               or not all(ch.isalnum() or ch == "_" for ch in part)
                               for part in namespace.strip("/").split("/")):
        c.fail(_join(key, "namespace"), f"{shown(namespace)} is not a valid ROS namespace (letters, digits and _, "
                                        "each part starting with a letter)")
    declared = {role: declared_parameters(role) for role in ("dynamics", "controller")}
    dyn: Dict[str, object] = {}
    ctl: Dict[str, object] = {}
    if doc.get("params") is not None:
        pkey = _join(key, "params")
        found = resolve_path(c.text(doc["params"], pkey), beside=c.path)
        if found is None:
            c.fail(pkey, f"parameter file {shown(doc['params'])} not found (looked in the package, beside the scenario "
                         "and in the current directory)")
        sections = _params_file_sections(c, found, pkey, namespace)
        dyn.update(sections["dynamics_node"])
        ctl.update(sections["controller_node"])
    model_key = _join(key, "model")
    if doc.get("model") is not None:
        text = c.text(doc["model"], model_key).strip()
        value, why = _model_file(text, c.path)
        if value is None:
            c.fail(model_key, f"robot file {shown(text)}: {why}" if is_uri(text) else
                   f"robot file {shown(doc['model'])} not found (looked in the package, beside the scenario and in the "
                   "current directory)")
        dyn["model_file"] = ctl["model_file"] = value
    else:
        if not dyn.get("model_file") and not dyn.get("robot_description"):
            c.fail(model_key, "missing: give the robot file (model) or a parameter file (params) naming one")
        for params in (dyn, ctl):  # from the params file: resolve it as the scenario would
            if params.get("model_file"):
                text = str(params["model_file"]).strip()
                value, why = _model_file(text, c.path)
                if value is None:
                    c.fail(_join(key, "params"), f"its model_file {shown(params['model_file'])}: {why}" if is_uri(text)
                           else f"its model_file {shown(params['model_file'])} was not found")
                params["model_file"] = value
        ctl.setdefault("model_file", dyn.get("model_file", ""))
        if dyn.get("robot_description"):
            ctl.setdefault("robot_description", dyn["robot_description"])
    try:
        source = ms.load_source(str(dyn.get("robot_description", "") or ""), str(dyn.get("model_file", "") or ""))
    except ms.ParameterError as e:
        c.fail(model_key, str(e))
    if not source.multibody:
        c.fail(model_key, "names no robot (single rigid bodies are not scenario robots)")
    base = doc.get("base_group", dyn.get("base_group"))
    if base is None:
        base = ms.default_base(source)
    base_key = _join(key, "base_group")
    if base not in BASE_GROUPS:
        c.fail(base_key, f"must be one of {', '.join(BASE_GROUPS)}, got {_show(base)}")
    dyn["base_group"] = ctl["base_group"] = base
    gravity = dyn.get("gravity", ms.default_gravity(source))
    # --- locked joints: {name: position} here, the nodes' two parallel parameters (ROS parameters are no maps)
    lkey = _join(key, "locked_joints")
    if doc.get("locked_joints") is not None:
        locks = c.mapping(doc["locked_joints"], lkey, ())
        for name, value in locks.items():
            c.number(value, _join(lkey, str(name)))
        dyn["locked_joints"] = ctl["locked_joints"] = [str(n) for n in locks]
        dyn["locked_joint_positions"] = ctl["locked_joint_positions"] = [float(v) for v in locks.values()]
    names = list(dyn.get("locked_joints") or ())
    positions = list(dyn.get("locked_joint_positions") or ()) or [0.0] * len(names)
    if len(positions) != len(names):
        c.fail(_join(key, "params"), f"locked_joint_positions has {len(positions)} entries for {len(names)} "
                                     "locked_joints")
    locked = dict(zip(names, (float(v) for v in positions))) or None
    if doc.get("mimic") is not None:
        mkey = _join(key, "mimic")
        if doc["mimic"] not in MIMIC_MODES:
            c.fail(mkey, f"must be reduce or independent, got {_show(doc['mimic'])}")
        dyn["mimic"] = ctl["mimic"] = doc["mimic"]
    mimic = str(dyn.get("mimic", "reduce"))
    try:
        model = ms.build_multibody(source, base, gravity, locked_joints=locked, mimic=mimic)
    except ms.ParameterError as e:
        c.fail(base_key if doc.get("base_group") is not None else model_key, str(e))
    joints = tuple(model.joint_names)
    nq_base, nv_base = ms.base_sizes(model)

    # --- initial state
    ikey = _join(key, "initial")
    initial = c.mapping(doc.get("initial"), ikey, tuple(_INITIAL_KEYS))
    sizes = {"position": 3, "rpy": 3, "twist": 6, "joint_positions": len(joints), "joint_velocities": len(joints)}
    for k, param in _INITIAL_KEYS.items():
        if k in initial:
            what = {"position": "x, y, z in m", "rpy": "roll, pitch, yaw in rad", "twist": "vx, vy, vz, wx, wy, wz",
                    "joint_positions": "one per joint: " + ", ".join(joints),
                    "joint_velocities": "one per joint: " + ", ".join(joints)}[k]
            dyn[param] = c.vector(initial[k], _join(ikey, k), sizes[k], what)
    if shift != (0.0, 0.0, 0.0):
        p = tuple(float(x) for x in dyn.get("initial_position", (0.0, 0.0, 0.0)))
        dyn["initial_position"] = tuple(a + b for a, b in zip(p, shift))
    for param, n in (("initial_joint_positions", len(joints)), ("initial_joint_velocities", len(joints))):
        if param in dyn and len(dyn[param]) != n:  # from a params file
            c.fail(_join(key, "params"), f"{param} has {len(dyn[param])} entries for {n} joints")
    pose_p = dyn.get("initial_position", (0.0, 0.0, 0.0))
    pose_rpy = dyn.get("initial_rpy", (0.0, 0.0, 0.0))
    if base == "fixed":
        if any(float(x) != 0.0 for x in (*pose_p, *pose_rpy, *dyn.get("initial_twist", ()))):
            c.fail(ikey, "a fixed base stays where the URDF puts it: no initial position, rpy or twist")
    else:
        try:
            model.configuration_from_pose(_vec(pose_p), _quaternion(pose_rpy))
        except ValueError as e:
            c.fail(ikey, f"initial pose not on the {base} group: {e}")

    # --- controller
    ckey = _join(key, "controller")
    controller = doc.get("controller", {})
    if controller is False:
        ctl_params = None
    else:
        controller = c.mapping(controller, ckey, ())
        for k in controller:
            if k in _MANAGED:
                c.fail(_join(ckey, k), "set by the scenario (model, base_group, sim_time, lockstep)")
            if k not in declared["controller"]:
                c.fail(_join(ckey, k), _unknown_parameter(k, "controller", declared["controller"], "dynamics",
                                                          declared["dynamics"], _join(key, "dynamics")))
        ctl.update(controller)
        law = ctl.get("law", "computed_torque")
        if law not in LAWS:
            c.fail(_join(ckey, "law"), f"must be one of {', '.join(LAWS)}, got {_show(law)}")
        for gain in ("kp", "kd", "lambda", "lqr_q_position", "lqr_q_velocity", "lqr_r"):
            if gain in ctl:
                v = ctl[gain]
                gk = _join(ckey, gain)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    c.number(v, gk, 0.0, True)
                else:
                    vec = c.vector(v, gk, model.nv, f"gains, one per velocity component ({nv_base} base, then "
                                                    f"{', '.join(joints) or 'no joints'})")
                    if any(x <= 0 for x in vec):
                        c.fail(gk, "gains must be > 0")
        ctl_params = ctl

    # --- free-form dynamics parameters
    dkey = _join(key, "dynamics")
    extra = c.mapping(doc.get("dynamics"), dkey, ())
    for k in extra:
        if k in _MANAGED or k.startswith("initial_"):
            c.fail(_join(dkey, k), "set by the scenario (model, base_group, initial, sim_time, lockstep)")
        if k not in declared["dynamics"]:
            c.fail(_join(dkey, k), _unknown_parameter(k, "dynamics", declared["dynamics"], "controller",
                                                      declared["controller"], _join(key, "controller")))
    dyn.update(extra)

    # --- sensors (the dynamics node publishes them) and the estimator (fuses them)
    _sensors(c, doc, key, dyn, model, g)
    estimator = _estimator(c, doc, key, dyn, model, g, source)
    if ctl_params is not None:
        state_source = ctl_params.get("state_source", "truth")
        skey = _join(ckey, "state_source")
        if state_source not in STATE_SOURCES:
            c.fail(skey, f"must be one of {', '.join(STATE_SOURCES)}, got {_show(state_source)}")
        if state_source == "estimate" and estimator is None:
            c.fail(skey, f"estimate needs an estimator: add {_join(key, 'estimator')} (its imu, dvl, depth, "
                         "compass, encoders)")

    # --- remappings
    rkey = _join(key, "remappings")
    remaps = c.mapping(doc.get("remappings"), rkey, ())
    remappings = tuple((c.text(k, rkey), c.text(v, _join(rkey, k))) for k, v in remaps.items())

    # --- reference
    refkey = _join(key, "reference")
    ref = c.mapping(doc.get("reference"), refkey, _REFERENCE_KEYS)
    base_wps: List[Waypoint] = []
    if ref.get("base") is not None:
        bkey = _join(refkey, "base")
        if base == "fixed":
            c.fail(bkey, "a fixed base has no base reference")
        for i, wp in enumerate(_waypoint_list(c, ref["base"], bkey)):
            wkey = f"{bkey}[{i}]"
            wp = c.mapping(wp, wkey, _BASE_WAYPOINT_KEYS)
            for need in ("time", "position"):
                if need not in wp:
                    c.fail(_join(wkey, need), "missing")
            t = c.number(wp["time"], _join(wkey, "time"), 0.0)
            p = c.vector(wp["position"], _join(wkey, "position"), 3, "x, y, z in m")
            rpy = c.vector(wp.get("rpy", (0.0, 0.0, 0.0)), _join(wkey, "rpy"), 3, "roll, pitch, yaw in rad")
            p = tuple(a + b for a, b in zip(p, shift))
            try:
                model.configuration_from_pose(_vec(p), _quaternion(rpy))
            except ValueError as e:
                c.fail(wkey, f"pose not on the {base} group: {e}")
            base_wps.append(Waypoint(t, position=p, rpy=rpy))
        _check_times(c, base_wps, bkey)
    joint_names: Tuple[str, ...] = ()
    joint_wps: List[Waypoint] = []
    if ref.get("joint_names") is not None:
        nkey = _join(refkey, "joint_names")
        joint_names = c.names(ref["joint_names"], nkey)
        unknown = [n for n in joint_names if n not in joints]
        if unknown:
            c.fail(nkey, f"unknown joint(s) {', '.join(unknown)}; the model has {', '.join(joints) or 'none'}")
        if len(set(joint_names)) != len(joint_names):
            c.fail(nkey, "a joint is named twice")
        if ref.get("joints") is None:
            c.fail(_join(refkey, "joints"), "missing (joint_names without joint waypoints)")
    if ref.get("joints") is not None:
        jkey = _join(refkey, "joints")
        if not joints:
            c.fail(jkey, "the robot has no movable joints")
        joint_names = joint_names or joints
        for i, wp in enumerate(_waypoint_list(c, ref["joints"], jkey)):
            wkey = f"{jkey}[{i}]"
            wp = c.mapping(wp, wkey, _JOINT_WAYPOINT_KEYS)
            for need in _JOINT_WAYPOINT_KEYS:
                if need not in wp:
                    c.fail(_join(wkey, need), "missing")
            t = c.number(wp["time"], _join(wkey, "time"), 0.0)
            q = c.vector(wp["positions"], _join(wkey, "positions"), len(joint_names),
                         "one per joint: " + ", ".join(joint_names))
            joint_wps.append(Waypoint(t, positions=q))
        _check_times(c, joint_wps, jkey)
    if (base_wps or joint_wps) and ctl_params is None:
        c.fail(refkey, "a reference needs a controller (controller: false)")

    return Robot(namespace=namespace, model_file=str(dyn.get("model_file", "")), base_group=base,
                 joint_names=joints, nv=model.nv, dynamics=dyn, controller=ctl_params, remappings=remappings,
                 estimator=estimator,
                 base_reference=tuple(base_wps), joint_reference_names=joint_names if joint_wps else (),
                 joint_reference=tuple(joint_wps))


def _physics_rate(dyn: Mapping, g: Mapping) -> float:
    rate = g.get("physics_rate") or dyn.get("physics_rate") or parameter_table("dynamics")["physics_rate"].default
    return float(rate)


def _sensors(c: _Checker, doc: Mapping, key: str, dyn: dict, model, g: Mapping) -> None:
    """The robot's ``sensors`` key: a sensors file (docs/sensors.md) for the dynamics node's ``sensors``
    parameter (or ``none``); loaded here so that a bad file is refused before any node starts."""
    skey = _join(key, "sensors")
    if doc.get("sensors") is None:
        return
    if "sensors" in dyn:
        c.fail(skey, f"given twice: here and in {_join(key, 'dynamics')} (or the params file)")
    text = c.text(doc["sensors"], skey)
    if text.lower() == "none":
        dyn["sensors"] = "none"
        return
    found = resolve_path(text, beside=c.path)
    if found is None:
        c.fail(skey, f"sensors file {shown(text)} not found (looked in the package, beside the scenario and in the "
                     "current directory)")
    from mbs_ros.sensors.spec import SensorConfigError, load_sensors

    try:
        load_sensors(str(found), model, 1.0 / _physics_rate(dyn, g))
    except SensorConfigError as e:
        c.fail(skey, str(e))
    dyn["sensors"] = str(found)


def _estimator(c: _Checker, doc: Mapping, key: str, dyn: Mapping, model, g: Mapping, source) -> Optional[dict]:
    """The robot's ``estimator`` mapping: estimator_node parameters (its sensor roles, prior sigmas,
    initial_error, publish_rate); the model, the sensors file, the prior mean (the robot's initial state) and the
    rates come from the scenario. Checked as the node checks them (names of the sensors file, mounts)."""
    ekey = _join(key, "estimator")
    if doc.get("estimator") is None:
        return None
    est = c.mapping(doc["estimator"], ekey, ())
    declared = declared_parameters("estimator")
    for k in est:
        if k in _ESTIMATOR_MANAGED:
            c.fail(_join(ekey, k), "set by the scenario (model, sensors, initial, physics_rate, control_rate, "
                                   "sim_time, lockstep)")
        if k not in declared:
            c.fail(_join(ekey, k), _unknown_parameter(k, "estimator", declared))
    if dyn.get("sensors") == "none":
        c.fail(ekey, "the robot's sensors are off (sensors: none): nothing to estimate from")
    est = dict(est)
    est["model_file"] = dyn.get("model_file", "")
    if dyn.get("robot_description"):
        est["robot_description"] = dyn["robot_description"]
    est["base_group"] = dyn["base_group"]
    if dyn.get("gravity") is not None:
        est["gravity"] = dyn["gravity"]
    if dyn.get("sensors"):
        est["sensors"] = dyn["sensors"]
    est["physics_rate"] = _physics_rate(dyn, g)
    if g.get("control_rate"):
        est["control_rate"] = g["control_rate"]
    for k in ("initial_position", "initial_rpy", "initial_joint_positions"):
        if k in dyn:
            est[k] = tuple(float(x) for x in dyn[k])
    if dyn.get("initial_twist") is not None:  # body-frame [v; w] -> the base origin's world velocity
        R = _rotation(dyn.get("initial_rpy", (0.0, 0.0, 0.0)))
        est["initial_velocity"] = tuple(float(x) for x in R @ _vec(dyn["initial_twist"][:3]))
    from mbs_ros.nodes.estimator_settings import ParameterError, build_setup, settings_from_values

    from mbs_ros.dynamics import model_source as ms

    values = {n: p.default for n, p in parameter_table("estimator").items()}
    values.update({k: v for k, v in ms.model_defaults(source).items() if k in values})
    values.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in est.items()})
    try:
        build_setup(settings_from_values(values, source), source)
    except ParameterError as e:
        text = str(e)
        name = text.split(":", 1)[0].split(" ", 1)[0]
        c.fail(_join(ekey, name) if name in est and name in declared else ekey, text)
    return est


def _rotation(rpy):
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", [float(v) for v in rpy]).as_matrix()


def _waypoint_list(c: _Checker, value, key: str) -> list:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
        c.fail(key, f"must be a non-empty list of waypoints, got {_show(value)}")
    return list(value)


def _check_times(c: _Checker, wps: Sequence[Waypoint], key: str) -> None:
    for i in range(1, len(wps)):
        if wps[i].time <= wps[i - 1].time:
            c.fail(f"{key}[{i}].time", f"waypoint times must increase strictly ({wps[i - 1].time:g} then "
                                       f"{wps[i].time:g})")


def _vec(x):
    import numpy as np

    return np.asarray([float(v) for v in x], dtype=float)


def _quaternion(rpy) -> "object":
    """[x, y, z, w] of roll, pitch, yaw (R = Rz(yaw) Ry(pitch) Rx(roll), as URDF and the nodes)."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", [float(v) for v in rpy]).as_quat()


# ------------------------------------------------------------------------------------- node specs


def _ros_value(v):
    """A parameter value as launch_ros and rcl's YAML parser take it: floats for numbers, tuples -> lists."""
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if hasattr(v, "tolist"):
        return _ros_value(v.tolist())
    if isinstance(v, (list, tuple)):
        items = [_ros_value(x) for x in v]
        return items
    return v


def _clean(params: Mapping[str, object]) -> Dict[str, object]:
    """Drop empty lists (rcl's parameter-file parser rejects them; every node defaults them to empty)."""
    out = {}
    for k, v in params.items():
        v = _ros_value(v)
        if isinstance(v, list) and not v:
            continue
        out[k] = v
    return out


def node_specs(scenario: Scenario, *, reference_subscribers: int = 1) -> List[NodeSpec]:
    """The nodes of a scenario, in start order: per robot ``dynamics_node``, ``controller_node`` (unless
    ``controller: false``), ``estimator_node`` (robots with an ``estimator``), ``reference_node`` (robots with a
    reference).

    Global settings: ``physics_rate``/``publish_rate`` -> dynamics_node; ``control_rate`` -> controller_node
    (and dynamics_node with lockstep); ``sim_time`` -> dynamics_node ``publish_clock`` and ``use_sim_time`` on
    every node; ``real_time_factor`` -> dynamics_node; ``lockstep`` -> dynamics_node, controller_node and
    estimator_node (whose physics_rate, control_rate, sensors and prior the robot's keys give).
    ``reference_subscribers``: how many subscriptions each reference topic must have before the reference node
    publishes (the controller; 2 when a recorder records it too)."""
    s = scenario
    specs: List[NodeSpec] = []
    for r in s.robots:
        dyn = dict(r.dynamics)
        if s.physics_rate is not None:
            dyn["physics_rate"] = s.physics_rate
        if s.publish_rate is not None:
            dyn["publish_rate"] = s.publish_rate
        if s.real_time_factor is not None:
            dyn["real_time_factor"] = s.real_time_factor
        if s.lockstep:
            dyn["lockstep"] = True
            if s.control_rate is not None:
                dyn["control_rate"] = s.control_rate
        if s.sim_time:
            dyn["publish_clock"] = True
            dyn["use_sim_time"] = True
        specs.append(_spec("dynamics", r, dyn))
        if r.controller is not None:
            ctl = dict(r.controller)
            if s.control_rate is not None:
                ctl["control_rate"] = s.control_rate
            if s.lockstep:
                ctl["lockstep"] = True
            if s.sim_time:
                ctl["use_sim_time"] = True
            specs.append(_spec("controller", r, ctl))
        if r.estimator is not None:
            est = dict(r.estimator)
            if s.lockstep:
                est["lockstep"] = True
            if s.sim_time:
                est["use_sim_time"] = True
            specs.append(_spec("estimator", r, est))
        if r.has_reference:
            ref: Dict[str, object] = {"min_subscribers": float(reference_subscribers)}
            if r.base_reference:
                ref["base_times"] = [w.time for w in r.base_reference]
                ref["base_positions"] = [x for w in r.base_reference for x in w.position]
                ref["base_rpy"] = [x for w in r.base_reference for x in w.rpy]
            if r.joint_reference:
                ref["joint_names"] = list(r.joint_reference_names)
                ref["joint_times"] = [w.time for w in r.joint_reference]
                ref["joint_positions"] = [x for w in r.joint_reference for x in w.positions]
            if s.sim_time:
                ref["use_sim_time"] = True
            specs.append(_spec("reference", r, ref))
    return specs


def _spec(role: str, robot: Robot, params: Mapping[str, object]) -> NodeSpec:
    executable, module, name = NODES[role]
    return NodeSpec(role=role, robot=robot.name, package=PACKAGE, executable=executable, module=module, name=name,
                    namespace=robot.namespace, parameters=_clean(params), remappings=robot.remappings)


def record_topics(scenario: Scenario, topics: Union[str, Sequence[str], None] = None) -> Optional[List[str]]:
    """Absolute topic names to record: ``topics`` (default: the scenario's ``record``, else
    :data:`DEFAULT_RECORD`), relative names expanded in every robot's namespace, plus ``/clock`` with sim time.
    None means every topic (``record: all``)."""
    chosen = scenario.record if topics is None else topics
    if chosen == "all":
        return None
    chosen = DEFAULT_RECORD if chosen is None else tuple(chosen)
    out: List[str] = []
    for t in chosen:
        names = [t] if t.startswith("/") else [f"{r.namespace}/{t}" for r in scenario.robots]
        out += [n for n in names if n not in out]
    if scenario.sim_time and "/clock" not in out:
        out.append("/clock")
    return out
