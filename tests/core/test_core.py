"""Behaviour of the core through its only interface: log entries in, outputs out."""

from tests.conftest import app_updates, events, msgs, new_allocs, rejected_asks, released, states
from ykbus.core.step import Step
from ykbus.log.build import GB, allocation, app, ask, node

TWO_QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
            resources: {guaranteed: {memory: 8G, vcore: 8}}
          - name: dev
            resources: {max: {memory: 4G, vcore: 4}}
"""


def nodes_of(h, partition="default"):
    return h.core.dump()["rms"]["rm-1"]["partitions"][partition]["nodes"]


def apps_of(h, partition="default"):
    return h.core.dump()["rms"]["rm-1"]["partitions"][partition]["applications"]


def queue(h, path, partition="default"):
    return h.core.dump()["rms"]["rm-1"]["partitions"][partition]["queues"][path]


# --- registration ----------------------------------------------------------------------

def test_register_answers_empty_response_and_creates_partitions(h):
    outs = h.do(h.log.register(TWO_QUEUES))
    assert [(o.kind, o.msg.error) for o in outs] == [("register", "")]
    assert set(h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"]) == {"root", "root.prod", "root.dev"}


def test_register_with_invalid_config_lists_every_error_and_changes_nothing(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    before = h.core.dump()
    bad = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n          - name: a.b\n          - name: x\n            resources: {guaranteed: {vcore: 2}, max: {vcore: 1}}\n"
    outs = h.do(h.log.register(bad))
    error = msgs(outs, "register")[0].error
    assert "contains a dot" in error and "guaranteed vcore 2 cores exceeds max 1 core" in error
    after = h.core.dump()
    assert after["rms"] == before["rms"]


def test_reregistration_wipes_everything_the_rm_owned(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000, "memory": 4 * GB})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000)))
    assert len(h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["allocations"]) == 1
    outs = h.do(h.log.register(TWO_QUEUES))
    assert msgs(outs, "register")[0].error == ""
    p = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    assert p["nodes"] == {} and p["applications"] == {} and p["allocations"] == {}


def test_rm_id_must_be_a_nats_token_and_match_subject(h):
    outs = h.do(h.log.entry("register", {"rmID": "a.b"}, rm=""))
    assert "not a NATS token" in msgs(outs, "register")[0].error
    outs = h.do(h.log.entry("register", {"rmID": "other"}, rm="rm-1"))
    assert "does not match" in msgs(outs, "register")[0].error
    assert h.core.dump()["rms"] == {}


def test_policy_group_config_is_shared_by_later_registrations(h):
    h.do(h.log.register(TWO_QUEUES, policy_group="batch"))
    outs = h.do(h.log.register("", policy_group="batch", rm="rm-2"))
    assert msgs(outs, "register")[0].error == ""
    assert "root.dev" in h.core.dump()["rms"]["rm-2"]["partitions"]["default"]["queues"]


def test_two_rms_have_isolated_partitions(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.register(TWO_QUEUES, rm="rm-2"))
    outs = h.do(h.log.apps(app("a1", "root.prod"), rm="rm-2"))
    assert [o.rm for o in outs] == ["rm-2"]
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=1000), rm="rm-2"))
    # rm-2 has no node: rm-1's node is in another partition
    assert new_allocs(outs) == []
    assert states(outs)[0].state == "FAILED"


def test_each_rm_holds_its_own_deadlines_fired_in_one_order(h):
    """An RM's partitions and their timers are a unit (it could move to another core): each
    RM holds its deadlines, a re-registration drops them with its partitions, and timers due
    in one entry fire in (deadline, insertion) order across RMs."""
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.register(TWO_QUEUES, rm="rm-2"))
    h.do(h.log.nodes(node("m1", vcore=4000), rm="rm-2"))
    h.do(h.log.apps(app("late", "root.prod", executionTimeoutMilliSeconds=2000)))
    h.do(h.log.apps(app("early", "root.prod", executionTimeoutMilliSeconds=1000), rm="rm-2"))
    h.do(h.log.asks(ask("k", "late", vcore=1000)))
    h.do(h.log.asks(ask("k", "early", vcore=1000), rm="rm-2"))
    held = {rm_id: {t.partition.rm for _, _, t in rm.timers.entries()} for rm_id, rm in h.core.rms.items()}
    assert held == {"rm-1": {"rm-1"}, "rm-2": {"rm-2"}}
    outs = h.do(h.log.tick(5 * 10**9))  # both timeouts are due in this entry: rm-2's came first
    failed = [(o.rm, u.applicationID) for o in outs if o.kind == "app" for u in o.msg.updated if u.state == "Failing"]
    assert failed == [("rm-2", "early"), ("rm-1", "late")]
    h.do(h.log.apps(app("again", "root.prod", executionTimeoutMilliSeconds=1000), rm="rm-2"))
    h.do(h.log.asks(ask("k", "again", vcore=1000), rm="rm-2"))
    assert h.core.rms["rm-2"].timers.entries()
    h.do(h.log.register(TWO_QUEUES, rm="rm-2"))  # registered again: its partitions and deadlines go
    # but for the expiry of what had ended, remembered by the new partitions (issue 40, item 7)
    kept = [(type(t).__name__, t.app_id, t.partition) for _, _, t in h.core.rms["rm-2"].timers.entries()]
    assert kept == [("ExpireTimer", "early", h.core.rms["rm-2"].partitions["default"].records)]


def test_unregister_stops_the_rm_and_later_messages_are_rejected(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.unregister())
    assert h.core.dump()["rms"]["rm-1"]["state"] == "Stopped"
    outs = h.do(h.log.apps(app("a1", "root.prod")))
    assert "not registered" in msgs(outs, "app")[0].rejected[0].reason


def test_messages_before_registration_are_rejected_per_item(h):
    outs = h.do(h.log.nodes(node("n1", vcore=1000)))
    assert msgs(outs, "node")[0].rejected[0].nodeID == "n1"
    outs = h.do(h.log.asks(ask("k", "a", vcore=1)))
    assert rejected_asks(outs)[0].allocationKey == "k"


# --- nodes -----------------------------------------------------------------------------

def test_node_create_twice_is_rejected_and_update_of_unknown_node_too(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    outs = h.do(h.log.nodes(node("n1", vcore=1000), node("n2", action="UPDATE", vcore=5)))
    rej = msgs(outs, "node")[0].rejected
    assert [(r.nodeID, r.reason) for r in rej] == [
        ("n1", "node n1 already exists"), ("n2", "node n2 does not exist")]


def test_an_update_naming_another_partition_is_refused_not_half_applied(h):
    """Regression (an outside review): an UPDATE whose si/node-partition named another
    partition was accepted: the node stayed in its partition, its attributes saying the
    other. A node does not move between partitions by an update (YuniKorn fails it too)."""
    two = TWO_QUEUES + "  - name: gpu\n    queues:\n      - name: root\n        submitacl: '*'\n"
    h.setup(two)
    h.do(h.log.nodes(node("n1", vcore=1000, attributes={"si/node-partition": "gpu"})))
    outs = h.do(h.log.nodes(node("n1", action="UPDATE", vcore=2000, attributes={"si/node-partition": "default"})))
    [rejected] = msgs(outs, "node")[0].rejected
    assert rejected.nodeID == "n1" and "si/node-partition" in rejected.reason and "gpu" in rejected.reason
    gpu = h.core.rms["rm-1"].partitions["gpu"]
    assert gpu.nodes["n1"].capacity == {"vcore": 1000} and gpu.nodes["n1"].attributes["si/node-partition"] == "gpu"
    outs = h.do(h.log.nodes(node("n1", action="UPDATE", vcore=2000, attributes={"si/node-partition": "GPU"})))
    assert msgs(outs, "node") == [] or not msgs(outs, "node")[0].rejected  # its own partition, in any case: taken
    assert gpu.nodes["n1"].capacity == {"vcore": 2000}


def test_node_update_changes_capacity_and_frees_waiting_asks(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=2000)))
    assert new_allocs(outs) == [] and states(outs)[0].state == "FAILED"
    outs = h.do(h.log.nodes(node("n1", action="UPDATE", vcore=4000)))
    assert [a.nodeID for a in new_allocs(outs)] == ["n1"]


def test_occupied_resources_reduce_what_the_node_offers(h):
    h.setup(TWO_QUEUES)
    h.do(h.log.nodes(node("n1", vcore=4000, occupied={"vcore": 3500})))
    h.do(h.log.apps(app("a1", "root.prod")))
    assert new_allocs(h.do(h.log.asks(ask("k1", "a1", vcore=1000)))) == []
    outs = h.do(h.log.nodes(node("n1", action="UPDATE", occupied={"vcore": 0})))
    assert len(new_allocs(outs)) == 1


def test_drained_node_gets_nothing_new_until_undrained(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("a1", "root.prod")))
    assert new_allocs(h.do(h.log.asks(ask("k1", "a1", vcore=1000)))) == []
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    assert "Draining" in msgs(outs, "node")[0].rejected[0].reason
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [a.allocationKey for a in new_allocs(outs)] == ["k1"]
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert "Schedulable" in msgs(outs, "node")[0].rejected[0].reason


def test_decommission_releases_and_reports_the_node_allocations(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000}, n2={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=2000)))
    assert new_allocs(outs)[0].nodeID == "n1"
    outs = h.do(h.log.nodes(node("n1", action="DECOMISSION")))
    rel = released(outs)
    assert [(r.allocationKey, r.terminationType) for r in rel] == [("k1", "STOPPED_BY_RM")]
    assert "n1" not in nodes_of(h)
    assert apps_of(h)["a1"]["allocated"] == {}


def test_unknown_node_action_is_rejected(h):
    h.setup(TWO_QUEUES)
    outs = h.do(h.log.nodes({"nodeID": "n1", "action": "EXPLODE"}))
    rej = msgs(outs, "node")[0].rejected[0]
    assert rej.nodeID == "n1" and "Invalid enum value 'EXPLODE'" in rej.reason and "$.nodes[0].action" in rej.reason


# --- recovery (seed: resilience-recovery) ----------------------------------------------

def test_existing_allocations_are_counted_not_reissued(h):
    h.setup(TWO_QUEUES)
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.nodes(node("n1", vcore=4000, memory=4 * GB, existing=[
        allocation("uuid-1", "k1", "a1", "n1", vcore=3000, memory=GB)])))
    assert new_allocs(outs) == []
    assert app_updates(outs) == [("a1", "Running")]
    assert nodes_of(h)["n1"]["allocated"] == {"vcore": 3000, "memory": GB}
    assert queue(h, "root.prod")["allocated"] == {"vcore": 3000, "memory": GB}
    # only 1000 vcore left on the node
    outs = h.do(h.log.asks(ask("k2", "a1", vcore=2000)))
    assert new_allocs(outs) == []
    # the RM releases the recovered allocation by its UUID
    outs = h.do(h.log.release("a1", uuid="uuid-1"))
    assert [r.UUID for r in released(outs)] == ["uuid-1"]
    assert [a.allocationKey for a in new_allocs(outs)] == ["k2"]


def test_an_ask_sent_again_for_a_recovered_allocation_counts_it_as_allocated(h):
    """Regression (an outside review): an RM that restarts and sends its pods again (the
    running ones as existing allocations, and asks for those it thinks pending) got a second
    allocation for a key it recovered: what was allocated under a key counts against the
    ask's maxAllocations, recovered or placed (docs/protocol.md), and counts still once
    the recovered allocation is released, and after a snapshot."""
    from ykbus.core.snapshot import dump_snapshot, load_snapshot
    from ykbus.yamlload import load_yaml

    h.setup(TWO_QUEUES)
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.nodes(node("n1", vcore=8000, existing=[
        allocation("u-rec", "k1", "a1", "n1", vcore=1000), allocation("u-two", "k2", "a1", "n1", vcore=1000)])))
    h.core = load_snapshot(dump_snapshot(h.core), load_yaml)  # (what it knows of them, kept)
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=1000)))
    assert new_allocs(outs) == []  # k1 runs already
    outs = h.do(h.log.asks(ask("k2", "a1", vcore=1000, max_allocations=2)))
    assert [a.allocationKey for a in new_allocs(outs)] == ["k2"]  # one more of k2, not two
    outs = h.do(h.log.release("a1", uuid="u-rec"))
    assert [r.UUID for r in released(outs)] == ["u-rec"] and new_allocs(outs) == []  # k1 is done, not asked again
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=1000)))
    assert [a.allocationKey for a in new_allocs(outs)] == ["k1"]  # asked again once none runs


def test_an_allocation_recovered_under_the_key_of_a_released_ask_makes_nothing_pending(h):
    """Regression (a review of the fix above): an ask the RM released while it had
    allocations, and then an allocation of its key recovered, was pending again: the queue
    and application counted it for ever and the application never completed."""
    from tests import invariants

    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000, max_allocations=3)))
    h.do(h.log.release_ask("a1", "k1"))
    outs = h.do(h.log.nodes(node("n2", vcore=8000, existing=[allocation("u-rec", "k1", "a1", "n2", vcore=1000)])))
    assert new_allocs(outs) == [] and new_allocs(h.do(h.log.tick(10**9))) == []
    assert queue(h, "root.prod")["pending"] == {}
    invariants.state_is_consistent(h.core)
    for uuid in list(h.core.rms["rm-1"].partitions["default"].apps["a1"].allocations):
        outs = h.do(h.log.release("a1", uuid=uuid))
    assert app_updates(outs) == [("a1", "Completing")]


def test_existing_allocation_of_unknown_app_is_rejected_and_node_still_added(h):
    h.setup(TWO_QUEUES)
    outs = h.do(h.log.nodes(node("n1", vcore=4000, existing=[
        allocation("u1", "k1", "ghost", "n1", vcore=1000)])))
    rej = rejected_asks(outs)
    assert rej[0].applicationID == "ghost" and "recover applications before nodes" in rej[0].reason
    assert msgs(outs, "node")[0].accepted[0].nodeID == "n1"
    assert nodes_of(h)["n1"]["allocated"] == {}


# --- applications ----------------------------------------------------------------------

def test_app_rejections_name_the_reason(h):
    h.setup(TWO_QUEUES)
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.apps(app("a1", "root.prod"), app("a2", "root.nope"), app("a3", "root"),
                           app("a4", "root.prod", partition="gpu"), app("a5", "")))
    reasons = {r.applicationID: r.reason for r in msgs(outs, "app")[0].rejected}
    assert reasons == {
        "a1": "application a1 already exists",
        "a2": "queue 'root.nope' does not exist",
        "a3": "queue root is a parent queue: applications go to leaf queues",
        "a4": "partition 'gpu' does not exist",
        "a5": "queueName is empty and no placement rule applies",
    }
    assert list(apps_of(h)) == ["a1"]


def test_queue_name_without_root_prefix_and_any_case_resolves(h):
    h.setup(TWO_QUEUES)
    outs = h.do(h.log.apps(app("a1", "PROD")))
    assert msgs(outs, "app")[0].accepted[0].applicationID == "a1"
    assert apps_of(h)["a1"]["queue"] == "root.prod"


def test_application_lifecycle_to_completed_and_expired(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    assert apps_of(h)["a1"]["state"] == "New"
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=1000)))
    assert app_updates(outs) == [("a1", "Accepted"), ("a1", "Running")]
    uuid = new_allocs(outs)[0].UUID
    outs = h.do(h.log.release("a1", uuid=uuid))
    assert app_updates(outs) == [("a1", "Completing")]
    # a new ask brings it back to Running
    outs = h.do(h.log.asks(ask("k2", "a1", vcore=1000)))
    assert app_updates(outs) == [("a1", "Running")]
    outs = h.do(h.log.release("a1"))  # empty UUID: all of the app's allocations
    assert app_updates(outs) == [("a1", "Completing")]
    assert app_updates(h.do(h.log.tick(29 * 10**9))) == []
    assert app_updates(h.do(h.log.tick(2 * 10**9))) == [("a1", "Completed")]
    assert "a1" not in apps_of(h)
    assert app_updates(h.do(h.log.tick(3 * 24 * 3600 * 10**9))) == [("a1", "Expired")]


def test_a_partition_keeps_the_last_ended_applications_and_forgets_the_oldest_early(h, monkeypatch):
    """A soak of `ykbus up` (36 applications ended a second) held every ended one for its 3
    days: 9 million records, about 24 GB a process. Past `YKBUS_LIMIT_TERMINATED_KEPT` the
    oldest is forgotten at once (its RM told, as at its timeout), and its timer goes too."""
    from ykbus import limits

    monkeypatch.setattr(limits, "TERMINATED_KEPT", 2)
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    part = h.core.registry.rms["rm-1"].partitions["default"]
    said = []
    for i in range(5):
        h.do(h.log.apps(app(f"a{i}", "root.prod")))
        outs = h.do(h.log.remove_apps(f"a{i}"))
        said += [(u.applicationID, u.state, u.message) for msg in msgs(outs, "app") for u in msg.updated]
    early = "forgotten before its terminated timeout: the partition keeps the last 2 ended"
    assert [s for s in said if s[1] == "Expired"] == [("a0", "Expired", early), ("a1", "Expired", early),
                                                      ("a2", "Expired", early)]
    assert list(part.terminated) == ["a3", "a4"]
    assert sorted(t.app_id for _d, _n, t in part.timers.entries()) == ["a3", "a4"]  # the others' timers gone
    assert app_updates(h.do(h.log.tick(3 * 24 * 3600 * 10**9))) == [("a3", "Expired"), ("a4", "Expired")]
    # more held than the bound (a lower one set, an older core's snapshot): two go at each end, until within it
    monkeypatch.setattr(limits, "TERMINATED_KEPT", 10)
    for i in range(5, 10):
        h.do(h.log.apps(app(f"a{i}", "root.prod")))
        h.do(h.log.remove_apps(f"a{i}"))
    monkeypatch.setattr(limits, "TERMINATED_KEPT", 2)
    held = []
    for i in range(10, 13):
        h.do(h.log.apps(app(f"a{i}", "root.prod")))
        h.do(h.log.remove_apps(f"a{i}"))
        held.append(len(part.terminated))
    assert held == [4, 3, 2]


def test_remove_app_releases_asks_and_allocations(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000), ask("k2", "a1", vcore=1000)))
    outs = h.do(h.log.remove_apps("a1"))
    assert [(r.allocationKey, r.terminationType) for r in released(outs)] == [("k1", "STOPPED_BY_RM")]
    assert app_updates(outs) == [("a1", "Completed")]
    assert queue(h, "root.prod")["pending"] == {} and queue(h, "root.prod")["allocated"] == {}
    # removing it again is harmless; an unknown app gets an event
    assert h.do(h.log.remove_apps("a1")) == []
    assert "does not exist" in events(h.do(h.log.remove_apps("zz")))[0].message


def test_app_execution_timeout_fails_the_app_and_releases_with_timeout(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod", executionTimeoutMilliSeconds=1000)))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000)))
    outs = h.do(h.log.tick(2 * 10**9))
    assert [r.terminationType for r in released(outs)] == ["TIMEOUT"]
    assert app_updates(outs) == [("a1", "Failing"), ("a1", "Failed")]


def test_ask_execution_timeout_releases_the_allocation(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks({**ask("k1", "a1", vcore=1000), "executionTimeoutMilliSeconds": 500}))
    assert released(h.do(h.log.tick(400_000_000))) == []
    rel = released(h.do(h.log.tick(200_000_000)))
    assert [(r.allocationKey, r.terminationType) for r in rel] == [("k1", "TIMEOUT")]
    assert rel[0].message == "execution timeout of 500 ms reached"


def test_allocation_timeout_message_names_its_own_timeout_after_the_ask_changed(h):
    """Regression: the message read the ask's current timeout, not the allocation's."""
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks({**ask("k1", "a1", vcore=1000), "executionTimeoutMilliSeconds": 500}))
    h.do(h.log.asks({**ask("k1", "a1", vcore=1000, max_allocations=2), "executionTimeoutMilliSeconds": 9000}))
    rel = released(h.do(h.log.tick(600_000_000)))
    assert [r.message for r in rel] == ["execution timeout of 500 ms reached"]


# --- asks ------------------------------------------------------------------------------

def test_invalid_asks_are_rejected_with_reason_and_others_applied(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.asks(
        ask("bad-neg", "a1", vcore=-1),
        ask("unknown-app", "zz", vcore=1),
        ask("empty", "a1"),
        {"allocationKey": "no-app", "resourceAsk": {"resources": {"vcore": {"value": 1}}}},
        ask("good", "a1", vcore=1000),
    ))
    reasons = {r.allocationKey: r.reason for r in rejected_asks(outs)}
    assert reasons["bad-neg"] == "Expected `int` >= 0 - at `$.asks[0].resourceAsk.resources.vcore.value`"
    assert reasons["unknown-app"] == "application 'zz' does not exist"
    assert reasons["empty"].startswith("resourceAsk is empty")
    assert reasons["no-app"] == "Object missing required field `applicationID` - at `$.asks[3]`"
    assert [a.allocationKey for a in new_allocs(outs)] == ["good"]


def test_a_quantity_that_is_a_string_but_not_of_digits_is_told_that_digits_would_do(h):
    """The wire takes a quantity as a number or as a string of its digits (protobuf's JSON
    form of int64): a reason that said only "Expected `int`, got `str`" sent RMs looking
    for a bug in strings that the core reads."""
    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.asks({"allocationKey": "x", "applicationID": "a1", "resourceAsk": {
        "resources": {"vcore": {"value": "1.5"}}}}, {**ask("digits", "a1"), "resourceAsk": {
            "resources": {"vcore": {"value": "1000"}}}}))
    assert {r.allocationKey: r.reason for r in rejected_asks(outs)} == {"x": (
        "Expected `int` (a number, or a string of its decimal digits), got `str` - at "
        "`$.asks[0].resourceAsk.resources.vcore.value`")}
    assert [a.allocationKey for a in new_allocs(outs)] == ["digits"]


def test_max_allocations_places_several_and_replacing_an_ask_updates_it(h):
    h.setup(TWO_QUEUES, n1={"vcore": 3000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.asks(ask("k", "a1", vcore=1000, max_allocations=5)))
    assert len(new_allocs(outs)) == 3
    assert apps_of(h)["a1"]["asks"]["k"]["pending"] == 2
    # the RM lowers the count: nothing more pending
    h.do(h.log.asks(ask("k", "a1", vcore=1000, max_allocations=3)))
    assert apps_of(h)["a1"]["asks"]["k"]["pending"] == 0
    assert queue(h, "root.prod")["pending"] == {}


def test_release_ask_removes_pending(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks(ask("k1", "a1", vcore=1000), ask("k2", "a1", vcore=1000)))
    outs = h.do(h.log.release_ask("a1", "k2"))
    assert app_updates(outs) == []
    assert queue(h, "root.prod")["pending"] == {}
    assert "no pending ask" in events(h.do(h.log.release_ask("a1", "k2")))[0].message


def test_an_rm_confirming_a_release_the_core_made_hears_no_error(h):
    """Regression (an outside review): the SI has the receiver of a release confirm it with
    the same message and termination type; an RM confirming the core's TIMEOUT release (an
    ask's runtime limit) got an event saying the allocation does not exist. A confirmation of
    a release the core made is taken in silence; a release by the RM of an unknown
    allocation is still told (below)."""
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.asks({**ask("k1", "a1", vcore=100), "executionTimeoutMilliSeconds": 1000}))
    [placed] = new_allocs(outs)
    outs = h.do(h.log.tick(2 * 10**9))
    assert [(r.UUID, r.terminationType.name) for r in released(outs)] == [(placed.UUID, "TIMEOUT")]
    confirmation = h.log.entry("alloc", {"rmID": "rm-1", "releases": {"allocationsToRelease": [
        {"applicationID": "a1", "UUID": placed.UUID, "partitionName": "default", "terminationType": "TIMEOUT"}]}})
    assert events(h.do(confirmation)) == []


def test_release_of_unknown_uuid_is_reported_not_dropped(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    ev = events(h.do(h.log.release("a1", uuid="nope")))
    assert ev[0].message == "release not applied: allocation nope of application a1 does not exist"


def test_asks_by_priority_then_submission_order(h):
    h.setup(TWO_QUEUES, n1={"vcore": 3000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.asks(ask("low", "a1", vcore=1000, priority=1), ask("first", "a1", vcore=1000, priority=5),
                    ask("second", "a1", vcore=1000, priority=5), ask("top", "a1", vcore=1000, priority=9)))
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [a.allocationKey for a in new_allocs(outs)] == ["top", "first", "second"]


# --- queues ----------------------------------------------------------------------------

def test_queue_max_caps_usage_and_release_in_queue_wakes_the_waiter(h):
    h.setup(TWO_QUEUES, n1={"vcore": 8000, "memory": 8 * GB})
    h.do(h.log.apps(app("nb", "root.dev")))
    outs = h.do(h.log.asks(ask("k", "nb", memory=2 * GB, vcore=1000, max_allocations=3)))
    assert len(new_allocs(outs)) == 2
    s = states(outs)[0]
    assert s.state == "SKIPPED" and s.reason.startswith("queue root.dev max memory 3.73 Gi would be exceeded")
    outs = h.do(h.log.release("nb", uuid=new_allocs(outs)[0].UUID))
    assert len(new_allocs(outs)) == 1


def test_parent_max_applies_to_all_children(h):
    cfg = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
            resources: {max: {vcore: 2}}
            queues:
              - name: a
              - name: b
"""
    h.setup(cfg, n1={"vcore": 8000})
    h.do(h.log.apps(app("x", "root.team.a"), app("y", "root.team.b")))
    outs = h.do(h.log.asks(ask("kx", "x", vcore=1000, max_allocations=2), ask("ky", "y", vcore=1000, max_allocations=2)))
    assert len(new_allocs(outs)) == 2
    assert queue(h, "root.team")["allocated"] == {"vcore": 2000}


def test_max_applications_holds_accepted_apps_until_one_finishes(h):
    cfg = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: q
            maxapplications: 1
"""
    h.setup(cfg, n1={"vcore": 8000})
    h.do(h.log.apps(app("a1", "q"), app("a2", "q")))
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=1000), ask("k2", "a2", vcore=1000)))
    assert [a.applicationID for a in new_allocs(outs)] == ["a1"]
    assert "runs its maximum of 1 applications" in states(outs)[0].reason
    assert apps_of(h)["a2"]["state"] == "Accepted"
    outs = h.do(h.log.release("a1"))
    assert app_updates(outs)[0] == ("a1", "Completing")
    assert [a.applicationID for a in new_allocs(outs)] == ["a2"]


def test_fair_queue_sorting_serves_the_queue_furthest_below_its_guarantee(h):
    cfg = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {guaranteed: {vcore: 2}}
          - name: b
            resources: {guaranteed: {vcore: 6}}
"""
    h.setup(cfg, n1={"vcore": 8000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("x", "a"), app("y", "b")))
    h.do(h.log.asks(ask("kx", "x", vcore=1000, max_allocations=8), ask("ky", "y", vcore=1000, max_allocations=8)))
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    got = [a.applicationID for a in new_allocs(outs)]
    assert got.count("x") == 2 and got.count("y") == 6


def test_fifo_apps_in_submission_order_and_priority_first(h):
    h.setup(TWO_QUEUES, n1={"vcore": 2000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("old", "prod"), app("new", "prod"), app("vip", "prod")))
    h.do(h.log.asks(ask("k1", "old", vcore=1000), ask("k2", "new", vcore=1000), ask("k3", "vip", vcore=1000, priority=10)))
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [a.applicationID for a in new_allocs(outs)] == ["vip", "old"]


def test_priority_sorting_disabled_keeps_fifo(h):
    cfg = TWO_QUEUES.replace("resources: {guaranteed: {memory: 8G, vcore: 8}}",
                             "properties: {application.sort.priority: disabled}")
    h.setup(cfg, n1={"vcore": 1000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("old", "prod"), app("vip", "prod")))
    h.do(h.log.asks(ask("k1", "old", vcore=1000), ask("k3", "vip", vcore=1000, priority=10)))
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [a.applicationID for a in new_allocs(outs)] == ["old"]


def test_fair_app_sorting_balances_usage(h):
    cfg = TWO_QUEUES.replace("resources: {guaranteed: {memory: 8G, vcore: 8}}",
                             "properties: {application.sort.policy: fair}")
    h.setup(cfg, n1={"vcore": 4000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("a", "prod"), app("b", "prod")))
    h.do(h.log.asks(ask("ka", "a", vcore=1000, max_allocations=4), ask("kb", "b", vcore=1000, max_allocations=4)))
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [a.applicationID for a in new_allocs(outs)] == ["a", "b", "a", "b"]


def test_stateaware_lets_one_accepted_app_start_at_a_time(h):
    cfg = TWO_QUEUES.replace("resources: {guaranteed: {memory: 8G, vcore: 8}}",
                             "properties: {application.sort.policy: stateaware}")
    h.setup(cfg, n1={"vcore": 1000})
    h.do(h.log.apps(app("a", "prod"), app("b", "prod")))
    # a's ask cannot fit anywhere: a stays Accepted and b may not start either
    outs = h.do(h.log.asks(ask("ka", "a", vcore=2000), ask("kb", "b", vcore=1000)))
    assert new_allocs(outs) == []
    outs = h.do(h.log.release_ask("a"))
    assert [a.applicationID for a in new_allocs(outs)] == ["b"]


# --- node sorting ----------------------------------------------------------------------

def test_fair_node_sort_spreads_and_binpacking_packs(h):
    h.setup(TWO_QUEUES, n1={"vcore": 4000}, n2={"vcore": 4000}, n3={"vcore": 4000})
    h.do(h.log.apps(app("a", "prod")))
    outs = h.do(h.log.asks(ask("k", "a", vcore=1000, max_allocations=3)))
    assert sorted(a.nodeID for a in new_allocs(outs)) == ["n1", "n2", "n3"]
    from tests.conftest import Harness
    b = Harness()
    b.setup(TWO_QUEUES.replace("    queues:\n", "    nodesortpolicy: {type: binpacking}\n    queues:\n", 1),
            n1={"vcore": 4000}, n2={"vcore": 4000}, n3={"vcore": 4000})
    b.do(b.log.apps(app("a", "prod")))
    outs = b.do(b.log.asks(ask("k", "a", vcore=1000, max_allocations=3)))
    assert [a.nodeID for a in new_allocs(outs)] == ["n1", "n1", "n1"]


def test_resource_weights_steer_node_choice(h):
    cfg = TWO_QUEUES.replace("    queues:\n", "    nodesortpolicy: {type: fair, resourceweights: {memory: 1}}\n    queues:\n", 1)
    h.setup(cfg)
    # n1 is busier on vcore, n2 on memory; only memory counts
    h.do(h.log.nodes(node("n1", vcore=4000, memory=4 * GB, occupied={"vcore": 3000}),
                     node("n2", vcore=4000, memory=4 * GB, occupied={"memory": 3 * GB})))
    h.do(h.log.apps(app("a", "prod")))
    outs = h.do(h.log.asks(ask("k", "a", vcore=500, memory=GB // 2)))
    assert new_allocs(outs)[0].nodeID == "n1"


# --- bad input -------------------------------------------------------------------------

def test_undecodable_message_becomes_an_event_and_the_next_one_applies(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    outs = h.do(h.log.entry("app", b"{not json"))
    ev = events(outs)
    assert ev[0].type == "REQUEST" and "invalid app message" in ev[0].message
    outs = h.do(h.log.entry("node", b'{"nodes": 5}'))
    assert "Expected `array`, got `int` - at `$.nodes`" in events(outs)[0].message
    outs = h.do(h.log.apps(app("a1", "prod")))
    assert msgs(outs, "app")[0].accepted[0].applicationID == "a1"


def test_unknown_kind_is_reported(h):
    ev = events(h.do(h.log.entry("bogus", {})))
    assert "unknown kind 'bogus'" in ev[0].message and ev[0].type == "REQUEST"  # (was untyped)


def test_the_core_services_own_kinds_sent_by_an_rm_are_each_answered_as_requests_not_applied(h):
    """An RM publishing on a subject only the core service uses: each is answered, with
    `type: REQUEST` as every entry not applied (a tick was not answered at all, an rmstate's
    event had no type)."""
    h.setup(TWO_QUEUES)
    bodies = {"tick": {}, "rmstate": {"rmID": "rm-1", "event": "TIMEOUT"}, "failed": {"seq": 2, "error": "x"},
              "assign": {"rm": "rm-1", "shard": "s1"}}
    for kind, body in bodies.items():
        ev = events(h.do(h.log.entry(kind, body)))
        assert len(ev) == 1 and ev[0].type == "REQUEST" and ev[0].objectID == "rm-1", (kind, ev)
        assert f"{kind} entries are the core service's only; not applied" in ev[0].message, ev[0].message
    assert h.core.dump()["rms"]["rm-1"]["state"] == "Running"  # the rmstate changed nothing


def test_protobuf_json_encoding_is_accepted(h):
    h.setup(TWO_QUEUES)
    # int64 as strings, enums as numbers, defaults omitted (protojson's output)
    outs = h.do(h.log.entry("node", {"rmID": "rm-1", "nodes": [
        {"nodeID": "n1", "action": 1, "schedulableResource": {"resources": {"vcore": {"value": "4000"}}}}]}))
    assert msgs(outs, "node")[0].accepted[0].nodeID == "n1"
    h.do(h.log.apps(app("a1", "prod")))
    outs = h.do(h.log.entry("alloc", {"asks": [{"allocationKey": "k", "applicationID": "a1",
                                                 "resourceAsk": {"resources": {"vcore": {"value": "1000"}}}}]}))
    assert new_allocs(outs)[0].resourcePerAlloc.resources["vcore"].value == 1000


def test_msgpack_bodies_decode(h):
    import msgspec

    from ykbus.core.entries import Entry
    h.setup(TWO_QUEUES)
    body = msgspec.msgpack.encode({"nodes": [{"nodeID": "n1", "action": "CREATE"}]})
    outs = h.do(Entry(seq=h.log.seq + 1, ts=h.log.ts + 1, rm="rm-1", kind="node", msg=body, encoding="msgpack"))
    assert msgs(outs, "node")[0].accepted[0].nodeID == "n1"


def test_a_json_body_sent_as_msgpack_is_told_it_was_read_as_msgpack(h):
    """A JSON body under a MessagePack Content-Type header read "Expected `object`, got
    `int`" (`{` is a small int in MessagePack): the reason says how it was read and why."""
    from ykbus.core.entries import Entry
    h.setup(TWO_QUEUES)
    body = b'{"new": [{"applicationID": "a1", "queueName": "root.prod"}]}'
    outs = h.do(Entry(seq=h.log.seq + 1, ts=h.log.ts + 1, rm="rm-1", kind="app", msg=body, encoding="msgpack"))
    [event] = [e for e in events(outs) if "invalid app message" in e.message]
    assert event.message.endswith("(read as MessagePack, as its Content-Type header said: the body looks like "
                                  "JSON, which is read when the header is left out); nothing applied"), event.message


def test_out_of_order_entry_is_a_caller_bug():
    import pytest

    from ykbus.core import Core, Entry, OutOfOrder
    core = Core()
    core.apply(Entry(seq=5, ts=1, rm="", kind="tick"))
    with pytest.raises(OutOfOrder):
        core.apply(Entry(seq=5, ts=2, rm="", kind="tick"))


# --- incremental cost ------------------------------------------------------------------

def test_unrelated_entries_do_not_retry_waiting_asks(h):
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    tries = h.core.rms["rm-1"].partitions["default"].scheduler.tried = []
    h.do(h.log.apps(app("big", "prod"), app("other", "prod")))
    h.do(h.log.asks(*[ask(f"k{i}", "big", vcore=2000) for i in range(500)]))
    assert len(tries) == 500  # each tried once, then waits for a node
    tries.clear()
    h.do(h.log.tick())
    h.do(h.log.apps(app("late", "prod")))
    h.do(h.log.asks(ask("small", "other", vcore=500)))
    assert tries == ["small"]
    tries.clear()
    # freeing capacity too small for the waiting shape wakes none of them
    uuid = new_allocs(h.outputs)[-1].UUID
    h.do(h.log.release("other", uuid=uuid))
    assert tries == []
    # a node that fits them wakes them, but only as many are tried as its room serves, plus
    # the one that finds it full (core/waits.py): two are placed, the 498 others stay parked
    outs = h.do(h.log.nodes(node("n2", vcore=4000)))
    assert tries == ["k0", "k1", "k2"]
    assert [a.allocationKey for a in new_allocs(outs)] == ["k0", "k1"]
    tries.clear()
    # and freeing room for one more serves the next in order: the other waiters are not tried
    h.do(h.log.release("big", uuid=new_allocs(outs)[0].UUID))
    assert tries == ["k2", "k3"]


def test_an_ask_behind_a_gate_is_fitted_against_the_nodes_that_opened_it(h):
    """An ask behind a gate found no node when it parked; only a node whose room opened its
    gate may take it, so only those are looked at. The tests' check (CHECK_OPENERS, on for
    every test) walks every node too, and names a node the openers missed."""
    import pytest

    from ykbus.core import nodefinder

    assert nodefinder.CHECK_OPENERS
    h.setup(TWO_QUEUES, n1={"vcore": 1000}, n2={"vcore": 1000})
    h.do(h.log.apps(app("big", "prod")))
    h.do(h.log.asks(ask("k", "big", vcore=2000)))
    p = h.core.rms["rm-1"].partitions["default"]
    k = p.apps["big"].asks["k"]
    assert k.pooled and p.waits.pool.openers == {}
    finder = p.scheduler.finder
    n2 = p.nodes["n2"]
    n2.free = {"vcore": 3000}  # room that came without opening its gate (the core never does this)
    with pytest.raises(AssertionError, match="among the openers None, walked n2"):
        finder.first_fit(k)
    assert p.waits.pool.open_fitting(n2) == [p.waits.pool.gates_for(k)[0]]  # the gate opens, n2 its opener
    assert finder.first_fit(k) is n2
    p.waits.settle(Step(h.core.last_seq + 1, h.core.now))


# --- configuration update ----------------------------------------------------------------

def test_config_update_applies_new_limits_and_drains_removed_queues(h):
    h.setup(TWO_QUEUES, n1={"vcore": 8000, "memory": 8 * GB})
    h.do(h.log.apps(app("nb", "root.dev")))
    outs = h.do(h.log.asks(ask("k", "nb", memory=2 * GB, vcore=1000, max_allocations=3)))
    assert len(new_allocs(outs)) == 2
    # raise dev's max: the waiting kernel is placed by the update itself
    outs = h.do(h.log.config(TWO_QUEUES.replace("max: {memory: 4G, vcore: 4}", "max: {memory: 6G, vcore: 6}")))
    assert events(outs)[0].message == "configuration updated"
    assert len(new_allocs(outs)) == 1
    # remove dev: it drains, keeps its running app, takes no new one, goes when empty
    without_dev = TWO_QUEUES.split("          - name: dev")[0]
    outs = h.do(h.log.config(without_dev))
    assert events(outs)[0].message == "configuration updated; draining: root.dev"
    assert queue(h, "root.dev")["draining"] is True and queue(h, "root.dev")["drainingSince"] > 0
    outs = h.do(h.log.apps(app("late", "root.dev")))
    assert "draining" in msgs(outs, "app")[0].rejected[0].reason
    h.do(h.log.remove_apps("nb"))
    assert "root.dev" not in h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"]


def test_config_update_that_breaks_live_state_is_refused(h):
    h.setup(TWO_QUEUES, n1={"vcore": 8000})
    h.do(h.log.apps(app("a", "root.dev")))
    outs = h.do(h.log.config(TWO_QUEUES.replace("            resources: {max: {memory: 4G, vcore: 4}}",
                                                "            queues: [{name: sub}]")))
    assert "cannot become a parent while it has applications" in events(outs)[0].message
    assert queue(h, "root.dev")["leaf"] is True


def test_fit_cache_never_changes_a_decision(monkeypatch):
    """The per-pass index of nodes that fit a shape must give the walk's exact answer."""
    import ykbus.core.nodefinder as nodefinder
    from ykbus.core import Core
    from ykbus.log.build import LogBuilder
    from ykbus.log.jsonl import encode_output
    from ykbus.yamlload import load_yaml

    def run(after):
        monkeypatch.setattr(nodefinder, "FIT_CACHE_AFTER", after)
        monkeypatch.setattr(nodefinder, "FIT_CACHE_NODES", 0)
        core, log, out = Core(load_yaml=load_yaml), LogBuilder("rm"), []
        cfg = TWO_QUEUES.replace("    queues:\n", "    nodesortpolicy: {type: binpacking}\n    queues:\n", 1)
        entries = [log.register(cfg),
                   log.nodes(*[node(f"n{i:03d}", vcore=1000 * (1 + i % 7), memory=GB * (1 + i % 5)) for i in range(120)]),
                   log.apps(app("a", "prod"), app("b", "prod"), app("c", "dev"))]
        for r in range(6):
            entries.append(log.asks(*[ask(f"k{r}-{i}", "abc"[i % 3], vcore=250 * (1 + (i * r) % 6),
                                          memory=GB // 4 * (1 + i % 3), max_allocations=1 + i % 4,
                                          priority=i % 3) for i in range(60)]))
            entries.append(log.release("ab"[r % 2], key=f"k{max(0, r - 1)}-{r}"))
        for e in entries:
            out += [encode_output(o) for o in core.apply(e)]
        return out

    cached, walked = run(1), run(10**9)
    assert sum(b'"new"' in line for line in cached) > 5
    assert cached == walked


def test_ask_sent_again_after_its_release_is_pending_again(h):
    """Regression (found by the state machine): a released ask that still had allocations
    was revived by the same allocationKey without a legal transition."""
    h.setup(TWO_QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.asks(ask("k", "a1", vcore=1000, max_allocations=2)))  # one placed, one pending
    h.do(h.log.release_ask("a1", "k"))  # the pending one goes; the allocation stays
    h.do(h.log.asks(ask("k", "a1", vcore=1000, max_allocations=3)))  # wants two more
    assert apps_of(h)["a1"]["asks"]["k"]["pending"] == 2
    outs = h.do(h.log.nodes(node("n2", vcore=2000)))
    assert [a.allocationKey for a in new_allocs(outs)] == ["k", "k"]


def test_churn_leaves_no_cyclic_garbage_of_core_objects():
    """Asks, applications and allocations are freed by reference counting when they go:
    the core service relies on it to keep the cyclic GC (and its pauses) out of the way."""
    import gc

    from tests.conftest import Harness
    from ykbus.core.model import Alloc, App, Ask, Node

    gc.collect()
    gc.disable()  # whatever cycles the churn makes stay until the collection below
    try:
        h = Harness()
        h.setup(TWO_QUEUES, n1={"vcore": 4000}, n2={"vcore": 1000})
        for round_ in range(3):
            h.do(h.log.apps(app(f"a{round_}", "prod"), app(f"b{round_}", "dev")))
            h.do(h.log.asks(ask(f"k{round_}", f"a{round_}", vcore=1000, max_allocations=3),
                            ask(f"w{round_}", f"b{round_}", vcore=9000),
                            ask(f"x{round_}", f"b{round_}", vcore=500, priority=3)))
            h.do(h.log.release(f"a{round_}"))
            h.do(h.log.release_ask(f"b{round_}", f"w{round_}"))
            h.do(h.log.remove_apps(f"b{round_}"))
            h.do(h.log.tick(31 * 10**9))
        h.do(h.log.nodes(node("n2", action="DECOMISSION")))
        h.outputs.clear()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        leaked = [o for o in gc.garbage if isinstance(o, (Ask, App, Alloc, Node))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert leaked == []


def test_the_read_api_partitions_verb_reads_the_read_model(h):
    """`partitions` answers applications per state and the allocations held from the read
    model folded from the applier's events (as YuniKorn's PartitionInfo names them), and
    they follow the applications' lives: added, running, completed, expired."""
    from ykbus.bus.readapi import read

    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a", "prod"), app("b", "prod")))
    outs = h.do(h.log.asks(ask("k", "a", vcore=1000, max_allocations=2)))

    def summary():
        return read(h.core, {}, "partitions", {})["partitions"]["rm-1"]["default"]["summary"]

    assert summary() == {"applications": {"total": 2, "New": 1, "Running": 1}, "totalContainers": 2}
    for uuid in [a.UUID for a in new_allocs(outs)]:
        h.do(h.log.release("a", uuid=uuid))
    h.do(h.log.release_ask("a", "k"))
    assert summary() == {"applications": {"total": 2, "New": 1, "Completing": 1}, "totalContainers": 0}
    h.do(h.log.tick(31 * 10**9))  # completing timeout
    assert summary() == {"applications": {"total": 2, "New": 1, "Completed": 1}, "totalContainers": 0}
    h.do(h.log.tick(4 * 24 * 3600 * 10**9))  # terminated timeout: forgotten
    assert summary() == {"applications": {"total": 1, "New": 1}, "totalContainers": 0}
    # an application added again under the id of one that ended takes its place in the counts
    # (found by the fuzz suite: the ended one was still counted)
    h.do(h.log.apps(app("c", "prod")))
    h.do(h.log.remove_apps("c"))
    assert summary()["applications"] == {"total": 2, "New": 1, "Completed": 1}
    h.do(h.log.apps(app("c", "prod")))
    assert summary()["applications"] == {"total": 2, "New": 2}


def test_a_reregistration_keeps_the_applications_that_ended_until_their_terminated_timeout(h):
    """Issue 40, item 7: after `ykbus up` restarted, `explain` of an application that had
    completed said "not known": the RMs register again (the recovery protocol), and the
    registration wiped the partitions with the records of the ended applications, which the
    docs promise are remembered for 72 h. The RM's live state goes; what ended stays, in the
    partition of the same name, counted, until its timer fires at the same deadline."""
    from ykbus import limits
    from ykbus.bus.readapi import read
    from ykbus.core.snapshot import dump_snapshot, load_snapshot
    from ykbus.explain import explain
    from ykbus.yamlload import load_yaml

    h.setup(TWO_QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a", "prod"), app("b", "prod")))
    h.do(h.log.remove_apps("a"))  # a ends: Completed
    ended_at = h.core.dump(sections=("terminated",))["rms"]["rm-1"]["partitions"]["default"]["terminated"]["a"]
    assert ended_at["state"] == "Completed"
    h.core = load_snapshot(dump_snapshot(h.core), load_yaml)  # the core restarts, from its snapshot
    h.do(h.log.register(TWO_QUEUES))  # then the RM registers again, as a restarted RM does

    def answer():
        return read(h.core, {}, "terminated", {})["terminated"], read(h.core, {}, "partitions", {})["partitions"]

    terminated, parts = answer()
    assert terminated["rm-1"]["default"]["a"] == ended_at
    assert explain({}, "a", terminated=terminated)[0].startswith("application a (rm rm-1, partition default, "
                                                                 "queue root.prod): Completed at ")
    assert parts["rm-1"]["default"]["summary"]["applications"] == {"total": 1, "Completed": 1}  # b went with the RM
    h.do(h.log.tick(limits.TERMINATED_TIMEOUT_NS - 10**9))  # its deadline is the one it had
    assert "a" in answer()[0]["rm-1"]["default"]
    h.do(h.log.tick(2 * 10**9))
    terminated, parts = answer()
    assert "a" not in terminated["rm-1"]["default"]
    assert parts["rm-1"]["default"]["summary"]["applications"] == {"total": 0}
