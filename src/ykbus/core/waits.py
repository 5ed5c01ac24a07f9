"""Where pending asks wait: the one registry (`WaitPlaces`, by kind and place) and the asks
that wait for node room, woken by gate rather than one by one (`RoomWaits`); and where each
pending ask is, by the place table (core/lifecycle.py `ASK_PLACE`: active, parked, pooled,
to reserve, holding a node), changed only through `AskPlaces.move` (core/indexes.py), which
keeps them.

An ask that is not of a gang or a topology set and found no node with room waits in
`RoomWaits`, under its shape (reserved or not: one reserved whose own node gains room for
it is woken at once by that node, core/indexes.py `_wake_node`). Room freed on a node used
to wake every waiting ask of every shape that now fits it: each went back to its
application's active list, was tried by the next walk, and, all but the few the room
served, parked again. With a backlog that is most of an entry's cost (a release woke ~140
asks to place one).

Here a wake-up opens a *gate* instead, and the asks stay where they are:

* `(ROOM, shape)` opens when a schedulable node's free room takes `shape`; every waiting
  ask of that shape is behind it;
* `(RESERVE, shape)` opens when what a reservation can take changed (a node came, came
  back, grew, or lost its reservation); behind it are the waiting asks of that shape past
  the reservation delay (they try to reserve a node when judged). Room freed does not open
  it: what a node can be reserved for depends on its capacity, what others occupy and its
  reservation, not on its allocations (and the planner remembers, per shape, that no node
  was found to reserve until one of those changes).

The walk (core/scheduling.py) sees the asks behind open gates as if they were active, in
exactly the order they would have had in their application's active list, their
application in its leaf and their queue among its siblings: per application the sorted
entries behind each gate, per leaf the applications (by their sort key, kept current like
an active application's), per queue the count behind each gate in its subtree. So the
walk tries them in the order the eager wake-up would have, and the first that finds no
node for its shape *closes* the gate (and the first that also finds no node to reserve
closes the reservation gate): every other ask behind it would have failed the same way in
this pass and parked again with the same reason, so it is not tried. A release now costs
the asks the room serves plus one.

Gates are scratch of one entry: those still open when the entry's pass is over (its
applications held by a `maxapplications`, a budget spent, a paused RM) are let through,
their asks made active as the eager wake-up made them (`Partition.settle`). Between entries
no gate is open, so a snapshot holds only where each ask waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ykbus.core.model import NODE_ROOM, App, Ask, Node, NodeRoom, Shape, Wait
from ykbus.core.resources import Res, fits
from ykbus.core.sortedseq import SortedSeq, bisect_left, insort

ROOM = 0  # a gate of asks waiting for room for their shape
RESERVE = 1  # a gate of asks of a shape past their reservation delay, with no node to reserve yet


class Gate:
    """One gate of the pool: the asks of `shape` waiting for room (`kind` ROOM) or to reserve
    a node (RESERVE). There is one object per kind and shape (`RoomWaits.gates_of`), so the
    dictionaries keyed by gates, read many times per walk, hash a gate by its identity
    instead of hashing a (kind, shape) tuple at every lookup."""

    __slots__ = ("kind", "shape", "resource", "limited")

    def __init__(self, kind: int, shape: Shape, resource: Res, limited: bool = False) -> None:
        self.kind = kind
        self.shape = shape
        self.resource = resource  # the shape's vector, to test against a node's free room
        self.limited = limited  # its asks have a runtime limit: room a reservation holds may take them (backfill)

    def __repr__(self) -> str:
        return f"Gate({'ROOM' if self.kind == ROOM else 'RESERVE'}, {self.shape})"

# ask.pooled: where in the pool an ask is
NOT_POOLED: Final = 0
POOLED: Final = 1  # behind its ROOM gate
POOLED_RESERVING: Final = 2  # behind its ROOM gate and its RESERVE gate


class RoomWaits:
    """Every ask waiting for node room that is not of a gang or a topology set, by gate
    (core/topoplace.py `waits_whole`)."""

    __slots__ = ("gates", "reserving", "open", "showing", "openers", "shapes", "limited_shapes", "gates_of", "app_key")

    def __init__(self, app_key: Callable[[App], tuple[Any, ...]]) -> None:
        self.gates: dict[Gate, dict[tuple[str, str], Ask]] = {}  # the gates with asks behind them
        self.reserving: dict[Gate, None] = {}  # those of kind RESERVE, in the same order
        self.open: dict[Gate, None] = {}  # insertion-ordered: no set iteration order in decisions
        # the open gates the walk has not closed since they opened (`close`: it judged one of
        # their asks, and the others would park again as they are): those whose asks it shows.
        # A wake-up that opens a gate again shows it again
        self.showing: dict[Gate, None] = {}
        # shape -> the nodes whose room opened its room gate this entry. An ask behind a gate
        # found no node when it parked, and room comes to a node only through `open_fitting`:
        # these are the only nodes that may take it now (the planner looks at them alone)
        self.openers: dict[Shape, list[Node]] = {}
        self.shapes: dict[Shape, Gate] = {}  # the room gate of each shape waiting, in the order they came
        # those of them whose asks have a runtime limit, in the same order: all that a reserved
        # node's room may open (backfill), read without a walk of every shape
        self.limited_shapes: dict[Shape, Gate] = {}
        # shape -> its (room, reservation) gates, made the first time a shape needs one and kept,
        # as the partition keeps its shapes (`PartitionState.intern`)
        self.gates_of: dict[Shape, tuple[Gate, Gate]] = {}
        self.app_key = app_key  # an application's sort key in its leaf (the partition's)

    def gates_for(self, ask: Ask) -> tuple[Gate, Gate]:
        """The (room, reservation) gates of `ask`'s shape."""
        found = self.gates_of.get(ask.shape)
        if found is None:
            limited = ask.timeout_ms > 0 and not ask.placeholder
            found = self.gates_of[ask.shape] = (Gate(ROOM, ask.shape, ask.resource, limited),
                                                Gate(RESERVE, ask.shape, ask.resource, limited))
        return found

    # --- membership --------------------------------------------------------------------

    def enter(self, ask: Ask, reserving: bool) -> None:
        """`ask` waits for room (and, `reserving`, to reserve a node)."""
        ask.pooled = POOLED_RESERVING if reserving else POOLED
        room, reserve = self.gates_for(ask)
        self._add(ask, room)
        if reserving:
            self._add(ask, reserve)

    def leave(self, ask: Ask) -> None:
        room, reserve = self.gates_for(ask)
        if ask.pooled == POOLED_RESERVING:
            self._remove(ask, reserve)
        self._remove(ask, room)
        ask.pooled = NOT_POOLED

    def _add(self, ask: Ask, gate: Gate) -> None:
        app = ask.app
        waiters = self.gates.get(gate)
        if waiters is None:
            waiters = self.gates[gate] = {}
            if gate.kind == RESERVE:
                self.reserving[gate] = None
            if gate.shape not in self.shapes:
                room = self.shapes[gate.shape] = self.gates_of[gate.shape][0]
                if room.limited:
                    self.limited_shapes[gate.shape] = room
        waiters[(app.id, ask.key)] = ask
        entries = app.pooled.get(gate)
        if entries is None:
            entries = app.pooled[gate] = []
            if app.pool_key is None:
                app.pool_key = self.app_key(app)
            leaf = app.queue.pooled_apps.get(gate)
            if leaf is None:
                leaf = app.queue.pooled_apps[gate] = SortedSeq()
            leaf.add((*app.pool_key, app))
        insort(entries, ask.entry)
        for q in app.path:
            q.pooled[gate] = q.pooled.get(gate, 0) + 1

    def _remove(self, ask: Ask, gate: Gate) -> None:
        app = ask.app
        waiters = self.gates[gate]
        del waiters[(app.id, ask.key)]
        if not waiters:
            del self.gates[gate]
            if gate.kind == RESERVE:
                del self.reserving[gate]
            if gate in self.open:  # (`in` and `del`, not `pop`: compiled, `pop` is a call by name)
                del self.open[gate]
            if gate in self.showing:
                del self.showing[gate]
            room, reserve = self.gates_of[gate.shape]
            if room not in self.gates and reserve not in self.gates:
                del self.shapes[gate.shape]
                if room.limited:
                    del self.limited_shapes[gate.shape]
        entries = app.pooled[gate]
        entry = ask.entry
        entries.pop(bisect_left(entries, entry))
        if not entries:
            del app.pooled[gate]
            leaf = app.queue.pooled_apps[gate]
            leaf.remove((*app.pool_key, app))  # type: ignore[misc]
            if not leaf:
                del app.queue.pooled_apps[gate]
            if not app.pooled:
                app.pool_key = None
        for q in app.path:
            left = q.pooled[gate] - 1
            if left:
                q.pooled[gate] = left
            else:
                del q.pooled[gate]

    def rekey(self, app: App) -> None:
        """`app`'s sort key moved: so does its place among the leaf's pooled applications."""
        old = app.pool_key
        if old is None:
            return
        key = self.app_key(app)
        if key != old:
            app.pool_key = key
            lists = app.queue.pooled_apps
            for gate in app.pooled:
                leaf = lists[gate]
                leaf.remove((*old, app))
                leaf.add((*key, app))

    # --- gates ---------------------------------------------------------------------------

    def open_fitting(self, node: Node, limited: bool = False) -> list[Gate]:
        """Room came on `node`, schedulable: open the room gates of the shapes its free room
        takes, and remember it as a node that may take them (their asks past the reservation
        delay are behind those gates too: what they may reserve has not changed, so the
        reservation gates stay as they are). `limited`: the node is reserved, and only asks
        with a runtime limit may take its room (backfill, core/backfill.py)."""
        opened = []
        free = node.free
        for shape, gate in (self.limited_shapes if limited else self.shapes).items():
            if fits(gate.resource, free) and gate in self.gates:
                self.open[gate] = None
                self.showing[gate] = None
                opened.append(gate)
                openers = self.openers.get(shape)
                if openers is None:
                    self.openers[shape] = [node]
                elif node not in openers:
                    openers.append(node)
        return opened

    def open_reserving(self) -> list[Gate]:
        """What a reservation can take changed: open every reservation gate."""
        opened = list(self.reserving)
        for gate in opened:
            self.open[gate] = None
            self.showing[gate] = None
        return opened

    def close(self, gate: Gate) -> None:
        """The walk judged `gate`'s asks for this pass: it shows them no more (it stays open
        until a wake-up opens it again or the pass is over)."""
        showing = self.showing
        if gate in showing:  # (not `pop`: compiled, a call by name)
            del showing[gate]

    def let_through(self) -> list[Ask]:
        """Close every gate; the asks behind those the walk has not closed, to be made
        active (each once)."""
        asks: dict[tuple[str, str], Ask] = {}
        for gate in self.open:
            waiters = self.gates.get(gate)
            if waiters and gate in self.showing:
                asks.update(waiters)
        self.open.clear()
        self.showing.clear()
        self.openers.clear()
        return list(asks.values())


Place = tuple[type, Any]  # (the kind of Wait, the place's key: a node id, an app id, a queue path, a shape...)


class WaitPlaces:
    """Every pending ask that waits somewhere other than behind a room gate (RoomWaits), by
    the place it waits: kind -> place -> {(application id, ask key): ask}, where kind is the
    `Wait` subclass and place its key (asks of gangs and topology sets waiting for room are
    kept by their shape, the room a node's change may offer them). With RoomWaits it is the
    one registry of where pending asks wait: an ask is in exactly the place its `waiting`
    names (tests/invariants.py checks it after every step)."""

    __slots__ = ("kinds",)

    def __init__(self) -> None:
        self.kinds: dict[type, dict[Any, dict[tuple[str, str], Ask]]] = {}

    @staticmethod
    def place_of(ask: Ask, where: Wait) -> Place:
        return (NodeRoom, ask.shape) if where is NODE_ROOM else (type(where), where.key)

    @property
    def places(self) -> dict[Place, dict[tuple[str, str], Ask]]:
        """Every place with waiting asks (a view for checks; not for the hot path)."""
        return {(kind, key): waiters for kind, places in self.kinds.items() for key, waiters in places.items()}

    def add(self, ask: Ask, where: Wait) -> None:
        kind, key = self.place_of(ask, where)
        places = self.kinds.get(kind)
        if places is None:
            places = self.kinds[kind] = {}
        waiters = places.get(key)
        if waiters is None:
            waiters = places[key] = {}
        waiters[(ask.app.id, ask.key)] = ask

    def remove(self, ask: Ask, where: Wait) -> None:
        kind, key = self.place_of(ask, where)
        places = self.kinds.get(kind)
        if places is not None:
            waiters = places.get(key)
            if waiters is not None:
                who = (ask.app.id, ask.key)
                if who in waiters:  # (not `pop`: compiled, a call by name)
                    del waiters[who]
                if not waiters:
                    del places[key]

    def take(self, kind: type, key: Any) -> list[Ask]:
        """Every ask waiting at a place, which they leave (to be woken)."""
        places = self.kinds.get(kind)
        if not places:
            return []
        waiters = places.get(key)
        if waiters is None:
            return []
        del places[key]  # (not `pop`: compiled, a call by name)
        return list(waiters.values())

    def at(self, kind: type, key: Any) -> dict[tuple[str, str], Ask]:
        """The asks waiting at a place (read only)."""
        places = self.kinds.get(kind)
        return (places.get(key) or {}) if places else {}

    def keys(self, kind: type) -> list[Any]:
        """The places of one kind that have waiting asks, in the order they came."""
        places = self.kinds.get(kind)
        return list(places) if places else []
