"""The dynamics node's contact topics (a part it holds and calls at its ``contacts_rate`` grid): what the last
contact step did and where the world's shapes and free objects are. docs/contact.md, "On ROS".

- ``contacts/<link>`` (``geometry_msgs/WrenchStamped``, one per robot link with a collision shape and per free
  object, ``<link>`` as a topic token): the sum of the contact forces on it over the last physics step, in its
  own frame (``header.frame_id`` the link's TF frame; the torque about the frame's origin), as a foot or wrist
  force/torque sensor reads it; zero out of contact.
- ``contacts/markers`` (``visualization_msgs/MarkerArray``): a sphere at each contact point (ns ``contacts``) and
  an arrow of the force on the moving side (ns ``contact_forces``, ``marker_wrench_scale`` m per N), the
  array starting with a DELETEALL so contacts that ended disappear.
- ``world/markers`` (``MarkerArray``): the ground (a thin 20 m square on its plane), the static shapes and the
  free objects with their collision geometry (a capsule is drawn as its cylinder with the end spheres).
- ``/tf``: ``<world_frame>`` → ``<prefix><object>`` of every free object.

Each topic only while someone subscribes; a value that is not finite is never published (the message is
skipped, counted in ``skipped``). The forces come from :class:`mbs_ros.dynamics.contact.report.ContactReport`
(the impulses of the Simulator's last contact step over the step).
"""
from __future__ import annotations

import math
from typing import Callable, List

import numpy as np
from geometry_msgs.msg import Point, WrenchStamped
from rclpy.qos import QoSProfile
from visualization_msgs.msg import Marker, MarkerArray

from mbs_ros.cores.dynamics_settings import topic_token
from mbs_ros.cores.rotations import quaternion_from_matrix
from mbs_ros.dynamics.contact.report import ContactReport, object_pose
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.markers import geometry_markers

__all__ = ["ContactPublishing"]

POINT_COLOR = (1.0, 0.85, 0.1, 1.0)
FORCE_COLOR = (0.95, 0.35, 0.05, 1.0)
WORLD_COLOR = (0.55, 0.50, 0.45, 0.6)
OBJECT_COLOR = (0.2, 0.6, 0.85, 1.0)


def _finite(*values) -> bool:
    return all(math.isfinite(x) for v in values for x in np.ravel(v))


class ContactPublishing:
    """Built by the dynamics node with its ``node`` (for the publishers), ``sim`` (with a contact world),
    ``world_frame``, ``frame_of`` (a robot link's TF frame), ``prefix`` (the namespace's frame prefix, for the
    objects' frames), ``scale`` (a callable: the force arrows' m per N), the /tf publisher ``pub_tf`` and the
    ``TFMessage`` class. :meth:`publish` at the node's grid; :meth:`wanted` says whether anyone listens."""

    def __init__(self, node, sim, world_frame: str, frame_of: Callable[[str], str], prefix: str,
                 scale: Callable[[], float], pub_tf, tf_message):
        self.sim = sim
        self.report = ContactReport(sim)
        self.world_frame = world_frame
        self.skipped = 0
        qos = QoSProfile(depth=10)
        self.frames = {name: frame_of(name) for name in self.report.links}
        self.frames.update({name: prefix + name for name, _ in self.report.objects})
        self.pub_wrench = {}
        self.msg_wrench = {}
        for name, frame in self.frames.items():
            self.pub_wrench[name] = node.create_publisher(WrenchStamped, "contacts/" + topic_token(name), qos)
            m = WrenchStamped()
            m.header.frame_id = frame
            self.msg_wrench[name] = m
        self.pub_markers = node.create_publisher(MarkerArray, "contacts/markers", qos)
        self.pub_world = node.create_publisher(MarkerArray, "world/markers", qos)
        self.pub_tf = pub_tf
        self._tf_message = tf_message
        self._scale = scale
        world = sim.world
        self._fixed = []  # (ns, id, type, scale, pose) of the world's shapes
        self._moving = []  # (ns, id, type, scale, T_object_shape, object index) of the objects' shapes
        for s in (world.shapes if world is not None else ()):
            if s.body is None:
                for i, (kind, size, T) in enumerate(geometry_markers(s.geometry, np.asarray(s.T_body_shape))):
                    self._fixed.append((s.name, i, kind, size, T))
            elif s.body[0] > 0:
                for i, (kind, size, T) in enumerate(geometry_markers(s.geometry, np.asarray(s.T_body_shape))):
                    self._moving.append((s.name, i, kind, size, T, int(s.body[0]) - 1))

    def wanted(self) -> bool:
        return (any(p.get_subscription_count() for p in self.pub_wrench.values())
                or self.pub_markers.get_subscription_count() > 0 or self.pub_world.get_subscription_count() > 0
                or (bool(self.report.objects) and self.pub_tf.get_subscription_count() > 0))

    def publish(self, stamp: int) -> None:
        """Everything that someone subscribes to, at the current state (``stamp`` its time [ns])."""
        want_wrench = [n for n, p in self.pub_wrench.items() if p.get_subscription_count()]
        want_markers = self.pub_markers.get_subscription_count() > 0
        if want_wrench or want_markers:
            forces = self.report.forces()
            if want_wrench:
                wrenches = self.report.wrenches(forces)
                for name in want_wrench:
                    w = wrenches.get(name, np.zeros(6))
                    if not _finite(w):
                        self.skipped += 1
                        continue
                    m = self.msg_wrench[name]
                    cv.set_stamp(m.header, stamp)
                    cv.set_pair(m.wrench, "force", "torque", w.tolist())
                    self.pub_wrench[name].publish(m)
            if want_markers:
                self._publish_contact_markers(stamp, forces)
        if self.pub_world.get_subscription_count():
            self._publish_world(stamp)
        if self.report.objects and self.pub_tf.get_subscription_count():
            self._publish_tf(stamp)

    def _marker(self, stamp, ns, id_, kind, color) -> Marker:
        m = Marker(ns=ns, id=id_, type=kind, action=Marker.ADD)
        m.header.frame_id = self.world_frame
        cv.set_stamp(m.header, stamp)
        m.color.r, m.color.g, m.color.b, m.color.a = color
        return m

    def _publish_contact_markers(self, stamp: int, forces) -> None:
        delete = Marker(action=Marker.DELETEALL)
        delete.header.frame_id = self.world_frame
        cv.set_stamp(delete.header, stamp)
        markers = [delete]
        scale = float(self._scale())
        for i, f in enumerate(forces):
            with np.errstate(over="ignore"):  # finite forces times a large marker_wrench_scale may overflow
                tip = f.point + scale * f.force
            if not _finite(f.point, f.force, tip):
                self.skipped += 1
                continue
            p = f.point.tolist()
            dot = self._marker(stamp, "contacts", i, Marker.SPHERE, POINT_COLOR)
            cv.set_pose(dot.pose, p, (0.0, 0.0, 0.0, 1.0))
            dot.scale.x = dot.scale.y = dot.scale.z = 0.012
            markers.append(dot)
            arrow = self._marker(stamp, "contact_forces", i, Marker.ARROW, FORCE_COLOR)
            arrow.pose.orientation.w = 1.0
            tip = tip.tolist()
            arrow.points = [Point(x=p[0], y=p[1], z=p[2]), Point(x=tip[0], y=tip[1], z=tip[2])]
            arrow.scale.x, arrow.scale.y, arrow.scale.z = 0.005, 0.01, 0.015
            markers.append(arrow)
        self.pub_markers.publish(MarkerArray(markers=markers))

    def _shape_marker(self, stamp, ns, id_, kind, size, T, color):
        if not _finite(T, size):
            self.skipped += 1
            return None
        m = self._marker(stamp, ns, id_, kind, color)
        m.scale.x, m.scale.y, m.scale.z = (float(x) for x in size)
        cv.set_pose(m.pose, T[:3, 3].tolist(), quaternion_from_matrix(T[:3, :3]).tolist())
        return m

    def _publish_world(self, stamp: int) -> None:
        markers = [self._shape_marker(stamp, ns, i, kind, size, T, WORLD_COLOR)
                   for ns, i, kind, size, T in self._fixed]
        poses = [object_pose(q) for q in self.sim.obj_q]
        markers += [self._shape_marker(stamp, ns, i, kind, size, poses[k] @ T, OBJECT_COLOR)
                    for ns, i, kind, size, T, k in self._moving]
        self.pub_world.publish(MarkerArray(markers=[m for m in markers if m is not None]))

    def _publish_tf(self, stamp: int) -> None:
        transforms = []
        for (name, k) in self.report.objects:
            q = self.sim.obj_q[k - 1]
            if not _finite(q):
                self.skipped += 1
                continue
            transforms.append(cv.transform_stamped_msg(stamp, self.world_frame, self.frames[name],
                                                       q[:3].tolist(), q[3:7].tolist()))
        if transforms:
            self.pub_tf.publish(self._tf_message(transforms=transforms))
