"""Gang scheduling: task groups and placeholders, all or nothing, the SI's replacement
protocol, the placeholder timeout, recovery (docs/gang.md)."""

from __future__ import annotations

from tests import invariants
from tests.conftest import Harness, states
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import allocation, app, ask, node, resource
from ykbus.yamlload import load_yaml

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
          - name: small
            resources: {max: {vcore: 3}}
"""


def gang(app_id: str, vcore: int, queue: str = "root.jobs", timeout_ms: int = 0, hard: bool = False) -> dict:
    return app(app_id, queue, placeholderAsk=resource(vcore=vcore), executionTimeoutMilliSeconds=timeout_ms,
               gangSchedulingStyle="Hard" if hard else "Soft")


def ph(key: str, app_id: str, vcore: int = 1000, group: str = "workers", n: int = 1) -> dict:
    return {**ask(key, app_id, vcore=vcore, max_allocations=n), "taskGroupName": group, "placeholder": True}


def real(key: str, app_id: str, vcore: int = 800, group: str = "workers") -> dict:
    return {**ask(key, app_id, vcore=vcore), "taskGroupName": group}


def new(outs: list) -> list[tuple[str, str, str]]:
    return [(a.allocationKey, a.nodeID, a.UUID) for o in outs if o.kind == "alloc" for a in o.msg.new]


def released(outs: list) -> list[tuple[str, str, str]]:
    return [(r.UUID, r.allocationKey, r.terminationType.name) for o in outs if o.kind == "alloc" for r in o.msg.released]


def app_of(h: Harness, app_id: str) -> dict:
    return h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"][app_id]


def checked(h: Harness) -> None:
    """Every invariant holds, and a snapshot restores exactly this state."""
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def confirmation(log, app_id: str, uuid: str):
    """The RM's second step of a replacement: it released placeholder `uuid`."""
    return log.entry("alloc", {"rmID": "rm-1", "releases": {"allocationsToRelease": [
        {"applicationID": app_id, "UUID": uuid, "partitionName": "default",
         "terminationType": "PLACEHOLDER_REPLACED"}]}})


def confirm(h: Harness, app_id: str, uuid: str) -> list:
    return h.do(confirmation(h.log, app_id, uuid))


def test_a_gang_is_placed_whole_or_not_at_all():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 2500}, n2={"vcore": 1200})
    h.do(h.log.apps(gang("g", 4000)))
    outs = h.do(h.log.asks(ph("p", "g", n=4)))
    assert new(outs) == []  # three of four would fit: none is placed
    w = app_of(h, "g")["asks"]["p"]["why"]
    assert w["code"] == "GangNoRoom" and w["details"]["missing"] == {"vcore": 1000}
    assert [s.reason for s in states(outs)] == [w["message"]]
    assert app_of(h, "g")["state"] == "Accepted"
    checked(h)
    outs = h.do(h.log.nodes(node("n3", vcore=1000)))
    assert sorted(k for k, _, _ in new(outs)) == ["p"] * 4  # all four in the entry that made room
    assert app_of(h, "g")["state"] == "Running"
    checked(h)


def test_a_gang_waits_until_its_placeholders_cover_placeholder_ask():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(gang("g", 3000)))
    assert new(h.do(h.log.asks(ph("a", "g", n=2)))) == []
    w = app_of(h, "g")["asks"]["a"]["why"]
    assert w["code"] == "GangIncomplete"
    assert w["details"] == {"application": "g", "placeholderAsk": {"vcore": 3000}, "pending": {"vcore": 2000},
                            "missing": {"vcore": 1000}}
    checked(h)
    outs = h.do(h.log.asks(ph("b", "g", group="ps")))
    assert sorted(k for k, _, _ in new(outs)) == ["a", "a", "b"]


def test_queue_max_applies_to_the_whole_gang_and_a_gang_over_the_max_is_rejected():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    outs = h.do(h.log.apps(gang("big", 4000, queue="root.small")))
    [rej] = [r for o in outs if o.kind == "app" for r in o.msg.rejected]
    assert rej.reason == "placeholderAsk vcore 4 cores exceeds queue root.small max 3 cores: the gang could never run"
    h.do(h.log.apps(app("other", "root.small"), gang("g", 2000, queue="root.small")))
    h.do(h.log.asks(ask("o", "other", vcore=1500)))
    assert new(h.do(h.log.asks(ph("p", "g", n=2)))) == []  # 1500 used + 2000 > 3000, although one would fit
    w = app_of(h, "g")["asks"]["p"]["why"]
    assert w["code"] == "QueueMax" and w["details"]["asked"] == 2000 and w["details"]["used"] == 1500
    checked(h)
    outs = h.do(h.log.release("other"))
    assert sorted(k for k, _, _ in new(outs)) == ["p", "p"]


def test_a_real_ask_replaces_a_placeholder_in_two_steps():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 2000}, n2={"vcore": 2000})
    h.do(h.log.apps(gang("g", 2000)))
    placed = new(h.do(h.log.asks(ph("p", "g", n=2))))
    assert len(placed) == 2
    outs = h.do(h.log.asks(real("r1", "g", vcore=800)))
    assert new(outs) == []  # not placed by the normal path
    [(uuid, key, term)] = released(outs)
    assert key == "p" and term == "PLACEHOLDER_REPLACED" and uuid in {u for _, _, u in placed}
    w = app_of(h, "g")["asks"]["r1"]["why"]
    assert w["code"] == "Replacing" and w["details"]["placeholder"] == uuid
    assert app_of(h, "g")["allocated"] == {"vcore": 2000}  # the placeholder still counts
    checked(h)
    outs = confirm(h, "g", uuid)  # the RM confirms: the real allocation, on the placeholder's node
    node_of = {u: n for _, n, u in placed}
    assert [(k, n) for k, n, _ in new(outs)] == [("r1", node_of[uuid])]
    assert released(outs) == []
    assert app_of(h, "g")["allocated"] == {"vcore": 1800}  # the real ask's resources from now on
    checked(h)
    again = confirm(h, "g", uuid)  # a second confirmation changes nothing
    assert new(again) == [] and app_of(h, "g")["allocated"] == {"vcore": 1800}


def test_a_real_ask_larger_than_its_groups_placeholders_cancels_them():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(gang("g", 2000)))
    assert len(new(h.do(h.log.asks(ph("p", "g", n=2))))) == 2
    outs = h.do(h.log.asks(real("big", "g", vcore=1500)))
    assert sorted(t for _, _, t in released(outs)) == ["TIMEOUT", "TIMEOUT"]
    assert all("larger than the placeholders of task group workers" in r.message
               for o in outs if o.kind == "alloc" for r in o.msg.released)
    assert [k for k, _, _ in new(outs)] == ["big"]  # then scheduled as an ordinary ask
    assert app_of(h, "g")["allocated"] == {"vcore": 1500}
    checked(h)


def test_a_real_ask_waits_for_its_groups_placeholders_and_an_unknown_group_is_ordinary():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 1500})
    h.do(h.log.apps(gang("g", 2000)))
    h.do(h.log.asks(ph("p", "g", n=2)))  # does not fit
    outs = h.do(h.log.asks(real("r", "g", vcore=500), real("x", "g", vcore=500, group="nobody")))
    assert [k for k, _, _ in new(outs)] == ["x"]
    assert app_of(h, "g")["asks"]["r"]["why"]["code"] == "GangPending"
    checked(h)


def test_the_placeholder_timeout_releases_unused_placeholders_of_a_running_gang():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(gang("g", 3000, timeout_ms=60_000)))
    placed = new(h.do(h.log.asks(ph("p", "g", n=3))))
    h.do(h.log.asks(real("r", "g")))
    [(uuid, _, _)] = released(h.outputs[-2:])
    confirm(h, "g", uuid)
    outs = h.do(h.log.tick(61 * 10**9))
    assert sorted(u for u, _, t in released(outs) if t == "TIMEOUT") == sorted(u for _, _, u in placed if u != uuid)
    assert app_of(h, "g")["state"] == "Running"  # it runs: it keeps its real allocation
    assert app_of(h, "g")["allocated"] == {"vcore": 800}
    checked(h)


def recovered_partial_gang(hard: bool) -> Harness:
    """A gang whose RM recovered one of its two placeholders; the other finds no room."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.apps(gang("g", 2000, timeout_ms=30_000, hard=hard)))
    h.do(h.log.nodes(node("n1", vcore=1500, existing=[{**allocation("u1", "p", "g", "n1", vcore=1000),
                                                        "taskGroupName": "workers", "placeholder": True}])))
    h.do(h.log.asks(ph("q", "g"), real("r", "g", vcore=300)))
    return h


def test_a_soft_gang_not_running_at_its_timeout_resumes_as_an_ordinary_application():
    h = recovered_partial_gang(hard=False)
    assert app_of(h, "g")["state"] == "Accepted"  # recovered placeholders do not cover placeholderAsk
    assert app_of(h, "g")["asks"]["q"]["why"]["code"] == "GangNoRoom"
    checked(h)
    outs = h.do(h.log.tick(31 * 10**9))
    assert released(outs) == [("u1", "p", "TIMEOUT")]
    assert [(r.allocationKey, r.terminationType.name) for o in outs if o.kind == "alloc"
            for r in o.msg.releasedAsks] == [("q", "TIMEOUT")]
    assert [k for k, _, _ in new(outs)] == ["r"]  # an ordinary ask now
    confirmed = h.do(h.log.entry("alloc", {"rmID": "rm-1", "releases": {"allocationAsksToRelease": [
        {"applicationID": "g", "allocationKey": "q", "partitionName": "default", "terminationType": "TIMEOUT"}]}}))
    assert [o for o in confirmed if o.kind == "event"] == []  # the RM's confirmation: taken in silence
    assert app_of(h, "g")["state"] == "Running"  # Resuming, then Running with its first real allocation
    checked(h)


def test_a_hard_gang_not_running_at_its_timeout_fails():
    h = recovered_partial_gang(hard=True)
    outs = h.do(h.log.tick(31 * 10**9))
    assert released(outs) == [("u1", "p", "TIMEOUT")]
    assert h.core.rms["rm-1"].partitions["default"].terminated["g"].state.value == "Failed"
    checked(h)


def test_a_gang_in_flight_survives_a_snapshot():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(gang("g", 2000, timeout_ms=60_000)))
    h.do(h.log.asks(ph("p", "g", n=2)))
    outs = h.do(h.log.asks(real("r", "g")))
    [(uuid, _, _)] = released(outs)
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    tail = [h.log.entry("alloc", {"rmID": "rm-1", "releases": {"allocationsToRelease": [
        {"applicationID": "g", "UUID": uuid, "partitionName": "default", "terminationType": "PLACEHOLDER_REPLACED"}]}}),
        h.log.tick(61 * 10**9)]
    from ykbus.log.jsonl import encode_output
    a = [encode_output(o) for e in tail for o in h.core.apply(e)]
    b = [encode_output(o) for e in tail for o in restored.apply(e)]
    assert a == b and any(b'"r"' in line for line in a)


def test_real_asks_in_one_entry_take_distinct_placeholders():
    """Regression (found by `ykbus bench core --workload gang`): real asks decided in one
    walk all took the same placeholder, because the walk's own Replace decisions were not
    yet committed when the next real ask looked for a free one."""
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(gang("g", 3000)))
    placed = {u for _, _, u in new(h.do(h.log.asks(ph("p", "g", n=3))))}
    outs = h.do(h.log.asks(real("r1", "g"), real("r2", "g"), real("r3", "g")))
    uuids = [u for u, _, t in released(outs) if t == "PLACEHOLDER_REPLACED"]
    assert sorted(uuids) == sorted(placed)  # three asks, three different placeholders
    checked(h)
    confirmed = [o for uuid in uuids for o in confirm(h, "g", uuid)]
    assert sorted(k for k, _, _ in new(confirmed)) == ["r1", "r2", "r3"]
    assert app_of(h, "g")["allocated"] == {"vcore": 2400}
    checked(h)


def test_a_gang_larger_than_one_entry_places_waits_and_costs_nothing(monkeypatch):
    """Regression (fuzzing): a placeholder ask with maxAllocations 2^31-1 kept one pass busy
    for minutes, trying to place each placeholder of a gang that is placed whole in one entry."""
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(gang("huge", 1000), gang("g", 2000)))
    outs = h.do(h.log.asks(ph("p", "huge", n=2**31 - 1)))
    assert new(outs) == []
    w = app_of(h, "huge")["asks"]["p"]["why"]
    assert w["code"] == "GangTooLarge"
    assert w["details"] == {"application": "huge", "placeholders": 2**31 - 1, "max": 10_000}
    assert [s.reason for s in states(outs)] == [w["message"]]
    assert "YKBUS_LIMIT_ALLOCATIONS_PER_ENTRY" in w["message"]
    outs = h.do(h.log.asks(ph("q", "g", n=2)))  # the others are placed as before
    assert sorted(k for k, _, _ in new(outs)) == ["q", "q"]
    checked(h)


def test_a_gang_of_exactly_one_entrys_placements_is_placed(monkeypatch):
    from ykbus import limits

    monkeypatch.setattr(limits, "MAX_ALLOCATIONS_PER_ENTRY", 3)
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(gang("g3", 3000), gang("g4", 3000)))
    outs = h.do(h.log.asks(ph("a", "g3", n=2), ph("b", "g3", n=1), ph("c", "g4", n=4)))
    assert sorted(k for k, _, _ in new(outs)) == ["a", "a", "b"]  # the entry's budget is spent
    assert new(h.do(h.log.tick())) == []  # the next pass judges g4
    assert app_of(h, "g4")["asks"]["c"]["why"]["details"]["placeholders"] == 4
    checked(h)
    outs = h.do(h.log.asks(ph("c", "g4", n=3)))  # the RM asks for fewer: the gang is judged again
    assert sorted(k for k, _, _ in new(outs)) == ["c", "c", "c"]
    checked(h)


def test_room_a_cancelled_group_frees_is_used_in_the_same_pass():
    """Regression (found by the state machine): a real ask larger than its group's
    placeholders cancels them in the middle of a pass; the room they free must count for
    the rest of that pass. Before, a shape that had found no room earlier in the pass (while
    the placeholders held it) was still marked failed, and both 3000 asks waited with
    6100 free."""
    h = Harness()
    h.do(h.log.register(QUEUES))
    h.do(h.log.apps(gang("g", 2500)))
    h.do(h.log.asks(ph("p1", "g", vcore=2500, group="g1"), ph("p2", "g", vcore=2500, group="g1")))
    h.do(h.log.asks(real("other", "g", vcore=3000, group="g2")))  # no placeholders of g2: an ordinary ask
    h.do(h.log.asks(real("large", "g", vcore=3000, group="g1")))  # larger than g1's placeholders
    outs = h.do(h.log.nodes(node("n1", vcore=6100)))
    placed = [key for key, _, _ in new(outs)]
    assert placed[:2] == ["p1", "p2"] and "other" in placed[2:]  # the gang, cancelled, then the freed room
    invariants.state_is_consistent(h.core)


def test_a_gang_spreads_under_fair_node_sorting_as_its_members_fill_nodes():
    """Three equal nodes using 20M, 10M and 10M of memory; a gang of two 10M placeholders.
    Under `fair` each member goes to the least used node as the members before it left it:
    20M on every node (YuniKorn's order), not both on the first 10M node (30M/20M/10M)."""
    mb = 1_000_000
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000, "memory": 100 * mb}, n2={"vcore": 8000, "memory": 100 * mb},
            n3={"vcore": 8000, "memory": 100 * mb})
    h.do(h.log.apps(app("used", "root.jobs")))
    h.do(h.log.asks(ask("u1", "used", memory=20 * mb), ask("u2", "used", memory=10 * mb),
                    ask("u3", "used", memory=10 * mb)))
    p = h.core.rms["rm-1"].partitions["default"]
    assert sorted(p.nodes[n].capacity["memory"] - p.nodes[n].free["memory"] for n in p.nodes) == [10 * mb, 10 * mb,
                                                                                                   20 * mb]
    h.do(h.log.apps(app("g", "root.jobs", placeholderAsk=resource(memory=20 * mb))))
    outs = h.do(h.log.asks({**ask("p", "g", memory=10 * mb, max_allocations=2), "taskGroupName": "w",
                            "placeholder": True}))
    assert len(new(outs)) == 2
    assert sorted(p.nodes[n].capacity["memory"] - p.nodes[n].free["memory"] for n in p.nodes) == [20 * mb] * 3
    invariants.state_is_consistent(h.core)


def test_a_gang_of_two_shapes_woken_by_room_for_one_of_them_waits_again_whole(h):
    # regression: a node with room for the small placeholder only woke it; the gang, judged
    # whole, parked both, and parking the one still parked raised (the core failed the entry)
    h.setup("")
    h.do(h.log.nodes(node("n0", gpu=0, vcore=2000)))
    h.do(h.log.apps(app("g", placeholderAsk=resource(gpu=5))))
    h.do(h.log.asks({**ask("a", "g", gpu=1), "taskGroupName": "x", "placeholder": True},
                    {**ask("b", "g", gpu=4), "taskGroupName": "y", "placeholder": True}))
    outs = h.do(h.log.nodes(node("n1", gpu=2, vcore=2000)))
    assert not any(o.msg.new for o in outs if o.kind == "alloc")
    asks = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["g"]["asks"]
    assert {k: v["why"]["code"] for k, v in asks.items()} == {"a": "GangNoRoom", "b": "GangNoRoom"}
    outs = h.do(h.log.nodes(node("n2", gpu=4, vcore=2000)))  # now it fits: placed whole
    assert sorted(a.allocationKey for o in outs if o.kind == "alloc" for a in o.msg.new) == ["a", "b"]
    invariants.state_is_consistent(h.core)


def test_an_ask_sent_again_cannot_turn_from_a_placeholder_into_a_real_one():
    """Sending an ask again replaces its request (docs/protocol.md), not what it is: a
    placeholder ask sent again with `placeholder: false`, or another task group, is rejected
    naming both, and the gang's placeholders still wait as they did."""
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(gang("g", vcore=4000)))
    h.do(h.log.asks(ph("p", "g", n=4)))
    for changed in ({**ph("p", "g", n=4), "placeholder": False}, ph("p", "g", n=4, group="other")):
        outs = h.do(h.log.asks(changed))
        [rejected] = [r for o in outs if o.kind == "alloc" for r in o.msg.rejected]
        assert rejected.allocationKey == "p"
        assert "was sent with placeholder true and taskGroupName 'workers'" in rejected.reason
        assert "ask again under another allocationKey" in rejected.reason
    assert app_of(h, "g")["asks"]["p"]["why"]["code"] == "GangNoRoom"  # still the gang's placeholders
    checked(h)


def test_a_confirmed_replacement_takes_its_placeholders_room_on_a_node_reserved_for_another_ask():
    """The placeholder's room is the gang member's: a reservation of its node by another ask
    (which waited past the reservation delay meanwhile) does not take it, or the RM, which
    already stopped the placeholder, would be left with a partial gang."""
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(gang("g", 6000), app("big", "root.small")))
    [(_, _, uuid)] = new(h.do(h.log.asks(ph("p", "g", vcore=6000))))
    h.do(h.log.asks(ask("B", "big", vcore=3000)))
    h.do(h.log.tick(3_000_000_000))
    assert h.core.registry.rms["rm-1"].partitions["default"].nodes["n1"].reserved.key == "B"
    outs = h.do(h.log.asks(real("r", "g", vcore=6000)))
    assert [(u, k) for u, k, _ in released(outs)] == [(uuid, "p")]
    outs = confirm(h, "g", uuid)
    assert [(k, n) for k, n, _ in new(outs)] == [("r", "n1")]  # not B, which waits on
    assert app_of(h, "g")["allocated"] == {"vcore": 6000}
    checked(h)


def test_a_placeholder_preempted_for_another_ask_is_not_replaced_into_the_room_it_frees():
    """A placeholder chosen as a victim for `u` (its node reserved for u) was then given to a
    real ask's replacement; once the RM confirmed, the real ask took the room the preemption
    freed for u, and was preempted for u in the same entry: the gang left partial."""
    from tests.core.test_preemption import MAY_PREEMPT, SECOND, part, queues
    from ykbus.log.build import resource as res

    h = Harness()
    h.setup(queues(), n1={"vcore": 2000})
    h.do(h.log.apps(app("g", "root.b", placeholderAsk=res(vcore=2000)), app("urgent", "root.a")))
    assert len(new(h.do(h.log.asks(ph("p", "g", vcore=1000, group="w", n=2))))) == 2
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    [(victim, _, term)] = released(h.do(h.log.tick(30 * SECOND)))
    assert term == "PREEMPTED_BY_SCHEDULER" and part(h).nodes["n1"].reserved.key == "u"
    outs = h.do(h.log.asks(real("r", "g", vcore=1000, group="w"), real("r2", "g", vcore=1000, group="w")))
    assert victim not in [u for u, _, t in released(outs) if t == "PLACEHOLDER_REPLACED"]  # not the victim
    outs = h.do(h.log.release("g", uuid=victim, termination="PREEMPTED_BY_SCHEDULER"))  # the RM stops it
    assert [k for k, _, _ in new(outs)] == ["u"]
    checked(h)


def test_a_gang_whose_only_placeholders_are_recovered_is_accepted_and_its_timeout_holds():
    """Regression (an outside review): a gang whose RM recovered placeholders and sent no
    ask stayed New; at its placeholder timeout a Hard one was not failed (its real asks were
    then placed one by one, an ordinary application) and a Soft one skipped Resuming. A
    placeholder recovered makes it Accepted, as an ask does."""
    for hard, ended in ((True, "Failed"), (False, "Resuming")):
        h = Harness()
        h.setup(QUEUES)
        h.do(h.log.apps(gang("g", 2000, timeout_ms=10_000, hard=hard)))
        h.do(h.log.nodes(node("n1", vcore=4000, existing=[{**allocation("u1", "p", "g", "n1", vcore=1000),
                                                            "taskGroupName": "workers", "placeholder": True}])))
        assert app_of(h, "g")["state"] == "Accepted"
        outs = h.do(h.log.tick(11 * 10**9))
        assert released(outs) == [("u1", "p", "TIMEOUT")]
        states_now = [u.state for o in outs if o.kind == "app" for u in o.msg.updated if u.applicationID == "g"]
        assert ended in states_now, states_now
        outs = h.do(h.log.asks(real("r", "g", vcore=500)))
        placed = [k for k, _, _ in new(outs)]
        assert placed == ([] if hard else ["r"]), (hard, placed)
        checked(h)


def test_placeholder_without_a_task_group_is_an_ordinary_ask_as_the_si_says():
    """Regression (an outside review): the SI's `placeholder` is "ignored if the
    taskGroupName is not set"; such an ask (and such a recovered allocation) was a
    placeholder here, released with TIMEOUT at the gang's placeholder timeout."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.apps(gang("g", 2000, timeout_ms=10_000)))
    h.do(h.log.nodes(node("n1", vcore=4000, existing=[{**allocation("u1", "p", "g", "n1", vcore=1000),
                                                        "placeholder": True}])))
    outs = h.do(h.log.asks({**ask("k", "g", vcore=1000), "placeholder": True}))
    [(key, _, uuid)] = new(outs)
    [placed] = [a for o in outs if o.kind == "alloc" for a in o.msg.new]
    assert key == "k" and placed.placeholder is False
    outs = h.do(h.log.tick(11 * 10**9))
    assert released(outs) == []  # neither is a placeholder: the timeout takes neither
    checked(h)
