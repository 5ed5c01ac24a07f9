"""Time: runtime limits, end bounds, when an ask or a gang can start, and the backfill rule.

The rules of issue 43 (docs/time.md); core/backfill.py feeds them from the live state.
Sans-IO, standard library only beside the core's resources; typed for mypyc (plain classes
with slots, no msgspec Struct); deterministic: no set is iterated, nodes are taken by id,
events by time, then node id, then allocation key; no clock is read (now is an argument).

Theory of operation (log times in ns, as the log's entries give them; limits in ms)
1. **Runtime limit.** An ask's limit is its `executionTimeoutMilliSeconds` when set (> 0),
   else its queue's `ykbus.io/runtime.default`; the queue's `ykbus.io/runtime.max` caps
   either, and is the limit of an ask that has neither. None of the three: no limit
   (`runtime_limit_ms`; the queue's values come from core/config.py `runtime_limits`).
2. **End bound.** An allocation's end bound is its start plus its limit; without a limit it
   has none (`end_bound`). The core ends an allocation that outlives its limit, so the bound
   holds unless the core is told otherwise.
3. **Room over time.** A candidate node's room at log time t is its free room now plus the
   resource of each of its allocations whose end bound is at or before t. A bound already
   past counts at now (the allocation is about to be ended). Room only grows with t, and
   changes only at end bounds.
4. **Earliest start.** The first of now and the end bounds, in time order, at which the ask
   fits: one ask on any candidate node; a gang (its members' shapes in order: count × shape
   is `repeat`) when first fit places every member, in order, on the nodes by id, each on
   the first node whose room, less what the members before it took, covers it (as
   core/topology.py `pack` places a gang). Between two end bounds nothing changes, so no
   earlier time fits (a brute-force test checks every time). For count × shape, and for one
   ask, the estimate never moves later when an allocation goes or a limit comes earlier; a
   gang of mixed shapes is judged as first fit would place it, which may not be monotone.
5. **What it waits for.** The allocations on the nodes the members take at that time whose
   end bounds were passed to reach it, by node id, then end bound, then key.
6. **No estimate**, with the reason (`NoEstimateReason`): no candidate node; the ask does not
   fit the nodes even empty; it would fit only once allocations without a runtime limit end
   (`the allocations in the way have no runtime limit`); or room is held by other than
   allocations (the node's occupied resources) and no end frees enough.
7. **Backfill never delays a reservation.** An ask may take room now on a node reserved for
   another ask (or in a reserved set of nodes) only if its end bound comes at or before the
   reserved ask's estimated start: by then the room it took is back, so the estimate still
   holds (a property test). An ask without a limit never backfills; nor does any ask beside
   a reservation that has no estimate.
8. **Minimum runtime.** An allocation that has run less than its queue's
   `preemption.minruntime` is no victim (`old_enough`).
9. **Text.** Quantities through core/resources.py `fmt_res`; times through `fmt_log_time`
   (`2026-11-28 14:06 UTC, in 12 min`: rounded up to the minute, so never earlier than the
   estimate), durations through `fmt_duration_ms`.

Nothing here changes its inputs; every answer is a value.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from typing import Final, Protocol

from ykbus.core.packing import first_fit
from ykbus.core.packing import repeat as repeat  # (a gang of one shape: for callers of this module)
from ykbus.core.resources import Res, add_into, fits, fmt_res

NS_PER_MS: Final = 1_000_000
NS_PER_MIN = 60_000_000_000
NS_PER_S: Final = 1_000_000_000


# --- 1, 2, 8: limits and bounds ------------------------------------------------------------


def runtime_limit_ms(timeout_ms: int, default_ms: int, max_ms: int) -> int | None:
    """Rule 1: the runtime limit of an ask in ms, None for none. `timeout_ms`: its
    `executionTimeoutMilliSeconds` (0 or less: not set); `default_ms`, `max_ms`: its
    queue's (0: not set)."""
    limit = timeout_ms if timeout_ms > 0 else default_ms
    if max_ms > 0 and (limit <= 0 or limit > max_ms):
        limit = max_ms
    return limit if limit > 0 else None


def end_bound(start_ns: int, limit_ms: int | None) -> int | None:
    """Rule 2: the log time (ns) by which an allocation started at `start_ns` has ended."""
    if limit_ms is None:
        return None
    return start_ns + limit_ms * NS_PER_MS


def old_enough(start_ns: int, now_ns: int, min_runtime_ms: int) -> bool:
    """Rule 8: whether an allocation started at `start_ns` may be a victim at `now_ns`."""
    return min_runtime_ms <= 0 or now_ns - start_ns >= min_runtime_ms * NS_PER_MS


# --- inputs -------------------------------------------------------------------------------


class Holding:
    """An allocation on a candidate node as the estimate sees it: its key, its end bound
    (None: no runtime limit) and its resource."""

    __slots__ = ("key", "end", "resource")

    def __init__(self, key: str, end: int | None, resource: Res) -> None:
        self.key, self.end, self.resource = key, end, resource

    def __repr__(self) -> str:
        return f"Holding({self.key!r}, {self.end}, {self.resource})"


class Bound(Protocol):
    """An allocation with an end bound, as `one_node_start` reads it (a core `Alloc`)."""

    end: int
    uuid: str
    resource: Res


class Candidate:
    """A node the ask could use: its capacity, its free room now and its allocations."""

    __slots__ = ("id", "capacity", "free", "holdings")

    def __init__(self, node_id: str, capacity: Res, free: Res, holdings: Sequence[Holding]) -> None:
        self.id, self.capacity, self.free = node_id, capacity, free
        self.holdings: list[Holding] = list(holdings)

    def __repr__(self) -> str:
        return f"Candidate({self.id!r}, {self.capacity}, {self.free}, {self.holdings})"


# --- results ------------------------------------------------------------------------------


class Waited:
    """One allocation whose end an estimate waits for."""

    __slots__ = ("node", "key", "end")

    def __init__(self, node: str, key: str, end: int) -> None:
        self.node, self.key, self.end = node, key, end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Waited) and (self.node, self.key, self.end) == (other.node, other.key, other.end)

    def __hash__(self) -> int:
        return hash((self.node, self.key, self.end))

    def __repr__(self) -> str:
        return f"Waited({self.node!r}, {self.key!r}, {self.end})"


class Estimate:
    """Rule 4: the ask (gang) fits at log time `at`; `nodes`: the node of each member then;
    `waits_for`: rule 5."""

    __slots__ = ("at", "nodes", "waits_for")

    def __init__(self, at: int, nodes: list[str], waits_for: list[Waited]) -> None:
        self.at, self.nodes, self.waits_for = at, nodes, waits_for

    def text(self, now_ns: int | None) -> str:
        """`estimated start 2026-11-28 14:06 UTC, in 12 min, when 3 allocations on node n7 end`
        (`now_ns` None: without `in 12 min`, as the RM's reason says it, once)."""
        when = fmt_utc_minute(self.at) if now_ns is None else fmt_log_time(self.at, now_ns)
        out = f"estimated start {when}"
        if not self.waits_for:
            return out
        per_node: list[tuple[str, int]] = []
        for w in self.waits_for:  # sorted by node: count runs
            if per_node and per_node[-1][0] == w.node:
                per_node[-1] = (w.node, per_node[-1][1] + 1)
            else:
                per_node.append((w.node, 1))
        if len(per_node) > 3:
            return f"{out}, when {_allocations(len(self.waits_for))} on {len(per_node)} nodes end"
        parts = [f"{_allocations(n) if i == 0 else n} on node {node}" for i, (node, n) in enumerate(per_node)]
        joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"{out}, when {joined} {'ends' if len(self.waits_for) == 1 else 'end'}"

    def __repr__(self) -> str:
        return f"Estimate({self.at}, {self.nodes}, {self.waits_for})"


def _allocations(n: int) -> str:
    return "1 allocation" if n == 1 else f"{n} allocations"


class NoEstimateReason(enum.Enum):
    NO_NODES = "no candidate node"
    TOO_LARGE = "it does not fit the candidate nodes even when they are empty"
    NO_LIMIT = "the allocations in the way have no runtime limit"
    OCCUPIED = "room on the candidate nodes is held by other than allocations"


ALL_RESERVED = "every schedulable node is reserved for another ask or by a gang"


class NoEstimate:
    """Rule 6: no time can be given, and why. `blockers`: for `NO_LIMIT`, the allocations
    without a limit on the candidate nodes, as (node id, key), by node then key. `note`: why,
    said after the reason (for `NO_NODES`, why there is none)."""

    __slots__ = ("reason", "blockers", "members", "note")

    def __init__(self, reason: NoEstimateReason, blockers: list[tuple[str, str]], members: Sequence[Res],
                 note: str = "") -> None:
        self.reason, self.blockers, self.members, self.note = reason, blockers, list(members), note

    def text(self) -> str:
        """`no estimate: the allocations in the way have no runtime limit`."""
        out = f"no estimate: {self.reason.value}"
        if self.reason is NoEstimateReason.TOO_LARGE:
            return f"{out} ({describe(self.members)})"
        return f"{out} ({self.note})" if self.note else out

    def __repr__(self) -> str:
        return f"NoEstimate({self.reason.name}, {self.blockers})"


def describe(members: Sequence[Res]) -> str:
    """`16 × {gpu: 8}` for count × shape, else each member's shape, by `fmt_res`."""
    if not members:
        return "nothing"
    first = members[0]
    if all(m == first for m in members):
        return fmt_res(first) if len(members) == 1 else f"{len(members)} × {fmt_res(first)}"
    return " + ".join(fmt_res(m) for m in members)


# --- 3, 4, 5, 6: the estimate -------------------------------------------------------------


def _slots(room: Res, shape: Res, cap: int) -> int:
    """How many members of `shape` fit in `room`, at most `cap`."""
    best = cap
    for name, value in shape.items():
        if value > 0:
            n = room.get(name, 0) // value
            if n < best:
                best = n if n > 0 else 0
    return best


def pack(rooms: Sequence[Res], members: Sequence[Res]) -> list[int] | None:
    """Rule 4's first fit (core/packing.py): the index of the node each member takes, in
    order, or None when one fits nowhere. Nothing is changed."""
    placed = first_fit(rooms.__getitem__, len(rooms), members, stop_at_miss=True)
    return placed if len(placed) == len(members) else None


class EndEvent:
    """Room coming back: at log time `at`, `resource` on the candidate node of index `node`,
    the end bound of allocation `key`."""

    __slots__ = ("at", "node", "key", "resource")

    def __init__(self, at: int, node: int, key: str, resource: Res) -> None:
        self.at, self.node, self.key, self.resource = at, node, key, resource


def _candidate_id(c: Candidate) -> str:
    return c.id


def earliest_start(candidates: Sequence[Candidate], members: Sequence[Res], now_ns: int) -> Estimate | NoEstimate:
    """Rules 3 to 6: when the ask (one member) or the gang (its members, in order) can start
    on `candidates` at the earliest, from now on, if every allocation runs to its end bound
    and nothing else changes. The order of the inputs does not matter.

    Cost: O(H log H) for the H allocations' end bounds, plus `sweep`'s."""
    nodes = sorted(candidates, key=_candidate_id)
    early = at_once(nodes, members, now_ns)
    if early is not None:
        return early
    # (at, node, key, index of its resource), sorted as they are: a node's holdings have
    # distinct keys, so no two compare past the key, and no key function is called per
    # comparison; an EndEvent is made only for the bounds the sweep reads
    order: list[tuple[int, int, str, int]] = []
    resources: list[Res] = []
    for i, c in enumerate(nodes):
        for h in c.holdings:
            if h.end is not None:
                order.append((h.end if h.end > now_ns else now_ns, i, h.key, len(resources)))
                resources.append(h.resource)
    order.sort()
    found = sweep(nodes, members, now_ns, _end_events(order, resources))
    return found if found is not None else no_estimate(nodes, members)


def one_node_start(node_id: str, capacity: Res, free: Res, ends: Sequence[Bound], ending: Res, member: Res,
                   now_ns: int) -> Estimate | None:
    """`earliest_start` of one member on one node (a reserved node's estimate, asked at each
    change of its room; the free nodes' for one allocation, node by node): the same
    `Estimate`, without the general sweep. `ends`: the node's allocations with a runtime
    limit, sorted by end bound then key (the ledger keeps them so, `Node.ends`); `ending`:
    the sum of their resources (of those the member asks, at least). None where
    `earliest_start` gives a `NoEstimate` (the caller asks it why). (tests/core/test_timeline.py
    compares the two.)"""
    if fits(member, free) and fits(member, capacity):  # now, waiting for nothing
        return Estimate(now_ns, [node_id], [])
    at = one_node_at(capacity, free, ends, ending, member, now_ns)
    if at is None:
        return None
    waits: list[Waited] = []
    for b in ends:  # what it waits for: every allocation ended by then
        end = b.end
        if end > at:
            break
        waits.append(Waited(node_id, b.uuid, end if end > now_ns else now_ns))
    if ends and ends[0].end < now_ns:  # (bounds passed count as ending now: by key among them)
        waits.sort(key=waited_key)
    return Estimate(at, [node_id], waits)


def one_node_at(capacity: Res, free: Res, ends: Sequence[Bound], ending: Res, member: Res,
                now_ns: int) -> int | None:
    """`one_node_start`'s time alone. The sorted end bounds are walked from both sides, a
    step of each in turn, until either finds it: from the latest, counting what may still
    run until it is more than the node can spare beside the member (`free + ending -
    member`); from the earliest, giving room back until the member fits. So it reads the
    fewer of the allocations that run past the start and those that end by it: one for a
    whole node."""
    spare: Res = {}  # per resource the member asks: what may still run beside it (less as the back walk counts)
    short: Res = {}  # per resource the member lacks now (less as the front walk gives room back)
    for r, v in member.items():
        if v > capacity.get(r, 0):  # too large: one member's first fit is its fit
            return None
        f = free.get(r, 0)
        left = f + ending.get(r, 0) - v
        if left < 0:  # not even once every allocation with a limit has ended
            return None
        spare[r] = left
        if f < v:
            short[r] = v - f
    if not short:
        return now_ns
    i, j, n = 0, len(ends), len(ends)
    while i < n and j > 0:
        j -= 1
        end = ends[j].end
        for r, v in ends[j].resource.items():  # back: it runs up to the start, or it is what the member waits for
            if r in spare:
                left = spare[r] - v
                if left < 0:
                    return end if end > now_ns else now_ns
                spare[r] = left
        at = ends[i].end
        if at < now_ns:
            at = now_ns
        while i < n and ends[i].end <= at:  # front: every bound of one time (passed ones: now), then the fit
            for r, v in ends[i].resource.items():
                if r in short:
                    left = short[r] - v
                    if left > 0:
                        short[r] = left
                    else:
                        del short[r]
            i += 1
        if not short:
            return at
    return None  # (not reached: `spare` says the member fits once every bound has passed)


def _end_events(order: list[tuple[int, int, str, int]], resources: list[Res]) -> Iterator[EndEvent]:
    for at, node, key, r in order:
        yield EndEvent(at, node, key, resources[r])


def at_once(nodes: list[Candidate], members: Sequence[Res], now_ns: int) -> Estimate | NoEstimate | None:
    """What needs no end bound: no node, nothing to place (now), or members that do not fit
    the nodes even empty (as `no_estimate` would say once every bound had passed)."""
    if not nodes:
        return NoEstimate(NoEstimateReason.NO_NODES, [], members)
    if not members:
        return Estimate(now_ns, [], [])
    if too_large([c.capacity for c in nodes], members):
        return NoEstimate(NoEstimateReason.TOO_LARGE, [], members)
    return None


def too_large(capacities: list[Res], members: Sequence[Res]) -> bool:
    """Whether the members fit the nodes at no time, by what holds for any placement: for
    one shape, first fit on the empty nodes (exact there: each node takes what it can); for
    mixed shapes, a member that no node holds empty, or a sum past the nodes' sum. First fit
    of mixed shapes on the empty nodes is no proof: it can miss a placement that fits the
    nodes' room now (a bigger room leads it elsewhere)."""
    first = members[0]
    if all(m == first for m in members):
        return pack(capacities, members) is None
    if any(not any(fits(m, c) for c in capacities) for m in members):
        return True
    wanted: Res = {}
    total: Res = {}
    for m in members:
        add_into(wanted, m)
    for c in capacities:
        add_into(total, c)
    return not fits(wanted, total)


def sweep(nodes: list[Candidate], members: Sequence[Res], now_ns: int,
          events: Iterator[EndEvent]) -> Estimate | None:
    """Rule 4 over `nodes` (by id; their holdings are not read) whose room comes back at
    `events`: the end bounds of their allocations in time order (each at now at the
    earliest; `node` an index into `nodes`), read only as far as needed. None when the
    members fit at none of them (`no_estimate` says why)."""
    room = Sweep(nodes, members, now_ns)
    applied: list[EndEvent] = []
    upcoming = next(events, None)
    at = now_ns
    while True:
        placed = room.placement()
        if placed is not None:
            return _estimate(nodes, members, placed, applied, at)
        if upcoming is None:
            return None
        at = upcoming.at
        while upcoming is not None and upcoming.at == at:
            room.back(upcoming.node, upcoming.resource)
            applied.append(upcoming)
            upcoming = next(events, None)


class Sweep:
    """Rule 4's room over time, fed as it goes: the room of `nodes` (by id), and of the
    members, how many each node takes (one shape) or their sum (mixed). Its caller gives the
    room that comes back (`back`), all of one end bound at a time, in time order, and asks
    whether the members fit (`placement`) between two end bounds.

    Cost: O(1) a room given back; `placement`, for members of one shape O(1) until the
    nodes hold them all, else one first fit, O(nodes + members), once the summed room
    covers them."""

    __slots__ = ("members", "rooms", "first", "uniform", "count", "wanted", "summed", "slots", "held")

    def __init__(self, nodes: list[Candidate], members: Sequence[Res], now_ns: int) -> None:
        self.members = members
        self.rooms: list[Res] = [dict(c.free) for c in nodes]
        self.first = members[0]
        self.uniform = all(m == self.first for m in members)
        self.count = len(members)
        self.wanted: Res = {}
        for m in members:
            add_into(self.wanted, m)
        self.summed: Res = {}
        for r in self.rooms:
            add_into(self.summed, r)
        self.slots = [_slots(r, self.first, self.count) for r in self.rooms] if self.uniform else []
        self.held = sum(self.slots)

    def back(self, node: int, resource: Res) -> None:
        """`resource` is back on the node of index `node`."""
        room = self.rooms[node]
        add_into(room, resource)
        if self.uniform:
            before = self.slots[node]
            if before < self.count:
                after = self.slots[node] = _slots(room, self.first, self.count)
                self.held += after - before
        else:
            add_into(self.summed, resource)

    def placement(self) -> list[int] | None:
        """The node index of each member if they fit the room now (first fit), else None."""
        if self.uniform:
            return pack(self.rooms, self.members) if self.held >= self.count else None
        return pack(self.rooms, self.members) if fits(self.wanted, self.summed) else None


def _estimate(nodes: list[Candidate], members: Sequence[Res], placed: list[int], applied: list[EndEvent],
              at: int) -> Estimate:
    used: dict[int, bool] = dict.fromkeys(placed, True)
    waits = [Waited(nodes[e.node].id, e.key, e.at) for e in applied if e.node in used]
    waits.sort(key=waited_key)
    return Estimate(at, [nodes[i].id for i in placed], waits)


def waited_key(w: Waited) -> tuple[str, int, str]:
    return (w.node, w.end, w.key)


def no_estimate(nodes: list[Candidate], members: Sequence[Res]) -> NoEstimate:
    """Rule 6, once every end bound of `nodes`' holdings has passed and the members still do
    not fit."""
    if pack([c.capacity for c in nodes], members) is None:
        return NoEstimate(NoEstimateReason.TOO_LARGE, [], members)
    everything: list[Res] = []
    for c in nodes:
        room = dict(c.free)
        for h in c.holdings:
            add_into(room, h.resource)
        everything.append(room)
    if pack(everything, members) is None:
        return NoEstimate(NoEstimateReason.OCCUPIED, [], members)
    blockers = [(c.id, h.key) for c in nodes for h in c.holdings if h.end is None]
    blockers.sort()
    return NoEstimate(NoEstimateReason.NO_LIMIT, blockers, members)


# --- 7: backfill --------------------------------------------------------------------------


def may_backfill(end: int | None, reserved_start: int | None) -> bool:
    """Rule 7: whether an ask whose end bound is `end` may take room now where an ask is
    reserved whose estimated start is `reserved_start` (None: it has no estimate)."""
    return end is not None and reserved_start is not None and end <= reserved_start


class Reservation:
    """A reserved ask, the nodes it holds (one, or a gang's set) and its estimated start
    (None: no estimate). `nodes` may repeat a node (an `Estimate`'s per member): kept once."""

    __slots__ = ("key", "nodes", "start")

    def __init__(self, key: str, nodes: Sequence[str], start: int | None) -> None:
        self.key, self.nodes, self.start = key, tuple(sorted(dict.fromkeys(nodes))), start


def backfill_refusal(end: int | None, node_id: str, reservations: Sequence[Reservation], now_ns: int) -> str:
    """Rule 7 on one node: "" when an ask of end bound `end` may take room on `node_id` now
    beside every reservation that holds it, else why not (the first refusing reservation by
    key)."""
    for r in sorted(reservations, key=_reservation_key):
        if node_id not in r.nodes or may_backfill(end, r.start):
            continue
        if end is None:
            return f"it has no runtime limit, and node {node_id} is reserved for {r.key}"
        if r.start is None:
            return f"node {node_id} is reserved for {r.key}, which has no estimated start"
        return (f"it may run until {fmt_log_time(end, now_ns)}, after the estimated start of {r.key} "
                f"on node {node_id} ({fmt_log_time(r.start, now_ns)})")
    return ""


def _reservation_key(r: Reservation) -> str:
    return r.key


# --- 9: text ------------------------------------------------------------------------------


def _civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of `days` after 1970-01-01, by integer
    arithmetic over 400-year eras (no clock, no calendar module)."""
    z = days + 719_468  # days from 0000-03-01
    era = z // 146_097
    doe = z - era * 146_097  # day of the era, 0..146096
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)  # day of the year from March 1
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def fmt_utc_minute(at_ns: int) -> str:
    """`2026-11-28 14:06 UTC`: the log time rounded up to the minute."""
    return _utc_text(-(-at_ns // NS_PER_MIN) * 60, False)


def fmt_utc_second(at_ns: int) -> str:
    """`2026-11-28 14:05:20 UTC`: the log time rounded up to the second (a moment from which
    something holds, as a minimum runtime's end: never before the time said)."""
    return _utc_text(-(-at_ns // NS_PER_S), True)


def _utc_text(seconds: int, with_seconds: bool) -> str:
    """The civil UTC date and time of `seconds` since the epoch."""
    days, rest = divmod(seconds, 86_400)
    year, month, day = _civil(days)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}"
    return f"{text}:{second:02d} UTC" if with_seconds else f"{text} UTC"


def fmt_in(delta_ns: int) -> str:
    """`in 12 min`, `in 2 h 5 min`, `in 3 d 4 h`, rounded up; `now` for no time."""
    if delta_ns <= 0:
        return "now"
    minutes = -(-delta_ns // NS_PER_MIN)
    if minutes < 60:
        return f"in {minutes} min"
    if minutes < 48 * 60:
        hours, mins = divmod(minutes, 60)
        return f"in {hours} h" + (f" {mins} min" if mins else "")
    days, mins = divmod(minutes, 1440)
    hours = -(-mins // 60)
    if hours == 24:
        days, hours = days + 1, 0
    return f"in {days} d" + (f" {hours} h" if hours else "")


def fmt_log_time(at_ns: int, now_ns: int) -> str:
    """`2026-11-28 14:06 UTC, in 12 min`: a log time, and how far it is from the log's now."""
    return f"{fmt_utc_minute(at_ns)}, {fmt_in(at_ns - now_ns)}"


def fmt_duration_ms(ms: int) -> str:
    """`500 ms`, `45 s`, `30 min`, `1 h 30 min`, `2 d 1 h` (whole units, larger ones first;
    what is below the second unit shown is dropped)."""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds} s"
    for unit, size, sub, sub_size in (("d", 86_400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if seconds >= size:
            whole, rest = divmod(seconds, size)
            part = rest // sub_size
            return f"{whole} {unit}" + (f" {part} {sub}" if part else "")
    return f"{seconds} s"
