"""The simulation loop without ROS (mbs_ros.cores.loop.SimulationLoop), which the dynamics node and the
headless run both advance through: where it stops (the caller's grids, pause_at, the sensors' samples and delayed
readings, the end), that readings are handed over at their step before the caller sees it, that stopping changes no
state, and that a fault or a missing command ends it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation.simulator import Simulator, WrenchCommand
from mbs_ros.cores.loop import SimulationLoop, crossed, on_grid

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(ROBOTS / "uvms_6dof.yaml")


def sim_of(model, **kw):
    q0 = model.neutral()
    q0[model.nq - 6:] = np.linspace(-0.5, 0.5, 6)
    return Simulator(model, q0, np.zeros(model.nv), 1e-3, **kw)


class Suite:
    """A sensor suite stand-in: one sensor sampling every ``every`` steps, each reading due ``delay`` steps later."""

    def __init__(self, every, delay):
        self.every, self.delay = every, delay
        self.sampled, self.queue = [], []

    def next_stop(self, k):
        nxt = (k // self.every + 1) * self.every
        return min([nxt] + [max(k + 1, due) for due, _k in self.queue])

    def sample(self, sim):
        k = sim.k
        if k % self.every == 0 and k not in self.sampled:
            self.sampled.append(k)
            self.queue.append((k + self.delay, k))

    def due(self, k):
        out = [r for r in self.queue if r[0] <= k]
        self.queue = [r for r in self.queue if r[0] > k]
        return out


def test_it_stops_on_each_grid_at_pause_at_and_at_the_end(uvms):
    loop = SimulationLoop(sim_of(uvms))
    stops = list(loop.stops(25, lambda: (10, 4), pause_k=7))
    assert stops == [4, 7, 8, 10, 12, 16, 20, 24, 25]
    assert loop.run(5) == 5 and loop.sim.k == 30  # no grid, no sensors: one stretch
    assert on_grid(20, 10) and not on_grid(25, 10) and not on_grid(20, 0)
    assert crossed(9, 11, 10) and not crossed(10, 19, 10) and not crossed(0, 50, 0)


def test_readings_come_at_their_step_before_the_caller_sees_it(uvms):
    got = []
    suite = Suite(every=3, delay=2)
    loop = SimulationLoop(sim_of(uvms), suite, on_reading=lambda r: got.append((loop.sim.k, r)))
    seen = []
    for k in loop.stops(12):
        seen.append((k, list(got)))
    assert suite.sampled == [0, 3, 6, 9, 12]  # the start state too
    assert [k for k, _ in seen] == [2, 3, 5, 6, 8, 9, 11, 12]
    assert got == [(2, (2, 0)), (5, (5, 3)), (8, (8, 6)), (11, (11, 9))]
    for k, before in seen:  # by each stop, every reading due at it was handed over
        assert all(due <= k for _at, (due, _k) in before) and len(before) == (k + 1) // 3


def test_stopping_changes_no_state(uvms):
    """The state after the loop's stretches is the state of one advance, bit for bit."""
    one, stopped = sim_of(uvms), sim_of(uvms)
    for sim in (one, stopped):
        sim.set_wrench(WrenchCommand(np.array([3.0, 0.0, -1.0, 0.2, 0.0, 0.1])))
        sim.set_joint_efforts(np.linspace(-2.0, 2.0, 6))
    one.advance(40)
    assert SimulationLoop(stopped, Suite(3, 5)).run(40, grids=lambda: (7,), pause_k=13) == 40
    assert np.array_equal(one.q, stopped.q) and np.array_equal(one.v, stopped.v) and one.work == stopped.work


def test_a_period_runs_only_with_its_commands_and_a_fault_ends_it(uvms):
    sim = sim_of(uvms, lockstep_steps=4, joint_limits=False)
    loop = SimulationLoop(sim)
    assert list(loop.period()) == [] and sim.k == 0  # nothing submitted
    sim.submit("wrench", WrenchCommand(np.zeros(6)))
    sim.submit("joints", np.zeros(6))
    assert list(loop.period()) == [4]
    for _ in range(200):  # commands far beyond anything it holds: a runaway halts it within a period
        sim.submit("wrench", WrenchCommand(np.full(6, 1e9)))
        sim.submit("joints", np.full(6, 1e9))
        stops = list(loop.period(lambda: (1,)))
        if sim.fault is not None:
            break
    assert sim.fault is not None
    # every good step of the period was handed over (the state kept is the last one), and the period ended there
    assert len(stops) < 4 and stops == list(range(sim.k - len(stops) + 1, sim.k + 1))
    assert list(loop.stops(10)) == []  # halted: no step
