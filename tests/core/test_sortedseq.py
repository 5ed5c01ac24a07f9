"""SortedSeq (core/sortedseq.py): the core's sorted lists answer as a sorted Python list
would, whatever is added, removed and asked, and keep their sublists within bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ykbus.core.sortedseq import SortedSeq

VALUES = st.integers(0, 80)
OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "discard", "clear", "read"]), VALUES), max_size=400)


def check(s: SortedSeq, model: list[int], load: int) -> None:
    assert list(s) == model and len(s) == len(model) and bool(s) == bool(model)
    lists = s._lists
    assert all(sub for sub in lists) and all(len(sub) <= 2 * load for sub in lists)
    assert s._maxes == [sub[-1] for sub in lists]
    if model:
        assert s.first() == model[0] and s[0] == model[0] and s[-1] == model[-1]
        assert s[len(model) // 2] == model[len(model) // 2]


@settings(max_examples=300, deadline=None)
@given(initial=st.lists(VALUES, unique=True, max_size=60), ops=OPS, load=st.sampled_from([2, 3, 8, 1000]))
def test_a_sorted_seq_answers_as_a_sorted_list(initial: list[int], ops: list[tuple[str, int]], load: int) -> None:
    s = SortedSeq(initial, load=load)
    model = sorted(initial)
    check(s, model, load)
    for op, v in ops:
        if op == "add" and v not in model:
            s.add(v)
            model = sorted([*model, v])
        elif op == "remove":
            if v in model:
                s.remove(v)
                model.remove(v)
            else:
                with pytest.raises(ValueError):
                    s.remove(v)
        elif op == "discard":
            assert s.discard(v) == (v in model)
            if v in model:
                model.remove(v)
        elif op == "clear" and v % 10 == 0:
            s.clear()
            model = []
        elif op == "read":
            assert (v in s) == (v in model)
            at = sum(1 for x in model if x < v)
            assert s.bisect_left(v) == at
            assert list(s.islice(at)) == model[at:]
            assert list(s.islice(at, at + v % 7)) == model[at:at + v % 7]
            assert list(s.islice(0, at)) == model[:at]
        check(s, model, load)


def test_an_empty_sorted_seq_has_no_first_and_no_index() -> None:
    s = SortedSeq()
    assert not s and list(s) == [] and 3 not in s and s.bisect_left(3) == 0 and list(s.islice(0)) == []
    with pytest.raises(IndexError):
        s.first()
    with pytest.raises(IndexError):
        s[0]


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.integers(0, 30), max_size=60), x=st.integers(-1, 31))
def test_the_core_bisects_as_the_bisect_module(values: list[int], x: int) -> None:
    """The core's own bisection (compiled: no call through the interpreter's protocol) finds
    the index `bisect` finds, duplicates and ends included, and inserts where `insort` does."""
    import bisect

    from ykbus.core.sortedseq import bisect_left, bisect_right, insort

    a = sorted(values)
    assert bisect_left(a, x) == bisect.bisect_left(a, x)
    assert bisect_right(a, x) == bisect.bisect_right(a, x)
    ours, theirs = list(a), list(a)
    insort(ours, x)
    bisect.insort(theirs, x)
    assert ours == theirs


def test_equal_values_are_inserted_after_their_equals() -> None:
    """`insort` keeps equal values in insertion order (tuples equal in their key, told apart
    by what follows: the core relies on the order, not on the tie)."""
    from ykbus.core.sortedseq import insort

    first, second = (1, "a"), (1, "a")
    a = [(0, "z"), first, (2, "b")]
    insort(a, second)
    assert a[1] is first and a[2] is second
