"""Every attribute of the model is in the snapshot, or is listed as derived (snapshot.DERIVED):
a field added to the model and forgotten in the snapshot fails here, instead of being lost
on restart."""

from __future__ import annotations

import pytest

from tests.conftest import Harness
from tests.core.test_access import LIMITS, placed
from ykbus.core import snapshot as s
from ykbus.log.build import app, ask


def live_objects():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("a1", "root.a", user="alice"), app("a2", "root.a", user="alice"))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000, max_allocations=3), ask("k2", "a2", vcore=1000)))
    rm = h.core.rms["rm-1"]
    p = rm.partitions["default"]
    a = p.apps["a1"]
    return {"Core": (h.core, s.Snapshot), "RMRegistry": (h.core.registry, s.Snapshot), "ResourceManager": (rm, s.SRM), "Partition": (p, s.SPartition),
            "PartitionState": (p.records, s.SPartition),
            "Waits": (p.waits, s.SPartition), "Changes": (p.changes, s.SPartition), "Applier": (p.applier, s.SPartition),
            "Queue": (p.queues["root.a"], s.SQueue), "Node": (p.nodes["n1"], s.SNode), "App": (a, s.SApp),
            "Ask": (a.asks["k1"], s.SAsk), "Alloc": (next(iter(p.allocations.values())), s.SAlloc)}


def attributes(obj) -> set[str]:
    """An object's attributes: its classes' slots, or a compiled class's own list of them."""
    slots = {n for c in type(obj).__mro__ for n in (*getattr(c, "__slots__", ()), *getattr(c, "__mypyc_attrs__", ()))}
    return slots | set(getattr(obj, "__dict__", {}))


@pytest.mark.parametrize("name", sorted(s.DERIVED))
def test_every_model_attribute_is_stored_or_derived(name):
    obj, struct = live_objects()[name]
    have = attributes(obj)
    stored = {s.RENAMED.get(name, {}).get(a, a) for a in have} & set(struct.__struct_fields__)
    stored_model = {a for a in have if s.RENAMED.get(name, {}).get(a, a) in stored}
    missing = have - stored_model - s.DERIVED[name]
    assert not missing, f"{name}: {sorted(missing)} neither in {struct.__name__} nor in snapshot.DERIVED"
    stale = s.DERIVED[name] - have
    assert not stale, f"snapshot.DERIVED[{name!r}] lists {sorted(stale)}, which {name} does not have"
    assert not s.DERIVED[name] & stored_model, f"{name}: stored and also listed as derived"


def test_the_check_notices_a_forgotten_attribute(monkeypatch):
    monkeypatch.setitem(s.DERIVED, "Ask", s.DERIVED["Ask"] - {"shape"})
    with pytest.raises(AssertionError, match=r"Ask: \['shape'\] neither in SAsk"):
        test_every_model_attribute_is_stored_or_derived("Ask")


def test_every_kind_of_wait_is_written_and_read_back():
    """Where an ask waits is a typed value; snapshots and the read API write its name, and
    `parse_wait` reads each kind back as the same kind and place."""
    from ykbus.core.model import (
        NODE_ROOM,
        GangWait,
        LeaderWait,
        LimitRoom,
        QueueRoom,
        Replacement,
        RequiredNode,
        gang_wait,
        leader_wait,
        limit_room,
        parse_wait,
        queue_room,
        replacement,
        required_node,
    )

    cases = [(NODE_ROOM, "node"), (required_node("n1"), "node:n1"), (gang_wait("g"), "gang:g"),
             (replacement("7-0"), "replace:7-0"), (leader_wait("job"), "leader:job"),
             (queue_room("root.a.b"), "root.a.b"), (limit_room("root.a|user|alice"), "root.a|user|alice")]
    kinds = [type(w) for w, _ in cases]
    assert kinds[1:] == [RequiredNode, GangWait, Replacement, LeaderWait, QueueRoom, LimitRoom]
    for wait, name in cases:
        assert wait.name == name
        back = parse_wait(name)
        assert type(back) is type(wait) and back.key == wait.key and back.name == name
    assert parse_wait("node") is NODE_ROOM  # one value: the partition compares by identity
