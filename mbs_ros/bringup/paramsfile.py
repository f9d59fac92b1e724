"""YAML files read with one-line errors: scenarios and ROS parameter files (``--params-file``).

Every error is a :class:`YamlFileError` whose text is one line, ``FILE:LINE:COLUMN: reason`` (or ``FILE: reason``
when no place applies): a missing or unreadable file, bytes that are not text in the file's encoding, a
byte-order mark anywhere but at the very start (files joined together), YAML syntax (PyYAML's line and column),
and for parameter files the structure rcl reads: a mapping of node names (nested namespaces allowed) to
``ros__parameters`` mappings whose values are scalars or non-empty lists of scalars of one type.

A byte-order mark at the start is fine: the file is read as bytes, and PyYAML, like the libyaml that rcl uses,
takes UTF-8, UTF-16 and UTF-32 by their BOM. rcl reads such parameter files too (checked in
``test/test_params_file.py``), so no stripped copy is needed.

The nodes' start-up (:func:`mbs_ros.nodes.runtime.run_node`) checks every ``--params-file`` with
:func:`read_params_file` before ``rclpy.init``; the scenario loader reads scenarios with :func:`read_yaml` and a
robot's ``params`` file with :func:`read_params_file`. Nothing here imports rclpy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Union

import yaml

__all__ = ["YamlFileError", "read_yaml", "read_params_file", "flatten", "PARAMS_KEY"]

PARAMS_KEY = "ros__parameters"
_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\xef\xbb\xbf", "utf-8"),
         (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))
_SHAPE = "expected a mapping of node names to {ros__parameters: {name: value}}"


class YamlFileError(ValueError):
    """A YAML file that cannot be used: ``path``, ``line``/``column`` (1-based, or None) and ``reason``; its text
    is one line, ``path:line:column: reason``."""

    def __init__(self, path, reason: str, line: Optional[int] = None, column: Optional[int] = None):
        self.path = str(path)
        self.reason = " ".join(str(reason).split())  # one line, whatever the reason's source
        self.line, self.column = line, column
        where = self.path if line is None else f"{self.path}:{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {self.reason}")


def _decode(path: Path, data: bytes) -> str:
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        start = data[:e.start].decode(encoding, errors="replace")
        line = start.count("\n") + 1
        column = len(start) - (start.rfind("\n") + 1) + 1
        raise YamlFileError(path, f"not {encoding.upper()} text: byte 0x{data[e.start]:02x} at offset {e.start} "
                                  f"cannot be decoded ({e.reason}); save the file as UTF-8", line, column) from None
    text = text.lstrip("\ufeff")  # rcl reads repeated leading marks too
    at = text.find("\ufeff")
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        raise YamlFileError(path, "a byte-order mark (U+FEFF) inside the file (two files joined together?): "
                                  "delete it", line, column)
    return text


def _read_text(path: Union[str, os.PathLike]) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise YamlFileError(p, "no such file") from None
    except IsADirectoryError:
        raise YamlFileError(p, "is a directory, not a file") from None
    except OSError as e:
        raise YamlFileError(p, f"cannot read: {e.strerror or e}") from None
    return _decode(p, data)


def _yaml_error(path, e: yaml.YAMLError) -> YamlFileError:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    context = getattr(e, "context", None)
    context_mark = getattr(e, "context_mark", None)
    reason = f"not valid YAML: {problem}"
    if context:
        reason += f" ({context}"
        if context_mark is not None and mark is not None and context_mark.line != mark.line:
            reason += f" at line {context_mark.line + 1}"
        reason += ")"
    if mark is None:
        return YamlFileError(path, reason)
    return YamlFileError(path, reason, mark.line + 1, mark.column + 1)


def _compose_all(path, text: str) -> List[yaml.Node]:
    try:
        return [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None


def _construct(path, node: yaml.Node):
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    finally:
        loader.dispose()


def read_yaml(path: Union[str, os.PathLike]):
    """The content of a one-document YAML file (None when empty), or :class:`YamlFileError`."""
    text = _read_text(path)
    nodes = _compose_all(path, text)
    if len(nodes) > 1:
        mark = nodes[1].start_mark
        raise YamlFileError(path, "more than one YAML document (a '---' line): a scenario is one document",
                            mark.line + 1, mark.column + 1)
    return _construct(path, nodes[0]) if nodes else None


def _fail(path, node: yaml.Node, reason: str) -> YamlFileError:
    return YamlFileError(path, reason, node.start_mark.line + 1, node.start_mark.column + 1)


def _scalar_type(path, node: yaml.ScalarNode) -> str:
    value = _construct(path, node)
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
            _check_value(path, f"{name}.{k.value}", v)
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
        if not isinstance(k, yaml.ScalarNode):
            raise _fail(path, k, f"{section}: node names must be text ({_SHAPE})")
        if k.value == PARAMS_KEY:
            if not isinstance(v, yaml.MappingNode):
                raise _fail(path, v, f"{section}/{PARAMS_KEY}: must be a mapping of parameter names to values")
            for name, value in v.value:
                if not isinstance(name, yaml.ScalarNode):
                    raise _fail(path, name, f"{section}: parameter names must be text")
                _check_value(path, name.value, value)
            out.setdefault(section, {}).update(_construct(path, v))
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
    text = _read_text(path)
    out: Dict[str, dict] = {}
    for doc in _compose_all(path, text):
        if isinstance(doc, yaml.ScalarNode) and doc.value == "" and doc.tag.endswith(":null"):
            continue
        if not isinstance(doc, yaml.MappingNode):
            kind = "a list" if isinstance(doc, yaml.SequenceNode) else f"the text {doc.value[:40]!r}"
            raise _fail(path, doc, f"not a ROS parameter file: {kind} at the top ({_SHAPE})")
        for k, v in doc.value:
            if not isinstance(k, yaml.ScalarNode):
                raise _fail(path, k, f"not a ROS parameter file: node names must be text ({_SHAPE})")
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
