"""Checks of the per-collection tables: each derived again from another source.

* typed columns and ``_rescued`` from the row's own ``_doc`` (:func:`typed_mismatches`);
* a history from the change log, replayed version by version (:func:`replayed_history`);
* a mirror from its change data feed (:func:`change_feed_documents`).

Documents are compared as BSON bytes, keyed by the BSON of ``{_id}`` (as
``mirror.check.collections_state`` keys them), so field order and types count.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import bson
import pyarrow as pa
from bson import json_util
from deltalake import DeltaTable

from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.commits import table_rows
from shardstream.spark.delta.typed.column_values import column_value
from shardstream.spark.delta.typed.paths import collections_of, table_path
from shardstream.spark.delta.typed.rows import ID, RESCUED, column_type
from shardstream.spark.delta.typed.schema import decode_document
from shardstream.spark.source.rows import EVENT_SCHEMA
from shardstream.transform.update.apply_update import apply_update
from tests.spark.lakehouse_checks import event_row

Namespace = tuple[str, str]
_CRUD = frozenset({"insert", "replace", "update", "delete"})
_RELAXED = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED)


def read_rows(path: Path) -> pa.Table:
    """A whole Delta table at ``path``, as delta-rs reads it."""
    return table_rows(DeltaTable(str(path)))


def collection_tables(root: Path, kind: str) -> dict[Namespace, pa.Table]:
    """Every collection table of ``kind`` (``mirror`` or ``history``) under ``root``."""
    return {name: read_rows(table_path(root, kind, *name)) for name in collections_of(root, kind)}


def id_key(raw: bytes) -> bytes:
    """The key of a document given as BSON: the BSON of ``{_id: its _id}``."""
    return bson.encode({"_id": decode_document(raw)["_id"]})


def documents_by_id(table: pa.Table) -> dict[bytes, bytes]:
    """A mirror table's ``{id key: _doc}``."""
    return {id_key(raw): raw for raw in table["_doc"].to_pylist()}


def typed_mismatches(table: pa.Table, system: Collection[str]) -> list[str]:
    """Where a row's typed columns or ``_rescued`` differ from its ``_doc`` (empty: nowhere).

    Each column other than the ``system`` ones must hold ``column_value`` of the field's
    relaxed value under the column's stored type, or be null with the value in
    ``_rescued``; every other non-null field must be in ``_rescued``, and ``_rescued`` must
    hold nothing else.
    """
    kinds = {field.name: column_type(field) for field in table.schema if field.name not in system}
    found: list[str] = []
    for row in table.to_pylist():
        document = decode_document(row["_doc"])
        rescued = json.loads(row[RESCUED]) if row[RESCUED] is not None else {}
        where = f"row {document.get(ID)!r}"
        if row[ID] != column_value(document[ID], kinds[ID]):
            found.append(f"{where}: _id column {row[ID]!r}")
        if bson.encode({ID: loads(row["_documentId"])}) != bson.encode({ID: document[ID]}):
            found.append(f"{where}: _documentId {row['_documentId']!r}")
        for name, value in document.items():
            if name == ID or value is None:
                continue
            held = row[name] if name in kinds else None
            if held is not None:
                if held != column_value(value, kinds[name]) or name in rescued:
                    found.append(f"{where}: column {name} {held!r} for {value!r}")
            elif rescued.get(name) != json.loads(json_util.dumps(value, json_options=_RELAXED)):
                found.append(f"{where}: {name}={value!r} neither in its column nor rescued")
        for name in kinds.keys() - document.keys():
            if row[name] is not None:
                found.append(f"{where}: column {name} holds {row[name]!r}, absent from _doc")
        if rescued.keys() - document.keys():
            found.append(f"{where}: _rescued holds {sorted(rescued.keys() - document.keys())}")
    return found


@dataclasses.dataclass(slots=True)
class Version:
    """One version of a document in a history: what started it, its document, its end."""

    op: str
    document: bytes
    end: str | None = None


History = dict[tuple[bytes, str], Version]
"""A collection's versions by (id key, start token)."""


def replayed_history(changelog: pa.Table, updates: Mapping[str, Any]) -> dict[Namespace, History]:
    """Each collection's versions, replaying the change log's CRUD events in token order.

    An insert, replace or update starts a version and ends the document's open one; a
    delete ends it.  Updates' documents are their diffs applied to the version before.

    Args:
        changelog: the ``<root>/changelog`` table.
        updates: each update event's oplog diff (``{"$v": 2, "diff": ...}``) by token; the
            change log's public columns do not hold it.
    """
    histories: dict[Namespace, History] = {}
    opened: dict[tuple[Namespace, bytes], tuple[str, dict[str, Any]]] = {}
    columns = ["_id", "operationType", "db", "coll", "documentKey", "fullDocument"]
    for row in changelog.select(columns).sort_by("_id").to_pylist():
        operation, token = row["operationType"], row["_id"]
        if operation not in _CRUD:
            continue
        namespace = (row["db"], row["coll"])
        versions = histories.setdefault(namespace, {})
        key = bson.encode({"_id": loads(row["documentKey"])["_id"]})
        previous = opened.pop((namespace, key), None)
        if previous is not None:
            versions[(key, previous[0])].end = token
        if operation == "delete":
            continue
        if operation == "update":
            assert previous is not None, f"update {token} of a document never inserted"
            document = apply_update(previous[1], updates[token])
        else:
            document = loads(row["fullDocument"])
        opened[(namespace, key)] = (token, document)
        versions[(key, token)] = Version(operation, bson.encode(document))
    return histories


def stored_history(table: pa.Table) -> History:
    """A history table's versions in :func:`replayed_history`'s shape, after checking that
    its partition column ``_current`` says which versions are open."""
    for row in table.select(["__START_AT", "__END_AT", "_current"]).to_pylist():
        assert row["_current"] is (row["__END_AT"] is None), row
    return {
        (id_key(row["_doc"]), row["__START_AT"]): Version(row["_op"], row["_doc"], row["__END_AT"])
        for row in table.select(["_doc", "__START_AT", "__END_AT", "_op"]).to_pylist()
    }


def change_feed_documents(path: Path) -> dict[str, bytes]:
    """A table's ``{_documentId: _doc}`` rebuilt from its change data feed alone: commit
    by commit, deletes before inserts and post-images (pre-images change nothing)."""
    feed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=0).read_all())
    rows = feed.select(["_commit_version", "_change_type", "_documentId", "_doc"]).to_pylist()
    order = {"delete": 0, "update_preimage": 1, "insert": 2, "update_postimage": 2}
    rows.sort(key=lambda row: (row["_commit_version"], order[row["_change_type"]]))
    documents: dict[str, bytes] = {}
    for row in rows:
        change, identity = row["_change_type"], row["_documentId"]
        if change == "delete":
            assert identity in documents, f"{path}: delete of {identity} never inserted"
            del documents[identity]
        elif change == "insert":
            assert identity not in documents, f"{path}: second insert of {identity}"
            documents[identity] = row["_doc"]
        elif change == "update_postimage":
            assert identity in documents, f"{path}: update of {identity} never inserted"
            documents[identity] = row["_doc"]
    return documents


def driver_collection_tables(root: Path, batches: list[pa.Table]) -> dict[str, pa.Table]:
    """The collection tables the driver's sink writes from ``batches`` under ``root`` (the
    oracle of the tables Spark's tasks write), as ``check.collection_tables`` reads them."""
    from shardstream.spark.delta.mirror.check import collection_tables as every_table
    from shardstream.spark.delta.sink import LakehouseSink
    from shardstream.spark.ingest import MirrorLayout

    sink = LakehouseSink(root, "driver", layout=MirrorLayout.COLLECTIONS)
    for batch_id, batch in enumerate(batches):
        sink.write_batch(batch, batch_id)
    return every_table(root)


def assert_same_tables(found: Mapping[str, pa.Table], expected: Mapping[str, pa.Table]) -> None:
    """The same tables, schemas and rows (each in ``collection_tables``' order)."""
    assert found.keys() == expected.keys()
    for name, table in expected.items():
        assert found[name].schema == table.schema, name
        assert found[name].equals(table), name


# DDL streams, built row by row.


def ddl_rows() -> dict[str, Any]:
    """Documents in five collections of two databases, then a drop, a rename onto an
    existing collection, a dropDatabase and a document inserted again after it."""
    rows: dict[str, Any] = {}
    rows["orders"] = [
        event_row("insert", ns=("shop", "orders"), _id=n, doc={"_id": n, "qty": n})
        for n in (1, 2, 3)
    ]
    rows["a"] = [
        event_row("insert", ns=("shop", "a"), _id=n, doc={"_id": n, "name": f"a{n}"})
        for n in (1, 2)
    ]
    rows["b"] = [event_row("insert", ns=("shop", "b"), _id=9, doc={"_id": 9, "name": 9})]
    rows["crm"] = [
        event_row("insert", ns=("crm", c), _id=1, doc={"_id": 1, "in": c}) for c in ("x", "y")
    ]
    rows["update"] = event_row("update", ns=("shop", "a"), _id=1, diff={"u": {"name": "a1+"}})
    rows["drop"] = event_row("drop", ns=("shop", "orders"))
    rows["rename"] = event_row("rename", ns=("shop", "a"), to=("shop", "b"))
    rows["dropDatabase"] = event_row("dropDatabase", ns=("crm", None))
    rows["again"] = event_row("insert", ns=("crm", "x"), _id=1, doc={"_id": 1, "in": "x+"})
    return rows


def ddl_stream(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows in token order, the drop twice (mongos passes it on once per shard)."""
    return [
        *rows["orders"],
        *rows["a"],
        *rows["b"],
        *rows["crm"],
        rows["update"],
        rows["drop"],
        dict(rows["drop"]),
        rows["rename"],
        rows["dropDatabase"],
        rows["again"],
    ]


def token_batches(stream: list[dict[str, Any]], tokens_per_batch: int) -> list[pa.Table]:
    """The rows cut every ``tokens_per_batch`` distinct tokens (copies stay together)."""
    groups: list[list[dict[str, Any]]] = []
    for row in stream:
        if groups and row["_id"] == groups[-1][-1]["_id"]:
            groups[-1].append(row)
        else:
            groups.append([row])
    return [
        pa.Table.from_pylist(
            [row for group in groups[start : start + tokens_per_batch] for row in group],
            schema=EVENT_SCHEMA,
        )
        for start in range(0, len(groups), tokens_per_batch)
    ]
