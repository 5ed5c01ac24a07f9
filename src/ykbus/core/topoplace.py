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

from ykbus.core.model import Ask, Node
from ykbus.core.resources import Res
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.state import PartitionState
from ykbus.core.topology import (
    ANYWHERE,
    DomainIndex,
    Fit,
    NoDomain,
    Taken,
    TopologyMode,
    TopologyRequest,
    best_fit,
    choose,
    effective_request,
    request_of,
    within,
)


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

    def in_order(self) -> list[str]:
        order = self.order
        if not order:
            order.extend([key[1] for key in self.node_index])  # the schedulable nodes, in the partition's node order
        return order

    def for_gang(self, app_request: TopologyRequest | None,
                 remembered: dict[str, tuple[str, tuple[str, ...]]]) -> GangDomain:
        return GangDomain(self, app_request, remembered)

    def place(self, request: TopologyRequest, members: Sequence[Res]) -> list[Node] | tuple[str, dict[str, object]]:
        key = (request, tuple([id(r) for r in members]))  # (members' vectors are interned: one object a shape)
        known = self.no_domain.get(key)
        if known is not None:
            return known
        found = choose(self.index, members, request, self.in_order())
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


class GangDomain:
    """One gang's members, placed by the walk's domains (core/gang.py's `DomainPlacer`):
    each group (`group_of`) in a domain of its own, in the order the groups' first members
    came, each beside what the groups before it took; a group whose required domain is
    remembered (placed before, some of it lost) goes back into it."""

    __slots__ = ("domains", "app_request", "remembered")

    def __init__(self, domains: TopologyPlacer, app_request: TopologyRequest | None,
                 remembered: dict[str, tuple[str, tuple[str, ...]]]) -> None:
        self.domains, self.app_request, self.remembered = domains, app_request, remembered

    def place(self, members: Sequence[Ask]) -> GangPlaced | tuple[str, dict[str, object]]:
        groups: dict[str, list[Ask]] = {}
        for ask in members:
            groups.setdefault(group_of(ask), []).append(ask)
        placer = self.domains
        if len(groups) == 1 and "" in groups and not self.remembered and self.app_request is not None:
            sizes = [a.resource for a in members for _ in range(a.pending)]
            found = placer.place(self.app_request, sizes)  # the common case, looked up when it failed before
            if isinstance(found, tuple):
                return found
            owners = [a for a in members for _ in range(a.pending)]
            return GangPlaced(list(zip(owners, found, strict=True)), self._required("", self.app_request, found))
        index, order = placer.index, placer.in_order()
        taken = Taken(index)
        places: list[tuple[Ask, Node]] = []
        kept: list[tuple[str, str, tuple[str, ...]]] = []
        nodes = placer.part.nodes
        for key, asks in groups.items():
            sizes = [a.resource for a in asks for _ in range(a.pending)]
            request = request_of(asks[0].tags) if key else self.app_request
            memory = self.remembered.get(key)
            fit: Fit | NoDomain
            if memory is not None and memory[0] in index.levels:
                fit = within(index, sizes, memory[0], memory[1], order, taken)
            elif request is None:
                fit = best_fit(index, sizes, ANYWHERE, order, taken)
            else:
                fit = choose(index, sizes, request, order, taken)
            if isinstance(fit, NoDomain):
                message = fit.message if not key else f"task group {key}: {fit.message}"
                return message, {**fit.details(), **({"taskGroup": key} if key else {})}
            owners = [a for a in asks for _ in range(a.pending)]
            for ask, node_id in zip(owners, fit.nodes, strict=True):
                taken.take(node_id, ask.resource)
                places.append((ask, nodes[node_id]))
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
