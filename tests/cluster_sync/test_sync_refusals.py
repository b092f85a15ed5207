"""What a sync refuses before anything is written, each naming what it was given: a target
that is the source, maps that are malformed, collide, point into the server's databases or
name nothing on the source, a checkpoint written for another source, and a target that
does not answer (one line, the redacted host and the timeout, no topology dump).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

import shardstream
from shardstream.cli.cluster_scope import DEFAULT_CONNECT_TIMEOUT_S
from shardstream.cli.main import main
from shardstream.cli.sync import DEFAULT_BATCH, DEFAULT_IDLE_EXIT_WAIT_S
from shardstream.cli.sync_api import DEFAULT_COMMIT_TIMEOUT_S
from shardstream.cluster_sync import ClusterUnreachable, SyncOptions, SyncRefused
from shardstream.cluster_sync import sync_options as sync_defaults
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.emulator import EmulatedCluster
from shardstream.errors import ConfigurationError
from tests.cluster_sync.conftest import checkpoint
from tests.cluster_sync.static_source import static_source

SERVER_DATABASES = {"admin", "config", "local"}


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """shop.orders, shop.users and other.things on the first shard (not logged)."""
    with static_source() as cluster:
        primary = cluster.shards[0]
        primary.load_collection("shop.orders", [{"_id": n} for n in range(3)])
        primary.load_collection("shop.users", [{"_id": n} for n in range(2)])
        primary.load_collection("other.things", [{"_id": "x"}])
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=1) as cluster:
        yield cluster


def _user_databases(uri: str) -> set[str]:
    client: MongoClient[Any] = MongoClient(uri)
    with client:
        return set(client.list_database_names()) - SERVER_DATABASES


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI, expect exit 1 and exactly one error line; return it."""
    capsys.readouterr()
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    (line,) = err.strip().splitlines()
    assert line.startswith("shardstream sync: error: ")
    return line


def test_a_target_that_is_the_source_is_refused_before_anything_is_written(
    source: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # Same cluster identity: config.version's clusterId, which the server writes once
    # (ShardingCatalogManager::_initConfigVersion); the emulator answers it through mongos.
    before = _user_databases(source.uri)
    argv = ["sync", "--source", source.uri, "--target", source.uri, "--map", "shop=shop2"]
    line = _refused([*argv, "--idle-exit", "0.2"], capsys)
    assert f"--target {source.uri}" in line
    assert f"cluster {source.config.cluster_id}" in line
    assert _user_databases(source.uri) == before  # no shop2, no shardstream_sync


def test_a_replica_set_target_is_told_apart_by_its_replica_set_id(
    source: EmulatedCluster,
) -> None:
    # A replica set has no config.version: its identity is replSetGetConfig's
    # settings.replicaSetId (generated at replSetInitiate).
    from shardstream.cluster_sync.cluster_identity import cluster_identity, open_cluster

    shard = source.shards[0]
    client = open_cluster(shard.uri, "target", 5)
    with client:
        identity = cluster_identity(client)
    assert identity == f"replica set {shard.name} {shard.replica_set_id}"


@pytest.mark.parametrize(
    ("maps", "named"),
    [
        (["a=b=c"], "'a=b=c'"),
        (["=x"], "'=x'"),
        (["x="], "'x='"),
        (["shop"], "'shop'"),
        (["shop=admin"], "'shop=admin'"),
        (["shop=config"], "'shop=config'"),
        (["shop.orders=local.orders"], "'shop.orders=local.orders'"),
        (["shop=shardstream_sync"], "'shop=shardstream_sync'"),
        (["shop.orders=m.x", "shop.users=m.x"], "shop.orders=m.x and shop.users=m.x"),
        (["shop=m", "other=m"], "shop=m and other=m"),
        (["shop=a", "shop=b"], "shop=a and shop=b"),
        (["shop=a.b"], "'shop=a.b'"),
        (["sh$op=x"], "'sh$op=x'"),
        (["shop.=x.y"], "'shop.=x.y'"),
        (["nosuch=x"], "nosuch=x"),
        (["shop.nosuch=x.y"], "shop.nosuch=x.y"),
        # A database mapped onto another source database merges the two.
        (["shop=other"], "other and shop both landing in database other"),
        (["shop.orders=shop.users"], "shop.orders and shop.users both landing on shop.users"),
    ],
)
def test_bad_maps_are_refused_naming_the_rule_before_anything_is_written(
    source: EmulatedCluster,
    target: EmulatedCluster,
    maps: list[str],
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = [flag for rule in maps for flag in ("--map", rule)]
    argv = ["sync", "--source", source.uri, "--target", target.uri, *flags]
    line = _refused([*argv, "--idle-exit", "0.2"], capsys)
    assert named in line
    assert _user_databases(target.uri) == set()  # not even the checkpoint database
    with pytest.raises(ConfigurationError):
        shardstream.sync(source.uri, target.uri, maps=maps, idle_exit_s=0.2)
    assert _user_databases(target.uri) == set()


def test_a_map_of_a_missing_namespace_is_checked_only_for_a_new_sync(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    # Refused for a new sync (a typo would copy the meant database under its own name);
    # a resumed sync's rule may name a collection dropped on the source since.
    with pytest.raises(SyncRefused, match="nosuch"):
        shardstream.sync(source.uri, target.uri, maps=["nosuch=x"], idle_exit_s=0.2)
    maps = ["shop.orders=archive.orders"]
    assert shardstream.sync(source.uri, target.uri, maps=maps, idle_exit_s=0.2).caught_up
    source.shards[0].store.put("shop.orders", None)  # dropped, without a trace in the oplog
    assert shardstream.sync(source.uri, target.uri, maps=maps, idle_exit_s=0.2).caught_up


def test_a_checkpoint_written_for_another_source_is_refused_naming_both(
    source: EmulatedCluster, target: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shardstream.sync(source.uri, target.uri, db="shop", idle_exit_s=0.2).caught_up
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        stored = checkpoint(client)
    assert stored is not None
    assert stored["source_id"] == f"cluster {source.config.cluster_id}"
    with static_source() as other:
        other.shards[0].load_collection("crm.people", [{"_id": 1}])
        argv = ["sync", "--source", other.uri, "--target", target.uri, "--idle-exit", "0.2"]
        line = _refused(argv, capsys)
        assert f"cluster {source.config.cluster_id}" in line
        assert f"cluster {other.config.cluster_id}" in line
        assert "--sync-id" in line
        assert "no longer" not in line
    with MongoClient(target.uri) as client:
        assert checkpoint(client) == stored
    assert "crm" not in _user_databases(target.uri)


def test_a_rerun_with_another_scope_is_refused_naming_both(
    source: EmulatedCluster, target: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shardstream.sync(source.uri, target.uri, include=["shop.*"], idle_exit_s=0.2).caught_up
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        stored = checkpoint(client)
        assert stored is not None
        assert stored["scope"] == NamespaceMap(include=("shop.*",)).described()
        argv = ["sync", "--source", source.uri, "--target", target.uri, "--idle-exit", "0.2"]
        line = _refused([*argv, "--db", "shop"], capsys)
        assert "--include 'shop.*'" in line
        assert "--db shop" in line
        assert "--restart" in line
        assert checkpoint(client) == stored  # refused before anything is written
        # The same scope resumes.
        assert main([*argv, "--include", "shop.*"]) == 0
        # A checkpoint without a scope (an earlier version's) is taken as it is.
        client.shardstream_sync.checkpoints.update_one({}, {"$unset": {"scope": 1}})
        assert main([*argv, "--db", "shop"]) == 0


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_target_is_one_line_naming_the_redacted_host_and_the_timeout(
    source: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _closed_port()
    target = f"mongodb://admin:pw123@127.0.0.1:{port}/"
    argv = ["sync", "--source", source.uri, "--target", target, "--connect-timeout", "0.3"]
    line = _refused(argv, capsys)
    assert f"mongodb://admin:***@127.0.0.1:{port}/" in line
    assert "0.3 s" in line
    assert "pw123" not in line
    with pytest.raises(ClusterUnreachable, match=f"127.0.0.1:{port}"):
        shardstream.verify(source.uri, target, connect_timeout_s=0.3)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"sync_id": ""}, "--sync-id"),
        ({"batch_size": 0}, "--batch-size"),
        ({"copy_readers": 0}, "--copy-readers"),
        ({"writers": 0}, "--writers"),
        ({"on_conflict": "ignore"}, "--on-conflict"),
        ({"idle_exit_s": -1.0}, "--idle-exit"),
        ({"connect_timeout_s": 0.0}, "--connect-timeout"),
        ({"idle_exit_wait_s": float("nan")}, "--idle-exit-wait"),
        ({"tailer": "fork"}, "--tailer"),
    ],
)
def test_option_values_that_mean_nothing_are_refused(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        SyncOptions(source="mongodb://a/", target="mongodb://b/", **options)


def test_the_cli_shows_the_options_defaults() -> None:
    # Repeated in cli/sync.py so the CLI starts without pymongo.
    assert DEFAULT_CONNECT_TIMEOUT_S == sync_defaults.DEFAULT_CONNECT_TIMEOUT_S
    assert DEFAULT_IDLE_EXIT_WAIT_S == sync_defaults.DEFAULT_IDLE_EXIT_WAIT_S
    assert DEFAULT_COMMIT_TIMEOUT_S == sync_defaults.DEFAULT_COMMIT_TIMEOUT_S
    assert DEFAULT_BATCH == sync_defaults.DEFAULT_BATCH


def test_empty_names_in_the_scope_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="--db"):
        NamespaceMap.from_options("", None, [])
