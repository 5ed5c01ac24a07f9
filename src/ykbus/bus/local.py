"""Where a command finds the NATS server when it is not told: `$YKBUS_NATS`, else the URL
a running `ykbus up` wrote to `~/.ykbus/nats.url`, else `nats://127.0.0.1:4222`."""

from __future__ import annotations

import os
from typing import Any

DEFAULT_URL = "nats://127.0.0.1:4222"
FIND_URL = "$YKBUS_NATS, else the URL a running `ykbus up` wrote, else " + DEFAULT_URL
URL_FILE = os.path.join("~", ".ykbus", "nats.url")  # written by `ykbus up` while it runs


def default_url() -> str:
    env = os.environ.get("YKBUS_NATS")
    if env:
        return env
    try:
        with open(os.path.expanduser(URL_FILE), encoding="utf-8") as f:
            url = f.read().strip()
            if url:
                return url
    except OSError:
        pass
    return DEFAULT_URL


CONNECT_WITHIN_S = 3.5  # a command says the server does not answer within 5 s of its start


class NatsUnreachable(Exception):
    """No NATS server answered at the URL in time; the text names the URL and the last error."""


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

    async def error_cb(exc: Exception) -> None:
        if connected:
            if given_error_cb is not None:
                await given_error_cb(exc)
        else:
            last[:] = [exc]

    given_disconnected_cb = options.pop("disconnected_cb", None)

    async def disconnected_cb() -> None:
        if connected and given_disconnected_cb is not None:
            await given_disconnected_cb()

    nc = Client()
    options.setdefault("connect_timeout", min(2.0, within))
    try:
        with anyio.fail_after(within):
            await nc.connect(servers=server_urls(url), error_cb=error_cb, disconnected_cb=disconnected_cb, **options)
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
        if isinstance(exc, TimeoutError):
            text = f"{text} (no answer within {within:g} s)" if last else f"no answer within {within:g} s"
        if "authorization" in text.lower():
            text += " (a secured server: this connection needs an identity, e.g. --nats-secrets FILE)"
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
