"""The dry run over the wire (issue 43): `yk.v1.api.wouldfit` over NATS and `POST
/api/wouldfit` over HTTP give the same answer from a running core, and append nothing to
its log; a bad request is answered with the field that is wrong."""

from __future__ import annotations

import json

import anyio
import nats
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import node, res, start_rm
from tests.integration.test_rest_api import fetch
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
          - name: jobs
"""


def request(members: int, vcore: int) -> dict:
    return {"application": {"applicationID": "try", "queueName": "root.jobs", "ugi": {"user": "me"}},
            "asks": [{"allocationKey": "w", "applicationID": "try",
                      "resourceAsk": {"resources": {"vcore": {"value": vcore}}}, "maxAllocations": members}]}


async def test_a_dry_run_over_nats_and_http_answers_alike_and_writes_nothing(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        client = await start_rm(api, "rm-1", rec, nodes=[node("n1", vcore=4000), node("n2", vcore=4000)],
                                config=QUEUES)
        await client.add_applications([m.AddApplicationRequest(applicationID="busy", queueName="root.jobs",
                                                               ugi=m.UserGroupInformation(user="u"))])
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[m.AllocationAsk(
            allocationKey="b", applicationID="busy", resourceAsk=res(vcore=3000), maxAllocations=2,
            executionTimeoutMilliSeconds=600_000)]))
        await rec.wait_for(lambda: len(rec.allocations) == 2)
        nc = await nats.connect(nats_server.url)
        try:
            before = json.loads((await nc.request("yk.v1.api.health", b"{}", timeout=5)).data)["lastSeq"]
            over_nats = json.loads((await nc.request("yk.v1.api.wouldfit", json.dumps(request(2, 1000)).encode(),
                                                     timeout=5)).data)["wouldfit"]
            status, _, body = await anyio.to_thread.run_sync(lambda: fetch(
                port, "/api/wouldfit?int64=number", "POST", {"Content-Type": "application/json"},
                json.dumps(request(2, 1000)).encode()))
            assert status == 200
            assert json.loads(body)["wouldfit"] == over_nats
            assert over_nats["fits"] is True and sorted(p["nodeID"] for p in over_nats["placement"]) == ["n1", "n2"]
            assert (over_nats["lastSeq"], over_nats["entriesBetween"]) == (before, 0)  # the state it read
            big = json.loads((await nc.request("yk.v1.api.wouldfit", json.dumps(request(1, 2000)).encode(),
                                                timeout=5)).data)["wouldfit"]
            assert big["fits"] is False and big["estimate"]["text"].startswith("estimated start ")
            assert big["smaller"]["resource"] == {"vcore": 1000}
            bad = json.loads((await nc.request("yk.v1.api.wouldfit", b'{"application": {"applicationID": 7}}',
                                                timeout=5)).data)
            assert bad["error"].startswith("application.applicationID: Expected `str`")
            status, _, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit", "POST", {}, b"[1"))
            assert status == 400 and "error" in json.loads(body)
            yaml_body = b"application: {applicationID: a, queueName: root.a}\n"  # the CLI's file, posted as it is
            status, _, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit", "POST", {}, yaml_body))
            assert status == 400 and json.loads(body)["error"] == (
                "the body is not JSON (Expecting value: line 1 column 1 (char 0)): POST the request as JSON; "
                "`ykbus explain --would-fit FILE` reads YAML too")
            after = json.loads((await nc.request("yk.v1.api.health", b"{}", timeout=5)).data)["lastSeq"]
            assert after == before  # a dry run appends nothing to the log
        finally:
            await nc.close()


async def test_with_several_rms_a_dry_run_over_http_names_its_rm_by_query(nats_server):
    """As in `ykbus up`'s demo: with two RMs the request must say which cluster it asks about;
    `?rm=` does, as the read verbs take it, and the error says how (it named only `--rm`)."""
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        await start_rm(api, "rm-1", Recorder(), nodes=[node("n1", vcore=4000)], config=QUEUES)
        await start_rm(api, "rm-2", Recorder(), nodes=[node("m1", vcore=1000)], config=QUEUES)
        job = json.dumps(request(1, 2000)).encode()
        status, _, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit", "POST", {}, job))
        assert status == 400 and "`?rm=` over HTTP" in json.loads(body)["error"]
        status, _, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit?rm=rm-1", "POST", {}, job))
        assert status == 200 and json.loads(body)["wouldfit"]["rm"] == "rm-1"
        assert json.loads(body)["wouldfit"]["fits"] is True
        status, _, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit?rm=rm-2", "POST", {}, job))
        assert status == 200 and json.loads(body)["wouldfit"]["fits"] is False
        status, headers, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit?rm=rm-1", "GET", {}))
        assert status == 405 and "is a POST of the job as JSON" in json.loads(body)["error"]  # (was 404 `application`)
        named = json.dumps({**request(1, 2000), "rm": "rm-2"}).encode()  # `?rm=` over the body's, as `--rm` is
        status, _, body = await anyio.to_thread.run_sync(lambda: fetch(port, "/api/wouldfit?rm=rm-1", "POST", {}, named))
        assert status == 200 and json.loads(body)["wouldfit"]["rm"] == "rm-1"


def test_a_dry_runs_estimate_and_a_reasons_estimated_start_are_int64_strings_over_http():
    """Regression (an outside review): `now` was a decimal string and the estimate's times
    raw numbers (about 1.8e18: past what a JavaScript number holds exactly)."""
    from ykbus.bus.readapi import http_int64_strings

    answer = {"now": 1, "estimate": {"start": 2, "text": "t", "waitsFor": [{"nodeID": "n", "end": 3}]},
              "why": {"details": {"estimatedStart": 4}}}
    assert http_int64_strings(answer) == {"now": "1", "estimate": {"start": "2", "text": "t", "waitsFor": [
        {"nodeID": "n", "end": "3"}]}, "why": {"details": {"estimatedStart": "4"}}}
