"""tools.longest_callback's reading of a recording: the dynamics nodes' /diagnostics statuses with the longest
callback, per node, in order, their numbers as numbers; other statuses and topics left out. The recording is
written here with the values known (a DiagnosticArray per report), no node runs."""
from __future__ import annotations

import pytest

pytest.importorskip("rclpy")


def _status(name, values):
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

    return DiagnosticStatus(name=name, values=[KeyValue(key=k, value=v) for k, v in values.items()])


def test_reports_are_the_dynamics_nodes_longest_callbacks(tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import String

    from mbs_ros.recording import BagWriter
    from tools.longest_callback import reports

    path = tmp_path / "run.mcap"
    with BagWriter(path, flush_period=None) as w:
        for i, (longest, recent) in enumerate([("0.5", "0.5"), ("2.25", "2.25"), ("2.25", "0.75")]):
            msg = DiagnosticArray(status=[
                _status("/rov/dynamics_node: multibody", {"longest_callback_ms": longest, "longest_callback": "timer",
                                                          "longest_callback_recent_ms": recent}),
                _status("/rov/dynamics_node/imu: sensor", {"rate": "100.0"}),  # a sensor's: not the node's
                _status("/rov/controller_node: law", {"longest_callback_ms": "9.0"})])
            msg.header.stamp.sec, msg.header.stamp.nanosec = i, 500_000_000
            w.write_message("/diagnostics", msg, 1000 + i)
        w.write_message("/chatter", String(data="longest_callback_ms"), 2000)
    found = reports(path)
    assert list(found) == ["/rov/dynamics_node"]
    rows = found["/rov/dynamics_node"]
    assert [t for t, _ in rows] == [0.5, 1.5, 2.5]
    assert [v["longest_callback_ms"] for _, v in rows] == [0.5, 2.25, 2.25]
    assert [v["longest_callback_recent_ms"] for _, v in rows] == [0.5, 2.25, 0.75]
    assert rows[0][1]["longest_callback"] == "timer"
