"""Crashes, restarts and disconnects: nothing acked is lost, nothing is decided twice."""

from __future__ import annotations

import json

import anyio
import nats
import pytest

from tests.integration.conftest import CoreProcess, Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus.subjects import IN_STREAM, OUT_STREAM, SNAPSHOT_BUCKET
from ykbus.log.jsonl import read_entries
from ykbus.log.replay import replay
from ykbus.si import codec
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio


async def api(url, verb, body=b""):
    nc = await nats.connect(servers=url.split(","))
    try:
        return json.loads((await nc.request(f"yk.v1.api.{verb}", body, timeout=5)).data)
    finally:
        await nc.close()


async def wait_until_applied(url, timeout=60.0):
    """Until the core has applied every entry of the input log (the read API says so)."""
    nc = await nats.connect(servers=url.split(","))
    js = nc.jetstream()
    try:
        last = (await js.stream_info(IN_STREAM)).state.last_seq
        with anyio.fail_after(timeout):
            while True:
                try:
                    reply = await nc.request("yk.v1.api.health", b"", timeout=2)
                    if json.loads(reply.data)["lastSeq"] >= last:
                        return last
                except nats.errors.Error:
                    pass
                await anyio.sleep(0.05)
    finally:
        await nc.close()


async def output_stream(url):
    """Every message on YK_OUT as (subject, data, msg id)."""
    nc = await nats.connect(servers=url.split(","))
    js = nc.jetstream()
    info = await js.stream_info(OUT_STREAM)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(OUT_STREAM, seq)
        out.append((msg.subject, msg.data, msg.headers["Nats-Msg-Id"]))
    await nc.close()
    return out


async def replayed_outputs(url, tmp_path):
    """What a fresh core decides from the recorded input log, as (subject, data)."""
    from ykbus.bus.record import record

    path = tmp_path / "in.jsonl"
    await record(url, str(path))
    with open(path, "rb") as f:
        return [(f"yk.v1.out.{o.rm or '_core'}.{o.kind}", codec.encode(o.msg)) for o in replay(read_entries(f))]


async def assert_outputs_are_the_replay(url, tmp_path):
    """Every output on YK_OUT once (no message id twice), and exactly what a fresh core
    decides from the recorded input log, in order: nothing lost, nothing twice."""
    published = await output_stream(url)
    ids = [msg_id for _, _, msg_id in published]
    assert len(ids) == len(set(ids)), "an output was stored twice"
    assert [(s, d) for s, d, _ in published] == await replayed_outputs(url, tmp_path), "a decision differs or was lost"


def stop_all(cores) -> None:
    for c in cores:
        if c.proc and c.proc.poll() is None:
            c.terminate()


async def test_kill_9_in_the_middle_of_a_batch_loses_and_duplicates_nothing(nats_server, tmp_path):
    core = CoreProcess(nats_server.url, "--snapshot-every", "25", "--rm-pause", "600").start()
    async with rm_client(nats_server.url) as rm:
        rec = Recorder()
        client = await start_rm(rm, "k8s", rec, nodes=[node(f"n{i}", vcore=4000) for i in range(20)])
        await client.add_applications([app(f"a{i}") for i in range(10)])
        for batch in range(60):
            await client.add_asks([ask(f"p{batch}-{i}", f"a{i % 10}", vcore=100) for i in range(10)])
            if batch == 30:
                await rec.wait_for(lambda: len(rec.allocations) > 50)
                core.kill()  # outputs in flight, a snapshot maybe half way
                core = CoreProcess(nats_server.url, "--snapshot-every", "25", "--rm-pause", "600").start()
        await wait_until_applied(nats_server.url)
        await rec.wait_for(lambda: len(rec.allocations) == 600)
    core.terminate()
    await assert_outputs_are_the_replay(nats_server.url, tmp_path)
    assert sorted(a.allocationKey for a in rec.allocations) == sorted(f"p{b}-{i}" for b in range(60) for i in range(10))


async def test_restart_resumes_from_the_snapshot(nats_server, tmp_path):
    core = CoreProcess(nats_server.url, "--snapshot-every", "5", "--rm-pause", "600").start()
    async with rm_client(nats_server.url) as rm:
        rec = Recorder()
        client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=2000)])
        await client.add_applications([app("a1")])
        for i in range(12):
            await client.add_asks([ask(f"k{i}", "a1", vcore=100)])
        last = await wait_until_applied(nats_server.url)
        assert core.terminate() == 0  # clean stop writes a final snapshot
        nc = await nats.connect(nats_server.url)
        store = await nc.jetstream().object_store(SNAPSHOT_BUCKET)
        snap = await store.get("core")
        from ykbus.core.snapshot import load_snapshot
        assert load_snapshot(snap.data).last_seq == last
        await nc.close()

        core = CoreProcess(nats_server.url, "--rm-pause", "600").start()
        stderr_lines = []
        await client.add_asks([ask("big", "a1", vcore=900)])  # 800 free: must wait, state kept
        await client.add_asks([ask("fits", "a1", vcore=800)])
        await rec.wait_for(lambda: any(a.allocationKey == "fits" for a in rec.allocations))
        assert not any(a.allocationKey == "big" for a in rec.allocations)
    core.terminate()
    stderr_lines = core.stderr().splitlines()
    loaded = [json.loads(line) for line in stderr_lines if '"snapshot loaded"' in line]
    assert loaded and loaded[0]["last_seq"] == last
    assert [(s, d) for s, d, _ in await output_stream(nats_server.url)] == await replayed_outputs(nats_server.url, tmp_path)


async def test_nats_server_restart_is_ridden_out(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as rm:
        rec = Recorder()
        client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=4000)])
        await client.add_applications([app("a1")])
        await client.add_asks([ask("before", "a1", vcore=100)])
        await rec.wait_for(lambda: len(rec.allocations) == 1)
        nats_server.stop()
        nats_server.start()  # same port, same file store
        await client.add_asks([ask("after", "a1", vcore=100)])  # retried until the server is back
        await rec.wait_for(lambda: len(rec.allocations) == 2, timeout=30)
        assert rec.allocations[1].allocationKey == "after"


async def test_rm_without_heartbeat_goes_paused_then_stopped(nats_server):
    async with running_core(nats_server.url, heartbeat_pause_s=0.6, heartbeat_stop_s=0.8):
        nc = await nats.connect(nats_server.url)
        events = []
        got = anyio.Event()

        async def on_event(msg):
            events.extend(e["message"] for e in json.loads(msg.data)["events"])
            got.set()

        await nc.subscribe("yk.v1.out.k8s.event", cb=on_event)
        rec = Recorder()
        async with rm_client(nats_server.url, heartbeat_s=0.1) as rm:
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=4000)])
            await client.add_applications([app("a1")])
            await rec.wait_for(lambda: rec.app)
        # the RM is gone: no more heartbeats
        with anyio.fail_after(20):
            while not any("is Stopped" in e for e in events):
                got = anyio.Event()
                await got.wait()
        paused = next(i for i, e in enumerate(events) if "is Paused" in e)
        stopped = next(i for i, e in enumerate(events) if "is Stopped" in e)
        assert paused < stopped and "removed" in events[stopped]
        state = await api(nats_server.url, "state")
        assert state["rms"]["k8s"]["state"] == "Stopped" and state["rms"]["k8s"]["partitions"] == {}
        await nc.close()


async def test_paused_rm_that_heartbeats_again_is_running(nats_server):
    async with running_core(nats_server.url, heartbeat_pause_s=0.5, heartbeat_stop_s=600):
        rec = Recorder()
        async with rm_client(nats_server.url, heartbeat_s=0.1) as rm:
            await start_rm(rm, "k8s", rec)
        with anyio.fail_after(15):
            while (await api(nats_server.url, "health"))["rms"]["k8s"] != "Paused":
                await anyio.sleep(0.1)
        async with rm_client(nats_server.url, heartbeat_s=0.1) as rm:
            await rm.attach("k8s", rec)
            with anyio.fail_after(15):
                while (await api(nats_server.url, "health"))["rms"]["k8s"] != "Running":
                    await anyio.sleep(0.1)


async def test_a_restarted_core_keeps_a_paused_rm_paused_until_it_is_heard(nats_server):
    """An RM that went away is Paused; the core restarts (or a standby takes over): the RM
    stays Paused, its waiting asks unplaced (it may be gone), and goes on to Stopped; only a
    heartbeat brings it back (the start of a core is no heartbeat of an RM's)."""
    rec = Recorder()
    async with running_core(nats_server.url, heartbeat_pause_s=0.5, heartbeat_stop_s=600):
        async with rm_client(nats_server.url, heartbeat_s=0.1) as rm:
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=1000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask("runs", "a1", vcore=1000)])
            await rec.wait_for(lambda: rec.allocations)
            await client.add_asks([ask("waits", "a1", vcore=1000)])
            await rec.wait_for(lambda: rec.states)
        with anyio.fail_after(15):
            while (await api(nats_server.url, "health"))["rms"]["k8s"] != "Paused":
                await anyio.sleep(0.1)
        nc = await nats.connect(nats_server.url)  # room for "waits", were the RM back
        await nc.jetstream().publish("yk.v1.in.k8s.node", json.dumps({"nodes": [
            {"nodeID": "n2", "action": "CREATE", "schedulableResource": {"resources": {"vcore": {"value": 4000}}}}]}).encode())
        await nc.close()
        await wait_until_applied(nats_server.url)
    async with running_core(nats_server.url, heartbeat_pause_s=0.5, heartbeat_stop_s=3):
        states = []
        for _ in range(15):  # 1.5 s: three times the pause, the monitor looking every 0.125 s
            states.append((await api(nats_server.url, "health"))["rms"]["k8s"])
            await anyio.sleep(0.1)
        assert set(states) == {"Paused"}, f"the restarted core brought back an RM it never heard: {states}"
        allocs = [json.loads(d) for subject, d, _ in await output_stream(nats_server.url) if subject.endswith(".alloc")]
        assert [a["allocationKey"] for o in allocs for a in o.get("new", [])] == ["runs"], "nothing placed for it"
        with anyio.fail_after(15):
            while (await api(nats_server.url, "health"))["rms"]["k8s"] != "Stopped":
                await anyio.sleep(0.1)


async def test_rm_reconnect_resumes_from_its_last_output(nats_server):
    async with running_core(nats_server.url):
        first = Recorder()
        async with rm_client(nats_server.url) as rm:
            client = await start_rm(rm, "k8s", first, nodes=[node("n1", vcore=1000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask("waits", "a1", vcore=3000)])
            await first.wait_for(lambda: first.states)
        # while the RM is away, capacity arrives (published by another party on its subject)
        nc = await nats.connect(nats_server.url)
        await nc.jetstream().publish("yk.v1.in.k8s.node", json.dumps({"nodes": [
            {"nodeID": "n2", "action": "CREATE", "schedulableResource": {"resources": {"vcore": {"value": 4000}}}}]}).encode())
        await nc.close()
        await wait_until_applied(nats_server.url)
        again = Recorder()
        async with rm_client(nats_server.url) as rm:
            await rm.attach("k8s", again)
            await again.wait_for(lambda: again.allocations)
        assert [a.allocationKey for a in again.allocations] == ["waits"]
        assert [n.accepted[0].nodeID for n in again.node] == ["n2"]  # only what it missed
        # the application's move to Running was missed too; nothing from before it left
        assert [(u.applicationID, u.state) for r in again.app for u in r.updated] == [("a1", "Running")]
        assert not any(r.accepted for r in again.app) and again.states == []


async def test_a_gap_in_the_input_log_stops_the_core_with_the_missing_range(nats_server):
    core = CoreProcess(nats_server.url).start()
    async with rm_client(nats_server.url) as rm:
        await start_rm(rm, "k8s", Recorder())
    core.terminate()
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    # entries 2 and 3 are appended, then 2 is deleted before any core applied it
    for _ in range(2):
        await js.publish("yk.v1.in._core.tick", b"{}")
    last = (await js.stream_info(IN_STREAM)).state.last_seq
    await js.delete_msg(IN_STREAM, last - 1)
    await nc.close()
    core = CoreProcess(nats_server.url).start()
    assert core.proc.wait(timeout=30) == 3
    err = core.stderr()
    assert "the input log has a gap" in err and f"input seq {last} follows {last - 2}" in err


async def test_restart_reads_the_local_snapshot_copy_only_when_its_digest_matches(nats_server, tmp_path):
    snaps = tmp_path / "snaps"
    flags = ("--snapshot-dir", str(snaps), "--rm-pause", "600")
    core = CoreProcess(nats_server.url, *flags).start()
    async with rm_client(nats_server.url) as rm:
        rec = Recorder()
        client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=2000)])
        await client.add_applications([app("a1")])
        await client.add_asks([ask("k1", "a1", vcore=1500)])
        await rec.wait_for(lambda: rec.allocations)
        await wait_until_applied(nats_server.url)
        assert core.terminate() == 0
        assert (snaps / "core.snap").exists()

        def loaded_from(proc):
            lines = [json.loads(x) for x in proc.stderr().splitlines() if '"snapshot loaded"' in x]
            return lines[0]["from"]

        core = CoreProcess(nats_server.url, *flags).start()
        await client.add_asks([ask("k2", "a1", vcore=1000)])  # 500 free: waits, the state came back
        await rec.wait_for(lambda: rec.states)
        core.terminate()
        assert loaded_from(core) == "local copy"

        (snaps / "core.snap").write_bytes(b"not the snapshot the store holds")
        core = CoreProcess(nats_server.url, *flags).start()
        await client.release([m.AllocationRelease(applicationID="a1", UUID=rec.allocations[0].UUID,
                                                  partitionName="default")])
        await rec.wait_for(lambda: any(a.allocationKey == "k2" for a in rec.allocations))
        core.terminate()
        assert loaded_from(core) == "object store"


async def test_an_input_log_purged_past_what_the_core_applied_stops_it_with_the_missing_range(nats_server):
    core = CoreProcess(nats_server.url).start()
    async with rm_client(nats_server.url) as rm:
        await start_rm(rm, "k8s", Recorder())
    core.terminate()  # its final snapshot holds what it applied
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    for _ in range(3):  # appended after the snapshot, then the whole log is purged
        await js.publish("yk.v1.in._core.tick", b"{}")
    last = (await js.stream_info(IN_STREAM)).state.last_seq
    await js.purge_stream(IN_STREAM)
    await nc.close()
    core = CoreProcess(nats_server.url).start()
    assert core.proc.wait(timeout=30) == 3
    err = core.stderr()
    assert "the input log has a gap" in err and f"entries {last - 2}..{last} are gone" in err


async def test_a_message_on_the_output_stream_with_a_bad_in_seq_header_does_not_stop_a_start(nats_server):
    """Anyone may publish to an open server: a message on YK_OUT whose `Yk-In-Seq` is not a
    sequence is read as having none, by a restarting core's scan and by a standby's tail."""
    core = CoreProcess(nats_server.url, "--rm-pause", "600").start()
    async with rm_client(nats_server.url) as rm:
        await start_rm(rm, "k8s", Recorder())
    core.terminate()
    nc = await nats.connect(nats_server.url)
    await nc.jetstream().publish("yk.v1.out.k8s.alloc", b"{}", headers={"Yk-In-Seq": "not-a-seq"})
    await nc.close()
    core = CoreProcess(nats_server.url, "--rm-pause", "600").start()
    try:
        last = await wait_until_applied(nats_server.url, timeout=30)
        assert last > 0 and core.proc.poll() is None
        async with rm_client(nats_server.url) as rm:  # and it schedules
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node("n1", vcore=1000)])
            await client.add_applications([app("a1")])
            await client.add_asks([ask("p", "a1", vcore=100)])
            await rec.wait_for(lambda: len(rec.allocations) == 1)
    finally:
        core.terminate()
