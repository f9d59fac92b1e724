"""Issue 31 over ROS: a real estimator_node process given the probe's hostile IMU messages (one stamped sec = 2^31 - 1,
thirty at 1e6 rad/s) refuses them (counted on ~/diagnostics, one rate-limited warning), estimates from the real
samples that follow, and stops on SIGINT within the runner's deadline; and the dynamics node's sensor publishing
never publishes a message with a non-finite field (no process: its message check). Waits are for graph matches,
messages and exits with generous deadlines; nothing asserts on the wall clock's speed.
"""
from __future__ import annotations

import math
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import Imu, JointState, NavSatFix, Range  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.nodes.conversions import nonfinite_field  # noqa: E402
from mbs_ros.nodes.dynamics_sensors import SensorPublishing  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, running, stamp_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROV = ROOT / "config" / "robots" / "bluerov2_heavy.yaml"
TIMEOUT = 60.0
QOS = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
SENSORS = """\
environment: {fluid_density: 1025.0, seabed_depth: 20.0}
sensors:
  - {name: imu, type: imu, link: base_link, rate: 100, seed: 1}
"""
P0 = [0.0, 0.0, -5.0]
SIGINT_DEADLINE_S = 10.0  # generous: the probe saw 12.6 s; a bounded callback answers within a fraction of that


def test_a_far_future_stamp_and_impossible_rates_are_refused_and_sigint_stops_the_node(tmp_path):
    """Before (issue 31, items 2 and 3): the future stamp became the IMU stream's newest time, every later real
    sample was "not after the previous one" and no estimate came; 1e6 rad/s samples cost seconds each. Now: 31
    rejections counted, the estimates of the real samples all there (finite, at rest), and SIGINT ends the node
    with exit code 0."""
    sensors = tmp_path / "sensors.yaml"
    sensors.write_text(SENSORS)
    proc = NodeProcess("mbs_ros.nodes.estimator_node", name="estimator_node", namespace="hst",
                       parameters=dict(model_file=str(ROV), sensors=str(sensors), physics_rate=500.0, imu="imu",
                                       publish_rate=50.0, initial_position=P0),
                       log_file=tmp_path / "estimator.log")
    t0 = 1_000_000_000
    period = 10_000_000

    def imu(k, rate=0.0, sec=None):
        m = Imu()
        m.header.stamp = cv.time_from_ns(t0 + k * period)
        if sec is not None:
            m.header.stamp.sec, m.header.stamp.nanosec = sec, 0
        m.header.frame_id = "hst/imu"
        m.angular_velocity.x = rate
        m.linear_acceleration.z = 9.81
        return m

    hostile = [imu(0, sec=2 ** 31 - 1)] + [imu(0, rate=1.0e6) for _ in range(30)]
    stream = hostile + [imu(k) for k in range(0, 41)]
    with Probe("test_estimator_hostile", TIMEOUT) as probe, running([proc]):
        est = Recorder(probe, Odometry, "/hst/estimate/odom", qos=QOS)
        diags = Recorder(probe, DiagnosticArray, "/hst/estimator_node/diagnostics")
        pub = probe.node.create_publisher(Imu, "/hst/sensors/imu", QOS)
        probe.spin_until(lambda: pub.get_subscription_count() > 0, what="the estimator's IMU subscription",
                         alive=[proc])
        for m in stream:
            pub.publish(m)
        end = t0 + 40 * period

        def counted():
            for d in diags.messages:
                values = {kv.key: kv.value for s in d.status for kv in s.values}
                if values.get("rejected_imu") == "31":
                    return True
            return False

        probe.spin_until(lambda: len(est) and stamp_of(est.messages[-1]) >= end and counted(),
                         what="the estimates up to the last real sample and rejected_imu = 31", alive=[proc])
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=SIGINT_DEADLINE_S)
        log = proc.log_text()
    assert rc == 0, log
    stamps = [stamp_of(m) for m in est.messages]
    assert stamps == list(range(t0, end + 1, 20_000_000)), stamps
    for m in est.messages:
        p = m.pose.pose.position
        assert np.allclose([p.x, p.y, p.z], P0, atol=1e-9)
    assert "ahead of the node's clock" in log, log


# ------------------------------------------------------------------------------------ no process: the publish check


def test_the_message_check_finds_every_non_finite_field_but_the_conventions():
    """Every float field, nested and in arrays, is checked; REP 117's ±inf range and a NO_FIX NavSatFix's NaN
    position are the conventions, not faults."""
    m = Imu()
    assert nonfinite_field(m) is None
    m.angular_velocity.y = math.inf
    assert nonfinite_field(m) == "angular_velocity.y"
    m = Imu()
    m.angular_velocity_covariance[4] = math.nan
    assert nonfinite_field(m) == "angular_velocity_covariance[4]"
    j = JointState(name=["a", "b"], position=[0.0, -math.inf])
    assert nonfinite_field(j) == "position[1]"
    r = Range(range=math.inf, min_range=0.3, max_range=50.0)
    assert nonfinite_field(r) is None
    r.max_range = math.nan
    assert nonfinite_field(r) == "max_range"
    fix = NavSatFix(latitude=math.nan)
    fix.status.status = -1
    assert nonfinite_field(fix) is None
    fix.status.status = 0
    assert nonfinite_field(fix) == "latitude"


class _Pub:
    def __init__(self):
        self.sent = []

    def publish(self, m):
        self.sent.append(m)

    def get_subscription_count(self):
        return 1


def test_a_reading_with_a_non_finite_value_is_not_published_but_counted_with_a_warning():
    """A reading marked valid whose message would carry inf (as 1e308 noise densities gave): nothing of it is
    published, ``nonfinite`` counts it, the sensor's diagnostics turn WARN with the field; the next finite reading
    is published and clears it."""
    spec = SimpleNamespace(name="imu", type="imu", frame_id="imu", link="base_link", topic="sensors/imu",
                           period_steps=5, delay_steps=0, rate=100.0, seed=0, T_link_sensor=np.eye(4))
    suite = SimpleNamespace(sensor_set=SimpleNamespace(sensors=(spec,), source="s.yaml"))
    warnings, pubs = [], {}

    def create_publisher(kind, topic, qos):
        pubs[topic] = _Pub()
        return pubs[topic]

    node = SimpleNamespace(create_publisher=create_publisher, get_fully_qualified_name=lambda: "/rov/dynamics_node")
    logs = SimpleNamespace(info=lambda key, text: None)
    sp = SensorPublishing(node, suite, link_frame=lambda link: link, multibody=False, base_frame="base_link",
                          prefix="", warn=lambda key, text: warnings.append(text), logs=logs)
    diag = _Pub()
    sp.create_publishers(10, diag)

    def reading(k, w):
        values = {"linear_acceleration": np.array([0.0, 0.0, 9.81]), "angular_velocity": np.array(w),
                  "orientation": None, "linear_acceleration_cov": np.zeros(9),
                  "angular_velocity_cov": np.full(9, w[0] * w[0]), "orientation_cov": np.r_[-1.0, np.zeros(8)]}
        return SimpleNamespace(name="imu", type="imu", k=k, stamp_ns=k * 2_000_000, values=values, valid=True,
                               reason=None)

    sp.publish_reading(reading(0, [1e200, 0.0, 0.0]))  # its variance overflows: inf in the covariance
    assert pubs["sensors/imu"].sent == []
    assert sp._sensor_counts["imu"] == {"published": 0, "invalid": 0, "nonfinite": 1}
    assert len(warnings) == 1 and "Imu.angular_velocity_covariance[0]" in warnings[0] and "not published" in warnings[0]
    sp.publish_diagnostics(0)
    status = diag.sent[-1].status[0]
    assert status.level == status.WARN and "not published" in status.message
    sp.publish_reading(reading(5, [0.1, 0.0, 0.0]))
    assert len(pubs["sensors/imu"].sent) == 1 and sp._sensor_counts["imu"]["published"] == 1
    sp.publish_diagnostics(5)
    assert diag.sent[-1].status[0].level == diag.sent[-1].status[0].OK


# ------------------------------------------------------------------------------------ no process: a failing tick


def test_a_failing_timer_tick_halts_the_simulation_as_a_reported_fault():
    """A tick that raises (as every tick did with ``resolution: 1e-320``: OverflowError, while /diagnostics said
    "running" with 0 callback errors) halts the simulator with a fault of kind ``exception`` naming the error
    (the node's diagnostics are ERROR while ``sim.fault`` is set), counts a callback error and reports the fault
    once; a second failing tick counts again but keeps the first fault (no second halt)."""
    from mbs_ros.dynamics import Model
    from mbs_ros.dynamics.simulation.simulator import Simulator
    from mbs_ros.nodes.dynamics_node import DynamicsNode

    model = Model.from_yaml(ROV)
    sim = Simulator(model, model.neutral(), np.zeros(model.nv), 0.002)
    sim.advance(3)
    reported, warned = [], []

    def failing():
        raise OverflowError("cannot convert float infinity to integer")

    fake = SimpleNamespace(_on_timer=failing, context=SimpleNamespace(ok=lambda: True),
                           _counts={"callback_errors": 0}, sim=sim,
                           guard=SimpleNamespace(warn=lambda key, text, error=False: warned.append(text)),
                           _report_fault=lambda: reported.append(sim.fault))
    DynamicsNode._tick(fake)
    assert sim.fault is not None and sim.fault.kind == "exception" and sim.fault.k == 3
    assert "OverflowError: cannot convert float infinity to integer" in sim.fault.reason
    assert sim.paused and sim.advance(5) == 0
    assert fake._counts["callback_errors"] == 1 and reported == [sim.fault]
    first = sim.fault
    DynamicsNode._tick(fake)
    assert fake._counts["callback_errors"] == 2 and sim.fault is first and sim.faults == 1


# ------------------------------------------------------------------------------------ start-up refusals (item 6)

UVMS = ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml"
HOSTILE = ROOT / "test" / "fixtures" / "hostile" / "sensors"


@pytest.mark.parametrize("node, fixture, key", [
    ("mbs_ros.nodes.dynamics_node", "rate_5e-324.yaml", "sensors[0] (imu): rate: "),
    ("mbs_ros.nodes.dynamics_node", "beam_angle_1e-300.yaml", "sensors[0] (dvl): beam_angle: "),
    ("mbs_ros.nodes.dynamics_node", "noise_1e200.yaml", "sensors[0] (imu): noise.accelerometer_noise_density: "),
    ("mbs_ros.nodes.estimator_node", "delay_1e308.yaml", "sensors[0] (imu): delay: "),
    ("mbs_ros.nodes.estimator_node", "nul_byte.yaml", ""),
])
def test_a_hostile_sensors_file_refuses_the_start_with_one_line_and_exit_2(node, fixture, key):
    """The probe's start-up tracebacks (exit 1: OverflowError for rate 5e-324 and delay 1e308, LinAlgError for
    beam_angle 1e-300, an overflowing variance for noise 1e200; a NUL byte) are one FATAL line naming the file and
    the key (the file's line and column for a character YAML forbids), exit 2, no traceback."""
    from process_helpers import run_to_exit

    path = HOSTILE / fixture
    role = ["-p", "imu:=imu"] if node.endswith("estimator_node") else []
    rc, out = run_to_exit([sys.executable, "-m", node, "--ros-args", "-p", f"model_file:={UVMS}",
                           "-p", f"sensors:={path}", *role], timeout=TIMEOUT)
    assert rc == 2, out
    assert "Traceback" not in out, out
    fatal = [line for line in out.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and f"sensors: {path}" in fatal[0] and key in fatal[0], out


# ------------------------------------------------------------------------------------ fuzz (item 4's figure)

FUZZ_FILES = 8
FUZZ_STEPS = 250


def _fuzz_sensors(rng, imu_hi):
    """A sensors file with every number drawn log-uniformly over its whole allowed range (signs at random), from
    tiny to the bound (the IMU's noise up to ``imu_hi``: with noise up to the bound nearly every IMU message is
    beyond what an IMU reports, and the estimator has nothing to run on): the vehicle's navigation set (for the
    estimator) plus the arm's sensors."""
    from mbs_ros.sensors.spec import MAX_MAGNITUDE

    def big(lo=1e-12, hi=MAX_MAGNITUDE):
        return float(10 ** rng.uniform(math.log10(lo), math.log10(hi)))

    def signed():
        return big() * float(rng.choice([-1.0, 1.0]))

    pose = {"xyz": [signed() if rng.random() < 0.3 else rng.uniform(-0.3, 0.3) for _ in range(3)],
            "rpy": [signed() for _ in range(3)]}
    imu_noise = {k: big(hi=imu_hi) for k in ("gyroscope_noise_density", "gyroscope_random_walk",
                                    "gyroscope_bias_correlation_time", "gyroscope_turn_on_bias_sigma",
                                    "accelerometer_noise_density", "accelerometer_random_walk",
                                    "accelerometer_bias_correlation_time", "accelerometer_turn_on_bias_sigma")}
    env = {"fluid_density": big(1e-6, 1e5), "water_surface": signed(), "seabed_z": -MAX_MAGNITUDE,
           "atmospheric_pressure": big(), "magnetic_field": [signed() for _ in range(3)]}
    sensors = [
        {"name": "imu", "type": "imu", "link": "base_link", "rate": 500, "pose": pose, "noise": imu_noise,
         "orientation": {"enabled": True, "noise_std": big()}},
        {"name": "dvl", "type": "dvl", "link": "base_link", "rate": 50, "pose": pose,
         "beam_angle": float(rng.uniform(1.0, 80.0)), "max_range": big(1.0), "water_track": bool(rng.random() < 0.5),
         "noise": {"velocity_std": big(), "range_std": big()}},
        {"name": "depth", "type": "pressure", "link": "base_link", "rate": 100, "pose": pose, "bias": signed(),
         "resolution": big(), "noise": {"std": big()}},
        {"name": "compass", "type": "magnetometer", "link": "base_link", "rate": 100, "pose": pose,
         "bias": [signed() for _ in range(3)], "noise": {"std": big()}},
        {"name": "gps", "type": "gnss", "link": "base_link", "rate": 10, "pose": pose,
         "noise": {"horizontal_std": big(), "vertical_std": big(), "correlation_time": big()}},
        {"name": "enc", "type": "encoders", "link": "alpha_base_link", "rate": 100, "resolution": big(),
         "noise": {"position_std": big(), "velocity_std": big()}},
        {"name": "ft", "type": "force_torque", "joint": "alpha_axis_b", "rate": 100,
         "force_bias": [signed() for _ in range(3)], "noise": {"force_std": big(), "torque_std": big()}},
    ]
    return {"environment": env, "sensors": sensors}


def test_fuzzed_sensors_files_publish_nothing_non_finite_and_neither_does_the_estimator(tmp_path):
    """FUZZ_FILES sensors files with every number random over its allowed range, FUZZ_STEPS steps of the UVMS each:
    every message the dynamics node would publish (its own reading_messages) has no non-finite field (but REP 117
    ranges and NO_FIX positions), and the estimator fed the same readings as the node feeds it (reading_payloads;
    malformed ones rejected) gives only finite estimates: pose, twist and their covariances. Prints the counts
    (the issue's figure)."""
    import yaml

    from mbs_ros.cores import estimator as core
    from mbs_ros.cores.estimator_settings import (Fusion, ParameterError, Rejected, build_setup,
                                                  settings_from_values)
    from mbs_ros.cores.parameters import table
    from mbs_ros.dynamics import Model
    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.dynamics.simulation.simulator import Simulator
    from mbs_ros.nodes.dynamics_sensors import reading_messages
    from mbs_ros.sensors.spec import MAX_MAGNITUDE
    from mbs_ros.sensors.suite import SensorSuite

    rng = np.random.default_rng(31)
    model = Model.from_yaml(UVMS)
    source = ms.load_source("", str(UVMS))
    totals = {"messages": 0, "nonfinite": 0, "estimates": 0, "nonfinite_estimates": 0, "rejected": 0,
              "refused_estimator": 0}
    for i in range(FUZZ_FILES):
        path = tmp_path / f"fuzz{i}.yaml"
        path.write_text(yaml.safe_dump(_fuzz_sensors(rng, 1e-2 if i % 2 else MAX_MAGNITUDE)))
        values = {n: p.default for n, p in table("estimator").items()}
        values.update(ms.model_defaults(source))
        values.update(model_file=str(UVMS), sensors=str(path), physics_rate=500.0, imu="imu", dvl="dvl",
                      depth="depth", compass="compass", encoders="enc", publish_rate=50.0)
        setup = build_setup(settings_from_values(values, source), source)
        try:
            fusion = Fusion(setup, origin_ns=0)
        except ParameterError:  # a prior no floating point can hold: the node refuses to start (exit 2)
            totals["refused_estimator"] += 1
            fusion = None
        if fusion is None:
            continue
        roles = core.roles_by_sensor(setup.roles)
        sim = Simulator(model, model.neutral(), rng.normal(0.0, 0.3, model.nv), 0.002)
        sim.set_thrusts(rng.uniform(-20, 20, len(model.thruster_names)))
        suite = SensorSuite(model, setup.sensor_set, 0.002)
        for r in suite.run(sim, FUZZ_STEPS):
            for _suffix, m in reading_messages(r, r.name, [f"{r.name}/beam{j}" for j in range(4)], (0.3, 50.0)):
                totals["messages"] += 1
                totals["nonfinite"] += nonfinite_field(m) is not None
            role = roles.get(r.name)
            if role is None:
                continue
            try:
                items = core.reading_payloads(r, role, setup.model.joint_names, fusion.env, (0.3, 50.0))
            except Rejected:
                totals["rejected"] += 1
                continue
            for t, payload in items:
                try:
                    outs = core.feed(fusion, role, t, payload)
                except Rejected:
                    totals["rejected"] += 1
                    continue
                for o in outs:
                    totals["estimates"] += 1
                    arrays = [o.p, o.R, o.V, o.pose_cov, o.twist_cov, o.joint_positions, o.joint_velocities]
                    totals["nonfinite_estimates"] += not all(np.isfinite(a).all() for a in arrays if a is not None)
    print(f"fuzz of {FUZZ_FILES} sensors files x {FUZZ_STEPS} steps: {totals}")
    assert totals["messages"] > 1000 and totals["estimates"] > 50
    assert totals["nonfinite"] == 0 and totals["nonfinite_estimates"] == 0
