"""The process tailer against the emulator (real pymongo, in a spawned child).

The child runs the same LiveOplogSource the thread tests cover in depth; these tests
check what the process boundary adds: entries and promises cross it in order, faults
are still absorbed, errors keep their type and message, close() reaps the child, and a
merged watch() is the same with either tailer.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from bson.timestamp import Timestamp

import shardstream
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from shardstream.errors import ChangeStreamHistoryLost, ConfigurationError, OplogError
from shardstream.oplog.live.faults import RetryPolicy
from shardstream.oplog.live.process_tailer import ProcessOplogSource
from tests import factories as make
from tests.merger.stream_helpers import collect
from tests.oplog.live_helpers import load_committed

from .live_helpers import AWAIT_MS, fill, noop, poll, promised, reaches, seconds

SourceFactory = Callable[..., ProcessOplogSource]
FIRST = Timestamp(1, 1)


@pytest.fixture
def make_source(shard: EmulatedReplicaSet) -> Iterator[SourceFactory]:
    """Create process sources on ``shard``; all are closed and their children reaped."""
    made: list[ProcessOplogSource] = []

    def make_one(start: Timestamp = FIRST, **kw: Any) -> ProcessOplogSource:
        kw.setdefault("await_ms", AWAIT_MS)
        kw.setdefault("retry", RetryPolicy(max_retries=3, initial_backoff=0.01))
        kw.setdefault("client_options", {"serverSelectionTimeoutMS": 2000})
        source = ProcessOplogSource("shard00", kw.pop("uri", shard.uri), start=start, **kw)
        made.append(source)
        return source

    yield make_one
    for source in made:
        source.close()
    assert not multiprocessing.active_children()


def test_entries_and_promises_cross_the_process_in_order(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 1, 3)
    source = make_source(start=Timestamp(2, 1))
    first = poll(source, reaches(3), timeout=30)  # the first poll waits out the spawn
    fill(shard, 4, 9)
    rest = poll(source, reaches(9), max_entries=2)
    assert seconds(first + rest) == list(range(2, 10))
    assert all(len(b.entries) <= 2 for b in rest)
    assert rest[-1].entries[-1] == noop(9)  # decoded as the thread tailer decodes
    promises = [b.promise for b in first + rest if b.promise is not None]
    assert promises == sorted(promises)
    shard.append(noop(50))  # written, not committed: never promised
    shard.set_majority(Timestamp(40, 1))
    idle = poll(source, promised(Timestamp(40, 1)))
    assert not idle[-1].entries
    assert idle[-1].promise == Timestamp(40, 1)
    assert source.fetch_entry(Timestamp(5, 1)) == noop(5)
    assert source.fetch_entry(Timestamp(5, 2)) is None


def test_a_fault_reopens_without_loss_or_duplicates(
    shard: EmulatedReplicaSet, make_source: SourceFactory, caplog: pytest.LogCaptureFixture
):
    fill(shard, 1, 3)
    source = make_source()
    delivered = poll(source, reaches(3), timeout=30)
    finds = shard.commands_seen.count("find")
    shard.drop_next_get_more()
    fill(shard, 4, 6)  # wakes the waiting getMore; the hang-up hits the one after it
    delivered += poll(source, lambda _b: len(shard.faults) == 0)
    fill(shard, 7, 9)
    delivered += poll(source, reaches(9))
    assert seconds(delivered) == list(range(1, 10))
    assert shard.commands_seen.count("find") > finds
    reopened = [r for r in caplog.records if "reopening after ts" in r.getMessage()]
    assert reopened  # the child's warning reached the parent's logger
    assert reopened[0].name == "shardstream.oplog.live.tailer"


def test_history_lost_and_fatal_errors_keep_their_type_and_message(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 5, 8)
    lost = make_source(start=Timestamp(2, 1))
    with pytest.raises(ChangeStreamHistoryLost) as raised:
        poll(lost, lambda _b: False, timeout=30)
    assert "shard00" in str(raised.value)
    assert "Timestamp(2, 1)" in str(raised.value)
    assert "Timestamp(5, 1)" in str(raised.value)
    with pytest.raises(ChangeStreamHistoryLost):  # and it stays failed, like the thread's
        lost.next_batch(10)
    bad = make_source(batch_size=0)  # the thread tailer's constructor error, from the child
    with pytest.raises(ConfigurationError, match="positive await_ms"):
        poll(bad, lambda _b: False, timeout=30)


def test_credentials_never_reach_errors(shard: EmulatedReplicaSet, make_source: SourceFactory):
    secret = "s3cr3t-Pa55"
    source = make_source(
        uri=f"mongodb://app:{secret}@{shard.host}/?replicaSet=rs0",
        client_options={"serverSelectionTimeoutMS": 100},
        retry=RetryPolicy(max_retries=0),
    )
    with pytest.raises(OplogError) as refused:  # the emulator refuses authentication
        poll(source, lambda _b: False, timeout=30)
    assert secret not in str(refused.value)
    assert "app:***@" in str(refused.value)


def test_close_stops_the_child_by_itself(shard: EmulatedReplicaSet, make_source: SourceFactory):
    fill(shard, 1, 400)
    waiting = make_source(await_ms=300)  # close() interrupts a waiting getMore
    poll(waiting, reaches(400), timeout=30)  # the child is tailing, nothing pending
    blocked = make_source(batch_size=1)  # never read: its child blocks on a full pipe
    poll(blocked, reaches(1), timeout=30)
    for source in (waiting, blocked):
        source.close()
        assert source.exitcode == 0  # it stopped by itself: close() did not terminate it
    batch = waiting.next_batch(10)
    assert batch is not None
    assert batch.exhausted
    with pytest.raises(OplogError, match="tailer stopped"):
        waiting.fetch_entry(Timestamp(1, 1))


def test_a_killed_child_is_an_oplog_error(shard: EmulatedReplicaSet, make_source: SourceFactory):
    fill(shard, 1, 3)
    source = make_source()
    poll(source, reaches(3), timeout=30)
    source._process.kill()
    with pytest.raises(OplogError, match="tailer process exited unexpectedly"):
        poll(source, lambda _b: False)


def test_watch_with_process_tailers_equals_the_thread_result():
    t = [Timestamp(1700000000, i) for i in range(40)]
    oplogs = {
        "shard00": [
            make.noop(t[1]),
            *(make.insert(t[n], {"_id": n}) for n in range(2, 30, 3)),
            make.noop(t[36]),  # lets shard01's last event through the gate
        ],
        "shard01": [
            make.noop(t[1]),
            *(make.insert(t[n], {"_id": n}) for n in range(3, 30, 3)),
            make.update(t[31], 3, {"u": {"a": 1}}),
            make.noop(t[35]),
        ],
    }
    results = {}
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, oplogs)
        for tailer in ("thread", "process"):
            with shardstream.watch(
                cluster.uri, start_at_operation_time=t[1], max_await_time_ms=100, tailer=tailer
            ) as stream:
                results[tailer] = collect(stream, 20, timeout=30)
    assert results["process"] == results["thread"]
    assert [e["documentKey"]["_id"] for e in results["thread"][:3]] == [2, 3, 5]
    with pytest.raises(ConfigurationError, match="tailer"):
        shardstream.watch("mongodb://127.0.0.1:1/", tailer="fibre")


def test_the_watch_command_passes_the_tailer_through(monkeypatch: pytest.MonkeyPatch):
    seen: dict[str, Any] = {}

    def fake_watch(uri: str, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise OplogError("stop here")

    monkeypatch.setattr("shardstream.stream.watch", fake_watch)
    assert main(["watch", "mongodb://127.0.0.1:1/", "--tailer", "process"]) == 1
    assert seen["tailer"] == "process"
    assert main(["watch", "mongodb://127.0.0.1:1/"]) == 1
    assert seen["tailer"] == "thread"
