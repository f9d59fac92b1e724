"""``python -m mbs_ros.campaign FILE [--engine local|ray] [--address A] [--workers N] [--out DIR] [--resume]
[--runs N] [--no-report]``: run a campaign file with a progress bar (stderr), write its results
(:mod:`mbs_ros.campaign.results`) and report, print one line of counts.

Exit code: 0 every run passed, 1 some run failed or gave an error, 2 a bad campaign file or usage, 130 Ctrl-C
(the finished rows are kept; ``--resume`` continues). Engines: :mod:`mbs_ros.campaign.engines`; docs/campaigns.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Optional, Sequence

from mbs_ros.campaign.engines import ENGINES, EngineError, run_campaign
from mbs_ros.campaign.results import ResultsError
from mbs_ros.campaign.spec import MAX_RUNS

DEFAULT_OUT = Path("out") / "campaigns"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value > MAX_RUNS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_RUNS} (the bound of a campaign's runs), got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mbs_ros.campaign",
                                description="Run a campaign file's runs headless, write results.parquet/.csv and "
                                            "a report (docs/campaign_engines.md).",
                                epilog="exit code: 0 every run passed, 1 some run failed or gave an error, 2 a bad "
                                       "campaign file or usage, 130 Ctrl-C (finished runs kept: --resume)")
    p.add_argument("file", help="campaign file (YAML; config/campaigns/*.yaml)")
    p.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: a process pool on this machine (default); ray: Ray tasks")
    p.add_argument("--address", help="Ray cluster address (ray engine; default: a local ray.init())")
    p.add_argument("--workers", type=_positive, help="worker processes (local; default: all cores) or CPUs of a "
                                                     "local Ray instance")
    p.add_argument("--out", type=Path, help="output directory (default: out/campaigns/<campaign name>)")
    p.add_argument("--resume", action="store_true", help="keep the finished runs in --out, run the others "
                                                         "(runs that gave an error are tried again)")
    p.add_argument("--runs", type=_positive, help="run only the first N runs (the same draws as in the full "
                                                  "campaign)")
    p.add_argument("--no-report", action="store_true", help="write no report.md/plots")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    if args.address is not None and args.engine != "ray":
        print("--address: only the ray engine joins a cluster (add --engine ray)", file=sys.stderr)
        return 2
    from mbs_ros.campaign.spec import CampaignError, load_campaign

    try:
        campaign = load_campaign(args.file)
    except CampaignError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.runs is not None:
        campaign = dataclasses.replace(campaign, runs=args.runs)
    out_dir = args.out if args.out is not None else DEFAULT_OUT / campaign.name
    try:
        table = run_campaign(campaign, out_dir=out_dir, engine=args.engine, workers=args.workers,
                             address=args.address, resume=args.resume, progress=True)
    except (EngineError, ResultsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: the finished runs are in {out_dir}; --resume continues", file=sys.stderr)
        return 130
    statuses = table.column("status").to_pylist() if table.num_rows else []
    counts = {s: statuses.count(s) for s in ("pass", "fail", "error")}

    # --- report (mbs_ros.campaign.report): the summary printed, report.md and plots written -------------------
    if not args.no_report:
        from mbs_ros.campaign.report import summarize, write_report

        print(summarize(campaign, table))
        print(f"report: {write_report(campaign, table, out_dir)}")
    # ---------------------------------------------------------------------------------------------------------

    print(f"campaign {campaign.name}: {len(statuses)} runs: {counts['pass']} pass, {counts['fail']} fail, "
          f"{counts['error']} error; results: {out_dir}")
    return 0 if counts["pass"] == len(statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
