"""The dry run's request (core/dryrun.py): its bounds, its error and its parse, checked
before anything is read. A module of its own, left out of the compiled core: `Request` is
a msgspec Struct, which mypyc does not compile (docs/architecture.md, "The compiled core").
"""

from __future__ import annotations

from typing import Any

import msgspec

from ykbus.core.resources import resources_of
from ykbus.si import messages as m
from ykbus.si.codec import name_keys

MAX_REQUEST_BYTES = 1 << 20  # a request file or body
MAX_ASKS = 1000  # asks in one request
MAX_MEMBERS = 10_000  # allocations asked in all


class DryRunError(ValueError):
    """A request the dry run cannot answer: the field and the reason."""


class Request(msgspec.Struct):
    application: m.AddApplicationRequest
    asks: list[m.AllocationAsk] = []
    rm: str = ""


def parse(obj: Any) -> Request:
    """The request, checked: DryRunError naming the field and the reason."""
    if not isinstance(obj, dict):
        raise DryRunError("the request must be an object: {\"application\": {...}, \"asks\": [...]}")
    asks = obj.get("asks", [])
    if isinstance(asks, list) and len(asks) > MAX_ASKS:
        raise DryRunError(f"asks: {len(asks)} asks, at most {MAX_ASKS}")
    try:
        request = msgspec.convert(obj, Request, strict=False)
    except msgspec.ValidationError as exc:  # `Expected int, got str - at $.asks[0].maxAllocations`: field first
        try:
            text = name_keys(str(exc), obj)  # a map's key named, not `[...]`
        except RecursionError:
            text = str(exc)
        if " - at a key of `" in text:  # `... - at a key of `$.asks[0].tags`: 'the key'`
            what, _, where = text.rpartition(" - at a key of `")
            where, _, key = where.partition("`: ")
            raise DryRunError(f"{where.removeprefix('$.')}: {what}, for the key {key}") from None
        what, _, where = text.rpartition(" - at `")
        if not what:  # at the top: `Object missing required field application`
            missing = text.partition("field `")[2].rstrip("`")
            raise DryRunError(f"{missing}: required" if missing else f"request: {text}") from None
        raise DryRunError(f"{where.rstrip('`').removeprefix('$.')}: {what}") from None
    total = 0
    for i, ask in enumerate(request.asks):
        if not resources_of(ask.resourceAsk):
            raise DryRunError(f"asks[{i}].resourceAsk: empty: an ask needs at least one quantity above zero")
        total += max(1, ask.maxAllocations)
        if total > MAX_MEMBERS:
            raise DryRunError(f"asks[{i}].maxAllocations: {total} allocations asked in all, at most {MAX_MEMBERS}")
    if not request.asks and request.application.placeholderAsk is None:
        raise DryRunError("asks: none, and the application has no placeholderAsk: nothing to place")
    return request
