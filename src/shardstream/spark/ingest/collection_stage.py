"""The per-collection layout written by Spark's tasks: a batch in two rounds of tasks.

1. **State tasks** (:class:`StateStage`, the body of a ``mapInArrow`` over the batch
   shuffled by bucket, :func:`by_collection`): each writes its change-log file and applies
   its buckets to the document state, ``<root>/_mirror_state`` partitioned by bucket (the
   bucketed mirror's code, versions recorded), then hands on, per collection, the history's
   steps and the documents' final state
   (:func:`~shardstream.spark.delta.typed.change_rows.bucket_rows`), plus one row carrying
   its files for the driver's commit.
2. **Collection tasks** (:func:`write_collection_rows`, the lakehouse writer's ``write``
   over those rows shuffled by collection): each holds every row of its collections, types
   their columns from every version and MERGEs each collection's history and typed mirror,
   one Delta commit each with the batch's markers (``typed/``: the in-driver sink's code, so
   the change data feed is delta-rs's own).

The driver then commits the change log's files and the state's bucket rewrites
(``lakehouse_writer``).  A collection table commits from its task because the change data
feed needs the MERGE's own change files, which a commit of add and remove actions cannot
carry (delta-rs 1.6.6 writes ``cdc`` actions only from its operations); each commit is
still the table's whole batch with its markers, so exactly once holds as for the driver's
commits: a replayed batch finds the tables that have it and skips them.  Order: the
collections' tables, then the change log, then the state; a crash before the state's
commit replays the batch against the same state, which prepares it the same way.
"""

from __future__ import annotations

# The state tasks' messages cross to the collection tasks pickled: this pipeline's own
# objects, between its own processes.
import pickle
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.typed.batch import Documents, write_shares
from shardstream.spark.delta.typed.change_rows import (
    CHANGE_ROWS_SCHEMA,
    ROUTE,
    bucket_rows,
    message_rows,
    namespace_rows,
)
from shardstream.spark.ingest.task_writes import WriterOptions, Written, write_events


class StateStage:
    """A state task (``mapInArrow``): Arrow batches of events shuffled by bucket in, the
    collection tasks' rows out (:data:`CHANGE_ROWS_SCHEMA`)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = list(batches)
        if not read:
            return
        options = WriterOptions.read(self.options)
        written, applied = write_events(options, pa.Table.from_batches(read))
        options.maybe_crash("task")
        yield from bucket_rows(options.root, applied).to_batches()
        yield from message_rows(pickle.dumps(written)).to_batches()


def by_collection(frame: Any, stage: StateStage, tasks: int) -> Any:
    """``frame`` (the batch shuffled by bucket) through the state tasks, their rows
    shuffled by collection into ``tasks`` tasks."""
    rows = frame.mapInArrow(stage, from_arrow_schema(CHANGE_ROWS_SCHEMA))
    return rows.repartition(tasks, ROUTE)


def write_collection_rows(options: WriterOptions, rows: pa.Table) -> Written:
    """A collection task: its collections' tables written from ``rows``, one commit each
    (its watermark the newest change of the batch the table took: a collection task does
    not see the batch's last event); the state tasks' messages among the rows passed on."""
    shares, messages = namespace_rows(rows, Documents())
    write_shares(
        options.root,
        shares,
        lambda share: BatchCommit(
            app_id=options.app_id, batch_id=options.batch_id, watermark=share.newest_token
        ),
        history=options.history,
        max_columns=options.max_columns,
    )
    options.maybe_crash("collections")
    return Written.joined(pickle.loads(message) for message in messages)
