"""The live oplog tailer, shard discovery and URI redaction, against the emulator.

Real pymongo talks to the wire-protocol emulator, so the driver behaviours that matter
(getMore never retried, tailable cursors dying quietly, socket timeouts) are exercised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from shardstream.errors import ChangeStreamHistoryLost, ConfigurationError, OplogError
from shardstream.oplog.live.discovery import discover_cluster, parse_shard_host, shard_uri
from shardstream.oplog.live.faults import RetryPolicy
from shardstream.oplog.live.tailer import LiveOplogSource
from shardstream.oplog.redaction import redact_text, redact_uri
from tests.deadlines import returns_within

from .live_helpers import (
    AWAIT_MS,
    fill,
    get_mores,
    noop,
    poll,
    promised,
    reaches,
    seconds,
    tailer_threads,
    wait_for_get_more,
)

SECRET = "s3cr3t-Pa55"
FIRST = Timestamp(1, 1)
SourceFactory = Callable[..., LiveOplogSource]


@pytest.fixture
def make_source(shard: EmulatedReplicaSet) -> Iterator[SourceFactory]:
    """Create live sources on ``shard``; all are closed, and their threads gone, afterwards."""
    made: list[LiveOplogSource] = []

    def make(start: Timestamp = FIRST, uri: str | None = None, **kw: Any):
        options = {
            "serverSelectionTimeoutMS": 2000,
            "heartbeatFrequencyMS": 500,
            **kw.pop("client_options", {}),
        }
        kw.setdefault("await_ms", AWAIT_MS)
        kw.setdefault("retry", RetryPolicy(max_retries=3, initial_backoff=0.01))
        source = LiveOplogSource(
            "shard00", uri or shard.uri, start=start, client_options=options, **kw
        )
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()
    assert not tailer_threads()


# -- redaction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("mongodb://app:pw@h1:1,h2/db?replicaSet=r", "mongodb://app:***@h1:1,h2/db?replicaSet=r"),
        ("mongodb+srv://app:p%40w@c.example.net/", "mongodb+srv://app:***@c.example.net/"),
        ("mongodb://app@h1/", "mongodb://app@h1/"),
        ("mongodb://h1/?appName=a@b", "mongodb://h1/?appName=a@b"),
        ("mongodb://app:a/b@h1/", "mongodb://app:***@h1/"),
        ("mongodb://h/?tlsCertificateKeyFilePassword=x&w=1", "mongodb://h/?tlsCertificateKeyFilePassword=***&w=1"),
        ("not a uri", "not a uri"),
    ],
)  # fmt: skip
def test_redact_uri(uri: str, expected: str):
    assert redact_uri(uri) == expected


def test_redact_text_finds_uris_and_secrets():
    text = f"cannot reach mongodb://u:{SECRET}@h/ (password {SECRET})"
    assert SECRET not in redact_text(text, SECRET)
    assert "mongodb://u:***@h/" in redact_text(text)


# -- discovery ---------------------------------------------------------------------------


def test_parse_shard_host():
    assert parse_shard_host("rs1/a:1,b:2") == ("rs1", ("a:1", "b:2"))
    assert parse_shard_host("a:1") == (None, ("a:1",))
    with pytest.raises(OplogError):
        parse_shard_host("rs1/")


def test_shard_uri_keeps_credentials_and_options():
    base = f"mongodb://u%40x:{SECRET}@127.0.0.1:1/adm?replicaSet=m&authSource=admin&tls=false"
    uri = shard_uri(base, "rs1", ["127.0.0.1:2", "127.0.0.1:3"])
    assert uri == (
        f"mongodb://u%40x:{SECRET}@127.0.0.1:2,127.0.0.1:3/adm"
        "?authSource=admin&tls=false&replicaSet=rs1"
    )
    assert shard_uri("mongodb://127.0.0.1:1/", None, ["127.0.0.1:2"]).endswith(
        "127.0.0.1:2/?directConnection=true"
    )
    with pytest.raises(ConfigurationError) as raised:
        shard_uri(f"mongodb://u:{SECRET}@127.0.0.1:1/?bogus", None, ["127.0.0.1:2"])
    assert SECRET not in str(raised.value)


def test_discovers_two_shards_and_the_cluster_time():
    with EmulatedCluster(shards=2) as cluster:
        cluster.shards[1].append(noop(42))
        info = discover_cluster(cluster.uri, client_options={"serverSelectionTimeoutMS": 2000})
        assert [s.name for s in info.shards] == ["shard00", "shard01"]
        assert info.cluster_time == Timestamp(42, 1)
        for found, real in zip(info.shards, cluster.shards, strict=True):
            assert found.set_name == real.name
            assert found.hosts == (real.host,)
            assert found.uri == f"mongodb://{real.host}/?replicaSet={real.name}"
        client: MongoClient[Any] = MongoClient(cluster.uri, serverSelectionTimeoutMS=2000)
        with client:
            again = discover_cluster(client, uri=f"mongodb://app:{SECRET}@{cluster.mongos.host}/")
        assert again.shards[0].uri.startswith(f"mongodb://app:{SECRET}@")
        assert SECRET not in repr(again)
        assert SECRET not in again.shards[0].redacted_uri


def test_discovery_falls_back_to_config_shards_and_accepts_a_client():
    with EmulatedCluster(shards=2) as cluster:
        cluster.mongos.fail_next("listShards", 13, "Unauthorized")
        client: MongoClient[Any] = MongoClient(cluster.uri, serverSelectionTimeoutMS=2000)
        with client:
            info = discover_cluster(client)
        assert [s.set_name for s in info.shards] == ["shard00", "shard01"]
        assert "find" in cluster.mongos.commands_seen


# -- tailing -----------------------------------------------------------------------------


def test_entries_appended_while_tailing_arrive_in_order(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 1, 3)
    source = make_source(start=Timestamp(2, 1))
    first = poll(source, reaches(3))
    fill(shard, 4, 9)
    rest = poll(source, reaches(9), max_entries=2)
    assert seconds(first + rest) == list(range(2, 10))
    assert all(len(b.entries) <= 2 for b in rest)
    promises = [b.promise for b in first + rest if b.promise is not None]
    assert promises == sorted(promises)
    assert source.fetch_entry(Timestamp(5, 1)) == noop(5)
    assert source.fetch_entry(Timestamp(5, 2)) is None


def test_entries_above_the_majority_point_wait_for_it(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 1, 2)
    fill(shard, 3, 5, commit=False)
    source = make_source()
    assert seconds(poll(source, reaches(2))) == [1, 2]
    wait_for_get_more(shard, get_mores(shard) + 3)  # several empty reads, nothing leaks
    late = [source.next_batch(100) for _ in range(3)]
    assert all(b is None or (not b.entries and b.promise <= Timestamp(2, 1)) for b in late)
    shard.set_majority(Timestamp(4, 1))
    assert seconds(poll(source, reaches(4))) == [3, 4]


def test_the_promise_advances_while_idle_but_never_past_the_majority_point(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 1, 3)
    shard.append(noop(50))  # written, not committed: must not be promised
    shard.set_majority(Timestamp(40, 1))  # a majority point past the last committed entry
    source = make_source()
    batches = poll(source, promised(Timestamp(40, 1)))
    assert seconds(batches) == [1, 2, 3]
    assert not batches[-1].entries
    assert batches[-1].promise == Timestamp(40, 1)
    wait_for_get_more(shard, get_mores(shard) + 3)
    assert source.next_batch(10) is None  # nothing new: no repeated promise either


def _inject_and_check(shard: EmulatedReplicaSet, source: LiveOplogSource, inject: Any) -> None:
    fill(shard, 1, 3)
    delivered = poll(source, reaches(3))
    finds = shard.commands_seen.count("find")
    inject()
    fill(shard, 4, 6)  # wakes the waiting getMore; the fault hits the one after it
    delivered += poll(source, lambda _b: len(shard.faults) == 0)
    fill(shard, 7, 9)
    delivered += poll(source, reaches(9))
    assert seconds(delivered) == list(range(1, 10))  # nothing lost, nothing twice
    assert shard.commands_seen.count("find") > finds  # the cursor was reopened


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda rs: rs.drop_next_get_more(), id="hang-up"),
        pytest.param(lambda rs: rs.cursor_not_found_on_next_get_more(), id="cursor-not-found"),
        pytest.param(lambda rs: rs.not_primary_on_next_get_more(), id="not-primary"),
        pytest.param(lambda rs: rs.interrupted_on_next_get_more(), id="interrupted"),
        pytest.param(
            lambda rs: rs.fail_next("getMore", 9999, "Custom", ["ResumableChangeStreamError"]),
            id="resumable-label",
        ),
        pytest.param(lambda rs: rs.kill_cursor_silently_on_next_get_more(), id="silent-death"),
    ],
)
def test_faults_reopen_without_loss_or_duplicates(
    fault: Any, shard: EmulatedReplicaSet, make_source: SourceFactory
):
    _inject_and_check(shard, make_source(), lambda: fault(shard))


def test_a_stalled_get_more_times_out_and_reopens(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    source = make_source(client_options={"socketTimeoutMS": 300})
    # The stall outlasts every deadline in _inject_and_check's polls (it ends when the shard
    # stops): the entries after it arrive only if the socket timeout cut it off.
    _inject_and_check(shard, source, lambda: shard.stall_next_get_more(600.0))


def test_a_non_retryable_error_fails_the_source(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 1, 3)
    source = make_source()
    poll(source, reaches(3))
    shard.fail_next("getMore", 13, "Unauthorized")
    with pytest.raises(OplogError, match=r"shard00.*Unauthorized"):
        poll(source, lambda _b: False)


def test_roll_over_past_the_position_is_history_lost(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 1, 3)
    source = make_source()
    poll(source, reaches(3))
    fill(shard, 4, 6, commit=False)  # invisible to the majority cursor, so it stays at 3
    shard.roll_over(Timestamp(5, 1))
    with pytest.raises(ChangeStreamHistoryLost, match=r"shard00.*Timestamp\(3, 1\)"):
        poll(source, lambda _b: False)


def test_a_start_before_the_oldest_entry_is_history_lost(
    shard: EmulatedReplicaSet, make_source: SourceFactory
):
    fill(shard, 5, 8)
    source = make_source(start=Timestamp(2, 1))
    with pytest.raises(ChangeStreamHistoryLost) as raised:
        poll(source, lambda _b: False)
    assert "Timestamp(2, 1)" in str(raised.value)
    assert "Timestamp(5, 1)" in str(raised.value)


def test_a_slow_consumer_pauses_the_reader(shard: EmulatedReplicaSet, make_source: SourceFactory):
    fill(shard, 1, 40)
    source = make_source(batch_size=2, max_queued_batches=1)
    time.sleep(0.3)
    assert get_mores(shard) <= 3  # the queue is full: the reader waits instead of reading
    assert seconds(poll(source, reaches(40), max_entries=1)) == list(range(1, 41))


def test_close_is_prompt_and_ends_the_source(shard: EmulatedReplicaSet, make_source: SourceFactory):
    fill(shard, 1, 2)
    # A getMore awaiting data for up to 1 s is in flight when close() is called; the socket
    # timeout is far beyond the deadline: a close that waited it out (or a reader that kept
    # reading) fails by name instead of passing slowly.
    source = make_source(await_ms=1000, client_options={"socketTimeoutMS": 600_000})
    poll(source, reaches(2))
    wait_for_get_more(shard, get_mores(shard) + 1)
    returns_within(source.close, "close() with a getMore in flight", seconds=20)
    assert not tailer_threads()
    batch = source.next_batch(10)
    assert batch is not None
    assert batch.exhausted
    assert batch.promise == Timestamp(2, 1)


# -- configuration and secrets -----------------------------------------------------------


def test_bad_options_are_configuration_errors(make_source: SourceFactory):
    with pytest.raises(ConfigurationError, match="socketTimeoutMS"):
        make_source(client_options={"socketTimeoutMS": 10}, await_ms=100)
    with pytest.raises(ConfigurationError):
        make_source(batch_size=0)
    with pytest.raises(ConfigurationError) as raised:
        make_source(uri=f"mongodb://u:{SECRET}@127.0.0.1:1/?nonsense=1&w=banana")
    assert SECRET not in str(raised.value)


def test_credentials_never_appear_in_errors_or_logs(
    shard: EmulatedReplicaSet, make_source: SourceFactory, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    fill(shard, 1, 3)
    with EmulatedReplicaSet("gone") as gone:
        dead_port = gone.port
    unreachable = f"mongodb://app:{SECRET}@127.0.0.1:{dead_port}/?directConnection=true"
    source = make_source(uri=unreachable, client_options={"serverSelectionTimeoutMS": 100})
    with pytest.raises(OplogError) as raised:
        poll(source, lambda _b: False)
    assert "gave up after 3 retries" in str(raised.value)
    rejected = make_source(
        uri=f"mongodb://app:{SECRET}@{shard.host}/?replicaSet=rs0",
        client_options={"serverSelectionTimeoutMS": 100},
    )
    with pytest.raises(OplogError) as refused:  # the emulator refuses authentication
        poll(rejected, lambda _b: False)
    for message in (str(raised.value), str(refused.value), caplog.text):
        assert SECRET not in message
    assert "app:***@" in str(raised.value)
    assert "app:***@" in caplog.text
