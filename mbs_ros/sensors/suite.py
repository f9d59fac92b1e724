"""A robot's sensors sampled on the simulator's own steps: :class:`SensorSuite`.

At a step k on a sensor's grid (``k % period_steps == 0``, k the simulator's step count) the suite computes once,
for every sensor due, what they share: the acceleration ``a = M⁻¹(τ − C v − g + τ_p)`` of the state (the
simulator's forward dynamics under the commands it applied; only when a due sensor needs it), the links' poses,
body twists and body accelerations (:func:`mbs_ros.dynamics.algorithms.link_motion`; a cheaper path when every
due sensor sits on the base body), the joint wrenches for force/torque sensors; then it moves them to each
sensor's frame (rigid-body kinematics of a point at offset r: ``v + ω × r``, ``v̇ + ω × v + ω̇ × r + ω × (ω × r)``)
and queues each sensor's :class:`~mbs_ros.sensors.frames.Reading` until its publication step (k + delay).
Sampling depends only on the state and the step count, never on who listens or on how the simulation is chunked:
the same seeds give bit-identical streams. ROS-free.
"""
from __future__ import annotations

import heapq

import numpy as np

from mbs_ros.dynamics.algorithms import link_motion

from .frames import SensorFrame
from .spec import TYPES, SensorSet

__all__ = ["SensorSuite"]

_ACCELERATING_TYPES = ("imu", "force_torque")


class SensorSuite:
    """The sensors of ``sensor_set`` on ``model`` simulated with step ``dt`` [s].

    ``periods`` (each sensor's ``period_steps``), ``needs_wrenches`` (a force/torque sensor is declared),
    ``sensors`` (the type modules' ``Sensor`` objects, declaration order), ``specs``. :meth:`sample` measures the
    simulator's current state, :meth:`due` hands over the readings whose publication step has come, :meth:`run`
    does both while advancing a simulator (headless use)."""

    def __init__(self, model, sensor_set: SensorSet, dt: float):
        self.model = model
        self.sensor_set = sensor_set
        self.specs = tuple(sensor_set.sensors)
        self.dt = float(dt)
        self.dt_ns = int(round(self.dt * 1e9))
        env = sensor_set.environment
        self.sensors = tuple(TYPES[s.type].Sensor(s, env, model, self.dt) for s in self.specs)
        self.periods = tuple(int(s.period_steps) for s in self.specs)
        names = list(model.link_names)
        self._links = tuple(names.index(s.link) for s in self.specs)
        joints = list(model.joint_names)
        self._joints = tuple(None if s.joint is None else joints.index(s.joint) for s in self.specs)
        self._needs_acc = tuple(bool(getattr(sensor, "needs_acceleration", s.type in _ACCELERATING_TYPES))
                                for s, sensor in zip(self.specs, self.sensors))
        self.needs_wrenches = any(j is not None for j in self._joints)
        tree = model.tree
        self._on_base = tuple(int(tree.link_body[i]) == 0 for i in self._links)
        self._on_link = tuple(_Mount(s.T_link_sensor) for s in self.specs)
        self._on_body = tuple(_Mount(tree.T_body_link[i] @ s.T_link_sensor) for i, s in zip(self._links, self.specs))
        self._queue = []  # heap of (publish_k, k, sensor index, reading)
        self._last_k = None

    # ------------------------------------------------------------------------------------------------ sampling
    def due_sensors(self, k: int) -> tuple:
        """Indices of the sensors sampled at step ``k``."""
        return tuple(i for i, p in enumerate(self.periods) if k % p == 0)

    def next_sample(self, k: int) -> int:
        """The first step >= ``k`` at which some sensor samples (``k`` itself if one does)."""
        return min(k + (-k) % p for p in self.periods) if self.periods else k

    def sample(self, sim) -> int:
        """Measure the state of ``sim`` (its ``q``, ``v`` at step ``sim.k``) with every sensor due at that step and
        queue the readings; sampling a step twice does nothing. Returns the number of readings queued."""
        k = int(sim.k)
        if k == self._last_k:
            return 0
        self._last_k = k
        due = self.due_sensors(k)
        if not due:
            return 0
        model = sim.model
        q, v = sim.q, sim.v
        need_acc = any(self._needs_acc[i] or self._joints[i] is not None for i in due)
        a = model.forward_dynamics(q, v, sim.generalized_force()) if need_acc else None
        W = None
        if any(self._joints[i] is not None for i in due):
            W = model.joint_wrenches(q, v, a)
        if all(self._on_base[i] for i in due):
            Tb, Vb, Ab = _base_motion(model, q, v, a)
            links = None
        else:
            links = link_motion(model, q, v, a)
        stamp = int(sim.stamp(k))
        for i in due:
            if links is None:
                mount, T, V, A = self._on_body[i], Tb, Vb, Ab
            else:
                li = self._links[i]
                mount, T, V, A = self._on_link[i], links[0][li], links[1][li], None if a is None else links[2][li]
            frame = mount.frame(k, stamp, T, V, A)
            frame.q, frame.v_gen, frame.a_gen, frame.dt_ns = q, v, a, self.dt_ns
            j = self._joints[i]
            if j is not None:
                frame.joint_wrench = self._on_link[i].wrench(W[j])
            reading = self.sensors[i].measure(frame)
            spec = self.specs[i]
            reading.publish_k = k + spec.delay_steps
            reading.stamp_ns = stamp + (spec.delay_steps * self.dt_ns if spec.stamp == "arrival" else 0)
            heapq.heappush(self._queue, (reading.publish_k, k, i, reading))
        return len(due)

    def due(self, k: int) -> list:
        """The queued readings with ``publish_k <= k``, removed from the queue, in (publish_k, k, sensor) order."""
        out = []
        while self._queue and self._queue[0][0] <= k:
            out.append(heapq.heappop(self._queue)[3])
        return out

    def pending(self) -> int:
        """Readings queued and not yet due."""
        return len(self._queue)

    def run(self, sim, n_steps: int) -> list:
        """Headless: advance ``sim`` by ``n_steps`` in chunks that end on the sensors' grids, sampling every state
        from the current one to the last one reached, and return the readings due by then. Chunking and repeated
        calls give the same readings as one call. Stops early when the simulator stops (paused or faulted)."""
        out = []
        end = int(sim.k) + int(n_steps)
        self.sample(sim)
        while sim.k < end:
            nxt = min(self.next_sample(int(sim.k) + 1), end)
            if sim.advance(nxt - int(sim.k)) <= 0:
                break
            self.sample(sim)
            out.extend(self.due(int(sim.k)))
        out.extend(self.due(int(sim.k)))
        return out

    def reset(self) -> None:
        """Drop the queued readings (a simulator reset); the sensors' random streams and biases go on (a reset
        does not replay the noise: a seed fixes a whole run's stream, resets included)."""
        self._queue.clear()
        self._last_k = None


def _cross(a, b) -> np.ndarray:
    """a × b of two 3-vectors (numpy.cross costs ~40 µs per call in its axis handling)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def _base_motion(model, q, v, a):
    """World pose, body twist and body acceleration of the base body (None when ``a`` is)."""
    T = model.base_pose_matrix(q)
    if model.group is None:
        return T, np.zeros(6), None if a is None else np.zeros(6)
    nvb = model.tree.nvb
    V = model.twist(q, v)
    if a is None:
        return T, V, None
    if model.velocity_map_is_constant:
        A = model.velocity_map(q) @ np.asarray(a, dtype=float)[:nvb]
    else:  # SO(3)×R³: V = [Rᵀ ṗ; ω], V̇ = [Rᵀ p̈ − ω × Rᵀ ṗ; ω̇]
        R = T[:3, :3]
        A = np.concatenate([R.T @ a[:3] - _cross(V[3:], V[:3]), a[3:6]])
    return T, V, A


class _Mount:
    """A sensor's pose ``T`` on the frame whose motion is given (its link, or its link's body) and the point
    kinematics that take that frame's motion to the sensor frame."""

    def __init__(self, T):
        self.T = np.asarray(T, dtype=float)
        self.R = self.T[:3, :3]
        self.Rt = np.ascontiguousarray(self.R.T)
        self.r = self.T[:3, 3].copy()
        self.offset = bool(self.r.any())
        self.rhat_neg = np.array([[0.0, self.r[2], -self.r[1]], [-self.r[2], 0.0, self.r[0]],
                                  [self.r[1], -self.r[0], 0.0]])  # x ↦ x × r

    def frame(self, k, stamp, T, V, A) -> SensorFrame:
        """The :class:`SensorFrame` of the sensor on a frame of pose T, body twist V and body acceleration A."""
        Rt = self.Rt
        v, w = V[:3], V[3:]
        wr = self.rhat_neg @ w if self.offset else np.zeros(3)  # ω × r
        frame = SensorFrame(k, stamp, T @ self.T, Rt @ (v + wr), Rt @ w)
        if A is not None:
            wd = A[3:]
            a_point = A[:3] + _cross(w, v)
            if self.offset:
                a_point += self.rhat_neg @ wd + _cross(w, wr)
            frame.a, frame.alpha = Rt @ a_point, Rt @ wd
        return frame

    def wrench(self, W) -> np.ndarray:
        """A wrench ``[F; τ]`` at the frame's origin in its axes, moved to the sensor origin in sensor axes."""
        F, tau = W[:3], W[3:]
        return np.concatenate([self.Rt @ F, self.Rt @ (tau - _cross(self.r, F))])
