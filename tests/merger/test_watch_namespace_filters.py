"""``shardstream.watch(..., include=, exclude=)`` and ``shardstream watch --include/--exclude``.

Shard sources on both paths (the ``path`` fixture), then a live emulated cluster through
the command: only the selected namespaces' events, in the merged order, an exclude
winning over an include.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

import shardstream
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster
from shardstream.errors import ConfigurationError
from shardstream.sim import SimulatedCluster, SimulationConfig, simulated_sources
from tests import factories as make
from tests.deadlines import returns_within
from tests.oplog.live_helpers import load_committed
from tests.paths import OnPath

START = Timestamp(1700000000, 1)


def _oplogs() -> dict[str, list[dict[str, Any]]]:
    t = [Timestamp(1700000000, i) for i in range(20)]

    def insert(n: int, ns: str) -> dict[str, Any]:
        return make.insert(t[n], {"_id": ObjectId(f"65f{n:021x}")}, ns=ns)

    return {
        "shard00": [
            make.noop(t[1]),
            insert(2, "shop.orders"),
            insert(4, "shop.tmp_a"),
            insert(6, "crm.users"),
            make.noop(t[12]),
        ],
        "shard01": [
            make.noop(t[1]),
            insert(3, "crm.orders"),
            insert(5, "shop.users"),
            insert(7, "logs.orders"),
            insert(8, "shop.orders"),
            make.noop(t[12]),
        ],
    }


# shop.* and every orders, but neither shop.tmp_* nor anything of logs.
INCLUDE = ["shop.*", "*.orders"]
EXCLUDE = ["shop.tmp_*", "logs.*"]
SELECTED = ["shop.orders", "crm.orders", "shop.users", "shop.orders"]


def _namespaces(events: list[dict[str, Any]]) -> list[str]:
    return [f"{e['ns']['db']}.{e['ns']['coll']}" for e in events]


def test_watch_over_shard_sources_keeps_the_selected_namespaces(path: OnPath) -> None:
    config = SimulationConfig(seed=3, shards=3, operations=250)
    result = SimulatedCluster(config).run()
    kept = {"orders", "users"}

    def run(**filters: Any) -> list[dict[str, Any]]:
        with path.watch(simulated_sources(result, seed=1), **filters) as stream:
            return list(stream)

    everything = run()
    filtered = run(include=["shop.u*", "*.orders"], exclude=["shop.users", "shop.set*"])
    assert {e["ns"]["coll"] for e in filtered} == {"orders"}  # users: the exclude wins
    assert filtered == [e for e in everything if e["ns"]["coll"] == "orders"]
    both = run(exclude=["*.settings"])
    assert both == [e for e in everything if e["ns"]["coll"] in kept]


def test_watch_refuses_a_pattern_string_and_db_with_include() -> None:
    with pytest.raises(ConfigurationError, match=r"expected include as a list of patterns"):
        shardstream.watch({}, include="shop.*")  # type: ignore[arg-type]  # the mistake
    with pytest.raises(ConfigurationError, match=r"expected db/coll or include patterns"):
        shardstream.watch({}, db="shop", include=["crm.*"])
    with pytest.raises(ConfigurationError, match=r"expected exclude as DB.COLL .*got 'shop'"):
        shardstream.watch({}, exclude=["shop"])


def test_watch_a_live_cluster_with_filters(path: OnPath) -> None:
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, _oplogs())
        with path.watch(
            cluster.uri,
            start_at_operation_time=START,
            max_await_time_ms=100,
            include=INCLUDE,
            exclude=EXCLUDE,
        ) as stream:
            events = [returns_within(stream.next, "the next event") for _ in SELECTED]
    assert _namespaces(events) == SELECTED


def test_the_watch_command_takes_include_and_exclude(capsys: pytest.CaptureFixture[str]) -> None:
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, _oplogs())
        argv = ["watch", cluster.uri, "--start-at-operation-time", "1700000000,1"]
        for pattern in INCLUDE:
            argv += ["--include", pattern]
        for pattern in EXCLUDE:
            argv += ["--exclude", pattern]
        command = [*argv, "--max-events", str(len(SELECTED))]
        assert returns_within(lambda: main(command), "watch the selected events") == 0
    out = capsys.readouterr().out
    assert _namespaces([json.loads(line) for line in out.splitlines()]) == SELECTED


def test_the_watch_command_refuses_a_malformed_pattern_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["watch", "mongodb://127.0.0.1:9/", "--exclude", "nodot"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert "expected --exclude as DB.COLL" in err
    assert "got 'nodot'" in err
