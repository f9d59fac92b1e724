"""Each node parameter is declared once, in its table (mbs_ros.cores.parameters.<role>), and the rest derives from
it: the settings dataclasses' fields and defaults, the settings' checks (every rule of the table is enforced: a
value breaking it, built here from the rule alone, is refused naming the parameter), the shared parameters of the
controller and estimator (declared in the dynamics table), and no parameter name written as a string outside the
tables in the modules that check parameters."""
from __future__ import annotations

import ast
import math
from dataclasses import fields
from pathlib import Path

import pytest

from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores.parameters import ROLES, field_name, kind, table

ROOT = Path(__file__).resolve().parents[2]
ROV = ROOT / "config" / "robots" / "bluerov2_heavy.yaml"


def _settings(role):
    """(settings class, settings_from_values, source, values at the defaults) of a node role."""
    if role == "dynamics":
        from mbs_ros.cores import dynamics_settings as m
        return m.Settings, m.settings_from_values, None, {}
    if role == "controller":
        from mbs_ros.cores import controller_settings as m
        return m.ControllerSettings, m.settings_from_values, ms.load_source("", ""), {}
    from mbs_ros.cores import estimator_settings as m
    source = ms.load_source("", str(ROV))
    return m.EstimatorSettings, m.settings_from_values, source, dict(ms.model_defaults(source))


SETTINGS_ROLES = ("dynamics", "controller", "estimator")


@pytest.mark.parametrize("role", SETTINGS_ROLES)
def test_settings_fields_are_the_table_in_order_with_its_defaults(role):
    cls, check, source, robot = _settings(role)
    params = table(role)
    assert [f.name for f in fields(cls)] == [field_name(n) for n in params]
    for f in fields(cls):
        p = params["lambda" if f.name == "lambda_" else f.name]
        assert f.default == p.default and type(f.default) is type(p.default) or p.check == "whole", f.name
    values = {n: robot.get(n, p.default) for n, p in params.items()}
    assert check(values, source) == cls(**{field_name(n): (int(v) if params[n].check == "whole" else v)
                                           for n, v in values.items()})


def _breaking(p, params):
    """Values breaking each rule of ``p``, from the rule alone (None: no rule of this kind)."""
    k = kind(p)
    out = []
    if p.choices and k == "string" and p.check is None:
        out.append("no_such_choice")
    if k == "string" and not p.allow_empty and p.check is None:
        out.append("")
    if k == "double" and p.check is None:
        if p.range is not None:
            out += [p.range[0] - 1.0 - abs(p.range[0]), p.range[1] * 2.0 + 1.0]
        if p.minimum is not None:
            lowest = p.minimum if p.minimum_open else p.minimum - max(1e-3, abs(p.minimum) * 0.5)
            out.append(lowest)
        out.append(math.nan)
        out.append("text")
    if k == "double[]" and p.check is None:
        if p.size is not None:
            out.append((0.0,) * (p.size + 1))
        if p.bound is not None:
            n = p.size or 1
            out.append((p.bound * 1.5,) * n)
        if p.each is not None:
            out.append((p.each[1] * 2.0,) * (p.size or 1))
        out.append(("x",))
    if k == "bool":
        out.append("yes")
    return out


@pytest.mark.parametrize("role", SETTINGS_ROLES)
def test_every_rule_of_the_table_is_checked_naming_the_parameter(role):
    cls, check, source, robot = _settings(role)
    params = table(role)
    base = {n: robot.get(n, p.default) for n, p in params.items()}
    tried = 0
    for name, p in params.items():
        for bad in _breaking(p, params):
            with pytest.raises(ParameterError) as e:
                check(dict(base, **{name: bad}), source)
            assert name in str(e.value), (name, bad, str(e.value))
            tried += 1
    assert tried >= 3 * len(params) // 2, tried


def test_the_cross_field_rules_are_the_tables():
    from mbs_ros.cores.dynamics_settings import settings_from_values

    params = table("dynamics")
    ruled = [n for n, p in params.items() if p.at_most is not None]
    assert set(ruled) == {"publish_rate", "wrench_rate", "markers_rate", "contacts_rate", "diagnostics_rate",
                          "energy_rate"}
    for name in ruled:
        values = {n: p.default for n, p in params.items()}
        values.update(physics_rate=100.0, **{name: 200.0})
        with pytest.raises(ParameterError, match=fr"{name} \(200 Hz\) must not exceed physics_rate \(100 Hz\)"):
            settings_from_values(values)


def test_shared_parameters_are_the_dynamics_declaration():
    dyn = table("dynamics")
    counted = 0
    for role in ("controller", "estimator"):
        for name, p in table(role).items():
            if p.extra.get("shared"):
                counted += 1
                mine, theirs = p, dyn[name]
                assert (kind(mine), mine.range, mine.choices, mine.size, mine.bound, mine.norm, mine.minimum,
                        mine.each, mine.check) == (kind(theirs), theirs.range, theirs.choices, theirs.size,
                                                   theirs.bound, theirs.norm, theirs.minimum, theirs.each,
                                                   theirs.check), (role, name)
    assert counted >= 30, counted


# Modules that declare or check node parameters: no parameter name as a string literal in them (each name is
# written in its table only); the names they need they take from the table.
CHECKING = ("mbs_ros/cores/dynamics_settings.py", "mbs_ros/cores/controller_settings.py",
            "mbs_ros/cores/estimator_settings.py", "mbs_ros/nodes/dynamics_reconfigure.py",
            "mbs_ros/scenario/base.py", "mbs_ros/bringup/foxglove_layout.py")
# literals that remain, each with its reason (the settings' cross-parameter rules the table cannot say)
ALLOWED = {
    "mbs_ros/cores/dynamics_settings.py": {"base_group", "locked_joints", "locked_joint_positions",
                                           "cmd_timeout", "mass", "inertia", "com", "gravity",
                                           "initial_joint_positions", "initial_joint_velocities",
                                           "initial_twist"},
    # and the URDF tags <mass> and <inertia> of the payload body it appends to the controller's model
    "mbs_ros/cores/controller_settings.py": {"base_group", "locked_joints", "locked_joint_positions",
                                             "lqr_q_position", "lqr_q_velocity", "lqr_r", "lambda", "mass",
                                             "inertia"},
    "mbs_ros/nodes/dynamics_reconfigure.py": set(),
    # scenario keys (global: physics_rate ...; robot: base_group, locked_joints, mimic, sensors; reference:
    # joint_names) and the robot_description topic of DEFAULT_RECORD: the scenario schema's own names
    "mbs_ros/scenario/base.py": {"physics_rate", "publish_rate", "control_rate", "real_time_factor",
                                         "lockstep", "base_group", "locked_joints", "mimic", "sensors", "joint_names",
                                         "robot_description"},
    # sensor types and the world frame's name in the layout
    "mbs_ros/bringup/foxglove_layout.py": {"imu", "dvl", "world"},
    # the sensor roles are parameters and the fusion's stream names at once
    "mbs_ros/cores/estimator_settings.py": {"base_group", "initial_attitude_sigma", "sensors", "imu", "dvl", "depth",
                                            "compass", "encoders"},
}


def parameter_literals(path: Path):
    names = {n for role in ROLES for n in table(role)}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted({node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names})


@pytest.mark.parametrize("module", CHECKING)
def test_no_parameter_name_is_written_outside_its_table(module):
    found = set(parameter_literals(ROOT / module))
    assert found <= ALLOWED[module], sorted(found - ALLOWED[module])


def test_what_a_run_time_change_redoes_is_the_tables():
    from mbs_ros.nodes import dynamics_reconfigure as reconf
    from mbs_ros.cores import dynamics_settings as ds

    assert ds.INERTIAL == ("mass", "inertia", "com", "gravity") and ds.SINGLE_BODY_ONLY == ("mass", "inertia", "com")
    assert reconf.ON == {"rate": {"integrator", "gravity", "mass", "inertia", "com", "max_wrench", "max_effort"},
                          "limits": {"max_wrench", "max_effort"}, "water": {"current", "current_rate"},
                          "pause": {"pause_at"}}


def test_the_reference_tables_rules_are_checked_by_check_table():
    """reference_node has no settings module: its table's rules hold through params.check_table alone."""
    from mbs_ros.cores.params import check_table

    params = table("reference")
    base = {n: p.default for n, p in params.items()}
    checked = check_table(base, params)
    assert checked["stamp"] == "state" and checked["min_subscribers"] == 1.0 and checked["joint_names"] == ()
    tried = 0
    for name, p in params.items():
        bad_values = _breaking(p, params) + ([("", "j1"), "j1"] if kind(p) == "string[]" else [])
        for bad in bad_values:
            with pytest.raises(ParameterError) as e:
                check_table(dict(base, **{name: bad}), params)
            assert name in str(e.value), (name, bad, str(e.value))
            tried += 1
    assert tried >= 20, tried


def test_each_parameter_is_declared_once():
    """A table entry that states its own type and default is a declaration; a SHARED one takes the dynamics
    node's. Two nodes' parameters of one name are one declaration, except publish_rate: the dynamics node's state
    rate and the estimator's estimate rate are two parameters."""
    declared = {}
    for role in ROLES:
        for name, p in table(role).items():
            if not p.extra.get("shared"):
                declared.setdefault(name, []).append(role)
    twice = {n: roles for n, roles in declared.items() if len(roles) > 1}
    assert twice == {"publish_rate": ["dynamics", "estimator"]}, twice
