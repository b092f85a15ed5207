"""One batch into every collection's typed mirror and history (the per-collection layout).

The document state is kept as the one-table mirror's rows (``<root>/_mirror_state``, see
:mod:`shardstream.spark.delta.mirror.table`): it prepares the batch, which says each touched
document's final state and the version each update left (``PreparedBatch.versions``).  This
module turns that into the collections' tables: per namespace, the typed mirror's final rows
(:mod:`~shardstream.spark.delta.typed.mirror`) and the history's changes in stream order
(:mod:`~shardstream.spark.delta.typed.history`), the columns typed from every version.

They are written before the state commits the batch: a crash in between replays the batch,
which prepares the same way (the state has not moved), and each table that already has it
skips it by its own markers.  Merged and per-shard reads give the same tables: a batch is
applied in token order whatever the order its rows arrive in, and no column's type depends
on where a batch was cut (the one exception: an empty document or array in a field whose
type is not known yet stays in ``_rescued``).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.prepare import DELETE, PreparedBatch
from shardstream.spark.delta.mirror.state import SET_OPERATIONS, Namespace
from shardstream.spark.delta.typed.history import Change, write_history
from shardstream.spark.delta.typed.mirror import FinalRow, write_mirror
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    full_name,
    table_name,
    table_path,
)
from shardstream.spark.delta.typed.schema import BatchTyping

_EVENT_COLUMNS = ("_id", "operationType", "clusterTime", "db", "coll", "documentKey")


@dataclasses.dataclass(frozen=True, slots=True)
class CollectionWrites:
    """What a batch wrote into the collections' tables.

    Attributes:
        mirrors: rows merged per namespace (None: that table already had the batch).
        history: versions inserted per namespace (None: already had the batch).
    """

    mirrors: Mapping[Namespace, int | None]
    history: Mapping[Namespace, int | None]


class _Documents:
    """Canonical Extended JSON texts decoded once each per batch."""

    def __init__(self) -> None:
        self._decoded: dict[str, dict[str, Any]] = {}

    def __call__(self, text: str) -> dict[str, Any]:
        found = self._decoded.get(text)
        if found is None:
            found = self._decoded[text] = loads(text)
        return found


def write_collections(
    root: Path,
    fresh: pa.Table,
    prepared: PreparedBatch,
    commit: BatchCommit,
    *,
    history: bool,
    max_columns: int,
) -> CollectionWrites:
    """Write ``prepared`` (the state's preparation of ``fresh``) into the collection tables."""
    documents = _Documents()
    changes = collection_changes(root, fresh, prepared.versions, documents)
    finals = _final_rows(prepared.source, documents)
    mirrors: dict[Namespace, int | None] = {}
    written: dict[Namespace, int | None] = {}
    for namespace in sorted({*finals, *changes}):
        db, coll = namespace
        # The history first: the mirror's rows are some of its versions, typed once.
        typing = BatchTyping()
        if history and namespace in changes:
            written[namespace] = write_history(
                table_path(root, HISTORY_DIR, db, coll),
                table_name(HISTORY_DIR, db, coll),
                changes[namespace],
                commit,
                max_columns,
                title=full_name(db, coll),
                typing=typing,
            )
        if namespace in finals:
            versions = [c.document for c in changes.get(namespace, ()) if c.document is not None]
            mirrors[namespace] = write_mirror(
                table_path(root, MIRROR_DIR, db, coll),
                table_name(MIRROR_DIR, db, coll),
                finals[namespace],
                versions,
                commit,
                max_columns,
                title=full_name(db, coll),
                typing=typing,
            )
    return CollectionWrites(mirrors, written)


def collection_changes(
    root: Path,
    fresh: pa.Table,
    versions: pa.Table | None,
    documents: Callable[[str], dict[str, Any]],
) -> dict[Namespace, list[Change]]:
    """Each namespace's changes in stream order: document versions and collection ends."""
    recorded: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in versions.to_pylist() if versions is not None else ():
        recorded[row["_id"]].append(row)
    changes: dict[Namespace, list[Change]] = defaultdict(list)
    seen_ddl: set[str] = set()
    texts = fresh["fullDocument"].to_pylist()
    targets = fresh["to"].to_pylist()
    for index, event in enumerate(fresh.select(list(_EVENT_COLUMNS)).to_pylist()):
        operation, token, time = event["operationType"], event["_id"], event["clusterTime"]
        namespace = (event["db"], event["coll"])
        if operation in SET_OPERATIONS or operation == "delete":
            text = texts[index] if operation != "delete" else None
            changes[namespace].append(
                Change(
                    token,
                    operation,
                    document_id(event["documentKey"]),
                    documents(text) if text is not None else None,
                    time,
                )
            )
        elif operation == "update":
            for row in recorded.get(token, ()):  # none: an update of an unknown document
                changes[(row["db"], row["coll"])].append(
                    Change(
                        token, operation, row["_documentId"], documents(row["fullDocument"]), time
                    )
                )
        elif operation in ("drop", "rename", "dropDatabase") and token not in seen_ddl:
            seen_ddl.add(token)  # mongos passes on a DDL event once per shard that saw it
            ended = _ended(root, operation, namespace, targets[index], changes)
            for name in ended:
                changes[name].append(Change(token, operation, None, None, time))
            for row in recorded.get(token, ()):  # the documents a rename moved
                changes[(row["db"], row["coll"])].append(
                    Change(
                        token, operation, row["_documentId"], documents(row["fullDocument"]), time
                    )
                )
    return dict(changes)


def _ended(
    root: Path,
    operation: str,
    namespace: Namespace,
    target: str | None,
    changes: Mapping[Namespace, Any],
) -> list[Namespace]:
    """The collections a drop, rename or dropDatabase ends."""
    if operation == "drop":
        return [namespace]
    if operation == "rename":
        to = loads(target or "{}")
        return [namespace, (str(to.get("db")), str(to.get("coll")))]
    db = namespace[0]
    known: set[Namespace] = {name for name in changes if name[0] == db}
    for kind in (MIRROR_DIR, HISTORY_DIR):
        known.update(collections_of(root, kind, db))
    return sorted(known)


def _final_rows(
    source: pa.Table, documents: Callable[[str], dict[str, Any]]
) -> dict[Namespace, list[FinalRow]]:
    finals: dict[Namespace, list[FinalRow]] = defaultdict(list)
    columns = ("db", "coll", "_documentId", "fullDocument", "_id", "clusterTime", DELETE)
    for row in source.select(list(columns)).to_pylist():
        text = None if row[DELETE] else row["fullDocument"]
        finals[(row["db"], row["coll"])].append(
            FinalRow(
                row["_documentId"],
                documents(text) if text is not None else None,
                row["_id"] or "",
                row["clusterTime"],
            )
        )
    return dict(finals)


def namespaces_with_tables(root: Path, kinds: Iterable[str] = (MIRROR_DIR,)) -> list[Namespace]:
    """Every namespace that has a table of one of ``kinds`` under ``root``."""
    return sorted({name for kind in kinds for name in collections_of(root, kind)})
