"""Every legal and every illegal transition of every lifecycle table, against moves written
down here, not read from the table under test.

`EXPECTED` is the specification: for each lifecycle, every legal move as
(state, event) -> next state, by the states' values and the events' names. The
application's follows YuniKorn's application state machine (yunikorn-core pkg/scheduler/objects/application_state.go:
New -> Accepted -> Running -> Completing -> Completed, Failing -> Failed, Rejected, and
Expired after the terminated timer) with ykbus's additions drawn in docs/lifecycles.md
(Resuming for a Soft gang whose placeholders timed out; REMOVE by the RM from any live
state). The RM client's (recovery) is YuniKorn's resilience design, RM side. The ask's place
(where a pending ask is: core/indexes.py `AskPlaces.move`) is ykbus's own. Each table is
checked both ways: every expected move is legal and lands where expected, and every other
pair of a state and an event raises `IllegalTransition`. A queue has no lifecycle table in
core/lifecycle.py (its state is its configuration), so none is listed.
"""

import itertools
from pathlib import Path

import pytest

from ykbus.core.lifecycle import LIFECYCLES, IllegalTransition, render_docs

EXPECTED: dict[str, dict[tuple[str, str], str]] = {
    "application": {
        ("New", "RUN"): "Accepted",
        ("New", "ALLOCATE"): "Running",  # recovery: an allocation recovered before any ask
        ("New", "REJECT"): "Rejected",
        ("New", "REMOVE"): "Completed",
        ("New", "FAIL"): "Failing",
        ("Accepted", "ALLOCATE"): "Running",
        ("Accepted", "COMPLETE"): "Completing",
        ("Accepted", "REMOVE"): "Completed",
        ("Accepted", "FAIL"): "Failing",
        ("Accepted", "RESUME"): "Resuming",
        ("Resuming", "ALLOCATE"): "Running",
        ("Resuming", "COMPLETE"): "Completing",
        ("Resuming", "REMOVE"): "Completed",
        ("Resuming", "FAIL"): "Failing",
        ("Running", "COMPLETE"): "Completing",
        ("Running", "REMOVE"): "Completed",
        ("Running", "FAIL"): "Failing",
        ("Completing", "RUN"): "Running",
        ("Completing", "ALLOCATE"): "Running",
        ("Completing", "COMPLETING_TIMEOUT"): "Completed",
        ("Completing", "REMOVE"): "Completed",
        ("Completing", "FAIL"): "Failing",
        ("Failing", "FAILED"): "Failed",
        ("Failing", "REMOVE"): "Failed",
        ("Completed", "EXPIRE"): "Expired",
        ("Failed", "EXPIRE"): "Expired",
        ("Rejected", "EXPIRE"): "Expired",
    },
    "ask": {
        ("Pending", "ALLOCATE_LAST"): "Allocated",
        ("Pending", "REJECT"): "Rejected",
        ("Pending", "RELEASE"): "Released",
        ("Pending", "REPLACE"): "Pending",
        ("Allocated", "RELEASE"): "Released",
        ("Allocated", "REPLACE"): "Pending",
        ("Released", "REPLACE"): "Pending",
    },
    # where a pending ask is (core/indexes.py `AskPlaces.move`): reserved or not, it is active,
    # parked at a Wait, or pooled behind its shape's room gate; to reserve (past its delay,
    # with no node) only while it holds none; a reservation is taken while it is judged (in
    # its list, or behind an open gate) and given up before it is placed or dropped
    "ask place": {
        ("NotPending", "PEND"): "Active",
        ("Active", "PARK"): "Parked",
        ("Active", "PARK_TO_RESERVE"): "ParkedToReserve",  # a gang's ask: in reserve_waiters
        ("Active", "POOL"): "Pooled",
        ("Active", "POOL_TO_RESERVE"): "PooledToReserve",
        ("Active", "RESERVE"): "ReservedActive",  # then parked, or pooled, holding it
        ("Active", "PLACE_LAST"): "NotPending",
        ("Active", "DROP"): "NotPending",
        ("Parked", "WAKE"): "Active",
        ("Parked", "DROP"): "NotPending",
        ("ParkedToReserve", "WAKE"): "Active",
        ("ParkedToReserve", "DROP"): "NotPending",
        ("Pooled", "PARK"): "Parked",  # judged behind an open gate, and held by something else
        ("Pooled", "POOL"): "Pooled",  # judged behind an open gate, and pooled again: nothing moves
        ("Pooled", "POOL_TO_RESERVE"): "PooledToReserve",
        ("Pooled", "WAKE"): "Active",
        ("Pooled", "RESERVE"): "ReservedPooled",
        ("Pooled", "DROP"): "NotPending",
        ("PooledToReserve", "PARK"): "Parked",
        ("PooledToReserve", "POOL"): "Pooled",
        ("PooledToReserve", "POOL_TO_RESERVE"): "PooledToReserve",
        ("PooledToReserve", "WAKE"): "Active",
        ("PooledToReserve", "RESERVE"): "ReservedPooled",  # behind its room gate alone from then on
        ("PooledToReserve", "DROP"): "NotPending",
        ("ReservedActive", "PARK"): "ReservedParked",  # its required node, its victims, a gang's room
        ("ReservedActive", "POOL"): "ReservedPooled",
        ("ReservedActive", "UNRESERVE"): "Active",
        ("ReservedParked", "WAKE"): "ReservedActive",
        ("ReservedParked", "UNRESERVE"): "Parked",
        ("ReservedPooled", "PARK"): "ReservedParked",  # its node preempts for it: it waits for its victims
        ("ReservedPooled", "POOL"): "ReservedPooled",
        ("ReservedPooled", "WAKE"): "ReservedActive",
        ("ReservedPooled", "UNRESERVE"): "Pooled",
    },
    "allocation": {
        ("Allocated", "STOP"): "Completed",
        ("Allocated", "PREEMPT"): "Preempted",
        ("Allocated", "TIMEOUT"): "Expired",
    },
    "node": {
        ("Schedulable", "DRAIN"): "Draining",
        ("Schedulable", "DECOMMISSION"): "Removed",
        ("Draining", "UNDRAIN"): "Schedulable",
        ("Draining", "DECOMMISSION"): "Removed",
    },
    "resource manager": {
        ("Init", "REGISTER"): "Running",
        ("Running", "REGISTER"): "Running",  # a re-registration wipes the RM's state
        ("Paused", "REGISTER"): "Running",
        ("Stopped", "REGISTER"): "Running",
        ("Running", "CONNECTION_LOST"): "Paused",
        ("Paused", "RECONNECT"): "Running",
        ("Paused", "TIMEOUT"): "Stopped",
        ("Running", "SHUTDOWN"): "Stopped",
        ("Paused", "SHUTDOWN"): "Stopped",
    },
    "RM client (recovery)": {
        ("New", "REGISTER"): "Registered",
        ("New", "FAIL"): "Failed",
        ("Registered", "RECOVER"): "Recovering",
        ("Registered", "FAIL"): "Failed",
        ("Recovering", "RECOVERED"): "Running",
        ("Recovering", "FAIL"): "Failed",
    },
}

# Every state and event of each lifecycle, so a state or event added to an enum must be added
# here too (and its moves above, or it has none).
STATES: dict[str, set[str]] = {
    "application": {"New", "Accepted", "Resuming", "Running", "Completing", "Completed", "Rejected", "Failing",
                    "Failed", "Expired"},
    "ask": {"Pending", "Allocated", "Rejected", "Released"},
    "ask place": {"NotPending", "Active", "Parked", "ParkedToReserve", "Pooled", "PooledToReserve", "ReservedActive",
                  "ReservedParked", "ReservedPooled"},
    "allocation": {"Allocated", "Completed", "Preempted", "Expired"},
    "node": {"Schedulable", "Draining", "Removed"},
    "resource manager": {"Init", "Running", "Paused", "Stopped"},
    "RM client (recovery)": {"New", "Registered", "Recovering", "Running", "Failed"},
}
EVENTS: dict[str, set[str]] = {
    "application": {"RUN", "ALLOCATE", "COMPLETE", "COMPLETING_TIMEOUT", "REJECT", "FAIL", "RESUME", "FAILED",
                    "REMOVE", "EXPIRE"},
    "ask": {"ALLOCATE_LAST", "REJECT", "RELEASE", "REPLACE"},
    "ask place": {"PEND", "PARK", "PARK_TO_RESERVE", "POOL", "POOL_TO_RESERVE", "WAKE", "RESERVE", "UNRESERVE",
                  "PLACE_LAST", "DROP"},
    "allocation": {"STOP", "PREEMPT", "TIMEOUT"},
    "node": {"DRAIN", "UNDRAIN", "DECOMMISSION"},
    "resource manager": {"REGISTER", "CONNECTION_LOST", "RECONNECT", "TIMEOUT", "SHUTDOWN"},
    "RM client (recovery)": {"REGISTER", "RECOVER", "RECOVERED", "FAIL"},
}

BY_NAME = {lc.name: lc for lc in LIFECYCLES}


def _enums(lc):
    state, event = next(iter(lc.table))
    return type(state), type(event)


def test_every_lifecycle_is_specified_here():
    assert set(BY_NAME) == set(EXPECTED) == set(STATES) == set(EVENTS)
    for name, lc in BY_NAME.items():
        states, events = _enums(lc)
        assert {s.value for s in states} == STATES[name], name
        assert {e.name for e in events} == EVENTS[name], name
        for (state, event), to in EXPECTED[name].items():  # the specification names only known ones
            assert {state, to} <= STATES[name] and event in EVENTS[name], (name, state, event, to)


CASES = [(name, state, event) for name in EXPECTED
         for state, event in itertools.product(sorted(STATES[name]), sorted(EVENTS[name]))]


@pytest.mark.parametrize("name,state,event", CASES, ids=[f"{c[0]}:{c[1]}:{c[2]}" for c in CASES])
def test_transition(name, state, event):
    lc = BY_NAME[name]
    states, events = _enums(lc)
    s, e = states(state), events[event]
    expected = EXPECTED[name].get((state, event))
    if expected is not None:
        assert lc.allows(s, e)
        assert lc.advance(s, e) is states(expected)
    else:
        assert not lc.allows(s, e)
        with pytest.raises(IllegalTransition, match=event):
            lc.advance(s, e)


def test_lifecycle_docs_are_generated_from_the_tables():
    path = Path(__file__).parents[2] / "docs" / "lifecycles.md"
    assert path.read_text() == render_docs(), "run: YKBUS_PURE_PYTHON=1 python -m ykbus.core.lifecycle > docs/lifecycles.md"
