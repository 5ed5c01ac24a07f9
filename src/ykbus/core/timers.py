"""Timers on the log's clock: one typed value per kind, fired in (deadline, insertion) order.

A timer names what it acts on; `live()` says whether its target is still there (a snapshot
keeps only those). When due, the core also checks that the target has not moved on (an
application's timer generation, its state), so nothing is ever cancelled. Kinds:

- `CompletingTimer`: Completing -> Completed, 30 s after the application got there;
- `AppTimeoutTimer`: an application's `executionTimeoutMilliSeconds`, from Running;
- `AllocationTimeoutTimer`: an ask's `executionTimeoutMilliSeconds`, per allocation;
- `ExpireTimer`: Completed/Failed -> Expired (then forgotten), 3 days later;
- `PlaceholderTimer`: a gang's placeholder timeout, from its first placeholder allocation;
- `ReservationTimer`: an ask that has waited for room the partition's reservation delay;
- `QuotaTimer`: a queue's `quota.preemption.delay` after a reload lowered its max below its
  usage (core/preemption.py);
- `PreemptionTimer`: an ask that may preempt has waited its queue's `preemption.delay`, or
  the retry interval after a search that found no victims (core/preemption.py).

`kind` is the name a snapshot stores (`STimer.kind`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import msgspec

if TYPE_CHECKING:
    from ykbus.core.chunked import ChunkedDict
    from ykbus.core.lifecycle import AppState
    from ykbus.core.model import Alloc, App, Queue, Terminated


class TimerTarget(Protocol):
    """What a timer reads of its partition (its records, core/state.py) to know whether its
    target is still there; the core finds the partition of the records to fire it."""

    alive: bool
    apps: dict[str, App]
    allocations: ChunkedDict[Alloc]
    terminated: dict[str, Terminated]
    queues: dict[str, Queue]


class _Timer(msgspec.Struct, frozen=True):
    partition: TimerTarget


class _AppTimer(_Timer, frozen=True):
    app: App
    generation: int  # the application's timer generation when it was set: a newer one wins

    def live(self) -> bool:
        p = self.partition
        return p.alive and p.apps.get(self.app.id) is self.app


class CompletingTimer(_AppTimer, frozen=True):
    kind = "completing"


class AppTimeoutTimer(_AppTimer, frozen=True):
    kind = "app_timeout"


class PlaceholderTimer(_AppTimer, frozen=True):
    kind = "placeholder"


class AllocationTimeoutTimer(_Timer, frozen=True):
    kind = "alloc"
    alloc: Alloc
    timeout_ms: int  # the timeout the allocation was made with (a later ask update does not change it)

    def live(self) -> bool:
        p = self.partition
        return p.alive and p.allocations.get(self.alloc.uuid) is self.alloc


class ExpireTimer(_Timer, frozen=True):
    kind = "expire"
    app_id: str
    state: AppState  # Completed or Failed

    def live(self) -> bool:
        p = self.partition
        ended = p.terminated.get(self.app_id)
        return p.alive and ended is not None and ended.state is self.state


class _AskTimer(_Timer, frozen=True):
    app: App
    key: str  # the ask's allocationKey
    since: int  # when it started waiting: a timer of an earlier wait does nothing

    def live(self) -> bool:
        p = self.partition
        return p.alive and p.apps.get(self.app.id) is self.app and self.key in self.app.asks


class QuotaTimer(_Timer, frozen=True):
    kind = "quota"
    queue: str  # its path

    def live(self) -> bool:
        p = self.partition
        return p.alive and self.queue in p.queues


class ReservationTimer(_AskTimer, frozen=True):
    kind = "reservation"


class PreemptionTimer(_AskTimer, frozen=True):
    kind = "preemption"


Timer = (CompletingTimer | AppTimeoutTimer | AllocationTimeoutTimer | ExpireTimer | PlaceholderTimer | ReservationTimer
         | PreemptionTimer | QuotaTimer)
