"""The controller's command within the actuators' limits, ROS-free: the generalised force ``τ`` of a control law
turned into what the node publishes, a base wrench (or thrusts) and joint efforts, each saturated.

The base part is lifted to a body-frame wrench at the base origin, ``W = (Bᵀ)⁺ τ_base`` with ``V_base = B v_base``
(:meth:`Model.velocity_map`; ``H τ_base`` for the SE(3) subgroups), its force and torque scaled down along their
directions to the limits (:func:`mbs_ros.dynamics.simulation.actuators.saturate_wrench`) and, with thrusters, allocated to them
(:mod:`mbs_ros.controllers.allocation`); the joint efforts are clipped (:func:`mbs_ros.dynamics.simulation.actuators.clip_efforts`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from mbs_ros.controllers.allocation import ThrusterAllocation
from mbs_ros.dynamics.simulation import actuators
from mbs_ros.dynamics.model import source as ms

__all__ = ["Command", "CommandOutput"]


@dataclass(frozen=True)
class Command:
    """``wrench`` (6,) [N, N m] (None: fixed base), ``effort`` (nj,), ``thrust`` (n thrusters,) (None: no
    allocation) and whether any of them had to be saturated."""

    wrench: Optional[np.ndarray]
    effort: np.ndarray
    thrust: Optional[np.ndarray]
    saturated: bool


class CommandOutput:
    """``CommandOutput(model, limits, allocation=None)(tau, q) -> Command`` (module docstring). ``q`` None (a zero
    command without a state) gives a zero wrench."""

    def __init__(self, model, limits: actuators.CommandLimits, allocation: Optional[ThrusterAllocation] = None):
        self.model = model
        self.limits = limits
        self.allocation = allocation
        self.floating = model.group is not None
        self.nv_base = ms.base_sizes(model)[1]
        self.max_effort = np.asarray(limits.max_effort, dtype=float)
        # (Bᵀ)⁺ once where B does not depend on q (the SE(3) subgroups): the same matrix every call would compute
        self._BT_pinv = (np.linalg.pinv(model.velocity_map(None).T)
                         if self.floating and model.velocity_map_is_constant else None)

    @property
    def wrench_map(self) -> Optional[np.ndarray]:
        """``(Bᵀ)⁺`` that lifts the base part of ``τ`` to the wrench where ``B`` does not depend on q, else None."""
        return self._BT_pinv

    def __call__(self, tau: np.ndarray, q: Optional[np.ndarray]) -> Command:
        tau = np.asarray(tau, dtype=float)
        nvb = self.nv_base
        saturated = False
        W = thrust = None
        if self.floating:
            W = np.zeros(6)
            if q is not None and tau[:nvb].any():
                BT_pinv = self._BT_pinv
                if BT_pinv is None:
                    BT_pinv = np.linalg.pinv(self.model.velocity_map(q).T)  # V_base = B v_base; tau_base = B^T W
                W = BT_pinv @ tau[:nvb]
                if not np.isfinite(W).all():
                    raise FloatingPointError("non-finite wrench")
            W, saturated = actuators.saturate_wrench(W, self.limits)
            if self.allocation is not None:
                alloc = self.allocation(W)
                thrust = alloc.thrust
                saturated = saturated or alloc.saturated
        effort, clipped = actuators.clip_efforts(tau[nvb:], self.max_effort)
        return Command(W, effort, thrust, saturated or clipped)
