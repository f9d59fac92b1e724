"""The numba decorator of every compiled kernel, with its fallback.

``jit(fn)`` compiles ``fn`` in nopython mode, cached on disk (``cache=True``), numpy's error model, no bounds
checks; where numba is missing it returns ``fn`` unchanged (plain Python, same results). :data:`AVAILABLE` is
False without numba or with ``MBS_BACKEND=numpy`` in the environment: then the models use the numpy reference.

The on-disk cache is shared by every process that imports the kernels (the nodes, the tests' workers, a
campaign's), and numba's own writes are not safe between processes (numba/numba#4807, #10128): two processes
that save two new signatures of one kernel at once both read the index, both take the same free data file, and
the index's last writer need not be the data's, so a later process loads one signature's machine code for the
other and crashes (SIGSEGV). :class:`_LockedCacheFile` takes an advisory lock (``flock``) on one file per cache
directory around numba's save (index and data, exclusive) and load (shared), which makes each save whole.
"""
from __future__ import annotations

import contextlib
import os

try:  # numba is a runtime dependency, but a distro without it still gets the numpy reference
    import numba as _nb
    from numba.core import caching as _caching

    AVAILABLE = os.environ.get("MBS_BACKEND", "") != "numpy"
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _nb = None
    _caching = None
    AVAILABLE = False

try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - not POSIX: numba's own (unlocked) cache
    _fcntl = None

__all__ = ["AVAILABLE", "LOCK_NAME", "jit"]

#: The lock file in each numba cache directory (``__pycache__`` beside the kernels, or numba's user-wide one).
LOCK_NAME = "mbs_ros_numba.lock"


@contextlib.contextmanager
def _locked(directory: str, mode: int):
    """Hold ``flock(mode)`` on the directory's lock file; where it cannot be opened or locked (no such directory
    yet, a read-only one, a file system without locks), go on unlocked, as numba itself would."""
    try:
        fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        try:
            _fcntl.flock(fd, mode)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


if _caching is not None and _fcntl is not None:
    class _LockedCacheFile(_caching.IndexDataCacheFile):
        """numba's index and data files, each save (index read, free name, index and data written) under an
        exclusive lock and each load (index, then data) under a shared one."""

        def save(self, key, data):
            with _locked(self._cache_path, _fcntl.LOCK_EX):
                super().save(key, data)

        def load(self, key):
            with _locked(self._cache_path, _fcntl.LOCK_SH):
                return super().load(key)
else:  # pragma: no cover
    _LockedCacheFile = None


def jit(fn):
    """``fn`` compiled by numba (nopython, cached with :class:`_LockedCacheFile`), or ``fn`` itself without
    numba."""
    if _nb is None:
        return fn
    dispatcher = _nb.njit(cache=True, fastmath=False, error_model="numpy", boundscheck=False)(fn)
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if _LockedCacheFile is not None and type(cache_file) is _caching.IndexDataCacheFile:
        cache_file.__class__ = _LockedCacheFile  # same state, locked save and load
    return dispatcher
