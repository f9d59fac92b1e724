"""Sensors that read contact (issue 30): the ``foot_contact`` sensor and the ``force_torque`` sensor with contact
loads, on real contact steps of the Simulator, against closed forms built by hand:

- a box of mass m resting on the ground: its foot contact sensor reads the normal force m g (and no torque about
  its centre), its contact state is on; in the air it reads zero and the state is off;
- an arm (1 kg, centre of mass at 0.5 m) held horizontal by a sphere at its tip resting on a support at 1 m: the
  support takes m g / 2 (moments about the joint), so the joint's F/T sensor reads m g − m g / 2 = m g / 2 up and
  no torque; the foot contact sensor on the arm reads the support force m g / 2 and its moment about the link
  origin;
- the noise: with a fixed seed the sample variance of each axis lies in the chi-square interval of the declared
  std; the bias shifts the mean; rate and delay on simulated steps; hysteresis of the contact state;
- the YAML keys' bounds.
"""
import math

import numpy as np
import pytest
from scipy import stats

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.geometry import box, halfspace, sphere
from mbs_ros.dynamics.contact.world import ContactWorld
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.sensors.frames import SensorFrame
from mbs_ros.sensors.spec import SensorConfigError, parse_sensors
from mbs_ros.sensors.suite import SensorSuite

G = 9.81
M, S = 2.0, 0.2
DT = 1e-3
FILE = "sensors/test.yaml"
# a yaw joint, then the pitch joint j of the arm: the tip can move along every contact row (a single pitch joint
# could not move it sideways, and the contact step refuses a row no body can move)
ARM = """<robot name="one"><link name="base"/><link name="yaw"><inertial><mass value="0.1"/>
  <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.5 0 0"/>
  <mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="yaw_joint" type="revolute"><parent link="base"/><child link="yaw"/><axis xyz="0 0 1"/>
  <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint>
  <joint name="j" type="revolute"><parent link="yaw"/><child link="arm"/><axis xyz="0 1 0"/>
  <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint></robot>"""
QUIET = {"noise": {"force_std": 0.0, "torque_std": 0.0}}


def _box(height=0.0):
    model = Model.rigid_body("se3", M, np.eye(3) * M * S * S / 6, gravity=(0.0, 0.0, -G))
    q0 = np.array([0.3, -0.1, 0.5 * S + height, 0.0, 0.0, 0.0, 1.0])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (S, S, S), (0, 0), mu=0.6)])
    return model, Simulator(model, q0, np.zeros(6), DT, world=world)


def _arm():
    """The arm horizontal (q = 0), a 5 cm sphere at x = 1 m on its link resting on the plane z = −0.05, without
    friction: the support's force is vertical and fixed by the moments about the joint (with friction, a force
    along the arm would be statically undetermined: any of it is carried by the joint's bearings)."""
    model = Model.from_urdf(ARM, gravity=(0.0, 0.0, -G))
    T = np.eye(4)
    T[0, 3] = 1.0
    world = ContactWorld([model], [halfspace("support", (0, 0, 1), -0.05, 0.0), sphere("tip", 0.05, (0, 2), T, mu=0.0)])
    sim = Simulator(model, np.zeros(2), np.zeros(2), DT, world=world)
    sim.set_joint_efforts([0.0, 0.0])
    return model, sim


def _suite(model, items):
    return SensorSuite(model, parse_sensors({"sensors": items}, FILE, model, DT), DT)


def _last(suite, sim, n, name):
    readings = [r for r in suite.run(sim, n) if r.name == name]
    assert sim.fault is None and readings
    return readings[-1]


def test_a_box_resting_on_the_ground_reads_its_weight_and_contact():
    model, sim = _box()
    link = model.link_names[0]
    suite = _suite(model, [dict(name="foot", type="foot_contact", link=link, rate=100.0, **QUIET)])
    r = _last(suite, sim, 300, "foot")
    assert r.valid and r.values["contact"] is True
    assert r.values["normal_force"] == pytest.approx(M * G, rel=1e-6)
    assert np.asarray(r.values["force"]) == pytest.approx([0.0, 0.0, M * G], abs=1e-6)
    assert np.asarray(r.values["torque"]) == pytest.approx(np.zeros(3), abs=1e-6)


def test_an_imu_on_a_box_resting_on_the_ground_reads_plus_g():
    """With the contact loads in the acceleration the box is at rest: its IMU reads +g up (not free fall)."""
    model, sim = _box()
    suite = _suite(model, [dict(name="imu", type="imu", link=model.link_names[0], rate=100.0,
                                noise={f"{s}_{k}": 0.0 for s in ("gyroscope", "accelerometer")
                                       for k in ("noise_density", "random_walk", "turn_on_bias_sigma")})])
    r = _last(suite, sim, 300, "imu")
    assert np.asarray(r.values["linear_acceleration"]) == pytest.approx([0.0, 0.0, G], abs=1e-5)


def test_in_the_air_the_foot_reads_nothing_and_no_contact():
    model, sim = _box(height=0.5)
    suite = _suite(model, [dict(name="foot", type="foot_contact", link=model.link_names[0], rate=100.0, **QUIET)])
    r = _last(suite, sim, 50, "foot")
    assert r.values["contact"] is False and r.values["normal_force"] == 0.0
    assert np.asarray(r.values["force"]) == pytest.approx(np.zeros(3), abs=0.0)


def test_a_joint_force_torque_sensor_reads_the_weight_less_the_support_force():
    model, sim = _arm()
    suite = _suite(model, [dict(name="ft", type="force_torque", joint="j", rate=100.0, **QUIET),
                           dict(name="tip", type="foot_contact", link="arm", rate=100.0, **QUIET)])
    readings = suite.run(sim, 400)
    assert sim.fault is None and np.abs(sim.q).max() < 1e-6
    ft = [r for r in readings if r.name == "ft"][-1]
    tip = [r for r in readings if r.name == "tip"][-1]
    support = 1.0 * G * 0.5 / 1.0  # moments about the joint: m g × 0.5 m = N × 1 m
    assert np.asarray(ft.values["force"]) == pytest.approx([0.0, 0.0, 1.0 * G - support], abs=1e-6)
    assert np.asarray(ft.values["torque"]) == pytest.approx(np.zeros(3), abs=1e-6)
    assert tip.values["normal_force"] == pytest.approx(support, rel=1e-6)
    assert np.asarray(tip.values["force"]) == pytest.approx([0.0, 0.0, support], abs=1e-6)
    # (1, 0, −0.05) × (0, 0, N) about the link origin
    assert np.asarray(tip.values["torque"]) == pytest.approx([0.0, -support, 0.0], abs=1e-6)


def _frame(k=0, wrench=(1.0, -2.0, 30.0, 0.1, 0.2, -0.3), normal=30.0):
    f = SensorFrame(k, k * 1_000_000, np.eye(4), np.zeros(3), np.zeros(3), dt_ns=1_000_000)
    f.contact_wrench, f.contact_normal = np.array(wrench, dtype=float), float(normal)
    return f


def _sensor(**keys):
    model = Model.rigid_body("se3", 1.0, np.eye(3), gravity=(0.0, 0.0, -G))
    spec = parse_sensors({"sensors": [dict(name="foot", type="foot_contact", link=model.link_names[0], rate=100.0,
                                           seed=7, **keys)]}, FILE, model, DT).sensors[0]
    from mbs_ros.sensors.foot_contact import Sensor
    return Sensor(spec, None, model, DT)


def test_the_noise_has_the_declared_std_and_the_bias_its_mean():
    """4000 samples of a constant wrench: per axis the sample variance in the 99.9 % chi-square interval of the
    declared std (6 axes + the normal: a 0.7 % chance of a false alarm for a correct sensor), the mean within
    4 standard errors of truth + bias."""
    fs, ts, n = 0.7, 0.02, 4000
    bias = (0.5, -0.25, 1.0)
    s = _sensor(noise={"force_std": fs, "torque_std": ts}, force_bias=list(bias))
    true = np.array([1.0, -2.0, 30.0, 0.1, 0.2, -0.3, 30.0])
    X = np.array([[*r.values["force"], *r.values["torque"], r.values["normal_force"]]
                  for r in (s.measure(_frame(k)) for k in range(n))])
    std = np.array([fs] * 3 + [ts] * 3 + [fs])
    mean = true + np.array([*bias, 0.0, 0.0, 0.0, 0.0])
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], n - 1) / (n - 1)
    ratio = X.var(axis=0, ddof=1) / std ** 2
    assert np.all((lo < ratio) & (ratio < hi)), ratio
    assert np.all(np.abs(X.mean(axis=0) - mean) < 4 * std / math.sqrt(n))


def test_the_same_seed_gives_the_same_stream():
    a, b = _sensor(), _sensor()
    for k in range(20):
        ra, rb = a.measure(_frame(k)), b.measure(_frame(k))
        assert np.array_equal(ra.values["force"], rb.values["force"])


def test_the_contact_state_has_hysteresis():
    s = _sensor(noise={"force_std": 0.0, "torque_std": 0.0}, contact_threshold=10.0, release_threshold=4.0)
    states = [s.measure(_frame(k, normal=N)).values["contact"] for k, N in enumerate((0, 8, 11, 8, 5, 4.5, 3.9, 8))]
    assert states == [False, False, True, True, True, True, False, False]


def test_rate_and_delay_on_simulated_steps():
    model, sim = _box()
    suite = _suite(model, [dict(name="foot", type="foot_contact", link=model.link_names[0], rate=50.0,
                                delay=0.003, **QUIET)])
    readings = suite.run(sim, 200)
    assert [r.k for r in readings] == list(range(0, 200, 20))[:len(readings)]
    assert len(readings) == 10  # k = 0..180 published at k + 3 <= 200
    assert all(r.publish_k == r.k + 3 and r.stamp_ns == r.k * 1_000_000 for r in readings)


@pytest.mark.parametrize("keys, where", [
    ({"noise": {"force_std": -1.0}}, "noise.force_std"),
    ({"noise": {"force_std": 1e7}}, "noise.force_std"),
    ({"noise": {"torque_std": float("nan")}}, "noise.torque_std"),
    ({"force_bias": [0.0, 0.0, 2e6]}, "force_bias"),
    ({"contact_threshold": 0.0}, "contact_threshold"),
    ({"contact_threshold": float("inf")}, "contact_threshold"),
    ({"contact_threshold": 5.0, "release_threshold": 6.0}, "release_threshold"),
    ({"joint": "j"}, "joint"),
])
def test_bad_keys_are_refused_naming_file_sensor_and_key(keys, where):
    model = Model.rigid_body("se3", 1.0, np.eye(3), gravity=(0.0, 0.0, -G))
    item = dict(name="foot", type="foot_contact", link=model.link_names[0], rate=100.0, **keys)
    with pytest.raises(SensorConfigError) as exc:
        parse_sensors({"sensors": [item]}, FILE, model, DT)
    text = str(exc.value)
    assert text.startswith(FILE) and "(foot)" in text and where in text
