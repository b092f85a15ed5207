"""``shardstream bench`` (offline): a table and a JSON report of the replay rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shardstream.bench.corpus import oplog_bytes
from shardstream.cli.main import main


def test_bench_reports_each_path_next_to_the_decode_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--entries", "300", "--shards", "2", "--repeats", "1", "--workers", "1"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    report = json.loads(lines[-1])
    names = [rate["name"] for rate in report["rates"]]
    assert names == [
        "decode_file_iter to dicts (baseline)",
        "replay bson, fast path, 1 process",
        "replay bson, fast path, --workers 1",
        "replay bson, reference path",
    ]
    assert all(rate["per_second"] > 0 and rate["items"] == 600 for rate in report["rates"])
    assert "2 shards, 600 entries" in report["header"]
    assert lines[0] == report["header"]
    assert [line.split("  ")[0] for line in lines[2:6]] == names


def test_bench_reads_given_shards_and_can_skip_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.bson"
    path.write_bytes(oplog_bytes(200, seed=5))
    assert main(["bench", "--shard", f"a={path}", "--repeats", "1", "--no-reference"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [rate["items"] for rate in report["rates"]] == [200, 200]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "--entries", "0"], "expected --entries >= 1, got 0"),
        (["bench", "--workers", "-2"], "expected --workers N with N >= 0, got -2"),
        (["bench", "--shard", "nopath"], "expected --shard NAME=PATH, got 'nopath'"),
        (["bench", "--shard", "a=/nonexistent.bson"], "cannot read oplog file"),
    ],
)
def test_bench_argument_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    assert message in capsys.readouterr().err
