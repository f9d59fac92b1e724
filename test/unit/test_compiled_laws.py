"""The compiled control laws (mbs_ros.dynamics.kernels.laws) against the numpy reference of mbs_ros.controllers.laws
and against Pinocchio, and the lockstep period in one compiled call against the same steps one call at a time.

References: ``ComputedTorque(..., compiled=False)`` / ``PDGravity(..., compiled=False)`` (the numpy code, the same
equations), Pinocchio's ``rnea(q, v, a)`` of the commanded acceleration (``M a + C v + g`` computed by another
library), and ``Simulator.advance(1)`` per step (the per-step path).
"""
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.controllers.laws import ComputedTorque, PDGravity
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.kernels import compiled
from mbs_ros.dynamics.kernels.laws import compiled_law_support
from mbs_ros.dynamics.simulation.simulator import Simulator, WrenchCommand

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not importable (or MBS_BACKEND=numpy)")

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
REL = 1e-12


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(ROBOTS / "uvms_6dof.yaml")


def rel(x, y):
    return float(np.abs(np.asarray(x) - np.asarray(y)).max() / max(1.0, np.abs(np.asarray(y)).max()))


def states(model, rng, n=40):
    """Random states, desired states and desired accelerations; every fourth with a base error near π."""
    for i in range(n):
        q, q_d = model.random_configuration(rng), model.random_configuration(rng)
        if i % 4 == 3 and model.base == "se3":  # attitude error of ~π - 0.01 about a random axis
            axis = rng.normal(size=3)
            axis *= (np.pi - 0.01) / np.linalg.norm(axis)
            q_d = model.integrate(q, np.concatenate([rng.normal(size=3), axis, np.zeros(model.nv - 6)]))
        yield q, 2.0 * rng.normal(size=model.nv), q_d, rng.normal(size=model.nv), rng.normal(size=model.nv)


def gains(model, rng):
    """Full symmetric positive-definite gain matrices, so every coupling between base and joints is exercised."""
    out = []
    for scale in (9.0, 6.0):
        A = rng.normal(size=(model.nv, model.nv))
        out.append(scale * np.eye(model.nv) + 0.1 * (A + A.T) / 2)
    return out


def test_computed_torque_compiled_equals_the_numpy_reference(uvms):
    rng = np.random.default_rng(19)
    kp, kd = gains(uvms, rng)
    fast, ref = ComputedTorque(uvms, kp, kd), ComputedTorque(uvms, kp, kd, compiled=False)
    assert fast.compiled and not ref.compiled
    worst = max(rel(fast(*s), ref(*s)) for s in states(uvms, rng))
    assert worst < REL, worst


def test_computed_torque_compiled_is_pinocchio_rnea_of_the_commanded_acceleration(uvms):
    """τ = M(q) a + C(q, v) v + g(q) = pin.rnea(q, v, a) with ``a`` the law's commanded acceleration (numpy)."""
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")
    pm = pin.buildModelFromXML(uvms.urdf, pin.JointModelFreeFlyer())
    pm.gravity.linear[:] = uvms.gravity
    assert tuple(pm.names[2:]) == uvms.joint_names
    pd = pm.createData()
    rng = np.random.default_rng(20)
    kp, kd = gains(uvms, rng)
    fast, ref = ComputedTorque(uvms, kp, kd), ComputedTorque(uvms, kp, kd, compiled=False)
    worst = 0.0
    for q, v, q_d, v_d, a_d in states(uvms, rng):
        a = ref.commanded_acceleration(q, v, q_d, v_d, a_d)
        worst = max(worst, rel(fast(q, v, q_d, v_d, a_d), pin.rnea(pm, pd, q, v, a)))
    assert worst < REL, worst


@pytest.mark.parametrize("robot", ["uvms_6dof.yaml", "arm_6dof_fixed.yaml"])
def test_pd_gravity_compiled_equals_the_numpy_reference(robot):
    model = Model.from_yaml(ROBOTS / robot)
    rng = np.random.default_rng(21)
    kp, kd = gains(model, rng)
    fast, ref = PDGravity(model, kp, kd), PDGravity(model, kp, kd, compiled=False)
    assert fast.compiled
    worst = max(rel(fast(q, v, q_d, v_d), ref(q, v, q_d, v_d)) for q, v, q_d, v_d, _ in states(model, rng))
    assert worst < REL, worst


def test_computed_torque_on_a_fixed_arm_with_gravity_equals_the_reference():
    model = Model.from_yaml(ROBOTS / "arm_6dof_fixed.yaml")
    assert np.any(model.gravity)
    rng = np.random.default_rng(22)
    kp, kd = gains(model, rng)
    fast, ref = ComputedTorque(model, kp, kd), ComputedTorque(model, kp, kd, compiled=False)
    assert fast.compiled
    assert max(rel(fast(*s), ref(*s)) for s in states(model, rng)) < REL


def test_a_space_without_kernels_keeps_the_numpy_law():
    """Other base groups and the numpy backend fall back; compiled=True says why it cannot."""
    body = Model.rigid_body("so3xr3", 2.0, np.diag([0.1, 0.2, 0.3]))
    assert "so3xr3" in compiled_law_support(body)
    assert not ComputedTorque(body, 4.0, 4.0).compiled
    with pytest.raises(ValueError, match="so3xr3"):
        ComputedTorque(body, 4.0, 4.0, compiled=True)
    numpy_model = Model.from_yaml(ROBOTS / "uvms_6dof.yaml").with_backend("numpy")
    assert not PDGravity(numpy_model, 4.0, 4.0).compiled


def _pair(model, seed, joint_limits=True):
    rng = np.random.default_rng(seed)
    q0 = model.neutral()
    q0[model.nq - 6:] = rng.uniform(-1.0, 1.0, 6)
    return [Simulator(model, q0, np.zeros(model.nv), 1e-3, lockstep_steps=4, joint_limits=joint_limits)
            for _ in range(2)], rng


@pytest.mark.parametrize("scale", [1.0, 20.0], ids=["held", "runaway"])
def test_a_period_in_one_call_is_the_same_steps_one_at_a_time(uvms, scale):
    """Same states, work and step count bit for bit; with large commands the runaway fault is the same step with
    the same reason (the one-call path stops where the per-step check would). The held commands drive a joint to
    its URDF limit (±π), so the contact steps are compared too; the runaway is the subject of the large commands,
    so their joints have no limits (with them the joints stop at ±π and nothing runs away)."""
    (one_call, per_step), rng = _pair(uvms, 3, joint_limits=scale == 1.0)
    for _ in range(300):
        W, E = scale * rng.normal(size=6), scale * rng.normal(size=6)
        for sim in (one_call, per_step):
            sim.submit("wrench", WrenchCommand(W))
            sim.submit("joints", E)
        taken = one_call.advance_period()
        taken_single = 0
        if per_step.start_period():
            taken_single = sum(per_step.advance(1) for _ in range(4))
        assert taken == taken_single
        assert np.array_equal(one_call.q, per_step.q) and np.array_equal(one_call.v, per_step.v)
        assert one_call.work == per_step.work and one_call.k == per_step.k
        assert one_call.fault == per_step.fault
        if one_call.fault is not None:
            break
    assert (one_call.fault is not None) == (scale > 1.0), one_call.fault
    assert (one_call.contact_steps > 0) == (scale == 1.0), one_call.contact_steps


def test_a_command_that_times_out_within_one_advance_stops_the_one_call_steps(uvms):
    """A held command expiring in the middle of ``advance(n)``: the steps after it run with zero, as when each step
    is its own call (the one-call steps stop at the expiry)."""
    (many, single), rng = _pair(uvms, 4)
    many, single = (Simulator(uvms, s.q, s.v, 1e-3, cmd_timeout=0.0035) for s in (many, single))
    W, E = 3.0 * rng.normal(size=6), 3.0 * rng.normal(size=6)
    timeouts = []
    single.on_timeout = timeouts.append
    for sim in (many, single):
        sim.set_wrench(W)
        sim.set_joint_efforts(E)
    assert many.advance(10) == 10
    assert sum(single.advance(1) for _ in range(10)) == 10
    assert timeouts == ["wrench", "joints"] and not np.any(many.applied_efforts)
    assert np.array_equal(many.q, single.q) and np.array_equal(many.v, single.v) and many.work == single.work


@pytest.mark.parametrize("space", ["se3", "joints"])
@pytest.mark.parametrize("interpolation", ["quintic", "cubic"])
def test_reference_segments_compiled_equal_the_numpy_reference(space, interpolation):
    """Waypoints with velocities (and accelerations), sampled across every segment and beyond both ends."""
    from mbs_ros.controllers.reference import Reference
    from mbs_ros.dynamics.lie import SE3

    rng = np.random.default_rng(23)
    n = 5
    times = np.cumsum(rng.uniform(0.5, 2.0, n))
    positions = np.array([SE3.random(rng) if space == "se3" else rng.normal(size=6) for _ in range(n)])
    vel = rng.normal(size=(n, 6))
    acc = rng.normal(size=(n, 6)) if interpolation == "quintic" else None
    grp = SE3 if space == "se3" else 6
    fast = Reference(grp, times, positions, vel, acc, interpolation)
    ref = Reference(grp, times, positions, vel, acc, interpolation, compiled=False)
    worst = 0.0
    for t in np.linspace(times[0] - 0.5, times[-1] + 0.5, 400):
        worst = max(worst, *(rel(x, y) for x, y in zip(fast(t), ref(t))))
    assert worst < REL, worst
