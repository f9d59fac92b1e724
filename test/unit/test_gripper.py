"""The gripper through the controller (mbs_ros.cores.controller: gripper_target, with_gripper, gripper_index; the
controller parameters gripper_*): the schedule's target moving at gripper_speed against its closed form, the
command a position target with a squeeze limit on each finger joint and nothing else, the refusals naming the
parameter. The model: config/robots/bluerov2_heavy_alpha5_gripper.yaml (two prismatic fingers)."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.cores.controller import gripper_index, gripper_target, with_gripper
from mbs_ros.cores.controller_settings import ParameterError, settings_from_values
from mbs_ros.cores.parameters import table
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model import source as ms

MODEL = "config/robots/bluerov2_heavy_alpha5_gripper.yaml"
FINGERS = ("alpha_finger_l_joint", "alpha_finger_r_joint")


def _settings(**changes):
    values = {n: p.default for n, p in table("controller").items()}
    values.update(gripper_times=(0.0, 1.0, 3.0), gripper_positions=(0.02, -0.01, 0.02), gripper_speed=0.01,
                  gripper_max_effort=15.0, gripper_gain=500.0, gripper_damping=5.0)
    values.update(changes)
    return settings_from_values(values, ms.load_source("", ""))


@pytest.mark.parametrize("t, target, rate", [
    (0.0, 0.02, 0.0), (0.999, 0.02, 0.0),     # the first entry until the second time
    (2.0, 0.01, -0.01),                       # moving to -0.01 at 0.01 m/s from 1 s: 0.02 - 0.01 (2 - 1)
    (2.999, 0.02 - 0.01 * 1.999, -0.01),
    (3.5, 0.0 + 0.01 * 0.5, 0.01),            # at 3 s it had reached 0.0 (not -0.01): from there back up
    (10.0, 0.02, 0.0)])                       # reached
def test_the_target_moves_to_each_entry_at_the_speed(t, target, rate):
    got = gripper_target(_settings(), int(round(t * 1e9)))
    assert got[0] == pytest.approx(target, abs=1e-15) and got[1] == rate


def test_the_command_replaces_the_fingers_entries_only_and_clips_at_the_squeeze_limit():
    model = Model.from_yaml(MODEL)
    s = _settings(gripper_joints=FINGERS)
    iq, iv = gripper_index(s, model)
    assert [model.joint_names[j] for j in iv - 6] == list(FINGERS) and list(iq - iv) == [1, 1]
    q, v = model.neutral(), np.zeros(model.nv)
    q[iq], v[iv] = [0.015, 0.0199], [0.0, 0.001]
    tau = np.arange(model.nv, dtype=float)
    t = int(2.0e9)  # target 0.01, rate -0.01
    out = with_gripper(s, (iq, iv), tau, q, v, t)
    expected = [np.clip(500.0 * (0.01 - 0.015) + 5.0 * (-0.01 - 0.0), -15, 15),   # -2.55
                np.clip(500.0 * (0.01 - 0.0199) + 5.0 * (-0.01 - 0.001), -15, 15)]  # -5.005
    np.testing.assert_allclose(out[iv], expected, rtol=1e-15)
    keep = np.setdiff1d(np.arange(model.nv), iv)
    np.testing.assert_array_equal(out[keep], tau[keep])
    squeezed = with_gripper(s, (iq, iv), tau, q, v, int(2.9e9), target=-1.0)  # an action's target, held
    np.testing.assert_array_equal(squeezed[iv], [-15.0, -15.0])
    assert with_gripper(s, None, tau, q, v, t) is tau


@pytest.mark.parametrize("changes, message", [
    ({"gripper_positions": (0.02, 0.0)}, "gripper_positions"),
    ({"gripper_times": (0.0, 2.0, 1.0)}, "gripper_times must increase"),
    ({"gripper_times": (), "gripper_positions": (), "gripper_joints": FINGERS}, "gripper_joints needs"),
    ({"gripper_speed": 0.0}, "gripper_speed"),
    ({"gripper_max_effort": -1.0}, "gripper_max_effort")])
def test_bad_gripper_settings_are_refused_naming_the_parameter(changes, message):
    with pytest.raises(ParameterError, match=message):
        _settings(**changes)


@pytest.mark.parametrize("joints, message", [(("alpha_finger_x_joint",), "no moving joint"),
                                             (("alpha_finger_l_joint", "alpha_finger_l_joint"), "named twice")])
def test_a_gripper_joint_the_model_has_not_is_refused(joints, message):
    with pytest.raises(ParameterError, match=message):
        gripper_index(_settings(gripper_joints=joints), Model.from_yaml(MODEL))
