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
and nobody waits for its entries, so reads go first there:
- before an entry it lets the loop run what arrived (`turn_for_reads`), and a dry run or a
  metrics scrape is answered at once, on one state (`between_slices`);
- in the middle of a long entry too (`apply`): the entry runs in a greenlet, and where its
  records are whole (`Step.between`: between two asks or releases of a request, every 64,
  and two rounds of a pass) it switches back here, the loop runs for a turn, and the entry
  goes on where it stopped. A dry run is answered in that turn (`applying` names the entry in progress);
  every other read waits for the entry's end (`at_rest`), as the read models are folded
  there. A pause changes nothing the entry decides (the core reads no clock); a stop during
  one finishes the entry first, so none is left half applied.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

import anyio
from greenlet import greenlet

from ykbus.core import Core
from ykbus.core.entries import Entry, Output
from ykbus.core.guard import GuardedCore

READ_TURN_S: Final = 0.0003  # how long a reader lets the loop run reads (before an entry, or in one)
READ_TURN_EVERY_S: Final = 0.005  # at most one turn per this much time applying


class LiveCore:
    def __init__(self, guard: GuardedCore, reads_first: bool = False) -> None:
        self.guard = guard
        self.lock = asyncio.Lock()  # held while an entry is applied and its outputs handed over
        self.reads_first = reads_first  # a reader: reads go before entries (the module's docstring)
        self._turn_ended = 0.0  # perf_counter at the end of the last turn for reads
        self.applying: int | None = None  # a reader in a turn in the middle of an entry: its seq
        self._rest = asyncio.Event()  # set unless a turn is in the middle of an entry
        self._rest.set()
        self._turns = True  # False while a stop finishes the entry in progress
        self.paused_s = 0.0  # the last entry's time in turns (its own time is the rest)

    async def apply(self, entry: Entry) -> list[Output]:
        """Apply `entry` (the caller holds `lock`). On the writer, at once. In a reader, in a
        greenlet that switches back here at a pause point (`Step.between`) once
        `READ_TURN_EVERY_S` went by since the last turn: the loop runs for `READ_TURN_S` (a dry
        run that arrived is answered, on the state as it is there), then the entry goes on. If
        the turn is cancelled (a stop), the entry is finished before the cancellation goes on."""
        self.paused_s = 0.0
        if not self.reads_first:
            return self.guard.apply(entry)
        run = greenlet(self.guard.apply)
        result: Any = run.switch(entry, self._pause_point)  # () while the entry is paused
        if run.dead:
            return result  # no turn was due
        self.applying = entry.seq
        self._rest.clear()
        try:
            while not run.dead:
                try:
                    began = time.perf_counter()
                    await _turn()
                except BaseException:  # a stop: first the entry goes on to its end, without turns
                    self._turns = False
                    while not run.dead:
                        result = run.switch()
                    raise
                self._turn_ended = time.perf_counter()
                self.paused_s += self._turn_ended - began
                result = run.switch()
        finally:
            self._turns = True
            self.applying = None
            self._rest.set()
        return result

    def _pause_point(self) -> None:
        """In the entry's greenlet, at a pause point: back to `apply` for a turn if one is due."""
        if self._turns and self._turn_due():
            parent = greenlet.getcurrent().parent
            assert parent is not None
            parent.switch()

    def _turn_due(self) -> bool:
        """`READ_TURN_EVERY_S` of applying went by since the last turn (before an entry or in one)."""
        return time.perf_counter() - self._turn_ended >= READ_TURN_EVERY_S

    async def at_rest(self) -> None:
        """Returns between two entries: a read that is not a dry run waits here for the end of
        the entry a reader's turn paused (the read models are folded at an entry's end)."""
        while self.applying is not None:
            await self._rest.wait()

    async def turn_for_reads(self) -> None:
        """Before an entry, in a reader: the loop runs for `READ_TURN_S` (a request that
        arrived is read, parsed and answered; a dry run at once), at most once every
        `READ_TURN_EVERY_S`, so a read waits for no more than the entry in progress and a
        reader working through tiny entries spends at most 6% of its time on turns. The
        writer takes none: a turn would delay the outputs the RMs wait for
        (docs/benchmarks-history.md, "A writer's turn, tried again, dropped")."""
        if not self.reads_first or not self._turn_due():
            return
        await _turn()
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
        """The last entry applied to its end (in a turn in the middle of one, the one before;
        the core's `last_seq` is already the entry in progress)."""
        return self.applying - 1 if self.applying is not None else self.guard.core.last_seq

    def loaded(self, guard: GuardedCore) -> None:
        """A snapshot was loaded: its guard replaces the one the service started with."""
        self.guard = guard


async def _turn() -> None:
    """The loop runs for `READ_TURN_S`, one pass after another: what is ready runs, and what
    arrived is read (an HTTP request takes a few passes from its bytes to its handler). Not
    a timer: uvloop's are whole milliseconds, and a 0.3 ms one fires at the next pass."""
    end = time.perf_counter() + READ_TURN_S
    await anyio.sleep(0)
    while time.perf_counter() < end:
        await anyio.sleep(0)
