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

A shard's window comes mostly as :class:`~shardstream.merger.raw.shard_reader.EncodedRun` s
(:meth:`EventBatcher.add_run`): their bytes go to the compiled reader from the run's lists,
and an event object is made only for a row the compiled reader leaves to Python.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from typing import Any, Final

import pyarrow as pa
from bson.raw_bson import RawBSONDocument

from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.raw.shard_reader import EncodedRun
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

    Its size, for the caller's cut (:meth:`full`), is the bytes collected: a fast-path
    event's BSON size, a dict event's row text (read when added: its row is needed anyway).
    The batch's columns the event objects hold (shard, the update's ``o``, the fragment)
    and the fast path's bytes are kept as lists, which a run extends without an object
    per event.
    """

    def __init__(self, *, relaxed: bool) -> None:
        self._relaxed = relaxed
        self._start()

    def _start(self) -> None:
        self._events: list[ChangeEvent | None] = []  # None: a run's event (made if needed)
        self._raws: list[bytes | None] = []  # a fast-path event's BSON, else None
        self._keys: list[bytes | None] = []  # a run's event's token _data
        self._shards: list[str | None] = []
        self._updates: list[bytes | None] = []
        self._fragments: list[str | None] = []
        self._rows: dict[int, tuple[Any, ...]] = {}  # rows already read, by position
        self._size = 0

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: ChangeEvent) -> None:
        if isinstance(event, EncodedEvent):
            self._raws.append(event.raw)
            self._size += len(event.raw)
        else:
            values = event_values(event, relaxed=self._relaxed)
            self._rows[len(self._events)] = values
            self._raws.append(None)
            self._size += sum(len(value) for value in values if isinstance(value, str | bytes))
        self._events.append(event)
        self._keys.append(None)
        self._shards.append(event.shard)
        self._updates.append(update_bytes(event.raw_update))
        self._fragments.append(event.fragment_of)

    def add_run(self, run: EncodedRun, start: int, max_rows: int, max_bytes: int) -> int:
        """Take ``run``'s events from ``start`` until the batch holds ``max_rows`` rows or
        ``max_bytes`` bytes (the event reaching either is taken, as ``add``'s caller cuts),
        or the run ends; return where the run's rest begins (``len(run.keys)``: taken)."""
        room = max_rows - len(self._events)
        sizes = list(itertools.accumulate(map(len, run.raws[start : start + max(room, 1)])))
        reached = bisect.bisect_left(sizes, max_bytes - self._size)
        stop = start + min(reached + 1, len(sizes))
        self._size += sizes[stop - start - 1] if stop > start else 0
        count = stop - start
        base = len(self._events)
        self._events += [None] * count
        self._raws += run.raws[start:stop]
        self._keys += run.keys[start:stop]
        self._shards += [run.shard] * count
        self._updates += [None] * count
        for index, o in run.updates:
            if start <= index < stop:
                self._updates[base + index - start] = o
        self._fragments += [None] * count
        return stop

    def full(self, max_rows: int, max_bytes: int) -> bool:
        """Whether the batch reached ``max_rows`` rows or ``max_bytes`` bytes."""
        return len(self._events) >= max_rows or self._size >= max_bytes

    def flush(self) -> pa.RecordBatch:
        """The collected events as one batch (empty when none); the batcher starts over."""
        rows, raws, length = self._rows, self._raws, len(self._events)
        if _event_columns is None or len(rows) == length:
            batch = rows_to_batch([rows.get(i) or self._values(i) for i in range(length)])
            self._start()
            return batch
        columns, left = _event_columns(raws, self._relaxed)
        batch = _compiled_batch(columns, length, self._shards, self._updates, self._fragments)
        if left:
            # The rows left to Python, appended and then taken back to their places.
            filled = rows_to_batch([rows.get(i) or self._values(i) for i in left])
            order = list(range(length))
            for offset, position in enumerate(left):
                order[position] = length + offset
            batch = pa.concat_batches([batch, filled]).take(pa.array(order, pa.int64()))
        self._start()
        return batch

    def _values(self, position: int) -> tuple[Any, ...]:
        """The reference reading of the event at ``position`` (a run's made for it)."""
        event = self._events[position]
        if event is None:
            raw, key, shard = self._raws[position], self._keys[position], self._shards[position]
            assert raw is not None  # a run's event has its bytes, its key and its shard
            assert key is not None
            assert shard is not None
            event = EncodedEvent(raw, key, shard)
            update = self._updates[position]
            event.raw_update = None if update is None else RawBSONDocument(update)
        return event_values(event, relaxed=self._relaxed)


def events_to_batch(events: Iterable[ChangeEvent], *, relaxed: bool = False) -> pa.RecordBatch:
    """Events as one Arrow record batch of :data:`~shardstream.spark.source.rows.EVENT_SCHEMA`."""
    batcher = EventBatcher(relaxed=relaxed)
    for event in events:
        batcher.add(event)
    return batcher.flush()


def _compiled_batch(
    columns: tuple[tuple[bytes | None, ...], ...],
    length: int,
    shards: list[str | None],
    updates: list[bytes | None],
    fragments: list[str | None],
) -> pa.RecordBatch:
    """The compiled reader's buffers, and the columns the event objects hold, as a batch."""
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
    arrays["shard"] = pa.array(shards, pa.string())
    arrays["_oplogUpdate"] = pa.array(updates, pa.binary())
    arrays["_fragment"] = pa.array(fragments, pa.string())
    return pa.RecordBatch.from_arrays(
        [arrays[field.name] for field in EVENT_SCHEMA], schema=EVENT_SCHEMA
    )
