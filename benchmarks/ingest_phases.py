"""Where an ingest's micro-batches spend their time: the source's read and the sinks.

Run from the repository root::

    .venv/bin/python -m benchmarks.ingest_phases PER_SHARD MASTER MODE BATCH [MIRROR_WORKERS]

writes the benchmark corpus (4 BSON files, ObjectId keys, PER_SHARD entries each) and runs
``run_ingest`` on it with ``maxEventsPerTrigger`` BATCH, timing in every ``foreachBatch``
``DataFrame.toArrow()`` (Spark runs the source's tasks and ships the rows) and the sink's
``write_batch`` (change log and mirror; MIRROR_WORKERS as ``--mirror-workers``,
default 0).  The rest of the wall time is Spark's: the query's
start, the driver's planning (in the source runner's own process), offset and commit logs.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from benchmarks.corpus import corpus_files
from benchmarks.timing import scratch_directory
from shardstream.spark.ingest import DEFAULT_MIRROR_WORKERS, batch_writers
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.session import build_session
from shardstream.spark.ingest.settings import IngestSettings


class _Arrow:
    """A DataFrame stand-in that hands out an already collected table."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def toArrow(self) -> Any:  # the DataFrame method's name
        return self._table


def main(argv: list[str]) -> None:
    per_shard, master, mode, batch = int(argv[0]), argv[1], argv[2], argv[3]
    workers = int(argv[4]) if len(argv) > 4 else DEFAULT_MIRROR_WORKERS
    work = scratch_directory("shardstream-phases-")
    files = corpus_files(work, per_shard)
    writer_call = batch_writers.DriverBatches.__call__
    totals = {"toArrow": 0.0, "sink": 0.0}

    def timed(self: Any, frame: Any, batch_id: int) -> None:
        began = time.perf_counter()
        table = frame.toArrow()
        collected = time.perf_counter()
        writer_call(self, _Arrow(table), batch_id)
        done = time.perf_counter()
        totals["toArrow"] += collected - began
        totals["sink"] += done - collected
        print(
            f"batch {batch_id}: {table.num_rows:,} events, toArrow {collected - began:.2f} s, "
            f"sink {done - collected:.2f} s",
            flush=True,
        )

    batch_writers.DriverBatches.__call__ = timed  # type: ignore[method-assign]
    spark = build_session(master)
    options = {"oplog": files, "partitionMode": mode, "maxEventsPerTrigger": batch}
    settings = IngestSettings(
        table=work / "lake", source_options=options, bounded=True, mirror_workers=workers
    )
    began = time.perf_counter()
    done = run_ingest(spark, settings, IngestProgress(sys.stderr, interactive=False))
    wall = time.perf_counter() - began
    spark.stop()
    print(
        f"{master} {mode}, mirror workers {workers}: {done.events:,} events in {wall:.2f} s "
        "after the session started; "
        f"toArrow {totals['toArrow']:.2f} s, sink {totals['sink']:.2f} s, "
        f"the rest {wall - totals['toArrow'] - totals['sink']:.2f} s"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
