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
        listed = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "ykbus.cli", "shards", "list", "--nats", nats_server.url],
            capture_output=True, text=True, timeout=60))
        assert listed.returncode == 0 and listed.stdout == "rm-a\ts2\n"
        assert "ykbus shards: leading now: default; no leader: s2" in listed.stderr  # which shards lead, said


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


async def shard_s9_leads_until(js, leases, proc: subprocess.Popen, holder: bytes) -> None:
    """Shard s9's leader, as this test speaks the contract: its lease created and renewed,
    its tick appended fenced by its term; until `proc` exits."""
    rev = await leases.create(lease_key("s9"), holder)
    async with anyio.create_task_group() as tg:
        async def renew() -> None:
            nonlocal rev
            while True:
                await anyio.sleep(0.2)
                rev = await leases.update(lease_key("s9"), holder, last=rev)
        tg.start_soon(renew)
        await js.publish("yk.v1.in._core.tick.s9", b'{"shard": "s9"}', headers={"Yk-Lease": str(rev)})
        with anyio.fail_after(30):
            while proc.poll() is None:
                await anyio.sleep(0.1)
        tg.cancel_scope.cancel()


def core(url: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ykbus.cli", "core", "--nats", url, "--api-port", "0", *flags],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "YKBUS_PURE_PYTHON": "1"})


async def test_an_unsharded_core_and_shards_refuse_to_run_side_by_side(nats_server):
    """Regression: an unsharded core started beside shards took over and published every
    allocation a second time, under its own ids. Judged by the leases, as a standby judges
    one: a core refuses to start while one of the other kind leads, and stops when one of
    the other kind begins beside it; a shard run once by mistake, long stopped, stops nothing."""
    url = nats_server.url
    async with running_core(url, shard="default", tick_interval_s=0.2) as shard:
        with anyio.fail_after(10):
            while not shard.core.last_seq:  # the shard's first tick, on `_core.tick.default`
                await anyio.sleep(0.05)
        refused = await anyio.to_thread.run_sync(core, url)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "core shard 'default' leads on these streams" in refused.stderr
    assert "run `ykbus core --shard NAME`" in refused.stderr
    # the shard stopped: its ticks in the log stop nothing; and when a shard's leader begins beside a
    # running unsharded core (both started at once, say), the core stops at that leader's first tick.
    # The shard's leader here is this test, speaking the contract: its lease renewed, its tick fenced.
    unsharded = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "core", "--nats", url, "--api-port", "0"],
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "YKBUS_PURE_PYTHON": "1"})
    nc = await nats.connect(url)
    try:
        await anyio.sleep(4)
        assert unsharded.poll() is None  # it runs: the old ticks were judged, no shard leads
        js = nc.jetstream()
        leases = await lease_store(js, 1.0)
        await shard_s9_leads_until(js, leases, unsharded, b'{"id": "test", "ttl": 1.0}')
        assert unsharded.returncode == 2 and "core shard 's9' leads on these streams" in unsharded.stderr.read()
        await leases.delete(lease_key("s9"))
    finally:
        await nc.close()
        unsharded.kill() if unsharded.poll() is None else None
    # and a shard refuses to start beside an unsharded core that leads
    async with running_core(url):
        beside = await anyio.to_thread.run_sync(core, url, "--shard", "s3")
    assert beside.returncode == 2 and "an unsharded core leads on these streams" in beside.stderr


async def test_a_core_of_another_prefix_leaves_the_streams_as_they_are(nats_server):
    """Regression: a core of another `--prefix` on the same server took the streams (their
    names are fixed) and the running deployment's RMs got no answer."""
    async with running_core(nats_server.url):
        pass
    for prefix, theirs in (("yk.t2", "yk.v1.in.>"), ("yk", "yk.v1.in.>")):  # `yk`: a prefix of the prefix too
        other = await anyio.to_thread.run_sync(core, nats_server.url, "--shard", "default", "--prefix", prefix)
        assert other.returncode == 2, other.stderr[-2000:]
        assert f"stream YK_IN on this NATS server takes {theirs}, not {prefix}.*" in other.stderr
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


def test_queue_files_given_to_a_shard_other_than_default_are_said_to_change_nothing(nats_server, tmp_path):
    """Regression (a review): `--queues` on shard s2 was ignored in silence (the default
    shard's leader appends the queue files)."""
    queues = tmp_path / "q.yaml"
    queues.write_text("partitions: [{name: default, queues: [{name: root, submitacl: '*'}]}]\n")
    proc = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "core", "--nats", nats_server.url, "--api-port", "0",
                             "--shard", "s2", "--queues", str(queues)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "YKBUS_PURE_PYTHON": "1"})
    try:
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            if "queue files are read by the default shard's leader only" in line or time.monotonic() > deadline:
                break
        assert "--queues here changes nothing" in line
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


async def test_a_shard_begun_again_beside_an_unsharded_core_stops_it(nats_server):
    """Regression: the guard remembered a shard's lease key it had judged not leading (its old
    ticks, replayed), so when a leader of that same shard began again beside the running
    unsharded core, its ticks were not judged, and both published every decision. Judged
    once per term of that shard's leader, not once per shard."""
    url = nats_server.url
    async with running_core(url, shard="s9", tick_interval_s=0.2) as shard:
        with anyio.fail_after(10):
            while not shard.core.last_seq:  # the shard's first tick, on `_core.tick.s9`
                await anyio.sleep(0.05)
    nc = await nats.connect(url)
    js = nc.jetstream()
    leases = await lease_store(js, 1.0)
    await leases.delete(lease_key("s9"))  # it stopped: its lease is gone
    unsharded = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "core", "--nats", url, "--api-port", "0"],
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "YKBUS_PURE_PYTHON": "1"})
    try:
        await anyio.sleep(4)
        assert unsharded.poll() is None  # the shard's old ticks judged: no shard leads
        await shard_s9_leads_until(js, leases, unsharded, b'{"id": "again", "ttl": 1.0}')  # shard s9 begins again
        assert unsharded.returncode == 2 and "core shard 's9' leads on these streams" in unsharded.stderr.read()
    finally:
        await nc.close()
        unsharded.kill() if unsharded.poll() is None else None


async def test_shards_against_an_unsharded_core_says_it_is_not_sharded(nats_server):
    """Regression (a review): `ykbus shards list` beside one unsharded core (`ykbus up`) said
    "leading now: none; no leader: default" while that core led; an assignment there was
    taken in silence."""
    async with running_core(nats_server.url):
        said = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "ykbus.cli", "shards", "assign", "k8s", "s2", "--nats", nats_server.url],
            capture_output=True, text=True, timeout=60))
    assert said.returncode == 0 and said.stdout == "k8s\ts2\n"
    assert said.stderr == ("ykbus shards: not sharded: an unsharded core leads on this server and serves every RM; "
                           "the assignments take effect once core shards replace it (docs/sharding.md)\n")
