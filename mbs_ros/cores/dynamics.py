"""The dynamics node's ROS-free core: the simulator it builds from its settings (:func:`make_simulator`), the state
it publishes (:class:`StateView`: the base pose and body twist of odom, the joint positions of joint_states), its
energy bookkeeping (:func:`energy_report`, the energy topic's content) and its sensors (:func:`load_suite`,
:func:`beam_range`). The node (:mod:`mbs_ros.nodes.dynamics_node`) and a headless run (:mod:`mbs_ros.headless`)
both call these, so the two integrate and report the same numbers. docs/dynamics_node.md.
"""
from __future__ import annotations

import math
import os
from typing import Optional, Tuple

import numpy as np

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.simulation.actuators import CommandLimits
from mbs_ros.dynamics.simulation.integrators import warm_up as warm_up_stepping
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.dynamics.model.passive import energy_storages
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.cores.commands import TOPIC
from mbs_ros.cores.dynamics_settings import Settings, lockstep_steps
from mbs_ros.cores.params import seconds_text
from mbs_ros.cores.rotations import quaternion_from_matrix

__all__ = ["make_simulator", "disturbances", "make_world", "scale_friction", "move_objects", "world_path", "StateView", "energy_report", "balance_residual", "diagnostics_report", "tf_layout", "limits_text",
           "load_suite", "beam_range"]


def make_simulator(model: Model, s: Settings, q0, v0, dt: float, limits: CommandLimits, t0_ns: int,
                   source: Optional[ms.Source] = None) -> Simulator:
    """The simulator of the settings: ``dt`` the physics step [s], ``t0_ns`` the time of step 0, the integrator,
    command timeout, lockstep period and command limits of ``s``; its contact world from the ``world`` parameter
    (:func:`make_world`) and joint limits from ``joint_limits``; with either, what its first contact step would
    load loaded now (:meth:`~mbs_ros.dynamics.contact.world.ContactWorld.warm_up`), and always what its stepping
    loads (:func:`~mbs_ros.dynamics.simulation.integrators.warm_up`)."""
    world, objects = make_world(s, source, model, q0) if source is not None else (None, [])
    pushes = disturbances(s.disturbance, model, dt)
    sim = Simulator(model, q0, v0, dt, integrator=s.integrator, cmd_timeout=s.cmd_timeout,
                    lockstep_steps=lockstep_steps(s) if s.lockstep else 0, t0_ns=t0_ns,
                    max_wrench=(limits.max_force, limits.max_torque), max_effort=limits.max_effort,
                    world=world, joint_limits=s.joint_limits, objects=objects, base_actuated=s.base_actuated)
    sim.set_disturbances(pushes)
    if sim.world is not None:  # the first contact step (a landing) would load them: tens of ms in one callback
        sim.world.warm_up([sim.q] + list(sim.obj_q), [sim.v] + list(sim.obj_v))
    warm_up_stepping(sim.model, sim.q, sim.v, sim.dt, sim.integrator)  # a late tick: the compiled loop
    return sim


def disturbances(values, model: Model, dt: float) -> list:
    """The ``disturbance`` parameter (groups of 8: start [s], duration [s], the world wrench [N, N m]) as the
    Simulator's ``(first step, end step, W)``; ParameterError naming the parameter and the group."""
    values = [float(x) for x in values]
    if not values:
        return []
    if model.base != "se3":
        raise ParameterError(f"disturbance: needs a floating se3 base, this one is {model.base}")
    if len(values) % 8:
        raise ParameterError(f"disturbance: groups of 8 numbers [start, duration, fx, fy, fz, tx, ty, tz], got "
                             f"{len(values)} numbers")
    out = []
    for i in range(0, len(values), 8):
        start, duration, W = values[i], values[i + 1], values[i + 2:i + 8]
        where = f"disturbance[{i // 8}]"
        if not all(math.isfinite(x) for x in values[i:i + 8]):
            raise ParameterError(f"{where}: every number must be finite")
        if not 0.0 <= start <= 1e9 or not dt <= duration <= 1e9:
            raise ParameterError(f"{where}: start must be in [0, 1e9] s and duration in [one physics step "
                                 f"({dt:g} s), 1e9] s, got start {start:g}, duration {duration:g}")
        if max(abs(x) for x in W) > 1e6 * max(model.total_mass, 1.0):
            raise ParameterError(f"{where}: each wrench component at most 1e6 N/kg (N m/kg) x the total mass")
        first = int(round(start / dt))
        out.append((first, first + max(1, int(round(duration / dt))), W))
    return out


def world_path(setting: str, source: ms.Source) -> Optional[str]:
    """The file the ``world`` parameter names (:func:`~mbs_ros.dynamics.model.source.companion_path`), the robot
    YAML's own only when it has a ``world:`` mapping. ParameterError naming it."""
    path = ms.companion_path("world", setting, source)
    if path is None or (setting or "").strip():
        return path
    from mbs_ros.yamlfile import YamlFileError, read_yaml

    try:
        data = read_yaml(path)
    except YamlFileError:
        return None  # the model loaded from it: not reached
    return path if isinstance(data, dict) and "world" in data else None


def make_world(s: Settings, source: ms.Source, model: Model, q0):
    """``(ContactWorld or None, object initial states)`` of the ``world`` parameter
    (:mod:`mbs_ros.dynamics.contact.world_file`); None without a world (the Simulator then makes the joint
    limits' own world when ``joint_limits``). ParameterError naming the file and the key, the link and the file
    of an unreadable collision mesh, or the pairs that start interpenetrating."""
    path = world_path(s.world, source)
    if path is None:
        return None, []
    from mbs_ros.dynamics.contact.world_file import build_world, load_world
    from mbs_ros.dynamics.model.urdf import ModelError
    from mbs_ros.yamlfile import YamlFileError

    try:
        spec = scale_friction(load_world(path, fluid_density=source.fluid_density), s.friction_scale)
        spec = vary_objects(spec, s.object_offset, s.object_mass_scale, s.object_mu_scale)
        base_dir = os.path.dirname(os.path.abspath(source.path)) if source.path else None
        return build_world(spec, model, source.urdf, q0, model.gravity, limits=s.joint_limits, base_dir=base_dir)
    except (YamlFileError, ModelError, ValueError) as e:
        raise ParameterError(f"world: {e}") from None


def scale_friction(spec, scale: float):
    """``spec`` (a :class:`~mbs_ros.dynamics.contact.world_file.WorldSpec`) with every friction coefficient times
    ``scale`` (the ``friction_scale`` parameter): the world's default and each shape's own mu (a shape without one
    takes the scaled default). ``spec`` itself when the scale is 1."""
    if scale == 1.0:
        return spec
    import dataclasses

    def each(items):
        return [dict(o, mu=None if o.get("mu") is None else o["mu"] * scale) for o in items]

    ground = None if spec.ground is None else dict(spec.ground, mu=None if spec.ground.get("mu") is None
                                                   else spec.ground["mu"] * scale)
    return dataclasses.replace(spec, friction=spec.friction * scale, ground=ground, static=each(spec.static),
                               objects=each(spec.objects), robot_shapes=each(spec.robot_shapes))


def vary_objects(spec, offset=(), mass_scale: float = 1.0, mu_scale: float = 1.0):
    """``spec`` with every free object's start shifted by ``offset[:3]`` [m] and turned by ``offset[3]`` [rad]
    about the world's z axis through its centre (``object_offset``; the yaw adds to the extrinsic xyz angles'
    last, a rotation about world z), its mass and inertia times ``mass_scale`` (``object_mass_scale``; its volume,
    so its buoyancy, unchanged) and its friction times ``mu_scale`` (``object_mu_scale``). ``spec`` itself when
    nothing changes."""
    offset = tuple(float(x) for x in offset)
    if mass_scale == 1.0 and mu_scale == 1.0 and not any(offset):
        return spec
    import dataclasses

    d = np.asarray(offset[:3] if offset else (0.0, 0.0, 0.0), dtype=float)
    yaw = offset[3] if offset else 0.0
    objects = []
    for o in spec.objects:
        rpy = list(o.get("rpy") or (0.0, 0.0, 0.0))
        rpy[2] += yaw
        o = dict(o, xyz=(np.asarray(o["xyz"], dtype=float) + d).tolist(), rpy=rpy)
        if mass_scale != 1.0:
            o["mass"] = o["mass"] * mass_scale
            o["inertia"] = None if o.get("inertia") is None else [x * mass_scale for x in o["inertia"]]
        if mu_scale != 1.0:
            o["mu"] = (spec.friction if o.get("mu") is None else o["mu"]) * mu_scale
        objects.append(o)
    return dataclasses.replace(spec, objects=objects)


class StateView:
    """The state as the node publishes it: :meth:`base_pose` (odom's pose: the base's, or for a URDF rooted at a
    link above the base (``world``) that link's pose), :meth:`twist` (odom's body twist, linear first) and
    :meth:`joint_positions` (one per joint: revolute/prismatic entries of q as they are, continuous ones as
    ``atan2(sin, cos)``)."""

    def __init__(self, model: Model, source: Optional[ms.Source]):
        nq_joints = sum(2 if t == "continuous" else 1 for t in model.joint_types)
        lin_j, lin_q, cont_j, cont_q, i = [], [], [], [], model.nq - nq_joints
        for j, t in enumerate(model.joint_types):
            if t == "continuous":
                cont_j.append(j)
                cont_q.append(i)
                i += 2
            else:
                lin_j.append(j)
                lin_q.append(i)
                i += 1
        self.nj = len(model.joint_types)
        self.jpos = (np.array(lin_j, dtype=int), np.array(lin_q, dtype=int), np.array(cont_j, dtype=int),
                     np.array(cont_q, dtype=int))
        self.base_link_index = None
        self.base_is_root = True
        if source is not None and source.multibody:
            index = {name: k for k, name in enumerate(model.link_names)}
            base_link = ms.base_link(source)
            self.base_link_index = index[base_link]
            self.base_is_root = base_link == source.root_link

    def base_pose(self, model: Model, q: np.ndarray, poses: Optional[np.ndarray] = None) -> Tuple[list, list]:
        """``(p, quat xyzw)`` as lists of floats of ``model`` (the current one: a reconfiguration replaces it, with
        the same kinematics); ``poses``: the link poses of ``q`` when already computed."""
        if not self.base_is_root:
            T = (model.link_poses(q) if poses is None else poses)[self.base_link_index]
            return T[:3, 3].tolist(), quaternion_from_matrix(T[:3, :3]).tolist()
        p, quat = model.pose(q)
        return p.tolist(), quat.tolist()

    @staticmethod
    def twist(model: Model, q: np.ndarray, v: np.ndarray) -> list:
        return model.twist(q, v).tolist()

    def joint_positions(self, q: np.ndarray) -> np.ndarray:
        lin_j, lin_q, cont_j, cont_q = self.jpos
        out = np.empty(self.nj)
        out[lin_j] = q[lin_q]
        out[cont_j] = np.arctan2(q[cont_q + 1], q[cont_q])
        return out

    @staticmethod
    def joint_state_names(model: Model) -> list:
        """joint_states' names: the moving joints, the mimic joints (:attr:`Model.mimic_joints`), the locked ones
        (:attr:`Model.locked_joints`), so a JointState consumer sees every joint the URDF moves."""
        return list(model.joint_names) + list(model.mimic_joints) + list(dict(model.locked_joints))

    def joint_state(self, sim: Simulator) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(position, velocity, effort)`` of :meth:`joint_state_names` at the simulator's state: mimic joints
        derived (``m q + o``, ``m v``, the effort each carries under the applied commands), locked ones at their
        fixed position with zero velocity and effort."""
        model = sim.model
        position, velocity = self.joint_positions(sim.q), sim.v[model.nv - self.nj:]
        effort = np.ascontiguousarray(sim.applied_efforts, dtype=float)
        if model.mimic_joints:
            q, v = sim.q, sim.v
            a = model.forward_dynamics(q, v, sim.generalized_force())
            mq, mv, me = model.mimic_joint_states(q, v, a)
            position, velocity, effort = (np.concatenate((position, mq)), np.concatenate((velocity, mv)),
                                          np.concatenate((effort, me)))
        locked = dict(model.locked_joints)
        if locked:
            zeros = np.zeros(len(locked))
            position = np.concatenate((position, np.array(list(locked.values()), dtype=float)))
            velocity, effort = np.concatenate((velocity, zeros)), np.concatenate((effort, zeros))
        return position, np.ascontiguousarray(velocity), effort


def energy_report(sim: Simulator, temperature: float) -> dict:
    """The port-level bookkeeping of the simulator's current state (:meth:`Model.energy_ports`) with its
    integrals: total, supplied and dissipated energy, entropy produced and the balance residual
    ``E - E_0 - supplied + dissipated`` (0 up to the integrator's error)."""
    model = sim.model
    q, v = sim.q, sim.v
    wrench = sim.applied_wrench_body() if model.group is not None else None
    report = model.energy_ports(q, v, efforts=sim.applied_efforts if sim.nj else None, wrench=wrench,
                                thrust=sim.thrust if sim.nt else None, temperature=temperature)
    theta = report["temperature"]
    if sim.world is not None:  # contact, friction and limit stops: a dissipative port (seed 000), never supplying
        dissipated = -sim.contact_power
        report["dissipators"]["contact"] = dissipated
        report["entropy_production"] += dissipated / theta
        if sim.objects:
            report["storages"]["objects"] = sim.objects_energy()
    total = sum(report["storages"].values())
    supplied, residual = _balance(sim, total)
    dissipated_energy = sim.dissipated - sim.contact_work
    report.update(total_energy=total, supplied_energy=supplied, dissipated_energy=dissipated_energy,
                  entropy_produced=dissipated_energy / theta, balance_residual=residual)
    return report


def tf_layout(model: Model, source, frame):
    """The TF layout of a robot: ``(static, moving, child_of, world_to_base)``: ``(parent frame, child frame,
    p, quat)`` of each fixed joint, ``(parent link index, child link index, parent frame, child frame)`` of each
    other joint, each joint's child link, and whether /tf carries world → base (no fixed joint from world to the
    base link). ``frame(link)`` is a link's TF frame."""
    index = {name: i for i, name in enumerate(model.link_names)}
    base_link = ms.base_link(source)
    poses = model.link_poses(model.neutral())
    static, moving, child_of, world_to_base = [], [], {}, True
    for name, jtype, parent, child in source.joints:
        child_of[name] = child
        pi, ci = index[parent], index[child]
        if jtype == "fixed":
            T = np.linalg.inv(poses[pi]) @ poses[ci]
            static.append((frame(parent), frame(child), T[:3, 3].copy(), quaternion_from_matrix(T[:3, :3])))
            world_to_base = world_to_base and not (parent == "world" and child == base_link)
        else:
            moving.append((pi, ci, frame(parent), frame(child)))
    return static, moving, child_of, world_to_base


def limits_text(sim: Simulator) -> str:
    """The command limits in a line (the start-up message, saturation warnings)."""
    lim, model = sim.limits, sim.model
    parts = [f"max_wrench [{lim.max_force:g} N, {lim.max_torque:g} N m]"] if model.group is not None else []
    if sim.nj:
        parts.append("max_effort [" + ", ".join(f"{x:g}" for x in lim.max_effort) + "]")
    if sim.nt:
        lo, hi = model.thrust_limits
        parts.append("thrust [" + ", ".join(f"{a:g}..{b:g}" for a, b in zip(lo, hi)) + "] N")
    return ", ".join(parts) or "no command limits (nothing to command)"


def start_message(s: Settings, rate, sim: Simulator, described: str, multibody: bool, frames, publish_every: int,
              awaiting: bool, pause_k, sensors_text: str) -> str:
    """The dynamics node's one info line at start-up: the model (``described`` where it comes from), the
    integrator and rate, the timing (``frames``: world and base; ``awaiting`` the first command), limits,
    ``sensors_text``, the fastest modes (``rate``: :func:`check_rate`'s)."""
    model = sim.model
    nj = len(model.joint_names)
    if multibody:
        what = (f"{s.base_group} base robot {described}, {nj} joints "
                f"({', '.join(model.joint_names)}), total mass {model.total_mass:g} kg")
        errors = [f"{n} {getattr(s, n):g}" for n in ("mass_scale", "added_mass_scale") if getattr(s, n) != 1.0]
        errors += ["link_mass_scales [" + ", ".join(f"{f:g}" for f in s.link_mass_scales) + "]"] \
            if s.link_mass_scales else []
        what += f" (true model perturbed: {', '.join(errors)})" if errors else ""
    else:
        what = f"{s.base_group} body, mass {s.mass:g} kg"
    if s.lockstep:
        timing = (f"lockstep: {sim.lockstep_steps} steps per control period, waiting for "
                  f"{' and '.join(TOPIC[ch] for ch in sim.expected)} stamped with each state, "
                  + (f"at most {s.real_time_factor:g}x real time" if s.real_time_factor > 0
                     else "as fast as the controller answers"))
    else:
        timing = (f"publishing {frames[0]} -> {frames[1]} every {publish_every} steps, "
                  + (f"real_time_factor {s.real_time_factor:g}" if s.real_time_factor > 0
                     else "as fast as possible") + f", cmd_timeout {s.cmd_timeout:g} s")
    return (f"{what}, {s.integrator} at {1e9 / sim.dt_ns:g} Hz (dt = {sim.dt_ns} ns), {timing}"
            + (", publishing /clock" if s.publish_clock else "")
            + (f"; paused at t = {sim.stamp() * 1e-9:.9f} s (start_paused: ~/pause false resumes, ~/step "
               "steps)" if s.start_paused else "")
            + (f"; waiting at t = {sim.stamp() * 1e-9:.9f} s for the first command (wait_for_command)"
               if awaiting else "")
            + (f"; pausing at t = {sim.stamp(pause_k) * 1e-9:.9f} s (pause_at)"
               if pause_k is not None else "")
            + f"; {limits_text(sim)}; {sensors_text}; fastest modes: "
            f"gravity {rate.omega_gravity:.3g} rad/s, full effort {rate.omega_effort:.3g} rad/s; runaway beyond "
            f"{sim.max_angular_rate:g} rad/s")


def diagnostics_report(sim: Simulator, counts: dict, reported: dict, paused: bool, rate, timing=None):
    """What the node's /diagnostics status says (docs/dynamics_node.md, "Diagnostics"): ``(level, message, values,
    now)``, ``level`` "OK", "WARN" (a count grew since ``reported``, the ``now`` of the last report: rejected inputs,
    saturated commands, callback errors, unconverged contact solves) or "ERROR" (a fault); ``values`` the
    simulator's diagnostics with ``counts``, the limits, ``rate`` (:func:`~mbs_ros.cores.dynamics_settings.
    check_rate`) and ``timing()``."""
    values = sim.diagnostics()
    if timing is not None:
        values.update(timing())
    values["paused"] = paused
    counts = dict(counts)
    values.update(counts)
    lim = sim.limits
    values.update(max_force=lim.max_force, max_torque=lim.max_torque,
                  max_effort=" ".join(repr(float(x)) for x in lim.max_effort),
                  max_angular_rate=sim.max_angular_rate, omega_gravity=rate.omega_gravity,
                  omega_effort=rate.omega_effort)
    # received inputs, and skips ahead of the wall-clock pacing (load, logged: mbs_ros.cores.pacing), are no warning
    now = {k: v for k, v in counts.items() if not k.startswith("received_") and k != "skipped_ahead"}
    now.update(saturated_wrench_commands=sim.saturated["wrench"], saturated_effort_commands=sim.saturated["joints"])
    if sim.world is not None:  # a contact solve that ended above its tolerance (the step still finished)
        now.update(contact_unconverged=sim.contact_unconverged)
    if sim.nt:
        now.update(saturated_thrust_commands=sim.saturated["thrusters"])
        values.update(saturated_thrust_commands=sim.saturated["thrusters"])
    new = {k: v - reported.get(k, 0) for k, v in now.items() if v - reported.get(k, 0) > 0}
    if sim.fault is not None:
        f = sim.fault
        message = (f"halted at t = {seconds_text(f.stamp_ns)} s (step {f.k}, {f.kind}): {f.reason}; the state at "
                   "that time is kept; call ~/reset")
        return "ERROR", message, values, now
    message = "paused" if paused else "running"
    if new:
        message += " (since the last report: " + ", ".join(f"{k} +{v}" for k, v in sorted(new.items())) + ")"
    return ("WARN" if new else "OK"), message, values, now


def balance_residual(sim: Simulator) -> float:
    """:func:`energy_report`'s ``balance_residual`` alone, from the stored energies
    (:func:`mbs_ros.dynamics.model.passive.energy_storages`, the same numbers the report sums) without the ports'
    powers: what a headless run records each period."""
    return _balance(sim, sum(energy_storages(sim.model, sim.q, sim.v).values()) + sim.objects_energy())[1]


def _balance(sim: Simulator, total: float) -> Tuple[float, float]:
    """``(supplied, E − E₀ − supplied + dissipated)`` of the total energy ``total`` at the simulator's state; the
    contact's work (≤ 0) is dissipated too."""
    supplied = sim.work + sim.passive_work + sim.dissipated
    return supplied, total - sim.energy_ref - supplied + sim.dissipated - sim.contact_work


def load_suite(setting: str, source: ms.Source, model, dt: float, current=(0.0, 0.0, 0.0), seed_offset: int = 0):
    """The :class:`~mbs_ros.sensors.suite.SensorSuite` of the ``sensors`` parameter, or None (no sensors);
    ``seed_offset``: the ``sensor_seed`` parameter (see :func:`mbs_ros.sensors.spec.load_sensors`).
    A :class:`~mbs_ros.sensors.spec.SensorConfigError` (its message names file, sensor and key) becomes a
    ParameterError, so the node refuses to start with it."""
    path = ms.sensors_path(setting, source)
    if path is None:
        return None
    from mbs_ros.sensors.spec import SensorConfigError, load_sensors
    from mbs_ros.sensors.suite import SensorSuite

    try:
        sensor_set = load_sensors(path, model, dt, current=tuple(float(x) for x in current),
                                  seed_offset=seed_offset)
    except SensorConfigError as e:
        raise ParameterError(f"sensors: {e}") from None
    if not sensor_set.sensors:
        if (setting or "").strip():  # a file given on purpose that declares nothing: say so
            raise ParameterError(f"sensors: {path}: declares no sensors (sensors: none turns them off)")
        return None
    return SensorSuite(model, sensor_set, dt)


def beam_range(value: float, min_range: float, max_range: float) -> float:
    """A beam's range as sensor_msgs/Range wants it (REP 117): the range within [min, max]; no return (nan) or
    beyond max_range: +inf; closer than min_range: -inf."""
    value = float(value)
    if not math.isfinite(value) or value > max_range:
        return math.inf
    if value < min_range:
        return -math.inf
    return value
