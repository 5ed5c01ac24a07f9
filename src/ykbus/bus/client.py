"""The RM client library, in the shape of the spec's API interface.

An RM implements `ResourceManagerCallback` and talks to a `SchedulerAPI`. Two transports
have the same interface:

* `NatsScheduler`: JetStream publishes (acked, retried with the same `Nats-Msg-Id`, so a
  retry is never applied twice) and a durable consumer on the RM's outputs, so an RM that
  was away resumes from the last output it processed (the late-joiner resync). It also
  sends heartbeats on `yk.v1.hb.<rm>`.
* `InProcessScheduler`: the core called directly, no serialisation (the spec's "API based
  interface", for embedding and tests).

`ResourceManagerClient` adds the recovery protocol of YuniKorn's resilience design on top of either: New ->
Registered -> Recovering (applications first, then nodes with their existing allocations)
-> Running, or Failed; no new asks are sent before Running.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import nats

from ykbus.bus.local import connect
from ykbus.bus.subjects import (
    HDR_CONTENT_TYPE,
    HDR_IN_SEQ,
    HDR_MSG_ID,
    MSGPACK,
    OUT_STREAM,
    Subjects,
    encoding_of,
    header_seq,
    js_reply_meta,
)
from ykbus.core import Core, Entry
from ykbus.core.lifecycle import SHIM, ShimEvent, ShimState
from ykbus.si import codec
from ykbus.si import messages as m

PULL_BATCH = 512  # outputs one pull request asks for
PULL_EXPIRES_S = 1.0  # a pull request's life on the server; then another is made


# An unanswered publish is sent again (same message id, stored once) after this long: when a
# NATS cluster loses the server that leads the input stream, the publish in flight is never
# answered, and the next one reaches the new leader.
PUBLISH_ACK_TIMEOUT_S = 2.0
# the ids of the outputs last handed over, remembered to drop a copy the stream stored again
# (a leader stalled past its duplicate window): at 1,000 outputs a second, two minutes of them
HANDLED_IDS = 131_072

class RegistrationError(Exception):
    """The core refused the registration; the text is its reason."""


class NoCoreAnswered(RegistrationError, TimeoutError):
    """No core answered a registration in time: none runs on this server (or prefix), or,
    with core shards, the shard `default` (which registers an RM no assignment names) does not."""


class AttachError(Exception):
    """The core could not make this RM's output consumer; the text says why."""


class NotRunning(Exception):
    """New asks are only sent once recovery is complete (state Running)."""


class ResourceManagerCallback:
    """What an RM implements (spec: ResourceManagerCallback). Methods may be async."""

    def update_allocation(self, response: m.AllocationResponse) -> Any: ...
    def update_application(self, response: m.ApplicationResponse) -> Any: ...
    def update_node(self, response: m.NodeResponse) -> Any: ...
    def send_event(self, events: list[m.EventRecord]) -> Any: ...
    def update_container_scheduling_state(self, states: list[m.UpdateContainerSchedulingStateRequest]) -> Any: ...


async def deliver(callback: ResourceManagerCallback, kind: str, msg: Any) -> None:
    """Hand one output message to the callback method for its kind."""
    if kind == "alloc":
        result = callback.update_allocation(msg)
    elif kind == "app":
        result = callback.update_application(msg)
    elif kind == "node":
        result = callback.update_node(msg)
    elif kind == "event":
        result = callback.send_event(msg.events)
    elif kind == "state":
        result = callback.update_container_scheduling_state(msg.states)
    else:
        return
    if inspect.isawaitable(result):
        await result


class SchedulerAPI:
    """The spec's SchedulerAPI. Every call returns once the request is durable (NATS) or
    applied (in-process); decisions arrive through the callback."""

    async def register_resource_manager(self, request: m.RegisterResourceManagerRequest,
                                        callback: ResourceManagerCallback) -> m.RegisterResourceManagerResponse:
        raise NotImplementedError

    async def update_allocation(self, request: m.AllocationRequest) -> None:
        raise NotImplementedError

    async def update_application(self, request: m.ApplicationRequest) -> None:
        raise NotImplementedError

    async def update_node(self, request: m.NodeRequest) -> None:
        raise NotImplementedError

    async def update_configuration(self, request: m.UpdateConfigurationRequest) -> None:
        raise NotImplementedError

    async def unregister(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Stop receiving; the RM's durable position is kept for when it comes back."""

    async def __aenter__(self) -> SchedulerAPI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# --- in-process ------------------------------------------------------------------------


class InProcessScheduler(SchedulerAPI):
    """The core in this process. `clock` gives the ts of each entry (ns)."""

    def __init__(self, core: Core | None = None, clock: Callable[[], int] = time.time_ns) -> None:
        from ykbus.yamlload import load_yaml

        self.core = core or Core(load_yaml=load_yaml)
        self.clock = clock
        self.callbacks: dict[str, ResourceManagerCallback] = {}
        self.rm = ""

    async def _apply(self, kind: str, msg: Any, rm: str | None = None) -> list[Any]:
        rm = self.rm if rm is None else rm
        entry = Entry(seq=self.core.last_seq + 1, ts=max(self.clock(), self.core.now), rm=rm, kind=kind)
        outputs = self.core.apply(entry, None if msg is None else codec.as_decoded(kind, msg))
        for out in outputs:
            callback = self.callbacks.get(out.rm)
            if callback is not None and out.kind != "register":
                await deliver(callback, out.kind, out.msg)
        return outputs

    async def register_resource_manager(self, request, callback):
        self.rm = request.rmID
        self.callbacks[request.rmID] = callback
        outputs = await self._apply("register", request)
        response = next(o.msg for o in outputs if o.kind == "register")
        if response.error:
            raise RegistrationError(response.error)
        return response

    async def update_allocation(self, request):
        await self._apply("alloc", request)

    async def update_application(self, request):
        await self._apply("app", request)

    async def update_node(self, request):
        await self._apply("node", request)

    async def update_configuration(self, request):
        await self._apply("config", request)

    async def unregister(self):
        await self._apply("unregister", m.UnregisterRequest())

    async def tick(self) -> None:
        """Let time pass (timers fire): the in-process stand-in for the service's tick entries."""
        await self._apply("tick", None, rm="")


# --- over NATS -------------------------------------------------------------------------


class NatsScheduler(SchedulerAPI):
    """The scheduler over NATS. Use as `async with NatsScheduler(url) as api: ...`."""

    def __init__(self, url: str, prefix: str = "yk.v1", heartbeat_s: float = 2.0,
                 publish_retries: int = 30, nats_options: dict[str, Any] | None = None) -> None:
        self.url = url
        # nats.connect keywords: credentials, TLS, and on a secured server the identity's
        # inbox prefix (ykbus.bus.permissions.connect_options)
        self.nats_options = dict(nats_options or {})
        self.subjects = Subjects(prefix)
        self.heartbeat_s = heartbeat_s
        self.publish_retries = publish_retries
        self.rm = ""
        self.encoding = "json"
        self.callback: ResourceManagerCallback | None = None
        self.last_output_seq = 0  # stream seq of the last output handed to the callback
        # the ids of the last HANDLED_IDS outputs handed over (docs/protocol.md, "Outputs and resuming")
        self._handled: set[str] = set()
        self._handled_order: collections.deque[str] = collections.deque()
        self._session = os.urandom(16).hex()  # 128 random bits: msg ids no other client can guess (docs/protocol.md)
        self._counter = itertools.count(1)
        self._registers: dict[int, m.RegisterResourceManagerResponse] = {}
        self._register_seen = anyio.Event()
        # registering: the outputs before this session's register answer are decisions of the
        # session the registration ends (docs/protocol.md, "Registering again"): not handed over
        self._registering = False
        self._register_seq = 0  # the input seq of this session's register entry, once published
        self._register_published = anyio.Event()
        self._last_register_seq = 0  # the input seq of the last register answer read
        self._tg: anyio.abc.TaskGroup | None = None
        self._denied: set[str] = set()  # subjects the server refused us (lowercase, as nats-py reports them)
        self.nc: Any = None

    async def __aenter__(self) -> NatsScheduler:
        options = {"error_cb": self._nats_error, **self.nats_options}
        self.nc = await connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.5, name="ykbus-rm",
                                **options)
        self.js = self.nc.jetstream(timeout=10)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def _nats_error(self, exc: Exception) -> None:
        """Remember what NATS permissions refused: a publish there is never answered."""
        text = str(exc)
        if "permissions violation" in text.lower() and '"' in text:
            self._denied.add(text.split('"')[1].lower())

    def _check_denied(self, subject: str) -> None:
        if subject.lower() in self._denied:
            raise PermissionError(f"the NATS server refuses this connection's publish to {subject}: "
                                  "its user may act only as its own RM (docs/protocol.md, Identities and permissions)")

    async def close(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def publish(self, kind: str, msg: Any, rm: str | None = None) -> int:
        """Publish one request, durable once this returns; the input seq it got."""
        rm = self.rm if rm is None else rm
        data = codec.encode(msg, self.encoding)
        headers = {HDR_MSG_ID: f"{rm}-{self._session}-{next(self._counter)}"}
        if self.encoding == "msgpack":
            headers[HDR_CONTENT_TYPE] = MSGPACK
        subject = self.subjects.input(rm, kind)
        for attempt in range(self.publish_retries):
            try:
                ack = await self.js.publish(subject, data, headers=headers, timeout=PUBLISH_ACK_TIMEOUT_S)
                return ack.seq
            except (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError,
                    nats.errors.ConnectionClosedError, nats.errors.NoRespondersError):
                self._check_denied(subject)
                await anyio.sleep(min(0.1 * 2**attempt, 2.0))
        raise TimeoutError(f"could not publish to {subject} after {self.publish_retries} attempts")

    async def register_resource_manager(self, request, callback, timeout: float = 30.0):
        self.rm = request.rmID
        self.callback = callback
        self.encoding = request.extraConfig.get("encoding", "json")
        assert self._tg is not None, "use NatsScheduler as an async context manager"
        with anyio.move_on_after(timeout) as deadline:  # covers waiting for the core to create its streams
            self._registering = True
            await self._tg.start(self._consume)
            seq = self._register_seq = await self.publish("register", request)
            self._register_published.set()
            while seq not in self._registers:
                self._register_seen = anyio.Event()
                await self._register_seen.wait()
        if deadline.cancelled_caught:  # (NATS failing raises its own error)
            raise NoCoreAnswered(f"no core answered the registration of {request.rmID!r} within {timeout:g} s: is a "
                                 f"core running on this NATS server, on prefix {self.subjects.prefix}? (With core "
                                 "shards: the shard `default` registers an RM no assignment names: docs/sharding.md)"
                                 ) from None
        response = self._registers.pop(seq)
        if response.error:
            raise RegistrationError(response.error)
        self._tg.start_soon(self._heartbeat)
        return response

    async def attach(self, rm_id: str, callback: ResourceManagerCallback, encoding: str = "json") -> None:
        """Come back as an RM that is still registered: resume from the last output this RM
        processed (its durable consumer) and heartbeat again, without re-registering (which
        would wipe its state)."""
        self.rm, self.callback, self.encoding = rm_id, callback, encoding
        assert self._tg is not None, "use NatsScheduler as an async context manager"
        await self._tg.start(self._consume)
        self._tg.start_soon(self._heartbeat)

    async def update_allocation(self, request):
        await self.publish("alloc", request)

    async def update_application(self, request):
        await self.publish("app", request)

    async def update_node(self, request):
        await self.publish("node", request)

    async def update_configuration(self, request):
        await self.publish("config", request)

    async def unregister(self):
        await self.publish("unregister", m.UnregisterRequest())

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self.nc.publish(self.subjects.heartbeat(self.rm), b"")
            except nats.errors.ConnectionClosedError:
                return
            await anyio.sleep(self.heartbeat_s)

    async def _consume(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """A durable pull consumer on this RM's outputs. One pull request
        (`$JS.API.CONSUMER.MSG.NEXT`, batch PULL_BATCH, expiring after PULL_EXPIRES_S) stands
        on the server: each output is delivered the moment it is stored, with no round trip
        per message; a new request is made when it is used up, expired, or not heard of for a
        while (a reconnect loses it). The server delivers only what is asked for, so nothing is
        dropped on the way. nats-py's one task of the subscription hands each output over, in
        order (no task per message); once none is left waiting behind it, the last one handled
        is acknowledged (AckAll): exactly what was handled. An output delivered again (after a
        reconnect) is acknowledged, not handed over twice."""
        durable = await self._attach()
        request = json.dumps({"batch": PULL_BATCH, "expires": int(PULL_EXPIRES_S * 1e9)}).encode()
        pull = f"$JS.API.CONSUMER.MSG.NEXT.{OUT_STREAM}.{durable}"
        owed = 0  # outputs the standing pull request may still deliver
        pause = False  # the request ended abnormally: a moment before the next
        failed: list[Exception] = []  # what a handler raised: raised here, not lost in nats-py's task
        wake = anyio.Event()  # a new request is due
        heard = 0.0  # when the callback last began or ended (monotonic)
        busy = False  # the callback is handling an output
        unacked: Any = None  # the last output handled and not yet acknowledged

        async def delivered(msg: Any) -> None:
            nonlocal owed, pause, heard, busy, unacked
            if failed:
                return
            heard, busy = time.monotonic(), True
            status = msg.headers.get("Status") if msg.headers and not msg.data else None
            try:
                if status is None:
                    owed -= 1
                    await self._handle(msg)
                    unacked = msg
                elif status != "100":  # (100: an idle heartbeat)
                    owed = 0  # 408: the request expired; 409 and others: it ended (consumer remade, ...)
                    pause = status not in ("404", "408")
                if unacked is not None and not sub.pending_msgs:  # every output that arrived is handled
                    await self._ack(unacked)
                    unacked = None
            except Exception as exc:  # noqa: BLE001 (raised by the loop below)
                failed.append(exc)
                owed = 0
            finally:
                heard, busy = time.monotonic(), False
            if owed <= 0:
                wake.set()

        sub = await self.nc.subscribe(self.nc.new_inbox(), cb=delivered)
        task_status.started()
        try:
            while True:
                if failed:
                    raise failed[0]
                if owed <= 0:
                    if pause:
                        await anyio.sleep(0.2)
                        pause = False
                    try:
                        await self.nc.publish(pull, request, reply=sub.subject)
                    except nats.errors.Error:  # reconnecting: the durable keeps our place
                        await anyio.sleep(0.2)
                        continue
                    owed, wake = PULL_BATCH, anyio.Event()  # (an output of the last request may come meanwhile)
                    heard = time.monotonic()
                # not heard of for a while, nothing left to handle: the request is lost (a
                # reconnect), or its end was: make another
                while not wake.is_set():
                    wait = heard + PULL_EXPIRES_S + 1.0 - time.monotonic()
                    if wait <= 0 and not busy and not sub.pending_msgs:
                        owed = 0
                        break
                    with anyio.move_on_after(max(wait, 0.05)):
                        await wake.wait()
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()  # no output is handed over after this returns (the connection may be closed)

    async def _attach(self) -> str:
        """Ask the core for this RM's output consumer (`yk.v1.attach.<rm>`, docs/protocol.md):
        it makes it anew, starting right after what this RM acknowledged (the first time:
        after the stream's last message), and names it. Retried until a core answers."""
        for attempt in itertools.count():
            try:
                reply = await self.nc.request(self.subjects.attach(self.rm), b"{}", timeout=5)
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                self._check_denied(self.subjects.attach(self.rm))
                await anyio.sleep(min(0.05 * 2**attempt, 1.0))  # no core yet, or it is starting
                continue
            answer = json.loads(reply.data)
            if "error" in answer:
                raise AttachError(f"{self.subjects.attach(self.rm)}: {answer['error']}")
            return answer["consumer"]
        raise AssertionError("unreachable")

    async def _ack(self, msg: Any) -> None:
        try:
            await self.nc.publish(msg.reply, b"")  # +ACK; ack policy all: everything up to it
        except nats.errors.Error:
            pass  # not acked: redelivered after a reconnect, and recognised then

    async def _handle(self, msg: Any) -> None:
        seq = js_reply_meta(msg.reply)[0]
        if seq <= self.last_output_seq:
            return  # delivered again (a reconnect before its ack): handled already
        _, kind = self.subjects.parse(msg.subject, "out")
        headers = msg.headers or {}
        self.last_output_seq = seq
        msg_id = headers.get(HDR_MSG_ID, "")
        if msg_id:
            if msg_id in self._handled:
                return  # a copy stored late (a leader stalled past the duplicate window): handled already
            self._handled.add(msg_id)
            self._handled_order.append(msg_id)
            if len(self._handled_order) > HANDLED_IDS:
                self._handled.discard(self._handled_order.popleft())
        encoding = encoding_of(headers)
        body = codec.decode(m.OUTPUT_TYPES[kind], msg.data, encoding)
        if kind == "register":
            self._last_register_seq = header_seq(headers, HDR_IN_SEQ)
            self._registers[self._last_register_seq] = body
            self._register_seen.set()
            return
        if self._registering:
            await self._register_published.wait()  # (the answer may be read before the publish's ack)
            if self._last_register_seq != self._register_seq:
                return  # decided before this session's registration, which wiped what it was about
            self._registering = False
        if self.callback is not None:
            await deliver(self.callback, kind, body)


# --- recovery (YuniKorn's resilience design) --------------------------------------------


class ResourceManagerClient(ResourceManagerCallback):
    """An RM's connection with the recovery protocol; forwards every output to `callback`."""

    def __init__(self, api: SchedulerAPI, rm_id: str, config: str = "", policy_group: str = "queues",
                 extra_config: dict[str, str] | None = None, callback: ResourceManagerCallback | None = None) -> None:
        self.api = api
        self.rm_id = rm_id
        self.config = config
        self.policy_group = policy_group
        self.extra_config = extra_config or {}
        self.callback = callback or ResourceManagerCallback()
        self.state = ShimState.NEW
        self._waiting: set[str] = set()
        self._answered = anyio.Event()
        self.rejected: dict[str, str] = {}

    def _advance(self, event: ShimEvent) -> None:
        self.state = SHIM.advance(self.state, event)

    async def start(self, apps: Iterable[m.AddApplicationRequest] = (), nodes: Iterable[m.NodeInfo] = (),
                    timeout: float = 30.0) -> None:
        """Register, then recover applications first and nodes (with existing allocations) next."""
        apps, nodes = list(apps), list(nodes)
        try:
            await self.api.register_resource_manager(m.RegisterResourceManagerRequest(
                rmID=self.rm_id, version="ykbus-client", policyGroup=self.policy_group, config=self.config,
                extraConfig=self.extra_config), self)
            self._advance(ShimEvent.REGISTER)
            self._advance(ShimEvent.RECOVER)
            with anyio.fail_after(timeout):
                if apps:
                    await self._send_and_wait(f"app:{a.applicationID}" for a in apps)(
                        self.api.update_application(m.ApplicationRequest(new=apps, rmID=self.rm_id)))
                if nodes:
                    await self._send_and_wait(f"node:{n.nodeID}" for n in nodes)(
                        self.api.update_node(m.NodeRequest(nodes=nodes, rmID=self.rm_id)))
            self._advance(ShimEvent.RECOVERED)
        except BaseException:
            if self.state is not ShimState.FAILED:
                self._advance(ShimEvent.FAIL)
            raise

    def _send_and_wait(self, keys: Iterable[str]) -> Callable[[Any], Any]:
        self._waiting = set(keys)
        self._answered = anyio.Event()

        async def run(send: Any) -> None:
            await send
            if self._waiting:
                await self._answered.wait()

        return run

    def _answer(self, key: str, reason: str = "") -> None:
        if reason:
            self.rejected[key] = reason
        self._waiting.discard(key)
        if not self._waiting:
            self._answered.set()

    def _require_running(self) -> None:
        if self.state is not ShimState.RUNNING:
            raise NotRunning(f"resource manager {self.rm_id} is {self.state.value}: no new asks before Running")

    async def add_applications(self, apps: list[m.AddApplicationRequest]) -> None:
        self._require_running()
        await self.api.update_application(m.ApplicationRequest(new=apps, rmID=self.rm_id))

    async def remove_applications(self, app_ids: list[str], partition: str = "default") -> None:
        await self.api.update_application(m.ApplicationRequest(
            remove=[m.RemoveApplicationRequest(applicationID=a, partitionName=partition) for a in app_ids],
            rmID=self.rm_id))

    async def add_nodes(self, nodes: list[m.NodeInfo]) -> None:
        await self.api.update_node(m.NodeRequest(nodes=nodes, rmID=self.rm_id))

    async def add_asks(self, asks: list[m.AllocationAsk]) -> None:
        self._require_running()
        await self.api.update_allocation(m.AllocationRequest(asks=asks, rmID=self.rm_id))

    async def release(self, releases: list[m.AllocationRelease]) -> None:
        await self.api.update_allocation(m.AllocationRequest(
            releases=m.AllocationReleasesRequest(allocationsToRelease=releases), rmID=self.rm_id))

    # callback: resolve recovery waits, then forward
    async def update_application(self, response: m.ApplicationResponse) -> None:
        for a in response.accepted:
            self._answer(f"app:{a.applicationID}")
        for r in response.rejected:
            self._answer(f"app:{r.applicationID}", r.reason)
        await deliver(self.callback, "app", response)

    async def update_node(self, response: m.NodeResponse) -> None:
        for a in response.accepted:
            self._answer(f"node:{a.nodeID}")
        for r in response.rejected:
            self._answer(f"node:{r.nodeID}", r.reason)
        await deliver(self.callback, "node", response)

    async def update_allocation(self, response: m.AllocationResponse) -> None:
        await deliver(self.callback, "alloc", response)

    async def send_event(self, events: list[m.EventRecord]) -> None:
        await deliver(self.callback, "event", m.EventBatch(events=events))

    async def update_container_scheduling_state(self, states) -> None:
        await deliver(self.callback, "state", m.StateBatch(states=states))
