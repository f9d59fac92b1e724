"""The dynamics node's services under load, real node processes: no request blocks the node or goes unanswered.

- a ``~/step`` of 10⁶ steps on the ROV with its arm (``config/robots/bluerov2_heavy_alpha5.yaml``) runs in chunks:
  ``~/reset`` is answered while it runs (and stops it), a second ``~/step`` is refused as busy, ``~/pause`` stops
  the next one, and SIGINT ends the node long before the steps could be done (the printed figure: seconds from
  SIGINT to exit; the assertion is on the steps, never on the wall clock);
- a ``~/step`` split into chunks takes exactly the steps asked and publishes every state of the rate grid once;
- a burst of 300 requests sent at once (``~/pause``, ``~/step``, ``~/reset``; far beyond rclpy's default queue of
  10) gets 300 replies, and the step index they end at counts every step and reset;
- the replies print their time from the integer ns (a node on wall-clock time, t ≈ 1.8e9 s, where a float is
  256 ns coarse): the text equals ``sim_time``;
- in lockstep, a correctly stamped ``cmd_wrench`` to a thruster-driven vehicle is refused and counted, with a
  rate-limited warning, not an error from inside the callback.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
msgs = pytest.importorskip("mbs_ros_msgs.srv", reason="mbs_ros_msgs not built into this environment yet")
if not hasattr(msgs, "Step"):
    pytest.skip("mbs_ros_msgs has no Step service yet (make setup rebuilds it)", allow_module_level=True)

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder  # noqa: E402

Step = msgs.Step
ROOT = Path(__file__).resolve().parents[2]
DYNAMICS = "mbs_ros.nodes.dynamics_node"
ROV = str(ROOT / "config" / "robots" / "bluerov2_heavy_alpha5.yaml")
TIMEOUT = 60.0
MS = 1_000_000
MILLION = 1_000_000
# the callers' own queues hold every reply of a burst (the node's hold every request: docs/dynamics_node.md)
KEEP_ALL = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def probe():
    with Probe("test_service_requests_probe", TIMEOUT) as p:
        yield p


def rov(ns, tmp_path, **parameters):
    return NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns,
                       parameters=dict(model_file=ROV, base_group="se3", physics_rate=1000.0, publish_rate=100.0,
                                       start_paused=True, use_sim_time=True, **parameters),
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")


def clients(probe, ns, proc):
    """KEEP_ALL clients of the node's three services, once they are all ready."""
    out = {"step": probe.node.create_client(Step, f"/{ns}/dynamics_node/step", qos_profile=KEEP_ALL),
           "pause": probe.node.create_client(SetBool, f"/{ns}/dynamics_node/pause", qos_profile=KEEP_ALL),
           "reset": probe.node.create_client(Trigger, f"/{ns}/dynamics_node/reset", qos_profile=KEEP_ALL)}
    probe.spin_until(lambda: all(c.service_is_ready() for c in out.values()), what=f"the services of /{ns}",
                     alive=[proc])
    return out


def answer(probe, future, what, proc):
    probe.spin_until(future.done, what=what, alive=[proc])
    return future.result()


def newest_stamp(recorder):
    return max((cv.ns_from_time(m.header.stamp) for m in recorder.messages), default=-1)


@pytest.mark.parametrize("events_executor", [True, False], ids=["events_executor", "single_threaded_executor"])
def test_a_million_steps_leave_the_node_free_for_other_services_and_for_sigint(probe, tmp_path, events_executor):
    ns = "svlong" + ("ev" if events_executor else "st")
    proc = rov(ns, tmp_path, use_events_executor=events_executor)
    odom = Recorder(probe, Odometry, f"/{ns}/odom", depth=10000)
    with proc:
        srv = clients(probe, ns, proc)
        # ~/reset while a long ~/step runs: answered during the steps, and it ends them
        step = srv["step"].call_async(Step.Request(steps=MILLION))
        probe.spin_until(lambda: newest_stamp(odom) >= 200 * MS, what="the ~/step under way", alive=[proc])
        busy = answer(probe, srv["step"].call_async(Step.Request(steps=5)), "a second ~/step", proc)
        assert not busy.success and busy.message.startswith(f"busy: a ~/step of {MILLION} steps is in progress"), \
            busy.message
        reset = answer(probe, srv["reset"].call_async(Trigger.Request()), "~/reset during the ~/step", proc)
        assert reset.success and "the ~/step in progress stopped after" in reset.message, reset.message
        taken = int(reset.message.split("stopped after ")[1].split(" of ")[0])
        assert 200 <= taken < MILLION, reset.message
        stopped = answer(probe, step, "the reply of the stopped ~/step", proc)
        assert not stopped.success and stopped.message.startswith(f"stopped by ~/reset after {taken} of {MILLION}")
        assert stopped.step_index == taken + 1  # a reset counts as one step
        # ~/pause ends the next one the same way; the state it stopped at is published
        step = srv["step"].call_async(Step.Request(steps=MILLION))
        probe.spin_until(lambda: newest_stamp(odom) >= (taken + 1 + 200) * MS, what="the second ~/step under way",
                         alive=[proc])
        pause = answer(probe, srv["pause"].call_async(SetBool.Request(data=True)), "~/pause during ~/step", proc)
        assert pause.success and "the ~/step in progress stopped after" in pause.message, pause.message
        stopped = answer(probe, step, "the reply of the paused ~/step", proc)
        assert not stopped.success and "stopped by ~/pause true" in stopped.message, stopped.message
        k = stopped.step_index
        assert taken + 1 < k < taken + 1 + MILLION
        probe.spin_until(lambda: newest_stamp(odom) == k * MS, what="the state the pause stopped at", alive=[proc])
        # SIGINT during a third: the node ends, long before the million steps are taken
        srv["step"].call_async(Step.Request(steps=MILLION))
        probe.spin_until(lambda: newest_stamp(odom) >= (k + 200) * MS, what="the third ~/step under way",
                         alive=[proc])
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=TIMEOUT)  # a deadline only: the old node stepped on for the whole million
        seconds = time.monotonic() - start
        probe.spin_for(0.5)  # the last states in flight
        assert rc == 0, proc.log_tail()
        assert newest_stamp(odom) < (k + MILLION) * MS
    executor = "events" if events_executor else "single-threaded"
    print(f"SIGINT during a 10^6-step ~/step on bluerov2_heavy_alpha5 ({executor} executor): the node exited with 0 "
          f"after {seconds:.3f} s "
          f"(~/reset answered during the steps, after {taken} of them)")


def test_a_step_in_many_chunks_takes_exactly_the_steps_asked(probe, tmp_path):
    ns = "svchunks"
    n = 3000  # about 25-100 us a step: dozens of 10 ms chunks
    proc = rov(ns, tmp_path)
    odom = Recorder(probe, Odometry, f"/{ns}/odom", depth=10000)
    with proc:
        srv = clients(probe, ns, proc)
        r = answer(probe, srv["step"].call_async(Step.Request(steps=n)), f"~/step {n}", proc)
        assert r.success and r.step_index == n and cv.ns_from_time(r.sim_time) == n * MS, r
        assert r.message == f"{n} steps to t = {n // 1000}.000000000 s (step {n})"
        probe.spin_until(lambda: newest_stamp(odom) == n * MS, what="the last state", alive=[proc])
        stamps = [cv.ns_from_time(m.header.stamp) for m in odom.messages]
        # every 10th step (publish_rate 100 Hz) once, t = 0 (the paused start) possibly again for a late match
        assert sorted(set(stamps)) == list(range(0, n * MS + 1, 10 * MS))
        assert len([t for t in stamps if t > 0]) == n // 10
    assert proc.returncode == 0, proc.log_tail()


def test_a_burst_of_300_requests_gets_300_replies(probe, tmp_path):
    ns = "svburst"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns,
                       parameters=dict(start_paused=True, use_sim_time=True, base_group="se2"),
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    with proc:
        srv = clients(probe, ns, proc)
        futures = {"pause": [], "step": [], "reset": []}
        for _ in range(100):  # all at once: the node takes them in while the probe does not spin
            futures["pause"].append(srv["pause"].call_async(SetBool.Request(data=True)))
            futures["step"].append(srv["step"].call_async(Step.Request(steps=1)))
            futures["reset"].append(srv["reset"].call_async(Trigger.Request()))
        every = [f for fs in futures.values() for f in fs]
        try:
            probe.spin_until(lambda: all(f.done() for f in every), timeout=240, what="300 replies", alive=[proc])
        finally:
            print(f"service burst: {sum(f.done() for f in every)}/{len(every)} requests answered")
        assert all(f.result().success for f in every), [f.result().message for f in every if not f.result().success]
        assert all(f.result().message == "already paused" for f in futures["pause"])
        # each step and each reset (the reset state takes the next step's stamp) moved the step index by one
        last = answer(probe, srv["step"].call_async(Step.Request(steps=0)), "~/step 0", proc)
        assert last.step_index == 200 and max(f.result().step_index for f in futures["step"]) <= 200
    assert proc.returncode == 0, proc.log_tail()


def test_the_replies_print_the_time_of_sim_time_exactly(probe, tmp_path):
    """On wall-clock time (t0 = now, about 1.8e18 ns) a float is 256 ns coarse: the text must come from the ns."""
    ns = "svtime"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace=ns,
                       parameters=dict(start_paused=True, base_group="se2", physics_rate=1000.0),
                       remappings={"/clock": f"/{ns}/clock"}, log_file=tmp_path / f"{ns}.log")
    with proc:
        srv = clients(probe, ns, proc)
        for n in (0, 1, 7, 3):
            r = answer(probe, srv["step"].call_async(Step.Request(steps=n)), f"~/step {n}", proc)
            assert r.success and r.sim_time.sec > 1_000_000_000, r
            assert f"t = {r.sim_time.sec}.{r.sim_time.nanosec:09d} s (step {r.step_index})" in r.message, r
        r = answer(probe, srv["reset"].call_async(Trigger.Request()), "~/reset", proc)
        after = answer(probe, srv["step"].call_async(Step.Request(steps=0)), "~/step 0", proc)
        assert f"at t = {after.sim_time.sec}.{after.sim_time.nanosec:09d} s" in r.message, (r.message, after)
    assert proc.returncode == 0, proc.log_tail()


def test_lockstep_refuses_cmd_wrench_for_a_thruster_driven_vehicle_with_a_warning(probe, tmp_path):
    ns = "svlock"
    proc = rov(ns, tmp_path, lockstep=True, control_rate=100.0, diagnostics_rate=20.0)
    odom = Recorder(probe, Odometry, f"/{ns}/odom")
    diags = []
    probe.node.create_subscription(DiagnosticArray, "/diagnostics",
                                   lambda m: diags.extend(cv.values_from_status(s) for s in m.status
                                                          if s.name.startswith(f"/{ns}/dynamics_node")),
                                   QoSProfile(depth=100))
    pub = probe.node.create_publisher(WrenchStamped, f"/{ns}/cmd_wrench", 100)
    sent = 40
    with proc:
        probe.spin_until(lambda: len(odom) > 0 and pub.get_subscription_count() > 0, what="the lockstep ROV",
                         alive=[proc])
        stamp = newest_stamp(odom)  # the state a lockstep command answers
        for i in range(1, sent + 1):  # one at a time (the node's queue holds 10)
            pub.publish(cv.wrench_stamped_msg(stamp, "", [10.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
            probe.spin_until(lambda: diags and diags[-1]["received_cmd_wrench"] == i, what=f"cmd_wrench {i} taken in",
                             alive=[proc])
        assert diags[-1]["rejected_cmd_wrench"] == sent, diags[-1]
        assert diags[-1]["callback_errors"] == 0 and diags[-1]["received_cmd_wrench"] == sent
    assert proc.returncode == 0, proc.log_tail()
    log = proc.log_text()
    assert "[ERROR]" not in log, log
    warnings = [line for line in log.splitlines() if "cmd_wrench rejected" in line]
    assert warnings and all(line.startswith("[WARN]") for line in warnings), log
    assert "thruster_command and joint_command, not cmd_wrench" in warnings[0], warnings
    assert len(warnings) < sent  # rate-limited
