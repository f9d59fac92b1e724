"""estimator_node's ROS-free part (mbs_ros.cores.estimator_settings): the lockstep schedule makes the estimates
independent of the order in which the sensors' messages arrive, and the prior's covariance is the filter's
right-invariant error covariance of the sigmas asked for.

- order: the same measurements (a vehicle at rest, noisy IMU, DVL with its beams, depth, compass; fixed seed)
  handed to two Fusion objects, one in measurement order, one shuffled within each control period (as separate
  topics may deliver them), give the same estimates, bit for bit, at every control step;
- prior: the filter's own map to ROS's pose covariance (mbs_ros.estimation.inekf.InvariantEKF.pose_covariance_ros,
  written independently) of prior_covariance(P) gives back the position and attitude blocks of P, for a vehicle far
  from the world origin (where a covariance diagonal in the invariant error would not).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics.model import source as ms
from mbs_ros.cores.estimator_settings import Fusion, build_setup, prior_covariance, settings_from_values
from mbs_ros.cores.parameters import table

ROOT = Path(__file__).resolve().parents[2]
ROV = ROOT / "config" / "robots" / "bluerov2_heavy.yaml"
SENSORS = """\
environment: {fluid_density: 1025.0, seabed_depth: 20.0}
sensors:
  - {name: imu, type: imu, link: base_link, rate: 100}
  - {name: dvl, type: dvl, link: base_link, pose: {xyz: [-0.1, 0.0, -0.15]}, rate: 10}
  - {name: depth, type: pressure, link: base_link, pose: {xyz: [0.2, 0.0, 0.1]}, rate: 20}
  - {name: compass, type: magnetometer, link: base_link, rate: 20}
"""
MS = 1_000_000


def setup(tmp_path):
    path = tmp_path / "sensors.yaml"
    path.write_text(SENSORS)
    source = ms.load_source("", str(ROV))
    values = {n: p.default for n, p in table("estimator").items()}
    values.update(ms.model_defaults(source))
    values.update(model_file=str(ROV), sensors=str(path), physics_rate=500.0, imu="imu", dvl="dvl", depth="depth",
                  compass="compass", lockstep=True, control_rate=50.0, initial_position=(0.0, 0.0, -5.0))
    return build_setup(settings_from_values(values, source), source)


def measurements(seconds=2.0, seed=3):
    """(role, stamp, payload) of a vehicle at rest 5 m down, on each sensor's grid, with noise."""
    rng = np.random.default_rng(seed)
    B = np.array([0.0, 2.0e-5, -4.5e-5])
    out = []
    for t in range(0, int(seconds * 1000) + 1, 10):  # ms
        out.append(("imu", t * MS, (rng.normal(0, 0.01, 3), np.array([0, 0, 9.81]) + rng.normal(0, 0.05, 3))))
        if t % 100 == 0:
            out.append(("dvl", t * MS, (rng.normal(0, 0.01, 3), np.eye(3) * 1e-4)))
            out += [("dvl", t * MS, ("beam", i, True)) for i in range(4)]
        if t % 50 == 0:
            out.append(("depth", t * MS, (4.9 + rng.normal(0, 0.002), 4e-6)))
            out.append(("compass", t * MS, (B + rng.normal(0, 1e-7, 3), np.eye(3) * 1e-14)))
    return out


def run(fusion, items):
    outs = {}
    for role, stamp, payload in items:
        for o in fusion.add(role, stamp, payload):
            outs[o.stamp_ns] = np.concatenate([o.p, o.R.ravel(), o.V, o.pose_cov.ravel()]).tobytes()
    return outs


def test_lockstep_estimates_do_not_depend_on_the_arrival_order(tmp_path):
    s = setup(tmp_path)
    items = measurements()
    in_order = run(Fusion(s, 0), items)
    # shuffled within each control period (20 ms): what separate topics may do; each sensor's own order is kept
    period = 20 * MS
    blocks = {}
    for it in items:
        blocks.setdefault(-(-it[1] // period), []).append(it)
    rnd = random.Random(7)
    shuffled = []
    for k in sorted(blocks):
        block = blocks[k]
        roles = {}
        for it in block:
            roles.setdefault(it[0], []).append(it)
        queues = list(roles.values())
        while queues:  # interleave the roles at random, each in its own order
            q = rnd.choice(queues)
            shuffled.append(q.pop(0))
            queues = [x for x in queues if x]
    assert shuffled != items
    other = run(Fusion(s, 0), shuffled)
    assert set(in_order) == set(other) == set(range(20 * MS, 2000 * MS + 1, period))
    differ = [t for t in sorted(in_order) if in_order[t] != other[t]]
    assert not differ, f"{len(differ)} estimates differ, first at {differ[0] * 1e-9:.2f} s"


@pytest.mark.parametrize("p", [(0.0, 0.0, -5.0), (30.0, -12.0, -80.0)])
def test_prior_covariance_is_the_asked_sigmas_in_ros_layout(p):
    from mbs_ros.estimation.inekf import ImuNoise, InvariantEKF

    sig = np.array([0.02, 0.03, 0.1, 0.05, 0.05, 0.05, 0.1, 0.2, 0.3, 1e-3, 1e-3, 1e-3, 0.02, 0.02, 0.02])
    v = np.array([0.3, -0.2, 0.1])
    P = prior_covariance(np.diag(sig ** 2), v, np.array(p))
    ekf = InvariantEKF(np.eye(3), v, np.array(p), P, ImuNoise(1e-3, 1e-2, 1e-4, 1e-3))
    C = ekf.pose_covariance_ros()
    expected = np.diag(np.concatenate([sig[6:9], sig[0:3]]) ** 2)
    # C's zeros and small variances come from cancelling the p-coupling terms of P (|P| up to 11.6 at p far from
    # the origin; rounding ~1e-15 there): atol is rtol of that scale, not a bare 1e-15
    assert np.allclose(C, expected, atol=1e-12 * np.abs(P).max(), rtol=1e-12), np.round(C, 6)
