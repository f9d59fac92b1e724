"""What the dynamics node publishes (:class:`StatePublishing`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`): the state of its simulator ``self.sim`` as odom, pose, /tf
and /tf_static, joint_states, joint_wrenches, wrench and joint_effort, markers, thrust, energy, /diagnostics and
/clock. Messages are made once and refilled; each topic is built only while someone subscribes. The topics are
described in docs/dynamics_node.md."""
from __future__ import annotations

import time
from array import array
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from mbs_ros.dynamics.simulation.simulator import WrenchCommand
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes import markers as mk
from mbs_ros.cores.dynamics import StateView, diagnostics_report, energy_report, tf_layout
from mbs_ros.cores.dynamics_settings import topic_token
from mbs_ros.cores.work import whole

try:  # our interface package (mbs_ros_msgs/, built by make setup / colcon)
    from mbs_ros_msgs.msg import EnergyPorts
except ImportError:  # pragma: no cover - without it the node runs, with no energy topic (a warning says so)
    EnergyPorts = None
try:  # tf2_msgs is not on PyPI: the set-up builds it; a ROS install has it.
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - reported at start-up
    TFMessage = None

__all__ = ["StatePublishing", "EnergyPorts", "TFMessage", "CLOCK_REPEAT_S", "INPUTS_OUT"]

# While the simulation time stands still (paused, or waiting in lockstep), /clock is repeated this often.
CLOCK_REPEAT_S = 0.5
# History depth of the state topics (odom, pose, wrench, /tf, /clock, joint_states, joint_effort, thrust): reliable
# KEEP_LAST never blocks the node, and a reliable reader that lost a datagram (a recorder starved on a loaded machine)
# asks for it again only at the writer's next heartbeat, seconds later; as fast as possible 100 samples were gone by
# then (one period of 251 missing in one of 20 recorded runs; /clock at depth 10: 66 in a lockstep test's probe).
STATE_QOS_DEPTH = 1000
#: what :meth:`StatePublishing.state_pieces` yields once a controller's inputs are out
INPUTS_OUT = "inputs out"


class StatePublishing:
    """The state of ``sim`` on the topics of ``node``. ``settings()`` the node's settings now; ``source`` and
    ``multibody`` where the model comes from; ``world_frame``, ``base_frame`` and ``prefix`` the frames;
    ``visual_urdf`` the URDF for RViz; ``counts`` the node's counters (diagnostics). :meth:`create` makes the
    publishers."""

    def __init__(self, node, sim, *, settings, source, multibody: bool, world_frame: str, base_frame: str,
                 prefix: str, visual_urdf, counts: dict):
        self.node, self.sim, self.settings, self.source, self.multibody = node, sim, settings, source, multibody
        self.world_frame, self.base_frame, self._prefix = world_frame, base_frame, prefix
        self._visual_urdf, self._counts = visual_urdf, counts
        self.nj, self.nt = len(sim.model.joint_names), len(sim.model.thruster_names)
        self.last_published_k = self._last_clock_stamp = None  # the step whose state is out (everything), /clock's
        self.last_state_wall = self.last_diag_wall = self._last_clock_wall = 0.0
        self._reported = {}  # counts (and saturations) at the last diagnostics: what is new since

    @property
    def model(self):
        return self.sim.model

    def stamp(self, k: Optional[int] = None) -> int:
        return self.sim.stamp(k)

    def create(self, static_transforms=()) -> None:
        """The publishers, the kept messages, the TF layout (with ``static_transforms`` of the other parts), the
        markers; robot_description and /tf_static once."""
        s, model, node = self.settings(), self.model, self.node
        qos = QoSProfile(depth=STATE_QOS_DEPTH)
        self.pub_odom = node.create_publisher(Odometry, "odom", qos)
        self.pub_pose = node.create_publisher(PoseStamped, "pose", qos)
        self.pub_wrench = node.create_publisher(WrenchStamped, "wrench", qos)
        self.pub_tf = node.create_publisher(TFMessage, "/tf", qos)
        self.pub_diag = node.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))
        self.pub_clock = node.create_publisher(Clock, "/clock", qos) if s.publish_clock else None
        self.pub_markers = node.create_publisher(MarkerArray, "markers", QoSProfile(depth=10))
        self.pub_energy = None
        if EnergyPorts is not None:
            self.pub_energy = node.create_publisher(EnergyPorts, "energy", QoSProfile(depth=10))
            self._energy_msg = EnergyPorts()
            self._energy_msg.header.frame_id = self.world_frame
        else:
            node.get_logger().warning("mbs_ros_msgs is not importable: no energy topic (make setup builds it)")
        if self.nt:
            self.pub_thrust = node.create_publisher(JointState, "thrust", qos)
            self._thrust_msg = JointState(name=list(model.thruster_names))
        self.pub_joint_wrenches = []
        if self.nj:
            self.pub_joint_states = node.create_publisher(JointState, "joint_states", qos)
            self.pub_joint_effort = node.create_publisher(JointState, "joint_effort", qos)
            self.pub_joint_wrenches = [
                node.create_publisher(WrenchStamped, "joint_wrenches/" + topic_token(j), qos)
                for j in model.joint_names]
        self._setup_frames()
        self._static_transforms += list(static_transforms)
        self._make_messages()
        if self.multibody:
            # The URDF with the link names this node publishes on TF: RViz's RobotModel works with an empty
            # TF prefix, robot_state_publisher with an empty frame_prefix.
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)
            self.pub_robot_description = node.create_publisher(String, "robot_description", latched)
            self.pub_robot_description.publish(String(data=mk.prefixed_urdf(self._visual_urdf, self.frame)))
        self.setup_markers()
        if self._static_transforms:
            static_qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.pub_tf_static = node.create_publisher(TFMessage, "/tf_static", static_qos)
            self.pub_tf_static.publish(TFMessage(transforms=[
                cv.transform_stamped_msg(self.sim.t0_ns, parent, child, p, quat)
                for parent, child, p, quat in self._static_transforms]))

    def frame(self, link: str) -> str:
        """A link's TF frame as published."""
        if link == "world" and self.source.root_link == "world":
            return self.world_frame
        return self._prefix + link

    def _setup_frames(self) -> None:
        """TF layout: link indices of the base and of each joint's parent and child, static transforms; where
        each joint's position sits in q."""
        model = self.model
        self._static_transforms = []
        self._tf_joints = []  # (parent link index, child link index, parent frame, child frame)
        self._joint_child_frames = []
        self._base_link_index, self._world_to_base, self._base_is_root = None, True, True
        # the published state: odom's base pose and twist, joint_states' positions (continuous: atan2(sin, cos))
        self._state_view = StateView(model, self.source if self.multibody else None)
        if not self.multibody:
            return
        self._base_link_index = self._state_view.base_link_index
        self._base_is_root = self._state_view.base_is_root
        self._static_transforms, self._tf_joints, child_of, self._world_to_base = tf_layout(model, self.source,
                                                                                          self.frame)
        self._joint_child_frames = [self.frame(child_of[j]) for j in model.joint_names]
        self._tf_parent = np.array([j[0] for j in self._tf_joints], dtype=int)
        self._tf_child = np.array([j[1] for j in self._tf_joints], dtype=int)

    def _make_messages(self) -> None:
        """One message per published type, kept and refilled every cycle (publish serialises at once)."""
        self._odom_msg = Odometry()
        self._odom_msg.header.frame_id = self.world_frame
        self._odom_msg.child_frame_id = self.base_frame
        self._odom_out = cv.odometry_out(self._odom_msg)  # its bytes at each state (the same as rclpy's, faster)
        self._pose_msg = PoseStamped()
        self._pose_msg.header.frame_id = self.world_frame
        self._tf_base = None
        transforms = []
        if self._world_to_base:
            self._tf_base = TransformStamped()
            self._tf_base.header.frame_id, self._tf_base.child_frame_id = self.world_frame, self.base_frame
            transforms.append(self._tf_base)
        self._tf_links = []
        for _pi, _ci, parent, child in self._tf_joints:
            t = TransformStamped()
            t.header.frame_id, t.child_frame_id = parent, child
            self._tf_links.append(t)
        self._tf_msg = TFMessage(transforms=transforms + self._tf_links)
        self._wrench_msg = WrenchStamped()
        if self.nj:
            names = list(self.model.joint_names)
            # the moving joints, then the mimic and the locked ones (StateView.joint_state_names)
            self._joint_state_out = cv.joint_state_out(JointState(name=StateView.joint_state_names(self.model)))
            self._effort_msg = JointState(name=names)
            self._joint_wrench_msgs = []
            for frame in self._joint_child_frames:
                m = WrenchStamped()
                m.header.frame_id = frame
                self._joint_wrench_msgs.append(m)

    def setup_markers(self) -> None:
        s = self.settings()
        if self.multibody:
            from mbs_ros.dynamics.model.urdf import parse_urdf

            spec = parse_urdf(self.source.urdf)
            inertials = {name: (l.mass, l.com, l.inertia) for name, l in spec.links.items()}
            shapes = mk.shapes_from_urdf(self._visual_urdf, self.model.link_names, self.frame, inertials)
        else:
            shapes = mk.rigid_body_shapes(s.mass, s.inertia_matrix, s.com, self.base_frame)
        self.marker_maker = mk.MarkerMaker(shapes, self.world_frame, self.base_frame,
                                           wrench_arrows=self.model.group is not None)
        self._markers_delete_all = True  # the first array clears what an earlier run left in RViz

    def clear_markers(self) -> None:
        """The next marker array clears what RViz shows first (after a reset)."""
        self._markers_delete_all = True

    def publish_clock(self, again: bool = False) -> None:
        if self.pub_clock is None:
            return
        stamp = self.stamp()
        if stamp == self._last_clock_stamp and not again:
            return
        self.pub_clock.publish(Clock(clock=cv.time_from_ns(stamp)))
        self._last_clock_stamp = stamp
        self._last_clock_wall = time.monotonic()

    def repeat_clock(self) -> None:
        if self.pub_clock is not None and time.monotonic() - self._last_clock_wall > CLOCK_REPEAT_S:
            self.publish_clock(again=True)

    def publish_state(self, controller_inputs_only: bool = False, everything: bool = False,
                      wrenches: bool = False, markers: bool = False) -> None:
        """:meth:`state_pieces` all at once."""
        whole(self.state_pieces(controller_inputs_only, everything, wrenches, markers))

    def state_pieces(self, controller_inputs_only: bool = False, everything: bool = False,
                     wrenches: bool = False, markers: bool = False, rest: bool = True):
        """The state at the current stamp, one message per piece (an iterator: the node publishes the rest in
        later callbacks, :class:`~mbs_ros.cores.work.WorkQueue`): /clock, odom and joint_states (a controller's
        inputs), then :data:`INPUTS_OUT`, then pose, /tf and thrust with ``rest`` (lockstep: at publish_rate),
        joint_wrenches with ``wrenches``, markers with ``markers`` (``everything``: both), each if subscribed.
        ``controller_inputs_only``: /clock, odom and joint_states (lockstep sending it again)."""
        stamp = self.stamp()
        self.publish_clock(again=controller_inputs_only)
        yield  # a piece each (a publication to several subscribers costs ~50 us apiece)
        self.last_state_wall = time.monotonic()
        sim, model = self.sim, self.model
        q, v = sim.q, sim.v
        if not controller_inputs_only:
            self.last_published_k = sim.k
        poses = None
        rest = rest and not controller_inputs_only
        tf_wanted = rest and self.pub_tf.get_subscription_count() > 0
        if self.multibody and not self._base_is_root:  # the base's pose is a link's: the links' poses first
            poses = model.link_poses(q)
        p, quat = self._state_view.base_pose(model, q, poses)  # a URDF rooted at "world": the base link's fixed pose
        if self.pub_odom.get_subscription_count():
            self.pub_odom.publish(self._odom_out(stamp, p, quat, self._state_view.twist(model, q, v)))
            yield
        if self.nj and self.pub_joint_states.get_subscription_count():
            self._publish_joint_states(stamp)
        yield INPUTS_OUT
        if controller_inputs_only:
            return
        if poses is None and self.multibody and (tf_wanted or everything or markers):  # for /tf and the markers
            poses = model.link_poses(q)
        if rest and self.pub_pose.get_subscription_count():
            m = self._pose_msg
            cv.set_stamp(m.header, stamp)
            cv.set_pose(m.pose, p, quat)
            self.pub_pose.publish(m)
            yield
        if tf_wanted:
            self._publish_tf(stamp, poses, p, quat)
            yield
        if rest and self.nt and self.pub_thrust.get_subscription_count():
            m = self._thrust_msg
            cv.set_stamp(m.header, stamp)
            m.effort = array("d", np.ascontiguousarray(sim.thrust, dtype=float).tobytes())
            self.pub_thrust.publish(m)
            yield
        if (everything or wrenches) and self.nj:
            yield from self.joint_wrench_pieces(stamp)
        if (everything or markers) and self.settings().publish_markers:
            self.publish_markers(stamp, poses)
            yield

    def _publish_tf(self, stamp: int, poses: Optional[np.ndarray], p, quat) -> None:
        if self._tf_base is not None:
            cv.set_stamp(self._tf_base.header, stamp)
            cv.set_pose(self._tf_base.transform, p, quat)
        if self._tf_links:
            T = cv.inverse_transforms(poses[self._tf_parent]) @ poses[self._tf_child]  # T_parent_child
            quats = cv.quaternion_from_matrix(T[:, :3, :3]).tolist()
            positions = T[:, :3, 3].tolist()
            for t, p_j, quat_j in zip(self._tf_links, positions, quats):
                cv.set_stamp(t.header, stamp)
                cv.set_pose(t.transform, p_j, quat_j)
        self.pub_tf.publish(self._tf_msg)

    def _joint_positions(self, q: np.ndarray) -> np.ndarray:
        return self._state_view.joint_positions(q)

    def _publish_joint_states(self, stamp: int) -> None:
        self.pub_joint_states.publish(self._joint_state_out(stamp, *self._state_view.joint_state(self.sim)))

    def joint_wrench_pieces(self, stamp: int):
        """joint_wrenches/<joint> of the current state, one message per piece, computed only when someone
        subscribes to one of them."""
        wanted = [i for i, pub in enumerate(self.pub_joint_wrenches) if pub.get_subscription_count()]
        if not wanted:
            return
        W = self.sim.joint_wrenches().tolist()
        for i in wanted:
            m = self._joint_wrench_msgs[i]
            cv.set_stamp(m.header, stamp)
            cv.set_pair(m.wrench, "force", "torque", W[i])
            self.pub_joint_wrenches[i].publish(m)
            yield

    def publish_markers(self, stamp: int, poses: Optional[np.ndarray] = None) -> None:
        """markers of the current state, built only when someone subscribes."""
        if not self.pub_markers.get_subscription_count():
            return
        sim, model = self.sim, self.model
        if poses is None and self.multibody:
            poses = model.link_poses(sim.q)
        p, quat = model.pose(sim.q)
        if poses is None:  # a single body: its one "link" is the body frame
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = cv.rotation_matrix(quat), p
            poses = T[None]
        elif not self._base_is_root:
            p = poses[self._base_link_index][:3, 3]
        markers = []
        if self._markers_delete_all:
            markers.append(mk.delete_all_marker(self.world_frame, stamp))
            self._markers_delete_all = False
        markers += self.marker_maker.link_markers(stamp, poses)
        F, tau = sim.applied_wrench_world()
        markers += self.marker_maker.wrench_markers(stamp, p, F, tau, self.settings().marker_wrench_scale)
        self.pub_markers.publish(MarkerArray(markers=markers))

    def publish_applied(self) -> None:
        """``wrench`` and ``joint_effort`` again with the state, stamped with the start of the last step taken."""
        k = self.sim.k
        if k > 0:
            self.publish_wrench(k - 1, self.sim.applied_wrench)
            if self.nj:
                self.publish_effort(k - 1, self.sim.applied_efforts)

    def publish_wrench(self, k: int, cmd: WrenchCommand) -> None:
        if not self.pub_wrench.get_subscription_count():
            return
        m = self._wrench_msg
        cv.set_stamp(m.header, self.stamp(k))
        m.header.frame_id = self.base_frame if cmd.frame == "body" else self.world_frame
        cv.set_pair(m.wrench, "force", "torque", cmd.W.tolist())
        self.pub_wrench.publish(m)

    def publish_effort(self, k: int, effort: np.ndarray) -> None:
        if not self.pub_joint_effort.get_subscription_count():
            return
        m = self._effort_msg
        cv.set_stamp(m.header, self.stamp(k))
        m.effort = array("d", np.ascontiguousarray(effort, dtype=float).tobytes())
        self.pub_joint_effort.publish(m)

    def energy_report(self) -> dict:
        """The port-level bookkeeping of the current state with the simulator's integrals: what the energy topic
        carries (:func:`mbs_ros.cores.dynamics.energy_report`)."""
        return energy_report(self.sim, self.settings().environment_temperature)

    def publish_energy(self) -> None:
        if self.pub_energy is None or not self.pub_energy.get_subscription_count():
            return
        r = self.energy_report()
        m = self._energy_msg
        cv.set_stamp(m.header, self.stamp())
        m.environment_temperature = r["temperature"]
        m.storage_names = list(r["storages"])
        m.storage_energy = [float(x) for x in r["storages"].values()]
        m.port_names = list(r["ports"])
        m.port_power = [float(x) for x in r["ports"].values()]
        m.dissipator_names = list(r["dissipators"])
        m.dissipated_power = [float(x) for x in r["dissipators"].values()]
        for key in ("total_energy", "supplied_energy", "dissipated_energy", "entropy_production",
                    "entropy_produced", "balance_residual"):
            setattr(m, key, float(r[key]))
        self.pub_energy.publish(m)

    def diagnostics_pieces(self, paused: bool, rate, timing=None):
        """The node's status in three pieces (an iterator, as :meth:`state_pieces`): the report, its message, the
        publication (together a control period). ``paused`` as the diagnostics say it (a ~/step in progress:
        paused), ``rate`` the physics-rate check (:func:`~mbs_ros.cores.dynamics_settings.check_rate`), ``timing()``
        more values (:meth:`~mbs_ros.nodes.runtime.CallbackGuard.timing`), asked only when published."""
        self.last_diag_wall = time.monotonic()
        if not self.pub_diag.get_subscription_count():
            return
        level, message, values, self._reported = diagnostics_report(self.sim, self._counts, self._reported, paused,
                                                                    rate, timing)
        yield
        name = f"{self.node.get_fully_qualified_name()}: " + ("multibody" if self.multibody else "rigid body")
        msg = DiagnosticArray(status=[DiagnosticStatus(level=getattr(DiagnosticStatus, level), name=name,
                                                       message=message, hardware_id=self.base_frame,
                                                       values=cv.key_values(values))])
        msg.header.stamp = cv.time_from_ns(self.stamp())  # the same: the node steps once its queue is empty
        yield
        self.pub_diag.publish(msg)
