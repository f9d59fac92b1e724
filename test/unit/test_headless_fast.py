"""The headless fast path (mbs_ros.headless.fast, mbs_ros.dynamics.kernels.period): its records are the Python
path's byte for byte on the scenarios it takes, a period it cannot take hands the run to the Python path (the same
records again), and each compiled piece gives the bits of the numpy code it replaces on random inputs.
"""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers.reference import Reference
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation import actuators
from mbs_ros.dynamics.kernels import period as cp
from mbs_ros.dynamics.lie import SE3
from mbs_ros.headless import fast, run_scenario
from mbs_ros.headless import run as headless_run

pytestmark = pytest.mark.skipif(not cp.AVAILABLE, reason="the fast path needs numba")

FIELDS = ("stamp_ns", "q", "v", "q_d", "v_d", "tau", "tau_applied", "saturated", "energy_residual",
          "contact_work", "contact_power")
UVMS_1K = {"physics_rate": 1000.0, "control_rate": 500.0}


@pytest.fixture
def kernel_codes(monkeypatch):
    """``(row, code)`` of every run_periods call in the test (the row it stopped at, or the end)."""
    codes = []
    real = cp.run_periods

    def spy(*args):
        out = real(*args)
        codes.append((int(out[0]), int(out[1])))
        return out

    monkeypatch.setattr(fast.cp, "run_periods", spy)
    return codes


LIMIT = cp.STOP_REASONS.index("a joint came near its limit (the contact step takes over)")


def _same_records(a, b):
    assert a.fault == b.fault and a.duration == b.duration and a.robots.keys() == b.robots.keys()
    for ns in a.robots:
        ra, rb = a.robots[ns], b.robots[ns]
        assert ra.control_errors == rb.control_errors
        for f in FIELDS:
            x, y = getattr(ra, f), getattr(rb, f)
            assert (x is None) == (y is None), (ns, f)
            if x is not None:
                assert x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes(), (ns, f)


@pytest.mark.parametrize("name, duration, overrides", [("vehicle_manipulator", 1.0, UVMS_1K),
                                                       ("vehicle_manipulator", 0.3, None),
                                                       ("fleet", 0.4, None), ("solo12", 0.4, None),
                                                       ("manipulator", 0.5, None), ("panda", 0.5, None)])
def test_the_fast_path_gives_the_python_paths_records_byte_for_byte(kernel_codes, name, duration, overrides):
    """The scenarios the fast path takes (one robot at 1 kHz / 500 Hz and at the scenario's 500 / 100 Hz, three
    robots, a legged robot with joint limits on, a fixed-base arm, the Panda with joint damping compensated by the
    law and locked finger joints): every period in the kernel (one call per robot, each run to the
    end), and every recorded number has the Python path's bits."""
    slow = run_scenario(name, duration=duration, overrides=overrides, fast=False)
    assert kernel_codes == []
    quick = run_scenario(name, duration=duration, overrides=overrides)
    rows = len(quick.robots[next(iter(quick.robots))].t)
    assert kernel_codes == [(rows, 0)] * len(quick.robots)
    assert slow.fault is None
    _same_records(slow, quick)


def _uvms_scenario(tmp_path, robots):
    """vehicle_manipulator's file with its robot entry once per ``(namespace, joint 0 start, joint 0 from 2 s)``."""
    from mbs_ros.scenario.schema import package_root

    src = (package_root() / "config" / "scenarios" / "vehicle_manipulator.yaml").read_text()
    head, robot = src.split("robots:\n")
    robot = robot.replace("model: config/", f"model: {package_root()}/config/")
    entries = []
    for ns, start, at2 in robots:
        entries.append(robot.replace("namespace: uvms", f"namespace: {ns}")
                       .replace("joint_positions: [0.0, 0.6, -1.2", f"joint_positions: [{start}, 0.6, -1.2")
                       .replace("{time: 2.0, positions: [0.6,", f"{{time: 2.0, positions: [{at2},")
                       .replace("{time: 4.0, positions: [0.8,", f"{{time: 4.0, positions: [{at2},"))
    path = tmp_path / "uvms_limits.yaml"
    path.write_text(head + "robots:\n" + "".join(entries))
    return path


def test_a_start_within_the_limit_margin_leaves_every_period_to_the_python_path(tmp_path, kernel_codes):
    """The first joint started within the limit margin (π − 0.5 mm; the URDF limit ±π): the Python path takes a
    contact step at once, so the kernel stops before its first period and the Python path takes them all, byte for
    byte as without the fast path."""
    path = _uvms_scenario(tmp_path, [("uvms", 3.1411, 0.6)])
    quick = run_scenario(path, duration=0.2)
    assert kernel_codes == [(1, LIMIT)]
    slow = run_scenario(path, duration=0.2, fast=False)
    _same_records(slow, quick)


def test_a_joint_reaching_its_limit_mid_run_hands_the_rest_to_the_python_path(tmp_path, kernel_codes):
    """Two robots; the second's first joint is driven to 3.1415 rad from t = 2 s on and comes into the limit's margin
    (π − 1 mm) as it settles there:
    the first robot's kernel runs to the end, the second's stops where the joint comes near the limit, the first is
    run again to that period, and the Python path takes the rest (contact steps at the limit for the second):
    every record byte for byte as without the fast path."""
    path = _uvms_scenario(tmp_path, [("uvms_a", 0.0, 0.6), ("uvms_b", 0.0, 3.1415)])
    quick = run_scenario(path, duration=3.0)
    rows = len(quick.robots["uvms_a"].t)
    assert len(kernel_codes) == 3 and kernel_codes[0] == (rows, 0)
    stop, code = kernel_codes[1]
    assert code == LIMIT and 100 < stop < rows and kernel_codes[2] == (stop, 0)
    slow = run_scenario(path, duration=3.0, fast=False)
    assert slow.fault is None
    _same_records(slow, quick)


@pytest.mark.parametrize("name", ["panda", "vehicle_manipulator"])
def test_a_stop_mid_run_leaves_the_simulator_and_controller_as_the_python_path_has_them(monkeypatch, name):
    """The kernel made to stop before row 37 (as for a runaway there): the Python path takes the rest from the state,
    work, passive work and dissipated energy, commands and time base the kernel hands over; the records are byte
    for byte those without the fast path (the Panda: joint damping, so the passive work is handed over too)."""
    real = cp.run_periods

    def cut(*args):
        *rest, row_end = args
        stop = min(row_end, 37)
        row, code = real(*rest, stop)
        return (row, 1) if (row == stop < row_end and code == 0) else (row, code)

    monkeypatch.setattr(fast.cp, "run_periods", cut)
    quick = run_scenario(name, duration=0.5)
    slow = run_scenario(name, duration=0.5, fast=False)
    assert len(quick.robots[next(iter(quick.robots))].t) > 40
    _same_records(slow, quick)


def test_eligible_names_why_a_robot_is_not_the_common_case():
    """A planar vehicle and the estimator in the loop are not taken, and the reason says so; the UVMS and the
    fixed-base arm are."""
    for name, expected in (("vehicle", "not a compiled model on an SE(3) or a fixed base"),
                           ("vehicle_manipulator_sensors", "an estimator in the loop"),
                           ("vehicle_manipulator", None), ("manipulator", None)):
        scn = headless_run._lockstep(headless_run.load_scenario(name))
        specs = headless_run._robot_specs(scn)
        robots = [headless_run._Robot(by_role, headless_run._shared_loader()) for by_role in specs.values()]
        for r in robots:
            r.allocate(2)
            r.answer()
            r.install_reference()
        assert [fast.eligible(r) for r in robots] == [expected]


# ----------------------------------------------------------------------------- the compiled pieces, bit for bit


def test_np_dot_in_the_kernels_is_numpys_product():
    """The kernels take dot and matrix-vector products with np.dot so that they are numpy's (the same BLAS
    routine, fused multiply-adds in the same order): random vectors of the sizes used, and 6×6 matrices."""
    import numba

    dot = numba.njit(lambda a, b: np.dot(a, b))
    rng = np.random.default_rng(3)
    for n in (3, 4, 6, 12, 13, 18):
        for _ in range(300):
            a, b = rng.normal(size=n) * 10.0 ** rng.uniform(-3, 3, n), rng.normal(size=n)
            assert dot(a, b) == float(a @ b)
    for _ in range(300):
        A, x = rng.normal(size=(6, 6)), rng.normal(size=6)
        assert dot(A, x).tobytes() == (A @ x).tobytes()


def test_the_limits_are_actuators_limits_bit_for_bit():
    """scale_to_norm, saturate_wrench and clip_efforts against mbs_ros.dynamics.simulation.actuators on random wrenches and
    efforts, about half of them beyond the limits."""
    rng = np.random.default_rng(5)
    out, out6 = np.empty(3), np.empty(6)
    for _ in range(2000):
        x = rng.normal(size=3) * 10.0 ** rng.uniform(-2, 3)
        limit = float(rng.uniform(0.1, 200.0))
        ref, sat = actuators.scale_to_norm(x, limit)
        assert cp.scale_to_norm(x, limit, out) == sat and out.tobytes() == np.asarray(ref).tobytes()
        W = rng.normal(size=6) * 10.0 ** rng.uniform(-2, 3)
        lim = actuators.CommandLimits(float(rng.uniform(1, 100)), float(rng.uniform(1, 100)), np.ones(6))
        ref, sat = actuators.saturate_wrench(W, lim)
        assert cp.saturate_wrench(W, lim.max_force, lim.max_torque, out6) == sat
        assert out6.tobytes() == np.asarray(ref).tobytes()
        e, m = rng.normal(size=6) * 50.0, rng.uniform(1.0, 60.0, 6)
        ref, clipped = actuators.clip_efforts(e, m)
        assert cp.clip_efforts(e, m, out6) == clipped and out6.tobytes() == np.asarray(ref).tobytes()


def test_the_controllers_state_is_the_ros_paths_conversion_bit_for_bit():
    """controller_state against what the ROS path computes from odom and joint_states (StateView's pose and twist,
    reference_input.base_state, joint_state, state_vector) on random UVMS states, joints in another order on
    joint_states; a state out of the bounds is refused by both."""
    model = Model.from_yaml(_robot_yaml("uvms_6dof.yaml"))
    rng = np.random.default_rng(7)
    nj = len(model.joint_names)
    perm = rng.permutation(nj)
    names = [model.joint_names[i] for i in perm]  # joint_states' order
    jstate = np.array([names.index(n) for n in model.joint_names], dtype=np.int64)
    q_c, v_c = np.empty(model.nq), np.empty(model.nv)
    lo, hi = ri.QUATERNION_NORM
    for _ in range(1000):
        q = model.random_configuration(rng)
        q[3:7] *= 1.0 + rng.normal() * 1e-12  # an integrator's quaternion: unit to about rounding
        q[:3] *= 10.0 ** rng.uniform(-3, 3)
        v = rng.normal(size=model.nv) * 10.0 ** rng.uniform(-2, 2)
        qs, vs = q.copy(), v.copy()
        qs[7:], vs[6:] = q[7:][perm], v[6:][perm]  # the simulator's joint order is joint_states'
        p, quat = model.pose(q)
        base = ri.base_state(np.array(p.tolist()), np.array(quat.tolist()), np.array(model.twist(q, v).tolist()))
        joints = ri.joint_state(model.joint_names, names, q[7:][perm], v[6:][perm])
        q_ref, v_ref = ri.state_vector(model, 6, base, joints)
        assert cp.controller_state(qs, vs, jstate, ri.MAX_POSITION, ri.MAX_STATE_VELOCITY, lo, hi, q_c, v_c)
        assert q_c.tobytes() == q_ref.tobytes() and v_c.tobytes() == v_ref.tobytes()
    q[0] = 2.0 * ri.MAX_POSITION
    with pytest.raises(ri.Rejected):
        ri.base_state(q[:3], q[3:7], v[:6])
    assert not cp.controller_state(q, v, jstate, ri.MAX_POSITION, ri.MAX_STATE_VELOCITY, lo, hi, q_c, v_c)
    # a fixed base: the joints alone (state_vector without a base part)
    arm = Model.from_urdf(str(_robot_yaml("arm_6dof.urdf.xacro")), base="fixed")
    q_c, v_c = np.empty(arm.nq), np.empty(arm.nv)
    jstate = np.arange(arm.nq, dtype=np.int64)
    for _ in range(200):
        q, v = arm.random_configuration(rng), rng.normal(size=arm.nv) * 10.0 ** rng.uniform(-2, 2)
        joints = ri.joint_state(arm.joint_names, arm.joint_names, q, v)
        q_ref, v_ref = ri.state_vector(arm, 0, None, joints)
        assert cp.controller_state(q, v, jstate, ri.MAX_POSITION, ri.MAX_STATE_VELOCITY, lo, hi, q_c, v_c)
        assert q_c.tobytes() == q_ref.tobytes() and v_c.tobytes() == v_ref.tobytes()


def test_reference_at_is_the_references_value_bit_for_bit():
    """reference_at against Reference.__call__ (its compiled segments) on SE(3) and on six joints, at random
    nanosecond times before, within and after the waypoints."""
    rng = np.random.default_rng(11)
    base = Reference(SE3, [0.0, 0.7, 2.0, 3.1], [SE3.random(rng) for _ in range(4)])
    joints = Reference(6, [0.0, 1.0, 2.5], rng.normal(size=(3, 6)), velocities=rng.normal(size=(3, 6)))
    for ref, code in ((base, 1), (joints, 0)):
        se3, coeffs = ref.compiled_segments
        assert se3 == bool(code)
        q, v, a = np.empty(ref.nq), np.empty(ref.nv), np.empty(ref.nv)
        start = int(rng.integers(-10**9, 10**9))
        for t_ref in rng.integers(start - 10**9, start + 4 * 10**9, 500):
            cp.reference_at(code, start, ref.times, ref.positions, coeffs, int(t_ref), q, v, a)
            want = ref((int(t_ref) - start) * 1e-9)
            for got, w in zip((q, v, a), want):
                assert got.tobytes() == np.asarray(w, dtype=float).tobytes()


def _robot_yaml(name):
    from mbs_ros.scenario.schema import package_root

    return package_root() / "config" / "robots" / name
