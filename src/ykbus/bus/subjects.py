"""Subjects of docs/protocol.md, and the mapping between a subject and a log entry."""

from __future__ import annotations

from dataclasses import dataclass

from ykbus.core.shards import SHARD_NAME

CORE_TOKEN = "_core"  # <rm> token of the entries the service appends itself (rm "" in the log)
IN_STREAM = "YK_IN"
OUT_STREAM = "YK_OUT"
SNAPSHOT_BUCKET = "YK_SNAP"
SNAPSHOT_OBJECT = "core"
LEASE_BUCKET = "YK_LEASE"  # the leader lease (bus/leadership.py)
LEASE_KEY = "leader"
SHARDS_BUCKET = "YK_SHARDS"  # the operator's assignments of RMs to core shards (bus/sharding.py)
HDR_LEASE = "Yk-Lease"  # the term of the leader that appended a core entry
MSGPACK = "application/msgpack"
HDR_IN_SEQ = "Yk-In-Seq"
# what a shard's leader appends on `_core.<kind>.<shard>` (anything else there is answered as unknown)
SHARD_CORE_KINDS = frozenset({"tick", "rmstate", "config", "failed", "assign"})
HDR_SHARD = "Yk-Shard"  # the core shard that published an output (docs/sharding.md)
HDR_MSG_ID = "Nats-Msg-Id"
HDR_CONTENT_TYPE = "Content-Type"


def encoding_of(headers: dict[str, str] | None) -> str:
    """"msgpack" when a message's Content-Type is application/msgpack (a media type in any
    case, parameters after `;` aside, as HTTP reads it), else "json"."""
    value = (headers or {}).get(HDR_CONTENT_TYPE)
    return "msgpack" if value is not None and value.split(";", 1)[0].strip().lower() == MSGPACK else "json"


def lease_key(shard: str | None) -> str:
    """The key of a core shard's lease in YK_LEASE (None: an unsharded core's)."""
    return f"{LEASE_KEY}-{shard}" if shard else LEASE_KEY


@dataclass(frozen=True)
class Subjects:
    prefix: str = "yk.v1"
    shard: str | None = None  # the core shard of this process (docs/sharding.md): its own lease, snapshot, read API

    @property
    def lease_key(self) -> str:
        return lease_key(self.shard)

    @property
    def snapshot_object(self) -> str:
        return f"{SNAPSHOT_OBJECT}-{self.shard}" if self.shard else SNAPSHOT_OBJECT

    @staticmethod
    def moved_object(rm: str, seq: int) -> str:
        """Where an RM's unit is stored as it leaves a shard at assign entry `seq`."""
        return f"moved-{rm}-{seq}"

    @property
    def naming_shard(self) -> dict[str, str]:
        """The body fields that name this process's shard ({} when not sharded): its ticks
        carry them (so that shard alone applies them: core/shards.py), and its records of
        failed entries (so that shard alone honours them: core/guard.py)."""
        return {"shard": self.shard} if self.shard else {}

    @property
    def inputs(self) -> str:
        return f"{self.prefix}.in.>"

    @property
    def outputs(self) -> str:
        return f"{self.prefix}.out.>"

    def input(self, rm: str, kind: str) -> str:
        return f"{self.prefix}.in.{rm or CORE_TOKEN}.{kind}"

    def core_input(self, kind: str) -> str:
        """Where this process appends a core entry: a shard's go to `_core.<kind>.<shard>`, so
        each shard's leaders fence their appends among themselves only."""
        return f"{self.prefix}.in.{CORE_TOKEN}.{kind}.{self.shard}" if self.shard else self.input("", kind)

    @property
    def core_inputs(self) -> str:
        """The subjects of this process's core entries (the fence's expected-last-sequence filter)."""
        return f"{self.prefix}.in.{CORE_TOKEN}.*.{self.shard}" if self.shard else self.input("", "*")

    def own_core_entry(self, subject: str) -> bool:
        """Whether `subject` is one of `core_inputs`."""
        head = f"{self.prefix}.in.{CORE_TOKEN}."
        if not subject.startswith(head):
            return False
        tokens = subject[len(head):].split(".")
        return tokens[1:] == [self.shard] if self.shard else len(tokens) == 1

    def output(self, rm: str, kind: str) -> str:
        return f"{self.prefix}.out.{rm or CORE_TOKEN}.{kind}"

    def rm_outputs(self, rm: str) -> str:
        return f"{self.prefix}.out.{rm}.>"

    def heartbeat(self, rm: str) -> str:
        return f"{self.prefix}.hb.{rm}"

    @property
    def heartbeats(self) -> str:
        return f"{self.prefix}.hb.*"

    def api(self, verb: str) -> str:
        return f"{self.prefix}.api.{verb}"

    @property
    def apis(self) -> str:
        """The read API this process answers: a shard's is `<prefix>.api.<shard>.<verb>`."""
        return f"{self.prefix}.api.{self.shard}.*" if self.shard else f"{self.prefix}.api.*"

    def admin(self, user: str, verb: str) -> str:
        """The admin API as `user`: NATS permissions pin the user token to the caller."""
        return f"{self.prefix}.admin.{user}.{verb}"

    @property
    def admins(self) -> str:
        return f"{self.prefix}.admin.>"

    def attach(self, rm: str) -> str:
        """Where an RM asks the core for its output consumer (the rm token is pinned by permissions)."""
        return f"{self.prefix}.attach.{rm}"

    @property
    def attaches(self) -> str:
        """Every attach subject, an rm of several tokens included: told why, not left unanswered."""
        return f"{self.prefix}.attach.>"

    def parse(self, subject: str, direction: str = "in") -> tuple[str, str]:
        """(rm, kind) of an input or output subject; rm "" for the core's own entries."""
        head = f"{self.prefix}.{direction}."
        if not subject.startswith(head):
            raise ValueError(f"subject {subject!r} is not under {head}")
        rm, _, kind = subject[len(head):].partition(".")
        if rm == CORE_TOKEN:
            base, _, shard = kind.partition(".")
            if base in SHARD_CORE_KINDS and SHARD_NAME.match(shard):
                return "", base  # a shard's core entry: `_core.<kind>.<shard>`
            return "", kind
        return rm, kind


def js_reply_meta(reply: str) -> tuple[int, int]:
    """(stream sequence, timestamp in ns) from a JetStream delivery's reply subject."""
    seq, ts, _ = js_reply_delivery(reply)
    return seq, ts


def js_reply_delivery(reply: str) -> tuple[int, int, int]:
    """(stream sequence, timestamp in ns, messages pending after it) from a JetStream
    delivery's reply subject."""
    tokens = reply.split(".")
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(tokens[5]), int(tokens[7]), int(tokens[8])
    if len(tokens) >= 11:  # v2: $JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>...
        return int(tokens[7]), int(tokens[9]), int(tokens[10])
    raise ValueError(f"not a JetStream reply subject: {reply!r}")


MAX_SEQ = 2**63 - 1  # a stream sequence (uint64), as the log bounds it


def header_seq(headers: dict[str, str] | None, name: str) -> int:
    """A sequence number a header carries (`Yk-In-Seq`, `Yk-Lease`), or 0 when it is absent or
    not one: anyone may publish to an open server, and a bad header must not stop a reader."""
    text = (headers or {}).get(name, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_SEQ else 0
