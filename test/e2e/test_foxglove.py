"""Foxglove: the live bridge (mbs_ros.bringup.foxglove_bridge) seen by a WebSocket client, our MCAP recordings
against the rules Foxglove reads ROS 2 schemas by (mbs_ros.foxglove_schemas), and the shipped layouts.

One module fixture runs the vehicle scenario's dynamics node (its own parameters, plus /clock), the bridge (port 0,
simulation time) and the recorder on the bridge's topics, as real processes. The test side is a plain ``websockets``
client speaking ``foxglove.sdk.v1`` (or only ``foxglove.websocket.v1``, the protocol's former name): what Foxglove or
Lichtblick does when it connects. Every wait is for a log line,
a protocol message or a graph change, with a generous deadline (a busy 2-core machine).
"""

from __future__ import annotations

import array
import json
import math
import re
import signal
import struct
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
pytest.importorskip("mbs_ros_msgs.msg", reason="mbs_ros_msgs not built into this environment yet")
pytest.importorskip("foxglove", reason="foxglove-sdk is not installed (requirements.txt; `make setup`)")
ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed (requirements-dev.txt)")

from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402

from mbs_ros.bringup import load_scenario, node_specs  # noqa: E402
from mbs_ros.bringup import foxglove_layout  # noqa: E402
from mbs_ros.bringup.foxglove_bridge import (  # noqa: E402
    LEGACY_SUBPROTOCOL,
    SUBPROTOCOL,
    RefusedAssets,
    SubprotocolFront,
    foxglove_topics,
)
from mbs_ros.foxglove_schemas import (  # noqa: E402
    SchemaError,
    check_channel_schema,
    check_mcap,
    decode_cdr,
    parse_ros2msg,
)
from mbs_ros.cores.ratelimit import RateLimitedLog  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from mbs_ros.recording import message_class, message_definition, read_messages  # noqa: E402
from ros_helpers import Probe, poll_until, ros_env_defaults  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 90.0  # s: start-up of three processes and DDS discovery on a loaded 2-core machine
SCENARIO = "vehicle"
EXPECTED_TYPES = {"robot_description": "std_msgs/msg/String", "markers": "visualization_msgs/msg/MarkerArray",
                  "odom": "nav_msgs/msg/Odometry", "joint_states": "sensor_msgs/msg/JointState",
                  "energy": "mbs_ros_msgs/msg/EnergyPorts", "/tf": "tf2_msgs/msg/TFMessage",
                  "/tf_static": "tf2_msgs/msg/TFMessage", "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
                  "/clock": "rosgraph_msgs/msg/Clock"}
SEPARATOR = "=" * 80


# ------------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The vehicle's dynamics node, the bridge and a recorder on the bridge's topics; yields the port, the
    processes, the topics and the recording's path (the recorder is stopped by test_recording_*)."""
    ros_env_defaults()
    tmp = tmp_path_factory.mktemp("foxglove")
    scenario = load_scenario(SCENARIO)
    spec = next(s for s in node_specs(scenario) if s.role == "dynamics")
    params = tmp / "dynamics.params.yaml"
    params.write_text(spec.params_yaml())
    ns = spec.namespace
    topics = foxglove_topics(scenario) + ["/clock"]
    dynamics = NodeProcess("mbs_ros.nodes.dynamics_node", name=spec.name, namespace=ns, params_file=params,
                           # no controller here: the vehicle's parameters wait for a first command otherwise
                           parameters=dict(publish_clock=True, energy_rate=20.0, markers_rate=10.0,
                                           wait_for_command=False),
                           log_file=tmp / "dynamics.log")
    bridge = NodeProcess("mbs_ros.bringup.foxglove_bridge", name="foxglove_bridge", args=["--port", "0", "--topics",
                                                                                         *topics],
                         parameters=dict(use_sim_time=True), log_file=tmp / "bridge.log")
    recording = tmp / "run.mcap"
    recorder = NodeProcess("mbs_ros.recording", name="recorder", args=[str(recording), "--topics", *topics],
                           log_file=tmp / "recorder.log")
    procs = [dynamics, bridge, recorder]
    try:
        for p in procs:
            p.start()
        assert bridge.wait_for_log(r"serving ws://[^:]+:(\d+)", timeout=TIMEOUT, regex=True), bridge.log_tail()
        port = int(re.search(r"serving ws://[^:]+:(\d+)", bridge.log_text()).group(1))
        yield dict(port=port, ns=ns, topics=topics, procs=procs, bridge=bridge, recorder=recorder,
                   dynamics=dynamics, recording=recording, scenario=scenario)
    finally:
        for p in procs:
            p.stop()


class Client:
    """A Foxglove WebSocket client: server info, channels as advertised, messages per subscription."""

    def __init__(self, port, subprotocols=(SUBPROTOCOL,)):
        self._connect = ws_client.connect(f"ws://127.0.0.1:{port}", subprotocols=list(subprotocols), open_timeout=30,
                                          max_size=None)
        self.ws = None
        self.server_info = None
        self.channels = {}  # topic -> advertised channel
        self.messages = {}  # subscription id -> [(log time, payload)]
        self.times = []  # server time messages (ns)
        self.assets = {}  # request id -> (status, error, data)
        self.subscriptions = {}  # subscription id -> topic
        self.status = []

    def pump(self, seconds=0.2):
        """Read whatever arrives for ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                m = self.ws.recv(timeout=left)
            except TimeoutError:
                return
            self._handle(m)

    def _handle(self, m):
        if isinstance(m, str):
            d = json.loads(m)
            if d["op"] == "serverInfo":
                self.server_info = d
            elif d["op"] == "advertise":
                for c in d["channels"]:
                    self.channels[c["topic"]] = c
            elif d["op"] == "status":
                self.status.append(d)
            return
        op = m[0]
        if op == 1:  # message data: subscription id, log time, payload
            sid, log_time = struct.unpack_from("<IQ", m, 1)
            self.messages.setdefault(sid, []).append((log_time, bytes(m[13:])))
        elif op == 2:  # time
            self.times.append(struct.unpack_from("<Q", m, 1)[0])
        elif op == 4:  # fetch asset response: request id, status, error length, error, data
            rid, status, n = struct.unpack_from("<IBI", m, 1)
            self.assets[rid] = (status, bytes(m[10:10 + n]).decode(), bytes(m[10 + n:]))

    def wait(self, predicate, what, alive=(), timeout=TIMEOUT):
        poll_until(predicate, lambda: self.pump(0.2), timeout, what, alive)

    def subscribe(self, topics):
        subs = []
        for topic in topics:
            sid = len(self.subscriptions) + 1
            self.subscriptions[sid] = topic
            subs.append({"id": sid, "channelId": self.channels[topic]["id"]})
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def received(self, topic):
        return [data for sid, t in self.subscriptions.items() if t == topic for _lt, data in self.messages.get(sid, [])]

    def __enter__(self):
        self.ws = self._connect.__enter__()
        return self

    def __exit__(self, *exc):
        self._connect.__exit__(*exc)


def expected_types(ns):
    return {(k if k.startswith("/") else f"{ns}/{k}"): v for k, v in EXPECTED_TYPES.items()}


# ------------------------------------------------------------------ decoded by Foxglove's rules == rclpy's

def same(decoded, msg, path="msg"):
    """Assert that a message decoded with Foxglove's reading of its schema equals rclpy's deserialisation."""
    if hasattr(msg, "get_fields_and_field_types"):
        fields = list(msg.get_fields_and_field_types())
        assert list(decoded) == fields, f"{path}: fields {list(decoded)} != {fields}"
        for name in fields:
            same(decoded[name], getattr(msg, name), f"{path}.{name}")
    elif isinstance(decoded, bytes):  # uint8/int8 arrays
        if isinstance(msg, (bytes, bytearray)):
            expected = bytes(msg)
        elif len(msg) and isinstance(msg[0], bytes):
            expected = b"".join(msg)
        elif isinstance(msg, array.array):
            expected = msg.tobytes()
        else:
            import numpy as np

            expected = np.asarray(msg).astype(np.int8 if min(msg, default=0) < 0 else np.uint8).tobytes()
        assert decoded == expected, f"{path}: {decoded!r} != {expected!r}"
    elif isinstance(decoded, list):
        assert len(decoded) == len(msg), f"{path}: {len(decoded)} elements, rclpy {len(msg)}"
        for i, (a, b) in enumerate(zip(decoded, msg)):
            same(a, b, f"{path}[{i}]")
    elif isinstance(decoded, float):
        assert decoded == float(msg) or (math.isnan(decoded) and math.isnan(msg)), f"{path}: {decoded} != {msg}"
    elif isinstance(msg, str) and isinstance(decoded, int):  # char: Foxglove reads it as uint8
        assert decoded == ord(msg), path
    elif isinstance(msg, bytes) and isinstance(decoded, int):  # byte: rclpy gives bytes, Foxglove an int8
        assert decoded == int.from_bytes(msg, "little", signed=True), f"{path}: {decoded} != {msg!r}"
    else:
        assert decoded == msg, f"{path}: {decoded!r} != {msg!r}"


def check_decodes_like_rclpy(type_name, schema_text, data):
    defs = parse_ros2msg(schema_text)
    msg = deserialize_message(data, message_class(type_name))
    same(decode_cdr(defs, data), msg, type_name)
    return msg


def definitions_match_classes(defs, root_type):
    """Every definition block describes exactly the fields (names, order) of the rclpy class of that name."""
    assert defs[0].name is None
    for d in defs:
        name = root_type if d.name is None else d.name
        package, _, type_ = name.partition("/")
        cls = message_class(f"{package}/msg/{type_.split('/')[-1]}")
        assert [f.name for f in d.data_fields] == list(cls.get_fields_and_field_types()), name


# ------------------------------------------------------------------------------------------------ bridge

def test_bridge_channels_schemas_and_messages(live):
    """The channels a client is advertised (names, schema names, encodings, complete schemas Foxglove parses), then
    one decoded message of each: odom finite and on the world frame, the URDF, TF, energy with the ports the layout
    labels, the server's time following /clock."""
    ns, bridge = live["ns"], live["bridge"]
    want = expected_types(ns)
    with Client(live["port"]) as client:
        client.wait(lambda: client.server_info is not None, "server info", alive=[bridge])
        assert {"time", "assets"} <= set(client.server_info["capabilities"]), client.server_info
        client.wait(lambda: set(want) <= set(client.channels), f"channels {sorted(set(want) - set(client.channels))}",
                    alive=live["procs"])
        seen = []
        for topic, type_name in sorted(want.items()):
            c = client.channels[topic]
            seen.append(f"{topic}: {c['schemaName']} ({c['schemaEncoding']}, {c['encoding']})")
            assert c["encoding"] == "cdr" and c["schemaEncoding"] == "ros2msg" and c["schemaName"] == type_name, c
            assert c["schema"] == message_definition(type_name)[1], f"{topic}: not rosbag2's full definition text"
            defs = check_channel_schema(c["encoding"], c["schemaName"], c["schemaEncoding"], c["schema"].encode())
            definitions_match_classes(defs, type_name)
        print("channels advertised:\n  " + "\n  ".join(seen))

        client.subscribe(sorted(want))
        client.wait(lambda: all(client.received(t) for t in want) and len(client.received(f"{ns}/odom")) >= 5
                    and len(client.times) >= 5, "a message on every channel and time messages", alive=live["procs"])
        decoded = {t: check_decodes_like_rclpy(want[t], client.channels[t]["schema"], client.received(t)[-1])
                   for t in sorted(want)}

        odom = deserialize_message(client.received(f"{ns}/odom")[-1], Odometry)
        assert odom.header.frame_id == "world" and odom.child_frame_id.startswith(ns.strip("/") + "/"), odom.header
        p, q = odom.pose.pose.position, odom.pose.pose.orientation
        twist = odom.twist.twist
        values = [p.x, p.y, p.z, q.x, q.y, q.z, q.w, *vars_of(twist.linear), *vars_of(twist.angular)]
        assert all(math.isfinite(v) for v in values), values
        assert abs(q.x ** 2 + q.y ** 2 + q.z ** 2 + q.w ** 2 - 1.0) < 1e-9
        urdf = decoded[f"{ns}/robot_description"].data
        assert "<robot" in urdf and f'link name="{ns.strip("/")}/' in urdf, urdf[:200]
        assert any(t.header.frame_id == "world" for t in decoded["/tf"].transforms)
        assert decoded[f"{ns}/markers"].markers and all(m.header.frame_id == "world"
                                                        for m in decoded[f"{ns}/markers"].markers)
        energy = decoded[f"{ns}/energy"]
        robot = next(r for r in live["scenario"].robots if r.namespace == ns)
        assert list(energy.port_names) == foxglove_layout.port_names(robot), "the layout's port labels"
        assert all(math.isfinite(x) for x in energy.port_power)
        # the server's clock is the simulation's: time messages are /clock values, message log times too
        clocks = {struct.unpack_from("<iI", d, 4) for d in client.received("/clock")}
        clock_ns = {s * 1_000_000_000 + n for s, n in clocks}
        assert set(client.times[-3:]) <= clock_ns, "time messages must be /clock values"
        sid = next(s for s, t in client.subscriptions.items() if t == f"{ns}/odom")
        log_times = [lt for lt, _d in client.messages[sid]]
        assert log_times == sorted(log_times) and abs(log_times[-1] - max(clock_ns)) < 5_000_000_000


def vars_of(v):
    return [v.x, v.y, v.z]


def test_late_client_gets_latched_topics_and_subscriptions_follow_clients(live):
    """A client connecting later still gets robot_description and /tf_static (transient local: replayed by the
    bridge); the bridge subscribes a volatile topic (markers) only while a client subscribes it."""
    ns, bridge = live["ns"], live["bridge"]
    markers = f"{ns}/markers"
    with Probe("test_foxglove_probe", TIMEOUT) as probe:
        def bridge_subscribes(topic):
            return any(i.node_name == "foxglove_bridge" for i in probe.node.get_subscriptions_info_by_topic(topic))

        with Client(live["port"]) as client:
            client.wait(lambda: {markers, f"{ns}/robot_description", "/tf_static"} <= set(client.channels),
                        "channels", alive=live["procs"])
            # the transient-local topics are subscribed from the start (seen once this probe has discovered the
            # bridge); markers, which no client subscribes now (the first test's client is gone), are not
            probe.spin_until(lambda: bridge_subscribes(f"{ns}/robot_description") and bridge_subscribes("/tf_static"),
                             what="the bridge's subscriptions to the transient-local topics", alive=live["procs"])
            probe.spin_until(lambda: not bridge_subscribes(markers), what="no bridge subscription to markers",
                             alive=live["procs"])
            client.subscribe([f"{ns}/robot_description", "/tf_static", markers])
            client.wait(lambda: client.received(f"{ns}/robot_description") and client.received("/tf_static")
                        and client.received(markers), "latched topics and markers", alive=live["procs"])
            assert len(client.received(f"{ns}/robot_description")) == 1
            probe.spin_until(lambda: bridge_subscribes(markers), what="bridge subscribed to markers",
                             alive=live["procs"])
            # package:// assets from a package's share directory, nothing outside it
            share_file = "package://mbs_ros/package.xml"
            for rid, uri in ((1, share_file), (2, "package://mbs_ros/../../../../etc/hostname"),
                             (3, "file:///etc/hostname")):
                client.ws.send(json.dumps({"op": "fetchAsset", "uri": uri, "requestId": rid}))
            client.wait(lambda: len(client.assets) == 3, "asset responses", alive=[bridge])
            assert client.assets[1][0] == 0 and b"<name>mbs_ros</name>" in client.assets[1][2]
            assert client.assets[2][0] == 1 and client.assets[3][0] == 1
        probe.spin_until(lambda: not bridge_subscribes(markers), what="the bridge dropping markers after the client",
                         alive=live["procs"])


def test_client_speaking_the_former_protocol_name_is_served(live):
    """A client offering only foxglove.websocket.v1 (Lichtblick before December 2025, older Foxglove) is accepted
    under that name and gets what it needs: the server info, every channel with its full schema, messages on the
    channels it subscribes and the server's time."""
    ns, bridge = live["ns"], live["bridge"]
    want = expected_types(ns)
    with Client(live["port"], subprotocols=[LEGACY_SUBPROTOCOL]) as client:
        assert client.ws.subprotocol == LEGACY_SUBPROTOCOL
        client.wait(lambda: client.server_info is not None, "server info", alive=[bridge])
        assert {"time", "assets"} <= set(client.server_info["capabilities"]), client.server_info
        client.wait(lambda: set(want) <= set(client.channels), f"channels {sorted(set(want) - set(client.channels))}",
                    alive=live["procs"])
        for topic, type_name in want.items():
            c = client.channels[topic]
            assert (c["encoding"], c["schemaEncoding"], c["schemaName"]) == ("cdr", "ros2msg", type_name), c
            assert c["schema"] == message_definition(type_name)[1], topic
        odom = f"{ns}/odom"
        client.subscribe([odom, f"{ns}/robot_description"])
        client.wait(lambda: len(client.received(odom)) >= 3 and client.received(f"{ns}/robot_description")
                    and len(client.times) >= 3, "odom, the URDF and time messages", alive=live["procs"])
        msg = check_decodes_like_rclpy(want[odom], client.channels[odom]["schema"], client.received(odom)[-1])
        assert msg.header.frame_id == "world"
    assert "served as foxglove.sdk.v1" in bridge.log_text()


def test_refused_assets_cost_bounded_memory_and_log_lines():
    """30,000 refused asset requests for distinct 1 kB URIs: 256 URIs remembered (as hashes), a log line for each of
    the first 16, then one per period of the rate limit (a clock that stands still here: one), which then says how
    many it did not log; the same URI again is not logged again; every logged URI is cut to 200 characters."""
    lines, now = [], [0.0]

    class Logger:
        def warning(self, text):
            lines.append(text)

    refused = RefusedAssets(RateLimitedLog(Logger(), period=2.0, clock=lambda: now[0]))
    for k in range(30_000):
        refused.refuse(f"package://nowhere/{k}/" + "x" * 1000)
    assert (refused.count, refused.distinct, len(refused.recent)) == (30_000, 30_000, 256)
    assert len(lines) == 17, lines[-3:]
    assert all(len(line) < 320 for line in lines) and "package://nowhere/0/xx" in lines[0]
    now[0] = 2.0
    for _ in range(1000):
        refused.refuse("package://nowhere/again")
    assert len(lines) == 18 and lines[-1].endswith("(29983 more like this since the last one)"), lines[-1]
    assert (refused.count, refused.distinct) == (31_000, 30_001)


def test_a_burst_of_refused_asset_requests_is_answered_and_logged_within_bounds(live):
    """3,000 fetchAsset requests for distinct files outside any package, over the live bridge: every one refused by
    the bridge (32 at a time, what the server hands its asset handler at once per client), and the bridge's log
    holds at most the 16 first refusals plus one line per 2 s of the burst."""
    bridge = live["bridge"]
    n, batch = 3000, 32

    def logged():
        return len(re.findall(r"asset '.*' not served", bridge.log_text()))

    before, start = logged(), time.monotonic()
    with Client(live["port"]) as client:
        client.wait(lambda: client.server_info is not None, "server info", alive=[bridge])
        for first in range(0, n, batch):
            for rid in range(first, min(first + batch, n)):
                client.ws.send(json.dumps({"op": "fetchAsset", "uri": f"file:///nowhere/{rid}", "requestId": rid}))
            poll_until(lambda: len(client.assets) == min(first + batch, n), lambda: client.pump(0.01), TIMEOUT,
                       "asset responses", [bridge])
    assert {status for status, _e, _d in client.assets.values()} == {1}
    assert not [e for _s, e, _d in client.assets.values() if "concurrent" in e], "not all reached the bridge"
    during, elapsed = logged() - before, time.monotonic() - start
    assert during <= 16 + 1 + elapsed / 2.0, (during, elapsed)  # without the limit: 3,000
    print(f"{n} refused asset requests: {during} log lines in {elapsed:.1f} s")
    bridge.check_running()


def test_front_renames_the_former_subprotocol_only_and_bounds_connections():
    """The front before the SDK server, against a stand-in server: an upgrade offering only foxglove.websocket.v1
    reaches the server as foxglove.sdk.v1 and the answer returns under the old name, bytes after it untouched; an
    upgrade offering foxglove.sdk.v1 passes unchanged; an upgrade header over the limit, one that never ends and a
    connection beyond the maximum are closed."""
    import socket
    import threading

    requests = []

    def serve(conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            requests.append(head.decode())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\nframes")
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept():
        while True:
            try:
                conn = backend.accept()[0]
            except OSError:  # closed: the test is over
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    backend = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=accept, daemon=True).start()
    lines = []

    class Logger:
        def warning(self, text):
            lines.append(text)

        info = warning

    front = SubprotocolFront("127.0.0.1", 0, backend.getsockname()[1], RateLimitedLog(Logger()), max_connections=2,
                             handshake_timeout=1.0, header_limit=1024)

    def request(offer):
        c = socket.create_connection(("127.0.0.1", front.port), timeout=TIMEOUT)
        c.sendall(f"GET / HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Protocol: {offer}\r\n\r\n".encode())
        return c

    def upgrade(offer):
        c = request(offer)
        answer = b""
        while not answer.endswith(b"frames"):
            answer += c.recv(4096)
        c.sendall(b"echo")
        assert c.recv(4096) == b"echo"
        return c, answer.decode()

    def closed(c):
        c.settimeout(TIMEOUT)
        try:
            return c.recv(4096) == b""
        except ConnectionResetError:
            return True

    try:
        legacy, answer = upgrade("foxglove.websocket.v1")
        assert "Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n" in requests[-1]
        assert "foxglove.websocket.v1" not in requests[-1]
        assert answer == ("HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Protocol: foxglove.websocket.v1\r\n\r\n"
                          "frames")
        current, answer = upgrade("foxglove.sdk.v1, foxglove.websocket.v1")
        assert "Sec-WebSocket-Protocol: foxglove.sdk.v1, foxglove.websocket.v1\r\n" in requests[-1]
        assert "Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n" in answer
        third = request("foxglove.sdk.v1")
        assert closed(third) and any("2 open already" in line for line in lines), lines
        legacy.close()
        current.close()
        poll_until(lambda: front.connections == 0, lambda: time.sleep(0.05), TIMEOUT, "the connections closed")
        too_long = socket.create_connection(("127.0.0.1", front.port), timeout=TIMEOUT)
        too_long.sendall(b"GET / HTTP/1.1\r\nX: " + b"x" * 2000)
        silent = socket.create_connection(("127.0.0.1", front.port), timeout=TIMEOUT)
        assert closed(too_long) and closed(silent)
        assert front.renamed == 1 and len(requests) == 2
    finally:
        front.close()
        backend.close()


# ------------------------------------------------------------------------------------------------ MCAP

def test_recording_is_foxglove_readable(live):
    """A recording made by our recorder: profile ros2, every channel cdr on a ros2msg schema named pkg/msg/Type
    whose text is complete (every dependency after 80 '=' and 'MSG: pkg/Type') and parses by Foxglove's rules into
    exactly the rclpy classes' fields; the first messages of every channel decode by those rules to what rclpy
    deserialises (EnergyPorts and its Header/Time included)."""
    ns, recorder, recording = live["ns"], live["recorder"], live["recording"]
    want = expected_types(ns)
    with Client(live["port"]) as client:  # every topic is there
        client.wait(lambda: set(want) <= set(client.channels), "channels", alive=live["procs"])
    # until the flushed part of the file (read while it is written) holds every topic
    deadline = time.monotonic() + TIMEOUT
    while not set(want) <= {c.topic for _s, c, _m in read_messages(recording)}:
        recorder.check_running()
        assert time.monotonic() < deadline, f"the recording misses topics; recorder log:\n{recorder.log_tail()}"
        time.sleep(0.5)  # the recorder flushes its chunk every second
    recorder.send_signal(signal.SIGINT)
    assert recorder.wait(timeout=TIMEOUT) == 0, recorder.log_tail()

    compared = {}

    def on_message(topic, schema_name, data, decoded):
        same(decoded, deserialize_message(data, message_class(schema_name)), topic)
        compared[topic] = compared.get(topic, 0) + 1

    report = check_mcap(recording, decode=3, on_message=on_message)
    assert report.problems == [], report.problems
    assert report.topics == want
    assert set(compared) == set(want), f"no message decoded on {sorted(set(want) - set(compared))}"
    for name, defs in report.definitions.items():
        definitions_match_classes(defs, name)
    text = message_definition("mbs_ros_msgs/msg/EnergyPorts")[1]
    assert text.split("\n" + SEPARATOR + "\n")[1:] and [b.split("\n", 1)[0] for b in
                                                        text.split("\n" + SEPARATOR + "\n")[1:]] == [
        "MSG: std_msgs/Header", "MSG: builtin_interfaces/Time"]
    names = [d.name for d in report.definitions["visualization_msgs/msg/MarkerArray"][1:]]
    assert {"visualization_msgs/Marker", "visualization_msgs/MeshFile", "visualization_msgs/UVCoordinate",
            "sensor_msgs/CompressedImage", "std_msgs/ColorRGBA", "builtin_interfaces/Duration"} <= set(names)
    assert len(names) == len(set(names)), "each dependency once"


# ------------------------------------------------------------------------------------- the checker itself

def test_checker_refuses_what_foxglove_refuses():
    """parse_ros2msg and check_channel_schema throw where Foxglove's parseChannel/parse do."""
    ok = "std_msgs/Header header\nfloat64 x  # comment\nuint8 MODE_A=1\n" + SEPARATOR + \
         "\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
    defs = parse_ros2msg(ok)
    assert [d.name for d in defs] == [None, "std_msgs/Header"]
    assert defs[0].fields[0].type == "std_msgs/Header" and defs[1].fields[0].type == "time"
    assert defs[0].fields[2].is_constant and defs[0].fields[2].value == 1
    with pytest.raises(SchemaError, match="top level type definition for 'std_msgs/Header'"):
        parse_ros2msg("std_msgs/Header header\nfloat64 x\n")  # the dependency missing
    with pytest.raises(SchemaError, match="Invalid field name"):
        parse_ros2msg("float64 X\n")
    with pytest.raises(SchemaError, match="out of range"):
        parse_ros2msg("uint8 A=300\n")
    with pytest.raises(SchemaError, match="Could not parse line"):
        parse_ros2msg("float64\n")
    with pytest.raises(SchemaError, match="is empty"):
        check_channel_schema("cdr", "std_msgs/msg/String", "ros2msg", b"")
    with pytest.raises(SchemaError, match="not supported"):
        check_channel_schema("cdr", "std_msgs/msg/String", None, None)
    with pytest.raises(SchemaError, match="pkg/msg/Type"):
        check_channel_schema("cdr", "String", "ros2msg", b"string data")
    # a relative type inside a package resolves by its /Type suffix, as Foxglove's findTypeByName does
    rel = "Point p\n" + SEPARATOR + "\nMSG: geometry_msgs/Point\nfloat64 x\n"
    assert parse_ros2msg(rel)[0].fields[0].type == "geometry_msgs/Point"
    # decoding follows the definitions: a string and an unbounded float64 sequence, little endian, each primitive
    # aligned to its size from the end of the encapsulation header (the doubles at 16 after 4 bytes of padding)
    data = b"\x00\x01\x00\x00" + struct.pack("<I", 3) + b"ab\x00" + b"\x00" + struct.pack("<I", 2) + \
        b"\x00" * 4 + struct.pack("<dd", 1.5, -2.0)
    assert decode_cdr(parse_ros2msg("string s\nfloat64[] v\n"), data) == {"s": "ab", "v": [1.5, -2.0]}


# ----------------------------------------------------------------------------------------------- layouts

def test_shipped_layouts_are_current_and_well_formed():
    """config/foxglove/<scenario>.json: what the scenario gives now (else regenerate), in the layout format Foxglove
    and Lichtblick import, every panel in the mosaic, every topic a panel shows served by the bridge."""
    files = sorted((ROOT / "config" / "foxglove").glob("*.json"))
    assert files, "no layouts shipped"
    assert foxglove_layout.main(["--check", *[f.stem for f in files]]) == 0
    for f in files:
        d = json.loads(f.read_text())
        assert set(d) == {"configById", "globalVariables", "userNodes", "playbackConfig", "layout"}

        def leaves(node):
            return [node] if isinstance(node, str) else leaves(node["first"]) + leaves(node["second"])

        assert sorted(leaves(d["layout"])) == sorted(d["configById"])
        assert {k.split("!")[0] for k in d["configById"]} == {"3D", "Plot", "RawMessages"}
        served = set(foxglove_topics(load_scenario(f.stem)))
        three_d = d["configById"]["3D!scene"]
        urdfs = [layer["topic"] for layer in three_d["layers"].values() if layer["layerId"] == "foxglove.Urdf"]
        shown = set(urdfs) | set(three_d["topics"]) | {d["configById"]["RawMessages!energy"]["topicPath"]}
        for plot in ("Plot!state", "Plot!ports"):
            paths = d["configById"][plot]["paths"]
            assert paths and all(p["enabled"] and p["label"] for p in paths)
            shown |= {re.match(r"^(/[^.]+)\.", p["value"]).group(1) for p in paths}
        assert shown <= served, f"{f.name}: {sorted(shown - served)} not served by the bridge"
        assert len(urdfs) == len(load_scenario(f.stem).robots)


def test_runner_flag():
    from mbs_ros.bringup.runner import _parser

    assert _parser().parse_args([SCENARIO, "--foxglove"]).foxglove == 8765
    assert _parser().parse_args([SCENARIO, "--foxglove", "9001"]).foxglove == 9001
    assert _parser().parse_args([SCENARIO]).foxglove is None
