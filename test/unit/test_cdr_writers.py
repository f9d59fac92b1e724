"""The state's bytes written by mbs_ros.cores.cdr (``odometry_writer``, ``joint_state_writer``) and sent by the
dynamics node (``conversions.odometry_out``, ``joint_state_out``), and the controller's base wrench
(``wrench_stamped_writer``, ``conversions.wrench_stamped_out``), against rclpy's own serialisation of the same
message holding the same values (the reference: the middleware's CDR code), byte for byte but for the alignment
padding (whose values CDR leaves open), for frames and names of
every length modulo the alignments, special floats included; a template they do not parse exactly (another
encapsulation, cut short, another layout) gives no writer, and the node's out functions then give the message."""
from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("rclpy")
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, MultiArrayLayout  # noqa: E402

from mbs_ros.cores import cdr  # noqa: E402
from mbs_ros.nodes import conversions as cv  # noqa: E402

RNG = np.random.default_rng(11)
SPECIAL = [0.0, -0.0, 1e-310, -1e308, np.inf, -np.inf, np.nan, 0.1]
FRAMES = ["", "a", "ab", "abc", "abcd", "odom", "x" * 13, "müde/ßase"]
NAMES = [["a"], ["FL_HAA", "FL_HFE", "x"], [f"joint_{i}" for i in range(12)], ["é", "ab", "abcdefg"]]


def values(n: int) -> np.ndarray:
    return np.concatenate([RNG.normal(size=n), SPECIAL])[RNG.permutation(n + len(SPECIAL))][:n]


def _pad(p: int, to: int, out: list) -> int:
    """Payload offset ``p`` aligned to ``to``, the padding bytes skipped added to ``out`` (absolute offsets)."""
    q = (p + to - 1) // to * to
    out += range(p + 4, q + 4)
    return q


def _string(p: int, text: str, out: list) -> int:
    return _pad(p, 4, out) + 4 + len(text.encode()) + 1


def odometry_padding(frame: str, child: str) -> tuple:
    """``(the offsets of an Odometry's CDR bytes that are alignment padding, the offset after its last field)``,
    counted here from the XCDR1 rules: CDR leaves the padding's values open, and rclpy's serialisation may end in
    a few bytes more (its size is computed ahead); rclpy's are what its buffer held before."""
    out = []
    return out, _pad(_string(_string(8, frame, out), child, out), 8, out) + 85 * 8 + 4


def joint_state_padding(frame: str, names: list, lengths) -> tuple:
    out = []
    p = _pad(_string(8, frame, out), 4, out) + 4
    for name in names:
        p = _string(p, name, out)
    for n in lengths:  # an empty sequence has no elements to align
        p = _pad(p, 4, out) + 4
        p = (_pad(p, 8, out) if n else p) + 8 * n
    return out, p + 4


@pytest.mark.parametrize("n", [0, 1, 2, 12])
def test_float64_multi_array_bytes_are_rclpys(n):
    write = cdr.float64_multi_array_writer(serialize_message(Float64MultiArray(data=[0.0] * n)))
    assert write is not None
    for _ in range(5):
        x = values(n)
        assert same(write(x), serialize_message(Float64MultiArray(data=x.tolist())),
                    ([16, 17, 18, 19], 20 + 8 * n) if n else ([], 16))


def same(ours: bytes, ref: bytes, padding: tuple) -> bool:
    """The same bytes but for the padding and what follows the last field (``padding``: the helpers' answer)."""
    skip, end = padding
    a, b = bytearray(ours), bytearray(ref)
    for k in list(skip) + list(range(end, len(ref))):
        a[k] = b[k] = 0
    return len(ours) == len(ref) and a == b and len(skip) + len(ref) - end < len(ref) // 2  # the mask hides little


def stamp():
    return int(RNG.integers(0, 2**31)), int(RNG.integers(0, 10**9))


def odometry(frame, child):
    m = Odometry()
    m.header.frame_id, m.child_frame_id = frame, child
    m.pose.covariance = values(36).tolist()
    m.twist.covariance = values(36).tolist()
    return m


def filled_odometry(template, sec, nanosec, p, quat, twist):
    m = copy.deepcopy(template)
    m.header.stamp.sec, m.header.stamp.nanosec = sec, nanosec
    cv.set_pose(m.pose.pose, p.tolist(), quat.tolist())
    cv.set_pair(m.twist.twist, "linear", "angular", twist.tolist())
    return m


@pytest.mark.parametrize("frame", FRAMES)
def test_odometry_bytes_are_rclpys(frame):
    for child in FRAMES:
        m = odometry(frame, child)
        write = cdr.odometry_writer(serialize_message(m))
        assert write is not None
        for _ in range(5):
            sec, nanosec = stamp()
            p, quat, twist = values(3), values(4), values(6)
            assert same(write(sec, nanosec, p, quat, twist),
                        serialize_message(filled_odometry(m, sec, nanosec, p, quat, twist)), odometry_padding(frame, child))


@pytest.mark.parametrize("lengths", [(1, 1, 1), (0, 0, 1), (1, 0, 1), (0, 0, 0), (2, 1, 0)])
def test_joint_state_bytes_are_rclpys(lengths):
    """Each sequence n long (``lengths``: each a multiple of the n names; a controller's command: effort alone)."""
    for names in NAMES:
        n = [k * len(names) for k in lengths]
        for frame in FRAMES:
            m = JointState(name=names)
            m.header.frame_id = frame
            m.position, m.velocity, m.effort = [0.0] * n[0], [0.0] * n[1], [0.0] * n[2]
            write = cdr.joint_state_writer(serialize_message(m))
            assert write is not None
            for _ in range(3):
                sec, nanosec = stamp()
                x = [values(k) for k in n]
                ref = JointState(name=names)
                ref.header.frame_id, ref.header.stamp.sec, ref.header.stamp.nanosec = frame, sec, nanosec
                ref.position, ref.velocity, ref.effort = (a.tolist() for a in x)
                assert same(write(sec, nanosec, *x), serialize_message(ref), joint_state_padding(frame, names, n))


def test_templates_not_read_exactly_give_no_writer():
    odom = serialize_message(odometry("odom", "base_link"))
    joints = JointState(name=["a", "b"])
    joints.position, joints.velocity, joints.effort = [1.0, 2.0], [3.0, 4.0], [5.0, 6.0]
    js = serialize_message(joints)
    array = serialize_message(Float64MultiArray(data=[1.0, 2.0]))
    dims = serialize_message(Float64MultiArray(layout=MultiArrayLayout(dim=[MultiArrayDimension(label="x")])))
    for bad in (b"\x00\x02" + odom[2:], odom[:-8], odom + bytes(64), js):
        assert cdr.odometry_writer(bad) is None
    for bad in (b"\x00\x02" + js[2:], js[:-8], js + bytes(64), odom):
        assert cdr.joint_state_writer(bad) is None
    for bad in (b"\x00\x02" + array[2:], array[:-8], array + bytes(64), dims, odom):
        assert cdr.float64_multi_array_writer(bad) is None


def test_the_nodes_out_functions_send_rclpys_bytes():
    """``odometry_out``, ``joint_state_out``: the message the first time (and, for the joints, when the lengths
    change), in between bytes equal to rclpy's serialisation of the message it would have filled."""
    m = odometry("odom", "base_link")
    out = cv.odometry_out(copy.deepcopy(m))
    first = out(5, values(3), values(4), values(6))
    assert isinstance(first, Odometry) and first.header.stamp.nanosec == 5 and first.child_frame_id == "base_link"
    p, quat, twist = values(3), values(4), values(6)
    data = out(12_345_678_901, p, quat, twist)
    assert isinstance(data, bytes) and same(data, serialize_message(filled_odometry(m, 12, 345_678_901, p, quat, twist)),
                                            odometry_padding("odom", "base_link"))
    out = cv.joint_state_out(JointState(name=["a", "b"]))
    first = out(5, *[values(2) for _ in range(3)])
    assert isinstance(first, JointState) and first.header.stamp.nanosec == 5
    x = [values(2) for _ in range(3)]
    ref = JointState(name=["a", "b"])
    ref.header.stamp.sec, ref.header.stamp.nanosec = 3, 7
    ref.position, ref.velocity, ref.effort = (a.tolist() for a in x)
    assert same(out(3_000_000_007, *x), serialize_message(ref), joint_state_padding("", ["a", "b"], (2, 2, 2)))
    again = out(9, values(3), values(3), values(3))  # another length: the message, then a writer for it
    assert isinstance(again, JointState) and list(again.position) != [] and len(again.effort) == 3
    out = cv.float64_array_out()
    assert isinstance(out(values(4)), Float64MultiArray)
    x = values(4)
    assert same(out(x), serialize_message(Float64MultiArray(data=x.tolist())), ([16, 17, 18, 19], 52))


def wrench_padding(frame: str) -> tuple:
    out = []
    return out, _pad(_string(8, frame, out), 8, out) + 6 * 8 + 4


@pytest.mark.parametrize("frame", FRAMES)
def test_wrench_stamped_bytes_are_rclpys(frame):
    m = WrenchStamped()
    m.header.frame_id = frame
    write = cdr.wrench_stamped_writer(serialize_message(m))
    assert write is not None
    out = cv.wrench_stamped_out(frame)
    assert isinstance(out(1, values(6)), WrenchStamped)  # the first time: the message (and a writer for it)
    for _ in range(5):
        sec, nanosec = stamp()
        W = values(6)
        ref = cv.wrench_stamped_msg(sec * 10**9 + nanosec, frame, W)
        assert same(write(sec, nanosec, W), serialize_message(ref), wrench_padding(frame))
        data = out(sec * 10**9 + nanosec, W)
        assert isinstance(data, bytes) and same(data, serialize_message(ref), wrench_padding(frame))
    wrench = serialize_message(m)
    for bad in (b"\x00\x02" + wrench[2:], wrench[:-8], wrench + bytes(64), serialize_message(odometry("a", "b"))):
        assert cdr.wrench_stamped_writer(bad) is None
