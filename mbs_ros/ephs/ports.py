"""Typed ports of the EPHS language (seed 000 §2): a port exposes one energy domain of a system."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = ["Port", "pairing"]


@dataclass(frozen=True)
class Port:
    """A port (§2): ``name``, its quantity (``kind`` such as "displacement", "momentum", "entropy", "pose",
    "rigid_body_momentum"; ``dim``; optional Lie ``group``) and whether it is a power port (state x, flow f,
    effort e, power ⟨e|f⟩) or a state port (x only, the dashed line of Fig. 3).

    ``dim`` is the dimension of flows and efforts. A group-valued quantity (``group``, e.g. ``SE3`` for a pose)
    keeps its state in the group's layout (``group.nq`` numbers) and its flows and efforts LEFT-TRIVIALISED,
    u = T_qL_{q⁻¹}(q̇) and T*_eL_q(e) (§3.8, eq. 11), which leaves ⟨e|f⟩ unchanged."""

    name: str
    kind: str
    dim: int = 1
    power: bool = True
    group: object = None

    def __post_init__(self):
        if self.dim < 1 or (self.group is not None and self.group.dim != self.dim):
            raise ValueError(f"port {self.name!r}: dim {self.dim} does not match its quantity")

    @property
    def quantity(self) -> tuple:
        """What a junction checks: ports joined at one junction carry the same quantity (§2)."""
        return (self.kind, self.dim, None if self.group is None else self.group.name)

    @property
    def nx(self) -> int:
        """Number of state coordinates (``group.nq`` for a group, else ``dim``)."""
        return self.dim if self.group is None else self.group.nq

    def as_state_port(self) -> "Port":
        return replace(self, power=False)


def pairing(e, f) -> float:
    """⟨e|f⟩ = eᵀf, the duality pairing under the identification 𝔤* ≅ Rⁿ (§3.10)."""
    return float(np.dot(np.ravel(e), np.ravel(f)))
