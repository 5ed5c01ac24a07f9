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

from ykbus.core.model import Node
from ykbus.core.resources import Res
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.state import PartitionState
from ykbus.core.topology import DomainIndex, Fit, TopologyRequest, choose, effective_request


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
            if node.key is None:  # not schedulable: in no domain
                self.zeroed.pop(node.id, None)
            index.set_node(node.id, node.attributes, node.key is not None, {} if node.id in self.zeroed else node.free)

    def current(self) -> DomainIndex:
        nodes, levels = self.part.nodes, self.part.config.topology.levels
        index = self.index
        if index is None or index.levels != levels:
            index = self.index = DomainIndex(levels)
            self.zeroed = {}
            for node in nodes.values():
                index.set_node(node.id, node.attributes, node.key is not None, node.free)
        zeroed = self.zeroed
        for key in self.node_index:
            node = nodes[key[1]]
            if (node.reserved is not None) != (node.id in zeroed):
                if node.reserved is not None:
                    zeroed[node.id] = None
                    index.set_free(node.id, {})
                else:
                    del zeroed[node.id]
                    index.set_free(node.id, node.free)
        return index


class TopologyPlacer:
    """The topology domains as one walk of the planner sees them (core/gang.py's
    `DomainPlacer` for each gang that asks for a domain): built at the walk's first such
    gang, from the nodes as they are, and kept for the walk (nothing is booked during a walk;
    the planner drops it at the next). A gang that no domain holds gives the same reason as
    an earlier one of the walk with the same request and members (a walk is judged against
    one state): it is looked up, not packed again."""

    __slots__ = ("part", "node_index", "index", "order", "no_domain")

    def __init__(self, part: PartitionState, node_index: SortedSeq, index: DomainIndex) -> None:
        self.part, self.node_index = part, node_index
        self.index = index  # the planner's, kept as nodes move (`Scheduler.state_changed`)
        self.order: list[str] = []
        # (request, the members' shapes) -> why no domain holds them, in this walk
        self.no_domain: dict[tuple[TopologyRequest, tuple[int, ...]], tuple[str, dict[str, object]]] = {}

    def _in_order(self) -> list[str]:
        order = self.order
        if not order:
            order.extend([key[1] for key in self.node_index])  # the schedulable nodes, in the partition's node order
        return order

    def for_gang(self, request: TopologyRequest) -> GangDomain:
        return GangDomain(self, request)

    def place(self, request: TopologyRequest, members: Sequence[Res]) -> list[Node] | tuple[str, dict[str, object]]:
        key = (request, tuple([id(r) for r in members]))  # (members' vectors are interned: one object a shape)
        known = self.no_domain.get(key)
        if known is not None:
            return known
        found = choose(self.index, members, request, self._in_order())
        if isinstance(found, Fit):
            nodes = self.part.nodes
            return [nodes[node_id] for node_id in found.nodes]
        reason = found.message, found.details()  # (the code is the reason's own: why.TOPOLOGY_NO_DOMAIN)
        self.no_domain[key] = reason
        return reason


class GangDomain:
    """One gang's request, placed by the walk's domains (core/gang.py's `DomainPlacer`)."""

    __slots__ = ("domains", "request")

    def __init__(self, domains: TopologyPlacer, request: TopologyRequest) -> None:
        self.domains, self.request = domains, request

    def place(self, members: Sequence[Res]) -> list[Node] | tuple[str, dict[str, object]]:
        return self.domains.place(self.request, members)
