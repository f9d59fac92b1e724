"""Linear-quadratic regulator on ``G × Rⁿ``: the gain designed from the linearisation at the reference.

At the reference ``(q_d, v_d, a_d)`` the law holds the generalised force that produces it,

    τ_d = ID(q_d, v_d, a_d) − τ_p(q_d, v_d)          (τ_p: the passive forces, with ``passive``)

and linearises the simulated dynamics there (:meth:`Model.linearize`, issue 20): ``ẋ = A x + B u`` on the state
``x = (δq, δv)`` with ``q = q_d ⊕ δq`` (``δq = model.difference(q_d, q) = log(q_d⁻¹ q)``, the base error on the
group, rotation angle in [0, π]) and ``δv = v − v_d`` (body-frame velocities, the linearisation's convention). The
gain minimises ``∫ xᵀQx + uᵀRu dt``: ``K = R⁻¹ Bᵀ P`` with P the stabilising solution of the continuous algebraic
Riccati equation ``AᵀP + PA − PBR⁻¹BᵀP + Q = 0`` (Laub's Schur method, :func:`care`; Anderson & Moore,
"Optimal Control: Linear Quadratic Methods", 1990, ch. 3). The command is

    τ = τ_d + G (−K x)                                (τ = G u, :func:`mbs_ros.dynamics.algorithms.linear.input_matrix`)

Design point. A constant setpoint is designed once (and kept in a small cache by its exact value); a moving
reference keeps the last design while the reference stays within ``redesign_threshold`` of it (every component of
``log(q_design⁻¹ q_d)`` and ``v_d − v_design``; the feedforward τ_d is always the current reference's), and
redesigns at the current reference point
beyond (frozen-time LQR of the error dynamics, whose matrices at a reference point are exactly those of the
linearisation there, ``δq̇ = δv − ad_{v_d} δq`` on the base). A design is one linearisation and one CARE
(:attr:`design_seconds` keeps the last one's duration). Directions the inputs cannot stabilise (e.g. a floating base
with joint efforts only) raise ``ValueError`` at design (PBH test on the eigenvalues with Re λ ≥ 0).
"""
from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from mbs_ros.controllers.laws import _Law, gain_matrix

__all__ = ["LQR", "ScheduledLQR", "lqr_gain", "care", "weight_matrix"]

_CACHE_SIZE = 16


def weight_matrix(value, n: int, name: str) -> np.ndarray:
    """``n × n`` weight of a positive scalar, a positive vector of length n or a symmetric positive-definite
    matrix (:func:`mbs_ros.controllers.laws.gain_matrix`); ``ValueError`` naming ``name`` otherwise."""
    return gain_matrix(value, n, name)


def _check_stabilisable(A: np.ndarray, B: np.ndarray, state_names=None) -> None:
    """PBH test: ``rank [A − λI, B] = n`` for every eigenvalue λ of A with Re λ ≥ 0 (Hautus 1969); ValueError
    naming the states of an unstabilisable mode otherwise."""
    n = A.shape[0]
    norms = np.linalg.norm(B, axis=0)
    B = B[:, norms > 0.0] / norms[norms > 0.0]  # column scaling keeps the rank; a heavy robot's B ~ 1/m is no 0
    scale = max(1.0, float(np.abs(A).max()))
    # eigenvalues of Jordan blocks (a double integrator's 0) come out spread by ~√ε: a marginal band and a rank
    # tolerance well above that
    tol = 1e-6 * scale
    checked = []
    for lam in np.linalg.eigvals(A):
        if lam.real < -tol or any(abs(lam - mu) <= tol for mu in checked):  # repeated: the same rank test
            continue
        checked.append(lam)
        u, s, _ = np.linalg.svd(np.hstack([A - lam * np.eye(n), B]))
        if s[-1] <= tol:
            w = np.abs(u[:, -1])  # the left null vector: the mode no input reaches
            idx = np.argsort(w)[::-1][:3]
            names = [state_names[i] if state_names else f"x[{i}]" for i in idx if w[i] > 1e-3]
            raise ValueError(f"inputs cannot stabilise the mode at eigenvalue {lam.real:.3g}{lam.imag:+.3g}j "
                             f"(states {', '.join(names)}): choose inputs that act on every velocity component")


def care(A, B, Q, R) -> np.ndarray:
    """The stabilising solution P of ``AᵀP + PA − PBR⁻¹BᵀP + Q = 0`` by Laub's Schur method (IEEE TAC 24(6),
    1979): the real Schur form of the Hamiltonian ``[[A, −BR⁻¹Bᵀ], [−Q, −Aᵀ]]`` ordered with its stable half
    first, ``P = U₂₁ U₁₁⁻¹``. ~2 ms for 24 states, 2–3 times less than scipy's generalised-eigenvalue solver
    (docs/lqr.md), which remains the fallback when the stable subspace is not n-dimensional, U₁₁ is
    ill-conditioned or the residual exceeds 1e-9 of the equation's terms (eigenvalues clustered near 0: a heavy
    body's slow poles). Solved on the scaled problem ``x̃ = D x`` (D = diag(Q)^½), ``ũ = R^½ u`` (unit weights),
    so that a heavy or a light robot (B ~ 1/m) is as well conditioned as a unit one; ``P = D P̃ D``."""
    from scipy.linalg import schur, solve_continuous_are

    n = A.shape[0]
    d = np.sqrt(np.diag(Q))
    Rh_inv = np.linalg.inv(_sqrtm(R))
    At, Bt, Qt = A * d[:, None] / d[None, :], (B * d[:, None]) @ Rh_inv, Q / np.outer(d, d)
    H = np.block([[At, -Bt @ Bt.T], [-Qt, -At.T]])
    T, U, sdim = schur(H, output="real", sort="lhp")
    U11, U21 = U[:n, :n], U[n:, :n]
    Pt = None
    if sdim == n and np.linalg.cond(U11) < 1e10:
        Pt = np.linalg.solve(U11.T, U21.T).T
        Pt = 0.5 * (Pt + Pt.T)
        # eigenvalues of H clustered near 0 (slow poles of a heavy body) cost the Schur method its accuracy:
        # checked on the residual, relative to the equation's terms
        AP, PB = At.T @ Pt, Pt @ Bt
        terms = 2.0 * np.abs(AP).max() + np.abs(PB @ PB.T).max() + np.abs(Qt).max()
        if not np.abs(AP + AP.T - PB @ PB.T + Qt).max() <= 1e-9 * terms:
            Pt = None
    if Pt is None:
        Pt = solve_continuous_are(At, Bt, Qt, np.eye(B.shape[1]))
    P = Pt * np.outer(d, d)
    return 0.5 * (P + P.T)


def lqr_gain(A, B, Q, R, state_names=None) -> tuple:
    """``(K, P)``: ``K = R⁻¹ Bᵀ P``, P the stabilising solution of ``AᵀP + PA − PBR⁻¹BᵀP + Q = 0`` (:func:`care`);
    ValueError when (A, B) is not stabilisable (the PBH test names the mode's states; it runs only when the
    Riccati solver fails or its closed loop ``A − BK`` is not stable, a design's common case costs one CARE)."""
    A, B, Q, R = (np.asarray(x, dtype=float) for x in (A, B, Q, R))
    try:
        P = care(A, B, Q, R)
        K = np.linalg.solve(R, B.T @ P)
        stable = bool(np.all(np.isfinite(K))) and np.linalg.eigvals(A - B @ K).real.max() < 0.0
    except (np.linalg.LinAlgError, ValueError):
        stable = False
    if not stable:
        _check_stabilisable(A, B, state_names)
        raise ValueError("no stabilising solution of the Riccati equation (ill-conditioned weights or model)")
    return K, P


def _sqrtm(W):
    """Symmetric square root of a symmetric positive-definite matrix."""
    w, V = np.linalg.eigh(W)
    return (V * np.sqrt(w)) @ V.T


class LQR(_Law):
    """LQR tracking law (module docstring): ``τ = τ_d + G(−K x)``, ``x = (log(q_d⁻¹q), v − v_d)``.

    ``q_weight``, ``v_weight``: the blocks of ``Q`` on δq and δv (scalar, nv-vector or nv × nv matrix, positive);
    ``r``: ``R`` (scalar, nu-vector or nu × nu). ``inputs``: as :func:`mbs_ros.dynamics.algorithms.linear.input_matrix`
    ("generalized": u = τ). ``passive``: the plant's passive forces are part of the design (τ_d and the
    linearisation include them); ``False`` when the caller cancels them (the node's ``compensate_passive``).
    ``redesign_threshold`` (> 0): how far the reference may move from the design point before a new design.
    ``scaling``: ``"none"`` (Q, R as given) or ``"mass"`` (generalised inputs only): the weights are in
    acceleration units, ``Q = blockdiag(S_q M S_q, S_v M S_v)``, ``R = S_r M⁻¹ S_r`` with ``S = W^½`` of the given
    weights and M = M(q_d); on a decoupled DOF ``m ẍ = u`` the gain is then ``m [√(q/r), √((q_v + 2√(q r))/r)]``,
    the mass-independent closed loop of computed torque with ``kp = √(q/r)``, ``kd = √((q_v + 2√(q r))/r)``
    (``q = kp², q_v = kd² − 2 kp, r = 1`` reproduces given kp, kd).
    """

    def __init__(self, model, q_weight=1.0, v_weight=1.0, r=1.0, inputs="generalized", passive: bool = True,
                 redesign_threshold: float = 0.05, scaling: str = "none"):
        super().__init__(model)
        nv = self.nv
        self.Q = np.zeros((2 * nv, 2 * nv))
        self.Q[:nv, :nv] = weight_matrix(q_weight, nv, "q_weight")
        self.Q[nv:, nv:] = weight_matrix(v_weight, nv, "v_weight")
        if scaling not in ("none", "mass"):
            raise ValueError(f"scaling must be 'none' or 'mass', got {scaling!r}")
        if scaling == "mass" and inputs != "generalized":
            raise ValueError(f"scaling 'mass' needs inputs 'generalized' (u = tau), got inputs {inputs!r}")
        self.scaling = scaling
        from mbs_ros.dynamics.algorithms.linear import input_matrix

        try:
            G, names = input_matrix(model, model.neutral(), inputs)
        except (ValueError, AttributeError, TypeError) as e:
            raise ValueError(f"inputs: {e}") from None
        self.inputs = inputs
        self.input_names = tuple(names)
        self.R = weight_matrix(r, G.shape[1], "r")
        self.passive = bool(passive) and model.passive_active
        try:
            self.redesign_threshold = float(redesign_threshold)
        except (TypeError, ValueError):
            raise ValueError(f"redesign_threshold must be a positive number, got {redesign_threshold!r}") from None
        if not (np.isfinite(self.redesign_threshold) and self.redesign_threshold > 0.0):
            raise ValueError(f"redesign_threshold must be a positive number, got {redesign_threshold!r}")
        self._cache: OrderedDict = OrderedDict()
        self._design = None  # (q_d, v_d, a_d, tau_d, K, G, P)
        self.designs = 0
        self.design_seconds = 0.0

    # ------------------------------------------------------------------ design
    def reference_force(self, q_d, v_d=None, a_d=None) -> np.ndarray:
        """``τ_d = ID(q_d, v_d, a_d) − τ_p(q_d, v_d)``: the generalised force under which the model follows the
        reference (τ_p only with ``passive``)."""
        q_d, v_d, a_d = (self._vec(q_d, self.nq, "q_d"), self._vec(v_d, self.nv, "v_d", True),
                         self._vec(a_d, self.nv, "a_d", True))
        return self._tau_d(q_d, v_d, a_d)

    def _tau_d(self, q_d, v_d, a_d):
        tau = self.model.inverse_dynamics(q_d, v_d, a_d)
        if self.passive:
            tau = tau - self.model.passive_forces(q_d, v_d)
        return tau

    def design(self, q_d, v_d=None, a_d=None):
        """Design (and adopt) the gain at the reference point; returns ``(K, LinearModel)``. ValueError when the
        inputs cannot stabilise the linearisation there."""
        q_d, v_d, a_d = (self._vec(q_d, self.nq, "q_d"), self._vec(v_d, self.nv, "v_d", True),
                         self._vec(a_d, self.nv, "a_d", True))
        d = self._new_design(q_d, v_d, a_d)
        self._design = d
        return d[4], d[7]

    def _new_design(self, q_d, v_d, a_d):
        t0 = time.perf_counter()
        tau_d = self._tau_d(q_d, v_d, a_d)
        lin = self.model.linearize(q_d, v_d, tau_d, inputs=self.inputs, passive=self.passive)
        from mbs_ros.dynamics.algorithms.linear import input_matrix

        G = input_matrix(self.model, q_d, self.inputs)[0]
        Q, R = self.weights(q_d)
        try:
            K, P = lqr_gain(lin.A, lin.B, Q, R, lin.state_names)
        except ValueError as e:
            raise ValueError(f"LQR design at the reference: {e}") from None
        self.designs += 1
        self.design_seconds = time.perf_counter() - t0
        return (q_d.copy(), v_d.copy(), a_d.copy(), tau_d, K, G, P, lin)

    def weights(self, q_d):
        """``(Q, R)`` of the design at q_d (scaled by M(q_d) with ``scaling="mass"``)."""
        if self.scaling == "none":
            return self.Q, self.R
        nv = self.nv
        M = self.model.mass_matrix(q_d)
        Sq, Sv, Sr = (_sqrtm(W) for W in (self.Q[:nv, :nv], self.Q[nv:, nv:], self.R))
        Q = np.zeros_like(self.Q)
        Q[:nv, :nv], Q[nv:, nv:] = Sq @ M @ Sq, Sv @ M @ Sv
        R = Sr @ np.linalg.inv(M) @ Sr
        return Q, 0.5 * (R + R.T)

    def _current(self, q_d, v_d, a_d):
        """The design for this reference point: the held one within the threshold, a cached one for this exact
        point, or a new one."""
        d = self._design
        if d is not None:
            near = (np.max(np.abs(self.model.difference(d[0], q_d)), initial=0.0) <= self.redesign_threshold
                    and np.max(np.abs(v_d - d[1]), initial=0.0) <= self.redesign_threshold)
            if near:
                return d
        key = (q_d.tobytes(), v_d.tobytes(), a_d.tobytes())
        d = self._cache.get(key)
        if d is None:
            d = self._new_design(q_d, v_d, a_d)
            self._cache[key] = d
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        self._design = d
        return d

    def reset(self) -> None:
        """Forget the held design and the cache (the next call designs anew)."""
        self._design = None
        self._cache.clear()

    @property
    def K(self):
        """The gain in use (nu × 2nv), None before the first design."""
        return None if self._design is None else self._design[4]

    # ------------------------------------------------------------------ law
    def state_error(self, q, v, q_d, v_d=None) -> np.ndarray:
        """``x = (log(q_d⁻¹ q), v − v_d)`` (2nv): the linearisation's state about the reference."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        return np.concatenate([self.model.difference(q_d, q), v - v_d])

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        q, v, q_d, v_d, a_d = self._inputs(q, v, q_d, v_d, a_d)
        d = self._current(q_d, v_d, a_d)
        x = np.concatenate([self.model.difference(q_d, q), v - v_d])
        # τ_d at the current reference point; the gain of the held design
        same = np.array_equal(d[0], q_d) and np.array_equal(d[1], v_d) and np.array_equal(d[2], a_d)
        tau_d = d[3] if same else self._tau_d(q_d, v_d, a_d)
        return tau_d - d[5] @ (d[4] @ x)


class ScheduledLQR(LQR):
    """LQR with a gain schedule over an LPV family: ``K_k`` designed once per grid point ``p_k`` of ``family``
    (an :class:`mbs_ros.dynamics.algorithms.lpv.LPVFamily`, or anything with ``grid`` (n_p,), ``A`` (n_p, 2nv, 2nv), ``B``
    (n_p, 2nv, nu) and ``state_names``), ``K(p)`` interpolated linearly between neighbouring grid points, with
    ``p = schedule(q_d, v_d)`` of the reference (Rugh & Shamma, "Research on gain scheduling", Automatica 36,
    2000). The command is that of :class:`LQR` with K(p) in place of the design at the reference; nothing is
    designed while it runs. Interpolated gains are not guaranteed to stabilise between grid points: a grid fine
    enough that neighbouring designs are close is the user's part. ``inputs`` must be the family's
    (``nu`` columns of B); the weights are as given (``scaling="none"``). ValueError for a p outside the grid."""

    def __init__(self, model, family, schedule, q_weight=1.0, v_weight=1.0, r=1.0, inputs="generalized",
                 passive: bool = True):
        super().__init__(model, q_weight, v_weight, r, inputs, passive)
        if not callable(schedule):
            raise ValueError(f"schedule must be a function (q_d, v_d) -> p, got {schedule!r}")
        try:
            grid = np.asarray(family.grid, dtype=float).ravel()
            A, B = np.asarray(family.A, dtype=float), np.asarray(family.B, dtype=float)
        except (AttributeError, TypeError, ValueError):
            raise ValueError("family must have grid, A and B (an LPVFamily)") from None
        n, nu = 2 * self.nv, len(self.input_names)
        if A.shape != (grid.size, n, n) or B.shape != (grid.size, n, nu):
            raise ValueError(f"family: A and B must be stacks ({grid.size}, {n}, {n}) and ({grid.size}, {n}, {nu}) "
                             f"for this model and inputs, got {A.shape} and {B.shape}")
        if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0.0):
            raise ValueError(f"family: the grid must be finite and strictly increasing, got {grid.tolist()}")
        names = getattr(family, "state_names", None)
        self.grid = grid
        self.schedule = schedule
        self.gains = np.array([lqr_gain(A[k], B[k], self.Q, self.R, names)[0] for k in range(grid.size)])
        self.designs = grid.size

    def gain(self, p: float) -> np.ndarray:
        """``K(p)``: the grid's gains interpolated linearly; ValueError outside the grid."""
        p = float(p)
        g = self.grid
        if not (np.isfinite(p) and g[0] <= p <= g[-1]):
            raise ValueError(f"scheduling parameter p = {p} is outside the family's grid [{g[0]}, {g[-1]}]")
        if g.size == 1:
            return self.gains[0]
        k = min(int(np.searchsorted(g, p, side="right")) - 1, g.size - 2)
        s = (p - g[k]) / (g[k + 1] - g[k])
        return (1.0 - s) * self.gains[k] + s * self.gains[k + 1]

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        from mbs_ros.dynamics.algorithms.linear import input_matrix

        q, v, q_d, v_d, a_d = self._inputs(q, v, q_d, v_d, a_d)
        K = self.gain(self.schedule(q_d, v_d))
        x = np.concatenate([self.model.difference(q_d, q), v - v_d])
        G = np.eye(self.nv) if self.inputs == "generalized" else input_matrix(self.model, q_d, self.inputs)[0]
        return self._tau_d(q_d, v_d, a_d) - G @ (K @ x)

    @property
    def K(self):
        """The grid's gains, (n_p, nu, 2nv)."""
        return self.gains
