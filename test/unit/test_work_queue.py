"""mbs_ros.cores.work.WorkQueue: jobs run piece by piece, in order, until a deadline (the dynamics node's
publications after a step, docs/dynamics_node.md "Publication in pieces")."""
import time

import pytest

from mbs_ros.cores.work import WorkQueue, single


def _job(log, name, n):
    for i in range(n):
        log.append((name, i))
        yield


def test_all_pieces_run_in_order_without_a_deadline():
    log, work = [], WorkQueue()
    work.add(_job(log, "a", 3))
    work.add(single(lambda: log.append(("b", 0))))
    work.add(_job(log, "c", 2))
    assert work.pending()
    assert work.run() is True
    assert log == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("c", 0), ("c", 1)]
    assert not work.pending()


def test_a_past_deadline_stops_before_the_next_piece_and_the_next_run_goes_on_from_there():
    log, work = [], WorkQueue()
    work.add(_job(log, "a", 2))
    work.add(_job(log, "b", 2))
    assert work.run(time.monotonic_ns() - 1) is False  # already past: not one piece
    assert log == [] and work.pending()

    def slow(name, n):  # each piece takes the deadline past
        for i in range(n):
            log.append((name, i))
            time.sleep(0.002)
            yield

    work = WorkQueue()
    work.add(slow("s", 3))
    assert work.run(time.monotonic_ns() + 1_000_000) is False  # 1 ms: the first piece (2 ms) ends past it
    assert log == [("s", 0)]
    assert work.run() is True
    assert log == [("s", 0), ("s", 1), ("s", 2)]


def test_a_piece_that_raises_drops_its_job_and_the_rest_stays():
    log, work = [], WorkQueue()

    class Broken:  # an iterator that fails at every piece (a generator would end with its exception)
        def __iter__(self):
            return self

        def __next__(self):
            log.append("x")
            raise RuntimeError("boom")

    work.add(Broken())
    work.add(_job(log, "after", 1))
    with pytest.raises(RuntimeError, match="boom"):
        work.run()
    assert work.pending()  # the next job is still there
    assert work.run() is True
    assert log == ["x", ("after", 0)]


def test_clear_drops_every_job():
    log, work = [], WorkQueue()
    work.add(_job(log, "a", 2))
    work.clear()
    assert not work.pending() and work.run() is True and log == []
