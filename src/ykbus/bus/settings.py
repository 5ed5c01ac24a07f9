"""The service configuration (YuniKorn's Scheduler Configuration design, "scheduler configuration"):
static, read once at start, separate from the dynamic queue configuration.

    ykbus core --config ykbus.yaml          # command-line flags override the file

Every key is optional; an unknown key or a wrong type is an error naming its path.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec

from ykbus.bus.leadership import DEFAULT_LEASE_TTL_S, MAX_TTL_S, MIN_TTL_S
from ykbus.bus.streams import START_WAIT_S, StreamLimits
from ykbus.core.acl import Acl, parse_acl
from ykbus.core.config import ConfigError, SchedulerConfig

LogLevel = Literal["debug", "info", "warning", "error"]  # the service's log levels (cliparse.LOG_LEVELS)
Positive = Annotated[float, msgspec.Meta(gt=0)]
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class _C(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class TlsConfig(_C):
    ca: str | None = None      # CA bundle that signed the server's certificate
    cert: str | None = None    # client certificate (mutual TLS)
    key: str | None = None     # its private key


class NatsConfig(_C):
    url: str = ""  # empty: found as every ykbus command finds it (ykbus.bus.local.default_url)
    prefix: str = "yk.v1"
    credentials: str | None = None  # a NATS .creds file (JWT + NKey)
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tls: TlsConfig | None = None


class ApiConfig(_C):
    host: str = "127.0.0.1"
    port: Port = 0  # the HTTP read API; 0: off (the NATS read API is always on)
    token: str | None = None  # when set, HTTP requests need `Authorization: Bearer <token>`


class QueuesConfig(_C):
    file: str | None = None  # the queue configuration of every RM (policy group "*")
    dir: str | None = None   # <policy group>.yaml: the queue configuration of that group
    watch_interval: Positive = 2.0


class RmConfig(_C):
    pause_after: Positive = 10.0   # seconds without heartbeat before an RM is Paused
    stop_after: Positive = 60.0    # further seconds Paused before it is Stopped


class StreamsConfig(_C):
    in_max_bytes: int = -1
    # entries of the input log kept before the last snapshot stored; older ones are purged
    # after each (-1: every entry is kept, so `ykbus record` gives the whole log)
    in_keep: Annotated[int, msgspec.Meta(ge=-1)] = -1
    out_max_bytes: int = 1 << 30
    out_max_age: Positive = 7 * 24 * 3600
    replicas: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1
    start_wait: Positive = START_WAIT_S  # seconds a core waits at start for JetStream to take its streams


class ServiceConfig(_C):
    nats: NatsConfig = msgspec.field(default_factory=NatsConfig)
    api: ApiConfig = msgspec.field(default_factory=ApiConfig)
    queues: QueuesConfig = msgspec.field(default_factory=QueuesConfig)
    rm: RmConfig = msgspec.field(default_factory=RmConfig)
    streams: StreamsConfig = msgspec.field(default_factory=StreamsConfig)
    tick_interval: Positive = 1.0
    lease_ttl: Annotated[float, msgspec.Meta(ge=MIN_TTL_S, le=MAX_TTL_S)] = DEFAULT_LEASE_TTL_S  # leader lease (bus/leadership.py)
    # "candidate": may lead (the default); "reader": applies the log and answers reads, never leads
    role: Literal["candidate", "reader"] = "candidate"
    reads: bool = True  # answer the NATS read API (False: leave it to `reader` processes)
    shard: str | None = None  # the core shard this process is (docs/sharding.md); none: not sharded
    snapshot_every: Annotated[int, msgspec.Meta(ge=1)] = 10_000
    snapshot_dir: str | None = None
    # Who may use the admin API (yk.v1.admin.*) besides the process owner, who always may.
    scheduler_acl: str = ""
    log_level: LogLevel = "info"


class ServiceConfigError(ValueError):
    pass


def parse_service_config(obj: object) -> tuple[ServiceConfig, Acl]:
    """The service configuration from a loaded YAML object, and its scheduler ACL."""
    try:
        config = msgspec.convert(obj if obj is not None else {}, ServiceConfig)
    except msgspec.ValidationError as exc:
        raise ServiceConfigError(str(exc)) from None
    try:
        acl = parse_acl(config.scheduler_acl)
    except ValueError as exc:
        raise ServiceConfigError(f"{exc} - at `$.scheduler_acl`") from None
    if config.api.token is not None and not config.api.token.strip():
        raise ServiceConfigError("empty token (omit it, or give a secret) - at `$.api.token`")
    return config, acl


def api_exposure_error(host: str, port: int, token: str | None) -> str | None:
    """Why the HTTP read API must not start as configured, or None: it shows every RM's
    state, so off loopback it needs a token."""
    if not port or token or _is_loopback(host):
        return None
    return (f"api.host {host!r} is not a loopback address and api.token is not set: the HTTP read API would "
            "show every RM's state to anyone who can reach it; set api.token (or --api-token, or "
            "YKBUS_API_TOKEN), or bind api.host to 127.0.0.1")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def load_service_config(path: str) -> tuple[ServiceConfig, Acl]:
    from ykbus.yamlload import load_yaml

    with open(path, encoding="utf-8") as f:
        return parse_service_config(load_yaml(f.read()))


class StartError(Exception):
    """A setting the service cannot start with; the message names it (the command prints it)."""


@dataclass
class ServiceSettings:
    nats_url: str = "nats://127.0.0.1:4222"
    prefix: str = "yk.v1"
    queue_file: str | None = None  # the queue configuration of every RM (policy group "*"), watched
    queues_dir: str | None = None  # <policy group>.yaml files, watched
    watch_interval_s: float = 2.0
    tick_interval_s: float = 1.0
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S  # a standby takes over this long after the leader's last renewal
    reader: bool = False  # applies the log and answers reads; never campaigns, publishes or appends
    reads: bool = True  # answers the read API on NATS (`yk.v1.api.*`); HTTP follows api_port
    shard: str | None = None  # the core shard this process is (core/shards.py); None: not sharded
    snapshot_every: int = 10_000
    heartbeat_pause_s: float = 10.0
    heartbeat_stop_s: float = 60.0
    limits: StreamLimits = field(default_factory=StreamLimits)
    start_wait_s: float = START_WAIT_S  # JetStream not answering, or a cluster forming: retried this long at start
    publish_retries: int = 60
    publish_window: int = 2000  # output publishes awaiting their ack, across entries
    snapshot_dir: str | None = None  # also keep the latest snapshot here (read if its digest matches)
    nats_options: dict[str, Any] = field(default_factory=dict)  # credentials, TLS (nats.connect keywords)
    api_host: str = "127.0.0.1"
    api_port: int = 0  # HTTP read API; 0: off
    api_token: str | None = None  # HTTP read API: requests need `Authorization: Bearer <token>`
    scheduler_acl: Acl | None = None  # admin API users besides the process owner
    log_level: str = "info"


def nats_options(credentials: str | None = None, user: str | None = None, password: str | None = None,
                 token: str | None = None, tls_ca: str | None = None, tls_cert: str | None = None,
                 tls_key: str | None = None) -> dict[str, Any]:
    """nats.connect keywords for credentials and TLS (of the service configuration)."""
    out: dict[str, Any] = {}
    if credentials:
        out["user_credentials"] = credentials
    if user:
        out["user"], out["password"] = user, password or ""
    if token:
        out["token"] = token
    if tls_ca or tls_cert:
        ctx = ssl.create_default_context(cafile=tls_ca)
        if tls_cert:
            ctx.load_cert_chain(tls_cert, tls_key)
        out["tls"] = ctx
    return out


def identity_secret(path: str, section: str, name: str | None = None) -> Any:
    """One identity's user and password from a secrets file of `ykbus nats-config`."""
    from ykbus.bus.permissions import load_secrets

    try:
        found = load_secrets(path)
    except (OSError, ValueError) as exc:
        raise StartError(str(exc)) from None
    secret = found.core if section == "core" else getattr(found, section).get(name or "")
    if secret is None:
        raise StartError(f"{path}: no password for {section}{'.' + name if name else ''} "
                         "(an nkey identity signs with its seed instead)")
    return secret


def queue_file(path: str) -> SchedulerConfig:
    """The queue configuration in the file at `path`; StartError lists every error with its path."""
    from ykbus.yamlload import load_config_file

    try:
        return load_config_file(path)
    except ConfigError as exc:
        raise StartError(f"{path}: invalid queue configuration:\n  " + "\n  ".join(exc.errors)) from None
    except OSError as exc:
        raise StartError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise StartError(f"{path}: not valid YAML: {exc}") from None


def service_settings(args: Any) -> ServiceSettings:
    """Settings from the service configuration file (`args.config`), then the flags given
    (`args`: the command's parsed flags; an absent or None flag leaves the file's value)."""
    from ykbus.bus.local import default_url, up_secrets
    from ykbus.core.shards import check_shard_name

    config, acl = ServiceConfig(), None
    if getattr(args, "config", None):
        try:
            config, acl = load_service_config(args.config)
        except (OSError, ValueError, ServiceConfigError) as exc:
            raise StartError(f"{args.config}: invalid service configuration: {exc}") from None

    def flag(name: str, value: Any) -> Any:
        given = getattr(args, name, None)
        return value if given is None else given

    c, tls = config, config.nats.tls
    for path in filter(None, [flag("queues", c.queues.file)]):  # a queue file that does not validate stops the start
        queue_file(path)
    user, password = c.nats.user, c.nats.password
    secrets = getattr(args, "nats_secrets", None)
    if secrets is None and user is None and not c.nats.url:  # the server found, not named: that `ykbus up --secure`'s
        secrets = up_secrets(getattr(args, "nats", None), getattr(args, "data", None))
    if secrets:
        secret = identity_secret(secrets, "core")
        user, password = secret.user, secret.password
    lease_ttl = flag("lease_ttl", c.lease_ttl)
    if not MIN_TTL_S <= lease_ttl <= MAX_TTL_S:
        raise StartError(f"--lease-ttl {lease_ttl}: must be between 0.2 and 60 seconds")
    reader, reads = bool(flag("reader", None)) or c.role == "reader", not flag("no_reads", None) and c.reads
    if reader and not reads:
        raise StartError("--reader with --no-reads: a reader is there to answer reads")
    shard = flag("shard", c.shard)
    in_keep = flag("in_keep", c.streams.in_keep)
    if in_keep >= 0 and shard is not None:
        raise StartError(f"--in-keep {in_keep} with --shard: the core shards share one input log, and each shard's "
                         "snapshot is at its own entry: a purge below one shard's would take entries another still "
                         "needs (docs/sharding.md)")
    if shard is not None:
        try:
            check_shard_name(shard)
        except ValueError as exc:
            raise StartError(f"--shard: {exc}") from None
    api_host, api_port = flag("api_host", c.api.host), flag("api_port", c.api.port)
    api_token = getattr(args, "api_token", None) or os.environ.get("YKBUS_API_TOKEN") or c.api.token
    exposed = api_exposure_error(api_host, api_port, api_token)
    if exposed:
        raise StartError(exposed)
    return ServiceSettings(
        # `--nats ""` (ykbus up: its own server, known once started) looks for none
        nats_url=flag("nats", c.nats.url) or ("" if getattr(args, "nats", None) == "" else default_url(getattr(
            args, "data", None))), prefix=flag("prefix", c.nats.prefix),
        queue_file=flag("queues", c.queues.file), queues_dir=flag("queues_dir", c.queues.dir),
        watch_interval_s=c.queues.watch_interval, tick_interval_s=flag("tick", c.tick_interval),
        lease_ttl_s=lease_ttl, reader=reader, reads=reads, shard=shard,
        snapshot_every=flag("snapshot_every", c.snapshot_every),
        heartbeat_pause_s=flag("rm_pause", c.rm.pause_after), heartbeat_stop_s=flag("rm_stop", c.rm.stop_after),
        limits=StreamLimits(in_max_bytes=flag("in_max_bytes", c.streams.in_max_bytes),
                            in_keep=in_keep,
                            out_max_bytes=flag("out_max_bytes", c.streams.out_max_bytes),
                            out_max_age_s=flag("out_max_age", c.streams.out_max_age),
                            replicas=flag("replicas", c.streams.replicas)),
        start_wait_s=flag("start_wait", c.streams.start_wait),
        snapshot_dir=flag("snapshot_dir", c.snapshot_dir),
        nats_options=nats_options(c.nats.credentials, user, password, c.nats.token,
                                  tls.ca if tls else None, tls.cert if tls else None, tls.key if tls else None),
        api_host=api_host, api_port=api_port, api_token=api_token, scheduler_acl=acl,
        log_level=c.log_level,
    )
