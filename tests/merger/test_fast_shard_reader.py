"""MergedStream over raw-entry sources (FastShardReader) against the reference readers.

Any source can be made raw (``RoundTrip(source, raw=True)``, tests/paths.py); the
reference reads the same values decoded from the same bytes (``RoundTrip(source)``),
so both paths see one input.  The
simulated cluster (migrations, multi-shard transactions, live-like delays) and the
fallback corpus as files are read through both, event by event, with the resume
token after each.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

import shardstream
from shardstream.errors import ChangeStreamHistoryLost, ConfigurationError, MergeError
from shardstream.merger import MergedStream
from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.raw.shard_reader import FastShardReader, reads_fast, shard_options
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.source import OplogBatch
from shardstream.resume_token import encode_token, high_water_mark
from shardstream.sim import SimulatedCluster, SimulationConfig, simulated_sources
from shardstream.transform import ChangeStreamOptions
from tests import factories as make
from tests.deadlines import Deadline
from tests.paths import RoundTrip, assert_same_steps
from tests.transform.raw_corpus import generate_entries


def _steps(sources: Mapping[str, Any], **options: Any) -> list[Any]:
    steps = []
    with shardstream.watch(sources, batch_size=50, **options) as stream:
        for event in stream:
            steps.append((event, stream.resume_token))
    return steps


@pytest.mark.parametrize("seed", range(4))
def test_a_simulated_cluster_streams_alike(seed: int) -> None:
    config = SimulationConfig(seed=seed, shards=3, operations=300, p_migration=0.08)
    result = SimulatedCluster(config).run()

    def sources(raw: bool) -> dict[str, RoundTrip]:
        feeds = simulated_sources(result, seed=seed, delay=0.2, max_batch=16)
        return {name: RoundTrip(source, raw=raw) for name, source in feeds.items()}

    # The simulator's keys are not ObjectIds: every entry takes the fallback.
    assert_same_steps(_steps(sources(True)), _steps(sources(False)))


def _corpus_files(tmp_path: Path, shards: int = 3) -> dict[str, FileOplogSource]:
    files = {}
    for n in range(shards):
        path = tmp_path / f"shard{n}.bson"
        path.write_bytes(b"".join(bson.encode(e) for e in generate_entries(400, seed=n)))
        files[path.stem] = FileOplogSource(path.stem, str(path))
    return files


@pytest.mark.parametrize(
    "options",
    [{}, {"show_system_events": True}, {"db": "shop", "coll": "orders"}],
    ids=["default", "system-events", "collection"],
)
def test_the_fallback_corpus_streams_alike(tmp_path: Path, options: dict[str, Any]) -> None:
    fast = _steps(
        {n: RoundTrip(s, raw=True) for n, s in _corpus_files(tmp_path).items()}, **options
    )
    reference = _steps({n: RoundTrip(s) for n, s in _corpus_files(tmp_path).items()}, **options)
    assert_same_steps(fast, reference)


def test_fast_events_stay_encoded_until_read(tmp_path: Path) -> None:
    sources = {n: RoundTrip(s, raw=True) for n, s in _corpus_files(tmp_path, 1).items()}
    stream = MergedStream(sources, ChangeStreamOptions())
    events, _ = stream.next_batch(100)
    encoded = [event for event in events if isinstance(event, EncodedEvent)]
    assert encoded
    for event in encoded:
        assert event._document is None  # the merge never decoded it
        assert event.operation_type == bson.decode(event.raw)["operationType"]
        assert event.token.to_document() == event.document["_id"]


def _merged_events(sources: Mapping[str, Any]) -> list[Any]:
    stream = MergedStream(sources, ChangeStreamOptions())
    events: list[Any] = []
    deadline = Deadline("the merged stream to drain")
    while not stream.exhausted:
        deadline.check(f"{len(events)} events")
        events.extend(stream.next_batch(100)[0])
    return events


def test_fast_updates_carry_their_entrys_o_as_the_reference_does(tmp_path: Path) -> None:
    # The lakehouse mirror replays the oplog's own diff: a fast event must carry it too,
    # inside transactions as well as alone.
    fast = _merged_events({n: RoundTrip(s, raw=True) for n, s in _corpus_files(tmp_path).items()})
    reference = _merged_events({n: RoundTrip(s) for n, s in _corpus_files(tmp_path).items()})
    assert [e.token for e in fast] == [e.token for e in reference]
    updates = [(f, r) for f, r in zip(fast, reference, strict=True) if r.operation_type == "update"]
    fast_updates = [f for f, _ in updates if isinstance(f, EncodedEvent)]
    assert len(fast_updates) > 20
    assert any("txnNumber" in f.document for f in fast_updates)
    for event, expected in updates:
        assert isinstance(expected.raw_update, Mapping)
        assert bson.encode(event.raw_update) == bson.encode(expected.raw_update)
    others = [f.raw_update for f, r in zip(fast, reference, strict=True) if r.raw_update is None]
    assert others == [None] * len(others)


def test_a_raw_source_needs_options_the_fast_path_covers(tmp_path: Path) -> None:
    sources = {n: RoundTrip(s, raw=True) for n, s in _corpus_files(tmp_path, 1).items()}
    with pytest.raises(ConfigurationError, match="raw entries"):
        MergedStream(sources, ChangeStreamOptions(full_document="updateLookup"))


def test_a_high_water_mark_resume_is_a_start_time() -> None:
    at = Timestamp(1_700_000_000, 5)
    token = high_water_mark(at, 2)
    options = ChangeStreamOptions(resume_after=token)
    assert shard_options(options).start_at_operation_time == at
    assert shard_options(options).resume_token is None
    assert reads_fast(options)
    assert encode_token(token).data < encode_token(high_water_mark(Timestamp(at.time, 6), 2)).data


class _Scripted:
    """A raw source handing out fixed batches."""

    name = "s0"
    raw_entries = True
    verifies_history = True

    def __init__(self, batches: list[OplogBatch]) -> None:
        self._batches = batches

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        return self._batches.pop(0) if self._batches else None

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        return None

    def close(self) -> None:
        pass


def _raw(entry: dict[str, Any]) -> RawBSONDocument:
    return RawBSONDocument(bson.encode(entry), RAW_OPLOG_CODEC_OPTIONS)


def test_a_promise_going_back_is_a_merge_error() -> None:
    t = [Timestamp(1_700_000_000, i) for i in range(5)]
    source = _Scripted([OplogBatch([_raw(make.noop(t[3]))], t[3]), OplogBatch([], t[2])])
    reader = FastShardReader(source, ChangeStreamOptions(start_at_operation_time=t[1]))
    assert reader.read(10) is not None
    with pytest.raises(MergeError, match="went backwards"):
        reader.read(10)


def test_a_dict_entry_on_a_raw_source_is_a_merge_error() -> None:
    t = Timestamp(1_700_000_000, 1)
    source = _Scripted([OplogBatch([make.noop(t)], t)])
    reader = FastShardReader(source, ChangeStreamOptions(start_at_operation_time=t))
    with pytest.raises(MergeError, match="RawBSONDocument"):
        reader.read(10)


def test_a_file_that_starts_after_the_start_is_history_lost_on_both(tmp_path: Path) -> None:
    start = Timestamp(1_600_000_000, 1)
    messages = []
    for raw in (True, False):
        sources = {n: RoundTrip(s, raw=raw) for n, s in _corpus_files(tmp_path, 2).items()}
        with pytest.raises(ChangeStreamHistoryLost) as caught:
            _steps(sources, start_at_operation_time=start)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
