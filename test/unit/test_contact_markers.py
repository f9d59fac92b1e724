"""mbs_ros.nodes.markers.ContactMarkers: the contacts/markers array (a DELETEALL, a SPHERE_LIST of the contact
points, a LINE_LIST of their forces), its messages refilled from call to call."""
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("visualization_msgs")
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from mbs_ros.nodes.markers import ContactMarkers, contact_markers  # noqa: E402


def _force(point, force):
    return SimpleNamespace(point=np.array(point, dtype=float), force=np.array(force, dtype=float))


def _content(markers):
    """(action, ns, id, type, stamp, frame, points) of each marker, as plain numbers."""
    return [(m.action, m.ns, m.id, m.type, (m.header.stamp.sec, m.header.stamp.nanosec), m.header.frame_id,
             [(p.x, p.y, p.z) for p in m.points]) for m in markers]


def test_refilled_markers_carry_each_call_s_contacts_and_no_stale_one():
    make = ContactMarkers("odom")
    first, skipped = make(1_500_000_000, [_force([1, 2, 3], [0, 0, 10]), _force([4, 5, 6], [2, 0, 0])], 0.1)
    assert skipped == 0
    assert [p[6] for p in _content(first)[1:]] == [[(1, 2, 3), (4, 5, 6)], [(1, 2, 3), (1, 2, 4), (4, 5, 6),
                                                                              (4.2, 5, 6)]]
    second, skipped = make(2_000_000_007, [_force([-1, 0, 0.5], [0, 4, 0])], 0.5)
    assert skipped == 0
    got = _content(second)
    assert len(got) == 3  # DELETEALL, the points, the forces: the earlier second contact is gone from both
    assert got[0][:2] == (Marker.DELETEALL, "") and got[0][4] == (2, 7)
    dots, lines = got[1], got[2]
    assert dots[:6] == (Marker.ADD, "contacts", 0, Marker.SPHERE_LIST, (2, 7), "odom")
    assert dots[6] == [(-1.0, 0.0, 0.5)]
    # the force from the point to point + scale * force: (-1, 0, 0.5) + 0.5 (0, 4, 0)
    assert lines[:6] == (Marker.ADD, "contact_forces", 0, Marker.LINE_LIST, (2, 7), "odom")
    assert lines[6] == [(-1.0, 0.0, 0.5), (-1.0, 2.0, 0.5)]
    # a fresh maker gives the same messages
    assert _content(contact_markers("odom", 2_000_000_007, [_force([-1, 0, 0.5], [0, 4, 0])], 0.5)[0]) == got


def test_the_array_survives_serialisation_with_world_frame_points():
    """What a subscriber gets (the message through CDR and back): identity poses, so the points are in the world
    frame, sizes and colours set, an even number of line points."""
    markers, _ = ContactMarkers("world")(7, [_force([0.1, 0.2, 0.0], [0.0, 0.0, 3.0])] * 3, 0.01)
    back = deserialize_message(serialize_message(MarkerArray(markers=markers)), MarkerArray).markers
    assert [m.action for m in back] == [Marker.DELETEALL, Marker.ADD, Marker.ADD]
    for m in back[1:]:
        q = m.pose.orientation
        assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0) and m.color.a == 1.0 and m.scale.x > 0.0
    dots, lines = back[1], back[2]
    assert len(dots.points) == 3 and len(lines.points) == 6
    assert [(p.x, p.y, p.z) for p in lines.points[:2]] == [(0.1, 0.2, 0.0), (0.1, 0.2, 0.03)]


def test_a_non_finite_contact_is_skipped_and_counted():
    markers, skipped = ContactMarkers("odom")(0, [_force([np.nan, 0, 0], [0, 0, 1]), _force([0, 0, 0], [0, 0, 1])],
                                              1.0)
    assert skipped == 1
    assert [[(p.x, p.y, p.z) for p in m.points] for m in markers[1:]] == [[(0, 0, 0)], [(0, 0, 0), (0, 0, 1)]]


def test_no_contact_or_none_finite_leaves_the_deleteall_alone():
    make = ContactMarkers("odom", reserve=2)
    assert [m.action for m in make(0, [], 1.0)[0]] == [Marker.DELETEALL]
    markers, skipped = make(0, [_force([0, 0, 0], [0, 0, 1e300])], 1e300)  # the end overflows
    assert skipped == 1 and [m.action for m in markers] == [Marker.DELETEALL]
