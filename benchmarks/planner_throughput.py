"""The Spark source's driver-side planning, on the fast path and on the reference path.

Run: ``.venv/bin/python -m benchmarks.planner_throughput [ENTRIES_PER_SHARD] [BATCH]``
(defaults 25000 and 10000). Four seeded benchmark-corpus files (ObjectId keys, which the
fast path writes itself; integer keys fall back to the reference per entry) are planned
batch by batch, as the driver does for every micro-batch, with ``fast_start`` on (the
default) and patched off; both must give the same number of events (the tests require the
same batches). No Spark runs: this is the driver's share of an ingest only.
"""

from __future__ import annotations

import sys
import time
from unittest import mock

from benchmarks.corpus import corpus_files
from benchmarks.timing import scratch_directory
from shardstream.spark.source import fast_start as fast_start_module
from shardstream.spark.source.batch_planner import BatchPlanner
from shardstream.spark.source.options import SourceSpec, parse_options
from shardstream.spark.source.shard_inputs import initial_offset


def plan_all(spec: SourceSpec, batch: int) -> tuple[int, float]:
    """Plan every batch of the input; return (events, seconds)."""
    planner = BatchPlanner(spec, split_every=batch)
    start = initial_offset(spec)
    events = 0
    began = time.perf_counter()
    while True:
        planned = planner.plan(start, max_events=batch)
        if not planned.events:
            break
        events += planned.events
        start = planned.end
    planner.close()
    return events, time.perf_counter() - began


def main() -> None:
    per_shard = int(sys.argv[1]) if len(sys.argv) > 1 else 25_000
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    directory = scratch_directory("shardstream-planner-")
    spec = parse_options({"oplog": corpus_files(directory, per_shard)})
    fast_events, fast_s = plan_all(spec, batch)
    # Every plan on the reference path.
    with mock.patch.object(fast_start_module, "fast_start", return_value=None):
        reference_events, reference_s = plan_all(spec, batch)
    assert fast_events == reference_events
    print(f"4 shards x {per_shard:,} entries, batches of {batch:,}: {fast_events:,} events")
    fast_rate, reference_rate = fast_events / fast_s, reference_events / reference_s
    print(f"  planner, fast path:      {fast_s:6.2f} s  {fast_rate:10,.0f} events/s")
    print(f"  planner, reference path: {reference_s:6.2f} s  {reference_rate:10,.0f} events/s")
    print(f"  fast / reference: {reference_s / fast_s:.1f}x")


if __name__ == "__main__":
    main()
