"""The dry run's request (core/dryrun.py): its bounds, its error and its parse, checked
before anything is read. A module of its own, left out of the compiled core: `Request` is
a msgspec Struct, which mypyc does not compile (docs/architecture.md, "The compiled core").
"""

from __future__ import annotations

import difflib
from typing import Any

import msgspec
import msgspec.inspect as mi

from ykbus import limits
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


_REQUEST: Any = mi.type_info(Request)  # its fields, for the names a request may use


def parse(obj: Any) -> Request:
    """The request, checked: DryRunError naming the field and the reason."""
    if not isinstance(obj, dict):
        raise DryRunError("the request must be an object: {\"application\": {...}, \"asks\": [...]}")
    asks = obj.get("asks", [])
    if isinstance(asks, list) and len(asks) > MAX_ASKS:
        raise DryRunError(f"asks: {len(asks)} asks, at most {MAX_ASKS}")
    unknown = _unknown_field(obj, _REQUEST, "")
    if unknown:
        raise DryRunError(unknown)
    application = obj.get("application")
    if isinstance(asks, list) and isinstance(application, dict) and isinstance(application.get("applicationID"), str):
        obj = {**obj, "asks": [{"applicationID": application["applicationID"], **a} if isinstance(a, dict) else a
                               for a in asks]}  # an ask may leave out the application the request names
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
    app_id = request.application.applicationID
    for i, ask in enumerate(request.asks):
        if ask.applicationID and ask.applicationID != app_id:
            raise DryRunError(f"asks[{i}].applicationID: {limits.quoted(ask.applicationID)}, while the application is "
                              f"{limits.quoted(app_id)} (leave it out, or the same)")
        if not resources_of(ask.resourceAsk):
            raise DryRunError(f"asks[{i}].resourceAsk: empty: an ask needs at least one quantity above zero")
        total += max(1, ask.maxAllocations)
        if total > MAX_MEMBERS:
            raise DryRunError(f"asks[{i}].maxAllocations: {total} allocations asked in all, at most {MAX_MEMBERS}")
    if not request.asks and request.application.placeholderAsk is None:
        raise DryRunError("asks: none, and the application has no placeholderAsk: nothing to place")
    return request


def _unknown_field(obj: Any, t: Any, path: str, depth: int = 0) -> str:
    """The first field of `obj` its type (a msgspec.inspect type) does not name, as an error
    naming it ("" for none). The SI's messages take unknown fields, as a newer RM's; a dry
    run is written by hand, and a misspelt field (`maxAllocation`) would change the question."""
    if depth > 8:  # the request's types nest 5 deep; what is deeper is the decoder's to refuse
        return ""
    if isinstance(t, mi.UnionType):
        return next((found for found in (_unknown_field(obj, u, path, depth) for u in t.types) if found), "")
    if isinstance(t, mi.StructType) and isinstance(obj, dict):
        fields = {f.encode_name: f.type for f in t.fields}
        for key, value in obj.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in fields:
                near = difflib.get_close_matches(str(key), list(fields), n=1)
                hint = f"did you mean {near[0]}?" if near else f"the fields: {', '.join(fields)}"
                return f"{limits.shorten(where, limits.MAX_QUOTED_CHARS)}: unknown field ({hint})"
            found = _unknown_field(value, fields[key], where, depth + 1)
            if found:
                return found
    elif isinstance(t, mi.ListType) and isinstance(obj, list):
        for i, item in enumerate(obj):
            found = _unknown_field(item, t.item_type, f"{path}[{i}]", depth + 1)
            if found:
                return found
    elif isinstance(t, mi.DictType) and isinstance(obj, dict):
        for key, value in obj.items():
            found = _unknown_field(value, t.value_type, f"{path}.{key}", depth + 1)
            if found:
                return found
    return ""
