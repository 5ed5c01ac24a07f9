"""YuniKorn's /ws/v1/events/batch and /ws/v1/events/stream, served from the durable output
stream (issue 23, docs/operations.md "Events"): YuniKorn's shapes (../shared/reference/
yunikorn-rest/ws_v1_events_batch*.json), the decisions of the reference state as events,
the same events after a restart, a stream that sends the last events then the new ones,
and a reader that resumes from an id."""

from __future__ import annotations

import json
import re
import socket

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_rest_api import REFERENCE, fetch
from tests.integration.test_rest_conformance import app, drive_reference_state
from ykbus import limits
from ykbus.bus.server import free_port

pytestmark = pytest.mark.anyio


def events_of(port: int, query: str = "") -> tuple[int, dict]:
    status, _, body = fetch(port, f"/ws/v1/events/batch{query}")
    return status, json.loads(body)


async def test_the_reference_states_decisions_as_yunikorns_events_and_the_same_after_a_restart(nats_server,
                                                                                                monkeypatch):
    monkeypatch.setattr(limits, "COMPLETING_TIMEOUT_NS", 2_000_000_000)
    port = free_port()
    want = json.loads((REFERENCE / "ws_v1_events_batch.json").read_text())
    event_keys = {k for e in want["EventRecords"] for k in e}
    async with rm_client(nats_server.url) as api:
        async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core:
            with anyio.fail_after(10):
                await core.http_started.wait()
            with anyio.fail_after(30):
                client = await drive_reference_state(api, Recorder())
            status, batch = await anyio.to_thread.run_sync(events_of, port)
            assert status == 200 and set(batch) == set(want)
            records = batch["EventRecords"]
            assert batch["LowestID"] < batch["HighestID"] and isinstance(batch["InstanceUUID"], str)
            for e in records:
                assert set(e) <= event_keys, e
                for k, v in e.items():
                    sample = next(x[k] for x in want["EventRecords"] if k in x)
                    assert type(v) is type(sample), (k, v)
            by = lambda t, c, d: [e for e in records if (e["type"], e.get("eventChangeType"),  # noqa: E731
                                                         e.get("eventChangeDetail")) == (t, c, d)]
            # every allocation on its app, and on its node but the one that took a replaced placeholder's place
            assert len(by(2, 2, 200)) == 9 and len(by(3, 2, 303)) == 8
            assert {e["referenceID"] for e in by(2, 3, 503)} <= {"tg-1-placeholder-0", "tg-1-placeholder-1"}
            assert len(by(2, 3, 503)) == 1 and len(by(2, 3, 500)) == 2  # the placeholder replaced, app-4/5 released
            assert {e["objectID"] for e in by(2, 1, 202)} == {"app-3", "app-6"}  # rejected
            assert {e["objectID"] for e in by(2, 1, 206)} == {"app-1", "app-2", "app-4", "app-5"}  # Running
            assert [e["objectID"] for e in by(2, 1, 208)] == ["app-4"]  # Completed
            # each kind of event both write, as YuniKorn writes it: a message only where it writes one,
            # a node's events with their detail and resource (its capacity; what a release frees)
            for kind in SAME_KINDS:
                assert sorted(as_yunikorn(records, kind)) == sorted(as_yunikorn(want["EventRecords"], kind)), kind

            status, three = await anyio.to_thread.run_sync(events_of, port, "?count=3")
            assert status == 200 and three["EventRecords"] == records[-3:]
            assert three["HighestID"] == batch["HighestID"]
            status, resumed = await anyio.to_thread.run_sync(events_of, port, f"?start={three['LowestID']}")
            assert resumed["EventRecords"] == records[-3:]  # a reader resumes from an id
            status, bad = await anyio.to_thread.run_sync(events_of, port, "?count=0")
            assert (status, bad) == (400, json.loads((REFERENCE / "ws_v1_events_batch.count-0.json").read_text()))

            # the stream: the last events, then each new one as it is decided
            stream = await anyio.to_thread.run_sync(open_stream, port, "/ws/v1/events/stream?count=3")
            try:
                lines = await anyio.to_thread.run_sync(read_lines, stream, 4)
                assert json.loads(lines[0]) == {"InstanceUUID": batch["InstanceUUID"]}
                assert [json.loads(x) for x in lines[1:]] == records[-3:]
                await client.add_applications([app("app-7", "root.a")])
                [new] = await anyio.to_thread.run_sync(read_lines, stream, 1)
                assert json.loads(new)["objectID"] == "app-7" and json.loads(new)["eventChangeDetail"] == 203
            finally:
                stream.close()

        # a restarted core answers the same events: they are the output stream's
        async with running_core(nats_server.url, api_port=port) as again:
            with anyio.fail_after(10):
                await again.http_started.wait()
            status, after = await anyio.to_thread.run_sync(events_of, port, f"?start={batch['LowestID']}")
            assert after["EventRecords"][:len(records)] == records
            assert after["InstanceUUID"] != batch["InstanceUUID"]  # another process


# (type, change, detail) of the events ykbus writes as YuniKorn does for the reference's state:
# node schedulable and added, allocations on apps and nodes, releases, application states
SAME_KINDS = [(3, 1, 302), (3, 2, None), (3, 2, 303), (3, 3, 303), (2, 2, 200), (2, 3, 500), (2, 3, 503),
              (2, 2, 203), (2, 1, 202), (2, 1, 204), (2, 1, 206), (2, 1, 207), (2, 1, 208)]


def as_yunikorn(records, kind):
    """The events of `kind`, what a run decides aside (which node, which placeholder, a
    rejection's wording): object, reference, whether a message is there, resource."""
    out = []
    for e in records:
        if (e["type"], e.get("eventChangeType"), e.get("eventChangeDetail")) == kind:
            obj = "<node>" if e["type"] == 3 else e["objectID"]
            ref = re.sub(r"placeholder-\d", "placeholder-N", e.get("referenceID", ""))
            out.append(json.dumps([obj, ref, "message" in e, e["resource"]], sort_keys=True))
    return out


class Stream:
    """A chunked HTTP answer read line by line (the test's own client: urllib would wait for its end)."""

    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        self.buf, self.lines = b"", []
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head, head

    def read(self, n: int) -> list[str]:
        while len(self.lines) < n:
            while b"\r\n" not in self.buf:
                self.buf += self.sock.recv(65536)
            size_text, _, rest = self.buf.partition(b"\r\n")
            size = int(size_text, 16)
            while len(rest) < size + 2:
                rest += self.sock.recv(65536)
            self.lines += [x for x in rest[:size].decode().splitlines() if x]
            self.buf = rest[size + 2:]
        out, self.lines = self.lines[:n], self.lines[n:]
        return out

    def close(self) -> None:
        self.sock.close()


def open_stream(port: int, path: str) -> Stream:
    return Stream(port, path)


def read_lines(stream: Stream, n: int) -> list[str]:
    return stream.read(n)
