"""ShardReader's postBatchResumeToken, as a shard computes it."""

from __future__ import annotations

from bson.timestamp import Timestamp

from shardstream.merger.shard_reader import ShardReader
from shardstream.oplog.source import OplogBatch
from shardstream.resume_token import decode_token, encode_token, high_water_mark
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from tests import factories as make
from tests.deadlines import Deadline
from tests.merger.test_merged_stream_rules import ListSource

T = [Timestamp(1700000000, i) for i in range(20)]


class Silent(ListSource):
    """A live shard that has read nothing yet: an empty batch without a promise."""

    def next_batch(self, max_entries: int) -> OplogBatch:
        return OplogBatch([], None)


def test_the_first_promise_is_the_start_point() -> None:
    # plan_executor_pipeline.cpp _performChangeStreamsAccounting: a shard cursor's initial
    # postBatchResumeToken is the stream's start token, before it has read any entry.
    options = ChangeStreamOptions(start_at_operation_time=T[5])
    batch = ShardReader(Silent("a", []), options).read(10)
    assert batch is not None
    assert batch.promise == encode_token(high_water_mark(T[5]))


def test_an_event_start_token_promises_a_mark_at_its_time() -> None:
    # The shard passes the token's own event back up for EnsureResumeTokenPresent, so the
    # promise it can make before that event is a high-water mark at the token's time.
    source = ListSource("a", [make.insert(T[5], {"_id": 5}), make.insert(T[6], {"_id": 6})])
    event, _ = _events(source)
    options = ChangeStreamOptions(resume_after=event.token_data)
    batch = ShardReader(Silent("b", []), options).read(10)
    assert batch is not None
    assert batch.promise is not None
    assert decode_token(batch.promise) == high_water_mark(T[5])


def _events(source: ListSource) -> list[ChangeEvent]:
    reader = ShardReader(source, ChangeStreamOptions())
    out: list[ChangeEvent] = []
    deadline = Deadline("the shard reader to reach its exhausted batch")
    while (batch := reader.read(10)) is not None:
        deadline.check(f"{len(out)} events")
        out += batch.events
        if batch.exhausted:
            return out
    return out
