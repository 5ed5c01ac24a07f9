"""Where a command finds the NATS server when it is not told (`--nats URL`): the `ykbus up`
running on `--data DIR`, else `$YKBUS_NATS`, else the one `ykbus up` that runs, else
`nats://127.0.0.1:4222`.

Each `ykbus up` writes its server's URL into its own data directory (ADDRESS_FILE) and lists
itself in RUNNING_DIR (one file per data directory, naming it and the process) while it runs;
several may run at once, each on its own data directory. With more than one running and
nothing said, a command does not guess: it names them and how to pick one."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

DEFAULT_PORT = 4222  # NATS's, when a URL names none
DEFAULT_URL = f"nats://127.0.0.1:{DEFAULT_PORT}"
FIND_URL = ("$YKBUS_NATS, else the URL of the one `ykbus up` running (several: --data DIR picks one), else "
            + DEFAULT_URL)
DATA_HELP = "talk to the `ykbus up` running on this data directory (when several run; before $YKBUS_NATS)"
ADDRESS_FILE = "nats.url"  # in a data directory: the URL of its `ykbus up`'s nats-server, while it runs
RUNNING_DIR = os.path.join("~", ".ykbus", "running")  # one file per running `ykbus up`
LOCK_SUFFIX = ".lock"  # `<data dir>.lock`: held (flock) by the `ykbus up` running on the directory


@dataclass(frozen=True)
class Instance:
    """A running `ykbus up`: its data directory, its NATS URL, its process."""

    data: str
    url: str
    pid: int


def _entry(data: str) -> str:
    """The file in RUNNING_DIR that stands for the `ykbus up` on `data` (an absolute path)."""
    return os.path.join(os.path.expanduser(RUNNING_DIR), hashlib.sha256(data.encode()).hexdigest()[:16] + ".json")


def register(data: str, url: str) -> list[str]:
    """Called by `ykbus up` once its server listens: the address file in `data` and its entry
    in RUNNING_DIR; the files to remove at its stop (`unregister`)."""
    written = []
    for path, text in ((os.path.join(data, ADDRESS_FILE), url + "\n"),
                       (_entry(data), json.dumps({"data": data, "url": url, "pid": os.getpid()}) + "\n")):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        written.append(path)
    return written


def unregister(paths: list[str]) -> None:
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def running() -> list[Instance]:
    """The `ykbus up` processes that run now, by data directory (an entry left by one that
    was killed is removed)."""
    found = []
    directory = os.path.expanduser(RUNNING_DIR)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                entry = json.load(f)
            instance = Instance(str(entry["data"]), str(entry["url"]), int(entry["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(instance.pid):
            found.append(instance)
        else:
            unregister([path])
    return sorted(found, key=lambda i: i.data)


def default_url(data: str | None = None) -> str:
    """The NATS URL a command uses when not given one (FIND_URL); NatsNotChosen when that
    is not one URL."""
    if data:
        path = os.path.abspath(os.path.expanduser(data))
        try:
            with open(os.path.join(path, ADDRESS_FILE), encoding="utf-8") as f:
                url = f.read().strip()
        except OSError:
            url = ""
        if url and (any(i.data == path for i in running()) or held(path)):  # (held: started under another HOME)
            return url
        others = running()
        raise NatsNotChosen(f"no `ykbus up` runs on {path}" + (f"; running: {_choices(others)}" if others else ""))
    env = os.environ.get("YKBUS_NATS")
    if env:
        return env
    instances = running()
    if len(instances) == 1:
        return instances[0].url
    if instances:
        raise NatsNotChosen(f"{len(instances)} `ykbus up` run: {_choices(instances)}")
    return DEFAULT_URL


SECRETS_FILE = "secrets.yaml"  # in the data directory of `ykbus up --secure`: every identity's password
SECRETS_HELP = ("on a secured server, connect with an identity of this secrets file (`ykbus nats-config --secrets`); "
                "that of a `ykbus up --secure` found by --data, or running when no server is named, is found without it")


def up_secrets(nats: str | None, data: str | None) -> str | None:
    """The secrets file of the `ykbus up --secure` a command finds (`--data`, else the one
    running, unless `--nats` or $YKBUS_NATS names a server): None if none, or not secured."""
    if nats is not None:
        return None
    instances = [] if data or os.environ.get("YKBUS_NATS") else running()
    found = os.path.abspath(os.path.expanduser(data)) if data else instances[0].data if len(instances) == 1 else ""
    path = os.path.join(found, SECRETS_FILE) if found else ""
    return path if path and os.path.exists(path) else None


def identity(nats: str | None, data: str | None, secrets: str | None, core: bool = False) -> dict[str, Any]:
    """The nats.connect keywords of a command's identity: none on an open server; from the
    secrets file `secrets`, or, when the server is found rather than named (`--data`, the one
    `ykbus up` running), from that `ykbus up --secure`'s data directory. Reads of the read API
    are the current user's admin identity; `core` (reading the log or the shards' bucket
    through JetStream) the core's. NatsUnreachable names a file without the identity."""
    import getpass

    from ykbus.bus.permissions import connect_options, load_secrets

    secrets = secrets or up_secrets(nats, data)
    if secrets is None:
        return {}
    try:
        found = load_secrets(secrets)
    except (OSError, ValueError) as exc:
        raise NatsUnreachable(f"no identity to connect with: {exc}") from None
    secret = found.core if core else found.admins.get(getpass.getuser())
    if secret is None:
        raise NatsUnreachable(f"no identity to connect with: {secrets}: no password for "
                              + ("the core" if core else f"the admin {getpass.getuser()!r}"))
    return {"user": secret.user, "password": secret.password} if core else connect_options(secret.user, secret.password)


def held(data: str) -> bool:
    """Whether a `ykbus up` runs on data directory `data` now: its lock is held (a killed
    one's is not: the kernel lets go of it)."""
    try:
        with open(data + LOCK_SUFFIX, encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
    except OSError:
        pass
    return False


def _choices(instances: list[Instance]) -> str:
    return (", ".join(f"--data {i.data} ({i.url})" for i in instances)
            + "; pick one with --data DIR, or YKBUS_NATS=URL (or --nats URL)")


def _where_up_is() -> str:
    """Where the NATS of the `ykbus up` running is, for a command given another URL."""
    instances = running()
    if len(instances) == 1:
        return f"The `ykbus up` running on {instances[0].data} has its NATS at {instances[0].url}"
    return "Its NATS URL is on its first lines (--nats URL), or --data DIR finds it"


async def _listens(servers: list[str]) -> bool:
    """Whether one of `servers` takes a TCP connection within a second."""
    import anyio

    for server in servers:
        where = urlsplit(server if "://" in server else f"nats://{server}")
        try:
            with anyio.fail_after(1):
                stream = await anyio.connect_tcp(where.hostname or "127.0.0.1", where.port or DEFAULT_PORT)
        except (OSError, TimeoutError, ValueError):
            continue
        await stream.aclose()
        return True
    return False


CONNECT_WITHIN_S = 3.5  # a command says the server does not answer within 5 s of its start


class NatsUnreachable(Exception):
    """No NATS server answered at the URL in time; the text names the URL and the last error."""


class NatsNotChosen(NatsUnreachable):
    """No URL given and none to take: several `ykbus up` run, or none on the `--data` given.
    The text names the running ones and how to pick one; a command reports it as it reports
    an unreachable server: one line, exit code 2."""


NATS_SCHEMES = ("nats", "tls", "ws", "wss")  # what nats-py connects to


def server_urls(url: str) -> list[str]:
    """The servers of `url`: one URL, or several separated by commas (the members of a NATS
    cluster; the connection moves to another when one goes away)."""
    return [u.strip() for u in url.split(",") if u.strip()]


async def connect(url: str, *, within: float = CONNECT_WITHIN_S, **options: Any) -> Any:
    """A nats-py connection to `url`, or NatsUnreachable after `within` seconds.

    nats-py retries a first connection forever when reconnects are on (every service here
    keeps them on, to ride out a server restart) and reports each failure to its error
    callback, by default with a traceback. Until connected, failures are only remembered
    here and the last one is named in the error; once connected, `error_cb` (if given) gets
    them as before (and `disconnected_cb` its disconnections)."""
    import anyio
    from nats.aio.client import Client

    given_error_cb = options.pop("error_cb", None)
    connected = False
    last: list[BaseException] = []
    servers = server_urls(url)
    for server in servers:  # (nats-py reads `http://host:8222` as a host named `http`: "Name or service not known")
        scheme = server.partition("://")[0].lower() if "://" in server else "nats"
        if scheme not in NATS_SCHEMES:
            raise NatsUnreachable(f"{server}: not a NATS URL (expected nats://HOST:PORT, or tls://, ws://, wss://)")
    once = options.get("allow_reconnect") is False  # a command asking once: a refusal by each server is the answer
    refusing = anyio.CancelScope()  # cancelled once every server has refused such a command
    refusals = 0

    async def error_cb(exc: Exception) -> None:
        nonlocal refusals
        if connected:
            if given_error_cb is not None:
                await given_error_cb(exc)
        else:
            last[:] = [exc]
            refusals += isinstance(exc, ConnectionRefusedError)
            if once and refusals >= len(servers):
                refusing.cancel()

    given_disconnected_cb = options.pop("disconnected_cb", None)

    async def disconnected_cb() -> None:
        if connected and given_disconnected_cb is not None:
            await given_disconnected_cb()

    nc = Client()
    options.setdefault("connect_timeout", min(2.0, within))
    try:
        with anyio.fail_after(within), refusing:
            await nc.connect(servers=servers, error_cb=error_cb, disconnected_cb=disconnected_cb, **options)
        if refusing.cancelled_caught:
            raise ConnectionRefusedError(str(last[0]) if last else "connection refused")
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            try:
                await nc.close()
            except Exception:  # noqa: BLE001 - closing what never opened
                pass
        if not isinstance(exc, Exception):
            raise
        reason = last[0] if last and isinstance(exc, TimeoutError) else exc
        text = str(reason) or type(reason).__name__
        if isinstance(exc, TimeoutError) and all(isinstance(e, TimeoutError) for e in last) \
                and await _listens(servers):  # a connection taken, no greeting (not a host that never answers)
            text = (f"no answer within {within:g} s; something listens there but does not speak NATS (a NATS server "
                    "greets first): an HTTP port, such as `ykbus up`'s web UI? " + _where_up_is())
        elif isinstance(exc, TimeoutError):
            text = f"{text} (no answer within {within:g} s)" if last else f"no answer within {within:g} s"
        if "authorization" in text.lower():
            text += " (a secured server: this connection needs an identity, e.g. --nats-secrets FILE)"
        elif isinstance(reason, ConnectionRefusedError) or "connect call failed" in text.lower():
            text += "; nothing listens there, `make run` (ykbus up) starts one, --nats URL or --data DIR names another"
        raise NatsUnreachable(f"cannot reach NATS at {url}: {text}") from None
    connected = True
    return nc


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside `exc`, exception groups flattened (a command reports the first
    `NatsUnreachable` of any of its tasks as one line)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def subscribed(nc: Any) -> None:
    """Return once the server routes to every subscription `nc` has made so far.

    `flush()` alone does not promise it: nats-py (2.16) writes flush's PING straight to the
    socket, ahead of the SUB commands its flusher task has not written yet, so the PONG can
    come back before the server has read them, and a request sent on another connection at
    once finds no responders (CI saw it). The flusher task, woken by each subscribe, runs
    before the first PONG can be read; a second PING follows what it wrote, and the server
    answers a connection's commands in order."""
    await nc.flush()
    await nc.flush()
