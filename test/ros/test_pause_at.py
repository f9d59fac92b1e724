"""The dynamics node's ``pause_at``: the running simulation pauses itself at t0 + pause_at, exactly there on the grid
(physics steps; control periods in lockstep), after publishing what falls due at that stamp, the state included, and
stands there; set at run time, a time ahead of the simulation's is taken and one already reached refused with the
reason. Real node processes:

- outside lockstep, as fast as possible (a single rigid body at 500 Hz, state at 100 Hz): pause_at 0.375 s, between
  two physics steps, pauses at the next step, 0.376 s, whose state is published although it is off the 10 ms grid;
  then 0.2 s is refused, 0.5 s taken, and the resumed simulation pauses at 0.5 s;
- in lockstep (asv_2link, 5 physics steps per control period), the probe answering every state as a controller:
  pause_at 0.25 s pauses at exactly 0.25 s with every period's state from 0 published once; 0.255 s set at run time
  pauses at the end of the period after it, 0.26 s.

Each node starts paused on simulation time (t0 = 0) with /clock remapped to a topic of its own, so the probe's
subscriptions are matched before the time runs. Every wait is for a graph match, a message, a service reply or a
process exit; nothing is asserted about wall-clock speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DYNAMICS = "mbs_ros.nodes.dynamics_node"
TIMEOUT = 60.0
MS = 1_000_000


class Node:
    """The probe's view of one dynamics node: every odom stamp, the newest /diagnostics values, its services."""

    def __init__(self, probe, ns, proc):
        self.probe, self.ns, self.proc = probe, ns, proc
        self.stamps = []  # odom stamps in arrival order
        self.diagnostics = {}
        probe.node.create_subscription(Odometry, f"/{ns}/odom", self._on_odom, QoSProfile(depth=1000))
        probe.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, QoSProfile(depth=100))

    def _on_odom(self, m):
        self.stamps.append(cv.ns_from_time(m.header.stamp))

    def _on_diagnostics(self, m):
        for s in m.status:
            if s.name.split(":")[0] == f"/{self.ns}/dynamics_node":
                self.diagnostics = cv.values_from_status(s)

    def set_pause_at(self, value):
        req = SetParameters.Request(parameters=[Parameter("pause_at", value=value).to_parameter_msg()])
        return self.probe.call(SetParameters, f"/{self.ns}/dynamics_node/set_parameters", req,
                               alive=[self.proc]).results[0]

    def resume(self):
        r = self.probe.call(SetBool, f"/{self.ns}/dynamics_node/pause", SetBool.Request(data=False),
                            alive=[self.proc])
        assert r.success and "resumed" in r.message, r.message

    def paused_at(self, pause_at_ns, what):
        """Wait until the node reports itself paused at a time at or after ``pause_at_ns`` and its state at that time
        has come; that time [ns]."""
        def paused():
            d = self.diagnostics
            t = round(d.get("sim_time", -1.0) * 1e9)
            return d.get("paused") is True and t >= pause_at_ns and t in self.stamps

        try:
            self.probe.spin_until(paused, what=f"{what}: paused at or after it, with the state there",
                                  alive=[self.proc])
        except AssertionError as e:
            raise AssertionError(f"{e} (newest state {max(self.stamps, default=0) * 1e-9:.3f} s, diagnostics: "
                                 f"t = {self.diagnostics.get('sim_time')} s, paused "
                                 f"{self.diagnostics.get('paused')})") from None
        return round(self.diagnostics["sim_time"] * 1e9)


def wait_for_start(probe, node, *publishers):
    """The paused node's initial state has come and every endpoint of the loop is matched."""
    probe.spin_until(lambda: 0 in node.stamps and "paused" in node.diagnostics
                     and all(p.get_subscription_count() > 0 for p in publishers),
                     what=f"the paused node /{node.ns}", alive=[node.proc])


def test_pause_at_between_steps_pauses_at_the_next_step_with_its_state(tmp_path):
    ns = "pza"
    params = dict(use_sim_time=True, publish_clock=True, start_paused=True, real_time_factor=0.0,
                  physics_rate=500.0, publish_rate=100.0, diagnostics_rate=20.0, pause_at=0.375)
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ROOT / "config" / "rigid_body.yaml",
                       parameters=params, remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    with running({ns: proc}), Probe("test_pause_at_probe", TIMEOUT) as probe:
        node = Node(probe, ns, proc)
        wait_for_start(probe, node)
        node.resume()
        # 0.375 s lies between steps 187 and 188 (2 ms): the first step after it, 0.376 s, off the state's 10 ms grid
        assert node.paused_at(375 * MS, "pause_at 0.375 s") == 376 * MS
        assert set(node.stamps) == set(range(0, 371 * MS, 10 * MS)) | {376 * MS}, sorted(node.stamps)[-5:]
        assert proc.wait_for_log("paused at t = 0.376000000 s (pause_at 0.375 s)", timeout=TIMEOUT), proc.log_tail()
        # at run time: a time the simulation has passed is refused, naming the parameter; a later one is taken
        for past in (0.2, 0.376):
            r = node.set_pause_at(past)
            assert not r.successful and r.reason.startswith(f"pause_at {past:g} s: the simulation is already at"), \
                r.reason
        r = node.set_pause_at(0.5)
        assert r.successful, r.reason
        node.resume()
        assert node.paused_at(500 * MS, "pause_at 0.5 s") == 500 * MS
        assert set(node.stamps) == set(range(0, 501 * MS, 10 * MS)) | {376 * MS}, sorted(node.stamps)[-5:]
    assert proc.returncode == 0, proc.log_tail()


def test_lockstep_pause_at_pauses_at_the_period_with_every_state_before_it(tmp_path):
    ns = "pzl"
    params = dict(lockstep=True, control_rate=100.0, start_paused=True, use_sim_time=True, publish_clock=True,
                  real_time_factor=0.0, diagnostics_rate=20.0, pause_at=0.25)
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns, params_file=ROOT / "config" / "asv_2link.yaml",
                       parameters=params, remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    with running({ns: proc}), Probe("test_pause_at_lockstep_probe", TIMEOUT) as probe:
        node = Node(probe, ns, proc)
        pub_w = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 10)
        pub_j = probe.node.create_publisher(JointState, f"/{ns}/joint_command", 10)

        def answer(m):  # a controller: every state answered with commands stamped with it
            t = cv.ns_from_time(m.header.stamp)
            pub_w.publish(cv.wrench_stamped_msg(t, "", [50.0, 0.0, 0.0, 0.0, 0.0, 2.0]))
            pub_j.publish(cv.joint_state_msg(t, ["shoulder_joint", "elbow_joint"], effort=[1.0, -0.5]))

        probe.node.create_subscription(Odometry, f"/{ns}/odom", answer, QoSProfile(depth=1000))
        wait_for_start(probe, node, pub_w, pub_j)
        node.resume()
        assert node.paused_at(250 * MS, "pause_at 0.25 s") == 250 * MS
        grid = list(range(0, 251 * MS, 10 * MS))
        assert set(node.stamps) == set(grid), sorted(set(node.stamps) ^ set(grid))[:5]
        # off the period grid: the end of the period after it
        r = node.set_pause_at(0.255)
        assert r.successful, r.reason
        node.resume()
        assert node.paused_at(255 * MS, "pause_at 0.255 s") == 260 * MS
        assert set(node.stamps) == set(grid) | {260 * MS}
        assert proc.wait_for_log("pausing at t = 0.250000000 s (pause_at)", timeout=TIMEOUT), proc.log_tail()
    assert proc.returncode == 0, proc.log_tail()
