"""Topology-aware gangs over NATS (issue 42), as an RM speaks them: nodes with rack
attributes, a gang required in one rack placed whole in the one it fits best, another that
no rack holds told why in its scheduling state, through a real nats-server and `ykbus core`."""

from __future__ import annotations

import pytest

from tests.core.test_topology_gangs import QUEUES
from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import res, start_rm
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio



def host(node_id: str, block: str, rack: str) -> m.NodeInfo:
    return m.NodeInfo(nodeID=node_id, action=m.ActionFromRM.CREATE, schedulableResource=res(gpu=4),
                      attributes={"ykbus.io/block": block, "ykbus.io/rack": rack})


def gang(app_id: str, members: int) -> tuple[m.AddApplicationRequest, m.AllocationAsk]:
    application = m.AddApplicationRequest(
        applicationID=app_id, queueName="root.jobs", partitionName="default", ugi=m.UserGroupInformation(user="u"),
        placeholderAsk=res(gpu=members), tags={"ykbus.io/topology-required": "ykbus.io/rack"})
    placeholders = m.AllocationAsk(allocationKey="p", applicationID=app_id, resourceAsk=res(gpu=1),
                                   maxAllocations=members, taskGroupName="w", placeholder=True)
    return application, placeholders


async def test_a_gang_is_placed_in_one_rack_and_one_no_rack_holds_is_told_why(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        hosts = [host("a1", "b1", "ra"), host("a2", "b1", "ra"), host("c1", "b1", "rc"),
                 host("d1", "b2", "rd"), host("d2", "b2", "rd")]
        client = await start_rm(api, "gpus", rec, nodes=hosts, config=QUEUES)
        train, train_ph = gang("train", 8)
        huge, huge_ph = gang("huge", 12)
        await client.add_applications([train, huge])
        await api.update_allocation(m.AllocationRequest(asks=[train_ph], rmID="gpus"))
        await rec.wait_for(lambda: len([a for a in rec.allocations if a.applicationID == "train"]) == 8)
        racks = {a.nodeID[0] for a in rec.allocations if a.applicationID == "train"}
        assert racks == {"a"}  # racks a and d both hold 8: the tie goes to the first by key (b1/ra)
        await api.update_allocation(m.AllocationRequest(asks=[huge_ph], rmID="gpus"))
        await rec.wait_for(lambda: any(s.applicartionID == "huge" for s in rec.states))
        [why] = [s.reason for s in rec.states if s.applicartionID == "huge"]
        assert why == ("no ykbus.io/rack domain has room for 12 × {gpu: 1}; "
                       "the fullest fit, rack b2/rd, has room for 8")
        assert not any(a.applicationID == "huge" for a in rec.allocations)
