"""The headless record's contacts/<link> (RobotRecord.contact_wrenches): uvms_grasp for 0.3 s, the handle resting
on the seabed, the fingers in the water. Samples on the dynamics node's contacts_rate grid (20 Hz: every 50 ms of
simulation time, none at t = 0, as the node publishes after a step), a zero wrench on each finger pad, and on the
handle its weight in sea water, (m - rho V) g with m 0.8 kg, rho 1025 kg/m^3, V = pi r^2 L (r 15 mm, L 0.2 m)
(config/worlds/seabed_handle.yaml), in its own frame. That these equal contacts/<link> over ROS bit for bit:
test/e2e/test_headless_identity.py."""
import math

import numpy as np
import pytest

from mbs_ros.headless import run_scenario

WEIGHT = (0.8 - 1025.0 * math.pi * 0.015 ** 2 * 0.2) * 9.81  # 6.4265 N


@pytest.fixture(scope="module")
def record():
    run = run_scenario("uvms_grasp", duration=0.3)
    assert run.fault is None, run.fault
    return run.robots["rov"]


def test_contact_wrenches_on_the_grid(record):
    w = record.contact_wrenches
    assert set(w) == {"alpha_finger_l", "alpha_finger_r", "handle"}
    for name, (stamps, wrenches) in w.items():
        assert stamps.tolist() == [50_000_000 * i for i in range(1, 7)], name
        assert wrenches.shape == (6, 6)
    for finger in ("alpha_finger_l", "alpha_finger_r"):
        assert not np.any(w[finger][1])


def test_the_handle_carries_its_weight_in_water(record):
    _stamps, wrenches = record.contact_wrenches["handle"]
    for f in wrenches[:, :3]:
        assert np.linalg.norm(f) == pytest.approx(WEIGHT, rel=1e-3)
