"""An application that ended is remembered across a restart of the core and of its RM, as
the docs promise (limits.TERMINATED_TIMEOUT_NS, 72 h), by the core and by a reader (real
nats-server)."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from ykbus.bus.client import ResourceManagerClient
from ykbus.log.build import resource
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]"


def node(n: str) -> m.NodeInfo:
    return m.NodeInfo(nodeID=n, action=m.ActionFromRM.CREATE, schedulableResource=resource(vcore=8000))


@pytest.fixture
def small_server(tmp_path):
    """A nats-server that takes messages of at most 64 KiB: a cluster's whole lists are past it."""
    from ykbus.bus.server import NatsServer

    server = NatsServer(store_dir=str(tmp_path / "nats"))
    server.max_payload = 64 * 1024
    server.start()
    yield server
    server.cleanup()


def ended(service) -> dict:
    return service.read("terminated", {"rm": "rm-1"})["terminated"].get("rm-1", {}).get("default", {})


async def wait_until(predicate, timeout: float = 15.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


async def test_an_application_that_completed_is_explained_after_the_core_and_its_rm_restart(nats_server):
    """Issue 40, item 7 (tyjob.md's quick start met it): after `ykbus up` started again, `ykbus
    explain` of an application that had completed said "not known". The core's snapshot kept
    it; the RM's registration again (the recovery protocol) wiped it with the partitions."""
    async with running_core(nats_server.url) as core, rm_client(nats_server.url) as sched:
        rm = ResourceManagerClient(sched, "rm-1", config=QUEUES, callback=Recorder())
        await rm.start(nodes=[node("n1")])
        await rm.add_applications([m.AddApplicationRequest(applicationID="done", queueName="root.a",
                                                           partitionName="default", ugi=m.UserGroupInformation("u"))])
        await rm.remove_applications(["done"])
        await wait_until(lambda: "done" in ended(core))
        before = ended(core)["done"]
    # stopped: its final snapshot; the next core starts from it and the log after it
    async with running_core(nats_server.url) as core, rm_client(nats_server.url) as sched:
        rm = ResourceManagerClient(sched, "rm-1", config=QUEUES, callback=Recorder())
        await rm.start(nodes=[node("n1")])  # the RM started again: it registers again
        await wait_until(lambda: core.read("partitions", {})["partitions"].get("rm-1", {}).get("default", {})
                         .get("nodes") == 1)
        assert ended(core).get("done") == before
        async with running_core(nats_server.url, reader=True) as reader:  # its own copy, from the same log
            await wait_until(lambda: reader.core.last_seq >= core.core.last_seq)
            assert ended(reader).get("done") == before
        run = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "ykbus.cli", "explain", "done", "--nats", nats_server.url],
            capture_output=True, text=True, timeout=60))
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("application done (rm rm-1, partition default, queue root.a): Completed at ")
        assert "(the core remembers it for 72 h after it ended)" in run.stdout


async def test_explain_answers_over_nats_however_many_applications_ended_and_says_a_rejected_one(small_server):
    """Regressions (an outside review): `ykbus explain APP` asked the core for every
    application that ended (kept 72 h) in one NATS message: after about half an hour of `make
    run` the answer passed the server's max_payload and explain failed for every application,
    its advice (--rm) of no help. It asks for that application alone. And an application the
    core rejected (its reason kept, as /ws/v1's rejected list shows it) read "not known"."""
    server = small_server  # the whole list of ended applications is past it
    async with running_core(server.url) as core, rm_client(server.url) as sched:
        rm = ResourceManagerClient(sched, "rm-1", config=QUEUES, callback=Recorder())
        await rm.start(nodes=[node("n1")])
        ids = [f"ended-application-with-a-long-name-{i:04}" for i in range(1200)]
        for start in range(0, len(ids), 100):
            await rm.add_applications([m.AddApplicationRequest(
                applicationID=i, queueName="root.a", partitionName="default", ugi=m.UserGroupInformation("u"))
                for i in ids[start:start + 100]])
            await rm.remove_applications(ids[start:start + 100])
        await rm.add_applications([m.AddApplicationRequest(applicationID="nowhere", queueName="root.nope",
                                                           partitionName="default",
                                                           ugi=m.UserGroupInformation("u"))])
        await wait_until(lambda: len(ended(core)) == 1201, timeout=60)

        def explain(app: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", app, "--nats", server.url],
                                  capture_output=True, text=True, timeout=60)

        run = await anyio.to_thread.run_sync(explain, ids[7])
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith(f"application {ids[7]} (rm rm-1, partition default, queue root.a): Completed")
        run = await anyio.to_thread.run_sync(explain, "nowhere")
        assert run.returncode == 0, run.stderr[-2000:]
        assert "application nowhere (rm rm-1, partition default, queue ?): Rejected at " in run.stdout
        assert "queue 'root.nope' does not exist" in run.stdout
        assert "the core remembers the newest 1000 rejected" in run.stdout



async def test_the_application_list_and_the_explain_overview_fit_a_message_and_list_ended_ones(small_server):
    """Regressions (an outside review at the scale of a shared cluster): `ykbus apps` and
    `ykbus explain` without an application asked the core for every application in full (each
    ask's reason with figures from a walk of every node), then filtered by RM, queue and state
    themselves: on 20,000 applications the core built 70 MB for minutes, holding the writer,
    and the command timed out. They ask for the applications' rows, filtered by the core.
    And `ykbus apps --state Completed` printed an empty table: ended ones are listed."""
    server = small_server  # every application in full is past it; their rows are not
    async with running_core(server.url) as core, rm_client(server.url) as sched:
        rm = ResourceManagerClient(sched, "rm-1", config=QUEUES, callback=Recorder())
        await rm.start(nodes=[node("n1")])
        ids = [f"waiting-{i:03}" for i in range(150)]
        await rm.add_applications([m.AddApplicationRequest(
            applicationID=i, queueName="root.a", partitionName="default", ugi=m.UserGroupInformation("u"))
            for i in [*ids, "done"]])
        await rm.add_asks([m.AllocationAsk(allocationKey=f"k{j}", applicationID=i, maxAllocations=2,
                                           resourceAsk=resource(vcore=5000)) for i in ids for j in range(3)])
        await rm.remove_applications(["done"])
        await wait_until(lambda: "done" in ended(core) and all(
            a["pending"] for a in core.read("applications", {"brief": True})["applications"]["rm-1"]["default"]
            .values() if a["state"] != "Running"), timeout=60)
        full = core.read("applications", {})
        assert len(json.dumps(full)) > server.max_payload  # what the commands asked for before

        def ykbus(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "ykbus.cli", *args, "--nats", server.url],
                                  capture_output=True, text=True, timeout=60)

        run = await anyio.to_thread.run_sync(ykbus, "apps")
        assert run.returncode == 0, run.stderr[-2000:]
        rows = run.stdout.splitlines()[1:]
        assert len(rows) == 150 and all(" NoNodeRoom" in r or " Running " in r for r in rows), rows[:3]
        run = await anyio.to_thread.run_sync(ykbus, "explain")
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("150 applications have pending asks:\n  waiting-")
        run = await anyio.to_thread.run_sync(ykbus, "apps", "--state", "completed")
        assert run.returncode == 0, run.stderr[-2000:]
        lines = run.stdout.splitlines()
        assert lines[0].split() == ["RM", "PARTITION", "APPLICATION", "QUEUE", "STATE", "ENDED", "MESSAGE"]
        assert [line.split()[:5] for line in lines[1:]] == [["rm-1", "default", "done", "root.a", "Completed"]]
        run = await anyio.to_thread.run_sync(ykbus, "apps", "--state", "Accepted", "--queue", "root.other")
        assert run.returncode == 2 and "no queue root.other" in run.stderr


