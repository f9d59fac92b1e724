"""Simulation time and lockstep: real node processes, real topics.

- ``publish_clock``: /clock is published and monotonic at ``real_time_factor`` 0 and 0.5, on the physics
  rate's time grid (the pace is printed, not asserted: speed goals live in the benchmarks);
- ``use_sim_time`` on the controller node: its timer and its ``state_timeout`` follow /clock, not the wall clock;
- ``lockstep``: a dynamics node without a controller stands still; it advances one control period exactly when
  the commands stamped with the current state have arrived on every channel it expects, ignores commands stamped
  for another period, and keeps pause and reset; two lockstep runs of a vehicle-manipulator (dynamics_node +
  controller_node, ``config/uvms_6dof.yaml``) publish bit-identical odom, joint_states and /clock sequences.

Each test remaps /clock to a topic of its own (``-r /clock:=/<ns>/clock``, which also moves the nodes' own
use_sim_time subscription), so that runs never see each other's clock. Every wait is for a graph match, a
message, a log line or a process exit; the one bounded observation window is marked.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
import ros_helpers  # noqa: E402
from ros_helpers import Probe, exact_fields  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DYNAMICS = "mbs_ros.nodes.dynamics_node"
CONTROLLER = "mbs_ros.nodes.controller_node"
UVMS_PARAMS = ROOT / "config" / "uvms_6dof.yaml"
ASV_PARAMS = ROOT / "config" / "asv_2link.yaml"
TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
MS = 1_000_000


class Recorder(ros_helpers.Recorder):
    """A deeper queue than the other modules' (10000): /clock at the simulation's pace."""

    def __init__(self, probe, msg_type, topic, depth=10000):
        super().__init__(probe, msg_type, topic, depth=depth)

    def stamps(self):
        return [cv.ns_from_time(m.clock if isinstance(m, Clock) else m.header.stamp) for m in self.messages]


@pytest.fixture(scope="module")
def probe():
    with Probe("test_sim_time_probe", TIMEOUT) as p:
        yield p


def clock_remap(ns):
    return {"/clock": f"/{ns}/clock"}


def count_in_log(proc, text):
    return proc.log_text().count(text)


def wait_for_count(probe, proc, text, n, what=None):
    probe.spin_until(lambda: count_in_log(proc, text) >= n, what=what or f"{n} x {text!r} in {proc.log_path}",
                     alive=[proc])


# ------------------------------------------------------------------------------------ /clock and RTF


def _rate(clock: Recorder, skip=3):
    """Simulated seconds per wall-clock second between the skip-th and the last /clock message (printed only:
    arrival times on a busy machine say little about the node's pace; speed goals live in the benchmark)."""
    stamps = clock.stamps()
    sim = (stamps[-1] - stamps[skip]) * 1e-9
    wall = clock.arrival[-1] - clock.arrival[skip]
    return sim / wall, sim, wall


def test_clock_is_monotonic_and_real_time_factor_paces(probe, tmp_path):
    """Both paces, rtf 0 (as fast as possible) and 0.5, publish a /clock that never goes back, on the 5 ms grid
    of physics_rate from t = 0, with the state stamps on it; each covers a second of simulated time."""
    params = dict(publish_clock=True, use_sim_time=True, physics_rate=200.0, publish_rate=20.0)
    runs = {rtf: NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ROOT / "config/rigid_body.yaml",
                             parameters=dict(params, real_time_factor=rtf), remappings=clock_remap(ns),
                             log_file=tmp_path / f"{ns}.log")
            for rtf, ns in ((0.0, "rtf0"), (0.5, "rtf05"))}
    clocks = {rtf: Recorder(probe, Clock, f"/{ns}/clock") for rtf, ns in ((0.0, "rtf0"), (0.5, "rtf05"))}
    odom = Recorder(probe, Odometry, "/rtf05/odom")
    try:
        for p in runs.values():
            p.start()
        alive = list(runs.values())
        # a second of simulated time on each, seen by the probe (the clock messages are the events waited for)
        probe.spin_until(lambda: all(len(c) > 5 and c.stamps()[-1] - c.stamps()[3] > 10**9 for c in clocks.values()),
                         timeout=120.0, what="1 s of /clock time from both nodes", alive=alive)
        # the state stamps are the simulation time: /clock reaches the latest odom stamp seen (the probe takes
        # the 200 Hz /clock later than the 20 Hz odom when it is busy, so this waits for it)
        o_max = max(odom.stamps(), default=0)
        probe.spin_until(lambda: clocks[0.5].stamps()[-1] >= o_max, timeout=120.0,
                         what="/rtf05/clock reaching the odom stamps", alive=alive)
    finally:
        for p in runs.values():
            assert p.stop() == 0, p.log_tail()
    for rtf, c in clocks.items():
        stamps = c.stamps()
        assert all(b >= a for a, b in zip(stamps, stamps[1:])), f"rtf {rtf}: /clock went backwards"
        assert stamps[-1] > stamps[0]
        # use_sim_time and its own /clock: the simulation time starts at 0 (not at the wall clock's ~1.8e9 s) and
        # moves in 5 ms steps. Until the probe matches, rtf 0.5 simulates a few seconds; rtf 0 (a rigid body at
        # tens of times real time) can pass a minute, never an hour.
        first_bound = 60 if rtf > 0 else 3600
        assert stamps[0] < first_bound * 10**9 and all(t % (5 * MS) == 0 for t in stamps), stamps[:5]
    fast, sim0, wall0 = _rate(clocks[0.0])
    half, sim05, wall05 = _rate(clocks[0.5])
    print(f"real_time_factor 0: {sim0:.2f} s simulated in {wall0:.2f} s ({fast:.1f}x); "
          f"0.5: {sim05:.2f} s in {wall05:.2f} s ({half:.2f}x)")
    # odom stamps lie on the /clock time grid, dt = 5 ms apart
    o = odom.stamps()
    assert o and all(t % (5 * MS) == 0 for t in o)


def test_controller_timer_and_staleness_follow_clock(probe, tmp_path):
    """A controller with use_sim_time commands only when /clock advances, and its state goes stale after
    state_timeout of /clock time, not of wall time."""
    ns = "simctl"
    proc = NodeProcess(CONTROLLER, name="controller_node", namespace=ns, remappings=clock_remap(ns),
                       parameters=dict(use_sim_time=True, control_rate=50.0, state_timeout=0.2),
                       log_file=tmp_path / "simctl.log")
    clock_pub = probe.node.create_publisher(Clock, f"/{ns}/clock", QoSProfile(depth=10))
    odom_pub = probe.node.create_publisher(Odometry, f"/{ns}/odom", 10)
    cmds = Recorder(probe, WrenchStamped, f"/{ns}/cmd_wrench")
    now = [1000 * MS]

    def tick(dt_ns=0):
        now[0] += dt_ns
        clock_pub.publish(Clock(clock=cv.time_from_ns(now[0])))

    with proc:
        probe.spin_until(lambda: clock_pub.get_subscription_count() > 0 and odom_pub.get_subscription_count() > 0
                         and cmds.sub.get_publisher_count() > 0, what="the controller's topics", alive=[proc])
        tick()
        odom_pub.publish(cv.odometry_msg(now[0], "world", f"{ns}/base_link", [0.0, 0.0, 1.0], [0, 0, 0, 1],
                                         [0.0] * 6))
        assert proc.wait_for_log("first state at t = 1.000000 s", timeout=TIMEOUT), proc.log_tail()
        wall_state = time.monotonic()
        # bounded observation window: 0.5 s of wall clock (over twice state_timeout) with /clock standing still.
        # The timer runs on /clock: at most the one call that was overdue when /clock jumped from 0 to 1 s
        # (it may or may not have found the state), and no staleness.
        probe.spin_for(0.5)
        n_frozen = len(cmds)
        assert n_frozen <= 1, f"{n_frozen} commands while /clock stood still"
        # /clock advances 0.1 s in 10 ms ticks: commands at 50 Hz of /clock time (gravity compensation), still
        # fresh although more than state_timeout of wall clock has passed
        for _ in range(10):
            tick(10 * MS)
            probe.spin_for(0.01)
        probe.spin_until(lambda: len(cmds) >= n_frozen + 2, what="commands once /clock advances", alive=[proc])
        assert time.monotonic() - wall_state > 0.5
        assert "s old (state_timeout" not in proc.log_text()
        for m in cmds.messages:
            W = cv.wrench_from_msg(m.wrench)
            assert W[2] > 5.0, f"expected gravity compensation (m g = 9.81 N up), got {W}"
            assert cv.ns_from_time(m.header.stamp) == 1000 * MS
        # /clock passes state_timeout with no new state: one zero command and the warning
        n = len(cmds)
        for _ in range(15):
            tick(20 * MS)
            probe.spin_for(0.01)
        probe.spin_until(lambda: any(not np.any(cv.wrench_from_msg(m.wrench)) for m in cmds.messages[n:]),
                         what="the zero command of a stale state", alive=[proc])
        assert proc.wait_for_log("s old (state_timeout 0.2 s)", timeout=TIMEOUT), proc.log_tail()
    assert proc.returncode == 0, proc.log_tail()


# ------------------------------------------------------------------------------------------ lockstep


def test_lockstep_advances_only_on_commands_for_the_current_period(probe, tmp_path):
    """asv_2link (SE(2) base + 2 joints) in lockstep at 500 Hz physics, 100 Hz control: 5 steps per period,
    waiting for cmd_wrench and joint_command stamped with the current state; no controller."""
    ns = "lone"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ASV_PARAMS,
                       parameters=dict(lockstep=True, control_rate=100.0, publish_clock=True, use_sim_time=True,
                                       real_time_factor=0.0, initial_twist=[0.3, 0.0, 0.0, 0.0, 0.0, 0.1]),
                       remappings=clock_remap(ns), log_file=tmp_path / "lone.log")
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    clock = Recorder(probe, Clock, f"/{ns}/clock")
    pub_w = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10)
    pub_j = probe.node.create_publisher(JointState, f"/{ns}/joint_command", 10)
    names = ["shoulder_joint", "elbow_joint"]
    period = 10 * MS

    def wrench(t, W=(100.0, 0.0, 0.0, 0.0, 0.0, 5.0), frame=""):
        pub_w.publish(cv.wrench_stamped_msg(t, frame, W))

    def joints(t, effort=(3.0, -1.0), names=names):
        pub_j.publish(cv.joint_state_msg(t, names, effort=effort))

    def seen():
        return set(odom.stamps()) | set(clock.stamps())

    with proc:
        probe.spin_until(lambda: len(odom) > 0 and pub_w.get_subscription_count() > 0
                         and pub_j.get_subscription_count() > 0, what="the lockstep node", alive=[proc])
        t0 = odom.stamps()[0]
        assert t0 == 0
        # nothing comes: it waits (and says so) without advancing; the state is sent again meanwhile
        assert proc.wait_for_log("lockstep: waiting at t = 0.000000000 s for cmd_wrench and joint_command",
                                 timeout=TIMEOUT), proc.log_tail()
        probe.spin_until(lambda: len(odom) >= 2, what="the state sent again while waiting", alive=[proc])
        assert seen() == {t0}
        # one channel only, and a joint command for a later period: still standing (the warning about the
        # later stamp is the sign that both were taken in)
        wrench(t0)
        joints(t0 + 1)
        wait_for_count(probe, proc, "later than the current state", 1)
        assert seen() == {t0}
        # the second channel for this period: exactly one control period
        joints(t0)
        probe.spin_until(lambda: t0 + period in seen(), what="the state one control period later", alive=[proc])
        # period 1: a fresh joint command, but the wrench is stale (t0) or rejected (NaN): no advance
        t1 = t0 + period
        joints(t1)
        wrench(t0)
        wrench(t1, W=(math.nan, 0, 0, 0, 0, 0))
        wait_for_count(probe, proc, "cmd_wrench rejected: non-finite", 1)
        assert seen() == {t0, t1}
        # pause: both commands arrive but time stands still; resume: the period is taken
        assert probe.call(SetBool, f"/{ns}/dynamics_node/pause", SetBool.Request(data=True), alive=[proc]).success
        wrench(t1)
        wrench(t1, frame="nowhere")  # processed after the valid one: the sign that it was taken in
        wait_for_count(probe, proc, "unknown frame_id", 1)
        assert seen() == {t0, t1}
        assert probe.call(SetBool, f"/{ns}/dynamics_node/pause", SetBool.Request(data=False), alive=[proc]).success
        t2 = t1 + period
        probe.spin_until(lambda: t2 in seen(), what="the period taken on resume", alive=[proc])
        # reset: the initial state at the next step's stamp, and commands for t2 no longer count
        joints(t2)
        joints(t2, names=["no_such_joint"])
        wait_for_count(probe, proc, "joint_command rejected: needs one effort per name", 1)
        assert probe.call(Trigger, f"/{ns}/dynamics_node/reset", Trigger.Request(), alive=[proc]).success
        t_r = t2 + 2 * MS
        probe.spin_until(lambda: t_r in seen(), what="the reset state", alive=[proc])
        wrench(t_r)
        joints(t_r, effort=(1.0, math.inf))  # rejected, after the others: the sign they were taken in
        wait_for_count(probe, proc, "joint_command rejected: non-finite", 1)
        assert seen() == {t0, t1, t2, t_r}
        reset_state = [m for m in odom.messages if cv.ns_from_time(m.header.stamp) == t_r][0]
        first = odom.messages[0]
        assert reset_state.pose.pose == first.pose.pose and reset_state.twist.twist == first.twist.twist
        joints(t_r)
        probe.spin_until(lambda: t_r + period in odom.stamps() and t_r + period in clock.stamps(),
                         what="a period after the reset", alive=[proc])
    assert proc.returncode == 0, proc.log_tail()
    stamps = clock.stamps()
    assert all(b >= a for a, b in zip(stamps, stamps[1:])), "/clock went backwards"
    assert set(stamps) == {t0, t1, t2, t_r, t_r + period}, sorted(set(stamps))


def _lockstep_run(ns, tmp_path):
    common = dict(use_sim_time=True)
    dyn = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=UVMS_PARAMS,
                      parameters=dict(common, lockstep=True, control_rate=100.0, publish_clock=True,
                                      real_time_factor=0.0, initial_twist=[0.2, -0.1, 0.05, 0.1, 0.0, 0.3],
                                      initial_joint_velocities=[0.4, -0.3, 0.2, 0.5, -0.4, 0.3]),
                      remappings=clock_remap(ns), log_file=tmp_path / f"{ns}_dynamics.log")
    ctl = NodeProcess(CONTROLLER, name="controller_node", namespace=ns, params_file=UVMS_PARAMS,
                      parameters=dict(common, lockstep=True), remappings=clock_remap(ns),
                      log_file=tmp_path / f"{ns}_controller.log")
    return dyn, ctl


def test_two_lockstep_runs_are_identical(probe, tmp_path):
    """Dynamics + controller in lockstep, twice at once in two namespaces: the first N control periods of odom,
    joint_states and /clock are bit-identical (every field, floats by their bytes), and no period is skipped. The
    controllers start once the probe listens to the dynamics nodes, which wait for them at t = 0."""
    N = 100  # control periods: 1 s of simulation time
    period = 10 * MS
    runs = {ns: _lockstep_run(ns, tmp_path) for ns in ("lsa", "lsb")}
    rec = {ns: {"odom": Recorder(probe, Odometry, f"/{ns}/odom"),
                "joint_states": Recorder(probe, JointState, f"/{ns}/joint_states"),
                "clock": Recorder(probe, Clock, f"/{ns}/clock")} for ns in runs}
    procs = [p for pair in runs.values() for p in pair]
    try:
        wall0 = time.monotonic()
        # the dynamics nodes first: without a controller they wait at t = 0, until the probe is listening
        for dyn, _ctl in runs.values():
            dyn.start()
        probe.spin_until(lambda: all(r.sub.get_publisher_count() > 0 for rs in rec.values() for r in rs.values()),
                         what="the probe matched with both dynamics nodes", alive=procs[::2])
        for _dyn, ctl in runs.values():
            ctl.start()
        probe.spin_until(lambda: all(len(set(r["odom"].stamps())) > N and len(set(r["joint_states"].stamps())) > N
                                     for r in rec.values()),
                         timeout=120.0, what=f"{N} control periods of both runs", alive=procs)
        wall = time.monotonic() - wall0
    finally:
        codes = {p.label: p.stop() for p in procs}
    assert all(rc == 0 for rc in codes.values()), codes
    sequences = {}
    for ns, r in rec.items():
        seq = {}
        for topic, recorder in r.items():
            by_stamp = {}
            for t, m in zip(recorder.stamps(), recorder.messages):
                if isinstance(m, Odometry):  # the one field that names the namespace: ns/vehicle
                    assert m.child_frame_id == f"{ns}/vehicle"
                    m.child_frame_id = "vehicle"
                data = exact_fields(m)
                # a state sent again while waiting (start-up) must be the same message
                assert by_stamp.setdefault(t, data) == data, f"{ns}/{topic}: two different messages at t = {t}"
            stamps = sorted(by_stamp)[:N]
            assert stamps == [k * period for k in range(N)], f"{ns}/{topic}: periods skipped or misplaced"
            seq[topic] = [by_stamp[t] for t in stamps]
        sequences[ns] = seq
    for topic in ("odom", "joint_states", "clock"):
        assert sequences["lsa"][topic] == sequences["lsb"][topic], f"{topic}: the two lockstep runs differ"
    # the motion is not trivial: the controller brings the initial velocities back to rest
    js = [m for m in rec["lsa"]["joint_states"].messages if cv.ns_from_time(m.header.stamp) < N * period]
    positions = np.array([m.position for m in js])
    assert np.ptp(positions, axis=0).min() > 1e-3
    print(f"two lockstep runs of {N} control periods (1 s simulated) in {wall:.1f} s of wall clock, start-up "
          "included: identical")


# ------------------------------------------------------------------------------------ no processes


def test_lockstep_and_time_parameters_are_validated():
    from mbs_ros.nodes import dynamics_node as dn
    from mbs_ros.dynamics.model.source import ParameterError

    values = {name: getattr(dn.DEFAULTS, name) for name in dn.PARAMETERS}
    assert dn.lockstep_steps(dn.settings_from_values(dict(values, lockstep=True, control_rate=250.0))) == 4
    with pytest.raises(ParameterError, match="whole number of physics steps per control period"):
        dn.settings_from_values(dict(values, lockstep=True, control_rate=300.0))
    with pytest.raises(ParameterError, match="whole number"):
        dn.settings_from_values(dict(values, lockstep=True, control_rate=2000.0))  # faster than the physics
    dn.settings_from_values(dict(values, control_rate=300.0))  # not used without lockstep
    with pytest.raises(ParameterError, match="real_time_factor must be >= 0"):
        dn.settings_from_values(dict(values, real_time_factor=-1.0))
    for flag in ("lockstep", "publish_clock", "publish_markers"):
        with pytest.raises(ParameterError, match=f"{flag} must be true or false"):
            dn.settings_from_values(dict(values, **{flag: 1}))
