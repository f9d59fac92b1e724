"""Controller test campaigns: a scenario run many times headless with drawn model errors, currents, initial
states, sensor seeds and gains; metrics and pass/fail criteria per run (docs/campaigns.md). ROS-free; Ray only
inside its engine.

    from mbs_ros.campaign import load_campaign, execute_run
    campaign = load_campaign("my_campaign.yaml")
    row = execute_run(campaign, 0)   # {"run": 0, "status": "pass", ..., "metric.max_joint_error": ...}
"""

from __future__ import annotations

import importlib

from mbs_ros.campaign.execute import evaluate_criteria, execute_run, metric_columns
from mbs_ros.campaign.metrics import compute_metrics
from mbs_ros.campaign.spec import Campaign, CampaignError, Criterion, MetricSpec, Variation, load_campaign

__all__ = ["Campaign", "CampaignError", "Criterion", "MetricSpec", "Variation", "load_campaign", "compute_metrics",
           "execute_run", "evaluate_criteria", "metric_columns", "run_campaign", "summarize", "write_report",
           "replay_command", "assert_campaign"]

# name -> module holding it, imported on first use (the engines import pyarrow, the report matplotlib)
_LAZY = {"run_campaign": "engines", "summarize": "report", "write_report": "report", "replay_command": "report",
         "assert_campaign": "testing"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"mbs_ros.campaign.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'mbs_ros.campaign' has no attribute {name!r}")
