"""The launch files (launch/*.launch.py), their RViz configurations, and the same scenarios through the runner.

- Always (no ``launch`` needed): every launch file parses, declares its arguments with defaults and
  descriptions, and hands them to ``mbs_ros.bringup.launch_actions.launch_setup`` in an ``OpaqueFunction``; its
  default scenario exists and ``mbs_ros.bringup.node_specs`` (the function the launch files and the runner share)
  gives the nodes it starts, with console scripts that setup.py installs. Every ``config/rviz/*.rviz`` is an
  RViz2 configuration with the fixed frame ``world``, TF, and per robot a RobotModel, odometry path and markers.
- Always (real processes): each launch file's scenario runs through ``python -m mbs_ros.bringup``, its topics
  appear for every robot (odom, joint_states, /tf, the references, and robot_description and markers, which the
  RViz configurations show), and SIGINT stops it with exit code 0.
- With ``launch`` and ``launch_ros`` importable (a ROS 2 install; they are not on PyPI), and only then: each launch
  file runs under ``launch.LaunchService`` in a child process (as ``ros2 launch`` does), the same topics appear,
  and SIGINT ends it with exit code 0; ``launch_setup`` builds ``launch_ros`` Node actions for RViz too.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mbs_ros.bringup import load_scenario, node_specs
from mbs_ros.bringup import rviz as rviz_configs

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch"
# launch file -> (default scenario, launch arguments for the run here, namespaces that must appear)
LAUNCH_FILES = {
    "vehicle": ("vehicle", {}, ["asv"]),
    "manipulator": ("manipulator", {}, ["arm"]),
    "vehicle_manipulator": ("vehicle_manipulator", {}, ["uvms"]),
    "fleet": ("fleet", {"count": "2"}, ["uvms1", "uvms2"]),
    "rov_landing": ("rov_landing", {}, ["rov"]),
    "legged": ("solo12_stand", {}, ["solo"]),
    "uvms_grasp": ("uvms_grasp", {}, ["rov"]),
}
#: launch files whose default scenario's robots have no joints (the ROV alone)
JOINTLESS = {"rov_landing"}
EXECUTABLES = ("dynamics_node", "controller_node", "reference_node")
TIMEOUT = 90.0  # processes of a whole scenario starting at once on a loaded 2-core machine


# ------------------------------------------------------------------------------ static checks


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


def _keywords(call):
    return {k.arg: k.value for k in call.keywords}


def test_launch_files_exist_for_every_kind():
    assert {p.name for p in LAUNCH.glob("*.launch.py")} >= {f"{k}.launch.py" for k in LAUNCH_FILES}


@pytest.mark.parametrize("kind", sorted(LAUNCH_FILES))
def test_launch_file_source(kind):
    path = LAUNCH / f"{kind}.launch.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    args = {}
    for call in _calls(tree, "DeclareLaunchArgument"):
        kw = _keywords(call)
        name = ast.literal_eval(call.args[0])
        assert "default_value" in kw, f"{name}: no default"
        description = ast.literal_eval(kw["description"])
        assert len(description) > 20, f"{name}: no description"
        args[name] = kw["default_value"]
    expected = {"scenario", "rviz", "rviz_config"} | ({"count"} if kind == "fleet" else set())
    assert set(args) == expected
    # the default scenario: PathJoinSubstitution([share, "config", "scenarios", "<name>.yaml"])
    parts = [ast.literal_eval(e) for e in args["scenario"].args[0].elts[1:]]
    assert parts == ["config", "scenarios", f"{LAUNCH_FILES[kind][0]}.yaml"]
    assert (ROOT.joinpath(*parts)).is_file()
    assert ast.literal_eval(args["rviz"]) == "false"
    (opaque,) = _calls(tree, "OpaqueFunction")
    kw = _keywords(opaque)
    assert kw["function"].id == "launch_setup"
    assert ast.literal_eval(kw["kwargs"]) == ({"kind": kind, "fleet": True} if kind == "fleet" else {"kind": kind})
    imports = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("mbs_ros.bringup.launch_actions", "launch_setup") in imports
    assert (ROOT / "config" / "rviz" / f"{kind}.rviz").is_file()


def _console_scripts():
    tree = ast.parse((ROOT / "setup.py").read_text())
    for call in _calls(tree, "setup"):
        entry = ast.literal_eval(_keywords(call)["entry_points"])
        return {s.split("=")[0].strip(): s.split("=")[1].strip() for s in entry["console_scripts"]}
    raise AssertionError("no setup() call in setup.py")


@pytest.mark.parametrize("kind", sorted(LAUNCH_FILES))
def test_launch_scenario_gives_node_specs(kind):
    """What launch_setup turns into launch_ros Nodes, computed by the shared function."""
    scenario_name, arguments, namespaces = LAUNCH_FILES[kind]
    count = int(arguments["count"]) if "count" in arguments else None
    scenario = load_scenario(ROOT / "config" / "scenarios" / f"{scenario_name}.yaml", count=count)
    specs = node_specs(scenario)
    assert [s.namespace for s in specs] == [f"/{ns}" for ns in namespaces for _ in range(3)]
    scripts = _console_scripts()
    for s in specs:
        assert s.package == "mbs_ros"
        assert scripts[s.executable] == f"{s.module}:main", s.executable


# ------------------------------------------------------------------------------------------- RViz


def _display(displays, cls):
    found = [d for d in displays if d["Class"] == cls]
    assert len(found) == 1, f"{cls}: {len(found)} displays"
    return found[0]


def check_rviz(config: dict, namespaces):
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    top = manager["Displays"]
    assert _display(top, "rviz_default_plugins/TF")["Enabled"] is True
    groups = rviz_configs.robot_groups(config)
    assert [g["Name"] for g in groups] == list(namespaces)
    for g, ns in zip(groups, namespaces):
        model = _display(g["Displays"], "rviz_default_plugins/RobotModel")
        assert model["Description Source"] == "Topic"
        assert model["Description Topic"]["Value"] == f"/{ns}/robot_description"
        assert model["Description Topic"]["Durability Policy"] == "Transient Local"
        # the dynamics node publishes the URDF with the links already named <ns>/<link> (its TF frames)
        assert model["TF Prefix"] == ""
        odoms = {d["Topic"]["Value"]: d for d in g["Displays"] if d["Class"] == "rviz_default_plugins/Odometry"}
        assert odoms[f"/{ns}/odom"]["Keep"] > 1  # a path, not one arrow
        # besides the truth, at most the estimator's estimate (with its covariance shown)
        assert set(odoms) <= {f"/{ns}/odom", f"/{ns}/estimate/odom"}, sorted(odoms)
        if f"/{ns}/estimate/odom" in odoms:
            assert odoms[f"/{ns}/estimate/odom"]["Covariance"]["Value"] is True
        # the robot's markers; with a contact world also its contacts' and the world's (docs/contact.md, On ROS)
        markers = {d["Topic"]["Value"] for d in g["Displays"] if d["Class"] == "rviz_default_plugins/MarkerArray"}
        assert f"/{ns}/markers" in markers
        assert markers <= {f"/{ns}/markers", f"/{ns}/contacts/markers", f"/{ns}/world/markers"}, sorted(markers)
    assert config["Panels"][0]["Class"] == "rviz_common/Displays"
    assert manager["Views"]["Current"]["Class"] == "rviz_default_plugins/Orbit"


@pytest.mark.parametrize("kind", sorted(LAUNCH_FILES))
def test_rviz_config(kind):
    scenario_name, _arguments, _namespaces = LAUNCH_FILES[kind]
    config = yaml.safe_load((ROOT / "config" / "rviz" / f"{kind}.rviz").read_text())
    scenario = load_scenario(scenario_name)  # the template shows the default scenario's robots
    check_rviz(config, [r.name for r in scenario.robots])


def test_rviz_config_rendered_per_robot(tmp_path):
    scenario = load_scenario("fleet", count=5)
    path = rviz_configs.write_config(rviz_configs.template_path("fleet"), [r.namespace for r in scenario.robots],
                                     directory=tmp_path)
    check_rviz(yaml.safe_load(path.read_text()), [f"uvms{i}" for i in range(1, 6)])
    # a template for one robot renders for another namespace
    text = rviz_configs.render(rviz_configs.template_path("vehicle"), ["/boat7"])
    check_rviz(yaml.safe_load(text), ["boat7"])
    assert "/asv/" not in text


# ---------------------------------------------------------------------------- real processes


class Probe:
    """A subscriber in this test process: the first message on each topic."""

    def __init__(self):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("test_launch_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.seen = {}  # topic -> its first message
        self.last = {}  # topic -> its newest message

    def watch(self, topics):
        from nav_msgs.msg import Odometry
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage
        from trajectory_msgs.msg import JointTrajectory, MultiDOFJointTrajectory
        from visualization_msgs.msg import MarkerArray

        types = {"odom": Odometry, "joint_states": JointState, "tf": TFMessage, "joint_reference": JointTrajectory,
                 "base_reference": MultiDOFJointTrajectory, "robot_description": String, "markers": MarkerArray}
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        for topic in topics:
            leaf = topic.rsplit("/", 1)[-1]
            qos = latched if leaf.endswith(("_reference", "robot_description")) else QoSProfile(depth=10)
            self.node.create_subscription(types[leaf], topic, lambda m, t=topic: self._on(t, m), qos)

    def _on(self, topic, m):
        self.seen.setdefault(topic, m)
        self.last[topic] = m

    def spin_until(self, predicate, proc, what, timeout=TIMEOUT, log=lambda: ""):
        """Spin until ``predicate()``; fail naming ``what`` (a string, or a function giving it at the failure) when
        ``proc`` exits first or the deadline passes."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if proc.poll() is not None:
                raise AssertionError(f"exited {proc.returncode} before {what() if callable(what) else what}:\n{log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what() if callable(what) else what} within {timeout} s:\n{log()}")
            self.executor.spin_once(timeout_sec=0.05)

    def spin_until_seen(self, topics, proc, timeout=TIMEOUT, log=lambda: ""):
        self.spin_until(lambda: all(t in self.seen for t in topics), proc, timeout=timeout, log=log,
                        what=lambda: f"message on {sorted(set(topics) - set(self.seen))}")

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


@pytest.fixture
def probe():
    pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")
    p = Probe()
    yield p
    p.close()


def topics_of(namespaces, floating=True, joints=True):
    """What must appear: the state, TF, the references, and what the RViz configurations show (no joint_states
    nor joint_reference for a robot without joints)."""
    out = ["/tf"]
    for ns in namespaces:
        out += [f"/{ns}/odom", f"/{ns}/robot_description", f"/{ns}/markers"]
        if joints:
            out += [f"/{ns}/joint_states", f"/{ns}/joint_reference"]
        if floating:
            out.append(f"/{ns}/base_reference")
    return out


@pytest.mark.parametrize("kind", sorted(LAUNCH_FILES))
def test_launch_scenario_through_runner(kind, probe, tmp_path):
    """The scenario each launch file starts, as shipped, as real processes through the runner (no launch needed):
    everything the launch file's RViz configuration shows is published; after a simulated second of running once
    the references are sent, Ctrl-C stops every node with exit code 0, and no node logged anything at WARN or above
    (but what a loaded machine makes a wall-clock run say). This is also these shipped scenarios' check for warnings
    (test_bringup.py's CLEAN_ELSEWHERE), one run for both."""
    from test_bringup import LOAD_WARNINGS, Run, assert_clean_logs, assert_gone

    scenario_name, arguments, namespaces = LAUNCH_FILES[kind]
    logs = tmp_path / "logs"
    args = [scenario_name, "--log-dir", logs]
    if "count" in arguments:
        args += ["--count", arguments["count"]]
    topics = topics_of(namespaces, floating=kind != "manipulator", joints=kind not in JOINTLESS)
    if kind in ("legged", "uvms_grasp"):  # their RViz configurations show the contacts and the world
        topics += [f"/{ns}/{t}/markers" for ns in namespaces for t in ("contacts", "world")]
    probe.watch(topics)
    r = Run(*args)
    try:
        r.wait_for(r"^bringup: running: references sent", timeout=TIMEOUT)
        probe.spin_until_seen(topics, r.proc, log=lambda: r.text)
        odom = f"/{namespaces[0]}/odom"
        start = _stamp(probe.last[odom])
        probe.spin_until(lambda: _stamp(probe.last[odom]) >= start + 1_000_000_000, r.proc,
                         what="a simulated second of running", log=lambda: r.text)
        pids = r.child_pids()
        r.proc.send_signal(signal.SIGINT)
        assert r.wait() == 0, r.text
        assert set(r.exit_codes().values()) == {0}, r.text
        assert_gone(pids)
    finally:
        r.close()
    load = assert_clean_logs(logs, allowed=LOAD_WARNINGS)
    if load:
        print(f"{kind}: {len(load)} warnings of a loaded machine: {load[:3]}")


def _stamp(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


# ------------------------------------------------------------------------- with launch installed


@pytest.fixture(scope="module")
def launch_api():
    """launch and launch_ros, or a skip saying why (they come with a ROS 2 install, not from PyPI)."""
    why = ("is not installed (ROS 2's launch packages are not on PyPI: source a ROS 2 install); the same scenarios "
           "run through the runner above")
    launch = pytest.importorskip("launch", reason=f"launch {why}")
    if not hasattr(launch, "LaunchService"):  # this checkout's launch/ folder, seen as a namespace package
        pytest.skip(f"launch {why}")
    launch_ros = pytest.importorskip("launch_ros", reason=f"launch_ros {why}")
    import launch_ros.actions  # noqa: F401

    return launch, launch_ros


def _install_prefix(tmp_path: Path) -> dict:
    """Environment for a launch run: launch_ros finds executables in <prefix>/lib/mbs_ros (what colcon installs).
    When the current ament prefix has none (this checkout installed editable), a temporary prefix gets them, as
    scripts of this interpreter, with the share directory linked to the checkout."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    env = dict(os.environ)
    try:
        prefix = Path(get_package_prefix("mbs_ros"))
        if all((prefix / "lib" / "mbs_ros" / e).exists() for e in EXECUTABLES):
            return env
    except PackageNotFoundError:
        pass
    prefix = tmp_path / "prefix"
    lib = prefix / "lib" / "mbs_ros"
    lib.mkdir(parents=True)
    for name, target in _console_scripts().items():
        module, func = target.split(":")
        script = lib / name
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
        script.chmod(0o755)
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "mbs_ros").write_text("")
    share = prefix / "share" / "mbs_ros"
    share.mkdir()
    for item in ("config", "launch", "package.xml"):
        (share / item).symlink_to(ROOT / item)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(prefix), env.get("AMENT_PREFIX_PATH", "")]).rstrip(os.pathsep)
    return env


LAUNCH_SCRIPT = """
import sys
from launch import LaunchDescription, LaunchService
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
path, *arguments = sys.argv[1:]
service = LaunchService()
service.include_launch_description(LaunchDescription([IncludeLaunchDescription(
    PythonLaunchDescriptionSource(path), launch_arguments=[a.split(':=', 1) for a in arguments])]))
sys.exit(service.run())
"""


@pytest.mark.parametrize("kind", sorted(LAUNCH_FILES))
def test_launch_file_runs(kind, launch_api, probe, tmp_path):
    _scenario, arguments, namespaces = LAUNCH_FILES[kind]
    env = _install_prefix(tmp_path)
    log = tmp_path / "launch.log"
    topics = topics_of(namespaces, floating=kind != "manipulator", joints=kind not in JOINTLESS)
    if kind in ("legged", "uvms_grasp"):  # their RViz configurations show the contacts and the world
        topics += [f"/{ns}/{t}/markers" for ns in namespaces for t in ("contacts", "world")]
    probe.watch(topics)
    args = [f"{k}:={v}" for k, v in {**arguments, "rviz": "false"}.items()]
    with open(log, "w") as out:
        # its own process group, so that the SIGINT below is a terminal's Ctrl-C: launch and every node get it
        # (launch then sends no SIGINT of its own, and SIGTERM after 5 s to a node still running)
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH_SCRIPT, str(LAUNCH / f"{kind}.launch.py"), *args],
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            probe.spin_until_seen(topics, proc, log=log.read_text)
            os.killpg(proc.pid, signal.SIGINT)
            rc = proc.wait(timeout=60)
            text = log.read_text()
            assert rc == 0, text
            for trouble in ("process has died", "failed to terminate", "Traceback"):
                assert trouble not in text, text
            assert text.count("process has finished cleanly") == len(namespaces) * 3, text
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_launch_setup_builds_node_actions(launch_api, tmp_path):
    launch, launch_ros = launch_api
    from mbs_ros.bringup import launch_actions

    context = launch.LaunchContext()
    scenario = ROOT / "config" / "scenarios" / "fleet.yaml"
    context.launch_configurations.update({"scenario": str(scenario), "count": "2", "rviz": "true",
                                          "rviz_config": ""})
    actions = launch_actions.launch_setup(context, kind="fleet", fleet=True)
    assert all(isinstance(a, launch_ros.actions.Node) for a in actions)
    assert [(a.node_package, a.node_executable) for a in actions] == (
        [("mbs_ros", e) for e in ("dynamics_node", "controller_node", "reference_node")] * 2 + [("rviz2", "rviz2")])
    with pytest.raises(ValueError, match="rviz"):
        context.launch_configurations["rviz"] = "maybe"
        launch_actions.launch_setup(context, kind="fleet", fleet=True)
