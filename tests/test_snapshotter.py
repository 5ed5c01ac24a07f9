"""The snapshotter's bookkeeping (bus/snapshots.py), with the real Snapshotter and a real
core, and an object store that only records what it is given."""

from __future__ import annotations

import os
import time

import anyio
import pytest

from ykbus.bus import snapshots
from ykbus.bus.live import LiveCore
from ykbus.bus.snapshots import Snapshotter
from ykbus.core import Core

pytestmark = pytest.mark.anyio


class Store:
    def __init__(self) -> None:
        self.put_sizes: list[int] = []

    async def put(self, name: str, data: bytes, meta: object = None) -> None:
        self.put_sizes.append(len(data))


class Guard:
    def __init__(self) -> None:
        self.core = Core()

    def checkpoint(self, data: bytes, seq: int) -> None:
        self.last = seq


async def until(check) -> None:
    with anyio.fail_after(10):
        while not check():
            await anyio.sleep(0.01)


async def test_a_new_leader_stores_its_due_snapshot_once_it_may():
    """A standby stores no snapshot; once it leads one is due at once, and if it may not
    store yet (outputs kept back while its lease had lapsed) it is stored as soon as it may."""
    live, store, may_store = LiveCore(Guard()), Store(), [False]

    async def settle() -> None:
        return None

    snaps = Snapshotter(5, live, settle, store, None, fork=False, upload=lambda: may_store[0])
    async with anyio.create_task_group() as tg:
        tg.start_soon(snaps.run)
        for _ in range(12):  # as a standby: checkpoints of its own, none stored
            snaps.applied()
        await until(lambda: snaps.taken >= 1 and snaps.idle)
        assert store.put_sizes == [] and snaps.since_stored == 12
        snaps.leading()  # it leads, but may not store yet
        await anyio.sleep(0.3)
        assert store.put_sizes == [] and snaps.store_due
        may_store[0] = True
        await until(lambda: store.put_sizes)
        assert len(store.put_sizes) == 1 and snaps.since_stored == 0 and not snaps.store_due
        tg.cancel_scope.cancel()


async def test_a_leader_that_stored_recently_has_no_snapshot_due_at_once():
    live, store = LiveCore(Guard()), Store()

    async def settle() -> None:
        return None

    snaps = Snapshotter(5, live, settle, store, None, fork=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(snaps.run)
        for _ in range(5):
            snaps.applied()
        await until(lambda: store.put_sizes)
        snaps.applied()
        snaps.leading()  # 1 entry since it stored: nothing due
        await anyio.sleep(0.2)
        assert len(store.put_sizes) == 1 and not snaps.store_due
        tg.cancel_scope.cancel()


SCHED = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's scheduling policies")


def _policy_written_by_child(promote_after_s: float, monkeypatch: pytest.MonkeyPatch, tmp_path) -> int:
    """A forked child that takes the snapshot child's priority, waits 0.6 s and writes the
    policy it then runs under as its 'snapshot'; read back as the service reads a snapshot."""
    monkeypatch.setattr(snapshots, "PROMOTE_AFTER_S", promote_after_s)
    path = str(tmp_path / "policy")
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            snapshots._lowest_priority()
            time.sleep(0.6)
            with open(path, "w") as f:
                f.write(str(os.sched_getscheduler(0)))
            code = 0
        finally:
            os._exit(code)
    return int(snapshots._wait_and_read(pid, path))


@SCHED
def test_the_snapshot_child_runs_only_on_cpus_nothing_else_wants(monkeypatch, tmp_path) -> None:
    assert _policy_written_by_child(60.0, monkeypatch, tmp_path) == os.SCHED_IDLE


@SCHED
def test_a_snapshot_child_still_encoding_after_a_while_is_given_a_share_of_the_cpu(monkeypatch, tmp_path) -> None:
    """On a machine whose CPUs are never idle, SCHED_IDLE would starve the child: after
    PROMOTE_AFTER_S it runs as any process at nice 19 does."""
    assert _policy_written_by_child(0.15, monkeypatch, tmp_path) == os.SCHED_OTHER


@SCHED
def test_a_child_that_may_not_leave_sched_idle_is_killed_and_the_next_ones_run_at_nice_19(monkeypatch, tmp_path):
    """Found by review: without CAP_SYS_NICE and with RLIMIT_NICE 0 (Docker's defaults for a
    user), taking a child out of SCHED_IDLE is refused, and on a busy machine it would starve
    until killed at 300 s, every time."""
    monkeypatch.setattr(snapshots, "idle_children", True)
    monkeypatch.setattr(snapshots, "_set_policy", lambda pid, policy: policy != "SCHED_OTHER")
    with pytest.raises(snapshots.SnapshotFailed, match="SCHED_IDLE"):
        _policy_written_by_child(0.15, monkeypatch, tmp_path)
    assert snapshots.idle_children is False
    monkeypatch.undo()
    monkeypatch.setattr(snapshots, "idle_children", False)
    assert _policy_written_by_child(60.0, monkeypatch, tmp_path) == os.SCHED_OTHER
