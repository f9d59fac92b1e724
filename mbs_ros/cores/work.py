"""Work longer than a callback may take, done in pieces (ROS-free): a node's publications after a step.

A :class:`WorkQueue` holds jobs, each an iterator that does one piece of work (one message published) per
``next()``; :meth:`WorkQueue.run` runs pieces in order until the queue is empty or a wall-clock deadline has passed,
so a callback that runs it holds its node at most until the deadline plus one piece. The dynamics node queues what
it publishes after the controller's inputs (docs/dynamics_node.md, "Publication in pieces") and steps on only once
its queue is empty: every queued piece reads the state it was queued for.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable, Iterable, Iterator, Optional

__all__ = ["WorkQueue", "single"]


def single(fn: Callable[[], object]) -> Iterator[None]:
    """A job of one piece: ``fn()``."""
    fn()
    yield


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
