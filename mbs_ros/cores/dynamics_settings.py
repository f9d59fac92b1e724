"""The dynamics node's settings, ROS-free: the validated parameter values (:class:`Settings`, defaults from the
table :mod:`mbs_ros.cores.parameters.dynamics`), the checks across parameters, the model and the initial state
they give, and the physics-rate check (:func:`mbs_ros.dynamics.simulation.simulator.rate_check`). The bounds are listed in
docs/dynamics_node.md, "Robustness"."""
from __future__ import annotations

import re
import warnings
from typing import Dict, Optional, Tuple

import numpy as np

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.dynamics.simulation.simulator import CommandLimits, RateCheck
from mbs_ros.dynamics.simulation.simulator import rate_check, velocity_bounds
from mbs_ros.cores import params as prm
from mbs_ros.cores.params import locked_joints_setting, period_ns
from mbs_ros.cores.parameters import settings_class
from mbs_ros.cores.parameters.dynamics import PARAMETERS
from mbs_ros.cores.rotations import quaternion_from_rpy

__all__ = ["Settings", "DEFAULTS", "ParameterError", "settings_from_values", "check_runtime_change",
           "command_limits", "check_rate", "joint_position_limits", "lockstep_steps", "pause_step", "check_pause_at",
           "check_inertia", "build_model", "initial_state", "topic_token", "steps_between"]

BASE_GROUPS = ms.BASES  # a single rigid body
TREE_BASE_GROUPS = ms.TREE_BASES  # a robot: a group, or fixed

# Bounds of the checks the table cannot say (docs/dynamics_node.md, "Robustness"); every parameter's own type,
# range, size and bounds are in its table entry (mbs_ros.cores.parameters.dynamics) and nowhere else.
MAX_CMD_TIMEOUT = PARAMETERS["cmd_timeout"].range[1]  # s of simulation time
MAX_JOINT_POSITION = 1.0e3  # rad or m: initial positions of joints without URDF limits
INERTIA_RANGE = (1.0e-12, 1.0e9)  # kg m^2, principal moments
MIN_REAL_TIME_FACTOR = 1.0e-3  # a positive real_time_factor (0 = as fast as possible)
MIN_RATE = prm.MIN_RATE  # Hz: wrench_rate, markers_rate, diagnostics_rate, energy_rate when on


def _inertia_matrix(self) -> np.ndarray:
    ixx, ixy, ixz, iyy, iyz, izz = self.inertia
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _multibody(self) -> bool:
    return bool(self.robot_description.strip() or self.model_file.strip())


#: Validated parameter values: one field per parameter of the table, in its order, with its default
#: (:func:`mbs_ros.cores.parameters.settings_class`); ``inertia_matrix`` and ``multibody`` derived.
Settings = settings_class("Settings", PARAMETERS, "Validated parameter values (one field per dynamics_node "
                          "parameter, defaults from its table).", module=__name__,
                          namespace={"inertia_matrix": property(_inertia_matrix), "multibody": property(_multibody)})


DEFAULTS = Settings()


#: the parameters a change of which builds a new model; those of a single body only (the table's on_change, single_body)
INERTIAL = tuple(n for n, p in PARAMETERS.items() if "model" in p.on_change)
SINGLE_BODY_ONLY = tuple(n for n, p in PARAMETERS.items() if p.single_body)


def settings_from_values(values: Dict[str, object], source: Optional[ms.Source] = None) -> Settings:
    """Validate raw parameter values (ints accepted for doubles); raise :class:`ParameterError`.

    ``source`` is the loaded model source (see :mod:`mbs_ros.dynamics.model.source`); None: a single body."""
    multibody = source is not None and source.multibody
    locked = locked_joints_setting(values, multibody)
    s = Settings(**prm.check_table(values, PARAMETERS, custom={
        "base_group": lambda v: prm.text(v, "base_group", TREE_BASE_GROUPS if multibody else BASE_GROUPS),
        "locked_joints": lambda v: locked[0], "locked_joint_positions": lambda v: locked[1]}))
    if not multibody and (s.mass_scale != 1.0 or s.added_mass_scale != 1.0 or s.link_mass_scales):
        raise ParameterError("mass_scale, added_mass_scale and link_mass_scales scale a robot's links: a single "
                             "body takes its mass and inertia parameters instead")
    if 0.0 < s.real_time_factor < MIN_REAL_TIME_FACTOR:
        raise ParameterError(f"real_time_factor must be 0 (as fast as possible) or >= {MIN_REAL_TIME_FACTOR:g}, got "
                             f"{s.real_time_factor:g}")
    step = period_ns(s.physics_rate) * 1e-9
    if 0.0 < s.cmd_timeout < step:
        raise ParameterError(f"cmd_timeout must be 0 (start-up only) or at least one physics step (1/physics_rate = "
                             f"{step:g} s), got {s.cmd_timeout:g} s: a command must apply to one step at least")
    if 0.0 < s.pause_at < step:
        raise ParameterError(f"pause_at must be 0 (never) or at least one physics step (1/physics_rate = {step:g} s), "
                             f"got {s.pause_at:g} s")
    prm.cross_check(lambda name: getattr(s, name), PARAMETERS)  # the table's rules: rates <= physics_rate
    if s.lockstep:
        lockstep_steps(s)  # refuses a control period that is not a whole number of physics steps
    if s.world_frame.strip("/") == s.base_frame.strip("/"):
        raise ParameterError(f"world_frame and base_frame must differ, both are {s.world_frame!r}")
    if multibody:
        base_link = ms.base_link(source)
        if s.base_frame.lstrip("/") != base_link:
            raise ParameterError(
                f"base_frame must name the robot's base link {base_link!r} (or be left unset), got {s.base_frame!r}")
    else:
        check_inertia(s.inertia_matrix)
    return s


def check_runtime_change(old: Settings, new: Settings, changed) -> None:
    """Changes refused at run time only (ParameterError with the reason); see the module docstring."""
    if "cmd_timeout" in changed and new.cmd_timeout == 0.0:
        raise ParameterError(
            "cmd_timeout 0 (hold the last command forever) is refused at run time: a controller that stops or dies "
            f"would push for ever with its last command; choose a timeout in (0, {MAX_CMD_TIMEOUT:g}] s")


def command_limits(model: Model, s: Settings) -> CommandLimits:
    """The saturation limits of the settings on ``model`` (empty = the model's); ParameterError with the reason."""
    return prm.command_limits(model, s)


def check_rate(model: Model, s: Settings, q0, limits: CommandLimits) -> RateCheck:
    """:func:`mbs_ros.dynamics.simulation.simulator.rate_check` at the settings' physics rate and integrator; ParameterError
    when it refuses the rate."""
    result = rate_check(model, q0, period_ns(s.physics_rate) * 1e-9, s.integrator, limits)
    if result.error:
        raise ParameterError(result.error)
    return result


def joint_position_limits(model: Model) -> Tuple[np.ndarray, np.ndarray]:
    """Per joint ``(lower, upper)`` from the model's URDF (``<limit lower upper>`` of revolute and prismatic
    joints), ``∓MAX_JOINT_POSITION`` where it gives none (continuous joints, no limit tag)."""
    nj = len(model.joint_names)
    lower, upper = np.full(nj, -MAX_JOINT_POSITION), np.full(nj, MAX_JOINT_POSITION)
    given = getattr(model, "position_limits", None)  # Model's own reading of the URDF, where it has one
    if given is not None:
        lo, hi = (np.asarray(x, dtype=float).reshape(-1) for x in given)
        if lo.shape == hi.shape == (nj,):
            ok = np.isfinite(lo) & np.isfinite(hi) & (lo < hi)
            return np.where(ok, lo, lower), np.where(ok, hi, upper)
    xml = getattr(model, "urdf", None)
    if not nj or not xml:
        return lower, upper
    import xml.etree.ElementTree as ET

    index = {name: i for i, name in enumerate(model.joint_names)}
    for joint in ET.fromstring(xml).iter("joint"):
        i = index.get(joint.get("name"))
        limit = joint.find("limit")
        if i is None or limit is None or model.joint_types[i] == "continuous":
            continue
        try:
            lo, hi = float(limit.get("lower", "nan")), float(limit.get("upper", "nan"))
        except ValueError:
            continue
        if np.isfinite(lo) and np.isfinite(hi) and lo < hi:
            lower[i], upper[i] = lo, hi
    return lower, upper


def lockstep_steps(s: Settings) -> int:
    """Physics steps per control period in lockstep: ``physics_rate / control_rate``, which must be a whole
    number >= 1 (ParameterError with the reason otherwise)."""
    ratio = s.physics_rate / s.control_rate
    n = int(round(ratio))
    if n < 1 or abs(ratio - n) > 1e-9 * ratio:
        raise ParameterError(
            f"lockstep needs a whole number of physics steps per control period: physics_rate / control_rate = "
            f"{s.physics_rate:g} / {s.control_rate:g} = {ratio:.6g} (choose control_rate = physics_rate / n)")
    return n


def pause_step(s: Settings) -> Optional[int]:
    """The step index ``k`` (``t_k = t0 + k dt``) at which ``pause_at`` pauses the simulation, None when it is 0:
    the first step at or after ``t0 + pause_at`` (integer ns), in lockstep the first control-period end at or after
    it (the state is published once per period), so a ``pause_at`` on that grid is met exactly."""
    if not s.pause_at > 0.0:
        return None
    dt = period_ns(s.physics_rate)
    n = lockstep_steps(s) if s.lockstep else 1
    target = int(round(s.pause_at * 1e9))
    return -(-target // (n * dt)) * n


def check_pause_at(s: Settings, k_now: int, dt_ns: int) -> Optional[int]:
    """``pause_at`` changed at run time, the simulation being at step ``k_now``: its :func:`pause_step`, or
    ParameterError when that step is not ahead (the time only goes forward: ~/pause true pauses now)."""
    k = pause_step(s)
    if k is not None and k <= k_now:
        raise ParameterError(
            f"pause_at {s.pause_at:g} s: the simulation is already at t0 + {k_now * dt_ns * 1e-9:.9f} s, at or past "
            f"t0 + {k * dt_ns * 1e-9:.9f} s where it would pause; set a later time (0: never; ~/pause true pauses "
            "now)")
    return k


def check_inertia(inertia: np.ndarray) -> Optional[str]:
    """Raise :class:`ParameterError` unless positive definite with principal moments in ``INERTIA_RANGE``; return
    a warning if the principal moments violate the triangle inequality (no real body has them, but some papers
    use them)."""
    eig = np.linalg.eigvalsh(inertia)
    if not eig[0] > 0.0:
        raise ParameterError(
            "inertia must be positive definite; its principal moments are "
            + ", ".join(f"{e:.6g}" for e in eig))
    if eig[0] < INERTIA_RANGE[0] or eig[-1] > INERTIA_RANGE[1]:
        raise ParameterError(
            f"inertia: principal moments must lie in [{INERTIA_RANGE[0]:g}, {INERTIA_RANGE[1]:g}] kg m^2, got "
            + ", ".join(f"{e:.6g}" for e in eig))
    a, b, c = eig
    if c > a + b + 1e-12 * c:
        return (f"inertia principal moments {a:.6g}, {b:.6g}, {c:.6g} violate the triangle inequality "
                f"({c:.6g} > {a:.6g} + {b:.6g}): no real body has them; simulating anyway")
    return None


def build_model(s: Settings, source: Optional[ms.Source] = None) -> Model:
    if source is not None and source.multibody:
        model = ms.build_multibody(source, s.base_group, s.gravity, max_mass_ratio=s.max_mass_ratio,
                                   locked_joints=dict(zip(s.locked_joints, s.locked_joint_positions)),
                                   mimic=s.mimic, fluid_density=s.fluid_density, armature=s.joint_armature,
                                   mass_scale=s.mass_scale, link_mass_scales=s.link_mass_scales,
                                   added_mass_scale=s.added_mass_scale)
        return model.with_current(s.current, s.current_rate)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the triangle-inequality warning is logged by the node
            return Model.rigid_body(base=s.base_group, mass=s.mass, inertia=s.inertia_matrix,
                                    com=np.array(s.com), gravity=np.array(s.gravity))
    except ValueError as e:
        raise ParameterError(f"cannot build the {s.base_group} model: {e}") from None


def initial_state(model: Model, s: Settings) -> Tuple[np.ndarray, np.ndarray]:
    """``(q0, v0)`` from ``initial_position``, ``initial_rpy``, ``initial_twist`` and the joints' values."""
    nj = len(model.joint_names)
    for name in ("initial_joint_positions", "initial_joint_velocities"):
        n = len(getattr(s, name))
        if n not in (0, nj):
            raise ParameterError(f"{name} must have one entry per joint ({nj}: {', '.join(model.joint_names)}) "
                                 f"or none, got {n}")
    joints = None
    if nj:
        angles = s.initial_joint_positions or (0.0,) * nj
        if s.initial_joint_positions:
            lower, upper = joint_position_limits(model)
            a = np.asarray(angles, dtype=float)
            tol = 1e-9 * np.maximum(1.0, upper - lower)
            bad = [f"{n} = {x:g} outside [{lo:g}, {hi:g}]" for n, x, lo, hi, ok in
                   zip(model.joint_names, a, lower, upper, (a >= lower - tol) & (a <= upper + tol)) if not ok]
            if bad:
                raise ParameterError("initial_joint_positions: " + ", ".join(bad)
                                     + " (the URDF's limits; joints without limits: |q| <= "
                                     f"{MAX_JOINT_POSITION:g})")
        joints = ms.joint_positions_to_q(model, angles)
    try:
        q0 = model.configuration_from_pose(np.array(s.initial_position),
                                           quaternion_from_rpy(s.initial_rpy), joints=joints)
    except ValueError as e:
        raise ParameterError(f"initial_position/initial_rpy: {e}") from None
    try:
        v0 = model.velocity_from_twist(q0, np.array(s.initial_twist))
    except ValueError as e:
        raise ParameterError(f"initial_twist: {e}") from None
    if nj and s.initial_joint_velocities:
        v0 = np.array(v0, dtype=float)
        v0[model.nv - nj:] = s.initial_joint_velocities
    caps = velocity_bounds(model, period_ns(s.physics_rate) * 1e-9)
    over = np.abs(v0) > caps
    if np.any(over):
        i = int(np.argmax(over))
        name = ("initial_joint_velocities" if i >= model.nv - nj else "initial_twist")
        raise ParameterError(f"{name}: velocity component {i} = {v0[i]:g} exceeds the runaway bound {caps[i]:g} "
                             f"(1 rad per physics step for angular rates, at most 1e4; 1e4 m/s)")
    return q0, v0


def topic_token(name: str) -> str:
    """A joint name as one token of a topic name: characters other than letters, digits and ``_`` become ``_``
    (and a leading digit gets a ``_`` before it)."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + token if token[:1].isdigit() or not token else token


def steps_between(physics_rate: float, rate: float) -> int:
    """Physics steps between two publications at ``rate`` (0: never)."""
    return max(1, int(round(physics_rate / rate))) if rate > 0 else 0
