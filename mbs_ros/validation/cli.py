"""``python -m mbs_ros.validation STUDY [options] [--json]``: the seed papers' studies, one command each.

``--list`` lists the studies, each with the paper it reproduces (``mbs_ros.validation._study.PAPERS``); ``python -m mbs_ros.validation STUDY --help`` documents a study: what it computes,
the metric keys of its ``--json`` output, and the assumptions made where the paper leaves a value out.
"""
from __future__ import annotations

import argparse
import json
import sys

from mbs_ros.validation._study import cite, jsonable, reference


def studies() -> dict:
    """{name: Study}, in the order of ``--list``."""
    from mbs_ros.validation import balloon, constrained, formulations, gimbal_lock, lqr_vs_ct, modes, rigid_body

    out = {s.name: s for s in constrained.STUDIES}
    for s in (formulations.STUDY, gimbal_lock.STUDY, balloon.STUDY, modes.STUDY, rigid_body.STUDY, lqr_vs_ct.STUDY):
        out[s.name] = s
    return out


def parser(registry: dict) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m mbs_ros.validation", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the studies and exit")
    sub = ap.add_subparsers(dest="study", metavar="STUDY")
    for name, s in registry.items():
        papers = "\n".join(reference(seed) for seed in s.papers)
        p = sub.add_parser(name, help=s.summary, description=s.description,
                           epilog=f"Paper{'s' if len(s.papers) > 1 else ''}:\n{papers}" if papers else None,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        s.add_arguments(p)
        p.add_argument("--json", action="store_true", help="print one JSON object of the metrics instead of a table")
    return ap


def main(argv=None) -> int:
    registry = studies()
    ap = parser(registry)
    args = ap.parse_args(argv)
    if args.list:
        for name, s in registry.items():
            print(f"{name:<16} {s.summary}")
            if s.papers:
                for i, seed in enumerate(s.papers):
                    print(f"{'':<16} {'after' if i == 0 else 'and'} {cite(seed, s.where if i == 0 else '')}")
        return 0
    if args.study is None:
        ap.print_help(sys.stderr)
        return 2
    study = registry[args.study]
    try:
        result = study.run(args)
    except RuntimeError as exc:  # e.g. a reference that needs a missing optional dependency
        print(f"{args.study}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(jsonable(result), indent=1, allow_nan=False))
    else:
        print(study.report(result))
    return 0
