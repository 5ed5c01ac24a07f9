"""The last line of defence on the bus: an entry that raises (a bug) is answered, recorded
in the log as failed, and never applied again, by this core or a restarted one."""

from __future__ import annotations

import nats
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus.subjects import IN_STREAM, SNAPSHOT_BUCKET
from ykbus.core import intake
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio


async def test_an_entry_that_raises_is_answered_recorded_and_not_met_again(nats_server, monkeypatch):
    calls = []

    def fault(application_id: str) -> None:  # the bug: added to its partition, then it raises
        calls.append(application_id)
        if application_id == "boom":
            raise RuntimeError("a bug in add_app")

    monkeypatch.setattr(intake, "APP_ADDED_FAULT", fault)
    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url) as service:
            rec = Recorder()
            client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000)])
            await client.add_applications([app("boom")])
            await rec.wait_for(lambda: any("was not applied: internal error RuntimeError" in e.message
                                           for e in rec.events))
            await client.add_applications([app("a1")])
            await client.add_asks([ask("pod", "a1", vcore=1000)])
            await rec.wait_for(lambda: rec.allocations)  # the core goes on
            assert service.read("health", {})["stats"]["failedEntries"] == 1
            assert "boom" not in service.core.dump()["rms"]["k8s"]["partitions"]["default"]["applications"]
        # the failure is in the log, as an entry of the core service
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        record = await js.get_last_msg(IN_STREAM, "yk.v1.in._core.failed")
        assert b"RuntimeError: a bug in add_app" in record.data
        # a restart that replays the whole log (no snapshot) does not meet the crash again
        await (await js.object_store(SNAPSHOT_BUCKET)).delete("core")
        await nc.close()
        calls.clear()
        async with running_core(nats_server.url) as again, rm_client(nats_server.url) as api2:
            rec2 = Recorder()
            await api2.attach("k8s", rec2)
            await api2.update_allocation(m.AllocationRequest(asks=[ask("pod2", "a1", vcore=1000)], rmID="k8s"))
            await rec2.wait_for(lambda: any(a.allocationKey == "pod2" for a in rec2.allocations))
            assert again.core.last_seq > record.seq
            assert "boom" not in calls
            assert again.read("health", {})["stats"]["failedEntries"] == 0
            apps = again.core.dump()["rms"]["k8s"]["partitions"]["default"]["applications"]
            assert set(apps) == {"a1"}
