"""The dynamics node's services (:class:`Services`, a part of :class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`):
``~/reset`` (std_srvs/Trigger), ``~/pause`` (std_srvs/SetBool) and ``~/step`` (mbs_ros_msgs/Step, as Gazebo's
``multi_step``); their behaviour is described in docs/dynamics_node.md, "Services".

Every request is answered while the node lives: the services keep all requests (``SERVICE_QOS``, KEEP_ALL), and a
long ``~/step`` runs in chunks of at most ``STEP_CHUNK_S`` of wall clock with the executor free in between
(other services, commands, timers, shutdown); its reply is deferred until the steps are done."""
from __future__ import annotations

import time

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import Executor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import SetBool, Trigger

from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.dynamics_lockstep import TOPIC
from mbs_ros.cores.dynamics_settings import initial_state
from mbs_ros.cores.pacing import STEP_CHUNK_S

try:  # the ~/step service's type (mbs_ros_msgs/srv/Step); an older build of the package has only EnergyPorts
    from mbs_ros_msgs.srv import Step
except ImportError:  # pragma: no cover - without it: no ~/step (a warning says so)
    Step = None

__all__ = ["Services", "Step", "MAX_STEP_REQUEST", "SERVICE_QOS"]

# ~/step: at most this many physics steps per request
MAX_STEP_REQUEST = 1_000_000

# The services' queues: every request is kept until it is answered (rclpy's default, KEEP_LAST 10, drops the
# requests of a burst beyond the tenth without an answer); reliable, as every ROS service.
SERVICE_QOS = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)


class _NextChunk:
    """Awaited between two chunks of a ``~/step``: hands the executor back for one round of other callbacks."""

    def __await__(self):
        yield


class Services:
    """``~/reset``, ``~/pause`` and ``~/step`` of ``node`` over ``sim`` (paced by ``pacer``; ``publishing`` sends the
    state). ``lockstep``: one control period per step; ``settings()`` the node's settings now; ``pause_k()`` the
    step ``pause_at`` pauses at (None: never); ``counts``, ``warn`` and ``guard_service`` the node's counters,
    throttled warning and service guard; ``advance(steps, deadline_ns)``, ``take_period()``, ``try_period()``,
    ``anchor()``, ``publish_diagnostics()`` and ``publish_pause(state)`` the node's; ``before_reset()`` and
    ``before_pause()`` what the other parts do first; ``note_graph()`` remembers who has the state."""

    def __init__(self, node, sim, pacer, publishing, *, lockstep: bool, settings, pause_k, counts: dict, warn,
                 guard_service, advance, take_period, try_period, anchor, publish_diagnostics, publish_pause,
                 before_reset, before_pause, note_graph):
        self.node, self.sim, self.pacer, self.publishing, self.lockstep = node, sim, pacer, publishing, lockstep
        self.settings, self.pause_k, self.counts, self.warn = settings, pause_k, counts, warn
        self.advance, self.take_period, self.try_period, self.anchor = advance, take_period, try_period, anchor
        self.publish_diagnostics, self.publish_pause, self.note_graph = publish_diagnostics, publish_pause, note_graph
        self.before_reset, self.before_pause = before_reset, before_pause
        self._step_run = None  # the ~/step in progress (see _on_step)
        self.stepping = False  # inside ~/step: still paused for everyone watching (diagnostics say so)
        qos = SERVICE_QOS
        self.srv_reset = node.create_service(Trigger, "~/reset", guard_service(self._on_reset, "reset"),
                                             qos_profile=qos)
        self.srv_pause = node.create_service(SetBool, "~/pause", guard_service(self._on_pause, "pause"),
                                             qos_profile=qos)
        self.srv_step = None
        if Step is not None:
            # its own group: the single-threaded executor runs nothing else of a group whose task is pending
            self.srv_step = node.create_service(Step, "~/step", self._on_step_request, qos_profile=qos,
                                                callback_group=ReentrantCallbackGroup())
        else:
            node.get_logger().warning("mbs_ros_msgs has no Step service (an older build): no ~/step (make setup "
                                      "builds it)")

    def _stop_step(self, why: str) -> str:
        """End the ``~/step`` in progress (its reply says ``why``); the words for the caller's reply."""
        run = self._step_run
        if run is None or run[2] is not None:
            return ""
        run[2], run[3] = why, self.sim.k - run[1]
        return f" (the ~/step in progress stopped after {self.sim.k - run[1]} of {run[0]} steps)"

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.before_reset()
        try:
            q0, v0 = initial_state(self.sim.model, self.settings())
        except ParameterError as e:  # pragma: no cover - validated when set
            response.success, response.message = False, str(e)
            return response
        stopped = self._stop_step("~/reset")
        # The initial state becomes the state of the next step: stamps never repeat or go back. The commands
        # are cleared (the zero wrench is announced on `wrench` by the next step if it differs).
        fault = self.sim.fault
        self.sim.reset(q0, v0)
        self.anchor()
        self.publishing.clear_markers()
        self.publishing.publish_state(everything=True)
        self.publish_diagnostics()
        response.success = True
        response.message = f"reset to the initial state at t = {cv.seconds_text(self.sim.stamp())} s" + (
            f" (the fault at t = {cv.seconds_text(fault.stamp_ns)} s cleared"
            + (", still paused: ~/pause false resumes)" if self.sim.paused else ", running)") if fault else "") \
            + stopped
        self.node.get_logger().info(response.message)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.before_pause()
        sim = self.sim
        stopped, resumed = self._stop_step("~/pause " + ("true" if request.data else "false")), False
        if request.data and not sim.paused:
            self.pause_now()
            response.message = f"paused at t = {cv.seconds_text(self.sim.stamp())} s"
        elif not request.data and sim.fault is not None:
            sim.pause(False)  # the pause asked for ends; the fault holds until a reset
            f = sim.fault
            response.success = False
            response.message = (f"halted by a fault at t = {cv.seconds_text(f.stamp_ns)} s ({f.reason}); call "
                                "~/reset to resume from the initial state")
            self.node.get_logger().warning(response.message)
            return response
        elif not request.data and sim.paused:
            sim.pause(False)
            self.anchor()
            response.message = f"resumed at t = {cv.seconds_text(self.sim.stamp())} s"
            resumed = True
        else:
            response.message = "already " + ("paused" if sim.paused else "running")
        response.message += stopped
        response.success = True
        self.node.get_logger().info(response.message)
        if self.lockstep and resumed:
            self.try_period()  # the commands may all be here already: the period in a callback of its own
        return response

    def pause_now(self) -> None:
        """Pause here (``~/pause`` true, ``pause_at``): the state at this stamp if it is not out yet, with
        everything, the diagnostics (``publish_pause``); those who match later get the state again."""
        sim = self.sim
        sim.pause(True)
        self.publish_pause(self.publishing.last_published_k != sim.k)
        self.note_graph()  # those matched later get the state again

    def pause_at_reached(self) -> None:
        """``pause_at``: pause once the running simulation is at its step (not while ``~/step`` steps it: it is
        paused already), after what falls due at that stamp was published."""
        sim = self.sim
        pause_k = self.pause_k()
        if pause_k is None or sim.k != pause_k or sim.paused or self.stepping:
            return
        self.pause_now()
        self.node.get_logger().info(f"paused at t = {cv.seconds_text(self.sim.stamp())} s (pause_at "
                                    f"{self.settings().pause_at:g} s): ~/pause false resumes")

    async def _on_step_request(self, request, response):
        """``~/step``: :meth:`_on_step`, whose exceptions become the reply's reason (as the node's service guard)."""
        try:
            return await self._on_step(request, response)
        except Exception as e:  # noqa: BLE001 - no request stops the node
            self.counts["callback_errors"] += 1
            self.warn("error_step", f"step failed: {type(e).__name__}: {e}", error=True)
            response.success = False
            response.message = f"step failed: {type(e).__name__}: {e}"
            return response

    def _step_refusal(self, n: int):
        """Why ``n`` steps cannot be taken now (None: they can)."""
        sim = self.sim
        if self._step_run is not None:
            run = self._step_run
            return (f"busy: a ~/step of {run[0]} steps is in progress ({sim.k - run[1]} taken); call again when it "
                    "has answered")
        if sim.fault is not None:
            f = sim.fault
            return f"halted by a fault at t = {cv.seconds_text(f.stamp_ns)} s ({f.reason}); call ~/reset"
        if not sim.paused:
            return "not paused: ~/step advances a paused simulation (~/pause true first, or start_paused)"
        if self.lockstep and n not in (0, sim.lockstep_steps):
            return (f"lockstep: one control period at a time, steps {sim.lockstep_steps} (physics_rate / "
                    f"control_rate) or 0, not {n}: the next period needs the controller's answer to the state this "
                    "one publishes")
        if self.lockstep and n and not sim.period_complete():
            return (f"lockstep: the period at t = {cv.seconds_text(self.sim.stamp())} s still waits for "
                    f"{' and '.join(TOPIC[ch] for ch in sim.missing())} stamped with it; call again once the "
                    "controller has answered that state")
        if n > MAX_STEP_REQUEST:
            return f"{n} steps: at most {MAX_STEP_REQUEST} per request"
        return None

    async def _on_step(self, request, response):
        """``request.steps`` physics steps of a paused simulation (lockstep: one control period whose commands
        have arrived), in chunks of at most ``STEP_CHUNK_S`` of wall clock with the executor free in between; the
        reply once they are done, or once a ``~/pause``/``~/reset`` stopped them (docs/dynamics_node.md,
        "Services")."""
        sim = self.sim
        n = int(request.steps)
        k0 = sim.k
        why = self._step_refusal(n)
        run = [n, k0, None, 0]  # steps asked, k at the start, what stopped it, steps taken when it stopped
        if why is None and n:
            self._step_run = run
            try:
                if self.lockstep:  # one control period, bounded by the control period itself
                    self._step_chunk(self.take_period)
                else:
                    end = k0 + n
                    while not self._step_chunk(lambda: self._advance_within(end, STEP_CHUNK_S)):
                        if not self.node.context.ok():
                            break
                        if isinstance(self.node.executor, Executor):  # rclpy's own: back here without its wait
                            self.node.executor.wake()
                        await _NextChunk()
                        if run[2] is not None:
                            break
            finally:
                self._step_run = None
            if run[2] != "~/reset":  # as a pause: the state it stopped at (a reset published its own)
                if self.publishing.last_published_k != sim.k:
                    self.publishing.publish_state(everything=True)
                    self.publishing.publish_applied()
                self.publish_diagnostics()
        taken = run[3] if run[2] is not None else sim.k - k0
        response.sim_time = cv.time_from_ns(self.sim.stamp())
        response.step_index = sim.k
        if why is None and run[2] is not None:
            why = (f"stopped by {run[2]} after {taken} of {n} steps; now at t = "
                   f"{cv.seconds_text(self.sim.stamp())} s")
        elif why is None and sim.fault is not None:
            f = sim.fault
            why = (f"halted by a fault after {taken} of {n} steps, at t = {cv.seconds_text(f.stamp_ns)} s "
                   f"({f.reason}); call ~/reset")
        response.success = why is None
        response.message = why or f"{taken} steps to t = {cv.seconds_text(self.sim.stamp())} s (step {sim.k})"
        self.node.get_logger().debug(f"~/step: {response.message}")
        return response

    def _step_chunk(self, take) -> bool:
        """``take()`` with the simulation stepping for ``~/step`` (paused for everyone watching: diagnostics say
        so), paused again after; True when the ``~/step`` is over (all taken, or a fault)."""
        sim = self.sim
        sim.pause(False)
        self.stepping = True
        try:
            done = take()
        finally:
            sim.pause(True)
            self.stepping = False
        return done is not False or sim.fault is not None

    def _advance_within(self, end: int, seconds: float) -> bool:
        """Steps towards step ``end``, batch by batch (``Pacer.max_batch_steps``), until ``seconds`` of wall clock
        are used; True when ``end`` is reached."""
        sim = self.sim
        deadline = time.monotonic_ns() + int(seconds * 1e9)
        while sim.k < end and not sim.paused:
            self.advance(min(end - sim.k, self.pacer.max_batch_steps), deadline_ns=deadline)
            if time.monotonic_ns() >= deadline:
                break
        return sim.k >= end
