"""Node choice: scorers behind one interface.

A scorer gives each schedulable node a sort key (lower first, ties by node id); the
partition keeps its nodes in a sorted index by that key, re-keyed when a node's usage
changes, and a pass takes the first node in index order that has room. A scorer reads only
the node, so the index stays exact and choosing is O(log nodes) per allocation.

- `FairScorer` (`fair`): the least used node first: usage is the weighted average over
  `resourceweights` of (allocated + occupied) / capacity.
- `BinpackingScorer` (`binpacking`): the most used first, same usage.

An application may choose another order for its asks, one of Arranger's node policies
(tag `ykbus.io/node-policy`): those scores depend on the ask as well as the node, so they
keep their own indexes (core/policies.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ykbus.core.queueprops import NodeSortPolicy
from ykbus.core.resources import Res

if TYPE_CHECKING:
    from ykbus.core.model import Node


class NodeScorer:
    """The interface, and the weighted usage both scorers order by. A class, not a
    Protocol: compiled, the index's upkeep calls `key` natively (through the class's
    method table) instead of looking it up by name at every node move."""

    __slots__ = ("weights",)

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights

    def key(self, node: Node) -> tuple[float, str]:
        """The node's place in the index: lower comes first; the node id breaks ties."""
        raise NotImplementedError

    def key_beside(self, node: Node, took: Res) -> tuple[float, str]:
        """The node's place were `took` allocated on it too (a what-if: a gang placing its
        members sees the order its own members make)."""
        raise NotImplementedError

    def usage(self, node: Node, took: Res | None) -> float:
        """Weighted average of (allocated + occupied) / capacity over the weighted resources
        (allocated + occupied is capacity - free: the same integer, one lookup fewer), with
        `took` allocated too when given (a what-if)."""
        score = 0.0
        weight_sum = 0.0
        free = node.free
        for name, weight in self.weights.items():
            cap = node.capacity.get(name, 0)
            if cap > 0 and weight > 0:
                used = cap - free.get(name, 0) if took is None else cap - free.get(name, 0) + took.get(name, 0)
                score += weight * used / cap
                weight_sum += weight
        return score / weight_sum if weight_sum else score


class FairScorer(NodeScorer):
    __slots__ = ()

    def key(self, node: Node) -> tuple[float, str]:
        return (self.usage(node, None), node.id)

    def key_beside(self, node: Node, took: Res) -> tuple[float, str]:
        return (self.usage(node, took), node.id)


class BinpackingScorer(NodeScorer):
    __slots__ = ()

    def key(self, node: Node) -> tuple[float, str]:
        return (-self.usage(node, None), node.id)

    def key_beside(self, node: Node, took: Res) -> tuple[float, str]:
        return (-self.usage(node, took), node.id)


SCORERS: dict[NodeSortPolicy, type[NodeScorer]] = {
    NodeSortPolicy.FAIR: FairScorer,
    NodeSortPolicy.BINPACKING: BinpackingScorer,
}


def scorer_for(policy: NodeSortPolicy, weights: dict[str, float]) -> NodeScorer:
    return SCORERS[policy](weights)
