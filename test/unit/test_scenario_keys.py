"""Scenario ``controller:`` / ``dynamics:`` keys and a robot's ``params`` file are checked against the parameters
the nodes declare (issue 9: typos such as ``kpp``, ``lwa``, ``integrater`` used to pass, and the run exited 0).

- unit (no processes): a typo names the file and the key path and suggests the parameter meant; a parameter of
  the other node says where it belongs; the names come from the nodes' tables in ``mbs_ros.cores.parameters`` at check time (a
  parameter added to a node is accepted at once, one removed is refused); every parameter the scenario layer
  itself gives any node (all global settings on, every shipped scenario) is one that node declares; a ``params``
  file's sections are checked the same way and each node gets only its own parameters from ``/**``;
- real processes: the controller's limits (``max_wrench``, ``max_effort``, ``max_time_jump``) and a dynamics
  parameter set in a scenario reach the started nodes (read back with ``get_parameters``), and neither node logs
  "ignoring unknown parameters".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mbs_ros.bringup import ScenarioError, list_scenarios, load_scenario, node_specs
from mbs_ros.scenario.schema import NODES, declared_parameters
from mbs_ros.cores import parameters

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # s: two nodes starting on a loaded 2-core machine

ASV = """
physics_rate: 100.0
publish_rate: 20.0
control_rate: 20.0
robots:
  - namespace: {ns}
    model: config/robots/asv_2link.yaml
    controller: {{law: computed_torque, kp: 9.0, kd: 6.0}}
    dynamics: {{integrator: rk4}}
"""


def scenario(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def by_label(specs):
    return {s.label: s for s in specs}


# ------------------------------------------------------------------------------------------ unit

TYPOS = {
    # edit of ASV -> key path, fragment of the reason
    "kpp": (("kp: 9.0", "kpp: 9.0"), "robots[0].controller.kpp", "unknown controller_node parameter (did you mean 'kp'?)"),
    "lwa": (("law:", "lwa:"), "robots[0].controller.lwa", "did you mean 'law'?"),
    "integrater": (("integrator:", "integrater:"), "robots[0].dynamics.integrater",
                   "unknown dynamics_node parameter (did you mean 'integrator'?)"),
    "max_wrenches": (("kd: 6.0", "kd: 6.0, max_wrenchs: [1.0, 1.0]"), "robots[0].controller.max_wrenchs",
                     "did you mean 'max_wrench'?"),
    "gain_in_dynamics": (("integrator: rk4", "integrator: rk4, kd: 2.0"), "robots[0].dynamics.kd",
                         "a controller_node one (put it under 'robots[0].controller')"),
    "rate_in_controller": (("kd: 6.0", "kd: 6.0, physics_rate: 50.0"), "robots[0].controller.physics_rate",
                           "a dynamics_node one (put it under 'robots[0].dynamics')"),
    "nothing_close": (("kd: 6.0", "kd: 6.0, zzzz: 1"), "robots[0].controller.zzzz", "it takes: "),
}


@pytest.mark.parametrize("case", sorted(TYPOS))
def test_unknown_key_names_file_key_and_guess(tmp_path, case):
    (old, new), key, reason = TYPOS[case]
    text = ASV.format(ns="asv")
    assert old in text
    path = scenario(tmp_path, text.replace(old, new, 1))
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert e.value.key == key, str(e.value)
    assert str(e.value).startswith(f"{path}: {key}: "), str(e.value)
    assert reason in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_runner_refuses_a_typo_with_one_line_and_exit_2(tmp_path, capsys):
    from mbs_ros.bringup import runner

    path = scenario(tmp_path, ASV.format(ns="asv").replace("kp: 9.0", "kpp: 9.0"))
    assert runner.main([str(path), "--print"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"bringup: scenario error: {path}: robots[0].controller.kpp: unknown controller_node parameter " \
                  "(did you mean 'kp'?)"


def test_names_are_read_from_the_parameter_tables_at_check_time(tmp_path):
    """One source of truth: a parameter a node adds is accepted and passed on; one it drops is refused. The tables
    are restored as they were, their order included (the docs' generated tables follow it: a ``kd`` put back at the
    end by monkeypatch's undo failed test_parameter_tables when it ran later in the same worker)."""
    controller = parameters.table("controller")
    dynamics = parameters.table("dynamics")
    saved = [(t, dict(t)) for t in (controller, dynamics)]
    text = ASV.format(ns="asv").replace("kd: 6.0", "kd: 6.0, brand_new_limit: 3.5").replace(
        "integrator: rk4", "integrator: rk4, another_new_one: true")
    path = scenario(tmp_path, text)
    try:
        with pytest.raises(ScenarioError, match="brand_new_limit"):
            load_scenario(path)
        controller["brand_new_limit"] = parameters.Parameter("brand_new_limit", "test")
        dynamics["another_new_one"] = parameters.Parameter("another_new_one", "test")
        specs = by_label(node_specs(load_scenario(path)))
        assert specs["asv/controller_node"].parameters["brand_new_limit"] == 3.5
        assert specs["asv/dynamics_node"].parameters["another_new_one"] is True
        del controller["kd"]
        with pytest.raises(ScenarioError, match=r"robots\[0\]\.controller\.kd: unknown controller_node"):
            load_scenario(path)
    finally:
        for t, items in saved:
            t.clear()
            t.update(items)


def test_shipped_scenarios_give_only_declared_parameters():
    """Every shipped scenario, with every global setting on, gives each node only parameters it declares (the
    scenario layer's own ones included: rates, sim time, lockstep, the reference node's waypoints)."""
    declared = {role: set(declared_parameters(role)) for role in NODES}
    paths = list_scenarios()
    assert len(paths) >= 5
    for path in paths:
        for overrides in ({}, dict(lockstep=True, control_rate=50.0, real_time_factor=0.0, sim_time=True)):
            s = load_scenario(path, count=1 if "fleet" in path.stem else None, overrides=overrides)
            for spec in node_specs(s):
                extra = set(spec.parameters) - declared[spec.role]
                assert not extra, f"{path.name} {spec.label}: {sorted(extra)}"


PARAMS = """
/**:
  ros__parameters:
    integrator: rk4
    kp: 4.0
/**/dynamics_node:
  ros__parameters:
    model_file: config/robots/asv_2link.yaml
    cmd_timeout: 0.3
/**/controller_node:
  ros__parameters:
    state_timeout: 0.4
"""


def test_params_file_keys_checked_and_split_per_node(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS)
    path = scenario(tmp_path, "robots:\n  - {namespace: asv, params: p.yaml}\n")
    specs = by_label(node_specs(load_scenario(path)))
    dyn, ctl = specs["asv/dynamics_node"].parameters, specs["asv/controller_node"].parameters
    assert dyn["integrator"] == "rk4" and dyn["cmd_timeout"] == 0.3 and "kp" not in dyn
    assert ctl["kp"] == 4.0 and ctl["state_timeout"] == 0.4 and "integrator" not in ctl
    for old, new, reason in (
            ("state_timeout", "state_timeot", "/**/controller_node: state_timeot: unknown controller_node parameter "
                                              "(did you mean 'state_timeout'?)"),
            ("cmd_timeout", "state_timeout", "/**/dynamics_node: state_timeout: not a dynamics_node parameter: a "
                                             "controller_node one"),
            ("kp: 4.0", "kpp: 4.0", "/**: kpp: unknown parameter of every node"),
            ("integrator: rk4", "integrator: [rk4,\n", "not valid YAML")):
        params.write_text(PARAMS.replace(old, new, 1))
        with pytest.raises(ScenarioError) as e:
            load_scenario(path)
        assert e.value.key == "robots[0].params" and str(params) in str(e.value), str(e.value)
        assert reason in str(e.value) and "\n" not in str(e.value), str(e.value)


# --------------------------------------------------------------------------------- real processes


@pytest.mark.ros
def test_limits_set_in_the_scenario_reach_the_nodes(tmp_path):
    """controller: max_wrench, max_effort, max_time_jump and dynamics: cmd_timeout (and the dynamics node's
    max_wrench when it declares one) as the started nodes report them."""
    pytest.importorskip("rclpy")
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import GetParameters
    from ros_helpers import Probe, ros_env_defaults, running

    from mbs_ros.process import NodeProcess

    ros_env_defaults()
    ns = "limits"
    ctl_set = {"max_wrench": [12.5, 3.25], "max_effort": [1.5, 0.75], "max_time_jump": 0.35}
    dyn_set = {"cmd_timeout": 0.25}
    if "max_wrench" in declared_parameters("dynamics"):
        dyn_set["max_wrench"] = [40.0, 8.0]
    text = ASV.format(ns=ns).replace("kd: 6.0", "kd: 6.0, " + ", ".join(f"{k}: {v}" for k, v in ctl_set.items()))
    text = text.replace("integrator: rk4", "integrator: rk4, " + ", ".join(f"{k}: {v}" for k, v in dyn_set.items()))
    specs = {s.role: s for s in node_specs(load_scenario(scenario(tmp_path, text)))}
    procs = {}
    for role in ("dynamics", "controller"):
        spec = specs[role]
        params = tmp_path / f"{role}.params.yaml"
        params.write_text(spec.params_yaml())
        procs[role] = NodeProcess(spec.module, name=spec.name, namespace=spec.namespace, params_file=params,
                                  log_file=tmp_path / f"{role}.log")

    def value(v):
        return {ParameterType.PARAMETER_DOUBLE: lambda: v.double_value,
                ParameterType.PARAMETER_DOUBLE_ARRAY: lambda: list(v.double_array_value)}[v.type]()

    with running(procs), Probe("scenario_limits_probe", TIMEOUT) as probe:
        for role, wanted in (("controller", ctl_set), ("dynamics", dyn_set)):
            names = sorted(wanted)
            got = probe.call(GetParameters, f"/{ns}/{role}_node/get_parameters", GetParameters.Request(names=names),
                             resend_after=5.0,
                             alive=list(procs.values()))
            assert {n: value(v) for n, v in zip(names, got.values)} == wanted, role
        for p in procs.values():
            assert "ignoring unknown parameters" not in p.log_text(), p.log_text()


# ------------------------------------------------------------------ sensors, estimator, state_source (issue 18)

ROV = """
physics_rate: 1000.0
control_rate: 100.0
lockstep: true
sim_time: true
robots:
  - namespace: rov
    model: config/robots/bluerov2_heavy_alpha5.yaml
    sensors: {sensors}
    initial: {{position: [1.0, 2.0, -5.0], rpy: [0.0, 0.0, 0.3], twist: [0.2, 0.0, 0.0, 0.0, 0.0, 0.0]}}
    controller: {{law: computed_torque, state_source: {source}}}
    estimator: {{imu: imu, dvl: dvl, depth: depth, compass: compass, encoders: encoders{extra}}}
"""
SENSORS = str(ROOT / "config" / "sensors" / "bluerov2_heavy_alpha5.yaml")


def rov(tmp_path, source="estimate", extra="", sensors=SENSORS, edit=None):
    text = ROV.format(sensors=sensors, source=source, extra=extra)
    if edit is not None:
        text = text.replace(*edit)
    return scenario(tmp_path, text)


def test_estimator_key_starts_the_estimator_with_the_scenario_s_model_sensors_prior_and_rates(tmp_path):
    """The robot's estimator mapping starts estimator_node in its namespace with the model, the sensors file, the
    prior mean from the robot's initial state (the body-frame initial twist turned into a world velocity by the
    initial yaw: closed form [0.2 cos 0.3, 0.2 sin 0.3, 0]), the physics and control rates, lockstep and sim
    time; the controller gets state_source estimate and the dynamics node the sensors file."""
    specs = by_label(node_specs(load_scenario(rov(tmp_path))))
    est, ctl, dyn = specs["rov/estimator_node"], specs["rov/controller_node"], specs["rov/dynamics_node"]
    assert (est.executable, est.module, est.namespace) == ("estimator_node", "mbs_ros.nodes.estimator_node", "/rov")
    p = est.parameters
    assert p["sensors"] == dyn.parameters["sensors"] == SENSORS
    assert p["model_file"].endswith("config/robots/bluerov2_heavy_alpha5.yaml")
    assert (p["imu"], p["dvl"], p["depth"], p["compass"], p["encoders"]) == ("imu", "dvl", "depth", "compass",
                                                                             "encoders")
    assert p["initial_position"] == [1.0, 2.0, -5.0] and p["initial_rpy"] == [0.0, 0.0, 0.3]
    assert p["initial_velocity"] == pytest.approx([0.2 * 0.955336489125606, 0.2 * 0.29552020666133955, 0.0],
                                                  abs=1e-12)
    assert (p["physics_rate"], p["control_rate"], p["lockstep"], p["use_sim_time"]) == (1000.0, 100.0, True, True)
    assert ctl.parameters["state_source"] == "estimate"
    roles = [s.role for s in node_specs(load_scenario(rov(tmp_path)))]
    assert roles.index("estimator") > roles.index("controller")


STATE_SOURCE_CASES = {
    # name -> (scenario edits, key path, fragment of the reason)
    "bad_value": (dict(source="estimated"), "robots[0].controller.state_source", "must be one of truth, estimate"),
    "estimate_without_estimator": (dict(edit=("    estimator: {imu: imu, dvl: dvl, depth: depth, compass: compass, "
                                              "encoders: encoders}\n", "")),
                                   "robots[0].controller.state_source", "estimate needs an estimator"),
    "unknown_estimator_key": (dict(extra=", publish_rat: 20.0"), "robots[0].estimator.publish_rat",
                              "unknown estimator_node parameter (did you mean 'publish_rate'?)"),
    "managed_estimator_key": (dict(extra=", initial_position: [0.0, 0.0, 0.0]"),
                              "robots[0].estimator.initial_position", "set by the scenario"),
    "unknown_sensor_name": (dict(edit=("imu: imu,", "imu: imu2,")), "robots[0].estimator.imu",
                            "no sensor 'imu2' in"),
    "wrong_sensor_type": (dict(edit=("compass: compass", "compass: dvl")), "robots[0].estimator.compass",
                          "is a dvl, not a magnetometer"),
    "missing_sensors_file": (dict(sensors="config/sensors/nothing_here.yaml"), "robots[0].sensors",
                             "not found"),
}


@pytest.mark.parametrize("case", sorted(STATE_SOURCE_CASES))
def test_sensor_and_estimator_keys_are_refused_naming_the_key(tmp_path, case):
    """Unknown or managed estimator keys, a state_source that is not truth/estimate, estimate without an
    estimator, a role naming no sensor of the file or one of another type, a missing sensors file: each a
    ScenarioError naming the file and the key path."""
    edits, key, fragment = STATE_SOURCE_CASES[case]
    path = rov(tmp_path, **edits)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert err.value.key == key, str(err.value)
    assert fragment in err.value.reason, str(err.value)
    assert str(path) in str(err.value)


def test_a_bad_sensors_file_is_refused_with_file_sensor_and_key(tmp_path):
    """A sensors file with a negative DVL rate is refused when the scenario loads (before any node starts), under
    the robot's sensors key, with the sensors file's own message: file, sensors[i] (name) and key."""
    bad = tmp_path / "bad_sensors.yaml"
    bad.write_text(Path(SENSORS).read_text().replace("    rate: 10.0\n", "    rate: -10.0\n"))
    with pytest.raises(ScenarioError) as err:
        load_scenario(rov(tmp_path, sensors=str(bad)))
    assert err.value.key == "robots[0].sensors"
    assert str(bad) in err.value.reason and "sensors[1] (dvl)" in err.value.reason and "rate" in err.value.reason


def test_truth_is_the_default_and_needs_no_estimator(tmp_path):
    """Without state_source the controller takes the true state (its parameter's default), and an estimator may
    still run beside it (for comparison)."""
    path = rov(tmp_path, edit=("controller: {law: computed_torque, state_source: estimate}",
                               "controller: {law: computed_torque}"))
    specs = by_label(node_specs(load_scenario(path)))
    assert specs["rov/controller_node"].parameters.get("state_source", "truth") == "truth"
    assert "rov/estimator_node" in specs
    assert parameters.table("controller")["state_source"].default == "truth"


# Values checked by the nodes' tables when the scenario loads (before: only when the node started, or, for the
# globals, against bounds written in the scenario loader): edit of ASV -> key path, the reason.
TABLE_RULES = {
    "choices": (("law: computed_torque", "law: computed_torque, lqr_scaling: bogus"),
                "robots[0].controller.lqr_scaling", "must be one of mass, none, got 'bogus'"),
    "off_rule": (("integrator: rk4", "integrator: rk4, energy_rate: 0.0001"), "robots[0].dynamics.energy_rate",
                 "must be 0 (off) or >= 0.001 Hz, got 0.0001"),
    "size": (("integrator: rk4", "integrator: rk4, current: [0.1, 0.2]"), "robots[0].dynamics.current",
             "must be a list of 3 numbers"),
    "each_entry": (("kd: 6.0", "kd: 6.0, thruster_weights: [1.0, 1.0e+9]"), "robots[0].controller.thruster_weights",
                   "must lie in [1e-06, 1e+06] (each entry), got 1e+09"),
    "free_text_not_quoted": (("law: computed_torque", "law: 'a secret, text'"), "robots[0].controller.law",
                             "not a valid string value, got a text of 14 characters"),
    "global_range": (("physics_rate: 100.0", "physics_rate: 0.5"), "physics_rate", "must be >= 1, got 0.5"),
    "global_cross_rule": (("publish_rate: 20.0", "publish_rate: 200.0"), "publish_rate",
                          "publish_rate (200 Hz) must not exceed physics_rate (100 Hz)"),
    "control_rate_rule": (("control_rate: 20.0", "control_rate: 200.0"), "control_rate",
                          "control_rate (200 Hz) must not exceed physics_rate (100 Hz)"),
}


@pytest.mark.parametrize("case", sorted(TABLE_RULES))
def test_values_are_checked_by_the_parameter_tables_when_the_scenario_loads(tmp_path, case):
    (old, new), key, reason = TABLE_RULES[case]
    text = ASV.format(ns="asv")
    assert old in text
    path = scenario(tmp_path, text.replace(old, new))
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert e.value.key == key and reason in e.value.reason, str(e.value)
