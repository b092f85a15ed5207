"""The router rules of MergedStream: invalidation, topology, history, memory.

Each rule on both paths (the ``path`` fixture, tests/paths.py): on the fast path the
shards deliver their entries as the server's BSON, read by the fast readers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost, MergeError
from shardstream.merger import (
    MergedStream,
    ShardChange,
    ShardChangeKind,
    StaticTopology,
    TopologyBatch,
)
from shardstream.oplog.source import OplogBatch
from shardstream.resume_token import decode_token
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from tests import factories as make
from tests.deadlines import Deadline
from tests.paths import OnPath

T = [Timestamp(1700000000, i) for i in range(60)]


class ListSource:
    """An oplog in memory, read ``step`` entries at a time."""

    def __init__(self, name: str, entries: Sequence[Mapping[str, Any]], step: int = 2) -> None:
        self._name, self._entries, self._step, self._at = name, list(entries), step, 0
        self.largest_read = 0

    @property
    def name(self) -> str:
        return self._name

    def next_batch(self, max_entries: int) -> OplogBatch:
        count = min(self._step, max_entries)
        batch = self._entries[self._at : self._at + count]
        self._at += len(batch)
        self.largest_read = max(self.largest_read, len(batch))
        promise = self._entries[self._at - 1]["ts"] if self._at else None
        return OplogBatch(batch, promise, exhausted=self._at >= len(self._entries))

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        return next((e for e in self._entries if e["ts"] == ts), None)

    def close(self) -> None:
        self._at = len(self._entries)


def _drain(stream: MergedStream) -> list[ChangeEvent]:
    events: list[ChangeEvent] = []
    deadline = Deadline("the merged stream to drain")
    while not stream.exhausted:
        deadline.check(f"{len(events)} events")
        events += stream.next_batch(4)[0]
    return events


def test_a_collection_stream_ends_at_the_first_invalidate_after_earlier_events(
    path: OnPath,
) -> None:
    a = ListSource(
        "a",
        [
            make.insert(T[1], {"_id": 1}),
            make.command(T[5], "db", {"drop": "coll"}),
            make.insert(T[9], {"_id": 9}),
        ],
    )
    b = ListSource(
        "b",
        [
            make.insert(T[2], {"_id": 2}),
            make.insert(T[4], {"_id": 4}),
            make.command(T[6], "db", {"drop": "coll"}),
        ],
    )
    events = _drain(path.merge({"a": a, "b": b}, ChangeStreamOptions(db="db", coll="coll")))
    assert [(e.shard, e.operation_type) for e in events] == [
        ("a", "insert"),
        ("b", "insert"),
        ("b", "insert"),
        ("a", "drop"),
        ("a", "invalidate"),
    ]


def test_a_database_stream_sees_each_shards_drop(path: OnPath) -> None:
    a = ListSource("a", [make.command(T[5], "db", {"drop": "coll"})])
    b = ListSource("b", [make.command(T[5], "db", {"drop": "coll"})])
    events = _drain(path.merge({"a": a, "b": b}, ChangeStreamOptions(db="db")))
    assert [e.operation_type for e in events] == ["drop", "drop"]
    assert events[0].token == events[1].token  # byte-identical, not deduplicated


def test_an_added_shard_is_read_from_just_after_its_add_time(path: OnPath) -> None:
    a = ListSource(
        "a", [make.insert(T[1], {"_id": 1}), make.insert(T[8], {"_id": 8}), make.noop(T[30])]
    )
    new = ListSource(
        "c", [make.noop(T[2]), make.insert(T[3], {"_id": 3}), make.insert(T[7], {"_id": 7})]
    )
    topology = StaticTopology([ShardChange(T[4], ShardChangeKind.ADDED, "c", lambda: new)])
    stream = path.merge({"a": a}, ChangeStreamOptions(), topology=topology)
    events = []
    marks = []
    deadline = Deadline("the merged stream to drain")
    while not stream.exhausted:
        deadline.check(f"{len(events)} events")
        batch, mark = stream.next_batch(1)
        events += batch
        if mark is not None:
            marks.append(mark)
    # The write at T3 happened before the shard joined (at T4): not part of the stream.
    assert [e.document["documentKey"]["_id"] for e in events] == [1, 7, 8]
    assert stream.shard_names == ["a", "c"]
    for mark in marks:  # the monitor's own event never becomes a resume point
        data = decode_token(mark)
        assert data.is_high_water_mark or data.event_slot["documentKey"]["_id"] in (1, 7, 8)


def test_a_removed_shard_fails_the_stream_unless_ignored(path: OnPath) -> None:
    def sources() -> dict[str, ListSource]:
        return {
            "a": ListSource("a", [make.insert(T[1], {"_id": 1}), make.insert(T[9], {"_id": 9})]),
            "b": ListSource("b", [make.insert(T[2], {"_id": 2}), make.insert(T[7], {"_id": 7})]),
        }

    removal = [ShardChange(T[5], ShardChangeKind.REMOVED, "b")]
    stream = path.merge(sources(), ChangeStreamOptions(), topology=StaticTopology(removal))
    with pytest.raises(ChangeStreamHistoryLost, match="shard 'b' was removed"):
        _drain(stream)
    ignoring = path.merge(
        sources(),
        ChangeStreamOptions(),
        topology=StaticTopology(removal),
        ignore_removed_shards=True,
    )
    # Ignoring the removal, as mongos v1 does: the shard is read while it answers.
    assert [e.document["documentKey"]["_id"] for e in _drain(ignoring)] == [1, 2, 7, 9]


def test_a_shard_whose_oplog_does_not_reach_the_start_is_history_lost(path: OnPath) -> None:
    a = ListSource("a", [make.noop(T[1]), make.insert(T[6], {"_id": 6})])
    b = ListSource("b", [make.insert(T[8], {"_id": 8})])
    stream = path.merge({"a": a, "b": b}, ChangeStreamOptions(start_at_operation_time=T[5]))
    with pytest.raises(ChangeStreamHistoryLost, match="shard 'b' starts at"):
        _drain(stream)


def test_shards_are_not_read_while_their_buffers_are_full(path: OnPath) -> None:
    busy = ListSource("busy", [make.insert(T[i], {"_id": i}) for i in range(10, 50)], step=3)
    slow = ListSource("slow", [make.noop(T[i]) for i in range(1, 50, 7)], step=1)
    stream = path.merge(
        {"busy": busy, "slow": slow}, ChangeStreamOptions(), read_entries=3, max_buffered=5
    )
    peak = 0
    deadline = Deadline("the merged stream to drain")
    while not stream.exhausted:
        deadline.check()
        stream.next_batch(2)
        peak = max(peak, stream._merger.buffered("busy"))
    assert peak <= 5 + 3 - 1


def test_a_shard_sending_an_older_batch_breaks_the_contract(path: OnPath) -> None:
    class Backwards(ListSource):
        def next_batch(self, max_entries: int) -> OplogBatch:
            batch = super().next_batch(max_entries)
            return OplogBatch(
                batch.entries, T[0] if self._at > 2 else batch.promise, batch.exhausted
            )

    source = Backwards("a", [make.noop(T[i]) for i in range(1, 9)])
    with pytest.raises(MergeError, match="went backwards"):
        _drain(
            path.merge(
                {"a": source, "b": ListSource("b", [make.noop(T[40])])}, ChangeStreamOptions()
            )
        )


def test_the_batch_after_an_invalidate_reports_the_invalidate_token(path: OnPath) -> None:
    # cluster_find.cpp (runGetMore) catches ChangeStreamInvalidated and sets the batch's
    # postBatchResumeToken to the invalidate event's token, not to any later minimum promise.
    a = ListSource("a", [make.insert(T[1], {"_id": 1}), make.command(T[5], "db", {"drop": "coll"})])
    b = ListSource("b", [make.insert(T[2], {"_id": 2}), make.noop(T[20]), make.noop(T[21])])
    stream = path.merge({"a": a, "b": b}, ChangeStreamOptions(db="db", coll="coll"))
    events: list[ChangeEvent] = []
    mark = None
    deadline = Deadline("the merged stream to drain")
    while not stream.exhausted:
        deadline.check(f"{len(events)} events")
        batch, mark = stream.next_batch(10)
        events += batch
    assert events[-1].operation_type == "invalidate"
    assert mark == events[-1].token
    assert stream.next_batch(10) == ([], events[-1].token)


class LiveTopology:
    """A config.shards monitor that reports the same promise again after an add."""

    def __init__(self, batches: Sequence[TopologyBatch]) -> None:
        self._batches = list(batches)

    def next_batch(self) -> TopologyBatch | None:
        return self._batches.pop(0) if self._batches else None


def test_the_monitor_never_lends_its_event_token_to_the_high_water_mark(path: OnPath) -> None:
    # async_results_merger.cpp _checkHighWaterMarkEligibility (SERVER-47810): the config
    # cursor is ineligible on its first batch and on batches with events, and after an
    # ineligible batch only becomes eligible once its promise strictly increases.
    new = ListSource("c", [make.noop(T[3])])
    add = ShardChange(T[4], ShardChangeKind.ADDED, "c", lambda: new)
    topology = LiveTopology(
        [TopologyBatch([add], T[4])] + [TopologyBatch([], T[4]) for _ in range(6)]
    )
    a = ListSource("a", [make.insert(T[1], {"_id": 1}), make.noop(T[30])], step=1)
    stream = path.merge({"a": a}, ChangeStreamOptions(), topology=topology)
    marks = []
    for _ in range(8):
        marks.append(stream.next_batch(1)[1])
    internal = [m for m in marks if m is not None and not decode_token(m).is_high_water_mark]
    assert all(decode_token(m).event_slot["documentKey"]["_id"] == 1 for m in internal)


def test_topology_changes_before_the_start_do_not_reach_back_past_it(path: OnPath) -> None:
    # sharded_agg_helpers.cpp: mongos opens every shard in the registry with the stream's own
    # start token, and only a shard removed *since* the start time makes the history lost
    # (anyShardRemovedSince); the config.shards monitor itself starts at open time.
    a = ListSource("a", [make.insert(T[1], {"_id": 1}), make.insert(T[8], {"_id": 8})])
    c = ListSource("c", [make.insert(T[3], {"_id": 3}), make.insert(T[7], {"_id": 7})])
    topology = StaticTopology(
        [
            ShardChange(T[2], ShardChangeKind.ADDED, "c", lambda: c),
            ShardChange(T[4], ShardChangeKind.REMOVED, "old"),
        ]
    )
    options = ChangeStreamOptions(start_at_operation_time=T[5])
    stream = path.merge({"a": a}, options, topology=topology)
    assert [e.document["documentKey"]["_id"] for e in _drain(stream)] == [7, 8]


def test_start_after_an_invalidate_seen_on_two_shards_goes_on_after_it(path: OnPath) -> None:
    # document_source_change_stream_ensure_resume_token_present.cpp: when the invalidating
    # drop happened at the same clusterTime on several shards, 1..N identical tokens are
    # swallowed before the stream goes on.
    def sources() -> dict[str, ListSource]:
        drop = make.command(T[5], "db", {"drop": "coll"})
        return {
            "a": ListSource(
                "a", [make.insert(T[1], {"_id": 1}), drop, make.insert(T[7], {"_id": 7})]
            ),
            "b": ListSource(
                "b", [make.insert(T[2], {"_id": 2}), drop, make.insert(T[8], {"_id": 8})]
            ),
        }

    options = ChangeStreamOptions(db="db", coll="coll")
    first = _drain(path.merge(sources(), options))
    assert [e.operation_type for e in first] == ["insert", "insert", "drop", "drop", "invalidate"]
    resumed = path.merge(sources(), options.with_options(start_after=first[-1].token_data))
    assert [e.document["documentKey"]["_id"] for e in _drain(resumed)] == [7, 8]
