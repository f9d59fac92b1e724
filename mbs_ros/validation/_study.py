"""What every study of ``python -m mbs_ros.validation`` provides, and JSON/table helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


# The five papers the project implements ("seed 000" ... "seed 004" in comments and docstrings; README, "The
# papers"): the number -> (authors and short title, as --list prints them; the full title, for --help). Müller &
# Terze's is ASME IDETC 2013 paper DETC2013-12151; From's is "Part one: Single Rigid Bodies".
PAPERS = {
    "000": ("Lohmayer, Capobianco & Leyendecker, \"Exergetic Port-Hamiltonian Systems for Multibody Dynamics\"",
            "Exergetic Port-Hamiltonian Systems for Multibody Dynamics"),
    "001": ("Müller & Terze 2013, \"Optimal configuration space for Lie group integration of constrained MBS?\"",
            "Is there an optimal choice of configuration space for Lie group integration schemes applied to "
            "constrained MBS?"),
    "002": ("Alazard, Sanfedino & Kassarian, \"Non-linear dynamics of multibody systems\" (TITOP)",
            "Non-linear dynamics of multibody systems: a system-based approach"),
    "003": ("Massa & Vignolo, \"Newton–Euler, Lagrange and Kirchhoff formulations of rigid body dynamics\"",
            "Newton–Euler, Lagrange and Kirchhoff formulations of rigid body dynamics: a unified approach"),
    "004": ("From, \"Singularity-free dynamic equations of mechanical systems in Lagrangian form\"",
            "An Explicit Formulation of Singularity-Free Dynamic Equations of Mechanical Systems in Lagrangian "
            "Form—Part one: Single Rigid Bodies"),
}


def cite(seed: str, where: str = "") -> str:
    """The short citation of paper ``seed`` ("001"), with a section (``where``) when given."""
    return PAPERS[seed][0] + (f", {where}" if where else "")


def reference(seed: str) -> str:
    """The paper's authors and full title, for --help."""
    short, title = PAPERS[seed]
    authors = short.split(' "')[0].rstrip(",")
    return f'{authors}: "{title}"'


@dataclass(frozen=True)
class Study:
    """``add_arguments(parser)`` adds the study's options, ``run(args) -> dict`` computes its metrics (plain JSON
    types), ``report(result) -> str`` formats them as a table. ``description`` is the ``--help`` text: what is
    computed, the metric keys, the paper, and the assumptions for values the paper leaves out. ``summary`` says
    in words what the study does; ``papers`` are the numbers of the papers it reproduces (keys of PAPERS) and
    ``where`` the section of the first, for --list."""

    name: str
    summary: str
    description: str
    add_arguments: Callable
    run: Callable
    report: Callable
    papers: tuple = ()
    where: str = ""


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
