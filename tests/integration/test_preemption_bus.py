"""Preemption over NATS, as an RM speaks it: the core's PREEMPTED_BY_SCHEDULER release of a
queue over its guarantee, the RM's confirmation (not echoed back), and the preempting ask
placed on the freed node, through a real nats-server and the core service."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import node, res, start_rm
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio


def queues(delay: str, batch: str = "") -> str:
    """root.prod guarantees 1 core and may preempt after `delay`; root.batch borrows
    (`batch`: its properties line, if any)."""
    return f"""
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
            resources: {{guaranteed: {{vcore: 1000m}}}}
            properties: {{preemption.delay: {delay}}}
          - name: batch
{batch}"""


QUEUES = queues("0s")


def app(app_id: str, queue: str) -> m.AddApplicationRequest:
    return m.AddApplicationRequest(applicationID=app_id, queueName=queue, partitionName="default",
                                   ugi=m.UserGroupInformation(user="u"))


async def test_a_guaranteed_queue_preempts_a_borrowing_one_over_nats(nats_server):
    async with running_core(nats_server.url, tick_interval_s=0.2), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=2000)], config=QUEUES)
        await client.add_applications([app("batch", "root.batch"), app("web", "root.prod")])
        await api.update_allocation(m.AllocationRequest(asks=[m.AllocationAsk(
            allocationKey="b", applicationID="batch", resourceAsk=res(vcore=1000), maxAllocations=2)], rmID="k8s"))
        await rec.wait_for(lambda: len(rec.allocations) == 2)
        await api.update_allocation(m.AllocationRequest(asks=[m.AllocationAsk(
            allocationKey="w", applicationID="web", resourceAsk=res(vcore=1000),
            preemptionPolicy=m.PreemptionPolicy(allowPreemptSelf=True, allowPreemptOther=True))], rmID="k8s"))
        await rec.wait_for(lambda: any(r.terminationType is m.TerminationType.PREEMPTED_BY_SCHEDULER
                                       for r in rec.released))
        [victim] = rec.released
        assert victim.applicationID == "batch" and "preempted for ask w" in victim.message
        assert not any(a.allocationKey == "w" for a in rec.allocations)  # not before the RM confirms
        await api.update_allocation(m.AllocationRequest(releases=m.AllocationReleasesRequest(allocationsToRelease=[
            m.AllocationRelease(partitionName="default", applicationID="batch", UUID=victim.UUID,
                                terminationType=m.TerminationType.PREEMPTED_BY_SCHEDULER)]), rmID="k8s"))
        await rec.wait_for(lambda: any(a.allocationKey == "w" for a in rec.allocations))
        assert [r.UUID for r in rec.released] == [victim.UUID]  # the confirmation is not echoed back


PATIENT = queues("90s")


async def test_an_ask_that_may_preempt_but_waits_tells_the_rm_why_in_its_reason(nats_server):
    """Issue 40: the RM's scheduling state (what a Kubernetes shim turns into pod events) says
    why an ask that may preempt has not: its queue's delay, or no guarantee on its path."""
    may_preempt = m.PreemptionPolicy(allowPreemptSelf=True, allowPreemptOther=True)
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=2000)], config=PATIENT)
        await client.add_applications([app("batch", "root.batch"), app("web", "root.prod")])
        await api.update_allocation(m.AllocationRequest(asks=[m.AllocationAsk(
            allocationKey="b", applicationID="batch", resourceAsk=res(vcore=1000), maxAllocations=2)], rmID="k8s"))
        await rec.wait_for(lambda: len(rec.allocations) == 2)
        await api.update_allocation(m.AllocationRequest(asks=[
            m.AllocationAsk(allocationKey="w", applicationID="web", resourceAsk=res(vcore=1500),
                            preemptionPolicy=may_preempt),
            m.AllocationAsk(allocationKey="more", applicationID="batch", resourceAsk=res(vcore=1000),
                            preemptionPolicy=may_preempt)], rmID="k8s"))
        await rec.wait_for(lambda: {s.allocationKey for s in rec.states} >= {"w", "more"})
        reasons = {s.allocationKey: s.reason for s in rec.states}
        assert reasons == {
            "w": "no schedulable node has {vcore: 1.5 cores} free, other than nodes reserved for other asks; "
                 "preemption: it waits until its queue's preemption.delay (90 s) has passed",
            "more": "no schedulable node has {vcore: 1 core} free, other than nodes reserved for other asks; "
                    "preemption: no queue on its path (root.batch and above) guarantees what it asks for"}
        assert not rec.released  # nothing preempted


YOUNG = queues("0s", "            properties: {preemption.minruntime: 1h}\n")


async def test_an_ask_that_would_preempt_only_young_work_waits_and_the_rm_hears_why(nats_server):
    """Issue 43: `preemption.minruntime`: an allocation younger than it is no victim. The
    ask that may preempt waits, nothing is preempted, and the RM's scheduling state says why,
    naming the first allocation to be old enough and when."""
    may_preempt = m.PreemptionPolicy(allowPreemptSelf=True, allowPreemptOther=True)
    async with running_core(nats_server.url, tick_interval_s=0.2), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=2000)], config=YOUNG)
        await client.add_applications([app("batch", "root.batch"), app("web", "root.prod")])
        await api.update_allocation(m.AllocationRequest(asks=[m.AllocationAsk(
            allocationKey="b", applicationID="batch", resourceAsk=res(vcore=1000), maxAllocations=2)], rmID="k8s"))
        await rec.wait_for(lambda: len(rec.allocations) == 2)
        first = min(a.UUID for a in rec.allocations)  # both placed by one entry: <seq>-0 and <seq>-1
        await api.update_allocation(m.AllocationRequest(asks=[m.AllocationAsk(
            allocationKey="w", applicationID="web", resourceAsk=res(vcore=1000), preemptionPolicy=may_preempt)],
            rmID="k8s"))
        await rec.wait_for(lambda: any("preemption.minruntime" in s.reason for s in rec.states
                                       if s.allocationKey == "w"))
        reason = next(s.reason for s in rec.states if s.allocationKey == "w" and "preemption.minruntime" in s.reason)
        assert ("it cannot preempt: every allocation it may preempt has run less than its queue's "
                "preemption.minruntime; the first is old enough at ") in reason
        assert reason.endswith(f" UTC (allocation {first} in root.batch, minimum 1 h)")
        await client.add_applications([app("later", "root.batch")])  # one more entry, and a tick or two
        await rec.wait_for(lambda: any(a.accepted for a in rec.app[-1:]) if rec.app else False)
        assert not rec.released  # nothing preempted
        assert not any(a.allocationKey == "w" for a in rec.allocations)
