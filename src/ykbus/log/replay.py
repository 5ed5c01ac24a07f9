"""`ykbus replay`: apply a log to a fresh core and write every output.

The core is guarded (`ykbus.core.guard`): an entry the log records as failed (a `failed`
entry of the core service) gives the answer it gave live, and an entry that raises here is
answered as failed and skipped, as the live service would.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ykbus.collector import CollectorPolicy
from ykbus.core import Core
from ykbus.core.config import SchedulerConfig
from ykbus.core.entries import Entry, Output
from ykbus.core.fleet import Fleet, shard_names
from ykbus.core.guard import FAILED_KIND, GuardedCore
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.jsonl import encode_output, read_entries
from ykbus.yamlload import load_yaml

CHECKPOINT_EVERY = 50_000  # entries between in-memory checkpoints (a failure re-applies at most this many)


def restorer(queues: SchedulerConfig | None = None, shard: str | None = None,
             arriving: dict[int, Any] | None = None, policy_group: str | None = None) -> Callable[[bytes | None], Core]:
    """A core from a snapshot (None: a fresh core), with the YAML loader and, for replay's
    what-if, the queue configuration that replaces every registration's (or only those of
    `policy_group`'s RMs, if given); `shard`: the core shard a fresh core is, `arriving` the
    units moved to it (core/shards.py)."""
    def restore(data: bytes | None) -> Core:
        if data is None:
            core = Core(load_yaml=load_yaml, queues_override=queues, shard=shard, override_group=policy_group)
        else:
            core = load_snapshot(data, load_yaml, queues, policy_group)
        if arriving is not None:
            core.arriving = arriving
        return core

    return restore


def guarded_core(queues: SchedulerConfig | None = None, checkpoint_every: int = CHECKPOINT_EVERY,
                 shard: str | None = None, arriving: dict[int, Any] | None = None,
                 policy_group: str | None = None) -> GuardedCore:
    restore = restorer(queues, shard, arriving, policy_group)
    return GuardedCore(restore(None), restore, checkpoint_every=checkpoint_every, dump=dump_snapshot)


def replay(entries: Iterable[Entry], queues: SchedulerConfig | None = None,
           progress: Callable[[int, int], None] | None = None, shard: str | None = None) -> Iterator[Output]:
    """The outputs of applying `entries` to a fresh core; `progress(done, total)`, if given,
    hears each entry applied. `shard`: the outputs of that core shard of a sharded deployment
    (every shard the log names is run: core/fleet.py); None: one core applies everything.
    The garbage collector is kept as the service keeps it (ykbus/collector.py); what was
    frozen is handed back to it when the replay ends."""
    entries = list(entries)
    if shard is None:
        guards = {"": guarded_core(queues)}
        apply = lambda entry: {"": guards[""].apply(entry)}  # noqa: E731 - one core: its outputs
    else:
        fleet = Fleet(shard_names(entries) + [shard], lambda name, arriving: guarded_core(queues, shard=name, arriving=arriving), load_yaml)
        guards, apply = fleet.shards, fleet.apply
    for entry in entries:  # the records of failed entries come after them: learn them first
        if entry.kind == FAILED_KIND and not entry.rm:
            for guard in guards.values():
                guard.apply_record(entry)
    total = len(entries)
    collector = CollectorPolicy()
    try:
        for i, entry in enumerate(entries, 1):
            yield from apply(entry)[shard or ""]
            allocations = dropped = 0
            for guard in guards.values():  # (a guard's core is read again: a failure restores another)
                allocations += guard.core.allocations_made
                dropped += guard.core.dropped_partitions
            collector.applied(allocations, dropped)
            if progress is not None:
                progress(i, total)
    finally:
        if collector.freezes:  # the replayed state may go now
            gc.unfreeze()


def replay_file(path: str, queues: SchedulerConfig | None = None,
                progress: Callable[[int, int], None] | None = None, shard: str | None = None,
                gaps: list[str] | None = None) -> Iterator[bytes]:
    """Output lines (without newline) of replaying the log at `path`; where its seqs skip,
    a line in `gaps` (log/jsonl.py `read_entries`)."""
    with open(path, "rb") as f:
        for out in replay(read_entries(f, path, gaps), queues, progress, shard):
            yield encode_output(out)


def shards_named(path: str) -> list[str]:
    """The core shards the log at `path` names (`default` always: core/fleet.py)."""
    with open(path, "rb") as f:
        return sorted(shard_names(read_entries(f, path)))


def first_difference(got: list[bytes], recorded: list[bytes]) -> str | None:
    """A human-readable description of the first differing output line, or None."""
    for i, (a, b) in enumerate(zip(got, recorded, strict=False), 1):
        if a != b:
            return f"output line {i} differs\n  recorded: {b.decode()}\n  replayed: {a.decode()}"
    if len(got) != len(recorded):
        n = min(len(got), len(recorded)) + 1
        extra = (got[n - 1:n] or recorded[n - 1:n])[0].decode()
        which = "replay has an extra line" if len(got) > len(recorded) else "replay is missing a line"
        return f"output line {n}: {which}: {extra}"
    return None
