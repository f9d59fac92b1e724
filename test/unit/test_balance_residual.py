"""The energy balance residual a headless run records each period (:func:`mbs_ros.cores.dynamics.
balance_residual`, from the stored energies alone) is the ``balance_residual`` of the dynamics node's energy report
(:func:`~mbs_ros.cores.dynamics.energy_report`, stored energies and ports' powers) to the last bit, on a model
with a fluid (buoyancy, added mass, damping, thrusters) and a current, and on one with joint springs; the stored
energies sum to the kinetic plus potential energy (:meth:`Model.kinetic_energy`, :meth:`Model.potential_energy`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.model.passive import energy_storages
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.cores.dynamics import balance_residual, energy_report
from test_springs import three_joints

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"


def _rov_arm():
    """BlueROV2 Heavy with its Alpha 5 arm: buoyancy, added mass, hydrodynamic damping, 8 thrusters."""
    return Model.from_yaml(ROBOTS / "bluerov2_heavy_alpha5.yaml")


def _driven(model, seed):
    """A simulator pushed around for 40 steps by random commands (wrench, efforts, thrusts its model takes)."""
    rng = np.random.default_rng(seed)
    q0 = model.neutral()
    q0[model.nq - len(model.joint_names):] += rng.uniform(-0.5, 0.5, len(model.joint_names))
    sim = Simulator(model, q0, 0.2 * rng.normal(size=model.nv), 1e-3)
    if model.group is not None:
        sim.set_current([0.3, -0.1, 0.05])
    for _ in range(4):
        if model.group is not None:
            sim.set_wrench(20.0 * rng.normal(size=6))
        if sim.nt:
            sim.set_thrusts(5.0 * rng.normal(size=sim.nt))
        sim.set_joint_efforts(0.05 * rng.normal(size=sim.nj))
        sim.advance(10)
    assert sim.fault is None
    return sim


@pytest.mark.parametrize("make", [_rov_arm, three_joints], ids=["rov_arm", "springs"])
def test_the_recorded_residual_is_the_energy_reports_to_the_bit(make):
    model = make()
    for seed in range(3):
        sim = _driven(model, seed)
        report = energy_report(sim, 293.15)
        assert balance_residual(sim) == report["balance_residual"]
        assert energy_storages(model, sim.q, sim.v) == report["storages"]
        assert report["balance_residual"] != 0.0  # RK4 leaves a residual: the comparison is not 0 == 0


@pytest.mark.parametrize("make", [_rov_arm, three_joints], ids=["rov_arm", "springs"])
def test_the_stored_energies_sum_to_kinetic_plus_potential(make):
    model = make()
    sim = _driven(model, 7)
    total = sum(energy_storages(model, sim.q, sim.v).values())
    expected = model.kinetic_energy(sim.q, sim.v) + model.potential_energy(sim.q)
    assert total == pytest.approx(expected, rel=1e-12, abs=1e-12)
