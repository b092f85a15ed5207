"""The ceiling Spark puts on an ingest: the ``shardstream`` source into Spark's ``noop`` sink.

Run from the repository root::

    .venv/bin/python -m benchmarks.spark_source_bound [PER_SHARD] [BATCH]

The benchmark corpus (4 BSON files, ObjectId keys) at PER_SHARD and 2 x PER_SHARD entries
per shard (25,000 by default), read by ``readStream.format("shardstream")`` with
``maxEventsPerTrigger`` BATCH (50,000; ``default``: the ingest's, no event count and
``maxBytesPerTrigger`` 64 MiB) and ``availableNow`` into ``writeStream.format("noop")``:
Spark plans, runs the source's tasks and takes in their Arrow batches, and writes nothing.
Each run is a fresh process; the marginal rate is the events the larger corpus adds over
the query time it adds (start-up cancels out), next to ``replay --output-format bson
--workers 2`` on the same files.  No sink can make ``ingest_throughput.py --marginal`` beat
this rate: it is the rate of everything but the sink.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.ingest_throughput import (
    SHARDS,
    corpus_pair,
    count_events,
    replay_seconds,
    source_options,
    spark_child_json,
)
from benchmarks.timing import CpuByKind, cpu_split, machine_line
from shardstream.cli.ingest import DEFAULT_MAX_BYTES_PER_BATCH

CONFIGS = [
    ("local[1]", "perShard"),
    ("local[2]", "perShard"),
    ("local[1]", "merged"),
    ("local[2]", "merged"),
]


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(_one(argv[1], argv[2], argv[3], argv[4])))
        return
    per_shard = int(argv[0]) if argv else 25_000
    batch = argv[1] if len(argv) > 1 else "50000"
    works = corpus_pair(per_shard, "bound")
    events = [count_events(work) for work in works]
    replays = [replay_seconds(work) for work in works]
    replay_rate = (events[1] - events[0]) / (replays[1] - replays[0])
    print(machine_line())
    print(
        f"benchmark corpus: {SHARDS} shards x {per_shard:,} and x {2 * per_shard:,} entries "
        f"({events[0]:,} and {events[1]:,} events); maxEventsPerTrigger {batch}"
    )
    print(f"replay --output-format bson --workers 2: marginal {replay_rate:,.0f} events/s")
    print("| master | partitions | wall s (small, large) | marginal events/s | / replay |")
    print("|---|---|---|---|---|")
    for master, mode in CONFIGS:
        runs = [_in_new_process(work, master, mode, batch) for work in works]
        if [run["events"] for run in runs] != events:
            raise SystemExit(f"expected {events} events read, got {[r['events'] for r in runs]}")
        rate = (events[1] - events[0]) / (runs[1]["wall"] - runs[0]["wall"])
        print(
            f"| {master} | {mode} | {runs[0]['wall']:.1f}, {runs[1]['wall']:.1f} | "
            f"{rate:,.0f} | {rate / replay_rate:.3f}x |"
        )


def _in_new_process(work: Path, master: str, mode: str, batch: str) -> dict[str, Any]:
    return spark_child_json(
        "benchmarks.spark_source_bound", ["--one", str(work), master, mode, batch]
    )


def _fresh_checkpoint(work: str, name: str) -> str:
    """A new checkpoint directory in ``work``: a run of the same settings before must not
    leave this one its offsets (it would resume at the end and read nothing)."""
    return tempfile.mkdtemp(prefix=f"{name}-", dir=work)


def _one(work: str, master: str, mode: str, batch: str) -> dict[str, Any]:
    from shardstream.spark import register
    from shardstream.spark.ingest.session import build_session

    spark = build_session(master)
    register(spark)
    options = {
        **source_options(Path(work)),
        "partitionMode": mode,
        "jsonFormat": "canonical",  # as the ingest reads it
    }
    if batch == "default":  # the ingest's: no event count, its byte cap sizes the batches
        options["maxBytesPerTrigger"] = str(DEFAULT_MAX_BYTES_PER_BATCH)
    else:
        options["maxEventsPerTrigger"] = batch
    events = spark.readStream.format("shardstream").options(**options).load()
    started = time.perf_counter()
    driver = time.process_time()
    with CpuByKind() as usage:
        query = (
            events.writeStream.format("noop")
            .option(
                "checkpointLocation", _fresh_checkpoint(work, f"noop-{master[6]}-{mode}-{batch}")
            )
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    wall = time.perf_counter() - started
    driver = time.process_time() - driver - usage.sampling
    read = sum(progress["numInputRows"] for progress in query.recentProgress)
    batches = sum(1 for progress in query.recentProgress if progress["numInputRows"])
    spark.stop()
    return {
        "events": read,
        "wall": wall,
        "batches": batches,
        "driver": driver,
        **cpu_split(usage.spent()),
    }


if __name__ == "__main__":
    main(sys.argv[1:])
