"""What a micro-batch costs whatever its size: the source into ``noop`` at three batch sizes.

Run from the repository root::

    .venv/bin/python -m benchmarks.batch_size_cost [PER_SHARD]

The benchmark corpus (4 BSON files, PER_SHARD entries each, 50,000 by default) read by
``readStream.format("shardstream")`` into Spark's ``noop`` sink (local[2], perShard), each
run a fresh process (``spark_source_bound.py --one``), with ``maxEventsPerTrigger`` 10,000
(the ingest's default before issue 27), 50,000, and the ingest's default now (no event
count; ``maxBytesPerTrigger`` 64 MiB).  Per run: micro-batches, the query's wall time, and
the CPU time every process of the run spent during the query (the driver, its JVM, the
Python workers: ``timing.process_tree_cpu``, from ``/proc``).
The per-batch cost is the slope of CPU over batches between the smallest and the largest
batches: the same events, so what differs is what each batch costs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchmarks.corpus import corpus_files
from benchmarks.ingest_throughput import SHARDS, spark_child_json
from benchmarks.timing import machine_line, scratch_directory

BATCHES = ("10000", "50000", "default")


def _run(work: Path, batch: str) -> dict[str, Any]:
    return spark_child_json(
        "benchmarks.spark_source_bound", ["--one", str(work), "local[2]", "perShard", batch]
    )


def main(argv: list[str]) -> None:
    per_shard = int(argv[0]) if argv else 50_000
    work = scratch_directory("shardstream-batch-cost-")
    (work / "oplog-option").write_text(corpus_files(work / "oplogs", per_shard, SHARDS))
    print(machine_line())
    print(f"benchmark corpus: {SHARDS} shards x {per_shard:,} entries; local[2] perShard -> noop")
    print("| batch size | micro-batches | events | wall s | CPU s, all processes | CPU us/event |")
    print("|---|---|---|---|---|---|")
    runs = {}
    for batch in BATCHES:
        run = runs[batch] = _run(work, batch)
        print(
            f"| {batch} | {run['batches']} | {run['events']:,} | {run['wall']:.1f} | "
            f"{run['cpu']:.1f} | {run['cpu'] / run['events'] * 1e6:.1f} |"
        )
    small, large = runs[BATCHES[0]], runs[BATCHES[-1]]
    if small["batches"] > large["batches"]:
        per_batch = (small["cpu"] - large["cpu"]) / (small["batches"] - large["batches"])
        print(f"CPU per micro-batch (slope, {BATCHES[0]} against {BATCHES[-1]}): {per_batch:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
