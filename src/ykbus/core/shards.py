"""Cores sharded by RM: which core shard applies each log entry, and an RM's move.

Several core processes (shards) can share one input log, each owning a disjoint set of RMs.
Who owns an RM is a function of the log: the last `assign` entry naming it (appended by a
shard's core service, `<prefix>.in._core.assign.<shard>`, body `{"rm": ..., "shard": ...}`),
else the shard named `default`. Every shard reads every entry and applies:
- an RM's entries (and `rmstate` entries about it) if it owns that RM;
- a `tick` whose body names it (`{"shard": ...}`); a tick that names no shard, every shard;
- the operator's queue files and `assign` entries: every shard;
- records of failed entries: every shard reads them, and only the shard they name honours
  them (core/guard.py).

RMs of different shards share nothing a decision reads (partitions are per RM), so a
shard's outputs are a deterministic function of the log and the shard's name: `ykbus
replay --shard NAME` makes them again (`Fleet`, core/fleet.py, runs every shard of a log).

A move is one log entry: at `assign` entry N the old owner takes the RM's unit (its
partitions, its timers, the configuration its policy group had) out of its state, as it is
once the timers due at N have fired (`MovedOut`, an effect its service stores:
`snapshot.dump_moved`); the new
owner puts the same unit in at entry N (`Arriving`, which its service fetched first) and
applies the RM's entries from N+1 on. Nothing is decided twice or lost: each entry of the RM
is applied by exactly one shard, the one that owns it at that entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from ykbus import limits
from ykbus.core.entries import Entry

if TYPE_CHECKING:
    from ykbus.core.registry import ResourceManager

DEFAULT_SHARD = "default"
ASSIGN = "assign"
SHARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a NATS token, short: it names KV keys and objects
RM_NAME = re.compile(r"^[^.*>\s]+$")


class AssignBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rm: str
    shard: str


class _Named(msgspec.Struct, frozen=True):
    shard: str = ""
    rmID: str = ""


@dataclass(slots=True)
class MovedOut:
    """An RM's unit that left this shard at assign entry `seq` (None: it had no state here)."""

    rm: str
    to: str
    seq: int
    now: int
    unit: ResourceManager | None
    policy_group_text: str


@dataclass(slots=True)
class Arriving:
    """An RM's unit as it arrives at its new shard (decoded from what the old one stored)."""

    unit: ResourceManager | None
    policy_group_text: str


def check_shard_name(name: str) -> str:
    if not SHARD_NAME.match(name):
        raise ValueError(f"shard name {limits.quoted(name)}: 1 to 64 letters, digits, '-' or '_'")
    return name


def decode_assign(entry: Entry) -> AssignBody:
    """The body of an assign entry; ValueError naming the field and the reason."""
    if len(entry.msg) > 4096:
        raise ValueError(f"assign entry of {len(entry.msg)} bytes: at most 4096")
    mod = msgspec.json if entry.encoding == "json" else msgspec.msgpack
    try:
        body = mod.decode(entry.msg, type=AssignBody)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"invalid assign entry: {exc}") from None
    if not RM_NAME.match(body.rm) or len(body.rm) > limits.MAX_ID_CHARS:
        raise ValueError(f"rm {limits.quoted(body.rm)}: not an rmID (a NATS token)")
    check_shard_name(body.shard)
    return body


def named_in(entry: Entry) -> _Named:
    if entry.msg in (b"{}", b"", b"\x80"):  # the usual tick: nothing to read
        return _Named()
    mod = msgspec.json if entry.encoding == "json" else msgspec.msgpack
    try:
        return mod.decode(entry.msg, type=_Named)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _Named()  # the entry's own handler says what is wrong with it


def owner_of(owners: dict[str, str], rm: str) -> str:
    return owners.get(rm, DEFAULT_SHARD)


def applies(shard: str, owners: dict[str, str], entry: Entry) -> bool:
    """Whether core shard `shard` applies `entry` (see the module's rules; a failed-entry
    record reaches every shard, and its guard decides whether it is that shard's)."""
    if entry.rm:
        return owner_of(owners, entry.rm) == shard
    if entry.kind == "tick":
        named = named_in(entry).shard
        return not named or named == shard
    if entry.kind == "rmstate":
        return owner_of(owners, named_in(entry).rmID) == shard
    return True  # the operator's queue files, assign entries, failed-entry records without an RM
