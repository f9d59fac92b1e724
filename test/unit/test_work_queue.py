"""mbs_ros.cores.work.WorkQueue: jobs run piece by piece, in order, until a deadline (the dynamics node's
publications after a step, docs/dynamics_node.md "Publication in pieces")."""
import time

import pytest

from mbs_ros.cores.work import Slices, WorkQueue, single


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


# ------------------------------------------------------------------ Slices: a computation resumed across calls

def _counting(log, slices, n):
    """A computation with ``n`` checkpoints: logs each stretch between them, returns the sum of 1..n."""
    total = 0
    for i in range(1, n + 1):
        log.append(i)
        total += i
        slices.checkpoint()
    log.append("end")
    return total


def test_a_computation_past_its_deadline_stops_at_each_checkpoint_and_goes_on_from_there():
    pytest.importorskip("greenlet")
    log, slices, out = [], Slices(), []
    past = time.monotonic_ns() - 1
    assert slices.run(lambda: out.append(_counting(log, slices, 3)), past) is False
    assert log == [1] and slices.suspended  # stopped at the first checkpoint, its frames kept
    assert slices.run(None, past) is False and log == [1, 2]  # resumed (the function is not called again)
    assert slices.run(None, past) is False and log == [1, 2, 3]
    assert slices.run(None, past) is True
    assert log == [1, 2, 3, "end"] and out == [6] and not slices.suspended
    assert slices.suspensions == 3


def test_a_computation_within_its_deadline_or_without_one_runs_through():
    log, slices = [], Slices()
    assert slices.run(lambda: _counting(log, slices, 3), time.monotonic_ns() + 10 ** 12) is True
    assert slices.run(lambda: _counting(log, slices, 2)) is True
    assert log == [1, 2, 3, "end", 1, 2, "end"] and slices.suspensions == 0
    slices.checkpoint()  # outside a run: nothing to stop


def test_finish_runs_the_suspended_computation_to_its_end_and_abandon_drops_it():
    pytest.importorskip("greenlet")
    log, slices = [], Slices()
    past = time.monotonic_ns() - 1
    slices.run(lambda: _counting(log, slices, 3), past)
    slices.finish()
    assert log == [1, 2, 3, "end"] and not slices.suspended
    cleaned = []

    def guarded():
        try:
            _counting(log, slices, 3)
        finally:
            cleaned.append(True)

    log.clear()
    assert slices.run(guarded, past) is False
    slices.abandon()  # a reset: its finally clauses run, the next run starts afresh
    assert cleaned == [True] and log == [1] and not slices.suspended
    assert slices.run(lambda: _counting(log, slices, 1)) is True and log == [1, 1, "end"]


def test_an_exception_in_the_computation_reaches_the_caller_and_ends_it():
    pytest.importorskip("greenlet")
    slices = Slices()

    def failing():
        slices.checkpoint()
        raise ValueError("inside")

    assert slices.run(failing, time.monotonic_ns() - 1) is False
    with pytest.raises(ValueError, match="inside"):
        slices.run(None)
    assert not slices.suspended
    assert slices.run(lambda: None) is True


def test_without_greenlet_every_run_is_whole(monkeypatch):
    import mbs_ros.cores.work as work

    monkeypatch.setattr(work, "greenlet", None)
    log, slices = [], Slices()
    assert slices.run(lambda: _counting(log, slices, 3), time.monotonic_ns() - 1) is True
    assert log == [1, 2, 3, "end"] and not slices.suspended
