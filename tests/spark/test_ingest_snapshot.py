"""``ingest --snapshot``: a live source's documents as of T0, then its stream from T0.

The source is a simulated run served by the wire emulator, cut part-way: the collections
hold the contents at the cut and the oplogs run to it; ``feed_rest`` then appends the rest
of the oplogs and switches the collections to the run's true final contents.  Every test
ends with the mirror equal to those final contents as BSON bytes, and the change log
holding one ``read`` row per snapshot document plus every stream event from T0 exactly once.
A live ingest runs until stopped, so each run is stopped once the tables show what it was
run for.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from shardstream.cli.main import main
from shardstream.cluster_sync import source_catalog
from shardstream.errors import ConfigurationError
from shardstream.sim import SimulationConfig
from shardstream.sim.apply_events import encoded_state
from shardstream.sim.emulated_source import SimulatedSource
from shardstream.spark.delta.changelog.table import DeltaChangelog
from shardstream.spark.delta.mirror.check import (
    changelog_difference,
    collections_state,
    mirror_state,
    read_table,
)
from shardstream.spark.delta.mirror.table import DeltaMirror
from shardstream.spark.delta.snapshot import tables as snapshot_tables
from shardstream.spark.delta.snapshot.tables import snapshot_in_changelog
from shardstream.spark.delta.typed.paths import state_table
from shardstream.spark.ingest import snapshot
from shardstream.spark.ingest.progress import IngestProgress, IngestTotals
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.settings import IngestSettings
from tests.spark.lakehouse_checks import merged_events

pytestmark = pytest.mark.spark

RUN = SimulationConfig(seed=11, shards=2, operations=160)
WAIT_S = 120.0
Namespace = tuple[str, str]


class Injected(Exception):
    """The failure a test injects into a run (a kill, without killing the test)."""


@pytest.fixture
def source() -> Iterator[SimulatedSource]:
    with SimulatedSource(RUN) as simulated:
        yield simulated


@pytest.mark.parametrize("changes", ["after-the-snapshot", "while-it-reads"])
def test_snapshot_then_stream_ends_in_the_sources_final_state(
    spark: Any,
    tmp_path: Path,
    source: SimulatedSource,
    changes: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "lake"
    uri = source.cluster.uri
    if changes == "while-it-reads":
        # The rest is written once T0 is taken: the documents are read newer than T0
        # (some already deleted), and the stream's events since T0 must converge them.
        monkeypatch.setattr(snapshot, "majority_time", _then(source_catalog.majority_time, source))
        totals = _ingest(spark, root, uri, _reached(root, source))
        # Updates of documents the read found deleted are skipped, not refused.
        assert totals.unknown_updates > 0
        snapshot_state = source.result.final_state
    else:
        first = _ingest(spark, root, uri, _streaming(spark))
        assert first.snapshot_documents == _count(source.state_at_cut)
        assert mirror_state(read_table(root, "mirror")) == encoded_state(source.state_at_cut)
        source.feed_rest()
        again = _ingest(spark, root, uri, _reached(root, source))  # the same checkpoint
        assert again.snapshot_documents == 0  # held already, not read again
        snapshot_state = source.state_at_cut
    _check_tables(root, source, snapshot_state)
    # A restart after the end neither reads the snapshot again nor writes anything.
    rows = read_table(root, "changelog").num_rows
    last = _ingest(spark, root, uri, _streaming(spark))
    assert (last.snapshot_documents, last.changelog_rows) == (0, 0)
    assert read_table(root, "changelog").num_rows == rows


@pytest.mark.parametrize("failure", ["while-reading", "between-the-tables"])
def test_a_run_failing_inside_the_snapshot_restarts_to_the_same_tables(
    spark: Any,
    tmp_path: Path,
    source: SimulatedSource,
    failure: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "lake"
    uri = source.cluster.uri
    if failure == "while-reading":
        # The second collection's first batch fails: one collection is staged, none committed.
        monkeypatch.setattr(snapshot, "read_rows", _failing(snapshot_tables.read_rows, at_call=2))
    else:
        # The change log holds the snapshot, the mirror does not.
        monkeypatch.setattr(
            snapshot, "complete_mirror", _failing(snapshot_tables.complete_mirror, at_call=1)
        )
    with pytest.raises(Injected):
        _ingest(spark, root, uri, _streaming(spark))
    monkeypatch.undo()
    held = snapshot_in_changelog(root)
    assert (held is None) == (failure == "while-reading")
    assert not (root / "mirror").exists()
    # The restart takes the snapshot from where the failure left it: read again when
    # nothing was committed (with --snapshot), the mirror completed from the change log
    # when it was (even without --snapshot), keeping its T0.
    totals = _ingest(spark, root, uri, _streaming(spark), snapshot=held is None)
    if held is None:
        assert totals.snapshot_documents == _count(source.state_at_cut)
    else:
        assert (totals.snapshot_documents, snapshot_in_changelog(root)) == (0, held)
    source.feed_rest()
    _ingest(spark, root, uri, _reached(root, source))
    _check_tables(root, source, source.state_at_cut)


def test_the_command_snapshots_a_live_cluster_then_follows_its_stream(
    spark: Any, tmp_path: Path, source: SimulatedSource, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "lake"
    argv = ["ingest", "--table", str(root), "--uri", source.cluster.uri, "--snapshot"]
    codes: list[int] = []
    fed: list[bool] = []
    reached = _reached(root, source)

    def command() -> None:
        codes.append(main([*argv, "--trigger-interval", "0 seconds"]))

    def fed_once_streaming_then_reached() -> bool:
        if not fed and spark.streams.active:  # the snapshot is loaded: change the source
            source.feed_rest()
            fed.append(True)
        return bool(fed) and reached()

    _run_until(spark, command, fed_once_streaming_then_reached)
    assert codes == [0]
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["snapshotDocuments"] == _count(source.state_at_cut)
    _check_tables(root, source, source.state_at_cut)


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        (
            ["--shard", "a=a.bson"],
            "expected --snapshot with a live cluster (--uri), got oplog files",
        ),
        (
            ["--simulate"],
            "expected --snapshot with a live cluster (--uri), got a simulated cluster",
        ),
        (
            ["--uri", "mongodb://user:s3cret@mongos/", "--start-at-operation-time", "5,1"],
            "expected no start option with --snapshot (the stream starts at the snapshot's "
            "time T0), got --start-at-operation-time",
        ),
    ],
)
def test_a_snapshot_needs_a_live_cluster_and_its_own_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, inputs: list[str], expected: str
) -> None:
    root = tmp_path / "lake"
    assert main(["ingest", "--table", str(root), "--snapshot", *inputs]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"shardstream ingest: error: {expected}")
    assert "s3cret" not in err
    assert not root.exists()  # refused before anything started


def test_the_api_refuses_a_snapshot_of_files_too() -> None:
    with pytest.raises(ConfigurationError, match="there is no cluster to read"):
        IngestSettings(
            table=Path("lake"), source_options={"oplog": "a=a.bson"}, bounded=True, snapshot=True
        )


def _ingest(
    spark: Any, root: Path, uri: str, until: Callable[[], bool], *, snapshot: bool = True
) -> IngestTotals:
    """One live run through the API, stopped once ``until()`` holds; re-raises its error."""
    settings = IngestSettings(
        table=root,
        source_options={"uri": uri, "maxEventsPerTrigger": "150"},
        bounded=False,
        trigger_interval="0 seconds",
        snapshot=snapshot,
    )
    progress = IngestProgress(io.StringIO(), interactive=False)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            run_ingest(spark, settings, progress)
        except BaseException as exc:  # handed to the test
            failures.append(exc)

    _run_until(spark, run, until)
    if failures:
        raise failures[0]
    return progress.totals


def _run_until(spark: Any, target: Callable[[], None], until: Callable[[], bool]) -> None:
    """Run ``target`` on a thread until ``until()`` holds or it ends; stop its query."""
    runner = threading.Thread(target=target)
    runner.start()
    deadline = time.monotonic() + WAIT_S
    try:
        while runner.is_alive() and not until():
            assert time.monotonic() < deadline, "the ingest did not get there in time"
            time.sleep(0.1)
    finally:
        for query in spark.streams.active:  # a live ingest runs until stopped
            query.stop()
        runner.join(WAIT_S)
    assert not runner.is_alive(), "the ingest did not stop"


def _streaming(spark: Any) -> Callable[[], bool]:
    """Whether the stream has reported a trigger (the snapshot is behind it).

    Not merely started: a query stopped while Spark still starts its Python source runner
    leaves the session unable to start the next one (its runner's socket times out).
    """
    return lambda: any(query.lastProgress is not None for query in spark.streams.active)


def _reached(root: Path, source: SimulatedSource) -> Callable[[], bool]:
    """Whether both tables hold the run's last event."""
    last = merged_events(source.result)[-1].token.data
    return lambda: (
        DeltaChangelog(root).watermark
        == last
        == DeltaMirror(root, table=state_table(root)).watermark
    )


def _then(majority_time: Callable[[Any], Any], source: SimulatedSource) -> Callable[[Any], Any]:
    """``majority_time`` that feeds the source's rest right after its first call (T0)."""
    calls: list[Any] = []

    def majority_time_then_feed(client: Any) -> Any:
        now = majority_time(client)
        if not calls:
            source.feed_rest()
        calls.append(now)
        return now

    return majority_time_then_feed


def _failing(function: Callable[..., Any], at_call: int) -> Callable[..., Any]:
    """``function``, except that its ``at_call``-th call raises :class:`Injected`."""
    calls = [0]

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == at_call:
            raise Injected(f"injected failure at call {at_call} of {function.__name__}")
        return function(*args, **kwargs)

    return fails_once


def _check_tables(
    root: Path, source: SimulatedSource, snapshot_state: Mapping[Namespace, Mapping[bytes, Any]]
) -> None:
    """The mirror is the source's final data; the change log the snapshot plus the stream."""
    assert mirror_state(read_table(root, "mirror")) == encoded_state(source.result.final_state)
    # The typed per-collection mirrors (the default layout): the snapshot's tables, then
    # the stream's batches, end in the same final data.
    assert collections_state(root) == encoded_state(source.result.final_state)
    held = snapshot_in_changelog(root)
    assert held is not None
    start = held[0]
    changelog = read_table(root, "changelog")
    is_read = pc.equal(changelog["operationType"], "read")
    reads, events = changelog.filter(is_read), changelog.filter(pc.invert(is_read))
    assert mirror_state(reads) == encoded_state(snapshot_state)  # raises on a document twice
    assert set(map(_pair, reads["clusterTime"].to_pylist())) == {(start.time, start.inc)}
    expected = [
        event.token.data
        for event in merged_events(source.result)
        if event.token_data.cluster_time >= start
    ]
    assert changelog_difference(events, expected) == {}
    # In _id order the snapshot comes first: its token sorts below every event's.
    assert pc.max(reads["_id"]).as_py() < pc.min(events["_id"]).as_py()


def _pair(cluster_time: dict[str, int]) -> tuple[int, int]:
    return (cluster_time["t"], cluster_time["i"])


def _count(state: Mapping[Namespace, Mapping[bytes, Any]]) -> int:
    return sum(len(documents) for documents in state.values())
