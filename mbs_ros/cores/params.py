"""Checks of raw ROS parameter values shared by the nodes: each returns the clean value or raises
:class:`~mbs_ros.dynamics.model.source.ParameterError` whose message is the reason (ints are accepted for doubles)."""
from __future__ import annotations

import math
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.dynamics.simulation import actuators
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.yamlfile import shown
from mbs_ros.yamlschema import Reader

__all__ = ["check_parameter", "check_table", "cross_check", "text", "number", "ranged", "rate_or_off", "vector",
           "flag", "positive_list", "limits", "bounded_vector", "bounds",
           "locked_joints_setting", "command_limits", "model_parameter_values", "period_ns", "seconds_text", "NS_PER_S", "MIN_RATE",
           "MIN_COMMAND_LIMIT", "MAX_LIMIT_PER_KG"]

#: the schema reader (mbs_ros.yamlschema) raising ParameterError "NAME reason" (a value shown only when it is a
#: number or name-shaped: a parameter file's text is never echoed)
_READER = Reader("", error=lambda _path, key, reason: ParameterError(f"{key} {reason}"))

# Bounds that keep every quantity derived from a parameter finite and meaningful, at start-up and at run time
MIN_RATE = 1.0e-3  # Hz: an optional publication that is on (0 = off); steps between publications stay < 2^63
MIN_COMMAND_LIMIT = 1.0e-9  # N, N m: max_wrench and max_effort
NS_PER_S = 1_000_000_000
MAX_LIMIT_PER_KG = 1.0e6  # m/s^2, N m/kg: max_wrench and max_effort at most this times the model's total mass


def check_parameter(values: Mapping, p) -> object:
    """The checked value of parameter ``p`` (a :class:`mbs_ros.cores.parameters.Parameter`) in ``values``, by its
    table entry: its type, range, choices, size, bounds and ``check`` kind; ParameterError with the reason."""
    from mbs_ros.cores.parameters import kind

    name, k, table = p.name, kind(p), {p.name: p}
    if p.check == "limits" or k == "double|double[]":
        return limits(values, name, p.size)
    if k == "string":
        return text(values, name, p.choices or None, p.allow_empty)
    if k == "bool":
        return flag(values, name)
    if k == "double":
        v = ranged(values, name, table, lo=p.minimum if p.minimum is not None else (0.0 if p.off else None),
                   lo_open=p.minimum_open)
        if p.off and 0.0 < v < MIN_RATE:
            raise ParameterError(f"{name} must be 0 (off) or >= {MIN_RATE:g} Hz, got {v:g}")
        if p.check == "whole":
            if v != int(v):
                raise ParameterError(f"{name} must be a whole number, got {v:g}")
            return int(v)
        return v
    if k == "double[]":
        out = vector(values, name, p.size) if p.bound is None else bounded_vector(values, name, p.size, p.bound,
                                                                                  p.norm)
        if p.each is not None:
            bad = [f"{x:g}" for x in out if not p.each[0] <= x <= p.each[1]]
            if bad:
                raise ParameterError(f"{name} must lie in [{p.each[0]:g}, {p.each[1]:g}] (each entry), got "
                                     f"{', '.join(bad)}")
        return out
    if k == "string[]":
        v = values[name]
        if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") \
                or any(not isinstance(x, str) or not x.strip() for x in v):
            raise ParameterError(f"{name} must be a list of names, got {shown(v)}")
        return tuple(x.strip() for x in v)
    raise ParameterError(f"{name}: no check for a parameter of type {k}")


def check_table(values: Mapping, parameters: Mapping, custom: Optional[Mapping[str, Callable]] = None) -> dict:
    """Every parameter of the table checked (:func:`check_parameter`), by settings field name
    (:func:`mbs_ros.cores.parameters.field_name`); ``custom``: name -> a function of the values for the parameters
    whose check the table cannot say (those with ``check="custom"`` or ``"locked"`` must be in it)."""
    from mbs_ros.cores.parameters import field_name

    custom = dict(custom or {})
    out = {}
    for name, p in parameters.items():
        if name in custom:
            out[field_name(name)] = custom[name](values)
        elif p.check in ("custom", "locked", "gain"):
            raise ValueError(f"parameter {name}: its check ({p.check}) needs a function in custom")
        else:
            out[field_name(name)] = check_parameter(values, p)
    return out


def cross_check(value: Callable[[str], object], parameters: Mapping, names: Optional[Sequence[str]] = None,
                unit: str = "Hz") -> None:
    """The table's cross-field rules (``at_most``: this value must not exceed that parameter's) on the values
    ``value(name)`` gives (None: not set, the rule does not apply); ``names``: only these parameters' rules.
    ParameterError "NAME (V Hz) must not exceed OTHER (W Hz)"."""
    for name, p in parameters.items():
        if p.at_most is None or (names is not None and name not in names):
            continue
        v, limit = value(name), value(p.at_most)
        if v is not None and limit is not None and float(v) > float(limit):
            raise ParameterError(f"{name} ({float(v):g} {unit}) must not exceed {p.at_most} ({float(limit):g} {unit})")


def text(values: Mapping, name: str, choices: Optional[Sequence[str]] = None, allow_empty: bool = False) -> str:
    v = values[name]
    if not isinstance(v, str):
        raise ParameterError(f"{name} must be a string, got {shown(v)}")
    v = v.strip()
    if choices is not None and v not in choices:
        raise ParameterError(f"{name} must be one of {', '.join(choices)}, got {shown(v)}")
    if not v and not allow_empty:
        raise ParameterError(f"{name} must not be empty")
    return v


def number(values: Mapping, name: str, lo=None, lo_open: bool = False, hi=None) -> float:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``): the schema reader's check
    (:meth:`mbs_ros.yamlschema.Reader.number`), its reason after the parameter's name."""
    return _READER.number(values[name], name, lo, lo_open, hi)


def ranged(values: Mapping, name: str, parameters: Mapping, lo=None, lo_open: bool = False, hi=None) -> float:
    """:func:`number` within ``[lo, hi]`` and within the parameter table's range: rclpy checks that range on
    doubles only (an integer value passes it), and the settings see values that did not come through rclpy."""
    span = parameters[name].range
    if span is not None:
        if lo is None or span[0] > lo:
            lo, lo_open = span[0], False
        if hi is None or span[1] < hi:
            hi = span[1]
    return number(values, name, lo, lo_open, hi)


def bounds(p) -> Tuple[Optional[float], bool, Optional[float]]:
    """``(lo, lo_open, hi)`` of a number parameter ``p``: its range and minimum together (the tighter)."""
    lo, lo_open = (p.minimum, p.minimum_open) if p.minimum is not None else (None, False)
    if p.range is not None and (lo is None or p.range[0] > lo):
        lo, lo_open = p.range[0], False
    return lo, lo_open, (p.range[1] if p.range is not None else None)


def rate_or_off(values: Mapping, name: str, parameters: Mapping) -> float:
    """A rate [Hz] that is 0 (off) or at least ``MIN_RATE`` (within the table's range)."""
    v = ranged(values, name, parameters, lo=0.0)
    if 0.0 < v < MIN_RATE:
        raise ParameterError(f"{name} must be 0 (off) or >= {MIN_RATE:g} Hz, got {v:g}")
    return v


def vector(values: Mapping, name: str, n: Optional[int]) -> tuple:
    """A list of ``n`` finite numbers (any length when ``n`` is None: checked against the model later)."""
    v = values[name]
    if n is None:
        if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
            raise ParameterError(f"{name} must be a list of numbers, got {v!r}")
    elif isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != n:
        raise ParameterError(f"{name} must be a list of {n} numbers, got {v!r}")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
        raise ParameterError(f"{name} must be a list of numbers, got {list(v)!r}")
    out = tuple(float(x) for x in v)
    if not all(math.isfinite(x) for x in out):
        raise ParameterError(f"{name} must be finite, got {list(out)}")
    return out


def flag(values: Mapping, name: str) -> bool:
    return _READER.boolean(values[name], name)


def bounded_vector(values: Mapping, name: str, n: Optional[int], bound: float, norm: bool = False) -> tuple:
    """:func:`vector`, and every component (``norm``: the Euclidean norm) at most ``bound`` in magnitude."""
    out = vector(values, name, n)
    size = math.sqrt(sum(x * x for x in out)) if norm else max((abs(x) for x in out), default=0.0)
    if size > bound:
        raise ParameterError(f"{name} must have {'a norm' if norm else 'every component'} <= {bound:g}, got "
                             f"{list(out)}")
    return out


def positive_list(values: Mapping, name: str, n: Optional[int] = None) -> tuple:
    """``()`` for an empty list, else a list of ``n`` (any number when None) positive finite numbers."""
    v = values[name]
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise ParameterError(f"{name} must be a list of positive numbers (or empty), got {v!r}")
    if len(v) == 0:
        return ()
    out = vector(values, name, n)
    if any(not x > 0.0 for x in out):
        raise ParameterError(f"{name} must be positive, got {list(out)}")
    return out


def limits(values: Mapping, name: str, n: Optional[int]):
    """Command limits as ``controller_node`` and ``dynamics_node`` take them: ``()`` (empty: from the model), a
    positive finite number (only when ``n`` is None: the same for every element) or a list of positive finite
    numbers (``n`` of them when given; any length is checked against the model later)."""
    v = values[name]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if n is not None:
            raise ParameterError(f"{name} must be a list of {n} positive numbers (or empty), got {v!r}")
        return number(values, name, lo=0.0, lo_open=True)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise ParameterError(f"{name} must be a positive number or a list of positive numbers (or empty), "
                             f"got {v!r}")
    return positive_list(values, name, n)


def locked_joints_setting(values: Dict[str, object], multibody: bool) -> Tuple[tuple, tuple]:
    """``(names, positions)`` of the ``locked_joints`` and ``locked_joint_positions`` parameters (positions
    filled with zeros when empty); ParameterError for a name that is not a non-empty string, a repeated name,
    lengths that differ, or joints locked on a single body. Whether each names a joint of the robot, and its range,
    the model checks (:func:`mbs_ros.dynamics.model.source.build_multibody`)."""
    names = values.get("locked_joints", ())
    if isinstance(names, (str, bytes)) or not hasattr(names, "__len__") \
            or any(not isinstance(n, str) or not n.strip() for n in names):
        raise ParameterError(f"locked_joints must be a list of joint names, got {names!r}")
    names = tuple(n.strip() for n in names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ParameterError(f"locked_joints names {', '.join(map(repr, repeated))} more than once")
    positions = values.get("locked_joint_positions", ())
    empty = hasattr(positions, "__len__") and not isinstance(positions, (str, bytes)) and len(positions) == 0
    positions = () if empty else vector({"locked_joint_positions": positions}, "locked_joint_positions", None)
    if positions and len(positions) != len(names):
        raise ParameterError(f"locked_joint_positions must have one entry per locked joint ({len(names)}: "
                             f"{', '.join(names) or 'none'}) or be empty, got {len(positions)}")
    if names and not multibody:
        raise ParameterError("locked_joints: a single rigid body has no joints (robot_description or model_file "
                             "gives a robot)")
    return names, positions or (0.0,) * len(names)


def command_limits(model, settings) -> actuators.CommandLimits:
    """The saturation limits a node's ``max_wrench`` and ``max_effort`` settings give on ``model`` (empty: the
    model's defaults, :func:`mbs_ros.dynamics.simulation.actuators.command_limits`); ParameterError with the reason. A given
    limit must lie in ``[MIN_COMMAND_LIMIT, MAX_LIMIT_PER_KG x total mass]``: a larger one turns saturation off
    in effect and makes the full-effort rate of the physics-rate check overflow; a model's own limit beyond it
    (a URDF's ``<limit effort>``) is taken as that bound."""
    max_effort = settings.max_effort
    try:
        lim = actuators.command_limits(model, settings.max_wrench or None,
                                       max_effort if isinstance(max_effort, float) else (max_effort or None))
    except ValueError as e:
        raise ParameterError(str(e)) from None
    top = MAX_LIMIT_PER_KG * float(model.total_mass)
    given = [("max_wrench", x) for x in (settings.max_wrench or ())]
    if isinstance(max_effort, float) or max_effort:
        given += [("max_effort", x) for x in lim.max_effort]
    for name, x in given:
        if not MIN_COMMAND_LIMIT <= x <= top:
            raise ParameterError(f"{name} limits must lie in [{MIN_COMMAND_LIMIT:g}, {top:g}] (N, N m: at most "
                                 f"{MAX_LIMIT_PER_KG:g} m/s^2 or N m/kg times the model's total mass "
                                 f"{float(model.total_mass):g} kg), got {x:g}")
    effort = np.minimum(lim.max_effort, top)
    effort.setflags(write=False)
    return actuators.CommandLimits(min(lim.max_force, top), min(lim.max_torque, top), effort)


def model_parameter_values(parameters: Mapping, default: Callable[[str], object],
                           value: Callable[[object, object], object],
                           load: Callable[[str, str], "ms.Source"] = ms.load_source) -> Tuple[dict, "ms.Source"]:
    """The raw values of a model node's ``parameters`` and the model source they name: ``value(param, default)``
    gives one parameter's value (the node declares it; a headless run looks it up in the node's parameters),
    ``robot_description`` and ``model_file`` first, the model source loaded from them
    (``load``: :func:`mbs_ros.dynamics.model.source.load_source`, or one that shares a loaded source), then every
    other one with ``default(name)`` or the robot's own default (base_group, gravity, base_frame:
    :func:`mbs_ros.dynamics.model.source.model_defaults`). ParameterError with the reason."""
    values = {name: value(parameters[name], default(name)) for name in ("robot_description", "model_file")}
    for name, v in values.items():
        if not isinstance(v, str):
            raise ParameterError(f"{name} must be a string, got {shown(v)}")
    source = load(values["robot_description"], values["model_file"])
    robot = ms.model_defaults(source)
    for name, param in parameters.items():
        if name not in values:
            values[name] = value(param, robot[name] if name in robot else default(name))
    return values, source


def seconds_text(ns: int) -> str:
    """A time in integer ns as seconds with 9 decimals, exactly (a float rounds past 2^53 ns, about 104 days)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // NS_PER_S}.{ns % NS_PER_S:09d}"


def period_ns(rate_hz: float) -> int:
    """The integer-nanosecond period nearest to ``1 / rate_hz``."""
    if not rate_hz > 0.0 or not math.isfinite(rate_hz):
        raise ValueError(f"rate must be a positive finite number of Hz, got {rate_hz!r}")
    return max(1, int(round(NS_PER_S / float(rate_hz))))
