"""The namespace filter's patterns and rules, alone (every command's tests use it whole)."""

from __future__ import annotations

from typing import Any

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.namespace_filter import (
    NamespaceFilter,
    NamespacePattern,
    pattern_list,
    scope_filter,
)
from shardstream.transform.stages.oplog_match import OplogMatch
from tests import factories as make


def _filter(include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> NamespaceFilter:
    return NamespaceFilter.parse(include, exclude)


@pytest.mark.parametrize(
    ("pattern", "selected", "not_selected"),
    [
        ("shop.orders", ["shop.orders"], ["shop.orders2", "shop.order", "shop2.orders"]),
        ("shop.*", ["shop.orders", "shop.a.b", "shop.x"], ["shop2.orders", "crm.shop"]),
        ("*.orders", ["shop.orders", "crm.orders"], ["shop.orders.old", "shop.users"]),
        ("shop.orders_*", ["shop.orders_", "shop.orders_2024"], ["shop.orders"]),
        ("sh*p.*", ["shp.a", "shop.a", "sheep.b"], ["shop2.a"]),
        ("*.*", ["a.b", "shop.orders.2024"], []),
        # A dot in the collection part is a character like any other, not a separator.
        ("shop.logs.*", ["shop.logs.2024"], ["shop.logs", "shop.logsx"]),
        # Regex characters are plain characters.
        ("shop.a+b", ["shop.a+b"], ["shop.aab"]),
    ],
)
def test_a_wildcard_matches_any_run_of_characters(
    pattern: str, selected: list[str], not_selected: list[str]
) -> None:
    included = _filter(include=(pattern,))
    excluded = _filter(exclude=(pattern,))
    for namespace in selected:
        assert included.selects_namespace(namespace), namespace
        assert not excluded.selects_namespace(namespace), namespace
    for namespace in not_selected:
        assert not included.selects_namespace(namespace), namespace
        assert excluded.selects_namespace(namespace), namespace


def test_an_exclude_wins_over_any_include() -> None:
    selection = _filter(include=("shop.*", "shop.orders"), exclude=("shop.orders", "*.tmp_*"))
    assert selection.selects("shop", "users")
    assert not selection.selects("shop", "orders")  # named by an include too
    assert not selection.selects("shop", "tmp_1")
    assert not selection.selects("crm", "users")  # no include matches
    assert _filter().selects("any", "thing")


def test_the_literal_names_of_db_and_coll_match_only_themselves() -> None:
    star = NamespacePattern.literal("a*b", "c*")  # names may hold a star
    assert star.matches("a*b", "c*")
    assert not star.matches("axxb", "c*")
    assert not star.matches("a*b", "cd")
    whole = NamespacePattern.literal("shop")
    assert whole.matches("shop", "anything.at.all")
    assert whole.every_collection
    assert not whole.matches("shopping", "x")


def test_databases_may_be_partly_or_wholly_selected() -> None:
    partly = _filter(include=("shop.orders", "crm.*"), exclude=("crm.secrets",))
    assert partly.may_select_database("shop")
    assert partly.may_select_database("crm")
    assert not partly.may_select_database("reports")
    assert not partly.selects_whole_database("shop")  # one collection only
    assert not partly.selects_whole_database("crm")  # one collection excluded
    whole = _filter(include=("crm.*", "shop.*"), exclude=("shop.*",))
    assert whole.selects_whole_database("crm")
    assert not whole.may_select_database("shop")  # wholly excluded
    assert _filter(exclude=("logs.*",)).selects_whole_database("shop")
    assert _filter().selects_whole_database("shop")


def _event(kind: str, ns: dict[str, Any] | None, to: dict[str, Any] | None = None) -> dict:
    event: dict[str, Any] = {"operationType": kind}
    if ns is not None:
        event["ns"] = ns
    if to is not None:
        event["to"] = to
    return event


@pytest.mark.parametrize(
    ("event", "selected"),
    [
        (_event("insert", {"db": "shop", "coll": "orders"}), True),
        (_event("insert", {"db": "shop", "coll": "tmp"}), False),
        # A rename is selected when either of its names is.
        (_event("rename", {"db": "shop", "coll": "orders"}, {"db": "shop", "coll": "tmp"}), True),
        (_event("rename", {"db": "shop", "coll": "tmp"}, {"db": "shop", "coll": "orders"}), True),
        (_event("rename", {"db": "shop", "coll": "tmp"}, {"db": "crm", "coll": "x"}), False),
        # Only a rename's "to" counts.
        (_event("insert", {"db": "shop", "coll": "tmp"}, {"db": "shop", "coll": "orders"}), False),
        # A dropDatabase: when some collection of the database may be selected.
        (_event("dropDatabase", {"db": "shop"}), True),
        (_event("dropDatabase", {"db": "crm"}), False),
        # No namespace at all: the invalidate that ends a stream.
        (_event("invalidate", None), True),
    ],
)
def test_events_that_name_two_namespaces_or_none(event: dict, selected: bool) -> None:
    selection = _filter(include=("shop.*",), exclude=("shop.tmp",))
    assert selection.selects_event(event) is selected


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("", "a database and a collection, joined by a dot"),
        ("shop", "a database and a collection, joined by a dot"),
        (".orders", "a database and a collection, joined by a dot"),
        ("shop.", "a database and a collection, joined by a dot"),
        ("shop.$cmd", "no $ or NUL in the collection part"),
        ("sh$p.orders", 'no /\\ "$ or NUL in the database part'),
        ("my db.orders", 'no /\\ "$ or NUL in the database part'),
        ("shop.a\0b", "no $ or NUL in the collection part"),
    ],
)
def test_a_malformed_pattern_is_refused_naming_what_was_expected(
    pattern: str, problem: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        NamespacePattern.parse(pattern, "--exclude")
    message = str(raised.value)
    assert message.startswith("expected --exclude as DB.COLL (a database, a dot, a collection")
    assert f"got {pattern!r}: " in message
    assert message.endswith(problem)


def test_pattern_lists_must_be_lists() -> None:
    with pytest.raises(
        ConfigurationError, match=r"expected include as a list of patterns, got the"
    ):
        pattern_list("shop.*", "include")  # type: ignore[arg-type]  # the point of the test
    with pytest.raises(ConfigurationError, match=r"expected include as DB\.COLL .*got int 3"):
        NamespaceFilter.parse([3])  # type: ignore[list-item]
    assert pattern_list(["a.b"], "include") == ("a.b",)


def test_db_and_include_patterns_together_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"expected --db or --include patterns, not both"):
        scope_filter("shop", None, ["crm.*"], [], names=("--db", "--include", "--exclude"))
    with_exclude = scope_filter("shop", "orders", [], ["shop.orders"])
    assert not with_exclude.selects("shop", "orders")  # excludes narrow --db/--coll
    with pytest.raises(ConfigurationError, match=r"expected db/coll or include patterns"):
        ChangeStreamOptions(db="shop", include=("shop.orders",))


def test_stream_options_keep_the_patterns_as_tuples() -> None:
    options = ChangeStreamOptions(include=["shop.*"], exclude=["shop.tmp"])  # type: ignore[arg-type]
    assert (options.include, options.exclude) == (("shop.*",), ("shop.tmp",))
    selection = options.namespace_filter
    assert selection is not None
    assert not selection.selects("shop", "tmp")
    assert ChangeStreamOptions().namespace_filter is None
    with pytest.raises(ConfigurationError, match=r"expected exclude as DB\.COLL"):
        options.with_options(exclude=("nodot",))


def test_the_shards_oplog_filter_drops_excluded_entries_before_the_transform() -> None:
    t = Timestamp(10, 1)
    match = OplogMatch(ChangeStreamOptions(include=("shop.*",), exclude=("shop.tmp",)))

    def rename(old: str, new: str) -> dict[str, Any]:
        return make.command(t, "shop", {"renameCollection": f"shop.{old}", "to": f"shop.{new}"})

    assert match(make.insert(t, {"_id": 1}, ns="shop.orders"))
    assert not match(make.insert(t, {"_id": 1}, ns="shop.tmp"))
    assert not match(make.insert(t, {"_id": 1}, ns="crm.orders"))
    assert match(make.command(t, "shop", {"drop": "orders"}))
    assert not match(make.command(t, "shop", {"drop": "tmp"}))
    assert match(rename("orders", "tmp"))
    assert match(rename("tmp", "orders"))
    assert not match(make.command(t, "crm", {"renameCollection": "crm.a", "to": "crm.b"}))
    assert match(make.command(t, "shop", {"dropDatabase": 1}))
    assert not match(make.command(t, "crm", {"dropDatabase": 1}))
    # A transaction whose every op is excluded is not even unwound.
    ops = [make.inner(make.insert(t, {"_id": 1}, ns=ns)) for ns in ("shop.tmp", "crm.x")]
    assert not match(make.apply_ops(t, ops))
    # The merger follows new shards through this no-op, whatever the filter says.
    new_shard = make.noop(t, {"migrateChunkToNewShard": "crm.x", "toShard": "s2"}, ns="crm.x")
    merged = OplogMatch(ChangeStreamOptions(include=("shop.*",), merged_by_router=True))
    assert merged(new_shard)
    # An ns that is no string (an array matches a regex by its elements) is kept for the
    # transform to judge: a malformed entry never passes unseen because of the filter.
    assert match({**make.insert(t, {"_id": 1}), "ns": ["shop.tmp"]})
