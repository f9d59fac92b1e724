"""The recorder: topics of the ROS graph, discovered and subscribed through a node, into a :class:`BagWriter`
(:class:`Recorder` on a node the program spins, :class:`BackgroundRecorder` on a thread of its own)."""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from typing import Dict, Iterable, Mapping, Optional, Union

from mbs_ros.recording.definitions import UnknownMessageType, _normalise_type, message_class
from mbs_ros.recording.writer import BagWriter, _header_stamp_reader


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
