"""The garbage collector as a core's long-lived state wants it, wherever a core applies a
log: the service's writer (bus/service.py), `ykbus replay` and what replays through it
(log/replay.py).

A core's state (nodes, applications, asks, allocations, their histories) lives for many
entries, and a full collection walks all of it: on a recorded demo log they were a tenth of
a replay's time. The core makes no reference cycles on its hot path (asks, applications and
allocations are freed by reference counting; tests/core prove it), so what lives now is
moved out of the collector's sight (`gc.freeze`) every `FREEZE_EVERY` entries, or sooner
after `FREEZE_EVERY_ALLOCATIONS` allocations. A dropped partition does leave cycles: after
one, everything is collected once before the next freeze.
"""

from __future__ import annotations

import gc

FREEZE_EVERY = 1000  # entries between gc.freeze() calls
FREEZE_EVERY_ALLOCATIONS = 10_000  # ... or allocations, whichever comes first


class CollectorPolicy:
    """When to freeze what lives, for one process applying entries; `applied` after each."""

    __slots__ = ("entries", "freezes", "_frozen_at", "_dropped_seen")

    def __init__(self) -> None:
        self.entries = 0  # entries applied
        self.freezes = 0  # times what lived was frozen
        self._frozen_at = 0  # the allocation count at the last freeze
        self._dropped_seen = 0  # partitions dropped, as of the last freeze

    def applied(self, allocations: int, dropped_partitions: int) -> bool:
        """One more entry applied, `allocations` made and `dropped_partitions` dropped since
        the process began: whether what lives was frozen now."""
        self.entries += 1
        if self.entries % FREEZE_EVERY and allocations - self._frozen_at < FREEZE_EVERY_ALLOCATIONS:
            return False
        self._frozen_at = allocations
        if dropped_partitions != self._dropped_seen:
            self._dropped_seen = dropped_partitions
            gc.unfreeze()
            gc.collect()
        gc.freeze()
        self.freezes += 1
        return True
