"""The mirror's cost per batch as it grows: no Spark, the sinks batch after batch.

Run from the repository root::

    .venv/bin/python -m benchmarks.mirror_growth [PER_SHARD] [BATCH] [OPTIMIZE_EVERY]

The benchmark corpus (4 BSON files, ObjectId keys, PER_SHARD entries each, 250,000 by
default: about a million events) merged in process and cut into Arrow batches of BATCH
events (50,000), written into :class:`~shardstream.spark.delta.sink.LakehouseSink` on fresh
tables, compacted every OPTIMIZE_EVERY batches (5; ``--optimize-every``'s work). Printed per
batch: the change-log append, the mirror's preparation (keyed read and apply) and MERGE, the
compaction when it runs, and the mirror's size after it (rows, MiB, data files).  The corpus
updates documents picked uniformly from all live ones, so every batch touches rows all over
the mirror: the case where copy-on-write (a MERGE rewrites every file holding a touched row;
delta-rs writes no deletion vectors) costs the most.  The last lines fit the MERGE's time
per batch against the mirror's size.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from benchmarks.sink_phases import merged_tables, write_timed
from benchmarks.timing import scratch_directory
from shardstream.spark.delta.maintenance import TableMaintenance
from shardstream.spark.delta.sink import LakehouseSink

_MIB = 1 << 20


def mirror_size(path: Path) -> tuple[int, int, int]:
    """The mirror's (rows, bytes, data files) from its Delta log (no data read)."""
    files = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    rows = pc.sum(files["num_records"]).as_py() or 0
    size = pc.sum(files["size_bytes"]).as_py() or 0
    return rows, size, files.num_rows


def grow(tables: list[pa.Table], root: Path, optimize_every: int) -> list[tuple[int, float]]:
    """Write every batch; print its phases; return (mirror rows before, MERGE s) per batch."""
    sink = LakehouseSink(root, "bench")
    maintenance = TableMaintenance(optimize_every)
    print(
        "batch  events  changelog ms  read+apply ms  MERGE ms  compact ms  "
        "mirror rows  mirror MiB  files"
    )
    merges: list[tuple[int, float]] = []
    rows = 0
    for batch_id, table in enumerate(tables):
        times = write_timed(sink, batch_id, table)
        written = time.perf_counter()
        if maintenance.due(batch_id):
            maintenance.run([sink.changelog.path, sink.mirror.path])
        maintained = time.perf_counter()
        merges.append((rows, times.merge))
        rows, size, files = mirror_size(sink.mirror.path)
        print(
            f"{batch_id:5}  {table.num_rows:6}  {times.changelog * 1000:12.0f}  "
            f"{times.prepare * 1000:13.0f}  {times.merge * 1000:8.0f}  "
            f"{(maintained - written) * 1000:10.0f}  "
            f"{rows:11,}  {size / _MIB:10.1f}  {files:5}"
        )
    sink.close()
    return merges


def report_slope(merges: list[tuple[int, float]]) -> None:
    """The MERGE's time against the mirror's size (least squares), first batch left out."""
    points = merges[1:]
    if len(points) < 2:
        return
    slope, intercept = statistics.linear_regression(
        [rows for rows, _ in points], [seconds for _, seconds in points]
    )
    print(
        f"MERGE per batch ~ {intercept * 1000:.0f} ms + {slope * 1e8:.0f} ms per 100,000 "
        f"mirror rows (least squares over batches 1-{len(merges) - 1})"
    )


def main(argv: list[str]) -> None:
    from shardstream.bench.corpus import corpus_files

    per_shard = int(argv[0]) if argv else 250_000
    batch = int(argv[1]) if len(argv) > 1 else 50_000
    optimize_every = int(argv[2]) if len(argv) > 2 else 5
    work = scratch_directory("shardstream-growth-")
    tables = merged_tables(corpus_files(work / "oplogs", per_shard), batch)
    report_slope(grow(tables, work / "tables", optimize_every))


if __name__ == "__main__":
    main(sys.argv[1:])
