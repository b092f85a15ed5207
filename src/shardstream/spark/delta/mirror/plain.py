"""Sink: the mirror's rows a batch sets or deletes outright, in Arrow, without a row object.

A document that a batch only inserts, replaces or deletes needs nothing from the mirror: its
final state is its last event's (an insert or replace leaves the event's ``fullDocument``, a
delete leaves no row).  Only documents with an update in the batch need their stored state and
the diff applied in Python (:mod:`shardstream.spark.delta.mirror.state`).  So a batch is split
by document: the plain documents' merge rows are taken straight from their last events'
columns here, the rest go through ``apply_batch``; together they are exactly what
``apply_batch`` gives for the whole batch (``tests/spark/test_mirror_plain.py``).

A batch holding a drop, rename or dropDatabase acts across documents, so it is applied
whole in Python (:func:`split_plain` returns no plain part for it).
"""

from __future__ import annotations

import dataclasses
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from shardstream.errors import SinkError
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.state import NAMESPACE_OPERATIONS, SET_OPERATIONS

_DELETE_OPERATION: Final = "delete"
_KEYED: Final = (*SET_OPERATIONS, _DELETE_OPERATION)
_DOCUMENT_OPERATIONS: Final = frozenset({*_KEYED, "update"})


@dataclasses.dataclass(frozen=True, slots=True)
class PlainSplit:
    """A batch split by document.

    Attributes:
        plain: merge rows (``db``, ``coll``, ``documentKey``, ``fullDocument``, ``_id``,
            ``clusterTime``, ``_documentId``, ``_delete``) of the documents no update touches.
        events: the events ``apply_batch`` must still apply (every other document's, and
            the events that touch no document, which it passes over), in token order.
    """

    plain: pa.Table | None
    events: pa.Table


def applies_whole(events: pa.Table) -> bool:
    """Whether a batch must be applied whole, in Python: a drop, rename or dropDatabase acts
    across documents, and a fragment of a split event is refused there."""
    operations = events["operationType"]
    namespace_events = pc.is_in(operations, pa.array(sorted(NAMESPACE_OPERATIONS)))
    return bool(pc.any(namespace_events).as_py()) or _has_fragment(events)


def document_ids(events: pa.Table) -> list[str | None]:
    """Each event's document ``_id`` (``keys.document_id``); None for an event that
    touches no document.

    Raises:
        SinkError: a document event whose documentKey is not Extended JSON with an ``_id``.
    """
    kinds = events["operationType"].to_pylist()
    ids: list[str | None] = []
    for index, key_text in enumerate(events["documentKey"].to_pylist()):
        if kinds[index] not in _DOCUMENT_OPERATIONS:
            ids.append(None)
        elif not isinstance(key_text, str):
            raise SinkError(
                f"expected column 'documentKey' to be a string in a {kinds[index]!r} event "
                f"({events['_id'][index].as_py()}), got {key_text!r:.100}"
            )
        else:
            ids.append(document_id(key_text))
    return ids


def split_plain(events: pa.Table) -> PlainSplit:
    """Split ``events`` (token order, the mirror's event columns) by document.

    Raises:
        SinkError: a fragment of a split event, or a documentKey that is not Extended JSON
            with an ``_id``.
    """
    if not events.num_rows or applies_whole(events):
        return PlainSplit(None, events)  # whole, in Python (which refuses fragments)
    operations = events["operationType"]
    keyed = pc.is_in(operations, pa.array(_KEYED)).to_pylist()
    kinds = operations.to_pylist()
    dbs, colls = events["db"].to_pylist(), events["coll"].to_pylist()
    ids = document_ids(events)
    updated = {(dbs[i], colls[i], ids[i]) for i, kind in enumerate(kinds) if kind == "update"}
    last: dict[tuple[object, object, str], int] = {}
    python: list[bool] = []
    for index, document in enumerate(ids):
        if document is None or not keyed[index] or dbs[index] is None or colls[index] is None:
            # An update, no document at all, or no namespace (apply_batch reports it).
            python.append(True)
            continue
        key = (dbs[index], colls[index], document)
        in_python = key in updated
        python.append(in_python)
        if not in_python:
            last[key] = index  # token order: the last one wins
    rows = events.take(pa.array(sorted(last.values()), pa.int64()))
    _check_documents(rows)
    deleted = pc.equal(rows["operationType"], _DELETE_OPERATION)
    plain = pa.table(
        {
            "db": rows["db"],
            "coll": rows["coll"],
            "documentKey": pc.if_else(deleted, pa.scalar(None, pa.string()), rows["documentKey"]),
            "fullDocument": pc.if_else(deleted, pa.scalar(None, pa.string()), rows["fullDocument"]),
            "_id": pc.if_else(deleted, pa.scalar(None, pa.string()), rows["_id"]),
            "clusterTime": pc.if_else(
                deleted, pa.scalar(None, rows["clusterTime"].type), rows["clusterTime"]
            ),
            "_documentId": pa.array([ids[i] for i in sorted(last.values())], pa.string()),
            "_delete": deleted,
        }
    )
    return PlainSplit(plain, events.filter(pa.array(python, pa.bool_())))


def _has_fragment(events: pa.Table) -> bool:
    return "_fragment" in events.column_names and events["_fragment"].null_count < events.num_rows


def _check_documents(rows: pa.Table) -> None:
    """An insert or replace must carry its document (``apply_batch`` says the same)."""
    missing = pc.and_(
        pc.is_in(rows["operationType"], pa.array(sorted(SET_OPERATIONS))),
        pc.is_null(rows["fullDocument"]),
    )
    if pc.any(missing).as_py():
        at = pc.index(missing, True).as_py()
        raise SinkError(
            f"expected column 'fullDocument' to be a string in a "
            f"{rows['operationType'][at].as_py()!r} event ({rows['_id'][at].as_py()}), got None"
        )
