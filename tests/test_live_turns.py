"""A reader pauses a long entry for a dry run (bus/live.py `LiveCore.apply`): between two
rounds of the entry's pass the loop gets a turn, a dry run is answered on the state as it is
there, every other read waits for the entry's end, and the entry then goes on to the same
outputs as without a pause. A stop in a pause finishes the entry first."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from tests.conftest import Harness
from ykbus.bus import live as live_module
from ykbus.bus.live import LiveCore
from ykbus.bus.readapi import would_fit_live
from ykbus.core.guard import GuardedCore
from ykbus.core.intake import PAUSE_EVERY
from ykbus.log.build import app, ask, node

QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: jobs}]}]}]"
ASKS = 150  # one GPU each, on 20 hosts of 8: 10 GPUs stay free at the end


def _cluster() -> tuple[Harness, object]:
    """20 hosts of 8 GPUs, an application, and the entry of its 150 asks (not applied)."""
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(*[node(f"h{i:02d}", gpu=8) for i in range(20)]))
    h.do(h.log.apps(app("train", "root.jobs")))
    return h, h.log.asks(*[ask(f"w{i}", "train", gpu=1) for i in range(ASKS)])


def _gang(members: int) -> dict:
    return {"application": {"applicationID": "try", "queueName": "root.jobs", "partitionName": "default",
                            "ugi": {"user": "me"}},
            "asks": [{"allocationKey": "w", "applicationID": "try", "maxAllocations": members,
                      "resourceAsk": {"resources": {"gpu": {"value": 1}}}}]}


def _wire(outputs) -> list[tuple[str, str, bytes]]:
    return [(o.kind, o.rm, msgspec.json.encode(o.msg)) for o in outputs]


def _allocated(h: Harness) -> int:
    return len(h.core.rms["rm-1"].partitions["default"].allocations)


@pytest.fixture
def every_round(monkeypatch):
    """A turn between every two rounds (the service: once 5 ms of applying went by)."""
    monkeypatch.setattr(live_module, "READ_TURN_EVERY_S", 0.0)


def test_a_reader_answers_a_dry_run_in_the_middle_of_a_long_entry_and_other_reads_wait_for_its_end(every_round):
    h, entry = _cluster()
    twin, same = _cluster()
    expected = _wire(twin.do(same))
    live = LiveCore(GuardedCore(h.core, lambda _data: h.core), reads_first=True)
    seen: dict = {}

    async def main() -> None:
        async def writer() -> None:
            async with live.lock:
                seen["outputs"] = await live.apply(entry)

        async def dry_run() -> None:
            while live.applying is None or _allocated(h) == 0:  # a pause in the pass (not yet in the asks' intake)
                await anyio.sleep(0)
            seen["allocated then"] = _allocated(h)
            seen["answer"] = (await would_fit_live(live, _gang(1000)))["wouldfit"]
            seen["entry done then"] = "outputs" in seen

        async def other_read() -> None:
            while live.applying is None:
                await anyio.sleep(0)
            await live.at_rest()
            seen["allocated at rest"] = _allocated(h)

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            tg.start_soon(dry_run)
            tg.start_soon(other_read)

    anyio.run(main)
    answer = seen["answer"]
    assert not seen["entry done then"], "the dry run waited for the entry's end"
    assert 0 < seen["allocated then"] < ASKS, "the pause was not in the middle of the entry"
    assert answer["entryInProgress"] == entry.seq and answer["lastSeq"] == entry.seq - 1
    assert answer["entriesBetween"] == 0
    # what it read is the state in the pause: the GPUs free then, not before or after the entry
    assert answer["fits"] is False and answer["smaller"]["members"] == 160 - seen["allocated then"]
    assert seen["allocated at rest"] == ASKS, "a read that is not a dry run ran in the middle of the entry"
    assert _wire(seen["outputs"]) == expected, "a pause changed what the entry decided"
    assert live.applying is None and live.applied() == entry.seq
    assert live.paused_s > 0, "the time in turns is not told apart from the entry's (its latency metric)"


def test_a_long_request_is_paused_between_its_items_too(every_round):
    """The intake of 150 asks pauses every 64 (`intake.PAUSE_EVERY`): the first pause comes
    before any is placed, with the asks read so far recorded whole."""
    h, entry = _cluster()
    live = LiveCore(GuardedCore(h.core, lambda _data: h.core), reads_first=True)
    first: dict = {}

    async def main() -> None:
        async def writer() -> None:
            async with live.lock:
                await live.apply(entry)

        async def look() -> None:
            while live.applying is None:
                await anyio.sleep(0)
            first["asks"] = len(h.core.rms["rm-1"].partitions["default"].apps["train"].asks)
            first["allocated"] = _allocated(h)

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            tg.start_soon(look)

    anyio.run(main)
    assert first == {"asks": PAUSE_EVERY - 1, "allocated": 0}
    assert _allocated(h) == ASKS


def test_without_a_turn_due_the_entry_runs_to_its_end_at_once():
    h, entry = _cluster()
    live = LiveCore(GuardedCore(h.core, lambda _data: h.core), reads_first=True)
    live._turn_ended = float("inf")  # a turn was just given: none is due during this entry

    async def main() -> list:
        async with live.lock:
            return await live.apply(entry)

    assert len(anyio.run(main)) > 0 and _allocated(h) == ASKS and live.applying is None


def test_a_stop_in_a_pause_finishes_the_entry_before_it_stops(every_round):
    h, entry = _cluster()
    twin, same = _cluster()
    twin.do(same)
    live = LiveCore(GuardedCore(h.core, lambda _data: h.core), reads_first=True)

    async def main() -> None:
        async def writer() -> None:
            async with live.lock:
                await live.apply(entry)
            raise AssertionError("the stop did not reach the entry's caller")

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            while live.applying is None or _allocated(h) == 0:  # a pause in the pass
                await anyio.sleep(0)
            assert _allocated(h) < ASKS
            tg.cancel_scope.cancel()

    anyio.run(main)
    part, twin_part = h.core.rms["rm-1"].partitions["default"], twin.core.rms["rm-1"].partitions["default"]
    assert sorted((a.key, a.node.id) for a in part.allocations.values()) == \
        sorted((a.key, a.node.id) for a in twin_part.allocations.values()), "the entry was left half applied"
    assert h.core.last_seq == entry.seq and live.applying is None


def test_the_writer_never_pauses_an_entry(every_round):
    h, entry = _cluster()
    live = LiveCore(GuardedCore(h.core, lambda _data: h.core), reads_first=False)

    async def main() -> None:
        async def watch() -> None:
            while True:
                assert live.applying is None
                await anyio.sleep(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            async with live.lock:
                await live.apply(entry)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert _allocated(h) == ASKS and live.paused_s == 0
