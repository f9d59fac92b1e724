"""YAML files read with one-line errors, shared by every reader of the package's YAML (scenarios, parameter files,
robot files, reference files).

Every error is a :class:`YamlFileError` whose text is one line, ``FILE:LINE:COLUMN: reason`` (or ``FILE: reason``
when no place applies): a missing or unreadable file, bytes that are not text in the file's encoding, a
byte-order mark anywhere but at the very start (files joined together), YAML syntax (PyYAML's line and column).
A byte-order mark at the start is fine: the file is read as bytes, and PyYAML, like the libyaml that rcl uses,
takes UTF-8, UTF-16 and UTF-32 by their BOM. Never a file's content in an error: a text from the file appears in
a message only when :func:`shown` finds it name-shaped (PyYAML's own messages included). ROS-free.

Bounded before anything is built from the file, so that no file exhausts memory, time or the stack: at most
:data:`MAX_BYTES` bytes are read (``/dev/zero`` included), nesting deeper than :data:`MAX_DEPTH` and a document of
more than :data:`MAX_NODES` nodes with its aliases expanded (a "billion laughs" bomb) are refused while the
document is composed, each with its line and column. So is an integer of more than :data:`MAX_DIGITS` digits
(Python refuses to convert one of more than 4300 digits, and one of more than 309 is beyond any float), and a
control character the YAML specification forbids (NUL, 0x01, ...): every such error is one ``YamlFileError``, never
a ``ReaderError``, ``ValueError``, ``OverflowError`` or ``RecursionError``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List, Optional, Union

import yaml

__all__ = ["YamlFileError", "read_yaml", "read_text", "compose_all", "construct", "shown", "is_name", "quiet",
           "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "MAX_DIGITS"]

#: Bytes read of any YAML file: far above any scenario, parameter, robot or reference file (a reference of 10^4
#: waypoints is about 1 MB).
MAX_BYTES = 32 << 20
#: Levels of nesting (collections and the scalars in them): the package's files use fewer than ten; PyYAML's
#: recursive composer would overflow the interpreter's stack at a few hundred.
MAX_DEPTH = 100
#: Nodes of a document with every alias expanded (what a reader walking the document visits): a reference file
#: of 10^4 waypoints has about 2e5.
MAX_NODES = 1_000_000
#: Digits of an integer: a float holds integers up to about 1.8e308 (309 digits), and no setting of the package
#: needs one beyond 2^63 (19 digits); a longer one is refused where it is written, before Python converts it.
MAX_DIGITS = 300
_INT_TAG = "tag:yaml.org,2002:int"

_NAME = re.compile(r"[A-Za-z0-9_./~*+-]{1,128}\Z")
_URI = re.compile(r"[a-z][a-z0-9+.-]*://[A-Za-z0-9_./~+-]{0,256}\Z")

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


def is_name(text) -> bool:
    """``text`` is name-shaped (a parameter, node, link or joint name, a path or a package URI: letters, digits and
    ``_./~*+-``, at most 128 characters, no spaces or colons but a URI's ``://``): safe to quote in a message."""
    return isinstance(text, str) and bool(_NAME.match(text) or _URI.match(text))


def shown(value) -> str:
    """``value`` (from a file) as a message may show it: numbers, booleans, null and name-shaped texts as written
    (``repr``); any other text by its length, lists and mappings by their size, so that no message echoes a
    foreign file's content."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if is_name(value) else f"a text of {len(value)} characters"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} keys"
    return f"a {type(value).__name__}"


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
    """The text of ``path`` (see the module docstring for the encodings): YamlFileError when it cannot be read, is
    larger than :data:`MAX_BYTES` or is not text."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise YamlFileError(p, "no such file") from None
    except IsADirectoryError:
        raise YamlFileError(p, "is a directory, not a file") from None
    except OSError as e:
        raise YamlFileError(p, f"cannot read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise YamlFileError(p, f"larger than {MAX_BYTES >> 20} MiB: not a file this package reads")
    return _decode(p, data)


_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'" + r'|"((?:[^"\\]|\\.)*)"')


def quiet(text: str) -> str:
    """A parser's message (PyYAML's, an XML parser's, xacro's) with each quoted text from the file (a tag, an
    anchor, an expression) kept only when it is a character or two or name-shaped."""
    def keep(m):
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        return m.group(0) if len(inner) <= 2 or is_name(inner) or inner.startswith("tag:yaml.org,2002:") \
            and is_name(inner[len("tag:yaml.org,2002:"):]) else "(text omitted)"
    return _QUOTED.sub(keep, text)


def _yaml_error(path, e: yaml.YAMLError) -> YamlFileError:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = quiet(getattr(e, "problem", None) or getattr(e, "reason", None) or type(e).__name__)
    context = quiet(getattr(e, "context", None) or "")
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


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts, while it composes, the depth and the nodes with aliases expanded, and
    refuses a document beyond :data:`MAX_DEPTH` or :data:`MAX_NODES` before it grows any further."""

    def __init__(self, text: str, path):
        super().__init__(text)
        self.path, self.depth, self.count = path, 0, 0
        self.sizes = {}  # id of an anchored node -> its size with aliases expanded

    def _refuse(self, event, reason: str) -> YamlFileError:
        mark = event.start_mark
        return YamlFileError(self.path, reason, mark.line + 1, mark.column + 1)

    def _check_scalar(self, event) -> None:
        if event.tag not in (None, "!", _INT_TAG) or len(event.value) <= MAX_DIGITS:
            return
        tag = event.tag if event.tag == _INT_TAG else self.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == _INT_TAG:
            raise self._refuse(event, f"an integer of {len(event.value)} characters: more than {MAX_DIGITS} "
                                      "digits, beyond any number this package reads")

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            self.count += self.sizes.get(id(node), 1) if node is not None else 1
            if self.count > MAX_NODES:
                raise self._refuse(event, f"more than {MAX_NODES} nodes with its aliases expanded (an alias "
                                          "bomb?)")
            return super().compose_node(parent, index)
        if isinstance(event, yaml.ScalarEvent):
            self._check_scalar(event)
        self.depth += 1
        self.count += 1
        if self.depth > MAX_DEPTH:
            raise self._refuse(event, f"nested deeper than {MAX_DEPTH} levels")
        if self.count > MAX_NODES:
            raise self._refuse(event, f"more than {MAX_NODES} nodes")
        start = self.count - 1
        node = super().compose_node(parent, index)
        self.depth -= 1
        if getattr(event, "anchor", None) is not None:
            self.sizes[id(node)] = self.count - start
        return node


def _reader_error(path, text: str, e: yaml.reader.ReaderError) -> YamlFileError:
    """A character YAML forbids (PyYAML checks the whole text before it parses): its code point and place."""
    at = e.position
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return YamlFileError(path, f"not valid YAML: control character U+{e.character:04X} (YAML allows no control "
                               "characters but tab, line feed and carriage return)", line, column)


def compose_all(path, text: str) -> List[yaml.Node]:
    """The documents of ``text`` as PyYAML nodes (empty documents left out), within the module's bounds;
    YamlFileError naming ``path``, the line and the column."""
    try:
        loader = _BoundedLoader(text, path)
    except yaml.reader.ReaderError as e:
        raise _reader_error(path, text, e) from None
    try:
        nodes = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                nodes.append(node)
        return nodes
    except yaml.reader.ReaderError as e:
        raise _reader_error(path, text, e) from None
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    except RecursionError:  # not reached within MAX_DEPTH; kept so that no file ends in a traceback
        raise YamlFileError(path, "nested too deeply to read") from None
    finally:
        loader.dispose()


def construct(path, node: yaml.Node):
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    except (ValueError, OverflowError, RecursionError) as e:  # a number Python cannot convert; nesting
        mark = node.start_mark
        raise YamlFileError(path, f"cannot be read ({type(e).__name__}: {quiet(str(e).splitlines()[0][:200])})",
                            mark.line + 1, mark.column + 1) from None
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
