"""The garbage collector kept as a core's long-lived state wants it (ykbus/collector.py):
`ykbus replay` freezes what lives as the service does, and hands it back when it ends; a
dropped partition's cycles are collected."""

from __future__ import annotations

import gc
import weakref

from ykbus.bench.workloads import streaming_log
from ykbus.collector import FREEZE_EVERY, CollectorPolicy
from ykbus.log.replay import replay


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_replay_freezes_what_lives_and_hands_it_back_when_it_ends():
    gc.unfreeze()
    entries = list(streaming_log(FREEZE_EVERY + 500, nodes=20))
    frozen_while: list[int] = []
    outputs = 0
    for i, _out in enumerate(replay(entries)):
        outputs += 1
        if i % 200 == 0:
            frozen_while.append(gc.get_freeze_count())
    assert outputs > FREEZE_EVERY
    assert max(frozen_while) > 0, "the replayed state was never frozen"
    assert gc.get_freeze_count() == 0, "the replay's state stays out of the collector's sight after it ended"


def test_a_short_replay_leaves_the_collector_alone(monkeypatch):
    """It neither freezes nor hands back what its caller froze. (Counted by the calls: the
    count of frozen objects also falls when one of them is freed, as CI saw with the tests on
    two workers, 4,096 fewer: a cache an earlier test of the process filled, emptied.)"""
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    list(replay(list(streaming_log(50, nodes=5))))
    assert calls == []
    list(replay(list(streaming_log(FREEZE_EVERY + 10, nodes=5))))
    assert calls == ["freeze", "unfreeze"]  # (the calls are seen: a longer one makes both)


def test_freezes_every_so_many_entries_or_allocations():
    gc.unfreeze()
    policy = CollectorPolicy()
    froze = [policy.applied(0, 0) for _ in range(FREEZE_EVERY)]
    assert froze.count(True) == 1 and froze[-1]
    assert policy.applied(10_000, 0), "10,000 allocations since the last freeze: frozen at once"
    assert not policy.applied(10_001, 0)
    gc.unfreeze()


def test_a_dropped_partition_has_its_cycles_collected_before_the_next_freeze():
    gc.unfreeze()
    policy = CollectorPolicy()
    cycle = Cycle()
    gone = weakref.ref(cycle)
    gc.freeze()  # frozen with the rest of the state, as the service had it
    del cycle
    for _ in range(FREEZE_EVERY - 1):
        policy.applied(0, 1)
    assert gone() is not None
    policy.applied(0, 1)
    assert gone() is None, "a partition was dropped: everything is collected once"
    gc.unfreeze()
