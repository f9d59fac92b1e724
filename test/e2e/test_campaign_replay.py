"""A campaign that must fail, end to end: assert_campaign's message names the criterion, the runs failing it,
their values and the replay commands; and a replay command, run as written (the real ROS runner in lockstep on
simulation time), records the very states of the campaign's headless run, bit for bit.

The campaign is small for CPU: 2 runs of 1.5 s of the vehicle-manipulator with the true model's mass and the
initial attitude drawn, and a criterion no run can meet (the base error at the end of the reference's 0.2 m step,
1.5 s in, is far above 1 µm). The replay ends at exactly 1.5 s (its dynamics node pauses there, pause_at) and its
recorder finishes there: the recording holds every control period from 0 to 1.5 s, which is asserted, and all of it
is compared."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("rclpy")

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 300.0  # one 1.5 s replay on a loaded 2-core machine (its start-up dominates)

CAMPAIGN = """\
name: must_fail
scenario: vehicle_manipulator
runs: 2
seed: 5
duration: 1.5
vary:
  - {path: "robots[0].dynamics.mass_scale", uniform: [0.8, 1.2]}
  - {path: "robots[0].initial.rpy", uniform: [-0.1, 0.1], size: 3}
metrics: [final_base_position_error, max_joint_error]
criteria: ["final_base_position_error < 0.000001", "max_joint_error < 10.0"]
"""


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    """(campaign file, out dir, the AssertionError's message)."""
    from mbs_ros.campaign.testing import assert_campaign

    tmp = tmp_path_factory.mktemp("campaign")
    path = tmp / "must_fail.yaml"
    path.write_text(CAMPAIGN)
    with pytest.raises(AssertionError) as e:
        assert_campaign(path, workers=2, out_dir=tmp / "out")
    return path, tmp / "out", str(e.value)


def test_assert_campaign_names_the_failed_criterion_its_runs_values_and_replays(failed):
    import pyarrow.parquet as pq

    from mbs_ros.campaign.spec import load_campaign

    path, out, message = failed
    table = pq.read_table(out / "results.parquet")
    rows = sorted(table.to_pylist(), key=lambda r: r["run"])
    assert [r["status"] for r in rows] == ["fail", "fail"], rows
    lines = message.splitlines()
    assert lines[0] == f"campaign must_fail: 2 of 2 runs did not pass (results and report in {out})"
    assert lines[1] == "criterion 'final_base_position_error < 0.000001' failed in 2 of 2 runs (runs 0, 1); worst:"
    # the worst first, each with its value as the results hold it and its replay command
    worst = sorted(rows, key=lambda r: -r["metric.final_base_position_error"])
    for line, row in zip(lines[2:4], worst):
        value = row["metric.final_base_position_error"]
        assert value > 1e-3  # the step's error 1.5 s in: (e0 + 3 e0 t) exp(-3 t) = 0.061 e0 with e0 = 0.2 m
        head = f"  run {row['run']}: final_base_position_error = {value:.6g}; replay: python -m mbs_ros.bringup "
        assert line.startswith(head), line
    assert "max_joint_error" not in message  # the criterion that held is not reported
    assert len(lines) == 4, message
    assert (out / "report.md").is_file()
    campaign = load_campaign(path)
    assert campaign.name == "must_fail"


def _states(bag):
    """stamp ns -> (q[0:7] as odom has it: position, quaternion xyzw; v[0:6]: twist linear, angular) of
    /uvms/odom, and stamp ns -> (joint positions, joint velocities) of /uvms/joint_states, as recorded."""
    from nav_msgs.msg import Odometry
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    from mbs_ros.recording import read_messages

    odom, joints = {}, {}
    for _schema, channel, record in read_messages(bag):
        if channel.topic == "/uvms/odom":
            m = deserialize_message(record.data, Odometry)
            p, o, tw = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist
            odom[m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec] = (
                np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w]),
                np.array([tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z]))
        elif channel.topic == "/uvms/joint_states":
            m = deserialize_message(record.data, JointState)
            joints[m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec] = (
                np.array(list(m.position)), np.array(list(m.velocity)))
    return odom, joints


def test_the_replay_command_records_the_headless_runs_states_bit_for_bit(failed, tmp_path):
    from mbs_ros.campaign.spec import load_campaign
    from mbs_ros.headless import run_scenario

    path, _out, message = failed
    line = re.search(r"replay: (python -m mbs_ros\.bringup .*)$", message.splitlines()[2]).group(1)
    run = int(re.search(r"run (\d+):", message.splitlines()[2]).group(1))
    argv = shlex.split(line)
    assert argv[0] == "python"
    bag = tmp_path / f"out/replay/must_fail_run{run}.mcap"
    path_env = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    p = subprocess.run([sys.executable, *argv[1:], "--log-dir", str(tmp_path / "logs")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=path_env))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert bag.is_file() and any((tmp_path / f"out/replay/must_fail_run{run}").glob("*.png"))
    odom, joints = _states(bag)
    # the campaign's own run, from its draw (not from the command): the headless run the criteria judged
    campaign = load_campaign(path)
    headless = run_scenario(campaign.scenario, duration=campaign.duration, overrides=campaign.draw(run))
    assert headless.fault is None
    rec = headless.robots["uvms"]
    rows = {int(s): i for i, s in enumerate(rec.stamp_ns)}
    # the recording covers the whole run: every control period from t = 0 to exactly the duration, nothing beyond
    period = int(round(1e9 / headless.control_rate))
    end = int(round(campaign.duration * 1e9))
    grid = set(range(0, end + 1, period))
    assert len(grid) == int(round(campaign.duration * headless.control_rate)) + 1 == 151
    for what, states in (("odom", odom), ("joint_states", joints)):
        assert set(states) == grid, (f"{what}: {len(states)} of {len(grid)} periods; missing "
                                     f"{sorted(grid - set(states))[:8]}, beyond {sorted(set(states) - grid)[:8]}")
    assert set(rows) == grid
    last = max(odom)
    nq, nv = rec.nq_base, rec.nv_base
    for stamp, (pose, twist) in odom.items():
        i = rows[stamp]
        assert pose.tobytes() == rec.q[i, :nq].tobytes(), (stamp, pose, rec.q[i, :nq])
        assert twist.tobytes() == rec.v[i, :nv].tobytes(), (stamp, twist, rec.v[i, :nv])
    for stamp, (position, velocity) in joints.items():
        i = rows[stamp]
        assert position.tobytes() == rec.q[i, nq:].tobytes(), (stamp, position, rec.q[i, nq:])
        assert velocity.tobytes() == rec.v[i, nv:].tobytes(), (stamp, velocity, rec.v[i, nv:])
    # the final state the recording holds, and how much of the run it covers
    print(f"replay of run {run}: {len(odom)} odom and {len(joints)} joint_states bit-identical to the headless "
          f"run, the last at t = {last * 1e-9:.2f} s: q = {rec.q[rows[last], :3].tolist()}")
