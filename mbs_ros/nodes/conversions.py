"""Message <-> numpy conversions for the nodes. No physics here.

Conventions (README.md, "Conventions"): twists and wrenches are linear first, ``V = [v; w]``, ``W = [F; tau]``;
quaternions are ``[x, y, z, w]`` (ROS and Pinocchio order; transforms3d uses ``[w, x, y, z]`` and is
only called through the helpers below); stamps are integer nanoseconds.

Only ``builtin_interfaces``, ``geometry_msgs``, ``nav_msgs``, ``sensor_msgs`` and ``diagnostic_msgs`` are
imported, so these helpers work without ``tf2_msgs`` (the ``..._out`` writers of the state and commands sent at the
control rate import ``rclpy.serialization`` and ``std_msgs`` when called).
"""

from __future__ import annotations

import math
from array import array
from typing import Iterable, Mapping, Sequence, Tuple

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import (
    Point,
    Pose,
    PoseStamped,
    Quaternion,
    Transform,
    TransformStamped,
    Twist,
    Vector3,
    Wrench,
    WrenchStamped,
)
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState, NavSatFix, NavSatStatus, Range
from transforms3d import euler as _euler
from transforms3d import quaternions as _quaternions

from mbs_ros.cores import cdr
from mbs_ros.cores.params import NS_PER_S, period_ns, seconds_text  # noqa: F401 - importable from here, as the nodes do
from mbs_ros.cores.rotations import quaternion_from_matrix, quaternion_from_rpy  # noqa: F401 - importable here


# ---------------------------------------------------------------------------------------------- time


def time_from_ns(ns: int) -> Time:
    """``builtin_interfaces/Time`` from integer nanoseconds (exact, no float rounding)."""
    ns = int(ns)
    if ns < 0:
        raise ValueError(f"negative time stamp: {ns} ns")
    sec, nanosec = divmod(ns, NS_PER_S)
    return Time(sec=sec, nanosec=nanosec)


def ns_from_time(stamp: Time) -> int:
    """Integer nanoseconds of a ``builtin_interfaces/Time`` (exact)."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


# ------------------------------------------------------------------------------------ small vectors


def vector3_msg(x: Sequence[float]) -> Vector3:
    x = _vec(x, 3, "vector")
    return Vector3(x=x[0], y=x[1], z=x[2])


def array_from_vector3(m) -> np.ndarray:
    """``[x, y, z]`` of a ``Vector3`` or ``Point``."""
    return np.array([m.x, m.y, m.z], dtype=float)


def quaternion_msg(q_xyzw: Sequence[float]) -> Quaternion:
    q = _vec(q_xyzw, 4, "quaternion [x, y, z, w]")
    return Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])


def array_from_quaternion(m: Quaternion) -> np.ndarray:
    """``[x, y, z, w]`` of a ``Quaternion``."""
    return np.array([m.x, m.y, m.z, m.w], dtype=float)


# --------------------------------------------------------------------------- poses, twists, wrenches


def pose_msg(p_world_base: Sequence[float], q_world_base: Sequence[float]) -> Pose:
    """``Pose`` from a position and an ``[x, y, z, w]`` quaternion."""
    p = _vec(p_world_base, 3, "position")
    return Pose(position=Point(x=p[0], y=p[1], z=p[2]), orientation=quaternion_msg(q_world_base))


def pose_from_msg(m: Pose) -> Tuple[np.ndarray, np.ndarray]:
    """``(position, quaternion [x, y, z, w])`` of a ``Pose``."""
    return array_from_vector3(m.position), array_from_quaternion(m.orientation)


def transform_msg(p_parent_child: Sequence[float], q_parent_child: Sequence[float]) -> Transform:
    return Transform(translation=vector3_msg(p_parent_child), rotation=quaternion_msg(q_parent_child))


def transform_from_msg(m: Transform) -> Tuple[np.ndarray, np.ndarray]:
    return array_from_vector3(m.translation), array_from_quaternion(m.rotation)


def twist_msg(V: Sequence[float]) -> Twist:
    """``Twist`` from ``V = [v; w]`` (linear first)."""
    V = _vec(V, 6, "twist [v; w]")
    return Twist(linear=vector3_msg(V[:3]), angular=vector3_msg(V[3:]))


def twist_from_msg(m: Twist) -> np.ndarray:
    """``V = [v; w]`` of a ``Twist``."""
    return np.concatenate([array_from_vector3(m.linear), array_from_vector3(m.angular)])


def wrench_msg(W: Sequence[float]) -> Wrench:
    """``Wrench`` from ``W = [F; tau]`` (linear first)."""
    W = _vec(W, 6, "wrench [F; tau]")
    return Wrench(force=vector3_msg(W[:3]), torque=vector3_msg(W[3:]))


def wrench_from_msg(m: Wrench) -> np.ndarray:
    """``W = [F; tau]`` of a ``Wrench``."""
    return np.concatenate([array_from_vector3(m.force), array_from_vector3(m.torque)])


# ------------------------------------------------------------------------------- stamped messages


def odometry_msg(
    stamp_ns: int,
    world_frame: str,
    base_frame: str,
    p_world_base: Sequence[float],
    q_world_base: Sequence[float],
    V_base: Sequence[float],
) -> Odometry:
    """``Odometry``: pose of the base in the world, twist in the base (child) frame (REP 105).

    Covariances are left at zero: the simulated state is exact.
    """
    m = Odometry()
    m.header.stamp = time_from_ns(stamp_ns)
    m.header.frame_id = world_frame
    m.child_frame_id = base_frame
    m.pose.pose = pose_msg(p_world_base, q_world_base)
    m.twist.twist = twist_msg(V_base)
    return m


def pose_stamped_msg(
    stamp_ns: int, world_frame: str, p_world_base: Sequence[float], q_world_base: Sequence[float]
) -> PoseStamped:
    m = PoseStamped()
    m.header.stamp = time_from_ns(stamp_ns)
    m.header.frame_id = world_frame
    m.pose = pose_msg(p_world_base, q_world_base)
    return m


def transform_stamped_msg(
    stamp_ns: int,
    parent_frame: str,
    child_frame: str,
    p_parent_child: Sequence[float],
    q_parent_child: Sequence[float],
) -> TransformStamped:
    m = TransformStamped()
    m.header.stamp = time_from_ns(stamp_ns)
    m.header.frame_id = parent_frame
    m.child_frame_id = child_frame
    m.transform = transform_msg(p_parent_child, q_parent_child)
    return m


def wrench_stamped_msg(stamp_ns: int, frame: str, W: Sequence[float]) -> WrenchStamped:
    m = WrenchStamped()
    m.header.stamp = time_from_ns(stamp_ns)
    m.header.frame_id = frame
    m.wrench = wrench_msg(W)
    return m


def joint_state_msg(
    stamp_ns: int,
    names: Sequence[str],
    position: Sequence[float] = (),
    velocity: Sequence[float] = (),
    effort: Sequence[float] = (),
) -> JointState:
    """``sensor_msgs/JointState``; empty sequences stay empty (the message's "not given")."""
    m = JointState()
    m.header.stamp = time_from_ns(stamp_ns)
    m.name = [str(n) for n in names]
    m.position = [float(x) for x in position]
    m.velocity = [float(x) for x in velocity]
    m.effort = [float(x) for x in effort]
    return m


# ------------------------------------------------------------------ filling messages that are kept and reused
# A node that publishes the same message types at a high rate keeps one message of each and refills it:
# ``publish`` serialises at once, so reusing a message is safe, and setting fields is ~20x cheaper than building
# the nested messages anew. The values are plain Python floats (``.tolist()``).


def set_stamp(header, stamp_ns: int) -> None:
    """``header.stamp`` := ``stamp_ns`` (integer ns, >= 0)."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    stamp = header.stamp
    stamp.sec, stamp.nanosec = sec, nanosec


def set_pose(pose, p: Sequence[float], q_xyzw: Sequence[float]) -> None:
    """A ``Pose`` (position, orientation) or ``Transform`` (translation, rotation) := position, quaternion."""
    t = pose.position if hasattr(pose, "position") else pose.translation
    r = pose.orientation if hasattr(pose, "orientation") else pose.rotation
    t.x, t.y, t.z = p
    r.x, r.y, r.z, r.w = q_xyzw


def set_pair(msg, first: str, second: str, values: Sequence[float]) -> None:
    """``msg.<first>`` (x, y, z) := values[0:3], ``msg.<second>`` := values[3:6] (a Twist's linear/angular, a
    Wrench's force/torque)."""
    a, b = getattr(msg, first), getattr(msg, second)
    a.x, a.y, a.z, b.x, b.y, b.z = values


def odometry_out(msg: Odometry):
    """``out(stamp_ns, p, quat_xyzw, twist)``: what to publish of ``msg`` (its frames and covariances kept) at
    this state: ``msg`` filled, or the bytes :func:`mbs_ros.cores.cdr.odometry_writer` writes into its
    serialisation (:func:`_templated`). Either way the same bytes reach the subscribers."""
    def fill(stamp_ns, p, quat, twist):
        set_stamp(msg.header, stamp_ns)
        set_pose(msg.pose.pose, p, quat)
        set_pair(msg.twist.twist, "linear", "angular", twist)
        return msg

    return _templated(fill, _stamped(cdr.odometry_writer))


def _stamped(make):
    """A maker of writers (``make(template)``, :mod:`mbs_ros.cores.cdr`'s) whose ``write`` takes the stamp in ns
    first, as the out functions do, instead of ``(sec, nanosec)``."""
    def writer(template):
        write = make(template)
        return None if write is None else lambda stamp_ns, *x: write(*divmod(int(stamp_ns), NS_PER_S), *x)

    return writer


def _templated(fill, writer):
    """``out(*values)``: ``fill(*values)`` (the message filled with them) the first time and whenever the
    values' lengths change, with a writer (``writer`` of its serialisation now) for them; in between, the bytes
    that writer writes, or the message filled where the bytes cannot be written there."""
    from rclpy.serialization import serialize_message

    kept = [None, None]  # the writer and the lengths it writes

    def out(*values):
        sizes = tuple(len(x) for x in values if hasattr(x, "__len__"))
        if kept[1] != sizes:
            msg = fill(*values)
            kept[:] = writer(serialize_message(msg)), sizes
            return msg
        return fill(*values) if kept[0] is None else kept[0](*values)

    return out


def joint_state_out(msg: JointState):
    """``out(stamp_ns, position, velocity, effort)`` (float64 arrays): what to publish of ``msg`` (its frame and
    names kept): ``msg`` filled, or the bytes :func:`mbs_ros.cores.cdr.joint_state_writer` writes into its
    serialisation (:func:`_templated`)."""
    def fill(stamp_ns, position, velocity, effort):
        set_stamp(msg.header, stamp_ns)
        msg.position, msg.velocity, msg.effort = (array("d", np.asarray(x, float).tobytes())
                                                  for x in (position, velocity, effort))
        return msg

    return _templated(fill, _stamped(cdr.joint_state_writer))


def wrench_stamped_out(frame: str):
    """``out(stamp_ns, wrench)`` ([F; τ], 6 values): a ``geometry_msgs/WrenchStamped`` in ``frame`` to publish, as
    :func:`joint_state_out` (:func:`wrench_stamped_msg` filled, or the bytes
    :func:`mbs_ros.cores.cdr.wrench_stamped_writer` writes)."""
    return _templated(lambda stamp_ns, W: wrench_stamped_msg(stamp_ns, frame, W), _stamped(cdr.wrench_stamped_writer))


def float64_array_out():
    """``out(data)``: a ``std_msgs/Float64MultiArray`` of ``data`` to publish, as :func:`joint_state_out`."""
    from std_msgs.msg import Float64MultiArray

    return _templated(lambda data: Float64MultiArray(data=array("d", np.asarray(data, float).tobytes())),
                      cdr.float64_multi_array_writer)


# ------------------------------------------------------------------------------------ orientations


def rpy_from_quaternion(q_xyzw: Sequence[float]) -> np.ndarray:
    """Roll, pitch, yaw in rad of an ``[x, y, z, w]`` quaternion. Human-facing output only."""
    x, y, z, w = _unit_quaternion(q_xyzw)
    return np.array(_euler.quat2euler([w, x, y, z], "sxyz"))


def rotation_matrix(q_xyzw: Sequence[float]) -> np.ndarray:
    """``R_world_base`` (3x3) of an ``[x, y, z, w]`` quaternion (normalised first)."""
    x, y, z, w = _unit_quaternion(q_xyzw)
    return _quaternions.quat2mat([w, x, y, z])


def inverse_transforms(T: np.ndarray) -> np.ndarray:
    """Inverses of a stack (n, 4, 4) of homogeneous rigid transforms: ``[[Rᵀ, −Rᵀp], [0, 1]]``."""
    T = np.asarray(T, dtype=float)
    out = np.zeros_like(T)
    Rt = T[..., :3, :3].swapaxes(-1, -2)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -(Rt @ T[..., :3, 3, None])[..., 0]
    out[..., 3, 3] = 1.0
    return out


def rotate_wrench(R_a_b: np.ndarray, W_b: Sequence[float]) -> np.ndarray:
    """Re-express a wrench given in frame b's axes in frame a's axes: ``[R F; R tau]``.

    Only the axes change; the point of application stays where it is (here: the body origin).
    """
    R_a_b = np.asarray(R_a_b, dtype=float)
    W_b = _vec(W_b, 6, "wrench [F; tau]")
    return np.concatenate([R_a_b @ W_b[:3], R_a_b @ W_b[3:]])


# ---------------------------------------------------------------------------------- frame names


def frame_prefix(namespace: str) -> str:
    """TF prefix of a node namespace: ``"/robot1"`` -> ``"robot1/"``, ``"/"`` -> ``""``."""
    ns = (namespace or "").strip("/")
    return ns + "/" if ns else ""


def prefixed_frame(namespace: str, frame: str) -> str:
    """The frame id a node in ``namespace`` publishes for ``frame``.

    ``prefixed_frame("/robot1", "base_link") == "robot1/base_link"``. A frame given with a leading
    ``"/"`` is taken as absolute: ``"/odom"`` -> ``"odom"``, unprefixed (tf2 frame ids never start
    with ``"/"``).
    """
    if not frame or not frame.strip("/"):
        raise ValueError("a frame name must not be empty")
    if frame.startswith("/"):
        return frame.lstrip("/")
    return frame_prefix(namespace) + frame


# ------------------------------------------------------------------------------------ diagnostics


def key_values(values: Mapping[str, object]) -> list:
    """``diagnostic_msgs/KeyValue`` list; floats are written with full (round-trip) precision."""
    out = []
    for k, v in values.items():
        if isinstance(v, (bool, np.bool_)):
            s = "true" if v else "false"
        elif isinstance(v, (float, np.floating)):
            s = repr(float(v))
        else:
            s = str(v)
        out.append(KeyValue(key=str(k), value=s))
    return out


def values_from_status(status: DiagnosticStatus) -> dict:
    """``{key: value}`` of a ``DiagnosticStatus``; numbers become floats, true/false become bools."""
    out = {}
    for kv in status.values:
        v = kv.value
        if v in ("true", "false"):
            out[kv.key] = v == "true"
            continue
        try:
            out[kv.key] = float(v)
        except ValueError:
            out[kv.key] = v
    return out


# ------------------------------------------------------------------------------------------ helpers


def all_finite(values: Iterable[float]) -> bool:
    return bool(np.all(np.isfinite(np.asarray(list(values), dtype=float))))


def _vec(x, n: int, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"{what} must have {n} components, got {a.size}")
    return a


def _unit_quaternion(q_xyzw) -> np.ndarray:
    q = _vec(q_xyzw, 4, "quaternion [x, y, z, w]")
    n = float(np.linalg.norm(q))
    if not n > 0.0 or not math.isfinite(n):
        raise ValueError(f"not a rotation quaternion: {q}")
    return q / n


def nonfinite_field(msg, prefix: str = ""):
    """The first float field of ``msg`` (any message type, nested messages and arrays included) that is not finite,
    by its path (``angular_velocity.x``, ``position[2]``), or None. Non-finite by convention, and allowed:
    sensor_msgs/Range's ``range`` (REP 117: ±inf, no return) and NavSatFix's position without a fix (NaN)."""
    if isinstance(msg, Range):
        skip = ("range",)
    elif isinstance(msg, NavSatFix) and msg.status.status == NavSatStatus.STATUS_NO_FIX:
        skip = ("latitude", "longitude", "altitude")
    else:
        skip = ()
    for name in msg.get_fields_and_field_types():
        if name in skip:
            continue
        value = getattr(msg, name)
        path = f"{prefix}{name}"
        if isinstance(value, float):
            if not math.isfinite(value):
                return path
        elif hasattr(value, "get_fields_and_field_types"):
            bad = nonfinite_field(value, path + ".")
            if bad is not None:
                return bad
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
            if not np.isfinite(value).all():
                return f"{path}[{int(np.flatnonzero(~np.isfinite(value))[0])}]"
        elif isinstance(value, (list, tuple, np.ndarray)) or hasattr(value, "typecode"):
            items = list(value)
            for i, x in enumerate(items):
                if isinstance(x, float) and not math.isfinite(x):
                    return f"{path}[{i}]"
                if hasattr(x, "get_fields_and_field_types"):
                    bad = nonfinite_field(x, f"{path}[{i}].")
                    if bad is not None:
                        return bad
    return None
