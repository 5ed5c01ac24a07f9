"""The read API: a projection of the core's state, over NATS (`yk.v1.api.<verb>`, answered
by the service) and over HTTP (`GET /api/<verb>`, served here).

The projection is built from `Core.dump` (plain values, never live objects), only the
sections a verb needs. Over HTTP, int64 quantities and timestamps are decimal strings (the
protobuf JSON mapping) unless `?int64=number`; with a token configured every request needs
`Authorization: Bearer <token>`.
"""

from __future__ import annotations

import hmac
import json
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from ykbus.core import Core
from ykbus.si import compat

log = logging.getLogger("ykbus.core")

# verb -> the dump section it needs (None: counts only)
SECTIONS: dict[str, str | None] = {"partitions": None, "queues": "queues", "applications": "applications",
                                   "nodes": "nodes", "terminated": "terminated"}


def read(core: Core, stats: dict[str, int], verb: str, request: dict[str, Any]) -> dict[str, Any]:
    """The answer to `verb` (filtered by `request`'s `rm` and `partition`); ValueError for an
    unknown verb."""
    if verb == "health":
        # allocations: decided since the log began (core state, so a restart does not reset it)
        return {"status": "ok", "lastSeq": core.last_seq, "stats": {**stats, "allocations": core.allocations_made},
                "rms": {r.id: r.state.value for r in core.rms.values()}}
    if verb == "state":
        return core.dump()
    if verb not in SECTIONS:
        raise ValueError(f"unknown verb {verb!r}: expected health, state, {', '.join(SECTIONS)}")
    wanted = SECTIONS[verb]
    dump = core.dump(sections=(wanted,) if wanted else ())
    want_rm, want_part = request.get("rm"), request.get("partition")
    out: dict[str, Any] = {}
    for rm_id, rm in dump["rms"].items():
        if want_rm and rm_id != want_rm:
            continue
        for name, part in rm["partitions"].items():
            if want_part and name != want_part:
                continue
            if wanted is None:
                value = {"nodeSortPolicy": part["nodeSortPolicy"], "total": part["total"], **part["counts"],
                         "summary": part["summary"]}
            else:
                value = part[wanted]
            out.setdefault(rm_id, {})[name] = value
    return {verb: out}


# The read projection's int64 values that the HTTP API writes as decimal strings (the
# protobuf JSON mapping; `?int64=number` for plain numbers): every quantity of a resource
# map under these keys, and these timestamps (Unix ns). Counts, priorities and sequences
# stay numbers.
HTTP_RESOURCE_KEYS = frozenset({"total", "capacity", "occupied", "allocated", "pending", "resource",
                                "guaranteed", "max", "maxResources"})
HTTP_TIMESTAMP_KEYS = frozenset({"now", "drainingSince"})


def http_int64_strings(obj: Any) -> Any:
    """A read API answer with its quantities and timestamps as decimal strings."""
    if isinstance(obj, list):
        return [http_int64_strings(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k in HTTP_RESOURCE_KEYS and isinstance(v, dict) and all(type(q) is int for q in v.values()):
            out[k] = {name: str(q) for name, q in v.items()}
        elif k in HTTP_TIMESTAMP_KEYS and type(v) is int:
            out[k] = str(v)
        else:
            out[k] = http_int64_strings(v)
    return out


class HttpReadApi:
    """GET /api/<verb>[?rm=..&partition=..&int64=..]: the read API over HTTP/1.1 (one request
    per connection, JSON bodies), for tools that do not speak NATS."""

    def __init__(self, read: Callable[[str, dict[str, Any]], dict[str, Any]], host: str, port: int,
                 token: str | None) -> None:
        self._read = read
        self.host, self._port, self._token = host, port, token
        self.port = 0  # the port once listening
        self.started = anyio.Event()

    async def serve(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self._port)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        log.info("http read api listening", extra={"fields": {"host": self.host, "port": self.port}})
        task_status.started()
        self.started.set()
        await listener.serve(self._request)

    async def _request(self, stream: Any) -> None:
        try:
            await self._exchange(stream)
        except Exception as exc:  # noqa: BLE001 - a bad client never stops the service
            log.debug("http request failed", extra={"fields": {"error": repr(exc)}})

    async def _exchange(self, stream: Any) -> None:
        async with stream:
            try:
                head = b""
                with anyio.fail_after(5):
                    while b"\r\n\r\n" not in head and len(head) < 8192:
                        head += await stream.receive(4096)
                lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                url = urllib.parse.urlsplit(target)
                query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
            except Exception:  # noqa: BLE001 - a request we cannot read gets a 400
                await _respond(stream, "400 Bad Request", {"error": "bad request"})
                return
            status, body = "200 OK", {}
            if not self._authorized(headers.get("authorization", "")):
                status, body = "401 Unauthorized", {"error": "expected the header `Authorization: Bearer <api.token>`"}
            elif method != "GET":
                status, body = "405 Method Not Allowed", {"error": "only GET: the HTTP API is read-only"}
            elif not url.path.startswith("/api/"):
                status, body = "404 Not Found", {"error": "expected /api/<verb>"}
            elif query.get("int64", "string") not in compat.INT64_MODES:
                status, body = "400 Bad Request", {"error": f"int64 {query['int64']!r}: expected string or number"}
            else:
                try:
                    body = self._read(url.path[len("/api/"):], query)
                except (ValueError, KeyError) as exc:
                    status, body = "404 Not Found", {"error": str(exc)}
                else:
                    if query.get("int64", "string") == "string":
                        body = http_int64_strings(body)
            await _respond(stream, status, body)

    def _authorized(self, authorization: str) -> bool:
        """Without a token, everyone (the API is on loopback then); with it, the bearer of
        that token, compared in constant time."""
        if not self._token:
            return True
        scheme, _, given = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token.encode())


async def _respond(stream: Any, status: str, body: dict[str, Any]) -> None:
    data = json.dumps(body, default=str).encode()
    challenge = 'WWW-Authenticate: Bearer realm="ykbus"\r\n' if status.startswith("401") else ""
    await stream.send(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{challenge}"
                      f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
