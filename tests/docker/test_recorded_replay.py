"""A real cluster's run, recorded (shards' oplogs, mongos's events) and replayed offline.

``shardstream.watch()`` over the recorded oplog files, with no server at all, must give
mongos's own events line for line: the file path (``shardstream replay``) checked against
real mongod output. Recorded into a temporary directory on each run, so this needs a
Docker engine and skips with the reason where none runs (as on the development machines).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docker.record_vectors import record, replay_recorded
from tests.docker.test_real_cluster import IMAGES

# Never run here (no Docker engine): a cluster start is about a minute, so a generous bound.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.parametrize("image", IMAGES)
def test_a_recorded_run_replays_to_the_native_events(
    docker_engine: None, image: str, tmp_path: Path
) -> None:
    record(tmp_path, image)
    expected = (tmp_path / "native.jsonl").read_text().splitlines()
    assert any('"last"' in line for line in expected)  # the workload's end was recorded
    got = replay_recorded(tmp_path)
    # The oplogs run past the native stream's last event (periodic no-ops, nothing more).
    assert got[: len(expected)] == expected
