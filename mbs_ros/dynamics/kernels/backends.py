"""The computations behind :class:`~mbs_ros.dynamics.Model`: one backend per model, chosen once when it is built.

A backend implements the :class:`Backend` protocol; every method takes the model first (its public attributes:
``tree``, ``group``, ``gravity``, ``I_b``, ``passive``, ...) and owns whatever else it needs. Four kinds:

* :class:`TreeBackend`: the numpy reference of a multibody tree (:mod:`mbs_ros.dynamics.algorithms.multibody`,
  :mod:`mbs_ros.dynamics.model.passive`);
* :class:`RigidBodyBackend`: one rigid body on its base group, seed 004's closed forms (eqs. 57, 58, 60, 76);
* :class:`CompiledTreeBackend`, :class:`CompiledRigidBodyBackend`: the same with the numba kernels of
  :mod:`mbs_ros.dynamics.kernels.compiled` (:attr:`fast_step`, :attr:`fast_simulate`: the whole Munthe-Kaas step);
* :class:`MimicBackend`: the reduced coordinates of :mod:`mbs_ros.dynamics.model.mimic` over a full model (whose own
  backend computes).

:func:`select` picks one for a tree (compiled where numba is available and ``MBS_BACKEND`` is not ``numpy``).
"""
from __future__ import annotations

import copy
from typing import Protocol

import numpy as np

from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.kernels.compiled import SingularMassMatrix, compile_model
from mbs_ros.dynamics.algorithms.derivatives import checked_state, tree_rnea_derivatives
from mbs_ros.dynamics.lie import SE3, hat3
from mbs_ros.dynamics.model.passive import buoyancy_energy, passive_terms, spring_energy

__all__ = ["Backend", "TreeBackend", "RigidBodyBackend", "CompiledTreeBackend", "CompiledRigidBodyBackend",
           "MimicBackend", "select"]


class Backend(Protocol):
    """What :class:`~mbs_ros.dynamics.Model` delegates to (its methods of the same names document them)."""

    name: str  #: ``"numpy"`` or ``"compiled"``
    mimic: object  #: the :class:`~mbs_ros.dynamics.model.mimic.Mimic` reduction, or None
    fast_step: object  #: the compiled Munthe-Kaas step ``(q, v, tau, dt, method, wrench_world)``, or None
    fast_simulate: object  #: the compiled loop ``(q0, v0, tau, dt, steps, method)``, or None
    fast_advance: object  #: the compiled loop that stops out of bounds (``CompiledModel.advance``), or None

    def nq(self, m) -> int: ...
    def nv(self, m) -> int: ...
    def joint_names(self, m) -> tuple: ...
    def joint_types(self, m) -> tuple: ...
    def neutral(self, m) -> np.ndarray: ...
    def random_configuration(self, m, rng, joint_range) -> np.ndarray: ...
    def integrate(self, m, q, v, dt) -> np.ndarray: ...
    def difference(self, m, q0, q1) -> np.ndarray: ...
    def dexp_inv(self, m, xi) -> np.ndarray: ...
    def link_poses(self, m, q) -> np.ndarray: ...
    def mass_matrix(self, m, q) -> np.ndarray: ...
    def coriolis_matrix(self, m, q, v) -> np.ndarray: ...
    def gravity_forces(self, m, q) -> np.ndarray: ...
    def nonlinear_effects(self, m, q, v) -> np.ndarray: ...
    def forward_dynamics(self, m, q, v, tau, f_ext=None) -> np.ndarray: ...
    def inverse_dynamics(self, m, q, v, a, f_ext=None) -> np.ndarray: ...
    def joint_wrenches(self, m, q, v, a, tau=None, f_ext=None) -> np.ndarray: ...
    def rnea_derivatives(self, m, q, v, a, f_ext=None) -> tuple: ...
    def aba_derivatives(self, m, q, v, tau, f_ext=None) -> tuple: ...
    def all_terms(self, m, q, v) -> tuple: ...
    def passive_terms(self, m, q, v, springs=True) -> tuple: ...
    def kinetic_energy(self, m, q, v) -> float: ...
    def potential_energy(self, m, q) -> float: ...
    def gravity_energy(self, m, q) -> float: ...
    def spatial_momentum(self, m, q, v) -> np.ndarray: ...
    def with_current(self, passive) -> "Backend": ...


class TreeBackend:
    """The numpy reference of a multibody tree (fixed or floating base)."""

    name = "numpy"
    mimic = None
    fast_step = None
    fast_simulate = None
    fast_advance = None

    # ------------------------------------------------------------------ configuration space
    def nq(self, m) -> int:
        return m.tree.nq

    def nv(self, m) -> int:
        return m.tree.nv

    def joint_names(self, m) -> tuple:
        return m.tree.joint_names

    def joint_types(self, m) -> tuple:
        return m.tree.joint_types

    def neutral(self, m) -> np.ndarray:
        tree = m.tree
        q = np.zeros(tree.nq)
        if tree.nqb:
            q[: tree.nqb] = m.group.identity()
        q[tree.q_cont] = 1.0
        return q

    def random_configuration(self, m, rng, joint_range) -> np.ndarray:
        tree = m.tree
        q = m.neutral()
        if tree.nqb:
            q[: tree.nqb] = m.group.random(rng)
        th = rng.uniform(-joint_range, joint_range, size=tree.nj)
        lin = np.concatenate([tree.rev, tree.pris]).astype(int)
        q[tree.iq[lin]] = th[lin]
        q[tree.q_cont] = np.cos(th[tree.cont])
        q[tree.q_cont + 1] = np.sin(th[tree.cont])
        return q

    def integrate(self, m, q, v, dt) -> np.ndarray:
        tree = m.tree
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float) * dt
        out = q.copy()
        if tree.nqb:
            out[: tree.nqb] = m.group.integrate(q[: tree.nqb], v[: tree.nvb])
        lin = tree.q_lin
        out[lin] += v[tree.v_lin]
        if tree.cont.size:
            d = v[tree.iv[tree.cont]]
            c, s = q[tree.q_cont], q[tree.q_cont + 1]
            cd, sd = np.cos(d), np.sin(d)
            c2, s2 = c * cd - s * sd, s * cd + c * sd
            n = np.hypot(c2, s2)
            out[tree.q_cont], out[tree.q_cont + 1] = c2 / n, s2 / n
        return out

    def difference(self, m, q0, q1) -> np.ndarray:
        tree = m.tree
        q0 = np.asarray(q0, dtype=float)
        q1 = np.asarray(q1, dtype=float)
        d = np.zeros(tree.nv)
        if tree.nqb:
            g = m.group
            d[: tree.nvb] = g.log(g.compose(g.inverse(q0[: tree.nqb]), q1[: tree.nqb]))
        d[tree.v_lin] = q1[tree.q_lin] - q0[tree.q_lin]
        if tree.cont.size:
            c0, s0 = q0[tree.q_cont], q0[tree.q_cont + 1]
            c1, s1 = q1[tree.q_cont], q1[tree.q_cont + 1]
            d[tree.iv[tree.cont]] = np.arctan2(c0 * s1 - s0 * c1, c0 * c1 + s0 * s1)
        return d

    def dexp_inv(self, m, xi) -> np.ndarray:
        tree = m.tree
        out = np.eye(tree.nv)
        if tree.nvb:
            out[: tree.nvb, : tree.nvb] = m.group.dexp_inv(np.asarray(xi, dtype=float)[: tree.nvb])
        return out

    def link_poses(self, m, q) -> np.ndarray:
        return alg.link_poses(m, q)

    # ------------------------------------------------------------------ dynamics
    def mass_matrix(self, m, q) -> np.ndarray:
        return alg.crba(m, q)

    def coriolis_matrix(self, m, q, v) -> np.ndarray:
        return alg.coriolis_matrix(m, q, v)

    def gravity_forces(self, m, q) -> np.ndarray:
        return alg.gravity_forces(m, q)

    def nonlinear_effects(self, m, q, v) -> np.ndarray:
        return alg.nonlinear_effects(m, q, v)

    def forward_dynamics(self, m, q, v, tau, f_ext=None) -> np.ndarray:
        if f_ext is not None:
            return _solve_with_f_ext(m, q, v, tau, f_ext)
        try:
            return alg.forward_dynamics(m, q, v, tau)
        except np.linalg.LinAlgError:
            raise SingularMassMatrix(_SINGULAR) from None

    def inverse_dynamics(self, m, q, v, a, f_ext=None) -> np.ndarray:
        return alg.rnea(m, q, v, a, f_ext=f_ext)

    def joint_wrenches(self, m, q, v, a, tau=None, f_ext=None) -> np.ndarray:
        return alg.joint_wrenches(m, q, v, a, tau=tau, f_ext=f_ext)

    def rnea_derivatives(self, m, q, v, a, f_ext=None) -> tuple:
        return tree_rnea_derivatives(m, *checked_state(m, q, v, a, "a", f_ext))

    def aba_derivatives(self, m, q, v, tau, f_ext=None) -> tuple:
        return _aba_derivatives(m, *checked_state(m, q, v, tau, "tau", f_ext))

    def all_terms(self, m, q, v) -> tuple:
        return m.mass_matrix(q), m.nonlinear_effects(q, v), m.gravity_forces(q)

    def passive_terms(self, m, q, v, springs=True) -> tuple:
        if not m.passive_active:
            return np.zeros(m.nv), 0.0
        return passive_terms(m, q, v, springs)

    # ------------------------------------------------------------------ energy, momentum
    def kinetic_energy(self, m, q, v) -> float:
        return alg.kinetic_energy(m, q, v)

    def potential_energy(self, m, q) -> float:
        if m.passive is None:
            return self.gravity_energy(m, q)
        return self.gravity_energy(m, q) + buoyancy_energy(m, q) + spring_energy(m, q)

    def gravity_energy(self, m, q) -> float:
        return alg.potential_energy(m, q)

    def spatial_momentum(self, m, q, v) -> np.ndarray:
        return alg.spatial_momentum(m, q, v)

    def with_current(self, passive) -> "Backend":
        return self


def _aba_derivatives(m, q, v, tau, f_ext) -> tuple:
    """``(∂a/∂q, ∂a/∂v, M⁻¹)`` of ``a = FD(q, v, τ)``: ``−M⁻¹ ∂ID/∂x`` at that a (differentiating ``ID(q, v, FD) =
    τ``; Carpentier & Mansard 2018), by the model's own ``rnea_derivatives``."""
    a = m.forward_dynamics(q, v, tau, f_ext)
    dq, dv, M = m.rnea_derivatives(q, v, a, f_ext)
    try:
        Minv = np.linalg.inv(M)
    except np.linalg.LinAlgError:
        raise SingularMassMatrix(_SINGULAR) from None
    return -Minv @ dq, -Minv @ dv, Minv


def _solve_with_f_ext(m, q, v, tau, f_ext) -> np.ndarray:
    """``M v̇ = τ − RNEA(q, v, 0, f_ext)``, the numpy reference's forward dynamics under external wrenches."""
    rhs = np.asarray(tau, dtype=float) - alg.rnea(m, q, v, np.zeros(m.nv), f_ext=f_ext)
    return _solve(m.mass_matrix(q), rhs)


def _solve(M, rhs) -> np.ndarray:
    """``M⁻¹ rhs``; :class:`~mbs_ros.dynamics.kernels.compiled.SingularMassMatrix` (as the compiled forward dynamics) where M is singular."""
    try:
        return np.linalg.solve(M, rhs)
    except np.linalg.LinAlgError:
        raise SingularMassMatrix(_SINGULAR) from None


_SINGULAR = ("the joint-space mass matrix is singular at this configuration; no acceleration is defined: start from, "
             "or reset to, another pose")


class RigidBodyBackend(TreeBackend):
    """One rigid body on its base group (seed 004): ``V = B(q) v``, ``M = Bᵀ I_b B`` (eq. 60, constant on the
    subgroups of SE(3), ``B = H``), ``C = Bᵀ(I_b Ḃ + ad~_{I_b V} B)`` (eq. 57), ``C v + g = Bᵀ(I_b Ḃ v − ad_Vᵀ I_b V)
    + g`` (eq. 76), ``g = −Bᵀ W_gravity``."""

    def __init__(self, I_b, H, com):
        M = M_inv = None
        if H is not None:
            M = H.T @ I_b @ H
            if np.linalg.matrix_rank(M) == M.shape[0]:
                M_inv = np.linalg.inv(M)
        com_hat = hat3(com)
        for a in (M, M_inv, com_hat):
            if a is not None:
                a.setflags(write=False)
        self.M, self.M_inv, self.com_hat = M, M_inv, com_hat

    def neutral(self, m) -> np.ndarray:
        return m.group.identity()

    def integrate(self, m, q, v, dt) -> np.ndarray:
        return m.group.integrate(q, np.asarray(v, dtype=float) * dt)

    def difference(self, m, q0, q1) -> np.ndarray:
        g = m.group
        return g.log(g.compose(g.inverse(q0), q1))

    def dexp_inv(self, m, xi) -> np.ndarray:
        return m.group.dexp_inv(xi)

    def _velocity_map_dot(self, m, q, v) -> np.ndarray | None:
        """Ḃ(q, v), or None where B is constant. SO(3)×R³: d/dt Rᵀ = −ω̂ Rᵀ."""
        if self.M is not None:
            return None
        Bd = np.zeros((6, 6))
        Bd[:3, :3] = -hat3(v[3:6]) @ m.base_rotation(q).T
        return Bd

    def _gravity_wrench(self, m, q) -> np.ndarray:
        """Body-frame wrench of gravity (and buoyancy) at the body origin: ``[Rᵀ m g; c × Rᵀ m g]`` minus
        ``[ρ∇ Rᵀg; c_b × ρ∇ Rᵀg]``."""
        g_b = m.base_rotation(q).T @ m.gravity
        F = m.mass * g_b
        W = np.concatenate([F, self.com_hat @ F])
        P = m.passive
        if P is not None and P.displaced[0]:
            W[:3] -= P.displaced[0] * g_b
            W[3:] -= np.cross(P.displaced_moment[0], g_b)
        return W

    def mass_matrix(self, m, q) -> np.ndarray:
        if self.M is not None:  # constant: q may be None
            return self.M.copy()
        B = m.velocity_map(q)
        return B.T @ m.I_b @ B

    def coriolis_matrix(self, m, q, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        B = m.velocity_map(q)
        p = m.I_b @ (B @ v)
        C = B.T @ SE3.ad_tilde(p) @ B
        Bd = self._velocity_map_dot(m, q, v)
        if Bd is not None:
            C += B.T @ m.I_b @ Bd
        return C

    def gravity_forces(self, m, q) -> np.ndarray:
        return -(m.velocity_map(q).T @ self._gravity_wrench(m, q))

    def nonlinear_effects(self, m, q, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        B = m.velocity_map(q)
        V = B @ v
        f = SE3.ad_tilde(m.I_b @ V) @ V
        Bd = self._velocity_map_dot(m, q, v)
        if Bd is not None:
            f += m.I_b @ (Bd @ v)
        return B.T @ (f - self._gravity_wrench(m, q))

    def forward_dynamics(self, m, q, v, tau, f_ext=None) -> np.ndarray:
        if f_ext is not None:
            return _solve_with_f_ext(m, q, v, tau, f_ext)
        rhs = np.asarray(tau, dtype=float) - m.nonlinear_effects(q, v)
        if self.M_inv is not None:
            return self.M_inv @ rhs
        return np.linalg.solve(m.mass_matrix(q), rhs)

    def inverse_dynamics(self, m, q, v, a, f_ext=None) -> np.ndarray:
        if f_ext is not None:
            return alg.rnea(m, q, v, a, f_ext=f_ext)
        return m.mass_matrix(q) @ np.asarray(a, dtype=float) + m.nonlinear_effects(q, v)

    def kinetic_energy(self, m, q, v) -> float:
        V = m.twist(q, v)
        return 0.5 * float(V @ m.I_b @ V)

    def gravity_energy(self, m, q) -> float:
        T = m.group.pose_matrix(q)
        p_com = T[:3, :3] @ m.com + T[:3, 3]
        return -m.mass * float(m.gravity @ p_com)

    def spatial_momentum(self, m, q, v) -> np.ndarray:
        T = m.group.pose_matrix(q)
        R, p = T[:3, :3], T[:3, 3]
        h = m.I_b @ m.twist(q, v)
        lin = R @ h[:3]
        return np.concatenate([lin, R @ h[3:] + np.cross(p, lin)])


class _CompiledKernels:
    """The dynamics by :class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel` (placed before a numpy backend in the
    bases, which keeps the configuration space and the energies)."""

    name = "compiled"

    def __init__(self, compiled):
        self.compiled = compiled
        self.fast_step = compiled.step
        self.fast_simulate = compiled.simulate
        self.fast_advance = compiled.advance
        self._derivatives = None  # compiled_derivatives.DerivativeKernels, built at the first call

    def _derivative_kernels(self):
        if self._derivatives is None:  # with_current's copy starts without them
            from mbs_ros.dynamics.kernels.derivatives import DerivativeKernels

            self._derivatives = DerivativeKernels(self.compiled)
        return self._derivatives

    def rnea_derivatives(self, m, q, v, a, f_ext=None) -> tuple:
        k = self._derivatives or self._derivative_kernels()
        out = None if f_ext is not None else k.try_rnea_derivatives(q, v, a)  # float64 vectors, all finite
        return out if out is not None else k.rnea_derivatives(*checked_state(m, q, v, a, "a", f_ext))

    def aba_derivatives(self, m, q, v, tau, f_ext=None) -> tuple:
        k = self._derivatives or self._derivative_kernels()
        out = None if f_ext is not None else k.try_aba_derivatives(q, v, tau)
        return out if out is not None else k.aba_derivatives(*checked_state(m, q, v, tau, "tau", f_ext))

    def link_poses(self, m, q) -> np.ndarray:
        tree = m.tree
        return self.compiled.body_poses(q)[tree.link_body] @ tree.T_body_link

    def mass_matrix(self, m, q) -> np.ndarray:
        return self.compiled.crba(q)

    def coriolis_matrix(self, m, q, v) -> np.ndarray:
        return self.compiled.coriolis_matrix(q, v)

    def gravity_forces(self, m, q) -> np.ndarray:
        return self.compiled.gravity_forces(q)

    def nonlinear_effects(self, m, q, v) -> np.ndarray:
        return self.compiled.nonlinear_effects(q, v)

    def forward_dynamics(self, m, q, v, tau, f_ext=None) -> np.ndarray:
        return self.compiled.aba(q, v, tau, f_ext)

    def inverse_dynamics(self, m, q, v, a, f_ext=None) -> np.ndarray:
        return self.compiled.rnea(q, v, a, f_ext)

    def joint_wrenches(self, m, q, v, a, tau=None, f_ext=None) -> np.ndarray:
        return self.compiled.joint_wrenches(q, v, a, tau=tau, f_ext=f_ext)

    def all_terms(self, m, q, v) -> tuple:
        return self.compiled.all_terms(q, v)

    def passive_terms(self, m, q, v, springs=True) -> tuple:
        if not m.passive_active:
            return np.zeros(m.nv), 0.0
        return self.compiled.passive(q, v, springs)

    def kinetic_energy(self, m, q, v) -> float:
        return self.compiled.energies(q, v)[0]

    def gravity_energy(self, m, q) -> float:
        return self.compiled.energies(q, np.zeros(m.nv))[1]

    def spatial_momentum(self, m, q, v) -> np.ndarray:
        return self.compiled.spatial_momentum(q, v)

    def with_current(self, passive) -> "Backend":
        out = copy.copy(self)
        _CompiledKernels.__init__(out, self.compiled.with_current(passive.current, passive.current_rate))
        return out


class CompiledTreeBackend(_CompiledKernels, TreeBackend):
    """A multibody tree computed by the numba kernels."""


class CompiledRigidBodyBackend(_CompiledKernels, RigidBodyBackend):
    """One rigid body computed by the numba kernels; its constant ``M`` (and ``C`` without ``q``) in closed form."""

    def __init__(self, compiled, I_b, H, com):
        RigidBodyBackend.__init__(self, I_b, H, com)
        _CompiledKernels.__init__(self, compiled)

    def mass_matrix(self, m, q) -> np.ndarray:
        if self.M is not None:  # constant: q may be None
            return self.M.copy()
        return self.compiled.crba(q)

    def coriolis_matrix(self, m, q, v) -> np.ndarray:
        if q is None:  # on a subgroup C needs no q
            return RigidBodyBackend.coriolis_matrix(self, m, q, v)
        return self.compiled.coriolis_matrix(q, v)


class MimicBackend:
    """The reduced coordinates of :class:`~mbs_ros.dynamics.model.mimic.Mimic` (projections of its full model, whose
    backend computes)."""

    fast_step = None
    fast_simulate = None
    fast_advance = None

    def __init__(self, mimic):
        self.mimic = mimic
        self.name = mimic.full.backend

    def nq(self, m) -> int:
        return self.mimic.nq

    def nv(self, m) -> int:
        return self.mimic.nv

    def joint_names(self, m) -> tuple:
        return self.mimic.joint_names

    def joint_types(self, m) -> tuple:
        return self.mimic.joint_types

    def neutral(self, m) -> np.ndarray:
        return self.mimic.neutral()

    def random_configuration(self, m, rng, joint_range) -> np.ndarray:
        return self.mimic.random_configuration(rng, joint_range)

    def integrate(self, m, q, v, dt) -> np.ndarray:
        return self.mimic.integrate(q, v, dt)

    def difference(self, m, q0, q1) -> np.ndarray:
        return self.mimic.difference(q0, q1)

    def dexp_inv(self, m, xi) -> np.ndarray:
        return self.mimic.dexp_inv(xi)

    def link_poses(self, m, q) -> np.ndarray:
        return self.mimic.link_poses(q)

    def mass_matrix(self, m, q) -> np.ndarray:
        return self.mimic.mass_matrix(q)

    def coriolis_matrix(self, m, q, v) -> np.ndarray:
        return self.mimic.coriolis_matrix(q, v)

    def gravity_forces(self, m, q) -> np.ndarray:
        return self.mimic.gravity_forces(q)

    def nonlinear_effects(self, m, q, v) -> np.ndarray:
        return self.mimic.nonlinear_effects(q, v)

    def forward_dynamics(self, m, q, v, tau, f_ext=None) -> np.ndarray:
        return self.mimic.forward_dynamics(q, v, tau, f_ext)

    def inverse_dynamics(self, m, q, v, a, f_ext=None) -> np.ndarray:
        return self.mimic.inverse_dynamics(q, v, a, f_ext)

    def joint_wrenches(self, m, q, v, a, tau=None, f_ext=None) -> np.ndarray:
        return self.mimic.joint_wrenches(q, v, a, tau=tau, f_ext=f_ext)

    def all_terms(self, m, q, v) -> tuple:
        return self.mimic.all_terms(q, v)

    def rnea_derivatives(self, m, q, v, a, f_ext=None) -> tuple:
        """The full tree's, through the constant map: ``q_full(q ⊕ δ) = q_full(q) ⊕ G δ``, so ``∂τ/∂x =
        Gᵀ ∂τ_full/∂x_full G`` (x = q, v) and ``M = Gᵀ M_full G``."""
        mm = self.mimic
        q, v, a, f_ext = checked_state(m, q, v, a, "a", f_ext)
        dq, dv, M = mm.full.rnea_derivatives(mm.q_full(q), mm.v_full(v), mm.v_full(a), f_ext)
        G, Gt = mm.G, mm.Gt
        return Gt @ dq @ G, Gt @ dv @ G, Gt @ M @ G

    def aba_derivatives(self, m, q, v, tau, f_ext=None) -> tuple:
        return _aba_derivatives(m, *checked_state(m, q, v, tau, "tau", f_ext))

    def passive_terms(self, m, q, v, springs=True) -> tuple:
        mm = self.mimic
        tau, p = mm.full.passive_terms(mm.q_full(np.asarray(q, dtype=float)), mm.v_full(v), springs)
        return mm.Gt @ tau, p

    def kinetic_energy(self, m, q, v) -> float:
        return self.mimic.kinetic_energy(q, v)

    def potential_energy(self, m, q) -> float:
        return self.mimic.potential_energy(q)

    def gravity_energy(self, m, q) -> float:
        mm = self.mimic
        return mm.full.gravity_energy(mm.q_full(np.asarray(q, dtype=float)))

    def spatial_momentum(self, m, q, v) -> np.ndarray:
        return self.mimic.spatial_momentum(q, v)

    def with_full(self, full) -> "MimicBackend":
        """The same reduction over ``full`` (the full model with another backend or current)."""
        return MimicBackend(self.mimic.with_full(full))


def select(base: str, tree, gravity, passive, I_b, H, com, backend: str = "auto"):
    """The backend of the model of ``tree`` on ``base``: ``"numpy"``, ``"compiled"`` (None where numba is
    unavailable) or ``"auto"`` (compiled where available, else numpy). One body on a group (``tree.nj == 0``, a
    base other than fixed) gets the rigid-body closed forms."""
    single = tree.nj == 0 and base != "fixed"
    compiled = None if backend == "numpy" else compile_model(base, tree, gravity, passive)
    if compiled is None:
        if backend == "compiled":
            return None
        return RigidBodyBackend(I_b, H, com) if single else TreeBackend()
    return CompiledRigidBodyBackend(compiled, I_b, H, com) if single else CompiledTreeBackend(compiled)
