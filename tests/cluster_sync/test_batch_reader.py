"""The sync's read-ahead: batches in stream order, each with the stream's state after it.

The stream here is a scripted stand-in with ``ChangeStream``'s reading surface
(``take_decoded``, ``resume_token``, ``shard_positions``), so each batch's token can be
checked against the event it must follow; the real stream goes through it in the end-to-end
tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest
from bson.timestamp import Timestamp

from shardstream.change_stream import ChangeStream
from shardstream.cluster_sync.batch_reader import BatchReader
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.errors import ChangeStreamHistoryLost, OplogError
from shardstream.resume_token import encode_token, high_water_mark
from tests.sync_thread import wait_for


class ScriptedStream:
    """Hands out ``events`` one by one, then None; may raise ``failure`` once drained.

    Its resume token is the last event's, or ``past`` (a postBatchResumeToken) once set
    and every event is read.
    """

    def __init__(
        self,
        events: list[dict[str, Any]],
        failure: Exception | None = None,
        gaps: frozenset[int] = frozenset(),
    ) -> None:
        self.events = events
        self.failure = failure
        self.gaps = set(gaps)  # after this many events, one look finds nothing ready
        self.read = 0
        self.past: dict[str, Any] | None = None

    def try_next(self, *, wait: bool = True) -> dict[str, Any] | None:
        if self.read in self.gaps:
            self.gaps.discard(self.read)
            return None
        if self.read == len(self.events):
            if self.failure is not None:
                raise self.failure
            return None
        self.read += 1
        return self.events[self.read - 1]

    def take_decoded(
        self,
        decode: Callable[[bytes], Any],
        max_events: int,
        document: Callable[[dict[str, Any]], Any],
    ) -> list[Any]:
        # What is ready: up to a gap (the next look finds it) or the end; every event here
        # is a dict, as the reference path's are.
        taken: list[Any] = []
        while len(taken) < max_events:
            if taken and (self.read in self.gaps or self.read == len(self.events)):
                break
            event = self.try_next(wait=False)
            if event is None:
                break
            taken.append(document(event))
        return taken

    @property
    def resume_token(self) -> Mapping[str, Any] | None:
        if self.past is not None and self.read == len(self.events):
            return self.past
        return self.events[self.read - 1]["_id"] if self.read else None

    def shard_positions(self) -> dict[str, Timestamp | None]:
        return {"shard00": self.events[self.read - 1]["clusterTime"] if self.read else None}


def _token(time: int) -> dict[str, Any]:
    """A real token document (a high-water mark) at cluster time (1700000000, time)."""
    return {"_data": encode_token(high_water_mark(Timestamp(1700000000, time))).data}


def _insert(
    i: int, db: str = "app", *, time: int | None = None, txn: int | None = None
) -> dict[str, Any]:
    at = i if time is None else time
    event: dict[str, Any] = {
        "_id": _token(at),  # decodable: the reader reads cluster times from tokens
        "operationType": "insert",
        "clusterTime": Timestamp(1700000000, at),
        "ns": {"db": db, "coll": "c"},
        "documentKey": {"_id": i},
        "fullDocument": {"_id": i},
    }
    if txn is not None:
        event |= {"lsid": {"id": bytes([txn]) * 16}, "txnNumber": 1}
    return event


def _reader(
    stream: ScriptedStream,
    batch_size: int,
    on_poll: Callable[[Mapping[str, Timestamp | None]], object] | None = None,
) -> BatchReader:
    return BatchReader(cast(ChangeStream, stream), NamespaceMap(), batch_size, on_poll)


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


def _keys(batch: Any) -> list[Any]:
    return [item.model._filter["_id"] for item in batch.items]


def test_a_transaction_cut_by_another_shards_event_at_its_time_is_planned_together() -> None:
    # The merged order at time 2: the transaction's first op, another shard's single
    # write, the transaction's second op (txnOpIndex sorts before the document key).
    events = [
        _insert(1),
        _insert(10, time=2, txn=7),
        _insert(20, time=2),
        _insert(11, time=2, txn=7),
        _insert(3),
    ]
    reader = _reader(ScriptedStream(events), batch_size=10)
    try:
        batch = reader.next()
    finally:
        reader.close()
    assert _keys(batch) == [1, 10, 11, 20, 3]
    assert [item.transaction is not None for item in batch.items] == [
        False,
        True,
        True,
        False,
        False,
    ]
    assert (batch.events, batch.token) == (5, events[4]["_id"])


def test_held_events_wait_until_the_stream_has_passed_their_time() -> None:
    events = [_insert(1), _insert(10, time=2, txn=7), _insert(11, time=2, txn=7)]
    stream = ScriptedStream(events)
    reader = _reader(stream, batch_size=10)
    try:
        first = reader.next()
        # Nothing later yet: the transaction may have more events at time 2.
        assert (_keys(first), first.token) == ([1], events[0]["_id"])
        assert first.held == 2  # pending: the sync neither idles out nor verifies now
        stream.past = _token(3)  # the postBatchResumeToken moves past time 2
        released = reader.next()
        while released.events == 0:  # batches read ahead before it held everything
            released = reader.next()
    finally:
        reader.close()
    assert (_keys(released), released.token) == ([10, 11], _token(3))


def test_a_batch_full_before_a_transaction_ends_keeps_it_whole_for_the_next() -> None:
    events = [_insert(1), _insert(2), _insert(10, time=3, txn=7), _insert(11, time=3, txn=7)]
    events += [_insert(4)]
    reader = _reader(ScriptedStream(events), batch_size=2)
    try:
        batches = [reader.next() for _ in range(2)]
    finally:
        reader.close()
    assert [_keys(batch) for batch in batches] == [[1, 2], [10, 11, 4]]


def test_a_batch_leaves_once_nothing_more_is_ready_or_grows_while_one_is_queued() -> None:
    # Nothing is ready after events 2 and 4: batch 1 leaves at the first gap (the queue
    # had room); batch 2 meets its gap with batch 1 still queued, so it reads on.
    events = [_insert(i) for i in range(1, 7)]
    stream = ScriptedStream(events, gaps=frozenset({2, 4}))
    reader = _reader(stream, batch_size=10)
    try:
        wait_for(lambda: stream.read == len(events), "the reader to read every event")
        batches = [reader.next(), reader.next()]
    finally:
        reader.close()
    assert [_keys(batch) for batch in batches] == [[1, 2], [3, 4, 5, 6]]
    assert [batch.token for batch in batches] == [events[1]["_id"], events[5]["_id"]]


def test_each_look_that_finds_nothing_shows_the_positions_to_on_poll() -> None:
    seen: list[Mapping[str, Timestamp | None]] = []
    stream = ScriptedStream([_insert(1), _insert(2)], gaps=frozenset({1}))
    reader = _reader(stream, batch_size=10, on_poll=lambda positions: seen.append(positions))
    try:
        first, second = reader.next(), reader.next()
    finally:
        reader.close()
    assert (_keys(first), _keys(second)) == ([1], [2])
    # The look at the gap after event 1, then at least one after event 2.
    assert seen[0] == {"shard00": Timestamp(1700000000, 1)}
    assert seen[-1] == {"shard00": Timestamp(1700000000, 2)}


def test_what_on_poll_raises_reaches_the_applying_thread_after_the_batches_before_it() -> None:
    refused = OplogError("shard01 refused appendOplogNote")

    def nudge(positions: Mapping[str, Timestamp | None]) -> None:
        if positions["shard00"] == Timestamp(1700000000, 2):
            raise refused

    reader = _reader(ScriptedStream([_insert(1), _insert(2)], gaps=frozenset({1})), 10, nudge)
    try:
        assert _keys(reader.next()) == [1]
        with pytest.raises(OplogError) as raised:
            reader.next()
    finally:
        reader.close()
    assert raised.value is refused
