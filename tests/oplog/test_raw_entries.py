"""Tailers handing out raw entries (the live fast path's input), thread and process.

Raw entries are ``RawBSONDocument`` s of the bytes the server sent; the order and the
promises are a decoding tailer's, and older entries are still fetched.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

import bson
import pytest
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.emulator import EmulatedReplicaSet
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.live.process_tailer import ProcessOplogSource
from shardstream.oplog.live.tailer import LiveOplogSource

from .live_helpers import AWAIT_MS, fill, noop, poll, reaches, seconds


@pytest.fixture(params=["thread", "process"])
def raw_source(request: pytest.FixtureRequest, shard: EmulatedReplicaSet) -> Iterator[Any]:
    """A raw-entry tailer on ``shard`` from Timestamp(2, 1)."""
    options: dict[str, Any] = {"start": Timestamp(2, 1), "await_ms": AWAIT_MS}
    if request.param == "thread":
        source: Any = LiveOplogSource(
            "shard00", shard.uri, codec_options=RAW_OPLOG_CODEC_OPTIONS, **options
        )
    else:
        source = ProcessOplogSource("shard00", shard.uri, raw_entries=True, **options)
    yield source
    source.close()
    assert not multiprocessing.active_children()


def test_raw_entries_are_the_servers_bytes_in_order(
    shard: EmulatedReplicaSet, raw_source: Any
) -> None:
    fill(shard, 1, 3)
    assert raw_source.raw_entries
    first = poll(raw_source, reaches(3), timeout=30)  # a process tailer's spawn first
    fill(shard, 4, 9)
    rest = poll(raw_source, reaches(9), max_entries=2)
    batches = first + rest
    assert seconds(batches) == list(range(2, 10))
    entries = [entry for batch in batches for entry in batch.entries]
    assert all(isinstance(entry, RawBSONDocument) for entry in entries)
    assert [entry.raw for entry in entries] == [bson.encode(noop(n)) for n in range(2, 10)]
    with_entries = [b for b in batches if b.entries]
    assert [b.promise for b in with_entries] == [b.entries[-1]["ts"] for b in with_entries]
    fetched = raw_source.fetch_entry(Timestamp(5, 1))
    assert bson.decode(bson.encode(fetched)) == noop(5)


def test_a_decoding_tailer_has_no_raw_entries(shard: EmulatedReplicaSet) -> None:
    source = LiveOplogSource("shard00", shard.uri, start=Timestamp(1, 1), await_ms=AWAIT_MS)
    try:
        assert not source.raw_entries
    finally:
        source.close()


@pytest.mark.parametrize(
    "damage",
    [lambda entry: entry[:-1] + b"\x01", lambda entry: entry[:-3]],
    ids=["no-final-nul", "cut-short"],
)
def test_a_damaged_entry_in_a_batch_message_fails_as_a_raw_document_would(
    damage: Any,
) -> None:
    # The process tailer's parent cuts a batch message by its entries' length prefixes and
    # keeps their bytes; an entry RawBSONDocument would refuse is refused with its error.
    from shardstream.oplog.live.process_tailer import _raw_entries

    good = [bson.encode({"ts": Timestamp(5, i), "op": "n", "o": {}}) for i in (1, 2)]
    assert _raw_entries(b"B" + b"".join(good)) == good
    bad = damage(good[1])
    with pytest.raises(bson.errors.InvalidBSON) as expected:
        RawBSONDocument(bad, RAW_OPLOG_CODEC_OPTIONS)
    with pytest.raises(bson.errors.InvalidBSON) as caught:
        _raw_entries(b"B" + good[0] + bad)
    assert str(caught.value) == str(expected.value)
