"""`SortedSeq`: the sorted lists of the core (the asks of an application, the applications
of a leaf, those behind each gate, the node index), compiled with it.

It keeps its values in sublists of at most 2 * LOAD, with the last value of each, as
sortedcontainers' `SortedList` does, and answers the part of its interface the core uses.
Compiled with the core (core/compiled.py), `add`, `remove` and `first` are calls between
native classes: `SortedList`'s are interpreted Python, and the pass makes hundreds of
thousands of them (every ask parked, woken or placed moves an entry; every allocation moves
its node in the index).

Values must be totally ordered, and no two equal (the core's entries end in a sequence
number or a unique name before any object that does not compare).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any, Final

LOAD = 1000  # a sublist splits in two past 2 * load values (SortedList's default load)
# read once: compiled code looks up a method of a class it did not compile at every call
FROM_ITERABLE: Final = chain.from_iterable


# The bisection of a sorted list, as the `bisect` module's (without `lo`, `hi` and `key`):
# compiled, a call of one is a C call; `bisect`'s are called through the interpreter's
# protocol, their arguments parsed by keyword at every call (the core makes hundreds of
# thousands: every ask parked, woken or placed, every node moved). The comparisons are the
# same: `a[mid] < x` and `x < a[mid]`.

def bisect_left(a: list[Any], x: Any) -> int:
    """The index `x` would take in `a`, before any equal value."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def bisect_right(a: list[Any], x: Any) -> int:
    """The index `x` would take in `a`, after any equal value."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def insort(a: list[Any], x: Any) -> None:
    """`x` into `a`, after any equal value."""
    a.insert(bisect_right(a, x), x)


class SortedSeq:
    __slots__ = ("_lists", "_maxes", "_len", "_load")

    def __init__(self, values: Iterable[Any] = (), load: int = LOAD) -> None:
        ordered = sorted(values)
        self._load = load
        self._lists: list[list[Any]] = [ordered[i:i + load] for i in range(0, len(ordered), load)]
        self._maxes: list[Any] = [sub[-1] for sub in self._lists]
        self._len = len(ordered)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[Any]:
        return FROM_ITERABLE(self._lists)

    def __repr__(self) -> str:
        return f"SortedSeq({list(self)!r})"

    def first(self) -> Any:
        """The smallest value (IndexError when empty)."""
        if not self._len:
            raise IndexError("first of an empty SortedSeq")
        return self._lists[0][0]

    def __getitem__(self, index: int) -> Any:
        n = self._len
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("SortedSeq index out of range")
        for sub in self._lists:
            if index < len(sub):
                return sub[index]
            index -= len(sub)
        raise IndexError("SortedSeq index out of range")  # not reached: the lengths add up to n

    def add(self, value: Any) -> None:
        maxes, lists = self._maxes, self._lists
        if not maxes:
            lists.append([value])
            maxes.append(value)
        else:
            pos = bisect_right(maxes, value)
            if pos == len(maxes):  # past every value: the end of the last sublist
                pos -= 1
                lists[pos].append(value)
                maxes[pos] = value
            else:
                insort(lists[pos], value)
            sub = lists[pos]
            load = self._load
            if len(sub) > 2 * load:
                lists.insert(pos + 1, sub[load:])
                del sub[load:]
                maxes.insert(pos, sub[-1])
        self._len += 1

    def remove(self, value: Any) -> None:
        """Remove `value` (ValueError when it is not there)."""
        if not self.discard(value):
            raise ValueError(f"{value!r} not in SortedSeq")

    def discard(self, value: Any) -> bool:
        """Remove `value` if it is there; whether it was."""
        maxes, lists = self._maxes, self._lists
        if len(maxes) == 1:  # mostly: one sublist, no bisection of the maxes (a comparison of tuples each)
            pos = 0
        else:
            pos = bisect_left(maxes, value)
            if pos == len(maxes):
                return False
        sub = lists[pos]
        i = bisect_left(sub, value)
        if i == len(sub) or not sub[i] == value:
            return False
        sub.pop(i)  # (compiled: `del sub[i]` is a call through the interpreter's protocol)
        self._len -= 1
        if not sub:
            lists.pop(pos)
            maxes.pop(pos)
        else:
            if i == len(sub):
                maxes[pos] = sub[-1]
            load = self._load
            if len(sub) < load // 2 and len(lists) > 1:  # join a neighbour, so that no sublist stays tiny
                at = pos if pos + 1 < len(lists) else pos - 1
                lists[at] += lists[at + 1]
                del lists[at + 1]
                del maxes[at]
                if len(lists[at]) > 2 * load:
                    joined = lists[at]
                    lists.insert(at + 1, joined[load:])
                    del joined[load:]
                    maxes.insert(at, joined[-1])
        return True

    def clear(self) -> None:
        self._lists.clear()
        self._maxes.clear()
        self._len = 0

    def bisect_left(self, value: Any) -> int:
        """The index `value` would take, before any equal value."""
        maxes = self._maxes
        pos = bisect_left(maxes, value)
        if pos == len(maxes):
            return self._len
        before = 0
        for sub in self._lists[:pos]:
            before += len(sub)
        return before + bisect_left(self._lists[pos], value)

    def islice(self, start: int = 0, stop: int | None = None) -> Iterator[Any]:
        """The values from index `start` up to `stop` (the end when None), in order."""
        end = self._len if stop is None else min(stop, self._len)
        lists = self._lists
        pos = 0
        while pos < len(lists) and start >= len(lists[pos]):  # the sublist `start` is in
            start -= len(lists[pos])
            end -= len(lists[pos])
            pos += 1
        if pos == len(lists) or end <= start:
            return iter(())
        return islice(chain(lists[pos][start:], chain.from_iterable(lists[pos + 1:])), end - start)
