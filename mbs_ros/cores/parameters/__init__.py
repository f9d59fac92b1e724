"""The nodes' parameters as data, ROS-free: one :class:`Parameter` per name and node role, declared once with its
type, default, range, choices, size and cross-field rule (as generate_parameter_library's YAML does for
ros2_controllers). Everything else derives from it: the nodes declare them (:mod:`mbs_ros.nodes.runtime`), the
settings dataclasses take their fields and defaults (:func:`settings_class`) and their checks
(:func:`mbs_ros.cores.params.check_table`, :func:`mbs_ros.cores.params.cross_check`), the scenario checks its keys
and rates, ``--help`` and the docs list them (:func:`markdown_table`). A parameter two nodes share is declared in
one table and taken by the other (:func:`shared`). docs/parameters.md says how."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field, make_dataclass
from dataclasses import replace as _replace
from typing import Dict, Mapping, Optional, Tuple

__all__ = ["Parameter", "ROLES", "TYPES", "table", "names", "markdown_table", "shared", "settings_class",
           "field_name", "kind", "rules_text", "CHECKS", "SHARED", "from_pairs"]

#: ``Parameter.type`` values: ROS's parameter types, and "double|double[]" for one number or a list of them
TYPES = ("string", "bool", "double", "double[]", "string[]", "double|double[]")

#: node role -> module of its table (each defines ``PARAMETERS: Dict[str, Parameter]``)
ROLES = {"dynamics": "dynamics", "controller": "controller", "reference": "reference", "estimator": "estimator"}


@dataclass(frozen=True)
class Parameter:
    """One node parameter: ``default`` (None: the node works it out, e.g. from the model), ``range`` for a
    number (ROS's floating_point_range), ``read_only`` (start-up only), ``type`` (:data:`TYPES`; None: from the
    value it is declared with) and ``choices`` (the values a string may take).

    The checks beyond ROS's own (:func:`mbs_ros.cores.params.check_parameter`): ``size`` (a list's length; None:
    any, checked against the model later), ``bound`` (each entry's magnitude, or the norm with ``norm``),
    ``each`` (each entry's [low, high]), ``minimum`` (a number's lower bound beyond the range, open with
    ``minimum_open``: ROS ranges are closed), ``off`` (0 = off, else at least MIN_RATE), ``allow_empty`` (a string
    may be empty), ``at_most`` (the name of the parameter this one must not exceed: a cross-field rule), ``check``
    (a kind of :data:`CHECKS` the type does not say) and ``scenario``: the scenario key that sets it (then the
    robot's free-form mapping of this node may not: :func:`mbs_ros.scenario.base.managed`). For a change
    at run time (dynamics_node): ``on_change`` (what it redoes: ``model``, a new model; ``rate``, the physics-rate
    check; ``limits``, the command limits; ``water``, the current; ``pause``, where pause_at pauses) and
    ``single_body`` (a single body's only: refused for a robot)."""

    name: str
    description: str
    default: object = None
    range: Optional[Tuple[float, float]] = None
    read_only: bool = False
    extra: Dict[str, object] = field(default_factory=dict)
    type: Optional[str] = None
    choices: Tuple[str, ...] = ()
    size: Optional[int] = None
    bound: Optional[float] = None
    norm: bool = False
    each: Optional[Tuple[float, float]] = None
    minimum: Optional[float] = None
    minimum_open: bool = False
    off: bool = False
    allow_empty: bool = False
    at_most: Optional[str] = None
    check: Optional[str] = None
    scenario: Optional[str] = None
    on_change: Tuple[str, ...] = ()
    single_body: bool = False


#: ``Parameter.check`` kinds the type alone does not say (the checks: :mod:`mbs_ros.cores.params`)
CHECKS = ("gain", "limits", "whole", "locked", "custom")
_RULES = ("size", "bound", "norm", "each", "minimum", "minimum_open", "off", "allow_empty", "at_most", "check",
          "scenario", "on_change", "single_body")


#: ``(description, SHARED)`` in a table's pairs: the parameter of the same name in the table ``from_pairs`` is
#: given as ``shared``, with this description (``dict(SHARED, default=...)``: and other changes)
SHARED = {"shared": True}


def from_pairs(pairs: Dict[str, tuple], shared_with: Optional[Mapping[str, Parameter]] = None) -> Dict[str, Parameter]:
    """A table from ``name -> (description, {"read_only": ..., "floating_point_range": ..., "default": ...,
    "type": ..., "choices": ..., and the rules of :class:`Parameter`})``; ``(description, SHARED)``: the
    parameter of ``shared_with`` (another node's table), declared there once, with this description."""
    out = {}
    for name, (description, extra) in pairs.items():
        extra = dict(extra) if isinstance(extra, dict) else {"default": extra}
        if extra.pop("shared", False):
            if shared_with is None or name not in shared_with:
                raise ValueError(f"parameter {name}: shared, but the table it is shared with has none")
            out[name] = shared(shared_with[name], description=description, **extra)
            continue
        kind = extra.pop("type", None)
        if kind is not None and kind not in TYPES:
            raise ValueError(f"parameter {name}: type {kind!r} is not one of {', '.join(TYPES)}")
        rules = {k: extra.pop(k) for k in _RULES if k in extra}
        _one_range(name, extra.get("floating_point_range"), rules)
        if rules.get("check") not in (None,) + CHECKS:
            raise ValueError(f"parameter {name}: check {rules['check']!r} is not one of {', '.join(CHECKS)}")
        out[name] = Parameter(name, description, default=extra.pop("default", None),
                              range=extra.pop("floating_point_range", None),
                              read_only=bool(extra.pop("read_only", False)), type=kind,
                              choices=tuple(extra.pop("choices", ())), extra=extra, **rules)
    return out


def _one_range(name: str, span, rules: dict) -> None:
    """A number has one range: the one rclpy's descriptor reports (``floating_point_range``), ``--help`` and the
    docs print and the settings check. A closed ``minimum`` beside a range would be a second, tighter one (rclpy
    said "Min: 0.0" where ``--help`` said >= 1e-6): write it as the range's low end. An open minimum (which a
    ROS range, always closed, cannot say) must sit at the range's low end."""
    minimum = rules.get("minimum")
    if span is None or minimum is None:
        return
    if not rules.get("minimum_open"):
        raise ValueError(f"parameter {name}: a closed minimum ({minimum:g}) beside floating_point_range "
                         f"{tuple(span)}: make it the range's low end")
    if float(minimum) != float(span[0]):
        raise ValueError(f"parameter {name}: open minimum {minimum:g} is not the range's low end {span[0]:g}")


def shared(parameter: Parameter, **changes) -> Parameter:
    """A parameter declared in another node's table, taken by this one with ``changes`` (its own description,
    default, read-only): its name, type and checks stay those of the one declaration."""
    changes["extra"] = dict(parameter.extra, shared=True, **changes.get("extra", {}))  # its own dict
    return _replace(parameter, **changes)


def field_name(parameter: str) -> str:
    """The settings field of a parameter: its name, ``lambda_`` for the Python keyword ``lambda``."""
    return parameter + "_" if parameter in ("lambda",) else parameter


def kind(parameter: Parameter) -> Optional[str]:
    """The parameter's type (:data:`TYPES`): declared, else that of its default (an empty list: double[]; no
    default: None, unknown)."""
    if parameter.type is not None:
        return parameter.type
    v = parameter.default
    if v is None:
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (int, float)):
        return "double"
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        return "string[]"
    return "double[]"


_PYTHON_TYPES = {"string": str, "bool": bool, "double": float, "double[]": tuple, "string[]": tuple}


def settings_class(name: str, parameters: Mapping[str, Parameter], doc: str, namespace: Optional[dict] = None,
                   module: Optional[str] = None):
    """A frozen dataclass with one field per parameter (:func:`field_name`), in the table's order, defaulting to
    the table's default (a whole-number parameter's as an int): the settings object of a node, generated from its
    table so that no field or default is written twice. ``namespace``: its methods and properties."""
    fields = []
    for p in parameters.values():
        kind_ = int if p.check == "whole" else _PYTHON_TYPES.get(kind(p), object)
        default = int(p.default) if p.check == "whole" else p.default
        fields.append((field_name(p.name), kind_, field(default=default)))
    cls = make_dataclass(name, fields, frozen=True, namespace=dict(namespace or {}))
    cls.__doc__ = doc
    if module is not None:
        cls.__module__ = module
    return cls


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


def rules_text(p: Parameter) -> str:
    """The parameter's checks in words (range, minimum, choices, size, bounds, cross-field rule), as the docs'
    table and ``--help`` state them."""
    return "; ".join(_rules(p))


def _rules(p: Parameter):
    if p.range is not None:
        yield f"[{p.range[0]:g}, {p.range[1]:g}]"
    if p.minimum is not None:
        yield f"{'>' if p.minimum_open else '>='} {p.minimum:g}"
    if p.choices:
        yield ", ".join(p.choices)
    if p.size is not None:
        yield f"{p.size} entries"
    if p.bound is not None:
        yield f"{'norm' if p.norm else 'each |x|'} <= {p.bound:g}"
    if p.each is not None:
        yield f"each in [{p.each[0]:g}, {p.each[1]:g}]"
    if p.off:
        yield "0 = off"
    if p.at_most is not None:
        yield f"<= {p.at_most}"


def markdown_table(parameters: Dict[str, Parameter]) -> str:
    """The parameters as a Markdown table (name, type, default, range or choices, read-only, description): what
    docs/<node>.md shows, generated from the data (a test compares the two)."""
    lines = ["| name | type | default | range / choices | start-up only | description |",
             "|---|---|---|---|---|---|"]
    for p in parameters.values():
        span = rules_text(p)
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
