"""The controller node's ROS-free core: what it builds from its parameters (:func:`controller_setup`: settings,
model, law, limits, thruster allocation, command output), the references it holds and evaluates
(:func:`hold_references`, :func:`evaluate`, :func:`desired`), the references it installs from the points of a
message (:func:`reference_from_points`) and the law's command for a state (:func:`law_command`). The node
(:mod:`mbs_ros.nodes.controller_node`) and a headless run (:mod:`mbs_ros.headless`) both call these, so that the
two compute the same command from the same state. Laws: :mod:`mbs_ros.controllers.laws`; docs/controller_node.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from mbs_ros.controllers import Reference
from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers.allocation import ThrusterAllocation
from mbs_ros.controllers.allocation import for_model as allocation_for_model
from mbs_ros.controllers.command import CommandOutput
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation import actuators
from mbs_ros.dynamics.model import source as ms
from mbs_ros.cores.controller_settings import (ControllerSettings, ParameterError, build_model, command_limits,
                                               make_law, settings_from_values, with_payload)

__all__ = ["ControllerSetup", "controller_setup", "evaluate", "hold_references", "desired", "idle", "law_command",
           "reference_from_points", "gripper_index", "with_gripper", "law_for"]


@dataclass(frozen=True)
class ControllerSetup:
    """What the controller computes with: its settings, model, law, limits, allocation (None without thruster
    allocation) and the :class:`~mbs_ros.controllers.command.CommandOutput` that saturates and allocates."""

    settings: ControllerSettings
    model: Model
    law: object
    max_force: float
    max_torque: float
    max_effort: np.ndarray
    allocation: Optional[ThrusterAllocation]
    output: CommandOutput
    gripper: Optional[tuple] = None  #: the gripper joints' (q, v) indices (:func:`gripper_index`)
    payload: Optional[tuple] = None  #: ``(model, law)`` with the payload in the model (:func:`law_for`)


def controller_setup(values, source: ms.Source) -> ControllerSetup:
    """The controller of raw parameter ``values`` on the model ``source``; ParameterError with the reason. The law
    is called once on the neutral state, so its compiled kernels load now, not on the first state."""
    s = settings_from_values(values, source)
    model = build_model(s, source)
    law = make_law(model, s)
    try:  # a first answer took 2 s on a loaded machine when the kernels loaded on the first state
        q, z = model.neutral(), np.zeros(model.nv)
        law(q, z, q, z, z)
    except Exception:  # noqa: BLE001 - a warm-up only; the first state reports a real problem
        pass
    max_force, max_torque, max_effort = command_limits(model, s)
    allocation = None
    if model.group is not None and model.thruster_names and s.allocate_thrusters:
        try:
            allocation = allocation_for_model(model, s.thruster_weights)
        except ValueError as e:
            raise ParameterError(str(e)) from None
    output = CommandOutput(model, actuators.CommandLimits(max_force, max_torque, max_effort), allocation)
    payload = None
    if s.payload_mass > 0.0:
        p_model = build_model(s, with_payload(source, s))
        payload = (p_model, make_law(p_model, s))
    return ControllerSetup(s, model, law, max_force, max_torque, max_effort, allocation, output,
                           gripper_index(s, model), payload)


def law_for(setup: ControllerSetup, t_ref: int):
    """``(model, law)`` the command is computed with at reference time ``t_ref`` [ns]: with the payload while the
    gripper holds it (its scheduled target arrived, at rest, below the first, open, position: closed; a model
    that knew the object before the fingers held it would lift the arm away from it), always without a gripper;
    else the robot's own."""
    if setup.payload is None:
        return setup.model, setup.law
    s = setup.settings
    if setup.gripper is None:
        return setup.payload
    target, rate = gripper_target(s, t_ref)
    if rate == 0.0 and target < float(s.gripper_positions[0]):
        return setup.payload
    return setup.model, setup.law


def evaluate(ref: Tuple[int, Reference], t_ref: int):
    """``(q, v, a)`` of a held reference ``(start, Reference)`` at reference time ``t_ref`` (ns)."""
    start, r = ref
    return r((t_ref - start) * 1e-9)


def hold_references(model: Model, q: np.ndarray, start: int) -> Tuple[Optional[tuple], Optional[tuple]]:
    """``(base_ref, joint_ref)`` that hold the configuration ``q`` from reference time ``start`` (the first state,
    until a reference arrives); None for a part the robot has not."""
    nq_base = ms.base_sizes(model)[0]
    nj = len(model.joint_names)
    base = Reference(model.group, [0.0], [q[:nq_base]]) if model.group is not None else None
    joints = Reference(nj, [0.0], [ms.joint_positions_from_q(model, q[nq_base:])]) if nj else None
    return (None if base is None else (start, base)), (None if joints is None else (start, joints))


def desired(model: Model, base_ref, joint_ref, t_ref: int):
    """``(q_d, v_d, a_d)`` in the model's layout at reference time ``t_ref``: the base from ``base_ref``, the joints
    from ``joint_ref`` (None for a part the robot has not)."""
    nq_base, nv_base = ms.base_sizes(model)
    # both parts given: every entry of q_d is set below (the neutral configuration otherwise)
    q_d = np.empty(model.nq) if base_ref is not None and joint_ref is not None else model.neutral()
    v_d, a_d = np.zeros(model.nv), np.zeros(model.nv)
    if base_ref is not None:
        qb, vb, ab = evaluate(base_ref, t_ref)
        q_d[:nq_base], v_d[:nv_base], a_d[:nv_base] = qb, vb, ab
    if joint_ref is not None:
        qj, vj, aj = evaluate(joint_ref, t_ref)
        q_d[nq_base:] = ms.joint_positions_to_q(model, qj)
        v_d[nv_base:], a_d[nv_base:] = vj, aj
    return q_d, v_d, a_d


def idle(settings: ControllerSettings, t_ref: int) -> bool:
    """Whether the controller commands zero at reference time ``t_ref`` [ns]: before ``idle_until`` (0: never)."""
    return t_ref < int(round(settings.idle_until * 1e9))


def law_command(law, model: Model, compensate_passive: bool, q, v, q_d, v_d, a_d) -> np.ndarray:
    """The generalised force ``τ`` the law asks for at ``(q, v)`` tracking ``(q_d, v_d, a_d)``, minus the model's
    passive forces with ``compensate_passive``; FloatingPointError for a non-finite one (the node then commands
    zero)."""
    tau = np.asarray(law(q, v, q_d, v_d, a_d), dtype=float)
    passive = model.passive
    if compensate_passive and passive is not None and passive.active:
        tau = tau - model.passive_forces(q, v)
    if not np.isfinite(tau).all():
        raise FloatingPointError("the control law gave a non-finite command")
    return tau


def gripper_index(settings: ControllerSettings, model: Model) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """The ``(configuration, velocity)`` indices of the ``gripper_joints`` (None without them); ParameterError
    naming a joint the model has not (or holds as a mimic or locked), or one that is not prismatic or revolute."""
    names = settings.gripper_joints
    if not names:
        return None
    types = dict(zip(model.tree.joint_names, model.tree.joint_types))
    for name in names:
        if name not in model.joint_names:
            raise ParameterError(f"gripper_joints: the model has no moving joint {name!r} (joints: "
                                 f"{', '.join(model.joint_names) or 'none'})")
        if types.get(name) not in ("prismatic", "revolute"):
            raise ParameterError(f"gripper_joints: {name!r} is not a prismatic or revolute joint")
    if len(set(names)) != len(names):
        raise ParameterError("gripper_joints: a joint named twice")
    nq_base, nv_base = ms.base_sizes(model)
    if ms.joint_positions_to_q(model, np.zeros(len(model.joint_names))).shape[0] != len(model.joint_names):
        raise ParameterError("gripper_joints: a model whose joints are not one coordinate each")
    j = np.array([model.joint_names.index(n) for n in names])
    return nq_base + j, nv_base + j


def gripper_target(settings: ControllerSettings, t_ref: int) -> Tuple[float, float]:
    """``(target, its rate)`` of the schedule at reference time ``t_ref`` [ns]: the first entry until the second
    time, then from each time on moving towards that entry at ``gripper_speed``."""
    times, positions, speed = settings.gripper_times, settings.gripper_positions, settings.gripper_speed
    t = t_ref * 1e-9
    x, rate = float(positions[0]), 0.0
    for i in range(1, len(times)):
        if t < times[i]:
            break
        end = min(t, times[i + 1]) if i + 1 < len(times) else t
        step = speed * (end - times[i])
        gap = float(positions[i]) - x
        if abs(gap) <= step:
            x, rate = float(positions[i]), 0.0
        else:
            x, rate = x + math.copysign(step, gap), math.copysign(speed, gap)
    return x, rate


def with_gripper(settings: ControllerSettings, index: Optional[Tuple[np.ndarray, np.ndarray]], tau: np.ndarray, q, v,
                 t_ref: int,
                 target: Optional[float] = None) -> np.ndarray:
    """``tau`` with the gripper joint's entry replaced by the gripper's command, a position target with a squeeze
    limit: ``clip(gain (target − q_j) + damping (rate − v_j), ±gripper_max_effort)`` (``target`` given: an
    action's, held, else the schedule's at ``t_ref``, :func:`gripper_target`); ``tau`` as it is without one."""
    if index is None:
        return tau
    target, rate = gripper_target(settings, t_ref) if target is None else (float(target), 0.0)
    qj, vj = np.asarray(q, dtype=float)[index[0]], np.asarray(v, dtype=float)[index[1]]
    effort = settings.gripper_gain * (target - qj) + settings.gripper_damping * (rate - vj)
    limit = settings.gripper_max_effort
    out = np.array(tau, dtype=float)
    out[index[1]] = np.clip(effort, -limit, limit)
    return out


def reference_from_points(topic: str, stamp_ns: int, sec: Sequence[int], nanosec: Sequence[int],
                          names: Sequence[str], values: tuple, state, offset: int, current, joint_input,
                          base_input):
    """``(start_ns, start in reference time, Reference)`` of a reference's points: ``topic`` joint_reference
    (``values`` = positions, velocities, accelerations per point) or base_reference (``values`` = poses ``(p,
    quat)``, twists and accelerations (6-vectors or None) per point); ``stamp_ns`` its header stamp, ``sec``/
    ``nanosec`` the points' ``time_from_start``; ``state`` the newest ``(t, q, v)``, ``offset`` the time base's,
    ``current`` the held reference it continues. Rejected with the reason."""
    ri.check_point_count(len(sec))
    start_ns = ri.start_time(stamp_ns, state[0])
    start = start_ns - offset  # reference time
    times = ri.point_times(sec, nanosec)
    cur = evaluate(current, start)
    if topic == "joint_reference":
        ref = joint_input(names, times, *values, cur)
    else:
        ref = base_input(names, times, *values, cur, state[1])
    ri.check_rates(ref)
    return start_ns, start, ref
