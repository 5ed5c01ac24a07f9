"""The web UI's live event feed with several RMs (docs/operations.md, "Web UI"): it shows the
events of the partition picked, those of applications that came after the page opened too.
It read the partition's applications once, as the feed opened, so every application
submitted later had its events left out: after half a minute of the demo the feed showed
only node events. Checked in headless Chromium on the page a core serves."""

from __future__ import annotations

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from tests.integration.test_web_ui import chromium
from ykbus.bus.server import free_port

pytestmark = pytest.mark.anyio


def open_feed(port: int, partition: str, opened: anyio.Event, paused: anyio.Event, token: object,
              done: list) -> None:
    """The events page of `partition`, open until an event of `late-b` shows (then what each
    event says); then paused while `paused-b` comes, and resumed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            console: list[str] = []
            page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
            page.goto(f"http://127.0.0.1:{port}/#/overview")
            page.wait_for_selector("body[data-ready='overview']", timeout=15000)
            page.select_option("#partition", partition)
            page.goto(f"http://127.0.0.1:{port}/#/events")
            page.wait_for_selector(f"#events .part:has-text('{partition}')", timeout=15000)
            page.wait_for_timeout(1500)  # the feed is open, its backlog shown
            anyio.from_thread.run_sync(opened.set, token=token)
            page.wait_for_selector("#feed .ev:has-text('late-b')", timeout=20000)
            page.wait_for_timeout(3000)  # what else comes meanwhile
            done.append(page.eval_on_selector_all(  # each event: what happened, to which object
                "#feed .ev", "els => els.map((e) => [e.querySelector('.what').innerText, e.querySelector('.who').innerText])"))
            # paused, the lines stay where they are to be read; what comes meanwhile is counted
            page.click("#events button.pause")
            lines = page.inner_text("#feed")
            anyio.from_thread.run_sync(paused.set, token=token)
            page.wait_for_selector("#events button.pause:has-text('new')", timeout=20000)
            page.wait_for_timeout(1000)
            done.append((lines == page.inner_text("#feed"), page.inner_text("#events button.pause")))
            page.click("#events button.pause")
            page.wait_for_selector("#feed .ev:has-text('paused-b')", timeout=20000)
            done.append((page.inner_text("#events button.pause"), console))
            # every application, ended ones too: those it reads again only every 15 s (all of them
            # came every 3 s: megabytes a refresh once thousands have ended)
            reads: list[str] = []
            page.on("request", lambda r: reads.append(r.url) if "/applications/" in r.url else None)
            page.goto(f"http://127.0.0.1:{port}/#/applications?state=all")
            page.wait_for_selector("body[data-ready='applications'] tr[data-app='late-b']", timeout=15000)
            page.wait_for_timeout(10_000)
            done.append(({kind: sum(u.endswith(f"/applications/{kind}") for u in reads)
                          for kind in ("active", "completed", "rejected")}, page.inner_text("#applications .pager")))
            page.reload()  # the partition picked stays picked (a reload went back to the first)
            page.wait_for_selector("body[data-ready='applications']", timeout=15000)
            done.append(page.eval_on_selector("#partition", "s => s.value"))
        finally:
            browser.close()


async def test_the_feed_shows_the_events_of_applications_that_came_after_it_opened(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api_a, \
            rm_client(nats_server.url) as api_b:
        with anyio.fail_after(10):
            await core.http_started.wait()
        clients = {}
        for rm_id, api, n in (("rm-a", api_a, "a1"), ("rm-b", api_b, "b1")):  # each RM its own connection
            clients[rm_id] = await start_rm(api, rm_id, Recorder(), nodes=[node(n, vcore=8000, memory=8000)])
        opened, paused, done = anyio.Event(), anyio.Event(), []
        async with anyio.create_task_group() as tg:
            token = anyio.lowlevel.current_token()
            tg.start_soon(anyio.to_thread.run_sync, open_feed, port, "[rm-b]default", opened, paused, token, done)
            with anyio.fail_after(60):
                await opened.wait()
            for rm_id in ("rm-a", "rm-b"):  # submitted after the feed opened
                late = f"late-{rm_id[-1]}"
                await clients[rm_id].add_applications([app(late)])
                await clients[rm_id].add_asks([ask(f"{late}-pod", late, vcore=1000, memory=10)])
            with anyio.fail_after(60):
                await paused.wait()
            await clients["rm-b"].add_applications([app("paused-b")])
        feed, (kept, button), (resumed, console), (reads, pager), reloaded = done
        assert reloaded == "[rm-b]default", reloaded
        assert reads["active"] >= 4 and reads["completed"] <= 2 and reads["rejected"] <= 2, reads
        assert "ended ones read again every 15 s" in pager, pager
        assert kept and button.startswith("resume (") and button.endswith(" new)"), button
        assert resumed == "pause" and console == [], (resumed, console)  # (a missing favicon was a console error)
        about = {what for what, who in feed if "late-b" in who}
        # the application's own events, not only its pod's on the node (all there was before)
        assert any(what.startswith("application") for what in about), feed
        assert not [who for _, who in feed if "late-a" in who], feed  # another RM's partition
