"""mbs_ros.nodes.markers.ContactMarkers: the contacts/markers array, its messages refilled from call to call."""
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("visualization_msgs")
from visualization_msgs.msg import Marker  # noqa: E402

from mbs_ros.nodes.markers import ContactMarkers, contact_markers  # noqa: E402


def _force(point, force):
    return SimpleNamespace(point=np.array(point, dtype=float), force=np.array(force, dtype=float))


def _content(markers):
    """(action, ns, id, stamp, position, arrow points) of each marker, as plain numbers."""
    out = []
    for m in markers:
        pts = [(p.x, p.y, p.z) for p in m.points]
        out.append((m.action, m.ns, m.id, (m.header.stamp.sec, m.header.stamp.nanosec), m.header.frame_id,
                    (m.pose.position.x, m.pose.position.y, m.pose.position.z), pts))
    return out


def test_refilled_markers_carry_each_call_s_contacts_and_no_stale_one():
    make = ContactMarkers("odom")
    first, skipped = make(1_500_000_000, [_force([1, 2, 3], [0, 0, 10]), _force([4, 5, 6], [2, 0, 0])], 0.1)
    assert skipped == 0 and len(first) == 5
    second, skipped = make(2_000_000_007, [_force([-1, 0, 0.5], [0, 4, 0])], 0.5)
    assert skipped == 0
    got = _content(second)
    assert len(got) == 3  # DELETEALL, one sphere, one arrow: the earlier second contact is gone
    assert got[0][:2] == (Marker.DELETEALL, "") and got[0][3] == (2, 7)
    dot, arrow = got[1], got[2]
    assert dot[:5] == (Marker.ADD, "contacts", 0, (2, 7), "odom") and dot[5] == (-1.0, 0.0, 0.5)
    # the arrow from the point to point + scale * force: (-1, 0, 0.5) + 0.5 (0, 4, 0)
    assert arrow[:5] == (Marker.ADD, "contact_forces", 0, (2, 7), "odom") and arrow[6] == [(-1.0, 0.0, 0.5),
                                                                                          (-1.0, 2.0, 0.5)]
    # a fresh maker gives the same messages
    assert _content(contact_markers("odom", 2_000_000_007, [_force([-1, 0, 0.5], [0, 4, 0])], 0.5)[0]) == got


def test_a_non_finite_contact_is_skipped_and_counted():
    markers, skipped = ContactMarkers("odom")(0, [_force([np.nan, 0, 0], [0, 0, 1]), _force([0, 0, 0], [0, 0, 1])],
                                              1.0)
    assert skipped == 1
    assert [(m.ns, m.id) for m in markers[1:]] == [("contacts", 1), ("contact_forces", 1)]
