"""Time and RM liveness enter the log, never the core.

The core reads no clock: the service appends `tick` entries every `tick_interval_s`, so
that timers fire, and `rmstate` entries when an RM's heartbeats (`yk.v1.hb.<rm>`, not
logged) stop for `heartbeat_pause_s` (Running -> Paused), resume (Paused -> Running), or
stay away a further `heartbeat_stop_s` (Paused -> Stopped). Each is appended once until
the core has applied it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ykbus.bus.live import LiveCore
from ykbus.core.entries import Entry
from ykbus.core.lifecycle import RMState

if TYPE_CHECKING:
    from ykbus.bus.settings import ServiceSettings


class LogClock:
    def __init__(self, settings: ServiceSettings, live: LiveCore,
                 append: Callable[[str, dict[str, Any]], Awaitable[bool]], tick: dict[str, str] | None = None) -> None:
        """`live`: the core (read only: its RMs' states); `append(kind, body)` appends an
        entry of the service to the log; `tick`: the body of its ticks (a shard's names it:
        Subjects.naming_shard)."""
        self._settings = settings
        self._tick = tick or {}
        self._live = live
        self._append = append
        self._heard: dict[str, float] = {}  # rm -> monotonic time of its last heartbeat
        self._asked: dict[str, str] = {}  # rm -> rmstate event appended but not yet applied
        self._away_since: float | None = None  # this process's NATS connection is down since: no heartbeat reaches it

    def heard(self, rm: str, now: float | None = None) -> None:
        """`rm` is alive now (its registration; heartbeats: `on_heartbeat`)."""
        self._heard[rm] = time.monotonic() if now is None else now

    def started(self) -> None:
        """The service starts: the RMs the core knows count as heard as `_first_heard` says."""
        now = time.monotonic()
        for rm_id, rm in self._live.core.rms.items():
            self._heard[rm_id] = self._first_heard(rm.state, now)

    def away(self) -> None:
        """The connection to NATS is lost: no RM is judged while it is (no heartbeat can
        arrive, and no entry be appended)."""
        if self._away_since is None:
            self._away_since = time.monotonic()

    def back(self) -> None:
        """Connected again: each RM's silence goes on from where the outage found it (its last
        heartbeat moved on by the outage's length), so an outage is no silence of theirs (one
        longer than the pause and the stop together would have Stopped a live RM, its state
        wiped, unless its heartbeat came within the next look), nor does it forgive one."""
        if self._away_since is None:
            return
        now = time.monotonic()
        gap, self._away_since = now - self._away_since, None
        for rm_id, heard in self._heard.items():
            self._heard[rm_id] = min(now, heard + gap)  # (one heard since the return: now)

    def applied(self, entry: Entry) -> None:
        """The core applied `entry`: an RM's registration is a sign of life; after an rmstate
        entry, the next change may be appended."""
        if entry.kind == "register" and entry.rm:
            self.heard(entry.rm)
        elif entry.kind == "rmstate":
            self._asked.clear()

    async def ticker(self) -> None:
        while True:
            await anyio.sleep(self._settings.tick_interval_s)
            await self._append("tick", self._tick)

    async def on_heartbeat(self, msg: Any) -> None:
        self._heard[msg.subject.rsplit(".", 1)[-1]] = time.monotonic()

    def _first_heard(self, state: RMState, now: float) -> float:
        """When an RM this process has not heard yet counts as last heard: a Running one at
        the service's start (its heartbeats have `heartbeat_pause_s` to arrive); a Paused one
        just past that, so that only a heartbeat brings it back (a restarted core or a standby
        taking over never does: its RM may be gone), and its way to Stopped starts again here
        (the log keeps no time of its pause)."""
        if state is RMState.PAUSED:
            return now - self._settings.heartbeat_pause_s - 0.001
        return now

    async def monitor_rms(self) -> None:
        s = self._settings
        while True:
            await anyio.sleep(min(1.0, s.heartbeat_pause_s / 4))
            if self._away_since is not None:
                continue
            now = time.monotonic()
            for rm_id, rm in list(self._live.core.rms.items()):
                quiet = now - self._heard.setdefault(rm_id, self._first_heard(rm.state, now))
                event = None
                if rm.state is RMState.RUNNING and quiet > s.heartbeat_pause_s:
                    event = ("CONNECTION_LOST", f"no heartbeat for {quiet:.0f}s")
                elif rm.state is RMState.PAUSED and quiet <= s.heartbeat_pause_s:
                    event = ("RECONNECT", "heartbeats resumed")
                elif rm.state is RMState.PAUSED and quiet > s.heartbeat_pause_s + s.heartbeat_stop_s:
                    event = ("TIMEOUT", f"no heartbeat for {quiet:.0f}s")
                if event is not None and self._asked.get(rm_id) != event[0]:
                    self._asked[rm_id] = event[0]
                    if not await self._append("rmstate", {"rmID": rm_id, "event": event[0], "reason": event[1]}):
                        self._asked.pop(rm_id, None)  # not stored (a lapsed lease, NATS away): the next look tries again
