"""The read API: a projection of the core's state, over NATS (`yk.v1.api.<verb>`, answered
by the service) and over HTTP (`GET /api/<verb>`, served here by aiohttp).

The projection is built from `Core.dump` (plain values, never live objects), only the
sections a verb needs. Over HTTP, int64 quantities and timestamps are decimal strings (the
protobuf JSON mapping) unless `?int64=number`; with a token configured every request needs
`Authorization: Bearer <token>`, or the cookie a browser gets by opening any page once with
`?token=<token>` (it cannot send the header; the cookie is HttpOnly and SameSite=Strict).
`GET /api/timeline` is HTTP's alone: the web UI's timeline, counts of events per bin from
the event feed's history (bus/eventfeed.py, rest/events.py `Histogram`), not the core's state.
"""

from __future__ import annotations

import gzip
import hmac
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import anyio
import nats.errors
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from ykbus import limits
from ykbus import web as web_ui
from ykbus.bus.eventfeed import EventFeed
from ykbus.bus.live import LiveCore
from ykbus.core import Core
from ykbus.core.dryrun import answer_steps, step, would_fit
from ykbus.core.lifecycle import AppState
from ykbus.core.model import full_path
from ykbus.core.projection import Where
from ykbus.rest import events, metrics, router
from ykbus.rest.metrics import Metrics
from ykbus.rest.router import RestState
from ykbus.si import compat

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")  # a "%" that escapes no byte: Go's url parsing refuses it

log = logging.getLogger("ykbus.core")

VALIDATE_CONF = "/ws/v1/validate-conf"  # (parses what it is sent, reads no state)


# The web UI's pages run their own scripts only, load from this server only, and are framed by
# no other site: a string an RM sends that slipped past the UI's escaping would run nothing
# (a security review found one, a resource's name in the heat map's attribute)
UI_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


class _ClientMistakes(logging.Filter):
    """A request that is not HTTP (a bad line, a header without a colon, one too long) is
    answered 400 by aiohttp and, as Go's server, not written to the operator's log as an
    error with a traceback: one line at debug. A failure of ours keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.exc_info, record.exc_text = None, None
            record.msg, record.args = "bad HTTP request: %s", (str(exc)[:200],)
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return _HTTP_LOG.isEnabledFor(logging.DEBUG)
        return True


_HTTP_LOG = logging.getLogger("ykbus.http")  # the HTTP server's own errors
_HTTP_LOG.addFilter(_ClientMistakes())
MAX_DRY_RUN_BYTES = 1 << 20  # a dry run's request body
COOKIE = "ykbus_token"  # what a browser holds once it opened a page with ?token= (HttpReadApi._let_in)

WOULD_FIT = "wouldfit"  # the dry run: over NATS, and POST /api/wouldfit (its request is a body)
# verb -> the dump section it needs (None: counts only)
SECTIONS: dict[str, str | None] = {"partitions": None, "queues": "queues", "applications": "applications",
                                   "nodes": "nodes", "terminated": "terminated", "allocations": "allocations",
                                   "topology": "topology"}


def read(core: Core, stats: dict[str, int], verb: str, request: dict[str, Any]) -> dict[str, Any]:
    """The answer to `verb` (filtered by `request`'s `rm` and `partition`, and, for
    `applications` and `terminated`, `app`: one application's id); ValueError for an
    unknown verb."""
    if verb == "health":
        # allocations: decided since the log began (core state, so a restart does not reset it)
        return {"status": "ok", "lastSeq": core.last_seq, "stats": {**stats, "allocations": core.allocations_made},
                "rms": {r.id: r.state.value for r in core.rms.values()}}
    if verb == "state":
        return core.dump()
    if verb == WOULD_FIT:  # a dry run of a job on the state as it is (core/dryrun.py): DryRunError is a ValueError
        return {WOULD_FIT: would_fit(core, request)}
    if verb not in SECTIONS:
        raise ValueError(f"unknown verb {verb!r}: expected health, state, {WOULD_FIT}, {', '.join(SECTIONS)}")
    wanted = SECTIONS[verb]
    for field in ("rm", "partition", "app", "queue", "state"):
        value = request.get(field)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{field}: expected a string (an id), got {type(value).__name__}")
    # (the RM and partition asked for are all the projection holds: `where` keeps to them)
    dump = core.dump(sections=(wanted,) if wanted else (), app=request.get("app") or None, where=where_of(request))
    out: dict[str, Any] = {}
    for rm_id, rm in dump["rms"].items():
        for name, part in rm["partitions"].items():
            if wanted is None:
                value = {"nodeSortPolicy": part["nodeSortPolicy"], "total": part["total"], **part["counts"],
                         "summary": part["summary"]}
            else:
                value = part[wanted]
            out.setdefault(rm_id, {})[name] = value
    return {verb: out}


def where_of(request: dict[str, Any]) -> Where:
    """The read's `Where` (docs/protocol.md, "Read API"): `rm`, `partition`; of applications,
    `queue` (with those under it), `state` (an application state, any case) and `brief` (true,
    or "true" in an HTTP query); ValueError naming a field that is not one."""
    state, brief = request.get("state"), request.get("brief", False)
    if state and state.lower() not in {s.value.lower() for s in AppState}:
        raise ValueError(f"state: {limits.quoted(state)} is not an application state "
                         f"({', '.join(s.value for s in AppState)})")
    if brief in ("true", "false"):
        brief = brief == "true"
    if not isinstance(brief, bool):
        raise ValueError(f"brief: expected true or false, got {limits.quoted(str(brief))}")
    queue = request.get("queue")
    return Where(rm=request.get("rm") or None, partition=request.get("partition") or None, brief=brief,
                 state=state or None, queue=full_path(queue) if queue else None)  # ("": no filter)


async def would_fit_live(live: LiveCore, request: dict[str, Any]) -> dict[str, Any]:
    """The answer to `wouldfit` on the live core. On the writer, the dry run goes in slices of
    bounded work (core/dryrun.py `answer_steps`), the writer applying entries between them,
    as a metrics scrape is made; in a reader (`live.reads_first`), at once, on one state.
    `entriesBetween`: the entries applied between its slices (each part of the answer is of
    the state at the slice that read it). In a reader's turn in the middle of an entry
    (bus/live.py), the answer is of the state at that entry's pause point (`Step.between`):
    `entryInProgress` is its seq, `lastSeq` the entry before it. DryRunError (a ValueError)
    for a bad request."""
    during = live.applying
    steps = answer_steps(live.core, request)
    while True:
        answer = step(steps)
        if answer is not None:
            if during is not None:  # in a reader's turn, at a pause point of entry `during`
                answer["lastSeq"] = during - 1
                answer["entryInProgress"] = during
            answer["entriesBetween"] = live.applied() - answer["lastSeq"]
            return {WOULD_FIT: answer}
        await live.between_slices()


# The read projection's int64 values that the HTTP API writes as decimal strings (the
# protobuf JSON mapping; `?int64=number` for plain numbers): every quantity of a resource
# map under these keys, and these timestamps (Unix ns). Counts, priorities and sequences
# stay numbers.
HTTP_RESOURCE_KEYS = frozenset({"total", "capacity", "occupied", "allocated", "pending", "resource",
                                "guaranteed", "max", "maxResources", "free"})
HTTP_TIMESTAMP_KEYS = frozenset({"now", "drainingSince", "estimatedStart", "start", "end"})  # (the last two: a dry run's estimate)


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
    """GET /api/<verb>[?rm=..&partition=..&int64=..]: the read API over HTTP, for tools that do
    not speak NATS, served by aiohttp (docs/operations.md, "HTTP": why that library)."""

    def __init__(self, read: Callable[[str, dict[str, Any]], dict[str, Any]],
                 live: LiveCore, host: str, port: int,
                 token: str | None, rest: RestState | None = None, metrics: Metrics | None = None) -> None:
        self._read = read
        self._live = live  # the live core, for POST /api/wouldfit (`would_fit_live`)
        self.rest = rest  # YuniKorn's /ws/v1 (ykbus/rest/), None: not served
        self.metrics = metrics  # /ws/v1/metrics and /metrics (rest/metrics.py), None: not served
        self.events: EventFeed | None = None  # /ws/v1/events/* (bus/eventfeed.py), once the service has its streams
        self.streams = 0  # /ws/v1/events/stream answers open now
        self.host, self._port, self._token = host, port, token
        self.port = 0  # the port once listening
        self.started = anyio.Event()

    async def serve(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # at a stop, open answers (an event stream) get a second to finish, not aiohttp's 60
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0,
                               # (aiohttp's own 8,190 bytes a line refused a browser's cookies; its 128
                               # lines of that much are no bound a reader should rely on: ykbus.limits)
                               max_line_size=limits.MAX_HTTP_LINE_BYTES, max_field_size=limits.MAX_HTTP_LINE_BYTES,
                               max_headers=limits.MAX_HTTP_HEADERS, logger=_HTTP_LOG,
                               # a connection waiting for a request, its first included, is closed past it
                               keepalive_timeout=limits.MAX_HTTP_IDLE_SECONDS)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._port)
            await site.start()
            self.port = runner.addresses[0][1]
            log.info("http read api listening", extra={"fields": {"host": self.host, "port": self.port}})
            task_status.started()
            self.started.set()
            if self.events is not None:  # the timeline's history, counted while the feed is served
                try:
                    await self.events.count()
                except nats.errors.Error as exc:  # the history stops; everything else goes on
                    log.warning("the timeline's history stopped counting", extra={"fields": {"error": repr(exc)}})
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        if _BAD_ESCAPE.search(request.rel_url.raw_path):  # Go's server refuses such a request line, before any route
            return web.Response(status=400, body=b"400 Bad Request",
                                headers={"Content-Type": "text/plain; charset=utf-8", "Connection": "close"})
        if not self._authorized(request.headers.get("Authorization", ""), request.cookies.get(COOKIE, "")):
            if self._token and _same(request.query.get("token", ""), self._token):
                return self._let_in(request)
            why, challenge = "expected the header `Authorization: Bearer <api.token>`", 'Bearer realm="ykbus"'
            if request.path.startswith("/api/"):
                return _json(401, {"error": why}, {"WWW-Authenticate": challenge})
            return _answer(router.error(401, why), {"WWW-Authenticate": challenge})  # YuniKorn's error shape
        if request.method == "GET" and (request.path == "/" or request.path.startswith("/ui/")):
            found = web_ui.asset("index.html" if request.path == "/" else request.path[len("/ui/"):])
            if found is not None:
                return web.Response(status=200, body=found[1], headers={"Content-Type": found[0],
                                                                        "Cache-Control": "no-cache", **UI_HEADERS})
        if not request.path.startswith("/api/"):  # YuniKorn's routes, and its answers to every other path
            if self.rest is None:
                return _json(404, {"error": "expected /api/<verb>"})
            return await self._yunikorn(request, self.rest)
        if request.path == f"/api/{WOULD_FIT}":  # a dry run: reads, writes nothing
            if request.method != "POST":
                return _json(405, {"error": f"/api/{WOULD_FIT} is a POST of the job as JSON (docs/time.md, "
                                            "\"A dry run\")"}, {"Allow": "POST"})
            return await self._would_fit(request)  # (also in a reader's turn in the middle of an entry)
        await self._live.at_rest()  # every other answer: between entries (bus/live.py)
        if request.method != "GET":
            return _json(405, {"error": "only GET (and POST /api/wouldfit, a dry run): the HTTP API is read-only"},
                         {"Allow": "GET"})
        query = _query(request)
        if request.path == "/api/timeline":
            return self._timeline(query)
        if query.get("int64", "string") not in compat.INT64_MODES:
            return _json(400, {"error": f"int64 {query['int64']!r}: expected string or number"})
        try:
            body = self._read(request.path[len("/api/"):], query)
        except (ValueError, KeyError) as exc:
            return _json(404, {"error": str(exc)})
        return _json(200, http_int64_strings(body) if query.get("int64", "string") == "string" else body)

    async def _would_fit(self, request: web.Request) -> web.Response:
        """POST /api/wouldfit: the dry run of the JSON body (core/dryrun.py), 400 naming the
        field for a bad one."""
        if request.content_length is not None and request.content_length > MAX_DRY_RUN_BYTES:
            return _json(413, {"error": f"the request body is over {MAX_DRY_RUN_BYTES} bytes"})
        raw = await request.content.read(MAX_DRY_RUN_BYTES + 1)
        if len(raw) > MAX_DRY_RUN_BYTES:
            return _json(413, {"error": f"the request body is over {MAX_DRY_RUN_BYTES} bytes"})
        query = _query(request)
        try:
            try:
                asked = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                raise ValueError(f"the body is not JSON ({exc}): POST the request as JSON; "
                                 "`ykbus explain --would-fit FILE` reads YAML too") from None
            if isinstance(asked, dict) and "rm" in query:  # `?rm=`, as the read verbs take it; over the body's,
                asked["rm"] = query["rm"]  # as `ykbus explain --rm` is over the file's
            body = await would_fit_live(self._live, asked)
        except (ValueError, KeyError, RecursionError) as exc:
            return _json(400, {"error": str(exc)})
        return _json(200, http_int64_strings(body) if query.get("int64", "string") == "string" else body)

    def _timeline(self, query: dict[str, str]) -> web.Response:
        """GET /api/timeline?from=&to=&bins=: the counts of the timeline's kinds per bin over a
        window, from the event feed's history (rest/events.py `Histogram`); raw integers, Unix
        ms. 400 names the parameter that is wrong; 503 while the feed is not there yet."""
        if self.events is None:
            return _json(503, {"error": "the event feed is not ready yet (the core is starting)"})
        try:
            start, end, bins = events.timeline_query(query, time.time_ns() // 1_000_000)
        except events.BadQuery as exc:
            return _json(400, {"error": str(exc), "field": exc.field})
        return _json(200, self.events.histogram.counts(start, end, bins))

    async def _yunikorn(self, request: web.Request, rest: RestState) -> web.StreamResponse:
        """YuniKorn's routes: the event feed's and the metrics', then the router's; gzipped as
        YuniKorn's server gzips (`_gzipped`), but the event stream."""
        if request.path in ("/ws/v1/events/batch", "/ws/v1/events/stream") and request.method == "GET" \
                and self.events is not None:
            if request.path == "/ws/v1/events/stream":
                return await self._stream(request, self.events)
            answer = await self._batch(request, self.events)
        elif request.path in ("/ws/v1/metrics", "/metrics") and self.metrics is not None and request.method == "GET":
            answer = (200, metrics.CONTENT_TYPE, await self.metrics.scrape(self._live.between_slices), {})
        else:
            body = await request.read() if request.can_read_body else b""
            asked = router.Request(request.method, request.path, _first_query(request),
                                   request.headers.get("Accept", ""), body, request.rel_url.raw_query_string)
            if request.path == VALIDATE_CONF and request.method == "POST":
                # it reads no state, and a queue file of 1 MiB takes seconds to parse: off the loop, so
                # the writer goes on meanwhile (it held every entry for the whole parse)
                answer = await anyio.to_thread.run_sync(router.answer, rest, asked)
            else:
                answer = router.answer(rest, asked)
        return _answer(_gzipped(answer, request.headers.get("Accept-Encoding", "")))

    async def _batch(self, request: web.Request, feed: EventFeed) -> router.Answer:
        query = _first_query(request)
        try:
            count, start = events.count_of(query), events.start_of(query)
        except events.BadCount as exc:
            return router.error(400, str(exc))
        return 200, router.JSON_TYPE, router.go_json(await feed.batch(count, start)), dict(router.CORS)

    async def _stream(self, request: web.Request, feed: EventFeed) -> web.StreamResponse:
        query = _first_query(request)
        try:
            count = events.stream_count_of(query)
        except events.BadCount as exc:
            return _answer(router.error(400, str(exc)))
        if self.streams >= events.MAX_STREAMS:
            return _answer(router.error(503, f"too many event streams open ({events.MAX_STREAMS})"))
        response = web.StreamResponse(status=200, headers={**router.CORS, "Content-Type": router.JSON_TYPE})
        self.streams += 1
        try:
            await response.prepare(request)
            await response.write(router.go_json({"InstanceUUID": feed.instance}))
            async for event in feed.follow(count, query.get("rm") or None):  # `rm`: ykbus's, not YuniKorn's
                await response.write(router.go_json(event))
        except ConnectionResetError:  # the reader went away
            pass
        finally:
            self.streams -= 1
        return response

    def _authorized(self, authorization: str, cookie: str) -> bool:
        """Without a token, everyone (the API is on loopback then); with it, the bearer of
        that token, or a browser holding the cookie `_let_in` gave, compared in constant time."""
        if not self._token:
            return True
        scheme, _, given = authorization.partition(" ")
        return (scheme.lower() == "bearer" and _same(given.strip(), self._token)) or _same(cookie, self._cookie())

    def _cookie(self) -> str:
        """The cookie's value: derived from the token (the token itself is not stored in the
        browser; a new token ends every browser's access)."""
        assert self._token
        return hmac.new(self._token.encode(), b"ykbus web UI", "sha256").hexdigest()

    def _let_in(self, request: web.Request) -> web.Response:
        """A browser opened a page with the right `?token=`: the cookie, and the same page
        again without the token in its address (303). HttpOnly: no script reads it; SameSite
        Strict: no other site's page sends it."""
        rest = [(k, v) for k, v in request.query.items() if k != "token"]
        # this server's path, never another host's: as it came, still %-encoded, with no leading `/` or `\`
        # (`//host`, and `/%5Chost`, `/%09/host` decoded, a browser reads as another host: a review)
        where = "/" + request.rel_url.raw_path.lstrip("/\\").replace("\\", "%5C")
        response = web.Response(status=303, headers={"Location": where + ("?" + urlencode(rest) if rest else ""),
                                                     "Cache-Control": "no-store"})
        response.set_cookie(COOKIE, self._cookie(), path="/", httponly=True, samesite="Strict")
        return response


def _same(given: str, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def _query(request: web.Request) -> dict[str, str]:
    """The query's parameters, the last value of each (ykbus's /api)."""
    return {k: request.query.getall(k)[-1] for k in request.query}


def _first_query(request: web.Request) -> dict[str, str]:
    """The query's parameters, the first value of each (Go's `Query().Get`: YuniKorn's routes)."""
    out: dict[str, str] = {}
    for k, v in request.query.items():
        out.setdefault(k, v)
    return out


GZIP_MIN = 1400  # YuniKorn's minCompressionSize: a smaller body goes as it is


def accepts_gzip(accept_encoding: str) -> bool:
    """YuniKorn's clientAcceptsGzip: the first `gzip` token (any case) and not `;q=0`."""
    for token in accept_encoding.split(","):
        coding, _, params = token.strip().partition(";")
        if coding.strip().lower() == "gzip":
            return not params or params.strip() != "q=0"
    return False


def _gzipped(answer: router.Answer, accept_encoding: str) -> router.Answer:
    """`answer` gzipped (fastest level, `Vary: Accept-Encoding`) when the client takes gzip and
    the body is at least GZIP_MIN bytes, as YuniKorn's server does with every answer."""
    status, content_type, body, headers = answer
    if len(body) < GZIP_MIN or not accepts_gzip(accept_encoding):
        return answer
    return (status, content_type, gzip.compress(body, compresslevel=1, mtime=0),
            {**headers, "Content-Encoding": "gzip", "Vary": "Accept-Encoding"})


def _answer(answer: router.Answer, extra: dict[str, str] | None = None) -> web.Response:
    """A router's answer (status, content type, body, headers) as a response; no content type
    (OPTIONS) leaves the header out."""
    status, content_type, data, headers = answer
    response = web.Response(status=status, body=data, headers={**headers, **(extra or {})})
    if content_type:
        response.headers["Content-Type"] = content_type
    return response


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=json.dumps(body, default=str).encode(), content_type="application/json",
                        headers=headers)
