"""pytest-benchmark suite for the replay stages and end to end (run with ``make bench``).

Small inputs, so that the suite runs in about a minute; the scripts next to it
(``replay_throughput.py``, ``merger_throughput.py``...) measure the 10^6-entry corpus.
Each group has the ``decode_file_iter``-to-dicts baseline of the same bytes, so the
comparison table pytest-benchmark prints reads as a ratio (inside pytest the baseline
pays more for the cyclic collector, which sees the test session's objects, than in the
scripts' fresh processes: the scripts' ratios are the ones benchmarks/README.md reports).
Every benchmark also checks what it computed (counts, bytes), so a broken stage fails
instead of timing nothing.
"""

from __future__ import annotations

import io
from pathlib import Path

import bson
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks.merger_throughput import drain_merger, shard_event_batches
from shardstream.bench.corpus import oplog_bytes
from shardstream.bench.offline import Shards, count_entries, replay_in_process
from shardstream.merger.raw.encoded_merge import merge_encoded
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.oplog.raw_file_reader import frame_documents
from shardstream.replay.shard_workers import shard_batches
from shardstream.transform import ChangeStreamOptions, transform_oplog
from shardstream.transform.raw.encoded_stream import quiet_collector
from shardstream.transform.raw.pipeline import FastShardPipeline

ENTRIES = 20_000  # one shard's entries for the transform group
PER_SHARD = 5_000  # per shard, 4 shards, for the merge and end-to-end groups
OPTIONS = ChangeStreamOptions()


@pytest.fixture(scope="module")
def one_shard() -> list[bytes]:
    """One shard's corpus entries as raw BSON documents."""
    documents, used = frame_documents(oplog_bytes(ENTRIES, seed=0))
    assert len(documents) == ENTRIES
    assert used > 0
    return documents


@pytest.fixture(scope="module")
def four_shards(tmp_path_factory: pytest.TempPathFactory) -> Shards:
    """Four shards' corpus files."""
    directory: Path = tmp_path_factory.mktemp("corpus")
    shards = []
    for seed in range(4):
        path = directory / f"shard{seed}.bson"
        path.write_bytes(oplog_bytes(PER_SHARD, seed=seed))
        shards.append((f"shard{seed}", str(path)))
    return shards


def _decode_all(documents: list[bytes]) -> int:
    data = b"".join(documents)
    return sum(1 for _ in bson.decode_file_iter(io.BytesIO(data), OPLOG_CODEC_OPTIONS))


@pytest.mark.benchmark(group="transform: one shard")
def test_decode_file_iter_baseline(benchmark: BenchmarkFixture, one_shard: list[bytes]) -> None:
    """The baseline: the same bytes decoded to dicts, streaming."""
    assert benchmark(_decode_all, one_shard) == ENTRIES


@pytest.mark.benchmark(group="transform: one shard")
def test_fast_path_transform(benchmark: BenchmarkFixture, one_shard: list[bytes]) -> None:
    """Raw entries to encoded events (sort keys + event BSON), the fast path."""

    def run() -> int:
        pipeline = FastShardPipeline(OPTIONS)
        keys: list[bytes] = []
        events: list[bytes] = []
        with quiet_collector():
            pipeline.process_batch(one_shard, keys, events)
        assert pipeline.reference_entries < ENTRIES // 20  # the fast path did the work
        return len(events)

    assert benchmark(run) > ENTRIES  # transactions give several events per entry


@pytest.mark.benchmark(group="transform: one shard")
def test_reference_transform(benchmark: BenchmarkFixture, one_shard: list[bytes]) -> None:
    """Decode every entry and run the reference pipeline (a tenth of the entries)."""
    tenth = one_shard[: ENTRIES // 10]

    def run() -> int:
        entries = (bson.decode(doc, codec_options=OPLOG_CODEC_OPTIONS) for doc in tenth)
        return sum(1 for _ in transform_oplog(entries, OPTIONS))

    assert benchmark(run) >= len(tenth) * 9 // 10


@pytest.mark.benchmark(group="merge: 4 shards")
def test_encoded_merge(benchmark: BenchmarkFixture, four_shards: Shards) -> None:
    """The fast path's merge of already encoded events (cut + sorted runs)."""
    merged = OPTIONS.with_options(merged_by_router=True)
    ready = [list(shard_batches(name, path, merged)) for name, path in four_shards]
    total = sum(len(batch.keys) for batches in ready for batch in batches)

    def run() -> int:
        return sum(len(batch) for batch in merge_encoded(iter(batches) for batches in ready))

    assert benchmark(run) == total


@pytest.mark.benchmark(group="merge: 4 shards")
def test_heap_and_gate_pop_ready(benchmark: BenchmarkFixture) -> None:
    """AsyncResultsMerger with promises, popped with pop_ready (events already built)."""
    batches = shard_event_batches(4, PER_SHARD)
    total = sum(len(events) for shard in batches.values() for events, _ in shard)
    assert benchmark(drain_merger, batches, batched=True) == total


@pytest.mark.benchmark(group="end to end: 4 shards")
def test_end_to_end_decode_baseline(benchmark: BenchmarkFixture, four_shards: Shards) -> None:
    """The baseline: the four files decoded to dicts, streaming."""
    assert benchmark(count_entries, four_shards) == 4 * PER_SHARD


@pytest.mark.benchmark(group="end to end: 4 shards")
def test_end_to_end_replay_bson(benchmark: BenchmarkFixture, four_shards: Shards) -> None:
    """``replay --output-format bson`` of the four files, in process, to a counting sink."""
    written = benchmark(replay_in_process, four_shards, OPTIONS)
    assert written > 4 * PER_SHARD * 300  # ~470 bytes per event
