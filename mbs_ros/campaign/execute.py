"""One run of a campaign, start to row: draw -> scenario with the overrides -> headless run -> metrics -> criteria.

:func:`execute_run` is what every engine calls per run index (docs/campaigns.md, Results): it never raises for
the run's own failure (a bad draw, a blow-up, a law that throws) but returns an ``error`` or ``fail`` row saying
why, and apart from ``wall_s`` the row is a pure function of the campaign file and the index. ROS-free.
"""

from __future__ import annotations

import functools
import json
import math
import time
from typing import Dict, List, Tuple

from mbs_ros.campaign.metrics import compute_metrics
from mbs_ros.campaign.spec import Campaign

__all__ = ["execute_run", "evaluate_criteria", "metric_columns", "param_value", "row_check"]


def execute_run(campaign: Campaign, index: int) -> dict:
    """Run ``index`` of ``campaign``: the row ``{"run", "status" (pass | fail | error), "reason", "wall_s",
    "param.<path>": value, "metric.<name>": float}``. ``reason``: "" when it passes; the failed criteria
    (``max_joint_error = 0.31 >= 0.2``) and a fault (``t = 3.214 s: non-finite state (uvms)``) joined by "; ";
    for an error the exception (a draw the scenario refuses names the file and key). Vectors drawn are JSON
    text; metrics not computed are NaN."""
    from mbs_ros.scenario.schema import load_scenario

    start = time.perf_counter()
    row: dict = {"run": int(index), "status": "error", "reason": "", "wall_s": 0.0}
    metrics = {name: math.nan for name in _columns_or_none(campaign)}
    try:
        draw = campaign.draw(index)
        row.update({f"param.{path}": param_value(v) for path, v in draw.items()})
        scenario = load_scenario(campaign.scenario, overrides=draw)
        from mbs_ros.headless import run_scenario

        run = run_scenario(scenario, duration=campaign.duration)
        metrics.update(compute_metrics(campaign, run))
        failures = ([run.fault] if run.fault else []) + evaluate_criteria(campaign, metrics)
        row["status"] = "fail" if failures else "pass"
        row["reason"] = "; ".join(failures)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the row says why; the campaign goes on
        row["status"], row["reason"] = "error", _one_line(e)
    row["wall_s"] = time.perf_counter() - start
    row.update({f"metric.{k}": float(v) for k, v in metrics.items()})
    return row


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    name = type(e).__name__
    return text if name in ("ScenarioError", "HeadlessError", "CampaignError") else f"{name}: {text}"


def row_check(campaign: Campaign):
    """The check :func:`mbs_ros.campaign.results.read_rows` applies to a row read back for ``--resume``: a row of
    a run below the campaign's ``runs`` that passed or failed carries every metric column of the campaign
    (:func:`metric_columns`; a python metric returning a dict as ``name.key`` columns) as a number, and a "pass"
    holds every criterion on those numbers (a forged ``{"run": i, "status": "pass"}`` is refused). Rows of runs
    at or beyond ``runs`` (kept from a longer run of the same file) are not counted and not checked further."""
    try:
        columns = metric_columns(campaign)
    except Exception:  # noqa: BLE001 - a scenario that does not load: every run is an error, nothing to keep
        columns = ()

    def check(row: dict):
        if row["run"] >= campaign.runs or row["status"] not in ("pass", "fail"):
            return None
        metrics = {k[len("metric."):]: v for k, v in row.items() if k.startswith("metric.")}
        for name, v in metrics.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return f"run {row['run']}: metric.{name} must be a number, got {type(v).__name__}"
        for name in columns:
            if name not in metrics and not any(k.startswith(name + ".") for k in metrics):
                return f"run {row['run']}: metric.{name} missing"
        if row["status"] == "pass":
            failures = evaluate_criteria(campaign, {k: float(v) for k, v in metrics.items()})
            if failures:
                return f"run {row['run']}: status pass, but {failures[0]}"
        return None

    return check


def param_value(value):
    """A drawn value as a table cell: numbers, text and booleans as they are, lists as JSON text."""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


def evaluate_criteria(campaign: Campaign, metrics: Dict[str, float]) -> List[str]:
    """The failures of ``campaign``'s criteria on ``metrics`` (``[]``: every one holds). A bare metric name in a
    scenario of several robots is checked on each (``uvms1/max_joint_error``); NaN or a missing metric fails."""
    out = []
    for c in campaign.criteria:
        names = [c.metric] if c.metric in metrics else [k for k in metrics if k.split("/", 1)[-1] == c.metric]
        if not names:
            out.append(f"{c.metric} not computed")
        out += [c.failure(n, metrics[n]) for n in names if not c.holds(metrics[n])]
    return out


def metric_columns(campaign: Campaign) -> Tuple[str, ...]:
    """The metric names every row carries (NaN when not computed): the built-in metrics per robot of the
    scenario (``<namespace>/<name>`` when there are several) and the python metrics returning one number are
    known only from their first value, so these are the built-ins' and the python metrics' names."""
    return _columns(campaign.scenario, tuple((m.name, m.kind) for m in campaign.metrics))


def _columns_or_none(campaign: Campaign) -> Tuple[str, ...]:
    try:
        return metric_columns(campaign)
    except Exception:  # noqa: BLE001 - an unloadable scenario: the row's error says why
        return ()


@functools.lru_cache(maxsize=32)
def _columns(scenario: str, metrics: Tuple[Tuple[str, str], ...]) -> Tuple[str, ...]:
    from mbs_ros.scenario.schema import load_scenario

    robots = [r.name for r in load_scenario(scenario).robots]
    out = []
    for name, kind in metrics:
        if kind == "python" or len(robots) == 1:
            out.append(name)
        else:
            out += [f"{ns}/{name}" for ns in robots]
    return tuple(out)
