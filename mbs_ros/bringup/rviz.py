"""RViz2 configurations for a scenario: the ``config/rviz/*.rviz`` templates, with one display group per robot.

A template is an ordinary RViz2 configuration (YAML) with the fixed frame ``world``, a TF display, and per robot
namespace an ``rviz_common/Group`` display named after the namespace, holding a RobotModel
(``/<ns>/robot_description``), an Odometry display (``/<ns>/odom``, the path of the last poses) and a MarkerArray
(``/<ns>/markers``). :func:`render` keeps everything but the groups, and writes one copy of the first group per
robot of the scenario, with its namespace substituted: so ``fleet.launch.py count:=5`` shows five robots.

The RobotModel's TF Prefix is empty on purpose: ``dynamics_node`` publishes the URDF with every link already
renamed to the TF frame it broadcasts (``uvms/link1``), so a prefix here would be applied twice.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Iterable, List, Union

import yaml

__all__ = ["GROUP_CLASS", "robot_groups", "render", "write_config", "template_path"]

GROUP_CLASS = "rviz_common/Group"


def template_path(kind: str) -> Path:
    """``config/rviz/<kind>.rviz`` of the package (source tree or share directory)."""
    from mbs_ros.scenario.schema import resolve_path

    found = resolve_path(f"config/rviz/{kind}.rviz")
    if found is None:
        raise FileNotFoundError(f"config/rviz/{kind}.rviz not found in the mbs_ros package")
    return found


def robot_groups(config: dict) -> List[dict]:
    """The per-robot display groups of a configuration."""
    displays = config.get("Visualization Manager", {}).get("Displays", []) or []
    return [d for d in displays if d.get("Class") == GROUP_CLASS]


def _substitute(node, old: str, new: str):
    if isinstance(node, dict):
        return {k: _substitute(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, old, new) for v in node]
    if isinstance(node, str):
        if node == old:
            return new
        return node.replace(f"/{old}/", f"/{new}/")
    return node


def render(template: Union[str, os.PathLike], namespaces: Iterable[str]) -> str:
    """The template's text with one robot group per namespace (``/uvms2`` or ``uvms2``)."""
    config = yaml.safe_load(Path(template).read_text())
    groups = robot_groups(config)
    if not groups:
        raise ValueError(f"{template}: no {GROUP_CLASS} display to copy per robot")
    proto = groups[0]
    old = proto["Name"]
    manager = config["Visualization Manager"]
    displays = [d for d in manager["Displays"] if d.get("Class") != GROUP_CLASS]
    for ns in namespaces:
        ns = ns.strip("/")
        displays.append(_substitute(copy.deepcopy(proto), old, ns))
    manager["Displays"] = displays
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False, width=120)


def write_config(template: Union[str, os.PathLike], namespaces: Iterable[str], directory=None) -> Path:
    """:func:`render` into a new file (in ``directory``, default a temporary one); its path."""
    text = render(template, namespaces)
    fd, path = tempfile.mkstemp(prefix="mbs_ros_", suffix=".rviz", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(path)
