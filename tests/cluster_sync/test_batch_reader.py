"""The sync's read-ahead: batches in stream order, each with the stream's state after it.

The stream here is a scripted stand-in with ``ChangeStream``'s reading surface
(``try_next``, ``resume_token``, ``shard_positions``), so each batch's token can be checked
against the event it must follow; the real stream goes through it in the end-to-end tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest
from bson.timestamp import Timestamp

from shardstream.cluster_sync.batch_reader import BatchReader
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.errors import ChangeStreamHistoryLost
from shardstream.stream import ChangeStream


class ScriptedStream:
    """Hands out ``events`` one by one, then None; may raise ``failure`` once drained."""

    def __init__(self, events: list[dict[str, Any]], failure: Exception | None = None) -> None:
        self.events = events
        self.failure = failure
        self.read = 0

    def try_next(self) -> dict[str, Any] | None:
        if self.read == len(self.events):
            if self.failure is not None:
                raise self.failure
            return None
        self.read += 1
        return self.events[self.read - 1]

    @property
    def resume_token(self) -> Mapping[str, Any] | None:
        return self.events[self.read - 1]["_id"] if self.read else None

    def shard_positions(self) -> dict[str, Timestamp | None]:
        return {"shard00": self.events[self.read - 1]["clusterTime"] if self.read else None}


def _insert(i: int, db: str = "app") -> dict[str, Any]:
    return {
        "_id": {"_data": f"{i:04d}"},
        "operationType": "insert",
        "clusterTime": Timestamp(1700000000, i),
        "ns": {"db": db, "coll": "c"},
        "documentKey": {"_id": i},
        "fullDocument": {"_id": i},
    }


def _reader(stream: ScriptedStream, batch_size: int) -> BatchReader:
    return BatchReader(cast(ChangeStream, stream), NamespaceMap(), batch_size)


def test_batches_come_in_order_each_with_the_token_of_its_last_event() -> None:
    events = [_insert(i) for i in range(1, 8)]
    reader = _reader(ScriptedStream(events), batch_size=3)
    try:
        batches = [reader.next() for _ in range(4)]
    finally:
        reader.close()
    assert [batch.events for batch in batches] == [3, 3, 1, 0]  # then nothing was ready
    assert [batch.token for batch in batches[:3]] == [
        e["_id"] for e in (events[2], events[5], events[6])
    ]
    assert [batch.last_time for batch in batches[:3]] == [
        Timestamp(1700000000, i) for i in (3, 6, 7)
    ]
    assert batches[2].positions == {"shard00": Timestamp(1700000000, 7)}
    keys = [item.model._filter["_id"] for batch in batches for item in batch.items]  # type: ignore[union-attr]
    assert keys == list(range(1, 8))


def test_events_out_of_scope_count_as_read_but_plan_no_write() -> None:
    events = [_insert(1), _insert(2, db="config"), _insert(3)]
    reader = _reader(ScriptedStream(events), batch_size=10)
    try:
        batch = reader.next()
    finally:
        reader.close()
    assert (batch.events, len(batch.items), batch.token) == (3, 2, events[2]["_id"])


def test_a_read_error_reaches_the_applying_thread_after_the_batches_before_it() -> None:
    lost = ChangeStreamHistoryLost("shard00's oplog no longer reaches the checkpoint")
    reader = _reader(ScriptedStream([_insert(1), _insert(2)], failure=lost), batch_size=2)
    try:
        assert reader.next().events == 2
        with pytest.raises(ChangeStreamHistoryLost) as raised:
            reader.next()
    finally:
        reader.close()
    assert raised.value is lost


def test_close_stops_a_reader_blocked_on_a_full_queue() -> None:
    stream = ScriptedStream([_insert(i) for i in range(1, 100)])
    reader = _reader(stream, batch_size=1)
    reader.next()
    reader.close()  # the thread was waiting to hand over a read-ahead batch
    read = stream.read
    assert read < 99  # it read ahead a little, not the whole stream
    assert stream.read == read  # and reads no more
