"""The dynamics node's waiting watch (mbs_ros.nodes.dynamics_lockstep.LockstepWatch) on a stand-in node, with the
wall clock under the test's control (no process, no ROS graph):

- lockstep: "waiting ... Is a lockstep controller running?" comes LOCKSTEP_WARN_S after the awaited state went
  out, never at once after a long paused start (the runner's start_paused) whose commands came before the pause
  ended;
- wait_for_command: the initial state goes out again at publish_rate while no command has been accepted; the first
  accepted command starts the time (a rejected one does not); ~/pause ends the wait.
"""

from __future__ import annotations

import re
import types

import pytest

from mbs_ros.nodes import dynamics_lockstep as dl


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Logs:
    def __init__(self):
        self.warnings = []

    def warning(self, key, text, period=None):
        self.warnings.append(text)


class Sim:
    """A lockstep simulator waiting for the joints' command of period k."""

    def __init__(self):
        self.k, self.paused, self.complete = 0, False, False
        self.last_stamp_seen = {}

    def period_complete(self):
        return self.complete

    def missing(self):
        return () if self.complete else ("joints",)


class Base:
    def _on_pause(self, request, response):
        return "paused" if request else "resumed"


class Node(dl.LockstepWatch, Base):
    def __init__(self):
        self.sim = Sim()
        self.settings = types.SimpleNamespace(publish_rate=100.0)
        self._logs = Logs()
        self.states = []
        self.periods = 0
        self.anchored = 0
        self._counts = {"received_joint_command": 0, "rejected_joint_command": 0, "callback_errors": 0}
        self.info = []

    def stamp(self):
        return self.sim.k * 10_000_000

    def _repeat_clock(self):
        pass

    def _graph_counts_now(self):
        return (1, 1)

    def _publish_state(self, **kw):
        self._last_state_wall = dl.time.monotonic()
        self.states.append(kw)

    def _try_period(self):
        self.periods += 1

    def _anchor(self):
        self.anchored += 1

    def get_logger(self):
        return types.SimpleNamespace(info=self.info.append)


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(dl.time, "monotonic", c)
    return c


def test_a_long_paused_start_is_no_wait_for_the_controller(clock):
    node = Node()
    node._graph_counts = (1, 1)
    node._last_input_wall = clock.t  # the controller answered t = 0 while the run stood paused
    node.sim.paused = True
    for _ in range(50):  # 5 s paused (the runner waits for the reference to be held)
        clock.t += 0.1
        node._paused_watch()
    node.sim.paused = False
    node.sim.complete = True
    node._lockstep_watch()  # resumed: the period of t = 0 runs
    assert node.periods == 1
    node.sim.k, node.sim.complete = 5, False  # its state went out; the controller's answer is due
    for _ in range(19):  # 1.9 s without it: no warning yet
        clock.t += 0.1
        node._lockstep_watch()
    assert node._logs.warnings == []
    for _ in range(3):  # past LOCKSTEP_WARN_S: the warning, with how long
        clock.t += 0.1
        node._lockstep_watch()
    quiet = float(re.search(r"no command for ([\d.]+) s", node._logs.warnings[0]).group(1))
    assert 2.0 <= quiet < 2.5, node._logs.warnings  # counted from the state, not from the command before the pause


def test_wait_for_command_repeats_the_state_and_starts_on_an_accepted_command(clock):
    node = Node()
    node._graph_counts = (1, 1)
    node._last_state_wall = clock.t
    node.await_first_command()
    assert not node._command_arrived()
    for _ in range(10):  # 0.1 s: the state again at publish_rate (100 Hz), the same stamp
        clock.t += 0.0101
        node._paused_watch()
    assert len(node.states) == 10 and all(s == {"controller_inputs_only": True} for s in node.states)
    node._counts["received_joint_command"] += 1  # a command refused (wrong names, say) starts nothing
    node._counts["rejected_joint_command"] += 1
    assert not node._command_arrived() and node._awaiting_command
    node._counts["received_joint_command"] += 1  # the controller's answer
    assert node._command_arrived() and not node._awaiting_command and node.anchored == 1
    assert "first command" in node.info[0]


def test_pause_ends_the_wait_for_a_first_command(clock):
    node = Node()
    node.await_first_command()
    assert node._on_pause(True, None) == "paused" and not node._awaiting_command
    node._counts["received_joint_command"] += 1
    clock.t += 1.0
    node._paused_watch()  # paused as asked: no more repeats of a waiting start, and the command starts nothing
    assert node.states == [] and node.anchored == 0
