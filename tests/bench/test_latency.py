"""``shardstream bench --uri --duration`` (live tail) against the emulated cluster, real pymongo.

The emulated mongos runs no ``$changeStream``: the native side is unavailable, or a
stand-in.
The writes are made inside the emulator (``bench.emulated.write_loop``, as ``python -m
shardstream.bench.emulated --write-rate N`` does) and counted through mongos, or by the
bench itself through the emulated mongos (``--write-rate N``), or by a stand-in
``insert_many``; a refused ``insert`` is queued as a fault where a test needs one. No
timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from bson.objectid import ObjectId
from pymongo import MongoClient
from pymongo.collection import Collection

import shardstream
from shardstream.bench.emulated import (
    BENCH_NAMESPACE,
    ClusterClock,
    ClusterWriters,
    insert_entry,
    log_now,
    preloaded_cluster,
)
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster

RATE = 200.0  # inserts/s over both shards
CLOCK = ClusterClock()  # one for every writer: each shard's ts must increase


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    """Two shards, the emulator's own writer inserting into the bench namespace."""
    with EmulatedCluster(shards=2) as running:
        writers = ClusterWriters(CLOCK, running.shards, RATE, (), 0, ns=BENCH_NAMESPACE, store=True)
        yield running
        writers.stop()


def _bench(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    assert main(["bench", *argv]) == 0
    out = capsys.readouterr().out
    return json.loads(out.splitlines()[-1]), out


def _assert_sane(run: dict[str, Any], written: int) -> None:
    assert run["available"] is True
    assert written > 0
    assert (run["events"], run["missed"], run["duplicated"], run["unexpected"]) == (
        written,
        0,
        0,
        0,
    )
    assert run["bytes"] > 0
    assert run["events_per_s"] > 0
    for key in ("latency_s", "wall_latency_s"):
        p = run[key]
        assert 0 <= p["p50"] <= p["p95"] <= p["p99"] <= p["max"]


@pytest.mark.parametrize("readers", ["thread", "process"])
def test_the_live_tail_counts_what_the_emulator_wrote_and_reports_native_unavailable(
    cluster: EmulatedCluster, readers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tail.json"
    argv = ["--uri", cluster.uri, "--duration", "1", "--write-rate", "0", "--readers", readers]
    report, out = _bench([*argv, "--json", str(path)], capsys)
    assert json.loads(path.read_text()) == report
    assert report["server"] == "shardstream emulator"
    assert report["writer"] == "external (counted through mongos)"
    assert report["readers"] == readers
    _assert_sane(report["shardstream"], report["written"])
    positions = report["shardstream"]["shard_positions"]
    assert set(positions) == {"shard00", "shard01"}
    assert all(p["lag_s"] >= 0 for p in positions.values())
    # The emulated mongos runs aggregate but not $changeStream: the server's refusal,
    # by its code (40324: an unknown pipeline stage), is what the bench reports.
    assert report["native"]["available"] is False
    assert report["native"]["error"].startswith("Location40324 (40324): ")
    assert "live tail on shardstream emulator" in out
    assert "native       unavailable: Location40324 (40324)" in out


def test_the_bench_says_when_mongos_takes_no_insert(
    cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # The emulated mongos takes inserts now; a mongos that refuses them is queued here.
    cluster.mongos.fail_next("insert", 59, "CommandNotFound")
    argv = ["bench", "--uri", cluster.uri, "--duration", "1", "--readers", "thread"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "inserts through mongos failed: CommandNotFound (59)" in err
    assert "--write-rate 0" in err


def test_the_bench_writes_through_the_emulated_mongos_and_measures_shardstream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What `python -m shardstream.bench.emulated 2 0 --noop-interval 0.2` serves: every
    # insert lands on the first shard, the second's no-ops release them.
    with preloaded_cluster(2, 0, noop_interval=0.2) as served:
        argv = ["--uri", served.uri, "--duration", "1", "--write-rate", "40"]
        report, out = _bench([*argv, "--readers", "thread", "--max-await-ms", "100"], capsys)
        db, coll = BENCH_NAMESPACE.split(".")
        client: MongoClient[Any] = MongoClient(served.uri)
        with client:
            stored = len(list(client[db][coll].find({}, {"_id": 1})))
    assert report["writer"] == "this process"
    assert report["server"] == "shardstream emulator"
    assert stored == report["written"]
    _assert_sane(report["shardstream"], report["written"])
    assert set(report["shardstream"]["shard_positions"]) == {"shard00", "shard01"}
    # The emulator runs no $changeStream; whichever error says so is the server's.
    native = report["native"]
    assert native["available"] is False
    assert re.fullmatch(r"\w+ \(\d+\): .+", native["error"])
    assert f"native       unavailable: {native['error']}" in out


def test_a_bare_emulator_is_refused_naming_what_it_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with EmulatedCluster(shards=2) as bare:
        argv = ["bench", "--uri", bare.uri, "--duration", "1", "--write-rate", "20"]
        assert main([*argv, "--readers", "thread"]) == 1
        assert "insert" not in bare.mongos.commands_seen  # refused before any write
    err = capsys.readouterr().err
    assert "expected a cluster that has logged something, got cluster time Timestamp(1, 1)" in err
    assert "python -m shardstream.bench.emulated SHARDS 0 --noop-interval S" in err


def test_the_bench_writer_and_a_native_stand_in_see_the_same_events(
    cluster: EmulatedCluster,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Stand-ins for a real mongos: insert_many logs each document on a shard, and the
    # "native" stream is shardstream's own, opened at the same cluster time.
    shards = cluster.shards

    def insert_many(collection: Collection[Any], documents: list[Any], **_: Any) -> None:
        for document in documents:
            document["_id"] = key = ObjectId()
            # Stamped and appended under the oplog's lock, as the fixture's writers do:
            # stamped outside it, one of theirs could land in between, out of order.
            log_now(
                shards[hash(key) % len(shards)],
                CLOCK,
                partial(insert_entry, collection.full_name, document),
            )

    def native_watch(_client: MongoClient[Any], **options: Any) -> Any:
        return shardstream.watch(cluster.uri, **options)

    monkeypatch.setattr(Collection, "insert_many", insert_many)
    monkeypatch.setattr(MongoClient, "watch", native_watch)
    argv = ["--uri", cluster.uri, "--duration", "1", "--write-rate", "50", "--readers", "thread"]
    options = ["--namespace", "bench.own", "--max-await-ms", "100", "--no-shard-monitor"]
    plot = tmp_path / "latency.png"
    report, out = _bench([*argv, *options, "--plot", str(plot)], capsys)
    assert importlib.util.find_spec("matplotlib") is None or plot.stat().st_size > 0
    assert (report["max_await_ms"], report["shard_monitor"]) == (100, False)
    assert report["writer"] == "this process"
    assert report["namespace"] == "bench.own"
    for name in ("shardstream", "native"):
        _assert_sane(report[name], report["written"])
        # The emulator's writer goes on meanwhile, into another namespace.
        assert report[name]["other_events"] > 0
    assert report["native"]["shard_positions"] is None
    assert "50 inserts/s requested, from this process" in out


def test_shard_collection_reports_the_servers_refusal(
    cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.mongos.fail_next("enableSharding", 13, "Unauthorized")
    argv = ["--uri", cluster.uri, "--duration", "1", "--write-rate", "0", "--shard-collection"]
    assert main(["bench", *argv]) == 1
    err = capsys.readouterr().err
    assert "--shard-collection failed: Unauthorized (13)" in err


def test_the_password_of_the_uri_never_shows(
    cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = cluster.uri.replace("mongodb://", "mongodb://alice:s3cr3t-pw@")
    assert main(["bench", "--uri", uri, "--duration", "1", "--readers", "thread"]) == 1
    out, err = capsys.readouterr()
    assert "s3cr3t-pw" not in out + err
    assert "shardstream bench: error:" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--duration", "1"], "expected --uri with --duration, got no --uri"),
        (
            ["--uri", "mongodb://h/", "--duration", "1", "--since-seconds", "3"],
            "expected --duration (live tail, from now) or a window start",
        ),
        (
            ["--uri", "mongodb://h/", "--duration", "1", "--namespace", "nodot"],
            "expected --namespace DB.COLL, got 'nodot'",
        ),
        (
            ["--uri", "mongodb://h/", "--duration", "0"],
            "expected --write-rate N >= 0 and --duration S > 0, got 1000.0, 0.0",
        ),
        (
            ["--uri", "mongodb://h/", "--duration", "1", "--max-await-ms", "0"],
            "expected --max-await-ms MS with MS >= 1, got 0",
        ),
    ],
)
def test_bad_live_tail_arguments_are_named(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", *argv]) == 1
    assert message in capsys.readouterr().err
