"""``shardstream replay`` end to end: every transform vector through the command line.

The oplog is written as Extended JSON lines and as concatenated BSON (mongodump's
format); the output lines must be the events the public API produces, and a
case the server fails on must exit non-zero with the entry's ts on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util

from shardstream.cli.main import main
from shardstream.transform import event_to_json, transform_oplog
from tests.transform.vector_cases import (
    RAW_CASES,
    SKIPPED,
    as_one_oplog,
    oplog_entries,
    options_for,
)

STREAM_CASES = [
    case
    for case in RAW_CASES
    if case["options"].get("kind") != "resumeTokenEncoding" and case["name"] not in SKIPPED
]


def _flags(case: dict[str, Any]) -> list[str]:
    options = options_for(case)
    flags: list[str] = []
    if options.db is not None:
        flags += ["--db", options.db]
    if options.coll is not None:
        flags += ["--coll", options.coll]
    major, minor = options.server_version
    flags += ["--server-version", f"{major}.{minor}"]
    for name, flag in (
        ("show_expanded_events", "--show-expanded-events"),
        ("show_migration_events", "--show-migration-events"),
        ("show_system_events", "--show-system-events"),
        ("show_raw_update_description", "--show-raw-update-description"),
    ):
        if getattr(options, name):
            flags.append(flag)
    return flags


def _write(case: dict[str, Any], directory: Path, input_format: str) -> Path:
    entries = as_one_oplog(oplog_entries(case))
    if input_format == "bson":
        path = directory / "oplog.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    else:
        path = directory / "oplog.jsonl"
        lines = [
            json_util.dumps(entry, json_options=json_util.CANONICAL_JSON_OPTIONS)
            for entry in entries
        ]
        path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("input_format", ["ejson", "bson"])
@pytest.mark.parametrize("case", STREAM_CASES, ids=[case["name"] for case in STREAM_CASES])
def test_replay_writes_the_api_events(
    case: dict[str, Any],
    input_format: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _write(case, tmp_path, input_format)
    code = main(["replay", str(path), "--input-format", input_format, *_flags(case)])
    out, err = capsys.readouterr()
    if "expected_error" in case:
        assert code == 1
        assert str(case["expected_error"]) in err
        assert "Timestamp(" in err
        assert len(err.strip().splitlines()) == 1
        return
    assert code == 0, err
    expected = [
        event_to_json(event.document)
        for event in transform_oplog(as_one_oplog(oplog_entries(case)), options_for(case))
    ]
    assert out.splitlines() == expected
    assert len(expected) == len(case["expected"])


def test_replay_rejects_a_corrupt_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "oplog.bson"
    path.write_bytes(bson.encode({"op": "n"})[:-3])
    assert main(["replay", str(path)]) == 1
    assert "truncated BSON" in capsys.readouterr().err


def test_replay_reads_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = next(c for c in STREAM_CASES if c["name"] == "insert_documentKey_just_id")
    path = _write(case, tmp_path, "ejson")
    with path.open() as handle:
        monkeypatch.setattr("sys.stdin", handle)
        assert main(["replay", "-", *_flags(case)]) == 0
    assert '"operationType": "insert"' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay"], "expected an oplog PATH"),
        (["replay", "x", "--server-version", "eight"], "expected --server-version as X.Y"),
        (
            ["replay", "x", "--start-at-operation-time", "1"],
            "expected --start-at-operation-time as T,I",
        ),
        (["replay", "x", "--resume-after", "zz"], "not a valid hex string"),
        (["replay", "x", "--coll", "c"], "a collection stream needs db"),
        (["replay", "/nonexistent/oplog.bson"], "cannot read oplog file"),
    ],
)
def test_replay_argument_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    assert message in capsys.readouterr().err
