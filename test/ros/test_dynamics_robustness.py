"""The dynamics node never dies from input (issue 9): real node processes, real topics.

- fuzz: the vehicle-manipulator (``config/uvms_6dof.yaml``) and the fixed arm (``config/arm_6dof_fixed.yaml``),
  each flooded with at least 10⁴ malformed-but-type-valid messages per input topic (``cmd_wrench``,
  ``cmd_joint_effort``, ``joint_command``): huge (1e4 .. 1.5e308), NaN, Inf, wrong frames, lengths and names,
  absurd stamps, in bursts. Huge commands are saturated and drive the robot until the simulation halts
  (runaway); the test resets it whenever /diagnostics says ERROR. Then: the process is alive (and exits 0 when
  stopped), no number on any topic the node publishes is non-finite (every topic the graph lists for the node,
  /clock included: the vehicle-manipulator publishes it here; every field of every message), every fault was
  reported at ERROR level (distinct reports = the node's fault counter), a reset brings the state back and
  simulation time advances; the figures are printed (``-s``);
- runtime parameters: the issue's four unsafe values (``cmd_timeout`` 0, ``publish_rate`` 1e-3, ``gravity`` [0,
  0, 1e12], ``initial_joint_positions`` 1e300) and others are refused with a reason; a safe change is taken;
- physics rate: the fixed arm at 2 Hz is refused at start-up (it diverged to 1e52), at 1 kHz it runs; Euler at
  40 Hz is refused at run time.

Every wait is for a graph match, a message, a log line, a service answer or a process exit, with a generous
timeout; nothing is asserted about wall-clock speed.
"""

from __future__ import annotations

import functools
import importlib
import math
import time
from array import array
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from builtin_interfaces.msg import Time  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from mbs_ros.nodes import conversions as cv  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from contact_fixtures import write_arm, write_puck  # noqa: E402
from ros_helpers import Probe, poll_until, ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UVMS_PARAMS = ROOT / "config" / "uvms_6dof.yaml"
ARM_PARAMS = ROOT / "config" / "arm_6dof_fixed.yaml"
NODE = "mbs_ros.nodes.dynamics_node"
NAME = "dynamics_node"
TIMEOUT = 60.0  # generous: two shared cores
FLOOD = 10_000  # messages per input topic
BURST = 10  # messages per topic published back to back (the node's subscription depth), then the probe spins
NAN, INF = float("nan"), float("inf")
UVMS_JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5", "joint6"]
FIGURES = {}
# the contact nodes: a crate 5 cm from the puck's side, dropped 2 cm; two pushes [start, duration, F, T] (N, N m)
PUCK_CRATE_WORLD = ("world:\n  ground: {height: 0.0, mu: 0.6}\n  objects:\n"
                    "    - {name: crate, box: [0.2, 0.2, 0.2], mass: 2.0, xyz: [0.25, 0.0, 0.12], mu: 0.5}\n")
PUSHES = [0.2, 0.1, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.05, 30.0, 0.0, 10.0, 0.0, 0.0, 1.0]
CONTACT_FLOOD = 2_000  # messages per input topic: every physics step of these nodes is a contact step


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("robustness_logs")
    common = dict(diagnostics_rate=10.0)

    def make(ns, params_file, **params):
        return NodeProcess(NODE, name=NAME, namespace=ns, params_file=params_file, parameters={**common, **params},
                           log_file=logs / f"{ns}.log")

    # uvms and arm are driven until the simulation runs away (their subject: the fault path), which joint limits
    # would stop (a 1e12 N m effort holds a joint on its limit): they run with joint_limits off; the others keep
    # the default, so the flood also meets the limits' contact step
    procs = {
        "uvms": make("fz_uvms", UVMS_PARAMS, publish_clock=True, joint_limits=False),
        "arm": make("fz_arm", ARM_PARAMS, joint_limits=False),
        "arm_2hz": make("fz_arm2", ARM_PARAMS, physics_rate=2.0, publish_rate=1.0, diagnostics_rate=1.0,
                        wrench_rate=1.0, markers_rate=1.0, energy_rate=1.0, contacts_rate=1.0),
        "arm_1khz": make("fz_arm1k", ARM_PARAMS, physics_rate=1000.0),
        "arm_40hz": make("fz_arm40", ARM_PARAMS, physics_rate=40.0, publish_rate=20.0, wrench_rate=20.0),
        # issue 30's contact topics and parameters under the flood: the puck resting on the ground beside a crate
        # (a free object), two timed pushes, the contact topics at 100 Hz; the arm with its crate on the ground
        "puck": make("fz_puck", None, model_file=str(write_puck(logs, PUCK_CRATE_WORLD, name="fz_puck")),
                     initial_position=[0.0, 0.0, 0.06], contacts_rate=100.0, markers_rate=50.0,
                     marker_wrench_scale=0.05, disturbance=PUSHES),
        "carm": make("fz_carm", None, model_file=str(write_arm(logs)), base_group="fixed", contacts_rate=100.0,
                     joint_limits=True),
    }
    with running(procs):
        yield procs


@pytest.fixture(scope="module")
def probe(nodes):
    with Probe("test_dynamics_robustness_probe", TIMEOUT) as p:
        yield p


# ------------------------------------------------------------------------------------------ checking


def _finite(values) -> bool:
    return all(math.isfinite(x) for x in values)


def nonfinite_fields(msg, path="") -> list:
    """The paths of every non-finite number in a message: float fields, float arrays, nested messages and
    sequences of them, and the numbers a KeyValue's text holds (diagnostics write numbers as text)."""
    if isinstance(msg, float):
        return [] if math.isfinite(msg) else [path or "."]
    if isinstance(msg, (np.ndarray, array)) or (isinstance(msg, (list, tuple)) and msg
                                                and all(isinstance(x, float) for x in msg)):
        a = np.asarray(msg)
        if a.dtype.kind == "f":
            return [f"{path}[{i}]" for i in np.flatnonzero(~np.isfinite(a))]
        return []
    if isinstance(msg, (list, tuple)):
        return [p for i, x in enumerate(msg) for p in nonfinite_fields(x, f"{path}[{i}]")]
    if hasattr(msg, "get_fields_and_field_types"):
        out = [p for name in msg.get_fields_and_field_types() for p in nonfinite_fields(getattr(msg, name),
                                                                                       f"{path}.{name}")]
        if isinstance(msg, KeyValue):
            try:
                numbers = [float(x) for x in msg.value.split()]
            except ValueError:
                numbers = []
            if not _finite(numbers):
                out.append(f"{path}[{msg.key}]")
        return out
    return []


def message_type(name):
    """The message class of a graph type name such as ``tf2_msgs/msg/TFMessage``."""
    package, kind, cls = name.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), cls)


class Watch:
    """Every topic one node publishes, found in the ROS graph (the node's publishers by name and type, not a
    list written here), subscribed with the publisher's reliability and durability and checked field by field for
    non-finite numbers as each message arrives (nothing is kept but the last ones). Subscribing is also what
    makes the node produce a topic: it publishes only what someone reads."""

    EVENTS = ("/rosout", "/parameter_events")  # logs and parameter changes: no state, maybe silent in a run

    def __init__(self, probe, ns, proc):
        self.ns, self.probe, self.proc = ns, probe, proc
        self.counts = {}  # topic -> messages checked
        self.nonfinite = []  # (topic, field paths, message) of every message with a non-finite number
        self.last_odom = None
        self.odom_stamps = []
        self.last_joint_state = None
        self.status = None  # the latest /diagnostics status of this node
        self.error_messages = set()  # distinct ERROR reports (each fault's message names its time)
        self.subs = {}
        probe.spin_until(lambda: "/diagnostics" in self._published() and ({f"/{ns}/joint_states", f"/{ns}/odom"}
                                                                           & set(self._published())),
                         what=f"/{ns}'s publishers in the graph", alive=[proc])  # a puck has no joints
        self.refresh()

    def _published(self) -> dict:
        node = self.probe.node
        if (NAME, f"/{self.ns}") not in node.get_node_names_and_namespaces():  # not discovered yet
            return {}
        return dict(node.get_publisher_names_and_types_by_node(NAME, f"/{self.ns}"))

    def refresh(self) -> None:
        """Subscribe to every topic of the node the graph shows that is not subscribed yet."""
        handlers = {f"/{self.ns}/odom": self._odom, f"/{self.ns}/joint_states": self._joint_states,
                    "/diagnostics": self._diag}
        for topic, types in self._published().items():
            if topic in self.subs:
                continue
            ours = [i.qos_profile for i in self.probe.node.get_publishers_info_by_topic(topic)
                    if i.node_name == NAME and i.node_namespace == f"/{self.ns}"]
            if not ours:
                continue
            qos = QoSProfile(depth=100, reliability=ours[0].reliability, durability=ours[0].durability)
            self.counts[topic] = 0
            self.subs[topic] = self.probe.node.create_subscription(
                message_type(types[0]), topic, functools.partial(self._on, topic, handlers.get(topic)), qos)

    def close(self) -> None:
        for sub in self.subs.values():
            self.probe.node.destroy_subscription(sub)
        self.subs = {}

    def _on(self, topic, handler, m):
        self.counts[topic] += 1
        bad = nonfinite_fields(m)
        if bad:
            self.nonfinite.append((topic, bad[:5], m))
        if handler is not None:
            handler(m)

    def _odom(self, m):
        self.last_odom = m
        self.odom_stamps.append(cv.ns_from_time(m.header.stamp))

    def _joint_states(self, m):
        self.last_joint_state = m

    def _diag(self, msg):
        for status in msg.status:
            if not status.name.startswith(f"/{self.ns}/{NAME}:"):
                continue
            self.status = (status.level, status.message, cv.values_from_status(status))
            if status.level == DiagnosticStatus.ERROR:
                self.error_messages.add(status.message)

    def level(self):
        return None if self.status is None else self.status[0]

    def value(self, key):
        return None if self.status is None else self.status[2].get(key)

    def check_every_topic(self, expected=()) -> None:
        """No non-finite number on any topic; every topic of the node (now in the graph) was subscribed and
        carried messages (``expected``: topics that must be among them)."""
        assert not self.nonfinite, "non-finite values published: " + "; ".join(
            f"{topic} {paths}" for topic, paths, _m in self.nonfinite[:5])
        published = set(self._published())
        assert published <= set(self.subs), f"not subscribed: {sorted(published - set(self.subs))}"
        assert set(expected) <= published, f"not published: {sorted(set(expected) - published)}"
        silent = sorted(t for t in published if self.counts[t] == 0 and t not in self.EVENTS)
        assert not silent, f"no message on {silent} (checked: {self.counts})"


@pytest.fixture
def watching(probe):
    """``watching(ns, proc)``: a :class:`Watch` of that node, closed at the end of the test."""
    made = []

    def make(ns, proc):
        made.append(Watch(probe, ns, proc))
        return made[-1]

    yield make
    for w in made:
        w.close()


# ------------------------------------------------------------------------------------------ messages


def _time(sec, nanosec=0):
    return Time(sec=int(sec), nanosec=int(nanosec))


BAD_STAMPS = [_time(-1), _time(-2 ** 31), _time(0, 1_000_000_000), _time(5, 4_294_967_295), _time(-100, 999)]
ODD_STAMPS = [_time(2 ** 31 - 1, 999_999_999), _time(0), _time(1), _time(2 ** 31 - 1)]  # valid times, ignored
HUGE = [1e4, 1e5, 1e6, 1e12, 1e308, 1.5e308, -1.5e308, 1.7976931348623157e308]


def fuzz_wrenches(ns, n):
    """n WrenchStamped: huge (saturated, applied), non-finite, unknown frames, invalid stamps, valid odd stamps."""
    frames = ["", "base_link", f"{ns}/base_link", "vehicle", f"{ns}/vehicle", "world", "/world", "mars", "x" * 300,
              "world ", "WORLD", "/"]
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        kind = i % 6
        W = rng.choice(HUGE, 6) * rng.choice([-1.0, 1.0], 6)
        m = WrenchStamped()
        m.header.frame_id = frames[i % len(frames)]
        if kind == 1:
            W[rng.integers(6)] = [NAN, INF, -INF][i % 3]
        elif kind == 2:
            W[:] = [NAN, INF, -INF][i % 3]
        elif kind == 3:
            m.header.stamp = BAD_STAMPS[i % len(BAD_STAMPS)]
        elif kind == 4:
            m.header.stamp = ODD_STAMPS[i % len(ODD_STAMPS)]
            W = W * 1e-300  # tiny, applied
        cv.set_pair(m.wrench, "force", "torque", [float(x) for x in W])
        out.append(m)
    return out


def fuzz_efforts(nj, n):
    """n Float64MultiArray: wrong lengths, huge (clipped, applied), NaN, Inf."""
    rng = np.random.default_rng(2)
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            data = list(rng.choice(HUGE, int(rng.integers(0, 40))))  # wrong length (mostly)
        else:
            data = list(rng.choice(HUGE, nj) * rng.choice([-1.0, 1.0], nj))
            if kind == 2:
                data[int(rng.integers(nj))] = [NAN, INF, -INF][i % 3]
        out.append(Float64MultiArray(data=[float(x) for x in data]))
    return out


def fuzz_joint_commands(names, n):
    """n JointState: unknown/repeated/missing names, effort count mismatches, huge, NaN, Inf, invalid stamps."""
    rng = np.random.default_rng(3)
    out = []
    nj = len(names)
    for i in range(n):
        kind = i % 7
        m = JointState()
        m.name = list(names)
        effort = list(rng.choice(HUGE, nj) * rng.choice([-1.0, 1.0], nj))
        if kind == 0:
            m.name = list(names[:-1]) + ["no_such_joint"]
        elif kind == 1:
            m.name = [names[0]] * nj
        elif kind == 2:
            effort = effort[: int(rng.integers(0, nj))]
        elif kind == 3:
            effort[int(rng.integers(nj))] = [NAN, INF, -INF][i % 3]
        elif kind == 4:
            m.header.stamp = BAD_STAMPS[i % len(BAD_STAMPS)]
        elif kind == 5:
            m.name = list(names[: 1 + i % nj])  # a subset: valid (the others get zero)
            effort = effort[: len(m.name)]
        m.effort = [float(x) for x in effort]
        m.position = [NAN] * (i % 3)  # ignored
        out.append(m)
    return out


# ------------------------------------------------------------------------------------------ the flood


def _reset(probe, proc, ns):
    r = probe.call(Trigger, f"/{ns}/{NAME}/reset", Trigger.Request(), alive=[proc])
    assert r.success, r.message
    return r


def flood(probe, proc, watch, ns, topics):
    """Publish every message of ``topics`` ({topic: (type, messages)}) in bursts, round robin; reset whenever
    the node reports a fault. Returns (sent per topic, resets after a fault)."""
    pubs = {t: probe.node.create_publisher(typ, f"/{ns}/{t}", 100) for t, (typ, _m) in topics.items()}
    probe.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values())
                     and watch.status is not None, what=f"/{ns} inputs and diagnostics", alive=[proc])
    # our publisher seeing the node's subscription does not mean the node's subscription has matched our
    # publisher yet (discovery runs on each side); until it has, what we publish is lost (on a busy 2-core machine
    # a whole flood was: 0 of 2000 received). Each topic's first message is sent again every 0.1 s until the
    # node's diagnostics count one received; the flood goes on from the second
    sent = {t: 0 for t in topics}
    for t, (_typ, messages) in topics.items():
        before = watch.value(f"received_{t}") or 0

        def again(t=t, first=messages[0]):
            pubs[t].publish(first)
            sent[t] += 1
            probe.spin_for(0.1)

        poll_until(lambda: (watch.value(f"received_{t}") or 0) > before, again, TIMEOUT,
                   what=f"/{ns}/{t} receiving from the flood's publisher", alive=[proc])
    index = {t: 1 for t in topics}
    resets = 0
    seen_errors = 0
    bursts = 0
    while any(index[t] < len(m) for t, (_typ, m) in topics.items()):
        bursts += 1
        if bursts % 50 == 0:
            watch.refresh()  # a publisher the graph had not shown yet
        for t, (_typ, messages) in topics.items():
            chunk = messages[index[t]: index[t] + BURST]
            for m in chunk:
                pubs[t].publish(m)
            index[t] += len(chunk)
            sent[t] += len(chunk)
        probe.spin_for(0.01)
        if len(watch.error_messages) > seen_errors:  # a fault: reset (the flood goes on)
            seen_errors = len(watch.error_messages)
            _reset(probe, proc, ns)
            resets += 1
        proc.check_running()
    for p in pubs.values():
        probe.node.destroy_publisher(p)
    return sent, resets


def drive_to_a_fault(probe, proc, watch, ns, topic, typ, msg):
    """Hold a saturated command (sent again every 0.1 s, within cmd_timeout) until the node reports a fault."""
    pub = probe.node.create_publisher(typ, f"/{ns}/{topic}", 10)
    probe.spin_until(lambda: pub.get_subscription_count() > 0, what=f"/{ns}/{topic}", alive=[proc])
    before = len(watch.error_messages)
    deadline = time.monotonic() + 3 * TIMEOUT  # the runaway takes seconds of simulated time; a busy machine
    while len(watch.error_messages) == before:
        assert time.monotonic() < deadline, f"no fault reported by /{ns} under {msg}"
        pub.publish(msg)
        probe.spin_for(0.1)
        proc.check_running()
    probe.node.destroy_publisher(pub)


def recovered(probe, proc, watch, ns):
    """A reset clears the fault: diagnostics leave ERROR, the state is finite and simulation time advances."""
    r = _reset(probe, proc, ns)
    assert "cleared" in r.message or watch.level() != DiagnosticStatus.ERROR, r.message
    n = len(watch.odom_stamps) if watch.last_odom is not None else 0
    probe.spin_until(lambda: watch.level() is not None and watch.level() != DiagnosticStatus.ERROR
                     and (watch.value("steps_since_reset") or 0) > 50, what=f"/{ns} running after the reset",
                     alive=[proc])
    if watch.last_odom is not None:
        # odometry published before the reset may still be queued in the probe when its answer arrives: at most one
        # step back in time (to the reset), then strictly forward
        def since_reset():
            stamps = watch.odom_stamps[n:]
            back = [i for i in range(1, len(stamps)) if stamps[i] <= stamps[i - 1]]
            assert len(back) <= 1, f"simulation time went back {len(back)} times after a reset"
            return stamps[back[-1]:] if back else stamps

        probe.spin_until(lambda: len(since_reset()) >= 5, what=f"/{ns}/odom advancing after the reset", alive=[proc])
    state = watch.last_joint_state
    assert state is not None and _finite([*state.position, *state.velocity])


def report(name, sent, watch, resets):
    faults = int(watch.value("faults"))
    figures = dict(sent=sent, received={t: int(watch.value(f"received_{t}")) for t in sent},
                   rejected={t: int(watch.value(f"rejected_{t}")) for t in sent}, crashes=0,
                   nonfinite=len(watch.nonfinite), outputs_checked=dict(sorted(watch.counts.items())),
                   faults=faults,
                   error_reports=len(watch.error_messages), resets_after_fault=resets,
                   saturated_wrench=int(watch.value("saturated_wrench_commands")),
                   saturated_effort=int(watch.value("saturated_effort_commands")),
                   callback_errors=int(watch.value("callback_errors")))
    FIGURES[name] = figures
    print(f"\n{name}: {figures}")
    return figures


# ------------------------------------------------------------------------------------------ tests


def test_fuzz_uvms(probe, nodes, watching):
    proc, ns = nodes["uvms"], "fz_uvms"
    watch = watching(ns, proc)
    topics = {"cmd_wrench": (WrenchStamped, fuzz_wrenches(ns, FLOOD)),
              "cmd_joint_effort": (Float64MultiArray, fuzz_efforts(6, FLOOD)),
              "joint_command": (JointState, fuzz_joint_commands(UVMS_JOINTS, FLOOD))}
    sent, resets = flood(probe, proc, watch, ns, topics)
    # the cases, one at a time: a world-frame 1.5e308 wrench and a 1e12 N m joint effort held until the
    # simulation runs away; each is reported and recovered from
    w = WrenchStamped()
    w.header.frame_id = "world"
    cv.set_pair(w.wrench, "force", "torque", [1.5e308, 0.0, 0.0, 0.0, 1.5e308, 0.0])
    drive_to_a_fault(probe, proc, watch, ns, "cmd_wrench", WrenchStamped, w)
    recovered(probe, proc, watch, ns)
    drive_to_a_fault(probe, proc, watch, ns, "cmd_joint_effort", Float64MultiArray,
                     Float64MultiArray(data=[0.0, 0.0, 0.0, 0.0, 0.0, 1e12]))
    recovered(probe, proc, watch, ns)
    probe.spin_until(lambda: watch.value("received_joint_command") is not None, alive=[proc])
    f = report("uvms", sent, watch, resets)
    proc.check_running()
    assert all(n >= FLOOD for n in sent.values())
    watch.check_every_topic([f"/{ns}/{t}" for t in ("odom", "pose", "wrench", "joint_states", "joint_effort",
                                                    "markers", "energy", "joint_wrenches/joint1")]
                            + ["/tf", "/clock", "/diagnostics"])
    assert f["faults"] >= 2 and f["error_reports"] == f["faults"], f
    assert f["saturated_wrench"] > 0 and f["saturated_effort"] > 0
    assert f["callback_errors"] == 0
    assert all(f["rejected"][t] > 0 for t in sent)


def test_fuzz_fixed_arm(probe, nodes, watching):
    proc, ns = nodes["arm"], "fz_arm"
    watch = watching(ns, proc)
    topics = {"cmd_wrench": (WrenchStamped, fuzz_wrenches(ns, FLOOD)),  # a fixed base takes none
              "cmd_joint_effort": (Float64MultiArray, fuzz_efforts(6, FLOOD)),
              "joint_command": (JointState, fuzz_joint_commands(UVMS_JOINTS, FLOOD))}
    sent, resets = flood(probe, proc, watch, ns, topics)
    drive_to_a_fault(probe, proc, watch, ns, "cmd_joint_effort", Float64MultiArray,
                     Float64MultiArray(data=[1e12, -1e12, 1e12, 1e12, 1e12, 1e12]))
    recovered(probe, proc, watch, ns)
    f = report("arm", sent, watch, resets)
    proc.check_running()
    watch.check_every_topic([f"/{ns}/{t}" for t in ("joint_states", "joint_effort", "markers", "energy",
                                                    "joint_wrenches/joint1")] + ["/tf", "/diagnostics"])
    assert f["faults"] >= 1 and f["error_reports"] == f["faults"], f
    assert f["rejected"]["cmd_wrench"] == f["received"]["cmd_wrench"] > 0, "a fixed base takes no wrench"
    assert f["saturated_effort"] > 0 and f["callback_errors"] == 0


def test_fuzz_contact_worlds(probe, nodes, watching):
    """Issue 30's contact topics under the flood: the puck (se3, pushed by its disturbance groups, resting on the
    ground beside a free crate) fuzzed on cmd_wrench, the arm (joint limits on, its crate on the ground) on its
    effort and joint commands; a held 1.5e308 wrench drives the puck to a fault it recovers from. Every topic
    each publishes (contacts/<link>, contacts/markers, world/markers, the crate on /tf among them) is checked
    for non-finite numbers: none, and no crash."""
    cases = {"puck": ("fz_puck", {"cmd_wrench": (WrenchStamped, fuzz_wrenches("fz_puck", CONTACT_FLOOD))},
                      ["contacts/base_link", "contacts/crate"]),
             "carm": ("fz_carm", {"cmd_joint_effort": (Float64MultiArray, fuzz_efforts(2, CONTACT_FLOOD)),
                                  "joint_command": (JointState, fuzz_joint_commands(["joint1", "joint2"],
                                                                                    CONTACT_FLOOD))},
                      ["contacts/crate"])}
    for key, (ns, topics, links) in cases.items():
        proc = nodes[key]
        watch = watching(ns, proc)
        probe.spin_until(lambda: (watch.value("contact_steps") or 0) > 0, what=f"/{ns}'s first contact step",
                         alive=[proc])
        sent, resets = flood(probe, proc, watch, ns, topics)
        if key == "puck":
            w = WrenchStamped()
            w.header.frame_id = "world"
            cv.set_pair(w.wrench, "force", "torque", [1.5e308, 0.0, 0.0, 0.0, 1.5e308, 0.0])
            drive_to_a_fault(probe, proc, watch, ns, "cmd_wrench", WrenchStamped, w)
            _reset(probe, proc, ns)
        probe.spin_until(lambda: (watch.value("steps_since_reset") or 0) > 50 and watch.level() is not None
                         and watch.level() != DiagnosticStatus.ERROR, what=f"/{ns} running after the flood",
                         alive=[proc])
        watch.refresh()
        probe.spin_for(1.0)  # every topic subscribed now carries messages
        f = report(f"contact_{key}", sent, watch, resets)
        proc.check_running()
        watch.check_every_topic([f"/{ns}/{t}" for t in ["contacts/markers", "world/markers", *links]]
                                + ["/tf", "/diagnostics"])
        assert f["callback_errors"] == 0 and f["nonfinite"] == 0, f
        assert int(watch.value("contact_steps")) > 0 and all(f["rejected"][t] > 0 for t in sent), f


def test_pause_false_does_not_clear_a_fault(probe, nodes, watching):
    proc, ns = nodes["arm"], "fz_arm"
    watch = watching(ns, proc)
    drive_to_a_fault(probe, proc, watch, ns, "cmd_joint_effort", Float64MultiArray,
                     Float64MultiArray(data=[-1e12] * 6))
    r = probe.call(SetBool, f"/{ns}/{NAME}/pause", SetBool.Request(data=False), alive=[proc])
    assert not r.success and "~/reset" in r.message
    assert watch.value("fault"), "still halted"
    recovered(probe, proc, watch, ns)


def set_param(probe, proc, ns, name, value):
    req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
    return probe.call(SetParameters, f"/{ns}/{NAME}/set_parameters", req, alive=[proc]).results[0]


@pytest.mark.parametrize("name, value, reason", [
    ("cmd_timeout", 0.0, "hold the last command forever"),
    ("cmd_timeout", -1.0, "cmd_timeout"),
    ("cmd_timeout", 1e5, "cmd_timeout"),
    ("publish_rate", 1e-3, "Min: 0.1"),  # the table's range, which rclpy holds itself at run time (issue 31 item 24)
    ("publish_rate", 1000.0, "must not exceed physics_rate"),
    ("gravity", [0.0, 0.0, 1e12], "gravity must have a norm <= 1000"),
    ("initial_joint_positions", [1e300] * 6, "outside [-3.14"),
    ("initial_joint_positions", [0.0, 0.0, 0.0, 0.0, 0.0, 4.0], "joint6 = 4 outside"),
    ("initial_joint_velocities", [0.0, 0.0, 0.0, 0.0, 0.0, 1e6], "runaway bound"),
    ("initial_position", [1e300, 0.0, 0.0], "initial_position"),
    ("initial_twist", [0.0, 0.0, 0.0, 1e4, 0.0, 0.0], "runaway bound"),
    ("max_wrench", [0.0, 10.0], "max_wrench must be positive"),
    ("max_wrench", [1.0, 2.0, 3.0], "max_wrench"),
    ("max_effort", [1.0, 2.0], "one value per joint"),
    ("max_effort", -5.0, "max_effort"),
])
def test_unsafe_runtime_parameters_are_refused(probe, nodes, name, value, reason):
    proc, ns = nodes["uvms"], "fz_uvms"
    r = set_param(probe, proc, ns, name, value)
    assert not r.successful, f"{name} := {value} was accepted"
    assert reason in r.reason, r.reason
    proc.check_running()


def test_safe_runtime_parameters_are_taken(probe, nodes):
    proc, ns = nodes["uvms"], "fz_uvms"
    for name, value in (("cmd_timeout", 0.25), ("publish_rate", 0.5), ("publish_rate", 100.0),
                        ("gravity", [0.0, 0.0, -9.81]), ("gravity", [0.0, 0.0, 0.0]),
                        ("initial_joint_positions", [0.0, 0.6, -1.2, 0.0, 0.6, 0.0]),
                        ("max_wrench", [500.0, 50.0]), ("max_effort", 10.0), ("max_effort", []),
                        ("max_wrench", []), ("cmd_timeout", 0.5)):
        r = set_param(probe, proc, ns, name, value)
        assert r.successful, f"{name} := {value}: {r.reason}"


def test_physics_rate_refused_or_warned(probe, nodes):
    """The issue's fixed arm at 2 Hz (it diverged to 1e52): refused at start-up with the reason; at 1 kHz it
    runs; at 40 Hz with rk4 it runs, and switching it to euler (energy doubling per period) is refused."""
    slow = nodes["arm_2hz"]
    rc = slow.wait(timeout=TIMEOUT)
    assert rc is not None and rc != 0, "the 2 Hz arm must not start"
    assert "physics_rate 2 Hz is unstable" in slow.log_text(), slow.log_text()
    fast = nodes["arm_1khz"]
    assert fast.wait_for_log("runaway beyond 1000 rad/s", timeout=TIMEOUT), fast.log_text()
    assert "may be too low" not in fast.log_text()
    fast.check_running()
    mid, ns = nodes["arm_40hz"], "fz_arm40"
    assert mid.wait_for_log("runaway beyond 40 rad/s", timeout=TIMEOUT), mid.log_text()
    r = set_param(probe, mid, ns, "integrator", "euler")
    assert not r.successful and "unstable" in r.reason and "euler" in r.reason, r.reason
    assert set_param(probe, mid, ns, "integrator", "heun").successful
    mid.check_running()


def test_every_node_exits_cleanly(nodes):
    """Last: the flooded nodes are alive and stop with exit code 0."""
    for key in ("uvms", "arm", "arm_1khz", "arm_40hz"):
        proc = nodes[key]
        proc.check_running()
        assert proc.stop() == 0, f"{key}: {proc.log_tail()}"
    if FIGURES:
        print("\nfigures:", FIGURES)
