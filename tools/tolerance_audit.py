"""A pytest plugin that audits the suite's numerical tolerances while the tests run (issue 27's audit).

    python -m pytest -p tools.tolerance_audit [pytest args]       # writes tolerance_audit.json (MBS_TOLERANCE_AUDIT)

It wraps numpy.testing.assert_allclose, numpy.allclose/isclose, math.isclose and pytest.approx's scalar comparison
and records, for every call site in test/ (file:line of the test code that compared), over all its calls:

- ``calls``; ``margin``: the smallest ``tolerance / error`` of any element that was not exactly equal (a margin of
  10 means a result ten times further off would have failed);
- ``fragile``: calls in which some element's whole tolerance (absolute + relative part) was below what rounding at
  the quantity's scale can give, ``64 eps max(|actual|, |desired|)`` over the compared array: a relative tolerance
  on a value that is zero (or tiny beside its neighbours) with no absolute floor. Such a comparison passes on one
  machine and fails on another whose BLAS, CPU or library version rounds differently;
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


def _site():
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(_TESTS):
            return f"{os.path.relpath(name, _ROOT)}:{f.f_lineno}"
        f = f.f_back
    return None


def _record(kind, actual, desired, rtol, atol):
    if getattr(_busy, "on", False):
        return
    _busy.on = True
    try:
        site = _site()
        if site is None:
            return
        try:
            a = np.asarray(actual, dtype=float)
            d = np.asarray(desired, dtype=float)
            a, d = np.broadcast_arrays(a, d)
        except Exception:  # noqa: BLE001 - non-numeric comparisons are not audited
            return
        finite = np.isfinite(a) & np.isfinite(d)
        if not finite.any():
            return
        a, d = a[finite], d[finite]
        tol = atol + rtol * np.abs(d)
        err = np.abs(a - d)
        scale = float(max(np.max(np.abs(a)), np.max(np.abs(d))))
        off = err > 0
        margin = float(np.min(tol[off] / err[off])) if off.any() else math.inf
        floor = EPS_FACTOR * np.finfo(float).eps * scale
        weak = tol < floor
        with _lock:
            s = _sites.setdefault(site, {"kind": kind, "calls": 0, "margin": math.inf, "fragile": 0,
                                         "scale": 0.0, "example": None, "rtol": rtol, "atol": atol})
            s["calls"] += 1
            s["margin"] = min(s["margin"], margin)
            s["scale"] = max(s["scale"], scale)
            if weak.any():
                s["fragile"] += 1
                i = int(np.argmax(weak))
                if s["example"] is None:
                    s["example"] = {"desired": float(d[i]), "actual": float(a[i]), "tolerance": float(tol[i]),
                                    "scale": scale}
    finally:
        _busy.on = False


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

    def approx_eq(self, actual):
        # the tolerance pytest applies, max(abs, rel |expected|), recorded as an absolute one; the elements of a
        # sequence or array come here one by one, so their scale is their own (the margin shows the rest)
        try:
            if not isinstance(self.expected, complex) and not isinstance(actual, complex):
                _record("approx", actual, self.expected, 0.0, float(self.tolerance))
        except Exception:  # noqa: BLE001 - non-numeric
            pass
        return scalar_eq(self, actual)

    python_api.ApproxScalar.__eq__ = approx_eq


def pytest_unconfigure(config):
    path = os.environ.get("MBS_TOLERANCE_AUDIT", "tolerance_audit.json")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        root, ext = os.path.splitext(path)
        path = f"{root}.{worker}{ext}"
    with open(path, "w") as f:
        json.dump(_sites, f, indent=1, sort_keys=True, default=str)
