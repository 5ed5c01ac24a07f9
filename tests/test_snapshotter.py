"""The snapshotter's bookkeeping (bus/snapshots.py), with the real Snapshotter and a real
core, and an object store that only records what it is given."""

from __future__ import annotations

import anyio
import pytest

from ykbus.bus.snapshots import Snapshotter
from ykbus.core import Core

pytestmark = pytest.mark.anyio


class Store:
    def __init__(self) -> None:
        self.put_sizes: list[int] = []

    async def put(self, name: str, data: bytes) -> None:
        self.put_sizes.append(len(data))


class Guard:
    def checkpoint(self, data: bytes, seq: int) -> None:
        self.last = seq


async def until(check) -> None:
    with anyio.fail_after(10):
        while not check():
            await anyio.sleep(0.01)


async def test_a_new_leader_stores_its_due_snapshot_once_it_may():
    """A standby stores no snapshot; once it leads one is due at once, and if it may not
    store yet (outputs kept back while its lease had lapsed) it is stored as soon as it may."""
    core, guard, store, may_store = Core(), Guard(), Store(), [False]

    async def settle() -> None:
        return None

    snaps = Snapshotter(5, lambda: core, lambda: guard, settle, lambda: store, None, fork=False,
                        upload=lambda: may_store[0])
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
    core, guard, store = Core(), Guard(), Store()

    async def settle() -> None:
        return None

    snaps = Snapshotter(5, lambda: core, lambda: guard, settle, lambda: store, None, fork=False)
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
