"""Checks: compare the lakehouse tables with what the stream should have produced.

The demo and the tests compare a mirror with a simulated cluster's true final data as
BSON bytes (field order and types count), in the shape of
:func:`shardstream.sim.apply_events.encoded_state`, and a change log with the tokens of
the merged stream (every event exactly once).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import bson
import pyarrow as pa

from shardstream.errors import SinkError
from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.changelog.table import CHANGELOG_SCHEMA, CHANGELOG_TABLE
from shardstream.spark.delta.commits import open_table, table_rows
from shardstream.spark.delta.mirror.prepare import MIRROR_SCHEMA
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    state_table,
    table_name,
    table_path,
)
from shardstream.spark.delta.typed.schema import decode_document


def read_table(root: str | Path, name: str) -> pa.Table:
    """A whole lakehouse table (``changelog`` or ``mirror``); empty when it does not exist.

    ``mirror`` is the documents' state in either layout: the one-table mirror, or the
    per-collection layout's ``_mirror_state`` (the same rows).
    """
    if name != CHANGELOG_TABLE:
        name = state_table(root)
    table = open_table(Path(root) / name)
    schema = CHANGELOG_SCHEMA if name == CHANGELOG_TABLE else MIRROR_SCHEMA
    if table is None:
        return schema.empty_table()
    # The bucketed mirror's partition column is not a document's: the rows are the same.
    return table_rows(table, schema.names).cast(schema)


def mirror_state(mirror: pa.Table) -> dict[tuple[str, str], dict[bytes, bytes]]:
    """The mirror as ``{(db, coll): {BSON of {_id}: BSON of the document}}``.

    Raises:
        SinkError: two rows hold the same document.
    """
    state: dict[tuple[str, str], dict[bytes, bytes]] = {}
    for row in mirror.select(["db", "coll", "documentKey", "fullDocument"]).to_pylist():
        key = bson.encode({"_id": loads(row["documentKey"])["_id"]})
        documents = state.setdefault((row["db"], row["coll"]), {})
        if key in documents:
            raise SinkError(f"expected one mirror row per document, got two for {row!r:.200}")
        documents[key] = bson.encode(loads(row["fullDocument"]))
    return state


def collections_state(root: str | Path) -> dict[tuple[str, str], dict[bytes, bytes]]:
    """Every per-collection mirror under ``root`` in :func:`mirror_state`'s shape, from
    each row's ``_doc`` (empty tables left out, as a dropped collection has no documents)."""
    state: dict[tuple[str, str], dict[bytes, bytes]] = {}
    for db, coll in collections_of(root, MIRROR_DIR):
        table = open_table(table_path(root, MIRROR_DIR, db, coll))
        assert table is not None
        documents: dict[bytes, bytes] = {}
        for raw in table_rows(table, ["_doc"])["_doc"].to_pylist():
            key = bson.encode({"_id": decode_document(raw)["_id"]})
            if key in documents:
                raise SinkError(f"expected one mirror row per document in {db}.{coll}, got two")
            documents[key] = raw
        if documents:
            state[(db, coll)] = documents
    return state


def collection_tables(root: str | Path) -> dict[str, pa.Table]:
    """Every per-collection table under ``root`` (``mirror/<db>/<coll>``, ``history/...``),
    its columns in name order and its rows in key order: two ingests of one stream compare
    equal whatever their batches (a column added later comes last in a table's schema)."""
    tables: dict[str, pa.Table] = {}
    for kind, keys in ((MIRROR_DIR, ["_documentId"]), (HISTORY_DIR, ["_documentId", "__START_AT"])):
        for db, coll in collections_of(root, kind):
            table = open_table(table_path(root, kind, db, coll))
            assert table is not None
            rows = table_rows(table)
            rows = rows.select(sorted(rows.column_names))
            tables[table_name(kind, db, coll)] = rows.sort_by([(k, "ascending") for k in keys])
    return tables


def changelog_difference(changelog: pa.Table, expected: Sequence[str]) -> dict[str, int]:
    """How a change log's tokens differ from the expected stream's (empty dict: equal).

    Returns:
        The non-zero counts among ``missing`` and ``unexpected`` tokens and
        ``duplicates`` (rows beyond the first per token).
    """
    tokens: list[str] = changelog["_id"].to_pylist()
    present = set(tokens)
    wanted = set(expected)
    difference = {
        "missing": len(wanted - present),
        "unexpected": len(present - wanted),
        "duplicates": len(tokens) - len(present),
    }
    return {name: count for name, count in difference.items() if count}
