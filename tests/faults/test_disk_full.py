"""A full disk where the core keeps its snapshot copy: snapshots fail and are tried again,
scheduling goes on, nothing is lost, and once there is room again a snapshot is written and
a restart resumes from it."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from tests.faults.test_resilience import assert_outputs_are_the_replay, wait_until_applied
from tests.integration.conftest import CoreProcess, Recorder, rm_client
from tests.integration.test_bus import app, ask, node, start_rm

pytestmark = pytest.mark.anyio


def log_lines(core: CoreProcess) -> list[dict]:
    return [json.loads(line) for line in core.stderr().splitlines() if line.startswith("{")]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
async def test_a_full_snapshot_disk_stops_no_decision_and_is_survived(nats_server, tmp_path):
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    (snapshots / "core.snap.tmp").symlink_to("/dev/full")  # every write there: ENOSPC, as on a full disk
    flags = ("--snapshot-every", "5", "--snapshot-dir", str(snapshots), "--rm-pause", "600")
    core = CoreProcess(nats_server.url, *flags).start()
    async with rm_client(nats_server.url) as rm:
        rec = Recorder()
        client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=100_000)])
        await client.add_applications([app("a1")])
        for i in range(30):
            await client.add_asks([ask(f"full{i}", "a1", vcore=10)])
        await rec.wait_for(lambda: len(rec.allocations) == 30)  # scheduling went on
        await wait_until_applied(nats_server.url)
        with anyio.fail_after(30):  # a snapshot runs at the lowest priority: on a busy machine it comes late
            while not [x for x in log_lines(core) if x.get("msg", "").startswith("snapshot failed")]:
                await anyio.sleep(0.1)
        (snapshots / "core.snap.tmp").unlink()  # room again
        for i in range(10):
            await client.add_asks([ask(f"room{i}", "a1", vcore=10)])
        await rec.wait_for(lambda: len(rec.allocations) == 40)
        with anyio.fail_after(20):
            while not (snapshots / "core.snap").exists():
                await anyio.sleep(0.1)
        core.kill()
        core = CoreProcess(nats_server.url, *flags).start()
        await client.add_asks([ask("after", "a1", vcore=10)])
        await rec.wait_for(lambda: len(rec.allocations) == 41)
    core.terminate()
    lines = log_lines(core)
    loaded = [x for x in lines if x.get("msg") == "snapshot loaded"]
    assert loaded and loaded[0]["from"] == "local copy"  # the copy written once there was room
    await assert_outputs_are_the_replay(nats_server.url, tmp_path)
