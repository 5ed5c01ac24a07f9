"""The read model: what readers ask of a partition, folded from the applier's events
(core/effects.py) as they happen, so a reader does not walk the live state.

`PartitionSummary` is the part of YuniKorn's `PartitionInfo` (the REST API's
`/ws/v1/partitions`) that follows from events: the applications per state, with their
`total`, and `totalContainers`, the allocations held. It is derived data: a snapshot does
not store it, a restore rebuilds it from the records (`of`), and the property test checks
after every entry that the fold equals that rebuild.
"""

from __future__ import annotations

from typing import Any

from ykbus.core.lifecycle import AppState


class PartitionSummary:
    """Applications per state and allocations held, in one partition."""

    __slots__ = ("applications", "containers", "counts")

    def __init__(self) -> None:
        self.applications: dict[AppState, int] = {}  # state -> applications in it (Completed and Failed until expired)
        self.containers = 0  # allocations held (placed or recovered, not yet released)
        # decisions counted since the partition began (YuniKorn's counters: metrics), by
        # (what, queue path or "", outcome); unlike the rest, a snapshot keeps them
        self.counts: dict[tuple[str, str, str], int] = {}

    def count(self, what: str, queue: str, outcome: str) -> None:
        key = (what, queue, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1

    def app_entered(self, state: AppState) -> None:
        self.applications[state] = self.applications.get(state, 0) + 1

    def app_left(self, state: AppState) -> None:
        left = self.applications[state] - 1
        if left:
            self.applications[state] = left
        else:
            del self.applications[state]

    def dao(self) -> dict[str, Any]:
        """As YuniKorn names it: `applications` (`total` and a count per state present, in the
        states' order) and `totalContainers`."""
        counts = {s.value: self.applications[s] for s in AppState if s in self.applications}
        return {"applications": {"total": sum(counts.values()), **counts}, "totalContainers": self.containers}

    @staticmethod
    def of(apps: Any, terminated: Any, rejected: Any, allocations: int) -> PartitionSummary:
        """The summary of the records as they are (a restore; the property test's reference):
        `apps`, `terminated` and `rejected` are the partition's, by id."""
        summary = PartitionSummary()
        for app in apps.values():
            summary.app_entered(app.state)
        for ended in (*terminated.values(), *rejected.values()):
            summary.app_entered(ended.state)
        summary.containers = allocations
        return summary
