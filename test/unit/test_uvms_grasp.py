"""The UVMS grasp and carry (config/scenarios/uvms_grasp.yaml, issue 30), headless: the vehicle with the
Alpha-5-like arm and its gripper reaches the handle on the seabed, closes on it, lifts it by rising 0.1 m, carries
it 0.5 m along x, sets it down and opens (figures: python -m tools.uvms_grasp_figures; docs/contact.md).

Bounds, from the scenario's numbers: the vehicle rises 100 mm; the handle's lowest point must stay above 10 mm
while carried (from the end of the lift to the start of the set-down): lifted, not dragged. The vehicle carries
it 500 mm; the handle's x must change by 500 mm within 15 % from start to end (the vehicle's tracking, the arm's
swing under the load and the set-down's push on the seabed move it by centimetres). Slip: its centre may move at
most 20 mm in the palm's frame while carried (a pad is 50 mm across; a handle that slid that far would be
dropping). Set down: at the end its lowest point within 1 mm of the seabed (resting on it). No fault, no
control error."""
from __future__ import annotations

import pytest

from mbs_ros.headless import run_scenario

figures = pytest.importorskip("tools.uvms_grasp_figures")


@pytest.fixture(scope="module")
def run():
    return run_scenario("uvms_grasp")


def test_the_scenario_grasps_lifts_carries_and_sets_down_the_handle(run):
    assert run.fault is None, run.fault
    assert run.robots["rov"].control_errors == 0
    m = figures.grasp_metrics(run)
    assert m["lifted"] > 0.010, m["lifted"]
    assert abs(m["carried"] - 0.5) < 0.075, m["carried"]
    assert m["slip"] < 0.020, m["slip"]
    assert abs(m["set_down"]) < 0.001, m["set_down"]
