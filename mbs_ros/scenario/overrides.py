"""Scenario overrides and paths into a scenario document (``robots[0].controller.kp``): part of
:mod:`mbs_ros.scenario.schema` (import from there); ROS-free."""

from __future__ import annotations

import copy
import difflib
import os
import re
from pathlib import Path
from typing import List, Mapping, Optional, Sequence, Tuple, Union

from mbs_ros.cores.parameters import table as parameter_table
from mbs_ros.cores.paramsfile import YamlFileError, read_yaml
from mbs_ros.yamlfile import is_name, shown
from mbs_ros.scenario.base import (_BASE_WAYPOINT_KEYS, _GLOBAL_KEYS, _INITIAL_KEYS, _JOINT_WAYPOINT_KEYS,
                                           _REFERENCE_KEYS, _ROBOT_KEYS, ScenarioError, _show, declared_parameters,
                                           managed, scenario_path)


def parse_set(item: str) -> Tuple[str, object]:
    """A ``--set KEY=VALUE`` item (headless and bringup) as ``(key, value)``, the value read as YAML within the
    bounds of every YAML file of the package (:mod:`mbs_ros.yamlfile`: nesting at most MAX_DEPTH levels, numbers
    Python can hold, no control characters); ValueError of one line naming the key otherwise (a value nested 900
    deep was a RecursionError)."""
    from mbs_ros.yamlfile import compose_all, construct

    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set {shown(item)}: expected KEY=VALUE")
    key = key.strip()
    where = f"--set {key if is_name(key) or _PATH_PART.match(key.split('.')[-1]) else shown(key)}"
    try:
        nodes = compose_all(where, text)
        if len(nodes) > 1:
            raise ValueError(f"{where}: one YAML value, got {len(nodes)} documents")
        return key, (construct(where, nodes[0]) if nodes else None)
    except YamlFileError as e:
        raise ValueError(f"{where}: the value is not YAML that can be read: {e.reason}") from None


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
        ("robots", "[]", "controller"): _settable("controller"),
        ("robots", "[]", "dynamics"): _settable("dynamics"),
        ("robots", "[]", "estimator"): _settable("estimator"),
    }
    if shape in known:
        return known[shape]
    if shape in (("robots", "[]", "locked_joints"), ("robots", "[]", "remappings"), ("robots", "[]", "offset")):
        return None
    return ()


def _settable(role: str) -> Tuple[str, ...]:
    """The parameters of node ``role`` a robot's free-form mapping may set: all but those the scenario sets."""
    taken = managed(role)
    return tuple(n for n in declared_parameters(role) if n not in taken)


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
