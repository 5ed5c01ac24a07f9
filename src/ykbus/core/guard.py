"""The last line of defence: an entry whose application raises is recorded as failed, and
the core goes on from the state it had before that entry.

Validation happens at the edge and every rejection leaves the state unchanged, so an
exception out of `Core.apply` is a bug in ykbus, not bad input. It must not stop the core:
the entry sits in the durable log, and a core that died on it would die on it again after
every restart. `GuardedCore` wraps a `Core`:

1. It keeps a checkpoint (a snapshot, or "empty") and the journal of entries applied since.
   On an exception at entry N it rebuilds the state before N from the checkpoint and the
   journal (a fold of deterministic entries: the same state, exactly), consumes N without
   applying any of it, and answers with one `EventRecord` that names N and the error.
2. The shell records the failure in the log (a `failed` entry of the core service,
   `{"seq": N, "error": "..."}`). A core that meets N again, in a replay or after a restart
   from an older snapshot, and already knows N failed (from those records, `known_failed`)
   does not apply it: it gives the same answer. So a replay makes exactly the choice the
   live run made, and a restart never meets the same crash twice.
3. Failures are counted (`failures`); the shell logs each one loudly.

Cost: nothing per entry but a list append; a failure costs a snapshot load plus the journal.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ykbus.core.core import Core
from ykbus.core.effects import outputs_of
from ykbus.core.entries import Entry, Output
from ykbus.core.events import Noted
from ykbus.si import messages as m

FAILED_KIND = "failed"  # the kind of the core service's record of a failed entry


class FailedEntry(msgspec.Struct, frozen=True):
    """Body of a `failed` entry (`yk.v1.in._core.failed`): entry `seq` raised `error`."""

    seq: int
    error: str
    shard: str | None = None  # the core shard whose entry failed (docs/sharding.md): only it honours the record


_failed_decoder = msgspec.json.Decoder(FailedEntry)


def failure_outputs(entry: Entry, error: str) -> list[Output]:
    """The answer to an entry that failed: one event to its RM naming the entry and error."""
    return outputs_of(entry.seq, entry.ts, [Noted(
        entry.rm, m.EventType.REQUEST, entry.rm or entry.kind,
        f"entry {entry.seq} ({entry.kind}) was not applied: internal error {error}; "
        "nothing of it changed the state (this is a bug in ykbus and was logged)")])


class GuardedCore:
    def __init__(self, core: Core, restore: Callable[[bytes | None], Core], checkpoint: bytes | None = None,
                 checkpoint_every: int = 0, dump: Callable[[Core], bytes] | None = None) -> None:
        """`restore(data)` builds a core from a checkpoint (None: a fresh core). With
        `checkpoint_every` and `dump`, a checkpoint is taken every that many entries;
        otherwise the owner calls `checkpoint()` (the service does, at each snapshot)."""
        self.core = core
        self._restore = restore
        self._checkpoint = checkpoint
        self._journal: list[Entry] = []
        self._every = checkpoint_every
        self._dump = dump
        self.known_failed: dict[int, str] = {}
        self.failures = 0  # entries that raised in this process
        self.last_failure: tuple[Entry, BaseException] | None = None  # for the shell to log

    def checkpoint(self, data: bytes, seq: int | None = None) -> None:
        """`data` is a snapshot of the core after entry `seq` (None: as it is now): the journal
        keeps only the entries applied after it (a snapshot made off the writer's path
        arrives after more entries were applied)."""
        self._checkpoint = data
        if seq is None:
            self._journal.clear()
        else:
            self._journal = [e for e in self._journal if e.seq > seq]

    def apply(self, entry: Entry, between: Callable[[], None] | None = None) -> list[Output]:
        """Apply `entry` to the core (`between`: see `Core.apply`), or, if it fails, rebuild
        the state before it and answer the RM that it failed."""
        self.last_failure = None
        if entry.kind == FAILED_KIND and not entry.rm:
            self.apply_record(entry)
        error = self.known_failed.get(entry.seq)
        if error is None:
            try:
                outputs = self.core.apply(entry, None, between)
            except Exception as exc:  # noqa: BLE001 - the point of this class; see the module doc
                self.failures += 1
                self.last_failure = (entry, exc)
                error = f"{type(exc).__name__}: {exc}"
                self.known_failed[entry.seq] = error
                self._rebuild()
            else:
                self._journal.append(entry)
                if self._every and self._dump is not None and len(self._journal) >= self._every:
                    self.checkpoint(self._dump(self.core))
                return outputs
        self._consume(entry)
        return failure_outputs(entry, error)

    def apply_record(self, entry: Entry) -> None:
        """Learn from a `failed` entry of the core service that its entry failed (a replay
        reads them all first; the service reads them from the log at start)."""
        try:
            record = _failed_decoder.decode(entry.msg)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return  # not a record we wrote: the core answers it like any unknown input
        if record.shard != self.core.shard:
            return  # another shard's entry failed there, not here
        self.known_failed.setdefault(record.seq, record.error)

    def _rebuild(self) -> None:
        """The state before the failed entry: the checkpoint plus the journal, re-applied."""
        core = self._restore(self._checkpoint)
        for entry in self._journal:
            if entry.seq in self.known_failed:
                self._consume_in(core, entry)
            else:
                core.apply(entry)
        self.core = core

    def _consume(self, entry: Entry) -> None:
        self._consume_in(self.core, entry)
        self._journal.append(entry)

    @staticmethod
    def _consume_in(core: Core, entry: Entry) -> None:
        """Entry `entry` is used up without being applied: only the cursor and the clock move
        (and, in a core shard, what every shard notes of every entry: core/shards.py)."""
        core.note(entry)
