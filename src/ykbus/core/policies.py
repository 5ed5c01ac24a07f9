"""Node policies (Arranger's basic policies), chosen per application: which node an ask goes to.

An application picks one with the tag `ykbus.io/node-policy`; without it the partition's
node order (`fair` or `binpacking`, core/scorers.py) decides, as before. Each policy gives
every schedulable node where the ask fits a score, read on the node as it would be after
placing the ask, and the ask goes to the best one, ties by node id. The scores are exact
rationals (no float rounding decides a tie); docs/scheduling.md has the definitions:

- `BinPack`: the highest utilisation after placement (`UTILISATION` weights).
- `LeaderFirst`: an ask tagged `ykbus.io/role: leader` goes to the lowest utilisation with
  GPU weighted up (`LEADER_WEIGHTS`); any other ask (a worker) to the highest with CPU
  weighted up (`WORKER_WEIGHTS`).
- `MinFragment`: the highest `1 - |cpu share - memory share|` after placement.
- `JobAffinity`: the most allocations of the same application on the node, then BinPack.
- `JobAntiAffinity`: the fewest allocations of the same application, then the lowest
  utilisation.

Utilisation with weights w over the scored resources the node has (capacity > 0):
`sum(w_r * (used_r + ask_r) / cap_r) / sum(w_r)`, used = capacity - free.

How it stays fast at thousands of nodes. Nodes are grouped by their capacity in the scored
resources (a *class*; clusters have few node shapes). Within a class the ask adds the same
amount to every node's score, so the order of the nodes by score does not depend on the
ask: each class keeps its nodes in a sorted list per ordering in use, by an exact integer
key (the score's numerator over the class's common denominator), moved when a node's usage
changes. Choosing is then, per class, the first node of its list that fits (for
MinFragment: the nodes nearest a target key, found by bisection), and a comparison of one
candidate per class. A list is built the first time a policy needs it; a partition where
no application names a policy keeps none and pays nothing. Once a search skipped many
nodes that do not fit a shape, the nodes of the class that fit it are kept in their own
sorted list, kept exact as nodes move (a BinPack order starts with the fullest nodes).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from ykbus.core.resources import Res, fits
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.tags import (
    LEADER_ROLE,
    ROLE_TAG,
    NodePolicy,
)

if TYPE_CHECKING:
    from ykbus.core.model import App, Ask, Node

SCORED = ("vcore", "memory", "nvidia.com/gpu")  # Arranger's CPU, memory and GPU, in SI names
UTILISATION = (1, 1, 1)  # weights of vcore, memory, GPU: BinPack and the affinities
LEADER_WEIGHTS = (1, 1, 4)  # LeaderFirst's leader: GPU weighted up, lowest first
WORKER_WEIGHTS = (4, 1, 1)  # LeaderFirst's workers: CPU weighted up, highest first
FIT_CACHE_AFTER = 16  # nodes a search may skip in a class before the nodes that fit its shape are indexed
MAX_FIT_CACHES = 64


_TOO_MANY = object()  # a search passed FIT_CACHE_AFTER nodes without room


class Ordering:
    """One order of a class's nodes: by weighted utilisation (`weights`, highest first when
    `high`), or by the difference of CPU and memory shares (`weights` None: MinFragment)."""

    __slots__ = ("weights", "high")

    def __init__(self, weights: tuple[int, int, int] | None, high: bool) -> None:
        self.weights, self.high = weights, high


BINPACK = Ordering(UTILISATION, True)
LEAST_USED = Ordering(UTILISATION, False)
LEADER = Ordering(LEADER_WEIGHTS, False)
WORKER = Ordering(WORKER_WEIGHTS, True)
FRAGMENT = Ordering(None, False)


class NodeClass:
    """Nodes of one capacity in the scored resources. Scores of its nodes share the
    denominator `scale * weight sum`: a share used/cap is `used * per[r] / scale`."""

    __slots__ = ("caps", "scale", "per", "lists", "denominators", "nodes")

    def __init__(self, caps: tuple[int, ...]) -> None:
        self.caps = caps
        scale = 1
        for c in caps:
            if c > 0:
                scale *= c
        self.scale = scale
        self.per = tuple(scale // c if c > 0 else 0 for c in caps)
        self.lists: dict[Ordering, SortedSeq] = {}
        self.denominators: dict[Ordering, int] = {}
        self.nodes = 0  # how many nodes it holds; a class left empty is dropped

    def denominator(self, ordering: Ordering) -> int:
        """Of a weighted utilisation: scale * the weights of the resources the class has
        (0: it has none of them, its utilisation is 0)."""
        d = self.denominators.get(ordering)
        if d is None:
            assert ordering.weights is not None
            d = self.denominators[ordering] = self.scale * self.weight_sum(ordering.weights)
        return d

    def numerator(self, ordering: Ordering, amounts: tuple[int, ...]) -> int:
        """The ordering's integer key of `amounts` (used, or what an ask adds)."""
        per = self.per
        if ordering.weights is None:  # cpu share - memory share
            return amounts[0] * per[0] - amounts[1] * per[1]
        w = ordering.weights
        return w[0] * amounts[0] * per[0] + w[1] * amounts[1] * per[1] + w[2] * amounts[2] * per[2]

    def weight_sum(self, weights: tuple[int, int, int]) -> int:
        return sum(w for w, c in zip(weights, self.caps, strict=True) if c > 0)

    def key(self, ordering: Ordering, node: Node) -> tuple[int, str]:
        """Its place in `ordering`'s list: (the numerator of used, negated for highest
        first, node id)."""
        cap, free, per = node.capacity, node.free, self.per
        cpu = (cap.get("vcore", 0) - free.get("vcore", 0)) * per[0]
        mem = (cap.get("memory", 0) - free.get("memory", 0)) * per[1]
        w = ordering.weights
        if w is None:
            n = cpu - mem
        else:
            n = w[0] * cpu + w[1] * mem
            if per[2]:
                n += w[2] * (cap.get("nvidia.com/gpu", 0) - free.get("nvidia.com/gpu", 0)) * per[2]
        return (-n if ordering.high else n, node.id)


def caps_of(node: Node) -> tuple[int, ...]:
    cap = node.capacity
    return tuple(cap.get(r, 0) for r in SCORED)


def used(node: Node) -> tuple[int, ...]:
    cap, free = node.capacity, node.free
    return tuple(cap.get(r, 0) - free.get(r, 0) for r in SCORED)


def asked(ask: Ask) -> tuple[int, ...]:
    res = ask.resource
    return tuple(res.get(r, 0) for r in SCORED)


def utilisation(node: Node, ask: Ask, weights: tuple[int, int, int]) -> Fraction:
    """Weighted utilisation of `node` after placing `ask` (exact); 0 for a node that has
    none of the scored resources."""
    cls = NodeClass(caps_of(node))
    total = cls.weight_sum(weights)
    if not total:
        return Fraction(0)
    plus = tuple(u + a for u, a in zip(used(node), asked(ask), strict=True))
    return Fraction(cls.numerator(Ordering(weights, True), plus), cls.scale * total)


class NodePolicies:
    """A partition's node policy indexes (see the module docstring)."""

    __slots__ = ("classes", "at", "orderings", "fit_cache", "cached")

    def __init__(self) -> None:
        self.classes: dict[tuple[int, ...], NodeClass] = {}
        self.at: dict[str, tuple[NodeClass, dict[Ordering, tuple[int, str]]]] = {}  # node id -> its keys
        self.orderings: list[Ordering] = []  # in use: built on first need, kept current after
        # (ordering, class caps) -> shape -> (resource, the keys of the class's nodes that fit
        # it, in the ordering): built once a search skipped FIT_CACHE_AFTER nodes, kept exact
        # as nodes move, at most MAX_FIT_CACHES in all (then they start again: speed only)
        self.fit_cache: dict[tuple[Ordering, tuple[int, ...]], dict[str, tuple[Res, SortedSeq]]] = {}
        self.cached = 0

    # --- keeping the indexes current --------------------------------------------------

    def node_moved(self, node: Node) -> None:
        """`node`'s usage, capacity or state changed (a node out of the partition's index,
        `node.key` None, leaves these too). Called only while some ordering is in use."""
        old = self.at.pop(node.id, None)
        if old is not None:
            cls, keys = old
            for ordering, key in keys.items():
                cls.lists[ordering].remove(key)
                if self.fit_cache:
                    self._cache_drop(ordering, cls, key)
            cls.nodes -= 1
            if not cls.nodes:  # its last node left it (resized, drained or gone): choices skip it
                del self.classes[cls.caps]
                for ordering in self.orderings:
                    shapes = self.fit_cache.pop((ordering, cls.caps), None)
                    if shapes:
                        self.cached -= len(shapes)
        if node.key is None:
            return
        cls = self._class(caps_of(node))
        cls.nodes += 1
        keys = {}
        for ordering in self.orderings:
            key = keys[ordering] = cls.key(ordering, node)
            cls.lists[ordering].add(key)
            if self.fit_cache:
                self._cache_add(ordering, cls, key, node)
        self.at[node.id] = (cls, keys)

    def clear(self) -> None:
        """Forget every node and ordering (the partition re-indexes its nodes; the lists
        are built again when a policy next needs them)."""
        self.classes.clear()
        self.at.clear()
        self.orderings.clear()
        self.fit_cache.clear()
        self.cached = 0

    def _class(self, caps: tuple[int, ...]) -> NodeClass:
        cls = self.classes.get(caps)
        if cls is None:
            cls = self.classes[caps] = NodeClass(caps)
            for ordering in self.orderings:
                cls.lists[ordering] = SortedSeq()
        return cls

    def _use(self, ordering: Ordering, nodes: dict[str, Node]) -> None:
        """Build `ordering`'s lists over every indexed node, the first time it is needed."""
        if not self.orderings:  # the first: the nodes are not followed until now
            self.classes.clear()
            self.at.clear()
            for node_id in sorted(nodes):
                node = nodes[node_id]
                if node.key is not None:
                    cls = self._class(caps_of(node))
                    cls.nodes += 1
                    self.at[node_id] = (cls, {})
        self.orderings.append(ordering)
        for cls in self.classes.values():
            cls.lists[ordering] = SortedSeq()
        for node_id in sorted(self.at):
            cls, keys = self.at[node_id]
            key = keys[ordering] = cls.key(ordering, nodes[node_id])
            cls.lists[ordering].add(key)

    def _cache_drop(self, ordering: Ordering, cls: NodeClass, key: tuple[int, str]) -> None:
        for _, fitting in self.fit_cache.get((ordering, cls.caps), {}).values():
            fitting.discard(key)

    def _cache_add(self, ordering: Ordering, cls: NodeClass, key: tuple[int, str], node: Node) -> None:
        for res, fitting in self.fit_cache.get((ordering, cls.caps), {}).values():
            if fits(res, node.free):
                fitting.add(key)

    # --- choosing ---------------------------------------------------------------------

    def choose(self, ask: Ask, policy: NodePolicy, nodes: dict[str, Node]) -> Node | None:
        """The node `policy` puts `ask` on, among the schedulable nodes with room (a node
        reserved for another ask takes nothing else), or None when none has room."""
        if policy is NodePolicy.BINPACK:
            return self._best(ask, BINPACK, nodes)
        if policy is NodePolicy.LEADER_FIRST:
            return self._best(ask, LEADER if ask.tags.get(ROLE_TAG) == LEADER_ROLE else WORKER, nodes)
        if policy is NodePolicy.MIN_FRAGMENT:
            return self._min_fragment(ask, nodes)
        if policy is NodePolicy.JOB_AFFINITY:
            return self._affinity(ask, nodes)
        return self._anti_affinity(ask, nodes)

    def _keys(self, ordering: Ordering, cls: NodeClass, ask: Ask, nodes: dict[str, Node],
              skipped: int) -> SortedSeq | None:
        """The list of the nodes of `cls` that fit `ask`'s shape, in `ordering`, once a
        search skipped FIT_CACHE_AFTER nodes there (None before)."""
        shapes = self.fit_cache.get((ordering, cls.caps))
        cached = shapes.get(ask.shape) if shapes is not None else None
        if cached is None and skipped >= FIT_CACHE_AFTER:
            if self.cached >= MAX_FIT_CACHES:
                self.fit_cache.clear()
                self.cached = 0
            res = ask.resource
            cached = self.fit_cache.setdefault((ordering, cls.caps), {})[ask.shape] = (
                res, SortedSeq(k for k in cls.lists[ordering] if fits(res, nodes[k[1]].free)))
            self.cached += 1
        return cached[1] if cached is not None else None

    def _first(self, ask: Ask, ordering: Ordering, cls: NodeClass, nodes: dict[str, Node],
               skip: dict[str, int] | None = None) -> Node | None:
        """The first node of `cls` in `ordering` with room for `ask` (and not in `skip`)."""
        keys = self._keys(ordering, cls, ask, nodes, 0)
        if keys is None:
            skipped = 0
            for key in cls.lists[ordering]:
                node = nodes[key[1]]
                if node.takes(ask) and (skip is None or node.id not in skip):
                    return node
                skipped += 1
                if skipped == FIT_CACHE_AFTER:
                    keys = self._keys(ordering, cls, ask, nodes, skipped)
                    break
            else:
                return None
        assert keys is not None
        for key in keys:
            node = nodes[key[1]]
            if (node.reserved is None or node.reserved is ask) and (skip is None or node.id not in skip):
                return node
        return None

    def _ready(self, ordering: Ordering, nodes: dict[str, Node]) -> None:
        if ordering not in self.orderings:
            self._use(ordering, nodes)

    def _best(self, ask: Ask, ordering: Ordering, nodes: dict[str, Node],
              skip: dict[str, int] | None = None) -> Node | None:
        """By weighted utilisation after placement: the best candidate of each class, then
        the best of those (exact: fractions compared by cross-multiplying; ties by node id)."""
        self._ready(ordering, nodes)
        classes = self.classes
        best: Node | None = None
        best_num, best_den = 0, 1
        amounts: tuple[int, ...] | None = None
        high = ordering.high
        for cls in classes.values():
            node = self._first(ask, ordering, cls, nodes, skip)
            if node is None:
                continue
            if len(classes) == 1:
                return node
            den = cls.denominator(ordering)
            if den:
                if amounts is None:
                    amounts = asked(ask)
                key = self.at[node.id][1][ordering][0]
                num = (-key if high else key) + cls.numerator(ordering, amounts)
            else:
                num, den = 0, 1
            if best is None:
                best, best_num, best_den = node, num, den
                continue
            left, right = num * best_den, best_num * den
            if (left > right if high else left < right) or (left == right and node.id < best.id):
                best, best_num, best_den = node, num, den
        return best

    def _min_fragment(self, ask: Ask, nodes: dict[str, Node]) -> Node | None:
        """The highest `1 - |cpu share - memory share|` after placement: per class, the
        nodes whose key (cpu share - memory share, scaled) lies nearest `-(the ask's key)`."""
        self._ready(FRAGMENT, nodes)
        best: Node | None = None
        best_distance, best_scale = 0, 1
        amounts = asked(ask)
        for cls in self.classes.values():
            target = -cls.numerator(FRAGMENT, amounts)
            found = self._nearest(ask, cls, target, nodes)
            if found is None:
                continue
            distance, node = found  # |cpu share - memory share| is distance / scale: the lower the better
            if best is None:
                best, best_distance, best_scale = node, distance, cls.scale
                continue
            left, right = distance * best_scale, best_distance * cls.scale
            if left < right or (left == right and node.id < best.id):
                best, best_distance, best_scale = node, distance, cls.scale
        return best

    def _nearest(self, ask: Ask, cls: NodeClass, target: int, nodes: dict[str, Node]) -> tuple[int, Node] | None:
        """The node of `cls` with room whose key is nearest `target`, ties by node id."""
        keys = self._keys(FRAGMENT, cls, ask, nodes, 0)
        if keys is None:
            found = self._nearest_in(ask, cls.lists[FRAGMENT], target, nodes, FIT_CACHE_AFTER)
            if found is not _TOO_MANY:
                return found  # type: ignore[return-value]
            keys = self._keys(FRAGMENT, cls, ask, nodes, FIT_CACHE_AFTER)
            assert keys is not None  # built once FIT_CACHE_AFTER nodes were skipped
        return self._nearest_in(ask, keys, target, nodes, None)  # type: ignore[return-value]

    @staticmethod
    def _nearest_in(ask: Ask, keys: SortedSeq, target: int, nodes: dict[str, Node],
                    budget: int | None) -> tuple[int, Node] | None | object:
        """Nearest first, in groups of one key: on the right of `target` a group's ids
        ascend from its first entry, on the left a group is found from its start by
        bisection. `budget`: nodes without room it may pass before it gives up
        (`_TOO_MANY`); None: every node in `keys` has room."""
        res = ask.resource
        n = len(keys)
        right = keys.bisect_left((target,))
        left = right - 1
        while left >= 0 or right < n:
            d_right = keys[right][0] - target if right < n else None
            d_left = target - keys[left][0] if left >= 0 else None
            if d_right is None or (d_left is not None and d_left < d_right):
                distance = d_left
            else:
                distance = d_right
            found: Node | None = None
            if d_right is not None and d_right == distance:
                value = d_right + target
                for key in keys.islice(right):
                    if key[0] != value:
                        break
                    right += 1
                    node = nodes[key[1]]
                    if node.reserved is not None and node.reserved is not ask:
                        continue
                    if budget is None or fits(res, node.free):
                        found = node
                        break
                    budget -= 1
                    if budget == 0:
                        return _TOO_MANY
            if d_left is not None and d_left == distance:
                value = target - d_left
                start = keys.bisect_left((value,))
                for key in keys.islice(start, left + 1):
                    node = nodes[key[1]]
                    if node.reserved is not None and node.reserved is not ask:
                        continue
                    if budget is None or fits(res, node.free):
                        if found is None or node.id < found.id:
                            found = node
                        break
                    budget -= 1
                    if budget == 0:
                        return _TOO_MANY
                left = start - 1
            if found is not None:
                return distance, found
        return None

    def _affinity(self, ask: Ask, nodes: dict[str, Node]) -> Node | None:
        """Most allocations of the application on the node, then BinPack, then node id."""
        app = ask.app
        best: Node | None = None
        best_key: tuple[int, Fraction, str] | None = None
        for node_id, count in app_counts(app).items():
            node = self._usable(ask, nodes.get(node_id))
            if node is None:
                continue
            key = (-count, -utilisation(node, ask, UTILISATION), node.id)
            if best_key is None or key < best_key:
                best, best_key = node, key
        if best is not None:
            return best
        return self._best(ask, BINPACK, nodes)  # none of its nodes has room: all count 0

    def _anti_affinity(self, ask: Ask, nodes: dict[str, Node]) -> Node | None:
        """Fewest allocations of the application on the node, then the lowest utilisation,
        then node id."""
        counts = app_counts(ask.app)
        node = self._best(ask, LEAST_USED, nodes, skip=counts)  # a node without any of them
        if node is not None:
            return node
        best: Node | None = None
        best_key: tuple[int, Fraction, str] | None = None
        for node_id, count in counts.items():
            node = self._usable(ask, nodes.get(node_id))
            if node is None:
                continue
            key = (count, utilisation(node, ask, UTILISATION), node.id)
            if best_key is None or key < best_key:
                best, best_key = node, key
        return best

    def _usable(self, ask: Ask, node: Node | None) -> Node | None:
        if node is None or node.key is None or not fits(ask.resource, node.free):
            return None
        return node if node.reserved is None or node.reserved is ask else None


def app_counts(app: App) -> dict[str, int]:
    """Allocations of `app` per node id (kept by the ledger for applications with an
    affinity policy)."""
    return app.node_pods if app.node_pods is not None else {}
