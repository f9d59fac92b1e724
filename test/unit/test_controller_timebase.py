"""The controller's state pairing and time base (mbs_ros/controllers/timebase.py), without ROS: parts of a state
pair by equal stamps, a forward step within max_jump runs on, a step back or a larger jump becomes the time base
only on the 3rd consecutive state of the new time line, and the reference time then shifts by the jump."""
import pytest

from mbs_ros.controllers import timebase as tb

S = 1_000_000_000  # ns per s


def test_pairing_completes_only_with_every_part_of_the_same_stamp():
    p = tb.StatePairing(base=True, joints=True)
    assert not p.add("base", 10, "b10")
    assert not p.add("joints", 11, "j11")
    assert p.add("joints", 10, "j10")
    assert p.get(10) == ("b10", "j10")
    p.discard(10)
    assert not p.add("base", 10, "again")  # its joints part went with the discard
    assert p.add("base", 11, "b11")  # 11's joints part stayed
    assert p.get(11) == ("b11", "j11")


def test_pairing_without_a_base_completes_with_the_joints_alone():
    p = tb.StatePairing(base=False, joints=True)
    assert p.add("joints", 5, "j")
    assert p.get(5) == (None, "j")


def test_pairing_keeps_the_most_recently_arrived_parts():
    p = tb.StatePairing(base=True, joints=True, keep=3)
    for t in (1, 2, 3, 4):
        p.add("base", t, t)
    assert not p.add("joints", 1, "j")  # the earliest arrived went first
    assert p.add("joints", 4, "j")


def test_states_within_max_jump_run_on():
    t = tb.TimeBase(5 * S)
    for stamp in (0, 1 * S, 6 * S):  # the first state, then steps of 1 s and 5 s
        step = t.step(stamp)
        assert step == tb.Step(tb.ACCEPT)
        t.commit(stamp, step.jump)
    assert t.last == 6 * S and t.offset == 0
    assert t.step(6 * S).kind == tb.REPEAT


@pytest.mark.parametrize("new_line", [[2 * S, 3 * S, 4 * S], [100 * S, 101 * S, 102 * S]],
                         ids=["restart (step back)", "jump forward"])
def test_a_discontinuity_becomes_the_time_base_on_its_third_state(new_line):
    t = tb.TimeBase(5 * S)
    t.commit(50 * S, None)
    first, second, third = new_line
    assert t.step(first) == tb.Step(tb.REJECT, seen=1)
    assert t.step(second) == tb.Step(tb.REJECT, seen=2)
    step = t.step(third)
    assert step == tb.Step(tb.ACCEPT, jump=third - 50 * S)
    t.commit(third, step.jump)
    assert t.last == third and t.offset == third - 50 * S  # reference time = stamp - offset continues at 50 s


def test_a_lone_absurd_stamp_is_ignored_and_the_old_line_goes_on():
    t = tb.TimeBase(5 * S)
    t.commit(10 * S, None)
    assert t.step(2 ** 31 * S).kind == tb.REJECT
    assert t.step(11 * S) == tb.Step(tb.ACCEPT)  # back on the old line: the candidate is forgotten
    t.commit(11 * S, None)
    assert t.step(2 ** 31 * S) == tb.Step(tb.REJECT, seen=1)


def test_the_same_discontinuous_stamp_again_does_not_confirm_it():
    t = tb.TimeBase(5 * S)
    t.commit(10 * S, None)
    for _ in range(4):
        assert t.step(100 * S) == tb.Step(tb.REJECT, seen=1)


def test_states_that_do_not_continue_each_other_restart_the_count():
    t = tb.TimeBase(5 * S)
    t.commit(10 * S, None)
    assert t.step(100 * S).seen == 1
    assert t.step(200 * S).seen == 1  # 100 s after the candidate: a new candidate
    assert t.step(201 * S).seen == 2
