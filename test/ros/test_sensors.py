"""The dynamics node's simulated sensors (issue 18): real node processes of the BlueROV2 Heavy with and without its
Alpha-5 arm, started paused on simulation time (t0 = 0) and advanced with ``~/step``.

- every declared sensor topic carries its message type with the sensor's frame (prefixed by the namespace), at the
  stamps of the sensor's step grid (+ its delay, for ``stamp: arrival``), and /tf_static has link -> sensor frame
  at the declared pose and the DVL's beam frames;
- determinism: two nodes of the same sensors file stepped in different chunks publish bit-identical sensor messages
  (every field, floats by their bytes); a node with other seeds publishes other noise at the same stamps; the
  node's stream is the ROS-free :class:`~mbs_ros.sensors.suite.SensorSuite`'s own for the same motion;
- a DVL whose seabed is beyond max_range publishes no twist, its reason on /diagnostics, its four beams (+inf);
- a bad sensors file refuses the start, the log naming file, sensor and key;
- the Reading -> message conversions of the node (no process).

Every wait is for a graph match, a message, a service reply or a process exit; no wall-clock assertion.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
msgs = pytest.importorskip("mbs_ros_msgs.srv", reason="mbs_ros_msgs not built into this environment yet")
if not hasattr(msgs, "Step"):
    pytest.skip("mbs_ros_msgs has no Step service yet (make setup rebuilds it)", allow_module_level=True)

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import PointStamped, TwistWithCovarianceStamped, WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import FluidPressure, Imu, JointState, MagneticField, NavSatFix, Range  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.nodes.dynamics_sensors import beam_range, reading_messages  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, exact_fields, running  # noqa: E402

Step = msgs.Step
ROOT = Path(__file__).resolve().parents[2]
DYNAMICS = "mbs_ros.nodes.dynamics_node"
ROV = ROOT / "config" / "robots" / "bluerov2_heavy.yaml"
UVMS = ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml"
TIMEOUT = 60.0
MS = 1_000_000
DT = 2 * MS  # physics_rate 500 Hz
QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)

# Every sensor type on the vehicle-manipulator (seeds 11.., rates and delays whole numbers of 2 ms steps).
ALL_SENSORS = """\
environment:
  seabed_depth: 30.0
sensors:
  - {name: imu, type: imu, link: base_link, pose: {xyz: [0.1, -0.05, 0.02], rpy: [0.0, 0.0, 1.5707963267948966]},
     rate: 100, seed: SEED1}
  - {name: depth, type: pressure, link: base_link, pose: {xyz: [-0.2, 0.0, 0.05]}, rate: 50, delay: 0.01,
     seed: SEED2}
  - {name: dvl, type: dvl, link: base_link, pose: {xyz: [0.0, 0.0, -0.12]}, rate: 25, delay: 0.004, stamp: arrival,
     seed: SEED3}
  - {name: compass, type: magnetometer, link: base_link, frame_id: mag, topic: nav/mag, rate: 50, seed: SEED4}
  - {name: gps, type: gnss, link: base_link, pose: {xyz: [0.0, 0.0, 0.3]}, rate: 10, seed: SEED5}
  - {name: arm_encoders, type: encoders, link: alpha_base_link, rate: 100, seed: SEED6}
  - {name: wrist_ft, type: force_torque, joint: alpha_axis_b, rate: 100, seed: SEED7}
"""
# topic -> (message type, sensor name, period in steps, delay in steps, stamped at arrival)
TOPICS = {
    "sensors/imu": (Imu, "imu", 5, 0, False),
    "sensors/depth": (FluidPressure, "depth", 10, 5, False),
    "sensors/depth/depth": (PointStamped, "depth", 10, 5, False),
    "sensors/dvl": (TwistWithCovarianceStamped, "dvl", 20, 2, True),
    "sensors/dvl/beams": (Range, "dvl", 20, 2, True),
    "nav/mag": (MagneticField, "compass", 10, 0, False),
    "sensors/gps": (NavSatFix, "gps", 50, 0, False),
    "sensors/arm_encoders": (JointState, "arm_encoders", 5, 0, False),
    "sensors/wrist_ft": (WrenchStamped, "wrist_ft", 5, 0, False),
}
FRAMES = {"imu": "imu", "depth": "depth", "dvl": "dvl", "compass": "mag", "gps": "gps",
          "arm_encoders": "arm_encoders", "wrist_ft": "wrist_ft"}


def sensors_file(tmp_path, name="sensors.yaml", seed0=11, text=ALL_SENSORS):
    for i in range(7, 0, -1):
        text = text.replace(f"SEED{i}", str(seed0 + i - 1))
    path = tmp_path / name
    path.write_text(text)
    return path


def node(ns, tmp_path, model, sensors, **params):
    # publish_rate 3 Hz: the state's grid (every 167 steps) is none of the sensors', so the steps the node stops
    # at for the sensors are their own
    base = dict(model_file=str(model), physics_rate=500.0, publish_rate=3.0, start_paused=True, use_sim_time=True,
                initial_position=[0.0, 0.0, -5.0], diagnostics_rate=20.0,
                **({} if sensors is None else {"sensors": str(sensors)}))
    base.update(params)
    return NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, parameters=base,
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")


@pytest.fixture(scope="module")
def probe():
    with Probe("test_sensors_probe", TIMEOUT) as p:
        yield p


def record(probe, ns, topics=TOPICS):
    return {t: Recorder(probe, spec[0], f"/{ns}/{t}", qos=QOS) for t, spec in topics.items()}


def matched(probe, ns, topics=TOPICS):
    """Every topic of ``ns`` has a publisher in the graph (the node is up, and publishes them)."""
    return all(probe.node.count_publishers(f"/{ns}/{t}") >= 1 for t in topics)


class SensorDiagnostics:
    """The newest /diagnostics values of every sensor status (``/<ns>/dynamics_node/sensors/<name>``)."""

    def __init__(self, probe):
        self.values = {}
        probe.node.create_subscription(DiagnosticArray, "/diagnostics", self._on, QoSProfile(depth=100))

    def _on(self, m):
        for s in m.status:
            self.values[s.name.split(":")[0]] = cv.values_from_status(s)


@pytest.fixture(scope="module")
def diag(probe):
    return SensorDiagnostics(probe)


def ready(probe, diag, ns, topics=TOPICS):
    """The node's sensor topics among ``topics`` have the probe's subscriptions matched on the node's side (its
    /diagnostics count them: a reading published before would be lost to the probe), the others are in the graph."""
    suffix = {"sensors/depth/depth": "/depth", "sensors/dvl/beams": "/beams"}
    return matched(probe, ns, topics) and all(
        diag.values.get(f"/{ns}/dynamics_node/sensors/{TOPICS[t][1]}", {}).get("subscribers" + suffix.get(t, ""), 0)
        >= 1 for t in topics if t in TOPICS)


def step(probe, ns, n, proc):
    r = probe.call(Step, f"/{ns}/dynamics_node/step", Step.Request(steps=n), alive=[proc])
    assert r.success, r.message
    return r


def expected_stamps(period, delay, arrival, total):
    """Stamps [ns] of the readings of a sensor published once ``total`` steps are taken (from k = 0)."""
    return [(k + (delay if arrival else 0)) * DT for k in range(0, total + 1, period) if k + delay <= total]


def stamps(recorder):
    return [cv.ns_from_time(m.header.stamp) for m in recorder.messages]


# ------------------------------------------------------------------------------------ (a) topics, frames, stamps


MOTION = dict(initial_twist=[0.3, 0.0, -0.1, 0.0, 0.0, 0.2], initial_joint_velocities=[0.3, -0.2, 0.1, 0.4])


def headless_readings(path, total):
    """The ROS-free SensorSuite's readings of the node's motion (same model, initial state, step, integrator, no
    command), stepped headless: what the node must publish."""
    import dataclasses

    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.dynamics.simulation.simulator import Simulator
    from mbs_ros.cores.dynamics_settings import DEFAULTS, build_model, initial_state
    from mbs_ros.sensors.spec import load_sensors
    from mbs_ros.sensors.suite import SensorSuite

    s = dataclasses.replace(DEFAULTS, model_file=str(UVMS), physics_rate=500.0, initial_position=(0.0, 0.0, -5.0),
                            **{k: tuple(v) for k, v in MOTION.items()})
    source = ms.load_source("", s.model_file)
    model = build_model(s, source)
    q0, v0 = initial_state(model, s)
    sim = Simulator(model, q0, v0, DT * 1e-9, integrator="rk4", t0_ns=0)
    suite = SensorSuite(model, load_sensors(path, model, DT * 1e-9), DT * 1e-9)
    return suite.run(sim, total)


def same_as_reading(m, r):
    """The message's fields are the reading's values, bit for bit."""
    v = r.values

    def xyz(vec):
        return [vec.x, vec.y, vec.z]

    if isinstance(m, Imu):
        return (xyz(m.linear_acceleration) == list(v["linear_acceleration"])
                and xyz(m.angular_velocity) == list(v["angular_velocity"])
                and list(m.linear_acceleration_covariance) == list(v["linear_acceleration_cov"]))
    if isinstance(m, FluidPressure):
        return (m.fluid_pressure, m.variance) == (v["fluid_pressure"], v["variance"])
    if isinstance(m, PointStamped):
        return xyz(m.point) == [0.0, 0.0, v["depth"]]
    if isinstance(m, TwistWithCovarianceStamped):
        return xyz(m.twist.twist.linear) == list(v["velocity"])
    if isinstance(m, Range):
        return True  # the beams: their ranges against the reading's below
    if isinstance(m, MagneticField):
        return xyz(m.magnetic_field) == list(v["magnetic_field"])
    if isinstance(m, NavSatFix):
        return m.status.status == v["status"]
    if isinstance(m, JointState):
        return list(m.name) == list(v["names"]) and list(m.position) == list(v["position"]) and list(
            m.velocity) == list(v["velocity"])
    if isinstance(m, WrenchStamped):
        return xyz(m.wrench.force) == list(v["force"]) and xyz(m.wrench.torque) == list(v["torque"])
    raise AssertionError(type(m))


def test_every_sensor_topic_carries_its_type_frame_and_grid_stamps_and_tf_static_has_the_frames(probe, diag, tmp_path):
    ns, total = "sna", 100
    path = sensors_file(tmp_path)
    proc = node(ns, tmp_path, UVMS, path, **MOTION)
    rec = record(probe, ns)
    static = Recorder(probe, TFMessage, "/tf_static",
                      qos=QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    with proc:
        probe.spin_until(lambda: ready(probe, diag, ns), what="the sensor topics", alive=[proc])
        r = step(probe, ns, total, proc)
        assert r.step_index == total
        for topic, (_t, name, period, delay, arrival) in TOPICS.items():
            n = len(expected_stamps(period, delay, arrival, total)) * (4 if topic.endswith("beams") else 1)
            probe.spin_until(lambda: len(rec[topic]) >= n, what=f"{n} messages on {topic}", alive=[proc])
        probe.spin_until(lambda: any(t.child_frame_id == f"{ns}/dvl/beam3" for m in static.messages
                                     for t in m.transforms), what="the sensor frames on /tf_static", alive=[proc])
        probe.spin_for(0.2)  # nothing more comes: the node is paused
    assert proc.returncode == 0, proc.log_tail()

    for topic, (msg_type, name, period, delay, arrival) in TOPICS.items():
        msgs_ = rec[topic].messages
        assert all(isinstance(m, msg_type) for m in msgs_), topic
        want = expected_stamps(period, delay, arrival, total)
        if topic.endswith("beams"):
            assert stamps(rec[topic]) == [t for t in want for _ in range(4)], topic
            assert [m.header.frame_id for m in msgs_] == [f"{ns}/dvl/beam{i}" for _ in want for i in range(4)]
            assert all(0.3 < m.range < 50.0 and m.min_range == pytest.approx(0.3) for m in msgs_)
        else:
            assert stamps(rec[topic]) == want, topic
            assert {m.header.frame_id for m in msgs_} == {f"{ns}/{FRAMES[name]}"}, topic
    # the physics of a few fields (the models' own tests check them to their tolerances)
    imu = rec["sensors/imu"].messages[0]
    assert imu.linear_acceleration.z == pytest.approx(9.81, abs=0.5)  # specific force at rest: +g up
    assert imu.orientation_covariance[0] == -1.0 or imu.orientation_covariance[0] >= 0.0
    depth = [m.point.z for m in rec["sensors/depth/depth"].messages]
    assert np.allclose(depth, 5.0 - 0.05, atol=0.05)  # sensor 5 cm above the base at z = -5 m, sinking 0.1 m/s
    assert all(m.status.status == -1 for m in rec["sensors/gps"].messages)  # under water: no fix
    assert list(rec["sensors/arm_encoders"].messages[0].name) == ["alpha_axis_e", "alpha_axis_d", "alpha_axis_c",
                                                                   "alpha_axis_b"]

    # the node publishes the ROS-free suite's own readings of the same motion, field by field, bit for bit
    readings = headless_readings(path, total)
    compared = 0
    for topic, (_t, name, period, delay, arrival) in TOPICS.items():
        mine = [r for r in readings if r.name == name]
        if topic == "sensors/dvl":
            mine = [r for r in mine if r.valid]
        msgs_ = rec[topic].messages
        if topic.endswith("beams"):
            got = np.array([m.range for m in msgs_]).reshape(-1, 4)
            want = np.array([r.values["ranges"] for r in mine], dtype=np.float32)  # Range.range is a float32
            assert np.array_equal(got, np.where(np.isfinite(want), want, np.inf)), topic
            continue
        assert [cv.ns_from_time(m.header.stamp) for m in msgs_] == [r.stamp_ns for r in mine], topic
        bad = [cv.ns_from_time(m.header.stamp) for m, r in zip(msgs_, mine) if not same_as_reading(m, r)]
        assert not bad, f"{topic}: the node's messages differ from the suite's readings at {bad}"
        compared += len(msgs_)
    assert compared == 102  # 21 imu, 10 + 10 depth, 5 dvl, 11 mag, 3 gps, 21 encoders, 21 F/T

    transforms = {(t.header.frame_id, t.child_frame_id): t.transform for m in static.messages for t in m.transforms}
    imu_tf = transforms[(f"{ns}/base_link", f"{ns}/imu")]
    assert [imu_tf.translation.x, imu_tf.translation.y, imu_tf.translation.z] == pytest.approx([0.1, -0.05, 0.02])
    half = math.sqrt(0.5)  # yaw 90°: q = [0, 0, sin 45°, cos 45°]
    assert [imu_tf.rotation.x, imu_tf.rotation.y, imu_tf.rotation.z, imu_tf.rotation.w] == pytest.approx(
        [0.0, 0.0, half, half], abs=1e-12)
    assert (f"{ns}/base_link", f"{ns}/mag") in transforms
    assert (f"{ns}/alpha_base_link", f"{ns}/arm_encoders") in transforms
    assert (f"{ns}/alpha_link_b", f"{ns}/wrist_ft") in transforms  # the child link of alpha_axis_b
    for i in range(4):  # each beam frame's x axis: 25° off the DVL's -z, azimuth 45° + 90° i
        R = cv.rotation_matrix(cv.array_from_quaternion(transforms[(f"{ns}/dvl", f"{ns}/dvl/beam{i}")].rotation))
        psi, th = math.radians(45.0 + 90.0 * i), math.radians(25.0)
        assert R[:, 0] == pytest.approx([math.sin(th) * math.cos(psi), math.sin(th) * math.sin(psi), -math.cos(th)],
                                        abs=1e-12)


# ------------------------------------------------------------------------------------ (b) determinism


def payloads(rec, ns):
    """topic -> every message's exact fields in arrival order (the namespace taken out of the frame ids)."""
    out = {}
    for topic, r in rec.items():
        rows = []
        for m in r.messages:
            assert m.header.frame_id.startswith(f"{ns}/")
            m.header.frame_id = m.header.frame_id[len(ns) + 1:]
            rows.append(exact_fields(m))
        out[topic] = rows
    return out


def test_same_seeds_give_bit_identical_streams_whatever_the_chunks_other_seeds_other_noise(probe, diag, tmp_path):
    total = 200
    chunks = {"snb1": [200], "snb2": [1, 6, 93, 100], "snb3": [200]}
    files = {"snb1": sensors_file(tmp_path, "a.yaml"), "snb2": sensors_file(tmp_path, "b.yaml"),
             "snb3": sensors_file(tmp_path, "c.yaml", seed0=101)}
    procs = {ns: node(ns, tmp_path, UVMS, files[ns], **MOTION) for ns in chunks}
    rec = {ns: record(probe, ns) for ns in chunks}
    alive = list(procs.values())
    with running(procs):
        probe.spin_until(lambda: all(ready(probe, diag, ns) for ns in chunks), what="the sensor topics", alive=alive)
        for ns, plan in chunks.items():
            for n in plan:
                step(probe, ns, n, procs[ns])
        for ns in chunks:
            for topic, (_t, _name, period, delay, arrival) in TOPICS.items():
                n = len(expected_stamps(period, delay, arrival, total)) * (4 if topic.endswith("beams") else 1)
                probe.spin_until(lambda: len(rec[ns][topic]) >= n, what=f"{n} messages on /{ns}/{topic}",
                                 alive=alive)
    a, b, c = (payloads(rec[ns], ns) for ns in chunks)
    compared = 0
    for topic in TOPICS:
        assert a[topic] == b[topic], f"{topic}: the same seeds stepped in other chunks differ"
        compared += len(a[topic])
    # other seeds: the same stamps, other noise: every sample of a sensor with continuous noise differs; the
    # pressure sensor's is quantised (20 Pa steps, std 20 Pa), so some of its 20 samples may coincide, not all
    for topic in ("sensors/imu", "sensors/depth", "sensors/dvl", "nav/mag", "sensors/wrist_ft"):
        assert [dict(x)["header"] for x in a[topic]] == [dict(x)["header"] for x in c[topic]], topic
        differ = [x != y for x, y in zip(a[topic], c[topic])]
        assert (any if topic == "sensors/depth" else all)(differ), f"{topic}: other seeds, same noise"
    print(f"sensor determinism: {compared} messages on {len(TOPICS)} topics bit-identical "
          f"(chunks {chunks['snb1']} vs {chunks['snb2']})")


PACED = """\
sensors:
  - {name: imu, type: imu, link: base_link, pose: {xyz: [0.2, 0.1, -0.1]}, rate: 100, seed: 7}
  - {name: depth, type: pressure, link: base_link, rate: 50, delay: 0.006, seed: 8}
"""


def test_a_node_running_on_the_wall_clock_publishes_the_stream_of_one_stepped_by_hand(probe, diag, tmp_path):
    """The ROV with an IMU and a delayed pressure sensor: one node runs at 4x real time (wait_for_command: it starts
    on the probe's zero thruster command), the other is stepped with ~/step; their readings of the first 300
    steps are bit-identical, however the timer batched the steps (about 4 per tick, off the sensors' grid)."""
    path = tmp_path / "paced.yaml"
    path.write_text(PACED)
    twist = dict(initial_twist=[0.2, 0.0, 0.1, 0.1, -0.1, 0.4])
    procs = {"snp": node("snp", tmp_path, ROV, path, start_paused=False, wait_for_command=True,
                         real_time_factor=4.0, **twist),
             "sns": node("sns", tmp_path, ROV, path, **twist)}
    topics = {t: TOPICS[t] for t in ("sensors/imu", "sensors/depth")}
    rec = {ns: record(probe, ns, topics) for ns in procs}
    cmd = probe.node.create_publisher(JointState, "/snp/thruster_command", 10)
    total, alive = 300, list(procs.values())

    def upto(ns, topic):
        return [m for m in rec[ns][topic].messages if cv.ns_from_time(m.header.stamp) <= (total - 3) * DT]

    with running(procs):
        probe.spin_until(lambda: all(ready(probe, diag, ns, topics) for ns in procs) and cmd.get_subscription_count(),
                         what="both nodes", alive=alive)
        cmd.publish(cv.joint_state_msg(0, [f"t{i}" for i in range(1, 9)], effort=[0.0] * 8))
        step(probe, "sns", total, procs["sns"])
        want = {"sensors/imu": 60, "sensors/depth": 30}  # stamps 0 ... 295 and 0 ... 290 steps
        probe.spin_until(lambda: all(len(upto(ns, t)) >= n for ns in procs for t, n in want.items()),
                         what="the readings of 300 steps of both", alive=alive)
    for topic, n in want.items():
        a, b = (payloads({topic: SimpleNamespace(messages=upto(ns, topic))}, ns)[topic] for ns in procs)
        assert len(a) == len(b) == n and a == b, topic


def test_the_streams_do_not_depend_on_who_listens(probe, diag, tmp_path):
    """Two nodes of the same IMU (and seed): one listened to from the start, the other only after its first 100
    steps: the readings of steps 105 ... 200 are bit-identical (the unheard samples were taken all the same)."""
    path = tmp_path / "imu.yaml"
    path.write_text(PACED)
    twist = dict(initial_twist=[0.2, 0.0, 0.1, 0.1, -0.1, 0.4])
    procs = {ns: node(ns, tmp_path, ROV, path, **twist) for ns in ("snu1", "snu2")}
    topic = {"sensors/imu": TOPICS["sensors/imu"]}
    early = record(probe, "snu1", topic)["sensors/imu"]
    alive = list(procs.values())
    with running(procs):
        probe.spin_until(lambda: ready(probe, diag, "snu1", topic), what="the first node's IMU", alive=alive)
        for ns in procs:
            step(probe, ns, 100, procs[ns])  # the service answers once the node is up
        late = record(probe, "snu2", topic)["sensors/imu"]
        probe.spin_until(lambda: ready(probe, diag, "snu2", topic), what="the second node's IMU", alive=alive)
        for ns in procs:
            step(probe, ns, 100, procs[ns])
        probe.spin_until(lambda: len(late) >= 20 and len(early) >= 41, what="the IMU readings", alive=alive)
    assert stamps(late) == [k * DT for k in range(105, 201, 5)]
    a = payloads({"imu": SimpleNamespace(messages=early.messages[21:])}, "snu1")["imu"]
    b = payloads({"imu": SimpleNamespace(messages=late.messages)}, "snu2")["imu"]
    assert a == b


# ------------------------------------------------------------------------------------ lockstep

LOCKSTEP = """\
sensors:
  - {name: imu, type: imu, link: base_link, rate: 100, seed: 1}
  - {name: depth, type: pressure, link: base_link, rate: 50, delay: 0.004, seed: 2}
"""


def test_lockstep_publishes_the_readings_due_in_a_period_during_that_period(probe, diag, tmp_path):
    """The ROV in lockstep (10 steps per control period; started paused, resumed once the probe listens), the
    probe answering each state with a zero thruster_command: once it stops answering after 12 periods, the node
    waits at step 120 having published
    exactly the readings due by then (IMU every 5 steps, in the middle of each period too; the pressure sensor's
    every 10 steps 2 steps later), none twice, none of the next period."""
    ns, periods, n = "snl", 12, 10
    thrusters = [f"t{i}" for i in range(1, 9)]  # the BlueROV2 Heavy's (bluerov2_heavy.urdf.xacro)
    path = tmp_path / "lockstep.yaml"
    path.write_text(LOCKSTEP)
    proc = node(ns, tmp_path, ROV, path, lockstep=True, control_rate=50.0, real_time_factor=0.0)
    topics = {t: TOPICS[t] for t in ("sensors/imu", "sensors/depth")}
    rec = record(probe, ns, topics)
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    cmd = probe.node.create_publisher(JointState, f"/{ns}/thruster_command", 10)
    end = periods * n * DT
    answered = set()

    def answer():
        for t in stamps(odom):
            if t < end and t not in answered:
                answered.add(t)
                cmd.publish(cv.joint_state_msg(t, thrusters, effort=[0.0] * 8))
        return end in stamps(odom)

    with proc:
        probe.spin_until(lambda: ready(probe, diag, ns, topics) and cmd.get_subscription_count() > 0,
                         what="the lockstep node", alive=[proc])
        # started paused (its diagnostics count the probe's subscriptions meanwhile): resume
        assert probe.call(SetBool, f"/{ns}/dynamics_node/pause", SetBool.Request(data=False), alive=[proc]).success
        probe.spin_until(answer, what=f"{periods} control periods", alive=[proc], timeout=TIMEOUT)
        K = periods * n
        want = {"sensors/imu": [k * DT for k in range(0, K + 1, 5)],
                "sensors/depth": [k * DT for k in range(0, K + 1, 10) if k + 2 <= K]}
        probe.spin_until(lambda: all(len(rec[t]) >= len(w) for t, w in want.items()), what="the readings",
                         alive=[proc])
        probe.spin_for(0.3)  # the node waits at t = end: no reading of the next period comes
    for topic, w in want.items():
        assert stamps(rec[topic]) == w, topic


# ------------------------------------------------------------------------------------ live current

WATER_TRACK = """\
sensors:
  - {name: dvl, type: dvl, link: base_link, rate: 25, water_track: true, seed: 3,
     noise: {velocity_std: 0.0, range_std: 0.0}}
"""


def test_a_live_change_of_current_reaches_the_dvl_water_track(probe, diag, tmp_path):
    """No seabed: the DVL tracks the water, v_dvl = v - Rᵀ c (noise off). Its readings against odom at the same
    stamps (both every 20 steps): the node's start-up current for the first 100 steps, then the one set through
    set_parameters."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    ns, start, current = "snw", [0.1, 0.2, 0.0], [0.5, -0.3, 0.1]
    path = tmp_path / "water.yaml"
    path.write_text(WATER_TRACK)
    proc = node(ns, tmp_path, ROV, path, publish_rate=25.0, initial_twist=[0.2, 0.1, 0.0, 0.05, 0.0, 0.3],
                current=start)
    dvl = Recorder(probe, TwistWithCovarianceStamped, f"/{ns}/sensors/dvl", qos=QOS)
    odom = Recorder(probe, Odometry, f"/{ns}/odom", depth=1000)
    with proc:
        probe.spin_until(lambda: ready(probe, diag, ns, ("sensors/dvl",)) and len(odom) > 0, what="the DVL and odom",
                         alive=[proc])
        step(probe, ns, 100, proc)
        req = SetParameters.Request(parameters=[Parameter("current", value=current).to_parameter_msg()])
        assert probe.call(SetParameters, f"/{ns}/dynamics_node/set_parameters", req, alive=[proc]).results[0].successful
        step(probe, ns, 100, proc)
        probe.spin_until(lambda: len(dvl) >= 11 and 200 * DT in stamps(odom), what="11 DVL readings and odom",
                         alive=[proc])
    state = {cv.ns_from_time(m.header.stamp): m for m in odom.messages}
    assert stamps(dvl) == [k * DT for k in range(0, 201, 20)]
    for m in dvl.messages:
        t = cv.ns_from_time(m.header.stamp)
        o = state[t]
        R = cv.rotation_matrix(cv.array_from_quaternion(o.pose.pose.orientation))
        c = np.array(current if t > 100 * DT else start)
        want = cv.array_from_vector3(o.twist.twist.linear) - R.T @ c
        assert cv.array_from_vector3(m.twist.twist.linear) == pytest.approx(want, abs=1e-12), t


# ------------------------------------------------------------------------------------ reset

DELAYED = """\
sensors:
  - {name: depth, type: pressure, link: base_link, rate: 50, delay: 0.01, seed: 2}
"""


def test_reset_drops_the_readings_still_waiting_for_their_delay(probe, diag, tmp_path):
    """Pressure every 10 steps, published 5 steps later: after 100 steps the reading of step 100 waits; ~/reset
    (the reset state is step 101) drops it; 20 more steps publish step 110's only (step 120's waits)."""
    from std_srvs.srv import Trigger

    ns = "snr"
    path = tmp_path / "delayed.yaml"
    path.write_text(DELAYED)
    proc = node(ns, tmp_path, ROV, path)
    depth = Recorder(probe, FluidPressure, f"/{ns}/sensors/depth", qos=QOS)
    with proc:
        probe.spin_until(lambda: ready(probe, diag, ns, ("sensors/depth",)), what="the pressure topic", alive=[proc])
        step(probe, ns, 100, proc)
        assert probe.call(Trigger, f"/{ns}/dynamics_node/reset", Trigger.Request(), alive=[proc]).success
        assert step(probe, ns, 20, proc).step_index == 121
        probe.spin_until(lambda: 110 * DT in stamps(depth), what="the reading of step 110", alive=[proc])
        probe.spin_for(0.2)
    assert stamps(depth) == [k * DT for k in range(0, 91, 10)] + [110 * DT]


# ------------------------------------------------------------------------------------ (c) DVL without lock

NO_LOCK = """environment:
  seabed_depth: 200.0
sensors:
  - {name: dvl, type: dvl, link: base_link, rate: 25, max_range: 50.0, seed: 3}
"""


def test_dvl_beyond_max_range_publishes_no_twist_its_reason_on_diagnostics_and_its_beams(probe, diag, tmp_path):
    ns, total = "snc", 100
    path = tmp_path / "nolock.yaml"
    path.write_text(NO_LOCK)
    proc = node(ns, tmp_path, ROV, path, diagnostics_rate=50.0)
    twist = Recorder(probe, TwistWithCovarianceStamped, f"/{ns}/sensors/dvl", qos=QOS)
    beams = Recorder(probe, Range, f"/{ns}/sensors/dvl/beams", qos=QOS)
    statuses = []

    def on_diag(m):
        statuses.extend(s for s in m.status if s.name.startswith(f"/{ns}/dynamics_node/sensors/dvl"))

    probe.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, QoSProfile(depth=100))
    n_samples = total // 20 + 1
    with proc:
        probe.spin_until(lambda: ready(probe, diag, ns, ("sensors/dvl", "sensors/dvl/beams")), what="the DVL topics",
                         alive=[proc])
        step(probe, ns, total, proc)
        probe.spin_until(lambda: len(beams) >= 4 * n_samples and any(s.level == DiagnosticStatus.WARN
                                                                    for s in statuses),
                         what="the beams and a WARN on /diagnostics", alive=[proc])
        assert proc.wait_for_log("no output", timeout=TIMEOUT)
    assert len(twist) == 0
    assert stamps(beams) == [k * DT for k in range(0, total + 1, 20) for _ in range(4)]
    assert all(m.range == math.inf for m in beams.messages)  # REP 117: no return within max_range
    warn = [s for s in statuses if s.level == DiagnosticStatus.WARN][-1]
    assert "no bottom lock" in warn.message and "max_range 50 m" in warn.message, warn.message
    values = cv.values_from_status(warn)
    assert values["invalid"] >= 1 and values["published"] == 0
    assert "no bottom lock" in proc.log_text()


# ------------------------------------------------------------------------------------ the robot YAML's sensors


def test_the_robot_yamls_sensors_are_the_default_and_none_turns_them_off(probe, tmp_path):
    robot = tmp_path / "rov_with_sensors.yaml"
    robot.write_text(f"""\
robot:
  name: rov_with_sensors
  base: se3
  urdf: {ROOT / "config" / "robots" / "bluerov2_heavy.urdf.xacro"}
  xacro_args: {{with_arm: "false", water_density: "1025"}}
  environment: {{seabed_depth: 30.0}}
  sensors:
    - {{name: imu, type: imu, link: base_link, rate: 100}}
    - {{name: depth, type: pressure, link: base_link, rate: 50, delay: 0.01}}
""")
    procs = {"sny": node("sny", tmp_path, robot, None), "snn": node("snn", tmp_path, robot, "none")}
    with running(procs):
        probe.spin_until(lambda: matched(probe, "sny", ("sensors/imu", "sensors/depth", "sensors/depth/depth"))
                         and matched(probe, "snn", ("odom",)), what="both nodes", alive=list(procs.values()))
        assert procs["sny"].wait_for_log(f"2 sensors from {robot}: imu (imu, 100 Hz), depth (pressure, 50 Hz, "
                                         "delay 0.01 s)", timeout=TIMEOUT)
        assert procs["snn"].wait_for_log("; no sensors; ", timeout=TIMEOUT)
    assert "sensors from" not in procs["snn"].log_text()


# ------------------------------------------------------------------------------------ (d) bad files refused

BAD_LINK = """sensors:
  - {name: imu, type: imu, link: base_link, rate: 100}
  - {name: depth, type: pressure, link: no_such_link, rate: 50}
"""
BAD_NOISE = """sensors:
  - {name: dvl, type: dvl, link: base_link, rate: 25, noise: {velocity_std: -1}}
"""
BAD_RATE = """sensors:
  - {name: imu, type: imu, link: base_link, rate: 300}
"""


@pytest.mark.parametrize("text, where, key", [(BAD_LINK, "sensors[1] (depth)", "link"),
                                              (BAD_NOISE, "sensors[0] (dvl)", "noise.velocity_std"),
                                              (BAD_RATE, "sensors[0] (imu)", "rate")])
def test_a_bad_sensors_file_refuses_the_start_naming_file_sensor_and_key(tmp_path, text, where, key):
    path = tmp_path / "bad_sensors.yaml"
    path.write_text(text)
    proc = node("snd", tmp_path, ROV, path)
    with proc:
        rc = proc.wait(timeout=TIMEOUT)
    log = proc.log_text()
    assert rc == 2, log
    assert f"invalid parameters: sensors: {path}: {where}: {key}: " in log, log


# ------------------------------------------------------------------------------------ Foxglove layout (no process)


def test_the_foxglove_layout_plots_the_sensors_the_bridge_serves(tmp_path):
    import json
    import re

    from mbs_ros.bringup import foxglove_layout
    from mbs_ros.bringup.foxglove_bridge import foxglove_topics
    from mbs_ros.scenario.schema import load_scenario

    # every type; the IMU's 80 Hz is a whole number of steps at the scenario's 400 Hz, not at the node's default
    (tmp_path / "s.yaml").write_text(ALL_SENSORS.replace("rate: 100, seed: SEED1", "rate: 80, seed: SEED1")
                                     .replace("delay: 0.004, ", "").replace("SEED", "1"))
    (tmp_path / "rov_sensed.yaml").write_text(f"""\
name: rov_sensed
description: the vehicle-manipulator with every sensor type
physics_rate: 400.0
duration: 1.0
robots:
  - namespace: rov
    model: {UVMS}
    base_group: se3
    dynamics:
      sensors: {tmp_path / "s.yaml"}
""")
    scenario = load_scenario(tmp_path / "rov_sensed.yaml")
    d = json.loads(foxglove_layout.layout_text(scenario))
    paths = [p["value"] for p in d["configById"]["Plot!sensors"]["paths"]]
    assert paths == ["/rov/sensors/imu.linear_acceleration.z", "/rov/sensors/depth/depth.point.z",
                     "/rov/sensors/dvl.twist.twist.linear.x", "/rov/sensors/dvl.twist.twist.linear.y",
                     "/rov/sensors/dvl.twist.twist.linear.z"]
    assert d["configById"]["3D!scene"]["topics"]["/rov/sensors/dvl/beams"] == {"visible": True}

    def leaves(node):
        return [node] if isinstance(node, str) else leaves(node["first"]) + leaves(node["second"])

    assert sorted(leaves(d["layout"])) == sorted(d["configById"])
    served = set(foxglove_topics(scenario))
    shown = {re.match(r"^(/[^.]+)\.", p).group(1) for p in paths} | set(d["configById"]["3D!scene"]["topics"])
    assert shown <= served, sorted(shown - served)
    assert {"/rov/nav/mag", "/rov/sensors/gps", "/rov/sensors/arm_encoders", "/rov/sensors/wrist_ft"} <= served


# ------------------------------------------------------------------------------------ conversions (no process)


def reading(kind, valid=True, reason=None, **values):
    return SimpleNamespace(name="s", type=kind, k=3, stamp_ns=1_500_000_007, publish_k=3, valid=valid,
                           reason=reason, values=values)


def test_range_follows_rep_117_and_an_invalid_dvl_reading_gives_beams_only():
    assert beam_range(12.5, 0.3, 50.0) == 12.5
    assert beam_range(float("nan"), 0.3, 50.0) == math.inf  # no return
    assert beam_range(63.1, 0.3, 50.0) == math.inf
    assert beam_range(0.1, 0.3, 50.0) == -math.inf
    r = reading("dvl", False, "no bottom lock", velocity=None, velocity_cov=np.zeros(9), mode=None,
                ranges=np.array([np.nan, 20.0, 0.1, 55.0]), beam_directions=np.zeros((4, 3)))
    out = reading_messages(r, "rov/dvl", [f"rov/dvl/beam{i}" for i in range(4)], (0.3, 50.0))
    assert [s for s, _ in out] == ["/beams"] * 4
    assert [m.range for _, m in out] == [math.inf, 20.0, -math.inf, math.inf]
    assert [m.header.frame_id for _, m in out] == [f"rov/dvl/beam{i}" for i in range(4)]
    assert all(cv.ns_from_time(m.header.stamp) == 1_500_000_007 for _, m in out)
    locked = reading("dvl", velocity=np.array([0.5, -0.25, 0.125]), velocity_cov=np.arange(9.0), mode="bottom",
                     ranges=np.full(4, 10.0), beam_directions=np.zeros((4, 3)))
    (suffix, m), *_ = reading_messages(locked, "rov/dvl", [f"b{i}" for i in range(4)], (0.3, 50.0))
    assert suffix == "" and m.header.frame_id == "rov/dvl"
    assert [m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z] == [0.5, -0.25, 0.125]
    cov = np.array(m.twist.covariance).reshape(6, 6)
    assert np.array_equal(cov[:3, :3], np.arange(9.0).reshape(3, 3)) and list(np.diag(cov)[3:]) == [-1.0] * 3


def test_imu_pressure_gnss_encoders_and_wrench_fields():
    imu = reading("imu", linear_acceleration=np.array([0.1, 0.2, 9.8]), angular_velocity=np.array([1.0, 2.0, 3.0]),
                  orientation=None, linear_acceleration_cov=np.full(9, 2.0), angular_velocity_cov=np.full(9, 3.0),
                  orientation_cov=np.array([-1.0] + [0.0] * 8))
    [(_, m)] = reading_messages(imu, "imu")
    assert [m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z] == [0.1, 0.2, 9.8]
    assert [m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z] == [1.0, 2.0, 3.0]
    assert m.orientation_covariance[0] == -1.0 and list(m.linear_acceleration_covariance) == [2.0] * 9
    p = reading("pressure", fluid_pressure=151_600.5, variance=4.0, depth=5.0, depth_variance=1e-6)
    (s1, m1), (s2, m2) = reading_messages(p, "rov/depth")
    assert (s1, s2) == ("", "/depth") and m1.fluid_pressure == 151_600.5 and m1.variance == 4.0
    assert (m2.point.x, m2.point.y, m2.point.z) == (0.0, 0.0, 5.0) and m2.header.frame_id == "rov/depth"
    assert reading_messages(reading("pressure", False, "out of the water"), "x") == []
    fix = reading("gnss", latitude=48.1, longitude=11.5, altitude=520.0, status=0, position_cov=np.eye(3).ravel())
    [(_, g)] = reading_messages(fix, "gps")
    assert (g.status.status, g.latitude, g.longitude, g.altitude) == (0, 48.1, 11.5, 520.0)
    assert g.position_covariance_type == NavSatFix.COVARIANCE_TYPE_KNOWN
    nofix = reading("gnss", False, "under water", latitude=math.nan, longitude=math.nan, altitude=math.nan,
                    status=-1, position_cov=np.eye(3).ravel())
    [(_, g)] = reading_messages(nofix, "gps")
    assert g.status.status == -1 and g.position_covariance_type == NavSatFix.COVARIANCE_TYPE_UNKNOWN
    enc = reading("encoders", names=("a", "b"), position=np.array([0.5, -0.5]), velocity=np.array([1.0, 2.0]))
    [(_, j)] = reading_messages(enc, "enc")
    assert list(j.name) == ["a", "b"] and list(j.position) == [0.5, -0.5] and list(j.velocity) == [1.0, 2.0]
    assert list(j.effort) == []
    ft = reading("force_torque", force=np.array([1.0, 2.0, 3.0]), torque=np.array([4.0, 5.0, 6.0]))
    [(_, w)] = reading_messages(ft, "ft")
    assert list(cv.wrench_from_msg(w.wrench)) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_foot_contact_gives_its_wrench_then_its_contact_state():
    foot = reading("foot_contact", force=np.array([0.5, -1.0, 24.5]), torque=np.array([0.0, 0.1, 0.0]),
                   normal_force=24.4, contact=True)
    (s1, w), (s2, b) = reading_messages(foot, "solo/FL_FOOT")
    assert (s1, s2) == ("", "/contact") and w.header.frame_id == "solo/FL_FOOT"
    assert list(cv.wrench_from_msg(w.wrench)) == [0.5, -1.0, 24.5, 0.0, 0.1, 0.0] and b.data is True
    air = reading("foot_contact", force=np.zeros(3), torque=np.zeros(3), normal_force=0.1, contact=False)
    assert reading_messages(air, "f")[1][1].data is False
