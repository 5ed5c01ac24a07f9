"""YuniKorn's REST API as ykbus serves it so far (issue 23, docs/operations.md): the router's
answers to any path as YuniKorn gives them, and /ws/v1/clusters and /ws/v1/partitions with
the reference's shapes (../shared/reference/yunikorn-rest/: the same keys at every level,
the same JSON types) and the state's values, over HTTP from a running core."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, node, res, start_rm
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

# shared/ sits beside the repository (on development machines and in CI)
REFERENCE = next(p for p in (Path(__file__).resolve().parents[3] / "shared" / "reference" / "yunikorn-rest",
                             Path("/work/shared/reference/yunikorn-rest")) if p.exists())
QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {guaranteed: {vcore: 10}}
"""


def fetch(port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None,
          body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request, redirects not followed."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers or {},
                                     data=body)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def same_shape(got, want, where="$"):
    """The same keys at every level and the same JSON types (lists by their first item)."""
    assert type(got) is type(want) or {type(got), type(want)} <= {int, float}, f"{where}: {got!r} vs {want!r}"
    if isinstance(want, dict) and not where.endswith(("capacity", "usedCapacity", "utilization", "applications",
                                                      "resourceWeights")):
        assert set(got) == set(want), f"{where}: keys {sorted(got)} vs {sorted(want)}"
        for k in want:
            same_shape(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list) and want and got:
        same_shape(got[0], want[0], f"{where}[0]")


async def test_clusters_and_partitions_have_yunikorns_shapes_and_the_states_values(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        client = await start_rm(api, "rm-123", rec, nodes=[node("n1", vcore=10000, memory=100), node(
            "n2", vcore=10000, memory=100)], config=QUEUES)
        await client.add_applications([m.AddApplicationRequest(
            applicationID="app-1", queueName="root.a", partitionName="default", ugi=m.UserGroupInformation(user="u"))])
        await api.update_allocation(m.AllocationRequest(asks=[m.AllocationAsk(
            allocationKey="k", applicationID="app-1", resourceAsk=res(vcore=1000, memory=10), maxAllocations=4)],
            rmID="rm-123"))
        await rec.wait_for(lambda: len(rec.allocations) == 4)

        status, headers, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/partitions")
        assert status == 200 and headers["Content-Type"] == "application/json; charset=UTF-8"
        assert headers["Access-Control-Allow-Origin"] == "*" and body.endswith(b"}]\n")
        [partition] = json.loads(body)
        same_shape(partition, json.loads((REFERENCE / "ws_v1_partitions.json").read_text())[0])
        assert partition["clusterId"] == "rm-123" and partition["name"] == "default"
        assert partition["capacity"] == {"capacity": {"memory": 200, "vcore": 20000},
                                         "usedCapacity": {"memory": 40, "vcore": 4000},
                                         "utilization": {"memory": 20, "vcore": 20}}
        assert partition["totalNodes"] == 2 and partition["totalContainers"] == 4
        assert partition["applications"] == {"total": 1, "Running": 1}
        assert partition["preemptionEnabled"] is True and partition["quotaPreemptionEnabled"] is False
        assert partition["nodeSortingPolicy"] == {"type": "fair", "resourceWeights": {"memory": 1, "vcore": 1}}

        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/clusters")
        [cluster] = json.loads(body)
        want = json.loads((REFERENCE / "ws_v1_clusters.json").read_text())[0]
        assert set(cluster) == set(want) and cluster["partition"] == "default"
        assert cluster["rmBuildInformation"][0]["rmId"] == "rm-123"


async def test_every_other_path_is_answered_as_yunikorn_answers_it(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core:
        with anyio.fail_after(10):
            await core.http_started.wait()
        for path in ("/ws/v1", "/ws/v1/nope", "/ws/v1/partition/default", "/ui/nope.js"):  # `/`: the web UI
            status, headers, body = await anyio.to_thread.run_sync(fetch, port, path)
            assert (status, body) == (404, (REFERENCE / "ws_v1_nope.txt").read_bytes()), path
            assert headers["Content-Type"] == "text/plain; charset=utf-8"
        status, headers, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/clusters/")
        assert status == 301 and headers["Location"] == "/ws/v1/clusters"
        assert body == (REFERENCE / "ws_v1_clusters_.html").read_bytes()
        status, headers, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/clusters", "POST")
        assert (status, headers["Allow"], body) == (405, "GET, OPTIONS",
                                                    (REFERENCE / "ws_v1_clusters.POST.empty.txt").read_bytes())
        status, headers, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/clusters", "OPTIONS")
        assert (status, headers["Allow"], body) == (200, "GET, OPTIONS", b"")


async def test_several_rms_with_the_same_partition_name_are_named_rm_and_partition(nats_server):
    """docs/operations.md, "Several RMs": `[rm]name` in every path and answer while two RMs
    have a partition of that name; the plain name is then unknown."""
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        for rm_id, n in (("rm-a", "a1"), ("rm-b", "b1")):
            await start_rm(api, rm_id, Recorder(), nodes=[node(n, vcore=1000, memory=10)], config=QUEUES)
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/partitions")
        assert sorted(p["name"] for p in json.loads(body)) == ["[rm-a]default", "[rm-b]default"]
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/partition/%5Brm-b%5Ddefault/nodes")
        assert status == 200 and [n["nodeID"] for n in json.loads(body)] == ["b1"]
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/partition/[rm-a]default/queues")
        assert status == 200 and json.loads(body)["partition"] == "[rm-a]default"
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/scheduler/node-utilizations")
        assert sorted(u["partition"] for u in json.loads(body)) == ["[rm-a]default", "[rm-b]default"]
        status, _, body = await anyio.to_thread.run_sync(fetch, port, "/ws/v1/partition/default/nodes")
        assert status == 404 and json.loads(body)["message"] == "Partition not found"  # YuniKorn's, for scripts
        assert json.loads(body)["description"] == ("Partition not found: 2 RMs have a partition named 'default'; "
                                                   "a path names each as [rm]name: [rm-a]default, [rm-b]default "
                                                   "(with curl, `curl -g` or %5Brm-a%5Ddefault: curl reads "
                                                   "brackets in a URL as a range)")


async def test_gzip_query_parameters_and_redirects_over_http_as_yunikorns_server(nats_server):
    """What YuniKorn's server does around its routes (pkg/webservice/gzip.go, Go's
    `Query().Get`, httprouter's redirects): gzip for a body of 1,400 bytes or more when the
    client takes it (any case, not `q=0`), with `Vary`; the first of repeated parameters; a
    redirect that keeps the query; `?count=` and `?start=` read as Go's ParseUint reads them."""
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        await start_rm(api, "rm-1", Recorder(), nodes=[node(f"n{i}", vcore=1000, memory=10) for i in range(4)],
                       config=QUEUES)

        def get(path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
            return fetch(port, path, headers=headers)

        status, headers, body = await anyio.to_thread.run_sync(
            lambda: get("/debug/fullstatedump", **{"Accept-Encoding": "deflate, GZIP"}))
        assert status == 200 and headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
        assert len(gzip.decompress(body)) >= 1400 and json.loads(gzip.decompress(body))["partitions"]
        status, headers, body = await anyio.to_thread.run_sync(
            lambda: get("/debug/fullstatedump", **{"Accept-Encoding": "gzip;q=0"}))
        assert "Content-Encoding" not in headers and json.loads(body)["partitions"]
        status, headers, body = await anyio.to_thread.run_sync(
            lambda: get("/ws/v1/clusters", **{"Accept-Encoding": "gzip"}))
        assert len(body) < 1400 and "Content-Encoding" not in headers and json.loads(body)[0]["partition"] == "default"

        status, _, _ = await anyio.to_thread.run_sync(
            get, "/ws/v1/partition/default/applications/active?status=running&status=bogus")
        assert status == 200  # the first value counts
        status, headers, _ = await anyio.to_thread.run_sync(
            get, "/ws/v1/partition/default/applications/active/?status=running")
        assert (status, headers["Location"]) == (301, "/ws/v1/partition/default/applications/active?status=running")

        status, _, body = await anyio.to_thread.run_sync(get, "/ws/v1/events/batch?count=")
        assert status == 200 and json.loads(body)["EventRecords"]
        for query, message in (("start=-5", 'strconv.ParseUint: parsing "-5": invalid syntax'),
                               ("count=abc", 'strconv.ParseUint: parsing "abc": invalid syntax'),
                               ("count=99999999999999999999", 'strconv.ParseUint: parsing "99999999999999999999": '
                                                              "value out of range")):
            status, _, body = await anyio.to_thread.run_sync(get, f"/ws/v1/events/batch?{query}")
            assert (status, json.loads(body)["message"]) == (400, message), query
        status, _, body = await anyio.to_thread.run_sync(get, "/ws/v1/events/foo?count=0")
        assert (status, body) == (404, b"404 page not found\n")


async def test_a_long_path_or_header_is_answered_by_the_route_and_a_malformed_request_writes_no_traceback(
        nats_server, caplog):
    """As Go's server (1 MB of request line and headers): a 9,000-byte application name is the
    route's 404, a browser's 20 KB cookie does not make every answer a 400; a request that is
    not HTTP is a 400 with no traceback in the operator's log (a client's mistake, not ours)."""
    import socket

    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        await start_rm(api, "rm-1", Recorder(), nodes=[node("n0", vcore=1000, memory=10)], config=QUEUES)
        status, _, body = await anyio.to_thread.run_sync(
            fetch, port, "/ws/v1/partition/default/application/" + "a" * 9000)
        assert (status, json.loads(body)["message"]) == (404, "Application not found")
        status, _, body = await anyio.to_thread.run_sync(
            lambda: fetch(port, "/ws/v1/partitions", headers={"Cookie": "c=" + "x" * 20_000}))
        assert status == 200 and json.loads(body)[0]["name"] == "default"

        def garbage() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /ws/v1/partitions HTTP/1.1\r\nno colon here\r\n\r\n")
                return s.recv(200)

        # but not without bound (regression: 128 lines of 1 MiB each were taken, before any token
        # check): a header line past 32 KiB is refused, and so are 200 header lines
        for headers in ({"X-Pad": "x" * 40_000}, {f"X-Pad-{i}": "x" for i in range(200)}):
            status, _, _ = await anyio.to_thread.run_sync(lambda h=headers: fetch(port, "/ws/v1/partitions", headers=h))
            assert status in (400, 431), (status, len(headers))
        many = {f"X-Forwarded-{i}": "x" * 100 for i in range(60)}  # what a browser and proxies send: taken
        status, _, _ = await anyio.to_thread.run_sync(lambda: fetch(port, "/ws/v1/partitions", headers=many))
        assert status == 200
        caplog.clear()
        answer = await anyio.to_thread.run_sync(garbage)
        assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n", 1)[0]
        tracebacks = [r for r in caplog.records if r.exc_info]
        assert tracebacks == [], [r.getMessage() for r in tracebacks]


async def test_a_connection_that_sends_no_whole_request_is_closed_after_the_idle_time(nats_server, monkeypatch):
    """Regression: a connection that sent half a request line, or nothing, was kept an hour
    (aiohttp's default): a few thousand such held a reader's sockets. Past
    `YKBUS_LIMIT_HTTP_IDLE_SECONDS` it is closed; a request sent within it is answered, and an
    answer that takes longer (an event stream) is not cut."""
    import socket
    import time

    from tests.integration.test_events_api import open_stream
    from ykbus import limits

    monkeypatch.setattr(limits, "MAX_HTTP_IDLE_SECONDS", 1)
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        client = await start_rm(api, "rm-1", Recorder(), nodes=[node("n0", vcore=1000, memory=10)], config=QUEUES)

        def held(first: bytes) -> tuple[bytes, float]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                t = time.monotonic()
                s.sendall(first)
                return s.recv(200), time.monotonic() - t

        for first in (b"", b"GET /ws/v1/partitions HTTP/1.1\r\n", b"GET /ws/v1/partitions HTTP/1.1\r\nHost: x\r\n"):
            answer, after = await anyio.to_thread.run_sync(held, first)
            assert answer == b"" and after < 5, (first, answer, after)

        def slow_but_whole() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"GET /ws/v1/partitions HTTP/1.1\r\n")
                time.sleep(0.3)
                s.sendall(b"Host: x\r\nConnection: close\r\n\r\n")
                return s.recv(200)

        assert (await anyio.to_thread.run_sync(slow_but_whole)).startswith(b"HTTP/1.1 200")
        stream = await anyio.to_thread.run_sync(open_stream, port, "/ws/v1/events/stream?count=0")
        try:
            await anyio.sleep(2.5)  # past the idle time, the answer still open: the next event comes
            await client.add_applications([app("app-late", "root.a")])
            lines = await anyio.to_thread.run_sync(stream.read, 2)
            assert json.loads(lines[-1])["objectID"] == "app-late", lines
        finally:
            stream.close()


async def test_validating_a_large_queue_file_does_not_hold_the_core(nats_server):
    """POST /ws/v1/validate-conf of a queue file near the 1 MiB bound took seconds of parsing
    on the core's loop, and an ask sent meanwhile waited for it (8 s in a review). The ask is
    answered while the file is still being parsed."""
    import urllib.request

    from tests.integration.conftest import Recorder, rm_client, running_core
    from tests.integration.test_bus import app, ask, node, start_rm
    from ykbus.bus.server import free_port

    big = "partitions:\n" + "".join(f"  - name: p{i}\n    queues:\n      - name: root\n        submitacl: '*'\n"
                                     for i in range(12_000))
    port = free_port()
    done: list[float] = []

    def validate() -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/ws/v1/validate-conf", data=big.encode(),
                                         method="POST")
        with urllib.request.urlopen(request, timeout=120) as answer:
            assert answer.status == 200 and b'"allowed":true' in answer.read().replace(b" ", b"")
        done.append(1)

    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        client = await start_rm(api, "rm-1", rec, nodes=[node("n1", vcore=4000)])
        await client.add_applications([app("a1")])
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, validate)
            await anyio.sleep(0.2)  # the file is being parsed
            await client.add_asks([ask("k", "a1", vcore=1000)])
            with anyio.fail_after(60):
                await rec.wait_for(lambda: rec.allocations)
            assert not done, "the ask was answered only once the file was parsed"


async def test_a_redirect_names_the_path_escaped_and_the_query_as_sent_and_a_bad_escape_is_a_400(nats_server):
    """Regression (an outside review): a redirect wrote the decoded path and query into
    `Location`: `/application/x%3Fy/` sent a script to application `x` with a query `y`,
    `?q=a%26b%23c` lost everything after the `#`, a space or `é` went raw into the header.
    Go's http.Redirect writes the path escaped (url.URL.EscapedPath) and the query as sent.
    A path with an escape that is none (`%zz`) is Go's server's 400, before any route."""
    port = free_port()
    async with running_core(nats_server.url, api_port=port) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        await start_rm(api, "rm-1", Recorder(), nodes=[node("n0", vcore=1000, memory=10)], config=QUEUES)
        for sent, location in (
                ("/ws/v1/partition/default/application/x%3Fy/", "/ws/v1/partition/default/application/x%3Fy"),
                ("/ws/v1/partition/default/queue/root.a%20b/", "/ws/v1/partition/default/queue/root.a%20b"),
                ("/ws/v1/partition/default/application/caf%C3%A9/", "/ws/v1/partition/default/application/caf%C3%A9"),
                ("/ws/v1/clusters/?q=a%26b%23c", "/ws/v1/clusters?q=a%26b%23c"),
                ("/ws/v1/clusters/?q=a+b", "/ws/v1/clusters?q=a+b"),
                ("/WS/v1/partition/default/application/a,b@c:d;e=f$g&h/", "/ws/v1/partition/default/application/a,b@c:d;e=f$g&h")):
            status, headers, _ = await anyio.to_thread.run_sync(fetch, port, sent)
            assert (status, headers["Location"]) == (301, location), sent
        for path in ("/ws/v1/partition/default/application/app%zz", "/ws/v1/partition/default/node/n%2"):
            status, headers, body = await anyio.to_thread.run_sync(fetch, port, path)
            assert (status, body) == (400, b"400 Bad Request"), path
            assert headers["Content-Type"] == "text/plain; charset=utf-8"
