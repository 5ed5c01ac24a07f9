"""What a JetStream delivery's reply subject says (bus/subjects.py): the stream sequence, the
time and the messages pending after it, in both of its forms; the input lag the metrics
report (`ykbus_input_lag_entries`) is the pending count."""

from __future__ import annotations

import pytest

from ykbus.bus.subjects import js_reply_delivery, js_reply_meta

V1 = "$JS.ACK.YK_IN.core.1.42.40.1700000000000000001.7"
V2 = "$JS.ACK.hub.ACCHASH.YK_IN.core.1.42.40.1700000000000000001.7.9835"  # with the random last token


@pytest.mark.parametrize("reply", [V1, V2], ids=["v1", "v2"])
def test_sequence_time_and_pending_from_both_forms(reply):
    assert js_reply_delivery(reply) == (42, 1700000000000000001, 7)
    assert js_reply_meta(reply) == (42, 1700000000000000001)


def test_a_subject_that_is_not_a_delivery_is_named():
    with pytest.raises(ValueError, match="not a JetStream reply subject"):
        js_reply_delivery("_INBOX.abc")


def test_a_standby_keeps_only_the_outputs_the_leader_has_not_stored():
    from ykbus.bus.publisher import Part, Unpublished

    def part(seq, i=0):
        return Part(seq, f"{seq}-{i}", "yk.v1.out.k8s.alloc", b"{}", {}, [])

    kept = Unpublished()
    kept.add([part(11), part(11, 1)], applied=11)
    kept.stored("11-0", 11, applied=11)
    kept.stored("13-0", 13, applied=11)  # the leader is ahead: seen before this process applies 13
    kept.add([part(13)], applied=13)
    kept.stored("5-0", 5, applied=13)  # a tail reading the stream again from its start: nothing to keep
    assert [p.msg_id for p in kept.take()] == ["11-1"]
    assert len(kept._ahead) == 0


def test_a_lease_header_that_is_not_a_term_counts_as_none():
    """Anyone may append a `_core` entry to an open server: its `Yk-Lease` is read as a term
    only when it is one (a leader's append reads it after a fence failure)."""
    from ykbus.bus.leadership import lease_term

    assert lease_term({"Yk-Lease": "7"}) == 7
    assert lease_term(None) == lease_term({}) == lease_term({"Yk-Lease": "not-a-term"}) == 0
    assert lease_term({"Yk-Lease": "-3"}) == lease_term({"Yk-Lease": "9" * 40}) == lease_term({"Yk-Lease": "²"}) == 0


def test_a_lease_holders_ttl_is_read_within_the_bounds_a_core_accepts():
    from ykbus.bus.leadership import holder_ttl

    assert holder_ttl({"ttl": 1.5}, 1.0) == 1.5
    assert holder_ttl({}, 1.0) == holder_ttl({"ttl": "x"}, 1.0) == holder_ttl({"ttl": float("nan")}, 1.0) == 1.0
    assert holder_ttl({"ttl": 1e9}, 1.0) == 60 and holder_ttl({"ttl": 0}, 1.0) == 0.2


def test_a_shards_core_entries_have_their_own_subjects_and_read_as_core_entries():
    from ykbus.bus.subjects import Subjects

    one, s2 = Subjects(), Subjects(shard="s2")
    assert one.core_input("tick") == "yk.v1.in._core.tick" and s2.core_input("tick") == "yk.v1.in._core.tick.s2"
    assert s2.parse("yk.v1.in._core.tick.s2") == ("", "tick") == one.parse("yk.v1.in._core.tick")
    assert s2.own_core_entry("yk.v1.in._core.assign.s2") and not s2.own_core_entry("yk.v1.in._core.tick.s3")
    assert not s2.own_core_entry("yk.v1.in._core.tick") and one.own_core_entry("yk.v1.in._core.tick")
    assert not one.own_core_entry("yk.v1.in._core.tick.s2") and not one.own_core_entry("yk.v1.in.rm-1.tick")
    # only what a shard appends reads as its core entry; anything else stays an unknown kind (answered)
    assert s2.parse("yk.v1.in._core.app.s2") == ("", "app.s2") and s2.parse("yk.v1.in._core.tick.a.b") == ("", "tick.a.b")
