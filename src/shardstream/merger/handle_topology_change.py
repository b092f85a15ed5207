"""Router stage: react to shards joining or leaving, as mongos does.

Emulates ``DocumentSourceChangeStreamHandleTopologyChange`` (v1): topology events
come through the merge like any event, so they take effect exactly at their place
in the stream.  An added shard gets a new remote that starts just after the add
time (a high-water-mark token one tick later), so nothing it writes is missed or
repeated.  A removed shard fails the stream with ChangeStreamHistoryLost, since
its unread events may be gone, unless the user opted to ignore removed shards.
The legacy new-shard events shards still emit (``migrateChunkToNewShard``) are
dropped by the shard reader: the topology remote covers them.
"""

from __future__ import annotations

import dataclasses

from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost
from shardstream.merger.topology import ShardChange, ShardChangeKind
from shardstream.resume_token import (
    DEFAULT_TOKEN_VERSION,
    ResumeToken,
    encode_token,
    event_token_data,
    high_water_mark,
)
from shardstream.transform import ChangeEvent

TOPOLOGY_OPERATION = "shardTopologyChange"  # internal: never shown to users


@dataclasses.dataclass(slots=True)
class TopologyEvent(ChangeEvent):
    """An internal event carrying a shard change through the merge."""

    change: ShardChange | None = None


def topology_event(change: ShardChange, version: int = DEFAULT_TOKEN_VERSION) -> TopologyEvent:
    """Wrap a shard change as an internal event that sorts at its time in the merge."""
    data = event_token_data(
        cluster_time=change.ts,
        operation_type="insert" if change.kind is ShardChangeKind.ADDED else "delete",
        version=version,
        document_key={"_id": change.shard},
    )
    token = encode_token(data)
    document = {
        "_id": token.to_document(),
        "operationType": TOPOLOGY_OPERATION,
        "clusterTime": change.ts,
    }
    return TopologyEvent(document, token, data, change=change)


def is_internal(event: ChangeEvent) -> bool:
    """Whether ``event`` is for the router only (a topology change)."""
    return isinstance(event, TopologyEvent)


def start_after_add(add_time: Timestamp, version: int) -> ResumeToken:
    """Where a new shard's remote starts: a high-water mark one tick after the add."""
    return encode_token(high_water_mark(Timestamp(add_time.time, add_time.inc + 1), version))


def change_of(event: ChangeEvent) -> ShardChange | None:
    """The shard change a topology event carries (None for a legacy new-shard signal)."""
    return event.change if isinstance(event, TopologyEvent) else None


def removed_shard_error(change: ShardChange) -> ChangeStreamHistoryLost:
    """The error for a shard that left while the stream may still need its events."""
    return ChangeStreamHistoryLost(
        f"shard {change.shard!r} was removed from the cluster at {change.ts!r}; events it held "
        "after that point can no longer be read, so the stream cannot go on without a gap "
        "(pass ignore_removed_shards=True to accept that) (server error 286)"
    )
