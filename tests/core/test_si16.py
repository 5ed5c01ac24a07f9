"""RMs written against SI 1.6 (asks are `allocations`, nodes created draining, releases by
allocationKey), and the int64-as-string option: through the core's only interface."""

import msgspec

from tests.conftest import Harness, events, msgs, new_allocs, rejected_asks, released
from ykbus.log.build import app, ask, node, resource
from ykbus.si import codec, compat

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
"""


def allocation(key, app_id, node_id="", priority=0, **quantities):
    out = {"allocationKey": key, "applicationID": app_id, "partitionName": "default",
           "resourcePerAlloc": resource(**quantities), "allocationTags": {"kubernetes.io/meta/namespace": "ns"}}
    if node_id:
        out["nodeID"] = node_id
    if priority:
        out["priority"] = priority
    return out


def rejected_allocations(outs):
    return [r for msg in msgs(outs, "alloc") for r in msg.rejectedAllocations]


def test_an_allocations_request_is_scheduled_and_answered_with_its_key(h):
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.entry("alloc", {"rmID": "rm-1", "allocations": [allocation("pod-1", "a1", vcore=1000)]}))
    [alloc] = new_allocs(outs)
    assert (alloc.allocationKey, alloc.applicationID, alloc.nodeID) == ("pod-1", "a1", "n1")
    assert alloc.allocationTags == {"kubernetes.io/meta/namespace": "ns"}
    assert alloc.resourcePerAlloc.resources["vcore"].value == 1000
    assert rejected_asks(outs) == [] and rejected_allocations(outs) == []


def test_allocations_decide_exactly_what_the_same_asks_decide():
    asks, allocs = Harness(), Harness()
    for h in (asks, allocs):
        h.setup(QUEUES, n1={"vcore": 3000}, n2={"vcore": 2000})
        h.do(h.log.apps(app("a1", "root.prod")))
    a = asks.do(asks.log.asks(*[ask(f"k{i}", "a1", priority=i % 3, vcore=1000) for i in range(6)]))
    b = allocs.do(allocs.log.entry("alloc", {"allocations": [
        {**allocation(f"k{i}", "a1", priority=i % 3, vcore=1000), "allocationTags": {}} for i in range(6)]}))
    assert a == b and len(new_allocs(a)) == 5


def test_an_allocation_that_names_a_node_is_rejected_naming_the_field_and_the_others_apply(h):
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.entry("alloc", {"allocations": [
        allocation("ok-1", "a1", vcore=1000),
        {**allocation("bad-priority", "a1", vcore=1000), "priority": "high"},
        allocation("placed", "a1", node_id="n1", vcore=1000),
        {**allocation("with-id", "a1", vcore=1000), "allocationID": "x-1"},
        allocation("", "a1", vcore=1000),
    ]}))
    assert [a.allocationKey for a in new_allocs(outs)] == ["ok-1"]
    got = {r.allocationKey: r for r in rejected_allocations(outs)}
    assert set(got) == {"bad-priority", "placed", "with-id", ""}
    assert all(r.applicationID == "a1" for r in got.values())
    assert got["placed"].reason.endswith("- at `$.allocations[2].nodeID`")
    assert "NodeInfo.existingAllocations" in got["placed"].reason
    assert "`$.allocations[1].priority`" in got["bad-priority"].reason
    assert got["with-id"].reason.endswith("- at `$.allocations[3].allocationID`")
    assert got[""].reason.endswith("- at `$.allocations[4].allocationKey`")
    assert rejected_asks(outs) == []  # SI 1.6 RMs read rejectedAllocations; `rejected` is reserved there
    assert list(h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["a1"]["asks"]) == ["ok-1"]


def test_a_node_created_draining_is_accepted_gets_nothing_then_schedules_when_undrained(h):
    h.setup(QUEUES)
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.nodes(node("n1", action="CREATE_DRAIN", vcore=4000), {**node("n2", vcore=4000), "action": 6}))
    assert [a.nodeID for a in msgs(outs, "node")[0].accepted] == ["n1", "n2"]
    nodes = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["nodes"]
    assert (nodes["n1"]["state"], nodes["n2"]["state"]) == ("Draining", "Draining")
    outs = h.do(h.log.entry("alloc", {"allocations": [allocation("k1", "a1", vcore=1000)]}))
    assert new_allocs(outs) == []
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("k1", "n1")]
    outs = h.do(h.log.nodes(node("n1", action="CREATE_DRAIN", vcore=1)))
    assert msgs(outs, "node")[0].rejected[0].reason == "node n1 already exists"


def test_release_by_allocation_key_cancels_a_request_not_placed_yet(h):
    h.setup(QUEUES, n1={"vcore": 1000})
    h.do(h.log.apps(app("a1", "root.prod")))
    h.do(h.log.entry("alloc", {"allocations": [allocation("k1", "a1", vcore=1000),
                                               allocation("k2", "a1", vcore=1000)]}))
    outs = h.do(h.log.release("a1", key="k2"))
    assert released(outs) == [] and events(outs) == []
    assert h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["a1"]["pending"] == {}
    outs = h.do(h.log.release("a1", key="k1"))  # placed: released and confirmed
    assert [(r.allocationKey, r.terminationType) for r in released(outs)] == [("k1", "STOPPED_BY_RM")]
    outs = h.do(h.log.release("a1", key="k1"))
    assert "no allocation with allocationKey 'k1'" in events(outs)[0].message


def test_allocation_id_of_si_1_5_releases_that_allocation_never_all(h):
    h.setup(QUEUES, n1={"vcore": 4000})
    h.do(h.log.apps(app("a1", "root.prod")))
    placed = new_allocs(h.do(h.log.asks(ask("k1", "a1", vcore=1000), ask("k2", "a1", vcore=1000))))
    outs = h.do(h.log.entry("alloc", {"releases": {"allocationsToRelease": [
        {"applicationID": "a1", "partitionName": "default", "allocationID": placed[1].UUID},
        {"applicationID": "a1", "partitionName": "default", "allocationID": placed[0].UUID, "UUID": "other"}]}}))
    assert [r.UUID for r in released(outs)] == [placed[1].UUID]
    assert "- at `$.releases.allocationsToRelease[1].allocationID`" in events(outs)[0].message


def test_existing_allocations_may_name_their_id_allocation_id(h):
    h.setup(QUEUES)
    h.do(h.log.apps(app("a1", "root.prod")))
    existing = {"allocationKey": "k1", "applicationID": "a1", "allocationID": "u-1", "partitionName": "default",
                "resourcePerAlloc": resource(vcore=1000)}
    outs = h.do(h.log.nodes(node("n1", vcore=4000, existing=[existing])))
    assert msgs(outs, "node")[0].accepted[0].nodeID == "n1"
    assert list(h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["allocations"]) == ["u-1"]


def test_the_in_process_api_translates_the_same_way():
    from ykbus.si import messages as m
    decoded = codec.as_decoded("alloc", m.AllocationRequest(allocations=[
        m.Allocation(allocationKey="k", applicationID="a", originator=True, priority=3,
                     preemptionPolicy=m.PreemptionPolicy(allowPreemptSelf=True)),
        m.Allocation(allocationKey="k2", applicationID="a", nodeID="n1")]))
    ask_, bad = decoded.allocations
    assert (ask_.allocationKey, ask_.Originator, ask_.priority, ask_.maxAllocations) == ("k", True, 3, 1)
    assert ask_.preemptionPolicy.allowPreemptSelf is True
    assert bad.path == "$.allocations[1]" and bad.ids == {"allocationKey": "k2", "applicationID": "a", "nodeID": "n1"}


# --- int64 as strings -------------------------------------------------------------------

def test_registration_with_an_unknown_int64_mapping_is_refused_naming_the_key(h):
    outs = h.do(h.log.register(QUEUES, extra={"int64": "bigint"}))
    assert outs[0].msg.error == "extraConfig.int64 'bigint': expected number or string"
    assert h.core.rms == {}
    assert h.do(h.log.register(QUEUES, extra={"int64": "string"}))[0].msg.error == ""


def test_int64_fields_of_outputs_become_decimal_strings_and_decode_back():
    from ykbus.bus.publisher import split_output
    h = Harness()
    h.do(h.log.register(QUEUES, extra={"int64": "string"}))
    h.do(h.log.nodes(node("n1", vcore=4000, memory=2**60)))
    h.do(h.log.apps(app("a1", "root.prod")))
    outs = h.do(h.log.entry("alloc", {"allocations": [allocation("k", "a1", vcore=1000, memory=2**53 + 1)]}))
    out = next(o for o in outs if o.kind == "alloc")
    mode = compat.int64_mode(h.core.rms["rm-1"].extra_config)
    [data] = split_output(out.msg, "json", 1 << 20, mode)
    raw = msgspec.json.decode(data)
    assert raw["new"][0]["resourcePerAlloc"]["resources"]["memory"] == {"value": "9007199254740993"}
    assert codec.decode(type(out.msg), data) == out.msg  # the client decodes either form
    [plain] = split_output(out.msg, "json", 1 << 20)
    assert b'"value":9007199254740993' in plain
    ev = compat.int64_as_strings(h.do(h.log.apps(app("a1", "root.prod")))[0].msg)
    assert ev == {"rejected": [{"applicationID": "a1", "reason": "application a1 already exists"}]}
    updated = compat.int64_as_strings(msgs(h.do(h.log.remove_apps("a1")), "app")[0])
    assert isinstance(updated["updated"][0]["stateTransitionTimestamp"], str)


def test_int64_strings_leave_int32_and_maps_named_like_int64_fields_alone():
    from ykbus.si import messages as m
    msg = m.AllocationResponse(new=[m.Allocation(allocationKey="k", priority=7, allocationTags={"value": "v"},
                                                 resourcePerAlloc=m.Resource({"value": m.Quantity(5)}))])
    out = compat.int64_as_strings(msg)["new"][0]
    assert out["priority"] == 7 and out["allocationTags"] == {"value": "v"}
    assert out["resourcePerAlloc"] == {"resources": {"value": {"value": "5"}}}
    assert compat.int64_as_strings(m.EventBatch([m.EventRecord(timestampNano=12)])) == {
        "events": [{"timestampNano": "12"}]}
