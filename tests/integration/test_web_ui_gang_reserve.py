"""A gang's reserved nodes as a person sees them in the web UI (docs/gang.md, "A waiting gang
reserves nodes"): a core on a real nats-server holds two full 4-GPU nodes and a gang of two
whole nodes in a queue with `ykbus.io/gang.reserve`; past the reservation delay it reserves
both. Headless Chromium opens the Nodes page and a node's page, and reads that the node is
reserved by the gang (a link to it), and the gang's page, which names its nodes."""

from __future__ import annotations

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import node, res, start_rm
from tests.integration.test_web_ui import SHOTS, chromium
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

CONFIG = """
partitions:
  - name: default
    reservationdelay: 500ms
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: train
            properties: {ykbus.io/gang.reserve: "true"}
          - name: batch
"""


def application(app_id: str, queue: str, gang_gpus: int = 0) -> m.AddApplicationRequest:
    return m.AddApplicationRequest(applicationID=app_id, queueName=queue, partitionName="default",
                                   ugi=m.UserGroupInformation(user="u"),
                                   placeholderAsk=res(gpu=gang_gpus) if gang_gpus else None)


def browse(port: int) -> dict[str, str]:
    from playwright.sync_api import sync_playwright

    seen: dict[str, str] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("body[data-ready='overview']", timeout=15000)
            page.click("nav a[data-page='nodes']")
            page.wait_for_selector("body[data-ready='nodes'] tr[data-key='n1']", timeout=15000)
            seen["list"] = page.inner_text("tr[data-key='n1']")
            page.click("tr[data-key='n1'] a:text-is('n1')")
            page.wait_for_selector("body[data-ready='node'] h2:has-text('Node n1')", timeout=15000)
            seen["node"] = page.inner_text("p.facts")
            if SHOTS:
                (SHOTS / "gang-reserve-node.png").write_bytes(page.screenshot(full_page=True))
            page.click("p.facts a:text-is('big')")  # the gang, from the node it reserved
            page.wait_for_selector("body[data-ready='app'] #app h2:has-text('Application big')", timeout=15000)
            seen["app"] = page.inner_text("#app .asks")
            seen["errors"] = "; ".join(errors)
        finally:
            browser.close()
    return seen


async def test_a_node_a_waiting_gang_reserved_says_so_and_links_to_the_gang(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, \
            rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        client = await start_rm(api, "rm-1", rec, nodes=[node("n1", gpu=4, vcore=64000), node("n2", gpu=4, vcore=64000)],
                                config=CONFIG)
        await client.add_applications([application("fill", "root.batch"), application("big", "root.train", 8)])
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[m.AllocationAsk(
            allocationKey="f", applicationID="fill", partitionName="default", resourceAsk=res(gpu=4), maxAllocations=2)]))
        await rec.wait_for(lambda: len(rec.allocations) == 2)
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[m.AllocationAsk(
            allocationKey="p", applicationID="big", partitionName="default", resourceAsk=res(gpu=4, vcore=1000),
            maxAllocations=2, taskGroupName="w", placeholder=True)]))
        await rec.wait_for(lambda: any(s.applicartionID == "big" and "reserved for it" in s.reason for s in rec.states),
                           timeout=15)
        seen = await anyio.to_thread.run_sync(browse, port)

    assert seen["errors"] == ""
    assert "reserved by gang big" in seen["list"], seen["list"]
    assert "reserved by gang big until it is placed" in seen["node"], seen["node"]
    assert "nodes n1, n2 are reserved for it" in seen["app"], seen["app"]
