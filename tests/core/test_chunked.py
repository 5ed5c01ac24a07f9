"""ChunkedDict (core/chunked.py): the core's largest maps keep dict's order and answers, and
hold no dict larger than a chunk, whatever is inserted, updated, deleted and inserted again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ykbus.core.chunked import PARTS, ChunkedDict

KEYS = st.sampled_from([f"k{i}" for i in range(60)])
OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), KEYS, st.integers(0, 9)),
    st.tuples(st.just("del"), KEYS, st.just(0)),
    st.tuples(st.just("pop"), KEYS, st.just(0)),
    st.tuples(st.just("clear"), KEYS, st.just(0)).filter(lambda _: True),
), max_size=400)


def pieces(c: ChunkedDict[int]) -> list[dict]:
    """Every dict the map holds (its one dict while small; its chunks and index parts)."""
    return [c._small] if c._small is not None else [*c._chunks, *c._index]


def check(c: ChunkedDict[int], d: dict[str, int], chunk: int, split_at: int) -> None:
    assert list(c.items()) == list(d.items())  # the order dict gives
    assert list(c) == list(d) and list(c.keys()) == list(d) and list(c.values()) == list(d.values())
    assert len(c) == len(d) and bool(c) == bool(d)
    for k in (f"k{i}" for i in range(60)):
        assert (k in c) == (k in d)
        assert c.get(k) == d.get(k) and c.get(k, -1) == d.get(k, -1)
    if c._small is not None:
        assert len(c._small) <= split_at
    else:  # grows in pieces: each chunk takes at most `chunk` keys; the index covers every key once
        assert all(len(x) <= max(chunk, 2 * c._sparse) for x in c._chunks)  # (merged sparse ones: 2 x sparse)
        assert sum(len(part) for part in c._index) == len(d)
        assert len(c._index) == PARTS


@settings(max_examples=300, deadline=None)
@given(OPS, st.sampled_from([(1, 1), (2, 3), (4, 4), (8, 16)]))
def test_it_answers_and_orders_as_a_dict_does(ops: list[tuple[str, str, int]], sizes: tuple[int, int]) -> None:
    split_at, chunk = sizes
    c: ChunkedDict[int] = ChunkedDict(split_at=split_at, chunk=chunk)
    d: dict[str, int] = {}
    for op, key, value in ops:
        if op == "set":
            c[key] = value
            d[key] = value
        elif op == "del":
            if key in d:
                del c[key]
                del d[key]
            else:
                try:
                    del c[key]
                except KeyError:
                    pass
                else:
                    raise AssertionError(f"del of a missing {key} raised nothing")
        elif op == "pop":
            assert c.pop(key, -1) == d.pop(key, -1)
        elif op == "clear" and value == 0 and key == "k0":
            c.clear()
            d.clear()
        check(c, d, chunk, split_at)


def test_a_missing_key_raises_key_error_in_both_forms() -> None:
    for c in (ChunkedDict[int](), ChunkedDict[int]([(f"k{i}", i) for i in range(40)], split_at=4, chunk=8)):
        try:
            c["absent"]
        except KeyError as exc:
            assert exc.args == ("absent",)
        else:
            raise AssertionError("no KeyError")


def test_a_large_map_holds_no_large_dict_and_churn_leaves_no_empty_tables() -> None:
    """200,000 keys: no dict it holds has more than a chunk (the index's 64 parts about
    3,000 each); after deleting all but every 1,000th, the chunks left are few and small."""
    c: ChunkedDict[int] = ChunkedDict()
    for i in range(200_000):
        c[f"a{i}"] = i
    assert c._small is None and max(len(x) for x in pieces(c)) <= 16_384
    for i in range(200_000):
        if i % 1000:
            del c[f"a{i}"]
    assert list(c.values()) == list(range(0, 200_000, 1000))
    assert len(c._chunks) <= 14 and all(len(x) <= 2_048 for x in c._chunks[:-1])


def test_churn_with_a_few_long_lived_keys_leaves_few_chunks() -> None:
    """Found by review: chunks sealed when already nearly empty were never tidied (one
    long-lived key per 5,000 insertions left a chunk of 3-4 keys per 16,384 insertions)."""
    c: ChunkedDict[int] = ChunkedDict()
    for i in range(10_000):
        c[f"s{i}"] = i
    live: list[str] = []
    kept = []
    for i in range(400_000):
        k = f"c{i}"
        c[k] = i
        live.append(k)
        if i % 5000 == 0:
            kept.append(k)
            live.pop()
        if len(live) > 1000:
            del c[live.pop(0)]
    assert len(c._chunks) <= 4
    assert [k for k in c if k.startswith("c")][:len(kept)] == kept
