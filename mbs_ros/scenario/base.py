"""The scenario schema's common part: its error, data (:class:`Scenario`, :class:`Robot`, :class:`NodeSpec`),
keys, the file reader (:class:`mbs_ros.yamlschema.Reader` raising :class:`ScenarioError`) and where files are
found. Part of :mod:`mbs_ros.scenario.schema` (import from there); ROS-free."""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import yaml

from mbs_ros.cores.parameters import names as parameter_names
from mbs_ros.cores.parameters import table as parameter_table
from mbs_ros.packages import package_root
from mbs_ros.yamlfile import shown
from mbs_ros.yamlschema import Reader, SchemaError


PACKAGE = "mbs_ros"
BASE_GROUPS = ("fixed", "se3", "schoenflies", "se2", "so3", "so3xr3")

# What --record takes when the scenario has no ``record`` key: every robot's state, references, commands and
# applied efforts, its URDF (robot_description: the animation's shapes), plus TF, the energy bookkeeping (the
# energy ports too), and /clock with sim time.
DEFAULT_RECORD = ("odom", "joint_states", "joint_reference", "base_reference", "cmd_wrench", "joint_command",
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
_REFERENCE_KEYS = ("base", "joints", "joint_names")
_BASE_WAYPOINT_KEYS = ("time", "position", "rpy")
_JOINT_WAYPOINT_KEYS = ("time", "positions")


def managed(role: str) -> Dict[str, str]:
    """Node ``role``'s parameters the scenario sets itself -> the scenario key that sets them (their table's
    ``scenario``: :mod:`mbs_ros.cores.parameters`), and rclpy's ``use_sim_time`` (``sim_time``): not allowed in
    the robot's free-form mapping of that node."""
    out = {n: p.scenario for n, p in parameter_table(role).items() if p.scenario}
    out["use_sim_time"] = "sim_time"
    return out


#: ``initial`` keys -> dynamics_node parameters (the table's ``scenario: initial.KEY``)
_INITIAL_KEYS = {p.scenario.split(".", 1)[1]: n for n, p in parameter_table("dynamics").items()
                 if (p.scenario or "").startswith("initial.")}


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
    # environment variables the node is started with (a launcher adds those the user has not set:
    # mbs_ros.dds.node_environment), e.g. mbs_ros.dds.REALTIME_ENVIRONMENT for a dynamics node with thread_priority
    environment: Tuple[Tuple[str, str], ...] = ()

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
    try:
        p = Path(os.path.expanduser(text))
        if p.is_file():
            return p.resolve()
        candidates = [f"config/scenarios/{text}", f"config/scenarios/{text}.yaml"]
        for c in candidates:
            found = resolve_path(c)
            if found is not None:
                return found
    except (OSError, ValueError):  # a name too long for a path, a NUL byte: no such file
        pass
    names = [p.stem for p in list_scenarios()]
    close = difflib.get_close_matches(Path(text).stem, names, n=1) if len(text) <= 256 else []
    hint = f": did you mean {close[0]!r}?" if close else ""
    raise FileNotFoundError(f"scenario {shown(text)} not found{hint} (a file, or one of: "
                            f"{', '.join(names) or 'none found'})")


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


def declared_parameters(role: str) -> Tuple[str, ...]:
    """The parameters node ``role`` (dynamics, controller, reference) takes: its table in
    :mod:`mbs_ros.cores.parameters` (ROS-free), plus ``use_sim_time``, which every rclpy node has."""
    return parameter_names(role)
