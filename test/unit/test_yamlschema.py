"""The one schema reader (mbs_ros.yamlschema.Reader): every reader of the package's YAML files checks through it,
and its errors name the file and the key and show values only as name-shaped text."""
from __future__ import annotations

import pytest

from mbs_ros.yamlschema import Reader, SchemaError


def test_every_yaml_reader_is_the_schema_reader():
    from mbs_ros.scenario import schema as scenario
    from mbs_ros.campaign import spec as campaign
    from mbs_ros.dynamics.model import robot_yaml
    from mbs_ros.sensors import spec as sensors

    for cls in (scenario._Checker, campaign._Reader, robot_yaml.Reader, sensors.Reader):
        assert issubclass(cls, Reader), cls
    assert issubclass(scenario.ScenarioError, SchemaError) and issubclass(campaign.CampaignError, SchemaError)
    from mbs_ros.dynamics.contact import world_file

    assert isinstance(world_file._reader("world.yaml"), Reader)


def _message(call):
    with pytest.raises(SchemaError) as e:
        call()
    return str(e.value)


def test_numbers_bounds_and_keys_name_file_and_key():
    r = Reader("f.yaml")
    assert r.number(3, "a", lo=0.0, lo_open=True, hi=3.0) == 3.0
    assert _message(lambda: r.number(0, "a", lo=0.0, lo_open=True)) == "f.yaml: a: must be > 0, got 0"
    assert _message(lambda: r.number(3.5, "a", hi=3.0)) == "f.yaml: a: must be <= 3, got 3.5"
    assert _message(lambda: r.number(float("nan"), "a")) == "f.yaml: a: must be finite, got nan"
    assert _message(lambda: r.number("a secret text", "a")) == "f.yaml: a: must be a number, got a text of 13 " \
                                                                "characters"
    assert _message(lambda: r.number(True, "a")) == "f.yaml: a: must be a number, got True"
    assert _message(lambda: r.whole(2.0, "n", 1)) == "f.yaml: n: must be a whole number, got 2.0"
    assert r.whole(2.0, "n", 1, floats=True) == 2
    assert _message(lambda: r.mapping({"duraton": 1}, "", ("duration",))) == \
        "f.yaml: duraton: unknown key (did you mean 'duration'?)"
    assert _message(lambda: r.mapping({"a b": 1}, "x", ())) == \
        "f.yaml: x: a key that is not a name (letters, digits, '_./~*+-'): a text of 3 characters"
    assert _message(lambda: r.vector([1, 2], "p", 3, "x, y, z")) == "f.yaml: p: must have 3 entries (x, y, z), got 2"
    assert _message(lambda: r.vector([1, "x"], "p")) == "f.yaml: p[1]: must be a number, got 'x'"


def test_the_expected_wording_and_a_part_of_the_file():
    r = Reader("f.yaml", wording="expected").at("sensors[0] (imu)")
    assert _message(lambda: r.number(-1, "rate", 0.0, lo_open=True)) == \
        "f.yaml: sensors[0] (imu): rate: expected a positive number, got -1"
    assert _message(lambda: r.choice("x", "kind", ("a", "b"))) == \
        "f.yaml: sensors[0] (imu): kind: expected one of a, b, got 'x'"
    assert _message(lambda: r.mapping({"b": 1}, "k", ("a",), ())) == \
        "f.yaml: sensors[0] (imu): k.b: unknown key (allowed: a)"
