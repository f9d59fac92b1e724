"""The sensor suite's kinematics and sampling (mbs_ros/sensors/suite.py, algorithms.link_motion): the links' body
accelerations against Pinocchio's classical accelerations on a real robot (example-robot-data's UR5 on a
free-flying base), the IMU's lever-arm specific force against the textbook closed form written in world axes on a
spinning, accelerating rigid body, +g upwards at rest whatever the mounting, and the streams: bit-identical for a
seed however the simulation is chunked, different for different seeds, published after their delay with the
right stamps.

Figures (the errors printed): ``python -m pytest -q -s test/unit/test_sensor_suite.py``.
"""
import math
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, ModelWarning
from mbs_ros.dynamics.algorithms.multibody import body_accelerations, link_motion
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.sensors.spec import parse_sensors
from mbs_ros.sensors.suite import SensorSuite

ROOT = Path(__file__).resolve().parents[2]
ROV = ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml"
ARM = ROOT / "config" / "robots" / "arm_6dof_fixed.yaml"
QUIET = {k: 0.0 for k in ("gyroscope_noise_density", "gyroscope_random_walk", "accelerometer_noise_density",
                          "accelerometer_random_walk")}


def imu(name, link, rate, xyz=(0, 0, 0), rpy=(0, 0, 0), **extra):
    return {"name": name, "type": "imu", "link": link, "rate": rate, "pose": {"xyz": list(xyz), "rpy": list(rpy)},
            **extra}


def quat_matrix(x, y, z, w):
    """Rotation matrix of a unit quaternion (xyzw), the textbook formula."""
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def rpy_matrix(r, p, y):
    """URDF rpy: R = Rz(y) Ry(p) Rx(r), from the elementary rotations."""
    def rot(axis, t):
        c, s = math.cos(t), math.sin(t)
        i, j = [(1, 2), (2, 0), (0, 1)][axis]
        R = np.eye(3)
        R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
        return R
    return rot(2, y) @ rot(1, p) @ rot(0, r)


# ------------------------------------------------------------------------------ body accelerations vs Pinocchio
def _ur5_free_flyer():
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed (requirements-dev.txt)")
    path = next(Path(dist.locate_file(f)) for f in dist.files if str(f).endswith("ur_description/urdf/ur5_robot.urdf"))
    root = ET.parse(path).getroot()  # the UR5 hangs from a "world" link: take it off to let the base fly
    for el in list(root):
        if (el.tag == "link" and el.get("name") == "world") or (
                el.tag == "joint" and el.find("parent").get("link") == "world"):
            root.remove(el)
    xml = ET.tostring(root, encoding="unicode")
    return pin, xml


@pytest.mark.parametrize("base", ["se3", "fixed", "so3xr3"])
def test_body_accelerations_equal_pinocchio_classical_accelerations_on_the_ur5(base):
    """Every link of the UR5 (10 links: the 6 joints' children and the fixed tool/ee frames) at 5 random states:
    ``[v̇ + ω × v; ω̇]`` from body_accelerations and link_motion's twist equals
    pin.getFrameClassicalAcceleration (LOCAL), the twist pin.getFrameVelocity, the pose oMf, to 1e-9. The
    SO(3)×R³ base (v = [ṗ world; ω body]) is compared with Pinocchio's free flyer at the same motion
    (``[Rᵀṗ; ω]``, ``[Rᵀp̈ − ω × Rᵀṗ; ω̇]``)."""
    pin, xml = _ur5_free_flyer()
    ours = Model.from_urdf(xml, base=base)
    pm = pin.buildModelFromXML(xml) if base == "fixed" else pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
    pd = pm.createData()
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(5):
        q = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        q_ours = q.copy()
        v, a = rng.standard_normal(pm.nv), rng.standard_normal(pm.nv)
        v_ours, a_ours = v.copy(), a.copy()
        if base == "so3xr3":  # the same motion in SO(3)×R³ coordinates
            R = quat_matrix(*q[3:7])
            v_ours[:3] = R @ v[:3]
            a_ours[:3] = R @ (a[:3] + np.cross(v[3:6], v[:3]))
        T, V, _ = link_motion(ours, q_ours, v_ours)
        A = body_accelerations(ours, q_ours, v_ours, a_ours)
        assert np.array_equal(A, ours.body_accelerations(q_ours, v_ours, a_ours))
        pin.forwardKinematics(pm, pd, q, v, a)
        pin.updateFramePlacements(pm, pd)
        for i, name in enumerate(ours.link_names):
            fid = pm.getFrameId(name)
            classical = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL).vector
            mine = np.r_[A[i, :3] + np.cross(V[i, 3:], V[i, :3]), A[i, 3:]]
            worst = max(worst, np.abs(mine - classical).max(),
                        np.abs(V[i] - pin.getFrameVelocity(pm, pd, fid, pin.LOCAL).vector).max(),
                        np.abs(T[i] - pd.oMf[fid].homogeneous).max())
    print(f"\nbody accelerations vs Pinocchio, UR5 {base}: worst abs error {worst:.2e} over 10 links x 5 states")
    assert len(ours.link_names) == 10
    assert worst < 1e-9


def test_body_accelerations_of_a_mimic_model_are_the_full_trees():
    """A model reduced by mimic joints: the links move as in the full tree at the mapped state (E(q), G v, G a)."""
    xml = """<robot name="m"><link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"
    ixz="0" iyz="0"/></inertial></link>
    <link name="l1"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/>
    </inertial></link><link name="l2"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0"
    iyz="0"/></inertial></link>
    <joint name="j1" type="revolute"><parent link="b"/><child link="l1"/><axis xyz="0 0 1"/>
    <origin xyz="0.3 0 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
    <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><axis xyz="0 1 0"/>
    <origin xyz="0.2 0.1 0"/><mimic joint="j1" multiplier="2" offset="0.1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint></robot>"""
    model = Model.from_urdf(xml, base="se3")
    with pytest.warns(ModelWarning, match="mimic"):
        independent = Model.from_urdf(xml, base="se3", mimic="independent")
    rng = np.random.default_rng(3)
    q, v, a = model.random_configuration(rng), rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    qf, vf, af = q.copy(), v.copy(), a.copy()
    qf = np.r_[q, 2 * q[-1] + 0.1]
    vf, af = np.r_[v, 2 * v[-1]], np.r_[a, 2 * a[-1]]
    got, ref = link_motion(model, q, v, a), link_motion(independent, qf, vf, af)
    for x, y in zip(got, ref):
        assert np.array_equal(x, y)
    # the suite's compiled recursion maps the mimic joint too: an IMU on l2 sees l2's rate
    ss = parse_sensors({"sensors": [imu("imu", "l2", 100, noise=QUIET)]}, "t.yaml", model, 0.01)
    reading = SensorSuite(model, ss, 0.01).run(Simulator(model, q, v, 0.01), 0)[0]
    assert np.abs(reading.values["angular_velocity"] - ref[1][model.link_names.index("l2"), 3:]).max() < 1e-12


def test_imus_on_every_ur5_link_read_pinocchios_link_motion():
    """The suite's compiled tree recursion: an IMU (noise off, zero pose) on each of the UR5's 10 links, the base
    flying under a wrench and the joints under efforts: the gyro is Pinocchio's LOCAL angular velocity and the
    accelerometer its classical acceleration minus gravity in link axes, Pinocchio run at the same (q, v) and the
    model's forward-dynamics acceleration, to 1e-9."""
    pin, xml = _ur5_free_flyer()
    model = Model.from_urdf(xml, base="se3")
    pm = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
    pd = pm.createData()
    rng = np.random.default_rng(21)
    dt = 0.001
    ss = parse_sensors({"sensors": [imu(f"imu{i}", link, 1000, noise=QUIET) for i, link in
                                    enumerate(model.link_names)]}, "t.yaml", model, dt)
    sim = Simulator(model, model.random_configuration(rng), rng.normal(size=model.nv), dt)
    sim.set_wrench(rng.normal(scale=20, size=6))
    sim.set_joint_efforts(rng.normal(scale=5, size=6))
    readings = [r for r in SensorSuite(model, ss, dt).run(sim, 1) if r.k == 1]
    q, v = sim.q, sim.v
    a = model.forward_dynamics(q, v, sim.generalized_force())
    pin.forwardKinematics(pm, pd, q, v, a)
    pin.updateFramePlacements(pm, pd)
    worst = 0.0
    for rd, name in zip(readings, model.link_names):
        fid = pm.getFrameId(name)
        R = pd.oMf[fid].rotation
        f = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL).linear - R.T @ [0, 0, -9.81]
        w = pin.getFrameVelocity(pm, pd, fid, pin.LOCAL).angular
        worst = max(worst, np.abs(rd.values["linear_acceleration"] - f).max(),
                    np.abs(rd.values["angular_velocity"] - w).max())
    print(f"\nIMUs on the UR5's links vs Pinocchio: worst error {worst:.1e}")
    assert len(readings) == 10 and worst < 1e-9


# ------------------------------------------------------------------------------------------- lever arm, rest
@pytest.mark.parametrize("seed,base", [(0, "se3"), (1, "se3"), (2, "se3"), (3, "so3xr3")])
def test_lever_arm_specific_force_equals_the_closed_form_on_a_spinning_accelerating_body(seed, base):
    """An IMU at offset r (random, ~0.5 m) with a random mounting rotation on a rigid body (c.o.m. at its origin,
    full inertia) moving with a random twist under a random body wrench [F; τ]: the reading (noise off) at the
    step after the wrench starts equals ``R_wsᵀ (a_o + α × r_w + ω × (ω × r_w) − g)`` with ``a_o = R F/m + g``
    and ``α = R I⁻¹(τ − ω_b × I ω_b)`` (Newton–Euler, world axes, written here), and the gyro ``R_lsᵀ ω_b``, to
    1e-9. On SE(3) and on SO(3)×R³ (v = [ṗ world; ω body]: the base's twist rate has the Ḃ v term)."""
    rng = np.random.default_rng(seed)
    Rq = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    inertia = Rq @ np.diag(rng.uniform(0.5, 2.0, 3)) @ Rq.T
    mass = 2.5
    model = Model.rigid_body(base, mass=mass, inertia=inertia)
    r_b, rpy = rng.normal(scale=0.5, size=3), rng.uniform(-3, 3, size=3)
    dt = 0.01
    ss = parse_sensors({"sensors": [imu("imu", "base_link", 100, r_b, rpy, noise=QUIET)]}, "t.yaml", model, dt)
    q0 = model.random_configuration(rng)
    sim = Simulator(model, q0, rng.normal(scale=2.0, size=6), dt)
    W = rng.normal(scale=5.0, size=6)
    sim.set_wrench(W, frame="body")
    suite = SensorSuite(model, ss, dt)
    readings = suite.run(sim, 1)
    assert [r.k for r in readings] == [0, 1] and np.array_equal(sim.applied_wrench_body(), W)
    got = readings[1].values
    R = quat_matrix(*sim.q[3:7])
    w_b = sim.v[3:]
    w_w, r_w = R @ w_b, R @ r_b
    g = np.array([0.0, 0.0, -9.81])
    a_o = R @ W[:3] / mass + g
    alpha = R @ np.linalg.solve(inertia, W[3:] - np.cross(w_b, inertia @ w_b))
    R_ws = R @ rpy_matrix(*rpy)
    f = R_ws.T @ (a_o + np.cross(alpha, r_w) + np.cross(w_w, np.cross(w_w, r_w)) - g)
    err_f = np.abs(got["linear_acceleration"] - f).max()
    err_w = np.abs(got["angular_velocity"] - rpy_matrix(*rpy).T @ w_b).max()
    print(f"\nlever arm {base} seed {seed}: |f| = {np.linalg.norm(f):.3f} m/s², |ω| = {np.linalg.norm(w_b):.2f} rad/s, "
          f"|r| = {np.linalg.norm(r_b):.2f} m: error {err_f:.1e} m/s² (gyro {err_w:.1e} rad/s)")
    assert np.linalg.norm(np.cross(w_w, np.cross(w_w, r_w))) > 0.1 and np.linalg.norm(np.cross(alpha, r_w)) > 0.1
    assert err_f < 1e-9 and err_w < 1e-9


def test_an_imu_at_rest_reads_plus_g_upwards_on_every_link_and_mounting():
    """The 6-DOF arm held still at a random pose by its gravity torques (efforts = g(q), so a = 0): an IMU on each
    of its links with a random offset and rotation reads, turned to world axes, (0, 0, +9.81) to 1e-9 and a zero
    rate; the same on a free body hovering under its weight."""
    rng = np.random.default_rng(11)
    arm = Model.from_yaml(ARM)
    dt = 0.001
    sensors = [imu(f"imu_{i}", link, 1000, rng.normal(scale=0.3, size=3), rng.uniform(-3, 3, 3), noise=QUIET)
               for i, link in enumerate(arm.link_names)]
    ss = parse_sensors({"sensors": sensors}, "t.yaml", arm, dt)
    q = arm.random_configuration(rng)
    sim = Simulator(arm, q, np.zeros(arm.nv), dt)
    sim.set_joint_efforts(arm.gravity_forces(q))
    readings = [r for r in SensorSuite(arm, ss, dt).run(sim, 1) if r.k == 1]  # a = 0: the step stays put
    q = sim.q
    assert np.abs(sim.v).max() < 1e-12
    poses = arm.link_poses(q)
    worst = 0.0
    for rd, spec in zip(readings, ss.sensors):
        R_ws = poses[arm.link_names.index(spec.link)][:3, :3] @ spec.T_link_sensor[:3, :3]
        worst = max(worst, np.abs(R_ws @ rd.values["linear_acceleration"] - [0, 0, 9.81]).max(),
                    np.abs(rd.values["angular_velocity"]).max())
    assert len(readings) == len(arm.link_names) and worst < 1e-9
    body = Model.rigid_body("se3", mass=3.0)
    ss = parse_sensors({"sensors": [imu("imu", "base_link", 100, (0.2, -0.1, 0.3), (0.3, -1.0, 2.0), noise=QUIET)]},
                       "t.yaml", body, 0.01)
    q = body.random_configuration(rng)
    sim = Simulator(body, q, np.zeros(6), 0.01)
    sim.set_wrench(np.r_[0, 0, 3.0 * 9.81, 0, 0, 0], frame="world")
    rd = SensorSuite(body, ss, 0.01).run(sim, 1)[1]
    R_ws = quat_matrix(*sim.q[3:7]) @ rpy_matrix(0.3, -1.0, 2.0)
    assert np.abs(R_ws @ rd.values["linear_acceleration"] - [0, 0, 9.81]).max() < 1e-9


def test_the_base_path_equals_the_tree_path():
    """An IMU on the ROV's base link alone (the base body's motion only) and beside an IMU on an arm link (then the
    bodies' motion comes from the compiled tree recursion, the base IMU reading its row 0) read the same to
    1e-12."""
    model = Model.from_yaml(ROV)
    rng = np.random.default_rng(5)
    dt = 0.001
    mount = dict(xyz=(0.1, -0.05, 0.2), rpy=(0.4, 0.2, -1.0), noise=QUIET)
    alone = parse_sensors({"sensors": [imu("imu", "base_link", 1000, **mount)]}, "t.yaml", model, dt)
    both = parse_sensors({"sensors": [imu("imu", "base_link", 1000, **mount),
                                      imu("arm", "alpha_link_c", 1000, noise=QUIET)]}, "t.yaml", model, dt)
    q, v = model.random_configuration(rng), rng.normal(scale=0.5, size=model.nv)
    thrusts = rng.normal(scale=5, size=len(model.thruster_names))
    out = []
    for ss in (alone, both):
        sim = Simulator(model, q, v, dt)
        sim.set_thrusts(thrusts)
        out.append(SensorSuite(model, ss, dt).run(sim, 3)[-len(ss.sensors)].values)
    for key in ("linear_acceleration", "angular_velocity"):
        assert np.abs(out[0][key] - out[1][key]).max() < 1e-12


TWO_LINKS = """<robot name="two"><link name="body"><inertial><origin xyz="0.05 -0.02 0.01"/><mass value="3"/>
<inertia ixx="0.2" iyy="0.3" izz="0.4" ixy="0.01" ixz="0" iyz="0.02"/></inertial></link>
<link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.05" izz="0.05"
ixy="0" ixz="0" iyz="0"/></inertial></link>
<joint name="j" type="revolute"><parent link="body"/><child link="arm"/><origin xyz="0.3 0.1 0" rpy="0.2 0 0.3"/>
<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="5"/></joint></robot>"""


@pytest.mark.parametrize("base", ["fixed", "se3", "so3xr3", "se2", "schoenflies", "so3"])
def test_the_base_path_equals_the_tree_path_on_every_base_group(base):
    """A body with an arm on each base group: the base IMU alone (the base body's motion only) and beside an arm
    IMU (the bodies' motion from the tree recursion, which starts from the base's) read the same to 1e-12, at a
    random state under a random wrench and joint effort; the base's own motion is checked independently by the
    lever-arm closed form (SE(3), SO(3)×R³) and Pinocchio (the UR5)."""
    model = Model.from_urdf(TWO_LINKS, base=base)
    rng = np.random.default_rng(9)
    dt = 0.01
    mount = dict(xyz=(0.1, -0.05, 0.2), rpy=(0.4, 0.2, -1.0), noise=QUIET, orientation={"enabled": True})
    alone = parse_sensors({"sensors": [imu("imu", "body", 100, **mount)]}, "t.yaml", model, dt)
    both = parse_sensors({"sensors": [imu("imu", "body", 100, **mount), imu("arm", "arm", 100, noise=QUIET)]},
                         "t.yaml", model, dt)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    wrench, effort = rng.normal(size=6), rng.normal(size=1)
    out = []
    for ss in (alone, both):
        sim = Simulator(model, q, v, dt)
        if base != "fixed":
            sim.set_wrench(wrench, frame="body")
        sim.set_joint_efforts(effort)
        out.append(SensorSuite(model, ss, dt).run(sim, 2)[-len(ss.sensors)].values)
    for key in ("linear_acceleration", "angular_velocity", "orientation"):
        assert np.abs(out[0][key] - out[1][key]).max() < 1e-12, key


# -------------------------------------------------------------------------------------------------- streams
def _rov_suite(seed=0, delay=0.0, stamp="measurement"):
    model = Model.from_yaml(ROV)
    dt = 0.001
    ss = parse_sensors({"sensors": [imu("imu", "base_link", 200, (0.1, 0, 0.05), seed=seed, delay=delay,
                                        stamp=stamp, orientation={"enabled": True, "noise_std": 0.01},
                                        noise={"gyroscope_turn_on_bias_sigma": 0.01}),
                                    imu("wrist", "alpha_link_b", 100, seed=seed)]}, "t.yaml", model, dt)
    sim = Simulator(model, model.neutral(), np.r_[0.2, 0, 0, 0, 0, 0.3, 0, 0, 0, 0], dt)
    sim.set_thrusts(np.linspace(-5, 5, len(model.thruster_names)))
    sim.set_joint_efforts([0.5, -0.5, 0.2, 0.1])
    return SensorSuite(model, ss, dt), sim


def _stream(readings):
    return [(r.name, r.k, r.stamp_ns, r.publish_k) + tuple(np.asarray(r.values[k]).tobytes() for k in
                                                         ("linear_acceleration", "angular_velocity", "orientation"))
            for r in readings]


def test_the_same_seed_gives_bit_identical_streams_however_the_run_is_chunked():
    """Two ROV IMUs (200 Hz base, 100 Hz wrist) over 300 steps: one run(300) and runs of 7, 1, 13, ... steps give
    the same readings byte for byte (values, stamps, order); another seed changes every value."""
    suite, sim = _rov_suite()
    one = _stream(suite.run(sim, 300))
    suite, sim = _rov_suite()
    chunks, sizes, left = [], [7, 1, 13, 2, 50], 300
    i = 0
    while left:
        n = min(sizes[i % len(sizes)], left)
        chunks += suite.run(sim, n)
        left -= n
        i += 1
    assert len(one) == 61 + 31 and one == _stream(chunks)
    suite, sim = _rov_suite(seed=1)
    other = _stream(suite.run(sim, 300))
    assert [x[:4] for x in other] == [x[:4] for x in one]
    assert all(a[4] != b[4] and a[5] != b[5] for a, b in zip(one, other))


@pytest.mark.parametrize("stamp", ["measurement", "arrival"])
def test_readings_are_published_after_their_delay_with_their_stamps(stamp):
    """A 200 Hz IMU with a 3 ms delay at 1 kHz physics: the reading of step k is due at k + 3, not before;
    stamped k dt (measurement) or (k + 3) dt (arrival); due() hands them over in (publish_k, k, sensor) order."""
    suite, sim = _rov_suite(delay=0.003, stamp=stamp)
    assert suite.periods == (5, 10)
    suite.sample(sim)
    assert [r.name for r in suite.due(0)] == ["wrist"] and suite.due(2) == []
    got = suite.due(3)
    assert [(r.name, r.k, r.publish_k) for r in got] == [("imu", 0, 3)]
    assert got[0].stamp_ns == (3_000_000 if stamp == "arrival" else 0)
    readings = suite.run(sim, 20)
    keys = [(r.publish_k, r.k, r.name) for r in readings]
    assert keys == sorted(keys, key=lambda x: (x[0], x[1], x[2] != "imu"))
    assert [r.publish_k - r.k for r in readings if r.name == "imu"] == [3] * 3
    assert suite.pending() == 1  # step 20's reading is due at 23


def test_reset_drops_queued_readings_and_the_noise_goes_on():
    """After reset() nothing queued is handed over, and the next reading's noise is not a replay of the first."""
    suite, sim = _rov_suite(delay=0.003)
    first = suite.run(sim, 1)
    assert first[0].name == "wrist" and suite.pending() == 1
    suite.reset()
    assert suite.pending() == 0 and suite.due(10 ** 9) == []
    sim.reset()  # the initial state again: the same truth
    again = [r for r in suite.run(sim, 20) if r.name == "wrist"][0]
    assert again.values["angular_velocity"].tobytes() != first[0].values["angular_velocity"].tobytes()


def test_the_sensors_see_the_motion_the_simulator_integrates_in_water():
    """The ROV with its arm, moving in a current under thrusts and joint efforts. The acceleration the IMU and the
    F/T sensor are computed from (``Simulator.acceleration``) is the one the integrator follows: a central
    difference of the simulated velocities (RK4, dt = 0.1 ms) agrees to O(dt²) — leaving out the passive forces
    (water, current, joint dampers) was off by tens of m/s². The joint wrenches carry the water's loads on the
    links: along each joint's axis the transmitted torque is exactly what the joint itself applies, the effort
    plus its damper and friction (``-c q̇ - f tanh(q̇/v_f)``, written here from the model's numbers), the rest being
    reaction; without the loads it is off by up to 0.15 N m."""
    m = Model.from_yaml(ROV)
    nj, P, dt = len(m.joint_names), m.passive, 1e-4
    q0 = m.configuration_from_pose([0, 0, -5], [0, 0, 0, 1], [0.3, 0.5, -1.0, 0.2])
    v0 = np.zeros(m.nv)
    v0[:6], v0[6:] = [0.4, -0.2, 0.1, 0.05, 0.1, -0.2], [0.2, -0.1, 0.3, 0.1]
    sim = Simulator(m, q0, v0, dt)
    sim.set_current([0.3, 0.1, 0.0])
    efforts = np.array([0.5, -1.0, 0.8, 0.01])
    sim.set_joint_efforts(efforts)
    sim.set_thrusts(np.linspace(-5.0, 5.0, len(m.thruster_names)))
    sim.advance(1)
    rates = sim.v[-nj:]
    vf = np.where(P.friction_velocity > 0, P.friction_velocity, 1.0)
    own = efforts - P.damping * rates - P.friction * np.tanh(rates / vf)
    along = np.einsum("ja,ja->j", sim.joint_wrenches(), m.tree.s_joint)
    assert np.abs(along - own).max() < 1e-12
    for n in (10, 500):
        sim.advance(n)
        before = sim.v.copy()
        sim.advance(1)
        a = sim.acceleration()
        sim.advance(1)
        central = (sim.v - before) / (2 * dt)
        assert np.abs(central - a).max() < 1e-4 * (1.0 + np.abs(a).max()), (n, np.abs(central - a).max())


def test_a_stepping_loop_stops_where_a_delayed_reading_falls_due():
    """next_stop(k): the IMU (every 5 steps, 3 steps' delay) and the wrist IMU (every 10) at 1 kHz: from step 0,
    whose readings are queued, the next stop is step 3 (the delayed reading), then 5 and 8, then 10; with nothing
    queued only the sampling grid counts (after reset, from 2: step 5)."""
    suite, sim = _rov_suite(delay=0.003)
    suite.sample(sim)
    suite.due(0)
    assert suite.next_stop(0) == 3
    suite.due(3)
    assert suite.next_stop(3) == 5
    sim.advance(5)
    suite.sample(sim)
    assert suite.next_stop(5) == 8
    suite.due(8)
    assert suite.next_stop(8) == 10
    suite.reset()
    assert suite.next_stop(2) == 5
