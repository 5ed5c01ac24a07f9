"""Why is it pending, on the bus: the RM gets the reason as its SI scheduling state, the
read API shows it, and `ykbus explain --nats` prints it from the live core."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from tests.core.test_why import QUEUES
from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm

pytestmark = pytest.mark.anyio


async def test_a_held_ask_is_explained_to_the_rm_the_read_api_and_ykbus_explain(nats_server):
    async with running_core(nats_server.url) as service, rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=8000)], config=QUEUES)
        await client.add_applications([app("a", "root.small")])
        await client.add_asks([ask("k", "a", vcore=1500), ask("k2", "a", vcore=1000)])
        await rec.wait_for(lambda: rec.states)
        message = "queue root.small max vcore 2 cores would be exceeded: 1.5 cores used + 1 core asked"
        assert [(s.allocationKey, s.state, s.reason) for s in rec.states] == [("k2", "SKIPPED", message)]
        answer = service.read("applications", {"rm": "k8s"})["applications"]["k8s"]["default"]["a"]
        assert answer["asks"]["k2"]["why"] == {"code": "QueueMax", "message": message, "details": {
            "queue": "root.small", "resource": "vcore", "used": 1500, "max": 2000, "asked": 1000}}
        assert answer["why"]["allocationKey"] == "k2"
        run = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "ykbus.cli", "explain", "a", "--nats", nats_server.url, "--rm", "k8s"],
            capture_output=True, text=True, timeout=60))
        assert run.returncode == 0, run.stderr
        assert f"  ask k2: 1 pending, 0 allocated: QueueMax: {message}" in run.stdout.splitlines()


async def test_ykbus_apps_and_queues_read_a_live_core(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=8000)], config=QUEUES)
        await client.add_applications([app("a", "root.small")])
        await client.add_asks([ask("k", "a", vcore=1500), ask("k2", "a", vcore=1000)])
        await rec.wait_for(lambda: rec.states)
        for command, expect in (("apps", ["k8s", "default", "a", "root.small", "Running"]),
                                ("queues", ["k8s", "default", "root.small", "leaf"])):
            run = await anyio.to_thread.run_sync(lambda c=command: subprocess.run(
                [sys.executable, "-m", "ykbus.cli", c, "--nats", nats_server.url], capture_output=True, text=True,
                timeout=60))
            assert run.returncode == 0, run.stderr
            assert any(line.split()[:len(expect)] == expect for line in run.stdout.splitlines()), run.stdout
