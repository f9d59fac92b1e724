"""ROS 2 schemas as Foxglove and Lichtblick read them: a check of our MCAP files and WebSocket channels. ROS-free.

Foxglove decodes a ROS 2 channel (an MCAP channel, or a channel its WebSocket player was advertised) with
``parseChannel`` of ``@foxglove/mcap-support`` (Lichtblick: the same file): message encoding ``cdr`` needs a schema
of encoding ``ros2msg`` (or ``ros2idl``/``omgidl``), and a ROS schema with empty data is refused (except
``std_msgs/Empty``). A ``ros2msg`` schema text is parsed by ``@foxglove/rosmsg``'s ``parse(text, {ros2: true})``;
:func:`parse_ros2msg` applies the same rules and raises :class:`SchemaError` where it would throw:

- the text is split at ``\\n``, every line trimmed; empty lines and lines starting with ``#`` are dropped;
- a line starting with ``==`` ends a definition (rosbag2 and we write 80 ``=``); the first definition is the
  root (no name), each later one names itself on a line ``MSG: pkg/Type`` (``^MSG: ([^ ]+)\\s*(?:#.+)?$``);
- every other line must match the ROS 2 definition-line grammar (``buildRos2Type``: type, optional ``<=N``
  string bound, optional ``[]``/``[N]``/``[<=N]`` array bound, name, then ``=`` constant or a default value,
  then a comment); field names ``^[a-z](?:_?[a-z0-9]+)*$``, constant names ``^[A-Z](?:_?[A-Z0-9]+)*$``;
  constants and defaults must be valid literals of their type (``char`` counts as ``uint8``, ``byte`` as
  ``int8``, ``builtin_interfaces/[msg/]Time``/``Duration`` as the builtin ``time``/``duration``);
- every field of a complex type must find its definition among the named ones: the first whose name equals
  the type (``pkg/Type``) or ends in ``/Type`` (a type named without its package), else "Missing type definition".

Foxglove's ``MessageReader`` (``@foxglove/rosmsg2-serialization``) then reads CDR by those definitions;
:func:`decode_cdr` does the same (primitives aligned to their size from the end of the 4-byte encapsulation
header, strings as length with the terminating NUL, sequences as a count then the elements, ``time`` and
``duration`` as int32 + uint32), so a test can check that a message decodes to what rclpy deserialises.

:func:`check_mcap` checks a whole file (rosbag2's MCAP: profile ``ros2``, every channel ``cdr`` with a parseable
``ros2msg`` schema named ``pkg/msg/Type``, a summary) and returns the problems found, an empty list when
Foxglove reads it.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

__all__ = ["SchemaError", "Field", "Definition", "parse_ros2msg", "check_channel_schema", "decode_cdr",
           "check_mcap", "SCHEMA_TYPE_NAME"]


class SchemaError(ValueError):
    """A schema Foxglove would refuse (the message says what, as Foxglove's parser would)."""


# ---------------------------------------------------------------------------- the definition-line grammar

# @foxglove/rosmsg src/buildRos2Type.ts, in Python's regex syntax
_TYPE = r"(?P<type>[a-zA-Z0-9_/]+)"
_STRING_BOUND = r"(?:<=(?P<string_bound>\d+))"
_ARRAY_BOUND = r"(?:(?P<unbounded>\[\])|\[(?P<array_length>\d+)\]|\[<=(?P<array_bound>\d+)\])"
_NAME = r"(?P<name>[a-zA-Z0-9_]+)"
_QUOTED = r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\""
_COMMENT_TERMINATED = rf"(?:{_QUOTED}|(?:\\.|[^\s'\"#\\])(?:\\.|[^#\\])*)"
_ARRAY_TERMINATED = rf"(?:{_QUOTED}|(?:\\.|[^\s'\"\],#\\])(?:\\.|[^\],#\\])*)"
_CONSTANT = rf"\s*=\s*(?P<constant>{_COMMENT_TERMINATED}?)"
_DEFAULT_ARRAY = rf"\[(?:{_ARRAY_TERMINATED},)*{_ARRAY_TERMINATED}?\]"
_DEFAULT = rf"(?P<default>{_DEFAULT_ARRAY}|{_COMMENT_TERMINATED})"
_LINE = re.compile(rf"^{_TYPE}{_STRING_BOUND}?{_ARRAY_BOUND}?\s+{_NAME}(?:{_CONSTANT}|\s+{_DEFAULT})?\s*(?:#.*)?$")
_MSG_LINE = re.compile(r"^MSG: ([^ ]+)\s*(?:#.+)?$")
_FIELD_NAME = re.compile(r"^[a-z](?:_?[a-z0-9]+)*$")
_CONSTANT_NAME = re.compile(r"^[A-Z](?:_?[A-Z0-9]+)*$")
_BUILTIN = frozenset({"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
                      "uint32", "int64", "uint64", "string", "wstring", "time", "duration",
                      "builtin_interfaces/Time", "builtin_interfaces/Duration", "builtin_interfaces/msg/Time",
                      "builtin_interfaces/msg/Duration"})
_NORMALISED = {"char": "uint8", "byte": "int8", "builtin_interfaces/Time": "time",
               "builtin_interfaces/msg/Time": "time", "builtin_interfaces/Duration": "duration",
               "builtin_interfaces/msg/Duration": "duration"}
_INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, 65535),
               "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1),
               "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1)}
#: the schema names Foxglove's 3D panel and Lichtblick recognise ROS 2 types by: ``pkg/msg/Type`` (also ``pkg/Type``)
SCHEMA_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]*/msg/[A-Z][A-Za-z0-9]*$")


@dataclass
class Field:
    name: str
    type: str  # after normalisation; a complex type's full definition name after the type fix-up
    is_complex: bool
    is_array: bool = False
    array_length: Optional[int] = None  # fixed-size array
    array_bound: Optional[int] = None  # bounded sequence
    string_bound: Optional[int] = None
    is_constant: bool = False
    value: object = None  # constant value
    default: object = None


@dataclass
class Definition:
    name: Optional[str]  # None for the root
    fields: List[Field] = field(default_factory=list)

    @property
    def data_fields(self) -> List[Field]:
        return [f for f in self.fields if not f.is_constant]


# ------------------------------------------------------------------------- literals (JavaScript's parsers)

_JS_FLOAT = re.compile(r"^\s*([+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))")


def _js_parse_float(text: str) -> float:
    m = _JS_FLOAT.match(text)
    return float(m.group(1).replace("Infinity", "inf")) if m else math.nan


def _js_parse_int(text: str) -> Optional[int]:
    """JavaScript's ``parseInt(text)``: a leading integer (``0x`` hexadecimal), None for NaN."""
    m = re.match(r"^\s*([+-]?)(0[xX][0-9a-fA-F]+|\d+)", text)
    if not m:
        return None
    digits = m.group(2)
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
    return -value if m.group(1) == "-" else value


def _js_bigint(text: str) -> int:
    """JavaScript's ``BigInt(text)`` of a string: the whole (trimmed) text must be an integer literal."""
    s = text.strip()
    m = re.fullmatch(r"([+-]?\d+)|0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+", s)
    if not m:
        raise SchemaError(f"Cannot convert {text} to a BigInt")
    return int(s, 0) if not m.group(1) else int(s)


def _string_literal(text: str) -> str:
    for quote in ("'", '"'):
        if text.startswith(quote):
            if not text.endswith(quote) or len(text) < 2:
                raise SchemaError(f"Expected terminating {quote} in string literal: {text}")
            return text[1:-1]
    return text


def _literal(type_: str, text: str):
    if type_ == "bool":
        if text in ("true", "True", "1"):
            return True
        if text in ("false", "False", "0"):
            return False
    elif type_ in ("float32", "float64"):
        value = _js_parse_float(text)
        if not math.isnan(value):
            return value
    elif type_ in ("int64", "uint64"):
        value = _js_bigint(text)
        lo, hi = _INT_RANGES[type_]
        if not lo <= value <= hi:
            raise SchemaError(f"Number {text} out of range [{lo}, {hi}]")
        return value
    elif type_ in _INT_RANGES:
        value = _js_parse_int(text)
        if value is None:
            raise SchemaError(f"Invalid numeric literal: {text}")
        lo, hi = _INT_RANGES[type_]
        if not lo <= value <= hi:
            raise SchemaError(f"Number {text} out of range [{lo}, {hi}]")
        return value
    elif type_ in ("string", "wstring"):
        return _string_literal(text)
    raise SchemaError(f"Invalid literal of type {type_}: {text}")


def _array_literal(type_: str, text: str) -> list:
    if not (text.startswith("[") and text.endswith("]")):
        raise SchemaError("Array must start with [ and end with ]")
    body = text[1:-1]
    if type_ in ("string", "wstring"):
        out, offset = [], 0
        element = re.compile(_ARRAY_TERMINATED)
        comma = re.compile(r"\s*(,)\s*|\s*$")
        while offset < len(body):
            if body[offset] == ",":
                raise SchemaError("Expected array element before comma")
            m = element.match(body, offset)
            if m:
                out.append(_string_literal(m.group(0)))
                offset = m.end()
            m = comma.match(body, offset)
            if not m:
                raise SchemaError("Expected comma or end of array")
            if not m.group(1):
                break
            offset = m.end()
        return out
    return [_literal(type_, part.strip()) for part in body.split(",")]


# --------------------------------------------------------------------------------------------- parsing

def _build_type(lines: Sequence[str]) -> Definition:
    d = Definition(name=None)
    for line in lines:
        if line.startswith("#"):
            continue
        m = _MSG_LINE.match(line)
        if m:
            d.name = m.group(1)
            continue
        m = _LINE.match(line)
        if not m:
            raise SchemaError(f"Could not parse line: '{line}'")
        g = m.groupdict()
        type_ = _NORMALISED.get(g["type"], g["type"])
        if g["string_bound"] is not None and type_ not in ("string", "wstring"):
            raise SchemaError(f"Invalid string bound for type {type_}")
        constant = g["constant"]
        name = g["name"]
        if constant is not None:
            if not _CONSTANT_NAME.match(name):
                raise SchemaError(f"Invalid constant name: {name}")
        elif not _FIELD_NAME.match(name):
            raise SchemaError(f"Invalid field name: {name}")
        is_array = g["unbounded"] is not None or g["array_length"] is not None or g["array_bound"] is not None
        f = Field(name=name, type=type_, is_complex=type_ not in _BUILTIN,
                  is_array=is_array, array_length=int(g["array_length"]) if g["array_length"] else None,
                  array_bound=int(g["array_bound"]) if g["array_bound"] else None,
                  string_bound=int(g["string_bound"]) if g["string_bound"] else None,
                  is_constant=constant is not None)
        if g["default"] is not None:
            text = g["default"].strip()
            f.default = _array_literal(type_, text) if is_array else _literal(type_, text)
        if constant is not None:
            f.value = _literal(type_, constant.strip())
        d.fields.append(f)
    return d


def parse_ros2msg(text: str) -> List[Definition]:
    """The definitions of a ``ros2msg`` schema text, root first, as Foxglove parses them; :class:`SchemaError`
    where Foxglove's parser throws (see the module docstring)."""
    lines = [line.strip() for line in text.split("\n")]
    lines = [line for line in lines if line]
    blocks: List[List[str]] = [[]]
    for line in lines:
        if line.startswith("#"):
            continue
        if line.startswith("=="):
            blocks.append([])
        else:
            blocks[-1].append(line)
    types = [_build_type(b) for b in blocks]
    for d in types:
        for f in d.fields:
            if f.is_complex:
                wanted = f.type if "/" in f.type else "/" + f.type
                match = next((t for t in types if (t.name or "").endswith(wanted)), None)
                if match is None:
                    raise SchemaError(f"Expected 1 top level type definition for '{f.type}' but found 0")
                if match.name is None:
                    raise SchemaError(f"Missing type definition for {f.type}")
                f.type = match.name
    return types


def check_channel_schema(message_encoding: str, schema_name: Optional[str], schema_encoding: Optional[str],
                         schema_data: Optional[bytes]) -> Optional[List[Definition]]:
    """parseChannel's checks for a ROS 2 channel, then the parse: the definitions, or :class:`SchemaError`. None for
    a ``ros2idl`` schema (what rosbag2 and our recorder write for a type without ``.msg`` file): Foxglove reads it,
    this module does not parse it."""
    if message_encoding != "cdr":
        raise SchemaError(f"message encoding {message_encoding!r}, not cdr (rosbag2's ROS 2 encoding)")
    if schema_encoding not in ("ros2msg", "ros2idl", "omgidl"):
        raise SchemaError(f"Message encoding cdr with {'no encoding' if not schema_encoding else repr(schema_encoding)}"
                          " is not supported (expected \"ros2msg\" or \"ros2idl\")")
    if not schema_data and schema_name not in ("std_msgs/Empty", "std_msgs/msg/Empty"):
        raise SchemaError(f"Schema for {schema_name} is empty")
    if not schema_name or not SCHEMA_TYPE_NAME.match(schema_name):
        raise SchemaError(f"schema name {schema_name!r} is not pkg/msg/Type (what the 3D panel recognises types "
                          "by, besides pkg/Type)")
    try:
        text = bytes(schema_data or b"").decode("utf-8")
    except UnicodeDecodeError as e:
        raise SchemaError(f"schema of {schema_name} is not UTF-8 text: {e}") from None
    if schema_encoding != "ros2msg":
        return None
    return parse_ros2msg(text)


# ------------------------------------------------------------------------------------------------ CDR

_PRIMITIVE = {"bool": ("?", 1), "int8": ("b", 1), "uint8": ("B", 1), "int16": ("h", 2), "uint16": ("H", 2),
              "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "uint64": ("Q", 8),
              "float32": ("f", 4), "float64": ("d", 8)}


class _Reader:
    def __init__(self, data: bytes):
        if len(data) < 4:
            raise SchemaError(f"{len(data)} bytes: no CDR encapsulation header")
        kind = data[1]
        if data[0] != 0 or kind not in (0, 1):
            raise SchemaError(f"encapsulation {data[:2].hex()}: not plain CDR (XCDR2 is not what ROS 2 sends)")
        self.data = memoryview(data)
        self.endian = "<" if kind & 1 else ">"
        self.offset = 4

    def align(self, size: int) -> None:
        rem = (self.offset - 4) % size
        if rem:
            self.offset += size - rem

    def primitive(self, type_: str):
        code, size = _PRIMITIVE[type_]
        self.align(size)
        if self.offset + size > len(self.data):
            raise SchemaError(f"message ends inside a {type_} at byte {self.offset}")
        (value,) = struct.unpack_from(self.endian + code, self.data, self.offset)
        self.offset += size
        return value

    def string(self) -> str:
        n = self.primitive("uint32")
        if self.offset + n > len(self.data):
            raise SchemaError(f"string of {n} bytes runs past the end at byte {self.offset}")
        raw = bytes(self.data[self.offset:self.offset + n])
        self.offset += n
        return raw[:-1].decode("utf-8") if n and raw[-1:] == b"\x00" else raw.decode("utf-8")


def decode_cdr(definitions: Sequence[Definition], data: bytes, *, exact: bool = True) -> Dict[str, object]:
    """A message decoded as Foxglove's MessageReader decodes it with these definitions (root first): nested dicts,
    lists for arrays (``uint8``/``int8`` arrays as ``bytes``), ``time``/``duration`` as ``{"sec", "nanosec"}``.
    ``exact``: the message must end where the definitions do (up to 3 bytes of padding)."""
    by_name = {d.name: d for d in definitions[1:] if d.name is not None}
    r = _Reader(data)

    def value(f: Field):
        if f.type in ("time", "duration"):
            return {"sec": r.primitive("int32"), "nanosec": r.primitive("uint32")}
        if f.type in ("string", "wstring"):
            if f.type == "wstring":
                raise SchemaError("wstring is not decoded here")
            return r.string()
        if f.type in _PRIMITIVE:
            return r.primitive(f.type)
        d = by_name.get(f.type)
        if d is None:
            raise SchemaError(f"Unrecognized complex type {f.type}")
        return struct_(d)

    def struct_(d: Definition) -> Dict[str, object]:
        out: Dict[str, object] = {}
        for f in d.data_fields:
            if f.is_array:
                n = f.array_length if f.array_length is not None else r.primitive("uint32")
                if f.type in ("uint8", "int8"):
                    if r.offset + n > len(r.data):
                        raise SchemaError(f"{f.name}: {n} bytes run past the end")
                    out[f.name] = bytes(r.data[r.offset:r.offset + n])
                    r.offset += n
                else:
                    out[f.name] = [value(f) for _ in range(n)]
            else:
                out[f.name] = value(f)
        return out

    result = struct_(definitions[0])
    if exact and len(r.data) - r.offset > 3:
        raise SchemaError(f"{len(r.data) - r.offset} bytes left after the message: the definitions do not describe "
                          "this data")
    return result


# ----------------------------------------------------------------------------------------------- MCAP

@dataclass
class McapCheck:
    """What :func:`check_mcap` found: problems (empty: Foxglove reads the file) and, per topic, the schema name,
    the parsed definitions and the number of messages decoded."""

    path: Path
    problems: List[str] = field(default_factory=list)
    topics: Dict[str, str] = field(default_factory=dict)  # topic -> schema name
    definitions: Dict[str, List[Definition]] = field(default_factory=dict)  # schema name -> definitions
    unchecked: List[str] = field(default_factory=list)  # schemas Foxglove reads that are not parsed here (ros2idl)
    decoded: Dict[str, int] = field(default_factory=dict)  # topic -> messages decoded


def check_mcap(path: Union[str, Path], *, decode: int = 3,
               on_message: Optional[Callable[[str, str, bytes, Dict[str, object]], None]] = None) -> McapCheck:
    """Check an MCAP file against what Foxglove needs to show its ROS 2 topics (see the module docstring): the
    header profile ``ros2``, a summary, every schema ``ros2msg`` with a complete text Foxglove parses (``ros2idl``,
    rosbag2's fallback, is listed in ``unchecked``) and every channel ``cdr`` on such a schema; the first ``decode``
    messages of each channel are decoded with :func:`decode_cdr` (``on_message(topic, schema name, data, decoded)``
    sees each)."""
    from mcap.reader import make_reader

    report = McapCheck(Path(path))
    with open(path, "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        if header.profile != "ros2":
            report.problems.append(f"header profile {header.profile!r}, not 'ros2'")
        summary = reader.get_summary()
        if summary is None:
            report.problems.append("no summary (Foxglove must scan the whole file; ros2 bag refuses it)")
            return report
        for sid, schema in summary.schemas.items():
            try:
                defs = check_channel_schema("cdr", schema.name, schema.encoding, schema.data)
                if defs is None:
                    report.unchecked.append(f"{schema.name} ({schema.encoding})")
                else:
                    report.definitions[schema.name] = defs
            except SchemaError as e:
                report.problems.append(f"schema {sid} ({schema.name}): {e}")
        for channel in summary.channels.values():
            schema = summary.schemas.get(channel.schema_id)
            if schema is None:
                report.problems.append(f"{channel.topic}: no schema (schema id {channel.schema_id})")
                continue
            report.topics[channel.topic] = schema.name
            if channel.message_encoding != "cdr":
                report.problems.append(f"{channel.topic}: message encoding {channel.message_encoding!r}, not cdr")
        if decode <= 0:
            return report
        seen: Dict[str, int] = {}
        for schema, channel, message in reader.iter_messages():
            defs = report.definitions.get(schema.name) if schema is not None else None
            if defs is None or seen.get(channel.topic, 0) >= decode:
                continue
            seen[channel.topic] = seen.get(channel.topic, 0) + 1
            try:
                decoded = decode_cdr(defs, message.data)
            except (SchemaError, struct.error, UnicodeDecodeError) as e:
                report.problems.append(f"{channel.topic}: a message does not decode with its schema: {e}")
                continue
            report.decoded[channel.topic] = report.decoded.get(channel.topic, 0) + 1
            if on_message is not None:
                on_message(channel.topic, schema.name, bytes(message.data), decoded)
    return report


def _main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m mbs_ros.foxglove_schemas",
                                description="Check MCAP files against what Foxglove needs to read their ROS 2 "
                                            "topics (profile, schemas, encodings, decoding).")
    p.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    bad = 0
    for path in args.files:
        report = check_mcap(path)
        status = "OK" if not report.problems else "PROBLEMS"
        print(f"{path}: {status}: {len(report.topics)} topics, {len(report.definitions)} schemas")
        for topic, name in sorted(report.topics.items()):
            print(f"  {topic}: {name} ({report.decoded.get(topic, 0)} decoded)")
        for name in report.unchecked:
            print(f"  not parsed here (Foxglove reads it): {name}")
        for problem in report.problems:
            print(f"  problem: {problem}")
        bad += bool(report.problems)
    return 1 if bad else 0


if __name__ == "__main__":
    import sys

    sys.exit(_main())
