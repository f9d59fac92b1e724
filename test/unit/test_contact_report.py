"""The contact data the dynamics node publishes (mbs_ros.dynamics.contact.report, mbs_ros.nodes.dynamics_contacts)
against closed forms: a box resting on the ground takes ``m g`` along the normal through its four bottom corners,
no net torque about its centre; a free object resting beside the robot likewise, in its own frame; nothing in the
air; the WrenchStamped and MarkerArray messages carry exactly those numbers."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.geometry import box, halfspace, sphere
from mbs_ros.dynamics.contact.report import ContactReport, object_pose
from mbs_ros.dynamics.contact.world import ContactWorld
from mbs_ros.dynamics.simulation.simulator import Simulator

G = 9.81
M, S = 2.0, 0.2  # the box: 2 kg, 0.2 m sides
ARM = """<robot name="one"><link name="base"/><link name="arm"><inertial><origin xyz="0.5 0 0"/>
  <mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
  <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint></robot>"""


def _resting_box(x=0.3, y=-0.1, yaw=0.0, height=0.0):
    model = Model.rigid_body("se3", M, np.eye(3) * M * S * S / 6, gravity=(0.0, 0.0, -G))
    q0 = np.array([x, y, 0.5 * S + height, 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (S, S, S), (0, 0), mu=0.6)])
    return Simulator(model, q0, np.zeros(6), 1e-3, world=world)


@pytest.mark.parametrize("yaw", [0.0, 0.7])
def test_a_box_resting_on_the_ground_takes_its_weight_at_its_four_bottom_corners(yaw):
    sim = _resting_box(yaw=yaw)
    assert sim.advance(300) == 300 and sim.fault is None
    report = ContactReport(sim)
    assert report.current() and report.links == ["box"]
    forces = report.forces()
    assert len(forces) == 4 and {(f.link, f.other) for f in forces} == {("box", "ground")}
    c, s = math.cos(yaw), math.sin(yaw)
    corners = [(0.3 + 0.1 * (c * a - s * b), -0.1 + 0.1 * (s * a + c * b)) for a in (-1, 1) for b in (-1, 1)]
    for f in forces:
        assert min(math.hypot(f.point[0] - x, f.point[1] - y) for x, y in corners) < 1e-9
        assert abs(f.point[2]) < 1e-9 and f.penetration < 1e-9
        assert np.allclose(f.normal, [0.0, 0.0, 1.0], atol=1e-12)
    total = sum(f.force for f in forces)
    assert total == pytest.approx([0.0, 0.0, M * G], abs=1e-6)
    # in the box's own frame (z up, yawed): the weight along z, no torque about its centre (= its frame origin)
    w = report.wrenches(forces)["box"]
    assert w == pytest.approx([0.0, 0.0, M * G, 0.0, 0.0, 0.0], abs=1e-6)


def test_the_robot_force_of_a_resting_box_is_its_weight_and_follows_each_step():
    """The box is the robot here (model 0, its link "box"): at rest the ground carries m g; while it lands the
    total changes from step to step and is each step's (not a kept one's), the sum over :meth:`forces`."""
    sim = _resting_box(height=0.002)
    report = ContactReport(sim)
    seen = []
    for _ in range(60):
        sim.advance(1)
        total = report.robot_force()
        assert np.array_equal(total, report.robot_force(report.forces()))
        seen.append(total.copy())
    assert len({tuple(t) for t in seen}) > 10  # it changed along the landing
    sim.advance(300)
    assert report.robot_force() == pytest.approx([0.0, 0.0, M * G], abs=1e-6)


def test_the_wrenches_are_in_each_bodys_own_axes_about_its_own_origin_both_sides_of_a_contact():
    """The robot's box (2 kg) stands on its side (rolled 90° about its x, then yawed) with its frame 0.1 m off its
    centre (and centre of mass) along its own x, and carries a 1 kg crate: in the box's own axes the net contact force (ground up
    3 kg g, crate down 1 kg g) is 2 kg g along its y (world up), its torque about its origin d × f = 0.2 kg g
    along its z; the crate takes its weight, up along its own z."""
    m_crate, s_crate, yaw, d = 1.0, 0.1, 0.7, 0.1
    model = Model.rigid_body("se3", M, np.eye(3) * M * S * S / 6, com=(d, 0.0, 0.0), gravity=(0.0, 0.0, -G))
    crate = Model.rigid_body("so3xr3", m_crate, np.eye(3) * m_crate * s_crate ** 2 / 6, gravity=(0.0, 0.0, -G))
    T = np.eye(4)
    T[0, 3] = d
    world = ContactWorld([model, crate], [halfspace("ground", (0, 0, 1), 0.0, 0.6),
                                          box("box", (S, S, S), (0, 0), T, mu=0.6),
                                          box("crate", (s_crate,) * 3, (1, 0), mu=0.6)])
    c, s_ = math.cos(yaw / 2), math.sin(yaw / 2)
    r = math.sqrt(0.5)
    q_yaw, q_roll = np.array([0.0, 0.0, s_, c]), np.array([r, 0.0, 0.0, r])  # xyzw
    x1, y1, z1, w1 = q_yaw
    x2, y2, z2, w2 = q_roll
    quat = [w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2]  # yaw then roll
    centre = np.array([0.3, -0.1, 0.5 * S])
    origin = centre - np.array([d * math.cos(yaw), d * math.sin(yaw), 0.0])  # the frame's x is yawed, level
    q0 = np.concatenate([origin, quat])
    q_crate = np.array([0.3, -0.1, S + 0.5 * s_crate, 0.0, 0.0, 0.0, 1.0])
    sim = Simulator(model, q0, np.zeros(6), 1e-3, world=world, objects=[(q_crate, np.zeros(6))])
    assert sim.advance(400) == 400 and sim.fault is None
    report = ContactReport(sim)
    w = report.wrenches(report.forces())
    assert w["box"] == pytest.approx([0.0, M * G, 0.0, 0.0, 0.0, d * M * G], abs=1e-6)
    assert w["crate"] == pytest.approx([0.0, 0.0, m_crate * G, 0.0, 0.0, 0.0], abs=1e-6)


def test_in_the_air_there_is_no_contact_force():
    sim = _resting_box(height=0.5)
    sim.advance(10)
    report = ContactReport(sim)
    assert not report.current() and report.forces() == []
    assert report.wrenches() == {"box": pytest.approx(np.zeros(6))}


def test_a_free_object_resting_beside_the_robot_reads_its_weight_in_its_own_frame():
    arm = Model.from_urdf(ARM, gravity=(0.0, 0.0, -G))
    obj = Model.rigid_body("so3xr3", M, np.eye(3) * M * S * S / 6, gravity=(0.0, 0.0, -G))
    T = np.eye(4)
    T[0, 3] = 0.5
    shapes = [halfspace("ground", (0, 0, 1), -5.0, 0.6), box("link", (0.1, 0.1, 0.1), (0, 1), T, mu=0.6),
              box("crate", (S, S, S), (1, 0), mu=0.6)]
    world = ContactWorld([arm, obj], shapes)
    q_box = np.array([3.0, 0.0, -5.0 + 0.5 * S, 0.0, 0.0, math.sin(0.2), math.cos(0.2)])
    sim = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, objects=[(q_box, np.zeros(6))])
    sim.set_joint_efforts([0.0])
    sim.advance(200)
    report = ContactReport(sim)
    assert report.objects == [("crate", 1)]
    assert report.current() and sim.last_contact_first == 1  # the objects' own contact step
    forces = report.forces()
    assert {(f.link, f.other) for f in forces} == {("crate", "ground")}
    assert sum(f.force for f in forces) == pytest.approx([0.0, 0.0, M * G], abs=1e-6)
    assert report.wrenches(forces)["crate"] == pytest.approx([0.0, 0.0, M * G, 0.0, 0.0, 0.0], abs=1e-6)
    assert np.allclose(report.body_poses()["crate"], object_pose(sim.obj_q[0]))
    assert report.robot_force().tolist() == [0.0, 0.0, 0.0]  # the crate on the ground: not on the robot


# ------------------------------------------------------------------------------------------ the messages


class _Publisher:
    def __init__(self, topic):
        self.topic, self.sent = topic, []

    def get_subscription_count(self):
        return 1

    def publish(self, msg):
        import copy

        self.sent.append(copy.deepcopy(msg))


class _Node:
    def __init__(self):
        self.pubs = {}

    def create_publisher(self, _type, topic, _qos):
        self.pubs[topic] = _Publisher(topic)
        return self.pubs[topic]


def _part(sim, scale=0.01):
    pytest.importorskip("rclpy")
    from tf2_msgs.msg import TFMessage

    from mbs_ros.nodes.dynamics_contacts import ContactPublishing

    node, tf = _Node(), _Publisher("/tf")
    part = ContactPublishing(node, sim, "world", lambda link: "robot1/" + link, "robot1/", lambda: scale, tf,
                             TFMessage)
    return node, tf, part


def test_the_wrench_stamped_and_the_markers_carry_the_resting_box_closed_form():
    from visualization_msgs.msg import Marker

    sim = _resting_box()
    sim.advance(300)
    node, _tf, part = _part(sim, scale=0.01)
    assert part.wanted()
    part.publish(sim.stamp())
    (msg,) = node.pubs["contacts/box"].sent
    assert msg.header.frame_id == "robot1/box"
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 300_000_000)
    f, t = msg.wrench.force, msg.wrench.torque
    assert [f.x, f.y, f.z, t.x, t.y, t.z] == pytest.approx([0.0, 0.0, M * G, 0.0, 0.0, 0.0], abs=1e-6)
    (markers,) = node.pubs["contacts/markers"].sent
    assert markers.markers[0].action == Marker.DELETEALL
    (dots,) = [m for m in markers.markers[1:] if m.ns == "contacts"]
    (lines,) = [m for m in markers.markers[1:] if m.ns == "contact_forces"]
    assert dots.type == Marker.SPHERE_LIST and lines.type == Marker.LINE_LIST
    assert len(dots.points) == 4 and len(lines.points) == 8
    assert sorted((round(p.x, 9), round(p.y, 9)) for p in dots.points) == \
        [(0.2, -0.2), (0.2, 0.0), (0.4, -0.2), (0.4, 0.0)]
    # each force: a segment from its point along the force, 0.01 m per N; together m g up
    starts, ends = lines.points[0::2], lines.points[1::2]
    assert [(p.x, p.y, p.z) for p in starts] == [(p.x, p.y, p.z) for p in dots.points]
    rise = sum(b.z - a.z for a, b in zip(starts, ends))
    assert rise == pytest.approx(0.01 * M * G, abs=1e-8)
    (world,) = node.pubs["world/markers"].sent
    (ground,) = [m for m in world.markers if m.ns == "ground"]
    # a 2 mm slab whose top face is the plane: its centre 1 mm below
    assert ground.type == Marker.CUBE and ground.pose.position.z == pytest.approx(-0.001)
    assert ground.scale.z == pytest.approx(0.002)


def test_an_object_is_on_tf_and_on_the_world_markers_with_its_shape():
    from visualization_msgs.msg import Marker

    arm = Model.from_urdf(ARM, gravity=(0.0, 0.0, 0.0))
    obj = Model.rigid_body("so3xr3", 1.0, np.eye(3) * 0.01, gravity=(0.0, 0.0, 0.0))
    world = ContactWorld([arm, obj], [sphere("ball", 0.1, (1, 0))])
    q = np.array([1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0])
    sim = Simulator(arm, np.zeros(1), np.zeros(1), 1e-3, world=world, objects=[(q, np.array([0.0, 0, 0, 0, 0, 0]))])
    node, tf, part = _part(sim)
    part.publish(sim.stamp())
    (tfm,) = tf.sent
    (t,) = tfm.transforms
    assert (t.header.frame_id, t.child_frame_id) == ("world", "robot1/ball")
    assert [t.transform.translation.x, t.transform.translation.y, t.transform.translation.z] == [1.0, 2.0, 3.0]
    (world_markers,) = node.pubs["world/markers"].sent
    (ball,) = world_markers.markers
    assert ball.type == Marker.SPHERE and ball.scale.x == pytest.approx(0.2)
    assert [ball.pose.position.x, ball.pose.position.y, ball.pose.position.z] == [1.0, 2.0, 3.0]
    assert node.pubs["contacts/ball"].sent[0].wrench.force.z == 0.0  # out of contact: zero


def test_a_non_finite_value_is_never_published():
    sim = _resting_box()
    sim.advance(300)
    node, _tf, part = _part(sim)
    sim.q = sim.q.copy()
    sim.q[0] = math.nan  # a state gone bad: the box's frame (and its wrench's axes) are not finite
    part.publish(sim.stamp())
    assert node.pubs["contacts/box"].sent == [] and part.skipped >= 1


def test_an_arrow_whose_tip_overflows_is_skipped_not_published():
    """A finite force times a finite scale can overflow (the fuzz's huge commands meet marker_wrench_scale up to
    1e6; here 1e308 m per N on the resting box's ~5 N per point): those arrows and their points are skipped and
    counted; nothing non-finite is published, the wrench topics still are."""
    sim = _resting_box()
    sim.advance(300)
    node, _tf, part = _part(sim, scale=1e308)
    part.publish(sim.stamp())
    (markers,) = node.pubs["contacts/markers"].sent
    lines = [m for m in markers.markers if m.ns == "contact_forces"]
    dots = [m for m in markers.markers if m.ns == "contacts"]
    # the points carrying load overflow (~5 N x 1e308); a point without load (0 x 1e308 = 0) keeps its segment
    kept = 4 - part.skipped
    assert part.skipped >= 1 and sum(len(m.points) for m in dots) == kept
    assert sum(len(m.points) for m in lines) == 2 * kept
    assert all(math.isfinite(c) for m in markers.markers for p in m.points for c in (p.x, p.y, p.z))
    (msg,) = node.pubs["contacts/box"].sent
    assert msg.wrench.force.z == pytest.approx(M * G, abs=1e-6)


def test_the_contact_publications_come_one_message_per_piece_after_the_forces_and_the_wrenches():
    """The node publishes the contact topics in pieces, each within a callback's share (docs/dynamics_node.md,
    "Publication in pieces"): the contact forces, then the wrenches, are computed in pieces of their own (Solo12's
    took ~0.2 and ~0.4 ms of CPU), and no piece publishes more than one message."""
    sim = _resting_box()
    sim.advance(300)
    node, tf, part = _part(sim)
    pubs = list(node.pubs.values()) + [tf]
    sent = []
    for _piece in part.pieces(sim.stamp()):
        sent.append(sum(len(p.sent) for p in pubs))
    per_piece = np.diff([0] + sent)
    assert per_piece[:2].tolist() == [0, 0]  # the forces, the wrenches: nothing published yet
    assert per_piece.max() == 1 and sent[-1] == len(node.pubs["contacts/box"].sent) + len(
        node.pubs["contacts/markers"].sent) + len(node.pubs["world/markers"].sent) + len(tf.sent)
    assert len(node.pubs["contacts/box"].sent) == 1 and len(node.pubs["contacts/markers"].sent) == 1
