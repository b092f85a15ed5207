"""Recorded real-cluster runs (tests/docker/record_vectors.py) replay to mongos's own events.

Each directory under tests/data/recorded holds the shards' oplogs and the native events
of one run; the merged replay of the oplogs must equal the native events, byte for byte
as canonical Extended JSON.  None are recorded yet on the development machines (no
Docker engine); the test then reports the skip with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bson.timestamp import Timestamp

import shardstream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.transform.extended_json import event_to_json

RECORDED = Path(__file__).parents[1] / "data" / "recorded"
RUNS = sorted(path for path in RECORDED.glob("*") if (path / "native.jsonl").exists())


@pytest.mark.skipif(not RUNS, reason=f"no recorded runs in {RECORDED} (needs Docker to record)")
@pytest.mark.parametrize("run", RUNS or [None], ids=lambda run: run.name if run else "none")
def test_a_recorded_run_replays_to_the_native_events(run: Path) -> None:
    meta = json.loads((run / "meta.json").read_text())
    start = Timestamp(meta["start"]["t"], meta["start"]["i"])
    sources = {path.stem: FileOplogSource(path.stem, str(path)) for path in run.glob("*.bson")}
    expected = (run / "native.jsonl").read_text().splitlines()
    with shardstream.watch(sources, start_at_operation_time=start) as stream:
        got = [event_to_json(event) for event in stream]
    assert got[: len(expected)] == expected
