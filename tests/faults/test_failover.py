"""Hot standby (issue 24): several core processes, one leader; kill -9 or pause the leader
under load, and count what reached the output stream: nothing lost, nothing twice, every ask
allocated once, the same decisions as a replay of the log."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request

import anyio
import nats
import nats.js.errors
import pytest

from tests.faults.profile import LEADER_KILLS
from tests.faults.test_resilience import assert_outputs_are_the_replay, output_stream, stop_all, wait_until_applied
from tests.integration.conftest import CoreProcess, Recorder, rm_client
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus.server import free_port

pytestmark = pytest.mark.anyio

TTL = "1.0"


class Candidate(CoreProcess):
    """`ykbus core` with its own HTTP port, to ask this very process its role."""

    def __init__(self, url: str, *flags: str) -> None:
        self.port = free_port()
        super().__init__(url, "--lease-ttl", TTL, "--rm-pause", "600", "--api-port", str(self.port), *flags)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return r.read().decode()

    def health(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/health", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, urllib.error.URLError, ValueError):
            return None


async def leader_of(cores: list[Candidate], timeout: float = 20.0) -> Candidate:
    """The one process that says it leads, once every live process agrees who that is."""
    healths: list = []
    with anyio.move_on_after(timeout):
        while True:
            healths = [await anyio.to_thread.run_sync(c.health) for c in cores]
            leaders = [c for c, h in zip(cores, healths, strict=True) if h and h["role"] == "leader"]
            named = {(h["leader"] or {}).get("id") for h in healths if h}
            if len(leaders) == 1 and all(healths) and len(named) == 1:
                return leaders[0]
            await anyio.sleep(0.1)
    raise AssertionError(f"no agreed leader: {[(h or {}).get('role') for h in healths]}, "
                         f"{[((h or {}).get('leader') or {}).get('pid') for h in healths]}")


async def test_two_cores_elect_one_leader_and_the_standby_serves_reads(nats_server):
    cores = [Candidate(nats_server.url).start() for _ in range(2)]
    try:
        leader = await leader_of(cores)
        standby = next(c for c in cores if c is not leader)
        async with rm_client(nats_server.url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=4000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask(f"p{i}", "a1", vcore=100) for i in range(5)])
            await rec.wait_for(lambda: len(rec.allocations) == 5)
        last = await wait_until_applied(nats_server.url)
        with anyio.fail_after(10):  # the standby is warm: it applied the same log
            while (standby.health() or {}).get("lastSeq", 0) < last:
                await anyio.sleep(0.05)
        s, lead = standby.health(), leader.health()
        assert s["role"] == "standby" and lead["role"] == "leader"
        assert s["leader"]["id"] == lead["leader"]["id"] and s["leader"]["pid"] == leader.proc.pid
        assert s["stats"]["allocations"] == lead["stats"]["allocations"] == 5
        assert s["stats"]["outputs"] == 0 < lead["stats"]["outputs"]  # only the leader publishes
        assert "ykbus_core_leader 0.0" in standby.metrics() and "ykbus_core_leader 1.0" in leader.metrics()
    finally:
        for c in cores:
            c.terminate()
    published = await output_stream(nats_server.url)
    assert len({i for _, _, i in published}) == len(published)


async def test_kill_9_the_leader_again_and_again_under_load(nats_server, tmp_path):
    """Three candidates; the leader is killed again and again (3 times; 10 in the long
    profile) while an RM streams asks (each killed process comes back as a new candidate).
    Zero lost, zero duplicated decisions."""
    url = nats_server.url
    cores = [Candidate(url, "--snapshot-every", "40").start() for _ in range(3)]
    kill_at = {20 + 25 * k for k in range(LEADER_KILLS)}
    kills, batches = [], 25 * LEADER_KILLS + 20
    try:
        await leader_of(cores)
        async with rm_client(url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node(f"n{i}", vcore=100_000) for i in range(20)])
            await client.add_applications([app(f"a{i}") for i in range(10)])
            for batch in range(batches):
                await client.add_asks([ask(f"p{batch}-{i}", f"a{i % 10}", vcore=100) for i in range(10)])
                await anyio.sleep(0.02)
                if batch in kill_at:
                    await rec.wait_for(lambda b=batch: len(rec.allocations) >= 10 * b - 50, timeout=30)
                    leader = await leader_of(cores)
                    kills.append(time.time_ns())
                    leader.kill()
                    cores[cores.index(leader)] = Candidate(url, "--snapshot-every", "40").start()
            await rec.wait_for(lambda: len(rec.allocations) >= 10 * batches, timeout=60)
            await wait_until_applied(url)
        await leader_of(cores)
    finally:
        stop_all(cores)
    await assert_outputs_are_the_replay(url, tmp_path)
    keys = sorted(a.allocationKey for a in rec.allocations)
    assert keys == sorted(f"p{b}-{i}" for b in range(batches) for i in range(10)), "an ask not allocated exactly once"
    assert len(kills) == LEADER_KILLS


async def test_a_paused_leader_is_deposed_and_publishes_nothing_twice(nats_server, tmp_path):
    """SIGSTOP the leader past its lease: a standby takes over; the old one, woken, finds its
    lease gone before it acts, and comes back as a standby."""
    url = nats_server.url
    cores = [Candidate(url).start() for _ in range(2)]
    try:
        leader = await leader_of(cores)
        async with rm_client(url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=100_000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask(f"before{i}", "a1", vcore=10) for i in range(20)])
            await rec.wait_for(lambda: len(rec.allocations) == 20)
            os.kill(leader.proc.pid, signal.SIGSTOP)
            await client.add_asks([ask(f"during{i}", "a1", vcore=10) for i in range(20)])
            await rec.wait_for(lambda: len(rec.allocations) == 40, timeout=20)  # the standby took over
            os.kill(leader.proc.pid, signal.SIGCONT)
            await client.add_asks([ask(f"after{i}", "a1", vcore=10) for i in range(20)])
            await rec.wait_for(lambda: len(rec.allocations) == 60, timeout=20)
            await wait_until_applied(url)
        new = await leader_of(cores)
        assert new is not leader
        with anyio.fail_after(20):  # the old one starts again as a standby and catches up
            while (leader.health() or {}).get("role") != "standby":
                await anyio.sleep(0.1)
    finally:
        stop_all(cores)
    await assert_outputs_are_the_replay(url, tmp_path)
    assert len({a.allocationKey for a in rec.allocations}) == len(rec.allocations) == 60



async def stored_snapshot_seq(url: str) -> int:
    from ykbus.bus.subjects import SNAPSHOT_BUCKET
    from ykbus.core.snapshot import load_snapshot

    nc = await nats.connect(url)
    try:
        store = await nc.jetstream().object_store(SNAPSHOT_BUCKET)
        try:
            return load_snapshot((await store.get("core")).data).last_seq
        except nats.js.errors.ObjectNotFoundError:
            return 0
    finally:
        await nc.close()


async def test_a_new_leader_stores_a_snapshot_at_once_when_none_is_recent(nats_server):
    """The leader stored no snapshot (its interval is long); the standby's is 25 entries. Once
    the standby takes over it stores one without waiting for 25 more entries, so a process
    started after the takeover replays the log from there."""
    first = Candidate(nats_server.url, "--snapshot-every", "1000000").start()
    await leader_of([first])
    standby = Candidate(nats_server.url, "--snapshot-every", "25").start()
    try:
        await leader_of([first, standby])
        async with rm_client(nats_server.url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=100_000)])
            await client.add_applications([app("a1")])
            for i in range(40):
                await client.add_asks([ask(f"p{i}", "a1", vcore=100)])
            await rec.wait_for(lambda: len(rec.allocations) == 40)
        last = await wait_until_applied(nats_server.url)
        assert await stored_snapshot_seq(nats_server.url) == 0
        first.kill()
        assert await leader_of([standby]) is standby
        with anyio.fail_after(20):
            while await stored_snapshot_seq(nats_server.url) < last:
                await anyio.sleep(0.1)
    finally:
        standby.terminate()


async def test_a_standby_far_ahead_of_its_leader_keeps_a_bounded_number_of_outputs(nats_server):
    """The leader is paused (its lease long enough not to lapse): the standby applies the
    log and keeps its outputs until it holds its limit, then waits; once the leader stores
    them it goes on to the end."""
    from tests.integration.conftest import running_core

    leader = Candidate(nats_server.url, "--lease-ttl", "60").start()
    try:
        await leader_of([leader])
        async with running_core(nats_server.url, lease_ttl_s=60, heartbeat_pause_s=600) as standby:
            kept = standby.leadership.unpublished
            kept.limit = 20
            async with rm_client(nats_server.url) as rm:
                rec = Recorder()
                client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=100_000)])
                await client.add_applications([app("a1")])
                last = await wait_until_applied(nats_server.url)
                os.kill(leader.proc.pid, signal.SIGSTOP)
                try:
                    for i in range(60):  # one ask a message: an entry and an output each
                        await client.add_asks([ask(f"p{i}", "a1", vcore=100)])
                    most = 0
                    with anyio.move_on_after(3):
                        while True:
                            most = max(most, len(kept))
                            await anyio.sleep(0.01)
                    assert kept.full and 20 <= most <= 21 and standby.core.last_seq < last + 60
                finally:
                    os.kill(leader.proc.pid, signal.SIGCONT)
                await rec.wait_for(lambda: len(rec.allocations) == 60)
            with anyio.fail_after(20):  # the leader stored them: the standby goes on to the end
                while standby.core.last_seq < last + 60:
                    await anyio.sleep(0.05)
            assert standby.leadership.role == "standby" and len(kept) <= 20
    finally:
        leader.terminate()


async def lease_held(url: str) -> bool:
    from ykbus.bus.subjects import LEASE_BUCKET, LEASE_KEY

    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(LEASE_BUCKET)
        try:
            await kv.get(LEASE_KEY)
            return True
        except nats.js.errors.KeyNotFoundError:
            return False
    finally:
        await nc.close()


async def test_a_sigterm_right_after_a_stall_is_still_a_clean_stop(nats_server):
    """Regression (an outside review): a leader stalled past its lease (a long GC, a VM
    paused: SIGSTOP here) and stopped with SIGTERM before its next renewal skipped the final
    snapshot and left the lease to expire, as after kill -9, while it logged a clean stop: the
    next core waited out the TTL and replayed the log from an older snapshot. It renews
    first, sends what it kept back, stores the final snapshot and frees the lease."""
    core = Candidate(nats_server.url, "--snapshot-every", "1000000").start()
    await leader_of([core])
    async with rm_client(nats_server.url) as rm:
        rec = Recorder()
        client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=100_000)])
        await client.add_applications([app("a1")])
        await client.add_asks([ask(f"p{i}", "a1", vcore=10) for i in range(20)])
        await rec.wait_for(lambda: len(rec.allocations) == 20)
    last = await wait_until_applied(nats_server.url)
    os.kill(core.proc.pid, signal.SIGSTOP)
    await anyio.sleep(1.5 * float(TTL))  # past the lease
    os.kill(core.proc.pid, signal.SIGCONT)
    assert await anyio.to_thread.run_sync(core.terminate) == 0
    assert await stored_snapshot_seq(nats_server.url) == last  # the final snapshot
    assert not await lease_held(nats_server.url)  # freed: the next core starts at once
