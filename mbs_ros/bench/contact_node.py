"""Section 8 (``--only contact_node``): the dynamics node with contacts in real time, as real processes.

solo12_stand's nodes (``config/scenarios/solo12_stand.yaml``: Solo12 on the ground of ``config/worlds/ground.yaml``,
the stand controller ``joint_pd_gravity`` and the reference node), started from the scenario's own node specs
(:func:`mbs_ros.scenario.node_specs`) with ``lockstep: false``, ``sim_time: false``, the state published at the
control rate (as lockstep sends it once per control period) and no push: the dynamics node
free-running against the wall clock (``real_time_factor`` 1) at the scenario's physics rate (1 kHz), the controller
at its control rate, a standing quadruped with its four feet on the ground (the drop of 6 cm and the landing are
the warm-up: the window starts once the odometry's stamp passed ``SETTLE_S`` of simulated time).

Over the window: the share of a core the dynamics node's process uses (utime + stime / wall time, psutil or
/proc), whether it keeps real time (the advance of its ``/diagnostics`` stamps, simulated time, over the wall time
between their receptions here: 1.0 keeps it; the probe no longer takes the 1 kHz odometry by then, a process
that took CPU from the nodes it measures), the CPU seconds it spends per simulated second (below 1: one free core
would keep real time, whatever the machine's load), the mean contact step over the window and the longest since
the start (thread CPU time), and the longest callback (wall clock) (from the node's ``/diagnostics``:
``contact_step_mean_ms``, ``contact_steps``, ``contact_step_longest_ms``, ``longest_callback_ms``). Isolation as
the node section's (:mod:`mbs_ros.bench.node`). Beside them, measured before the nodes start, this host's speed:
MuJoCo's ``mj_step`` of the same robot standing (:func:`host_reference_us`), since on a shared host the same
code's figures differ twofold between days (docs/contact.md).
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from mbs_ros.bench import timing
from mbs_ros.bench.node import Probe, StampLog, _window, isolate_ros_env, stamp_rate

SCENARIO = "solo12_stand"
SETTLE_S = 1.0  # simulated seconds: dropped at 0 s, landed and settled by then
TARGET_REAL_TIME = 0.99  # "keeps real time": at least 0.99 simulated second per wall second
TARGET_CPU = 1.0  # ... within one core
START_TIMEOUT = 180.0  # a cold start compiles the contact kernels (numba caches them next to the sources)


def _specs(ns):
    """solo12_stand's node specs, free-running on the wall clock, with no push, in namespace ``ns``."""
    from mbs_ros.scenario import load_scenario, node_specs

    # the state at the control rate: a 1 kHz loop on the 100 Hz state of the scenario's publish_rate (which the
    # lockstep run does not use: it sends the state once per control period) holds each state for 10 periods, and
    # its joint damping chatters the feet off the ground (a contact found anew, not resting, at every step)
    control_rate = load_scenario(SCENARIO).control_rate
    scenario = load_scenario(SCENARIO, overrides={"lockstep": False, "sim_time": False, "publish_rate": control_rate})
    specs = []
    for s in node_specs(scenario):
        params = {k: v for k, v in s.parameters.items() if k != "disturbance"}
        specs.append((s, params, f"{ns}{s.namespace}" if s.namespace.startswith("/") else f"{ns}/{s.namespace}"))
    return scenario, specs


class _Diagnostics:
    """The dynamics node's latest /diagnostics values (the status whose name is the dynamics node's)."""

    def __init__(self, probe, topic):
        from diagnostic_msgs.msg import DiagnosticArray

        from mbs_ros.nodes.conversions import values_from_status

        self.latest = None
        self.history = []
        self.order = []  # (stamp ns: simulated time, reception ns) of each report

        def on(msg):
            for st in msg.status:
                if "dynamics_node" in st.name:
                    self.latest = values_from_status(st)
                    self.history.append(self.latest)
                    self.order.append((msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec,
                                       time.time_ns()))

        self.sub = probe.node.create_subscription(DiagnosticArray, topic, on, 100)

    def rate(self, since_ns):
        """(simulated seconds, wall seconds) between the first and the last report received after ``since_ns``."""
        return stamp_rate(self.order, since_ns)


def host_reference_us(plan):
    """This host's speed in one figure: MuJoCo's ``mj_step`` of the contact section's Solo12 standing on the
    ground (:func:`mbs_ros.bench.contact.solo12`), µs of thread CPU time per step from the settled state
    (:func:`mbs_ros.bench.timing.alone` with ``plan``); None without MuJoCo or example-robot-data. The same code's
    real-time figures differ by twofold between days on a shared host; this names the day's host beside them."""
    try:
        import mujoco

        from mbs_ros.bench.contact import solo12

        scene = solo12(300)
    except Exception:  # noqa: BLE001 - a test-only peer missing: no reference, the section goes on
        return None
    return timing.alone(lambda: mujoco.mj_step(scene.m, scene.d), plan, reset=scene.reset_peer)


def _window_mean(before, after):
    """The mean contact step [ms] between two diagnostics (the node reports the mean since the start)."""
    if before is None or after is None:
        return None
    n0, n1 = before.get("contact_steps", 0), after.get("contact_steps", 0)
    if n1 <= n0:
        return None
    return (after["contact_step_mean_ms"] * n1 - before["contact_step_mean_ms"] * n0) / (n1 - n0)


def run(quick: bool, log_dir=None, progress=print) -> dict:
    """The section's result: a dict (``error`` on a failure)."""
    from nav_msgs.msg import Odometry

    from mbs_ros.process import NodeProcess

    window_s = 2.0 if quick else 8.0
    domain = isolate_ros_env()
    ns = f"/bench_{os.getpid()}"
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="mbs_bench_contact_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    result = dict(ros_domain_id=domain, namespace=ns, log_dir=str(log_dir), scenario=SCENARIO,
                  loadavg=[round(x, 2) for x in os.getloadavg()])
    try:
        scenario, specs = _specs(ns)
    except Exception as e:  # noqa: BLE001 - example-robot-data missing, a broken scenario: reported
        return dict(result, error=f"{type(e).__name__}: {e}")
    # the host's speed before the nodes start: nothing else of ours runs then
    result.update(physics_rate_hz=scenario.physics_rate, control_rate_hz=scenario.control_rate,
                  host_mujoco_us=host_reference_us(timing.QUICK if quick else timing.FULL))
    try:
        probe = Probe("mbs_bench_contact_probe")
    except Exception as e:  # noqa: BLE001
        return dict(result, error=f"cannot start rclpy: {type(e).__name__}: {e}")
    remap = {"/diagnostics": f"{ns}/diagnostics", "/clock": f"{ns}/clock", "/tf": f"{ns}/tf",
             "/tf_static": f"{ns}/tf_static"}
    procs, dyn, robot_ns = [], None, None
    for spec, params, namespace in specs:
        p = NodeProcess(spec.module, name=spec.name, namespace=namespace, parameters=params,
                        remappings={**dict(spec.remappings), **remap},
                        log_file=log_dir / f"contact_node_{spec.role}.log", label=f"{spec.role}")
        procs.append(p)
        if spec.role == "dynamics":
            dyn, robot_ns = p, namespace
    odom = StampLog(probe, Odometry, f"{robot_ns}/odom")
    diag = _Diagnostics(probe, f"{ns}/diagnostics")
    try:
        progress(f"contact_node: {SCENARIO} in real time at {scenario.physics_rate:g} Hz ...")
        for p in procs:
            p.start()
        probe.spin_until(lambda: len(odom.order) > 2, START_TIMEOUT, "odom from the dynamics node", alive=procs)
        t0, settle_ns = odom.order[0][0], int(SETTLE_S * 1e9)  # stamps on the wall clock's epoch (no sim time)
        probe.spin_until(lambda: odom.order[-1][0] - t0 >= settle_ns and (diag.latest or {}).get("contact_steps"),
                         START_TIMEOUT, f"{SETTLE_S:g} s of simulated time with contacts", alive=procs)
        # the window without the probe's odometry subscription: the controller is the one subscriber left
        probe.node.destroy_subscription(odom.sub)
        odom.sub = None
        probe.spin_until(lambda: probe.node.count_subscribers(f"{robot_ns}/odom") <= 1, START_TIMEOUT,
                         "the probe's odometry subscription gone from the graph", alive=procs)
        probe.spin_for(0.5, alive=procs)  # the dynamics node's middleware learns it too
        before = diag.latest
        cpus, wall, rx0 = _window(probe, procs, window_s)
        probe.spin_for(0.3, alive=procs)  # the diagnostics of the window's end
        # two reports at least (a slow host may take more than the window for 0.1 s of simulated time): a wait
        # for a count, the window's CPU share then taken over the reports' span
        probe.spin_until(lambda: diag.rate(rx0)[1] > 0, START_TIMEOUT, "two /diagnostics reports after the "
                         "window's start", alive=procs)
        after = diag.latest
        sim, wall_rx = diag.rate(rx0)
    except Exception as e:  # noqa: BLE001
        tails = "".join(f"\n--- end of {p.log_path}:\n{p.log_tail(15)}" for p in procs)
        result["error"] = f"{type(e).__name__}: {e}{tails}"
        after = before = None
    finally:
        codes = {p.label: p.stop() for p in procs}
        if odom.sub is not None:
            probe.node.destroy_subscription(odom.sub)
        probe.node.destroy_subscription(diag.sub)
        probe.close()
    result["exit_codes"] = codes
    if "error" in result:
        return result
    if wall_rx <= 0 or after is None:
        return dict(result, error="no diagnostics during the window")
    cpu = dict(zip((s.role for s, _, _ in specs), cpus))
    real_time = sim / wall_rx
    result.update(window_s=wall, sim_s=sim, real_time_factor=real_time, cpu_share=cpu["dynamics"],
                  # CPU seconds per simulated second: below 1, one free core keeps real time (a busy machine's
                  # share of a core does not enter it)
                  cpu_per_sim_s=cpu["dynamics"] / real_time if real_time > 0 else None,
                  cpu_share_controller=cpu.get("controller"), contacts=after.get("contacts"),
                  contact_step_mean_ms=_window_mean(before, after),
                  contact_step_longest_ms=after.get("contact_step_longest_ms"),
                  contact_steps_in_window=after.get("contact_steps", 0) - (before or {}).get("contact_steps", 0),
                  longest_callback_ms=after.get("longest_callback_ms"),
                  longest_callback=after.get("longest_callback"),
                  target=f">= {TARGET_REAL_TIME:g} of real time within {TARGET_CPU:g} core",
                  met=bool(real_time >= TARGET_REAL_TIME and cpu["dynamics"] <= TARGET_CPU))
    return result
