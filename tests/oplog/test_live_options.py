"""Live tailers: read preference, refused logins, and the config server found by discovery."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from bson.timestamp import Timestamp
from pymongo import MongoClient

import shardstream
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet, ErrorReply
from shardstream.errors import ConfigurationError, OplogError
from shardstream.oplog.live.discovery import discover_cluster
from shardstream.oplog.live.faults import RetryPolicy
from shardstream.oplog.live.process_tailer import ProcessOplogSource
from shardstream.oplog.live.tailer import LiveOplogSource
from tests.deadlines import returns_within

from .live_helpers import AWAIT_MS, fill, poll

SECRET = "s3cr3t-Pa55"


@pytest.fixture
def filled(shard: EmulatedReplicaSet) -> EmulatedReplicaSet:
    """The shard holding noops at seconds 1..3, committed."""
    fill(shard, 1, 3)
    return shard


@pytest.mark.parametrize("mode", ["primaryPreferred", "secondaryPreferred", "nearest"])
def test_the_tailer_reads_with_the_requested_read_preference(
    filled: EmulatedReplicaSet, mode: str
) -> None:
    shard = filled
    source = LiveOplogSource(
        "shard00", shard.uri, start=Timestamp(1, 1), read_preference=mode, await_ms=AWAIT_MS
    )
    try:
        batches = poll(source, lambda got: sum(len(b.entries) for b in got) >= 3)
    finally:
        source.close()
    assert [e["ts"] for b in batches for e in b.entries] == [Timestamp(s, 1) for s in (1, 2, 3)]
    # The find carried the mode (pymongo only sends $readPreference for non-primary modes).
    assert shard.last_bodies["find"]["$readPreference"]["mode"] == mode


EXPECTED_MODES = "expected one of primary, primaryPreferred, secondary, secondaryPreferred, nearest"


@pytest.mark.parametrize("tailer", [LiveOplogSource, ProcessOplogSource])
@pytest.mark.parametrize("mode", ["fastest", "Primary", "", None])
def test_an_unknown_read_preference_names_the_value_and_the_modes(
    filled: EmulatedReplicaSet, tailer: type[Any], mode: object
) -> None:
    # Our own words, whatever the installed pymongo says of the same mistake.
    with pytest.raises(ConfigurationError) as raised:
        tailer("shard00", filled.uri, start=Timestamp(1, 1), read_preference=mode)
    assert str(raised.value) == f"read preference {mode!r}: {EXPECTED_MODES}"


def test_watch_checks_the_read_preference_before_connecting() -> None:
    # A listener that accepts and never answers: a watch that connected first would wait
    # out server selection (30 s, past the deadline) and leave a connection behind.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        with pytest.raises(ConfigurationError) as raised:
            returns_within(
                lambda: shardstream.watch(
                    f"mongodb://127.0.0.1:{port}/", read_preference="fastest"
                ),
                "watch() with an unknown read preference",
                seconds=20,
            )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # no connection is waiting to be accepted
            listener.accept()
    assert str(raised.value) == f"read preference 'fastest': {EXPECTED_MODES}"


def test_the_watch_command_refuses_an_unknown_read_preference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["watch", "mongodb://127.0.0.1:1/", "--read-preference", "fastest"])
    assert exited.value.code == 2
    assert "fastest" in capsys.readouterr().err


def test_a_refused_login_fails_at_once_without_retrying(
    filled: EmulatedReplicaSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = filled
    retries: list[int] = []  # every retry asks the policy for its delay first
    backoff = RetryPolicy.delay

    def counted_delay(policy: RetryPolicy, attempt: int) -> float:
        retries.append(attempt)
        return backoff(policy, attempt)

    monkeypatch.setattr(RetryPolicy, "delay", counted_delay)
    for _ in range(10):  # more than one attempt would need: only the first may be used
        shard.faults.add("saslstart", ErrorReply(18, "AuthenticationFailed", "Auth failed."))
    uri = f"mongodb://app:{SECRET}@{shard.host}/?replicaSet=rs0&serverSelectionTimeoutMS=300"
    source = LiveOplogSource(
        "shard00",
        uri,
        start=Timestamp(1, 1),
        await_ms=AWAIT_MS,
        retry=RetryPolicy(max_retries=5, initial_backoff=1.0),
    )
    try:
        with pytest.raises(OplogError) as raised:
            poll(source, lambda _b: False, timeout=20)  # five retries would take over 30 s
    finally:
        source.close()
    assert "AuthenticationFailed" in str(raised.value)
    assert "gave up" not in str(raised.value)
    assert SECRET not in str(raised.value)
    assert retries == []  # not one retry was scheduled


def test_watch_passes_read_preference_to_every_tailer() -> None:
    with EmulatedCluster(shards=2) as cluster:
        for shard in cluster.shards:
            fill(shard, 1, 3)
        with shardstream.watch(
            cluster.uri,
            start_at_operation_time=Timestamp(1, 1),
            read_preference="secondaryPreferred",
            max_await_time_ms=100,
        ) as stream:
            nodes = [*cluster.shards, cluster.config]
            deadline = time.monotonic() + 5
            while not all("find" in node.last_bodies for node in nodes):
                assert time.monotonic() < deadline, [node.commands_seen for node in nodes]
                stream.try_next()
        for node in nodes:
            assert node.last_bodies["find"]["$readPreference"]["mode"] == "secondaryPreferred"


def test_discovery_names_the_config_server() -> None:
    with EmulatedCluster(shards=1) as cluster:
        client: MongoClient[dict[str, Any]] = MongoClient(cluster.uri)
        try:  # the emulator has no logins: the credentials come from the URI given beside
            info = discover_cluster(client, uri=f"mongodb://app:{SECRET}@{cluster.mongos.host}/")
        finally:
            client.close()
        assert info.config is not None
        assert info.config.set_name == cluster.config.name
        assert f"app:{SECRET}@" in info.config.uri  # the tailer logs in as the user did
        assert SECRET not in repr(info)
