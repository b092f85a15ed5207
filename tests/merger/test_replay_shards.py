"""``shardstream replay --shard a=... --shard b=...`` merges the shards like watch()."""

from __future__ import annotations

from pathlib import Path

import pytest

import shardstream
from shardstream.cli.main import main
from shardstream.oplog.file_source import FileOplogSource
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.transform import event_to_json


@pytest.mark.parametrize("seed", [1, 2])
def test_replay_of_several_shards_is_the_merged_stream(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = SimulatedCluster(SimulationConfig(seed=seed, shards=3, operations=200)).run()
    paths = result.write_oplogs(tmp_path)
    flags = [arg for name, path in paths.items() for arg in ("--shard", f"{name}={path}")]
    assert main(["replay", *flags, "--show-expanded-events"]) == 0
    lines = capsys.readouterr().out.splitlines()
    sources = {name: FileOplogSource(name, str(path)) for name, path in paths.items()}
    expected = [
        event_to_json(event) for event in shardstream.watch(sources, show_expanded_events=True)
    ]
    assert lines == expected
    assert len(lines) > 100


def test_replay_refuses_migration_events_across_shards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", "--shard", "a=x.bson", "--shard", "b=y.bson", "--show-migration-events"]
    assert main(argv) == 1
    assert "31123" in capsys.readouterr().err


def test_replay_needs_distinct_shard_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--shard", "a=x", "--shard", "a=y"]) == 1
    assert "distinct shard names" in capsys.readouterr().err
