"""What RViz gets from the dynamics node: robot_description, /tf for every link, and the markers.

Real node processes, real topics:

- ``/viz``: the underwater vehicle-manipulator of ``config/uvms_6dof.yaml`` (a xacro URDF: a box vehicle, a fixed
  joint to the arm, six revolute joints, a fixed tool frame with a payload and no visual), moving and pushed by a
  held base wrench. robot_description reaches a late-joining subscriber and parses with urdf_parser_py, with the
  link names the node uses on TF; every publish cycle, /tf (plus /tf_static for the fixed joints) gives every
  link a transform chaining to ``world``; the composed TF poses equal ``Model.link_poses`` of the state in
  odom/joint_states, and the marker poses equal them composed with the URDF visual origins; the wrench arrows
  start at the base and are scaled by ``marker_wrench_scale``; a reset clears the markers (DELETEALL).
- ``/body``: a single rigid body with a full inertia matrix and an offset centre of mass: its marker is the
  equivalent-inertia box (a uniform box of the same mass has the same inertia tensor about the same point).
- ``/inertia``: a single body whose ``inertia`` is set at run time: its box becomes the new equivalent-inertia box.

All processes start at once in a module fixture; every wait is for a graph match, a message or a log line. The
unit tests at the end need no process (URDF prefixing, meshes, materials, robot YAML visuals).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from urdf_parser_py.urdf import URDF  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from mbs_ros.dynamics import Model  # noqa: E402
from mbs_ros.dynamics.model.urdf import origin_matrix  # noqa: E402
from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.nodes import markers as mk  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running, stamp_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NODE = "mbs_ros.nodes.dynamics_node"
TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
UVMS_ROBOT = ROOT / "config" / "robots" / "uvms_6dof.yaml"
VIZ = dict(publish_rate=20.0, cmd_timeout=0.0, marker_wrench_scale=0.02,
           initial_twist=[0.2, -0.1, 0.05, 0.1, -0.05, 0.3],
           initial_joint_velocities=[0.4, -0.3, 0.2, 0.5, -0.4, 0.3])
BODY = dict(mass=2.0, inertia=[0.02, 0.001, -0.002, 0.03, 0.003, 0.04], com=[0.1, -0.05, 0.02],
            initial_position=[1.0, 2.0, 3.0], initial_rpy=[0.3, -0.2, 1.0],
            initial_twist=[0.1, 0.0, 0.0, 0.2, 0.1, 0.3], gravity=[0.0, 0.0, 0.0], publish_rate=20.0)
WRENCH = [40.0, -20.0, 10.0, 3.0, 0.0, -6.0]  # body frame [F; tau]
# a single body at rest with principal axes along the body axes; its inertia is set at run time to NEW_INERTIA
INERTIA = dict(mass=2.0, inertia=[0.02, 0.0, 0.0, 0.03, 0.0, 0.04], com=[0.0, 0.0, 0.0], gravity=[0.0, 0.0, 0.0],
               initial_twist=[0.0] * 6, markers_rate=20.0)
NEW_INERTIA = [0.05, 0.0, 0.0, 0.08, 0.0, 0.11]


LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("visualization_logs")
    procs = {
        "viz": NodeProcess(NODE, name="dynamics_node", namespace="viz", params_file=ROOT / "config/uvms_6dof.yaml",
                           parameters=VIZ, log_file=logs / "viz.log"),
        "body": NodeProcess(NODE, name="dynamics_node", namespace="body", params_file=ROOT / "config/rigid_body.yaml",
                            parameters=BODY, log_file=logs / "body.log"),
        "inertia": NodeProcess(NODE, name="dynamics_node", namespace="inertia",
                               params_file=ROOT / "config/rigid_body.yaml", parameters=INERTIA,
                               log_file=logs / "inertia.log"),
    }
    with running(procs):
        yield procs


@pytest.fixture(scope="module")
def probe(nodes):
    with Probe("test_visualization_probe", TIMEOUT) as p:
        yield p


@pytest.fixture(scope="module")
def uvms():
    return Model.from_yaml(UVMS_ROBOT)


def matrix(p, quat):
    T = np.eye(4)
    T[:3, :3] = cv.rotation_matrix(quat)
    T[:3, 3] = p
    return T


def pose_matrix(pose):
    return matrix(*cv.pose_from_msg(pose))


def transform_matrix(tf):
    return matrix(*cv.transform_from_msg(tf))


def state_of(model, odom, js):
    p, quat = cv.pose_from_msg(odom.pose.pose)
    return model.configuration_from_pose(p, quat, joints=np.array(js.position))


# --------------------------------------------------------------------------------------------- tests


def test_robot_description_reaches_a_late_joiner(probe, nodes, uvms):
    proc = nodes["viz"]
    odom = Recorder(probe, Odometry, "/viz/odom")
    probe.spin_until(lambda: len(odom) > 0, what="/viz/odom", alive=[proc])  # published long ago by now
    desc = Recorder(probe, String, "/viz/robot_description", qos=LATCHED)
    probe.spin_until(lambda: len(desc) > 0, what="robot_description (transient local)", alive=[proc])
    robot = URDF.from_xml_string(desc.messages[0].data)
    links = {link.name for link in robot.links}
    assert links == {"viz/" + name for name in uvms.link_names}
    joints = {j.name: j for j in robot.joints}
    assert set(uvms.joint_names) <= set(joints)  # joint names as in joint_states: not prefixed
    for j in robot.joints:
        assert j.parent in links and j.child in links
    assert joints["joint1"].parent == "viz/base_link" and joints["joint1"].child == "viz/link1"
    assert odom.messages[0].child_frame_id == robot.get_root() == "viz/vehicle"


def _collect(probe, proc, n_stamps=3):
    """/viz odom, joint_states, /tf, /tf_static and markers until n_stamps publish cycles have all of them."""
    rec = dict(odom=Recorder(probe, Odometry, "/viz/odom"), js=Recorder(probe, JointState, "/viz/joint_states"),
               tf=Recorder(probe, TFMessage, "/tf"), markers=Recorder(probe, MarkerArray, "/viz/markers"),
               tf_static=Recorder(probe, TFMessage, "/tf_static",
                                  qos=QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)))

    def complete():
        stamps = {stamp_of(m) for m in rec["odom"].messages} & {stamp_of(m) for m in rec["js"].messages}
        stamps &= {stamp_of(t) for m in rec["tf"].messages for t in m.transforms if t.child_frame_id.startswith("viz/")}
        stamps &= {stamp_of(m.markers[-1]) for m in rec["markers"].messages if m.markers}
        return sorted(stamps)

    probe.spin_until(lambda: len(complete()) >= n_stamps and rec["tf_static"].messages,
                     what=f"{n_stamps} complete /viz publish cycles", alive=[proc])
    return rec, complete()


def test_every_link_has_tf_and_markers_sit_on_the_links(probe, nodes, uvms):
    proc = nodes["viz"]
    pub = probe.node.create_publisher(WrenchStamped, "/viz/cmd_wrench", 10)
    applied = Recorder(probe, WrenchStamped, "/viz/wrench")
    probe.spin_until(lambda: pub.get_subscription_count() > 0, what="/viz/cmd_wrench", alive=[proc])
    pub.publish(cv.wrench_stamped_msg(0, "", WRENCH))
    probe.spin_until(lambda: any(np.allclose(cv.wrench_from_msg(m.wrench), WRENCH) for m in applied.messages),
                     what="the wrench applied", alive=[proc])
    rec, stamps = _collect(probe, proc)
    desc = Recorder(probe, String, "/viz/robot_description", qos=LATCHED)
    probe.spin_until(lambda: len(desc) > 0, what="robot_description", alive=[proc])
    robot = URDF.from_xml_string(desc.messages[0].data)
    visuals = {link.name: link.visuals for link in robot.links}  # by TF frame name: viz/link1
    frames = ["viz/" + name for name in uvms.link_names]

    static = {t.child_frame_id: t for m in rec["tf_static"].messages for t in m.transforms
              if t.child_frame_id.startswith("viz/")}
    assert set(static) == {"viz/base_link", "viz/tool0"}  # the two fixed joints
    worst_tf = worst_marker = 0.0
    for t in stamps:
        dynamic = {tf.child_frame_id: tf for m in rec["tf"].messages for tf in m.transforms
                   if stamp_of(tf) == t and tf.child_frame_id.startswith("viz/")}
        # every link has a transform this cycle (or a static one), and each chains to the world
        assert set(dynamic) | set(static) == set(frames), f"t = {t}: frames missing"
        assert not set(dynamic) & set(static)
        parents = {child: tf for child, tf in {**static, **dynamic}.items()}
        T_world = {}
        for f in frames:
            chain, T, frame = 0, np.eye(4), f
            while frame != "world":
                tf = parents[frame]
                T = transform_matrix(tf.transform) @ T
                frame = tf.header.frame_id
                chain += 1
                assert chain <= len(frames), f"{f}: no chain to world"
            T_world[f] = T
        # ... equal to the model's link poses of the published state
        odom = [m for m in rec["odom"].messages if stamp_of(m) == t][0]
        js = [m for m in rec["js"].messages if stamp_of(m) == t][0]
        poses = uvms.link_poses(state_of(uvms, odom, js))
        for f, T_model in zip(frames, poses):
            worst_tf = max(worst_tf, np.abs(T_world[f] - T_model).max())
        # markers: one per visual, in the world frame, at link pose x visual origin; tool0 (no visual, a 0.5 kg
        # payload) shows its equivalent-inertia box
        array = [m for m in rec["markers"].messages if m.markers and stamp_of(m.markers[-1]) == t][0]
        shapes = {(m.ns, m.id): m for m in array.markers if m.action == Marker.ADD and m.type != Marker.ARROW}
        expected = {(frame, i) for frame, vs in visuals.items() for i in range(len(vs))}
        assert set(shapes) == expected | {("viz/tool0", 0)}
        for (ns, i), m in shapes.items():
            assert m.header.frame_id == "world" and stamp_of(m) == t
            if ns == "viz/tool0":
                assert m.type == Marker.CUBE
                continue
            vis = visuals[ns][i]
            T_vis = origin_matrix(vis.origin.xyz, vis.origin.rpy) if vis.origin is not None else np.eye(4)
            worst_marker = max(worst_marker, np.abs(pose_matrix(m.pose) - T_world[ns] @ T_vis).max())
            geometry = type(vis.geometry).__name__
            if geometry == "Box":
                assert m.type == Marker.CUBE
                assert np.allclose(cv.array_from_vector3(m.scale), vis.geometry.size)
            else:
                assert geometry == "Cylinder" and m.type == Marker.CYLINDER
                d = 2 * vis.geometry.radius
                assert np.allclose(cv.array_from_vector3(m.scale), [d, d, vis.geometry.length])
        # the wrench arrows: from the base origin, force and torque in world axes times marker_wrench_scale
        arrows = {m.id: m for m in array.markers if m.ns == "viz/vehicle/wrench"}
        assert set(arrows) == {0, 1} and all(a.type == Marker.ARROW and a.action == Marker.ADD
                                             for a in arrows.values())
        T_base = pose_matrix(odom.pose.pose)
        for i, vec in ((0, WRENCH[:3]), (1, WRENCH[3:])):
            start, end = (cv.array_from_vector3(p) for p in arrows[i].points)
            assert np.allclose(start, T_base[:3, 3], atol=1e-12)
            assert np.allclose(end - start, VIZ["marker_wrench_scale"] * T_base[:3, :3] @ vec, atol=1e-12)
    assert worst_tf < 1e-9, f"TF and Model.link_poses differ by {worst_tf:.3e}"
    assert worst_marker < 1e-9, f"markers and link poses x visual origins differ by {worst_marker:.3e}"


def test_reset_clears_the_markers(probe, nodes):
    proc = nodes["viz"]
    markers = Recorder(probe, MarkerArray, "/viz/markers")
    # the first array the node publishes to a subscriber clears what an earlier run left (DELETEALL): wait for
    # the arrays after it, so that a DELETEALL after the reset is the reset's
    probe.spin_until(lambda: len(markers) > 0 and all(m.action != Marker.DELETEALL
                                                      for m in markers.messages[-1].markers),
                     what="/viz/markers without DELETEALL", alive=[proc])
    client = probe.node.create_client(Trigger, "/viz/dynamics_node/reset")
    probe.spin_until(client.service_is_ready, what="the reset service", alive=[proc])
    n = len(markers)
    future = client.call_async(Trigger.Request())
    probe.spin_until(future.done, what="the reset", alive=[proc])
    assert future.result().success

    def with_delete_all():
        return [i for i, a in enumerate(markers.messages[n:], n) if any(m.action == Marker.DELETEALL
                                                                         for m in a.markers)]

    probe.spin_until(lambda: with_delete_all(), what="markers with DELETEALL after the reset", alive=[proc])
    i = with_delete_all()[0]
    first = markers.messages[i].markers
    assert first[0].action == Marker.DELETEALL and first[0].header.frame_id == "world"
    assert all(m.action != Marker.DELETEALL for m in first[1:]) and len(first) > 1  # then the shapes again
    probe.spin_until(lambda: len(markers) > i + 1, what="the next markers", alive=[proc])
    assert with_delete_all() == [i], "DELETEALL once, with the first markers after the reset"


def test_single_body_shows_its_equivalent_inertia_box(probe, nodes):
    proc = nodes["body"]
    odom = Recorder(probe, Odometry, "/body/odom")
    markers = Recorder(probe, MarkerArray, "/body/markers")

    def pairs():
        by_stamp = {stamp_of(m): m for m in odom.messages}
        return [(by_stamp[stamp_of(a.markers[-1])], a) for a in markers.messages
                if a.markers and stamp_of(a.markers[-1]) in by_stamp]

    probe.spin_until(lambda: len(pairs()) >= 2, what="/body odom and markers", alive=[proc])
    mass = BODY["mass"]
    ixx, ixy, ixz, iyy, iyz, izz = BODY["inertia"]
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    for o, array in pairs():
        boxes = [m for m in array.markers if m.ns == "body/base_link"]
        assert len(boxes) == 1 and boxes[0].type == Marker.CUBE and boxes[0].id == 0
        box = boxes[0]
        T_world_body = pose_matrix(o.pose.pose)
        T_world_box = pose_matrix(box.pose)
        T_body_box = np.linalg.inv(T_world_body) @ T_world_box
        assert np.allclose(T_body_box[:3, 3], BODY["com"], atol=1e-12)  # centred at the centre of mass
        a, b, c = cv.array_from_vector3(box.scale)
        I_box = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
        R = T_body_box[:3, :3]
        assert np.allclose(R @ I_box @ R.T, inertia, atol=1e-12), "the box's inertia is not the body's"
        arrows = {m.id: m for m in array.markers if m.ns == "body/base_link/wrench"}
        assert set(arrows) == {0, 1} and all(m.type == Marker.ARROW for m in arrows.values())
        assert all(m.action == Marker.DELETE for m in arrows.values())  # no wrench applied: no arrows


def box_sides(mass, principal_moments):
    """Sides of the uniform box of ``mass`` with these principal moments: I_i = m (b_j^2 + b_k^2) / 12, so
    b_i = sqrt(6 (I_j + I_k - I_i) / m)."""
    I = np.asarray(principal_moments, dtype=float)
    return np.sqrt(6.0 * (I.sum() - 2.0 * I) / mass)


def test_single_body_box_follows_an_inertia_set_at_run_time(probe, nodes):
    proc = nodes["inertia"]
    markers = Recorder(probe, MarkerArray, "/inertia/markers")

    def box(array):
        boxes = [m for m in array.markers if m.ns == "inertia/base_link" and m.type == Marker.CUBE]
        assert len(boxes) == 1
        return np.sort(cv.array_from_vector3(boxes[0].scale))

    probe.spin_until(lambda: len(markers) > 0, what="/inertia/markers", alive=[proc])
    mass = INERTIA["mass"]
    old = INERTIA["inertia"]
    assert np.allclose(box(markers.messages[-1]), np.sort(box_sides(mass, [old[0], old[3], old[5]])), atol=1e-12)
    req = SetParameters.Request(parameters=[Parameter("inertia", value=NEW_INERTIA).to_parameter_msg()])
    result = probe.call(SetParameters, "/inertia/dynamics_node/set_parameters", req, alive=[proc]).results[0]
    assert result.successful, result.reason
    # arrays published before the change may still wait in the probe's queue (a busy machine): wait for the first
    # new box, then every later array must carry it too
    n = len(markers)
    expected = np.sort(box_sides(mass, [NEW_INERTIA[0], NEW_INERTIA[3], NEW_INERTIA[5]]))
    is_new = lambda m: np.allclose(box(m), expected, atol=1e-12)  # noqa: E731
    probe.spin_until(lambda: any(is_new(m) for m in markers.messages[n:]), what="the new inertia's box",
                     alive=[proc])
    first = next(i for i in range(n, len(markers)) if is_new(markers.messages[i]))
    k = len(markers)
    probe.spin_until(lambda: len(markers) >= k + 3, what="markers after the new box", alive=[proc])
    assert all(is_new(m) for m in markers.messages[first:]), "an old box came after the new one"


# ------------------------------------------------------------------------------------ no processes


def test_prefixed_urdf_renames_links_only():
    xml = (ROOT / "config" / "robots" / "arm_2link_planar.urdf").read_text()
    out = URDF.from_xml_string(mk.prefixed_urdf(xml, lambda name: "r1/" + name))
    assert {link.name for link in out.links} == {"r1/base_link", "r1/link1", "r1/link2", "r1/tool0"}
    assert {j.name for j in out.joints} == {"joint1", "joint2", "tool_joint"}
    assert [(j.parent, j.child) for j in out.joints] == [("r1/base_link", "r1/link1"), ("r1/link1", "r1/link2"),
                                                         ("r1/link2", "r1/tool0")]
    # the model built from it is the same robot under new names
    a, b = Model.from_urdf(xml), Model.from_urdf(mk.prefixed_urdf(xml, lambda name: "r1/" + name))
    q = np.array([0.3, -0.7])
    assert np.allclose(a.mass_matrix(q), b.mass_matrix(q)) and np.allclose(a.link_poses(q), b.link_poses(q))


def test_shapes_meshes_materials_and_robot_yaml_visuals():
    xml = """<robot name="r">
      <material name="blue"><color rgba="0 0 1 1"/></material>
      <link name="a">
        <visual><geometry><mesh filename="package://pkg/meshes/a.dae" scale="2 2 2"/></geometry></visual>
        <visual><origin xyz="0 0 1" rpy="0 0 0"/><geometry><sphere radius="0.5"/></geometry>
          <material name="blue"/></visual>
      </link>
      <link name="b"><inertial><mass value="6"/><inertia ixx="1" ixy="0" ixz="0" iyy="2" iyz="0" izz="3"/>
        </inertial></link>
      <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>"""
    from mbs_ros.dynamics.model.urdf import parse_urdf

    spec = parse_urdf(xml)
    inertials = {n: (l.mass, l.com, l.inertia) for n, l in spec.links.items()}
    shapes = mk.shapes_from_urdf(xml, ("a", "b"), lambda n: "x/" + n, inertials)
    by = {(s.ns, s.id): s for s in shapes}
    assert set(by) == {("x/a", 0), ("x/a", 1), ("x/b", 0)}
    mesh, sphere, box = by[("x/a", 0)], by[("x/a", 1)], by[("x/b", 0)]
    assert mesh.type == Marker.MESH_RESOURCE and mesh.mesh_resource == "package://pkg/meshes/a.dae"
    assert mesh.scale == (2.0, 2.0, 2.0)
    assert sphere.type == Marker.SPHERE and sphere.scale == (1.0, 1.0, 1.0) and sphere.color == (0, 0, 1, 1)
    assert np.allclose(sphere.T_link_shape[:3, 3], [0, 0, 1])
    # b: the uniform box of mass 6 with moments 1, 2, 3: sides sqrt(6 (I_j + I_k - I_i) / m) = 2, sqrt(2), 0
    assert box.type == Marker.CUBE and np.allclose(box.scale[:2], [2.0, np.sqrt(2.0)]) and 0 < box.scale[2] < 0.1
    maker = mk.MarkerMaker(shapes, "world", "x/a")
    poses = np.array([np.eye(4), np.eye(4)])
    poses[1, :3, 3] = [1, 2, 3]
    msgs = maker.link_markers(5, poses)
    assert [(m.ns, m.id) for m in msgs] == [(s.ns, s.id) for s in shapes]
    assert msgs[2].pose.position.x == 1.0 and msgs[1].pose.position.z == 1.0 and msgs[0].mesh_use_embedded_materials
    # robot YAML visuals arrive as URDF visuals: the surface vessel's hull box and two rods
    cfg = Model.from_yaml(ROOT / "config" / "robots" / "asv_2link.yaml")
    from mbs_ros.dynamics.model.robot_yaml import load_robot

    urdf = load_robot(str(ROOT / "config" / "robots" / "asv_2link.yaml")).urdf
    shapes = mk.shapes_from_urdf(urdf, cfg.link_names, lambda n: n)
    assert [(s.ns, s.type) for s in shapes] == [("base_link", Marker.CUBE), ("shoulder_link", Marker.CYLINDER),
                                                ("elbow_link", Marker.CYLINDER)]
    assert shapes[0].scale == (2.5, 1.2, 0.5) and np.allclose(shapes[1].T_link_shape[:3, 3], [0.5, 0, 0])


def test_quaternions_of_tf_and_markers_match_scipy():
    """cv.quaternion_from_matrix (every TF and marker orientation): scipy's quaternion with w >= 0, also next to
    half turns and the identity, for one matrix and for stacks."""
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(5)
    axes = rng.normal(size=(300, 3))
    axes /= np.linalg.norm(axes, axis=1)[:, None]
    angles = np.concatenate([rng.uniform(0, np.pi, 300), np.full(300, np.pi), np.full(300, np.pi - 1e-9),
                             np.full(300, 1e-12)])
    R = Rotation.from_rotvec(np.tile(axes, (4, 1)) * angles[:, None]).as_matrix()
    q = cv.quaternion_from_matrix(R)
    ref = Rotation.from_matrix(R).as_quat()
    ref = np.where(ref[:, 3:4] < 0, -ref, ref)
    same_sign = np.minimum(np.abs(q - ref).max(axis=1), np.abs(q + ref).max(axis=1))  # w = 0: either sign
    assert same_sign.max() < 1e-15 and np.all(q[:, 3] >= 0)
    assert np.abs(q[q[:, 3] > 1e-6] - ref[q[:, 3] > 1e-6]).max() < 1e-15
    assert np.abs(Rotation.from_quat(q).as_matrix() - R).max() < 1e-15 * 10
    assert q.shape == (1200, 4) and cv.quaternion_from_matrix(R[0]).shape == (4,)
    assert cv.quaternion_from_matrix(R.reshape(40, 30, 3, 3)).shape == (40, 30, 4)
    assert np.array_equal(cv.quaternion_from_matrix(np.eye(3)), [0.0, 0.0, 0.0, 1.0])
