"""The four primitive components of EPHS (seed 000 §2, §4.2, §5.2): storage, reversible (Dirac),
irreversible (Onsager) and the isothermal environment.

Sign convention (eq. 4): at a junction the flows of the inner ports sum to the outer flow, so a storage's
flow ẋ is minus the sum of the flows the other components draw from the junction."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from mbs_ros.ephs.ports import Port

__all__ = ["Storage", "Environment", "Dirac", "Onsager", "FD_STEP"]

#: Central-difference step of :meth:`Storage.effort` without a gradient: h = FD_STEP · max(1, |x_i|) (for a
#: group, h = FD_STEP along each left-trivialised direction). Truncation ~h²|E'''|, rounding ~ε|E|/h: about
#: 1e-10 relative for smooth energies of order one.
FD_STEP = 6e-6


def _concat(parts) -> np.ndarray:
    return np.concatenate([np.ravel(p) for p in parts]) if parts else np.zeros(0)


class Storage:
    """Storage component (eqs. 1, 2, 18, 20): one power port, energy E(x); flow f = ẋ, effort e = dE(x).

    ``gradient(x)`` gives dE (left-trivialised T*_eL_q dE for a group-valued port); without it the effort is a
    central difference with step :data:`FD_STEP`. For mechanical storage exergy equals energy (§2)."""

    def __init__(self, port: Port, energy: Callable, gradient: Callable | None = None, step: float = FD_STEP):
        if not port.power:
            raise ValueError("a storage port is a power port")
        self.port, self._energy, self._gradient, self.step = port, energy, gradient, float(step)

    @property
    def ports(self) -> tuple:
        return (self.port,)

    def energy(self, x) -> float:
        return float(self._energy(np.asarray(x, dtype=float)))

    exergy = energy

    def effort(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self._gradient is not None:
            return np.asarray(self._gradient(x), dtype=float).reshape(self.port.dim)
        g, e = self.port.group, np.zeros(self.port.dim)
        for i in range(self.port.dim):
            if g is None:
                h = self.step * max(1.0, abs(x[i]))
                dx = np.zeros_like(x)
                dx[i] = h
                e[i] = (self._energy(x + dx) - self._energy(x - dx)) / (2 * h)
            else:
                xi = np.zeros(g.dim)
                xi[i] = self.step
                e[i] = (self._energy(g.integrate(x, xi)) - self._energy(g.integrate(x, -xi))) / (2 * self.step)
        return e


class Environment:
    """Isothermal reservoir at θ₀ (eqs. 7, 30): an entropy port whose exergy is ≡ 0, so its effort is 0.

    In the energy picture its energy is θ₀ s and its effort θ₀ (:meth:`energy`, :attr:`theta0`)."""

    def __init__(self, theta0: float, name: str = "s"):
        if not theta0 > 0:
            raise ValueError("theta0 must be > 0 (absolute temperature)")
        self.theta0, self.port = float(theta0), Port(name, "entropy")

    @property
    def ports(self) -> tuple:
        return (self.port,)

    def energy(self, x) -> float:
        return self.theta0 * float(np.ravel(x)[0])

    def exergy(self, x) -> float:
        return 0.0

    def effort(self, x) -> np.ndarray:
        return np.zeros(1)


class Dirac:
    """Reversible component (eqs. 3, 19, 21): flows = J(x) efforts over the power ports, J skew-symmetric,
    hence Σ⟨e|f⟩ = 0. ``J`` is a constant matrix or ``J(*states)`` of the states of all ports (in order)."""

    def __init__(self, ports: Sequence[Port], J):
        self.ports, self._J = tuple(ports), J

    def matrix(self, states) -> np.ndarray:
        return np.asarray(self._J(*states) if callable(self._J) else self._J, dtype=float)

    def flows(self, states, efforts) -> list:
        """Flows of the ports (None for state ports) from their states and efforts (None for state ports)."""
        return _split(self.ports, self.matrix(states) @ _concat([e for e in efforts if e is not None]))


class Onsager:
    """Irreversible component (eqs. 6, 29): f = (1/θ₀) M e over the power ports, M symmetric ≥ 0 ⇒ exergy
    destruction Σ⟨e|f⟩ = eᵀMe/θ₀ ≥ 0 (entropy production: that over θ₀). ``M(states, efforts)`` may depend
    on the port states and efforts (eq. 6: on υ = p.e and θ = θ₀ + s.e). Energy is conserved when M annihilates
    the driving forces, the efforts in the energy picture (:meth:`driving_forces`, eq. 6: (υ, θ))."""

    def __init__(self, ports: Sequence[Port], M, theta0: float):
        self.ports, self._M, self.theta0 = tuple(ports), M, float(theta0)

    def matrix(self, states, efforts) -> np.ndarray:
        return np.asarray(self._M(states, efforts) if callable(self._M) else self._M, dtype=float)

    def driving_forces(self, efforts) -> np.ndarray:
        """Concatenated power-port efforts in the energy picture: θ = θ₀ + s.e on entropy ports."""
        return _concat([e + (self.theta0 if p.kind == "entropy" else 0.0)
                        for p, e in zip(self.ports, efforts) if p.power])

    def flows(self, states, efforts) -> list:
        e = _concat([e for e in efforts if e is not None])
        return _split(self.ports, self.matrix(states, efforts) @ e / self.theta0)


def _split(ports, f) -> list:
    out, i = [], 0
    for p in ports:
        out.append(f[i:i + p.dim] if p.power else None)
        i += p.dim if p.power else 0
    return out
