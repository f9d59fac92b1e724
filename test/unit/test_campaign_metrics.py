"""Campaign metrics and criteria (mbs_ros.campaign.metrics, execute.evaluate_criteria) on hand-made records whose
expected values are worked out here: errors on the rows with a reference, an attitude error of exactly 0.3 rad built
with scipy's rotations, settling into a band, overshoot past a step, saturation, energy residual, faults, a user's
function and the pass/fail texts. No headless run."""
from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.campaign.execute import evaluate_criteria
from mbs_ros.campaign.metrics import compute_metrics, robot_metric
from mbs_ros.campaign.spec import BUILTIN_METRICS, Campaign, Criterion, MetricSpec
from mbs_ros.headless import HeadlessRun, RobotRecord

NAN = math.nan


def _record(q, q_d, t=None, *, base_group="se3", nq_base=7, nv_base=6, joints=(), saturated=None,
            energy=None, control_errors=0, namespace="r"):
    q, q_d = np.asarray(q, dtype=float), np.asarray(q_d, dtype=float)
    n = q.shape[0]
    nv = nv_base + len(joints)
    t = np.arange(n) * 0.1 if t is None else np.asarray(t, dtype=float)
    zeros = np.zeros((n, nv))
    return RobotRecord(namespace=namespace, base_group=base_group, joint_names=tuple(joints), nq_base=nq_base,
                       nv_base=nv_base, stamp_ns=(t * 1e9).astype(np.int64), t=t, q=q, v=zeros, q_d=q_d,
                       v_d=zeros, tau=zeros, tau_applied=zeros,
                       saturated=np.zeros(n, bool) if saturated is None else np.asarray(saturated, bool),
                       energy_residual=None if energy is None else np.asarray(energy, float),
                       control_errors=control_errors)


def _pose(p, quat=(0.0, 0.0, 0.0, 1.0)):
    return [*p, *quat]


def _metric(kind, rec, fault=None, **params):
    defaults = dict(BUILTIN_METRICS[kind])
    defaults.update(params)
    return robot_metric(MetricSpec(kind, kind, defaults), rec, fault)


# base position: the reference (1, 2, 3) is held from row 1; row 0 (no reference yet) has a 9 m "error" that must
# not count; the errors after it are along (2, -1, 2)/3 with lengths E
E = np.array([0.5, 0.2, 0.03, 0.01, 0.015])
DIRECTION = np.array([2.0, -1.0, 2.0]) / 3.0


def _position_record():
    p_d = np.array([1.0, 2.0, 3.0])
    q = [_pose(p_d + 9.0)] + [_pose(p_d + e * DIRECTION) for e in E]
    q_d = [[NAN] * 7] + [_pose(p_d)] * len(E)
    return _record(q, q_d, t=np.arange(6) * 0.1)


@pytest.mark.parametrize("kind, expected", [
    ("final_base_position_error", 0.015),
    ("max_base_position_error", 0.5),
    ("rms_base_position_error", math.sqrt((0.25 + 0.04 + 0.0009 + 0.0001 + 0.000225) / 5)),
    ("final_base_attitude_error", 0.0),
])
def test_base_position_errors_on_the_rows_with_a_reference(kind, expected):
    assert _metric(kind, _position_record()) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_a_joint_error_of_a_robot_without_joints_is_nan():
    assert math.isnan(_metric("max_joint_error", _position_record()))


def test_the_attitude_error_is_the_angle_between_the_rotations():
    """q = q_d exp(0.3 z) with q_d a rotation of 0.7 rad about (1, 2, 2)/3 (scipy): 0.3 rad, also with q's sign
    flipped (the same rotation); a second row of 0.3 rad about the world's y axis after q_d, and the RMS of both."""
    R_d = Rotation.from_rotvec(0.7 * np.array([1.0, 2.0, 2.0]) / 3.0)
    rows = [R_d * Rotation.from_rotvec([0, 0, 0.3]), Rotation.from_rotvec([0, 0.3, 0]) * R_d]
    q = [_pose((0, 0, 0), r.as_quat()) for r in rows]
    q[1][3:] = [-x for x in q[1][3:]]
    q_d = [_pose((0, 0, 0), R_d.as_quat())] * 2
    rec = _record(q, q_d)
    for kind in ("final_base_attitude_error", "max_base_attitude_error", "rms_base_attitude_error"):
        assert _metric(kind, rec) == pytest.approx(0.3, abs=1e-12)


def test_yaw_groups_measure_the_wrapped_yaw_difference():
    """se2 q = [x, y, cos, sin]: yaw 3.0 against -3.0 is 2 pi - 6 = 0.283 rad apart; the position error ignores z."""
    q = [[1.0, 1.0, math.cos(3.0), math.sin(3.0)]]
    q_d = [[1.0, 4.0, math.cos(-3.0), math.sin(-3.0)]]
    rec = _record(q, q_d, base_group="se2", nq_base=4, nv_base=3)
    assert _metric("final_base_attitude_error", rec) == pytest.approx(2 * math.pi - 6.0, abs=1e-12)
    assert _metric("final_base_position_error", rec) == pytest.approx(3.0, abs=1e-12)


def _joint_record():
    """A fixed-base arm of 3 joints: reference (1, -0.5, 0.2) from row 0; joint 1 steps from 0 over 1 (1.2 at
    most), joint 2 from 0 past -0.5 (-0.53 at most), joint 3 starts on its reference and wiggles by 0.05."""
    j1 = [0.0, 0.6, 1.2, 1.05, 1.0]
    j2 = [0.0, -0.3, -0.53, -0.49, -0.5]
    j3 = [0.2, 0.25, 0.15, 0.2, 0.2]
    q = np.array([j1, j2, j3]).T
    q_d = np.tile([1.0, -0.5, 0.2], (5, 1))
    return _record(q, q_d, base_group="fixed", nq_base=0, nv_base=0, joints=("a", "b", "c"))


@pytest.mark.parametrize("kind, expected", [
    ("final_joint_error", 0.0),
    ("max_joint_error", 1.0),  # row 0: |0 - 1|
    ("rms_joint_error", math.sqrt((1.0 + 0.4 ** 2 + 0.2 ** 2 + 0.05 ** 2 + 0.0) / 5)),
])
def test_joint_errors_take_the_largest_joint_per_row(kind, expected):
    assert _metric(kind, _joint_record()) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_overshoot_of_joints_is_the_largest_excursion_past_the_final_reference():
    assert _metric("overshoot", _joint_record()) == pytest.approx(0.2, abs=1e-12)  # joint 1: 1.2 - 1
    assert _metric("overshoot", _joint_record(), signal="joint") == pytest.approx(0.2, abs=1e-12)


def test_overshoot_of_the_base_along_the_step():
    """From (0, 0, 0) to the final reference (1, 0, 0); x goes 0.5, 1.1, 1.05, 1.0 with a sideways 0.3 at row 1
    (not past the reference along the step): overshoot 0.1 m. A later reference waypoint is what counts (the
    desired state of the last row)."""
    xs, ys = [0.0, 0.5, 1.1, 1.05, 1.0], [0.0, 0.3, 0.0, 0.0, 0.0]
    q = [_pose((x, y, 0.0)) for x, y in zip(xs, ys)]
    q_d = [_pose((0.5, 0, 0))] * 2 + [_pose((1.0, 0, 0))] * 3
    assert _metric("overshoot", _record(q, q_d)) == pytest.approx(0.1, abs=1e-12)
    no_step = _record([_pose((1.0, 0, 0))] * 3, [_pose((1.0, 0, 0))] * 3)
    assert _metric("overshoot", no_step) == 0.0


def test_overshoot_of_the_attitude_about_the_step_axis():
    """Yaw from 0 to a 0.5 rad reference, reaching 0.6 rad (its quaternion written with the other sign: the same
    rotation) then 0.5: 0.1 rad; a tilt of 0.3 rad about x at yaw 0.5 on the way is across the step, not past it."""
    angles = [Rotation.identity(), Rotation.from_rotvec([0, 0, 0.5]) * Rotation.from_rotvec([0.3, 0, 0]),
              Rotation.from_rotvec([0, 0, 0.6]), Rotation.from_rotvec([0, 0, 0.5])]
    q = [_pose((0, 0, 0), r.as_quat()) for r in angles]
    q[2][3:] = [-x for x in q[2][3:]]
    q_d = [_pose((0, 0, 0), Rotation.from_rotvec([0, 0, 0.5]).as_quat())] * 4
    assert _metric("overshoot", _record(q, q_d), signal="base_attitude") == pytest.approx(0.1, abs=1e-12)


@pytest.mark.parametrize("errors, expected", [
    (E, 0.4),  # inside 0.02 from the row at t = 0.4 (0.01, 0.015) on; t of the rows with a reference: 0.1 .. 0.5
    ([0.01, 0.01, 0.01, 0.01, 0.01], 0.1),  # never leaves: the first row's time
    ([0.01, 0.05, 0.01, 0.01, 0.03], math.inf),  # outside at the end
    ([0.01, 0.05, 0.01, 0.019, 0.02], 0.3),  # leaves once, then inside (the band's edge is inside)
])
def test_settling_time_is_when_the_error_enters_the_band_for_good(errors, expected):
    p_d = np.array([1.0, 2.0, 3.0])
    q = [_pose(p_d + 9.0)] + [_pose(p_d + e * DIRECTION) for e in errors]
    q_d = [[NAN] * 7] + [_pose(p_d)] * len(errors)
    rec = _record(q, q_d, t=np.arange(6) * 0.1)
    assert _metric("settling_time", rec, band=0.02) == pytest.approx(expected, abs=1e-12)


def test_settling_time_without_a_reference_is_nan():
    rec = _record([_pose((0, 0, 0))] * 3, [[NAN] * 7] * 3)
    assert math.isnan(_metric("settling_time", rec, band=0.02))


def test_saturation_energy_and_faults():
    rec = _record([_pose((0, 0, 0))] * 5, [_pose((0, 0, 0))] * 5, saturated=[0, 1, 1, 0, 0],
                  energy=[0.1, -0.3, 0.2, 0.0, 0.05], control_errors=2)
    assert _metric("saturation_fraction", rec) == pytest.approx(0.4, abs=1e-15)
    assert _metric("energy_residual", rec) == pytest.approx(0.3, abs=1e-15)
    assert _metric("faults", rec) == 2.0
    assert _metric("faults", rec, fault="t = 0.3 s: non-finite state (r)") == 3.0
    assert math.isnan(_metric("energy_residual", _position_record()))


def _campaign(*metrics, criteria=()):
    return Campaign(name="t", source=Path("t.yaml"), scenario="x", runs=1, seed=0, metrics=tuple(metrics),
                    criteria=tuple(criteria))


def _run(*records, fault=None):
    return HeadlessRun(scenario="x", duration=0.5, physics_rate=500.0, control_rate=100.0, wall_time=0.1,
                       fault=fault, robots={r.namespace: r for r in records})


def test_several_robots_get_their_namespace_and_a_user_function_runs_once(tmp_path, monkeypatch):
    (tmp_path / "my_metrics.py").write_text(textwrap.dedent("""\
        def rows(run):
            return float(sum(len(r.t) for r in run.robots.values()))

        def both(run):
            return {"duration": run.duration, "robots": len(run.robots)}
        """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    campaign = _campaign(MetricSpec("max_joint_error", "max_joint_error", {}),
                         MetricSpec("rows", "python", {"function": "my_metrics:rows", "name": "rows"}),
                         MetricSpec("b", "python", {"function": "my_metrics:both", "name": "b"}))
    a = dataclasses.replace(_joint_record(), namespace="uvms1")
    b = dataclasses.replace(_joint_record(), namespace="uvms2")
    got = compute_metrics(campaign, _run(a, b))
    assert got == {"uvms1/max_joint_error": 1.0, "uvms2/max_joint_error": 1.0, "rows": 10.0,
                   "b.duration": 0.5, "b.robots": 2.0}
    assert compute_metrics(campaign, _run(a)) == {"max_joint_error": 1.0, "rows": 5.0, "b.duration": 0.5,
                                                  "b.robots": 1.0}


def test_a_user_function_that_is_missing_or_returns_text_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "bad_metrics.py").write_text("def text(run):\n    return 'fine'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for func, words in (("bad_metrics:nothing", "bad_metrics has no nothing"),
                        ("no_such_module_here:f", "cannot import no_such_module_here"),
                        ("bad_metrics:text", "returned str, not a number")):
        c = _campaign(MetricSpec("m", "python", {"function": func, "name": "m"}))
        with pytest.raises(ValueError, match=words):
            compute_metrics(c, _run(_joint_record()))


def test_criteria_say_which_failed_by_how_much():
    c = _campaign(criteria=(Criterion("max_joint_error", "<", 0.2, "max_joint_error < 0.2"),
                            Criterion("settling_time", "<=", 3.0, "settling_time <= 3"),
                            Criterion("faults", "<", 1.0, "faults < 1"),
                            Criterion("b.x", ">=", 1.0, "b.x >= 1")))
    assert evaluate_criteria(c, {"max_joint_error": 0.19, "settling_time": 3.0, "faults": 0.0, "b.x": 1.0}) == []
    assert evaluate_criteria(c, {"max_joint_error": 0.31, "settling_time": math.inf, "faults": 0.0,
                                 "b.x": NAN}) == ["max_joint_error = 0.31 >= 0.2", "settling_time = inf > 3",
                                                  "b.x = nan (not computed)"]
    several = {"uvms1/max_joint_error": 0.1, "uvms2/max_joint_error": 0.25, "uvms1/settling_time": 1.0,
               "uvms2/settling_time": 1.0, "faults": 0.0}
    assert evaluate_criteria(c, several) == ["uvms2/max_joint_error = 0.25 >= 0.2", "b.x not computed"]
