"""``shardstream replay`` to Extended JSON: the reference events' text, canonical or relaxed.

The lines are written from each event's BSON by the raw writer; the oracle writes the
reference path's events with the reference writer (canonical) or json_util (relaxed).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bson import json_util
from bson.codec_options import DatetimeConversion

from shardstream.cli.main import main
from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.transform import ChangeStreamOptions, event_to_json

RELAXED = json_util.RELAXED_JSON_OPTIONS.with_options(
    datetime_conversion=DatetimeConversion.DATETIME_AUTO
)


def _reference_lines(paths: dict[str, Path], relaxed: bool) -> list[str]:
    sources = {name: FileOplogSource(name, str(path)) for name, path in paths.items()}
    merged = MergedStream(sources, ChangeStreamOptions())
    lines: list[str] = []
    while not merged.exhausted:
        batch, _ = merged.next_batch(1000)
        for event in batch:
            document = event.document
            text = json_util.dumps(document, json_options=RELAXED) if relaxed else None
            lines.append(text if text is not None else event_to_json(document))
    merged.close()
    return lines


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("mode", ["canonical", "relaxed"])
def test_merged_shards_replay_to_the_reference_text(
    mode: str, workers: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = SimulatedCluster(SimulationConfig(seed=4, shards=3, operations=300)).run()
    paths = result.write_oplogs(tmp_path)
    flags = [arg for name, path in paths.items() for arg in ("--shard", f"{name}={path}")]
    argv = ["replay", *flags, "--workers", str(workers)]
    if mode == "relaxed":
        argv += ["--json", "relaxed"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == _reference_lines(paths, relaxed=mode == "relaxed")
    assert len(lines) > 200


def test_an_unknown_json_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["replay", "x.bson", "--json", "loose"])
    assert exited.value.code == 2
    assert "loose" in capsys.readouterr().err
