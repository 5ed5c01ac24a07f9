"""The REST API's and the metrics' shortcuts agree with a walk of the records (issue 23): the
readers avoid walking what is placed (a dashboard polls them while the writer works), so each
shortcut is checked against the plain walk, after every entry of every golden trace and of
the preemption example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ykbus.log.jsonl import read_entries
from ykbus.log.replay import guarded_core
from ykbus.rest import dao, ops
from ykbus.rest.metrics import YunikornCollector

ROOT = Path(__file__).resolve().parents[1]
LOGS = sorted((ROOT / "tests" / "traces").glob("*.in.jsonl")) + [ROOT / "examples" / "preemption.jsonl"]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_readers_shortcuts_equal_a_walk_after_every_entry(log):
    guard = guarded_core(None)
    for entry in read_entries(log.read_bytes().splitlines(), str(log)):
        list(guard.apply(entry))
        for rm in guard.core.rms.values():
            for p in rm.partitions.values():
                by_code: dict[str, int] = {}  # pending asks by why they wait, as `explain` gives it for each
                for a in p.apps.values():
                    for k in a.asks.values():
                        if k.pending:
                            code = p.records.why_pending(k).code.value
                            by_code[code] = by_code.get(code, 0) + k.pending
                scraped = YunikornCollector.read_model([(rm, p)])[2]
                assert {c: n for c, n in scraped.items() if n} == by_code, (log.name, entry.seq)
                for n in p.nodes.values():
                    for t in n.capacity:
                        held = sum(a.resource.get(t, 0) for a in n.allocations.values())
                        assert dao.allocated_of(n, t) == held, (log.name, entry.seq, n.id, t)
                held_all: dict[str, int] = {}
                for a in p.allocations.values():
                    for t, v in a.resource.items():
                        held_all[t] = held_all.get(t, 0) + v
                assert dao.res(p.records.root.allocated) == dao.res(held_all), (log.name, entry.seq)
                preempting = dao._preempting(p)
                for q in p.queues.values():
                    walked_pre: dict[str, int] = {}
                    for a in p.allocations.values():
                        if a.preempting and q in a.app.path:
                            for t, v in a.resource.items():
                                walked_pre[t] = walked_pre.get(t, 0) + v
                    assert dao.res(preempting.get(q.path, {})) == dao.res(walked_pre), (log.name, entry.seq, q.path)
                # the consistency and orphan checks hold always; a node whose capacity shrank
                # below what it holds is over-committed, and the check says so
                checks = ops.healthcheck([(rm.id, p)])["HealthChecks"]
                failed = [c["Description"] for c in checks if not c["Succeeded"]]
                over = any(v < 0 for n in p.nodes.values() for v in n.free.values())
                assert failed == (["Check for negative resources in the nodes"] if over else []), \
                    (log.name, entry.seq, failed)


@pytest.mark.parametrize("log", LOGS[:3] + [ROOT / "examples" / "preemption.jsonl"], ids=lambda p: p.name)
def test_history_is_sampled_from_the_log_once_a_minute_and_kept_by_snapshots(log):
    """/ws/v1/history from the log: a sample after the first entry of each minute of log time
    (so a replay or a restart answers the same), with the running applications and the
    allocations held then; a snapshot carries it."""
    from ykbus.core.lifecycle import AppState
    from ykbus.core.snapshot import dump_snapshot, load_snapshot
    from ykbus.yamlload import load_yaml

    guard = guarded_core(None)
    minutes: list[int] = []
    expected: list[tuple[int, int, int]] = []
    for entry in read_entries(log.read_bytes().splitlines(), str(log)):
        list(guard.apply(entry))
        core = guard.core
        minute = core.now // 60_000_000_000
        if not minutes or minutes[-1] != minute:
            minutes.append(minute)
            parts = [p for rm in core.rms.values() for p in rm.partitions.values()]
            expected.append((core.now, sum(1 for p in parts for a in p.apps.values() if a.state is AppState.RUNNING),
                             sum(len(p.allocations) for p in parts)))
    assert guard.core.history == expected[-1440:]
    assert load_snapshot(dump_snapshot(guard.core), load_yaml).history == guard.core.history


def _utilization_walked(p) -> dict[str, list[set[str]]]:
    """node-utilizations as YuniKorn computes it: each node's share of each resource it has,
    what its allocations hold over its capacity, in tenths."""
    import math

    out: dict[str, list[set[str]]] = {}
    for n in p.nodes.values():
        for t, cap in n.capacity.items():
            if cap:
                share = min(1.0, sum(a.resource.get(t, 0) for a in n.allocations.values()) / cap)
                out.setdefault(t, [set() for _ in range(10)])[int(max(0.0, math.ceil(share * 10) - 1))].add(n.id)
    return out


def test_node_utilizations_follow_every_change_of_a_node_once_asked():
    """The answer comes from the read model, kept as nodes move from the first time it is
    asked: after allocations, releases, a node grown and one drained, decommissioned or
    added, it is what a walk of the nodes gives, and the metrics' node families with it."""
    from ykbus.bench.run import fresh_core
    from ykbus.log.build import LogBuilder, app, ask, node
    from ykbus.rest import router
    from ykbus.rest.metrics import YunikornCollector

    log = LogBuilder("rm")
    core = fresh_core()
    core.apply(log.register("partitions: [{name: default, queues: [{name: root, submitacl: '*', "
                            "queues: [{name: a}]}]}]"))
    core.apply(log.nodes(*[node(f"n{i}", memory=1000, vcore=100) for i in range(6)], node("gpu", memory=1000, gpu=2)))
    core.apply(log.apps(app("a1", "root.a")))
    st = router.RestState(live=lambda: core, started=0)
    req = router.Request("GET", "/ws/v1/scheduler/node-utilizations")
    p = core.rms["rm"].partitions["default"]

    def answered() -> dict[str, list[set[str]]]:
        status, _, body, _ = router.answer(st, req)
        assert status == 200
        [part] = json.loads(body)
        return {u["type"]: [set(b.get("nodeNames", [])) for b in u["utilization"]] for u in part["utilizations"]}

    def check(step: str) -> None:
        assert answered() == _utilization_walked(p), step
        active, ranges, _ = YunikornCollector.read_model([(core.rms["rm"], p)])
        walked = _utilization_walked(p)
        assert ranges["memory"] == [len(ids) for ids in walked["memory"]], step
        assert active == sum(n.state.value == "Schedulable" for n in p.nodes.values()), step

    check("before any allocation")
    core.apply(log.asks(*[ask(f"k{i}", "a1", memory=150 * (i % 4 + 1), vcore=5) for i in range(14)]))
    check("allocated")
    placed = sorted(p.allocations.values(), key=lambda a: a.uuid)
    core.apply(log.release("a1", uuid=placed[0].uuid))
    core.apply(log.release("a1", uuid=placed[3].uuid))
    check("released")
    core.apply(log.nodes(node("n1", action="UPDATE", memory=4000, vcore=100)))
    check("grown")
    core.apply(log.nodes(node("n2", action="DRAIN_NODE")))
    check("drained")
    core.apply(log.nodes(node("n3", action="DECOMISSION"), node("gpu", action="DECOMISSION")))
    assert "gpu" not in answered(), "a resource no node has is not listed"
    check("decommissioned")
    core.apply(log.nodes(node("n9", memory=500, vcore=10)))
    core.apply(log.asks(ask("late", "a1", memory=480, vcore=1)))
    check("added and allocated on")
