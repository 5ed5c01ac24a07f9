"""The bus fuzzer against a real nats-server and a real `ykbus core` process (see
tests/fuzz/busfuzz.py): thousands of malformed messages, then a valid flow still schedules
end to end and every malformed message has its answer on YK_OUT."""

from __future__ import annotations

import pytest

from tests.fuzz.busfuzz import CoreUnderTest, bus_fuzz
from tests.fuzz.profile import BUS_HUGE, BUS_MESSAGES
from ykbus.bus.server import NatsServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def server_1mib(tmp_path):
    """nats-server with its default max payload (1 MiB): what the core splits outputs for."""
    server = NatsServer(store_dir=str(tmp_path / "nats"), max_payload=1 << 20).start()
    yield server
    server.cleanup()


async def test_malformed_messages_neither_stop_the_core_nor_go_unanswered(server_1mib):
    core = CoreUnderTest(server_1mib.url)
    try:
        await core.wait_started()
        report = await bus_fuzz(server_1mib.url, core, BUS_MESSAGES, BUS_HUGE, seed=20240610,
                                timeout=max(60.0, BUS_MESSAGES / 50))
    finally:
        core.stop()
    print(report.figures())
    assert report.published >= BUS_MESSAGES // 2 and report.malformed > BUS_MESSAGES // 3, report.figures()
    assert not report.failures(), "\n".join([report.figures(), *report.failures()])
