"""The dynamics node's waiting watch (mbs_ros.nodes.dynamics_lockstep.LockstepWatch) built with stand-in parts, with the
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

    def stamp(self, k=None):
        return (self.k if k is None else k) * 10_000_000


class Publisher:
    count = 1

    def get_subscription_count(self):
        return self.count


class Publishing:
    """The state publishing part: records what is sent, and when."""

    def __init__(self):
        self.states = []
        self.last_state_wall = 0.0
        self.nj = 1
        self.pub_odom = self.pub_joint_states = Publisher()

    def publish_state(self, **kw):
        self.last_state_wall = dl.time.monotonic()
        self.states.append(kw)

    def state_pieces(self, **kw):  # a job: published piece by piece once the node's queue runs it
        yield
        self.publish_state(**kw)

    def repeat_clock(self):
        pass


class Node:
    """The node and its parts around a LockstepWatch built as the dynamics node builds it."""

    def __init__(self):
        self.sim = Sim()
        self.publishing = Publishing()
        self.periods = 0
        self.anchored = 0
        self.counts = {"received_joint_command": 0, "rejected_joint_command": 0, "callback_errors": 0}
        self.info = []
        self.logs = Logs()
        settings = types.SimpleNamespace(publish_rate=100.0)
        self.jobs = []  # what the watch gave the node's queue
        self.watch = dl.LockstepWatch(self, self.sim, None, self.publishing, settings=lambda: settings,
                                      counts=self.counts, logs=self.logs, take_period=self.take_period,
                                      anchor=self.anchor, subscriptions=lambda: (), send=self.jobs.append)
        self.watch.try_period = self.take_period  # no pacing here: a complete period runs

    @property
    def states(self):
        return self.publishing.states

    def take_period(self):
        self.periods += 1

    def anchor(self):
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
    watch = node.watch
    watch.graph_counts = (1, 1)
    watch.last_input_wall = clock.t  # the controller answered t = 0 while the run stood paused
    node.sim.paused = True
    for _ in range(50):  # 5 s paused (the runner waits for the reference to be held)
        clock.t += 0.1
        watch.paused_watch()
    node.sim.paused = False
    node.sim.complete = True
    watch.lockstep_watch()  # resumed: the period of t = 0 runs
    assert node.periods == 1
    node.sim.k, node.sim.complete = 5, False  # its state went out; the controller's answer is due
    for _ in range(19):  # 1.9 s without it: no warning yet
        clock.t += 0.1
        watch.lockstep_watch()
    assert node.logs.warnings == []
    for _ in range(3):  # past LOCKSTEP_WARN_S: the warning, with how long
        clock.t += 0.1
        watch.lockstep_watch()
    quiet = float(re.search(r"no command for ([\d.]+) s", node.logs.warnings[0]).group(1))
    assert 2.0 <= quiet < 2.5, node.logs.warnings  # counted from the state, not from the command before the pause


def test_wait_for_command_repeats_the_state_and_starts_on_an_accepted_command(clock):
    node = Node()
    watch = node.watch
    watch.graph_counts = (1, 1)
    node.publishing.last_state_wall = clock.t
    watch.await_first_command()
    assert not watch.command_arrived()
    for _ in range(10):  # 0.1 s: the state again at publish_rate (100 Hz), the same stamp
        clock.t += 0.0101
        watch.paused_watch()
    assert len(node.states) == 10 and all(s == {"controller_inputs_only": True} for s in node.states)
    node.counts["received_joint_command"] += 1  # a command refused (wrong names, say) starts nothing
    node.counts["rejected_joint_command"] += 1
    assert not watch.command_arrived() and watch.awaiting_command
    node.counts["received_joint_command"] += 1  # the controller's answer
    assert watch.command_arrived() and not watch.awaiting_command and node.anchored == 1
    assert "first command" in node.info[0]


def test_pause_ends_the_wait_for_a_first_command(clock):
    node = Node()
    node.watch.await_first_command()
    node.watch.stop_waiting()  # what ~/pause does first
    assert not node.watch.awaiting_command
    node.counts["received_joint_command"] += 1
    clock.t += 1.0
    node.watch.paused_watch()  # paused as asked: no more repeats of a waiting start, and the command starts nothing
    assert node.states == [] and node.anchored == 0


def test_a_late_joiner_while_paused_gets_everything_through_the_node_s_queue(clock):
    """Paused, a new state subscriber: the whole state (markers, joint wrenches too) again, as a job of pieces for
    the node's work queue, not published at once inside the timer's callback."""
    node = Node()
    watch = node.watch
    watch.graph_counts = (1, 1)
    node.sim.paused = True
    watch.paused_watch()  # nobody new: nothing
    assert node.jobs == [] and node.states == []
    node.publishing.pub_odom.count = 2  # a recorder subscribed to odom
    watch.paused_watch()
    assert len(node.jobs) == 1 and node.states == []  # queued, not published yet
    for _ in node.jobs[0]:  # the queue runs it
        pass
    assert node.states == [{"everything": True}]
    watch.paused_watch()  # the same subscribers: not again
    assert len(node.jobs) == 1
