"""The simulation loop without ROS: state, held commands, lockstep periods and the energy bookkeeping.

:class:`Simulator` is what the dynamics node (:mod:`mbs_ros.nodes.dynamics_node`) runs; the node only turns
messages into calls of this class and its state into messages. Tests and benchmarks drive the same class
directly, so what they measure is what the node computes. Nothing here imports rclpy.

Time: step ``k`` takes the state from ``t_k`` to ``t_{k+1}``, ``t_k = t0_ns + k * dt_ns`` in integer nanoseconds
(``dt_ns`` is ``dt`` rounded to whole ns; ``dt = dt_ns * 1e-9`` s is the step the integrator takes).

Commands (what a step applies, besides gravity):

- a base wrench ``W = [F; τ]`` [N, N m] at the base frame's origin, held either in **body** axes (fixed in the
  body: it turns with it) or in **world** axes (fixed in the world: at every integrator stage it is rotated into
  the body axes). Components the base group cannot take (e.g. a roll torque on se2) are dropped when the command
  is given (:meth:`Simulator.wrench_command`); a fixed base takes no wrench;
- joint efforts [N m or N], one per movable joint in ``model.joint_names`` order.

A command given by :meth:`Simulator.set_wrench` / :meth:`Simulator.set_joint_efforts` applies from the next step
on and is held until the next one, or until ``cmd_timeout`` seconds of simulation time have passed since the step
it first applied to (then zero; ``cmd_timeout = 0``: held forever). The two channels are independent.

Lockstep (``lockstep_steps = n > 0``): commands are collected per control period instead (:meth:`Simulator.submit`)
and :meth:`Simulator.advance_period` takes n steps with them once every expected channel (``"wrench"`` if the base
floats, ``"joints"`` if there are movable joints) has one; there is no timeout.

Generalised force of a step: ``τ = [Bᵀ W; efforts]`` with ``B`` the base's velocity map
(:meth:`Model.wrench_to_generalized`). ``B`` is constant on every base group but so3xr3, so a body-frame wrench is
one constant vector for the whole step (one compiled call, :func:`mbs_ros.dynamics.integrators.step`); a
world-frame wrench goes to ``step(..., wrench_world=W)``, which rotates it per stage in the compiled step; only a
body-frame force on an so3xr3 base (``Bᵀ`` depends on the rotation) is evaluated per stage in Python.

Energy bookkeeping: ``work`` is the work [J] of the applied commands since the reference state (start, reset,
model change), by the trapezoid rule on the power ``τ·v`` at the two ends of every step; ``E − E_ref − work`` (the
balance residual, :meth:`Simulator.diagnostics`) then stays at the integrator's and the quadrature's error (second
order in dt): a check of the simulation, not a physical quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import numpy as np

from .integrators import TABLEAUS, step
from .model import Model

__all__ = ["Simulator", "WrenchCommand", "ZERO_WRENCH", "CHANNELS"]

#: Lockstep command channels: the base wrench, the joint efforts.
CHANNELS = ("wrench", "joints")
_NEVER = 1 << 62  # a step index no run reaches


@dataclass(frozen=True)
class WrenchCommand:
    """A base wrench as applied: ``W = [F; τ]`` [N, N m] at the base frame's origin after dropping what the base
    cannot take, held in ``frame``: ``"body"`` (the base frame's axes, turning with the body) or ``"world"``."""

    W: np.ndarray
    frame: str = "body"

    def is_zero(self) -> bool:
        return not np.any(self.W)

    def same(self, other: "WrenchCommand") -> bool:
        return self.frame == other.frame and np.array_equal(self.W, other.W)


ZERO_WRENCH = WrenchCommand(np.zeros(6))
ZERO_WRENCH.W.setflags(write=False)


class _Held:
    """One command channel: the value applied on the last step, the one received for the next step, the step it
    first applied to and the step it expires at."""

    __slots__ = ("zero", "applied", "pending", "start_k", "expires_k", "announced")

    def __init__(self, zero):
        self.zero = zero
        self.applied = zero
        self.pending = None
        self.start_k = 0
        self.expires_k = _NEVER
        self.announced = None  # the last value reported to the on_*_applied hook

    def clear(self):
        self.pending = None
        self.applied = self.zero
        self.expires_k = _NEVER


def _is_zero(value) -> bool:
    return value.is_zero() if isinstance(value, WrenchCommand) else not np.any(value)


def _world_wrench_power(quat, V, W) -> float:
    """``F·(R v) + τ·(R ω)`` for ``R`` of the unit quaternion ``[x, y, z, w]``, ``V = [v; ω]``, ``W = [F; τ]`` (plain
    float lists: a step's worth of numpy calls costs more than this arithmetic)."""
    x, y, z, w = quat
    a, b, c, d, e, f = V
    xx, yy, zz, xy, xz, yz, wx, wy, wz = x * x, y * y, z * z, x * y, x * z, y * z, w * x, w * y, w * z
    r00, r01, r02 = 1.0 - 2.0 * (yy + zz), 2.0 * (xy - wz), 2.0 * (xz + wy)
    r10, r11, r12 = 2.0 * (xy + wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz - wx)
    r20, r21, r22 = 2.0 * (xz - wy), 2.0 * (yz + wx), 1.0 - 2.0 * (xx + yy)
    return (W[0] * (r00 * a + r01 * b + r02 * c) + W[1] * (r10 * a + r11 * b + r12 * c)
            + W[2] * (r20 * a + r21 * b + r22 * c) + W[3] * (r00 * d + r01 * e + r02 * f)
            + W[4] * (r10 * d + r11 * e + r12 * f) + W[5] * (r20 * d + r21 * e + r22 * f))


class Simulator:
    """A model stepped at a fixed rate under held commands. See the module docstring.

    ``model``: a :class:`~mbs_ros.dynamics.Model`; ``q0``, ``v0``: the initial state (also the state
    :meth:`reset` returns to); ``dt``: the step [s] (rounded to whole ns); ``integrator``: euler | heun | rk3 |
    rk4; ``cmd_timeout`` [s of simulation time]: how long a command is held (0: forever; unused in lockstep);
    ``lockstep_steps``: steps per control period in lockstep, 0 = no lockstep; ``t0_ns``: the time of step 0.

    Hooks (attributes, None by default), called during :meth:`advance`:

    - ``on_wrench_applied(k, cmd)``: the applied :class:`WrenchCommand` changed; ``k`` is the first step it
      applies to (its start time is ``stamp(k)``);
    - ``on_efforts_applied(k, efforts)``: likewise for the joint efforts (an (nj,) array);
    - ``on_timeout(channel)``: a held command of ``"wrench"`` or ``"joints"`` timed out (zero from now on);
    - ``on_nonfinite(k, cmd, efforts)``: step k gave a non-finite state under these commands; they were dropped and
      the step taken again with zero wrench and efforts.

    State (read it, do not assign to it): ``q``, ``v`` (the state at ``t_k``), ``k`` (steps taken; never goes
    back, a reset counts as one), ``paused``.
    """

    def __init__(self, model: Model, q0, v0, dt: float, *, integrator: str = "rk4", cmd_timeout: float = 0.0,
                 lockstep_steps: int = 0, t0_ns: int = 0):
        self.dt_ns = max(1, int(round(float(dt) * 1e9)))
        self.dt = self.dt_ns * 1e-9
        self.t0_ns = int(t0_ns)
        self.model = model
        self.nj = len(model.joint_names)
        self.q_init = np.array(q0, dtype=float)
        self.v_init = np.array(v0, dtype=float)
        self.q, self.v = self.q_init.copy(), self.v_init.copy()
        self.k = 0
        self.k_reset = 0
        self.paused = False
        self.integrator = integrator
        self.lockstep_steps = int(lockstep_steps)
        #: lockstep channels this model needs: "wrench" if the base floats, "joints" if there are movable joints
        self.expected = tuple(ch for ch, needed in (("wrench", model.group is not None), ("joints", self.nj > 0))
                              if needed)
        self.period_commands: Dict[str, object] = {}  # lockstep: channel -> command for the current period
        self.last_stamp_seen: Dict[str, int] = {}  # lockstep: channel -> stamp [ns] of the last command offered
        self._wrench = _Held(ZERO_WRENCH)
        self._efforts = _Held(np.zeros(self.nj))
        self._efforts.zero.setflags(write=False)
        self.on_wrench_applied: Optional[Callable] = None
        self.on_efforts_applied: Optional[Callable] = None
        self.on_timeout: Optional[Callable] = None
        self.on_nonfinite: Optional[Callable] = None
        self._timeout_steps = 0
        self.set_cmd_timeout(cmd_timeout)
        self._force_stale = True  # the generalised force must be rebuilt from the applied commands
        self._announce = True  # the hooks may have a change to report
        self._next_expiry = _NEVER
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
        for held in (self._wrench, self._efforts):
            held.expires_k = self._expiry(held.start_k, held.applied)
        self._next_expiry = min(self._wrench.expires_k, self._efforts.expires_k)

    def set_model(self, model: Model) -> None:
        """Simulate ``model`` (same configuration space, e.g. new inertial parameters) from the current state on;
        the energy and momentum references are taken again."""
        if (model.nq, model.nv, model.joint_names) != (self.model.nq, self.model.nv, self.model.joint_names):
            raise ValueError("set_model needs a model with the same configuration space")
        self.model = model
        self._force_stale = True
        self.rebaseline()

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
        if not np.all(np.isfinite(W)):
            raise ValueError(f"non-finite (NaN/inf) wrench components {W.tolist()}")
        if frame not in ("body", "world"):
            raise ValueError(f"frame must be 'body' or 'world', got {frame!r}")
        R = self.model._rotation(self.q) if frame == "world" else None
        W_body = W if R is None else np.concatenate([R.T @ W[:3], R.T @ W[3:]])
        _tau, _applied, dropped = self.model.wrench_to_generalized(self.q, W_body)
        if np.max(np.abs(dropped)) > 1e-12 * max(1.0, float(np.max(np.abs(W_body)))):
            W_body = W_body - dropped
            W = W_body if R is None else np.concatenate([R @ W_body[:3], R @ W_body[3:]])
        else:
            dropped = np.zeros(6)
        W.setflags(write=False)
        return WrenchCommand(W, frame), dropped

    def joint_efforts(self, efforts) -> np.ndarray:
        """``efforts`` as a read-only (nj,) array; ValueError for a wrong length or non-finite entries."""
        e = np.array(efforts, dtype=float).reshape(-1)
        if e.shape != (self.nj,):
            raise ValueError(f"{e.size} joint efforts, expected {self.nj} ({', '.join(self.model.joint_names)})")
        if not np.all(np.isfinite(e)):
            raise ValueError(f"non-finite (NaN/inf) joint efforts {e.tolist()}")
        e.setflags(write=False)
        return e

    def set_wrench(self, W, frame: str = "body") -> np.ndarray:
        """Hold the base wrench ``W`` (``frame`` axes) from the next step on; returns the dropped components (see
        :meth:`wrench_command`). A :class:`WrenchCommand` is taken as it is."""
        if isinstance(W, WrenchCommand):
            cmd, dropped = W, np.zeros(6)
        else:
            cmd, dropped = self.wrench_command(W, frame)
        self._wrench.pending = cmd
        return dropped

    def set_joint_efforts(self, efforts) -> None:
        """Hold the joint efforts (``model.joint_names`` order) from the next step on."""
        self._efforts.pending = self.joint_efforts(efforts)

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
        self._next_expiry = _NEVER
        self.period_commands = {}
        self._force_stale = self._announce = True

    # ------------------------------------------------------------------------------------- lockstep

    def check_stamp(self, channel: str, stamp_ns: int) -> int:
        """Lockstep: is a command on ``channel`` stamped ``stamp_ns`` for the current period? 0: yes; -1: for an
        earlier one; 1: for a later one. Remembered in ``last_stamp_seen``."""
        self.last_stamp_seen[channel] = int(stamp_ns)
        current = self.stamp()
        return 0 if stamp_ns == current else (-1 if stamp_ns < current else 1)

    def submit(self, channel: str, value) -> None:
        """Lockstep: the command of ``channel`` (``"wrench"``: a :class:`WrenchCommand`; ``"joints"``: efforts) for
        the current period (a later one on the same channel replaces it)."""
        if channel not in self.expected:
            raise ValueError(f"this model expects {' and '.join(self.expected) or 'no command'}, not {channel!r}")
        self.period_commands[channel] = value if channel == "wrench" else self.joint_efforts(value)

    def missing(self) -> tuple:
        """Lockstep: the expected channels without a command for the current period."""
        return tuple(ch for ch in self.expected if ch not in self.period_commands)

    def period_complete(self) -> bool:
        return bool(self.expected) and not self.missing()

    def start_period(self) -> bool:
        """Lockstep: hold the current period's commands from the next step on (the caller then takes
        ``lockstep_steps`` steps); False (nothing changed) while paused or while a channel is missing."""
        if self.paused or not self.period_complete():
            return False
        cmds, self.period_commands = self.period_commands, {}
        if "wrench" in cmds:
            self._wrench.pending = cmds["wrench"]
        if "joints" in cmds:
            self._efforts.pending = cmds["joints"]
        return True

    def advance_period(self) -> int:
        """Lockstep: :meth:`start_period` and take its ``lockstep_steps`` steps; the steps taken (0 while paused or
        while a channel is missing)."""
        return self.advance(self.lockstep_steps) if self.start_period() else 0

    # ------------------------------------------------------------------------------------- stepping

    def advance(self, n_steps: int) -> int:
        """Take ``n_steps`` steps (none while paused); returns the number taken. Per step: the pending commands
        start, held ones may time out, one :func:`~mbs_ros.dynamics.integrators.step`, the finiteness check, the
        work of the step, the hooks when an applied command changed."""
        if self.paused or n_steps <= 0:
            return 0
        model, dt, method = self.model, self.dt, self._integrator
        w, e = self._wrench, self._efforts
        for _ in range(int(n_steps)):
            k = self.k
            if w.pending is not None or e.pending is not None or k >= self._next_expiry:
                self._take_commands(k)
            if self._force_stale:
                self._build_force()
            q0, v0 = self.q, self.v
            q1, v1 = step(model, q0, v0, self._tau, dt, method=method, t=k * dt, wrench_world=self._wrench_world)
            if not (np.isfinite(q1).all() and np.isfinite(v1).all()):
                q1, v1 = self._nonfinite(k, q0, v0)
            if self._announce:
                self._report(k)
            p1 = self._power(q1, v1)
            p0 = self._p_end if self._p_end_valid else self._power(q0, v0)
            self.work += 0.5 * dt * (p0 + p1)
            self._p_end, self._p_end_valid = p1, True
            self.q, self.v = q1, v1
            self.k = k + 1
        return int(n_steps)

    def _expiry(self, start_k: int, value) -> int:
        if not self._timeout_steps or _is_zero(value):
            return _NEVER
        return start_k + self._timeout_steps

    def _take_commands(self, k: int) -> None:
        """Step k: pending commands start, held ones past their expiry become zero."""
        for channel, held in (("wrench", self._wrench), ("joints", self._efforts)):
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
        self._next_expiry = min(self._wrench.expires_k, self._efforts.expires_k)

    def _build_force(self) -> None:
        """The generalised force of the applied commands, in the forms ``step`` takes: ``_tau`` (a constant (nv,)
        vector, or a function of the stage for a body-frame force on so3xr3) and ``_wrench_world``; and, for the
        power, the constant part ``_tau_const`` and the wrench whose power is ``W_body(q) · V(q, v)``."""
        model, cmd = self.model, self._wrench.applied
        tau = np.zeros(model.nv)
        if self.nj:
            tau[model.nv - self.nj:] = self._efforts.applied
        self._wrench_world = None
        self._W_power = None  # (W, frame) whose power is taken from the base twist
        self._tau = self._tau_const = tau
        if not cmd.is_zero():
            if cmd.frame == "world":
                self._wrench_world = cmd.W
                self._W_power = cmd
            elif model.group is None or model._H is not None:  # constant B: one vector for the step
                self._tau = self._tau_const = tau + model.wrench_to_generalized(self.q, cmd.W)[0]
            else:  # so3xr3: Bᵀ(q) W per stage
                W, tau_joints = cmd.W, tau
                self._tau = lambda t, q, v: model.wrench_to_generalized(q, W)[0] + tau_joints
                self._W_power = cmd
        self._W_list = cmd.W.tolist()
        self._force_stale = False
        self._p_end_valid = False

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
                    R = self.model._rotation(q)
                    p += float(W[:3] @ (R @ V[:3]) + W[3:] @ (R @ V[3:]))
                else:
                    p += float(W @ V)
        return p

    def _nonfinite(self, k, q0, v0):
        cmd, efforts = self._wrench.applied, self._efforts.applied
        if self.on_nonfinite is not None:
            self.on_nonfinite(k, cmd, efforts)
        self._wrench.applied, self._efforts.applied = self._wrench.zero, self._efforts.zero
        self._wrench.expires_k = self._efforts.expires_k = self._next_expiry = _NEVER
        self._build_force()
        self._announce = True
        q1, v1 = step(self.model, q0, v0, self._tau, self.dt, method=self._integrator, t=k * self.dt,
                      wrench_world=self._wrench_world)
        if not (np.isfinite(q1).all() and np.isfinite(v1).all()):  # pragma: no cover - the model itself diverges
            q1, v1 = q0, v0
        return q1, v1

    def _report(self, k: int) -> None:
        """Call the hooks for the applied commands that differ from the last ones reported."""
        w, e = self._wrench, self._efforts
        if w.announced is None or not w.applied.same(w.announced):
            w.announced = w.applied
            if self.on_wrench_applied is not None:
                self.on_wrench_applied(k, w.applied)
        if self.nj and (e.announced is None or not np.array_equal(e.applied, e.announced)):
            e.announced = e.applied
            if self.on_efforts_applied is not None:
                self.on_efforts_applied(k, e.applied)
        self._announce = False

    # ---------------------------------------------------------------------------- reset and pause

    def reset(self, q0=None, v0=None) -> None:
        """Back to the initial state (``q0``, ``v0`` replace it when given) as the state of the next step: ``k``
        goes on by one, so stamps never repeat. Commands are cleared (lockstep: the period's too), the energy and
        momentum references taken again."""
        if q0 is not None:
            self.q_init = np.array(q0, dtype=float)
        if v0 is not None:
            self.v_init = np.array(v0, dtype=float)
        self.k += 1
        self.q, self.v = self.q_init.copy(), self.v_init.copy()
        self.clear_commands()
        self.k_reset = self.k
        self.rebaseline()

    def pause(self, paused: bool = True) -> None:
        """Stop (or resume) stepping: :meth:`advance` takes no step while paused; commands are still taken in."""
        self.paused = bool(paused)

    # --------------------------------------------------------------------------- outputs of a state

    def rebaseline(self) -> None:
        """Take the current state as the energy and momentum reference; the work counts from here."""
        model, q, v = self.model, self.q, self.v
        self.work = 0.0
        self.kinetic_energy_ref = model.kinetic_energy(q, v)
        self.energy_ref = self.kinetic_energy_ref + model.potential_energy(q)
        self.momentum_ref = model.spatial_momentum(q, v)
        self._p_end_valid = False

    def energy(self) -> float:
        """Kinetic plus potential energy of the current state [J]."""
        return self.model.kinetic_energy(self.q, self.v) + self.model.potential_energy(self.q)

    def generalized_force(self) -> np.ndarray:
        """τ (nv,) of the commands applied on the last step, at the current configuration (wrench and efforts)."""
        if self._force_stale:
            self._build_force()
        if self._W_power is None:
            return self._tau_const.copy()
        cmd, model = self._W_power, self.model
        W = cmd.W
        if cmd.frame == "world":
            R = model._rotation(self.q)
            W = np.concatenate([R.T @ W[:3], R.T @ W[3:]])
        return self._tau_const + model.wrench_to_generalized(self.q, W)[0]

    def joint_wrenches(self) -> np.ndarray:
        """(nj, 6) ``Model.joint_wrenches(q, v, a)`` of the current state with ``a`` its forward dynamics under the
        commands of the last step: the total wrench ``[F; τ]`` each joint transmits to its child, in the child
        link's frame at its origin (actuation and gravity included)."""
        q, v = self.q, self.v
        a = self.model.forward_dynamics(q, v, self.generalized_force())
        return self.model.joint_wrenches(q, v, a)

    def applied_wrench_world(self):
        """``(F, τ)`` of the applied base wrench in world axes at the current pose [N, N m]."""
        cmd = self._wrench.applied
        if cmd.frame == "world":
            return cmd.W[:3], cmd.W[3:]
        R = self.model._rotation(self.q)
        return R @ cmd.W[:3], R @ cmd.W[3:]

    def diagnostics(self) -> dict:
        """The bookkeeping of the current state as a flat dict (SI units, J for energies and work, world-frame
        momentum ``[linear; angular about the world origin]``): simulation time [s], step counts, paused, base
        group, integrator, kinetic/potential/total energy and their references, ``work_applied``,
        ``energy_balance_residual = E − E_ref − work`` and the momentum and its reference per axis."""
        model, q, v = self.model, self.q, self.v
        ke = model.kinetic_energy(q, v)
        pe = model.potential_energy(q)
        h = model.spatial_momentum(q, v)
        values = {
            "sim_time": self.stamp() * 1e-9,
            "steps": self.k,
            "steps_since_reset": self.k - self.k_reset,
            "paused": self.paused,
            "base_group": model.base,
            "integrator": self._integrator,
            "kinetic_energy": ke,
            "potential_energy": pe,
            "total_energy": ke + pe,
            "kinetic_energy_ref": self.kinetic_energy_ref,
            "total_energy_ref": self.energy_ref,
            "work_applied": self.work,
            "energy_balance_residual": ke + pe - self.energy_ref - self.work,
        }
        axes = ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")
        for i, axis in enumerate(axes):
            values["momentum_" + axis] = float(h[i])
        for i, axis in enumerate(axes):
            values["momentum_ref_" + axis] = float(self.momentum_ref[i])
        return values
