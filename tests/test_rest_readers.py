"""The REST API's and the metrics' shortcuts agree with a walk of the records (issue 23): the
readers avoid walking what is placed (a dashboard polls them while the writer works), so each
shortcut is checked against the plain walk, after every entry of every golden trace and of
the preemption example."""

from __future__ import annotations

from pathlib import Path

import pytest

from ykbus.log.jsonl import read_entries
from ykbus.log.replay import guarded_core
from ykbus.rest import dao, ops
from ykbus.rest.metrics import pending_asks

ROOT = Path(__file__).resolve().parents[1]
LOGS = sorted((ROOT / "tests" / "traces").glob("*.in.jsonl")) + [ROOT / "examples" / "preemption.jsonl"]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_readers_shortcuts_equal_a_walk_after_every_entry(log):
    guard = guarded_core(None)
    for entry in read_entries(log.read_bytes().splitlines(), str(log)):
        list(guard.apply(entry))
        for rm in guard.core.rms.values():
            for p in rm.partitions.values():
                walked = sorted((a.id, k.key) for a in p.apps.values() for k in a.asks.values() if k.pending)
                assert sorted((k.app.id, k.key) for k in pending_asks(p)) == walked, (log.name, entry.seq)
                for n in p.nodes.values():
                    for t in n.capacity:
                        held = sum(a.resource.get(t, 0) for a in n.allocations.values())
                        assert dao.allocated_of(n, t) == held, (log.name, entry.seq, n.id, t)
                held_all: dict[str, int] = {}
                for a in p.allocations.values():
                    for t, v in a.resource.items():
                        held_all[t] = held_all.get(t, 0) + v
                assert dao.res(p.root.allocated) == dao.res(held_all), (log.name, entry.seq)
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
