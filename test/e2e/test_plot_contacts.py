"""The contact figures of mbs_ros.plot (issue 30) on an MCAP file made here with known values: a box robot
(/box: one link of 2 kg, tilted by a known roll and yaw on /tf) resting on the ground with a normal force N(t)
that jumps at landing and settles on m g, published as contacts/base_link in its own (tilted) frame, and a free
crate (contacts/crate, /tf world -> box/crate) sliding on a known path. The plotted numbers must be the recorded
ones turned to world axes by the recorded poses: the per-link curve and the sum are N(t), the weight line m g from
the URDF's mass, the crate's x-y path and height its /tf positions."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("matplotlib")

from geometry_msgs.msg import TransformStamped, WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from mbs_ros import plot  # noqa: E402
from mbs_ros.recording import BagWriter  # noqa: E402

T0 = 1_700_000_000 * 10**9
RATE, N = 100, 200
MASS, G = 2.0, 9.81
ROLL, YAW = 0.2, 0.7
BOX_URDF = """<robot name="box"><link name="base_link"><inertial><mass value="2.0"/>
  <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
  <visual><geometry><box size="0.2 0.2 0.2"/></geometry></visual></link></robot>"""


def normal(t):
    """The box's normal force: nothing until 0.3 s, an impact of 5 m g, then m g."""
    return np.where(t < 0.3, 0.0, np.where(t < 0.32, 5 * MASS * G, MASS * G))


def crate(t):
    return np.array([1.0 + 0.5 * t, -0.2 + 0.1 * t * t, 0.1 + 0.05 * math.sin(3 * t)])


def stamp_msg(header, ns):
    header.stamp.sec, header.stamp.nanosec = divmod(int(ns), 10**9)


def _tf(parent, child, ns, xyz, quat):
    tr = TransformStamped()
    tr.header.frame_id, tr.child_frame_id = parent, child
    stamp_msg(tr.header, ns)
    tr.transform.translation.x, tr.transform.translation.y, tr.transform.translation.z = xyz
    r = tr.transform.rotation
    r.x, r.y, r.z, r.w = (float(c) for c in quat)
    return tr


def _marker(ns_name, kind, scale, xyz, stamp):
    m = Marker(ns=ns_name, id=0, type=kind, action=Marker.ADD)
    m.header.frame_id = "world"
    stamp_msg(m.header, stamp)
    m.scale.x, m.scale.y, m.scale.z = (float(x) for x in scale)
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(x) for x in xyz)
    m.pose.orientation.w = 1.0
    m.color.r, m.color.g, m.color.b, m.color.a = 0.5, 0.5, 0.5, 1.0
    return m


def write(path, markers=False, n=N, position=None):
    """``n`` samples; ``position(t)``: the box's odom position (default the origin)."""
    R = Rotation.from_euler("xyz", [ROLL, 0.0, YAW])  # the box's tilt: its frame's z is not the world's
    with BagWriter(path) as w:
        w.write_message("/box/robot_description", String(data=BOX_URDF.replace('"base_link"', '"box/base_link"')),
                        T0 - 1000)
        for k in range(n):
            ns, t = T0 + k * (10**9 // RATE), k / RATE
            od = Odometry()
            stamp_msg(od.header, ns)
            od.header.frame_id, od.child_frame_id = "world", "box/base_link"
            q = R.as_quat()
            if position is not None:
                od.pose.pose.position.x, od.pose.pose.position.y, od.pose.pose.position.z = position(t)
            od.pose.pose.orientation.x, od.pose.pose.orientation.y = q[0], q[1]
            od.pose.pose.orientation.z, od.pose.pose.orientation.w = q[2], q[3]
            w.write_message("/box/odom", od, ns)
            w.write_message("/tf", TFMessage(transforms=[
                _tf("world", "box/base_link", ns, (0.0, 0.0, 0.1), q),
                _tf("world", "box/crate", ns, crate(t), (0.0, 0.0, 0.0, 1.0))]), ns)
            for topic, frame, f_world in (("/box/contacts/base_link", "box/base_link", [0.0, 0.0, normal(t)]),
                                          ("/box/contacts/crate", "box/crate", [0.0, 0.0, 9.0])):
                m = WrenchStamped()
                stamp_msg(m.header, ns)
                m.header.frame_id = frame
                f = R.inv().apply(f_world) if frame == "box/base_link" else np.array(f_world)
                m.wrench.force.x, m.wrench.force.y, m.wrench.force.z = (float(x) for x in f)
                w.write_message(topic, m, ns)
            if markers and k % 10 == 0:  # world/markers at 10 Hz: the ground (20 m square) and the crate
                w.write_message("/box/world/markers", MarkerArray(markers=[
                    _marker("ground", Marker.CUBE, (20.0, 20.0, 0.002), (0.0, 0.0, -0.001), ns),
                    _marker("crate", Marker.CUBE, (0.2, 0.2, 0.2), crate(t), ns)]), ns)
    return path


def test_contact_forces_and_object_paths_are_the_recorded_ones(tmp_path):
    path = write(tmp_path / "contact.mcap")
    rec = plot.load(path, progress="never")
    figures = {}
    written = plot.plot_recording(rec, tmp_path / "out", figures=figures)
    names = {p.name for p in written}
    assert {"box_contacts.png", "objects.png"} <= names
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    t = np.arange(N) / RATE
    per_link, total = figures["box_contacts.png"].axes
    [link] = per_link.get_lines()  # the crate is an object: not one of the robot's links
    assert link.get_label() == "base_link"
    assert np.allclose(link.get_xdata(), t, rtol=0.0, atol=1e-12)
    assert np.allclose(link.get_ydata(), normal(t), atol=1e-9)
    sum_line, weight = total.get_lines()
    assert np.allclose(sum_line.get_ydata(), normal(t), atol=1e-9)
    assert np.allclose(weight.get_ydata(), MASS * G)
    xy, height = figures["objects.png"].axes
    path_line = xy.get_lines()[0]
    expected = np.array([crate(x) for x in t])
    assert path_line.get_label() == "box/crate"
    assert np.allclose(path_line.get_xdata(), expected[:, 0]) and np.allclose(path_line.get_ydata(), expected[:, 1])
    [z] = height.get_lines()
    assert np.allclose(z.get_xdata(), t) and np.allclose(z.get_ydata(), expected[:, 2])


def test_the_solo12_stand_figures_tool_reads_the_landing_stance_and_push(tmp_path):
    """tools/solo12_stand_figures on the box's file run to 3 s: the first contact at 0.3 s, the landing peak 5 m g,
    the stance (1-2 s) exactly m g (the crate, a free object, not summed), and the base's odom height dipping
    3 mm after the push time (2 s) and back, its y drifting 4 mm."""
    figures = pytest.importorskip("tools.solo12_stand_figures")

    def position(t):
        dip = 0.003 * math.sin(math.pi * (t - 2.0)) if 2.0 <= t < 3.0 else 0.0
        return 0.0, 0.004 * min(max(t - 2.0, 0.0), 1.0), 0.25 - dip

    path = write(tmp_path / "stand.mcap", n=300, position=position)
    f = figures.figures(path, "/box")
    weight = MASS * G
    assert f["m_g"] == pytest.approx(weight, rel=1e-12)
    assert f["first_contact_s"] == pytest.approx(0.3, abs=1e-9)
    assert f["landing_peak_N"] == pytest.approx(5 * weight, rel=1e-9) and f["landing_peak_mg"] == pytest.approx(5.0)
    assert f["stance_sum_N"] == pytest.approx(weight, rel=1e-9) and abs(f["stance_relative"]) < 1e-9
    assert f["base_height_before_m"] == pytest.approx(0.25, abs=1e-12)
    assert f["base_height_max_dev_after_m"] == pytest.approx(0.003, rel=1e-3)
    assert abs(f["base_height_end_dev_m"]) < 1e-4  # 2.99 s: sin(0.99 pi) x 3 mm
    assert f["base_y_drift_m"] == pytest.approx(0.004 * 0.99, rel=1e-9) == f["base_y_end_m"]
    assert figures.main([str(path), "--ns", "/box"]) == 0
    assert figures.main([str(tmp_path / "missing.mcap")]) == 2


def test_the_animation_draws_the_world_and_moves_the_objects(tmp_path):
    from mbs_ros.animate import animate
    from mbs_ros.animate.world import world_poses, world_shapes

    path = write(tmp_path / "world.mcap", markers=True)
    rec = plot.load(path, progress="never")
    shapes = world_shapes(rec)
    assert [(w.name, w.kind, w.moves) for w in shapes] == [("ground#0", "box", False), ("crate#0", "box", True)]
    crate_shape = shapes[1]
    t = np.arange(0, N, 10) / RATE
    assert np.allclose(crate_shape.T[:, :3, 3], [crate(x) for x in t])
    # posed at the newest marker at or before each time; the plane cut to the robots' extent around them
    times = T0 + np.array([0, 5, 10, 195]) * (10**9 // RATE)
    poses, drawn = world_poses(shapes, times, T0, (np.array([0.5, 0.5, 0.1]), 1.0))
    assert np.allclose(poses.T[:, 1, :3, 3], [crate(0.0), crate(0.0), crate(0.1), crate(1.9)])
    ground_pts = drawn[0][1][:3, 3] + drawn[0][2]
    assert np.allclose(ground_pts[:, :2].min(axis=0), [-0.5, -0.5]) and np.allclose(ground_pts[:, :2].max(axis=0),
                                                                                     [1.5, 1.5])
    notes = []
    result = animate(rec, tmp_path / "world.gif", fps=10.0, notes=notes)
    assert result.frames == 20 and "world" in result.drawn_as
    assert any(n.startswith("world: 2 shapes") for n in notes)
    # the same run without world/markers: below the header lines, the pictures differ by the ground and the crate
    bare = animate(plot.load(write(tmp_path / "bare.mcap"), progress="never"), tmp_path / "bare.gif", fps=10.0,
                   notes=[])
    from PIL import Image

    def last_frame(path):
        with Image.open(path) as im:
            im.seek(19)
            return np.asarray(im.convert("RGB"))[40:].astype(int)
    assert (np.abs(last_frame(result.path) - last_frame(bare.path)).sum(axis=2) > 0).sum() > 2000
