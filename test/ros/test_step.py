"""The dynamics node's ``~/step`` service (mbs_ros_msgs/Step) and ``start_paused``: real node processes.

- determinism: two dynamics nodes of the vehicle-manipulator (``config/uvms_6dof.yaml``) started the same way,
  paused from the start (``start_paused``), given the same commands (base wrench, joint efforts, changed between
  the chunks and timing out on the way) and stepped the same chunks of physics steps publish bit-identical odom and
  joint_states (every field, floats by their bytes), at the stamps the replies name;
- refusals: stepping a running simulation, too many steps; in lockstep one control period at a time, once the
  commands stamped with the current state are there.

Each node runs on simulation time without a /clock publisher (``use_sim_time``: t0 = 0), /clock remapped to a
topic of its own. Every wait is for a graph match, a message, a service reply or a process exit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
msgs = pytest.importorskip("mbs_ros_msgs.srv", reason="mbs_ros_msgs not built into this environment yet")
if not hasattr(msgs, "Step"):
    pytest.skip("mbs_ros_msgs has no Step service yet (make setup rebuilds it)", allow_module_level=True)

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, exact_fields, running  # noqa: E402

Step = msgs.Step
ROOT = Path(__file__).resolve().parents[2]
DYNAMICS = "mbs_ros.nodes.dynamics_node"
UVMS_PARAMS = ROOT / "config" / "uvms_6dof.yaml"
ASV_PARAMS = ROOT / "config" / "asv_2link.yaml"
TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
MS = 1_000_000
DT = 2 * MS  # 500 Hz


@pytest.fixture(scope="module")
def probe():
    with Probe("test_step_probe", TIMEOUT) as p:
        yield p


def by_stamp(recorder, ns):
    """stamp -> exact fields of each message (a state sent again at the same stamp must be the same message)."""
    out = {}
    for m in recorder.messages:
        if isinstance(m, Odometry):  # the one field that names the namespace
            assert m.child_frame_id.startswith(f"{ns}/")
            m.child_frame_id = m.child_frame_id[len(ns) + 1:]
        data = exact_fields(m)
        t = cv.ns_from_time(m.header.stamp)
        assert out.setdefault(t, data) == data, f"{ns}: two different messages at t = {t}"
    return out


class Diagnostics:
    """The newest /diagnostics values of each node (by status name prefix ``/ns/dynamics_node``)."""

    def __init__(self, probe):
        self.values = {}
        self.history = {}  # every report of each node: (its stamp in ns, its values)
        probe.node.create_subscription(DiagnosticArray, "/diagnostics", self._on, QoSProfile(depth=100))

    def _on(self, m):
        for s in m.status:
            name = s.name.split(":")[0]
            self.values[name] = cv.values_from_status(s)
            self.history.setdefault(name, []).append((cv.ns_from_time(m.header.stamp), self.values[name]))

    def count(self, ns, key):
        return self.values.get(f"/{ns}/dynamics_node", {}).get(key, -1)


def step(probe, ns, n, proc):
    return probe.call(Step, f"/{ns}/dynamics_node/step", Step.Request(steps=n), alive=[proc])


def test_two_paused_nodes_stepped_alike_publish_identical_states(probe, tmp_path):
    names = ("sta", "stb")
    params = dict(start_paused=True, use_sim_time=True, diagnostics_rate=20.0,
                  initial_twist=[0.2, -0.1, 0.05, 0.1, 0.0, 0.3],
                  initial_joint_velocities=[0.4, -0.3, 0.2, 0.5, -0.4, 0.3])
    procs = {ns: NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=UVMS_PARAMS,
                             parameters=params, remappings={"/clock": f"/{ns}/clock"},
                             log_file=tmp_path / f"{ns}.log") for ns in names}
    rec = {ns: {"odom": Recorder(probe, Odometry, f"/{ns}/odom", depth=10000),
                "joint_states": Recorder(probe, JointState, f"/{ns}/joint_states", depth=10000)} for ns in names}
    diags = Diagnostics(probe)
    wrench = {ns: probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10) for ns in names}
    effort = {ns: probe.node.create_publisher(Float64MultiArray, f"/{ns}/cmd_joint_effort", 10) for ns in names}
    # chunks of physics steps, and the commands given before some of them (cmd_timeout 0.5 s = 250 steps: the
    # first commands time out during the 300-step chunk)
    plan = [(1, ([0.0, 0.0, 30.0, 0.0, 0.0, 1.0], [2.0, -1.0, 0.5, 0.2, 0.1, -0.1])), (2, None), (7, None),
            (0, None), (40, ([5.0, -3.0, 0.0, 0.5, 0.0, 0.0], [0.0, 1.0, -2.0, 0.0, 0.3, 0.0])), (300, None),
            (13, ([0.0, 0.0, -20.0, 0.0, 0.2, 0.0], [-1.0, 0.0, 0.0, 0.4, 0.0, 0.2])), (137, None)]
    replies = {ns: [] for ns in names}
    alive = list(procs.values())
    with running(procs):
        probe.spin_until(lambda: all(len(r["odom"]) and len(r["joint_states"]) and wrench[ns].get_subscription_count()
                                     and effort[ns].get_subscription_count() and diags.count(ns, "paused") is True
                                     for ns, r in rec.items()),
                         what="both nodes, paused at t = 0, and their command topics", alive=alive)
        sent = 0
        for n, commands in plan:
            if commands is not None:
                W, e = commands
                sent += 1
                for ns in names:
                    wrench[ns].publish(cv.wrench_stamped_msg(0, "", W))
                    effort[ns].publish(Float64MultiArray(data=e))
                # taken in (counted; diagnostics come at 20 Hz while paused) before the steps that use them
                probe.spin_until(lambda: all(diags.count(ns, "received_cmd_wrench") == sent
                                             and diags.count(ns, "received_cmd_joint_effort") == sent
                                             for ns in names), what=f"command set {sent} taken in", alive=alive)
            for ns in names:
                r = step(probe, ns, n, procs[ns])
                assert r.success, r.message
                replies[ns].append((cv.ns_from_time(r.sim_time), r.step_index))
        total = sum(n for n, _ in plan)
        # the state the last reply names has arrived on both topics of both nodes
        probe.spin_until(lambda: all(any(cv.ns_from_time(m.header.stamp) == total * DT for m in r[topic].messages)
                                     for r in rec.values() for topic in r), what="the last stepped state",
                         alive=alive)
        # still paused: every report says so, those published in the middle of a ~/step's steps (the 20 Hz grid
        # on simulation time: every 100 steps) included, and a step while running is refused
        for ns in names:
            reports = diags.history[f"/{ns}/dynamics_node"]
            assert [t for t, v in reports if v["paused"] is not True] == [], ns
            assert {100 * DT, 200 * DT, 300 * DT} <= {t for t, _ in reports}, sorted({t for t, _ in reports})
        ns = names[0]
        assert probe.call(SetBool, f"/{ns}/dynamics_node/pause", SetBool.Request(data=False), alive=alive).success
        r = step(probe, ns, 5, procs[ns])
        assert not r.success and "not paused" in r.message
    assert all(p.returncode == 0 for p in procs.values()), {ns: p.log_tail() for ns, p in procs.items()}

    # the replies: the step index and the time it names, chunk by chunk
    k = np.cumsum([n for n, _ in plan])
    assert replies[names[0]] == replies[names[1]] == [(int(x) * DT, int(x)) for x in k]
    compared = 0
    for topic in ("odom", "joint_states"):
        a, b = (by_stamp(rec[ns][topic], ns) for ns in names)
        a = {t: m for t, m in a.items() if t <= total * DT}  # the first node ran on after its last step
        b = {t: m for t, m in b.items() if t <= total * DT}
        # every chunk's end, and the 100 Hz grid in between (publish_rate: every 5 steps)
        expected = {0} | {int(x) * DT for x in k} | set(range(0, total * DT + 1, 5 * DT))
        assert set(a) == set(b) == expected, (sorted(set(a) ^ expected), sorted(set(b) ^ expected))
        for t in sorted(a):
            assert a[t] == b[t], f"{topic} at t = {t * 1e-9:.3f} s: the two nodes differ"
        compared += len(a)
    # the motion is not trivial: the commands moved the joints and the base
    js = [m for m in rec[names[0]]["joint_states"].messages if cv.ns_from_time(m.header.stamp) <= total * DT]
    assert np.ptp(np.array([m.position for m in js]), axis=0).min() > 1e-3
    print(f"~/step determinism: {compared} odom and joint_states messages of two nodes bit-identical "
          f"({total} steps in {len(plan)} chunks)")


def test_lockstep_steps_one_control_period_once_its_commands_are_there(probe, tmp_path):
    """asv_2link in lockstep (5 physics steps per control period), started paused, no controller: the probe
    answers each state itself."""
    ns = "stl"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ASV_PARAMS,
                       parameters=dict(lockstep=True, control_rate=100.0, start_paused=True, use_sim_time=True,
                                       publish_clock=True, real_time_factor=0.0, diagnostics_rate=20.0),
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    pub_w = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10)
    pub_j = probe.node.create_publisher(JointState, f"/{ns}/joint_command", 10)
    period = 10 * MS
    diags = Diagnostics(probe)

    def answer(t):
        pub_w.publish(cv.wrench_stamped_msg(t, "", [50.0, 0.0, 0.0, 0.0, 0.0, 2.0]))
        pub_j.publish(cv.joint_state_msg(t, ["shoulder_joint", "elbow_joint"], effort=[1.0, -0.5]))

    def stamps():
        return {cv.ns_from_time(m.header.stamp) for m in odom.messages}

    with proc:
        probe.spin_until(lambda: len(odom) > 0 and pub_w.get_subscription_count() > 0
                         and pub_j.get_subscription_count() > 0, what="the paused lockstep node", alive=[proc])
        assert stamps() == {0}
        r = step(probe, ns, 5, proc)
        assert not r.success and "still waits for cmd_wrench and joint_command" in r.message, r.message
        assert r.step_index == 0 and cv.ns_from_time(r.sim_time) == 0
        answer(0)
        probe.spin_until(lambda: diags.count(ns, "received_cmd_wrench") == 1
                         and diags.count(ns, "received_joint_command") == 1, what="the answer taken in", alive=[proc])
        for n in (7, 1):  # one control period, not any number of steps
            r = step(probe, ns, n, proc)
            assert not r.success and "one control period at a time, steps 5" in r.message, r.message
        assert stamps() == {0}
        r = step(probe, ns, 5, proc)
        assert r.success and r.step_index == 5 and cv.ns_from_time(r.sim_time) == period, r
        probe.spin_until(lambda: period in stamps(), what="the state one period later", alive=[proc])
        # time stands still after the step (paused): the next period needs the answer to t = period
        r = step(probe, ns, 0, proc)
        assert r.success and r.step_index == 5 and cv.ns_from_time(r.sim_time) == period
        assert "still waits" in step(probe, ns, 5, proc).message
        assert stamps() == {0, period}
    assert proc.returncode == 0, proc.log_tail()


def test_lockstep_sends_the_inputs_every_period_and_the_rest_at_publish_rate(probe, tmp_path):
    """asv_2link in lockstep (5 physics steps per control period at 500 Hz), publish_rate 25 Hz (every 20 steps):
    odom and joint_states with every period, pose, /tf, wrench and joint_effort with the periods that cross the
    20-step grid (and with the start's state, which may go out before the probe matched). The probe answers each
    state as a controller would."""
    from geometry_msgs.msg import PoseStamped
    from tf2_msgs.msg import TFMessage

    ns = "stpr"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ASV_PARAMS,
                       parameters=dict(lockstep=True, control_rate=100.0, publish_rate=25.0, use_sim_time=True,
                                       publish_clock=True, real_time_factor=0.0),
                       remappings={"/clock": f"/{ns}/clock", "/tf": f"/{ns}/tf"}, log_file=tmp_path / f"{ns}.log")
    rec = {"odom": Recorder(probe, Odometry, f"/{ns}/odom"), "joint_states": Recorder(probe, JointState,
                                                                                     f"/{ns}/joint_states"),
           "pose": Recorder(probe, PoseStamped, f"/{ns}/pose"), "tf": Recorder(probe, TFMessage, f"/{ns}/tf"),
           "wrench": Recorder(probe, WrenchStamped, f"/{ns}/wrench"),
           "joint_effort": Recorder(probe, JointState, f"/{ns}/joint_effort")}
    pub_w = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10)
    pub_j = probe.node.create_publisher(JointState, f"/{ns}/joint_command", 10)
    period, periods = 10 * MS, 24
    answered = set()

    def stamps(topic):
        msgs = rec[topic].messages
        if topic == "tf":
            return {cv.ns_from_time(t.header.stamp) for m in msgs for t in m.transforms}
        return {cv.ns_from_time(m.header.stamp) for m in msgs}

    def answer_new_states():
        for t in sorted(stamps("odom") - answered):
            if t < periods * period:
                pub_w.publish(cv.wrench_stamped_msg(t, "", [20.0, 0.0, 0.0, 0.0, 0.0, 1.0 + t * 1e-9]))
                pub_j.publish(cv.joint_state_msg(t, ["shoulder_joint", "elbow_joint"], effort=[0.5, -0.2]))
            answered.add(t)
        return {periods * period} <= stamps("odom") and {periods * period} <= stamps("joint_states")

    with proc:
        probe.spin_until(lambda: all(r.sub.get_publisher_count() for r in rec.values())
                         and pub_w.get_subscription_count() and pub_j.get_subscription_count(),
                         what="the lockstep node's topics", alive=[proc])
        probe.spin_until(answer_new_states, what=f"{periods} periods answered", alive=[proc])
        probe.spin_for(0.5)  # the last period's queued pieces
    assert proc.returncode == 0, proc.log_tail()
    every = set(range(0, (periods + 1) * period, period))
    grid = {t for t in every if t % (20 * DT) == 0}  # 0, 40, 80, ... ms: the periods ending on the 25 Hz grid
    assert every <= stamps("odom") and every <= stamps("joint_states")
    for topic in ("pose", "tf"):  # the start's state (t = 0) goes out at once, maybe before the probe matched
        got = {t for t in stamps(topic) if 0 < t <= periods * period}
        assert got == grid - {0}, (topic, sorted(got ^ grid))
    for topic in ("wrench", "joint_effort"):  # applied: at a change (a period's start), and again with the
        # state on the grid, stamped with the start of the period's last step
        again = {t for t in stamps(topic) if t <= periods * period and t % period}
        assert again == {t - DT for t in grid if t > 0}, (topic, sorted(again))


def test_lockstep_of_a_base_that_takes_no_wrench_waits_for_the_joints_alone(probe, tmp_path):
    """asv_2link in lockstep with base_actuated false (as a legged robot's base): no cmd_wrench subscription, and
    each period runs once its joint_command is there; a body without joints is refused with the reason."""
    ns = "stba"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ASV_PARAMS,
                       parameters=dict(lockstep=True, control_rate=100.0, base_actuated=False, use_sim_time=True,
                                       publish_clock=True, real_time_factor=0.0),
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    bare = NodeProcess(DYNAMICS, name="dynamics_node", namespace=f"{ns}b",
                       parameters=dict(lockstep=True, base_actuated=False, use_sim_time=True),
                       log_file=tmp_path / f"{ns}b.log")
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    pub_w = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10)
    pub_j = probe.node.create_publisher(JointState, f"/{ns}/joint_command", 10)
    answered, periods, period = set(), 10, 10 * MS

    def answer_new_states():
        for t in sorted({cv.ns_from_time(m.header.stamp) for m in odom.messages} - answered):
            pub_j.publish(cv.joint_state_msg(t, ["shoulder_joint", "elbow_joint"], effort=[0.5, -0.2]))
            answered.add(t)
        return periods * period in answered

    with running([proc, bare]):
        probe.spin_until(lambda: pub_j.get_subscription_count() > 0, what="joint_command matched", alive=[proc])
        probe.spin_until(answer_new_states, what=f"{periods} periods on joint_command alone", alive=[proc])
        assert pub_w.get_subscription_count() == 0  # the node's subscriptions are all made at its start
        assert bare.wait(timeout=TIMEOUT) == 2, bare.log_tail()
    assert proc.returncode == 0, proc.log_tail()
    assert "base_actuated is false and this robot has no movable joint" in bare.log_text(), bare.log_text()


def test_step_refuses_too_many_steps(probe, tmp_path):
    from mbs_ros.nodes import dynamics_node as dn

    ns = "stbig"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns,
                       parameters=dict(start_paused=True, use_sim_time=True, base_group="se2"),
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    with proc:
        r = step(probe, ns, dn.MAX_STEP_REQUEST + 1, proc)
        assert not r.success and "at most" in r.message and r.step_index == 0
        r = step(probe, ns, 3, proc)
        assert r.success and r.step_index == 3 and cv.ns_from_time(r.sim_time) == 3 * MS, r
    assert proc.returncode == 0, proc.log_tail()
