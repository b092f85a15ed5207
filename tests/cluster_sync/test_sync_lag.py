"""The sync's state is never flattering: lag and ``--idle-exit`` measured against the
source's committed time, read from its shards (``hello``'s ``lastWrite.majorityOpTime``).

The source is static: shard00 takes 20 inserts before the sync starts, shard01 stays idle
and writes no periodic no-op (the emulator has no no-op writer), so the merge holds the
inserts back (every shard must promise a later time first, as mongos's
AsyncResultsMerger requires). The sync streams from before them (``start_at``), so they
come through the stream, not a copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cli.main import main
from shardstream.cluster_sync import SyncOptions
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, wait_for
from tests.cluster_sync.static_source import START, settle, static_source

INSERTS = 20
EVENTS = INSERTS + 1  # the collection's implicit create, then the inserts


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """A static 2-shard source whose first shard logged 20 inserts; the second is idle."""
    with static_source() as cluster:
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            client.shop.orders.insert_many([{"_id": n} for n in range(INSERTS)])
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=1) as cluster:
        yield cluster


def _orders_on(target: EmulatedCluster) -> int:
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        return len(list(client.shop.orders.find()))


def _lag_s(line: str) -> str:
    found = re.search(r", lag ([^,]+)", line)
    assert found is not None, line
    return found.group(1)


def test_the_lag_is_not_zero_while_an_idle_shard_holds_the_events_back(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    # Before: a batch that released nothing set the lag to 0 s, so the line said
    # "applied 0 events ... lag 0 s" while the inserts waited at the merge.
    running = RunningSync(SyncOptions(source=source.uri, target=target.uri, start_at=START))
    try:

        def held_line() -> str | None:
            lines = [line for line in running.lines if line.startswith("sync stream:")]
            return next((line for line in lines if "applied 0 events" in line), None)

        line = wait_for(lambda: held_line() or running.error, "a stream line while held")
        assert isinstance(line, str)
        newest = source.shards[0].oplog.majority
        assert newest is not None
        # Behind by the inserts' time minus START (the applied time), in seconds.
        assert _lag_s(line) == f"{newest.time - START.time} s"
        assert _orders_on(target) == 0  # held indeed
        settle(source)  # the idle shard's periodic no-op: the merge releases the inserts

        def caught_up_line() -> str | None:
            lines = [line for line in running.lines if f"applied {EVENTS} events" in line]
            return next((line for line in lines if _lag_s(line) == "0 s"), None)

        wait_for(lambda: caught_up_line() or running.error, "a line caught up")
        assert _orders_on(target) == INSERTS
    finally:
        running.finish()


def test_idle_exit_with_events_held_back_stops_behind_and_says_so(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    options = SyncOptions(
        source=source.uri, target=target.uri, start_at=START, idle_exit_s=0.1, idle_exit_wait_s=0.3
    )
    result = RunningSync(options).join()
    newest = source.shards[0].oplog.majority
    assert (result.applied, result.caught_up) == (0, False)
    assert result.source_time == newest
    assert result.applied_through is not None
    assert newest is not None
    assert result.applied_through < newest
    assert "behind the source" in result.behind_text()
    assert _orders_on(target) == 0


def test_the_cli_exits_1_when_the_sync_stops_behind(
    source: EmulatedCluster, target: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sync", "--source", source.uri, "--target", target.uri]
    argv += ["--start-at-operation-time", f"{START.time},{START.inc}"]
    assert main([*argv, "--idle-exit", "0.1", "--idle-exit-wait", "0.3"]) == 1
    err = capsys.readouterr().err
    (summary,) = [line for line in err.splitlines() if line.startswith("sync stopped:")]
    assert "0 events applied" in summary
    assert "behind the source" in summary


def test_idle_exit_waits_until_the_held_events_are_applied(
    source: EmulatedCluster, target: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # With the idle shard nudged (appendOplogNote), the merge releases the inserts: the
    # quiet period alone never ends the sync before they are applied.
    argv = ["sync", "--source", source.uri, "--target", target.uri]
    argv += ["--start-at-operation-time", f"{START.time},{START.inc}"]
    argv += ["--idle-exit", "0.1", "--idle-exit-wait", "60", "--idle-noop-interval", "0.2"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    (summary,) = [line for line in err.splitlines() if line.startswith("sync stopped:")]
    assert f"{EVENTS} events applied" in summary
    assert "caught up with the source" in summary
    assert _orders_on(target) == INSERTS
