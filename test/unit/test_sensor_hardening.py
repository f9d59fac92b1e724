"""Issue 31 (hardening of the sensors files): every hostile input of the probe (kept as fixtures in
test/fixtures/hostile/sensors/) is refused at load with one line naming the file and the key, never a traceback and
never a sensor that publishes inf; at every bound a file may reach, every reading of every sensor type stays finite;
the number of sensors and the readings held back by delays are capped; an unknown key gets a "did you mean".
"""
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.sensors import spec as spec_module
from mbs_ros.sensors.spec import (MAX_DELAY, MAX_MAGNITUDE, MAX_QUEUED_READINGS, MAX_SENSORS, SensorConfigError,
                                  load_sensors, parse_sensors)
from mbs_ros.sensors.suite import SensorSuite

ROOT = Path(__file__).resolve().parents[2]
UVMS = ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml"
HOSTILE = ROOT / "test" / "fixtures" / "hostile" / "sensors"

#: fixture -> the key its one-line error names (None: an error of the file itself, with line and column)
EXPECTED = {
    "noise_1e308.yaml": "sensors[0] (imu): noise.gyroscope_noise_density: ",
    "noise_1e200.yaml": "sensors[0] (imu): noise.accelerometer_noise_density: ",
    "force_std_1e308.yaml": "sensors[0] (wrist_ft): noise.force_std: ",
    "water_surface_1e308.yaml": "environment.water_surface: ",
    "pose_xyz_1e308.yaml": "sensors[0] (imu): pose.xyz[0]: ",
    "rate_5e-324.yaml": "sensors[0] (imu): rate: ",
    "delay_1e308.yaml": "sensors[0] (imu): delay: ",
    "delay_3600.yaml": "sensors[0] (imu): delay: ",
    "beam_angle_1e-300.yaml": "sensors[0] (dvl): beam_angle: ",
    "resolution_1e-320.yaml": "sensors[0] (enc): resolution: ",
    "fluid_density_1e308.yaml": "environment.fluid_density: ",
    "integer_400_digits.yaml": None,
    "integer_5000_digits.yaml": None,
    "nul_byte.yaml": None,
    "control_0x01.yaml": None,
    "key_typo.yaml": "sensors[0] (imu): noise.gyroscope_noise_densty: unknown key (did you mean "
                     "'gyroscope_noise_density'? allowed: ",
}


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(UVMS)


def test_every_hostile_fixture_is_listed():
    assert sorted(p.name for p in HOSTILE.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_hostile_sensors_file_is_refused_with_one_line_naming_file_and_key(name, uvms):
    """The probe's inputs (issue 31 items 4-7, 26): SensorConfigError of one line ``FILE: KEY: why`` (an error of
    the file itself: ``FILE:LINE:COLUMN: why``); before, these loaded (and published inf) or raised OverflowError,
    ValueError, ReaderError or LinAlgError."""
    path = HOSTILE / name
    with pytest.raises(SensorConfigError) as e:
        load_sensors(path, uvms, 0.001)
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    want = EXPECTED[name]
    if want is None:
        assert text.startswith(f"{path}:") and text.split(":")[1].isdigit(), text
    else:
        assert text.startswith(f"{path}: {want}"), text
    assert "9999999999" not in text  # never the file's content


def _doc(sensors, environment=None):
    return {"environment": environment or {}, "sensors": sensors}


def test_the_number_of_sensors_is_capped(uvms):
    """MAX_SENSORS IMUs load; one more is refused naming ``sensors`` (10⁵ took 32 s and 1.1 GB to parse)."""
    imus = [{"name": f"imu{i}", "type": "imu", "link": "base_link", "rate": 10} for i in range(MAX_SENSORS + 1)]
    assert len(parse_sensors(_doc(imus[:MAX_SENSORS]), "s.yaml", uvms, 0.001).sensors) == MAX_SENSORS
    with pytest.raises(SensorConfigError) as e:
        parse_sensors(_doc(imus), "s.yaml", uvms, 0.001)
    assert str(e.value).startswith(f"s.yaml: sensors: {MAX_SENSORS + 1} sensors: at most {MAX_SENSORS}")


def test_a_sensors_file_beyond_its_byte_bound_is_refused_before_it_is_composed(tmp_path, uvms):
    """The probe's 10⁵ IMUs (6 MB: minutes and 850 MB only to compose) are refused by the file's size, naming it;
    the count itself is refused after reading (test above)."""
    path = tmp_path / "many.yaml"
    line = "  - {name: imuNNNNNN, type: imu, link: base_link, rate: 100}\n"
    path.write_text("sensors:\n" + line * 100_000)
    with pytest.raises(SensorConfigError) as e:
        load_sensors(path, uvms, 0.001)
    assert str(e.value) == (f"{path}: {path.stat().st_size} bytes: a sensors file is at most "
                            f"{spec_module.MAX_FILE_BYTES} bytes (at most {MAX_SENSORS} sensors)")


def test_delays_and_the_readings_they_hold_are_bounded(uvms):
    """A delay up to MAX_DELAY loads; beyond, refused; and the readings all delays hold (Σ ⌈delay/period⌉ + 1) stay
    within MAX_QUEUED_READINGS: two 1 kHz IMUs of 10 s delay hold 2 x 10001 > 20000 readings, the second is refused.
    """
    one = {"name": "a", "type": "imu", "link": "base_link", "rate": 1000, "delay": MAX_DELAY}
    ss = parse_sensors(_doc([one]), "s.yaml", uvms, 0.001)
    assert ss.sensors[0].delay_steps == 10_000
    assert spec_module.queued_readings(ss.sensors[0]) == 10_001
    two = dict(one, name="b")
    assert 2 * 10_001 > MAX_QUEUED_READINGS
    with pytest.raises(SensorConfigError) as e:
        parse_sensors(_doc([one, two]), "s.yaml", uvms, 0.001)
    assert str(e.value).startswith("s.yaml: sensors[1] (b): delay: the sensors' delays would hold 20002 readings")
    with pytest.raises(SensorConfigError, match=r"sensors\[0\] \(a\): delay: expected a number of magnitude <= 10,"):
        parse_sensors(_doc([dict(one, delay=10.001)]), "s.yaml", uvms, 0.001)


def test_an_unforeseen_failure_of_a_sensors_model_is_one_line(uvms, monkeypatch):
    """The safety net: a sensor whose model cannot be built from its (checked) values is refused naming the sensor,
    not a traceback (planted: the IMU's model raises OverflowError)."""
    from mbs_ros.sensors import imu

    def boom(*args, **kwargs):
        raise OverflowError("math range error")

    monkeypatch.setattr(imu, "Sensor", boom)
    with pytest.raises(SensorConfigError) as e:
        parse_sensors(_doc([{"name": "a", "type": "imu", "link": "base_link", "rate": 100}]), "s.yaml", uvms, 0.001)
    assert str(e.value) == "s.yaml: sensors[0] (a): cannot be simulated with these values (OverflowError)"


BIG = MAX_MAGNITUDE


def _extreme_sensors(sign: float):
    """Every sensor type with every number of its file at a bound (|value| = MAX_MAGNITUDE or its own bound)."""
    b = sign * BIG
    imu_noise = {k: BIG for k in ("gyroscope_noise_density", "gyroscope_random_walk",
                                  "gyroscope_bias_correlation_time", "gyroscope_turn_on_bias_sigma",
                                  "accelerometer_noise_density", "accelerometer_random_walk",
                                  "accelerometer_bias_correlation_time", "accelerometer_turn_on_bias_sigma")}
    pose = {"xyz": [b, b, b], "rpy": [b, b, b]}
    return [
        {"name": "imu", "type": "imu", "link": "base_link", "rate": 1000, "pose": pose, "noise": imu_noise,
         "orientation": {"enabled": True, "noise_std": BIG}},
        {"name": "imu_fast_bias", "type": "imu", "link": "base_link", "rate": 1000,
         "noise": dict(imu_noise, gyroscope_bias_correlation_time=1e-300, accelerometer_bias_correlation_time=0)},
        {"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 1000, "pose": pose,
         "bias": [b, b, b], "noise": {"std": BIG}},
        {"name": "depth", "type": "pressure", "link": "base_link", "rate": 1000, "pose": pose,
         "bias": b, "resolution": 1e-12, "noise": {"std": BIG}},
        {"name": "depth_coarse", "type": "pressure", "link": "base_link", "rate": 1000, "resolution": BIG},
        {"name": "dvl", "type": "dvl", "link": "base_link", "rate": 1000, "pose": pose, "beam_angle": 1.0,
         "min_range": 0.0, "max_range": BIG, "water_track": True, "noise": {"velocity_std": BIG, "range_std": BIG}},
        {"name": "dvl_flat", "type": "dvl", "link": "base_link", "rate": 1000, "beam_angle": 80.0},
        {"name": "gps", "type": "gnss", "link": "base_link", "rate": 1000, "pose": pose, "surface_margin": BIG,
         "noise": {"horizontal_std": BIG, "vertical_std": BIG, "correlation_time": BIG}},
        {"name": "enc", "type": "encoders", "link": "alpha_base_link", "rate": 1000, "resolution": 1e-12,
         "linear_resolution": BIG, "noise": {"position_std": BIG, "velocity_std": BIG}},
        {"name": "enc_counts", "type": "encoders", "link": "alpha_base_link", "rate": 1000,
         "counts_per_revolution": 2 ** 40},
        {"name": "ft", "type": "force_torque", "joint": "alpha_axis_b", "rate": 1000, "force_bias": [b, b, b],
         "torque_bias": [b, b, b], "noise": {"force_std": BIG, "torque_std": BIG}},
    ]


def _floats(value):
    if value is None or isinstance(value, (str, bool)):
        return np.zeros(0)
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return np.zeros(0)
    return a.reshape(-1)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_at_every_bound_a_file_may_reach_every_reading_is_finite(uvms, sign):
    """Each number of each sensor type at the bound (and the environment: water surface, seabed, pressure, field,
    density at theirs): 200 steps of 1 ms, every value of every reading finite (before, 1e308 noise, force_std,
    water_surface or mount gave inf in readings marked valid)."""
    b = sign * BIG
    env = {"fluid_density": 1.0e5, "water_surface": BIG if sign > 0 else -BIG / 2, "seabed_z": -BIG,
           "atmospheric_pressure": BIG, "magnetic_field": [b, b, b],
           "datum": {"latitude": 90.0 * sign, "longitude": 180.0 * sign, "altitude": b}}
    ss = parse_sensors(_doc(_extreme_sensors(sign), env), "s.yaml", uvms, 0.001)
    sim = Simulator(uvms, uvms.neutral(), np.r_[0.2, 0, 0, 0, 0, 0.3, 0, 0, 0, 0], 0.001)
    sim.set_thrusts(np.linspace(-5, 5, len(uvms.thruster_names)))
    readings = SensorSuite(uvms, ss, 0.001).run(sim, 200)
    assert len(readings) > 200
    # a valid reading is finite but a DVL's ranges (REP 117: +inf is "no return"); an invalid one is not published
    # but a GNSS NO_FIX (NaN position: sensor_msgs/NavSatFix's "unknown") and the beams
    bad = [(r.name, k) for r in readings if r.valid for k, v in r.values.items()
           if k != "ranges" and not np.isfinite(_floats(v)).all()]
    assert not bad, bad[:10]
    assert {r.name for r in readings if r.valid} >= {"imu", "imu_fast_bias", "mag", "depth", "depth_coarse", "enc",
                                                     "enc_counts", "ft"}
    assert all(math.isfinite(r.stamp_ns) for r in readings)

