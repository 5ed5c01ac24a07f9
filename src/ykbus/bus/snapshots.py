"""Snapshots off the writer's path (issue 24): the state is written by a forked child.

Building a snapshot walks the whole state (most of a second at 5,000 nodes and 100,000
allocations), and the writer applied nothing meanwhile: every ask that arrived waited. As
Redis's BGSAVE does, the service forks: the child holds the state as it was at that entry
(the kernel shares the pages, copying those either side writes), encodes it into a file
(the local copy's, with `snapshot_dir`) at the lowest CPU priority, and exits; the writer
goes on at once. A thread waits for it and reads the file; then the snapshot is stored in
the object store and becomes the guard's checkpoint as of its entry.

What a snapshot promises is unchanged: the outputs of every entry up to the one it records
are on the output stream before it is taken (the publisher settles first). One snapshot is
made at a time; entries applied while it is made count toward the next. Without `os.fork`
(Windows), or for the final snapshot at stop, the state is encoded in place.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import io
import logging
import os
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import api
from nats.js.errors import NotFoundError, ObjectNotFoundError

from ykbus.bus.live import LiveCore
from ykbus.bus.subjects import SNAPSHOT_OBJECT
from ykbus.core import Core
from ykbus.core.guard import GuardedCore
from ykbus.core.snapshot import SnapshotError, dump_snapshot, load_snapshot
from ykbus.yamlload import load_yaml

log = logging.getLogger("ykbus.core")


RETRY_MAX_S = 30.0  # the longest wait between failed snapshots
STORE_DUE_RETRY_S = 0.5  # a new leader's snapshot that may not be stored yet: tried again after this


class SnapshotFailed(Exception):
    """The forked child did not deliver a snapshot."""


def _lowest_priority() -> None:
    """The writer, NATS and the RMs come first on a busy machine: the child runs only on a
    CPU that nothing else wants (Linux's SCHED_IDLE, with nice 19; elsewhere nice 19). With
    nice 19 alone, bench e2e's writer fell behind by 6-20 ms at a time more often while a
    child encoded (docs/benchmarks-history.md, "Snapshots off the writer's path")."""
    os.nice(19)
    if idle_children:
        _set_policy(0, "SCHED_IDLE")


def _set_policy(pid: int, policy: str) -> bool:
    """Whether `pid` now runs under `policy` (False: refused, or not on this system)."""
    if not (hasattr(os, "sched_setscheduler") and hasattr(os, policy)):
        return False
    try:
        os.sched_setscheduler(pid, getattr(os, policy), os.sched_param(0))
    except OSError:  # refused: leaving SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE >= 1
        return False
    return True


idle_children = True  # False once a child could not be taken out of SCHED_IDLE: nice 19 alone from then on
PROMOTE_AFTER_S = 10.0  # a child still encoding after this long (a machine busy all the time) gets nice 19's share


def _dump_in_child(core: Core, path: str) -> None:
    """In the forked child: encode the state into the file `path`, and leave without running
    anything of the parent's (no atexit, no buffered output flushed twice)."""
    code = 1
    try:
        _lowest_priority()
        gc.disable()  # a collection would walk (and copy) every page of the heap
        data = dump_snapshot(core)
        with open(path, "wb") as f:
            f.write(data)
        code = 0
    finally:
        os._exit(code)


CHILD_TIMEOUT_S = 300.0  # a child still encoding after this long is stuck: killed, the snapshot tried again


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _wait_and_read(pid: int, path: str) -> bytes:
    """In a worker thread: the child's exit, then its file in one read (the read fills the
    bytes without holding the GIL). A child still encoding after PROMOTE_AFTER_S runs at nice
    19 instead of only on idle CPUs (where the system refuses that, it is killed and the next
    ones run at nice 19 alone); one that does not exit in CHILD_TIMEOUT_S (a fork can
    copy a lock another thread held, and wait on it forever) is killed."""
    global idle_children
    deadline, pause = time.monotonic() + CHILD_TIMEOUT_S, 0.001
    promote_at, promoted = time.monotonic() + PROMOTE_AFTER_S, False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if not promoted and time.monotonic() > promote_at:  # SCHED_IDLE starves on a CPU never idle
            promoted = True
            if idle_children and not _set_policy(pid, "SCHED_OTHER"):
                idle_children = False  # it would starve until killed: the next child is not idle-only
                _kill(pid)
                raise SnapshotFailed("the snapshot child could not leave SCHED_IDLE (no CAP_SYS_NICE and "
                                     "RLIMIT_NICE 0): killed; snapshots run at nice 19 from now on")
        if time.monotonic() > deadline:
            _kill(pid)
            raise SnapshotFailed(f"the snapshot child did not exit in {CHILD_TIMEOUT_S:.0f} s: killed")
        time.sleep(pause)
        pause = min(2 * pause, 0.05)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SnapshotFailed(f"the snapshot child exited with {code}")
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size)
    finally:
        os.close(fd)
    if len(data) != size:
        raise SnapshotFailed(f"the snapshot file gave {len(data)} of {size} bytes")
    return data


def fork_dump(core: Core, path: str) -> int:
    """A forked child that encodes `core` as it is now into `path`: its pid."""
    pid = os.fork()
    if pid == 0:  # the child
        _dump_in_child(core, path)
    return pid


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


CHUNK_BYTES = 128 * 1024  # the object store's own chunk: a snapshot is stored in messages of at most this
CHUNK_HEADROOM = 4096  # ... and this much under the server's max_payload (a message's subject and headers count)
# Reading the snapshot while another core stores a new one can wait forever (the chunks read
# are replaced under the read): the object's info is looked at meanwhile, and a read of one
# that changed is given up for the new one, for this long in all
SNAPSHOT_GET_TIMEOUT_S = 60
CHANGE_POLL_S = 0.5  # how often a read looks whether the object it reads was replaced


def chunk_bytes(max_payload: int) -> int:
    """The size of a snapshot's chunks on a server taking messages of up to `max_payload`
    bytes: the object store's 128 KiB, less when the server takes less (else every upload
    fails)."""
    return max(1024, min(CHUNK_BYTES, max_payload - CHUNK_HEADROOM))


async def store_object(store: Any, name: str, data: bytes, chunk: int) -> None:
    """`data` stored as object `name` of `store`, in messages of `chunk` bytes."""
    await store.put(name, data, api.ObjectMeta(name=name, options=api.ObjectMetaOptions(max_chunk_size=chunk)))


def snapshot_digest(data: bytes) -> str:
    """The digest a JetStream object store records for `data`."""
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


async def fetch_snapshot(store: Any, name: str, local: str | None) -> tuple[bytes, str] | None:
    """The latest snapshot, object `name` of `store`: the local copy at `local` when its
    SHA-256 is the stored object's (no download), else the object itself; None if none. A
    read of an object another core replaces meanwhile (its chunks go under the read, which
    then waits for ever) is given up for the new one, for `SNAPSHOT_GET_TIMEOUT_S` in all; a
    read that is only slow (a large snapshot) is never cut."""
    deadline = time.monotonic() + SNAPSHOT_GET_TIMEOUT_S
    while True:
        try:
            info = await store.get_info(name)
        except (NotFoundError, ObjectNotFoundError):
            return None
        if local and os.path.exists(local) and not os.path.isdir(local):
            with open(local, "rb") as f:
                data = f.read()
            if snapshot_digest(data) == info.digest:
                return data, "local copy"
        into = io.BytesIO()  # (nats-py's own result grows a bytes object chunk by chunk: quadratic)
        replaced = False
        async with anyio.create_task_group() as tg:
            async def watch(nuid: str) -> None:
                nonlocal replaced
                while True:
                    await anyio.sleep(CHANGE_POLL_S)
                    try:
                        now = await store.get_info(name)
                    except (NotFoundError, ObjectNotFoundError):
                        now = None
                    if now is None or now.nuid != nuid:
                        replaced = True
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch, info.nuid)
            await store.get(name, writeinto=into)
            tg.cancel_scope.cancel()
        if not replaced:
            return into.getvalue(), "object store"
        if time.monotonic() >= deadline:
            raise NatsTimeoutError(f"the snapshot was replaced while it was read, each try, for {SNAPSHOT_GET_TIMEOUT_S} s")
        log.info("the snapshot was replaced while it was read: reading the new one", extra={"fields": {"bytes": info.size}})


async def load_latest(store: Any, name: str, local: str | None, live: LiveCore, arrivals: Any) -> None:
    """At start: the latest snapshot (`fetch_snapshot`) loaded into `live`, its guard's
    checkpoint (`arrivals`: bus/sharding.py `Arrivals`, what a loaded core is adopted by); with
    none, or one that cannot be read, the core replays the log from its start (the log is the
    truth: the service checks it still holds its start)."""
    fetched = await fetch_snapshot(store, name, local)
    if fetched is None:
        log.info("no snapshot: replaying the log from the start")
        return
    data, source = fetched
    t0 = time.perf_counter()
    try:
        core = load_snapshot(data, load_yaml)
    except SnapshotError as exc:  # truncated, garbled, of a format this version does not read
        log.error("the stored snapshot cannot be read: replaying the log from the start instead",
                  extra={"fields": {"error": str(exc), "bytes": len(data), "from": source}})
        return
    live.loaded(GuardedCore(arrivals.adopt(core), arrivals.restore, checkpoint=data))
    gc.freeze()  # the loaded state is long-lived
    log.info("snapshot loaded", extra={"fields": {
        "last_seq": core.last_seq, "bytes": len(data), "from": source,
        "ms": round(1000 * (time.perf_counter() - t0), 1)}})


class Snapshotter:
    """Takes a snapshot every `every` entries, off the writer's path (module docstring)."""

    def __init__(self, every: int, live: LiveCore, settle: Callable[[], Awaitable[None]], store: Any,
                 local_path: str | None, fork: bool | None = None, upload: Callable[[], bool] = lambda: True,
                 name: str = SNAPSHOT_OBJECT, chunk: int = CHUNK_BYTES,
                 stored: Callable[[int], Awaitable[None]] | None = None) -> None:
        """`live`: the core, its guard (a snapshot becomes its checkpoint) and the writer's
        lock (held by the service while it applies an entry and hands over its outputs: the
        state is taken between entries); `settle()`: until every output sent is stored;
        `store`: the object store; `upload()`: store this one there (the leader does; a
        standby's snapshot only becomes its guard's checkpoint); `chunk`: the size of the
        messages it is stored in (`chunk_bytes`); `stored(seq)`: after each stored, of entry
        `seq` (the service trims the input log below it, `--in-keep`)."""
        self._stored = stored
        self._live = live
        self._chunk = chunk
        self.name = name  # the object it is stored as (a shard's own: Subjects.snapshot_object)
        self.every = every
        self._upload = upload
        self._settle, self._store = settle, store
        self.local_path = local_path
        self.fork = hasattr(os, "fork") if fork is None else fork
        self.since = 0  # entries applied since the state the last snapshot holds
        self.since_stored = 0  # ... since the last one this process stored (a standby stores none)
        self.store_due = False  # this process leads and has stored none for `every` entries: store one
        self.at = time.monotonic()  # when the last snapshot was stored (or the state loaded)
        self.taken = 0
        self.failed = 0  # snapshots that failed (each is tried again: one more taken than the entries call for)
        self._wanted = anyio.Event()
        self._busy = False
        self._one_at_a_time = anyio.Lock()

    def applied(self) -> None:
        """One entry applied: a snapshot is due every `every` entries."""
        self.since += 1
        self.since_stored += 1
        if self.since >= self.every and not self._busy:
            self._wanted.set()

    def leading(self) -> None:
        """This process now leads: if it has applied `every` entries or more since it last
        stored a snapshot (a standby stores none), one is due now, so that a process started
        after a takeover replays the log from here, not from before it. Due until stored: if
        it may not store yet (outputs kept back while its lease lapsed), it is tried again."""
        if self.since_stored >= self.every:
            self.store_due = True
            self._wanted.set()

    @property
    def idle(self) -> bool:
        """No snapshot is being made or is due."""
        return not self._busy and not self._wanted.is_set()

    def loaded(self) -> None:
        self.at = time.monotonic()

    async def run(self) -> None:
        """Take the snapshots that fall due, one at a time, while the writer goes on."""
        pause = 0.0  # after a failure (a full disk, say): wait before the next try, longer each time
        while True:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            try:
                await self.take(forked=self.fork)
                pause = 0.0
                if self.store_due:  # it could not be stored yet: again in a moment
                    await anyio.sleep(STORE_DUE_RETRY_S)
                    self._wanted.set()
            except Exception as exc:  # noqa: BLE001 - the log keeps everything; the next one tries again
                self.failed += 1
                pause = min(max(2 * pause, 0.5), RETRY_MAX_S)
                log.error("snapshot failed: the next one tries again", extra={"fields": {
                    "error": repr(exc), "retry_in_s": pause}})
                await anyio.sleep(pause)
                if self.store_due:
                    self._wanted.set()

    async def take(self, forked: bool = False) -> None:
        """A snapshot of the state after the last entry applied (the final one at stop: in
        place, after the one being made, so the newest is stored last)."""
        async with self._one_at_a_time:
            await self._take(forked)

    async def _take(self, forked: bool) -> None:
        self._busy = True  # from here: entries applied meanwhile count toward the next one
        try:
            async with self._live.lock:  # between entries: none half handed over
                await self._settle()  # every output up to the cursor is stored before the cursor is
                upload = self._upload()
                if self.since == 0 and not (upload and self.since_stored) or self.store_due and not upload:
                    return  # nothing new; or the one due is to be stored, and may not be yet
                t0 = time.perf_counter()
                core = self._live.core
                seq, since, since_stored = core.last_seq, self.since, self.since_stored
                self.since = 0
                if upload:
                    self.since_stored, self.store_due = 0, False
                local = self.local_path if upload else None
                tmp = (local or os.path.join(tempfile.gettempdir(), f"ykbus-snapshot-{os.getpid()}")) + ".tmp"
                if local:
                    os.makedirs(os.path.dirname(local), exist_ok=True)
                if forked:
                    pid = fork_dump(core, tmp)  # the state as of `seq`; the writer goes on from here
                else:
                    data = dump_snapshot(core)
            try:
                if forked:
                    data = await anyio.to_thread.run_sync(_wait_and_read, pid, tmp)
                elif local:
                    await anyio.to_thread.run_sync(_write, tmp, data)
                dumped = time.perf_counter()
                self._live.guard.checkpoint(data, seq)
                if upload:
                    await store_object(self._store, self.name, data, self._chunk)
            except BaseException:
                self.since += since  # not stored: those entries still count
                if upload:
                    self.since_stored += since_stored
                    self.store_due = self.since_stored >= self.every
                raise
            if local:  # a copy beside the store makes the next start skip the download
                os.replace(tmp, local)
            elif forked:
                os.unlink(tmp)
            if upload and self._stored is not None:
                await self._stored(seq)
            self.at = time.monotonic()
            self.taken += 1
            log.info("snapshot written", extra={"fields": {
                "last_seq": seq, "bytes": len(data), "forked": forked, "stored": upload,
                "dump_ms": round(1000 * (dumped - t0), 1), "ms": round(1000 * (time.perf_counter() - t0), 1)}})
        finally:
            self._busy = False
            if self.since >= self.every:
                self._wanted.set()
