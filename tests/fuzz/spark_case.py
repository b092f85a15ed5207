"""The Spark source's readers on a fuzzed input, without a JVM.

The batch reader is driven as Spark drives it (plan the partitions on the driver, read
each on an executor) in both partition modes; the rows must be the reference stream's
rows (per-shard tasks in shard order, so rows are compared as a set keyed by token) or
the read must fail with the reference's error class.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

from shardstream.errors import ShardstreamError
from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.spark.source.data_source import ShardstreamBatchReader
from shardstream.spark.source.options import parse_options
from shardstream.spark.source.partitions import arrow_batches
from shardstream.transform import ChangeStreamOptions
from tests.fuzz.harness import deadline, write_shards
from tests.fuzz.mutators import Shards, mutate

Failures = list[tuple[str, str]]
_SECONDS = 30.0


def _rows(read: Any) -> tuple[str, list[dict[str, Any]]]:
    """("ok", rows sorted by token) or ("ErrorClass", [])."""
    try:
        with deadline(_SECONDS):
            rows = [row for batch in read() for row in batch.to_pylist()]
    except ShardstreamError as exc:
        return type(exc).__name__, []
    return "ok", sorted(rows, key=lambda row: (row["_id"], row["shard"] or ""))


def spark_case(rng: random.Random, corpus: Shards, directory: Path) -> Failures:
    """A mutated corpus through the source's batch reader, merged and per shard.

    The first shard alone must give the reference's verdict exactly (its error class where
    it fails). All shards together must agree on success and rows; where both fail, the
    error may be another shard's: tasks read shards in any order, as mongos reports
    whichever shard's cursor fails first.
    """
    shards = copy.deepcopy(corpus)
    what = mutate(rng, shards)
    paths = [tuple(arg.split("=", 1)) for arg in write_shards(directory, shards)]
    failures: Failures = []
    for layout in (paths[:1], paths):
        expected = _rows(lambda layout=layout: _reference_rows(layout))  # type: ignore[misc]
        for mode in ("merged", "pershard"):
            got = _spark_rows(layout, mode)
            label = f"spark {mode} {len(layout)} shard(s) after {what}"
            if got[0].startswith("traceback"):
                failures.append((label, got[0]))
            elif (got[0] == "ok") != (expected[0] == "ok") or (
                len(layout) == 1 and got[0] != expected[0]
            ):
                failures.append((label, f"verdict {got[0]}, reference {expected[0]}"))
            elif got[1] != expected[1]:
                failures.append((label, "exit 0 with different output (rows differ)"))
    return failures


def _reference_rows(paths: list[tuple[str, str]]) -> Any:
    """The reference merge's rows; one file too is a one-shard cluster to the source."""
    sources = {name: FileOplogSource(name, path) for name, path in paths}
    merged = MergedStream(sources, ChangeStreamOptions())
    try:
        while not merged.exhausted:
            yield from arrow_batches(merged.next_batch(1000)[0], relaxed=False)
    finally:
        merged.close()


def _spark_rows(paths: list[tuple[str, str]], mode: str) -> tuple[str, list[dict[str, Any]]]:
    oplog = ",".join(f"{name}={path}" for name, path in paths)
    reader = ShardstreamBatchReader(parse_options({"oplog": oplog, "partitionMode": mode}))

    def read() -> Any:
        for partition in reader.partitions():
            yield from reader.read(partition)

    try:
        return _rows(read)
    except Exception as exc:  # not a ShardstreamError: a traceback
        return f"traceback: {exc!r}"[:500], []
