"""Topology domains, and node sets, reserved by waiting gangs (docs/topology.md, "A waiting
gang reserves a domain"; docs/gang.md for a node set): a component the partition holds
(`part.holds`), over the records and the waits.

A required topology gang that has waited past the reservation delay with no domain holding
it reserves one (the planner chooses it: a `HoldDomain` decision). While it holds, the
domain's nodes are out of the node index (`Waits.index_node` asks `holder_of` for each node
it indexes), so no other ask, gang or reservation takes room there; the gang's own
topology placement still sees them (core/topoplace.py). The records keep the holds
(`PartitionState.domain_holds`: domain key -> the gang; `node_holds`: node id -> the gang of
a node set; `App.holding`; `Node.held`, derived);
this component is the only one that changes them, and tells the waits which nodes moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ykbus.core.lifecycle import NodeState
from ykbus.core.model import NODE_ROOM, App, Ask, Node
from ykbus.core.packing import packed_whole
from ykbus.core.resources import Res
from ykbus.core.state import PartitionState
from ykbus.core.step import Step
from ykbus.core.topology import TopologyRequest, path_of, request_of


class NodeIndex(Protocol):
    """What the holds tell the waits (core/indexes.py `Waits`): a node to index again (in or
    out, by `holder_of`), and its room to wake who it fits."""

    def index_node(self, node: Node) -> None: ...

    def wake_node(self, node: Node, ctx: Step) -> None: ...

    def wake(self, ask: Ask, ctx: Step) -> None: ...

    def rejudge_gang(self, app: App, ctx: Step) -> None: ...

    def unreserve(self, ask: Ask, ctx: Step, wake: bool = False) -> None: ...


def holder_of(records: PartitionState, node: Node) -> str:
    """The gang whose reserved node set or domain `node` is in ("" none): by its id, then by
    its attributes, level by level (holds never overlap: at most one matches)."""
    by_node = records.node_holds.get(node.id)
    if by_node is not None:
        return by_node.id
    holds = records.domain_holds
    path = path_of(records.config.topology.levels, node.attributes)
    for i in range(len(path)):
        app = holds.get(path[: i + 1])
        if app is not None:
            return app.id
    return ""


def _asks_for_domain(app: App) -> bool:
    """Whether `app`'s gang asks for a topology domain (its tags, or a waiting placeholder's)."""
    return request_of(app.tags) is not None or any(
        a.placeholder and a.pending and request_of(a.tags) is not None for a in app.asks.values())


def _level_of(request: TopologyRequest | None) -> str:
    return request.level if request is not None else ""


def loses_room(node: Node, attributes: dict[str, str] | None, capacity: Res | None, occupied: Res,
               levels: Sequence[str]) -> bool:
    """Whether an update of `node` may take room from its domain: it moves (new attributes at
    a topology level), shrinks, or more of it is occupied by what the scheduler did not place."""
    return bool(attributes and path_of(levels, attributes) != path_of(levels, node.attributes)
                or capacity is not None and any(capacity.get(r, 0) < v for r, v in node.capacity.items())
                or any(v > node.occupied.get(r, 0) for r, v in occupied.items()))


class DomainHolds:
    """Starts and ends the reservations of topology domains and of node sets (the applier,
    `Changes`)."""

    def __init__(self, records: PartitionState, waits: NodeIndex) -> None:
        self.records, self.waits = records, waits

    def hold(self, app: App, level: str, values: tuple[str, ...], ctx: Step) -> None:
        """`app`'s waiting required gang reserves the domain `values` at `level`, or, a gang
        asking for no domain (`level` ""), the nodes `values`: they leave the node index."""
        self.release(app, ctx)
        if level:
            self.records.domain_holds[values] = app
        else:
            self.records.node_holds.update(dict.fromkeys(values, app))
        app.holding = (level, values)
        self._reindex(level, values, ctx)
        if not level:  # a node reserved for an ask (the planner chose those last) is the gang's now
            nodes = self.records.nodes
            for node_id in values:
                ask = nodes[node_id].reserved if node_id in nodes else None
                if ask is not None:
                    self.waits.unreserve(ask, ctx, wake=True)

    def release(self, app: App, ctx: Step) -> None:
        """`app`'s reservation ends (it was placed, it went, a reload dropped its level): the
        domain's nodes are back in the index, their room wakes who it fits."""
        held = app.holding
        if held is None:
            return
        app.holding = None
        if not held[0]:
            node_holds = self.records.node_holds
            for node_id in held[1]:
                if node_holds.get(node_id) is app:
                    del node_holds[node_id]
        elif self.records.domain_holds.get(held[1]) is app:
            del self.records.domain_holds[held[1]]
        self._reindex(*held, ctx, True)

    def host_changed(self, holder: str, ctx: Step) -> None:
        """A host of the domain gang `holder` reserved drained, goes, shrank, is more occupied
        or moved out (called after the change): if the domain would no longer hold the gang
        even empty, the reservation ends, as a node's does when its node can no longer take its
        ask, and the gang is judged again (past its delay already, it reserves at once the
        domain now closest to holding it). A domain that still would keeps it: the gang's room
        is not opened to others for a change that leaves it whole (a label, a pod's millicore)."""
        app = self.records.apps.get(holder)
        if app is None or app.holding is None or self._holds_when_empty(app, app.holding):
            return
        self.release(app, ctx)
        self.waits.rejudge_gang(app, ctx)

    def _holds_when_empty(self, app: App, holding: tuple[str, tuple[str, ...]]) -> bool:
        """Whether the schedulable nodes of the domain `holding` hold, with nothing of the
        scheduler's on them, the gang's pending placeholders of that level (first fit)."""
        level, values = holding
        rooms = [n.empty_room() for n in self._nodes_of(level, values) if n.state is NodeState.SCHEDULABLE]
        pending = [a for a in app.asks.values() if a.placeholder and a.pending]
        at_level = [a for a in pending if _level_of(request_of(a.tags) or request_of(app.tags)) == level] if level else []
        members = [a.resource for a in (at_level or pending) for _ in range(a.pending)]
        # as placed: in their order, else largest first in the dominant resource, which the
        # planner measures against the whole cluster's free room: each of theirs is tried,
        # so a domain the planner judged able to hold the gang is never judged otherwise here
        return packed_whole(rooms.__getitem__, len(rooms), members) is not None

    def node_left(self, node_id: str, ctx: Step) -> None:
        """Node `node_id` left the partition (decommissioned): no longer one of the nodes a gang
        reserved (a node that registers later under its id is not the gang's); a set left
        empty ends. (Called before the hold is judged again: `host_changed`.)"""
        app = self.records.node_holds.pop(node_id, None)
        held = app.reserved_nodes() if app is not None else None
        if app is None or held is None:
            return
        left = tuple(i for i in held if i != node_id)
        if left:
            app.holding = ("", left)
        else:
            self.release(app, ctx)

    def ask_left(self, app: App, ask: Ask, ctx: Step) -> None:
        """`ask` of `app` went: with no placeholder of its gang waiting, its reservation ends."""
        if app.holding is not None and not any(a.placeholder and a.pending and a is not ask
                                               for a in app.asks.values()):
            self.release(app, ctx)

    def levels_changed(self, old: tuple[str, ...], ctx: Step) -> None:
        """A reload (the levels were `old`): the reservations at a level the partition no
        longer has end, and those of nodes by gangs of queues that no longer reserve (before
        the nodes are indexed again); if the levels changed, every ask waiting for room is
        judged again (a gang's domains, or none, are not what they were)."""
        records = self.records
        levels = records.config.topology.levels
        for app in list(records.domain_holds.values()):
            held = app.holding
            if held is not None and (held[0] not in levels or levels.index(held[0]) + 1 != len(held[1])):
                self.release(app, ctx)
        # nodes reserved by gangs whose queue no longer sets ykbus.io/gang.reserve end (docs/gang.md);
        # every gang that reserved nodes is judged again (a max or a limit may hold it now: it then
        # gives them back; its reason named them); and the waiting gangs of queues that set it now,
        # judged again: their wait for the delay starts (else only room a whole member fits wakes them)
        for app in records.node_holders():
            if not app.queue.gang_reserves() or (levels and _asks_for_domain(app)):  # (it reserves a domain now)
                self.release(app, ctx)
            self.waits.rejudge_gang(app, ctx)
        for app in records.apps.values():
            if app.gang and app.holding is None and any(
                    a.placeholder and a.pending and a.waiting is NODE_ROOM and not a.since for a in app.asks.values()) \
                    and app.queue.gang_reserves():
                self.waits.rejudge_gang(app, ctx)
        if levels != old:
            for app in records.apps.values():
                for ask in app.asks.values():
                    if ask.pending and ask.waiting is NODE_ROOM:
                        self.waits.wake(ask, ctx)

    def _nodes_of(self, level: str, values: tuple[str, ...]) -> list[Node]:
        """The nodes of the domain `values` at `level`, or, `level` "", of the node set `values`."""
        nodes = self.records.nodes
        if not level:
            return [nodes[node_id] for node_id in values if node_id in nodes]
        levels = self.records.config.topology.levels[: len(values)]
        return [node for node in nodes.values() if path_of(levels, node.attributes) == values]  # O(nodes)

    def _reindex(self, level: str, values: tuple[str, ...], ctx: Step, ended: bool = False) -> None:
        waits = self.waits
        for node in self._nodes_of(level, values):  # once a hold starts or ends
            waits.index_node(node)
            waits.wake_node(node, ctx)
            if ended and node.reserved is None:  # a reservation may take it again (the planner's
                waits.wake_reserve_waiters(node, ctx)  # memo of shapes with none to reserve is stale)
