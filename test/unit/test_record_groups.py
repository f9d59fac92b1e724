"""The record groups of a scenario's ``record:`` list (mbs_ros.bringup.record_groups): ``contacts/*`` becomes the
robot's contact topics (one per link with a collision shape, read here from the URDF's <collision> elements,
and the two marker arrays), ``sensors/*`` its sensors' topics (named here from the sensors file), nothing for a
robot without them; other names stay as they are, in order."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from mbs_ros.bringup.record_groups import expand_record
from mbs_ros.packages import resolve_uri
from mbs_ros.scenario.schema import load_scenario, package_root, record_topics

SOLO12 = "package://example-robot-data/robots/solo_description/robots/solo12.urdf"


@pytest.mark.skipif(resolve_uri(SOLO12).path is None, reason="example-robot-data is not installed")
def test_contacts_and_sensors_expand_per_robot():
    scenario = load_scenario("solo12_stand", overrides={"robots[0].sensors": "config/sensors/solo12.yaml"})
    topics = expand_record(scenario, record_topics(scenario))
    urdf = ET.parse(resolve_uri(SOLO12).path).getroot()
    links = [link.get("name") for link in urdf.iter("link") if link.find("collision") is not None]
    assert len(links) == 17
    expected_contacts = {"/solo/contacts/markers", "/solo/world/markers"} | {f"/solo/contacts/{n}" for n in links}
    doc = yaml.safe_load((package_root() / "config/sensors/solo12.yaml").read_text())
    expected_sensors = {f"/solo/sensors/{s['name']}" for s in doc["sensors"]} | {
        f"/solo/sensors/{s['name']}/contact" for s in doc["sensors"] if s["type"] == "foot_contact"}
    assert not any("*" in t for t in topics) and len(topics) == len(set(topics))
    assert expected_contacts | expected_sensors <= set(topics)
    assert {t for t in topics if "/contacts/" in t or "/world/" in t} == expected_contacts
    assert {t for t in topics if "/sensors/" in t} == expected_sensors
    assert topics[:3] == ["/solo/odom", "/solo/joint_states", "/solo/joint_reference"] and topics[-1] == "/clock"


def test_a_robot_without_world_or_sensors_records_no_group():
    scenario = load_scenario("rov_alpha5", overrides={"record": ["odom", "contacts/*", "sensors/*", "/tf"]})
    assert expand_record(scenario, record_topics(scenario)) == ["/rov/odom", "/tf", "/clock"]
    assert expand_record(scenario, None) is None


@pytest.mark.skipif(resolve_uri(SOLO12).path is None, reason="example-robot-data is not installed")
def test_the_foxglove_layout_plots_the_feet_and_the_bridge_serves_their_topics():
    import json
    import re

    from mbs_ros.bringup import foxglove_layout
    from mbs_ros.bringup.foxglove_bridge import foxglove_topics

    scenario = load_scenario("solo12_stand", overrides={"robots[0].sensors": "config/sensors/solo12.yaml"})
    d = json.loads(foxglove_layout.layout_text(scenario))
    paths = [p["value"] for p in d["configById"]["Plot!sensors"]["paths"]]
    feet = [f"/solo/sensors/{n}.wrench.force.z" for n in ("fl_foot", "fr_foot", "hl_foot", "hr_foot")]
    assert paths == feet + ["/solo/sensors/imu.linear_acceleration.z"]  # declaration order: the feet, the IMU
    served = set(foxglove_topics(scenario))
    assert {re.match(r"^(/[^.]+)\.", p).group(1) for p in paths} <= served
    assert {f"/solo/sensors/{n}/contact" for n in ("fl_foot", "fr_foot", "hl_foot", "hr_foot")} <= served
