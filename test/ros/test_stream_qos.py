"""QoS overrides of the loop's streams (``mbs_ros.nodes.runtime.subscribe_fields``), read from the ROS graph of real
node processes: the dynamics node's command subscriptions and the controller's state subscriptions are reliable
by default (a single ``ros2 topic pub --once`` is never lost to a subscriber that has not yet matched its
publisher), and ``qos_overrides.<topic>.subscription.reliability: best_effort`` makes them best effort, as ROS 2
nodes take it (a 1 kHz loop running free, whose next message supersedes a lost one). A bad override is refused
at start-up with the key and the reason, exit code 2."""
from __future__ import annotations

from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402

from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UVMS_PARAMS = ROOT / "config" / "uvms_6dof.yaml"
DYNAMICS = "mbs_ros.nodes.dynamics_node"
CONTROLLER = "mbs_ros.nodes.controller_node"
TIMEOUT = 120.0
BEST_EFFORT, RELIABLE = ReliabilityPolicy.BEST_EFFORT, ReliabilityPolicy.RELIABLE
COMMANDS = ("cmd_wrench", "joint_command", "cmd_joint_effort")
STATE = ("odom", "joint_states")
OVERRIDDEN = ("cmd_wrench", "joint_command")  # of the dynamics node's; cmd_joint_effort keeps its default


def _best_effort(ns, topics):
    return {f"qos_overrides./{ns}/{t}.subscription.reliability": "best_effort" for t in topics}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("qos_logs")
    procs = {}
    for mode in ("default", "overridden"):
        d, c = f"qos_{mode}_d", f"qos_{mode}_c"
        over = mode == "overridden"
        procs[f"{mode}_dynamics"] = NodeProcess(
            DYNAMICS, name="dynamics_node", namespace=d, params_file=UVMS_PARAMS,
            # and depth at its extremes, taken: 100000 here, 1 on the controller's odom
            parameters=dict(start_paused=True, **(dict(_best_effort(d, OVERRIDDEN), **{
                f"qos_overrides./{d}/cmd_joint_effort.subscription.depth": 100_000}) if over else {})),
            log_file=logs / f"{mode}_dynamics.log")
        procs[f"{mode}_controller"] = NodeProcess(
            CONTROLLER, name="controller_node", namespace=c, params_file=UVMS_PARAMS,
            parameters=dict(_best_effort(c, STATE), **{f"qos_overrides./{c}/odom.subscription.depth": 1}) if over
            else {}, log_file=logs / f"{mode}_controller.log")
    with running(procs), Probe("test_stream_qos_probe", TIMEOUT) as probe:
        yield procs, probe


def _reliability(probe, topic, kind, proc):
    """The reliability of each ``kind`` ("subscriptions"/"publishers") endpoint on ``topic``, once there is one."""
    info = getattr(probe.node, f"get_{kind}_info_by_topic")
    found = {}

    def seen():
        found["e"] = info(topic)
        return bool(found["e"])

    probe.spin_until(seen, what=f"the {kind} of {topic}", alive=[proc])
    return {e.qos_profile.reliability for e in found["e"]}


def test_the_loop_s_subscriptions_are_reliable_by_default(graph):
    procs, probe = graph
    for topic in COMMANDS:
        assert _reliability(probe, f"/qos_default_d/{topic}", "subscriptions", procs["default_dynamics"]) == {
            RELIABLE}, topic
    for topic in STATE:
        assert _reliability(probe, f"/qos_default_c/{topic}", "subscriptions", procs["default_controller"]) == {
            RELIABLE}, topic


def test_an_override_makes_the_named_subscriptions_best_effort_and_only_them(graph):
    procs, probe = graph
    dynamics, controller = procs["overridden_dynamics"], procs["overridden_controller"]
    for topic in COMMANDS:
        expected = BEST_EFFORT if topic in OVERRIDDEN else RELIABLE
        assert _reliability(probe, f"/qos_overridden_d/{topic}", "subscriptions", dynamics) == {expected}, topic
    for topic in STATE:
        assert _reliability(probe, f"/qos_overridden_c/{topic}", "subscriptions", controller) == {BEST_EFFORT}, topic
        # the publishers keep their QoS: reliable subscribers (recorders, echo) still match them
        assert _reliability(probe, f"/qos_overridden_d/{topic}", "publishers", dynamics) == {RELIABLE}, topic
    # and a reliable publisher (ros2 topic pub's default) matches a best-effort subscription
    pub = probe.node.create_publisher(WrenchStamped, "/qos_overridden_d/cmd_wrench", QoSProfile(depth=10))
    probe.spin_until(lambda: pub.get_subscription_count() == 1, what="the reliable publisher matched",
                     alive=[dynamics])


@pytest.mark.parametrize("key, value, reason", [
    ("reliability", "sometimes", "Unexpected QoS override for policy `reliability`: `sometimes`"),
    ("depth", 0, "depth 0"),
    ("depth", 100_001, "depth 100001"),
    ("history", "keep_some", "Unexpected QoS override for policy `history`: `keep_some`"),
], ids=["reliability", "depth_0", "depth_over", "history"])
def test_a_bad_override_is_refused_with_its_key_and_reason(tmp_path, key, value, reason):
    ros_env_defaults()
    name = f"qos_overrides./qos_bad/cmd_wrench.subscription.{key}"
    log = tmp_path / "bad.log"
    proc = NodeProcess(DYNAMICS, name="dynamics_node", namespace="qos_bad", params_file=UVMS_PARAMS,
                       parameters={name: value}, log_file=log)
    with proc:
        rc = proc.wait(timeout=TIMEOUT)
    text = log.read_text()
    assert rc == 2, text
    fatal = [line for line in text.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1 and f"invalid parameters: {name}: " in fatal[0] and reason in fatal[0], text
    assert "Traceback" not in text, text
