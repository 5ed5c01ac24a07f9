"""Gangs over NATS, as an RM speaks them: placeholders placed whole, the two-step
replacement (the core's PLACEHOLDER_REPLACED release, the RM's confirmation), and the real
allocation reported on the placeholder's node, through a real nats-server and `ykbus core`."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import node, res, start_rm
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio


def member(key: str, app_id: str, vcore: int, placeholder: bool, n: int = 1) -> m.AllocationAsk:
    return m.AllocationAsk(allocationKey=key, applicationID=app_id, resourceAsk=res(vcore=vcore), maxAllocations=n,
                           taskGroupName="workers", placeholder=placeholder)


async def test_a_gang_is_placed_whole_and_replaced_in_two_steps_over_nats(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=2500), node("n2", vcore=1200)])
        gang = m.AddApplicationRequest(applicationID="g", queueName="root.prod", partitionName="default",
                                       ugi=m.UserGroupInformation(user="u"), placeholderAsk=res(vcore=4000))
        await client.add_applications([gang])
        await api.update_allocation(m.AllocationRequest(asks=[member("p", "g", 1000, True, n=4)], rmID="k8s"))
        await rec.wait_for(lambda: any(s.allocationKey == "p" for s in rec.states))
        assert rec.allocations == []  # three of four would fit: none is placed
        await api.update_node(m.NodeRequest(nodes=[node("n3", vcore=1000)], rmID="k8s"))
        await rec.wait_for(lambda: len(rec.allocations) == 4)
        assert all(a.placeholder for a in rec.allocations)
        placed = {a.UUID: a.nodeID for a in rec.allocations}

        await api.update_allocation(m.AllocationRequest(asks=[member("r", "g", 800, False)], rmID="k8s"))
        await rec.wait_for(lambda: any(r.terminationType is m.TerminationType.PLACEHOLDER_REPLACED
                                       for r in rec.released))
        [asked] = [r for r in rec.released if r.terminationType is m.TerminationType.PLACEHOLDER_REPLACED]
        assert asked.UUID in placed
        await api.update_allocation(m.AllocationRequest(releases=m.AllocationReleasesRequest(allocationsToRelease=[
            m.AllocationRelease(partitionName="default", applicationID="g", UUID=asked.UUID,
                                terminationType=m.TerminationType.PLACEHOLDER_REPLACED)]), rmID="k8s"))
        await rec.wait_for(lambda: any(a.allocationKey == "r" for a in rec.allocations))
        [real] = [a for a in rec.allocations if a.allocationKey == "r"]
        assert real.nodeID == placed[asked.UUID] and not real.placeholder
