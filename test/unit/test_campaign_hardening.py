"""Issue 31's hostile inputs to campaigns (items 1, 10, 11, 12, 13, 17): each probe's input, refused at load with one
line naming the file and the key, contained to its run, or refused at --resume with one line naming the file and
what to do. The expected texts and bounds are written here (MAX_RUNS = 100 000 is the documented bound, not read
from the module for the refusal's input). The SIGKILL test starts worker processes (marked e2e)."""
from __future__ import annotations

import errno
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
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from mbs_ros.campaign import __main__ as campaign_cli  # noqa: E402
from mbs_ros.campaign.execute import execute_run, row_check  # noqa: E402
from mbs_ros.campaign.metrics import compute_metrics, user_function  # noqa: E402
from mbs_ros.campaign.results import (  # noqa: E402
    CSV_FILE, JOURNAL, PARQUET_FILE, ResultsError, ResultsStore, read_rows)
from mbs_ros.campaign.spec import CampaignError, load_campaign  # noqa: E402
from mbs_ros.headless import HeadlessRun  # noqa: E402

HEAD = "name: h\nscenario: vehicle_manipulator\nseed: 1\n"


def _file(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _refused(tmp_path, text, key, words):
    with pytest.raises(CampaignError) as e:
        load_campaign(_file(tmp_path, text))
    assert e.value.key == key, str(e.value)
    assert words in e.value.reason, str(e.value)
    assert "\n" not in str(e.value)


# --- item 1: runs and the draws' size are bounded at load --------------------------------------------------------

def test_a_billion_runs_are_refused_at_load_with_the_bound(tmp_path, capsys):
    _refused(tmp_path, HEAD + "runs: 1000000000\n", "runs", "must be <= 100000")
    _refused(tmp_path, HEAD + "runs: 100001\n", "runs", "must be <= 100000")
    assert load_campaign(_file(tmp_path, HEAD + "runs: 100000\n")).runs == 100_000
    # the CLI: exit 2, one line, nothing run
    code = campaign_cli.main([str(_file(tmp_path, HEAD + "runs: 1000000000\n")), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "c.yaml: runs: must be <= 100000" in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as e:
        campaign_cli.main([str(_file(tmp_path, HEAD + "runs: 10\n")), "--runs", "1000000000"])
    assert e.value.code == 2


def test_a_draw_of_too_many_numbers_is_refused_at_load(tmp_path):
    _refused(tmp_path, HEAD + "runs: 2\nvary:\n  - {path: 'robots[0].dynamics.link_mass_scales', "
                              "uniform: [0.9, 1.1], size: 100000000}\n", "vary[0].size", "must be <= 10000")
    many = "[" + ", ".join(["1.0"] * 10001) + "]"
    _refused(tmp_path, HEAD + f"runs: 2\nvary:\n  - {{path: 'robots[0].dynamics.mass_scale', choice: {many}}}\n",
             "vary[0].choice", "more than 10000 values")


def test_the_runs_are_streamed_not_listed_up_front():
    """The local engine takes run indices from an iterator as it submits them: a campaign of 10^9 runs would not
    build a list of 10^9 indices (what drove the parent out of memory)."""
    from mbs_ros.campaign.engines import _Pending

    taken = []

    def indices():
        for i in range(10 ** 9):
            taken.append(i)
            yield i

    pending = _Pending(indices())
    assert bool(pending) and [pending.popleft() for _ in range(3)] == [0, 1, 2]
    assert len(taken) <= 4


# --- item 12: extreme bounds of draws ----------------------------------------------------------------------------

@pytest.mark.parametrize("vary,key,words", [
    ("{path: 'robots[0].dynamics.mass_scale', uniform: [-1.7e+308, 1.7e+308]}", "vary[0].uniform[0]", ">= -1e+300"),
    ("{path: 'robots[0].dynamics.mass_scale', integers: [0, 1000000000000000000000000000000]}", "vary[0].integers[1]",
     "must be <= 2**62"),
    ("{path: 'robots[0].dynamics.mass_scale', normal: {mean: 1.0, std: 1.0e+299}}", "vary[0].normal.std",
     "must be <= 1e+298"),
    ("{path: 'robots[0].dynamics.mass_scale', log_uniform: [1.0e-10, 1.0e+305]}", "vary[0].log_uniform[1]",
     "must be <= 1e+300"),
])
def test_draws_with_extreme_bounds_are_refused_at_load(tmp_path, vary, key, words):
    _refused(tmp_path, HEAD + f"runs: 2\nvary:\n  - {vary}\n", key, words)


def test_draws_at_the_bounds_stay_finite(tmp_path):
    c = load_campaign(_file(tmp_path, HEAD + "runs: 4\nvary:\n"
                            "  - {path: 'robots[0].dynamics.mass_scale', uniform: [-1.0e+300, 1.0e+300]}\n"
                            "  - {path: 'robots[0].controller.kp', integers: [-4611686018427387904, "
                            "4611686018427387904]}\n"
                            "  - {path: 'robots[0].controller.kd', normal: {mean: 1.0e+300, std: 1.0e+298}}\n"))
    for i in range(4):
        d = c.draw(i)
        assert math.isfinite(d["robots[0].dynamics.mass_scale"]) and math.isfinite(d["robots[0].controller.kd"])
        assert abs(d["robots[0].controller.kp"]) <= 2 ** 62


# --- item 10: a campaign file is code; user functions are imported from what it names, contained to their run ------

def test_a_module_in_the_working_directory_is_not_imported_unless_the_file_asks(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "evil_metric_h31.py").write_text(
        "import pathlib\npathlib.Path('imported.flag').write_text('x')\ndef f(run):\n    return 1.0\n")
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend("")  # what `python -m mbs_ros.campaign` starts with
    monkeypatch.delitem(sys.modules, "evil_metric_h31", raising=False)
    with pytest.raises(ValueError, match="cannot import evil_metric_h31"):
        user_function("evil_metric_h31:f")
    assert not (work / "imported.flag").exists()
    # named in the file: python_path (relative to the campaign file)
    c = load_campaign(_file(tmp_path, HEAD + "runs: 1\npython_path: [work]\n"
                                             "metrics: [{python: 'evil_metric_h31:f', name: m}]\n"))
    assert c.python_path == (str(work.resolve()),)
    assert compute_metrics(c, _run()) == {"m": 1.0}
    assert (work / "imported.flag").exists()
    sys.modules.pop("evil_metric_h31", None)
    _refused(tmp_path, HEAD + "runs: 1\npython_path: [nowhere]\n", "python_path[0]", "not a directory")


def _run():
    return HeadlessRun(scenario="x", duration=0.5, physics_rate=500.0, control_rate=100.0, wall_time=0.1,
                       fault=None, robots={})


def test_a_user_function_that_exits_is_contained_to_its_run(tmp_path):
    """`sys:exit` as a metric ended the campaign with 0 rows: now the run's row is an error saying SystemExit."""
    c = load_campaign(_file(tmp_path, HEAD + "runs: 1\nduration: 0.02\nmetrics: [{python: 'sys:exit', name: m}]\n"))
    with pytest.raises(ValueError, match=r"python metric sys:exit raised SystemExit"):
        compute_metrics(c, _run())
    row = execute_run(c, 0)
    assert row["status"] == "error" and "SystemExit" in row["reason"], row


# --- items 11 and 17: --resume on damaged or forged output --------------------------------------------------------

@pytest.fixture
def campaign(tmp_path):
    return load_campaign(_file(tmp_path, HEAD + "runs: 4\nmetrics: [max_joint_error, faults]\n"
                                                 "criteria: ['max_joint_error < 0.2', 'faults < 1']\n"))


def _good(run, status="pass"):
    row = {"run": run, "status": status, "reason": "" if status == "pass" else "max_joint_error = 0.3 >= 0.2",
           "wall_s": 1.0, "metric.max_joint_error": 0.1 if status == "pass" else 0.3, "metric.faults": 0.0}
    return row


def _journal(tmp_path, campaign, data: bytes):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "campaign.yaml").write_text(campaign.source.read_text())
    (out / JOURNAL).write_bytes(data)
    return out


def _one_line_refusal(out, campaign, *words):
    with pytest.raises(ResultsError) as e:
        ResultsStore(out, campaign.source, resume=True, check=row_check(campaign))
    text = str(e.value)
    assert "\n" not in text and all(w in text for w in words), text
    assert "without --resume" in text or "another --out" in text, text
    return text


@pytest.mark.parametrize("data,where", [
    (b'{"run": Infinity, "status": "pass", "reason": ""}\n', "rows.jsonl:1"),
    (b'{"run": 0, "status": "pass", "reason": "\xff\xfe"}\n{"run": 1}\n', "rows.jsonl:1"),
    (b'{"run": 1.5, "status": "pass", "reason": ""}\n', "rows.jsonl:1"),
    (b"[" * 100000 + b"\n", "rows.jsonl:1"),
])
def test_a_damaged_journal_is_one_line_naming_it(tmp_path, campaign, data, where):
    out = _journal(tmp_path, campaign, json.dumps(_good(0)).encode() + b"\n" + data)
    _one_line_refusal(out, campaign, where.replace(":1", ":2"))


def test_a_journal_that_is_a_directory_or_a_parquet_without_runs_is_one_line(tmp_path, campaign):
    out = tmp_path / "out"
    (out / JOURNAL).mkdir(parents=True)
    _one_line_refusal(out, campaign, "rows.jsonl: cannot be read")
    (out / JOURNAL).rmdir()
    pq.write_table(pa.table({"x": [1, 2]}), out / PARQUET_FILE)
    _one_line_refusal(out, campaign, "results.parquet: a results table without a 'run' column")
    pq.write_table(pa.table({"run": [None, 1.5]}), out / PARQUET_FILE)
    _one_line_refusal(out, campaign, "results.parquet: row 0")
    (out / PARQUET_FILE).write_bytes(b"PAR1 not really")
    _one_line_refusal(out, campaign, "results.parquet: not a readable results table")


@pytest.mark.parametrize("row,words", [
    ({"run": 1, "status": "pass", "reason": ""}, "metric.max_joint_error missing"),
    ({"run": -3, "status": "pass", "reason": "", "metric.max_joint_error": 0.0, "metric.faults": 0.0},
     "run -3 is outside"),
    ({**_good(2), "metric.max_joint_error": 0.5}, "status pass, but max_joint_error = 0.5 >= 0.2"),
    ({**_good(2), "status": "done"}, "status must be one of"),
    ({**_good(2), "status": "fail"}, "status fail with no reason"),
    ({**_good(2), "metric.faults": "0"}, "metric.faults must be a number"),
])
def test_forged_rows_do_not_count(tmp_path, campaign, row, words):
    out = _journal(tmp_path, campaign, (json.dumps(_good(0)) + "\n" + json.dumps(row) + "\n").encode())
    _one_line_refusal(out, campaign, "rows.jsonl:2", words)


def test_genuine_rows_count_on_resume(tmp_path, campaign):
    out = _journal(tmp_path, campaign, "".join(json.dumps(r) + "\n" for r in
                                               (_good(0), _good(1, "fail"), {"run": 9, "status": "pass",
                                                                             "reason": ""})).encode())
    assert ResultsStore(out, campaign.source, resume=True, check=row_check(campaign)).done == {0, 1, 9}


def test_the_cli_refuses_a_damaged_resume_in_one_line(tmp_path, campaign, capsys):
    out = _journal(tmp_path, campaign, b'{"run": Infinity}\n{"run": 0}\n')
    code = campaign_cli.main([str(campaign.source), "--out", str(out), "--resume", "--no-report"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "rows.jsonl:1" in err, err


def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path, campaign, monkeypatch):
    out = tmp_path / "out"
    store = ResultsStore(out, campaign.source, check=row_check(campaign))
    store.add(_good(0))
    store.add(_good(1, "fail"))
    store._snapshot()

    def full(self, data):  # the disk fills in the middle of a temporary file
        with open(self, "wb") as f:
            f.write(data[:3])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(ResultsError) as e:
        store.add({**_good(2), "metric.new_column": 1.0})  # a new column: the CSV is rewritten whole
    text = str(e.value)
    assert "\n" not in text and "results.csv" in text and "No space left on device" in text and "--resume" in text
    store.close()  # no second traceback
    monkeypatch.undo()
    assert not list(out.glob("*.tmp"))
    assert sorted(read_rows(out)) == [0, 1, 2]  # the journal line was written before the CSV failed
    assert pq.read_table(out / PARQUET_FILE)["run"].to_pylist() == [0, 1]
    assert (out / CSV_FILE).read_text().count("\n") == 3  # header and the two rows before

    class Full:
        closed = False

        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def close(self):
            self.closed = True

    store = ResultsStore(out, campaign.source, resume=True, check=row_check(campaign))
    store._journal.close()
    store._journal = Full()
    with pytest.raises(ResultsError, match=r"rows.jsonl: cannot write a row \(No space left on device\); the 3 "
                                           r"rows before are kept"):
        store.add(_good(3))
    store.close()
    assert sorted(read_rows(out)) == [0, 1, 2]


# --- item 13: a SIGKILLed campaign leaves no process -------------------------------------------------------------

KILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {test_dir!r})
    from campaign_tasks import ToyCampaign, toy_task
    from mbs_ros.campaign.engines import run_campaign
    from pathlib import Path
    c = ToyCampaign(name="toy", source=Path({source!r}), runs=4, seed=7, calls_dir={calls!r}, hang=(0, 1, 2, 3))
    run_campaign(c, out_dir={out!r}, workers=2, progress=False, task=toy_task)
""")


@pytest.mark.e2e
def test_a_sigkilled_campaign_leaves_no_process(tmp_path):
    psutil = pytest.importorskip("psutil")
    from campaign_tasks import write_source

    calls = tmp_path / "calls"
    calls.mkdir()
    script = KILL_SCRIPT.format(test_dir=str(Path(__file__).parents[1]), source=str(write_source(tmp_path / "t.yaml")),
                                calls=str(calls), out=str(tmp_path / "o"))
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    children = []
    try:
        deadline = time.monotonic() + 180
        while len(list(calls.iterdir())) < 2:  # both workers inside a run
            assert proc.poll() is None, "the campaign ended before it was killed"
            assert time.monotonic() < deadline, "the workers did not start their runs"
            time.sleep(0.1)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 3, children  # two workers and the resource tracker
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs(children, timeout=60)
        assert not alive, f"processes left after the campaign was SIGKILLed: {alive}"
    finally:
        for c in children:
            try:
                c.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()


def test_the_results_bound_of_a_run_index_is_the_campaigns():
    from mbs_ros.campaign.results import MAX_RUN_INDEX
    from mbs_ros.campaign.spec import MAX_RUNS

    assert MAX_RUN_INDEX == MAX_RUNS == 100_000
