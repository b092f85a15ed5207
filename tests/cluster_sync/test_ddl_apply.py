"""Sync: DDL events replayed over a copy read after them converge on the source's catalog."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bson.binary import Binary
from pymongo import MongoClient

from shardstream.cluster_sync.ddl_apply import apply_ddl
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.emulator import EmulatedCluster


@pytest.fixture
def client() -> Iterator[MongoClient[Any]]:
    with EmulatedCluster(shards=1) as cluster, MongoClient(cluster.uri) as connected:
        yield connected


def _rename(drop_target: Any = None) -> dict[str, Any]:
    description: dict[str, Any] = {"to": {"db": "shop", "coll": "archive"}}
    if drop_target is not None:
        description["dropTarget"] = drop_target
    return {
        "operationType": "rename",
        "ns": {"db": "shop", "coll": "orders"},
        "to": {"db": "shop", "coll": "archive"},
        "operationDescription": description,
    }


def test_a_rename_onto_a_collection_the_copy_already_holds_drops_the_replayed_one(
    client: MongoClient[Any],
) -> None:
    # The copy ran after the source renamed orders -> archive: it holds archive (newest),
    # and the stream's replay since T0 re-created orders with a partial history.
    client.shop.archive.insert_one({"_id": 1, "state": "copied"})
    client.shop.orders.insert_one({"_id": 2, "state": "replayed"})
    apply_ddl(client, _rename(), NamespaceMap())
    assert client.shop.list_collection_names() == ["archive"]
    assert list(client.shop.archive.find()) == [{"_id": 1, "state": "copied"}]


def test_a_rename_the_target_already_made_is_already_so(client: MongoClient[Any]) -> None:
    client.shop.archive.insert_one({"_id": 1})
    apply_ddl(client, _rename(), NamespaceMap())
    assert client.shop.list_collection_names() == ["archive"]


def test_a_rename_that_dropped_its_target_on_the_source_drops_it_here(
    client: MongoClient[Any],
) -> None:
    client.shop.archive.insert_one({"_id": 1, "state": "old archive"})
    client.shop.orders.insert_one({"_id": 2, "state": "orders"})
    apply_ddl(client, _rename(drop_target=Binary(bytes(16), 4)), NamespaceMap())
    assert client.shop.list_collection_names() == ["archive"]
    assert list(client.shop.archive.find()) == [{"_id": 2, "state": "orders"}]
