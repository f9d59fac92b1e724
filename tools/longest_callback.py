"""``python -m tools.longest_callback SCENARIO [--duration S] [--set KEY=VALUE ...]``: the longest callback of each
dynamics node of a scenario run over ROS (``python -m mbs_ros.bringup``, recorded), against one control period.

The dynamics node times every callback it runs (``CallbackGuard``: subscriptions, timers, services; in lockstep a
control period is taken inside the command callback that completes it) and reports on ``/diagnostics``
``longest_callback_ms`` (since the start) and ``longest_callback_recent_ms`` (since the previous report), with the
callback's name. This runs the scenario with ``--record`` (``/diagnostics`` added to what it records), reads the
reports back and prints, per dynamics node, the longest callback over the run and the simulated time of the report
that first shows it, against the control period 1/control_rate (the rule: no callback longer than one control
period), the most thread CPU time one callback took (the node's own work), and on Linux the share of the wall clock
the node's thread waited for a core (``scheduler_wait_share``: on a machine with more busy processes than cores the
wall clock of a callback is its CPU time plus those waits). The wall-clock figures vary with the machine's load:
run it with ``nice`` on a quiet machine.
Exit 0 when every node's longest callback is within its period, 1 otherwise, 2 if the run failed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def reports(bag: Path) -> dict:
    """``{node name: [(stamp s, values), ...]}`` of the dynamics nodes' /diagnostics statuses in ``bag``."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.serialization import deserialize_message

    from mbs_ros.nodes.conversions import values_from_status
    from mbs_ros.recording import read_messages

    out = {}
    for _schema, channel, record in read_messages(bag):
        if channel.topic != "/diagnostics":
            continue
        msg = deserialize_message(record.data, DiagnosticArray)
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        for st in msg.status:
            name = st.name.split(":")[0]
            if name.endswith("dynamics_node"):
                values = values_from_status(st)
                if "longest_callback_ms" in values:
                    out.setdefault(name, []).append((stamp, values))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.longest_callback", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario")
    parser.add_argument("--duration", type=float, help="simulated seconds (default: the scenario's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as bringup's --set")
    parser.add_argument("--keep", metavar="DIR", help="keep the recording and logs here")
    args = parser.parse_args(argv)

    from mbs_ros.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    work = Path(args.keep or tempfile.mkdtemp(prefix="longest_callback_"))
    work.mkdir(parents=True, exist_ok=True)
    bag = work / "run.mcap"
    cmd = [sys.executable, "-m", "mbs_ros.bringup", args.scenario, "--record", str(bag), "--log-dir",
           str(work / "logs")]
    if args.duration is not None:
        cmd += ["--duration", repr(args.duration)]
    for s in args.set:
        cmd += ["--set", s]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"the run failed (exit {run.returncode}):\n{run.stderr[-3000:]}", file=sys.stderr)
        return 2
    found = reports(bag)
    if not found:
        print(f"no /diagnostics of a dynamics node in {bag} (is /diagnostics recorded?)", file=sys.stderr)
        return 2
    ok = True
    for name, rows in sorted(found.items()):
        control_rate = scenario.control_rate or 0.0
        period_ms = 1e3 / control_rate if control_rate else float("nan")
        longest = max(v["longest_callback_ms"] for _, v in rows)
        first = next((t, v) for t, v in rows if v["longest_callback_ms"] == longest)
        recent = max(rows, key=lambda tv: tv[1].get("longest_callback_recent_ms", 0.0))
        within = not (longest > period_ms)
        ok &= within
        print(f"{name} ({args.scenario}): longest callback {longest:.3f} ms "
              f"({first[1]['longest_callback']}, reported at t = {first[0]:.3f} s) against a control period of "
              f"{period_ms:g} ms: {'within' if within else 'LONGER'}; the longest between two reports "
              f"{recent[1].get('longest_callback_recent_ms', 0.0):.3f} ms in the report at t = {recent[0]:.3f} s; "
              f"contact step mean {first[1].get('contact_step_mean_ms', float('nan')):.3f} ms, longest "
              f"{rows[-1][1].get('contact_step_longest_ms', float('nan')):.3f} ms; the most CPU time of one "
              f"callback (the node's own work, without the scheduler's waits) "
              f"{max(v.get('longest_callback_cpu_ms', float('nan')) for _, v in rows):.3f} ms; {len(rows)} reports")
        if "scheduler_wait_share" in rows[-1][1]:  # Linux: what the machine's other work added to the wall clock
            print(f"  the node's thread waited for a core {100 * rows[-1][1]['scheduler_wait_share']:.0f} % of the "
                  f"run's wall clock (ready to run, the core taken: schedstat's run delay), "
                  f"{100 * first[1].get('scheduler_wait_share_recent', float('nan')):.0f} % between the reports "
                  f"around its longest callback")
    print(f"recording: {bag}" if args.keep else "")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
