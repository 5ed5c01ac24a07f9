"""Identities and NATS permissions: who may publish and subscribe to what.

    ykbus nats-config --rms RMS.yaml --out nats.conf [--secrets secrets.yaml]

Theory of operation
-------------------
Every party connects as its own NATS user; nats-server enforces allow-lists per user, so an
identity is the authenticated user, never a field the sender writes.

1. An RM `r` is the NATS user `r`. It may publish its inputs `<p>.in.r.>`, its heartbeat
   `<p>.hb.r` and its attach request `<p>.attach.r`; pull from and ack its own durable
   consumer `rm_r` on YK_OUT; subscribe only to its own inbox prefix `_INBOX_r.>`. The core
   service makes that consumer (filter `<p>.out.r.>`) when asked on `<p>.attach.r`, so the
   RM needs no JetStream API that could name another RM's filter.
2. The core service has the bus: `<p>.>`, the JetStream API, acks and flow control, the
   object store of its snapshots, the leader lease (`$KV.YK_LEASE.>`), its own `_INBOX.>`, and
   answers requests (allow_responses).
3. An admin `u` may call the admin API as itself, `<p>.admin.u.>`, and the read API
   `<p>.api.>`; an observer only the read API. Both read replies on `_INBOX_u.>`.
4. Everything else is denied. A connection without a known user is refused.

Each identity must connect with the inbox prefix `inbox_prefix(user)` (nats-py's
`inbox_prefix`); `connect_options()` gives the nats.connect keywords.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ykbus.bus.subjects import CORE_TOKEN, LEASE_BUCKET, OUT_STREAM, SHARDS_BUCKET, SNAPSHOT_BUCKET, Subjects

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
PREFIX_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")
BCRYPT_COST = 10  # nats-server checks the hash at every connect: ~70 ms at cost 10


class _C(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class CoreIdentity(_C):
    user: str = "ykbus-core"
    password: str | None = None


class RmIdentity(_C):
    id: str
    password: str | None = None
    nkey: str | None = None  # a user nkey's public key (U...): the RM signs with its seed
    buckets: list[str] = msgspec.field(default_factory=list)  # NATS KV buckets it may read and write


class UserIdentity(_C):
    user: str
    password: str | None = None
    nkey: str | None = None
    buckets: list[str] = msgspec.field(default_factory=list)  # NATS KV buckets it may read and write


class RmsConfig(_C):
    prefix: str = "yk.v1"
    core: CoreIdentity = msgspec.field(default_factory=CoreIdentity)
    rms: list[RmIdentity] = msgspec.field(default_factory=list)
    admins: list[UserIdentity] = msgspec.field(default_factory=list)
    observers: list[UserIdentity] = msgspec.field(default_factory=list)


class RmsConfigError(ValueError):
    """RMS.yaml is not valid; `errors` holds every problem, each with its path."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the checksum of an nkey."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def encode_user_nkey(public_key: bytes) -> str:
    """The `U...` text form of a 32-byte ed25519 public key (as nats-server expects it)."""
    raw = bytes([20 << 3]) + public_key  # prefix byte 'U'
    raw += _crc16(raw).to_bytes(2, "little")
    return base64.b32encode(raw).decode().rstrip("=")


def nkey_error(key: str) -> str | None:
    """Why `key` is not a user nkey public key, or None."""
    if not key.startswith("U") or len(key) != 56:
        return "expected a user nkey public key: 56 characters starting with U"
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except ValueError:
        return "not base32"
    if len(raw) != 35 or _crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
        return "bad checksum"
    return None


def parse_rms_config(obj: object) -> RmsConfig:
    """RMS.yaml from a loaded YAML object; RmsConfigError lists every problem with its path."""
    try:
        config = msgspec.convert(obj if obj is not None else {}, RmsConfig)
    except msgspec.ValidationError as exc:
        raise RmsConfigError([str(exc)]) from None
    errors: list[str] = []
    if not all(PREFIX_TOKEN.match(t) for t in config.prefix.split(".")):
        errors.append(f"$.prefix: {config.prefix!r}: expected dot-separated tokens of letters, digits, _ and -")
    seen: dict[str, str] = {}
    entries: list[tuple[str, str, str | None, str | None]] = [("$.core.user", config.core.user,
                                                               config.core.password, None)]
    entries += [(f"$.rms[{i}].id", r.id, r.password, r.nkey) for i, r in enumerate(config.rms)]
    for section in ("admins", "observers"):
        entries += [(f"$.{section}[{i}].user", u.user, u.password, u.nkey)
                    for i, u in enumerate(getattr(config, section))]
    for path, name, password, nkey in entries:
        where = path.rsplit(".", 1)[0]
        if not NAME.match(name):
            errors.append(f"{path}: {name!r}: expected 1 to 64 letters, digits, _ or - (a NATS user and subject token)")
        elif name == CORE_TOKEN:
            errors.append(f"{path}: {name!r} is reserved for the core's own log entries")
        elif name in seen:
            errors.append(f"{path}: {name!r} is already used at {seen[name]}: every identity needs its own name")
        else:
            seen[name] = path
        if password is not None and nkey is not None:
            errors.append(f"{where}: give a password or an nkey, not both")
        if password is not None and not password:
            errors.append(f"{where}.password: empty (omit it to have one generated)")
        if nkey is not None and (why := nkey_error(nkey)):
            errors.append(f"{where}.nkey: {why}")
    grants = [(f"$.rms[{i}]", r.buckets) for i, r in enumerate(config.rms)]
    grants += [(f"$.{section}[{i}]", u.buckets) for section in ("admins", "observers")
               for i, u in enumerate(getattr(config, section))]
    for where, buckets in grants:
        for j, b in enumerate(buckets):
            if not NAME.match(b):
                errors.append(f"{where}.buckets[{j}]: {b!r}: expected 1 to 64 letters, digits, _ or - (a KV bucket)")
    if errors:
        raise RmsConfigError(errors)
    return config


def load_rms_config(path: str) -> RmsConfig:
    from ykbus.yamlload import load_yaml

    with open(path, encoding="utf-8") as f:
        return parse_rms_config(load_yaml(f.read()))


def with_passwords(config: RmsConfig, generate: Callable[[], str] = lambda: secrets.token_urlsafe(24)
                   ) -> RmsConfig:
    """`config` with a generated password for every identity that has neither one nor an nkey."""
    def fill(ident: Any) -> Any:
        if ident.password is None and getattr(ident, "nkey", None) is None:
            return msgspec.structs.replace(ident, password=generate())
        return ident

    return msgspec.structs.replace(
        config, core=fill(config.core), rms=[fill(r) for r in config.rms],
        admins=[fill(u) for u in config.admins], observers=[fill(u) for u in config.observers])


def inbox_prefix(user: str) -> str:
    """The inbox prefix of an identity: only it may subscribe below it."""
    return f"_INBOX_{user}"


def connect_options(user: str, password: str | None = None, nkeys_seed: str | None = None) -> dict[str, Any]:
    """nats.connect keywords for an RM, admin or observer `user` (not the core, which keeps `_INBOX`)."""
    out: dict[str, Any] = {"inbox_prefix": inbox_prefix(user)}
    if nkeys_seed is not None:
        out["nkeys_seed"] = nkeys_seed
    else:
        out["user"], out["password"] = user, password or ""
    return out


@dataclass(frozen=True)
class Permissions:
    publish: list[str]
    subscribe: list[str]
    allow_responses: bool = False


def rm_permissions(s: Subjects, rm: str) -> Permissions:
    consumer = f"rm_{rm}"
    return Permissions(
        publish=[f"{s.prefix}.in.{rm}.>", s.heartbeat(rm), s.attach(rm),
                 f"$JS.API.CONSUMER.MSG.NEXT.{OUT_STREAM}.{consumer}",
                 f"$JS.ACK.{OUT_STREAM}.{consumer}.>",
                 f"$JS.ACK.*.*.{OUT_STREAM}.{consumer}.>"],  # the v2 ack subject (with domain and account)
        subscribe=[f"{inbox_prefix(rm)}.>"])


def bucket_permissions(bucket: str) -> list[str]:
    """What a client publishes to read, write and watch NATS KV bucket `bucket` (and create
    it): the bucket's subjects and the JetStream API of its stream KV_<bucket> only. Watch
    messages arrive on the client's own inbox."""
    stream = f"KV_{bucket}"
    return [f"$KV.{bucket}.>", f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.STREAM.CREATE.{stream}",
            f"$JS.API.STREAM.MSG.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}.>",
            f"$JS.API.CONSUMER.CREATE.{stream}", f"$JS.API.CONSUMER.CREATE.{stream}.>",
            f"$JS.API.CONSUMER.DELETE.{stream}.>", f"$JS.API.CONSUMER.INFO.{stream}.>",
            f"$JS.FC.{stream}.>", f"$JS.ACK.{stream}.>"]


def _with_buckets(perms: Permissions, buckets: list[str]) -> Permissions:
    return Permissions(publish=perms.publish + [p for b in buckets for p in bucket_permissions(b)],
                       subscribe=perms.subscribe, allow_responses=perms.allow_responses)


def core_permissions(s: Subjects) -> Permissions:
    # $JS.FC: flow-control answers of its ordered consumers (a long replay); $O: the snapshot
    # object store; $KV: the leader lease and the shards' assignments; allow_responses: the
    # answers to attach, read API and admin requests
    return Permissions(
        publish=[f"{s.prefix}.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", f"$O.{SNAPSHOT_BUCKET}.>",
                 f"$KV.{LEASE_BUCKET}.>", f"$KV.{SHARDS_BUCKET}.>"],
        subscribe=[f"{s.prefix}.>", "_INBOX.>"], allow_responses=True)


def admin_permissions(s: Subjects, user: str) -> Permissions:
    return Permissions(publish=[s.admin(user, ">"), f"{s.prefix}.api.>"], subscribe=[f"{inbox_prefix(user)}.>"])


def observer_permissions(s: Subjects, user: str) -> Permissions:
    return Permissions(publish=[f"{s.prefix}.api.>"], subscribe=[f"{inbox_prefix(user)}.>"])


def bcrypt_hash(password: str) -> str:
    import bcrypt

    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(BCRYPT_COST)).decode()


def _q(text: str) -> str:
    return json.dumps(text)


def _user(name: str, password: str | None, nkey: str | None, perms: Permissions,
          hash_password: Callable[[str], str]) -> str:
    if nkey is not None:
        cred = f"nkey: {_q(nkey)}"
    elif password is not None:
        cred = f"user: {_q(name)}, password: {_q(hash_password(password))}"
    else:
        raise ValueError(f"{name}: no password and no nkey (use with_passwords first)")
    pub = ", ".join(_q(p) for p in perms.publish)
    sub = ", ".join(_q(p) for p in perms.subscribe)
    responses = ", allow_responses: true" if perms.allow_responses else ""
    return (f"    {{{cred},\n      permissions: {{publish: {{allow: [{pub}]}}, "
            f"subscribe: {{allow: [{sub}]}}{responses}}}}}")


def server_config(config: RmsConfig, hash_password: Callable[[str], str] = bcrypt_hash) -> str:
    """The nats-server `authorization` block for `config` (every identity must have a
    password or an nkey: see `with_passwords`). Passwords are stored as bcrypt hashes."""
    s = Subjects(config.prefix)
    users = [_user(config.core.user, config.core.password, None, core_permissions(s), hash_password)]
    users += [_user(r.id, r.password, r.nkey, _with_buckets(rm_permissions(s, r.id), r.buckets), hash_password)
              for r in config.rms]
    users += [_user(u.user, u.password, u.nkey, _with_buckets(admin_permissions(s, u.user), u.buckets),
                    hash_password) for u in config.admins]
    users += [_user(u.user, u.password, u.nkey, _with_buckets(observer_permissions(s, u.user), u.buckets),
                    hash_password) for u in config.observers]
    return ("# written by `ykbus nats-config`: one user per identity, allow-lists only (docs/protocol.md,\n"
            "# \"Identities and permissions\"). Passwords are bcrypt hashes.\n"
            "authorization {\n  users = [\n" + ",\n".join(users) + "\n  ]\n}\n")


class Secret(_C):
    user: str
    password: str


class Secrets(_C):
    """The passwords of every identity that has one (the secrets file): clients read theirs."""

    prefix: str = "yk.v1"
    core: Secret | None = None
    rms: dict[str, Secret] = msgspec.field(default_factory=dict)
    admins: dict[str, Secret] = msgspec.field(default_factory=dict)
    observers: dict[str, Secret] = msgspec.field(default_factory=dict)


def secrets_of(config: RmsConfig) -> Secrets:
    return Secrets(
        prefix=config.prefix,
        core=Secret(config.core.user, config.core.password) if config.core.password is not None else None,
        rms={r.id: Secret(r.id, r.password) for r in config.rms if r.password is not None},
        admins={u.user: Secret(u.user, u.password) for u in config.admins if u.password is not None},
        observers={u.user: Secret(u.user, u.password) for u in config.observers if u.password is not None})


def write_private(path: str, text: str) -> None:
    """Write `text` to `path` readable by its owner only (mode 0600, also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def write_secrets(path: str, config: RmsConfig) -> None:
    import yaml

    body = msgspec.to_builtins(secrets_of(config))
    write_private(path, "# written by `ykbus nats-config`: passwords in clear, keep this file private\n"
                  + yaml.safe_dump(body, sort_keys=False))


def load_secrets(path: str) -> Secrets:
    from ykbus.yamlload import load_yaml

    with open(path, encoding="utf-8") as f:
        obj = load_yaml(f.read())
    try:
        return msgspec.convert(obj, Secrets)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{path}: not a secrets file of `ykbus nats-config`: {exc}") from None


@dataclass
class Generated:
    """What `generate` wrote."""

    config: RmsConfig
    files: list[str] = field(default_factory=list)


def generate(config: RmsConfig, out: str, secrets_path: str | None) -> Generated:
    """Write the server configuration (0600) and, when asked, the secrets file (0600)."""
    full = with_passwords(config)
    generated = any(a.password != b.password for a, b in _identities(config, full))
    if generated and not secrets_path:
        raise ValueError("passwords would be generated but --secrets is not given: nobody could use them")
    write_private(out, server_config(full))
    files = [out]
    if secrets_path:
        write_secrets(secrets_path, full)
        files.append(secrets_path)
    return Generated(full, files)


def _identities(a: RmsConfig, b: RmsConfig) -> list[tuple[Any, Any]]:
    return ([(a.core, b.core)] + list(zip(a.rms, b.rms, strict=True)) + list(zip(a.admins, b.admins, strict=True))
            + list(zip(a.observers, b.observers, strict=True)))
