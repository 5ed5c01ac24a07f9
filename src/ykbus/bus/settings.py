"""The service configuration (seed: scheduler-configuration, "scheduler configuration"):
static, read once at start, separate from the dynamic queue configuration.

    ykbus core --config ykbus.yaml          # command-line flags override the file

Every key is optional; an unknown key or a wrong type is an error naming its path.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

import msgspec

from ykbus.core.config import Acl, parse_acl

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
    out_max_bytes: int = 1 << 30
    out_max_age: Positive = 7 * 24 * 3600
    replicas: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1


class ServiceConfig(_C):
    nats: NatsConfig = msgspec.field(default_factory=NatsConfig)
    api: ApiConfig = msgspec.field(default_factory=ApiConfig)
    queues: QueuesConfig = msgspec.field(default_factory=QueuesConfig)
    rm: RmConfig = msgspec.field(default_factory=RmConfig)
    streams: StreamsConfig = msgspec.field(default_factory=StreamsConfig)
    tick_interval: Positive = 1.0
    snapshot_every: Annotated[int, msgspec.Meta(ge=1)] = 10_000
    snapshot_dir: str | None = None
    # Who may use the admin API (yk.v1.admin.*) besides the process owner, who always may.
    scheduler_acl: str = ""
    log_level: str = "info"


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
