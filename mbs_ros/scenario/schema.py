"""Scenario YAML -> node specs: the one piece of code the launch files and the no-launch runner share.

:func:`load_scenario` reads and checks a ``config/scenarios/*.yaml`` file (every error a :class:`ScenarioError`
naming the file and the key); :func:`node_specs` turns it into :class:`NodeSpec` s that ``launch_ros`` and
:mod:`mbs_ros.process` start. It imports neither launch, rclpy nor a node module (the nodes' parameter names
come from :mod:`mbs_ros.cores.parameters`), so a scenario is checked without ROS. The schema: docs/bringup.md.

The schema is written in parts: :mod:`mbs_ros.scenario.base` (the error, the data, the keys, the reader,
the paths), :mod:`mbs_ros.scenario.robot` (one robot's keys against its model) and
:mod:`mbs_ros.scenario.overrides` (overrides, paths into a document); import every name from here.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Sequence, Union

from mbs_ros.dds import REALTIME_ENVIRONMENT
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores import params as prm
from mbs_ros.cores.parameters import kind
from mbs_ros.cores.parameters import table as parameter_table
from mbs_ros.cores.parameters.controller import LAWS
from mbs_ros.cores.paramsfile import YamlFileError, read_yaml
from mbs_ros.scenario.base import (  # noqa: F401 - the public names, importable from here
    BASE_GROUPS, DEFAULT_RECORD, NODES, PACKAGE, NodeSpec, Robot, Scenario, ScenarioError, Waypoint, _Checker,
    _GLOBAL_KEYS, _show, declared_parameters, list_scenarios, package_root, resolve_path, scenario_path)
from mbs_ros.scenario.overrides import apply_overrides, document_value, parse_path  # noqa: F401
from mbs_ros.scenario.robot import _robots

__all__ = ["ScenarioError", "Scenario", "Robot", "Waypoint", "NodeSpec", "load_scenario", "node_specs",
           "scenario_path", "list_scenarios", "package_root", "resolve_path", "record_topics",
           "DEFAULT_RECORD", "PACKAGE", "LAWS", "declared_parameters", "apply_overrides", "parse_path",
           "document_value"]


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

    dynamics = parameter_table("dynamics")

    def table_number(key):  # a global that is a dynamics_node parameter: its table's bounds
        return None if doc.get(key) is None else c.number(doc[key], key, *prm.bounds(dynamics[key]))

    g = dict(
        **{k: table_number(k) for k in _GLOBAL_KEYS if k in dynamics and kind(dynamics[k]) == "double"},
        duration=opt_number("duration", 0.0, True),
        sim_time=c.boolean(doc.get("sim_time", False), "sim_time"),
        lockstep=c.boolean(doc.get("lockstep", False), "lockstep"),
    )
    for name in g:  # the table's cross-field rules among the globals (publish_rate <= physics_rate), and the
        try:        # control rate's, which reaches the dynamics node in lockstep and the controller always
            prm.cross_check(g.get, dynamics, names=(name,))
            if name == "control_rate":
                prm.cross_check(g.get, {name: replace(dynamics[name], at_most="physics_rate")})
        except ParameterError as e:
            c.fail(name, str(e))
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
    # real-time scheduling: the publications sent by the middleware's thread, not in the callbacks (mbs_ros.dds)
    realtime = role == "dynamics" and float(params.get("thread_priority", 0.0) or 0.0) > 0.0
    return NodeSpec(role=role, robot=robot.name, package=PACKAGE, executable=executable, module=module, name=name,
                    namespace=robot.namespace, parameters=_clean(params), remappings=robot.remappings,
                    environment=REALTIME_ENVIRONMENT if realtime else ())


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
