"""Where TYJobs live: a NATS KV bucket, the controller's API server.

Keys: `spec.<namespace>.<name>` holds a job as `ykbus tyjob apply` validated it (JSON of
`manifest.TYJob`); `status.<namespace>.<name>` holds what the controller reports
(`{"status": {...}, "run": {...}}`: the status `ykbus tyjob get` prints, and the run the
controller resumes from after a restart).
"""

from __future__ import annotations

from typing import Any

import msgspec
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError

from ykbus.tyjob.controller import JobRun
from ykbus.tyjob.manifest import TYJob

BUCKET = "ykbus-tyjob"


def spec_key(namespace: str, name: str) -> str:
    return f"spec.{namespace}.{name}"


def status_key(key: str) -> str:
    return f"status.{key}"


async def bucket(nc: Any, create: bool = True) -> Any:
    js = nc.jetstream()
    try:
        return await js.key_value(BUCKET)
    except BucketNotFoundError:
        if not create:
            raise
        return await js.create_key_value(bucket=BUCKET, history=1)


async def get_value(kv: Any, key: str) -> bytes | None:
    entry = await get_entry(kv, key)
    return entry.value if entry is not None else None


async def get_entry(kv: Any, key: str) -> Any:
    """The entry of `key` that holds a value (its revision too), or None."""
    try:
        entry = await kv.get(key)
    except (KeyNotFoundError, KeyDeletedError):
        return None
    return entry if entry.value else None


async def keys(nc: Any, kv: Any, prefix: str) -> list[str]:
    """The keys under `prefix` (`spec.` or `status.`) that hold a value, sorted. Read from
    the bucket's stream state (every subject with a message, deleted keys included as
    their delete markers), then each checked: nats-py's `keys()` filters by substring."""
    info = await nc.jetstream().stream_info(f"KV_{BUCKET}", subjects_filter=f"$KV.{BUCKET}.{prefix}>")
    subjects = (info.state.subjects or {}) if info.state else {}
    found = []
    for subject in sorted(subjects):
        key = subject[len(f"$KV.{BUCKET}."):]
        if await get_value(kv, key) is not None:
            found.append(key)
    return found


_job_decoder = msgspec.json.Decoder(TYJob)


def decode_job(data: bytes) -> TYJob:
    return _job_decoder.decode(data)


class _Saved(msgspec.Struct):
    status: dict[str, Any]
    run: JobRun


_saved_decoder = msgspec.json.Decoder(_Saved)


def decode_saved(data: bytes) -> tuple[dict[str, Any], JobRun]:
    """A saved value; msgspec.DecodeError or ValidationError when it is not one (nested past
    the interpreter's stack included: a DecodeError, not a RecursionError)."""
    try:
        saved = _saved_decoder.decode(data)
    except RecursionError:
        raise msgspec.DecodeError("nested too deep to read") from None
    return saved.status, saved.run


class PodStatus(msgspec.Struct):
    name: str
    role: str
    workerSet: str  # noqa: N815 - the status's JSON name
    node: str
    phase: str


class Status(msgspec.Struct):
    """A job's status as `ykbus tyjob get` shows it (docs/tyjob.md)."""

    name: str
    namespace: str
    stage: str
    scheduleState: str  # noqa: N815
    restarts: int
    pods: list[PodStatus]
    message: str = ""
    application: str = ""  # its SI application id (for `ykbus explain APP --rm tyjob`)


def read_status(data: bytes) -> dict[str, Any] | None:
    """The status part of a saved value (None when it is not one this program wrote)."""
    try:
        status, _ = decode_saved(data)
        return msgspec.to_builtins(msgspec.convert(status, Status))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def encode_saved(run: JobRun) -> bytes:
    return msgspec.json.encode({"status": run.status(), "run": run})
