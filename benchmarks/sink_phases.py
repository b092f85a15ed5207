"""The lakehouse sinks alone, phase by phase: no Spark, the merged events as Arrow batches.

Run from the repository root::

    .venv/bin/python -m benchmarks.sink_phases [PER_SHARD] [BATCH]

The benchmark corpus (4 BSON files, ObjectId keys, PER_SHARD entries each, 50,000 by
default) merged in process and cut into Arrow batches of BATCH events (50,000), written
into :class:`~shardstream.spark.delta.sink.LakehouseSink` three times on fresh tables: the
one-table mirror prepared in the driver alone, then in 2 worker processes
(``--mirror-workers 2``), then the per-collection layout (typed mirrors and histories, the
ingest's default) in the driver alone.
Reported per run: the median per batch of the change-log append, the mirror's preparation
(split, keyed read, apply) and its MERGE; the stored rows a batch reads and the time
``token_json.loads`` takes over that many stored documents (an update's base is parsed
from its text); then the tables' active file counts before and after one compaction
(``--optimize-every``'s work).  ``ingest_throughput.py --marginal`` prints the same lines.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.timing import scratch_directory
from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.maintenance import TableMaintenance
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.delta.typed.batch import write_collections
from shardstream.spark.ingest import MirrorLayout
from shardstream.spark.source.event_batches import events_to_batch
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.encoded_stream import quiet_collector


def merged_tables(oplog: str, batch: int) -> list[pa.Table]:
    """The merged stream of the files ``oplog`` names (the source's ``oplog`` option) as
    Arrow tables of ``batch`` events, the rows the sinks get from Spark; prints the merge's
    rate."""
    sources = {
        name: FileOplogSource(name, path, raw_entries=True)  # the fast path where it applies
        for name, path in (part.split("=", 1) for part in oplog.split(","))
    }
    stream = MergedStream(sources, ChangeStreamOptions())
    started = time.perf_counter()
    events = []
    while not stream.exhausted:
        events += stream.next_batch(10_000)[0]
    merged = time.perf_counter() - started
    print(
        f"merge of the corpus (in process): {len(events)} events in {merged:.2f} s "
        f"({len(events) / merged:,.0f} events/s)"
    )
    return [
        pa.Table.from_batches([events_to_batch(events[i : i + batch])])
        for i in range(0, len(events), batch)
    ]


def sinks_alone(oplog: str, batch: int, root: Path) -> None:
    """Both runs over the files ``oplog`` names (the source's ``oplog`` option)."""
    tables = merged_tables(oplog, batch)
    for workers in (0, 2):
        _phases(tables, root / f"workers-{workers}", workers, MirrorLayout.SINGLE)
    _phases(tables, root / "collections", 0, MirrorLayout.COLLECTIONS)


@dataclasses.dataclass(frozen=True, slots=True)
class BatchTimes:
    """One batch through the sinks: seconds per phase, and the stored rows it read."""

    changelog: float
    prepare: float
    collections: float
    merge: float
    rows_read: int


def write_timed(sink: LakehouseSink, batch_id: int, table: pa.Table) -> BatchTimes:
    """Write ``table`` as batch ``batch_id`` (change log, mirror), timing each phase, with
    the cyclic collector kept out as ``LakehouseSink.write_batch`` keeps it."""
    with quiet_collector():
        return _write_timed(sink, batch_id, table)


def _write_timed(sink: LakehouseSink, batch_id: int, table: pa.Table) -> BatchTimes:
    commit = BatchCommit(app_id="bench", batch_id=batch_id, watermark=table["_id"][-1].as_py())
    clock = time.perf_counter()
    sink.changelog.append(table, commit)
    appended = time.perf_counter()
    fresh = sink.mirror.fresh(table)
    prepared = sink.mirror.prepare_fresh(fresh)
    applied = time.perf_counter()
    if sink.layout is MirrorLayout.COLLECTIONS:
        write_collections(
            sink.root,
            fresh,
            prepared,
            commit,
            history=sink.history,
            max_columns=sink.max_columns,
            buckets=sink.buckets,
        )
    typed = time.perf_counter()
    sink.mirror.write(prepared, commit)
    merged = time.perf_counter()
    return BatchTimes(
        appended - clock, applied - appended, typed - applied, merged - typed, prepared.rows_read
    )


def _phases(tables: list[pa.Table], root: Path, workers: int, layout: MirrorLayout) -> None:
    document_id.cache_clear()  # each run starts cold, as an ingest does
    sink = LakehouseSink(root, "bench", mirror_workers=workers, layout=layout)
    phases: dict[str, list[float]] = {
        "changelog append": [],
        "mirror read+apply": [],
        "collection tables": [],
        "mirror MERGE": [],
    }
    rows_read = []
    cpu = time.process_time()
    for batch_id, table in enumerate(tables):
        times = write_timed(sink, batch_id, table)
        rows_read.append(times.rows_read)
        phases["changelog append"].append(times.changelog)
        phases["mirror read+apply"].append(times.prepare)
        phases["collection tables"].append(times.collections)
        phases["mirror MERGE"].append(times.merge)
    cpu = time.process_time() - cpu
    sink.close()
    events = sum(table.num_rows for table in tables)
    print(
        f"\nsinks alone, layout {layout.value}, mirror workers {workers}, {len(tables)} batches "
        f"of up to {max(t.num_rows for t in tables)} events (median per batch; the first batch "
        "with workers starts them):"
    )
    for phase, seconds in phases.items():
        print(f"  {phase:18} {statistics.median(seconds) * 1000:7.0f} ms")
    total = sum(sum(seconds) for seconds in phases.values())
    print(
        f"  all phases: {events / total:,.0f} events/s, {total / events * 1e6:.1f} us/event "
        f"wall, {cpu / events * 1e6:.1f} us/event CPU in this process"
    )
    # An update's base is the stored document's text, parsed: what keeping BSON would save.
    stored = sink.mirror.read_all()["fullDocument"].drop_null().to_pylist()[: max(rows_read)]
    started = time.perf_counter()
    for text in stored:
        loads(text)
    print(
        f"  stored rows read per batch: median {statistics.median(rows_read):,.0f}; parsing "
        f"{len(stored):,} stored documents: {(time.perf_counter() - started) * 1000:.0f} ms"
    )
    # The small-file problem: a file (or more) per batch until compaction folds them.
    started = time.perf_counter()
    runs = TableMaintenance(1).run([root / "changelog", sink.mirror.path])
    took = time.perf_counter() - started
    counts = ", ".join(f"{Path(m.table).name} {m.files_before} -> {m.files_after}" for m in runs)
    print(f"  files after {len(tables)} batches, then one compaction ({took:.2f} s): {counts}")


def main(argv: list[str]) -> None:
    from shardstream.bench.corpus import corpus_files

    per_shard = int(argv[0]) if argv else 50_000
    batch = int(argv[1]) if len(argv) > 1 else 50_000
    work = scratch_directory("shardstream-sinks-")
    sinks_alone(corpus_files(work / "oplogs", per_shard), batch, work)


if __name__ == "__main__":
    main(sys.argv[1:])
