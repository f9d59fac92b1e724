"""mbs_ros.dds: the Fast DDS profile our launchers set, and when they leave the user's choice alone."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mbs_ros.dds import PROFILE_VARIABLE, dds_defaults, fastdds_profile, node_environment, synchronous_publication

ROOT = Path(__file__).resolve().parents[2]
NS = {"f": "http://www.eprosima.com"}


def test_an_empty_environment_gets_the_shipped_profile(tmp_path):
    env = {}
    path = dds_defaults(env, cwd=tmp_path)
    assert path == env[PROFILE_VARIABLE] == str(ROOT / "config" / "fastdds" / "profile.xml")
    env = {"RMW_IMPLEMENTATION": "rmw_fastrtps_dynamic_cpp"}
    assert dds_defaults(env, cwd=tmp_path) == env[PROFILE_VARIABLE]


@pytest.mark.parametrize("env", [
    {PROFILE_VARIABLE: "/opt/profiles/mine.xml"},
    {"FASTRTPS_DEFAULT_PROFILES_FILE": "/opt/profiles/old.xml"},
    {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
    {"RMW_IMPLEMENTATION": "rmw_zenoh_cpp"},
])
def test_the_users_choice_of_profile_or_middleware_is_left_alone(env, tmp_path):
    before = dict(env)
    assert dds_defaults(env, cwd=tmp_path) is None
    assert env == before


def test_a_default_profile_in_the_working_directory_is_left_alone(tmp_path):
    (tmp_path / "DEFAULT_FASTDDS_PROFILES.xml").write_text("<dds/>")
    env = {}
    assert dds_defaults(env, cwd=tmp_path) is None and env == {}


def test_the_profile_is_the_default_participant_profile_and_turns_type_propagation_off():
    root = ET.parse(fastdds_profile()).getroot()
    participants = root.findall("f:profiles/f:participant", NS)
    assert [p.get("is_default_profile") for p in participants] == ["true"]
    properties = {p.findtext("f:name", namespaces=NS): p.findtext("f:value", namespaces=NS)
                  for p in participants[0].findall("f:rtps/f:propertiesPolicy/f:properties/f:property", NS)}
    assert properties == {"fastdds.type_propagation": "disabled"}



ASYNC = (("RMW_FASTRTPS_PUBLICATION_MODE", "ASYNCHRONOUS"),)


def test_a_node_gets_the_asynchronous_publication_its_spec_asks_for_unless_the_user_chose():
    """What a launcher adds for a node with thread_priority: Fast DDS's asynchronous publication, on Fast DDS
    only, never over the user's own value, and not where the publication mode comes from the XML profile."""
    for env in ({}, {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}, {"RMW_IMPLEMENTATION": "rmw_fastrtps_dynamic_cpp"},
                {"RMW_FASTRTPS_USE_QOS_FROM_XML": "0"}):
        assert node_environment(ASYNC, env) == {"RMW_FASTRTPS_PUBLICATION_MODE": "ASYNCHRONOUS"}, env
    for env in ({"RMW_FASTRTPS_PUBLICATION_MODE": "SYNCHRONOUS"}, {"RMW_FASTRTPS_PUBLICATION_MODE": ""},
                {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}, {"RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}):
        before = dict(env)
        assert node_environment(ASYNC, env) == {} and env == before, env
    assert node_environment((), {}) == {}
    assert node_environment((("OTHER", "x"),), {"RMW_IMPLEMENTATION": "rmw_zenoh_cpp"}) == {"OTHER": "x"}


def test_synchronous_publication_is_named_for_fast_dds_only():
    assert synchronous_publication("rmw_fastrtps_cpp", {"RMW_FASTRTPS_PUBLICATION_MODE": "ASYNCHRONOUS"}) is None
    assert "is not set" in synchronous_publication("rmw_fastrtps_cpp", {})
    assert "is SYNCHRONOUS" in synchronous_publication("rmw_fastrtps_dynamic_cpp",
                                                       {"RMW_FASTRTPS_PUBLICATION_MODE": "SYNCHRONOUS"})
    assert synchronous_publication("rmw_fastrtps_cpp", {"RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}) is None
    assert synchronous_publication("rmw_cyclonedds_cpp", {}) is None
