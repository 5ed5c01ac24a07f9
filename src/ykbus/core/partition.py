"""One partition of one RM: the components that hold its queue tree, nodes, applications,
asks and allocations (`records`), where its pending asks wait (`waits`), the planner
(`scheduler`), the ledger, what an RM changes (`changes`) and the plan's commit
(`applier`), composed into the scheduling pass over them (`Partition.schedule`).

Theory of operation
-------------------
Every pending ask is in exactly one place:

* **active**: in its application's `active` list, to be tried by the next pass;
* **waiting**, `ask.waiting` a typed `Wait` (core/model.py) naming what for: room on a node
  (`NodeRoom`: behind its shape's gate in `waits.pool`, core/waits.py, or, for a
  gang's asks, in `waits.parked` by shape), the one node it must run on (`RequiredNode`), its gang
  (`GangWait`), the release of the placeholder it replaces (`Replacement`), its leader
  (`LeaderWait`), a queue's `max` (`QueueRoom`) or a user or group limit's `maxresources`
  (`LimitRoom`; a `Tracker` counts one user's or group's usage in one queue that has a
  limit for them): in `waits.parked` (core/waits.py `WaitPlaces`) at that place, the one
  registry every wake-up takes its asks from. `waits` is the partition's `Waits`
  (core/indexes.py), the component that keeps these registries and what follows from them.

An application is *active* (in its leaf's `active_apps`, counted in `active` of every queue
up to root) when it has active asks, may be scheduled in its state, and is not held back by
a queue's `maxapplications` or a user or group limit's `maxapplications` (then it sits in
that queue's or tracker's `app_waiters`).

A pass (`schedule()`) runs after every entry and loops "walk root -> leaf, try the best
application's asks in order" until nothing more is placed. A failed ask moves to a waiting
place, so each ask is tried once per wake-up and an entry that changes nothing a waiting
ask waits for costs nothing for it. Wake-ups are precise:

1. capacity freed or added on node N opens the gates of the waiting shapes that now fit N,
   none while N is reserved for an ask: its room serves that ask alone (core/waits.py: the
   walk tries the asks behind an open gate in their order until one finds no node, which
   closes it; within a pass capacity mostly only shrinks, so a shape that failed once fails
   again: the scheduler's `failed_shapes`, cleared where a pass frees room: a reservation
   dropped, a gang's task group cancelled);
2. usage falling in queue Q (or of a tracked user or group), or a new configuration, wakes
   Q's (the tracker's) waiters;
3. an application leaving Running wakes the `app_waiters` of the queues above it and of its
   trackers.

Ordering (YuniKorn's priority scheduling design): asks by priority then submission; applications by
`fifo` (priority, submission), `fair` (priority, dominant share of the partition, submission)
or `stateaware` (fifo, and only the first Accepted application may start); queues by
priority (max of children plus `priority.offset`; a `fence` exposes only its offset) when
the parent sorts by priority, then dominant share of guaranteed, then pending, then name.
Nodes: `fair` least used first, `binpacking` most used first, weighted, ties by node id.

Application, queue and node sort keys are cached and moved in sorted lists when what they
depend on changes; priorities follow that design's O(1) add / O(n) remove rule.
"""

from __future__ import annotations

from ykbus.core import purity
from ykbus.core.applier import Applier
from ykbus.core.changes import Changes
from ykbus.core.config import PartitionConfig
from ykbus.core.deadlines import Timers
from ykbus.core.decisions import Allocate, Plan, ends_walk
from ykbus.core.holds import DomainHolds
from ykbus.core.indexes import Waits
from ykbus.core.ledger import Ledger
from ykbus.core.model import Node
from ykbus.core.scheduling import Scheduler
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.state import PartitionState
from ykbus.core.step import Step
from ykbus.core.timers import Timer
from ykbus.core.waits import RoomWaits

# tests: every plan is checked to change nothing of the partition (core/purity.py); read at
# each plan, off in production
CHECK_PURE = False


class Partition:
    """A partition: its components, held by reference, each built over those it reads, in
    that order: the records (`records`, plain data: core/state.py); the planner
    (`scheduler`) over the records and, read-only, the room gates and the node index; the
    waits (`waits`) that keep those; the ledger (`ledger`); the topology domains reserved by
    waiting gangs (`holds`); what an RM changes (`changes`);
    the plan's commit and the timers' handlers (`applier`). It composes them into the pass
    (`schedule`) and holds no state of its own: `rm`, `name` and `incarnation` are the
    records' (never changed), and `nodes`, `apps`, `queues`, `allocations`, `terminated`,
    `rejected`, `trackers`, `preempted`, `total`, `pending_codes` and `timers` are the
    records' containers themselves (plain references for the many readers: the records fill
    them in place, never replace them); `policies`, the node policies' orders, the
    planner's cache. What changes as a value (`paused`,
    `config`, `root`, `summary`, ...) is read as `records.<name>`."""

    def __init__(self, rm: str, config: PartitionConfig, timers: Timers[Timer], incarnation: int = 0) -> None:
        records = self.records = PartitionState(rm, config, timers, incarnation)
        self.rm, self.name, self.incarnation = rm, records.name, incarnation
        self.nodes, self.apps, self.queues = records.nodes, records.apps, records.queues
        self.allocations, self.terminated, self.rejected = records.allocations, records.terminated, records.rejected
        self.trackers, self.preempted, self.total = records.trackers, records.preempted, records.total
        self.pending_codes, self.timers = records.pending_codes, records.timers
        # the planner reads the room gates and the node index the waits keep
        node_index = SortedSeq()
        pool = RoomWaits(records.app_key)
        reserved_nodes: dict[str, Node] = {}  # the nodes reserved for asks: the waits keep it, backfill reads it
        self.scheduler = Scheduler(records, pool, node_index, reserved_nodes)
        self.policies = self.scheduler.policies  # the node policies' orders: the planner's, read by tests
        self.waits = Waits(records, pool, node_index, self.scheduler, reserved_nodes)
        self.ledger = Ledger(records.allocations)
        self.holds = DomainHolds(records, self.waits)
        self.changes = Changes(records, self.waits, self.ledger, self.holds)
        self.applier = Applier(records, self.waits, self.scheduler, self.ledger, self.changes)
        self.changes.apply_config(config, Step(0, 0))  # (an empty partition: nothing moves, nothing to tell)

    def schedule(self, ctx: Step) -> None:
        """Plan and commit until a walk places nothing (or the entry's budget is spent).
        Between two rounds (a plan committed, the next not begun) the records and the node
        index are whole: `ctx.between` is called there."""
        records = self.records
        if records.forget_queue_keys():  # the total or the configuration changed: every queue key may have changed
            self.waits.rekey_all(only_fair=True)
        scheduler = self.scheduler
        applier = self.applier
        waits = self.waits
        between = ctx.between
        scheduler.start(ctx.ts)
        try:
            while scheduler.has_work() and ctx.budget_left:
                plan: Plan = purity.planned(self) if CHECK_PURE else scheduler.plan()  # (typed: the check's is Any)
                if not plan:
                    break
                woken = waits.woken
                ended = type(plan[-1]) is Allocate or ends_walk(plan[-1])  # read before it is applied
                applier.commit(plan, ctx)
                if not ended and waits.woken == woken:
                    break  # the walk saw everything active, and committing it woke nothing
                if between is not None:
                    between()
        finally:
            scheduler.finish()
            waits.settle(ctx)
