"""Equilibria and trim: states ``(q, v)`` and inputs ``u`` at which the simulated acceleration is zero.

The residual is the acceleration the integrators use, ``a = FD(q, v, τ + τ_p(q, v))`` (:mod:`mbs_ros.dynamics.algorithms.derivatives`), with
the applied generalised force ``τ = G(q) u + τ_fixed + Bᵀ[Rᵀ F_w; Rᵀ T_w] + f(q, v)``: inputs through
:func:`mbs_ros.dynamics.algorithms.linear.input_matrix`, a fixed generalised force, a wrench held in WORLD axes at the base origin (as
:func:`mbs_ros.dynamics.simulation.integrators.step` takes ``wrench_world``: the balloon's buoyancy) and optional state-dependent forces.
With v ≠ 0 a zero body-frame acceleration is a relative equilibrium (a steady spin, a steady motion in a current).

The unknowns are chosen components of the tangent increment δq (``q = q₀ ⊕ δq``), of v, and of u; the rest stay
at their given values. The equations are solved by Levenberg–Marquardt / trust-region Gauss–Newton
(``scipy.optimize.least_squares``) with the analytic Jacobian: ``∂a/∂q, ∂a/∂v, M⁻¹`` of
:meth:`Model.dynamics_derivatives` plus ``M⁻¹ ∂τ/∂x`` of the applied forces — the world wrench's by its closed
form (rotating a world vector into body axes: ``∂(Rᵀ F)/∂δθ = [Rᵀ F]×``), chained through the right Jacobian of
the exponential (``model.dexp_inv``) because the unknown is δq at q₀, not at the current q.
Inputs are minimum-norm where they are underdetermined (more inputs than the equations fix, e.g. eight
thrusters for six DOF): at the solved (q, v) the free inputs are re-solved as the minimum-norm least-squares
solution of the linear equations ``G_free u_free = M a`` (``numpy.linalg.lstsq``), no regularisation.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from mbs_ros.dynamics.algorithms.derivatives import forward_dynamics_derivatives, simulated_acceleration
from mbs_ros.dynamics.lie import hat3
from mbs_ros.dynamics.algorithms.linear import input_matrix, input_matrix_q_derivative

__all__ = ["Equilibrium", "find_equilibrium"]


@dataclass(frozen=True)
class Equilibrium:
    """The result of :func:`find_equilibrium`.

    ``q, v``: the state; ``u``: every input (``input_names``), free and fixed; ``tau``: the total applied
    generalised force there (inputs, ``tau``, world wrench, ``forces``; the model's passive forces not included),
    the operating point of :meth:`Model.linearize`; ``residual``: max |a| of the simulated acceleration;
    ``success`` whether it is below ``tol``, ``message`` why not; ``dtau_dq, dtau_dv``: derivatives of the applied
    force ``tau(q, v)`` at the solution with u held (add ``M⁻¹ dtau_dq`` to ``∂a/∂q`` of a linearisation that
    holds tau constant, e.g. for the world-fixed buoyancy); ``jacobian``: ∂a/∂(unknowns) at the solution,
    nv × (free δq, free v, free u) in that order (a rank below the number of unknowns shows a family of
    equilibria: a direction to fix); ``nfev``: residual evaluations."""

    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    u: np.ndarray
    residual: float
    success: bool
    message: str
    input_names: tuple = ()
    dtau_dq: np.ndarray = field(default=None, repr=False)
    dtau_dv: np.ndarray = field(default=None, repr=False)
    jacobian: np.ndarray = field(default=None, repr=False)
    nfev: int = 0

    def linearize(self, model, **options):
        """:meth:`Model.linearize` at this equilibrium (``options``: ``inputs``, ``passive``, ...) with the applied
        force's own derivatives added, ``∂a/∂q += M⁻¹ dtau_dq``, ``∂a/∂v += M⁻¹ dtau_dv`` (linearize holds tau
        constant; a world-fixed wrench turns with the base). Continuous time only when those are nonzero: the
        discrete pair (``dt``) holds tau over the step, so ValueError names ``dt`` then. ``dtau_dq`` already holds
        the inputs' ``∂(G(q) u)/∂q`` (SO(3)×R³): do not pass the inputs' operating value again."""
        nv = model.nv
        extra = np.any(self.dtau_dq) or np.any(self.dtau_dv)
        if extra and options.get("dt") is not None:
            raise ValueError("dt: the discrete pair holds tau over the step; this equilibrium's applied force "
                             "depends on the state (world wrench, forces), linearise it in continuous time")
        lm = model.linearize(self.q, self.v, self.tau, **options)
        if not extra:
            return lm
        A = np.array(lm.A, dtype=float)
        M = model.mass_matrix(self.q)
        A[nv:, :nv] += np.linalg.solve(M, self.dtau_dq)
        A[nv:, nv:] += np.linalg.solve(M, self.dtau_dv)
        return replace(lm, A=A)


def _indices(spec, n: int, nb: int, name: str) -> np.ndarray:
    """Indices in 0..n-1 from ``spec``: None/"none", "all", "base" (the first nb), "joints" (the rest), or ints."""
    if spec is None:
        return np.zeros(0, dtype=int)
    if isinstance(spec, str):
        named = {"none": range(0), "all": range(n), "base": range(nb), "joints": range(nb, n)}
        if spec not in named:
            raise ValueError(f"{name} must be 'all', 'base', 'joints', 'none' or a list of indices, got {spec!r}")
        return np.array(list(named[spec]), dtype=int)
    try:
        idx = [int(i) for i in spec]
        if any(i != float(j) for i, j in zip(idx, spec)):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 'all', 'base', 'joints', 'none' or a list of integer indices, "
                         f"got {spec!r}") from None
    if any(i < 0 or i >= n for i in idx):
        raise ValueError(f"{name}: indices must lie in 0..{n - 1}, got {idx}")
    if len(set(idx)) != len(idx):
        raise ValueError(f"{name}: repeated index in {idx}")
    return np.array(sorted(idx), dtype=int)


def _vector(x, n: int, name: str, default=0.0) -> np.ndarray:
    if x is None:
        return np.full(n, default, dtype=float)
    try:
        out = np.array(x, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a vector of {n} numbers") from None
    if out.size != n:
        raise ValueError(f"{name} must have {n} entries, got {out.size}")
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} must be finite")
    return out


def world_wrench_force(model, q, W) -> np.ndarray:
    """Generalised force (nv,) of the world-axes wrench W = [F; T] at the base origin: ``Bᵀ [Rᵀ F; Rᵀ T]``."""
    R = model.base_rotation(q)
    return model.wrench_to_generalized(q, np.concatenate([R.T @ W[:3], R.T @ W[3:]]))[0]


def world_wrench_derivative(model, q, W) -> np.ndarray:
    """``∂/∂δ`` (nv × nv) of :func:`world_wrench_force` along ``q ⊕ δ``, closed form: the base rotates by
    ``δθ = (B δ)_ω`` (its angular rows), and ``Rᵀ x`` of a world vector x changes by ``[Rᵀ x]× δθ``. With a
    constant velocity map B that is ``Bᵀ [[Rᵀ F]×; [Rᵀ T]×] B_ω``; on SO(3)×R³ (``B_v = Rᵀ``) the linear part
    ``R Rᵀ F = F`` is constant and only the torque's rows remain."""
    nv = model.nv
    out = np.zeros((nv, nv))
    if model.group is None:
        return out
    R = model.base_rotation(q)
    B = model.velocity_map(q)
    nb = B.shape[1]
    dW = np.vstack([hat3(R.T @ W[:3]), hat3(R.T @ W[3:])]) @ B[3:, :]  # 6 × nb
    if model.velocity_map_is_constant:
        out[:nb, :nb] = B.T @ dW
    else:  # SO(3)×R³: Bᵀ = diag(R, I)
        out[3:6, :nb] = dW[3:]
    return out


class _Problem:
    """The residual a(x) and its Jacobian for the unknowns x = (δq[iq], v[iv], u[iu])."""

    def __init__(self, model, q0, v0, G, u0, iq, iv, iu, tau, W, forces, forces_jacobian, passive):
        self.model, self.q0, self.v0, self.G, self.u0 = model, q0, v0, G, u0
        self.iq, self.iv, self.iu = iq, iv, iu
        self.tau_fixed, self.W, self.forces, self.forces_jacobian = tau, W, forces, forces_jacobian
        self.passive = passive
        self.nfev = 0

    def unpack(self, x):
        nq, nv_ = self.iq.size, self.iv.size
        delta = np.zeros(self.model.nv)
        delta[self.iq] = x[:nq]
        v = self.v0.copy()
        v[self.iv] = x[nq:nq + nv_]
        u = self.u0.copy()
        u[self.iu] = x[nq + nv_:]
        return delta, self.model.integrate(self.q0, delta), v, u

    def applied(self, q, v, u):
        """τ(q, v) (nv,), the applied generalised force without the model's passive forces."""
        m = self.model
        tau = self.tau_fixed.copy()
        if u.size:
            tau += input_matrix(m, q, self.inputs)[0] @ u if self.q_dependent_G else self.G @ u
        if self.W is not None:
            tau += world_wrench_force(m, q, self.W)
        if self.forces is not None:
            tau += self.forces(q, v) if callable(self.forces) else self.forces
        return tau

    def applied_derivatives(self, q, v, u):
        """``(∂τ/∂q, ∂τ/∂v)`` of :meth:`applied` with u held: closed forms (the world wrench's, and
        :func:`mbs_ros.dynamics.algorithms.linear.input_matrix_q_derivative` for SO(3)×R³'s q-dependent inputs), central differences on the group
        (step 1e-6) for ``forces`` without a Jacobian."""
        m = self.model
        nv = m.nv
        dq, dv = np.zeros((nv, nv)), np.zeros((nv, nv))
        if self.W is not None:
            dq += world_wrench_derivative(m, q, self.W)
        if u.size and self.q_dependent_G and np.any(u):
            dq += input_matrix_q_derivative(m, q, self.inputs, u)
        if callable(self.forces):
            if self.forces_jacobian is not None:
                fq, fv = self.forces_jacobian(q, v)
            else:
                fq, fv = _central(self.forces, m, q, v)
            dq += np.asarray(fq, dtype=float).reshape(nv, nv)
            dv += np.asarray(fv, dtype=float).reshape(nv, nv)
        return dq, dv

    def residual(self, x):
        self.nfev += 1
        _, q, v, u = self.unpack(x)
        return simulated_acceleration(self.model, q, v, self.applied(q, v, u), self.passive)

    def jacobian(self, x):
        delta, q, v, u = self.unpack(x)
        m = self.model
        tau = self.applied(q, v, u)
        _a, da_dq, da_dv, Minv = forward_dynamics_derivatives(m, q, v, tau, self.passive)
        tq, tv = self.applied_derivatives(q, v, u)
        da_dq = da_dq + Minv @ tq
        da_dv = da_dv + Minv @ tv
        # q = q0 exp(δ): dδ moves q by dexp_{−δ} dδ in its right-trivialised tangent (RKMK's Φ̇ relation)
        dq_ddelta = np.linalg.inv(m.dexp_inv(-delta))
        G = input_matrix(m, q, self.inputs)[0] if self.q_dependent_G else self.G
        return np.hstack([(da_dq @ dq_ddelta)[:, self.iq], da_dv[:, self.iv], (Minv @ G)[:, self.iu]])


def _central(f, model, q, v, h: float = 1e-6):
    """``(∂f/∂q, ∂f/∂v)`` of f(q, v) (nv,) by central differences along ``q ⊕ δ`` and v."""
    nv = model.nv
    dq, dv = np.zeros((nv, nv)), np.zeros((nv, nv))
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        dq[:, i] = (f(model.integrate(q, e), v) - f(model.integrate(q, -e), v)) / (2 * h)
        dv[:, i] = (f(q, v + e) - f(q, v - e)) / (2 * h)
    return dq, dv


def find_equilibrium(model, q0, v0=None, *, inputs=None, u0=None, free_q=None, free_v=None,
                     free_u="all", tau=None, wrench_world=None, forces=None, forces_jacobian=None,
                     passive: bool = True, tol: float = 1e-9, max_nfev: int = 200) -> Equilibrium:
    """An (relative) equilibrium: ``(q, v, u)`` with zero simulated acceleration; see the module docstring.

    ``q0, v0``: the start and the values of the fixed components (v0 default 0). ``free_q``, ``free_v``: the
    unknown components of δq (``q = q0 ⊕ δq``) and of v: indices into 0..nv−1, or ``"all"``, ``"base"``,
    ``"joints"``, ``"none"`` (default None: none). ``inputs`` (:func:`mbs_ros.dynamics.algorithms.linear.input_matrix`: "generalized",
    "efforts", "wrench", "thrusters" or a list), ``u0`` their start/fixed values (default 0), ``free_u`` the
    unknown ones (default "all"; indices, "all", "none"); the free inputs are minimum-norm. ``tau``: a fixed
    generalised force (nv,). ``wrench_world``: ``[F; T]`` (6,) at the base origin in world axes (as
    ``integrators.step``). ``forces``: a generalised force (nv,) or a function ``f(q, v) -> (nv,)`` (e.g. a spring
    outside the model), with ``forces_jacobian(q, v) -> (∂f/∂q, ∂f/∂v)`` (else central differences). ``passive``:
    include the model's passive forces. ``tol``: success when max |a| ≤ tol. Never raises on non-convergence
    (``success`` False and the reason); ValueError naming the argument for bad input."""
    from scipy.optimize import least_squares

    nv = model.nv
    nb = nv - len(model.joint_names)
    q0 = np.array(q0, dtype=float).reshape(-1)
    if q0.size != model.nq or not np.all(np.isfinite(q0)):
        raise ValueError(f"q0 must be {model.nq} finite numbers, got {q0.size}")
    v0 = _vector(v0, nv, "v0")
    iq = _indices(free_q, nv, nb, "free_q")
    iv = _indices(free_v, nv, nb, "free_v")
    if inputs is None:
        if u0 is not None:
            raise ValueError("u0 needs inputs")
        G, names = np.zeros((nv, 0)), ()
    else:
        G, names = input_matrix(model, q0, inputs)
    nu = G.shape[1]
    u0 = _vector(u0, nu, "u0")
    if not nu and not (free_u is None or (isinstance(free_u, str) and free_u in ("all", "none"))):
        raise ValueError("free_u needs inputs")
    iu = _indices(free_u if nu else None, nu, nu, "free_u")
    tau_fixed = _vector(tau, nv, "tau")
    W = None if wrench_world is None else _vector(wrench_world, 6, "wrench_world")
    if forces is not None and not callable(forces):
        forces = _vector(forces, nv, "forces")
    if forces_jacobian is not None and not callable(forces_jacobian):
        raise ValueError("forces_jacobian must be a function (q, v) -> (df_dq, df_dv)")
    if not (isinstance(tol, (int, float)) and 0.0 < tol < np.inf):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) or max_nfev < 1:
        raise ValueError(f"max_nfev must be a positive integer, got {max_nfev!r}")

    p = _Problem(model, q0, v0, G, u0, iq, iv, iu, tau_fixed, W, forces, forces_jacobian, passive)
    p.inputs = inputs
    p.q_dependent_G = bool(nu) and not model.velocity_map_is_constant
    n_x = iq.size + iv.size + iu.size
    x = np.concatenate([np.zeros(iq.size), v0[iv], u0[iu]])
    message = "no unknowns: the residual at the given state"
    if iq.size + iv.size:
        try:
            sol = least_squares(p.residual, x, jac=p.jacobian, method="trf" if n_x > nv else "lm",
                                xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=max_nfev)
            x, message = sol.x, sol.message
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            message = f"the solver stopped: {exc}"
    _delta, q, v, u = p.unpack(x)
    if iu.size:  # minimum-norm free inputs at the solved state: G_free u_free = M a(u_free = 0)
        u[iu] = 0.0
        a_rest = simulated_acceleration(model, q, v, p.applied(q, v, u), passive)
        Gq = input_matrix(model, q, inputs)[0] if p.q_dependent_G else G
        u[iu] = np.linalg.lstsq(Gq[:, iu], -model.mass_matrix(q) @ a_rest, rcond=None)[0]
        if not (iq.size + iv.size):
            message = "free inputs only: minimum-norm least-squares solution of the linear equations"
    tau_total = p.applied(q, v, u)
    a = simulated_acceleration(model, q, v, tau_total, passive)
    residual = float(np.abs(a).max()) if a.size else 0.0
    finite = bool(np.all(np.isfinite(a)))
    success = finite and residual <= tol
    if not success:
        message = (f"max |a| = {residual:.3g} > tol = {tol:g}: no equilibrium found with these unknowns "
                   f"(too few free components, or a poor start); solver: {message}")
    dq, dv = p.applied_derivatives(q, v, u)
    x[iq.size + iv.size:] = u[iu]
    return Equilibrium(q=q, v=v, tau=tau_total, u=u, residual=residual if finite else float("inf"),
                       success=success, message=str(message), input_names=tuple(names), dtau_dq=dq,
                       dtau_dv=dv, jacobian=p.jacobian(x), nfev=p.nfev)
