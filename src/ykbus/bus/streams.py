"""JetStream setup, idempotent: the input log, the output stream, the snapshot store."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext, api
from nats.js.errors import APIError, BadRequestError, NotFoundError, ServiceUnavailableError

from ykbus import limits
from ykbus.bus.subjects import CORE_TOKEN, IN_STREAM, LEASE_BUCKET, OUT_STREAM, SNAPSHOT_BUCKET, Subjects, js_reply_meta
from ykbus.core.entries import Entry
from ykbus.core.guard import FAILED_KIND
from ykbus.core.registry import rm_id_problem

log = logging.getLogger("ykbus.core")
T = TypeVar("T")


@dataclass(frozen=True)
class StreamLimits:
    """Retention of the two streams. -1 means unlimited. The input log is the source of
    truth: trim it only below the last snapshot (a restart replays from there)."""

    in_max_bytes: int = -1
    in_keep: int = -1  # entries kept before the last snapshot stored, the older purged (-1: all kept)
    in_max_age_s: float = 0
    out_max_bytes: int = 1 << 30
    out_max_age_s: float = 7 * 24 * 3600
    duplicate_window_s: float = 120
    replicas: int = 1



def input_trimmer(js: JetStreamContext, keep: int) -> Callable[[int], Awaitable[None]]:
    """What the leader does once a snapshot of entry `seq` is stored, with `--in-keep`: the
    input log's entries but the last `keep` before it are purged (a start loads that
    snapshot and reads on from it; a standby or reader further behind than that stops at
    the gap, and starts again from it). A purge that fails is tried at the next snapshot."""
    async def trim(seq: int) -> None:
        below = seq - keep + 1
        if below <= 1:
            return
        try:
            await js.purge_stream(IN_STREAM, seq=below)
        except Exception as exc:  # noqa: BLE001 - the log only stays longer
            log.warning("input log not trimmed", extra={"fields": {"below": below, "error": repr(exc)}})
            return
        log.info("input log trimmed", extra={"fields": {"below": below, "snapshot_seq": seq}})
    return trim

class OtherDeployment(Exception):
    """The streams on this NATS server belong to a deployment of another prefix: the stream
    names are fixed, so two prefixes cannot share one server (updating them would take the
    other deployment's log away)."""


async def ensure_streams(js: JetStreamContext, subjects: Subjects, limits: StreamLimits) -> None:
    configs = [
        api.StreamConfig(name=IN_STREAM, subjects=[subjects.inputs], storage=api.StorageType.FILE,
                         retention=api.RetentionPolicy.LIMITS, max_bytes=limits.in_max_bytes,
                         max_age=limits.in_max_age_s, duplicate_window=limits.duplicate_window_s,
                         num_replicas=limits.replicas),
        api.StreamConfig(name=OUT_STREAM, subjects=[subjects.outputs], storage=api.StorageType.FILE,
                         retention=api.RetentionPolicy.LIMITS, max_bytes=limits.out_max_bytes,
                         max_age=limits.out_max_age_s, duplicate_window=limits.duplicate_window_s,
                         num_replicas=limits.replicas),
    ]
    for config in configs:
        try:
            info = await js.stream_info(config.name)
        except NotFoundError:
            try:
                await js.add_stream(config)
            except BadRequestError as exc:  # another core process made it first; or a cluster still forming
                if placement_pending(exc):
                    raise
            continue
        theirs = info.config.subjects or []
        if not set(config.subjects or []) & set(theirs):  # (exactly: a prefix `yk` is not `yk.v1`'s)
            raise OtherDeployment(f"stream {config.name} on this NATS server takes {', '.join(theirs)}, not "
                                  f"{subjects.prefix}.*: another ykbus deployment (another --prefix) uses it. "
                                  "One deployment a NATS server (or account): run this one on another")
        if all(getattr(info.config, f) == getattr(config, f) for f in _SETTLED):
            continue  # as wanted: no update (several core processes start at once)
        try:
            await js.update_stream(config)
        except BadRequestError:
            pass  # an operator changed something we may not change (e.g. storage): keep theirs


_SETTLED = ("subjects", "max_bytes", "max_age", "duplicate_window", "num_replicas")


NOT_ANSWERING = (NatsTimeoutError, ServiceUnavailableError, NoRespondersError)  # a cluster electing, say
NO_PEERS = 10005  # JetStream's JSClusterNoPeersErr: "no suitable peers for placement"
START_WAIT_S = 60.0  # how long a core waits at start for JetStream to take its streams (`--start-wait`)


def placement_pending(exc: BaseException) -> bool:
    """JetStream refused a stream or store because it has not the servers its replicas need
    online: a cluster still forming (seen: compose's `ha` profile, whose cores start beside
    the three nats-servers), which a later try finds formed."""
    return isinstance(exc, APIError) and (exc.err_code == NO_PEERS or "no suitable peers" in (exc.description or ""))


async def with_retries(make: Callable[[], Awaitable[T]], what: str, within: float = START_WAIT_S) -> T:
    """`make()`, again while the JetStream API does not answer (a cluster electing its
    leaders, or several core processes making the same streams at once) or cannot yet place
    replicas (a cluster forming), for up to `within` seconds; then the last error. Each
    kind of wait is logged once."""
    deadline = time.monotonic() + within
    delay = 0.2
    said: set[str] = set()
    while True:
        try:
            return await make()
        except (*NOT_ANSWERING, APIError) as exc:
            forming = placement_pending(exc)
            if not forming and not isinstance(exc, NOT_ANSWERING):
                raise
            if time.monotonic() + delay > deadline:
                raise
            if forming and "forming" not in said:
                log.warning("waiting for the NATS cluster to accept the streams: JetStream has not yet the "
                            "servers their replicas need", extra={"fields": {
                                "what": what, "error": str(exc.description), "wait_s": within}})  # type: ignore[union-attr]
            elif not forming and "answering" not in said:
                log.warning("JetStream not answering yet; trying again", extra={"fields": {
                    "what": what, "error": repr(exc), "wait_s": within}})
            said.add("forming" if forming else "answering")
            await anyio.sleep(delay)
            delay = min(2 * delay, 2.0)


async def made_by_a_core(js: JetStreamContext, poll_s: float = 0.5) -> tuple[Any, Any]:
    """For a reader, which makes and changes nothing: once a core has made the two streams,
    the snapshot store and the lease bucket, the store and the bucket (waiting as long as it
    takes)."""
    said = False
    while True:
        try:
            for stream in (IN_STREAM, OUT_STREAM):
                await js.stream_info(stream)
            return await js.object_store(SNAPSHOT_BUCKET), await js.key_value(LEASE_BUCKET)
        except (NotFoundError, *NOT_ANSWERING) as exc:
            if not said:
                log.warning("waiting for a core to make the streams and stores", extra={"fields": {
                    "error": repr(exc)}})
                said = True
            await anyio.sleep(poll_s)


async def snapshot_store(js: JetStreamContext, replicas: int = 1):
    try:
        return await js.object_store(SNAPSHOT_BUCKET)
    except NotFoundError:
        return await js.create_object_store(
            SNAPSHOT_BUCKET, config=api.ObjectStoreConfig(bucket=SNAPSHOT_BUCKET, storage=api.StorageType.FILE,
                                                          replicas=replicas))


CONSUMER_NAME_BYTES = 200  # JetStream keeps a durable consumer in a directory of its name: at most 255 bytes


def output_consumer(rm: str) -> str:
    """The durable consumer through which RM `rm` reads its outputs: `rm_<rm>`, or for an
    id too long to name a directory, its start and a digest of the whole (an rmID may be
    1,024 characters: such an RM registered, and could never attach)."""
    name = f"rm_{rm}"
    if len(name.encode()) <= CONSUMER_NAME_BYTES:
        return name
    digest = hashlib.sha256(rm.encode()).hexdigest()[:32]
    return f"rm_{rm.encode()[:100].decode(errors='ignore')}_{digest}"


async def attach_consumer(js: JetStreamContext, subjects: Subjects, rm: str) -> tuple[str, int]:
    """(Re)make RM `rm`'s durable consumer on YK_OUT, filtered to its outputs; (name, first
    stream sequence it delivers). The first time it starts right after the stream's last
    message; later right after the old consumer's ack floor, so an RM that was away gets
    exactly what it missed. It is made anew each time: a previous process of this RM may
    have left a pull request on the server that would swallow the next output."""
    durable = output_consumer(rm)
    info = await js.stream_info(OUT_STREAM)
    start = info.state.last_seq + 1  # first life of this RM: what comes next
    # (an RM of a long id attached under its plain name before the names were shortened: its place is kept)
    for name in (durable,) if durable == f"rm_{rm}" else (durable, f"rm_{rm}"):
        try:
            old = await js.consumer_info(OUT_STREAM, name)
        except NotFoundError:
            continue
        start = max(old.ack_floor.stream_seq + 1 if old.ack_floor else 1, old.config.opt_start_seq or 1)
        await js.delete_consumer(OUT_STREAM, name)
        break
    await js.add_consumer(OUT_STREAM, api.ConsumerConfig(
        durable_name=durable, ack_policy=api.AckPolicy.ALL, filter_subject=subjects.rm_outputs(rm),
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start, max_ack_pending=-1))
    return durable, start


def answer_attach(js: JetStreamContext, subjects: Subjects) -> Callable[[Any], Awaitable[None]]:
    """The leader's answer to `yk.v1.attach.<rm>`: (re)make the RM's output consumer and
    answer `{"consumer", "start"}`. The RM comes from the subject, which NATS permissions pin
    to the caller, so an RM never needs the JetStream API that could read another's outputs.
    One subscription, so attaches run one at a time."""
    head = subjects.attach("")

    async def on_attach(msg: Any) -> None:
        rm = msg.subject[len(head):]
        try:
            if rm == CORE_TOKEN:
                raise ValueError(f"{CORE_TOKEN!r} is not an RM")
            if problem := rm_id_problem(rm):  # no RM registers so (core/registry.py)
                raise ValueError(problem)
            if len(rm) > limits.MAX_ID_CHARS:
                raise ValueError(f"rmID of {len(rm)} characters: at most {limits.MAX_ID_CHARS}")
            consumer, start = await attach_consumer(js, subjects, rm)
            body: dict[str, Any] = {"consumer": consumer, "start": start}
        except ValueError as exc:
            body = {"error": str(exc)}
        except NatsError as exc:
            log.warning("attach failed", extra={"fields": {"rm": rm, "error": repr(exc)}})
            body = {"error": f"could not make the consumer: {exc!r}"}
        if msg.reply:
            await msg.respond(json.dumps(body).encode())
    return on_attach


async def failed_records(js: JetStreamContext, subject: str) -> list[Entry]:
    """The core service's records of entries that failed (`subject`: this process's
    `_core.failed`), as log entries (core/guard.py)."""
    info = await js.stream_info(IN_STREAM, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    if not count:
        return []
    found = []
    sub = await js.subscribe(subject, stream=IN_STREAM, ordered_consumer=True,
                             config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.ALL))
    try:
        for _ in range(count):
            msg = await sub.next_msg(timeout=10)
            seq, ts = js_reply_meta(msg.reply)
            found.append(Entry(seq=seq, ts=ts, rm="", kind=FAILED_KIND, msg=msg.data))
    finally:
        await sub.unsubscribe()
    return found
