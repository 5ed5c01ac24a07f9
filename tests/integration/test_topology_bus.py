"""Topology-aware gangs over NATS (issue 42), as an RM speaks them: nodes with rack
attributes, a gang required in one rack placed whole in the one it fits best, another that
no rack holds told why in its scheduling state, through a real nats-server and `ykbus core`."""

from __future__ import annotations

import json

import nats
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
                       "the fullest fit, rack b2/rd, has room for 8; no rack would hold it even empty (at most 8)")
        assert not any(a.applicationID == "huge" for a in rec.allocations)


async def test_roles_take_racks_of_their_own_a_lost_member_goes_back_and_the_read_api_shows_where(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        # racks of 8 GPUs; r0's hosts sort first, so fair would put an ordinary ask there
        hosts = [host(f"{r}{i}", b, r) for r, b in (("ra", "b1"), ("rb", "b1"), ("r0", "b2")) for i in (1, 2)]
        client = await start_rm(api, "gpus", rec, nodes=hosts, config=QUEUES)
        job = m.AddApplicationRequest(applicationID="disagg", queueName="root.jobs", partitionName="default",
                                      ugi=m.UserGroupInformation(user="u"), placeholderAsk=res(gpu=12))
        rack = {"ykbus.io/topology-required": "ykbus.io/rack"}
        roles = [m.AllocationAsk(allocationKey=f"ph-{g}", applicationID="disagg", resourceAsk=res(gpu=4),
                                 maxAllocations=n, taskGroupName=g, placeholder=True, tags=rack)
                 for g, n in (("prefill", 2), ("decode", 1))]
        await client.add_applications([job])
        await api.update_allocation(m.AllocationRequest(asks=roles, rmID="gpus"))
        await rec.wait_for(lambda: len(rec.allocations) == 3)
        by_role = {g: {a.nodeID[:2] for a in rec.allocations if a.taskGroupName == g} for g in ("prefill", "decode")}
        assert by_role == {"prefill": {"ra"}, "decode": {"rb"}}  # each role whole in a rack of its own
        # the decode member is replaced by its real pod, which then fails and is asked again:
        # it goes back into rack rb, though fair would take r0's empty hosts first
        await api.update_allocation(m.AllocationRequest(rmID="gpus", asks=[
            m.AllocationAsk(allocationKey="d0", applicationID="disagg", resourceAsk=res(gpu=4),
                            taskGroupName="decode", tags=rack)]))
        await rec.wait_for(lambda: any(r.terminationType == m.TerminationType.PLACEHOLDER_REPLACED
                                       for r in rec.released))
        ph = next(r for r in rec.released if r.terminationType == m.TerminationType.PLACEHOLDER_REPLACED)
        await api.update_allocation(m.AllocationRequest(rmID="gpus", releases=m.AllocationReleasesRequest(
            allocationsToRelease=[m.AllocationRelease(applicationID="disagg", partitionName="default", UUID=ph.UUID,
                                                      terminationType=m.TerminationType.PLACEHOLDER_REPLACED)])))
        await rec.wait_for(lambda: any(a.allocationKey == "d0" for a in rec.allocations))
        await api.update_allocation(m.AllocationRequest(rmID="gpus", releases=m.AllocationReleasesRequest(
            allocationsToRelease=[m.AllocationRelease(applicationID="disagg", partitionName="default",
                                                      allocationKey="d0",
                                                      terminationType=m.TerminationType.STOPPED_BY_RM)])))
        await api.update_allocation(m.AllocationRequest(rmID="gpus", asks=[
            m.AllocationAsk(allocationKey="d0-again", applicationID="disagg", resourceAsk=res(gpu=4),
                            taskGroupName="decode", tags=rack)]))
        await rec.wait_for(lambda: any(a.allocationKey == "d0-again" for a in rec.allocations))
        assert next(a.nodeID for a in rec.allocations if a.allocationKey == "d0-again").startswith("rb")
        nc = await nats.connect(nats_server.url)
        try:
            topo = json.loads((await nc.request("yk.v1.api.topology", b"", timeout=5)).data)
            apps = json.loads((await nc.request("yk.v1.api.applications", b"", timeout=5)).data)
        finally:
            await nc.close()
        tree = topo["topology"]["gpus"]["default"]
        assert tree["levels"] == ["ykbus.io/block", "ykbus.io/rack"]
        assert [(d["name"], d["free"]["gpu"]) for d in tree["domains"]] == [  # a full rack's 0 given, not left out
            ("b1", 4), ("b1/ra", 0), ("b1/rb", 4), ("b2", 8), ("b2/r0", 8)]
        t = apps["applications"]["gpus"]["default"]["disagg"]["topology"]
        assert t["taskGroups"] == {"prefill": {"mode": "required", "level": "ykbus.io/rack"},
                                   "decode": {"mode": "required", "level": "ykbus.io/rack"}}
        assert t["domains"] == {"prefill": {"level": "ykbus.io/rack", "domain": "b1/ra"},
                                "decode": {"level": "ykbus.io/rack", "domain": "b1/rb"}}
        assert t["placedIn"] == {"level": "ykbus.io/block", "domain": "b1"}
