"""A pytest plugin that audits the suite's numerical tolerances while the tests run (issue 27's audit).

    python -m pytest -p tools.tolerance_audit [pytest args]       # writes tolerance_audit.json (MBS_TOLERANCE_AUDIT)

It wraps numpy.testing.assert_allclose, numpy.allclose/isclose, math.isclose and pytest.approx (a scalar, or a
sequence, array or mapping recorded whole) and records, for every call site in test/ (file:line of the test code that
compared; comparisons made inside the library are not recorded), over all its calls:

- ``calls``; ``margin``: the smallest ``tolerance / error`` of any element that was not exactly equal (a margin of
  10 means a result ten times further off would have failed);
- ``fragile``: calls in which some element's whole tolerance (absolute + relative part) was below what rounding at
  the quantity's scale can give, ``64 eps max(|actual|, |desired|)`` over the compared array: a relative tolerance
  on a value that is zero (or tiny beside its neighbours) with no absolute floor. Such a comparison passes on one
  machine and fails on another whose BLAS, CPU or library version rounds differently;
  ``fragile_small`` counts the calls where such an element was tiny beside the array's scale (a relative tolerance
  that met a zero: the case for an absolute floor); the other fragile calls have a tolerance at rounding level even
  at the largest element (ulp-tight on purpose, or a tiny atol on large values); ``fragile_inexact`` counts the calls
  where such an element was not exactly equal (passed, or failed, on a difference of rounding size);
- ``scale``: the largest magnitude compared, and an example of the fragile element (desired, actual).

Nothing here asserts: it only reports. The fragile sites are the ones to give an absolute floor derived from the
quantity's scale (docs/testing.md, "Tolerances").
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading

import numpy as np

EPS_FACTOR = 64.0  # rounding a few dozen operations deep at the quantity's scale
_sites: dict = {}
_lock = threading.Lock()
_busy = threading.local()
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TESTS = os.path.join(_ROOT, "test") + os.sep
_PYTEST = os.sep + "_pytest" + os.sep


def _site():
    """file:line of the test code that made this comparison, or None when the caller is not in test/: the library's own
    checks (mbs_ros calls np.allclose too) are not the suite's assertions. Frames of this module and of pytest's
    approx (whose containers compare through their base class) are looked through."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == __file__ or _PYTEST in f.f_code.co_filename):
        f = f.f_back
    if f is not None and f.f_code.co_filename.startswith(_TESTS):
        return f"{os.path.relpath(f.f_code.co_filename, _ROOT)}:{f.f_lineno}"
    return None


def _record(kind, actual, desired, rtol, atol, tol=None):
    """Record one comparison; ``tol`` (per element) when the tolerance is not ``atol + rtol |desired|``."""
    if getattr(_busy, "on", False):
        return
    _busy.on = True
    try:
        site = _site()
        if site is None:
            return
        try:
            a = np.asarray(actual)
            d = np.asarray(desired)
            dtype = complex if np.iscomplexobj(a) or np.iscomplexobj(d) else float
            a, d = np.broadcast_arrays(a.astype(dtype), d.astype(dtype))
            t = np.broadcast_to(np.asarray(tol, dtype=float), a.shape) if tol is not None else None
        except Exception:  # noqa: BLE001 - non-numeric comparisons are not audited
            return
        finite = np.isfinite(a) & np.isfinite(d)
        if not finite.any():
            return
        a, d = a[finite], d[finite]
        tol = t[finite] if t is not None else atol + rtol * np.abs(d)
        err = np.abs(a - d)
        scale = float(max(np.max(np.abs(a)), np.max(np.abs(d))))
        off = err > 0
        margin = float(np.min(tol[off] / err[off])) if off.any() else math.inf
        floor = EPS_FACTOR * np.finfo(float).eps * scale
        weak = tol < floor
        # a weak element whose own size would have carried the tolerance: the relative part met a value that is zero
        # or tiny beside the array's scale; otherwise the whole tolerance is at rounding level even for the largest
        # element (a deliberately ulp-tight comparison, or a tiny atol on large values)
        small = weak & (np.abs(d) < 1e-3 * scale)
        with _lock:
            s = _sites.setdefault(site, {"kind": kind, "calls": 0, "margin": math.inf, "fragile": 0,
                                         "fragile_small": 0, "fragile_inexact": 0, "scale": 0.0, "example": None,
                                         "rtol": rtol, "atol": atol})
            s["calls"] += 1
            s["margin"] = min(s["margin"], margin)
            s["scale"] = max(s["scale"], scale)
            if weak.any():
                s["fragile"] += 1
                s["fragile_small"] += int(small.any())
                s["fragile_inexact"] += int((weak & off).any())  # passed (or not) on a difference of rounding size
                i = int(np.argmax(weak & off)) if (weak & off).any() else int(np.argmax(weak))
                if s["example"] is None or (weak & off).any() and s["example"]["actual"] == s["example"]["desired"]:
                    s["example"] = {"desired": _num(d[i]), "actual": _num(a[i]), "tolerance": float(tol[i]),
                                    "scale": scale}
    finally:
        _busy.on = False


def _num(x):
    return float(x) if not np.iscomplexobj(x) else str(complex(x))


def _wrap_assert_allclose(orig):
    def assert_allclose(actual, desired, rtol=1e-07, atol=0, *args, **kwargs):
        _record("assert_allclose", actual, desired, rtol, atol)
        return orig(actual, desired, rtol, atol, *args, **kwargs)
    return assert_allclose


def _wrap_isclose(orig, kind):
    def isclose(a, b, rtol=1e-05, atol=1e-08, *args, **kwargs):
        _record(kind, a, b, rtol, atol)
        return orig(a, b, rtol, atol, *args, **kwargs)
    return isclose


def _wrap_math_isclose(orig):
    def isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0):
        _record("math.isclose", a, b, rel_tol, abs_tol)  # math's test is symmetric; close enough for the audit
        return orig(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    return isclose


def pytest_configure(config):
    import numpy.testing
    try:
        from _pytest import approx as python_api  # pytest >= 9
    except ImportError:
        from _pytest import python_api

    numpy.testing.assert_allclose = _wrap_assert_allclose(numpy.testing.assert_allclose)
    np.allclose = _wrap_isclose(np.allclose, "np.allclose")
    np.isclose = _wrap_isclose(np.isclose, "np.isclose")
    math.isclose = _wrap_math_isclose(math.isclose)

    scalar_eq = python_api.ApproxScalar.__eq__
    container_eq = python_api.Approx.__eq__  # what ApproxNumpy, ApproxSequenceLike and ApproxMapping compare with

    def approx_scalar_eq(self, actual):
        # the tolerance pytest applies, max(abs, rel |expected|), recorded per element
        try:
            _record("approx", actual, self.expected, self.rel, self.abs, tol=float(self.tolerance))
        except Exception:  # noqa: BLE001 - non-numeric
            pass
        return scalar_eq(self, actual)

    def approx_container_eq(self, actual):
        # a sequence, array or mapping is recorded whole (so an element's size is seen beside its neighbours'); its
        # elements' own comparisons (ApproxScalar.__eq__ above) are then not recorded again
        try:
            pairs = list(self._yield_comparisons(actual))
            tols = [float(self._approx_scalar(x).tolerance) for _, x in pairs]
            _record("approx", [a for a, _ in pairs], [x for _, x in pairs], self.rel, self.abs, tol=tols)
        except Exception:  # noqa: BLE001 - nested or non-numeric
            pass
        if getattr(_busy, "on", False):
            return container_eq(self, actual)
        _busy.on = True
        try:
            return container_eq(self, actual)
        finally:
            _busy.on = False

    python_api.ApproxScalar.__eq__ = approx_scalar_eq
    python_api.Approx.__eq__ = approx_container_eq


def pytest_unconfigure(config):
    path = os.environ.get("MBS_TOLERANCE_AUDIT", "tolerance_audit.json")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        root, ext = os.path.splitext(path)
        path = f"{root}.{worker}{ext}"
    with open(path, "w") as f:
        json.dump(_sites, f, indent=1, sort_keys=True, default=str)


# ------------------------------------------------------------------ static pass and report
#     python -m tools.tolerance_audit [audit.json ...]       # every call site in test/, with what the runs saw
#
# The runs only see the comparisons that executed (not skipped tests, not branches that did not run); the static pass
# lists every tolerance call in test/'s source with its tolerance as written, and joins the runs' records to it by
# line (a record's line lies inside the call's lines). A site without a record did not run in the given audits.

_FUNCS = {"assert_allclose": ("rtol", "atol", 1e-7, 0.0), "allclose": ("rtol", "atol", 1e-5, 1e-8),
          "isclose": ("rtol", "atol", 1e-5, 1e-8), "approx": ("rel", "abs", 1e-6, 1e-12)}


def static_sites(root=_ROOT):
    """Every tolerance call in test/: (path, its line, first and last line a record of it can carry, kind, rtol
    source, atol source)."""
    import ast
    sites = []
    for dirpath, _, files in os.walk(os.path.join(root, "test")):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            stmt_of = {}  # a call's innermost statement: pytest.approx compares on the assert's first line
            for stmt in ast.walk(tree):
                if isinstance(stmt, ast.stmt):
                    for child in ast.walk(stmt):
                        if isinstance(child, ast.Call) and (child not in stmt_of or stmt_of[child].lineno < stmt.lineno):
                            stmt_of[child] = stmt
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if fname not in _FUNCS:
                    continue
                prefix = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
                kind = {"assert_allclose": "assert_allclose", "approx": "approx"}.get(fname)
                if kind is None:
                    kind = "math.isclose" if prefix == "math" else f"np.{fname}"
                rname, aname, rdef, adef = _FUNCS[fname]
                if kind == "math.isclose":
                    rname, aname, rdef, adef = "rel_tol", "abs_tol", 1e-9, 0.0
                npos = 1 if kind == "approx" else 2  # positional tolerances follow the compared values
                tol = {rname: None, aname: None}
                for i, arg in enumerate(node.args[npos:npos + 2]):
                    tol[(rname, aname)[i]] = ast.unparse(arg)
                for kw in node.keywords:
                    if kw.arg in tol:
                        tol[kw.arg] = ast.unparse(kw.value)
                rtol = tol[rname] if tol[rname] is not None else f"{rdef:g} (default)"
                if kind == "approx" and tol[rname] is None and tol[aname] is not None:
                    rtol = "0 (abs given)"  # pytest.approx ignores its default rel when abs is given
                atol = tol[aname] if tol[aname] is not None else f"{adef:g} (default)"
                stmt = stmt_of.get(node, node)
                first = min(node.lineno, stmt.lineno) if kind == "approx" else node.lineno
                sites.append((os.path.relpath(path, root), node.lineno, first, node.end_lineno, kind, rtol, atol))
    return sorted(sites)


def main(argv):
    records = {}
    for path in argv:
        with open(path) as f:
            for site, rec in json.load(f).items():
                if site not in records:
                    records[site] = dict(rec)
                else:
                    r = records[site]
                    r["calls"] += rec["calls"]
                    for k in ("fragile", "fragile_small", "fragile_inexact"):
                        r[k] = r.get(k, 0) + rec.get(k, 0)
                    r["margin"] = min(float(r["margin"]), float(rec["margin"]))
                    r["scale"] = max(r["scale"], rec["scale"])
                    r["example"] = r["example"] or rec["example"]
    by_file = {}
    for site in records:
        path, line = site.rsplit(":", 1)
        by_file.setdefault(path, []).append(int(line))
    seen = set()
    for path, line, first, last, kind, rtol, atol in static_sites():
        hits = [f"{path}:{n}" for n in by_file.get(path, []) if first <= n <= last]
        seen.update(hits)
        rec = [records[h] for h in hits]
        calls = sum(r["calls"] for r in rec)
        fragile = "/".join(str(sum(r.get(k, 0) for r in rec)) for k in ("fragile", "fragile_small", "fragile_inexact"))
        margin = min((float(r["margin"]) for r in rec), default=math.nan)
        scale = max((r["scale"] for r in rec), default=math.nan)
        example = next((r["example"] for r in rec if r["example"]), None)
        ran = f"calls {calls} margin {margin:.3g} scale {scale:.3g} fragile/small/inexact {fragile}" if rec else "NOT RUN"
        print(f"{path}:{line}\t{kind}\trtol={rtol}\tatol={atol}\t{ran}" + (f"\t{example}" if example else ""))
    for site in sorted(set(records) - seen):  # comparisons made in test/ code outside a visible call (e.g. a helper)
        r = records[site]
        fragile = "/".join(str(r.get(k, 0)) for k in ("fragile", "fragile_small", "fragile_inexact"))
        print(f"{site}\t{r['kind']}\t(recorded only)\tcalls {r['calls']} margin {float(r['margin']):.3g} "
              f"scale {r['scale']:.3g} fragile/small/inexact {fragile}" + (f"\t{r['example']}" if r["example"] else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
