"""A view's definition follows ``--map``: ``viewOn`` and the collections its pipeline's
stages read (nested pipelines too) are renamed; one landing in another database is refused."""

from __future__ import annotations

import pytest

from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.view_mapping import mapped_view_options
from shardstream.errors import ConfigurationError

RULES = NamespaceMap.from_options(rules=["shop.orders=shop.orders_v2", "shop.items=shop.stock"])


def test_every_collection_a_view_reads_is_renamed() -> None:
    pipeline = [
        {"$lookup": {"from": "items", "localField": "i", "foreignField": "_id", "as": "x"}},
        {"$unionWith": "orders"},
        {"$unionWith": {"coll": "items", "pipeline": [{"$unionWith": "orders"}]}},
        {
            "$graphLookup": {
                "from": "orders",
                "startWith": "$a",
                "connectFromField": "a",
                "connectToField": "b",
                "as": "g",
            }
        },
        {"$facet": {"f": [{"$lookup": {"from": "users", "pipeline": [], "as": "u"}}]}},
        {"$match": {"from": "orders"}},  # a field named from, not a stage's: left alone
    ]
    mapped = mapped_view_options(RULES, "shop", "v", {"viewOn": "orders", "pipeline": pipeline})
    assert mapped["viewOn"] == "orders_v2"
    assert mapped["pipeline"] == [
        {"$lookup": {"from": "stock", "localField": "i", "foreignField": "_id", "as": "x"}},
        {"$unionWith": "orders_v2"},
        {"$unionWith": {"coll": "stock", "pipeline": [{"$unionWith": "orders_v2"}]}},
        {
            "$graphLookup": {
                "from": "orders_v2",
                "startWith": "$a",
                "connectFromField": "a",
                "connectToField": "b",
                "as": "g",
            }
        },
        {"$facet": {"f": [{"$lookup": {"from": "users", "pipeline": [], "as": "u"}}]}},
        {"$match": {"from": "orders"}},
    ]
    assert pipeline[0]["$lookup"]["from"] == "items"  # the event's own definition unchanged


def test_options_without_a_definition_and_no_rules_pass_unchanged() -> None:
    options = {"validator": {"a": 1}}
    assert mapped_view_options(RULES, "shop", "orders", options) == options
    plain = {"viewOn": "orders", "pipeline": []}
    assert mapped_view_options(NamespaceMap(), "shop", "v", plain) == plain


def test_a_read_collection_landing_in_another_database_is_refused() -> None:
    rules = NamespaceMap.from_options(rules=["shop.orders=archive.orders"])
    with pytest.raises(ConfigurationError, match=r"shop\.orders mapped to archive\.orders"):
        mapped_view_options(rules, "shop", "v", {"viewOn": "orders", "pipeline": []})
    # A whole database moved together keeps its views whole.
    moved = NamespaceMap.from_options(rules=["shop=shop_copy"])
    assert mapped_view_options(moved, "shop", "v", {"viewOn": "orders"}) == {"viewOn": "orders"}
