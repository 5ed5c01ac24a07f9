"""`ykbus shards`, and the read commands against sharded cores, as an operator meets them,
against a real nats-server."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_shards_list_without_an_assignment_says_the_default_shard_serves_every_rm(nats_server):
    """An outside review: `ykbus shards list` with no RM assigned printed nothing, exit 0."""
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "shards", "list", "--nats", nats_server.url],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == ""
    assert "no RM is assigned to a shard: every RM is served by the default one" in run.stderr


@pytest.mark.anyio
async def test_the_read_commands_ask_a_shards_cores_when_told_which(nats_server):
    """An outside review: `ykbus apps` (and queues, nodes, explain) asked on yk.v1.api.<verb>
    only, where sharded cores do not answer: they said no core ran. `--shard NAME` asks
    that shard's cores (yk.v1.api.<shard>.<verb>)."""
    import anyio

    from tests.integration.conftest import Recorder, rm_client, running_core
    from tests.integration.test_bus import app, node, start_rm

    async with running_core(nats_server.url, shard="default"), rm_client(nats_server.url) as api:
        client = await start_rm(api, "rm-1", Recorder(), nodes=[node("n1", vcore=8000)])
        await client.add_applications([app("a1")])

        def ykbus(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "ykbus.cli", *args, "--nats", nats_server.url],
                                  capture_output=True, text=True, timeout=60)

        unsharded = await anyio.to_thread.run_sync(ykbus, "apps")
        assert unsharded.returncode == 2 and "no core answers there" in unsharded.stderr
        with anyio.fail_after(30):
            while "a1" not in (run := await anyio.to_thread.run_sync(ykbus, "apps", "--shard", "default")).stdout:
                await anyio.sleep(0.2)
        assert run.returncode == 0 and "rm-1" in run.stdout
        bad = await anyio.to_thread.run_sync(ykbus, "apps", "--shard", "a.b")
        assert bad.returncode == 2 and "--shard" in bad.stderr
