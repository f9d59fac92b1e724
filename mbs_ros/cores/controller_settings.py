"""controller_node's settings, ROS-free: the parameter values checked (:func:`settings_from_values`), the model they
describe (:func:`build_model`), its control law (:func:`make_law`) and command limits (:func:`command_limits`).
The defaults are the parameter table's (:mod:`mbs_ros.cores.parameters.controller`)."""
from __future__ import annotations

import warnings
from typing import Dict

import numpy as np

from mbs_ros.controllers import ComputedTorque, JointPDGravity, PassivityBased, PDGravity
from mbs_ros.controllers.lqr import LQR
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError, base_link
from mbs_ros.cores import params as prm
from mbs_ros.cores.dynamics_settings import check_inertia
from mbs_ros.cores.parameters import field_name, settings_class
from mbs_ros.cores.parameters.controller import PARAMETERS

__all__ = ["ControllerSettings", "DEFAULTS", "settings_from_values", "build_model", "make_law", "command_limits",
           "with_payload",
           "layout_description", "field_name", "ParameterError"]


# Bounds of the checks the table cannot say (docs/controller_node.md); every parameter's own type, range, size and
# bounds are in its table entry (mbs_ros.cores.parameters.controller, shared ones in .dynamics) and nowhere else.
MAX_GAIN = 1.0e9  # kp, kd, lambda entries: a gain times any admissible error stays far from overflow


def _inertia_matrix(self) -> np.ndarray:
    ixx, ixy, ixz, iyy, iyz, izz = self.inertia
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


#: The checked parameters: one field per parameter of the table (``lambda`` is the field ``lambda_``), defaults
#: from it (:func:`mbs_ros.cores.parameters.settings_class`).
ControllerSettings = settings_class("ControllerSettings", PARAMETERS, "The checked controller_node parameters (one "
                                    "field per parameter; ``lambda`` is the field ``lambda_``).", module=__name__,
                                    namespace={"inertia_matrix": property(_inertia_matrix)})
DEFAULTS = ControllerSettings()


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
    locked = prm.locked_joints_setting(values, source.multibody)
    gains = {name: (lambda v, name=name: _gain(v, name)) for name, p in PARAMETERS.items() if p.check == "gain"}
    s = ControllerSettings(**prm.check_table(values, PARAMETERS, custom=dict(
        gains, base_group=lambda v: prm.text(v, "base_group", ms.TREE_BASES if source.multibody else ms.BASES),
        locked_joints=lambda v: locked[0], locked_joint_positions=lambda v: locked[1])))
    if not s.lockstep and s.state_timeout < 1.0 / s.control_rate:
        raise ParameterError(f"state_timeout must be at least one control period (1/control_rate = "
                             f"{1.0 / s.control_rate:g} s), got {s.state_timeout:g} s: every state would be stale")
    if len(s.gripper_times) != len(s.gripper_positions):
        raise ParameterError(f"gripper_positions must have one entry per gripper_times entry "
                             f"({len(s.gripper_times)}), got {len(s.gripper_positions)}")
    if any(b <= a for a, b in zip(s.gripper_times, s.gripper_times[1:])):
        raise ParameterError("gripper_times must increase")
    if s.gripper_joints and not s.gripper_times:
        raise ParameterError("gripper_joints needs a schedule: gripper_times and gripper_positions")
    if s.payload_mass > 0.0:
        if not s.payload_link or not source.multibody:
            raise ParameterError("payload_mass needs payload_link, a link of the robot")
        if len(s.payload_inertia) not in (0, 3) or len(s.payload_com) != 3:
            raise ParameterError(f"payload_inertia must have 3 entries (or none) and payload_com 3, got "
                                 f"{len(s.payload_inertia)} and {len(s.payload_com)}")
    if not source.multibody:
        check_inertia(s.inertia_matrix)
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
    inertia = s.inertia_matrix * s.mass_scale
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Model.rigid_body(base=s.base_group, mass=s.mass * s.mass_scale, inertia=inertia,
                                    com=np.array(s.com), gravity=np.array(s.gravity))
    except ValueError as e:
        raise ParameterError(f"cannot build the {s.base_group} model: {e}") from None


def with_payload(source: ms.Source, s: ControllerSettings) -> ms.Source:
    """The robot source with the payload as a body fixed to ``payload_link`` (a link ``payload`` on a fixed joint at
    ``payload_com``: the model merges its inertia into the link's body, as Pinocchio does); ParameterError naming a
    link the robot has not."""
    import xml.etree.ElementTree as ET
    from dataclasses import replace

    root = ET.fromstring(source.urdf)
    links = {el.get("name") for el in root.findall("link")}
    if s.payload_link not in links:
        raise ParameterError(f"payload_link: the robot has no link {s.payload_link!r}")
    name = "payload"
    while name in links:
        name += "_"
    ixx, iyy, izz = s.payload_inertia if s.payload_inertia else (0.0, 0.0, 0.0)
    link = ET.SubElement(root, "link", name=name)
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "mass", value=repr(float(s.payload_mass)))
    ET.SubElement(inertial, "inertia", ixx=repr(float(ixx)), ixy="0", ixz="0", iyy=repr(float(iyy)), iyz="0",
                  izz=repr(float(izz)))
    joint = ET.SubElement(root, "joint", name=name + "_joint", type="fixed")
    ET.SubElement(joint, "parent", link=s.payload_link)
    ET.SubElement(joint, "child", link=name)
    ET.SubElement(joint, "origin", xyz=" ".join(repr(float(x)) for x in s.payload_com), rpy="0 0 0")
    return replace(source, urdf=ET.tostring(root, encoding="unicode"))


def make_law(model: Model, s: ControllerSettings):
    """The control law of the settings on ``model``; ParameterError naming the gain and the reason."""
    try:
        if s.law == "computed_torque":
            return ComputedTorque(model, kp=s.kp, kd=s.kd)
        if s.law == "pd_gravity":
            return PDGravity(model, kp=s.kp, kd=s.kd)
        if s.law == "joint_pd_gravity":
            return JointPDGravity(model, kp=s.kp, kd=s.kd)
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
    (:func:`mbs_ros.dynamics.simulation.actuators.command_limits`); ParameterError if ``max_effort`` has the wrong length."""
    lim = prm.command_limits(model, s)
    return lim.max_force, lim.max_torque, np.array(lim.max_effort)
