"""The compiled kernels' on-disk cache between processes (mbs_ros.dynamics.kernels.jit).

Two processes that save two new signatures of one kernel at once must not leave an index that points one
signature at the other's machine code (numba/numba#4807, #10128: a later process loads it and crashes; a test
run compiles new signatures in several processes at once). The race is forced here: both
processes read the index before either writes it, the first writes the index first and the data last. A third,
fresh process then calls both signatures from the cache.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from mbs_ros.dynamics.kernels import jit

pytestmark = pytest.mark.skipif(jit._nb is None or jit._fcntl is None, reason="numba or fcntl is not importable")

KERNEL = """
from mbs_ros.dynamics.kernels.jit import jit


@jit
def plus_one(x):
    return x + 1
"""

# child k of two: its own signature (k = 0: int64, k = 1: float64); numba's index and data writes are slowed so
# that, unlocked, the index's last writer is child 1 and the data's is child 0, both under the same file name
RACER = """
import pathlib, sys, time
import numpy as np
from numba.core import caching

k, d = int(sys.argv[1]), pathlib.Path(sys.argv[2])
save_index, save_data = caching.IndexDataCacheFile._save_index, caching.IndexDataCacheFile._save_data


def both_saving():
    (d / f"saving{k}").touch()
    t0 = time.monotonic()  # locked, the other cannot get here until this one is done: go on after a while
    while time.monotonic() - t0 < 3.0 and not all((d / f"saving{i}").exists() for i in range(2)):
        time.sleep(0.01)


def slow_index(self, overloads):
    both_saving()
    time.sleep(0.4 * k)
    save_index(self, overloads)


def slow_data(self, name, data):
    time.sleep(0.8 * (1 - k))
    save_data(self, name, data)


caching.IndexDataCacheFile._save_index, caching.IndexDataCacheFile._save_data = slow_index, slow_data
sys.path.insert(0, str(d))
import kern
print(repr(kern.plus_one([np.int64(3), 3.5][k])))
"""

CHECK = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import kern
print(repr(kern.plus_one(3.5)), repr(kern.plus_one(np.int64(3))), len(kern.plus_one.stats.cache_hits))
"""


def _run(tmp_path, code, *args):
    return subprocess.Popen([sys.executable, "-c", code, *args, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, NUMBA_CACHE_DIR=""))


@pytest.mark.e2e
def test_two_processes_saving_two_signatures_at_once_leave_a_cache_that_loads_both(tmp_path):
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL))
    racers = [_run(tmp_path, RACER, str(k)) for k in range(2)]
    outs = [p.communicate(timeout=120) for p in racers]
    assert [p.returncode for p in racers] == [0, 0], outs
    assert [o.strip() for o, _ in outs] == ["4", "4.5"], outs
    caches = sorted(p.name for p in (tmp_path / "__pycache__").iterdir() if p.suffix in (".nbi", ".nbc"))
    assert len(caches) == 3, caches  # the index and one data file per signature
    check = _run(tmp_path, CHECK)
    out, err = check.communicate(timeout=120)
    assert check.returncode == 0, (check.returncode, err[-2000:])
    assert out.split() == ["4.5", "4", "2"], (out, err[-2000:])  # both right, both from the cache


def test_every_kernel_saves_and_loads_under_the_lock():
    from mbs_ros.dynamics.kernels import step
    from mbs_ros.dynamics.contact import solver
    kernels = [f for m in (step, solver) for f in vars(m).values() if hasattr(f, "_cache")]
    assert len(kernels) > 10
    assert all(type(f._cache._cache_file) is jit._LockedCacheFile for f in kernels)


def test_a_cache_directory_that_cannot_be_locked_is_used_unlocked(tmp_path, monkeypatch):
    """No lock file (no such directory) or no lock (flock refused, e.g. a file system without locks): numba's
    own save and load go on, as they would without the lock."""
    seen = []
    with jit._locked(str(tmp_path / "missing"), jit._fcntl.LOCK_EX):
        seen.append("no directory")

    def refused(fd, mode):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(jit._fcntl, "flock", refused)
    with jit._locked(str(tmp_path), jit._fcntl.LOCK_SH):
        seen.append("no lock")
    assert seen == ["no directory", "no lock"]
