"""Every numeric parameter at its extremes, in real node processes (the values: test/parameter_extremes.py).

- run time: a dynamics node simulating a single rigid body (and one simulating the 2-link arm, for max_effort)
  takes each parameter's lowest and highest value and refuses one just outside on each side with a reason that
  names it; meanwhile every topic the nodes publish is subscribed and every number in every message (the
  numbers in /diagnostics' texts included) must be finite, also after a ``~/reset`` with the coldest
  environment;
- start-up: dynamics and controller nodes started with every parameter at its lowest, or every one at its
  highest (the slowest rates and the fastest physics in nodes of their own), run and publish only finite
  numbers; one started with a value just outside (one side per parameter: the other is refused by the same
  check at run time and in the unit tests) exits at once with an error naming the parameter (no traceback): a
  seeded subset of those start-ups each run, all of them with ``--full-sweeps``.

Every wait is for a graph match, a message, a service answer or a process exit, with a generous timeout;
nothing is asserted about wall-clock speed.
"""
from __future__ import annotations

import importlib
import math
import os
from pathlib import Path

import numpy as np
import parameter_extremes as extremes
import pytest
import sweeps

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs not built into this environment yet")

from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from contact_fixtures import write_arm, write_puck  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import Probe, ros_env_defaults, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ARM = dict(model_file=str(ROOT / "config" / "robots" / "arm_2link_planar.yaml"), base_group="fixed")
TIMEOUT = 90.0
DYN, CTL = "mbs_ros.nodes.dynamics_node", "mbs_ros.nodes.controller_node"
BODY = dict(physics_rate=1000.0, diagnostics_rate=10.0, publish_clock=True)
BATCH = 6  # refused start-ups run side by side, this many at a time
# a refused start-up's exit, counted from the batch's start: its imports (rclpy, numba's cached kernels) alone took
# over 90 s of wall clock at load 25 (six at once beside another ROS test's 18 nodes); only a hang waits this long
EXIT_TIMEOUT = 300.0
# issue 30's contact scene: the puck resting on the ground beside a free crate (contacts/<link>, contacts/markers,
# world/markers, the crate on /tf), its contact topics at 100 Hz
PUCK_CRATE_WORLD = ("world:\n  ground: {height: 0.0, mu: 0.6}\n  objects:\n"
                    "    - {name: crate, box: [0.2, 0.2, 0.2], mass: 2.0, xyz: [0.25, 0.0, 0.12], mu: 0.5}\n")
PUCK = dict(initial_position=[0.0, 0.0, 0.06], contacts_rate=100.0, diagnostics_rate=10.0)


def own_diagnostics(namespace: str) -> dict:
    """A start-up node's /diagnostics on a topic of its own, ``/<namespace>/diagnostics``. On the one shared topic
    the highest node's reports (1000 Hz, also once halted) fill the probe's queue of the topic faster than a probe
    starved on a loaded machine reads it, so the 1 Hz reports of the others were dropped before being read (the
    wait for a report of every node timed out under load); a topic per node has its own queue."""
    return {"/diagnostics": f"/{namespace}/diagnostics"}


def message_type(name: str):
    pkg, kind, cls = name.split("/")
    module = importlib.import_module(f"{pkg}.{kind}")
    if kind == "action" and cls.endswith("_FeedbackMessage"):  # an action's feedback topic (a joint trajectory)
        return getattr(module, cls[:-len("_FeedbackMessage")]).Impl.FeedbackMessage
    return getattr(module, cls)


def nonfinite(msg, path="") -> list:
    """Every non-finite number of a message (floats, float arrays, and numbers written in its strings)."""
    out = []
    if hasattr(msg, "get_fields_and_field_types"):
        for name in msg.get_fields_and_field_types():
            out += nonfinite(getattr(msg, name), f"{path}.{name}")
    elif isinstance(msg, float):
        if not math.isfinite(msg):
            out.append(f"{path} = {msg}")
    elif isinstance(msg, str):
        for token in msg.replace(",", " ").replace("[", " ").replace("]", " ").split():
            try:
                x = float(token)
            except ValueError:
                continue
            if not math.isfinite(x):
                out.append(f"{path} has {token!r}")
    elif isinstance(msg, np.ndarray) or type(msg).__name__ == "array":
        a = np.asarray(msg)
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            out.append(f"{path} = {a}")
    elif isinstance(msg, (list, tuple)):
        for i, x in enumerate(msg):
            out += nonfinite(x, f"{path}[{i}]")
    return out


class Watch:
    """Subscribes every topic of the given namespaces (and /tf, /diagnostics, /clock) as it appears; counts the
    messages per topic and keeps every non-finite number found."""

    def __init__(self, probe, namespaces):
        self.probe, self.namespaces = probe, tuple(f"/{ns}/" for ns in namespaces)
        self.counts, self.bad, self.subs = {}, [], {}

    def discover(self):
        for topic, types in self.probe.node.get_topic_names_and_types():
            wanted = topic.startswith(self.namespaces) or topic in ("/tf", "/diagnostics", "/clock", "/tf_static")
            if wanted and topic not in self.subs and "rosout" not in topic and "parameter_events" not in topic:
                self.counts[topic] = 0
                self.subs[topic] = self.probe.node.create_subscription(
                    message_type(types[0]), topic, lambda m, t=topic: self._on(t, m), QoSProfile(depth=50))

    def _on(self, topic, m):
        self.counts[topic] += 1
        if topic == "/diagnostics":  # shared: counted per node too, as "/diagnostics:<namespace>"
            for status in m.status:
                key = "/diagnostics:" + status.name.split(":")[0].strip("/").split("/")[0]
                self.counts[key] = self.counts.get(key, 0) + 1
        if len(self.bad) < 20:
            self.bad += [f"{topic}{p}" for p in nonfinite(m)]

    def fresh(self, topics, what, alive):
        """Spin until each of ``topics`` has a message newer than now."""
        start = {t: self.counts.get(t, 0) for t in topics}
        try:
            self.probe.spin_until(lambda: self.discover() or all(self.counts.get(t, 0) > start[t] for t in topics),
                                  what=what, alive=alive)
        except AssertionError as e:
            raise AssertionError(f"{e}; messages before and now: "
                                 + ", ".join(f"{t} {start[t]} -> {self.counts.get(t, 0)}" for t in topics)) from None


def reset(probe, proc, node):
    r = probe.call(Trigger, f"{node}/reset", Trigger.Request(), alive=[proc])
    assert r.success, r.message


def set_param(probe, proc, node, name, value):
    req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
    return probe.call(SetParameters, f"{node}/set_parameters", req, alive=[proc]).results[0]


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    ros_env_defaults()
    logs = tmp_path_factory.mktemp("extremes_logs")
    procs = {
        "body": NodeProcess(DYN, name="dynamics_node", namespace="px_body", parameters=BODY,
                            log_file=logs / "body.log"),
        "arm": NodeProcess(DYN, name="dynamics_node", namespace="px_arm", parameters=dict(ARM, diagnostics_rate=10.0),
                           log_file=logs / "arm.log"),
        "puck": NodeProcess(DYN, name="dynamics_node", namespace="px_puck",
                            parameters=dict(PUCK, model_file=str(write_puck(logs, PUCK_CRATE_WORLD))),
                            log_file=logs / "puck.log"),
    }
    with running(procs), Probe("test_extremes_probe", TIMEOUT) as probe:
        watch = Watch(probe, ("px_body", "px_arm", "px_puck"))
        alive = list(procs.values())
        probe.spin_until(lambda: watch.discover() or {"/px_body/odom", "/px_arm/joint_states", "/diagnostics",
                                                       "/clock"} <= set(watch.subs), what="the nodes' topics",
                         alive=alive)
        watch.fresh(["/px_body/odom", "/px_arm/joint_states", "/diagnostics", "/px_puck/contacts/base_link",
                     "/px_puck/contacts/crate", "/px_puck/contacts/markers", "/px_puck/world/markers"],
                    "the first states and contacts", alive)
        yield probe, procs, watch, logs


def _run_time_rows():
    rows = [("body", r) for r in extremes.DYNAMICS_RUNTIME + extremes.DYNAMICS_RUNTIME_VECTORS]
    rows += [("puck", r) for r in extremes.ROBOT_RUNTIME + extremes.ROBOT_RUNTIME_VECTORS]
    return rows + [("arm", extremes.ARM_EFFORT)]


@pytest.mark.parametrize("which, row", _run_time_rows(), ids=[f"{w}-{r[0]}" for w, r in _run_time_rows()])
def test_run_time_extremes(rig, which, row):
    probe, procs, watch, _logs = rig
    proc, node = procs[which], f"/px_{which}/dynamics_node"
    name, lo, hi, below, above = row
    default = extremes_default(name)
    for value in (lo, hi):
        r = set_param(probe, proc, node, name, value)
        assert r.successful, f"{name} := {value}: {r.reason}"
        reset(probe, proc, node)  # from the initial state these settings give (a runaway halts: a fault, finite)
        probe.spin_for(0.3)  # an observation window: whatever the nodes publish meanwhile is checked
        assert not watch.bad, watch.bad
    for value in (below, above):
        if value is None:
            continue
        r = set_param(probe, proc, node, name, value)
        assert not r.successful, f"{name} := {value} was accepted"
        assert name in r.reason, r.reason
    r = set_param(probe, proc, node, name, default)
    assert r.successful, f"{name} back to {default}: {r.reason}"
    reset(probe, proc, node)
    topic = {"body": "/px_body/odom", "arm": "/px_arm/joint_states", "puck": "/px_puck/contacts/base_link"}[which]
    watch.fresh([topic, "/diagnostics"], f"the states after {name}", list(procs.values()))
    assert not watch.bad, watch.bad
    proc.check_running()


def test_pause_at_at_its_extremes_at_run_time(rig):
    """pause_at at run time: the highest taken, just above and just below refused naming it, and its lowest (one
    physics step) too, as a time the running simulation has passed; 0 (never) taken back; the body runs on."""
    probe, procs, watch, _logs = rig
    proc, node = procs["body"], "/px_body/dynamics_node"
    name, lo, hi, below, above = extremes.PAUSE_AT
    r = set_param(probe, proc, node, name, hi)
    assert r.successful, r.reason
    for value in (below, above, lo):
        r = set_param(probe, proc, node, name, value)
        assert not r.successful and name in r.reason, f"{name} := {value}: {r.reason}"
    assert "already at" in r.reason, r.reason
    assert set_param(probe, proc, node, name, 0.0).successful
    watch.fresh(["/px_body/odom"], "the states after pause_at", list(procs.values()))
    proc.check_running()


def test_coldest_environment_and_a_reset_keep_the_energy_topic_finite(rig):
    probe, procs, watch, _logs = rig
    proc = procs["arm"]
    node = "/px_arm/dynamics_node"
    assert set_param(probe, proc, node, "environment_temperature", 1.0).successful
    watch.fresh(["/px_arm/energy"], "the energy topic at 1 K", list(procs.values()))
    reset(probe, proc, node)
    watch.fresh(["/px_arm/energy", "/px_arm/joint_states"], "the energy topic after the reset",
                list(procs.values()))
    assert not watch.bad, watch.bad
    assert set_param(probe, proc, node, "environment_temperature", 288.15).successful
    assert watch.counts["/px_arm/energy"] > 0 and len(watch.subs) >= 10, sorted(watch.subs)


def extremes_default(name):
    from mbs_ros.cores.parameters import table

    default = table("dynamics")[name].default
    return list(default) if isinstance(default, tuple) else default


# ------------------------------------------------------------------------------------------- start-up


def _lowest_and_highest(rows):
    lowest = {name: lo for name, lo, _hi, _b, _a in rows}
    highest = {name: hi for name, _lo, hi, _b, _a in rows}
    return lowest, highest


def _dynamics_groups():
    lowest, highest = _lowest_and_highest(extremes.DYNAMICS_RUNTIME + extremes.DYNAMICS_RUNTIME_VECTORS
                                          + extremes.DYNAMICS_STARTUP)
    # a slow publication or simulation would leave nothing to check within the wait: the slowest rates, the
    # lowest physics_rate and real_time_factor go to a node of their own
    slow = dict(physics_rate=1.0, publish_rate=0.1, wrench_rate=1e-3, markers_rate=1e-3, contacts_rate=1e-3,
                diagnostics_rate=1e-3,
                energy_rate=1e-3, cmd_timeout=1.0, real_time_factor=1e-3, control_rate=1e-3)
    for name in slow:
        lowest.pop(name)
    lowest.update(publish_rate=100.0)
    fast = dict(highest, physics_rate=1e5, publish_rate=100.0, wrench_rate=100.0, markers_rate=20.0,
                contacts_rate=50.0, diagnostics_rate=10.0, energy_rate=10.0, real_time_factor=0.0, control_rate=1e5,
                initial_position=[0.0, 0.0, 0.0])  # not at the runaway bound: this one must keep running
    highest.update(publish_rate=1000.0, wrench_rate=1000.0, markers_rate=1000.0, contacts_rate=1000.0,
                   diagnostics_rate=1000.0,
                   energy_rate=1000.0, real_time_factor=1.0, pause_at=extremes.PAUSE_AT[2])
    # (pause_at's lowest pauses a node 1 ms in: the unit tests and test/ros/test_pause_at.py take it)
    # the single body is se3: its disturbance at both ends (the highest pushes with 1e6 N from t0: a runaway the
    # node halts, finite)
    lowest["disturbance"], highest["disturbance"] = extremes.DISTURBANCE[1], extremes.DISTURBANCE[2]
    groups = {"lowest": lowest, "highest": highest, "slowest": slow, "fastest": fast}
    # every number of the table with a range no row above covers (a parameter added later), at both ends
    # (a robot's on the 2-link arm, a single body's on the body)
    for kind, rows in (("arm", [r for r in extremes.table_rows("dynamics") if not r[3]]),
                       ("body", [r for r in extremes.table_rows("dynamics") if r[3]])):
        if rows:
            base = dict(ARM, diagnostics_rate=10.0) if kind == "arm" else {}
            groups[f"table_lowest_{kind}"] = dict(base, **{n: lo for n, lo, _hi, _b in rows})
            groups[f"table_highest_{kind}"] = dict(base, **{n: hi for n, _lo, hi, _b in rows})
    return groups


def _contact_nodes(tmp_path):
    """Issue 30's start-up parameters on robots with a contact world: the puck beside its crate with the contact
    topics at their fastest and the arrows at their longest, its lowest push, joint limits off; the puck with no
    world; the 2-link arm (joint limits on) with its crate under the stand law joint_pd_gravity, idle until its
    highest time (a zero command), then with the law from the start and the payload at its highest (1e6 kg on
    link2). Each publishes only finite numbers."""
    puck = str(write_puck(tmp_path, PUCK_CRATE_WORLD, name="sx_puck"))
    arm = str(write_arm(tmp_path))
    dyn = {"sx_puck": dict(PUCK, model_file=puck, contacts_rate=1000.0, marker_wrench_scale=1e6,
                           markers_rate=1000.0, disturbance=extremes.DISTURBANCE[1], joint_limits=False),
           "sx_noworld": dict(PUCK, model_file=puck, world="none"),
           "sx_carm": dict(model_file=arm, base_group="fixed", contacts_rate=1000.0, joint_limits=True,
                           diagnostics_rate=10.0),
           "sx_carm_now": dict(model_file=arm, base_group="fixed", contacts_rate=100.0, diagnostics_rate=10.0)}
    ctl = {"sx_carm": dict(model_file=arm, base_group="fixed", law="joint_pd_gravity", kp=5.0, kd=1.0,
                           idle_until=extremes.CONTROLLER[-1][2], control_rate=100.0),
           "sx_carm_now": dict(model_file=arm, base_group="fixed", law="joint_pd_gravity", kp=5.0, kd=1.0,
                               control_rate=100.0, **extremes.PAYLOAD_HIGHEST)}
    procs = {f"dyn_{ns}": NodeProcess(DYN, name="dynamics_node", namespace=ns, parameters=p,
                                      remappings=own_diagnostics(ns), log_file=tmp_path / f"{ns}.log")
             for ns, p in dyn.items()}
    procs.update({f"ctl_{ns}": NodeProcess(CTL, name="controller_node", namespace=ns, parameters=p,
                                           log_file=tmp_path / f"{ns}_ctl.log") for ns, p in ctl.items()})
    return procs


def _controller_groups():
    lowest, highest = _lowest_and_highest(extremes.CONTROLLER + extremes.CONTROLLER_VECTORS)
    lowest.update(control_rate=100.0, state_timeout=0.01)  # the lowest control_rate: its own node (no commands)
    highest.update(control_rate=100.0)
    groups = {"lowest": lowest, "highest": highest,
              "slowest": dict(control_rate=1e-3, state_timeout=1e3), "fastest": dict(control_rate=1e5)}
    table = extremes.table_rows("controller")  # a ranged number no row covers (a parameter added later)
    if table:
        groups.update(table_lowest={n: lo for n, lo, _hi, _b in table},
                      table_highest={n: hi for n, _lo, hi, _b in table})
    return groups


def test_start_up_at_the_extremes_runs_and_publishes_finite_numbers(tmp_path):
    ros_env_defaults()
    procs = {}
    dyn_groups = _dynamics_groups()
    for group, params in dyn_groups.items():
        procs[f"dyn_{group}"] = NodeProcess(DYN, name="dynamics_node", namespace=f"sx_{group}",
                                            parameters=dict(publish_clock=False, **params),
                                            remappings=own_diagnostics(f"sx_{group}"),
                                            log_file=tmp_path / f"dyn_{group}.log")
    for group, params in _controller_groups().items():
        # each controller on the body of the matching dynamics node (the single bodies of both are alike)
        procs[f"ctl_{group}"] = NodeProcess(CTL, name="controller_node", namespace=f"sx_{group}",
                                            parameters=params, log_file=tmp_path / f"ctl_{group}.log")
    procs.update(_contact_nodes(tmp_path))
    with running(procs), Probe("test_extremes_startup", TIMEOUT) as probe:
        alive = list(procs.values())
        groups = ("lowest", "highest", "fastest")  # the slowest publish (almost) nothing: their logs say they run
        table_groups = [g for g in dyn_groups if g.startswith("table_")]
        contact = ["sx_puck", "sx_noworld", "sx_carm", "sx_carm_now"]
        watch = Watch(probe, [f"sx_{g}" for g in groups + ("slowest",) + tuple(table_groups)] + contact)
        # a report of each node: the dynamics nodes' on their /diagnostics (own_diagnostics; also when a runaway
        # halted them: the highest initial_position is the runaway bound itself), the controllers' on ~/diagnostics
        reports = [f"/sx_{g}/diagnostics" for g in groups] + [f"/sx_{g}/controller_node/diagnostics" for g in groups]
        probe.spin_until(lambda: watch.discover() or set(reports) <= set(watch.subs),
                         what="the nodes' topics", alive=alive)
        watch.fresh(reports, "a report of every node", alive)
        watch.fresh(reports + ["/sx_lowest/odom", "/sx_fastest/odom"], "more reports and states", alive)
        # the contact scenes: their contact topics, the crate on /tf, the stand law's commands
        watch.fresh([f"/sx_{g}/diagnostics" for g in table_groups]
                    + ["/sx_puck/contacts/base_link", "/sx_puck/contacts/crate", "/sx_puck/contacts/markers",
                       "/sx_puck/world/markers", "/sx_puck/odom", "/sx_noworld/odom", "/sx_carm/contacts/crate",
                       "/sx_carm/world/markers", "/sx_carm/joint_states", "/sx_carm_now/contacts/crate",
                       "/sx_carm/joint_command", "/sx_carm_now/joint_command", "/tf"],
                    "the contact scenes' topics", alive)
        assert not watch.bad, watch.bad
        for p in alive:
            p.check_running()
        assert procs["ctl_slowest"].wait_for_log("0.001 Hz", timeout=TIMEOUT), procs["ctl_slowest"].log_tail()
        assert procs["dyn_slowest"].wait_for_log("rk4 at 1 Hz", timeout=TIMEOUT), procs["dyn_slowest"].log_tail()
        text = "".join(p.log_text() for p in alive)
        errors = [line for line in text.splitlines() if "[ERROR]" in line and "simulation halted" not in line]
        assert "Traceback" not in text and not errors, errors or text[-3000:]
        print("start-up at the extremes: messages per topic " + ", ".join(f"{t} {n}" for t, n in
                                                                          sorted(watch.counts.items())))


def _refused_cases():
    """One value just outside per parameter (below where there is a lower bound, else above; both for the
    command limits), the other side being refused by the same check at run time and in the unit tests: each
    refused start-up is a process of its own."""
    def one(rows):
        return [(name, below if below is not None else above) for name, _lo, _hi, below, above in rows]

    out = [("dynamics", n, v) for n, v in one(extremes.DYNAMICS_RUNTIME + extremes.DYNAMICS_RUNTIME_VECTORS
                                               + extremes.DYNAMICS_STARTUP)]
    out += [("dynamics", "max_wrench", extremes.DYNAMICS_RUNTIME_VECTORS[-1][4])]
    out += [("dynamics", extremes.PAUSE_AT[0], extremes.PAUSE_AT[3])]
    out += [("dynamics_arm", extremes.ARM_EFFORT[0], v) for v in extremes.ARM_EFFORT[3:]]
    out += [("controller", n, v) for n, v in one(extremes.CONTROLLER + extremes.CONTROLLER_VECTORS)]
    out += [("controller", "max_wrench", extremes.CONTROLLER_VECTORS[-1][4])]
    out += [("controller", extremes.PAYLOAD_MASS[0], v) for v in extremes.PAYLOAD_MASS[3:]]
    out += [("dynamics", extremes.DISTURBANCE[0], v) for v in extremes.DISTURBANCE[3:]]
    return out


#: refused start-ups per node kind in a run (a seeded subset: test/sweeps.py; --full-sweeps starts them all)
REFUSED_PER_RUN = {"dynamics": 5, "dynamics_arm": 1, "controller": 5}


def test_start_up_just_outside_is_refused_naming_the_parameter(tmp_path):
    """Each start-up refusal is the same path (declare, check, one fatal line, exit 2) for another parameter, and
    every parameter's bound is also refused at run time above and in the settings' unit tests: a run starts a
    seeded subset of the cases (``REFUSED_PER_RUN`` of each node kind), ``--full-sweeps`` all of them."""
    ros_env_defaults()
    every = _refused_cases()
    cases = [c for kind, keep in REFUSED_PER_RUN.items()
             for c in sweeps.sample([c for c in every if c[0] == kind], keep, f"refused start-up {kind}")]
    failures = []
    for first in range(0, len(cases), BATCH):
        batch = []
        for i, (node, name, value) in enumerate(cases[first:first + BATCH], start=first):
            params = {name: value}
            if node == "dynamics_arm":
                params.update(ARM)
            if node == "controller" and name == "control_rate":
                params["state_timeout"] = 1e3
            target = CTL if node == "controller" else DYN
            batch.append((name, value, NodeProcess(target, name=f"n{i}", namespace=f"sr{i}", parameters=params,
                                                   log_file=tmp_path / f"{i}_{name}.log")))
        for _name, _value, p in batch:
            p.start()
        try:
            for name, value, p in batch:
                rc = p.wait(timeout=EXIT_TIMEOUT)
                text = p.log_text()
                if rc in (None, 0) or name not in text or "Traceback" in text:
                    failures.append(f"{name} = {value}: exit {rc}: {text[-400:]}")
        finally:
            for _name, _value, p in batch:
                p.stop()
    assert not failures, "\n".join(failures)
    print(f"{len(cases)} of {len(every)} start-ups with a value just outside (seed {os.environ.get('MBS_SWEEP_SEED')}),"
          " each refused naming the parameter: " + ", ".join(f"{node}.{name}" for node, name, _ in cases))
