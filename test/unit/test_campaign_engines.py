"""The campaign engines and result files (mbs_ros.campaign.engines, mbs_ros.campaign.results) with real worker
processes running cheap deterministic tasks (test/campaign_tasks.py): the table does not depend on the worker
count or finishing order, a worker killed with SIGKILL loses no run (retried once; twice: an "error" row), resume
skips finished runs and retries errors, Ctrl-C stops the workers and keeps the finished rows.

The expected rows are the task's own rows computed here, in this process, one by one: the engine under test only
moves them. Tests that start worker processes are marked e2e (test_architecture's rule for test/unit).
"""

from __future__ import annotations

import csv
import json
import math
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

from campaign_tasks import (  # noqa: E402
    ToyCampaign,
    calls,
    kill_always_task,
    toy_row,
    toy_task,
    with_default_sigint,
    write_source,
)
from mbs_ros.campaign.engines import EngineError, run_campaign  # noqa: E402
from mbs_ros.campaign.results import (  # noqa: E402
    CSV_FILE,
    JOURNAL,
    PARQUET_FILE,
    ResultsError,
    ResultsStore,
    read_rows,
    rows_to_table,
)


def make_campaign(tmp_path, runs=8, seed=7, **kw) -> ToyCampaign:
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir(exist_ok=True)
    return ToyCampaign(name="toy", source=write_source(tmp_path / "toy.yaml"), runs=runs, seed=seed,
                       calls_dir=str(calls_dir), **kw)


def without_wall(table) -> list:
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in table.to_pylist()]


def expected(campaign) -> list:
    return [{k: v for k, v in toy_row(campaign, i).items() if k != "wall_s"} for i in range(campaign.runs)]


# --- result files (no process) -----------------------------------------------------------------------------------

def test_the_table_does_not_depend_on_the_order_rows_finish_in(tmp_path):
    campaign = make_campaign(tmp_path, runs=6)
    rows = [toy_row(campaign, i) for i in range(campaign.runs)]
    rows[3] = {"run": 3, "status": "error", "reason": "worker died (signal 9)", "wall_s": 1.0}
    a, b = rows_to_table(rows), rows_to_table(rows[::-1])
    assert a.schema.equals(b.schema)
    assert json.dumps(a.to_pylist()) == json.dumps(b.to_pylist())  # NaN as text: NaN != NaN
    assert a.column_names == ["run", "status", "reason", "wall_s", "param.gain", "param.offset", "metric.y",
                              "metric.x0"]
    assert a["run"].to_pylist() == list(range(6))
    assert math.isnan(a["metric.y"][3].as_py()) and a["param.gain"][3].as_py() is None


def test_rows_are_on_disk_as_they_finish_and_a_torn_last_line_is_ignored(tmp_path):
    campaign = make_campaign(tmp_path, runs=4)
    out = tmp_path / "out"
    store = ResultsStore(out, campaign.source)
    for i in (2, 0):
        store.add(toy_row(campaign, i))
    # before close: the journal and the CSV hold both rows already (a kill now keeps them)
    assert sorted(read_rows(out)) == [0, 2]
    with open(out / CSV_FILE, newline="") as f:
        assert [r["run"] for r in csv.DictReader(f)] == ["2", "0"]
    with open(out / JOURNAL, "a") as f:
        f.write('{"run": 3, "sta')  # killed in the middle of a line
    assert sorted(read_rows(out)) == [0, 2]
    store.close()
    table = pq.read_table(out / PARQUET_FILE)
    assert without_wall(table) == [expected(campaign)[0], expected(campaign)[2]]
    with open(out / CSV_FILE, newline="") as f:
        text_rows = list(csv.DictReader(f))
    assert [float(r["metric.y"]) for r in text_rows] == table["metric.y"].to_pylist()  # repr: exact round trip
    (out / JOURNAL).write_text('{"run": 1, "sta\n{"run": 0}\n')
    with pytest.raises(ResultsError, match=r"rows.jsonl:1: not a result row"):
        read_rows(out)


def test_resume_keeps_passed_and_failed_rows_and_drops_errors(tmp_path):
    campaign = make_campaign(tmp_path, runs=4)
    out = tmp_path / "out"
    store = ResultsStore(out, campaign.source)
    for i in range(3):
        store.add(toy_row(campaign, i))
    store.add({"run": 3, "status": "error", "reason": "worker died (signal 9)", "wall_s": 0.1})
    store.close()
    statuses = {r["run"]: r["status"] for r in read_rows(out).values()}
    assert "fail" in statuses.values() and "pass" in statuses.values()
    assert ResultsStore(out, campaign.source, resume=True).done == {0, 1, 2}
    assert ResultsStore(out, campaign.source, resume=False).done == set()
    assert not (out / PARQUET_FILE).exists() or pq.read_table(out / PARQUET_FILE).num_rows == 0


def test_resume_refuses_the_results_of_another_campaign_file(tmp_path):
    campaign = make_campaign(tmp_path)
    ResultsStore(tmp_path / "out", campaign.source).close()
    other = write_source(tmp_path / "other.yaml", name="other")
    with pytest.raises(ResultsError, match=r"campaign.yaml: the results in .* belong to another campaign file"):
        ResultsStore(tmp_path / "out", other, resume=True)


def test_bad_engine_arguments_are_refused_before_anything_runs(tmp_path):
    campaign = make_campaign(tmp_path)
    with pytest.raises(EngineError, match="engine 'dask'"):
        run_campaign(campaign, out_dir=tmp_path / "o", engine="dask", task=toy_task)
    with pytest.raises(EngineError, match="workers: expected a positive integer, got 0"):
        run_campaign(campaign, out_dir=tmp_path / "o", workers=0, task=toy_task)
    assert not (tmp_path / "o").exists()


def test_the_ray_engine_without_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as without the package
    with pytest.raises(EngineError, match=r"pip install ray"):
        run_campaign(make_campaign(tmp_path), out_dir=tmp_path / "o", engine="ray", task=toy_task)
    assert not (tmp_path / "o").exists()  # refused before anything is written


# --- the local engine (worker processes) ---------------------------------------------------------------------

@pytest.mark.e2e
def test_the_local_engine_gives_the_same_table_with_one_and_two_workers(tmp_path):
    campaign = make_campaign(tmp_path, runs=10)
    one = run_campaign(campaign, out_dir=tmp_path / "w1", workers=1, progress=False, task=toy_task)
    two = run_campaign(campaign, out_dir=tmp_path / "w2", workers=2, progress=False, task=toy_task)
    assert without_wall(one) == expected(campaign)
    assert without_wall(two) == expected(campaign)
    assert {r["status"] for r in expected(campaign)} == {"pass", "fail"}  # both verdicts are exercised
    assert without_wall(pq.read_table(tmp_path / "w2" / PARQUET_FILE)) == expected(campaign)
    assert calls(campaign) == {i: 2 for i in range(10)}  # once per engine run
    assert (tmp_path / "w1" / "campaign.yaml").read_text() == campaign.source.read_text()


@pytest.mark.e2e
def test_a_worker_killed_on_a_first_attempt_loses_no_run(tmp_path):
    campaign = make_campaign(tmp_path, runs=8, kill=(2, 5))
    table = run_campaign(campaign, out_dir=tmp_path / "o", workers=2, progress=False, task=toy_task)
    assert without_wall(table) == expected(campaign)
    n = calls(campaign)
    assert n[2] == 2 and n[5] == 2  # killed once, retried once
    assert all(1 <= n[i] <= 2 for i in range(8))  # a neighbour in flight is retried too, at most once


@pytest.mark.e2e
def test_a_run_that_always_kills_its_worker_is_an_error_row_and_the_campaign_completes(tmp_path):
    campaign = make_campaign(tmp_path, runs=6, kill=(3,))
    rows = run_campaign(campaign, out_dir=tmp_path / "o", workers=2, progress=False,
                        task=kill_always_task).to_pylist()
    assert [r["run"] for r in rows] == list(range(6))
    assert rows[3]["status"] == "error" and rows[3]["reason"] == "worker died (signal 9)"
    assert rows[3]["param.gain"] == campaign.draw(3)["gain"]  # the error row shows what the run would simulate
    assert calls(campaign)[3] == 2
    good = [{k: v for k, v in r.items() if k != "wall_s"} for r in rows if r["run"] != 3]
    assert good == [r for r in expected(campaign) if r["run"] != 3]


@pytest.mark.e2e
def test_resume_skips_finished_runs_and_retries_error_rows(tmp_path):
    first = make_campaign(tmp_path, runs=4, fail=(1,))
    table = run_campaign(first, out_dir=tmp_path / "o", workers=2, progress=False, task=toy_task)
    assert table["status"][1].as_py() == "error"
    assert table["reason"][1].as_py() == "RuntimeError: run 1 fails on purpose"
    resumed = make_campaign(tmp_path, runs=6)  # the same campaign file, more runs, the failure gone
    table = run_campaign(resumed, out_dir=tmp_path / "o", workers=2, resume=True, progress=False, task=toy_task)
    assert without_wall(table) == expected(resumed)
    assert calls(resumed) == {0: 1, 1: 2, 2: 1, 3: 1, 4: 1, 5: 1}


CTRL_C_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {test_dir!r})
    from campaign_tasks import ToyCampaign, toy_task
    from mbs_ros.campaign.engines import run_campaign
    from pathlib import Path
    c = ToyCampaign(name="toy", source=Path({source!r}), runs=3, seed=7, calls_dir={calls!r}, hang=(0,))
    try:
        run_campaign(c, out_dir={out!r}, workers=2, progress=False, task=toy_task)
    except KeyboardInterrupt:
        sys.exit(130)
""")


@pytest.mark.e2e
def test_ctrl_c_stops_the_workers_and_keeps_the_finished_rows(tmp_path):
    psutil = pytest.importorskip("psutil")
    campaign = make_campaign(tmp_path, runs=3, hang=(0,))
    out = tmp_path / "o"
    script = CTRL_C_SCRIPT.format(test_dir=str(Path(__file__).parents[1]), source=str(campaign.source),
                                  calls=campaign.calls_dir, out=str(out))
    # its own process group, signalled as a whole: what Ctrl-C on a terminal does
    proc = subprocess.Popen(with_default_sigint([sys.executable, "-c", script]), env=os.environ.copy(),
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not ((out / JOURNAL).exists() and len((out / JOURNAL).read_text().splitlines()) == 2):
            assert proc.poll() is None, "the campaign ended before Ctrl-C"
            assert time.monotonic() < deadline, "runs 1 and 2 did not finish"
            time.sleep(0.05)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "no worker processes"
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, f"workers left running: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rows = pq.read_table(out / PARQUET_FILE).to_pylist()
    assert [r["run"] for r in rows] == [1, 2]
    assert [{k: v for k, v in r.items() if k != "wall_s"} for r in rows] == expected(campaign)[1:]
    assert json.loads((out / JOURNAL).read_text().splitlines()[0])["run"] in (1, 2)


@pytest.mark.e2e
def test_a_task_that_cannot_reach_a_worker_gives_error_rows_not_a_crash(tmp_path):
    campaign = make_campaign(tmp_path, runs=3)
    rows = run_campaign(campaign, out_dir=tmp_path / "o", workers=2, progress=False,
                        task=lambda c, i: toy_row(c, i)).to_pylist()  # a lambda does not pickle
    assert [(r["run"], r["status"]) for r in rows] == [(0, "error"), (1, "error"), (2, "error")]
    assert all("pickle" in r["reason"].lower() for r in rows), rows[0]["reason"]


@pytest.mark.e2e
def test_workers_run_one_blas_thread_unless_the_environment_says_otherwise(tmp_path, monkeypatch):
    pytest.importorskip("threadpoolctl")
    from campaign_tasks import threads_task

    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                 "VECLIB_MAXIMUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    campaign = make_campaign(tmp_path, runs=2)
    table = run_campaign(campaign, out_dir=tmp_path / "a", workers=2, progress=False, task=threads_task)
    assert table["metric.blas_threads"].to_pylist() == [1.0, 1.0]
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    table = run_campaign(campaign, out_dir=tmp_path / "b", workers=2, progress=False, task=threads_task)
    assert table["metric.blas_threads"].to_pylist() == [2.0, 2.0]
