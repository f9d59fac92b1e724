"""controller_node's settings without ROS (mbs_ros/cores/controller_settings.py): the parameter table is the one
place of the defaults (ControllerSettings takes them), the documented defaults, and the table's defaults pass the
node's own checks unchanged; the base frame is the model source's base link, found without ROS."""
import subprocess
import sys
import textwrap

import parameter_extremes as extremes
import pytest
from urdf_text import joint, link, robot

from mbs_ros.dynamics.model import source as ms
from mbs_ros.cores.controller_settings import (DEFAULTS, ControllerSettings, ParameterError, field_name,
                                               settings_from_values)
from mbs_ros.cores.parameters import table

DOCUMENTED = {  # docs/controller_node.md
    "law": "computed_torque", "kp": 9.0, "kd": 6.0, "lambda": 3.0, "mass_scale": 1.0, "control_rate": 100.0,
    "state_timeout": 0.2, "lockstep": False, "world_frame": "world", "base_frame": "base_link", "max_wrench": (),
    "max_effort": (), "max_time_jump": 5.0, "allocate_thrusters": True, "thruster_weights": (),
    "compensate_passive": True, "allow_partial_joints_goal": False, "goal_time_tolerance": 0.0,
    "stopped_velocity_tolerance": 0.01, "idle_until": 0.0, "use_events_executor": True, "base_group": "se3", "mimic": "reduce",
    "joint_armature": (),
    "gravity": (0.0, 0.0, -9.81), "mass": 1.0, "inertia": (0.01, 0.0, 0.0, 0.01, 0.0, 0.01),
}


def test_every_parameter_has_its_default_in_the_table_and_the_settings_take_it():
    params = table("controller")
    for name, p in params.items():
        assert p.default is not None, name
        assert p.read_only, name
        assert getattr(DEFAULTS, field_name(name)) == p.default, name
    assert set(params) == {"lambda" if f == "lambda_" else f for f in ControllerSettings.__dataclass_fields__}


@pytest.mark.parametrize("name, value", sorted(DOCUMENTED.items()))
def test_documented_defaults(name, value):
    assert table("controller")[name].default == value


def test_the_defaults_pass_the_checks_unchanged():
    values = {n: p.default for n, p in table("controller").items()}
    source = ms.load_source("", "")
    assert settings_from_values(values, source) == DEFAULTS
    values["control_rate"] = 0.0
    with pytest.raises(ParameterError, match="control_rate"):
        settings_from_values(values, source)


# a world-rooted arm: "world" holds "pedestal" (fixed), which carries "arm" (revolute)
WORLD_ROOTED = robot(link("world"), link("pedestal", 2.0), link("arm", 1.0),
                     joint("mount", "world", "pedestal", "fixed"), joint("shoulder", "pedestal", "arm"))


def test_base_link_is_the_urdf_root_or_the_link_world_holds():
    assert ms.base_link(ms.load_source(WORLD_ROOTED, "")) == "pedestal"
    free = robot(link("hull", 5.0), link("arm", 1.0), joint("shoulder", "hull", "arm"))
    assert ms.base_link(ms.load_source(free, "")) == "hull"


def test_base_frame_must_name_the_base_link():
    source = ms.load_source(WORLD_ROOTED, "")
    values = {n: p.default for n, p in table("controller").items()}
    values.update(base_group="fixed", base_frame="pedestal")
    assert settings_from_values(values, source).base_frame == "pedestal"
    values["base_frame"] = "arm"
    with pytest.raises(ParameterError, match="base link 'pedestal'"):
        settings_from_values(values, source)


@pytest.mark.e2e
def test_the_settings_are_ros_free():
    """Checking a robot's settings (its base link included) loads no rclpy: a ROS-free module must not reach the
    nodes' rclpy modules, not even lazily."""
    code = textwrap.dedent(f"""
        import sys
        from mbs_ros.dynamics.model import source as ms
        from mbs_ros.cores.controller_settings import settings_from_values
        from mbs_ros.cores.parameters import table
        values = {{n: p.default for n, p in table("controller").items()}}
        values.update(base_group="fixed", base_frame="pedestal")
        assert settings_from_values(values, ms.load_source({WORLD_ROOTED!r}, "")).base_frame == "pedestal"
        print("rclpy" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _controller_value(name, value):
    values = {n: p.default for n, p in table("controller").items()}
    values[name] = value
    if name == "control_rate":  # state_timeout at least one control period
        values["state_timeout"] = max(values["state_timeout"], 1.0 / value)
    return values


@pytest.mark.parametrize("name, value, accepted", extremes.cases(extremes.CONTROLLER + extremes.CONTROLLER_VECTORS))
def test_every_numeric_parameter_at_its_extremes(name, value, accepted):
    """The lowest and highest value are taken (law and limits built on a single body of 1 kg), one just outside
    is refused naming the parameter."""
    from mbs_ros.cores.controller_settings import build_model, command_limits, make_law

    source = ms.load_source("", "")
    values = _controller_value(name, value)
    if accepted:
        s = settings_from_values(values, source)
        model = build_model(s, source)
        make_law(model, s)
        command_limits(model, s)
    else:
        with pytest.raises(ParameterError, match=name):
            s = settings_from_values(values, source)
            model = build_model(s, source)
            make_law(model, s)
            command_limits(model, s)


def test_state_timeout_is_one_control_period_at_least_but_not_in_lockstep():
    source = ms.load_source("", "")
    values = _controller_value("control_rate", 10.0)
    assert settings_from_values(dict(values, state_timeout=0.1), source).state_timeout == 0.1
    with pytest.raises(ParameterError, match="state_timeout must be at least one control period .*0.1 s"):
        settings_from_values(dict(values, state_timeout=0.09), source)
    assert settings_from_values(dict(values, state_timeout=0.09, lockstep=True), source).lockstep


def test_thruster_weights_bounds():
    source = ms.load_source("", "")
    values = _controller_value("thruster_weights", [1e-6, 1e6])
    assert settings_from_values(values, source).thruster_weights == (1e-6, 1e6)
    for bad in ([0.9e-6, 1.0], [1.0, 1.1e6]):
        with pytest.raises(ParameterError, match="thruster_weights must lie in"):
            settings_from_values(dict(values, thruster_weights=bad), source)
