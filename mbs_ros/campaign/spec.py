"""Campaign files: a scenario, how many runs, a seed, what varies, the metrics and the pass/fail criteria.

:func:`load_campaign` reads and checks a campaign YAML file (every error a :class:`CampaignError` naming the file
and the key, e.g. ``config/campaigns/x.yaml: vary[2].uniform[0]: must be a number, got 'a'``);
:meth:`Campaign.draw` gives run ``index``'s scenario overrides, a pure function of the seed and the index
(``numpy.random.default_rng([seed, index])``, O'Neill 2014, PCG64 seeded by SeedSequence), so the same campaign
draws the same values in any order, on any worker and engine. The schema: docs/campaigns.md. ROS-free.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple, Union

import numpy as np

from mbs_ros import yamlschema
from mbs_ros.yamlfile import YamlFileError, is_name, read_yaml, shown

__all__ = ["CampaignError", "Campaign", "Variation", "MetricSpec", "Criterion", "load_campaign", "DISTRIBUTIONS",
           "BUILTIN_METRICS", "SIGNALS", "OPERATORS", "MAX_RUNS", "MAX_DRAW", "MAX_MAGNITUDE", "MAX_INTEGER"]

#: The most runs a campaign file may ask for. A row costs a headless run of about a second (the shortest useful
#: scenario) and ~1 kB on disk and in the parent's table, so 100 000 runs are a day on 2 cores and ~100 MB: beyond
#: that a campaign is split into files (different seeds). ``runs: 1000000000`` used to drive the parent out of
#: memory before anything was printed.
MAX_RUNS = 100_000
#: The most numbers one run's draw may hold (the sum of every variation's ``size``, a grid's or a choice's values
#: counted by their numbers): a scenario takes a few hundred settings at most.
MAX_DRAW = 10_000
#: The largest magnitude of a distribution's bound: ``high - low`` and a normal draw ``mean + 40 std`` stay finite
#: (``uniform: [-1.7e308, 1.7e308]`` overflowed numpy's ``high - low``).
MAX_MAGNITUDE = 1e300
#: The bounds of an ``integers`` distribution: numpy draws int64, and ``high - low + 1`` must fit.
MAX_INTEGER = 2 ** 62

#: distribution -> what its value in the file is
DISTRIBUTIONS = {
    "uniform": "[low, high], low < high (numbers, or lists of size numbers: an entry with low = high is held)",
    "normal": "{mean, std}, std >= 0 (numbers, or lists of size numbers)",
    "log_uniform": "[low, high], 0 < low < high (numbers, or lists of size numbers)",
    "integers": "[low, high], whole numbers, low <= high (both included)",
    "choice": "a non-empty list of values, each equally likely",
    "grid": "a non-empty list of values, run i takes the (i mod n)-th combination of all grids",
}
#: the signals an error metric is computed on (docs/campaigns.md, Metrics)
SIGNALS = ("base_position", "base_attitude", "joint")
#: built-in metric -> the parameters it takes (name -> default); ``signal`` None: base_position for a floating
#: base, joint for a fixed one
BUILTIN_METRICS: Dict[str, Dict[str, object]] = {
    **{f"{stat}_{sig}_error": {} for stat in ("final", "max", "rms") for sig in SIGNALS},
    "settling_time": {"band": None, "signal": None},
    "overshoot": {"signal": None},
    "saturation_fraction": {},
    "energy_residual": {},
    "faults": {},
    # contact (docs/campaigns.md, Contact metrics): a legged base that stays up, an object grasped and carried
    **{k: {"min_height": None, "max_tilt": 0.5, "after": 0.0} for k in ("stays_up", "fell")},
    **{f"{stat}_base_height_error": {"after": 0.0, "reference": "reference"} for stat in ("final", "max")},
    "max_base_tilt": {"after": 0.0},
    "object_lifted": {"object": 0},
    "object_dropped": {"object": 0, "lift": 0.02, "near": 0.01, "before": None},
    "object_tilt": {"object": 0, "after": 0.0, "axis": None},
    "carried_distance": {"object": 0},
    "time_to_carry": {"object": 0, "target": None, "tolerance": 0.05},
    "grasp_success": {"object": 0, "lift": 0.02},
}
#: the contact metrics' parameters: name -> (what it is, its check); required ones have the default None above
HEIGHT_REFERENCES = ("reference", "rest")
_CONTACT_PARAMS = {
    "min_height": "m", "max_tilt": "rad > 0", "after": "s >= 0", "lift": "m > 0", "near": "m > 0", "before": "s > 0",
    "tolerance": "m > 0", "object": "index >= 0", "target": "[x, y, z] m", "reference": "reference | rest",
    "axis": "[x, y, z] in the object's frame, not zero",
}
_REQUIRED = {"stays_up": ("min_height",), "fell": ("min_height",), "time_to_carry": ("target",)}
OPERATORS = ("<=", ">=", "<", ">")
_VARY_KEYS = ("path", "size", "scale") + tuple(DISTRIBUTIONS)
_TOP_KEYS = ("name", "description", "scenario", "runs", "seed", "duration", "vary", "metrics", "criteria",
             "python_path")
_CRITERION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_./]*)\s*(<=|>=|<|>)\s*(\S+)\s*$")
_PYTHON = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class CampaignError(yamlschema.SchemaError):
    """A campaign file that cannot be run: ``file`` and ``key`` (``vary[2].uniform``) name where, the message (one
    line) says why; errors of the file itself (YAML syntax) carry ``line`` and ``column`` instead of a key."""


@dataclass(frozen=True)
class Variation:
    """One varied setting: ``path`` (a scenario path, :func:`mbs_ros.scenario.schema.apply_overrides`),
    ``distribution`` (:data:`DISTRIBUTIONS`), ``params`` (its checked arguments: ``low``/``high``, ``mean``/``std``,
    ``values``), ``size`` (None: one value; n: a list of n draws), ``scale`` (the draw multiplies the scenario's
    value ``base``)."""

    path: str
    distribution: str
    params: Mapping[str, object]
    size: Optional[int] = None
    scale: bool = False
    base: object = None


@dataclass(frozen=True)
class MetricSpec:
    """A metric to compute: ``name`` (its column, ``metric.<name>``), ``kind`` (a built-in name or ``python``),
    ``params`` (``band``, ``signal``; ``function`` ``pkg.module:func`` for python)."""

    name: str
    kind: str
    params: Mapping[str, object]


@dataclass(frozen=True)
class Criterion:
    """``metric op value`` (``max_joint_error < 0.2``); ``text`` as written. A run passes it when the metric (of
    every robot, for a bare name in a scenario of several) satisfies it; NaN never does."""

    metric: str
    op: str
    value: float
    text: str

    def holds(self, x: float) -> bool:
        x = float(x)
        return {"<": x < self.value, "<=": x <= self.value, ">": x > self.value, ">=": x >= self.value}[self.op]

    def failure(self, name: str, x: float) -> str:
        """Why ``x`` fails: ``max_joint_error = 0.31 >= 0.2``."""
        negated = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[self.op]
        if math.isnan(float(x)):
            return f"{name} = nan (not computed)"
        return f"{name} = {float(x):.4g} {negated} {self.value:g}"


@dataclass(frozen=True)
class Campaign:
    name: str
    source: Path
    scenario: str  # a name in config/scenarios, or an absolute path
    runs: int
    seed: int
    duration: Optional[float] = None
    vary: Tuple[Variation, ...] = ()
    metrics: Tuple[MetricSpec, ...] = ()
    criteria: Tuple[Criterion, ...] = ()
    description: str = ""
    python_path: Tuple[str, ...] = ()  # directories a python metric is imported from (before the installed ones)

    @property
    def grid_points(self) -> int:
        """The number of combinations of the grid variations (1 without any)."""
        return math.prod(len(v.params["values"]) for v in self.vary if v.distribution == "grid")

    def draw(self, index: int) -> Dict[str, object]:
        """Run ``index``'s overrides ``{path: value}``: a pure function of ``seed`` and ``index``. Random variations
        draw in file order from ``default_rng([seed, index])``; the grids take the ``(index mod grid_points)``-th
        combination, the last grid varying fastest (as itertools.product). Values are Python floats, ints or
        lists of them (a choice's values as written); with ``scale`` the scenario's value times the draw."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
            raise ValueError(f"a run index is a whole number >= 0, got {index!r}")
        rng = np.random.default_rng([int(self.seed), int(index)])
        combo = int(index) % self.grid_points
        grids = [v for v in self.vary if v.distribution == "grid"]
        picks = {}
        for v in reversed(grids):
            n = len(v.params["values"])
            picks[id(v)], combo = combo % n, combo // n
        out: Dict[str, object] = {}
        for v in self.vary:
            value = v.params["values"][picks[id(v)]] if v.distribution == "grid" else _sample(rng, v)
            out[v.path] = _scaled(v.base, value) if v.scale else value
        return out


def _sample(rng: np.random.Generator, v: Variation):
    p, n = v.params, v.size
    shape = None if n is None else (n,)
    if v.distribution == "uniform":
        x = rng.uniform(p["low"], p["high"], shape)
    elif v.distribution == "normal":
        x = rng.normal(p["mean"], p["std"], shape)
    elif v.distribution == "log_uniform":
        x = np.exp(rng.uniform(np.log(np.asarray(p["low"])), np.log(np.asarray(p["high"])), shape))
    elif v.distribution == "integers":
        x = rng.integers(p["low"], p["high"], size=shape, endpoint=True)
    else:  # choice
        values = p["values"]
        picks = rng.integers(0, len(values), size=shape)
        return values[int(picks)] if n is None else [values[int(i)] for i in picks]
    return np.asarray(x).tolist()


def _scaled(base, factor):
    """``base * factor`` elementwise (a number or a list; either may be the scalar)."""
    b, f = np.asarray(base, dtype=float), np.asarray(factor, dtype=float)
    return (b * f).tolist()


# ------------------------------------------------------------------------------------------ loading


class _Reader(yamlschema.Reader):
    """The schema reader (:class:`mbs_ros.yamlschema.Reader`) raising :class:`CampaignError`."""

    def __init__(self, path: Path):
        super().__init__(path, error=CampaignError)

    def values(self, value, key: str, size: Optional[int], positive: bool = False):
        """A number, or a list of ``size`` numbers (size given), each of magnitude <= :data:`MAX_MAGNITUDE`."""
        if isinstance(value, (list, tuple)):
            if size is None:
                self.fail(key, f"a list of {len(value)} numbers needs 'size: {len(value)}' (a vector of draws)")
            if len(value) != size:
                self.fail(key, f"must have {size} entries (size), got {len(value)}")
            return tuple(self.bounded(x, f"{key}[{i}]", positive) for i, x in enumerate(value))
        return self.bounded(value, key, positive)

    def bounded(self, value, key: str, positive: bool = False) -> float:
        x = self.number(value, key, 0.0 if positive else -MAX_MAGNITUDE, positive, MAX_MAGNITUDE)
        if x < -MAX_MAGNITUDE:
            self.fail(key, f"must be >= {-MAX_MAGNITUDE:g} (draws beyond would overflow), got {x:g}")
        return x


def _join(key: str, sub) -> str:
    return f"{key}.{sub}" if key else str(sub)


def load_campaign(path: Union[str, os.PathLike]) -> Campaign:
    """Read and check a campaign file (schema in docs/campaigns.md); :class:`CampaignError` naming file and key."""
    path = Path(os.path.expanduser(str(path)))
    if not path.is_file():
        found = Path(__file__).resolve().parents[2] / "config" / "campaigns" / path.name
        for candidate in (found, found.with_suffix(".yaml")):
            if not path.is_absolute() and candidate.is_file():
                path = candidate
                break
        else:
            raise CampaignError(path, "", "campaign file not found")
    path = path.resolve()
    r = _Reader(path)
    try:
        doc = read_yaml(path)
    except YamlFileError as e:
        raise CampaignError(path, "", e.reason, e.line, e.column) from None
    doc = r.mapping(doc, "", _TOP_KEYS)
    for need in ("scenario", "runs", "seed"):
        if need not in doc:
            r.fail(need, "missing")
    scenario = _scenario(r, doc["scenario"])
    runs = r.whole(doc["runs"], "runs", 1)
    if runs > MAX_RUNS:
        r.fail("runs", f"must be <= {MAX_RUNS} (a day of runs on 2 cores; split a larger campaign into files with "
                       f"other seeds), got {runs}")
    seed = r.whole(doc["seed"], "seed", 0)
    duration = None if doc.get("duration") is None else r.number(doc["duration"], "duration", 0.0, True, 1e9)
    name = r.text(doc.get("name", path.stem), "name")
    if not is_name(name) or "/" in name:
        r.fail("name", f"must be a name (letters, digits, '_.-'; it names the output directory), got {shown(name)}")
    description = doc.get("description") or ""
    if not isinstance(description, str):
        r.fail("description", f"must be text, got {shown(description)}")
    vary = _vary(r, doc.get("vary") or [], scenario)
    metrics = _metrics(r, doc.get("metrics") or [])
    criteria = _criteria(r, doc.get("criteria") or [], metrics)
    python_path = _python_path(r, doc.get("python_path"), path)
    grid = 1
    for i, v in enumerate(vary):  # Python ints: numpy's product of many grids would wrap around
        if v.distribution == "grid":
            grid *= len(v.params["values"])
            if grid > runs:
                r.fail(f"vary[{i}].grid", f"the grids have more combinations than the {runs} runs")
    c = Campaign(name=name, source=path, scenario=scenario, runs=runs, seed=seed, duration=duration, vary=vary,
                 metrics=metrics, criteria=criteria, description=description.strip(), python_path=python_path)
    if grid > 1 and runs % grid:
        r.fail("runs", f"{runs} is not a multiple of the {grid} grid combinations (run i takes combination i mod "
                       f"{grid}: every combination would not be run equally often)")
    _check_paths(r, c)
    return c


def _python_path(r: _Reader, value, path: Path) -> Tuple[str, ...]:
    """``python_path``: the directories (relative to the campaign file) a python metric may be imported from;
    nothing else but the installed packages (never the working directory, unless listed: '.')."""
    if value is None:
        return ()
    out = []
    for i, item in enumerate(r.sequence(value, "python_path", "directories")):
        text = r.text(item, f"python_path[{i}]")
        folder = (path.parent / os.path.expanduser(text)).resolve()
        if not folder.is_dir():
            r.fail(f"python_path[{i}]", f"not a directory (relative to the campaign file): {shown(text)}")
        out.append(str(folder))
    return tuple(out)


def _scenario(r: _Reader, value) -> str:
    from mbs_ros.scenario.schema import scenario_path

    text = r.text(value, "scenario")
    beside = r.path.parent / os.path.expanduser(text)
    if beside.is_file():
        return str(beside.resolve())
    try:
        found = scenario_path(text)
    except FileNotFoundError as e:
        r.fail("scenario", f"{e} (nor beside the campaign file)")
    return text if Path(text).name == text and not Path(text).is_file() else str(found)


def _vary(r: _Reader, raw, scenario: str) -> Tuple[Variation, ...]:
    from mbs_ros.scenario.schema import ScenarioError, document_value, parse_path

    if not isinstance(raw, list):
        r.fail("vary", f"must be a list of variations, got {shown(raw)}")
    out, seen, total = [], set(), 0
    for i, item in enumerate(raw):
        key = f"vary[{i}]"
        item = r.mapping(item, key, _VARY_KEYS)
        if "path" not in item:
            r.fail(_join(key, "path"), "missing (the scenario setting to vary, e.g. robots[0].dynamics.mass_scale)")
        vpath = r.text(item["path"], _join(key, "path"))
        try:
            parse_path(Path(scenario), vpath)
        except ScenarioError as e:
            r.fail(_join(key, "path"), e.reason)
        if vpath in seen:
            r.fail(_join(key, "path"), f"{vpath} is varied twice")
        seen.add(vpath)
        kinds = [k for k in DISTRIBUTIONS if k in item]
        if len(kinds) != 1:
            r.fail(key, "needs exactly one distribution: " + ", ".join(DISTRIBUTIONS)
                   + (f" (got {', '.join(kinds)})" if kinds else ""))
        kind = kinds[0]
        size = None if item.get("size") is None else r.whole(item["size"], _join(key, "size"), 1)
        if size is not None and size > MAX_DRAW:
            r.fail(_join(key, "size"), f"must be <= {MAX_DRAW} (the most numbers one run draws), got {size}")
        scale = item.get("scale", False)
        if not isinstance(scale, bool):
            r.fail(_join(key, "scale"), f"must be true or false, got {shown(scale)}")
        params = _distribution(r, kind, item[kind], _join(key, kind), size)
        if kind == "grid" and size is not None:
            r.fail(_join(key, "size"), "a grid lists its values (a value may be a list); size does not apply")
        base = None
        if scale:
            if kind in ("choice", "grid") and not all(_numeric(x) for x in params["values"]):
                r.fail(_join(key, "scale"), "scales by numbers: every value must be a number or a list of numbers")
            try:
                base = document_value(scenario, vpath)
            except ScenarioError as e:
                r.fail(_join(key, "scale"), f"nothing to scale: {e.reason}")
            if not _numeric(base):
                r.fail(_join(key, "scale"), f"the scenario's {vpath} is not a number or a list of numbers")
        out.append(Variation(vpath, kind, params, size, scale, base))
        total += (size or 1) if kind not in ("choice", "grid") else max(_count(x) for x in params["values"])
        if total > MAX_DRAW:
            r.fail(key, f"the variations draw more than {MAX_DRAW} numbers per run (sizes and values summed)")
    return tuple(out)


def _numeric(x) -> bool:
    if isinstance(x, (list, tuple)):
        return bool(x) and all(_numeric(v) for v in x if not isinstance(v, (list, tuple)))
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def _distribution(r: _Reader, kind: str, value, key: str, size: Optional[int]) -> dict:
    if kind in ("uniform", "log_uniform", "integers"):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            r.fail(key, f"must be [low, high], got {shown(value)}")
        if kind == "integers":
            lo, hi = (r.whole(v, f"{key}[{j}]", -MAX_INTEGER) for j, v in enumerate(value))
            for j, v in enumerate((lo, hi)):
                if v > MAX_INTEGER:
                    r.fail(f"{key}[{j}]", f"must be <= 2**62 (numpy draws 64-bit integers), got an integer of "
                                          f"{len(str(v))} digits")
        else:
            lo, hi = (r.values(v, f"{key}[{j}]", size, positive=kind == "log_uniform") for j, v in enumerate(value))
        if kind == "integers" and lo > hi:
            r.fail(key, f"low ({lo}) must be <= high ({hi})")
        if kind != "integers" and size is None and not lo < hi:
            r.fail(key, "low must be < high")
        if kind != "integers" and size is not None and not (np.all(np.asarray(lo) <= np.asarray(hi))
                                                            and np.any(np.asarray(lo) < np.asarray(hi))):
            r.fail(key, "low must be <= high in every entry and < high in one at least (an entry with low = high "
                        "is held there)")
        return {"low": lo, "high": hi}
    if kind == "normal":
        m = r.mapping(value, key, ("mean", "std"))
        for need in ("mean", "std"):
            if need not in m:
                r.fail(_join(key, need), "missing")
        mean = r.values(m["mean"], _join(key, "mean"), size)
        std = r.values(m["std"], _join(key, "std"), size)
        if np.any(np.asarray(std) < 0):
            r.fail(_join(key, "std"), "must be >= 0")
        if np.any(np.asarray(std) > MAX_MAGNITUDE / 100):
            r.fail(_join(key, "std"), f"must be <= {MAX_MAGNITUDE / 100:g} (a draw mean + 40 std stays finite)")
        return {"mean": mean, "std": std}
    if not isinstance(value, (list, tuple)) or not value:
        r.fail(key, f"must be a non-empty list of values, got {shown(value)}")
    if _count(value) > MAX_DRAW:
        r.fail(key, f"more than {MAX_DRAW} values (numbers counted in lists): a run's draw is bounded")
    return {"values": tuple(value)}


def _count(value) -> int:
    """The numbers (leaves) in a value: 1 for a scalar, the sum over a list's entries."""
    if isinstance(value, (list, tuple)):
        return sum(_count(v) for v in value)
    if isinstance(value, Mapping):
        return sum(_count(v) for v in value.values())
    return 1


def _metrics(r: _Reader, raw) -> Tuple[MetricSpec, ...]:
    if not isinstance(raw, list):
        r.fail("metrics", f"must be a list of metrics, got {shown(raw)}")
    out, names = [], set()
    for i, item in enumerate(raw):
        key = f"metrics[{i}]"
        if isinstance(item, str):
            kind, params = item, {}
        elif isinstance(item, Mapping) and "python" in item:
            r.mapping(item, key, ("python", "name"))
            func = r.text(item["python"], _join(key, "python"))
            if not _PYTHON.match(func):
                r.fail(_join(key, "python"), f"must be 'package.module:function', got {shown(func)}")
            name = r.text(item.get("name", func.split(":")[1]), _join(key, "name"))
            kind, params = "python", {"function": func, "name": name}
        elif isinstance(item, Mapping) and len(item) == 1:
            kind, params = next(iter(item.items()))
            _known_metric(r, kind, key)
            params = {} if params is None else r.mapping(params, _join(key, shown(kind)),
                                                         tuple(BUILTIN_METRICS.get(kind, {})) + ("name",))
        else:
            r.fail(key, f"must be a metric name, {{name: {{params}}}} or {{python: 'pkg.module:function'}}, got "
                        f"{shown(item)}")
        if kind != "python":
            _known_metric(r, kind, key)
            params = _metric_params(r, kind, params, _join(key, kind))
        name = params.pop("name", kind) if kind != "python" else params["name"]
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(name)):
            r.fail(_join(key, "name"), f"must be letters, digits and '_', got {shown(name)}")
        if name in names:
            r.fail(key, f"metric {name!r} is listed twice (give one a name: ...)")
        names.add(name)
        out.append(MetricSpec(name, kind, params))
    return tuple(out)


def _known_metric(r: _Reader, kind, key: str) -> None:
    if kind not in BUILTIN_METRICS:
        close = difflib.get_close_matches(str(kind), list(BUILTIN_METRICS), n=1)
        r.fail(key, f"unknown metric {shown(kind)}" + (f" (did you mean {close[0]!r}?)" if close else
                                                      f" (known: {', '.join(BUILTIN_METRICS)}, or python)"))


def _metric_params(r: _Reader, kind: str, params: dict, key: str) -> dict:
    out = dict(params)
    if "signal" in BUILTIN_METRICS[kind] and out.get("signal") is not None and out["signal"] not in SIGNALS:
        r.fail(_join(key, "signal"), f"must be one of {', '.join(SIGNALS)}, got {shown(out['signal'])}")
    if kind == "settling_time":
        if "band" not in out:
            r.fail(_join(key, "band"), "missing (the error band to settle into, in the signal's unit)")
        out["band"] = r.number(out["band"], _join(key, "band"), 0.0, True)
    for k in _REQUIRED.get(kind, ()):
        if out.get(k) is None:
            r.fail(_join(key, k), f"missing ({_CONTACT_PARAMS[k]})")
    for k in [k for k in out if k in _CONTACT_PARAMS and out[k] is not None]:
        out[k] = _contact_param(r, k, out[k], _join(key, k))
    for k, default in BUILTIN_METRICS[kind].items():
        out.setdefault(k, default)
    return out


def _contact_param(r: _Reader, k: str, value, key: str):
    """A contact metric's parameter checked (:data:`_CONTACT_PARAMS`)."""
    if k == "object":
        return r.whole(value, key, 0)
    if k == "target":
        return r.vector(value, key, 3, "numbers: x, y, z in metres")
    if k == "axis":
        axis = r.vector(value, key, 3, "numbers: x, y, z of a direction in the object's frame")
        if not any(float(a) != 0.0 for a in axis):
            r.fail(key, "must not be zero (the direction whose tilt is measured)")
        return axis
    if k == "reference":
        return r.choice(value, key, HEIGHT_REFERENCES)
    if k in ("min_height",):
        return r.number(value, key)
    if k == "after":
        return r.number(value, key, 0.0)
    return r.number(value, key, 0.0, True)


def _criteria(r: _Reader, raw, metrics: Tuple[MetricSpec, ...]) -> Tuple[Criterion, ...]:
    if not isinstance(raw, list):
        r.fail("criteria", f"must be a list of criteria ('metric < value'), got {shown(raw)}")
    names = {m.name for m in metrics}
    python = {m.name for m in metrics if m.kind == "python"}
    out = []
    for i, text in enumerate(raw):
        key = f"criteria[{i}]"
        if not isinstance(text, str):
            r.fail(key, f"must be text 'metric op value' (op one of {', '.join(OPERATORS)}), got {shown(text)}")
        m = _CRITERION.match(text)
        if m is None:
            r.fail(key, f"must read 'metric op value' (op one of {', '.join(OPERATORS)}), e.g. "
                        f"'max_joint_error < 0.2'; got {shown(text)}")
        metric, op, value = m.groups()
        bare = metric.split("/")[-1]
        if bare not in names and bare.split(".")[0] not in python:
            close = difflib.get_close_matches(bare, sorted(names), n=1)
            r.fail(key, f"metric {shown(metric)} is not listed under metrics"
                        + (f" (did you mean {close[0]!r}?)" if close else f" (listed: {', '.join(sorted(names))})"
                           if names else " (none listed)"))
        try:
            number = float(value)
        except ValueError:
            r.fail(key, f"the value must be a number, got {shown(value)}")
        if math.isnan(number):
            r.fail(key, "the value must be a number, got nan")
        out.append(Criterion(metric, op, number, text.strip()))
    return tuple(out)


def _check_paths(r: _Reader, c: Campaign) -> None:
    """Every varied path names a setting of the scenario's schema (:func:`apply_overrides` on the file's
    document with run 0's values): a typo fails here, not in every run."""
    from mbs_ros.scenario.schema import ScenarioError, apply_overrides, scenario_path

    if not c.vary:
        return
    file = scenario_path(c.scenario)
    try:
        doc = read_yaml(file)
    except YamlFileError as e:
        r.fail("scenario", str(e))
    values = c.draw(0)
    for i, v in enumerate(c.vary):
        try:
            apply_overrides(file, doc if isinstance(doc, Mapping) else {}, {v.path: values[v.path]})
        except ScenarioError as e:
            r.fail(f"vary[{i}].path", e.reason)
