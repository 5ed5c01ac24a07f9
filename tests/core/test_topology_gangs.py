"""Topology-aware gangs through the core (issue 42, docs/topology.md): a gang whose
application asks for one domain is placed whole inside one rack or block, the best fit;
one that no domain holds waits with `TopologyNoDomain`; `preferred` falls back to broader
levels, then anywhere; a level the partition does not have is refused."""

from __future__ import annotations

from tests import invariants
from tests.conftest import Harness, app_updates, new_allocs, rejected_asks, released, states
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app as app_msg
from ykbus.log.build import ask, node, resource
from ykbus.yamlload import load_yaml

QUEUES = """
partitions:
  - name: default
    topology:
      levels: [ykbus.io/block, ykbus.io/rack]
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
"""
RACK = "ykbus.io/rack"
BLOCK = "ykbus.io/block"


def cluster(racks: dict[str, tuple[str, int, int]]) -> Harness:
    """Nodes `<rack>-<i>` of 4 GPUs each: rack -> (its block, nodes, GPUs already taken
    on each node by occupied resources)."""
    h = Harness()
    h.setup(QUEUES)
    infos = []
    for rack, (block, n, taken) in racks.items():
        for i in range(n):
            infos.append(node(f"{rack}-{i}", attributes={BLOCK: block, RACK: rack},
                              occupied={"gpu": taken} if taken else None, gpu=4, vcore=64000))
    h.do(h.log.nodes(*infos))
    return h


def gang_job(h: Harness, app_id: str, members: int, gpus: int, tags: dict[str, str]) -> list:
    """An application asking for `members` placeholders of `gpus` GPUs, with topology tags."""
    h.do(h.log.apps(app_msg(app_id, "root.jobs", placeholderAsk=resource(gpu=members * gpus), tags=tags)))
    return h.do(h.log.asks({**ask("ph", app_id, max_allocations=members, gpu=gpus, vcore=1000),
                            "taskGroupName": "workers", "placeholder": True}))


def racks_of(outs: list, app_id: str) -> list[str]:
    return sorted({a.nodeID.rsplit("-", 1)[0] for a in new_allocs(outs) if a.applicationID == app_id})


def test_a_required_gang_lands_whole_in_the_rack_that_fits_it_best():
    # r1: 4 nodes free (16 GPUs); r2: 4 nodes with 2 taken each (8 free); r3: 2 nodes free (8)
    h = cluster({"r1": ("b1", 4, 0), "r2": ("b1", 4, 2), "r3": ("b2", 2, 0)})
    outs = gang_job(h, "train", 4, 2, {"ykbus.io/topology-required": RACK})
    placed = [a for a in new_allocs(outs) if a.applicationID == "train"]
    assert len(placed) == 4
    # r2 and r3 both hold 8 GPUs and leave 0: the tie goes to the domain key (b1, r2) < (b2, r3)
    assert racks_of(outs, "train") == ["r2"]
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def test_without_the_tag_the_same_gang_spreads_over_racks():
    h = cluster({"r1": ("b1", 2, 3), "r2": ("b1", 2, 3), "r3": ("b2", 2, 3)})
    outs = gang_job(h, "train", 4, 1, {})
    assert len(racks_of(outs, "train")) > 1  # fair spreads it: one GPU free on each node


def test_a_gang_no_rack_holds_waits_with_the_closest_rack_named():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 3, 0)})  # 8 and 12 GPUs
    outs = gang_job(h, "big", 4, 4, {"ykbus.io/topology-required": RACK})  # 16 GPUs in one rack: none
    assert new_allocs(outs) == []
    reasons = {s.reason for s in states(outs) if s.applicartionID == "big"}
    assert len(reasons) == 1
    reason = reasons.pop()
    assert reason.startswith("no ykbus.io/rack domain has room for 4 × ")
    assert "the fullest fit, rack b1/r2, has room for 3" in reason
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["big"]["asks"]["ph"]["why"]
    assert why["code"] == "TopologyNoDomain" and why["details"]["closest"] == "b1/r2"
    # and it says it waits for a larger rack, not for room: none would hold it even empty
    assert reason.endswith("; no rack would hold it even empty (at most 3)") and why["details"]["holdsEmpty"] == 3
    # a block holds it (r1 + r2 are both in b1): required at the block level places it
    outs = gang_job(h, "blocky", 4, 4, {"ykbus.io/topology-required": BLOCK})
    assert len(new_allocs(outs)) == 4 and set(racks_of(outs, "blocky")) <= {"r1", "r2"}


def test_a_gang_a_rack_would_hold_when_empty_waits_for_room_without_saying_never():
    """Regression: a reason could not tell a gang that waits for room from one that no rack
    holds at all; only the latter says "even empty"."""
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 3, 0)})  # 8 and 12 GPUs
    h.do(h.log.apps(app_msg("busy", "root.jobs")))
    h.do(h.log.asks(ask("b", "busy", max_allocations=5, gpu=2, vcore=1000)))  # 2 GPUs of each node taken
    outs = gang_job(h, "big", 3, 4, {"ykbus.io/topology-required": RACK})  # 3 whole nodes: r2 holds it empty
    (reason,) = {s.reason for s in states(outs) if s.applicartionID == "big"}
    assert reason.startswith("no ykbus.io/rack domain has room for 3 × ") and "even empty" not in reason, reason
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["big"]["asks"]["ph"]["why"]
    assert "holdsEmpty" not in why["details"]


def test_a_preferred_gang_goes_to_a_broader_level_when_no_rack_holds_it():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 1, 0)})  # racks of 8, 8 and 4 GPUs
    outs = gang_job(h, "pref", 3, 4, {"ykbus.io/topology-preferred": RACK})  # 12 GPUs: block b1
    assert len(new_allocs(outs)) == 3 and set(racks_of(outs, "pref")) <= {"r1", "r2"}
    assert ("pref", "Running") in app_updates(outs) or ("pref", "Accepted") in app_updates(outs)


def test_explain_says_a_preferred_gang_no_domain_held_went_anywhere():
    """Review: a `preferred` gang no block held whole, placed anywhere, was said to be placed
    across domains with "its task groups each in one of their own" (it has one group)."""
    from ykbus.explain import explain

    h = cluster({"r1": ("b1", 2, 0), "r2": ("b2", 2, 0)})  # blocks of 8 GPUs each
    outs = gang_job(h, "pref", 3, 4, {"ykbus.io/topology-preferred": RACK})  # 12 GPUs: both blocks
    assert racks_of(outs, "pref") == ["r1", "r2"]
    apps = {"rm-1": {"default": h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]}}
    said = "\n".join(explain(apps, "pref"))
    assert "topology: preferred ykbus.io/rack; placed across domains: no domain of the partition held it whole" in said, said
    assert "task groups each" not in said


def test_a_gang_whose_member_no_node_holds_empty_is_told_which_resource():
    """Review: members of 100 cores on nodes of 64 were told "no rack would hold it even
    empty (at most 0)", not what no node has (a single ask names it)."""
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b2", 2, 0)})
    h.do(h.log.apps(app_msg("wide", "root.jobs", placeholderAsk=resource(vcore=200000),
                            tags={"ykbus.io/topology-required": RACK})))
    h.do(h.log.asks({**ask("ph", "wide", max_allocations=2, vcore=100000), "taskGroupName": "workers",
                     "placeholder": True}))
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["wide"]["asks"]["ph"]["why"]
    assert why["message"].endswith("; no rack would hold it even empty (at most 0: no node has vcore: 100 cores)"), why


def test_a_level_the_partition_does_not_have_is_refused_by_name():
    h = cluster({"r1": ("b1", 1, 0)})
    outs = h.do(h.log.apps(app_msg("x", "root.jobs", tags={"ykbus.io/topology-required": "zone"})))
    rejected = [r for o in outs if o.kind == "app" for r in o.msg.rejected]
    assert [r.applicationID for r in rejected] == ["x"]
    assert "tag ykbus.io/topology-required: 'zone' is not a topology level of the partition" in rejected[0].reason


def test_the_metrics_count_per_level_the_domains_wholly_free_and_the_largest_free_room():
    from tests.test_rest_steps import figures
    from ykbus.rest import router
    from ykbus.rest.metrics import Metrics

    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 1, 0)})  # racks of 8, 8 and 4 GPUs
    metrics = Metrics(router.RestState(live=lambda: h.core, started=0), figures)
    text = metrics.exposition().decode()
    assert 'ykbus_topology_domains_free{level="ykbus.io/rack",partition="default"} 3.0' in text
    assert 'ykbus_topology_largest_free{level="ykbus.io/block",partition="default",resource="gpu"} 16.0' in text
    gang_job(h, "train", 6, 1, {"ykbus.io/topology-required": RACK})  # into r1 (best fit of 8 and 8: by key)
    text = metrics.exposition().decode()
    assert 'ykbus_topology_domains_free{level="ykbus.io/rack",partition="default"} 2.0' in text
    assert 'ykbus_topology_domains_free{level="ykbus.io/block",partition="default"} 1.0' in text  # b2 only
    assert 'ykbus_topology_largest_free{level="ykbus.io/rack",partition="default",resource="gpu"} 8.0' in text
    assert 'ykbus_topology_largest_free{level="ykbus.io/block",partition="default",resource="gpu"} 10.0' in text



def test_an_ask_released_from_a_topology_set_has_the_others_judged_again():
    """Regression (fuzz campaign, seed 5252): of two asks sent together for one rack, one
    asking more allocations than an entry may place, the other kept the set's GangTooLarge
    (naming the old total) after the first was released, and never ran: nothing woke it
    (it waits at its queue's room). Now the set's other asks are judged again."""
    h = cluster({"r1": ("b1", 2, 0)})  # one rack: two hosts of 4 GPUs
    h.do(h.log.apps(app_msg("svc", "root.jobs", tags={"ykbus.io/topology-required": RACK})))
    outs = h.do(h.log.asks(ask("c", "svc", max_allocations=2**31 - 1, gpu=4), ask("d", "svc", max_allocations=2, gpu=3)))
    assert new_allocs(outs) == []
    part = h.core.rms["rm-1"].partitions["default"]
    assert part.apps["svc"].asks["d"].why.code.value == "GangTooLarge"
    outs = h.do(h.log.release_ask("svc", "c"))
    assert sorted(a.nodeID for a in new_allocs(outs)) == ["r1-0", "r1-1"]  # d's two, in its rack
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def test_the_topology_metrics_of_two_rms_partitions_named_alike_are_series_of_their_own():
    """Two RMs each with a partition `default` with levels: each its own series, labelled
    as the REST paths name a shared partition (`[rm]default`); one label for both was
    duplicate samples, which Prometheus refuses."""
    from tests.test_rest_steps import figures
    from ykbus.rest import router
    from ykbus.rest.metrics import Metrics

    h = cluster({"r1": ("b1", 2, 0)})  # RM rm-1: one rack of 8 GPUs
    h.do(h.log.register(QUEUES, rm="rm-2"))
    h.do(h.log.nodes(*[node(f"o{i}", attributes={BLOCK: "b9", RACK: f"q{i}"}, gpu=4) for i in range(3)], rm="rm-2"))
    text = Metrics(router.RestState(live=lambda: h.core, started=0), figures).exposition().decode()
    series = [line for line in text.splitlines() if line.startswith("ykbus_topology_domains_free{")]
    assert sorted(series) == [
        'ykbus_topology_domains_free{level="ykbus.io/block",partition="[rm-1]default"} 1.0',
        'ykbus_topology_domains_free{level="ykbus.io/block",partition="[rm-2]default"} 1.0',
        'ykbus_topology_domains_free{level="ykbus.io/rack",partition="[rm-1]default"} 1.0',
        'ykbus_topology_domains_free{level="ykbus.io/rack",partition="[rm-2]default"} 3.0']


# --- task groups: one role of a job in a domain of its own --------------------------------

def two_roles(h: Harness, app_id: str, tags: dict[str, str], groups: dict[str, tuple[int, int, dict[str, str]]]):
    """A gang of task groups: group -> (members, GPUs each, the group's own tags)."""
    total = sum(n * g for n, g, _ in groups.values())
    h.do(h.log.apps(app_msg(app_id, "root.jobs", placeholderAsk=resource(gpu=total), tags=tags)))
    asks = [{**ask(f"ph-{g}", app_id, max_allocations=n, gpu=gpus, vcore=1000),
             "taskGroupName": g, "placeholder": True, "tags": own} for g, (n, gpus, own) in groups.items()]
    return h.do(h.log.asks(*asks))


def racks_by_group(h: Harness, app_id: str) -> dict[str, set[str]]:
    p = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    out: dict[str, set[str]] = {}
    for a in p["allocations"].values():
        if a["applicationID"] == app_id:
            out.setdefault(a["allocationKey"].removeprefix("ph-"), set()).add(a["nodeID"].rsplit("-", 1)[0])
    return out


def test_each_task_group_with_its_own_tag_takes_a_rack_of_its_own():
    # three racks of 8 GPUs: two roles of 8 GPUs each cannot share one, each fills one
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 2, 0)})
    req = {"ykbus.io/topology-required": RACK}
    outs = two_roles(h, "disagg", {}, {"prefill": (2, 4, req), "decode": (4, 2, req)})
    assert len(new_allocs(outs)) == 6  # the whole gang in one entry
    groups = racks_by_group(h, "disagg")
    assert all(len(racks) == 1 for racks in groups.values()), groups
    assert groups["prefill"] != groups["decode"]
    invariants.state_is_consistent(h.core)
    from ykbus.explain import explain  # explain says where: per role and per rack

    apps = {"rm-1": {"default": h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]}}
    said = "\n".join(explain(apps, "disagg"))
    assert groups == {"prefill": {"r1"}, "decode": {"r2"}}  # (ties by key: r1, then r2)
    assert "placed in block b1" in said and "its 6 allocations: 2 in rack b1/r1, 4 in rack b1/r2" in said
    assert "task group decode's rack b1/r2 is kept" in said


def test_a_task_groups_tag_wins_over_its_applications():
    # the application asks for one block; its "ps" group for one rack. r3 of b2 holds ps (4
    # GPUs); the workers (16) need block b1's two racks together
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 1, 0)})
    outs = two_roles(h, "job", {"ykbus.io/topology-required": BLOCK},
                     {"workers": (4, 4, {}), "ps": (1, 4, {"ykbus.io/topology-required": RACK})})
    assert len(new_allocs(outs)) == 5
    groups = racks_by_group(h, "job")
    assert groups["workers"] == {"r1", "r2"} and groups["ps"] == {"r3"}


def test_a_gang_whose_second_group_finds_no_domain_places_nothing_and_names_the_group():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 1, 0)})  # racks of 8 and 4 GPUs
    req = {"ykbus.io/topology-required": RACK}
    outs = two_roles(h, "job", {}, {"a": (2, 4, req), "b": (2, 4, req)})  # a takes r1; b (8) fits no rack left
    assert new_allocs(outs) == []
    p = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    why = p["applications"]["job"]["asks"]["ph-b"]["why"]
    assert why["code"] == "TopologyNoDomain" and why["details"]["taskGroup"] == "b"
    assert why["message"].startswith("task group b: no ykbus.io/rack domain has room for 2 × ")
    invariants.state_is_consistent(h.core)


def test_an_asks_topology_tag_naming_a_level_the_partition_lacks_is_refused():
    h = cluster({"r1": ("b1", 1, 0)})
    h.do(h.log.apps(app_msg("x", "root.jobs")))
    outs = h.do(h.log.asks({**ask("k", "x", gpu=1), "tags": {"ykbus.io/topology-preferred": "zone"}}))
    rejected = rejected_asks(outs)
    assert len(rejected) == 1 and "'zone' is not a topology level of the partition" in rejected[0].reason


# --- a placed gang's domain is remembered: its lost members go back into it ----------------

def placed_and_replaced(h: Harness, members: int = 4) -> dict[str, str]:
    """`train` (members × 2 GPUs, required in a rack) placed, each placeholder replaced by a
    real ask `w<i>` as an RM does it (it releases the placeholder the core names): real
    allocation key -> node."""
    gang_job(h, "train", members, 2, {"ykbus.io/topology-required": RACK})
    for i in range(members):
        outs = h.do(h.log.asks({**ask(f"w{i}", "train", gpu=2, vcore=1000), "taskGroupName": "workers"}))
        for r in released(outs):
            if r.terminationType == "PLACEHOLDER_REPLACED":
                h.do(h.log.release("train", uuid=r.UUID, termination="PLACEHOLDER_REPLACED"))
    return allocated(h, "train")


def allocated(h: Harness, app_id: str) -> dict[str, str]:
    p = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    return {a["allocationKey"]: a["nodeID"] for a in p["allocations"].values() if a["applicationID"] == app_id}


def test_a_lost_member_asked_again_goes_back_into_its_gangs_rack_or_waits_naming_it():
    # r1: 2 nodes (8 GPUs), r2: 4 nodes (16): the gang of 8 GPUs fits r1 best
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 4, 0)})
    placed = placed_and_replaced(h)
    assert sorted(placed) == ["w0", "w1", "w2", "w3"] and {n.rsplit("-", 1)[0] for n in placed.values()} == {"r1"}
    # the RM's pod w3 fails and is asked again (a new ask of the group): r1 has room only
    # where w3 was, r2 has plenty; it goes back into r1
    h.do(h.log.release("train", key="w3"))
    outs = h.do(h.log.asks({**ask("w3b", "train", gpu=2, vcore=1000), "taskGroupName": "workers"}))
    assert [a.nodeID.rsplit("-", 1)[0] for a in new_allocs(outs)] == ["r1"]
    # a node of r1 is lost with its two members: their replacements find no room in r1 and
    # wait, naming the rack, though r2 has room
    lost = placed["w0"]
    h.do(h.log.nodes(node(lost, action="DECOMISSION")))
    outs = h.do(h.log.asks({**ask("w0b", "train", gpu=2, vcore=1000), "taskGroupName": "workers"}))
    assert new_allocs(outs) == []
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["train"]["asks"]["w0b"]["why"]
    assert why["code"] == "TopologyNoDomain" and why["details"]["domain"] == "b1/r1"
    assert why["message"] == "the gang's rack b1/r1 has room for 0 of 1 × {gpu: 2, vcore: 1 core}"
    invariants.state_is_consistent(h.core)
    # the remembered rack is in snapshots: a restored core places the same way
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    assert restored.dump() == h.core.dump()
    # room opens in r1 (the other gang member there ends): the waiting one takes it
    other = next(k for k, n in allocated(h, "train").items() if n.startswith("r1-"))
    outs = h.do(h.log.release("train", key=other))
    assert [a.nodeID.rsplit("-", 1)[0] for a in new_allocs(outs)] == ["r1"]


def test_a_lost_member_waiting_in_its_gangs_rack_is_read_with_runtime_limits_in_use():
    """Review: with runtime limits in use, reading a gang's lost member asked again (a real
    ask waiting in its gang's kept rack, `TopologyNoDomain`) raised in the estimate of its
    set, which has no waiting placeholder: the read API, explain and the web UI failed."""
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 4, 0)})
    placed = placed_and_replaced(h)
    h.do(h.log.apps(app_msg("timed", "root.jobs")))
    h.do(h.log.asks({**ask("t", "timed", gpu=1), "executionTimeoutMilliSeconds": 600_000}))  # limits in use
    h.do(h.log.nodes(node(placed["w0"], action="DECOMISSION")))
    h.do(h.log.asks({**ask("w0b", "train", gpu=2, vcore=1000), "taskGroupName": "workers"}))
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["train"]["asks"]["w0b"]["why"]
    assert why["code"] == "TopologyNoDomain" and "estimate" in why["details"], why


def test_a_gang_without_topology_remembers_nothing_and_its_lost_members_go_anywhere():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 4, 0)})
    gang_job(h, "free", 4, 2, {})
    outs = h.do(h.log.asks({**ask("w0", "free", gpu=2, vcore=1000), "taskGroupName": "workers"}))
    assert h.core.registry.rms["rm-1"].partitions["default"].apps["free"].domains == {}
    assert released(outs)  # it replaces a placeholder as before


def test_a_reload_that_drops_a_level_holds_required_gangs_and_lets_preferred_go_anywhere():
    # regression: a gang naming a level a reload removed crashed the pass (found by the property test)
    h = cluster({"r1": ("b1", 1, 0), "r2": ("b1", 1, 0)})  # two racks of 4 GPUs
    h.do(h.log.config(QUEUES.replace("[ykbus.io/block, ykbus.io/rack]", "[ykbus.io/block]")))
    outs = gang_job(h, "req", 2, 4, {})
    assert len(new_allocs(outs)) == 2  # (a gang without tags: as before)
    h = cluster({"r1": ("b1", 1, 0), "r2": ("b1", 1, 0)})
    h.do(h.log.apps(app_msg("req", "root.jobs", placeholderAsk=resource(gpu=8),
                            tags={"ykbus.io/topology-required": RACK}),
                    app_msg("pref", "root.jobs", placeholderAsk=resource(gpu=4),
                            tags={"ykbus.io/topology-preferred": RACK})))
    h.do(h.log.config(QUEUES.replace("[ykbus.io/block, ykbus.io/rack]", "[ykbus.io/block]")))
    outs = h.do(h.log.asks({**ask("ph", "req", max_allocations=2, gpu=4), "taskGroupName": "w", "placeholder": True},
                           {**ask("ph", "pref", max_allocations=2, gpu=2), "taskGroupName": "w", "placeholder": True}))
    assert {a.applicationID for a in new_allocs(outs)} == {"pref"}
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["req"]["asks"]["ph"]["why"]
    assert why["code"] == "TopologyNoDomain"
    assert why["message"] == ("ykbus.io/rack is no longer a topology level of the partition "
                              "(its levels are ykbus.io/block)")
    invariants.state_is_consistent(h.core)


# --- a waiting required gang reserves the domain closest to holding it --------------------

def holding(h: Harness) -> dict[str, str]:
    """Reserved domains: gang -> the domain's name."""
    p = h.core.registry.rms["rm-1"].partitions["default"]
    return {app.id: "/".join(values) for values, app in p.records.domain_holds.items()}


def test_a_required_gang_past_the_delay_reserves_the_closest_rack_which_small_asks_then_leave_alone():
    # racks of 8 GPUs (two 4-GPU hosts); fillers take 2 GPUs on each host but one
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0)})
    h.do(h.log.apps(app_msg("fill", "root.jobs")))
    h.do(h.log.asks(ask("f", "fill", gpu=2, max_allocations=7)))  # 14 of 16 GPUs: r1-0 keeps 2... (fair spreads)
    outs = gang_job(h, "big", 2, 4, {"ykbus.io/topology-required": RACK})  # 8 GPUs in one rack: none now
    assert new_allocs(outs) == [] and holding(h) == {}
    h.do(h.log.tick(1_000_000_000))  # 1 s: before the delay (2 s)
    assert holding(h) == {}
    outs = h.do(h.log.tick(1_500_000_000))  # past it: it reserves the rack closest to holding it
    p = h.core.registry.rms["rm-1"].partitions["default"]
    free = {r: sum(n.free.get("gpu", 0) for n in p.nodes.values() if n.id.startswith(r)) for r in ("r1", "r2")}
    assert sorted(free.values()) == [0, 2]  # no rack places a member now: the one with the most free room
    rack = max(free, key=free.__getitem__)
    assert holding(h) == {"big": f"b1/{rack}"}
    reasons = {s.reason for s in states(outs) if s.applicartionID == "big"}
    assert reasons == {"no ykbus.io/rack domain has room for 2 × {gpu: 4, vcore: 1 core}; none has room for even "
                       f"one member; rack b1/{rack} is reserved for it"}
    invariants.state_is_consistent(h.core)
    # fillers end on that rack one by one: a small ask waiting meanwhile never takes its room
    h.do(h.log.apps(app_msg("small", "root.jobs")))
    h.do(h.log.asks(ask("s", "small", gpu=2, max_allocations=4)))
    fill = p.apps["fill"]
    on_rack = [a for a in fill.allocations.values() if a.node.id.startswith(rack)]
    for alloc in on_rack[:-1]:
        outs = h.do(h.log.release("fill", uuid=alloc.uuid))
        assert not any(a.nodeID.startswith(rack) for a in new_allocs(outs)), "a small ask took the reserved rack"
        invariants.state_is_consistent(h.core)
    outs = h.do(h.log.release("fill", uuid=on_rack[-1].uuid))  # the rack holds the gang now: placed there
    assert sorted(a.nodeID for a in new_allocs(outs) if a.applicationID == "big") == [f"{rack}-0", f"{rack}-1"]
    assert holding(h) == {}  # the reservation ends when the gang is placed
    invariants.state_is_consistent(h.core)


def filled(racks: dict[str, tuple[str, int]]) -> Harness:
    """One 4-GPU host per rack (`<rack>-0`), `used` GPUs of it taken by the application
    `fill` (an allocation pinned to the host): rack -> (block, used)."""
    h = cluster({rack: (block, 1, 0) for rack, (block, _) in racks.items()})
    h.do(h.log.apps(app_msg("fill", "root.jobs")))
    h.do(h.log.asks(*[{**ask(f"f-{rack}", "fill", gpu=used), "tags": {"yunikorn.apache.org/requiredNode": f"{rack}-0"}}
                      for rack, (_, used) in racks.items() if used]))
    return h


def test_two_gangs_never_reserve_the_same_room_and_a_removed_gang_frees_its_rack():
    h = filled({"r1": ("b1", 3), "r2": ("b1", 2), "r3": ("b2", 4)})  # free GPUs: 1, 2, 0
    gang_job(h, "a", 1, 4, {"ykbus.io/topology-required": RACK})
    gang_job(h, "b", 1, 4, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(3_000_000_000))
    held = holding(h)
    assert held == {"a": "b1/r2", "b": "b1/r1"}, held  # a first: the most free room (2); b the next, never r2
    invariants.state_is_consistent(h.core)
    # a snapshot keeps the reservations
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    assert restored.dump() == h.core.dump()
    assert {a.id: "/".join(v) for v, a in restored.rms["rm-1"].partitions["default"].records.domain_holds.items()} \
        == held
    invariants.state_is_consistent(restored)
    h.do(h.log.remove_apps("a"))
    assert holding(h) == {"b": "b1/r1"}
    invariants.state_is_consistent(h.core)


def test_a_block_overlapping_a_reserved_rack_is_not_reserved_by_another_gang():
    h = filled({"r1": ("b1", 3), "r2": ("b1", 3), "r3": ("b2", 4), "r4": ("b2", 4)})
    gang_job(h, "rackgang", 1, 4, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(3_000_000_000))
    assert holding(h) == {"rackgang": "b1/r1"}  # r1 and r2 tie: by key
    gang_job(h, "blockgang", 2, 4, {"ykbus.io/topology-required": BLOCK})
    h.do(h.log.tick(3_000_000_000))
    assert holding(h) == {"rackgang": "b1/r1", "blockgang": "b2"}  # b1 holds r1: b2, though b1 has more free
    invariants.state_is_consistent(h.core)


def test_a_small_ask_that_only_fits_in_a_reserved_rack_waits_and_says_so():
    h = filled({"r1": ("b1", 3), "r2": ("b1", 4)})
    gang_job(h, "big", 1, 4, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(3_000_000_000))
    assert holding(h) == {"big": "b1/r1"}
    h.do(h.log.apps(app_msg("small", "root.jobs")))
    outs = h.do(h.log.asks(ask("s", "small", gpu=1)))
    assert new_allocs(outs) == []  # r1-0 has 1 GPU free, but the rack is reserved for big
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["small"]["asks"]["s"]["why"]
    assert why["code"] == "NoNodeRoom" and why["details"]["heldWithRoom"] == {"r1-0": "big"}
    assert why["details"]["largestFree"] == {"gpu": 0}
    invariants.state_is_consistent(h.core)
    outs = h.do(h.log.remove_apps("big"))  # the reservation goes with its gang: the small ask takes r1-0
    assert [(a.applicationID, a.nodeID) for a in new_allocs(outs)] == [("small", "r1-0")]


def test_explain_says_which_rack_a_waiting_gang_reserved_and_why_a_small_ask_may_not_use_it():
    from ykbus.explain import explain

    h = filled({"r1": ("b1", 3), "r2": ("b1", 4)})
    gang_job(h, "big", 1, 4, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(3_000_000_000))
    h.do(h.log.apps(app_msg("small", "root.jobs")))
    h.do(h.log.asks(ask("s", "small", gpu=1)))
    apps = {"rm-1": {"default": h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]}}
    big = "\n".join(explain(apps, "big"))
    assert "topology: required ykbus.io/rack; not placed yet" in big
    assert "; rack b1/r1 is reserved for it" in big  # the reason the RM heard
    assert "it reserved rack b1/r1: no other ask takes room there until it is placed" in big
    small = "\n".join(explain(apps, "small"))
    assert "room on r1-0 (reserved by gang big)" in small


# --- an application without placeholders: each set of asks sent together, whole in a domain -

def test_asks_sent_together_by_an_application_without_placeholders_land_in_one_rack():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 1, 0)})  # racks of 8, 8 and 4 GPUs
    h.do(h.log.apps(app_msg("svc", "root.jobs", tags={"ykbus.io/topology-required": RACK})))
    outs = h.do(h.log.asks(ask("a", "svc", gpu=2, max_allocations=2), ask("b", "svc", gpu=4)))  # 8 GPUs together
    placed = {a.nodeID.rsplit("-", 1)[0] for a in new_allocs(outs)}
    assert len(new_allocs(outs)) == 3 and len(placed) == 1  # one rack: r1 (r1 and r2 tie: by key)
    # a second set, sent later, is a set of its own: it may take another rack
    outs = h.do(h.log.asks(ask("c", "svc", gpu=4, max_allocations=2)))
    assert {a.nodeID.rsplit("-", 1)[0] for a in new_allocs(outs)} == {"r2"}
    # a third no rack holds (r3 has 4 GPUs): it waits, whole, naming the closest
    outs = h.do(h.log.asks(ask("d", "svc", gpu=3, max_allocations=2)))
    assert new_allocs(outs) == []
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["svc"]["asks"]["d"]["why"]
    assert why["code"] == "TopologyNoDomain" and why["details"]["closest"] == "b2/r3"
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()
    h.do(h.log.release("svc", key="c"))  # r2 frees 4 + 4 GPUs: the set takes it, whole
    p = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    d_nodes = [a["nodeID"] for a in p["allocations"].values() if a["allocationKey"] == "d"]
    assert len(d_nodes) == 2 and {n.rsplit("-", 1)[0] for n in d_nodes} == {"r2"}
    invariants.state_is_consistent(h.core)


def test_explain_says_sets_of_a_required_application_went_each_into_a_domain_of_their_own():
    """Review: sets of asks of a `required` application in racks of two blocks were said to
    be "placed across domains: no domain of the partition held it whole"."""
    from ykbus.explain import explain

    h = cluster({"r1": ("b1", 2, 0), "r3": ("b2", 1, 0)})  # racks of 8 and 4 GPUs, in two blocks
    h.do(h.log.apps(app_msg("svc", "root.jobs", tags={"ykbus.io/topology-required": RACK})))
    h.do(h.log.asks(ask("a", "svc", gpu=4, max_allocations=2)))
    h.do(h.log.asks(ask("c", "svc", gpu=4)))
    apps = {"rm-1": {"default": h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]}}
    said = "\n".join(explain(apps, "svc"))
    assert ("topology: required ykbus.io/rack; placed across domains (its sets of asks, each sent together, each "
            "in one of their own)") in said, said


def test_an_asks_own_tag_makes_a_set_of_it_beside_its_applications_untagged_asks():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b2", 2, 0)})
    h.do(h.log.apps(app_msg("mixed", "root.jobs")))  # no tag on the application
    outs = h.do(h.log.asks({**ask("pair", "mixed", gpu=4, max_allocations=2),
                            "tags": {"ykbus.io/topology-required": RACK}},
                           ask("loose", "mixed", gpu=1, max_allocations=4)))
    pair = {a.nodeID.rsplit("-", 1)[0] for a in new_allocs(outs) if a.allocationKey == "pair"}
    assert len(pair) == 1  # the tagged ask's two allocations in one rack
    assert len([a for a in new_allocs(outs) if a.allocationKey == "loose"]) == 4  # the others anywhere
    invariants.state_is_consistent(h.core)


def test_a_set_over_its_queues_max_waits_whole():
    queues = QUEUES.replace("          - name: jobs\n", "          - name: jobs\n            resources: {max: {gpu: 6}}\n")
    h = Harness()
    h.setup(queues)
    h.do(h.log.nodes(*[node(f"r1-{i}", attributes={BLOCK: "b1", RACK: "r1"}, gpu=4, vcore=64000) for i in range(2)]))
    h.do(h.log.apps(app_msg("svc", "root.jobs", tags={"ykbus.io/topology-preferred": RACK})))
    outs = h.do(h.log.asks(ask("a", "svc", gpu=4, max_allocations=2)))  # 8 > max 6: none of it
    assert new_allocs(outs) == []
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["svc"]["asks"]["a"]["why"]
    assert why["code"] == "QueueMax" and "the asks of svc sent together" in why["message"]
    invariants.state_is_consistent(h.core)


def test_a_lost_member_that_may_preempt_takes_its_victims_inside_its_gangs_rack():
    queues = QUEUES.replace("          - name: jobs\n",
                            "          - name: jobs\n            properties: {preemption.withinqueue: lowerpriority}\n")
    h = Harness()
    h.setup(queues)
    h.do(h.log.nodes(*[node(f"{r}-{i}", attributes={BLOCK: "b1", RACK: r}, gpu=4, vcore=64000)
                       for r, n in (("r1", 2), ("r2", 1)) for i in range(n)]))
    h.do(h.log.apps(app_msg("train", "root.jobs", placeholderAsk=resource(gpu=8),
                            tags={"ykbus.io/topology-required": RACK}), app_msg("low", "root.jobs")))
    h.do(h.log.asks({**ask("ph", "train", max_allocations=2, gpu=4, vcore=1000),
                     "taskGroupName": "w", "placeholder": True}))
    for i in range(2):  # real pods replace the placeholders (r1: the rack the gang fits best)
        outs = h.do(h.log.asks({**ask(f"w{i}", "train", gpu=4, vcore=1000, priority=9, preemption=(True, True)),
                                "taskGroupName": "w"}))
        for r in released(outs):
            h.do(h.log.release("train", uuid=r.UUID, termination="PLACEHOLDER_REPLACED"))
    placed = allocated(h, "train")
    assert {n.rsplit("-", 1)[0] for n in placed.values()} == {"r1"}
    h.do(h.log.release("train", key="w1"))  # w1's pod fails; before it is asked again, low fills the room
    h.do(h.log.asks(ask("l1", "low", gpu=4, vcore=1000, priority=1)))  # on r1, where w1 was
    h.do(h.log.asks(ask("l2", "low", gpu=4, vcore=1000, priority=1)))  # on r2 (newer: the victim anywhere)
    assert {k: n.rsplit("-", 1)[0] for k, n in allocated(h, "low").items()} == {"l1": "r1", "l2": "r2"}
    h.do(h.log.asks({**ask("w1b", "train", gpu=4, vcore=1000, priority=9, preemption=(True, True)),
                     "taskGroupName": "w"}))
    outs = h.do(h.log.tick(31 * 10**9))  # past its preemption delay: victims inside r1 only
    assert [(r.applicationID, r.allocationKey) for r in released(outs)] == [("low", "l1")]
    invariants.state_is_consistent(h.core)
    victim = released(outs)[0]
    outs = h.do(h.log.release("low", uuid=victim.UUID, termination="PREEMPTED_BY_SCHEDULER"))
    assert [(a.allocationKey, a.nodeID.rsplit("-", 1)[0]) for a in new_allocs(outs)] == [("w1b", "r1")]
    invariants.state_is_consistent(h.core)


def test_a_gang_of_roles_reserves_the_rack_its_first_role_without_one_needs():
    # prefill (2 × 4 GPUs) and decode (2 × 4), each required in a rack of its own; each rack
    # of two 4-GPU hosts has one taken (fillers), so no role fits anywhere now
    h2 = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 2, 0)})
    h2.do(h2.log.apps(app_msg("fill", "root.jobs")))
    h2.do(h2.log.asks(*[{**ask(f"f-{r}", "fill", gpu=4), "tags": {"yunikorn.apache.org/requiredNode": f"{r}-0"}}
                        for r in ("r1", "r2", "r3")]))
    req = {"ykbus.io/topology-required": RACK}
    outs = two_roles(h2, "disagg", {}, {"prefill": (2, 4, req), "decode": (2, 4, req)})
    assert new_allocs(outs) == []
    h2.do(h2.log.tick(3_000_000_000))  # past the delay: it reserves a rack for prefill, its first role
    held = holding(h2)
    assert list(held) == ["disagg"] and held["disagg"] in {"b1/r1", "b1/r2", "b2/r3"}
    rack = held["disagg"].split("/")[1]
    invariants.state_is_consistent(h2.core)
    h2.do(h2.log.release("fill", key=f"f-{rack}"))  # its rack frees: prefill fits there, decode nowhere yet
    assert holding(h2) == held and allocated(h2, "disagg") == {}
    other = next(r for r in ("r1", "r2", "r3") if r != rack)
    outs = h2.do(h2.log.release("fill", key=f"f-{other}"))  # another frees: the whole gang is placed
    groups = racks_by_group(h2, "disagg")
    assert groups == {"prefill": {rack}, "decode": {other}}, groups
    assert holding(h2) == {}
    invariants.state_is_consistent(h2.core)


def test_an_ask_that_must_run_on_a_node_of_a_reserved_rack_waits_for_the_reservation_to_end():
    h = filled({"r1": ("b1", 3), "r2": ("b1", 4)})
    gang_job(h, "big", 1, 4, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(3_000_000_000))
    assert holding(h) == {"big": "b1/r1"}
    h.do(h.log.apps(app_msg("daemon", "root.jobs")))
    outs = h.do(h.log.asks({**ask("d", "daemon", gpu=1), "tags": {"yunikorn.apache.org/requiredNode": "r1-0"}}))
    assert new_allocs(outs) == []
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["daemon"]["asks"]["d"]["why"]
    assert why["code"] == "RequiredNodeFull" and why["details"]["heldFor"] == "big"
    assert why["message"] == "it must run on node r1-0, which is in the topology domain gang big reserved"
    invariants.state_is_consistent(h.core)
    outs = h.do(h.log.remove_apps("big"))
    assert [(a.applicationID, a.nodeID) for a in new_allocs(outs)] == [("daemon", "r1-0")]


def test_an_ask_of_a_waiting_sets_shape_takes_a_node_the_set_could_not_use():
    """A set that no rack holds waits, though single nodes have room for its shape: a plain
    ask of that shape still goes to such a node at once (found by the CI's fuzzing: the set
    waited behind its shape's room gate, which says no node has room for the shape, and
    the plain ask after it was held as if none had)."""
    h = cluster({"r1": ("b1", 1, 3), "r2": ("b1", 1, 2), "r3": ("b2", 1, 4)})  # 1, 2 and 0 GPUs free
    h.do(h.log.apps(app_msg("set", "root.jobs", tags={"ykbus.io/topology-required": RACK}),
                    app_msg("small", "root.jobs")))
    outs = h.do(h.log.asks(ask("p", "set", gpu=1, max_allocations=4)))  # 4 GPUs in one rack: none has them
    assert new_allocs(outs) == []
    outs = h.do(h.log.asks(ask("s", "small", gpu=1)))
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("s", "r1-0")]
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def test_an_untagged_ask_of_an_application_with_a_waiting_set_takes_room_the_moment_it_frees():
    """An application whose tagged set waits for a rack: its untagged ask, waiting for room
    like any other, takes a node in the entry that frees it (as an ask of an application
    without sets does), not in some later one."""
    h = cluster({"r1": ("b1", 1, 0), "r2": ("b2", 1, 0)})  # two racks of one 4-GPU node
    h.do(h.log.apps(app_msg("fill", "root.jobs"), app_msg("mixed", "root.jobs")))
    h.do(h.log.asks(ask("f1", "fill", gpu=4), ask("f2", "fill", gpu=4)))
    outs = h.do(h.log.asks({**ask("pair", "mixed", gpu=4, max_allocations=3), "tags": {"ykbus.io/topology-required": RACK}},
                           ask("loose", "mixed", gpu=1)))
    assert new_allocs(outs) == []  # no room at all; the set (12 GPUs) fits no rack ever
    outs = h.do(h.log.release("fill", key="f1"))
    assert [a.allocationKey for a in new_allocs(outs)] == ["loose"]
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def test_a_preferred_gang_never_reads_that_no_rack_would_hold_it_even_empty():
    """Review: a preferred gang goes broader, then anywhere: that no rack would hold it empty
    does not mean it waits for the cluster to grow, so its reason does not say so."""
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b2", 2, 0)})  # two racks of 8 GPUs in two blocks
    h.do(h.log.apps(app_msg("busy", "root.jobs")))
    h.do(h.log.asks(ask("b", "busy", max_allocations=3, gpu=2, vcore=1000)))  # 6 of the 16 GPUs
    outs = gang_job(h, "pref", 3, 4, {"ykbus.io/topology-preferred": RACK})  # 3 whole nodes: none free
    (reason,) = {s.reason for s in states(outs) if s.applicartionID == "pref"}
    assert "even empty" not in reason, reason


def reserved_rack_then(change) -> tuple[Harness, str, list]:
    """A required gang of 2 × 4 GPUs reserves the rack (of two 4-GPU hosts) closest to
    holding it; then `change(h, rack)` drains, removes or shrinks a host of that rack."""
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0)})
    h.do(h.log.apps(app_msg("fill", "root.jobs")))
    h.do(h.log.asks(ask("f", "fill", gpu=2, max_allocations=7)))
    gang_job(h, "big", 2, 4, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(3_000_000_000))
    [rack] = [v.rsplit("/", 1)[1] for v in holding(h).values()]
    return h, rack, change(h, rack)


def test_a_reserved_rack_that_loses_a_host_is_given_up_and_the_gang_reserves_again():
    """Like a node's reservation when its node drains or goes: a rack that can no longer
    hold the gang is not kept for it, and its reason names the rack it reserves now."""
    for change in (lambda h, rack: h.do(h.log.nodes(node(f"{rack}-0", action="DRAIN_NODE"))),
                   lambda h, rack: h.do(h.log.nodes(node(f"{rack}-0", action="DECOMISSION"),
                                                    node(f"{rack}-1", action="DECOMISSION"))),
                   lambda h, rack: h.do(h.log.nodes(node(f"{rack}-0", action="UPDATE", gpu=2, vcore=64000,
                                                         attributes={BLOCK: "b1", RACK: rack})))):
        h, rack, outs = reserved_rack_then(change)
        other = "r2" if rack == "r1" else "r1"
        assert holding(h) == {"big": f"b1/{other}"}, holding(h)
        reasons = {s.reason for s in states(outs) if s.applicartionID == "big"}
        assert reasons and all(r.endswith(f"rack b1/{other} is reserved for it") for r in reasons), reasons
        invariants.state_is_consistent(h.core)
        assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def test_a_waiting_topology_set_is_told_when_it_would_start_as_its_dry_run_is():
    """A dry run of a job said `estimated start ... in 5 min` (and it started then); once
    submitted, the same job waiting as a topology set had no estimate at all."""
    from ykbus.core.dryrun import would_fit

    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0)})
    h.do(h.log.apps(app_msg("busy", "root.jobs")))
    h.do(h.log.asks(*[{**ask(f"b-{n}", "busy", gpu=3), "executionTimeoutMilliSeconds": 5 * 60_000,
                       "tags": {"yunikorn.apache.org/requiredNode": n}} for n in ("r1-0", "r1-1", "r2-0", "r2-1")]))
    started = h.log.ts
    job = {"application": {"applicationID": "try", "queueName": "root.jobs", "partitionName": "default",
                           "ugi": {"user": "me"}, "tags": {"ykbus.io/topology-required": RACK}},
           "asks": [{"allocationKey": "w", "applicationID": "try", "maxAllocations": 4,
                     "resourceAsk": {"resources": {"gpu": {"value": 2}}}}]}
    dry = would_fit(h.core, job)
    assert dry["fits"] is False and dry["estimate"]["start"] == started + 5 * 60 * 10**9
    h.do(h.log.apps(app_msg("try", "root.jobs", tags={"ykbus.io/topology-required": RACK})))
    h.do(h.log.asks(ask("w", "try", gpu=2, max_allocations=4)))
    reason = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["try"]["asks"]["w"]["why"]
    assert reason["code"] == "TopologyNoDomain"
    assert reason["details"]["estimatedStart"] == dry["estimate"]["start"]
    assert reason["details"]["estimate"] == dry["estimate"]["text"]
    from ykbus.explain import _details
    assert _details(reason["code"], reason["details"], reason["message"]) == dry["estimate"]["text"]


def test_a_change_that_leaves_a_reserved_rack_able_to_hold_the_gang_keeps_it_reserved():
    """Review of the change above: it gave the rack up for any update of a host (a label, a
    millicore more occupied, a new host joining drained) and judged the gang again only
    after, so an ask ordered before it took the rack's room in between. A rack that would
    still hold the gang empty stays reserved, and nothing else takes its room."""
    for change in (lambda h: h.log.nodes(node("r1-0", action="UPDATE", attributes={BLOCK: "b1", RACK: "r1", "team": "x"})),
                   lambda h: h.log.nodes(node("r1-0", action="UPDATE", gpu=4, vcore=64000, occupied={"vcore": 1})),
                   lambda h: h.log.nodes(node("r1-9", action="CREATE_DRAIN", attributes={BLOCK: "b1", RACK: "r1"},
                                              gpu=4, vcore=64000))):
        h = filled({"r1": ("b1", 3), "r2": ("b1", 4)})
        gang_job(h, "big", 1, 4, {"ykbus.io/topology-required": RACK})
        h.do(h.log.tick(3_000_000_000))
        assert holding(h) == {"big": "b1/r1"}
        h.do(h.log.apps(app_msg("small", "root.jobs")))
        assert new_allocs(h.do(h.log.asks(ask("s", "small", priority=100, gpu=1)))) == []
        outs = h.do(change(h))
        assert new_allocs(outs) == [] and holding(h) == {"big": "b1/r1"}
        invariants.state_is_consistent(h.core)


def test_task_groups_that_fit_the_cluster_only_largest_first_are_placed_whole():
    """Regression (an outside review): groups were placed in the order they came, each the
    best fit, and never another way: a of 3 GPUs took the 4-GPU rack, b of 4 then fitted
    nowhere, and the gang waited for ever on an idle cluster that holds it (then reserved a
    rack for good). When the order they came in fails, the groups are placed again, largest
    first."""
    h = cluster({"r1": ("b1", 2, 1), "r2": ("b1", 1, 0)})  # r1: two nodes of 3 free GPUs; r2: one of 4
    req = {"ykbus.io/topology-required": RACK}
    outs = two_roles(h, "job", {}, {"a": (1, 3, req), "b": (1, 4, req), "c": (1, 3, req)})
    assert len(new_allocs(outs)) == 3, [s.reason for s in states(outs)]
    assert racks_by_group(h, "job") == {"a": {"r1"}, "b": {"r2"}, "c": {"r1"}}
    invariants.state_is_consistent(h.core)


def test_a_leader_and_its_workers_that_fit_a_rack_only_leader_first_are_placed_whole():
    """Regression (an outside review): members were packed first fit in the order they
    came: a worker of 4 GPUs sent before its leader of 8 took the 8-GPU node, and the rack
    that holds both was said never to hold the gang, "even empty"."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(node("n-a", attributes={BLOCK: "b1", RACK: "r1"}, gpu=8, vcore=64000),
                     node("n-b", attributes={BLOCK: "b1", RACK: "r1"}, gpu=4, vcore=64000)))
    h.do(h.log.apps(app_msg("g", "root.jobs", placeholderAsk=resource(gpu=12),
                            tags={"ykbus.io/topology-required": RACK})))
    outs = h.do(h.log.asks({**ask("w", "g", gpu=4, vcore=1000), "taskGroupName": "worker", "placeholder": True},
                           {**ask("l", "g", gpu=8, vcore=1000), "taskGroupName": "leader", "placeholder": True}))
    assert {(a.allocationKey, a.nodeID) for a in new_allocs(outs)} == {("w", "n-b"), ("l", "n-a")}, \
        [s.reason for s in states(outs)]


def test_a_rack_reserved_by_another_gang_is_not_said_to_be_too_small():
    """Regression (an outside review): a second gang that only the rack another gang
    reserved would hold read "no rack would hold it even empty", sending its operator to buy
    hardware: the reserved rack's nodes were left out of the count."""
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 1, 0)})  # 8 and 4 GPUs
    h.do(h.log.apps(app_msg("busy", "root.jobs")))
    h.do(h.log.asks(ask("b", "busy", gpu=2, vcore=1000)))  # 2 GPUs of r1 taken: neither gang fits now
    gang_job(h, "g1", 4, 2, {"ykbus.io/topology-required": RACK})
    h.do(h.log.tick(advance_ns=3_000_000_000))
    h.do(h.log.tick())
    g1 = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["g1"]["asks"]["ph"]["why"]
    assert g1["details"].get("reserved") == "b1/r1", g1
    gang_job(h, "g2", 4, 2, {"ykbus.io/topology-required": RACK})
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["g2"]["asks"]["ph"]["why"]
    assert why["code"] == "TopologyNoDomain" and "even empty" not in why["message"], why
    assert "holdsEmpty" not in why["details"]


def test_a_gang_of_mixed_shapes_reserves_the_rack_that_places_most_of_it_largest_first():
    """Regression (left from the review of the largest-first retry): the rank of a rack to
    reserve counted the members first fit places in the order they came, where placement
    tries largest first too: workers of 1 GPU sent before leaders of 4 filled the 4-GPU host
    of the rack closest to holding the gang, and another rack was reserved."""
    h = Harness()
    h.setup(QUEUES)
    free = {"r1": (3, 3, 0), "r2": (4, 2, 0)}  # GPUs left free on each 4-GPU host by the application fill
    h.do(h.log.nodes(*[node(f"{rack}-{i}", attributes={BLOCK: "b1", RACK: rack}, gpu=4, vcore=64000)
                       for rack, frees in free.items() for i in range(len(frees))]))
    h.do(h.log.apps(app_msg("fill", "root.jobs")))
    h.do(h.log.asks(*[{**ask(f"f-{rack}-{i}", "fill", gpu=4 - f, vcore=1000),
                       "tags": {"yunikorn.apache.org/requiredNode": f"{rack}-{i}"}}
                      for rack, frees in free.items() for i, f in enumerate(frees) if f < 4]))
    h.do(h.log.apps(app_msg("g", "root.jobs", placeholderAsk=resource(gpu=10),
                            tags={"ykbus.io/topology-required": RACK})))
    outs = h.do(h.log.asks(
        {**ask("w", "g", gpu=1, vcore=1000, max_allocations=2), "taskGroupName": "worker", "placeholder": True},
        {**ask("l", "g", gpu=4, vcore=1000, max_allocations=2), "taskGroupName": "leader", "placeholder": True}))
    assert new_allocs(outs) == []  # no rack holds 2 × 4 and 2 × 1 GPUs now
    h.do(h.log.tick(3_000_000_000))  # past the delay: it reserves a rack
    # r2 places a leader and both workers now (largest first), r1 only the workers (either
    # order); in the order they came each places the two workers alone (r1 won by key)
    assert holding(h) == {"g": "b1/r2"}
    invariants.state_is_consistent(h.core)
