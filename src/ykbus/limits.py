"""Every named capacity of ykbus, in one place. Overflow is a rejection, never growth.

Each bound below is a setting: the environment variable `YKBUS_LIMIT_<NAME>` (a whole
number) replaces its default when the process starts. The defaults are far above what a
real RM sends; docs/reliability.md lists them with what happens past each. A bound can
change a decision (an input past it is rejected), so a replay reproduces a live run only
with the same values.
"""

from __future__ import annotations

from collections.abc import Mapping

from ykbus import LIMIT_OVERRIDES


def _setting(name: str, default: int) -> int:
    text = LIMIT_OVERRIDES.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SystemExit(f"YKBUS_LIMIT_{name}={text!r}: expected a whole number") from None
    if value < 1:
        raise SystemExit(f"YKBUS_LIMIT_{name}={text!r}: expected a number above 0")
    return value


# --- input messages: size and UTF-8 before anything is parsed; depth (docs/reliability.md) --
MAX_MESSAGE_BYTES = _setting("MESSAGE_BYTES", 16 * 1024 * 1024)  # one log entry body
MAX_DEPTH = _setting("DEPTH", 64)  # nesting of JSON arrays and objects, and of queue YAML (the SI needs 6)

# --- input messages: checked while decoding, each error names the field -----------------
MAX_ID_CHARS = _setting("ID_CHARS", 1024)  # identifiers: rmID, applicationID, allocationKey, nodeID, ...
MAX_TEXT_CHARS = _setting("TEXT_CHARS", 64 * 1024)  # other strings: tag and attribute values, messages
MAX_MAP_ENTRIES = _setting("MAP_ENTRIES", 1024)  # tags, attributes, resources, extraConfig
MAX_ITEMS = _setting("ITEMS", 100_000)  # items of one list (asks, nodes, releases, ...)
MAX_TIMEOUT_MS = _setting("TIMEOUT_MS", 10**12)  # executionTimeoutMilliSeconds (about 31 years)
# an ask as JSON: its allocation, which echoes its strings, must fit in one message (NATS's
# max_payload is 1 MiB by default; `ykbus up`'s 8 MiB)
MAX_ITEM_BYTES = _setting("ITEM_BYTES", 512 * 1024)

# --- queue configuration text (YAML) ------------------------------------------------------
MAX_CONFIG_BYTES = _setting("CONFIG_BYTES", 1024 * 1024)  # a queues.yaml text
MAX_YAML_ALIASES = _setting("YAML_ALIASES", 100)  # `*alias` references in one document
MAX_YAML_NODES = _setting("YAML_NODES", 200_000)  # scalars, lists and maps, aliases expanded
MAX_TOPOLOGY_LEVELS = _setting("TOPOLOGY_LEVELS", 8)  # a partition's `topology.levels` (docs/topology.md)
# An HTTP request's line and each of its header lines (a browser's cookies, a 9,000-byte
# application id), and how many header lines (a browser's and those proxies add: aiohttp's
# own count): at most 4 MiB together, where Go's server (YuniKorn's REST API) takes 1 MB
MAX_HTTP_LINE_BYTES = _setting("HTTP_LINE_BYTES", 32 * 1024)
MAX_HTTP_HEADERS = _setting("HTTP_HEADERS", 128)
# A connection with no request in progress (before its first, between two) is closed after
# this long: one that sends half a request, or nothing, holds a socket no longer (aiohttp's
# own is an hour; Go's server, YuniKorn's, has none unless told)
MAX_HTTP_IDLE_SECONDS = _setting("HTTP_IDLE_SECONDS", 60)

# --- work and answers ---------------------------------------------------------------------
MAX_ALLOCATIONS_PER_ENTRY = _setting("ALLOCATIONS_PER_ENTRY", 10_000)  # a pass stops there; the next entry goes on
MAX_REASON_CHARS = _setting("REASON_CHARS", 16 * 1024)  # a reason or event message, shortened past it
MAX_QUOTED_CHARS = 128  # an identifier quoted in a reason is shortened past this

# Core timers (nanoseconds), YuniKorn's defaults
COMPLETING_TIMEOUT_NS = 30 * 1_000_000_000  # Completing -> Completed
TERMINATED_TIMEOUT_NS = 3 * 24 * 3600 * 1_000_000_000  # Completed/Failed -> Expired, then forgotten
REJECTED_KEPT = 1000  # rejected applications a partition remembers for readers, the newest
# ended applications a partition remembers, each until TERMINATED_TIMEOUT_NS (about 2.6 KB
# each): past it the oldest expires at once (36 ended a second would hold 9 million, 24 GB)
TERMINATED_KEPT = _setting("TERMINATED_KEPT", 50_000)
INT64_MAX = 2**63 - 1  # the log's clock and every deadline stay below
INT64_MIN = -(2**63)


def shorten(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text` if it is at most `limit` characters, else its start and end around a note
    saying how much was cut: a reason always fits in an answer."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 16)
    head, tail = text[: keep * 3 // 4], text[-(keep // 4):]
    return f"{head}…[{len(text) - len(head) - len(tail)} characters cut]…{tail}"


def saturated(quantities: Mapping[str, int]) -> dict[str, int]:
    """A sum of quantities as the wire writes it: int64, each between its least and its
    largest (a sum of huge nodes or recovered allocations may pass it, and a node's room less
    what it recovered past its capacity go below; YuniKorn's sums saturate there)."""
    return {k: v if INT64_MIN <= v <= INT64_MAX else INT64_MAX if v > 0 else INT64_MIN for k, v in quantities.items()}


def quoted(ident: str) -> str:
    """An identifier as a reason quotes it: `repr`, shortened past MAX_QUOTED_CHARS."""
    return repr(shorten(ident, MAX_QUOTED_CHARS))
