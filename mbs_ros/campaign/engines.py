"""Run a campaign's runs on all local cores or on a Ray cluster, writing each row as it finishes.

:func:`run_campaign` calls ``task(campaign, index)`` (by default :func:`mbs_ros.campaign.execute.execute_run`) once
per run index not already done and stores the rows (:mod:`mbs_ros.campaign.results`). A row depends only on the
campaign and its index (the seed is per run index, never per worker), so every engine and worker count gives the
same table apart from ``wall_s``.

- ``engine="local"``: a ``concurrent.futures.ProcessPoolExecutor`` ("spawn" context: no forked copy of the caller's
  threads or DDS state), one task per run, at most ``workers`` in flight (default: the cores this process may use).
- ``engine="ray"``: ``ray.remote(max_retries=1)`` tasks collected with ``ray.wait``; Ray schedules. ``address``
  joins a running cluster; without it an instance already started in this process is used, else a local
  ``ray.init(num_cpus=workers)`` that is shut down at the end. Ray is imported here only (optional dependency).

A worker that dies (kill -9, the out-of-memory killer) loses only its run, which is tried once more; a second death
makes an "error" row ("worker died (signal 9)"). Locally, a dead worker breaks the whole pool, so the runs that were
in flight are each tried again alone in a fresh process (which tells the culprit from its neighbours; the first
death is charged only to runs that had started) and the pool is rebuilt; on Ray, the task's own ``max_retries``
retries it. A task that raises gives an "error" row with the exception. Ctrl-C stops the workers at once and
keeps the finished rows (``resume=True`` continues).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import math
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter, deque
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Optional

from mbs_ros.campaign.results import ResultsStore
from mbs_ros.process import limit_threads

__all__ = ["EngineError", "run_campaign", "ENGINES", "DEATHS_ALLOWED"]

ENGINES = ("local", "ray")
#: Deaths of a run's worker before the run is an "error" row: the first is retried, the second is final.
DEATHS_ALLOWED = 2
KILL_GRACE = 1.0  # s a killed worker is waited for
RAY_IN_FLIGHT = 4  # Ray tasks submitted ahead per CPU of the cluster


class EngineError(ValueError):
    """An engine that cannot run here (unknown name, Ray not installed, bad worker count)."""


def run_campaign(campaign, *, out_dir, engine: str = "local", workers: Optional[int] = None,
                 address: Optional[str] = None, resume: bool = False, progress: bool = True,
                 task: Optional[Callable] = None):
    """Run every run of ``campaign`` not already in ``out_dir`` (with ``resume``) and return the result table
    (``pyarrow.Table``, one row per run, sorted by run). ``task(campaign, index) -> row`` must be picklable by
    reference (a module-level function); None means :func:`mbs_ros.campaign.execute.execute_run`."""
    if engine not in ENGINES:
        raise EngineError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise EngineError(f"workers: expected a positive integer, got {workers!r}")
    if address is not None and engine != "ray":
        raise EngineError("address: only the ray engine joins a cluster (--engine ray)")
    check = None
    if task is None:
        from mbs_ros.campaign.execute import execute_run as task, row_check

        check = row_check(campaign)
    ray = _import_ray() if engine == "ray" else None
    store = ResultsStore(out_dir, getattr(campaign, "source", None), resume=resume, check=check)
    done = store.done
    todo = _Pending(i for i in range(int(campaign.runs)) if i not in done)  # streamed: no list of every run
    left = int(campaign.runs) - sum(1 for i in done if 0 <= i < int(campaign.runs))
    counts = Counter(r.get("status") for i, r in store.rows.items() if i < campaign.runs)
    bar = _progress_bar(campaign, int(campaign.runs) - left, disable=not progress)

    def on_row(row: dict) -> None:
        store.add(row)
        counts[row.get("status")] += 1
        bar.set_postfix_str(f"{counts['pass']} pass, {counts['fail']} fail, {counts['error']} error", refresh=False)
        bar.update(1)

    try:
        if todo and engine == "local":
            _run_local(campaign, todo, min(workers or local_cores(), left), task, on_row)
        elif todo:
            _run_ray(ray, campaign, todo, workers, address, task, on_row)
    finally:
        bar.close()
        table = store.close()
    return table.filter(_below(table, campaign.runs)) if table.num_rows else table


class _Pending:
    """The run indices still to run, drawn from an iterator only when taken (a campaign of :data:`mbs_ros.campaign.spec.MAX_RUNS` never lists its runs up front)."""

    def __init__(self, indices: Iterable[int]):
        self._first: deque = deque()
        self._rest = iter(indices)

    def _fill(self) -> bool:
        if not self._first:
            nxt = next(self._rest, None)
            if nxt is None:
                return False
            self._first.append(nxt)
        return True

    def __bool__(self) -> bool:
        return self._fill()

    def popleft(self) -> int:
        if not self._fill():
            raise IndexError("no run left")
        return self._first.popleft()

    def __iter__(self):
        while self:
            yield self.popleft()


def local_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or taskset's share), else all."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def _below(table, runs: int):
    import pyarrow.compute as pc

    return pc.less(table["run"], runs)


def _progress_bar(campaign, done: int, *, disable: bool):
    from tqdm import tqdm

    return tqdm(total=int(campaign.runs), initial=done, desc=str(getattr(campaign, "name", "campaign")),
                unit="run", file=sys.stderr, disable=disable, dynamic_ncols=True)


def error_row(campaign, index: int, reason: str, wall_s: float = math.nan) -> dict:
    """The row of a run that gave no row of its own: status "error", its drawn parameters when the campaign can
    draw them (so the table shows what the run would have simulated)."""
    row = {"run": index, "status": "error", "reason": reason, "wall_s": wall_s}
    draw = getattr(campaign, "draw", None)
    if draw is not None:
        try:
            values = draw(index)
        except Exception:  # noqa: BLE001 - the row is an error already; the parameters are a courtesy
            values = {}
        for path, value in values.items():
            value = value.tolist() if hasattr(value, "tolist") else value
            row[f"param.{path}"] = json.dumps(value) if isinstance(value, (list, tuple, dict)) else value
    return row


def _checked(row, index: int) -> dict:
    if not isinstance(row, dict):
        raise TypeError(f"the task returned a {type(row).__name__}, not a row (dict)")
    row = dict(row)
    row["run"] = index
    return row


def _call(task, campaign, index):
    """One run in a worker: the row, or an "error" row when the task raises (with the exception's type and text)."""
    start = time.perf_counter()
    try:
        return _checked(task(campaign, index), index)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure of one run is that run's row
        return error_row(campaign, index, f"{type(e).__name__}: {e}", time.perf_counter() - start)




_STARTED = None  # in a pool worker: the queue on which each run announces that it starts


def _worker_init(started=None):
    """Each worker: Ctrl-C (sent to the whole terminal process group) is left to the parent, which stops the
    workers; one BLAS/OpenMP thread unless the environment says otherwise (one worker per core already, the
    kernels are small: more threads only contend; Ray's workers get OMP_NUM_THREADS=1 the same way)."""
    global _STARTED
    _STARTED = started
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_threads(1)


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL = 0.5  # s between two looks at the parent's pid (where the parent-death signal is not available)


def die_with_parent() -> None:
    """End this worker when the process that started it dies, even by SIGKILL (which runs no clean-up of the
    parent's): Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), plus a daemon thread that
    watches the parent's pid (any platform, and the case of a parent that died before the prctl). A worker left
    behind keeps ~200 MB and a core, and holds the resource tracker (which exits when its last client has)."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl: the watchdog alone
            pass
    if os.getppid() != parent or parent == 1:
        os._exit(1)

    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        os._exit(1)

    import threading

    threading.Thread(target=watch, name="die_with_parent", daemon=True).start()


def _pool_call(task, campaign, index):
    """One run in a pool worker, announced first, so that a broken pool tells the runs that had started (one of
    them killed the worker) from those only handed to the pool."""
    _STARTED.put(index)
    return _call(task, campaign, index)


# --- local engine ---------------------------------------------------------------------------------------------

def _run_local(campaign, todo: Iterable[int], workers: int, task, on_row) -> None:
    ctx = multiprocessing.get_context("spawn")
    pending, deaths = todo if isinstance(todo, _Pending) else _Pending(todo), Counter()
    while pending:
        suspects = _pool_pass(ctx, campaign, pending, workers, task, on_row)
        for index, started in suspects:  # each alone: a death there is its own
            deaths[index] += started  # a run that had started may be the one that broke the pool
            while True:
                row, reason, wall = _alone(ctx, campaign, index, task)
                if row is not None:
                    on_row(row)
                    break
                deaths[index] += 1
                if deaths[index] >= DEATHS_ALLOWED:
                    on_row(error_row(campaign, index, reason, wall))
                    break


def _pool_pass(ctx, campaign, pending: deque, workers: int, task, on_row) -> list:
    """Run ``pending`` in one pool until it is empty or a worker dies; returns the runs that were in flight when the
    pool broke as (index, started) pairs (one that had started may be the one whose worker died)."""
    others = set(multiprocessing.active_children())
    procs = set()
    queue = ctx.SimpleQueue()
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init, initargs=(queue,))
    in_flight, started, suspects = {}, set(), []

    def drain():  # also keeps the queue's pipe from filling up
        while not queue.empty():
            started.add(queue.get())

    try:
        while pending or in_flight:
            while pending and len(in_flight) < workers:
                index = pending.popleft()
                in_flight[pool.submit(_pool_call, task, campaign, index)] = index
                procs |= set(multiprocessing.active_children()) - others
            done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
            drain()
            broken = False
            for future in done:
                index = in_flight.pop(future)
                try:
                    row = future.result()
                except BrokenProcessPool:
                    broken = True
                    suspects.append(index)
                    continue
                except Exception as e:  # noqa: BLE001 - the task or its row failed to cross to or from the worker
                    row = error_row(campaign, index, f"{type(e).__name__}: {e}")
                started.discard(index)
                on_row(row)
            if broken:
                suspects += list(in_flight.values())
                in_flight.clear()
                return [(i, i in started) for i in sorted(suspects)]
        return []
    finally:
        if in_flight or suspects:
            _stop(procs)
        pool.shutdown(wait=not (in_flight or suspects), cancel_futures=True)
        queue.close()


def _stop(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(KILL_GRACE)


def _alone_main(conn, task, campaign, index) -> None:
    _worker_init()
    conn.send(_call(task, campaign, index))
    conn.close()


def _alone(ctx, campaign, index: int, task):
    """One run in a fresh process of its own: (row, None, wall) or, when the process died, (None, reason, wall)."""
    start = time.perf_counter()
    receive, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_alone_main, args=(send, task, campaign, index), daemon=True)
    p.start()
    send.close()
    try:
        try:
            row = receive.recv()
        except EOFError:
            row = None
        p.join()
    finally:
        if p.is_alive():
            _stop([p])
        receive.close()
    wall = time.perf_counter() - start
    if row is not None:
        return row, None, wall
    code = p.exitcode
    return None, (f"worker died (signal {-code})" if code is not None and code < 0
                  else f"worker died (exit code {code})"), wall


# --- Ray engine -----------------------------------------------------------------------------------------------

def _import_ray():
    try:
        import ray
    except ImportError:
        raise EngineError("the ray engine needs Ray, which is not installed here: pip install ray "
                          "(make setup installs it)") from None
    return ray


def _ray_call(task, campaign, index):
    return _call(task, campaign, index)


def _run_ray(ray, campaign, todo, workers: Optional[int], address: Optional[str], task, on_row) -> None:
    started = False
    if not ray.is_initialized():  # else: the instance this process joined already (address or not)
        options = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
        if address is None:
            options["num_cpus"] = workers
        ray.init(address=address, **options)
        started = True
    remote = ray.remote(max_retries=1)(_ray_call)
    refs = {}
    try:
        campaign_ref, task_ref = ray.put(campaign), ray.put(task)
        window = RAY_IN_FLIGHT * max(1, int(ray.cluster_resources().get("CPU", 1)))
        todo, pending = iter(todo), []
        while True:
            for index in todo:  # at most `window` tasks submitted ahead: no table of every run up front
                ref = remote.remote(task_ref, campaign_ref, index)
                refs[ref] = index
                pending.append(ref)
                if len(pending) >= window:
                    break
            if not pending:
                break
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
            for ref in ready:
                on_row(_ray_row(ray, campaign, ref, refs.pop(ref)))
    except BaseException:
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - finished or already gone
                pass
        raise
    finally:
        if started:
            ray.shutdown()


def _ray_row(ray, campaign, ref, index: int) -> dict:
    try:
        return ray.get(ref)
    except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError) as e:
        return error_row(campaign, index, f"worker died ({type(e).__name__})")
    except ray.exceptions.RayError as e:
        return error_row(campaign, index, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
