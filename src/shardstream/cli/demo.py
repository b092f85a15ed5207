"""``shardstream demo --no-spark``: a simulated 3-shard cluster's oplogs merged into one stream.

(``make demo`` runs :func:`run_spark_demo`: the same cluster through Spark into Delta
tables, :mod:`shardstream.spark.ingest.demo`; ``demo --sync`` serves a simulated cluster
live and syncs it into an emulated one, :mod:`shardstream.cli.demo_sync`.)

The simulator runs a seeded workload (inserts, ``$v:2`` updates, deletes,
multi-shard transactions, chunk migrations, DDL) on three shards and writes each
shard's ``oplog.bson``; shardstream merges them exactly as mongos would, and the
demo checks that applying the merged events rebuilds the cluster's true final data.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import TextIO

from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token import decode_token
from shardstream.resume_token.token_json import dumps, token_data_to_document
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.sim.apply_events import apply_events, encoded_state
from shardstream.transform import ChangeEvent, ChangeStreamOptions

SHOWN_EVENTS = 8


def run_demo(out: TextIO, *, seed: int = 7, operations: int = 400) -> int:
    """Simulate, merge, summarise; return 0 when the merged stream rebuilds the data."""
    config = SimulationConfig(seed=seed, shards=3, operations=operations)
    result = SimulatedCluster(config).run()
    with tempfile.TemporaryDirectory() as directory:
        paths = result.write_oplogs(Path(directory))
        shards = " ".join(f"--shard {name}={path.name}" for name, path in paths.items())
        print(f"simulated {config.shards} shards, {operations} operations (seed {seed}):", file=out)
        print(
            f"  {result.counters.migrations} chunk migrations, "
            f"{result.counters.multi_shard_transactions} multi-shard transactions, "
            f"{result.counters.equal_timestamps} equal timestamps across shards",
            file=out,
        )
        print(f"merging as: shardstream replay {shards}\n", file=out)
        options = ChangeStreamOptions(show_raw_update_description=True)
        sources = {name: FileOplogSource(name, str(path)) for name, path in paths.items()}
        stream = MergedStream(sources, options)
        events: list[ChangeEvent] = []
        last_mark = None
        while not stream.exhausted:
            batch, last_mark = stream.next_batch(1000)
            events += batch
    for event in events[:SHOWN_EVENTS]:
        print("  " + _line(event), file=out)
    print(f"  ... {len(events) - SHOWN_EVENTS} more\n", file=out)
    by_shard = Counter(event.shard for event in events)
    by_type = Counter(event.operation_type for event in events)
    print(
        "events per shard: " + ", ".join(f"{k} {v}" for k, v in sorted(by_shard.items())), file=out
    )
    print(
        "events per type:  " + ", ".join(f"{k} {v}" for k, v in sorted(by_type.items())), file=out
    )
    if last_mark is not None:
        final = token_data_to_document(decode_token(last_mark))
        print(f"final postBatchResumeToken: {last_mark.data}", file=out)
        print(f"  decoded: {dumps(final)}", file=out)
    rebuilt = encoded_state(apply_events(event.document for event in events))
    same = rebuilt == encoded_state(result.final_state)
    documents = sum(len(docs) for docs in rebuilt.values())
    verdict = "yes" if same else "NO"
    print(
        f"applying the merged events rebuilds the cluster's final data "
        f"({documents} documents, byte for byte): {verdict}",
        file=out,
    )
    return 0 if same else 1


def run_spark_demo(out: TextIO) -> int:
    """Simulate, ingest with Spark into a Delta change log and mirror, check both."""
    try:
        from shardstream.spark.ingest.demo import run_spark_demo as run
    except ImportError as exc:
        out.write(
            f"the Spark demo needs the spark extra (pip install 'shardstream[spark]'), "
            f"missing {exc.name!r}; `shardstream demo --no-spark` needs none\n"
        )
        return 1
    return run(out)


def _line(event: ChangeEvent) -> str:
    document = event.document
    ns = document.get("ns", {})
    key = document.get("documentKey", "")
    time = document["clusterTime"]
    return (
        f"{time.time}.{time.inc:<3} {event.shard or '':7} {event.operation_type:8} "
        f"{ns.get('db', '')}.{ns.get('coll', '')} {key}"
    )
