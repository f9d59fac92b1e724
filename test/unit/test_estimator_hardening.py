"""Issue 31 (hardening of the estimator's inputs), ROS-free: the work of one IMU message is bounded (a rate no IMU
reports is refused, a propagation takes at most MAX_SUBSTEPS sub-steps and stays exact for the held inputs, a call of
the node's Fusion at most its work budget); a stamp far ahead of the clock is refused; a covariance that is not
positive semi-definite is refused at the boundary and a measurement the filter cannot take is counted; the depth
sensor's pressure is accepted down to the full ocean depth. Work is counted in propagation sub-steps, never timed.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.cores import estimator as core
from mbs_ros.cores.estimator_settings import MAX_WORK_PER_CALL, Fusion, Rejected, build_setup, settings_from_values
from mbs_ros.cores.parameters import table
from mbs_ros.dynamics.model import source as ms
from mbs_ros.estimation import inekf
from mbs_ros.estimation.inekf import MAX_SUBSTEPS, ImuNoise, InvariantEKF

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
NS = 1_000_000_000
G = np.array([0.0, 0.0, 9.81])


def _setup(tmp_path, lockstep=False):
    path = tmp_path / "sensors.yaml"
    path.write_text(SENSORS)
    source = ms.load_source("", str(ROV))
    values = {n: p.default for n, p in table("estimator").items()}
    values.update(ms.model_defaults(source))
    values.update(model_file=str(ROV), sensors=str(path), physics_rate=500.0, imu="imu", dvl="dvl", depth="depth",
                  compass="compass", lockstep=lockstep, control_rate=50.0, publish_rate=50.0,
                  initial_position=(0.0, 0.0, -5.0))
    return build_setup(settings_from_values(values, source), source)


def _ekf():
    return InvariantEKF(np.eye(3), np.zeros(3), np.zeros(3), np.eye(15) * 1e-2, ImuNoise(1e-3, 1e-2, 1e-5, 1e-4))


# ------------------------------------------------------------------------------------------ item 2: bounded work


@pytest.mark.parametrize("w, f", [([1.0e6, 0.0, 0.0], [0.0, 0.0, 9.81]), ([0.0, 0.0, 101.0], [0.0, 0.0, 9.81]),
                                  ([0.0, 0.0, 0.0], [0.0, 501.0, 0.0]), ([0.0, 0.0, 0.0], [-1.0e5, 0.0, 0.0])])
def test_an_imu_reading_beyond_what_an_imu_reports_is_refused(w, f):
    """The probe's 1e6 rad/s (and just past the bounds: 100 rad/s ≈ 3x a ±2000 °/s gyro, 500 m/s² ≈ 2x a ±24 g
    accelerometer) is malformed; before, anything up to 1e6 was accepted."""
    with pytest.raises(Rejected):
        core.imu_payload(w, f)


def test_the_full_scale_of_real_imus_is_accepted():
    w, f = core.imu_payload([math.radians(2000.0), -math.radians(2000.0), 0.0], [0.0, 24 * 9.81, -24 * 9.81])
    assert w[0] == pytest.approx(34.906585, rel=1e-7) and f[1] == pytest.approx(235.44)


@pytest.mark.parametrize("w, dt", [([1.0e6, 0.0, 0.0], 0.01), ([100.0, -100.0, 100.0], 5.0), ([3.0, 2.0, 1.0], 60.0)],
                         ids=["probe", "bounds", "long"])
def test_one_propagation_takes_at_most_max_substeps(w, dt):
    """The probe's 1e6 rad/s over 10 ms cut into ~4e4 sub-steps (seconds per message); now at most MAX_SUBSTEPS,
    the covariance finite and the rotation the closed form R = Exp(ω dt) (scipy's rotation vector)."""
    ekf = _ekf()
    n = ekf.propagate(w, [0.0, 0.0, 9.81], dt)
    assert n == ekf.n_substeps <= MAX_SUBSTEPS
    assert np.isfinite(ekf.P).all() and np.linalg.eigvalsh(ekf.P).min() > 0
    expected = Rotation.from_rotvec(np.array(w) * dt).as_matrix()
    assert np.abs(ekf.R - expected).max() < 1e-6 * max(1.0, float(np.abs(w).max()) * dt)


def test_a_capped_propagation_keeps_the_exact_transition(monkeypatch):
    """The capped sub-steps integrate the bias block with the block exponential: the transition Φ of one step of
    4 sub-steps equals that of an uncapped propagation of 40 (the series; Φ is exact for held inputs whatever the
    cut), and the covariances agree to the trapezoidal Q_d's difference (< 1e-4 relative)."""
    w, f, dt = [2.0, -1.0, 0.5], [5.0, -3.0, 9.81], 0.5
    ref = _ekf()
    monkeypatch.setattr(inekf, "MAX_SUBSTEPS", 10 ** 6)
    assert ref.propagate(w, f, dt) > 20
    capped = _ekf()
    monkeypatch.setattr(inekf, "MAX_SUBSTEPS", 4)
    assert capped.propagate(w, f, dt) == 4
    assert np.abs(capped.transition - ref.transition).max() < 1e-9 * np.abs(ref.transition).max()
    assert np.abs(capped.P - ref.P).max() < 1e-4 * np.abs(ref.P).max()


def test_a_call_of_the_nodes_fusion_does_at_most_its_work_budget(tmp_path):
    """Hostile but accepted IMU input (100 rad/s, 500 m/s², one message jumping 1 s ahead: 50 estimates, each a long
    prediction) fed as the node does (work_budget = MAX_WORK_PER_CALL): no call takes more sub-steps than the budget
    plus one propagation (it checks before each); the estimates left due come on the next calls (pending) and in order."""
    fusion = Fusion(_setup(tmp_path), origin_ns=0)
    fusion.work_budget = MAX_WORK_PER_CALL
    worst, stamps = 0, []
    t = 0
    for i in range(6):
        t += NS if i == 3 else 10 * MS
        before = fusion.counts["work"]
        outs = core.feed(fusion, "imu", t, core.imu_payload([100.0, -100.0, 100.0], [500.0, -500.0, 500.0]))
        worst = max(worst, fusion.counts["work"] - before)
        stamps += [o.stamp_ns for o in outs]
    assert fusion.pending
    while fusion.pending:
        before = fusion.counts["work"]
        stamps += [o.stamp_ns for o in fusion.drain()]
        worst = max(worst, fusion.counts["work"] - before)
    assert worst <= MAX_WORK_PER_CALL - 1 + MAX_SUBSTEPS
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert stamps[-1] == t // (20 * MS) * (20 * MS)  # every grid point up to the last sample: nothing skipped
    assert all(np.isfinite(o).all() for o in (fusion.ekf.P, fusion.ekf.p))


def test_without_a_budget_the_fusion_still_answers_in_one_call(tmp_path):
    """The headless run leaves work_budget None: the same input gives its estimates call by call as before."""
    fusion = Fusion(_setup(tmp_path), origin_ns=0)
    outs = core.feed(fusion, "imu", 10 * MS, core.imu_payload([0.0, 0.0, 0.0], G))
    outs += core.feed(fusion, "imu", 3 * NS, core.imu_payload([0.0, 0.0, 0.0], G))
    assert [o.stamp_ns for o in outs] == list(range(20 * MS, 3 * NS + 1, 20 * MS)) and not fusion.pending


# ------------------------------------------------------------------------------------------ item 3: future stamps


def test_a_stamp_far_ahead_of_the_clock_is_refused_and_later_real_ones_are_taken(tmp_path):
    """sec = 2^31 - 1 against a clock at 2 s: refused (before, adopted as the stream's newest time, after which every
    real message was "not after the previous one"); the next real samples are taken."""
    now = 2 * NS
    with pytest.raises(Rejected, match="ahead of the node's clock"):
        core.check_stamp((2 ** 31 - 1) * NS, now)
    assert core.check_stamp(now + int(core.MAX_STAMP_AHEAD_S * NS), now) == now + 5 * NS
    fusion = Fusion(_setup(tmp_path), origin_ns=0)
    for k in range(1, 4):
        core.feed(fusion, "imu", core.check_stamp(k * 10 * MS, now), core.imu_payload([0.0, 0.0, 0.0], G))
    assert fusion.counts["taken_imu"] >= 2


# ------------------------------------------------------------------------------------------ item 8: definiteness


INDEFINITE = [1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 1.0]  # diagonal >= 0, eigenvalues 3, 1, -1


def test_an_indefinite_covariance_with_a_non_negative_diagonal_is_refused_at_the_boundary():
    """The probe's compass/DVL covariance passed the diagonal check and raised inside the filter."""
    with pytest.raises(Rejected, match="not positive semi-definite"):
        core.compass_payload([0.0, 2e-5, -4.5e-5], INDEFINITE)
    cov6 = np.zeros((6, 6))
    cov6[:3, :3] = np.reshape(INDEFINITE, (3, 3))
    with pytest.raises(Rejected, match="not positive semi-definite"):
        core.dvl_payload([0.1, 0.0, 0.0], cov6.reshape(-1))
    with pytest.raises(Rejected, match="not symmetric"):
        core.compass_payload([0.0, 2e-5, -4.5e-5], [1.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    # semi-definite (a zero eigenvalue, ROS's "unknown" all zeros) is still taken
    core.compass_payload([0.0, 2e-5, -4.5e-5], [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    core.compass_payload([0.0, 2e-5, -4.5e-5], [0.0] * 9)


def test_a_measurement_the_filter_cannot_take_is_counted_and_leaves_the_state(tmp_path, monkeypatch):
    """A filter failure (planted: update_depth raises LinAlgError; then one that leaves NaN) is counted as
    failed_depth, the state is as before it, and the filter goes on."""
    fusion = Fusion(_setup(tmp_path), origin_ns=0)
    core.feed(fusion, "imu", 0, core.imu_payload([0.0, 0.0, 0.0], G))

    def raising(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    def poisoning(self, *args, **kwargs):
        self.p = np.full(3, np.nan)

    monkeypatch.setattr(InvariantEKF, "update_depth", raising)
    core.feed(fusion, "depth", 0, core.depth_payload(101325.0 + 1025 * 9.81 * 5.0, 4.0, fusion.env))
    monkeypatch.setattr(InvariantEKF, "update_depth", poisoning)
    core.feed(fusion, "depth", 50 * MS, core.depth_payload(101325.0 + 1025 * 9.81 * 5.0, 4.0, fusion.env))
    core.feed(fusion, "imu", 100 * MS, core.imu_payload([0.0, 0.0, 0.0], G))
    assert fusion.counts["failed_depth"] == 2 and fusion.counts["taken_depth"] == 0
    assert np.isfinite(fusion.ekf.p).all() and np.isfinite(fusion.ekf.P).all()


# ------------------------------------------------------------------------------------------ item 9: full depth


def test_the_depth_sensor_is_taken_down_to_the_full_ocean_depth(tmp_path):
    """1.1e8 Pa (the Challenger Deep's ~1.086e8 Pa) gives its depth (p - p_atm) / (ρ g); before, anything beyond
    1e6 Pa (~89 m) was refused. Beyond 1.2e8 Pa: refused."""
    env = Fusion(_setup(tmp_path), origin_ns=0).env
    depth, var = core.depth_payload(1.1e8, 1.0e6, env)
    assert depth == pytest.approx((1.1e8 - 101325.0) / (1025.0 * 9.81), rel=1e-12)
    assert var == pytest.approx(1.0e6 / (1025.0 * 9.81) ** 2, rel=1e-12)
    with pytest.raises(Rejected):
        core.depth_payload(1.21e8, 1.0, env)
    with pytest.raises(Rejected):
        core.depth_payload(float("inf"), 1.0, env)


@pytest.mark.parametrize("dt", [0.01, 0.3, 2.0])
def test_the_capped_sub_steps_integral_is_the_block_exponentials(dt):
    """∫₀^dt exp(A τ) dτ of the left-invariant error dynamics by scaling and squaring equals the top-right block of
    scipy's expm([[A, I], [0, 0]] dt) (Van Loan 1978) to 1e-12, for ρ = |A| dt from 1 to 220."""
    from scipy.linalg import expm

    W = inekf.hat([-10.0, 20.0, 30.0])
    A = np.zeros((9, 9))
    A[0:3, 0:3] = A[3:6, 3:6] = A[6:9, 6:9] = -W
    A[3:6, 0:3] = -inekf.hat([20.0, 5.0, 50.0])
    A[6:9, 3:6] = np.eye(3)
    M = np.zeros((18, 18))
    M[:9, :9], M[:9, 9:] = A * dt, np.eye(9) * dt
    ref = expm(M)[:9, 9:]
    rho = max(dt * float(np.abs(A).sum(axis=1).max()), 0.6)
    assert np.abs(inekf._integral_of_exp(A, dt, rho) - ref).max() < 1e-12 * np.abs(ref).max()
