"""Readers (issue 23): `ykbus core --reader` applies the log and answers every read (the NATS
read API, HTTP, YuniKorn's REST API, metrics); a leader started with `--no-reads` answers
none, so no request waits on the writer's loop, and a reader is never a candidate."""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request
from contextlib import asynccontextmanager

import anyio
import nats
import nats.js.errors
import pytest

from tests.faults.test_failover import Candidate, leader_of
from tests.faults.test_resilience import output_stream
from tests.integration.conftest import Recorder, rm_client
from tests.integration.test_bus import app, ask, node, start_rm

pytestmark = pytest.mark.anyio


def get_json(port: int, path: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.loads(r.read())


def post_json(port: int, path: str, body: dict) -> object:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


async def nats_health(url: str) -> dict:
    nc = await nats.connect(url)
    try:
        return json.loads((await nc.request("yk.v1.api.health", b"", timeout=5)).data)
    finally:
        await nc.close()


@asynccontextmanager
async def writer_and_reader(url: str):
    """A leader that answers no reads and a reader beside it, the leader elected."""
    leader = Candidate(url, "--no-reads").start()
    reader = Candidate(url, "--reader").start()
    try:
        await leader_of([leader])
        yield leader, reader
    finally:
        reader.terminate()
        leader.terminate()


async def until(check, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not await anyio.to_thread.run_sync(check):
            await anyio.sleep(0.05)


async def test_a_reader_answers_every_read_and_the_writer_none(nats_server):
    async with writer_and_reader(nats_server.url) as (leader, reader):
        async with rm_client(nats_server.url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=4000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask(f"p{i}", "a1", vcore=100) for i in range(5)])
            await rec.wait_for(lambda: len(rec.allocations) == 5)
        await until(lambda: (reader.health() or {}).get("stats", {}).get("allocations") == 5)
        await until(lambda: (reader.health() or {}).get("leader") is not None)  # it looks at the lease every 0.1 s
        for _ in range(5):  # the queue group has one member: every NATS read reaches the reader
            h = await nats_health(nats_server.url)
            assert h["role"] == "reader" and h["leader"]["pid"] == leader.proc.pid
        apps = get_json(reader.port, "/ws/v1/partition/default/applications/active")  # YuniKorn's REST, read there
        assert [(a["applicationID"], len(a["allocations"])) for a in apps] == [("a1", 5)]
        job = {"application": {"applicationID": "dry", "queueName": "root.prod"},
               "asks": [{"allocationKey": "w", "applicationID": "dry", "maxAllocations": 4,
                         "resourceAsk": {"resources": {"vcore": {"value": 1000}}}}]}
        answer = post_json(reader.port, "/api/wouldfit", job)["wouldfit"]  # a dry run, at once, on one state
        assert answer["fits"] is False and answer["smaller"]["members"] == 3  # 500 of 4,000 vcore used
        assert answer["entriesBetween"] == 0 and answer["lastSeq"] == reader.health()["lastSeq"]
        assert "ykbus_core_leader 0.0" in reader.metrics()
        assert reader.health()["stats"]["outputs"] == 0  # it publishes nothing


async def test_reads_go_on_while_the_writer_is_paused_and_the_writer_never_waits_for_a_reader(nats_server):
    async with writer_and_reader(nats_server.url) as (leader, reader):
        async with rm_client(nats_server.url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=8000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask("p0", "a1", vcore=100)])
            await rec.wait_for(lambda: len(rec.allocations) == 1)
            await until(lambda: (reader.health() or {}).get("stats", {}).get("allocations") == 1)

            os.kill(leader.proc.pid, signal.SIGSTOP)  # the writer stops: reads are answered all the same
            try:
                for _ in range(3):
                    assert (await nats_health(nats_server.url))["role"] == "reader"
                    assert reader.health()["stats"]["allocations"] == 1
            finally:
                os.kill(leader.proc.pid, signal.SIGCONT)

            os.kill(reader.proc.pid, signal.SIGSTOP)  # the reader stops: the writer goes on
            try:
                await client.add_asks([ask(f"q{i}", "a1", vcore=100) for i in range(10)])
                await rec.wait_for(lambda: len(rec.allocations) == 11)
            finally:
                os.kill(reader.proc.pid, signal.SIGCONT)
        await until(lambda: (reader.health() or {}).get("stats", {}).get("allocations") == 11)  # and it catches up


async def test_a_reader_answers_a_dry_run_in_the_middle_of_a_long_entry(nats_server):
    """A person asks "would this fit" over and over while an RM sends two messages of 3,000
    asks: the reader pauses those entries where their records are whole and answers in a
    pause (`entryInProgress`), and the entries go on to place all 6,000."""
    asks = 6000
    async with writer_and_reader(nats_server.url) as (_leader, reader):
        async with rm_client(nats_server.url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node(f"n{i}", vcore=100_000) for i in range(40)])
            await client.add_applications([app("a1")])
            await until(lambda: (reader.health() or {}).get("lastSeq", 0) > 0)
            job = {"application": {"applicationID": "dry", "queueName": "root.prod"},
                   "asks": [{"allocationKey": "w", "applicationID": "dry",
                             "resourceAsk": {"resources": {"vcore": {"value": 1000}}}}]}
            answers: list[dict] = []
            stop = threading.Event()

            def ask_again_and_again() -> None:  # as a person's script does, one after the other
                while not stop.is_set():
                    answers.append(post_json(reader.port, "/api/wouldfit", job)["wouldfit"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, ask_again_and_again)
                await anyio.sleep(0.2)
                for half in range(2):  # two long entries (a message stays well under NATS's 1 MiB)
                    await client.add_asks([ask(f"p{half}-{i}", "a1", vcore=10) for i in range(asks // 2)])
                await rec.wait_for(lambda: len(rec.allocations) == asks)
                await until(lambda: (reader.health() or {}).get("stats", {}).get("allocations") == asks)
                stop.set()
    paused = [a for a in answers if "entryInProgress" in a]
    assert paused, f"no dry run was answered in the middle of the entry ({len(answers)} answered)"
    assert all(a["lastSeq"] == a["entryInProgress"] - 1 and a["entriesBetween"] == 0 for a in paused)
    assert all(a["fits"] for a in answers)


async def test_a_reader_never_leads(nats_server):
    """With the leader gone a reader stays a reader (no outputs published twice, no appends),
    says nobody leads, and names the next leader once one starts."""
    leader = Candidate(nats_server.url).start()
    reader = Candidate(nats_server.url, "--reader").start()
    try:
        first = await leader_of([leader])
        async with rm_client(nats_server.url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=4000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask(f"p{i}", "a1", vcore=100) for i in range(3)])
            await rec.wait_for(lambda: len(rec.allocations) == 3)
        await until(lambda: (reader.health() or {}).get("stats", {}).get("allocations") == 3)
        before = await output_stream(nats_server.url)
        first.kill()
        await until(lambda: (reader.health() or {}).get("leader") is None, timeout=30)
        await anyio.sleep(3)  # three lease TTLs: a candidate would have taken over by now
        h = reader.health()
        assert h["role"] == "reader" and h["term"] == 0 and h["leader"] is None
        assert await output_stream(nats_server.url) == before
        second = Candidate(nats_server.url).start()
        try:
            await leader_of([second])
            await until(lambda: ((reader.health() or {}).get("leader") or {}).get("pid") == second.proc.pid)
        finally:
            second.terminate()
    finally:
        reader.terminate()
        if leader.proc.poll() is None:
            leader.terminate()


async def test_a_reader_waits_for_a_core_and_changes_none_of_its_streams(nats_server):
    """Started first, a reader waits for a core to make the streams; it never makes or
    changes them (a core's limits stay as that core set them)."""
    from ykbus.bus.subjects import OUT_STREAM

    reader = Candidate(nats_server.url, "--reader").start()
    try:
        await anyio.sleep(1.5)
        assert reader.proc.poll() is None and reader.health() is None  # waiting, not serving yet
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.stream_info(OUT_STREAM)
        leader = Candidate(nats_server.url, "--out-max-bytes", "12345678").start()
        try:
            await leader_of([leader])
            await until(lambda: (reader.health() or {}).get("role") == "reader")
            reader.terminate()
            again = Candidate(nats_server.url, "--reader").start()  # default limits on its command line
            try:
                await until(lambda: (again.health() or {}).get("role") == "reader")
                assert (await js.stream_info(OUT_STREAM)).config.max_bytes == 12345678
            finally:
                again.terminate()
        finally:
            leader.terminate()
            await nc.close()
    finally:
        if reader.proc.poll() is None:
            reader.terminate()
