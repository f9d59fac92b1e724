"""The ``Model``: an immutable description of a rigid body (later: a multibody tree) on a Lie group.

Pinocchio's split: a :class:`Model` holds what does not change (group, inertia, gravity, cached constant
matrices); the algorithms are its methods and take ``(q, v, ...)`` explicitly, so one model serves any number of
states and threads.

Single rigid body, seed 004 (From, "Explicit singularity-free dynamic equations", part one):

* body twist ``V = B(q) v`` (linear first, body frame). For the subgroups of SE(3) ``B = H`` is constant (eqs. 58,
  60); for SO(3)×R³ the velocity is hybrid, ``v = [ṙ_world; ω_body]`` and ``B(q) = diag(Rᵀ, I)``.
* ``M(q) = Bᵀ I_b B`` with the spatial inertia ``I_b`` at the body origin (c.o.m. offset allowed).
* ``C(q, v) = Bᵀ (I_b Ḃ + ad~_{I_b V} B)``, which is eq. 57 (``C = Hᵀ ad~_{I_b H v} H``) when B is constant. It is
  skew-symmetric for the subgroups and makes ``Ṁ − 2C`` skew-symmetric in every case.
* ``M v̇ + C(q, v) v + g(q) = τ`` with ``τ = Bᵀ W`` collocated with v (power ``vᵀτ``) and ``g(q) = −Bᵀ W_gravity``.

Conventions (see README): configuration vectors in Pinocchio's layout, velocities body-frame quasi-velocities,
twists and wrenches linear first.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .lie import GROUPS, SE3, hat3
from .lie._base import LieGroup

__all__ = ["Model", "spatial_inertia", "BASES"]

#: Base groups a single rigid body can live on.
BASES = ("se3", "schoenflies", "se2", "so3", "so3xr3")

_ATOL_POSE = 1e-9


def spatial_inertia(mass: float, inertia_com: np.ndarray, com: np.ndarray) -> np.ndarray:
    """Spatial inertia at the body origin, linear first (seed 004 §2; Featherstone 2008 eq. 2.63).

    ``I_b = [[m·1, −m ĉ], [m ĉ, J_c − m ĉ²]]`` with ``J_c`` about the centre of mass and ``c`` the c.o.m. in the body
    frame, so that ``I_b V`` is ``[linear momentum; angular momentum about the body origin]`` in body axes.
    """
    c_hat = hat3(np.asarray(com, dtype=float))
    out = np.empty((6, 6))
    out[:3, :3] = mass * np.eye(3)
    out[:3, 3:] = -mass * c_hat
    out[3:, :3] = mass * c_hat
    out[3:, 3:] = np.asarray(inertia_com, dtype=float) - mass * (c_hat @ c_hat)
    return out


def _check_inertia(mass: float, inertia: np.ndarray) -> None:
    if not (np.isfinite(mass) and mass > 0.0):
        raise ValueError(f"mass must be a finite positive number, got {mass!r}")
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
        raise ValueError(f"inertia must be a finite 3x3 matrix, got shape {inertia.shape}")
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-12 * max(1.0, np.abs(inertia).max())):
        raise ValueError("inertia must be symmetric")
    eig = np.linalg.eigvalsh(inertia)
    if eig[0] <= 0.0:
        raise ValueError(f"inertia must be positive definite, its principal moments are {eig.tolist()}")
    a, b, c = eig
    if c > a + b + 1e-12 * c:
        # Physically impossible for a real body, but papers use such values (seed 002's balloon): warn only.
        warnings.warn(
            f"principal moments {eig.tolist()} violate the triangle inequality (no real body has them)",
            stacklevel=3,
        )


@dataclass(frozen=True, eq=False)
class Model:
    """Immutable rigid-body model on a base group; see the module docstring for the equations.

    Build it with :meth:`Model.rigid_body`. Attributes: ``base`` (group name), ``group`` (the Lie group), ``nq``,
    ``nv``, ``mass``, ``inertia`` (3×3 about the c.o.m.), ``com``, ``gravity`` (world frame, m/s²) and
    ``I_b`` (6×6 spatial inertia at the body origin).
    """

    base: str
    group: LieGroup
    mass: float
    inertia: np.ndarray
    com: np.ndarray
    gravity: np.ndarray
    I_b: np.ndarray = field(repr=False)
    _com_hat: np.ndarray = field(repr=False)
    _H: np.ndarray | None = field(repr=False)
    _M: np.ndarray | None = field(repr=False)
    _M_inv: np.ndarray | None = field(repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def rigid_body(
        cls,
        base: str = "se3",
        mass: float = 1.0,
        inertia=None,
        com=(0.0, 0.0, 0.0),
        gravity=(0.0, 0.0, -9.81),
    ) -> "Model":
        """One rigid body on ``base`` ∈ {se3, schoenflies, se2, so3, so3xr3}.

        ``inertia`` is the 3×3 inertia about the centre of mass in body axes and ``com`` the centre of mass in the
        body frame, as URDF gives them (default: unit-mass unit-inertia body). ``gravity`` is the world-frame
        acceleration of gravity. For ``so3`` the body rotates about its origin, fixed at the world origin.
        """
        if base not in BASES:
            raise ValueError(f"unknown base group {base!r}; choose one of {', '.join(BASES)}")
        mass = float(mass)
        inertia = np.eye(3) if inertia is None else np.array(inertia, dtype=float)
        if inertia.shape == (6,):
            ixx, ixy, ixz, iyy, iyz, izz = inertia
            inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        _check_inertia(mass, inertia)
        com = np.array(com, dtype=float).reshape(3)
        gravity = np.array(gravity, dtype=float).reshape(3)
        if not (np.all(np.isfinite(com)) and np.all(np.isfinite(gravity))):
            raise ValueError("com and gravity must be finite")
        group = GROUPS[base]
        I_b = spatial_inertia(mass, inertia, com)
        H = None if base == "so3xr3" else np.asarray(group.H, dtype=float)
        if H is not None:
            M = H.T @ I_b @ H
            M_inv = np.linalg.inv(M)
        else:
            M = M_inv = None
        com_hat = hat3(com)
        for a in (inertia, com, gravity, I_b, com_hat, H, M, M_inv):
            if a is not None:
                a.setflags(write=False)
        return cls(base, group, mass, inertia, com, gravity, I_b, com_hat, H, M, M_inv)

    @property
    def nq(self) -> int:
        return self.group.nq

    @property
    def nv(self) -> int:
        return self.group.dim

    def neutral(self) -> np.ndarray:
        """The identity configuration (Pinocchio's ``neutral``)."""
        return self.group.identity()

    # ------------------------------------------------------------------ kinematics
    def _rotation(self, q: np.ndarray) -> np.ndarray:
        return self.group.pose_matrix(q)[:3, :3]

    def velocity_map(self, q: np.ndarray) -> np.ndarray:
        """B(q), 6×nv: body twist ``V = B(q) v`` (``B = H`` for the subgroups of SE(3), seed 004 eq. 58)."""
        if self._H is not None:
            return self._H
        B = np.zeros((6, 6))
        B[:3, :3] = self._rotation(q).T
        B[3:, 3:] = np.eye(3)
        return B

    def _velocity_map_dot(self, q: np.ndarray, v: np.ndarray) -> np.ndarray | None:
        """Ḃ(q, v), or None where B is constant. SO(3)×R³: d/dt Rᵀ = −ω̂ Rᵀ."""
        if self._H is not None:
            return None
        Bd = np.zeros((6, 6))
        Bd[:3, :3] = -hat3(v[3:]) @ self._rotation(q).T
        return Bd

    def twist(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Body twist ``V = [v; ω]`` of the base (body frame, linear first)."""
        return self.velocity_map(q) @ v

    def velocity_from_twist(self, q: np.ndarray, V: np.ndarray) -> np.ndarray:
        """Quasi-velocity v with ``B(q) v = V``; ValueError if V has components the group cannot have."""
        V = np.asarray(V, dtype=float).reshape(6)
        B = self.velocity_map(q)
        v = np.linalg.lstsq(B, V, rcond=None)[0]
        residual = V - B @ v
        if np.abs(residual).max() > _ATOL_POSE * max(1.0, np.abs(V).max()):
            raise ValueError(
                f"twist {V.tolist()} has components a {self.base} body cannot have "
                f"(unreachable part {np.round(residual, 12).tolist()})"
            )
        return v

    def pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base pose in the world: ``(position (3,), quaternion [x, y, z, w])``."""
        q = np.asarray(q, dtype=float)
        if self.base in ("se3", "so3xr3"):
            return q[:3].copy(), q[3:7].copy()
        if self.base == "so3":
            return np.zeros(3), q[:4].copy()
        # se2 [x y c s], schoenflies [x y z c s]: yaw about z
        c, s = q[-2], q[-1]
        half = 0.5 * math.atan2(s, c)
        quat = np.array([0.0, 0.0, math.sin(half), math.cos(half)])
        pos = np.array([q[0], q[1], 0.0]) if self.base == "se2" else q[:3].copy()
        return pos, quat

    def configuration_from_pose(self, position, quaternion_xyzw) -> np.ndarray:
        """Configuration q of a base pose; ValueError with the reason if the pose is not on the group."""
        p = np.asarray(position, dtype=float).reshape(3)
        quat = np.asarray(quaternion_xyzw, dtype=float).reshape(4)
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(quat))):
            raise ValueError("pose must be finite")
        n = np.linalg.norm(quat)
        if n < 1e-12:
            raise ValueError("quaternion has zero norm")
        quat = quat / n
        if self.base in ("se3", "so3xr3"):
            return np.concatenate([p, quat])
        if self.base == "so3":
            if np.abs(p).max() > _ATOL_POSE:
                raise ValueError(f"a so3 body rotates about the world origin: position must be 0, got {p.tolist()}")
            return quat.copy()
        if abs(quat[0]) > _ATOL_POSE or abs(quat[1]) > _ATOL_POSE:
            raise ValueError(f"a {self.base} body only rotates about z: the orientation has roll or pitch")
        if self.base == "se2" and abs(p[2]) > _ATOL_POSE:
            raise ValueError(f"a se2 body moves in the plane z = 0, got z = {p[2]}")
        yaw = 2.0 * math.atan2(quat[2], quat[3])
        cs = [math.cos(yaw), math.sin(yaw)]
        return np.array([p[0], p[1], *cs]) if self.base == "se2" else np.array([*p, *cs])

    def integrate(self, q: np.ndarray, v: np.ndarray, dt: float = 1.0) -> np.ndarray:
        """``q · exp(v dt)``: configuration update by the exponential map (Pinocchio's ``integrate``)."""
        return self.group.integrate(q, np.asarray(v, dtype=float) * dt)

    def difference(self, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
        """``log(q0⁻¹ q1)``, the tangent vector taking q0 to q1 in unit time (Pinocchio's ``difference``)."""
        return self.group.log(self.group.compose(self.group.inverse(q0), q1))

    def dexp_inv(self, xi: np.ndarray) -> np.ndarray:
        """dexp⁻¹ of the configuration space (seed 001 eq. 10), used by the RKMK integrators."""
        return self.group.dexp_inv(xi)

    # ------------------------------------------------------------------ dynamics
    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) = Bᵀ I_b B (seed 004 eq. 60); constant for the subgroups of SE(3)."""
        if self._M is not None:
            return self._M.copy()
        B = self.velocity_map(q)
        return B.T @ self.I_b @ B

    def coriolis_matrix(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """C(q, v) = Bᵀ (I_b Ḃ + ad~_{I_b B v} B); seed 004 eq. 57 ``Hᵀ ad~_{I_b H v} H`` for constant B = H."""
        v = np.asarray(v, dtype=float)
        B = self.velocity_map(q)
        p = self.I_b @ (B @ v)
        C = B.T @ SE3.ad_tilde(p) @ B
        Bd = self._velocity_map_dot(q, v)
        if Bd is not None:
            C += B.T @ self.I_b @ Bd
        return C

    def _gravity_wrench(self, q: np.ndarray) -> np.ndarray:
        """Body-frame wrench of gravity at the body origin: ``[Rᵀ m g; c × Rᵀ m g]``."""
        F = self.mass * (self._rotation(q).T @ self.gravity)
        return np.concatenate([F, self._com_hat @ F])

    def gravity_forces(self, q: np.ndarray) -> np.ndarray:
        """g(q) = −Bᵀ W_gravity, the generalised gravity force on the left-hand side of the equations."""
        return -(self.velocity_map(q).T @ self._gravity_wrench(q))

    def nonlinear_effects(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """C(q, v) v + g(q): ``Bᵀ(I_b Ḃ v − ad_Vᵀ I_b V) + g`` (seed 004 eq. 76), ``−ad_Vᵀ p = ad~_p V``."""
        v = np.asarray(v, dtype=float)
        B = self.velocity_map(q)
        V = B @ v
        f = SE3.ad_tilde(self.I_b @ V) @ V
        Bd = self._velocity_map_dot(q, v)
        if Bd is not None:
            f += self.I_b @ (Bd @ v)
        return B.T @ (f - self._gravity_wrench(q))

    def forward_dynamics(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """v̇ = M⁻¹(τ − C v − g) (seed 004 eq. 48)."""
        rhs = np.asarray(tau, dtype=float) - self.nonlinear_effects(q, v)
        if self._M_inv is not None:
            return self._M_inv @ rhs
        return np.linalg.solve(self.mass_matrix(q), rhs)

    def inverse_dynamics(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """τ = M v̇ + C v + g."""
        return self.mass_matrix(q) @ np.asarray(a, dtype=float) + self.nonlinear_effects(q, v)

    # ------------------------------------------------------------------ wrenches, energy, momentum
    def wrench_to_generalized(self, q: np.ndarray, W: np.ndarray):
        """Generalised force of a body-frame wrench ``W = [F; τ]`` at the body origin: ``(τ = BᵀW, W_applied,
        W_dropped)``, where ``W_dropped`` holds the components the group cannot act on (taken by the constraint,
        e.g. a roll torque on se2) and ``W_applied = W − W_dropped``."""
        W = np.asarray(W, dtype=float).reshape(6)
        B = self.velocity_map(q)
        tau = B.T @ W
        if self._H is None:  # SO(3)×R³: B is invertible, every component acts
            return tau, W.copy(), np.zeros(6)
        applied = self._H @ tau  # H has orthonormal columns: H Hᵀ projects onto the subalgebra
        return tau, applied, W - applied

    def kinetic_energy(self, q: np.ndarray, v: np.ndarray) -> float:
        """½ vᵀ M v."""
        V = self.twist(q, v)
        return 0.5 * float(V @ self.I_b @ V)

    def potential_energy(self, q: np.ndarray) -> float:
        """−m gᵀ p_com, with p_com the world position of the centre of mass."""
        T = self.group.pose_matrix(q)
        p_com = T[:3, :3] @ self.com + T[:3, 3]
        return -self.mass * float(self.gravity @ p_com)

    def spatial_momentum(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """World-frame spatial momentum ``Ad_{g⁻¹}ᵀ I_b V``: ``[linear; angular about the world origin]``."""
        T = self.group.pose_matrix(q)
        R, p = T[:3, :3], T[:3, 3]
        h = self.I_b @ self.twist(q, v)
        lin = R @ h[:3]
        return np.concatenate([lin, R @ h[3:] + np.cross(p, lin)])

    def noether_momentum(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The momentum the group's symmetry conserves when no force acts: ``Hᵀ Ad_{g⁻¹}ᵀ I_b H v`` (all six
        components of the spatial momentum for se3 and so3xr3, whose physical symmetry is SE(3))."""
        h = self.spatial_momentum(q, v)
        return h if self._H is None else self._H.T @ h
