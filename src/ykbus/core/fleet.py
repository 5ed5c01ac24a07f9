"""Every core shard of a sharded deployment, in one process: what `ykbus replay --shard`
runs to make one shard's outputs again (a move needs the state of the shard an RM leaves).

Each shard is a core of its own that reads every entry (core/shards.py says which it
applies). At an `assign` entry that moves an RM, the shard it leaves applies the entry
first; its unit goes through the same bytes a live shard stores (`dump_moved`, then
`load_moved`), and arrives at the new shard as that shard applies the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ykbus.core.entries import Entry, Output
from ykbus.core.guard import GuardedCore
from ykbus.core.registry import YamlLoader
from ykbus.core.shards import ASSIGN, DEFAULT_SHARD, decode_assign, named_in, owner_of
from ykbus.core.snapshot import dump_moved, load_moved


def shard_names(entries: Iterable[Entry]) -> list[str]:
    """The shards a log names: `default`, every assign entry's target, every tick's shard."""
    names = {DEFAULT_SHARD}
    for entry in entries:
        if entry.rm:
            continue
        if entry.kind == ASSIGN:
            try:
                names.add(decode_assign(entry).shard)
            except ValueError:
                pass
        elif entry.kind == "tick" and (named := named_in(entry).shard):
            names.add(named)
    return sorted(names)


class Fleet:
    def __init__(self, names: list[str], make: Callable[[str, dict[int, Any]], GuardedCore],
                 load_yaml: YamlLoader | None = None) -> None:
        """`make(name, arriving)`: a fresh guarded core for shard `name`, whose cores (the
        first and any restored in its place) take `arriving` as `Core.arriving`."""
        self.arriving: dict[str, dict[int, Any]] = {name: {} for name in set(names) | {DEFAULT_SHARD}}
        self.shards = {name: make(name, self.arriving[name]) for name in sorted(self.arriving)}
        self._load_yaml = load_yaml

    def apply(self, entry: Entry) -> dict[str, list[Output]]:
        """Each shard's outputs of `entry` (every shard applies it, or skips it)."""
        out: dict[str, list[Output]] = {}
        if entry.kind == ASSIGN and not entry.rm:
            try:
                body = decode_assign(entry)
            except ValueError:
                body = None
            if body is not None:  # every shard knows the same owners: ask one, before it applies this entry
                source = owner_of(self.shards[DEFAULT_SHARD].core.owners, body.rm)
                if source != body.shard and source in self.shards and body.shard in self.shards:
                    left = self.shards[source]
                    out[source] = left.apply(entry)
                    for moved in left.core.moved_out:
                        data = dump_moved(moved)
                        self.arriving[body.shard][entry.seq] = lambda data=data: load_moved(data, self._load_yaml)
        for name, guard in self.shards.items():
            if name not in out:
                out[name] = guard.apply(entry)
        return out
