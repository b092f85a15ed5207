"""Change events as Arrow record batches of the event schema, fast-path events column by column.

A task's events reach Spark as Arrow batches.  The fast path's events
(:class:`~shardstream.merger.raw.encoded_event.EncodedEvent`, BSON as the server sends it)
are read straight into Arrow buffers by the compiled ``event_columns``
(``transform/raw/_event_columns.c``): no tuple, string or int object per event, one walk per
event, the Extended JSON written into the column's own buffer.  What it leaves (an event the
reference path built as a dict, or one the compiled readers leave to Python: a Decimal128 in a
document, a field of an unexpected type) is read by :func:`~shardstream.spark.source.rows.
event_values`, the reference, and put back in its place, so a batch's rows are in the events'
order whichever way each was read.  ``tests/spark/test_event_batches.py`` holds both ways to the
same batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import pyarrow as pa

from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.spark.source.encoded_rows import DOCUMENT_COLUMNS, update_bytes
from shardstream.spark.source.rows import (
    CLUSTER_TIME_TYPE,
    EVENT_SCHEMA,
    event_values,
    rows_to_batch,
)
from shardstream.transform.change_event import ChangeEvent

try:
    from shardstream.transform.raw._ejson import event_columns as _event_columns
except ImportError:  # installed without a C compiler: every row is read in Python
    _event_columns = None  # type: ignore[assignment]

# The event schema's columns the compiled reader writes, in its order (clusterTime as its two
# halves); shard, _oplogUpdate and _fragment come from the event objects.
_COMPILED: Final = (
    "_id",
    "_idTypeBits",
    "operationType",
    "clusterTime",
    "clusterTime",
    "wallTime",
    "db",
    "coll",
    "collectionUUID",
    *DOCUMENT_COLUMNS,
    "txnNumber",
    "lsid",
)


class EventBatcher:
    """Collects a task's events and turns them into one record batch at a time.

    ``add`` returns the bytes collected so far (a fast-path event's BSON size; a dict
    event's row text, read now since its row is needed anyway), for the caller's size cut.
    """

    def __init__(self, *, relaxed: bool) -> None:
        self._relaxed = relaxed
        self._events: list[ChangeEvent] = []
        self._rows: dict[int, tuple[Any, ...]] = {}  # rows already read, by position
        self._size = 0

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: ChangeEvent) -> int:
        if isinstance(event, EncodedEvent):
            self._size += len(event.raw)
        else:
            values = event_values(event, relaxed=self._relaxed)
            self._rows[len(self._events)] = values
            self._size += sum(len(value) for value in values if isinstance(value, str | bytes))
        self._events.append(event)
        return self._size

    def flush(self) -> pa.RecordBatch:
        """The collected events as one batch (empty when none); the batcher starts over."""
        events, rows = self._events, self._rows
        self._events, self._rows, self._size = [], {}, 0
        if _event_columns is None or len(rows) == len(events):
            return rows_to_batch([rows.get(i) or self._values(e) for i, e in enumerate(events)])
        raws = [event.raw if isinstance(event, EncodedEvent) else None for event in events]
        columns, left = _event_columns(raws, self._relaxed)
        batch = _compiled_batch(columns, events)
        if not left:
            return batch
        # The rows left to Python, appended and then taken back to their places.
        filled = rows_to_batch([rows.get(i) or self._values(events[i]) for i in left])
        order = list(range(len(events)))
        for offset, position in enumerate(left):
            order[position] = len(events) + offset
        return pa.concat_batches([batch, filled]).take(pa.array(order, pa.int64()))

    def _values(self, event: ChangeEvent) -> tuple[Any, ...]:
        return event_values(event, relaxed=self._relaxed)


def events_to_batch(events: Iterable[ChangeEvent], *, relaxed: bool = False) -> pa.RecordBatch:
    """Events as one Arrow record batch of :data:`~shardstream.spark.source.rows.EVENT_SCHEMA`."""
    batcher = EventBatcher(relaxed=relaxed)
    for event in events:
        batcher.add(event)
    return batcher.flush()


def _compiled_batch(
    columns: tuple[tuple[bytes | None, ...], ...], events: Sequence[ChangeEvent]
) -> pa.RecordBatch:
    """The compiled reader's buffers, and the columns the event objects hold, as a batch."""
    length = len(events)
    arrays: dict[str, pa.Array] = {}
    halves = []
    for name, buffers in zip(_COMPILED, columns, strict=True):
        field_type = pa.int64() if name == "clusterTime" else EVENT_SCHEMA.field(name).type
        array = pa.Array.from_buffers(
            field_type, length, [None if b is None else pa.py_buffer(b) for b in buffers]
        )
        if name == "clusterTime":
            halves.append(array)
        else:
            arrays[name] = array
    arrays["clusterTime"] = pa.StructArray.from_arrays(halves, fields=list(CLUSTER_TIME_TYPE))
    arrays["shard"] = pa.array([event.shard for event in events], pa.string())
    arrays["_oplogUpdate"] = pa.array(
        [update_bytes(event.raw_update) for event in events], pa.binary()
    )
    arrays["_fragment"] = pa.array([event.fragment_of for event in events], pa.string())
    return pa.RecordBatch.from_arrays(
        [arrays[field.name] for field in EVENT_SCHEMA], schema=EVENT_SCHEMA
    )
