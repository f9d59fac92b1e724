"""A headless run (mbs_ros.headless) records the same states as the lockstep run over ROS, bit for bit.

The ROS run is the runner's (``python -m mbs_ros.bringup SCENARIO --set lockstep=true --set sim_time=true --set
real_time_factor=0 --duration D --record X.mcap``): real node processes, DDS, a recording. The run ends at exactly
t = D (the dynamics node pauses itself there, ``pause_at``) and the recorder finishes there, so the recording holds
the state of every control period from 0 to D, which is asserted, and compared with the headless run's true state at
that stamp, floats by their bytes: the
state the dynamics node publishes is Pinocchio's configuration and body twist as they are (se3 base: position
q[0:3], quaternion q[3:7] xyzw, twist v[0:6] linear first; revolute joints: q[7:], v[6:]).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 240.0  # a whole runner invocation on a loaded 2-core machine
#: scenarios whose contact steps (ms each in Python, every step while the gripper holds the handle) take longer
SLOW = {"uvms_grasp": 900.0}


def _bytes(values) -> bytes:
    return np.asarray(values, dtype=np.float64).tobytes()


def ros_states(bag: Path, namespace: str, prefix: str = ""):
    """``{stamp: (position, quaternion, twist)}`` of odom and ``{stamp: (names, position, velocity)}`` of
    joint_states of ``namespace`` (``prefix`` "estimate/": the estimator's), decoded from a recording (a state
    recorded twice must be the same)."""
    from nav_msgs.msg import Odometry
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    from mbs_ros.recording import read_messages

    odom, joints = {}, {}
    for _schema, channel, record in read_messages(bag):
        if channel.topic == f"/{namespace}/{prefix}odom":
            m = deserialize_message(record.data, Odometry)
            p, o, tw = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist
            value = (_bytes([p.x, p.y, p.z]), _bytes([o.x, o.y, o.z, o.w]),
                     _bytes([tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z]))
            t = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
            assert odom.setdefault(t, value) == value, f"odom: two different states at t = {t}"
        elif channel.topic == f"/{namespace}/{prefix}joint_states":
            m = deserialize_message(record.data, JointState)
            value = (tuple(m.name), _bytes(list(m.position)), _bytes(list(m.velocity)))
            t = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
            assert joints.setdefault(t, value) == value, f"joint_states: two different states at t = {t}"
    return odom, joints


def ros_objects(bag: Path, names) -> dict:
    """``{stamp: [(position, quaternion) bytes per object of names]}`` of the free objects' transforms on /tf
    (``world`` → ``<prefix><name>``; a stamp that does not carry every object is left out)."""
    from rclpy.serialization import deserialize_message
    from tf2_msgs.msg import TFMessage

    from mbs_ros.recording import read_messages

    out = {}
    for _schema, channel, record in read_messages(bag):
        if channel.topic != "/tf":
            continue
        for tf in deserialize_message(record.data, TFMessage).transforms:
            name = tf.child_frame_id.rsplit("/", 1)[-1]
            if tf.header.frame_id != "world" or name not in names:
                continue
            t = tf.header.stamp.sec * 1_000_000_000 + tf.header.stamp.nanosec
            p, o = tf.transform.translation, tf.transform.rotation
            out.setdefault(t, {})[name] = (_bytes([p.x, p.y, p.z]), _bytes([o.x, o.y, o.z, o.w]))
    return {t: [d[n] for n in names] for t, d in out.items() if len(d) == len(names)}


def ros_wrenches(bag: Path, namespace: str, names) -> dict:
    """``{name: {stamp: wrench bytes}}`` of ``contacts/<name>`` (WrenchStamped: force then torque) of
    ``namespace`` (a wrench recorded twice at a stamp must be the same)."""
    from geometry_msgs.msg import WrenchStamped
    from rclpy.serialization import deserialize_message

    from mbs_ros.recording import read_messages

    topics = {f"/{namespace}/contacts/{name}": name for name in names}
    out = {name: {} for name in names}
    for _schema, channel, record in read_messages(bag):
        name = topics.get(channel.topic)
        if name is None:
            continue
        m = deserialize_message(record.data, WrenchStamped)
        f, tq = m.wrench.force, m.wrench.torque
        value = _bytes([f.x, f.y, f.z, tq.x, tq.y, tq.z])
        t = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        assert out[name].setdefault(t, value) == value, f"contacts/{name}: two different wrenches at t = {t}"
    return out


def ros_run(tmp_path: Path, scenario: str, duration: float, count=None, sets=()):
    """The runner's lockstep run as fast as possible, recorded: (the recording, the runner's output); ``count``:
    a fleet template's robots; ``sets``: more ``--set`` overrides."""
    bag = tmp_path / f"{scenario}.mcap"
    cmd = [sys.executable, "-m", "mbs_ros.bringup", scenario, "--set", "lockstep=true", "--set", "sim_time=true",
           "--set", "real_time_factor=0", "--duration", str(duration), "--record", str(bag),
           "--log-dir", str(tmp_path / "logs")] + (["--count", str(count)] if count is not None else [])
    cmd += [arg for s in sets for arg in ("--set", s)]
    out = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=SLOW.get(scenario, RUN_TIMEOUT))
    assert out.returncode == 0, out.stdout
    assert "resumed at t = 0.000000000 s" in out.stdout, out.stdout
    return bag, out.stdout


def runner_ended_the_run(output: str, duration: float) -> None:
    """The runner says the recording reaches the run's end: the dynamics node paused itself at the duration
    (pause_at) and the recorder finished there."""
    end = int(round(duration * 1e9))
    text = f"the recording reaches the run's end, t = {end // 1_000_000_000}.{end % 1_000_000_000:09d} s"
    assert text in output, output


def full_grid(states: dict, duration: float, period: int, what: str) -> set:
    """Assert that a recorded topic (stamp -> state) holds the state of every control period from t = 0 to the
    run's end, exactly the duration, and nothing else; the grid."""
    end = int(round(duration * 1e9))
    grid = set(range(0, end + 1, period))
    assert len(grid) == end // period + 1
    missing, extra = sorted(grid - set(states)), sorted(set(states) - grid)
    assert not missing and not extra, (f"{what}: {len(states)} states recorded, {len(grid)} periods expected from 0 "
                                       f"to {duration:g} s; missing {[t * 1e-9 for t in missing[:8]]}"
                                       f"{' ...' if len(missing) > 8 else ''}, beyond the grid {extra[:8]}")
    return grid


def published(view, rec, i: int, estimate: bool = False):
    """Row ``i`` of a headless record as the dynamics node publishes it: (position, quaternion, twist) of odom and
    (position, velocity) of joint_states, by the dynamics node's own StateView (``view``: (model, StateView) of
    :func:`mbs_ros.headless.run.state_views`). ``estimate``: the controller's state from the estimator, whose
    messages carry Pinocchio's se3 layout as it is."""
    n = len(rec.joint_names)
    if estimate:
        q, v = rec.estimate_q[i], rec.estimate_v[i]
        return (q[0:3], q[3:7], v[0:6]), (q[rec.nq_base:], v[rec.nv_base:])
    model, state_view = view
    q, v = rec.q[i], rec.v[i]
    p, quat = state_view.base_pose(model, q)
    return ((np.asarray(p), np.asarray(quat), np.asarray(state_view.twist(model, q, v))),
            (state_view.joint_positions(q), v[model.nv - n:]))


def first_difference(odom, joints, rec, view=None, estimate: bool = False) -> list:
    """The stamps where the recording and the headless record (``estimate``: its estimate) differ, each with what
    differs."""
    index = {int(t): i for i, t in enumerate(rec.stamp_ns)}
    differ = []
    for t in sorted(set(odom) | set(joints)):
        i = index.get(t)
        if i is None:
            differ.append((t, "no headless row"))
            continue
        (p_, quat_, twist_), (position_, velocity_) = published(view, rec, i, estimate)
        if t in odom:
            p, quat, twist = odom[t]
            for what, ros, mine in (("position", p, p_), ("orientation", quat, quat_), ("twist", twist, twist_)):
                if ros != _bytes(mine):
                    differ.append((t, f"odom {what}: ROS {np.frombuffer(ros).tolist()} headless {mine.tolist()}"))
        if t in joints:
            names, position, velocity = joints[t]
            assert names[: len(rec.joint_names)] == rec.joint_names
            n = len(rec.joint_names)
            for what, ros, mine in (("position", position, position_), ("velocity", velocity, velocity_)):
                ros = np.frombuffer(ros)[:n]
                if ros.tobytes() != _bytes(mine):
                    differ.append((t, f"joint_states {what}: ROS {ros.tolist()} headless {mine.tolist()}"))
    return differ


SCENARIOS = sorted(p.stem for p in (ROOT / "config" / "scenarios").glob("*.yaml"))
#: seconds per scenario (default 0.5 s: at least 25 control periods at 50 Hz); rov_alpha5_sensors has its own test
#: below, with its estimates
#: (rov_landing: it lands at 2.1 s; solo12_stand: its landing and the start of its push)
#: (uvms_grasp: the arm reaches the handle by 2.5 s, the gripper closes on it from 3.0 s and squeezes by 3.9 s)
DURATION = {"vehicle_manipulator": 2.0, "rov_alpha5": 1.5, "rov_landing": 3.0, "solo12_stand": 2.2,
            "uvms_grasp": 4.5}
#: the free objects of a scenario's world, in the world file's order (their poses on /tf are compared too)
OBJECTS = {"uvms_grasp": ("handle",)}
#: the contacts/<link> topics compared with the headless contact_wrenches (the finger pads and the object)
CONTACTS = {"uvms_grasp": ("alpha_finger_l", "alpha_finger_r", "handle")}
OWN_TEST = {"rov_alpha5_sensors"}
#: fleet templates run with this many robots: bringup runs one robot per graph on simulation time (one /clock per
#: graph); that the robots of a larger fleet do not touch one another in a headless run: test/unit/test_headless.py
COUNT = {"fleet": 1}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s not in OWN_TEST])
def test_headless_run_is_bit_identical_to_the_lockstep_ros_run(tmp_path, scenario):
    """Every shipped scenario (config/scenarios; a new one is covered by being there): the recording holds odom and
    joint_states of every robot at every control period from t = 0 to exactly the duration, and each equals the
    headless state at its stamp as the dynamics node publishes it, bit for bit. Among them vehicle_manipulator
    (computed torque, base wrench and joint efforts), rov_alpha5 (thrust allocation to 8 thrusters with their lag,
    added mass, current), fleet (a template robot; one per graph on simulation time), fixed bases (manipulator, panda), se2 vessels, scara's Schoenflies
    base, solo12's contact world, solo12_stand's landing and push (contact steps, the disturbance), rov_landing's
    landing on a sloped seabed (its idle controller: thrust exactly 0) and vehicle_manipulator_sensors (the
    sensors sampled, the controller on the true
    state)."""
    from mbs_ros.scenario.schema import load_scenario
    from mbs_ros.headless import run_scenario
    from mbs_ros.headless.run import state_views

    duration = DURATION.get(scenario, 0.5)
    bag, output = ros_run(tmp_path, scenario, duration, COUNT.get(scenario))
    loaded = load_scenario(scenario, count=COUNT.get(scenario))
    run = run_scenario(loaded, duration=duration)
    assert run.fault is None, run.fault
    views = state_views(loaded)
    assert set(views) == set(run.robots)
    period = int(round(1e9 / run.control_rate))
    runner_ended_the_run(output, duration)
    counts = []
    for namespace, rec in run.robots.items():
        odom, joints = ros_states(bag, namespace)
        grid = full_grid(odom, duration, period, f"{namespace}/odom")
        if rec.joint_names:
            assert full_grid(joints, duration, period, f"{namespace}/joint_states") == grid
        assert set(int(t) for t in rec.stamp_ns) == grid  # the headless run covers the same periods
        differ = first_difference(odom, joints, rec, views[namespace])
        assert not differ, (f"{namespace}: {len(differ)} differences; the first: t = {differ[0][0] * 1e-9:.3f} s: "
                            f"{differ[0][1]}")
        counts.append(f"{namespace}: {len(odom)} odom, {len(joints)} joint_states")
        if scenario in OBJECTS:  # the free objects' poses on /tf against the headless objects_q, bit for bit
            poses = ros_objects(bag, OBJECTS[scenario])
            row = {int(t): i for i, t in enumerate(rec.stamp_ns)}
            compared = [t for t in sorted(poses) if t in row]
            assert len(compared) >= int(duration * 10), (len(poses), len(compared))  # 20 Hz contacts_rate
            for t in compared:
                for k, (p, o) in enumerate(poses[t]):
                    q = rec.objects_q[row[t]][k]
                    assert (p, o) == (_bytes(q[:3]), _bytes(q[3:7])), (t, k, np.frombuffer(p), q[:3])
            counts.append(f"{len(compared)} object poses")
        if scenario in CONTACTS:  # contacts/<link> against the headless contact_wrenches, bit for bit
            recorded = ros_wrenches(bag, namespace, CONTACTS[scenario])
            samples = nonzero = 0
            for name, by_stamp in recorded.items():
                stamps, wrenches = rec.contact_wrenches[name]
                headless = {int(t): _bytes(w) for t, w in zip(stamps, wrenches)}
                # contacts_rate 20 Hz: every grid instant of the run recorded, each one the headless run's
                assert len(by_stamp) >= int(duration * 20) - 1, (name, len(by_stamp))
                assert set(by_stamp) <= set(headless), (name, sorted(set(by_stamp) - set(headless))[:5])
                for t, value in by_stamp.items():
                    assert value == headless[t], (name, t, np.frombuffer(value), np.frombuffer(headless[t]))
                samples += len(by_stamp)
                nonzero += sum(1 for v in by_stamp.values() if np.any(np.frombuffer(v)))
            assert nonzero > 0  # the handle's weight on the seabed and the squeeze: not all zeros
            counts.append(f"{samples} contact wrenches ({nonzero} non-zero)")
    print(f"{scenario}: {'; '.join(counts)} bit-identical to the headless run (every period to t = {duration:g} s)")


def test_headless_run_with_the_estimator_in_the_loop_is_bit_identical(tmp_path):
    """rov_alpha5_sensors: the controller closes its loop on the estimator (IMU, DVL with its beams, depth, compass,
    encoders fused by the invariant EKF in lockstep). Recorded at every control period to exactly the duration, the
    true states (odom, joint_states) are bit-identical to the ROS run; so are the estimates' positions, twists and joint states (estimate/odom, estimate/joint_states against
    the controller's state from them). The estimate's quaternion is compared within 2 units in the last place: the
    controller normalises the quaternion it receives, and the record holds what it used."""
    from mbs_ros.headless import run_scenario
    from mbs_ros.headless.run import state_views

    duration = 1.5
    bag, output = ros_run(tmp_path, "rov_alpha5_sensors", duration)
    run = run_scenario("rov_alpha5_sensors", duration=duration)
    assert run.fault is None, run.fault
    rec = run.robots["rov"]
    period = int(round(1e9 / run.control_rate))
    odom, joints = ros_states(bag, "rov")
    est_odom, est_joints = ros_states(bag, "rov", "estimate/")
    # every control period from t = 0 to exactly the duration, the estimates too
    grid = full_grid(odom, duration, period, "odom")
    for states, what in ((joints, "joint_states"), (est_odom, "estimate/odom"), (est_joints, "estimate/joint_states")):
        assert full_grid(states, duration, period, what) == grid
    assert set(int(t) for t in rec.stamp_ns) == grid
    runner_ended_the_run(output, duration)
    differ = first_difference(odom, joints, rec, state_views("rov_alpha5_sensors")["rov"])
    assert not differ, f"{len(differ)} differences; the first: t = {differ[0][0] * 1e-9:.3f} s: {differ[0][1]}"
    differ = [d for d in first_difference(est_odom, est_joints, rec, estimate=True) if "orientation" not in d[1]]
    assert not differ, f"{len(differ)} differences; the first: t = {differ[0][0] * 1e-9:.3f} s: {differ[0][1]}"
    index = {int(t): i for i, t in enumerate(rec.stamp_ns)}
    for t, (_p, quat, _tw) in est_odom.items():
        np.testing.assert_array_max_ulp(np.frombuffer(quat), rec.estimate_q[index[t], 3:7], maxulp=2)
    print(f"rov_alpha5_sensors: {len(odom)} odom, {len(est_odom)} estimates bit-identical to the headless run")


def test_a_real_time_node_records_the_same_bits(tmp_path):
    """solo12_stand's landing with ``thread_priority`` on its dynamics node: the runner starts it with SCHED_FIFO
    (where the system allows it) and Fast DDS's asynchronous publication (mbs_ros.dds), the messages sent by the
    middleware's thread instead of the callback's; the recorded states are still the headless run's, bit for bit."""
    from mbs_ros.headless import run_scenario
    from mbs_ros.headless.run import state_views
    from mbs_ros.scenario.schema import load_scenario

    duration = 0.4  # the landing (first contact at 0.113 s) and its settling
    bag, output = ros_run(tmp_path, "solo12_stand", duration, sets=["robots[0].dynamics.thread_priority=20"])
    if os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps") \
            and "RMW_FASTRTPS_PUBLICATION_MODE" not in os.environ:
        assert "RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS" in output, output
    log = (tmp_path / "logs" / "solo_dynamics_node.log").read_text()
    assert "thread_priority 20:" in log, log
    runner_ended_the_run(output, duration)
    run = run_scenario("solo12_stand", duration=duration)
    assert run.fault is None, run.fault
    rec = run.robots["solo"]
    odom, joints = ros_states(bag, "solo")
    grid = full_grid(odom, duration, int(round(1e9 / run.control_rate)), "odom")
    assert full_grid(joints, duration, int(round(1e9 / run.control_rate)), "joint_states") == grid
    differ = first_difference(odom, joints, rec, state_views(load_scenario("solo12_stand"))["solo"])
    assert not differ, f"{len(differ)} differences; the first: t = {differ[0][0] * 1e-9:.3f} s: {differ[0][1]}"
