"""The web UI as an operator met it in a review (docs/operations.md, "Web UI"), in headless
Chromium on the page a core serves, each a regression:

- a rejected application's link opened another application of the same id (submitted again
  and completed): a link to an ended application names its state;
- a parent queue's page said "Applications (0)" beside "running applications 1": it lists
  those of the queues below it;
- an application's page drew every allocation (2,000 rows): the first 50, and how many;
- the GPU heat map drew nodes without GPUs as idle GPUs: only the nodes that have one;
- an old link to a partition the core no longer has showed another partition's page;
- a window that is not one (`from=abc`) left a blank page;
- the live event feed stopped for good when the core restarted, saying nothing: it says it is
  disconnected, connects again and shows what comes after, without repeating what it showed.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from tests.integration.test_web_ui import chromium
from ykbus.bus.server import free_port

pytestmark = pytest.mark.anyio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
            queues:
              - name: x
              - name: y
"""


def browse(port: int, restarted: anyio.Event, restart: anyio.Event, token: object, seen: dict,
           live_open: anyio.Event) -> None:
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}/"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            def open_(hash_: str, ready: str) -> str:
                page.goto(base + hash_)
                page.wait_for_selector(f"body[data-ready='{ready}']", timeout=15000)
                return page.inner_text(f"#{ready}")

            open_("#/applications?state=Rejected", "applications")
            page.click("#applications tr[data-app='twice'] a")
            page.wait_for_selector("#app h2:has-text('twice')", timeout=15000)
            page.wait_for_timeout(500)
            seen["rejected"] = page.inner_text("#app h2")
            open_("#/applications?state=Completed", "applications")
            page.click("#applications tr[data-app='twice'] a")
            page.wait_for_selector("#app h2:has-text('twice')", timeout=15000)
            page.wait_for_timeout(500)
            seen["completed"] = page.inner_text("#app h2")
            # an application that ends while its page is open reads Completed at the next refresh
            # (the ended lists were just read: kept 15 s, it read "not known" that long)
            open_("#/applications?state=Completed", "applications")
            open_("#/app/default/root.team.x/endsoon", "app")
            anyio.from_thread.run_sync(live_open.set, token=token)
            page.wait_for_selector("#app h2:has-text('Completed')", timeout=8000)
            seen["ended-while-shown"] = page.inner_text("#app h2")
            seen["parent"] = open_("#/queue/default/root.team", "queue")
            seen["many"] = open_("#/app/default/root.team.y/many", "app")
            seen["many-rows"] = page.eval_on_selector_all("#app .allocations tbody tr", "rs => rs.length")
            seen["nodes"] = open_("#/nodes", "nodes")
            seen["gpu-cells"] = page.eval_on_selector_all("#nodes .heat[data-resource='nvidia.com/gpu'] a",
                                                          "cs => cs.map((c) => c.title)")
            seen["old-link"] = open_("#/app/gone-partition/-/whatever", "app")
            seen["timeline"] = open_("#/timeline?from=abc&to=def", "timeline")
            open_("#/events", "events")
            page.wait_for_selector("#feed .ev", timeout=15000)
            page.wait_for_timeout(1000)
            before = page.eval_on_selector_all("#feed .ev", "es => es.map((e) => e.innerText)")
            anyio.from_thread.run_sync(restart.set, token=token)
            page.wait_for_selector("#events .feedstate.bad:has-text('disconnected')", timeout=30000)
            seen["down"] = page.inner_text("#events .feedstate")
            anyio.from_thread.run(restarted.wait, token=token)
            page.wait_for_selector("#feed .ev:has-text('after-restart')", timeout=30000)
            page.wait_for_timeout(1000)
            after = page.eval_on_selector_all("#feed .ev", "es => es.map((e) => e.innerText)")
            seen["feed"] = (before, after, page.inner_text("#events .feedstate"))
            seen["errors"] = errors
        finally:
            browser.close()


async def test_what_a_review_of_the_web_ui_found(nats_server):
    port = free_port()
    seen: dict = {}
    async with rm_client(nats_server.url) as api:
        restart, restarted, live_open = anyio.Event(), anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            async with running_core(nats_server.url, api_port=port) as core:
                with anyio.fail_after(10):
                    await core.http_started.wait()
                rec = Recorder()
                client = await start_rm(api, "rm-1", rec, config=QUEUES,
                                        nodes=[node("n-gpu", vcore=64000, memory=2**36, **{"nvidia.com/gpu": 8}),
                                               node("n-cpu", vcore=64000, memory=2**36)])
                await client.add_applications([app("twice", "root.nosuch")])  # rejected: no such queue
                await rec.wait_for(lambda: any(r.applicationID == "twice" for a in rec.app for r in a.rejected))
                await client.add_applications([app("twice", "root.team.x"), app("many", "root.team.y"),
                                               app("endsoon", "root.team.x")])
                await client.add_asks([ask("e", "endsoon", vcore=100), ask("t", "twice", vcore=100),
                                       msgspec.structs.replace(ask("m", "many", vcore=100), maxAllocations=120)])
                await rec.wait_for(lambda: sum(a.applicationID == "many" for a in rec.allocations) >= 120)
                await client.remove_applications(["twice"])  # it ends: Completed, its id the rejected one's
                await rec.wait_for(lambda: any(u.applicationID == "twice" and u.state == "Completed"
                                               for a in rec.app for u in a.updated))
                token = anyio.lowlevel.current_token()
                tg.start_soon(anyio.to_thread.run_sync, browse, port, restarted, restart, token, seen, live_open)
                with anyio.fail_after(60):
                    await live_open.wait()
                await client.remove_applications(["endsoon"])
                with anyio.fail_after(120):
                    await restart.wait()
            # the core stopped (the feed's stream ends); the same one starts again
            async with running_core(nats_server.url, api_port=port) as core:
                with anyio.fail_after(10):
                    await core.http_started.wait()
                await anyio.sleep(3)  # the feed has tried, and failed, at least once meanwhile
                restarted.set()
                await client.add_applications([app("after-restart", "root.team.x")])
                with anyio.fail_after(90):
                    while "feed" not in seen and "errors" not in seen:
                        await anyio.sleep(0.2)
                while "errors" not in seen:
                    await anyio.sleep(0.2)

    assert seen["errors"] == []
    assert "Rejected" in seen["rejected"] and "Completed" in seen["completed"], (seen["rejected"], seen["completed"])
    assert "Completed" in seen["ended-while-shown"]
    assert "Applications (1), in the queues below it" in seen["parent"] and "many" in seen["parent"], seen["parent"]
    assert "the first 50 of 120" in seen["many"] and seen["many-rows"] == 50, seen["many-rows"]
    assert "nvidia.com/gpu utilisation, 1 nodes (of 2: the others have none)" in seen["nodes"], seen["nodes"]
    assert [c.split(":")[0] for c in seen["gpu-cells"]] == ["n-gpu"], seen["gpu-cells"]
    assert "partition gone-partition does not exist: the core has default" in seen["old-link"], seen["old-link"]
    assert "the window asked for is not one" in seen["timeline"], seen["timeline"]
    assert "disconnected at" in seen["down"], seen["down"]
    before, after, state = seen["feed"]
    assert state == "live"
    # 120 allocations of one ask, in one entry: events alike are each shown (a text's first
    # showing hid the others)
    assert max(before.count(line) for line in before) >= 3, before
    assert any("after-restart" in line for line in after)
    for line in before:  # what it showed before the restart, shown once
        assert after.count(line) <= max(1, before.count(line)), line


async def test_the_stream_of_a_quiet_rm_starts_with_its_last_events_though_others_spoke_since(nats_server):
    """The feed of a partition whose RM fell quiet beside a busy one said "no event of this
    partition yet": the stream took the last `count` output messages of every RM, then kept
    those of the RM asked for. It looks further back for them."""
    import json

    from tests.integration.test_events_api import open_stream, read_lines

    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api_q, \
            rm_client(nats_server.url) as api_b:
        with anyio.fail_after(10):
            await core.http_started.wait()
        quiet_rec, busy_rec = Recorder(), Recorder()
        quiet = await start_rm(api_q, "rm-quiet", quiet_rec, config=QUEUES, nodes=[node("q1", vcore=8000)])
        await quiet.add_applications([app("quiet-app", "root.team.x")])
        await quiet_rec.wait_for(lambda: quiet_rec.app)
        busy = await start_rm(api_b, "rm-busy", busy_rec, config=QUEUES, nodes=[node("b1", vcore=8000)])
        for i in range(300):  # 300 messages of rm-busy's since
            await busy.add_applications([app(f"busy-{i}", "root.team.y")])
        await busy_rec.wait_for(lambda: sum(len(a.accepted) for a in busy_rec.app) >= 300)
        stream = await anyio.to_thread.run_sync(open_stream, port, "/ws/v1/events/stream?count=5&rm=rm-quiet")
        try:
            lines = await anyio.to_thread.run_sync(read_lines, stream, 2)
        finally:
            stream.close()
        assert "InstanceUUID" in json.loads(lines[0])
        assert "quiet" in lines[1] or "q1" in lines[1], lines
