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
    """Needs, from the node: ``sim``, ``settings``, ``pacer``, ``advance``, the publishers and
    ``_publish_state``/``_publish_applied``/``_repeat_clock``, ``_warn``, ``_logs``."""

    _last_input_wall = 0.0
    _last_state_wall = 0.0
    _graph_counts = ()
    _awaiting_command = False  # wait_for_command: no step from the start until the first accepted command
    _accepted_at_start = 0
    _waiting_k = None  # lockstep: the step whose commands are awaited, and since when (wall clock, running)
    _waiting_since = 0.0

    def _command_came(self) -> None:
        """A command reached the lockstep period check: the waiting watch counts its quiet time from now."""
        self._last_input_wall = time.monotonic()

    def _lockstep_take(self, topic: str, value) -> None:
        """A valid command stamped for the current period."""
        self.sim.submit(CHANNEL[topic], value)
        self._try_period()

    def _try_period(self) -> None:
        """Lockstep: advance one control period if its commands are all here (and the speed limit allows)."""
        sim = self.sim
        if sim.paused or not sim.period_complete():
            return
        now = time.monotonic_ns()
        if not self.pacer.period_may_start(now):
            return  # the timer tries again
        self._take_period()
        self.pacer.period_started(sim.lockstep_steps, now)

    def _take_period(self) -> None:
        """Lockstep: the control period whose commands are all here (the caller checked), then its state."""
        sim = self.sim
        k0 = sim.k
        sim.start_period()
        self._grids = None
        self.advance(sim.lockstep_steps)
        k1 = sim.k
        # joint wrenches and markers with the period's state when their step grid was crossed during the period
        self._publish_state(wrenches=bool(self._wrench_every) and k1 // self._wrench_every > k0 // self._wrench_every,
                            markers=bool(self._markers_every)
                            and k1 // self._markers_every > k0 // self._markers_every)
        self._publish_applied()
        self._pause_at_reached()

    def _paused_watch(self) -> None:
        """Paused: the state again (same stamp, everything) when a subscriber of odom or joint_states or a command
        publisher matched since it was last sent, so that a node started while the time stands still (a controller,
        a reference node, a recorder; start_paused) gets the state it would otherwise wait for. Waiting for the first
        command (wait_for_command): also at publish_rate, and the first accepted command starts the time."""
        self._waiting_k = None  # lockstep: the time paused is no wait for the controller
        counts = self._graph_counts_now()
        grew = any(c > old for c, old in zip(counts, self._graph_counts))
        self._graph_counts = counts
        if grew:
            self._publish_state(everything=True)
        elif self._awaiting_command and time.monotonic() - self._last_state_wall >= 1.0 / self.settings.publish_rate:
            # the state again at publish_rate: the controller keeps it fresh (not stale) and answers it until the
            # time starts
            self._publish_state(controller_inputs_only=True)

    def await_first_command(self) -> None:
        """wait_for_command: the timer steps nothing until a command is accepted (:meth:`_command_arrived`)."""
        self._awaiting_command = True
        self._accepted_at_start = self._accepted_commands()

    def _command_arrived(self) -> bool:
        """wait_for_command: has the first command been accepted? Then the time starts from the initial state, with
        that command applied from the first step."""
        if self._accepted_commands() <= self._accepted_at_start:
            return False
        self._awaiting_command = False
        self._anchor()
        self.get_logger().info(f"first command: running from t = {self.stamp() * 1e-9:.9f} s (wait_for_command)")
        return True

    def _on_pause(self, request, response):
        """``~/pause`` (then :class:`~mbs_ros.nodes.dynamics_services.Services`): a caller who pauses or resumes
        decides from then on, so a waiting start (wait_for_command) no longer waits for a command."""
        self._awaiting_command = False
        return super()._on_pause(request, response)

    def _accepted_commands(self) -> int:
        """Commands taken in so far: received minus rejected minus those whose callback failed."""
        c = self._counts
        return (sum(v for k, v in c.items() if k.startswith("received_"))
                - sum(v for k, v in c.items() if k.startswith("rejected_")) - c.get("callback_errors", 0))

    def _lockstep_watch(self) -> None:
        """Lockstep timer: pace, send the state again if the commands are late, warn if nothing comes."""
        if self.sim.period_complete():
            self._try_period()
            return
        self._repeat_clock()
        now = time.monotonic()
        if self._waiting_k != self.sim.k:  # a new period's state is out (or the simulation resumed): count from now
            self._waiting_k, self._waiting_since = self.sim.k, now
        counts = self._graph_counts_now()
        grew = any(c > old for c, old in zip(counts, self._graph_counts))
        self._graph_counts = counts
        if grew or now - self._last_state_wall > LOCKSTEP_RESEND_S:
            self._publish_state(controller_inputs_only=True)  # the same stamp and values again
        quiet = now - max(self._last_input_wall, self._waiting_since)
        if quiet > LOCKSTEP_WARN_S:
            missing = [TOPIC[ch] for ch in self.sim.missing()]
            seen = ", ".join(f"{TOPIC[ch]} {t * 1e-9:.9f} s"
                             for ch, t in sorted(self.sim.last_stamp_seen.items())) or "none"
            self._logs.warning(
                "lockstep_waiting",
                f"lockstep: waiting at t = {self.stamp() * 1e-9:.9f} s for {' and '.join(missing)} stamped with it; "
                f"no command for {quiet:.1f} s (last stamps seen: {seen}). Is a lockstep controller running?",
                period=max(WARN_THROTTLE_S, LOCKSTEP_WARN_S))

    def _graph_counts_now(self) -> tuple:
        """Matched endpoints of the lockstep loop: state subscribers, command publishers."""
        counts = [self.pub_odom.get_subscription_count()]
        if self.nj:
            counts.append(self.pub_joint_states.get_subscription_count())
        for sub in self.inputs.stamped:
            count = getattr(sub, "get_publisher_count", None)  # rclpy >= Iron; graph count before
            counts.append(count() if count is not None else self.count_publishers(sub.topic_name))
        return tuple(counts)
