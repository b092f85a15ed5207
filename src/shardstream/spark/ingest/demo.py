"""What ``make demo`` shows: a simulated 3-shard cluster → Spark → Delta change log + mirror.

The simulator runs a seeded workload (inserts, ``$v:2`` updates, deletes, multi-shard
transactions, chunk migrations) on three shards and writes each shard's oplog as a BSON
file (as ``mongodump`` of ``local.oplog.rs`` would); ``shardstream ingest --shard`` streams
the merged change stream through Spark in micro-batches into ``<root>/changelog`` and
a typed table per collection, ``<root>/mirror/<db>/<coll>``, with its SCD2 history and
change data feed; it shows a few typed rows, one document's history and a batch's change
feed, then checks, without Spark, that the change log holds every event of the
mongos-identical stream exactly once and that the mirror tables equal the cluster's true
final data, document by document, as BSON bytes (their ``_doc`` column).
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from shardstream.merger import MergedStream
from shardstream.sim import (
    SimulatedCluster,
    SimulationConfig,
    SimulationResult,
    simulated_sources,
)
from shardstream.sim.apply_events import encoded_state
from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.mirror.check import (
    changelog_difference,
    collections_state,
    read_table,
)
from shardstream.spark.ingest.demo_tables import show_collections
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.session import spark_session
from shardstream.spark.ingest.settings import IngestSettings
from shardstream.transform import ChangeStreamOptions

# Three micro-batches of the 1,742 events: enough to show batches following each other,
# few enough that their fixed cost (~2 s each on 2 cores, whatever their size) does not
# make the demo's ingest.
DEMO_BATCH = 600
# A lakehouse of a few hundred documents: 4 buckets (docs/lakehouse.md sizes B from the largest
# collection's expected size; the default, 16, would write 16 files per table a batch).
DEMO_BUCKETS = 4


def demo_settings(
    target: Path, oplogs: Mapping[str, Path], *, batch: int = DEMO_BATCH
) -> IngestSettings:
    """The demo's ingest of the simulated cluster's ``oplogs`` (a file per shard) into
    ``target``: ``shardstream ingest`` with :func:`demo_flags`."""
    options = {
        "oplog": ",".join(f"{name}={path}" for name, path in oplogs.items()),
        "maxEventsPerTrigger": str(batch),
    }
    return IngestSettings(
        table=target, source_options=options, bounded=True, mirror_buckets=DEMO_BUCKETS
    )


def demo_flags(target: Path, oplogs: Mapping[str, Path]) -> str:
    """The ``shardstream ingest`` flags :func:`demo_settings` stands for."""
    shards = " ".join(f"--shard {name}={path}" for name, path in oplogs.items())
    return (
        f"--table {target} {shards} --max-events-per-batch {DEMO_BATCH} "
        f"--mirror-buckets {DEMO_BUCKETS}"
    )


def run_spark_demo(
    out: TextIO,
    *,
    seed: int = 7,
    operations: int = 1000,
    root: Path | None = None,
    master: str = "local[2]",
) -> int:
    """Simulate, ingest with Spark, check; return 0 when both tables are right."""
    config = SimulationConfig(seed=seed, shards=3, operations=operations)
    result = SimulatedCluster(config).run()
    counters = result.counters
    out.write(
        f"simulated {config.shards} shards, {operations} operations (seed {seed}): "
        f"{counters.migrations} chunk migrations, {counters.transactions} transactions "
        f"({counters.multi_shard_transactions} multi-shard)\n"
    )
    expected = _merged_tokens(result)
    target = root or Path(tempfile.mkdtemp(prefix="shardstream-demo-")) / "lakehouse"
    oplogs = result.write_oplogs(target.parent / "oplogs")
    out.write(f"ingesting as: shardstream ingest {demo_flags(target, oplogs)}\n")
    out.flush()
    settings = demo_settings(target, oplogs)
    with spark_session(master) as spark:
        totals = run_ingest(spark, settings, IngestProgress(sys.stderr))
    out.write(f"{totals.batches} micro-batches, {totals.events} events\n\n")
    changelog = read_table(target, CHANGELOG_TABLE)
    kinds = Counter(changelog["operationType"].to_pylist())
    out.write(f"{target / CHANGELOG_TABLE}: {changelog.num_rows} rows (")
    out.write(", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) + ")\n")
    show_collections(out, target)
    difference = changelog_difference(changelog, expected)
    out.write(
        f"\nthe change log holds each of the stream's {len(expected)} events exactly once: "
        f"{'yes' if not difference else f'NO {difference}'}\n"
    )
    truth = encoded_state(result.final_state)
    same = collections_state(target) == truth
    documents = sum(len(docs) for docs in truth.values())
    out.write(
        f"the mirror tables equal the cluster's final data ({documents} documents, byte for "
        f"byte through _doc): {'yes' if same else 'NO'}\n"
    )
    return 0 if same and not difference else 1


def _merged_tokens(result: SimulationResult) -> list[str]:
    """The mongos-identical stream's tokens, merged in pure Python (the reference)."""
    stream = MergedStream(simulated_sources(result, seed=0), ChangeStreamOptions())
    tokens: list[str] = []
    while not stream.exhausted:
        tokens += [event.token.data for event in stream.next_batch(1000)[0]]
    stream.close()
    return tokens
