"""Why is it pending? Every pending ask has one typed reason, kept as the pass parks it and
shown by the read API (`applications`: per ask and per application), true in the state."""

from __future__ import annotations

from tests import invariants
from tests.conftest import Harness, states
from tests.core.test_access import ACLS, LIMITS, placed
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
          - name: small
            resources: {max: {vcore: 2}}
            maxapplications: 1
          - name: gated
            properties: {application.sort.policy: stateaware}
"""


def why(h: Harness, app_id: str, key: str | None = None) -> dict:
    a = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"][app_id]
    return a["why"] if key is None else a["asks"][key]["why"]


def true_and_kept(h: Harness) -> None:
    """The reasons hold in the state, and survive a snapshot exactly."""
    for rm in h.core.rms.values():
        for p in rm.partitions.values():
            invariants.pending_reasons_are_true(p)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def test_no_node_has_room_names_the_largest_free_amount():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 1500, "memory": 4000}, n2={"vcore": 1200, "memory": 8000})
    h.do(h.log.apps(app("a", "root.gated")))
    h.do(h.log.asks(ask("big", "a", vcore=1600, memory=100)))
    w = why(h, "a", "big")
    assert w["code"] == "NoNodeRoom"
    assert w["message"] == ("no schedulable node has {vcore: 1.6 cores, memory: 100 B} free, other than nodes "
                            "reserved for other asks")
    assert w["details"] == {"asked": {"vcore": 1600, "memory": 100}, "largestFree": {"vcore": 1500, "memory": 8000},
                            "schedulableNodes": 2,  # and it fits neither node even empty: it waits for a larger one
                            "fitsNoNodeEmpty": True, "largestEmpty": {"vcore": 1500, "memory": 8000}}
    assert why(h, "a") == {"allocationKey": "big", **w}
    true_and_kept(h)


def test_no_node_has_room_names_a_drain_when_no_node_is_schedulable():
    from ykbus.explain import _details

    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("a", "root.gated")))
    h.do(h.log.asks(ask("k", "a", vcore=1000)))
    w = why(h, "a", "k")
    assert w["code"] == "NoNodeRoom"
    assert w["details"]["schedulableNodes"] == 0 and w["details"]["notSchedulable"] == {"n1": "Draining"}
    assert _details("NoNodeRoom", w["details"]) == "no node is schedulable (n1 draining)"
    true_and_kept(h)
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))  # back: it is placed
    assert [a.allocationKey for o in outs if o.kind == "alloc" for a in o.msg.new] == ["k"]


def test_queue_max_names_the_queue_its_usage_and_max_and_clears_when_placed():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(app("a", "root.small")))
    outs = h.do(h.log.asks(ask("k", "a", vcore=1000, max_allocations=3)))
    w = why(h, "a", "k")
    assert w["code"] == "QueueMax"
    assert w["details"] == {"queue": "root.small", "resource": "vcore", "used": 2000, "max": 2000, "asked": 1000}
    assert [s.reason for s in states(outs)] == [w["message"]]  # the RM hears the same reason
    true_and_kept(h)
    h.do(h.log.config(QUEUES.replace("{max: {vcore: 2}}", "{max: {vcore: 3}}")))
    assert why(h, "a", "k") is None  # nothing of it is pending any more


def test_queue_maxapplications_and_stateaware_hold_applications_with_their_reason():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(app("a", "root.small"), app("b", "root.small"), app("g1", "root.gated"), app("g2", "root.gated")))
    h.do(h.log.asks(ask("ka", "a", vcore=100), ask("kb", "b", vcore=100),
                    ask("big", "g1", vcore=9000), ask("kg", "g2", vcore=100)))
    assert why(h, "b", "kb")["code"] == "QueueMaxApplications"
    assert why(h, "b", "kb")["details"] == {"queue": "root.small", "running": 1, "max": 1}
    g2 = why(h, "g2", "kg")
    assert g2["code"] == "NotAdmitted" and g2["details"] == {"queue": "root.gated", "first": "g1"}
    assert why(h, "g1", "big")["code"] == "NoNodeRoom"
    true_and_kept(h)
    h.do(h.log.release_ask("g1"))  # g1 no longer waits: g2 may start
    assert why(h, "g2", "kg") is None


def test_user_and_group_limits_name_the_user_or_group_and_the_queue():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("a1", "root.a", user="alice"), app("a2", "root.a", user="alice"),
           app("d1", "root.a", user="dave", groups=["web", "data"]))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000, max_allocations=3), ask("k2", "a2", vcore=1000),
                    ask("kd", "d1", vcore=1000, max_allocations=4)))
    assert why(h, "a1", "k1")["code"] == "UserLimit"
    assert why(h, "a1", "k1")["details"] == {"user": "alice", "queue": "root.a", "resource": "vcore",
                                             "used": 2000, "max": 2000, "asked": 1000}
    assert why(h, "a2", "k2")["code"] == "UserMaxApplications"
    assert why(h, "d1", "kd")["code"] == "GroupLimit" and why(h, "d1", "kd")["details"]["group"] == "data"
    true_and_kept(h)


def test_the_recovery_queue_says_it_schedules_nothing_new():
    h = Harness()
    h.setup(ACLS, n1={"vcore": 4000})
    placed(h, app("r1", "root.removed", user="x", tags={"application.create.force": "true"}))
    h.do(h.log.asks(ask("k", "r1", vcore=1000)))
    assert why(h, "r1", "k")["code"] == "RecoveryQueue"
    true_and_kept(h)


def test_a_woken_ask_is_queued_until_the_next_pass_and_a_placed_one_has_no_reason():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a", "root.gated")))
    h.do(h.log.asks(ask("k", "a", vcore=2000)))
    assert why(h, "a", "k")["code"] == "NoNodeRoom"
    h.do(h.log.nodes(node("n2", vcore=4000)))
    assert why(h, "a", "k") is None and why(h, "a") is None


def test_a_format_2_snapshot_without_reasons_still_loads():
    import msgspec

    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(app("a", "root.small")))
    h.do(h.log.asks(ask("k", "a", vcore=1000, max_allocations=3)))
    snap = msgspec.msgpack.decode(dump_snapshot(h.core))
    snap["format"] = 2  # as ykbus wrote it before reasons: SApp and SAsk without `why`
    for rm in snap["rms"]:
        for p in rm[9]:  # SRM.partitions
            apps = next(x for x in p if isinstance(x, list) and x and isinstance(x[0], list) and x[0][0] == "a")
            for a in apps:  # SApp arrays: `asks` at 7; format 2 ended at `timer` (12 fields)
                for k in a[7]:
                    assert k[15] is not None  # SAsk.why, after the 15 fields of format 2
                    del k[15:]
                del a[12:]
    h.core = load_snapshot(msgspec.msgpack.encode(snap), load_yaml)
    assert why(h, "a", "k")["code"] == "Queued"  # parked before reasons existed: no reason kept
    uuid = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["a"]["allocations"][0]
    h.do(h.log.release("a", uuid=uuid))  # the queue's usage falls: k is woken, placed, k's next one parked
    assert why(h, "a", "k") is None
    h.do(h.log.asks(ask("k2", "a", vcore=1000)))
    assert why(h, "a", "k2")["code"] == "QueueMax"


def test_an_application_held_by_maxapplications_that_recovery_makes_running_is_held_no_more():
    """Regression (found by the fuzz campaign's reason invariant): a recovered allocation
    makes a held Accepted application Running; it must then be scheduled, not stay held."""
    from ykbus.log.build import allocation

    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(app("a", "root.small"), app("b", "root.small")))
    h.do(h.log.asks(ask("ka", "a", vcore=100), ask("kb", "b", vcore=100)))
    assert why(h, "b", "kb")["code"] == "QueueMaxApplications"
    outs = h.do(h.log.nodes(node("n2", vcore=1000, existing=[allocation("old-1", "kold", "b", "n2", vcore=100)])))
    assert [a.allocationKey for m in outs if m.kind == "alloc" for a in m.msg.new] == ["kb"]
    assert why(h, "b", "kb") is None
    true_and_kept(h)


def rmstate(h: Harness, event: str) -> list:
    return h.do(h.log.entry("rmstate", {"rmID": "rm-1", "event": event, "reason": "test"}, rm=""))


def test_a_paused_rm_gets_nothing_placed_and_its_asks_say_so_until_it_is_back():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a", "root.gated")))
    h.do(h.log.asks(ask("before", "a", vcore=5000)))  # waits for a node
    rmstate(h, "CONNECTION_LOST")
    assert placed_keys(h.do(h.log.asks(ask("k", "a", vcore=1000)))) == []
    assert placed_keys(h.do(h.log.nodes(node("n2", vcore=8000)))) == []  # room enough for both now
    for key in ("k", "before"):
        w = why(h, "a", key)
        assert w["code"] == "RMPaused" and w["details"] == {"rm": "rm-1"}
    true_and_kept(h)  # a snapshot taken while Paused restores Paused
    invariants.state_is_consistent(h.core)
    assert sorted(placed_keys(rmstate(h, "RECONNECT"))) == ["before", "k"]  # placed at the entry that resumes it
    assert why(h, "a") is None


def placed_keys(outs: list) -> list[str]:
    return [a.allocationKey for o in outs if o.kind == "alloc" for a in o.msg.new]


REQUIRED = {"yunikorn.apache.org/requiredNode": "n2"}


def test_an_ask_that_must_run_on_one_node_waits_for_that_node_with_its_reason():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(app("a", "root.gated")))
    req = ask("ds", "a", vcore=1000)
    req["tags"] = REQUIRED
    outs = h.do(h.log.asks(req))
    assert placed_keys(outs) == []  # n1 has room, but it must run on n2
    w = why(h, "a", "ds")
    assert w["code"] == "RequiredNodeGone" and w["details"] == {"node": "n2"}
    assert [s.reason for s in states(outs)] == [w["message"]]
    true_and_kept(h)

    h.do(h.log.nodes(node("n2", vcore=500)))  # there, but too small
    w = why(h, "a", "ds")
    assert w["code"] == "RequiredNodeFull"
    assert w["details"] == {"node": "n2", "asked": {"vcore": 1000}, "free": {"vcore": 500}}
    true_and_kept(h)

    h.do(h.log.nodes(node("n2", action="DRAIN_NODE")))
    w = why(h, "a", "ds")
    assert w["code"] == "RequiredNodeDraining" and w["details"] == {"node": "n2", "state": "Draining"}
    true_and_kept(h)

    h.do(h.log.nodes(node("n2", action="DRAIN_TO_SCHEDULABLE")))
    outs = h.do(h.log.nodes(node("n2", action="UPDATE", vcore=2000)))
    assert [(a.allocationKey, a.nodeID) for o in outs if o.kind == "alloc" for a in o.msg.new] == [("ds", "n2")]
    invariants.state_is_consistent(h.core)


def test_a_required_node_that_goes_turns_the_reason_to_gone():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000}, n2={"vcore": 500})
    h.do(h.log.apps(app("a", "root.gated")))
    req = ask("ds", "a", vcore=1000)
    req["tags"] = REQUIRED
    h.do(h.log.asks(req))
    assert why(h, "a", "ds")["code"] == "RequiredNodeFull"
    h.do(h.log.nodes(node("n2", action="DECOMISSION")))
    assert why(h, "a", "ds")["code"] == "RequiredNodeGone"
    true_and_kept(h)
