"""The core on a real NATS server, checked only through the wire contract."""

from __future__ import annotations

import json
import logging

import anyio
import nats
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from ykbus.bus.client import InProcessScheduler, NotRunning, RegistrationError, ResourceManagerClient
from ykbus.bus.subjects import OUT_STREAM
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
          - name: dev
            resources: {max: {vcore: 2}}
"""


def res(**q):
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


def node(node_id, **q):
    return m.NodeInfo(nodeID=node_id, action=m.ActionFromRM.CREATE, schedulableResource=res(**q))


def ask(key, app, **q):
    return m.AllocationAsk(allocationKey=key, applicationID=app, resourceAsk=res(**q), maxAllocations=1)


def app(app_id, queue="root.prod"):
    return m.AddApplicationRequest(applicationID=app_id, queueName=queue, partitionName="default",
                                   ugi=m.UserGroupInformation(user="u"))


async def start_rm(api, rm_id, rec, nodes=(), apps=(), config=QUEUES):
    client = ResourceManagerClient(api, rm_id, config=config, callback=rec)
    await client.start(apps=apps, nodes=nodes)
    return client


async def test_registration_allocation_and_release_round_trip(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000, memory=4000)])
        assert client.state.value == "Running"
        await client.add_applications([app("a1")])
        await client.add_asks([ask("pod-1", "a1", vcore=1000, memory=100)])
        await rec.wait_for(lambda: rec.allocations)
        alloc = rec.allocations[0]
        assert (alloc.allocationKey, alloc.nodeID, alloc.applicationID) == ("pod-1", "n1", "a1")
        await client.release([m.AllocationRelease(applicationID="a1", UUID=alloc.UUID, partitionName="default")])
        await rec.wait_for(lambda: rec.released)
        assert rec.released[0].terminationType == "STOPPED_BY_RM"


async def test_an_output_stored_again_past_the_duplicate_window_is_handed_to_the_rm_once(nats_server):
    """Review: a leader stalled past YK_OUT's duplicate window (120 s) stored some outputs a
    second time, later in the stream, and the RM acted on the copies (pods ran twice). The
    client drops an output whose id it handed over already (docs/protocol.md, "Outputs and
    resuming"), and only that."""
    from ykbus.bus.subjects import OUT_STREAM

    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000, memory=4000)])
        await client.add_applications([app("a1")])
        await client.add_asks([ask("pod-1", "a1", vcore=1000, memory=100)])
        await rec.wait_for(lambda: rec.allocations)
        nc = await nats.connect(nats_server.url)
        try:
            js = nc.jetstream()
            first = await js.get_last_msg(OUT_STREAM, "yk.v1.out.k8s.alloc")
            config = (await js.stream_info(OUT_STREAM)).config
            config.duplicate_window = 0.2  # (seconds) a stall past it, shortened
            await js.update_stream(config)
            await anyio.sleep(0.5)
            again = await js.publish(first.subject, first.data, headers=first.headers)
            assert again.seq > first.seq and not again.duplicate  # stored a second time
        finally:
            await nc.close()
        await client.add_asks([ask("pod-2", "a1", vcore=1000, memory=100)])
        await rec.wait_for(lambda: len(rec.allocations) >= 2)
        await anyio.sleep(0.3)
        assert [a.allocationKey for a in rec.allocations] == ["pod-1", "pod-2"]
        # but an output of an earlier entry not handed over yet (a publish retried after a
        # failure, a standby's takeover: stored after later ones) is handed over
        nc = await nats.connect(nats_server.url)
        try:
            in_seq = first.headers["Yk-In-Seq"]
            await nc.jetstream().publish(first.subject, first.data, headers={**first.headers,
                                                                              "Nats-Msg-Id": f"{in_seq}-99"})
        finally:
            await nc.close()
        await rec.wait_for(lambda: len(rec.allocations) >= 3)
        assert [a.allocationKey for a in rec.allocations] == ["pod-1", "pod-2", "pod-1"]


@pytest.mark.parametrize("rm_id", ["r" * 300, "é" * 120 + "-long-rm"])
async def test_an_rm_with_a_long_id_reads_its_outputs(nats_server, rm_id):
    """An rmID may be 1,024 characters: one past about 250 registered, then could never attach
    (its output consumer was named after it, and JetStream keeps it in a directory of that
    name): it got no allocation ever."""
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, rm_id, rec, nodes=[node("n1", vcore=4000, memory=4000)])
        await client.add_applications([app("a1")])
        await client.add_asks([ask("pod-1", "a1", vcore=1000, memory=100)])
        with anyio.fail_after(20):
            await rec.wait_for(lambda: rec.allocations)


async def test_an_attach_no_rm_could_make_is_answered_why(nats_server):
    """An attach under an rmID no registration takes (several tokens, over 1,024 characters)
    is answered with the reason: no answer at all tells an RM that no core runs yet, and it
    would ask again for ever."""
    async with running_core(nats_server.url):
        nc = await nats.connect(nats_server.url)
        try:
            dotted = json.loads((await nc.request("yk.v1.attach.a.b", b"{}", timeout=5)).data)
            long = json.loads((await nc.request("yk.v1.attach." + "r" * 1100, b"{}", timeout=5)).data)
            fine = json.loads((await nc.request("yk.v1.attach.r1", b"{}", timeout=5)).data)
            # a control character: `ykbus up`'s verdicts name RMs, and a terminal acts on it (a security review)
            ansi = json.loads((await nc.request("yk.v1.attach.ansi\x1b]0;TITLE\x07", b"{}", timeout=5)).data)
        finally:
            await nc.close()
    assert dotted == {"error": "rmID 'a.b' is not a NATS token: no '.', '*', '>' or whitespace"}
    assert ansi == {"error": "rmID 'ansi\\x1b]0;TITLE\\x07' holds a control character"}
    assert long == {"error": "rmID of 1100 characters: at most 1024"}
    assert fine["consumer"] == "rm_r1"


async def test_a_read_request_that_is_not_json_is_told_so(nats_server):
    async with running_core(nats_server.url):
        nc = await nats.connect(nats_server.url)
        try:
            answer = json.loads((await nc.request("yk.v1.api.apps", b"rm=k8s", timeout=5)).data)
        finally:
            await nc.close()
    assert answer["error"].startswith("the request body is not JSON (Expecting value: line 1 column 1 (char 0)): "
                                      "send a JSON object"), answer


async def test_invalid_registration_is_refused_with_the_reason(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        client = ResourceManagerClient(api, "bad", config="partitions: [{name: default, queues: [{name: a.b}]}]")
        with pytest.raises(RegistrationError, match="contains a dot"):
            await client.start()
        assert client.state.value == "Failed"
        with pytest.raises(NotRunning):
            await client.add_asks([ask("x", "y", vcore=1)])


async def test_two_rms_share_one_core_with_isolated_partitions(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api1, rm_client(nats_server.url) as api2:
        rec1, rec2 = Recorder(), Recorder()
        c1 = await start_rm(api1, "k8s", rec1, nodes=[node("n1", vcore=1000)])
        c2 = await start_rm(api2, "yarn", rec2, nodes=[node("n1", vcore=8000)])  # same node id, other RM
        await c1.add_applications([app("a")])
        await c2.add_applications([app("a")])
        await c1.add_asks([ask("k", "a", vcore=2000)])  # too big for k8s's node
        await c2.add_asks([ask("k", "a", vcore=2000)])
        await rec2.wait_for(lambda: rec2.allocations)
        await rec1.wait_for(lambda: rec1.states)
        assert rec1.allocations == [] and rec1.states[0].state == "FAILED"
        assert rec2.allocations[0].nodeID == "n1"


async def test_malformed_json_is_answered_and_the_next_message_applies(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000)])
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.publish("yk.v1.in.k8s.app", b"{this is not json")
        await nc.close()
        await client.add_applications([app("a1")])
        await rec.wait_for(lambda: rec.events and rec.app)
        assert "invalid app message" in rec.events[0].message
        assert rec.app[0].accepted[0].applicationID == "a1"


async def test_read_api_answers_with_queue_usage(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000)])
        await client.add_applications([app("a1", "root.dev")])
        await client.add_asks([ask("k", "a1", vcore=1000)])
        await rec.wait_for(lambda: rec.allocations)
        nc = await nats.connect(nats_server.url)
        reply = json.loads((await nc.request("yk.v1.api.queues", b'{"rm": "k8s"}', timeout=5)).data)
        dev = reply["queues"]["k8s"]["default"]["root.dev"]
        assert dev["allocated"] == {"vcore": 1000} and dev["max"] == {"vcore": 2000}
        health = json.loads((await nc.request("yk.v1.api.health", b"", timeout=5)).data)
        assert health["status"] == "ok" and health["rms"] == {"k8s": "Running"}
        for verb in ("state", "partitions", "applications", "nodes"):
            body = json.loads((await nc.request(f"yk.v1.api.{verb}", b"", timeout=5)).data)
            assert "error" not in body
        bad = json.loads((await nc.request("yk.v1.api.bogus", b"", timeout=5)).data)
        assert "unknown verb" in bad["error"]
        bad = json.loads((await nc.request("yk.v1.api.queues", b'{"rm": 5}', timeout=5)).data)
        assert bad == {"error": "rm: expected a string (an id), got int"}  # (it answered {"queues": {}})
        bad = json.loads((await nc.request("yk.v1.api.queues", b"[" * 100_000, timeout=5)).data)
        assert bad == {"error": "the request is nested too deep to read"}
        await nc.close()


async def test_outputs_carry_input_seq_and_dedup_ids(nats_server):
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000)])
        await client.add_applications([app("a1")])
        await rec.wait_for(lambda: rec.app)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    info = await js.stream_info(OUT_STREAM)
    ids = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(OUT_STREAM, seq)
        in_seq, msg_id = msg.headers["Yk-In-Seq"], msg.headers["Nats-Msg-Id"]
        assert msg_id.startswith(f"{in_seq}-")
        ids.append(msg_id)
    assert len(ids) == len(set(ids)) >= 3
    await nc.close()


async def test_in_process_transport_has_the_same_interface():
    api = InProcessScheduler(clock=iter(range(10**18, 10**18 + 10**6, 1000)).__next__)
    rec = Recorder()
    client = await start_rm(api, "emb", rec, nodes=[node("n1", vcore=2000)], apps=[app("a1")])
    await client.add_asks([ask("k", "a1", vcore=1000)])
    assert rec.allocations[0].nodeID == "n1"
    assert rec.app[0].accepted[0].applicationID == "a1"


async def test_recovery_sends_apps_before_nodes_with_existing_allocations(nats_server):
    existing = m.Allocation(allocationKey="old-pod", UUID="u-1", applicationID="a1", nodeID="n1",
                            partitionName="default", resourcePerAlloc=res(vcore=3000))
    n1 = m.NodeInfo(nodeID="n1", action=m.ActionFromRM.CREATE, schedulableResource=res(vcore=4000),
                    existingAllocations=[existing])
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[n1], apps=[app("a1")])
        assert client.state.value == "Running" and client.rejected == {}
        await client.add_asks([ask("new-pod", "a1", vcore=2000)])
        await rec.wait_for(lambda: rec.states)
        assert rec.allocations == []  # only 1000 vcore left: the recovered allocation counts
        await client.release([m.AllocationRelease(applicationID="a1", UUID="u-1", partitionName="default")])
        await rec.wait_for(lambda: rec.allocations)
        assert rec.allocations[0].allocationKey == "new-pod"


def test_split_output_keeps_every_item_in_order_under_the_limit():
    import msgspec

    from ykbus.bus.publisher import split_output
    from ykbus.si.codec import encode
    msg = m.AllocationResponse(
        new=[m.Allocation(allocationKey=f"k{i}", UUID=f"9-{i}", nodeID="n1", applicationID="a") for i in range(3000)],
        rejected=[m.RejectedAllocationAsk("bad", "a", "why")])
    parts = split_output(msg, "json", 40_000)
    assert len(parts) > 1 and all(len(p) <= 40_000 - 4096 for p in parts)
    decoded = [msgspec.json.decode(p, type=m.AllocationResponse) for p in parts]
    assert [a.allocationKey for d in decoded for a in d.new] == [f"k{i}" for i in range(3000)]
    assert sum(len(d.rejected) for d in decoded) == 1
    assert split_output(msg, "json", 40_000) == parts  # deterministic: stable message ids
    assert split_output(msg, "json", 10**8) == [encode(msg)]  # small enough: one message


async def test_an_output_larger_than_the_max_payload_arrives_in_parts(tmp_path):
    from ykbus.bus.server import NatsServer

    with NatsServer(store_dir=str(tmp_path / "small"), max_payload=200_000) as server:
        async with running_core(server.url), rm_client(server.url) as api:
            rec = Recorder()
            client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=10**9)])
            await client.add_applications([app("a1")])
            tags = {"kubernetes.io/meta/podName": "x" * 200}
            for b in range(3):
                await client.add_asks([msgspec_replace(ask(f"b{b}-{i}", "a1", vcore=1), tags) for i in range(500)])
            await rec.wait_for(lambda: len(rec.allocations) == 1500)
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        info = await js.stream_info(OUT_STREAM)
        per_entry: dict[str, int] = {}
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await js.get_msg(OUT_STREAM, seq)
            per_entry[msg.headers["Yk-In-Seq"]] = per_entry.get(msg.headers["Yk-In-Seq"], 0) + 1
        await nc.close()
        assert max(per_entry.values()) >= 2  # one entry's allocations went out in parts
        assert sorted(a.allocationKey for a in rec.allocations) == sorted(f"b{b}-{i}" for b in range(3) for i in range(500))


def msgspec_replace(struct, tags):
    import msgspec
    return msgspec.structs.replace(struct, tags=tags)


async def test_in_process_ticks_fire_timers():
    """Regression: InProcessScheduler.tick() raised (the core looked for a tick handler)."""
    now = [10**18]
    api = InProcessScheduler(clock=lambda: now[0])
    rec = Recorder()
    client = await start_rm(api, "emb", rec, nodes=[node("n1", vcore=2000)], apps=[app("a1")])
    await client.add_asks([ask("k", "a1", vcore=1000)])
    await client.release([m.AllocationRelease(applicationID="a1", UUID=rec.allocations[0].UUID,
                                              partitionName="default")])
    now[0] += 31 * 10**9  # past the 30 s completing timeout
    await api.tick()
    states = [u.state for r in rec.app for u in r.updated]
    assert states[-2:] == ["Completing", "Completed"]


async def test_the_service_counts_rejections_per_rm_for_the_operator(nats_server):
    """`ykbus up` shows them on its progress line (issue 20, item 5): before, rejections
    reached only the RM's own subjects."""
    async with running_core(nats_server.url) as service, rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000)])
        await client.add_applications([app("a1"), app("bad", queue="root.nowhere")])
        await client.add_asks([ask("pod-1", "ghost", vcore=1000)])  # an ask of an application that does not exist
        await rec.wait_for(lambda: rec.rejected_asks and any(r.rejected for r in rec.app))
        assert service.publisher.rejections["k8s"] == 2 and service.publisher.rejections["other"] == 0


async def test_a_read_answer_too_large_for_nats_is_an_error_saying_so_not_a_timeout(tmp_path):
    """With a server's max_payload of 256 KiB, a state of nodes with long attributes does not
    fit in one reply: the asker gets an error naming the size and what to do (it timed out)."""
    from ykbus.bus.server import NatsServer
    small = NatsServer(store_dir=str(tmp_path / "nats"), max_payload=256 * 1024)
    small.start()
    try:
        async with running_core(small.url), rm_client(small.url) as api:
            rec = Recorder()
            await start_rm(api, "k8s", rec)
            for i in range(12):  # one node a message: each fits
                await api.update_node(m.NodeRequest(rmID="k8s", nodes=[m.NodeInfo(
                    nodeID=f"n{i}", action=m.ActionFromRM.CREATE, schedulableResource=res(vcore=1000),
                    attributes={"note": "x" * 30_000})]))
            await rec.wait_for(lambda: sum(len(r.accepted) for r in rec.node) == 12)
            nc = await nats.connect(small.url)
            try:
                body = json.loads((await nc.request("yk.v1.api.state", b"", timeout=5)).data)
                assert "over what the NATS server takes in one message" in body["error"]
                assert "GET /api/state" in body["error"]
                health = json.loads((await nc.request("yk.v1.api.health", b"", timeout=5)).data)
                assert health["status"] == "ok"
            finally:
                await nc.close()
    finally:
        small.cleanup()


async def test_snapshots_are_stored_on_a_server_taking_messages_smaller_than_a_chunk(tmp_path, caplog):
    """A nats-server whose max_payload is below the object store's chunk (128 KiB) refused
    every snapshot upload: each failed and was tried again, and a restarted core replayed the
    whole log. The chunks now fit the server's max_payload, and a new core loads the state."""
    from ykbus.bus.server import NatsServer
    from ykbus.bus.streams import SNAPSHOT_BUCKET
    small = NatsServer(store_dir=str(tmp_path / "nats"), max_payload=64 * 1024)
    small.start()
    try:
        async with running_core(small.url, snapshot_every=5) as service, rm_client(small.url) as api:
            rec = Recorder()
            await start_rm(api, "k8s", rec)
            for i in range(12):  # one node a message, each within the max_payload; the state is well over 128 KiB
                await api.update_node(m.NodeRequest(rmID="k8s", nodes=[m.NodeInfo(
                    nodeID=f"n{i}", action=m.ActionFromRM.CREATE, schedulableResource=res(vcore=1000),
                    attributes={"note": "x" * 20_000})]))
            await rec.wait_for(lambda: sum(len(r.accepted) for r in rec.node) == 12)
            with anyio.fail_after(20):
                while service.snapshots.taken < 2 and not service.snapshots.failed:
                    await anyio.sleep(0.05)
            assert service.snapshots.failed == 0
        nc = await nats.connect(small.url)
        try:
            info = await (await nc.jetstream().object_store(SNAPSHOT_BUCKET)).get_info(service.snapshots.name)
            assert info.size > 240_000 and info.chunks >= 4, info  # each within the max_payload
        finally:
            await nc.close()
        caplog.set_level(logging.INFO)
        async with running_core(small.url):
            loaded = [r.fields for r in caplog.records if r.getMessage() == "snapshot loaded"]
        assert loaded and loaded[0]["from"] == "object store" and loaded[0]["bytes"] == info.size, loaded
    finally:
        small.cleanup()


async def test_a_registration_hands_the_rm_no_decision_of_the_session_it_ends(nats_server):
    """An RM that registers again (YuniKorn's recovery) starts from the state it reports: an
    allocation decided after its last session stopped reading, which it never processed, is
    not handed to its new session (the registration wiped it from the core: an RM that took it
    would run a pod the core does not know)."""
    async with running_core(nats_server.url):
        async with rm_client(nats_server.url) as api:
            rec = Recorder()
            client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000, memory=4000)])
            await client.add_applications([app("a1")])
            await rec.wait_for(lambda: rec.app)
        async with rm_client(nats_server.url) as late:  # the ask the RM published as it went away
            decided = await late.nc.subscribe("yk.v1.out.k8s.alloc", max_msgs=1)
            await late.publish("alloc", m.AllocationRequest(asks=[ask("pod-1", "a1", vcore=1000, memory=100)],
                                                            rmID="k8s"), rm="k8s")
            await decided.next_msg(timeout=10)  # allocated, and stored in the RM's outputs
        async with rm_client(nats_server.url) as api:
            rec = Recorder()
            client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000, memory=4000)], apps=[app("a1")])
            await client.add_asks([ask("pod-2", "a1", vcore=1000, memory=100)])
            await rec.wait_for(lambda: any(a.allocationKey == "pod-2" for a in rec.allocations))
            assert [a.allocationKey for a in rec.allocations] == ["pod-2"]
