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
