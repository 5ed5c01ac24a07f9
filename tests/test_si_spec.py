"""The wire messages against the pinned SI spec (the seed): every `message X { ... }` of the
seed's proto blocks is a Struct here with every field, under the same name, with a
compatible type; every field ykbus has beyond the seed is a deliberate extension, listed
below. The committed JSON Schemas name the same properties."""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path

import msgspec
import pytest

from ykbus.si import compat
from ykbus.si import messages as m

ROOT = Path(__file__).parents[1]
# shared/ sits beside the repository (on development machines and in CI)
SEED = next((p for p in (Path(__file__).resolve().parents[2] / "shared" / "seeds" / "scheduler-interface-spec.txt",
                         Path("/work/shared/seeds/scheduler-interface-spec.txt")) if p.exists()),
            Path("../shared/seeds/scheduler-interface-spec.txt"))
SPEC_TEXT = SEED.read_text() if SEED.exists() else ""

# Fields ykbus adds to the seed's messages, on purpose (docs/protocol.md says why).
EXTENSIONS = {
    ("RegisterResourceManagerResponse", "error"),  # a failed registration is answered, not thrown
    # SI 1.4+ forms, translated or rejected at the edge (ykbus.si.compat)
    ("AllocationRequest", "allocations"),
    ("Allocation", "allocationID"),
    ("Allocation", "originator"),
    ("Allocation", "preemptionPolicy"),
    ("AllocationRelease", "allocationID"),
    ("AllocationResponse", "rejectedAllocations"),
}
EXTENSION_ENUM_VALUES = {("ActionFromRM", "CREATE_DRAIN", 6)}  # SI 1.6
# Seed enums nested in messages, and the names they have here.
ENUM_NAMES = {"NodeInfo.ActionFromRM": "ActionFromRM", "EventRecord.Type": "EventType",
              "EventRecord.ChangeType": "ChangeType",
              "UpdateContainerSchedulingStateRequest.SchedulingState": "SchedulingState",
              "TerminationType": "TerminationType"}

FIELD = re.compile(r"^(repeated\s+)?(map<\s*\w+\s*,\s*\w+\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
ENUM_VALUE = re.compile(r"^(\w+)\s*=\s*(\d+)\s*;")


def _blocks(text: str) -> tuple[dict[str, list[tuple[str, str, bool]]], dict[str, list[tuple[str, int]]]]:
    """The seed's messages (name -> [(type, field, repeated)]) and enums (qualified name ->
    [(value, number)]), read from its proto text: comments dropped, braces counted."""
    messages: dict[str, list[tuple[str, str, bool]]] = {}
    enums: dict[str, list[tuple[str, int]]] = {}
    stack: list[tuple[str, str]] = []  # (kind, qualified name); kind "other" for service, extend...
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        opened = re.match(r"^(message|enum)\s+(\w+)\s*\{", line)
        if opened:
            outer = [n for k, n in stack if k == "message"]
            name = f"{outer[-1]}.{opened.group(2)}" if outer and opened.group(1) == "enum" else opened.group(2)
            stack.append((opened.group(1), name))
            (messages if opened.group(1) == "message" else enums).setdefault(name, [])
            continue
        if line.endswith("{"):
            stack.append(("other", ""))
            continue
        if line.startswith("}"):
            if stack:
                stack.pop()
            continue
        if not stack or line.startswith("reserved"):
            continue
        kind, name = stack[-1]
        if kind == "message" and (f := FIELD.match(line)):
            messages[name].append((f.group(2).replace(" ", ""), f.group(3), bool(f.group(1))))
        elif kind == "enum" and (v := ENUM_VALUE.match(line)):
            enums[name].append((v.group(1), int(v.group(2))))
    return messages, enums


SPEC_MESSAGES, SPEC_ENUMS = _blocks(SPEC_TEXT)
pytestmark = pytest.mark.skipif(not SPEC_TEXT, reason=f"the seed spec is not at {SEED}")
STRUCTS = {t.__name__: t for t in m.ALL_MESSAGES}
SCALARS = {"string": msgspec.inspect.StrType, "bool": msgspec.inspect.BoolType,
           "int32": msgspec.inspect.IntType, "int64": msgspec.inspect.IntType}
INT_RANGES = {"int32": (m.INT32_MIN, m.INT32_MAX), "int64": (-(2**63), m.INT64_MAX)}


def _enum_type(proto_type: str, message: str) -> str | None:
    for qualified in (f"{message}.{proto_type}", proto_type):
        if qualified in ENUM_NAMES:
            return ENUM_NAMES[qualified]
    return None


def _mismatch(proto_type: str, info: msgspec.inspect.Type, message: str) -> str:
    """Why a Struct field's type does not carry the proto type ("" when it does)."""
    if isinstance(info, msgspec.inspect.UnionType):  # `X | None` (optional message), enum | number
        kinds = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        enum = _enum_type(proto_type, message)
        if enum is not None:
            names = [t.cls.__name__ for t in kinds if isinstance(t, msgspec.inspect.EnumType)]
            return "" if names == [enum] else f"expected enum {enum}, got {info}"
        return _mismatch(proto_type, kinds[0], message) if len(kinds) == 1 else f"unexpected union {info}"
    if proto_type.startswith("map<"):
        key, value = proto_type[4:-1].split(",")
        if not (isinstance(info, msgspec.inspect.DictType) and isinstance(info.key_type, msgspec.inspect.StrType)
                and key == "string"):
            return f"expected {proto_type}, got {info}"
        return _mismatch(value, info.value_type, message)
    if proto_type in SCALARS:
        if not isinstance(info, SCALARS[proto_type]):
            return f"expected {proto_type}, got {info}"
        if proto_type in INT_RANGES:
            lo, hi = INT_RANGES[proto_type]
            if (info.ge is not None and info.ge < lo) or (info.le is not None and info.le > hi):
                return f"{proto_type} range exceeded: {info}"
            if proto_type == "int32" and (info.ge is None or info.le is None):
                return f"int32 without bounds: {info}"  # a bigger number must not decode
        return ""
    enum = _enum_type(proto_type, message)
    if enum is not None:
        return "" if isinstance(info, msgspec.inspect.EnumType) and info.cls.__name__ == enum else f"expected {enum}"
    if isinstance(info, msgspec.inspect.StructType) and info.cls.__name__ == proto_type:
        return ""
    return f"expected message {proto_type}, got {info}"


def test_the_seed_is_parsed():
    assert len(SPEC_MESSAGES) >= 30 and "AllocationAsk" in SPEC_MESSAGES
    assert ("UUID", "string") in [(f, t) for t, f, _ in SPEC_MESSAGES["Allocation"]]
    assert SPEC_ENUMS["NodeInfo.ActionFromRM"][-1] == ("DRAIN_TO_SCHEDULABLE", 5)


@pytest.mark.parametrize("name", sorted(SPEC_MESSAGES))
def test_every_spec_field_is_carried_with_a_compatible_type(name):
    assert name in STRUCTS, f"message {name} of the seed has no Struct"
    info = msgspec.inspect.type_info(STRUCTS[name])
    fields = {f.name: f.type for f in info.fields}
    problems = []
    for proto_type, field, repeated in SPEC_MESSAGES[name]:
        if field not in fields:
            problems.append(f"{name}.{field}: missing")
            continue
        t = fields[field]
        if repeated:
            if not isinstance(t, msgspec.inspect.ListType):
                problems.append(f"{name}.{field}: expected a list")
                continue
            t = t.item_type
        if why := _mismatch(proto_type, t, name):
            problems.append(f"{name}.{field}: {why}")
    assert problems == []


def test_fields_beyond_the_seed_are_the_listed_extensions():
    extra = set()
    for name, spec_fields in SPEC_MESSAGES.items():
        names = {f for _, f, _ in spec_fields}
        extra |= {(name, f) for f in STRUCTS[name].__struct_fields__ if f not in names}
    assert extra == EXTENSIONS


def test_enums_have_the_seed_values_in_number_order():
    for qualified, values in SPEC_ENUMS.items():
        ours = list(getattr(m, ENUM_NAMES[qualified]))
        spec = [(v, n) for v, n in values]
        have = [(e.value, i) for i, e in enumerate(ours)]
        extra = {(ENUM_NAMES[qualified], v, n) for v, n in have if (v, n) not in spec}
        assert [x for x in have if x in spec] == sorted(spec, key=lambda x: x[1]), qualified
        assert extra <= EXTENSION_ENUM_VALUES, qualified


def test_committed_schemas_name_every_spec_field():
    for name, spec_fields in SPEC_MESSAGES.items():
        schema = json.loads((ROOT / "schemas" / f"{name}.json").read_text())
        props = schema["$defs"][name].get("properties", {})
        assert {f for _, f, _ in spec_fields} <= set(props), name


def test_int64_fields_of_outputs_are_exactly_those_compat_stringifies():
    """`compat.INT64_FIELDS` works by field name: in the output messages, those names must be
    the seed's int64 fields, and every int64 field must have one of them."""
    int64 = {f for fields in SPEC_MESSAGES.values() for t, f, _ in fields if t == "int64"}
    assert int64 == compat.INT64_FIELDS

    def walk(t: type, seen: set[type]) -> set[tuple[str, str, bool]]:
        if t in seen:
            return set()
        seen.add(t)
        out = set()
        for f in msgspec.structs.fields(t):
            is64 = (t.__name__, f.name, "int64") in {(n, ff, tt) for n, fs in SPEC_MESSAGES.items()
                                                      for tt, ff, _ in fs}
            out.add((t.__name__, f.name, is64))
            for inner in _structs_in(f.type):
                out |= walk(inner, seen)
        return out

    seen: set[type] = set()
    fields = set().union(*(walk(t, seen) for t in m.OUTPUT_TYPES.values()))
    for struct, field, is64 in fields:
        if field in compat.INT64_FIELDS and struct in SPEC_MESSAGES:
            assert is64, f"{struct}.{field} is named like an int64 field but is not one"
        if is64:
            assert field in compat.INT64_FIELDS


def _structs_in(t: object) -> list[type]:
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        return [t]
    args = typing.get_args(t)
    if typing.get_origin(t) is typing.Annotated:
        args = args[:1]
    if isinstance(t, types.UnionType) or args:
        return [s for a in args for s in _structs_in(a)]
    return []
