"""Where a pending ask is, by the place table (core/lifecycle.py `ASK_PLACE`): every change
goes through one move (core/indexes.py `AskPlaces.move`), which keeps the registries; a move
the table does not list raises `IllegalTransition` and changes nothing."""

from __future__ import annotations

import pytest

from tests import invariants
from tests.core.test_reservations import SECOND, full_cluster, release_one, reservation
from ykbus.core.lifecycle import AskPlace, AskPlaceEvent, IllegalTransition
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app, ask
from ykbus.yamlload import load_yaml


def part(h):
    return h.core.rms["rm-1"].partitions["default"]


def place(h, app_id: str, key: str) -> str:
    return part(h).apps[app_id].asks[key].place.value


def test_an_ask_moves_through_its_places_and_a_load_finds_it_where_it_was():
    h = full_cluster()  # L (3 vcore) found no node: behind its shape's room gate
    assert place(h, "large", "L") == "Pooled" and place(h, "smalls", "s") == "NotPending"  # s: all 8 placed
    h.do(h.log.apps(app("held", "root.small")))
    h.do(h.log.asks(ask("q", "held", vcore=1000)))  # over root.small's max: parked at the queue
    assert place(h, "held", "q") == "Parked"
    h.do(h.log.tick(2 * SECOND))  # the reservation delay: L reserves n1, and waits for room there
    assert reservation(h) == {"n1": "L"} and place(h, "large", "L") == "ReservedPooled"
    invariants.state_is_consistent(h.core)
    loaded = load_snapshot(dump_snapshot(h.core), load_yaml)
    assert invariants.places(loaded) == invariants.places(h.core)
    for _, p in invariants.partitions(loaded):
        invariants.waits_are_consistent(p)
    for _ in range(3):
        release_one(h, "n1")
    assert reservation(h) == {} and place(h, "large", "L") == "NotPending"  # placed on its node
    invariants.state_is_consistent(h.core)


@pytest.mark.parametrize("event", list(AskPlaceEvent), ids=lambda e: e.name)
def test_a_move_the_table_does_not_list_raises_and_changes_nothing(event):
    """Regression: the place of an ask changes only as the table allows. An ask parked at a
    queue's max may only be woken or dropped (not reserved a node, not pooled, not placed:
    none of those is decided for an ask the walk does not judge); the raise leaves it and the
    registries as they were."""
    h = full_cluster()
    h.do(h.log.apps(app("held", "root.small")))
    h.do(h.log.asks(ask("q", "held", vcore=1000)))
    p = part(h)
    q = p.apps["held"].asks["q"]
    assert q.place is AskPlace.PARKED
    if event in (AskPlaceEvent.WAKE, AskPlaceEvent.DROP):
        return  # the two moves out of Parked (tests/core/test_lifecycle.py lists them all)
    before = h.core.dump()
    with pytest.raises(IllegalTransition, match=f"ask place: {event.name} is not allowed in Parked"):
        p.waits.places.move(q, event, q.waiting, p.nodes["n2"])
    assert q.place is AskPlace.PARKED and p.nodes["n2"].reserved is None
    assert h.core.dump() == before
    invariants.state_is_consistent(h.core)


def test_reserving_a_node_for_an_ask_that_holds_one_raises():
    """Through the waits' own call (the applier's): an ask holds one node at most."""
    h = full_cluster()
    h.do(h.log.tick(2 * SECOND))
    p = part(h)
    large = p.apps["large"].asks["L"]
    assert large.place is AskPlace.RESERVED_POOLED
    with pytest.raises(IllegalTransition, match="RESERVE is not allowed in ReservedPooled"):
        p.waits.reserve(large, p.nodes["n2"])
    assert reservation(h) == {"n1": "L"} and large.reserved == "n1"
    p.waits.reserve(large, p.nodes["n1"])  # the node it holds: nothing moves
    assert large.place is AskPlace.RESERVED_POOLED
    invariants.state_is_consistent(h.core)
