"""Dynamics node: one rigid body, or a multibody robot (a floating or fixed base carrying a joint tree).

Run it with ``ros2 run mbs_ros dynamics_node`` or ``python -m mbs_ros.nodes.dynamics_node --ros-args -r
__ns:=/robot1 --params-file config/rigid_body.yaml``. The simulation is the ROS-free
:class:`mbs_ros.dynamics.simulation.simulator.Simulator`; this node turns command messages into its commands, steps it from
a wall-clock timer or one lockstep period at a time, and publishes its state. Topics, parameters, services,
robustness, time, pacing and lockstep: docs/dynamics_node.md.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "dynamics_node":
    # This process is the node: one BLAS/OpenMP thread, set before numpy loads its BLAS (runtime.limit_threads
    # also resizes loaded pools when threadpoolctl is installed). The environment's own choice is kept.
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                  "VECLIB_MAXIMUM_THREADS"):
        os.environ.setdefault(_name, "1")

import time
from typing import Optional

from rclpy.clock import Clock as RclpyClock
from rclpy.clock import ClockType
from rclpy.node import Node

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.dynamics.simulation.simulator import Fault, Simulator, expected_channels
from mbs_ros.nodes import conversions as cv
from mbs_ros.cores.commands import CommandIntake
from mbs_ros.cores.dynamics import limits_text, make_simulator, start_message
from mbs_ros.nodes.dynamics_contacts import ContactPublishing
from mbs_ros.nodes.dynamics_inputs import CommandInputs
from mbs_ros.nodes.dynamics_lockstep import TIMEOUT_TOPIC, LockstepWatch
from mbs_ros.nodes.dynamics_publishing import INPUTS_OUT, EnergyPorts, StatePublishing, TFMessage
from mbs_ros.nodes.dynamics_reconfigure import ON, Reconfiguration
from mbs_ros.nodes.dynamics_sensors import SensorPublishing, load_suite
from mbs_ros.nodes.dynamics_services import MAX_STEP_REQUEST, Services  # noqa: F401 - importable from here
from mbs_ros.cores.dynamics_settings import (  # noqa: F401 - importable from here, as users and tests do
    DEFAULTS, INERTIAL, SINGLE_BODY_ONLY, Settings, build_model, check_inertia, check_rate,
    check_runtime_change, command_limits, initial_state, joint_position_limits, lockstep_steps, pause_step,
    settings_from_values, steps_between, topic_token)
from mbs_ros.cores.pacing import STEP_CHUNK_S, WARN_THROTTLE_S, Pacer, timer_period
from mbs_ros.cores.parameters.dynamics import PARAMETERS
from mbs_ros.cores.ratelimit import RateLimitedLog
from mbs_ros.nodes.logger import fast_get_logger
from mbs_ros.nodes.runtime import (CallbackGuard, declare_model_parameters, freeze_heap, parameter_overrides,
                                   run_node, settings_executor, thread_priority, unknown_overrides)
from mbs_ros.cores.loop import SimulationLoop, on_grid
from mbs_ros.cores.work import Slices, WorkQueue, single, whole

__all__ = ["DynamicsNode", "Settings", "ParameterError", "settings_from_values", "main"]


# ------------------------------------------------------------------------------------------- node


#: a callback's chunk of wall clock for the steps it takes (contact steps can be slower than real time)
STEP_CHUNK_NS = int(STEP_CHUNK_S * 1e9)
GRIDS_REFRESH_S = 0.1  # free-running: the subscribers' grids asked again (~40 subscription counts at 1 kHz: 3 %)


class DynamicsNode(Node):
    """Construct, then call :meth:`configure` (raises ParameterError).

    The simulation itself is ``self.sim``, a :class:`mbs_ros.dynamics.simulation.simulator.Simulator`, stepped
    through ``self.loop`` (:class:`~mbs_ros.cores.loop.SimulationLoop`): this class builds them and advances them
    from a timer (or per lockstep period). Its parts, each built in :meth:`configure` with explicit arguments and
    called from here: ``inputs`` turns command messages into its commands
    (:class:`~mbs_ros.nodes.dynamics_inputs.CommandInputs`), ``publishing`` publishes its state
    (:class:`~mbs_ros.nodes.dynamics_publishing.StatePublishing`), ``sensors`` its sensors
    (:class:`~mbs_ros.nodes.dynamics_sensors.SensorPublishing`), ``watch`` runs lockstep and the waits
    (:class:`~mbs_ros.nodes.dynamics_lockstep.LockstepWatch`), ``sim_services`` serves ``~/reset``, ``~/pause``,
    ``~/step`` (:class:`~mbs_ros.nodes.dynamics_services.Services`) and ``reconfiguration`` checks parameter
    changes (:class:`~mbs_ros.nodes.dynamics_reconfigure.Reconfiguration`, applied by :meth:`_apply_parameters`).
    A new part is built in :meth:`configure` and called where it publishes (:meth:`advance`, :meth:`take_period`,
    :meth:`publish_diagnostics`)."""
    get_logger = fast_get_logger  # log lines at rcutils' cost (mbs_ros.nodes.logger)

    def __init__(self, node_name: str = "dynamics_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._logs = RateLimitedLog(self.get_logger(), WARN_THROTTLE_S)  # per key, free while held back

    # ------------------------------------------------------------------------------ set-up

    def configure(self) -> None:
        """Declare the parameters (:data:`PARAMETERS`), check them, build the model and the simulator, create the
        topics, services and the stepping timer, and publish the initial state."""
        values, source = declare_model_parameters(self, PARAMETERS, lambda name: PARAMETERS[name].default)
        s = settings_from_values(values, source)
        model = build_model(s, source)
        q0, v0 = initial_state(model, s)
        limits = command_limits(model, s)
        rate = check_rate(model, s, q0, limits)  # refuses a physics rate the integrator cannot hold
        if TFMessage is None:
            raise ParameterError("tf2_msgs is not installed: cannot publish /tf")
        if s.lockstep and not expected_channels(model.group is not None, len(model.thruster_names),
                                                len(model.joint_names), s.base_actuated):
            why = "base_actuated is false" if model.group is not None else "this robot has a fixed base"
            raise ParameterError(f"lockstep: {why} and this robot has no movable joint: no command to wait for")
        self.source, self.multibody = source, source.multibody
        self._visual_urdf = None  # a robot's URDF for RViz (_warn_model)
        self.contacts = None  # the contact topics' part (a world with shapes), made with the publishers
        self._warn_model(source, model, s)

        self.settings = s
        self.nj = len(model.joint_names)
        self.nv_base = model.nv - self.nj
        prefix_ns = self.get_namespace()
        self.world_frame = s.world_frame.lstrip("/")
        self.base_frame = cv.prefixed_frame(prefix_ns, s.base_frame)
        self._prefix = "" if s.base_frame.startswith("/") else cv.frame_prefix(prefix_ns)
        self._body_frames = {"", s.base_frame, s.base_frame.lstrip("/"), self.base_frame}
        self._world_frames = {self.world_frame, "/" + self.world_frame}

        # the simulation: t_k = t0 + k * dt, all integer ns
        self.dt_ns = cv.period_ns(s.physics_rate)
        self.dt = self.dt_ns * 1e-9
        self.lockstep = s.lockstep
        # t0: 0 with use_sim_time and no /clock yet
        self.sim = make_simulator(model, s, q0, v0, self.dt, limits, self.get_clock().now().nanoseconds, source)
        # a step of a throw-away copy loads the compiled kernels now, not on the first real step (0.5 s on a loaded
        # machine, while a controller waits for the next state)
        Simulator(model, q0, v0, self.dt, integrator=s.integrator).advance(1)
        self.sim.on_timeout = self._on_command_timeout
        self.sim.on_fault = self._on_fault
        if s.start_paused:
            self.sim.pause(True)
        self._pause_k = pause_step(s)  # pause_at: the step the running simulation pauses itself at
        self._rate = rate
        self._new_fault: Optional[Fault] = None
        self.nt = len(model.thruster_names)
        self.wrench_input = s.base_actuated or model.group is None  # a fixed base's: every one is rejected
        inputs = (["cmd_wrench"] * self.wrench_input + (["cmd_joint_effort", "joint_command"] if self.nj else [])
                  + (["cmd_thrust", "thruster_command"] if self.nt else []))
        self._counts = {**{f"received_{t}": 0 for t in inputs}, **{f"rejected_{t}": 0 for t in inputs},
                        "callback_errors": 0, "skipped_ahead": 0}
        self.guard = CallbackGuard(self, self._counts, self._logs)  # callbacks that never raise, warnings
        self.pacer = Pacer(self.dt_ns, s.real_time_factor)
        self._set_rates(s)
        # the parts, each built with what it uses; the settings of now: ``settings()`` (reconfiguration)
        sim, guard, counts, logs, settings = self.sim, self.guard, self._counts, self._logs, lambda: self.settings
        self.publishing = StatePublishing(self, sim, settings=settings, source=source, multibody=self.multibody,
                                          world_frame=self.world_frame, base_frame=self.base_frame,
                                          prefix=self._prefix, visual_urdf=self._visual_urdf, counts=counts)
        # a changed applied command, as the step applies it: queued (a period's step may end a callback's share)
        sim.on_wrench_applied = lambda k, w: self.work.add(single(lambda: self.publishing.publish_wrench(k, w)))
        sim.on_efforts_applied = lambda k, e: self.work.add(single(lambda: self.publishing.publish_effort(k, e)))
        # the sensors (docs/dynamics_node.md, Sensors): a bad sensors file refuses the start
        suite = load_suite(s.sensors, source, model, self.dt, current=s.current, seed_offset=s.sensor_seed)
        self.sensors = SensorPublishing(self, suite, link_frame=self.publishing.frame, multibody=self.multibody,
                                        base_frame=self.base_frame, prefix=self._prefix, warn=guard.warn, logs=logs)
        self.loop = SimulationLoop(sim, suite, on_reading=self.sensors.publish_reading)
        self.publishing.create(self.sensors.static_transforms())
        self.sensors.create_publishers(sim.lockstep_steps if self.lockstep else self.pacer.max_batch_steps,
                                       self.publishing.pub_diag)
        self.watch = LockstepWatch(self, sim, self.pacer, self.publishing, settings=settings, counts=counts,
                                   logs=logs, take_period=lambda: self.take_period(chunked=True), anchor=self._anchor,
                                   subscriptions=lambda: self.inputs.stamped, busy=lambda: self.work.pending(),
                                   send=lambda job: self.work.add(job) or self._drain(self._share_end()))
        if s.wait_for_command and not s.lockstep and not s.start_paused:
            self.watch.await_first_command()  # a robot under gravity holds its pose while its controller starts
        if sim.world is not None and sim.world.shapes:
            self.contacts = ContactPublishing(self, sim, self.world_frame, self.publishing.frame, self._prefix,
                                              lambda: self.settings.marker_wrench_scale, self.publishing.pub_tf,
                                              TFMessage)
        intake = CommandIntake(sim, lockstep=s.lockstep, body_frames=self._body_frames,
                               world_frames=self._world_frames, base_frame=self.base_frame,
                               world_frame=self.world_frame)
        self.inputs = CommandInputs(self, intake, counts=counts, guard=guard.callback, reject=guard.reject,
                                    warn=guard.warn, logs=logs, limits_text=self._limits_text,
                                    take=self.watch.take, on_input=self.watch.command_came, wrench=self.wrench_input,
                                    body=f"{s.base_group} {'base' if self.multibody else 'body'}")
        self.sim_services = Services(
            self, sim, self.pacer, self.publishing, lockstep=self.lockstep, settings=settings,
            pause_k=lambda: self._pause_k, counts=counts, warn=guard.warn, guard_service=guard.service,
            advance=self.advance, take_period=self.take_period, try_period=lambda: self._period_timer.reset(),
            anchor=self._anchor, publish_diagnostics=self.publish_diagnostics, publish_pause=self._publish_pause,
            before_reset=self._before_reset, before_pause=self.watch.stop_waiting, note_graph=self.watch.note_graph)
        self.reconfiguration = Reconfiguration(
            self.get_logger(), sim, source=source, multibody=self.multibody, dt_ns=self.dt_ns,
            current=lambda: (self.settings, self._pause_k, self._rate), apply=self._apply_parameters)
        self.add_on_set_parameters_callback(self._on_set_parameters)

        # wall-clock pacing
        self._anchor()
        self._spinning, self.timer = False, None
        self._period = None  # lockstep: (k at its start, k at its end) of a period still running (take_period)
        self.work = WorkQueue()  # what is published after a controller's inputs, in pieces (advance, _run_period)
        self.slices = Slices()  # lockstep: a period whose contact step stops at its solver's checkpoints (_run_period)
        if sim.world is not None and self.lockstep:
            sim.world.checkpoint = self.slices.checkpoint
        self._steady_clock = RclpyClock(clock_type=ClockType.STEADY_TIME)
        self._make_timer()
        # queued pieces, the rest of a lockstep period past a callback's chunk: back to back (armed while some are)
        self._period_timer = self.create_timer(0.0, self.guard.callback(self._continue_period, "timer"),
                                               clock=self._steady_clock)
        self._period_timer.cancel()
        freeze_heap()  # its ~0.1 s before the initial state, not between it and the stepping's first (run_node)
        self.publishing.publish_state(everything=True)
        self.publish_diagnostics()
        self.watch.note_graph()  # who had the state: later matches get it again (waiting)
        unknown = unknown_overrides(self, PARAMETERS)
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))
        self.get_logger().info(self._start_message(s, rate))
        if rate.warning:
            self.get_logger().warning(rate.warning)
        thread_priority(self.get_logger(), int(s.thread_priority), busy=not s.real_time_factor and not self.lockstep)

    def _warn_model(self, source: ms.Source, model: Model, s: Settings) -> None:
        """Warnings about the model at start-up: single-body parameters given to a robot, what the tolerant
        loader repaired, meshes nothing resolves (RViz's filenames are kept in ``_visual_urdf``), an inertia that
        violates the triangle inequality."""
        if not self.multibody:
            self._warn_inertia(s)
            return
        overridden = [n for n in SINGLE_BODY_ONLY if n in parameter_overrides(self)]
        if overridden:
            self.get_logger().warning(f"{', '.join(overridden)}: ignored, the model comes from {source.describe()}")
        if model.load_report:  # what the tolerant loader repaired, left out or found implausible: one line
            n = len(model.load_report)
            self.get_logger().warning(f"{source.describe()} loaded with {n} note{'s' if n > 1 else ''}: "
                                      + "; ".join(model.load_report))
        # mesh filenames RViz resolves (file:// for packages outside the ament index and plain paths); one
        # warning, at start, for those nothing resolves
        self._visual_urdf, meshes = ms.meshes_for_rviz(source)
        if meshes:
            self.get_logger().warning(meshes)

    def _start_message(self, s: Settings, rate) -> str:
        return start_message(s, rate, self.sim, self.source.describe(), self.multibody,
                             (self.world_frame, self.base_frame), self._publish_every, self.watch.awaiting_command,
                             self._pause_k, self.sensors.text())

    @property
    def model(self) -> Model:
        return self.sim.model

    # ------------------------------------------------------------------------------ robustness

    def _limits_text(self) -> str:
        return limits_text(self.sim)

    def _on_fault(self, fault: Fault) -> None:
        """Simulator hook (inside its advance): remember the fault; :meth:`advance` reports it."""
        self._new_fault = fault

    def _report_fault(self) -> None:
        """A fault just halted the simulation: the last good state once, an ERROR on /diagnostics, the log."""
        fault, self._new_fault = self._new_fault, None
        if fault is None:
            return
        self.guard.warn("fault", f"simulation halted at t = {cv.seconds_text(fault.stamp_ns)} s (step {fault.k}): "
                   f"{fault.reason}; commands cleared, the state at that time is kept; call ~/reset to resume",
                   error=True)
        self._grids = None
        self.publishing.publish_state(everything=True)
        self.publishing.publish_applied()
        self.publish_diagnostics()

    def _warn_inertia(self, s: Settings) -> None:
        msg = check_inertia(s.inertia_matrix)
        if msg:
            self.get_logger().warning(msg)

    def _on_set_parameters(self, params):
        """A change checked as a whole (:class:`~mbs_ros.nodes.dynamics_reconfigure.Reconfiguration`); an accepted
        ``current`` reaches the sensors' environment too (``sensors`` itself is read-only)."""
        result = self.reconfiguration.on_set_parameters(params)
        if result.successful and any(p.name == "current" for p in params):
            self.sensors.set_current(self.settings.current)
        return result

    def _apply_parameters(self, s: Settings, changed: set, pause_k, model: Model, limits, rate) -> None:
        """An accepted change: rates, integrator, limits, pacing, a new model for new inertial parameters (a single
        body's marker box with it), the water's current, where ``pause_at`` pauses (after a step in slices)."""
        self.slices.finish()
        old = self.settings
        self.settings = s
        self._set_rates(s)
        self.sim.integrator = s.integrator
        self._pause_k = pause_k
        if changed & ON["limits"]:
            self.sim.set_limits((limits.max_force, limits.max_torque), limits.max_effort)
            self.get_logger().info("command limits: " + self._limits_text())
        if rate is not self._rate:
            self._rate = rate
            if rate.warning:
                self.get_logger().warning(rate.warning)
        if s.real_time_factor != old.real_time_factor:
            self._anchor()
            self._make_timer()
        if model is not self.model:
            self.sim.set_model(model)  # same state, new inertia: new energy/momentum reference
            if not self.multibody:
                self._warn_inertia(s)
                self.publishing.setup_markers()  # the equivalent-inertia box changes with the inertia
        elif changed & ON["water"]:  # the water changes, the references stay (a port of the balance)
            self.sim.set_current(s.current, s.current_rate)

    def _set_rates(self, s: Settings) -> None:
        """Steps between publications (0: never): state, joint wrenches, markers, diagnostics."""
        self._publish_every = steps_between(s.physics_rate, s.publish_rate)
        self._wrench_every = steps_between(s.physics_rate, s.wrench_rate) if self.nj else 0
        self._markers_every = steps_between(s.physics_rate, s.markers_rate) if s.publish_markers else 0
        self._diag_every = steps_between(s.physics_rate, s.diagnostics_rate)
        self._energy_every = steps_between(s.physics_rate, s.energy_rate) if EnergyPorts is not None else 0
        self._contacts_every = steps_between(s.physics_rate, s.contacts_rate)
        self._chunk_ns = int(min(STEP_CHUNK_S, 0.25 / s.control_rate) * 1e9)  # lockstep: a callback's publications
        self._grids, self._grids_at = None, 0.0  # the step grids advance() stops at (rates, subscribers), when asked
        self.sim.set_cmd_timeout(s.cmd_timeout)
        self.pacer.set_real_time_factor(s.real_time_factor)

    def _anchor(self) -> None:
        self.pacer.anchor(self.sim.k, time.monotonic_ns())

    def _make_timer(self) -> None:
        """(Re)create the stepping timer for the current real_time_factor."""
        if self.timer is not None:
            self.destroy_timer(self.timer)
        # lockstep: periods start from the command callbacks; the timer paces and watches
        period = timer_period(self.dt, self.settings.real_time_factor, self.lockstep)
        # On the steady clock: this node makes the simulation time, even when it runs with use_sim_time.
        self.timer = self.create_timer(period, self.guard.callback(self._tick, "step timer"), clock=self._steady_clock)

    def stamp(self, k: Optional[int] = None) -> int:
        return self.sim.stamp(k)

    # ---------------------------------------------------------------------------- stepping

    def _tick(self) -> None:
        """:meth:`_on_timer`; a tick that raises is a fault (ERROR on /diagnostics, ~/reset resumes), counted."""
        try:
            self._on_timer()
        except Exception as e:  # noqa: BLE001 - no tick may stop the node, none may fail unreported
            if self.context.ok():
                self._counts["callback_errors"] += 1
                if self.sim.fault is None:
                    self.sim.halt(f"a timer tick failed: {type(e).__name__}: {str(e)[:200]}")
                self._report_fault()

    def _on_timer(self) -> None:
        sim = self.sim
        if not self._spinning:  # the wall clock counts from the first tick, not from the set-up before the spin
            self._spinning = True
            self._anchor()
        if self.work.pending():  # the state stands until its publications are out; the steps in a later callback
            self._drain(time.monotonic_ns() + self._chunk_ns)
            return
        if sim.paused or (self.watch.awaiting_command and not self.watch.command_arrived()):
            # time stands still (paused, or wait_for_command before the first command): keep the bookkeeping and
            # the clock visible
            if (self._diag_every
                    and time.monotonic() - self.publishing.last_diag_wall >= 1.0 / self.settings.diagnostics_rate):
                self.work.add(self.diagnostics_pieces())  # in pieces, as running: the rest in the next callbacks
                self._drain(time.monotonic_ns() + self._chunk_ns)
            self.publishing.repeat_clock()
            self.watch.paused_watch()
            return
        if self.lockstep:
            if self._period is not None:  # a period still running (its timer stopped while paused): go on
                if self._period_timer.is_canceled():
                    self._period_timer.reset()
                return
            self.watch.lockstep_watch()
            return
        rtf = self.settings.real_time_factor
        if rtf == 0.0:  # as fast as possible: one batch per callback, subscriptions served in between
            self.advance(self.pacer.max_batch_steps, deadline_ns=time.monotonic_ns() + STEP_CHUNK_NS)
            self.publishing.publish_clock()
            return
        now = time.monotonic_ns()
        # A small batch per callback: when behind, the timer is ready again at once, and the commands that
        # arrived meanwhile are taken between batches instead of after one long open-loop burst.
        n = self.pacer.steps_now(sim.k, now)
        if n > 0:  # contact steps are slow: at most a chunk of wall clock per callback, the rest on the next
            self.advance(n, deadline_ns=now + STEP_CHUNK_NS)
            self.publishing.publish_clock()
        if self.pacer.lagging(sim.k, now):
            self._counts["skipped_ahead"] += 1
            persistent, text = self.pacer.skip(sim.k, now)  # a warning when another came within PERSISTENT_LAG_S
            self.guard.warn("behind", text) if persistent else self.get_logger().info(text)
            self._anchor()

    def advance(self, steps: int, deadline_ns: Optional[int] = None) -> None:
        """Take ``steps`` physics steps, publishing what falls due on the way (the state every
        ``_publish_every`` steps outside lockstep, joint wrenches, markers and diagnostics on their own step
        grids, each only while someone subscribes; the sensors on theirs always, their readings as they fall due).
        The one place the simulation advances (timer and lockstep). ``deadline_ns`` (monotonic): return early
        after a contact step past it (:meth:`Simulator.advance`), and in lockstep after a stop whose publications
        are not all out within the callback's share (the rest in pieces: :meth:`_drain`, then the steps)."""
        # free-running, all at once after each stop, as the controller's loop expects (delaying the steps behind a
        # piece left for a later callback lets the pacing fall behind; the stepping chunk bounds the callback)
        shared = deadline_ns is not None and self.lockstep  # lockstep: the pieces within the callback's share
        if not self._drain(self._share_end() if shared else None):
            return
        work = self.work
        for k in self.loop.stops(steps, self._stop_grids, self._pause_k, deadline_ns):
            if not self.lockstep:  # lockstep: the state and what goes with it once per period (take_period)
                wrenches = on_grid(k, self._wrench_every)
                markers = on_grid(k, self._markers_every)
                if k % self._publish_every == 0:
                    self._publish_state(wrenches, markers)
                    if time.monotonic() - self._grids_at > GRIDS_REFRESH_S:
                        self._grids = None
                else:
                    if wrenches:
                        work.add(self.publishing.joint_wrench_pieces(self.stamp()))
                    if markers:
                        work.add(single(lambda: self.publishing.publish_markers(self.stamp())))
            if on_grid(k, self._diag_every):
                work.add(self.diagnostics_pieces())
            if on_grid(k, self._energy_every):
                work.add(single(self.publishing.publish_energy))
            if self.contacts is not None and on_grid(k, self._contacts_every):
                work.add(self.contacts.pieces(self.stamp()))
            if not self.lockstep:  # lockstep: once the period's state is out (take_period)
                self.sim_services.pause_at_reached()
            if not self._drain(self._share_end() if shared else None):
                break
        if self._new_fault is not None:
            self._report_fault()

    def _publish_state(self, wrenches: bool, markers: bool, by_ns: Optional[int] = None, rest: bool = True) -> None:
        """The state: a controller's inputs now (queued too when ``by_ns`` has passed), the rest (and, with
        ``rest``, pose, /tf, thrust and the applied commands again) queued."""
        pieces = self.publishing.state_pieces(wrenches=wrenches, markers=markers, rest=rest)
        while by_ns is None or time.monotonic_ns() <= by_ns:  # the inputs' pieces now while within by_ns
            if next(pieces) is INPUTS_OUT:
                break
        self.work.add(pieces)
        if rest:
            self.work.add(single(self.publishing.publish_applied))

    def _share_end(self) -> int:
        """When the running callback (that resuming a period too) has used its quarter of the control period."""
        return self.guard.started_ns + self._chunk_ns

    def _drain(self, deadline_ns: Optional[int]) -> bool:
        """Queued pieces until ``deadline_ns`` (None: all); True when none is left, else the continuation timer
        is armed for the rest."""
        if self.work.run(deadline_ns):
            return True
        if self._period_timer.is_canceled():
            self._period_timer.reset()
        return False

    def take_period(self, chunked: bool = False) -> None:
        """Lockstep: the control period whose commands are all here (the caller checked), then its state.
        ``chunked`` (a command callback's): at most a chunk of wall clock (``STEP_CHUNK_S``) of contact steps per
        callback, the stepping timer takes the rest (no callback holds the node for a whole period of slow
        contact steps); the state once the period's last step is taken, as unchunked: the same steps."""
        sim = self.sim
        if self._period is not None:  # a period is still running (its commands cannot be complete: not reached)
            return
        self._period = (sim.k, sim.k + sim.lockstep_steps)
        sim.start_period()
        self._grids = None
        self._run_period(chunked)

    def _continue_period(self) -> None:
        """The continuation timer: the queued pieces, then the rest of a running lockstep period; then, nothing
        left, the next period if its commands came meanwhile."""
        if self.work.pending():  # the pieces alone in this callback: the steps in the next (armed again)
            self._drain(time.monotonic_ns() + self._chunk_ns)
            return
        if self._period is not None and not self.sim.paused:  # paused: the stepping timer arms it once resumed
            self._run_period(chunked=True)
            return
        self._period_timer.cancel()
        if self.lockstep:
            self.watch.try_period()

    def _run_period(self, chunked: bool) -> None:
        """The period's steps; ``chunked``: in slices, a contact step stopping at its checkpoints once the callback
        has used its share (from its start), the next callbacks resuming it (docs/dynamics_node.md, "Contact steps in
        slices")."""
        if not chunked:
            return self._period_steps(False)
        if not self.slices.run(lambda: self._period_steps(True), self._share_end()):
            self._period_timer.reset()

    def _period_steps(self, chunked: bool) -> None:
        sim, t0 = self.sim, time.monotonic_ns()
        k0, end = self._period
        self.advance(end - sim.k, deadline_ns=t0 + STEP_CHUNK_NS if chunked else None)
        if chunked and sim.k < end and sim.fault is None:
            if self._period_timer.is_canceled():
                self._period_timer.reset()  # the rest in the next callbacks, the executor free in between
            return
        self._period = None
        self._period_timer.cancel()
        k1 = sim.k
        # a controller's inputs every period; the rest of the state (pose, /tf, thrust, the applied commands again),
        # joint wrenches and markers with it when their step grid was crossed during the period
        by_ns = self._share_end() if chunked else None
        self._publish_state(bool(self._wrench_every) and k1 // self._wrench_every > k0 // self._wrench_every,
                            bool(self._markers_every) and k1 // self._markers_every > k0 // self._markers_every, by_ns,
                            rest=k1 // self._publish_every > k0 // self._publish_every)
        self.sim_services.pause_at_reached()
        self._drain(by_ns)

    def _before_reset(self) -> None:  # ~/reset, before the simulator resets: the sensors drop the queued readings
        self.sensors.reset()
        self._period = None  # a lockstep period in progress ends with the reset (which publishes its state)
        self.slices.abandon()  # with its step in slices
        self.work.clear()  # and what was queued of the old state

    def _publish_pause(self, state: bool) -> None:
        """A pause: the state with everything (``state``: not out yet) and the applied commands, the diagnostics;
        in lockstep in pieces as a period's (docs/dynamics_node.md, "Publication in pieces")."""
        if state:
            self.work.add(self.publishing.state_pieces(everything=True))
            self.work.add(single(self.publishing.publish_applied))
        self.work.add(self.diagnostics_pieces())
        self._drain(self._share_end() if self.lockstep else None)

    def publish_diagnostics(self) -> None:
        """/diagnostics: the node's status (a ~/step in progress: paused), then one per sensor."""
        whole(self.diagnostics_pieces())

    def diagnostics_pieces(self):
        """:meth:`publish_diagnostics` piece by piece (the work queue's job: none holds a callback for long)."""
        yield from self.publishing.diagnostics_pieces(self.sim.paused or self.sim_services.stepping, self._rate,
                                                      self.guard.timing)
        self.sensors.publish_diagnostics(self.stamp())
        yield

    def _stop_grids(self) -> list:
        """The publication grids :meth:`advance` stops at, asked again every control period in lockstep and after
        a state at most every GRIDS_REFRESH_S of wall clock outside it (subscribers come and go)."""
        if self._grids is None:
            self._grids, self._grids_at = self._active_grids(), time.monotonic()
        return self._grids

    def _active_grids(self) -> list:
        """Step grids to stop at: the state's (outside lockstep), the diagnostics', and the joint wrenches' and
        markers' while someone subscribes to them."""
        grids, pub = [], self.publishing
        if self._diag_every and pub.pub_diag.get_subscription_count():
            grids.append(self._diag_every)
        if self._energy_every and pub.pub_energy.get_subscription_count():
            grids.append(self._energy_every)
        if self._contacts_every and self.contacts is not None and self.contacts.wanted():
            grids.append(self._contacts_every)
        if self.lockstep:
            return grids
        grids.append(self._publish_every)
        if self._wrench_every and any(p.get_subscription_count() for p in pub.pub_joint_wrenches):
            grids.append(self._wrench_every)
        if self._markers_every and pub.pub_markers.get_subscription_count():
            grids.append(self._markers_every)
        return grids

    def _on_command_timeout(self, channel: str) -> None:
        self._logs.info(f"timeout_{channel}",
                        lambda: f"no {TIMEOUT_TOPIC[channel]} for {self.settings.cmd_timeout:g} s: applying zero")


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    return run_node(DynamicsNode, args, make_executor=settings_executor)


if __name__ == "__main__":
    sys.exit(main())
