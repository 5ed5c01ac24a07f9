"""The SI versions ykbus speaks, and the edge that turns newer forms into the spring-2023 SI's.

The wire follows YuniKorn's Scheduler Interface of spring 2023 (docs/protocol.md pins the version). RMs
written against SI 1.6 send some things differently; this module translates them, at
decode time, into the core input the spring-2023 form produces, or rejects them with a reason
that names the field. The core never sees a 1.6 form.

Rules:
1. `AllocationRequest.allocations[i]` without `nodeID` is an ask: the fields map one to one
   (`resourcePerAlloc` -> `resourceAsk`, `allocationTags` -> `tags`, `originator` ->
   `Originator`), `maxAllocations` is 1 and `executionTimeoutMilliSeconds` 0 (SI 1.6 has
   neither). With `nodeID`, `UUID` or `allocationID` set it names an allocation already
   placed: ykbus recovers those only through `NodeInfo.existingAllocations` of a node
   CREATE, so the item is rejected naming that field.
2. `allocationID` (SI 1.4/1.5) is the spring-2023 `UUID`: moved there when `UUID` is empty,
   rejected when both are set and differ. Never ignored: an empty id releases every
   allocation of the application.
3. `CREATE_DRAIN` is handled by the core (create, then drain, in the same item).
4. Outputs: int64 fields are JSON numbers by default; an RM that registers with
   `extraConfig["int64"] = "string"` gets them as decimal strings (the protobuf JSON
   mapping). Which fields are int64 is `INT64_FIELDS`, checked against the spec by a test.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ykbus.si import messages as m

# --- int64 in outputs -----------------------------------------------------------------

INT64_OPTION = "int64"
INT64_MODES = ("number", "string")

# The int64 fields of the spring-2023 SI's messages, by name. In every output message these names
# are int64 fields and nothing else (tests/core/test_si_spec.py checks it against the spec).
INT64_FIELDS = frozenset({"value", "stateTransitionTimestamp", "timestampNano", "executionTimeoutMilliSeconds"})


def extra_config_error(extra_config: dict[str, str]) -> str:
    """Why a registration's `extraConfig` options of this module are invalid ("" if not)."""
    mode = extra_config.get(INT64_OPTION, "number")
    if mode not in INT64_MODES:
        return f"extraConfig.{INT64_OPTION} {mode!r}: expected number or string"
    return ""


def int64_mode(extra_config: dict[str, str]) -> str:
    """How the outputs of an RM registered with `extra_config` carry int64 fields."""
    return extra_config.get(INT64_OPTION, "number")


def int64_as_strings(value: Any) -> Any:
    """`value` (a message, or plain JSON-like data) as plain data whose int64 fields
    (`INT64_FIELDS`) are decimal strings; everything else unchanged."""
    return _stringify(msgspec.to_builtins(value))


def _stringify(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: str(v) if k in INT64_FIELDS and type(v) is int else _stringify(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_stringify(v) for v in obj]
    return obj


# --- SI 1.6 allocations -> asks ---------------------------------------------------------


def allocation_to_ask(alloc: m.Allocation, where: str) -> m.AllocationAsk | str:
    """The ask that `allocations[i]` (at path `where`) stands for, or why it is rejected
    (the reason ends with the path of the field, like a decode error)."""
    for name in ("nodeID", "UUID", "allocationID"):
        if getattr(alloc, name):
            return (f"{name} is set: an allocation already placed on a node is recovered only through "
                    f"NodeInfo.existingAllocations of a node CREATE; an allocations[] item is a request "
                    f"and must not name one - at `{where}.{name}`")
    for name in ("allocationKey", "applicationID"):
        if not getattr(alloc, name):
            return f"{name} is empty: an allocation request needs one - at `{where}.{name}`"
    return m.AllocationAsk(
        allocationKey=alloc.allocationKey, applicationID=alloc.applicationID, partitionName=alloc.partitionName,
        resourceAsk=alloc.resourcePerAlloc, maxAllocations=1, priority=alloc.priority,
        tags=alloc.allocationTags, taskGroupName=alloc.taskGroupName, placeholder=alloc.placeholder,
        Originator=alloc.originator, preemptionPolicy=alloc.preemptionPolicy,
    )


def release_with_uuid(rel: m.AllocationRelease, where: str) -> m.AllocationRelease | str:
    """`rel` with an SI 1.4/1.5 `allocationID` moved to `UUID`, or why it is rejected."""
    if not rel.allocationID:
        return rel
    if rel.UUID and rel.UUID != rel.allocationID:
        return (f"allocationID {rel.allocationID!r} and UUID {rel.UUID!r} differ: they name the same "
                f"allocation - at `{where}.allocationID`")
    return msgspec.structs.replace(rel, UUID=rel.allocationID, allocationID="")


def node_with_uuids(info: m.NodeInfo, where: str) -> m.NodeInfo | str:
    """`info` with the SI 1.4/1.5 `allocationID` of its existing allocations moved to
    `UUID`, or why it is rejected. Only existing allocations that name a node are checked
    by the core; here the ids are reconciled."""
    if not any(a.allocationID for a in info.existingAllocations):
        return info
    fixed = []
    for j, alloc in enumerate(info.existingAllocations):
        if alloc.allocationID and alloc.UUID and alloc.UUID != alloc.allocationID:
            return (f"allocationID {alloc.allocationID!r} and UUID {alloc.UUID!r} differ: they name the same "
                    f"allocation - at `{where}.existingAllocations[{j}].allocationID`")
        if alloc.allocationID:
            alloc = msgspec.structs.replace(alloc, UUID=alloc.allocationID, allocationID="")
        fixed.append(alloc)
    return msgspec.structs.replace(info, existingAllocations=fixed)
