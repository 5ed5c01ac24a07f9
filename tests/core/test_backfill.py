"""Runtime limits in force, reservations' estimated starts and backfill (docs/time.md): an
ask with a runtime limit takes room a reservation holds only if it ends by the reservation's
estimated start, and the reserved ask starts no later than estimated."""

from __future__ import annotations

from tests import invariants
from tests.conftest import Harness, released
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app, ask, node
from ykbus.yamlload import load_yaml

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: batch
            properties: {ykbus.io/runtime.default: 10m, ykbus.io/runtime.max: 30m}
          - name: open
"""
SECOND = 10**9
MINUTE = 60 * SECOND


def new(outs: list) -> list[tuple[str, str]]:
    return [(a.allocationKey, a.nodeID) for o in outs if o.kind == "alloc" for a in o.msg.new]


def why(h: Harness, app_id: str, key: str) -> dict:
    return h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"][app_id]["asks"][key]["why"]


def timed(key: str, app_id: str, ms: int, **quantities: int) -> dict:
    return {**ask(key, app_id, **quantities), "executionTimeoutMilliSeconds": ms}


def checked(h: Harness) -> None:
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def reserved_cluster() -> tuple[Harness, int]:
    """n1 (5 vcore) runs `l` (3 vcore, the batch queue's default limit of 10 min); `B` (5
    vcore) has waited past the reservation delay and reserved n1. Returns the time `l` started."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(node("n1", vcore=5000)))
    h.do(h.log.apps(app("long", "root.batch"), app("big", "root.open"), app("short", "root.batch"),
                    app("free", "root.open")))
    outs = h.do(h.log.asks(ask("l", "long", vcore=3000)))
    assert new(outs) == [("l", "n1")]
    started = h.log.ts
    h.do(h.log.asks(ask("B", "big", vcore=5000)))
    h.do(h.log.tick(advance_ns=3 * SECOND))
    assert why(h, "big", "B")["code"] == "Reserved"
    return h, started


def test_a_reserved_ask_is_told_when_it_will_start():
    h, started = reserved_cluster()
    reason = why(h, "big", "B")
    assert reason["details"]["estimatedStart"] == started + 10 * MINUTE
    assert "estimated start" in reason["message"] and "when 1 allocation on node n1 ends" in reason["message"]
    checked(h)


def test_an_ask_that_ends_before_the_estimated_start_takes_the_reserved_room():
    h, started = reserved_cluster()
    outs = h.do(h.log.asks(timed("s", "short", 60_000, vcore=1000)))  # 1 min: ends long before B starts
    assert new(outs) == [("s", "n1")]
    checked(h)
    # no limit, or a limit that outlasts the estimate (40 min, capped to the queue's 30): they wait
    outs = h.do(h.log.asks(ask("u", "free", vcore=1000), timed("s30", "short", 40 * 60_000, vcore=1000)))
    assert new(outs) == []
    assert why(h, "free", "u")["code"] == "NoNodeRoom" and why(h, "short", "s30")["code"] == "NoNodeRoom"
    # `s` ends at its limit (the core ends it); `u` still may not take the reserved room
    outs = h.do(h.log.tick(advance_ns=61 * SECOND))
    assert [r.allocationKey for r in released(outs)] == ["s"]
    assert new(outs) == []
    checked(h)
    # `l` ends at the queue's default limit: `B` starts, no later than it was told
    outs = h.do(h.log.tick(advance_ns=started + 10 * MINUTE - h.log.ts))
    assert [r.allocationKey for r in released(outs)] == ["l"]
    assert ("B", "n1") in new(outs)
    assert h.log.ts <= started + 10 * MINUTE
    checked(h)


def test_room_freed_on_a_reserved_node_is_lent_to_an_ask_with_a_limit_waiting_for_it():
    h, started = reserved_cluster()
    h.do(h.log.asks(timed("s", "short", 60_000, vcore=2000), timed("t", "short", 60_000, vcore=2000)))
    # n1 has 2 vcore free: `s` backfills, `t` waits for room
    assert why(h, "short", "t")["code"] == "NoNodeRoom"
    outs = h.do(h.log.tick(advance_ns=61 * SECOND))  # `s` ends at its limit: `t` takes its room
    assert [r.allocationKey for r in released(outs)] == ["s"]
    assert new(outs) == [("t", "n1")]
    checked(h)


def test_without_limits_nothing_changes():
    h = Harness()
    h.setup(QUEUES.replace("properties: {ykbus.io/runtime.default: 10m, ykbus.io/runtime.max: 30m}", ""))
    h.do(h.log.nodes(node("n1", vcore=5000)))
    h.do(h.log.apps(app("long", "root.batch"), app("big", "root.open"), app("short", "root.batch")))
    h.do(h.log.asks(ask("l", "long", vcore=3000)))
    h.do(h.log.asks(ask("B", "big", vcore=5000)))
    h.do(h.log.tick(advance_ns=3 * SECOND))
    reason = why(h, "big", "B")
    assert reason["code"] == "Reserved" and "estimate" not in reason["message"]
    outs = h.do(h.log.asks(ask("s", "short", vcore=1000)))
    assert new(outs) == []  # a reserved node takes no other ask
    outs = h.do(h.log.tick(advance_ns=20 * MINUTE))
    assert released(outs) == []  # no limit: nothing is ended


# --- preemption.minruntime ---------------------------------------------------------------

PREEMPTION = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {guaranteed: {vcore: 2000m}}
          - name: b
            properties: {preemption.minruntime: 5m}
"""


def test_an_allocation_younger_than_its_queues_minimum_runtime_is_no_victim():
    h = Harness()
    h.setup(PREEMPTION, n1={"vcore": 2000}, n2={"vcore": 2000})
    h.do(h.log.apps(app("batch", "root.b"), app("urgent", "root.a")))
    for i in range(4):
        h.do(h.log.asks(ask(f"b{i}", "batch", vcore=1000)))
        h.do(h.log.tick(advance_ns=60 * SECOND))  # b0 is the oldest: 4 min when the ask comes
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=(True, True))))
    outs = h.do(h.log.tick(advance_ns=31 * SECOND))  # past preemption.delay: b0 is 4.5 min old, none is 5
    assert released(outs) == []
    assert "cannot preempt" in why(h, "urgent", "u")["message"]
    outs = h.do(h.log.tick(advance_ns=40 * SECOND))  # b0 is past 5 min: the one victim it may take
    assert [r.allocationKey for r in released(outs)] == ["b0"]
    checked(h)


# --- a topology gang's reserved domain ---------------------------------------------------

TOPOLOGY = """
partitions:
  - name: default
    topology:
      levels: [ykbus.io/rack]
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
"""


def test_a_gangs_reserved_rack_lends_its_room_to_asks_that_end_before_the_gang_starts():
    from ykbus.log.build import resource
    rack = "ykbus.io/rack"
    h = Harness()
    h.setup(TOPOLOGY)
    h.do(h.log.nodes(*[node(f"{r}-{i}", attributes={rack: r}, gpu=4) for r in ("r1", "r2") for i in range(2)]))
    h.do(h.log.apps(app("fill", "root.jobs")))
    hosts = [f"{r}-{i}" for r in ("r1", "r2") for i in range(2)]
    h.do(h.log.asks(*[{**timed(f"f-{n}", "fill", 10 * 60_000, gpu=2), "tags": {"yunikorn.apache.org/requiredNode": n}}
                      for n in hosts]))  # 2 GPUs of each host for 10 min
    started = h.log.ts
    h.do(h.log.apps(app("big", "root.jobs", placeholderAsk=resource(gpu=8), tags={"ykbus.io/topology-required": rack})))
    h.do(h.log.asks({**ask("ph", "big", max_allocations=2, gpu=4), "taskGroupName": "w", "placeholder": True}))
    h.do(h.log.tick(advance_ns=3 * SECOND))  # past the reservation delay: it reserves a rack
    p = h.core.registry.rms["rm-1"].partitions["default"]
    held = sorted(n.id for n in p.nodes.values() if n.held == "big")
    assert len(held) == 2
    reason = why(h, "big", "ph")
    assert reason["details"]["estimatedStart"] == started + 10 * MINUTE
    assert "is reserved for it; estimated start" in reason["message"]
    # asks without a limit take the other rack's free room, and not the reserved rack's
    h.do(h.log.apps(app("short", "root.jobs"), app("open", "root.jobs")))
    outs = h.do(h.log.asks(ask("u", "open", gpu=2, max_allocations=3)))
    assert sorted(n for _, n in new(outs)) == sorted(set(hosts) - set(held))
    # a 1-minute ask takes room in the reserved rack
    outs = h.do(h.log.asks(timed("s", "short", 60_000, gpu=2)))
    assert [k for k, n in new(outs)] == ["s"] and new(outs)[0][1] in held
    assert why(h, "open", "u")["code"] == "NoNodeRoom"
    checked(h)
    # the fillers end at their limit: the gang is placed in its rack, no later than estimated
    outs = h.do(h.log.tick(advance_ns=started + 10 * MINUTE - h.log.ts))
    assert sorted(n for k, n in new(outs) if k == "ph") == held
    checked(h)


# --- seen by readers ----------------------------------------------------------------------


def test_explain_says_when_a_waiting_ask_will_start():
    from ykbus.core.projection import project
    from ykbus.explain import explain
    h, started = reserved_cluster()
    h.do(h.log.apps(app("other", "root.batch")))
    h.do(h.log.asks(ask("o", "other", vcore=3000)))  # waits: n1 is reserved for B
    core = h.core
    apps = {rm: {p: d["applications"] for p, d in v["partitions"].items()}
            for rm, v in project(core.last_seq, core.now, {}, core.rms, ("applications",))["rms"].items()}
    text = "\n".join(explain(apps, "big"))
    assert "estimated start 2023-11-14 22:24 UTC, when 1 allocation on node n1 ends" in text
    assert "it starts in 10 min at the latest" in text
    text = "\n".join(explain(apps, "other"))
    # n1 is its only node and reserved for another ask: no free node, so no estimate of its own
    assert "NoNodeRoom" in text and "estimated start" not in text


def test_an_ask_waiting_for_room_is_told_by_the_read_api_when_room_frees():
    from ykbus.core.projection import project
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000}, n2={"vcore": 4000})
    h.do(h.log.apps(app("fill", "root.batch"), app("next", "root.open")))
    h.do(h.log.asks(timed("a", "fill", 20 * 60_000, vcore=3000), timed("b", "fill", 5 * 60_000, vcore=3000)))
    first = h.log.ts
    h.do(h.log.asks(ask("n", "next", vcore=2000)))
    core = h.core
    view = project(core.last_seq, core.now, {}, core.rms, ("applications",))
    d = view["rms"]["rm-1"]["partitions"]["default"]["applications"]["next"]["asks"]["n"]["why"]["details"]
    assert d["estimatedStart"] == first + 5 * MINUTE  # when `b` ends
    assert d["estimate"].startswith("estimated start 2023-11-14 22:19 UTC, in 5 min, when 1 allocation on node")
