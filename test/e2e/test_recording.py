"""mbs_ros.recording against a real dynamics node: recorder processes stopped by SIGINT, SIGTERM and SIGKILL,
a Recorder on this process's node and a BackgroundRecorder (own context and thread), all recording the same
run at once. The files are read back with
``rosbags`` (its own MCAP parser, message-definition parser and CDR decoder, nothing shared with the
writer) and checked against what a live subscriber in this process saw.

Damaged files: the SIGKILL'd recorder's file, files cut at random byte offsets and a file closed with a half-written
record are checked (``check_file``) and recovered (``recover``) into files mcap's make_reader and rosbags read.
KeyboardInterrupts at random moments of a writing main thread, and SIGINT/SIGTERM at random moments of busy
recorder processes, never leave a damaged file.
Message types seen in the graph are imported only from installed interface packages (the ament index).

Every wait is for a graph match, a message count, a file size or a process exit, with a timeout.
"""

from __future__ import annotations

import os
import random
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
rosbags_reader = pytest.importorskip("rosbags.rosbag2", reason="rosbags (the independent reader) not installed")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from mcap.reader import make_reader  # noqa: E402
from mcap.stream_reader import StreamReader  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.rosbag2.errors import ReaderError  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402
from rosbags.typesys.msg import get_types_from_msg  # noqa: E402

from mbs_ros import plot  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from mbs_ros.recording import BackgroundRecorder, Recorder, message_definition  # noqa: E402
import ros_helpers  # noqa: E402
from ros_helpers import ros_env_defaults  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # every wait is for an event; generous: a busy 2-core machine starts five processes at once
NS = "rec"
TOPICS = [f"/{NS}/odom", f"/{NS}/pose", f"/{NS}/wrench", "/tf", "/diagnostics"]
NEVER = f"/{NS}/never_published"
LIVE_ODOM = 75  # odom messages (50 Hz) seen live after every recorder has subscribed, before they are stopped
MIN_ODOM = 20  # ... of which every file must hold this many (a late DDS match can take a second or two)


class Probe(ros_helpers.Probe):
    """This process's side: one node, spun by hand, with a live odom subscriber and an in-process Recorder."""

    def __init__(self, path):
        super().__init__("test_recording_probe", TIMEOUT)
        self.odom = []
        self.diagnostics = []
        self.node.create_subscription(Odometry, f"/{NS}/odom", self.odom.append, QoSProfile(depth=1000))
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, QoSProfile(depth=100))
        self.recorder = Recorder(self.node, path, {t: None for t in TOPICS} | {f"/{NS}/odom": Odometry},
                                 flush_period=0.5, discovery_period=0.1)

    def subscribers(self, topic):
        return {i.node_name for i in self.node.get_subscriptions_info_by_topic(topic)}

    def close(self):
        self.recorder.close()
        super().close()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Record one run of a dynamics node four ways; returns the paths, processes and live messages."""
    ros_env_defaults()
    tmp = tmp_path_factory.mktemp("recording")
    files = {k: tmp / f"{k}.mcap" for k in ("sigint", "sigterm", "sigkill", "inproc", "thread")}
    dynamics = NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace=NS,
                           params_file=ROOT / "config" / "rigid_body.yaml",
                           parameters=dict(physics_rate=500.0, diagnostics_rate=10.0), log_file=tmp / "dynamics.log")

    def recorder(kind, *args):
        return NodeProcess("mbs_ros.recording", name=f"recorder_{kind}", args=[str(files[kind]), *args],
                           log_file=tmp / f"recorder_{kind}.log")

    recorders = {
        "sigint": recorder("sigint", "--topics", *TOPICS, NEVER),
        "sigterm": recorder("sigterm", "--all", "--exclude", "rosout|parameter_events"),
        "sigkill": recorder("sigkill", "--topics", *TOPICS, "--flush-period", "0.2"),
    }
    procs = [dynamics, *recorders.values()]
    probe = background = None
    try:
        for p in procs:
            p.start()
        probe = Probe(files["inproc"])
        background = BackgroundRecorder(files["thread"], TOPICS, node_name="recorder_thread", flush_period=0.5)
        # every recorder subscribed to odom and diagnostics, and this process's recorder too
        for topic in (f"/{NS}/odom", "/diagnostics"):
            probe.spin_until(lambda: {f"recorder_{k}" for k in recorders} <= probe.subscribers(topic),
                             what=f"recorders subscribed to {topic}", alive=procs)
        probe.spin_until(lambda: set(TOPICS) <= set(probe.recorder.subscribed), what="in-process recorder",
                         alive=procs)
        assert background.wait_for_topics(timeout=TIMEOUT), f"background recorder misses {background.recorder.missing}"
        n0 = len(probe.odom)
        probe.spin_until(lambda: len(probe.odom) >= n0 + LIVE_ODOM and len(probe.diagnostics) >= 3
                         and probe.recorder.counts[f"/{NS}/odom"] >= LIVE_ODOM
                         and background.counts[f"/{NS}/odom"] >= LIVE_ODOM, what="odom and diagnostics",
                         alive=procs)
        # the SIGKILL'd recorder has flushed chunks to disk (its header alone is ~100 bytes)
        probe.spin_until(lambda: files["sigkill"].stat().st_size > 4000, what="sigkill recorder flushing",
                         alive=procs)
        recorders["sigint"].send_signal(signal.SIGINT)
        recorders["sigterm"].send_signal(signal.SIGTERM)
        recorders["sigkill"].send_signal(signal.SIGKILL)
        codes = {k: p.wait(timeout=TIMEOUT) for k, p in recorders.items()}
        probe.recorder.close()
        background.stop()
        yield dict(files=files, recorders=recorders, codes=codes, odom=list(probe.odom), probe=probe)
    finally:
        for p in procs:
            p.stop()
        if background is not None:
            background.stop()
        if probe is not None:
            probe.close()


def read_bag(path):
    """Everything in the file through rosbags: {topic: [(log_time, decoded)]}, connections, total count."""
    store = get_typestore(Stores.EMPTY)
    out = {}
    with Reader(path) as reader:
        for c in reader.connections:
            store.register(get_types_from_msg(c.msgdef.data, c.msgtype))  # the file's own definitions
        for c, log_time, raw in reader.messages():
            out.setdefault(c.topic, []).append((log_time, store.deserialize_cdr(raw, c.msgtype)))
        return out, list(reader.connections), reader.message_count


def stamp_ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def pose_tuple(pose):
    p, q = pose.position, pose.orientation
    return (p.x, p.y, p.z, q.x, q.y, q.z, q.w)


# --------------------------------------------------------------------------------------------- tests


def test_recorders_stop_cleanly(run):
    assert run["codes"]["sigint"] == 0, run["recorders"]["sigint"].log_tail()
    assert run["codes"]["sigterm"] == 0, run["recorders"]["sigterm"].log_tail()
    assert run["codes"]["sigkill"] == -signal.SIGKILL
    log = run["recorders"]["sigint"].log_text()
    assert re.search(r"wrote \d+ messages on 5 topics", log), log
    assert f"never seen: {NEVER}" in log
    # the run the files hold: simulated time went forward at every odom message, over the 50 Hz messages seen
    stamps = [stamp_ns(m.header.stamp) for m in run["odom"]]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
    assert stamps[-1] - stamps[0] >= (LIVE_ODOM - 1) * 20_000_000


@pytest.mark.parametrize("kind", ["sigint", "sigterm", "inproc", "thread"])
def test_file_is_rosbag2_mcap(run, kind):
    """Profile, schemas, channels, counts, time order and decoded poses, read by rosbags and plain mcap."""
    path = run["files"][kind]
    messages, connections, total = read_bag(path)  # rosbags refuses anything but profile ros2 and cdr
    topics = {c.topic: c for c in connections}
    if kind == "sigterm":  # --all minus the excluded topics
        assert set(TOPICS) <= set(topics) and not any(re.search("rosout|parameter_events", t) for t in topics)
    else:
        assert set(topics) == set(TOPICS)
    expected_types = {f"/{NS}/odom": "nav_msgs/msg/Odometry", f"/{NS}/pose": "geometry_msgs/msg/PoseStamped",
                      f"/{NS}/wrench": "geometry_msgs/msg/WrenchStamped", "/tf": "tf2_msgs/msg/TFMessage",
                      "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray"}
    for topic, type_name in expected_types.items():
        c = topics[topic]
        assert c.msgtype == type_name
        assert c.msgdef.format.name == "MSG"
        assert c.ext.serialization_format == "cdr"
        assert c.ext.offered_qos_profiles and c.ext.offered_qos_profiles[0].reliability.name == "RELIABLE"
        assert c.msgcount == len(messages.get(topic, [])), "index count differs from the messages read"
    assert total == sum(len(v) for v in messages.values())
    assert len(messages[f"/{NS}/odom"]) >= MIN_ODOM and len(messages["/diagnostics"]) >= 3

    # the same file through the mcap library's reader: header, schema texts, channel metadata, publish times
    with open(path, "rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        for schema in summary.schemas.values():
            assert schema.encoding == "ros2msg"
            assert schema.data.decode() == message_definition(schema.name)[1]
        for channel in summary.channels.values():
            assert channel.message_encoding == "cdr"
            assert channel.metadata["topic_type_hash"].startswith("RIHS01_")
        odom_stamps = []
        for schema, channel, message in reader.iter_messages(topics=[f"/{NS}/odom"]):
            msg = deserialize_message(message.data, Odometry)
            assert message.publish_time == stamp_ns(msg.header.stamp), "publish time must be the header stamp"
            odom_stamps.append(message.publish_time)
        assert odom_stamps == sorted(odom_stamps) and len(set(odom_stamps)) == len(odom_stamps)
    # log times never go back, in file order (stream reader: no index involved)
    with open(path, "rb") as f:
        log_times = [r.log_time for r in StreamReader(f).records if type(r).__name__ == "Message"]
    assert log_times == sorted(log_times)

    # decoded odometry equals what the live subscriber saw, message by message (matched by stamp)
    live = {stamp_ns(m.header.stamp): pose_tuple(m.pose.pose) for m in run["odom"]}
    common = 0
    for _log_time, m in messages[f"/{NS}/odom"]:
        s = stamp_ns(m.header.stamp)
        if s in live:
            assert pose_tuple(m.pose.pose) == live[s]
            assert m.header.frame_id == "world" and m.child_frame_id == f"{NS}/base_link"
            common += 1
    assert common >= MIN_ODOM - 5, f"only {common} recorded odom messages were also seen live"
    # energy bookkeeping keys survive the round trip
    keys = {kv.key for _t, m in messages["/diagnostics"] for s in m.status for kv in s.values}
    assert {"kinetic_energy", "potential_energy", "total_energy", "work_applied", "energy_balance_residual"} <= keys


def test_killed_recorder_keeps_flushed_chunks(run):
    """SIGKILL: no summary, so rosbags refuses it with a clear error; plot's reader recovers the flushed part."""
    path = run["files"]["sigkill"]
    with pytest.raises(ReaderError, match="magic|footer|summary|Truncated"):
        read_bag(path)
    notes = []
    odom = [m for topic, _type, _t, m in plot.iter_messages(path, notes=notes) if topic == f"/{NS}/odom"]
    assert notes and ("ends early" in notes[0] or "no summary" in notes[0]), notes
    assert len(odom) >= 5, "flushed chunks must survive SIGKILL"
    live = {stamp_ns(m.header.stamp): pose_tuple(m.pose.pose) for m in run["odom"]}
    # the recorder started before the live subscriber: compare where both listened (reliable: no gaps)
    during = [m for m in odom if min(live) <= stamp_ns(m.header.stamp) <= max(live)]
    assert during, "the flushed part must overlap what the live subscriber saw"
    for m in during:
        assert pose_tuple(m.pose.pose) == live[stamp_ns(m.header.stamp)]
    stamps = [stamp_ns(m.header.stamp) for m in odom]
    assert stamps == sorted(stamps)
    # the plot tool works on it, with a note
    rec = plot.load(path, progress="never")
    assert rec.odom[f"/{NS}"].shape[0] == len(odom)


def test_message_definition_is_rosbag2s_full_text():
    """Root text, then every dependency once, depth first, in sorted order, after '====…' and 'MSG: pkg/Type'."""
    encoding, text = message_definition("geometry_msgs/msg/PoseStamped")
    assert encoding == "ros2msg"
    sections = text.split("\n" + "=" * 80 + "\n")
    names = [s.split("\n", 1)[0] for s in sections[1:]]
    assert names == ["MSG: geometry_msgs/Pose", "MSG: geometry_msgs/Point", "MSG: geometry_msgs/Quaternion",
                     "MSG: std_msgs/Header", "MSG: builtin_interfaces/Time"]
    share = Path(sys.prefix) / "share"
    if (share / "geometry_msgs" / "msg" / "PoseStamped.msg").is_file():
        files = ["geometry_msgs/msg/PoseStamped", "geometry_msgs/msg/Pose", "geometry_msgs/msg/Point",
                 "geometry_msgs/msg/Quaternion", "std_msgs/msg/Header", "builtin_interfaces/msg/Time"]
        bodies = [sections[0]] + [s.split("\n", 1)[1] for s in sections[1:]]
        for name, body in zip(files, bodies):
            assert body == (share / (name + ".msg")).read_text()
    # a type with no .msg anywhere
    with pytest.raises(LookupError):
        message_definition("no_such_msgs/msg/Nothing")


def test_cli_needs_topics():
    out = subprocess.run([sys.executable, "-m", "mbs_ros.recording", "x.mcap"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--topics or --all" in out.stderr


# ------------------------------------------------------------------------- damaged files: check, recover


def stream_count(path):
    """Messages the mcap library's plain streaming read finds before the file breaks off (complete chunks)."""
    n = 0
    with open(path, "rb") as f:
        try:
            for record in StreamReader(f).records:
                n += type(record).__name__ == "Message"
        except Exception:  # noqa: BLE001 - the cut-off end
            pass
    return n


def indexed_messages(path):
    """[(topic, log_time, data)] through mcap's make_reader (summary and index), in file order."""
    with open(path, "rb") as f:
        return [(c.topic, m.log_time, m.data) for _s, c, m in make_reader(f).iter_messages(log_time_order=False)]


def test_killed_recorder_is_recovered(run, tmp_path):
    """kill -9: make_reader and rosbags read nothing; `recover` writes a file both read, holding at least what a
    streaming read finds, and the odometry the live subscriber saw."""
    path = run["files"]["sigkill"]
    with open(path, "rb") as f, pytest.raises(Exception):
        list(make_reader(f).iter_messages())
    with pytest.raises(ReaderError):
        read_bag(path)
    streamed = stream_count(path)
    assert streamed >= MIN_ODOM
    out = tmp_path / "recovered.mcap"
    res = subprocess.run([sys.executable, "-m", "mbs_ros.recording", "recover", str(path), str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    m = re.search(r"^recovered (\d+) messages on 5 topics \(5 schemas, 5 channels\)", res.stdout, re.M)
    assert m, res.stdout
    recovered = int(m.group(1))
    assert recovered >= streamed
    assert "lost or damaged: no summary: the file was not closed" in res.stdout, res.stdout
    assert recovered == len(indexed_messages(out))  # make_reader: summary, index
    messages, connections, total = read_bag(out)  # rosbags
    assert total == recovered and {c.topic for c in connections} == set(TOPICS)
    assert all(c.ext.offered_qos_profiles for c in connections)  # the channels' metadata came along
    live = {stamp_ns(m.header.stamp): pose_tuple(m.pose.pose) for m in run["odom"]}
    during = [m for _t, m in messages[f"/{NS}/odom"] if min(live) <= stamp_ns(m.header.stamp) <= max(live)]
    assert during and all(pose_tuple(m.pose.pose) == live[stamp_ns(m.header.stamp)] for m in during)
    check = subprocess.run([sys.executable, "-m", "mbs_ros.recording", "check", str(path)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 1 and f"{recovered} messages on 5 topics" in check.stdout, check.stdout
    assert "mbs_ros.recording recover" in check.stderr
    assert subprocess.run([sys.executable, "-m", "mbs_ros.recording", "check", str(out)],
                          capture_output=True, timeout=120).returncode == 0


def message_layout(path):
    """[(end offset in the file, topic, log_time, data)] of every message of a complete file, in file order, from
    its chunk index and mcap's own chunk decoding (for uncompressed chunks the records lie in the file as is)."""
    from mcap.data_stream import RecordBuilder
    from mcap.stream_reader import breakup_chunk

    out, chunks = [], []
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
        for ci in sorted(summary.chunk_indexes, key=lambda c: c.chunk_start_offset):
            f.seek(ci.chunk_start_offset)
            chunk = next(StreamReader(f, skip_magic=True, emit_chunks=True).records)
            pos = ci.chunk_start_offset + 9 + 8 + 8 + 8 + 4 + 4 + len(chunk.compression) + 8  # its records
            first = len(out)
            for record in breakup_chunk(chunk):
                builder = RecordBuilder()
                record.write(builder)
                pos += len(builder.end())
                if type(record).__name__ == "Message":
                    out.append((pos, summary.channels[record.channel_id].topic, record.log_time, record.data))
            chunks.append((ci.chunk_start_offset, ci.chunk_start_offset + ci.chunk_length, first, len(out)))
    return out, chunks


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_file_cut_anywhere_recovers_every_complete_message(tmp_path, compression):
    """A file cut at random byte offsets (and in its summary, and one byte short): `recover` gives exactly the
    messages before the cut, in order and unchanged — for uncompressed chunks every message whose record ends
    before the cut, for zstd at least every message of a chunk that ends before it — in a file that make_reader
    reads completely."""
    from nav_msgs.msg import Odometry as Odom
    from std_msgs.msg import String

    from mbs_ros.recording import BagWriter, check_file, recover

    path = tmp_path / "full.mcap"
    rng = random.Random(20240917)
    with BagWriter(path, compression=compression, chunk_size=3000, flush_period=None) as w:
        for k in range(600):
            w.write_message("/chatter", String(data="x" * rng.randint(0, 200)), 1000 + k)
            if k % 4 == 0:
                odom = Odom()
                odom.pose.pose.position.x = float(k)
                w.write_message("/odom", odom, 1000 + k)
    layout, chunks = message_layout(path)
    assert len(layout) == 750 and len(chunks) > 20
    size = path.stat().st_size
    data = path.read_bytes()
    data_end = max(end for _start, end, _first, _last in chunks)
    cuts = sorted({rng.randrange(100, data_end) for _ in range(10)} | {rng.randrange(data_end, size), size - 1})
    for cut in cuts:
        damaged = tmp_path / f"cut{cut}.mcap"
        damaged.write_bytes(data[:cut])
        report = check_file(damaged)
        assert report.damaged, cut
        out = tmp_path / f"recovered{cut}.mcap"
        assert recover(damaged, out).message_count == report.message_count
        got = indexed_messages(out)
        assert got == [m[1:] for m in layout[:len(got)]], f"cut at {cut}: not the messages before the cut"
        if compression == "none":
            assert len(got) == sum(end <= cut for end, *_ in layout), f"cut at {cut}"
        else:  # whole chunks at least, and nothing from a chunk that starts after the cut
            assert len(got) >= max([last for _s, end, _f, last in chunks if end <= cut], default=0), f"cut at {cut}"
            assert len(got) <= max([last for start, _e, _f, last in chunks if start < cut], default=0)
        assert not check_file(out).damaged
    _msgs, _conns, total = read_bag(out)  # rosbags reads the last one
    assert total == len(got)


def interrupted_copy(src, dst, monkeypatch, at=-1):
    """``src`` copied with mcap's Writer the way the recorder wrote before its writer thread: a KeyboardInterrupt
    lands in the middle of writing message ``at`` (after its channel id: the record's length is never filled
    in), and the file is then closed normally, summary and all, the half record inside its last chunk."""
    from mcap.opcode import Opcode
    from mcap.records import Message
    from mcap.writer import Writer

    with open(src, "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        messages = list(reader.iter_messages(log_time_order=False))
    cut = at % len(messages)

    def interrupted(self, stream):
        stream.start_record(Opcode.MESSAGE)
        stream.write2(self.channel_id)
        raise KeyboardInterrupt

    with open(dst, "wb") as out:
        w = Writer(out)
        w.start(header.profile, header.library)
        schemas, channels = {0: 0}, {}
        for k, (schema, channel, message) in enumerate(messages):
            if schema is not None and schema.id not in schemas:
                schemas[schema.id] = w.register_schema(schema.name, schema.encoding, schema.data)
            if channel.id not in channels:
                channels[channel.id] = w.register_channel(channel.topic, channel.message_encoding,
                                                          schemas[channel.schema_id], dict(channel.metadata))
            with monkeypatch.context() as m:
                if k == cut:
                    m.setattr(Message, "write", interrupted)
                try:
                    w.add_message(channels[channel.id], message.log_time, message.data, message.publish_time,
                                  message.sequence)
                except KeyboardInterrupt:
                    pass
        w.finish()
    return messages[:cut] + messages[cut + 1:]


def test_half_written_record_is_found_and_dropped(run, tmp_path, monkeypatch):
    """The file the runner used to call a success: complete summary, a record cut in half in its last chunk.
    check_file finds it; recover keeps every other message, in a file make_reader and rosbags read."""
    from mbs_ros.recording import check_file, recover

    damaged = tmp_path / "half_record.mcap"
    kept = interrupted_copy(run["files"]["sigint"], damaged, monkeypatch)
    with open(damaged, "rb") as f, pytest.raises(Exception):  # mcap's indexed read stops at it
        list(make_reader(f).iter_messages())
    report = check_file(damaged)
    assert report.damaged and "broken Message record" in report.describe(), report.describe()
    assert report.message_count == len(kept)
    out = tmp_path / "repaired.mcap"
    recover(damaged, out)
    assert indexed_messages(out) == [(c.topic, m.log_time, m.data) for _s, c, m in kept]
    assert read_bag(out)[2] == len(kept)
    assert not check_file(out).damaged and not check_file(run["files"]["sigint"]).damaged


def test_keyboard_interrupts_never_cut_a_record(tmp_path):
    """200 KeyboardInterrupts at random moments of a main thread writing as fast as it can (the recorder's
    callbacks, a program's Ctrl-C): the writer thread is never interrupted, the file closes complete, and it
    holds every message whose write() returned (and at most the interrupted ones besides). Before the writer
    thread, the first interrupt inside mcap's add_message left a half record or broke the writer."""
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from mbs_ros.recording import BagWriter, check_file

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    rng = random.Random(11)
    data = serialize_message(String(data="y" * 50))
    previous = signal.signal(signal.SIGALRM, interrupt)
    path = tmp_path / "interrupted.mcap"
    try:
        w = BagWriter(path, chunk_size=4096, flush_period=None)
        w.add_topic("/t", "std_msgs/msg/String")
        returned = interrupts = 0
        for _ in range(200):
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-4, 1e-3))  # one shot
                while True:
                    w.write("/t", data, returned, returned)
                    returned += 1
            except KeyboardInterrupt:
                interrupts += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    w.close()
    report = check_file(path)
    assert not report.damaged, report.describe()
    assert returned <= report.message_count <= returned + interrupts
    assert w.counts["/t"] == report.message_count  # what the writer says it wrote is the file's


def test_signals_at_random_moments_leave_complete_files(tmp_path):
    """SIGINT or SIGTERM at a random moment of a busy recording (a burst publisher): every recorder exits 0,
    every file is complete (check_file reads every record and the index), and each recorder's own count is the
    file's."""
    from std_msgs.msg import String

    from mbs_ros.recording import check_file

    ros_env_defaults()
    rng = random.Random(5)
    files = [tmp_path / f"burst{k}.mcap" for k in range(4)]
    recorders = [NodeProcess("mbs_ros.recording", name=f"burst_recorder{k}", args=[str(f), "--topics", "/burst"],
                             log_file=tmp_path / f"burst{k}.log") for k, f in enumerate(files)]
    with ros_helpers.Probe("test_burst", TIMEOUT) as probe, ros_helpers.running(recorders):
        pub = probe.node.create_publisher(String, "/burst", QoSProfile(depth=1000))
        stop = threading.Event()

        def burst():
            msg = String(data="z" * 100)
            while not stop.is_set():
                pub.publish(msg)
                time.sleep(0.0005)

        probe.spin_until(lambda: {f"burst_recorder{k}" for k in range(4)} <= {
            i.node_name for i in probe.node.get_subscriptions_info_by_topic("/burst")},
            what="recorders subscribed to /burst", alive=recorders)
        for r in recorders:
            assert r.wait_for_log("recording /burst (", timeout=TIMEOUT), r.log_tail()
        thread = threading.Thread(target=burst, daemon=True)
        thread.start()
        try:
            for r in recorders:  # each stopped at its own random moment of the burst
                probe.spin_for(rng.uniform(0.05, 0.6))
                r.send_signal(rng.choice([signal.SIGINT, signal.SIGTERM]))
            codes = [r.wait(timeout=TIMEOUT) for r in recorders]
        finally:
            stop.set()
            thread.join(timeout=5)
    for r, f, code in zip(recorders, files, codes):
        assert code == 0, r.log_tail()
        report = check_file(f)
        assert not report.damaged, f"{f}: {report.describe()}"
        m = re.search(r"wrote (\d+) messages on 1 topics", r.log_text())
        assert m and int(m.group(1)) == report.message_count == report.counts["/burst"] > 0, r.log_tail()
        assert "Traceback" not in r.log_text()


# ------------------------------------------------------------------------------- finishing (SIGUSR2)


def _header_stamps(path, topic):
    """The header stamps [ns] of a recorded topic whose type starts with a Header, in file order."""
    from mbs_ros.recording import read_messages

    out = []
    for _schema, channel, record in read_messages(path):
        if channel.topic == topic:
            sec, nsec = struct.unpack_from("<iI", record.data, 4)
            out.append(sec * 1_000_000_000 + nsec)
    return out


def test_finishing_recorder_writes_a_burst_it_had_not_taken_yet(tmp_path):
    """A recorder asked to finish (SIGUSR2) with --end-time and --end-topics records on until the end topic has
    delivered its message stamped at the end, then writes everything its subscriptions hold, and exits by itself:
    a burst published while it was held still (SIGSTOP, so it takes nothing), on the end topic and, before that, three
    times as many on another topic, is all in the file, each message once. (Closing at the request, as a stop signal
    does, would lose what sits in the subscriptions' queues; and an executor takes from its subscriptions in turn, so
    when the end topic's last message is taken two thirds of the other burst are still queued.)"""
    from rclpy.duration import Duration
    from sensor_msgs.msg import JointState

    from mbs_ros.nodes import conversions as cv
    from mbs_ros.recording import check_file

    ros_env_defaults()
    n, ms = 20, 1_000_000  # 80 datagrams: well within what the stopped recorder's socket buffer holds (208 KiB)
    end, other = "/fin/state", "/fin/other"
    path = tmp_path / "finish.mcap"
    rec = NodeProcess("mbs_ros.recording", name="finish_recorder", log_file=tmp_path / "finish.log",
                      args=[str(path), "--topics", end, other, "--end-time", f"{n * 1e-3:g}", "--end-topics", end])
    stamps = {end: [k * ms for k in range(1, n + 1)], other: [k * ms // 3 for k in range(1, 3 * n + 1)]}
    recorded = {t: [0] + v for t, v in stamps.items()}  # with the first message
    with ros_helpers.Probe("test_finish", TIMEOUT) as probe, ros_helpers.running([rec]):
        qos = QoSProfile(depth=3 * n + 10)  # reliable; the writers keep the whole burst
        pubs = {t: probe.node.create_publisher(JointState, t, qos) for t in (end, other)}
        for t in (end, other):
            assert rec.wait_for_log(f"recording {t} (", timeout=TIMEOUT), rec.log_tail()
        probe.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()),
                         what="the recorder matched", alive=[rec])
        # the recorder's readers have matched these writers too (a reader drops data of a writer it does not know
        # yet, which then comes again only a heartbeat later): a first message on each, acknowledged
        for t in (end, other):
            pubs[t].publish(cv.joint_state_msg(0, ["j"], position=[0.0]))
            assert pubs[t].wait_for_all_acked(Duration(seconds=TIMEOUT)), f"{t}: the recorder did not acknowledge"
        os.kill(rec.pid, signal.SIGSTOP)
        try:
            for t in (other, end):
                for stamp in stamps[t]:
                    pubs[t].publish(cv.joint_state_msg(stamp, ["j"], position=[stamp * 1e-9]))
            rec.send_signal(signal.SIGUSR2)
        finally:
            os.kill(rec.pid, signal.SIGCONT)
        assert rec.wait(timeout=TIMEOUT) == 0, rec.log_tail()  # it finished by itself
    report = check_file(path)
    assert not report.damaged and report.counts == {end: n + 1, other: 3 * n + 1}, (report.describe(), report.counts)
    assert report.last_stamps == {end: n * ms, other: n * ms}
    assert _header_stamps(path, end) == recorded[end] and _header_stamps(path, other) == recorded[other]
    text = rec.log_text()
    assert f"finished: every end topic delivered its message stamped 0.{n * ms:09d} s; " in text, text
    assert "WARN" not in text, text


def test_finishing_is_bounded_and_a_stop_signal_ends_it(tmp_path):
    """Finishing waits at most --finish-timeout for the end stamp, then closes with a warning naming the topic and
    its newest stamp; a stop signal (SIGINT) while it waits ends it at once, with a warning; both files complete.
    A bad --end-time/--end-topics is refused with one line."""
    from rclpy.duration import Duration
    from sensor_msgs.msg import JointState

    from mbs_ros.nodes import conversions as cv
    from mbs_ros.recording import check_file

    ros_env_defaults()
    topic = "/fin2/state"
    files = {k: tmp_path / f"{k}.mcap" for k in ("timeout", "sigint")}
    recs = {k: NodeProcess("mbs_ros.recording", name=f"finish_{k}", log_file=tmp_path / f"{k}.log",
                           args=[str(files[k]), "--topics", topic, "--end-time", "5", "--end-topics", topic,
                                 "--finish-timeout", "2" if k == "timeout" else "600"]) for k in files}
    with ros_helpers.Probe("test_finish_bounded", TIMEOUT) as probe, ros_helpers.running(recs):
        pub = probe.node.create_publisher(JointState, topic, QoSProfile(depth=100))
        for r in recs.values():
            assert r.wait_for_log(f"recording {topic} (", timeout=TIMEOUT), r.log_tail()
        probe.spin_until(lambda: pub.get_subscription_count() >= 2, what="both recorders matched",
                         alive=list(recs.values()))
        pub.publish(cv.joint_state_msg(1_500_000_000, ["j"], position=[0.0]))  # 1.5 s: short of the end, 5 s
        assert pub.wait_for_all_acked(Duration(seconds=TIMEOUT)), "the recorders did not acknowledge"
        for r in recs.values():
            r.send_signal(signal.SIGUSR2)
            assert r.wait_for_log("finishing: recording until", timeout=TIMEOUT), r.log_tail()
        recs["sigint"].send_signal(signal.SIGINT)
        codes = {k: r.wait(timeout=TIMEOUT) for k, r in recs.items()}
    assert codes == {"timeout": 0, "sigint": 0}, {k: r.log_tail() for k, r in recs.items()}
    assert ("finishing gave up after 2 s: no message stamped 5.000000000 s yet on /fin2/state (newest "
            "1.500000000 s)") in recs["timeout"].log_text(), recs["timeout"].log_tail()
    assert ("stopped by SIGINT while finishing: no message stamped 5.000000000 s on /fin2/state (newest "
            "1.500000000 s)") in recs["sigint"].log_text(), recs["sigint"].log_tail()
    for f in files.values():
        report = check_file(f)
        assert not report.damaged and report.counts == {topic: 1}, report.describe()
    for args, says in ((["--end-time", "1"], "--end-time and --end-topics go together"),
                       (["--end-time", "1", "--end-topics", "/elsewhere"], "--end-topics /elsewhere: not among")):
        out = subprocess.run([sys.executable, "-m", "mbs_ros.recording", str(tmp_path / "bad.mcap"), "--topics",
                              topic, *args], capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 2 and says in out.stderr.splitlines()[-1], out.stderr


# ----------------------------------------------------------------------------- message types from the graph


BOGUS = ["this/msg/X", "os/msg/path", "os/msg/Path", "subprocess/msg/Popen", "antigravity/msg/Fly",
         "std_msgs/msg/NoSuchType", "std_msgs/srv/Empty", "std_msgs/String/extra", "../msg/X", "std_msgs/msg/os"]


def test_message_type_resolution_imports_only_message_packages(monkeypatch):
    """A type name from the graph is checked in the ament index before anything is imported: a package that is
    not an installed interface package (this, os, subprocess, ...) or a type it does not define is refused with
    no import at all; std_msgs/msg/String resolves to its class."""
    import builtins
    import importlib

    from mbs_ros import recording

    imported = []
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def spy_import(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    def spy_import_module(name, *args, **kwargs):
        imported.append(name)
        return real_import_module(name, *args, **kwargs)

    import ament_index_python  # noqa: F401 - loaded before the spies: only what the check imports counts
    monkeypatch.setattr(builtins, "__import__", spy_import)
    monkeypatch.setattr(importlib, "import_module", spy_import_module)
    for name in BOGUS:
        with pytest.raises(recording.UnknownMessageType):
            recording.message_class(name)
        with pytest.raises(LookupError):
            recording.resolve_message_type(name)
    tried = [m for m in imported if m.split(".")[0] in {"this", "os", "subprocess", "antigravity"}
             or m.startswith("std_msgs")]
    assert tried == [], f"imports attempted for unknown types: {tried}"
    from std_msgs.msg import String

    assert recording.resolve_message_type("std_msgs/msg/String") == ("std_msgs", "String")
    assert recording.message_class("std_msgs/msg/String") is String
    assert recording.message_class("std_msgs/String") is String
    assert "std_msgs.msg" in imported  # the one import, of a real message package


class FakeGraphNode:
    """Just what a Recorder asks of its node, with a graph advertising bogus types next to a real one."""

    def __init__(self, topics):
        self.topics, self.warnings, self.subscribed = topics, [], []

    def resolve_topic_name(self, name):
        return name

    def get_clock(self):
        return self

    def now(self):
        return type("T", (), {"nanoseconds": 0})()

    def create_timer(self, _period, _callback):
        return type("Timer", (), {"cancel": lambda self: None})()

    def destroy_timer(self, _timer):
        pass

    def get_topic_names_and_types(self):
        return self.topics

    def get_publishers_info_by_topic(self, _name):
        return []  # no publisher yet: a real type is subscribed once one appears

    def get_logger(self):
        return self

    def warning(self, text):
        self.warnings.append(text)

    def info(self, _text):
        pass

    def create_subscription(self, *args, **kwargs):
        self.subscribed.append(args)


def test_recorder_skips_unknown_types_with_one_warning(tmp_path, monkeypatch):
    import importlib

    from mbs_ros.recording import Recorder

    node = FakeGraphNode([("/evil", ["this/msg/X"]), ("/evil_too", ["this/msg/X"]), ("/path", ["os/msg/path"]),
                          ("/chatter", ["std_msgs/msg/String"])])
    imported = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real(name, *a))
    rec = Recorder(node, tmp_path / "fake.mcap", all_topics=True)
    rec.discover()  # the discovery timer's next rounds: nothing new
    rec.discover()
    rec.close()
    assert sorted(node.warnings) == sorted([
        "not recording /evil: unknown message type this/msg/X ('this' is not an installed ROS interface package "
        "(not in the ament index's rosidl_interfaces))",
        "not recording /path: unknown message type os/msg/path ('os/msg/path' is not a ROS 2 message type name "
        "(package: lowercase, digits and _; type: PascalCase))"]), node.warnings
    assert imported == ["std_msgs.msg"] * len(imported) and imported  # only the real type's package
