"""Helpers for the ingest tests: run ``shardstream ingest`` as a subprocess, check tables.

A run is its own process group (``start_new_session``), so a SIGKILLed ingest's JVM is
ended with it, by that group's id, and nothing else is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from shardstream.cli.ingest import CRASH_ENV
from shardstream.merger import MergedStream
from shardstream.sim import SimulationResult, simulated_sources
from shardstream.sim.apply_events import apply_events, encoded_state
from shardstream.spark.delta.changelog.table import DeltaChangelog
from shardstream.spark.delta.mirror.check import changelog_difference, mirror_state, read_table
from shardstream.spark.delta.mirror.table import DeltaMirror
from shardstream.spark.delta.sink import CrashPoint
from shardstream.spark.delta.typed.paths import state_table
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.settings import APP_PREFIX, IngestSettings
from shardstream.transform import ChangeEvent, ChangeStreamOptions

RUN_TIMEOUT_SECS = 300


@dataclasses.dataclass(frozen=True)
class Run:
    """A finished ingest process."""

    returncode: int
    stdout: str
    stderr: str


def ingest_process(
    root: Path,
    simulation: dict[str, int],
    *,
    batch: int,
    crash: str | None = None,
    extra: list[str] | None = None,
) -> Run:
    """Run ``python -m shardstream ingest --simulate`` into ``root`` (crash: the test hook;
    extra: more flags)."""
    env = {**os.environ, "TZ": "UTC", "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop(CRASH_ENV, None)
    if crash is not None:
        env[CRASH_ENV] = crash
    command = [sys.executable, "-m", "shardstream", "ingest", "--table", str(root), "--simulate"]
    for name, value in simulation.items():
        command += [f"--{name}", str(value)]
    command += ["--max-events-per-batch", str(batch), "--master", "local[2]", *(extra or [])]
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_SECS)
    finally:
        _end_group(process.pid)
    return Run(process.returncode, stdout, stderr)


def _end_group(group: int) -> None:
    # The ingest's JVM outlives a SIGKILLed Python driver; end what is left of the group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def reference_events(result: SimulationResult) -> list[ChangeEvent]:
    """The mongos-identical stream with raw update descriptions (for apply_events)."""
    options = ChangeStreamOptions(show_raw_update_description=True)
    stream = MergedStream(simulated_sources(result, seed=0), options)
    events: list[ChangeEvent] = []
    while not stream.exhausted:
        events += stream.next_batch(1000)[0]
    stream.close()
    return events


def check_consistent(root: Path, events: list[ChangeEvent]) -> dict[str, Any]:
    """Check the tables as a crash may leave them; return their watermarks' positions.

    The change log must hold exactly the stream's first N events (no duplicate, no gap)
    and the mirror exactly the state after the events up to its own watermark.
    """
    tokens = [event.token.data for event in events]
    changelog_mark = DeltaChangelog(root).watermark
    mirror_mark = DeltaMirror(root, table=state_table(root)).watermark
    held = tokens.index(changelog_mark) + 1 if changelog_mark else 0
    applied = tokens.index(mirror_mark) + 1 if mirror_mark else 0
    difference = changelog_difference(read_table(root, "changelog"), tokens[:held])
    assert difference == {}, difference
    documents = (event.document for event in events[:applied])
    assert mirror_state(read_table(root, "mirror")) == encoded_state(apply_events(documents))
    return {"changelog": held, "mirror": applied}


def killed_in_process(spark: Any, settings: IngestSettings, point: CrashPoint, batch: int) -> str:
    """Run ``settings``' ingest in this process with a task killed at ``point`` of ``batch``
    (a Spark task's kill fails the query, not this process); its app id prefix, the tables'
    markers' ``<prefix>:<table>``."""
    crashing = dataclasses.replace(settings, crash_at_for_test=(point, batch))
    with pytest.raises(StreamingQueryException):
        run_ingest(spark, crashing, IngestProgress(io.StringIO(), interactive=False))
    query = json.loads((settings.checkpoint_path / "metadata").read_text())["id"]
    return f"{APP_PREFIX}:{query}"
