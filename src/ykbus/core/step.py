"""One entry's application in progress: a `Step` is what the applier is handed for an
entry (the `ctx` of its methods). It carries the entry's seq and log time, issues the
allocation ids of the entry and counts them against the per-entry budget, and collects the
typed events the application returns (core/events.py), in the order they happened, each
with the partition it happened in (None: an RM's, not a partition's), and the asks whose
place or pending count moved (`moved`: what the read model of pending asks by code counts
again).

Kept as parallel lists, and a moved ask as the ask itself, not as a tuple or an object per
change: they live until the entry ends, and every container object alive then counts
towards the garbage collector's next pass (a move is the most frequent change; an object per
move, kept to the end of the entry, cost a third of `bench core --workload yunikorn-perf`'s
speed in collections).

A step sends nothing and sets no timer: after the entry, `derive` (core/effects.py) turns
its events into the outputs and the timers, and `fold` (core/fold.py) into the read
models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ykbus import limits

if TYPE_CHECKING:
    from ykbus.core.events import Event
    from ykbus.core.model import Ask
    from ykbus.core.state import PartitionState


class Step:
    __slots__ = ("seq", "ts", "_uuid", "allocations", "budget", "limit", "events", "parts", "moved", "moved_in",
                 "between")

    def __init__(self, seq: int, ts: int, between: Callable[[], None] | None = None) -> None:
        self.seq = seq
        self.ts = ts
        # called where the records are whole in the middle of the entry (between two asks or
        # releases of a request, two rounds of a pass): a reader pauses there for a dry run
        # (bus/live.py). It changes nothing, so it changes no decision.
        self.between = between
        self._uuid = 0
        self.allocations = 0  # allocations this entry made (the pass stops at the per-entry budget)
        self.limit = limits.MAX_ALLOCATIONS_PER_ENTRY  # read once an entry (tests lower it)
        self.budget = self.limit  # what the pass may make before it stops: the limit, or a share of it (`share`)
        self.events: list[Event] = []  # what the entry's application did, in order
        self.parts: list[PartitionState | None] = []  # the partition each event happened in (None: not in one)
        self.moved: list[Ask] = []  # asks whose place or pending count moved, in order (repeats allowed)
        self.moved_in: list[PartitionState] = []  # the partition of each

    def next_uuid(self, taken: Callable[[str], bool]) -> str:
        """A deterministic allocation UUID: `<input seq>-<n>`, n counting from 0 per entry,
        skipping any that `taken` says is live (an RM may recover an allocation whose UUID
        has this form)."""
        while True:
            uuid = f"{self.seq}-{self._uuid}"
            self._uuid += 1
            if not taken(uuid):
                self.allocations += 1
                return uuid

    @property
    def budget_left(self) -> bool:
        return self.allocations < self.budget

    def share(self, amount: int) -> None:
        """Let the next pass make at most `amount` more allocations (never past the limit);
        `unshare` gives back the whole limit."""
        self.budget = min(self.limit, self.allocations + amount)

    def unshare(self) -> None:
        self.budget = self.limit

    def emit(self, part: PartitionState | None, event: Event) -> None:
        """`event` happened in `part` (None: not in a partition), after every event before it."""
        self.events.append(event)
        self.parts.append(part)

    def pending_moved(self, part: PartitionState, ask: Ask) -> None:
        """`ask` of `part` was parked, woken or made active, or its pending count moved."""
        self.moved.append(ask)
        self.moved_in.append(part)
