"""The ROS-free simulation loop (mbs_ros.dynamics.simulation.simulator.Simulator) that the dynamics node runs.

- held commands: a command applies from the next step, is held, times out after cmd_timeout (each channel on its
  own), and the hooks report every change with the first step it applies to;
- body- and world-frame wrenches against an independent computation: the numpy reference integrator with the
  generalised force evaluated per stage from the rotation of the stage (scipy's quaternion -> matrix), on se3,
  se2 (dropped components) and so3xr3 (whose Bᵀ depends on the rotation);
- lockstep bookkeeping: expected channels, stamps of the current period, completeness, n steps per period;
- energy balance: the work of the applied commands agrees with the change of energy to the quadrature's second
  order error over a driven run of the vehicle-manipulator;
- reset, pause, and a run over several base groups;
- faults (issue 9): a non-finite step, an exception out of a step, a runaway spin and energy from nowhere each
  stop the simulation at the last good state with the reason; a reset runs it again. Saturation of absurd
  wrenches and efforts (on by default, from the model's limits), and the physics-rate check (the fixed arm at
  2 Hz refused).

No ROS here: the comparison of the node's published state with this class is in test_dynamics_node.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model, step
from mbs_ros.dynamics.simulation.simulator import ZERO_WRENCH, Simulator, WrenchCommand

ROOT = Path(__file__).resolve().parents[2]
UVMS = ROOT / "config" / "robots" / "uvms_6dof.yaml"
BODY = dict(mass=1.3, inertia=np.array([[0.05, 0.001, -0.002], [0.001, 0.07, 0.003], [-0.002, 0.003, 0.09]]),
            com=[0.02, -0.01, 0.03])
DT = 1e-3


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(UVMS)


def spinning_state(model, rng=None):
    """A random configuration away from the identity and a velocity with every component set."""
    rng = np.random.default_rng(7) if rng is None else rng
    return model.random_configuration(rng, joint_range=1.0), rng.normal(scale=0.5, size=model.nv)


def rotation(model, q):
    """R_world_base from the configuration, independently of the model: scipy for quaternions, yaw otherwise."""
    if model.base in ("se3", "so3xr3"):
        return Rotation.from_quat(q[3:7]).as_matrix()
    if model.base == "so3":
        return Rotation.from_quat(q[:4]).as_matrix()
    c, s = (q[2], q[3]) if model.base == "se2" else (q[3], q[4])
    return Rotation.from_euler("z", np.arctan2(s, c)).as_matrix()


def reference_tau(model, frame, W, efforts=None):
    """Generalised force per stage for the numpy reference: Bᵀ(q) of the wrench in body axes at the stage."""
    W = np.asarray(W, dtype=float)
    efforts = np.zeros(0) if efforts is None else np.asarray(efforts, dtype=float)

    def tau(t, q, v):
        W_body = W
        if frame == "world":
            R = rotation(model, q)
            W_body = np.concatenate([R.T @ W[:3], R.T @ W[3:]])
        out = model.wrench_to_generalized(q, W_body)[0] if model.group is not None else np.zeros(model.nv)
        out = np.array(out, dtype=float)
        if efforts.size:
            out[model.nv - efforts.size:] += efforts
        return out

    return tau


# ------------------------------------------------------------------------------------------ commands


def test_commands_start_next_step_are_held_and_time_out(uvms):
    q0, v0 = spinning_state(uvms)
    sim = Simulator(uvms, q0, v0, DT, cmd_timeout=0.010)  # 10 steps
    wrenches, efforts, timeouts = [], [], []
    sim.on_wrench_applied = lambda k, cmd: wrenches.append((k, cmd))
    sim.on_efforts_applied = lambda k, e: efforts.append((k, e.copy()))
    sim.on_timeout = timeouts.append
    assert sim.cmd_timeout_steps == 10
    W = [10.0, -5.0, 20.0, 1.0, 0.5, -2.0]
    E = np.linspace(-1.0, 1.0, 6)
    sim.advance(3)
    sim.set_wrench(W)  # from step 3 on
    assert sim.applied_wrench.is_zero(), "a command applies from the next step, not at once"
    sim.advance(5)
    sim.set_joint_efforts(E)  # from step 8 on
    sim.advance(20)
    assert sim.k == 28
    # the wrench held for steps 3..12, zero from 13; the efforts for 8..17, zero from 18
    assert [k for k, _ in wrenches] == [0, 3, 13]
    assert wrenches[0][1].is_zero() and np.array_equal(wrenches[1][1].W, W) and wrenches[1][1].frame == "body"
    assert wrenches[2][1].is_zero()
    assert [k for k, _ in efforts] == [0, 8, 18]
    assert np.array_equal(efforts[1][1], E) and not np.any(efforts[2][1])
    assert timeouts == ["wrench", "joints"]

    # the same run replayed with the reference integrator and that schedule
    ref = uvms.with_backend("numpy")
    q, v = q0, v0
    for k in range(28):
        Wk = W if 3 <= k < 13 else np.zeros(6)
        Ek = E if 8 <= k < 18 else np.zeros(6)
        q, v = step(ref, q, v, reference_tau(uvms, "body", Wk, Ek), DT)
    assert np.abs(q - sim.q).max() < 1e-12 and np.abs(v - sim.v).max() < 1e-11


def test_a_new_command_restarts_the_timeout_and_zero_timeout_holds_forever(uvms):
    q0, v0 = uvms.neutral(), np.zeros(uvms.nv)
    sim = Simulator(uvms, q0, v0, DT, cmd_timeout=0.005)
    changes = []
    sim.on_wrench_applied = lambda k, cmd: changes.append((k, cmd.W[2]))
    sim.set_wrench([0, 0, 1.0, 0, 0, 0])
    sim.advance(4)
    sim.set_wrench([0, 0, 2.0, 0, 0, 0])  # step 4: a new command, held until step 9
    sim.advance(10)
    assert changes == [(0, 1.0), (4, 2.0), (9, 0.0)]
    sim.set_cmd_timeout(0.0)
    sim.set_wrench([0, 0, 3.0, 0, 0, 0])
    sim.advance(5000)
    assert changes[-1] == (14, 3.0) and np.array_equal(sim.applied_wrench.W, [0, 0, 3.0, 0, 0, 0])
    # a runtime change of cmd_timeout applies to the command already held, counted from the step it started (14)
    sim.set_cmd_timeout(10.0)
    sim.advance(10014 - sim.k)  # steps up to 10013
    assert changes[-1] == (14, 3.0)
    sim.advance(1)
    assert changes[-1] == (10014, 0.0)


def test_commands_are_validated():
    fixed = Model.from_yaml(ROOT / "config" / "robots" / "arm_6dof_fixed.yaml")
    sim = Simulator(fixed, fixed.neutral(), np.zeros(fixed.nv), DT)
    assert sim.expected == ("joints",)
    with pytest.raises(ValueError, match="fixed base"):
        sim.set_wrench([1, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="expected 6"):
        sim.set_joint_efforts([1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        sim.set_joint_efforts([1.0, np.nan, 0, 0, 0, 0])
    body = Model.rigid_body("se3", **BODY)
    sim = Simulator(body, body.neutral(), np.zeros(6), DT)
    with pytest.raises(ValueError, match="non-finite"):
        sim.set_wrench([np.inf, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="frame"):
        sim.set_wrench([1, 0, 0, 0, 0, 0], frame="mars")
    with pytest.raises(ValueError, match="integrator"):
        sim.integrator = "rk5"


# ---------------------------------------------------------------------------------- body vs world wrench


@pytest.mark.parametrize("base", ["se3", "so3xr3", "schoenflies"])
def test_body_and_world_wrenches_against_the_reference(base):
    model = Model.rigid_body(base, gravity=(0.0, 0.0, -9.81), **BODY)
    q0 = model.configuration_from_pose(np.array([0.5, -1.0, 2.0]),
                                       Rotation.from_euler("xyz", [0.3, -0.2, 1.1] if base != "schoenflies"
                                                           else [0, 0, 1.1]).as_quat())
    V0 = np.array([0.3, -0.2, 0.1, 0.4, -0.6, 0.9]) if base != "schoenflies" else np.array([0.3, -0.2, 0.1, 0, 0, 0.9])
    v0 = model.velocity_from_twist(q0, V0)
    W = np.array([3.0, -1.0, 15.0, 0.2, -0.1, 0.3])
    if base == "schoenflies":
        W[3:5] = 0.0  # nothing dropped: the comparison is of the applied wrench
    ref = model.with_backend("numpy")
    finals = {}
    for frame in ("body", "world"):
        sim = Simulator(model, q0, v0, DT)
        sim.set_wrench(W, frame)
        sim.advance(400)
        q, v = q0, v0
        for _ in range(400):
            q, v = step(ref, q, v, reference_tau(model, frame, W), DT)
        assert np.abs(sim.q - q).max() < 1e-11 and np.abs(sim.v - v).max() < 1e-10, (base, frame)
        # the work of the wrench: its power W_body·V integrated, against the energy change
        assert abs(sim.diagnostics()["energy_balance_residual"]) < 1e-6 * max(1.0, abs(sim.work))
        finals[frame] = sim.q
    assert np.abs(finals["body"] - finals["world"]).max() > 1e-3, "the two frames must differ for a turning body"


def test_se2_drops_what_it_cannot_take():
    model = Model.rigid_body("se2", mass=2.0, inertia=np.diag([0.1, 0.1, 0.2]), gravity=(0, 0, 0))
    q0 = model.configuration_from_pose(np.zeros(3), Rotation.from_euler("z", 0.7).as_quat())
    sim = Simulator(model, q0, np.zeros(3), DT)
    cmd, dropped = sim.wrench_command([1.0, 2.0, 0.5, 2.0, -1.0, 0.3], "body")
    assert np.allclose(cmd.W, [1.0, 2.0, 0, 0, 0, 0.3]) and np.allclose(dropped, [0, 0, 0.5, 2.0, -1.0, 0])
    cmd, dropped = sim.wrench_command([1.0, 2.0, 0.5, 0.0, 0.0, 0.3], "world")
    assert cmd.frame == "world" and np.allclose(cmd.W, [1.0, 2.0, 0, 0, 0, 0.3]) and np.allclose(dropped[2], 0.5)
    _, dropped = sim.wrench_command([1.0, 2.0, 0.0, 0.0, 0.0, 0.3], "world")
    assert not np.any(dropped)


def test_world_wrench_on_a_robot_and_so3xr3_robot(uvms):
    """The compiled world-wrench path and the per-stage so3xr3 body force on robots, against the reference."""
    xacro = uvms.urdf
    for base in ("se3", "so3xr3"):
        model = uvms if base == "se3" else Model.from_urdf(xacro, base="so3xr3", gravity=uvms.gravity)
        q0, v0 = spinning_state(model, np.random.default_rng(3))
        E = np.array([2.0, -1.0, 0.5, 0.3, -0.2, 0.1])
        ref = model.with_backend("numpy")
        for frame in ("body", "world"):
            W = np.array([40.0, -20.0, 10.0, 3.0, 1.0, -6.0])
            sim = Simulator(model, q0, v0, DT)
            sim.set_wrench(W, frame)
            sim.set_joint_efforts(E)
            sim.advance(50)
            q, v = q0, v0
            for _ in range(50):
                q, v = step(ref, q, v, reference_tau(model, frame, W, E), DT)
            assert np.abs(sim.q - q).max() < 1e-11 and np.abs(sim.v - v).max() < 1e-9, (base, frame)
            # what the node publishes with the state: τ at the current q, the world-axes wrench for the arrows
            tau = reference_tau(model, frame, W, E)(0.0, sim.q, sim.v)
            assert np.allclose(sim.generalized_force(), tau, atol=1e-12)
            F, T = sim.applied_wrench_world()
            R = rotation(model, sim.q)
            F_ref, T_ref = (W[:3], W[3:]) if frame == "world" else (R @ W[:3], R @ W[3:])
            assert np.allclose(F, F_ref, atol=1e-12) and np.allclose(T, T_ref, atol=1e-12)
            a = ref.forward_dynamics(sim.q, sim.v, tau)
            assert np.allclose(sim.joint_wrenches(), ref.joint_wrenches(sim.q, sim.v, a), atol=1e-9)


# ------------------------------------------------------------------------------------------ lockstep


def test_lockstep_bookkeeping(uvms):
    q0, v0 = uvms.neutral(), np.zeros(uvms.nv)
    sim = Simulator(uvms, q0, v0, 2e-3, lockstep_steps=5, t0_ns=7_000_000, cmd_timeout=0.001)
    assert sim.lockstep and sim.expected == ("wrench", "joints") and sim.cmd_timeout_steps == 0
    assert sim.stamp() == 7_000_000 and sim.dt_ns == 2_000_000
    assert sim.missing() == ("wrench", "joints") and not sim.period_complete()
    assert sim.check_stamp("wrench", sim.stamp()) == 0
    assert sim.check_stamp("joints", sim.stamp() - 1) == -1 and sim.check_stamp("joints", sim.stamp() + 1) == 1
    assert sim.last_stamp_seen == {"wrench": 7_000_000, "joints": 7_000_001}
    cmd, _ = sim.wrench_command([0, 0, 5.0, 0, 0, 0])
    sim.submit("wrench", cmd)
    assert sim.missing() == ("joints",) and sim.advance_period() == 0 and sim.k == 0
    sim.submit("joints", np.ones(6))
    sim.pause()
    assert sim.advance_period() == 0 and sim.period_complete(), "paused: the period waits with its commands"
    sim.pause(False)
    assert sim.advance_period() == 5 and sim.k == 5 and sim.stamp() == 17_000_000
    assert sim.period_commands == {} and sim.missing() == ("wrench", "joints")
    assert np.array_equal(sim.applied_wrench.W, cmd.W) and np.array_equal(sim.applied_efforts, np.ones(6))
    # no timeout in lockstep: the commands stay for the whole period (5 steps > cmd_timeout)
    sim.submit("wrench", cmd)
    sim.submit("joints", np.ones(6))
    sim.reset()
    assert sim.period_commands == {} and sim.k == 6 and sim.applied_wrench.is_zero()
    with pytest.raises(ValueError, match="expects"):
        Simulator(Model.rigid_body("se3", **BODY), np.r_[np.zeros(3), 0, 0, 0, 1.0], np.zeros(6), DT,
                  lockstep_steps=2).submit("joints", np.ones(1))


def test_a_command_for_a_period_already_started_is_stale_not_the_next_period_s(uvms):
    """A node starts a period (its commands taken) and may take its steps in a later callback; a copy of the
    period's command arriving meanwhile (the controller answered a state sent again) carries the stamp the simulator
    still stands at, and must not be kept for the next period: the next period waits for its own commands."""
    q0, v0 = uvms.neutral(), np.zeros(uvms.nv)
    sim = Simulator(uvms, q0, v0, 2e-3, lockstep_steps=5, t0_ns=0)
    old_wrench, _ = sim.wrench_command([0, 0, 5.0, 0, 0, 0])
    sim.submit("wrench", old_wrench)
    sim.submit("joints", np.ones(6))
    assert sim.start_period() and sim.k == 0 and sim.stamp() == 0  # started, its steps not taken yet
    assert sim.check_stamp("joints", 0) == -1 and sim.check_stamp("wrench", 0) == -1  # the copy: stale
    assert sim.advance(5) == 5 and sim.stamp() == 10_000_000
    assert sim.check_stamp("joints", 10_000_000) == 0  # the next period's own stamp
    assert sim.missing() == ("wrench", "joints") and not sim.period_complete()


def test_a_base_that_takes_no_wrench_leaves_lockstep_to_the_joints(uvms):
    """base_actuated False (a legged robot): a period waits for the joints' command alone, a wrench is refused as a
    lockstep command, and the period runs with the base unpushed."""
    q0, v0 = uvms.neutral(), np.zeros(uvms.nv)
    sim = Simulator(uvms, q0, v0, 2e-3, lockstep_steps=5, base_actuated=False)
    assert sim.expected == ("joints",) and sim.missing() == ("joints",)
    with pytest.raises(ValueError, match="expects joints, not 'wrench'"):
        sim.submit("wrench", sim.wrench_command([0, 0, 5.0, 0, 0, 0])[0])
    sim.submit("joints", np.ones(6))
    assert sim.period_complete() and sim.advance_period() == 5 and sim.applied_wrench.is_zero()
    # the same period with an actuated base given a zero wrench: the same state, bit for bit
    ref = Simulator(uvms, q0, v0, 2e-3, lockstep_steps=5)
    ref.submit("wrench", ref.wrench_command(np.zeros(6))[0])
    ref.submit("joints", np.ones(6))
    assert ref.advance_period() == 5
    assert np.array_equal(ref.q, sim.q) and np.array_equal(ref.v, sim.v) and not np.array_equal(sim.q, q0)


# -------------------------------------------------------------------------------------- energy balance


def driven_run(model, dt, seconds=0.4):
    """The vehicle-manipulator under a changing body wrench, world wrench and joint efforts; (sim, E - E_ref)."""
    q0, v0 = spinning_state(model, np.random.default_rng(11))
    sim = Simulator(model, q0, v0, dt, joint_limits=False)  # the commands' work under RK4: no limit stops
    n = int(round(seconds / dt))
    for i in range(4):  # four phases, each command another frame or value
        frame = "world" if i % 2 else "body"
        sim.set_wrench(np.array([30.0, -10.0, 20.0, 4.0, -2.0, 3.0]) * (1 + i), frame)
        sim.set_joint_efforts(np.array([5.0, -8.0, 6.0, 2.0, -1.0, 0.5]) * (-1) ** i)
        sim.advance(n // 4)
    return sim, sim.energy() - sim.energy_ref


def test_work_accounts_for_the_energy_change(uvms):
    coarse, dE = driven_run(uvms, 2e-3)
    fine, dE_fine = driven_run(uvms, 1e-3)
    assert abs(dE) > 10.0, "the commands must do real work"
    r_coarse = coarse.diagnostics()["energy_balance_residual"]
    r_fine = fine.diagnostics()["energy_balance_residual"]
    assert r_coarse == pytest.approx(dE - coarse.work, abs=1e-12)
    assert abs(r_fine) < 1e-5 * abs(dE_fine), f"residual {r_fine:.3e} J of an energy change of {dE_fine:.3f} J"
    # second order (the trapezoid on the power): halving dt divides the residual by about 4
    assert 3.0 < abs(r_coarse / r_fine) < 5.0, (r_coarse, r_fine)
    assert abs(fine.work - dE_fine) < 1e-5 * abs(dE_fine)


def test_free_motion_conserves_energy_and_momentum():
    model = Model.rigid_body("se3", gravity=(0.0, 0.0, 0.0), **BODY)
    q0 = model.configuration_from_pose(np.array([1.0, 2.0, 3.0]), Rotation.from_euler("xyz", [0.3, 0.2, 0.1]).as_quat())
    sim = Simulator(model, q0, model.velocity_from_twist(q0, np.array([0.1, 0.2, 0.3, 1.0, -2.0, 0.5])), DT)
    sim.advance(2000)
    d = sim.diagnostics()
    assert sim.work == 0.0 and abs(d["energy_balance_residual"]) < 1e-9 * d["total_energy_ref"]
    h = np.array([d["momentum_" + a] for a in ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y",
                                              "angular_z")])
    h_ref = np.array([d["momentum_ref_" + a] for a in ("linear_x", "linear_y", "linear_z", "angular_x",
                                                      "angular_y", "angular_z")])
    assert np.abs(h - h_ref).max() < 1e-9
    assert d["steps"] == 2000 and d["sim_time"] == pytest.approx(2.0) and d["base_group"] == "se3"


# -------------------------------------------------------------------------------------- reset, pause, NaN


def test_reset_and_pause(uvms):
    q0, v0 = spinning_state(uvms)
    sim = Simulator(uvms, q0, v0, DT, t0_ns=1000)
    sim.set_wrench([0, 0, 50.0, 0, 0, 0])
    sim.advance(100)
    assert sim.work != 0.0 and not np.allclose(sim.q, q0)
    sim.pause()
    assert sim.advance(10) == 0 and sim.k == 100
    sim.pause(False)
    sim.reset()
    assert sim.k == 101 and sim.k_reset == 101 and sim.stamp() == 1000 + 101 * 1_000_000
    assert np.array_equal(sim.q, q0) and np.array_equal(sim.v, v0) and sim.work == 0.0
    assert sim.applied_wrench.is_zero() and sim.diagnostics()["steps_since_reset"] == 0
    sim.advance(1)  # no command after a reset
    assert sim.applied_wrench is ZERO_WRENCH and sim.work == 0.0
    # a new initial state
    q1 = uvms.neutral()
    sim.reset(q1, np.zeros(uvms.nv))
    assert np.array_equal(sim.q, q1) and sim.energy() == pytest.approx(sim.energy_ref)
    # a model change keeps the state and takes the references again
    heavier = Model.rigid_body("se3", mass=2.0)
    body = Simulator(Model.rigid_body("se3"), heavier.neutral(), np.array([1.0, 0, 0, 0, 0, 0]), DT)
    body.set_model(heavier)
    assert body.energy_ref == pytest.approx(1.0) and body.work == 0.0
    with pytest.raises(ValueError, match="configuration space"):
        body.set_model(uvms)


def test_a_non_finite_step_pauses_at_the_last_good_state():
    """Limits off: a 1e308 N wrench makes the next step non-finite (or a runaway); the simulation stops at the state
    it started from, reports why and when, drops the commands, and runs again after a reset."""
    model = Model.rigid_body("se3", **BODY)
    q0 = model.neutral()
    faults = []
    sim = Simulator(model, q0, np.zeros(6), DT, max_wrench=[np.inf, np.inf])
    sim.on_fault = faults.append
    sim.advance(3)
    q3, v3 = sim.q.copy(), sim.v.copy()
    sim.set_wrench(WrenchCommand(np.array([1e308, 1e308, 0, 0, 0, 0]), "body"))
    assert sim.advance(10) == 0
    assert sim.paused and sim.fault is not None and sim.fault.kind in ("nonfinite", "runaway")
    assert faults == [sim.fault] and sim.fault.k == 3 and sim.fault.stamp_ns == sim.stamp(3)
    assert sim.k == 3 and np.array_equal(sim.q, q3) and np.array_equal(sim.v, v3)
    assert sim.applied_wrench.is_zero() and np.isfinite(sim.work) and sim.faults == 1
    d = sim.diagnostics()
    assert d["fault"] == sim.fault.reason and d["faults"] == 1
    assert all(np.isfinite(x) for x in d.values() if isinstance(x, float))
    sim.pause(False)  # resuming alone does not clear a fault
    assert sim.paused and sim.advance(5) == 0
    sim.reset()
    assert not sim.paused and sim.fault is None and sim.k == 4
    assert sim.advance(5) == 5 and sim.k == 9 and np.all(np.isfinite(sim.q))
    sim.pause()
    sim.reset()  # a pause asked for stays
    assert sim.paused and sim.advance(1) == 0


def test_an_exception_in_a_step_is_caught(monkeypatch):
    """The issue's `ValueError: math domain error` out of a step: caught, the simulation stops at the state the
    step started from, and the error is the fault's reason."""
    import mbs_ros.dynamics.simulation.simulator as simulator

    model = Model.rigid_body("se3", **BODY)
    sim = Simulator(model, model.neutral(), np.zeros(6), DT)
    sim.set_wrench([0.0, 0.0, 5.0, 0.0, 0.0, 0.1])
    sim.advance(5)
    q5, v5 = sim.q.copy(), sim.v.copy()
    real_step = simulator.step

    def failing(*args, **kwargs):
        raise ValueError("math domain error")

    monkeypatch.setattr(simulator, "step", failing)
    assert sim.advance(3) == 0
    assert sim.fault.kind == "exception" and "ValueError: math domain error" in sim.fault.reason
    assert sim.fault.k == 5 and np.array_equal(sim.q, q5) and np.array_equal(sim.v, v5)
    monkeypatch.setattr(simulator, "step", real_step)
    sim.reset()
    assert sim.advance(3) == 3 and sim.fault is None


def test_saturation_of_wrenches_and_efforts(uvms):
    """On by default: the model's effort limits (the URDF's <limit effort>) and 100 m/s^2 / 100 N m/kg times the
    total mass for the wrench; an absurd command is scaled down along its direction, without overflow, counted."""
    sim = Simulator(uvms, uvms.neutral(), np.zeros(uvms.nv), DT)
    total = uvms.total_mass
    assert sim.limits.max_force == pytest.approx(100.0 * total) and sim.limits.max_torque == pytest.approx(100.0 * total)
    assert np.array_equal(sim.limits.max_effort, [150.0, 150.0, 80.0, 30.0, 30.0, 20.0])  # arm_6dof.urdf.xacro
    for frame in ("body", "world"):
        W = np.array([1.5e308, -1.5e308, 1.5e308, 1e308, 0.0, -1e308])
        sim.set_wrench(W, frame)
        cmd = sim._wrench.pending
        assert np.linalg.norm(cmd.W[:3]) == pytest.approx(sim.limits.max_force, rel=1e-12)
        assert np.linalg.norm(cmd.W[3:]) == pytest.approx(sim.limits.max_torque, rel=1e-12)
        assert np.allclose(cmd.W[:3] / np.linalg.norm(cmd.W[:3]), np.array([1, -1, 1]) / np.sqrt(3))
    assert sim.saturated == {"wrench": 2, "joints": 0, "thrusters": 0}
    sim.set_wrench([10.0, 0, 0, 0, 0, 1.0])  # within the limits: untouched, not counted
    assert np.array_equal(sim._wrench.pending.W, [10.0, 0, 0, 0, 0, 1.0]) and sim.saturated["wrench"] == 2
    sim.set_joint_efforts([1e12, -1e308, 5.0, 0.0, 31.0, -20.0])
    assert np.array_equal(sim._efforts.pending, [150.0, -150.0, 5.0, 0.0, 30.0, -20.0])
    assert sim.saturated["joints"] == 1
    # a WrenchCommand built elsewhere is saturated too
    sim.set_wrench(WrenchCommand(np.array([0, 0, 1e300, 0, 0, 0]), "world"))
    assert sim._wrench.pending.W[2] == pytest.approx(sim.limits.max_force) and sim.saturated["wrench"] == 3
    sim.advance(10)
    assert sim.fault is None and np.all(np.isfinite(sim.v))
    # explicit limits, and inf turning one off
    sim.set_limits(max_wrench=[50.0, np.inf], max_effort=2.0)
    sim.set_wrench([0, 0, 100.0, 0, 0, 1e6])
    assert np.allclose(sim._wrench.pending.W, [0, 0, 50.0, 0, 0, 1e6])
    sim.set_joint_efforts(np.full(6, -3.0))
    assert np.array_equal(sim._efforts.pending, np.full(6, -2.0))
    with pytest.raises(ValueError, match="one value per joint"):
        sim.set_limits(max_effort=[1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        sim.set_limits(max_wrench=[0.0, 1.0])
    # lockstep: the period's commands are saturated as well
    ls = Simulator(uvms, uvms.neutral(), np.zeros(uvms.nv), DT, lockstep_steps=2)
    ls.submit("wrench", WrenchCommand(np.array([1e308, 0, 0, 0, 0, 0]), "body"))
    ls.submit("joints", np.full(6, 1e9))
    assert ls.period_commands["wrench"].W[0] == pytest.approx(ls.limits.max_force)
    assert np.array_equal(ls.period_commands["joints"], ls.limits.max_effort)


def test_model_effort_limits_are_used_when_the_model_has_them(uvms, monkeypatch):
    """Model.effort_limits (per velocity component, inf where none) gives the joint limits; inf falls back to the default."""
    limits = np.concatenate([np.full(uvms.nv - 6, np.inf), [10.0, np.inf, 5.0, 1.0, 1.0, 1.0]])  # (nv,): base first
    monkeypatch.setattr(type(uvms), "effort_limits", property(lambda self: limits), raising=False)
    sim = Simulator(uvms, uvms.neutral(), np.zeros(uvms.nv), DT)
    total = uvms.total_mass
    assert np.allclose(sim.limits.max_effort, [10.0, 100.0 * total, 5.0, 1.0, 1.0, 1.0])


def test_a_runaway_spin_pauses_before_the_integrator_loses_it():
    """No torque limit: a huge torque spins the body up; the simulation stops once a rate passes 1 rad per step,
    with every published-able value finite and within the bound."""
    model = Model.rigid_body("se3", gravity=(0.0, 0.0, 0.0), **BODY)
    sim = Simulator(model, model.neutral(), np.zeros(6), DT, max_wrench=[np.inf, np.inf])
    sim.set_wrench([0.0, 0.0, 0.0, 1e3, 0.0, 0.0])  # 2e4 rad/s^2 about x: 1000 rad/s after 50 ms
    n = sim.advance(10_000)
    assert 10 < n < 10_000 and sim.fault.kind == "runaway" and "rad per step" in sim.fault.reason
    assert sim.max_angular_rate == pytest.approx(1000.0)
    assert np.abs(sim.v).max() <= 1000.0 and np.all(np.isfinite(sim.q))
    assert sim.fault.stamp_ns == sim.stamp() and sim.fault.k == sim.k


def test_energy_from_nowhere_pauses_a_diverging_integrator():
    """Euler on a pendulum gains energy every period (no command does work): the energy-balance check stops it,
    before any rate bound; RK4 at the same step keeps running."""
    from scipy.spatial.transform import Rotation as R

    pendulum = Model.rigid_body("so3", mass=1.0, inertia=np.diag([0.01, 0.01, 0.01]), com=[0, 0, -0.5],
                                gravity=(0.0, 0.0, -9.81))
    q0 = pendulum.configuration_from_pose(np.zeros(3), R.from_euler("x", 1.0).as_quat())
    euler = Simulator(pendulum, q0, np.zeros(3), 0.01, integrator="euler")
    n = euler.advance(100_000)
    assert n < 100_000 and euler.fault.kind == "runaway" and "energy balance" in euler.fault.reason
    assert np.abs(euler.v).max() < euler.max_angular_rate
    rk4 = Simulator(pendulum, q0, np.zeros(3), 0.01)
    assert rk4.advance(3 * n) == 3 * n and rk4.fault is None


def test_rate_check_refuses_what_is_certainly_unstable():
    """The issue's fixed arm at 2 Hz (it diverged to 1e52) is refused with rk4; 1 kHz passes without a warning;
    3 Hz passes with a warning (and the runaway check stops it at once); Euler is refused where its energy
    doubles per period and warned about at ordinary rates."""
    from mbs_ros.dynamics.simulation.simulator import rate_check

    arm = Model.from_yaml(ROOT / "config" / "robots" / "arm_6dof_fixed.yaml")
    q0 = arm.configuration_from_pose(np.zeros(3), [0, 0, 0, 1.0], joints=[0.0, -0.6, 1.2, 0.0, 0.6, 0.0])
    r2 = rate_check(arm, q0, 0.5)
    assert r2.error is not None and "unstable" in r2.error and 5.0 < r2.omega_gravity < 10.0
    ok = rate_check(arm, q0, 1e-3)
    assert ok.error is None and ok.warning is None
    r3 = rate_check(arm, q0, 1 / 3)
    assert r3.error is None and "too low" in r3.warning
    sim = Simulator(arm, q0, np.zeros(6), 1 / 3)
    assert sim.advance(100) < 100 and sim.fault.kind == "runaway"
    assert rate_check(arm, q0, 0.02, "euler").error is not None
    assert "euler adds" in rate_check(arm, q0, 2e-3, "euler").warning
    # no gravity mode: nothing to refuse (the UVMS is neutrally buoyant); a slow rate is only warned about
    uvms = Model.from_yaml(UVMS)
    slow = rate_check(uvms, uvms.neutral(), 0.5)
    assert slow.omega_gravity == 0.0 and slow.error is None and "full effort" in slow.warning


def test_every_base_group_steps_like_step():
    """A held body wrench on every group: Simulator.advance is integrators.step with the same force."""
    for base in ("se3", "schoenflies", "se2", "so3", "so3xr3"):
        model = Model.rigid_body(base, **BODY)
        q0 = model.neutral()
        sim = Simulator(model, q0, np.zeros(model.nv), DT, integrator="heun")
        W, _ = sim.wrench_command([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
        sim.set_wrench(W)
        sim.advance(20)
        q, v = q0, np.zeros(model.nv)
        for _ in range(20):
            q, v = step(model.with_backend("numpy"), q, v, reference_tau(model, "body", W.W), DT, method="heun")
        assert np.abs(sim.q - q).max() < 1e-12 and np.abs(sim.v - v).max() < 1e-11, base


@pytest.mark.e2e
def test_no_rclpy_in_the_dynamics_package():
    """mbs_ros.dynamics (the simulator included) imports, and steps, without loading rclpy."""
    code = ("import sys, numpy as np; from mbs_ros.dynamics.simulation.simulator import Simulator; "
            "from mbs_ros.dynamics import Model; m = Model.rigid_body('se3'); "
            "s = Simulator(m, m.neutral(), np.zeros(6), 1e-3); s.set_wrench([1, 0, 0, 0, 0, 0]); s.advance(2); "
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('rclpy', 'rosidl_runtime_py', 'rcl_interfaces')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


LAZY_LOADS = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from numba.core.registry import CPUDispatcher
from contact_fixtures import dynamics_setup
from mbs_ros.cores.dynamics import make_simulator

def loaded():
    return {(name, k): len(v.overloads) for name, mod in list(sys.modules.items()) if name.startswith("mbs_ros")
            for k, v in list(vars(mod).items()) if isinstance(v, CPUDispatcher)}

model, s, q0, v0, limits, source = dynamics_setup(model_file=sys.argv[2], physics_rate=500.0)
sim = make_simulator(model, s, q0, v0, 0.002, limits, 0, source)
before = loaded()
sim.advance(1)
sim.advance(3)  # a late tick: the compiled loop of several steps
sim.set_wrench(np.ones(6), "body")
sim.set_joint_efforts(np.ones(model.nv - 6))
sim.advance(1)
sim.advance(3)
sim.set_wrench(np.ones(6), "world")
sim.advance(1)
sim.advance(3)
assert sim.fault is None, sim.fault
print(sorted(f"{name}.{k}" for (name, k), n in loaded().items() if n != before.get((name, k), 0)))
"""


@pytest.mark.e2e
def test_make_simulator_loads_what_the_stepping_calls():
    """A fresh process (nothing loaded yet): the simulator the dynamics node builds steps, one step and several
    at once, under body and world wrenches and joint efforts, without loading a compiled kernel: each load from
    numba's cache took tens of ms, inside the node's callback (the demo's dynamics node fell 0.06 s behind the wall
    clock at its first tick of two steps, loading the compiled loop)."""
    out = subprocess.run([sys.executable, "-c", LAZY_LOADS, str(ROOT / "test"), str(UVMS)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


# ------------------------------------------------------------------------------- time steps of the public API

BAD_STEPS = [-1e-3, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), "0.001", True, None]


def _entry_points(uvms):
    """Every public function that takes a time step, each called with ``dt`` and otherwise valid arguments."""
    from mbs_ros.dynamics import simulate
    from mbs_ros.dynamics.algorithms.constraints import Body, ConstrainedSystem
    from mbs_ros.dynamics.simulation.simulator import rate_check, velocity_bounds
    from mbs_ros.ephs.examples import harmonic_oscillator

    q0, v0 = uvms.neutral(), np.zeros(uvms.nv)
    body = ConstrainedSystem([Body("a", 1.0, np.diag([0.1, 0.2, 0.3]))], gravity=(0.0, 0.0, 0.0))
    oscillator = harmonic_oscillator(1.0, 2.0).flatten()
    return {
        "simulate": lambda dt: simulate(uvms, q0, v0, np.zeros(uvms.nv), dt, 3),
        "step": lambda dt: step(uvms, q0, v0, np.zeros(uvms.nv), dt),
        "step_of_a_function": lambda dt: step(uvms, q0, v0, lambda t, q, v: np.zeros(uvms.nv), dt),
        "Simulator": lambda dt: Simulator(uvms, q0, v0, dt),
        "rate_check": lambda dt: rate_check(uvms, q0, dt),
        "velocity_bounds": lambda dt: velocity_bounds(uvms, dt),
        "ConstrainedSystem.simulate": lambda dt: body.simulate(body.neutral(), np.zeros(body.nv), None, dt, 3),
        "Pattern.simulate": lambda dt: oscillator.simulate(oscillator.state({"pe": 0.1, "ke": 0.0}), dt, 3),
    }


def test_every_entry_point_refuses_a_time_step_that_is_not_positive_and_finite(uvms):
    """A negative step integrated backwards without a word, a zero or NaN one gave a run that never advanced or
    NaN states, and Simulator made any step <= 0 one nanosecond: each is a ValueError naming ``dt``."""
    for name, call in _entry_points(uvms).items():
        for dt in BAD_STEPS:
            with pytest.raises(ValueError, match=r"^dt must be a positive") as e:
                call(dt)
            assert "\n" not in str(e.value), (name, dt)
        call(1e-3)  # and a good one runs


def test_simulate_goes_forward_and_the_simulator_clock_counts_whole_nanoseconds(uvms):
    from mbs_ros.dynamics import simulate

    t, q, _v = simulate(uvms, uvms.neutral(), np.zeros(uvms.nv), np.zeros(uvms.nv), 2e-3, 4, t0=1.0)
    assert t.tolist() == pytest.approx([1.0, 1.002, 1.004, 1.006, 1.008], abs=1e-15) and q.shape == (5, uvms.nq)
    for dt in (1e-12, 4e-10, 2e6):  # below one nanosecond (was silently 1 ns), beyond any step a clock needs
        with pytest.raises(ValueError, match=r"^dt must be between 1e-09 s .* got "):
            Simulator(uvms, uvms.neutral(), np.zeros(uvms.nv), dt)
    assert Simulator(uvms, uvms.neutral(), np.zeros(uvms.nv), 1e-9).dt_ns == 1
    assert Simulator(uvms, uvms.neutral(), np.zeros(uvms.nv), 2.5e-3).dt_ns == 2_500_000
