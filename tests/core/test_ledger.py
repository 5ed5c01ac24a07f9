"""The ledger's book and unbook are exact inverses across node, queues, trackers,
application and the partition's index."""

from __future__ import annotations

from tests.conftest import Harness
from tests.core.test_access import LIMITS, placed
from ykbus.core.model import Alloc
from ykbus.log.build import app, ask


def test_book_then_unbook_leaves_every_sum_as_it_was():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000, "memory": 10**9})
    placed(h, app("a1", "root.a", user="alice"))
    h.do(h.log.asks(ask("k", "a1", vcore=1000, memory=10)))
    p = h.core.rms["rm-1"].partitions["default"]
    before = h.core.dump()
    node, application = p.nodes["n1"], p.apps["a1"]
    extra = Alloc("x-0", "k", application, node, {"vcore": 500, "memory": 7}, 0, {}, "", False, 1)
    p.ledger.book(extra)
    booked = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    assert booked["nodes"]["n1"]["allocated"] == {"vcore": 1500, "memory": 17}
    assert booked["queues"]["root.a"]["allocated"] == {"vcore": 1500, "memory": 17}
    assert booked["queues"]["root"]["allocated"] == {"vcore": 1500, "memory": 17}
    assert [t["allocated"] for t in booked["queues"]["root.a"]["limitUsage"] if t.get("user") == "alice"] == [
        {"vcore": 1500, "memory": 17}]
    assert "x-0" in booked["allocations"] and "x-0" in booked["applications"]["a1"]["allocations"]
    p.ledger.unbook(extra)
    assert h.core.dump() == before
