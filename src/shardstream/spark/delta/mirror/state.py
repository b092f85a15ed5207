"""Sink logic: apply one batch of change events to the mirror's affected rows, with no
Spark and no Delta (unit-tested alone): :mod:`~shardstream.spark.delta.mirror.table` loads
the rows a batch can touch, runs :func:`apply_batch` over them and merges the result.

Events are applied in token (``_id``) order, as a client applies a change stream:

* ``insert`` / ``replace`` set the document (its text is kept as the event wrote it);
* ``update`` applies the oplog's own ``$v:2`` diff (``_oplogUpdate``) to the stored
  document with :func:`~shardstream.transform.update.apply_update.apply_update`, exactly as the
  server did, so field order and BSON types survive (``updateDescription`` cannot replay
  dotted or numeric field names); on the document's BSON in C where that gives the same
  bytes (:mod:`~shardstream.transform.update.apply_update_bson`), with no Python value;
* ``delete`` removes the row; ``drop`` removes the collection's rows, ``dropDatabase``
  the database's, and ``rename`` drops the target's rows and moves the source's;
* every other event (create, createIndexes, invalidate, ...) leaves the rows alone.

Rows are keyed by namespace and the document's ``_id`` (not the whole ``documentKey``):
sharding or resharding a collection changes the shard-key part of ``documentKey`` but
never ``_id``, which is unique per collection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import bson
from bson.errors import InvalidDocument

from shardstream.errors import SinkError
from shardstream.resume_token.token_json import document_bson, loads
from shardstream.spark.delta.mirror.event_columns import (
    event_database,
    event_key,
    event_namespace,
    oplog_diff,
    refuse_fragment,
    rename_target,
    required_text,
)
from shardstream.spark.delta.mirror.keys import Namespace, RowKey
from shardstream.transform.extended_json import event_to_json
from shardstream.transform.raw.extended_json import bson_to_json
from shardstream.transform.update.apply_update import apply_update
from shardstream.transform.update.apply_update_bson import apply_update_bson

Version = tuple[str, RowKey, str, str]
"""(event token, row key, operation, the document after it as canonical Extended JSON)."""

SET_OPERATIONS: Final = frozenset({"insert", "replace"})
NAMESPACE_OPERATIONS: Final = frozenset({"drop", "rename", "dropDatabase"})


@dataclasses.dataclass(slots=True)
class MirrorRow:
    """One document of the mirror, as stored or as a batch left it.

    The document is kept as the last step produced it (text, decoded values or BSON):
    inserts never need decoding, and one updated several times is decoded once.
    """

    db: str
    coll: str
    document_id: str
    document_key: str
    token: str
    cluster_time: Mapping[str, int]
    _text: str | None = None
    _decoded: dict[str, Any] | None = None
    _raw: bytes | None = None  # the document's BSON, where the compiled applier made it

    @property
    def key(self) -> RowKey:
        """The row's identity in the mirror."""
        return (self.db, self.coll, self.document_id)

    def document(self) -> dict[str, Any]:
        """The document as BSON values (types kept: Int64, Decimal128, ...)."""
        if self._decoded is None:
            self._decoded = loads(self.full_document())
        return self._decoded

    def full_document(self) -> str:
        """The document as canonical Extended JSON."""
        if self._text is None:
            raw = self._raw
            self._text = (
                bson_to_json(raw) if raw is not None else _document_json(self._decoded or {})
            )
        return self._text

    def encoded(self) -> bytes | None:
        """The document's BSON as ``bson.encode`` writes its decoded values, or None where
        the Python values alone say it (a batch's Python update made them, or the text
        holds what only the reference reader reads)."""
        if self._raw is None and self._decoded is None:
            self._raw = document_bson(self._text or "{}")
        return self._raw

    def with_document(self, decoded: dict[str, Any]) -> None:
        """Replace the document with decoded values (its text is rebuilt on demand)."""
        self._decoded = decoded
        self._text = None
        self._raw = None

    def with_encoded(self, raw: bytes) -> None:
        """Replace the document with its BSON (its text and values made on demand)."""
        self._raw = raw
        self._text = None
        self._decoded = None


def _document_json(document: dict[str, Any]) -> str:
    """Canonical Extended JSON of a decoded document: through its BSON and the raw writer
    (json_util's text, ~10x faster), or json_util's way for values BSON cannot hold as they
    are (the Symbol, Undefined and DBPointer that ``loads`` keeps distinct)."""
    try:
        raw = bson.encode(document)
    except (InvalidDocument, TypeError, OverflowError):
        return event_to_json(document)
    return bson_to_json(raw)


@dataclasses.dataclass(frozen=True, slots=True)
class BatchNeeds:
    """What must be read from the mirror before a batch can be applied.

    Attributes:
        keys: rows an update reads (their stored document is the diff's base).
        namespaces: whole collections a drop or rename acts on.
        databases: whole databases a dropDatabase acts on.
    """

    keys: frozenset[RowKey]
    namespaces: frozenset[Namespace]
    databases: frozenset[str]


@dataclasses.dataclass(slots=True)
class MirrorChanges:
    """The outcome of a batch: the final row of every key it touched (None: gone).

    ``unknown_updates`` counts updates of documents the mirror never held (only in
    lenient mode; strict mode raises instead).
    """

    rows: dict[RowKey, MirrorRow | None]
    unknown_updates: int = 0


def batch_needs(events: Sequence[Mapping[str, Any]]) -> BatchNeeds:
    """The rows :func:`apply_batch` will read, for one query against the mirror."""
    keys: set[RowKey] = set()
    namespaces: set[Namespace] = set()
    databases: set[str] = set()
    for event in events:
        refuse_fragment(event)
        operation = event["operationType"]
        if operation == "update":
            keys.add(event_key(event))
        elif operation in ("drop", "rename"):
            namespaces.add(event_namespace(event))
            if operation == "rename":
                namespaces.add(rename_target(event))
        elif operation == "dropDatabase":
            databases.add(event_database(event))
    return BatchNeeds(frozenset(keys), frozenset(namespaces), frozenset(databases))


def apply_batch(
    events: Iterable[Mapping[str, Any]],
    stored: Iterable[MirrorRow],
    *,
    strict: bool = True,
    snapshot_read_end: tuple[int, int] | None = None,
    versions: list[Version] | None = None,
) -> MirrorChanges:
    """Apply events (in token order) to the stored rows they need; return what changed.

    Args:
        events: event rows (``rows.EVENT_SCHEMA`` column names), sorted by ``_id``.
        stored: the mirror's rows named by :func:`batch_needs` (others may be included).
        strict: an update of a document the mirror does not hold raises SinkError (the
            stream started after the document was written, or has a gap); lenient mode
            skips it and counts it in ``unknown_updates``.
        snapshot_read_end: (seconds, increment) of the cluster time a snapshot finished
            reading at: an unknown update at or before it is skipped and counted in strict
            mode too (the snapshot read the document after a later delete).
        versions: where to record the document each update leaves, and each document a
            rename moves, as it is then (the history needs every version; an insert's or
            replace's is its event's ``fullDocument``).

    Raises:
        SinkError: a split-event fragment, a malformed row, or (strict) an unknown update.
        TransformError: a diff the server would have rejected.
    """
    current: dict[RowKey, MirrorRow | None] = {row.key: row for row in stored}
    touched: set[RowKey] = set()
    applied_ddl: set[str] = set()
    unknown = 0
    for event in events:
        refuse_fragment(event)
        operation = event["operationType"]
        if operation in SET_OPERATIONS:
            key = event_key(event)
            current[key] = _row_from_event(event, key, required_text(event, "fullDocument"))
            touched.add(key)
        elif operation == "update":
            key = event_key(event)
            base = current.get(key)
            if base is None:
                if strict and not _before_snapshot_end(event, snapshot_read_end):
                    raise SinkError(
                        f"expected the mirror to hold the document an update changes, got "
                        f"none for {key!r} (event {event['_id']}): the stream began after it "
                        "was inserted, or skipped events (shardstream ingest --lenient-mirror "
                        "skips and counts such updates)"
                    )
                unknown += 1
                continue
            updated = _row_from_event(event, key)
            applied = _applied_in_c(base, event)
            if applied is None:
                updated.with_document(apply_update(base.document(), oplog_diff(event)))
            else:
                updated.with_encoded(applied)
            current[key] = updated
            touched.add(key)
            if versions is not None:
                versions.append((event["_id"], key, operation, updated.full_document()))
        elif operation == "delete":
            key = event_key(event)
            current[key] = None
            touched.add(key)
        elif operation in NAMESPACE_OPERATIONS and event["_id"] not in applied_ddl:
            # mongos passes on a DDL event once per shard that saw it, with identical tokens
            # (merger.md); the first copy acts, and a second rename would drop what it moved.
            applied_ddl.add(event["_id"])
            touched |= _apply_namespace_event(event, current, versions)
    return MirrorChanges({key: current[key] for key in touched}, unknown)


def _applied_in_c(base: MirrorRow, event: Mapping[str, Any]) -> bytes | None:
    """The update applied to the stored document's BSON in C, or None: the reference's
    (which also says what is wrong with a diff it refuses)."""
    update = event.get("_oplogUpdate")
    if not isinstance(update, bytes):
        return None
    document = base.encoded()
    return None if document is None else apply_update_bson(document, update)


def _before_snapshot_end(event: Mapping[str, Any], read_end: tuple[int, int] | None) -> bool:
    time = event["clusterTime"]
    return read_end is not None and (time["t"], time["i"]) <= read_end


def _apply_namespace_event(
    event: Mapping[str, Any],
    current: dict[RowKey, MirrorRow | None],
    versions: list[Version] | None,
) -> set[RowKey]:
    operation = event["operationType"]
    if operation == "dropDatabase":
        database = event_database(event)
        gone = [key for key, row in current.items() if row is not None and key[0] == database]
    else:
        gone = _rows_of(current, event_namespace(event))
    moved: list[MirrorRow] = []
    if operation == "rename":
        target = rename_target(event)
        moved = [row for key in gone if (row := current[key]) is not None]
        gone += _rows_of(current, target)
        for row in moved:
            row.db, row.coll = target
            row.token, row.cluster_time = event["_id"], event["clusterTime"]
            if versions is not None:
                versions.append((event["_id"], row.key, operation, row.full_document()))
    for key in gone:
        current[key] = None
    for row in moved:
        current[row.key] = row
    return set(gone) | {row.key for row in moved}


def _rows_of(current: Mapping[RowKey, MirrorRow | None], namespace: Namespace) -> list[RowKey]:
    return [key for key, row in current.items() if row is not None and key[:2] == namespace]


def _row_from_event(event: Mapping[str, Any], key: RowKey, text: str | None = None) -> MirrorRow:
    return MirrorRow(
        db=key[0],
        coll=key[1],
        document_id=key[2],
        document_key=required_text(event, "documentKey"),
        token=event["_id"],
        cluster_time=event["clusterTime"],
        _text=text,
    )
