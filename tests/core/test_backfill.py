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


def test_an_allocation_an_rm_recovers_gets_its_queues_limit_from_its_recovery():
    """Regression: an allocation an RM reports as running (`existingAllocations`, after the RM
    restarted) had no limit at all, even in a queue with `ykbus.io/runtime.max`: the core
    never ended it, and no ask waiting behind it had an estimate. The SI's allocation carries
    no timeout: it takes its queue's limit (the default, else the maximum), counted from the
    entry that recovers it."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.apps(app("long", "root.batch"), app("big", "root.open")))
    running = {"allocationKey": "l", "UUID": "run-1", "applicationID": "long", "partitionName": "default",
               "nodeID": "n1", "resourcePerAlloc": {"resources": {"vcore": {"value": 3000}}}}
    h.do(h.log.nodes(node("n1", vcore=5000, existing=[running])))
    recovered = h.log.ts
    h.do(h.log.asks(ask("B", "big", vcore=5000)))
    h.do(h.log.tick(advance_ns=3 * SECOND))
    reason = why(h, "big", "B")
    assert reason["code"] == "Reserved" and reason["details"]["estimatedStart"] == recovered + 10 * MINUTE, reason
    checked(h)
    outs = h.do(h.log.tick(advance_ns=10 * MINUTE))  # its limit: the core ends it, and B takes the node
    assert [(r.UUID, r.terminationType.name) for r in released(outs)] == [("run-1", "TIMEOUT")]
    assert new(outs) == [("B", "n1")]
    checked(h)


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


def test_a_dry_run_says_a_job_would_take_reserved_room_as_the_core_then_gives_it():
    """Regression: the dry run left every reserved node out, so a short job was told it would
    not fit (and would start when the reservation's allocations end) and was then placed at
    once on the reserved node when submitted."""
    from ykbus.core.dryrun import lines, would_fit

    h, started = reserved_cluster()

    def job(**own: int) -> dict:
        return {"application": {"applicationID": "try", "queueName": "root.batch", "partitionName": "default",
                                "ugi": {"user": "me"}},
                "asks": [{"allocationKey": "t", "resourceAsk": {"resources": {"vcore": {"value": 1000}}}, **own}]}

    answer = would_fit(h.core, job(executionTimeoutMilliSeconds=60_000))
    assert answer["fits"] is True and answer["placement"] == [{"allocationKey": "t", "nodeID": "n1"}], answer
    assert answer["backfilled"] == [{"allocationKey": "t", "nodeID": "n1", "lentBy": "ask big/B",
                                     "endsBy": h.core.now + MINUTE, "startsBy": started + 10 * MINUTE}]
    said = "\n".join(lines(answer))
    assert "backfilled: t on node n1, on room held for ask big/B: its runtime limit would end it by" in said, said
    # the queue's default (10 min) outlasts half the wait: not lent, as the core would not lend it
    assert would_fit(h.core, job())["fits"] is False
    h.do(h.log.apps(app("try", "root.batch")))
    assert new(h.do(h.log.asks(timed("t", "try", 60_000, vcore=1000)))) == [("t", "n1")]
    outs = h.do(h.log.asks(ask("u", "try", vcore=1000)))
    assert new(outs) == []
    checked(h)


def test_a_gang_with_no_room_is_told_when_it_would_start_as_its_dry_run_says():
    """Review: a gang of no topology tag waiting for room (`GangNoRoom`) had no estimate in the
    read API nor in `ykbus explain`, while a dry run of the same gang gave one."""
    from ykbus.core.dryrun import would_fit
    from ykbus.explain import explain
    from ykbus.log.build import resource

    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(node("n1", vcore=4000), node("n2", vcore=4000)))
    h.do(h.log.apps(app("fill", "root.batch")))
    h.do(h.log.asks(ask("f", "fill", max_allocations=2, vcore=4000)))  # both nodes, the default 10 min
    started = h.log.ts
    gang = {"applicationID": "g", "queueName": "root.open", "partitionName": "default", "ugi": {"user": "me"},
            "placeholderAsk": resource(vcore=8000)}
    members = {**ask("ph", "g", max_allocations=2, vcore=4000), "taskGroupName": "w", "placeholder": True}
    dry = would_fit(h.core, {"application": gang, "asks": [members]})
    assert dry["fits"] is False and dry["estimate"]["start"] == started + 10 * MINUTE, dry
    h.do(h.log.apps(gang))
    h.do(h.log.asks(members))
    reason = why(h, "g", "ph")
    assert reason["code"] == "GangNoRoom" and reason["details"]["estimatedStart"] == started + 10 * MINUTE, reason
    assert reason["details"]["estimate"] == dry["estimate"]["text"]
    apps = {"rm-1": {"default": h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]}}
    said = "\n".join(explain(apps, "g"))
    assert dry["estimate"]["text"] in said, said


def test_a_backfilled_allocation_says_whose_reserved_room_it_took_and_until_when():
    """Regression (an outside review: backfill could be seen nowhere): the read API lists an
    application's backfilled allocations, with the reservation that lent the room and the end
    bound its limit sets, kept across a snapshot; `ykbus explain` says it in words."""
    from ykbus.explain import explain

    h, started = reserved_cluster()
    outs = h.do(h.log.asks(timed("s", "short", 60_000, vcore=1000), ask("plain", "free", vcore=1000)))
    assert new(outs) == [("s", "n1")]
    apps = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]
    [lent] = apps["short"]["backfilled"]
    assert (lent["allocationKey"], lent["nodeID"], lent["lentBy"]) == ("s", "n1", "ask big/B")
    assert lent["endsBy"] == h.log.ts + MINUTE and lent["endsBy"] < started + 10 * MINUTE
    assert "backfilled" not in apps["long"] and "backfilled" not in apps["free"]
    checked(h)  # (a snapshot keeps it)
    said = explain({"rm-1": {"default": apps}}, "short")
    assert any(line.startswith("  allocation s on node n1: backfilled, on room held for ask big/B; its runtime limit "
                               "ends it by ") and line.endswith(", before that one's estimated start") for line in said)


def test_a_node_reserved_for_one_ask_lends_for_half_the_wait():
    h, started = reserved_cluster()  # B starts at `started` + 10 min
    assert h.log.ts - started < MINUTE
    # 4 min: twice that is within the wait (a gang's domain would keep it: a sixth)
    outs = h.do(h.log.asks(timed("s4", "short", 4 * 60_000, vcore=1000)))
    assert new(outs) == [("s4", "n1")]
    outs = h.do(h.log.asks(timed("s5", "short", 5 * 60_000, vcore=1000)))  # twice 5 min is past it
    assert new(outs) == []
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
    uuids = {}
    for i in range(4):
        outs = h.do(h.log.asks(ask(f"b{i}", "batch", vcore=1000)))
        uuids.update({a.allocationKey: a.UUID for o in outs if o.kind == "alloc" for a in o.msg.new})
        h.do(h.log.tick(advance_ns=60 * SECOND))  # b0 is the oldest: 4 min when the ask comes
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=(True, True))))
    outs = h.do(h.log.tick(advance_ns=31 * SECOND))  # past preemption.delay: b0 is 4.5 min old, none is 5
    assert released(outs) == []
    message = why(h, "urgent", "u")["message"]
    assert "cannot preempt: every allocation it may preempt has run less than its queue's preemption.minruntime" \
        in message
    assert f"(allocation {uuids['b0']} in root.b, minimum 5 min)" in message  # the first to be old enough
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


def _racks(racks: tuple[str, ...], per_rack: int, *apps: str) -> tuple[Harness, list[str]]:
    """Racks of `per_rack` 4-GPU hosts each (`r1-0`, ...) and applications `apps` in
    root.jobs; the hosts' ids."""
    h = Harness()
    h.setup(TOPOLOGY)
    hosts = [f"{r}-{i}" for r in racks for i in range(per_rack)]
    h.do(h.log.nodes(*[node(n, attributes={"ykbus.io/rack": n[:2]}, gpu=4) for n in hosts]))
    h.do(h.log.apps(*[app(a, "root.jobs") for a in apps]))
    return h, hosts


def test_a_gangs_reserved_rack_lends_its_room_to_asks_that_end_well_before_the_gang_starts():
    h, hosts = _racks(("r1", "r2"), 3, "fill")
    # 2 GPUs of each host, for 10 min; 20 min on the third host of each rack
    h.do(h.log.asks(*[{**timed(f"f-{n}", "fill", (20 if n.endswith("2") else 10) * 60_000, gpu=2),
                       "tags": {"yunikorn.apache.org/requiredNode": n}} for n in hosts]))
    started = h.log.ts
    _gang_reserves_the_rack(h)  # past the reservation delay: it reserves a rack
    p = h.core.registry.rms["rm-1"].partitions["default"]
    held = sorted(n.id for n in p.nodes.values() if n.held == "big")
    assert len(held) == 3
    reason = why(h, "big", "ph")
    assert reason["details"]["estimatedStart"] == started + 10 * MINUTE  # two of its hosts are empty then
    assert "is reserved for it; estimated start" in reason["message"]
    # asks without a limit take the other rack's free room, and not the reserved rack's
    h.do(h.log.apps(app("short", "root.jobs"), app("open", "root.jobs")))
    outs = h.do(h.log.asks(ask("u", "open", gpu=2, max_allocations=4)))
    assert sorted(n for _, n in new(outs)) == sorted(set(hosts) - set(held))
    assert why(h, "open", "u")["code"] == "NoNodeRoom"
    # a 1-minute ask takes room in the reserved rack
    outs = h.do(h.log.asks(timed("s", "short", 60_000, gpu=2)))
    assert [k for k, _ in new(outs)] == ["s"] and new(outs)[0][1] in held
    # one of 2 minutes would end before the gang starts, but after the first sixth of its
    # wait: a gang's domain keeps that room free, as its fillers may end early and the gang
    # then start early (core/backfill.py DOMAIN_LEND_DIVISOR; a node reserved for one ask
    # lends for half the wait: test_an_ask_that_ends_before_the_estimated_start_...)
    outs = h.do(h.log.asks(timed("late", "short", 2 * 60_000, gpu=1)))
    assert new(outs) == []
    checked(h)
    # the fillers of two of its hosts end at their limit: the gang is placed, as estimated
    outs = h.do(h.log.tick(advance_ns=started + 10 * MINUTE - h.log.ts))
    assert len([n for k, n in new(outs) if k == "ph"]) == 2
    checked(h)


def _rack_of_two(fills: list[tuple[str, int, str, int]]) -> tuple[Harness, int]:
    """Two 4-GPU hosts in rack r1, `fills` (key, minutes, host, GPUs) on them; applications
    x and s ready."""
    h, _ = _racks(("r1",), 2, "fill", "x", "s")
    h.do(h.log.asks(*[{**timed(k, "fill", m * 60_000, gpu=g), "tags": {"yunikorn.apache.org/requiredNode": n}}
                      for k, m, n, g in fills]))
    return h, h.log.ts


def _gang_reserves_the_rack(h: Harness) -> None:
    from ykbus.log.build import resource
    h.do(h.log.apps(app("big", "root.jobs", placeholderAsk=resource(gpu=8),
                        tags={"ykbus.io/topology-required": "ykbus.io/rack"})))
    h.do(h.log.asks({**ask("ph", "big", max_allocations=2, gpu=4), "taskGroupName": "w", "placeholder": True}))
    h.do(h.log.tick(advance_ns=3 * SECOND))


def test_a_node_reserved_for_an_ask_in_a_gangs_rack_counts_for_the_ask_first():
    # regression: the gang was told it starts when the fillers end (10 min); x, reserved on
    # r1-0 before, takes it then for its 60 minutes, and the gang starts at 70 min
    h, started = _rack_of_two([("f0", 10, "r1-0", 4), ("f1", 10, "r1-1", 4)])
    h.do(h.log.asks(timed("x", "x", 60 * 60_000, gpu=4)))
    h.do(h.log.tick(advance_ns=3 * SECOND))
    assert why(h, "x", "x")["details"]["estimatedStart"] == started + 10 * MINUTE
    _gang_reserves_the_rack(h)
    assert why(h, "big", "ph")["details"]["estimatedStart"] == started + 70 * MINUTE
    outs = h.do(h.log.tick(advance_ns=started + 10 * MINUTE - h.log.ts))
    assert new(outs) == [("x", "r1-0")]
    assert why(h, "big", "ph")["details"]["estimatedStart"] == started + 70 * MINUTE  # as first told
    checked(h)


def test_a_node_two_reservations_hold_lends_its_room_until_the_earlier_estimate():
    # regression: r1-0, reserved for x (starts at 10 min) and in big's rack (60 min), lent a
    # 30-minute ask its room: x could not start before 31 min
    h, started = _rack_of_two([("f0a", 5, "r1-0", 2), ("f0b", 10, "r1-0", 2), ("f1", 60, "r1-1", 4)])
    h.do(h.log.asks(timed("x", "x", 30 * 60_000, gpu=4)))
    h.do(h.log.tick(advance_ns=3 * SECOND))
    _gang_reserves_the_rack(h)
    assert why(h, "x", "x")["details"]["estimatedStart"] == started + 10 * MINUTE
    h.do(h.log.release("fill", key="f0a"))  # 2 GPUs free on r1-0 early
    outs = h.do(h.log.asks(timed("s", "s", 30 * 60_000, gpu=2)))
    assert new(outs) == []  # it would end after x's start
    assert why(h, "x", "x")["details"]["estimatedStart"] == started + 10 * MINUTE
    checked(h)


def _two_racks(limited: bool) -> tuple[Harness, int]:
    """Racks r1 and r2 of two 4-GPU hosts. r1 has the more room free now (2 GPUs a host
    taken, for 60 min), r2 the less (3 GPUs a host, for 10 min); with `limited` False the
    fillers have no runtime limit. A gang of two whole hosts, required in one rack, has
    waited past the reservation delay. Returns when the fillers started."""
    h, hosts = _racks(("r1", "r2"), 2, "fill")
    fills = []
    for n in hosts:
        minutes, gpus = (60, 2) if n.startswith("r1") else (10, 3)
        filler = timed(f"f-{n}", "fill", minutes * 60_000, gpu=gpus) if limited else ask(f"f-{n}", "fill", gpu=gpus)
        fills.append({**filler, "tags": {"yunikorn.apache.org/requiredNode": n}})
    h.do(h.log.asks(*fills))
    started = h.log.ts
    _gang_reserves_the_rack(h)
    return h, started


def test_with_runtime_limits_a_gang_reserves_the_rack_where_it_starts_first():
    h, _ = _two_racks(limited=False)  # no estimates: the rack with the more room now
    assert why(h, "big", "ph")["details"]["reserved"] == "r1"
    h, started = _two_racks(limited=True)
    reason = why(h, "big", "ph")
    assert reason["details"]["reserved"] == "r2", reason["message"]
    assert reason["details"]["estimatedStart"] == started + 10 * MINUTE  # r1 would have been 60 min
    checked(h)
    outs = h.do(h.log.tick(advance_ns=started + 10 * MINUTE - h.log.ts))  # r2's fillers end at their limit
    assert sorted(n for k, n in new(outs) if k == "ph") == ["r2-0", "r2-1"]
    checked(h)


KEPT_AGAINST_FRESH = """
import json
from ykbus.bench.backfill import BackfillRun
from ykbus.core import backfill

kept = backfill.Backfill.lendable
calls = []

def lendable(self, now):  # the answer with the estimates kept, and computed afresh on the same state
    if self._lendable is not None:
        return self._lendable
    got = [(node.id, until) for node, until in kept(self, now)]
    saved = (self._lendable, self._node_starts, self._domain_starts)
    self._lendable, self._node_starts, self._domain_starts = None, {}, {}
    fresh = [(node.id, until) for node, until in kept(self, now)]
    self._lendable, self._node_starts, self._domain_starts = saved
    calls.append(got == fresh)
    return self._lendable

found_for = backfill.Backfill.node_for
lent = []

def node_for(self, ask, now):  # the node found for an ask, and found afresh (the plan's earlier finds dropped)
    got = found_for(self, ask, now)
    saved = dict(self._lent)
    self._lent.clear()
    fresh = found_for(self, ask, now)
    self._lent.clear()
    self._lent.update(saved)
    lent.append(got is fresh)
    return got

kept_domain = backfill.Backfill.domain_estimate
domains = []

def domain_estimate(self, app, held, now):  # a gang's kept estimate (its reason's too), and a fresh one
    got = kept_domain(self, app, held, now)
    domains.append(repr(got) == repr(backfill.domain_estimate(app, held, now)))
    return got

backfill.Backfill.lendable = lendable
backfill.Backfill.node_for = node_for
backfill.Backfill.domain_estimate = domain_estimate
figures = BackfillRun(3, True, 44).run(lambda s: None)
print(json.dumps({"calls": len(calls), "differ": calls.count(False), "finds": len(lent), "finds_differ": lent.count(False),
                  "domains": len(domains), "domains_differ": domains.count(False), "backfilled": figures["backfilled"]}))
"""


def test_estimates_kept_are_what_a_fresh_computation_gives():
    """The reservations' estimates `Backfill` keeps from plan to plan and entry to entry
    (core/backfill.py) are, at every plan that asks, what computing every one of them again
    on the state then gives, and the node it lends an ask is the one a search of its own
    would find (not the one found for an earlier ask of that limit and shape in the plan):
    the backfill bench's stream on 3 racks (75 hosts, two and a half hours of log time).
    Pure Python, in a child process (a compiled class is not patched)."""
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", KEPT_AGAINST_FRESH], env={**os.environ, "YKBUS_PURE_PYTHON": "1"},
                          capture_output=True, text=True, timeout=600, check=True)
    found = json.loads(done.stdout)
    assert found["backfilled"] > 100 and found["calls"] > 1000  # the stream backfills, at many plans
    assert found["differ"] == 0, f"{found['differ']} of {found['calls']} plans read an estimate out of date"
    assert found["finds"] > found["calls"]  # asks of a shape and limit found again in a plan
    assert found["finds_differ"] == 0, f"{found['finds_differ']} of {found['finds']} asks were lent another node"
    assert found["domains"] > 100  # gangs' estimates, for lending and for their reasons
    assert found["domains_differ"] == 0, f"{found['domains_differ']} of {found['domains']} gangs' estimates out of date"


def n1_free_in_an_hour_n2_in_5_min(app_id: str) -> tuple[Harness, int]:
    """Two nodes of 8 vcore: n1 holds 6 for 60 min, n2 all 8 for 5 min (limits from the
    time returned); the application `app_id` to ask."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(node("n1", vcore=8000), node("n2", vcore=8000)))
    h.do(h.log.apps(app("run", "root.open"), app(app_id, "root.open")))
    h.do(h.log.asks({**timed("a60", "run", 60 * MINUTE // 10**6, vcore=6000),
                     "tags": {"yunikorn.apache.org/requiredNode": "n1"}},
                    {**timed("a5", "run", 5 * MINUTE // 10**6, vcore=8000),
                     "tags": {"yunikorn.apache.org/requiredNode": "n2"}}))
    return h, h.log.ts


def test_a_reserved_asks_estimate_is_the_earliest_on_its_node_or_one_reserved_for_no_ask():
    """A reserved ask also takes room that frees first on another node (it did: B started on
    n2 at 5 min), but its estimate read only its reserved node: it jumped from 5 min to 1 h
    the moment it reserved. `squeue --start` says 5 min throughout."""
    h, started = n1_free_in_an_hour_n2_in_5_min("big")
    h.do(h.log.asks(ask("B", "big", vcore=8000)))
    before = why(h, "big", "B")
    assert before["code"] == "NoNodeRoom" and before["details"]["estimatedStart"] == started + 5 * MINUTE
    h.do(h.log.tick(advance_ns=3 * SECOND))
    reserved = why(h, "big", "B")
    assert reserved["code"] == "Reserved" and reserved["details"]["node"] == "n1"  # it misses the least there
    assert reserved["details"]["estimatedStart"] == started + 5 * MINUTE
    assert "when 1 allocation on node n2 ends" in reserved["details"]["estimate"]
    assert reserved["message"].endswith(reserved["details"]["estimate"])
    outs = h.do(h.log.tick(advance_ns=5 * MINUTE))
    assert ("B", "n2") in new(outs)  # as estimated


def test_asks_behind_a_reservation_of_every_node_are_told_there_is_no_node_to_estimate_on():
    """With every node reserved, the asks behind got no estimate and no word why; explain read
    "the most free on a schedulable node not reserved for another ask 0 cores" of a node that
    does not exist."""
    h, _ = reserved_cluster()
    h.do(h.log.asks(ask("s", "short", vcore=4000)))
    reason = why(h, "short", "s")
    assert reason["code"] == "NoNodeRoom" and reason["details"]["allReserved"] is True
    assert reason["details"]["estimate"] == ("no estimate: no candidate node (every schedulable node is reserved "
                                             "for another ask or by a gang)")
    from ykbus.explain import _details
    line = _details(reason["code"], reason["details"], reason["message"])
    assert "the most free on a schedulable node" not in line
    assert line.startswith("every schedulable node is reserved for another ask or by a gang")


def test_an_ask_that_must_run_on_its_reserved_node_is_estimated_there_only():
    """Review: the earlier start over the free nodes was given to an ask that must run on its
    node (`requiredNode`), naming a node it can never use."""
    h, started = n1_free_in_an_hour_n2_in_5_min("pin")
    h.do(h.log.asks({**ask("R", "pin", vcore=4000), "tags": {"yunikorn.apache.org/requiredNode": "n1"}}))
    reason = why(h, "pin", "R")
    assert reason["code"] == "Reserved" and reason["details"]["node"] == "n1"
    assert "n2" not in reason["message"] and reason["details"]["estimatedStart"] == started + 60 * MINUTE


def test_with_no_node_schedulable_the_estimate_does_not_say_they_are_reserved():
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(node("n1", vcore=8000)))
    h.do(h.log.apps(app("run", "root.batch"), app("u", "root.open")))
    assert new(h.do(h.log.asks(ask("l", "run", vcore=6000)))) == [("l", "n1")]
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.asks(ask("w", "u", vcore=4000)))
    assert why(h, "u", "w")["details"]["estimate"] == "no estimate: no candidate node (no schedulable node)"
