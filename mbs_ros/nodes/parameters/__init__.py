"""The nodes' parameters as data, ROS-free: one :class:`Parameter` per name and node role, from which a node
declares them, ``--help`` and README list them, and the scenario loader checks keys without importing rclpy."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

__all__ = ["Parameter", "ROLES", "TYPES", "table", "names", "markdown_table"]

#: ``Parameter.type`` values: ROS's parameter types, and "double|double[]" for one number or a list of them
TYPES = ("string", "bool", "double", "double[]", "string[]", "double|double[]")

#: node role -> module of its table (each defines ``PARAMETERS: Dict[str, Parameter]``)
ROLES = {"dynamics": "dynamics", "controller": "controller", "reference": "reference", "estimator": "estimator"}


@dataclass(frozen=True)
class Parameter:
    """One node parameter: ``default`` (None: the node works it out, e.g. from the model), ``range`` for a
    number (ROS's floating_point_range), ``read_only`` (start-up only), ``type`` (:data:`TYPES`; None: from the
    value it is declared with) and ``choices`` (the values a string may take)."""

    name: str
    description: str
    default: object = None
    range: Optional[Tuple[float, float]] = None
    read_only: bool = False
    extra: Dict[str, object] = field(default_factory=dict)
    type: Optional[str] = None
    choices: Tuple[str, ...] = ()


def from_pairs(pairs: Dict[str, tuple]) -> Dict[str, Parameter]:
    """A table from ``name -> (description, {"read_only": ..., "floating_point_range": ..., "default": ...,
    "type": ..., "choices": ...})``."""
    out = {}
    for name, (description, extra) in pairs.items():
        extra = dict(extra) if isinstance(extra, dict) else {"default": extra}
        kind = extra.pop("type", None)
        if kind is not None and kind not in TYPES:
            raise ValueError(f"parameter {name}: type {kind!r} is not one of {', '.join(TYPES)}")
        out[name] = Parameter(name, description, default=extra.pop("default", None),
                              range=extra.pop("floating_point_range", None),
                              read_only=bool(extra.pop("read_only", False)), type=kind,
                              choices=tuple(extra.pop("choices", ())), extra=extra)
    return out


def _cell(value) -> str:
    if value is None:
        return "(from the model)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def markdown_table(parameters: Dict[str, Parameter]) -> str:
    """The parameters as a Markdown table (name, type, default, range or choices, read-only, description): what
    docs/<node>.md shows, generated from the data (a test compares the two)."""
    lines = ["| name | type | default | range / choices | start-up only | description |",
             "|---|---|---|---|---|---|"]
    for p in parameters.values():
        span = (f"[{p.range[0]:g}, {p.range[1]:g}]" if p.range is not None
                else ", ".join(p.choices) if p.choices else "")
        text = p.description.replace("|", "\\|")
        lines.append(f"| `{p.name}` | {p.type or ''} | `{_cell(p.default)}` | {span} | "
                     f"{'yes' if p.read_only else ''} | {text} |")
    return "\n".join(lines) + "\n"


def table(role: str) -> Dict[str, Parameter]:
    """The parameters of node ``role`` (dynamics, controller, reference, estimator)."""
    if role not in ROLES:
        raise KeyError(f"no node role {role!r}; one of {', '.join(ROLES)}")
    return importlib.import_module(f"{__name__}.{ROLES[role]}").PARAMETERS


def names(role: str) -> Tuple[str, ...]:
    """Every parameter node ``role`` takes, ``use_sim_time`` (which every rclpy node has) included."""
    declared = tuple(table(role))
    return declared + tuple(n for n in ("use_sim_time",) if n not in declared)
