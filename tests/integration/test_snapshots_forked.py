"""Snapshots made off the writer's path by a forked child (issue 24, bus/snapshots.py): they
are stored while the core goes on, each holds the state as of its entry, the guard's
checkpoint follows them, and a core restarted from one and the log's tail has the same
state as the core that ran on."""

from __future__ import annotations

import sys
import threading
from typing import Any

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus import snapshots as snapshots_mod
from ykbus.bus.subjects import SNAPSHOT_OBJECT
from ykbus.core.snapshot import load_snapshot
from ykbus.yamlload import load_yaml

pytestmark = pytest.mark.anyio


async def _two_taken_and_idle(core) -> None:
    """Until two snapshots are taken, and none is being stored (a get during a put can wait
    forever) or due."""
    with anyio.fail_after(30):
        while core.snapshots.taken < 2 or not core.snapshots.idle:
            await anyio.sleep(0.05)


async def asks_one_per_entry(api, n: int) -> tuple[Recorder, Any]:
    """RM `k8s` with a node room for every ask, an application, and `n` asks, one per
    message (an entry each), each allocated."""
    rec = Recorder()
    client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=1_000_000, memory=10**9)])
    await client.add_applications([app("a1")])
    for i in range(n):
        await client.add_asks([ask(f"p{i}", "a1", vcore=10, memory=10)])
    await rec.wait_for(lambda: len(rec.allocations) == n)
    return rec, client


async def test_forked_snapshots_are_stored_as_the_core_goes_on_and_a_restart_resumes_from_them(nats_server, tmp_path):
    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, snapshot_every=20, snapshot_dir=str(tmp_path)) as core:
            assert core.snapshots.fork
            await asks_one_per_entry(api, 120)  # one ask per message: 120 entries, a snapshot due every 20
            # two at least: one at the 20th entry, and one for the entries applied while it was
            # made (more if it was quick; on a busy machine its child, at the lowest priority,
            # may take until every entry is in)
            await _two_taken_and_idle(core)
            # one per 20 entries at most, one more for each that failed (it is tried again, sooner),
            # and one more if it began to lead only after 20 entries (a first campaign that a busy
            # server did not answer: a new leader stores one at once, `Snapshotter.leading`)
            assert core.snapshots.taken <= core.core.last_seq // 20 + core.snapshots.failed + 1, (
                core.snapshots.taken, core.snapshots.failed, core.snapshots.store_due, core.core.last_seq)
            stored = await core.store.get(SNAPSHOT_OBJECT)
            snap = load_snapshot(stored.data, load_yaml)
            assert 0 < snap.last_seq <= core.core.last_seq  # as of an entry, taken while the core went on
            assert (tmp_path / "core.snap").read_bytes() == stored.data  # the local copy is the stored one
            live = core.core.dump()
        # a restart: from the last snapshot (the final one, in place) and nothing after it
        async with running_core(nats_server.url, snapshot_every=20, snapshot_dir=str(tmp_path)) as again:
            assert again.core.dump() == live


async def test_entries_applied_while_a_slow_snapshot_is_made_are_in_the_next(nats_server, tmp_path, monkeypatch):
    """A first snapshot whose child is slow (at the lowest priority on a busy machine, it may
    take until every entry is in): the entries applied meanwhile are not left out; the next
    snapshot is taken when it ends, as of the last of them."""
    real, calls, all_in = snapshots_mod._wait_and_read, [], threading.Event()

    def starved_first(pid: int, path: str) -> bytes:
        if not calls:
            all_in.wait(30)
        calls.append(pid)
        return real(pid, path)

    monkeypatch.setattr(snapshots_mod, "_wait_and_read", starved_first)
    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, snapshot_every=20, snapshot_dir=str(tmp_path)) as core:
            await asks_one_per_entry(api, 60)
            applied = core.core.last_seq
            assert core.snapshots.taken == 0  # the first is still being made
            all_in.set()
            await _two_taken_and_idle(core)
            stored = await core.store.get(SNAPSHOT_OBJECT)
            assert load_snapshot(stored.data, load_yaml).last_seq >= applied


async def test_a_stored_snapshot_that_cannot_be_read_is_passed_over_and_the_log_replayed(nats_server, tmp_path):
    """A truncated or garbled snapshot object stopped every core from starting (leader,
    standby, restart), with a traceback, though the input log held every entry: the core
    says so and replays the log from its start instead."""
    from ykbus.bus.snapshots import CHUNK_BYTES, store_object
    from ykbus.bus.streams import snapshot_store

    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, snapshot_every=20) as core:
            await asks_one_per_entry(api, 30)
            live = core.core.dump()
        store = await snapshot_store(api.js, 1)
        good = (await store.get(SNAPSHOT_OBJECT)).data
        for bad in (good[: len(good) // 2], b"[1, 2, 3]"):
            await store_object(store, SNAPSHOT_OBJECT, bad, CHUNK_BYTES)
            async with running_core(nats_server.url, snapshot_every=1000) as again:
                assert again.core.dump()["rms"] == live["rms"]  # (a tick more: a takeover's fence)


async def test_a_snapshot_replaced_while_it_is_read_is_read_again_not_waited_for(nats_server):
    """A core starting while the leader stores a new snapshot read chunks the new one
    replaced: nats-py's get waits forever there, and the start gave up after 60 s (a standby
    or reader started at that moment was silent, then gone). A try that outlasts a slow read
    of its size reads the new snapshot."""
    import os
    import time

    from ykbus.bus.snapshots import CHUNK_BYTES, fetch_snapshot, store_object
    from ykbus.bus.streams import snapshot_store

    async with rm_client(nats_server.url) as reader, rm_client(nats_server.url) as writer:
        versions = [os.urandom(16 * 2**20) for _ in range(3)]
        mine, theirs = await snapshot_store(reader.js, 1), await snapshot_store(writer.js, 1)
        await store_object(theirs, SNAPSHOT_OBJECT, versions[0], CHUNK_BYTES)

        async def leader_stores_more() -> None:
            for data in versions[1:]:
                await anyio.sleep(0.05)
                await store_object(theirs, SNAPSHOT_OBJECT, data, CHUNK_BYTES)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(leader_stores_more)
            with anyio.fail_after(30):
                fetched = await fetch_snapshot(mine, SNAPSHOT_OBJECT, None)
        assert fetched is not None and fetched[0] in versions and fetched[1] == "object store"
        assert time.monotonic() - started < 30


async def test_the_input_log_is_trimmed_below_each_snapshot_kept_and_a_restart_resumes(nats_server, tmp_path):
    """A soak of `ykbus up` grew the input log 6.6 MB a minute, for ever: nothing trimmed it,
    and `--in-max-bytes` cuts blind, above the last snapshot too, which a restart then cannot
    pass. `--in-keep N`: after each snapshot stored, the entries but the last N before it go;
    a restart loads the snapshot and reads on; `ykbus record` says where the log now starts."""
    from ykbus.bus.streams import StreamLimits
    from ykbus.bus.subjects import IN_STREAM

    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, snapshot_every=20, limits=StreamLimits(in_keep=5)) as core:
            rec, client = await asks_one_per_entry(api, 70)
            await _two_taken_and_idle(core)
            snap = load_snapshot((await core.store.get(SNAPSHOT_OBJECT)).data, load_yaml)
            info = await api.js.stream_info(IN_STREAM)
            assert info.state.first_seq == snap.last_seq - 5 + 1  # the 5 before it kept, and what came after
            assert info.state.last_seq >= core.core.last_seq
            live = core.core.dump()
        async with running_core(nats_server.url, snapshot_every=20) as again:  # from the snapshot, reading on
            assert again.core.dump()["rms"] == live["rms"]
            await client.add_asks([ask("later", "a1", vcore=10, memory=10)])
            await rec.wait_for(lambda: len(rec.allocations) == 71)
    recorded = await anyio.run_process([sys.executable, "-m", "ykbus.cli", "record", "--nats", nats_server.url,
                                        "--out", str(tmp_path / "log.jsonl")], check=False)
    assert recorded.returncode == 0 and "the stream no longer holds the" in recorded.stderr.decode()
