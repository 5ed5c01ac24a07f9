"""A waiting gang that asks for no topology domain reserves nodes (docs/gang.md,
`ykbus.io/gang.reserve`): past the reservation delay, in a queue that sets it, the gang
reserves the nodes that would hold it; smaller asks that keep coming no longer take each
bit of room that frees there, and the gang starts once those nodes hold it."""

from __future__ import annotations

from tests import invariants
from tests.conftest import Harness, new_allocs, states
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app, ask, node, resource
from ykbus.yamlload import load_yaml

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: train
            properties: {{ykbus.io/gang.reserve: "{reserve}"}}
          - name: batch
"""
SECOND = 1_000_000_000


def cluster(reserve: bool) -> Harness:
    """Four nodes of 4 GPUs, each running two 2-GPU pods of `fill` (batch): nothing free."""
    h = Harness()
    h.setup(QUEUES.format(reserve="true" if reserve else "false"))
    h.do(h.log.nodes(*[node(f"n{i}", gpu=4, vcore=64000) for i in range(4)]))
    h.do(h.log.apps(app("fill", "root.batch")))
    outs = h.do(h.log.asks(ask("f", "fill", gpu=2, max_allocations=8)))
    assert len(new_allocs(outs)) == 8
    return h


def gang_of(h: Harness, app_id: str, members: int, gpus: int) -> list:
    h.do(h.log.apps(app(app_id, "root.train", placeholderAsk=resource(gpu=members * gpus))))
    return h.do(h.log.asks({**ask("ph", app_id, max_allocations=members, gpu=gpus, vcore=1000),
                            "taskGroupName": "workers", "placeholder": True}))


def part(h: Harness):
    return h.core.registry.rms["rm-1"].partitions["default"]


def held(h: Harness) -> dict[str, list[str]]:
    """Gang -> the nodes it reserved."""
    out: dict[str, list[str]] = {}
    for node_id, a in part(h).records.node_holds.items():
        out.setdefault(a.id, []).append(node_id)
    return {k: sorted(v) for k, v in out.items()}


def small_pod_beside_a_reservation() -> Harness:
    """`big` reserved n0 and n1; a small pod of `small` waits, though a fill pod on n0 ended
    (n0 is reserved)."""
    h = cluster(reserve=True)
    gang_of(h, "big", 2, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["n0", "n1"]}
    h.do(h.log.apps(app("small", "root.batch")))
    h.do(h.log.asks(ask("s", "small", gpu=2)))
    on_n0 = next(a for a in part(h).apps["fill"].allocations.values() if a.node.id == "n0")
    assert new_allocs(h.do(h.log.release("fill", uuid=on_n0.uuid))) == [], "n0 is reserved: the small pod waits"
    return h


def run_churn(h: Harness) -> tuple[list[str], list[str]]:
    """Small 2-GPU asks keep coming (`small`, batch) while the fillers end one by one: the
    nodes the gang `big` is placed on, and those of the small pods placed."""
    h.do(h.log.apps(app("small", "root.batch")))
    h.do(h.log.asks(ask("s", "small", gpu=2, max_allocations=40)))
    fill = part(h).apps["fill"]
    small: list[str] = []
    placed: list[str] = []
    for alloc in list(fill.allocations.values()):
        outs = h.do(h.log.release("fill", uuid=alloc.uuid))
        small += [a.nodeID for a in new_allocs(outs) if a.applicationID == "small"]
        placed += sorted(a.nodeID for a in new_allocs(outs) if a.applicationID == "big")
        invariants.state_is_consistent(h.core)
    return placed, sorted(small)


def test_without_the_property_smaller_asks_keep_taking_the_room_a_waiting_gang_needs():
    h = cluster(reserve=False)
    gang_of(h, "big", 2, 4)  # two whole nodes: none free
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {}
    placed, small = run_churn(h)
    assert placed == [] and len(small) == 8, "each freed 2 GPUs went to a small pod: the gang starved"


def test_a_gang_past_the_delay_reserves_the_nodes_that_would_hold_it_and_starts_on_them():
    h = cluster(reserve=True)
    outs = gang_of(h, "big", 2, 4)
    assert new_allocs(outs) == [] and held(h) == {}
    h.do(h.log.tick(1 * SECOND))  # before the delay (2 s)
    assert held(h) == {}
    outs = h.do(h.log.tick(int(2.5 * SECOND)))  # past it: two nodes, by id (all equally full)
    assert held(h) == {"big": ["n0", "n1"]}
    reasons = {s.reason for s in states(outs) if s.applicartionID == "big"}
    assert reasons == {"gang big does not fit yet: no room for {gpu: 8, vcore: 2 cores} of its {gpu: 8, vcore: 2 "
                       "cores} once the rest is placed; nodes n0, n1 are reserved for it"}, reasons
    invariants.state_is_consistent(h.core)
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)  # a snapshot keeps the reservation
    assert restored.dump() == h.core.dump()
    assert {k: a.id for k, a in restored.rms["rm-1"].partitions["default"].records.node_holds.items()} == {
        "n0": "big", "n1": "big"}
    invariants.state_is_consistent(restored)
    placed, small = run_churn(h)
    assert placed == ["n0", "n1"], "the gang starts on the nodes it reserved once they hold it"
    assert small == ["n2", "n2", "n3", "n3"], "the small pods took only the room of the nodes not reserved"
    assert held(h) == {}  # the reservation ends when the gang is placed


def test_a_reserved_node_that_drains_is_given_up_and_the_gang_reserves_again():
    h = cluster(reserve=True)
    gang_of(h, "big", 2, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["n0", "n1"]}
    h.do(h.log.nodes({**node("n1", gpu=4, vcore=64000), "action": "DRAIN_NODE"}))
    assert held(h) == {"big": ["n0", "n2"]}, "the set no longer holds it: the next closest nodes"
    invariants.state_is_consistent(h.core)


def test_a_gang_that_leaves_frees_its_nodes_for_the_others():
    h = small_pod_beside_a_reservation()
    outs = h.do(h.log.remove_apps("big"))
    assert held(h) == {} and [(a.applicationID, a.nodeID) for a in new_allocs(outs)] == [("small", "n0")]
    invariants.state_is_consistent(h.core)


def test_a_gang_too_large_for_the_cluster_even_empty_reserves_nothing_and_says_so():
    h = cluster(reserve=True)
    gang_of(h, "huge", 5, 4)  # 20 GPUs of 16
    outs = h.do(h.log.tick(3 * SECOND))
    assert held(h) == {}
    assert [s.reason for s in states(outs)] == [
        "gang huge does not fit yet: no room for {gpu: 20, vcore: 5 cores} of its {gpu: 20, vcore: 5 cores} once the "
        "rest is placed; no set of schedulable nodes would hold it even empty: it reserves none"]
    invariants.state_is_consistent(h.core)


def test_a_gang_reserves_even_where_single_asks_reserved_every_node():
    """Single asks past the delay reserve each node as it frees: a gang, which needs its whole
    set at once, would never find nodes free of them; it takes nodes reserved for asks (their
    asks give them up) and starts there."""
    h = Harness()
    h.setup(QUEUES.format(reserve="true"))
    h.do(h.log.nodes(*[node(f"n{i}", gpu=4, vcore=64000) for i in range(4)]))
    h.do(h.log.apps(app("fill", "root.batch"), app("small", "root.batch")))
    h.do(h.log.asks(ask("f", "fill", gpu=4, max_allocations=4)))
    h.do(h.log.asks(*[ask(f"s{i}", "small", gpu=4) for i in range(4)]))
    h.do(h.log.tick(3 * SECOND))  # past the delay: the small asks reserve a node each
    p = part(h)
    assert sorted(n.id for n in p.nodes.values() if n.reserved is not None) == ["n0", "n1", "n2", "n3"]
    gang_of(h, "big", 1, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["n0"]} and p.nodes["n0"].reserved is None
    shown = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["nodes"]  # the read API's nodes
    assert shown["n0"]["heldFor"] == "big" and "reservedFor" not in shown["n0"]
    assert {shown[n]["reservedFor"] for n in ("n1", "n2", "n3")} <= {f"small/s{i}" for i in range(4)}
    invariants.state_is_consistent(h.core)
    on_n0 = next(a for a in p.apps["fill"].allocations.values() if a.node.id == "n0")
    outs = h.do(h.log.release("fill", uuid=on_n0.uuid))
    assert [(a.applicationID, a.nodeID) for a in new_allocs(outs)] == [("big", "n0")]
    invariants.state_is_consistent(h.core)


def test_a_gang_a_queue_max_holds_after_it_reserved_gives_its_nodes_back():
    h = small_pod_beside_a_reservation()
    capped = QUEUES.format(reserve="true").replace(
        'properties: {ykbus.io/gang.reserve: "true"}', 'properties: {ykbus.io/gang.reserve: "true"}\n'
        '            resources: {max: {gpu: 4}}')
    outs = h.do(h.log.config(capped))  # the gang (8 GPUs) can no longer run in its queue
    assert held(h) == {}
    assert [(a.applicationID, a.nodeID) for a in new_allocs(outs)] == [("small", "n0")]
    assert {s.reason.split(":")[0] for s in states(outs) if s.applicartionID == "big"} == {
        "queue root.train max gpu 4 would be exceeded by gang big"}
    invariants.state_is_consistent(h.core)


def test_a_reload_that_turns_the_property_on_lets_a_starving_gang_reserve():
    h = cluster(reserve=False)
    gang_of(h, "big", 2, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {}
    h.do(h.log.config(QUEUES.format(reserve="true")))  # its wait for the delay starts now
    assert held(h) == {}
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["n0", "n1"]}
    invariants.state_is_consistent(h.core)


def test_a_reload_that_turns_the_property_off_ends_the_reservation():
    h = small_pod_beside_a_reservation()
    outs = h.do(h.log.config(QUEUES.format(reserve="false")))
    assert held(h) == {} and [(a.applicationID, a.nodeID) for a in new_allocs(outs)] == [("small", "n0")]
    assert {s.reason for s in states(outs) if s.applicartionID == "big"} == {  # its reason no longer names them
        "gang big does not fit yet: no room for {gpu: 8, vcore: 2 cores} of its {gpu: 8, vcore: 2 cores} once the "
        "rest is placed"}
    invariants.state_is_consistent(h.core)
    h.do(h.log.tick(10 * SECOND))
    assert held(h) == {}, "a queue that no longer reserves: its gang waits as any other"


def test_an_ask_that_must_run_on_a_reserved_node_says_which_gang_reserved_it():
    h = cluster(reserve=True)
    gang_of(h, "big", 2, 4)
    h.do(h.log.tick(3 * SECOND))
    h.do(h.log.apps(app("ds", "root.batch")))
    outs = h.do(h.log.asks({**ask("d", "ds", gpu=1), "tags": {"yunikorn.apache.org/requiredNode": "n0"}}))
    assert [s.reason for s in states(outs)] == ["it must run on node n0, which is one of the nodes gang big reserved"]


def test_ykbus_nodes_says_which_gang_reserved_a_node(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    trace = Path(__file__).parents[1] / "traces" / "gang-reserve.in.jsonl"
    log = tmp_path / "log.jsonl"
    log.write_text("".join(trace.read_text().splitlines(keepends=True)[:8]))  # the gang waits on n0 and n2
    out = subprocess.run([sys.executable, "-m", "ykbus.cli", "nodes", "--log", str(log)], capture_output=True,
                         text=True, timeout=120, check=True).stdout.splitlines()
    assert out[0].split()[-3:] == ["ALLOCATIONS", "RESERVED", "FOR"]
    rows = {line.split()[2]: line.rstrip() for line in out[1:]}
    assert rows["n0"].endswith(" gang big") and rows["n2"].endswith(" gang big")
    assert rows["n1"].endswith(" 2") and rows["n3"].endswith(" 2"), "n1 and n3: reserved for no one"


def test_a_gang_of_mixed_shapes_reserves_the_nodes_that_hold_it_packed_as_it_is_placed():
    """Members of 5 GPUs and 1 core, and of 3 GPUs and 4 cores: two 8-GPU nodes hold them
    (a 5 and a 3 on each), found as the packing judges a reserved domain."""
    h = Harness()
    h.setup(QUEUES.format(reserve="true"))
    h.do(h.log.nodes(*[node(f"n{i}", gpu=8, vcore=64000) for i in range(2)]))
    h.do(h.log.apps(app("fill", "root.batch")))
    h.do(h.log.asks(ask("f", "fill", gpu=1, max_allocations=2)))  # a GPU taken on each
    h.do(h.log.apps(app("mixed", "root.train", placeholderAsk=resource(gpu=16, vcore=10000))))
    h.do(h.log.asks({**ask("a", "mixed", gpu=5, vcore=1000, max_allocations=2), "taskGroupName": "w", "placeholder": True},
                    {**ask("b", "mixed", gpu=3, vcore=4000, max_allocations=2), "taskGroupName": "w",
                     "placeholder": True}))
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"mixed": ["n0", "n1"]}
    for a in list(part(h).apps["fill"].allocations.values()):
        outs = h.do(h.log.release("fill", uuid=a.uuid))
    assert sorted(a.nodeID for a in new_allocs(outs)) == ["n0", "n0", "n1", "n1"] and held(h) == {}
    invariants.state_is_consistent(h.core)


def test_a_gang_the_nodes_other_gangs_left_cannot_hold_says_so_not_that_the_cluster_cannot():
    h = cluster(reserve=True)
    gang_of(h, "a", 2, 4)
    gang_of(h, "b", 2, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"a": ["n0", "n1"], "b": ["n2", "n3"]}
    outs = gang_of(h, "c", 2, 4)
    outs += h.do(h.log.tick(3 * SECOND))
    last = [s.reason for s in states(outs) if s.applicartionID == "c"][-1]  # past the delay
    assert last.endswith("; the nodes other gangs did not reserve would not hold it even empty: it reserves none")


def test_a_reserved_node_that_leaves_is_no_longer_the_gangs_when_one_registers_under_its_id():
    h = Harness()
    h.setup(QUEUES.format(reserve="true"))
    h.do(h.log.nodes(node("a0", gpu=8, vcore=64000, occupied={"gpu": 4}), node("a1", gpu=4, vcore=64000),
                     node("a2", gpu=4, vcore=64000)))
    h.do(h.log.apps(app("fill", "root.batch")))
    h.do(h.log.asks(ask("f", "fill", gpu=4, max_allocations=3)))
    gang_of(h, "big", 3, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["a0", "a1", "a2"]}
    h.do(h.log.nodes(node("a0", action="UPDATE", gpu=8, vcore=64000, occupied={"gpu": 0})))  # a0 alone holds two now
    h.do(h.log.nodes(node("a2", action="DECOMISSION")))  # a0 and a1 still hold it: kept, without a2
    assert held(h) == {"big": ["a0", "a1"]} and part(h).apps["big"].holding == ("", ("a0", "a1"))
    h.do(h.log.nodes(node("a2", gpu=4, vcore=64000)))  # a node under the id that left: not the gang's
    assert part(h).nodes["a2"].held == "" and held(h) == {"big": ["a0", "a1"]}
    invariants.state_is_consistent(h.core)


def test_a_reload_that_lengthens_the_reservation_delay_still_lets_a_waiting_gang_reserve():
    h = cluster(reserve=True)
    gang_of(h, "big", 2, 4)
    h.do(h.log.tick(1 * SECOND))
    h.do(h.log.config(QUEUES.format(reserve="true").replace("  - name: default\n",
                                                           "  - name: default\n    reservationdelay: 5s\n")))
    h.do(h.log.tick(2 * SECOND))  # 3 s in: past the old delay, not the new one
    assert held(h) == {}
    h.do(h.log.tick(3 * SECOND))  # past the new one: its timer was set again
    assert held(h) == {"big": ["n0", "n1"]}


def test_a_gang_maxapplications_holds_gives_its_nodes_back_and_waits_the_delay_again():
    h = cluster(reserve=True)
    gang_of(h, "big", 2, 4)
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["n0", "n1"]}
    h.do(h.log.apps(app("one", "root.train")))
    h.do(h.log.asks(ask("o", "one", gpu=0, vcore=100)))  # a running application in train
    capped = QUEUES.format(reserve="true").replace('properties: {ykbus.io/gang.reserve: "true"}',
                                                   'properties: {ykbus.io/gang.reserve: "true"}\n'
                                                   '            maxapplications: 1')
    h.do(h.log.config(capped))
    assert held(h) == {}
    assert all(a.since == 0 for a in part(h).apps["big"].asks.values())
    invariants.state_is_consistent(h.core)


def test_a_topology_gang_that_reserved_nodes_while_the_levels_were_gone_gives_them_up_when_they_return():
    with_levels = ("partitions:\n  - name: default\n{topology}    queues:\n      - name: root\n        submitacl: '*'\n"
                   "        properties: {{ykbus.io/gang.reserve: 'true'}}\n        queues:\n          - name: train\n")
    racked = with_levels.format(topology="    topology:\n      levels: [ykbus.io/rack]\n")
    h = Harness()
    h.setup(racked)
    h.do(h.log.nodes(*[node(f"r{r}-{i}", attributes={"ykbus.io/rack": f"r{r}"}, gpu=4, vcore=64000)
                       for r in range(2) for i in range(2)]))
    h.do(h.log.apps(app("fill", "root.train")))
    h.do(h.log.asks(ask("f", "fill", gpu=2, max_allocations=8)))
    h.do(h.log.apps(app("big", "root.train", placeholderAsk=resource(gpu=8),
                        tags={"ykbus.io/topology-required": "ykbus.io/rack"})))
    h.do(h.log.asks({**ask("p", "big", gpu=4, vcore=1000, max_allocations=2), "taskGroupName": "w",
                     "placeholder": True}))
    h.do(h.log.tick(3 * SECOND))
    p = part(h)
    assert p.apps["big"].holding is not None and p.apps["big"].holding[0] == "ykbus.io/rack"
    h.do(h.log.config(with_levels.format(topology="")))  # no levels: its rack ends; it reserves nodes
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {"big": ["r0-0", "r0-1"]}
    h.do(h.log.config(racked))  # the levels return: it asks for a rack again, not for nodes
    h.do(h.log.tick(3 * SECOND))
    assert held(h) == {} and p.apps["big"].holding is not None and p.apps["big"].holding[0] == "ykbus.io/rack"
    invariants.state_is_consistent(h.core)
