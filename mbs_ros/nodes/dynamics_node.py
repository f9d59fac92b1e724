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
from mbs_ros.dynamics.simulation.simulator import Fault, Simulator
from mbs_ros.nodes import conversions as cv
from mbs_ros.cores.commands import CommandIntake
from mbs_ros.cores.dynamics import make_simulator
from mbs_ros.nodes.dynamics_contacts import ContactPublishing
from mbs_ros.nodes.dynamics_inputs import CommandInputs
from mbs_ros.nodes.dynamics_lockstep import TIMEOUT_TOPIC, TOPIC, LockstepWatch
from mbs_ros.nodes.dynamics_publishing import EnergyPorts, StatePublishing, TFMessage
from mbs_ros.nodes.dynamics_reconfigure import Reconfiguration
from mbs_ros.nodes.dynamics_sensors import SensorPublishing, load_suite
from mbs_ros.nodes.dynamics_services import MAX_STEP_REQUEST, Services  # noqa: F401 - importable from here
from mbs_ros.cores.dynamics_settings import (  # noqa: F401 - importable from here, as users and tests do
    DEFAULTS, INERTIAL, SINGLE_BODY_ONLY, Settings, build_model, check_inertia, check_rate,
    check_runtime_change, command_limits, initial_state, joint_position_limits, lockstep_steps, pause_step,
    settings_from_values, steps_between, topic_token)
from mbs_ros.cores.pacing import STEP_CHUNK_S, WARN_THROTTLE_S, Pacer, timer_period
from mbs_ros.cores.parameters.dynamics import PARAMETERS
from mbs_ros.cores.ratelimit import RateLimitedLog
from mbs_ros.nodes.runtime import (declare_model_parameters, parameter_overrides, run_node, settings_executor,
                                   unknown_overrides)
from mbs_ros.cores.loop import SimulationLoop, on_grid

__all__ = ["DynamicsNode", "Settings", "ParameterError", "settings_from_values", "main"]


# ------------------------------------------------------------------------------------------- node


#: a callback's chunk of wall clock for the steps it takes (contact steps can be slower than real time)
STEP_CHUNK_NS = int(STEP_CHUNK_S * 1e9)


class DynamicsNode(SensorPublishing, StatePublishing, LockstepWatch, Services, Reconfiguration, Node):
    """Construct, then call :meth:`configure` (raises ParameterError).

    The simulation itself is ``self.sim``, a :class:`mbs_ros.dynamics.simulation.simulator.Simulator`: this class builds it
    and advances it from a timer (or per lockstep period); the parts turn command messages into its commands
    (:class:`~mbs_ros.nodes.dynamics_inputs.CommandInputs`), publish its state
    (:class:`~mbs_ros.nodes.dynamics_publishing.StatePublishing`) and its sensors
    (:class:`~mbs_ros.nodes.dynamics_sensors.SensorPublishing`), run lockstep
    (:class:`~mbs_ros.nodes.dynamics_lockstep.LockstepWatch`), serve ``~/reset``, ``~/pause``, ``~/step``
    (:class:`~mbs_ros.nodes.dynamics_services.Services`) and parameter changes
    (:class:`~mbs_ros.nodes.dynamics_reconfigure.Reconfiguration`)."""

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
        if s.lockstep and model.group is None and not model.joint_names:
            raise ParameterError("lockstep: this robot has a fixed base and no movable joint, so there is no "
                                 "command to wait for")
        self.source = source
        self.multibody = source.multibody
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
        self.sim = make_simulator(model, s, q0, v0, self.dt, limits, self.get_clock().now().nanoseconds,
                                  source)
        # a step of a throw-away copy loads the compiled kernels now, not on the first real step (0.5 s on a loaded
        # machine, while a controller waits for the next state)
        Simulator(model, q0, v0, self.dt, integrator=s.integrator).advance(1)
        self.sim.on_wrench_applied = self._publish_wrench
        self.sim.on_efforts_applied = self._publish_effort
        self.sim.on_timeout = self._on_command_timeout
        self.sim.on_fault = self._on_fault
        if s.start_paused:
            self.sim.pause(True)
        self._pause_k = pause_step(s)  # pause_at: the step the running simulation pauses itself at
        self._rate = rate
        self._new_fault: Optional[Fault] = None
        self.nt = len(model.thruster_names)
        inputs = (["cmd_wrench"] + (["cmd_joint_effort", "joint_command"] if self.nj else [])
                  + (["cmd_thrust", "thruster_command"] if self.nt else []))
        self._counts = {**{f"received_{t}": 0 for t in inputs}, **{f"rejected_{t}": 0 for t in inputs},
                        "callback_errors": 0}
        self._reported = {}  # counts (and saturations) at the last diagnostics: what is new since
        if s.wait_for_command and not s.lockstep and not s.start_paused:
            self.await_first_command()  # a robot under gravity holds its initial pose while its controller starts
        self.pacer = Pacer(self.dt_ns, s.real_time_factor)
        self._set_rates(s)
        self._last_clock_stamp = None
        self._last_clock_wall = 0.0
        self._last_published_k = None
        self._last_diag_wall = 0.0
        self._stepping = False  # inside ~/step: still paused for everyone watching (diagnostics say so)
        # lockstep: wall-clock bookkeeping (the periods themselves are the simulator's)
        self._last_input_wall = time.monotonic()
        self._last_state_wall = 0.0
        self._graph_counts = ()
        # the sensors (docs/dynamics_node.md, Sensors): a bad sensors file refuses the start
        self._setup_sensors(load_suite(s.sensors, source, model, self.dt, current=s.current,
                                       seed_offset=s.sensor_seed))
        self.loop = SimulationLoop(self.sim, self.suite, on_reading=self._publish_reading)

        self._create_publishers()
        if self.sim.world is not None and self.sim.world.shapes:
            self.contacts = ContactPublishing(self, self.sim, self.world_frame, self._frame, self._prefix,
                                              lambda: self.settings.marker_wrench_scale, self.pub_tf, TFMessage)
        intake = CommandIntake(self.sim, lockstep=s.lockstep, body_frames=self._body_frames,
                               world_frames=self._world_frames, base_frame=self.base_frame,
                               world_frame=self.world_frame)
        self.inputs = CommandInputs(self, intake, counts=self._counts, guard=self._guard, reject=self._reject,
                                    warn=self._warn, logs=self._logs, limits_text=self._limits_text,
                                    take=self._lockstep_take, on_input=self._command_came,
                                    body=f"{s.base_group} {'base' if self.multibody else 'body'}")
        self._create_services()
        self.add_on_set_parameters_callback(self._on_set_parameters)

        # wall-clock pacing
        self._anchor()
        self._spinning = False
        self.timer = None
        self._steady_clock = RclpyClock(clock_type=ClockType.STEADY_TIME)
        self._make_timer()

        self._publish_state(everything=True)
        self._publish_diagnostics()
        self._graph_counts = self._graph_counts_now()  # who had the state: later matches get it again (waiting)
        unknown = unknown_overrides(self, PARAMETERS)
        if unknown:
            self.get_logger().warning("ignoring unknown parameters (typo?): " + ", ".join(unknown))
        self.get_logger().info(self._start_message(s, rate))
        if rate.warning:
            self.get_logger().warning(rate.warning)

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
        """The one info line at start-up: the model, the integrator and rate, the timing, limits, fastest modes."""
        model = self.model
        if self.multibody:
            what = (f"{s.base_group} base robot {self.source.describe()}, {self.nj} joints "
                    f"({', '.join(model.joint_names)}), total mass {model.total_mass:g} kg")
            errors = [f"{n} {getattr(s, n):g}" for n in ("mass_scale", "added_mass_scale") if getattr(s, n) != 1.0]
            errors += ["link_mass_scales [" + ", ".join(f"{f:g}" for f in s.link_mass_scales) + "]"] \
                if s.link_mass_scales else []
            what += f" (true model perturbed: {', '.join(errors)})" if errors else ""
        else:
            what = f"{s.base_group} body, mass {s.mass:g} kg"
        if s.lockstep:
            timing = (f"lockstep: {self.sim.lockstep_steps} steps per control period, waiting for "
                      f"{' and '.join(TOPIC[ch] for ch in self.sim.expected)} stamped with each state, "
                      + (f"at most {s.real_time_factor:g}x real time" if s.real_time_factor > 0
                         else "as fast as the controller answers"))
        else:
            timing = (f"publishing {self.world_frame} -> {self.base_frame} every {self._publish_every} steps, "
                      + (f"real_time_factor {s.real_time_factor:g}" if s.real_time_factor > 0
                         else "as fast as possible") + f", cmd_timeout {s.cmd_timeout:g} s")
        return (f"{what}, {s.integrator} at {1e9 / self.dt_ns:g} Hz (dt = {self.dt_ns} ns), {timing}"
                + (", publishing /clock" if s.publish_clock else "")
                + (f"; paused at t = {self.stamp() * 1e-9:.9f} s (start_paused: ~/pause false resumes, ~/step "
                   "steps)" if s.start_paused else "")
                + (f"; waiting at t = {self.stamp() * 1e-9:.9f} s for the first command (wait_for_command)"
                   if self._awaiting_command else "")
                + (f"; pausing at t = {self.stamp(self._pause_k) * 1e-9:.9f} s (pause_at)"
                   if self._pause_k is not None else "")
                + f"; {self._limits_text()}; {self._sensors_text()}; fastest modes: "
                f"gravity {rate.omega_gravity:.3g} rad/s, full effort {rate.omega_effort:.3g} rad/s; runaway beyond "
                f"{self.sim.max_angular_rate:g} rad/s")

    @property
    def model(self) -> Model:
        return self.sim.model

    # ------------------------------------------------------------------------------ robustness

    def _limits_text(self) -> str:
        lim = self.sim.limits
        parts = []
        if self.model.group is not None:
            parts.append(f"max_wrench [{lim.max_force:g} N, {lim.max_torque:g} N m]")
        if self.nj:
            parts.append("max_effort [" + ", ".join(f"{x:g}" for x in lim.max_effort) + "]")
        if getattr(self, "nt", 0):
            lo, hi = self.model.thrust_limits
            parts.append("thrust [" + ", ".join(f"{a:g}..{b:g}" for a, b in zip(lo, hi)) + "] N")
        return ", ".join(parts) or "no command limits (nothing to command)"

    def _warn(self, key: str, text: str, error: bool = False) -> None:
        """A warning throttled per ``key`` (one per WARN_THROTTLE_S of wall clock), with how many were held back;
        free while held back (:mod:`mbs_ros.cores.ratelimit`: rclpy's own throttle costs ms per call)."""
        if not self.context.ok():
            return
        try:
            (self._logs.error if error else self._logs.warning)(key, text)
        except Exception:  # noqa: BLE001 - a log line is never worth the node
            pass

    def _reject(self, topic: str, kind: str, reason: str) -> None:
        """An input rejected: counted, and a warning throttled per topic and kind of reason."""
        self._counts[f"rejected_{topic}"] += 1
        self._warn(f"{topic}:{kind}", f"{topic} rejected: {reason}")

    def _guard(self, fn, what: str):
        """``fn`` that never raises: an exception is logged (throttled) and counted."""

        def guarded(*args):
            try:
                return fn(*args)
            except Exception as e:  # noqa: BLE001 - no input may stop the node
                if not self.context.ok():
                    return None
                self._counts["callback_errors"] += 1
                self._warn(f"error_{what}", f"{what} callback failed: {type(e).__name__}: {e}", error=True)
            return None

        if what == "timer":  # rclpy passes a TimerInfo to a timer callback that takes an argument
            return lambda: guarded()
        return lambda msg: guarded(msg)

    def _guard_service(self, fn, what: str):
        """A service callback that never raises: an exception is the response's reason."""

        def guarded(request, response):
            try:
                return fn(request, response)
            except Exception as e:  # noqa: BLE001
                self._counts["callback_errors"] += 1
                self._warn(f"error_{what}", f"{what} failed: {type(e).__name__}: {e}", error=True)
                response.success = False
                response.message = f"{what} failed: {type(e).__name__}: {e}"
                return response

        return guarded

    def _on_fault(self, fault: Fault) -> None:
        """Simulator hook (inside its advance): remember the fault; :meth:`advance` reports it."""
        self._new_fault = fault

    def _report_fault(self) -> None:
        """A fault just halted the simulation: the last good state once, an ERROR on /diagnostics, the log."""
        fault, self._new_fault = self._new_fault, None
        if fault is None:
            return
        self._warn("fault", f"simulation halted at t = {cv.seconds_text(fault.stamp_ns)} s (step {fault.k}): "
                   f"{fault.reason}; commands cleared, the state at that time is kept; call ~/reset to resume",
                   error=True)
        self._grids = None
        self._publish_state(everything=True)
        self._publish_applied()
        self._publish_diagnostics()

    def _warn_inertia(self, s: Settings) -> None:
        msg = check_inertia(s.inertia_matrix)
        if msg:
            self.get_logger().warning(msg)

    def _set_rates(self, s: Settings) -> None:
        """Steps between publications (0: never): state, joint wrenches, markers, diagnostics."""
        self._publish_every = steps_between(s.physics_rate, s.publish_rate)
        self._wrench_every = steps_between(s.physics_rate, s.wrench_rate) if self.nj else 0
        self._markers_every = steps_between(s.physics_rate, s.markers_rate) if s.publish_markers else 0
        self._diag_every = steps_between(s.physics_rate, s.diagnostics_rate)
        self._energy_every = steps_between(s.physics_rate, s.energy_rate) if EnergyPorts is not None else 0
        self._contacts_every = steps_between(s.physics_rate, s.contacts_rate)
        self._grids = None  # the step grids advance() stops at, from the rates and the subscribers
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
        self.timer = self.create_timer(period, self._guard(self._on_timer, "timer"), clock=self._steady_clock)

    def stamp(self, k: Optional[int] = None) -> int:
        return self.sim.stamp(k)

    # ---------------------------------------------------------------------------- stepping

    def _on_timer(self) -> None:
        sim = self.sim
        if not self._spinning:  # the wall clock counts from the first tick, not from the set-up before the spin
            self._spinning = True
            self._anchor()
        if sim.paused or (self._awaiting_command and not self._command_arrived()):
            # time stands still (paused, or wait_for_command before the first command): keep the bookkeeping and
            # the clock visible
            if (self._diag_every
                    and time.monotonic() - self._last_diag_wall >= 1.0 / self.settings.diagnostics_rate):
                self._publish_diagnostics()
            self._repeat_clock()
            self._paused_watch()
            return
        if self.lockstep:
            self._lockstep_watch()
            return
        rtf = self.settings.real_time_factor
        if rtf == 0.0:  # as fast as possible: one batch per callback, subscriptions served in between
            self.advance(self.pacer.max_batch_steps, deadline_ns=time.monotonic_ns() + STEP_CHUNK_NS)
            self._publish_clock()
            return
        now = time.monotonic_ns()
        # A small batch per callback: when behind, the timer is ready again at once, and the commands that
        # arrived meanwhile are taken between batches instead of after one long open-loop burst.
        n = self.pacer.steps_now(sim.k, now)
        if n > 0:  # contact steps are slow: at most a chunk of wall clock per callback, the rest on the next
            self.advance(n, deadline_ns=now + STEP_CHUNK_NS)
            self._publish_clock()
        if self.pacer.lagging(sim.k, now):
            behind = self.pacer.due(now) - sim.k
            self._warn("behind", f"falling behind the wall clock by {behind * self.dt / rtf:.3f} s: skipping ahead "
                       f"(the simulation runs slower than real_time_factor {rtf:g})")
            self._anchor()

    def advance(self, steps: int, deadline_ns: Optional[int] = None) -> None:
        """Take ``steps`` physics steps, publishing what falls due on the way (the state every
        ``_publish_every`` steps outside lockstep, joint wrenches, markers and diagnostics on their own step
        grids, each only while someone subscribes; the sensors on theirs always, their readings as they fall due).
        The one place the simulation advances (timer and lockstep). ``deadline_ns`` (monotonic): return early
        after a contact step past it (:meth:`Simulator.advance`)."""
        for k in self.loop.stops(steps, self._stop_grids, self._pause_k, deadline_ns):
            if not self.lockstep:  # lockstep: the state and what goes with it once per period (_take_period)
                wrenches = on_grid(k, self._wrench_every)
                markers = on_grid(k, self._markers_every)
                if k % self._publish_every == 0:
                    self._publish_state(wrenches=wrenches, markers=markers)
                    self._publish_applied()
                    self._grids = None
                else:
                    if wrenches:
                        self._publish_joint_wrenches(self.stamp())
                    if markers:
                        self._publish_markers(self.stamp())
            if on_grid(k, self._diag_every):
                self._publish_diagnostics()
            if on_grid(k, self._energy_every):
                self._publish_energy()
            if self.contacts is not None and on_grid(k, self._contacts_every):
                self.contacts.publish(self.stamp())
            if not self.lockstep:  # lockstep: once the period's state is out (_take_period)
                self._pause_at_reached()
        if self._new_fault is not None:
            self._report_fault()

    def _stop_grids(self) -> list:
        """The publication grids :meth:`advance` stops at, asked again after every state (subscribers come and
        go)."""
        if self._grids is None:
            self._grids = self._active_grids()
        return self._grids

    def _active_grids(self) -> list:
        """Step grids to stop at: the state's (outside lockstep), the diagnostics', and the joint wrenches' and
        markers' while someone subscribes to them."""
        grids = []
        if self._diag_every and self.pub_diag.get_subscription_count():
            grids.append(self._diag_every)
        if self._energy_every and self.pub_energy.get_subscription_count():
            grids.append(self._energy_every)
        if self._contacts_every and self.contacts is not None and self.contacts.wanted():
            grids.append(self._contacts_every)
        if self.lockstep:
            return grids
        grids.append(self._publish_every)
        if self._wrench_every and self._joint_wrenches_wanted():
            grids.append(self._wrench_every)
        if self._markers_every and self.pub_markers.get_subscription_count():
            grids.append(self._markers_every)
        return grids

    def _joint_wrenches_wanted(self) -> bool:
        return any(p.get_subscription_count() for p in self.pub_joint_wrenches)

    def _on_command_timeout(self, channel: str) -> None:
        self._logs.info(f"timeout_{channel}",
                        lambda: f"no {TIMEOUT_TOPIC[channel]} for {self.settings.cmd_timeout:g} s: applying zero")


# ------------------------------------------------------------------------------------------- main


def main(args=None) -> int:
    return run_node(DynamicsNode, args, make_executor=settings_executor)


if __name__ == "__main__":
    sys.exit(main())
