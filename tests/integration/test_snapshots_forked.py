"""Snapshots made off the writer's path by a forked child (issue 24, bus/snapshots.py): they
are stored while the core goes on, each holds the state as of its entry, the guard's
checkpoint follows them, and a core restarted from one and the log's tail has the same
state as the core that ran on."""

from __future__ import annotations

import threading

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


async def test_forked_snapshots_are_stored_as_the_core_goes_on_and_a_restart_resumes_from_them(nats_server, tmp_path):
    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, snapshot_every=20, snapshot_dir=str(tmp_path)) as core:
            assert core.snapshots.fork
            rec = Recorder()
            client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=1_000_000, memory=10**9)])
            await client.add_applications([app("a1")])
            for i in range(120):  # one ask per message: 120 entries, a snapshot due every 20
                await client.add_asks([ask(f"p{i}", "a1", vcore=10, memory=10)])
            await rec.wait_for(lambda: len(rec.allocations) == 120)
            # two at least: one at the 20th entry, and one for the entries applied while it was
            # made (more if it was quick; on a busy machine its child, at the lowest priority,
            # may take until every entry is in)
            await _two_taken_and_idle(core)
            # one per 20 entries at most, and one more for each that failed (it is tried again, sooner)
            assert core.snapshots.taken <= core.core.last_seq // 20 + core.snapshots.failed, (
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
            rec = Recorder()
            client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=1_000_000, memory=10**9)])
            await client.add_applications([app("a1")])
            for i in range(60):
                await client.add_asks([ask(f"p{i}", "a1", vcore=10, memory=10)])
            await rec.wait_for(lambda: len(rec.allocations) == 60)
            applied = core.core.last_seq
            assert core.snapshots.taken == 0  # the first is still being made
            all_in.set()
            await _two_taken_and_idle(core)
            stored = await core.store.get(SNAPSHOT_OBJECT)
            assert load_snapshot(stored.data, load_yaml).last_seq >= applied
