"""``shardstream replay --output-format bson``: the reference events as concatenated BSON.

One file takes the fast path when the options allow it; several shards are merged
with their events still encoded, in this process or in worker processes.  Each
output must equal the reference pipeline's events (or MergedStream's, for
several shards) encoded one by one.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp

from shardstream.cli.main import main
from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.transform import ChangeStreamOptions, transform_oplog
from shardstream.transform.raw.event_writer import encode_event_document
from tests.transform.raw_corpus import generate_entries
from tests.transform.replay_paths import split_events
from tests.transform.test_replay_cli import STREAM_CASES, _flags, _write
from tests.transform.vector_cases import as_one_oplog, oplog_entries, options_for


@pytest.mark.parametrize("input_format", ["ejson", "bson"])
@pytest.mark.parametrize("case", STREAM_CASES[::3], ids=[c["name"] for c in STREAM_CASES[::3]])
def test_vectors_replay_to_the_reference_bson(
    case: dict[str, Any],
    input_format: str,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    path = _write(case, tmp_path, input_format)
    argv = ["replay", str(path), "--input-format", input_format, "--output-format", "bson"]
    code = main([*argv, *_flags(case)])
    out, err = capsysbinary.readouterr()
    if "expected_error" in case:
        assert code == 1
        assert str(case["expected_error"]).encode() in err
        return
    assert code == 0, err
    expected = [
        encode_event_document(event.document)
        for event in transform_oplog(as_one_oplog(oplog_entries(case)), options_for(case))
    ]
    assert split_events(out) == expected


def test_one_file_replays_to_the_reference_bson(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    entries = list(generate_entries(600, 7))
    path = tmp_path / "oplog.bson"
    path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    assert main(["replay", str(path), "--output-format", "bson", "--db", "shop"]) == 0
    decoded = [bson.decode(bson.encode(entry)) for entry in entries]
    expected = [
        encode_event_document(event.document)
        for event in transform_oplog(decoded, ChangeStreamOptions(db="shop"))
    ]
    assert split_events(capsysbinary.readouterr().out) == expected
    assert len(expected) > 200


def _merged_reference(paths: dict[str, Path], options: ChangeStreamOptions) -> list[bytes]:
    sources = {name: FileOplogSource(name, str(path)) for name, path in paths.items()}
    merged = MergedStream(sources, options)
    events: list[bytes] = []
    while not merged.exhausted:
        batch, _ = merged.next_batch(1000)
        events += [encode_event_document(event.document) for event in batch]
    merged.close()
    return events


@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("seed", [1, 2])
def test_shards_merge_to_the_reference_bson(
    seed: int, workers: int, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    result = SimulatedCluster(SimulationConfig(seed=seed, shards=3, operations=300)).run()
    paths = result.write_oplogs(tmp_path)
    flags = [arg for name, path in paths.items() for arg in ("--shard", f"{name}={path}")]
    argv = ["replay", *flags, "--output-format", "bson", "--workers", str(workers)]
    assert main(argv) == 0
    expected = _merged_reference(paths, ChangeStreamOptions())
    assert split_events(capsysbinary.readouterr().out) == expected
    assert len(expected) > 200


def test_a_collection_stream_merges_to_the_reference_bson(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    result = SimulatedCluster(
        SimulationConfig(seed=3, shards=2, operations=300, collmod_at=0.5)
    ).run()
    paths = result.write_oplogs(tmp_path)
    flags = [arg for name, path in paths.items() for arg in ("--shard", f"{name}={path}")]
    options = ChangeStreamOptions(db=result.config.database, coll=result.config.collections[0].name)
    argv = ["replay", *flags, "--output-format", "bson", "--db", options.db or ""]
    assert main([*argv, "--coll", options.coll or ""]) == 0
    assert split_events(capsysbinary.readouterr().out) == _merged_reference(paths, options)


def test_workers_must_not_be_negative(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["replay", "x.bson", "--output-format", "bson", "--workers", "-1"]) == 1
    assert b"expected --workers N with N >= 0, got -1" in capsysbinary.readouterr().err


@pytest.mark.parametrize("workers", [0, 2])
def test_a_shard_out_of_order_fails_the_merged_replay(
    workers: int, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    entries = list(generate_entries(50, 1))
    entries[10], entries[20] = entries[20], entries[10]
    bad = tmp_path / "bad.bson"
    bad.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    good = tmp_path / "good.bson"
    good.write_bytes(b"".join(bson.encode(entry) for entry in generate_entries(50, 2)))
    argv = ["replay", "--shard", f"a={good}", "--shard", f"b={bad}", "--output-format", "bson"]
    assert main([*argv, "--workers", str(workers)]) == 1
    assert b"shard 'b': expected ts to increase" in capsysbinary.readouterr().err


def test_a_merged_replay_from_a_start_time_is_the_reference(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    result = SimulatedCluster(SimulationConfig(seed=6, shards=2, operations=200)).run()
    paths = result.write_oplogs(tmp_path)
    flags = [arg for name, path in paths.items() for arg in ("--shard", f"{name}={path}")]
    first = max(oplog[0]["ts"] for oplog in result.oplogs.values())
    middle = Timestamp(first.time + 5, 0)
    argv = ["replay", *flags, "--output-format", "bson"]
    assert main([*argv, "--start-at-operation-time", f"{middle.time},{middle.inc}"]) == 0
    expected = _merged_reference(paths, ChangeStreamOptions(start_at_operation_time=middle))
    assert split_events(capsysbinary.readouterr().out) == expected
    assert expected
    early = Timestamp(first.time - 100, 0)
    assert main([*argv, "--start-at-operation-time", f"{early.time},{early.inc}"]) == 1
    assert b"(server error 286)" in capsysbinary.readouterr().err


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-3], b"truncated BSON in"),
        (lambda data: data + b"\x01\x00\x00\x00", b"expected a document length of at least 5"),
    ],
)
def test_a_damaged_file_fails_as_the_reference_reader_fails(
    damage: Any, message: bytes, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = tmp_path / "oplog.bson"
    path.write_bytes(damage(b"".join(bson.encode(e) for e in generate_entries(40, 3))))
    assert main(["replay", str(path)]) == 1
    reference_error = capsysbinary.readouterr().err
    assert main(["replay", str(path), "--output-format", "bson"]) == 1
    fast_error = capsysbinary.readouterr().err
    assert message in fast_error
    assert fast_error == reference_error


def test_bson_replay_reads_stdin(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = list(generate_entries(100, 4))
    data = b"".join(bson.encode(entry) for entry in entries)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["replay", "-", "--input-format", "bson", "--output-format", "bson"]) == 0
    decoded = [bson.decode(bson.encode(entry)) for entry in entries]
    expected = [
        encode_event_document(event.document)
        for event in transform_oplog(decoded, ChangeStreamOptions())
    ]
    assert split_events(capsysbinary.readouterr().out) == expected


@pytest.mark.parametrize("flags", [["--output-format", "bson", "--workers", "2"], []])
def test_a_reader_that_stops_early_ends_the_replay_quietly(
    flags: list[str], tmp_path: Path
) -> None:
    """``shardstream replay ... | head``: exit code 141 (SIGPIPE's), no traceback."""
    argv = []
    for n in range(2):
        path = tmp_path / f"s{n}.bson"
        path.write_bytes(b"".join(bson.encode(e) for e in generate_entries(3000, n)))
        argv += ["--shard", f"s{n}={path}"]
    process = subprocess.Popen(
        [sys.executable, "-m", "shardstream", "replay", *argv, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert len(process.stdout.read(100)) == 100
    process.stdout.close()  # the reader goes away with most of the output unread
    _, err = process.communicate(timeout=60)
    assert process.returncode == 141
    assert err == b""
