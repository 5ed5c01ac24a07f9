"""The wire messages are never tracked by the garbage collector (si/messages.py, rule 5):
an entry's thousands of decoded asks, and the allocations it sends, live until the entry
ends, and tracked they made the collector run twice as often. That is safe only while no
message can be in a reference cycle: every field holds only other messages, strings,
numbers, enums, or lists and maps of those, so nothing in a message can refer back to it."""

from __future__ import annotations

import enum
import gc
import types
import typing

import msgspec

from ykbus.core.core import Core
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.si import codec
from ykbus.si import messages as m
from ykbus.yamlload import load_yaml

STRUCTS = [v for v in vars(m).values()
           if isinstance(v, type) and issubclass(v, msgspec.Struct) and v.__module__ == m.__name__]
LEAVES = (str, int, bool, float, bytes, type(None))


def _acyclic(tp: object, seen: set[object]) -> list[str]:
    """What in type `tp` could hold an object that is neither a message nor a plain value."""
    if tp in seen:
        return []
    seen.add(tp)
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _acyclic(typing.get_args(tp)[0], seen)
    if origin in (list, dict, typing.Union, types.UnionType, tuple):
        return [bad for arg in typing.get_args(tp) for bad in _acyclic(arg, seen)]
    if isinstance(tp, type) and (issubclass(tp, LEAVES) or issubclass(tp, enum.Enum)):
        return []
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        hints = typing.get_type_hints(tp, include_extras=True)
        return [f"{tp.__name__}.{name}: {bad}" for name, hint in hints.items() for bad in _acyclic(hint, seen)]
    if typing.get_origin(tp) is typing.Literal:
        return []
    return [repr(tp)]


def test_no_message_can_hold_anything_but_messages_and_plain_values() -> None:
    assert len(STRUCTS) > 30
    found = [bad for s in STRUCTS for bad in _acyclic(s, set())]
    assert found == []


def test_every_message_type_is_untracked() -> None:
    tracked = [s.__name__ for s in STRUCTS if s.__struct_config__.gc]
    assert tracked == []


def test_decoded_asks_and_the_allocations_sent_are_not_tracked() -> None:
    core = Core(load_yaml=load_yaml)
    log = LogBuilder("rm-1")
    core.apply(log.register(""))
    core.apply(log.nodes(node("n0", memory=8 * 2**30, vcore=8000)))
    core.apply(log.apps(app("a1")))
    entry = log.asks(*[ask(f"k{i}", "a1", memory=2**20, vcore=10) for i in range(3)])
    request = codec.decode_input(entry.kind, entry.msg, entry.encoding)
    assert isinstance(request, codec.DecodedAllocationRequest)
    asks = [a for a in request.asks if isinstance(a, m.AllocationAsk)]
    assert len(asks) == 3
    assert not any(gc.is_tracked(a) or gc.is_tracked(a.resourceAsk) for a in asks)
    outputs = core.apply(entry)
    sent = [a for o in outputs if o.kind == "alloc" for a in o.msg.new]
    assert [a.allocationKey for a in sent] == ["k0", "k1", "k2"]
    assert not any(gc.is_tracked(a) or gc.is_tracked(a.resourcePerAlloc) for a in sent)
