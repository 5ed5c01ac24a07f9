"""Encoding and strict decoding of wire messages, JSON and MessagePack.

Decoding happens in two steps so that one bad item never costs its neighbours:
the envelope of a request is decoded with its item lists left raw, then each item is
decoded on its own. A bad item becomes a `BadItem` carrying the error (with its full path,
`$.asks[3].resourceAsk.resources.memory.value`) and whatever ids could be read from it,
so the core can answer with the matching rejection while applying the rest.

Encoders and decoders are built once, at import.
"""

from __future__ import annotations

import operator
import re
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta, Raw, field

from ykbus import limits
from ykbus.si import compat
from ykbus.si import messages as m

Encoding = Literal["json", "msgpack"]
ENCODINGS: tuple[str, ...] = ("json", "msgpack")
MSGPACK_CONTENT_TYPE = "application/msgpack"


class BadItem(msgspec.Struct, frozen=True):
    """An item of a request that did not decode: its path, the reason, the ids it named."""

    path: str
    error: str
    ids: dict[str, str]


class DecodeError(Exception):
    """The whole message could not be decoded; the text names the path and the reason."""


# --- envelopes: item lists stay raw ----------------------------------------------------


class _Env(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    pass


RawItems = Annotated[list[Raw], Meta(max_length=limits.MAX_ITEMS)]


class _ReleasesEnv(_Env):
    allocationsToRelease: RawItems = field(default_factory=list)
    allocationAsksToRelease: RawItems = field(default_factory=list)


class _AllocEnv(_Env):
    asks: RawItems = field(default_factory=list)
    releases: _ReleasesEnv | None = None
    rmID: m.Id = ""
    allocations: RawItems = field(default_factory=list)


class _AppEnv(_Env):
    new: RawItems = field(default_factory=list)
    remove: RawItems = field(default_factory=list)
    rmID: m.Id = ""


class _NodeEnv(_Env):
    nodes: RawItems = field(default_factory=list)
    rmID: m.Id = ""


# --- decoded requests, as the core receives them ---------------------------------------


class DecodedAllocationRequest(msgspec.Struct, frozen=True):
    rmID: str
    asks: list[m.AllocationAsk | BadItem]
    releases: list[m.AllocationRelease | BadItem]
    askReleases: list[m.AllocationAskRelease | BadItem]
    # SI 1.6 `allocations[i]`, translated into asks (ykbus.si.compat); answered in `rejectedAllocations`
    allocations: list[m.AllocationAsk | BadItem] = field(default_factory=list)


class DecodedApplicationRequest(msgspec.Struct, frozen=True):
    rmID: str
    new: list[m.AddApplicationRequest | BadItem]
    remove: list[m.RemoveApplicationRequest | BadItem]


class DecodedNodeRequest(msgspec.Struct, frozen=True):
    rmID: str
    nodes: list[m.NodeInfo | BadItem]


Decoded = (
    m.RegisterResourceManagerRequest
    | m.UpdateConfigurationRequest
    | m.UnregisterRequest
    | m.RMStateChange
    | DecodedAllocationRequest
    | DecodedApplicationRequest
    | DecodedNodeRequest
)

_ID_FIELDS = ("allocationKey", "applicationID", "nodeID", "UUID", "partitionName")
# an item's id fields, as JSON text, for an item that does not decode even loosely (a number of
# 5,000 digits in it): plain strings of at most MAX_QUOTED_CHARS, no escapes
_ID_TEXT = re.compile(rb'"(' + b"|".join(f.encode() for f in _ID_FIELDS) + rb')"\s*:\s*"([^"\\]{0,128})"')


def _ids_in_text(raw: bytes) -> dict[str, str]:
    """The ids a JSON item's text names at its top level (best effort: the first of each)."""
    ids: dict[str, str] = {}
    for name, value in _ID_TEXT.findall(raw[: 64 * 1024]):
        ids.setdefault(name.decode(), value.decode("utf-8", errors="replace"))
    return ids
_AT = re.compile(r" - at (a key of )?`\$")


_PATH = re.compile(r"`(\$[^`]*)`")
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\.\.\.)\]")
_KEY_AT = re.compile(r" - at `key` in `(\$[^`]*)`")
_quantity = msgspec.json.Decoder(m.Quantity, strict=False)
_text = msgspec.json.Decoder(m.Text)  # a map's value: a tag's, an attribute's (bounded as they are)
_key = msgspec.json.Decoder(m.Id)  # a map's key
_resource_name = msgspec.json.Decoder(m.NonEmptyStr)  # a key of a Resource's map
_enc = msgspec.json.Encoder()


_NONE: Final = object()  # no key found (None is a key MessagePack can carry)


def _key_text(key: Any) -> str:
    """A map key as a reason names it; MessagePack's may be other than strings."""
    if isinstance(key, str):
        return limits.quoted(key)
    return f"{limits.shorten(repr(key), limits.MAX_QUOTED_CHARS)} (a key must be a string)"


def name_keys(error: str, obj: Any) -> str:
    """Replace msgspec's `[...]` (a map key it does not name) by the key that is wrong, and
    its `` at `key` in `$.path` `` (a key that is wrong) by `` at a key of `$.path`: 'key' ``."""
    key_at = _KEY_AT.search(error)
    if key_at is not None:
        node = _at(obj, key_at.group(1))
        key = _resource_name if key_at.group(1).endswith(".resources") else _key
        bad = next((k for k in node if not isinstance(k, str) or not _decodes(key, k)), _NONE) \
            if isinstance(node, dict) else _NONE
        if bad is _NONE:
            return error
        return error.replace(key_at.group(0), f" - at a key of `{key_at.group(1)}`: {_key_text(bad)}")
    match = _PATH.search(error)
    if match is None or "[...]" not in match.group(1):
        return error
    path, node, out = match.group(1), obj, "$"
    for name, index in _SEGMENT.findall(path[1:]):
        if name or index != "...":
            node = _step(node, name, index)
            out += f".{name}" if name else f"[{index}]"
        elif isinstance(node, dict):
            check = _quantity if out.endswith(".resources") else _text
            bad = next((k for k, v in node.items() if not _decodes(check, v)), None)
            if bad is None:
                return error
            node = node[bad]
            out += f".{bad}"
        else:
            return error
    return error.replace(f"`{path}`", f"`{out}`")


def _at(obj: Any, path: str) -> Any:
    """What `path` (`$.resourceAsk.resources`, names and indexes) leads to in `obj`, None if
    nothing."""
    node = obj
    for name, index in _SEGMENT.findall(path[1:]):
        if not name and index == "...":
            return None
        node = _step(node, name, index)
    return node


def _step(node: Any, name: str, index: str) -> Any:
    """One segment of a path into a loosely decoded object: field `name`, or list `index`;
    None where there is none."""
    if name:
        return node.get(name) if isinstance(node, dict) else None
    return node[int(index)] if isinstance(node, list) and int(index) < len(node) else None


def _decodes(decoder: Any, value: Any) -> bool:
    """Whether `value` (loosely decoded) decodes as `decoder`'s type; a value JSON cannot
    hold (a MessagePack extension, bytes) does not."""
    try:
        decoder.decode(_enc.encode(value))
    except (msgspec.DecodeError, TypeError, ValueError):
        return False
    return True


def _with_path(error: str, prefix: str) -> str:
    """Rewrite a msgspec error so that its path starts at `prefix` (e.g. `$.asks[3]`)."""
    if _AT.search(error):
        return _AT.sub(lambda at: f" - at {at.group(1) or ''}`{prefix}", error, count=1)
    return f"{error} - at `{prefix}`"


class _Format:
    """Decoders for one encoding, built once."""

    def __init__(self, encoding: Encoding) -> None:
        mod: Any = msgspec.json if encoding == "json" else msgspec.msgpack
        self._mod = mod
        self.whole = {kind: mod.Decoder(t, strict=False) for kind, t in m.INPUT_TYPES.items()}
        self.env = {
            "alloc": mod.Decoder(_AllocEnv, strict=False),
            "app": mod.Decoder(_AppEnv, strict=False),
            "node": mod.Decoder(_NodeEnv, strict=False),
        }
        self.item = {
            t: mod.Decoder(t, strict=False)
            for t in (
                m.AllocationAsk, m.AllocationRelease, m.AllocationAskRelease,
                m.AddApplicationRequest, m.RemoveApplicationRequest, m.NodeInfo, m.Allocation,
            )
        }
        self.loose = mod.Decoder(dict[str, Any])

    def items(self, t: type, raws: list[Raw], path: str) -> list[Any]:
        out: list[Any] = []
        dec = self.item[t]
        for i, raw in enumerate(raws):
            where = f"{path}[{i}]"
            try:
                out.append(dec.decode(raw))
            except _UNDECODABLE as exc:
                obj = self._loose(raw)
                try:
                    error = name_keys(_reason(exc), obj)
                except Exception:  # noqa: BLE001 - naming the key is a nicety: the item is bad either way
                    error = _reason(exc)
                ids = {k: limits.shorten(obj[k], limits.MAX_QUOTED_CHARS)
                       for k in _ID_FIELDS if isinstance(obj.get(k), str)}
                if not obj and self._mod is msgspec.json:  # not even loosely decoded: its ids read as text
                    ids = _ids_in_text(bytes(memoryview(raw)))
                out.append(BadItem(where, _with_path(error, where), ids))
        return out

    def _loose(self, raw: Raw) -> dict[str, Any]:
        try:
            return self.loose.decode(raw)
        except _UNDECODABLE:
            return {}


_FORMATS: dict[str, _Format] = {e: _Format(e) for e in ENCODINGS}  # type: ignore[arg-type]

# What msgspec raises on hostile bytes: a DecodeError, or (strings that are not UTF-8, nesting
# past the interpreter's stack) a UnicodeDecodeError or RecursionError. All mean "does not decode".
_UNDECODABLE = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)
_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_PAIR = re.compile(rb"\(\)")


_LAX_INT = "Expected `int`, got `str`"  # a string that is not an integer's digits (those decode)
_NOT_UTF8 = "Invalid UTF-8 encoded string"  # msgspec 0.23 and later (before: a UnicodeDecodeError)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return f"nested deeper than the limit of {limits.MAX_DEPTH}"
    if isinstance(exc, UnicodeDecodeError):
        return "a string is not UTF-8"
    text = str(exc)
    if text.startswith(_LAX_INT):  # the wire takes an int64 as a string of its digits too (protobuf's JSON form)
        return "Expected `int` (a number, or a string of its decimal digits), got `str`" + text[len(_LAX_INT):]
    if text.startswith(_NOT_UTF8):  # `Invalid UTF-8 encoded string - at `$.asks[0]``: the same words
        return "a string is not UTF-8" + text[len(_NOT_UTF8):]
    return text


def check_size(data: bytes, encoding: str) -> None:
    """What is checked before a body is parsed at all (`ykbus.limits`): its size, and that
    a JSON body is UTF-8. Raises DecodeError naming the bound. O(1) for an ASCII body."""
    if len(data) > limits.MAX_MESSAGE_BYTES:
        raise DecodeError(f"body of {len(data)} bytes is over the limit of {limits.MAX_MESSAGE_BYTES}")
    if encoding == "json" and not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            hint = (f" (read as JSON: a MessagePack body needs the header Content-Type: {MSGPACK_CONTENT_TYPE})"
                    if exc.start == 0 else "")
            raise DecodeError(f"body is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}{hint}") from None


def check_depth(data: bytes, encoding: str) -> None:
    """Raises DecodeError when a JSON body nests arrays and objects deeper than MAX_DEPTH.
    Exact, and linear in the body's brackets; run on a body that did not decode whole (a
    body that decodes into the SI's types nests 6 levels, and the parser skips unknown
    content under its own recursion bound, so deep nesting always lands here)."""
    if encoding != "json" or len(data) <= limits.MAX_DEPTH or (
            data.count(b"{") + data.count(b"[") <= limits.MAX_DEPTH):
        return  # MessagePack: caught while decoding (RecursionError)
    # Only brackets outside strings are left, as parentheses; each pass removes the innermost
    # pairs, so MAX_DEPTH passes leave none unless something is nested deeper.
    brackets = _STRING.sub(b"", _ESCAPE.sub(b"", data).translate(_BRACKETS, _NOT_STRUCTURE))
    for _ in range(limits.MAX_DEPTH):
        brackets, removed = _PAIR.subn(b"", brackets)
        if not removed:
            return
    if _PAIR.search(brackets):
        raise DecodeError(f"nested deeper than the limit of {limits.MAX_DEPTH}")


def check_bounds(data: bytes, encoding: str) -> None:
    """Every bound of a body that can be checked without its types: size, UTF-8, depth."""
    check_size(data, encoding)
    check_depth(data, encoding)


def decode_input(kind: str, data: bytes, encoding: str = "json") -> Decoded:
    """Decode the body of an input log entry of `kind`.

    Raises DecodeError when the message as a whole is unusable (not JSON, not an object,
    a wrong type outside any item, an unknown kind or encoding). Bad items inside
    alloc/app/node requests do not raise: they come back as BadItem.
    """
    fmt = _FORMATS.get(encoding)
    if fmt is None:
        raise DecodeError(f"unknown encoding {encoding!r}: expected one of {', '.join(ENCODINGS)}")
    if kind not in m.INPUT_TYPES:
        raise DecodeError(f"unknown kind {kind!r}: expected one of {', '.join(m.INPUT_TYPES)}")
    check_size(data, encoding)
    if not data:
        raise DecodeError(f"the body is empty: expected {'a JSON object' if encoding == 'json' else 'a MessagePack map'} "
                          f"({m.INPUT_TYPES[kind].__name__}; {{}} for one of no fields)")
    # Fast path: a well-formed request decodes in one go; only a bad one is taken apart
    # item by item, so that its good items still apply and each bad one gets its reason.
    try:
        return as_decoded(kind, fmt.whole[kind].decode(data))
    except _UNDECODABLE:
        pass
    check_depth(data, encoding)
    try:
        if kind == "alloc":
            a = fmt.env["alloc"].decode(data)
            rel = a.releases or _ReleasesEnv()
            return DecodedAllocationRequest(
                rmID=a.rmID,
                asks=fmt.items(m.AllocationAsk, a.asks, "$.asks"),
                releases=_compat(fmt.items(
                    m.AllocationRelease, rel.allocationsToRelease, "$.releases.allocationsToRelease"
                ), "$.releases.allocationsToRelease", compat.release_with_uuid),
                askReleases=fmt.items(
                    m.AllocationAskRelease,
                    rel.allocationAsksToRelease,
                    "$.releases.allocationAsksToRelease",
                ),
                allocations=_compat(fmt.items(m.Allocation, a.allocations, "$.allocations"), "$.allocations",
                                    compat.allocation_to_ask),
            )
        if kind == "app":
            p = fmt.env["app"].decode(data)
            return DecodedApplicationRequest(
                rmID=p.rmID,
                new=fmt.items(m.AddApplicationRequest, p.new, "$.new"),
                remove=fmt.items(m.RemoveApplicationRequest, p.remove, "$.remove"),
            )
        if kind == "node":
            n = fmt.env["node"].decode(data)
            return DecodedNodeRequest(rmID=n.rmID, nodes=_compat(fmt.items(m.NodeInfo, n.nodes, "$.nodes"),
                                                                 "$.nodes", compat.node_with_uuids))
        return fmt.whole[kind].decode(data)
    except _UNDECODABLE as exc:
        hint = ""
        if encoding == "msgpack" and data.lstrip()[:1] in (b"{", b"["):  # (in MessagePack, a small int)
            hint = (" (read as MessagePack, as its Content-Type header said: the body looks like JSON, "
                    "which is read when the header is left out)")
        raise DecodeError(_reason(exc) + hint) from None


def as_decoded(kind: str, msg: Any) -> Decoded:
    """The decoded form of a whole, typed request: what `decode_input` gives for its bytes.
    Lets an in-process caller hand the core messages without serialising them."""
    if kind == "alloc":
        rel = msg.releases or m.AllocationReleasesRequest()
        return DecodedAllocationRequest(
            msg.rmID, list(msg.asks),
            _compat(rel.allocationsToRelease, "$.releases.allocationsToRelease", compat.release_with_uuid)
            if rel.allocationsToRelease else [],
            list(rel.allocationAsksToRelease),
            _compat(msg.allocations, "$.allocations", compat.allocation_to_ask) if msg.allocations else [])
    if kind == "app":
        return DecodedApplicationRequest(msg.rmID, list(msg.new), list(msg.remove))
    if kind == "node":
        return DecodedNodeRequest(msg.rmID, _compat(msg.nodes, "$.nodes", compat.node_with_uuids))
    return msg


_NEEDS: dict[Any, Any] = {  # which items a translation can change (the rest pass as they are)
    compat.release_with_uuid: operator.attrgetter("allocationID"),
    compat.node_with_uuids: lambda info: info.existingAllocations and any(
        a.allocationID for a in info.existingAllocations),
}


def _compat(items: list[Any], path: str, translate: Any) -> list[Any]:
    """Decoded items through a `ykbus.si.compat` translation (newer SI forms into the
    spring-2023 SI's); an item it refuses becomes a BadItem with the reason and its ids."""
    if not items:
        return items
    needs = _NEEDS.get(translate)
    out: list[Any] = []
    for i, item in enumerate(items):
        if not isinstance(item, BadItem) and (needs is None or needs(item)):
            where = f"{path}[{i}]"
            fixed = translate(item, where)
            if isinstance(fixed, str):
                ids = {k: v for k in _ID_FIELDS if isinstance(v := getattr(item, k, None), str) and v}
                fixed = BadItem(where, fixed, ids)
            item = fixed
        out.append(item)
    return out


_WHOLE: dict[tuple[type, str], Any] = {}


def decode(t: type, data: bytes, encoding: str = "json") -> Any:
    """Decode one whole message of type `t` strictly (used by clients reading outputs);
    one decoder per (type, encoding), built on first use and reused."""
    decoder = _WHOLE.get((t, encoding))
    if decoder is None:
        mod: Any = msgspec.json if encoding == "json" else msgspec.msgpack
        decoder = _WHOLE[(t, encoding)] = mod.Decoder(t, strict=False)
    try:
        return decoder.decode(data)
    except _UNDECODABLE as exc:
        raise DecodeError(_reason(exc)) from None


_JSON_ENCODER = msgspec.json.Encoder()
_MSGPACK_ENCODER = msgspec.msgpack.Encoder()


def encode(msg: Any, encoding: str = "json") -> bytes:
    """Encode a message (or any msgspec-encodable value) as JSON or MessagePack."""
    if encoding == "msgpack":
        return _MSGPACK_ENCODER.encode(msg)
    return _JSON_ENCODER.encode(msg)
