"""The bus fuzzer: malformed messages through a real nats-server into a real `ykbus core`.

`bus_fuzz(url, messages, huge, seed)` (with the core already started by the caller):

1. registers a valid RM `fz` with a node and an application, so that malformed items meet
   live state;
2. publishes `messages` malformed messages with acked JetStream publishes on
   `yk.v1.in.<rm>.<kind>` for the RMs `fz`, `ghost` and `_core` and every kind (also
   unknown ones): bodies from `tests.fuzz.mutate` (wrong types, int64 edges, unknown enums,
   deep nesting, non-UTF-8, long ids, invalid JSON, MessagePack with the content type
   header, MessagePack garbage), plus `huge` bodies near the server's max payload;
3. withdraws any queue file the fuzzed `_core` entries put in force, runs a valid flow as
   a new RM `ok` (register, node, application, ask) and waits for its
   allocation on `yk.v1.out.ok.alloc`. The core applies the log in order, so once that
   arrives every malformed message before it has been applied and answered;
4. reads YK_OUT and checks that each malformed RM message (the `tests.fuzz.checks` oracle
   decides what is malformed; ticks excepted) got outputs on `yk.v1.out.<its rm>.>` with
   its `Yk-In-Seq`, as many answers as it had bad items, and that every output decodes.

Loopback only; every wait is bounded and event-driven (the allocation, the process exit).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import nats
from nats.js import api

from tests.fuzz.checks import Failure, Run, _answers, bad_items, describe
from tests.fuzz.mutate import mutate_entry, special_entry
from ykbus.bus.publisher import ACK_TIMEOUT_S, WATCH_EVERY_S
from ykbus.bus.server import stop_process
from ykbus.bus.subjects import HDR_CONTENT_TYPE, HDR_IN_SEQ, MSGPACK, OUT_STREAM
from ykbus.core.entries import Entry, Output
from ykbus.core.registry import RM_ID
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.si import codec
from ykbus.si import messages as m

PREFIX = "yk.v1"
RMS = ["fz", "ghost", "_core"]
KINDS = ["register", "app", "node", "alloc", "config", "unregister", "rmstate", "tick", "nope", "app.x", "_core"]
WINDOW = 256  # JetStream publishes awaiting their ack


class CoreUnderTest:
    """`ykbus core` as a child process whose stderr is read by a thread (so it never
    blocks on a full pipe); `started` is set at its "core started" log line."""

    def __init__(self, url: str, *flags: str) -> None:
        self.args = [sys.executable, "-m", "ykbus.cli", "core", "--nats", url, "--tick", "3600",
                     "--rm-pause", "3600", *flags]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.started = threading.Event()
        self.exited = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            if '"core started"' in line:
                self.started.set()
        self.proc.wait()
        self.exited.set()
        self.started.set()  # whoever waits for the start learns it will not come

    async def wait_started(self, timeout: float = 30.0) -> None:
        with anyio.fail_after(timeout):
            await anyio.to_thread.run_sync(self.started.wait)
        if self.exited.is_set():
            raise RuntimeError(f"ykbus core exited at start:\n{self.tail()}")

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.lines[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(timeout=5)


@dataclass
class Published:
    seq: int
    rm: str  # subject token
    kind: str
    data: bytes
    encoding: str
    bad: int | None  # tests.fuzz.checks.bad_items: None when well formed

    def entry(self) -> Entry:
        return Entry(self.seq, 0, "" if self.rm == "_core" else self.rm, self.kind, self.data, self.encoding)


@dataclass
class BusReport:
    published: int = 0
    malformed: int = 0
    huge: int = 0
    outputs: int = 0
    core_alive: bool = True
    allocated: bool = False
    unanswered: list[str] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)
    died_at: str = ""
    seconds: float = 0.0

    def failures(self) -> list[str]:
        out = []
        if not self.core_alive:
            out.append(f"ykbus core died{': ' + self.died_at if self.died_at else ''}")
        if not self.allocated:
            out.append("the valid flow (register, node, app, ask) got no allocation on yk.v1.out.ok.alloc")
        if self.unanswered:
            out.append(f"{len(self.unanswered)} malformed messages unanswered, e.g. {self.unanswered[:3]}")
        if self.undecodable:
            out.append(f"{len(self.undecodable)} outputs do not decode, e.g. {self.undecodable[:3]}")
        return out

    def figures(self) -> str:
        return (f"bus: {self.published} messages published ({self.malformed} malformed, {self.huge} near the max "
                f"payload), {self.outputs} outputs, in {self.seconds:.1f} s; core alive: {self.core_alive}; valid "
                f"flow allocated: {self.allocated}; unanswered: {len(self.unanswered)}; undecodable outputs: "
                f"{len(self.undecodable)}")


def _base() -> list[Entry]:
    log = LogBuilder("fz")
    return [log.register(), log.nodes(node("n1", vcore=1000, memory=1000)), log.apps(app("a1")),
            log.asks(ask("k1", "a1", vcore=1)), log.release("a1", key="k1"), log.config(""),
            log.entry("rmstate", {"rmID": "fz", "event": "RECONNECT"}, rm=""), log.unregister(),
            log.entry("tick", {}, rm="")]


def _huge(rng: random.Random, max_payload: int) -> tuple[str, bytes]:
    n = max_payload - rng.randint(2_000, 60_000)
    pad = "a" * n
    return rng.choice([
        ("app", json.dumps({"rmID": "fz", "new": [{"applicationID": 5, "queueName": pad}]}).encode()),
        ("alloc", json.dumps({"asks": pad}).encode()),
        ("node", b'{"nodes":[' + b"{}," * (n // 3) + b"{}]}"),
        ("alloc", b"[" * n),
        ("app", json.dumps({"rmID": "fz", "new": [{"applicationID": pad, "queueName": 5}]}).encode()),
        ("node", json.dumps({"rmID": "fz", "nodes": [{"nodeID": "x", "action": pad}]}).encode()),
    ])


def _message(rng: random.Random, base: list[Entry]) -> tuple[str, str, bytes, str]:
    """(rm token, kind, body, encoding) of one message: mostly a mutated entry, sometimes
    one of the service's own entries made up whole (`_core` tick, rmstate, queue file)."""
    if rng.random() < 0.05:
        e = special_entry(rng, base, 0)
        if not e.rm and e.kind in ("tick", "rmstate", "config"):
            return "_core", e.kind, e.msg, "json"
    e = mutate_entry(rng, rng.choice(base))
    rm = e.rm if e.rm and len(e.rm) < 200 and RM_ID.match(e.rm) and rng.random() < 0.5 else rng.choice(RMS)
    kind = e.kind if e.kind in KINDS and rng.random() < 0.7 else rng.choice(KINDS)
    encoding = e.encoding if e.encoding in ("json", "msgpack") else "json"
    return rm, kind, e.msg, encoding


async def bus_fuzz(url: str, core: CoreUnderTest, messages: int, huge: int, seed: int,
                   timeout: float = 120.0) -> BusReport:
    report = BusReport()
    t0 = time.perf_counter()
    rng = random.Random(seed)
    base = _base()
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    max_payload = nc.max_payload
    sent: list[Published] = []
    pending: list[tuple[Any, Published]] = []

    async def settle(window: int) -> None:
        while len(pending) > window:
            future, p = pending.pop(0)
            p.seq = (await future).seq
            sent.append(p)

    async def publish(rm: str, kind: str, data: bytes, encoding: str = "json", check: bool = True) -> None:
        if len(data) + 256 > max_payload:
            return  # the server would refuse it: nothing to fuzz
        headers = {HDR_CONTENT_TYPE: MSGPACK} if encoding == "msgpack" else None
        p = Published(0, rm, kind, data, encoding, None)
        if check:
            p.bad = bad_items(p.entry())
        future = await js.publish_async(f"{PREFIX}.in.{rm}.{kind}", data, headers=headers)
        pending.append((future, p))
        report.published += 1
        await settle(WINDOW)

    try:
        with anyio.fail_after(timeout):
            for e in base[:3]:  # fz registered, with a node and an application
                await publish("fz", e.kind, e.msg, check=False)
            for i in range(messages):
                if i % max(1, messages // max(1, huge)) == 0 and report.huge < huge:
                    kind, data = _huge(rng, max_payload)
                    report.huge += 1
                    await publish("fz", kind, data)
                    continue
                rm, kind, data, encoding = _message(rng, base)
                well_formed = bad_items(Published(0, rm, kind, data, encoding, None).entry()) is None
                if well_formed and kind != "tick" and rm != "_core":
                    continue  # an RM's valid message: it could unregister fz; not what this tests
                await publish(rm, kind, data, encoding)
            await settle(0)
            report.malformed = sum(p.bad is not None for p in sent if p.kind != "tick")
            report.allocated = await _valid_flow(nc, js, core)
    except TimeoutError:
        report.allocated = False
    finally:
        report.core_alive = core.alive()
        if not report.core_alive:
            report.died_at = core.tail(12)
    await _check_outputs(js, sent, report)
    for _ in range(2):  # an output whose publish failed is published again (same id) after ACK_TIMEOUT_S:
        if not report.unanswered or not report.core_alive:  # stored after the valid flow's, as an RM gets it
            break
        await anyio.sleep(ACK_TIMEOUT_S + 2 * WATCH_EVERY_S)
        report.outputs, report.unanswered, report.undecodable = 0, [], []
        await _check_outputs(js, sent, report)
    await nc.close()
    report.seconds = time.perf_counter() - t0
    return report


async def _valid_flow(nc: Any, js: Any, core: CoreUnderTest) -> bool:
    """Register `ok`, add a node, an application and an ask; True when the allocation
    arrives. Returns False at once if the core exits meanwhile."""
    log = LogBuilder("ok")
    sub = await nc.subscribe(f"{PREFIX}.out.ok.alloc")
    got = False
    async with anyio.create_task_group() as tg:
        async def watch_exit() -> None:
            await anyio.to_thread.run_sync(core.exited.wait, abandon_on_cancel=True)
            tg.cancel_scope.cancel()

        tg.start_soon(watch_exit)
        # the fuzzed `_core` entries may have put a valid queue file in force (it would win
        # over ok's configuration): withdraw them, as the service does when a file empties
        for group in ("*", "queues"):
            await js.publish(f"{PREFIX}.in._core.config", json.dumps({"policyGroup": group, "config": ""}).encode())
        for e in [log.register(), log.nodes(node("n1", vcore=4000)), log.apps(app("a1")),
                  log.asks(ask("p1", "a1", vcore=1000))]:
            await js.publish(f"{PREFIX}.in.ok.{e.kind}", e.msg)
        while not got:
            msg = await sub.next_msg(timeout=None)
            got = bool(codec.decode(m.AllocationResponse, msg.data).new)
        tg.cancel_scope.cancel()
    await sub.unsubscribe()
    return got


async def _check_outputs(js: Any, sent: list[Published], report: BusReport) -> None:
    """Every output on YK_OUT, by Yk-In-Seq: does each malformed message have its answers?"""
    info = await js.stream_info(OUT_STREAM)
    last = info.state.last_seq
    by_seq: dict[int, list[Output]] = {}
    if info.state.messages:
        sub = await js.subscribe(f"{PREFIX}.out.>", stream=OUT_STREAM, ordered_consumer=True,
                                 config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.ALL))
        try:
            with anyio.fail_after(60):
                async for msg in sub.messages:
                    report.outputs += 1
                    rm_token, kind = msg.subject[len(f"{PREFIX}.out."):].split(".", 1)
                    encoding = "msgpack" if (msg.headers or {}).get(HDR_CONTENT_TYPE) == MSGPACK else "json"
                    t = m.RegisterResourceManagerResponse if kind == "register" else m.OUTPUT_TYPES.get(kind)
                    try:
                        body = codec.decode(t, msg.data, encoding) if t is not None else None
                    except codec.DecodeError as exc:
                        report.undecodable.append(f"{msg.subject}: {exc}")
                        body = None
                    seq = int((msg.headers or {}).get(HDR_IN_SEQ, "0"))
                    if body is not None:
                        by_seq.setdefault(seq, []).append(Output(seq, rm_token, kind, body))
                    if msg.metadata.sequence.stream >= last:
                        break
        finally:
            await sub.unsubscribe()
    if not report.core_alive:  # the same log in process says which entry broke it, and how
        report.died_at += "\n  in process, the same log: " + _first_failure(sent)
    for p in sent:
        if p.bad is None or p.kind == "tick":
            continue
        outs = by_seq.get(p.seq, [])
        n = _answers(outs, p.rm)
        if n == 0 or n < p.bad:
            report.unanswered.append(f"in-seq {p.seq}: {n} answers to {p.bad or 'a whole'} bad: "
                                     f"{describe(p.entry(), 160)}")


def _first_failure(sent: list[Published]) -> str:
    run = Run()
    try:
        for p in sorted(sent, key=lambda p: p.seq):
            e = p.entry()
            run.apply(Entry(e.seq, e.seq, e.rm, e.kind, e.msg, e.encoding))
    except Failure as f:
        return str(f)[:1500]
    return "no failure (the service broke where the core did not)"


def run_bus_campaign(messages: int, seed: int, huge: int = 200) -> bool:
    """A nats-server (1 MiB max payload, the default) and a core of our own; prints the
    figures; True when something failed."""
    from ykbus.bus.server import NatsServer

    async def main() -> BusReport:
        with tempfile.TemporaryDirectory(prefix="ykbus-busfuzz-") as tmp:
            server = NatsServer(store_dir=tmp, max_payload=1 << 20).start()
            core = CoreUnderTest(server.url)
            try:
                await core.wait_started()
                return await bus_fuzz(server.url, core, messages, huge, seed, timeout=max(120.0, messages / 50))
            finally:
                core.stop()
                server.cleanup()

    report = anyio.run(main)
    print(report.figures())
    for f in report.failures():
        print("  FAIL:", f[:2000])
    return bool(report.failures())
