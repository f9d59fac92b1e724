"""execute_run: one campaign run from draw to row, on short real headless runs of the vehicle-manipulator (0.5 s
simulated each): a passing row, the true model's mass_scale reaching the simulator, a draw the scenario refuses
as an error row, a blow-up as a failed row, and the same row for the same index every time. In process, no ROS."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from mbs_ros.scenario.schema import scenario_path
from mbs_ros.campaign import execute_run, load_campaign
from mbs_ros.dynamics.simulation import simulator as simulator_module

DURATION = 0.5


def _campaign(tmp_path, vary="", criteria="- max_base_position_error < 1.0", runs=2, name="c.yaml"):
    text = textwrap.dedent("""\
        name: vm
        scenario: vehicle_manipulator
        runs: {runs}
        seed: 5
        duration: {duration}
        vary:
        {vary}
        metrics: [final_base_position_error, max_base_position_error, max_joint_error, saturation_fraction, faults]
        criteria:
        {criteria}
        """).format(runs=runs, duration=DURATION, vary=textwrap.indent(textwrap.dedent(vary), "  ") or "  []",
                    criteria=textwrap.indent(criteria, "  "))
    path = tmp_path / name
    path.write_text(text.replace("vary:\n  []", "vary: []"), encoding="utf-8")
    return load_campaign(path)


def _same(a: dict, b: dict) -> bool:
    keys = set(a) - {"wall_s"}
    return keys == set(b) - {"wall_s"} and all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in keys)


def test_a_run_becomes_a_row_with_its_draws_and_metrics_and_the_same_row_again(tmp_path):
    """The vehicle-manipulator starts 0.2 m (0.245 m with z) off its first base waypoint: after 0.5 s the largest
    base error is that initial offset (the reference's first waypoint minus the initial position, written here),
    the run passes a 1 m bound and fails a 0.1 m one with the text of the failed criterion."""
    c = _campaign(tmp_path, vary="""\
        - path: robots[0].dynamics.mass_scale
          uniform: [0.9, 1.1]
        - path: robots[0].initial.joint_positions
          normal: {mean: [0.0, 0.6, -1.2, 0.0, 0.6, 0.0], std: 0.01}
          size: 6
        """)
    row = execute_run(c, 1)
    assert row["status"] == "pass" and row["reason"] == "" and row["run"] == 1 and row["wall_s"] > 0
    draw = c.draw(1)
    assert row["param.robots[0].dynamics.mass_scale"] == draw["robots[0].dynamics.mass_scale"]
    assert isinstance(row["param.robots[0].initial.joint_positions"], str)  # a vector as JSON text
    offset = np.linalg.norm(np.array([0.2, -0.1, -4.9]) - np.array([0.0, 0.0, -5.0]))
    assert row["metric.max_base_position_error"] == pytest.approx(offset, rel=1e-3)
    assert 0.0 < row["metric.final_base_position_error"] < offset and row["metric.faults"] == 0.0
    assert _same(row, execute_run(c, 1))
    strict = _campaign(tmp_path, criteria="- max_base_position_error < 0.1", name="strict.yaml")
    row = execute_run(strict, 0)
    assert row["status"] == "fail"
    assert row["reason"] == f"max_base_position_error = {row['metric.max_base_position_error']:.4g} >= 0.1"


def test_the_true_models_mass_scale_changes_the_run_and_1_changes_nothing(tmp_path):
    """Grid mass_scale 1 and 3 on the simulated model (the controller's model stays): 1 gives the row of the
    campaign without the variation, 3 another tracking error."""
    c = _campaign(tmp_path, vary="""\
        - path: robots[0].dynamics.mass_scale
          grid: [1.0, 3.0]
        """)
    one, three = execute_run(c, 0), execute_run(c, 1)
    plain = execute_run(_campaign(tmp_path, name="plain.yaml"), 0)
    assert one["metric.final_base_position_error"] == plain["metric.final_base_position_error"]
    assert one["metric.max_joint_error"] == plain["metric.max_joint_error"]
    assert abs(three["metric.final_base_position_error"] - one["metric.final_base_position_error"]) > 1e-3


def test_a_draw_the_scenario_refuses_is_an_error_row_naming_the_key(tmp_path):
    c = _campaign(tmp_path, vary="""\
        - path: robots[0].controller.kp
          uniform: [-2.0, -1.0]
        """)
    row = execute_run(c, 0)
    assert row["status"] == "error" and "robots[0].controller.kp: must be > 0" in row["reason"]
    assert row["reason"].startswith(f"{scenario_path('vehicle_manipulator')}: ")
    assert all(math.isnan(row[f"metric.{m.name}"]) for m in c.metrics)
    assert row["param.robots[0].controller.kp"] == c.draw(0)["robots[0].controller.kp"]


def test_a_blow_up_is_a_failed_row_with_the_fault(tmp_path, monkeypatch):
    """The integrator gives NaN from t = 0.2 s on: the row fails with the headless run's fault text (its time and
    robot) and the faults metric counts it; the run does not raise. The NaN is planted in the simulator's Python
    step, so the headless fast path (its periods in one compiled call, mbs_ros.headless.fast) is turned off."""
    from mbs_ros.headless import fast as headless_fast

    monkeypatch.setattr(headless_fast, "eligible", lambda robot: "the test plants its fault in the Python step")
    real_step = simulator_module.step

    def step(model, q, v, tau, dt, method="rk4", t=0.0, **kw):
        if t >= 0.2 - 1e-9:
            return q + np.nan, v + np.nan
        return real_step(model, q, v, tau, dt, method=method, t=t, **kw)

    monkeypatch.setattr(simulator_module, "step", step)
    row = execute_run(_campaign(tmp_path), 0)
    assert row["status"] == "fail" and row["reason"].startswith("t = 0.200 s: ") and "(uvms)" in row["reason"]
    assert row["metric.faults"] == 1.0
