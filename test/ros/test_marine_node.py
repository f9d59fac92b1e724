"""The dynamics node with a vehicle in water (issue 11): the energy topic, thruster commands (and their rejection),
the thrust topic's first-order lag and the current set at run time. Real node processes, real topics."""
from __future__ import annotations

import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
pytest.importorskip("mbs_ros_msgs.msg", reason="mbs_ros_msgs not built into this environment yet (make setup)")

from mbs_ros_msgs.msg import EnergyPorts  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from mbs_ros.controllers.allocation import ThrusterAllocation  # noqa: E402
from mbs_ros.dynamics import Model  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults, running  # noqa: E402

TIMEOUT = 120.0  # per wait (a deadline, not a wait): parallel test workers on two busy cores
MODEL = "config/robots/bluerov2_heavy.yaml"
PARAMS = dict(model_file=MODEL, physics_rate=500.0, publish_rate=50.0, energy_rate=50.0, diagnostics_rate=5.0,
              initial_position=[0.0, 0.0, -5.0], cmd_timeout=0.0)


@pytest.fixture(scope="module")
def rov(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("marine_logs")
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace="rov", parameters=PARAMS,
                       log_file=logs / "rov.log")
    with running({"rov": proc}):
        with Probe("test_marine_probe", TIMEOUT) as probe:
            yield proc, probe


def test_energy_topic_thrusters_and_current(rov):
    proc, probe = rov
    model = Model.from_yaml(MODEL)
    energy = Recorder(probe, EnergyPorts, "/rov/energy")
    thrust = Recorder(probe, JointState, "/rov/thrust")
    odom = Recorder(probe, Odometry, "/rov/odom")
    pub = probe.node.create_publisher(Float64MultiArray, "/rov/cmd_thrust", 10)
    named = probe.node.create_publisher(JointState, "/rov/thruster_command", 10)
    probe.spin_until(lambda: len(energy) > 2 and len(thrust) > 0 and len(odom) > 0 and pub.get_subscription_count()
                     and named.get_subscription_count(), what="the ROV's topics", alive=[proc])
    m = energy.messages[-1]
    assert set(m.storage_names) >= {"kinetic", "gravity", "buoyancy"}
    assert [f"thruster/{n}" for n in model.thruster_names] == [n for n in m.port_names if n.startswith("thruster/")]
    assert "hydrodynamic_damping/base_link" in m.dissipator_names
    assert m.environment_temperature == pytest.approx(288.15)
    assert list(thrust.messages[-1].name) == list(model.thruster_names)

    # a thrust command for 60 N up (beyond what the vertical thrusters give: saturated, counted, warned)
    lo, hi = model.thrust_limits
    u = ThrusterAllocation(model.thruster_matrix, -np.inf, np.inf)(np.array([0, 0, 300.0, 0, 0, 0])).thrust
    pub.publish(Float64MultiArray(data=[float(x) for x in u]))
    clipped = np.clip(u, lo, hi)
    # the lag is integrated exactly and snaps to the command within a nanonewton per newton (a few seconds)
    probe.spin_until(lambda: np.array_equal(np.array(thrust.messages[-1].effort), clipped),
                     what="the thrust to settle at the clipped command (first-order lag)", alive=[proc], timeout=60)
    efforts = [np.array(msg.effort) for msg in thrust.messages]
    k = next(i for i, e in enumerate(efforts) if np.any(e))
    assert np.all(np.abs(efforts[k]) < np.abs(clipped) + 1e-9)  # it rose, it did not jump
    assert proc.wait_for_log("thrust command saturated", timeout=TIMEOUT)
    probe.spin_until(lambda: odom.messages[-1].twist.twist.linear.z > 0.05, what="the vehicle to rise",
                     alive=[proc], timeout=60)
    n = len(energy)
    probe.spin_until(lambda: len(energy) > n + 5, what="energy messages", alive=[proc])
    m = energy.messages[-1]
    ports = dict(zip(m.port_names, m.port_power))
    assert sum(p for name, p in ports.items() if name.startswith("thruster/")) > 0.5  # the thrusters push it up
    flows = m.supplied_energy + m.dissipated_energy
    assert flows > 1.0 and abs(m.balance_residual) < 1e-5 * flows + 1e-6, (m.balance_residual, flows)
    assert m.entropy_production >= 0 and m.entropy_produced > 0

    # malformed commands are rejected with a reason and leave the applied thrust alone
    before = np.array(thrust.messages[-1].effort)
    pub.publish(Float64MultiArray(data=[1.0, 2.0]))
    assert proc.wait_for_log("cmd_thrust rejected: 2 values, expected 8", timeout=TIMEOUT)
    pub.publish(Float64MultiArray(data=[math.nan] * 8))
    assert proc.wait_for_log("non-finite", timeout=TIMEOUT)
    named.publish(JointState(name=["t1", "t99"], effort=[1.0, 2.0]))
    assert proc.wait_for_log("thruster_command rejected", timeout=TIMEOUT)
    n = len(thrust)
    probe.spin_until(lambda: len(thrust) > n + 3, what="thrust after bad commands", alive=[proc])
    np.testing.assert_allclose(np.array(thrust.messages[-1].effort), before)

    # the current, set at run time: refused when not finite, then the current port works
    service = "/rov/dynamics_node/set_parameters"

    def set_param(name, value):
        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return probe.call(SetParameters, service, req).results[0]

    r = set_param("current", [0.0, math.nan, 0.0])
    assert not r.successful and "current" in r.reason
    assert set_param("current", [0.5, 0.0, 0.0]).successful
    n = len(energy)
    probe.spin_until(lambda: len(energy) > n + 5, what="energy after the current", alive=[proc])
    m = energy.messages[-1]
    ports = dict(zip(m.port_names, m.port_power))
    assert abs(ports["current"]) > 0.1, (ports, list(m.dissipator_names), list(m.dissipated_power), m.header.stamp)
    flows = m.supplied_energy + m.dissipated_energy
    assert abs(m.balance_residual) < 1e-5 * flows + 1e-6, (m.balance_residual, flows)
    assert proc.running
