"""When an ask will start, as a person sees it in the web UI (issue 43, docs/time.md): a core
on a real nats-server holds two full nodes whose allocations have runtime limits; a large ask
reserves one of them (it must run there) and a smaller one waits for room. Headless Chromium opens each
application's page and reads, beside why each ask waits, when it will start."""

from __future__ import annotations

import anyio
import msgspec
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
    reservationdelay: 10m
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
"""


def application(app_id: str) -> m.AddApplicationRequest:
    return m.AddApplicationRequest(applicationID=app_id, queueName="root.jobs", partitionName="default",
                                   ugi=m.UserGroupInformation(user="u"))


def pod(key: str, app_id: str, vcore: int, limit_ms: int = 0) -> m.AllocationAsk:
    return m.AllocationAsk(allocationKey=key, applicationID=app_id, partitionName="default", resourceAsk=res(vcore=vcore),
                           maxAllocations=1, executionTimeoutMilliSeconds=limit_ms,
                           preemptionPolicy=m.PreemptionPolicy(allowPreemptSelf=False))  # (none is a victim)


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
            for app_id in ("big", "small", "huge"):  # from the list of applications, as a person finds them
                page.click("nav a[data-page='applications']")
                page.wait_for_selector(f"body[data-ready='applications'] a:text-is('{app_id}')", timeout=15000)
                page.click(f"a:text-is('{app_id}')")
                page.wait_for_selector(f"body[data-ready='app'] #app h2:has-text('Application {app_id}')", timeout=15000)
                seen[app_id] = page.inner_text("#app .asks")
                if SHOTS:
                    (SHOTS / f"time-{app_id}.png").write_bytes(page.screenshot(full_page=True))
            seen["errors"] = "; ".join(errors)
        finally:
            browser.close()
    return seen


async def test_an_applications_page_says_when_its_waiting_asks_will_start(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, \
            rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        client = await start_rm(api, "rm-1", rec, nodes=[node("n1", vcore=4000), node("n2", vcore=4000)], config=CONFIG)
        await client.add_applications([application("busy"), application("big"), application("small")])
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[
            pod("a", "busy", 3000, 20 * 60_000), pod("b", "busy", 3000, 40 * 60_000)]))
        await rec.wait_for(lambda: len(rec.allocations) == 2)
        pinned = msgspec.structs.replace(pod("B", "big", 4000), tags={"yunikorn.apache.org/requiredNode": "n1"})
        # (it must run on n1: it reserves n1 at once, n1 being full)
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[pinned]))
        await rec.wait_for(lambda: any(s.applicartionID == "big" and s.state == "RESERVED" for s in rec.states))
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[pod("s", "small", 2000)]))
        await rec.wait_for(lambda: any(s.applicartionID == "small" for s in rec.states))
        await client.add_applications([application("huge")])  # 16 cores: no node holds it even empty
        await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[pod("h", "huge", 16000)]))
        await rec.wait_for(lambda: any(s.applicartionID == "huge" for s in rec.states))
        seen = await anyio.to_thread.run_sync(browse, port)

    assert seen["errors"] == ""
    # the reserved ask: its reason, as the RM got it, says when, and what it waits for (once)
    assert "Reserved" in seen["big"] and seen["big"].count("estimated start") == 1, seen["big"]
    assert "when 1 allocation on node n1 ends" in seen["big"], seen["big"]
    # the ask waiting for room: the node not reserved frees in 40 min
    assert "NoNodeRoom" in seen["small"], seen["small"]
    assert "in 40 min, when 1 allocation on node n2 ends" in seen["small"], seen["small"]
    # an ask larger than every node: not a wait for room (regression: it read as one)
    assert "fits no schedulable node even empty (too little vcore on every node): it waits until a larger node " \
           "joins" in seen["huge"], seen["huge"]
