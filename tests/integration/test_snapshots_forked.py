"""Snapshots made off the writer's path by a forked child (issue 24, bus/snapshots.py): they
are stored while the core goes on, each holds the state as of its entry, the guard's
checkpoint follows them, and a core restarted from one and the log's tail has the same
state as the core that ran on."""

from __future__ import annotations

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus.subjects import SNAPSHOT_OBJECT
from ykbus.core.snapshot import load_snapshot
from ykbus.yamlload import load_yaml

pytestmark = pytest.mark.anyio


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
            with anyio.fail_after(30):  # three taken, and none being stored now (a get during a put can wait forever)
                while core.snapshots.taken < 3 or not core.snapshots.idle:
                    await anyio.sleep(0.05)
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
