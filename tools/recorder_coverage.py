"""Does a lockstep recording cover its whole run? N runs of a scenario through the runner, each checked period by period.

    .venv/bin/python tools/recorder_coverage.py [--runs 20] [--busy 2] [--scenario vehicle_manipulator]
                                               [--namespace uvms] [--duration 2.5] [--out DIR]

Each run is ``python -m mbs_ros.bringup SCENARIO --set lockstep=true --set sim_time=true --set real_time_factor=0
--duration D --record run<i>.mcap``, with ``--busy`` loops (``python3 -c "while 1: pass"``) beside the runs for the
whole measurement; each recording's ``/<ns>/odom`` and ``/<ns>/joint_states`` header stamps are compared with the
full grid of control periods 0..D (the scenario's control period). One line per run (expected periods, what each
topic holds on the grid and off it, its last stamp) and a summary; exit code 1 unless every recording is complete.
A measurement tool (issue 27's 20 runs), not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stamps(path: Path, namespace: str) -> dict:
    from nav_msgs.msg import Odometry
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    from mbs_ros.recording import read_messages

    kinds = {"odom": Odometry, "joint_states": JointState}
    out = {k: set() for k in kinds}
    for _schema, channel, record in read_messages(path):
        kind = channel.topic.rsplit("/", 1)[-1]
        if channel.topic == f"/{namespace}/{kind}" and kind in kinds:
            m = deserialize_message(record.data, kinds[kind])
            out[kind].add(m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--busy", type=int, default=2, help="busy loops beside the runs (default 2)")
    p.add_argument("--scenario", default="vehicle_manipulator")
    p.add_argument("--namespace", default="uvms")
    p.add_argument("--duration", type=float, default=2.5)
    p.add_argument("--out", type=Path, default=None, help="keep the recordings and logs here")
    args = p.parse_args(argv)

    from mbs_ros.bringup import load_scenario

    rate = load_scenario(args.scenario).control_rate or 100.0  # the nodes' default control_rate
    period = int(round(1e9 / rate))
    end = int(round(args.duration * 1e9))
    grid = set(range(0, end + 1, period))
    out = args.out or Path(tempfile.mkdtemp(prefix="recorder_coverage-"))
    out.mkdir(parents=True, exist_ok=True)
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    complete = 0
    try:
        print(f"{args.runs} runs of {args.scenario}, {args.duration:g} s at {rate:g} Hz: {len(grid)} periods expected; "
              f"{args.busy} busy loops; recordings in {out}", flush=True)
        for i in range(1, args.runs + 1):
            bag = out / f"run{i}.mcap"
            t0 = time.monotonic()
            run = subprocess.run([sys.executable, "-m", "mbs_ros.bringup", args.scenario, "--set", "lockstep=true",
                                  "--set", "sim_time=true", "--set", "real_time_factor=0", "--duration",
                                  str(args.duration), "--record", str(bag), "--log-dir", str(out / f"logs{i}")],
                                 cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            got = stamps(bag, args.namespace) if bag.is_file() else {"odom": set(), "joint_states": set()}
            full = all(s == grid for s in got.values())
            complete += full
            cells = ", ".join(f"{k} {len(s & grid)} (+{len(s - grid)} off the grid, last "
                              f"{max(s) * 1e-9 if s else float('nan'):.2f} s)" for k, s in got.items())
            print(f"run {i:2d}: exit {run.returncode}, {time.monotonic() - t0:5.1f} s wall: {cells}"
                  f"{'' if full else '  INCOMPLETE'}", flush=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"{complete} of {args.runs} recordings hold every one of the {len(grid)} periods, nothing else")
    return 0 if complete == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
