"""The per-collection tables (typed mirrors and SCD2 histories) through delta-rs, no Spark.

Random simulated workloads, cut into batches at random, are written by a
``LakehouseSink(layout=MirrorLayout.COLLECTIONS)`` and every table is checked against an
oracle of its own: the simulator's true final data, each row's ``_doc`` projected again, the
change log replayed, and the tables' change data feed replayed.  Hand-built DDL streams
(drop, rename, dropDatabase) check how a collection's tables end.
"""

from __future__ import annotations

import random
import tempfile
from itertools import cycle
from pathlib import Path
from typing import Any

import bson
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardstream.spark.delta.mirror.check import collections_state
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.delta.typed.column_types import JSON_COLUMN
from shardstream.spark.delta.typed.history import HISTORY_KIND
from shardstream.spark.delta.typed.mirror import MIRROR_KIND
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    STATE_TABLE,
    collections_of,
    table_path,
)
from shardstream.spark.delta.typed.rows import ID, column_type
from shardstream.spark.ingest import MirrorLayout
from shardstream.spark.source.rows import EVENT_SCHEMA
from shardstream.transform import ChangeEvent
from tests.spark.collection_checks import (
    Namespace,
    Version,
    change_feed_documents,
    collection_tables,
    ddl_rows,
    ddl_stream,
    documents_by_id,
    read_rows,
    replayed_history,
    stored_history,
    token_batches,
    typed_mismatches,
)
from tests.spark.lakehouse_checks import (
    event_batches,
    event_row,
    expected_state,
    merged_events,
    simulate,
)

_SYSTEM = {
    MIRROR_DIR: frozenset(MIRROR_KIND.reserved),
    HISTORY_DIR: frozenset(HISTORY_KIND.reserved),
}


def _sink(root: Path, app: str = "app") -> LakehouseSink:
    return LakehouseSink(root, app, layout=MirrorLayout.COLLECTIONS)


def _cut(events: list[ChangeEvent], sizes: list[int]) -> list[pa.Table]:
    """The events cut into batches whose sizes cycle through ``sizes``."""
    batches: list[pa.Table] = []
    start, size = 0, cycle(sizes)
    while start < len(events):
        batch = events[start : start + next(size)]
        batches += event_batches(batch, len(batch))
        start += len(batch)
    return batches


def _write(root: Path, batches: list[pa.Table]) -> None:
    sink = _sink(root)
    for batch_id, batch in enumerate(batches):
        sink.write_batch(batch, batch_id)


def _table_versions(root: Path) -> dict[str, int]:
    """Every table's Delta version, by its path below ``root``."""
    paths = [root / "changelog", root / STATE_TABLE]
    for kind in (MIRROR_DIR, HISTORY_DIR):
        paths += [table_path(root, kind, *name) for name in collections_of(root, kind)]
    return {str(path.relative_to(root)): DeltaTable(str(path)).version() for path in paths}


def _check_tables(root: Path, events: list[ChangeEvent], truth: dict[Any, Any]) -> None:
    mirrors = collection_tables(root, MIRROR_DIR)
    histories = collection_tables(root, HISTORY_DIR)
    # (a) The mirrors' documents are the true final data.
    assert collections_state(root) == truth
    # (b) Typed columns and _rescued say what _doc says.
    for kind, tables in ((MIRROR_DIR, mirrors), (HISTORY_DIR, histories)):
        for name, table in tables.items():
            assert typed_mismatches(table, _SYSTEM[kind]) == [], (kind, name)
    # (c) Each history is the change log replayed, and its open versions are the mirror.
    updates = {e.token.data: e.raw_update for e in events if e.operation_type == "update"}
    replayed = replayed_history(read_rows(root / "changelog"), updates)
    assert set(histories) == set(replayed)
    for name, table in histories.items():
        stored = stored_history(table)
        assert len(stored) == table.num_rows  # one version per (document, start token)
        assert stored == replayed[name], name
        current = {key: v.document for (key, _), v in stored.items() if v.end is None}
        assert current == documents_by_id(mirrors[name]), name
    # (d) Each mirror's change data feed, replayed, gives its rows.
    for name, table in mirrors.items():
        rows = dict(zip(table["_documentId"].to_pylist(), table["_doc"].to_pylist(), strict=True))
        assert change_feed_documents(table_path(root, MIRROR_DIR, *name)) == rows, name


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    seed=st.integers(0, 2**20),
    shards=st.integers(2, 3),
    operations=st.integers(150, 250),
    # A batch costs a MERGE per touched table: from 30 events a batch, four runs ~30 s.
    sizes=st.lists(st.integers(30, 150), min_size=1, max_size=5),
)
def test_random_workloads_give_true_typed_tables_and_histories(
    seed: int, shards: int, operations: int, sizes: list[int]
) -> None:
    """Mirrors hold the true data, typed as their _doc; histories replay the change log;
    the mirrors' change feed replays to their rows; whatever the workload and batch cuts."""
    result = simulate(seed=seed, shards=shards, operations=operations)
    events = merged_events(result, seed=seed)
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        _write(root, _cut(events, sizes))
        _check_tables(root, events, expected_state(result))


_RESULT = simulate(seed=21, shards=3, operations=200)
_EVENTS = merged_events(_RESULT, seed=21)


def _sorted_tables(root: Path) -> dict[tuple[str, Namespace], pa.Table]:
    keys = {MIRROR_DIR: ["_documentId"], HISTORY_DIR: ["_documentId", "__START_AT"]}
    return {
        (kind, name): table.sort_by([(key, "ascending") for key in keys[kind]])
        for kind in (MIRROR_DIR, HISTORY_DIR)
        for name, table in collection_tables(root, kind).items()
    }


def test_per_shard_row_order_gives_the_same_tables(tmp_path: Path) -> None:
    """Rows arriving shard by shard, in any order within a batch, give the tables the merged
    order gives: same schemas (column types) and same rows."""
    batches = event_batches(_EVENTS, 70)
    shuffle = random.Random(21)
    shuffled = []
    for batch in batches:
        order = list(range(batch.num_rows))
        shuffle.shuffle(order)
        shuffled.append(batch.take(order))
    _write(tmp_path / "merged", batches)
    _write(tmp_path / "shuffled", shuffled)
    merged, scattered = _sorted_tables(tmp_path / "merged"), _sorted_tables(tmp_path / "shuffled")
    assert len(merged) == 2 * len(_RESULT.final_state)
    assert merged.keys() == scattered.keys()
    for name, table in merged.items():
        assert scattered[name].schema == table.schema, name
        assert scattered[name].to_pylist() == table.to_pylist(), name


def test_a_replayed_batch_leaves_every_collection_table_unchanged(tmp_path: Path) -> None:
    """A batch replayed after a restart (same id) commits nothing to any table."""
    batches = event_batches(_EVENTS, 80)
    _write(tmp_path, batches[:3])
    versions = _table_versions(tmp_path)
    replay = _sink(tmp_path).write_batch(batches[2], 2)
    assert replay.collections is None
    assert _table_versions(tmp_path) == versions
    restarted = _sink(tmp_path)
    for batch_id, batch in enumerate(batches[3:], start=3):
        restarted.write_batch(batch, batch_id)
    _check_tables(tmp_path, _EVENTS, expected_state(_RESULT))


class _Crash(Exception):
    """The process dies here."""


def test_a_crash_before_the_state_commits_replays_into_the_state_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Collection tables written but the state not (a crash between): the replayed batch
    is skipped by every collection table and applied to the state once."""
    batches = event_batches(_EVENTS, 80)
    _write(tmp_path, batches[:2])
    crashing = _sink(tmp_path)

    def crash(*args: object) -> None:
        raise _Crash  # stands for the SIGKILL: nothing after it runs

    monkeypatch.setattr(crashing.mirror, "write", crash)
    with pytest.raises(_Crash):
        crashing.write_batch(batches[2], 2)
    monkeypatch.undo()
    versions = _table_versions(tmp_path)
    replay = _sink(tmp_path).write_batch(batches[2], 2)
    assert replay.collections is not None
    written = [*replay.collections.mirrors.values(), *replay.collections.history.values()]
    assert written
    assert all(count is None for count in written)  # each table already had the batch
    after = _table_versions(tmp_path)
    assert after.pop(STATE_TABLE) == versions.pop(STATE_TABLE) + 1
    assert after == versions
    restarted = _sink(tmp_path)
    for batch_id, batch in enumerate(batches[3:], start=3):
        restarted.write_batch(batch, batch_id)
    _check_tables(tmp_path, _EVENTS, expected_state(_RESULT))


def test_a_new_app_replaying_what_the_collection_tables_hold_adds_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crash above with the checkpoint lost too: a new app (new batch ids) restarts at
    the state's lower watermark and cuts the batches elsewhere; each collection table
    drops what its own watermark holds (no history version twice, no row written back)."""
    batches = event_batches(_EVENTS, 80)
    _write(tmp_path, batches[:2])
    crashing = _sink(tmp_path)

    def crash(*args: object) -> None:
        raise _Crash

    monkeypatch.setattr(crashing.mirror, "write", crash)
    with pytest.raises(_Crash):
        crashing.write_batch(batches[2], 2)
    monkeypatch.undo()
    restarted = _sink(tmp_path, "new-app")
    for batch_id, batch in enumerate(event_batches(_EVENTS[160:], 50)):
        restarted.write_batch(batch, batch_id)
    _check_tables(tmp_path, _EVENTS, expected_state(_RESULT))


# DDL streams (collection_checks.ddl_rows).


def _versions(root: Path, db: str, coll: str) -> set[tuple[Any, str, str, str | None]]:
    table = read_rows(table_path(root, HISTORY_DIR, db, coll))
    return {
        (row[ID], row["_op"], row["__START_AT"], row["__END_AT"])
        for row in table.select([ID, "_op", "__START_AT", "__END_AT"]).to_pylist()
    }


@pytest.mark.parametrize("tokens_per_batch", [1, 4, 100])
def test_drop_rename_and_drop_database_end_the_collections(
    tmp_path: Path, tokens_per_batch: int
) -> None:
    """A drop empties the collection's mirror (kept) and ends every open version at its
    token; a rename moves the documents to the target's mirror, ends the versions on both
    sides and starts the moved ones with _op rename; a dropDatabase ends each of its
    collections, and a document inserted after it starts anew.  The same whether the DDL
    shares a batch with the writes or not."""
    rows = ddl_rows()
    _write(tmp_path, token_batches(ddl_stream(rows), tokens_per_batch))
    drop, rename = rows["drop"]["_id"], rows["rename"]["_id"]
    drop_database = rows["dropDatabase"]["_id"]
    token = {name: [row["_id"] for row in rows[name]] for name in ("orders", "a", "b", "crm")}
    update = rows["update"]["_id"]
    renamed = {"_id": 1, "name": "a1+"}, {"_id": 2, "name": "a2"}
    again = {"_id": 1, "in": "x+"}
    assert collections_state(tmp_path) == {
        ("shop", "b"): {bson.encode({"_id": d["_id"]}): bson.encode(d) for d in renamed},
        ("crm", "x"): {bson.encode({"_id": 1}): bson.encode(again)},
    }
    mirrors = collection_tables(tmp_path, MIRROR_DIR)
    assert set(mirrors) == {("shop", c) for c in ("orders", "a", "b")} | {
        ("crm", "x"),
        ("crm", "y"),
    }
    held = {("shop", "b"): 2, ("crm", "x"): 1}
    assert {name: table.num_rows for name, table in mirrors.items()} == {
        name: held.get(name, 0) for name in mirrors
    }
    assert _versions(tmp_path, "shop", "orders") == {
        (n, "insert", t, drop) for n, t in zip((1, 2, 3), token["orders"], strict=True)
    }
    assert _versions(tmp_path, "shop", "a") == {
        (1, "insert", token["a"][0], update),
        (1, "update", update, rename),
        (2, "insert", token["a"][1], rename),
    }
    assert _versions(tmp_path, "shop", "b") == {
        (9, "insert", token["b"][0], rename),
        (1, "rename", rename, None),
        (2, "rename", rename, None),
    }
    assert _versions(tmp_path, "crm", "x") == {
        (1, "insert", token["crm"][0], drop_database),
        (1, "insert", rows["again"]["_id"], None),
    }
    assert _versions(tmp_path, "crm", "y") == {(1, "insert", token["crm"][1], drop_database)}
    history_b = read_rows(table_path(tmp_path, HISTORY_DIR, "shop", "b"))
    open_docs = {
        bson.decode(row["_doc"])["_id"]: row["_doc"]
        for row in history_b.to_pylist()
        if row["__END_AT"] is None
    }
    assert open_docs == {d["_id"]: bson.encode(d) for d in renamed}
    for name in mirrors:  # each mirror's change feed still replays to its rows
        assert change_feed_documents(table_path(tmp_path, MIRROR_DIR, *name)) == {
            row["_documentId"]: row["_doc"] for row in mirrors[name].to_pylist()
        }


def test_widened_columns_are_projected_again_from_doc(tmp_path: Path) -> None:
    """A column whose type widens (int32 -> int64 -> double, a struct gaining a field, a
    mixed _id turning to JSON text) is rewritten: every row, old ones too, holds its _doc's
    value under the new type; a value no widening covers is rescued; the change feed and the
    history still replay."""
    documents: list[dict[str, Any]] = [
        {"_id": 1, "n": 1, "s": {"a": 1}},
        {"_id": 2, "n": 2**40, "s": {"b": "x"}},
        {"_id": 3, "n": 1.5, "s": {"a": 2, "b": "y"}},
        {"_id": "four", "n": "text", "s": {"a": 3}},
    ]
    rows = [event_row("insert", _id=d["_id"], doc=d) for d in documents]
    _write(tmp_path, [pa.Table.from_pylist([row], schema=EVENT_SCHEMA) for row in rows])
    for kind in (MIRROR_DIR, HISTORY_DIR):
        table = read_rows(table_path(tmp_path, kind, "shop", "orders"))
        assert table.num_rows == len(documents)
        types = {name: column_type(table.schema.field(name)) for name in (ID, "n", "s")}
        assert types == {
            ID: JSON_COLUMN,
            "n": pa.float64(),
            "s": pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())]),
        }
        assert typed_mismatches(table, _SYSTEM[kind]) == []
        rescued = {row[ID]: row["_rescued"] for row in table.to_pylist()}
        assert [name for name, text in rescued.items() if text is not None] == ['"four"']
    expected = {bson.encode({"_id": d["_id"]}): bson.encode(d) for d in documents}
    assert collections_state(tmp_path) == {("shop", "orders"): expected}
    mirror = read_rows(table_path(tmp_path, MIRROR_DIR, "shop", "orders"))
    assert change_feed_documents(table_path(tmp_path, MIRROR_DIR, "shop", "orders")) == dict(
        zip(mirror["_documentId"].to_pylist(), mirror["_doc"].to_pylist(), strict=True)
    )


def test_replayed_history_follows_deletes_and_updates() -> None:
    """The oracle itself: versions chain, a delete ends one and starts none, an update's
    document is its diff applied to the version before."""
    rows = [
        event_row("insert", _id=1, doc={"_id": 1, "v": 0}),
        event_row("update", _id=1, diff={"u": {"v": 1}}),
        event_row("delete", _id=1),
        event_row("insert", _id=1, doc={"_id": 1, "v": 2}),
    ]
    changelog = pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)
    tokens = [row["_id"] for row in rows]
    replayed = replayed_history(changelog, {tokens[1]: {"$v": 2, "diff": {"u": {"v": 1}}}})
    key = bson.encode({"_id": 1})
    assert replayed == {
        ("shop", "orders"): {
            (key, tokens[0]): Version("insert", bson.encode({"_id": 1, "v": 0}), tokens[1]),
            (key, tokens[1]): Version("update", bson.encode({"_id": 1, "v": 1}), tokens[2]),
            (key, tokens[3]): Version("insert", bson.encode({"_id": 1, "v": 2}), None),
        }
    }
