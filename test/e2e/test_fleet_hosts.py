"""A robot whose simulation and control run on two hosts, as a fleet spread over machines runs.

Two Linux network namespaces stand for the hosts: each has only its loopback and one end of a veth pair, with
addresses on one /24 (host A 192.168.213.1, host B 192.168.213.2), so DDS traffic between them crosses that
link exactly as between two machines on a LAN. Host A runs the ``vehicle`` scenario's dynamics node (the SE(2)
vessel with its 2-link arm, ``/asv``) and a probe; host B runs its controller and reference nodes. Both use the
run's own ``ROS_DOMAIN_ID`` (conftest.py) and ``FASTDDS_BUILTIN_TRANSPORTS=UDPv4``, and discover each other

- ``subnet``: with ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET`` (multicast discovery on the veth), or
- ``static_peers``: with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_STATIC_PEERS`` = the other host's
  address (unicast discovery of named peers only, for networks that drop multicast).

The scenario runs in lockstep on simulation time, started as the runner starts such a run
(:func:`mbs_ros.bringup.runner_plan.runner_specs`: the dynamics node paused at t = 0 with ``pause_at`` = the
reference's end + SETTLE, the reference stamped 0): the dynamics node advances one control period only when the
controller's commands stamped with that period have come back over the link, so the closed loop is exactly the
discrete design whatever the load (free-running on the wall clock, late commands under load left the base 4.7 cm
off after SETTLE). The probe on host A plays the runner's part: it resumes the dynamics node (``~/pause`` false)
once the controller on B reports, in its ``~/diagnostics``, that it holds the references, then waits for the state
stamped at the end, where the dynamics node pauses itself. That state is checked against the reference's last point
(TOLERANCE) and against the same discrete loop run in one process without ROS (:func:`mbs_ros.headless.run_scenario`,
DESIGN): a state on A at 8.5 s of simulated time means 850 periods' commands crossed from B, each in its period.
Every wait is for a condition (a message, a stamp, a reply) with a generous deadline; nothing is measured against
the wall clock. Skipped, with the reason, where network namespaces cannot be made (not root, no ``ip``, ``ip netns``
not permitted, e.g. in an unprivileged container): detected by trying. Namespaces and processes are removed even
when the test fails (and namespaces a killed earlier run left behind, at the start).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from mbs_ros.bringup import load_scenario  # noqa: E402
from mbs_ros.bringup.runner_plan import reference_topics, runner_specs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SUBNET = "192.168.213"
ADDRESS = {"a": f"{SUBNET}.1", "b": f"{SUBNET}.2"}
TIMEOUT = 180.0  # from the first process started to the verdict, on a loaded 2-core machine
SETTLE = 4.0  # s after the reference's last point: computed torque with kp 9, kd 6 (double pole at 3 rad/s)
#: the scenario as this test runs it: lockstep on simulation time, as fast as the controller answers
OVERRIDES = {"lockstep": True, "sim_time": True, "real_time_factor": 0.0}
# README's figure: the lockstep loop's errors are 2.0e-7 m, 6.6e-8 rad (yaw) and 1.8e-7 rad (joints) at any load
TOLERANCE = {"base_position_m": 1e-6, "base_yaw_rad": 1e-6, "joints_rad": 1e-6}
#: the final state over the link against the same discrete loop run headless (the same cores, bit-identical by
#: test_headless_identity; a free-running loop differs from it by 1e-7 and more)
DESIGN = 1e-9
PREFIX = "mbs"  # namespaces mbs<pid>a, mbs<pid>b; veth mbs<pid>va / mbs<pid>vb (at most 15 characters)


def _ip(*args, check=True):
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip() or p.returncode}")
    return p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_namespace(name: str) -> None:
    """Kill what still runs in it, then delete it (its veth end goes with it)."""
    pids = _ip("netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("netns", "del", name, check=False)


def _remove_stale_namespaces() -> None:
    """Namespaces of earlier runs that were killed before their clean-up (their pid is gone)."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        m = re.match(rf"^({PREFIX}(\d+)[ab])\b", line)
        if m and not _alive(int(m.group(2))):
            _remove_namespace(m.group(1))


class Hosts:
    """Two network namespaces joined by a veth pair; processes started in them, all stopped by :meth:`close`."""

    def __init__(self):
        pid = os.getpid()
        self.ns = {h: f"{PREFIX}{pid}{h}" for h in "ab"}
        self.dev = {h: f"{PREFIX}{pid}v{h}" for h in "ab"}
        self.procs = []

    def create(self):
        for h in "ab":
            _ip("netns", "add", self.ns[h])
        _ip("link", "add", self.dev["a"], "type", "veth", "peer", "name", self.dev["b"])
        for h in "ab":
            _ip("link", "set", self.dev[h], "netns", self.ns[h])
            _ip("-n", self.ns[h], "addr", "add", f"{ADDRESS[h]}/24", "dev", self.dev[h])
            _ip("-n", self.ns[h], "link", "set", "lo", "up")
            _ip("-n", self.ns[h], "link", "set", self.dev[h], "up")
            _ip("-n", self.ns[h], "route", "add", "224.0.0.0/4", "dev", self.dev[h])  # multicast out of the veth

    def start(self, host, args, env, log: Path):
        """``args`` in host ``host`` (``ip netns exec`` execs it: the process is the command itself)."""
        out = open(log, "w")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns[host], *map(str, args)], env=env, stdout=out,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        p.log, p.out, p.host = log, out, host
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:  # a terminal's Ctrl-C to each process group, then SIGKILL
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 20.0
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            p.out.close()
        for h in "ab":
            _remove_namespace(self.ns[h])


@pytest.fixture
def hosts():
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2): cannot make network namespaces")
    try:
        _remove_stale_namespaces()
        h = Hosts()
        try:
            h.create()
            probe = subprocess.run(["ip", "netns", "exec", h.ns["a"], sys.executable, "-c", "pass"],
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode != 0:
                raise RuntimeError(f"ip netns exec: {probe.stderr.strip()}")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            h.close()
            pytest.skip(f"network namespaces are not available here (uid {os.geteuid()}): {e}")
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"network namespaces are not available here: {e}")
    try:
        yield h
    finally:
        h.close()
        left = [line for line in _ip("netns", "list", check=False).stdout.splitlines()
                if line.split()[0] in h.ns.values()]
        assert not left, f"namespaces left behind: {left}"


# The probe on host A: the robot's state (local), the controller's commands, diagnostics and the references (from
# host B); it resumes the paused dynamics node once the controller holds the references, as the runner does.
PROBE = r"""
import json, math, sys, time
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory, MultiDOFJointTrajectory
from mbs_ros.bringup.runner_plan import holds_references
from mbs_ros.nodes.conversions import values_from_status

ns, settle, timeout, diagnostics, pause, topics = (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
                                                   sys.argv[5], sys.argv[6].split(","))
rclpy.init()
node = rclpy.create_node("fleet_probe")
first, last = {}, {}
def keep(name):
    def cb(m):
        first.setdefault(name, time.monotonic())
        last[name] = m
    return cb
latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
for cls, topic, qos in ((Odometry, "odom", 10), (JointState, "joint_states", 10), (WrenchStamped, "cmd_wrench", 10),
                        (Float64MultiArray, "cmd_joint_effort", 10), (JointState, "joint_command", 10),
                        (MultiDOFJointTrajectory, "base_reference", latched),
                        (JointTrajectory, "joint_reference", latched)):
    node.create_subscription(cls, f"/{ns}/{topic}", keep(topic), qos)
node.create_subscription(DiagnosticArray, diagnostics, keep("diagnostics"), 10)
client = node.create_client(SetBool, pause)

def ns_of(stamp):
    return stamp.sec * 10**9 + stamp.nanosec
def seconds(d):
    return d.sec + d.nanosec * 1e-9
def yaw(q):
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
def fail(why):
    print(json.dumps({"failed": why, "seen": sorted(first)}), flush=True)
    sys.exit(1)

# every wait is for a message, a stamp or a reply; the deadline only bounds a run that hangs
deadline, end_ns, resume, resumed, print_at = time.monotonic() + timeout, None, None, None, 0.0
while True:
    rclpy.spin_once(node, timeout_sec=0.05)
    if end_ns is None and "base_reference" in last and "joint_reference" in last:
        b, j = last["base_reference"], last["joint_reference"]
        start = max(ns_of(b.header.stamp), ns_of(j.header.stamp))  # simulation time: 0 (start_time)
        end_ns = start + round((max(seconds(b.points[-1].time_from_start), seconds(j.points[-1].time_from_start))
                                + settle) * 1e9)
    if resume is None and "diagnostics" in last and last["diagnostics"].status:
        values = values_from_status(last["diagnostics"].status[0])
        if any(values.get(f"rejected_{t}", 0) > 0 for t in topics):
            fail(f"the controller rejected a reference: {values}")
        if holds_references(values, topics) and client.service_is_ready():
            resume = client.call_async(SetBool.Request(data=False))
    if resume is not None and resumed is None and resume.done():
        r = resume.result()
        if r is None or not r.success:
            fail(f"{pause} refused to resume: {getattr(r, 'message', 'no response')}")
        resumed = r.message
        print("probe: resumed:", resumed, flush=True)
    if resumed is not None and end_ns is not None and "odom" in last and "joint_states" in last \
            and ns_of(last["odom"].header.stamp) >= end_ns and ns_of(last["joint_states"].header.stamp) >= end_ns:
        break
    if time.monotonic() > deadline:
        fail(f"timeout: resumed {resumed is not None}, end {end_ns}, state at "
             f"{ns_of(last['odom'].header.stamp) if 'odom' in last else None}")
    if time.monotonic() > print_at:
        print_at = time.monotonic() + 2.0
        print("probe: seen", sorted(first), "state at",
              ns_of(last["odom"].header.stamp) if "odom" in last else None, flush=True)

b, j, odom, js = last["base_reference"], last["joint_reference"], last["odom"], last["joint_states"]
goal = b.points[-1].transforms[0]
p = odom.pose.pose.position
dyaw = yaw(odom.pose.pose.orientation) - yaw(goal.rotation)
position = dict(zip(js.name, js.position))
result = {
    "first": first,
    "end_ns": end_ns,
    "reference_stamps": [ns_of(b.header.stamp), ns_of(j.header.stamp)],
    "state_stamps": [ns_of(odom.header.stamp), ns_of(js.header.stamp)],
    "base": [p.x, p.y, yaw(odom.pose.pose.orientation)],
    "base_goal": [goal.translation.x, goal.translation.y, yaw(goal.rotation)],
    "joints": [position[n] for n in j.joint_names],
    "joints_goal": list(j.points[-1].positions),
    "base_position_m": math.hypot(p.x - goal.translation.x, p.y - goal.translation.y),
    "base_yaw_rad": abs(math.atan2(math.sin(dyaw), math.cos(dyaw))),
    "joints_rad": max(abs(position[n] - q) for n, q in zip(j.joint_names, j.points[-1].positions)),
}
print("RESULT " + json.dumps(result), flush=True)
node.destroy_node()
rclpy.try_shutdown()
"""

LOG_TIME = re.compile(r"\[(?:INFO|WARN)\] \[(\d+\.\d+)\] \[[^]]*controller_node\]: (.*)")


def _controller_times(text):
    """Wall-clock times of the controller's log lines: up (its model loaded) and its first state."""
    up = first = None
    for stamp, message in LOG_TIME.findall(text):
        if up is None:
            up = float(stamp)
        if first is None and message.startswith("first state"):
            first = float(stamp)
    return up, first


def _scenario():
    """The ``vehicle`` scenario in lockstep on simulation time, and where its run ends [s]: SETTLE after the last
    point of its references."""
    scenario = load_scenario("vehicle", overrides=OVERRIDES)
    robot = scenario.robots[0]
    return scenario, max(robot.base_reference[-1].time, robot.joint_reference[-1].time) + SETTLE


@pytest.fixture(scope="module")
def design():
    """The state at the end of the same discrete loop, run in one process without ROS: ``(stamp [ns], [x, y, yaw],
    joints)``."""
    from mbs_ros.headless import run_scenario

    scenario, end = _scenario()
    run = run_scenario(scenario, duration=end)
    assert run.fault is None, run.fault
    rec = next(iter(run.robots.values()))
    q = [float(x) for x in rec.q[-1]]  # se2: x, y, cos yaw, sin yaw, then the joints
    return int(rec.stamp_ns[-1]), [q[0], q[1], math.atan2(q[3], q[2])], q[rec.nq_base:]


@pytest.mark.parametrize("discovery", ["subnet", "static_peers"])
def test_robot_simulated_on_one_host_controlled_from_another(hosts, discovery, design, tmp_path):
    scenario, end = _scenario()
    # as the runner starts a lockstep run on simulation time: dynamics paused at 0 until resumed, pausing itself at
    # t = end; the reference stamped 0
    specs = {s.role: s for s in runner_specs(scenario, duration=end)}
    assert specs["dynamics"].parameters["lockstep"] and specs["dynamics"].parameters["pause_at"] == end
    base_env = dict(os.environ, FASTDDS_BUILTIN_TRANSPORTS="UDPv4", PYTHONUNBUFFERED="1")
    base_env.pop("ROS_STATIC_PEERS", None)
    env = {}
    for h, other in (("a", "b"), ("b", "a")):
        if discovery == "subnet":
            env[h] = dict(base_env, ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET")
        else:
            env[h] = dict(base_env, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_STATIC_PEERS=ADDRESS[other])
    commands = {}
    for role, spec in specs.items():
        params = tmp_path / f"{role}.params.yaml"
        params.write_text(spec.params_yaml())
        commands[role] = spec.command(params)

    ctl, dyn = specs["controller"], specs["dynamics"]
    probe_args = ["asv", SETTLE, TIMEOUT, f"{ctl.namespace.rstrip('/')}/{ctl.name}/diagnostics",
                  f"{dyn.namespace.rstrip('/')}/{dyn.name}/pause", ",".join(reference_topics(specs["reference"]))]
    probe = hosts.start("a", [sys.executable, "-c", PROBE, *probe_args], env["a"], tmp_path / "probe.log")
    dynamics = hosts.start("a", commands["dynamics"], env["a"], tmp_path / "dynamics.log")
    b_started = time.time()
    b_started_mono = time.monotonic()
    controller = hosts.start("b", commands["controller"], env["b"], tmp_path / "controller.log")
    reference = hosts.start("b", commands["reference"], env["b"], tmp_path / "reference.log")

    def logs():
        return "\n".join(f"--- {p.log.name} (host {p.host}, exit {p.poll()}):\n{p.log.read_text()[-3000:]}"
                         for p in hosts.procs)

    try:
        probe.wait(timeout=TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the probe did not finish in {TIMEOUT + 30} s\n{logs()}") from None
    for p in (dynamics, controller, reference):
        assert p.poll() is None or p.returncode == 0, f"{p.log.name} exited {p.returncode}\n{logs()}"
    # the nodes of each host really are in a network of their own, apart from this process's
    net = {name: os.stat(f"/proc/{p.pid}/ns/net").st_ino for name, p in (("a", dynamics), ("b", controller))}
    assert len({net["a"], net["b"], os.stat("/proc/self/ns/net").st_ino}) == 3
    lines = [line for line in probe.log.read_text().splitlines() if line.startswith("RESULT ")]
    assert probe.returncode == 0 and lines, f"probe exit {probe.returncode}\n{logs()}"
    r = json.loads(lines[-1][len("RESULT "):])

    up, first_state = _controller_times(controller.log.read_text())
    assert up is not None and first_state is not None, logs()
    first_command = min(r["first"][t] for t in ("cmd_wrench", "cmd_joint_effort", "joint_command") if t in r["first"])
    stamp, base, joints = design
    summary = (f"{discovery}: host A {ADDRESS['a']}/24 (dynamics node, probe), host B {ADDRESS['b']}/24 (controller, "
               f"reference); controller up {up - b_started:.2f} s after B's start, A's first state reached it "
               f"{first_state - up:.2f} s later; B's first command reached A {first_command - b_started_mono:.2f} s "
               f"after B's start; state at t = {r['state_stamps'][0] * 1e-9:g} s: base "
               f"{[round(x, 4) for x in r['base']]} vs {[round(x, 4) for x in r['base_goal']]}, joints "
               f"{[round(x, 4) for x in r['joints']]} vs {[round(x, 4) for x in r['joints_goal']]}; errors: position "
               f"{r['base_position_m']:.2e} m, yaw {r['base_yaw_rad']:.2e} rad, joints {r['joints_rad']:.2e} rad; "
               f"from the headless loop: {max(abs(a - b) for a, b in zip(r['base'] + r['joints'], base + joints)):.1e}")
    print("\n" + summary)
    # the run went to its end in simulated time, and stopped there: every period's commands crossed the link
    assert r["reference_stamps"] == [0, 0], summary
    assert r["end_ns"] == stamp == round(end * 1e9), summary
    assert r["state_stamps"] == [stamp, stamp], f"the state is not the one at the end, {stamp} ns\n{summary}"
    for key, bound in TOLERANCE.items():
        assert r[key] < bound, f"{key} = {r[key]:.3g} (bound {bound})\n{summary}\n{logs()}"
    for name, got, want in (("base", r["base"], base), ("joints", r["joints"], joints)):
        assert got == pytest.approx(want, abs=DESIGN, rel=0), \
            f"{name} {got} is not the discrete loop's {want} (headless run)\n{summary}\n{logs()}"
