"""Log entries in, outputs out: the values that cross the core's boundary (msgspec
Structs, which mypyc does not compile: the `Outbox` of core/effects.py, which is compiled,
collects them)."""

from __future__ import annotations

from typing import Any

import msgspec

ENTRY_KINDS = ("register", "app", "node", "alloc", "config", "unregister", "rmstate", "tick", "failed", "assign")


class Entry(msgspec.Struct, frozen=True):
    """One input log entry. `msg` is the raw body, in `encoding` (json or msgpack)."""

    seq: int
    ts: int
    rm: str
    kind: str
    msg: bytes = b"{}"
    encoding: str = "json"


class Output(msgspec.Struct, frozen=True):
    """One output message: `seq` is the input sequence that caused it."""

    seq: int
    rm: str
    kind: str
    msg: Any
