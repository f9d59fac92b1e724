"""Foxglove/Lichtblick layouts for the scenarios: ``config/foxglove/<scenario>.json``.

``python -m mbs_ros.bringup.foxglove_layout SCENARIO ... [-o DIR]`` writes them (``--all``: every scenario in
``config/scenarios``; ``--check``: exit 1 if a shipped file differs from what its scenario gives now). In Foxglove
or Lichtblick: Layouts menu → "Import from file…" (Lichtblick: the "Import layout" button of the Layouts sidebar),
then connect to the bridge (``python -m mbs_ros.bringup SCENARIO --foxglove``) or open a recording.

The file is the layout JSON both apps export and import (``configById`` of the panels by ``<PanelType>!<id>``,
``layout`` the mosaic tree of panel ids, ``globalVariables``, ``userNodes``, ``playbackConfig``):

- ``3D!scene``: display frame ``world`` (camera not following), a grid on it, TF, each robot's URDF from its
  ``<ns>/robot_description`` topic (a custom URDF layer, source "topic"; frame prefix empty: the published URDF
  already names the links ``<ns>/<link>``, as on /tf) and its ``<ns>/markers``;
- ``Plot!state``: the first robot's base position (``odom``) and joint positions (``joint_states``, one series per
  joint, labelled with its name), against the header stamps;
- ``Plot!ports``: the first robot's port powers (``energy.port_power[i]``, labelled with the port names the
  dynamics node gives that model: ``effort/<joint>``, ``wrench``, ``thruster/<name>``, ``current``);
- ``RawMessages!energy``: the first robot's ``energy`` message (storages, ports, dissipators by name; balance);
- with sensors (the dynamics node's ``sensors``, docs/dynamics_node.md): the DVLs' beams in the 3D panel and
  ``Plot!sensors``: the first robot's depth (pressure sensors), IMU specific force z, DVL velocity and foot
  contact forces z.
- with a contact world (the dynamics node's ``world``, docs/contact.md): each robot's ``contacts/markers`` and
  ``world/markers`` in the 3D panel and ``Plot!contacts``: the first robot's contact forces along z
  (``contacts/<link>``, its feet's where links are named ``*foot*``, else every link with a collision shape).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

__all__ = ["layout", "layout_text", "port_names", "sensor_specs", "sensor_topics", "contact_links", "contact_topics",
           "layout_path", "main"]

_GRID = {"layerId": "foxglove.Grid", "instanceId": "grid", "label": "Grid (world)", "visible": True,
         "frameLocked": True, "frameId": "world", "size": 20, "divisions": 20, "lineWidth": 1,
         "color": "#9e9e9e80", "position": [0, 0, 0], "rotation": [0, 0, 0], "order": 1}
_CAMERA = {"perspective": True, "distance": 6.0, "phi": 60.0, "thetaOffset": 45.0, "target": [0, 0, 0],
           "targetOffset": [0, 0, 0], "targetOrientation": [0, 0, 0, 1], "fovy": 45.0, "near": 0.01, "far": 5000.0}
_PLOT = {"showXAxisLabels": True, "showYAxisLabels": True, "showLegend": True, "legendDisplay": "floating",
         "showPlotValuesInLegend": False, "isSynced": True, "xAxisVal": "timestamp", "sidebarDimension": 240}


def layout_path(scenario_name: str, root: Optional[Path] = None) -> Path:
    """Where the scenario's layout is shipped: ``config/foxglove/<name>.json``."""
    from mbs_ros.scenario.schema import package_root

    return (root or package_root() or Path.cwd()) / "config" / "foxglove" / f"{scenario_name}.json"


def _settings(robot):
    """``(settings, source)`` of the robot's dynamics node: its parameters from the scenario, every other one the
    table's default or the robot's own (:func:`mbs_ros.cores.params.model_parameter_values`, as the node and the
    headless run take them), checked as the node checks them."""
    from mbs_ros.cores.dynamics_settings import settings_from_values
    from mbs_ros.cores.parameters.dynamics import PARAMETERS
    from mbs_ros.cores.params import model_parameter_values

    dyn = robot.dynamics
    values, source = model_parameter_values(PARAMETERS, lambda name: PARAMETERS[name].default,
                                            lambda param, default: dyn.get(param.name, default))
    return settings_from_values(values, source), source


def _model(robot, settings=None, source=None):
    """The model the dynamics node builds for a scenario robot."""
    from mbs_ros.cores.dynamics_settings import build_model

    if settings is None:
        settings, source = _settings(robot)
    return build_model(settings, source)


def sensor_specs(robot, physics_rate: Optional[float] = None) -> tuple:
    """The robot's sensors as its dynamics node loads them (its ``sensors`` parameter; empty: the robot YAML's) at
    ``physics_rate`` (the scenario's; else the robot's dynamics parameter, else the node's default)."""
    from mbs_ros.nodes import conversions as cv
    from mbs_ros.nodes.dynamics_sensors import sensors_path

    settings, source = _settings(robot)
    path = sensors_path(settings.sensors, source)
    if path is None:  # no model to build
        return ()
    from mbs_ros.sensors.spec import load_sensors

    dt = cv.period_ns(float(physics_rate or settings.physics_rate)) * 1e-9
    return load_sensors(path, _model(robot, settings, source), dt).sensors


def sensor_topics(robot, physics_rate: Optional[float] = None) -> List[str]:
    """Absolute names of every topic the robot's dynamics node publishes for its sensors (a pressure sensor's
    depth, a DVL's beams and a foot contact sensor's state included): what the bridge serves besides the state."""
    out = []
    for s in sensor_specs(robot, physics_rate):
        topic = f"{robot.namespace}/{s.topic}"
        out += [topic] + {"pressure": [topic + "/depth"], "dvl": [topic + "/beams"],
                          "foot_contact": [topic + "/contact"]}.get(s.type, [])
    return out


def port_names(robot) -> List[str]:
    """The names of the robot's energy ports, in the order the dynamics node publishes them (``energy``'s
    ``port_names``): :meth:`Model.energy_ports` of the model the node builds, at rest."""
    import numpy as np

    model = _model(robot)
    nj = len(model.joint_names)
    nt = len(model.passive.thruster_names) if model.passive is not None else 0
    report = model.energy_ports(model.neutral(), np.zeros(model.nv), efforts=np.zeros(nj) if nj else None,
                                wrench=np.zeros(6) if model.group is not None else None,
                                thrust=np.zeros(nt) if nt else None)
    return list(report["ports"])


def contact_links(robot) -> List[str]:
    """The robot links with a collision shape in the robot's contact world (its ``contacts/<link>`` topics), in
    the world's order; empty without a world that has shapes."""
    from mbs_ros.cores.dynamics import make_world
    from mbs_ros.cores.dynamics_settings import initial_state

    settings, source = _settings(robot)
    if not source.multibody:
        return []
    model = _model(robot, settings, source)
    world, _objects = make_world(settings, source, model, initial_state(model, settings)[0])
    links = []
    for s in (world.shapes if world is not None else ()):
        if s.body is not None and s.body[0] == 0 and (s.link or s.name) not in links:
            links.append(s.link or s.name)
    return links


def contact_topics(robot) -> List[str]:
    """Absolute names of the robot's contact topics (docs/contact.md, On ROS) where it has a contact world:
    ``contacts/<link>`` of each link with a collision shape, ``contacts/markers``, ``world/markers``."""
    from mbs_ros.cores.dynamics_settings import topic_token
    from mbs_ros.dynamics.model.source import ParameterError

    if not robot.dynamics.get("world"):
        return []
    try:
        links = contact_links(robot)
    except ParameterError:
        return []
    ns = robot.namespace
    return ([f"{ns}/contacts/markers", f"{ns}/world/markers"] + [f"{ns}/contacts/{topic_token(n)}" for n in links]
            if links else [])


def _path(value: str, label: str) -> Dict[str, object]:
    return {"value": value, "enabled": True, "timestampMethod": "headerStamp", "label": label}


def layout(scenario) -> Dict[str, object]:
    """The layout of a scenario (see the module docstring), as a JSON-able dict."""
    robots = scenario.robots
    first = robots[0]
    ns = first.namespace
    layers = {"grid": dict(_GRID)}
    topics = {}
    for i, r in enumerate(robots):
        layers[f"urdf{r.namespace.replace('/', '_')}"] = {
            "layerId": "foxglove.Urdf", "instanceId": f"urdf{r.namespace.replace('/', '_')}",
            "label": f"{r.name} (robot_description)", "visible": True, "frameLocked": True, "sourceType": "topic",
            "topic": f"{r.namespace}/robot_description", "url": "", "filePath": "", "parameter": "",
            "framePrefix": "", "displayMode": "auto", "fallbackColor": "#b0b4ba", "order": 2 + i}
        topics[f"{r.namespace}/markers"] = {"visible": True}
    three_d = {"cameraState": dict(_CAMERA), "followMode": "follow-none", "followTf": "world",
               "scene": {"transforms": {"showLabel": False}}, "transforms": {}, "topics": topics, "layers": layers,
               "publish": {"type": "point", "poseTopic": "/move_base_simple/goal", "pointTopic": "/clicked_point",
                           "poseEstimateTopic": "/initialpose", "poseEstimateXDeviation": 0.5,
                           "poseEstimateYDeviation": 0.5, "poseEstimateThetaDeviation": 0.26179939},
               "imageMode": {}, "foxglovePanelTitle": f"{scenario.name}: TF, URDF, markers"}
    state = []
    if first.floating:
        axes = ("x", "y") if first.base_group == "se2" else ("x", "y", "z")
        state += [_path(f"{ns}/odom.pose.pose.position.{a}", f"base {a} [m]") for a in axes]
    state += [_path(f"{ns}/joint_states.position[{i}]", name) for i, name in enumerate(first.joint_names)]
    ports = [_path(f"{ns}/energy.port_power[{i}]", name) for i, name in enumerate(port_names(first))]
    config_by_id = {
        "3D!scene": three_d,
        "Plot!state": {"paths": state, **_PLOT, "foxglovePanelTitle": f"{first.name}: base position, joint positions"},
        "Plot!ports": {"paths": ports, **_PLOT, "foxglovePanelTitle": f"{first.name}: port power into the system [W]"},
        "RawMessages!energy": {"topicPath": f"{ns}/energy", "diffEnabled": False, "diffMethod": "custom",
                               "diffTopicPath": "", "showFullMessageForDiff": False,
                               "foxglovePanelTitle": f"{first.name}: energy ports"},
    }
    right = {"direction": "column", "first": "Plot!ports", "second": "RawMessages!energy", "splitPercentage": 50}
    sensors = _sensor_paths(first, topics, scenario.physics_rate)
    contacts = _contact_paths(scenario, topics)
    if contacts:
        config_by_id["Plot!contacts"] = {"paths": contacts, **_PLOT,
                                         "foxglovePanelTitle": f"{first.name}: contact forces z [N]"}
        right = {"direction": "column", "first": "Plot!contacts", "second": right, "splitPercentage": 34}
    if sensors:
        config_by_id["Plot!sensors"] = {"paths": sensors, **_PLOT,
                                        "foxglovePanelTitle": f"{first.name}: sensors (depth, IMU, DVL)"}
        right = {"direction": "column", "first": "Plot!sensors", "second": right, "splitPercentage": 34}
    mosaic = {"direction": "row", "first": "3D!scene", "splitPercentage": 55,
              "second": {"direction": "column", "first": "Plot!state", "splitPercentage": 34, "second": right}}
    return {"configById": config_by_id, "globalVariables": {}, "userNodes": {}, "playbackConfig": {"speed": 1.0},
            "layout": mosaic}


def _contact_paths(scenario, topics: Dict[str, object]) -> List[Dict[str, object]]:
    """Plot series of the first robot's contact forces (module docstring); every robot with a contact world
    has its contact and world markers join the 3D panel's ``topics``."""
    from mbs_ros.dynamics.model.source import ParameterError
    from mbs_ros.cores.dynamics_settings import topic_token

    out = []
    for i, r in enumerate(scenario.robots):
        if not r.dynamics.get("world"):
            continue
        try:
            links = contact_links(r)
        except ParameterError:
            continue
        if not links:
            continue
        topics[f"{r.namespace}/contacts/markers"] = {"visible": True}
        topics[f"{r.namespace}/world/markers"] = {"visible": True}
        if i == 0:
            feet = [n for n in links if "foot" in n.lower()] or links
            out = [_path(f"{r.namespace}/contacts/{topic_token(n)}.wrench.force.z", n) for n in feet]
    return out


def _sensor_paths(robot, topics: Dict[str, object], physics_rate: Optional[float]) -> List[Dict[str, object]]:
    """Plot series of the robot's sensors (depth, IMU specific force z, DVL velocity, foot contact force z); its
    DVLs' beam topics join the 3D panel's ``topics``."""
    ns, out = robot.namespace, []
    for s in sensor_specs(robot, physics_rate):
        topic = f"{ns}/{s.topic}"
        if s.type == "pressure":
            out.append(_path(f"{topic}/depth.point.z", f"{s.name}: depth [m]"))
        elif s.type == "imu":
            out.append(_path(f"{topic}.linear_acceleration.z", f"{s.name}: specific force z [m/s²]"))
        elif s.type == "dvl":
            out += [_path(f"{topic}.twist.twist.linear.{a}", f"{s.name}: v{a} [m/s]") for a in ("x", "y", "z")]
            topics[f"{topic}/beams"] = {"visible": True}
        elif s.type == "foot_contact":
            out.append(_path(f"{topic}.wrench.force.z", f"{s.name}: force z, its frame [N]"))
    return out


def layout_text(scenario) -> str:
    return json.dumps(layout(scenario), indent=2) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    from mbs_ros.scenario.schema import ScenarioError, list_scenarios, load_scenario

    p = argparse.ArgumentParser(prog="python -m mbs_ros.bringup.foxglove_layout",
                                description="Write Foxglove/Lichtblick layouts for scenarios (config/foxglove/).")
    p.add_argument("scenarios", nargs="*", help="scenario files or names (config/scenarios)")
    p.add_argument("--all", action="store_true", help="every scenario in config/scenarios")
    p.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                   help="directory to write <scenario>.json into (default config/foxglove)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if a layout file there differs from what its scenario gives")
    args = p.parse_args(argv)
    names = list(args.scenarios) + ([str(s) for s in list_scenarios()] if args.all else [])
    if not names:
        p.error("give scenarios or --all")
    stale = 0
    for name in names:
        try:
            scenario = load_scenario(name)
        except ScenarioError as e:
            print(f"foxglove_layout: scenario error: {e}", file=sys.stderr)
            return 2
        target = (args.out / f"{scenario.name}.json") if args.out is not None else layout_path(scenario.name)
        text = layout_text(scenario)
        if args.check:
            current = target.read_text(encoding="utf-8") if target.is_file() else None
            if current != text:
                stale += 1
                print(f"{target}: {'missing' if current is None else 'differs from'} the layout of {name}; "
                      f"regenerate: python -m mbs_ros.bringup.foxglove_layout {scenario.name}", file=sys.stderr)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
