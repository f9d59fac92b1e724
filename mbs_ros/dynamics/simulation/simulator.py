"""The simulation loop without ROS: state, held commands, lockstep periods, saturation, faults and the energy
bookkeeping.

:class:`Simulator` is what the dynamics node (:mod:`mbs_ros.nodes.dynamics_node`) runs; the node only turns
messages into calls of this class and its state into messages, so tests and benchmarks measure what the node
computes. A step applies ``τ = [Bᵀ W; efforts]`` (:meth:`Model.wrench_to_generalized`) through the Munthe-Kaas
integrators (seed 001 eqs. 35–37); ``work`` integrates the commands' power so that ``E − E_ref − work`` checks
the simulation. Commands, timeouts, lockstep, saturation, the fault bounds and the physics-rate check:
``docs/dynamics.md``. Its plain values live in :mod:`~mbs_ros.dynamics.simulation.types`, the outputs of a state in
:mod:`~mbs_ros.dynamics.simulation.outputs`, the physics-rate check in :mod:`~mbs_ros.dynamics.simulation.rate`;
all are importable from here.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Dict, Optional

import numpy as np

from mbs_ros.dynamics.simulation.actuators import DEFAULT_LIMIT_ACCELERATION, CommandLimits, clip_efforts, command_limits, saturate_wrench
from mbs_ros.dynamics.simulation.integrators import TABLEAUS, _tableau, _with_world_wrench, check_time_step, step
from mbs_ros.dynamics.model.model import Model
from mbs_ros.dynamics.model.passive import thrust_response
from mbs_ros.dynamics.simulation.lockstep import LockstepPeriods, expected_channels
from mbs_ros.dynamics.simulation.outputs import StateOutputs
from mbs_ros.dynamics.simulation.rate import RATE_REFUSE_GROWTH, RATE_SAMPLES, RATE_WARN, RATE_WARN_GROWTH, RateCheck, rate_check
from mbs_ros.dynamics.simulation.types import (_NEVER, CHANNELS, ENERGY_CHECK_S, ENERGY_FLOOR_PER_KG, ENERGY_RESIDUAL_FACTOR,
                              MAX_DT, MAX_POSITION, MAX_SPEED, MAX_TURN_PER_STEP, MIN_DT, ZERO_WRENCH, Fault,
                              WrenchCommand, _angular_components, _equal, _Held, _is_zero, _world_wrench_power,
                              velocity_bounds)

__all__ = ["Simulator", "WrenchCommand", "ZERO_WRENCH", "CHANNELS", "Fault", "CommandLimits", "command_limits",
           "rate_check", "RateCheck", "velocity_bounds", "MAX_TURN_PER_STEP", "MAX_SPEED", "MAX_POSITION",
           "ENERGY_RESIDUAL_FACTOR", "ENERGY_FLOOR_PER_KG", "ENERGY_CHECK_S", "MIN_DT", "MAX_DT", "RATE_SAMPLES",
           "RATE_WARN", "RATE_WARN_GROWTH", "RATE_REFUSE_GROWTH", "DEFAULT_LIMIT_ACCELERATION", "StateOutputs",
           "LockstepPeriods"]


class Simulator(LockstepPeriods, StateOutputs):
    """A model stepped at a fixed rate under held commands. See the module docstring.

    ``model``: a :class:`~mbs_ros.dynamics.Model`; ``q0``, ``v0``: the initial state (also the state
    :meth:`reset` returns to); ``dt``: the step [s] (rounded to whole ns); ``integrator``: euler | heun | rk3 |
    rk4; ``cmd_timeout`` [s of simulation time]: how long a command is held (0: forever; unused in lockstep);
    ``lockstep_steps``: steps per control period in lockstep, 0 = no lockstep; ``t0_ns``: the time of step 0;
    ``base_actuated`` False: a lockstep period waits for no wrench (:func:`~.lockstep.expected_channels`).

    Hooks (attributes, None by default), called during :meth:`advance`:

    - ``on_wrench_applied(k, cmd)``: the applied :class:`WrenchCommand` changed; ``k`` is the first step it
      applies to (its start time is ``stamp(k)``);
    - ``on_efforts_applied(k, efforts)``: likewise for the joint efforts (an (nj,) array);
    - ``on_timeout(channel)``: a held command of ``"wrench"`` or ``"joints"`` timed out (zero from now on);
    - ``on_fault(fault)``: step ``fault.k`` failed (a :class:`Fault`); the simulation is paused at the last good
      state and the commands are cleared.

    ``max_wrench`` ``(force, torque)`` and ``max_effort`` (a number or one per joint): the saturation limits
    (None: the model's defaults, :func:`command_limits`; ``inf`` turns one off). ``energy_check_steps``: steps
    between two energy-balance checks (None: ``ENERGY_CHECK_S`` of simulation time; 0: never).

    State (read it, do not assign to it): ``q``, ``v`` (the state at ``t_k``), ``k`` (steps taken; never goes
    back, a reset counts as one), ``paused`` (asked for, or halted by a fault), ``fault`` (None or the
    :class:`Fault` that halted it), ``faults`` (how many since construction), ``saturated`` (saturated commands
    per channel since construction), ``limits`` (:class:`CommandLimits`).
    """

    def __init__(self, model: Model, q0, v0, dt: float, *, integrator: str = "rk4", cmd_timeout: float = 0.0,
                 lockstep_steps: int = 0, t0_ns: int = 0, max_wrench=None, max_effort=None,
                 energy_check_steps: Optional[int] = None, world=None, joint_limits: bool = True, objects=(),
                 base_actuated: bool = True):
        dt = check_time_step(dt)
        if not MIN_DT <= dt <= MAX_DT:  # the clock counts whole nanoseconds
            raise ValueError(f"dt must be between {MIN_DT:g} s (the clock's nanosecond) and {MAX_DT:g} s, got {dt!r}")
        self.dt_ns = int(round(dt * 1e9))
        self.dt = self.dt_ns * 1e-9
        self.t0_ns = int(t0_ns)
        self.model = model
        self.nj = len(model.joint_names)
        self.q_init = np.array(q0, dtype=float)
        self.v_init = np.array(v0, dtype=float)
        self.q, self.v = self.q_init.copy(), self.v_init.copy()
        self.k = self.k_reset = 0
        self._paused = False
        self.fault: Optional[Fault] = None
        self.faults = 0
        self.saturated = {"wrench": 0, "joints": 0, "thrusters": 0}
        self.nt = len(model.thruster_names)
        if self.nt and not model.velocity_map_is_constant:
            raise ValueError("thrusters need a base group whose velocity map is constant (se3, schoenflies, se2, so3), "
                             f"not {model.base}")
        self.thrust = np.zeros(self.nt)  # the thrusters' thrust at t_k [N] (first-order lag behind the command)
        self._thrust_mean = np.zeros(self.nt)  # the mean thrust over the last step (what it applied)
        self._thrust_settled = True  # thrust == command and the step's mean is it: nothing to integrate
        self._thrust_factors = None
        self.limits = command_limits(model, max_wrench, max_effort)
        self._angular = _angular_components(model)
        self._v_caps = velocity_bounds(model, self.dt)
        self.energy_check_steps = (max(1, int(round(ENERGY_CHECK_S / self.dt))) if energy_check_steps is None
                                   else int(energy_check_steps))
        self.integrator = integrator
        self.lockstep_steps = int(lockstep_steps)
        self.expected = expected_channels(model.group is not None, self.nt, self.nj, base_actuated)
        self.period_commands: Dict[str, object] = {}  # lockstep: channel -> command for the current period
        self.last_stamp_seen: Dict[str, int] = {}  # lockstep: channel -> stamp [ns] of the last command offered
        self._wrench = _Held(ZERO_WRENCH)
        self._efforts = _Held(np.zeros(self.nj))
        self._efforts.zero.setflags(write=False)
        self._thrusts = _Held(np.zeros(self.nt))
        self._thrusts.zero.setflags(write=False)
        self.on_wrench_applied: Optional[Callable] = None
        self.on_efforts_applied: Optional[Callable] = None
        self.on_timeout: Optional[Callable] = None
        self.on_fault: Optional[Callable] = None
        self._timeout_steps = 0
        self.set_cmd_timeout(cmd_timeout)
        self._force_stale = True  # the generalised force must be rebuilt from the applied commands
        self._announce = True  # the hooks may have a change to report
        self._next_expiry, self._e_end = _NEVER, (None, None, None, 0.0)  # _e_end: advance()'s energy cache
        self._pushes = []  # disturbances: (first step, end step, world wrench [F; τ]) after the (re)start
        #: contact: a :class:`~mbs_ros.dynamics.contact.world.ContactWorld` whose first model is this one (shapes on
        #: it and in the world, joint limits) and whose further models are free objects (their initial states
        #: ``objects``: ``(q0, v0)`` each), or None; ``docs/contact.md``
        if world is not None and (not world.models or world.models[0] is not model):
            raise ValueError("the contact world's first model must be the simulated one")
        n_objects = len(world.models) - 1 if world is not None else 0
        if len(objects) != n_objects:
            raise ValueError(f"objects: {len(objects)} initial states for the world's {n_objects} free objects")
        if world is None and joint_limits and self.nj and any(np.isfinite(lim).any() for lim in model.position_limits):
            from mbs_ros.dynamics.contact.world import ContactWorld  # the URDF's <limit lower upper> stop the joints by default

            world = ContactWorld([model], [], limits=True)
        self.world = world
        #: the free objects' models (the world's further ones), their initial and current states
        self.objects = list(world.models[1:]) if world is not None else []
        self.obj_q_init = [np.array(q, dtype=float) for q, _ in objects]
        self.obj_v_init = [np.array(v, dtype=float) for _, v in objects]
        for i, (m, q, v) in enumerate(zip(self.objects, self.obj_q_init, self.obj_v_init)):
            if q.shape != (m.nq,) or v.shape != (m.nv,) or not (np.isfinite(q).all() and np.isfinite(v).all()):
                raise ValueError(f"object {i}: initial state must be finite, q of {m.nq} and v of {m.nv} entries")
        self.obj_q, self.obj_v = [q.copy() for q in self.obj_q_init], [v.copy() for v in self.obj_v_init]
        # (k0, [qs], [vs], [free until], {k: StepInfo}): the objects' motion from step k0 without the robot, and the
        # objects' own contact steps in it (step k to k + 1), whose work counts when the step is taken
        self._obj_traj = None
        self._free_until = -1  # the states up to this step index are known to stay out of every contact margin
        self._probe = 1 << 20  # how many steps ahead the next look goes (1 after a contact step, then doubling)
        self.contact_steps = 0  # steps taken by the contact step
        self.contact_unconverged = 0  # of them, solves that ended above their tolerance (the step still finished)
        self.last_contact = None  # the last contact step's StepInfo
        # the step (k to k + 1) it was taken at, and its first model's index in the world (1: the objects' own)
        self.last_contact_k, self.last_contact_first = -1, 0
        self.rebaseline()

    # ------------------------------------------------------------------------------------- settings

    @property
    def integrator(self) -> str:
        """euler | heun | rk3 | rk4 (Munthe-Kaas), used from the next step."""
        return self._integrator

    @integrator.setter
    def integrator(self, method: str) -> None:
        if method not in TABLEAUS:
            raise ValueError(f"unknown integrator {method!r}; choose one of {', '.join(TABLEAUS)}")
        self._integrator = method

    @property
    def lockstep(self) -> bool:
        return self.lockstep_steps > 0

    @property
    def paused(self) -> bool:
        """No step is taken: :meth:`pause` was asked for, or a fault halted the simulation."""
        return self._paused or self.fault is not None


    @property
    def max_angular_rate(self) -> float:
        """The angular-rate bound of a runaway [rad/s]: ``min(MAX_TURN_PER_STEP / dt, MAX_SPEED)``."""
        return min(MAX_SPEED, MAX_TURN_PER_STEP / self.dt)

    def set_limits(self, max_wrench=None, max_effort=None) -> None:
        """New saturation limits (as the constructor's), for commands given from now on."""
        self.limits = command_limits(self.model, max_wrench, max_effort)

    @property
    def cmd_timeout_steps(self) -> int:
        """Steps a command is held for (0: forever; always 0 in lockstep)."""
        return self._timeout_steps

    def set_cmd_timeout(self, seconds: float) -> None:
        """Hold commands for ``seconds`` of simulation time (``ceil(seconds / dt)`` steps; 0: forever). A command
        already held expires that long after the step it first applied to."""
        seconds = float(seconds)
        if not (seconds >= 0.0 and math.isfinite(seconds)):
            raise ValueError(f"cmd_timeout must be a finite number >= 0, got {seconds}")
        self._timeout_steps = (int(math.ceil(seconds * 1e9 / self.dt_ns))
                               if seconds > 0.0 and not self.lockstep else 0)
        for held in (self._wrench, self._efforts, self._thrusts):
            held.expires_k = self._expiry(held.start_k, held.applied)
        self._next_expiry = min(self._wrench.expires_k, self._efforts.expires_k, self._thrusts.expires_k)

    def set_model(self, model: Model) -> None:
        """Simulate ``model`` (same configuration space, e.g. new inertial parameters) from the current state on;
        the energy and momentum references are taken again."""
        if (model.nq, model.nv, model.joint_names, model.thruster_names) != (
                self.model.nq, self.model.nv, self.model.joint_names, self.model.thruster_names):
            raise ValueError("set_model needs a model with the same configuration space and thrusters")
        self.model = model
        if self.world is not None:  # the contact step integrates the same model
            self.world.models[0] = model
        self._force_stale = True
        self.rebaseline()

    def set_current(self, velocity, rate=(0.0, 0.0, 0.0)) -> None:
        """The water's uniform current from the next step on: ``velocity`` [m/s] and its ``rate`` [m/s²], world axes
        (:meth:`Model.with_current`); the energy references stay (the current's power is a port of the balance)."""
        self.model = self.model.with_current(velocity, rate)
        if self.world is not None:  # the contact step integrates the same model
            self.world.models[0] = self.model
        self._passive_end = None

    # ----------------------------------------------------------------------------------------- time

    def stamp(self, k: Optional[int] = None) -> int:
        """``t_k`` [ns] (default: the current step's, i.e. the time of the state ``q``, ``v``)."""
        return self.t0_ns + (self.k if k is None else k) * self.dt_ns

    @property
    def time(self) -> float:
        """Simulation time of the current state [s], ``stamp() * 1e-9``."""
        return self.stamp() * 1e-9

    # ------------------------------------------------------------------------------------- commands

    def wrench_command(self, W, frame: str = "body"):
        """``(WrenchCommand, W_dropped)``: the wrench ``W = [F; τ]`` (in ``frame`` axes: ``"body"`` or ``"world"``)
        as it will be applied, and the components the base cannot take, in body axes at the current pose
        (zero when nothing is dropped). ValueError for a fixed base, non-finite components or another frame."""
        W = np.array(W, dtype=float).reshape(6)
        if self.model.group is None:
            raise ValueError("a fixed base takes no wrench")
        if not np.isfinite(W).all():
            raise ValueError(f"non-finite (NaN/inf) wrench components {W.tolist()}")
        if frame not in ("body", "world"):
            raise ValueError(f"frame must be 'body' or 'world', got {frame!r}")
        W = self._saturate_wrench(W)  # the norms do not depend on the axes: before any rotation can overflow
        R = self.model.base_rotation(self.q) if frame == "world" else None
        W_body = W if R is None else np.concatenate([R.T @ W[:3], R.T @ W[3:]])
        _tau, _applied, dropped = self.model.wrench_to_generalized(self.q, W_body)
        if dropped.any() and np.abs(dropped).max() > 1e-12 * max(1.0, float(np.abs(W_body).max())):
            W_body = W_body - dropped
            W = W_body if R is None else np.concatenate([R @ W_body[:3], R @ W_body[3:]])
        else:
            dropped = np.zeros(6)
        W.setflags(write=False)
        return WrenchCommand(W, frame), dropped

    def _saturate_wrench(self, W: np.ndarray) -> np.ndarray:
        """``W`` with its force and torque scaled down to ``max_force``/``max_torque`` (counted when it was)."""
        W, saturated = saturate_wrench(W, self.limits)
        self.saturated["wrench"] += saturated
        return W

    def joint_efforts(self, efforts) -> np.ndarray:
        """``efforts`` as a read-only (nj,) array, clipped to ``±max_effort`` (counted when it was); ValueError
        for a wrong length or non-finite entries."""
        e = np.array(efforts, dtype=float).reshape(-1)
        if e.shape != (self.nj,):
            raise ValueError(f"{e.size} joint efforts, expected {self.nj} ({', '.join(self.model.joint_names)})")
        if not np.isfinite(e).all():
            raise ValueError(f"non-finite (NaN/inf) joint efforts {e.tolist()}")
        e, saturated = clip_efforts(e, self.limits.max_effort)
        self.saturated["joints"] += saturated
        e.setflags(write=False)
        return e

    def set_wrench(self, W, frame: str = "body") -> np.ndarray:
        """Hold the base wrench ``W`` (``frame`` axes) from the next step on; returns the dropped components (see
        :meth:`wrench_command`). A :class:`WrenchCommand` is taken as it is, saturated if it exceeds the limits."""
        if isinstance(W, WrenchCommand):
            cmd, dropped = W, np.zeros(6)
            if not np.isfinite(cmd.W).all():
                raise ValueError(f"non-finite (NaN/inf) wrench components {cmd.W.tolist()}")
            W_sat = self._saturate_wrench(cmd.W)
            if W_sat is not cmd.W:
                W_sat.setflags(write=False)
                cmd = WrenchCommand(W_sat, cmd.frame)
        else:
            cmd, dropped = self.wrench_command(W, frame)
        self._wrench.pending = cmd
        return dropped

    def set_joint_efforts(self, efforts) -> None:
        """Hold the joint efforts (``model.joint_names`` order) from the next step on."""
        self._efforts.pending = self.joint_efforts(efforts)

    def thrust_commands(self, thrusts) -> np.ndarray:
        """``thrusts`` [N] as a read-only (nt,) array clipped to each thruster's limits (counted when it was);
        ValueError for a wrong length or non-finite entries."""
        u = np.array(thrusts, dtype=float).reshape(-1)
        if u.shape != (self.nt,):
            raise ValueError(f"{u.size} thrusts, expected {self.nt} ({', '.join(self.model.thruster_names)})")
        if not np.isfinite(u).all():
            raise ValueError(f"non-finite (NaN/inf) thrusts {u.tolist()}")
        lo, hi = self.model.thrust_limits
        if np.any(u < lo) or np.any(u > hi):
            u = np.clip(u, lo, hi)
            self.saturated["thrusters"] += 1
        u.setflags(write=False)
        return u

    def set_thrusts(self, thrusts) -> None:
        """Command the thrusters (``model.thruster_names`` order, N) from the next step on; each follows its command
        with its first-order lag (:func:`~mbs_ros.dynamics.model.passive.thrust_response`, exact over each step)."""
        self._thrusts.pending = self.thrust_commands(thrusts)

    @property
    def applied_thrust_commands(self) -> np.ndarray:
        """The thrust commands held on the last step (the thrusters lag behind them: :attr:`thrust`)."""
        return self._thrusts.applied

    @property
    def applied_wrench(self) -> WrenchCommand:
        """The wrench applied on the last step taken (zero after a reset)."""
        return self._wrench.applied

    @property
    def applied_efforts(self) -> np.ndarray:
        """The joint efforts applied on the last step taken (zero after a reset)."""
        return self._efforts.applied

    def clear_commands(self) -> None:
        """Zero wrench and efforts from the next step; pending and lockstep commands dropped."""
        self._wrench.clear()
        self._efforts.clear()
        self._thrusts.clear()
        self._thrust_settled = not self.nt
        self._next_expiry = self._push_edge(self.k - 1)
        self.period_commands = {}
        self._force_stale = self._announce = True

    # ------------------------------------------------------------------------------------- stepping

    def advance(self, n_steps: int, deadline_ns: Optional[int] = None) -> int:
        """Take ``n_steps`` steps (none while paused); returns the number taken. Per step: the pending commands
        start, held ones may time out, one :func:`~mbs_ros.dynamics.simulation.integrators.step`, the finiteness check, the
        work of the step, the hooks when an applied command changed. ``deadline_ns`` (``time.monotonic_ns()``):
        stop after a contact step that ends past it (contact steps are the slow ones; a caller's chunk of wall
        clock), the rest for the next call."""
        if self.paused or n_steps <= 0:
            return 0
        model, dt, method = self.model, self.dt, self._integrator
        w, e = self._wrench, self._efforts
        caps, every = self._v_caps, self.energy_check_steps
        passive, nt = model.passive_active, self.nt
        n_steps = int(n_steps)
        batch = None  # (qs, vs, within bounds) of the steps from here under the held command, or None
        for taken in range(n_steps):
            k = self.k
            q0, v0 = self.q, self.v
            fault = None
            try:
                if (w.pending is not None or e.pending is not None or self._thrusts.pending is not None
                        or k >= self._next_expiry):
                    self._take_commands(k)
                    batch = None
                thrust_end = None
                if nt and not self._thrust_settled:
                    u = self._thrusts.applied
                    if self._thrust_factors is None:  # (decay, mean factor) of each lag over one step
                        self._thrust_factors = thrust_response(np.ones(nt), np.zeros(nt),
                                                               model.passive.time_constants, dt)
                    decay, mean_factor = self._thrust_factors
                    gap = self.thrust - u
                    thrust_end, thrust_mean = u + gap * decay, u + gap * mean_factor
                    if np.all(np.abs(thrust_end - u) <= 1e-9 * (1.0 + np.abs(u))):  # within a nanonewton per N
                        thrust_end = u.copy()
                    self._thrust_mean = thrust_mean
                    self._force_stale = True
                if self._force_stale:
                    self._build_force()
                    batch = None
                if batch is None and n_steps - taken > 1 and (not nt or self._thrust_settled) and (
                        self.world is None or self._free_until >= 0):  # none after a contact step: resting, dropped
                    batch = self._batch(model, q0, v0, k, min(n_steps - taken, self._next_expiry - k))
                contact = None
                if self.world is not None and k >= self._free_until:
                    batch, contact = self._look_ahead(model, q0, v0, k, batch)
                if contact is not None:
                    if self.world.checkpoint is not None:  # a node may go on with the rest in a later callback
                        self.world.checkpoint()
                    q1, v1, info = contact[:3]
                    within = (np.abs(v1) <= caps).all() and (np.abs(q1) <= MAX_POSITION).all()
                elif batch is not None and batch[3] < batch[2].shape[0]:
                    i = batch[3]
                    q1, v1, within = batch[0][i + 1], batch[1][i + 1], batch[2][i]
                    batch[3] = i + 1
                else:
                    q1, v1 = step(model, q0, v0, self._tau, dt, method=method, t=k * dt,
                                  wrench_world=self._wrench_world)
                    # NaN fails every comparison: one test for finite and bounded
                    within = (np.abs(v1) <= caps).all() and (np.abs(q1) <= MAX_POSITION).all()
                if not within:
                    fault = self._runaway(q1, v1)
                else:
                    if self._announce:
                        self._report(k)
                    p1 = self._power(q1, v1)
                    p0 = self._p_end if self._p_end_valid else self._power(q0, v0)
                    work = self.work + 0.5 * dt * (p0 + p1)
                    if passive:  # the passive loads' work (no springs: stored) and what the dissipators took
                        pp1, pd1 = self._passive_power(q1, v1)
                        pp0, pd0 = self._passive_end if self._passive_end is not None else self._passive_power(q0, v0)
                        passive_work = self.passive_work + 0.5 * dt * (pp0 + pp1)
                        dissipated = self.dissipated + 0.5 * dt * (pd0 + pd1)
                    if not math.isfinite(work):
                        fault = ("nonfinite", f"the work of the commands became {work}")
            except Exception as exc:  # noqa: BLE001 - a step never raises: the simulation stops instead
                fault = ("exception", f"{type(exc).__name__}: {exc}")
            if fault is not None:
                self._halt(k, *fault)  # the state stays (q0, v0) at t_k
                return taken
            self.work = work
            self.contact_power = 0.0
            if contact is not None:
                # the port: the energy the contact step took from the scene beyond what the commands and the
                # passive loads did (never positive; a gain, the step's own O(h) error, stays in the residual)
                done = work - self.work + ((passive_work - self.passive_work) if passive else 0.0)
                # (q0, v0)'s energy as the last contact step left it (resting: every step is one), else computed
                end, self._e_end = self._e_end, (q1, v1, model, self._energy_of(model, q1, v1))
                e0 = end[3] if end[0] is q0 and end[1] is v0 and end[2] is model else self._energy_of(model, q0, v0)
                change = (self._e_end[3] - e0 + self._objects_energy(contact[3], contact[4]) - self.objects_energy())
                self.contact_power = min(0.0, change - done) / dt
                self.contact_work += dt * self.contact_power
                self.contact_steps += 1
                self.contact_unconverged += int(info.result is not None and not info.result.converged)
                self.last_contact, self.last_contact_k, self.last_contact_first = info, k, 0
            if passive:
                self.passive_work, self.dissipated = passive_work, dissipated
                self._passive_end = (pp1, pd1)
            if thrust_end is not None:
                self.thrust = thrust_end
                self._thrust_settled = np.array_equal(thrust_end, self._thrusts.applied) and np.array_equal(
                    self._thrust_mean, thrust_end)
            self._p_end, self._p_end_valid = p1, True
            self.q, self.v = q1, v1
            own_step = False
            if self.objects:
                if contact is not None:
                    self.obj_q, self.obj_v = contact[3], contact[4]
                else:
                    self.obj_q, self.obj_v = self._objects_at(k + 1)
                    own = self._obj_traj[4].get(k)  # the objects' own contact step (the robot clear of it)
                    own_step = own is not None
                    if own is not None:
                        own, removed = own
                        self.last_contact, self.last_contact_k, self.last_contact_first = own, k, 1
                        self.contact_power = removed / dt
                        self.contact_work += removed
                        self.contact_steps += 1
                        self.contact_unconverged += int(own.result is not None and not own.result.converged)
            self.k = k + 1
            if (contact is not None or own_step) and self.world.checkpoint is not None:  # the step whole, k + 1's
                self.world.checkpoint()
            if deadline_ns is not None and (contact is not None or own_step) and time.monotonic_ns() > deadline_ns:
                return taken + 1
            if every and (self.k - self.k_reset) % every == 0:
                reason = self._energy_runaway()
                if reason is not None:
                    self._halt(self.k, "runaway", reason)
                    return taken + 1
        return int(n_steps)

    def _look_ahead(self, model, q0, v0, k: int, batch):
        """With a contact world, at a step not known to be clear: ``(batch, None)`` when the ordinary step(s)
        keep every pair and limit out of the margin (``_free_until`` moved on; the batch's states are today's,
        bit for bit), else ``(None, (q1, v1, info))``, this step taken by the contact step."""
        world = self.world
        if world.checkpoint is not None:  # the commands taken and the force built, nothing of the step computed yet
            world.checkpoint()
        q1 = None  # the ordinary step from (q0, v0); resting (within the margin already, no objects): not needed
        if batch is not None and batch[3] < batch[2].shape[0]:
            i = batch[3]
            states = batch[0][i:i + int(np.count_nonzero(batch[2][i:])) + 1]
            q1, v1 = batch[0][i + 1], batch[1][i + 1]
        elif not (world.shapes and not self.objects and world.near([q0], among="robot")):
            batch = None
            q1, v1 = step(model, q0, v0, self._tau, self.dt, method=self._integrator, t=k * self.dt,
                          wrench_world=self._wrench_world)
            states = np.array([q0, q1])
        # after a contact step look one step ahead, then twice as far after each clear look (the objects' motion
        # is computed as far as the look goes)
        if q1 is not None:
            states = states[:self._probe + 1]
            if world.shapes or self.objects:
                free = world.free_steps([states] + self._objects_span(k, len(states) - 1), among="robot")
            else:  # joint limits alone
                free = world.limit_free([states], len(states) - 1) if world.limits else len(states) - 1
            if free >= 1:
                self._free_until = k + free
                self._probe = min(2 * self._probe, 1 << 20)
                if batch is None:  # the one ordinary step just taken, as a batch of one
                    within = (np.abs(v1) <= self._v_caps).all() and (np.abs(q1) <= MAX_POSITION).all()
                    batch = [states, np.array([v0, v1]), np.array([within]), 0]
                return batch, None
        # the held force at (q0, v0) as the integrator's stages evaluate it (a world-frame wrench turned there)
        tau = _with_world_wrench(model, _tableau(self._integrator), self._tau, self._wrench_world)
        tau = tau(k * self.dt, q0, v0) if callable(tau) else tau
        taus = [tau] + [np.zeros(m.nv) for m in self.objects]
        qs, vs, info, engaged = world.step([q0] + self.obj_q, [v0] + self.obj_v, taus, self.dt)
        # a model with no contact or limit row in the step moves as without the world: the ordinary step
        if 0 not in engaged:
            qs[0], vs[0] = (q1, v1) if q1 is not None else step(
                model, q0, v0, self._tau, self.dt, method=self._integrator, t=k * self.dt,
                wrench_world=self._wrench_world)
        for i, m in enumerate(self.objects, start=1):
            if i not in engaged:
                qs[i], vs[i] = step(m, self.obj_q[i - 1], self.obj_v[i - 1], np.zeros(m.nv), self.dt,
                                    method=self._integrator)
        self._free_until = -1
        self._probe, self._obj_traj = 1, None
        return None, (qs[0], vs[0], info, qs[1:], vs[1:])

    def _objects_span(self, k: int, n: int) -> list:
        """The free objects' configurations at the steps ``k .. k + n`` as they move without the robot
        (``(n + 1, nq)`` each): their free flight under gravity and buoyancy with the simulator's integrator, and
        the contact step among themselves and the world's shapes where one comes within the margin
        (:meth:`ContactWorld.free_steps` with ``among="objects"``), computed as far as needed and kept."""
        if not self.objects:
            return []
        traj = self._obj_traj
        if traj is None or not traj[0] <= k < traj[0] + len(traj[1][0]):
            traj = self._obj_traj = (k, [[q] for q in self.obj_q], [[v] for v in self.obj_v], [k - 1], {})
        k0, qss, vss, free_until, contact_steps = traj
        while k0 + len(qss[0]) - 1 < k + n:
            i = len(qss[0]) - 1  # the last known state, step k0 + i
            if k0 + i < free_until[0]:
                for m, qs, vs in zip(self.objects, qss, vss):
                    q1, v1 = step(m, qs[-1], vs[-1], np.zeros(m.nv), self.dt, method=self._integrator)
                    qs.append(q1)
                    vs.append(v1)
                continue
            ahead = max(1, k + n - (k0 + i))
            flights = []
            for m, qs, vs in zip(self.objects, qss, vss):
                q, v, path, vpath = qs[-1], vs[-1], [qs[-1]], [vs[-1]]
                for _ in range(ahead):
                    q, v = step(m, q, v, np.zeros(m.nv), self.dt, method=self._integrator)
                    path.append(q)
                    vpath.append(v)
                flights.append((path, vpath))
            free = self.world.free_steps([self.q[None, :]] + [np.array(p) for p, _ in flights], among="objects")
            if free >= 1:
                for (path, vpath), qs, vs in zip(flights, qss, vss):
                    qs.extend(path[1:free + 1])
                    vs.extend(vpath[1:free + 1])
                free_until[0] = k0 + i + free
                continue
            now_q, now_v = [qs[-1] for qs in qss], [vs[-1] for vs in vss]
            taus = [np.zeros(self.model.nv)] + [np.zeros(m.nv) for m in self.objects]
            q1s, v1s, info, engaged = self.world.step([self.q] + now_q, [np.zeros(self.model.nv)] + now_v, taus,
                                                      self.dt, among="objects")
            for j, (m, qs, vs) in enumerate(zip(self.objects, qss, vss), start=1):
                if j in engaged:
                    qs.append(q1s[j])
                    vs.append(v1s[j])
                else:
                    qs.append(flights[j - 1][0][1])
                    vs.append(flights[j - 1][1][1])
            # the port's energy of the step: what the objects lost (no command acts on them), never a gain
            change = (self._objects_energy([qs[-1] for qs in qss], [vs[-1] for vs in vss])
                      - self._objects_energy(now_q, now_v))
            contact_steps[k0 + i] = (info, min(0.0, change))
        i = k - k0
        return [np.array(qs[i:i + n + 1]) for qs in qss]

    def _objects_at(self, k: int):
        """The free objects' states at step ``k`` of their motion without the robot (lists of q and v)."""
        k0, qss, vss, _, _ = self._obj_traj
        i = k - k0
        return [qs[i] for qs in qss], [vs[i] for vs in vss]

    def objects_energy(self) -> float:
        """Kinetic plus potential energy of the free objects [J] (0 without objects)."""
        return self._objects_energy(self.obj_q, self.obj_v)

    def _objects_energy(self, qs, vs) -> float:
        return float(sum(self._energy_of(m, q, v) for m, q, v in zip(self.objects, qs, vs)))

    @staticmethod
    def _energy_of(model, q, v) -> float:
        return model.kinetic_energy(q, v) + model.potential_energy(q)

    def _batch(self, model, q0, v0, k: int, n: int):
        """``[qs, vs, within, 0]``: the next ``n`` steps from ``(q0, v0)`` at step ``k`` under the held force in one
        compiled call (the same kernel, on the same numbers, as ``n`` calls of :func:`~mbs_ros.dynamics.simulation.integrators.step`, so the
        states are identical), stopping at the first step that fails the per-step test (finite and within the runaway
        bounds): ``within[i]`` is that test for step i. None where the call cannot be made (no compiled loop, a
        force that varies within the step, n < 2) or failed (the steps are then taken one by one, and the failing
        one reports its exception)."""
        if model.fast_advance is None or n < 2 or callable(self._tau):
            return None
        try:
            qs, vs, n_within = step(model, q0, v0, self._tau, self.dt, method=self._integrator, t=k * self.dt,
                                    wrench_world=self._wrench_world, steps=n, bounds=(self._v_caps, MAX_POSITION))
        except Exception:  # noqa: BLE001 - a singular mass matrix: step by step finds the step and says why
            return None
        within = np.arange(min(n_within + 1, n)) < n_within
        return [qs, vs, within, 0]

    def _runaway(self, q1, v1):
        """``(kind, reason)`` for a step result that failed the per-step test."""
        if not (np.isfinite(q1).all() and np.isfinite(v1).all()):
            return "nonfinite", "the step gave a non-finite state"
        over = np.abs(v1) / self._v_caps
        i = int(np.argmax(over))
        if over[i] > 1.0:
            nvb = self.model.nv - self.nj
            what = (f"joint {self.model.joint_names[i - nvb]} rate" if i >= nvb else f"base velocity component {i}")
            if self._angular[i]:
                return "runaway", (f"{what} {v1[i]:.6g} rad/s exceeds {self._v_caps[i]:.6g} rad/s "
                                   f"({MAX_TURN_PER_STEP:g} rad per step of {self.dt:g} s, or {MAX_SPEED:g})")
            return "runaway", f"{what} {v1[i]:.6g} m/s exceeds {MAX_SPEED:g} m/s"
        j = int(np.argmax(np.abs(q1)))
        return "runaway", f"configuration component {j} = {q1[j]:.6g} beyond {MAX_POSITION:g} (m or rad)"

    def _passive_power(self, q, v):
        """``(v·τ_p without springs, dissipated power)`` [W] at (q, v): the passive loads' power on the model (the
        springs' is in the potential energy) and the dissipators' (:meth:`Model.passive_forces`)."""
        tau, p_diss = self.model.passive_terms(q, v, springs=False)
        return float(tau @ v), p_diss

    def _energy_runaway(self) -> Optional[str]:
        """The energy-balance test (module docstring); None when it passes."""
        model = self.model
        E = model.kinetic_energy(self.q, self.v) + model.potential_energy(self.q) + self.objects_energy()
        residual = E - self.energy_ref - self.work - self.passive_work - self.contact_work
        scale = (abs(self.energy_ref) + abs(self.work) + abs(self.passive_work) + self.dissipated
                 + abs(self.contact_work) + ENERGY_FLOOR_PER_KG * model.total_mass)
        if math.isfinite(residual) and abs(residual) <= ENERGY_RESIDUAL_FACTOR * scale:
            return None
        return (f"energy balance: E - E_ref - work = {residual:.6g} J exceeds {ENERGY_RESIDUAL_FACTOR:g} x "
                f"{scale:.6g} J (|E_ref| + |work| + {ENERGY_FLOOR_PER_KG:g} J/kg x mass): energy no command did "
                f"appeared; the {self._integrator} integrator diverges at dt = {self.dt:g} s")

    def halt(self, reason: str, kind: str = "exception") -> None:
        """Halt at the current state as a fault from outside the step (e.g. a node's failing tick)."""
        self._halt(self.k, kind, reason)

    def _halt(self, k: int, kind: str, reason: str) -> None:
        """Stop at the last good state (the current ``q``, ``v``): the fault, commands cleared, the hook."""
        fault = Fault(kind, k, self.stamp(k), reason)
        self.fault = fault
        self.faults += 1
        self.clear_commands()
        self._p_end_valid = False
        if self.on_fault is not None:
            self.on_fault(fault)

    def _expiry(self, start_k: int, value) -> int:
        if not self._timeout_steps or _is_zero(value):
            return _NEVER
        return start_k + self._timeout_steps

    def _take_commands(self, k: int) -> None:
        """Step k: pending commands start, held ones past their expiry become zero."""
        for channel, held in (("wrench", self._wrench), ("joints", self._efforts), ("thrusters", self._thrusts)):
            if held.pending is not None:
                held.applied, held.pending = held.pending, None
                held.start_k = k
                held.expires_k = self._expiry(k, held.applied)
            elif k >= held.expires_k:
                held.applied = held.zero
                held.expires_k = _NEVER
                if self.on_timeout is not None:
                    self.on_timeout(channel)
            else:
                continue
            self._force_stale = self._announce = True
            if channel == "thrusters":
                self._thrust_settled = False
        self._next_expiry = min(self._wrench.expires_k, self._efforts.expires_k, self._thrusts.expires_k,
                                self._push_edge(k))
        if any(k - self.k_reset in (a, b) for a, b, _ in self._pushes):
            self._force_stale = True

    def set_disturbances(self, pushes) -> None:
        """External wrenches on an SE(3) base: ``(first step, end step, [F; τ] world axes at the base origin)``
        each, steps counted from the (re)start; applied with the commands (their work is the commands'")."""
        if pushes and self.model.base != "se3":
            raise ValueError("a disturbance needs a floating se3 base")
        self._pushes = [(int(a), int(b), np.array(W, dtype=float)) for a, b, W in pushes]
        self._next_expiry = min(self._next_expiry, self._push_edge(self.k - 1))

    def _push_edge(self, k: int) -> int:
        """The first step after ``k`` where a disturbance starts or ends (_NEVER: none)."""
        rel = k - self.k_reset
        return min([self.k_reset + e for a, b, _ in self._pushes for e in (a, b) if e > rel] or [_NEVER])

    def _build_force(self) -> None:
        """The generalised force of the applied commands, in the forms ``step`` takes: ``_tau`` (a constant (nv,)
        vector, or a function of the stage for a body-frame force on so3xr3) and ``_wrench_world``; and, for the
        power, the constant part ``_tau_const`` and the wrench whose power is ``W_body(q) · V(q, v)``."""
        model, cmd = self.model, self._wrench.applied
        tau = np.zeros(model.nv)
        if self.nj:
            tau[model.nv - self.nj:] = self._efforts.applied
        if self.nt and np.any(self._thrust_mean):  # the thrusters' base wrench: constant B, one vector (__init__)
            tau = tau + model.wrench_to_generalized(self.q, model.passive.B_thrust @ self._thrust_mean)[0]
        self._wrench_world = None
        self._W_power = None  # (W, frame) whose power is taken from the base twist
        self._tau = self._tau_const = tau
        if not cmd.is_zero():
            if cmd.frame == "world":
                self._wrench_world = cmd.W
                self._W_power = cmd
            elif model.velocity_map_is_constant:  # constant B: one vector for the step
                self._tau = self._tau_const = tau + model.wrench_to_generalized(self.q, cmd.W)[0]
            else:  # so3xr3: Bᵀ(q) W per stage
                W, tau_joints = cmd.W, tau
                self._tau = lambda t, q, v: model.wrench_to_generalized(q, W)[0] + tau_joints
                self._W_power = cmd
        rel = self.k - self.k_reset
        push = sum((W for a, b, W in self._pushes if a <= rel < b), np.zeros(6))
        if push.any():  # se3: a world wrench beside the command's (one wrench whose power the base twist gives)
            if cmd.frame == "world" and not cmd.is_zero():
                push = push + cmd.W
            self._wrench_world = push
            self._W_power = WrenchCommand(push, "world")
            self._W_list = push.tolist()
        else:
            self._W_list = cmd.W.tolist()
        self._force_stale = self._p_end_valid = False

    def _power(self, q, v) -> float:
        """Power [W] of the applied commands at (q, v): ``τ(q)·v``; for the base wrench ``W_body(q)·V``, with ``V``
        the base twist (``τ_base·v_base = (Bᵀ W)·v_base = W·(B v_base)``)."""
        p = float(self._tau_const @ v)
        cmd = self._W_power
        if cmd is not None:
            if cmd.frame == "world" and self.model.base == "se3":  # V = v_base; W·[R v; R ω] in plain floats
                p += _world_wrench_power(q[3:7].tolist(), v[:6].tolist(), self._W_list)
            else:
                V = self.model.twist(q, v)
                W = cmd.W
                if cmd.frame == "world":  # W_world·[R v; R ω]
                    R = self.model.base_rotation(q)
                    p += float(W[:3] @ (R @ V[:3]) + W[3:] @ (R @ V[3:]))
                else:
                    p += float(W @ V)
        return p

    def _report(self, k: int) -> None:
        """Call the hooks for the applied commands that differ from the last ones reported."""
        w, e = self._wrench, self._efforts
        if w.announced is None or not w.applied.same(w.announced):
            w.announced = w.applied
            if self.on_wrench_applied is not None:
                self.on_wrench_applied(k, w.applied)
        if self.nj and (e.announced is None or not _equal(e.applied, e.announced)):
            e.announced = e.applied
            if self.on_efforts_applied is not None:
                self.on_efforts_applied(k, e.applied)
        self._announce = False

    # ---------------------------------------------------------------------------- reset and pause

    def reset(self, q0=None, v0=None) -> None:
        """Back to the initial state (``q0``, ``v0`` replace it when given) as the state of the next step: ``k``
        goes on by one, so stamps never repeat. Commands are cleared (lockstep: the period's too), the energy and
        momentum references taken again, a fault cleared (the simulation runs again unless :meth:`pause` was
        asked for)."""
        if q0 is not None:
            self.q_init = np.array(q0, dtype=float)
        if v0 is not None:
            self.v_init = np.array(v0, dtype=float)
        self.k += 1
        self.q, self.v = self.q_init.copy(), self.v_init.copy()
        self.thrust = np.zeros(self.nt)
        self._thrust_mean = np.zeros(self.nt)
        self._thrust_settled = True
        self.clear_commands()
        self.k_reset = self.k
        self._next_expiry = self._push_edge(self.k - 1)  # the disturbances start again from the reset
        self.fault = None
        self._free_until = -1
        self.obj_q, self.obj_v = [q.copy() for q in self.obj_q_init], [v.copy() for v in self.obj_v_init]
        self._obj_traj = None
        self.last_contact, self.last_contact_k = None, -1
        if self.world is not None:
            self.world.forget()
        self.rebaseline()

    def pause(self, paused: bool = True) -> None:
        """Stop (or resume) stepping: :meth:`advance` takes no step while paused; commands are still taken in.
        Resuming does not clear a fault (:meth:`reset` does)."""
        self._paused = bool(paused)
