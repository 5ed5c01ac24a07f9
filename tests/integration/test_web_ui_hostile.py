"""Strings an RM sends reach an operator's browser: every page of the web UI shows them as text
and runs none of them (a security review: a resource named with an `<img onerror>` ran in
the Nodes page's heat map, in the UI's origin, and sent the whole state elsewhere). An RM
puts a payload in each field it owns (ids, users, groups, tags, attributes, resource names,
queue properties, release messages); headless Chromium opens every page and detail page,
and the payloads must have set nothing."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_web_ui import chromium
from ykbus.bus.client import ResourceManagerClient
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio


def payload(label: str) -> str:
    return (f"x\"'><img src=x onerror=\"window.__xss=(window.__xss||[]).concat('{label}')\">"
            f"<script>window.__xss=(window.__xss||[]).concat('{label}-script')</script>")


CONFIG = """
partitions:
  - name: default
    topology: {levels: [ykbus.io/rack]}
    placementrules:
      - name: provided
        create: false
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: q
            properties: {"evilprop": EVIL}
""".replace("EVIL", json.dumps(payload("queueprop")))


def res(quantities: dict[str, int]) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in quantities.items()})


async def hostile_rm(api, rec: Recorder) -> None:
    client = ResourceManagerClient(api, "evil", config=CONFIG, policy_group="evil", callback=rec)
    await client.start(nodes=[
        m.NodeInfo(nodeID=payload("nodeid"), action=m.ActionFromRM.CREATE,
                   attributes={"si/hostname": payload("hostname"), "si/rackname": payload("rackname"),
                               "ykbus.io/rack": payload("rack"), payload("attrkey"): payload("attrval")},
                   schedulableResource=res({"vcore": 4000, "memory": 8 * 2**30, payload("gpu-resource"): 4})),
        m.NodeInfo(nodeID="plain", action=m.ActionFromRM.CREATE, attributes={"ykbus.io/rack": "r1"},
                   schedulableResource=res({"vcore": 64000, "memory": 64 * 2**30}))])
    await client.add_applications([
        m.AddApplicationRequest(applicationID=payload("appid"), queueName="root.q", partitionName="default",
                                ugi=m.UserGroupInformation(user=payload("user"), groups=[payload("group")]),
                                tags={payload("tagkey"): payload("tagval")}),
        m.AddApplicationRequest(applicationID="plainapp", queueName="root.q", partitionName="default",
                                ugi=m.UserGroupInformation(user="bob"))])
    await rec.wait_for(lambda: sum(len(r.accepted) for r in rec.app) >= 2)
    await client.add_asks([
        m.AllocationAsk(allocationKey=payload("askkey"), applicationID=payload("appid"), partitionName="default",
                        resourceAsk=res({"vcore": 1000}), tags={payload("asktag"): payload("asktagval")}),
        m.AllocationAsk(allocationKey=payload("pending"), applicationID=payload("appid"), partitionName="default",
                        resourceAsk=res({"vcore": 900_000})),
        m.AllocationAsk(allocationKey="a1", applicationID="plainapp", partitionName="default",
                        resourceAsk=res({"vcore": 1000}))])
    await rec.wait_for(lambda: len(rec.allocations) >= 2)
    plain = next(a for a in rec.allocations if a.allocationKey == "a1")
    await client.release([m.AllocationRelease(partitionName="default", applicationID="plainapp", UUID=plain.UUID,
                                              terminationType=m.TerminationType.STOPPED_BY_RM,
                                              message=payload("releasemsg"))])


def browse(port: int) -> dict[str, list[str]]:
    """Every page, and the detail pages of the hostile application, queue and node: what the
    payloads set on each (nothing, if they are shown as text)."""
    from playwright.sync_api import sync_playwright

    enc = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
    part = "[evil]default"
    pages = ["#/overview", "#/queues", "#/applications", "#/applications?state=all", "#/nodes", "#/topology",
             "#/events", "#/timeline", f"#/app/{enc(part)}/-/{enc(payload('appid'))}",
             f"#/app/{enc(part)}/root.q/{enc(payload('appid'))}", f"#/queue/{enc(part)}/root.q",
             f"#/node/{enc(part)}/{enc(payload('nodeid'))}", f"#/node/{enc(part)}/plain"]
    ran: dict[str, list[str]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        context = browser.new_context()
        context.add_init_script(f"localStorage.setItem('ykbus.partition', {json.dumps(part)});")
        page = context.new_page()
        page.on("dialog", lambda d: d.dismiss())
        for where in pages:
            page.goto("about:blank")
            page.goto(f"http://127.0.0.1:{port}/{where}")
            page.wait_for_selector("body[data-ready]", timeout=15_000)
            page.wait_for_timeout(700)  # images fail to load, their handlers would run
            ran[where] = page.evaluate("window.__xss || []")
            if where == "#/nodes":  # shown as text: the resource's name heads its map
                assert "gpu-resource" in page.inner_text("main"), page.inner_text("main")[:500]
        browser.close()
    return ran


async def test_what_an_rm_sends_is_shown_as_text_on_every_page_and_runs_nowhere(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port), rm_client(nats_server.url) as api:
        await hostile_rm(api, Recorder())
        ran = await anyio.to_thread.run_sync(browse, port)
        headers = await anyio.to_thread.run_sync(lambda: dict(urllib.request.urlopen(
            f"http://127.0.0.1:{port}/", timeout=10).headers))
    assert {where: found for where, found in ran.items() if found} == {}
    # and the page itself allows no script but its own, and no framing by another site
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
