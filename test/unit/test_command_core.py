"""The dynamics node's command intake without ROS (mbs_ros.cores.commands.CommandIntake), which the node and
the headless run both call: each check gives its kind and reason, an accepted command the value the simulator
takes; lockstep answers to another period are told apart (not counted)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation.simulator import Simulator, WrenchCommand
from mbs_ros.cores.commands import Accepted, CommandIntake, Rejection

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
T = 30_000_000  # the current state's stamp: 30 ms (k = 30 at 1 kHz)


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(ROBOTS / "uvms_6dof.yaml")


def intake(model, lockstep=True):
    sim = Simulator(model, model.neutral(), np.zeros(model.nv), 1e-3, lockstep_steps=10 if lockstep else 0)
    sim.advance(30)
    return CommandIntake(sim, lockstep=lockstep, body_frames={"", "base_link"}, world_frames={"world"},
                         base_frame="uvms/base_link", world_frame="world")


def kind(result):
    assert isinstance(result, Rejection), result
    return result.kind


def test_a_wrench_is_taken_in_the_frame_it_names(uvms):
    c = intake(uvms)
    W = np.array([1.0, -2.0, 3.0, 0.1, 0.2, -0.3])
    body = c.wrench(W, "base_link", 0, T)
    assert isinstance(body, Accepted) and body.channel == "wrench" and isinstance(body.value, WrenchCommand)
    assert body.value.frame == "body" and body.value.W.tolist() == W.tolist() and not np.any(body.dropped)
    world = c.wrench(W, "world", 0, T)
    assert isinstance(world, Accepted) and world.value.frame == "world"


@pytest.mark.parametrize("frame, stamp, W, expected", [
    ("odd", (0, T), [0.0] * 6, "frame"),
    ("", (-1, 0), [0.0] * 6, "stamp"),
    ("", (0, 1_000_000_000), [0.0] * 6, "stamp"),
    ("", (0, T), [0.0, np.nan, 0.0, 0.0, 0.0, 0.0], "nonfinite"),
    ("", (0, T - 10_000_000), [0.0] * 6, "stale"),
    ("", (0, T + 10_000_000), [0.0] * 6, "late"),
])
def test_a_bad_wrench_is_rejected_with_its_kind(uvms, frame, stamp, W, expected):
    result = intake(uvms).wrench(np.array(W), frame, *stamp)
    assert kind(result) == expected, result.reason
    assert result.counted == (expected not in ("stale", "late"))
    assert result.period_checked == (expected not in ("stamp",))


def test_named_efforts_go_to_their_joints_and_the_rest_is_zero(uvms):
    c = intake(uvms)
    names = list(uvms.joint_names)
    result = c.named("joint_command", [names[2], names[0]], [5.0, -1.5], 0, T)
    assert isinstance(result, Accepted) and result.channel == "joints"
    expected = np.zeros(len(names))
    expected[2], expected[0] = 5.0, -1.5
    assert result.value.tolist() == expected.tolist()


@pytest.mark.parametrize("names, efforts, expected", [
    (["nope"], [1.0], "names"),
    ([], [], "names"),
    (["J"], [1.0, 2.0], "names"),
    (["J", "J"], [1.0, 2.0], "names"),
    (["J"], [np.inf], "nonfinite"),
])
def test_bad_named_efforts_are_rejected(uvms, names, efforts, expected):
    j = uvms.joint_names[0]
    names = [j if n == "J" else n for n in names]
    result = intake(uvms).named("joint_command", names, efforts, 0, T)
    assert kind(result) == expected, result.reason


def test_unstamped_values_outside_lockstep(uvms):
    c = intake(uvms, lockstep=False)
    nj = len(uvms.joint_names)
    ok = c.values("cmd_joint_effort", np.arange(nj, dtype=float))
    assert isinstance(ok, Accepted) and ok.value.tolist() == list(range(nj))
    assert kind(c.values("cmd_joint_effort", np.zeros(nj + 1))) == "length"
    assert kind(c.values("cmd_joint_effort", np.full(nj, np.nan))) == "nonfinite"
    # outside lockstep a stamp is not held against the period
    assert isinstance(c.wrench(np.zeros(6), "", 0, 5), Accepted)


def test_a_fixed_base_takes_no_wrench():
    arm = Model.from_yaml(ROBOTS / "arm_6dof_fixed.yaml")
    assert arm.group is None
    assert kind(intake(arm).wrench(np.zeros(6), "", 0, T)) == "fixed"


def test_a_thruster_driven_base_takes_thrusts_not_a_wrench_in_lockstep():
    rov = Model.from_yaml(ROBOTS / "bluerov2_heavy.yaml")
    c = intake(rov)
    refused = c.wrench(np.zeros(6), "", 0, T)
    assert kind(refused) == "lockstep" and "thruster_command" in refused.reason
    thrust = c.named("thruster_command", ["t3"], [2.5], 0, T)
    assert isinstance(thrust, Accepted) and thrust.channel == "thrusters"
    assert thrust.value.tolist() == [0.0, 0.0, 2.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert c.unknown("thrusters", ["t1", "t9"]) == ["t9"]
