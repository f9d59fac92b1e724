"""A headless run (mbs_ros.headless.run_scenario) with a contact world from the robot YAML: the fixed-base arm
held by its controller while a free crate drops 0.2 m onto the ground beside it. The record carries the contact's
work (never increasing, ≤ 0, the crate's impact in it), its power (≤ 0) and the crate's configurations, which end
resting on the ground."""
from __future__ import annotations

import numpy as np
import pytest

from contact_fixtures import ARM_GROUND, CRATE_DROP, CRATE_MASS, CRATE_SIZE, G, write_arm
from mbs_ros.headless import run_scenario

DURATION = 0.6


def _scenario(tmp_path, model):
    path = tmp_path / "crate_drop.yaml"
    path.write_text(f"""\
name: crate_drop
description: the 2-link arm holds its pose while a crate drops onto the ground beside it
physics_rate: 1000.0
publish_rate: 100.0
control_rate: 100.0
sim_time: true
lockstep: true
real_time_factor: 0.0
duration: {DURATION}
robots:
  - namespace: arm
    model: {model}
    base_group: fixed
    initial:
      joint_positions: [0.3, -0.2]
    controller:
      law: computed_torque
      kp: 16.0
      kd: 8.0
    reference:
      joints:
        - {{time: 0.0, positions: [0.3, -0.2]}}
""")
    return path


def test_a_headless_run_records_the_contact_work_power_and_the_objects(tmp_path):
    run = run_scenario(_scenario(tmp_path, write_arm(tmp_path)))
    assert run.fault is None and run.duration == pytest.approx(DURATION, abs=1e-12)
    rec = run.robots["arm"]
    rows = len(rec.t)
    assert rows == round(DURATION * 100) + 1
    assert rec.contact_work.shape == rec.contact_power.shape == (rows,)
    assert np.all(np.isfinite(rec.contact_work)) and np.all(np.isfinite(rec.contact_power))
    assert rec.contact_work[0] == 0.0 and np.all(rec.contact_work <= 0.0)
    assert np.all(np.diff(rec.contact_work) <= 0.0), "the contact work must never increase"
    assert np.all(rec.contact_power <= 0.0)
    # the crate's 0.2 m fall (3.9 J) went into the contact's work; before it lands (0.2 s) there is none
    lost = CRATE_MASS * G * CRATE_DROP
    t_land = (2 * CRATE_DROP / G) ** 0.5
    assert np.all(rec.contact_work[rec.t < t_land - 0.01] == 0.0)
    assert rec.contact_work[-1] < -0.98 * lost
    # the crate: (rows, 1 object, 7 = position and quaternion), from its start to resting on the ground
    assert rec.objects_q.shape == (rows, 1, 7)
    np.testing.assert_allclose(rec.objects_q[0, 0], [2.0, 0.0, ARM_GROUND + CRATE_SIZE / 2 + CRATE_DROP,
                                                     0.0, 0.0, 0.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(rec.objects_q[-1, 0], [2.0, 0.0, ARM_GROUND + CRATE_SIZE / 2, 0.0, 0.0, 0.0, 1.0],
                               atol=1e-9)
    # the balance counts the contact's work: the residual is the contact step's O(h) error, not the 3.9 J
    assert np.abs(rec.energy_residual).max() < 0.1 * lost
    # the arm held its pose (the ground is 1 m below it; it has no collision shapes)
    np.testing.assert_allclose(rec.q[-1], [0.3, -0.2], atol=1e-3)


def test_without_objects_there_are_no_object_rows(tmp_path):
    run = run_scenario(_scenario(tmp_path, write_arm(tmp_path, world="world:\n  ground: {height: -1.0}\n")),
                       duration=0.1)
    rec = run.robots["arm"]
    assert rec.objects_q is None and rec.contact_work is not None and np.all(rec.contact_work == 0.0)
