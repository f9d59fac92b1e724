"""``python -m mbs_ros.campaign`` end to end with the real runs (headless vehicle-manipulator, short): the rows it
writes are the rows :func:`execute_run` gives for each index in this process, ``--resume`` keeps finished rows
untouched (their measured wall time too) and runs the rest, exit codes 0/1/2, and Ctrl-C stops the campaign and its
workers with exit code 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from campaign_tasks import with_default_sigint  # noqa: E402
from mbs_ros.campaign.execute import execute_run  # noqa: E402
from mbs_ros.campaign.spec import load_campaign  # noqa: E402

CLI_TIMEOUT = 900  # s: generous, first runs compile the kernels when numba's cache is cold

CAMPAIGN = """\
    name: vm_cli
    scenario: vehicle_manipulator
    runs: 4
    seed: 5
    duration: {duration}
    vary:
      - path: robots[0].dynamics.mass_scale
        uniform: [0.8, 1.2]
      - path: robots[0].dynamics.added_mass_scale
        uniform: [0.8, 1.2]
    metrics:
      - max_base_position_error
      - max_joint_error
      - faults
    criteria:
      - max_joint_error < {bound}
      - faults < 1
"""


def write(tmp_path, name="vm.yaml", duration=0.5, bound=1.0) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(CAMPAIGN).format(duration=duration, bound=bound), encoding="utf-8")
    return path


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mbs_ros.campaign", *map(str, args)], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT, cwd=cwd)


def without_wall(rows):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def test_the_cli_writes_execute_runs_rows_and_resume_keeps_the_finished_ones(tmp_path):
    path = write(tmp_path)
    first = cli(path, "--workers", "2", "--runs", "2", "--no-report", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    out = tmp_path / "out" / "campaigns" / "vm_cli"  # the default output directory
    kept = pq.read_table(out / "results.parquet").to_pylist()
    assert [r["run"] for r in kept] == [0, 1]
    second = cli(path, "--workers", "2", "--resume", "--no-report", "--out", out)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "vm_cli: 4 runs: 4 pass, 0 fail, 0 error" in second.stdout
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert rows[:2] == kept  # untouched, measured wall time included: not run again
    campaign = load_campaign(path)
    assert without_wall(rows) == without_wall(execute_run(campaign, i) for i in range(4))
    assert len({r["param.robots[0].dynamics.mass_scale"] for r in rows}) == 4


def test_exit_codes_say_pass_fail_and_bad_input(tmp_path):
    failing = cli(write(tmp_path, duration=0.1, bound=0.0), "--workers", "1", "--runs", "1", "--no-report",
                  "--out", tmp_path / "f")
    assert failing.returncode == 1, failing.stderr[-2000:]
    assert "1 runs: 0 pass, 1 fail, 0 error" in failing.stdout
    assert "max_joint_error = " in pq.read_table(tmp_path / "f" / "results.parquet")["reason"][0].as_py()

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nscenario: vehicle_manipulator\nruns: many\nseed: 0\n", encoding="utf-8")
    r = cli(bad)
    assert r.returncode == 2 and "bad.yaml" in r.stderr and "runs" in r.stderr, r.stderr
    r = cli(write(tmp_path), "--workers", "0")
    assert r.returncode == 2 and "--workers" in r.stderr, r.stderr
    r = cli(write(tmp_path), "--address", "127.0.0.1:6379")
    assert r.returncode == 2 and "--engine ray" in r.stderr, r.stderr
    other = write(tmp_path, name="other.yaml", bound=0.5)
    r = cli(other, "--resume", "--out", tmp_path / "f")  # f holds vm.yaml's results
    assert r.returncode == 2 and "belong to another campaign file" in r.stderr, r.stderr


def test_ctrl_c_stops_the_cli_and_its_workers(tmp_path):
    psutil = pytest.importorskip("psutil")
    out = tmp_path / "o"
    proc = subprocess.Popen(with_default_sigint([sys.executable, "-m", "mbs_ros.campaign",
                                                 str(write(tmp_path, duration=600.0)), "--workers", "2",
                                                 "--no-report", "--out", str(out)]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(psutil.Process(proc.pid).children(recursive=True)) < 2:  # the workers are up
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no workers started"
            time.sleep(0.05)
        children = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C on a terminal: the whole process group
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err[-2000:]
        assert "--resume continues" in err
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, f"left running: {alive}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (out / "results.parquet").exists() and (out / "campaign.yaml").exists()
