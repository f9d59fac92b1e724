"""The dynamics node's contact topics (a part it holds and calls at its ``contacts_rate`` grid): what the last
contact step did and where the world's shapes and free objects are. docs/contact.md, "On ROS".

- ``contacts/<link>`` (``geometry_msgs/WrenchStamped``, one per robot link with a collision shape and per free
  object, ``<link>`` as a topic token): the sum of the contact forces on it over the last physics step, in its
  own frame (``header.frame_id`` the link's TF frame; the torque about the frame's origin), as a foot or wrist
  force/torque sensor reads it; zero out of contact.
- ``contacts/markers`` (``visualization_msgs/MarkerArray``): a DELETEALL (contacts that ended disappear), the
  points as one SPHERE_LIST (ns ``contacts``), the forces on the moving side as one LINE_LIST of segments from
  them (ns ``contact_forces``, ``marker_wrench_scale`` m per N)
- ``world/markers`` (``MarkerArray``): the ground (a thin 20 m square on its plane), the static shapes and the
  free objects with their collision geometry (a capsule is drawn as its cylinder with the end spheres).
- ``/tf``: ``<world_frame>`` → ``<prefix><object>`` of every free object.

Each topic only while someone subscribes; a value that is not finite is never published (the message is
skipped, counted in ``skipped``). The forces come from :class:`mbs_ros.dynamics.contact.report.ContactReport`
(the impulses of the Simulator's last contact step over the step); the markers from :mod:`mbs_ros.nodes.markers`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.qos import QoSProfile
from visualization_msgs.msg import MarkerArray

from mbs_ros.cores.dynamics_settings import topic_token
from mbs_ros.cores.work import whole
from mbs_ros.dynamics.contact.report import ContactReport, object_pose
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.markers import ContactMarkers, finite, shape_marker, world_shape_entries

__all__ = ["ContactPublishing"]

WORLD_COLOR = (0.55, 0.50, 0.45, 0.6)
OBJECT_COLOR = (0.2, 0.6, 0.85, 1.0)


class ContactPublishing:
    """Built by the dynamics node with its ``node`` (for the publishers), ``sim`` (with a contact world),
    ``world_frame``, ``frame_of`` (a robot link's TF frame), ``prefix`` (the namespace's frame prefix, for the
    objects' frames), ``scale`` (a callable: the force segments' m per N), the /tf publisher ``pub_tf`` and the
    ``TFMessage`` class. :meth:`pieces` at the node's grid (:meth:`publish`: all at once); :meth:`wanted` says
    whether anyone listens."""

    def __init__(self, node, sim, world_frame: str, frame_of: Callable[[str], str], prefix: str,
                 scale: Callable[[], float], pub_tf, tf_message):
        self.sim = sim
        self.report = ContactReport(sim)
        self.world_frame, self.skipped = world_frame, 0
        qos = QoSProfile(depth=10)
        self.frames = {name: frame_of(name) for name in self.report.links}
        self.frames.update({name: prefix + name for name, _ in self.report.objects})
        self.pub_wrench, self.msg_wrench = {}, {}
        for name, frame in self.frames.items():
            self.pub_wrench[name] = node.create_publisher(WrenchStamped, "contacts/" + topic_token(name), qos)
            m = WrenchStamped()
            m.header.frame_id = frame
            self.msg_wrench[name] = m
        self.pub_markers = node.create_publisher(MarkerArray, "contacts/markers", qos)
        self.pub_world = node.create_publisher(MarkerArray, "world/markers", qos)
        self.pub_tf, self._tf_message, self._scale = pub_tf, tf_message, scale
        self._contact_markers = ContactMarkers(world_frame, reserve=min(4 * len(sim.world.shapes), 64))
        # (ns, id, type, scale, pose) of the world's shapes; (..., T_object_shape, object index) of the objects'
        self._fixed, self._moving = world_shape_entries(sim.world)

    def wanted(self) -> bool:
        return (any(p.get_subscription_count() for p in self.pub_wrench.values())
                or self.pub_markers.get_subscription_count() > 0 or self.pub_world.get_subscription_count() > 0
                or (bool(self.report.objects) and self.pub_tf.get_subscription_count() > 0))

    def publish(self, stamp: int) -> None:
        """:meth:`pieces` all at once."""
        whole(self.pieces(stamp))

    def pieces(self, stamp: int):
        """Everything that someone subscribes to, at the current state (``stamp`` its time [ns]), one message per
        piece (an iterator: :class:`~mbs_ros.cores.work.WorkQueue`)."""
        want_wrench = [n for n, p in self.pub_wrench.items() if p.get_subscription_count()]
        want_markers = self.pub_markers.get_subscription_count() > 0
        if want_wrench or want_markers:
            forces = self.report.forces()
            yield  # the forces, the wrenches, each publication: a piece each (Solo12's: ~0.2, ~0.4 ms)
            if want_wrench:
                wrenches = self.report.wrenches(forces)
                yield
                for name in want_wrench:
                    w = wrenches.get(name, np.zeros(6))
                    if not finite(w):
                        self.skipped += 1
                        continue
                    m = self.msg_wrench[name]
                    cv.set_stamp(m.header, stamp)
                    cv.set_pair(m.wrench, "force", "torque", w.tolist())
                    self.pub_wrench[name].publish(m)
                    yield
            if want_markers:  # made, then published: two pieces
                markers, skipped = self._contact_markers(stamp, forces, float(self._scale()))
                self.skipped += skipped
                yield
                self.pub_markers.publish(MarkerArray(markers=markers))
                yield
        if self.pub_world.get_subscription_count():
            self._publish_world(stamp)
            yield
        if self.report.objects and self.pub_tf.get_subscription_count():
            self._publish_tf(stamp)
            yield

    def _publish_world(self, stamp: int) -> None:
        poses = [object_pose(q) for q in self.sim.obj_q]
        markers = [shape_marker(self.world_frame, stamp, ns, i, kind, size, T, WORLD_COLOR)
                   for ns, i, kind, size, T in self._fixed]
        markers += [shape_marker(self.world_frame, stamp, ns, i, kind, size, poses[k] @ T, OBJECT_COLOR)
                    for ns, i, kind, size, T, k in self._moving]
        self.skipped += sum(m is None for m in markers)
        self.pub_world.publish(MarkerArray(markers=[m for m in markers if m is not None]))

    def _publish_tf(self, stamp: int) -> None:
        transforms = []
        for (name, k) in self.report.objects:
            q = self.sim.obj_q[k - 1]
            if not finite(q):
                self.skipped += 1
                continue
            transforms.append(cv.transform_stamped_msg(stamp, self.world_frame, self.frames[name],
                                                       q[:3].tolist(), q[3:7].tolist()))
        if transforms:
            self.pub_tf.publish(self._tf_message(transforms=transforms))
