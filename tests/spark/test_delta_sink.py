"""Both lakehouse tables through delta-rs, without Spark: exactly once, and the true state."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from shardstream.errors import ConfigurationError, SinkError
from shardstream.spark.delta.commits import WATERMARK_KEY, table_rows, transaction_app_id
from shardstream.spark.delta.maintenance import active_files
from shardstream.spark.delta.mirror.check import mirror_state
from shardstream.spark.delta.sink import LakehouseSink, resume_watermark
from shardstream.spark.source.rows import PUBLIC_COLUMNS
from tests.spark.lakehouse_checks import (
    event_batches,
    expected_state,
    merged_events,
    simulate,
)

_RESULT = simulate(seed=5, operations=300)
_EVENTS = merged_events(_RESULT, seed=5)
_TOKENS = [event.token.data for event in _EVENTS]


def _changelog_tokens(root: Path) -> list[str]:
    table = table_rows(DeltaTable(str(root / "changelog")))
    return sorted(table["_id"].to_pylist())


def _mirror(root: Path) -> pa.Table:
    return table_rows(DeltaTable(str(root / "mirror")))


def test_batches_give_every_event_once_and_the_true_final_state(tmp_path: Path) -> None:
    sink = LakehouseSink(tmp_path, "app-1")
    batches = event_batches(_EVENTS, 90)
    for batch_id, batch in enumerate(batches):
        outcome = sink.write_batch(batch, batch_id)
        assert outcome.changelog_rows == batch.num_rows
        assert outcome.mirror is not None
        assert outcome.mirror.events == batch.num_rows
    assert len(batches) > 3
    assert _changelog_tokens(tmp_path) == _TOKENS
    changelog = DeltaTable(str(tmp_path / "changelog"))
    assert changelog.schema().to_arrow().names == list(PUBLIC_COLUMNS)
    assert mirror_state(_mirror(tmp_path)) == expected_state(_RESULT)
    for name in ("changelog", "mirror"):
        table = DeltaTable(str(tmp_path / name))
        assert table.transaction_version(transaction_app_id("app-1", name)) == len(batches) - 1
        assert table.history(1)[0][WATERMARK_KEY] == _TOKENS[-1]


def test_a_replayed_batch_is_skipped_by_both_tables(tmp_path: Path) -> None:
    batches = event_batches(_EVENTS, 120)
    sink = LakehouseSink(tmp_path, "app-1")
    for batch_id, batch in enumerate(batches[:2]):
        sink.write_batch(batch, batch_id)
    versions = {n: DeltaTable(str(tmp_path / n)).version() for n in ("changelog", "mirror")}
    # A restarted ingest (new sink object, same checkpoint) is handed batch 1 again.
    replay = LakehouseSink(tmp_path, "app-1").write_batch(batches[1], 1)
    assert replay.changelog_rows is None
    assert replay.mirror is None
    assert {n: DeltaTable(str(tmp_path / n)).version() for n in versions} == versions
    restarted = LakehouseSink(tmp_path, "app-1")
    for batch_id, batch in enumerate(batches[2:], start=2):
        restarted.write_batch(batch, batch_id)
    assert _changelog_tokens(tmp_path) == _TOKENS
    assert mirror_state(_mirror(tmp_path)) == expected_state(_RESULT)


def test_a_mirror_behind_the_changelog_catches_up_on_replay(tmp_path: Path) -> None:
    batches = event_batches(_EVENTS, 120)
    sink = LakehouseSink(tmp_path, "app-1")
    sink.write_batch(batches[0], 0)
    # As a crash between the two commits leaves it: batch 1 in the change log only.
    sink.changelog.append(batches[1], _commit("app-1", 1, batches[1]))
    restarted = LakehouseSink(tmp_path, "app-1")
    outcome = restarted.write_batch(batches[1], 1)
    assert outcome.changelog_rows is None
    assert outcome.mirror is not None
    assert outcome.mirror.events == batches[1].num_rows
    for batch_id, batch in enumerate(batches[2:], start=2):
        restarted.write_batch(batch, batch_id)
    assert _changelog_tokens(tmp_path) == _TOKENS
    assert mirror_state(_mirror(tmp_path)) == expected_state(_RESULT)


def test_a_lost_checkpoint_restarts_from_the_lower_watermark(tmp_path: Path) -> None:
    batches = event_batches(_EVENTS, 100)
    sink = LakehouseSink(tmp_path, "old-checkpoint")
    sink.write_batch(batches[0], 0)
    sink.changelog.append(batches[1], _commit("old-checkpoint", 1, batches[1]))
    lower = resume_watermark(tmp_path)
    assert lower == batches[0]["_id"][-1].as_py()
    # The new checkpoint's stream starts after the lower watermark, with batch ids from 0,
    # and its batches are cut differently; the change log must skip what it already holds.
    rest = [event for event in _EVENTS if event.token.data > lower]
    fresh = LakehouseSink(tmp_path, "new-checkpoint")
    for batch_id, batch in enumerate(event_batches(rest, 70)):
        fresh.write_batch(batch, batch_id)
    assert _changelog_tokens(tmp_path) == _TOKENS
    assert mirror_state(_mirror(tmp_path)) == expected_state(_RESULT)
    assert resume_watermark(tmp_path) == _TOKENS[-1]


def test_a_mirror_that_never_committed_restarts_from_the_first_event(tmp_path: Path) -> None:
    assert resume_watermark(tmp_path) is None  # nothing written: start where the user said
    batch = event_batches(_EVENTS, 50)[0]
    # A crash between the commits of the first batch, then a lost checkpoint: on a live
    # cluster "where the user said" may be "now", which would leave the mirror without it.
    LakehouseSink(tmp_path, "a").changelog.append(batch, _commit("a", 0, batch))
    first = resume_watermark(tmp_path)
    assert first == _TOKENS[0]
    fresh = LakehouseSink(tmp_path, "b")
    rest = [event for event in _EVENTS if event.token.data >= first]
    for batch_id, again in enumerate(event_batches(rest, 70)):
        fresh.write_batch(again, batch_id)
    assert _changelog_tokens(tmp_path) == _TOKENS
    assert mirror_state(_mirror(tmp_path)) == expected_state(_RESULT)


def test_per_shard_row_order_is_restored_before_writing(tmp_path: Path) -> None:
    batch = event_batches(_EVENTS, len(_EVENTS))[0]
    shuffled = batch.sort_by([("shard", "ascending"), ("_id", "descending")])
    LakehouseSink(tmp_path, "app").write_batch(shuffled, 0)
    changelog = table_rows(DeltaTable(str(tmp_path / "changelog")))
    assert changelog["_id"].to_pylist() == _TOKENS
    assert mirror_state(_mirror(tmp_path)) == expected_state(_RESULT)


def test_batches_without_the_event_columns_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match=r"expected batches with the shardstream event columns"):
        LakehouseSink(tmp_path, "app").write_batch(pa.table({"x": [1]}), 0)


def _commit(app: str, batch_id: int, batch: pa.Table):  # type: ignore[no-untyped-def]
    from shardstream.spark.delta.commits import BatchCommit

    return BatchCommit(app_id=app, batch_id=batch_id, watermark=batch["_id"][-1].as_py())


def test_maintenance_compacts_both_tables_and_keeps_the_exactly_once_markers(
    tmp_path: Path,
) -> None:
    batches = event_batches(_EVENTS, 15)
    plain, maintained = tmp_path / "plain", tmp_path / "maintained"
    without = LakehouseSink(plain, "app-1")
    with_maintenance = LakehouseSink(maintained, "app-1", optimize_every=4)
    runs = []
    for batch_id, batch in enumerate(batches):
        without.write_batch(batch, batch_id)
        runs.append(with_maintenance.write_batch(batch, batch_id).maintained)
    assert len(batches) > 12
    assert [bool(run) for run in runs] == [(i + 1) % 4 == 0 for i in range(len(batches))]
    assert all(m.files_after <= m.files_before for run in runs for m in run)
    assert all(m.files_after == 1 for run in runs for m in run if m.table.endswith("changelog"))
    # Same contents, far fewer files.
    assert _changelog_tokens(maintained) == _changelog_tokens(plain) == _TOKENS
    assert mirror_state(_mirror(maintained)) == mirror_state(_mirror(plain))
    assert mirror_state(_mirror(maintained)) == expected_state(_RESULT)
    # This small mirror is one file that each MERGE rewrites; the change log grows a file
    # a batch and is compacted back to one.
    assert active_files(maintained / "changelog") < active_files(plain / "changelog")
    for name in ("changelog", "mirror"):
        assert active_files(maintained / name) <= active_files(plain / name)
        assert active_files(maintained / name) <= 4  # at most the batches since the last run
        table = DeltaTable(str(maintained / name))
        assert table.transaction_version(transaction_app_id("app-1", name)) == len(batches) - 1
    # The markers survive the maintenance commits: a restart reads the watermark back and
    # skips a replayed batch.
    assert resume_watermark(maintained) == _TOKENS[-1]
    replay = LakehouseSink(maintained, "app-1", optimize_every=4).write_batch(batches[7], 7)
    assert replay.changelog_rows is None
    assert replay.mirror is None


def test_a_negative_maintenance_interval_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="expected --optimize-every N with N >= 0, got -1"):
        LakehouseSink(tmp_path, "app-1", optimize_every=-1)


def test_a_lakehouse_keeps_the_mirror_layout_it_was_written_in(tmp_path: Path) -> None:
    """The per-collection layout keeps its state in _mirror_state, the single one in
    mirror: a sink of the other layout on the same root would start a second state."""
    from shardstream.spark.ingest import MirrorLayout

    batch = event_batches(_EVENTS, 90)[0]
    LakehouseSink(tmp_path / "a", "app", layout=MirrorLayout.COLLECTIONS).write_batch(batch, 0)
    with pytest.raises(SinkError, match="--mirror-layout collections"):
        LakehouseSink(tmp_path / "a", "app", layout=MirrorLayout.SINGLE)
    LakehouseSink(tmp_path / "b", "app").write_batch(batch, 0)
    with pytest.raises(SinkError, match="--mirror-layout single"):
        LakehouseSink(tmp_path / "b", "app", layout=MirrorLayout.COLLECTIONS)
