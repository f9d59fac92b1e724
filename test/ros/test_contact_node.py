"""A real dynamics node with a contact world: the puck of test/contact_fixtures.py (one link, a 2 kg box with its
<collision> box, on SE(3)), its robot YAML's ``world:`` a ground at z = 0, dropped from 0.2 m above it with lockstep
off. /diagnostics carries the contact steps and the contacts once it has landed, and the energy topic a "contact"
dissipator that never supplies (power ≥ 0) and dissipates while it lands and rests. Every wait is for a message
whose stamp (simulation time) reaches a condition, with a generous deadline; no wall-clock assertion.
"""
from __future__ import annotations

import os

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("mbs_ros_msgs.msg", reason="mbs_ros_msgs not built into this environment yet (make setup)")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from mbs_ros_msgs.msg import EnergyPorts  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402

from contact_fixtures import G, PUCK_SIZE, write_puck  # noqa: E402
from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running, stamp_of  # noqa: E402

TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
NS = "contact"
DROP = 0.2
T_LAND = (2 * DROP / G) ** 0.5  # 0.202 s of simulation time
REST = PUCK_SIZE[2] / 2


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    ros_env_defaults()
    tmp = tmp_path_factory.mktemp("contact_node")
    path = write_puck(tmp)
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace=NS,
                       parameters=dict(model_file=str(path), physics_rate=1000.0, publish_rate=50.0,
                                       diagnostics_rate=10.0, energy_rate=20.0, lockstep=False,
                                       initial_position=[0.0, 0.0, REST + DROP]),
                       log_file=tmp / "contact.log")
    with running([proc]):
        with Probe("test_contact_node_probe", TIMEOUT) as probe:
            yield proc, probe


def test_diagnostics_and_energy_carry_the_contact(node):
    proc, probe = node
    diags = []  # (stamp ns, values) of the node's status

    def on_diag(m):
        diags.extend((cv.ns_from_time(m.header.stamp), cv.values_from_status(s)) for s in m.status
                     if s.name == f"/{NS}/dynamics_node: multibody")

    probe.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)
    energy = Recorder(probe, EnergyPorts, f"/{NS}/energy")
    odom = Recorder(probe, Odometry, f"/{NS}/odom")
    # simulation time: the node's step count (h = 1 ms) on /diagnostics; the stamps (the node's clock, started at
    # its start-up time) are placed by t0 = stamp - steps h of a status
    landed_steps = int(round((T_LAND + 0.3) * 1000))  # well after the landing, resting
    probe.spin_until(lambda: any(d["steps"] >= landed_steps for _, d in diags),
                     what="/diagnostics 0.3 s (simulation time) after the landing", alive=[proc])
    stamp, d = next((stamp, d) for stamp, d in diags if d["steps"] >= landed_steps)
    t0 = stamp - int(d["steps"]) * 1_000_000
    landed_ns = t0 + landed_steps * 1_000_000
    probe.spin_until(lambda: energy.messages and stamp_of(energy.messages[-1]) >= landed_ns
                     and odom.messages and stamp_of(odom.messages[-1]) >= landed_ns,
                     what="energy and odom 0.3 s (simulation time) after the landing", alive=[proc])
    # /diagnostics: the contact's counts once it rests, none before it lands
    assert d["fault"] == "" and d["contact_steps"] > 0 and d["contacts"] >= 3, d
    assert d["contact_work"] < 0.0 and d["contact_unconverged"] == 0
    # every contact step runs inside a callback the node times (the stepping timer's among them, named "step
    # timer"): the most CPU time one callback took is at least the most one contact step took (thread CPU time
    # both; the landing's step was once left out of longest_callback_cpu_ms, the stepping timer not timed)
    assert d["longest_callback_cpu_ms"] >= d["contact_step_longest_ms"] > 0.0, d
    # on Linux, the share of the wall clock the node waited for a core (since the start and per report) is a share
    if os.path.exists("/proc/self/schedstat"):
        shares = [b[k] for _, b in diags for k in ("scheduler_wait_share", "scheduler_wait_share_recent")]
        assert len(shares) == 2 * len(diags) and all(0.0 <= x <= 1.0 for x in shares), shares
    before = [b for _, b in diags if b["steps"] < (T_LAND - 0.05) * 1000]
    assert all(b["contact_steps"] == 0 and b["contacts"] == 0 for b in before), before
    # the energy topic: a "contact" dissipator in every message (the world is there from the start), never supplying
    powers = []
    for m in energy.messages:
        ports = dict(zip(m.dissipator_names, m.dissipated_power))
        assert "contact" in ports, m.dissipator_names
        assert ports["contact"] >= 0.0, (stamp_of(m), ports["contact"])
        powers.append((stamp_of(m), ports["contact"]))
    assert powers  # at rest the contact step changes no energy: 0 W, the fall's 3.9 J taken at the landing
    last = energy.messages[-1]
    assert last.dissipated_energy > 0.9 * 2.0 * G * DROP  # the 3.9 J of the fall
    # odom: it rests on its collision box
    p = odom.messages[-1].pose.pose.position
    assert p.z == pytest.approx(REST, abs=1e-6)
    proc.check_running()


def test_the_contact_topics_carry_the_resting_puck(node):
    """contacts/base_link (WrenchStamped, the link's frame) reads the puck's weight m g along z with no torque about
    its centre once it rests; contacts/markers holds its four bottom corners on the ground and their forces."""
    from geometry_msgs.msg import WrenchStamped
    from visualization_msgs.msg import MarkerArray

    proc, probe = node
    wrench = Recorder(probe, WrenchStamped, f"/{NS}/contacts/base_link")
    markers = Recorder(probe, MarkerArray, f"/{NS}/contacts/markers")
    world = Recorder(probe, MarkerArray, f"/{NS}/world/markers")
    weight = 2.0 * G  # PUCK_MASS

    def resting():
        return [m for m in wrench.messages if abs(m.wrench.force.z - weight) < 1e-6 * weight]

    probe.spin_until(lambda: resting() and markers.messages and world.messages,
                     what="a contacts/base_link message of the resting puck", alive=[proc])
    m = resting()[-1]
    assert m.header.frame_id == f"{NS}/base_link"
    f, t = m.wrench.force, m.wrench.torque
    assert max(abs(f.x), abs(f.y), abs(t.x), abs(t.y), abs(t.z)) < 1e-6
    probe.spin_until(lambda: any(stamp_of(a.markers[0]) >= stamp_of(m) for a in markers.messages if a.markers),
                     what="contacts/markers at the resting stamp", alive=[proc])
    last = markers.messages[-1]
    (dots,) = [d for d in last.markers if d.ns == "contacts"]
    assert len(dots.points) == 4 and all(abs(p.z) < 1e-9 for p in dots.points)
    assert sorted((round(p.x, 6), round(p.y, 6)) for p in dots.points) == \
        [(-0.1, -0.1), (-0.1, 0.1), (0.1, -0.1), (0.1, 0.1)]
    (lines,) = [d for d in last.markers if d.ns == "contact_forces"]  # a segment from each point
    assert len(lines.points) == 8 and [(p.x, p.y, p.z) for p in lines.points[0::2]] == \
        [(p.x, p.y, p.z) for p in dots.points]
    assert [g.ns for g in world.messages[-1].markers] == ["ground"]
    proc.check_running()
