"""The main job for now: two rigid bodies simulated by two dynamics nodes, checked by their bookkeeping.

    python -m mbs_ros.demo [--duration 5]

Starts ``mbs_ros.nodes.dynamics_node`` twice, as real processes:

- ``/tumbler``: torque-free tumbling (``config/tumbling_body.yaml``): no gravity, c.o.m. offset, three
  different principal moments, spin near the unstable intermediate axis. Kinetic energy and
  world-frame spatial momentum must stay constant; their relative change is the drift reported.
- ``/driven``: a body under gravity driven by a wrench profile this script publishes on
  ``/driven/cmd_wrench`` (``config/driven_body.yaml``); reported: the energy balance residual
  ``E(t) - E(0) - W(t)``, with W the work done by the applied wrench.

After ``--duration`` seconds both nodes are paused (so the state and the bookkeeping describe the same
instant), their ``/diagnostics`` and ``odom`` are read, the nodes are stopped, and a table is printed.
Exit code 0; 1 if a node fails or no data arrived.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from mbs_ros.process import NodeProcess, NodeProcessError

NODE_MODULE = "mbs_ros.nodes.dynamics_node"
NODE_NAME = "dynamics_node"


def config_file(name: str) -> Path:
    """``config/<name>`` of the source tree if present, else of the installed share directory."""
    here = Path(__file__).resolve().parents[1] / "config" / name
    if here.is_file():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory

        shared = Path(get_package_share_directory("mbs_ros")) / "config" / name
        if shared.is_file():
            return shared
    except Exception:  # noqa: BLE001 - ament index missing or package not installed
        pass
    raise FileNotFoundError(f"config/{name} not found next to the sources or in the mbs_ros share directory")


def driven_wrench(t: float) -> np.ndarray:
    """Body-frame wrench [F; tau] of the driven body at demo time t [s]: thrust around hover along the body
    z axis, and roll/pitch/yaw torque pulses that change every second (+ - - + for roll and pitch, so the
    attitude roughly comes back every 4 s)."""
    m, g = 1.5, 9.81  # config/driven_body.yaml
    thrust = m * g * (1.0 + 0.1 * math.sin(math.pi * t))
    phase = int(t) % 4
    sign = (1.0, -1.0, -1.0, 1.0)[phase]
    return np.array([0.0, 0.0, thrust, 0.002 * sign, 0.0015 * sign, 0.004 if phase < 2 else -0.004])


@dataclass
class Body:
    namespace: str
    config: str
    kind: str  # "torque-free" or "driven"
    wrench: Optional[Callable[[float], np.ndarray]] = None
    process: Optional[NodeProcess] = None
    odom: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)  # dicts of values, in arrival order

    @property
    def name(self) -> str:
        return self.namespace.strip("/")


BODIES = [
    Body("/tumbler", "tumbling_body.yaml", "torque-free"),
    Body("/driven", "driven_body.yaml", "driven", wrench=driven_wrench),
]


class DemoError(RuntimeError):
    pass


def run(duration: float, log_dir: Path, quiet: bool = False) -> List[Body]:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from nav_msgs.msg import Odometry
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile
    from std_srvs.srv import SetBool, Trigger

    from mbs_ros.nodes import conversions as cv

    def say(text):
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    bodies = [Body(b.namespace, b.config, b.kind, b.wrench) for b in BODIES]
    for b in bodies:
        b.process = NodeProcess(
            NODE_MODULE, name=NODE_NAME, namespace=b.namespace, params_file=config_file(b.config),
            log_file=log_dir / f"{b.name}.log", label=b.name)

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mbs_ros_demo", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        for b in bodies:
            b.process.start()
        say("mbs_ros demo: dynamics nodes " + ", ".join(f"{b.namespace} (pid {b.process.pid})" for b in bodies)
            + f" started, logs in {log_dir}")

        fqn = {f"{b.namespace}/{NODE_NAME}: rigid body": b for b in bodies}

        def on_diag(msg):
            for status in msg.status:
                if status.name in fqn:
                    fqn[status.name].diagnostics.append(cv.values_from_status(status))

        subs, pubs, pause, reset = [], {}, {}, {}
        qos = QoSProfile(depth=100)
        for b in bodies:
            subs.append(node.create_subscription(Odometry, f"{b.namespace}/odom", b.odom.append, qos))
            if b.wrench is not None:
                pubs[b.namespace] = node.create_publisher(WrenchStamped, f"{b.namespace}/cmd_wrench", 10)
            pause[b.namespace] = node.create_client(SetBool, f"{b.namespace}/{NODE_NAME}/pause")
            reset[b.namespace] = node.create_client(Trigger, f"{b.namespace}/{NODE_NAME}/reset")
        subs.append(node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, qos))

        def spin_until(pred, timeout, what):
            deadline = time.monotonic() + timeout
            while not pred():
                for b in bodies:
                    b.process.check_running()
                if time.monotonic() > deadline:
                    raise DemoError(f"timed out after {timeout:g} s waiting for {what}")
                executor.spin_once(timeout_sec=0.02)

        # Wait for the graph, not a fixed time: late joiners can take seconds to be discovered.
        spin_until(lambda: all(s.get_publisher_count() > 0 for s in subs)
                   and all(p.get_subscription_count() > 0 for p in pubs.values())
                   and all(c.service_is_ready() for c in [*pause.values(), *reset.values()])
                   and all(b.odom for b in bodies),
                   30.0, "the dynamics nodes (topics, services, first odom)")
        # Start both bodies from their initial state now (they have been running since start-up).
        futures = [c.call_async(Trigger.Request()) for c in reset.values()]
        spin_until(lambda: all(f.done() for f in futures), 10.0, "the reset services")
        say(f"mbs_ros demo: running for {duration:g} s ...")

        t_start = time.monotonic()
        next_cmd = t_start
        while (now := time.monotonic()) - t_start < duration:
            if now >= next_cmd:  # 50 Hz command stream
                for b in bodies:
                    if b.wrench is not None:
                        pubs[b.namespace].publish(
                            cv.wrench_stamped_msg(node.get_clock().now().nanoseconds, "", b.wrench(now - t_start)))
                next_cmd += 0.02
            for b in bodies:
                b.process.check_running()
            executor.spin_once(timeout_sec=max(0.0, min(0.005, next_cmd - time.monotonic())))

        # Pause both, so the last odom and the last diagnostics describe the same state.
        futures = {ns: c.call_async(SetBool.Request(data=True)) for ns, c in pause.items()}
        spin_until(lambda: all(f.done() for f in futures.values()), 10.0, "the pause services")
        for b in bodies:
            b.diagnostics.clear()
        spin_until(lambda: all(b.diagnostics and b.diagnostics[-1].get("paused") for b in bodies),
                   10.0, "the diagnostics of the paused nodes")
        executor.spin_once(timeout_sec=0.05)  # let the odom published at the pause arrive
    finally:
        executor.shutdown()
        node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)
        codes = {b.name: b.process.stop() for b in bodies if b.process is not None}
    bad = {k: v for k, v in codes.items() if v not in (0, None)}
    if bad:
        raise DemoError("dynamics node(s) did not exit cleanly: "
                        + ", ".join(f"{k} exit code {v}" for k, v in bad.items()))
    return bodies


def summarize(b: Body) -> Dict[str, str]:
    from mbs_ros.nodes import conversions as cv

    if not b.diagnostics or not b.odom:
        raise DemoError(f"{b.namespace}: no {'diagnostics' if not b.diagnostics else 'odom'} arrived")
    d = b.diagnostics[-1]
    h = np.array([d["momentum_" + a] for a in ("linear_x", "linear_y", "linear_z",
                                                 "angular_x", "angular_y", "angular_z")])
    h0 = np.array([d["momentum_ref_" + a] for a in ("linear_x", "linear_y", "linear_z",
                                                      "angular_x", "angular_y", "angular_z")])
    if b.kind == "torque-free":
        ke, ke0 = d["kinetic_energy"], d["kinetic_energy_ref"]
        energy = f"dKE/KE0 = {(ke - ke0) / ke0:+.1e}"
        momentum = f"|dh|/|h0| = {np.linalg.norm(h - h0) / np.linalg.norm(h0):.1e}"
    else:
        energy = (f"E-E0-W = {d['energy_balance_residual']:+.1e} J "
                  f"(W = {d['work_applied']:.2f} J)")
        momentum = "n/a (driven)"
    odom = b.odom[-1]
    p, quat = cv.pose_from_msg(odom.pose.pose)
    rpy = np.degrees(cv.rpy_from_quaternion(quat))
    return {
        "body": b.name,
        "group": str(d["base_group"]),
        "steps": f"{int(d['steps_since_reset'])}",
        "energy drift": energy,
        "momentum drift": momentum,
        "final position [m]": "(" + ", ".join(f"{x:+.3f}" for x in p) + ")",
        "final roll/pitch/yaw [deg]": "(" + ", ".join(f"{x:+6.1f}" for x in rpy) + ")",
    }


def table(rows: List[Dict[str, str]]) -> str:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    line = lambda r: "  ".join(r[c].ljust(width[c]) for c in cols).rstrip()  # noqa: E731
    return "\n".join([line({c: c for c in cols}), "  ".join("-" * width[c] for c in cols)]
                     + [line(r) for r in rows])


FOOTNOTE = """\
energy drift: torque-free: relative change of the kinetic energy; driven: E(t) - E(0) - W(t), W the work of
  the applied wrench (trapezoidal rule, O(dt^2)). momentum drift: relative change of the world-frame spatial
  momentum. steps: RKMK4 steps since the demo reset the body. Pose: base_link in world; angles for humans only."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mbs_ros.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of wall time to run (default 5)")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="keep the nodes' logs here (default: a temporary directory, kept only on failure)")
    parser.add_argument("--quiet", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    if args.duration <= 0:
        parser.error("--duration must be positive")
    # Keep the demo's DDS traffic on this machine unless the user chose otherwise.
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="mbs_ros_demo-"))
    try:
        bodies = run(args.duration, log_dir, args.quiet)
        rows = [summarize(b) for b in bodies]
    except (DemoError, NodeProcessError, FileNotFoundError) as e:
        kept = log_dir.is_dir() and any(log_dir.iterdir())
        if not kept and args.log_dir is None:
            shutil.rmtree(log_dir, ignore_errors=True)
        print(f"mbs_ros demo failed: {e}" + (f"\n(node logs in {log_dir})" if kept else ""), file=sys.stderr)
        return 1
    if args.log_dir is None:
        shutil.rmtree(log_dir, ignore_errors=True)
    print(table(rows))
    if not args.quiet:
        print(FOOTNOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
