"""The Spark source's own work, without Spark: planning on the driver, reading in the tasks.

Run: ``.venv/bin/python -m benchmarks.spark_source_throughput [ENTRIES]``.

A simulated 4-shard cluster (migrations, multi-shard transactions; ``ENTRIES`` workload
operations, 5,000 by default) is read through the stream reader as Spark's runner would:

* plan: ``latestOffset`` for the whole stream (the driver runs the merge, no rows);
* merged task: the one task of merged mode (merge + Arrow rows);
* per-shard tasks: the shards' tasks, each timed; "1 core" is their sum, "shards in
  parallel" their slowest (what a cluster with a core per shard would wait for);
* the same reads in batches of ``maxEventsPerTrigger`` 1,000 (each task re-opens the stream
  after its start watermark).

Each figure is events/s, the median of 3 runs, with the spread.

``--files PER_SHARD`` runs the same reads over the benchmark corpus written as 4 BSON files
(ObjectId keys, the fast path): merged mode plans by the merge, per-shard mode in cluster-time
windows from the files' ``ts`` indexes; batches of ``maxEventsPerTrigger`` 50,000.  The plan
row is then the time of every ``latestOffset`` call of the whole run.
"""

from __future__ import annotations

import platform
import sys
import time
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from benchmarks.timing import median_rate, scratch_directory
from shardstream.spark.source.batch_planner import BatchPlanner
from shardstream.spark.source.data_source import ShardstreamStreamReader
from shardstream.spark.source.options import parse_options
from shardstream.spark.source.shard_inputs import initial_offset
from shardstream.spark.source.simulated_input import simulated_run

REPEATS = 3


def _options(entries: int, mode: str) -> dict[str, str]:
    return {"simulate": "true", "shards": "4", "entries": str(entries), "partitionMode": mode}


def _plan(entries: int) -> int:
    """Plan the whole stream as one batch, as the driver does; return its events."""
    spec = parse_options(_options(entries, "merged"))
    planner = BatchPlanner(spec, split_every=spec.events_per_partition)
    try:
        return planner.plan(initial_offset(spec), max_events=None).events
    finally:
        planner.close()


def _read(
    entries: int, mode: str, limit: ReadLimit, files: str | None = None
) -> tuple[int, float, float, float]:
    """Plan every batch, then time each task; return (events, sum of tasks, slowest per
    batch, planning)."""
    options = _options(entries, mode) if files is None else {"oplog": files, "partitionMode": mode}
    reader = ShardstreamStreamReader(parse_options(options))
    start = reader.initialOffset()
    events, total, slowest, planning = 0, 0.0, 0.0, 0.0
    while True:
        began = time.perf_counter()
        end = reader.latestOffset(start, limit)
        planning += time.perf_counter() - began
        if end == start:
            break
        durations = []
        for partition in reader.partitions(start, end):
            began = time.perf_counter()
            events += sum(batch.num_rows for batch in reader.read(partition))
            durations.append(time.perf_counter() - began)
        total += sum(durations)
        slowest += max(durations)
        start = end
    reader.stop()
    return events, total, slowest, planning


def _tasks(
    entries: int, mode: str, limit: ReadLimit, files: str | None = None
) -> dict[str, tuple[float, float]]:
    one_core, parallel, plans = [], [], []
    for _ in range(REPEATS):
        events, total, slowest, planning = _read(entries, mode, limit, files)
        one_core.append(events / total)
        parallel.append(events / slowest)
        plans.append(events / planning)
    return {
        "1 core": _median(one_core),
        "shards in parallel": _median(parallel),
        "plan": _median(plans),
    }


def _files(per_shard: int) -> None:

    from benchmarks.corpus import corpus_files

    files = corpus_files(scratch_directory("shardstream-source-"), per_shard)
    print(
        f"python {platform.python_version()}, {platform.machine()}; benchmark corpus, 4 BSON "
        f"files x {per_shard:,} entries; batches of 50,000"
    )
    limit = ReadMaxRows(50_000)
    for mode, label in (("merged", "merged"), ("perShard", "per-shard windows")):
        measured = _tasks(0, mode, limit, files)
        names = ("plan", "1 core") if mode == "merged" else tuple(measured)
        for key in names:
            rate, spread = measured[key]
            name = f"{label}: {'driver plan' if key == 'plan' else 'tasks, ' + key}"
            print(f"{name:52} {rate:10,.0f} events/s  spread {spread:5.1%}")


def _median(rates: list[float]) -> tuple[float, float]:
    ordered = sorted(rates)
    median = ordered[len(ordered) // 2]
    return median, (ordered[-1] - ordered[0]) / median


def main(argv: list[str]) -> None:
    if argv[:1] == ["--files"]:
        _files(int(argv[1]))
        return
    entries = int(argv[0]) if argv else 5000
    config = parse_options(_options(entries, "merged")).simulation
    assert config is not None
    began = time.perf_counter()
    result = simulated_run(config)
    print(
        f"python {platform.python_version()}, {platform.machine()}; simulated 4 shards, "
        f"{entries} operations ({sum(result.counters.entries.values())} oplog entries, "
        f"{result.counters.migrations} migrations, "
        f"{result.counters.multi_shard_transactions} multi-shard transactions) "
        f"in {time.perf_counter() - began:.1f} s"
    )
    rate, spread, events = median_rate(lambda: _plan(entries), REPEATS)
    print(f"{'plan (driver, whole stream)':52} {rate:10,.0f} events/s  spread {spread:5.1%}")
    for label, limit in (
        ("all available", ReadAllAvailable()),
        ("batches of 1000", ReadMaxRows(1000)),
    ):
        rows: list[tuple[str, Any]] = [("merged task", _tasks(entries, "merged", limit)["1 core"])]
        per_shard = _tasks(entries, "pershard", limit)
        rows += [(f"per-shard tasks, {key}", value) for key, value in per_shard.items()]
        for name, (rate, spread) in rows:
            print(f"{name + ', ' + label:52} {rate:10,.0f} events/s  spread {spread:5.1%}")
    print(f"events: {events}")


if __name__ == "__main__":
    main(sys.argv[1:])
