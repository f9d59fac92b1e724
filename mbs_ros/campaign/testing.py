"""Campaigns in a project's tests: ``assert_campaign("config/campaigns/x.yaml")`` runs the campaign with the local
engine and raises an AssertionError that says which criterion failed in which runs, the worst values and the
command replaying each over ROS; :func:`campaign_fixture` makes the same a pytest fixture (no plugin needed).

    # conftest.py                                   # test_x.py
    from mbs_ros.campaign.testing import campaign_fixture    def test_x(assert_campaign):
    assert_campaign = campaign_fixture()                       assert_campaign("config/campaigns/x.yaml", runs=8)
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Optional, Union

from mbs_ros.campaign.report import replay_command, summarize, table_rows, write_report

SHOWN = 3  # worst runs shown per failed criterion


def failure_message(campaign, table, out_dir=None) -> Optional[str]:
    """The text :func:`assert_campaign` raises, or None when every run passed: per failed criterion how many runs
    failed it and the worst :data:`SHOWN` with their value and replay command; then runs that failed on no
    criterion (a fault, an error) with their reason and replay command."""
    s = summarize(campaign, table)
    if s.runs and s.passed == s.runs:
        return None
    rows = {int(r["run"]): r for r in table_rows(table)}
    where = f" (results and report in {out_dir})" if out_dir is not None else ""
    lines = [f"campaign {s.campaign}: {s.runs - s.passed} of {s.runs} runs did not pass{where}" if s.runs
             else f"campaign {s.campaign}: no runs"]
    for c in s.criteria:
        if not c.failed_runs:
            continue
        lines.append(f"criterion '{c.text}' failed in {len(c.failed_runs)} of {s.runs - s.errors} runs "
                     f"(runs {', '.join(map(str, c.failed_runs))}); worst:")
        for w in [w for w in c.worst if not w.holds][:SHOWN]:
            lines.append(f"  run {w.run}: {w.metric} = {w.value:.6g}; replay: {replay_command(campaign, rows[w.run])}")
    for run, status, reason in s.other_failures:
        lines.append(f"run {run} {status}: {reason}; replay: {replay_command(campaign, rows[run])}")
    return "\n".join(lines)


def assert_campaign(path: Union[str, os.PathLike], *, runs: Optional[int] = None, workers: Optional[int] = None,
                    out_dir: Union[str, os.PathLike, None] = None, duration: Optional[float] = None):
    """Run the campaign file ``path`` on the local engine and raise AssertionError unless every run passes.

    ``runs``/``duration`` replace the file's (fewer, shorter runs for a test's CPU budget; the criteria stay);
    ``workers``: processes (default: all cores); ``out_dir``: where results and, on failure, report.md go
    (default: a new temporary directory, named in the message). Returns the results table."""
    from mbs_ros.campaign.engines import run_campaign
    from mbs_ros.campaign.spec import load_campaign

    campaign = load_campaign(path)
    changes = {k: v for k, v in (("runs", runs), ("duration", duration)) if v is not None}
    if changes:
        campaign = dataclasses.replace(campaign, **changes)
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix=f"campaign-{campaign.name}-"))
    table = run_campaign(campaign, out_dir=out, engine="local", workers=workers, progress=False)
    message = failure_message(campaign, table, out)
    if message is not None:
        write_report(campaign, table, out)
        raise AssertionError(message)
    return table


def campaign_fixture(name: str = "assert_campaign"):
    """A pytest fixture named ``name`` giving :func:`assert_campaign` with ``out_dir`` in the test's tmp_path;
    assign it to a module-level name in a conftest.py or test module to register it."""
    import pytest

    @pytest.fixture(name=name)
    def fixture(tmp_path):
        def check(path, **kw):
            kw.setdefault("out_dir", tmp_path / "campaign")
            return assert_campaign(path, **kw)
        return check

    return fixture
