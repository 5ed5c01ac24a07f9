"""Prometheus metrics (issue 23, docs/operations.md "Metrics"): every `yunikorn_*` family of
YuniKorn's exposition (../shared/reference/yunikorn-rest/ws_v1_metrics.txt) with its type
and label names, the scenario's values, counts that a restarted core reports the same,
`promtool check metrics` on the exposition, and a real Prometheus server scraping a core."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_rest_api import REFERENCE, fetch
from tests.integration.test_rest_conformance import drive_reference_state
from ykbus import limits
from ykbus.bus.server import free_port

pytestmark = pytest.mark.anyio
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def families(text: str) -> dict[str, tuple[str, set[frozenset[str]]]]:
    """family -> (type, the label-name sets of its samples); counters named without `_total`
    (the Python client adds it to every counter, Go's only where the name has it)."""
    types: dict[str, str] = {}
    labels: dict[str, set[frozenset[str]]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            name, body, _ = SAMPLE.match(line).groups()
            keys = frozenset(re.findall(r'(\w+)="', body or "")) - {"le"}
            for family in (name, re.sub(r"_(bucket|sum|count|total)$", "", name)):
                if family in types:
                    labels.setdefault(family, set()).add(keys)
                    break
    return {re.sub(r"_total$", "", n) if k == "counter" else n: (k, labels.get(n, set())) for n, k in types.items()}


def value(text: str, sample: str) -> float:
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {sample}")


async def scrape(port: int) -> tuple[dict[str, str], str]:
    status, headers, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/metrics")
    assert status == 200
    return headers, body.decode()


async def test_yunikorns_families_with_the_scenarios_values_and_the_same_counts_after_a_restart(nats_server,
                                                                                                  monkeypatch):
    monkeypatch.setattr(limits, "COMPLETING_TIMEOUT_NS", 2_000_000_000)
    port = free_port()
    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core:
            with anyio.fail_after(10):
                await core.http_started.wait()
            with anyio.fail_after(30):
                await drive_reference_state(api, Recorder())
            headers, text = await scrape(port)
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"  # index.md
        ours = families(text)
        want = {n: f for n, f in families((REFERENCE / "ws_v1_metrics.txt").read_text()).items()
                if n.startswith("yunikorn_") and not n.startswith("yunikorn_runtime_go")}
        for name, (kind, label_sets) in want.items():
            assert name in ours, f"family {name} missing"
            assert ours[name][0] == kind, f"{name}: {ours[name][0]} vs {kind}"
            assert ours[name][1] >= label_sets or not label_sets - {frozenset()}, (name, ours[name][1], label_sets)
        assert "process_resident_memory_bytes" in ours and "python_gc_objects_collected" in ours  # Go's runtime: ours
        # the scenario's values (the reference's where YuniKorn counts the same)
        for sample, n in [('yunikorn_scheduler_node{state="active"}', 3),
                          ('yunikorn_scheduler_application_total{state="running"}', 2),
                          ('yunikorn_scheduler_application_total{state="completing"}', 1),
                          ('yunikorn_scheduler_application_submission_total{result="accepted"}', 4),
                          ('yunikorn_scheduler_application_submission_total{result="rejected"}', 2),
                          ('yunikorn_scheduler_container_allocation_attempt_total{state="allocated"}', 9),
                          ('yunikorn_scheduler_container_allocation_attempt_total{state="released"}', 3),
                          ('yunikorn_queue_app_total{queue="root.b",state="completed"}', 1),
                          ('yunikorn_queue_app_total{queue="",state="rejected"}', 1),
                          ('yunikorn_root_b_queue_container{state="released"}', 2),  # Go's name: no _total
                          ('yunikorn_scheduler_application_submission_total{result="new"}', 4),  # added to a queue
                          ('yunikorn_scheduler_container_allocation_attempt_total{state="error"}', 0),
                          ('yunikorn_queue_resource{queue="root.a",resource="memory",state="allocated"}', 60_000_000),
                          ('yunikorn_queue_resource{queue="root",resource="vcore",state="max"}', 30_000),
                          ('yunikorn_scheduler_memory_node_usage_total{range="(10%,20%]"}', 3),
                          ('ykbus_pending_asks{code="QueueMax"}', 1),
                          ('ykbus_rm_state{rm="rm-123",state="Running"}', 1),
                          ("ykbus_core_leader", 1)]:  # the only core leads
            assert value(text, sample) == n, sample
        assert "# TYPE yunikorn_root_b_queue_container counter" in text  # YuniKorn's name, type and help
        assert ("# HELP yunikorn_root_b_queue_container Queue container metrics. State of the attempt includes "
                "`allocated`, `released`.") in text
        assert 'yunikorn_scheduler_application_total{state="rejected"}' not in text  # not one of its states
        assert value(text, "ykbus_input_lag_entries") == 0
        assert value(text, "yunikorn_scheduler_scheduling_latency_milliseconds_count") > 0
        # in seconds, in YuniKorn's buckets, though the name says milliseconds (its scheduler.go observes
        # SinceInSeconds): every entry well under a second (regression: milliseconds were observed)
        assert 'yunikorn_scheduler_scheduling_latency_milliseconds_bucket{le="10000.0"}' not in text
        assert value(text, 'yunikorn_scheduler_scheduling_latency_milliseconds_bucket{le="1.0"}') == \
            value(text, "yunikorn_scheduler_scheduling_latency_milliseconds_count")

        # a restarted core (from its snapshot and the log) counts the same decisions
        async with running_core(nats_server.url, api_port=port) as again:
            with anyio.fail_after(10):
                await again.http_started.wait()
            _, after = await scrape(port)
        for line in text.splitlines():
            if line.startswith(("yunikorn_scheduler_application_submission_total", "yunikorn_queue_app_total",
                                "yunikorn_scheduler_container_allocation_attempt_total", "yunikorn_root_b")):
                name = line.rsplit(" ", 1)[0]
                assert value(after, name) == value(text, name), name


async def test_a_leader_that_lost_its_lease_says_it_no_longer_leads(nats_server):
    """Regression (a review): a leader whose NATS went away kept `ykbus_core_leader 1` and
    `"role": "leader"` after its lease lapsed, beside the process that took over."""
    port = free_port()
    async with running_core(nats_server.url, api_port=port, lease_ttl_s=0.5) as core:
        with anyio.fail_after(10):
            await core.http_started.wait()
            while value((await scrape(port))[1], "ykbus_core_leader") != 1:
                await anyio.sleep(0.05)
        nats_server.stop(kill=True)
        await anyio.sleep(1.0)  # twice its lease
        text = (await scrape(port))[1]
        assert value(text, "ykbus_core_leader") == 0 and value(text, "ykbus_leader_present") == 0
        assert value(text, "ykbus_nats_connected") == 0  # its input lag is stale: this says so
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/api/health")
        assert status == 200 and (json.loads(body)["role"], json.loads(body)["status"]) == ("standby", "no leader")
        nats_server.start()  # the same port: it renews again and leads
        with anyio.fail_after(15):
            while value((await scrape(port))[1], "ykbus_core_leader") != 1:
                await anyio.sleep(0.1)
        assert value((await scrape(port))[1], "ykbus_nats_connected") == 1


async def test_a_reader_says_when_no_core_leads(nats_server):
    """Regression (a review): under `ykbus up` the web UI's reader answers the metrics and the
    health; with the writer stopped it said `"status": "ok"` and nothing said that no
    decision was published."""
    port = free_port()

    async def reader_says() -> tuple[float, str]:
        _, text = await scrape(port)
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/api/health")
        return value(text, "ykbus_leader_present"), json.loads(body)["status"]
    async with running_core(nats_server.url, lease_ttl_s=0.5) as writer, \
            running_core(nats_server.url, api_port=port, reader=True) as reader:
        with anyio.fail_after(15):
            await reader.http_started.wait()
            while await reader_says() != (1, "ok"):
                await anyio.sleep(0.1)
        writer.stop()  # its lease released
        with anyio.fail_after(15):
            while await reader_says() != (0, "no leader"):
                await anyio.sleep(0.1)
        _, text = await scrape(port)
        assert value(text, "ykbus_core_leader") == 0 and value(text, "ykbus_failed_entries_total") == 0


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool not found: the test set-up installs Debian's prometheus package (make test)"
    return found


async def test_promtool_accepts_the_exposition_and_prometheus_scrapes_it(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        await drive_minimal(api)
        _, text = await scrape(port)
        # promtool parses it (exit 1 is an error); its lint findings (exit 3) may only be those it
        # finds in YuniKorn's own exposition: the names kept for YuniKorn's dashboards
        check = subprocess.run([promtool(), "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
        assert check.returncode in (0, 3), check.stdout.decode() + check.stderr.decode()
        theirs = subprocess.run([promtool(), "check", "metrics"], input=(REFERENCE / "ws_v1_metrics.txt").read_bytes(),
                                capture_output=True, timeout=30)
        per_queue = lambda out: {re.sub(r"^yunikorn_root\w*_queue_container", "yunikorn_<queue>_queue_container", x)  # noqa: E731
                                 for x in out.decode().splitlines()}
        findings = per_queue(check.stdout + check.stderr)
        assert findings <= per_queue(theirs.stdout + theirs.stderr), findings
        assert "error" not in (check.stdout + check.stderr).decode().lower()

        prom_port = free_port()
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: ykbus\n"
                        f"    metrics_path: /ws/v1/metrics\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
            server = subprocess.Popen([shutil.which("prometheus") or "prometheus", f"--config.file={config}",
                                       f"--storage.tsdb.path={tmp}/data", f"--web.listen-address=127.0.0.1:{prom_port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                found = await anyio.to_thread.run_sync(query_until, prom_port, 'yunikorn_scheduler_node{state="active"}')
                assert found == "1"
                up = await anyio.to_thread.run_sync(query_until, prom_port, 'up{job="ykbus"}')
                assert up == "1"
            finally:
                server.terminate()
                server.wait(timeout=10)


async def drive_minimal(api):
    from tests.integration.test_rest_conformance import CONFIG, node, start_rm
    rec = Recorder()
    await start_rm(api, "rm-1", rec, nodes=[node(1)], config=CONFIG)


def query_until(port: int, query: str, timeout: float = 40.0) -> str:
    """The value Prometheus answers for `query`, once it has one."""
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{port}/api/v1/query?query={urllib.request.quote(query)}"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                result = json.load(r)["data"]["result"]
            if result:
                return result[0]["value"][1]
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"Prometheus had no value for {query} within {timeout}s")
