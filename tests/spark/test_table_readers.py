"""The per-collection tables read as users read them: Polars, DuckDB and deltalake.

One small simulated ingest is written by ``LakehouseSink(layout=MirrorLayout.COLLECTIONS)``;
each reader must see the same rows, typed queries must select what the documents say, and
the history's SCD2 "as of" query must give the state the stream had at that token.  DuckDB
reads through pyarrow datasets (its delta extension would need a download).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset
import pytest
from deltalake import DeltaTable

from shardstream.sim.apply_events import apply_events, encoded_state
from shardstream.spark.delta.mirror.check import collections_state
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    table_path,
)
from shardstream.spark.delta.typed.schema import decode_document
from shardstream.spark.ingest import MirrorLayout
from tests.spark.collection_checks import Namespace, change_feed_documents, id_key, read_rows
from tests.spark.lakehouse_checks import event_batches, expected_state, merged_events, simulate

_RESULT = simulate(seed=7, shards=2, operations=180)
_EVENTS = merged_events(_RESULT, seed=7)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lakehouse")
    sink = LakehouseSink(path, "app", layout=MirrorLayout.COLLECTIONS)
    for batch_id, batch in enumerate(event_batches(_EVENTS, 60)):
        sink.write_batch(batch, batch_id)
    return path


def _paths(root: Path, kind: str) -> Iterator[tuple[Namespace, Path]]:
    for name in collections_of(root, kind):
        yield name, table_path(root, kind, *name)


def _dataset(path: Path) -> pyarrow.dataset.Dataset:
    """The table's pyarrow dataset over its local Parquet files, its partition columns (the
    history's ``_current``) read from their hive-style directories. ``to_pyarrow_dataset()``
    reads through a Python file system from pyarrow's threads, and a process that used it
    aborted at exit one time in eight here (SIGABRT): not in the test process."""
    table = DeltaTable(str(path))
    schema = pa.schema(table.schema().to_arrow())
    columns = table.metadata().partition_columns
    partitioning = (
        pyarrow.dataset.partitioning(pa.schema([schema.field(c) for c in columns]), flavor="hive")
        if columns
        else None
    )
    return pyarrow.dataset.dataset(
        table.file_uris(),
        format="parquet",
        partitioning=partitioning,
        partition_base_dir=str(path),
    )


def _duckdb(name: str, data: Any) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with ``data`` (a pyarrow dataset or table) as table ``name``."""
    connection = duckdb.connect()
    # DuckDB 2.0 pushes a string predicate down to a pyarrow dataset as a string_view
    # literal, which pyarrow cannot compare with a string column (duckdb-python#187): the
    # filters run in DuckDB instead.
    connection.execute("SET disabled_optimizers = 'filter_pushdown'")
    connection.register(name, data)
    return connection


def _sql_rows(query: str, connection: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pa.table(connection.sql(query).to_arrow_table()).to_pylist()
    return rows


@pytest.mark.parametrize("kind", [MIRROR_DIR, HISTORY_DIR])
def test_polars_duckdb_and_deltalake_read_the_same_rows(root: Path, kind: str) -> None:
    """Every collection table reads the same, row for row and value for value, in Polars,
    in DuckDB over its pyarrow dataset and in deltalake; the mirrors' documents are the
    true final data."""
    keys = {MIRROR_DIR: ["_documentId"], HISTORY_DIR: ["_documentId", "__START_AT"]}[kind]
    states: dict[Namespace, dict[bytes, bytes]] = {}
    for name, path in _paths(root, kind):
        through_delta = read_rows(path).sort_by([(key, "ascending") for key in keys]).to_pylist()
        through_polars = pl.read_delta(str(path)).sort(keys).to_dicts()
        connection = _duckdb("collection", _dataset(path))
        order = ", ".join(f'"{key}"' for key in keys)
        through_duckdb = _sql_rows(f"SELECT * FROM collection ORDER BY {order}", connection)
        assert through_delta
        assert through_polars == through_delta, name
        assert through_duckdb == through_delta, name
        if kind == MIRROR_DIR:
            states[name] = {id_key(row["_doc"]): row["_doc"] for row in through_delta}
    if kind == MIRROR_DIR:
        assert states == collections_state(root) == expected_state(_RESULT)


def _documents(root: Path, coll: str) -> list[dict[str, Any]]:
    table = read_rows(table_path(root, MIRROR_DIR, "shop", coll))
    return [decode_document(raw) | {"_documentId": key} for raw, key in _doc_ids(table)]


def _doc_ids(table: pa.Table) -> list[tuple[bytes, str]]:
    return list(zip(table["_doc"].to_pylist(), table["_documentId"].to_pylist(), strict=True))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_queries_on_typed_columns_select_what_the_documents_say(root: Path) -> None:
    """A filter on a numeric column and a nested struct field, and a group-by over a string
    column, give in Polars and DuckDB what the documents (_doc) give."""
    path = table_path(root, MIRROR_DIR, "shop", "orders")
    documents = _documents(root, "orders")
    wanted = {
        d["_documentId"]
        for d in documents
        if _number(d.get("qty")) and d["qty"] > 25 and (d.get("meta") or {}).get("source") == "web"
    }
    frame = pl.read_delta(str(path))
    picked = frame.filter((pl.col("qty") > 25) & (pl.col("meta").struct.field("source") == "web"))
    connection = _duckdb("orders", _dataset(path))
    selected = _sql_rows(
        "SELECT _documentId FROM orders WHERE qty > 25 AND meta.source = 'web'", connection
    )
    assert wanted
    assert set(picked["_documentId"].to_list()) == wanted
    assert {row["_documentId"] for row in selected} == wanted
    totals: dict[str, list[int]] = {}
    for d in documents:
        total = totals.setdefault(d["status"], [0, 0])
        total[0] += 1
        total[1] += d["qty"]
    by_status = _sql_rows(
        "SELECT status, count(*) AS n, sum(qty) AS qty FROM orders GROUP BY status", connection
    )
    assert {row["status"]: [row["n"], row["qty"]] for row in by_status} == totals
    grouped = frame.group_by("status").agg(pl.len().alias("n"), pl.col("qty").sum())
    assert {row["status"]: [row["n"], row["qty"]] for row in grouped.to_dicts()} == totals


def test_the_change_feed_gives_each_documents_latest_state(root: Path) -> None:
    """deltalake's change data feed, replayed in Python or queried in DuckDB for each
    document's latest change, gives the mirror's rows."""
    for name, path in _paths(root, MIRROR_DIR):
        table = read_rows(path)
        rows = {key: raw for raw, key in _doc_ids(table)}
        assert change_feed_documents(path) == rows, name
        feed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=0).read_all())
        connection = _duckdb("feed", feed)
        latest = _sql_rows(
            """
            SELECT _documentId, _doc FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY _documentId
                    ORDER BY _commit_version DESC, _change_type = 'delete'
                ) AS recency
                FROM feed WHERE _change_type <> 'update_preimage'
            ) WHERE recency = 1 AND _change_type <> 'delete'
            """,
            connection,
        )
        assert {row["_documentId"]: row["_doc"] for row in latest} == rows, name


_AS_OF = """
    SELECT _doc FROM history
    WHERE __START_AT <= $token AND (__END_AT IS NULL OR __END_AT > $token)
"""


def _history_as_of(root: Path, token: str) -> dict[Namespace, dict[bytes, bytes]]:
    """Every collection's documents at ``token``, by the SCD2 query in DuckDB."""
    state: dict[Namespace, dict[bytes, bytes]] = {}
    for name, path in _paths(root, HISTORY_DIR):
        connection = _duckdb("history", _dataset(path))
        found = connection.execute(_AS_OF, {"token": token}).fetchall()
        documents = {id_key(raw): raw for (raw,) in found}
        assert len(documents) == len(found), (name, token)  # one version per document
        if documents:
            state[name] = documents
    return state


def _state_at(position: int) -> dict[Any, dict[bytes, bytes]]:
    """The true state after the stream's first ``position`` events."""
    documents = [
        {**event.document, "rawUpdateDescription": event.raw_update} for event in _EVENTS[:position]
    ]
    return encoded_state(apply_events(documents))


def test_history_as_of_a_token_is_the_state_replayed_to_it(root: Path) -> None:
    """The SCD2 query "as of token T" over every history gives the state after the events
    up to T; as of the last token, the mirror."""
    tokens = [event.token.data for event in _EVENTS]
    positions = sorted({1, len(tokens), *range(7, len(tokens), len(tokens) // 9)})
    assert len(positions) > 8
    for position in positions:
        assert _history_as_of(root, tokens[position - 1]) == _state_at(position), position
    assert _history_as_of(root, tokens[-1]) == collections_state(root)
