"""Sensor declarations (mbs_ros/sensors/spec.py, docs/sensors.md): a sensors file and a robot YAML's
``robot.sensors`` load into the specs they say (rates and delays as whole physics steps, the pose's rotation from
rpy, defaults, the environment with the model's gravity and water); every bad declaration is refused with one line
``FILE: sensors[i] (NAME): KEY: what`` that names the key and never echoes the file's text; a sensor that needs
water on a robot without any is a "no water" error, not a silent zero."""
import copy
import math
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.sensors.spec import Environment, Reader, SensorConfigError, load_sensors, parse_sensors

ROOT = Path(__file__).resolve().parents[2]
ROV = ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml"
ARM = ROOT / "config" / "robots" / "arm_6dof_fixed.yaml"
SECRET = "the quick brown fox: not for messages"


@pytest.fixture(scope="module")
def rov():
    return Model.from_yaml(ROV)


@pytest.fixture(scope="module")
def arm():
    return Model.from_yaml(ARM)


def good():
    return {"environment": {"seabed_depth": 40.0},
            "sensors": [{"name": "imu", "type": "imu", "link": "base_link", "rate": 200},
                        {"name": "wrist_imu", "type": "imu", "link": "alpha_link_b", "rate": 100, "delay": 0.003,
                         "seed": 7, "pose": {"xyz": [0.1, 0.2, 0.3], "rpy": [0, 0, math.pi / 2]},
                         "frame_id": "wrist/imu", "topic": "imu/wrist", "stamp": "arrival",
                         "noise": {"gyroscope_noise_density": 1e-3, "accelerometer_random_walk": 0},
                         "orientation": {"enabled": True, "noise_std": 0.01}}]}


def test_a_sensors_file_loads_into_its_specs(tmp_path, rov):
    """Periods and delays in physics steps at 1 kHz, the pose (rpy yaw 90°: x_sensor along y_link), the defaults
    (frame id = name, topic sensors/NAME, seed 0, measurement stamps), the noise given and defaulted, and the
    environment: the model's gravity, the vehicle's water (1025 kg/m³ from its hydrodynamics), the seabed 40 m
    below the surface, the default field and pressure."""
    import yaml

    path = tmp_path / "sensors.yaml"
    path.write_text(yaml.safe_dump(good()))
    ss = load_sensors(path, rov, 0.001)
    a, b = ss.sensors
    assert (a.period_steps, a.delay_steps, a.seed, a.frame_id, a.topic, a.stamp) == (5, 0, 0, "imu", "sensors/imu",
                                                                                      "measurement")
    assert (b.period_steps, b.delay_steps, b.delay, b.seed, b.frame_id, b.topic, b.stamp) == (
        10, 3, 0.003, 7, "wrist/imu", "imu/wrist", "arrival")
    assert np.allclose(b.T_link_sensor, [[0, -1, 0, 0.1], [1, 0, 0, 0.2], [0, 0, 1, 0.3], [0, 0, 0, 1]], atol=1e-15)
    assert b.params.gyroscope_noise_density == 1e-3 and b.params.accelerometer_random_walk == 0.0
    assert b.params.accelerometer_noise_density == 4e-3 and b.params.orientation
    env = ss.environment
    assert np.array_equal(env.gravity, [0, 0, -9.81]) and env.fluid_density == 1025.0
    assert (env.water_surface_z, env.seabed_z, env.atmospheric_pressure) == (0.0, -40.0, 101325.0)
    assert np.array_equal(env.magnetic_field, [0.0, 2.0e-5, -4.5e-5]) and env.datum == (0.0, 0.0, 0.0)
    assert ss.source == str(path)


def test_a_robot_yaml_carries_its_sensors_and_environment(tmp_path):
    """``sensors:`` and ``environment:`` inside ``robot:``: the model loads (robot_yaml ignores them), the sensors
    load from the same file, and their errors read ``robot.sensors[i] (NAME)``; without water no fluid density."""
    import yaml

    robot = {"robot": {"name": "box", "base": "se3", "links": [{"name": "body", "mass": 2.0,
                                                                "inertia": [1, 0, 0, 1, 0, 1]}],
                       "environment": {"magnetic_field": [0, 1e-5, 0]},
                       "sensors": [{"name": "imu", "type": "imu", "link": "body", "rate": 50}]}}
    path = tmp_path / "box.yaml"
    path.write_text(yaml.safe_dump(robot))
    model = Model.from_yaml(path)
    ss = load_sensors(path, model, 0.01)
    assert [s.name for s in ss.sensors] == ["imu"] and ss.sensors[0].period_steps == 2
    assert np.array_equal(ss.environment.magnetic_field, [0, 1e-5, 0]) and ss.environment.fluid_density is None
    robot["robot"]["sensors"][0]["rate"] = -1
    path.write_text(yaml.safe_dump(robot))
    with pytest.raises(SensorConfigError) as e:
        load_sensors(path, model, 0.01)
    assert str(e.value) == f"{path}: robot.sensors[0] (imu): rate: expected a positive number, got -1"


def _sensor(doc, i=1):
    return doc["sensors"][i]


# (what to change, the message expected after "t.yaml: ")
REFUSALS = [
    ("negative rate", lambda d: _sensor(d).update(rate=-5),
     "sensors[1] (wrist_imu): rate: expected a positive number, got -5"),
    ("rate not dividing the physics rate", lambda d: _sensor(d).update(rate=300),
     "sensors[1] (wrist_imu): rate: 300 Hz is not the physics rate 1000 Hz divided by a whole number; nearest "
     "allowed: 333.333 Hz, 250 Hz"),
    ("rate above the physics rate", lambda d: _sensor(d).update(rate=2000),
     "sensors[1] (wrist_imu): rate: 2000 Hz is above the physics rate 1000 Hz (at most one sample per step)"),
    ("rate as text", lambda d: _sensor(d).update(rate=SECRET),
     "sensors[1] (wrist_imu): rate: expected a finite number, got a text of 37 characters"),
    ("missing rate", lambda d: _sensor(d).pop("rate"), "sensors[1] (wrist_imu): rate: missing"),
    ("unknown link", lambda d: _sensor(d).update(link="gripper"),
     "sensors[1] (wrist_imu): link: no link named 'gripper' in the model (links: base_link, alpha_base_link, "
     "alpha_link_e, alpha_link_d, alpha_link_c, alpha_link_b, alpha_jaws)"),
    ("link not a name", lambda d: _sensor(d).update(link=SECRET),
     "sensors[1] (wrist_imu): link: not a name (37 characters; a name is 1 to 128 letters, digits, '_', '-', '.' "
     "or '/', as ROS names and TF frames)"),
    ("unknown key", lambda d: _sensor(d).update(colour="red"),
     "sensors[1] (wrist_imu): colour: unknown key (allowed: name, type, link, joint, pose, rate, delay, seed, "
     "frame_id, topic, stamp, noise, orientation)"),
    ("unknown key that is no name", lambda d: _sensor(d).update({SECRET: 1}),
     "sensors[1] (wrist_imu): unknown key a text of 37 characters (allowed: name, type, link, joint, pose, rate, "
     "delay, seed, frame_id, topic, stamp, noise, orientation)"),
    ("noise: a list where a number belongs", lambda d: _sensor(d)["noise"].update(gyroscope_noise_density=[1, 2]),
     "sensors[1] (wrist_imu): noise.gyroscope_noise_density: expected a finite number, got a list of 2 items"),
    ("noise: a negative density", lambda d: _sensor(d)["noise"].update(accelerometer_noise_density=-1),
     "sensors[1] (wrist_imu): noise.accelerometer_noise_density: expected a number >= 0, got -1"),
    ("noise: a unit in the value", lambda d: _sensor(d)["noise"].update(gyroscope_random_walk="0.1 deg/s"),
     "sensors[1] (wrist_imu): noise.gyroscope_random_walk: expected a finite number, got a text of 9 characters"),
    ("noise: an unknown term", lambda d: _sensor(d)["noise"].update(gyro_noise=0.1),
     "sensors[1] (wrist_imu): noise.gyro_noise: unknown key (did you mean 'gyroscope_noise_density'? allowed: "
     "gyroscope_noise_density, "
     "gyroscope_random_walk, gyroscope_bias_correlation_time, gyroscope_turn_on_bias_sigma, "
     "accelerometer_noise_density, accelerometer_random_walk, accelerometer_bias_correlation_time, "
     "accelerometer_turn_on_bias_sigma)"),
    ("noise: a list", lambda d: _sensor(d).update(noise=[1, 2, 3]),
     "sensors[1] (wrist_imu): noise: expected a mapping, got a list of 3 items"),
    ("orientation flag as text", lambda d: _sensor(d)["orientation"].update(enabled="yes"),
     "sensors[1] (wrist_imu): orientation.enabled: expected true or false, got 'yes'"),
    ("delay not whole steps", lambda d: _sensor(d).update(delay=0.0015),
     "sensors[1] (wrist_imu): delay: 0.0015 s is not a whole number of physics steps of 0.001 s"),
    ("negative delay", lambda d: _sensor(d).update(delay=-0.001),
     "sensors[1] (wrist_imu): delay: expected a number >= 0, got -0.001"),
    ("negative seed", lambda d: _sensor(d).update(seed=-1),
     "sensors[1] (wrist_imu): seed: expected a whole number >= 0, got -1"),
    ("fractional seed", lambda d: _sensor(d).update(seed=1.5),
     "sensors[1] (wrist_imu): seed: expected a whole number, got 1.5"),
    ("pose of the wrong shape", lambda d: _sensor(d)["pose"].update(xyz=[1, 2]),
     "sensors[1] (wrist_imu): pose.xyz: expected 3 numbers, got a list of 2 items"),
    ("frame id not a ROS name", lambda d: _sensor(d).update(frame_id="9lives"),
     "sensors[1] (wrist_imu): frame_id: not a valid relative frame id (tokens of letters, digits and '_', not "
     "starting with a digit, joined by single '/')"),
    ("stamp choice", lambda d: _sensor(d).update(stamp="later"),
     "sensors[1] (wrist_imu): stamp: expected one of measurement, arrival, got 'later'"),
    ("unknown type", lambda d: _sensor(d).update(type="sonar"),
     "sensors[1] (wrist_imu): type: expected one of imu, magnetometer, pressure, dvl, gnss, encoders, "
     "force_torque, foot_contact, got 'sonar'"),
    ("joint on an IMU", lambda d: _sensor(d).update(joint="alpha_axis_b"),
     "sensors[1] (wrist_imu): joint: only a force_torque sensor has a joint; mount this one on a link"),
    ("duplicate name", lambda d: _sensor(d).update(name="imu"),
     "sensors[1] (imu): name: a sensor of this name is declared before"),
    ("name not a name", lambda d: _sensor(d).update(name=SECRET),
     "sensors[1]: name: not a name (37 characters; a name is 1 to 128 letters, digits, '_', '-', '.' or '/', as "
     "ROS names and TF frames)"),
    ("duplicate topic", lambda d: _sensor(d).update(topic="sensors/imu"),
     "sensors[1] (wrist_imu): topic: also the topic of sensor 'imu'"),
    ("a sensor that is no mapping", lambda d: d["sensors"].append(SECRET),
     "sensors[2]: expected a mapping, got a text of 37 characters"),
    ("environment: unknown key", lambda d: d["environment"].update(salinity=35),
     "environment.salinity: unknown key (allowed: fluid_density, water_surface, seabed_depth, seabed_z, "
     "atmospheric_pressure, magnetic_field, datum)"),
    ("environment: both seabed keys", lambda d: d["environment"].update(seabed_z=-30),
     "environment: give seabed_depth (below the water surface) or seabed_z (world z), not both"),
    ("environment: seabed above the surface", lambda d: d.update(environment={"seabed_z": 5}),
     "environment.seabed_z: the seabed must be below the water surface (z = 0 m)"),
    ("environment: latitude", lambda d: d["environment"].update(datum={"latitude": 100, "longitude": 0}),
     "environment.datum.latitude: expected degrees in [-90, 90], got 100"),
    ("environment: field shape", lambda d: d["environment"].update(magnetic_field=[0, 1]),
     "environment.magnetic_field: expected 3 numbers, got a list of 2 items"),
    ("top-level key", lambda d: d.update(sensor=[]),
     "sensor: unknown key (did you mean 'sensors'? allowed: environment, sensors)"),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_bad_declarations_are_refused_naming_file_sensor_and_key(case, rov):
    """Each broken declaration: SensorConfigError whose text is exactly ``t.yaml: WHERE: KEY: what``; never the
    file's free text (SECRET)."""
    _, change, expected = case
    doc = copy.deepcopy(good())
    change(doc)
    with pytest.raises(SensorConfigError) as e:
        parse_sensors(doc, "t.yaml", rov, 0.001)
    assert str(e.value) == f"t.yaml: {expected}"
    assert SECRET not in str(e.value) and "\n" not in str(e.value)


def test_a_broken_yaml_file_is_one_line_with_its_place(tmp_path, rov):
    path = tmp_path / "s.yaml"
    path.write_text("sensors:\n  - name: imu\n    rate: [1, 2\n")
    with pytest.raises(SensorConfigError, match=rf"^{path}:4:1: not valid YAML"):
        load_sensors(path, rov, 0.001)


def test_a_sensor_that_needs_water_on_a_dry_robot_is_a_no_water_error(arm, rov):
    """The arm has no hydrodynamics: its environment has no fluid density and require_water refuses at the key
    asked about (what the pressure and DVL parsers call); a fluid_density in the file, or a vehicle in water,
    gives the density instead."""
    r = Reader("arm.yaml").at("sensors[0] (depth)")
    env = parse_sensors({}, "arm.yaml", arm, 0.001).environment
    assert env.fluid_density is None
    with pytest.raises(SensorConfigError) as e:
        env.require_water(r, "type")
    assert str(e.value).startswith("arm.yaml: sensors[0] (depth): type: no water: ")
    wet = parse_sensors({"environment": {"fluid_density": 1000.0}}, "arm.yaml", arm, 0.001).environment
    assert wet.require_water(r, "type") == 1000.0
    assert parse_sensors({}, "rov.yaml", rov, 0.001).environment.require_water(r, "type") == 1025.0
    assert Environment(gravity=np.zeros(3)).fluid_density is None


def test_a_pressure_sensor_on_a_dry_robot_is_refused(arm):
    """Through a declaration, when the pressure type is built (sens_more's module)."""
    pytest.importorskip("mbs_ros.sensors.pressure")
    doc = {"sensors": [{"name": "depth", "type": "pressure", "link": "link1", "rate": 10}]}
    with pytest.raises(SensorConfigError, match=r"^arm\.yaml: sensors\[0\] \(depth\): [a-z_.]+: no water: "):
        parse_sensors(doc, "arm.yaml", arm, 0.001)


@pytest.mark.parametrize("physics_rate, rate, period", [(600.0, 300.0, 2), (600.0, 200.0, 3), (3000.0, 1000.0, 3),
                                                        (7000.0, 7.0, 1000)])
def test_rates_divide_the_nodes_nanosecond_step(rov, physics_rate, rate, period):
    """The node steps by a whole number of ns (600 Hz: 1 666 667 ns, i.e. 599.99988 Hz): a rate that divides the
    physics rate is that many steps all the same, and one that does not is still refused."""
    dt = round(1e9 / physics_rate) * 1e-9
    doc = {"sensors": [{"name": "imu", "type": "imu", "link": "base_link", "rate": rate}]}
    assert parse_sensors(doc, "s.yaml", rov, dt).sensors[0].period_steps == period
    doc["sensors"][0]["rate"] = physics_rate / (period + 0.5)
    with pytest.raises(SensorConfigError, match="divided by a whole number"):
        parse_sensors(doc, "s.yaml", rov, dt)
