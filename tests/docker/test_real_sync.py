"""Against real MongoDB 8.0: ``shardstream sync`` from a sharded cluster into another cluster.

The source is a 2-shard cluster (:mod:`tests.docker.sharded_cluster`, balancer on,
periodic no-ops every second); :mod:`tests.docker.sync_workload` seeds it, and once the
sync's copy is done changes it: CRUD on a hashed sharded collection, a multi-shard
transaction, a ``moveChunk`` while the balancer runs, and DDL.  The sync runs to a quiet
point (``idle_exit_s``); then ``verify`` must say equal and the documents of every
collection, read through each side's router as raw BSON, must be the same bytes.

* Into a second sharded cluster, with ``shard_target``: the API (``shardstream.sync`` on a
  thread), and the target must have the source's sharded collections sharded alike.
* Into a replica set, through the CLI: killed with SIGKILL in its stream phase, a second
  round of changes made while it is down, then the same command again with
  ``--idle-exit`` and ``--verify``: it resumes from its checkpoint (no new copy).
* The cutover: a sync into a replica set committed through its control (the source's
  writes blocked by ``setUserWriteBlockMode``, the target equal, ``COMMITTED``).

NEVER RUN.  These tests were written and type-checked on machines without a Docker engine;
they have not run against a real server, so their waits, the workload's DDL on 8.0 and
the quiet-point timing are as read from the documentation, not as observed.  Without an
engine they skip with the reason (``SHARDSTREAM_REQUIRE_DOCKER=1`` turns that into a
failure).  Both start two containers (about 10 processes): allow minutes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Final

import pytest
from pymongo import MongoClient

import shardstream
from shardstream.sim.emulated_source import cluster_state
from tests.docker.sharded_cluster import replica_set, sharded_cluster
from tests.docker.sync_workload import DB, change_source, seed_source
from tests.sync_thread import SyncThread, wait_for

# Never run here (no Docker engine): a cluster start is about a minute, so a generous bound.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]
IMAGE: Final = "mongo:8.0"
# No event arrives while a moveChunk runs (its writes are fromMigrate): a quiet point is
# well past the longest step of a round, not one gap between two writes.
IDLE_EXIT_S: Final = 20.0
WAIT_S: Final = 300.0


def _client(uri: str) -> MongoClient[Any]:
    return MongoClient(uri)


def _checkpoint(target: MongoClient[Any]) -> dict[str, Any]:
    return target.shardstream_sync.checkpoints.find_one({"_id": "default"}) or {}


def _sync_thread(source: str, target: str, **options: Any) -> tuple[SyncThread, list[str]]:
    """``shardstream.sync`` on a thread, and the progress lines it reports."""
    lines: list[str] = []
    run = SyncThread(lambda: shardstream.sync(source, target, report=lines.append, **options))
    return run, lines


def _assert_same(
    source: MongoClient[Any], target: MongoClient[Any], source_uri: str, target_uri: str
) -> None:
    report = shardstream.verify(source_uri, target_uri)
    assert report.equal, "\n".join(report.lines())
    on_source = cluster_state(source)
    assert (DB, "orders") in on_source
    assert cluster_state(target) == on_source


def test_sync_into_a_sharded_cluster_through_migrations_transactions_and_ddl(
    docker_engine: None,
) -> None:
    with (
        sharded_cluster(IMAGE) as source,
        sharded_cluster(IMAGE) as target,
        _client(source.uri) as src,
        _client(target.uri) as dst,
    ):
        seed_source(src)
        assert src.admin.command("balancerStatus").get("mode") == "full"
        sync, lines = _sync_thread(
            source.uri, target.uri, shard_target=True, idle_exit_s=IDLE_EXIT_S
        )
        # The changes start once the copy is done: a rename or drop that overlaps the copy
        # is not what this test is about (the emulated tests overlap copy and CRUD).
        wait_for(
            lambda: _checkpoint(dst).get("phase") == "stream" or not sync.running,
            "the copy to finish",
            WAIT_S,
        )
        assert sync.running, f"the sync ended before the changes: {sync.error!r}"
        txn_shards = change_source(src, 1, source.shard_uris)
        result = sync.join(WAIT_S, f"the sync did not go idle in {WAIT_S} s")
        assert txn_shards == 2, "the transaction's documents should be on both shards"
        assert dst[DB].orders.find_one({"_id": "last-1"}) is not None, (
            "the sync went idle before the last change: raise IDLE_EXIT_S"
        )
        assert result.applied > 0
        _assert_same(src, dst, source.uri, target.uri)
        for name in ("orders", "late_1"):
            sharded = dst.config.collections.find_one({"_id": f"{DB}.{name}"}) or {}
            assert sharded.get("key") == {"_id": "hashed"}, f"{DB}.{name} on the target"
        assert any(line.startswith("sync stream:") for line in lines)


def _cli_sync(source: str, target: str, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "shardstream", "sync", "--source", source, "--target", target]
    return subprocess.Popen(
        [*command, "--batch-size", "10", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@contextlib.contextmanager
def _seeded_into_replica_set() -> Iterator[tuple[Any, str, MongoClient[Any], MongoClient[Any]]]:
    """A seeded sharded source and an empty replica-set target, with a client on each."""
    with (
        sharded_cluster(IMAGE) as source,
        replica_set(IMAGE) as target_uri,
        _client(source.uri) as src,
        _client(target_uri) as dst,
    ):
        seed_source(src)
        yield source, target_uri, src, dst


def test_a_killed_cli_sync_into_a_replica_set_resumes_to_equal(docker_engine: None) -> None:
    with _seeded_into_replica_set() as (source, target_uri, src, dst):
        process = _cli_sync(source.uri, target_uri)
        try:
            wait_for(
                lambda: _checkpoint(dst).get("phase") == "stream" or process.poll() is not None,
                "the copy to finish",
                WAIT_S,
            )
            assert process.poll() is None, process.communicate()[1]
            change_source(src, 1, source.shard_uris)
            wait_for(lambda: _checkpoint(dst).get("token"), "a first applied batch", WAIT_S)
        finally:
            process.send_signal(signal.SIGKILL)
            process.communicate(timeout=60)
        change_source(src, 2, source.shard_uris)  # while no sync runs
        again = _cli_sync(source.uri, target_uri, "--idle-exit", f"{IDLE_EXIT_S:g}", "--verify")
        out, err = again.communicate(timeout=WAIT_S)
        assert again.returncode == 0, err
        assert out.splitlines()[-1] == "verify: equal"
        assert "sync stopped: 0 documents copied" in err  # resumed: no second copy
        assert dst[DB].orders.find_one({"_id": "last-2"}) is not None
        _assert_same(src, dst, source.uri, target_uri)


def test_a_commit_blocks_the_real_sources_writes_and_leaves_the_target_equal(
    docker_engine: None,
) -> None:
    """The cutover against real servers: ``setUserWriteBlockMode`` through a real mongos
    (every shard refuses user writes with 371), the stream applied past the source's time
    after the block, verify equal, ``COMMITTED``; then the block is lifted by hand."""
    from shardstream.cluster_sync import SyncOptions
    from shardstream.cluster_sync.control_api import ControlApi
    from shardstream.cluster_sync.migration import Migration

    with _seeded_into_replica_set() as (source, target_uri, src, dst):
        job = Migration(SyncOptions(source=source.uri, target=target_uri))
        api = ControlApi(job, port=0).start()
        sync = SyncThread(job.run)
        try:
            wait_for(
                lambda: job.control.state == "STREAMING" or not sync.running, "the stream", WAIT_S
            )
            change_source(src, 1, source.shard_uris)
            job.control.commit()
            wait_for(
                lambda: job.control.state in ("COMMITTED", "STREAMING", "FAILED"),
                "the commit's end",
                WAIT_S,
            )
            assert job.control.state == "COMMITTED", job.progress()
            assert sync.join(WAIT_S).caught_up
            with pytest.raises(Exception) as refused:  # noqa: PT011 - the code is what counts
                src[DB].orders.insert_one({"_id": "after-commit"})
            assert getattr(refused.value, "code", None) == 371
            _assert_same(src, dst, source.uri, target_uri)
        finally:
            job.stop()
            api.stop()
            src.admin.command({"setUserWriteBlockMode": 1, "global": False})
