"""estimator_node's settings and its fusion schedule, ROS-free.

:func:`settings_from_values` checks the parameters (table: :mod:`mbs_ros.cores.parameters.estimator`);
:func:`build_setup` builds the model, reads the sensors file (:func:`mbs_ros.sensors.spec.load_sensors`, the one
the dynamics node reads) and checks the sensor roles (a name of the file with the right type; IMU, DVL, depth and
compass on the base link); :class:`Fusion` runs the invariant EKF (:class:`mbs_ros.estimation.inekf.InvariantEKF`,
Barrau & Bonnabel 2017; IMU + DVL + depth + compass as Potokar et al. 2021) on time-stamped measurements and says
which estimates to publish.

Timing rule (docs/estimator_node.md, "Timing"): times are integer ns. A sensor's measurement time is its stamp
(stamp mode ``arrival``: the stamp minus its delay); it is *available* at measurement time + delay. The filter
body is the IMU; its samples propagate (zero-order hold: a sample holds until the next). The estimates are
published on a grid (``publish_rate``; in lockstep the control period), starting at the origin (0 on simulation
time, else the first IMU sample): the estimate stamped ``g`` takes every measurement available by ``g`` in
measurement-time order and is the filter propagated to ``g``. The first (stamped at the origin) is the prior.
Outside lockstep the grid point ``g`` is published once the IMU's availability reaches it; in lockstep once every
used sensor's sample due by ``g`` (its grid from the origin, plus its delay) has arrived, so the estimates do not
depend on the order the topics' messages come in. An aiding measurement measured before the filter's time (it came
too late) is dropped and counted (``late_<role>``), not applied at a wrong time.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores import params as prm
from mbs_ros.cores.parameters import settings_class
from mbs_ros.cores.parameters.estimator import PARAMETERS, ROLE_TYPES, SENSOR_ROLES
from mbs_ros.sensors.spec import rotation_rpy

__all__ = ["EstimatorSettings", "DEFAULTS", "settings_from_values", "Setup", "build_setup", "Fusion", "Output",
           "Rejected", "ParameterError", "MAX_QUEUE", "MAX_OUTPUTS_PER_CALL", "MAX_WORK_PER_CALL"]

NS = 1_000_000_000
MAX_QUEUE = 20_000  # measurements waiting for their estimate; beyond, the oldest is dropped (counted)
MAX_OUTPUTS_PER_CALL = 200  # estimates one call may produce (bounded work per callback); the rest follow next call
#: The propagation sub-steps (InvariantEKF.n_substeps: the filter's unit of work, ~0.2-0.6 ms each on a busy
#: 2-core machine) one call may start when the node sets :attr:`Fusion.work_budget` (the node does; the headless run
#: leaves it unbounded): a call takes at most MAX_WORK_PER_CALL - 1 + MAX_SUBSTEPS, and what is left (a lockstep
#: period of a 1 kHz IMU under a 10 Hz controller, a long catch-up) follows on the next call or the node's
#: continuation timer (:attr:`Fusion.pending`), so no callback holds the node for more than a few tens of ms.
MAX_WORK_PER_CALL = 32
MIN_GYRO_BIAS_SIGMA = 1.0e-5  # rad/s: prior bias sigma when neither the parameter nor the IMU's turn-on bias give one
MIN_ACCEL_BIAS_SIGMA = 1.0e-4  # m/s^2


#: The checked parameters: one field per parameter of the table, defaults from it
#: (:func:`mbs_ros.cores.parameters.settings_class`).
EstimatorSettings = settings_class("EstimatorSettings", PARAMETERS, "The checked estimator_node parameters (one "
                                   "field per parameter).", module=__name__)
DEFAULTS = EstimatorSettings()


def settings_from_values(values: Dict[str, object], source: ms.Source) -> EstimatorSettings:
    """Validate raw parameter values; ParameterError naming the parameter and the reason."""

    def positive(name, n):
        out = prm.vector(values, name, n)
        if any(not x > 0.0 for x in out):
            raise ParameterError(f"{name} must be > 0, got {list(out)}")
        return out

    if not source.multibody:
        raise ParameterError("model_file (or robot_description) must name the robot: the estimator reads its "
                             "links, joints and sensors")
    s = EstimatorSettings(**prm.check_table(values, PARAMETERS, custom={
        "base_group": lambda v: prm.text(v, "base_group", ms.TREE_BASES),
        "initial_attitude_sigma": lambda v: positive("initial_attitude_sigma", 2)}))
    if s.base_frame.lstrip("/") != ms.base_link(source):
        raise ParameterError(f"base_frame must name the robot's base link {ms.base_link(source)!r} (or be left "
                             f"unset), got {s.base_frame!r}")
    return s


# ------------------------------------------------------------------------------------------ set-up


@dataclass(frozen=True)
class Setup:
    """What the node runs on: the model, the sensor set, the spec of each used role (``roles``: role -> SensorSpec)
    and ``T_base_sensor`` (role -> (4,4) pose of the sensor in the base link, for the base-mounted ones)."""

    settings: EstimatorSettings
    model: object
    sensor_set: object
    path: str
    roles: Dict[str, object]
    T_base_sensor: Dict[str, np.ndarray]
    dt_ns: int

    @property
    def floating(self) -> bool:
        return self.model.group is not None


def sensors_file(setting: str, source: ms.Source) -> str:
    """The sensors file of the ``sensors`` parameter (as dynamics_node's: empty = the robot YAML's own file)."""
    if (setting or "").strip().lower() == ms.NO_SENSORS:
        raise ParameterError("sensors: none: the estimator needs the sensors file")
    path = ms.sensors_path(setting, source)
    if path is None:
        raise ParameterError("sensors: empty, and the model is no robot YAML that could carry them: give the "
                             "sensors file")
    return path


def build_setup(s: EstimatorSettings, source: ms.Source) -> Setup:
    """The model, the sensors and the roles of the settings; ParameterError naming the parameter (the role) or,
    for the file, file, sensor and key (:class:`mbs_ros.sensors.spec.SensorConfigError`)."""
    from mbs_ros.sensors.spec import SensorConfigError, load_sensors

    model = ms.build_multibody(source, s.base_group, s.gravity)
    dt = 1.0 / s.physics_rate
    path = sensors_file(s.sensors, source)
    try:
        sensor_set = load_sensors(path, model, dt)
    except SensorConfigError as e:
        raise ParameterError(f"sensors: {e}") from None
    by_name = {spec.name: spec for spec in sensor_set.sensors}
    base = ms.base_link(source)
    floating = model.group is not None
    roles, mounts = {}, {}
    for role in SENSOR_ROLES:
        name = getattr(s, role)
        if not name:
            continue
        spec = by_name.get(name)
        if spec is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise ParameterError(f"{role}: no sensor {name!r} in {path} (it declares: {known})")
        if spec.type != ROLE_TYPES[role]:
            raise ParameterError(f"{role}: sensor {name!r} of {path} is a {spec.type}, not a {ROLE_TYPES[role]}")
        if role != "encoders":
            if not floating:
                raise ParameterError(f"{role}: a fixed base has no base state to estimate (only encoders)")
            if spec.link != base:
                raise ParameterError(f"{role}: sensor {name!r} is mounted on link {spec.link!r}, not on the base "
                                     f"link {base!r}: the filter's measurement models need it on the base")
            mounts[role] = np.asarray(spec.T_link_sensor, dtype=float)
        roles[role] = spec
    if floating and "imu" not in roles:
        raise ParameterError("imu: a floating base needs the IMU (it drives the filter's propagation)")
    if not roles:
        raise ParameterError("imu, dvl, depth, compass, encoders: none given: nothing to estimate from")
    if s.initial_joint_positions and len(s.initial_joint_positions) != len(model.joint_names):
        raise ParameterError(f"initial_joint_positions must have one entry per joint ({len(model.joint_names)}: "
                             f"{', '.join(model.joint_names)}) or be empty, got {len(s.initial_joint_positions)}")
    if "depth" in roles and not sensor_set.environment.fluid_density:
        raise ParameterError(f"depth: {path} gives no fluid density (environment.fluid_density)")
    dt_ns = max(1, int(round(NS / s.physics_rate)))
    return Setup(s, model, sensor_set, path, roles, mounts, dt_ns)


# ------------------------------------------------------------------------------------------ fusion


class Rejected(ValueError):
    """A measurement that never reaches the filter (malformed, out of order); the message says why."""


@dataclass
class Output:
    """One estimate: stamp, the base pose (p, R world<-base), its body twist ``V = [v; w]`` (base axes), their
    covariances in nav_msgs/Odometry's layout, and the joint positions/velocities (None: no joints)."""

    stamp_ns: int
    p: Optional[np.ndarray] = None
    R: Optional[np.ndarray] = None
    V: Optional[np.ndarray] = None
    pose_cov: Optional[np.ndarray] = None
    twist_cov: Optional[np.ndarray] = None
    joint_positions: Optional[np.ndarray] = None
    joint_velocities: Optional[np.ndarray] = None


def _skew(a) -> np.ndarray:
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


@dataclass
class _Stream:
    """Bookkeeping of one used sensor: period and delay [ns], stamp mode, the newest measurement time taken."""

    role: str
    order: int
    period_ns: int
    delay_ns: int
    arrival: bool
    newest: Optional[int] = None
    beams: Dict[int, list] = field(default_factory=dict)  # DVL: measurement time -> the beams' lock flags
    beams_newest: Optional[int] = None
    beams_locked: Dict[int, bool] = field(default_factory=dict)


class Fusion:
    """The filter and its schedule (module docstring). Feed measurements with :meth:`add` (raises
    :class:`Rejected`); each call returns the estimates that became due, oldest first. ``counts`` holds the
    bookkeeping (``taken_<role>``, ``late_<role>``, ``dropped``, ``estimates``)."""

    def __init__(self, setup: Setup, origin_ns: Optional[int] = 0):
        from mbs_ros.estimation.inekf import ImuNoise, InvariantEKF

        self.setup = setup
        s = setup.settings
        self.grid_ns = max(1, int(round(NS / (s.control_rate if s.lockstep else s.publish_rate))))
        self.lockstep = s.lockstep
        self.streams: Dict[str, _Stream] = {}
        for i, (role, spec) in enumerate(setup.roles.items()):
            self.streams[role] = _Stream(role, i, spec.period_steps * setup.dt_ns, spec.delay_steps * setup.dt_ns,
                                         spec.stamp == "arrival")
        self.driver = "imu" if "imu" in self.streams else ("encoders" if "encoders" in self.streams else None)
        self.counts: Dict[str, int] = {"estimates": 0, "dropped": 0, "work": 0}
        for role in self.streams:
            self.counts[f"taken_{role}"] = self.counts[f"late_{role}"] = self.counts[f"failed_{role}"] = 0
        #: the most propagation sub-steps one add()/drain() may take (None: unbounded); :attr:`pending` when a call
        #: stopped at it with estimates still due
        self.work_budget: Optional[int] = None
        self.pending = False
        self._work_start = 0
        self.queue: List[tuple] = []  # (t_available, t_measured, order, seq, role, payload)
        self._seq = 0
        self.origin: Optional[int] = None
        self.last_out: Optional[int] = None
        self.t_f: Optional[int] = None
        self.held = None  # the newest IMU sample (gyro, accel)
        model = setup.model
        self.nj = len(model.joint_names)
        q0 = np.array(s.initial_joint_positions or [0.0] * self.nj, dtype=float)
        self.joints = (q0, np.zeros(self.nj))
        self.ekf = None
        self.env = setup.sensor_set.environment
        if setup.floating:
            imu = setup.roles["imu"].params
            noise = ImuNoise(gyroscope_noise_density=imu.gyroscope_noise_density,
                             accelerometer_noise_density=imu.accelerometer_noise_density,
                             gyroscope_random_walk=imu.gyroscope_random_walk,
                             accelerometer_random_walk=imu.accelerometer_random_walk)
            self.T_bi = setup.T_base_sensor["imu"]
            err = np.array(s.initial_error)
            R_wb = rotation_rpy(np.array(s.initial_rpy) + err[3:])
            p_wb = np.array(s.initial_position) + err[:3]
            R_bi, p_bi = self.T_bi[:3, :3], self.T_bi[:3, 3]
            R_wi = R_wb @ R_bi
            p_wi = p_wb + R_wb @ p_bi
            v_wi = np.array(s.initial_velocity, dtype=float)
            sg = max(s.initial_gyro_bias_sigma or imu.gyroscope_turn_on_bias_sigma, MIN_GYRO_BIAS_SIGMA)
            sa = max(s.initial_accel_bias_sigma or imu.accelerometer_turn_on_bias_sigma, MIN_ACCEL_BIAS_SIGMA)
            tilt, yaw = s.initial_attitude_sigma
            sig = [tilt, tilt, yaw] + [s.initial_velocity_sigma] * 3 + [s.initial_position_sigma] * 3 \
                + [sg] * 3 + [sa] * 3
            P = prior_covariance(np.diag(np.square(sig)), v_wi, p_wi)
            try:
                self.ekf = InvariantEKF(R_wi, v_wi, p_wi, P, noise, gravity=tuple(model.gravity))
            except ValueError as e:  # e.g. sigmas 1e-6 beside an IMU turn-on bias sigma of 1e6: one line, exit 2
                raise ParameterError(f"initial_*_sigma, imu {setup.roles['imu'].name!r} (its turn-on bias sigmas): "
                                     f"the filter's prior cannot be built ({e})") from None
            self.mounts = {}
            for role, T_bs in setup.T_base_sensor.items():  # sensor pose in the IMU (filter body) frame
                T_is = np.linalg.inv(self.T_bi) @ T_bs
                self.mounts[role] = (T_is[:3, :3].copy(), T_is[:3, 3].copy())
        self.min_var = s.min_measurement_sigma ** 2
        if origin_ns is not None:
            self.start(origin_ns)

    # ------------------------------------------------------------------------------- input

    def start(self, origin_ns: int) -> Output:
        """Set the time origin: the grid starts here and the first estimate (the prior) is stamped with it."""
        self.origin = self.last_out = self.t_f = int(origin_ns)
        out = self._output(self.origin)
        self.counts["estimates"] += 1
        return out

    def measurement_time(self, role: str, stamp_ns: int) -> int:
        st = self.streams[role]
        return stamp_ns - st.delay_ns if st.arrival else stamp_ns

    def add(self, role: str, stamp_ns: int, payload) -> List[Output]:
        """Queue one measurement of ``role`` (payload per role: imu (gyro, accel); dvl (v, cov) or, for the beams
        heartbeat, ``("beam", index, locked)``; depth (depth, var); compass (m, cov); encoders (q, v)) and return
        the estimates now due. Rejected: out of order (not after the previous one) or before the origin."""
        st = self.streams[role]
        t = self.measurement_time(role, int(stamp_ns))
        if self.origin is not None and t < self.origin:
            raise Rejected(f"measured at {t * 1e-9:.9f} s, before the estimator's start ({self.origin * 1e-9:.9f} s)")
        if isinstance(payload, tuple) and payload and isinstance(payload[0], str) and payload[0] == "beam":
            return self._add_beam(st, t, payload[1], payload[2])
        if st.newest is not None and t <= st.newest:
            raise Rejected(f"measured at {t * 1e-9:.9f} s, not after the previous one ({st.newest * 1e-9:.9f} s)")
        st.newest = t
        if len(self.queue) >= MAX_QUEUE:
            self.queue.pop(0)
            self.counts["dropped"] += 1
        self.queue.append((t + st.delay_ns, t, st.order, self._seq, role, payload))
        self._seq += 1
        return self.drain()

    def _add_beam(self, st: _Stream, t: int, index: int, locked: bool) -> List[Output]:
        if st.beams_newest is not None and t <= st.beams_newest:
            raise Rejected(f"beam {index} measured at {t * 1e-9:.9f} s: its ping is complete already")
        flags = st.beams.setdefault(t, [None] * 4)
        flags[int(index) % 4] = bool(locked)
        if all(f is not None for f in flags):
            del st.beams[t]
            for old in [x for x in st.beams if x < t]:
                del st.beams[old]
            st.beams_newest = t
            st.beams_locked = {t: all(flags)}
        return self.drain()

    # ------------------------------------------------------------------------------ schedule

    def _expected(self, st: _Stream, g: int) -> Optional[int]:
        """The newest measurement time of ``st`` available by ``g`` (None: none yet)."""
        span = g - st.delay_ns - self.origin
        if span < 0:
            return None
        return self.origin + (span // st.period_ns) * st.period_ns

    def _ready(self, g: int) -> bool:
        if self.driver is None:
            return False
        for role, st in self.streams.items():
            if not self.lockstep and role != self.driver:
                continue
            e = self._expected(st, g)
            if e is None:
                continue
            if role == "dvl":
                # the twist comes only with a lock: the beams (always published) say whether one is due
                if st.beams_newest is None or st.beams_newest < e:
                    return False
                if (st.newest is None or st.newest < e) and st.beams_locked.get(e, True) and \
                        st.beams_newest == e:
                    return False
                continue
            if st.newest is None or st.newest < e:
                return False
        return True

    def drain(self) -> List[Output]:
        """The estimates due now (module docstring), oldest first; at most :data:`MAX_OUTPUTS_PER_CALL`."""
        out: List[Output] = []
        self.pending = False
        if self.origin is None:
            return out
        self._work_start = self.counts["work"]
        while len(out) < MAX_OUTPUTS_PER_CALL:
            g = self.last_out + self.grid_ns
            if not self._ready(g):
                break
            due = sorted((x for x in self.queue if x[0] <= g), key=lambda x: (x[1], x[2], x[3]))
            if due:
                self.queue = [x for x in self.queue if x[0] > g]
            for i, (_avail, t, _order, _seq, role, payload) in enumerate(due):
                if self._spent():
                    self.queue = due[i:] + self.queue  # the rest next call (drain sorts them again)
                    self.pending = True
                    return out
                self._apply(role, t, payload)
            if self._spent():
                self.pending = True
                break
            out.append(self._output(g))
            self.last_out = g
            self.counts["estimates"] += 1
        else:
            self.pending = self._ready(self.last_out + self.grid_ns)
        return out

    def _spent(self) -> bool:
        return self.work_budget is not None and self.counts["work"] - self._work_start >= self.work_budget

    def _propagate(self, ekf, sample, dt_s: float) -> None:
        self.counts["work"] += ekf.propagate(sample[0], sample[1], dt_s)

    # -------------------------------------------------------------------------------- filter

    def _advance(self, t: int, sample=None) -> None:
        """Propagate the filter from its time to ``t`` with the held IMU sample (``sample`` when none is held)."""
        held = self.held if self.held is not None else sample
        if self.ekf is not None and held is not None and t > self.t_f:
            self._propagate(self.ekf, held, (t - self.t_f) * 1e-9)
        self.t_f = max(self.t_f, t)

    def _apply(self, role: str, t: int, payload) -> None:
        if role == "encoders":
            self.joints = (np.asarray(payload[0], float), np.asarray(payload[1], float))
            self.counts["taken_encoders"] += 1
            return
        if t < self.t_f:
            if role == "imu":
                self.held = payload
            self.counts[f"late_{role}"] += 1
            return
        if role == "imu":
            self._advance(t, payload)
            self.held = payload
            self.counts["taken_imu"] += 1
            return
        self._advance(t)
        saved = copy.deepcopy(self.ekf)
        try:
            self._update(role, payload)
            ekf = self.ekf
            ok = all(np.isfinite(x).all() for x in (ekf.R, ekf.v, ekf.p, ekf.bg, ekf.ba, ekf.P))
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            ok = False
        if not ok:  # the filter refused it (or it left a non-finite state): counted, the state as it was
            self.ekf = saved
            self.counts[f"failed_{role}"] += 1
            return
        self.counts[f"taken_{role}"] += 1

    def _update(self, role: str, payload) -> None:
        ekf = self.ekf
        if role == "dvl":
            R_is, r = self.mounts["dvl"]
            omega = None if self.held is None else np.asarray(self.held[0], float) - ekf.bg
            ekf.update_body_velocity(np.asarray(payload[0], float), self._cov(payload[1]), R_body_sensor=R_is,
                                     lever_arm=r, omega=omega)
        elif role == "depth":
            _R, r = self.mounts["depth"]
            ekf.update_depth(float(payload[0]), max(float(payload[1]), self.min_var), lever_arm=r,
                             water_surface_z=float(self.env.water_surface_z))
        elif role == "compass":
            R_is, _r = self.mounts["compass"]
            ekf.update_magnetometer(np.asarray(payload[0], float), self._cov(payload[1], scale=self._field_scale()),
                                    np.asarray(self.env.magnetic_field, float), R_body_sensor=R_is)

    def _field_scale(self) -> float:
        return float(np.linalg.norm(self.env.magnetic_field)) or 1.0

    def _cov(self, cov, scale: float = 1.0) -> np.ndarray:
        """A 3x3 measurement covariance, symmetrised, each variance at least the floor (relative to ``scale``
        for a magnetic field: min_measurement_sigma is then a fraction of the field's norm)."""
        c = np.asarray(cov, float).reshape(3, 3)
        c = 0.5 * (c + c.T)
        floor = self.min_var * scale * scale
        return c + np.diag(np.maximum(floor - np.diag(c), 0.0))

    def _output(self, g: int) -> Output:
        out = Output(g)
        if self.nj:
            out.joint_positions, out.joint_velocities = self.joints
        if self.ekf is None:
            return out
        ekf = self.ekf
        if self.held is not None and g > self.t_f:
            ekf = copy.deepcopy(ekf)  # a prediction: later measurements before g may still come
            self._propagate(ekf, self.held, (g - self.t_f) * 1e-9)
        w_i = np.zeros(3) if self.held is None else np.asarray(self.held[0], float) - ekf.bg
        out.p, out.R, out.V, out.pose_cov, out.twist_cov = base_state(ekf, self.T_bi, w_i)
        return out


def prior_covariance(P_phys: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The filter's prior covariance (of the right-invariant error xi = log(X_hat X^-1), docs/estimation.md) from
    independent sigmas of the physical errors [dtheta (world axes), dv, dp, dbg, dba]: to first order
    xi_R = dtheta, xi_v = dv + [v]x dtheta, xi_p = dp + [p]x dtheta (X_hat X^-1 has p_hat - R_hat R^T p). A
    diagonal P in xi itself would tie the position's uncertainty to the attitude's through the vehicle's
    distance from the world origin: 5 m down, a 0.1 rad heading sigma adds 0.5 m, and each heading correction
    moves the position estimate by dpsi x p."""
    J = np.eye(15)
    J[3:6, 0:3] = _skew(v)
    J[6:9, 0:3] = _skew(p)
    return J @ P_phys @ J.T


def base_state(ekf, T_bi: np.ndarray, w_i: np.ndarray):
    """``(p, R, V, pose_cov, twist_cov)`` of the base from the filter's IMU state (R, v, p world; ``w_i`` the
    bias-corrected angular rate in IMU axes) and the IMU's mount ``T_bi`` (pose of the IMU in the base): R_wb =
    R_wi R_bi^T, p_wb = p_wi - R_wb p_bi, v_wb = v_wi + (R_wi w_i) x (p_wb - p_wi); V = [R_wb^T v_wb; R_bi w_i].
    The covariances follow to first order (see :func:`mount_jacobians`)."""
    R_bi, p_bi = T_bi[:3, :3], T_bi[:3, 3]
    R_wi, v_wi, p_wi = ekf.R, ekf.v, ekf.p
    R_wb = R_wi @ R_bi.T
    p_wb = p_wi - R_wb @ p_bi
    r_w = p_wb - p_wi
    w_w = R_wi @ w_i
    v_wb = v_wi + np.cross(w_w, r_w)
    V = np.concatenate([R_wb.T @ v_wb, R_bi @ w_i])
    J_pose, J_twist = mount_jacobians(R_wb, R_bi, p_bi)
    pose_cov = J_pose @ ekf.pose_covariance_ros() @ J_pose.T
    twist_cov = J_twist @ ekf.twist_covariance_ros() @ J_twist.T
    return p_wb, R_wb, V, 0.5 * (pose_cov + pose_cov.T), 0.5 * (twist_cov + twist_cov.T)


def mount_jacobians(R_wb: np.ndarray, R_bi: np.ndarray, p_bi: np.ndarray):
    """First-order maps of the IMU's [position; rotation] covariance (rotation error in world axes, as the
    filter's right-invariant error) and of its body twist [v_i; w_i] covariance to the base's. Position:
    p_wb = p_wi - R_wb p_bi, so dp_b = dp_i + [R_wb p_bi]x dtheta_w; the rotation error (world axes) is shared.
    Twist (IMU axes -> base axes, the lever arm p_bi): v_b = R_bi (v_i + w_i x r_i) with r_i = -R_bi^T p_bi,
    w_b = R_bi w_i."""
    J_pose = np.eye(6)
    J_pose[:3, 3:] = _skew(R_wb @ p_bi)
    r_i = -R_bi.T @ p_bi
    J_twist = np.zeros((6, 6))
    J_twist[:3, :3] = R_bi
    J_twist[:3, 3:] = -R_bi @ _skew(r_i)
    J_twist[3:, 3:] = R_bi
    return J_pose, J_twist
