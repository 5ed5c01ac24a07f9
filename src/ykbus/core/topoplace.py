"""A topology gang's place (issue 42, docs/topology.md): the planner's side of core/topology.py.

A gang whose application asks for a topology domain (`ykbus.io/topology-required` or
`-preferred` on the application) is placed whole inside one domain of its partition's
`topology.levels`: `TopologyPlacer.place` builds the domains from the nodes as they are
(the schedulable nodes of the node index, less those reserved for an ask), chooses the one
that would have the least room left after the gang (best fit, core/topology.py `choose`)
and puts each member on a node of it in the partition's node order (first fit). What it
finds is a value: the nodes, or the reason no domain holds the gang. It reads only: the
planner calls it as a what-if (core/gang.py `plan_gang`), and nothing is booked until the
whole gang is.

Built for one gang's plan, from the nodes (O(nodes)): kept incrementally is the next step
(docs/topology.md, "What is built").
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


class TopologyPlacer:
    """One gang's domain, over the nodes as they are (core/gang.py's `DomainPlacer`)."""

    __slots__ = ("part", "node_index", "request")

    def __init__(self, part: PartitionState, node_index: SortedSeq, request: TopologyRequest) -> None:
        self.part, self.node_index, self.request = part, node_index, request

    def place(self, members: Sequence[Res]) -> list[Node] | tuple[str, dict[str, object]]:
        nodes = self.part.nodes
        index = DomainIndex(self.part.config.topology.levels)
        order: list[str] = []
        for key in self.node_index:  # the schedulable nodes, in the partition's node order
            node = nodes[key[1]]
            order.append(node.id)
            # a node reserved for an ask takes nothing else: in its domain, with no room
            index.set_node(node.id, node.attributes, True, node.free if node.reserved is None else {})
        found = choose(index, members, self.request, order)
        if isinstance(found, Fit):
            return [nodes[node_id] for node_id in found.nodes]
        return f"{found.code}: {found.message}", found.details()
