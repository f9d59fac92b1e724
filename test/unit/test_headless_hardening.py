"""Issue 31's hostile inputs to headless and bringup starts (items 14, 20, 26's scenario name): --set nested 900
deep, --duration inf / nan / 1e6 / 1e300, a scenario's initial joint positions outside the URDF's limits, a
scenario name with a typo. Each refused start is exit 2 with one line on stderr naming what is wrong; nothing
is allocated or started. In process, no ROS (bringup's --print starts nothing)."""
from __future__ import annotations

import math

import pytest

from mbs_ros.bringup import runner
from mbs_ros.headless import __main__ as headless_cli
from mbs_ros.headless.run import HeadlessError, run_scenario
from mbs_ros.scenario.overrides import parse_set
from mbs_ros.scenario.schema import ScenarioError, load_scenario, scenario_path

DEEP = "[" * 900 + "1" + "]" * 900  # the probe's --set value


def _one_line(capsys, *words):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert all(w in err for w in words), err
    return err


# --- item 14: --set nesting and --duration ------------------------------------------------------------------------

def test_a_set_value_nested_900_deep_is_one_clear_error():
    with pytest.raises(ValueError) as e:
        parse_set(f"duration={DEEP}")
    assert "--set duration" in str(e.value) and "nested deeper than 100 levels" in str(e.value)
    assert parse_set("robots[0].controller.kp=[1, 2.5]") == ("robots[0].controller.kp", [1, 2.5])
    assert parse_set("lockstep=true") == ("lockstep", True)
    with pytest.raises(ValueError, match="not YAML"):
        parse_set("duration=\x01")


@pytest.mark.parametrize("cli", ["headless", "bringup"])
def test_set_nested_900_deep_is_refused_with_exit_2(cli, capsys, tmp_path):
    if cli == "headless":
        rc = headless_cli.main(["manipulator", "--set", f"duration={DEEP}"])
    else:
        rc = runner.main(["manipulator", "--set", f"duration={DEEP}", "--print", "--log-dir", str(tmp_path)])
    assert rc == 2
    _one_line(capsys, "--set duration", "nested deeper than 100 levels")


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
def test_headless_refuses_a_duration_that_is_not_a_finite_positive_number(value, capsys):
    assert headless_cli.main(["manipulator", "--duration", value]) == 2
    _one_line(capsys, "--duration must be a finite number of seconds > 0")


@pytest.mark.parametrize("value", ["inf", "nan", "1e300"])
def test_bringup_refuses_a_duration_that_is_not_finite_or_beyond_the_stamps(value, capsys, tmp_path):
    assert runner.main(["manipulator", "--duration", value, "--print", "--log-dir", str(tmp_path)]) == 2
    _one_line(capsys, "--duration must be a number of seconds in (0, 1e+08]")


def test_a_huge_duration_is_refused_before_anything_is_allocated(capsys):
    """--duration 1e6 preallocated 9.7 GiB of records: the records are bounded (1 GiB), the refusal says the
    longest duration that fits; 1e300 s is beyond int64 nanosecond stamps."""
    assert headless_cli.main(["manipulator", "--duration", "1e6"]) == 2
    err = _one_line(capsys, "would record", "GiB", "at most 1 GiB", "at most")
    assert "s at this control rate" in err
    for duration in (math.inf, math.nan, 1e300):
        with pytest.raises(HeadlessError):
            run_scenario("manipulator", duration=duration)
    with pytest.raises(HeadlessError, match="finite number of seconds <= 1e"):
        run_scenario("manipulator", overrides={"duration": 1.0e300})


# --- item 20: the initial state is checked when the scenario is read -------------------------------------------

BAD_INITIAL = [
    ({"robots[0].initial.joint_positions": [0, 0, 9, 0, 0, 0]}, "robots[0].initial.joint_positions",
     "joint3 = 9 outside"),
    ({"robots[0].initial.joint_positions": [0, 0, 0, 0, 0]}, "robots[0].initial.joint_positions",
     "must have 6 entries"),
    ({"robots[0].initial.joint_positions": [0, 0, math.nan, 0, 0, 0]}, "robots[0].initial.joint_positions[2]",
     "finite"),
    ({"robots[0].initial.joint_velocities": [0, 0, math.inf, 0, 0, 0]}, "robots[0].initial.joint_velocities[2]",
     "finite"),
]


@pytest.mark.parametrize("overrides,key,words", BAD_INITIAL)
def test_a_bad_initial_state_is_refused_when_the_scenario_is_read(overrides, key, words):
    with pytest.raises(ScenarioError) as e:
        load_scenario("manipulator", overrides=overrides)
    assert e.value.key == key and words in e.value.reason, str(e.value)
    assert e.value.file.endswith("manipulator.yaml")


def test_a_base_pose_off_its_group_is_refused_when_the_scenario_is_read():
    with pytest.raises(ScenarioError) as e:
        load_scenario("vehicle_manipulator", overrides={"robots[0].initial.rpy": [0.0, math.inf, 0.0]})
    assert e.value.key == "robots[0].initial.rpy[1]"


@pytest.mark.parametrize("cli", ["headless", "bringup"])
def test_both_starts_refuse_joint_positions_outside_the_limits_with_exit_2(cli, capsys, tmp_path):
    setting = "robots[0].initial.joint_positions=[0,0,9,0,0,0]"
    if cli == "headless":
        rc = headless_cli.main(["manipulator", "--set", setting])
    else:
        rc = runner.main(["manipulator", "--set", setting, "--print", "--log-dir", str(tmp_path)])
    assert rc == 2
    _one_line(capsys, "manipulator.yaml: robots[0].initial.joint_positions: joint3 = 9 outside [-3.14, 3.14]")
    assert not list(tmp_path.iterdir())  # bringup wrote no parameter file: nothing was going to start


# --- item 26: a scenario name with a typo -------------------------------------------------------------------------

@pytest.mark.parametrize("typo,meant", [("vehicle_manipulatr", "vehicle_manipulator"), ("manipulatr", "manipulator"),
                                        ("solo12_stnd", "solo12_stand")])
def test_a_scenario_name_typo_says_did_you_mean(typo, meant, capsys, tmp_path):
    with pytest.raises(FileNotFoundError, match=f"did you mean '{meant}'"):
        scenario_path(typo)
    assert runner.main([typo, "--print", "--log-dir", str(tmp_path)]) == 2
    _one_line(capsys, f"scenario '{typo}' not found: did you mean '{meant}'?")
    assert headless_cli.main([typo]) == 2
    _one_line(capsys, f"did you mean '{meant}'?")


def test_a_name_far_from_every_scenario_lists_them_and_echoes_no_content():
    with pytest.raises(FileNotFoundError) as e:
        scenario_path("x" * 5000)
    assert "did you mean" not in str(e.value) and "a text of 5000 characters" in str(e.value)
    assert "manipulator" in str(e.value)
