"""Our interface package mbs_ros_msgs (mbs_ros_msgs/, built by ``make setup``): EnergyPorts has the declared
fields and types, survives CDR serialization, a publisher announces it as ``mbs_ros_msgs/msg/EnergyPorts`` and a
subscriber receives it.

The expected fields are written out here, not read from the .msg file: a field renamed there must fail this test.
"""

from __future__ import annotations

import math

import pytest

rclpy = pytest.importorskip("rclpy")

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from mbs_ros_msgs.msg import EnergyPorts  # noqa: E402
from ros_helpers import Probe, Recorder, ros_env_defaults  # noqa: E402

TIMEOUT = 10.0

FIELDS = {
    "header": "std_msgs/Header",
    "environment_temperature": "double",
    "storage_names": "sequence<string>",
    "storage_energy": "sequence<double>",
    "port_names": "sequence<string>",
    "port_power": "sequence<double>",
    "dissipator_names": "sequence<string>",
    "dissipated_power": "sequence<double>",
    "total_energy": "double",
    "supplied_energy": "double",
    "dissipated_energy": "double",
    "entropy_production": "double",
    "entropy_produced": "double",
    "balance_residual": "double",
}


def energy_ports():
    """A message with every field set to a value of its own (a swapped field would show)."""
    dissipated = [0.25, 1.5]
    theta0 = 293.15
    return EnergyPorts(
        header=Header(stamp=Time(sec=12, nanosec=345_000_000), frame_id="world"),
        environment_temperature=theta0,
        storage_names=["kinetic", "gravity", "spring/joint1"],
        storage_energy=[3.0, -9.81, 0.125],
        port_names=["effort/joint1", "wrench"],
        port_power=[2.0, -0.5],
        dissipator_names=["damper/joint1", "hydrodynamic_damping/base"],
        dissipated_power=dissipated,
        total_energy=3.0 - 9.81 + 0.125,
        supplied_energy=7.0,
        dissipated_energy=4.0,
        entropy_production=sum(dissipated) / theta0,
        entropy_produced=0.0137,
        balance_residual=-1e-12,
    )


def test_fields_and_types():
    assert EnergyPorts.get_fields_and_field_types() == FIELDS
    m = EnergyPorts()
    assert m.storage_names == [] and len(m.storage_energy) == 0 and m.total_energy == 0.0


def test_serialization_round_trip():
    m = energy_ports()
    data = serialize_message(m)
    back = deserialize_message(data, EnergyPorts)
    assert back == m
    assert (back.header.stamp.sec, back.header.stamp.nanosec, back.header.frame_id) == (12, 345_000_000, "world")
    assert back.storage_names == ["kinetic", "gravity", "spring/joint1"]
    assert list(back.storage_energy) == [3.0, -9.81, 0.125]
    assert list(back.dissipated_power) == [0.25, 1.5]
    assert back.entropy_production == 1.75 / 293.15
    assert math.copysign(1.0, back.balance_residual) == -1.0


def test_publisher_announces_the_type_and_a_subscriber_receives_it():
    ros_env_defaults()
    topic = "/test_messages/energy"
    sent = energy_ports()
    with Probe("test_messages_probe", TIMEOUT) as probe:
        pub = probe.node.create_publisher(EnergyPorts, topic, 10)
        infos = probe.node.get_publishers_info_by_topic(topic)
        assert [i.topic_type for i in infos] == ["mbs_ros_msgs/msg/EnergyPorts"]
        received = Recorder(probe, EnergyPorts, topic, depth=10)

        def delivered():  # publish until the subscription, matched at some point, has one
            pub.publish(sent)
            return len(received) > 0

        probe.spin_until(delivered, what=f"an EnergyPorts message on {topic}")
        assert received.messages[0] == sent
