"""watch(URI) through the raw-BSON fast path against the reference path, on one cluster.

The reference (``fast_path=False``: decoded entries, ShardPipeline per shard) is the
oracle: the same emulated cluster is read through both, and every event (types, field
order, BSON bytes), the resume token after every event, and the shard positions must
agree.  The corpus visits each fallback of the fast path (tests/transform/raw_corpus.py)
and the oplogs add transaction chains, a prepared transaction, DDL and an update whose
``updatedFields`` repeats a name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bson
import pytest
from bson.codec_options import CodecOptions
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

import shardstream
from shardstream.emulator import EmulatedCluster
from shardstream.errors import ChangeStreamHistoryLost, OplogError
from shardstream.merger.raw.shard_reader import FastShardReader
from shardstream.merger.shard_reader import ShardReader
from tests import factories as make
from tests.oplog.live_helpers import append_committed
from tests.paths import assert_same_steps, drain
from tests.transform.raw_corpus import generate_entries

START = Timestamp(1_699_999_999, 1)
T = [Timestamp(1_700_000_100, i) for i in range(1, 30)]
END = Timestamp(1_700_000_200, 1)
OID = ObjectId(b"\x01" * 12)


def _extras(shard: int) -> list[dict[str, Any]]:
    """What the corpus lacks: chains, a prepared transaction, DDL, a repeated updated name."""
    if shard == 0:
        op = make.inner(make.insert(T[0], {"_id": OID, "n": 1}, ns="shop.orders"))
        second = make.inner(make.insert(T[0], {"_id": "chain-2"}, ns="shop.orders"))
        return [
            make.apply_ops(T[1], [op], partial=True),
            make.apply_ops(T[2], [second], prev=T[1]),
            make.update(T[3], OID, {"u": {"a.b": 1}, "sa": {"u": {"b": 2}}}, ns="shop.orders"),
            make.apply_ops(T[4], [op], prepare=True, txn_number=2),
            make.commit(T[5], T[4], T[4], txn_number=2),
        ]
    if shard == 1:
        return [make.command(T[6], "shop", {"drop": "items"})]
    return [make.command(T[7], "shop", {"create": "fresh"})]


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    """Three shards: corpus, extras, then one no-op at END (so the gate passes the rest)."""
    with EmulatedCluster(shards=3) as running:
        for n, shard in enumerate(running.shards):
            entries = [make.noop(START), *generate_entries(300, seed=n), *_extras(n)]
            append_committed(running.shard(shard.name), [*entries, make.noop(END)])
        yield running


def _read(uri: str, *, fast_path: bool, **options: Any) -> list[Any]:
    with shardstream.watch(
        uri,
        start_at_operation_time=START,
        max_await_time_ms=100,
        fast_path=fast_path,
        **options,
    ) as stream:
        steps = drain(stream, END)
        readers = stream._merged._readers.values()
        expected = FastShardReader if fast_path else ShardReader
        assert all(type(reader) is expected for reader in readers)
        if stream.alive:  # read to END (an invalidated stream stops where it was)
            assert stream.shard_positions() == dict.fromkeys(stream.shard_positions(), END)
        return steps


@pytest.mark.parametrize("tailer", ["thread", "process"])
def test_the_fast_path_streams_what_the_reference_streams(
    cluster: EmulatedCluster, tailer: str
) -> None:
    fast = _read(cluster.uri, fast_path=True, tailer=tailer)
    reference = _read(cluster.uri, fast_path=False, tailer=tailer)
    assert len(reference) > 500
    assert_same_steps(fast, reference)
    updated = [e["updateDescription"]["updatedFields"] for e, _ in fast if "updateDescription" in e]
    assert any(type(fields).__name__ == "FieldList" for fields in updated)


def test_a_match_filter_and_a_database_scope_agree(cluster: EmulatedCluster) -> None:
    options = {"db": "shop", "pipeline": [{"$match": {"operationType": {"$ne": "delete"}}}]}
    fast = _read(cluster.uri, fast_path=True, **options)
    assert_same_steps(fast, _read(cluster.uri, fast_path=False, **options))
    assert {e["operationType"] for e, _ in fast} >= {"insert", "update", "drop"}


def test_the_syncs_options_take_the_fast_path_and_agree(cluster: EmulatedCluster) -> None:
    options = {"show_expanded_events": True, "show_raw_update_description": True}
    fast = _read(cluster.uri, fast_path=True, **options)
    assert_same_steps(fast, _read(cluster.uri, fast_path=False, **options))
    assert {e["operationType"] for e, _ in fast} >= {"insert", "update", "delete", "drop"}
    assert all("collectionUUID" in e for e, _ in fast if e["operationType"] == "insert")
    assert any("rawUpdateDescription" in e for e, _ in fast)


def test_options_the_fast_path_does_not_cover_take_the_reference_path(
    cluster: EmulatedCluster,
) -> None:
    with shardstream.watch(
        cluster.uri, start_at_operation_time=START, full_document="updateLookup"
    ) as stream:
        readers = stream._merged._readers.values()
        assert all(type(reader) is ShardReader for reader in readers)


def test_an_invalidate_ends_both_streams_alike() -> None:
    with EmulatedCluster(shards=2) as cluster:
        for n, shard in enumerate(cluster.shards):
            entries = [make.noop(START), *generate_entries(60, seed=n)]
            entries.append(make.command(T[8], "shop", {"dropDatabase": 1}))
            append_committed(
                cluster.shard(shard.name), [*entries, make.insert(T[9], {"_id": n}, ns="shop.a")]
            )
            cluster.shard(shard.name).append(make.noop(END))
            cluster.shard(shard.name).set_majority(END)
        fast = _read(cluster.uri, fast_path=True, db="shop")
        reference = _read(cluster.uri, fast_path=False, db="shop")
    assert_same_steps(fast, reference)
    assert fast[-1][0]["operationType"] == "invalidate"


def test_a_shard_added_mid_stream_agrees() -> None:
    with EmulatedCluster(shards=2) as cluster:
        for n, shard in enumerate(cluster.shards):
            append_committed(
                cluster.shard(shard.name), [make.noop(START), *generate_entries(80, seed=n)]
            )
        added = cluster.add_shard("shard02", ts=T[0])
        added.append(make.insert(START, {"_id": "before-add"}, ns="shop.orders"))
        append_committed(cluster.shard("shard02"), [*generate_entries(80, seed=7)][-30:])
        append_committed(
            cluster.shard("shard02"), [make.insert(T[3], {"_id": OID}, ns="shop.orders")]
        )
        for shard in cluster.shards:
            append_committed(cluster.shard(shard.name), [make.noop(END)])
        fast = _read(cluster.uri, fast_path=True)
        reference = _read(cluster.uri, fast_path=False)
    assert_same_steps(fast, reference)
    assert OID in [e["documentKey"]["_id"] for e, _ in fast]


def test_history_lost_is_the_same_error() -> None:
    with EmulatedCluster(shards=2) as cluster:
        # Only shard00's oplog begins after the start: with both, either shard's tailer may
        # report first, and the two runs could name different shards.
        append_committed(cluster.shard("shard00"), [make.noop(T[0]), make.noop(END)])
        append_committed(cluster.shard("shard01"), [make.noop(START), make.noop(END)])
        errors = []
        for fast_path in (True, False):
            with pytest.raises(ChangeStreamHistoryLost) as caught:
                _read(cluster.uri, fast_path=fast_path)
            errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "shard 'shard00'" in errors[0]


@pytest.mark.parametrize("tailer", ["thread", "process"])
def test_a_corrupt_string_fails_both_streams(tailer: str) -> None:
    raw = CodecOptions(document_class=RawBSONDocument)
    entry = bytearray(bson.encode(make.insert(T[1], {"_id": OID, "s": "abc"}, ns="shop.orders")))
    entry[entry.index(b"abc")] = 0xFF  # not UTF-8: framed, so only a decoder notices
    with EmulatedCluster(shards=1) as cluster:
        shard = cluster.shards[0]
        for item in (make.noop(START), RawBSONDocument(bytes(entry), raw), make.noop(END)):
            shard.append(item)
        shard.set_majority(END)
        # The fast path checks the bytes before copying them (bson_check) and the reference
        # decode names the entry; the reference stream's tailer has the driver decode the
        # reply and names the shard and the last good ts: an OplogError either way.
        for fast_path, error in ((True, OplogError), (False, OplogError)):
            stream = shardstream.watch(
                cluster.uri, start_at_operation_time=START, fast_path=fast_path, tailer=tailer
            )
            with pytest.raises(error) as caught:
                drain(stream, END)
            assert str(caught.value).startswith("corrupt BSON entry in shard")
            assert not stream.alive  # the error closed the stream
