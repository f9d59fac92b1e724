"""The configuration space the control laws and references work on: a base Lie group times plain joint coordinates.

A configuration is ``q = [q_base; q_joints]`` (Pinocchio's layout), a velocity ``v = [v_base; qdot_joints]`` with
the base part the left-trivialised (body-frame) quasi-velocity. The space is the direct product ``G × Rⁿ`` (joints
are abelian: revolute, prismatic and continuous joints all have ``Ad = dexp = I`` and ``ad = 0``), so every
group operation below acts on the base block and is the identity (or zero) on the joints.

:class:`ConfigurationSpace` wraps anything with that structure:

* a model (``Model.rigid_body`` or the multibody ``Model.from_urdf``): ``difference``/``integrate`` are the model's
  own, the base group is ``model.group`` (no base block when the base is fixed);
* a :class:`~mbs_ros.dynamics.lie.LieGroup` alone (a base-only reference, e.g. from ``MultiDOFJointTrajectory``);
* an integer ``n``: ``n`` plain coordinates (a joints-only reference, e.g. from ``JointTrajectory``).

Besides the group's closed forms it evaluates the directional derivative of ``dexp`` (needed for exact error
dynamics and for body-frame accelerations of interpolated curves) by the block-triangular identity
``f([[A, B], [0, A]]) = [[f(A), Df(A)[B]], [0, f(A)]]`` (Higham, *Functions of Matrices*, thm 3.6) with
``f(z) = (eᶻ − 1)/z``, ``dexp(ξ) = f(ad_ξ)``, summed as a power series applied to a vector. ``f`` is entire; the
series' terms fall like ``θᵏ/(k+1)!`` with θ the rotation angle of ξ (translations only add a polynomial factor),
so it converges in a few dozen terms for any angle.
"""
from __future__ import annotations

import time

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit
from mbs_ros.dynamics.lie import LieGroup

__all__ = ["ConfigurationSpace", "warm_up"]

_SERIES_MAX_TERMS = 400


@jit
def _phi1_series(X, w, max_terms):
    """``(Σ_k X^k w/(k+1)!, converged)``, stopping after two consecutive terms below 1e-17 of the sum (they decay
    monotonically once k exceeds the angle). Compiled (the loop is ~100 µs in Python at n = 12)."""
    n = w.shape[0]
    term = w.copy()
    total = w.copy()
    nxt = np.empty(n)
    negligible = 0
    for k in range(1, max_terms):
        inv = 1.0 / (k + 1)
        for i in range(n):
            acc = 0.0
            for j in range(n):
                acc += X[i, j] * term[j]
            nxt[i] = acc * inv
        tt = 0.0
        TT = 0.0
        for i in range(n):
            term[i] = nxt[i]
            total[i] += nxt[i]
            tt += nxt[i] * nxt[i]
        for i in range(n):
            TT += total[i] * total[i]
        if tt <= 1e-34 * TT:
            negligible += 1
            if negligible == 2:
                return total, True
        else:
            negligible = 0
    return total, False


def warm_up() -> float:
    """Compile (or load from numba's on-disk cache) the controllers' one kernel, the dexp-derivative series;
    returns the seconds it took (the dynamics kernels: :func:`mbs_ros.dynamics.kernels.compiled.warm_up`)."""
    t0 = time.perf_counter()
    _phi1_series(np.zeros((2, 2)), np.ones(2), 2)
    return time.perf_counter() - t0


def _phi1_block_apply(A: np.ndarray, B: np.ndarray, z: np.ndarray, transpose: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(f(A) z, Df(A)[B] z)``, or with ``transpose`` ``(f(A)ᵀ z, (Df(A)[B])ᵀ z)``, f(x) = (eˣ − 1)/x.

    Sums ``Σ_k X^k w/(k+1)!`` with X = [[A, B], [0, A]] and w = [0; z] (Xᵀ and w = [z; 0] when transposed).
    """
    n = A.shape[0]
    X = np.zeros((2 * n, 2 * n))
    if transpose:
        X[:n, :n] = A.T
        X[n:, :n] = B.T
        X[n:, n:] = A.T
        term = np.concatenate([z, np.zeros(n)])
    else:
        X[:n, :n] = A
        X[:n, n:] = B
        X[n:, n:] = A
        term = np.concatenate([np.zeros(n), z])
    total, converged = _phi1_series(X, term, _SERIES_MAX_TERMS)
    if not converged:  # pragma: no cover - needs an astronomically large argument
        raise FloatingPointError("dexp derivative series did not converge")
    if transpose:
        return total[:n], total[n:]
    return total[n:], total[:n]


def _base_group(model) -> LieGroup | None:
    if getattr(model, "base", None) == "fixed":
        return None
    group = getattr(model, "base_group", None)
    if group is None:
        group = getattr(model, "group", None)
    return group if isinstance(group, LieGroup) else None


class ConfigurationSpace:
    """``G × Rⁿ`` with ``G`` the base group (or none); see the module docstring.

    Attributes: ``group`` (base :class:`LieGroup` or None), ``nq``, ``nv``, ``nq_base``, ``nv_base``. Vectors are
    split as ``x[:nv_base]`` (base, body frame) and ``x[nv_base:]`` (joints).
    """

    def __init__(self, group: LieGroup | None = None, n_joints: int = 0, *, model=None):
        n_joints = int(n_joints)
        if n_joints < 0:
            raise ValueError(f"n_joints must be >= 0, got {n_joints}")
        self.group = group
        self.nq_base = group.nq if group is not None else 0
        self.nv_base = group.dim if group is not None else 0
        self._model = model
        if model is not None:
            self.nq, self.nv = int(model.nq), int(model.nv)
        else:
            self.nq, self.nv = self.nq_base + n_joints, self.nv_base + n_joints
        if self.nv < self.nv_base or self.nq < self.nq_base:
            raise ValueError("the model has fewer coordinates than its base group")
        if self.nv == 0:
            raise ValueError("the configuration space is empty")

    @classmethod
    def of(cls, obj) -> "ConfigurationSpace":
        """The space of a model, a Lie group (base only), an integer (that many plain coordinates) or a space."""
        if isinstance(obj, ConfigurationSpace):
            return obj
        if isinstance(obj, LieGroup):
            return cls(obj, 0)
        if isinstance(obj, (int, np.integer)):
            return cls(None, int(obj))
        if all(hasattr(obj, a) for a in ("nq", "nv", "difference", "integrate")):
            group = _base_group(obj)
            nvb = group.dim if group is not None else 0
            return cls(group, int(obj.nv) - nvb, model=obj)
        raise TypeError(f"cannot make a configuration space of {type(obj).__name__}: "
                        "pass a model, a LieGroup or a number of joint coordinates")

    def __repr__(self) -> str:
        base = self.group.name if self.group is not None else "none"
        return f"<ConfigurationSpace base={base} nq={self.nq} nv={self.nv}>"

    # ------------------------------------------------------------------ group operations on configurations
    def neutral(self) -> np.ndarray:
        if self._model is not None and hasattr(self._model, "neutral"):
            return np.asarray(self._model.neutral(), dtype=float)
        q = np.zeros(self.nq)
        if self.group is not None:
            q[: self.nq_base] = self.group.identity()
        return q

    def difference(self, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
        """``log(q0⁻¹ q1)``: base by the group's log, joints ``q1 − q0``."""
        if self._model is not None:
            return np.asarray(self._model.difference(q0, q1), dtype=float)
        nb = self.nq_base
        out = np.empty(self.nv)
        if self.group is not None:
            G = self.group
            out[: self.nv_base] = G.log(G.compose(G.inverse(q0[:nb]), q1[:nb]))
        out[self.nv_base:] = q1[nb:] - q0[nb:]
        return out

    def integrate(self, q: np.ndarray, xi: np.ndarray) -> np.ndarray:
        """``q · exp(ξ)``."""
        if self._model is not None:
            return np.asarray(self._model.integrate(q, xi), dtype=float)
        nb = self.nq_base
        out = np.empty(self.nq)
        if self.group is not None:
            out[:nb] = self.group.integrate(q[:nb], xi[: self.nv_base])
        out[nb:] = q[nb:] + xi[self.nv_base:]
        return out

    def normalize(self, q: np.ndarray) -> np.ndarray:
        """Re-project the base rotation part to unit length (a copy)."""
        q = np.array(q, dtype=float)
        if self.group is not None:
            q[: self.nq_base] = self.group.normalize(q[: self.nq_base])
        return q

    def error_adjoint(self, q: np.ndarray, q_d: np.ndarray) -> np.ndarray | None:
        """Base block of ``Ad_E``, ``E = q⁻¹ q_d`` (None without a base): maps a body twist at ``q_d`` to the same
        motion seen in the body frame at ``q``."""
        if self.group is None:
            return None
        G, nb = self.group, self.nq_base
        return G.adjoint(G.compose(G.inverse(q[:nb]), q_d[:nb]))

    def apply_base(self, Ad_base: np.ndarray | None, x: np.ndarray) -> np.ndarray:
        """``diag(Ad_base, I) x``."""
        x = np.array(x, dtype=float)
        if Ad_base is not None:
            x[: self.nv_base] = Ad_base @ x[: self.nv_base]
        return x

    # ------------------------------------------------------------------ algebra (act on the base block only)
    def ad(self, xi: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``ad_ξ x = [ξ, x]`` (zero on the joints)."""
        out = np.zeros(self.nv)
        nb = self.nv_base
        if nb:
            out[:nb] = self.group.ad(xi[:nb]) @ x[:nb]
        return out

    def dexp(self, xi: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``dexp(ξ) x`` (right-trivialised, as in :mod:`mbs_ros.dynamics.lie`)."""
        return self._block(self.group.dexp if self.nv_base else None, xi, x, False)

    def dexp_inv(self, xi: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``dexp(ξ)⁻¹ x``."""
        return self._block(self.group.dexp_inv if self.nv_base else None, xi, x, False)

    def dexp_inv_T(self, xi: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``dexp(ξ)⁻ᵀ x``."""
        return self._block(self.group.dexp_inv if self.nv_base else None, xi, x, True)

    def _block(self, fn, xi, x, transpose):
        x = np.array(x, dtype=float)
        if fn is not None:
            nb = self.nv_base
            m = fn(xi[:nb])
            x[:nb] = (m.T if transpose else m) @ x[:nb]
        return x

    def dexp_derivative(self, xi: np.ndarray, dxi: np.ndarray, x: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``(D dexp(ξ)[δξ]) x``, the derivative of ``dexp`` at ξ along δξ applied to x (its transpose applied to x
        with ``transpose``); zero on the joints. With ξ(t): ``d/dt dexp(ξ) = D dexp(ξ)[ξ̇]``."""
        out = np.zeros(self.nv)
        nb = self.nv_base
        if nb:
            G = self.group
            out[:nb] = _phi1_block_apply(G.ad(xi[:nb]), G.ad(dxi[:nb]), np.asarray(x[:nb], dtype=float), transpose)[1]
        return out
