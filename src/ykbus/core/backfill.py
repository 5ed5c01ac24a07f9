"""Time in force: runtime limits of asks and allocations, reservations' estimated starts,
and the backfill of asks with a limit into reserved room (docs/time.md).

Reads the records and returns values; `core/timeline.py` computes (the estimate, the rule),
this module feeds it from the live state. Deterministic: nodes by id, allocations by uuid,
no clock (now is the entry's log time).

1. **An ask's limit** (`ask_limit_ms`): its `executionTimeoutMilliSeconds`, else its queue's
   `ykbus.io/runtime.default`, capped by `ykbus.io/runtime.max` (each from the nearest queue
   on its path that sets it); fixed when the ask comes (as Slurm fixes a job's time limit at
   submission), kept as the ask's timeout, so the core ends its allocations at it. A
   placeholder keeps its own timeout (a gang's placeholders are replaced, not run).
2. **An allocation's end bound**: its start plus its limit (`end_of`); none without one.
3. **A reservation's estimated start**: for a node reserved for an ask, the first log time
   the ask fits the node if its allocations end at their bounds (`node_estimate`); for a
   topology domain a gang reserved, when its waiting placeholders fit the domain's nodes
   (`domain_estimate`).
4. **Backfill** (`Backfill.node_for`): an ask with a limit that found no free node may take
   room on a reserved node, or in a reserved domain, if it ends (now + its limit) by the
   reservation's estimated start (by the earlier one, where two reservations hold the node):
   by then the room is back, and a reservation's estimate does not move later for it (the
   room at the estimate is the same). Never without a limit, never beside a reservation
   without an estimate. And only if its limit is at most half the time left to the
   estimate (`LEND_DIVISOR`), a sixth in a gang's reserved domain (`DOMAIN_LEND_DIVISOR`):
   runtimes are mostly shorter than their limits, and room that comes back later in the
   wait, left free, lets the reservation start early.
5. **Minimum runtime** (`young`): an allocation that has run less than its queue's
   `preemption.minruntime` is no victim.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ykbus.core import why
from ykbus.core.lifecycle import AllocationState, NodeState
from ykbus.core.resources import Res, fits, sub_into
from ykbus.core.timeline import (
    ALL_RESERVED,
    Candidate,
    Estimate,
    Holding,
    NoEstimate,
    NoEstimateReason,
    Sweep,
    Waited,
    at_once,
    earliest_start,
    no_estimate,
    old_enough,
    one_node_at,
    one_node_start,
    runtime_limit_ms,
    too_large,
    waited_key,
)
from ykbus.core.timers import AllocationTimeoutTimer, Timer
from ykbus.core.topology import TopologyMode, TopologyRequest, path_of

if TYPE_CHECKING:
    from ykbus.core.model import Alloc, App, Ask, Node, Queue, Shape
    from ykbus.core.state import PartitionState

T = TypeVar("T")
NS_PER_MS: Final = 1_000_000
# Backfill lends reserved room only to an ask whose limit is at most 1/LEND_DIVISOR of the
# time left to the reservation's estimated start: limits overstate runtimes (most jobs end
# well before theirs), so the room that comes back in the second half of the wait is left
# free, and a reservation whose allocations end early starts early, about as without
# backfill (BENCHMARKS.md, the backfill workload: 1 lends until the estimate, and the gangs
# waited 27% longer)
LEND_DIVISOR = 2
# In a domain a gang reserved, 1/DOMAIN_LEND_DIVISOR: a gang starts when enough of the
# domain's hosts are empty together, so room lent on any of them that runs into the real
# drain holds the whole gang back, and the gang's estimate overstates its wait the most
# (its first estimate was 19-34 min after its start at the median in the backfill bench).
# The backfill workload, side by side with reservations alone: 2 here gave the gangs a
# median wait 9% longer (30.2 min against 27.7); 6 gave 25.5 min and +13 points of
# utilization (BENCHMARKS.md, and seeds 44 and 45 in docs/benchmarks-history.md)
DOMAIN_LEND_DIVISOR = 6
PLAIN_REASONS = 4096  # reserved reasons kept by a `reserved_why` caller, one per node and shape (then it starts over)
SLICE_ENDS = 15_000  # end bounds an estimate reads in one slice of a dry run (about 5 ms; `FreeNodes.estimate_steps`)
SLICE_ONE = 2_500  # nodes an estimate of one allocation reads in one slice (its own walk of each, `one_node_at`)


def _nearest(path: list[Queue], which: int) -> int:
    """The runtime property `which` (0 default, 1 max, 2 minimum) of the nearest queue on
    `path` (leaf first) that sets it; 0 for none."""
    for q in path:
        value = q.runtime_default_ms if which == 0 else q.runtime_max_ms if which == 1 else q.min_runtime_ms
        if value >= 0:
            return value
    return 0


def ask_limit_ms(timeout_ms: int, placeholder: bool, path: list[Queue]) -> int:
    """Rule 1: the runtime limit of an ask coming to the leaf that starts `path` (leaf first,
    up to root, as `App.path`), in ms; 0 for none."""
    if placeholder:
        return timeout_ms
    limit = runtime_limit_ms(timeout_ms, _nearest(path, 0), _nearest(path, 1))
    return limit if limit is not None else 0


def end_of(alloc: Alloc) -> int | None:
    """Rule 2: the log time (ns) by which `alloc` has ended; None without a limit (the
    ledger sets it as it books the allocation, `limit_booked`)."""
    return alloc.end if alloc.limit_ms > 0 else None


def young(alloc: Alloc, now: int) -> bool:
    """Rule 5: `alloc` has run less than its queue's minimum runtime."""
    return not old_enough(alloc.at, now, _nearest(alloc.app.path, 2))


def old_at(alloc: Alloc) -> tuple[int, int]:
    """Rule 5, for a reason: the log time (ns) from which `alloc` may be a victim, and its
    queue's minimum runtime (ms) that sets it."""
    minimum = _nearest(alloc.app.path, 2)
    return alloc.at + max(0, minimum) * NS_PER_MS, minimum


def candidate(node: Node) -> Candidate:
    """`node` as the estimate reads it: its room when empty, free now, and its allocations
    with their end bounds."""
    holdings = []
    for uuid, alloc in node.allocations.items():  # (in any order: what reads them sorts what it needs)
        holdings.append(Holding(uuid, end_of(alloc), alloc.resource))
    return Candidate(node.id, node.empty_room(), node.free, holdings)


def node_estimate(ask: Ask, node: Node, now: int) -> Estimate | NoEstimate:
    """Rule 3: when `ask` fits `node`, reserved for it (`one_node_start`; where it gives
    none, `earliest_start` says why)."""
    found = one_node_start(node.id, node.empty_room(), node.free, node.ends, ending_of(node, ask.resource),
                           ask.resource, now)
    if found is not None:
        return found
    return earliest_start([candidate(node)], [ask.resource], now)


def ending_of(node: Node, member: Res) -> Res:
    """What `node`'s allocations with a runtime limit hold together, of each resource
    `member` asks: where every allocation there has one, all it holds (its capacity less
    what others occupy and its free room), else their sum."""
    out: Res = {}
    if len(node.ends) == len(node.allocations):
        capacity, occupied, free = node.capacity, node.occupied, node.free
        for r in member:
            out[r] = capacity.get(r, 0) - occupied.get(r, 0) - free.get(r, 0)
        return out
    for alloc in node.ends:
        for r, v in alloc.resource.items():
            if r in member:
                out[r] = out.get(r, 0) + v
    return out


def _any_limited(nodes: Iterable[Node]) -> bool:
    """Whether an allocation on `nodes` has a runtime limit (else no estimate is told): the
    ledger keeps each node's (`Node.ends`)."""
    for node in nodes:
        if node.ends:
            return True
    return False


def reserved_why(ask: Ask, node: Node, now: int, plain: dict[tuple[str, Shape], why.Why]) -> why.Why:
    """`ask`'s reason while `node` is reserved for it, with its estimated start when an
    allocation there has a runtime limit (none has: the reason as without limits, the same
    for every ask of its shape there: kept in the caller's `plain`, by node and shape)."""
    if not node.ends:
        key = (node.id, ask.shape)
        found = plain.get(key)
        if found is None:
            if len(plain) >= PLAIN_REASONS:
                plain.clear()
            found = plain[key] = why.reserved(node.id, ask.resource)
        return found
    est = node_estimate(ask, node, now)
    if isinstance(est, Estimate):
        return why.reserved(node.id, ask.resource, est.text(None), est.at)
    return why.reserved(node.id, ask.resource, est.text())


def limits_in_use(records: PartitionState) -> bool:
    """Whether an allocation of the partition's RM may have a runtime limit: the core ends
    each at its limit by a timer, so one is held (the first found)."""
    return any(type(entry[2]) is AllocationTimeoutTimer for entry in records.timers.held())


class FreeNodes:
    """The schedulable nodes reserved for no ask and in no reserved domain, read once for
    estimates over many of them (the read API's, the dry run's): their room now, by node id,
    and the end bounds of their allocations, read in time order from the partition's timers
    and only as far as an estimate needs (the core ends an allocation at its runtime limit
    by a timer whose deadline is its end bound). `limited` is False when no allocation on
    them has a runtime limit: no estimate to give, the reason stays as without limits.

    The answer is core/timeline.py `earliest_start`'s over the same nodes (a property test
    compares them), without sorting every allocation's bound first: one that finds room
    after k end bounds reads k allocations (100,000 allocations, a whole node asked where
    every node has 20: about 95,000). Only a search that runs out of bounds reads every
    allocation of the nodes, to say why there is no estimate."""

    __slots__ = ("records", "candidates", "limited", "_index")

    def __init__(self, records: PartitionState) -> None:
        self.records = records
        free = sorted((n for n in records.nodes.values()
                       if n.state is NodeState.SCHEDULABLE and n.reserved is None and not n.held), key=_node_id)
        self.candidates: list[Candidate] = [Candidate(n.id, n.empty_room(), n.free, []) for n in free]
        self._index: dict[str, int] = {c.id: i for i, c in enumerate(self.candidates)}
        self.limited = _any_limited(free)  # else none of theirs has a limit

    def estimate(self, members: list[Res], now: int, node_ids: list[str] | None = None) -> Estimate | NoEstimate:
        """When `members` fit these nodes (or those of them named, `node_ids`) at the earliest."""
        return run_through(self.estimate_steps(members, now, node_ids))

    def estimate_steps(self, members: list[Res], now: int,
                       node_ids: list[str] | None = None) -> Generator[None, None, Estimate | NoEstimate]:
        """`estimate` in slices: it yields after every `SLICE_ENDS` end bounds read (the dry
        run lets the writer apply entries there; what it reads next is of the state then, an
        end bound fired meanwhile is not read)."""
        nodes = self.candidates
        index = self._index
        if node_ids is not None:
            nodes = [nodes[index[i]] for i in sorted(node_ids) if i in index]
            index = {c.id: i for i, c in enumerate(nodes)}
        early = at_once(nodes, members, now)
        if early is not None:
            return early
        if len(members) == 1:
            one = yield from self._one_steps(nodes, members[0], now)
            if one is not None:
                return one
        room = Sweep(nodes, members, now)
        placed = room.placement()
        if placed is not None:
            return self._estimate(nodes, placed, now, now)
        records = self.records
        at = now
        read = 0
        for held in records.timers.in_order():  # one end bound (deadline) at a time
            if self._give_back(held, room, index):
                at = held[0][0] if held[0][0] > now else now
                placed = room.placement()
                if placed is not None:
                    return self._estimate(nodes, placed, at, now)
            read += len(held)
            if read >= SLICE_ENDS:
                read = 0
                yield
        known = records.nodes
        return no_estimate([candidate(known[c.id]) for c in nodes if c.id in known], members)

    def _one_steps(self, nodes: list[Candidate], member: Res,
                   now: int) -> Generator[None, None, Estimate | NoEstimate | None]:
        """One allocation's estimate: the first node (by id) of those where it fits soonest,
        each asked on its own from the ledger's end bounds of its allocations (`Node.ends`:
        `one_node_at` reads few of them), `SLICE_ONE` nodes a slice. The same answer as the
        sweep over every node's end bounds in time order, which reads nearly all of them when
        the member needs a whole node. None: the node it chose changed in a later slice (the
        caller sweeps then)."""
        known = self.records.nodes
        best_at: int | None = None
        best: Node | None = None
        for k, c in enumerate(nodes):
            if k and k % SLICE_ONE == 0:
                yield
            node = known.get(c.id)
            if node is None:  # removed during a sliced dry run
                continue
            at = one_node_at(c.capacity, node.free, node.ends, ending_of(node, member), member, now)
            if at is None:
                continue
            if at <= now and fits(member, node.free):  # now, waiting for nothing: none is sooner
                best = node
                break
            if best_at is None or at < best_at:  # (now also where end bounds passed count as ending now)
                best_at, best = at, node
        if best is None:
            return no_estimate([candidate(known[c.id]) for c in nodes if c.id in known], [member])
        return one_node_start(best.id, best.empty_room(), best.free, best.ends, ending_of(best, member), member, now)

    def _give_back(self, held: list[tuple[int, int, Timer]], room: Sweep, index: dict[str, int]) -> bool:
        """The room of the allocations whose timers are `held` (one deadline: their end
        bound), on the nodes of `index`, given back to `room`; whether any was."""
        records = self.records
        back = False
        for entry in held:
            timer = entry[2]
            if type(timer) is AllocationTimeoutTimer and timer.partition is records:
                alloc = timer.alloc
                if alloc.limit_ms > 0 and alloc.state is AllocationState.ALLOCATED:  # live, with a limit
                    i = index.get(alloc.node.id)
                    if i is not None:
                        room.back(i, alloc.resource)
                        back = True
        return back

    def _estimate(self, nodes: list[Candidate], placed: list[int], at: int, now: int) -> Estimate:
        """The members fit at `at` on `placed`: what they wait for is the allocations there
        whose end bounds are passed by then (rule 5)."""
        waits: list[Waited] = []
        known = self.records.nodes
        for i in sorted(set(placed)):
            node = known.get(nodes[i].id)
            if node is None:  # removed during a sliced dry run
                continue
            for alloc in node.allocations.values():
                end = end_of(alloc)
                if end is not None and end <= at:
                    waits.append(Waited(node.id, alloc.uuid, end if end > now else now))
        waits.sort(key=waited_key)
        return Estimate(at, [nodes[i].id for i in placed], waits)


def gang_members(app: App) -> list[Ask]:
    """The waiting placeholders of `app`'s gang, one per pending allocation, largest first
    then by key (as its placement packs them)."""
    asks = sorted((a for a in app.asks.values() if a.placeholder and a.pending), key=_member_key)
    return [a for a in asks for _ in range(a.pending)]


def _member_key(ask: Ask) -> tuple[tuple[int, ...], str]:
    return (tuple(-v for _, v in sorted(ask.resource.items())), ask.key)


def domain_estimate(app: App, nodes: list[Node], now: int) -> Estimate | NoEstimate:
    """Rule 3: when the waiting members of `app`'s gang fit `nodes` (in any order: read by
    node id), its reserved domain. A node reserved for an ask there goes to that ask first:
    its room counts as held by the ask from now until the ask's own estimated start plus its
    limit (none: without a limit)."""
    candidates = []
    for node in sorted(nodes, key=_node_id):
        c = candidate(node)
        first = node.reserved
        if first is not None:
            est = node_estimate(first, node, now)
            ends = est.at + first.timeout_ms * NS_PER_MS if isinstance(est, Estimate) and first.timeout_ms > 0 else None
            free = dict(c.free)
            sub_into(free, first.resource)  # (below zero where the room is not free yet: it comes back first)
            c = Candidate(node.id, c.capacity, free, [*c.holdings, Holding(f"{first.app.id}/{first.key}", ends,
                                                                           first.resource)])
        candidates.append(c)
    return earliest_start(candidates, [a.resource for a in gang_members(app)], now)


def held_estimate(app: App, nodes: Iterable[Node], now: int,
                  kept: Backfill | None = None) -> tuple[str, dict[str, object]]:
    """For a gang waiting on a domain it reserves (its nodes, `nodes`): `; estimated start
    ...` (or `; no estimate: ...`) and the details, when an allocation there has a runtime
    limit; else nothing (the reason as without limits). `kept`: the planner's estimates,
    where the gang holds the domain (`Backfill.domain_estimate`)."""
    held = list(nodes)
    if not _any_limited(held):
        return "", {}
    est = kept.domain_estimate(app, held, now) if kept is not None else domain_estimate(app, held, now)
    if isinstance(est, Estimate):
        return f"; {est.text(None)}", {"estimate": est.text(None), "estimatedStart": est.at}
    return f"; {est.text()}", {"estimate": est.text()}


class Backfill:
    """The planner's view of the reservations for backfill: the room each reserved node may
    lend, until when (`lendable`: the earliest estimated start of the reservations that hold
    it, a node reserved for an ask first, then a gang's domain, by node id), computed when
    first needed in a plan and dropped when the plan ends (`forget`): its own cache, never
    the state's.

    The estimates it is made of are kept from plan to plan, and entry to entry, while what
    they read stays: a node's while its reserved ask and its `room_changes` stay; a gang's
    while its domain's nodes, their room and reservations, and its waiting members stay; and
    either only while the start is still ahead (room that came back before the start gave no
    fit before it, and gives none now: the same start), as are those of the nodes reserved
    in the domain (each holds its room until its own start). So a reservation's estimate is
    computed again when its room moves, not at every plan (a plan per allocation)."""

    __slots__ = ("records", "reserved_nodes", "_lendable", "_lent", "_node_starts", "_domain_starts")

    def __init__(self, records: PartitionState, reserved_nodes: dict[str, Node]) -> None:
        self.records = records
        self.reserved_nodes = reserved_nodes  # the waits' registry (read, never written here)
        self._lendable: list[tuple[Node, int]] | None = None
        # (an ask's limit, its shape) -> the node `node_for` found for it, in this plan (a walk
        # reads one state: the next ask of that limit and shape finds the same)
        self._lent: dict[tuple[int, str], Node | None] = {}
        # node id -> (the ask it is reserved for, the node's room_changes then, the ask's
        # estimated start): of the nodes reserved at the last plan that read them
        self._node_starts: dict[str, tuple[Ask, int, int | None]] = {}
        # gang id -> what its estimate read, and the estimate: of the gangs holding a domain
        # at the last plan that read them
        self._domain_starts: dict[str, DomainStart] = {}

    def forget(self) -> None:
        self._lendable = None
        if self._lent:
            self._lent.clear()

    def any(self) -> bool:
        return bool(self.reserved_nodes) or bool(self.records.domain_holds) or bool(self.records.node_holds)

    def lendable(self, now: int) -> list[tuple[Node, int]]:
        """Each node whose room may be lent now, and the estimated start of the reservation
        that holds it: of the ask it is reserved for, or of the gang whose domain it is in;
        the earlier, if both; none beside a reservation without an estimate. By node id."""
        found = self._lendable
        if found is not None:
            return found
        bound: dict[str, int | None] = {}  # node id -> until when (None: not to lend)
        nodes: dict[str, Node] = {}
        known, self._node_starts = self._node_starts, {}  # (those no longer reserved are dropped)
        for node_id in sorted(self.reserved_nodes):
            node = self.reserved_nodes[node_id]
            holder = node.reserved
            if holder is not None:
                bound[node_id] = self._node_start(holder, node, now, known.get(node_id))
                nodes[node_id] = node
        # the gangs holding a domain, by its key, then those holding a node set, by id
        holds = [self.records.domain_holds[values] for values in sorted(self.records.domain_holds)]
        if self.records.node_holds:
            holds += self.records.node_holders()
        if len(self._domain_starts) > len(holds):  # (those that hold nothing now are dropped)
            self._domain_starts = {app.id: start for app in holds
                                   if (start := self._domain_starts.get(app.id)) is not None}
        if holds:
            members: dict[str, list[Node]] = {}
            for node in self.records.nodes.values():
                if node.held:
                    members.setdefault(node.held, []).append(node)
            for app in holds:
                held = members.get(app.id, [])
                est = self.domain_estimate(app, held, now)
                until = est.at if isinstance(est, Estimate) else None
                for node in held:
                    if node.id in bound:  # reserved for an ask too: the earlier of the two
                        kept = bound[node.id]
                        bound[node.id] = None if kept is None or until is None else min(kept, until)
                    else:
                        bound[node.id] = until
                    nodes[node.id] = node
        found = self._lendable = [(nodes[i], until) for i, until in sorted(bound.items()) if until is not None]
        return found

    def _node_start(self, holder: Ask, node: Node, now: int,
                    kept: tuple[Ask, int, int | None] | None) -> int | None:
        """`node_estimate`'s start for the ask `node` is reserved for: `kept` while the node's
        ask and room stay and the start is ahead (or there is none: too large for the node, or
        an allocation in the way without a limit, which its room changing would tell)."""
        if kept is not None and _node_start_holds(kept, node, now):
            self._node_starts[node.id] = kept
            return kept[2]
        start: int | None = None
        if node.ends or fits(holder.resource, node.free):  # (else no room ever comes back: none)
            est = node_estimate(holder, node, now)
            start = est.at if isinstance(est, Estimate) else None
        self._node_starts[node.id] = (holder, node.room_changes, start)
        return start

    def _reserved_ahead(self, held: list[Node], now: int) -> bool:
        """Whether every node reserved for an ask in `held` has its start kept (for its ask
        and room now) and ahead of `now`."""
        starts = self._node_starts
        return all(_node_start_holds(starts.get(node.id), node, now) for node in held if node.reserved is not None)

    def domain_estimate(self, app: App, held: list[Node], now: int) -> Estimate | NoEstimate:
        """`domain_estimate` for the gang `app` on the domain it holds, `held` (the nodes it
        holds, in the partition's order): the one kept while what it read stays
        (`DomainStart.holds`) and its start and those of the nodes reserved in the domain are
        ahead."""
        waiting = [(a, a.pending, a.shape) for a in app.asks.values() if a.placeholder and a.pending]
        kept = self._domain_starts.get(app.id)
        if kept is not None and kept.holds(app, held, waiting, now) and self._reserved_ahead(held, now):
            return kept.estimate
        est = domain_estimate(app, held, now)
        self._domain_starts[app.id] = DomainStart(app, [(n, n.room_changes, n.reserved) for n in held], waiting, est)
        return est

    def node_for(self, ask: Ask, now: int) -> Node | None:
        """Rule 4: a reserved node `ask` may take now, or None: the first by node id with room
        for it whose reservation starts late enough: the ask's limit is at most half the
        time from now to the estimated start (`LEND_DIVISOR`), at most a sixth in a domain a
        gang reserved (`DOMAIN_LEND_DIVISOR`: the stricter, where both hold the node)."""
        limit = ask.timeout_ms
        if limit <= 0 or ask.placeholder:
            return None
        key = (limit, ask.shape)
        if key in self._lent:
            return self._lent[key]
        res = ask.resource
        found: Node | None = None
        for node, start in self.lendable(now):
            if lends(node, start, now, limit, res, node.free):
                found = node
                break
        self._lent[key] = found
        return found


def lends(node: Node, start: int, now: int, limit_ms: int, res: Res, room: Res) -> bool:
    """Rule 4's test: reserved `node`, whose reservation starts at `start`, lends `room` (its
    free room) to an allocation of `res` with a runtime limit of `limit_ms`: the limit at most
    half the time from `now` to the start (`LEND_DIVISOR`), a sixth in a domain a gang
    reserved (`DOMAIN_LEND_DIVISOR`), the node schedulable, not preempting, with room."""
    runs = limit_ms * NS_PER_MS
    divisor = DOMAIN_LEND_DIVISOR if node.held else LEND_DIVISOR
    return (0 < runs and runs * divisor <= start - now and node.state is NodeState.SCHEDULABLE
            and not node.preempting and fits(res, room))


def lent_by(node: Node) -> str:
    """Whose reservation holds `node`'s room, as an allocation backfilled there says it."""
    holder = node.reserved
    return f"ask {holder.app.id}/{holder.key}" if holder is not None else f"gang {node.held}"


def _node_id(node: Node) -> str:
    return node.id


def _ahead(start: int | None, now: int) -> bool:
    """A kept estimated start still holds at `now` (its room unchanged): none, or one ahead."""
    return start is None or start > now


def _node_start_holds(kept: tuple[Ask, int, int | None] | None, node: Node, now: int) -> bool:
    """Whether `kept` (ask, room_changes, start) is still the start of the ask `node` is
    reserved for: the same ask, its room unchanged, the start ahead."""
    return (kept is not None and kept[0] is node.reserved and kept[1] == node.room_changes
            and _ahead(kept[2], now))


class DomainStart:
    """A gang's estimate on the domain it holds (`Backfill`), with what it read: the gang,
    the domain's nodes with their `room_changes` and reserved asks, its waiting members (ask,
    count, shape)."""

    __slots__ = ("app", "nodes", "waiting", "estimate")

    def __init__(self, app: App, nodes: list[tuple[Node, int, Ask | None]], waiting: list[tuple[Ask, int, str]],
                 estimate: Estimate | NoEstimate) -> None:
        self.app, self.nodes, self.waiting, self.estimate = app, nodes, waiting, estimate

    def holds(self, app: App, nodes: list[Node], waiting: list[tuple[Ask, int, str]], now: int) -> bool:
        """Whether it holds for `app` on `nodes` with `waiting` at `now`: the same gang, nodes
        (in the same order, each with the same room and reservation) and members, the start
        ahead."""
        start = self.estimate.at if isinstance(self.estimate, Estimate) else None
        if app is not self.app or not _ahead(start, now) or len(nodes) != len(self.nodes) \
                or len(waiting) != len(self.waiting):
            return False
        for (was, changes, reserved), node in zip(self.nodes, nodes, strict=True):
            if was is not node or changes != node.room_changes or reserved is not node.reserved:
                return False
        for (ask, pending, shape), now_ask in zip(self.waiting, waiting, strict=True):
            if ask is not now_ask[0] or pending != now_ask[1] or shape != now_ask[2]:
                return False
        return True


def members_estimate_steps(records: PartitionState, free: FreeNodes, members: list[Res],
                           topology: TopologyRequest | None, now: int) -> Generator[None, None, dict[str, Any]]:
    """When `members` (a job's allocations, a waiting set's or gang's) would start on the free
    nodes, as if first in line: for a `required` topology request, by domain of its level
    (the earliest), else over every free node; `SLICE_ENDS` end bounds read a slice (a dry run
    goes in slices, core/dryrun.py; a read runs it through, `run_through`), over `free`, the
    records' free nodes. The answer's `text`, and with a time, `start`, `nodes` and `waitsFor`."""
    groups: list[list[str] | None] = [None]  # None: every free node
    if topology is not None and topology.mode is TopologyMode.REQUIRED:
        levels = records.config.topology.levels
        if topology.level in levels:
            depth = levels.index(topology.level) + 1
            by_domain: dict[tuple[str, ...], list[str]] = {}
            for c in free.candidates:
                path = path_of(levels, records.nodes[c.id].attributes)
                if len(path) >= depth:
                    by_domain.setdefault(path[:depth], []).append(c.id)
            groups = [by_domain[k] for k in sorted(by_domain)]
    if not free.candidates:
        return {"text": no_candidate(records, members).text()}
    if not free.limited:  # no time to give; but a job that fits no group of nodes even empty is told so
        rooms = {c.id: c.capacity for c in free.candidates}
        if all(too_large([rooms[i] for i in group] if group is not None else list(rooms.values()), members)
               for group in groups if group is None or group):
            return {"text": NoEstimate(NoEstimateReason.TOO_LARGE, [], members).text()}
        return {"text": "no estimate: no allocation on the nodes it could use has a runtime limit"}
    best: Estimate | NoEstimate | None = None
    for group in groups:
        found = yield from free.estimate_steps(members, now, group)
        if isinstance(found, Estimate) and (not isinstance(best, Estimate) or found.at < best.at):
            best = found
        elif best is None:
            best = found
    if isinstance(best, Estimate):
        return {"start": best.at, "text": best.text(now), "nodes": sorted(set(best.nodes)),
                "waitsFor": [{"nodeID": w.node, "allocation": w.key, "end": w.end} for w in best.waits_for]}
    assert best is not None
    return {"text": best.text()}


def groups_estimate_steps(records: PartitionState, free: FreeNodes,
                          groups: list[tuple[list[Res], TopologyRequest | None]],
                          now: int) -> Generator[None, None, dict[str, Any]]:
    """`members_estimate_steps` for a gang whose task groups each go into a domain of their
    own (core/topoplace.py `group_of`): each group's members by its request, and the gang's
    start the latest of theirs (or the first group's reason for none). Each group is judged
    on its own: where two would share a domain's room, the gang may start later."""
    latest: dict[str, Any] | None = None
    for members, request in groups:
        answer = yield from members_estimate_steps(records, free, members, request, now)
        if "start" not in answer:
            return answer
        if latest is None or answer["start"] > latest["start"]:
            latest = answer
    assert latest is not None
    return latest


def no_candidate(records: PartitionState, members: list[Res]) -> NoEstimate:
    """Why no estimate, with no free node to estimate on: every schedulable node is reserved
    (for an ask, or in a domain a gang reserved), or none is schedulable."""
    schedulable = any(n.state is NodeState.SCHEDULABLE for n in records.nodes.values())
    return NoEstimate(NoEstimateReason.NO_NODES, [], members, ALL_RESERVED if schedulable else "no schedulable node")


def run_through(steps: Generator[None, None, T]) -> T:
    """What a computation in slices (a generator that yields between them) answers, run
    through at once: where nothing changes between its slices (a read between two entries)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            answer: T = done.value
            return answer
