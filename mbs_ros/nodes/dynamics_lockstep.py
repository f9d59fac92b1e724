"""Lockstep and the waiting watch of the dynamics node (:class:`LockstepWatch`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`): a command stamped with the current state's stamp on every
channel the simulator expects lets one control period run (``Simulator.check_stamp``/``submit``/
``period_complete``); while it waits, the state is sent again after ``LOCKSTEP_RESEND_S`` or when a new endpoint
matches, and a warning says what is missing once no command has come for ``LOCKSTEP_WARN_S`` since the state was
sent (the time it stood paused does not count). Paused, the state is sent again to late joiners; with
``wait_for_command`` the node stands still at the start, sending the state like that and at publish_rate, until
the first accepted command. The speed limit is
:class:`mbs_ros.cores.pacing.Pacer`."""
from __future__ import annotations

import time

from mbs_ros.cores.commands import CHANNEL, TIMEOUT_TOPIC, TOPIC
from mbs_ros.cores.pacing import WARN_THROTTLE_S

__all__ = ["LockstepWatch", "CHANNEL", "TOPIC", "TIMEOUT_TOPIC", "LOCKSTEP_RESEND_S", "LOCKSTEP_WARN_S"]

# Lockstep: the state t_k is published again after this long without the commands (or at once when a new endpoint
# matches), in case the first copy or the controller's answer was lost before discovery completed; a warning after
# this long without any command.
LOCKSTEP_RESEND_S = 1.0
LOCKSTEP_WARN_S = 2.0


class LockstepWatch:
    """The waiting watch of ``node`` (its logger) over ``sim``, paced by ``pacer``; ``publishing`` sends the state
    (:class:`~mbs_ros.nodes.dynamics_publishing.StatePublishing`). ``settings()``: the node's settings; ``counts``,
    ``logs``: its counters and :class:`~mbs_ros.cores.ratelimit.RateLimitedLog`; ``take_period()`` runs a period
    whose commands are here; ``anchor()`` restarts the pacing; ``subscriptions()``: the stamped command subscriptions;
    ``busy()``: the last period's publications are not all out; ``send(job)`` publishes a job of pieces."""

    def __init__(self, node, sim, pacer, publishing, *, settings, counts: dict, logs, take_period, anchor,
                 subscriptions, send, busy=lambda: False):
        self.node, self.sim, self.pacer, self.publishing = node, sim, pacer, publishing
        self.settings, self.counts, self.logs, self.busy, self.send = settings, counts, logs, busy, send
        self.take_period, self.anchor, self.subscriptions = take_period, anchor, subscriptions
        self.last_input_wall = time.monotonic()
        self.graph_counts = ()
        self.awaiting_command, self._accepted_at_start = False, 0  # wait_for_command: the wait, the count then
        self._waiting_k, self._waiting_since = None, 0.0  # lockstep: the step awaited, since when (wall, running)

    def command_came(self) -> None:
        """A command reached the lockstep period check: the waiting watch counts its quiet time from now."""
        self.last_input_wall = time.monotonic()

    def take(self, topic: str, value) -> None:
        """A valid command stamped for the current period."""
        self.sim.submit(CHANNEL[topic], value)
        self.try_period()

    def try_period(self) -> None:
        """Lockstep: advance one control period if its commands are all here (and the speed limit allows)."""
        sim = self.sim
        if sim.paused or not sim.period_complete() or self.busy():
            return
        now = time.monotonic_ns()
        if not self.pacer.period_may_start(now):
            return  # the timer tries again
        self.take_period()
        self.pacer.period_started(sim.lockstep_steps, now)

    def paused_watch(self) -> None:
        """Paused: the state again (same stamp, everything) when a subscriber of odom or joint_states or a command
        publisher matched since it was last sent, so that a node started while the time stands still (a controller,
        a reference node, a recorder; start_paused) gets the state it would otherwise wait for. Waiting for the first
        command (wait_for_command): also at publish_rate, and the first accepted command starts the time."""
        self._waiting_k = None  # lockstep: the time paused is no wait for the controller
        counts = self.graph_counts_now()
        grew = any(c > old for c, old in zip(counts, self.graph_counts))
        self.graph_counts = counts
        if grew:  # everything (markers, joint wrenches too): in pieces, as running
            self.send(self.publishing.state_pieces(everything=True))
        elif (self.awaiting_command
              and time.monotonic() - self.publishing.last_state_wall >= 1.0 / self.settings().publish_rate):
            # the state again at publish_rate: the controller keeps it fresh (not stale) and answers it until the
            # time starts
            self.publishing.publish_state(controller_inputs_only=True)

    def await_first_command(self) -> None:
        """wait_for_command: the timer steps nothing until a command is accepted (:meth:`command_arrived`)."""
        self.awaiting_command = True
        self._accepted_at_start = self._accepted_commands()

    def command_arrived(self) -> bool:
        """wait_for_command: has the first command been accepted? Then the time starts from the initial state, with
        that command applied from the first step."""
        if self._accepted_commands() <= self._accepted_at_start:
            return False
        self.awaiting_command = False
        self.anchor()
        self.node.get_logger().info(f"first command: running from t = {self.sim.stamp() * 1e-9:.9f} s "
                                    "(wait_for_command)")
        return True

    def stop_waiting(self) -> None:
        """``~/pause`` (before :class:`~mbs_ros.nodes.dynamics_services.Services` answers it): a caller who pauses
        or resumes decides from then on, so a waiting start (wait_for_command) no longer waits for a command."""
        self.awaiting_command = False

    def _accepted_commands(self) -> int:
        """Commands taken in so far: received minus rejected minus those whose callback failed."""
        c = self.counts
        return (sum(v for k, v in c.items() if k.startswith("received_"))
                - sum(v for k, v in c.items() if k.startswith("rejected_")) - c.get("callback_errors", 0))

    def lockstep_watch(self) -> None:
        """Lockstep timer: pace, send the state again if the commands are late, warn if nothing comes."""
        if self.sim.period_complete():
            self.try_period()
            return
        self.publishing.repeat_clock()
        now = time.monotonic()
        if self._waiting_k != self.sim.k:  # a new period's state is out (or the simulation resumed): count from now
            self._waiting_k, self._waiting_since = self.sim.k, now
        counts = self.graph_counts_now()
        grew = any(c > old for c, old in zip(counts, self.graph_counts))
        self.graph_counts = counts
        if grew or now - self.publishing.last_state_wall > LOCKSTEP_RESEND_S:
            self.publishing.publish_state(controller_inputs_only=True)  # the same stamp and values again
        quiet = now - max(self.last_input_wall, self._waiting_since)
        if quiet > LOCKSTEP_WARN_S:
            missing = [TOPIC[ch] for ch in self.sim.missing()]
            seen = ", ".join(f"{TOPIC[ch]} {t * 1e-9:.9f} s"
                             for ch, t in sorted(self.sim.last_stamp_seen.items())) or "none"
            self.logs.warning(
                "lockstep_waiting",
                f"lockstep: waiting at t = {self.sim.stamp() * 1e-9:.9f} s for {' and '.join(missing)} stamped with "
                f"it; no command for {quiet:.1f} s (last stamps seen: {seen}). Is a lockstep controller running?",
                period=max(WARN_THROTTLE_S, LOCKSTEP_WARN_S))

    def note_graph(self) -> None:
        """Who has the state now: those who match later get it again (paused, waiting)."""
        self.graph_counts = self.graph_counts_now()

    def graph_counts_now(self) -> tuple:
        """Matched endpoints of the lockstep loop: state subscribers, command publishers."""
        pub = self.publishing
        counts = [pub.pub_odom.get_subscription_count()]
        if pub.nj:
            counts.append(pub.pub_joint_states.get_subscription_count())
        for sub in self.subscriptions():
            count = getattr(sub, "get_publisher_count", None)  # rclpy >= Iron; graph count before
            counts.append(count() if count is not None else self.node.count_publishers(sub.topic_name))
        return tuple(counts)
