"""The energy topic of a real dynamics node on a robot with joint springs, against closed forms.

Two joints on a fixed base, each child's centre of mass on its joint (so nothing couples them and gravity is off):
j1 revolute about z (I_zz 0.02 kg m², spring k₁ 2 N m/rad about 0.1 rad, damper 0.005 N m s/rad), j2 prismatic
along x (0.5 kg, spring k₂ 20 N/m about −0.05 m). Started at rest at (0.6 rad, 0.15 m) with no command, the
system holds E₀ = ½k₁·0.5² + ½k₂·0.2² = 0.65 J. Each energy message is checked against the joint_states message
of the same stamp: ``spring/j1`` = ½k₁(θ₁ − 0.1)², ``spring/j2`` = ½k₂(x₂ + 0.05)², ``kinetic`` = ½·0.02·θ̇₁² +
½·0.5·ẋ₂², and over the swing ``total_energy`` + ``dissipated_energy`` = E₀ with a balance residual near zero.
"""
from __future__ import annotations

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("mbs_ros_msgs.msg", reason="mbs_ros_msgs not built into this environment yet (make setup)")

from mbs_ros_msgs.msg import EnergyPorts  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running, stamp_of  # noqa: E402
from urdf_text import BOX, link, robot  # noqa: E402

TIMEOUT = 120.0  # generous: two shared cores
K1, REST1, DAMPING1, IZZ1 = 2.0, 0.1, 0.005, 0.02
K2, REST2, MASS2 = 20.0, -0.05, 0.5
Q0 = (0.6, 0.15)
E0 = 0.5 * K1 * (Q0[0] - REST1) ** 2 + 0.5 * K2 * (Q0[1] - REST2) ** 2  # 0.65 J
URDF = robot(
    link("base", 1.0), link("a", 1.0), link("b", MASS2),
    '<joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>'
    '<limit lower="-3" upper="3" effort="10" velocity="50"/>'
    f'<dynamics damping="{DAMPING1!r}" spring_stiffness="{K1!r}" spring_reference="{REST1!r}"/></joint>',
    '<joint name="j2" type="prismatic"><parent link="base"/><child link="b"/><axis xyz="1 0 0"/>'
    '<limit lower="-1" upper="1" effort="10" velocity="50"/>'
    f'<dynamics spring_stiffness="{K2!r}" spring_reference="{REST2!r}"/></joint>', name="springs")
assert f'izz="{IZZ1}"' in BOX


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    ros_env_defaults()
    tmp = tmp_path_factory.mktemp("spring_energy")
    path = tmp / "springs.urdf"
    path.write_text(URDF)
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace="springs",
                       parameters=dict(model_file=str(path), physics_rate=1000.0, publish_rate=50.0, energy_rate=50.0,
                                       gravity=[0.0, 0.0, 0.0], initial_joint_positions=list(Q0)),
                       log_file=tmp / "springs.log")
    with running([proc]):
        with Probe("test_spring_energy_probe", TIMEOUT) as probe:
            yield proc, probe


def test_energy_topic_with_springs_matches_the_closed_forms(node):
    proc, probe = node
    energy = Recorder(probe, EnergyPorts, "/springs/energy")
    joints = Recorder(probe, JointState, "/springs/joint_states")
    # 2 s of simulated time: three swings of j1 (10 rad/s), two of j2 (6.3 rad/s)
    probe.spin_until(lambda: energy.messages and stamp_of(energy.messages[-1]) - stamp_of(energy.messages[0]) > 2e9
                     and len(joints) > 0, what="2 s of energy messages", alive=[proc])
    probe.spin_for(0.2)  # the joint states of the last stamps
    states = {stamp_of(m): m for m in joints.messages}
    pairs = [(e, states[stamp_of(e)]) for e in energy.messages if stamp_of(e) in states]
    assert len(pairs) >= 20, f"only {len(pairs)} energy messages share a stamp with a joint state"
    kinetic_seen = 0.0
    for e, js in pairs:
        assert list(js.name) == ["j1", "j2"]
        (th1, x2), (w1, v2) = js.position, js.velocity
        storages = dict(zip(e.storage_names, e.storage_energy))
        assert set(storages) == {"kinetic", "gravity", "spring/j1", "spring/j2"}, storages
        assert storages["spring/j1"] == pytest.approx(0.5 * K1 * (th1 - REST1) ** 2, rel=1e-9, abs=1e-15)
        assert storages["spring/j2"] == pytest.approx(0.5 * K2 * (x2 - REST2) ** 2, rel=1e-9, abs=1e-15)
        assert storages["kinetic"] == pytest.approx(0.5 * IZZ1 * w1 ** 2 + 0.5 * MASS2 * v2 ** 2, rel=1e-9,
                                                    abs=1e-15)
        assert storages["gravity"] == 0.0
        assert e.total_energy == pytest.approx(sum(storages.values()), rel=1e-12)
        # what the damper took plus what is stored is the start's energy (RK4 at 1 kHz: well within 1e-6)
        assert e.total_energy + e.dissipated_energy == pytest.approx(E0, rel=1e-6)
        assert abs(e.balance_residual) < 1e-6 * E0, e.balance_residual
        # no command: the passive loads' work (the damper's, −dissipated) plus what the dissipators took is nil
        assert abs(e.supplied_energy) < 1e-6 * E0, e.supplied_energy
        kinetic_seen = max(kinetic_seen, storages["kinetic"])
    assert kinetic_seen > 0.2 * E0  # it swings: the storages do trade
    drift = max(abs(e.total_energy + e.dissipated_energy - E0) for e, _js in pairs) / E0
    residual = max(abs(e.balance_residual) for e, _js in pairs)
    print(f"\nsprings over ROS: {len(pairs)} energy messages; |E + dissipated - E0| / E0 <= {drift:.2g}, "
          f"|balance residual| <= {residual:.2g} J, kinetic up to {kinetic_seen / E0:.2f} E0")
    last = pairs[-1][0]
    ports = dict(zip(last.dissipator_names, last.dissipated_power))
    # the joint limits' port is there (on by default) and idle: the swing stays inside the URDF limits
    assert set(ports) == {"damper/j1", "contact"} and ports["contact"] == 0.0 and last.dissipated_energy > 0.0
    proc.check_running()
