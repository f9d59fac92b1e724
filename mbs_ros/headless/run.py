"""A scenario run in one process without ROS, bit-identical to the lockstep run over ROS on simulation time.

:func:`run_scenario` does what ``python -m mbs_ros.bringup SCENARIO --set lockstep=true --set sim_time=true --set
real_time_factor=0`` does, through the same ROS-free cores the nodes call, with the values the nodes' parameters
give (:func:`mbs_ros.scenario.schema.node_specs` plus the runner's paused start): per robot the dynamics node's
simulator (:mod:`mbs_ros.cores.dynamics`), loop (:mod:`mbs_ros.cores.loop`) and command intake
(:mod:`mbs_ros.cores.commands`), the controller's state path (:mod:`mbs_ros.cores.controller_state`),
law, limits and allocation (:mod:`mbs_ros.cores.controller`) and the reference node's set-up and
trajectories (:mod:`mbs_ros.cores.reference`).
The order per control period is the lockstep one: the state at ``t_k`` as the dynamics node publishes it (odom,
joint_states), the controller's state from it, its command stamped ``t_k``, the simulator's checks of that command,
then ``lockstep_steps`` physics steps to ``t_{k+1}``. The paused start: the controller answers the state at 0 while
holding it, then the reference (stamped 0) is installed, then time runs. docs/headless.md.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from mbs_ros.scenario.schema import NodeSpec, Scenario, ScenarioError, load_scenario, node_specs
from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers import timebase as tb
from mbs_ros.controllers.reference_input import Rejected, reference_position_bounds
from mbs_ros.dynamics.contact.report import ContactReport
from mbs_ros.dynamics.model import source as ms
from mbs_ros.headless import fast as fast_path
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores import controller_settings as cs
from mbs_ros.cores.commands import Accepted, CommandIntake
from mbs_ros.cores import dynamics_settings as ds
from mbs_ros.cores import estimator_settings as es
from mbs_ros.cores.controller import (controller_setup, desired, idle, law_command, law_for,
                                     reference_from_points, with_gripper)
from mbs_ros.cores.controller_state import commit_state, estimate_parts
from mbs_ros.cores.dynamics import StateView, balance_residual, load_suite, make_simulator
from mbs_ros.cores.estimator import feed, reading_payloads, roles_by_sensor
from mbs_ros.cores.parameters.controller import PARAMETERS as CONTROLLER_PARAMETERS
from mbs_ros.cores.parameters.dynamics import PARAMETERS as DYNAMICS_PARAMETERS
from mbs_ros.cores.parameters.estimator import PARAMETERS as ESTIMATOR_PARAMETERS
from mbs_ros.cores.parameters.reference import PARAMETERS as REFERENCE_PARAMETERS
from mbs_ros.cores.params import NS_PER_S, model_parameter_values, period_ns
from mbs_ros.cores.reference import ReferenceError, controller_points, reference_setup, trajectories
from mbs_ros.cores.loop import SimulationLoop, on_grid

__all__ = ["run_scenario", "state_views", "HeadlessRun", "RobotRecord", "HeadlessError", "PAUSED_START", "warm_up"]

# what the runner adds to the node parameters of a paused start (mbs_ros.bringup.runner.runner_specs): the
# dynamics node stands still at t = 0 and the reference starts at 0
#: The most memory a run's records may take (they are kept in memory, preallocated per control period): a run
#: of a few arrays per period at 1 kHz fills 1 GiB in about an hour of simulated time; a campaign runs one per
#: worker. ``--duration 1e6`` asked for 9.7 GiB.
MAX_RECORD_BYTES = 1 << 30
MAX_DURATION = 1e9  # s: simulated stamps are int64 nanoseconds (9.2e9 s)
PAUSED_START = {"dynamics": {"start_paused": True}, "reference": {"start_time": 0.0}}


class HeadlessError(ValueError):
    """A scenario a headless run cannot run; the message says why."""


@dataclass(frozen=True)
class RobotRecord:
    """One robot's run, one row per control period at the state the controller answered (module docstring of
    :mod:`mbs_ros.headless`; Pinocchio's layout, body twists): ``q``/``v`` the true state, ``q_d``/``v_d`` the
    desired state the controller used, ``tau`` the law's command, ``tau_applied`` after the command limits (what the
    simulator takes), ``saturated`` whether a limit clipped it, ``energy_residual`` the dynamics node's energy
    balance residual, ``control_errors`` the commands replaced by zero because the law failed; with a contact world
    (the ``world`` parameter or joint limits) ``contact_work`` the contact's and limits' work since the start [J],
    ``contact_power`` their mean power over the last step [W] (both ≤ 0: a dissipative port), and with free objects
    ``objects_q`` their configurations ``(rows, objects, 7)``; with a world that has shapes ``contact_force`` the
    sum of the contact forces on the robot over the last physics step ``(rows, 3)`` [N, world axes; zero in the
    air] (:class:`mbs_ros.dynamics.contact.report.ContactReport`, as the node's ``contacts/<link>``), and
    ``contact_wrenches`` what the node publishes on ``contacts/<link>`` (per robot link with a collision shape and
    per free object, by name: ``(stamps [ns], wrenches (n, 6) [force; torque] in the link's frame)``) at the same
    instants, the ``contacts_rate`` grid of physics steps, computed by the same function
    (:meth:`ContactReport.wrenches`); a non-finite one is left out as the node skips it; with sensors
    ``sensors`` by sensor name its readings as the dynamics node publishes them (:func:`sensor_record`)."""

    namespace: str
    base_group: str
    joint_names: Tuple[str, ...]
    nq_base: int
    nv_base: int
    stamp_ns: np.ndarray
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    q_d: np.ndarray
    v_d: np.ndarray
    tau: np.ndarray
    tau_applied: np.ndarray
    saturated: np.ndarray
    estimate_q: Optional[np.ndarray] = None
    estimate_v: Optional[np.ndarray] = None
    energy_residual: Optional[np.ndarray] = None
    control_errors: int = 0
    contact_work: Optional[np.ndarray] = None
    contact_power: Optional[np.ndarray] = None
    objects_q: Optional[np.ndarray] = None
    contact_force: Optional[np.ndarray] = None
    contact_wrenches: Optional[Dict[str, Tuple[np.ndarray, np.ndarray]]] = None
    sensors: Optional[Dict[str, Dict[str, np.ndarray]]] = None


@dataclass(frozen=True)
class HeadlessRun:
    """A headless run: ``duration`` the simulated seconds actually run, ``wall_time`` the seconds it took,
    ``fault`` why it ended early (None when it ran to the end), ``robots`` by namespace (without slashes),
    ``loop_cpu_time`` the seconds of the calling thread's CPU time the periods took (set-up excluded; None when
    not measured)."""

    scenario: str
    duration: float
    physics_rate: float
    control_rate: float
    wall_time: float
    fault: Optional[str]
    robots: Dict[str, RobotRecord] = field(default_factory=dict)
    loop_cpu_time: Optional[float] = None

    @property
    def real_time_factor(self) -> float:
        return self.duration / self.wall_time if self.wall_time > 0 else float("inf")


def _values(spec: NodeSpec):
    """``value(param, default)`` as a node declares its parameters from ``spec``'s parameter file: the file's
    value, else the default (a tuple as a list)."""
    given = spec.parameters

    def value(param, default):
        v = given.get(param.name, default)
        return list(v) if isinstance(v, tuple) else v

    return value


def _dynamics_model(spec: NodeSpec, load):
    """The dynamics node's settings, model source and model from its parameters."""
    values, source = model_parameter_values(DYNAMICS_PARAMETERS, lambda n: DYNAMICS_PARAMETERS[n].default,
                                            _values(spec), load)
    s = ds.settings_from_values(values, source)
    return s, source, ds.build_model(s, source)


def state_views(scenario: Union[Scenario, str, os.PathLike]) -> Dict[str, Tuple[object, StateView]]:
    """Per robot namespace, the dynamics model and the :class:`~mbs_ros.cores.dynamics.StateView` with which
    the dynamics node publishes its state (odom, joint_states): what a record's ``q``, ``v`` are compared by."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    out, load = {}, _shared_loader()
    for namespace, specs in _robot_specs(_lockstep(scenario)).items():
        _s, source, model = _dynamics_model(specs["dynamics"], load)
        out[namespace.strip("/")] = (model, StateView(model, source if source.multibody else None))
    return out


class _Robot:
    """One robot's dynamics, controller and reference, stepped per lockstep period (see the module docstring)."""

    def __init__(self, specs: Dict[str, NodeSpec], load=ms.load_source):
        dyn = specs["dynamics"]
        self.namespace = dyn.robot
        self.load = load
        s, source, model = _dynamics_model(dyn, load)
        q0, v0 = ds.initial_state(model, s)
        limits = ds.command_limits(model, s)
        ds.check_rate(model, s, q0, limits)
        if model.group is None and not model.joint_names:
            raise HeadlessError(f"{self.namespace}: a fixed base without movable joints takes no command")
        self.settings = s
        dt_ns = period_ns(s.physics_rate)
        self.sim = make_simulator(model, s, q0, v0, dt_ns * 1e-9, limits, 0, source)  # sim time: 0 before the first /clock
        self.steps = self.sim.lockstep_steps
        self.view = StateView(model, source if source.multibody else None)
        self.joint_state_names = StateView.joint_state_names(model)
        self.nj = len(model.joint_names)

        ctl = specs.get("controller")
        if ctl is None:
            raise HeadlessError(f"{self.namespace}: no controller (controller: false): a lockstep run waits for one")
        values, csource = model_parameter_values(CONTROLLER_PARAMETERS,
                                                 lambda n: getattr(cs.DEFAULTS, cs.field_name(n)), _values(ctl),
                                                 load)
        self.ctl = controller_setup(values, csource)
        c = self.ctl.settings
        self.estimator = self.suite = None
        if c.state_source == "estimate":
            if specs.get("estimator") is None:
                raise HeadlessError(f"{self.namespace}: state_source estimate without an estimator")
            self._setup_estimator(specs["estimator"], s, source, model)
        if self.suite is None:  # the dynamics node's sensors, recorded as it publishes them (they do not act on the
            # state)
            self.suite = load_suite(s.sensors, source, model, self.sim.dt, current=s.current,
                                    seed_offset=s.sensor_seed)
            self.est_roles = {}
        self.readings: Dict[str, list] = {}  # sensor name -> its readings as published, in order
        # the dynamics node's loop
        self.loop = SimulationLoop(self.sim, self.suite, on_reading=self.reading)
        cm = self.ctl.model
        self.cmodel = cm
        self.floating = cm.group is not None
        self.nq_base, self.nv_base = ms.base_sizes(cm)
        self.joint_names = tuple(cm.joint_names)
        lower, upper = reference_position_bounds(cm)
        self.joint_input = ri.JointReferenceInput(self.joint_names, lower, upper)
        self.base_input = (ri.BaseReferenceInput(cm, {c.base_frame, c.base_frame.lstrip("/")}, c.base_frame)
                           if self.floating else None)
        self.timebase = tb.TimeBase(int(round(c.max_time_jump * NS_PER_S)))
        self.base_ref = self.joint_ref = None
        self.state = None  # the controller's (t, q, v)
        self.control_errors = 0
        self.expected = self.sim.expected
        body = {"", s.base_frame, s.base_frame.lstrip("/")}
        self.intake = CommandIntake(self.sim, lockstep=True, body_frames=body, world_frames=(),
                                    base_frame=s.base_frame, world_frame=s.world_frame)
        for channel, names in (("thrusters", cm.thruster_names), ("joints", self.joint_names)):
            unknown = self.intake.unknown(channel, names) if channel in self.expected else []
            if unknown:  # the dynamics node would reject every command, and a lockstep run would wait forever
                raise HeadlessError(f"{self.namespace}: {channel} {', '.join(unknown)}: the controller commands "
                                    "them, the dynamics model has none of that name")
        self.reference = specs.get("reference")

    def _setup_estimator(self, spec: NodeSpec, s, source, model) -> None:
        """The dynamics node's sensor suite and the estimator node's filter, started at t = 0 (simulation time)."""
        values, esource = model_parameter_values(ESTIMATOR_PARAMETERS, lambda n: getattr(es.DEFAULTS, n),
                                                 _values(spec), self.load)
        setup = es.build_setup(es.settings_from_values(values, esource), esource)
        self.suite = load_suite(s.sensors, source, model, self.sim.dt, current=s.current,
                                seed_offset=s.sensor_seed)
        if self.suite is None:
            raise HeadlessError(f"{self.namespace}: an estimator, but the dynamics node has no sensors")
        self.estimator = es.Fusion(setup, origin_ns=None)
        self.estimates = {}  # stamp -> the newest estimate (Output) with it
        self._keep(self.estimator.start(0))
        self.est_roles = roles_by_sensor(setup.roles)
        self.est_joint_names = tuple(setup.model.joint_names)
        self.est_env = setup.sensor_set.environment
        self.beam_limits = {sp.name: (float(sp.params.min_range), float(sp.params.max_range))
                            for sp in self.suite.sensor_set.sensors if sp.type == "dvl"}
        self.est_publishes_joints = bool(self.est_joint_names) and "encoders" in setup.roles

    def _keep(self, out) -> None:
        self.estimates[out.stamp_ns] = out

    def reading(self, reading) -> None:
        """A reading the dynamics node publishes, taken in by the estimator (a reading it rejects is dropped, as
        the node does); every reading is kept for the record (:func:`sensor_record`)."""
        self.readings.setdefault(reading.name, []).append(reading)
        role = self.est_roles.get(reading.name)
        if role is None:
            return
        try:
            items = reading_payloads(reading, role, self.est_joint_names, self.est_env,
                                     self.beam_limits.get(reading.name, (0.0, float("inf"))))
        except Rejected:
            return
        for t, payload in items:
            try:
                for out in feed(self.estimator, role, t, payload):
                    self._keep(out)
            except Rejected:
                pass

    def row_bytes(self, energy: bool = True) -> int:
        """The bytes :meth:`allocate` takes per recorded period."""
        nq, nv, cm = self.sim.model.nq, self.sim.model.nv, self.cmodel
        contact, objs = self.sim.world is not None, self.sim.objects
        shapes = contact and bool(self.sim.world.shapes)
        return (8 + 8 * (nq + nv) + 8 * (cm.nq + cm.nv) + 16 * nv + 1 + (8 if energy else 0) + (16 if contact else 0)
                + (8 * len(objs) * objs[0].nq if objs else 0) + (24 if shapes else 0)
                + (16 * (cm.nq + cm.nv) if self.estimator is not None else 0))

    def allocate(self, rows: int, energy: bool = True) -> None:
        """Room for ``rows`` recorded periods (``energy``: with the energy balance residual)."""
        nq, nv, cm = self.sim.model.nq, self.sim.model.nv, self.cmodel
        self.n = 0
        self.stamp_ns = np.zeros(rows, dtype=np.int64)
        self.q, self.v = np.full((rows, nq), np.nan), np.full((rows, nv), np.nan)
        self.q_d, self.v_d = np.full((rows, cm.nq), np.nan), np.full((rows, cm.nv), np.nan)
        self.tau, self.tau_applied = np.full((rows, nv), np.nan), np.full((rows, nv), np.nan)
        self.saturated = np.zeros(rows, dtype=bool)
        self.energy = np.full(rows, np.nan) if energy else None
        contact = self.sim.world is not None
        self.contact = (np.full(rows, np.nan), np.full(rows, np.nan)) if contact else None
        objs = self.sim.objects
        self.objects_q = np.full((rows, len(objs), objs[0].nq), np.nan) if objs else None
        shapes = contact and bool(self.sim.world.shapes)
        self.report = ContactReport(self.sim) if shapes else None
        self.contact_force = np.full((rows, 3), np.nan) if shapes else None
        # contacts/<link> at the dynamics node's contacts_rate grid: {name: [(stamp ns, wrench 6)]}
        self.contacts_every = ds.steps_between(self.settings.physics_rate, self.settings.contacts_rate) \
            if shapes else 0
        names = list(self.report.links) + [name for name, _ in self.report.objects] if shapes else []
        self.wrenches: Dict[str, list] = {name: [] for name in names}
        self.est_q = np.full((rows, cm.nq), np.nan) if self.estimator is not None else None
        self.est_v = np.full((rows, cm.nv), np.nan) if self.estimator is not None else None

    # ---------------------------------------------------------------------------------------- the state

    def published_joints(self) -> Tuple[List[str], np.ndarray, np.ndarray]:
        """joint_states as the dynamics node publishes it: names, positions, velocities."""
        position, velocity, _effort = self.view.joint_state(self.sim)
        return self.joint_state_names, position, velocity

    def estimate_parts(self, t: int):
        """The base and joint parts the controller takes from estimate/odom and estimate/joint_states stamped
        ``t`` (the estimator's output as its messages carry it)."""
        out = self.estimates.get(t)
        if out is None:
            raise RuntimeError(f"lockstep: no estimate stamped t = {t * 1e-9:.9f} s (the estimator waits for "
                               "readings that did not come)")
        for old in [x for x in self.estimates if x < t]:
            del self.estimates[old]
        return estimate_parts(out, self.joint_names if self.nj else (), self.est_joint_names, self.floating,
                              self.est_publishes_joints)

    def controller_state(self) -> Tuple[int, np.ndarray, np.ndarray]:
        """The state the controller takes from odom and joint_states (estimate/… with state_source estimate) at
        the simulator's current stamp."""
        sim = self.sim
        t = sim.stamp()
        base = joints = None
        if self.estimator is not None:
            base, joints = self.estimate_parts(t)
        elif self.floating:
            p, quat = self.view.base_pose(sim.model, sim.q)
            base = ri.base_state(np.array(p), np.array(quat), np.array(self.view.twist(sim.model, sim.q, sim.v)))
        if self.nj and self.estimator is None:
            names, position, velocity = self.published_joints()
            joints = ri.joint_state(self.joint_names, names, position, velocity)
        step = self.timebase.step(t)
        if step.kind != tb.ACCEPT:
            raise RuntimeError(f"the controller did not accept the state at t = {t * 1e-9:.9f} s ({step.kind})")
        q, v = ri.state_vector(self.cmodel, self.nv_base, base, joints)
        holds = commit_state(self.timebase, self.cmodel, t, step.jump, q, self.state is None)
        if holds is not None:  # hold the start-up state until a reference arrives
            self.base_ref, self.joint_ref = holds
        self.state = (t, q, v)
        return self.state

    # ------------------------------------------------------------------------------------- the command

    def command(self, t: int, q: np.ndarray, v: np.ndarray):
        """The controller's answer to its state: ``(q_d, v_d, tau, Command)``; a law that fails (raises, gives a
        non-finite command) is counted and answered with zero, as the node does."""
        ctl = self.ctl
        q_d, v_d, a_d = desired(self.cmodel, self.base_ref, self.joint_ref, t - self.timebase.offset)
        try:
            if idle(ctl.settings, t - self.timebase.offset):  # idle_until: thrusters off, joints limp
                tau = np.zeros(self.cmodel.nv)
            else:
                model, law = law_for(ctl, t - self.timebase.offset)
                tau = law_command(law, model, ctl.settings.compensate_passive, q, v, q_d, v_d, a_d)
                tau = with_gripper(ctl.settings, ctl.gripper, tau, q, v, t - self.timebase.offset)
        except Exception:  # noqa: BLE001 - the node publishes zero and keeps running
            self.control_errors += 1
            tau = np.zeros(self.cmodel.nv)
        try:
            cmd = ctl.output(tau, q)
        except Exception:  # noqa: BLE001 - the node's guard: counted, a zero command without a state
            self.control_errors += 1
            cmd = ctl.output(np.zeros(self.cmodel.nv), None)
        return q_d, v_d, tau, cmd

    def submit(self, t: int, cmd) -> None:
        """The dynamics node's lockstep inputs: the controller's command messages for the period stamped ``t``,
        through the node's own intake (:class:`~mbs_ros.cores.commands.CommandIntake`), submitted; a
        rejection (the ROS run would wait for a command forever) is a fault."""
        sec, nanosec = divmod(int(t), NS_PER_S)
        if "wrench" in self.expected:
            self._submit(self.intake.wrench(cmd.wrench, self.ctl.settings.base_frame, sec, nanosec))
        if "thrusters" in self.expected:
            if cmd.thrust is None:
                raise RuntimeError("lockstep: the dynamics node waits for thruster_command, the controller sends "
                                   "cmd_wrench (allocate_thrusters: false)")
            self._submit(self.intake.named("thruster_command", self.cmodel.thruster_names,
                                           [float(x) for x in cmd.thrust], sec, nanosec))
        if "joints" in self.expected:
            self._submit(self.intake.named("joint_command", self.joint_names, [float(x) for x in cmd.effort],
                                           sec, nanosec))

    def _submit(self, result) -> None:
        if not isinstance(result, Accepted):
            raise RuntimeError(f"{result.topic} rejected: {result.reason}")
        self.sim.submit(result.channel, result.value)

    def applied(self) -> np.ndarray:
        """The generalised force of the period's commands as the simulator holds them (after its limits), at the
        current configuration; the thrusters' as commanded (their lag aside)."""
        sim, model = self.sim, self.sim.model
        cmds = sim.period_commands
        tau = np.zeros(model.nv)
        if self.nj:
            tau[model.nv - self.nj:] = cmds["joints"]
        if "wrench" in cmds:
            tau = tau + model.wrench_to_generalized(sim.q, cmds["wrench"].W)[0]
        if "thrusters" in cmds:
            tau = tau + model.wrench_to_generalized(sim.q, model.passive.B_thrust @ cmds["thrusters"])[0]
        return tau

    # --------------------------------------------------------------------------------------- the period

    def answer(self) -> None:
        """The state at ``t_k``, the controller's command for it (recorded), submitted to the simulator."""
        t, q, v = self.controller_state()
        q_d, v_d, tau, cmd = self.command(t, q, v)
        self.submit(t, cmd)
        i, sim = self.n, self.sim
        self.stamp_ns[i] = t
        self.q[i], self.v[i] = sim.q, sim.v
        self.q_d[i], self.v_d[i] = q_d, v_d
        self.tau[i], self.tau_applied[i] = tau, self.applied()
        self.saturated[i] = cmd.saturated
        if self.est_q is not None:
            self.est_q[i], self.est_v[i] = q, v
        if self.energy is not None:
            self.energy[i] = balance_residual(sim)
        if self.contact is not None:
            self.contact[0][i], self.contact[1][i] = sim.contact_work, sim.contact_power
        if self.objects_q is not None:
            self.objects_q[i] = sim.obj_q
        if self.contact_force is not None:
            self.contact_force[i] = self.report.robot_force()
        self.n = i + 1

    def install_reference(self) -> None:
        """The reference node's trajectories against the state at 0 (start_time 0), installed as the controller
        installs them from its messages."""
        spec = self.reference
        if spec is None:
            return
        get = _values(spec)
        setup = reference_setup({name: get(p, p.default) for name, p in REFERENCE_PARAMETERS.items()},
                                REFERENCE_PARAMETERS)
        sim = self.sim
        p, quat = self.view.base_pose(sim.model, sim.q)
        names, position, _velocity = self.published_joints() if self.nj else ([], np.zeros(0), None)
        joints = dict(zip(names, position.tolist()))
        traj = trajectories(setup.wps, setup.stamp_mode, setup.start_time_ns, sim.stamp(),
                            (np.array(p), np.array(quat)), joints, names)
        for topic, stamp, sec, nanosec, joint_names, values in controller_points(traj, self.floating, bool(self.nj)):
            current = self.base_ref if topic == "base_reference" else self.joint_ref
            _s, start, ref = reference_from_points(topic, stamp, sec, nanosec, joint_names, values, self.state,
                                                   self.timebase.offset, current, self.joint_input, self.base_input)
            if topic == "base_reference":
                self.base_ref = (start, ref)
            else:
                self.joint_ref = (start, ref)

    def step(self) -> Optional[str]:
        """The period's physics steps (the dynamics node's loop, stopping where a sensor samples or a reading
        falls due); the fault that stopped them (None: all taken)."""
        sim = self.sim
        if not sim.period_complete():
            return f"lockstep: no command for {' and '.join(sim.missing())}"
        if not self.contacts_every:
            for _k in self.loop.period():
                pass
        else:  # stopping where the node publishes contacts/<link> (while someone subscribes, as a recorder does)
            every = self.contacts_every
            for k in self.loop.period(lambda: (every,)):
                if on_grid(k, every):
                    self.record_wrenches()
        if sim.fault is not None:
            return sim.fault.reason
        return None

    def record_wrenches(self) -> None:
        """contacts/<link> as the node publishes it now (its ``ContactPublishing.pieces``)."""
        stamp = self.sim.stamp()
        wrenches = self.report.wrenches(self.report.forces())
        for name, rows in self.wrenches.items():
            w = np.asarray(wrenches.get(name, np.zeros(6)), dtype=float)
            if np.all(np.isfinite(w)):
                rows.append((stamp, w.copy()))

    def record(self) -> RobotRecord:
        n, model = self.n, self.sim.model
        return RobotRecord(
            namespace=self.namespace, base_group=self.settings.base_group, joint_names=tuple(model.joint_names),
            nq_base=self.nq_base, nv_base=self.nv_base, stamp_ns=self.stamp_ns[:n].copy(),
            t=self.stamp_ns[:n] * 1e-9, q=self.q[:n].copy(), v=self.v[:n].copy(), q_d=self.q_d[:n].copy(),
            v_d=self.v_d[:n].copy(), tau=self.tau[:n].copy(), tau_applied=self.tau_applied[:n].copy(),
            saturated=self.saturated[:n].copy(),
            energy_residual=None if self.energy is None else self.energy[:n].copy(),
            estimate_q=None if self.est_q is None else self.est_q[:n].copy(),
            estimate_v=None if self.est_v is None else self.est_v[:n].copy(),
            control_errors=self.control_errors,
            contact_work=None if self.contact is None else self.contact[0][:n].copy(),
            contact_power=None if self.contact is None else self.contact[1][:n].copy(),
            objects_q=None if self.objects_q is None else self.objects_q[:n].copy(),
            contact_force=None if self.contact_force is None else self.contact_force[:n].copy(),
            contact_wrenches=None if not self.wrenches else {
                name: (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows]).reshape(-1, 6))
                for name, rows in self.wrenches.items()},
            sensors={name: sensor_record(rs) for name, rs in self.readings.items()} if self.suite is not None else None)


def sensor_record(readings) -> Dict[str, np.ndarray]:
    """One sensor's readings as arrays, one row per reading as the dynamics node publishes them: ``k`` (the
    measured step), ``stamp_ns`` (the header's), ``valid``, and each value of the type's (docs/sensors.md) stacked
    (NaN where a reading is invalid and has none); names (an encoder's joint names) are left out."""
    out = {"k": np.array([r.k for r in readings], dtype=np.int64),
           "stamp_ns": np.array([r.stamp_ns for r in readings], dtype=np.int64),
           "valid": np.array([bool(r.valid) for r in readings], dtype=bool)}
    keys = dict.fromkeys(k for r in readings for k in r.values)
    for key in keys:
        rows = [r.values.get(key) for r in readings]
        if any(isinstance(x, (str, tuple, list)) for x in rows if x is not None):
            continue
        shape = next((np.shape(x) for x in rows if x is not None), None)
        if shape is None:  # a value the type leaves out (an IMU without orientation)
            continue
        try:
            out[key] = np.array([np.full(shape, np.nan) if x is None else np.asarray(x, dtype=float)
                                 for x in rows], dtype=float)
        except (TypeError, ValueError):
            continue
    return out


def _shared_loader():
    """:func:`mbs_ros.dynamics.model.source.load_source` that loads each (robot_description, model_file) once: the
    nodes of a robot load the same file (a xacro takes ~0.2 s); a source is immutable data."""
    loaded: Dict[Tuple[str, str], ms.Source] = {}

    def load(robot_description: str, model_file: str) -> ms.Source:
        key = (robot_description, model_file)
        if key not in loaded:
            loaded[key] = ms.load_source(robot_description, model_file)
        return loaded[key]

    return load


def _lockstep(scenario: Scenario) -> Scenario:
    """The scenario as the lockstep run on simulation time runs it (as fast as it computes)."""
    return replace(scenario, lockstep=True, sim_time=True, real_time_factor=0.0)


def _robot_specs(scenario: Scenario) -> Dict[str, Dict[str, NodeSpec]]:
    """Per robot namespace, its node specs by role with the runner's paused-start parameters."""
    out: Dict[str, Dict[str, NodeSpec]] = {}
    for spec in node_specs(scenario):
        extra = PAUSED_START.get(spec.role, {})
        out.setdefault(spec.robot, {})[spec.role] = replace(spec, parameters={**spec.parameters, **extra})
    return out


def run_scenario(scenario: Union[Scenario, str, os.PathLike], *, duration: Optional[float] = None,
                 overrides: Optional[Mapping[str, object]] = None, energy: bool = True,
                 fast: bool = True) -> HeadlessRun:
    """Run ``scenario`` (a loaded :class:`~mbs_ros.scenario.schema.Scenario`, or a name or path loaded with
    ``overrides``) headless for ``duration`` simulated seconds (default: the scenario's). Never raises for a
    blow-up: a fault (non-finite state, runaway, an exception in the loop) ends the run early with
    :attr:`HeadlessRun.fault`. HeadlessError for a scenario it cannot run. ``energy`` False: no energy report per
    period (``RobotRecord.energy_residual`` None). ``fast`` False: never the compiled fast path
    (:mod:`mbs_ros.headless.fast`; the same numbers, period by period in Python)."""
    if not isinstance(scenario, Scenario):
        try:
            scenario = load_scenario(scenario, overrides=overrides)
        except ScenarioError as e:
            raise HeadlessError(str(e)) from None
    elif overrides:
        raise HeadlessError("overrides apply to a scenario loaded by name or path, not to a loaded Scenario")
    scn = _lockstep(scenario)
    duration = scn.duration if duration is None else float(duration)
    if duration is None or not duration > 0.0:
        raise HeadlessError(f"{scenario.name}: no duration (give duration=, or set one in the scenario)")
    if not math.isfinite(duration) or duration > MAX_DURATION:
        raise HeadlessError(f"{scenario.name}: the duration must be a finite number of seconds <= "
                            f"{MAX_DURATION:g} (stamps are int64 nanoseconds), got {duration:g}")
    started = time.perf_counter()
    robots: List[_Robot] = []
    try:
        specs = _robot_specs(scn)
        load = _shared_loader()
        robots = [_Robot(by_role, load) for by_role in specs.values()]
    except (ParameterError, ReferenceError, ValueError) as e:
        if isinstance(e, HeadlessError):
            raise
        raise HeadlessError(f"{scenario.name}: {e}") from None
    period = robots[0].steps * robots[0].sim.dt_ns
    periods = int(round(duration * NS_PER_S)) // period
    for r in robots:
        if r.steps * r.sim.dt_ns != period:
            raise HeadlessError(f"{r.namespace}: a control period of {r.steps * r.sim.dt_ns} ns, the first robot's "
                                f"is {period} ns")
    size = (periods + 1) * sum(r.row_bytes(energy) for r in robots)
    if size > MAX_RECORD_BYTES:
        longest = MAX_RECORD_BYTES // sum(r.row_bytes(energy) for r in robots) * period / NS_PER_S
        raise HeadlessError(f"{scenario.name}: {duration:g} s of {periods} control periods would record "
                            f"{size / 2 ** 30:.1f} GiB (the records are kept in memory, at most "
                            f"{MAX_RECORD_BYTES / 2 ** 30:g} GiB): at most {longest:.0f} s at this control rate")
    for r in robots:
        r.allocate(periods + 1, energy)
    fault = None
    k = 0
    loop_started = time.thread_time()
    try:
        for r in robots:  # paused at t = 0: the controller answers the state it holds, then the reference arrives
            r.answer()
            r.install_reference()
        # ---- the fast path (mbs_ros.headless.fast): the periods it can take compiled, the rest below
        done = 0
        if fast and periods and all(fast_path.eligible(r) is None for r in robots):
            done = fast_path.run(robots)
        # ---- end of the fast path
        for k in range(done, periods):
            for r in robots:
                why = r.step()
                if why is not None:
                    fault = f"t = {r.sim.stamp() * 1e-9:.3f} s: {why} ({r.namespace})"
                    break
            if fault is not None:
                break
            for r in robots:
                r.answer()
    except Rejected as e:
        fault = f"t = {robots[0].sim.stamp() * 1e-9:.3f} s: the controller rejected the state: {e}"
    except Exception as e:  # noqa: BLE001 - a blow-up ends the run, never the caller
        fault = f"t = {robots[0].sim.stamp() * 1e-9:.3f} s: {type(e).__name__}: {e}"
    loop_cpu = time.thread_time() - loop_started
    wall = time.perf_counter() - started
    ran = max(r.sim.stamp() for r in robots) * 1e-9
    s0 = robots[0].settings
    return HeadlessRun(scenario=scenario.name, duration=ran, physics_rate=s0.physics_rate,
                       control_rate=s0.control_rate, wall_time=wall, fault=fault,
                       robots={r.namespace: r.record() for r in robots}, loop_cpu_time=loop_cpu)


def warm_up() -> float:
    """Compile the fast path's period kernel (:mod:`mbs_ros.headless.fast`) into numba's on-disk cache (``make
    setup`` calls this): a short run of a floating-base and of a fixed-base scenario, the two signatures the
    kernel is called with, of a contact scene with a free object and of a scene with sensors; returns seconds."""
    started = time.perf_counter()
    # and the contact scenes' kernels (a free object's SO(3)xR3 step, the contact solver's) and the sensors' (the
    # suite's tree motion), so that a fresh clone's nodes and tests load them rather than compile them
    for name in ("vehicle_manipulator", "manipulator", "uvms_grasp", "vehicle_manipulator_sensors"):
        out = run_scenario(name, duration=0.02)
        if out.fault is not None:
            raise RuntimeError(f"warm-up run of {name}: {out.fault}")
    return time.perf_counter() - started
