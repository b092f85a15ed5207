"""What the per-collection layout's tasks spend per event, without Spark.

Run from the repository root::

    .venv/bin/python -m benchmarks.task_rounds [PER_SHARD] [BATCH] [REPEAT]

writes the benchmark corpus (4 BSON files, PER_SHARD entries each, default 25,000), merges it
in process into batches of BATCH events (default 50,000), shuffles each batch by bucket as
the ingest's ``by_bucket`` does (the bucket from a CRC of the ``documentKey`` here, not
Spark's hash: only the spread matters), and runs each batch through the two rounds of tasks
one after the other in this process, as one task holding every bucket and every collection
would: the state round (``write_events``: the change log's file, the state's buckets applied
and written; then ``bucket_rows``) and the collection round (``write_collection_rows``: each
collection's history and typed mirror, typed and written, the mirrors by MERGE), then the
driver's commits. Prints this process's CPU per event in each round, in delta-rs's MERGEs
within the collection round and in the driver's commits (a per-batch cost, shown per event),
the minimum over REPEAT runs into fresh tables (default 3): the machine is shared, and the
minimum is the run least disturbed. REPEAT 0 stops before the rounds: run under
``valgrind --tool=callgrind`` with REPEAT 1 and 0, the difference is the rounds'
instructions.

Why: Spark's own costs (its JVM, the Arrow hand-offs, the Python workers' start) and the
machine's noise hide a change to the rounds' Python in ``ingest_scaling.py``'s figures.
"""

from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake.table import TableMerger

from benchmarks.sink_phases import merged_tables
from benchmarks.timing import scratch_directory
from shardstream.bench.corpus import corpus_files
from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import create_changelog
from shardstream.spark.delta.commits import committed_watermark, open_table
from shardstream.spark.delta.mirror.bucketed.bucket_table import create_bucketed_mirror
from shardstream.spark.delta.mirror.bucketed.bucket_writer import EVENT_BUCKET
from shardstream.spark.delta.typed.change_rows import bucket_rows, message_rows
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest import DEFAULT_BUCKETS
from shardstream.spark.ingest.collection_stage import write_collection_rows
from shardstream.spark.ingest.driver_commit import commit_written
from shardstream.spark.ingest.task_writes import LOGGED, WriterOptions, write_events
from shardstream.transform.raw.encoded_stream import quiet_collector


def shuffled_by_bucket(events: pa.Table, buckets: int) -> pa.Table:
    """``events`` as the state round gets them: each in its document's bucket (an event
    naming no document in every bucket, logged from bucket 0), sorted by bucket and token."""
    rows: list[int] = []
    chosen: list[int] = []
    logged: list[bool] = []
    for index, key in enumerate(events["documentKey"].to_pylist()):
        spread = range(buckets) if key is None else (zlib.crc32(key.encode()) % buckets,)
        for bucket in spread:
            rows.append(index)
            chosen.append(bucket)
            logged.append(key is not None or bucket == 0)
    shuffled = events.take(pa.array(rows, pa.int64()))
    shuffled = shuffled.append_column(EVENT_BUCKET, pa.array(chosen, pa.int32()))
    shuffled = shuffled.append_column(LOGGED, pa.array(logged, pa.bool_()))
    return shuffled.sort_by([(EVENT_BUCKET, "ascending"), ("_id", "ascending")])


def run_rounds(batches: list[pa.Table], root: Path) -> tuple[float, float, float, float]:
    """Every batch through both rounds and the commits into fresh tables under ``root``;
    this process's CPU seconds in the state round, in the collection round, in the
    latter's MERGEs, and in the driver's commits."""
    merges: list[float] = []
    execute = TableMerger.execute

    def timed(merger: TableMerger) -> dict[str, Any]:
        started = time.process_time()
        try:
            return execute(merger)
        finally:
            merges.append(time.process_time() - started)

    TableMerger.execute = timed  # type: ignore[method-assign,assignment]
    try:
        state, collections, commits = _rounds(batches, root)
    finally:
        TableMerger.execute = execute  # type: ignore[method-assign]
    return state, collections, sum(merges), commits


def _rounds(batches: list[pa.Table], root: Path) -> tuple[float, float, float]:
    create_bucketed_mirror(root / STATE_TABLE, DEFAULT_BUCKETS)
    create_changelog(root)
    state_cpu = collections_cpu = commits_cpu = 0.0
    for batch_id, events in enumerate(batches):
        state = open_table(root / STATE_TABLE)
        assert state is not None
        options = WriterOptions(
            root=root,
            app_id="bench",
            batch_id=batch_id,
            changelog_watermark=committed_watermark(open_table(root / CHANGELOG_TABLE)),
            documents_version=state.version(),
            documents_watermark=committed_watermark(state),
            collections=True,
        )
        with quiet_collector():  # as a task's mapInArrow body runs: Spark's worker does not
            started = time.process_time()
            written, applied = write_events(options, events)
            rows = pa.concat_tables([bucket_rows(root, applied), message_rows(written.pickled())])
            between = time.process_time()
            messages = write_collection_rows(options, rows)
            ended = time.process_time()
            commit_written(options, messages)
            commits_cpu += time.process_time() - ended
        state_cpu += between - started
        collections_cpu += ended - between
    return state_cpu, collections_cpu, commits_cpu


def main(argv: list[str]) -> None:
    per_shard = int(argv[0]) if argv else 25_000
    batch = int(argv[1]) if len(argv) > 1 else 50_000
    repeat = int(argv[2]) if len(argv) > 2 else 3
    work = scratch_directory("shardstream-rounds-")
    merged = merged_tables(corpus_files(work / "oplogs", per_shard), batch)
    batches = [shuffled_by_bucket(events, DEFAULT_BUCKETS) for events in merged]
    events = sum(table.num_rows for table in merged)
    shape = f"{events:,} events in {len(batches)} batches of up to {batch:,}"
    if not repeat:
        print(f"{shape}: prepared, no round run (REPEAT 0)")
        return
    runs = [run_rounds(batches, work / f"lake-{run}") for run in range(repeat)]
    state, collections, merges, commits = (
        min(run[i] for run in runs) / events * 1e6 for i in range(4)
    )
    print(
        f"{shape}, {DEFAULT_BUCKETS} buckets; CPU us/event in this process, min of {repeat} "
        f"runs:\n"
        f"  state round        {state:6.1f}\n"
        f"  collection round   {collections:6.1f} (of which delta-rs's MERGEs {merges:.1f})\n"
        f"  both               {state + collections:6.1f}\n"
        f"  the driver's commits {commits:4.1f} ({len(batches)} batches: a cost per batch)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
