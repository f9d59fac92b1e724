"""Linear models of the dynamics at an operating point: ``ẋ = A x + B u`` on the state ``x = (δq, δv)``.

``δq`` is the tangent increment ``q = q₀ ⊕ δq`` (``model.difference(q₀, q)``), ``δv = v − v₀``; with a moving
operating point (a relative equilibrium, v₀ ≠ 0) ``δq̇ = δv − ad_{v₀} δq`` on the base (first order of
``d/dt log((q₀ exp(t v₀))⁻¹ q)``), so ``A = [[−ad_{v₀}, I], [∂a/∂q, ∂a/∂v]]`` and ``B = [[0], [M⁻¹ ∂τ/∂u]]``
with ``ad`` the base group's, in its velocity coordinates (seed 004 eq. 8; joints commute: ad = 0).

With ``dt`` the model is the Jacobian of ONE Munthe-Kaas Runge–Kutta step (:func:`mbs_ros.dynamics.step`, seed
001 eqs. 35–37) in the same tangent coordinates, about the operating point's own next state: the variational
equations of the scheme, stage by stage, with the analytic stage Jacobians (:func:`forward_dynamics_derivatives`)
and the chart's derivatives (``Ad_{exp(−Ψ)}``, ``dexp(−Ψ)``, and ``∂(dexp⁻¹(x) y)/∂x`` from the derivative of the
series ``dexp = Σ ad_xᵏ/(k+1)!`` by a one-term recursion, seed 001 eq. 10's series differentiated).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_ros.dynamics.algorithms.derivatives import forward_dynamics_derivatives
from mbs_ros.dynamics.simulation.integrators import TABLEAUS, check_time_step
from mbs_ros.dynamics.lie import hat3

__all__ = ["LinearModel", "linearize", "input_matrix", "input_matrix_q_derivative", "coordinate_names", "INPUT_KINDS"]

INPUT_KINDS = ("generalized", "efforts", "wrench", "thrusters")

_BASE_COORDINATES = {
    "se3": ("tx", "ty", "tz", "rx", "ry", "rz"),
    "so3xr3": ("tx", "ty", "tz", "rx", "ry", "rz"),
    "so3": ("rx", "ry", "rz"),
    "se2": ("tx", "ty", "rz"),
    "schoenflies": ("tx", "ty", "tz", "rz"),
}
_WRENCH_NAMES = ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")


@dataclass(frozen=True)
class LinearModel:
    """``ẋ = A x + B u`` (continuous, ``dt`` None) or ``x⁺ = A x + B u`` (one step of ``dt``) about
    ``(q0, v0, tau0)``: x = (δq, δv) (``state_names``), u the inputs' deviation (``input_names``).

    ``u0``: the inputs' operating value when given to :func:`linearize`; ``q_next``, ``v_next``: for a discrete
    model, the operating point's own next state, about which ``x⁺`` is measured (``δq⁺ = difference(q_next, q⁺)``,
    ``δv⁺ = v⁺ − v_next``); ``method``: the integrator of the discrete pair."""

    A: np.ndarray
    B: np.ndarray
    q0: np.ndarray
    v0: np.ndarray
    tau0: np.ndarray
    state_names: tuple
    input_names: tuple
    dt: float | None = None
    u0: np.ndarray | None = None
    q_next: np.ndarray | None = None
    v_next: np.ndarray | None = None
    method: str | None = None

    @property
    def n_states(self) -> int:
        return self.A.shape[0]

    @property
    def n_inputs(self) -> int:
        return self.B.shape[1]

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of A: poles (continuous: stable when Re < 0; discrete: when |λ| < 1)."""
        return np.linalg.eigvals(self.A)

    def discretize(self, dt: float) -> "LinearModel":
        """The zero-order-hold discretisation of a continuous model, ``A_d = e^{A dt}``, ``B_d = ∫₀^dt e^{As} ds B``
        (one matrix exponential of ``[[A, B], [0, 0]] dt``; Van Loan 1978). An approximation of the sampled
        nonlinear system of the same order as the linearisation; :func:`linearize` with ``dt`` gives the exact
        Jacobian of one integrator step instead."""
        from scipy.linalg import expm

        if self.dt is not None:
            raise ValueError(f"the model is already discrete (dt = {self.dt}); discretize a continuous one")
        dt = check_time_step(dt, "dt")
        n, m = self.B.shape
        big = np.zeros((n + m, n + m))
        big[:n, :n], big[:n, n:] = self.A, self.B
        E = expm(big * dt)
        return LinearModel(E[:n, :n], E[:n, n:], self.q0, self.v0, self.tau0, self.state_names, self.input_names,
                           dt, self.u0, method="zoh")

    def to_control(self, C=None, D=None, outputs=None):
        """A ``control.StateSpace`` (python-control) with these A, B, the state and input names, ``dt`` (0 when
        continuous). The outputs are the full state (``C = I``, ``D = 0``) unless ``C`` (p × n) is given;
        ``outputs``: their names (default ``y0 … y{p−1}``, or the state names with ``C = I``)."""
        import control

        n, m = self.B.shape
        if C is None:
            C = np.eye(n)
            names = outputs if outputs is not None else self.state_names
        else:
            C = _matrix(C, "C", None, n)
            names = outputs if outputs is not None else tuple(f"y{i}" for i in range(C.shape[0]))
        D = np.zeros((C.shape[0], m)) if D is None else _matrix(D, "D", C.shape[0], m)
        if len(names) != C.shape[0]:
            raise ValueError(f"outputs has {len(names)} names for {C.shape[0]} outputs")
        return control.ss(self.A, self.B, C, D, 0 if self.dt is None else self.dt,
                          states=[_signal(s) for s in self.state_names],
                          inputs=[_signal(s) for s in self.input_names], outputs=[_signal(s) for s in names])


def _signal(name) -> str:
    """A python-control signal name (no dots)."""
    return str(name).replace(".", "_")


def _matrix(X, name, rows, cols) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or (rows is not None and X.shape[0] != rows) or X.shape[1] != cols:
        raise ValueError(f"{name} must be a {rows if rows is not None else 'p'}×{cols} matrix, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} must be finite")
    return X


def coordinate_names(model) -> tuple:
    """Names of the nv tangent coordinates: the base group's (``tx ty tz`` translation, ``rx ry rz`` rotation, body
    axes; so3xr3: world-axis translation) then the joints'."""
    base = () if model.group is None else _BASE_COORDINATES.get(model.base, tuple(
        f"b{i}" for i in range(model.group.dim)))
    return tuple(base) + tuple(model.joint_names)


def _base_dim(model) -> int:
    return 0 if model.group is None else model.nv - len(model.joint_names)


def input_matrix(model, q, inputs="generalized") -> tuple:
    """``(G, names)``: the generalised force of the inputs is ``τ = G u`` (nv × nu). ``inputs``: ``"generalized"``
    (τ itself), ``"efforts"`` (the joints' efforts), ``"wrench"`` (a base wrench ``[F; τ]`` in the base frame at
    its origin, through :meth:`Model.wrench_to_generalized`; components the base group cannot take give zero
    columns), ``"thrusters"`` (one entry per thruster [N], through the allocation matrix
    :attr:`Model.thruster_matrix`), or a list of these (columns side by side)."""
    if not isinstance(inputs, str):
        try:
            kinds = list(inputs)
        except TypeError:
            raise ValueError(f"inputs must be one of {', '.join(INPUT_KINDS)} or a list of them, "
                             f"got {inputs!r}") from None
        if not kinds or not all(isinstance(k, str) for k in kinds):
            raise ValueError(f"inputs must be one of {', '.join(INPUT_KINDS)} or a non-empty list of them, "
                             f"got {inputs!r}")
        parts = [input_matrix(model, q, k) for k in kinds]
        return np.hstack([p[0] for p in parts]), tuple(n for p in parts for n in p[1])
    nv = model.nv
    nj = len(model.joint_names)
    if inputs == "generalized":
        return np.eye(nv), tuple(f"tau_{c}" for c in coordinate_names(model))
    if inputs == "efforts":
        if nj == 0:
            raise ValueError("inputs 'efforts': the model has no joints")
        G = np.zeros((nv, nj))
        G[nv - nj:, :] = np.eye(nj)
        return G, tuple(model.joint_names)
    if inputs == "wrench":
        if model.group is None:
            raise ValueError("inputs 'wrench': a fixed base takes no wrench")
        cols = [model.wrench_to_generalized(q, e)[0] for e in np.eye(6)]
        return np.array(cols).T, _WRENCH_NAMES
    if inputs == "thrusters":
        Bt = model.thruster_matrix
        if Bt.shape[1] == 0:
            raise ValueError("inputs 'thrusters': the model has no thrusters")
        G = np.array([model.wrench_to_generalized(q, Bt[:, k])[0] for k in range(Bt.shape[1])]).reshape(-1, nv).T
        return G, tuple(model.thruster_names)
    raise ValueError(f"unknown inputs {inputs!r}: choose {', '.join(INPUT_KINDS)} or a list of them")


def input_matrix_q_derivative(model, q, inputs, u0) -> np.ndarray:
    """``∂(G(q) u₀)/∂q`` along ``q ⊕ δ`` (nv × nv). Only SO(3)×R³ has a q-dependent G (``Bᵀ = diag(R, I)`` maps a
    base-frame force to the world-axis translation rate's force ``R F``; ``R(q ⊕ δ) = R exp(δ_ω^)`` gives
    ``∂(R F)/∂δ_ω = −R F^``); the other bases' ``B = H`` is constant."""
    nv = model.nv
    out = np.zeros((nv, nv))
    if model.group is None or model.velocity_map_is_constant:
        return out
    kinds = [inputs] if isinstance(inputs, str) else list(inputs)
    W = np.zeros(6)  # the base-frame wrench of u₀'s wrench and thruster parts
    i = 0
    for kind in kinds:
        width = input_matrix(model, q, kind)[0].shape[1]
        if kind == "wrench":
            W += u0[i:i + 6]
        elif kind == "thrusters":
            W += model.thruster_matrix @ u0[i:i + width]
        i += width
    out[:3, 3:6] = -model.base_rotation(q) @ hat3(W[:3])
    return out


def _vector(x, name, n) -> np.ndarray:
    try:
        x = np.array(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a vector of {n} numbers") from None
    if x.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be finite")
    return x


def linearize(model, q, v, tau, inputs="generalized", passive: bool = True, dt=None, method: str = "rk4",
              u0=None) -> LinearModel:
    """The :class:`LinearModel` of the simulated dynamics ``v̇ = FD(q, v, τ + τ_p(q, v))`` at ``(q, v, τ)``.

    ``tau``: the generalised force applied there (nv); the inputs u enter as ``τ = tau + G(q) δu``
    (:func:`input_matrix`, ``inputs``). ``passive``: include the passive forces (default). ``dt`` None: the
    continuous model ``A = [[−ad_{v₀}, I], [∂a/∂q, ∂a/∂v]]``, ``B = [[0], [M⁻¹ G]]``; ``dt`` > 0: the exact Jacobian
    of one ``method`` step (``euler``, ``heun``, ``rk3``, ``rk4``) with τ held over it, about the step's nominal
    result (with ``passive`` False: of the step without the passive forces). ``u0`` (optional, nu): the inputs'
    operating value; where G depends on q (wrench or thruster inputs on an so3xr3 base) its q-derivative times
    ``u0`` enters A — without ``u0`` that term is taken as zero, exact when the operating wrench is zero.
    """
    if model.group is None and model.nv == 0:
        raise ValueError("model has no degrees of freedom")
    q = _vector(q, "q", model.nq)
    _check_unit_parts(model, q)
    v = _vector(v, "v", model.nv)
    tau = _vector(tau, "tau", model.nv)
    if dt is not None:
        dt = check_time_step(dt, "dt")
    if not isinstance(method, str) or method not in TABLEAUS:
        raise ValueError(f"method must be one of {', '.join(TABLEAUS)}, got {method!r}")
    G, names = input_matrix(model, q, inputs)
    nv = model.nv
    dGu = np.zeros((nv, nv))
    if u0 is not None:
        u0 = _vector(u0, "u0", G.shape[1])
        dGu = input_matrix_q_derivative(model, q, inputs, u0)
    states = tuple(f"dq_{c}" for c in coordinate_names(model)) + tuple(f"dv_{c}" for c in coordinate_names(model))
    if dt is not None:
        try:
            A, B, q1, v1 = _step_jacobian(model, q, v, tau, G, dGu, dt, method, passive)
        except (ValueError, OverflowError, FloatingPointError, ZeroDivisionError) as e:
            raise _not_finite(f"one {method} step from it fails: {e}") from None
        _check_finite(A, B)
        return LinearModel(A, B, q, v, tau, states, names, dt, u0, q1, v1, method)
    try:
        _a, dq, dv, dtau = forward_dynamics_derivatives(model, q, v, tau, passive)
    except (ValueError, OverflowError, FloatingPointError, ZeroDivisionError) as e:
        raise _not_finite(f"its derivatives fail: {e}") from None
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    nb = _base_dim(model)
    if nb:
        A[:nb, :nb] = -model.group.ad(v[:nb])
    A[nv:, :nv], A[nv:, nv:] = dq + dtau @ dGu, dv
    B = np.vstack([np.zeros((nv, G.shape[1])), dtau @ G])
    _check_finite(A, B)
    return LinearModel(A, B, q, v, tau, states, names, None, u0)


#: base group -> (first index, length) of its unit part in q: a quaternion [qx qy qz qw] or (cos yaw, sin yaw)
_UNIT_PART = {"se3": (3, 4), "so3xr3": (3, 4), "so3": (0, 4), "se2": (2, 2), "schoenflies": (3, 2)}
UNIT_TOLERANCE = 1e-6  # |norm - 1| allowed of q's quaternion and (cos, sin) pairs


def _check_unit_parts(model, q: np.ndarray) -> None:
    """q's quaternion and (cos, sin) pairs (the base's, each continuous joint's) of unit norm: a zero quaternion
    is no configuration (the dynamics would divide by its norm or rotate by garbage)."""
    parts = []
    if model.group is not None and model.base in _UNIT_PART:
        start, n = _UNIT_PART[model.base]
        parts.append(("the base's " + ("quaternion" if n == 4 else "(cos, sin)"), start, n))
    types = tuple(model.joint_types)
    i = model.nq - sum(2 if t == "continuous" else 1 for t in types)
    for name, t in zip(model.joint_names, types):
        if t == "continuous":
            parts.append((f"joint {name}'s (cos, sin)", i, 2))
        i += 2 if t == "continuous" else 1
    for what, start, n in parts:
        norm = float(np.linalg.norm(q[start:start + n]))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            raise ValueError(f"q: {what} (q[{start}:{start + n}]) must have unit norm, got {norm:.6g}")


def _not_finite(why: str) -> ValueError:
    return ValueError(f"the linear model is not finite at this operating point ({why}): q, v or tau beyond what "
                      "the dynamics can represent in floating point")


def _check_finite(A: np.ndarray, B: np.ndarray) -> None:
    """A linear model is finite: an operating point whose derivatives overflow (v = 1e300, tau = 1e308) has none."""
    for name, X in (("A", A), ("B", B)):
        if not np.all(np.isfinite(X)):
            raise _not_finite(f"{name} has {int(np.sum(~np.isfinite(X)))} non-finite entries")


# ------------------------------------------------------------------ the chart's derivatives (base block)
def _ad_exp_neg(model, x) -> np.ndarray:
    """``Ad_{exp(−x)}`` on the configuration space's tangent (identity on the joints)."""
    out = np.eye(model.nv)
    nb = _base_dim(model)
    if nb:
        g = model.group
        out[:nb, :nb] = g.adjoint(g.exp(-x[:nb]))
    return out


def _dexp(model, x) -> np.ndarray:
    """Right-trivialised ``dexp(x)`` (identity on the joints)."""
    out = np.eye(model.nv)
    nb = _base_dim(model)
    if nb:
        out[:nb, :nb] = model.group.dexp(x[:nb])
    return out


def _dexp_inv_derivative(model, x, y) -> np.ndarray:
    """``∂(dexp⁻¹(x) y)/∂x`` (nv × nv), zero on the joints (they commute). With ``w = dexp⁻¹(x) y`` it is
    ``−dexp⁻¹(x) ∂(dexp(x) w)/∂x``, and ``dexp = Σ_k ad_xᵏ/(k+1)!`` with ``∂(ad_xᵏ w)/∂x = −S_{k−1}``,
    ``S_m = Σ_{j+l=m} ad_xʲ ad_{ad_xˡ w}`` (``ad_e p = −ad_p e``), so ``S_m = ad_x S_{m−1} + ad_{ad_xᵐ w}``: one
    recursion, summed until the terms fall below 1e-17 of the first (a bound by ``‖ad_x‖_F``; the series
    converges for every x, here the stages' |Ψ| of a step)."""
    nv = model.nv
    out = np.zeros((nv, nv))
    nb = _base_dim(model)
    if not nb:
        return out
    g = model.group
    xb = x[:nb]
    Dinv = g.dexp_inv(xb)
    w = Dinv @ y[:nb]
    Z = g.ad(xb)
    z = float(np.linalg.norm(Z))
    p = w.copy()  # ad_xᵐ w
    S = g.ad(p)   # S_0
    total = 0.5 * S
    coeff = 0.5  # 1/(k+1)!
    for k in range(2, 400):
        p = Z @ p
        S = Z @ S + g.ad(p)
        coeff /= k + 1
        total += coeff * S
        if coeff * k * z ** (k - 1) < 0.5e-17:  # a bound of the term relative to the first
            break
    out[:nb, :nb] = Dinv @ total
    return out


def _step_jacobian(model, q, v, tau, G, dGu, h, method, passive):
    """``(A_d, B_d, q⁺, v⁺)``: the variational equations of one Munthe-Kaas step (integrators.py) w.r.t.
    ``z = (δq, δv, δu)``. Stage j: ``q_j = q exp(Ψ_j)``; a perturbation ``q ⊕ δq``, ``Ψ_j + dΨ_j`` moves it to
    ``q_j ⊕ η_j`` with ``η_j = Ad_{exp(−Ψ_j)} δq + dexp(−Ψ_j) dΨ_j``; ``k_j = dexp⁻¹(−Ψ_j) v_j`` varies by
    ``dexp⁻¹(−Ψ_j) dv_j − ∂(dexp⁻¹(x) v_j)/∂x|₋Ψ_j dΨ_j``; the stage acceleration by ``∂a/∂q η_j + ∂a/∂v dv_j +
    ∂a/∂τ dτ``; the end of the step as a stage with Ψ = φ."""
    tab = TABLEAUS[method]
    nv = model.nv
    m = G.shape[1]
    nz = 2 * nv + m
    Sq = np.zeros((nv, nz))
    Sq[:, :nv] = np.eye(nv)
    Sv = np.zeros((nv, nz))
    Sv[:, nv:2 * nv] = np.eye(nv)
    St = np.zeros((nv, nz))  # dτ: the inputs, and G's q-dependence
    St[:, :nv] = dGu
    St[:, 2 * nv:] = G
    ks, dks, accs, daccs = [], [], [], []
    for j, a_row in enumerate(tab.A):
        if j == 0:
            q_j, v_j, k_j = q, v, v
            eta, dv_j, dk_j = Sq, Sv, Sv
        else:
            psi = h * sum(a * k for a, k in zip(a_row, ks) if a != 0.0)
            dpsi = h * sum(a * dk for a, dk in zip(a_row, dks) if a != 0.0)
            v_j = v + h * sum(a * acc for a, acc in zip(a_row, accs) if a != 0.0)
            dv_j = Sv + h * sum(a * da for a, da in zip(a_row, daccs) if a != 0.0)
            q_j = model.integrate(q, psi)
            eta = _ad_exp_neg(model, psi) @ Sq + _dexp(model, -psi) @ dpsi
            Dinv = model.dexp_inv(-psi)
            k_j = Dinv @ v_j
            dk_j = Dinv @ dv_j - _dexp_inv_derivative(model, -psi, v_j) @ dpsi
        acc, aq, av, at = forward_dynamics_derivatives(model, q_j, v_j, tau, passive)
        ks.append(k_j)
        dks.append(dk_j)
        accs.append(acc)
        daccs.append(aq @ eta + av @ dv_j + at @ St)
    phi = h * sum(b * k for b, k in zip(tab.b, ks))
    dphi = h * sum(b * dk for b, dk in zip(tab.b, dks))
    q1 = model.integrate(q, phi)
    v1 = v + h * sum(b * acc for b, acc in zip(tab.b, accs))
    J = np.vstack([_ad_exp_neg(model, phi) @ Sq + _dexp(model, -phi) @ dphi,
                   Sv + h * sum(b * da for b, da in zip(tab.b, daccs))])
    return J[:, :2 * nv], J[:, 2 * nv:], q1, v1
