"""The controller node's FollowJointTrajectory action (:class:`TrajectoryActions`, a part of
:class:`~mbs_ros.nodes.controller_node.ControllerNode`): ``~/follow_joint_trajectory`` as ros2_controllers'
joint_trajectory_controller serves it. A goal is checked (:mod:`mbs_ros.controllers.goals`) and its trajectory
decoded as joint_reference's on the reference worker; each state is checked against its tolerances
(:class:`mbs_ros.controllers.goals.GoalMonitor`), which gives the feedback and the outcome. The execute callback is
a coroutine that awaits the outcome the state callbacks, a cancel or a preemption set. A goal request is sized up
in its C form, before rclpy turns it into Python objects (seconds for 10⁶ points, with the interpreter held):
:class:`BoundedGoalIntake`. Behaviour: docs/controller_node.md."""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointComponentTolerance, JointTolerance
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.task import Future
from rclpy.type_support import check_for_type_support
from trajectory_msgs.msg import JointTrajectoryPoint

from mbs_ros.controllers import Reference, goals
from mbs_ros.controllers import reference_input as ri
from mbs_ros.controllers import tolerances as tolerances_
from mbs_ros.controllers.reference_input import Rejected
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.controller_inputs import point_times, stamp_ns
from mbs_ros.nodes.controller_publishing import floats

__all__ = ["TrajectoryActions", "ActiveGoal", "BoundedGoalIntake", "BoundedActionServer"]

_FJT = FollowJointTrajectory.Result
_REQUEST = FollowJointTrajectory.Impl.SendGoalService.Request


class _Seq(ctypes.Structure):  # a rosidl sequence or string: data pointer, size, capacity
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("capacity", ctypes.c_size_t)]


class _Time(ctypes.Structure):  # builtin_interfaces Time or Duration
    _fields_ = [("sec", ctypes.c_int32), ("nanosec", ctypes.c_uint32)]


class _Trajectory(ctypes.Structure):  # JointTrajectory and MultiDOFJointTrajectory: header, joint_names, points
    _fields_ = [("stamp", _Time), ("frame_id", _Seq), ("joint_names", _Seq), ("points", _Seq)]


class _GoalRequest(ctypes.Structure):  # FollowJointTrajectory_SendGoal_Request: goal_id, then the goal's fields
    _fields_ = [("goal_id", ctypes.c_uint8 * 16), ("trajectory", _Trajectory), ("multi_dof_trajectory", _Trajectory),
                ("path_tolerance", _Seq), ("component_path_tolerance", _Seq), ("goal_tolerance", _Seq),
                ("component_goal_tolerance", _Seq), ("goal_time_tolerance", _Time)]


_POINT_WORDS = 13  # a JointTrajectoryPoint: four double sequences and a Duration, 13 machine words
# the tolerance lists and their elements' width in machine words: a JointTolerance is a string and three doubles,
# a JointComponentTolerance a string, a uint16 and three doubles; the name's size is their second word
_TOLERANCES = (("path_tolerance", 6), ("component_path_tolerance", 7), ("goal_tolerance", 6),
               ("component_goal_tolerance", 7))
_CONVERTER = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.c_void_p)  # rosidl's message-to-Python function
_CALL_CONVERTER = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p)
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))


def _pointer(capsule) -> int:
    return _capsule_pointer(capsule, _capsule_name(capsule))


_CAPSULES = ("_CREATE_ROS_MESSAGE", "_DESTROY_ROS_MESSAGE", "_CONVERT_FROM_PY", "_CONVERT_TO_PY", "_TYPE_SUPPORT")


def _capsules(meta) -> Dict[str, object]:
    """The C functions a rosidl message metaclass carries (create, destroy, convert from and to Python, type
    support): what rclpy calls to take a message, here by name as rclpy looks them up."""
    return {name: getattr(meta, name) for name in _CAPSULES}


def _words(seq: _Seq, width: int) -> np.ndarray:
    """The elements of a sequence of structs ``width`` machine words wide, as an (n, width) array of words."""
    if not seq.size:
        return np.zeros((0, width), dtype=np.uint64)
    buf = (ctypes.c_uint64 * (seq.size * width)).from_address(seq.data)
    return np.frombuffer(buf, dtype=np.uint64).reshape(seq.size, width)


class BoundedGoalIntake:
    """The type an action server takes FollowJointTrajectory goal requests as: rosidl's, except that its
    conversion to Python first reads the request's sizes in C memory (:func:`goals.check_goal_sizes`). An
    oversized request is converted with its large sequences emptied (microseconds instead of seconds) and
    remembered with the reason (:meth:`refusal`). The C layout is checked against a known request at start-up;
    ``usable`` is False when it does not match this rclpy's (then requests are taken as rosidl's)."""

    def __init__(self):
        self._refused: Dict[int, tuple] = {}  # id(goal) -> (goal, reason)
        self.request_type, self.usable = _REQUEST, False
        check_for_type_support(_REQUEST)  # rosidl's capsules are set once its type support is loaded
        try:
            attrs = _capsules(type(_REQUEST))
            self._convert = _CALL_CONVERTER(_pointer(attrs["_CONVERT_TO_PY"]))
            self._callback = _CONVERTER(self._convert_checked)  # kept alive as long as the capsule is in use
            rosidl = dict(attrs)
            attrs["_CONVERT_TO_PY"] = _capsule_new(ctypes.cast(self._callback, ctypes.c_void_p), None, None)
        except (AttributeError, ValueError, TypeError):  # not rosidl's capsules as known here
            return
        if self._layout_matches(rosidl):
            self.request_type = type("BoundedGoalRequestMeta", (type,), attrs)("BoundedGoalRequest", (), {})
            self.usable = True

    @staticmethod
    def _sizes(req: _GoalRequest):
        """The arguments of :func:`goals.check_goal_sizes` read from a request in C memory."""
        t, m = req.trajectory, req.multi_dof_trajectory
        lists = [getattr(req, name) for name, _ in _TOLERANCES]
        n_tolerances = max(s.size for s in lists)
        multi_dof = bool(m.joint_names.size or m.points.size)
        if t.points.size > ri.MAX_POINTS or max(t.joint_names.size, n_tolerances) > goals.MAX_GOAL_NAMES:
            return t.points.size, t.joint_names.size, 0, n_tolerances, multi_dof, 0  # refused by the counts
        points = _words(t.points, _POINT_WORDS)
        longest_point = int(points[:, [1, 4, 7, 10]].max()) if len(points) else 0
        names = [_words(t.joint_names, 3)] + [_words(s, width) for s, (_, width) in zip(lists, _TOLERANCES)]
        longest_name = max([int(t.frame_id.size)] + [int(w[:, 1].max()) for w in names if len(w)])
        return t.points.size, t.joint_names.size, longest_point, n_tolerances, multi_dof, longest_name

    def _check(self, req: _GoalRequest) -> Optional[str]:
        try:
            goals.check_goal_sizes(*self._sizes(req))
        except Rejected as e:
            return str(e)
        return None

    def _convert_checked(self, address: int):
        """rosidl's conversion, after the size check; never raises (it is called from C)."""
        try:
            req = _GoalRequest.from_address(address)
            reason = self._check(req)
            if reason is None:
                return self._convert(address)
            large = [req.trajectory.points, req.trajectory.joint_names, req.multi_dof_trajectory.points,
                     req.multi_dof_trajectory.joint_names] + [getattr(req, name) for name, _ in _TOLERANCES]
            sizes = [s.size for s in large]
            frame_id = req.trajectory.frame_id  # rosidl converts a string up to its NUL: blanked for a moment
            first = ctypes.c_char.from_address(frame_id.data) if frame_id.data else None
            byte = first.value if first is not None else None
            for s in large:
                s.size = 0
            if first is not None:
                first.value = b"\0"
            try:
                msg = self._convert(address)
            finally:  # rosidl frees the request's elements by its sizes
                for s, n in zip(large, sizes):
                    s.size = n
                if first is not None:
                    first.value = byte
            if len(self._refused) > 64:  # goals whose callback never ran (e.g. a repeated goal id)
                self._refused.clear()
            self._refused[id(msg.goal)] = (msg.goal, reason)
            return msg
        except Exception:  # noqa: BLE001 - never raise into C: take the request as rosidl does
            return self._convert(address)

    def refusal(self, goal) -> Optional[str]:
        """Why the goal (a request's ``goal`` this intake converted) was refused before decoding, or None."""
        entry = self._refused.pop(id(goal), None)
        return entry[1] if entry is not None and entry[0] is goal else None

    def _layout_matches(self, rosidl: Dict[str, object]) -> bool:
        """Whether the C layout read here is this rclpy's: fill a request of known sizes in C memory with
        rosidl's own conversion and read it back."""
        probe = _REQUEST()
        probe.goal.trajectory.joint_names = ["a", "bb", "ccc"]
        probe.goal.trajectory.header.frame_id = "f" * 5
        probe.goal.trajectory.points = [JointTrajectoryPoint(positions=[1.0, 2.0], velocities=[1.0] * 3,
                                                             time_from_start=Duration(sec=7, nanosec=9))] * 2
        probe.goal.path_tolerance = [JointTolerance(name="x" * 6)] * 4
        probe.goal.goal_tolerance = [JointTolerance(name="y")] * 5
        probe.goal.component_goal_tolerance = [JointComponentTolerance(joint_name="z" * 8)] * 3
        probe.goal.multi_dof_trajectory.joint_names = ["m"] * 6
        probe.goal.goal_time_tolerance = Duration(sec=11, nanosec=13)
        create = ctypes.CFUNCTYPE(ctypes.c_void_p)(_pointer(rosidl["_CREATE_ROS_MESSAGE"]))
        destroy = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_pointer(rosidl["_DESTROY_ROS_MESSAGE"]))
        fill = ctypes.PYFUNCTYPE(ctypes.c_bool, ctypes.py_object, ctypes.c_void_p)(
            _pointer(rosidl["_CONVERT_FROM_PY"]))
        address = create()
        try:
            if not address or not fill(probe, address):
                return False
            req = _GoalRequest.from_address(address)
            t = req.trajectory
            counts = (t.points.size, t.joint_names.size, t.frame_id.size, req.path_tolerance.size,
                      req.goal_tolerance.size, req.component_path_tolerance.size,
                      req.component_goal_tolerance.size, req.multi_dof_trajectory.joint_names.size)
            if counts != (2, 3, 5, 4, 5, 0, 3, 6):  # before any pointer of a layout that may be wrong is followed
                return False
            point = _words(req.trajectory.points, _POINT_WORDS)
            return (self._sizes(req) == (2, 3, 3, 5, True, 8)
                    and (req.goal_time_tolerance.sec, req.goal_time_tolerance.nanosec) == (11, 13)
                    and point[1, 12] == 7 + (9 << 32) and self._check(req) == goals.MULTI_DOF)
        except Exception:  # noqa: BLE001 - any mismatch: not usable
            return False
        finally:
            if address:
                destroy(address)


class BoundedActionServer(ActionServer):
    """rclpy's ActionServer taking goal requests through a :class:`BoundedGoalIntake` (``intake``)."""

    def __init__(self, *args, intake: BoundedGoalIntake, **kwargs):
        self.intake = intake
        super().__init__(*args, **kwargs)

    def take_data(self):
        taken = None
        if getattr(self, "_is_goal_request_ready", False):
            with self._lock:
                taken = self._handle.take_goal_request(self.intake.request_type)
            self._is_goal_request_ready = False  # taken: the base class takes the other requests
        data = super().take_data()
        if taken is not None and taken[0]:
            data["goal"] = taken
        return data


@dataclass
class ActiveGoal:
    """A FollowJointTrajectory goal: its reference (start in reference time, as ``joint_ref``), its monitor and
    the future its execute callback awaits: ``(outcome, Result)`` with outcome ``succeed``, ``abort`` or
    ``canceled``."""

    goal_id: bytes
    handle: object
    start: int
    ref: Optional[Reference]
    monitor: Optional[goals.GoalMonitor]
    future: Future


def _drop_points(goal) -> None:
    """Empty a refused goal's lists (up to 10⁴ points, ~1 MB): rclpy holds its handle, and so the request, until
    the result times out (15 min by default); a refused goal needs only its result."""
    try:
        goal.trajectory.points = []
        goal.multi_dof_trajectory.points = []
        for name in ("path_tolerance", "component_path_tolerance", "goal_tolerance", "component_goal_tolerance"):
            setattr(goal, name, [])
    except (AttributeError, TypeError, AssertionError):  # a placeholder request (a goal refused undecoded)
        pass


@dataclass(frozen=True)
class _Refusal:
    """A goal that failed its checks: the result it is aborted with (code, reason)."""

    code: int
    reason: str


def _duration(ns: int) -> Duration:
    sec, nanosec = divmod(int(ns), ri.NS)
    return Duration(sec=sec, nanosec=nanosec)


class TrajectoryActions:
    """``~/follow_joint_trajectory`` of ``node`` for a robot with joints (joint_trajectory_controller's
    ``<controller name>/follow_joint_trajectory``) on ``model`` with ``settings``; ``inputs`` (the
    :class:`~mbs_ros.nodes.controller_inputs.Inputs`) has the state and the joint reference, and decodes the
    goal's trajectory on its worker; ``lock`` guards the reference, ``count`` and ``warn`` are the node's. Its goal
    is checked against each state (:meth:`monitor_goal`)."""

    def __init__(self, node, model, settings, inputs, *, lock, count, warn):
        self.node, self.model, self.settings, self.inputs = node, model, settings, inputs
        self.joint_names, self.nj, self.nv_base = inputs.joint_names, inputs.nj, inputs.nv_base
        self._lock, self._count, self._warn = lock, count, warn
        s = self.settings
        self.goal: Optional[ActiveGoal] = None  # the executing goal
        self._pending_goal = None  # (goal message, ActiveGoal) between the goal and the accepted callback
        self._executing: Dict[bytes, ActiveGoal] = {}  # goal id -> goal, until its execute callback takes it
        self._wrap = np.array([t == "continuous" for t in self.model.joint_types], dtype=bool)
        self._default_tolerances = tolerances_.SegmentTolerances.defaults(
            self.nj, s.goal_time_tolerance, s.stopped_velocity_tolerance)
        self.action_server = None
        self._intake = None
        if self.nj:
            intake = BoundedGoalIntake()
            if intake.usable and all(hasattr(ActionServer, k) for k in ("take_data", "is_ready")):
                self._intake, server = intake, lambda *a, **k: BoundedActionServer(*a, intake=intake, **k)
            else:
                server = ActionServer
                node.get_logger().warning("follow_joint_trajectory: this rclpy's goal request layout is not the "
                                          "one expected: goals are sized up only after rclpy decoded them")
            self.action_server = server(
                node, FollowJointTrajectory, "~/follow_joint_trajectory", execute_callback=self._execute_goal,
                goal_callback=self._on_goal, handle_accepted_callback=self._on_goal_accepted,
                cancel_callback=self._on_cancel)

    def destroy(self) -> None:
        if self.action_server is not None:
            self.action_server.destroy()
            self.action_server = None

    async def _on_goal(self, goal) -> GoalResponse:
        """Take a goal in. One that joint_trajectory_controller would accept and the joint_reference checks pass
        is checked and its reference built on the reference worker (in order with the references, never holding
        the control loop up; this coroutine waits for the answer) and installed by :meth:`_on_goal_accepted`.

        A goal that fails a check is accepted too, and aborted at once with its reason: ROS 2's goal response
        carries no reason (a goal rejected here would tell its client only ``accepted: false``), the result does
        (``error_code`` INVALID_JOINTS, OLD_HEADER_TIMESTAMP or INVALID_GOAL and ``error_string``), as ROS 1's
        joint_trajectory_controller returned it and as MoveIt reports it. It leaves the running goal alone and is
        counted as ``rejected_follow_joint_trajectory``, not as an aborted goal."""
        refused = self._intake.refusal(goal) if self._intake is not None else None
        if refused is not None:
            self._count("received_follow_joint_trajectory")
            answer = Rejected(refused)
        elif self.inputs.state is None:
            self._count("received_follow_joint_trajectory")
            answer = Rejected("no state received yet")
        else:
            future = Future()
            self.inputs.enqueue("follow_joint_trajectory", (goal, future))
            answer = await future
        if isinstance(answer, ActiveGoal):
            self._pending_goal = (goal, answer)  # _on_goal_accepted follows at once, in this same task
            return GoalResponse.ACCEPT
        self._count("rejected_follow_joint_trajectory")
        code = goals.result_code(answer)
        if not isinstance(answer, Rejected):
            self._count("control_errors")
            answer = f"{type(answer).__name__}: {answer}"
        self.node.get_logger().warning(f"follow_joint_trajectory: goal rejected: {answer}")
        self._pending_goal = (goal, _Refusal(getattr(_FJT, code), str(answer)))
        return GoalResponse.ACCEPT  # and aborted with the reason by _on_goal_accepted

    def prepare_goal(self, goal) -> ActiveGoal:
        """Worker thread: a goal checked as joint_trajectory_controller does (:mod:`mbs_ros.controllers.goals`),
        its trajectory as joint_reference's, and its tolerances; Rejected with the reason."""
        traj = goal.trajectory
        with self._lock:
            state, offset, current = self.inputs.state, self.inputs.timebase.offset, self.inputs.joint_ref
        multi_dof = bool(goal.multi_dof_trajectory.joint_names or goal.multi_dof_trajectory.points)
        goals.check_goal(traj.joint_names, self.joint_names, self.settings.allow_partial_joints_goal,
                         len(traj.points), traj.points[-1].velocities if traj.points else (), multi_dof)
        start_ns, start, ref = self.inputs.build_reference("joint_reference", traj, state, offset, current)
        goals.check_goal_end(bool(stamp_ns(traj.header.stamp, "header.stamp")), start_ns, ref.end_time, state[0])
        tolerances, problem = tolerances_.from_goal(
            self._default_tolerances, self.joint_names,
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.path_tolerance],
            [(t.name, t.position, t.velocity, t.acceleration) for t in goal.goal_tolerance],
            goal.goal_time_tolerance.sec + goal.goal_time_tolerance.nanosec * 1e-9)
        if problem:
            self.node.get_logger().warning(f"follow_joint_trajectory: {problem}: the goal runs with the default "
                                      "tolerances (as in joint_trajectory_controller)")
        monitor = goals.GoalMonitor(tolerances, ref.end_time, point_times(traj.points), self._wrap, self.joint_names)
        return ActiveGoal(b"", None, start, ref, monitor, Future())

    def _on_goal_accepted(self, goal_handle) -> None:
        """Executor thread, right after :meth:`_on_goal` accepted: preempt the running goal (aborted with
        INVALID_GOAL, as joint_trajectory_controller does) and install the new one's reference."""
        pending, self._pending_goal = self._pending_goal, None
        goal_handle.execute()
        g = pending[1] if pending is not None and pending[0] is goal_handle.request else None
        if not isinstance(g, ActiveGoal):  # refused with its reason, or not the goal _on_goal prepared (rclpy
            # calls the two in a row): aborted at once, the running goal untouched
            refusal = g if isinstance(g, _Refusal) else _Refusal(_FJT.INVALID_GOAL, "goal not checked")
            _drop_points(goal_handle.request)  # rclpy keeps the handle for its result (result_timeout)
            g = ActiveGoal(bytes(goal_handle.goal_id.uuid), goal_handle, 0, None, None, Future())
            g.future.set_result(("abort", _FJT(error_code=refusal.code, error_string=refusal.reason)))
            self._executing[g.goal_id] = g
            return
        g.goal_id, g.handle = bytes(goal_handle.goal_id.uuid), goal_handle
        self._executing[g.goal_id] = g
        with self._lock:
            old, self.goal = self.goal, g
            self.inputs.joint_ref = (g.start, g.ref)
        if old is not None:
            self._finish(old, "abort", _FJT.INVALID_GOAL, goals.PREEMPTED)
        self.node.get_logger().info(f"follow_joint_trajectory: goal accepted: {len(g.monitor.times)} points over "
                               f"{g.ref.end_time:g} s from t = {(g.start + self.inputs.timebase.offset) * 1e-9:.6f} s")

    async def _execute_goal(self, goal_handle):
        """The goal's execute callback: waits for its outcome (set from the state callbacks, a cancel or a
        preemption, all on the executor thread) and moves the goal to it."""
        g = self._executing.pop(bytes(goal_handle.goal_id.uuid), None)
        if g is None:
            goal_handle.abort()
            return _FJT(error_code=_FJT.INVALID_GOAL, error_string="unknown goal")
        outcome, result = await g.future
        try:
            if outcome == "succeed":
                goal_handle.succeed()
            elif outcome == "canceled" and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
        except Exception as e:  # noqa: BLE001 - e.g. a transition the goal's state no longer allows
            self._warn("error_goal", f"follow_joint_trajectory: cannot set the goal's state to {outcome}: {e}")
        return result

    def _on_cancel(self, goal_handle) -> CancelResponse:
        """As joint_trajectory_controller: the running goal is canceled and the joints hold their positions."""
        g = self.goal
        if g is not None and g.goal_id == bytes(goal_handle.goal_id.uuid):
            t = self._hold()
            self._finish(g, "canceled", _FJT.SUCCESSFUL, f"canceled at t = {t * 1e-9:.6f} s: holding position")
        return CancelResponse.ACCEPT

    def _hold(self) -> int:
        """Hold the joints where the newest state has them, at rest; that state's stamp."""
        inputs = self.inputs
        t, q, _v = inputs.state
        with self._lock:
            inputs.joint_ref = (t - inputs.timebase.offset, Reference(self.nj, [0.0], [inputs.joint_positions(q)]))
        return t

    def _finish(self, g: ActiveGoal, outcome: str, code: int, text: str) -> None:
        if self.goal is g:
            self.goal = None
        if g.future.done():
            return
        g.future.set_result((outcome, _FJT(error_code=code, error_string=text)))
        self._count({"succeed": "goals_succeeded", "canceled": "goals_canceled"}.get(outcome, "goals_aborted"))
        if outcome == "succeed":  # one call site per severity (rclpy's logger insists)
            self.node.get_logger().info(f"follow_joint_trajectory: goal succeeded: {text}")
        else:
            self.node.get_logger().warning(f"follow_joint_trajectory: goal {outcome}: {text}")

    def monitor_goal(self, t: int, q: np.ndarray, v: np.ndarray) -> None:
        """A new state at ``t``: check the running goal (:class:`mbs_ros.controllers.goals.GoalMonitor`), publish
        its feedback when due and end it when it succeeded or failed."""
        g = self.goal
        if self.inputs.joint_ref is None or self.inputs.joint_ref[1] is not g.ref:
            return self._finish(g, "abort", _FJT.INVALID_GOAL, "the trajectory was replaced by a joint_reference "
                                                               "message")
        t_rel = (t - self.inputs.timebase.offset - g.start) * 1e-9
        q_d, v_d, a_d = g.ref(t_rel)
        actual, velocity = self.inputs.joint_positions(q), v[self.nv_base:]
        sample = g.monitor(t, t_rel, q_d, v_d, actual, velocity, time.monotonic())
        if sample.feedback:
            since = _duration(t - self.inputs.timebase.offset - g.start)
            fb = FollowJointTrajectory.Feedback(joint_names=list(self.joint_names), index=sample.index)
            fb.header.stamp = cv.time_from_ns(t)
            fb.desired = JointTrajectoryPoint(positions=floats(q_d), velocities=floats(v_d),
                                              accelerations=floats(a_d), time_from_start=since)
            fb.actual = JointTrajectoryPoint(positions=floats(actual), velocities=floats(velocity),
                                             time_from_start=since)
            fb.error = JointTrajectoryPoint(positions=floats(sample.e_pos), velocities=floats(sample.e_vel),
                                            time_from_start=since)
            try:
                g.handle.publish_feedback(fb)
            except Exception as e:  # noqa: BLE001 - a goal that just ended
                self._warn("error_feedback", f"follow_joint_trajectory: feedback not published: {e}")
        if sample.outcome is not None:
            outcome, code, text = sample.outcome
            if sample.hold:
                self._hold()
            self._finish(g, outcome, getattr(_FJT, code), text)
