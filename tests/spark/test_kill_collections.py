"""Kill tests of the per-collection tables, through the sink alone (no JVM: seconds each).

A subprocess writes a simulated stream's batches with ``LakehouseSink(layout=COLLECTIONS)``
and SIGKILLs itself at a crash point of one batch (the sink's test hook), e.g. after the
collection tables committed the batch and before the document state did.  This process then
replays every batch under the same app id, as Spark does after a crash (its checkpoint has
not committed them): each table must skip what it holds and take what it lacks, so that in
the end every table holds every batch once: the typed mirrors equal the true final data and
each history has exactly one open version per document.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from shardstream.spark.delta.commits import table_rows, transaction_app_id
from shardstream.spark.delta.mirror.check import collections_state
from shardstream.spark.delta.sink import CrashPoint, LakehouseSink
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    table_name,
    table_path,
)
from shardstream.spark.ingest import MirrorLayout
from tests.spark.lakehouse_checks import event_batches, expected_state, merged_events, simulate

SEED, OPERATIONS, BATCH = 11, 240, 60
_WRITER = f"""
import sys
from pathlib import Path
from shardstream.spark.delta.sink import CrashPoint, LakehouseSink
from shardstream.spark.ingest import MirrorLayout
from tests.spark.lakehouse_checks import event_batches, merged_events, simulate
root, point, at = Path(sys.argv[1]), CrashPoint(sys.argv[2]), int(sys.argv[3])
events = merged_events(simulate(seed={SEED}, operations={OPERATIONS}), seed={SEED})
sink = LakehouseSink(root, "app", layout=MirrorLayout.COLLECTIONS, crash_at_for_test=(point, at))
for batch_id, batch in enumerate(event_batches(events, {BATCH})):
    sink.write_batch(batch, batch_id)
"""


@pytest.mark.parametrize(
    "point", [CrashPoint.BETWEEN_COMMITS, CrashPoint.IN_COLLECTIONS, CrashPoint.AFTER_COMMITS]
)
def test_a_killed_batch_replayed_leaves_every_collection_table_complete(
    point: CrashPoint, tmp_path: Path
) -> None:
    result = simulate(seed=SEED, operations=OPERATIONS)
    batches = event_batches(merged_events(result, seed=SEED), BATCH)
    assert len(batches) > 3
    root = tmp_path / "lake"
    run = subprocess.run(
        [sys.executable, "-c", _WRITER, str(root), point.value, "2"],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr[-2000:]
    # Spark replays the batches its checkpoint never committed: here, all of them.
    sink = LakehouseSink(root, "app", layout=MirrorLayout.COLLECTIONS)
    replayed = [sink.write_batch(batch, batch_id) for batch_id, batch in enumerate(batches)]
    assert all(outcome.collections is None for outcome in replayed[:2])  # held before the kill
    assert collections_state(root) == expected_state(result)
    last = len(batches) - 1
    for kind in (MIRROR_DIR, HISTORY_DIR):
        for db, coll in collections_of(root, kind):
            table = DeltaTable(str(table_path(root, kind, db, coll)))
            version = table.transaction_version(
                transaction_app_id("app", table_name(kind, db, coll))
            )
            assert version is not None
            assert version <= last
    for db, coll in collections_of(root, MIRROR_DIR):
        mirror = table_rows(DeltaTable(str(table_path(root, MIRROR_DIR, db, coll))))
        history = table_rows(DeltaTable(str(table_path(root, HISTORY_DIR, db, coll))))
        open_versions = history.filter(pc.is_null(history["__END_AT"]))
        # One open version per document in the mirror, no more (a batch applied twice
        # would open a second one), and each is the mirror's document.
        assert sorted(open_versions["_documentId"].to_pylist()) == sorted(
            mirror["_documentId"].to_pylist()
        )
        by_id = dict(
            zip(mirror["_documentId"].to_pylist(), mirror["_doc"].to_pylist(), strict=True)
        )
        for identity, doc in zip(
            open_versions["_documentId"].to_pylist(), open_versions["_doc"].to_pylist(), strict=True
        ):
            assert by_id[identity] == doc
        # Versions are unique by their start: none was inserted twice.
        starts = history.select(["_documentId", "__START_AT"]).to_pylist()
        assert len({(row["_documentId"], row["__START_AT"]) for row in starts}) == len(starts)
