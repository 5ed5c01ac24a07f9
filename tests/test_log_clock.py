"""The RM liveness the service appends to the log (bus/clock.py): the time the core's own
NATS connection was down is no silence of an RM's."""

from __future__ import annotations

import types

import anyio
import pytest

from ykbus.bus.clock import LogClock
from ykbus.bus.settings import ServiceSettings
from ykbus.core.lifecycle import RMState

pytestmark = pytest.mark.anyio


def clock_of(state: RMState, appended: list) -> LogClock:
    settings = ServiceSettings(nats_url="", heartbeat_pause_s=0.2, heartbeat_stop_s=0.2)
    live = types.SimpleNamespace(core=types.SimpleNamespace(rms={"k8s": types.SimpleNamespace(state=state)}))

    async def append(kind, body) -> bool:
        appended.append((kind, body["event"]))
        return True

    return LogClock(settings, live, append)  # type: ignore[arg-type]


async def watch(clock: LogClock, seconds: float) -> None:
    with anyio.move_on_after(seconds):
        await clock.monitor_rms()


async def test_an_rm_heard_before_an_outage_of_the_cores_connection_is_not_lost_at_its_end():
    """Review: NATS away longer than the pause and the stop together (no one could send a
    heartbeat, nor the core hear one); back, the core at once appended CONNECTION_LOST for a
    live RM, and TIMEOUT (Stopped: its state wiped) unless its heartbeat came within the next
    look. From the connection's return, the RM has its pause for a heartbeat to arrive."""
    appended: list = []
    clock = clock_of(RMState.RUNNING, appended)
    clock.heard("k8s")
    clock.away()
    await watch(clock, 0.5)  # down: past the pause and the stop, nothing appended meanwhile
    clock.back()
    await watch(clock, 0.1)
    assert appended == []
    await watch(clock, 0.3)  # no heartbeat within the pause after the return: lost, as ever
    assert appended == [("rmstate", "CONNECTION_LOST")]


async def test_an_outage_neither_counts_as_silence_nor_forgives_the_silence_before_it():
    """Review of the fix: resetting every RM to "heard now" at the return kept a dead RM
    Running for ever across outages shorter than the pause. Its silence goes on from where
    the outage found it."""
    appended: list = []
    clock = clock_of(RMState.RUNNING, appended)
    clock.heard("k8s")
    await anyio.sleep(0.15)  # silent 0.15 s of its pause of 0.2
    clock.away()
    await watch(clock, 0.4)
    assert appended == []
    clock.back()
    await watch(clock, 0.12)  # 0.15 before the outage and 0.1 after it: past the pause
    assert appended == [("rmstate", "CONNECTION_LOST")]
