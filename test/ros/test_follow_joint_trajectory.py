"""control_msgs/action/FollowJointTrajectory on the controller node: real node processes (dynamics_node and
controller_node for the 2-link arm of config/robots/arm_2link_planar.yaml on a fixed base, namespace /fjt) and a
real rclpy action client in the test process, on ``/fjt/controller_node/follow_joint_trajectory``.

- a goal succeeds (SUCCESSFUL) and the joints end within its goal tolerance;
- goals joint_trajectory_controller rejects are refused (an unknown joint, a partial goal, times not increasing,
  a last point that moves), the reason in the result: accepted, aborted at once with error_code and error_string
  (a ROS 2 goal response has no field for it), the running goal untouched;
- a tight path tolerance aborts with PATH_TOLERANCE_VIOLATED before the trajectory's end, and the arm holds;
- a goal tolerance not met within goal_time_tolerance aborts with GOAL_TOLERANCE_VIOLATED;
- a cancel mid-trajectory ends the goal CANCELED and the arm holds where it was;
- a second goal preempts the first (aborted with INVALID_GOAL, as the kilted joint_trajectory_controller does) and
  succeeds itself;
- a goal of 2·10⁵ points is refused from its sizes, before it is decoded, and the commands go on.

Times are simulation time (the state stamps, the feedback's time_from_start); every wait is for a message, a
response or a state stamp, with a generous timeout (a busy 2-core machine may run the simulation slower than real
time). The two processes are shared by the tests, which run in order, each from where the previous one left the arm.
"""

from __future__ import annotations

import bisect
import math
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action", reason="control_msgs not built into this environment yet (make setup)")

from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import JointTolerance  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectoryPoint  # noqa: E402

from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running, stamp_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROBOT = ROOT / "config" / "robots" / "arm_2link_planar.yaml"
NS = "fjt"
ACTION = f"/{NS}/controller_node/follow_joint_trajectory"
JOINTS = ["joint1", "joint2"]
TIMEOUT = 60.0  # s of wall clock for any one wait
MODEL = dict(model_file=str(ROBOT), base_group="fixed")
Result = FollowJointTrajectory.Result


def duration(seconds: float) -> Duration:
    sec = math.floor(seconds)
    return Duration(sec=int(sec), nanosec=int(round((seconds - sec) * 1e9)))


def seconds(d: Duration) -> float:
    return d.sec + d.nanosec * 1e-9


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("fjt_logs")
    procs = {
        "dynamics": NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace=NS,
                                parameters=dict(MODEL, physics_rate=500.0, publish_rate=100.0,
                                                initial_joint_positions=[0.3, -0.5]),
                                log_file=logs / "dynamics.log"),
        "controller": NodeProcess("mbs_ros.nodes.controller_node", name="controller_node", namespace=NS,
                                  parameters=dict(MODEL, kp=16.0, kd=8.0), log_file=logs / "controller.log"),
    }
    with running(procs), Probe("test_fjt_probe", TIMEOUT) as probe:
        yield Rig(probe, procs)


class Rig:
    def __init__(self, probe, procs):
        self.probe, self.procs = probe, procs
        self.alive = list(procs.values())
        self.states = Recorder(probe, JointState, f"/{NS}/joint_states", depth=5000)
        self._scanned, self._newest_stamp, self._newest = 0, -1, None
        self.commands = Recorder(probe, JointState, f"/{NS}/joint_command", depth=5000)
        # the feedback topic itself: an action client drops the feedback that arrives after the goal's result
        self.feedback = Recorder(probe, FollowJointTrajectory.Impl.FeedbackMessage, f"{ACTION}/_action/feedback")
        self.client = ActionClient(probe.node, FollowJointTrajectory, ACTION)
        probe.spin_until(lambda: self.client.server_is_ready() and len(self.states) > 0
                         and self.feedback.sub.get_publisher_count() > 0,
                         what="the action server and the joint states", alive=self.alive)
        assert procs["controller"].wait_for_log("first state", timeout=TIMEOUT), procs["controller"].log_tail()

    @property
    def ctl(self):
        return self.procs["controller"]

    def _newest_message(self):
        """The newest joint state so far. Only the states that arrived since the last call are read: the waits
        call this after every message the probe takes, and a scan of all of them (thousands by the later tests)
        each time once made the probe fall seconds behind the simulation on a busy machine."""
        messages = self.states.messages
        for i in range(self._scanned, len(messages)):
            t = stamp_of(messages[i])
            if t >= self._newest_stamp:
                self._newest_stamp, self._newest = t, messages[i]
        self._scanned = len(messages)
        return self._newest

    @staticmethod
    def _joints(m):
        index = {n: i for i, n in enumerate(m.name)}
        return stamp_of(m), np.array([m.position[index[j]] for j in JOINTS]), \
            np.array([m.velocity[index[j]] for j in JOINTS])

    def newest(self):
        """(stamp ns, positions, velocities) of the newest joint state."""
        return self._joints(self._newest_message())

    def state_at(self, t_ns):
        """(stamp ns, positions, velocities) of the first joint state stamped ``t_ns`` or later (once it came)."""
        self.wait_sim(t_ns)
        return self._joints(min((m for m in self.states.messages if stamp_of(m) >= t_ns), key=stamp_of))

    def wait_sim(self, t_ns, what="simulation time"):
        """Spin until a joint state stamped t_ns or later arrived."""
        self.probe.spin_until(lambda: self._newest_message() is not None and self._newest_stamp >= t_ns,
                              what=what, alive=self.alive)

    def goal(self, points, names=JOINTS, path=(), goal=(), goal_time=0.0):
        g = FollowJointTrajectory.Goal()
        g.trajectory.joint_names = list(names)
        for p in points:
            t, pos = p[0], p[1]
            point = JointTrajectoryPoint(positions=[float(x) for x in pos], time_from_start=duration(t))
            if len(p) > 2:
                point.velocities = [float(x) for x in p[2]]
            g.trajectory.points.append(point)
        g.path_tolerance = [JointTolerance(name=n, position=x, velocity=v, acceleration=0.0) for n, x, v in path]
        g.goal_tolerance = [JointTolerance(name=n, position=x, velocity=v, acceleration=0.0) for n, x, v in goal]
        g.goal_time_tolerance = duration(goal_time)
        return g

    def send(self, goal):
        """(goal handle, its feedback so far: a function, result future) once the server answered."""
        future = self.client.send_goal_async(goal)
        self.probe.spin_until(future.done, what="the goal response", alive=self.alive)
        handle = future.result()
        result = handle.get_result_async() if handle.accepted else None
        uuid = bytes(handle.goal_id.uuid)
        return handle, lambda: [m.feedback for m in self.feedback.messages if bytes(m.goal_id.uuid) == uuid], result

    def result(self, future, what="the result"):
        self.probe.spin_until(future.done, what=what, alive=self.alive)
        return future.result()

    def assert_ends_at(self, feedback, t_end, target, tolerance=0.01):
        """A succeeded goal's joints at ``target``: its feedback at the trajectory's end ``t_end`` (s) within the
        goal tolerance, and the joint state of that stamp or a newer one within twice that. The joint states wait
        for that stamp: on a busy machine they may reach the probe after the action's result (the newest one was
        once 0.7 s of simulation time old then)."""
        self.probe.spin_until(lambda: feedback() and seconds(feedback()[-1].desired.time_from_start) >= t_end,
                              what="the feedback at the trajectory's end", alive=self.alive)
        last = feedback()[-1]
        assert np.all(np.abs(np.array(last.actual.positions) - target) <= tolerance), (last.actual.positions, target)
        self.wait_sim(stamp_of(last))
        _t, q, _v = self.newest()
        assert np.all(np.abs(q - target) <= 2 * tolerance), (q, target)


def test_goal_succeeds_within_goal_tolerance(rig):
    _t0, q0, _ = rig.newest()
    target = q0 + [0.4, -0.3]
    goal = rig.goal([(1.0, q0 + [0.2, -0.1]), (2.0, target)],
                    path=[(j, 0.2, 0.0) for j in JOINTS], goal=[(j, 0.01, 0.05) for j in JOINTS], goal_time=2.0)
    wall = time.monotonic()
    handle, feedback, future = rig.send(goal)
    assert handle.accepted, rig.ctl.log_tail()
    response = rig.result(future)
    wall = time.monotonic() - wall
    assert response.status == GoalStatus.STATUS_SUCCEEDED, (response, rig.ctl.log_tail())
    assert response.result.error_code == Result.SUCCESSFUL
    # feedback: stamped with the states (simulation time), the controller's joints, desired/actual/error
    rig.probe.spin_until(lambda: feedback() and seconds(feedback()[-1].desired.time_from_start) >= 2.0,
                         what="the final feedback", alive=rig.alive)
    feedback = feedback()
    assert all(list(f.joint_names) == JOINTS for f in feedback)
    stamps = [stamp_of(f) for f in feedback]
    assert stamps == sorted(stamps) and len(feedback) >= 3
    last = feedback[-1]
    np.testing.assert_allclose(last.desired.positions, target, atol=1e-9)
    np.testing.assert_allclose(np.array(last.desired.positions) - last.actual.positions, last.error.positions,
                               atol=1e-12)
    assert last.index == 2  # past both points
    final_error = np.abs(np.array(last.error.positions))
    assert np.all(final_error <= 0.01)
    t_end = stamp_of(last)
    assert 2.0 <= seconds(last.desired.time_from_start) <= 4.0
    # the joints stay there: half a second of simulation time later they are within the goal tolerance still
    rig.wait_sim(t_end + 500_000_000)
    _t, q, v = rig.newest()
    assert np.all(np.abs(q - target) <= 0.01), (q, target)
    assert np.all(np.abs(v) <= 0.05)
    print(f"success: error_code {response.result.error_code} ({response.result.error_string!r}); final |error| "
          f"{np.array2string(final_error, precision=3)} rad at {seconds(last.desired.time_from_start):.3f} s of "
          f"the 2 s trajectory; {len(feedback)} feedbacks; {wall:.2f} s of wall clock for the goal")


REFUSALS = {  # case -> (result code, what error_string says)
    "unknown joint": ("INVALID_JOINTS", "unknown joints ['elbow']: the controller's joints are joint1, joint2"),
    "partial": ("INVALID_JOINTS", "don't match the controller's joints joint1, joint2"),
    "times not increasing": ("INVALID_GOAL", "time_from_start"),
    "last point moving": ("INVALID_GOAL", "the last point's velocities are not zero: [0.5]"),
    "beyond the limits": ("INVALID_GOAL", "joint1"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_invalid_goals_are_rejected(rig, case):
    """issue 31 item 22: the reason used to be only logged (the goal rejected, the client told ``accepted: false``);
    now the client's result has it: status ABORTED, error_code and error_string the logged reason."""
    _t, q0, _ = rig.newest()
    names, points = JOINTS, [(1.0, q0 + 0.1)]
    if case == "unknown joint":
        names = ["joint1", "elbow"]
    elif case == "partial":
        names, points = ["joint1"], [(1.0, [q0[0] + 0.1])]
    elif case == "times not increasing":
        points = [(1.0, q0 + 0.1), (1.0, q0 + 0.2)]
    elif case == "last point moving":
        points = [(1.0, q0 + 0.1, [0.0, 0.5])]
    else:
        points = [(1.0, [4.0, 0.0])]  # joint1's limit is 3.14 (a reference may exceed it by 10 % of the range)
    handle, _feedback, future = rig.send(rig.goal(points, names=names))
    assert handle.accepted, rig.ctl.log_tail()
    response = rig.result(future, what="the refused goal's result")
    code, text = REFUSALS[case]
    assert response.status == GoalStatus.STATUS_ABORTED, response.status
    assert response.result.error_code == getattr(Result, code), (response.result.error_code, response.result)
    assert text in response.result.error_string, response.result.error_string
    assert rig.ctl.wait_for_log(f"goal rejected: {response.result.error_string}", timeout=TIMEOUT), \
        rig.ctl.log_tail()


def test_path_tolerance_violation_aborts_and_holds(rig):
    _t, q0, _ = rig.newest()
    target = q0 + [0.6, 0.4]
    handle, feedback, future = rig.send(rig.goal([(1.5, target)], path=[("joint1", 1e-4, 0.0)]))
    assert handle.accepted, rig.ctl.log_tail()
    response = rig.result(future)
    assert response.status == GoalStatus.STATUS_ABORTED, response
    assert response.result.error_code == Result.PATH_TOLERANCE_VIOLATED, response
    assert "joint1 position error" in response.result.error_string
    rig.probe.spin_until(lambda: feedback() and abs(feedback()[-1].error.positions[0]) > 1e-4,
                         what="the feedback of the violation", alive=rig.alive)
    last = feedback()[-1]
    assert seconds(last.desired.time_from_start) < 1.5  # before the trajectory's end
    held = np.array(last.actual.positions)
    rig.wait_sim(stamp_of(last) + 1_000_000_000)
    _t, q, v = rig.newest()
    assert np.all(np.abs(q - held) < 0.05), (q, held)
    assert np.all(np.abs(v) < 0.02)
    assert np.abs(q - target).max() > 0.3  # it did not go on to the goal


def test_goal_tolerance_not_met_in_time_aborts(rig):
    _t, q0, _ = rig.newest()
    handle, feedback, future = rig.send(rig.goal([(0.5, q0 + [0.1, 0.1])], goal=[(j, 1e-12, 0.0) for j in JOINTS],
                                                 goal_time=0.05))
    assert handle.accepted, rig.ctl.log_tail()
    response = rig.result(future)
    assert response.status == GoalStatus.STATUS_ABORTED, response
    assert response.result.error_code == Result.GOAL_TOLERANCE_VIOLATED, response
    assert "goal_time_tolerance exceeding" in response.result.error_string
    # the feedback of the sample that decided: goal_time_tolerance after the end
    rig.probe.spin_until(lambda: feedback() and seconds(feedback()[-1].desired.time_from_start) >= 0.55,
                         what="the feedback of the violation", alive=rig.alive)
    assert np.all(np.abs(feedback()[-1].error.positions) > 1e-12)


def test_cancel_mid_trajectory_holds(rig):
    """Canceled while it moves, the goal ends CANCELED and the arm holds where the controller had it when the
    cancel came: the time in the result (``canceled at t = ...``), not the probe's newest state when the result
    arrived. On a busy machine the probe once took the result while its newest state was 2 s of simulation older
    than the cancel, which reached the controller near the trajectory's end. The trajectory moves for 7 s so that
    even a cancel that late leaves it well short of the target."""
    _t, q0, _ = rig.newest()
    d = np.array([-1.0, 0.75])
    target = q0 + d
    handle, feedback, future = rig.send(rig.goal([(1.0, q0 + 0.1 * d, 0.2 * d), (7.0, target)]))
    assert handle.accepted, rig.ctl.log_tail()
    rig.probe.spin_until(lambda: feedback() and seconds(feedback()[-1].desired.time_from_start) >= 1.0,
                         what="1 s of the trajectory", alive=rig.alive)
    cancel = handle.cancel_goal_async()
    rig.probe.spin_until(cancel.done, what="the cancel response", alive=rig.alive)
    assert len(cancel.result().goals_canceling) == 1
    response = rig.result(future)
    assert response.status == GoalStatus.STATUS_CANCELED, response
    text = response.result.error_string
    assert text.startswith("canceled at t = ") and text.endswith(" s: holding position"), text
    t_hold = round(float(text.split()[4]) * 1e9) - 1000  # printed to the µs
    # the feedback: none after the cancel; the last one (the controller's last state before it) still moving
    rig.wait_sim(t_hold)
    moved = feedback()
    # the printed time is rounded to the µs, and float64 holds a 1.8e9 s wall-clock time to ~0.24 µs: the cancel
    # may lie up to 0.74 µs after the printed value (a state 211 ns after it was taken for "after the cancel")
    assert max(map(stamp_of, moved)) <= t_hold + 2000, "feedback after the cancel"
    last = moved[-1]
    tau = seconds(last.desired.time_from_start)
    assert tau < 7.0 and np.abs(last.desired.velocities).max() > 0.05, last.desired
    t_held, q_held, _ = rig.state_at(t_hold)
    assert t_held - t_hold < 50_000_000  # a joint state within 5 periods of the cancel
    # past the trajectory's end (and at least 1.5 s on): still there, at rest, short of the target
    _t, q, v = rig.state_at(t_held + round(max(1.5, 7.0 - tau + 0.5) * 1e9))
    assert np.all(np.abs(q - q_held) < 0.05), (q, q_held)  # held where it was (it was moving)
    assert np.all(np.abs(v) < 0.02), v
    assert np.abs(q - target).max() > 0.05, (tau, q, target)


def test_second_goal_preempts_the_first(rig):
    _t, q0, _ = rig.newest()
    first, first_feedback, first_future = rig.send(rig.goal([(3.0, q0 + [0.5, 0.5])]))
    assert first.accepted, rig.ctl.log_tail()
    rig.probe.spin_until(lambda: first_feedback() and seconds(first_feedback()[-1].desired.time_from_start) >= 0.5,
                         what="0.5 s of the first goal", alive=rig.alive)
    _t, q1, _ = rig.newest()
    target = q1 + [-0.3, 0.2]
    second, feedback, future = rig.send(rig.goal([(1.5, target)], goal=[(j, 0.01, 0.05) for j in JOINTS],
                                                 goal_time=2.0))
    assert second.accepted, rig.ctl.log_tail()
    preempted = rig.result(first_future, "the first goal's result")
    assert preempted.status == GoalStatus.STATUS_ABORTED, preempted
    assert preempted.result.error_code == Result.INVALID_GOAL
    assert "preempted" in preempted.result.error_string
    response = rig.result(future, "the second goal's result")
    assert response.status == GoalStatus.STATUS_SUCCEEDED, (response, rig.ctl.log_tail())
    rig.assert_ends_at(feedback, 1.5, target)


def test_a_refused_goal_leaves_the_running_goal_alone(rig):
    """A refused goal is accepted only to carry its reason to the client: it preempts nothing, the running goal
    goes on and succeeds."""
    _t, q0, _ = rig.newest()
    target = q0 + [0.2, -0.2]
    first, first_feedback, first_future = rig.send(rig.goal([(2.0, target)], goal=[(j, 0.01, 0.05) for j in JOINTS],
                                                            goal_time=2.0))
    assert first.accepted, rig.ctl.log_tail()
    rig.probe.spin_until(lambda: first_feedback() and seconds(first_feedback()[-1].desired.time_from_start) >= 0.3,
                         what="0.3 s of the first goal", alive=rig.alive)
    refused, _feedback, refused_future = rig.send(rig.goal([(1.0, q0 + 0.1)], names=["joint1", "elbow"]))
    response = rig.result(refused_future, "the refused goal's result")
    assert (response.status, response.result.error_code) == (GoalStatus.STATUS_ABORTED, Result.INVALID_JOINTS)
    assert not first_future.done()
    result = rig.result(first_future, "the running goal's result")
    assert result.status == GoalStatus.STATUS_SUCCEEDED, (result, rig.ctl.log_tail())
    rig.assert_ends_at(first_feedback, 2.0, target)


def test_oversized_goal_is_refused_before_decoding(rig):
    """2·10⁵ points (one point object repeated: cheap to send) are refused by their count, read before rclpy
    turns the request into Python objects (2.2 s with the interpreter held for 10⁵ points, 12 s for 10⁶): the
    reason says "not decoded", and the controller's commands go on, stamped with the newest states. How long
    the commands paused is printed, not asserted: a request of megabytes also floods the loopback transport, and
    states then reach the controller late (up to 3 s here, after the refusal, with the controller idle)."""
    n = 200_000
    goal = rig.goal([])
    goal.trajectory.points = [JointTrajectoryPoint(positions=[0.1, 0.2], time_from_start=duration(1.0))] * n
    first = len(rig.commands)
    handle, _feedback, future = rig.send(goal)
    response = rig.result(future, what="the oversized goal's result")
    assert (response.status, response.result.error_code) == (GoalStatus.STATUS_ABORTED, Result.INVALID_GOAL)
    assert response.result.error_string == f"{n} points: at most 10000; not decoded"
    assert rig.ctl.wait_for_log(f"goal rejected: {n} points: at most 10000; not decoded", timeout=TIMEOUT), \
        rig.ctl.log_tail()
    answered = len(rig.commands)
    t_answer = max(map(stamp_of, rig.states.messages))
    rig.probe.spin_until(lambda: len(rig.commands) > answered + 50
                         and stamp_of(rig.commands.messages[-1]) >= t_answer + 500_000_000,
                         what="the commands after the refusal", alive=rig.alive)
    stamps = [stamp_of(m) for m in rig.commands.messages[max(first - 10, 0):]]
    assert stamps == sorted(stamps)
    # the states not answered between two consecutive commands (each carries the stamp of the newest state the
    # controller had)
    states = sorted({stamp_of(m) for m in rig.states.messages})
    missed = max(bisect.bisect_left(states, b) - bisect.bisect_right(states, a) for a, b in zip(stamps, stamps[1:]))
    gap = max(b - a for a, b in zip(stamps, stamps[1:])) * 1e-9
    print(f"oversized goal: {len(stamps)} commands around it; at most {missed} states in a row not answered; "
          f"largest command stamp gap {gap:.3f} s")


def test_controller_log_is_clean(rig):
    """No traceback and no error in the controller's log (rejections, aborts and cancels are warnings)."""
    text = rig.ctl.log_text()
    assert "Traceback" not in text and "[ERROR]" not in text, rig.ctl.log_tail(40)
    assert "goal succeeded" in text and "goal canceled" in text
