"""The sensors of a robot as declared in YAML (docs/sensors.md): the environment they measure in and, per sensor,
its mounting (link, pose), rate, delay, seed, output names and its type's own parameters, checked key by key.

A sensors file has the top-level keys ``environment:`` and ``sensors:``; a robot YAML may carry the same two keys
inside its ``robot:`` mapping. Every error is a :class:`SensorConfigError` of one line,
``FILE: sensors[i] (NAME): KEY: what``, that never echoes the file's content (:func:`mbs_ros.yamlfile.shown`).
Rates and delays are whole numbers of physics steps: the sensors are sampled on the simulator's own steps, so that
the same seed gives the same stream however the simulation is chunked. ROS-free.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from transforms3d.euler import euler2mat

from mbs_ros.dynamics.model.robot_yaml import Reader as RobotYamlReader
from mbs_ros.yamlfile import YamlFileError, is_name, read_yaml, shown

__all__ = ["SensorConfigError", "Reader", "MAX_MAGNITUDE", "MAX_SENSORS", "MAX_FILE_BYTES", "MAX_DELAY", "MAX_QUEUED_READINGS",
           "MIN_RATE", "MIN_RESOLUTION", "Environment", "SensorSpec", "SensorSet", "TYPES", "load_sensors",
           "parse_sensors", "rotation_rpy", "ros_name_problem", "COMMON_KEYS", "ENVIRONMENT_KEYS"]

#: Keys every sensor may have (its type adds its own, the type module's ``KEYS``).
COMMON_KEYS = ("name", "type", "link", "joint", "pose", "rate", "delay", "seed", "frame_id", "topic", "stamp")
ENVIRONMENT_KEYS = ("fluid_density", "water_surface", "seabed_depth", "seabed_z", "atmospheric_pressure",
                    "magnetic_field", "datum")
#: Earth's field in world ENU axes [T]: 20 µT north (+y), 45 µT down (a mid-latitude field).
MAGNETIC_FIELD = (0.0, 2.0e-5, -4.5e-5)
ATMOSPHERIC_PRESSURE = 101325.0  # Pa
#: Every number of a sensors file lies within ±MAX_MAGNITUDE (SI units: m, s, Hz, Pa, T, kg/m³, noise densities):
#: the largest a real declaration needs is a pressure bias or an atmospheric pressure (~1e5 Pa) or a seabed depth
#: (~1.1e4 m), and with every input below it every derived value (variances σ²/Δt, hydrostatic pressures, biases,
#: readings) stays finite; 1e308 noise or 1e308 m mounts made the node publish inf (issue 31).
MAX_MAGNITUDE = 1.0e6
#: At most this many sensors per file: the robots here carry at most a dozen, and a 30-joint humanoid with a
#: force/torque sensor per joint, IMUs and foot contacts stays under 64; each sensor adds publishers (DDS discovery)
#: and a Python sample per period, so 10⁴ took 12 s to start a node and ran behind real time, 10⁵ took 32 s and
#: 1.1 GB only to parse (issue 31).
MAX_SENSORS = 128
#: Largest sensors file (or robot YAML carrying sensors) read [bytes]: MAX_SENSORS fully spelled out take ~130 KB; the
#: count is only known once PyYAML has composed the whole document (10⁵ IMUs: 6 MB, minutes and 850 MB to compose).
MAX_FILE_BYTES = 1 << 20
#: Slowest sample rate [Hz] (one sample in 1000 s): below it a period in physics steps overflows (5e-324 Hz).
MIN_RATE = 1.0e-3
#: Longest delay [s]: real sensor latencies are ms (IMU) to ~1 s (GNSS fixes, DVL pings); 10 s still covers an
#: acoustic position fix over 15 km of water. A delay holds delay/period readings in memory per sensor.
MAX_DELAY = 10.0
#: The readings all the sensors of a file may hold waiting for their delay (Σ ⌈delay / period⌉ + 1): ~1 KB each,
#: so the queues stay below ~20 MB (a 1 kHz IMU with delay 3600 s grew the node by 670 MB in 86 s, issue 31).
MAX_QUEUED_READINGS = 20_000
#: The smallest non-zero quantisation step (encoder, pressure resolution): x / step stays finite for any |x| up to
#: MAX_MAGNITUDE (a step of 1e-320 made every reading inf).
MIN_RESOLUTION = 1.0e-12
#: Relative tolerance of "a whole number of physics steps" (physics_rate / rate, delay / dt), to which
#: :func:`whole_tolerance` adds the rounding of the node's step to whole nanoseconds.
WHOLE_TOLERANCE = 1e-9


def whole_tolerance(dt: float) -> float:
    """Relative tolerance of a ratio to ``dt``: :data:`WHOLE_TOLERANCE` plus half a nanosecond of ``dt`` (the node
    steps by a whole number of ns, so at 600 Hz its rate is 599.99988 Hz and 300 Hz must still be every 2nd step)."""
    return WHOLE_TOLERANCE + 0.5e-9 / dt


class SensorConfigError(ValueError):
    """A sensors declaration that does not follow the schema; the message names the file, the sensor and the key."""


class Reader(RobotYamlReader):
    """Checks values of one file (and, with ``where``, one sensor of it): the robot YAML's reader
    (:class:`mbs_ros.dynamics.model.robot_yaml.Reader`, on :mod:`mbs_ros.yamlschema`), raising :class:`SensorConfigError`
    ``"FILE: WHERE: KEY: what"``; the value is only ever :func:`shown`."""

    def __init__(self, path, where: str = ""):
        super().__init__(path, where, error=lambda p, k, r: SensorConfigError(f"{p}: {k}: {r}" if k else f"{p}: {r}"))

    def number(self, value, key, minimum=None, positive=False, maximum=None):
        """A finite number (``minimum``, ``positive`` as the robot YAML's) of magnitude at most ``maximum`` (default
        :data:`MAX_MAGNITUDE`): every derived value stays finite."""
        v = super().number(value, key, minimum=minimum, positive=positive)
        hi = MAX_MAGNITUDE if maximum is None else maximum
        if abs(v) > hi:
            self.fail(key, self._want(f"a number of magnitude <= {hi:g}", value))
        return v

    def resolution(self, value, key):
        """A quantisation step: 0 (off) or in [:data:`MIN_RESOLUTION`, :data:`MAX_MAGNITUDE`]."""
        v = self.number(value, key, minimum=0.0)
        if 0.0 < v < MIN_RESOLUTION:
            self.fail(key, self._want(f"0 (off) or a step >= {MIN_RESOLUTION:g}", value))
        return v

    def ros_name(self, value, key, what):
        problem = ros_name_problem(self.name(value, key), what)
        if problem is not None:
            self.fail(key, problem)
        return value


_ROS_NAME = re.compile(r"[A-Za-z_~][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*\Z")


def ros_name_problem(text, what: str) -> str | None:
    """None when ``text`` is a relative ROS name (a topic or a frame id: tokens of letters, digits and ``_`` that
    do not start with a digit, joined by single ``/``); else why not, without quoting it."""
    if isinstance(text, str) and len(text) <= 256 and _ROS_NAME.match(text):
        return None
    return (f"not a valid relative {what} (tokens of letters, digits and '_', not starting with a digit, joined by "
            "single '/')")


def rotation_rpy(rpy) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll): URDF's fixed-axis roll, pitch, yaw (transforms3d's static ``sxyz``)."""
    r, p, y = (float(x) for x in rpy)
    return euler2mat(r, p, y, "sxyz")


def _ro(a) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Environment:
    """What the sensors measure in. ``gravity`` (3,) world [m/s²] (the model's); ``fluid_density`` [kg/m³] or None
    (no water); ``water_surface_z`` [m] world z of the (flat) water surface; ``seabed_z`` [m] world z of a flat
    seabed or None; ``current`` (3,) world [m/s] (the dynamics node's ``current``); ``atmospheric_pressure`` [Pa];
    ``magnetic_field`` (3,) world ENU [T]; ``datum`` (latitude deg, longitude deg, altitude m) of the world origin."""

    gravity: np.ndarray
    fluid_density: float | None = None
    water_surface_z: float = 0.0
    seabed_z: float | None = None
    current: np.ndarray = field(default_factory=lambda: _ro(np.zeros(3)))
    atmospheric_pressure: float = ATMOSPHERIC_PRESSURE
    magnetic_field: np.ndarray = field(default_factory=lambda: _ro(MAGNETIC_FIELD))
    datum: tuple = (0.0, 0.0, 0.0)

    def require_water(self, r: Reader, key: str) -> float:
        """The fluid density, or the sensor's :class:`SensorConfigError` "no water" at ``key`` when the robot has
        none (no hydrodynamics in its model and no ``environment.fluid_density``): a sensor that needs water is
        refused rather than reading a silent zero."""
        if self.fluid_density is None:
            r.fail(key, "no water: this sensor needs a fluid, but the robot has no hydrodynamics (robot.fluid / "
                        "robot.hydrodynamics) and the file sets no environment.fluid_density")
        return self.fluid_density


@dataclass(frozen=True, eq=False)
class SensorSpec:
    """One sensor, checked. ``link``: the link it is mounted on (a force/torque sensor's: its joint's child link);
    ``T_link_sensor`` (4, 4) its pose on the link; ``rate`` [Hz] = physics rate / ``period_steps``; ``delay`` [s] =
    ``delay_steps`` physics steps between the measured state and the publication; ``stamp``: "measurement" (the
    header carries the measured step's time) or "arrival" (measurement time + delay); ``params``: the type's own
    frozen dataclass (its module's ``parse``)."""

    name: str
    type: str
    link: str
    T_link_sensor: np.ndarray
    rate: float
    period_steps: int
    params: object
    joint: str | None = None
    delay: float = 0.0
    delay_steps: int = 0
    seed: int = 0
    frame_id: str = ""
    topic: str = ""
    stamp: str = "measurement"


@dataclass(frozen=True, eq=False)
class SensorSet:
    """The environment and the sensors of one robot; ``source``: the file they were read from."""

    environment: Environment
    sensors: tuple
    source: str = ""


#: Sensor types: name -> module of :mod:`mbs_ros.sensors` (imported when first used).
_TYPE_MODULES = {"imu": "imu", "magnetometer": "magnetometer", "pressure": "pressure", "dvl": "dvl", "gnss": "gnss",
                 "encoders": "encoders", "force_torque": "force_torque", "foot_contact": "foot_contact"}


class _Types(Mapping):
    """``TYPES[name]`` is the type's module, imported on first use (a type whose module is absent raises
    KeyError there, so a declaration of it is refused with a clear message)."""

    def __init__(self, modules):
        self._modules = dict(modules)

    def __getitem__(self, name):
        module = self._modules[name]
        try:
            return importlib.import_module(f"mbs_ros.sensors.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"mbs_ros.sensors.{module}":
                raise
            raise KeyError(name) from None

    def __iter__(self):
        return iter(self._modules)

    def __len__(self):
        return len(self._modules)

    def available(self) -> tuple:
        """The type names whose module can be imported."""
        out = []
        for name in self._modules:
            try:
                self[name]
            except KeyError:
                continue
            out.append(name)
        return tuple(out)


TYPES = _Types(_TYPE_MODULES)


def model_fluid_density(model) -> float | None:
    """The density of the water the model is in, or None when the model has no hydrodynamics: the root link's
    ``<hydrodynamics density>`` (else the first link's that sets one), else the model's (robot YAML
    ``fluid.density``, default fresh water)."""
    P = model.passive
    if P is None or not P.has_fluid:
        return None
    if model.urdf:
        from mbs_ros.dynamics.model.passive import parse_extensions

        hydro = parse_extensions(model.urdf)[0]
        dens = [h.density for name, h in sorted(hydro.items(), key=lambda kv: kv[0] != model.link_names[0])
                if h.density is not None]
        if dens:
            return float(dens[0])
    return float(P.density)


def load_sensors(path, model, dt: float, *, current=(0.0, 0.0, 0.0), seed_offset: int = 0) -> SensorSet:
    """Read the sensors of ``path`` (a sensors file, or a robot YAML whose ``robot:`` mapping has ``sensors:``) for
    ``model`` simulated with step ``dt`` [s]; :class:`SensorConfigError` naming the file, sensor and key.
    ``seed_offset`` (>= 0, the dynamics node's ``sensor_seed``) is added to every sensor's seed: new noise streams
    without editing the file."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0  # read_yaml says why it cannot be read
    if size > MAX_FILE_BYTES:
        raise SensorConfigError(f"{path}: {size} bytes: a sensors file is at most {MAX_FILE_BYTES} bytes (at most "
                                f"{MAX_SENSORS} sensors)")
    try:
        doc = read_yaml(path)
    except YamlFileError as exc:
        raise SensorConfigError(str(exc)) from None
    return parse_sensors(doc, path, model, dt, current=current, seed_offset=seed_offset)


def parse_sensors(doc, path, model, dt: float, current=(0.0, 0.0, 0.0), seed_offset: int = 0) -> SensorSet:
    """:func:`load_sensors` of an already read document ``doc``."""
    r = Reader(path)
    prefix = ""
    if isinstance(doc, dict) and "robot" in doc:
        if not isinstance(doc["robot"], dict):
            r.fail("robot", f"expected a mapping, got {shown(doc['robot'])}")
        doc, prefix = doc["robot"], "robot."
        doc = {k: doc[k] for k in ("environment", "sensors") if k in doc}
    elif doc is None:
        doc = {}
    else:
        r.mapping(doc, "", ("environment", "sensors"))
    env = parse_environment(r, doc.get("environment", {}), prefix + "environment", model, current)
    raw = doc.get("sensors", [])
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        r.fail(prefix + "sensors", f"expected a list of sensors, got {shown(raw)}")
    if len(raw) > MAX_SENSORS:
        r.fail(prefix + "sensors", f"{len(raw)} sensors: at most {MAX_SENSORS} (each one adds topics and a sample "
                                   "per period to the node)")
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive number of seconds, got {dt!r}")
    sensors, names, queued = [], set(), 0
    for i, item in enumerate(raw):
        spec = parse_sensor(r, item, f"{prefix}sensors[{i}]", model, env, dt)
        if spec.name in names:
            r.at(f"{prefix}sensors[{i}] ({spec.name})").fail("name", "a sensor of this name is declared before")
        names.add(spec.name)
        queued += queued_readings(spec)
        if queued > MAX_QUEUED_READINGS:
            r.at(f"{prefix}sensors[{i}] ({spec.name})").fail(
                "delay", f"the sensors' delays would hold {queued} readings in memory, more than "
                         f"{MAX_QUEUED_READINGS} (delay / period summed over the sensors): shorten a delay or a rate")
        sensors.append(spec)
    topics = {}
    for i, s in enumerate(sensors):
        if s.topic in topics:
            r.at(f"{prefix}sensors[{i}] ({s.name})").fail("topic", f"also the topic of sensor {topics[s.topic]!r}")
        topics[s.topic] = s.name
    if seed_offset:
        sensors = [dataclasses.replace(s, seed=s.seed + int(seed_offset)) for s in sensors]
    return SensorSet(env, tuple(sensors), str(path))


def parse_environment(r: Reader, raw, key: str, model, current=(0.0, 0.0, 0.0)) -> Environment:
    """The ``environment:`` mapping (every key optional); gravity is the model's, the fluid density the model's
    unless given."""
    raw = {} if raw is None else raw
    r.mapping(raw, key, ENVIRONMENT_KEYS)
    density = model_fluid_density(model)
    if "fluid_density" in raw:
        density = r.number(raw["fluid_density"], f"{key}.fluid_density", positive=True, maximum=1.0e5)
    surface = r.number(raw.get("water_surface", 0.0), f"{key}.water_surface")
    if "seabed_depth" in raw and "seabed_z" in raw:
        r.fail(key, "give seabed_depth (below the water surface) or seabed_z (world z), not both")
    seabed = None
    if "seabed_depth" in raw:
        seabed = surface - r.number(raw["seabed_depth"], f"{key}.seabed_depth", positive=True)
    elif "seabed_z" in raw:
        seabed = r.number(raw["seabed_z"], f"{key}.seabed_z")
        if seabed >= surface:
            r.fail(f"{key}.seabed_z", f"the seabed must be below the water surface (z = {surface:g} m)")
    p_atm = r.number(raw.get("atmospheric_pressure", ATMOSPHERIC_PRESSURE), f"{key}.atmospheric_pressure",
                     minimum=0.0)
    field_w = r.numbers(raw.get("magnetic_field", list(MAGNETIC_FIELD)), f"{key}.magnetic_field", 3)
    datum = (0.0, 0.0, 0.0)
    if "datum" in raw:
        d = r.mapping(raw["datum"], f"{key}.datum", ("latitude", "longitude", "altitude"), ("latitude", "longitude"))
        lat = r.number(d["latitude"], f"{key}.datum.latitude")
        lon = r.number(d["longitude"], f"{key}.datum.longitude")
        if not -90.0 <= lat <= 90.0:
            r.fail(f"{key}.datum.latitude", f"expected degrees in [-90, 90], got {shown(d['latitude'])}")
        if not -180.0 <= lon <= 180.0:
            r.fail(f"{key}.datum.longitude", f"expected degrees in [-180, 180], got {shown(d['longitude'])}")
        datum = (lat, lon, r.number(d.get("altitude", 0.0), f"{key}.datum.altitude"))
    cur = np.array(current, dtype=float).reshape(3)
    if not np.isfinite(cur).all():
        raise ValueError("current must be 3 finite numbers [m/s]")
    return Environment(gravity=_ro(model.gravity), fluid_density=density, water_surface_z=surface, seabed_z=seabed,
                       current=_ro(cur), atmospheric_pressure=p_atm, magnetic_field=_ro(field_w), datum=datum)


def whole_steps(value: float, dt: float) -> int | None:
    """``value / dt`` when it is a whole number to :data:`WHOLE_TOLERANCE` (relative), else None."""
    ratio = value / dt
    n = round(ratio)
    return int(n) if abs(ratio - n) <= whole_tolerance(dt) * max(1.0, ratio) else None


def queued_readings(spec: SensorSpec) -> int:
    """The readings ``spec`` holds at most, waiting for its delay: ⌈delay_steps / period_steps⌉ + 1."""
    return -(-spec.delay_steps // spec.period_steps) + 1


def _rate(r: Reader, value, dt: float) -> tuple:
    rate = r.number(value, "rate", positive=True)
    if rate < MIN_RATE:
        r.fail("rate", f"expected a rate >= {MIN_RATE:g} Hz, got {shown(value)}")
    physics = 1.0 / dt
    ratio = physics / rate
    n = round(ratio)
    if n >= 1 and abs(ratio - n) <= whole_tolerance(dt) * ratio:
        return rate, int(n)
    if ratio < 1:
        r.fail("rate", f"{rate:g} Hz is above the physics rate {physics:g} Hz (at most one sample per step)")
    lo, hi = max(1, math.floor(ratio)), math.ceil(ratio)
    near = ", ".join(f"{physics / m:g} Hz" for m in sorted({lo, hi}))
    r.fail("rate", f"{rate:g} Hz is not the physics rate {physics:g} Hz divided by a whole number; nearest allowed: "
                   f"{near}")


def parse_sensor(r0: Reader, raw, where: str, model, env: Environment, dt: float) -> SensorSpec:
    """One entry of ``sensors:``; ``where`` is its place (``sensors[i]``)."""
    if not isinstance(raw, dict):
        r0.at(where).fail("", f"expected a mapping, got {shown(raw)}")
    name = raw.get("name")
    r = r0.at(f"{where} ({name})" if isinstance(name, str) and is_name(name) else where)
    if "name" not in raw:
        r.fail("name", "missing")
    r.model_name(name, "name")
    if "type" not in raw:
        r.fail("type", "missing")
    kind = r.choice(raw["type"], "type", tuple(TYPES))
    try:
        module = TYPES[kind]
    except KeyError:
        r.fail("type", f"the sensor type {kind!r} is not available in this build (available: "
                       f"{', '.join(TYPES.available())})")
    allowed = COMMON_KEYS + tuple(k for k in module.KEYS if k not in COMMON_KEYS)
    r.mapping(raw, "", allowed, ("rate",))
    joint = None
    if kind == "force_torque":
        if "link" in raw:
            r.fail("link", "a force/torque sensor is placed by its joint (the link is the joint's child): give joint")
        if "joint" not in raw:
            r.fail("joint", "missing (the joint whose reaction wrench it measures)")
        joint = r.model_name(raw["joint"], "joint")
        if joint not in model.joint_names:
            r.fail("joint", f"no movable joint named {joint!r} in the model (movable joints: "
                            f"{_listed(model.joint_names)})")
        tree = model.tree
        link = tree.body_names[list(tree.joint_names).index(joint) + 1]
    else:
        if "joint" in raw:
            r.fail("joint", "only a force_torque sensor has a joint; mount this one on a link")
        if "link" not in raw:
            r.fail("link", "missing (the link the sensor is mounted on)")
        link = r.model_name(raw["link"], "link")
        if link not in model.link_names:
            r.fail("link", f"no link named {link!r} in the model (links: {_listed(model.link_names)})")
    T = np.eye(4)
    if "pose" in raw:
        pose = r.mapping(raw["pose"], "pose", ("xyz", "rpy"))
        T[:3, 3] = r.numbers(pose.get("xyz", [0, 0, 0]), "pose.xyz", 3)
        T[:3, :3] = rotation_rpy(r.numbers(pose.get("rpy", [0, 0, 0]), "pose.rpy", 3))
    rate, period = _rate(r, raw["rate"], dt)
    delay = r.number(raw.get("delay", 0.0), "delay", minimum=0.0, maximum=MAX_DELAY)
    delay_steps = whole_steps(delay, dt)
    if delay_steps is None:
        r.fail("delay", f"{delay:g} s is not a whole number of physics steps of {dt:g} s")
    seed = r.integer(raw.get("seed", 0), "seed", minimum=0)
    frame_id = r.ros_name(raw.get("frame_id", name), "frame_id", "frame id")
    topic = r.ros_name(raw.get("topic", f"sensors/{name}"), "topic", "topic name")
    stamp = r.choice(raw.get("stamp", "measurement"), "stamp", ("measurement", "arrival"))
    type_raw = {k: raw[k] for k in module.KEYS if k in raw}
    try:
        params = module.parse(r, type_raw, "", model, env)
        module.Sensor(SensorSpec(name=name, type=kind, link=link, T_link_sensor=_ro(T), rate=rate,
                                 period_steps=period, params=params, joint=joint), env, model, dt)
    except SensorConfigError:
        raise
    except (ArithmeticError, ValueError, np.linalg.LinAlgError) as e:  # a combination no bound foresaw
        r.fail("", f"cannot be simulated with these values ({type(e).__name__})")
    return SensorSpec(name=name, type=kind, link=link, T_link_sensor=_ro(T), rate=rate, period_steps=period,
                      params=params, joint=joint, delay=delay, delay_steps=delay_steps, seed=seed, frame_id=frame_id,
                      topic=topic, stamp=stamp)


def _listed(names, limit: int = 8) -> str:
    names = [n for n in names if is_name(n)]
    more = f", … ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"
