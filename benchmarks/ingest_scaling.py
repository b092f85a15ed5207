"""The ingest's sinks against their ceiling, the source into Spark's ``noop``, and how each
scales from one task slot to two.

Run from the repository root::

    .venv/bin/python -m benchmarks.ingest_scaling [PER_SHARD] [BATCH] [SINKS] [SOURCES] [REPEAT]

The benchmark corpus (4 BSON files, ObjectId keys) at PER_SHARD and 2 x PER_SHARD entries
per shard (25,000 by default), perShard, ``maxEventsPerTrigger`` BATCH (50,000: several
batches per run, so that the marginal rate holds per-batch costs too), each run a fresh
process (REPEAT runs of each, default 1, the one of median wall time reported), on
local[1] and local[2], into each SINK (default all), from each SOURCE (default files):

- ``files``: the BSON files (batches are windows planned from their ``ts`` indexes);
- ``live``: the same entries served by an emulated cluster in a process of its own
  (``cluster_process.py``; one per corpus size), read through the wire protocol
  (batches are windows planned from the shards' majority points and oplog counts).

Sinks:

- ``noop``: the source into Spark's ``noop`` sink (``spark_source_bound.py --one``);
- ``changelog``: ``ingest --no-mirror`` (the tasks write the change log, the driver commits);
- ``collections``: ``ingest`` (the default layout: each collection's typed mirror and SCD2
  history; the tasks rewrite the document state's buckets, 16, then other tasks merge each
  collection's tables; the driver commits the change log and the state);
- ``bucketed``: ``ingest --mirror-layout bucketed`` (the tasks also rewrite the mirror's
  buckets, 16; the driver commits both tables);
- ``single``: ``ingest --mirror-layout single`` (the rows collected to the driver, which
  writes both tables: the design the executors' writers replace).

Marginal rates (the events the larger corpus adds over the time it adds), and the CPU per
event, marginal too, of every process of a run (``timing.CpuByKind``; a live
source's emulated cluster is not among them), of the driver side (the driver's Python
process, where the tables are committed, and the Python workers Spark starts on the
driver: the streaming source's planner, the data sources' lookups; told apart from the
tasks' workers by what they run), of the driver's Python process alone, and of the
tasks' Python workers.  The planner's CPU per event is also measured on its own, in this
process, by planning the whole corpus with the same limit, next to what the merged planner
(the merge run in the driver, which the windows replace) spends on a live source.
From files, the marginal rate of ``replay --output-format bson --workers 2`` on the same
corpora (median of five runs per size) is the baseline of every sink's ``/ replay`` line.
Issue 27's T1 (a full ingest >= 0.5x noop), T2 (``noop`` >= 0.25x replay, at BATCH
200000), T3 (the change log >= 0.8x noop, local[2] >= 1.6x local[1]), T4 (the driver side's
CPU per event <= 2 us), T5 (a full ingest >= 0.12x replay) and T6 (a full ingest's local[2]
>= 1.5x its local[1]).
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cluster_process import ClusterProcess
from benchmarks.ingest_throughput import (
    SHARDS,
    SOURCE_OPTIONS,
    corpus_pair,
    count_events,
    replay_seconds,
    source_options,
    spark_child_json,
)
from benchmarks.timing import CpuByKind, cpu_split, machine_line
from shardstream.bench.emulated import CORPUS_START

MASTERS = ("local[1]", "local[2]")
SINKS = ("noop", "changelog", "collections", "bucketed", "single")
_LAYOUTS = {"collections": "collections", "bucketed": "bucketed", "single": "single"}
SOURCES = ("files", "live")


def _ingest(work: str, master: str, batch: str, sink: str) -> dict[str, Any]:
    """One ingest of the corpus in ``work`` into ``sink``'s tables, in this process."""
    from shardstream.spark.ingest import MirrorLayout
    from shardstream.spark.ingest.progress import IngestProgress
    from shardstream.spark.ingest.query import run_ingest
    from shardstream.spark.ingest.session import build_session
    from shardstream.spark.ingest.settings import IngestSettings

    spark = build_session(master)
    options = {
        **source_options(Path(work)),
        "partitionMode": "perShard",
        "maxEventsPerTrigger": batch,
    }
    settings = IngestSettings(
        # A new lakehouse per run: a repeat must not find the batches committed already.
        table=Path(tempfile.mkdtemp(prefix=f"lake-{sink}-{master[6]}-", dir=work)),
        source_options=options,
        bounded=True,
        mirror=sink != "changelog",
        mirror_layout=MirrorLayout(_LAYOUTS.get(sink, "bucketed")),
    )
    started, driver = time.perf_counter(), time.process_time()
    with CpuByKind() as usage:
        totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    wall = time.perf_counter() - started
    driver = time.process_time() - driver - usage.sampling
    spark.stop()
    return {"events": totals.events, "wall": wall, "driver": driver, **cpu_split(usage.spent())}


def _run(work: Path, master: str, sink: str, batch: str) -> dict[str, Any]:
    if sink == "noop":
        args = ["--one", str(work), master, "perShard", batch]
        return spark_child_json("benchmarks.spark_source_bound", args)
    return spark_child_json("benchmarks.ingest_scaling", ["--one", str(work), master, batch, sink])


def _serve(works: list[Path]) -> list[ClusterProcess]:
    """Serve each work directory's corpus from an emulated cluster; point its source there."""
    clusters = []
    for work in works:
        oplogs = [path.read_bytes() for path in sorted((work / "oplogs").glob("shard*.bson"))]
        cluster = ClusterProcess(SHARDS, oplogs)
        clusters.append(cluster)
        start = f"{CORPUS_START.time},{CORPUS_START.inc}"
        options = {"uri": cluster.uri, "startAtOperationTime": start}
        (work / SOURCE_OPTIONS).write_text(json.dumps(options))
    return clusters


def _planning_cpu(work: Path, batch: int, *, windows: bool) -> float:
    """CPU seconds this process spends planning every batch of ``work``'s source (the
    driver-side source runner's work), with windows or with the merged planner."""
    from shardstream.spark.source.batch_planner import BatchPlanner
    from shardstream.spark.source.live_window_planner import LiveWindowPlanner
    from shardstream.spark.source.offsets import StreamOffset
    from shardstream.spark.source.options import SourceKind, parse_options
    from shardstream.spark.source.shard_inputs import initial_offset, read_bound
    from shardstream.spark.source.window_planner import plan_window

    spec = parse_options({**source_options(work), "partitionMode": "perShard"})
    start, bound = initial_offset(spec), read_bound(spec, pin_now=True)
    live = LiveWindowPlanner(spec) if windows and spec.kind is SourceKind.LIVE else None
    merged = None if windows else BatchPlanner(spec, split_every=spec.events_per_partition)

    def plan(begin: StreamOffset) -> StreamOffset | None:
        if live is not None:
            return live.plan(
                begin, max_events=batch, max_bytes=None, bound=bound, wait_for_bound=True
            )
        if merged is not None:
            return merged.plan(begin, max_events=batch, bound=bound, wait_for_bound=True).end
        return plan_window(spec, begin, batch, bound)

    cpu = time.process_time()
    while (end := plan(start)) not in (start, None):
        assert end is not None
        start = end
    cpu = time.process_time() - cpu
    for planner in (live, merged):
        if planner is not None:
            planner.close()
    return cpu


def _median_run(work: Path, master: str, sink: str, batch: str, repeat: int) -> dict[str, Any]:
    """The run of median wall time among ``repeat`` runs (each a fresh process)."""
    runs = sorted((_run(work, master, sink, batch) for _ in range(repeat)), key=lambda r: r["wall"])
    return runs[len(runs) // 2]


def _sink_table(
    source: str, works: list[Path], sinks: list[str], batch: str, repeat: int
) -> dict[Any, float]:
    events = [count_events(work) for work in works]
    added = events[1] - events[0]
    print(f"\nsource: {source}")
    print(
        "| master | sink | wall s (small, large) | marginal events/s | CPU us/event, all "
        "processes | driver side us/event | of which the driver's Python process | tasks' "
        "Python workers us/event |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rates: dict[tuple[str, str], float] = {}
    for master in MASTERS:
        for sink in sinks:
            runs = [_median_run(work, master, sink, batch, repeat) for work in works]
            if [run["events"] for run in runs] != events:
                raise SystemExit(f"expected {events} events, got {[r['events'] for r in runs]}")
            rate = rates[(master, sink)] = added / (runs[1]["wall"] - runs[0]["wall"])
            per_event = {
                key: f"{(runs[1][key] - runs[0][key]) / added * 1e6:.1f}"
                for key in ("cpu", "driver_side", "driver", "tasks")
            }
            print(
                f"| {master} | {sink} | {runs[0]['wall']:.1f}, {runs[1]['wall']:.1f} | "
                f"{rate:,.0f} | {per_event['cpu']} | {per_event['driver_side']} | "
                f"{per_event['driver']} | {per_event['tasks']} |"
            )
    planners = [("windows", True)] + ([("merged planner", False)] if source == "live" else [])
    for label, windows in planners:
        spent = [_planning_cpu(work, int(batch), windows=windows) for work in works]
        print(
            f"{source}: planning ({label}) in the driver: {(spent[1] - spent[0]) / added * 1e6:.2f}"
            f" us/event marginal ({spent[0]:.2f} s, {spent[1]:.2f} s CPU)"
        )
    if source == "files":  # a live source has no replay of the same entries to compare
        replays = [replay_seconds(work) for work in works]
        replay_rate = added / (replays[1] - replays[0])
        print(
            f"files: replay --output-format bson --workers 2: {replays[0]:.2f} s, "
            f"{replays[1]:.2f} s; marginal {replay_rate:,.0f} events/s"
        )
        for (master, sink), rate in rates.items():
            print(
                f"files {sink} {master}: / replay = {rate / replay_rate:.3f}x "
                "(T2 >= 0.25x noop at 200000 per batch, T5 >= 0.12x full)"
            )
    for sink in sinks[1:]:
        for master in MASTERS:
            ratio = rates[(master, sink)] / rates[(master, "noop")]
            print(
                f"{source} {sink} {master}: / noop = {ratio:.2f}x (T1 >= 0.5x full, T3 >= 0.8x log)"
            )
        speedup = rates[("local[2]", sink)] / rates[("local[1]", sink)]
        print(
            f"{source} {sink}: local[2] / local[1] = {speedup:.2f}x "
            "(T3 >= 1.6x log, T6 >= 1.5x full)"
        )
    return rates


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(_ingest(argv[1], argv[2], argv[3], argv[4])))
        return
    per_shard = int(argv[0]) if argv else 25_000
    batch = argv[1] if len(argv) > 1 else "50000"
    sinks = argv[2].split(",") if len(argv) > 2 else list(SINKS)
    sources = argv[3].split(",") if len(argv) > 3 else ["files"]
    repeat = int(argv[4]) if len(argv) > 4 else 1
    if "noop" not in sinks or not set(sinks) <= set(SINKS):
        raise SystemExit(f"expected sinks among {SINKS}, noop included, got {sinks}")
    if not set(sources) <= set(SOURCES):
        raise SystemExit(f"expected sources among {SOURCES}, got {sources}")
    print(machine_line())
    print(
        f"benchmark corpus: {SHARDS} shards x {per_shard:,} and x {2 * per_shard:,} entries, "
        f"perShard, maxEventsPerTrigger {batch}; each figure from the run of median wall "
        f"time of {repeat}"
    )
    for source in sources:
        works = corpus_pair(per_shard, f"scaling-{source}")
        clusters = _serve(works) if source == "live" else []
        try:
            _sink_table(source, works, sinks, batch, repeat)
        finally:
            for cluster in clusters:
                cluster.close()


if __name__ == "__main__":
    main(sys.argv[1:])
