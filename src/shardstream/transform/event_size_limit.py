"""The size limit on a change event, as the server serializes it for the cursor.

Emulates ``PlanExecutorPipeline::_trySerializeToBson`` (plan_executor_pipeline.cpp): each
event leaves the pipeline as a ``BSONObj`` built by ``BSONObjBuilder::obj``, whose size
``BSONObj::DefaultSizeTrait`` caps at ``BSONObjMaxInternalSize`` (16 MiB + 16 KiB); a
larger one fails the stream with ``BSONObjectTooLarge`` (10334), counted in the
``changeStreams.largeEventsFailed`` metric.  A shard of a sharded cluster serializes
the event with its metadata (``toBsonWithMetaData``: the ``$sortKey: [token]`` mongos
merges on), so its limit applies to the event plus that field; a replica set (or mongos)
serializes the bare event.  ``$changeStreamSplitLargeEvent`` exists to avoid this error:
with it, events above 16 MiB + 8 KiB are cut into fragments first
(:mod:`shardstream.transform.stages.split_large_event`), and nothing is checked here (a
merged stream's events are not split by this emulation, so they are always checked).

The fast path checks the length of the event bytes it wrote (:func:`check_written_events`);
the reference pipeline encodes each event (:func:`check_event`) and keeps the bytes on it,
which the writers then take (``event_bson.event_bson``): one encoding per event either way.
"""

from __future__ import annotations

from typing import Final

from bson.errors import BSONError
from bson.raw_bson import RawBSONDocument

from shardstream.errors import TransformError
from shardstream.oplog.entry_size_limit import (
    BSON_OBJ_MAX_INTERNAL_SIZE,
    BSON_OBJ_MAX_USER_SIZE,
)
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.event_bson import encode_event_document

__all__ = [
    "BSON_OBJECT_TOO_LARGE",
    "BSON_OBJ_MAX_INTERNAL_SIZE",
    "BSON_OBJ_MAX_USER_SIZE",
    "check_event",
    "check_written_events",
    "event_too_large",
    "sort_key_size",
    "too_large_at",
]

BSON_OBJECT_TOO_LARGE: Final = 10334  # ErrorCodes::BSONObjectTooLarge
# ``$sortKey: [{_data: <hex>}]`` around the token's hex: the element's type byte and name
# (10), the array's length, element header "0" and NUL (7), the token document's length,
# its "_data" string element header and the string's NUL (16), both documents' NULs (2).
SORT_KEY_OVERHEAD: Final = 35


def sort_key_size(token_data: str | bytes) -> int:
    """The size of the ``$sortKey`` metadata a shard adds to an event with this token."""
    return len(token_data) + SORT_KEY_OVERHEAD


def event_too_large(size: int, *, with_sort_key: bool, ts: object = None) -> TransformError:
    """The error the server fails the stream with for an event of ``size`` bytes."""
    what = "change event with its $sortKey" if with_sort_key else "change event"
    return TransformError(
        f"expected a {what} of at most {BSON_OBJ_MAX_INTERNAL_SIZE} bytes "
        f"(BSONObjMaxInternalSize), got {size} bytes; the server fails such a stream unless "
        "$changeStreamSplitLargeEvent is in the pipeline",
        ts=ts,
        code=BSON_OBJECT_TOO_LARGE,
    )


def check_event(event: ChangeEvent, *, with_sort_key: bool) -> None:
    """Raise :func:`event_too_large` if the event would not serialize; else keep its bytes.

    Args:
        with_sort_key: the event is a shard's half of a merged stream, sent with its
            ``$sortKey``; False for a replica set's (or a single shard's whole) stream.
    """
    try:
        encoded = encode_event_document(event.document)
    except (BSONError, OverflowError, ValueError) as exc:
        # Only a value BSON cannot hold (an Extended JSON integer beyond 64 bits, say): no
        # oplog holds one, so no server would build such an event.
        raise TransformError(
            f"expected an event BSON can hold, got a value it cannot encode: {exc}",
            ts=event.token_data.cluster_time,
        ) from None
    size = len(encoded) + (sort_key_size(event.token.data) if with_sort_key else 0)
    if size > BSON_OBJ_MAX_INTERNAL_SIZE:
        raise event_too_large(size, with_sort_key=with_sort_key, ts=event.token_data.cluster_time)
    event.encoded = encoded  # a writer takes these bytes rather than encoding it again


def too_large_at(events: list[bytes], keys: list[bytes] | None, start: int) -> int:
    """The index of the first of ``events[start:]`` over the limit, or -1.

    ``keys`` (the events' token ``_data``, for a shard of a merged stream) adds each
    event's ``$sortKey``.  The fast path runs it per batch: the longest event (plus the
    longest key) bounds them all in one or two C-level passes; only a batch that bound
    does not clear is measured event by event.
    """
    if len(events) <= start:
        return -1
    written = events[start:] if start else events
    longest = max(map(len, written))
    if keys is None:
        if longest <= BSON_OBJ_MAX_INTERNAL_SIZE:
            return -1
        sizes = [len(event) for event in written]
    else:
        sort_keys = keys[start:] if start else keys
        if longest + sort_key_size(max(sort_keys, key=len)) <= BSON_OBJ_MAX_INTERNAL_SIZE:
            return -1
        pairs = zip(written, sort_keys, strict=True)
        sizes = [len(event) + sort_key_size(key) for event, key in pairs]
    return start + next(i for i, size in enumerate(sizes) if size > BSON_OBJ_MAX_INTERNAL_SIZE)


def check_written_events(events: list[bytes], keys: list[bytes] | None, start: int) -> None:
    """Raise :func:`event_too_large` for the first of ``events[start:]`` over the limit.

    ``keys`` as for :func:`too_large_at`; the error names the event's ``clusterTime``
    (its entry's ts, a transaction's commit), read from its bytes.
    """
    index = too_large_at(events, keys, start)
    if index < 0:
        return
    event = events[index]
    size = len(event) + (sort_key_size(keys[index]) if keys is not None else 0)
    ts = RawBSONDocument(event).get("clusterTime")
    raise event_too_large(size, with_sort_key=keys is not None, ts=ts)
