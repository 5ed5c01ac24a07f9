"""Scheduler Interface messages (YuniKorn's scheduler-interface-spec.md, spring 2023), as msgspec Structs.

Field names are the proto field names exactly as the spec writes them, including its
oddities (`UUID`, `Originator`, and `applicartionID` in
UpdateContainerSchedulingStateRequest), because RMs in other languages build these
messages from the spec's `.proto`.

Rules:
1. Ids that the spec makes mandatory are non-empty strings; decoding fails without them.
2. Quantities are int64 and never negative; priorities are int32.
3. Enums are their proto names. A protobuf JSON encoder may send an enum as its number:
   `__post_init__` turns the number into the named member, so the core only ever sees
   members.
4. Everything else has its proto3 default, so an omitted field decodes.
5. Messages are never tracked by the garbage collector (`gc=False`, on `Message` and
   `Quantity`): a message is a tree (structs, lists, maps of strings), decoded from JSON or
   built from the core's values, and nothing in it ever refers back to it, so it can be in
   no reference cycle. An entry of 5,000 asks decodes into some 20,000 structs that live
   until the entry ends, as do the allocations it sends: tracked, they made the collector
   run twice as often, a tenth of `bench core --workload yunikorn-perf`'s time
   (docs/benchmarks-history.md, tenth session).
"""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec
from msgspec import Meta, field
from msgspec.structs import force_setattr

from ykbus import limits

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Bounded types of inputs (`ykbus.limits`): an input past a bound does not decode, and the
# error names the field and the bound (`Expected str of length <= 1024 - at `$.asks[0].allocationKey``).
Id = Annotated[str, Meta(max_length=limits.MAX_ID_CHARS)]
NonEmptyStr = Annotated[str, Meta(min_length=1, max_length=limits.MAX_ID_CHARS)]
Text = Annotated[str, Meta(max_length=limits.MAX_TEXT_CHARS)]
ConfigText = Annotated[str, Meta(max_length=limits.MAX_CONFIG_BYTES)]
StrMap = Annotated[dict[Id, Text], Meta(max_length=limits.MAX_MAP_ENTRIES)]
IdList = Annotated[list[Id], Meta(max_length=limits.MAX_MAP_ENTRIES)]
Int32 = Annotated[int, Meta(ge=INT32_MIN, le=INT32_MAX)]
NonNegInt32 = Annotated[int, Meta(ge=0, le=INT32_MAX)]
Int64 = Annotated[int, Meta(ge=-(2**63), le=INT64_MAX)]
NonNegInt64 = Annotated[int, Meta(ge=0, le=INT64_MAX)]
TimeoutMs = Annotated[int, Meta(ge=0, le=limits.MAX_TIMEOUT_MS)]


def Items(t: object) -> object:  # noqa: N802 - a type constructor
    """A list of at most MAX_ITEMS items of type `t`."""
    return Annotated[list[t], Meta(max_length=limits.MAX_ITEMS)]  # type: ignore[valid-type]


def _enum_number(enum_type: type[enum.Enum]) -> object:
    """The int alternative of an enum field: a proto enum number in range."""
    return Annotated[int, Meta(ge=0, le=len(enum_type) - 1)]


_WIRE_FORMS: dict[type[enum.Enum], dict[str | int, enum.Enum]] = {}  # enum -> its names and numbers -> member


def _to_member(enum_type: type[enum.Enum], value: object) -> enum.Enum:
    """The member for a member, its proto name (`"CREATE"`, as the wire and the docs write
    it) or its proto number; anything else is a ValueError naming the allowed names."""
    if isinstance(value, enum_type):
        return value
    forms = _WIRE_FORMS.get(enum_type)
    if forms is None:
        forms = _WIRE_FORMS[enum_type] = {**{member.value: member for member in enum_type},
                                          **dict(enumerate(enum_type))}
    if isinstance(value, str | int) and not isinstance(value, bool):  # (a bool or a float would equal a number)
        found = forms.get(value)
        if found is not None:
            return found
    names = ", ".join(str(member.value) for member in enum_type)
    raise ValueError(f"{value!r} is not a {enum_type.__name__}: one of {names} (or its number 0-{len(enum_type) - 1})")


class ActionFromRM(enum.StrEnum):
    UNKNOWN_ACTION_FROM_RM = "UNKNOWN_ACTION_FROM_RM"
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DRAIN_NODE = "DRAIN_NODE"
    DECOMISSION = "DECOMISSION"
    DRAIN_TO_SCHEDULABLE = "DRAIN_TO_SCHEDULABLE"
    CREATE_DRAIN = "CREATE_DRAIN"  # SI 1.6: create the node draining (see ykbus.si.compat)


class TerminationType(enum.StrEnum):
    UNKNOWN_TERMINATION_TYPE = "UNKNOWN_TERMINATION_TYPE"
    STOPPED_BY_RM = "STOPPED_BY_RM"
    TIMEOUT = "TIMEOUT"
    PREEMPTED_BY_SCHEDULER = "PREEMPTED_BY_SCHEDULER"
    PLACEHOLDER_REPLACED = "PLACEHOLDER_REPLACED"


class SchedulingState(enum.StrEnum):
    UNKNOWN_SCHEDULING_STATE = "UNKNOWN_SCHEDULING_STATE"
    SKIPPED = "SKIPPED"
    SCHEDULED = "SCHEDULED"
    RESERVED = "RESERVED"
    FAILED = "FAILED"


class EventType(enum.StrEnum):
    UNKNOWN_EVENTRECORD_TYPE = "UNKNOWN_EVENTRECORD_TYPE"
    REQUEST = "REQUEST"
    APP = "APP"
    NODE = "NODE"
    QUEUE = "QUEUE"


class ChangeType(enum.StrEnum):
    NONE = "NONE"
    SET = "SET"
    ADD = "ADD"
    REMOVE = "REMOVE"


ActionField = ActionFromRM | _enum_number(ActionFromRM)  # type: ignore[valid-type]
TerminationField = TerminationType | _enum_number(TerminationType)  # type: ignore[valid-type]
SchedulingStateField = SchedulingState | _enum_number(SchedulingState)  # type: ignore[valid-type]
EventTypeField = EventType | _enum_number(EventType)  # type: ignore[valid-type]
ChangeTypeField = ChangeType | _enum_number(ChangeType)  # type: ignore[valid-type]


class Message(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=False, gc=False):
    """Base of every wire message: immutable, proto3 defaults left out when encoding."""


# --- common -------------------------------------------------------------------------


class Quantity(msgspec.Struct, frozen=True, gc=False):
    """A single int64 value; written even when zero so that a quantity is never `{}`."""

    value: NonNegInt64 = 0


class Resource(Message):
    """A sparse map of resource name to quantity."""

    resources: Annotated[dict[NonEmptyStr, Quantity], Meta(max_length=limits.MAX_MAP_ENTRIES)] = field(default_factory=dict)


class UserGroupInformation(Message):
    user: Id = ""
    groups: IdList = field(default_factory=list)


class PreemptionPolicy(Message):
    allowPreemptSelf: bool = False
    allowPreemptOther: bool = False


# --- RM -> core ---------------------------------------------------------------------


class RegisterResourceManagerRequest(Message):
    rmID: NonEmptyStr
    version: Id = ""
    policyGroup: Id = ""
    buildInfo: StrMap = field(default_factory=dict)
    config: ConfigText = ""
    extraConfig: StrMap = field(default_factory=dict)


class AllocationAsk(Message):
    allocationKey: NonEmptyStr
    applicationID: NonEmptyStr
    partitionName: Id = ""
    resourceAsk: Resource = field(default_factory=Resource)
    maxAllocations: NonNegInt32 = 0
    priority: Int32 = 0
    executionTimeoutMilliSeconds: TimeoutMs = 0
    tags: StrMap = field(default_factory=dict)
    taskGroupName: Id = ""
    placeholder: bool = False
    Originator: bool = False
    preemptionPolicy: PreemptionPolicy | None = None


class Allocation(Message):
    """A recovered allocation (RM -> core, in NodeInfo) or a new one (core -> RM)."""

    allocationKey: Id = ""
    allocationTags: StrMap = field(default_factory=dict)
    UUID: Id = ""
    resourcePerAlloc: Resource = field(default_factory=Resource)
    priority: Int32 = 0
    nodeID: Id = ""
    applicationID: Id = ""
    partitionName: Id = ""
    taskGroupName: Id = ""
    placeholder: bool = False
    # SI 1.4+ fields (not in the spring-2023 SI), honoured or rejected at the edge: see ykbus.si.compat
    allocationID: Id = ""
    originator: bool = False
    preemptionPolicy: PreemptionPolicy | None = None


class AllocationRelease(Message):
    partitionName: Id = ""
    applicationID: Id = ""
    UUID: Id = ""
    terminationType: TerminationField = TerminationType.UNKNOWN_TERMINATION_TYPE
    message: Text = ""
    allocationKey: Id = ""
    allocationID: Id = ""  # SI 1.4/1.5 name of UUID (see ykbus.si.compat)

    def __post_init__(self) -> None:
        if type(self.terminationType) is not TerminationType:
            force_setattr(self, "terminationType", _to_member(TerminationType, self.terminationType))


class AllocationAskRelease(Message):
    partitionName: Id = ""
    applicationID: Id = ""
    allocationKey: Id = ""
    terminationType: TerminationField = TerminationType.UNKNOWN_TERMINATION_TYPE
    message: Text = ""

    def __post_init__(self) -> None:
        if type(self.terminationType) is not TerminationType:
            force_setattr(self, "terminationType", _to_member(TerminationType, self.terminationType))


class AllocationReleasesRequest(Message):
    allocationsToRelease: Items(AllocationRelease) = field(default_factory=list)  # type: ignore[valid-type]
    allocationAsksToRelease: Items(AllocationAskRelease) = field(default_factory=list)  # type: ignore[valid-type]


class AllocationRequest(Message):
    asks: Items(AllocationAsk) = field(default_factory=list)  # type: ignore[valid-type]
    releases: AllocationReleasesRequest | None = None
    rmID: Id = ""
    allocations: Items(Allocation) = field(default_factory=list)  # type: ignore[valid-type]  # SI 1.6: asks are allocations


class AddApplicationRequest(Message):
    applicationID: NonEmptyStr
    queueName: Id = ""
    partitionName: Id = ""
    ugi: UserGroupInformation = field(default_factory=UserGroupInformation)
    tags: StrMap = field(default_factory=dict)
    executionTimeoutMilliSeconds: TimeoutMs = 0
    placeholderAsk: Resource | None = None
    gangSchedulingStyle: Id = ""


class RemoveApplicationRequest(Message):
    applicationID: NonEmptyStr
    partitionName: Id = ""


class ApplicationRequest(Message):
    new: Items(AddApplicationRequest) = field(default_factory=list)  # type: ignore[valid-type]
    remove: Items(RemoveApplicationRequest) = field(default_factory=list)  # type: ignore[valid-type]
    rmID: Id = ""


class NodeInfo(Message):
    nodeID: NonEmptyStr
    action: ActionField = ActionFromRM.UNKNOWN_ACTION_FROM_RM
    attributes: StrMap = field(default_factory=dict)
    schedulableResource: Resource | None = None
    occupiedResource: Resource | None = None
    existingAllocations: Items(Allocation) = field(default_factory=list)  # type: ignore[valid-type]

    def __post_init__(self) -> None:
        if type(self.action) is not ActionFromRM:
            force_setattr(self, "action", _to_member(ActionFromRM, self.action))


class NodeRequest(Message):
    nodes: Items(NodeInfo) = field(default_factory=list)  # type: ignore[valid-type]
    rmID: Id = ""


class UpdateConfigurationRequest(Message):
    rmID: Id = ""
    policyGroup: Id = ""
    config: ConfigText = ""
    extraConfig: StrMap = field(default_factory=dict)


class UnregisterRequest(Message):
    """Body of `yk.v1.in.<rm>.unregister`: `{}` (ykbus extension, no spec message)."""


class RMLifecycleEvent(enum.StrEnum):
    CONNECTION_LOST = "CONNECTION_LOST"
    RECONNECT = "RECONNECT"
    TIMEOUT = "TIMEOUT"


class RMStateChange(Message):
    """Body of `yk.v1.in._core.rmstate` (ykbus extension): the service records an RM's
    heartbeat going quiet (Running -> Paused), coming back (Paused -> Running) or staying
    quiet past the timeout (Paused -> Stopped, everything the RM owned is removed)."""

    rmID: NonEmptyStr
    event: RMLifecycleEvent
    reason: Text = ""


# --- core -> RM ---------------------------------------------------------------------


class RegisterResourceManagerResponse(Message):
    """Intentionally empty on success; `error` is set when the registration failed."""

    error: str = ""


class RejectedAllocationAsk(Message):
    allocationKey: str = ""
    applicationID: str = ""
    reason: str = ""


class RejectedAllocation(Message):
    """SI 1.4+: the answer to a rejected `AllocationRequest.allocations[i]`."""

    allocationKey: str = ""
    applicationID: str = ""
    reason: str = ""


class AllocationResponse(Message):
    new: list[Allocation] = field(default_factory=list)
    released: list[AllocationRelease] = field(default_factory=list)
    releasedAsks: list[AllocationAskRelease] = field(default_factory=list)
    rejected: list[RejectedAllocationAsk] = field(default_factory=list)
    rejectedAllocations: list[RejectedAllocation] = field(default_factory=list)


class UpdatedApplication(Message):
    applicationID: str = ""
    state: str = ""
    stateTransitionTimestamp: int = 0
    message: str = ""


class RejectedApplication(Message):
    applicationID: str = ""
    reason: str = ""


class AcceptedApplication(Message):
    applicationID: str = ""


class ApplicationResponse(Message):
    rejected: list[RejectedApplication] = field(default_factory=list)
    accepted: list[AcceptedApplication] = field(default_factory=list)
    updated: list[UpdatedApplication] = field(default_factory=list)


class RejectedNode(Message):
    nodeID: str = ""
    reason: str = ""


class AcceptedNode(Message):
    nodeID: str = ""


class NodeResponse(Message):
    rejected: list[RejectedNode] = field(default_factory=list)
    accepted: list[AcceptedNode] = field(default_factory=list)


class EventRecord(Message):
    type: EventTypeField = EventType.UNKNOWN_EVENTRECORD_TYPE
    objectID: str = ""
    message: str = ""
    timestampNano: int = 0
    eventChangeType: ChangeTypeField = ChangeType.NONE

    def __post_init__(self) -> None:
        if type(self.type) is not EventType:
            force_setattr(self, "type", _to_member(EventType, self.type))
        if type(self.eventChangeType) is not ChangeType:
            force_setattr(self, "eventChangeType", _to_member(ChangeType, self.eventChangeType))


class EventBatch(Message):
    """Body of `yk.v1.out.<rm>.event`."""

    events: list[EventRecord] = field(default_factory=list)


class UpdateContainerSchedulingStateRequest(Message):
    applicartionID: str = ""  # sic: the spec's field name
    allocationKey: str = ""
    state: SchedulingStateField = SchedulingState.UNKNOWN_SCHEDULING_STATE
    reason: str = ""

    def __post_init__(self) -> None:
        if type(self.state) is not SchedulingState:
            force_setattr(self, "state", _to_member(SchedulingState, self.state))


class StateBatch(Message):
    """Body of `yk.v1.out.<rm>.state`."""

    states: list[UpdateContainerSchedulingStateRequest] = field(default_factory=list)


# --- scheduler plugin messages (spec completeness; ykbus does not call predicates) ---


class PredicatesArgs(Message):
    allocationKey: str = ""
    nodeID: str = ""
    allocate: bool = False


class PreemptionPredicatesArgs(Message):
    allocationKey: str = ""
    nodeID: str = ""
    preemptAllocationKeys: list[str] = field(default_factory=list)
    startIndex: Int32 = 0


class PreemptionPredicatesResponse(Message):
    success: bool = False
    index: Int32 = 0


# The wire messages by log `kind`: what an RM sends, and what the core answers.
INPUT_TYPES: dict[str, type[Message]] = {
    "register": RegisterResourceManagerRequest,
    "app": ApplicationRequest,
    "node": NodeRequest,
    "alloc": AllocationRequest,
    "config": UpdateConfigurationRequest,
    "unregister": UnregisterRequest,
    "rmstate": RMStateChange,
}

OUTPUT_TYPES: dict[str, type[Message]] = {
    "register": RegisterResourceManagerResponse,
    "app": ApplicationResponse,
    "node": NodeResponse,
    "alloc": AllocationResponse,
    "event": EventBatch,
    "state": StateBatch,
}

ALL_MESSAGES: tuple[type[msgspec.Struct], ...] = (
    Quantity, Resource, UserGroupInformation, PreemptionPolicy,
    RegisterResourceManagerRequest, RegisterResourceManagerResponse,
    AllocationAsk, Allocation, AllocationRelease, AllocationAskRelease,
    AllocationReleasesRequest, AllocationRequest, AllocationResponse,
    AddApplicationRequest, RemoveApplicationRequest, ApplicationRequest, ApplicationResponse,
    UpdatedApplication, RejectedApplication, AcceptedApplication,
    NodeInfo, NodeRequest, NodeResponse, RejectedNode, AcceptedNode,
    RejectedAllocationAsk, RejectedAllocation, EventRecord, EventBatch,
    UpdateContainerSchedulingStateRequest, StateBatch, UpdateConfigurationRequest,
    UnregisterRequest, RMStateChange, PredicatesArgs, PreemptionPredicatesArgs, PreemptionPredicatesResponse,
)
