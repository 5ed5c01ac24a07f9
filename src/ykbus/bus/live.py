"""The live core and the writer's lock: one owner for both.

The service applies each entry to the core while it holds `lock`; every other part of the
service that must not run in the middle of an entry (a snapshot, a takeover, storing the
units of RMs that left) takes the same lock, from here: nobody else makes one.

The guard replaces the core when an entry fails (core/guard.py), and loading a snapshot
replaces the guard: so the parts of the service read the core through this object when they
need it (`live.core`), and never keep it.

Who goes first between an entry and a read is decided here too. The writer goes first: the
RMs wait for its entries, so a read gets the loop only when the writer waits for input,
and long reads go in slices between entries. A reader (`ykbus core --reader`) answers reads
and nobody waits for its entries, so reads go first there: before an entry it lets the loop
run what arrived (`turn_for_reads`), and a dry run or a metrics scrape is answered at once,
on one state (`between_slices`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

import anyio

from ykbus.core import Core
from ykbus.core.guard import GuardedCore

READ_TURN_S: Final = 0.0003  # how long a reader lets the loop run reads before an entry
READ_TURN_EVERY_S: Final = 0.005  # at most one turn per this much time applying (tiny entries)


class LiveCore:
    def __init__(self, guard: GuardedCore, reads_first: bool = False) -> None:
        self.guard = guard
        self.lock = asyncio.Lock()  # held while an entry is applied and its outputs handed over
        self.reads_first = reads_first  # a reader: reads go before entries (the module's docstring)
        self._turn_ended = 0.0  # perf_counter at the end of the last turn for reads

    async def turn_for_reads(self) -> None:
        """Before an entry, in a reader: the loop runs for `READ_TURN_S` (a request that
        arrived is read, parsed and answered; a dry run at once), at most once every
        `READ_TURN_EVERY_S`, so a read waits for no more than the entry in progress and a
        reader working through tiny entries spends at most 6% of its time on turns. The
        writer takes none: a turn would delay the outputs the RMs wait for
        (docs/benchmarks-history.md, "A writer's turn, tried again, dropped")."""
        if not self.reads_first or time.perf_counter() - self._turn_ended < READ_TURN_EVERY_S:
            return
        await anyio.sleep(READ_TURN_S)
        self._turn_ended = time.perf_counter()

    async def between_slices(self) -> None:
        """Between two slices of a long read (a dry run, a metrics scrape): on the writer the
        loop runs, so the entries that arrived are applied before the next slice; in a reader
        nothing does, and the read goes on, on one state."""
        if not self.reads_first:
            await anyio.sleep(0)

    @property
    def core(self) -> Core:
        return self.guard.core

    def current(self) -> Core:
        """The core as it is now (for readers that take a function: rest/router.RestState)."""
        return self.guard.core

    def applied(self) -> int:
        """The last entry applied."""
        return self.guard.core.last_seq

    def loaded(self, guard: GuardedCore) -> None:
        """A snapshot was loaded: its guard replaces the one the service started with."""
        self.guard = guard
