"""`ykbus replay`: apply a log to a fresh core and write every output."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ykbus.core import Core
from ykbus.core.config import SchedulerConfig
from ykbus.core.outbox import Entry, Output
from ykbus.log.jsonl import encode_output, read_entries
from ykbus.yamlload import load_yaml


def replay(entries: Iterable[Entry], queues: SchedulerConfig | None = None) -> Iterator[Output]:
    core = Core(load_yaml=load_yaml, queues_override=queues)
    for entry in entries:
        yield from core.apply(entry)


def replay_file(path: str, queues: SchedulerConfig | None = None) -> Iterator[bytes]:
    """Output lines (without newline) of replaying the log at `path`."""
    with open(path, "rb") as f:
        for out in replay(read_entries(f, path), queues):
            yield encode_output(out)


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
