"""The file of a recording, written by one thread of its own (:class:`BagWriter`): topics, then raw CDR messages,
as rosbag2 writes MCAP (docs/recording.md)."""

from __future__ import annotations

import atexit
import os
import queue
import struct
import threading
import time
import weakref
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

from mcap.writer import LIBRARY_IDENTIFIER
from mcap.writer import Writer as McapWriter

from mbs_ros.recording.definitions import DefinitionNotFound, _normalise_type, message_definition, qos_profiles_yaml
from mbs_ros.analysis.mcapfile import COMPRESSION

PROFILE = "ros2"
MESSAGE_ENCODING = "cdr"

_OPEN: "weakref.WeakSet[BagWriter]" = weakref.WeakSet()


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
