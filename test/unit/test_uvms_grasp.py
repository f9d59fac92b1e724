"""The UVMS grasp and carry (config/scenarios/uvms_grasp.yaml, issue 30), headless: the vehicle with the
Alpha-5-like arm and its gripper reaches the handle on the seabed, closes on it, lifts it by rising 0.1 m, carries
it 0.5 m along x, sets it down and opens (figures: python -m tools.uvms_grasp_figures; docs/contact.md).

Bounds, from the scenario's numbers: the vehicle rises 100 mm; the handle's lowest point (the cylinder's, at its
attitude) must stay above 10 mm while carried (from the end of the lift to the start of the set-down): lifted, not
dragged, nor pivoted in the jaws with one end left on the seabed (its axis within 2 degrees of level). The vehicle
carries it 500 mm; the handle's x must change by 500 mm within 15 % from start to end (the vehicle's tracking, the
arm's swing under the load and the set-down's push on the seabed move it by centimetres). Slip: its centre may
move at most 20 mm in the palm's frame while carried (a pad is 50 mm across; a handle that slid that far would be
dropping). Set down: at the end its lowest point within 1 mm of the seabed (resting on it). No fault, no
control error."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.headless import run_scenario

figures = pytest.importorskip("tools.uvms_grasp_figures")

# the handle of config/worlds/seabed_handle.yaml in the sea water of the robot's fluid (1025 kg/m^3), g 9.81
MASS, RADIUS, LENGTH, RHO, G = 0.8, 0.015, 0.2, 1025.0, 9.81
WEIGHT_IN_WATER = (MASS - RHO * math.pi * RADIUS ** 2 * LENGTH) * G  # 6.4265 N


@pytest.fixture(scope="module")
def run():
    return run_scenario("uvms_grasp")


def test_the_scenario_grasps_lifts_carries_and_sets_down_the_handle(run):
    assert run.fault is None, run.fault
    assert run.robots["rov"].control_errors == 0
    m = figures.grasp_metrics(run)
    assert m["lifted"] > 0.010, m["lifted"]
    assert m["max_tilt"] < math.radians(2.0), math.degrees(m["max_tilt"])
    assert abs(m["carried"] - 0.5) < 0.075, m["carried"]
    assert m["slip"] < 0.020, m["slip"]
    assert abs(m["set_down"]) < 0.001, m["set_down"]


def test_while_carried_the_jaws_alone_hold_the_handles_weight_in_water(run):
    """From the lift to the set-down the handle touches nothing but the jaws: the contact force on the robot,
    averaged over those 4 s, is the handle's weight in water pulling down (closed form above) within 1 % (its
    inertia averages out: it starts and ends the window nearly at rest; the drag on a 0.5 m carry is vertical only
    through the tilt); horizontally the carry's drag and inertia, well under a newton. A handle propped on the
    seabed by one end (ca1c10f: 5.76 N) fails it."""
    m = figures.grasp_metrics(run)
    fx, fy, fz = m["held_force"]
    assert abs(-fz - WEIGHT_IN_WATER) < 0.01 * WEIGHT_IN_WATER, (fz, WEIGHT_IN_WATER)
    assert np.hypot(fx, fy) < 1.0, (fx, fy)


def test_a_handle_yawed_in_the_jaws_is_held_level_on_both_points_of_each_jaw():
    """uvms_grasp_robustness's run 13 (seed 31): the handle 1.6 mm off in x, yawed 0.081 rad, its friction x0.63
    (jaws 0.63: 2 x 0.63 x 15 N = 18.9 N against its 6.43 N). Each jaw touches it at two points whose share of
    the squeeze the rigid contact leaves open; shared by the order of Gauss-Seidel's sweeps, one point of each jaw
    took it all, the handle pivoted about them and fell (tilt 70 deg, then dropped). Shared as equal springs
    would (mbs_ros.dynamics.contact.split), it is lifted level and carried."""
    overrides = {"robots[0].dynamics.object_offset": [0.001573, -0.0009538, 0.0, 0.0812],
                 "robots[0].dynamics.object_mass_scale": 1.002, "robots[0].dynamics.friction_scale": 0.6299,
                 "robots[0].controller.payload_mass": 0.655}
    yawed = run_scenario("uvms_grasp", overrides=overrides, duration=10.0)
    assert yawed.fault is None, yawed.fault
    m = figures.grasp_metrics(yawed)
    assert m["lifted"] > 0.010, m["lifted"]
    assert m["max_tilt"] < math.radians(2.0), math.degrees(m["max_tilt"])
    assert m["slip"] < 0.020, m["slip"]
