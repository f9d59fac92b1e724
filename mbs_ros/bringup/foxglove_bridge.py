"""A live view without RViz: ROS 2 topics served over the Foxglove WebSocket protocol (Foxglove, Lichtblick).

``python -m mbs_ros.bringup.foxglove_bridge --topics T... | --all [--port 8765] [--host 127.0.0.1]``; the runner
starts it with ``--foxglove``. Messages are forwarded as raw CDR under the ``ros2msg`` schemas rosbag2 writes
(:func:`mbs_ros.recording.message_definition`), so Foxglove decodes them as it decodes a recording; ROS
subscriptions follow the clients'. Clients speaking the protocol under its former name ``foxglove.websocket.v1``
(Lichtblick before December 2025) are served too, through :class:`SubprotocolFront`. Channels, QoS, time, assets and
clients: docs/bringup.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import queue
import re
import signal
import struct
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from mbs_ros.cores.ratelimit import RateLimitedLog

__all__ = ["Bridge", "FOXGLOVE_TOPICS", "DEFAULT_PORT", "SUBPROTOCOL", "LEGACY_SUBPROTOCOL", "SubprotocolFront",
           "foxglove_topics", "main"]

DEFAULT_PORT = 8765
SUBPROTOCOL = "foxglove.sdk.v1"
#: the same protocol under its former name, all a client offers in Lichtblick before December 2025 and older
#: Foxglove releases; the foxglove-sdk server refuses it (HTTP 400), :class:`SubprotocolFront` renames it
LEGACY_SUBPROTOCOL = "foxglove.websocket.v1"
#: what the runner serves for each robot (relative names) and globally: the 3D view (TF, the URDF, markers), the
#: plots (odom, joint_states, energy) and /diagnostics; /clock is added for sim_time scenarios.
FOXGLOVE_TOPICS = ("robot_description", "markers", "odom", "joint_states", "energy", "/tf", "/tf_static",
                   "/diagnostics")
_EXCLUDED_BY_ALL = re.compile(r"^/(rosout|parameter_events)$")


def foxglove_topics(scenario) -> List[str]:
    """Absolute topic names the runner's bridge serves for a scenario: :data:`FOXGLOVE_TOPICS` in every robot's
    namespace, plus ``/clock`` with ``sim_time``, plus each robot's sensor topics (its layout plots them) and, with a
    contact world, its contact topics (:func:`~mbs_ros.bringup.foxglove_layout.contact_topics`)."""
    from mbs_ros.bringup.foxglove_layout import contact_topics, sensor_topics
    from mbs_ros.scenario.schema import record_topics

    topics = record_topics(scenario, FOXGLOVE_TOPICS)
    extra = [t for r in scenario.robots for t in sensor_topics(r, scenario.physics_rate) + contact_topics(r)]
    return topics + [t for t in dict.fromkeys(extra) if t not in topics]


# ------------------------------------------------------------------------------------------ front

def _rename_offer(head: bytes) -> Tuple[bytes, bool]:
    """An HTTP upgrade request whose Sec-WebSocket-Protocol offers :data:`LEGACY_SUBPROTOCOL` but not
    :data:`SUBPROTOCOL`, rewritten to offer :data:`SUBPROTOCOL` only; any other request unchanged. True if renamed."""
    lines = head.decode("latin-1").split("\r\n")
    protocol = [i for i, line in enumerate(lines)
                if i > 0 and line.partition(":")[0].strip().lower() == "sec-websocket-protocol"]
    offered = {t.strip() for i in protocol for t in lines[i].partition(":")[2].split(",")}
    if SUBPROTOCOL in offered or LEGACY_SUBPROTOCOL not in offered:
        return head, False
    kept = [line for i, line in enumerate(lines) if i not in protocol]
    kept.insert(1, f"Sec-WebSocket-Protocol: {SUBPROTOCOL}")
    return "\r\n".join(kept).encode("latin-1"), True


def _rename_choice(head: bytes) -> bytes:
    """The server's HTTP response with its choice :data:`SUBPROTOCOL` written as :data:`LEGACY_SUBPROTOCOL` (a
    client accepts only a subprotocol it offered)."""
    lines = head.decode("latin-1").split("\r\n")
    for i, line in enumerate(lines):
        name, _, value = line.partition(":")
        if name.strip().lower() == "sec-websocket-protocol" and value.strip() == SUBPROTOCOL:
            lines[i] = f"{name}: {LEGACY_SUBPROTOCOL}"
    return "\r\n".join(lines).encode("latin-1")


class SubprotocolFront:
    """The bridge's listening socket, in front of the foxglove-sdk server (which listens on loopback only).

    Every connection is passed on byte for byte, with one exception in its HTTP upgrade: a client that offers
    only :data:`LEGACY_SUBPROTOCOL` (the protocol's former name: the messages are the same, the SDK just refuses
    the name) gets its offer rewritten to :data:`SUBPROTOCOL` and the server's answer back. The WebSocket frames
    themselves are never read. Bounded: ``max_connections`` at a time (more are closed at once), an upgrade
    header of at most ``header_limit`` bytes that must arrive within ``handshake_timeout`` s. One asyncio thread."""

    def __init__(self, host: str, port: int, backend_port: int, logs: RateLimitedLog, *, max_connections: int = 64,
                 handshake_timeout: float = 10.0, header_limit: int = 65536):
        self.backend_port = int(backend_port)
        self.logs = logs
        self.max_connections = int(max_connections)
        self.handshake_timeout = float(handshake_timeout)
        self.header_limit = int(header_limit)
        self.connections = 0  # open now
        self.renamed = 0  # connections served under the old name so far
        self._tasks: Set[asyncio.Task] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="foxglove-front", daemon=True)
        self._thread.start()
        start = asyncio.start_server(self._serve, host, port, limit=self.header_limit)
        try:
            self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(timeout=30.0)
        except BaseException as e:
            self._stop_loop()
            raise RuntimeError(str(e)) from e
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if self.connections >= self.max_connections:
            self.logs.warning("front.full", f"refusing a connection: {self.max_connections} open already")
            writer.close()
            return
        self.connections += 1
        self._tasks.add(task)
        upstream, pipes = None, set()
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.handshake_timeout)
            head, renamed = _rename_offer(head)
            up_reader, upstream = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.backend_port, limit=self.header_limit),
                self.handshake_timeout)
            upstream.write(head)
            if renamed:
                answer = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), self.handshake_timeout)
                writer.write(_rename_choice(answer))
                self.renamed += 1
                self.logs.info_once("front.renamed", f"a client speaking {LEGACY_SUBPROTOCOL} connected: served as "
                                                     f"{SUBPROTOCOL} (the same protocol, renamed)")
            pipes.update((asyncio.ensure_future(self._pipe(reader, upstream)),
                          asyncio.ensure_future(self._pipe(up_reader, writer))))
            done, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            if pending and all(d.result() for d in done):  # one side has ended: the other gets time to end too
                await asyncio.wait(pending, timeout=self.handshake_timeout)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                OSError):
            pass  # a client that went away, sent no upgrade in time or too long a one: closed, nothing to report
        finally:
            for p in pipes:
                p.cancel()
            for w in (writer, upstream):
                if w is not None:
                    w.close()
            await asyncio.gather(*pipes, return_exceptions=True)
            self.connections -= 1
            self._tasks.discard(task)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> bool:
        """Copy until the end of ``src``, then pass the end on; False if either side failed."""
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
            return True
        except OSError:
            return False

    async def _shutdown(self) -> None:
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=2.0)
        if not self._thread.is_alive():
            self._loop.close()

    def close(self) -> None:
        """Stop listening and close every connection (within a second or two)."""
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=2.0)
        except Exception:  # noqa: BLE001 - stopping anyway
            pass
        finally:
            self._stop_loop()


class RefusedAssets:
    """What the bridge keeps of refused asset requests: a count, the last ``remember`` distinct URIs (as hashes,
    so a long URI costs nothing) and a log line per new URI among the first ``log_first`` ones, then at most one
    every ``logs.period`` s (with how many were not logged). A client asking again for the same missing mesh is
    not logged again while its URI is remembered. Called from the SDK's threads."""

    def __init__(self, logs: RateLimitedLog, remember: int = 256, log_first: int = 16):
        self.logs = logs
        self.remember = int(remember)
        self.log_first = int(log_first)
        self.count = 0  # requests refused
        self.distinct = 0  # of which for a URI not remembered at that moment
        self.recent: "OrderedDict[int, None]" = OrderedDict()
        self._lock = threading.Lock()

    def refuse(self, uri: str) -> None:
        with self._lock:
            self.count += 1
            key = hash(uri)
            if key in self.recent:
                self.recent.move_to_end(key)
                return
            self.recent[key] = None
            if len(self.recent) > self.remember:
                self.recent.popitem(last=False)
            self.distinct += 1
            shown = repr(uri[:200]) + ("…" if len(uri) > 200 else "")
            text = f"asset {shown} not served (package:// files in a package's share directory only)"
            if self.distinct <= self.log_first:
                self.logs.logger.warning(text)
            else:
                self.logs.warning("asset.refused", text)


# ------------------------------------------------------------------------------------------------ bridge

@dataclass
class _Topic:
    name: str
    type_name: str
    channel: object  # foxglove.Channel
    qos: object
    msg_class: object
    latched: bool  # transient local: always subscribed, the last message per publisher kept and replayed
    always: bool  # subscribed whether or not a client listens
    subscription: object = None
    clients: Set[int] = field(default_factory=set)
    cache: Dict[bytes, bytes] = field(default_factory=dict)  # publisher gid -> last message (latched topics)
    count: int = 0


class Bridge:
    """Serves topics of the ROS graph, through ``node``, over the Foxglove WebSocket protocol (see the module
    docstring). Spinning ``node`` drives it (discovery, messages, subscription changes); :meth:`close` stops the
    server. ``topics``: absolute or relative names (resolved in the node's namespace); ``all_topics``: every
    topic but hidden ones, /rosout and /parameter_events."""

    def __init__(self, node, topics: Sequence[str] = (), *, all_topics: bool = False, host: str = "127.0.0.1",
                 port: int = DEFAULT_PORT, name: str = "mbs_ros", discovery_period: float = 0.5, depth: int = 10):
        import foxglove
        from foxglove.websocket import Capability

        self.node = node
        self.requested = {node.resolve_topic_name(t) for t in topics}
        if not self.requested and not all_topics:
            raise ValueError("nothing to serve: give topics or all_topics=True")
        self.all_topics = all_topics
        self.depth = int(depth)
        self.sim_time = bool(node.get_parameter("use_sim_time").value)
        self.topics: Dict[str, _Topic] = {}
        self._by_channel: Dict[int, _Topic] = {}
        self._skipped: Set[str] = set()
        self._lock = threading.Lock()
        self._requests: "queue.SimpleQueue" = queue.SimpleQueue()
        self._clock = node.get_clock()
        self.refused_assets = RefusedAssets(RateLimitedLog(node.get_logger()))
        self._time_sent = (0, -1.0)  # (simulation time, monotonic wall time) of the last time message
        self._context = foxglove.Context()
        self._guard = node.create_guard_condition(self._apply_requests)
        capabilities = [Capability.Time] if self.sim_time else []
        self.server = foxglove.start_server(name=name, host="127.0.0.1", port=0, capabilities=capabilities,
                                            server_listener=self, asset_handler=self._asset,
                                            context=self._context)
        try:  # clients connect here: both names of the protocol (SubprotocolFront)
            self.front = SubprotocolFront(host, port, self.server.port, RateLimitedLog(node.get_logger()))
        except RuntimeError:
            self.server.stop()
            raise
        self.port = self.front.port
        self._timer = node.create_timer(discovery_period, self.discover)
        self.discover()

    # ------------------------------------------------------------------------- queries (any thread)
    @property
    def advertised(self) -> Dict[str, str]:
        """topic -> type of the channels advertised so far."""
        with self._lock:
            return {t.name: t.type_name for t in self.topics.values()}

    @property
    def missing(self) -> List[str]:
        with self._lock:
            return sorted(self.requested - set(self.topics) - self._skipped)

    # ------------------------------------------------------------------------- discovery (executor thread)
    def discover(self) -> None:
        from mbs_ros.recording import UnknownMessageType, message_class

        for name, types in self.node.get_topic_names_and_types():
            if name in self.topics or name in self._skipped:
                continue
            if name not in self.requested and not (
                    self.all_topics and not any(p.startswith("_") for p in name.split("/"))
                    and not _EXCLUDED_BY_ALL.match(name)):
                continue
            type_name = types[0]
            try:
                msg_class = message_class(type_name)
            except UnknownMessageType as e:
                self._skip(name, f"not serving {name}: unknown message type {type_name} ({e})")
                continue
            infos = self.node.get_publishers_info_by_topic(name)
            if infos:  # only subscribers so far: wait for a publisher, whose QoS decides ours
                self._advertise(name, type_name, msg_class, infos)
        if not self.all_topics and not self.missing:
            self._timer.cancel()

    def _skip(self, name: str, why: str) -> None:
        self._skipped.add(name)
        self.node.get_logger().warning(why)

    def _advertise(self, name: str, type_name: str, msg_class, infos) -> None:
        from foxglove import Channel, Schema
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        from mbs_ros.recording import DefinitionNotFound, message_definition

        try:
            encoding, text = message_definition(type_name)
        except DefinitionNotFound as e:
            self._skip(name, f"not serving {name}: no message definition for {type_name} ({e}); Foxglove cannot "
                             "decode CDR without one")
            return
        offered = [i.qos_profile for i in infos]
        reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
        latched = all(q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.depth,
                         reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
        channel = Channel(name, schema=Schema(name=type_name, encoding=encoding, data=text.encode("utf-8")),
                          message_encoding="cdr", context=self._context)
        t = _Topic(name=name, type_name=type_name, channel=channel, qos=qos, msg_class=msg_class, latched=latched,
                   always=latched or (self.sim_time and name == "/clock"))
        with self._lock:
            self.topics[name] = t
            self._by_channel[channel.id()] = t
        self.node.get_logger().info(f"advertising {name} ({type_name}, {encoding}, "
                                    f"{'transient local' if latched else 'volatile'})")
        if t.always:
            self._subscribe(t)

    # ------------------------------------------------------------------ subscriptions (executor thread)
    def _subscribe(self, t: _Topic) -> None:
        if t.subscription is None:
            t.subscription = self.node.create_subscription(t.msg_class, t.name, functools.partial(self._on_message, t),
                                                           t.qos, raw=True)

    def _unsubscribe(self, t: _Topic) -> None:
        if t.subscription is not None:
            self.node.destroy_subscription(t.subscription)
            t.subscription = None

    def _apply_requests(self) -> None:
        """The guard condition's callback: subscribe/unsubscribe as the clients' subscriptions changed."""
        while True:
            try:
                t = self._requests.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                wanted = bool(t.clients) or t.always
            if wanted:
                self._subscribe(t)
            else:
                self._unsubscribe(t)

    def _on_message(self, t: _Topic, data: bytes, info) -> None:
        now = self._clock.now().nanoseconds
        data = bytes(data)
        if t.latched:
            gid = info.get("publisher_gid") if isinstance(info, dict) else None
            key = bytes(gid.get("data", b"")) if isinstance(gid, dict) else b""
            with self._lock:
                t.cache[key] = data
        t.count += 1
        t.channel.log(data, log_time=now)
        if self.sim_time and t.name == "/clock" and len(data) >= 12:
            sec, nsec = struct.unpack_from("<iI" if data[1] & 1 else ">iI", data, 4)
            stamp, wall = sec * 1_000_000_000 + nsec, time.monotonic()
            # at most 50 time messages a second (/clock can come every physics step), any jump back at once
            if wall - self._time_sent[1] >= 0.02 or stamp < self._time_sent[0]:
                self._time_sent = (stamp, wall)
                self.server.broadcast_time(stamp)

    # ------------------------------------------------------------------ server listener (SDK threads)
    def on_subscribe(self, client, channel) -> None:
        with self._lock:
            t = self._by_channel.get(channel.id)
            if t is None:
                return
            t.clients.add(client.id)
            replay = list(t.cache.values()) if t.latched else []
        now = self._clock.now().nanoseconds
        for data in replay:  # the protocol has no latching: this client gets the last message of each publisher
            t.channel.log(data, log_time=now)
        self._requests.put(t)
        self._guard.trigger()

    def on_unsubscribe(self, client, channel) -> None:
        with self._lock:
            t = self._by_channel.get(channel.id)
            if t is None:
                return
            t.clients.discard(client.id)
        self._requests.put(t)
        self._guard.trigger()

    def _asset(self, uri: str) -> Optional[bytes]:
        """A client's fetchAsset: ``package://PKG/PATH`` from PKG's share directory, nothing outside it."""
        from mbs_ros.packages import share_directory

        path = None
        if uri.startswith("package://"):
            package, _, rel = uri[len("package://"):].partition("/")
            share = share_directory(package)[0] if package and rel else None
            if share is not None:  # lexically inside the share directory (whose files may be symlinks: colcon's
                root = os.path.normpath(share)  # --symlink-install), no ".." out of it
                candidate = os.path.normpath(os.path.join(root, rel))
                if candidate.startswith(root + os.sep) and os.path.isfile(candidate):
                    path = candidate
        if path is None:
            self.refused_assets.refuse(uri)
            return None
        with open(path, "rb") as f:
            return f.read()

    # ------------------------------------------------------------------------------------ end
    def close(self) -> None:
        try:
            self.front.close()
            self.server.stop()
        finally:
            self._timer.cancel()
            with self._lock:
                topics = list(self.topics.values())
            for t in topics:
                try:
                    self._unsubscribe(t)
                    t.channel.close()
                except Exception:  # noqa: BLE001 - the node may be gone already
                    pass


# ----------------------------------------------------------------------------------------------- CLI

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mbs_ros.bringup.foxglove_bridge",
                                description="Serve ROS 2 topics over the Foxglove WebSocket protocol (Foxglove, "
                                            "Lichtblick): a live view without RViz. ROS arguments after --ros-args.")
    p.add_argument("--topics", nargs="+", default=[], metavar="TOPIC", help="topics to serve")
    p.add_argument("--all", action="store_true", help="every topic (not hidden ones, /rosout, /parameter_events)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any free "
                                                                  "port, logged)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--discovery-period", type=float, default=0.5, metavar="S",
                   help="how often the ROS graph is polled for the topics (default 0.5 s)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from mbs_ros.process import dump_stacks_on_sigusr1

    dump_stacks_on_sigusr1()
    try:
        import foxglove  # noqa: F401
    except ImportError as e:
        print(f"foxglove_bridge: error: the foxglove-sdk package is not installed ({e}); `make setup` installs it "
              "(requirements.txt), or: pip install foxglove-sdk", file=sys.stderr, flush=True)
        return 2
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import remove_ros_args

    parser = _parser()
    args = parser.parse_args(remove_ros_args(argv)[1:])
    if not args.topics and not args.all:
        parser.error("give --topics or --all")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be in 0..65535")
    if not args.discovery_period > 0:
        parser.error("--discovery-period must be > 0")

    stop: list = []

    def on_signal(signum, _frame) -> None:
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("foxglove_bridge")
    bridge = None
    try:
        try:
            bridge = Bridge(node, args.topics, all_topics=args.all, host=args.host, port=args.port,
                            discovery_period=args.discovery_period)
        except RuntimeError as e:  # the SDK's error, e.g. the port is in use
            node.get_logger().error(f"cannot serve on {args.host}:{args.port}: {e}")
            return 1
        what = "all topics" if args.all else " ".join(sorted(bridge.requested))
        node.get_logger().info(f"serving ws://{args.host}:{bridge.port} (WebSocket subprotocol {SUBPROTOCOL} or "
                               f"{LEGACY_SUBPROTOCOL}"
                               f"{', simulation time' if bridge.sim_time else ''}): {what}")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop and rclpy.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except ExternalShutdownException:
                break
    finally:
        try:
            if stop:
                node.get_logger().info(f"stopping on {signal.Signals(stop[0]).name}")
            if bridge is not None:
                bridge.close()
                counts = {t.name: t.count for t in bridge.topics.values()}
                lines = "".join(f"\n  {k}: {v}" for k, v in sorted(counts.items()))
                print(f"forwarded {sum(counts.values())} messages on {len(counts)} topics{lines}", flush=True)
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
