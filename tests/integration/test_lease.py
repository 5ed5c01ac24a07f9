"""The leader lease (bus/leadership.py) on a real nats-server, with clocks the test moves:
one leader; a standby takes over only after the holder's TTL without a renewal; a leader
stops counting its lease valid before a standby can take over; a clean release hands over
at once."""

from __future__ import annotations

from contextlib import asynccontextmanager

import nats
import pytest

from ykbus.bus.leadership import Lease, identity, lease_margin, lease_store

pytestmark = pytest.mark.anyio

TTL = 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def candidates(url: str, n: int, clock: Clock):
    """`n` leases of one bucket, and the connection (closed at the end)."""
    nc = await nats.connect(url)
    try:
        kv = await lease_store(nc.jetstream(), TTL)
        yield nc, [Lease(kv, identity(f"core-{i}", TTL), TTL, clock=clock) for i in range(n)]
    finally:
        await nc.close()


async def test_one_leader_and_a_standby_takes_over_only_after_the_ttl(nats_server):
    clock = Clock()
    async with candidates(nats_server.url, 2, clock) as (nc, (a, b)):
        assert await a.campaign_once() and a.leading and a.role == "leader"
        assert not await b.campaign_once() and b.role == "standby" and b.leader["id"] == "core-0"

        clock.now += 0.9 * TTL  # nearly a TTL, but the leader renews: the standby starts counting again
        assert await a.renew() and a.leading
        assert not await b.campaign_once()
        clock.now += 0.9 * TTL
        assert not await b.campaign_once(), "took over less than a TTL after a renewal it saw"

        clock.now += TTL  # no renewal for more than a TTL since the standby saw the last one
        assert not a.leading, "the old leader must stop before a standby can take over"
        assert await b.campaign_once() and b.leading and b.term > a.term
        assert not await a.renew() and a.lost and not a.leading  # the late renewal loses


async def test_a_leader_stops_counting_its_lease_before_a_standby_may_start(nats_server):
    clock = Clock()
    async with candidates(nats_server.url, 2, clock) as (nc, (a, b)):
        assert await a.campaign_once()
        assert not await b.campaign_once()  # b sees the revision no sooner than a wrote it
        clock.now += TTL - lease_margin(TTL)
        assert not a.leading  # a has stopped ...
        assert not await b.campaign_once()  # ... and b may not start yet
        clock.now += lease_margin(TTL)
        assert await b.campaign_once()


async def test_a_clean_release_hands_over_at_once(nats_server):
    clock = Clock()
    async with candidates(nats_server.url, 3, clock) as (nc, (a, b, c)):
        assert await a.campaign_once()
        assert not await b.campaign_once()
        await a.release()
        assert not a.leading
        assert await b.campaign_once(), "no wait for the TTL after a release"
        assert not await c.campaign_once() and c.leader["id"] == "core-1"


async def test_a_renewal_whose_answer_was_lost_does_not_depose_its_leader(nats_server):
    clock = Clock()
    async with candidates(nats_server.url, 2, clock) as (nc, (a, b)):
        assert await a.campaign_once()
        kv = await nc.jetstream().key_value("YK_LEASE")
        entry = await kv.get("leader")
        await kv.update("leader", entry.value, last=entry.revision)  # a's renewal, its answer lost
        assert await a.renew() and not a.lost and a.leading
        assert not await b.campaign_once()


async def test_a_lease_bucket_made_with_a_short_ttl_is_lengthened(nats_server):
    from nats.js import api

    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.create_key_value(api.KeyValueConfig(bucket="YK_LEASE", history=1, ttl=3))  # an older core's
        await lease_store(js, 8.0)  # a lease of 8 s would outlive a 3 s bucket TTL
        assert (await js.stream_info("KV_YK_LEASE")).config.max_age >= 8 * 3
    finally:
        await nc.close()


async def test_a_process_still_replaying_the_log_takes_no_lease_from_a_warm_standby(nats_server):
    """A candidate not yet caught up with the log (`ready()` false) takes neither a free lease
    nor a dead leader's; a warm standby does, and the cold one may once it is through."""
    clock = Clock()
    caught_up = {"cold": False}
    async with candidates(nats_server.url, 2, clock) as (nc, (a, warm)):
        kv = await lease_store(nc.jetstream(), TTL)
        cold = Lease(kv, identity("cold", TTL), TTL, clock=clock, ready=lambda: caught_up["cold"])
        assert not await cold.campaign_once() and not cold.term  # the key is free, but it is not ready
        assert await a.campaign_once()
        assert not await warm.campaign_once() and not await cold.campaign_once()  # both see a's revision
        clock.now += 2 * TTL  # a died: its lease is stale for both
        assert not await cold.campaign_once(), "a process still replaying took the lease"
        assert await warm.campaign_once() and warm.leading
        await warm.release()
        caught_up["cold"] = True
        assert await cold.campaign_once() and cold.leading  # through the tail, it may lead
