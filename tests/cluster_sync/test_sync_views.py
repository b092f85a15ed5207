"""Views reach the target: those the source holds at T0 through the copy (created from
their definitions), and those created or dropped later through the stream's ``create``
and ``drop`` events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cluster_sync import SyncOptions
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, applied_through, checkpoint
from tests.cluster_sync.static_source import settle, static_source
from tests.sync_thread import wait_for

BIG = [{"$match": {"n": {"$gt": 5}}}]
SMALL = [{"$match": {"n": {"$lte": 5}}}, {"$project": {"n": 1}}]


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """``shop.orders`` with the view ``shop.big`` on it, both at T0."""
    with static_source() as cluster:
        cluster.shards[0].load_collection("shop.orders", [{"_id": i, "n": i} for i in range(9)])
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            client.shop.command({"create": "big", "viewOn": "orders", "pipeline": BIG})
        yield cluster


def _views(client: MongoClient[Any]) -> dict[str, Any]:
    listed = client.shop.list_collections(filter={"type": "view"})
    return {entry["name"]: entry["options"] for entry in listed}


@pytest.mark.parametrize("renamed", [False, True], ids=["same-names", "mapped"])
def test_views_are_copied_and_follow_the_stream(source: EmulatedCluster, renamed: bool) -> None:
    rules = ["shop.orders=shop.orders_v2"] if renamed else []
    reads = "orders_v2" if renamed else "orders"
    on_source: MongoClient[Any] = MongoClient(source.uri)
    with EmulatedCluster(shards=2) as target:
        on_target: MongoClient[Any] = MongoClient(target.uri)
        with on_source, on_target:
            namespaces = NamespaceMap.from_options(rules=rules)
            options = SyncOptions(source=source.uri, target=target.uri, namespaces=namespaces)
            running = RunningSync(options)
            wait_for(
                lambda: (checkpoint(on_target) or {}).get("phase") == "stream" or running.error,
                "the copy",
            )
            assert _views(on_target) == {"big": {"viewOn": reads, "pipeline": BIG}}
            on_source.shop.command({"create": "small", "viewOn": "orders", "pipeline": SMALL})
            on_source.shop.drop_collection("big")
            end = settle(source)
            wait_for(lambda: applied_through(on_target, end) or running.error, "the stream")
            running.finish()
            assert _views(on_target) == {"small": {"viewOn": reads, "pipeline": SMALL}}
            # Nothing else came along: no system.views copied as a collection of its own.
            names = sorted(on_target.shop.list_collection_names())
            assert names == sorted(["small", "system.views", reads])
