"""Merger throughput on one core: the heap and gate alone, and replay end to end.

Run: ``.venv/bin/python -m benchmarks.merger_throughput [ENTRIES_PER_SHARD] [heap]``
(``heap``: the heap and gate only).

* heap + gate: events already transformed, fed to AsyncResultsMerger in batches of
  100 per shard with promises, popped in order one by one (ready/next_ready) and in
  batches (pop_ready), 4 and 16 shards;
* end to end: 4 shards' oplog.bson files merged by MergedStream (decode, transform,
  merge), and with Extended JSON output as ``shardstream replay`` writes it;
both next to ``bson.decode_file_iter``-to-dicts of the same bytes, as a ratio.
Each figure is the median of 3 runs, with the spread.
"""

from __future__ import annotations

import io
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bson
import pymongo

from benchmarks.corpus import oplog_bytes
from benchmarks.timing import median_rate
from shardstream.merger import AsyncResultsMerger, MergedStream
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token import ResumeToken
from shardstream.transform import (
    ChangeEvent,
    ChangeStreamOptions,
    ShardPipeline,
    event_to_json,
)

REPEATS = 3
BATCH = 100


def _shard_events(data: bytes) -> list[tuple[list[ChangeEvent], ResumeToken]]:
    """One shard's events cut into batches, each with the promise a shard would send."""
    pipeline = ShardPipeline(ChangeStreamOptions(merged_by_router=True), single_shard=False)
    events = [
        event
        for entry in bson.decode_file_iter(io.BytesIO(data), OPLOG_CODEC_OPTIONS)
        for event in pipeline.process(entry)
    ]
    return [
        (events[i : i + BATCH], events[min(i + BATCH, len(events)) - 1].token)
        for i in range(0, len(events), BATCH)
    ]


def heap_and_gate(
    shards: int, per_shard: int, *, batched: bool = False
) -> tuple[float, float, int]:
    """Events/s through add_batch + next_ready (or pop_ready, ``batched``) alone."""
    batches = shard_event_batches(shards, per_shard)
    return median_rate(
        lambda: drain_merger(batches, batched=batched), REPEATS, clock=time.process_time
    )


def shard_event_batches(
    shards: int, per_shard: int
) -> dict[str, list[tuple[list[ChangeEvent], ResumeToken]]]:
    """Each shard's transformed events in batches with their promises (seeds 0..shards-1)."""
    return {f"s{n}": _shard_events(oplog_bytes(per_shard, seed=n)) for n in range(shards)}


def drain_merger(
    batches: dict[str, list[tuple[list[ChangeEvent], ResumeToken]]], *, batched: bool = False
) -> int:
    """Feed every shard's batches to a fresh AsyncResultsMerger and pop all; the count."""
    merger = AsyncResultsMerger()
    for name in batches:
        merger.add_remote(name)
    cursors = dict.fromkeys(batches, 0)
    popped = 0
    while not merger.drained():
        for name, shard_batches in batches.items():
            if merger.needs_data(name):
                index = cursors[name]
                events, promise = shard_batches[index]
                cursors[name] = index + 1
                merger.add_batch(name, events, promise, exhausted=index + 1 == len(shard_batches))
        if batched:
            while released := merger.pop_ready(1000):
                popped += len(released)
        else:
            while merger.ready():
                merger.next_ready()
                popped += 1
    return popped


def end_to_end(shards: int, per_shard: int, directory: Path) -> None:
    """Replay of ``shards`` oplog files, against decoding the same bytes."""
    paths = []
    for n in range(shards):
        path = directory / f"shard{n}.bson"
        path.write_bytes(oplog_bytes(per_shard, seed=n))
        paths.append(path)
    total_bytes = sum(path.stat().st_size for path in paths)

    def decode() -> int:
        count = 0
        for path in paths:
            with path.open("rb") as handle:
                count += sum(1 for _ in bson.decode_file_iter(handle, OPLOG_CODEC_OPTIONS))
        return count

    def merged(render: bool) -> Callable[[], int]:
        def run() -> int:
            sources = {p.stem: FileOplogSource(p.stem, str(p)) for p in paths}
            stream = MergedStream(sources, ChangeStreamOptions())
            count = 0
            while not stream.exhausted:
                events, _ = stream.next_batch(1000)
                for event in events:
                    if render:
                        event_to_json(event.document)
                    count += 1
            return count

        return run

    decode_rate, spread, entries = median_rate(decode, REPEATS)
    print(f"  {shards} shards, {entries:,} entries, {total_bytes / entries:.0f} bytes/entry")
    print(f"    decode_file_iter to dicts    {decode_rate:10,.0f} entries/s  spread {spread:5.1%}")
    for name, run in (("merged replay", merged(False)), ("merged replay + JSON", merged(True))):
        rate, spread, events = median_rate(run, REPEATS)
        print(
            f"    {name:28s} {rate:10,.0f} events/s   spread {spread:5.1%}  "
            f"({events:,} events; {rate / decode_rate:.2f}x the decode rate)"
        )


def main(argv: list[str]) -> int:
    per_shard = int(argv[0]) if argv else 25_000
    heap_only = argv[1:] == ["heap"]
    print(
        f"python {platform.python_version()}, pymongo {pymongo.version} "
        f"(C extension: {bson.has_c()}), {platform.machine()}, one core"
    )
    print("heap + gate (events already transformed), per CPU-second of this process:")
    for shards in (4, 16):
        for batched in (False, True):
            how = "pop_ready(1000)" if batched else "ready/next_ready"
            rate, spread, events = heap_and_gate(
                shards, per_shard // (shards // 4), batched=batched
            )
            print(
                f"  {shards:2d} shards, {how:16s} {rate:12,.0f} events/s  spread {spread:5.1%}"
                f"  ({events:,} events)"
            )
    if heap_only:
        return 0
    print("end to end:")
    with tempfile.TemporaryDirectory() as directory:
        end_to_end(4, per_shard, Path(directory))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
