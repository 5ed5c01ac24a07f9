"""The per-message fast path (BENCHMARKS.md, "Per-message cost on the NATS path"): pipelined
RM publishes, the RM's standing pull request and its acks, the core's publish-ack window."""

from __future__ import annotations

import asyncio
import types

import anyio
import nats
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus import client as client_mod
from ykbus.bus import publisher as publisher_mod
from ykbus.bus.client import NatsScheduler
from ykbus.bus.publisher import OutputPublisher
from ykbus.bus.subjects import HDR_IN_SEQ, HDR_MSG_ID, OUT_STREAM, Subjects
from ykbus.core import Output
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio


async def test_pipelined_publishes_are_each_acked_applied_once_and_answered_once(nats_server):
    """Many publishes in flight on one connection: every one returns its own input seq, each
    ask is allocated exactly once, and the RM's consumer ends with nothing unacknowledged."""
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=1_000_000)])
        await client.add_applications([app("a1")])
        seqs: list[int] = []

        async def send(i: int) -> None:
            seqs.append(await api.publish("alloc", m.AllocationRequest(asks=[ask(f"k{i}", "a1", vcore=1)],
                                                                       rmID="k8s")))

        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(send, i)
        assert len(set(seqs)) == 200
        await rec.wait_for(lambda: len(rec.allocations) >= 200)
        keys = [a.allocationKey for a in rec.allocations]
        assert sorted(keys) == sorted(f"k{i}" for i in range(200))  # each once
        nc = await nats.connect(nats_server.url)
        try:
            with anyio.fail_after(10):
                await _acknowledged_to_the_last(nc, api)
        finally:
            await nc.close()


async def _acknowledged_to_the_last(nc, api) -> None:
    """Until the RM's consumer has the last output handled acknowledged, and none pending
    (AckAll at the end of a burst)."""
    while True:
        info = await nc.jetstream().consumer_info(OUT_STREAM, "rm_k8s")
        if info.num_ack_pending == 0 and info.ack_floor.stream_seq == api.last_output_seq:
            return
        await anyio.sleep(0.05)


async def test_the_standing_pull_request_is_renewed_when_it_expires(nats_server, monkeypatch):
    """An idle RM's pull request expires on the server and is made again: an output that
    comes after several expiries still arrives."""
    monkeypatch.setattr(client_mod, "PULL_EXPIRES_S", 0.2)
    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Recorder()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=4000)])
        await client.add_applications([app("a1")])
        await anyio.sleep(1.0)  # about five expiries
        await client.add_asks([ask("late", "a1", vcore=1)])
        with anyio.fail_after(5):
            await rec.wait_for(lambda: rec.allocations)
        assert [a.allocationKey for a in rec.allocations] == ["late"]


async def test_a_slow_rm_pulls_no_more_than_it_handles_and_acknowledges_what_it_handled(nats_server, monkeypatch):
    """An RM whose handler is slower than a pull request's life: the client asks for no more
    outputs while those delivered wait to be handled (else they pile up unacknowledged, to
    be delivered again), every output arrives once, and the last one handled is acknowledged
    although the request's end (a 408) arrives behind it."""
    monkeypatch.setattr(client_mod, "PULL_EXPIRES_S", 0.2)
    monkeypatch.setattr(client_mod, "PULL_BATCH", 4)

    class Slow(Recorder):
        async def update_allocation(self, response):
            await anyio.sleep(0.1)
            super().update_allocation(response)

    async with running_core(nats_server.url), rm_client(nats_server.url) as api:
        rec = Slow()
        client = await start_rm(api, "k8s", rec, nodes=[node("n1", vcore=1_000_000)])
        await client.add_applications([app("a1")])
        for i in range(30):  # an output each: 3 s of handling, over two pull requests' lives each batch
            await client.add_asks([ask(f"k{i}", "a1", vcore=1)])
        nc = await nats.connect(nats_server.url)
        try:
            most = 0
            with anyio.fail_after(20):
                while len(rec.allocations) < 30:
                    info = await nc.jetstream().consumer_info(OUT_STREAM, "rm_k8s")
                    most = max(most, info.num_ack_pending)
                    await anyio.sleep(0.05)
                assert sorted(a.allocationKey for a in rec.allocations) == sorted(f"k{i}" for i in range(30))
                # The client acknowledges a request's outputs before it makes the next request,
                # but the server applies acks and pull requests from separate queues: for a
                # moment the next request's outputs can be counted before the last ack. So two
                # requests' worth at most; a client that asked while outputs waited to be
                # handled (a request every 0.2 s, 4 each, against 10 handled a second) piles
                # up well past that.
                assert most <= 2 * 4, f"{most} outputs delivered and not acknowledged: more than two requests'"
                await _acknowledged_to_the_last(nc, api)
        finally:
            await nc.close()


async def test_an_output_delivered_again_is_not_handed_over_twice():
    api = NatsScheduler("nats://unused")
    api.rm = "k8s"
    rec = Recorder()
    api.callback = rec
    body = b'{"new": [{"allocationKey": "k1", "applicationID": "a1", "UUID": "3-0"}]}'

    def delivery(stream_seq: int):
        return types.SimpleNamespace(subject="yk.v1.out.k8s.alloc", data=body, headers={HDR_IN_SEQ: "3"},
                                     reply=f"$JS.ACK.{OUT_STREAM}.rm_k8s.1.{stream_seq}.{stream_seq}.1700000000000000000.0")

    await api._handle(delivery(7))
    await api._handle(delivery(7))  # redelivered after a reconnect, before its ack
    await api._handle(delivery(5))
    assert [a.allocationKey for a in rec.allocations] == ["k1"] and api.last_output_seq == 7


class _FakeNats:
    """Answers each publish on its reply subject like JetStream: `fail` lists message ids
    answered with an error the first time, `silent` ids never answered."""

    def __init__(self, fail=(), silent=()) -> None:
        self.fail, self.silent = set(fail), set(silent)
        self.published: list[tuple[str, dict]] = []
        self.cb = None

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, subject: str, cb):
        """As nats-py: `cb` is called with each message, in order, after the publish returns."""
        assert subject == "_INBOX.test.*"
        self.cb = cb
        return types.SimpleNamespace()

    async def publish(self, subject, data, reply="", headers=None):
        msg_id = headers[HDR_MSG_ID]
        self.published.append((msg_id, dict(headers)))
        if msg_id in self.silent:
            self.silent.discard(msg_id)
            return
        if msg_id in self.fail:
            self.fail.discard(msg_id)
            answer = b'{"error":{"code":503,"description":"insufficient resources"}}'
        else:
            answer = b'{"stream":"YK_OUT","seq":%d}' % len(self.published)
        msg = types.SimpleNamespace(subject=reply, data=answer, headers=None)
        asyncio.get_running_loop().call_soon(asyncio.ensure_future, self.cb(msg))


class _FakeJs:
    def __init__(self) -> None:
        self.republished: list[dict] = []

    async def publish(self, subject, data, headers=None):
        self.republished.append(dict(headers))


def _outputs(seq: int, n: int) -> list[Output]:
    return [Output(seq=seq, rm="k8s", kind="event", msg=m.EventBatch(events=[m.EventRecord(
        type=m.EventType.REQUEST, objectID="x", timestampNano=0, message=str(i))])) for i in range(n)]


async def test_a_publish_answered_with_an_error_is_sent_again_with_the_same_id():
    nc, js = _FakeNats(fail={"4-1"}), _FakeJs()
    stats = {"outputs": 0, "allocations": 0}
    pub = OutputPublisher(js, Subjects(), window=2, retries=3, stats=stats,
                          output_format=lambda rm: ("json", "number"), nc=nc)
    for seq in range(1, 6):
        await pub.send(pub.encode(seq, _outputs(seq, 2)))
    await pub.settle(0)
    assert [h[HDR_MSG_ID] for h in js.republished] == ["4-1"]
    assert js.republished[0][HDR_IN_SEQ] == "4"
    assert [i for i, _ in nc.published] == [f"{s}-{k}" for s in range(1, 6) for k in range(2)]
    assert not pub._inflight and not pub._by_number


async def test_a_leader_whose_lease_lapses_in_the_middle_of_an_entrys_outputs_sends_no_more_of_them():
    """Review (a leader SIGSTOPped in the middle of a burst for longer than YK_OUT's duplicate
    window): woken, it went on publishing the rest of the entry's outputs before it saw its
    lease lost, and the stream stored them a second time, after the next leader's. What is
    left once the lease lapses is held (sent first if it leads again, skipped if stored)."""
    nc, js = _FakeNats(), _FakeJs()
    pub = OutputPublisher(js, Subjects(), window=8, retries=3, stats={"outputs": 0, "allocations": 0},
                          output_format=lambda rm: ("json", "number"), nc=nc)
    pub.may_send = lambda: len(nc.published) < 3  # the lease lapses after the third
    await pub.send(pub.encode(7, _outputs(7, 5)))
    assert [i for i, _ in nc.published] == ["7-0", "7-1", "7-2"]
    assert [p.msg_id for p in pub.take_held()] == ["7-3", "7-4"]


async def test_a_standby_taking_over_publishes_what_it_kept_at_once():
    """Review (regression of the test above's change): a standby taking over checked its
    lease before each output it had kept, while `publishing()` still said it had not taken
    over: it held them all, until the next entry or renewal."""
    from nats.js.errors import NotFoundError

    from ykbus.bus.leader import Leadership

    nc, js = _FakeNats(), _FakeJs()

    async def no_log(*_a, **_k):
        raise NotFoundError

    js.get_last_msg = no_log
    pub = OutputPublisher(js, Subjects(), window=8, retries=3, stats={"outputs": 0, "allocations": 0},
                          output_format=lambda rm: ("json", "number"), nc=nc)

    async def scanned() -> None:
        return None

    pub.scan = scanned
    live = types.SimpleNamespace(lock=anyio.Lock(), applied=lambda: 7)
    lead = Leadership(Subjects(), live)  # type: ignore[arg-type]
    lead._js, lead._publisher, lead.lease = js, pub, types.SimpleNamespace(leading=True)
    pub.may_send = lead.publishing
    lead._was_standby = True
    lead.unpublished.add(pub.encode(7, _outputs(7, 3)), 7)
    await lead._take_over(7)
    assert [i for i, _ in nc.published] == ["7-0", "7-1", "7-2"]
    assert pub.take_held() == [] and lead.publishing()


async def test_a_late_copy_at_the_end_of_the_output_stream_does_not_make_a_restart_publish_old_outputs(nats_server):
    """Review: a leader that woke from a stall past the duplicate window stored an old
    entry's output at the end of YK_OUT; a restart took the lowest input sequence among the
    last messages as the one below which everything is stored, and would have published
    again every output between it and the snapshot (outside the duplicate window: stored
    twice). A message more than the publish window out of order is such a copy."""
    from nats.js.api import StreamConfig

    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        subjects = Subjects()
        await js.add_stream(StreamConfig(name=OUT_STREAM, subjects=[subjects.outputs], duplicate_window=0.2))

        def publisher() -> OutputPublisher:
            return OutputPublisher(js, subjects, window=4, retries=3, stats={"outputs": 0, "allocations": 0},
                                   output_format=lambda rm: ("json", "number"), nc=nc)

        pub = publisher()
        for seq in range(1, 101):
            for part in pub.encode(seq, _outputs(seq, 1)):
                await js.publish(part.subject, part.data, headers=part.headers)
        late = pub.encode(50, _outputs(50, 1))[0]
        await anyio.sleep(0.4)  # past the (shortened) duplicate window
        again = await js.publish(late.subject, late.data, headers=late.headers)
        assert not again.duplicate
        restarted = publisher()
        await restarted.scan()
        assert restarted.stored(restarted.encode(60, _outputs(60, 1))[0])  # stored long ago: not sent again
        assert not restarted.stored(restarted.encode(101, _outputs(101, 1))[0])
    finally:
        await nc.close()


async def test_a_publish_left_unanswered_is_sent_again_with_the_same_id(monkeypatch):
    monkeypatch.setattr(publisher_mod, "ACK_TIMEOUT_S", 0.1)
    nc, js = _FakeNats(silent={"2-0"}), _FakeJs()
    pub = OutputPublisher(js, Subjects(), window=1, retries=3, stats={"outputs": 0, "allocations": 0},
                          output_format=lambda rm: ("json", "number"), nc=nc)
    for seq in range(1, 4):
        await pub.send(pub.encode(seq, _outputs(seq, 1)))
    await pub.settle(0)
    assert [h[HDR_MSG_ID] for h in js.republished] == ["2-0"]
    assert not pub._inflight and not pub._by_number


async def test_an_output_answered_with_an_error_while_no_entry_follows_is_sent_again(nats_server):
    """Regression (CI, the NATS cluster test): a NATS server died with the last answers of a
    burst, the RM waited for those outputs and sent nothing more, and nothing settled them
    for 60 s. The publisher's watch publishes such an output again between entries."""
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        subjects = Subjects()
        pub = OutputPublisher(js, subjects, window=8, retries=5, stats={"outputs": 0, "allocations": 0},
                              output_format=lambda rm: ("json", "number"), nc=nc)
        await pub.send(pub.encode(1, _outputs(1, 1)))  # no stream yet: the server answers 503
        await js.add_stream(name=OUT_STREAM, subjects=[subjects.outputs])
        async with anyio.create_task_group() as tg:
            tg.start_soon(pub.watch)
            with anyio.fail_after(5):
                while (await js.stream_info(OUT_STREAM)).state.messages < 1:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        stored = await js.get_last_msg(OUT_STREAM, subjects.outputs)
        assert stored.headers[HDR_MSG_ID] == "1-0"
        assert not pub._inflight
    finally:
        await nc.close()
