"""The contact metrics of campaigns (mbs_ros.campaign.metrics, issue 30): a legged base that stays up (height and
tilt on every row), its height error after a push against its reference or its rest height, its tilt; an object
lifted, dropped, carried and brought to a target. Hand-made records whose answers are worked out here (tilts built
with scipy's rotations, heights and times written down); the schema's checks of the metrics' parameters. No
headless run."""
from __future__ import annotations

import dataclasses
import math
import textwrap

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.campaign.metrics import base_tilt, robot_metric
from mbs_ros.campaign.spec import BUILTIN_METRICS, CampaignError, MetricSpec, load_campaign
from mbs_ros.headless import RobotRecord

NAN = math.nan
T = np.arange(8) * 0.1  # rows at 0, 0.1, ... 0.7 s


def _record(positions, rotations=None, q_d=None, objects=None, base_group="se3"):
    n = len(positions)
    rotations = rotations or [Rotation.identity()] * n
    q = np.array([[*p, *r.as_quat()] for p, r in zip(positions, rotations)])  # scipy: [x y z w]
    zeros = np.zeros((n, 6))
    t = T[:n]
    rec = RobotRecord(namespace="r", base_group=base_group, joint_names=(), nq_base=7, nv_base=6,
                      stamp_ns=(t * 1e9).astype(np.int64), t=t, q=q, v=zeros,
                      q_d=np.full((n, 7), NAN) if q_d is None else np.asarray(q_d, float), v_d=zeros, tau=zeros,
                      tau_applied=zeros, saturated=np.zeros(n, bool))
    return rec if objects is None else dataclasses.replace(rec, objects_q=np.asarray(objects, float))


def _metric(kind, rec, **params):
    p = dict(BUILTIN_METRICS[kind])
    p.update(params)
    return robot_metric(MetricSpec(kind, kind, p), rec)


# ------------------------------------------------------------------------------------------ legged


def test_the_tilt_is_the_angle_of_the_base_z_axis_from_the_world_z_axis_whatever_the_yaw():
    rots = Rotation.from_euler("ZYX", [[2.0, 0.0, 0.3], [0.0, 0.0, 0.0], [-1.0, 0.2, -0.1], [3.0, 1.2, 0.0]])
    q = np.hstack([np.zeros((4, 3)), rots.as_quat()])
    expected = np.arccos(rots.as_matrix()[:, 2, 2])  # R_zz = cos(tilt), from scipy's matrices
    np.testing.assert_allclose(base_tilt(q, "se3"), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(base_tilt(-q, "se3"), expected, rtol=0, atol=1e-12)  # -q: the same rotation
    assert base_tilt(q, "se2") is None


STAND = [0.30, 0.25, 0.22, 0.22, 0.22, 0.215, 0.219, 0.221]  # dropped, lands, stands, pushed at 0.5 s


@pytest.mark.parametrize("z, rot, params, up", [
    (STAND, None, {"min_height": 0.1}, 1.0),
    (STAND[:4] + [0.05] * 4, None, {"min_height": 0.1}, 0.0),  # the base down on the ground: fell
    (STAND, None, {"min_height": 0.216}, 0.0),  # 0.215 at 0.5 s is below it
    (STAND, None, {"min_height": 0.216, "after": 0.6}, 1.0),  # ... but before the rows counted
    (STAND, ("X", 0.45), {"min_height": 0.1}, 1.0),  # tilted 0.45 rad <= 0.5
    (STAND, ("X", 0.55), {"min_height": 0.1}, 0.0),  # 0.55 > 0.5
    (STAND, ("X", 0.55), {"min_height": 0.1, "max_tilt": 0.6}, 1.0),
    (STAND, ("Z", 3.0), {"min_height": 0.1}, 1.0),  # a yaw is no tilt
])
def test_stays_up_and_fell(z, rot, params, up):
    rotations = None
    if rot is not None:  # the rotation on row 5 only
        rotations = [Rotation.identity()] * 5 + [Rotation.from_euler(rot[0], rot[1])] + [Rotation.identity()] * 2
    rec = _record([[0.0, 0.0, h] for h in z], rotations)
    assert _metric("stays_up", rec, **params) == up
    assert _metric("fell", rec, **params) == 1.0 - up


def test_the_base_height_error_against_the_rest_height_and_the_reference():
    rec = _record([[0.0, 0.0, h] for h in STAND], q_d=[[NAN] * 7] + [[0, 0, 0.2225, 0, 0, 0, 1]] * 7)
    # rest: the height at the last row before 0.5 s, 0.22; after: 0.215, 0.219, 0.221
    assert _metric("max_base_height_error", rec, after=0.5, reference="rest") == pytest.approx(0.005, abs=1e-15)
    assert _metric("final_base_height_error", rec, after=0.5, reference="rest") == pytest.approx(0.001, abs=1e-15)
    # against the reference 0.2225 (from row 1): rows from 0.5 s -> 0.0075, 0.0035, 0.0015
    assert _metric("max_base_height_error", rec, after=0.5) == pytest.approx(0.0075, abs=1e-15)
    assert _metric("final_base_height_error", rec, after=0.5) == pytest.approx(0.0015, abs=1e-15)
    # the whole run against the reference: 0.25 - 0.2225 on row 1 (row 0, 0.3 m high, has no reference)
    assert _metric("max_base_height_error", rec) == pytest.approx(0.0275, abs=1e-15)
    assert math.isnan(_metric("max_base_height_error", rec, reference="rest"))  # no row before 0
    assert math.isnan(_metric("max_base_height_error", rec, after=5.0))  # no row after


def test_the_largest_tilt_after_a_time():
    rotations = [Rotation.from_euler("X", a) for a in (0.3, 0.0, 0.0, 0.0, 0.0, 0.1, -0.2, 0.05)]
    rec = _record([[0.0, 0.0, 0.22]] * 8, rotations)
    assert _metric("max_base_tilt", rec) == pytest.approx(0.3, abs=1e-12)
    assert _metric("max_base_tilt", rec, after=0.45) == pytest.approx(0.2, abs=1e-12)


# ------------------------------------------------------------------------------------------ grasping

# object 1 (object 0 stays put): rests at z 0.05 at (1, 0), lifted to 0.35 by 0.3 s, carried 0.5 m along y by
# 0.5 s (at (1, 0.5, 0.35)), then falls back to the seabed at 0.6 s
CARRY = [[1.0, 0.0, 0.05], [1.0, 0.0, 0.05], [1.0, 0.0, 0.2], [1.0, 0.0, 0.35], [1.0, 0.3, 0.35],
         [1.0, 0.5, 0.35], [1.0, 0.5, 0.055], [1.0, 0.5, 0.05]]


def _objects(carry):
    still = [[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0]] * len(carry)
    return np.stack([np.array(still), np.array([[*p, 0.0, 0.0, 0.0, 1.0] for p in carry])], axis=1)


def _grasp_record(carry=CARRY):
    return _record([[0.0, 0.0, -1.0]] * len(carry), objects=_objects(carry))


def test_object_lifted_carried_and_its_time_to_the_target():
    rec = _grasp_record()
    assert _metric("object_lifted", rec, object=1) == pytest.approx(0.30, abs=1e-15)
    assert _metric("object_lifted", rec) == 0.0  # object 0 never rose
    assert _metric("carried_distance", rec, object=1) == pytest.approx(0.5, abs=1e-15)
    assert _metric("time_to_carry", rec, object=1, target=[1.0, 0.5, 0.35]) == pytest.approx(0.5)
    assert _metric("time_to_carry", rec, object=1, target=[1.0, 0.3, 0.35], tolerance=0.01) == pytest.approx(0.4)
    assert _metric("time_to_carry", rec, object=1, target=[1.0, 2.0, 0.35]) == math.inf
    assert _metric("grasp_success", rec, object=1) == 1.0
    assert _metric("grasp_success", rec, object=1, lift=0.31) == 0.0
    assert _metric("grasp_success", rec, object=0) == 0.0


def test_object_dropped_back_near_its_start_height_before_the_set_down():
    rec = _grasp_record()
    assert _metric("object_dropped", rec, object=1) == 1.0  # 0.005 m above its start at 0.6 s: within 0.01
    assert _metric("object_dropped", rec, object=1, near=0.004) == 1.0  # 0.7 s: back at 0.05
    assert _metric("object_dropped", rec, object=1, before=0.6) == 0.0  # a set-down from 0.6 s on
    assert _metric("object_dropped", rec, object=1, before=0.65) == 1.0
    assert _metric("object_dropped", rec, object=0) == 0.0  # never lifted: not dropped
    held = _grasp_record(CARRY[:6] + [[1.0, 0.5, 0.35]] * 2)
    assert _metric("object_dropped", held, object=1) == 0.0


def test_object_tilt_is_its_tipping_from_the_start_attitude_a_turn_about_the_vertical_not_counted():
    """A bar lying along x (its axis its z: pitched 90 degrees at the start) pivots about the world's y by 0.2,
    then 1.2 rad (one end left down: 69 degrees), back to level and turns 1.0 rad about the vertical; object 0
    only turns about the vertical. Tilts from scipy's matrices: the angle between e_z and R_k R_0^T e_z."""
    start = Rotation.from_euler("Y", math.pi / 2)
    turns = [Rotation.identity(), Rotation.from_euler("Y", 0.2), Rotation.from_euler("Y", -1.2),
             Rotation.from_euler("Y", -1.1), Rotation.identity(), Rotation.from_euler("Z", 1.0),
             Rotation.from_euler("ZX", [1.0, 0.05]), Rotation.from_euler("Z", -0.5)]
    bar = [(r * start).as_quat() for r in turns]
    still = [Rotation.from_euler("Z", 0.3 * i).as_quat() for i in range(8)]
    objects = np.stack([np.array([[0.0, 0.0, 0.1, *qq] for qq in still]),
                        np.array([[1.0, 0.0, 0.05, *qq] for qq in bar])], axis=1)
    rec = _record([[0.0, 0.0, -1.0]] * 8, objects=objects)
    tipped = [np.arccos(np.clip((r * start * start.inv()).as_matrix()[2, 2], -1, 1)) for r in turns]
    assert _metric("object_tilt", rec, object=1) == pytest.approx(max(tipped), abs=1e-12)  # 1.2
    assert _metric("object_tilt", rec, object=1, after=0.35) == pytest.approx(0.05, abs=1e-12)
    assert _metric("object_tilt", rec, object=0) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(_metric("object_tilt", rec, object=1, after=1.0))


def test_object_tilt_about_an_axis_counts_its_elevation_not_a_roll_about_it():
    """A handle (its axis its z) lying along x rolls 1.0 rad about its own axis in the jaws (its shape unchanged:
    no tilt about the axis, 1.0 rad without it), then pitches 0.3 rad about the world's y while rolled, then
    turns about the vertical; a second handle starts raised 0.2 rad and only turns about the vertical and rolls.
    Elevations from scipy's matrices: asin of (R a)_z."""
    start = Rotation.from_euler("Y", math.pi / 2)
    roll = Rotation.from_rotvec([1.0, 0.0, 0.0])  # about the world's x: the handle's axis after start
    turns = [Rotation.identity(), roll, Rotation.from_euler("Y", -0.3) * roll,
             Rotation.from_euler("Z", 0.7) * Rotation.from_euler("Y", -0.3) * roll, roll]
    raised = Rotation.from_euler("Y", math.pi / 2 - 0.2)
    other = [Rotation.identity(), Rotation.from_euler("Z", 0.5), Rotation.from_euler("Z", -1.0),
             Rotation.from_euler("Z", 2.0), Rotation.identity()]
    first = [(r * start).as_quat() for r in turns]
    second = [(r * raised * Rotation.from_euler("Z", 0.4 * i)).as_quat() for i, r in enumerate(other)]
    objects = np.stack([np.array([[0.0, 0.0, 0.1, *qq] for qq in first]),
                        np.array([[1.0, 0.0, 0.05, *qq] for qq in second])], axis=1)
    rec = _record([[0.0, 0.0, -1.0]] * 5, objects=objects)
    elevation = [math.asin((r * start).as_matrix()[2, 2]) for r in turns]
    assert elevation[1] == pytest.approx(0.0, abs=1e-12) and abs(elevation[2]) == pytest.approx(0.3, abs=1e-12)
    assert _metric("object_tilt", rec, axis=[0, 0, 1]) == pytest.approx(max(map(abs, elevation)), abs=1e-12)
    assert _metric("object_tilt", rec, axis=[0, 0, 2.5]) == pytest.approx(0.3, abs=1e-12)  # a direction: scaled
    assert _metric("object_tilt", rec, axis=[0, 0, 1], after=0.35) == pytest.approx(0.0, abs=1e-12)  # rolled only
    assert _metric("object_tilt", rec, after=0.35) == pytest.approx(1.0, abs=1e-12)  # no axis: the roll is a tilt
    whole = [np.arccos(np.clip(r.as_matrix()[2, 2], -1, 1)) for r in turns]  # R_k R_0^T = r
    assert _metric("object_tilt", rec) == pytest.approx(max(whole), abs=1e-12)
    assert _metric("object_tilt", rec, object=1, axis=[0, 0, 1]) == pytest.approx(0.0, abs=1e-12)
    # the same handle's cross direction (its x) dips with the roll: 1.0 rad
    cross = [math.asin((r * start).as_matrix()[2, 0]) for r in turns]
    assert _metric("object_tilt", rec, axis=[1, 0, 0]) == pytest.approx(
        max(abs(c - cross[0]) for c in cross), abs=1e-12)


@pytest.mark.parametrize("kind, params", [("object_lifted", {"object": 2}), ("carried_distance", {}),
                                          ("time_to_carry", {"target": [0, 0, 0]}), ("object_dropped", {}),
                                          ("grasp_success", {}), ("object_tilt", {})])
def test_object_metrics_without_the_object_are_nan(kind, params):
    no_objects = _record([[0.0, 0.0, 0.2]] * 3)
    assert math.isnan(_metric(kind, no_objects, **params))
    if "object" in params:
        assert math.isnan(_metric(kind, _grasp_record(), **params))


def test_legged_metrics_of_a_base_without_attitude_are_nan():
    rec = _record([[0.0, 0.0, 0.2]] * 3, base_group="se2")
    rec = dataclasses.replace(rec, q=np.array([[0.0, 0.0, 1.0, 0.0]] * 3), nq_base=4)
    assert math.isnan(_metric("stays_up", rec, min_height=0.1))
    assert math.isnan(_metric("max_base_tilt", rec))


# ------------------------------------------------------------------------------------------ the schema


def _load(tmp_path, metrics):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(f"""\
        scenario: vehicle_manipulator
        runs: 2
        seed: 1
        metrics: {metrics}
        """), encoding="utf-8")
    return load_campaign(path)


def test_contact_metric_parameters_are_read_with_their_defaults(tmp_path):
    c = _load(tmp_path, "[{stays_up: {min_height: 0.12}}, {time_to_carry: {target: [1, 0.5, 0.3], object: 1}},"
                        " {max_base_height_error: {after: 1.5, reference: rest}}, object_dropped, {object_tilt: {axis: [0, 0, 1]}}]")
    params = {m.name: dict(m.params) for m in c.metrics}
    assert params["stays_up"] == {"min_height": 0.12, "max_tilt": 0.5, "after": 0.0}
    assert params["time_to_carry"] == {"target": (1.0, 0.5, 0.3), "object": 1, "tolerance": 0.05}
    assert params["max_base_height_error"] == {"after": 1.5, "reference": "rest"}
    assert params["object_dropped"] == {"object": 0, "lift": 0.02, "near": 0.01, "before": None}
    assert params["object_tilt"] == {"axis": (0.0, 0.0, 1.0), "object": 0, "after": 0.0}


@pytest.mark.parametrize("metrics, key, reason", [
    ("[stays_up]", "metrics[0].stays_up.min_height", "missing"),
    ("[{fell: {max_tilt: 0.3}}]", "metrics[0].fell.min_height", "missing"),
    ("[time_to_carry]", "metrics[0].time_to_carry.target", "missing"),
    ("[{time_to_carry: {target: [1, 2]}}]", "metrics[0].time_to_carry.target", "must have 3 entries"),
    ("[{object_lifted: {object: -1}}]", "metrics[0].object_lifted.object", "must be >= 0"),
    ("[{object_lifted: {object: 0.5}}]", "metrics[0].object_lifted.object", "whole number"),
    ("[{max_base_height_error: {reference: nominal}}]", "metrics[0].max_base_height_error.reference",
     "reference, rest"),
    ("[{grasp_success: {lift: 0}}]", "metrics[0].grasp_success.lift", "must be > 0"),
    ("[{max_base_tilt: {after: -1}}]", "metrics[0].max_base_tilt.after", "must be >= 0"),
    ("[{carried_distance: {colour: red}}]", "metrics[0]", "colour: unknown key"),
    ("[{object_tilt: {axis: [0, 0, 0]}}]", "metrics[0].object_tilt.axis", "must not be zero"),
    ("[{object_tilt: {axis: [0, 1]}}]", "metrics[0].object_tilt.axis", "must have 3 entries"),
])
def test_bad_contact_metric_parameters_name_the_key(tmp_path, metrics, key, reason):
    with pytest.raises(CampaignError) as e:
        _load(tmp_path, metrics)
    assert e.value.key.startswith(key) and reason in str(e.value)
