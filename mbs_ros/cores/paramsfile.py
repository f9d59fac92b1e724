"""ROS parameter files (``--params-file``) and scenarios read with one-line errors.

Reading, decoding, size and YAML errors are :mod:`mbs_ros.yamlfile`'s (a :class:`YamlFileError` whose text is one line,
``FILE:LINE:COLUMN: reason``); here, for parameter files, the structure rcl reads: a mapping of node names
(nested namespaces allowed) to ``ros__parameters`` mappings whose values are scalars or non-empty lists of scalars
of one type. Keys are node and parameter names (:func:`mbs_ros.yamlfile.is_name`); an error quotes a key only
once it is one, never a value, so a foreign file (``--params-file /etc/shadow``) is refused by its place alone.

A byte-order mark at the start is fine: the file is read as bytes, and PyYAML, like the libyaml that rcl uses,
takes UTF-8, UTF-16 and UTF-32 by their BOM. rcl reads such parameter files too (checked in
``test/test_params_file.py``), so no stripped copy is needed.

The nodes' start-up (:func:`mbs_ros.nodes.runtime.run_node`) checks every ``--params-file`` with
:func:`read_params_file` before ``rclpy.init``; the scenario loader reads scenarios with :func:`read_yaml` and a
robot's ``params`` file with :func:`read_params_file`. Nothing here imports rclpy.

A list tagged ``!!python/tuple`` is a list, as rcl reads it: launch_ros writes every list parameter of a
``Node(parameters=[{...}])`` that way (``yaml.dump`` of the tuples it normalises lists to).
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, Union

import yaml

from mbs_ros.yamlfile import YamlFileError, compose_all, construct, is_name, read_text, read_yaml

__all__ = ["YamlFileError", "read_yaml", "read_params_file", "flatten", "PARAMS_KEY"]

PARAMS_KEY = "ros__parameters"
_SHAPE = "expected a mapping of node names to {ros__parameters: {name: value}}"


_TUPLE_TAG = "tag:yaml.org,2002:python/tuple"


def _tuples_as_lists(node: yaml.Node) -> yaml.Node:
    """``node`` with every ``!!python/tuple`` sequence retagged as a plain sequence (in place)."""
    if isinstance(node, yaml.SequenceNode):
        if node.tag == _TUPLE_TAG:
            node.tag = "tag:yaml.org,2002:seq"
        for item in node.value:
            _tuples_as_lists(item)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _tuples_as_lists(k)
            _tuples_as_lists(v)
    return node


def _fail(path, node: yaml.Node, reason: str) -> YamlFileError:
    return YamlFileError(path, reason, node.start_mark.line + 1, node.start_mark.column + 1)


def _key(path, node: yaml.Node, what: str) -> str:
    """The text of a key that names a node or a parameter; YamlFileError at its place when it is not a text or not
    name-shaped (:func:`mbs_ros.yamlfile.is_name`: a foreign file's line is never quoted back)."""
    if not isinstance(node, yaml.ScalarNode):
        raise _fail(path, node, f"{what} must be text ({_SHAPE})")
    if not is_name(node.value):
        raise _fail(path, node, f"not a ROS parameter file: a key that is not a {what} (letters, digits, "
                                f"'_./~*+-', at most 128 characters) ({_SHAPE})")
    return node.value


def _scalar_type(path, node: yaml.ScalarNode) -> str:
    value = construct(path, node)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "double"
    return "string"


def _check_value(path, name: str, node: yaml.Node) -> None:
    if isinstance(node, yaml.MappingNode):  # nested names: a.b
        for k, v in node.value:
            _check_value(path, f"{name}.{_key(path, k, 'parameter name')}", v)
    elif isinstance(node, yaml.SequenceNode):
        if not node.value:
            raise _fail(path, node, f"{name}: an empty list, which rcl reads as 'not set': leave the parameter out")
        types = []
        for item in node.value:
            if not isinstance(item, yaml.ScalarNode):
                raise _fail(path, item, f"{name}: a list of lists or mappings; a parameter list holds numbers, "
                                        "booleans or strings")
            types.append(_scalar_type(path, item))
        if len(set(types)) > 1:
            first = types[0]
            k = next(i for i, t in enumerate(types) if t != first)
            hint = " (write 1.0, not 1, in a list of doubles)" if {first, types[k]} == {"integer", "double"} else ""
            raise _fail(path, node.value[k], f"{name}: a list mixing {first} and {types[k]} values; a parameter "
                                             f"list has one type{hint}")


def _check_section(path, section: str, node: yaml.Node, out: Dict[str, dict]) -> None:
    if not isinstance(node, yaml.MappingNode):
        raise _fail(path, node, f"{section}: a value where a mapping with {PARAMS_KEY} belongs ({_SHAPE})")
    for k, v in node.value:
        _key(path, k, "node name")
        if k.value == PARAMS_KEY:
            if not isinstance(v, yaml.MappingNode):
                raise _fail(path, v, f"{section}/{PARAMS_KEY}: must be a mapping of parameter names to values")
            for name, value in v.value:
                _check_value(path, _key(path, name, "parameter name"), value)
            out.setdefault(section, {}).update(construct(path, v))
        elif not isinstance(v, yaml.MappingNode):
            raise _fail(path, k, f"{section}: {k.value!r} is a value outside {PARAMS_KEY} ({_SHAPE})")
        else:
            _check_section(path, f"{section}/{k.value}", v, out)


def read_params_file(path: Union[str, os.PathLike]) -> Dict[str, dict]:
    """A ROS 2 parameter file as rcl reads it: ``{section: {name: value}}`` where ``section`` is the node path
    of the keys above ``ros__parameters`` joined with ``/`` (``/**``, ``/**/dynamics_node``, ``ns/node``), and
    values may be nested mappings (names ``a.b``); later documents and sections update earlier ones. An empty
    file is ``{}``. Raises :class:`YamlFileError` for what rcl refuses or silently misreads (see the module
    docstring)."""
    text = read_text(path)
    out: Dict[str, dict] = {}
    for doc in map(_tuples_as_lists, compose_all(path, text)):
        if isinstance(doc, yaml.ScalarNode) and doc.value == "" and doc.tag.endswith(":null"):
            continue
        if not isinstance(doc, yaml.MappingNode):
            kind = "a list" if isinstance(doc, yaml.SequenceNode) else "text"
            raise _fail(path, doc, f"not a ROS parameter file: {kind} at the top ({_SHAPE})")
        for k, v in doc.value:
            _key(path, k, "node name")
            if k.value == PARAMS_KEY:
                raise _fail(path, k, f"{PARAMS_KEY} at the top: put it under a node name, e.g. '/**:' ({_SHAPE})")
            _check_section(path, k.value, v, out)
    return out


def flatten(params: Mapping, prefix: str = "") -> Dict[str, object]:
    """Nested parameter mappings as rcl names them: ``{a: {b: 1}}`` -> ``{"a.b": 1}``."""
    out: Dict[str, object] = {}
    for k, v in params.items():
        name = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, name))
        else:
            out[name] = v
    return out
