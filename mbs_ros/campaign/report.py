"""A campaign's results read back: the summary (pass rate with its Wilson 95 % interval, each metric's
distribution, the worst runs of every criterion), the report (report.md + plots/*.png: ECDF and histogram per
metric, each criterion's metric against each varied parameter) and the one-line command that replays a run over
ROS in lockstep with a recording and plots.

The input is the results table of :func:`mbs_ros.campaign.engines.run_campaign` (one row per run: ``run``,
``status``, ``reason``, ``wall_s``, ``param.<path>``, ``metric.<name>``), so a report can be redrawn from
results.parquet alone. Wilson interval: E. B. Wilson, "Probable inference, the law of succession, and statistical
inference", J. Am. Stat. Assoc. 22 (1927) 209-212.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.process import format_parameter_value

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval
WORST = 5                # worst runs listed per criterion
PARAM, METRIC = "param.", "metric."
_OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
REPLAY_DIR = "out/replay"
DPI = 90                 # the plots' resolution


def wilson_interval(passed: int, n: int, z: float = Z95) -> Tuple[float, float]:
    """The Wilson score interval of a binomial proportion ``passed / n`` (Wilson 1927); (0, 1) for n = 0.
    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n passes."""
    if n <= 0:
        return 0.0, 1.0
    p = passed / n
    d = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class MetricStats:
    """One metric over the runs that computed it (NaN values counted apart)."""
    name: str
    count: int
    missing: int
    min: float
    median: float
    p95: float
    max: float


@dataclass(frozen=True)
class WorstRun:
    """A run among the worst of a criterion: its value of the criterion's metric and its drawn parameters."""
    run: int
    metric: str
    value: float
    holds: bool
    params: Mapping[str, object]


@dataclass(frozen=True)
class CriterionStats:
    """How one criterion fared: the runs failing it (a NaN value fails) and the worst runs, worst first."""
    text: str
    metric: str
    op: str
    threshold: float
    columns: Tuple[str, ...]
    failed_runs: Tuple[int, ...]
    worst: Tuple[WorstRun, ...]


@dataclass(frozen=True)
class Summary:
    """The campaign's results in numbers; ``str(summary)`` is the text the CLI prints."""
    campaign: str
    runs: int
    passed: int
    failed: int
    errors: int
    pass_rate: float
    pass_interval: Tuple[float, float]
    metrics: Dict[str, MetricStats]
    criteria: Tuple[CriterionStats, ...]
    other_failures: Tuple[Tuple[int, str, str], ...] = field(default=())  # (run, status, reason): no criterion's
    wall_s_total: float = 0.0

    def __str__(self) -> str:
        return "\n".join(summary_lines(self))


# ------------------------------------------------------------------------------------------------ reading

def _columns(table) -> Dict[str, list]:
    """The table as {column: python list} (pyarrow Table or a mapping of columns)."""
    if hasattr(table, "column_names"):
        return {name: table.column(name).to_pylist() for name in table.column_names}
    return {k: list(v) for k, v in dict(table).items()}


def _float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def param_value(value):
    """A ``param.<path>`` cell as the value drawn: vectors are stored as JSON text, scalars as themselves."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def criterion_columns(criterion, columns: Sequence[str]) -> Tuple[str, ...]:
    """The metric columns a criterion judges: ``metric.<name>``, or with several robots every
    ``metric.<namespace>/<name>``."""
    exact = METRIC + criterion.metric
    if exact in columns:
        return (exact,)
    return tuple(c for c in columns if c.startswith(METRIC) and c.endswith("/" + criterion.metric))


def holds(op: str, value: float, threshold: float) -> bool:
    """``value op threshold``; a NaN (metric not computed) never holds."""
    return not math.isnan(value) and bool(_OPS[op](value, threshold))


def _badness(op: str, value: float) -> float:
    """A key sorting the worst first: the largest for an upper bound, the smallest for a lower one, NaN first."""
    if math.isnan(value):
        return math.inf
    return value if op in ("<", "<=") else -value


# ------------------------------------------------------------------------------------------------ summary

def percentile(values, p: float) -> float:
    """The ``p``-th percentile by linear interpolation between order statistics (numpy's default), where an
    infinite value (a settling time never reached) counts as the largest: a rank between a finite value and inf is
    inf, not NaN."""
    a = np.sort(np.asarray(values, dtype=float))
    h = (a.size - 1) * p / 100.0
    i = int(math.floor(h))
    f = h - i
    if f == 0.0 or i + 1 >= a.size:
        return float(a[i])
    lo, hi = float(a[i]), float(a[i + 1])
    if math.isinf(lo) or math.isinf(hi):
        return hi if math.isinf(hi) else lo
    return lo + f * (hi - lo)


def summarize(campaign, table) -> Summary:
    """Pass rate (Wilson 95 % interval), per metric min/median/p95/max (linear-interpolated percentile, NaN left
    out and counted), and per criterion the failing runs and the :data:`WORST` worst runs with their parameters."""
    cols = _columns(table)
    runs = [int(r) for r in cols.get("run", [])]
    status = [str(s) for s in cols.get("status", [])]
    n = len(runs)
    passed = sum(s == "pass" for s in status)
    errors = sum(s == "error" for s in status)
    params = [c for c in cols if c.startswith(PARAM)]
    metrics = {}
    for c in cols:
        if not c.startswith(METRIC):
            continue
        x = np.array([_float(v) for v in cols[c]], dtype=float)
        ok = x[~np.isnan(x)]
        name = c[len(METRIC):]
        if ok.size:
            metrics[name] = MetricStats(name, int(ok.size), int(n - ok.size), float(ok.min()),
                                        percentile(ok, 50), percentile(ok, 95), float(ok.max()))
        else:
            metrics[name] = MetricStats(name, 0, n, math.nan, math.nan, math.nan, math.nan)
    criteria, judged = [], set()
    for cr in getattr(campaign, "criteria", ()):
        ccols = criterion_columns(cr, list(cols))
        entries = []
        for i, r in enumerate(runs):
            if status[i] == "error":
                continue
            for c in ccols:
                v = _float(cols[c][i])
                ok = cr.holds(v) if hasattr(cr, "holds") and not math.isnan(v) else holds(cr.op, v, float(cr.value))
                entries.append(WorstRun(r, c[len(METRIC):], v, ok,
                                        {p[len(PARAM):]: param_value(cols[p][i]) for p in params}))
        failed = tuple(sorted({e.run for e in entries if not e.holds}))
        judged.update(failed)
        entries.sort(key=lambda e: (-_badness(cr.op, e.value), e.run))
        seen, worst = set(), []
        for e in entries:
            if e.run not in seen:
                seen.add(e.run)
                worst.append(e)
        criteria.append(CriterionStats(cr.text, cr.metric, cr.op, float(cr.value), ccols, failed,
                                       tuple(worst[:WORST])))
    other = tuple((r, s, str(cols.get("reason", [""] * n)[i])) for i, (r, s) in enumerate(zip(runs, status))
                  if s != "pass" and r not in judged)
    wall = float(np.nansum([_float(v) for v in cols.get("wall_s", [])])) if n else 0.0
    return Summary(campaign=str(getattr(campaign, "name", "")), runs=n, passed=passed, failed=n - passed - errors,
                   errors=errors, pass_rate=passed / n if n else math.nan, pass_interval=wilson_interval(passed, n),
                   metrics=metrics, criteria=tuple(criteria), other_failures=other, wall_s_total=wall)


def _g(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.4g}"


def _short(value) -> str:
    """A parameter for reading (4 significant digits; the replay command carries the exact value)."""
    if isinstance(value, float):
        return _g(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return yaml_flow(value)


def _params_text(params: Mapping[str, object]) -> str:
    return ", ".join(f"{k} = {_short(v)}" for k, v in params.items())


def summary_lines(s: Summary) -> List[str]:
    """The summary as text lines (what the CLI prints and report.md starts with)."""
    lo, hi = s.pass_interval
    rate = "no runs" if not s.runs else f"{100 * s.pass_rate:.1f} % (Wilson 95 %: {100 * lo:.1f} - {100 * hi:.1f} %)"
    out = [f"campaign {s.campaign}: {s.runs} runs, {s.passed} pass, {s.failed} fail, {s.errors} error; pass rate "
           f"{rate}; {s.wall_s_total:.1f} s of run time"]
    if s.metrics:
        width = max(len(m) for m in s.metrics)
        out.append(f"{'metric':<{width}}  {'min':>10} {'median':>10} {'p95':>10} {'max':>10}  missing")
        for m in s.metrics.values():
            out.append(f"{m.name:<{width}}  {_g(m.min):>10} {_g(m.median):>10} {_g(m.p95):>10} {_g(m.max):>10}  "
                       f"{m.missing}")
    for c in s.criteria:
        judged = s.runs - s.errors
        if not c.failed_runs:  # no "worst" runs of a criterion every run meets: they would read as failures
            out.append(f"criterion {c.text}: met in all {judged} runs")
            continue
        out.append(f"criterion {c.text}: failed in {len(c.failed_runs)} of {judged} runs; worst:")
        for w in c.worst:
            out.append(f"  run {w.run}: {w.metric} = {_g(w.value)} ({'holds' if w.holds else 'FAILS'}); "
                       f"{_params_text(w.params)}")
    for run, status, reason in s.other_failures:
        out.append(f"run {run}: {status}: {reason}")
    return out


# ------------------------------------------------------------------------------------------------ replay

def yaml_flow(value) -> str:
    """A value as YAML flow text that reads back to the same value: floats by ``repr`` (the shortest text that
    round-trips, so a replay draws bit-identical parameters), lists as ``[a, b]``, texts JSON-quoted."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if value is None:
        return "null"
    if isinstance(value, (bool, int, float)):
        # a ROS parameter's text: floats by repr with a dot in the mantissa (Python's repr signs the exponent),
        # which PyYAML (YAML 1.1) needs to read them back as floats
        return format_parameter_value(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_flow(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {yaml_flow(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def _scenario_argument(campaign) -> str:
    """The scenario as the runner takes it: a name as is; a file relative to the working directory when inside it,
    else absolute (the campaign resolved it beside its own file)."""
    text = str(campaign.scenario)
    p = Path(text)
    if not (p.suffix or os.sep in text or "/" in text):
        return text
    if not p.is_absolute() and getattr(campaign, "source", None) is not None:
        beside = Path(campaign.source).parent / p
        if beside.exists():
            p = beside
    p = p.resolve()
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def replay_command(campaign, row: Mapping[str, object], *, out: str = REPLAY_DIR) -> str:
    """The one shell line that replays run ``row["run"]`` over ROS: lockstep on simulation time as fast as it
    computes (what the headless run reproduces bit for bit), every drawn parameter as ``--set 'PATH=VALUE'``,
    recorded into ``out/<name>_run<i>.mcap`` and plotted into ``out/<name>_run<i>``."""
    run = int(row["run"])
    stem = f"{out}/{campaign.name}_run{run}"
    args = ["python", "-m", "mbs_ros.bringup", _scenario_argument(campaign),
            "--set", "lockstep=true", "--set", "sim_time=true", "--set", "real_time_factor=0"]
    for key in sorted(k for k in row if k.startswith(PARAM)):
        args += ["--set", f"{key[len(PARAM):]}={yaml_flow(param_value(row[key]))}"]
    if getattr(campaign, "duration", None) is not None:
        args += ["--duration", repr(float(campaign.duration))]
    args += ["--record", f"{stem}.mcap", "--plot", stem]
    return shlex.join(args)


def table_rows(table) -> List[Dict[str, object]]:
    """The table's rows as dicts, sorted by run."""
    cols = _columns(table)
    n = len(next(iter(cols.values()), []))
    return sorted(({c: cols[c][i] for c in cols} for i in range(n)), key=lambda r: int(r["run"]))


# ------------------------------------------------------------------------------------------------ report

def file_stem(name: str) -> str:
    """A metric or parameter name as a stable file-name part: ``robots[0].dynamics.mass_scale`` ->
    ``robots_0_dynamics_mass_scale``, ``uvms/max_joint_error`` -> ``uvms_max_joint_error``."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_-]", "_", name)).strip("_") or "x"


def _param_series(values: list) -> List[Tuple[str, np.ndarray, Optional[List[str]]]]:
    """A parameter column as plottable series: [(suffix, x, category labels or None)]; a vector gives one series
    per component (``[i]``), texts become categories."""
    vals = [param_value(v) for v in values]
    if vals and all(isinstance(v, (list, tuple)) for v in vals):
        size = max(len(v) for v in vals)
        return [(f"[{k}]", np.array([_float(v[k]) if k < len(v) else math.nan for v in vals]), None)
                for k in range(size)]
    if all(isinstance(v, (bool, int, float, np.generic)) or v is None for v in vals):
        return [("", np.array([_float(v) for v in vals]), None)]
    labels = sorted({json.dumps(v) if not isinstance(v, str) else v for v in vals})
    index = {lab: i for i, lab in enumerate(labels)}
    return [("", np.array([index[json.dumps(v) if not isinstance(v, str) else v] for v in vals], float), labels)]


def _varied(series):
    """The series whose values differ between runs: a vector's entries held at one value (``uniform`` with
    low = high, such as the other links of a ``link_mass_scales`` with one drawn) and a one-value grid are left
    out."""
    return [s for s in series if len({float(v) for v in s[1] if np.isfinite(v)}) > 1]


def _readable_ticks(ax) -> None:
    """Tick labels in scientific notation outside [1e-3, 1e4] (a metric of 1e-4 m would print as 0.000100)."""
    for axis in ("x", "y"):
        try:
            ax.ticklabel_format(axis=axis, style="sci", scilimits=(-3, 4), useOffset=False)
        except AttributeError:  # a categorical axis
            pass


def _grid(n: int) -> Tuple[int, int]:
    """(rows, columns) of ``n`` panels: one row up to 3, else about square, columns first (9 -> 3 x 3, 6 -> 2 x 3,
    7 -> 3 x 3)."""
    if n <= 3:
        return 1, n
    cols = math.ceil(math.sqrt(n))
    return math.ceil(n / cols), cols


def _keep(fig, path: Path, figures: Optional[Dict[str, object]]) -> None:
    """Save ``fig`` at the resolution it was laid out at (the title fits as measured); hand it to ``figures`` (by
    file name, left open) or close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=DPI)
    if figures is not None:
        figures[path.name] = fig
    else:
        plt.close(fig)


def _fit_title(fig, title, head: str, tail: str):
    """Keep ``title`` (the figure's or an axes' title, a Text) inside the figure and clear of a figure legend
    beside the panels: ``head tail`` on one line if it fits either side of its centre, else on two (``head``,
    ``tail``), and if even so too wide, the figure widened to fit it. A long title ran off both edges and under the
    legend (uvms_grasp_robustness: 'carried_distance vs robots[0].dynamics.object_mass_scale' over one panel, and
    'ECDF of time_to_carry (20 runs, 14 infinite)')."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    renderer = fig.canvas.get_renderer()

    def overflow() -> float:  # how far [px] the title's half-width exceeds the room either side of its centre
        if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
            fig.tight_layout()
        fig.draw_without_rendering()
        box = title.get_window_extent(renderer)
        centre = 0.5 * (box.x0 + box.x1)
        legend = max((g.get_window_extent(renderer).width for g in fig.legends), default=0.0)
        room = min(centre, fig.bbox.width - legend - centre) - 0.15 * fig.dpi  # 0.15 in from the edge, the legend
        return 0.5 * box.width - room

    for text in (f"{head} {tail}", f"{head}\n{tail}"):
        title.set_text(text)
        over = overflow()
        if over <= 0.0:
            return title
    w, h = fig.get_size_inches()
    fig.set_size_inches(w + 2.0 * over / fig.dpi, h)  # the title's centre moves by half the added width
    overflow()
    return title


def write_report(campaign, table, out_dir, figures: Optional[Dict[str, object]] = None) -> Path:
    """report.md in ``out_dir`` with the summary, the worst runs' replay commands and the plots it links, written
    into ``out_dir/plots``: ``<metric>_ecdf.png`` (threshold of each criterion on it as a vertical line),
    ``<metric>_hist.png``, and ``<metric>_vs_<param>.png`` per criterion metric and varied parameter (runs failing
    the criterion in red; a vector parameter one panel per component in a grid, the legend beside it). Returns
    the report's path. ``figures``: filled with file name -> Figure (then left open, for tests to read)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir = Path(out_dir)
    plots = out_dir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    s = summarize(campaign, table)
    cols = _columns(table)
    status = [str(x) for x in cols.get("status", [])]
    params = [c for c in cols if c.startswith(PARAM)]
    thresholds: Dict[str, list] = {}
    for c in s.criteria:
        for col in c.columns:
            thresholds.setdefault(col, []).append(c)
    lines = [f"# Campaign {s.campaign}", ""]
    source = getattr(campaign, "source", None)
    lines += [f"Scenario `{campaign.scenario}`, {getattr(campaign, 'runs', s.runs)} runs, seed "
              f"{getattr(campaign, 'seed', '')}" + (f", campaign file `{source}`" if source else "") + ".", "",
              "```", *summary_lines(s), "```", ""]
    made: List[Tuple[str, List[str]]] = []
    for col in [c for c in cols if c.startswith(METRIC)]:
        name = col[len(METRIC):]
        x = np.array([_float(v) for v in cols[col]])
        valued = int(np.sum(~np.isnan(x)))
        ok = np.sort(x[np.isfinite(x)])  # plotted; an infinite value (never settled) only lowers the ECDF's top
        stem = file_stem(name)
        files = []
        if ok.size:
            fig, ax = plt.subplots(figsize=(6, 4), dpi=DPI)
            ax.step(np.concatenate([[ok[0]], ok]), np.arange(ok.size + 1) / valued, where="post")
            for c in thresholds.get(col, []):
                ax.axvline(c.threshold, color="red", linestyle="--", label=c.text)
            ax.set_xlabel(name)
            ax.set_ylabel("fraction of runs ≤ x")
            ax.set_ylim(0, 1.02)
            beyond = f", {valued - ok.size} infinite" if valued > ok.size else ""
            _readable_ticks(ax)
            if thresholds.get(col):
                ax.legend(loc="lower right")
            ax.grid(alpha=0.3)
            _fit_title(fig, ax.set_title(""), f"{s.campaign}: ECDF of {name}", f"({valued} runs{beyond})")
            _keep(fig, plots / f"{stem}_ecdf.png", figures)
            fig, ax = plt.subplots(figsize=(6, 4), dpi=DPI)
            ax.hist(ok, bins=max(5, min(40, int(np.sqrt(ok.size)) * 2)))
            for c in thresholds.get(col, []):
                ax.axvline(c.threshold, color="red", linestyle="--", label=c.text)
            ax.set_xlabel(name)
            ax.set_ylabel("runs")
            _readable_ticks(ax)
            _fit_title(fig, ax.set_title(""), f"{s.campaign}:", f"histogram of {name}")
            _keep(fig, plots / f"{stem}_hist.png", figures)
            files += [f"plots/{stem}_ecdf.png", f"plots/{stem}_hist.png"]
        for c in thresholds.get(col, []):
            fails = np.array([not holds(c.op, v, c.threshold) for v in x])
            for p in params:
                pname = p[len(PARAM):]
                fname = f"{stem}_vs_{file_stem(pname)}.png"
                if f"plots/{fname}" in files:
                    continue
                series = _varied(_param_series(cols[p]))
                if not series:  # the same value in every run: nothing to plot against
                    continue
                rows_, cols_ = _grid(len(series))
                fig, axes = plt.subplots(rows_, cols_, figsize=(3.4 * cols_ + 2.2, 2.9 * rows_ + 0.8),
                                         squeeze=False, sharey=True, layout="constrained", dpi=DPI)
                for ax in axes.flat[len(series):]:
                    ax.set_visible(False)
                for k, (ax, (suffix, px, labels)) in enumerate(zip(axes.flat, series)):
                    nan = ~np.isfinite(x)
                    failed_other = np.array([st != "pass" for st in status]) & ~fails & ~nan
                    good = ~fails & ~failed_other & ~nan
                    ax.scatter(px[good], x[good], s=14, color="tab:blue", label="pass")
                    ax.scatter(px[failed_other], x[failed_other], s=14, color="tab:orange", label="fails another")
                    ax.scatter(px[fails & ~nan], x[fails & ~nan], s=18, color="red", label=f"fails {c.text}")
                    if np.any(fails & nan):  # no value or inf (a fault, never settled): a cross on the threshold
                        ax.scatter(px[fails & nan], np.full(int(np.sum(fails & nan)), c.threshold), s=30,
                                   color="red", marker="x", label="no finite value")
                    ax.axhline(c.threshold, color="red", linestyle="--", linewidth=0.8)
                    # a vector: the component as the x label, the parameter's name once in the title
                    ax.set_xlabel(suffix if len(series) > 1 else pname, fontsize=8)
                    if labels:
                        ax.set_xticks(range(len(labels)), labels, rotation=30, fontsize=7)
                    else:  # at most 5 numbers under a panel: 9 of '-0.0075' ran into each other (object_offset)
                        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
                    if k % cols_ == 0:
                        ax.set_ylabel(name, fontsize=8)
                    ax.tick_params(labelsize=7)
                    _readable_ticks(ax)
                    ax.grid(alpha=0.3)
                handles, texts = axes[0][0].get_legend_handles_labels()
                fig.legend(handles, texts, loc="outside right upper", fontsize=7)
                _fit_title(fig, fig.suptitle("", fontsize=10), f"{s.campaign}: {name}",
                           f"vs {pname}" + (" (one panel per component)" if len(series) > 1 else ""))
                _keep(fig, plots / fname, figures)
                files.append(f"plots/{fname}")
        made.append((name, files))
    lines += ["## Plots", ""]
    for name, files in made:
        lines.append(f"### {name}")
        lines.append("")
        lines += [f"![{Path(f).stem}]({f})" for f in files] or ["(not computed in any run)"]
        lines.append("")
    rows = {int(r["run"]): r for r in table_rows(table)}
    failing = sorted(r for r, st in zip(cols.get("run", []), status) if st != "pass")
    if failing:
        lines += ["## Replaying the failed runs", "",
                  "Each line replays its run over ROS in lockstep (bit-identical to the campaign's headless run), "
                  "records it into an MCAP file (Foxglove, RViz) and plots it.", ""]
        for r in failing:
            row = rows[int(r)]
            lines += [f"- run {r} ({row.get('status')}: {row.get('reason', '')})", "",
                      f"  ```\n  {replay_command(campaign, row)}\n  ```", ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
