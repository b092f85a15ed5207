"""FileOplogSource(raw_entries=True): the file's bytes as raw documents, merged on the fast path."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import bson
import pytest
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.bench.corpus import oplog_bytes
from shardstream.errors import ConfigurationError, OplogError
from shardstream.merger import MergedStream
from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.raw_entries import RawEntries
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.spark.source.positioned_source import PositionedSource
from shardstream.transform import ChangeEvent, ChangeStreamOptions


def _drain(stream: MergedStream) -> list[ChangeEvent]:
    events: list[ChangeEvent] = []
    while not stream.exhausted:
        events += stream.next_batch(500)[0]
    stream.close()
    return events


def _merged_both_ways(paths: Mapping[str, Path]) -> tuple[list[ChangeEvent], list[ChangeEvent]]:
    """The merged stream of ``paths`` from decoded entries, then from raw ones."""
    merged = []
    for raw in (False, True):
        sources = {n: FileOplogSource(n, str(p), raw_entries=raw) for n, p in paths.items()}
        merged.append(_drain(MergedStream(sources, ChangeStreamOptions())))
    return merged[0], merged[1]


def test_raw_file_sources_merge_to_the_reference_events(tmp_path: Path) -> None:
    result = SimulatedCluster(SimulationConfig(seed=5, shards=3, operations=400)).run()
    paths = result.write_oplogs(tmp_path)
    reference, raw = _merged_both_ways(paths)
    assert [e.document for e in raw] == [e.document for e in reference]
    assert [e.token for e in raw] == [e.token for e in reference]
    assert len(raw) > 300


def test_raw_file_sources_take_the_fast_path(tmp_path: Path) -> None:
    # The benchmark corpus: ObjectId keys, which the fast path writes itself.
    paths = {}
    for seed in range(3):
        paths[f"s{seed}"] = tmp_path / f"s{seed}.bson"
        paths[f"s{seed}"].write_bytes(oplog_bytes(400, seed=seed))
    reference, raw = _merged_both_ways(paths)
    assert [e.document for e in raw] == [e.document for e in reference]
    assert sum(isinstance(e, EncodedEvent) for e in raw) > len(raw) // 2


def test_raw_batches_hold_the_files_bytes_and_promise_the_last_ts(tmp_path: Path) -> None:
    entries = [{"ts": Timestamp(10, i), "op": "n", "ns": "", "o": {"msg": i}} for i in range(1, 6)]
    path = tmp_path / "s.bson"
    path.write_bytes(b"".join(bson.encode(e) for e in entries))
    source = FileOplogSource("s", str(path), raw_entries=True)
    first = source.next_batch(3)
    assert all(isinstance(e, RawBSONDocument) for e in first.entries)
    assert [e.raw for e in first.entries] == [bson.encode(e) for e in entries[:3]]
    assert first.promise == Timestamp(10, 3)
    assert not first.exhausted
    second = source.next_batch(3)
    assert second.promise == Timestamp(10, 5)
    assert second.exhausted
    fetched = source.fetch_entry(Timestamp(10, 2))
    assert isinstance(fetched, RawBSONDocument)
    assert fetched.raw == bson.encode(entries[1])
    positioned = PositionedSource(
        FileOplogSource("s", str(path), raw_entries=True), entries[0]["ts"]
    )
    assert positioned.raw_entries


def test_raw_entries_need_a_bson_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="raw entries need a BSON oplog file, got ejson"):
        FileOplogSource("s", str(tmp_path / "s.jsonl"), raw_entries=True)


def test_raw_batches_keep_the_bytes_and_make_documents_only_when_read(tmp_path: Path) -> None:
    entries = [{"ts": Timestamp(10, i), "op": "n", "ns": "", "o": {"msg": i}} for i in range(1, 6)]
    path = tmp_path / "s.bson"
    path.write_bytes(b"".join(bson.encode(e) for e in entries))
    batch = FileOplogSource("s", str(path), raw_entries=True).next_batch(10)
    assert isinstance(batch.entries, RawEntries)
    assert list(batch.entries.raws) == [bson.encode(e) for e in entries]  # the fast path's
    assert batch.entries[4].raw == bson.encode(entries[4])
    assert batch.entries[4]["ts"] == entries[4]["ts"]
    assert [e["o"]["msg"] for e in batch.entries[1:3]] == [2, 3]
    assert len(batch.entries) == 5


def test_an_entry_without_its_final_nul_fails_as_the_decoding_reader_says(tmp_path: Path) -> None:
    # Framed by its length, but not ended by a NUL: the entries before it are read, then the
    # error the decoding source gives for the same bytes.
    entries = [bson.encode({"ts": Timestamp(10, i), "op": "n", "ns": "", "o": {}}) for i in (1, 2)]
    broken = entries[1][:-1] + b"\x01"
    path = tmp_path / "s.bson"
    path.write_bytes(entries[0] + broken)
    errors = []
    for raw in (True, False):
        source = FileOplogSource("s", str(path), raw_entries=raw)
        first = source.next_batch(10)
        assert [bson.encode(e) if not raw else e.raw for e in first.entries] == entries[:1]
        with pytest.raises(OplogError) as caught:
            source.next_batch(10)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert f"at byte {len(entries[0])}" in errors[0]
