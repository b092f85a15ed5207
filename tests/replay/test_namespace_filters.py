"""``shardstream replay --include / --exclude``: only the selected namespaces' events, on
every path (the fast path's templates, the reference pipeline, merges, worker processes).

The filter runs in each shard's oplog filter, before the transform; what it lets through
must be exactly the unfiltered stream with the unselected events taken out
(``NamespaceFilter.selects_event``), resume tokens and all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.cli.main import main
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.transform.namespace_filter import NamespaceFilter
from tests import factories as make
from tests.transform.replay_paths import ALL_PATHS, argv_for, split_events, write_oplog

# Wildcards both sides of the dot, and an exclude that takes back what an include gave.
FLAGS = ["--include", "shop.*", "--include", "*.orders", "--exclude", "shop.tmp_*"]
FLAGS += ["--exclude", "logs.*"]


def _patterns(flags: list[str]) -> NamespaceFilter:
    include = [flags[i + 1] for i, flag in enumerate(flags) if flag == "--include"]
    exclude = [flags[i + 1] for i, flag in enumerate(flags) if flag == "--exclude"]
    return NamespaceFilter.parse(include, exclude)


def _replay(argv: list[str], capsysbinary: pytest.CaptureFixture[bytes]) -> list[dict[str, Any]]:
    assert main(argv) == 0
    out, err = capsysbinary.readouterr()
    assert not err
    if "--output-format" in argv:
        return [bson.decode(event) for event in split_events(out)]
    return [json_util.loads(line) for line in out.decode().splitlines()]


def _oid(n: int) -> ObjectId:
    return ObjectId(f"65f{n:021x}")


def _ddl_oplog() -> list[dict[str, Any]]:
    """CRUD on five databases, renames across the filter's edge both ways, drops."""
    t = [Timestamp(10, i) for i in range(40)]

    def rename(ts: Timestamp, db: str, old: str, new: str) -> dict[str, Any]:
        o = {"renameCollection": f"{db}.{old}", "to": f"{db}.{new}", "stayTemp": False}
        return make.command(ts, db, {**o, "dropTarget": False})

    return [
        make.insert(t[1], {"_id": _oid(1)}, ns="shop.orders"),  # shop.*
        make.insert(t[2], {"_id": _oid(2)}, ns="shop.tmp_1"),  # excluded
        make.insert(t[3], {"_id": _oid(3)}, ns="crm.orders"),  # *.orders
        make.insert(t[4], {"_id": _oid(4)}, ns="crm.users"),  # no include
        make.insert(t[5], {"_id": _oid(5)}, ns="logs.orders"),  # *.orders, but logs.* wins
        make.update(t[6], _oid(1), {"u": {"a": 1}}, ns="shop.orders"),
        make.delete(t[7], _oid(4), ns="crm.users"),
        make.apply_ops(
            t[8],
            [
                make.inner(make.insert(t[8], {"_id": _oid(6)}, ns="shop.orders")),
                make.inner(make.insert(t[8], {"_id": _oid(7)}, ns="crm.users")),
                make.inner(make.insert(t[8], {"_id": _oid(8)}, ns="shop.tmp_2")),
            ],
        ),
        rename(t[9], "shop", "orders", "tmp_old"),  # out of the filter: shown
        rename(t[10], "crm", "users", "orders"),  # into it: shown
        rename(t[11], "crm", "a", "b"),  # neither name: not shown
        rename(t[12], "shop", "tmp_2", "tmp_3"),  # both excluded: not shown
        make.command(t[13], "shop", {"create": "fresh", "idIndex": {"v": 2, "key": {"_id": 1}}}),
        make.command(t[14], "shop", {"create": "tmp_4"}),
        make.command(t[15], "crm", {"drop": "orders"}),
        make.command(t[16], "crm", {"drop": "b"}),
        make.command(t[17], "crm", {"dropDatabase": 1}),  # *.orders may select in crm
        make.command(t[18], "logs", {"drop": "orders"}),
        make.command(t[19], "logs", {"dropDatabase": 1}),  # logs.* excludes all of it
        make.insert(t[20], {"_id": _oid(9)}, ns="shop.fresh"),
    ]


_EXPECTED = [
    ("insert", "shop.orders"),
    ("insert", "crm.orders"),
    ("update", "shop.orders"),
    ("insert", "shop.orders"),  # the transaction's one selected op
    ("rename", "shop.orders"),
    ("rename", "crm.users"),
    ("create", "shop.fresh"),
    ("drop", "crm.orders"),
    ("dropDatabase", "crm"),
    ("insert", "shop.fresh"),
]


def _described(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["operationType"], ".".join(filter(None, (e["ns"]["db"], e["ns"].get("coll")))))
        for e in events
    ]


@pytest.mark.parametrize("path", ALL_PATHS)
def test_renames_and_drops_follow_the_filters_rules_on_every_path(
    path: str, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    bson_path = write_oplog(tmp_path, "oplog", _ddl_oplog())
    other = write_oplog(tmp_path, "other", [make.noop(Timestamp(1, 1))])  # an idle shard
    argv = [*argv_for(path, bson_path, other), *FLAGS]
    events = _replay(argv, capsysbinary)
    # create is an expanded event: shown only on the expanded path.
    expected = [e for e in _EXPECTED if path == "expanded" or e[0] != "create"]
    assert _described(events) == expected
    # The filtered stream is the whole one with the unselected events taken out.
    unfiltered = _replay(argv_for(path, bson_path, other), capsysbinary)
    selection = _patterns(FLAGS)
    assert [e["_id"] for e in events] == [
        e["_id"] for e in unfiltered if selection.selects_event(e)
    ]


@pytest.fixture(scope="module")
def simulated_shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A 3-shard run's oplogs (migrations, transactions, DDL) as --shard flags."""
    config = SimulationConfig(seed=8, shards=3, operations=400, collmod_at=0.4)
    paths = SimulatedCluster(config).run().write_oplogs(tmp_path_factory.mktemp("sim"))
    return [arg for name, path in paths.items() for arg in ("--shard", f"{name}={path}")]


@pytest.mark.parametrize(
    ("flags", "kept"),
    [
        # An exclude wins over the include that names the same collection.
        (["--include", "shop.u*", "--include", "*.orders", "--exclude", "shop.users"], {"orders"}),
        (["--exclude", "shop.set*"], {"orders", "users"}),
        (["--include", "*.*", "--exclude", "*.orders"], {"users", "settings"}),
    ],
)
@pytest.mark.parametrize(
    "mode",
    [
        ["--output-format", "bson"],
        ["--output-format", "bson", "--workers", "2"],
        ["--show-expanded-events"],
    ],
    ids=["fast", "workers", "expanded-json"],
)
def test_a_merged_replay_keeps_exactly_the_selected_namespaces(
    simulated_shards: list[str],
    flags: list[str],
    kept: set[str],
    mode: list[str],
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    events = _replay(["replay", *simulated_shards, *mode, *flags], capsysbinary)
    everything = _replay(["replay", *simulated_shards, *mode], capsysbinary)
    selection = _patterns(flags)
    assert events == [e for e in everything if selection.selects_event(e)]
    assert {e["ns"]["coll"] for e in events} == kept
    assert len(events) > 100


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--include", "shop"], "expected --include as DB.COLL (a database, a dot, a collection"),
        (["--exclude", "shop.$cmd"], "got 'shop.$cmd': no $ or NUL in the collection part"),
        (["--include", ""], "expected a value for --include, got ''"),
        (["--db", "shop", "--include", "crm.*"], "expected --db or --include patterns, not both"),
    ],
)
def test_a_malformed_filter_is_one_error_line(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_oplog(tmp_path, "oplog", _ddl_oplog())
    assert main(["replay", str(path), *flags]) == 1
    out, err = capsys.readouterr()
    assert not out
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert message in err
