"""Time-parametrised references ``ref(t) -> (q_d, v_d, a_d)`` interpolating waypoints on ``G × Rⁿ``.

Data-oriented: a :class:`Reference` is built from arrays (waypoint times, configurations, optional body-frame
velocities and accelerations), as a node reads them from ``trajectory_msgs/JointTrajectory`` (joints: pass the
number of joints as the space) or ``MultiDOFJointTrajectory`` (base: pass the base group, configurations in the
group's layout). :func:`stack` joins a base reference and a joint reference into one in the model's layout.

Interpolation. Segment i (``t_i ≤ t ≤ t_{i+1}``, ``T = t_{i+1} − t_i``) is ``q(t) = q_i · exp(φ(t))`` with φ a
polynomial in the tangent space at q_i (cubic or quintic Hermite) meeting

    φ(t_i) = 0,          φ̇(t_i) = v_i,                  φ̈(t_i) = a_i,
    φ(t_{i+1}) = ξ,      φ̇(t_{i+1}) = dexp(−ξ)⁻¹ v_{i+1},  φ̈(t_{i+1}) = dexp(−ξ)⁻¹ (a_{i+1} − (D dexp(−ξ)[−φ̇]) φ̇),

``ξ = log(q_i⁻¹ q_{i+1})``, so that the body velocity ``v = dexp(−φ) φ̇`` and acceleration
``a = dexp(−φ) φ̈ + (D dexp(−φ)[−φ̇]) φ̇`` take the waypoint values (velocity and acceleration are continuous at the
waypoints for quintic, velocity for cubic). On the joints ``dexp = I``: ordinary Hermite splines. Without waypoint
velocities and accelerations (zeros, the default) every boundary vector is parallel to ξ and the segment is the
geodesic ``q_i · exp(s(t) ξ)`` with the smoothstep ``s`` (``3τ² − 2τ³`` cubic, ``10τ³ − 15τ⁴ + 6τ⁵`` quintic),
starting and ending at rest; ``v_d`` and ``a_d`` are then exactly ``ṡ ξ`` and ``s̈ ξ``.

Outside ``[t_0, t_N]`` the reference holds the first / last configuration with zero velocity and acceleration.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from mbs_ros.dynamics.kernels.laws import AVAILABLE as _COMPILED, reference_segment
from mbs_ros.dynamics.lie import SE3
from mbs_ros.controllers.space import ConfigurationSpace

__all__ = ["Reference", "stack"]


class Reference:
    """Waypoint reference; ``ref(t) -> (q_d, v_d, a_d)``.

    ``space``: a model, a base :class:`~mbs_ros.dynamics.lie.LieGroup`, an int (plain joints) or a
    :class:`ConfigurationSpace`. ``times`` (N,) strictly increasing; ``positions`` (N, nq); ``velocities`` and
    ``accelerations`` (N, nv) body-frame (default zeros: rest at every waypoint). ``interpolation``: ``"quintic"``
    (default; C² through the waypoints) or ``"cubic"`` (C¹; accelerations must then be omitted). A reference on SE(3)
    alone or on plain coordinates evaluates its segments with the compiled kernel of
    :func:`mbs_ros.dynamics.kernels.laws.reference_segment` (the same equations); ``compiled=False`` keeps the
    numpy code, the reference it is tested against.
    """

    def __init__(self, space, times, positions, velocities=None, accelerations=None, interpolation: str = "quintic",
                 compiled=None):
        sp = ConfigurationSpace.of(space)
        if interpolation not in ("quintic", "cubic"):
            raise ValueError(f"interpolation must be 'quintic' or 'cubic', got {interpolation!r}")
        times = np.array(times, dtype=float).reshape(-1)
        n = times.size
        if n == 0:
            raise ValueError("a reference needs at least one waypoint")
        if not np.all(np.isfinite(times)):
            raise ValueError("waypoint times must be finite")
        if n > 1 and np.any(np.diff(times) <= 0.0):
            raise ValueError("waypoint times must be strictly increasing")
        positions = np.array(positions, dtype=float)
        if positions.ndim == 1 and n == 1:
            positions = positions[None, :]
        if positions.shape != (n, sp.nq):
            raise ValueError(f"positions must have shape ({n}, {sp.nq}), got {positions.shape}")

        def per_point(x, name):
            if x is None:
                return np.zeros((n, sp.nv))
            x = np.array(x, dtype=float)
            if x.ndim == 1 and n == 1:
                x = x[None, :]
            if x.shape != (n, sp.nv):
                raise ValueError(f"{name} must have shape ({n}, {sp.nv}), got {x.shape}")
            return x

        velocities = per_point(velocities, "velocities")
        if interpolation == "cubic" and accelerations is not None:
            raise ValueError("cubic interpolation cannot honour waypoint accelerations; use 'quintic'")
        accelerations = per_point(accelerations, "accelerations")
        for name, x in (("positions", positions), ("velocities", velocities), ("accelerations", accelerations)):
            if not np.all(np.isfinite(x)):
                raise ValueError(f"{name} must be finite")

        self.space = sp
        self.nq, self.nv = sp.nq, sp.nv
        self.interpolation = interpolation
        self.times = times
        self.positions = np.array([sp.normalize(p) for p in positions])
        self.velocities = velocities
        self.accelerations = accelerations
        self._coeffs = [self._segment(i) for i in range(n - 1)]  # per segment: (deg+1, nv) in τ = (t − t_i)/T
        plain = sp.group is None and sp.nq == sp.nv
        se3 = sp.group is SE3 and (sp.nq, sp.nv) == (7, 6)
        #: segments evaluated by the compiled kernel: None (numpy), or whether the space is SE(3)
        self._compiled = se3 if compiled is not False and _COMPILED and (plain or se3) else None
        for a in (self.times, self.positions, self.velocities, self.accelerations):
            a.setflags(write=False)
        self._times = tuple(times.tolist())  # the same doubles, for a per-call search without numpy's overhead

    @property
    def compiled_segments(self):
        """``(se3, coefficients (segments, degree + 1, nv))`` of a reference whose segments the compiled kernel
        evaluates (what a compiled loop needs besides :attr:`times` and :attr:`positions`), else None."""
        if self._compiled is None:
            return None
        deg = 6 if self.interpolation == "quintic" else 4
        coeffs = np.stack(self._coeffs) if self._coeffs else np.zeros((0, deg, self.nv))
        return self._compiled, np.ascontiguousarray(coeffs, dtype=np.float64)

    @property
    def start_time(self) -> float:
        return float(self.times[0])

    @property
    def end_time(self) -> float:
        return float(self.times[-1])

    def _segment(self, i: int) -> np.ndarray:
        sp = self.space
        T = self.times[i + 1] - self.times[i]
        xi = sp.difference(self.positions[i], self.positions[i + 1])
        v0, a0 = self.velocities[i], self.accelerations[i]
        v1 = sp.dexp_inv(-xi, self.velocities[i + 1])  # φ̇ at the end
        c0, c1 = np.zeros(sp.nv), T * v0
        if self.interpolation == "cubic":
            r0, r1 = xi - c0 - c1, T * v1 - c1
            return np.array([c0, c1, 3 * r0 - r1, -2 * r0 + r1])
        a1 = sp.dexp_inv(-xi, self.accelerations[i + 1] - sp.dexp_derivative(-xi, -v1, v1))  # φ̈ at the end
        c2 = 0.5 * T * T * a0
        r0, r1, r2 = xi - c0 - c1 - c2, T * v1 - c1 - 2 * c2, T * T * a1 - 2 * c2
        return np.array([c0, c1, c2, 10 * r0 - 4 * r1 + 0.5 * r2, -15 * r0 + 7 * r1 - r2, 6 * r0 - 3 * r1 + 0.5 * r2])

    def peak_rates(self, samples: int = 17) -> tuple[np.ndarray, np.ndarray]:
        """``(max |φ̇|, max |φ̈|)`` per velocity component over every segment, in the interpolation's tangent
        coordinates (equal to the body-frame velocity and acceleration on the joints and on geodesic rest-to-rest
        segments), sampled at ``samples`` equally spaced points per segment including both ends. Vectorised over
        the segments (a bound for a node to check a received reference against, cheap for 10⁴ waypoints); zeros
        for a single waypoint. The waypoint values themselves are among the samples."""
        nv = self.nv
        if not self._coeffs:
            return np.zeros(nv), np.zeros(nv)
        C = np.stack(self._coeffs)  # (nseg, deg + 1, nv)
        T = np.diff(self.times)[:, None, None]
        deg = C.shape[1] - 1
        tau = np.linspace(0.0, 1.0, max(2, int(samples)))[:, None]
        k = np.arange(deg + 1)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            d1 = np.where(k >= 1, k * tau ** np.maximum(k - 1, 0), 0.0)  # (s, deg + 1)
            d2 = np.where(k >= 2, k * (k - 1) * tau ** np.maximum(k - 2, 0), 0.0)
            vel = np.abs(np.einsum("sk,nkv->nsv", d1, C)) / T
            acc = np.abs(np.einsum("sk,nkv->nsv", d2, C)) / (T * T)
        vmax, amax = vel.max(axis=(0, 1)), acc.max(axis=(0, 1))
        vmax[~np.isfinite(vmax)] = np.inf
        amax[~np.isfinite(amax)] = np.inf
        return vmax, amax

    def __call__(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q_d, v_d, a_d)`` at time t (copies)."""
        t = float(t)
        times = self._times
        if not math.isfinite(t):
            raise ValueError(f"time must be finite, got {t}")
        if t < times[0] or t >= times[-1]:
            q = self.positions[0] if t < times[0] else self.positions[-1]
            return q.copy(), np.zeros(self.nv), np.zeros(self.nv)
        i = bisect.bisect_right(times, t) - 1  # np.searchsorted(times, t, side="right") - 1
        T = times[i + 1] - times[i]
        tau = (t - times[i]) / T
        c = self._coeffs[i]
        if self._compiled is not None:
            return reference_segment(self._compiled, self.positions[i], c, tau, T)
        deg = c.shape[0] - 1
        k = np.arange(deg + 1)
        p = tau ** k
        dp = np.concatenate([[0.0], k[1:] * tau ** (k[1:] - 1)])
        ddp = np.concatenate([[0.0, 0.0], k[2:] * (k[2:] - 1) * tau ** (k[2:] - 2)])
        phi = p @ c
        phi_dot = (dp @ c) / T
        phi_ddot = (ddp @ c) / (T * T)
        sp = self.space
        q = sp.integrate(self.positions[i], phi)
        v = sp.dexp(-phi, phi_dot)
        a = sp.dexp(-phi, phi_ddot) + sp.dexp_derivative(-phi, -phi_dot, phi_dot)
        return q, v, a


class _Stacked:
    """Concatenation of references (e.g. base then joints) into one configuration vector."""

    def __init__(self, refs):
        self.references = tuple(refs)
        self.nq = sum(r.nq for r in self.references)
        self.nv = sum(r.nv for r in self.references)
        self.start_time = min(r.start_time for r in self.references)
        self.end_time = max(r.end_time for r in self.references)

    def __call__(self, t: float):
        parts = [r(t) for r in self.references]
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(3))


def stack(*references) -> _Stacked:
    """One reference ``t -> (q_d, v_d, a_d)`` from several whose configuration layouts follow each other (e.g. a
    base reference on G then a joint reference on Rⁿ, giving the model's ``[base; joints]`` layout). Each part keeps
    its own waypoint times and holds its own last point."""
    if not references:
        raise ValueError("stack needs at least one reference")
    return _Stacked(references)
