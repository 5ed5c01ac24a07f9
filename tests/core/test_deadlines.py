"""Deadlines fire in (deadline, insertion) order, across RMs and across a snapshot's
round trip, and a cancelled timer never fires (core/deadlines.py keeps them per deadline:
this checks it against a sort)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ykbus.core.deadlines import INT64_MAX, Sequence, Timers, due

# (which RM's timers, deadline) to set, or ("fire", now), or ("reload", which), or
# ("cancel", which timer held)
STEPS = st.lists(st.one_of(
    st.tuples(st.sampled_from([0, 1]), st.sampled_from([5, 10, 10, 20, 2**70])),
    st.tuples(st.just("fire"), st.integers(0, 25)),
    st.tuples(st.just("reload"), st.sampled_from([0, 1])),
    st.tuples(st.just("cancel"), st.integers(0, 100)),
), max_size=60)


def _in_order(timers: Timers[str]) -> list[tuple[int, int, str]]:
    return [entry for held in timers.in_order() for entry in held]


@given(STEPS)
def test_timers_fire_in_deadline_then_insertion_order(steps):
    sequence = Sequence()
    timers = [Timers[str](sequence), Timers[str](sequence)]
    for t in timers:
        t.compact_after = 1  # its heap built again as soon as it may: that too keeps the order
    held: list[tuple[int, int, str]] = []  # the reference: every timer not fired yet
    owner: dict[str, int] = {}  # timer -> which RM's
    for n, step in enumerate(steps):
        if step[0] == "fire":
            now = step[1]
            expected = sorted(e for e in held if e[0] <= now)
            held = [e for e in held if e[0] > now]
            assert due(timers, now) == [name for _, _, name in expected]
        elif step[0] == "reload":  # a snapshot's round trip
            kept = timers[step[1]].entries()
            timers[step[1]] = Timers[str](sequence)
            timers[step[1]].compact_after = 1
            timers[step[1]].load(kept)
        elif step[0] == "cancel":
            if held:
                deadline, _, name = held.pop(step[1] % len(held))
                timers[owner[name]].cancel(deadline, name)
                timers[owner[name]].cancel(deadline, name)  # twice: the second finds nothing
        else:
            which, deadline = step
            timers[which].schedule(deadline, f"t{n}")
            held.append((min(deadline, INT64_MAX), sequence.n, f"t{n}"))
            owner[f"t{n}"] = which
        for which in (0, 1):
            assert _in_order(timers[which]) == sorted(e for e in held if owner[e[2]] == which)
            assert sorted(timers[which].held()) == _in_order(timers[which])
    assert sorted(timers[0].entries() + timers[1].entries()) == sorted(held)
    assert due(timers, INT64_MAX) == [name for _, _, name in sorted(held)]


def test_a_deadline_whose_timers_were_cancelled_is_not_read_and_takes_timers_again():
    """Cancel most of many timers (a released allocation's timeout each): a walk in order
    reads the others only, and a timer set later at an emptied deadline is read and fires."""
    timers = Timers[str](Sequence())
    for i in range(5000):
        timers.schedule(1000 + i, f"t{i}")
    for i in range(5000):
        if i % 5:
            timers.cancel(1000 + i, f"t{i}")
    timers.schedule(1001, "late")  # a deadline all of whose timers were cancelled
    expected = sorted([(1000 + i, f"t{i}") for i in range(0, 5000, 5)] + [(1001, "late")])
    walk = list(timers.in_order())
    assert [(e[0], e[2]) for held in walk for e in held] == expected
    assert all(walk)  # no empty list: an emptied deadline is not read
    assert due([timers], 6000) == [name for _, name in expected]
    assert due([timers], INT64_MAX) == []


def test_cancelled_deadlines_do_not_pile_up_until_they_are_due():
    """An ended application forgotten early (limits.TERMINATED_KEPT) cancels its 3-day timer,
    each at a deadline of its own: 36 a second (a soak of `ykbus up`) would have left 9
    million deadlines in the heap until due. The heap is built again once most are gone."""
    timers = Timers[str](Sequence())
    for i in range(100_000):
        timers.schedule(10**15 + i, f"t{i}")
        if i >= 10:
            timers.cancel(10**15 + i - 10, f"t{i - 10}")  # only the last 10 are held
    assert len(timers._deadlines) < 2 * timers.compact_after + 20  # (not 100,000)
    assert due([timers], INT64_MAX) == [f"t{i}" for i in range(99_990, 100_000)]
