"""Kill tests: ``shardstream ingest`` SIGKILLed at seeded crash points, then restarted.

The ingest (a subprocess with its own JVM) is SIGKILLed through its test hook
(``SHARDSTREAM_CRASH_AT_FOR_TEST=<point>:<batch id>``): a Spark task inside a batch (the
run then fails with Spark's error), or the ingest's own process between the change log's
and the documents' commits, or after both (before Spark's commit log).
After every kill the tables must be consistent (the change log a gap-free, duplicate-free
prefix of the stream; the mirror the state at its own watermark); after the last restart (in this
process), the change log holds every event exactly once and the mirror equals the
simulator's final data.

Each subprocess costs a JVM start and a first micro-batch (15-25 s here), so the default
suite runs one chain of three kills; the seeded loop of longer chains is marked ``slow``.
"""

from __future__ import annotations

import io
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.sim.apply_events import encoded_state
from shardstream.spark.delta.mirror.check import (
    changelog_difference,
    collections_state,
    mirror_state,
    read_table,
)
from shardstream.spark.delta.sink import CrashPoint
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.settings import IngestSettings
from tests.spark.ingest_runs import check_consistent, ingest_process, reference_events

pytestmark = pytest.mark.spark

SIMULATION = {"shards": 3, "entries": 240, "seed": 3}
BATCH = 60
KILLED = -9


def _simulated(simulation: dict[str, int]):  # type: ignore[no-untyped-def]
    config = SimulationConfig(
        shards=simulation["shards"], operations=simulation["entries"], seed=simulation["seed"]
    )
    result = SimulatedCluster(config).run()
    return result, reference_events(result)


def _assert_complete(root: Path, result, events) -> None:  # type: ignore[no-untyped-def]
    tokens = [event.token.data for event in events]
    assert changelog_difference(read_table(root, "changelog"), tokens) == {}
    assert mirror_state(read_table(root, "mirror")) == encoded_state(result.final_state)
    # The typed per-collection mirrors (the CLI's default layout) caught up too.
    assert collections_state(root) == encoded_state(result.final_state)


@pytest.mark.timeout(900)  # four JVM starts: 202 s measured on 2 busy cores
def test_three_kills_then_a_clean_finish(spark: Any, tmp_path: Path) -> None:
    result, events = _simulated(SIMULATION)
    root = tmp_path / "lake"
    assert len(events) > 4 * BATCH  # enough batches for the crash points below

    # Inside batch 1 (a task): nothing of it committed; Spark replays it on restart.
    run = ingest_process(root, SIMULATION, batch=BATCH, crash="in-batch:1")
    assert run.returncode not in (0, KILLED), run.stderr[-2000:]
    first = check_consistent(root, events)
    assert 0 < first["changelog"] == first["mirror"] < len(events)

    # Between the commits of batch 2: the change log is ahead of the mirror.  The
    # checkpoint is then lost: the stream restarts from the mirror's (lower) watermark
    # under a new app id, and the change log drops what it already holds.
    run = ingest_process(root, SIMULATION, batch=BATCH, crash="between-commits:2")
    assert run.returncode == KILLED, run.stderr[-2000:]
    second = check_consistent(root, events)
    assert first["mirror"] < second["mirror"] < second["changelog"] < len(events)
    shutil.rmtree(root / "_checkpoint")

    # After both commits of the new checkpoint's batch 1: Spark replays it; both skip it.
    run = ingest_process(root, SIMULATION, batch=BATCH, crash="after-commits:1")
    assert run.returncode == KILLED, run.stderr[-2000:]
    assert "restarting after the tables' lower watermark" in run.stderr
    third = check_consistent(root, events)
    assert second["changelog"] < third["changelog"] == third["mirror"] < len(events)

    # The last restart runs in this process, on the shared session (one JVM start less).
    options = {"simulate": "true", **{k: str(v) for k, v in SIMULATION.items()}}
    options["maxEventsPerTrigger"] = str(BATCH)
    settings = IngestSettings(table=root, source_options=options, bounded=True)
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert totals.changelog_rows == len(events) - third["changelog"]
    _assert_complete(root, result, events)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # up to five JVM starts per seed (about 50 s each)
@pytest.mark.parametrize("seed", range(4))
def test_seeded_kill_loop(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    simulation = {"shards": rng.choice([2, 3, 4]), "entries": rng.randint(200, 400), "seed": seed}
    batch = rng.choice([40, 70, 110])
    result, events = _simulated(simulation)
    root = tmp_path / "lake"
    for _ in range(rng.randint(2, 4)):
        point = rng.choice(list(CrashPoint))
        run = ingest_process(
            root, simulation, batch=batch, crash=f"{point.value}:{rng.randint(0, 3)}"
        )
        # A crash point past the stream's last batch never fires: the run just finishes;
        # a task's kill fails the run with Spark's error.
        assert run.returncode in (KILLED, 0, 1), run.stderr[-2000:]
        check_consistent(root, events)
        if rng.random() < 0.3:
            shutil.rmtree(root / "_checkpoint", ignore_errors=True)
    run = ingest_process(root, simulation, batch=batch)
    assert run.returncode == 0, run.stderr[-2000:]
    _assert_complete(root, result, events)
