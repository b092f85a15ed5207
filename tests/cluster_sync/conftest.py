"""Fixtures for sync tests: a simulated source cluster, an emulated target, a running sync."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync import SyncJob, SyncOptions, SyncResult
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet, Stall
from shardstream.resume_token import decode_token_document
from shardstream.sim import SimulationConfig
from shardstream.sim.emulated_source import SimulatedSource
from tests.sync_thread import SyncThread, wait_for


class RunningSync(SyncThread):
    """A :class:`SyncJob` on a thread, with its result or error kept for the test."""

    def __init__(self, options: SyncOptions) -> None:
        self.lines: list[str] = []
        self.job = SyncJob(options, report=self.lines.append)
        super().__init__(self.job.run)

    def finish(self) -> SyncResult:
        """Stop after the batch in flight and return the result (re-raising its error)."""
        self.job.stop()
        return self.join()


def sync_to_the_end(
    source: SimulatedSource,
    target: EmulatedCluster | EmulatedReplicaSet,
    *,
    before_feed: Callable[[], None] | None = None,
    **options: Any,
) -> RunningSync:
    """Start a sync, feed the source's rest once the copy is done, wait until all is applied.

    The rest is fed only once the checkpoint says the stream phase began: fed earlier, it
    could reach the copy (a busy machine delays the copy's reads), and the tests count the
    copy as exactly the run up to the cut; the rest must come to the target through the
    stream. ``before_feed`` runs in between (e.g. to queue faults for the stream phase).
    Returns the still-running sync (``finish()`` it).
    """
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        running = RunningSync(SyncOptions(source=source.cluster.uri, target=target.uri, **options))
        wait_for(
            lambda: (checkpoint(client) or {}).get("phase") == "stream" or running.error,
            "the sync to finish its copy",
        )
        if before_feed is not None:
            before_feed()
        end = source.feed_rest()
        wait_for(lambda: applied_through(client, end) or running.error, "the sync to reach the end")
        return running


def stop_in_the_copy(
    source: EmulatedCluster, target: EmulatedCluster, stall_s: float = 2.0, **options: Any
) -> None:
    """Run a sync (one copy reader) until its second copy batch is in flight, stop it there."""
    target.mongos.faults.add("insert", Stall(0.0))
    target.mongos.stall_next("insert", stall_s)
    running = RunningSync(
        SyncOptions(source=source.uri, target=target.uri, copy_readers=1, **options)
    )
    wait_for(lambda: not len(target.mongos.faults) or running.error, "the held copy batch")
    running.finish()


def checkpoint(target: MongoClient[Any], sync_id: str = "default") -> dict[str, Any] | None:
    """The sync's stored checkpoint document, if any."""
    return target.shardstream_sync.checkpoints.find_one({"_id": sync_id})


def applied_through(target: MongoClient[Any], end: Timestamp, sync_id: str = "default") -> bool:
    """Whether the stored checkpoint's token is at or past cluster time ``end``."""
    document = checkpoint(target, sync_id)
    token = (document or {}).get("token")
    return isinstance(token, dict) and decode_token_document(token).cluster_time >= end


@pytest.fixture
def small_run() -> SimulationConfig:
    """A run with every kind of change, small enough for a test."""
    return SimulationConfig(seed=5, shards=3, operations=260, collmod_at=0.5)


@pytest.fixture
def source(small_run: SimulationConfig) -> Iterator[SimulatedSource]:
    """The simulated source, started and cut at 40 % of its stream."""
    simulated = SimulatedSource(small_run)
    simulated.start()
    yield simulated
    simulated.stop()


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    """An emulated 2-shard target cluster."""
    with EmulatedCluster(shards=2) as cluster:
        yield cluster


@pytest.fixture
def target_client(target: EmulatedCluster) -> Iterator[MongoClient[Any]]:
    """A client on the target's mongos."""
    client: MongoClient[Any] = MongoClient(target.uri, serverSelectionTimeoutMS=5000)
    yield client
    client.close()
