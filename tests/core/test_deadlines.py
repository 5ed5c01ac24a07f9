"""Deadlines fire in (deadline, insertion) order, across RMs and across a snapshot's
round trip (core/deadlines.py keeps them per deadline: this checks it against a sort)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ykbus.core.deadlines import INT64_MAX, Sequence, Timers, due

# (which RM's timers, deadline) to set, or ("fire", now), or ("reload", which)
STEPS = st.lists(st.one_of(
    st.tuples(st.sampled_from([0, 1]), st.sampled_from([5, 10, 10, 20, 2**70])),
    st.tuples(st.just("fire"), st.integers(0, 25)),
    st.tuples(st.just("reload"), st.sampled_from([0, 1])),
), max_size=60)


@given(STEPS)
def test_timers_fire_in_deadline_then_insertion_order(steps):
    sequence = Sequence()
    timers = [Timers[str](sequence), Timers[str](sequence)]
    held: list[tuple[int, int, str]] = []  # the reference: every timer not fired yet
    for n, step in enumerate(steps):
        if step[0] == "fire":
            now = step[1]
            expected = sorted(e for e in held if e[0] <= now)
            held = [e for e in held if e[0] > now]
            assert due(timers, now) == [name for _, _, name in expected]
        elif step[0] == "reload":  # a snapshot's round trip
            kept = timers[step[1]].entries()
            timers[step[1]] = Timers[str](sequence)
            timers[step[1]].load(kept)
        else:
            which, deadline = step
            timers[which].schedule(deadline, f"t{n}")
            held.append((min(deadline, INT64_MAX), sequence.n, f"t{n}"))
    assert sorted(timers[0].entries() + timers[1].entries()) == sorted(held)
    assert due(timers, INT64_MAX) == [name for _, _, name in sorted(held)]
