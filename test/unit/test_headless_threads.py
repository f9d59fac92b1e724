"""``python -m mbs_ros.headless`` runs with one BLAS thread, as the dynamics node does, unless the environment
chooses otherwise (mbs_ros.headless.__main__.one_blas_thread; each case in its own process: the pools are
process-wide)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("threadpoolctl")

CODE = """
import numpy as np  # loaded first, as python -m mbs_ros.headless has it by then
from threadpoolctl import threadpool_info
from mbs_ros.headless.__main__ import one_blas_thread
one_blas_thread()
print(sorted({d['num_threads'] for d in threadpool_info() if d['user_api'] == 'blas'}))
"""


def _blas_threads(env_update):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                             "MKL_NUM_THREADS", "BLIS_NUM_THREADS")}
    env.update(env_update)
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-2000:]
    return eval(out.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_one_blas_thread_unless_the_environment_says():
    assert _blas_threads({}) in ([1], [])  # [] : a numpy without a BLAS threadpoolctl knows
    if _blas_threads({"OPENBLAS_NUM_THREADS": "2"}) != []:
        assert _blas_threads({"OPENBLAS_NUM_THREADS": "2"}) == [2]
