"""JetStream setup, idempotent: the input log, the output stream, the snapshot store."""

from __future__ import annotations

from dataclasses import dataclass

from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError

from ykbus.bus.subjects import IN_STREAM, OUT_STREAM, SNAPSHOT_BUCKET, Subjects


@dataclass(frozen=True)
class StreamLimits:
    """Retention of the two streams. -1 means unlimited. The input log is the source of
    truth: trim it only below the last snapshot (a restart replays from there)."""

    in_max_bytes: int = -1
    in_max_age_s: float = 0
    out_max_bytes: int = 1 << 30
    out_max_age_s: float = 7 * 24 * 3600
    duplicate_window_s: float = 120
    replicas: int = 1


async def ensure_streams(js: JetStreamContext, subjects: Subjects, limits: StreamLimits) -> None:
    configs = [
        api.StreamConfig(name=IN_STREAM, subjects=[subjects.inputs], storage=api.StorageType.FILE,
                         retention=api.RetentionPolicy.LIMITS, max_bytes=limits.in_max_bytes,
                         max_age=limits.in_max_age_s, duplicate_window=limits.duplicate_window_s,
                         num_replicas=limits.replicas),
        api.StreamConfig(name=OUT_STREAM, subjects=[subjects.outputs], storage=api.StorageType.FILE,
                         retention=api.RetentionPolicy.LIMITS, max_bytes=limits.out_max_bytes,
                         max_age=limits.out_max_age_s, duplicate_window=limits.duplicate_window_s,
                         num_replicas=limits.replicas),
    ]
    for config in configs:
        try:
            await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)
            continue
        try:
            await js.update_stream(config)
        except BadRequestError:
            pass  # an operator changed something we may not change (e.g. storage): keep theirs


async def snapshot_store(js: JetStreamContext, replicas: int = 1):
    try:
        return await js.object_store(SNAPSHOT_BUCKET)
    except NotFoundError:
        return await js.create_object_store(
            SNAPSHOT_BUCKET, config=api.ObjectStoreConfig(bucket=SNAPSHOT_BUCKET, storage=api.StorageType.FILE,
                                                          replicas=replicas))
