"""What an operator of core shards gets wrong, and what a long-running shard must not wear out
(docs/sharding.md). Each found by an outside review of the sharding walkthrough: a shard's
leader reading the assignments left a consumer on the server at every look, until none could
be read; a killed shard's lease key counted as a leader for 10 minutes; `ykbus shards`
against no server hung; an unsharded core beside shards made every allocation twice; a
deployment of another `--prefix` took the first one's streams."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import anyio
import nats
import pytest

from tests.integration.conftest import running_core
from ykbus.bus.leadership import lease_store
from ykbus.bus.sharding import ShardLeaders, assignments, shards_bucket
from ykbus.bus.subjects import SHARDS_BUCKET, lease_key

pytestmark = pytest.mark.anyio


async def test_following_the_assignments_leaves_no_consumer_on_the_server(nats_server):
    """Regression: nats-py's `kv.keys()` made an ordered consumer the server keeps 5 minutes;
    a shard's leader looks every 0.5 s, and at the stream's 1,000 consumers (about 4 minutes)
    no assignment could be read and no RM moved."""
    async with running_core(nats_server.url, shard="default"):
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        kv = await shards_bucket(js)
        await kv.put("rm-a", b"s2")
        await kv.put("rm-b", b"s3")
        await kv.delete("rm-b")
        await anyio.sleep(2.6)  # five looks of the leader's
        for _ in range(20):
            assert await assignments(js, kv) == {"rm-a": "s2"}
        assert (await js.stream_info(f"KV_{SHARDS_BUCKET}")).state.consumer_count == 0
        await nc.close()


async def test_a_killed_shards_lease_key_is_no_leader(nats_server):
    """Regression: `leader-<shard>` stays until the bucket's TTL (10 minutes) after its holder
    is killed, and counted as a leader: an RM assigned there was moved to no one."""
    nc = await nats.connect(nats_server.url)
    leases = await lease_store(nc.jetstream(), 1.0)
    rev = await leases.create(lease_key("s3"), b'{"id": "gone", "ttl": 0.3}')
    watch = ShardLeaders(leases)
    assert await watch.leads("s3") is None  # first seen: not judged yet
    renewed = time.monotonic()
    await leases.update(lease_key("s3"), b'{"id": "live", "ttl": 0.3}', last=rev)
    assert await watch.leads("s3") is True  # a renewal seen
    assert await ShardLeaders(leases).judge("s3") is False  # no renewal since: it stopped
    assert time.monotonic() - renewed < 2
    assert await watch.leads("nowhere") is False
    await nc.close()


def test_shards_against_no_server_says_so_at_once():
    """Regression: `ykbus shards list` at an address nobody answers hung, printing tracebacks."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ykbus.cli", "shards", "list", "--nats", "nats://127.0.0.1:1"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and time.monotonic() - t0 < 10
    assert done.stderr.startswith("ykbus shards: cannot reach NATS at nats://127.0.0.1:1") and "Traceback" not in done.stderr


async def test_an_unsharded_core_refuses_the_log_of_shards(nats_server, tmp_path):
    """Regression: an unsharded core started beside shards took over and published every
    allocation a second time, under its own ids. It refuses that log now (and a core of
    another prefix refuses the streams of this one, which it used to take away)."""
    async with running_core(nats_server.url, shard="default", tick_interval_s=0.2) as shard:
        with anyio.fail_after(10):
            while not shard.core.last_seq:  # the shard's first tick, on `_core.tick.default`
                await anyio.sleep(0.05)
    env = {**os.environ, "YKBUS_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-m", "ykbus.cli", "core", "--nats", nats_server.url, "--api-port", "0"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "the input log has entries of core shards (yk.v1.in._core." in done.stderr
    assert "run `ykbus core --shard NAME`" in done.stderr
    other = subprocess.run([sys.executable, "-m", "ykbus.cli", "core", "--nats", nats_server.url, "--api-port", "0",
                            "--shard", "default", "--prefix", "yk.t2"], capture_output=True, text=True, timeout=60, env=env)
    assert other.returncode == 2 and "another ykbus deployment (another --prefix) uses it" in other.stderr
    nc = await nats.connect(nats_server.url)
    assert (await nc.jetstream().stream_info("YK_IN")).config.subjects == ["yk.v1.in.>"]  # left as it was
    await nc.close()


async def test_a_registration_no_core_answers_says_what_to_look_for(nats_server):
    """Regression (a review): with core shards but none named `default`, an RM's registration
    ended in a bare TimeoutError after 30 s, and no process said why."""
    from tests.integration.conftest import Recorder, rm_client
    from ykbus.bus.client import NoCoreAnswered
    from ykbus.si import messages as m

    async with running_core(nats_server.url, shard="s2"), rm_client(nats_server.url) as api:
        with pytest.raises(NoCoreAnswered) as caught:
            await api.register_resource_manager(m.RegisterResourceManagerRequest(rmID="rm-x", policyGroup="queues"),
                                                Recorder(), timeout=3)
    assert "no core answered the registration of 'rm-x' within 3 s" in str(caught.value)
    assert "the shard `default` registers an RM no assignment names" in str(caught.value)
    assert isinstance(caught.value, TimeoutError)  # what callers caught before
