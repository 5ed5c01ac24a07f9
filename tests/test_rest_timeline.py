"""The timeline's history (rest/events.py `Histogram`, served as /api/timeline): events sorted
into the UI's rows as app.js sorts them, counted per second and per minute in bounded rings,
read back per bin over any window with the bins' edges aligned, and the query's parameters
checked, each error naming its parameter."""

from __future__ import annotations

import pytest

from ykbus.rest import events as ev
from ykbus.si import messages as m

S = 1_000_000_000  # a second in ns
T0 = 1_699_999_200_000  # ms, a whole hour


def alloc(app: str, key: str) -> m.Allocation:
    return m.Allocation(allocationKey=key, UUID=key, applicationID=app, nodeID="n1", partitionName="default",
                        resourcePerAlloc=m.Resource(resources={"vcore": m.Quantity(value=1)}))


def test_each_event_is_drawn_in_the_row_app_js_draws_it():
    kinds = lambda kind, body: [ev.timeline_kind(e) for e in ev.events_of(kind, body, T0 * 10**6)]  # noqa: E731
    allocated = m.AllocationResponse(new=[alloc("a", "k1")], released=[m.AllocationRelease(
        applicationID="a", UUID="k1", terminationType=m.TerminationType.STOPPED_BY_RM)],
        rejected=[m.RejectedAllocationAsk(allocationKey="k2", applicationID="a", reason="ask rejected: no queue")])
    # APP ADD 200, NODE ADD 303 (not drawn); APP REMOVE; a rejected ask
    assert kinds("allocation", allocated) == [0, None, 1, 3]
    apps = m.ApplicationResponse(
        rejected=[m.RejectedApplication(applicationID="b", reason="no queue")],
        accepted=[m.AcceptedApplication(applicationID="c")],
        updated=[m.UpdatedApplication(applicationID="c", state="Running", stateTransitionTimestamp=T0 * 10**6)])
    assert kinds("application", apps) == [None, None, 3, 2]  # added (not drawn), rejected, a state
    nodes = m.NodeResponse(accepted=[m.AcceptedNode(nodeID="n1")], rejected=[m.RejectedNode(nodeID="n2", reason="x")])
    assert kinds("node", nodes) == [5, 5, 5]
    waits = m.StateBatch(states=[m.UpdateContainerSchedulingStateRequest(allocationKey="k3", applicartionID="a",
                                                                     reason="QueueMax: full")])
    assert kinds("state", waits) == [4]


def test_counts_per_bin_at_a_second_then_a_minute_and_aligned():
    h = ev.Histogram()
    for i in range(120):  # one allocation a second for two minutes, and a release every 10 s
        body = m.AllocationResponse(new=[alloc("a", f"k{i}")], released=[m.AllocationRelease(
            applicationID="a", UUID=f"k{i - 1}")] if i % 10 == 0 else [])
        ts = (T0 + i * 1000) * 10**6
        h.note(i + 1, ts, ev.events_of("allocation", body, ts))
    got = h.counts(T0, T0 + 120_000, 12)
    assert (got["from"], got["to"], got["binMs"], got["bins"], got["resolutionMs"]) == (T0, T0 + 120_000, 10_000, 12, 1000)
    assert got["counts"]["allocations"] == [10] * 12 and got["counts"]["releases"] == [1] * 12
    assert got["counts"]["nodes"] == [0] * 12 and got["covered"] == {"from": T0, "to": T0 + 119_000}
    assert got["seq"] == 120
    # bins narrower than a second are a second wide; a window that does not start on a bin's edge
    # gets the bin it starts in
    fine = h.counts(T0 + 10_500, T0 + 15_000, 100)
    assert (fine["from"], fine["binMs"], fine["bins"]) == (T0 + 10_000, 1000, 5)
    assert fine["counts"]["allocations"] == [1] * 5
    # bins of a minute or more: per minute; never more bins than asked, and all of them counted
    hour = h.counts(T0 - 1_800_000, T0 + 1_800_000, 50)
    assert hour["resolutionMs"] == 60_000 and hour["bins"] <= 50 and hour["binMs"] % 60_000 == 0
    assert sum(hour["counts"]["allocations"]) == 120 and sum(hour["counts"]["releases"]) == 12
    one = h.counts(T0 + 59_999, T0 + 60_001, 1)
    assert one["bins"] == 1 and one["from"] <= T0 + 59_999 and one["to"] >= T0 + 60_001
    # a window before anything was counted, and one far ahead: zeros
    assert sum(h.counts(T0 - 7_200_000, T0 - 3_600_000, 60)["counts"]["allocations"]) == 0
    assert sum(h.counts(T0 + 3_600_000, T0 + 7_200_000, 60)["counts"]["allocations"]) == 0


def test_the_rings_are_bounded_and_forget_the_oldest():
    h = ev.Histogram(seconds=60, minutes=10)
    for i in range(20 * 60):  # 20 minutes, one allocation a second
        ts = (T0 + i * 1000) * 10**6
        h.note(i + 1, ts, ev.events_of("allocation", m.AllocationResponse(new=[alloc("a", f"k{i}")]), ts))
    assert len(h.rings[0].counts) == 60 * len(ev.KINDS) and len(h.rings[1].counts) == 10 * len(ev.KINDS)
    last = T0 + 20 * 60_000
    recent = h.counts(last - 60_000, last, 60)  # the last minute: per second
    assert recent["resolutionMs"] == 1000 and sum(recent["counts"]["allocations"]) == 60
    whole = h.counts(T0, last, 20)  # per minute, the first ten minutes forgotten
    assert whole["resolutionMs"] == 60_000 and whole["counts"]["allocations"] == [0] * 10 + [60] * 10
    assert whole["covered"] == {"from": T0 + 10 * 60_000, "to": last - 1000}
    # an event older than the rings is not counted; a time from the future counts at its message's
    ts = (last + 1000) * 10**6
    late = m.ApplicationResponse(updated=[m.UpdatedApplication(applicationID="a", state="Running",
                                                               stateTransitionTimestamp=T0 * 10**6)])
    future = m.ApplicationResponse(updated=[m.UpdatedApplication(applicationID="a", state="Running",
                                                                 stateTransitionTimestamp=(last + 10**9) * 10**6)])
    h.note(10_000, ts, ev.events_of("application", late, ts) + ev.events_of("application", future, ts))
    assert sum(h.counts(T0, last + 2000, 20)["counts"]["application states"]) == 1
    assert h.rings[0].head == (last + 1000) // 1000


@pytest.mark.parametrize(("query", "field", "words"), [
    ({"from": "yesterday"}, "from", "not a whole number"),
    ({"to": "1.5"}, "to", "not a whole number"),
    ({"from": "-1", "to": "10"}, "from", "out of range"),
    ({"to": str(2**53)}, "to", "out of range"),
    ({"from": "10", "to": "10"}, "to", "not after from"),
    ({"from": "0", "to": "10", "bins": "0"}, "bins", "out of range"),
    ({"from": "0", "to": "10", "bins": "2001"}, "bins", "out of range"),
    ({"from": "0", "to": "10", "bins": "many"}, "bins", "not a whole number"),
])
def test_a_bad_parameter_is_named(query, field, words):
    with pytest.raises(ev.BadQuery) as caught:
        ev.timeline_query(query, T0)
    assert caught.value.field == field and str(caught.value).startswith(f"{field}: ") and words in str(caught.value)


def test_the_query_defaults_to_the_last_hour():
    assert ev.timeline_query({}, T0) == (T0 - 3_600_000, T0, ev.DEFAULT_BINS)
    assert ev.timeline_query({"from": "5", "to": "6", "bins": "2000"}, T0) == (5, 6, 2000)
