"""The web UI's refresh in place (`morph` in src/ykbus/web/app.js) shows exactly the new
rows whatever their keys: rows of the same `data-key` (the allocations of one ask on a node,
a batch RM's repeated allocation keys) were matched to the last old row of that key, so a
refreshed node page kept rows out of date and out of order. Checked in headless Chromium on
the page a core serves, and on a node page whose allocations share their keys."""

from __future__ import annotations

import random

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import res, start_rm
from tests.integration.test_web_ui import chromium
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

MORPH = """async (cases) => {
  const {morph} = await import('/ui/app.js');
  const wrong = [];
  for (const [before, after] of cases) {
    const el = document.createElement('tbody');
    const row = ([k, text]) => `<tr data-key="${k}"><td>${text}</td></tr>`;
    el.innerHTML = before.map(row).join('');
    morph(el, after.map(row).join(''));
    const got = [...el.children].map((tr) => [tr.dataset.key, tr.innerText]);
    if (JSON.stringify(got) !== JSON.stringify(after)) wrong.push({before, after, got});
  }
  return wrong;
}"""


def cases(n: int) -> list:
    rng = random.Random(41)
    out = []
    for _ in range(n):
        def rows(tag: str) -> list:
            return [[rng.choice("kkkxy"), f"{tag}{i}"] for i in range(rng.randint(0, 6))]
        out.append([rows("old"), rows("new")])
    return out


def look(port: int) -> tuple[list, list[str]]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/#/node/default/n1")
            page.wait_for_selector("body[data-ready='node']", timeout=15000)
            wrong = page.evaluate(MORPH, cases(300))
            page.wait_for_function("document.querySelectorAll('#node tbody tr').length >= 5", timeout=15000)
            rows = page.eval_on_selector_all("#node tbody tr", "rs => rs.map((r) => r.innerText)")
            page.wait_for_timeout(3500)  # one refresh in place
            again = page.eval_on_selector_all("#node tbody tr", "rs => rs.map((r) => r.innerText)")
            return wrong, [rows, again]
        finally:
            browser.close()


async def test_rows_of_the_same_key_are_refreshed_to_exactly_the_new_rows(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        client = await start_rm(api, "rm-1", rec, nodes=[m.NodeInfo(nodeID="n1", action=m.ActionFromRM.CREATE,
                                                                   schedulableResource=res(vcore=10000))])
        await client.add_applications([m.AddApplicationRequest(applicationID=a, queueName="root.prod",
                                                               ugi=m.UserGroupInformation(user="u"))
                                       for a in ("a1", "a2")])
        for a, n in (("a1", 3), ("a2", 2)):  # the same allocation key in both applications, several each
            await api.update_allocation(m.AllocationRequest(rmID="rm-1", asks=[m.AllocationAsk(
                allocationKey="task", applicationID=a, resourceAsk=res(vcore=1000), maxAllocations=n)]))
        await rec.wait_for(lambda: len(rec.allocations) == 5)
        wrong, (rows, again) = await anyio.to_thread.run_sync(look, port)
        assert wrong == []
        allocations = [r for r in rows if r.startswith("task")]
        assert sorted(r.split("\t")[1] for r in allocations) == ["a1", "a1", "a1", "a2", "a2"]
        # an application's allocations of one key are told apart: the second and later numbered
        assert sorted(r.split("\t")[0] for r in allocations if r.split("\t")[1] == "a1") == ["task", "task (2)",
                                                                                            "task (3)"]
        assert [r.split("\t")[:2] for r in again if r.startswith("task")] == [r.split("\t")[:2] for r in allocations]
