"""``--shard-target``: the collections sharded on the source at T0 are sharded alike on the
target before their documents arrive; without it they land unsharded, with a note.
Also a ``shardCollection`` after T0, which reaches the target through the stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

import shardstream
from shardstream.cli.main import main
from shardstream.cluster_sync import ShardingRefused, SyncOptions
from shardstream.cluster_sync.initial_copy import CopyProgress, copy_collections
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, applied_through, checkpoint, wait_for
from tests.cluster_sync.static_source import contents, settle, static_source

SHARDED = {
    "shop.orders": ({"region": 1, "_id": 1}, False),
    "shop.users": ({"uid": "hashed"}, False),
    "shop.skus": ({"sku": 1}, True),
    "shop.names": ({"_id": 1}, False),
}


def _catalog(uri: str) -> dict[str, tuple[dict[str, Any], bool]]:
    """The sharded collections ``config.collections`` lists, with key and ``unique``."""
    client: MongoClient[Any] = MongoClient(uri)
    with client:
        query = {"dropped": {"$ne": True}, "unsplittable": {"$ne": True}}
        entries = client.config.collections.find(query)
        return {entry["_id"]: (entry["key"], entry["unique"]) for entry in entries}


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """Four sharded collections (ranged, hashed, unique, with a collation) and an unsharded one."""
    with static_source() as cluster:
        primary = cluster.shards[0]
        regions = ["eu", "us", "ap"]
        primary.load_collection(
            "shop.orders",
            [{"_id": i, "region": regions[i % 3]} for i in range(30)],
            indexes=[{"key": {"region": 1, "_id": 1}, "name": "region_1__id_1"}],
        )
        primary.load_collection("shop.users", [{"_id": i, "uid": i * 7} for i in range(20)])
        primary.load_collection(
            "shop.skus",
            [{"_id": i, "sku": f"sku-{i}"} for i in range(10)],
            indexes=[{"key": {"sku": 1}, "name": "by_sku", "unique": True}],
        )
        primary.load_collection(
            "shop.names", [{"_id": "é"}, {"_id": "e"}], options={"collation": {"locale": "fr"}}
        )
        primary.load_collection("shop.notes", [{"_id": 1}])
        for ns, (key, unique) in SHARDED.items():
            cluster.shard_collection(ns, key, unique=unique)
        # 8.0 tracks an unsharded collection it moved in config.collections: not sharded.
        tracked = {"_id": "shop.notes", "key": {"_id": 1}, "unique": False, "unsplittable": True}
        cluster.config.insert("config.collections", tracked)
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=2) as cluster:
        yield cluster


def test_the_target_is_sharded_like_the_source_before_the_copy(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    assert _catalog(source.uri) == SHARDED
    result = shardstream.sync(source.uri, target.uri, shard_target=True, idle_exit_s=1)
    assert result.copied == 30 + 20 + 10 + 2 + 1
    assert _catalog(target.uri) == SHARDED
    seen = target.mongos.commands_seen
    assert seen.index("shardcollection") < seen.index("insert")
    assert seen.count("enablesharding") == seen.count("shardcollection") == len(SHARDED)
    src: MongoClient[Any] = MongoClient(source.uri)
    dst: MongoClient[Any] = MongoClient(target.uri)
    with src, dst:
        for name in ("orders", "users", "skus", "names", "notes"):
            assert contents(dst, "shop", name) == contents(src, "shop", name)
        # The source's unique index on the key came first, under its own name.
        names = {spec["name"] for spec in dst.shop.skus.list_indexes()}
        assert names == {"_id_", "by_sku"}


def test_without_the_option_sharded_collections_land_unsharded_with_a_note(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    lines: list[str] = []
    shardstream.sync(source.uri, target.uri, idle_exit_s=1, report=lines.append)
    assert _catalog(target.uri) == {}
    assert "shardcollection" not in target.mongos.commands_seen
    notes = sorted(line for line in lines if line.startswith("note:"))
    assert len(notes) == len(SHARDED)
    for line, ns in zip(notes, sorted(SHARDED), strict=True):
        assert f"{ns} is sharded on the source (key {SHARDED[ns][0]!r})" in line
        assert "--shard-target" in line


def test_the_cli_flag_shards_the_mapped_namespaces(
    source: EmulatedCluster, target: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sync", "--source", source.uri, "--target", target.uri, "--db", "shop"]
    code = main([*argv, "--map", "shop=mirror", "--shard-target", "--idle-exit", "1"])
    assert code == 0, capsys.readouterr().err
    expected = {ns.replace("shop.", "mirror."): placement for ns, placement in SHARDED.items()}
    assert _catalog(target.uri) == expected


def test_a_target_sharded_on_another_key_stops_the_sync_naming_both(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    target.shard_collection("shop.orders", {"_id": "hashed"})
    with pytest.raises(ShardingRefused, match=r"shop\.orders on \{'region': 1, '_id': 1\}"):
        shardstream.sync(source.uri, target.uri, shard_target=True, idle_exit_s=1)


def test_a_collection_sharded_after_t0_is_sharded_on_the_target_by_the_stream(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    client: MongoClient[Any] = MongoClient(target.uri)
    source_client: MongoClient[Any] = MongoClient(source.uri)
    with client, source_client:
        options = SyncOptions(source=source.uri, target=target.uri, shard_target=True)
        running = RunningSync(options)
        wait_for(lambda: (checkpoint(client) or {}).get("phase") == "stream", "phase 2")
        source_client.admin.command("shardCollection", "shop.late", key={"k": 1})
        end = settle(source)
        wait_for(lambda: applied_through(client, end) or running.error, "the stream's end")
        running.finish()
    assert _catalog(target.uri) == {**SHARDED, "shop.late": ({"k": 1}, False)}


def test_a_copy_resumed_on_a_sharded_target_writes_again_by_id_and_shard_key(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    # A kill during the copy leaves documents on the target; the resumed copy's inserts
    # of those fail on _id and go again as upserts, which mongos accepts on a sharded
    # collection only with the whole shard key in the filter (the emulator does not
    # check that, so the filters are read from what it received).
    on_source: MongoClient[Any] = MongoClient(source.uri)
    on_target: MongoClient[Any] = MongoClient(target.uri)
    with on_source, on_target:
        scope = NamespaceMap.from_options(db="shop", coll="users")  # hashed on uid
        for _run in range(2):  # the second run meets every document already there
            copy_collections(
                on_source,
                on_target,
                scope,
                readers=1,
                on_conflict="fail",
                progress=CopyProgress(),
                shard_target=True,
            )
        last = target.mongos.last_bodies["update"]
        assert last["update"] == "users"
        assert [sorted(update["q"]) for update in last["updates"]] == [["_id", "uid"]] * 20
        assert contents(on_target, "shop", "users") == contents(on_source, "shop", "users")
