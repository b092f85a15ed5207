"""``shardstream sync`` end to end through its command line and ``shardstream.sync()``: the
flags reach the run, sync ids keep their own checkpoints, ``--restart``, a lost oplog
history, a conflict in the stream phase, and the progress line.

The source is a static emulated cluster (nothing happens on it unless a test writes), so
what the copy takes and what the stream carries is exactly what each test decides.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.synchronous import auth

import shardstream
from shardstream.cli.main import main
from shardstream.cluster_sync import SyncConflict, SyncOptions
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, applied_through, checkpoint, wait_for
from tests.cluster_sync.static_source import contents, settle, static_source

USERS = [{"_id": i, "qty": i} for i in range(10)]
ORDERS = [{"_id": i, "item": f"item-{i}"} for i in range(20)]
USER_DATABASES = {"admin", "config", "local", "shardstream_sync"}


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """shop.users, shop.orders and other.things, loaded on the first shard (not logged)."""
    with static_source() as cluster:
        primary = cluster.shards[0]
        primary.load_collection("shop.users", USERS)
        primary.load_collection("shop.orders", ORDERS)
        primary.load_collection("other.things", [{"_id": "x"}])
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=2) as cluster:
        yield cluster


@pytest.fixture
def clients(
    source: EmulatedCluster, target: EmulatedCluster
) -> Iterator[tuple[MongoClient[Any], MongoClient[Any]]]:
    src: MongoClient[Any] = MongoClient(source.uri)
    dst: MongoClient[Any] = MongoClient(target.uri)
    with src, dst:
        yield src, dst


def _databases(client: MongoClient[Any]) -> set[str]:
    return set(client.list_database_names()) - USER_DATABASES


def _sync(source: EmulatedCluster, target: EmulatedCluster, *flags: str) -> list[str]:
    return ["sync", "--source", source.uri, "--target", target.uri, *flags]


def test_every_sync_flag_reaches_the_run_and_decides_what_lands_where(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Some flags (writers, transactions) change only how the work is done, not its
    # result: the options the CLI built are recorded on their way into the real job.
    from shardstream import cluster_sync
    from shardstream.cluster_sync import migration

    seen: list[SyncOptions] = []

    class RecordingJob(cluster_sync.SyncJob):
        def __init__(self, options: SyncOptions, **kwargs: Any) -> None:
            seen.append(options)
            super().__init__(options, **kwargs)

    monkeypatch.setattr(migration, "SyncJob", RecordingJob)  # the CLI runs a Migration
    flags = ["--db", "shop", "--coll", "users", "--map", "shop=mirror"]
    flags += ["--map", "shop.orders=archive.orders", "--writers", "3", "--no-transactions"]
    flags += ["--on-conflict", "skip", "--idle-noop-interval", "0.5", "--sync-id", "other"]
    code = main(_sync(source, target, *flags, "--idle-exit", "0.5"))
    assert code == 0, capsys.readouterr().err
    (options,) = seen
    assert (options.writers, options.transactions, options.on_conflict) == (3, False, "skip")
    assert (options.idle_noop_interval_s, options.idle_exit_s) == (0.5, 0.5)
    src, dst = clients
    # Only shop.users is in scope; the database rule renames it, the collection rule
    # names a collection out of scope, so archive is never created.
    assert _databases(dst) == {"mirror"}
    assert dst.mirror.list_collection_names() == ["users"]
    assert contents(dst, "mirror", "users") == contents(src, "shop", "users")
    assert checkpoint(dst, "other") is not None
    assert checkpoint(dst) is None  # nothing was stored under the default id


def test_the_python_api_takes_scope_and_maps_like_the_cli(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
) -> None:
    src, dst = clients
    maps = ["shop=mirror", "shop.orders=archive.orders"]
    result = shardstream.sync(
        source.uri, target.uri, db="shop", coll="orders", maps=maps, idle_exit_s=0.5
    )
    assert result.copied == len(ORDERS)
    assert _databases(dst) == {"archive"}  # the collection rule beats the database rule
    assert contents(dst, "archive", "orders") == contents(src, "shop", "orders")


def test_two_sync_ids_keep_their_own_checkpoints_and_restart_forgets_only_its_own(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    src, dst = clients
    run_a = _sync(source, target, "--db", "shop", "--coll", "users", "--map", "shop=a")
    run_a += ["--sync-id", "a", "--idle-exit", "0.5"]
    run_b = _sync(source, target, "--db", "shop", "--coll", "orders", "--map", "shop=b")
    run_b += ["--sync-id", "b", "--idle-exit", "0.5"]
    assert main(run_a) == 0
    assert main(run_b) == 0
    first_a, first_b = checkpoint(dst, "a"), checkpoint(dst, "b")
    assert first_a is not None
    assert first_b is not None
    assert (first_a["phase"], first_b["phase"]) == ("stream", "stream")
    # A change in a's scope: the same command resumes a from its checkpoint (no copy).
    src.shop.users.insert_one({"_id": 100, "qty": 100})
    settle(source)
    capsys.readouterr()
    assert main(run_a) == 0
    assert "sync stopped: 0 documents copied, 1 events applied" in capsys.readouterr().err
    assert contents(dst, "a", "users") == contents(src, "shop", "users")
    assert checkpoint(dst, "b") == first_b  # b's checkpoint is b's alone
    # --restart forgets a's checkpoint and starts a new copy from a new T0. A new copy
    # expects its target empty (documents deleted on the source since would otherwise
    # stay), so over a's data it stops before touching anything, the old checkpoint
    # kept, unless --on-conflict says to copy over it.
    kept = checkpoint(dst, "a")
    assert main([*run_a, "--restart"]) == 1
    assert "a.users already holds data" in capsys.readouterr().err
    assert checkpoint(dst, "a") == kept
    assert main(run_a) == 0  # so the same command without --restart resumes, no copy
    assert "sync stopped: 0 documents copied" in capsys.readouterr().err
    assert main([*run_a, "--restart", "--on-conflict", "overwrite"]) == 0
    restarted = checkpoint(dst, "a")
    assert restarted is not None
    assert restarted["t0"] > first_a["t0"]
    assert f"sync stopped: {len(USERS) + 1} documents copied" in capsys.readouterr().err
    assert contents(dst, "a", "users") == contents(src, "shop", "users")
    assert checkpoint(dst, "b") == first_b


def _lose_history(source: EmulatedCluster, src: MongoClient[Any], shard: str) -> None:
    """Write past the checkpoint, then roll ``shard``'s oplog over everything before it."""
    src.shop.users.insert_one({"_id": 100, "qty": 100})
    end = settle(source)
    assert source.shard(shard).oplog.truncate_before(end) > 0


def test_an_oplog_rolled_past_the_checkpoint_stops_the_sync_asking_for_a_new_copy(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
) -> None:
    shardstream.sync(source.uri, target.uri, idle_exit_s=0.5)
    _lose_history(source, clients[0], "shard00")
    with pytest.raises(shardstream.ChangeStreamHistoryLost) as caught:
        shardstream.sync(source.uri, target.uri, idle_exit_s=0.5)
    message = str(caught.value)
    assert "shard00" in message
    assert "initial copy" in message
    assert "--restart" in message


def test_the_cli_reports_lost_history_in_one_line_without_the_password(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The emulator does not authenticate (saslStart is refused), so the driver is told
    # to skip it: the credentials then travel every path a real run's do (the shards'
    # URIs are built from the source's), and the test sees what reaches the output.
    monkeypatch.setattr(auth, "authenticate", lambda *_args, **_kwargs: None)
    secret_source = source.uri.replace("mongodb://", "mongodb://admin:s3cret@")
    secret_target = target.uri.replace("mongodb://", "mongodb://admin:t0psecret@")
    argv = ["sync", "--source", secret_source, "--target", secret_target, "--idle-exit", "0.5"]
    assert main(argv) == 0
    _lose_history(source, clients[0], "shard01")
    capsys.readouterr()
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "s3cret" not in out + err
    assert "t0psecret" not in out + err
    (error,) = [line for line in err.splitlines() if line.startswith("shardstream sync:")]
    assert "shard01" in error
    assert "--restart" in error


@pytest.mark.parametrize("in_transaction", [False, True], ids=["single-write", "transaction"])
def test_a_unique_key_only_the_target_has_stops_the_stream_naming_key_and_event_token(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
    in_transaction: bool,
) -> None:
    # The index appears after the copy, so it is the stream's insert that meets it. In a
    # transaction, after a write to another namespace: the report must still name the
    # refused write, not the transaction's first one.
    src, dst = clients
    running = RunningSync(SyncOptions(source=source.uri, target=target.uri))
    stored = wait_for(
        lambda: (checkpoint(dst) or {}).get("phase") == "stream" and checkpoint(dst),
        "the copy to finish",
    )
    dst.shop.command(
        {"createIndexes": "users", "indexes": [{"key": {"qty": 1}, "name": "q", "unique": True}]}
    )
    if in_transaction:
        with src.start_session() as session, session.start_transaction():
            src.shop.orders.insert_one({"_id": 100}, session=session)
            src.shop.users.insert_one({"_id": 100, "qty": 3}, session=session)
    else:
        src.shop.users.insert_one({"_id": 100, "qty": 3})  # qty 3 is _id 3's on the target
    end = settle(source)
    wait_for(lambda: not running.running, "the sync to stop")
    with pytest.raises(SyncConflict) as caught:
        running.finish()
    # The insert's own token, read from the source's stream from the same T0.
    with shardstream.watch(source.uri, start_at_operation_time=stored["t0"]) as stream:
        events = [wait_for(stream.try_next, "an insert event") for _ in range(1 + in_transaction)]
    (event,) = [e for e in events if e["ns"] == {"db": "shop", "coll": "users"}]
    message = str(caught.value)
    assert "shop.users" in message
    assert "qty" in message
    assert event["_id"]["_data"] in message
    assert not applied_through(dst, end)  # nothing past the refused write is checkpointed


def test_the_progress_lines_show_the_copy_and_the_streams_rate_and_lags(
    source: EmulatedCluster,
    target: EmulatedCluster,
    clients: tuple[MongoClient[Any], MongoClient[Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    src, dst = clients

    def write_in_the_stream_phase() -> None:
        wait_for(lambda: (checkpoint(dst) or {}).get("phase") == "stream", "phase 2")
        src.shop.orders.insert_many([{"_id": 100 + i} for i in range(5)])
        settle(source)

    # main() stays on the main thread (it installs a SIGINT handler); the writes don't.
    writer = threading.Thread(target=write_in_the_stream_phase, daemon=True)
    writer.start()
    code = main(_sync(source, target, "--idle-exit", "1.5"))
    writer.join(30)
    err = capsys.readouterr().err
    assert code == 0, err
    total = len(USERS) + len(ORDERS) + 1
    copy_lines = [line for line in err.splitlines() if line.startswith("sync copy:")]
    assert f"copied {total}/{total} documents" in copy_lines[-1]
    stream_lines = [line for line in err.splitlines() if line.startswith("sync stream:")]
    last = stream_lines[-1]
    assert "applied 5 events" in last
    assert "events/s" in last
    assert ", lag " in last
    assert ", shards: shard00 " in last
    assert " shard01 " in last
