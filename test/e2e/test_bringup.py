"""Scenario bring-up: scenario YAML -> node specs (unit, no ROS), and the no-launch runner with real processes.

- every scenario in config/scenarios loads and gives the node specs the launch files start; global settings
  (rates, sim_time, lockstep, real_time_factor) reach the right nodes; parameter files merge under the
  scenario's keys; fleet templates expand; broken scenarios raise a ScenarioError naming the file and the key;
- ``python -m mbs_ros.bringup`` runs the vehicle-manipulator as real processes with ``--record`` and ``--plot``:
  odom, joint_states and /tf are recorded, the controller tracks (the error decays), exit code 0;
- the manipulator scenario on simulation time in lockstep: ``--duration`` counts /clock seconds;
- SIGINT or SIGTERM to the runner stops every child cleanly (exit 0, no child left);
- a node refusing its parameters makes the runner exit non-zero, naming it, with no child left;
- the recording is read back after the stop: its true count, or (cut short, a half-written record, the recorder
  SIGKILL'd mid-run) a loud error naming the recover command, and exit code 1.

Each runner test waits for a line of the runner's output or its exit, with a timeout; ROS domain from conftest.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mbs_ros.bringup import (
    DEFAULT_RECORD,
    ScenarioError,
    list_scenarios,
    load_scenario,
    node_specs,
    record_topics,
)
from mbs_ros.bringup import runner as bringup_runner

from mbs_ros.packages import is_uri, resolve_uri

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "config" / "scenarios"
# scenarios of robots from example-robot-data (a test dependency): run where it is installed
REAL_ROBOTS = {"panda": "/panda", "solo12": "/solo"}
HAVE_ROBOT_DATA = resolve_uri("package://example-robot-data/robots/panda_description/urdf/panda.urdf").path is not None
RUN_TIMEOUT = 120.0  # a whole runner invocation on a loaded 2-core machine


# ------------------------------------------------------------------------------------ unit: specs


def by_label(specs):
    return {s.label: s for s in specs}


def assert_clean_logs(logs, allowed=()):
    """No traceback in any node log, and nothing at WARN or above but lines containing one of ``allowed``; returns
    those lines."""
    seen = []
    for log in logs.glob("*.log"):
        text = log.read_text()
        assert "Traceback" not in text, log
        bad = [line for line in text.splitlines() if re.match(r"\[(WARN|ERROR|FATAL)\]", line)]
        seen += [line for line in bad if any(a in line for a in allowed)]
        bad = [line for line in bad if not any(a in line for a in allowed)]
        assert not bad, (log, bad)
    return seen


def test_every_scenario_loads_and_gives_node_specs():
    names = {p.stem for p in list_scenarios()}
    assert {"vehicle_manipulator", "manipulator", "vehicle", "scara", "fleet", "rov_alpha5", "vessel"} | set(
        REAL_ROBOTS) <= names
    for path in list_scenarios():
        if path.stem in REAL_ROBOTS and not HAVE_ROBOT_DATA:
            with pytest.raises(ScenarioError, match="package 'example-robot-data' not found"):
                load_scenario(path)  # without the package: one line naming it, not a traceback
            continue
        scenario = load_scenario(path)
        specs = node_specs(scenario)
        assert specs, path
        for robot in scenario.robots:
            mine = [s for s in specs if s.robot == robot.name]
            estimator = [s for s in mine if s.role == "estimator"]  # a robot on sensors: its own test file
            assert len(estimator) == (robot.estimator is not None), path
            mine = [s for s in mine if s.role != "estimator"]
            assert [s.role for s in mine] == ["dynamics", "controller", "reference"], path
            for s in mine:
                assert s.namespace == robot.namespace and s.package == "mbs_ros"
                assert s.module == f"mbs_ros.nodes.{s.executable}"
                for value in s.parameters.values():  # launch_ros and rcl's parser: no empty lists, no ints
                    assert value != [] and not (isinstance(value, int) and not isinstance(value, bool))
            dyn, ctl, ref = mine
            if is_uri(dyn.parameters["model_file"]):  # handed to the nodes as written; it resolves here
                assert resolve_uri(dyn.parameters["model_file"]).path is not None
            else:
                assert Path(dyn.parameters["model_file"]).is_file()
            assert ctl.parameters["model_file"] == dyn.parameters["model_file"]
            assert dyn.parameters["base_group"] == ctl.parameters["base_group"] == robot.base_group
            if robot.floating:
                n = len(ref.parameters["base_times"])
                assert len(ref.parameters["base_positions"]) == len(ref.parameters["base_rpy"]) == 3 * n
            if "joint_times" in ref.parameters or "joint_positions" in ref.parameters:  # not the vessel's
                assert (len(ref.parameters["joint_positions"])
                        == len(ref.parameters["joint_times"]) * len(ref.parameters["joint_names"]))


def test_vehicle_manipulator_specs():
    scenario = load_scenario("vehicle_manipulator")
    assert scenario.path == SCENARIOS / "vehicle_manipulator.yaml"
    assert scenario.duration == 6.0 and not scenario.sim_time and not scenario.lockstep
    specs = by_label(node_specs(scenario))
    assert list(specs) == ["uvms/dynamics_node", "uvms/controller_node", "uvms/reference_node"]
    dyn = specs["uvms/dynamics_node"].parameters
    assert dyn["model_file"] == str(ROOT / "config" / "robots" / "uvms_6dof.yaml")
    assert dyn["physics_rate"] == 500.0 and dyn["publish_rate"] == 100.0
    assert dyn["initial_position"] == [0.0, 0.0, -5.0]
    assert dyn["initial_joint_positions"] == [0.0, 0.6, -1.2, 0.0, 0.6, 0.0]
    for absent in ("publish_clock", "use_sim_time", "lockstep", "real_time_factor", "control_rate"):
        assert absent not in dyn  # time features only when the scenario asks for them
    ctl = specs["uvms/controller_node"].parameters
    assert (ctl["law"], ctl["kp"], ctl["kd"], ctl["control_rate"]) == ("computed_torque", 9.0, 6.0, 100.0)
    ref = specs["uvms/reference_node"].parameters
    assert ref["joint_names"] == [f"joint{i}" for i in range(1, 7)]
    assert ref["base_times"] == [0.0, 2.0, 4.0] and ref["min_subscribers"] == 1.0
    assert ref["base_positions"][:3] == [0.2, -0.1, -4.9]
    cmd = specs["uvms/dynamics_node"].command("p.yaml", python="python")
    assert cmd == ["python", "-m", "mbs_ros.nodes.dynamics_node", "--ros-args", "-r", "__ns:=/uvms", "-r",
                   "__node:=dynamics_node", "--params-file", "p.yaml"]
    doc = yaml.safe_load(specs["uvms/reference_node"].params_yaml())
    assert doc == {"/**": {"ros__parameters": ref}}


def test_parameter_file_merged_under_the_scenario_keys():
    specs = by_label(node_specs(load_scenario("manipulator")))  # params: config/arm_6dof_fixed.yaml
    dyn, ctl = specs["arm/dynamics_node"].parameters, specs["arm/controller_node"].parameters
    assert dyn["integrator"] == "rk4" and dyn["cmd_timeout"] == 0.5  # from the parameter file
    assert dyn["diagnostics_rate"] == 10.0  # the scenario's dynamics: key overrides the file's 1.0
    assert ctl["model_file"] == dyn["model_file"] == str(ROOT / "config" / "robots" / "arm_6dof_fixed.yaml")
    assert ctl["state_timeout"] == 0.2 and ctl["kp"] == 16.0
    assert "base_reference" not in str(specs["arm/reference_node"].parameters)


def test_time_settings_reach_every_node():
    scenario = load_scenario("manipulator", overrides=dict(sim_time=True, lockstep=True, real_time_factor=0.0,
                                                           control_rate=50.0))
    specs = by_label(node_specs(scenario, reference_subscribers=2))
    dyn = specs["arm/dynamics_node"].parameters
    assert dyn["publish_clock"] is True and dyn["lockstep"] is True and dyn["real_time_factor"] == 0.0
    assert dyn["control_rate"] == 50.0
    ctl = specs["arm/controller_node"].parameters
    assert ctl["lockstep"] is True and ctl["control_rate"] == 50.0
    for s in specs.values():
        assert s.parameters["use_sim_time"] is True
    assert specs["arm/reference_node"].parameters["min_subscribers"] == 2.0
    assert record_topics(scenario)[-1] == "/clock"


def test_fleet_template_expands():
    scenario = load_scenario("fleet")
    assert [r.namespace for r in scenario.robots] == ["/uvms1", "/uvms2", "/uvms3"]
    scenario = load_scenario("fleet", count=5)
    assert [r.name for r in scenario.robots] == [f"uvms{i}" for i in range(1, 6)]
    specs = by_label(node_specs(scenario))
    assert len(specs) == 15
    assert specs["uvms4/dynamics_node"].parameters["initial_position"] == [0.0, 12.0, -5.0]
    assert specs["uvms4/reference_node"].parameters["base_positions"][:3] == [0.2, 12.0, -4.9]
    with pytest.raises(ScenarioError, match="no robot is a fleet template") as e:
        load_scenario("vehicle", count=2)
    assert e.value.key == "robots"


def test_record_topics():
    scenario = load_scenario("fleet", count=2)
    topics = record_topics(scenario)
    assert topics == ["/uvms1/odom", "/uvms2/odom", "/uvms1/joint_states", "/uvms2/joint_states",
                      "/uvms1/joint_reference", "/uvms2/joint_reference", "/uvms1/base_reference",
                      "/uvms2/base_reference", "/uvms1/robot_description", "/uvms2/robot_description", "/tf",
                      "/tf_static", "/diagnostics"]
    scara = load_scenario("scara")  # no record key: the default set, and /clock (sim_time)
    assert record_topics(scara) == [t if t.startswith("/") else f"/scara/{t}" for t in DEFAULT_RECORD] + ["/clock"]
    assert record_topics(scara, "all") is None


def test_checking_a_scenario_imports_no_ros_and_no_node_module():
    """load_scenario checks every key against the nodes' parameter tables without rclpy or a node module (a
    scenario is checked where ROS is not installed, and bringup.scenario sits below the nodes' processes)."""
    code = ("import sys; from mbs_ros.scenario.schema import load_scenario, node_specs; "
            "[node_specs(load_scenario(n)) for n in ('manipulator', 'vehicle_manipulator', 'fleet')]; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy' or m.endswith('_node')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_cli_print_and_scenario_errors(tmp_path, capsys):
    assert bringup_runner.main(["vehicle", "--print", "--log-dir", str(tmp_path / "print")]) == 0
    out = capsys.readouterr().out
    assert "-m mbs_ros.nodes.controller_node --ros-args -r __ns:=/asv -r __node:=controller_node" in out
    assert "base_group: se2" in out
    # pasteable from any directory: every --params-file is an absolute path to the file it names, written
    files = [Path(f) for f in re.findall(r"--params-file (\S+)", out)]
    assert len(files) == 3 and all(f.is_absolute() and f.is_file() for f in files), files
    assert {f.parent for f in files} == {(tmp_path / "print").resolve()}
    assert yaml.safe_load(files[0].read_text())["/**"]["ros__parameters"]["law"] == "computed_torque"
    assert not [line for line in out.splitlines() if line and not line.startswith(("#", sys.executable))]
    # a lockstep scenario on simulation time starts paused at t = 0: the files say so, and how to resume
    assert bringup_runner.main(["manipulator", "--print", "--log-dir", str(tmp_path / "print2")]) == 0
    out = capsys.readouterr().out
    params = yaml.safe_load((tmp_path / "print2" / "arm_dynamics_node.params.yaml").read_text())["/**"]
    assert params["ros__parameters"]["start_paused"] is True
    ref = yaml.safe_load((tmp_path / "print2" / "arm_reference_node.params.yaml").read_text())["/**"]
    assert ref["ros__parameters"]["start_time"] == 0.0
    assert "ros2 service call /arm/dynamics_node/pause std_srvs/srv/SetBool '{data: false}'" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("robots: []\n")
    assert bringup_runner.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "robots" in err
    assert bringup_runner.main(["no_such_scenario"]) == 2
    assert "vehicle_manipulator" in capsys.readouterr().err  # lists the known scenarios


UVMS = """
robots:
  - namespace: uvms
    model: config/robots/uvms_6dof.yaml
    initial: {position: [0.0, 0.0, -5.0], joint_positions: [0.0, 0.6, -1.2, 0.0, 0.6, 0.0]}
    controller: {law: computed_torque, kp: 9.0, kd: 6.0}
    reference:
      base: [{time: 1.0, position: [0.5, 0.0, -5.0], rpy: [0.0, 0.0, 0.3]}]
      joints: [{time: 1.0, positions: [0.1, 0.2, -1.0, 0.0, 0.5, 0.0]}]
"""

# (edit of the valid UVMS scenario: old -> new, or None -> the whole file), the key the error must name, a
# fragment of the reason
BROKEN = {
    "unknown_global": (("robots:", "physics_rat: 500\nrobots:"), "physics_rat", "did you mean 'physics_rate'"),
    "bad_rate": (("robots:", "physics_rate: -1\nrobots:"), "physics_rate", "must be >= 1"),
    "publish_above_physics": (("robots:", "physics_rate: 100\npublish_rate: 200\nrobots:"), "publish_rate",
                              "must not exceed physics_rate"),
    "sim_time_text": (("robots:", "sim_time: maybe\nrobots:"), "sim_time", "true or false"),
    "rtf_zero_wall": (("robots:", "real_time_factor: 0\nrobots:"), "real_time_factor", "needs sim_time"),
    "no_robots": ((None, "physics_rate: 500.0\nrobots: []\n"), "robots", "non-empty list"),
    "no_namespace": (("  - namespace: uvms\n", "  - \n"), "robots[0].namespace", "missing"),
    "bad_namespace": (("namespace: uvms", "namespace: 2uvms"), "robots[0].namespace", "not a valid ROS namespace"),
    "unknown_robot_key": (("    model:", "    modle: x\n    model:"), "robots[0].modle", "did you mean 'model'"),
    "missing_model": (("config/robots/uvms_6dof.yaml", "config/robots/nope.yaml"), "robots[0].model", "not found"),
    "bad_base": (("    initial:", "    base_group: se4\n    initial:"), "robots[0].base_group", "must be one of"),
    "joint_count": (("joint_positions: [0.0, 0.6, -1.2, 0.0, 0.6, 0.0]", "joint_positions: [0.0, 0.6]"),
                    "robots[0].initial.joint_positions", "6 entries"),
    "rpy_length": (("rpy: [0.0, 0.0, 0.3]", "rpy: [0.3]"), "robots[0].reference.base[0].rpy", "3 entries"),
    "bad_law": (("law: computed_torque", "law: sliding_mode"), "robots[0].controller.law", "must be one of"),
    "gain_length": (("kp: 9.0", "kp: [1.0, 2.0]"), "robots[0].controller.kp", "12 entries"),
    "managed_key": (("kd: 6.0", "kd: 6.0, model_file: x.urdf"), "robots[0].controller.model_file",
                    "set by the scenario"),
    "waypoint_text": (("time: 1.0, positions", "time: soon, positions"), "robots[0].reference.joints[0].time",
                      "must be a number"),
    "waypoint_order": (("joints: [{time: 1.0, positions: [0.1, 0.2, -1.0, 0.0, 0.5, 0.0]}]",
                        "joints: [{time: 1.0, positions: [0.1, 0.2, -1.0, 0.0, 0.5, 0.0]}, "
                        "{time: 0.5, positions: [0.1, 0.2, -1.0, 0.0, 0.5, 0.0]}]"),
                       "robots[0].reference.joints[1].time", "increase strictly"),
    "unknown_joint": (("      joints:", "      joint_names: [joint9]\n      joints:"),
                      "robots[0].reference.joint_names", "unknown joint"),
    "se2_off_plane": ((None, "robots:\n  - {namespace: asv, model: config/robots/asv_2link.yaml, "
                             "initial: {position: [0.0, 0.0, -5.0]}}\n"), "robots[0].initial", "se2"),
    "se2_roll_waypoint": ((None, "robots:\n  - namespace: asv\n    model: config/robots/asv_2link.yaml\n"
                                 "    reference: {base: [{time: 1.0, position: [1.0, 0.0, 0.0], rpy: [0.2, 0.0, 0.0]}]}\n"),
                          "robots[0].reference.base[0]", "only rotates about z"),
    "fixed_base_reference": ((None, "robots:\n  - namespace: arm\n    model: config/robots/arm_6dof_fixed.yaml\n"
                                    "    reference: {base: [{time: 1.0, position: [1.0, 0.0, 0.0]}]}\n"),
                             "robots[0].reference.base", "fixed base"),
    "fleet_without_i": (("  - namespace: uvms\n", "  - namespace: uvms\n    count: 2\n"), "robots[0].namespace",
                        "'{i}'"),
    "not_yaml": (("robots:", "robots: [\n"), "", "not valid YAML"),
    "sim_time_fleet": ((None, "sim_time: true\nrobots:\n  - {namespace: 'uvms{i}', count: 2, "
                               "model: config/robots/uvms_6dof.yaml}\n"), "sim_time", "one /clock per graph"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_scenario_names_file_and_key(tmp_path, case):
    (old, new), key, reason = BROKEN[case]
    assert old is None or old in UVMS, case
    path = tmp_path / f"{case}.yaml"
    path.write_text(new if old is None else UVMS.replace(old, new, 1))
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert e.value.file == str(path)
    assert e.value.key == key, str(e.value)
    assert reason in str(e.value)
    assert str(e.value).startswith(f"{path}: {key}" if key else str(path))


def test_valid_scenario_template_loads(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(UVMS)
    assert load_scenario(path).robots[0].joint_names == tuple(f"joint{i}" for i in range(1, 7))


# ----------------------------------------------------------------------------------- the runner


class Run:
    """``python -m mbs_ros.bringup …`` as a child process, its output collected line by line."""

    def __init__(self, *args, cwd=ROOT):
        self.lines = []
        self.proc = subprocess.Popen([sys.executable, "-m", "mbs_ros.bringup", *map(str, args)], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self):
        return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=RUN_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in self.lines):
            if self.proc.poll() is not None:
                self.reader.join(timeout=5)
                if any(re.search(pattern, line) for line in self.lines):
                    return
                raise AssertionError(f"runner exited {self.proc.returncode} before {pattern!r}:\n{self.text}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {pattern!r}:\n{self.text}")
            time.sleep(0.05)

    def wait(self, timeout=RUN_TIMEOUT):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"runner still running after {timeout} s:\n{self.text}") from None
        self.reader.join(timeout=5)
        return rc

    def exit_codes(self):
        """label -> exit code, from the runner's ``exit codes:`` line."""
        line = next(line for line in self.lines if line.startswith("bringup: exit codes: "))
        return {k: int(v) for k, v in (item.rsplit(" ", 1) for item in line.split(": ", 2)[2].split(", "))}

    def child_pids(self):
        return [int(m.group(1)) for m in re.finditer(r"started \S+ \(pid (\d+)\)", self.text)]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.child_pids():  # never leave a node behind, even when a test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def assert_gone(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    assert not alive, f"child processes still running: {alive}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # an exited child of the (exited) runner is reaped by init; a zombie counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def run():
    runs = []

    def start(*args):
        r = Run(*args)
        runs.append(r)
        return r

    yield start
    for r in runs:
        r.close()


def test_runner_tracks_records_and_plots(run, tmp_path):
    from mbs_ros import plot

    bag, plots = tmp_path / "run.mcap", tmp_path / "plots"
    r = run("vehicle_manipulator", "--duration", 3, "--record", bag, "--plot", plots, "--log-dir", tmp_path / "logs")
    rc = r.wait()
    assert rc == 0, r.text
    assert r.exit_codes() == {"recorder": 0, "uvms/controller_node": 0, "uvms/dynamics_node": 0,
                              "uvms/reference_node": 0}, r.text
    assert len(r.child_pids()) == 4
    assert_gone(r.child_pids())
    # the recording: odom, joint_states, /tf appeared on the graph and were recorded; references too
    rec = plot.load(bag, progress="never")
    for topic in ("/uvms/odom", "/uvms/joint_states", "/tf", "/diagnostics", "/uvms/joint_reference",
                  "/uvms/base_reference"):
        assert topic in rec.topics, sorted(rec.topics)
    assert len(rec.odom["/uvms"]) > 20
    # the controller tracks: the error of the step at the reference's start decays
    joints = plot.joint_tracking(rec, "/uvms")
    base = plot.base_tracking(rec, "/uvms")
    valid = ~np.isnan(joints.error_norm)
    j_err = joints.error_norm[valid]
    assert j_err[0] > 0.3 and j_err[-1] < 0.3 * j_err[0], j_err
    p_err = base.position_error[~np.isnan(base.position_error)]
    assert p_err[0] > 0.15 and p_err[-1] < 0.3 * p_err[0], p_err
    # README's list of the demo's plots (make demo runs this scenario)
    assert {p.name for p in plots.glob("*.png")} == {"uvms_trajectory.png", "uvms_joints.png", "uvms_base.png",
                                                    "uvms_tracking.png", "uvms_ports.png", "uvms_energy.png"}
    # the demo's table of figures (make demo runs this scenario and prints it)
    from mbs_ros import demo

    rows = {row["figure"]: row for row in demo.figures(bag)}
    assert float(rows["uvms: base position error [m]"]["reference start"]) > 0.15
    assert float(rows["uvms: joint error |q - q_ref| [rad]"]["end"].split()[0]) < 0.3 * j_err[0]
    residual = rows["uvms/dynamics_node: balance residual E - E_ref - W [J]"]
    assert abs(float(residual["peak"])) < 1e-3  # the energy bookkeeping closes
    assert "figure" in demo.table(list(rows.values())).splitlines()[0]


def test_the_runner_learns_the_references_and_their_start_from_the_topics(tmp_path):
    """The runner's graph subscribes each reference topic (reliable, transient local, as the reference node
    publishes) and keeps each reference's header stamp; the run waits for every topic of every reference node and
    starts --duration at the later of its /clock reading and the references' stamps, whatever the nodes log."""
    import rclpy
    from builtin_interfaces.msg import Time
    from rclpy.context import Context
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from trajectory_msgs.msg import JointTrajectory, MultiDOFJointTrajectory

    from ros_helpers import poll_until

    ns = f"/refs_{os.getpid()}"
    graph = bringup_runner._Graph(watch_clock=False, references=[f"{ns}/joint_reference", f"{ns}/base_reference"])
    ctx = Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("fake_reference_node", namespace=ns, context=ctx)
    try:
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        joints = JointTrajectory()
        joints.header.stamp = Time(sec=3, nanosec=90_000_000)
        node.create_publisher(JointTrajectory, "joint_reference", latched).publish(joints)
        base = MultiDOFJointTrajectory()  # stamp 0: the controller starts it at its newest state
        node.create_publisher(MultiDOFJointTrajectory, "base_reference", latched).publish(base)
        poll_until(lambda: len(graph.references) == 2, lambda: time.sleep(0.05), 60.0, "both references at the graph")
        assert graph.references == {f"{ns}/joint_reference": 3_090_000_000, f"{ns}/base_reference": 0}
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        graph.close()

    # the runner's wait and start, on a graph that has them or not (the nodes' logs say nothing)
    runner = bringup_runner.Runner(load_scenario("manipulator"), log_dir=tmp_path, quiet=True, startup_timeout=0.3)
    runner.paused = []
    ref = next(s for s in runner.specs if s.role == "reference")
    runner.children = [bringup_runner.Child(ref.label, _FakeProcess("[INFO] [1.0] [x]: nothing\n"), spec=ref)]
    runner._check_children = lambda: None
    topic = f"{ref.namespace}/joint_reference"

    class Graph:
        references = {}
        now_ns = 2_000_000_000

    assert runner._wait_until_running(Graph, Graph) is None and "no reference received" in runner._failure
    runner._failure = None
    Graph.references = {topic: 3_090_000_000}
    assert runner._wait_until_running(Graph, Graph) == 3_090_000_000  # the reference starts after the clock
    Graph.now_ns = 5_000_000_000
    assert runner._wait_until_running(Graph, Graph) == 5_000_000_000


class _FakeProcess:
    """A child's process as the runner's readiness checks see it: a log (which they must not read) and no exit."""

    def __init__(self, log=""):
        self.log = log
        self.log_path = "fake.log"
        self.returncode = None

    def log_text(self):
        return self.log

    def log_tail(self, _n):
        return self.log


def test_paused_start_resumes_on_the_controllers_installed_counters_only(tmp_path):
    """A paused dynamics node is resumed once its controller's ~/diagnostics count the reference installed
    (``installed_joint_reference`` >= 1): received is not enough, the controller's log wording counts for nothing,
    and a rejection fails the run."""
    scenario = load_scenario("manipulator", overrides={"sim_time": True, "lockstep": True})
    runner = bringup_runner.Runner(scenario, log_dir=tmp_path, quiet=True)
    (dyn,) = runner.paused
    ctl = next(s for s in runner.specs if s.role == "controller" and s.robot == dyn.robot)
    ref = next(s for s in runner.specs if s.role == "reference" and s.robot == dyn.robot)
    assert bringup_runner.reference_topics(ref) == ["joint_reference"]
    process = _FakeProcess("[INFO] [1.0] [arm.controller_node]: joint_reference: 3 points over 4 s\n")
    runner.children.append(bringup_runner.Child(ctl.label, process, ctl))

    class Graph:
        diagnostics = {}

    held = runner._holds_reference(dyn, Graph)
    topic = f"{ctl.namespace}/{ctl.name}/diagnostics"
    assert not held()  # no status yet; the log's "installed" line does not count
    Graph.diagnostics[topic] = (3, {"received_joint_reference": 1.0, "rejected_joint_reference": 0.0})
    assert not held()  # received, not installed yet
    Graph.diagnostics[topic] = (4, {"received_joint_reference": 1.0, "installed_joint_reference": 1.0})
    assert held()
    assert runner._failure is None
    Graph.diagnostics[topic] = (5, {"installed_joint_reference": 1.0, "rejected_joint_reference": 1.0})
    assert not held()
    assert "rejected its joint_reference" in runner._failure
    # a robot with base and joint references needs both installed
    assert not bringup_runner.holds_references({"installed_joint_reference": 2.0},
                                               ["joint_reference", "base_reference"])
    assert bringup_runner.holds_references({"installed_joint_reference": 2.0, "installed_base_reference": 1.0},
                                           ["joint_reference", "base_reference"])
    assert not bringup_runner.holds_references({"installed_base_reference": "1"}, ["base_reference"])


def test_reference_nodes_wait_for_the_recorders_subscriptions_in_the_graph(tmp_path):
    """A reference node starts once the ROS graph shows the recorder (node ``bringup_recorder``) subscribing the
    robot's state, not once the recorder's log says so."""
    scenario = load_scenario("manipulator")
    runner = bringup_runner.Runner(scenario, record=tmp_path / "r.mcap", log_dir=tmp_path, quiet=True,
                                   startup_timeout=0.3)
    ref = next(s for s in runner.specs if s.role == "reference")
    runner.recorder = bringup_runner.Child("recorder", _FakeProcess(
        "".join(f"[INFO] [1.0] [bringup_recorder]: recording {ref.namespace}/{t} (x/msg/Y)\n"
                for t in ("odom", "joint_states"))))
    asked = []

    class Graph:
        listening = set()

        @classmethod
        def subscribed(cls, topic, node, namespace):
            asked.append((topic, node, namespace))
            return (topic, node, namespace) in cls.listening

    assert not runner._wait_for_recorder(Graph, ref)
    assert "the recorder did not record" in runner._failure
    state = {f"{ref.namespace}/odom", f"{ref.namespace}/joint_states"}
    assert asked and {t for t, _n, _ns in asked} <= state
    runner._failure = None
    Graph.listening = {(t, "bringup_recorder", "/") for t in state}
    assert runner._wait_for_recorder(Graph, ref)


def test_sim_time_lockstep_duration_is_simulation_time(run, tmp_path):
    """manipulator.yaml runs on /clock in lockstep; as fast as possible here, --duration counts /clock seconds."""
    from mbs_ros import plot

    bag = tmp_path / "lockstep.mcap"
    r = run("manipulator", "--set", "real_time_factor=0", "--duration", 2, "--record", bag,
            "--log-dir", tmp_path / "logs")
    assert r.wait() == 0, r.text
    assert "for 2 s of simulation time (/clock)" in r.text
    rec = plot.load(bag, progress="never")
    assert "/clock" in rec.topics
    (ref,) = rec.joint_reference["/arm"]
    # the dynamics node waited paused at t = 0 until the controller held the reference, which starts at t = 0
    assert ref.stamp == 0 and "arm/dynamics_node: resumed at t = 0.000000000 s" in r.text
    # the dynamics node pauses itself at t = 2 s (pause_at) and the recorder finishes there: the last state is
    # stamped exactly 2 s after the reference's start, t = 0
    stamps = {row[1] for row in rec.joint_states["/arm"]}
    assert max(stamps) - ref.stamp == 2_000_000_000 and "recorder: finishing, up to t = 2.000000000 s" in r.text
    assert stamps == set(range(0, 2_000_000_001, 10_000_000)), sorted(stamps)[-3:]
    joints = plot.joint_tracking(rec, "/arm")
    err = joints.error_norm[~np.isnan(joints.error_norm)]
    assert err[0] > 0.3 and err[-1] < 0.1 * err[0], err


def recorded_states(bag, end_ns=None):
    """topic -> {stamp: exact fields} of a recording's odom and joint_states (a state recorded twice, e.g. sent
    again while the simulation waited paused, must be the same message), up to ``end_ns``."""
    from rclpy.serialization import deserialize_message
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState

    from mbs_ros.nodes import conversions as cv
    from mbs_ros.recording import read_messages
    from ros_helpers import exact_fields

    types = {"odom": Odometry, "joint_states": JointState, "joint_reference": None}
    out = {}
    for _schema, channel, record in read_messages(bag):
        kind = channel.topic.rsplit("/", 1)[-1]
        if kind not in types:
            continue
        if types[kind] is None:
            from trajectory_msgs.msg import JointTrajectory as msg_type
        else:
            msg_type = types[kind]
        m = deserialize_message(record.data, msg_type)
        t = cv.ns_from_time(m.header.stamp)
        if end_ns is not None and t > end_ns:
            continue
        data = exact_fields(m)
        assert out.setdefault(channel.topic, {}).setdefault(t, data) == data, f"{channel.topic}: two at t = {t}"
    return out


def test_lockstep_sim_time_runs_are_reproducible(run, tmp_path):
    """Two runs of manipulator.yaml (lockstep on simulation time, as fast as possible) through the runner record
    bit-identical odom and joint_states (decoded, every field, floats by their bytes) at the same stamps, and the same
    reference, stamped t = 0: the dynamics node starts paused at t = 0 and resumes once the controller holds the
    reference, whatever the processes' start-up took."""
    duration = 2
    states = []
    for i in (1, 2):
        bag = tmp_path / f"run{i}.mcap"
        r = run("manipulator", "--set", "real_time_factor=0", "--duration", duration, "--record", bag,
                "--log-dir", tmp_path / f"logs{i}")
        assert r.wait() == 0, r.text
        assert "arm/dynamics_node: resumed at t = 0.000000000 s" in r.text
        states.append(recorded_states(bag))
    a, b = states
    assert a["/arm/joint_reference"] == b["/arm/joint_reference"] and set(a["/arm/joint_reference"]) == {0}
    compared = 0
    for topic in ("/arm/odom", "/arm/joint_states"):
        # each run ends at exactly t = 2 s (pause_at) and its recorder finishes there: both hold every control period
        # from t = 0 to the end, none skipped, misplaced or beyond
        grid = set(range(0, duration * 1_000_000_000 + 1, 10_000_000))
        sa, sb = a[topic], b[topic]
        assert set(sa) == set(sb) == grid, (sorted(set(sa) ^ grid)[:5], sorted(set(sb) ^ grid)[:5])
        differ = [t for t in sorted(grid) if sa[t] != sb[t]]
        assert not differ, f"{topic}: the runs differ from t = {differ[0] * 1e-9:.2f} s on ({len(differ)} states)"
        compared += len(grid)
    print(f"two manipulator runs: {compared} odom and joint_states messages bit-identical")


def test_warning_summary_counts_distinct_warnings_per_node():
    logs = {
        "arm/dynamics_node": "\n".join([
            "[INFO] [100.000000000] [arm.dynamics_node]: started",
            "[WARN] [101.500000000] [arm.dynamics_node]: falling behind the wall clock by 0.061 s: skipping ahead",
            "[WARN] [103.600000000] [arm.dynamics_node]: falling behind the wall clock by 0.2 s: skipping ahead "
            "(7 more like this since the last one)",
            "[ERROR] [104.000000000] [arm.dynamics_node]: simulation halted at t = 1.5 s (step 750): runaway",
        ]),
        "arm/controller_node": "[WARN] [102.000000000] [arm.controller_node]: state is 0.2 s old: stopped\n"
                               "  a continuation line\n[WARN] [102.5] [arm.controller_node]: state is 0.25 s old: "
                               "stopped",
        "recorder": "[INFO] [99.0] [bringup_recorder]: recording\n",
    }
    w = bringup_runner.warning_summary(logs)
    assert [(x.node, x.level, x.count, x.lines) for x in w] == [
        ("arm/dynamics_node", "WARN", 9, 2), ("arm/controller_node", "WARN", 2, 2), ("arm/dynamics_node", "ERROR", 1, 1)]
    assert w[0].first == "falling behind the wall clock by 0.061 s: skipping ahead" and w[0].first_time == 101.5
    assert w[0].describe(since=100.0) == ("arm/dynamics_node: 9 x WARN, first at +1.5 s: falling behind the wall clock "
                                          "by 0.061 s: skipping ahead")
    assert bringup_runner.warning_summary({"x": "[INFO] [1.0] [x]: fine\n"}) == []


def test_runner_summarises_the_warnings_of_logs_it_deletes(run, tmp_path):
    """A successful run deletes its logs: the runner prints their warnings first, one line per distinct warning with
    its node, count and first occurrence. Here the dynamics node saturates every joint command at 5 N m."""
    text = (SCENARIOS / "manipulator.yaml").read_text()
    assert "      diagnostics_rate: 10.0\n" in text
    path = tmp_path / "weak_arm.yaml"
    path.write_text(text.replace("      diagnostics_rate: 10.0\n", "      diagnostics_rate: 10.0\n      max_effort: 5.0\n"))
    r = run(path, "--set", "real_time_factor=0", "--duration", 1)
    assert r.wait() == 0, r.text
    assert re.search(r"^bringup: warnings in the node logs \(deleted after a successful run \(--log-dir keeps them\)\): "
                     r"\d+ distinct, \d+ in all:$", r.text, re.M), r.text
    line = re.search(r"^bringup:   arm/dynamics_node: (\d+) x WARN, first at \+[\d.]+ s: joint effort command saturated "
                     r"\(max_effort \[5, 5, 5, 5, 5, 5\]\)", r.text, re.M)
    assert line and int(line.group(1)) >= 1, r.text
    logs = re.search(r"logs and parameter files in (\S+)", r.text).group(1)
    assert not Path(logs).exists()


@pytest.mark.skipif(not HAVE_ROBOT_DATA, reason="example-robot-data is not installed (pip install "
                    "example-robot-data; a test dependency in requirements-dev.txt)")
@pytest.mark.parametrize("name", sorted(REAL_ROBOTS))
def test_real_robot_scenario_tracks(run, tmp_path, name):
    """panda.yaml (fixed base, gravity, fingers locked) and solo12.yaml (SE(3), zero gravity) name their robot by a
    package:// URI of example-robot-data; through the runner in lockstep (as fast as possible) every node exits 0,
    nothing is logged at WARN or above, and the step at the reference's start decays under computed torque."""
    from mbs_ros import plot

    bag, logs = tmp_path / f"{name}.mcap", tmp_path / "logs"
    # the references end at 3 s (panda) and 3.5 s (solo12) after they are sent; 5 s leaves the errors time to decay
    r = run(name, "--set", "real_time_factor=0", "--duration", 5, "--record", bag, "--log-dir", logs)
    assert r.wait() == 0, r.text
    ns = REAL_ROBOTS[name]
    assert set(r.exit_codes().values()) == {0}, r.text
    # nothing warns: the meshes resolve, Panda's <mimic> fingers are locked, no limit or rate is hit
    assert_clean_logs(logs)
    rec = plot.load(bag, progress="never")
    joints = plot.joint_tracking(rec, ns)
    err = joints.error_norm[~np.isnan(joints.error_norm)]
    assert len(err) > 100 and err[0] > 0.3 and err[-1] < 0.02 * err[0], (err[0], err[-20:], len(err))
    if name == "solo12":
        base = plot.base_tracking(rec, ns)
        p_err = base.position_error[~np.isnan(base.position_error)]
        r_err = base.rotation_error[~np.isnan(base.rotation_error)]
        assert p_err[0] > 0.05 and p_err[-1] < 0.02 * p_err[0], (p_err[0], p_err[-20:])
        assert r_err[0] > 0.1 and r_err[-1] < 0.02 * r_err[0], (r_err[0], r_err[-20:])


# Every shipped scenario runs without a warning: those below here, the rest in the test named (assert_clean_logs).
CLEAN_ELSEWHERE = {"panda": "test_real_robot_scenario_tracks", "solo12": "test_real_robot_scenario_tracks",
                   **{name: "test_launch.py::test_launch_scenario_through_runner"
                      for name in ("fleet", "manipulator", "vehicle", "vehicle_manipulator", "rov_landing",
                                  "solo12_stand", "uvms_grasp")},
                   "rov_alpha5": "test_rov_scenario_holds_station_and_balances_its_energy_ports",
                   "vessel": "test_vessel_scenario_holds_heading_with_two_propellers",
                   "rov_alpha5_sensors": "test_sensor_scenarios.py",
                   "vehicle_manipulator_sensors": "test_sensor_scenarios.py"}
CLEAN_HERE = ("scara",)  # the scenarios without a launch file of their own
# what a loaded machine makes a wall-clock run say (the simulation or the controller missing the wall clock), not a
# warning of the scenario's own
LOAD_WARNINGS = ("falling behind the wall clock", "s old (state_timeout")
# a lockstep dynamics node whose controller answers late (starved for 10 s by a loaded machine) says so; it is load,
# not a missing controller, only where the run still reached its end on the simulation clock (a missing controller
# stops that clock: the run never ends by its duration), which the test checks beside it
LOCKSTEP_LOAD_WARNING = "lockstep: waiting at t = "


def lockstep_allowance(r, scenario) -> tuple:
    """``(LOCKSTEP_LOAD_WARNING,)`` where ``scenario`` runs in lockstep on the simulation clock and the run ``r``
    ended by its duration (its controllers answered: a missing one stops that clock), else nothing."""
    spec = yaml.safe_load(Path(scenario).read_text())
    if spec.get("lockstep") and spec.get("sim_time") and "stopping (duration)" in r.text:
        return (LOCKSTEP_LOAD_WARNING,)
    return ()


def test_every_shipped_scenario_is_checked_for_warnings():
    assert {p.stem for p in SCENARIOS.glob("*.yaml")} == set(CLEAN_ELSEWHERE) | set(CLEAN_HERE)


@pytest.mark.parametrize("name", CLEAN_HERE)
def test_shipped_scenario_runs_without_warnings(run, tmp_path, name):
    """As shipped (its own rates, clock and lockstep), for 1 s once the references are sent: every node exits 0
    and logs nothing at WARN or above (the fleet's physics rate resolves its arms' fastest mode; a lockstep run
    resumed after its paused start does not count the pause as a wait for the controller)."""
    logs = tmp_path / "logs"
    r = run(SCENARIOS / f"{name}.yaml", "--duration", 1, "--log-dir", logs)
    assert r.wait() == 0, r.text
    assert set(r.exit_codes().values()) == {0}, r.text
    spec = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    if spec.get("lockstep") and spec.get("sim_time"):
        assert "stopping (duration)" in r.text, r.text  # the simulation clock reached the end: the controller answered
    load = assert_clean_logs(logs, allowed=LOAD_WARNINGS + lockstep_allowance(r, SCENARIOS / f"{name}.yaml"))
    if load:
        print(f"{name}: {len(load)} warnings of a loaded machine: {load[:3]}")


def test_a_dynamics_node_with_thread_priority_is_started_publishing_asynchronously(run, tmp_path, monkeypatch):
    """thread_priority on a robot's dynamics node: the runner starts it with Fast DDS's asynchronous publication
    (its command line says so), so the node, which warns when its publications would be sent in its callbacks,
    logs no warning; the other nodes are started as before. SCHED_FIFO refused here: that warning only."""
    monkeypatch.delenv("RMW_FASTRTPS_PUBLICATION_MODE", raising=False)
    if not os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps"):
        pytest.skip("the publication mode is Fast DDS's; this middleware is another")
    logs = tmp_path / "logs"
    r = run("scara", "--duration", 0.2, "--log-dir", logs, "--set", "robots[0].dynamics.thread_priority=20")
    assert r.wait() == 0, r.text
    started = [line for line in r.text.splitlines() if line.startswith("bringup: started ")]
    assert len(started) == 3, r.text
    for line in started:
        asynchronous = "): RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS " in line
        assert asynchronous == ("/dynamics_node " in line), line
    dyn = next(logs.glob("*dynamics_node.log")).read_text()
    assert "thread_priority 20:" in dyn, dyn
    assert_clean_logs(logs, allowed=LOAD_WARNINGS + lockstep_allowance(r, SCENARIOS / "scara.yaml")
                      + ("SCHED_FIFO refused (",))


def test_a_starved_lockstep_controller_is_load_when_the_run_still_reaches_its_end(run, tmp_path):
    """What a loaded machine did to scara once (fresh clone beside two busy loops): its controller, starved,
    answered a period late and the dynamics node warned that it was waiting. Reproduced by stopping the
    controller (SIGSTOP) for 3 s (the warning comes after LOCKSTEP_WARN_S = 2 s): the run still ends by its duration
    on the simulation clock, every node exits 0, and the warning is the one the scenarios' check takes as load —
    and only that one."""
    logs = tmp_path / "logs"
    r = run(SCENARIOS / "scara.yaml", "--duration", 1, "--log-dir", logs)
    r.wait_for(r"^bringup: running: references sent")
    controller = int(re.search(r"started scara/controller_node \(pid (\d+)\)", r.text).group(1))
    os.kill(controller, signal.SIGSTOP)
    try:
        time.sleep(3.0)  # the stall itself is the subject: nothing is waited for here
    finally:
        os.kill(controller, signal.SIGCONT)
    assert r.wait() == 0, r.text
    assert set(r.exit_codes().values()) == {0} and "stopping (duration)" in r.text, r.text
    with pytest.raises(AssertionError, match="lockstep: waiting at t = "):
        assert_clean_logs(logs, allowed=LOAD_WARNINGS)
    assert lockstep_allowance(r, SCENARIOS / "scara.yaml") == (LOCKSTEP_LOAD_WARNING,)
    seen = assert_clean_logs(logs, allowed=LOAD_WARNINGS + lockstep_allowance(r, SCENARIOS / "scara.yaml"))
    assert any(LOCKSTEP_LOAD_WARNING in line for line in seen), seen


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_every_child_cleanly(run, tmp_path, sig):
    """Ctrl-C or SIGTERM to the runner: forwarded as that same signal, once, to every child (each logs the signal
    it stopped on), which exits 0; the runner exits 0."""
    r = run("vehicle", "--log-dir", tmp_path / "logs")  # no duration: runs until stopped
    r.wait_for(r"^bringup: running: references sent")
    pids = r.child_pids()
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    r.proc.send_signal(sig)
    rc = r.wait()
    assert rc == 0, r.text
    assert f"stopping ({sig.name})" in r.text
    assert r.exit_codes() == {"asv/controller_node": 0, "asv/dynamics_node": 0, "asv/reference_node": 0}, r.text
    assert_gone(pids)
    logs = sorted((tmp_path / "logs").glob("*.log"))
    stopped_on = {log.name: re.findall(r"stopping on (SIG[A-Z]+)", log.read_text()) for log in logs}
    assert sorted(v for v in stopped_on.values() if v) == [[sig.name]] * 3, stopped_on
    for log in logs:
        assert "Traceback" not in log.read_text(), log


def test_node_failing_to_start_fails_the_run(run, tmp_path):
    """A node that refuses its start fails the run (exit 1, the node's last log lines shown). The scenario checks
    every parameter value against the table at load, so the failure is one only the node sees: a world file whose
    content is wrong (the scenario names the file, the dynamics node reads it)."""
    world = tmp_path / "bad_world.yaml"
    world.write_text("world:\n  ground: {height: -10.0, normal: [0, 0, 1], mu: -0.8}\n")
    path = tmp_path / "bad_world_scenario.yaml"
    path.write_text(UVMS.replace("    reference:", f"    dynamics: {{world: {world}}}\n    reference:"))
    r = run(path, "--duration", 30, "--log-dir", tmp_path / "logs")
    rc = r.wait()
    assert rc == 1, r.text
    assert re.search(r"uvms/dynamics_node exited with code [1-9]", r.text), r.text
    assert "world.ground.mu: must be >= 0" in r.text  # the end of the node's log
    assert_gone(r.child_pids())


# ------------------------------------------------------------------------- the recording, read back


def _string_cdr(text):
    raw = text.encode() + b"\0"
    return b"\x00\x01\x00\x00" + len(raw).to_bytes(4, "little") + raw  # CDR little endian: std_msgs/String


def _recordings(tmp_path, monkeypatch):
    """An intact recording, the same cut short (a recorder SIGKILL'd), and the same closed normally with a
    record cut in half in its last chunk (a KeyboardInterrupt inside mcap's add_message, as before the
    recorder's writer thread) — the file the runner used to report as a success."""
    from mcap.opcode import Opcode
    from mcap.records import Message
    from mcap.writer import Writer

    from mbs_ros.recording import BagWriter

    intact = tmp_path / "intact.mcap"
    with BagWriter(intact, chunk_size=2000, flush_period=None) as w:
        w.add_topic("/chatter", "std_msgs/msg/String")
        for k in range(300):
            w.write("/chatter", _string_cdr(f"message {k}"), 1000 + k)
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(intact.read_bytes()[: intact.stat().st_size // 2])

    def interrupted(self, stream):
        stream.start_record(Opcode.MESSAGE)
        stream.write2(self.channel_id)
        raise KeyboardInterrupt

    half = tmp_path / "half_record.mcap"
    with open(half, "wb") as out:
        w = Writer(out)
        w.start("ros2", "test")
        channel = w.register_channel("/chatter", "cdr", w.register_schema("std_msgs/msg/String", "ros2msg",
                                                                          b"string data\n"))
        for k in range(300):
            with monkeypatch.context() as m:
                if k == 299:
                    m.setattr(Message, "write", interrupted)
                try:
                    w.add_message(channel, 1000 + k, _string_cdr(f"message {k}"), 1000 + k)
                except KeyboardInterrupt:
                    pass
        w.finish()
    return intact, cut, half


def test_runner_reads_the_recording_back(tmp_path, monkeypatch, capsys):
    """After the stop the runner reads the file back: the true count for an intact file; for a damaged one (cut
    short, or closed with a half record) a loud error with the recoverable count and the recover command, and
    exit code 1."""
    intact, cut, half = _recordings(tmp_path, monkeypatch)
    scenario = load_scenario("vehicle")
    for path, damage in ((intact, None), (cut, "no summary"), (half, "broken Message record")):
        runner = bringup_runner.Runner(scenario, record=path, log_dir=tmp_path / f"logs_{path.stem}",
                                       out=sys.stdout)
        result = runner._finish(None)  # nothing ran: only the recording is looked at
        out, err = capsys.readouterr()
        if damage is None:
            assert result.returncode == 0, err
            assert f"recorded 300 messages on 1 topics to {path} (read back: complete)" in out
            assert result.recorded == {"/chatter": 300}
            continue
        assert result.returncode == 1, out + err
        assert f"the recording {path} is DAMAGED: " in err and damage in err, err
        n = sum(result.recorded.values())
        assert 0 < n < 300 and f"its {n} complete messages on 1 topics can be recovered" in err
        assert f"python -m mbs_ros.recording recover {path} {tmp_path / (path.stem + '.recovered.mcap')}" in err
        assert "recorded " not in out


def test_killed_recorder_fails_the_run_and_names_recover(run, tmp_path):
    """kill -9 of the recorder mid-run: the runner exits 1, says the recording is damaged (not "recorded 0
    messages"), and the command it names recovers a file mcap's make_reader reads."""
    from mcap.reader import make_reader

    bag = tmp_path / "killed.mcap"
    r = run("vehicle", "--record", bag, "--log-dir", tmp_path / "logs")  # until stopped
    r.wait_for(r"^bringup: running: references sent")
    recorder = int(re.search(r"started recorder \(pid (\d+)\)", r.text).group(1))
    deadline = time.monotonic() + RUN_TIMEOUT  # flushed chunks on disk (flush period 1 s; header ~100 bytes)
    while bag.stat().st_size < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(recorder, signal.SIGKILL)
    assert r.wait() == 1, r.text
    assert f"the recording {bag} is DAMAGED: no summary" in r.text, r.text
    assert "recorded 0 messages" not in r.text
    m = re.search(r"its (\d+) complete messages on \d+ topics can be recovered with:\n\s+(python -m "
                  r"mbs_ros\.recording recover \S+ (\S+))", r.text)
    assert m and int(m.group(1)) > 0, r.text
    out = subprocess.run([sys.executable, *m.group(2).split()[1:]], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    with open(m.group(3), "rb") as f:
        assert sum(1 for _ in make_reader(f).iter_messages()) == int(m.group(1))
    assert_gone(r.child_pids())


def test_rov_scenario_holds_station_and_balances_its_energy_ports(run, tmp_path):
    """rov_alpha5.yaml (issue 11): the BlueROV2-Heavy-like vehicle with its arm in a current, lockstep on simulation
    time. The thrusters hold depth and heading while the arm moves; the energy topic's port bookkeeping balances
    (residual at the integrator's level), dissipators and entropy production are non-negative."""
    from mbs_ros import plot

    bag, logs = tmp_path / "rov.mcap", tmp_path / "logs"
    r = run("rov_alpha5", "--set", "real_time_factor=0", "--duration", 6, "--record", bag, "--log-dir", logs)
    assert r.wait() == 0, r.text
    assert set(r.exit_codes().values()) == {0}, r.text
    assert_clean_logs(logs, allowed=lockstep_allowance(r, SCENARIOS / "rov_alpha5.yaml"))  # a starved controller
    rec = plot.load(bag, progress="never")
    e = plot.ports_series(rec, "/rov")
    assert e is not None and len(e["t"]) > 50, rec.topics
    assert {f"thruster/t{i}" for i in range(1, 9)} | {"current"} <= set(e["ports"])
    assert "hydrodynamic_damping/base_link" in e["dissipators"] and "buoyancy" in e["storages"]
    flows = e["supplied_energy"][-1] + e["dissipated_energy"][-1]
    assert flows > 1.0, flows  # the arm and the current did work and the water took it
    assert np.abs(e["balance_residual"]).max() < 1e-5 * flows + 1e-6, (np.abs(e["balance_residual"]).max(), flows)
    for name, p in e["dissipators"].items():
        assert np.nanmin(p) >= -1e-12, name
    assert np.all(np.diff(e["entropy_produced"]) >= -1e-15) and e["entropy_produced"][-1] > 0
    assert np.all(e["entropy_production"] >= 0)
    base = plot.base_tracking(rec, "/rov")
    p_err = base.position_error[~np.isnan(base.position_error)]
    r_err = base.rotation_error[~np.isnan(base.rotation_error)]
    # the reference starts at t = 0 (a paused start), with the current's onset on a vehicle at rest and thrusts
    # rising from 0 through their lag: a start transient of 7° at 0.6 s (it used to fall before the reference's
    # start, unmeasured); settled after 2 s
    assert len(p_err) > 50 and p_err.max() < 0.1 and r_err.max() < math.radians(10), (p_err.max(), r_err.max())
    settled = base.t[~np.isnan(base.rotation_error)] >= 2.0
    assert settled.sum() > 50 and r_err[settled].max() < math.radians(3), r_err[settled].max()
    joints = plot.joint_tracking(rec, "/rov")
    err = joints.error_norm[~np.isnan(joints.error_norm)]
    assert len(err) > 50 and err.max() < 0.3, err.max()
    written = plot.plot_recording(rec, tmp_path / "plots")
    assert tmp_path / "plots" / "rov_ports.png" in written


def test_vessel_scenario_holds_heading_with_two_propellers(run, tmp_path):
    """vessel.yaml (issue 11): the Otter USV on SE(2) (Fossen's 3-DOF model) surges 12 m holding its heading, then
    turns on the spot; its two propellers give surge and yaw (the controller warns that sway is not actuated)."""
    from mbs_ros import plot

    bag, logs = tmp_path / "vessel.mcap", tmp_path / "logs"
    r = run("vessel", "--set", "real_time_factor=0", "--record", bag, "--log-dir", logs)
    assert r.wait() == 0, r.text
    assert set(r.exit_codes().values()) == {0}, r.text
    warned = assert_clean_logs(logs, allowed=("span 2 of the 3 wrench directions",))
    assert len(warned) == 1, warned
    rec = plot.load(bag, progress="never")
    base = plot.base_tracking(rec, "/otter")
    ok = ~np.isnan(base.position_error)
    assert ok.sum() > 500 and base.t[ok][-1] > 29.0
    assert base.position_error[ok].max() < 0.05 and base.rotation_error[ok].max() < math.radians(2)
    assert base.p[-1, 0] == pytest.approx(12.0, abs=0.02)  # the run's end: 12 m on, turned by 45°
    e = plot.ports_series(rec, "/otter")
    assert [n for n in e["ports"] if n.startswith("thruster/")] == ["thruster/port", "thruster/starboard"]
    flows = e["supplied_energy"][-1] + e["dissipated_energy"][-1]
    assert np.abs(e["balance_residual"]).max() < 1e-5 * flows + 1e-6
