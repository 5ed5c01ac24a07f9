"""Several RMs (or partitions) with the same queue names: each queue's series is its own.
Without a prefix the root of every RM gave `yunikorn_queue_resource{queue="root",...}` once
per RM, the same labels with different values, and Prometheus kept one of them. A queue
path held by one partition keeps YuniKorn's label (`root.a`); one held by several is
`<partition as the REST paths name it>/<path>` (docs/operations.md, "Metrics")."""

from __future__ import annotations

import collections
import re

from ykbus.bench.run import fresh_core
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.rest import router
from ykbus.rest.metrics import Metrics

QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}, {name: %s}]}]}]"


def figures() -> dict:
    return {"entries": 1, "input_lag_entries": 0, "last_applied_sequence": 1, "snapshot_age_seconds": 0,
            "allocations_decided": 1, "rms": {}}


def test_queues_of_the_same_name_in_two_rms_are_two_series_each_with_its_value():
    core = fresh_core()
    log = LogBuilder("rm-a")
    for rm, own, vcore in (("rm-a", "only-a", 4000), ("rm-b", "only-b", 16000)):
        log.rm = rm
        core.apply(log.register(QUEUES % own))
        core.apply(log.nodes(node(f"{rm}-n1", vcore=vcore)))
        core.apply(log.apps(app(f"{rm}-app", "root.a")))
        core.apply(log.asks(ask("k", f"{rm}-app", vcore=1000)))
    text = Metrics(router.RestState(live=lambda: core, started=0), figures).exposition().decode()
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line.startswith("yunikorn_")]
    repeated = [s for s, n in collections.Counter(series).items() if n > 1]
    assert repeated == []
    value = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("yunikorn_queue_resource")}
    assert value['yunikorn_queue_resource{queue="[rm-a]default/root",resource="vcore",state="max"}'] == 4000
    assert value['yunikorn_queue_resource{queue="[rm-b]default/root",resource="vcore",state="max"}'] == 16000
    assert value['yunikorn_queue_resource{queue="[rm-a]default/root.a",resource="vcore",state="allocated"}'] == 1000
    assert re.search(r'yunikorn_queue_app\{queue="\[rm-b\]default/root.a",state="running"\} 1', text)
    assert any(s.startswith('yunikorn_queue_resource{queue="root.only-b"') for s in value)  # one partition: YuniKorn's


def test_a_series_that_falls_to_zero_stays_at_zero_while_its_queue_is_there():
    """Regression (an outside review): a queue's allocated and pending series, and its
    applications per state, vanished when they fell to 0 (the state holds no zeros), where
    YuniKorn's gauges read 0: Prometheus saw the series go stale, graphs had gaps and
    `absent()` alerts fired. Once written, a series stays, at 0, until its queue goes."""
    core = fresh_core()
    log = LogBuilder("rm")
    core.apply(log.register(QUEUES % "b"))
    core.apply(log.nodes(node("n1", vcore=4000, memory=1000)))
    core.apply(log.apps(app("a1", "root.b")))
    core.apply(log.asks(ask("k", "a1", vcore=1000, memory=10), ask("big", "a1", vcore=9000)))
    metrics = Metrics(router.RestState(live=lambda: core, started=0), figures)

    def values() -> dict[str, float]:
        text = metrics.exposition().decode()
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith(("yunikorn_queue_resource", "yunikorn_queue_app{"))}

    before = values()
    allocated = 'yunikorn_queue_resource{queue="root.b",resource="vcore",state="allocated"}'
    pending = 'yunikorn_queue_resource{queue="root.b",resource="vcore",state="pending"}'
    running = 'yunikorn_queue_app{queue="root.b",state="running"}'
    assert (before[allocated], before[pending], before[running]) == (1000, 9000, 1)
    [placed] = core.rms["rm"].partitions["default"].allocations.values()
    core.apply(log.release("a1", uuid=placed.uuid))
    core.apply(log.release_ask("a1", "big"))
    after = values()
    assert (after[allocated], after[pending]) == (0, 0), after
    assert after['yunikorn_queue_resource{queue="root.b",resource="memory",state="allocated"}'] == 0
    assert after[running] == 0 or 'yunikorn_queue_app{queue="root.b",state="completing"}' in after


def test_counters_never_go_down_when_an_rm_registers_again_or_leaves():
    """Regression (an outside review): the decision counters were the partitions' own, and a
    registration again (a shim restarted, `ykbus up` restarted) or an RM leaving wiped them:
    `container_allocation_attempt_total` fell from 67,979 to 2,541, and Prometheus read each
    fall as a counter reset. They go on from what the partitions that went counted, and a
    snapshot keeps that."""
    from ykbus.core.snapshot import dump_snapshot, load_snapshot
    from ykbus.yamlload import load_yaml

    core = fresh_core()
    log = LogBuilder("rm")
    metrics = Metrics(router.RestState(live=lambda: core, started=0), figures)

    def counted() -> dict[str, float]:
        text = metrics.exposition().decode()
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith(("yunikorn_scheduler_container_allocation_attempt_total",
                                    "yunikorn_scheduler_application_submission_total", "yunikorn_root_b_queue"))}

    def run_one(app_id: str) -> None:
        core.apply(log.nodes(node("n1", vcore=4000)))
        core.apply(log.apps(app(app_id, "root.b")))
        core.apply(log.asks(ask("k", app_id, vcore=1000)))

    core.apply(log.register(QUEUES % "b"))
    run_one("a1")
    first = counted()
    allocated = 'yunikorn_scheduler_container_allocation_attempt_total{state="allocated"}'
    assert first[allocated] == 1 and first['yunikorn_root_b_queue_container{state="allocated"}'] == 1
    core.apply(log.register(QUEUES % "b"))  # registered again: its state starts afresh, not its counts
    run_one("a2")
    again = counted()
    assert again[allocated] == 2 and again['yunikorn_scheduler_application_submission_total{result="accepted"}'] == 2
    core.apply(log.unregister())  # it leaves: what it counted stays counted
    assert counted() == again
    core = load_snapshot(dump_snapshot(core), load_yaml)  # and a restarted core counts the same
    assert counted() == again
    core.apply(log.register(QUEUES % "b"))
    run_one("a3")
    assert counted()[allocated] == 3


def test_every_resource_of_the_nodes_has_its_node_usage_family():
    """As YuniKorn writes one family per resource (formatMetricName): GPU nodes had none."""
    core = fresh_core()
    log = LogBuilder("rm")
    core.apply(log.register(QUEUES % "b"))
    core.apply(log.nodes(*[node(f"n{i}", vcore=8000, **{"nvidia.com/gpu": 8}) for i in range(2)]))
    core.apply(log.apps(app("a1", "root.b")))
    core.apply(log.asks(ask("k", "a1", vcore=1000, **{"nvidia.com/gpu": 4})))
    text = Metrics(router.RestState(live=lambda: core, started=0), figures).exposition().decode()
    assert "# TYPE yunikorn_scheduler_nvidia_com_gpu_node_usage_total gauge" in text
    assert 'yunikorn_scheduler_nvidia_com_gpu_node_usage_total{range="(40%,50%]"} 1.0' in text
    assert 'yunikorn_scheduler_nvidia_com_gpu_node_usage_total{range="[0,10%]"} 1.0' in text
    assert 'yunikorn_scheduler_pods_node_usage_total{range="[0,10%]"} 0.0' in text  # YuniKorn's three stay


def test_a_snapshot_without_retired_counts_loads_and_a_partition_a_reload_brings_back_goes_on():
    """Snapshots written before the retired counts (SRM without its last field) still load;
    a partition a reload removed and a later reload brings back goes on from its counts."""
    import msgspec

    from ykbus.core.snapshot import dump_snapshot, load_snapshot
    from ykbus.yamlload import load_yaml

    two = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: b}]}]}, " \
          "{name: gpu, queues: [{name: root, submitacl: '*', queues: [{name: b}]}]}]"
    core = fresh_core()
    log = LogBuilder("rm")
    core.apply(log.register(two))
    from ykbus.core.registry import NODE_PARTITION_ATTR
    core.apply(log.nodes(node("g1", vcore=4000, attributes={NODE_PARTITION_ATTR: "gpu"})))
    core.apply(log.apps(app("a1", "root.b", partition="gpu")))
    core.apply(log.asks(ask("k", "a1", vcore=1000, partition="gpu")))
    core.apply(log.remove_apps("a1", partition="gpu"))
    core.apply(log.nodes(node("g1", action="DECOMISSION", attributes={NODE_PARTITION_ATTR: "gpu"})))
    core.apply(log.config(QUEUES % "b"))  # the gpu partition goes
    assert "gpu" not in core.rms["rm"].partitions and core.rms["rm"].retired_counts["gpu"]
    core.apply(log.config(two))  # and comes back: its counts with it
    counts = core.rms["rm"].partitions["gpu"].records.summary.counts
    assert counts[("container", "root.b", "allocated")] == 1 and not core.rms["rm"].retired_counts
    old = msgspec.msgpack.decode(dump_snapshot(core))
    for rm in old["rms"]:
        del rm[-1]  # SRM.retired_counts, the field snapshots before it have not
    restored = load_snapshot(msgspec.msgpack.encode(old), load_yaml)
    assert restored.rms["rm"].retired_counts == {}
    assert restored.rms["rm"].partitions["gpu"].records.summary.counts == counts
