"""A scrape holds the writer for no more than one family's formatting at a time, and counts
pending asks from the read model; the health check, which must walk every allocation, runs
in steps (rest/steps.py), the writer applying entries between them."""

from __future__ import annotations

import anyio
import pytest

from ykbus.bench.run import fresh_core
from ykbus.bus.live import LiveCore
from ykbus.core import Core
from ykbus.core.guard import GuardedCore
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.rest import ops, router, steps
from ykbus.rest.metrics import Metrics

pytestmark = pytest.mark.anyio

NODES = 5 * steps.STEP + 7
QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]"


def big_core(log: LogBuilder | None = None) -> Core:
    """NODES nodes, some of them used, and asks that wait (too big for any node)."""
    log = log or LogBuilder("rm")
    core = fresh_core()
    core.apply(log.register(QUEUES))
    core.apply(log.nodes(*[node(f"n{i:05d}", memory=1000, vcore=1000) for i in range(NODES)]))
    core.apply(log.apps(app("a1", "root.a")))
    core.apply(log.asks(*[ask(f"k{i}", "a1", memory=100 * (i % 7 + 1), vcore=10) for i in range(2000)],
                        *[ask(f"big{i}", "a1", memory=5000, vcore=1) for i in range(3 * steps.STEP)]))
    return core


def figures() -> dict:
    return {"entries": 1, "input_lag_entries": 0, "last_applied_sequence": 1, "snapshot_age_seconds": 0,
            "allocations_decided": 1, "rms": {}}


def scheduling(exposition: bytes) -> list[bytes]:
    """The exposition's scheduling families (the process's own, CPU time and memory, move)."""
    return [line for line in exposition.splitlines() if line.startswith((b"yunikorn_", b"ykbus_"))]


async def _while_counting(read) -> tuple[object, int]:
    """`read()` awaited while another task counts how often the event loop let it run."""
    turns = 0
    done = anyio.Event()

    async def count() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(count)
        await anyio.sleep(0)
        before = turns
        out = await read()
        done.set()
    return out, turns - before


def test_a_scrape_counts_pending_asks_by_why_they_wait_as_they_change() -> None:
    log = LogBuilder("rm")
    core = big_core(log)
    metrics = Metrics(router.RestState(live=lambda: core, started=0), figures)
    assert b'ykbus_pending_asks{code="NoNodeRoom"} %d' % (3 * steps.STEP) in metrics.exposition()  # too big to fit
    core.apply(log.nodes(node("huge", memory=5000 * 100, vcore=10_000)))  # takes 100 of them
    exposition = metrics.exposition()
    assert b'ykbus_pending_asks{code="NoNodeRoom"} %d' % (3 * steps.STEP - 100) in exposition
    assert b'ykbus_pending_asks{code="Queued"} 0' in exposition


async def test_a_scrape_lets_the_writer_run_between_its_families_and_exposes_the_same() -> None:
    core = big_core()
    st = router.RestState(live=lambda: core, started=0)
    metrics = Metrics(st, figures)
    at_once = metrics.exposition()
    writer = LiveCore(GuardedCore(core, lambda _data: core))  # the pause the service's writer gives it
    sliced, turns = await _while_counting(lambda: metrics.scrape(writer.between_slices))
    families = [line for line in at_once.splitlines() if line.startswith(b"# TYPE ")]
    assert len(families) > 20 and turns >= len(families)  # no slice formats two families
    assert [line for line in sliced.splitlines() if line.startswith(b"# ")] == [
        line for line in at_once.splitlines() if line.startswith(b"# ")]  # every family, in the same order
    assert scheduling(sliced) == scheduling(at_once)


async def test_in_a_reader_a_scrape_is_made_at_once_and_exposes_the_same() -> None:
    """A reader answers reads first (bus/live.py): nothing runs between a scrape's families."""
    core = big_core()
    metrics = Metrics(router.RestState(live=lambda: core, started=0), figures)
    at_once = metrics.exposition()
    reader = LiveCore(GuardedCore(core, lambda _data: core), reads_first=True)
    whole, turns = await _while_counting(lambda: metrics.scrape(reader.between_slices))
    assert turns == 0
    assert [line for line in whole.splitlines() if line.startswith(b"# ")] == [
        line for line in at_once.splitlines() if line.startswith(b"# ")]
    assert scheduling(whole) == scheduling(at_once)


@pytest.mark.parametrize("sliced", [False, True])
async def test_the_health_check_names_what_is_inconsistent_walked_at_once_or_in_steps(sliced) -> None:
    core = big_core()
    rm = core.rms["rm"]
    p = rm.partitions["default"]
    check = (lambda: ops.healthcheck_sliced([(rm.id, p)])) if sliced else (lambda: _at_once(ops.healthcheck([(rm.id, p)])))
    assert (await check())["Healthy"]
    held = sorted(p.allocations.values(), key=lambda a: a.uuid)
    lost = held[0]  # an allocation its node and application hold that the partition has lost
    del p.allocations[lost.uuid]
    off = held[-1].node  # a node whose free room no longer adds up
    off.free = {**off.free, "memory": off.free.get("memory", 0) + 1}
    answer = await check()
    failed = {c["Description"]: c["DiagnosisMessage"] for c in answer["HealthChecks"] if not c["Succeeded"]}
    assert not answer["Healthy"]
    assert failed == {
        "Check if node total resource = allocated resource + occupied resource + available resource":
            f"Nodes with inconsistent data: [{off.id}]",
        "Check if there are orphan allocations on the nodes": f"Orphan allocations: [{lost.uuid}]",
        "Check if there are orphan allocations on the applications": f"OrphanAllocations: [{lost.uuid}]",
    }


async def _at_once(answer):
    return answer
