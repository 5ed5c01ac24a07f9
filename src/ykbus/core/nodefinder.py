"""Which node an ask takes or reserves: the planner's node choice.

`NodeFinder.first_fit` is the first node in the node index's order with room for an ask;
`NodeFinder.reservable` the node a reservation of it would take (`Reservable`: the nodes
whose capacity takes it, by the fraction of it they miss now); `GangOverlay` the nodes a
gang's members take as its planning sees them, beside the members placed so far. Each keeps
the caches of one pass that keep those cheap as the pass moves nodes. They read the state and
write only their own caches (core/scheduling.py's planner holds them; tests/core/test_layers.py
checks there is no write to the state here).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ykbus.core.gang import fits_beside
from ykbus.core.lifecycle import NodeState
from ykbus.core.model import Ask, Node, Shape
from ykbus.core.resources import Res, add_into, fits
from ykbus.core.sortedseq import SortedSeq, bisect_left, insort

if TYPE_CHECKING:
    from ykbus.core.state import PartitionState
    from ykbus.core.waits import RoomWaits

FIT_CACHE_AFTER = 16  # nodes a walk may skip before the pass indexes the nodes that fit a shape
# ... in a partition of at least this many schedulable nodes: below it a walk over every node
# costs less than the index's upkeep (a sorted list moved at every allocation of the pass)
FIT_CACHE_NODES = 64
# tests: a node found for an ask behind a gate among the nodes that opened it (core/waits.py
# `openers`) is checked against a walk of every node
CHECK_OPENERS = False
# tests: the reservation candidates kept across node moves (`Reservable.place`) are checked
# against a list built afresh at every read
CHECK_RESERVABLE = False


class NodeFinder:
    """Which node an ask takes (`first_fit`, in the node index's order) or reserves
    (`reservable`), with the caches of one pass that keep those cheap as the pass moves nodes."""

    __slots__ = ("part", "pool", "node_index", "fit_cache", "reservable_cache", "moved")

    def __init__(self, part: PartitionState, pool: RoomWaits, node_index: SortedSeq) -> None:
        self.part = part
        self.pool = pool  # the room gates (read: which shapes wait behind one, and their openers)
        self.node_index = node_index  # the schedulable nodes in the scorer's order (read)
        # shape -> (resource, the node_index keys of the nodes it fits), built once a walk
        # skipped FIT_CACHE_AFTER nodes (of FIT_CACHE_NODES or more), kept current by `node_moved`
        self.fit_cache: dict[Shape, tuple[Res, SortedSeq]] = {}
        # shape -> the reservation candidates of that shape (`Reservable`): built once per
        # shape in a pass, so asks of one shape that pass their reservation delay together
        # walk the nodes once, not once each; the nodes whose room, state or reservation
        # moved since (`moved`) are placed again when it is next read, not the whole list rebuilt
        self.reservable_cache: dict[Shape, Reservable] = {}
        self.moved: dict[str, Node] = {}  # by id, in the order they moved

    def start(self) -> None:
        """A pass starts: reservation candidates cached by a plan outside a pass are stale."""
        self.reservable_cache.clear()
        self.moved.clear()

    def clear(self) -> None:
        """The pass is over: what it cached goes."""
        self.fit_cache.clear()
        self.reservable_cache.clear()
        self.moved.clear()

    def node_moved(self, node: Node, old: Any) -> None:
        """`node` left index key `old` for `node.key` (its room or state moved): the fit caches
        follow it, the reservation candidates of this pass are stale."""
        for res, fitting in self.fit_cache.values():
            if old is not None:
                fitting.discard(old)
            if node.key is not None and fits(res, node.free):
                fitting.add(node.key)
        self.candidate_moved(node)

    def reservable(self, ask: Ask) -> Node | None:
        """The node `ask` would fit soonest: among the schedulable nodes not reserved whose
        capacity (less what others occupy) takes it, the one missing the least of it (as
        a fraction of what it asks), ties by node id. None: larger than every such node."""
        if self.moved:
            for kept in self.reservable_cache.values():
                for node in self.moved.values():
                    kept.place(node)
            self.moved.clear()
        candidates = self.reservable_cache.get(ask.shape)
        if candidates is None:
            candidates = Reservable(ask.resource, self.part.nodes.values())
            self.reservable_cache[ask.shape] = candidates
        found = candidates.first_free()
        if CHECK_RESERVABLE:  # (a node reserved since it was placed stays, skipped by `first_free`)
            fresh = Reservable(ask.resource, self.part.nodes.values())
            free_now = [entry for entry in candidates.keyed if entry[2].reserved is None]
            assert free_now == fresh.keyed, f"{ask.key}: reservation candidates kept {free_now}, built {fresh.keyed}"
        return found

    def candidate_moved(self, node: Node) -> None:
        """`node`'s room, state or reservation moved: the reservation candidates of this pass
        (which leave reserved nodes out) place it again when next read."""
        if self.reservable_cache:
            self.moved[node.id] = node

    def first_fit(self, ask: Ask) -> Node | None:
        """The first node in index order with room for `ask`, or None."""
        if ask.pooled or ask.shape in self.pool.shapes:
            # judged behind an open gate, or of a shape whose asks wait for room: they found
            # no node when they parked and room comes only through the gates, so only a node
            # that opened its room gate this entry may have room (none: the gate is shut)
            found = self._opener_fit(ask)
            if CHECK_OPENERS:
                walked = self._first_fit(ask)
                assert found is walked, f"{ask.key}: among the openers {found and found.id}, walked {walked and walked.id}"
            return found
        return self._first_fit(ask)

    def _opener_fit(self, ask: Ask) -> Node | None:
        """`first_fit` for an ask of a shape whose asks wait behind a gate: the first in index
        order of the nodes whose room opened its room gate this entry (none opened it: none
        has room for it)."""
        best: Node | None = None
        best_key: tuple[float, str] | None = None
        for node in self.pool.openers.get(ask.shape, ()):
            key = node.key
            if key is not None and node.takes(ask) and (best_key is None or key < best_key):
                best, best_key = node, key
        return best

    def _first_fit(self, ask: Ask) -> Node | None:
        part = self.part
        res, nodes = ask.resource, part.nodes
        cached = self.fit_cache.get(ask.shape)
        if cached is None:
            index = self.node_index
            if index:  # mostly the first node has room: no iterator for that
                node = nodes[index[0][1]]
                if node.takes(ask):
                    return node
            cache_after = FIT_CACHE_AFTER if len(index) >= FIT_CACHE_NODES else -1
            for skipped, key in enumerate(index):
                if skipped == cache_after:
                    fitting = SortedSeq(k for k in self.node_index if fits(res, nodes[k[1]].free))
                    cached = self.fit_cache[ask.shape] = (res, fitting)
                    break
                node = nodes[key[1]]
                if node.takes(ask):
                    return node
            else:
                return None
        for key in cached[1]:  # a node reserved for another ask takes nothing else
            node = nodes[key[1]]
            if node.reserved is None or node.reserved is ask:
                return node
        return None


class Reservable:
    """The nodes a reservation of one shape may take, best first: the schedulable nodes not
    reserved whose capacity (less what others occupy) takes the shape, by the fraction of it
    they miss now, then by node id. A node whose room or state moved, or that lost its
    reservation, is placed again (`place`); one reserved since it was placed stays in the
    list, and `first_free` passes it."""

    __slots__ = ("resource", "keyed", "keys")

    def __init__(self, resource: Res, nodes: Iterable[Node]) -> None:
        self.resource = resource
        self.keyed: list[tuple[float, str, Node]] = []  # sorted (unique: a node is never compared)
        self.keys: dict[str, tuple[float, str, Node]] = {}  # node id -> its entry
        for node in nodes:
            entry = self._entry(node)
            if entry is not None:
                self.keyed.append(entry)
                self.keys[node.id] = entry
        self.keyed.sort()

    def _entry(self, node: Node) -> tuple[float, str, Node] | None:
        if node.key is None or node.reserved is not None:  # (most, with a backlog: 89% in the demo's)
            return None
        cap, occ, free = node.capacity, node.occupied, node.free
        missing = 0.0  # summed in the vector's order, as ever (a float sum depends on it)
        for r, v in self.resource.items():
            if cap.get(r, 0) - occ.get(r, 0) < v:
                return None
            missing += max(0, v - free.get(r, 0)) / v
        return (missing, node.id, node)

    def place(self, node: Node) -> None:
        """`node`'s room or state moved (or it left): its place follows."""
        old = self.keys.get(node.id)
        if old is not None:
            del self.keys[node.id]  # (not `pop`: compiled, a call by name)
            self.keyed.pop(bisect_left(self.keyed, old))
        entry = self._entry(node)
        if entry is not None:
            insort(self.keyed, entry)
            self.keys[node.id] = entry

    def first_free(self) -> Node | None:
        """The best candidate not reserved (a reservation moves no room: it is skipped here)."""
        for entry in self.keyed:
            node = entry[2]
            if node.reserved is None:
                return node
        return None


class GangOverlay:
    """The state as a gang's planning sees it: the members placed so far on their nodes,
    nothing booked (core/gang.py's Overlay). A member goes to the first node in the
    scorer's order with room beside what the gang took, in the order the gang's own members
    make: a node it placed members on is keyed as if they were there (under `fair` a gang
    spreads as its members fill nodes: YuniKorn's order)."""

    __slots__ = ("part", "node_index", "fit_cache", "taken", "touched", "keys", "scans", "heads", "own", "own_keys")

    def __init__(self, part: PartitionState, node_index: SortedSeq,
                 fit_cache: dict[Shape, tuple[Res, SortedSeq]], own: list[Node] | None = None) -> None:
        self.part, self.node_index, self.fit_cache = part, node_index, fit_cache
        # the nodes the gang reserved (docs/gang.md): out of the index, seen by it alone, in
        # the order they would have there
        self.own = {n.id for n in own} if own else None
        self.own_keys = sorted(part.scorer.key(n) for n in own if n.state is NodeState.SCHEDULABLE) if own else []
        self.taken: dict[str, Res] = {}  # node id -> what the gang took there
        self.touched: list[tuple[float, str]] = []  # the keys of the nodes it took room on, as they would be: sorted
        self.keys: dict[str, tuple[float, str]] = {}  # node id -> its key in `touched`
        # per shape: a walk of the node index, and the first untouched node with room it
        # found (untouched nodes keep their room while a gang is planned: a walk never
        # goes back)
        self.scans: dict[Shape, Iterator[Any]] = {}
        self.heads: dict[Shape, tuple[Any, Node] | None] = {}

    def fit(self, ask: Ask) -> Node | None:
        part, taken = self.part, self.taken
        if ask.required:
            node = part.nodes.get(ask.required)
            return node if node is not None and node.key is not None and fits_beside(ask, node, taken) else None
        best: Node | None = None
        best_key: tuple[Any, ...] | None = None
        head = self._untouched(ask)
        if head is not None:
            best_key, best = head
        own = self.own
        for key in self.own_keys:  # the first untouched node of its own with room
            node = part.nodes[key[1]]
            if node.id not in taken and fits_beside(ask, node, taken):
                if best_key is None or key < best_key:
                    best_key, best = key, node
                break
        for key in self.touched:  # the first touched node with room, in its overlay order
            node = part.nodes[key[1]]
            if (node.key is not None or own is not None and node.id in own) and fits_beside(ask, node, taken):
                if best_key is None or key < best_key:
                    best = node
                break
        return best

    def _untouched(self, ask: Ask) -> tuple[Any, Node] | None:
        """The first node in index order the gang has not touched that has room for `ask`."""
        shape, taken = ask.shape, self.taken
        if shape in self.heads:
            head = self.heads[shape]
            if head is None or head[1].id not in taken:
                return head
        scan = self.scans.get(shape)
        if scan is None:
            cached = self.fit_cache.get(shape)
            scan = self.scans[shape] = iter(cached[1] if cached is not None else self.node_index)
        nodes = self.part.nodes
        for key in scan:
            node = nodes[key[1]]
            if node.id not in taken and fits_beside(ask, node, taken):
                found = self.heads[shape] = (key, node)
                return found
        self.heads[shape] = None
        return None

    def take(self, ask: Ask, node: Node) -> None:
        took = self.taken.setdefault(node.id, {})
        add_into(took, ask.resource)
        old = self.keys.get(node.id)
        touched = self.touched
        if old is not None:
            touched.pop(bisect_left(touched, old))
        key = self.keys[node.id] = self.part.scorer.key_beside(node, took)
        insort(touched, key)
