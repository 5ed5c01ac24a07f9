"""The live core and the writer's lock: one owner for both.

The service applies each entry to the core while it holds `lock`; every other part of the
service that must not run in the middle of an entry (a snapshot, a takeover, storing the
units of RMs that left) takes the same lock, from here: nobody else makes one.

The guard replaces the core when an entry fails (core/guard.py), and loading a snapshot
replaces the guard: so the parts of the service read the core through this object when they
need it (`live.core`), and never keep it.
"""

from __future__ import annotations

import asyncio

from ykbus.core import Core
from ykbus.core.guard import GuardedCore


class LiveCore:
    def __init__(self, guard: GuardedCore) -> None:
        self.guard = guard
        self.lock = asyncio.Lock()  # held while an entry is applied and its outputs handed over

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
