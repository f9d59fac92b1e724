"""Record ROS 2 topics into a rosbag2-compatible MCAP file without ``ros2 bag``, and read such files back.

``python -m mbs_ros.recording OUT.mcap --topics T... | --all``, ``... check FILE``, ``... recover DAMAGED OUT``;
in a program :class:`Recorder` (on a node the program spins) or :class:`BackgroundRecorder`. Every write goes
through one writer thread (:class:`BagWriter`), so a signal cannot cut a record in half and a SIGKILL loses at
most the last chunk. File layout, QoS and damage: docs/recording.md.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib
import os
import queue
import re
import signal
import struct
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from mcap.writer import LIBRARY_IDENTIFIER, CompressionType
from mcap.writer import Writer as McapWriter

__all__ = ["BagWriter", "Recorder", "BackgroundRecorder", "DefinitionNotFound", "message_definition", "message_class",
           "UnknownMessageType", "resolve_message_type", "qos_profiles_yaml", "FileReport", "NotMcapError",
           "check_file", "read_messages", "recover", "main"]

PROFILE = "ros2"
MESSAGE_ENCODING = "cdr"
COMPRESSION = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}

_OPEN: "weakref.WeakSet[BagWriter]" = weakref.WeakSet()


# ------------------------------------------------------------------------------ message definitions

class DefinitionNotFound(LookupError):
    """No installed ``.msg``/``.idl`` file defines the type (or a type it depends on)."""


# As rosbag2_cpp/message_definitions/local_message_definition_source.cpp: type names (pkg/Type or
# pkg/msg/Type), field types in .msg text ("foo_msgs/Bar" in "foo_msgs/Bar[] bar"), .idl includes.
_PACKAGE_TYPENAME = re.compile(r"^([a-zA-Z0-9_]+)/(?:msg/|srv/)?([a-zA-Z0-9_]+)$")
_MSG_FIELD_TYPE = re.compile(r"(?:^|\n)\s*([a-zA-Z0-9_/]+)(?:\[[^\]]*\])?\s+")
_IDL_INCLUDE = re.compile(r"(?:^|\n)#include\s+(?:\"|<)([a-zA-Z0-9_/]+)\.idl(?:\"|>)")
_PRIMITIVES = frozenset({"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
                         "int32", "uint32", "int64", "uint64", "string"})
_DELIMITER = "=" * 80 + "\n"


def _share_directory(package: str) -> Optional[Path]:
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(package))
    except (LookupError, OSError, ImportError):  # not in the index, or AMENT_PREFIX_PATH unset
        pass
    candidate = Path(sys.prefix) / "share" / package  # a venv holding the ROS 2 wheels
    return candidate if candidate.is_dir() else None


@functools.lru_cache(maxsize=None)
def _definition_file(type_name: str, extension: str) -> Tuple[str, str]:
    """(text of the .msg/.idl file, package) of ``pkg/Type`` or ``pkg/msg/Type``."""
    m = _PACKAGE_TYPENAME.match(type_name)
    if not m:
        raise DefinitionNotFound(f"type name {type_name!r} not understood")
    package, name = m.groups()
    share = _share_directory(package)
    path = share / "msg" / (name + extension) if share is not None else None
    if path is None or not path.is_file():
        raise DefinitionNotFound(f"no {extension} file for {type_name} (package {package!r} share: {share})")
    return path.read_text(encoding="utf-8"), package


def _dependencies(text: str, package: str, extension: str) -> list:
    if extension == ".idl":
        return sorted(set(_IDL_INCLUDE.findall(text)))
    deps = set()
    for t in _MSG_FIELD_TYPE.findall(text):
        if t not in _PRIMITIVES:
            deps.add(t if "/" in t else f"{package}/{t}")
    return sorted(deps)  # rosbag2 keeps them in a std::set


@functools.lru_cache(maxsize=None)
def message_definition(type_name: str) -> Tuple[str, str]:
    """``(encoding, text)`` of the full definition of ``pkg/msg/Type``, as rosbag2 stores it in MCAP.

    The type's ``.msg`` text, then for each dependency not yet included (depth first, dependencies of
    a type in sorted order) a blank line, 80 ``=``, ``MSG: pkg/Type`` and its text; encoding
    ``ros2msg``. If any ``.msg`` is missing, the same from ``.idl`` files (``IDL:`` delimiters, one
    before the root too) with encoding ``ros2idl``. Raises :class:`DefinitionNotFound`.
    """
    for extension, encoding, tag in ((".msg", "ros2msg", "MSG: "), (".idl", "ros2idl", "IDL: ")):
        seen = set()

        def append(name: str, depth: int) -> str:
            if depth <= 0:
                raise DefinitionNotFound(f"dependencies of {type_name} nest too deeply")
            text, package = _definition_file(name, extension)
            out = text
            for dep in _dependencies(text, package, extension):
                if dep not in seen:
                    seen.add(dep)
                    out += "\n" + _DELIMITER + tag + dep + "\n" + append(dep, depth - 1)
            return out

        try:
            text = append(type_name, 50)
        except DefinitionNotFound as e:
            error = e
            continue
        if extension == ".idl":
            text = _DELIMITER + tag + type_name + "\n" + text
        return encoding, text
    raise DefinitionNotFound(f"{type_name}: {error}")


class UnknownMessageType(LookupError):
    """Not the name of a message type of an installed ROS interface package (nothing was imported)."""


# ROS 2 names: packages as REP 144 (lowercase, digits, underscores, a letter first), types as rosidl (PascalCase)
_ROS_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*$")
_ROS_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def _interface_listing(package: str) -> Optional[str]:
    """The package's ``rosidl_interfaces`` resource (its interface files, one a line) from the ament index, or
    None if the index does not list the package as an interface package. Reads index files only."""
    try:
        from ament_index_python import get_resource
        return get_resource("rosidl_interfaces", package)[0]
    except Exception:  # noqa: BLE001 - not in the index, AMENT_PREFIX_PATH unset, or no ament_index_python
        pass
    # a venv holding the ROS 2 wheels, used without AMENT_PREFIX_PATH
    path = Path(sys.prefix) / "share" / "ament_index" / "resource_index" / "rosidl_interfaces" / package
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else None
    except OSError:
        return None


def resolve_message_type(type_name: str) -> Tuple[str, str]:
    """``(package, Type)`` of ``pkg/msg/Type`` (or ``pkg/Type``) if the ament index lists ``msg/Type.msg`` or
    ``msg/Type.idl`` among the interfaces of ``pkg``; :class:`UnknownMessageType` otherwise. Imports nothing:
    a name seen in the ROS graph is checked here before anything is imported for it."""
    parts = type_name.split("/") if isinstance(type_name, str) else []
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or parts[1] != "msg":
        raise UnknownMessageType(f"{type_name!r} is not a message type name (expected pkg/msg/Type)")
    package, _, name = parts
    if not _ROS_PACKAGE.match(package) or not _ROS_TYPE.match(name):
        raise UnknownMessageType(f"{type_name!r} is not a ROS 2 message type name (package: lowercase, "
                                 "digits and _; type: PascalCase)")
    listing = _interface_listing(package)
    if listing is None:
        raise UnknownMessageType(f"{package!r} is not an installed ROS interface package (not in the ament "
                                 "index's rosidl_interfaces)")
    files = {line.strip() for line in listing.splitlines()}
    if f"msg/{name}.msg" not in files and f"msg/{name}.idl" not in files:
        raise UnknownMessageType(f"the interface package {package!r} has no message {name!r}")
    return package, name


def message_class(type_name: str):
    """The Python class of ``pkg/msg/Type`` (also ``pkg/Type``), imported from ``pkg.msg`` only once the ament
    index confirms that ``pkg`` is an installed interface package defining ``Type``
    (:func:`resolve_message_type`); raises :class:`UnknownMessageType` (a ``LookupError``) otherwise."""
    package, name = resolve_message_type(type_name)
    try:
        module = importlib.import_module(f"{package}.msg")
    except ImportError as e:
        raise UnknownMessageType(f"{package}.msg cannot be imported ({e}): the package's Python part is "
                                 "not installed") from None
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and cls.__module__.startswith(f"{package}.msg")
            and hasattr(cls, "get_fields_and_field_types")):
        raise UnknownMessageType(f"{package}.msg has no message class {name!r}")
    return cls


def _normalise_type(type_name) -> str:
    """``pkg/msg/Type`` from a class, ``pkg/Type`` or ``pkg/msg/Type``."""
    if not isinstance(type_name, str):
        module = type_name.__module__.split(".")  # nav_msgs.msg._odometry
        return f"{module[0]}/{module[1]}/{type_name.__name__}"
    parts = type_name.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else type_name


# ------------------------------------------------------------------------------------- QoS as rosbag2

def _duration_yaml(d) -> str:
    ns = max(0, d.nanoseconds if hasattr(d, "nanoseconds") else int(d))  # infinite: 2^63 - 1, as rmw's
    return f"\n    sec: {ns // 1_000_000_000}\n    nsec: {ns % 1_000_000_000}"


def qos_profiles_yaml(profiles: Iterable) -> str:
    """rosbag2's ``offered_qos_profiles`` text (metadata version 9: policies by name) of rclpy QoS profiles."""
    def name(policy) -> str:
        return policy.name.lower() if hasattr(policy, "name") else str(policy)

    items = []
    for p in profiles:
        items.append(
            f"- history: {name(p.history)}\n  depth: {int(p.depth)}\n  reliability: {name(p.reliability)}\n"
            f"  durability: {name(p.durability)}\n  deadline:{_duration_yaml(p.deadline)}\n"
            f"  lifespan:{_duration_yaml(p.lifespan)}\n  liveliness: {name(p.liveliness)}\n"
            f"  liveliness_lease_duration:{_duration_yaml(p.liveliness_lease_duration)}\n"
            f"  avoid_ros_namespace_conventions: {'true' if p.avoid_ros_namespace_conventions else 'false'}")
    return "\n".join(items) if items else "[]"


# ---------------------------------------------------------------------------------------------- file

def _header_stamp_reader(msg_class):
    """A function CDR bytes -> header stamp [ns] (0 if absent), for types whose first field is a Header."""
    try:
        fields = list(msg_class.get_fields_and_field_types().items())
    except AttributeError:
        return None
    if not fields or fields[0][1] != "std_msgs/Header":
        return None
    # CDR: 4-byte encapsulation header (byte 1 odd = little endian), then Header.stamp {int32 sec, uint32 nanosec}
    le, be = struct.Struct("<iI"), struct.Struct(">iI")

    def stamp(data) -> int:
        if len(data) < 12:
            return 0
        sec, nsec = (le if data[1] & 1 else be).unpack_from(data, 4)
        return sec * 1_000_000_000 + nsec

    return stamp


class BagWriter:
    """A rosbag2-compatible MCAP file (docs/recording.md): topics, then raw CDR messages.

    Thread-safe. Every ``mcap`` writer call runs in one writer thread of its own, fed through a queue: a
    ``KeyboardInterrupt`` (or any exception) raised in the calling thread, however it is timed, can never cut a
    record in half (Python raises signal exceptions in the main thread only). ``write`` only queues; a chunk is
    closed and written to disk after ``chunk_size`` bytes or ``flush_period`` s (None: only by size),
    ``flush()`` closes one now and waits for it, ``close()`` writes the summary. ``counts`` are the messages the
    writer thread has handed to the file (after ``close()``: exactly the file's). The writer thread takes no lock
    a caller could hold, so nothing a caller's thread does or suffers can stop it from completing the file.
    """

    def __init__(self, path: Union[str, os.PathLike], *, compression: str = "zstd",
                 chunk_size: int = 1 << 20, flush_period: Optional[float] = 1.0):
        if compression not in COMPRESSION:
            raise ValueError(f"compression must be one of {', '.join(COMPRESSION)}, got {compression!r}")
        self.path = Path(path)
        self.flush_period = flush_period
        self._lock = threading.RLock()
        self._file = open(self.path, "wb")
        try:
            self._writer = McapWriter(self._file, chunk_size=chunk_size, compression=COMPRESSION[compression])
            from mbs_ros import __version__
            self._writer.start(profile=PROFILE, library=f"mbs_ros.recording/{__version__}; {LIBRARY_IDENTIFIER}")
            self._file.flush()
        except BaseException:
            self._file.close()
            raise
        self._schemas: Dict[str, int] = {}  # type -> schema id (writer thread)
        self._channels: Dict[str, int] = {}  # topic -> channel id (writer thread)
        self.types: Dict[str, str] = {}  # topic -> pkg/msg/Type
        self.counts: Dict[str, int] = {}  # topic -> messages written
        self.closed = False
        self._error: Optional[BaseException] = None
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"mcap-writer {self.path.name}", daemon=True)
        self._thread.start()
        _OPEN.add(self)

    def add_topic(self, topic: str, type_name, *, offered_qos_profiles: Sequence = (), type_hash: str = "") -> None:
        """Register a topic (a schema for its type the first time); idempotent for the same type."""
        type_name = _normalise_type(type_name)
        with self._lock:
            self._check_open()
            if topic in self.types:
                if self.types[topic] != type_name:
                    raise ValueError(f"{topic} is already recorded as {self.types[topic]}, not {type_name}")
                return
            try:
                encoding, text = message_definition(type_name)
            except DefinitionNotFound:
                encoding, text = "", ""  # rosbag2 writes "unknown" and no text; MCAP's "no schema" is ""
            metadata = {"offered_qos_profiles": qos_profiles_yaml(offered_qos_profiles),
                        "topic_type_hash": type_hash}
            self.types[topic] = type_name
            self.counts[topic] = 0
            self._queue.put((_TOPIC, topic, type_name, encoding, text.encode(), metadata))

    def write(self, topic: str, data: bytes, log_time: int, publish_time: Optional[int] = None,
              sequence: int = 0) -> None:
        """Queue one serialised (CDR) message of a registered topic for the file; times in ns."""
        with self._lock:
            self._check_open()
            if topic not in self.types:
                raise KeyError(f"{topic} is not a registered topic of {self.path}")
            self._queue.put((_MESSAGE, topic, int(log_time), bytes(data),
                             int(log_time if publish_time is None else publish_time), int(sequence) & 0xFFFFFFFF))

    def write_message(self, topic: str, msg, log_time: int, publish_time: Optional[int] = None) -> None:
        """Serialise an rclpy message and write it, registering the topic if needed; publish time as
        the recorder chooses it (header stamp if any) when not given."""
        from rclpy.serialization import serialize_message
        if topic not in self.types:
            self.add_topic(topic, type(msg))
        data = serialize_message(msg)
        if publish_time is None:
            reader = _header_stamp_reader(type(msg))
            publish_time = (reader(data) if reader else 0) or log_time
        self.write(topic, data, log_time, publish_time)

    def flush(self) -> None:
        """Close the chunk in progress and hand everything written so far to the OS (it then survives the
        process being killed); returns once done."""
        done = threading.Event()
        with self._lock:
            if self.closed:
                return
            self._queue.put((_FLUSH, done))
        while not done.wait(0.1):
            if not self._thread.is_alive():
                break
        self._raise_error()

    def close(self) -> None:
        """Write the summary and indexes and close the file (idempotent); waits for the writer thread."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._queue.put((_CLOSE,))
        self._thread.join()
        _OPEN.discard(self)
        self._raise_error()

    @property
    def message_count(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def topic_types(self) -> Dict[str, str]:
        """A copy of topic -> type of the registered topics, taken under the writer's lock (any thread)."""
        with self._lock:
            return dict(self.types)

    def message_counts(self) -> Dict[str, int]:
        """A copy of topic -> messages written so far, taken under the writer's lock (any thread)."""
        with self._lock:
            return dict(self.counts)

    def _check_open(self) -> None:
        self._raise_error()
        if self.closed:
            raise ValueError(f"{self.path} is closed")

    def _raise_error(self) -> None:
        error = self._error  # the writer thread's, e.g. a full disk: every later call raises it
        if error is not None:
            raise OSError(f"writing {self.path} failed: {type(error).__name__}: {error}") from error

    # ------------------------------------------------------------------------ the writer thread
    def _run(self) -> None:
        w, pending_since = self._writer, None  # monotonic time of the first message of the open chunk
        try:
            while True:
                timeout = None
                if pending_since is not None and self.flush_period is not None:
                    timeout = pending_since + self.flush_period - time.monotonic()
                    if timeout <= 0:  # the open chunk is flush_period old: to disk with it
                        w.flush()
                        pending_since = timeout = None
                try:
                    item = self._queue.get(timeout=timeout)
                except queue.Empty:
                    continue
                kind = item[0]
                if kind is _MESSAGE:
                    _, topic, log_time, data, publish_time, sequence = item
                    w.add_message(channel_id=self._channels[topic], log_time=log_time, data=data,
                                  publish_time=publish_time, sequence=sequence)
                    self.counts[topic] += 1  # only this thread changes a count (no lock: see the class docstring)
                    if pending_since is None:
                        pending_since = time.monotonic()
                elif kind is _TOPIC:
                    _, topic, type_name, encoding, text, metadata = item
                    schema_id = self._schemas.get(type_name)
                    if schema_id is None:
                        schema_id = self._schemas[type_name] = w.register_schema(
                            name=type_name, encoding=encoding, data=text)
                    self._channels[topic] = w.register_channel(
                        topic=topic, message_encoding=MESSAGE_ENCODING, schema_id=schema_id, metadata=metadata)
                elif kind is _FLUSH:
                    w.flush()
                    pending_since = None
                    item[1].set()
                else:  # _CLOSE
                    w.finish()
                    self._file.flush()
                    os.fsync(self._file.fileno())
                    return
        except BaseException as e:  # noqa: BLE001 - e.g. disk full: the next call in the caller's thread raises it
            self._error = e
            self.closed = True
        finally:
            self._file.close()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_MESSAGE, _TOPIC, _FLUSH, _CLOSE = "message", "topic", "flush", "close"  # writer-thread commands


@atexit.register
def _close_leftovers() -> None:
    for w in list(_OPEN):
        try:
            w.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


# ------------------------------------------------------------------------------------------ recorder

def _hidden(topic: str) -> bool:
    return any(part.startswith("_") for part in topic.split("/"))


class Recorder:
    """Records topics of the ROS graph, through ``node``, into an MCAP file (docs/recording.md).

    ``topics``: names (relative names are resolved in the node's namespace) or a mapping name ->
    type (``pkg/msg/Type`` or a message class; ``None`` = whatever the graph says). ``all_topics``:
    also every other topic that appears (hidden ones only with ``include_hidden``), except those
    matching ``exclude`` (regular expressions, searched in the name). Spinning ``node`` drives it;
    call :meth:`close` (or use ``with``) to complete the file.
    """

    def __init__(self, node, path: Union[str, os.PathLike], topics: Union[Iterable[str], Mapping[str, object],
                 None] = None, *, all_topics: bool = False, exclude: Iterable[str] = (),
                 include_hidden: bool = False, compression: str = "zstd", chunk_size: int = 1 << 20,
                 flush_period: float = 1.0, discovery_period: float = 0.5, depth: int = 1000):
        self.node = node
        items = topics.items() if isinstance(topics, Mapping) else ((t, None) for t in (topics or ()))
        self.requested: Dict[str, Optional[str]] = {
            node.resolve_topic_name(name): (_normalise_type(t) if t is not None else None) for name, t in items}
        if not self.requested and not all_topics:
            raise ValueError("nothing to record: give topics or all_topics=True")
        if not (flush_period > 0 and discovery_period > 0):
            raise ValueError("flush_period and discovery_period must be > 0")
        self.all_topics = all_topics
        self.include_hidden = include_hidden
        self.exclude = [re.compile(p) for p in exclude]
        self.depth = int(depth)
        self.writer = BagWriter(path, compression=compression, chunk_size=chunk_size, flush_period=flush_period)
        self.path = self.writer.path
        self._subscriptions: Dict[str, object] = {}
        self._stamp_readers: Dict[str, object] = {}
        self._newest: Dict[str, int] = {}  # topic -> the newest header stamp received [ns] (types with a Header)
        self._warned: set = set()
        self._warned_types: set = set()
        self._closed = False
        self._lock = threading.Lock()
        self._clock = node.get_clock()
        self._discovery_timer = node.create_timer(discovery_period, self.discover)
        self.discover()

    # ------------------------------------------------------------------------------- queries
    # (read from any thread: the executor's thread adds topics and counts meanwhile)
    @property
    def subscribed(self) -> Dict[str, str]:
        """topic -> type of the topics being recorded."""
        return self.writer.topic_types()

    @property
    def counts(self) -> Dict[str, int]:
        """topic -> messages written so far."""
        return self.writer.message_counts()

    @property
    def missing(self) -> list:
        """Requested topics not (yet) recorded (not in the graph, or no publisher yet)."""
        with self._lock:
            return sorted(set(self.requested) - set(self._subscriptions))

    @property
    def closed(self) -> bool:
        return self._closed or self.writer.closed

    def short_of(self, end_ns: int, topics: Iterable[str]) -> Dict[str, Optional[int]]:
        """Those of ``topics`` that have not yet delivered a message stamped ``end_ns`` or later: topic -> its newest
        stamp (None: none yet). Each publisher's messages of a reliable topic arrive in order, so a topic not in it
        has delivered everything stamped before ``end_ns``."""
        out = {}
        for t in topics:
            newest = self._newest.get(t)
            if newest is None or newest < end_ns:
                out[t] = newest
        return out

    # ------------------------------------------------------------------------------- discovery
    def discover(self) -> None:
        """Subscribe to the wanted topics the graph now has (the discovery timer calls it)."""
        if self.writer.closed:
            return
        for name, types in self.node.get_topic_names_and_types():
            if name in self._subscriptions:
                continue
            wanted = name in self.requested
            if not wanted and not (self.all_topics and (self.include_hidden or not _hidden(name))
                                   and not any(p.search(name) for p in self.exclude)):
                continue
            if name in self._warned:
                continue
            type_name = self.requested.get(name)
            if type_name is not None and type_name not in types:
                self._warn_once(name, f"not recording {name}: it has type(s) {', '.join(types)}, not {type_name}")
                continue
            if type_name is None:
                type_name = types[0]
                if len(types) > 1:
                    self.node.get_logger().warning(
                        f"{name} has several types ({', '.join(types)}): recording {type_name}")
            self._subscribe(name, type_name)
        if not self.all_topics and not self.missing and self._discovery_timer is not None:
            self._discovery_timer.cancel()  # everything asked for is recorded

    def _warn_once(self, name: str, text: str) -> None:
        self._warned.add(name)
        self.node.get_logger().warning(text)

    def _subscribe(self, name: str, type_name: str) -> None:
        with self._lock:
            if not self.writer.closed:
                self._subscribe_locked(name, type_name)

    def _subscribe_locked(self, name: str, type_name: str) -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        try:
            msg_class = message_class(type_name)
        except UnknownMessageType as e:
            self._warned.add(name)  # this topic is not looked at again
            if type_name not in self._warned_types:  # one warning per unknown type
                self._warned_types.add(type_name)
                self.node.get_logger().warning(f"not recording {name}: unknown message type {type_name} ({e})")
            return
        infos = [i for i in self.node.get_publishers_info_by_topic(name)]
        if not infos:
            return  # only subscribers so far: wait for a publisher, whose QoS decides ours
        offered = [i.qos_profile for i in infos]
        reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
        transient = all(q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.depth,
                         reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if transient else DurabilityPolicy.VOLATILE)
        type_hash = next((str(i.topic_type_hash) for i in infos if hasattr(i, "topic_type_hash")), "")
        self.writer.add_topic(name, type_name, offered_qos_profiles=offered, type_hash=type_hash)
        self._stamp_readers[name] = _header_stamp_reader(msg_class)
        self._subscriptions[name] = self.node.create_subscription(
            msg_class, name, functools.partial(self._on_message, name), qos, raw=True)
        self.node.get_logger().info(f"recording {name} ({type_name})")

    # ------------------------------------------------------------------------------- data
    def _on_message(self, topic: str, data: bytes, info) -> None:
        log_time = self._clock.now().nanoseconds
        reader = self._stamp_readers.get(topic)
        stamp = reader(data) if reader else 0
        if stamp and stamp > self._newest.get(topic, -1):
            self._newest[topic] = stamp
        publish_time = stamp or info.get("source_timestamp") or log_time
        try:
            self.writer.write(topic, data, log_time, publish_time, info.get("publication_sequence_number") or 0)
        except ValueError:  # closed meanwhile
            pass

    def take_queued(self) -> int:
        """Write every message already queued in the subscriptions (received by the middleware, not yet taken by an
        executor), taking them directly as an executor would; the number taken. At most ``depth`` per topic (what a
        queue holds), so a publisher still sending cannot keep it going. Call it from the thread that spins the node
        (or once nothing spins it), before :meth:`close`: what a recorder that is asked to stop has received is then
        in the file."""
        taken = 0
        with self._lock:
            subscriptions = [] if self._closed else list(self._subscriptions.items())
        for topic, sub in subscriptions:
            for _ in range(self.depth):
                try:
                    with sub.handle:
                        item = sub.handle.take_message(sub.msg_type, sub.raw)
                except Exception:  # noqa: BLE001 - destroyed or shut down meanwhile: nothing more to take
                    break
                if item is None:
                    break
                self._on_message(topic, item[0], item[1])
                taken += 1
        return taken

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        """Stop recording and complete the file (idempotent). Subscriptions and timers are removed
        while the node is still valid."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self.writer.close()
            finally:
                for obj in (self._discovery_timer, *self._subscriptions.values()):
                    try:
                        if hasattr(obj, "cancel"):
                            obj.cancel()
                            self.node.destroy_timer(obj)
                        else:
                            self.node.destroy_subscription(obj)
                    except Exception:  # noqa: BLE001 - the node or its context may be gone already
                        pass

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BackgroundRecorder:
    """A :class:`Recorder` with its own rclpy context, node and spinning thread, for programs that do not
    spin ROS themselves (a scenario runner, a test). It installs no signal handlers: the program decides
    when to :meth:`stop`, which completes the file. Keyword arguments go to :class:`Recorder`."""

    def __init__(self, path, topics=None, *, node_name: str = "mbs_recorder", namespace: Optional[str] = None,
                 domain_id: Optional[int] = None, **kwargs):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
        try:
            self.node = rclpy.create_node(node_name, namespace=namespace, context=self.context)
            self.recorder = Recorder(self.node, path, topics, **kwargs)
        except BaseException:
            rclpy.try_shutdown(context=self.context)
            raise
        self.path = self.recorder.path
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"{node_name}-spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            try:
                self._executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - context shut down under us: stop spinning
                if not self.context.ok():
                    break
                raise

    def wait_for_topics(self, timeout: float = 10.0) -> bool:
        """Wait until every requested topic is being recorded; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.recorder.missing:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    @property
    def counts(self) -> Dict[str, int]:
        return self.recorder.counts

    def stop(self) -> None:
        """Stop recording, write what the subscriptions hold, complete the file, and release the node and context
        (idempotent)."""
        import rclpy
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.recorder.take_queued()  # what has arrived and no spin took yet
        self.recorder.close()
        try:
            self._executor.shutdown()
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)

    def __enter__(self) -> "BackgroundRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ------------------------------------------------------------------------------ reading back, recovery
#
# The mcap library's StreamReader reads the file record by record (emit_chunks: chunks whole) up to where it
# breaks; what it cannot do is tolerate damage, so three things are done here on top of it, with the library's
# record classes: a chunk's records are split one by one (a broken one ends the chunk, the ones before it are
# kept, where mcap's breakup_chunk would drop the chunk or accept a record whose length field was never
# written); a chunk cut off by the end of the file is decompressed as far as its bytes go (zstd and lz4 decode
# a prefix); and damage is described, not raised.

MCAP_MAGIC = b"\x89MCAP0\r\n"
_RECORD_HEAD = struct.Struct("<BQ")  # opcode, length
_MESSAGE_FIELDS = 22  # channel id (2), sequence (4), log time (8), publish time (8)


class NotMcapError(ValueError):
    """The file is not MCAP at all (missing, empty, or no MCAP magic and header)."""


@dataclass
class FileReport:
    """What a pass over an MCAP file found. ``problems`` is empty for an intact file."""

    path: Path
    size: int = 0
    profile: str = ""
    library: str = ""
    topics: Dict[str, str] = field(default_factory=dict)  # topic -> type (schema name), in file order
    counts: Dict[str, int] = field(default_factory=dict)  # topic -> complete messages found
    #: topic -> the latest header stamp [ns] of its messages, for a type that starts with a std_msgs/Header
    last_stamps: Dict[str, int] = field(default_factory=dict)
    schemas: int = 0
    channels: int = 0
    chunks: int = 0
    closed: bool = False  # the footer and the closing magic were reached
    problems: List[str] = field(default_factory=list)  # the damage (a missing summary first, then in file order)

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def describe(self) -> str:
        """One line: ``intact`` or what is damaged and lost."""
        return "intact" if not self.problems else "; ".join(self.problems)

    def counts_text(self, indent: str = "  ") -> str:
        return "".join(f"\n{indent}{t}: {n}" for t, n in sorted(self.counts.items()))


def _starts_with_header(schema) -> bool:
    """Whether an MCAP schema of encoding ros2msg describes a type whose first field is a std_msgs/Header."""
    if schema.encoding != "ros2msg":
        return False
    for line in schema.data.decode("utf-8", "replace").splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            return words[0] in ("std_msgs/Header", "std_msgs/msg/Header", "Header")
    return False


def _opcode_name(opcode: int) -> str:
    from mcap.opcode import Opcode
    try:
        return Opcode(opcode).name.title().replace("_", "")
    except ValueError:
        return f"unknown (opcode {opcode:#x})"


class _Scan:
    """One tolerant pass: yields ``(kind, record)`` for the header, the first definition of every schema and
    channel, every complete message, metadata and attachments, in file order; fills ``report``."""

    def __init__(self, f, report: FileReport):
        self.f, self.report = f, report
        self.schemas: Dict[int, object] = {}
        self.channels: Dict[int, object] = {}
        self.orphans: Dict[int, int] = {}  # channel id -> messages on a channel never defined
        self.headers: Dict[int, bool] = {}  # channel id -> its type starts with a std_msgs/Header

    def problem(self, text: str) -> None:
        self.report.problems.append(text)

    def records(self):
        from mcap.records import (Attachment, Channel, Chunk, DataEnd, Footer, Header, Message, Metadata,
                                  Schema)
        from mcap.stream_reader import StreamReader

        f, report = self.f, self.report
        f.seek(0, os.SEEK_END)
        report.size = size = f.tell()
        f.seek(0)
        if f.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            raise NotMcapError(f"{report.path} is not an MCAP file (no MCAP magic at its start)"
                               if size else f"{report.path} is empty")
        reader = StreamReader(f, skip_magic=True, emit_chunks=True, record_size_limit=max(size, 1))
        pos, summary, footer, header, error = len(MCAP_MAGIC), False, False, False, None
        try:
            for record in reader.records:
                start, pos = pos, f.tell()
                if isinstance(record, Header):
                    header = True
                    report.profile, report.library = record.profile, record.library
                    yield "header", record
                elif not header:
                    raise NotMcapError(f"{report.path} is not an MCAP file (no header record)")
                elif isinstance(record, Footer):
                    summary = footer = True
                elif isinstance(record, DataEnd):
                    summary = True  # what follows repeats the definitions and indexes the data
                elif summary:
                    continue
                elif isinstance(record, Chunk):
                    report.chunks += 1
                    yield from self._chunk(record, start)
                elif isinstance(record, (Schema, Channel, Message)):
                    yield from self._record(record)
                elif isinstance(record, Metadata):
                    yield "metadata", record
                elif isinstance(record, Attachment):
                    yield "attachment", record
            report.closed = True
        except NotMcapError:
            raise
        except Exception as e:  # noqa: BLE001 - the first record the library cannot read
            error = e
        if not header:
            raise NotMcapError(f"{report.path} is not an MCAP file (no readable header record)")
        known = len(report.problems)
        if error is not None and footer:
            self.problem(f"the MCAP magic after its footer is cut off or wrong ({size - pos} bytes instead of 8)")
        elif error is not None:
            yield from self._tail(pos, size, error, summary)
        if not summary:
            report.problems.insert(0, "no summary: the file was not closed (its writer was killed?)")
        elif not report.closed and len(report.problems) == known:
            self.problem("the file ends before its footer")
        if self.orphans:
            self.problem(f"{sum(self.orphans.values())} messages on channel(s) "
                         f"{', '.join(map(str, sorted(self.orphans)))} whose definition is lost")

    def _record(self, record):
        kind = type(record).__name__
        if kind == "Schema":
            known = self.schemas.get(record.id)
            if known is None:
                self.schemas[record.id] = record
                self.report.schemas += 1
                yield "schema", record
            elif (known.name, known.encoding, known.data) != (record.name, record.encoding, record.data):
                self.problem(f"schema {record.id} is defined twice, differently: the first kept")
        elif kind == "Channel":
            known = self.channels.get(record.id)
            if known is None:
                self.channels[record.id] = record
                self.report.channels += 1
                schema = self.schemas.get(record.schema_id)
                self.report.topics.setdefault(record.topic, schema.name if schema is not None else "")
                self.report.counts.setdefault(record.topic, 0)
                yield "channel", record
            elif (known.topic, known.schema_id, known.message_encoding) != (
                    record.topic, record.schema_id, record.message_encoding):
                self.problem(f"channel {record.id} is defined twice, differently: the first kept")
        else:
            channel = self.channels.get(record.channel_id)
            if channel is None:
                self.orphans[record.channel_id] = self.orphans.get(record.channel_id, 0) + 1
                return
            self.report.counts[channel.topic] += 1
            stamp = self._stamp(channel, record.data)
            if stamp is not None and stamp > self.report.last_stamps.get(channel.topic, -1):
                self.report.last_stamps[channel.topic] = stamp
            yield "message", record

    def _stamp(self, channel, data: bytes) -> Optional[int]:
        """The header stamp [ns] of a CDR message whose type (by its ros2msg schema) starts with a std_msgs/Header."""
        header = self.headers.get(channel.id)
        if header is None:
            schema = self.schemas.get(channel.schema_id)
            header = self.headers[channel.id] = schema is not None and _starts_with_header(schema)
        if not header or len(data) < 12:
            return None
        sec, nsec = struct.unpack_from("<iI" if data[1] & 1 else ">iI", data, 4)
        return sec * 1_000_000_000 + nsec

    def _split(self, data: bytes, where: str, cut: bool = False) -> Tuple[list, Optional[str]]:
        """The records of a chunk's data, up to the first broken one; (records, what was wrong or None).
        ``cut``: the data is a prefix (of a chunk cut off by the end of the file)."""
        from io import BytesIO

        from mcap.data_stream import ReadDataStream
        from mcap.opcode import Opcode
        from mcap.records import Channel, Message, Schema

        out, pos, n = [], 0, len(data)
        while pos < n:
            if n - pos < _RECORD_HEAD.size:
                return out, None if cut else f"{where} ends in the middle of a record header"
            opcode, length = _RECORD_HEAD.unpack_from(data, pos)
            end = pos + _RECORD_HEAD.size + length
            name = _opcode_name(opcode)
            if end > n:
                return out, None if cut else (f"{where}: its last record, a {name}, is cut off "
                                              f"({n - pos - _RECORD_HEAD.size} of {length} bytes)")
            stream = ReadDataStream(BytesIO(data[pos + _RECORD_HEAD.size:end]))
            try:
                if opcode == Opcode.MESSAGE:
                    if length < _MESSAGE_FIELDS:  # e.g. 0: the length of a record that was never finished
                        raise ValueError(f"length {length}, less than the {_MESSAGE_FIELDS} bytes of its fields")
                    out.append(Message.read(stream, length))
                elif opcode == Opcode.SCHEMA:
                    out.append(Schema.read(stream))
                elif opcode == Opcode.CHANNEL:
                    out.append(Channel.read(stream))
            except Exception as e:  # noqa: BLE001 - a broken record: nothing after it can be trusted
                return out, (f"{where}: a broken {name} record at offset {pos} of its data "
                             f"({type(e).__name__}: {e or 'runs past its end'}); the {n - pos} bytes from there on "
                             "are dropped")
            pos = end
        return out, None

    def _chunk(self, chunk, offset: int):
        from mcap.stream_reader import get_chunk_data_stream

        where = f"the chunk at byte {offset}"
        try:
            stream, length = get_chunk_data_stream(chunk, validate_crc=True)
            data = stream.read(length) if length else b""
        except Exception as e:  # noqa: BLE001 - cannot decompress, or the CRC does not match: all of it lost
            self.problem(f"{where} is unreadable ({type(e).__name__}: {e}): its messages are lost")
            return
        records, broken = self._split(data, where)
        if broken:
            self.problem(broken)
        for record in records:
            yield from self._record(record)

    def _tail(self, pos: int, size: int, error: Exception, in_summary: bool):
        """The record at ``pos`` that the library could not read: cut off by the end of the file (a chunk:
        what its bytes hold is recovered), or broken (then it and the rest of the file are dropped)."""
        from io import BytesIO

        from mcap.data_stream import ReadDataStream
        from mcap.opcode import Opcode

        self.f.seek(pos)
        rest = self.f.read()
        if not rest:
            return  # ended at a record boundary
        if len(rest) < _RECORD_HEAD.size:
            self.problem(f"the file ends in the middle of a record header (byte {pos}, {len(rest)} bytes)")
            return
        opcode, length = _RECORD_HEAD.unpack_from(rest)
        body = rest[_RECORD_HEAD.size:]
        name = _opcode_name(opcode)
        if length <= len(body):
            self.problem(f"the {name} record at byte {pos} is broken ({type(error).__name__}: {error}); it and the "
                         f"{size - pos} bytes after it are dropped")
            return
        if opcode != Opcode.CHUNK or in_summary:
            holds_data = opcode in (Opcode.MESSAGE, Opcode.SCHEMA, Opcode.CHANNEL, Opcode.METADATA,
                                    Opcode.ATTACHMENT) and not in_summary
            self.problem(f"the file ends in the middle of a {name} record (byte {pos}: {len(body)} of its "
                         f"{length} bytes)" + (": it is lost" if holds_data else ", which holds no messages"))
            return
        where = f"the last chunk, at byte {pos}, is cut off ({len(body)} of its {length} bytes)"
        stream = ReadDataStream(BytesIO(body))
        try:
            stream.read(8 + 8 + 8 + 4)  # message start and end time, uncompressed size and CRC
            compression = stream.read_prefixed_string()
            records_length = stream.read8()
        except Exception:  # noqa: BLE001 - cut inside the chunk's own header
            self.problem(f"{where}: its messages are lost")
            return
        present = body[stream.count:stream.count + records_length]
        from mcap import stream_reader as codecs  # the modules mcap decompresses with (None if missing)
        try:
            if compression == "zstd" and codecs.zstandard is not None:
                data = codecs.zstandard.ZstdDecompressor().decompressobj().decompress(present)
            elif compression == "lz4" and codecs.lz4 is not None:  # lz4.frame
                data = codecs.lz4.LZ4FrameDecompressor().decompress(present)
            elif compression == "":
                data = present
            else:
                raise ValueError(f"compression {compression!r} not supported here")
        except Exception as e:  # noqa: BLE001
            self.problem(f"{where}: it cannot be decompressed ({type(e).__name__}: {e}): its messages are lost")
            return
        self.report.chunks += 1
        records, broken = self._split(data, where, cut=True)
        before = self.report.message_count
        for record in records:
            yield from self._record(record)
        self.problem(f"{where}: {self.report.message_count - before} messages recovered from it, the rest of it "
                     "is lost" + (f" ({broken})" if broken else ""))


def _scan(path, report: FileReport):
    path = Path(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise NotMcapError(f"cannot open {path}: {e.strerror or e}") from e
    with f:
        yield from _Scan(f, report).records()


def read_messages(path, report: Optional[FileReport] = None):
    """``(schema, channel, message)`` of every complete message of an MCAP file, damaged or not, in file order
    (the mcap library's record classes; schema None when the channel has none). Damage is described in
    ``report.problems`` as it is met, never raised; :class:`NotMcapError` if the file is not MCAP at all."""
    report = report if report is not None else FileReport(Path(path))
    schemas, channels = {}, {}
    for kind, record in _scan(path, report):
        if kind == "schema":
            schemas[record.id] = record
        elif kind == "channel":
            channels[record.id] = record
        elif kind == "message":
            channel = channels[record.channel_id]
            yield schemas.get(channel.schema_id), channel, record


def check_file(path) -> FileReport:
    """Read an MCAP file back completely: with the tolerant stream pass above (every record, every chunk's CRC),
    then, if that found no damage, through its summary and index as ``mcap``'s ``make_reader`` does, whose
    statistics and message count must agree. ``report.problems`` is empty for an intact file;
    :class:`NotMcapError` if it is not MCAP at all."""
    report = FileReport(Path(path))
    for _ in _scan(path, report):
        pass
    if report.damaged:
        return report
    from mcap.reader import make_reader
    try:
        with open(path, "rb") as f:
            reader = make_reader(f)
            summary = reader.get_summary()
            if summary is None:
                report.problems.append("no summary (an unindexed file)")
                return report
            stated = summary.statistics.message_count if summary.statistics is not None else None
            indexed = sum(1 for _ in reader.iter_messages())
    except Exception as e:  # noqa: BLE001
        report.problems.append(f"its summary or index is unreadable ({type(e).__name__}: {e})")
        return report
    found = report.message_count
    if stated is not None and stated != found:
        report.problems.append(f"its statistics count {stated} messages, {found} are in the file")
    if indexed != found:
        report.problems.append(f"its index gives {indexed} messages, {found} are in the file")
    return report


def recover(source, target, *, compression: str = "zstd", chunk_size: int = 1 << 20) -> FileReport:
    """Write every complete message of ``source`` (damaged, unterminated or intact), with its schemas, channels
    (metadata included), metadata and attachment records, into a new, complete MCAP file ``target`` (same
    header profile; ids renumbered; file order kept), which ``make_reader`` and ``rosbags`` read. Returns the
    report of ``source`` (``problems``: what was dropped; ``counts``: what ``target`` holds). Raises
    :class:`NotMcapError` if ``source`` is not MCAP, ``ValueError`` if both are the same file."""
    from mbs_ros import __version__

    source, target = Path(source), Path(target)
    if compression not in COMPRESSION:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSION)}, got {compression!r}")
    if target.exists() and source.exists() and os.path.samefile(source, target):
        raise ValueError(f"{target} is the damaged file itself: write the recovered file elsewhere")
    report = FileReport(source)
    schema_ids, channel_ids = {0: 0}, {}
    tmp = target.with_name(f".{target.name}.recovering-{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            w = McapWriter(out, chunk_size=chunk_size, compression=COMPRESSION[compression])
            for kind, r in _scan(source, report):
                if kind == "header":
                    w.start(profile=r.profile, library=f"mbs_ros.recording recover/{__version__} of [{r.library}]; "
                                                       f"{LIBRARY_IDENTIFIER}")
                elif kind == "schema":
                    schema_ids[r.id] = w.register_schema(name=r.name, encoding=r.encoding, data=r.data)
                elif kind == "channel":
                    channel_ids[r.id] = w.register_channel(topic=r.topic, message_encoding=r.message_encoding,
                                                           schema_id=schema_ids.get(r.schema_id, 0),
                                                           metadata=dict(r.metadata))
                elif kind == "message":
                    w.add_message(channel_id=channel_ids[r.channel_id], log_time=r.log_time, data=r.data,
                                  publish_time=r.publish_time, sequence=r.sequence)
                elif kind == "metadata":
                    w.add_metadata(name=r.name, data=dict(r.metadata))
                elif kind == "attachment":
                    w.add_attachment(create_time=r.create_time, log_time=r.log_time, name=r.name,
                                     media_type=r.media_type, data=r.data)
            w.finish()
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return report


# ----------------------------------------------------------------------------------------------- CLI

def _topic_argument(text: str) -> Tuple[str, Optional[str]]:
    name, _, type_name = text.partition(":")  # ':' never occurs in ROS names
    if not name:
        raise argparse.ArgumentTypeError(f"empty topic name in {text!r}")
    return name, (type_name or None)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mbs_ros.recording",
        description="Record ROS 2 topics into a rosbag2-compatible MCAP file (ros2 profile, cdr messages, "
                    "ros2msg schemas) until Ctrl-C, SIGTERM or --duration (stop now), or SIGUSR2 (finish: up to "
                    "--end-time on the --end-topics). ROS arguments go after --ros-args.",
        epilog="Reading back: `python -m mbs_ros.recording check FILE` (messages per topic, damage) and "
               "`python -m mbs_ros.recording recover DAMAGED OUT` (every complete message into a complete file).")
    p.add_argument("output", help="the .mcap file to write (overwritten)")
    p.add_argument("--topics", nargs="+", type=_topic_argument, default=[], metavar="TOPIC[:TYPE]",
                   help="topics to record, e.g. /robot1/odom or /robot1/odom:nav_msgs/msg/Odometry; "
                        "recorded as soon as they appear")
    p.add_argument("-a", "--all", action="store_true", help="record every topic that appears")
    p.add_argument("--include-hidden", action="store_true", help="with --all: hidden topics too")
    p.add_argument("--exclude", action="append", default=[], metavar="REGEX",
                   help="with --all: skip topics matching this regular expression (repeatable)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--end-time", type=float, default=None, metavar="S",
                   help="the run ends at simulation time S [s]: asked to finish (SIGUSR2), keep recording until each "
                        "of --end-topics has delivered its message stamped S (or later), then write what the "
                        "subscriptions hold and close")
    p.add_argument("--end-topics", nargs="+", default=[], metavar="TOPIC",
                   help="with --end-time: the topics (each a type with a Header, e.g. the robots' odom and "
                        "joint_states) whose message stamped S ends the recording")
    p.add_argument("--finish-timeout", type=float, default=60.0, metavar="S",
                   help="finishing waits at most S seconds for the --end-topics (default 60), then closes with a "
                        "warning naming what is missing")
    p.add_argument("--compression", choices=sorted(COMPRESSION), default="zstd", help="chunk compression")
    p.add_argument("--chunk-size", type=int, default=1 << 20, metavar="BYTES", help="chunk size (default 1 MiB)")
    p.add_argument("--flush-period", type=float, default=1.0, metavar="S",
                   help="close a chunk (and write it to disk) at least this often (default 1 s)")
    p.add_argument("--discovery-period", type=float, default=0.5, metavar="S",
                   help="how often the graph is polled for new topics")
    return p


def _file_parser(command: str) -> argparse.ArgumentParser:
    if command == "recover":
        p = argparse.ArgumentParser(
            prog="python -m mbs_ros.recording recover",
            description="Recover every complete message (with its schemas and channels) of a damaged or unclosed "
                        "MCAP file (a recorder killed, a truncated copy) into a new, complete MCAP file that "
                        "ros2 bag, mcap and rosbags read; prints what was recovered and what was lost. Exit code "
                        "0 when a file was written, 2 when the input is not MCAP.")
        p.add_argument("input", help="the damaged .mcap file (not modified)")
        p.add_argument("output", help="the .mcap file to write (replaced)")
        p.add_argument("--compression", choices=sorted(COMPRESSION), default="zstd", help="chunk compression")
    else:
        p = argparse.ArgumentParser(
            prog="python -m mbs_ros.recording check",
            description="Read an MCAP file back completely (every record and chunk CRC, then its summary and "
                        "index) and print its messages per topic and any damage. Exit code 0 when intact, 1 when "
                        "damaged (recover it with `python -m mbs_ros.recording recover`), 2 when not MCAP.")
        p.add_argument("input", help="the .mcap file")
    return p


def _file_command(command: str, argv: Sequence[str]) -> int:
    args = _file_parser(command).parse_args(argv)
    try:
        if command == "check":
            report = check_file(args.input)
        else:
            report = recover(args.input, args.output, compression=args.compression)
    except (NotMcapError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    topics = f"{report.message_count} messages on {len(report.counts)} topics"
    if command == "check":
        print(f"{args.input}: {topics}: {report.describe()}{report.counts_text()}")
        if report.damaged:
            print(f"recover it: python -m mbs_ros.recording recover {args.input} OUT.mcap", file=sys.stderr)
        return 1 if report.damaged else 0
    print(f"recovered {topics} ({report.schemas} schemas, {report.channels} channels) from {args.input} into "
          f"{args.output}{report.counts_text()}")
    for problem in report.problems:
        print(f"lost or damaged: {problem}")
    if not report.damaged:
        print(f"{args.input} was intact: {args.output} holds the same messages")
    return 0


def _seconds(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _newest_text(short: Dict[str, Optional[int]]) -> str:
    """``/a/odom (newest 2.310000000 s), /a/joint_states (none)``."""
    return ", ".join(f"{t} ({'none' if n is None else 'newest ' + _seconds(n) + ' s'})" for t, n in short.items())


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from mbs_ros.process import dump_stacks_on_sigusr1

    dump_stacks_on_sigusr1()
    if len(argv) > 1 and argv[1] in ("recover", "check"):  # no ROS needed for these
        return _file_command(argv[1], argv[2:])

    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import remove_ros_args

    args = _parser().parse_args(remove_ros_args(argv)[1:])
    if not args.topics and not args.all:
        _parser().error("give --topics or --all")
    if args.duration is not None and args.duration <= 0:
        _parser().error("--duration must be > 0")
    if (args.end_time is None) != (not args.end_topics):
        _parser().error("--end-time and --end-topics go together")
    if args.end_time is not None and not 0.0 <= args.end_time < 9.2e9:
        _parser().error("--end-time must be a simulation time in [0, 9.2e9) s")
    if not args.finish_timeout > 0:
        _parser().error("--finish-timeout must be > 0")

    # SIGINT and SIGTERM (stop now) and SIGUSR2 (finish) only set a flag that the spin loop reads. Neither rclpy's
    # handlers (SIGINT would then also raise KeyboardInterrupt wherever the main thread is, a subscription callback
    # included) nor Python's default: an exception raised in the middle of a write would leave a half-written record
    # in the chunk that closing the file then writes out. A stop signal while finishing ends the finishing; one
    # while the file is being completed is ignored alike.
    stop: list = []
    finish: list = []

    def on_signal(signum, _frame) -> None:
        stop.append(signum)  # nothing that could raise or block

    def on_finish(signum, _frame) -> None:
        finish.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGUSR2] = signal.signal(signal.SIGUSR2, on_finish)
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("mbs_recorder")
    recorder = None
    done = threading.Event()
    end_topics = [node.resolve_topic_name(t) for t in args.end_topics]
    end_ns = None if args.end_time is None else int(round(args.end_time * 1e9))
    finishing = None  # monotonic deadline once asked to finish
    try:
        requested = {node.resolve_topic_name(name) for name, _type in args.topics}
        unknown = [t for t in end_topics if not args.all and t not in requested]
        if unknown:
            _parser().error(f"--end-topics {' '.join(unknown)}: not among the --topics recorded")
        recorder = Recorder(node, args.output, dict(args.topics), all_topics=args.all, exclude=args.exclude,
                            include_hidden=args.include_hidden, compression=args.compression,
                            chunk_size=args.chunk_size, flush_period=args.flush_period,
                            discovery_period=args.discovery_period)
        what = "all topics" if args.all else " ".join(recorder.requested)
        node.get_logger().info(f"recording {what} into {recorder.path}")
        if args.duration is not None:
            node.create_timer(args.duration, done.set)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop and not done.is_set() and rclpy.ok():
            if finish and finishing is None:
                finishing = time.monotonic() + args.finish_timeout
                node.get_logger().info(
                    "finishing: " + (f"recording until {', '.join(end_topics)} each delivered its message stamped "
                                     f"{_seconds(end_ns)} s" if end_ns is not None else "no --end-time"))
            if finishing is not None:
                short = recorder.short_of(end_ns, end_topics) if end_ns is not None else {}
                if not short:
                    break
                if time.monotonic() > finishing:
                    node.get_logger().warning(
                        f"finishing gave up after {args.finish_timeout:g} s: no message stamped {_seconds(end_ns)} s "
                        f"yet on {_newest_text(short)}; the recording ends short of the run's end")
                    break
            try:
                executor.spin_once(timeout_sec=0.1)
            except ExternalShutdownException:
                break
    finally:
        try:
            if recorder is not None:
                taken = recorder.take_queued()  # what has arrived and was not taken yet, whatever ended the loop
                if finishing is not None:
                    short = recorder.short_of(end_ns, end_topics) if end_ns is not None else {}
                    if stop and short:
                        node.get_logger().warning(
                            f"stopped by {signal.Signals(stop[0]).name} while finishing: no message stamped "
                            f"{_seconds(end_ns)} s on {_newest_text(short)}")
                    elif not short:
                        node.get_logger().info(
                            "finished: " + (f"every end topic delivered its message stamped {_seconds(end_ns)} s; "
                                            if end_ns is not None else "") + f"{taken} queued messages written")
                recorder.close()
                counts = recorder.counts
                lines = "".join(f"\n  {t}: {n}" for t, n in sorted(counts.items()))
                missing = f"\n  never seen: {' '.join(recorder.missing)}" if recorder.missing else ""
                print(f"wrote {sum(counts.values())} messages on {len(counts)} topics to {recorder.path}"
                      f"{lines}{missing}", flush=True)
            from mbs_ros.process import TeardownGuard

            guard = TeardownGuard(node.get_logger().name, 0)  # a middleware hang cannot keep the process alive
            node.destroy_node()
            rclpy.try_shutdown()
            guard.done()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
