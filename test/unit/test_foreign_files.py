"""Files that are not what they should be: a foreign file (a password file, a secret) given where a parameter,
scenario, robot or URDF file belongs, and YAML built to exhaust the reader.

- no error quotes a foreign file's content: files shaped like /etc/passwd and /etc/shadow lines, a non-name key,
  a tag or an alias carrying a secret token, read as a parameter file, a scenario (directly and as a robot's
  ``params``), a robot YAML file and as URDF names (also through xacro's ``load_yaml``); each is refused by its
  place (file, line or key) alone;
- the names of a model (robot, links, joints) are checked like ROS names: a joint named by a file's content no
  longer loads;
- YAML bounds: an alias bomb, nesting deeper than the bound and a file larger than the bound are each one
  :class:`YamlFileError` with the place, before the document is built (no RecursionError).

No processes here: the nodes and the bringup runner with such files are in test/ros/test_params_file.py.
"""

from __future__ import annotations

import pytest

from mbs_ros import yamlfile
from mbs_ros.bringup import ScenarioError, load_scenario
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.robot_yaml import RobotConfigError, load_robot
from mbs_ros.dynamics.model.urdf import ModelError, parse_urdf
from mbs_ros.cores.paramsfile import YamlFileError, read_params_file
from mbs_ros.yamlfile import read_yaml
from urdf_text import joint, link, robot

SECRET = "s3cr3tT0ken"  # never in any message
# name -> text of a foreign file, each carrying SECRET where a careless message would quote it
FOREIGN = {
    "passwd": f"{SECRET}:x:0:0:root:root:bash\nu:x:1000:1000:{SECRET} user:home:bash\n",
    "shadow": f"root:$6$salt${SECRET}hash:20228:0:99999:7:::\n",
    "key_with_spaces": f"the {SECRET} is: here\n",
    "tagged": f"!{SECRET}x:y value\n",
    "alias": f"a: *{SECRET}$hash\n",
    "flow_text": f"[{SECRET} and more text, 1]\n",
    "section_value": f"/**:\n  ros__parameters: [{SECRET} text, 2]\n",
    "param_value_list": f"/**:\n  ros__parameters:\n    kp: [{SECRET} one, {{a: 1}}]\n",
}


def _write(tmp_path, name, text, suffix=".yaml"):
    path = tmp_path / f"{name}{suffix}"
    path.write_text(text)
    return path


def _refusal(call):
    with pytest.raises((YamlFileError, ScenarioError, RobotConfigError, ModelError, ms.ParameterError)) as e:
        call()
    return str(e.value)


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_a_foreign_file_is_refused_without_its_content(tmp_path, name):
    path = _write(tmp_path, name, FOREIGN[name])
    scenario = _write(tmp_path, "scenario", f"robots:\n  - {{namespace: r, params: {path}}}\n")
    for what, call in (("params file", lambda: read_params_file(path)),
                       ("scenario", lambda: load_scenario(path)),
                       ("a robot's params", lambda: load_scenario(scenario)),
                       ("robot YAML", lambda: load_robot(path)),
                       ("model_file", lambda: ms.load_source("", str(path)))):
        text = _refusal(call)
        assert SECRET not in text, (what, text)
        assert str(path) in text and "\n" not in text, (what, text)


def test_scenario_values_and_keys_are_shown_only_when_name_shaped(tmp_path):
    path = _write(tmp_path, "s", f"robots:\n  - namespace: '{SECRET} x'\n    model: config/robots/asv_2link.yaml\n")
    text = _refusal(lambda: load_scenario(path))
    assert SECRET not in text and "robots[0].namespace" in text and "a text of 14 characters" in text, text
    path = _write(tmp_path, "k", f"robots:\n  - {{namespace: asv, model: config/robots/asv_2link.yaml}}\n"
                                 f"'{SECRET}: x': 1\n")
    text = _refusal(lambda: load_scenario(path))
    assert SECRET not in text and "a key that is not a name" in text, text
    # a name-shaped typo is still named, with the guess
    path = _write(tmp_path, "t", "robots:\n  - {namespace: asv, model: config/robots/asv_2link.yaml}\nduraton: 1\n")
    assert "duraton: unknown key (did you mean 'duration'?)" in _refusal(lambda: load_scenario(path))


LINE = f"root:x:0:0:root:root:bash {SECRET}:x:1000:1000::home:bash"


@pytest.mark.parametrize("where", ["link", "joint", "child", "robot"])
def test_model_names_are_checked_before_any_message_quotes_them(where):
    bad = LINE
    parts = [link("base", 1.0), link("arm" if where != "link" else bad, 1.0),
             joint("j" if where != "joint" else bad, "base", "arm" if where not in ("link", "child") else bad)]
    text = _refusal(lambda: parse_urdf(robot(*parts, name=bad if where == "robot" else "r")))
    assert SECRET not in text and "not a name (" in text, text
    assert {"link": "<link> number 2", "joint": "<joint> number 1", "child": "<joint> number 1: <child link>",
            "robot": "<robot name>"}[where] in text, text


def test_a_name_from_xacro_load_yaml_is_refused(tmp_path):
    """What a hostile xacro does: a joint (or link) named by the content of another file."""
    secret = _write(tmp_path, "secret", FOREIGN["passwd"], suffix=".txt")
    for role in ("joint", "link"):
        name = f"${{xacro.load_yaml('{secret}')}}"
        parts = [link("base", 1.0), link(name if role == "link" else "arm", 1.0),
                 joint(name if role == "joint" else "j", "base", name if role == "link" else "arm")]
        xacro = _write(tmp_path, f"r_{role}", robot(*parts).replace(
            "<robot ", '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" '), suffix=".urdf.xacro")
        text = _refusal(lambda: ms.load_source("", str(xacro)))
        assert SECRET not in text and "not a name (" in text and str(xacro) in text, text


def test_robot_yaml_names_are_checked(tmp_path):
    inertia = "inertia: [0.01, 0.0, 0.0, 0.01, 0.0, 0.01]"
    path = _write(tmp_path, "r", f"robot:\n  links:\n    - {{name: base, mass: 1.0, {inertia}}}\n"
                                 f"    - {{name: '{LINE}', mass: 1.0, {inertia}}}\n  joints: []\n")
    text = _refusal(lambda: load_robot(path))
    assert SECRET not in text and "robot.links[1].name: not a name (" in text, text


def test_shipped_names_are_names():
    """Every robot shipped loads: its names pass the check (a check too strict would refuse them)."""
    from pathlib import Path

    robots = sorted((Path(__file__).resolve().parents[2] / "config" / "robots").glob("*.yaml"))
    assert robots
    for path in robots:
        assert ms.load_source("", str(path)).joints is not None, path


# ------------------------------------------------------------------------------------------ YAML bounds


def _alias_bomb(levels: int, width: int = 10) -> str:
    lines = ["description:", "  a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\nrobots: []\n"


def test_an_alias_bomb_is_refused_at_its_place(tmp_path):
    # 10^7 nodes expanded: small enough to build (aliases share their nodes) when unbounded, ten times the bound
    path = _write(tmp_path, "bomb", _alias_bomb(7))
    with pytest.raises(YamlFileError) as e:
        read_yaml(path)
    assert e.value.line == 7 and "aliases expanded" in e.value.reason, str(e.value)  # a5: 1.1e6 nodes
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert str(e.value).startswith(f"{path}:7:") and "aliases expanded" in str(e.value), str(e.value)
    # below the bound: read (10^5 nodes)
    assert len(read_yaml(_write(tmp_path, "small", _alias_bomb(5)))["description"]) == 5


def test_deep_nesting_is_one_error_not_a_recursion_error(tmp_path):
    path = _write(tmp_path, "deep", "description: " + "[" * 100_000 + "\n")
    with pytest.raises(YamlFileError) as e:
        read_yaml(path)
    assert (e.value.line, e.value.column) == (1, 14 + yamlfile.MAX_DEPTH - 1), str(e.value)
    assert f"nested deeper than {yamlfile.MAX_DEPTH} levels" in e.value.reason
    ok = "a: " + "[" * (yamlfile.MAX_DEPTH - 2) + "1" + "]" * (yamlfile.MAX_DEPTH - 2) + "\n"
    assert read_yaml(_write(tmp_path, "ok", ok)) is not None


def test_a_file_larger_than_the_bound_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(yamlfile, "MAX_BYTES", 1000)
    path = _write(tmp_path, "big", "a: [" + "1, " * 400 + "1]\n")
    with pytest.raises(YamlFileError, match="larger than"):
        read_params_file(path)
    assert read_yaml(_write(tmp_path, "fits", "a: [" + "1, " * 300 + "1]\n"))["a"][0] == 1


def test_yaml_messages_quote_only_name_shaped_text(tmp_path):
    path = _write(tmp_path, "tag", f"a: !!python/object:{SECRET}.x:y 1\n")
    text = str(pytest.raises(YamlFileError, read_yaml, path).value)
    assert SECRET not in text and f"{path}:1:4: " in text, text
    path = _write(tmp_path, "alias", "a: *undefined_anchor\n")
    assert "'undefined_anchor'" in str(pytest.raises(YamlFileError, read_yaml, path).value)


# Texts PyYAML or Python cannot turn into values: each must be one YamlFileError line naming the file and the place
# (before: yaml.reader.ReaderError, ValueError, OverflowError, RecursionError escaped the readers).
UNREADABLE = {
    "nul_byte": ("a: 1\x00\n", "control character U+0000"),
    "x01_byte": ("a: [1, 2]\nb: \x01\n", "control character U+0001"),
    "int_5000_digits": ("a: " + "9" * 5000 + "\n", "an integer of 5000 characters"),
    "int_400_digits": ("a: [1, " + "9" * 400 + "]\n", "an integer of 400 characters"),
    "deep": ("a: " + "[" * 5000 + "\n", f"nested deeper than {yamlfile.MAX_DEPTH} levels"),
}


def _readers():
    from mbs_ros.campaign.spec import CampaignError, load_campaign
    from mbs_ros.sensors.spec import SensorConfigError, load_sensors

    return {
        "read_yaml": (read_yaml, YamlFileError),
        "params_file": (read_params_file, YamlFileError),
        "scenario": (load_scenario, ScenarioError),
        "robot_yaml": (load_robot, RobotConfigError),
        "sensors": (lambda p: load_sensors(p, None, 0.001), SensorConfigError),
        "campaign": (load_campaign, CampaignError),
    }


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_unreadable_numbers_and_characters_are_one_line_naming_the_file(tmp_path, case):
    text, reason = UNREADABLE[case]
    path = _write(tmp_path, case, text)
    for reader, (call, error) in _readers().items():
        with pytest.raises(error) as e:
            call(path)
        message = str(e.value)
        assert message.startswith(f"{path}:") and reason in message and "\n" not in message, (reader, message)
    assert read_yaml(_write(tmp_path, "fits", "a: " + "9" * yamlfile.MAX_DIGITS + "\n"))["a"] > 1e299


def test_a_number_too_large_for_a_float_is_refused_by_the_schema_reader(tmp_path):
    from mbs_ros.yamlschema import Reader, SchemaError

    r = Reader(tmp_path / "x.yaml")
    with pytest.raises(SchemaError) as e:
        r.number(10 ** 400, "robots[0].initial.position[0]")
    assert str(e.value) == f"{tmp_path / 'x.yaml'}: robots[0].initial.position[0]: must be a finite number, got an " \
                           "integer of 401 digits", str(e.value)
