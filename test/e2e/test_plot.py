"""mbs_ros.plot on MCAP files made here with known joint, base, reference and energy values: the tracking
errors equal the ones built in, the expected PNG files are written, missing topics are skipped with a note,
broken files give a clear error (CLI: exit code 2) or, when truncated, what was flushed."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("matplotlib")

from builtin_interfaces.msg import Duration, Time  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa: E402
from geometry_msgs.msg import Transform, Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import (  # noqa: E402
    JointTrajectory,
    JointTrajectoryPoint,
    MultiDOFJointTrajectory,
    MultiDOFJointTrajectoryPoint,
)

from mbs_ros import plot  # noqa: E402
from mbs_ros.recording import BagWriter  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
T0 = 1_700_000_000 * 10**9  # first stamp [ns]
RATE = 100  # Hz, joint_states and odom
DURATION = 3.0  # s
LATENCY = 1_000_000  # ns between a stamp and its receive (log) time
# joint reference 1 (stamped T0 + 0.2 s): waypoints at 0.5 s and 2.0 s after its start
REF_START = 0.2
REF_TIMES = (0.5, 2.0)
REF_Q = (np.array([0.1, -0.2]), np.array([0.7, 0.4]))
OFFSET = np.array([0.03, -0.04])  # measured - reference: ‖·‖ = 0.05
SWITCH = 2.5  # s: reference 2 (stamp 0: "start now", one point [0, 0]) is received
# base: translation from P0 to P1 between these reference times (same orientation Q_BASE), measured off by
BASE_TIMES = (0.4, 2.4)
P0, P1 = np.array([0.0, 0.0, 1.0]), np.array([2.0, 1.0, 1.5])
YAW = 0.3
Q_BASE = np.array([0.0, 0.0, math.sin(YAW / 2), math.cos(YAW / 2)])
BASE_OFFSET = np.array([0.0, 0.02, 0.0])  # [m] in the world
ROT_OFFSET = 0.1  # [rad] about z


def quintic(tau):
    tau = np.clip(tau, 0.0, 1.0)
    return 10 * tau**3 - 15 * tau**4 + 6 * tau**5


def joint_truth(t):
    """The reference the file implies at t [s from T0] (before the switch)."""
    s = quintic((t - REF_START - REF_TIMES[0]) / (REF_TIMES[1] - REF_TIMES[0]))
    return REF_Q[0] + s * (REF_Q[1] - REF_Q[0])


def base_truth(t):
    s = quintic((t - BASE_TIMES[0]) / (BASE_TIMES[1] - BASE_TIMES[0]))
    return P0 + s * (P1 - P0)


def time_msg(ns):
    return Time(sec=int(ns // 10**9), nanosec=int(ns % 10**9))


def duration_msg(s):
    return Duration(sec=int(s), nanosec=int(round((s - int(s)) * 1e9)))


def quat_mul(a, b):
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def write_synthetic(path, *, with_lonely=True, flush_period=None, other_statuses=False):
    """/arm: odom, joint_states, joint_reference (2 messages), base_reference, energy diagnostics.
    /lonely: odom only. ``other_statuses``: /diagnostics also carries statuses that are not energy records (see
    :func:`other_statuses`), and the controller's own ~/diagnostics topic is recorded too."""
    w = BagWriter(path, flush_period=flush_period)
    if other_statuses:  # before any state, with an earlier stamp: must not become the time origin
        da = DiagnosticArray(status=[other_statuses_at(-5.0)[2]])
        da.header.stamp = time_msg(T0 - 5 * 10**9)
        w.write_message("/diagnostics", da, T0 - 5 * 10**9)
    # joint reference 1, received before any state
    jt = JointTrajectory(joint_names=["shoulder", "elbow"])
    jt.header.stamp = time_msg(T0 + int(REF_START * 1e9))
    jt.points = [JointTrajectoryPoint(positions=list(q), time_from_start=duration_msg(t))
                 for q, t in zip(REF_Q, REF_TIMES)]
    w.write_message("/arm/joint_reference", jt, T0 - 100_000_000)
    mt = MultiDOFJointTrajectory(joint_names=["base"])
    mt.header.stamp = time_msg(T0)
    for p, t in zip((P0, P1), BASE_TIMES):
        tf = Transform()
        tf.translation.x, tf.translation.y, tf.translation.z = p
        tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w = Q_BASE
        mt.points.append(MultiDOFJointTrajectoryPoint(transforms=[tf], velocities=[Twist()],
                                                      time_from_start=duration_msg(t)))
    w.write_message("/arm/base_reference", mt, T0 - 100_000_000)
    q_rot = quat_mul(Q_BASE, [0.0, 0.0, math.sin(ROT_OFFSET / 2), math.cos(ROT_OFFSET / 2)])
    n = int(DURATION * RATE)
    switched = False
    for k in range(n):
        stamp = T0 + k * (10**9 // RATE)
        t = k / RATE
        if not switched and t >= SWITCH:
            jt2 = JointTrajectory(joint_names=["shoulder", "elbow"])  # stamp 0: starts when received
            jt2.points = [JointTrajectoryPoint(positions=[0.0, 0.0], time_from_start=duration_msg(0.2))]
            w.write_message("/arm/joint_reference", jt2, stamp - LATENCY // 2)
            switched = True
        q = (np.zeros(2) if switched else joint_truth(t)) + OFFSET
        js = JointState(name=["shoulder", "elbow"], position=list(q))
        js.header.stamp = time_msg(stamp)
        w.write_message("/arm/joint_states", js, stamp + LATENCY)
        od = Odometry()
        od.header.stamp = time_msg(stamp)
        od.header.frame_id = "world"
        p = base_truth(t) + BASE_OFFSET
        od.pose.pose.position.x, od.pose.pose.position.y, od.pose.pose.position.z = p
        o = od.pose.pose.orientation
        o.x, o.y, o.z, o.w = q_rot
        w.write_message("/arm/odom", od, stamp + LATENCY)
        if with_lonely:
            od2 = Odometry()
            od2.header.stamp = time_msg(stamp)
            od2.pose.pose.position.x = math.cos(t)
            od2.pose.pose.position.y = math.sin(t)
            w.write_message("/lonely/odom", od2, stamp + LATENCY)
        if k % 10 == 0:  # energy at 10 Hz: E = 1 + 0.5 t, work = 0.5 t, E_ref = 1
            values = {"kinetic_energy": 0.5 + 0.5 * t, "potential_energy": 0.5, "total_energy": 1.0 + 0.5 * t,
                      "total_energy_ref": 1.0, "work_applied": 0.5 * t, "energy_balance_residual": 0.0,
                      "base_group": "se3"}
            st = DiagnosticStatus(name="/arm/dynamics_node: rigid body", hardware_id="arm/base_link",
                                  values=[KeyValue(key=key, value=str(v)) for key, v in values.items()])
            controller, fault, _monitor = other_statuses_at(t)
            da = DiagnosticArray(status=[controller, st] if other_statuses else [st])
            da.header.stamp = time_msg(stamp)
            w.write_message("/diagnostics", da, stamp + LATENCY)
            if other_statuses:
                unstamped = DiagnosticArray(status=[fault])  # an error report without a stamp
                w.write_message("/diagnostics", unstamped, stamp + LATENCY)
                own = DiagnosticArray(status=[controller])
                own.header.stamp = time_msg(stamp)
                w.write_message("/arm/controller_node/diagnostics", own, stamp + LATENCY)
    return w


def other_statuses_at(t):
    """Statuses on /diagnostics that are not energy records: the controller's counters (numbers and text), the
    dynamics node's error report (numbers, no energy), and another package's status that carries a
    ``total_energy`` figure but not the dynamics node's energy keys."""
    def status(name, hardware_id, level, values):
        return DiagnosticStatus(name=name, hardware_id=hardware_id, level=level, message="",
                                values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])

    controller = status("/arm/controller_node: controller", "arm/base_link", DiagnosticStatus.WARN,
                        {"commands": int(100 * t), "saturated_commands": 3, "rejected_odom": 0, "control_errors": 0,
                         "max_force": 100.0, "max_torque": 50.0, "max_effort": "1.0 2.0", "has_state": True})
    fault = status("/arm/dynamics_node: fault", "arm/base_link", DiagnosticStatus.ERROR,
                   {"fault": "cmd_wrench non-finite", "faults": 1, "sim_time": t, "steps": int(500 * t)})
    monitor = status("/battery_monitor: pack", "battery", DiagnosticStatus.OK,
                     {"total_energy": 5400.0, "voltage": 24.1})
    return controller, fault, monitor


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("plot") / "synthetic.mcap"
    write_synthetic(path).close()
    return path


def test_tracking_errors_match_the_built_in_values(synthetic):
    rec = plot.load(synthetic, progress="never")
    assert rec.namespaces == ["/arm", "/lonely"]
    jt = plot.joint_tracking(rec, "/arm")
    assert jt.names == ("shoulder", "elbow")
    assert np.allclose(jt.t, np.arange(int(DURATION * RATE)) / RATE, atol=1e-12)
    before = jt.t < SWITCH
    expected = np.array([joint_truth(t) for t in jt.t[before]])
    np.testing.assert_allclose(jt.q_ref[before], expected, atol=1e-9)
    np.testing.assert_allclose(jt.error_norm, 0.05, atol=1e-9)  # also after the switch, on the new reference
    np.testing.assert_allclose(jt.q_ref[~before], 0.0, atol=1e-12)
    # hold the first point before it, the last after it
    np.testing.assert_allclose(jt.q_ref[jt.t < REF_START + REF_TIMES[0]] - REF_Q[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(jt.q_ref[(jt.t > REF_START + REF_TIMES[1]) & before] - REF_Q[1], 0.0, atol=1e-12)

    bt = plot.base_tracking(rec, "/arm")
    np.testing.assert_allclose(bt.p_ref, np.array([base_truth(t) for t in bt.t]), atol=1e-9)
    np.testing.assert_allclose(bt.position_error, 0.02, atol=1e-9)
    np.testing.assert_allclose(bt.rotation_error, ROT_OFFSET, atol=1e-6)
    assert plot.base_tracking(rec, "/lonely") is None

    e = plot.energy_series(rec, "/arm/dynamics_node: rigid body")
    np.testing.assert_allclose(e["power"], 0.5, atol=1e-9)
    np.testing.assert_allclose(e["applied_power"], 0.5, atol=1e-9)
    np.testing.assert_allclose(e["total_energy"] - e["total_energy_ref"] - e["work_applied"], 0.0, atol=1e-12)


def test_plots_written_and_missing_topics_noted(synthetic, tmp_path):
    rec = plot.load(synthetic, progress="never")
    written = plot.plot_recording(rec, tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(["arm_trajectory.png", "arm_joints.png", "arm_base.png", "arm_tracking.png",
                            "arm_energy.png", "lonely_trajectory.png"])
    for p in written:
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000, p
    notes = "\n".join(rec.notes)
    assert "/lonely: no energy status" in notes
    assert "/lonely: no reference" in notes


def test_other_diagnostic_statuses_are_not_energy_records(synthetic, tmp_path):
    """Statuses without the energy keys, on /diagnostics beside the energy status or alone (and the controller's
    ~/diagnostics topic): no extra namespace, no earlier time origin, the same energy series and plots."""
    path = tmp_path / "with_statuses.mcap"
    write_synthetic(path, other_statuses=True).close()
    rec, plain = plot.load(path, progress="never"), plot.load(synthetic, progress="never")
    assert "/arm/controller_node/diagnostics" in rec.topics
    assert rec.namespaces == plain.namespaces == ["/arm", "/lonely"]
    assert list(rec.diagnostics) == ["/arm/dynamics_node: rigid body"]
    assert rec.t0() == plain.t0() == T0
    name = "/arm/dynamics_node: rigid body"
    e, e_plain = plot.energy_series(rec, name), plot.energy_series(plain, name)
    assert sorted(e) == sorted(e_plain)
    for key in e:
        np.testing.assert_array_equal(e[key], e_plain[key], err_msg=key)
    np.testing.assert_array_equal(plot.joint_tracking(rec, "/arm").t, plot.joint_tracking(plain, "/arm").t)
    written = plot.plot_recording(rec, tmp_path / "png")
    assert sorted(p.name for p in written) == sorted(["arm_trajectory.png", "arm_joints.png", "arm_base.png",
                                                      "arm_tracking.png", "arm_energy.png", "lonely_trajectory.png"])


def test_cli(synthetic, tmp_path):
    out = subprocess.run([sys.executable, "-m", "mbs_ros.plot", str(synthetic), "--out", str(tmp_path / "png"),
                          "--progress", "always"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    listed = [line.strip() for line in out.stdout.splitlines() if line.strip().endswith(".png")]
    assert len(listed) == 6 and all(Path(p).is_file() for p in listed)
    assert "100%" in out.stderr  # the textual progress (stderr is not a terminal here)
    assert "note: /lonely: no energy status" in out.stderr


def test_only_some_topics(tmp_path):
    """A file without the topics a plot needs: notes, no crash, no plots."""
    path = tmp_path / "other.mcap"
    with BagWriter(path) as w:
        js = JointState(name=["a"], position=[1.0])
        w.write_message("/solo/joint_states", js, T0)
        w.write_message("/chatter_like", Duration(sec=1), T0)
    rec = plot.load(path, progress="never")
    written = plot.plot_recording(rec, tmp_path / "png")
    assert [p.name for p in written] == ["solo_joints.png"]
    notes = "\n".join(rec.notes)
    assert "no /solo/odom: trajectory plot skipped" in notes
    assert "no /solo/joint_reference" in notes
    empty = tmp_path / "empty.mcap"
    BagWriter(empty).close()
    out = subprocess.run([sys.executable, "-m", "mbs_ros.plot", str(empty), "--out", str(tmp_path / "e")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "wrote no plots" in out.stdout and "nothing to plot" in out.stderr


def test_unreadable_files(tmp_path):
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(b"this is not an mcap file at all" * 10)
    for path, reason in ((bad, "not an MCAP file"), (tmp_path / "missing.mcap", "cannot open")):
        with pytest.raises(plot.PlotError, match=reason):
            plot.load(path)
        out = subprocess.run([sys.executable, "-m", "mbs_ros.plot", str(path), "--out", str(tmp_path / "x")],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and out.stderr.startswith("error: ") and reason in out.stderr


def _inside_a_record(data: bytes, at: int) -> int:
    """A cut position in the middle of the MCAP record that holds byte ``at`` (records: opcode, uint64 little-endian
    length, body; after the 8-byte magic), so that the cut truncates a record whatever the batching."""
    pos = 8
    while pos + 9 <= len(data):
        end = pos + 9 + int.from_bytes(data[pos + 1:pos + 9], "little")
        if end > at:
            return min(pos + 1 + (end - pos) // 2, len(data) - 1)
        pos = end
    return at


def test_truncated_file_gives_the_flushed_messages(tmp_path):
    path = tmp_path / "cut.mcap"
    w = write_synthetic(path, with_lonely=False, flush_period=0.0)  # a chunk per message batch
    w.flush()
    size = path.stat().st_size
    data = path.read_bytes()
    w.close()
    cut = tmp_path / "cut_short.mcap"
    cut.write_bytes(data[: _inside_a_record(data[:size], size * 2 // 3)])
    rec = plot.load(cut, progress="never")
    (warning,) = rec.warnings  # once, naming the file, what was read and what was lost
    # the cut lands in a chunk ("cut off") or, when the writer thread batched differently, in a record between
    # chunks ("ends in the middle of"): both name the truncation. (At 2/3 of the size itself a busy machine's
    # batching once put the cut exactly between two records: then nothing is truncated and only "no summary" is
    # true, so the cut is moved into the record that holds that byte.)
    assert str(cut) in warning and "no summary" in warning, warning
    assert "cut off" in warning or "the file ends in the middle of" in warning, warning
    assert re.search(r"Read \d+ complete messages", warning) and "mbs_ros.recording recover" in warning
    n = len(rec.odom["/arm"])
    assert 0.5 * DURATION * RATE < n < DURATION * RATE
    full = plot.load(path, progress="never")
    assert full.warnings == []
    np.testing.assert_array_equal(rec.odom["/arm"], full.odom["/arm"][:n])
    assert plot.plot_recording(rec, tmp_path / "png")
    header_only = tmp_path / "header_only.mcap"
    header_only.write_bytes(data[:40])
    with pytest.raises(plot.PlotError, match="no readable data"):
        plot.load(header_only)


def interrupted_copy(src, dst, monkeypatch, at=-1):
    """``src`` copied with mcap's Writer the way the recorder wrote before its writer thread: a KeyboardInterrupt
    lands in the middle of writing message ``at`` (after its channel id: the record's length is never filled
    in), and the file is then closed normally, summary and all, the half record inside its last chunk."""
    from mcap.opcode import Opcode
    from mcap.reader import make_reader
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
    return len(messages)


def test_file_with_a_half_written_record_warns_once_and_plots(synthetic, tmp_path, monkeypatch):
    """The hostile tester's file: complete summary, but a record cut in half in the last chunk. The indexed
    read fails on it (plot used to stop with "damaged ()"); now every complete message is plotted, with one
    warning."""
    from mcap.reader import make_reader

    damaged = tmp_path / "half_record.mcap"
    total = interrupted_copy(synthetic, damaged, monkeypatch)
    with open(damaged, "rb") as f, pytest.raises(Exception):  # the indexed read of mcap breaks on it
        list(make_reader(f).iter_messages())
    rec = plot.load(damaged, progress="never")
    (warning,) = rec.warnings
    assert str(damaged) in warning and "broken Message record" in warning, warning
    assert f"Read {total - 1} complete messages" in warning, warning
    full = plot.load(synthetic, progress="never")
    # everything but the interrupted last message (the last /diagnostics or odom) is there, unchanged
    np.testing.assert_array_equal(rec.odom["/arm"], full.odom["/arm"][:len(rec.odom["/arm"])])
    assert len(rec.odom["/arm"]) >= len(full.odom["/arm"]) - 1
    assert rec.message_count == full.message_count - 1
    out = subprocess.run([sys.executable, "-m", "mbs_ros.plot", str(damaged), "--out", str(tmp_path / "png")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and str(damaged) in warnings[0], out.stderr
    assert "damaged ()" not in out.stderr
    assert len([line for line in out.stdout.splitlines() if line.strip().endswith(".png")]) == 6


# ------------------------------------------------------------------- a fixed-base arm: animation, units, EE path

ARM_URDF = """<?xml version="1.0"?>
<robot name="bot">
  <material name="blue"><color rgba="0.2 0.3 0.8 1"/></material>
  <link name="base_link">
    <inertial><origin xyz="0 0 0.05"/><mass value="2.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <visual><origin xyz="0 0 0.05"/><geometry><box size="0.2 0.2 0.1"/></geometry><material name="blue"/></visual>
  </link>
  <link name="link1">
    <inertial><origin xyz="0.25 0 0"/><mass value="1.0"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial>
    <visual><origin xyz="0.25 0 0" rpy="0 1.5707963267948966 0"/>
      <geometry><cylinder radius="0.03" length="0.5"/></geometry></visual>
  </link>
  <link name="link2">
    <inertial><mass value="0.5"/><inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
    <visual><geometry><sphere radius="0.05"/></geometry>
      <material name="red"><color rgba="0.8 0.1 0.1 1"/></material></visual>
  </link>
  <link name="tool">
    <inertial><mass value="0.2"/><inertia ixx="0.0001" ixy="0" ixz="0" iyy="0.0001" iyz="0" izz="0.0001"/></inertial>
  </link>
  <joint name="j1" type="revolute"><parent link="base_link"/><child link="link1"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="3"/></joint>
  <joint name="j2" type="prismatic"><parent link="link1"/><child link="link2"/><origin xyz="0.5 0 0"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="1" effort="10" velocity="1"/></joint>
  <joint name="tool_joint" type="fixed"><parent link="link2"/><child link="tool"/><origin xyz="0.3 0 0"/></joint>
</robot>
"""
ARM_RATE, ARM_DURATION = 50, 3.0


def arm_q(t):
    return 0.8 * math.sin(2.0 * t), 0.1 * t


def arm_tool(t):
    """The tool's origin in the world: R_z(j1) [0.8 + j2, 0, 0] + [0, 0, 0.1]."""
    j1, j2 = arm_q(t)
    r = 0.8 + j2
    return np.array([r * math.cos(j1), r * math.sin(j1), 0.1])


def _transform(parent, child, stamp, xyz, yaw=0.0):
    from geometry_msgs.msg import TransformStamped
    tr = TransformStamped()
    tr.header.frame_id, tr.child_frame_id = parent, child
    tr.header.stamp = time_msg(stamp)
    tr.transform.translation.x, tr.transform.translation.y, tr.transform.translation.z = xyz
    tr.transform.rotation.z, tr.transform.rotation.w = math.sin(yaw / 2), math.cos(yaw / 2)
    return tr


def write_arm(path, *, description=True, tf=True, odom=True, joint_states=True):
    """/bot: a fixed arm (ARM_URDF, links prefixed bot/ as the dynamics node publishes them) moving j1 (revolute)
    and j2 (prismatic) by arm_q, with a joint reference."""
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    from mbs_ros.nodes.markers import prefixed_urdf

    with BagWriter(path) as w:
        if description:
            w.write_message("/bot/robot_description", String(data=prefixed_urdf(ARM_URDF, lambda n: "bot/" + n)),
                            T0 - 1000)
        if tf:
            w.write_message("/tf_static", TFMessage(transforms=[_transform("bot/link2", "bot/tool", T0,
                                                                           (0.3, 0.0, 0.0))]), T0 - 1000)
        jt = JointTrajectory(joint_names=["j1", "j2"])
        jt.header.stamp = time_msg(T0)
        jt.points = [JointTrajectoryPoint(positions=[0.0, 0.0], time_from_start=duration_msg(0.0)),
                     JointTrajectoryPoint(positions=[0.5, 0.2], time_from_start=duration_msg(2.0))]
        w.write_message("/bot/joint_reference", jt, T0 - 1000)
        for k in range(int(ARM_DURATION * ARM_RATE)):
            stamp = T0 + k * (10**9 // ARM_RATE)
            t = k / ARM_RATE
            j1, j2 = arm_q(t)
            if joint_states:
                js = JointState(name=["j1", "j2"], position=[j1, j2])
                js.header.stamp = time_msg(stamp)
                w.write_message("/bot/joint_states", js, stamp + LATENCY)
            if odom:
                od = Odometry()
                od.header.stamp = time_msg(stamp)
                od.header.frame_id, od.child_frame_id = "world", "bot/base_link"
                od.pose.pose.orientation.w = 1.0
                w.write_message("/bot/odom", od, stamp + LATENCY)
            if tf:
                w.write_message("/tf", TFMessage(transforms=[
                    _transform("world", "bot/base_link", stamp, (0.0, 0.0, 0.0)),
                    _transform("bot/base_link", "bot/link1", stamp, (0.0, 0.0, 0.1), yaw=j1),
                    _transform("bot/link1", "bot/link2", stamp, (0.5 + j2, 0.0, 0.0))]), stamp + LATENCY)
            if k % 10 == 0:  # energy at 5 Hz, no potential energy: the kinetic is the total
                values = {"kinetic_energy": 1.0 + t, "potential_energy": 0.0, "total_energy": 1.0 + t,
                          "total_energy_ref": 1.0, "work_applied": t, "energy_balance_residual": 0.0}
                st = DiagnosticStatus(name="/bot/dynamics_node: multibody", hardware_id="bot/base_link",
                                      values=[KeyValue(key=key, value=str(v)) for key, v in values.items()])
                da = DiagnosticArray(status=[st])
                da.header.stamp = time_msg(stamp)
                w.write_message("/diagnostics", da, stamp + LATENCY)
    return path


@pytest.fixture(scope="module")
def arm_file(tmp_path_factory):
    return write_arm(tmp_path_factory.mktemp("arm") / "arm.mcap")


def gif_frames(path):
    from PIL import Image
    with Image.open(path) as im:
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB"), dtype=float))
        return im.size, frames


def test_animation_gif_frame_count_size_and_motion(arm_file, tmp_path):
    from mbs_ros import animate
    rec = plot.load(arm_file, progress="never")
    out = tmp_path / "arm.gif"
    res = animate.animate(rec, out, fps=10, dpi=50)
    # stamps 0 .. 2.98 s at 10 fps: every 0.1 s in real time
    expected = int(math.floor((ARM_DURATION - 1 / ARM_RATE) * 10)) + 1
    assert res.frames == expected and res.speed == 1.0
    assert res.drawn_as == {"/bot": "shapes from /bot/robot_description"}
    assert res.sources["/bot"].startswith("/tf")
    size, frames = gif_frames(out)
    assert size == res.size == (320, 240)
    assert len(frames) == expected
    # the robot moves: the picture below the time stamp differs between frames
    below = slice(int(0.12 * size[1]), None)
    diff = [np.abs(frames[0][below] - f[below]).mean() for f in (frames[len(frames) // 2], frames[-1])]
    assert min(diff) > 0.5, diff
    # a longer run than max_frames allows: max_frames frames, shown faster
    res = animate.animate(rec, tmp_path / "fast.gif", fps=10, max_frames=8, dpi=40)
    assert res.frames == 8 and res.speed == pytest.approx((ARM_DURATION - 1 / ARM_RATE) / 7 * 10)
    assert len(gif_frames(tmp_path / "fast.gif")[1]) == 8


def test_link_poses_from_tf_and_from_the_model_agree_with_the_kinematics(arm_file):
    from mbs_ros import animate
    rec = plot.load(arm_file, progress="never")
    robot = animate.robots(rec)["/bot"]
    assert robot.joint_types == {"j1": "revolute", "j2": "prismatic", "tool_joint": "fixed"}
    assert {v.link: v.kind for v in robot.visuals} == {"bot/base_link": "box", "bot/link1": "cylinder",
                                                       "bot/link2": "sphere", "bot/tool": "box"}  # tool: inertia box
    stamps = T0 + np.arange(0, int(ARM_DURATION * ARM_RATE), 7) * (10**9 // ARM_RATE)
    truth = np.array([arm_tool((s - T0) * 1e-9) for s in stamps])
    for source in ("tf", "model"):
        poses = animate.link_poses(rec, "/bot", stamps, robot, source=source)
        assert animate.end_effector(poses) == "bot/tool", source
        np.testing.assert_allclose(poses.T[:, poses.index("bot/tool"), :3, 3], truth, atol=1e-9, err_msg=source)
    assert "Model(/bot/robot_description)" in animate.link_poses(rec, "/bot", stamps, robot, "model").source


def test_animation_without_robot_description(tmp_path):
    """No robot_description and no --model: /tf frames as points (with a note), or the base from odom; a --model
    file gives the shapes back; nothing to pose, an unknown format or mp4 without ffmpeg: a clear error."""
    from matplotlib import animation as mpl_animation

    from mbs_ros import animate
    bare = write_arm(tmp_path / "bare.mcap", description=False)
    rec = plot.load(bare, progress="never")
    res = animate.animate(rec, tmp_path / "points.gif", fps=5, dpi=40)
    assert res.drawn_as == {"/bot": "frames as points"}
    assert any("no /bot/robot_description in the file and no --model: link frames of /tf as points" in n
               for n in rec.notes), rec.notes
    assert len(gif_frames(tmp_path / "points.gif")[1]) == res.frames
    urdf = tmp_path / "bot.urdf"
    urdf.write_text(ARM_URDF)
    rec = plot.load(bare, progress="never")
    res = animate.animate(rec, tmp_path / "model.gif", fps=5, dpi=40, model=str(urdf))
    assert res.drawn_as == {"/bot": f"shapes from --model {urdf}"}
    # without /tf: the links from odom + joint_states with the model; without either: the base alone
    no_tf = write_arm(tmp_path / "no_tf.mcap", tf=False, description=False)
    res = animate.animate(plot.load(no_tf, progress="never"), tmp_path / "no_tf.gif", fps=5, dpi=40, model=str(urdf))
    assert res.sources["/bot"].startswith("/bot/odom + /bot/joint_states + Model(--model")
    res = animate.animate(plot.load(no_tf, progress="never"), tmp_path / "base.gif", fps=5, dpi=40)
    assert res.sources == {"/bot": "/bot/odom"} and res.drawn_as == {"/bot": "frames as points"}
    tf_only = write_arm(tmp_path / "tf_only.mcap", description=False, odom=False, joint_states=False)
    res = animate.animate(plot.load(tf_only, progress="never"), tmp_path / "tf_only.gif", fps=5, dpi=40)
    assert res.drawn_as == {"/bot": "frames as points"} and res.sources["/bot"] == "/tf + /tf_static"
    nothing = write_arm(tmp_path / "nothing.mcap", description=False, tf=False, odom=False, joint_states=False)
    with pytest.raises(animate.AnimationError, match="nothing to animate: no /tf, no <ns>/odom"):
        animate.animate(plot.load(nothing, progress="never"), tmp_path / "x.gif")
    with pytest.raises(animate.AnimationError, match="unknown animation format '.avi'"):
        animate.animate(rec, tmp_path / "x.avi")
    original = mpl_animation.FFMpegWriter.isAvailable
    try:
        mpl_animation.FFMpegWriter.isAvailable = classmethod(lambda cls: False)
        with pytest.raises(animate.AnimationError, match="needs ffmpeg, which is not on PATH"):
            animate.animate(rec, tmp_path / "x.mp4")
    finally:
        mpl_animation.FFMpegWriter.isAvailable = original
    assert not (tmp_path / "x.mp4").exists()


def test_animate_cli(arm_file, tmp_path):
    out = subprocess.run([sys.executable, "-m", "mbs_ros.plot", str(arm_file), "--animate", str(tmp_path / "a.gif"),
                          "--fps", "4", "--max-frames", "6"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "a.gif: 6 frames, 640x480 px, 4 fps" in out.stdout and "wrote no plots" not in out.stdout
    assert len(gif_frames(tmp_path / "a.gif")[1]) == 6
    out = subprocess.run([sys.executable, "-m", "mbs_ros.plot", str(arm_file), "--animate", str(tmp_path / "a.avi")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "error: " in out.stderr and "unknown animation format" in out.stderr


def test_animate_module_cli(arm_file, tmp_path):
    """issue 31 item 23: ``python -m mbs_ros.animate --help`` printed nothing (the package had no ``__main__``)."""
    out = subprocess.run([sys.executable, "-m", "mbs_ros.animate", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m mbs_ros.animate") and "OUT.gif|OUT.mp4" in out.stdout
    assert "--max-frames" in out.stdout and "--model" in out.stdout
    out = subprocess.run([sys.executable, "-m", "mbs_ros.animate", str(arm_file), str(tmp_path / "b.gif"),
                          "--fps", "4", "--max-frames", "5"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "b.gif: 5 frames, 640x480 px, 4 fps" in out.stdout
    assert len(gif_frames(tmp_path / "b.gif")[1]) == 5 and "plots" not in out.stdout  # the animation only
    out = subprocess.run([sys.executable, "-m", "mbs_ros.animate"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "usage: python -m mbs_ros.animate" in out.stderr


def _labels(fig):
    return [a.get_ylabel() for a in fig.axes if a.get_visible()]


def test_axis_units_and_shared_time_axes(arm_file, synthetic, tmp_path):
    figs = {}
    plot.plot_recording(plot.load(arm_file, progress="never"), tmp_path / "arm", figures=figs)
    assert _labels(figs["bot_joints.png"]) == ["q [rad]", "q [m]"]
    assert _labels(figs["bot_tracking.png"]) == ["‖q − q_ref‖ [rad and m mixed]"]
    figs_bare = {}
    rec = plot.load(write_arm(tmp_path / "bare.mcap", description=False), progress="never")
    plot.plot_recording(rec, tmp_path / "bare", figures=figs_bare)
    assert _labels(figs_bare["bot_joints.png"]) == ["q [rad or m]"] * 2
    assert any("joint types unknown" in n for n in rec.notes)
    plot.plot_recording(plot.load(synthetic, progress="never"), tmp_path / "syn", figures=figs)
    for name in ("bot_joints.png", "bot_energy.png", "arm_joints.png", "arm_base.png", "arm_tracking.png",
                 "arm_energy.png"):
        axes = [a for a in figs[name].axes if a.get_visible()]
        assert len(axes) > 1, name
        for a in axes:
            assert a.get_shared_x_axes().joined(axes[0], a), name
            assert re.search(r"\[.+\]$", a.get_ylabel()), (name, a.get_ylabel())  # every axis with its unit
        # the time axis is labelled, with its ticks, under the lowest panel of every column
        columns = {}
        for a in axes:
            x0 = round(a.get_position().x0, 3)
            if x0 not in columns or a.get_position().y0 < columns[x0].get_position().y0:
                columns[x0] = a
        for a in columns.values():
            assert a.get_xlabel() == "t [s]", name
            assert any(label.get_visible() for label in a.get_xticklabels()), name


def test_energy_curves_stay_visible(arm_file, tmp_path):
    """Potential 0: the kinetic curve equals the total; it is drawn over it, in another style; 5 Hz samples have
    markers and the rate is in the title."""
    figs = {}
    plot.plot_recording(plot.load(arm_file, progress="never"), tmp_path, figures=figs)
    a = figs["bot_energy.png"].axes[0]
    lines = {ln.get_label(): ln for ln in a.get_lines()}
    total, kinetic = lines["total E"], lines["kinetic"]
    np.testing.assert_allclose(total.get_ydata(), kinetic.get_ydata())
    assert kinetic.get_zorder() > total.get_zorder()
    assert kinetic.get_linestyle() != total.get_linestyle() and total.get_linewidth() > kinetic.get_linewidth()
    assert kinetic.get_marker() == "."
    assert "/diagnostics at 5 Hz" in a.get_title()


def test_fixed_arm_trajectory_is_the_end_effector_path(arm_file, tmp_path):
    """The base does not move: the trajectory plot is the path of the last link (from /tf, or from the model
    without /tf), not a dot."""
    truth = np.array([arm_tool(k / ARM_RATE) for k in range(int(ARM_DURATION * ARM_RATE))])
    urdf = tmp_path / "bot.urdf"
    urdf.write_text(ARM_URDF)
    cases = {"tf": (arm_file, None), "model": (write_arm(tmp_path / "no_tf.mcap", tf=False), None),
             "--model": (write_arm(tmp_path / "bare.mcap", tf=False, description=False), str(urdf))}
    for case, (path, model) in cases.items():
        figs = {}
        plot.plot_recording(plot.load(path, progress="never"), tmp_path / case, figures=figs, model=model)
        fig = figs["bot_trajectory.png"]
        assert "origin of bot/tool" in fig._suptitle.get_text(), case
        path_xy = next(ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("end effector"))
        xy = np.column_stack([path_xy.get_xdata(), path_xy.get_ydata()])
        np.testing.assert_allclose(xy, truth[:, :2], atol=1e-9, err_msg=case)
        assert np.ptp(xy, axis=0).max() > 0.5, case
    # no /tf and no robot: the old figure, with a note
    rec = plot.load(cases["--model"][0], progress="never")
    plot.plot_recording(rec, tmp_path / "none")
    assert any("the base does not move and neither /tf nor a robot_description" in n for n in rec.notes)


def test_animate_and_the_reader_do_not_import_plot():
    """The recording reader sits below plot and animate, and plot -> animate is the one direction: importing the
    reader or animate loads neither mbs_ros.plot nor (for the reader) mbs_ros.animate."""
    code = ("import sys, mbs_ros.analysis.reader, mbs_ros.analysis.series; a = 'mbs_ros.animate' in sys.modules; "
            "import mbs_ros.animate; print(a, 'mbs_ros.plot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


# ------------------------------------------------------------------ issue 31 item 25: SE(2) vessels, estimates
def _yaw_quat(psi):
    return np.array([0.0, 0.0, math.sin(psi / 2), math.cos(psi / 2)])


def _odom(stamp, p, q, variance=None):
    od = Odometry()
    od.header.stamp = time_msg(stamp)
    od.header.frame_id = "world"
    od.pose.pose.position.x, od.pose.pose.position.y, od.pose.pose.position.z = (float(x) for x in p)
    o = od.pose.pose.orientation
    o.x, o.y, o.z, o.w = (float(x) for x in q)
    if variance is not None:
        cov = [0.0] * 36
        for i, v in enumerate(variance):
            cov[7 * i] = float(v)
        od.pose.covariance = cov
    return od


BOAT_YAW_RATE = 0.4  # rad/s
EST_OFFSET = np.array([0.1, -0.05, 0.02])  # m, estimate − truth
EST_YAW_OFFSET = 0.02  # rad about z, R_truthᵀ R_estimate
EST_SIGMA = np.array([0.05, 0.06, 0.07, 0.01, 0.02, 0.03])  # the estimate's standard deviations


def _rov_truth(t):
    """A 3-D motion: a helix, rolling slowly (so that it is not planar)."""
    p = np.array([math.cos(t), math.sin(t), -2.0 - 0.1 * t])
    roll = 0.05 * t
    q = quat_mul(_yaw_quat(0.3 * t), [math.sin(roll / 2), 0.0, 0.0, math.cos(roll / 2)])
    return p, q


@pytest.fixture(scope="module")
def vessel_and_estimate(tmp_path_factory):
    """/boat: an SE(2) vessel (z = 0, orientation about z: heading 0.4 t) following a planar base_reference;
    /rov: a 3-D truth and /rov/estimate/odom, the truth offset by EST_OFFSET and a EST_YAW_OFFSET turn about the
    body z, with the pose covariance diag(EST_SIGMA²), at the truth's stamps."""
    path = tmp_path_factory.mktemp("se2") / "se2_estimate.mcap"
    w = BagWriter(path)
    mt = MultiDOFJointTrajectory(joint_names=["base"])
    mt.header.stamp = time_msg(T0)
    for t, p, psi in ((0.0, (0.0, 0.0, 0.0), 0.0), (2.0, (2.0, 1.0, 0.0), 0.8)):
        tf = Transform()
        tf.translation.x, tf.translation.y, tf.translation.z = p
        tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w = _yaw_quat(psi)
        mt.points.append(MultiDOFJointTrajectoryPoint(transforms=[tf], velocities=[Twist()],
                                                      time_from_start=duration_msg(t)))
    w.write_message("/boat/base_reference", mt, T0 - 100_000_000)
    for k in range(int(DURATION * RATE)):
        stamp = T0 + k * (10**9 // RATE)
        t = k / RATE
        w.write_message("/boat/odom", _odom(stamp, (t, 0.5 * t * t, 0.0), _yaw_quat(BOAT_YAW_RATE * t)),
                        stamp + LATENCY)
        p, q = _rov_truth(t)
        w.write_message("/rov/odom", _odom(stamp, p, q), stamp + LATENCY)
        q_est = quat_mul(q, _yaw_quat(EST_YAW_OFFSET))
        w.write_message("/rov/estimate/odom", _odom(stamp, p + EST_OFFSET, q_est, EST_SIGMA ** 2),
                        stamp + LATENCY)
    w.close()
    return path


def _line(ax, label):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)


def test_an_se2_vessel_gets_a_heading_plot_and_no_flat_z_panels(vessel_and_estimate, tmp_path):
    """issue 31 item 25: a planar vessel's plots had a flat z panel (height, base z) and no heading."""
    figs = {}
    plot.plot_recording(plot.load(vessel_and_estimate, progress="never"), tmp_path, figures=figs)
    t = np.arange(int(DURATION * RATE)) / RATE
    trajectory = figs["boat_trajectory.png"]
    labels = [a.get_ylabel() for a in trajectory.axes]
    assert "z [m]" not in labels and labels[1] == "heading ψ [deg]", labels
    x, y = _line(trajectory.axes[1], "heading")
    np.testing.assert_allclose(x, t, atol=1e-9)
    np.testing.assert_allclose(y, np.degrees(BOAT_YAW_RATE * t), atol=1e-9)
    base = figs["boat_base.png"]
    assert [a.get_ylabel() for a in base.axes] == ["x [m]", "y [m]", "heading ψ [deg]", "rotation error [deg]"]
    _x, y = _line(base.axes[2], "measured")
    np.testing.assert_allclose(y, np.degrees(BOAT_YAW_RATE * t), atol=1e-9)
    _x, ref = _line(base.axes[2], "reference")
    assert ref[0] == pytest.approx(0.0, abs=1e-9) and ref[-1] == pytest.approx(math.degrees(0.8), abs=1e-6)
    # a 3-D motion keeps its z panels
    assert figs["rov_trajectory.png"].axes[1].get_ylabel() == "z [m]"


def test_an_estimate_is_plotted_against_the_truth_with_its_error_and_3_sigma_band(vessel_and_estimate, tmp_path):
    """issue 31 item 25: the estimator's plots showed the estimate labelled "measured", no truth, no error. Now
    <ns>_estimate_estimate.png: per component the estimate and the truth (the recorded values), and the error
    (the built-in offsets) inside its ±3σ band (the recorded covariance)."""
    figs = {}
    rec = plot.load(vessel_and_estimate, progress="never")
    plot.plot_recording(rec, tmp_path, figures=figs)
    fig = figs["rov_estimate_estimate.png"]
    axes = np.array(fig.axes).reshape(6, 2)
    names = ["x [m]", "y [m]", "z [m]", "roll [deg]", "pitch [deg]", "yaw [deg]"]
    assert [a.get_ylabel() for a in axes[:, 0]] == names
    t = np.arange(int(DURATION * RATE)) / RATE
    truth = np.array([_rov_truth(s)[0] for s in t])
    for i in range(3):
        x, y = _line(axes[i, 0], "truth")
        np.testing.assert_allclose(x, t, atol=1e-9)
        np.testing.assert_allclose(y, truth[:, i], atol=1e-12)
        _x, y = _line(axes[i, 0], "estimate")
        np.testing.assert_allclose(y, truth[:, i] + EST_OFFSET[i], atol=1e-12)
    expected_error = np.concatenate([EST_OFFSET, [0.0, 0.0, math.degrees(EST_YAW_OFFSET)]])
    expected_sigma = np.concatenate([EST_SIGMA[:3], np.degrees(EST_SIGMA[3:])])
    for i in range(6):
        _x, err = _line(axes[i, 1], "estimate − truth")
        np.testing.assert_allclose(err, expected_error[i], atol=1e-9)
        (band,) = axes[i, 1].collections
        vertices = band.get_paths()[0].vertices[:, 1]
        assert vertices.max() == pytest.approx(3 * expected_sigma[i], rel=1e-9)
        assert vertices.min() == pytest.approx(-3 * expected_sigma[i], rel=1e-9)
    # the estimate's own generic plots call it the estimate, not "measured"
    assert "rov_estimate_trajectory.png" in figs
    assert not any("measured" in ln.get_label() for a in figs["rov_estimate_trajectory.png"].axes
                   for ln in a.get_lines())
