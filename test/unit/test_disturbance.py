"""The dynamics node's disturbance (timed world wrenches on a floating base: Simulator.set_disturbances, the
``disturbance`` parameter) against closed forms: a free body in zero gravity pushed by F for T picks up F T / m,
moves F T²/(2m) during the push and straight on after, and the commands' work is its kinetic energy; the push
starts again after a reset; bad groups are refused naming the parameter."""
from __future__ import annotations

import numpy as np
import parameter_extremes as extremes
import pytest

from mbs_ros.cores.dynamics import disturbances
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.dynamics.simulation.simulator import Simulator

M, DT = 2.0, 1e-3


def _body():
    model = Model.rigid_body("se3", M, np.eye(3) * 0.02, gravity=(0.0, 0.0, 0.0))
    yaw = 0.6  # the body turned: the push is in world axes whatever the body's
    q0 = np.array([0.0, 0.0, 0.0, 0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)])
    return model, Simulator(model, q0, np.zeros(6), DT)


@pytest.mark.parametrize("chunks", [[400], [1] * 60 + [340], [37, 363]])
def test_a_push_on_a_free_body_is_the_closed_form(chunks):
    model, sim = _body()
    F, start, steps = 3.0, 50, 100  # 3 N along world y from t = 0.05 s for 0.1 s
    sim.set_disturbances(disturbances([start * DT, steps * DT, 0.0, F, 0.0, 0.0, 0.0, 0.0], model, DT))
    for n in chunks:
        assert sim.advance(n) == n
    T = steps * DT
    v = F * T / M
    y = F * T * T / (2 * M) + v * (400 - start - steps) * DT
    assert sim.q[:3] == pytest.approx([0.0, y, 0.0], abs=1e-12)
    R = model.base_rotation(sim.q)
    assert R @ sim.v[:3] == pytest.approx([0.0, v, 0.0], abs=1e-12)
    assert sim.work == pytest.approx(0.5 * M * v * v, rel=1e-9)


def test_before_the_push_nothing_moves_and_a_reset_starts_it_again():
    model, sim = _body()
    sim.set_disturbances(disturbances([0.05, 0.1, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0], model, DT))
    sim.advance(50)
    assert not sim.v.any()
    sim.advance(350)
    moved = sim.q.copy()
    sim.reset()
    sim.advance(50)
    assert not sim.v.any()
    sim.advance(350)
    assert sim.q == pytest.approx(moved, abs=1e-15)


@pytest.mark.parametrize("values, match", [
    ([0.0, 0.1, 1.0], "groups of 8"),
    ([-0.1, 0.1, 1.0, 0, 0, 0, 0, 0], r"disturbance\[0\]: start"),
    ([0.0, 0.0, 1.0, 0, 0, 0, 0, 0], r"disturbance\[0\]: .*duration"),
    ([0.0, 0.1, 0, 0, 0, 0, 0, 0, 1.0, 0.5e-3, 1.0, 0, 0, 0, 0, 0], r"disturbance\[1\]: .*duration"),
    ([0.0, 0.1, float("nan"), 0, 0, 0, 0, 0], r"disturbance\[0\]: every number must be finite"),
    ([0.0, 0.1, 3e6, 0, 0, 0, 0, 0], r"disturbance\[0\]: each wrench component"),
])
def test_bad_disturbances_are_refused_naming_the_parameter(values, match):
    model, _ = _body()
    with pytest.raises(ParameterError, match=match):
        disturbances(values, model, DT)


def test_a_fixed_base_refuses_a_disturbance():
    model = Model.rigid_body("se2", M, np.eye(3) * 0.02, gravity=(0.0, 0.0, 0.0))
    with pytest.raises(ParameterError, match="disturbance: needs a floating se3 base"):
        disturbances([0.0, 0.1, 1.0, 0, 0, 0, 0, 0], model, DT)


@pytest.mark.parametrize("name, value, accepted", extremes.cases([extremes.DISTURBANCE]))
def test_disturbance_at_its_extremes(name, value, accepted):
    """The extremes table's disturbance rows (test/parameter_extremes.py, for a 1 kg se3 body at 1000 Hz, as the
    ROS start-up test runs them): the lowest and highest groups taken, one step at least, a value just outside
    refused naming the parameter."""
    model = Model.rigid_body("se3", 1.0, np.eye(3) * 0.02)
    if accepted:
        pushes = disturbances(value, model, 1e-3)
        assert len(pushes) == len(value) // 8 and all(end - first >= 1 for first, end, _w in pushes)
    else:
        with pytest.raises(ParameterError, match=name):
            disturbances(value, model, 1e-3)
