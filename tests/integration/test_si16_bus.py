"""An SI 1.6 RM with int64 as strings, over a real NATS server; the HTTP read API's int64."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import anyio
import nats
import pytest
from nats.js import api as js_api

from tests.integration.conftest import Recorder, rm_client, running_core
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
"""
BIG = 2**53 + 1  # not a float64


def res(**q):
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


async def raw_outputs(url: str, subject: str, until) -> list[dict]:
    """The bodies on `subject` of YK_OUT, as plain JSON, from the first up to the first for
    which `until(body)` holds (an int: that many)."""
    nc = await nats.connect(url)
    try:
        sub = await nc.jetstream().subscribe(subject, ordered_consumer=True,
                                             config=js_api.ConsumerConfig(deliver_policy=js_api.DeliverPolicy.ALL))
        out = []
        with anyio.fail_after(10):
            async for msg in sub.messages:
                out.append(json.loads(msg.data))
                if (len(out) == until) if isinstance(until, int) else until(out[-1]):
                    break
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


def http_get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_si16_rm_with_int64_strings_gets_strings_and_the_client_decodes_them(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port), rm_client(nats_server.url) as api:
        rec = Recorder()
        await api.register_resource_manager(m.RegisterResourceManagerRequest(
            rmID="k8s", policyGroup="queues", config=QUEUES, extraConfig={"int64": "string"}), rec)
        await api.update_node(m.NodeRequest(rmID="k8s", nodes=[
            m.NodeInfo(nodeID="n1", action=m.ActionFromRM.CREATE, schedulableResource=res(memory=2 * BIG, vcore=4000)),
            m.NodeInfo(nodeID="n2", action=m.ActionFromRM.CREATE_DRAIN, schedulableResource=res(vcore=9000))]))
        await api.update_application(m.ApplicationRequest(rmID="k8s", new=[m.AddApplicationRequest(
            applicationID="a1", queueName="root.prod", ugi=m.UserGroupInformation(user="u"))]))
        await api.update_allocation(m.AllocationRequest(rmID="k8s", allocations=[
            m.Allocation(allocationKey="pod-1", applicationID="a1", resourcePerAlloc=res(memory=BIG, vcore=1000)),
            m.Allocation(allocationKey="pod-2", applicationID="a1", nodeID="n1", resourcePerAlloc=res(vcore=1))]))
        await rec.wait_for(lambda: rec.allocations)
        alloc = rec.allocations[0]  # decoded by the client from strings
        assert (alloc.allocationKey, alloc.nodeID) == ("pod-1", "n1")
        assert alloc.resourcePerAlloc.resources["memory"].value == BIG

        [raw] = await raw_outputs(nats_server.url, "yk.v1.out.k8s.alloc", 1)
        assert raw["new"][0]["resourcePerAlloc"]["resources"] == {"memory": {"value": str(BIG)},
                                                                  "vcore": {"value": "1000"}}
        [rejected] = raw["rejectedAllocations"]
        assert (rejected["allocationKey"], rejected["applicationID"]) == ("pod-2", "a1")
        assert rejected["reason"].endswith("- at `$.allocations[1].nodeID`")
        app_out = await raw_outputs(nats_server.url, "yk.v1.out.k8s.app", lambda body: "updated" in body)
        assert isinstance(app_out[-1]["updated"][0]["stateTransitionTimestamp"], str)

        status, nodes = await anyio.to_thread.run_sync(http_get, port, "/api/nodes?rm=k8s")
        n1 = nodes["nodes"]["k8s"]["default"]["n1"]
        assert status == 200 and n1["capacity"] == {"memory": str(2 * BIG), "vcore": "4000"}
        assert n1["allocated"] == {"memory": str(BIG), "vcore": "1000"}
        assert nodes["nodes"]["k8s"]["default"]["n2"]["state"] == "Draining"
        _, plain = await anyio.to_thread.run_sync(http_get, port, "/api/nodes?rm=k8s&int64=number")
        assert plain["nodes"]["k8s"]["default"]["n1"]["capacity"] == {"memory": 2 * BIG, "vcore": 4000}
        _, apps = await anyio.to_thread.run_sync(http_get, port, "/api/applications")
        asks = apps["applications"]["k8s"]["default"]["a1"]["asks"]
        assert asks["pod-1"]["allocated"] == 1 and asks["pod-1"]["resource"]["vcore"] == "1000"  # counts stay numbers
        _, state = await anyio.to_thread.run_sync(http_get, port, "/api/state")
        assert isinstance(state["now"], str) and isinstance(state["last_seq"], int)
        assert await anyio.to_thread.run_sync(http_get, port, "/api/nodes?int64=float") == (
            400, {"error": "int64 'float': expected string or number"})
