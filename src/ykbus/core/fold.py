"""The one fold: every read model (core/readmodel.py) follows from the events an entry's
application returned (core/events.py), folded here after the entry, in order; and is
rebuilt here from the records when they are restored from a snapshot. Nothing else changes
a read model (tests/core/test_one_way_out.py).
"""

from __future__ import annotations

from typing import Any, Final

from ykbus.core.events import (
    AllocationBooked,
    AllocationRecovered,
    AllocationReleased,
    AppAdded,
    AppExpired,
    AppRejected,
    AppTransitioned,
    CountsCarried,
    EndedKept,
    ReasonChanged,
)
from ykbus.core.lifecycle import AppState
from ykbus.core.model import Alloc, App
from ykbus.core.readmodel import PartitionSummary
from ykbus.core.state import PartitionState
from ykbus.core.step import Step

ENDED: Final = (AppState.COMPLETED, AppState.FAILED)
# the events' types (Structs, not compiled): told apart by `type(event) is`
_AppTransitioned: Final = AppTransitioned
_AllocationBooked: Final = AllocationBooked
_AllocationReleased: Final = AllocationReleased
_AppAdded: Final = AppAdded
_AppRejected: Final = AppRejected
_AppExpired: Final = AppExpired
_AllocationRecovered: Final = AllocationRecovered
_EndedKept: Final = EndedKept
_CountsCarried: Final = CountsCarried
_ReasonChanged: Final = ReasonChanged


def fold(step: Step) -> None:
    """Every read model, after the entry `step` applied: each partition's summary and pending
    asks by code, from the step's events, in order (an event of no partition counts nothing)."""
    moved_in = step.moved_in
    for i, ask in enumerate(step.moved):  # where each is now (a repeat counts nothing more)
        moved_in[i].pending_codes.tally(ask)
    parts = step.parts
    events: list[Any] = step.events  # (Structs, not compiled: read as any object)
    for i, event in enumerate(events):
        part = parts[i]
        if part is None:
            continue
        t = type(event)
        if t is _ReasonChanged:  # the most frequent, and no read model counts it
            continue
        summary = part.summary
        if t is _AllocationBooked:
            alloc: Alloc = event.alloc  # (typed: what is read of it is read natively, not by name)
            summary.containers += 1
            summary.count("container", alloc.app.queue.path, "allocated")
        elif t is _AllocationReleased:
            alloc = event.alloc
            summary.containers -= 1
            summary.count("container", alloc.app.queue.path, "released")
        elif t is _AppTransitioned:
            new: AppState = event.new
            summary.app_left(event.old)
            summary.app_entered(new)
            if new in ENDED:
                app: App = event.app
                summary.count("application", app.queue.path, str(new))
        elif t is _AppAdded:
            if event.replaced is not None:
                summary.app_left(event.replaced)
            summary.app_entered(event.state)
            app = event.app
            summary.count("application", app.queue.path, "Accepted")
        elif t is _AppRejected:
            summary.app_entered(AppState.REJECTED)
            summary.count("application", event.queue, AppState.REJECTED.value)
            for _ in range(event.dropped):
                summary.app_left(AppState.REJECTED)
        elif t is _AppExpired:
            summary.app_left(event.state)
        elif t is _AllocationRecovered:
            summary.containers += 1
        elif t is _EndedKept:
            summary.app_entered(event.ended.state)
        elif t is _CountsCarried:
            add_counts(summary.counts, event.counts)


def rebuild(records: PartitionState) -> None:
    """The read models of `records` restored from a snapshot (which stores none of them but
    the summary's counts), from the records as they are."""
    summary = records.summary
    fresh = PartitionSummary.of(records.apps, records.terminated, records.rejected, len(records.allocations))
    summary.applications, summary.containers = fresh.applications, fresh.containers
    tally = records.pending_codes.tally
    for app in records.apps.values():
        for ask in app.asks.values():
            if ask.pending:
                tally(ask)


def restore_counts(records: PartitionState, counts: list[tuple[str, str, str, int]]) -> None:
    """The summary's decisions counted, as a snapshot stored them (the one read model it keeps)."""
    records.summary.counts = {(what, queue, outcome): n for what, queue, outcome, n in counts}


def add_counts(into: dict[tuple[str, str, str], int], counts: dict[tuple[str, str, str], int]) -> None:
    """Decisions counted, added to those of `into` (a partition's summary, or what an RM's
    partitions that went counted: core/registry.py)."""
    for key, n in counts.items():
        into[key] = into.get(key, 0) + n
