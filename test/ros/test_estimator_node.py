"""estimator_node over ROS (issue 18): real processes of dynamics_node (sensors on), estimator_node and
controller_node (``state_source: estimate``) in lockstep on simulation time, the BlueROV2 Heavy holding station
(no current) on what its sensors tell; and estimator configurations refused at start, naming the parameter.

Every wait is for a graph match, a message count or a process exit with generous deadlines; the assertions are on
simulated time, stamps and states, never on the wall clock.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402

from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, running, stamp_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROV = ROOT / "config" / "robots" / "bluerov2_heavy.yaml"
UVMS = ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml"
TIMEOUT = 60.0
QOS = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
NS_PER_S = 1_000_000_000

# The navigation set on the vehicle, the types' default noise (docs/sensors.md): IMU ADIS16448-class, DVL 5 mm/s
# per beam at 25 deg, pressure 20 Pa with 20 Pa resolution, magnetometer 0.1 uT.
SENSORS = """\
environment:
  fluid_density: 1025.0
  seabed_depth: 20.0
sensors:
  - {name: imu, type: imu, link: base_link, rate: 100, seed: 1}
  - {name: dvl, type: dvl, link: base_link, pose: {xyz: [-0.1, 0.0, -0.15]}, rate: 10, seed: 2}
  - {name: depth, type: pressure, link: base_link, pose: {xyz: [0.2, 0.0, 0.1]}, rate: 20, seed: 3}
  - {name: compass, type: magnetometer, link: base_link, pose: {xyz: [0.0, 0.0, 0.12]}, rate: 20, seed: 4}
"""
P0 = [0.0, 0.0, -5.0]
RUN_S = 20.0  # simulated seconds of station keeping
PHYSICS = 500.0
CONTROL = 50.0


def _nodes(tmp_path, sensors):
    ns = "rov"
    clock = {"/clock": f"/{ns}/clock"}
    common = dict(model_file=str(ROV), use_sim_time=True)
    dyn = NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace=ns, remappings=clock,
                      parameters=dict(common, physics_rate=PHYSICS, control_rate=CONTROL, lockstep=True,
                                      publish_clock=True, initial_position=P0, sensors=str(sensors),
                                      start_paused=True),
                      log_file=tmp_path / "dynamics.log")
    est = NodeProcess("mbs_ros.nodes.estimator_node", name="estimator_node", namespace=ns, remappings=clock,
                      parameters=dict(common, physics_rate=PHYSICS, control_rate=CONTROL, lockstep=True,
                                      sensors=str(sensors), imu="imu", dvl="dvl", depth="depth", compass="compass",
                                      initial_position=P0, initial_position_sigma=0.01),
                      log_file=tmp_path / "estimator.log")
    ctl = NodeProcess("mbs_ros.nodes.controller_node", name="controller_node", namespace=ns, remappings=clock,
                      parameters=dict(common, control_rate=CONTROL, lockstep=True, state_source="estimate",
                                      kp=4.0, kd=4.0),
                      log_file=tmp_path / "controller.log")
    return {"dynamics": dyn, "estimator": est, "controller": ctl}


def test_rov_holds_station_on_the_estimate_within_the_sensor_derived_bound(tmp_path):
    """The ROV (no current, true prior) holds station for 20 s of simulation with its controller on estimate/odom.

    Bound, derived from the sensors' noise: the controller drives the ESTIMATE to the held pose, so the true pose
    is off by the estimation error (plus a control residual much smaller at kp = kd = 4). Depth: the pressure
    sensor's sigma is sqrt(20^2 + 20^2/12) Pa = 20.8 Pa, i.e. 20.8 / (1025 * 9.81) = 2.1 mm per sample; the filter
    averages 20 samples a second, so 3 sigma of one sample (6 mm) bounds it. Horizontal: x and y are dead
    reckoning on the DVL: a Janus solution at theta = 25 deg has sigma_vx = 0.005 / (sqrt(2) sin 25 deg) =
    8.4 mm/s per ping; integrating independent ping errors held for 0.1 s gives sigma_x(T) = sigma_vx sqrt(0.1 T)
    = 11.8 mm at T = 20 s, plus the prior's 10 mm (initial_position_sigma); 3 sigma per axis: 46 mm. Together
    sqrt(2 * 46^2 + 6^2) = 65 mm; with a generous factor 3: 0.2 m. A filter that ignores the DVL or the depth
    (or mistakes their frames) drifts with the IMU's double-integrated noise and bias (0.5 a t^2 with 0.02 m/s^2
    turn-on bias: 4 m at 20 s) far beyond it.

    Consistency: the estimate agrees with the true odom within its own 3 sigma (per position axis, from
    estimate/odom's pose covariance) at >= 90 % of the stamps (a consistent Gaussian: 99.7 % per axis, 99 % for
    all three; 90 % leaves margin for the first seconds and the model mismatch of the random-walk bias)."""
    sensors = tmp_path / "sensors.yaml"
    sensors.write_text(SENSORS)
    procs = _nodes(tmp_path, sensors)
    with Probe("test_estimator_probe", TIMEOUT) as probe:
        # the dynamics node starts paused and is resumed once the probe has RECEIVED the state and the estimate at
        # t = 0 (the paused dynamics node sends its state again to a new subscriber, the lockstep estimator its
        # newest estimate every RESEND_S): a match seen from the probe's side does not mean the publisher has
        # matched the probe yet, and estimates sent before that are lost to the probe
        odom = Recorder(probe, Odometry, "/rov/odom", qos=QOS)
        est = Recorder(probe, Odometry, "/rov/estimate/odom", qos=QOS)
        with running(procs):
            probe.spin_until(lambda: len(odom) and len(est), timeout=TIMEOUT,
                             what="the state and the estimate at t = 0", alive=list(procs.values()))
            assert probe.call(SetBool, "/rov/dynamics_node/pause", SetBool.Request(data=False),
                              alive=list(procs.values())).success
            end = int(RUN_S * NS_PER_S)
            probe.spin_until(lambda: len(odom) and stamp_of(odom.messages[-1]) >= end, timeout=900.0,
                             what=f"{RUN_S} s of simulated station keeping", alive=list(procs.values()))
            probe.spin_until(lambda: len(est) and stamp_of(est.messages[-1]) >= end, timeout=TIMEOUT,
                             what="the estimate of the last state", alive=list(procs.values()))
    truth = {stamp_of(m): m for m in odom.messages}
    estimate = {stamp_of(m): m for m in est.messages}
    period = int(round(NS_PER_S / CONTROL))
    stamps = [t for t in sorted(truth) if t <= end]
    # lockstep: every state of the run has its estimate, with the same stamp (the controller answered each)
    assert all(t % period == 0 for t in stamps)
    missing = [t for t in stamps if t not in estimate]
    assert not missing, f"{len(missing)} states without an estimate, first at {missing[0] * 1e-9:.3f} s"

    def pos(m):
        p = m.pose.pose.position
        return np.array([p.x, p.y, p.z])

    drift = np.array([np.linalg.norm(pos(truth[t]) - np.array(P0)) for t in stamps])
    print(f"station keeping on the estimate over {RUN_S:g} s: max |p - p0| = {drift.max():.4f} m, "
          f"RMS {math.sqrt(np.mean(drift ** 2)):.4f} m (bound 0.2 m)")
    assert drift.max() < 0.2, f"max station-keeping error {drift.max():.3f} m"
    inside = []
    for t in stamps:
        err = pos(estimate[t]) - pos(truth[t])
        sigma = np.sqrt(np.diag(np.array(estimate[t].pose.covariance).reshape(6, 6))[:3])
        inside.append(bool(np.all(np.abs(err) <= 3.0 * sigma)))
    share = float(np.mean(inside))
    print(f"estimate within its own 3 sigma (x, y, z) at {100 * share:.1f} % of {len(stamps)} stamps")
    assert share >= 0.9


BAD_IMU = """\
environment: {fluid_density: 1025.0, seabed_depth: 20.0}
sensors:
  - {name: imu, type: imu, link: alpha_link_e, rate: 100}
  - {name: dvl, type: dvl, link: base_link, rate: 10}
"""


@pytest.mark.parametrize("case", ["unknown_sensor", "imu_not_on_base"])
def test_a_bad_estimator_config_is_refused_naming_the_parameter(tmp_path, case):
    """An estimator whose imu names no sensor of the file, or whose IMU is mounted on an arm link, refuses to
    start (exit code 2), its log naming the parameter (and the file / the link)."""
    sensors = tmp_path / "sensors.yaml"
    if case == "unknown_sensor":
        sensors.write_text(SENSORS)
        params = dict(model_file=str(ROV), imu="imu_2", dvl="dvl")
        expected = [f"imu: no sensor 'imu_2' in {sensors}", "it declares: compass, depth, dvl, imu"]
    else:
        sensors.write_text(BAD_IMU)
        params = dict(model_file=str(UVMS), imu="imu", dvl="dvl")
        expected = ["imu: sensor 'imu' is mounted on link 'alpha_link_e', not on the base link 'base_link'"]
    proc = NodeProcess("mbs_ros.nodes.estimator_node", name="estimator_node", namespace="bad",
                       parameters=dict(params, sensors=str(sensors), physics_rate=500.0),
                       log_file=tmp_path / "estimator.log")
    with running([proc]):
        rc = proc.wait(timeout=TIMEOUT)
        log = proc.log_text()
    assert rc == 2, log
    for text in expected:
        assert text in log, log


def test_malformed_and_unordered_imu_messages_never_reach_the_filter(tmp_path):
    """An estimator on the wall clock (origin: its first IMU sample) gets IMU samples of a vehicle at rest (specific
    force +9.81 up, no rotation), among them one with a NaN rate and one stamped before its predecessor: both are
    rejected (rejected_imu = 2 on ~/diagnostics, one rate-limited warning in the log), every estimate stays finite and
    at rest
    (the prior's position: a NaN that reached the filter would make every later estimate NaN; an out-of-order
    sample propagated backwards, or its later duplicate, would move it)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import Imu

    from mbs_ros.nodes import conversions as cv

    sensors = tmp_path / "sensors.yaml"
    sensors.write_text(SENSORS)
    proc = NodeProcess("mbs_ros.nodes.estimator_node", name="estimator_node", namespace="mal",
                       parameters=dict(model_file=str(ROV), sensors=str(sensors), physics_rate=500.0, imu="imu",
                                       publish_rate=50.0, initial_position=P0),
                       log_file=tmp_path / "estimator.log")
    t0 = 1_000_000_000
    period = 10_000_000  # the IMU's 100 Hz

    def imu(k, rate=0.0):
        m = Imu()
        m.header.stamp = cv.time_from_ns(t0 + k * period)
        m.header.frame_id = "mal/imu"
        m.angular_velocity.x = rate
        m.linear_acceleration.z = 9.81
        return m

    # k = 0..40, with a NaN at k = 5 and, after k = 9, k = 7 again (out of order)
    stream = [imu(k) for k in range(5)] + [imu(5, rate=float("nan"))] + [imu(k) for k in range(6, 10)] + \
        [imu(7, rate=1.0)] + [imu(k) for k in range(10, 41)]
    with Probe("test_estimator_malformed", TIMEOUT) as probe, running([proc]):
        est = Recorder(probe, Odometry, "/mal/estimate/odom", qos=QOS)
        diags = Recorder(probe, DiagnosticArray, "/mal/estimator_node/diagnostics")
        pub = probe.node.create_publisher(Imu, "/mal/sensors/imu", QOS)
        probe.spin_until(lambda: pub.get_subscription_count() > 0, what="the estimator's IMU subscription",
                         alive=[proc])
        for m in stream:
            pub.publish(m)
        end = t0 + 40 * period

        def rejected():
            for d in diags.messages:
                values = {kv.key: kv.value for s in d.status for kv in s.values}
                if values.get("rejected_imu") == "2" and int(values.get("estimates", 0)) >= 21:
                    return True
            return False

        probe.spin_until(lambda: len(est) and stamp_of(est.messages[-1]) >= end and rejected(),
                         what="the estimates up to the last sample and rejected_imu = 2", alive=[proc])
        log = proc.log_text()
    stamps = [stamp_of(m) for m in est.messages]
    assert stamps == list(range(t0, end + 1, 20_000_000)), stamps
    for m in est.messages:
        p = m.pose.pose.position
        q = m.pose.pose.orientation
        assert all(math.isfinite(x) for x in (p.x, p.y, p.z, q.x, q.y, q.z, q.w))
        assert np.allclose([p.x, p.y, p.z], P0, atol=1e-9) and abs(q.w) == pytest.approx(1.0, abs=1e-12)
    assert "sensors/imu: message rejected: angular_velocity: not finite" in log, log
    assert log.count("message rejected") == 1, log  # the second within 2 s: held back by the rate limit
