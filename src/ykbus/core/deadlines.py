"""Deadlines on the log's clock: values fired in (deadline, insertion) order. Knows nothing
of what it holds (core/timers.py has the kinds of timers the core sets).

Each RM has its own `Timers` (its partitions' deadlines: the unit that could move to another
core process with the RM); the insertion order is one `Sequence` the core shares among them,
so the core fires the due timers of all its RMs in one (deadline, insertion) order (`due`)."""

from __future__ import annotations

from collections.abc import Iterator
from heapq import heapify, heappop, heappush
from typing import Final, Generic, TypeVar

from ykbus import limits

INT64_MAX: Final = limits.INT64_MAX  # read once (a constant: no test changes it)

T = TypeVar("T")


class Sequence:
    """The insertion order of deadlines, shared by the `Timers` of one core."""

    __slots__ = ("n",)

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def reach(self, n: int) -> None:
        """Deadlines set from now on come after insertion `n` (a restore; an RM's arriving)."""
        self.n = max(self.n, n)


COMPACT_AFTER: Final = 1024  # cancelled deadlines left in a heap before it may be built again


class Timers(Generic[T]):
    """Deadlines on the log's clock, fired in (deadline, insertion) order: deterministic.
    Deadlines are clamped to int64 (a snapshot stores them as such).

    Kept per deadline: a heap of the deadlines, and for each the timers set for it in
    insertion order. Timers come in crowds of one deadline (the asks parked by one entry
    reach their reservation delay together), so setting or firing one is an append or a pop
    of a list, not a step of a heap of (deadline, insertion, timer) tuples compared two deep.

    A timer that can no longer do anything may be cancelled (`cancel`): a released
    allocation's timeout, which would otherwise stay until its deadline (an hour, a day) and
    be read by every walk of the deadlines in order (`in_order`, core/backfill.py). A
    deadline whose timers are all cancelled leaves the map at once and the heap when it is
    due (taking it out of the heap at once would cost a search); set again meanwhile, it
    joins the heap again, and the copy that comes out of the heap first finds its timers,
    the other none. Once the deadlines so left in the heap outnumber those held (and
    `compact_after`), the heap is built again from those held: a partition that forgets an
    ended application early (limits.TERMINATED_KEPT) cancels its 3-day timer, and the heap
    would keep a deadline for each for 3 days. A rebuild costs about 0.3 µs a deadline held
    (30 ms at 100,000), once every as many cancellations."""

    def __init__(self, sequence: Sequence) -> None:
        self._deadlines: list[int] = []  # a heap of the deadlines held (and of some cancelled: see above)
        self._at: dict[int, list[tuple[int, int, T]]] = {}  # deadline -> its timers, in insertion order
        self._gone = 0  # about how many deadlines of the heap are no longer held (cancelled)
        self.compact_after = COMPACT_AFTER
        self.sequence = sequence

    def adopt(self, sequence: Sequence) -> None:
        """Take `sequence` (a core's, this RM's unit arriving there): the deadlines held keep
        their order, new ones come after every one of them."""
        self.sequence = sequence
        sequence.reach(max([0, *(n for _, n, _ in self.entries())]))

    def schedule(self, deadline: int, timer: T) -> None:
        self.sequence.n += 1
        self._hold((min(deadline, INT64_MAX), self.sequence.n, timer))

    def _hold(self, entry: tuple[int, int, T]) -> None:
        """`entry` after every entry held for its deadline (which joins the heap if not held)."""
        held = self._at.get(entry[0])
        if held is None:
            self._at[entry[0]] = [entry]
            heappush(self._deadlines, entry[0])
        else:
            held.append(entry)

    def cancel(self, deadline: int, timer: T) -> None:
        """Take out the timer equal to `timer` set for `deadline`, if one is held."""
        deadline = min(deadline, INT64_MAX)
        held = self._at.get(deadline)
        if held is None:
            return
        for i, entry in enumerate(held):
            if entry[2] == timer:
                held.pop(i)  # (a native call where `del held[i]` is a generic one)
                if not held:
                    del self._at[deadline]
                    self._gone += 1
                    if self._gone > self.compact_after and self._gone > len(self._at):
                        self._deadlines = list(self._at)
                        heapify(self._deadlines)
                        self._gone = 0
                return

    def pop_due(self, now: int) -> list[tuple[int, int, T]]:
        """The deadlines reached by `now`, taken out, with their order."""
        deadlines = self._deadlines
        if not deadlines or deadlines[0] > now:
            return []
        out: list[tuple[int, int, T]] = []
        at = self._at
        while deadlines and deadlines[0] <= now:
            held = at.pop(heappop(deadlines), None)
            if held is not None:  # (None: its timers were cancelled, or it came out before)
                out.extend(held)
            elif self._gone:
                self._gone -= 1
        return out

    def in_order(self) -> Iterator[list[tuple[int, int, T]]]:
        """The timers held, a list per deadline, in deadline order, read as far as the caller
        goes (a heap of the deadlines held now is popped: nothing held changes). Timers set
        after the call at a deadline not held then are not read; a deadline fired or
        cancelled meanwhile is skipped."""
        at = self._at
        heap = list(at)
        heapify(heap)
        while heap:
            found = at.get(heappop(heap))
            if found:
                yield found

    def held(self) -> Iterator[tuple[int, int, T]]:
        """The timers held, in no order that means anything (deadlines as first set), read
        as far as the caller goes: for a question of whether one is held, not of when."""
        for found in self._at.values():
            yield from found

    def entries(self) -> list[tuple[int, int, T]]:
        """Every deadline held, with its order (a snapshot)."""
        return [entry for held in self._at.values() for entry in held]

    def load(self, entries: list[tuple[int, int, T]]) -> None:
        """Hold these deadlines (a restore), in their order."""
        self._deadlines = []
        self._at = {}
        self._gone = 0
        for entry in sorted(entries, key=_order):
            self._hold(entry)


def due(all_timers: list[Timers[T]], now: int) -> list[T]:
    """The timers of several `Timers` (sharing one Sequence) due at `now`, in one
    (deadline, insertion) order."""
    lists = [found for timers in all_timers if (found := timers.pop_due(now))]
    if not lists:
        return []
    if len(lists) == 1:  # one RM's: popped from its heap in that order already
        return [e[2] for e in lists[0]]
    entries = [e for found in lists for e in found]
    entries.sort(key=_order)
    return [e[2] for e in entries]


def _order(entry: tuple[int, int, object]) -> tuple[int, int]:
    return entry[0], entry[1]
