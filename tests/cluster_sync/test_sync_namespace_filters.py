"""``sync`` and ``verify`` with ``--include`` / ``--exclude``: an excluded collection is
neither copied, written by the stream, touched by DDL nor compared.

The source is an emulated cluster loaded directly (tests/cluster_sync/static_source.py);
DDL and CRUD after the copy go through its mongos, so the sync meets them in its merged
stream as on a real cluster. The rules for events that cross the filter's edge: a rename
out of the scope drops the old name on the target, a rename into it stops the sync, a
dropDatabase of a partly selected database leaves the target's other collections alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

import shardstream
from shardstream.cli.main import main
from shardstream.cluster_sync import NamespaceMap, SyncOptions
from shardstream.emulator import EmulatedCluster
from shardstream.errors import ConfigurationError
from tests.cluster_sync.conftest import RunningSync, applied_through, checkpoint, wait_for
from tests.cluster_sync.static_source import contents, settle, static_source

# shop.* and every orders collection, but no shop.tmp_* and nothing of logs: wildcards on
# both sides of the dot, and excludes that take back what an include gave.
INCLUDE = ("shop.*", "*.orders")
EXCLUDE = ("shop.tmp_*", "logs.*")
FLAGS = ["--include", "shop.*", "--include", "*.orders"]
FLAGS += ["--exclude", "shop.tmp_*", "--exclude", "logs.*"]
_SYSTEM_DBS = frozenset({"admin", "config", "local", "shardstream_sync"})


def _documents(client: MongoClient[Any]) -> dict[str, dict[bytes, bytes]]:
    """Every user collection's raw documents, by ``db.coll``."""
    return {
        f"{db}.{name}": contents(client, db, name)
        for db in sorted(set(client.list_database_names()) - _SYSTEM_DBS)
        for name in client[db].list_collection_names()
    }


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """Four databases as of T0; the filter selects shop.orders, shop.users, shop.staging and
    crm.orders."""
    with static_source() as cluster:
        primary = cluster.shards[0]
        primary.load_collection("shop.orders", [{"_id": i, "qty": i} for i in range(6)])
        primary.load_collection("shop.users", [{"_id": "ada"}, {"_id": "grace"}])
        primary.load_collection("shop.tmp_a", [{"_id": 1, "scratch": True}])
        primary.load_collection("shop.staging", [{"_id": 1, "state": "new"}])
        primary.load_collection("crm.orders", [{"_id": 1, "total": 5}])
        primary.load_collection("crm.users", [{"_id": 1, "name": "x"}])
        primary.load_collection("logs.orders", [{"_id": 1, "line": "a"}])
        primary.load_collection("reports.daily", [{"_id": 1}])
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=2) as cluster:
        yield cluster


def _start(source: EmulatedCluster, target: EmulatedCluster, **scope: Any) -> RunningSync:
    """A sync past its copy (its checkpoint in phase "stream")."""
    namespaces = NamespaceMap.from_options(**scope)
    running = RunningSync(SyncOptions(source=source.uri, target=target.uri, namespaces=namespaces))
    with MongoClient(target.uri) as client:
        wait_for(
            lambda: (checkpoint(client) or {}).get("phase") == "stream" or running.error,
            "the sync to end its copy",
        )
    assert running.error is None, running.error
    return running


def test_the_copy_the_stream_and_verify_follow_the_filter(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    with MongoClient(source.uri) as on_source, MongoClient(target.uri) as on_target:
        # Out of the scope on the target from the start: the sync must never touch it.
        on_target.crm.mine.insert_one({"_id": "kept"})
        running = _start(source, target, include=INCLUDE, exclude=EXCLUDE)
        copied = _documents(on_target)
        selected_at_t0 = ["crm.orders", "shop.orders", "shop.staging", "shop.users"]
        assert sorted(copied) == ["crm.mine", *selected_at_t0]

        shop, crm = on_source.shop, on_source.crm
        shop.orders.insert_one({"_id": 100, "qty": 1})
        shop.tmp_a.insert_one({"_id": 2})  # excluded: never written
        crm.users.update_one({"_id": 1}, {"$set": {"name": "y"}})  # no include matches
        crm.orders.update_one({"_id": 1}, {"$set": {"total": 7}})
        on_source.logs.orders.insert_one({"_id": 2})  # *.orders, but logs.* wins
        on_source.admin.command("renameCollection", "shop.users", to="shop.tmp_users")
        shop.create_collection("fresh")
        shop.fresh.insert_one({"_id": 1})
        end = settle(source)
        wait_for(lambda: applied_through(on_target, end) or running.error, "the changes")
        # crm is only partly selected: its dropDatabase leaves crm.mine on the target,
        # while the drop of crm.orders (logged before it) drops the target's copy.
        on_source.drop_database("crm")
        on_source.drop_database("logs")  # wholly excluded: not even read
        end = settle(source)
        wait_for(lambda: applied_through(on_target, end) or running.error, "the drops")
        running.finish()

        on_the_source = _documents(on_source)
        assert sorted(on_the_source) == [
            "reports.daily",
            "shop.fresh",
            "shop.orders",
            "shop.staging",
            "shop.tmp_a",
            "shop.tmp_users",
        ]
        selected = {"shop.fresh", "shop.orders", "shop.staging"}
        expected = {ns: docs for ns, docs in on_the_source.items() if ns in selected}
        expected["crm.mine"] = copied["crm.mine"]
        assert _documents(on_target) == expected

    report = shardstream.verify(source.uri, target.uri, include=INCLUDE, exclude=EXCLUDE)
    assert report.equal
    compared = {".".join(item.source) for item in report.namespaces}
    assert compared == selected  # the excluded ones are compared on neither side
    assert not shardstream.verify(source.uri, target.uri).equal
    assert main(["verify", "--source", source.uri, "--target", target.uri, *FLAGS]) == 0
    assert main(["verify", "--source", source.uri, "--target", target.uri]) == 1


def test_the_sync_command_and_the_python_api_take_the_filter(
    source: EmulatedCluster, target: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    uris = ["--source", source.uri, "--target", target.uri]
    assert main(["sync", *uris, *FLAGS, "--idle-exit", "0.5", "--verify"]) == 0
    assert "verify: equal" in capsys.readouterr().out
    with MongoClient(target.uri) as on_target:
        synced = sorted(_documents(on_target))
    assert synced == ["crm.orders", "shop.orders", "shop.staging", "shop.users"]
    # The API, into another target, with the exclude taking back part of the include.
    with EmulatedCluster(shards=1) as other, MongoClient(other.uri) as on_other:
        result = shardstream.sync(
            source.uri, other.uri, include=["*.orders"], exclude=["logs.*"], idle_exit_s=0.5
        )
        assert result.copied == 7  # shop.orders' 6 and crm.orders' 1
        assert sorted(_documents(on_other)) == ["crm.orders", "shop.orders"]


def test_a_rename_into_the_scope_stops_the_sync_saying_why(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    running = _start(source, target, include=("shop.*",), exclude=("shop.staging",))
    with MongoClient(source.uri) as on_source:
        on_source.admin.command("renameCollection", "shop.staging", to="shop.archive")
        settle(source)
    wait_for(lambda: running.error or not running.running, "the sync to stop")
    with pytest.raises(ConfigurationError) as stopped:
        running.finish()
    message = str(stopped.value)
    assert "got shop.staging (out of scope) renamed to shop.archive (in scope)" in message
    assert "its documents were never copied" in message
    assert "--restart" in message


def test_db_and_coll_are_shorthands_for_an_include_pattern() -> None:
    shorthand = NamespaceMap.from_options("shop", "orders")
    patterns = NamespaceMap.from_options(include=["shop.orders"])
    for namespaces in (shorthand, patterns):
        assert namespaces.in_scope("shop", "orders")
        assert namespaces.in_scope("shop")
        assert not namespaces.in_scope("shop", "users")
        assert not namespaces.in_scope("crm")
        assert not namespaces.whole_database("shop")
    assert NamespaceMap.from_options("shop").whole_database("shop")
    excluded = NamespaceMap.from_options(exclude=["shop.tmp_*"])
    assert not excluded.whole_database("shop")
    assert excluded.whole_database("crm")
    mapped = NamespaceMap.from_options(
        include=["shop.*"], exclude=["shop.tmp_*"], rules=["shop=copy"]
    )
    assert mapped.may_hold_image("copy")
    assert not mapped.may_hold_image("shop")
    assert not mapped.may_hold_image("crm")
    assert mapped.source_of("copy", "tmp_1") is None  # excluded: never an image
    assert mapped.source_of("copy", "orders") == ("shop", "orders")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--include", "shop"], "expected --include as DB.COLL"),
        (["--exclude", "shop.$x"], "no $ or NUL in the collection part"),
        (["--db", "shop", "--include", "crm.*"], "expected --db or --include patterns, not both"),
    ],
)
@pytest.mark.parametrize("command", ["sync", "verify"])
def test_a_malformed_filter_is_one_error_line(
    command: str, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    uris = ["--source", "mongodb://127.0.0.1:9/", "--target", "mongodb://127.0.0.1:8/"]
    assert main([command, *uris, "--connect-timeout", "0.2", *flags]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert message in err
