"""controller_node's settings, ROS-free: the parameter values checked (:func:`settings_from_values`), the model they
describe (:func:`build_model`), its control law (:func:`make_law`) and command limits (:func:`command_limits`).
The defaults are the parameter table's (:mod:`mbs_ros.nodes.parameters.controller`)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from mbs_ros.controllers import ComputedTorque, PassivityBased, PDGravity
from mbs_ros.controllers.lqr import LQR
from mbs_ros.dynamics import Model
from mbs_ros.dynamics import model_source as ms
from mbs_ros.dynamics.mimic import MIMIC_MODES
from mbs_ros.dynamics.model_source import ParameterError, base_link
from mbs_ros.nodes import params as prm
from mbs_ros.nodes.dynamics_settings import MASS_RANGE, MAX_COM, MAX_GRAVITY, check_inertia
from mbs_ros.nodes.parameters.controller import LAWS, LQR_SCALINGS, PARAMETERS, STATE_SOURCES

__all__ = ["ControllerSettings", "DEFAULTS", "settings_from_values", "build_model", "make_law", "command_limits",
           "layout_description", "field_name", "ParameterError"]


# Bounds that keep every quantity derived from a parameter finite and meaningful (docs/controller_node.md)
MAX_GAIN = 1.0e9  # kp, kd, lambda entries: a gain times any admissible error stays far from overflow
MASS_SCALE_RANGE = (1.0e-3, 1.0e3)
MIN_TIME_JUMP = 0.1  # s: max_time_jump (states 10 ms apart, or skipping ahead by some 10 ms, are time running on)
THRUSTER_WEIGHT_RANGE = (1.0e-6, 1.0e6)


def _d(name: str):
    return PARAMETERS[name].default


@dataclass(frozen=True)
class ControllerSettings:
    """The checked parameters (one field per parameter; ``lambda`` is the field ``lambda_``)."""

    robot_description: str = _d("robot_description")
    model_file: str = _d("model_file")
    base_group: str = _d("base_group")
    mass: float = _d("mass")
    inertia: Tuple[float, ...] = _d("inertia")
    com: Tuple[float, ...] = _d("com")
    gravity: Tuple[float, ...] = _d("gravity")
    mass_scale: float = _d("mass_scale")
    law: str = _d("law")
    kp: object = _d("kp")
    kd: object = _d("kd")
    lambda_: object = _d("lambda")  # "lambda" is a Python keyword
    lqr_q_position: object = _d("lqr_q_position")
    lqr_q_velocity: object = _d("lqr_q_velocity")
    lqr_r: object = _d("lqr_r")
    lqr_scaling: str = _d("lqr_scaling")
    lqr_redesign_threshold: float = _d("lqr_redesign_threshold")
    control_rate: float = _d("control_rate")
    state_timeout: float = _d("state_timeout")
    world_frame: str = _d("world_frame")
    base_frame: str = _d("base_frame")
    lockstep: bool = _d("lockstep")
    state_source: str = _d("state_source")
    max_wrench: Tuple[float, ...] = _d("max_wrench")  # () = from the model
    max_effort: object = _d("max_effort")  # () = from the model; a number (every joint) or one per joint
    max_time_jump: float = _d("max_time_jump")
    use_events_executor: bool = _d("use_events_executor")
    max_mass_ratio: float = _d("max_mass_ratio")
    locked_joints: Tuple[str, ...] = _d("locked_joints")
    locked_joint_positions: Tuple[float, ...] = _d("locked_joint_positions")
    joint_armature: Tuple[float, ...] = _d("joint_armature")
    mimic: str = _d("mimic")
    allocate_thrusters: bool = _d("allocate_thrusters")
    thruster_weights: Tuple[float, ...] = _d("thruster_weights")  # () = all 1
    compensate_passive: bool = _d("compensate_passive")
    allow_partial_joints_goal: bool = _d("allow_partial_joints_goal")
    goal_time_tolerance: float = _d("goal_time_tolerance")
    stopped_velocity_tolerance: float = _d("stopped_velocity_tolerance")


DEFAULTS = ControllerSettings()


def field_name(parameter: str) -> str:
    """The :class:`ControllerSettings` field of a parameter."""
    return "lambda_" if parameter == "lambda" else parameter


def _gain(values, name):
    v = values[name]
    if isinstance(v, bool) or isinstance(v, str):
        raise ParameterError(f"{name} must be a positive number or a list of positive numbers, got {v!r}")
    if isinstance(v, (int, float)):
        out = float(v)
    elif hasattr(v, "__len__") and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        out = tuple(float(x) for x in v)
    else:
        raise ParameterError(f"{name} must be a positive number or a list of positive numbers, got {v!r}")
    if any(abs(x) > MAX_GAIN for x in np.ravel(out)):  # NaN and inf: the law refuses them
        raise ParameterError(f"{name} entries must be <= {MAX_GAIN:g}, got {v!r}")
    return out


def settings_from_values(values: Dict[str, object], source: ms.Source) -> ControllerSettings:
    """Validate raw parameter values; ParameterError with the reason. Gains and ``max_effort`` are checked
    against the model in :func:`make_law` and :func:`command_limits`."""

    def text(name, choices=None, allow_empty=False):
        return prm.text(values, name, choices, allow_empty)

    def number(name, lo=None, lo_open=False, hi=None):  # and within the table's range
        return prm.ranged(values, name, PARAMETERS, lo, lo_open, hi)

    locked = prm.locked_joints_setting(values, source.multibody)
    s = ControllerSettings(
        robot_description=text("robot_description", allow_empty=True),
        model_file=text("model_file", allow_empty=True),
        base_group=text("base_group", ms.TREE_BASES if source.multibody else ms.BASES),
        mass=number("mass", lo=MASS_RANGE[0], hi=MASS_RANGE[1]),
        inertia=prm.vector(values, "inertia", 6),
        com=prm.bounded_vector(values, "com", 3, MAX_COM),
        gravity=prm.bounded_vector(values, "gravity", 3, MAX_GRAVITY, norm=True),
        mass_scale=number("mass_scale", lo=MASS_SCALE_RANGE[0], hi=MASS_SCALE_RANGE[1]),
        law=text("law", LAWS),
        kp=_gain(values, "kp"),
        kd=_gain(values, "kd"),
        lambda_=_gain(values, "lambda"),
        lqr_q_position=_gain(values, "lqr_q_position"),
        lqr_q_velocity=_gain(values, "lqr_q_velocity"),
        lqr_r=_gain(values, "lqr_r"),
        lqr_scaling=text("lqr_scaling", LQR_SCALINGS),
        lqr_redesign_threshold=number("lqr_redesign_threshold", lo=0.0, lo_open=True),
        control_rate=number("control_rate", lo=0.0, lo_open=True),
        state_timeout=number("state_timeout", lo=0.0, lo_open=True),
        world_frame=text("world_frame"),
        base_frame=text("base_frame"),
        lockstep=prm.flag(values, "lockstep"),
        state_source=text("state_source", STATE_SOURCES),
        use_events_executor=prm.flag(values, "use_events_executor"),
        max_mass_ratio=number("max_mass_ratio", lo=0.0),
        locked_joints=locked[0],
        locked_joint_positions=locked[1],
        mimic=text("mimic", MIMIC_MODES),
        joint_armature=prm.vector(values, "joint_armature", None),
        max_wrench=prm.limits(values, "max_wrench", 2),
        max_effort=prm.limits(values, "max_effort", None),
        max_time_jump=number("max_time_jump", lo=MIN_TIME_JUMP),
        allocate_thrusters=prm.flag(values, "allocate_thrusters"),
        thruster_weights=prm.vector(values, "thruster_weights", None),
        compensate_passive=prm.flag(values, "compensate_passive"),
        allow_partial_joints_goal=prm.flag(values, "allow_partial_joints_goal"),
        goal_time_tolerance=number("goal_time_tolerance", lo=0.0),
        stopped_velocity_tolerance=number("stopped_velocity_tolerance", lo=0.0),
    )
    lo, hi = THRUSTER_WEIGHT_RANGE
    if any(not lo <= w <= hi for w in s.thruster_weights):
        raise ParameterError(f"thruster_weights must lie in [{lo:g}, {hi:g}], got {list(s.thruster_weights)}")
    if not s.lockstep and s.state_timeout < 1.0 / s.control_rate:
        raise ParameterError(f"state_timeout must be at least one control period (1/control_rate = "
                             f"{1.0 / s.control_rate:g} s), got {s.state_timeout:g} s: every state would be stale")
    if not source.multibody:
        ixx, ixy, ixz, iyy, iyz, izz = s.inertia
        check_inertia(np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]))
    if source.multibody and s.base_frame.lstrip("/") != base_link(source):
        raise ParameterError(f"base_frame must name the robot's base link {base_link(source)!r} "
                             f"(or be left unset), got {s.base_frame!r}")
    return s


def build_model(s: ControllerSettings, source: ms.Source) -> Model:
    """The controller's model: the robot of ``source``, or the single body of the settings, masses scaled by
    ``mass_scale``."""
    if source.multibody:
        return ms.build_multibody(source, s.base_group, s.gravity, mass_scale=s.mass_scale,
                                  max_mass_ratio=s.max_mass_ratio,
                                  locked_joints=dict(zip(s.locked_joints, s.locked_joint_positions)),
                                  mimic=s.mimic, armature=s.joint_armature)
    ixx, ixy, ixz, iyy, iyz, izz = s.inertia
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]) * s.mass_scale
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Model.rigid_body(base=s.base_group, mass=s.mass * s.mass_scale, inertia=inertia,
                                    com=np.array(s.com), gravity=np.array(s.gravity))
    except ValueError as e:
        raise ParameterError(f"cannot build the {s.base_group} model: {e}") from None


def make_law(model: Model, s: ControllerSettings):
    """The control law of the settings on ``model``; ParameterError naming the gain and the reason."""
    try:
        if s.law == "computed_torque":
            return ComputedTorque(model, kp=s.kp, kd=s.kd)
        if s.law == "pd_gravity":
            return PDGravity(model, kp=s.kp, kd=s.kd)
        if s.law == "lqr":
            # compensate_passive cancels tau_p after the law: the law then designs on the rigid dynamics
            law = LQR(model, q_weight=s.lqr_q_position, v_weight=s.lqr_q_velocity, r=s.lqr_r,
                      passive=not s.compensate_passive, redesign_threshold=s.lqr_redesign_threshold,
                      scaling=s.lqr_scaling)
            law.design(model.neutral())  # weights the Riccati equation cannot be solved with: refused now
            return law
        return PassivityBased(model, Lambda=s.lambda_, kd=s.kd)
    except ValueError as e:
        msg = str(e).replace("Lambda", "lambda")
        for arg, param in (("q_weight", "lqr_q_position"), ("v_weight", "lqr_q_velocity"), ("r ", "lqr_r ")):
            if s.law == "lqr" and msg.startswith(arg):
                msg = param + msg[len(arg):]
        raise ParameterError(f"{s.law} gains: {msg} (velocity layout: {layout_description(model)})") from None


def layout_description(model: Model) -> str:
    nqb, nvb = ms.base_sizes(model)
    base = f"{nvb} base components" if nvb else "no base components (fixed base)"
    joints = ", ".join(model.joint_names) if model.joint_names else "no joints"
    return f"nv = {model.nv}: {base}, then {joints}"


def command_limits(model: Model, s: ControllerSettings):
    """``(max_force, max_torque, max_effort (nj,))`` in force: the parameters, or the model's defaults
    (:func:`mbs_ros.dynamics.actuators.command_limits`); ParameterError if ``max_effort`` has the wrong length."""
    lim = prm.command_limits(model, s)
    return lim.max_force, lim.max_torque, np.array(lim.max_effort)
