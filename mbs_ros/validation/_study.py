"""What every study of ``python -m mbs_ros.validation`` provides, and JSON/table helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Study:
    """``add_arguments(parser)`` adds the study's options, ``run(args) -> dict`` computes its metrics (plain JSON
    types), ``report(result) -> str`` formats them as a table. ``description`` is the ``--help`` text: what is
    computed, the metric keys, the paper, and the assumptions for values the paper leaves out."""

    name: str
    summary: str
    description: str
    add_arguments: Callable
    run: Callable
    report: Callable


def jsonable(x):
    """Numpy scalars/arrays to Python, non-finite floats to None (JSON has no NaN/inf)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def fmt(x, spec: str = ".2e") -> str:
    if x is None:
        return "-"
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(x)
    if isinstance(x, (float, np.floating)):
        return format(float(x), spec) if math.isfinite(float(x)) else "inf"
    return str(x)


def table(header, rows) -> str:
    """Right-aligned columns, the first left-aligned."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for k, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def order_fit(dts, errors):
    """Slope of log(error) over log(dt), or None when an error is not positive and finite."""
    e = np.asarray(errors, dtype=float)
    if e.size < 2 or not np.all(np.isfinite(e)) or np.any(e <= 0):
        return None
    return float(np.polyfit(np.log(np.asarray(dts, dtype=float)), np.log(e), 1)[0])
