"""Emulator: real pymongo tails ``local.oplog.rs`` and reads plain collections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import bson
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import CursorType
from pymongo.collection import Collection
from pymongo.read_concern import ReadConcern

from shardstream.emulator import EmulatedReplicaSet
from tests.deadlines import returns_within

from .conftest import ClientFactory


def _noop(second: int, **extra: Any) -> dict[str, Any]:
    return {"ts": Timestamp(second, 1), "op": "n", "ns": "", "o": {"msg": "x"}, **extra}


def _oplog(client_factory: ClientFactory, shard: EmulatedReplicaSet) -> Collection[Any]:
    return client_factory(shard.uri).local["oplog.rs"]


def test_tailable_await_sees_entries_appended_later(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    shard.append(_noop(10))
    cursor = _oplog(client_factory, shard).find(
        {"ts": {"$gt": Timestamp(10, 1)}}, cursor_type=CursorType.TAILABLE_AWAIT, oplog_replay=False
    )
    cursor.max_await_time_ms(200)
    assert next(cursor, None) is None  # the find: nothing newer yet, cursor stays open
    assert cursor.alive
    shard.append(_noop(11))
    assert next(cursor)["ts"] == Timestamp(11, 1)
    # An empty await ends the for-loop but not the cursor. (That the getMore waits rather
    # than answering at once is test_waiting_get_more_is_woken_by_append's to show.)
    assert next(cursor, None) is None
    assert cursor.alive
    cursor.close()
    assert shard.open_cursor_count == 0
    assert "killcursors" in shard.commands_seen


def _after_next_get_more(shard: EmulatedReplicaSet, action: Callable[[], object]) -> None:
    seen = shard.commands_seen.count("getmore")
    deadline = time.monotonic() + 2
    while shard.commands_seen.count("getmore") == seen and time.monotonic() < deadline:
        time.sleep(0.005)  # bounded poll: the emulator has no "getMore received" event
    action()


def test_waiting_get_more_is_woken_by_append(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    shard.append(_noop(10))
    cursor = _oplog(client_factory, shard).find(
        {"ts": {"$gt": Timestamp(10, 1)}}, cursor_type=CursorType.TAILABLE_AWAIT
    )
    # An await far beyond the deadline: only the append can end the getMore in time, and a
    # getMore that answered at once (not awaiting) would come back empty, before the append.
    cursor.max_await_time_ms(600_000)
    assert next(cursor, None) is None  # the find returns at once, never waits
    appender = threading.Thread(
        target=_after_next_get_more, args=(shard, lambda: shard.append(_noop(11)))
    )
    appender.start()
    try:
        woken = returns_within(lambda: next(cursor), "a getMore woken by the append", 20)
    finally:
        appender.join()
    assert woken["ts"] == Timestamp(11, 1)
    cursor.close()


def test_gte_filter_batch_size_and_byte_identity(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    raw = [shard.append(_noop(second, extra={"n": second})) for second in range(1, 8)]
    client = client_factory(shard.uri, document_class=RawBSONDocument)
    oplog = client.local["oplog.rs"]
    cursor = oplog.find({"ts": {"$gte": Timestamp(3, 1)}}, batch_size=2)
    got = list(cursor)
    assert [doc.raw for doc in got] == [doc.raw for doc in raw[2:]]
    getmores = shard.commands_seen.count("getmore")
    assert getmores >= 2  # batches of two over five entries


def test_majority_read_concern_hides_uncommitted(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    for second in (1, 2, 3):
        shard.append(_noop(second))
    shard.set_majority(Timestamp(2, 1))
    oplog = _oplog(client_factory, shard)
    committed = oplog.with_options(read_concern=ReadConcern("majority"))
    assert [d["ts"].time for d in committed.find({})] == [1, 2]
    assert [d["ts"].time for d in oplog.find({})] == [1, 2, 3]
    tail = committed.find({}, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(50)
    assert [next(tail)["ts"].time, next(tail)["ts"].time] == [1, 2]
    assert next(tail, None) is None
    shard.set_majority(Timestamp(3, 1))
    assert next(tail)["ts"].time == 3
    tail.close()


def test_plain_collection_equality_find(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    shard.insert("config.system.preimages", {"_id": {"ts": Timestamp(5, 1)}, "x": 1})
    shard.insert("config.system.preimages", {"_id": {"ts": Timestamp(6, 1)}, "x": 2})
    preimages = client_factory(shard.uri).config["system.preimages"]
    found = preimages.find_one({"_id.ts": Timestamp(6, 1)})
    assert found is not None
    assert found["x"] == 2
    assert preimages.find_one({"x": 3}) is None
    assert [d["x"] for d in preimages.find({"x": {"$in": [1, 2]}}, batch_size=1)] == [1, 2]


def test_raw_codec_entries_round_trip(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    entry = RawBSONDocument(bson.encode({"ts": Timestamp(9, 9), "op": "i", "o": {"_id": 1}}))
    shard.append(entry)
    codec = CodecOptions(document_class=RawBSONDocument)
    oplog = _oplog(client_factory, shard).with_options(codec_options=codec)
    found = oplog.find_one({"ts": Timestamp(9, 9)})
    assert found is not None
    assert found.raw == entry.raw
