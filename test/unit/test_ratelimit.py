"""RateLimitedLog: one line per key and period, formatted only when printed, suppressed lines counted."""

import pytest

from mbs_ros.cores.ratelimit import RateLimitedLog


class FakeLogger:
    def __init__(self):
        self.lines = []

    def warning(self, s):
        self.lines.append(("W", s))

    def info(self, s):
        self.lines.append(("I", s))

    def error(self, s):
        self.lines.append(("E", s))


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_one_line_per_key_and_period_with_the_suppressed_count():
    log, clock = FakeLogger(), FakeClock()
    rl = RateLimitedLog(log, period=2.0, clock=clock)
    assert rl.warning("a", "first")
    for _ in range(5):
        clock.t += 0.1
        assert not rl.warning("a", "again")
    assert rl.warning("b", "other key")  # keys are independent
    assert rl.suppressed("a") == 5
    clock.t += 2.0
    assert rl.warning("a", "later")
    assert log.lines == [("W", "first"), ("W", "other key"), ("W", "later (5 more like this since the last one)")]
    assert rl.suppressed("a") == 0


def test_a_callable_is_formatted_only_when_printed():
    log, clock = FakeLogger(), FakeClock()
    rl = RateLimitedLog(log, period=1.0, clock=clock)
    calls = []

    def text():
        calls.append(1)
        return "formatted"

    for _ in range(1000):
        rl.error("k", text)
    assert calls == [1] and log.lines == [("E", "formatted")]


def test_once_is_once_and_a_period_must_be_positive():
    log, clock = FakeLogger(), FakeClock()
    rl = RateLimitedLog(log, clock=clock)
    assert rl.info_once("k", "hello")
    clock.t += 1e9
    assert not rl.info_once("k", "hello")
    assert log.lines == [("I", "hello")]
    with pytest.raises(ValueError, match="period"):
        RateLimitedLog(log, period=0.0)


def test_every_severity_with_a_real_rclpy_logger():
    """rclpy keys a call site by the caller's frame and raises when one site logs at two severities: each of
    warning/error/info must reach rclpy from a line of its own."""
    rclpy_logging = pytest.importorskip("rclpy.logging")
    rl = RateLimitedLog(rclpy_logging.get_logger("test_ratelimit"), period=1e-9)
    for i in range(3):
        assert rl.info("a", "info line")
        assert rl.warning("b", "warning line")
        assert rl.error("c", "error line")
        assert rl.info_once("d", "once") == (i == 0)
