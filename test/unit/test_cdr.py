"""The command messages' fields read straight from their serialised bytes (mbs_ros.cores.cdr), as the dynamics node's
raw subscriptions read them, and the state's fields (odometry, a joint state's positions and velocities), as the
controller's read them: against rclpy's own deserialisation of the same bytes (the reference: the middleware's
CDR code), bit for bit, for both byte orders; anything else (cut short, another encapsulation, bytes left over) is
not read (None), never read wrong; and the raw subscription's fall-back to rclpy's message for those."""
from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("rclpy")
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension  # noqa: E402

from mbs_ros.cores import cdr  # noqa: E402
from mbs_ros.nodes.runtime import subscribe_fields  # noqa: E402

RNG = np.random.default_rng(7)
SPECIAL = [0.0, -0.0, 1e-310, -1e308, np.inf, -np.inf, np.nan, 0.1, 2.7]
FRAMES = ["", "a", "ab", "abc", "abcd", "base_link", "x" * 13, "müde/ßase"]
NAMES = [[], ["a"], ["FL_HAA", "FL_HFE", "x"], [f"joint_{i}" for i in range(12)], ["é", "ab", "abcdefg"]]


def bits(x) -> bytes:
    """The float64 bytes of ``x`` (NaN, -0.0 and denormals compared as bits)."""
    return np.asarray(x, dtype="<f8").tobytes()


def values(n: int) -> list:
    return [float(v) for v in np.concatenate([RNG.normal(size=n), SPECIAL])[RNG.permutation(n + len(SPECIAL))][:n]]


def wrenches():
    for frame in FRAMES:
        m = WrenchStamped()
        m.header.frame_id, m.header.stamp.sec, m.header.stamp.nanosec = frame, int(RNG.integers(-2**31, 2**31)), 999
        W = values(6)
        (m.wrench.force.x, m.wrench.force.y, m.wrench.force.z,
         m.wrench.torque.x, m.wrench.torque.y, m.wrench.torque.z) = W
        yield m


def joint_states():
    for names in NAMES:
        n = len(names)
        for sizes in [(0, 0, 0), (n, 0, n), (0, 0, n), (n, n, n), (1, 2, 3), (0, 3, 0)]:
            for frame in ("", "ab", "abcde"):
                m = JointState(name=names, position=values(sizes[0]), velocity=values(sizes[1]),
                               effort=values(sizes[2]))
                m.header.frame_id, m.header.stamp.sec, m.header.stamp.nanosec = frame, 3, 999_999_999
                yield m


def arrays():
    for dims in ([], [MultiArrayDimension(label="ab", size=3, stride=3)],
                 [MultiArrayDimension(label="", size=1, stride=1), MultiArrayDimension(label="xyz", size=2, stride=9)]):
        for n in (0, 1, 2, 12):
            m = Float64MultiArray(data=values(n))
            m.layout.dim, m.layout.data_offset = dims, 5
            yield m


def fields_of(m):
    """The fields as the readers give them, from rclpy's message (the reference)."""
    if isinstance(m, WrenchStamped):
        w = m.wrench
        return (m.header.stamp.sec, m.header.stamp.nanosec, m.header.frame_id,
                bits([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z]))
    if isinstance(m, JointState):
        return m.header.stamp.sec, m.header.stamp.nanosec, list(m.name), bits(m.effort)
    return (bits(m.data),)


def read(m, data):
    fields = READERS[type(m)](data)
    if fields is None:
        return None
    return fields[:-1] + (bits(fields[-1]),)


READERS = {WrenchStamped: cdr.wrench_stamped, JointState: cdr.joint_state, Float64MultiArray: cdr.float64_multi_array}
MESSAGES = list(wrenches()) + list(joint_states()) + list(arrays())


def big_endian(m) -> bytes:
    """``m`` serialised big-endian (encapsulation CDR_BE), written here field by field with struct."""
    out = bytearray(b"\x00\x00\x00\x00")

    def align(n):
        out.extend(b"\x00" * (-(len(out) - 4) % n))

    def u32(x):
        align(4)
        out.extend(struct.pack(">I", x))

    def string(s):
        b = s.encode() + b"\x00"
        u32(len(b))
        out.extend(b)

    def doubles(xs, count=True):
        if count:
            u32(len(xs))
        if len(xs):
            align(8)
            out.extend(struct.pack(f">{len(xs)}d", *xs))

    if isinstance(m, Float64MultiArray):
        u32(len(m.layout.dim))
        for d in m.layout.dim:
            string(d.label)
            u32(d.size)
            u32(d.stride)
        u32(m.layout.data_offset)
        doubles(list(m.data))
        return bytes(out)
    out.extend(struct.pack(">iI", m.header.stamp.sec, m.header.stamp.nanosec))
    string(m.header.frame_id)
    if isinstance(m, WrenchStamped):
        w = m.wrench
        doubles([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z], count=False)
    else:
        u32(len(m.name))
        for name in m.name:
            string(name)
        for xs in (m.position, m.velocity, m.effort):
            doubles(list(xs))
    return bytes(out)


@pytest.mark.parametrize("i", range(len(MESSAGES)))
def test_the_fields_are_rclpys_bit_for_bit(i):
    m = MESSAGES[i]
    data = serialize_message(m)
    reference = fields_of(deserialize_message(data, type(m)))
    assert read(m, data) == reference
    # the same message big-endian: rclpy reads it as the same message, and so does the reader
    be = big_endian(m)
    assert fields_of(deserialize_message(be, type(m))) == reference
    assert read(m, be) == reference


@pytest.mark.parametrize("i", range(0, len(MESSAGES), 5))
def test_bytes_cut_short_or_followed_by_more_are_not_read(i):
    m = MESSAGES[i]
    data = serialize_message(m)
    reference = fields_of(m)
    for n in range(len(data)):  # every cut: not read, or (only the padding cut off) read right
        assert read(m, data[:n]) in (None, reference), n
    assert read(m, data[:len(big_endian(m)) - 1]) is None  # the last byte of the last field missing
    assert read(m, data + b"\x00" * cdr.SLACK) is None  # more than padding left over
    for kind in (b"\x00\x02", b"\x00\x03", b"\x01\x01"):  # parameter lists, another representation: not read
        assert read(m, kind + data[2:]) is None


def test_strings_without_their_nul_are_not_read():
    m = MESSAGES[5]  # a frame_id of 9 characters
    data = bytearray(serialize_message(m))
    assert data[12 + 4 + 9] == 0
    data[12 + 4 + 9] = ord("x")
    assert cdr.wrench_stamped(bytes(data)) is None


def test_the_raw_subscription_falls_back_to_rclpys_message():
    """subscribe_fields: read bytes go to on_fields, the rest through rclpy's deserialisation to on_msg."""
    made, fields, msgs = [], [], []

    class Node:
        def create_subscription(self, msg_type, topic, callback, qos, raw=False, qos_overriding_options=None):
            made.append((msg_type, topic, qos, raw))
            # ROS 2's start-up overrides of history, depth and reliability are offered (test_stream_qos: in use)
            assert {k.name for k in qos_overriding_options.policy_kinds} == {"HISTORY", "DEPTH", "RELIABILITY"}
            return callback

    def guard(fn, what):
        return fn

    callback = subscribe_fields(Node(), "qos", guard, WrenchStamped, "cmd_wrench", cdr.wrench_stamped,
                                lambda *f: fields.append(f), msgs.append)
    assert made == [(WrenchStamped, "cmd_wrench", "qos", True)]
    m = MESSAGES[5]
    callback(serialize_message(m))
    assert len(fields) == 1 and fields[0][:3] == fields_of(m)[:3] and not msgs
    with_padding = serialize_message(m) + b"\x00" * cdr.SLACK  # not read here, but a message to rclpy
    callback(with_padding)
    assert len(fields) == 1 and len(msgs) == 1 and fields_of(msgs[0]) == fields_of(m)


def odometries():
    for frame in FRAMES:
        for child in ("", "base_link", "abcdefg"):
            m = Odometry()
            m.header.frame_id, m.child_frame_id = frame, child
            m.header.stamp.sec, m.header.stamp.nanosec = int(RNG.integers(0, 2**31)), int(RNG.integers(0, 10**9))
            (m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z, m.pose.pose.orientation.x,
             m.pose.pose.orientation.y, m.pose.pose.orientation.z, m.pose.pose.orientation.w) = values(7)
            t = m.twist.twist
            t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z = values(6)
            m.pose.covariance, m.twist.covariance = values(36), values(36)
            yield m


def odometry_fields(m):
    """The fields cdr.odometry gives, from rclpy's message (the reference)."""
    p, o, t = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist
    return (m.header.stamp.sec, m.header.stamp.nanosec, m.header.frame_id, m.child_frame_id,
            bits([p.x, p.y, p.z, o.x, o.y, o.z, o.w]),
            bits([t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z]))


def odometry_big_endian(m) -> bytes:
    out = bytearray(b"\x00\x00\x00\x00")
    out.extend(struct.pack(">iI", m.header.stamp.sec, m.header.stamp.nanosec))
    for text in (m.header.frame_id, m.child_frame_id):
        out.extend(b"\x00" * (-(len(out) - 4) % 4))
        b = text.encode() + b"\x00"
        out.extend(struct.pack(">I", len(b)) + b)
    out.extend(b"\x00" * (-(len(out) - 4) % 8))
    p, o, t = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist
    numbers = ([p.x, p.y, p.z, o.x, o.y, o.z, o.w] + list(m.pose.covariance) +
               [t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z] + list(m.twist.covariance))
    out.extend(struct.pack(">85d", *numbers))
    return bytes(out)


def read_odometry(data):
    fields = cdr.odometry(data)
    return None if fields is None else fields[:4] + (bits(fields[4]), bits(fields[5]))


def test_the_odometry_fields_are_rclpys_bit_for_bit():
    for m in odometries():
        data = serialize_message(m)
        reference = odometry_fields(deserialize_message(data, Odometry))
        assert read_odometry(data) == reference
        be = odometry_big_endian(m)
        assert odometry_fields(deserialize_message(be, Odometry)) == reference
        assert read_odometry(be) == reference
    for n in range(len(data)):  # every cut of the last: not read, or (only padding cut off) read right
        assert read_odometry(data[:n]) in (None, reference), n
    assert read_odometry(data + b"\x00" * cdr.SLACK) is None
    assert read_odometry(b"\x00\x02" + data[2:]) is None
    assert cdr.odometry(serialize_message(MESSAGES[0])) is None  # a WrenchStamped is no Odometry


def motion_fields(m):
    return m.header.stamp.sec, m.header.stamp.nanosec, list(m.name), bits(m.position), bits(m.velocity)


def read_motion(data):
    fields = cdr.joint_state_motion(data)
    return None if fields is None else fields[:3] + (bits(fields[3]), bits(fields[4]))


def test_the_joint_motion_fields_are_rclpys_bit_for_bit():
    for m in joint_states():
        data = serialize_message(m)
        reference = motion_fields(deserialize_message(data, JointState))
        assert read_motion(data) == reference
        assert read_motion(big_endian(m)) == reference
    for n in range(len(data)):
        assert read_motion(data[:n]) in (None, reference), n
    assert read_motion(data + b"\x00" * cdr.SLACK) is None
