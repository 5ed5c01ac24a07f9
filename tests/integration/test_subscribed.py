"""`subscribed(nc)`: once it returns, a request from another connection finds the
subscriptions `nc` made (nats-py's `flush()` alone can answer before the server has read
them: the started-core test got "no responders" in CI)."""

from __future__ import annotations

import nats
import pytest

from ykbus.bus.local import subscribed

pytestmark = pytest.mark.anyio


async def test_a_request_right_after_subscribed_finds_its_responder(nats_server):
    responder = await nats.connect(nats_server.url)
    requester = await nats.connect(nats_server.url)
    try:
        async def echo(msg):
            await msg.respond(msg.data)

        for i in range(300):  # a fresh subject each time: the race is at every new subscription
            sub = await responder.subscribe(f"probe.{i}", queue="q", cb=echo)
            await subscribed(responder)
            reply = await requester.request(f"probe.{i}", str(i).encode(), timeout=5)
            assert reply.data == str(i).encode()
            await sub.unsubscribe()
    finally:
        await requester.close()
        await responder.close()
