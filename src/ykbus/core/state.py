"""The records of one partition: its configuration, nodes, queues, applications, asks,
allocations, trackers and the read models folded from its events: plain data, a component
the partition holds (`Partition.records`, core/partition.py). No outputs and no
scheduling: the waits keep what follows from them (core/indexes.py, `Waits`: the node
index, where each pending ask waits), the applier changes them (core/changes.py
`Changes`, what an RM asks for; core/applier.py `Applier`, a plan's commit and the
timers), and the planner reads them (core/scheduling.py). Its containers are filled and
emptied in place, never replaced (the partition holds the same ones for its readers); a
timer's target is the records of its partition (core/timers.py `TimerTarget`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ykbus.core import why
from ykbus.core.chunked import ChunkedDict
from ykbus.core.config import PartitionConfig, preemption_enabled
from ykbus.core.deadlines import Timers
from ykbus.core.lifecycle import AppState
from ykbus.core.model import (
    Alloc,
    App,
    Ask,
    Node,
    Queue,
    Shape,
    Terminated,
    Tracker,
    app_hold,
    full_path,
)
from ykbus.core.queueprops import AppSortPolicy, NodeSortPolicy
from ykbus.core.readmodel import PartitionSummary, PendingCodes
from ykbus.core.resources import Res, share
from ykbus.core.scorers import NodeScorer, scorer_for
from ykbus.core.timers import Timer

CACHE_QUEUE_KEYS = True  # tests switch it off to prove the memoized queue keys are the keys



FAIR: Final = AppSortPolicy.FAIR  # read once (compiled code reads an uncompiled enum's members by name)

class PartitionState:
    # set by `configured` (from __init__ and at every reconfiguration)
    config: PartitionConfig
    reservation_delay_ns: int
    topology_levels: tuple[str, ...]
    node_sort: NodeSortPolicy
    weights: dict[str, float]
    scorer: NodeScorer

    def __init__(self, rm: str, config: PartitionConfig, timers: Timers[Timer], incarnation: int = 0) -> None:
        self.rm = rm
        self.incarnation = incarnation  # the input seq that created it
        self.timers = timers
        self.alive = True
        self.name = config.name
        self.configured(config)
        self.nodes: dict[str, Node] = {}
        self.apps: dict[str, App] = {}
        self.terminated: dict[str, Terminated] = {}
        self.rejected: dict[str, Terminated] = {}  # the last limits.REJECTED_KEPT rejected applications, oldest first
        self.allocations: ChunkedDict[Alloc] = ChunkedDict()  # every allocation, in the order booked
        self.uuid_taken = self.allocations.__contains__  # the RM widens it to all its partitions
        self.total: Res = {}
        self.paused = False  # its RM is Paused: nothing is placed (the core sets it from the RM's state)
        self.queues: dict[str, Queue] = {}
        self.root = Queue("root", None)
        self.seq = 0  # submission order of applications and asks
        self.rekey = False  # the total or the configuration changed: every queue key is stale (the next pass)
        self._shapes: dict[tuple[tuple[tuple[str, int], ...], int], tuple[Res, Shape]] = {}
        self.trackers: dict[str, Tracker] = {}
        self.summary = PartitionSummary()  # a read model, folded from the entries' events (core/fold.py)
        self.pending_codes = PendingCodes()  # pending asks by why they wait (a read model)
        self.preempted: dict[str, Node] = {}  # nodes with preempted allocations the RM has not released yet
        self.victims_indexed = False  # the leaves keep their allocations that may be preempted (Queue.victims)
        # the topology domains reserved by waiting required gangs (docs/topology.md): domain
        # key -> the gang; no two overlap (a key is never a prefix of another's)
        self.domain_holds: dict[tuple[str, ...], App] = {}
        # the nodes reserved by waiting gangs that ask for no domain (docs/gang.md,
        # `ykbus.io/gang.reserve`): node id -> the gang (`App.holding` is ("", its node ids))
        self.node_holds: dict[str, App] = {}

    def node_holders(self) -> list[App]:
        """The gangs that reserved nodes (`node_holds`), each once, by id."""
        found = {a.id: a for a in self.node_holds.values()}
        return [found[app_id] for app_id in sorted(found)]

    def retire(self) -> None:
        """Its RM went away, or a reload dropped it: a timer of it that fires finds it dead."""
        self.alive = False

    def pause(self, paused: bool) -> None:
        """Its RM is Paused (nothing is placed until it is back), or no longer."""
        self.paused = paused

    def link_uuids(self, taken: Callable[[str], bool]) -> None:
        """How to see whether a UUID is live in its RM (one partition: its own allocations)."""
        self.uuid_taken = taken

    def remember_ended(self, app_id: str, ended: Terminated) -> None:
        """An application that ended before its RM registered again, kept as it was."""
        (self.rejected if ended.state is AppState.REJECTED else self.terminated)[app_id] = ended

    def preempts(self) -> bool:
        """Whether the partition's configuration lets asks preempt (`preemption.enabled`)."""
        return preemption_enabled(self.config)

    def queue_key(self, parent: Queue, q: Queue) -> tuple[Any, ...]:
        """`q`'s place among its siblings (core/scheduling.py reads it): memoized in
        `q.sort_key`, which every change of what it depends on clears (its usage, pending,
        priority, configuration; the partition's total). A read: the planner hands a key it
        computed to the applier, which memoizes it (`Learned.keys`)."""
        key = q.sort_key
        if key is None or not CACHE_QUEUE_KEYS:
            key = self._queue_key(parent, q)
        return key

    def _queue_key(self, parent: Queue, q: Queue) -> tuple[Any, ...]:
        prio = 0
        if parent.sort_priority:
            exposed = q.exposed_priority()
            prio = -(exposed if exposed is not None else 0)
        total = self.total
        return (prio, share(q.allocated, q.guaranteed, total), -share(q.pending, q.guaranteed, total), q.name)

    def configured(self, config: PartitionConfig) -> None:
        """`config` is in force: it, and what the hot path reads of it as native attributes
        (compiled code reads the config's fields, msgspec Structs, by name)."""
        self.config = config
        self.reservation_delay_ns = config.reservationdelay_ms * 1_000_000  # read at every park
        self.topology_levels = config.topology.levels  # read for every ask and park
        self.node_sort = config.nodesortpolicy.type
        self.weights = config.nodesortpolicy.resourceweights
        self.scorer = scorer_for(self.node_sort, self.weights)

    def intern(self, resource: Res, limit_ms: int = 0) -> tuple[Res, Shape]:
        """One shared (resource dict, shape) per distinct resource vector and runtime limit:
        asks and allocations of the same size share it (never mutated: every change copies).
        The shape names the vector whatever the order of its items (the repr of its sorted
        items: distinct vectors, distinct shapes), and an ask's runtime limit (`limit_ms`,
        above 0), since asks of one size and limit wait and backfill alike (core/backfill.py)."""
        key = (tuple(resource.items()), limit_ms)
        found = self._shapes.get(key)
        if found is None:
            shape = repr(tuple(sorted(key[0])))
            found = self._shapes[key] = (resource, f"{shape} <={limit_ms}ms" if limit_ms > 0 else shape)
        return found

    def resolve_queue(self, name: str) -> Queue | None:
        return self.queues.get(full_path(name))

    def forget_queue_keys(self) -> bool:
        """Drop every memoized queue key if the total or the configuration changed since the
        last pass (`rekey`); whether it did."""
        if not self.rekey:
            return False
        for q in self.queues.values():
            q.sort_key = None
        self.rekey = False
        return True

    def remove_if_empty(self, q: Queue) -> None:
        """Remove a draining or unmanaged queue once empty, then its parent likewise."""
        while q.parent is not None and (q.draining or not q.managed) and not q.apps and not q.children:
            del q.parent.children[q.name]
            del self.queues[q.path]
            q = q.parent

    def app_key(self, app: App) -> tuple[Any, ...]:
        """The sort key of `app` in its leaf (the list holds `(*key, app)`)."""
        leaf = app.queue
        prio = -(app.max_priority or 0) if leaf.sort_priority else 0
        if leaf.sort_policy is FAIR:
            return (prio, share(app.allocated, self.total, {}), app.seq)
        return (prio, 0.0, app.seq)

    def why_pending(self, ask: Ask) -> why.Why:
        """The current reason of a pending ask (O(1): kept as it is parked and woken)."""
        if self.paused:
            return why.rm_paused(self.rm)
        if ask.waiting is not None and ask.why is not None:
            return ask.why
        held = app_hold(ask.app)
        return held if held is not None else why.QUEUED
