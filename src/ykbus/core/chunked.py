"""A map that keeps insertion order, as `dict` does, and never grows in one long copy.

CPython grows a dict by copying it whole into a table twice the size once it is two thirds
full: at 349,525 entries that copy takes about 13 ms, and the core's largest maps (the
partition's allocations, a large application's allocations and asks) cross it in one entry
together, so one ask waited 40-50 ms while the writer copied (docs/benchmarks-history.md, "The maps
that grew in one piece"). `ChunkedDict` holds the same entries in chunks of at most
`CHUNK` insertions each, in insertion order, and finds a key's chunk through an index split
into `PARTS` dicts by the key's hash. Every dict it holds stays small, so each grows in a
fraction of a millisecond; the index's parts grow at about the same count, but one or two
per entry of the log.

Order is what a dict gives: iteration goes through the chunks in order, each in its own
insertion order, so a key comes where it was first inserted, an update keeps its place, and
a key deleted and inserted again comes last. The hash only places keys in the index, which
is never iterated, so Python's per-process string hashing cannot change an order the core
decides by. A map stays one plain dict until it holds `SPLIT_AT` entries (an application's
few asks cost what they did), and goes back to one when it is cleared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Generic, TypeVar

V = TypeVar("V")

SPLIT_AT = 8_192  # entries: below, one plain dict (splitting one this size takes about 1 ms)
CHUNK = 16_384  # insertions per chunk: a chunk is sealed (takes no more keys) after them
PARTS = 64  # the index's parts (a power of two)


class ChunkedDict(Generic[V]):
    """str -> V in insertion order (module docstring; `split_at` and `chunk` as SPLIT_AT and
    CHUNK; a sealed chunk that deletions leave at an eighth of `chunk` is copied compact): `get`, `in`, `[k]`, `[k] = v`,
    `del`, `pop`, `len`, `values`, `items`, iteration over keys, `clear`. Mutating it while
    iterating is not detected (a dict raises): iterate over a `list(...)` copy to mutate."""

    def __init__(self, pairs: Iterable[tuple[str, V]] = (), split_at: int = SPLIT_AT, chunk: int = CHUNK) -> None:
        self._split_at, self._chunk, self._sparse = split_at, chunk, max(1, chunk // 8)
        self._small: dict[str, V] | None = {}
        self._chunks: list[dict[str, V]] = []
        self._index: list[dict[str, dict[str, V]]] = []
        self._young_inserted = 0  # insertions into the last chunk (deletions do not give room back)
        self._n = 0
        for k, v in pairs:
            self[k] = v

    # --- reads -------------------------------------------------------------------------

    def __len__(self) -> int:
        small = self._small
        return len(small) if small is not None else self._n

    def __bool__(self) -> bool:
        return len(self) > 0

    def __contains__(self, key: str) -> bool:
        small = self._small
        if small is not None:
            return key in small
        return key in self._index[hash(key) & (PARTS - 1)]

    def get(self, key: str, default: V | None = None) -> V | None:
        small = self._small
        if small is not None:
            return small.get(key, default)
        chunk = self._index[hash(key) & (PARTS - 1)].get(key)
        return default if chunk is None else chunk[key]

    def __getitem__(self, key: str) -> V:
        small = self._small
        if small is not None:
            return small[key]
        return self._index[hash(key) & (PARTS - 1)][key][key]

    def __iter__(self) -> Iterator[str]:
        small = self._small
        return iter(small) if small is not None else chain.from_iterable(self._chunks)

    def keys(self) -> Iterator[str]:
        return iter(self)

    def values(self) -> Iterable[V]:
        """(while small, the dict's own view: iterated at a dict's speed)"""
        small = self._small
        return small.values() if small is not None else chain.from_iterable([c.values() for c in self._chunks])

    def items(self) -> Iterable[tuple[str, V]]:
        small = self._small
        return small.items() if small is not None else chain.from_iterable([c.items() for c in self._chunks])

    # --- writes ------------------------------------------------------------------------

    def __setitem__(self, key: str, value: V) -> None:
        small = self._small
        if small is not None:
            if len(small) < self._split_at or key in small:
                small[key] = value
                return
            self._split(small)
        if self._young_inserted >= self._chunk:  # (before an update too: an empty last chunk is harmless)
            sealed = self._chunks[-1]
            self._chunks.append({})
            self._young_inserted = 0
            if len(sealed) <= self._sparse:  # churn left it small already: no deletion would tidy it
                self._tidy(sealed, True)
        part = self._index[hash(key) & (PARTS - 1)]
        had = len(part)
        part.setdefault(key, self._chunks[-1])[key] = value  # an update keeps its place, in its chunk
        if len(part) != had:
            self._young_inserted += 1
            self._n += 1

    def __delitem__(self, key: str) -> None:
        small = self._small
        if small is not None:
            del small[key]
            return
        chunk = self._index[hash(key) & (PARTS - 1)].pop(key)
        del chunk[key]
        self._left(chunk)

    def pop(self, key: str, default: V | None = None) -> V | None:
        small = self._small
        if small is not None:
            return small.pop(key, default)
        chunk = self._index[hash(key) & (PARTS - 1)].pop(key, None)
        if chunk is None:
            return default
        value = chunk.pop(key)
        self._left(chunk)
        return value

    def clear(self) -> None:
        self._small, self._chunks, self._index = {}, [], []
        self._young_inserted = self._n = 0

    # --- chunks ------------------------------------------------------------------------

    def _split(self, small: dict[str, V]) -> None:
        """From one dict to chunks: the dict becomes the first chunk, sealed, as it is."""
        index: list[dict[str, dict[str, V]]] = [{} for _ in range(PARTS)]
        for key in small:
            index[hash(key) & (PARTS - 1)][key] = small
        self._index, self._chunks = index, [small, {}]
        self._young_inserted, self._n, self._small = 0, len(small), None

    def _left(self, chunk: dict[str, V]) -> None:
        """A key left `chunk`."""
        self._n -= 1
        if len(chunk) <= self._sparse and chunk is not self._chunks[-1]:
            self._tidy(chunk)

    def _tidy(self, chunk: dict[str, V], now: bool = False) -> None:
        """A sealed chunk that deletions left sparse: gone if empty; else copied compact (a
        dict keeps its table when emptied), merged with the chunk before it when that one is
        sparse too, so that churn leaves neither many chunks nor large empty tables. Done
        when it is sealed small (`now`), and as deletions take it to `sparse`, half of it, 0."""
        n, sparse = len(chunk), self._sparse
        if n and n != sparse and 2 * n != sparse and not now:
            return  # not at every deletion
        chunks = self._chunks
        at = 0
        while chunks[at] is not chunk:
            at += 1
        if not n:
            del chunks[at]
            return
        before = chunks[at - 1] if at > 0 else None
        if before is not None and len(before) <= sparse:
            merged = {**before, **chunk}
            del chunks[at]
            at -= 1
        else:
            merged = dict(chunk)
        chunks[at] = merged
        index = self._index
        for key in merged:
            index[hash(key) & (PARTS - 1)][key] = merged
