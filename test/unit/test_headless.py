"""Headless runs without ROS (mbs_ros.headless): the record's layout and the paused start, a failing control law
answered with zero and counted as the controller node does, a blow-up that ends the run with a fault instead of an
exception, and the scenarios a headless run refuses. Bit-identity with the ROS run: test/e2e/test_headless_identity.py.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from mbs_ros.dynamics.simulation import simulator as simulator_module
from mbs_ros.headless import HeadlessError, run_scenario
from mbs_ros.headless import run as headless_run


def test_the_record_holds_one_row_per_control_period_and_the_paused_start():
    """vehicle_manipulator for 0.1 s at 100 Hz control: 11 rows stamped 0, 10, ..., 100 ms (integer ns); the first
    command holds the state at t = 0 (the reference is installed after it, as the runner's paused start does), the
    next ones track the scenario's first waypoint (t = 0: position [0.2, -0.1, -4.9], joints [0.2, 0.4, -1.0, 0.2,
    0.4, 0.2]; the quintic to the next waypoint 2 s later has moved less than 1e-4 by t = 10 ms)."""
    run = run_scenario("vehicle_manipulator", duration=0.1)
    assert run.fault is None and run.duration == pytest.approx(0.1, abs=1e-12)
    assert run.control_rate == 100.0 and run.physics_rate == 500.0
    rec = run.robots["uvms"]
    assert rec.stamp_ns.dtype == np.int64 and rec.stamp_ns.tolist() == [k * 10_000_000 for k in range(11)]
    assert rec.q.shape == (11, 13) and rec.v.shape == (11, 12) and rec.tau.shape == (11, 12)
    assert rec.nq_base == 7 and rec.nv_base == 6 and len(rec.joint_names) == 6 and rec.base_group == "se3"
    np.testing.assert_array_equal(rec.q[0], [0, 0, -5, 0, 0, 0, 1, 0.0, 0.6, -1.2, 0.0, 0.6, 0.0])
    np.testing.assert_array_equal(rec.q_d[0], rec.q[0])  # held
    np.testing.assert_allclose(rec.q_d[1:, :3], np.tile([0.2, -0.1, -4.9], (10, 1)), atol=1e-3)
    np.testing.assert_allclose(rec.q_d[1, 7:], [0.2, 0.4, -1.0, 0.2, 0.4, 0.2], atol=1e-4)
    assert not rec.saturated.any() and rec.control_errors == 0
    assert rec.estimate_q is None and rec.estimate_v is None
    assert np.all(np.abs(rec.energy_residual) < 1e-6), rec.energy_residual  # RK4 at 500 Hz over 0.1 s


def test_a_failing_law_is_answered_with_zero_and_counted(monkeypatch):
    """A law that gives NaN every third call: the controller node's rule, a zero command and one control error
    per failed call, and the run goes on (manipulator: fixed base, six joints under gravity)."""
    failed = []
    real_setup = headless_run.controller_setup

    def setup(values, source):
        s = real_setup(values, source)
        law, calls = s.law, [0]

        def flaky(q, v, q_d, v_d, a_d):
            calls[0] += 1
            if calls[0] % 3 == 0:
                failed.append(calls[0])
                return np.full(len(v), np.nan)
            return law(q, v, q_d, v_d, a_d)

        return dataclasses.replace(s, law=flaky)

    monkeypatch.setattr(headless_run, "controller_setup", setup)
    run = run_scenario("manipulator", duration=0.3)
    rec = run.robots["arm"]
    assert run.fault is None and len(rec.t) == 31
    assert rec.control_errors == len(failed) == 10
    zero_rows = [i for i in range(31) if (i + 1) % 3 == 0]  # the law's i-th answer is call i + 1
    np.testing.assert_array_equal(rec.tau[zero_rows], 0.0)
    np.testing.assert_array_equal(rec.tau_applied[zero_rows], 0.0)
    assert np.all(np.abs(rec.tau[[i for i in range(31) if i not in zero_rows]]).max(axis=1) > 0.0)


@pytest.mark.parametrize("how", ["nonfinite", "exception"])
def test_a_blow_up_ends_the_run_early_with_a_fault(monkeypatch, how):
    """The integrator's step gives NaN (or raises) from t = 0.3 s on: no exception reaches the caller; the run ends
    at the last good state, t = 0.3 s, with the fault's time and reason, and the rows end there. The fault is
    planted in the simulator's Python step, so the fast path (mbs_ros.headless.fast) is turned off."""
    from mbs_ros.headless import fast as headless_fast

    monkeypatch.setattr(headless_fast, "eligible", lambda robot: "the test plants its fault in the Python step")
    real_step = simulator_module.step

    def step(model, q, v, tau, dt, method="rk4", t=0.0, **kw):
        if t >= 0.3 - 1e-9:
            if how == "exception":
                raise ZeroDivisionError("planted")
            return q + np.nan, v + np.nan
        return real_step(model, q, v, tau, dt, method=method, t=t, **kw)

    monkeypatch.setattr(simulator_module, "step", step)
    run = run_scenario("manipulator", duration=1.0)
    assert run.fault is not None and run.fault.startswith("t = 0.300 s: ") and run.fault.endswith("(arm)")
    assert ("non-finite" if how == "nonfinite" else "ZeroDivisionError: planted") in run.fault
    assert run.duration == pytest.approx(0.3, abs=1e-12)
    rec = run.robots["arm"]
    assert rec.stamp_ns[-1] == 300_000_000 and len(rec.t) == 31
    assert np.all(np.isfinite(rec.q)) and np.all(np.isfinite(rec.v))


def test_scenarios_a_headless_run_refuses(tmp_path):
    """A scenario file with an error names the file and key; a robot without a controller is refused (a lockstep
    run waits for its commands); a run needs a duration."""
    with pytest.raises(HeadlessError, match="no_such_scenario"):
        run_scenario("no_such_scenario")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nphysics_rate: fast\nrobots:\n  - namespace: arm\n"
                   "    params: config/arm_6dof_fixed.yaml\n")
    with pytest.raises(HeadlessError, match=r"bad\.yaml.*physics_rate"):
        run_scenario(bad)
    from mbs_ros.scenario.schema import load_scenario, package_root

    src = (package_root() / "config" / "scenarios" / "manipulator.yaml").read_text()
    src = src[: src.index("    reference:")]  # a reference needs a controller
    nocontrol = tmp_path / "nocontrol.yaml"
    nocontrol.write_text(src.replace("    controller:\n      law: computed_torque\n      kp: 16.0        # lambda^2: a "
                                     "double pole at -4 /s\n      kd: 8.0\n", "    controller: false\n")
                         .replace("params: config/", f"params: {package_root()}/config/"))
    with pytest.raises(HeadlessError, match="no controller"):
        run_scenario(nocontrol, duration=0.1)
    scn = dataclasses.replace(load_scenario("manipulator"), duration=None)
    with pytest.raises(HeadlessError, match="no duration"):
        run_scenario(scn)



def test_without_the_energy_report_the_states_are_the_same():
    """energy=False leaves out the energy balance, nothing else: the same states."""
    a = run_scenario("manipulator", duration=0.2)
    b = run_scenario("manipulator", duration=0.2, energy=False)
    ra, rb = a.robots["arm"], b.robots["arm"]
    assert rb.energy_residual is None and ra.energy_residual is not None
    assert ra.q.tobytes() == rb.q.tobytes() and ra.tau.tobytes() == rb.tau.tobytes()


def _burn(seconds):
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass


def test_the_loop_cpu_time_counts_the_periods_and_not_the_set_up(monkeypatch):
    """``loop_cpu_time`` (the benchmark's real-time factor, mbs_ros.bench.headless): a set-up that burns 0.3 s of
    this thread's CPU is left out of it, a law that burns 2 ms per period (31 answers) is in it; both against the
    thread CPU time measured here around the whole call."""
    real_loader, real_setup = headless_run._shared_loader, headless_run.controller_setup

    def loader():
        _burn(0.3)
        return real_loader()

    def setup(values, source):
        s = real_setup(values, source)

        def slow(*args):
            _burn(0.002)
            return s.law(*args)

        return dataclasses.replace(s, law=slow)

    monkeypatch.setattr(headless_run, "_shared_loader", loader)
    monkeypatch.setattr(headless_run, "controller_setup", setup)
    started = time.thread_time()
    run = run_scenario("manipulator", duration=0.3)
    whole = time.thread_time() - started
    assert run.fault is None and len(run.robots["arm"].t) == 31
    assert 31 * 0.002 <= run.loop_cpu_time <= whole - 0.3, (run.loop_cpu_time, whole)


def test_the_cli_runs_prints_and_saves(tmp_path, capsys):
    """python -m mbs_ros.headless: exit 0 with the real-time factor and a line per robot, the records in the .npz;
    exit 2 naming the key for an override the scenario does not take."""
    from mbs_ros.headless.__main__ import main

    out = tmp_path / "run.npz"
    assert main(["manipulator", "--duration", "0.048", "--set", "control_rate=250", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "manipulator: 0.048 s simulated" in text and "x real time" in text and "\n  arm: 13 periods" in text
    data = np.load(out)
    assert data["arm/q"].shape == (13, 6) and data["arm/stamp_ns"].tolist() == [k * 4_000_000 for k in range(13)]
    assert main(["manipulator", "--set", "no_such_key=1"]) == 2
    assert "no_such_key" in capsys.readouterr().err


def test_the_robots_of_a_fleet_run_as_each_would_alone():
    """A fleet's robots share one headless loop and never touch one another: uvms1 of three is uvms1 of one, bit for
    bit (the ROS side runs one robot per graph on simulation time; test/e2e/test_headless_identity.py compares
    that one)."""
    from mbs_ros.scenario.schema import load_scenario

    three = run_scenario(load_scenario("fleet", count=3), duration=0.2)
    one = run_scenario(load_scenario("fleet", count=1), duration=0.2)
    assert three.fault is None and one.fault is None
    assert sorted(three.robots) == ["uvms1", "uvms2", "uvms3"] and list(one.robots) == ["uvms1"]
    a, b = three.robots["uvms1"], one.robots["uvms1"]
    assert a.stamp_ns.tolist() == b.stamp_ns.tolist() and len(a.stamp_ns) == 11
    assert a.q.tobytes() == b.q.tobytes() and a.v.tobytes() == b.v.tobytes()
    assert a.tau_applied.tobytes() == b.tau_applied.tobytes()
    assert not np.array_equal(three.robots["uvms2"].q[:, :3], a.q[:, :3])  # another robot, 4 m aside
