"""Work longer than a callback may take, done in pieces (ROS-free): a node's publications after a step, and a
contact step itself.

A :class:`WorkQueue` holds jobs, each an iterator that does one piece of work (one message published) per
``next()``; :meth:`WorkQueue.run` runs pieces in order until the queue is empty or a wall-clock deadline has passed,
so a callback that runs it holds its node at most until the deadline plus one piece. The dynamics node queues what
it publishes after the controller's inputs (docs/dynamics_node.md, "Publication in pieces") and steps on only once
its queue is empty: every queued piece reads the state it was queued for.

:class:`Slices` runs a function that may stop at its checkpoints (a contact step's solve, between the solver's
compiled slices: ``ContactWorld.checkpoint``) once a deadline has passed, and goes on from there when run again
later: the callback returns, the node serves its other callbacks, a later callback resumes the same computation
(a greenlet: the function's frames are kept as they are, so the numbers are those of one uninterrupted call).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable, Iterable, Iterator, Optional

try:  # a runtime dependency; without it a computation runs to its end in one call (no checkpoint stops it)
    import greenlet
except ImportError:  # pragma: no cover - exercised by test_work_queue with greenlet hidden
    greenlet = None

__all__ = ["WorkQueue", "single", "whole", "Slices"]


def single(fn: Callable[[], object]) -> Iterator[None]:
    """A job of one piece: ``fn()``."""
    fn()
    yield


def whole(job: Iterable) -> None:
    """Every piece of ``job`` at once."""
    for _ in job:
        pass


class WorkQueue:
    """Jobs (iterators) run piece by piece, first in first out."""

    def __init__(self):
        self._jobs: deque = deque()

    def add(self, job: Iterable) -> None:
        self._jobs.append(iter(job))

    def pending(self) -> bool:
        return bool(self._jobs)

    def clear(self) -> None:
        """Drop every job (a reset: the state they were queued for is gone)."""
        self._jobs.clear()

    def run(self, deadline_ns: Optional[int] = None) -> bool:
        """Pieces in order until the queue is empty (True) or ``time.monotonic_ns()`` is past ``deadline_ns``
        before a piece (False; None: no deadline). A job whose piece raises is dropped, the exception passed on."""
        jobs = self._jobs
        while jobs:
            if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
                return False
            try:
                next(jobs[0])
            except StopIteration:
                jobs.popleft()
            except BaseException:
                jobs.popleft()
                raise
        return True


class Slices:
    """One computation at a time, run in slices: :meth:`run` starts ``fn()`` (or resumes the one started before)
    until it returns (True) or stops at a :meth:`checkpoint` past ``deadline_ns`` (False: suspended, its frames
    kept). Only the thread that started it may resume it. Without the ``greenlet`` package every run is whole."""

    def __init__(self):
        self._task: Optional[greenlet.greenlet] = None
        self._deadline: Optional[int] = None
        self.suspensions = 0  # how often a computation stopped at a checkpoint (diagnostics)

    @property
    def suspended(self) -> bool:
        """A computation started and not finished."""
        return self._task is not None

    def run(self, fn: Callable[[], object], deadline_ns: Optional[int] = None) -> bool:
        """``fn()`` from its start, or the suspended computation from its checkpoint (``fn`` unused then), until it
        ends (True) or a checkpoint finds ``time.monotonic_ns()`` past ``deadline_ns`` (False; None: to the end).
        Its exception is raised here, the computation over."""
        if greenlet is None:
            fn()
            return True
        if self._task is None:
            self._task = greenlet.greenlet(fn)
        task = self._task
        self._deadline = deadline_ns
        try:
            task.switch()
        except BaseException:
            self._task = None
            raise
        if task.dead:
            self._task = None
            return True
        return False

    def finish(self) -> None:
        """The suspended computation (if any) to its end, now (before something changes what it reads)."""
        if self._task is not None:
            self.run(_nothing, None)

    def abandon(self) -> None:
        """Drop the suspended computation (if any): GreenletExit is raised at its checkpoint, its ``finally``
        clauses run (a reset: what it computed is of a state that is gone)."""
        task, self._task = self._task, None
        if task is not None and not task.dead:
            task.throw(greenlet.GreenletExit)

    def checkpoint(self) -> int:
        """Where the computation may stop: it does when running under :meth:`run` and past its deadline. Returns
        the thread CPU time [ns] that went to other work while it was stopped (0 when it went on): a caller that
        times itself by the thread's CPU clock subtracts it, and reads that clock (a system call, µs in a VM)
        only around a stop."""
        task = self._task
        if (task is not None and self._deadline is not None and greenlet.getcurrent() is task
                and time.monotonic_ns() > self._deadline):
            self.suspensions += 1
            t0 = time.thread_time_ns()
            task.parent.switch()
            return time.thread_time_ns() - t0
        return 0


def _nothing() -> None:
    pass
