"""The nodes' logger (:mod:`mbs_ros.nodes.logger`): the lines rclpy's own logger would give, on /rosout.

A script in its own process makes a node whose ``get_logger`` is the nodes'
(:func:`~mbs_ros.nodes.logger.fast_get_logger`), logs from marked lines
through it, through :class:`~mbs_ros.cores.ratelimit.RateLimitedLog` in front of it, and through rclpy's own
logger, and reads its /rosout records back (a second node of that process). The expected records come from the
script's text (the marked lines) and from rclpy's own logger's record of the same kind of call, not from the
logger under test; rclpy's filters (once, skip_first, a throttle) print what rclpy's documentation says.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

pytest.importorskip("rclpy")

from process_helpers import run_to_exit  # noqa: E402
from ros_helpers import ros_env_defaults  # noqa: E402

SCRIPT = textwrap.dedent('''
    import json, sys, time
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rcl_interfaces.msg import Log
    from mbs_ros.cores.ratelimit import RateLimitedLog
    from mbs_ros.nodes.logger import FastLogger, fast_get_logger


    class Talker(Node):
        get_logger = fast_get_logger


    def talk(node):
        lg = node.get_logger()
        assert isinstance(lg, FastLogger), type(lg)
        lg.info("plain info")  # MARK plain
        Node.get_logger(node).info("rclpy info")  # MARK rclpy
        lg.warning("a warning")  # MARK warning
        lg.error("an error")  # MARK error
        lg.debug("hidden debug")
        for i in range(3):
            lg.info(f"once {i}", once=True)  # MARK once
        for i in range(3):
            lg.info(f"skip_first {i}", skip_first=True)  # MARK skip_first
        for i in range(3):
            lg.info(f"throttled {i}", throttle_duration_sec=60.0)  # MARK throttled
        RateLimitedLog(lg).warning("key", "rate limited")  # MARK limited
        lg.get_child("child").info("from the child")  # MARK child


    def fall_back(node):  # as on an rclpy without rcutils' logging function: rclpy's logger
        import mbs_ros.nodes.logger as fast

        fast._LOG = None
        lg = node.get_logger()
        lg.info("fallback info")
        lg.warning("fallback warning")  # another severity than the line before: rclpy would refuse one site
        for i in range(3):
            lg.info(f"fallback once {i}", once=True)
        lg.info("fallback done")


    def main():
        rclpy.init()
        talker, listener = Talker("fast_logger_talker"), Node("fast_logger_listener")
        fallback = Talker("fast_logger_fallback")
        records = []
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        listener.create_subscription(Log, "/rosout", lambda m: records.append(m), qos)
        talk(talker)
        fall_back(fallback)
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not any(m.msg == "fallback done" for m in records):
            rclpy.spin_once(listener, timeout_sec=0.05)
        for _ in range(20):  # anything still on its way
            rclpy.spin_once(listener, timeout_sec=0.01)
        print(json.dumps([dict(msg=m.msg, level=int(m.level), name=m.name, file=m.file, function=m.function,
                               line=int(m.line)) for m in records if "fast_logger_" in m.name]))
        for node in (talker, fallback, listener):
            node.destroy_node()
        rclpy.try_shutdown()


    main()
''')


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    ros_env_defaults()
    path = tmp_path_factory.mktemp("fast_logger") / "talker.py"
    path.write_text(SCRIPT)
    code, out = run_to_exit([sys.executable, str(path)], timeout=180.0)
    assert code == 0, out[-4000:]
    line = [x for x in out.splitlines() if x.startswith("[{")]
    assert line, out[-4000:]
    return str(path), json.loads(line[-1])


def _mark(name):
    """The script's line number of ``# MARK name`` (1-based, as rclpy and rcutils count)."""
    lines = SCRIPT.splitlines()
    return next(i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# MARK {name}"))


def _by_text(recs, prefix):
    return [r for r in recs if r["msg"].startswith(prefix)]


def test_a_line_is_rclpy_s_record_of_the_same_call(records):
    path, recs = records
    (plain,), (reference,) = _by_text(recs, "plain info"), _by_text(recs, "rclpy info")
    assert reference["file"] == path and reference["function"] == "talk" and reference["line"] == _mark("rclpy")
    assert plain["line"] == _mark("plain")
    for key in ("level", "name", "file", "function"):
        assert plain[key] == reference[key], (key, plain, reference)
    assert plain["name"] == "fast_logger_talker" and plain["level"] == 20  # rcl_interfaces/Log.INFO


def test_severities_and_the_disabled_debug(records):
    _path, recs = records
    (warning,), (error,) = _by_text(recs, "a warning"), _by_text(recs, "an error")
    assert (warning["level"], warning["line"]) == (30, _mark("warning"))  # Log.WARN
    assert (error["level"], error["line"]) == (40, _mark("error"))  # Log.ERROR
    assert not _by_text(recs, "hidden debug")  # the default level is INFO


def test_rclpy_s_filters_per_call_site(records):
    _path, recs = records
    assert [r["msg"] for r in _by_text(recs, "once")] == ["once 0"]
    assert [r["msg"] for r in _by_text(recs, "skip_first")] == ["skip_first 1", "skip_first 2"]
    assert [r["msg"] for r in _by_text(recs, "throttled")] == ["throttled 0"]
    assert {r["line"] for r in _by_text(recs, "once")} == {_mark("once")}


def test_the_rate_limiter_s_line_is_its_caller_s_and_a_child_is_named_after_its_parent(records):
    path, recs = records
    (limited,), (child,) = _by_text(recs, "rate limited"), _by_text(recs, "from the child")
    assert (limited["file"], limited["function"], limited["line"]) == (path, "talk", _mark("limited"))
    assert child["name"] == "fast_logger_talker.child" and child["line"] == _mark("child")


def test_without_rcutils_function_the_lines_go_through_rclpy_s_logger(records):
    _path, recs = records
    fallback = [r for r in recs if r["name"] == "fast_logger_fallback"]
    assert [(r["msg"], r["level"]) for r in fallback] == [
        ("fallback info", 20), ("fallback warning", 30), ("fallback once 0", 20), ("fallback done", 20)]
    assert all(r["file"].endswith("logger.py") for r in fallback)  # rclpy's caller: the fallback's own line
