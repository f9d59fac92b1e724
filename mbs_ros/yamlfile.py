"""YAML files read with one-line errors, shared by every reader of the package's YAML (scenarios, parameter files,
robot files, reference files).

Every error is a :class:`YamlFileError` whose text is one line, ``FILE:LINE:COLUMN: reason`` (or ``FILE: reason``
when no place applies): a missing or unreadable file, bytes that are not text in the file's encoding, a
byte-order mark anywhere but at the very start (files joined together), YAML syntax (PyYAML's line and column).
A byte-order mark at the start is fine: the file is read as bytes, and PyYAML, like the libyaml that rcl uses,
takes UTF-8, UTF-16 and UTF-32 by their BOM. Never a file's content in an error. ROS-free.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Union

import yaml

__all__ = ["YamlFileError", "read_yaml", "read_text", "compose_all", "construct"]

_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\xef\xbb\xbf", "utf-8"),
         (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))

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


def read_text(path: Union[str, os.PathLike]) -> str:
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


def compose_all(path, text: str) -> List[yaml.Node]:
    try:
        return [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None


def construct(path, node: yaml.Node):
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    finally:
        loader.dispose()


def read_yaml(path: Union[str, os.PathLike]):
    """The content of a one-document YAML file (None when empty), or :class:`YamlFileError`."""
    text = read_text(path)
    nodes = compose_all(path, text)
    if len(nodes) > 1:
        mark = nodes[1].start_mark
        raise YamlFileError(path, "more than one YAML document (a '---' line): a scenario is one document",
                            mark.line + 1, mark.column + 1)
    return construct(path, nodes[0]) if nodes else None
