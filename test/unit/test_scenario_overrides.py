"""Scenario overrides by path (load_scenario(overrides=...), the runner's --set): a value set by path reaches the
node parameters, every check of the file applies to it, and a path that names nothing the schema allows is an
error naming the key. No process, no rclpy (the runner's --print starts nothing)."""
from __future__ import annotations

import pytest
import yaml

from mbs_ros.bringup import runner
from mbs_ros.scenario.schema import ScenarioError, document_value, load_scenario, node_specs, scenario_path

KP = [4.0] * 6 + [16.0] * 6


def _params(scenario, role, robot=None):
    return next(s.parameters for s in node_specs(scenario) if s.role == role and robot in (None, s.robot))


def test_path_overrides_reach_the_node_parameters():
    """kp (a vector), the true model's mass_scale, the sensor seed, the initial position, a reference waypoint and
    the duration, each set by path, are what the nodes get; the file's other values stay."""
    s = load_scenario("vehicle_manipulator", overrides={
        "robots[0].controller.kp": KP, "robots[0].dynamics.mass_scale": 1.2, "robots[0].dynamics.sensor_seed": 7,
        "robots[0].initial.position": [1.0, 2.0, -3.0], "robots[0].reference.base[1].position": [0.5, 0.5, -4.5],
        "duration": 1.5})
    assert _params(s, "controller")["kp"] == KP and _params(s, "controller")["kd"] == 6.0
    dyn = _params(s, "dynamics")
    assert dyn["mass_scale"] == 1.2 and dyn["sensor_seed"] == 7.0 and dyn["initial_position"] == [1.0, 2.0, -3.0]
    assert dyn["initial_joint_positions"] == [0.0, 0.6, -1.2, 0.0, 0.6, 0.0]
    assert _params(s, "reference")["base_positions"][3:6] == [0.5, 0.5, -4.5]
    assert s.duration == 1.5
    plain = load_scenario("vehicle_manipulator")  # the file itself is unchanged
    assert _params(plain, "controller")["kp"] == 9.0 and "mass_scale" not in _params(plain, "dynamics")


def test_one_entry_of_a_list_and_a_mapping_the_file_leaves_out():
    """robots[0].controller.kd[6] sets one gain of a vector kd (set whole by the override before it: overrides
    apply in order); robots[0].dynamics.current sets a key the file's dynamics mapping leaves out."""
    s = load_scenario("vehicle_manipulator", overrides={"robots[0].controller.kd": [6.0] * 12,
                                                        "robots[0].controller.kd[6]": 2.5,
                                                        "robots[0].dynamics.current": [0.3, 0.0, 0.0]})
    assert _params(s, "controller")["kd"] == [6.0] * 6 + [2.5] + [6.0] * 5
    assert _params(s, "dynamics")["current"] == [0.3, 0.0, 0.0]


def test_a_fleet_template_entry_sets_every_robot_of_the_fleet():
    s = load_scenario("fleet", overrides={"robots[0].controller.kp": 5.0, "robots[0].dynamics.mass_scale": 0.9})
    assert [r.name for r in s.robots] == ["uvms1", "uvms2", "uvms3"]
    for r in s.robots:
        assert _params(s, "controller", r.name)["kp"] == 5.0 and _params(s, "dynamics", r.name)["mass_scale"] == 0.9


@pytest.mark.parametrize("overrides, key, words", [
    ({"robots[1].controller.kp": 3.0}, "robots[1].controller.kp", ["robots has 1 entry", "no [1]"]),
    ({"robots[0].controler.kp": 3.0}, "robots[0].controler.kp", ["robots[0].controler", "did you mean 'controller'"]),
    ({"robots[0].controller.kpp": 3.0}, "robots[0].controller.kpp", ["no such setting", "did you mean 'kp'"]),
    ({"robots[0].dynamics.model_file": "x.urdf"}, "robots[0].dynamics.model_file", ["no such setting"]),
    ({"robots[0].controller.kp[3]": 1.0}, "robots[0].controller.kp[3]", ["is not a list", "9.0"]),
    ({"robots[0].initial.rpy[5]": 1.0}, "robots[0].initial.rpy[5]", ["has 3 entries"]),
    ({"robots[0].base_group.x": 1}, "robots[0].base_group.x", ["not a mapping"]),
    ({"robots": []}, "robots", ["not a setting that can be overridden"]),
    ({"durration": 2.0}, "durration", ["no such setting", "did you mean 'duration'"]),
    ({"robots[0]..kp": 1.0}, "robots[0]..kp", ["not a path"]),
    ({"robots[x].kp": 1.0}, "robots[x].kp", ["not a path"]),
])
def test_a_path_that_names_nothing_is_an_error_naming_the_key(overrides, key, words):
    with pytest.raises(ScenarioError) as err:
        load_scenario("vehicle_manipulator", overrides=overrides)
    assert err.value.key == key and all(w in err.value.reason for w in words), str(err.value)
    assert str(err.value).startswith(str(scenario_path("vehicle_manipulator")))


@pytest.mark.parametrize("overrides, key, words", [
    ({"robots[0].controller.kp": [1.0, 2.0]}, "robots[0].controller.kp", ["must have 12 entries"]),
    ({"robots[0].controller.kp": -1.0}, "robots[0].controller.kp", ["must be > 0"]),
    ({"robots[0].initial.position": "a"}, "robots[0].initial.position", ["list of 3", "'a'"]),
    ({"robots[0].controller.law": "pid"}, "robots[0].controller.law", ["must be one of"]),
    ({"robots[0].reference.base[2].time": 1.0}, "robots[0].reference.base[2].time", ["must increase"]),
    ({"duration": 0.0}, "duration", ["must be > 0"]),
])
def test_the_files_checks_apply_to_overridden_values(overrides, key, words):
    with pytest.raises(ScenarioError) as err:
        load_scenario("vehicle_manipulator", overrides=overrides)
    assert err.value.key == key and all(w in err.value.reason for w in words), str(err.value)


def test_document_value_reads_the_file_else_the_node_default():
    assert document_value("vehicle_manipulator", "robots[0].controller.kp") == 9.0
    assert document_value("vehicle_manipulator", "robots[0].initial.position") == [0.0, 0.0, -5.0]
    assert document_value("vehicle_manipulator", "robots[0].dynamics.mass_scale") == 1.0  # the table's default
    assert document_value("vehicle_manipulator", "robots[0].dynamics.current") == (0.0, 0.0, 0.0)
    with pytest.raises(ScenarioError, match="not set in the scenario"):
        document_value("vehicle_manipulator", "robots[0].initial.twist")


def test_the_runners_set_takes_paths_with_yaml_values(tmp_path, capsys):
    """--set 'robots[0].controller.kp=[4,...]' and --set robots[0].dynamics.mass_scale=1.2 end in the parameter
    files --print writes; a bad path exits with the usage code and the key on stderr."""
    rc = runner.main(["vehicle_manipulator", "--set", "robots[0].controller.kp=[4,4,4,4,4,4,16,16,16,16,16,16]",
                      "--set", "robots[0].dynamics.mass_scale=1.2", "--print", "--log-dir", str(tmp_path)])
    assert rc == runner.EXIT_OK
    ctl = yaml.safe_load((tmp_path / "uvms_controller_node.params.yaml").read_text())["/**"]["ros__parameters"]
    dyn = yaml.safe_load((tmp_path / "uvms_dynamics_node.params.yaml").read_text())["/**"]["ros__parameters"]
    assert ctl["kp"] == KP and dyn["mass_scale"] == 1.2
    capsys.readouterr()
    rc = runner.main(["vehicle_manipulator", "--set", "robots[0].controller.kpp=3", "--print"])
    assert rc == runner.EXIT_USAGE and "robots[0].controller.kpp: no such setting" in capsys.readouterr().err


def test_a_dynamics_node_with_thread_priority_is_started_with_asynchronous_publication():
    """thread_priority > 0 on a robot's dynamics node: its spec asks for Fast DDS's asynchronous publication (the
    runner and the launch files add it); without it, and on the other nodes, nothing."""
    s = load_scenario("solo12_stand", overrides={"robots[0].dynamics.thread_priority": 50})
    env = {spec.role: spec.environment for spec in node_specs(s)}
    assert env == {"dynamics": (("RMW_FASTRTPS_PUBLICATION_MODE", "ASYNCHRONOUS"),), "controller": (),
                   "reference": ()}
    assert all(spec.environment == () for spec in node_specs(load_scenario("solo12_stand")))
    s = load_scenario("solo12_stand", overrides={"robots[0].dynamics.thread_priority": 0})
    assert all(spec.environment == () for spec in node_specs(s))
