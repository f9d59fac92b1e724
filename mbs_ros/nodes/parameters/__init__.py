"""The nodes' parameters as data, ROS-free: one :class:`Parameter` per name and node role, from which a node
declares them, ``--help`` and README list them, and the scenario loader checks keys without importing rclpy."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

__all__ = ["Parameter", "ROLES", "table", "names"]

#: node role -> module of its table (each defines ``PARAMETERS: Dict[str, Parameter]``)
ROLES = {"dynamics": "dynamics", "controller": "controller", "reference": "reference"}


@dataclass(frozen=True)
class Parameter:
    """One node parameter: ``default`` (None: the node works it out, e.g. from the model), ``range`` for a
    number (ROS's floating_point_range), ``read_only`` (start-up only)."""

    name: str
    description: str
    default: object = None
    range: Optional[Tuple[float, float]] = None
    read_only: bool = False
    extra: Dict[str, object] = field(default_factory=dict)


def from_pairs(pairs: Dict[str, tuple]) -> Dict[str, Parameter]:
    """A table from ``name -> (description, {"read_only": ..., "floating_point_range": ...})``."""
    out = {}
    for name, (description, extra) in pairs.items():
        extra = dict(extra) if isinstance(extra, dict) else {"default": extra}
        out[name] = Parameter(name, description, default=extra.pop("default", None),
                              range=extra.pop("floating_point_range", None),
                              read_only=bool(extra.pop("read_only", False)), extra=extra)
    return out


def table(role: str) -> Dict[str, Parameter]:
    """The parameters of node ``role`` (dynamics, controller, reference)."""
    if role not in ROLES:
        raise KeyError(f"no node role {role!r}; one of {', '.join(ROLES)}")
    return importlib.import_module(f"{__name__}.{ROLES[role]}").PARAMETERS


def names(role: str) -> Tuple[str, ...]:
    """Every parameter node ``role`` takes, ``use_sim_time`` (which every rclpy node has) included."""
    declared = tuple(table(role))
    return declared + tuple(n for n in ("use_sim_time",) if n not in declared)
