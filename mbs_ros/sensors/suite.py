"""A robot's sensors sampled on the simulator's own steps: :class:`SensorSuite`.

At a step k on a sensor's grid (``k % period_steps == 0``, k the simulator's step count) the suite computes once,
for every sensor due, what they share: the acceleration ``a = M⁻¹(τ − C v − g + τ_p)`` of the state (the
simulator's forward dynamics under the commands it applied; only when a due sensor needs it), the bodies' poses,
body twists and body accelerations (the base's from its velocity map; the others by a compiled recursion over the
tree, equal to :func:`mbs_ros.dynamics.algorithms.multibody.link_motion`, the numpy reference checked against Pinocchio,
only when a due sensor is off the base body), the joint wrenches for force/torque sensors, with a contact world
the last contact step's loads on the bodies (:mod:`mbs_ros.sensors.contact_loads`: in the acceleration, the joint
wrenches and the foot contact sensors' wrenches); then it moves them to each
sensor's frame (rigid-body kinematics of a point at offset r: ``v + ω × r``, ``v̇ + ω × v + ω̇ × r + ω × (ω × r)``)
and queues each sensor's :class:`~mbs_ros.sensors.frames.Reading` until its publication step (k + delay).
Sampling depends only on the state and the step count, never on who listens or on how the simulation is chunked:
the same seeds give bit-identical streams. ROS-free.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit

from mbs_ros.sensors.contact_loads import ContactLoads
from mbs_ros.sensors.frames import SensorFrame
from mbs_ros.sensors.spec import TYPES, SensorSet

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
        self._needs_contact = tuple(bool(getattr(sensor, "needs_contact", False)) for sensor in self.sensors)
        self._contact = None  # the ContactLoads of the simulator sampled (a contact world: contact loads act)
        tree = model.tree
        self._bodies = tuple(int(tree.link_body[i]) for i in self._links)
        self._on_base = tuple(b == 0 for b in self._bodies)
        self._on_link = tuple(_Mount(s.T_link_sensor) for s in self.specs)
        self._on_body = tuple(_Mount(tree.T_body_link[i] @ s.T_link_sensor) for i, s in zip(self._links, self.specs))
        self._tree_args = tuple(np.ascontiguousarray(x) for x in (
            np.asarray(tree.parent, dtype=np.int64), np.asarray(tree.jtype, dtype=np.int64),
            np.asarray(tree.iq, dtype=np.int64), np.asarray(tree.iv, dtype=np.int64), tree.X0, tree.PA, tree.PA2,
            tree.Pa, tree.s_joint))
        self._nb = tree.nb
        self._queue = []  # heap of (publish_k, k, sensor index, reading)
        self._last_k = None
        self._plans = {}  # due sensors -> (needs accelerations, needs joint wrenches, all on the base body)
        self._H = np.asarray(model.velocity_map(model.neutral()), dtype=float) if (
            model.group is not None and model.velocity_map_is_constant) else None
        if self.specs:
            self._warm_up()

    def _warm_up(self) -> None:
        """Run the compiled kernels once (numba compiles, or loads its cache, at the first call), the model's
        forward dynamics and joint wrenches included: here, when the node starts, rather than in the first
        sample's callback."""
        model = self.model
        q0, zero = model.neutral(), np.zeros(model.nv)
        if any(self._needs_acc) or self.needs_wrenches:
            try:
                a0 = model.forward_dynamics(q0, zero, zero)
                if self.needs_wrenches:
                    model.joint_wrenches(q0, zero, a0)
            except Exception:  # noqa: BLE001 - a warm-up only (M may be singular at q0); sampling reports errors
                pass
        T, V, A, nb = np.eye(4), np.zeros(6), np.zeros(6), self._nb
        _pose_matrix(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), np.empty((4, 4)))
        for has_acc in (True, False):
            _point_motion(T, V, A, self._on_body[0].T, has_acc, np.empty((4, 4)), np.empty((4, 3)))
            nq, nv = model.tree.nq, model.tree.nv
            _tree_motion(*self._tree_args, np.zeros(nq), np.zeros(nv), np.zeros(nv), has_acc, np.empty((nb, 4, 4)),
                         np.zeros((nb, 6)), np.zeros((nb, 6)))

    def text(self) -> str:
        """The sensors in a line: ``N sensors from FILE: name (type, rate Hz), ...``."""
        parts = [f"{s.name} ({s.type}, {s.rate:g} Hz" + (f", delay {s.delay:g} s)" if s.delay_steps else ")")
                 for s in self.specs]
        n = len(parts)
        return f"{n} sensor{'s' if n > 1 else ''} from {self.sensor_set.source}: " + ", ".join(parts)

    # ------------------------------------------------------------------------------------------------ sampling
    def due_sensors(self, k: int) -> tuple:
        """Indices of the sensors sampled at step ``k``."""
        return tuple(i for i, p in enumerate(self.periods) if k % p == 0)

    def next_sample(self, k: int) -> int:
        """The first step >= ``k`` at which some sensor samples (``k`` itself if one does)."""
        return min(k + (-k) % p for p in self.periods) if self.periods else k

    def next_stop(self, k: int) -> int:
        """The first step after ``k`` at which some sensor samples or a queued reading falls due: where a stepping
        loop stops to call :meth:`sample` and :meth:`due`."""
        nxt = self.next_sample(k + 1)
        if self._queue:
            nxt = min(nxt, max(k + 1, self._queue[0][0]))
        return nxt

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
        plan = self._plans.get(due)
        if plan is None:  # what the sensors due together need (a handful of combinations)
            plan = self._plans[due] = (any(self._needs_acc[i] or self._joints[i] is not None for i in due),
                                       any(self._joints[i] is not None for i in due),
                                       all(self._on_base[i] for i in due),
                                       any(self._needs_contact[i] for i in due))
        need_acc, need_wrenches, on_base, need_contact = plan
        model = sim.model
        q, v = sim.q, sim.v
        loads = None
        # with a contact world the last contact step's loads act too
        if getattr(sim, "world", None) is not None and (need_acc or need_contact):
            contact = self._contact
            if contact is None or contact.sim is not sim:
                contact = self._contact = ContactLoads(sim)
            loads = contact.loads()
        if loads is None:
            a = sim.acceleration() if need_acc else None
            W = sim.joint_wrenches(a) if need_wrenches else None
        else:
            a = contact.acceleration(loads[0]) if need_acc else None
            W = contact.joint_wrenches(a, loads[0]) if need_wrenches else None
        Tb, Vb, Ab = self._base_motion(model, q, v, a)
        if not on_base:
            Tb, Vb, Ab = self._body_motion(model, q, v, a, Tb, Vb, Ab)
        stamp = int(sim.stamp(k))
        for i in due:
            if on_base:
                T, V, A = Tb, Vb, Ab
            else:
                b = self._bodies[i]
                T, V, A = Tb[b], Vb[b], None if a is None else Ab[b]
            frame = self._on_body[i].frame(k, stamp, T, V, A)
            frame.q, frame.v_gen, frame.a_gen, frame.dt_ns = q, v, a, self.dt_ns
            j = self._joints[i]
            if j is not None:
                frame.joint_wrench = self._on_link[i].wrench(W[j])
            if self._needs_contact[i]:
                b = self._bodies[i]
                frame.contact_wrench = np.zeros(6) if loads is None else self._on_body[i].wrench(loads[0][b])
                frame.contact_normal = 0.0 if loads is None else float(loads[1][b])
            reading = self.sensors[i].measure(frame)
            spec = self.specs[i]
            reading.publish_k = k + spec.delay_steps
            reading.stamp_ns = stamp + (spec.delay_steps * self.dt_ns if spec.stamp == "arrival" else 0)
            heapq.heappush(self._queue, (reading.publish_k, k, i, reading))
        return len(due)

    def _base_motion(self, model, q, v, a):
        """World pose, body twist and body acceleration of the base body (None when ``a`` is)."""
        T = np.empty((4, 4))
        _pose_matrix(*model.pose(q), T)
        if model.group is None:
            return T, np.zeros(6), None if a is None else np.zeros(6)
        nvb = model.tree.nvb
        H = self._H
        if H is not None:  # the SE(3) subgroups: V = H v, V̇ = H v̇
            return T, H @ v[:nvb], None if a is None else H @ a[:nvb]
        V = model.twist(q, v)  # SO(3)×R³: V = [Rᵀ ṗ; ω], V̇ = [Rᵀ p̈ − ω × Rᵀ ṗ; ω̇]
        if a is None:
            return T, V, None
        return T, V, np.concatenate([T[:3, :3].T @ a[:3] - _cross(V[3:], V[:3]), a[3:6]])

    def _body_motion(self, model, q, v, a, T0, V0, A0):
        """Every body's world pose, body twist and body acceleration (:func:`_tree_motion`; the full tree's
        coordinates for a model with mimic joints), the base's given."""
        mm = model.mimic_reduction
        if mm is not None:
            q, v, a = mm.q_full(q), mm.v_full(v), None if a is None else mm.v_full(a)
        nb = self._nb
        T, V, A = np.empty((nb, 4, 4)), np.empty((nb, 6)), np.zeros((nb, 6))
        T[0], V[0] = T0, V0
        if a is not None:
            A[0] = A0
        _tree_motion(*self._tree_args, np.asarray(q, dtype=float), np.asarray(v, dtype=float),
                     V[0] if a is None else np.asarray(a, dtype=float), a is not None, T, V, A)
        return T, V, A

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

    def set_current(self, current) -> None:
        """The water's current changed to ``current`` (3,) [m/s], world axes (the dynamics node's ``current``
        parameter): every sensor that measures relative to the water (a DVL's water track) uses it from its next
        sample on (``sensor_set.environment`` keeps the current the suite was built with)."""
        c = np.array(current, dtype=float).reshape(3)
        if not np.isfinite(c).all():
            raise ValueError("current must be 3 finite numbers [m/s]")
        for sensor in self.sensors:
            if hasattr(sensor, "set_current"):
                sensor.set_current(c)

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


@jit
def _tree_motion(parent, jtype, iq, iv, X0, PA, PA2, Pa, s_joint, q, v, a, has_acc, T, V, A):
    """Bodies' world poses T, body twists V and body accelerations A (body axes, [v; ω]) from the base's (row 0,
    filled by the caller), parents before children: ``T_k = T_p X_j(q)``, ``V_k = Ad_X⁻¹ V_p + s q̇``,
    ``A_k = Ad_X⁻¹ A_p + s q̈ + ad_{V_k}(s q̇)`` (Featherstone 2008 eqs. 5.7-5.8 in body-velocity form)."""
    X = np.empty((4, 4))
    x = np.empty(6)
    for k in range(1, parent.shape[0]):
        j = k - 1
        p = parent[k]
        for r in range(4):
            for c in range(4):
                X[r, c] = X0[j, r, c]
        if jtype[j] == 1:  # prismatic
            d = q[iq[j]]
            for r in range(3):
                X[r, 3] += d * Pa[j, r]
        else:
            if jtype[j] == 0:  # revolute
                th = q[iq[j]]
                s, c1 = math.sin(th), 1.0 - math.cos(th)
            else:  # continuous: (cos, sin)
                s, c1 = q[iq[j] + 1], 1.0 - q[iq[j]]
            for r in range(3):
                for c in range(3):
                    X[r, c] += s * PA[j, r, c] + c1 * PA2[j, r, c]
        for r in range(4):
            for c in range(4):
                acc = 0.0
                for m in range(4):
                    acc += T[p, r, m] * X[m, c]
                T[k, r, c] = acc
        qd = v[iv[j]]
        for i in range(6):
            x[i] = s_joint[j, i] * qd
        _ad_inv(X, V[p], V[k])
        for i in range(6):
            V[k, i] += x[i]
        if has_acc:
            _ad_inv(X, A[p], A[k])
            qdd = a[iv[j]]
            w0, w1, w2, u0, u1, u2 = V[k, 3], V[k, 4], V[k, 5], V[k, 0], V[k, 1], V[k, 2]
            A[k, 0] += s_joint[j, 0] * qdd + (w1 * x[2] - w2 * x[1]) + (u1 * x[5] - u2 * x[4])
            A[k, 1] += s_joint[j, 1] * qdd + (w2 * x[0] - w0 * x[2]) + (u2 * x[3] - u0 * x[5])
            A[k, 2] += s_joint[j, 2] * qdd + (w0 * x[1] - w1 * x[0]) + (u0 * x[4] - u1 * x[3])
            A[k, 3] += s_joint[j, 3] * qdd + (w1 * x[5] - w2 * x[4])
            A[k, 4] += s_joint[j, 4] * qdd + (w2 * x[3] - w0 * x[5])
            A[k, 5] += s_joint[j, 5] * qdd + (w0 * x[4] - w1 * x[3])


@jit
def _ad_inv(X, Y, out):
    """out = Ad_X⁻¹ Y = [Rᵀ(y_l − p × y_a); Rᵀ y_a] for the pose X = (R, p)."""
    l0 = Y[0] - (X[1, 3] * Y[5] - X[2, 3] * Y[4])
    l1 = Y[1] - (X[2, 3] * Y[3] - X[0, 3] * Y[5])
    l2 = Y[2] - (X[0, 3] * Y[4] - X[1, 3] * Y[3])
    for c in range(3):
        out[c] = X[0, c] * l0 + X[1, c] * l1 + X[2, c] * l2
        out[3 + c] = X[0, c] * Y[3] + X[1, c] * Y[4] + X[2, c] * Y[5]


@jit
def _pose_matrix(p, quat, out):
    """``out`` = the 4×4 pose of position p and quaternion xyzw (normalised here, as the base group does)."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    s = 2.0 / (x * x + y * y + z * z + w * w)
    out[0, 0], out[0, 1], out[0, 2] = 1.0 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)
    out[1, 0], out[1, 1], out[1, 2] = s * (x * y + z * w), 1.0 - s * (x * x + z * z), s * (y * z - x * w)
    out[2, 0], out[2, 1], out[2, 2] = s * (x * z - y * w), s * (y * z + x * w), 1.0 - s * (x * x + y * y)
    out[0, 3], out[1, 3], out[2, 3] = p[0], p[1], p[2]
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@jit
def _point_motion(T, V, A, M, has_acc, T_out, out):
    """The motion of a frame S fixed at pose ``M`` (4×4) on a frame F of world pose T, body twist V = [v; ω] and
    body acceleration A = [v̇; ω̇] (F axes): ``T_out = T M`` and the rows of ``out`` (4, 3) v_S, ω_S, a_S, α_S in S
    axes — ``Rᵀ(v + ω × r)``, ``Rᵀω``, ``Rᵀ(v̇ + ω × v + ω̇ × r + ω × (ω × r))``, ``Rᵀω̇`` with (R, r) = M (the last
    two only when ``has_acc``)."""
    for i in range(4):
        for j in range(4):
            acc = 0.0
            for k in range(4):
                acc += T[i, k] * M[k, j]
            T_out[i, j] = acc
    r0, r1, r2 = M[0, 3], M[1, 3], M[2, 3]
    v0, v1, v2, w0, w1, w2 = V[0], V[1], V[2], V[3], V[4], V[5]
    c0, c1, c2 = w1 * r2 - w2 * r1, w2 * r0 - w0 * r2, w0 * r1 - w1 * r0  # ω × r
    x = np.empty((4, 3))
    x[0, 0], x[0, 1], x[0, 2] = v0 + c0, v1 + c1, v2 + c2
    x[1, 0], x[1, 1], x[1, 2] = w0, w1, w2
    n = 2
    if has_acc:
        d0, d1, d2 = A[3], A[4], A[5]
        x[2, 0] = A[0] + (w1 * v2 - w2 * v1) + (d1 * r2 - d2 * r1) + (w1 * c2 - w2 * c1)
        x[2, 1] = A[1] + (w2 * v0 - w0 * v2) + (d2 * r0 - d0 * r2) + (w2 * c0 - w0 * c2)
        x[2, 2] = A[2] + (w0 * v1 - w1 * v0) + (d0 * r1 - d1 * r0) + (w0 * c1 - w1 * c0)
        x[3, 0], x[3, 1], x[3, 2] = d0, d1, d2
        n = 4
    for row in range(n):
        for j in range(3):
            out[row, j] = M[0, j] * x[row, 0] + M[1, j] * x[row, 1] + M[2, j] * x[row, 2]


class _Mount:
    """A sensor's pose ``T`` on the frame whose motion is given (its link, or its link's body) and the point
    kinematics that take that frame's motion to the sensor frame (:func:`_point_motion`)."""

    _NO_ACC = np.zeros(6)

    def __init__(self, T):
        self.T = np.ascontiguousarray(T, dtype=float)
        self.Rt = np.ascontiguousarray(self.T[:3, :3].T)
        self.r = self.T[:3, 3].copy()

    def frame(self, k, stamp, T, V, A) -> SensorFrame:
        """The :class:`SensorFrame` of the sensor on a frame of pose T, body twist V and body acceleration A."""
        T_out, out = np.empty((4, 4)), np.empty((4, 3))
        has_acc = A is not None
        _point_motion(np.ascontiguousarray(T), V, A if has_acc else self._NO_ACC, self.T, has_acc, T_out, out)
        frame = SensorFrame(k, stamp, T_out, out[0], out[1])
        if has_acc:
            frame.a, frame.alpha = out[2], out[3]
        return frame

    def wrench(self, W) -> np.ndarray:
        """A wrench ``[F; τ]`` at the frame's origin in its axes, moved to the sensor origin in sensor axes."""
        F, tau = W[:3], W[3:]
        return np.concatenate([self.Rt @ F, self.Rt @ (tau - _cross(self.r, F))])
