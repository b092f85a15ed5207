"""``shardstream bench --uri`` (live mode) against the emulated cluster, real pymongo.

The emulated mongos runs no ``$changeStream``, so the native side is reported unavailable
with its error; shardstream's side reads the preloaded window to the end.  No timing
is asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bson.timestamp import Timestamp
from pymongo import MongoClient

import shardstream
from shardstream.bench.common import error_text
from shardstream.bench.corpus import oplog_bytes
from shardstream.bench.emulated import CORPUS_START, preload
from shardstream.bench.live import first_mismatch, read_window, resolve_start
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster
from shardstream.errors import ConfigurationError
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token import ResumeTokenData, TokenType, encode_token

ENTRIES = 200


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=2) as running:
        preload(running, [oplog_bytes(ENTRIES, seed=n) for n in range(2)])
        yield running


def _expected_ids(directory: Path) -> list[str]:
    """The same corpus merged from files: what the live window must hold."""
    files = {}
    for n in range(2):
        path = directory / f"shard{n:02d}.bson"
        path.write_bytes(oplog_bytes(ENTRIES, seed=n))
        files[path.stem] = FileOplogSource(path.stem, str(path))
    return [
        e["_id"]["_data"] for e in shardstream.watch(files, start_at_operation_time=CORPUS_START)
    ]


def test_the_live_bench_reads_the_window_and_reports_native_unavailable(
    cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "live.json"
    argv = ["bench", "--uri", cluster.uri, "--start-at-operation-time", "1700000000,1"]
    assert main([*argv, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    report = json.loads(path.read_text())
    assert json.loads(out.splitlines()[-1]) == report
    ours = report["shardstream"]
    assert ours["available"] is True
    assert ours["events"] == len(_expected_ids(tmp_path))
    assert ours["caught_up"] is True
    assert ours["bytes"] > 0
    assert set(ours["latency_s"]) == {"p50", "p95", "max"}
    end = report["end"]
    assert ours["shard_positions"] == {
        name: {"position": end, "lag_s": 0} for name in ("shard00", "shard01")
    }
    # The emulated mongos runs aggregate but not $changeStream: the server's refusal,
    # by its code (40324: an unknown pipeline stage), is what the bench reports.
    assert report["native"]["available"] is False
    assert report["native"]["error"].startswith("Location40324 (40324): ")
    assert report["speed_ratio"] is None
    assert report["identical"] is None
    assert "native       unavailable: Location40324 (40324)" in out


def test_the_live_bench_stops_at_the_event_limit(
    cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--uri", cluster.uri, "--start-at-operation-time", "1700000000,1"]
    assert main([*argv, "--events", "50", "--tailer", "process"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["shardstream"]["events"] == 50
    assert report["shardstream"]["caught_up"] is False
    assert report["tailer"] == "process"


def test_the_password_of_the_uri_never_shows(
    cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # The emulator has no authentication: the driver's saslStart fails, with the URI's
    # user and password in hand.
    uri = cluster.uri.replace("mongodb://", "mongodb://alice:s3cr3t-pw@")
    assert main(["bench", "--uri", uri, "--since-seconds", "10"]) == 1
    out, err = capsys.readouterr()
    assert "s3cr3t-pw" not in out + err
    assert "shardstream bench: error:" in err
    leak = Exception(f"cannot reach {uri} as alice:s3cr3t-pw")
    assert "s3cr3t-pw" not in error_text(leak, uri)


def test_reading_stops_at_the_high_water_mark_and_times_out_when_idle() -> None:
    class Idle:
        def __init__(self, token_time: Timestamp) -> None:
            self.resume_token = {"_data": _hwm_token(token_time)}

        def try_next(self) -> None:
            return None

    end = Timestamp(1_700_000_100, 1)
    assert read_window(Idle(end), 0.0, end, 10, 60.0)["caught_up"] is True
    stuck = read_window(Idle(Timestamp(1_700_000_000, 1)), 0.0, end, 10, 0.0)
    assert (stuck["caught_up"], stuck["events"], stuck["latency_s"]) == (False, 0, None)


def _hwm_token(cluster_time: Timestamp) -> str:
    data = ResumeTokenData(cluster_time=cluster_time, token_type=TokenType.HIGH_WATER_MARK)
    return encode_token(data).data


@pytest.mark.parametrize(
    ("at", "since", "message"),
    [
        (None, None, "got neither"),
        (Timestamp(5, 1), 3.0, "got both"),
        (None, -1.0, "expected --since-seconds S with S > 0, got -1.0"),
    ],
)
def test_the_window_needs_one_start(at: Timestamp | None, since: float | None, message: str):
    with pytest.raises(ConfigurationError, match=message):
        resolve_start(Timestamp(100, 1), at, since)


def test_since_seconds_counts_back_from_the_cluster_time() -> None:
    assert resolve_start(Timestamp(100, 7), None, 30) == Timestamp(70, 0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--uri", "mongodb://127.0.0.1:9/", "--events", "0", "--since-seconds", "1"],
            "expected --events N with N >= 1, got 0",
        ),
        (["--since-seconds", "5"], "expected --uri with --start-at-operation-time or"),
        (
            ["--uri", "mongodb://h/", "--start-at-operation-time", "x"],
            "expected --start-at-operation-time as T,I",
        ),
    ],
)
def test_bad_live_arguments_are_named(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", *argv]) == 1
    assert message in capsys.readouterr().err


def test_first_mismatch_names_the_missing_event() -> None:
    assert first_mismatch(["a"], ["a", "b"]) == {"index": 1, "shardstream": None, "native": "b"}


def test_a_native_stream_that_opens_is_compared_event_by_event(
    cluster: EmulatedCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Stand-in for a real mongos: the "native" stream is shardstream's own over the same
    # window, so the two sequences must match and the ratio be computed.
    def native_watch(client: MongoClient[Any], **options: Any) -> Any:
        return shardstream.watch(cluster.uri, **options)

    monkeypatch.setattr(MongoClient, "watch", native_watch)
    argv = ["bench", "--uri", cluster.uri, "--start-at-operation-time", "1700000000,1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    report = json.loads(out.splitlines()[-1])
    assert report["native"]["events"] == report["shardstream"]["events"] > 0
    assert report["native"]["shard_positions"] is None
    assert report["identical"] is True
    assert report["first_mismatch"] is None
    assert report["speed_ratio"] > 0
    assert "same events, same order: yes" in out
