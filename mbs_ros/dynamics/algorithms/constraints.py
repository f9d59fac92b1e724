"""Constrained multibody systems: rigid bodies on SE(3) or SO(3)×R³ tied by joints, Munthe-Kaas integration of the
index-1 KKT system (Müller & Terze, seed 001).

Each body lives on its own configuration space, chosen per body:

* ``se3``: q = [r; quat] (Pinocchio layout), velocity the body twist ``V = [v; ω]`` (``v = Rᵀṙ``, linear first);
* ``so3xr3``: the same q, velocity hybrid ``[ṙ; ω]`` (ṙ in the world, ω in the body): the direct product group.

The system's configuration space is the product of the bodies' groups, itself a Lie group: its exponential map,
``integrate`` and ``dexp⁻¹`` act body by body, so the RKMK step of :mod:`mbs_ros.dynamics.simulation.integrators` integrates a
:class:`ConstrainedSystem` unchanged; its ``forward_dynamics`` is the solution of the KKT system

    [[M, Jᵀ], [J, 0]] (v̇, λ) = (τ − C v − g, η),   J v̇ = η = −J̇ v  (the acceleration constraints),

``M`` block-diagonal (each body's :class:`~mbs_ros.dynamics.Model` on its group), ``J`` the Jacobian of the joints'
position constraints ``g(q) = 0`` with respect to the bodies' velocity coordinates, ``−Jᵀλ`` the constraint forces.
Joints (:func:`spherical`, :func:`revolute`) tie a point of one body to a point of another or to a fixed point of
the world; a revolute joint adds two rows keeping the bodies' axes parallel.

By default nothing enforces ``g = 0`` beyond the acceleration level, as in the paper: drift is what its comparison
measures. ``stabilization="baumgarte"`` replaces η by ``η − 2α J v − β² g`` (Baumgarte 1972);
``stabilization="projection"`` projects q onto ``g = 0`` (Gauss–Newton in the M-metric along the group's
exponential) and v onto ``J v = 0`` after every step. :meth:`ConstrainedSystem.project_velocity` makes initial
velocities consistent (``J v = 0``), optionally keeping chosen components (e.g. given angular velocities).

Why SE(3) keeps ground joints exact (seed 001 §4): a body tied to the ground by a lower pair has body twists in a
fixed subalgebra; every RKMK stage and update then stays in the corresponding subgroup, to round-off, for any
tableau and step. On SO(3)×R³ the translation is integrated separately from the rotation, and the joint drifts
O(hᵖ).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from transforms3d.quaternions import mat2quat

from mbs_ros.dynamics.simulation.integrators import TABLEAUS, check_time_step, step as _mk_step
from mbs_ros.dynamics.lie import hat3
from mbs_ros.dynamics.model.model import Model

__all__ = ["SPACES", "Body", "Joint", "spherical", "revolute", "ConstrainedSystem"]

#: Configuration spaces a body of a :class:`ConstrainedSystem` can live on.
SPACES = ("se3", "so3xr3")
_NQ, _NV = 7, 6


@dataclass(frozen=True)
class Body:
    """A rigid body: ``mass``, ``inertia`` (3×3 about the c.o.m., body axes), ``com`` (c.o.m. in the body frame; the
    paper's bodies have their frame at the c.o.m.) and its configuration space ``space`` ∈ :data:`SPACES`."""

    name: str
    mass: float
    inertia: tuple
    com: tuple = (0.0, 0.0, 0.0)
    space: str = "se3"


@dataclass(frozen=True)
class Joint:
    """A joint between body ``a`` (index) and body ``b`` (index, or None for the ground).

    ``point_a``/``point_b``: the joint's centre in body a's / body b's frame (in the world frame when b is the
    ground). ``kind`` is ``"spherical"`` (3 rows: the points coincide) or ``"revolute"`` (5 rows: also ``axis_a``
    in body a stays parallel to ``axis_b`` in body b / the world)."""

    name: str
    kind: str
    a: int
    point_a: tuple
    b: int | None = None
    point_b: tuple = (0.0, 0.0, 0.0)
    axis_a: tuple | None = None
    axis_b: tuple | None = None

    @property
    def rows(self) -> int:
        return 3 if self.kind == "spherical" else 5


def spherical(name: str, a: int, point_a, b: int | None = None, point_b=(0.0, 0.0, 0.0)) -> Joint:
    """Spherical joint: point ``point_a`` of body ``a`` coincides with ``point_b`` of body ``b`` (world if None)."""
    return Joint(name, "spherical", int(a), _vec(point_a), None if b is None else int(b), _vec(point_b))


def revolute(name: str, a: int, point_a, axis_a, b: int | None = None, point_b=(0.0, 0.0, 0.0),
             axis_b=None) -> Joint:
    """Revolute joint: a spherical joint whose axis ``axis_a`` (body a) stays parallel to ``axis_b`` (body b, or
    the world; default ``axis_a``). The axes must be parallel in the initial configuration."""
    axis_a = _unit(axis_a)
    axis_b = axis_a if axis_b is None else _unit(axis_b)
    return Joint(name, "revolute", int(a), _vec(point_a), None if b is None else int(b), _vec(point_b),
                 axis_a, axis_b)


def _vec(x) -> tuple:
    x = np.asarray(x, dtype=float).reshape(3)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"joint point must be finite, got {x.tolist()}")
    return tuple(x.tolist())


def _unit(x) -> tuple:
    x = np.asarray(x, dtype=float).reshape(3)
    n = np.linalg.norm(x)
    if not np.isfinite(n) or n < 1e-12:
        raise ValueError(f"joint axis must be a finite non-zero vector, got {x.tolist()}")
    return tuple((x / n).tolist())


def _perpendicular_basis(n: np.ndarray) -> tuple:
    """Two unit vectors completing n to an orthonormal basis."""
    e = np.eye(3)[int(np.argmin(np.abs(n)))]
    t1 = np.cross(n, e)
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


def _cross(a, b) -> np.ndarray:
    """a × b of 3-vectors (np.cross costs ~15 µs per call on 3-vectors; this ~1 µs)."""
    a0, a1, a2 = a[0], a[1], a[2]
    b0, b1, b2 = b[0], b[1], b[2]
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def _quat_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w), normalised."""
    s = 2.0 / (x * x + y * y + z * z + w * w)
    return np.array([
        [1.0 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
        [s * (x * y + z * w), 1.0 - s * (x * x + z * z), s * (y * z - x * w)],
        [s * (x * z - y * w), s * (y * z + x * w), 1.0 - s * (x * x + y * y)]])


class ConstrainedSystem:
    """Bodies, joints and gravity; q is the bodies' configurations stacked (7 each), v their velocities (6 each).

    Duck-types the model interface of :mod:`mbs_ros.dynamics.simulation.integrators` (``nq``, ``nv``, ``integrate``,
    ``dexp_inv``, ``forward_dynamics``), so ``integrators.step``/``simulate`` apply directly (without the
    projection stabilisation, which :meth:`step`/:meth:`simulate` add).

    ``stabilization``: None (default, the paper's plain index-1 formulation), ``"baumgarte"`` (parameters
    ``baumgarte=(α, β)`` in 1/s) or ``"projection"`` (``projection_tol`` on ‖g‖).
    """

    def __init__(self, bodies, joints=(), gravity=(0.0, 0.0, -9.81), stabilization: str | None = None,
                 baumgarte=(10.0, 10.0), projection_tol: float = 1e-13):
        self.bodies = tuple(bodies)
        self.joints = tuple(joints)
        if not self.bodies:
            raise ValueError("a constrained system needs at least one body")
        if stabilization not in (None, "none", "baumgarte", "projection"):
            raise ValueError(f"unknown stabilization {stabilization!r}; choose none, baumgarte or projection")
        self.stabilization = None if stabilization == "none" else stabilization
        self.baumgarte = tuple(float(x) for x in baumgarte)
        self.projection_tol = float(projection_tol)
        self.gravity = np.array(gravity, dtype=float).reshape(3)
        for b in self.bodies:
            if b.space not in SPACES:
                raise ValueError(f"body {b.name!r}: unknown space {b.space!r}; choose one of {', '.join(SPACES)}")
        nb = len(self.bodies)
        for j in self.joints:
            if j.kind not in ("spherical", "revolute"):
                raise ValueError(f"joint {j.name!r}: unknown kind {j.kind!r}")
            if not 0 <= j.a < nb or (j.b is not None and not (0 <= j.b < nb and j.b != j.a)):
                raise ValueError(f"joint {j.name!r}: bodies {j.a}, {j.b} out of range or equal")
        self.models = tuple(Model.rigid_body(b.space, mass=b.mass, inertia=b.inertia, com=b.com,
                                             gravity=self.gravity) for b in self.bodies)
        self._se3 = tuple(b.space == "se3" for b in self.bodies)
        self._perp = tuple(None if j.kind != "revolute" else _perpendicular_basis(np.array(j.axis_b))
                           for j in self.joints)
        self.nq = _NQ * nb
        self.nv = _NV * nb
        self.nc = sum(j.rows for j in self.joints)

    # ------------------------------------------------------------------ configuration space (product group)
    def neutral(self) -> np.ndarray:
        return np.concatenate([m.neutral() for m in self.models])

    def configuration(self, poses) -> np.ndarray:
        """q from one ``(position (3,), rotation (3, 3))`` pair per body."""
        out = []
        for p, R in poses:
            w, x, y, z = mat2quat(np.asarray(R, dtype=float))
            out.append(np.array([*np.asarray(p, dtype=float).reshape(3), x, y, z, w]))
        return np.concatenate(out)

    def velocity_from_twists(self, q, twists) -> np.ndarray:
        """v from one body twist ``[v_body; ω_body]`` (linear first) per body."""
        return np.concatenate([m.velocity_from_twist(q[_NQ * i: _NQ * i + _NQ], V)
                               for i, (m, V) in enumerate(zip(self.models, twists))])

    def poses(self, q) -> list:
        """``[(R (3, 3), r (3,)), ...]``: each body's rotation and frame origin in the world."""
        q = np.asarray(q, dtype=float)
        out = []
        for i in range(len(self.bodies)):
            x, y, z, qx, qy, qz, qw = q[_NQ * i: _NQ * i + _NQ].tolist()
            out.append((_quat_matrix(qx, qy, qz, qw), np.array([x, y, z])))
        return out

    def integrate(self, q, xi, dt: float = 1.0) -> np.ndarray:
        """Body by body ``q_i · exp(ξ_i dt)`` (each body's group)."""
        q = np.asarray(q, dtype=float)
        xi = np.asarray(xi, dtype=float) * dt
        return np.concatenate([m.group.integrate(q[_NQ * i: _NQ * i + _NQ], xi[_NV * i: _NV * i + _NV])
                               for i, m in enumerate(self.models)])

    def dexp_inv(self, xi) -> np.ndarray:
        """Block-diagonal dexp⁻¹ of the product group."""
        xi = np.asarray(xi, dtype=float)
        out = np.zeros((self.nv, self.nv))
        for i, m in enumerate(self.models):
            s = slice(_NV * i, _NV * i + _NV)
            out[s, s] = m.group.dexp_inv(xi[s])
        return out

    # ------------------------------------------------------------------ constraints
    def _point_terms(self, i, R, s, omega, v_lin):
        """For the point s (body frame) of body i: its world velocity Jacobian (3, 6) and the velocity-product
        part of its acceleration (``p̈ = J v̇ + bias``)."""
        Jp = np.empty((3, 6))
        ws = _cross(omega, s)
        if self._se3[i]:  # ṗ = R (v + ω × s)
            Jp[:, :3] = R
            Jp[:, 3:] = -R @ hat3(s)
            bias = R @ _cross(omega, v_lin + ws)
        else:  # ṗ = ṙ + R (ω × s)
            Jp[:, :3] = np.eye(3)
            Jp[:, 3:] = -R @ hat3(s)
            bias = R @ _cross(omega, ws)
        return Jp, bias

    def constraint(self, q) -> np.ndarray:
        """g(q) (nc,): per joint the point mismatch ``p_a − p_b`` (world, m), then for a revolute joint the two
        components of body a's axis across body b's (``u_a · t_b,k``)."""
        poses = self.poses(q)
        out = []
        for j, perp in zip(self.joints, self._perp):
            Ra, ra = poses[j.a]
            pa = ra + Ra @ np.array(j.point_a)
            if j.b is None:
                Rb, pb = np.eye(3), np.array(j.point_b)
            else:
                Rb, rb = poses[j.b]
                pb = rb + Rb @ np.array(j.point_b)
            out.append(pa - pb)
            if perp is not None:
                u = Ra @ np.array(j.axis_a)
                out.append(np.array([u @ (Rb @ perp[0]), u @ (Rb @ perp[1])]))
        return np.concatenate(out) if out else np.zeros(0)

    def jacobian(self, q, v=None):
        """J (nc, nv) with ``ġ = J v``; with v also ``η = −J̇ v`` (the right-hand side of ``J v̇ = η``):
        returns J, or (J, η)."""
        q = np.asarray(q, dtype=float)
        poses = self.poses(q)
        J = np.zeros((self.nc, self.nv))
        eta = np.zeros(self.nc) if v is not None else None
        if v is not None:
            v = np.asarray(v, dtype=float)
        row = 0
        for j, perp in zip(self.joints, self._perp):
            ends = [(j.a, np.array(j.point_a), 1.0)]
            if j.b is not None:
                ends.append((j.b, np.array(j.point_b), -1.0))
            for i, s, sign in ends:
                R = poses[i][0]
                om = v[_NV * i + 3: _NV * i + 6] if v is not None else np.zeros(3)
                vl = v[_NV * i: _NV * i + 3] if v is not None else np.zeros(3)
                Jp, bias = self._point_terms(i, R, s, om, vl)
                J[row: row + 3, _NV * i: _NV * i + 6] = sign * Jp
                if v is not None:
                    eta[row: row + 3] -= sign * bias
            if perp is not None:
                Ra = poses[j.a][0]
                u = Ra @ np.array(j.axis_a)
                Om_a = Ra @ v[_NV * j.a + 3: _NV * j.a + 6] if v is not None else np.zeros(3)
                if j.b is None:
                    Rb, Om_b = np.eye(3), np.zeros(3)
                else:
                    Rb = poses[j.b][0]
                    Om_b = Rb @ v[_NV * j.b + 3: _NV * j.b + 6] if v is not None else np.zeros(3)
                for k in range(2):
                    w = Rb @ perp[k]
                    c = _cross(u, w)  # d/dt (u·w) = c · (Ω_a − Ω_b)
                    r = row + 3 + k
                    J[r, _NV * j.a + 3: _NV * j.a + 6] = c @ Ra
                    if j.b is not None:
                        J[r, _NV * j.b + 3: _NV * j.b + 6] = -(c @ Rb)
                    if v is not None:
                        c_dot = _cross(_cross(Om_a, u), w) + _cross(u, _cross(Om_b, w))
                        eta[r] = -c_dot @ (Om_a - Om_b)
            row += j.rows
        return J if v is None else (J, eta)

    def violations(self, q) -> np.ndarray:
        """(n_joints,) position violation of each joint, ‖p_a − p_b‖ (m)."""
        g = self.constraint(q)
        out, row = [], 0
        for j in self.joints:
            out.append(float(np.linalg.norm(g[row: row + 3])))
            row += j.rows
        return np.array(out)

    def angle_violations(self, q) -> np.ndarray:
        """(n_joints,) angle between a revolute joint's two axes (rad); 0 for spherical joints."""
        poses = self.poses(q)
        out = []
        for j in self.joints:
            if j.kind != "revolute":
                out.append(0.0)
                continue
            u = poses[j.a][0] @ np.array(j.axis_a)
            w = np.array(j.axis_b) if j.b is None else poses[j.b][0] @ np.array(j.axis_b)
            out.append(float(np.arctan2(np.linalg.norm(_cross(u, w)), u @ w)))
        return np.array(out)

    # ------------------------------------------------------------------ dynamics
    def mass_matrix(self, q) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        M = np.zeros((self.nv, self.nv))
        for i, m in enumerate(self.models):
            s = slice(_NV * i, _NV * i + _NV)
            M[s, s] = m.mass_matrix(q[_NQ * i: _NQ * i + _NQ])
        return M

    def nonlinear_effects(self, q, v) -> np.ndarray:
        """C v + g (gravity) of the free bodies, stacked."""
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        return np.concatenate([m.nonlinear_effects(q[_NQ * i: _NQ * i + _NQ], v[_NV * i: _NV * i + _NV])
                               for i, m in enumerate(self.models)])

    def wrench_to_generalized(self, q, body: int, W) -> np.ndarray:
        """(nv,) generalised force of a wrench ``W = [F; τ]`` on ``body`` in its frame at its origin."""
        tau = np.zeros(self.nv)
        m = self.models[body]
        tau[_NV * body: _NV * body + _NV] = m.wrench_to_generalized(q[_NQ * body: _NQ * body + _NQ], W)[0]
        return tau

    def kkt(self, q, v, tau=None):
        """Solve ``[[M, Jᵀ], [J, 0]] (v̇, λ) = (τ − C v − g, η)``; returns ``(v̇, λ)``. The constraint force on the
        bodies is ``−Jᵀλ`` (for a spherical joint, −λ is the force on body a in world axes)."""
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        Q = -self.nonlinear_effects(q, v)
        if tau is not None:
            Q = Q + np.asarray(tau, dtype=float)
        if self.nc == 0:
            return np.linalg.solve(self.mass_matrix(q), Q), np.zeros(0)
        J, eta = self.jacobian(q, v)
        if self.stabilization == "baumgarte":
            alpha, beta = self.baumgarte
            eta = eta - 2.0 * alpha * (J @ v) - beta * beta * self.constraint(q)
        n = self.nv
        K = np.zeros((n + self.nc, n + self.nc))
        K[:n, :n] = self.mass_matrix(q)
        K[:n, n:] = J.T
        K[n:, :n] = J
        x = np.linalg.solve(K, np.concatenate([Q, eta]))
        return x[:n], x[n:]

    def forward_dynamics(self, q, v, tau=None) -> np.ndarray:
        """v̇ of the KKT system (the integrators' interface)."""
        return self.kkt(q, v, tau)[0]

    def project_velocity(self, q, v, keep=None) -> np.ndarray:
        """The velocity closest to v in the kinetic-energy metric with ``J v = 0``, changing only the components
        not marked in ``keep`` ((nv,) bool). E.g. keep the angular velocities and solve for the linear ones
        (for the paper's examples this gives exactly the consistent linear velocities it states)."""
        v = np.asarray(v, dtype=float).copy()
        if self.nc == 0:
            return v
        J = self.jacobian(q)
        M = self.mass_matrix(q)
        free = np.ones(self.nv, dtype=bool) if keep is None else ~np.asarray(keep, dtype=bool).reshape(self.nv)
        Jf = J[:, free]
        Mf = M[np.ix_(free, free)]
        r = J @ v  # J_f δ = −r, min ½ δᵀ M_f δ
        Y = np.linalg.solve(Mf, Jf.T)
        lam = np.linalg.lstsq(Jf @ Y, r, rcond=None)[0]
        v[free] -= Y @ lam
        residual = np.abs(J @ v).max()
        if residual > 1e-9 * max(1.0, np.abs(v).max()):
            raise ValueError(f"cannot make the velocity consistent with the free components given "
                             f"(residual {residual:.3g})")
        return v

    def project_configuration(self, q, max_iter: int = 20) -> np.ndarray:
        """Gauss–Newton onto g(q) = 0 in the M-metric: ``q ← q · exp(−M⁻¹Jᵀ(J M⁻¹Jᵀ)⁻¹ g)`` until
        ‖g‖∞ < ``projection_tol``."""
        q = np.asarray(q, dtype=float)
        for _ in range(max_iter):
            g = self.constraint(q)
            if g.size == 0 or np.abs(g).max() < self.projection_tol:
                break
            J = self.jacobian(q)
            Y = np.linalg.solve(self.mass_matrix(q), J.T)
            q = self.integrate(q, -Y @ np.linalg.lstsq(J @ Y, g, rcond=None)[0])
        return q

    def step(self, q, v, tau, dt: float, method: str = "rk4", t: float = 0.0):
        """One Munthe-Kaas step of the KKT system (see :func:`mbs_ros.dynamics.simulation.integrators.step`), then the
        projection if ``stabilization == "projection"``."""
        q, v = _mk_step(self, q, v, tau, dt, method=method, t=t)
        if self.stabilization == "projection":
            q = self.project_configuration(q)
            v = self.project_velocity(q, v)
        return q, v

    def simulate(self, q0, v0, tau, dt: float, steps: int, method: str = "rk4", t0: float = 0.0,
                 stop_on_divergence: bool = False):
        """``steps`` steps from (q0, v0): ``(t, q, v)`` as :func:`mbs_ros.dynamics.simulate`. ``tau`` is None, a
        constant (nv,) generalised force or a function ``tau(t, q, v)``.

        When the state stops being finite (an explicit method past its stability limit), FloatingPointError is
        raised, or with ``stop_on_divergence`` the arrays end at the last finite state."""
        if method not in TABLEAUS:
            raise ValueError(f"unknown integrator {method!r}; choose one of {', '.join(TABLEAUS)}")
        if tau is None:
            tau = np.zeros(self.nv)
        dt = check_time_step(dt)
        steps = int(steps)
        t = t0 + dt * np.arange(steps + 1)
        qs = np.empty((steps + 1, self.nq))
        vs = np.empty((steps + 1, self.nv))
        q = np.asarray(q0, dtype=float).copy()
        v = np.asarray(v0, dtype=float).copy()
        qs[0], vs[0] = q, v
        for k in range(steps):
            error = None
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    q, v = self.step(q, v, tau, dt, method=method, t=t[k])
                finite = bool(np.isfinite(q).all() and np.isfinite(v).all())
            except (ValueError, OverflowError, np.linalg.LinAlgError) as exc:  # math.sin(inf), singular KKT
                finite, error = False, exc
            if not finite:
                if stop_on_divergence:
                    return t[: k + 1], qs[: k + 1], vs[: k + 1]
                raise FloatingPointError(f"the integration diverged at t = {t[k + 1]:g} s (step {k + 1}, "
                                         f"{method}, dt = {dt:g})") from error
            qs[k + 1], vs[k + 1] = q, v
        return t, qs, vs

    # ------------------------------------------------------------------ energy, momentum
    def kinetic_energy(self, q, v) -> float:
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        return sum(m.kinetic_energy(q[_NQ * i: _NQ * i + _NQ], v[_NV * i: _NV * i + _NV])
                   for i, m in enumerate(self.models))

    def potential_energy(self, q) -> float:
        q = np.asarray(q, dtype=float)
        return sum(m.potential_energy(q[_NQ * i: _NQ * i + _NQ]) for i, m in enumerate(self.models))

    def energy(self, q, v) -> float:
        return self.kinetic_energy(q, v) + self.potential_energy(q)

    def spatial_momentum(self, q, v) -> np.ndarray:
        """World-frame ``[linear; angular about the world origin]`` momentum of all bodies."""
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        return sum(m.spatial_momentum(q[_NQ * i: _NQ * i + _NQ], v[_NV * i: _NV * i + _NV])
                   for i, m in enumerate(self.models))
