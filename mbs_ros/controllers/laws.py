"""Geometric control laws on ``G × Rⁿ``: computed torque, passivity-based (Slotine–Li), PD + gravity compensation,
and the joint-space PD + gravity compensation of a legged robot (:class:`JointPDGravity`: the base unactuated).

Every law takes the model's generic API only (``difference``, ``integrate``, ``mass_matrix``, ``coriolis_matrix``,
``gravity_forces``, ``nonlinear_effects``, ``group``), so the same code drives a single rigid body on any base group
and a multibody tree (floating or fixed base). Call signature, common to all laws::

    tau = law(q, v, q_d, v_d=None, a_d=None)      # v_d, a_d default to zero (regulation)
    e, edot = law.error(q, v, q_d, v_d)
    tau_fn = law.feedback(reference)              # tau(t, q, v) for dynamics.simulate / a node's timer

Geometric tracking error (no Euler angles, no chart; valid for any attitude)
--------------------------------------------------------------------------------
With ``E = q⁻¹ q_d`` (base block on G, joints plain):

* ``e = log(E) = model.difference(q, q_d)`` — pointing from the current towards the desired configuration;
* ``ε = Ad_E v_d − v`` — the twist error, the desired body twist transported into the current body frame. It is
  the right-trivialised rate of the error, ``Ė E⁻¹ = ε``;
* ``ė = dexp(e)⁻¹ ε`` — the exact time derivative of ``e`` (``d/dt exp(e) = (dexp(e) ė)^ exp(e)``); ``ė = ε`` on the
  joints and to first order in ``e`` on the base;
* ``d/dt (Ad_E v_d) = Ad_E a_d − ad_v ε`` (from ``d/dt Ad_E = Ad_E ad_{E⁻¹Ė}``), where ``a_d = v̇_d`` is the desired
  body-frame acceleration (the derivative of the components of v_d).

``e`` is the logarithm with rotation angle in [0, π]: it jumps where the attitude error crosses π (the unavoidable
cut of any continuous feedback on a compact group); every law is smooth elsewhere.

Compiled kernels
----------------
:class:`ComputedTorque` and :class:`PDGravity` call the numba kernels of :mod:`mbs_ros.dynamics.kernels.laws`
(the same equations; the torque as one RNEA pass) where the model allows it (compiled backend, an SE(3) or fixed
base, revolute and prismatic joints); ``compiled=False`` keeps the numpy code below, the reference the kernels are
tested against. ``law.compiled`` says which one runs.

Gains
-----
A scalar, a per-DOF vector of length ``nv`` (base velocity components first, then joints) or a symmetric
``nv × nv`` matrix; all finite and positive (definite). Anything else raises ``ValueError``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from mbs_ros.dynamics.kernels.laws import CompiledComputedTorque, CompiledPDGravity, compiled_law_support
from mbs_ros.controllers.space import ConfigurationSpace

__all__ = ["ComputedTorque", "PassivityBased", "PDGravity", "JointPDGravity", "gain_matrix"]


def gain_matrix(value, n: int, name: str = "gain") -> np.ndarray:
    """``n × n`` gain matrix of a positive scalar, a positive per-DOF vector of length n, or a symmetric
    positive-definite ``n × n`` matrix (all finite); ``ValueError`` naming ``name`` otherwise."""
    try:
        a = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, a vector of length {n} or an {n}x{n} matrix, "
                         f"got {value!r}") from None
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if a.ndim == 0:
        if a <= 0.0:
            raise ValueError(f"{name} must be positive, got {float(a)}")
        return float(a) * np.eye(n)
    if a.ndim == 1:
        if a.shape != (n,):
            raise ValueError(f"{name} as a per-DOF vector needs {n} entries (nv), got {a.shape[0]}")
        if np.any(a <= 0.0):
            raise ValueError(f"{name} entries must be positive, got {a.tolist()}")
        return np.diag(a)
    if a.ndim == 2:
        if a.shape != (n, n):
            raise ValueError(f"{name} as a matrix must be {n}x{n} (nv x nv), got {a.shape[0]}x{a.shape[1]}")
        scale = max(1.0, float(np.abs(a).max()))
        if not np.allclose(a, a.T, rtol=0.0, atol=1e-12 * scale):
            raise ValueError(f"{name} must be symmetric")
        a = 0.5 * (a + a.T)
        eig = np.linalg.eigvalsh(a)
        if eig[0] <= 0.0:
            raise ValueError(f"{name} must be positive definite, its eigenvalues are {eig.tolist()}")
        return a
    raise ValueError(f"{name} must be a number, a vector of length {n} or an {n}x{n} matrix, got {a.ndim}-D input")


def _kernel(cls, model, kp, kd, compiled):
    """The compiled kernel ``cls`` of a law on ``model``, or None: ``compiled`` None (where the model allows it),
    False (never) or True (ValueError saying why it cannot)."""
    if compiled is False:
        return None
    reason = compiled_law_support(model)
    if reason:
        if compiled:
            raise ValueError(f"no compiled law for this model: {reason}")
        return None
    return cls(model, kp, kd)


class _Law:
    """Shared input handling and the geometric error of the module docstring."""

    def __init__(self, model):
        self.model = model
        self.space = ConfigurationSpace.of(model)
        self.nq, self.nv = self.space.nq, self.space.nv

    # ------------------------------------------------------------------ inputs
    def _vec(self, x, n: int, name: str, default_zero: bool = False) -> np.ndarray:
        if x is None:
            if default_zero:
                return np.zeros(n)
            raise ValueError(f"{name} is required")
        x = np.asarray(x, dtype=float)
        if x.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {x.shape}")
        return x

    def _inputs(self, q, v, q_d, v_d, a_d=None):
        return (self._vec(q, self.nq, "q"), self._vec(v, self.nv, "v"), self._vec(q_d, self.nq, "q_d"),
                self._vec(v_d, self.nv, "v_d", True), self._vec(a_d, self.nv, "a_d", True))

    # ------------------------------------------------------------------ error
    def _errors(self, q, v, q_d, v_d):
        """``(e, ε, ė, Ad_E base block, Ad_E v_d)``."""
        sp = self.space
        e = sp.difference(q, q_d)
        Ad = sp.error_adjoint(q, q_d)
        w = sp.apply_base(Ad, v_d)
        eps = w - v
        edot = sp.dexp_inv(e, eps)
        return e, eps, edot, Ad, w

    def error(self, q, v, q_d, v_d=None) -> tuple[np.ndarray, np.ndarray]:
        """``(e, ė)``: ``e = log(q⁻¹ q_d)`` (``model.difference(q, q_d)``) and its exact time derivative
        ``ė = dexp(e)⁻¹ (Ad_{q⁻¹q_d} v_d − v)`` (the transported twist error; equal to it on the joints and to first
        order on the base). Both have length nv, base components first."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        e, _, edot, _, _ = self._errors(q, v, q_d, v_d)
        return e, edot

    def twist_error(self, q, v, q_d, v_d=None) -> np.ndarray:
        """``ε = Ad_{q⁻¹q_d} v_d − v``: the desired twist seen in the current body frame minus the current one."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        return self._errors(q, v, q_d, v_d)[1]

    def feedback(self, reference: Callable[[float], tuple]) -> Callable[[float, np.ndarray, np.ndarray], np.ndarray]:
        """``tau(t, q, v) = self(q, v, *reference(t))`` with ``reference(t) -> (q_d, v_d, a_d)``."""

        def tau(t, q, v):
            q_d, v_d, a_d = reference(t)
            return self(q, v, q_d, v_d, a_d)

        return tau

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class ComputedTorque(_Law):
    """Computed torque with exact geometric error dynamics.

    ``τ = M(q) a + C(q, v) v + g(q)`` (``C v + g`` from ``model.nonlinear_effects``) with the commanded acceleration

        a = Ad_E a_d − ad_v ε − (D dexp(e)[ė]) ė + dexp(e) (K_d ė + K_p e),

    i.e. ``a_d* + dexp(e)(K_d ė + K_p e)`` with the transported desired acceleration
    ``a_d* = Ad_E a_d − ad_v ε − (D dexp(e)[ė]) ė``. Derivation: ``ε = dexp(e) ė``, so
    ``ε̇ = (D dexp(e)[ė]) ė + dexp(e) ë``; and ``ε̇ = Ad_E a_d − ad_v ε − v̇``. With a perfect model ``v̇ = a``, which
    gives **exactly** ``ë + K_d ė + K_p e = 0`` on the group as on vector spaces (not only to first order): each
    component of the log error follows the designed linear dynamics from any initial error, including attitude
    errors near π. On the joints ``dexp = I`` and ``ad = 0``: the textbook law ``a = a_d + K_d ė + K_p e``.

    ``kp``, ``kd``: see :func:`gain_matrix` (e.g. ``kp = λ², kd = 2λ`` for a double pole at −λ, or
    ``kp = λ₁λ₂, kd = λ₁ + λ₂`` for distinct real poles).
    """

    def __init__(self, model, kp, kd, compiled=None):
        super().__init__(model)
        self.kp = gain_matrix(kp, self.nv, "kp")
        self.kd = gain_matrix(kd, self.nv, "kd")
        self._kernel = _kernel(CompiledComputedTorque, model, self.kp, self.kd, compiled)
        self.compiled = self._kernel is not None

    def commanded_acceleration(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        """The acceleration ``a`` the law asks the model for (see the class docstring)."""
        q, v, q_d, v_d, a_d = self._inputs(q, v, q_d, v_d, a_d)
        return self._acceleration(q, v, q_d, v_d, a_d)

    def _acceleration(self, q, v, q_d, v_d, a_d):
        sp = self.space
        e, eps, edot, Ad, _ = self._errors(q, v, q_d, v_d)
        a_star = sp.apply_base(Ad, a_d) - sp.ad(v, eps) - sp.dexp_derivative(e, edot, edot)
        return a_star + sp.dexp(e, self.kd @ edot + self.kp @ e)

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        q, v, q_d, v_d, a_d = self._inputs(q, v, q_d, v_d, a_d)
        if self._kernel is not None:
            return self._kernel(q, v, q_d, v_d, a_d)
        a = self._acceleration(q, v, q_d, v_d, a_d)
        return self.model.mass_matrix(q) @ a + self.model.nonlinear_effects(q, v)


class PassivityBased(_Law):
    """Slotine–Li passivity-based tracking on ``G × Rⁿ``; needs the explicit Coriolis matrix C(q, v).

    With ``P = Λ K_d`` (Λ and K_d symmetric positive definite and commuting, so that P is symmetric positive
    definite — e.g. both scalars or both per-DOF vectors; ``ValueError`` otherwise):

        y   = K_d⁻¹ dexp(e)⁻ᵀ P e          (= Λ e on the joints and on SO(3) with isotropic gains, and to first order)
        v_r = Ad_E v_d + y,   s = v − v_r = −ε − y,   a_r = v̇_r = Ad_E a_d − ad_v ε + ẏ  (ẏ exact, via D dexp⁻¹)
        τ   = M(q) a_r + C(q, v) v_r + g(q) − K_d s.

    ``dexp(e)⁻ᵀ P e`` is the body-frame gradient of the potential ``eᵀ P e`` (``d/dt eᵀPe = 2 (dexp⁻ᵀPe)ᵀ ε``); it
    replaces the textbook ``Λ e`` so that the Lyapunov function below is exact on the group, not only near e = 0.

    Closed loop with a perfect model: ``M ṡ + C s + K_d s = 0``. With ``Ṁ − 2C`` skew-symmetric the function
    (:meth:`lyapunov`)

        V = ½ sᵀ M(q) s + eᵀ Λ K_d e

    has, along every closed-loop solution, ``V̇ = −εᵀ K_d ε − yᵀ K_d y ≤ 0`` (:meth:`lyapunov_rate`), zero only at
    ε = 0, e = 0: the tracking error converges from any initial condition off the cut at π. The step
    ``d/dt(½sᵀMs) = −sᵀK_d s`` is where the explicit C enters: it needs ``sᵀ(½Ṁ − C)s = 0``, which a C that only
    reproduces C v (or a non-skew factorisation) does not give.
    """

    def __init__(self, model, Lambda, kd):
        super().__init__(model)
        self.Lambda = gain_matrix(Lambda, self.nv, "Lambda")
        self.kd = gain_matrix(kd, self.nv, "kd")
        P = self.Lambda @ self.kd
        if not np.allclose(P, P.T, rtol=0.0, atol=1e-12 * max(1.0, float(np.abs(P).max()))):
            raise ValueError("Lambda @ kd must be symmetric (Lambda and kd must commute, e.g. both diagonal): "
                             "the Lyapunov function's potential e^T Lambda kd e needs it")
        self.P = 0.5 * (P + P.T)
        self._kd_inv = np.linalg.inv(self.kd)

    def _reference_velocity(self, q, v, q_d, v_d):
        """``(e, ε, ė, Ad, w, y, g_e)``, ``g_e = dexp(e)⁻ᵀ P e``, ``y = K_d⁻¹ g_e``."""
        e, eps, edot, Ad, w = self._errors(q, v, q_d, v_d)
        g_e = self.space.dexp_inv_T(e, self.P @ e)
        return e, eps, edot, Ad, w, self._kd_inv @ g_e, g_e

    def sliding_variable(self, q, v, q_d, v_d=None) -> np.ndarray:
        """``s = v − v_r``."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        _, eps, _, _, _, y, _ = self._reference_velocity(q, v, q_d, v_d)
        return -eps - y

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        q, v, q_d, v_d, a_d = self._inputs(q, v, q_d, v_d, a_d)
        sp, model = self.space, self.model
        e, eps, edot, Ad, w, y, g_e = self._reference_velocity(q, v, q_d, v_d)
        v_r = w + y
        s = v - v_r
        # y = K_d⁻¹ D(e)ᵀ P e, D = dexp(e)⁻¹:  Ḋ = −D (D dexp(e)[ė]) D, so
        # ẏ = K_d⁻¹ Dᵀ (P ė − (D dexp(e)[ė])ᵀ Dᵀ P e)
        y_dot = self._kd_inv @ sp.dexp_inv_T(e, self.P @ edot - sp.dexp_derivative(e, edot, g_e, transpose=True))
        a_r = sp.apply_base(Ad, a_d) - sp.ad(v, eps) + y_dot
        return (model.mass_matrix(q) @ a_r + model.coriolis_matrix(q, v) @ v_r + model.gravity_forces(q)
                - self.kd @ s)

    def lyapunov(self, q, v, q_d, v_d=None) -> float:
        """``V = ½ sᵀ M(q) s + eᵀ Λ K_d e``."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        e, eps, _, _, _, y, _ = self._reference_velocity(q, v, q_d, v_d)
        s = -eps - y
        return float(0.5 * s @ self.model.mass_matrix(q) @ s + e @ self.P @ e)

    def lyapunov_rate(self, q, v, q_d, v_d=None) -> float:
        """``V̇ = −εᵀ K_d ε − yᵀ K_d y``, the rate along the closed loop when the model is exact."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        _, eps, _, _, _, y, _ = self._reference_velocity(q, v, q_d, v_d)
        return float(-(eps @ self.kd @ eps) - (y @ self.kd @ y))


class PDGravity(_Law):
    """PD plus gravity compensation (baseline): ``τ = dexp(e)⁻ᵀ K_p e + K_d ε + g(q)``.

    ``dexp(e)⁻ᵀ K_p e`` is the body-frame gradient of ``½ eᵀ K_p e`` — equal to ``K_p e`` on the joints, on SO(3)
    with an isotropic K_p, and to first order everywhere — and ``ε = Ad_E v_d − v`` the transported twist error.
    For a constant setpoint (``v_d = 0``, ``ε = −v``) the energy :meth:`lyapunov`
    ``V = ½ vᵀ M v + ½ eᵀ K_p e`` has ``V̇ = −vᵀ K_d v ≤ 0`` exactly (skew ``Ṁ − 2C``), and LaSalle's principle gives
    convergence to e = 0 (where ``V̇ ≡ 0`` forces ``v ≡ 0``, hence ``dexp⁻ᵀ K_p e = 0``, hence e = 0). With a moving
    reference it tracks with a lag; use it for regulation.
    """

    def __init__(self, model, kp, kd, compiled=None):
        super().__init__(model)
        self.kp = gain_matrix(kp, self.nv, "kp")
        self.kd = gain_matrix(kd, self.nv, "kd")
        self._kernel = _kernel(CompiledPDGravity, model, self.kp, self.kd, compiled)
        self.compiled = self._kernel is not None

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d, a_d)
        if self._kernel is not None:
            return self._kernel(q, v, q_d, v_d)
        e, eps, _, _, _ = self._errors(q, v, q_d, v_d)
        return self.space.dexp_inv_T(e, self.kp @ e) + self.kd @ eps + self.model.gravity_forces(q)

    def lyapunov(self, q, v, q_d, v_d=None) -> float:
        """``V = ½ εᵀ M ε + ½ eᵀ K_p e`` (``½ vᵀMv + ½ eᵀK_p e`` for a constant setpoint)."""
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d)
        e, eps, _, _, _ = self._errors(q, v, q_d, v_d)
        return float(0.5 * eps @ self.model.mass_matrix(q) @ eps + 0.5 * e @ self.kp @ e)


class JointPDGravity(_Law):
    """Joint-space PD plus gravity compensation for a robot whose base is not actuated (a legged robot standing
    on its feet): ``τ_base = 0``, ``τ_j = K_p (q_d − q)_j + K_d (v_d − v)_j + g_j(q)``, ``g_j`` the joint rows of
    ``model.gravity_forces`` (the torques that hold the legs against gravity with the base held; the load the
    feet carry is left to the PD). The base reference is not used: the ground holds the base through the
    contacts. Gains: a scalar, one per joint (nj), or one per velocity component (nv, the base entries ignored),
    each finite and > 0. Numpy only (no compiled kernel): the headless fast path does not take it."""

    def __init__(self, model, kp, kd):
        super().__init__(model)
        self.nj = len(model.joint_names)
        if not self.nj:
            raise ValueError("kp: the joint-space law needs joints (this model has none)")
        self.nb = self.nv - self.nj
        self.kp = self._joint_gain(kp, "kp")
        self.kd = self._joint_gain(kd, "kd")

    def _joint_gain(self, value, name: str) -> np.ndarray:
        x = np.asarray(value, dtype=float)
        if x.ndim == 1 and x.shape[0] == self.nv and self.nv != self.nj:
            x = x[self.nb:]
        return gain_matrix(x, self.nj, name)

    def __call__(self, q, v, q_d, v_d=None, a_d=None) -> np.ndarray:
        q, v, q_d, v_d, _ = self._inputs(q, v, q_d, v_d, a_d)
        e = self.space.difference(q, q_d)[self.nb:]  # the joints' rows: q_d - q (continuous joints: the angle)
        tau = np.zeros(self.nv)
        tau[self.nb:] = self.kp @ e + self.kd @ (v_d[self.nb:] - v[self.nb:]) + self.model.gravity_forces(q)[self.nb:]
        return tau
