"""The mirror prepared in worker processes, a part of each batch's documents each.

The oracle is the driver alone: the same batches into a sink without workers must give the
same mirror, row for row, and the same outcomes; a bad batch must raise the driver's error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from shardstream.errors import SinkError
from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.mirror import workers as mirror_workers
from shardstream.spark.delta.mirror.check import mirror_state
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.prepare import EVENT_COLUMNS, MERGE_KEY_ORDER
from shardstream.spark.delta.mirror.table import DeltaMirror
from shardstream.spark.delta.mirror.workers import MirrorWorkers, split_by_document
from shardstream.spark.delta.sink import LakehouseSink
from tests.spark.lakehouse_checks import (
    event_batches,
    event_row,
    expected_state,
    merged_events,
    simulate,
)

_RESULT = simulate(seed=11, operations=400)
_EVENTS = merged_events(_RESULT, seed=11)


def _every_batch(mirror: DeltaMirror) -> DeltaMirror:
    if mirror.workers is not None:
        mirror.workers.min_events = 0  # every batch through the workers, however small
    return mirror


def _sink(root: Path, workers: int) -> LakehouseSink:
    sink = LakehouseSink(root, "app", mirror_workers=workers)
    _every_batch(sink.mirror)
    return sink


def _sorted_mirror(root: Path) -> list[dict[str, object]]:
    table = DeltaMirror(root).read_all().sort_by(MERGE_KEY_ORDER)
    rows: list[dict[str, object]] = table.to_pylist()
    return rows


def test_workers_give_the_drivers_mirror_and_outcomes(tmp_path: Path) -> None:
    batches = event_batches(_EVENTS, 120)
    driver, workers = _sink(tmp_path / "driver", 0), _sink(tmp_path / "workers", 2)
    try:
        for batch_id, batch in enumerate(batches):
            alone = driver.write_batch(batch, batch_id)
            assert workers.mirror.prepare(batch.sort_by("_id")).parts == 2
            split = workers.write_batch(batch, batch_id)
            assert split.mirror == alone.mirror
    finally:
        workers.close()
    assert len(batches) > 4
    assert _sorted_mirror(tmp_path / "workers") == _sorted_mirror(tmp_path / "driver")
    assert mirror_state(DeltaMirror(tmp_path / "workers").read_all()) == expected_state(_RESULT)


def test_a_batch_with_a_namespace_event_is_prepared_whole(tmp_path: Path) -> None:
    first = [
        event_row("insert", ns=("shop", c), _id=n, doc={"_id": n}) for c in "ab" for n in range(9)
    ]
    second = [
        event_row("update", ns=("shop", "a"), _id=1, diff={"u": {"v": 1}}),
        event_row("rename", ns=("shop", "a"), to=("shop", "c")),
        event_row("delete", ns=("shop", "b"), _id=2),
        event_row("drop", ns=("shop", "b")),
        event_row("insert", ns=("shop", "b"), _id=4, doc={"_id": 4}),
    ]
    prepared = []
    for workers in (0, 2):
        mirror = _every_batch(DeltaMirror(tmp_path / f"w{workers}", workers=workers))
        inserts = pa.Table.from_pylist(first)
        commit = BatchCommit(app_id="app", batch_id=0, watermark=inserts["_id"][-1].as_py())
        mirror.write(mirror.prepare(inserts), commit)
        prepared.append(mirror.prepare(pa.Table.from_pylist(second)))
        mirror.close()
    assert [p.parts for p in prepared] == [1, 1]
    assert prepared[0].source.equals(prepared[1].source)
    source = prepared[1].source
    # a's 9 rows gone and c's 9 in; b's 9 gone but _id 4, inserted again after the drop
    assert source.num_rows == 27
    assert sum(source["_delete"].to_pylist()) == 9 + 8


def test_a_bad_event_raises_the_drivers_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [event_row("insert", _id=n, doc={"_id": n, "v": 0}) for n in range(40)]
    rows.append(event_row("update", _id=999, diff={"u": {"v": 1}}))  # never inserted
    rows += [event_row("insert", _id=n, doc={"_id": n}) for n in range(40, 60)]
    rows.append(event_row("update", _id=998, diff={"u": {"v": 1}}))
    events = pa.Table.from_pylist(rows).select(list(EVENT_COLUMNS))
    # The workers' attempt must happen (and fail) before the driver's: count the splits.
    splits = []

    def counted(table: pa.Table, parts: int) -> list[pa.Table] | None:
        found = split_by_document(table, parts)
        splits.append(found is not None)
        return found

    monkeypatch.setattr(mirror_workers, "split_by_document", counted)
    messages = []
    for workers in (0, 2):
        mirror = _every_batch(DeltaMirror(tmp_path / f"w{workers}", workers=workers))
        with pytest.raises(SinkError, match="expected the mirror to hold") as raised:
            mirror.prepare(events)
        mirror.close()
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert "999" in messages[0]  # the first one in token order
    assert splits == [True]


def test_parts_keep_token_order_and_each_document_in_one_part() -> None:
    extra = [event_row("create", ns=("shop", "new")), event_row("createIndexes", ns=("shop", "b"))]
    events = event_batches(_EVENTS, 10_000)[0].select(list(EVENT_COLUMNS))
    batch = pa.concat_tables(
        [events, pa.Table.from_pylist(extra).select(list(EVENT_COLUMNS)).cast(events.schema)]
    ).sort_by("_id")
    parts = split_by_document(batch, 3)
    assert parts is not None
    # Together the parts are the batch, each event once.
    joined = [token for part in parts for token in part["_id"].to_pylist()]
    assert sorted(joined) == batch["_id"].to_pylist()
    seen: dict[tuple[str, str, str], int] = {}
    for index, part in enumerate(parts):
        ids = part["_id"].to_pylist()
        assert ids == sorted(ids)
        for row in part.to_pylist():
            if row["documentKey"] is None:
                assert index == 0  # events without a document go to the first part
            else:
                key = (row["db"], row["coll"], document_id(row["documentKey"]))
                assert seen.setdefault(key, index) == index
    assert len(set(seen.values())) == 3


def test_namespace_events_and_fragments_keep_a_batch_whole() -> None:
    inserts = [event_row("insert", _id=n, doc={"_id": n}) for n in range(5)]
    for odd in (event_row("drop"), event_row("dropDatabase"), event_row("insert", fragment="x")):
        table = pa.Table.from_pylist([*inserts, odd]).select(list(EVENT_COLUMNS))
        assert split_by_document(table, 2) is None


def test_fewer_than_two_workers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected 2 or more mirror worker processes, got 1"):
        MirrorWorkers(tmp_path, 1, strict=True, snapshot_read_end=None)


_DRIVER = """
import os, sys, time
from pathlib import Path
from shardstream.spark.delta.mirror.workers import MirrorWorkers


def pid_after_a_nap():
    time.sleep(1.0)  # both workers busy at once: each task runs in its own
    return os.getpid()


if __name__ == "__main__":
    workers = MirrorWorkers(Path(sys.argv[1]), 2, strict=True, snapshot_read_end=None)
    pool = workers._started()
    naps = [pool.submit(pid_after_a_nap) for _ in range(2)]
    pids = {nap.result() for nap in naps}
    print(" ".join(str(pid) for pid in sorted(pids)), flush=True)
    time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states in /proc")
def test_workers_exit_when_the_driver_is_killed(tmp_path: Path) -> None:
    # A SIGKILLed ingest (the kill tests' crash) must not leave its workers running.
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    with subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as driver:
        assert driver.stdout is not None
        pids = [int(pid) for pid in driver.stdout.readline().split()]
        os.kill(driver.pid, signal.SIGKILL)
    assert len(pids) == 2
    deadline = time.monotonic() + 20
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in pids if _running(pid)] == []


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing
