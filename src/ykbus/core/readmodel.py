"""The read model: what readers ask of a partition that would walk many records. The
partition summary and the pending asks by code are folded from the events an entry's
application returned (core/events.py), after the entry, by core/fold.py: the one place that
changes them (so a reader does not walk the live state); the nodes' usage is built when read.

- `PartitionSummary` is the part of YuniKorn's `PartitionInfo` (the REST API's
  `/ws/v1/partitions`) that follows from the applier's events: the applications per state,
  with their `total`, and `totalContainers`, the allocations held.
- `NodeUsage` is what YuniKorn's node-utilizations and the metrics' node families read:
  the nodes in each tenth of usage, per resource type, and how many are schedulable. It is
  not folded: a reader builds it from the nodes when it asks (`NodeUsage.of`: rest/dao.py,
  rest/metrics.py), so the writer keeps nothing for it and a reader changes nothing.
- `PendingCodes` is what the metrics' `ykbus_pending_asks` reads: the pending allocations
  of the partition's asks by the code of why they wait (core/why.py), as `why_pending` gives
  it for each. A parked ask's code is its own, counted when the applier says it moved
  (`Step.pending_moved`: parked, woken or made active, or its pending count moved); an active
  ask is counted with its application, whose hold (`app_hold`) is read when asked: a hold
  never touches each of its asks.

The folded ones are derived data: a snapshot does not store them, a restore rebuilds them
from the records (`of`), and the property test checks after every entry that each fold
equals that rebuild.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ykbus.core.lifecycle import AppState, NodeState
from ykbus.core.model import app_hold
from ykbus.core.why import PendingCode

if TYPE_CHECKING:
    from ykbus.core.model import App, Ask, Node

TENTHS = 10  # YuniKorn's buckets of usage: [0,10%], (10%,20%], ..., (90%,100%]


class PartitionSummary:
    """Applications per state and allocations held, in one partition."""

    __slots__ = ("applications", "containers", "counts")

    def __init__(self) -> None:
        self.applications: dict[AppState, int] = {}  # state -> applications in it (Completed and Failed until expired)
        self.containers = 0  # allocations held (placed or recovered, not yet released)
        # decisions counted since the partition began (YuniKorn's counters: metrics), by
        # (what, queue path or "", outcome); unlike the rest, a snapshot keeps them
        self.counts: dict[tuple[str, str, str], int] = {}

    def count(self, what: str, queue: str, outcome: str) -> None:
        key = (what, queue, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1

    def app_entered(self, state: AppState) -> None:
        self.applications[state] = self.applications.get(state, 0) + 1

    def app_left(self, state: AppState) -> None:
        left = self.applications[state] - 1
        if left:
            self.applications[state] = left
        else:
            del self.applications[state]

    def dao(self) -> dict[str, Any]:
        """As YuniKorn names it: `applications` (`total` and a count per state present, in the
        states' order) and `totalContainers`."""
        counts = {s.value: self.applications[s] for s in AppState if s in self.applications}
        return {"applications": {"total": sum(counts.values()), **counts}, "totalContainers": self.containers}

    @staticmethod
    def of(apps: Any, terminated: Any, rejected: Any, allocations: int) -> PartitionSummary:
        """The summary of the records as they are (a restore; the property test's reference):
        `apps`, `terminated` and `rejected` are the partition's, by id."""
        summary = PartitionSummary()
        for app in apps.values():
            summary.app_entered(app.state)
        for ended in (*terminated.values(), *rejected.values()):
            summary.app_entered(ended.state)
        summary.containers = allocations
        return summary


def tenth(used: int, capacity: int) -> int:
    """The bucket of `used` out of `capacity` (not 0): 0 for [0,10%], 1 for (10%,20%], ...,
    9 for (90%,100%] and over; in integers, so a share on a bound is never rounded across it."""
    return min(TENTHS - 1, max(0, -(-used * TENTHS // capacity) - 1))


class NodeUsage:
    """The nodes of a partition in each tenth of usage (what their allocations hold out of
    their capacity), per resource type they have, and the count of schedulable nodes: built
    on read from the nodes as they are (`of`), kept by nobody."""

    __slots__ = ("buckets", "schedulable")

    def __init__(self) -> None:
        self.buckets: dict[str, list[dict[str, None]]] = {}  # type -> tenth -> the node ids in it
        self.schedulable = 0

    def _add(self, node: Node) -> None:
        self.schedulable += node.state is NodeState.SCHEDULABLE
        free, occupied, buckets = node.free, node.occupied, self.buckets
        for t, cap in node.capacity.items():
            if cap:
                per = buckets.get(t)
                if per is None:
                    per = buckets[t] = [{} for _ in range(TENTHS)]
                per[tenth(cap - occupied.get(t, 0) - free.get(t, 0), cap)][node.id] = None

    def types(self) -> list[str]:
        """The resource types some node has, sorted."""
        return sorted(self.buckets)

    def nodes_in(self, t: str) -> list[list[str]]:
        """Per tenth, the ids of the nodes in it for resource `t` (one of `types()`)."""
        return [list(ids) for ids in self.buckets[t]]

    def counts(self, t: str) -> list[int]:
        per = self.buckets.get(t)
        return [len(ids) for ids in per] if per is not None else [0] * TENTHS

    @staticmethod
    def of(nodes: Iterable[Node]) -> NodeUsage:
        """The usage of `nodes` as they are."""
        usage = NodeUsage()
        for node in nodes:
            usage._add(node)
        return usage


class PendingCodes:
    """The pending allocations of a partition's asks by the code of why they wait: those of
    parked asks by their own code, kept here; those of active asks per application
    (`App.unparked`), by its hold or `Queued`, when read."""

    __slots__ = ("parked",)

    def __init__(self) -> None:
        self.parked: dict[PendingCode, int] = {}  # code -> pending allocations of the asks parked with it

    def tally(self, ask: Ask) -> None:
        """`ask` was parked, woken, or its pending count moved: count it where it is now."""
        reason = ask.why
        code = reason.code if ask.waiting is not None and reason is not None else None
        n = ask.pending
        old, old_n = ask.tallied, ask.tallied_n
        if old is code and old_n == n:
            return
        parked = self.parked
        if old_n:
            if old is None:
                ask.app.unparked -= old_n
            else:
                left = parked[old] - old_n
                if left:
                    parked[old] = left
                else:
                    del parked[old]
        if n:
            if code is None:
                ask.app.unparked += n
            else:
                parked[code] = parked.get(code, 0) + n
        ask.tallied, ask.tallied_n = code, n

    def counts(self, apps: Iterable[App], paused: bool) -> dict[PendingCode, int]:
        """Pending allocations per code (codes with none left out): a walk of the
        applications (`apps`: the partition's), not of their asks. While the partition's RM
        is paused, every one is `RMPaused`."""
        out = dict(self.parked)
        for app in apps:
            n = app.unparked
            if n:
                held = app_hold(app)
                code = held.code if held is not None else PendingCode.QUEUED
                out[code] = out.get(code, 0) + n
        if paused:
            total = sum(out.values())
            return {PendingCode.RM_PAUSED: total} if total else {}
        return out

    @staticmethod
    def of(apps: Iterable[App]) -> tuple[dict[PendingCode, int], dict[str, int]]:
        """What the fold should hold for `apps` as they are (the property test's reference):
        the parked asks' pending allocations by code, and each application's unparked ones."""
        parked: dict[PendingCode, int] = {}
        unparked: dict[str, int] = {}
        for app in apps:
            for ask in app.asks.values():
                if not ask.pending:
                    continue
                if ask.waiting is not None and ask.why is not None:
                    parked[ask.why.code] = parked.get(ask.why.code, 0) + ask.pending
                else:
                    unparked[app.id] = unparked.get(app.id, 0) + ask.pending
        return parked, unparked
