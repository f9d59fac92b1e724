"""solo12_stand with its sensors file (config/sensors/solo12.yaml) headless: the four foot contact sensors read,
standing, normal forces summing to m g (the URDF's total mass, 2.5 kg) within 1 %, their contact states are off in
the air and on standing, the base IMU reads +g up at rest (the contact loads in its acceleration: not free fall),
and the readings are on the sensors' grid of simulated steps. A slow test (2 s of contact steps in Python)."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.packages import resolve_uri

SOLO12 = "package://example-robot-data/robots/solo_description/robots/solo12.urdf"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(resolve_uri(SOLO12).path is None, reason="example-robot-data is not installed")]
G = 9.81
MASS = 2.50000279  # the URDF's links summed (as test_solo12_stand)
FEET = ("fl_foot", "fr_foot", "hl_foot", "hr_foot")


@pytest.fixture(scope="module")
def sensors():
    from mbs_ros.headless.run import run_scenario

    run = run_scenario("solo12_stand", duration=2.0, overrides={"robots[0].sensors": "config/sensors/solo12.yaml"})
    assert run.fault is None
    return run.robots["solo"].sensors


def test_the_feet_carry_the_weight_and_say_when_they_touch(sensors):
    assert set(sensors) == set(FEET) | {"imu", "encoders"}
    t = sensors["fl_foot"]["stamp_ns"] * 1e-9
    for name in FEET:
        s = sensors[name]
        assert np.array_equal(s["k"], np.arange(0, 2001, 2))  # 500 Hz at 1 kHz physics, no delay
        assert np.array_equal(s["stamp_ns"], s["k"] * 1_000_000) and s["valid"].all()
        assert not s["contact"][t < 0.09].any()  # in the air (the feet reach the ground after ~0.1 s)
        assert s["contact"][t > 1.0].all()
    rest = t >= 1.5
    total = sum(sensors[name]["normal_force"] for name in FEET)
    # 250 samples of a sum with std 0.4 N (4 feet x 0.2 N): the mean's standard error 0.025 N << 1 % of m g
    assert abs(total[rest].mean() - MASS * G) < 0.01 * MASS * G


def test_the_base_imu_reads_plus_g_standing(sensors):
    imu = sensors["imu"]
    t = imu["stamp_ns"] * 1e-9
    a = imu["linear_acceleration"][t >= 1.5].mean(axis=0)
    assert np.linalg.norm(a - [0.0, 0.0, G]) < 0.05 * G, a  # level base; free fall would read 0
