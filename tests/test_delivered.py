"""bus/delivered.py reads nats-py's delivery queue: checked here against the installed
nats-py on a real nats-server, so an upgrade that changes it fails here first."""

from __future__ import annotations

import anyio
import nats
import pytest

from ykbus.bus.delivered import Delivered
from ykbus.bus.server import NatsServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(tmp_path):
    srv = NatsServer(store_dir=str(tmp_path / "nats")).start()
    yield srv
    srv.cleanup()


async def test_what_a_subscription_received_is_taken_in_order_and_its_count_kept(server):
    nc = await nats.connect(server.url)
    try:
        sub = await nc.subscribe("t.>")
        delivered = Delivered(sub)
        assert not delivered
        for i in range(5):
            await nc.publish(f"t.{i}", b"x" * (i + 1))
        with anyio.fail_after(5):
            first = await delivered.take()  # waits for the first
            while len(delivered) < 4:
                await anyio.sleep(0.01)
        assert first.subject == "t.0" and first.data == b"x"
        assert sub.pending_msgs == 4 and sub.pending_bytes == 2 + 3 + 4 + 5  # nats-py's own counts follow
        rest = list(delivered.drain())
        assert [m.subject for m in rest] == ["t.1", "t.2", "t.3", "t.4"]
        assert not delivered and sub.pending_msgs == 0 and sub.pending_bytes == 0
        await nc.publish("t.last", b"y")
        with anyio.fail_after(5):
            while not delivered:
                await anyio.sleep(0.01)
        assert delivered.take_nowait().subject == "t.last"
        await sub.unsubscribe()
        await nc.drain()  # waits for every message taken to be done: hangs if the queue's count is off
    finally:
        if not nc.is_closed:
            await nc.close()
