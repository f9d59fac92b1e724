"""The numba decorator of every compiled kernel, with its fallback.

``jit(fn)`` compiles ``fn`` in nopython mode, cached on disk (``cache=True``), numpy's error model, no bounds
checks; where numba is missing it returns ``fn`` unchanged (plain Python, same results). :data:`AVAILABLE` is
False without numba or with ``MBS_BACKEND=numpy`` in the environment: then the models use the numpy reference.
"""
from __future__ import annotations

import os

try:  # numba is a runtime dependency, but a distro without it still gets the numpy reference
    import numba as _nb

    AVAILABLE = os.environ.get("MBS_BACKEND", "") != "numpy"
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _nb = None
    AVAILABLE = False

__all__ = ["AVAILABLE", "jit"]


def jit(fn):
    """``fn`` compiled by numba (nopython, cached), or ``fn`` itself without numba."""
    if _nb is None:
        return fn
    return _nb.njit(cache=True, fastmath=False, error_model="numpy", boundscheck=False)(fn)
