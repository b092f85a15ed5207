"""The per-collection layout written by Spark's tasks: a batch in two rounds of tasks.

1. **State tasks** (:class:`StateStage`, the body of a ``mapInArrow`` over the batch
   shuffled by bucket, :func:`by_collection`): each writes its change-log file and applies
   its buckets to the document state, ``<root>/_mirror_state`` partitioned by bucket (the
   bucketed mirror's code, versions recorded), then hands on, per collection, the history's
   steps and the documents' final state
   (:func:`~shardstream.spark.delta.typed.change_rows.bucket_rows`), plus one row carrying
   its files for the driver's commit.
2. **Collection tasks** (:class:`CollectionTasks`, a ``mapInArrow`` over those rows
   shuffled by collection, :func:`write_collection_rows`): each holds every row of its
   collections, types their columns from every version and writes each collection's
   history and typed mirror (a MERGE), one Delta commit each with the batch's markers
   (``typed/``: the in-driver sink's code, so the mirror's change data feed is delta-rs's
   own), and passes on the state tasks' messages.

The driver then collects the messages and commits the change log's files and the state's
bucket rewrites (``driver_commit``).  A collection table commits from its task because
the mirror's change data feed needs the MERGE's own change files, which a commit of add and remove
actions cannot carry (delta-rs 1.6.6 writes ``cdc`` actions only from its operations);
each commit is still the table's whole batch with its markers, so exactly once holds as
for the driver's commits: a replayed batch finds the tables that have it and skips them.
Order: the collections' tables, then the change log, then the state; a crash before the
state's commit replays the batch against the same state, which prepares it the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.typed.batch import write_shares
from shardstream.spark.delta.typed.change_rows import (
    CHANGE_ROWS_SCHEMA,
    ROUTE,
    bucket_rows,
    message_rows,
    namespace_rows,
)
from shardstream.spark.ingest.task_writes import (
    MESSAGE_SCHEMA,
    WriterOptions,
    Written,
    write_task_events,
)
from shardstream.transform.raw.encoded_stream import quiet_collector


class StateStage:
    """A state task (``mapInArrow``): Arrow batches of events shuffled by bucket in, the
    collection tasks' rows out (:data:`CHANGE_ROWS_SCHEMA`)."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with quiet_collector():  # as EventTasks
            done = write_task_events(self.options, batches)
            if done is None:
                return
            written, applied = done
            rows = bucket_rows(self.options.root, applied)
        yield from rows.to_batches()
        yield from message_rows(written.pickled()).to_batches()


class CollectionTasks:
    """A collection task (``mapInArrow``): its share of the state tasks' rows in, one
    :data:`MESSAGE_SCHEMA` row out (the state tasks' messages it was handed, joined)."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = list(batches)
        if read:
            with quiet_collector():  # as EventTasks
                written = write_collection_rows(self.options, pa.Table.from_batches(read))
            yield written.to_batch()


def collection_rounds(frame: Any, options: WriterOptions, tasks: int) -> Any:
    """``frame`` (the batch shuffled by bucket) through the state tasks, their rows
    shuffled by collection into ``tasks`` collection tasks, whose messages come out."""
    rows = frame.mapInArrow(StateStage(options), from_arrow_schema(CHANGE_ROWS_SCHEMA))
    by_collection = rows.repartition(tasks, ROUTE)
    return by_collection.mapInArrow(CollectionTasks(options), from_arrow_schema(MESSAGE_SCHEMA))


def write_collection_rows(options: WriterOptions, rows: pa.Table) -> Written:
    """A collection task: its collections' tables written from ``rows``, one commit each
    (its watermark the newest change of the batch the table took: a collection task does
    not see the batch's last event); the state tasks' messages among the rows passed on."""
    shares, messages = namespace_rows(rows)
    write_shares(
        options.root,
        shares,
        lambda share: BatchCommit(
            app_id=options.app_id, batch_id=options.batch_id, watermark=share.newest_token
        ),
        history=options.history,
        max_columns=options.max_columns,
        buckets=options.buckets,
    )
    options.maybe_crash("collections")
    return Written.unpickled(messages)
