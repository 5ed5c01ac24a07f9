"""Topology-aware gangs through the core (issue 42, docs/topology.md): a gang whose
application asks for one domain is placed whole inside one rack or block, the best fit;
one that no domain holds waits with `TopologyNoDomain`; `preferred` falls back to broader
levels, then anywhere; a level the partition does not have is refused."""

from __future__ import annotations

from tests import invariants
from tests.conftest import Harness, app_updates, new_allocs, states
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
    # a block holds it (r1 + r2 are both in b1): required at the block level places it
    outs = gang_job(h, "blocky", 4, 4, {"ykbus.io/topology-required": BLOCK})
    assert len(new_allocs(outs)) == 4 and set(racks_of(outs, "blocky")) <= {"r1", "r2"}


def test_a_preferred_gang_goes_to_a_broader_level_when_no_rack_holds_it():
    h = cluster({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0), "r3": ("b2", 1, 0)})  # racks of 8, 8 and 4 GPUs
    outs = gang_job(h, "pref", 3, 4, {"ykbus.io/topology-preferred": RACK})  # 12 GPUs: block b1
    assert len(new_allocs(outs)) == 3 and set(racks_of(outs, "pref")) <= {"r1", "r2"}
    assert ("pref", "Running") in app_updates(outs) or ("pref", "Accepted") in app_updates(outs)


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
