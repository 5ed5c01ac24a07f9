"""The ledger: the one place where allocated resources move.

An allocation's resources count on its node (allocated, free, the node's allocations),
on every queue of its application's path, on the user and group trackers of its
application, on the application itself (and its count per node, for an affinity policy),
and in the partition's allocation index.
`book` adds one allocation to all of them and `unbook` takes it off all of them: exact
inverses, used by allocating, recovering and releasing alike. What an allocation means
beyond its resources (its ask's counts, the outputs, who is woken) is the partition's.

An ask placed moves its resources from pending to allocated in the same step.

Its caller (core/changes.py) then tells the waits what moved, so that the orders that
follow usage stay current: the node (the node index) and the application (its place under
`fair`).

While `indexed` (the partition preempts and a rule could take victims: core/preemption.py),
it also keeps each leaf's allocations that may be preempted by class, `Queue.victims`:
(priority, resource vector) -> uuid -> allocation, in the order they were booked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ykbus.core.resources import add_into, sub_into
from ykbus.core.timeline import end_bound

if TYPE_CHECKING:
    from ykbus.core.chunked import ChunkedDict
    from ykbus.core.model import Alloc, App, Node


class Ledger:
    __slots__ = ("allocations", "indexed")

    def __init__(self, allocations: ChunkedDict[Alloc]) -> None:
        self.allocations = allocations  # the partition's index: uuid -> allocation
        self.indexed = False  # keeping Queue.victims

    def index_victims(self, indexed: bool) -> None:
        """Keep the leaves' victims by class from now on (`Queue.victims`), or not."""
        self.indexed = indexed

    def book(self, alloc: Alloc, placed: bool = False) -> None:
        """Count `alloc` everywhere; `placed`: an ask's allocation, whose resources leave
        the pending of its application and queue path as they are booked (allocating moves
        them from pending to allocated; recovering adds them)."""
        node, app, res = alloc.node, alloc.app, alloc.resource
        sub_into(node.free, res)
        node.allocations[alloc.uuid] = alloc
        node.room_changes += 1
        if alloc.limit_ms > 0:
            limit_booked(alloc)
        for q in app.path:
            add_into(q.allocated, res)
            if placed:
                sub_into(q.pending, res)
            q.sort_key = None
        for t in app.trackers:
            add_into(t.allocated, res)
        add_into(app.allocated, res)
        if placed:
            sub_into(app.pending, res)
        app.allocations[alloc.uuid] = alloc
        if app.node_pods is not None:  # an affinity policy reads them
            app.count_on(node.id, 1)
        self.allocations[alloc.uuid] = alloc
        if self.indexed:
            index_victim(alloc)

    def recount(self, apps: Iterable[App], nodes: Iterable[Node]) -> None:
        """What `book` keeps, derived at once from the allocations the nodes and applications
        hold (a snapshot's load): each node's free room, each application's usage and count
        per node, each queue's usage (one sum per application, not one per allocation).
        Trackers count their applications' usage as they are made; the orders that follow
        usage (the node index, the applications' keys) are the partition's to build."""
        for node in nodes:
            node.recompute_free()
            node.ends = []
            for alloc in node.allocations.values():
                if alloc.limit_ms > 0:
                    limit_booked(alloc)
        for app in apps:
            allocated = app.allocated
            for alloc in app.allocations.values():
                add_into(allocated, alloc.resource)
                if app.node_pods is not None:
                    app.count_on(alloc.node.id, 1)
            for q in app.path:
                add_into(q.allocated, allocated)

    def unbook(self, alloc: Alloc) -> None:
        node, app, res = alloc.node, alloc.app, alloc.resource
        add_into(node.free, res)
        del node.allocations[alloc.uuid]
        node.room_changes += 1
        if alloc.limit_ms > 0:
            ends = node.ends
            if ends[0] is alloc:  # mostly: the oldest ends first
                del ends[0]
            else:
                del ends[_place(ends, alloc)]
        for q in app.path:
            sub_into(q.allocated, res)
            q.sort_key = None
        for t in app.trackers:
            sub_into(t.allocated, res)
        app.history.used(app.allocated)  # its most held is reached before a release (or is what it holds now)
        sub_into(app.allocated, res)
        del app.allocations[alloc.uuid]
        if app.node_pods is not None:
            app.count_on(node.id, -1)
        del self.allocations[alloc.uuid]
        if self.indexed and alloc.preempt_self:
            victims = app.queue.victims
            key = (alloc.priority, id(alloc.resource))
            same = victims.get(key)
            if same is not None:
                if alloc.uuid in same:
                    del same[alloc.uuid]
                if not same:
                    del victims[key]


def index_victim(alloc: Alloc) -> None:
    """`alloc` joins its leaf's victims by class (if it allows preemption of itself)."""
    if alloc.preempt_self:
        victims = alloc.app.queue.victims
        key = (alloc.priority, id(alloc.resource))
        same = victims.get(key)
        if same is None:
            same = victims[key] = {}
        same[alloc.uuid] = alloc


def limit_booked(alloc: Alloc) -> None:
    """`alloc`, booked with a runtime limit, gets its end bound (its start plus its limit:
    rule 2, core/timeline.py `end_bound`) and its place among its node's allocations that end
    by one (`Node.ends`)."""
    end = end_bound(alloc.at, alloc.limit_ms)
    alloc.end = end if end is not None else 0  # (never None: it has a limit)
    ends = alloc.node.ends
    if not ends or _before(ends[-1], alloc):  # mostly: the newest ends last
        ends.append(alloc)
    else:
        ends.insert(_place(ends, alloc), alloc)


def _before(a: Alloc, b: Alloc) -> bool:
    """Whether `a` comes before `b` in `Node.ends`: by end bound, then uuid."""
    return a.end < b.end or a.end == b.end and a.uuid < b.uuid


def _place(ends: list[Alloc], alloc: Alloc) -> int:
    """Where `alloc` is (or goes) in `ends`."""
    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _before(ends[mid], alloc):
            lo = mid + 1
        else:
            hi = mid
    return lo
