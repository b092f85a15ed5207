"""``shardstream verify`` between two emulated clusters loaded directly with pymongo.

Through the public API (``shardstream.verify``) and the CLI (its exit code and report
lines): equal clusters, one ``_id`` whose bytes differ, a collection that exists only on
the target inside or outside the scope, and a scope with ``--db`` and ``--map``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bson.son import SON
from pymongo import MongoClient

import shardstream
from shardstream.cli.main import main
from shardstream.cluster_sync import NamespaceMap
from shardstream.emulator import EmulatedCluster

ORDERS = [{"_id": n, "item": f"item-{n}", "qty": n * 2} for n in range(1, 6)]
CUSTOMERS = [{"_id": "ada", "city": "London"}, {"_id": "grace", "city": "Arlington"}]


class Clusters:
    """A source and a target cluster with a client on each."""

    def __init__(self, source: EmulatedCluster, target: EmulatedCluster) -> None:
        self.source_uri = source.uri
        self.target_uri = target.uri
        self.source: MongoClient[Any] = MongoClient(source.uri, serverSelectionTimeoutMS=5000)
        self.target: MongoClient[Any] = MongoClient(target.uri, serverSelectionTimeoutMS=5000)

    def load_both(self, db: str, coll: str, documents: list[dict[str, Any]]) -> None:
        """The same documents into ``db.coll`` on both sides."""
        self.source[db][coll].insert_many([dict(doc) for doc in documents])
        self.target[db][coll].insert_many([dict(doc) for doc in documents])

    def cli(self, *scope: str) -> int:
        """``shardstream verify`` on the two clusters, with ``scope`` options; its exit code."""
        return main(["verify", "--source", self.source_uri, "--target", self.target_uri, *scope])

    def close(self) -> None:
        self.source.close()
        self.target.close()


@pytest.fixture
def clusters() -> Iterator[Clusters]:
    """Two empty emulated 2-shard clusters."""
    with EmulatedCluster(shards=2) as source, EmulatedCluster(shards=2) as target:
        pair = Clusters(source, target)
        yield pair
        pair.close()


def _different(report: Any) -> list[Any]:
    return [item for item in report.namespaces if not item.equal]


def test_equal_clusters_are_equal_and_exit_0(
    clusters: Clusters, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters.load_both("shop", "orders", ORDERS)
    clusters.load_both("crm", "customers", CUSTOMERS)
    report = shardstream.verify(clusters.source_uri, clusters.target_uri)
    assert report.equal
    compared = {(item.source, item.target, item.target_count) for item in report.namespaces}
    assert compared == {
        (("crm", "customers"), ("crm", "customers"), len(CUSTOMERS)),
        (("shop", "orders"), ("shop", "orders"), len(ORDERS)),
    }
    assert clusters.cli() == 0
    assert capsys.readouterr().out.splitlines()[-1] == "verify: equal"


@pytest.mark.parametrize(
    ("on_source", "on_target"),
    [
        (SON([("_id", 7), ("a", 1), ("b", 2)]), SON([("_id", 7), ("b", 2), ("a", 1)])),
        ({"_id": 7, "n": 1}, {"_id": 7, "n": 1.0}),
    ],
    ids=["field-order", "int-vs-double"],
)
def test_the_same_id_with_other_bytes_is_a_difference_naming_it(
    clusters: Clusters,
    capsys: pytest.CaptureFixture[str],
    on_source: dict[str, Any],
    on_target: dict[str, Any],
) -> None:
    clusters.load_both("shop", "orders", ORDERS)
    clusters.source.shop.orders.insert_one(on_source)
    clusters.target.shop.orders.insert_one(on_target)
    report = shardstream.verify(clusters.source_uri, clusters.target_uri)
    assert not report.equal
    (item,) = _different(report)
    assert (item.source, item.source_count, item.target_count) == (("shop", "orders"), 6, 6)
    assert (item.different_count, item.different) == (1, (7,))
    assert (item.missing_count, item.extra_count) == (0, 0)
    assert clusters.cli() == 1
    out = capsys.readouterr().out
    assert "different: 1 (e.g. _id 7)" in out
    assert out.splitlines()[-1] == "verify: DIFFERENT"


def test_a_collection_only_on_the_target_in_scope_is_a_difference(
    clusters: Clusters, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters.load_both("shop", "orders", ORDERS)
    clusters.target.shop.stray.insert_many([{"_id": "s1"}, {"_id": "s2"}])
    report = shardstream.verify(clusters.source_uri, clusters.target_uri)
    assert not report.equal
    (item,) = _different(report)
    assert item.only_on_target
    assert (item.source, item.target) == (("shop", "stray"), ("shop", "stray"))
    assert (item.source_count, item.target_count, item.extra_count) == (0, 2, 2)
    assert sorted(item.extra) == ["s1", "s2"]
    assert clusters.cli("--db", "shop") == 1
    out = capsys.readouterr().out
    assert "shop.stray: only on the target" in out
    assert "only on target: 2 (e.g. _id " in out


def test_target_only_collections_outside_the_scope_or_empty_are_not_differences(
    clusters: Clusters, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters.load_both("shop", "orders", ORDERS)
    clusters.target.elsewhere.stray.insert_one({"_id": 1})
    clusters.target.shop.empty_stray.insert_one({"_id": 1})
    clusters.target.shop.empty_stray.delete_one({"_id": 1})
    report = shardstream.verify(clusters.source_uri, clusters.target_uri, db="shop")
    assert report.equal
    assert [item.source for item in report.namespaces] == [("shop", "orders")]
    # With --coll the scope is one collection: the target's other ones are outside it.
    clusters.target.shop.stray.insert_one({"_id": 1})
    assert clusters.cli("--db", "shop", "--coll", "orders") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "verify: equal"
    # Without --db, every user database is in scope, the stray ones included.
    assert clusters.cli() == 1
    out = capsys.readouterr().out
    assert "elsewhere.stray: only on the target" in out
    assert "shop.stray: only on the target" in out
    assert "empty_stray" not in out


def test_the_sync_checkpoint_database_is_never_a_difference(clusters: Clusters) -> None:
    clusters.load_both("shop", "orders", ORDERS)
    clusters.target.shardstream_sync.checkpoints.insert_one({"_id": "default"})
    assert shardstream.verify(clusters.source_uri, clusters.target_uri).equal


def test_db_and_map_compare_the_mapped_namespaces(
    clusters: Clusters, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters.source.shop.orders.insert_many([dict(doc) for doc in ORDERS])
    clusters.target.shop_copy.orders.insert_many([dict(doc) for doc in ORDERS])
    # Under shop=shop_copy the target's own "shop" database is not written by the sync.
    clusters.target.shop.unrelated.insert_one({"_id": 1})
    report = shardstream.verify(
        clusters.source_uri, clusters.target_uri, db="shop", maps=["shop=shop_copy"]
    )
    assert report.equal
    assert [(item.source, item.target) for item in report.namespaces] == [
        (("shop", "orders"), ("shop_copy", "orders"))
    ]
    assert clusters.cli("--db", "shop", "--map", "shop=shop_copy") == 0
    assert "shop.orders -> shop_copy.orders" in capsys.readouterr().out

    # A collection only in the mapped database is in the image of the scope.
    clusters.target.shop_copy.extra.insert_one({"_id": "x"})
    report = shardstream.verify(
        clusters.source_uri, clusters.target_uri, db="shop", maps=["shop=shop_copy"]
    )
    (item,) = _different(report)
    assert (item.source, item.target, item.extra) == (
        ("shop", "extra"),
        ("shop_copy", "extra"),
        ("x",),
    )
    assert clusters.cli("--db", "shop", "--map", "shop=shop_copy") == 1
    assert "shop_copy.extra: only on the target (no source shop.extra)" in capsys.readouterr().out

    # A document changed in the mapped collection is found there, not in shop.orders.
    clusters.target.shop_copy.extra.drop()
    clusters.target.shop_copy.orders.update_one({"_id": 3}, {"$set": {"qty": 0}})
    (item,) = _different(
        shardstream.verify(
            clusters.source_uri, clusters.target_uri, db="shop", maps=["shop=shop_copy"]
        )
    )
    assert (item.target, item.different) == (("shop_copy", "orders"), (3,))


@pytest.mark.parametrize(
    ("scope", "target", "source"),
    [
        ({}, ("shop", "orders"), ("shop", "orders")),
        ({}, ("admin", "users"), None),
        ({}, ("shardstream_sync", "checkpoints"), None),
        ({}, ("shop", "system.views"), None),
        ({"db": "shop"}, ("crm", "customers"), None),
        ({"db": "shop", "coll": "orders"}, ("shop", "carts"), None),
        ({"rules": ["shop=shop_copy"]}, ("shop_copy", "carts"), ("shop", "carts")),
        ({"rules": ["shop=shop_copy"]}, ("shop", "carts"), None),
        ({"rules": ["shop.orders=archive.old"]}, ("archive", "old"), ("shop", "orders")),
        ({"rules": ["shop.orders=archive.old"]}, ("shop", "orders"), None),
        ({"db": "shop", "rules": ["shop.orders=archive.old"]}, ("archive", "new"), None),
        # A rule into the server's databases ("shop=admin") is refused when the map is
        # built: tests/cluster_sync/test_sync_refusals.py.
    ],
)
def test_source_of_inverts_the_scope_and_its_rules(
    scope: dict[str, Any], target: tuple[str, str], source: tuple[str, str] | None
) -> None:
    namespaces = NamespaceMap.from_options(**scope)
    assert namespaces.source_of(*target) == source
    if source is not None:
        assert namespaces.may_hold_image(target[0])
        assert namespaces.target(*source) == target
