"""A topology gang's place (issue 42, docs/topology.md): the planner's side of core/topology.py.

A gang whose application asks for a topology domain (`ykbus.io/topology-required` or
`-preferred` on the application) is placed whole inside one domain of its partition's
`topology.levels`: `TopologyPlacer.place` builds the domains from the nodes as they are
(the schedulable nodes of the node index, those reserved for an ask with no room), chooses the one
that would have the least room left after the gang (best fit, core/topology.py `choose`)
and puts each member on a node of it in the partition's node order (first fit). What it
finds is a value: the nodes, or the reason no domain holds the gang. It reads only: the
planner calls it as a what-if (core/gang.py `plan_gang`), and nothing is booked until the
whole gang is.

The domains are the planner's `DomainIndex`, built at the first topology gang and kept as
nodes move (`Scheduler.state_changed`: O(levels) a node moved), a node reserved for an ask
counted with no room; a walk reads it as it is, with the node order of the moment.
"""

from __future__ import annotations

from collections.abc import Sequence

from ykbus.core.backfill import Backfill, domain_estimate, held_estimate, limits_in_use
from ykbus.core.lifecycle import NodeState
from ykbus.core.model import App, Ask, Node, Shape
from ykbus.core.packing import dominant_in, packed, packed_whole
from ykbus.core.resources import Res
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.state import PartitionState
from ykbus.core.timeline import Estimate
from ykbus.core.topology import (
    ANYWHERE,
    Domain,
    DomainIndex,
    Fit,
    TopologyMode,
    TopologyRequest,
    choose,
    dominant,
    effective_request,
    pack,
    place_groups,
    request_of,
    short,
    total_of,
    within,
)


def gang_request(part: PartitionState, app: App, now: int) -> tuple[TopologyRequest | None, bool] | None:
    """How a gang asks to be placed in topology domains (docs/topology.md): its
    application's request (its task groups' own and its remembered domains are read by
    `GangDomain`), and whether it may reserve a domain now (waiting past the reservation
    delay, nothing kept: `GangDomain` reserves for a `required` group); None when it asks for
    none, or its partition has no levels."""
    if not part.config.topology.levels:
        return None
    request = request_for(part, app.tags)
    placeholders = [a for a in app.asks.values() if a.placeholder and a.pending]
    own = any(request_of(a.tags) is not None for a in placeholders)
    if request is None and not app.domains and not own and app.reserved_domain() is None:
        return None
    return request, not app.domains and app.holding is None and waited_delay(part, app, now)


def waited_delay(part: PartitionState, app: App, now: int) -> bool:
    """Whether a pending placeholder of `app`'s gang has waited for room the partition's
    reservation delay (it may reserve a domain, or nodes)."""
    delay = part.reservation_delay_ns
    return any(a.placeholder and a.pending and a.since and now - a.since >= delay for a in app.asks.values())


class NodeSetHold:
    """A gang that asks for no topology domain, in a queue whose `ykbus.io/gang.reserve` is
    true (docs/gang.md): the nodes it reserved (`held`, out of the node index: its planning
    alone sees them), or, waiting for room past the reservation delay with none reserved,
    the nodes it would reserve (`choose`). Reads only: the planner's (core/gang.py `plan_gang`)."""

    __slots__ = ("part", "app", "now", "backfill", "held")

    def __init__(self, part: PartitionState, app: App, now: int, backfill: Backfill | None) -> None:
        self.part, self.app, self.now, self.backfill = part, app, now, backfill
        held, nodes = app.reserved_nodes(), part.nodes
        self.held: list[Node] | None = [nodes[i] for i in held if i in nodes] if held is not None else None

    @staticmethod
    def wanted(part: PartitionState, app: App, now: int) -> bool:
        """Whether `app`'s gang holds a node set, or may reserve one now: past the reservation
        delay, holding nothing, in a queue that reserves."""
        if app.holding is not None:
            return app.reserved_nodes() is not None
        return app.queue.gang_reserves() and waited_delay(part, app, now)

    def choose(self, members: list[Res]) -> list[Node] | None:
        """The nodes to reserve for `members`: the fewest of the candidates, taken best first,
        that hold them all with nothing of the scheduler's on them (their capacity less what
        others occupy), packed as a reserved domain is judged (core/packing.py `packed`: first
        fit in the order given, else largest first in one resource, each resource tried), and of
        those the nodes the packing uses. Candidates: the schedulable nodes in the node index
        (not reserved by a gang) not freeing room for an ask; best first: one not reserved for an
        ask before one that is (its ask gives it up: where single asks reserve each node as it
        frees, a gang, which needs its whole set at once, would never find one), then the one
        missing the least now of the member largest in the members' dominant resource (as a
        fraction of it, as a reservation of one ask ranks), then by node id. None when the
        candidates cannot hold them even empty."""
        if not members:
            return None
        total = total_of(members)
        resource = dominant_in(total, self.part.total)
        largest = max(members, key=lambda m: m.get(resource, 0))  # (the first of the largest)
        ranked: list[tuple[bool, float, str, Node]] = []
        for node in self.part.nodes.values():
            if node.key is None or node.preempting:
                continue
            free = node.free
            missing = 0.0
            for r, v in largest.items():
                missing += max(0, v - free.get(r, 0)) / v if v else 0.0
            ranked.append((node.reserved is not None, missing, node.id, node))
        ranked.sort()
        rooms = [entry[3].empty_room() for entry in ranked]
        whole = packed_whole(rooms.__getitem__, len(rooms), members)
        if whole is None:
            return None
        low, high = 1, len(rooms)  # the fewest first candidates that hold them (more never hold fewer)
        while low < high:
            mid = (low + high) // 2
            if packed_whole(rooms.__getitem__, mid, members) is not None:
                high = mid
            else:
                low = mid + 1
        used = packed_whole(rooms.__getitem__, low, members) or whole
        return [ranked[i][3] for i in sorted(set(used))]

    def none_text(self, members: list[Res]) -> str:
        """Why `choose` found none: the cluster cannot hold the gang even empty, or only with
        the nodes other gangs reserved."""
        rooms = [n.empty_room() for n in self.part.nodes.values() if n.state is NodeState.SCHEDULABLE]
        anywhere = packed_whole(rooms.__getitem__, len(rooms), members) is not None
        return ("; the nodes other gangs did not reserve would not hold it even empty: it reserves none" if anywhere
                else "; no set of schedulable nodes would hold it even empty: it reserves none")

    def reserved_text(self, nodes: Sequence[Node]) -> tuple[str, dict[str, object]]:
        """`; nodes a, b are reserved for it` (and its estimated start, with limits in use)."""
        names = ", ".join(n.id for n in nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
        estimate, details = held_estimate(self.app, nodes, self.now, self.backfill if self.held else None)
        return (f"; {'node' if len(nodes) == 1 else 'nodes'} {names} {'is' if len(nodes) == 1 else 'are'} "
                f"reserved for it{estimate}", {"reserved": [n.id for n in nodes], **details})


def asks_for_domains(app: App) -> bool:
    """Whether an application without placeholders asks for topology domains: its tag, or
    a pending ask's own (its sets are then placed whole, core/gang.py `plan_sets`)."""
    return request_of(app.tags) is not None or any(request_of(a.tags) is not None for a in app.asks.values()
                                                   if a.pending)


def in_set(app: App, ask: Ask) -> bool:
    """Whether `ask` of an application without placeholders is placed with the set it was
    sent in (its tags or its application's ask for a domain)."""
    return request_of(ask.tags) is not None or request_of(app.tags) is not None


def waits_whole(app: App, ask: Ask, levels: tuple[str, ...]) -> bool:
    """Whether `ask`, waiting for node room, waits with the asks it is judged with: those of
    a gang, or of a topology set (the partition has `levels`). It waits at its shape in
    `WaitPlaces`, woken by any node whose room fits the shape, never behind the shape's room
    gate: what is behind a gate found no node for its shape (core/waits.py), which a set
    that no domain holds says nothing of."""
    return bool(app.gang) or (bool(levels) and in_set(app, ask))


def kept_domain(part: PartitionState, app: App, ask: Ask) -> tuple[str, tuple[str, ...]] | None:
    """The remembered domain a placed gang's real ask goes back into (its group's, else its
    application's), None when none is kept at a level the partition has now."""
    kept = app.domains.get(group_of(ask)) or app.domains.get("")
    return kept if kept is not None and kept[0] in part.config.topology.levels else None


def request_for(part: PartitionState, app_tags: dict[str, str]) -> TopologyRequest | None:
    """The topology an application's gang asks for, if its partition has levels (the
    intake refused an application naming a level the partition does not have)."""
    if not part.config.topology.levels:
        return None
    return effective_request(app_tags, {})


class NodeDomains:
    """The planner's domains of the partition's nodes: built at the first topology gang
    (again when the levels change), kept as nodes move (`node_moved`, from
    `Scheduler.state_changed`: O(levels)), dropped when the nodes are reindexed. A node
    reserved for an ask takes nothing else: it counts with no room while reserved (a
    reservation moves no node: `current` looks, once a walk)."""

    __slots__ = ("part", "node_index", "index", "zeroed")

    def __init__(self, part: PartitionState, node_index: SortedSeq) -> None:
        self.part, self.node_index = part, node_index
        self.index: DomainIndex | None = None
        self.zeroed: dict[str, None] = {}  # the nodes counted with no room: reserved for an ask

    def reset(self) -> None:
        self.index = None

    def node_moved(self, node: Node) -> None:
        index = self.index
        if index is not None:
            schedulable = node.state is NodeState.SCHEDULABLE  # (a node of a reserved domain too: its gang sees it)
            if not schedulable:  # in no domain
                self.zeroed.pop(node.id, None)
            index.set_node(node.id, node.attributes, schedulable, {} if node.id in self.zeroed else node.free)

    def current(self) -> DomainIndex:
        nodes, levels = self.part.nodes, self.part.config.topology.levels
        index = self.index
        if index is None or index.levels != levels:
            index = self.index = DomainIndex(levels)
            self.zeroed = {}
            for node in nodes.values():
                index.set_node(node.id, node.attributes, node.state is NodeState.SCHEDULABLE, node.free)
        for key in self.node_index:
            self._zero(nodes[key[1]], index)
        for values in self.part.domain_holds:  # (reserved domains' nodes are out of the node index)
            held = index.domain(len(values) - 1, values) if len(values) <= len(levels) else None
            if held is not None:
                for node_id in held.node_ids:
                    self._zero(nodes[node_id], index)
        return index

    def _zero(self, node: Node, index: DomainIndex) -> None:
        """A node reserved for an ask counts with no room; back with its room once not."""
        zeroed = self.zeroed
        if (node.reserved is not None) != (node.id in zeroed):
            if node.reserved is not None:
                zeroed[node.id] = None
                index.set_free(node.id, {})
            else:
                del zeroed[node.id]
                index.set_free(node.id, node.free)


class TopologyPlacer:
    """The topology domains as one walk of the planner sees them (core/gang.py's
    `DomainPlacer` for each gang that asks for a domain): built at the walk's first such
    gang, from the nodes as they are, and kept for the walk (nothing is booked during a walk;
    the planner drops it at the next). A gang that no domain holds gives the same reason as
    an earlier one of the walk with the same request and members (a walk is judged against
    one state): it is looked up, not packed again."""

    __slots__ = ("part", "node_index", "index", "backfill", "order", "no_domain", "no_room")

    def __init__(self, part: PartitionState, node_index: SortedSeq, index: DomainIndex, backfill: Backfill) -> None:
        self.part, self.node_index = part, node_index
        self.index = index  # the planner's, kept as nodes move (`Scheduler.state_changed`)
        self.backfill = backfill  # the planner's estimates of the reservations (a held gang's is read there)
        self.order: list[str] = []
        # (request, the members' shapes) -> why no domain holds them, in this walk
        self.no_domain: dict[tuple[TopologyRequest, tuple[int, ...]], tuple[str, dict[str, object]]] = {}
        # (a placed gang's kept domain, a lost member's shape) -> why the domain has no room
        # for it, in this walk: its other lost members of that shape wait for the same reason
        self.no_room: dict[tuple[tuple[str, tuple[str, ...]], Shape], tuple[str, dict[str, object]]] = {}

    def in_order(self) -> list[str]:
        order = self.order
        if not order:
            order.extend([key[1] for key in self.node_index])  # the schedulable nodes, in the partition's node order
        return order

    def for_gang(self, app: App, app_request: TopologyRequest | None, may_hold: bool, now: int = 0) -> GangDomain:
        return GangDomain(self, app, app_request, may_hold, now)

    def nodes_of(self, kept: tuple[str, tuple[str, ...]]) -> list[Node]:
        """The schedulable nodes of a kept domain, by node id."""
        domain = self.index.domain(self.index.level_index(kept[0]), kept[1])
        nodes = self.part.nodes
        return [nodes[node_id] for node_id in domain.node_ids] if domain is not None else []

    def lost_member(self, ask: Ask, kept: tuple[str, tuple[str, ...]]) -> Node | tuple[str, dict[str, object]]:
        """A lost member of a placed gang, asked again: the first node of the gang's domain
        `kept` in the partition's node order with room for it, or why there is none (looked
        up for another lost member of that shape and domain earlier in the walk)."""
        key = (kept, ask.shape)
        known = self.no_room.get(key)
        if known is not None:
            return known
        fit = within(self.index, [ask.resource], kept[0], kept[1], self.in_order())
        if isinstance(fit, Fit):
            return self.part.nodes[fit.nodes[0]]
        reason = self.no_room[key] = (fit.message, fit.details())
        return reason

    def in_order_with(self, holding: tuple[str, tuple[str, ...]]) -> list[str]:
        """The node order with the nodes of a gang's reserved domain among them (they are
        out of the node index: no one else sees them), for that gang's placement."""
        part = self.part
        scorer, nodes = part.scorer, part.nodes
        level = self.index.level_index(holding[0]) if holding[0] in self.index.levels else -1
        own = self.index.domain(level, holding[1]) if level >= 0 else None
        if own is None:
            return self.in_order()
        keys = list(self.node_index)
        keys.extend([scorer.key(nodes[node_id]) for node_id in own.node_ids])
        keys.sort()
        return [key[1] for key in keys]

    def empty_room(self, node_id: str) -> Res:
        """A node's room with nothing of the scheduler's on it (`Node.empty_room`): a reason
        says whether a domain would hold a gang even so."""
        return self.part.nodes[node_id].empty_room()

    def place(self, request: TopologyRequest, members: Sequence[Res]) -> list[Node] | tuple[str, dict[str, object]]:
        key = (request, tuple([id(r) for r in members]))  # (members' vectors are interned: one object a shape)
        known = self.no_domain.get(key)
        if known is not None:
            return known
        found = choose(self.index, members, request, self.in_order(), empty=self.empty_room)
        if isinstance(found, Fit):
            nodes = self.part.nodes
            return [nodes[node_id] for node_id in found.nodes]
        reason = found.message, found.details()  # (the code is the reason's own: why.TOPOLOGY_NO_DOMAIN)
        self.no_domain[key] = reason
        return reason


class GangPlaced:
    """Where a topology gang goes: one (placeholder ask, node) per allocation, and the
    domain of each group placed `required` (group key, level, the domain's values): the
    gang's domain, remembered for its lost members."""

    __slots__ = ("places", "domains")

    def __init__(self, places: list[tuple[Ask, Node]], domains: list[tuple[str, str, tuple[str, ...]]]) -> None:
        self.places, self.domains = places, domains


def group_of(ask: Ask) -> str:
    """The topology group of a gang's ask: its task group when its own tags ask for a
    domain (one role in a domain of its own), else "" (the application's request, shared by
    every member without its own)."""
    return ask.task_group if request_of(ask.tags) is not None else ""


def holds_when_empty(rooms: list[Res], members: list[Res], resource: str) -> bool:
    """Whether nodes of `rooms` (each with nothing of the scheduler's on it) hold `members`,
    packed as placement packs them (core/packing.py `packed`)."""
    return len(packed(rooms.__getitem__, len(rooms), members, True, resource)) == len(members)


class NoPlace:
    """Why no domain holds a topology gang now (`message`, `details`: the reason), and the
    domain it reserves (`hold`: its values at `level`; None: it reserves none now)."""

    __slots__ = ("message", "details", "level", "hold", "request", "members")

    def __init__(self, message: str, details: dict[str, object], level: str = "",
                 hold: tuple[str, ...] | None = None) -> None:
        self.message, self.details, self.level, self.hold = message, details, level, hold
        self.request: TopologyRequest | None = None  # the request of the group that found no domain
        self.members: list[Ask] = []  # its asks


class GangDomain:
    """One gang's members, placed by the walk's domains (core/gang.py's `DomainPlacer`):
    each group (`group_of`) in a domain of its own, in the order the groups' first members
    came, each beside what the groups before it took; a group whose required domain is
    remembered (placed before, some of it lost) goes back into it. A gang that reserved a
    domain (`App.holding`) sees that domain's nodes, which no one else does; one that may
    reserve (`may_hold`: past the reservation delay, none kept) and finds no domain reserves
    the one closest to holding the first of its groups that found none, if that group is
    `required`."""

    __slots__ = ("domains", "app", "app_request", "remembered", "may_hold", "now")

    def __init__(self, domains: TopologyPlacer, app: App, app_request: TopologyRequest | None,
                 may_hold: bool, now: int = 0) -> None:
        self.domains, self.app, self.app_request, self.may_hold = domains, app, app_request, may_hold
        self.remembered = app.domains
        self.now = now  # the log's time: when the domain it reserved will hold it (core/backfill.py)

    def place(self, members: Sequence[Ask]) -> GangPlaced | NoPlace:
        groups: dict[str, list[Ask]] = {}
        for ask in members:
            groups.setdefault(group_of(ask), []).append(ask)
        placer = self.domains
        holding = self.app.reserved_domain()
        if (len(groups) == 1 and "" in groups and not self.remembered and self.app_request is not None
                and holding is None and not self.may_hold):
            sizes = [a.resource for a in members for _ in range(a.pending)]
            found = placer.place(self.app_request, sizes)  # the common case, looked up when it failed before
            if isinstance(found, tuple):
                return NoPlace(found[0], found[1])
            owners = [a for a in members for _ in range(a.pending)]
            return GangPlaced(list(zip(owners, found, strict=True)), self._required("", self.app_request, found))
        index = placer.index
        order = placer.in_order() if holding is None else placer.in_order_with(holding)
        placed = self._groups(groups, order)
        if isinstance(placed, GangPlaced):
            return placed
        if holding is not None:  # it waits on its reserved domain (and when it will hold it, with limits in use)
            name = "/".join(holding[1])
            estimate, details = held_estimate(self.app, [n for n in self.domains.part.nodes.values()
                                                         if n.held == self.app.id], self.now, self.domains.backfill)
            return NoPlace(f"{placed.message}; {short(holding[0])} {name} is reserved for it{estimate}",
                           {**placed.details, "reserved": name, **details})
        # it may reserve: the domain closest to holding the first of its groups that found none
        request, failed = placed.request, placed.members
        if (self.may_hold and request is not None and request.mode is TopologyMode.REQUIRED
                and request.level in index.levels):
            sizes = [a.resource for a in failed for _ in range(a.pending)]
            domain = self._to_reserve(sizes, request.level, order)
            if domain is not None:
                nodes = self.domains.part.nodes
                estimate, details = held_estimate(self.app, [nodes[i] for i in domain.node_ids], self.now)
                return NoPlace(f"{placed.message}; {short(request.level)} {domain.name} is reserved for it{estimate}",
                               {**placed.details, "reserved": domain.name, **details}, request.level, domain.values)
        return placed

    def _to_reserve(self, members: list[Res], level: str, order: list[str]) -> Domain | None:
        """The domain at `level` the gang reserves: among those that overlap no domain
        another gang reserved (neither key a prefix of the other) and could hold it once
        empty (its members packed on the nodes' capacity less what others occupy), the one
        where the gang's estimated start is earliest when runtime limits are in use (one
        without an estimate after every one with one: core/backfill.py `domain_estimate`),
        then where the most members are placed now (first fit, then largest first, as the
        placement packs them: core/packing.py `packed`), then the most free room of the
        gang's dominant resource, then by key; None when none could hold it."""
        placer = self.domains
        index, nodes = placer.index, placer.part.nodes
        held = list(placer.part.domain_holds)
        resource = dominant(index, total_of(members))
        in_order = index.in_order(index.level_index(level), order)
        timed = limits_in_use(placer.part)  # estimates to compare: the one where it starts first
        best: Domain | None = None
        best_rank: tuple[int, int, int, tuple[str, ...]] | None = None
        node_held = bool(placer.part.node_holds)  # (nodes a gang that asks for no domain reserved)
        for d in index.domains(level):
            n = len(d.values)
            if any(h[:n] == d.values or d.values[: len(h)] == h for h in held):
                continue
            ids = d.node_ids
            if node_held and any(nodes[node_id].held for node_id in ids):
                continue
            if not holds_when_empty([nodes[node_id].empty_room() for node_id in ids], members, resource):
                continue  # too small even empty
            starts = NEVER
            if timed:
                est = domain_estimate(self.app, [nodes[i] for i in ids], self.now)
                if isinstance(est, Estimate):
                    starts = est.at
            now = len(members) - pack(index, in_order(d), members, False, resource=resource).count("")
            rank = (starts, -now, -d.free.get(resource, 0), d.values)
            if best_rank is None or rank < best_rank:
                best, best_rank = d, rank
        return best

    def _groups(self, groups: dict[str, list[Ask]], order: list[str]) -> GangPlaced | NoPlace:
        """Each group in a domain of its own (core/topology.py `place_groups`: in the order
        their first members came, else largest first); the reason is the first order's."""
        placer = self.domains
        keys = list(groups)
        owners = {key: [a for a in asks for _ in range(a.pending)] for key, asks in groups.items()}
        requests = {key: request_of(asks[0].tags) if key else self.app_request for key, asks in groups.items()}
        found = place_groups(placer.index, [(requests[k], [a.resource for a in owners[k]], self.remembered.get(k))
                                            for k in keys], order, placer.empty_room)
        if isinstance(found, tuple):
            key, none = keys[found[0]], found[1]
            message = none.message if not key else f"task group {key}: {none.message}"
            failed = NoPlace(message, {**none.details(), **({"taskGroup": key} if key else {})})
            if key not in self.remembered:  # (what it would reserve for: this group, by its request)
                failed.request, failed.members = requests[key], groups[key]
            return failed
        nodes = placer.part.nodes
        places: list[tuple[Ask, Node]] = []
        kept: list[tuple[str, str, tuple[str, ...]]] = []
        for key, fit in zip(keys, found, strict=True):
            places.extend([(ask, nodes[node_id]) for ask, node_id in zip(owners[key], fit.nodes, strict=True)])
            memory = self.remembered.get(key)
            request = requests[key]
            if memory is not None:
                kept.append((key, memory[0], memory[1]))
            elif request is not None and request.mode is TopologyMode.REQUIRED and fit.level != ANYWHERE:
                kept.append((key, fit.level, fit.domain.values))
        return GangPlaced(places, kept)

    def _required(self, key: str, request: TopologyRequest, nodes: list[Node]) -> list[tuple[str, str, tuple[str, ...]]]:
        if request.mode is not TopologyMode.REQUIRED:
            return []
        domain = self.domains.index.domain_of(nodes[0].id, request.level)
        assert domain is not None  # a required gang is placed inside one domain at its level
        return [(key, request.level, domain.values)]


NEVER = 1 << 62  # a domain without an estimate ranks after every one with one
