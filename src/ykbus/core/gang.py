"""Gangs (task groups and placeholders): the what-if of placing a whole gang.

An application with a non-empty `placeholderAsk` is a gang. Its placeholder asks
(`taskGroupName` set, `placeholder: true`) are placed all together in one pass or not at
all: `plan_gang` finds a node for every pending placeholder against the model plus what
the gang itself would take (nothing is booked while it looks), and returns either one
`GangAllocate` or, for each placeholder, a `Park` with the reason the gang waits. Queue
maxima and user and group limits apply to the gang's total.

A real ask of a task group (`placeholder: false`) takes the place of one of its group's
placeholders (`replacement_for`): docs/gang.md has the protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ykbus import limits
from ykbus.core import why
from ykbus.core.decisions import Allocate, GangAllocate, HoldDomain, Park, Preempt
from ykbus.core.model import NODE_ROOM, Alloc, App, Ask, Node, Wait
from ykbus.core.resources import Res, add_into, first_over, fits, fmt_quantity, fmt_res, scaled
from ykbus.core.topology import TopologyMode, TopologyRequest, request_of
from ykbus.core.topoplace import GangPlaced, NoPlace
from ykbus.si import messages as m


def pending_placeholders(app: App) -> list[Ask]:
    """The gang's placeholder asks with allocations still wanted, in submission order."""
    return [a for a in app.asks.values() if a.placeholder and a.pending]


class Overlay(Protocol):
    """The what-if a gang is planned over (the planner's): the state as it would be with
    the members placed so far, nothing booked."""

    def fit(self, ask: Ask) -> Node | None:
        """The node the planner would place `ask` on, beside the members placed so far."""
        ...

    def take(self, ask: Ask, node: Node) -> None:
        """One allocation of `ask` on `node`, in the overlay only."""
        ...


class NodeSet(Protocol):
    """A gang's reserved nodes, or the nodes it would reserve (core/topoplace.py `NodeSetHold`)."""

    @property
    def held(self) -> list[Node] | None: ...

    def choose(self, members: list[Res]) -> list[Node] | None: ...

    def none_text(self, members: list[Res]) -> str: ...

    def reserved_text(self, nodes: Sequence[Node]) -> tuple[str, dict[str, object]]: ...


class DomainPlacer(Protocol):
    """Where a gang that asks for a topology domain goes (core/topoplace.py): the node of
    each allocation of its pending placeholders and the domains it is placed in, or why no
    domain holds them."""

    def place(self, members: Sequence[Ask]) -> GangPlaced | NoPlace:
        ...


def plan_gang(app: App, overlay: Overlay, domain: DomainPlacer | None = None,
              nodes: NodeSet | None = None) -> list[Park] | list[Park | HoldDomain] | list[GangAllocate]:
    """All of `app`'s pending placeholders placed, or each parked with why the gang waits.
    `domain`: the gang asks for one topology domain (docs/topology.md), which places it.
    `nodes`: it asks for none and holds nodes (its overlay sees them), or may reserve some
    (docs/gang.md, `ykbus.io/gang.reserve`): a `HoldDomain` of level "" after its parks."""
    members = pending_placeholders(app)
    total: Res = {}
    count = 0
    for a in members:
        add_into(total, scaled(a.resource, a.pending))
        count += a.pending

    def park_all(where: Wait, state: m.SchedulingState, reason: why.Why) -> list[Park]:
        return [Park(a, where, state, reason) for a in members]

    if count > limits.MAX_ALLOCATIONS_PER_ENTRY:  # the work of one entry stays bounded
        return park_all(app.gang_room, m.SchedulingState.SKIPPED,
                        why.gang_too_large(app.id, count, limits.MAX_ALLOCATIONS_PER_ENTRY))

    have = held(app)  # placeholders it holds already (recovered) count towards placeholderAsk
    add_into(have, total)
    missing = {r: v - have.get(r, 0) for r, v in app.gang.items() if have.get(r, 0) < v}
    if missing:
        return park_all(app.gang_room, m.SchedulingState.SKIPPED,
                        why.gang_incomplete(app.id, app.gang, total, missing))
    held_by = over_limits(app, members, total, f"gang {app.id}", "the gang")
    if held_by:
        return held_by
    places: list[tuple[Ask, Node]] = []
    if domain is not None:
        found = domain.place(members)
        if isinstance(found, NoPlace):
            parks: list[Park | HoldDomain] = []
            parks.extend(park_all(NODE_ROOM, m.SchedulingState.FAILED,
                                  why.topology_no_domain(found.message, app.id, found.details)))
            if found.hold is not None:  # it reserves the domain closest to holding it (last: the walk ends)
                parks.append(HoldDomain(app, found.level, found.hold))
            return parks
        return [GangAllocate(app, found.places, found.domains)]
    short: Res = {}
    for a in members:
        for placed in range(a.pending):
            node = overlay.fit(a)
            if node is None:  # what the gang takes only grows: the rest of this ask finds no node either
                add_into(short, scaled(a.resource, a.pending - placed))
                break
            places.append((a, node))
            overlay.take(a, node)
    if short:
        reason = (f"gang {app.id} does not fit yet: no room for {fmt_res(short)} of its "
                  f"{fmt_res(total)} once the rest is placed")
        if nodes is None:
            return park_all(NODE_ROOM, m.SchedulingState.FAILED, why.gang_no_room(reason, app.id, total, short))
        held_nodes = nodes.held
        sizes = [a.resource for a in members for _ in range(a.pending)]
        chosen = nodes.choose(sizes) if held_nodes is None else None
        if not held_nodes and not chosen:  # none reserved, none to reserve: too large, even empty
            reason += nodes.none_text(sizes)
            return park_all(NODE_ROOM, m.SchedulingState.FAILED, why.gang_no_room(reason, app.id, total, short))
        text, details = nodes.reserved_text(held_nodes or chosen or [])
        waits: list[Park | HoldDomain] = []
        waits.extend(park_all(NODE_ROOM, m.SchedulingState.FAILED,
                              why.gang_no_room(reason + text, app.id, total, short, details)))
        if chosen:  # it reserves them (last: the walk ends)
            waits.append(HoldDomain(app, "", tuple(n.id for n in chosen)))
        return waits
    return [GangAllocate(app, places)]


def over_limits(app: App, members: list[Ask], total: Res, who: str, whose: str) -> list[Park]:
    """Each of `members` parked where a user or group limit or a queue max holds `total`,
    what they ask together (`who` would exceed it, `whose` asked it); [] when none does."""
    for t in app.trackers:
        limit = t.limit.maxresources
        over = first_over(t.allocated, total, limit) if limit else None
        if over is not None:
            used = t.allocated.get(over, 0)
            reason = (f"{t.describe()}: maxresources {over} {fmt_quantity(over, limit[over])} would be exceeded by "
                      f"{who}: {fmt_quantity(over, used)} used + {fmt_quantity(over, total[over])} asked by {whose}")
            held = why.limit(reason, t.kind, t.name, t.queue.path, over, used, limit[over], total[over])
            return [Park(a, t.room, m.SchedulingState.SKIPPED, held) for a in members]
    for q in app.path:
        over = first_over(q.allocated, total, q.max) if q.max else None
        if over is not None:
            used = q.allocated.get(over, 0)
            reason = (f"queue {q.path} max {over} {fmt_quantity(over, q.max[over])} would be exceeded by {who}: "
                      f"{fmt_quantity(over, used)} used + {fmt_quantity(over, total[over])} asked by {whose}")
            held = why.queue_max(reason, q.path, over, used, q.max[over], total[over])
            return [Park(a, q.room, m.SchedulingState.SKIPPED, held) for a in members]
    return []


def plan_sets(app: App, asks: list[Ask], app_request: TopologyRequest | None,
              place: Callable[[TopologyRequest, list[Res]], list[Node] | tuple[str, dict[str, object]]],
              ) -> list[Park] | list[Park | GangAllocate]:
    """An application without placeholders that asks for a topology domain
    (docs/topology.md): each set of its pending `asks` sent together (in one entry: the same
    `at`) with the same request (its own tags', else the application's) placed whole inside
    one domain, in the order the sets came; the first that fits is the walk's last decision
    (it ends the walk), each before it parked with why it waits."""
    sets: dict[tuple[int, str, str], list[Ask]] = {}
    for ask in asks:
        request = request_of(ask.tags) or app_request
        if request is not None:
            key = (ask.at, request.mode.value, request.level)
            if key in sets:
                sets[key].append(ask)
            else:
                sets[key] = [ask]
    out: list[Park | GangAllocate] = []
    for (_, mode, level), members in sets.items():
        total: Res = {}
        count = 0
        for a in members:
            add_into(total, scaled(a.resource, a.pending))
            count += a.pending
        if count > limits.MAX_ALLOCATIONS_PER_ENTRY:  # the work of one entry stays bounded
            reason = why.set_too_large(app.id, count, limits.MAX_ALLOCATIONS_PER_ENTRY)
            out.extend([Park(a, app.queue.room, m.SchedulingState.SKIPPED, reason) for a in members])
            continue
        held_by = over_limits(app, members, total, f"the asks of {app.id} sent together", "them")
        if held_by:
            out.extend(held_by)
            continue
        sizes = [a.resource for a in members for _ in range(a.pending)]
        found = place(TopologyRequest(TopologyMode(mode), level), sizes)
        if isinstance(found, tuple):
            reason = why.topology_no_domain(found[0], app.id, found[1])
            out.extend([Park(a, NODE_ROOM, m.SchedulingState.FAILED, reason) for a in members])
            continue
        owners = [a for a in members for _ in range(a.pending)]
        out.append(GangAllocate(app, list(zip(owners, found, strict=True))))
        return out
    return out


def lost_member(ask: Ask, into: Node | tuple[str, dict[str, object]], domain: list[Node],
                victims: Callable[[list[Node]], Preempt | str | None]) -> Allocate | Park | Preempt:
    """A placed topology gang's member, lost and asked again (docs/topology.md): onto `into`,
    the first node of its gang's `domain` with room; else, if it may preempt, victims inside
    that domain (`victims`, the partition's search on those nodes only); else it waits, with
    why (`into`'s reason)."""
    if isinstance(into, Node):
        return Allocate(ask, into)
    if ask.preempt_other and ask.since:
        found = victims(domain)
        if isinstance(found, Preempt):
            return found
    return Park(ask, NODE_ROOM, m.SchedulingState.FAILED, why.topology_no_domain(into[0], ask.app.id, into[1]))


def fits_beside(ask: Ask, node: Node, taken: dict[str, Res]) -> bool:
    """`node` takes `ask` beside what the gang took there (not when reserved for another ask)."""
    if node.reserved is not None:
        return False
    res, free = ask.resource, node.free
    took = taken.get(node.id)
    if took is None:
        return fits(res, free)
    return all(free.get(r, 0) - took.get(r, 0) >= v for r, v in res.items())


def replacement_for(app: App, ask: Ask, claimed: set[str]) -> Alloc | list[Alloc] | None:
    """For a real ask of a task group: the placeholder of its group it takes (one that
    covers it), or every placeholder of the group when none covers it (they are to be
    cancelled), or None when the group has no placeholder left (an ordinary ask).
    `claimed`: placeholders that real asks before it in the same walk take (not committed
    yet, so not marked)."""
    group = [a for a in app.allocations.values()  # (not one preempted: its room is for the ask that preempted it)
             if a.placeholder and a.task_group == ask.task_group and not a.replacing and not a.preempting
             and a.uuid not in claimed]
    if not group:
        return None
    for ph in group:
        if fits(ask.resource, ph.resource):
            return ph
    return group


def waits_for_gang(app: App, ask: Ask) -> bool:
    """A real ask of a group whose placeholders are not placed yet waits for them."""
    return any(a.placeholder and a.pending and a.task_group == ask.task_group for a in app.asks.values())


def held(app: App) -> Res:
    """The resources of the placeholders `app` holds."""
    total: Res = {}
    for a in app.allocations.values():
        if a.placeholder:
            add_into(total, a.resource)
    return total


def gang_covered(app: App) -> bool:
    """Whether the gang's allocated placeholders cover its `placeholderAsk`: it runs then
    (until then a gang application stays Accepted, even with some placeholders recovered)."""
    have = held(app)
    return all(have.get(r, 0) >= v for r, v in app.gang.items())
