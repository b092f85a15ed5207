"""The rows a batch's state tasks hand its collection tasks (the per-collection layout
written by Spark's tasks).

A batch runs in two rounds of tasks.  The state's tasks hold buckets of documents
(``hash(_id) mod B``: every event of one document in one task, whatever its collection);
each applies its buckets' events and says, per collection, the steps the history needs
(:func:`~shardstream.spark.delta.typed.changes.change_steps`) and the documents' final
state.  Spark shuffles those rows by collection (:data:`ROUTE`), so one task holds all of a
collection's rows and types its columns from every version, as the in-driver sink does.
A row with an empty route carries a state task's message for the driver's commit instead.

A collection end (a drop, rename or dropDatabase) is given to every state task; each says
it for the collections it knows, and the collection's task keeps one of each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from shardstream.spark.delta.mirror.bucketed.bucket_writer import AppliedBucket
from shardstream.spark.delta.mirror.keys import Namespace
from shardstream.spark.delta.mirror.prepare import DELETE
from shardstream.spark.delta.typed.batch import CollectionShare
from shardstream.spark.delta.typed.changes import ChangeStep, change_steps
from shardstream.spark.delta.typed.history import Change
from shardstream.spark.delta.typed.mirror import FinalRow
from shardstream.spark.source.rows import CLUSTER_TIME_TYPE

ROUTE: Final = "_route"
_SEPARATOR: Final = "\0"  # between a route's db and coll: no name holds a NUL
# A row's kind, in the order a collection's rows of one token are taken: a collection's end
# before the documents a rename moved into it.
END, CHANGE, FINAL, MESSAGE = 0, 1, 2, 3
CHANGE_ROWS_SCHEMA: Final = pa.schema(
    [
        pa.field(ROUTE, pa.string()),  # "<db>\0<coll>" (no name holds a NUL); "": a message
        pa.field("token", pa.string()),
        pa.field("kind", pa.int8()),
        pa.field("operation", pa.string()),
        pa.field("documentId", pa.string()),
        pa.field("text", pa.string()),
        pa.field("clusterTime", CLUSTER_TIME_TYPE),
        pa.field("message", pa.binary()),
    ]
)


def route(namespace: Namespace) -> str:
    """The route of a collection's rows."""
    return f"{namespace[0]}{_SEPARATOR}{namespace[1]}"


def bucket_rows(root: Path, applied: Iterable[AppliedBucket]) -> pa.Table:
    """The rows of a state task's applied buckets (:data:`CHANGE_ROWS_SCHEMA`)."""
    parts: list[pa.Table] = []
    for bucket in applied:
        parts.append(_step_rows(change_steps(root, bucket.events, bucket.prepared.versions)))
        parts.append(_final_rows(bucket.prepared.source))
    if not parts:
        return CHANGE_ROWS_SCHEMA.empty_table()
    return pa.concat_tables(parts)


def _step_rows(steps: list[ChangeStep]) -> pa.Table:
    """The history's steps as rows."""
    columns = {
        ROUTE: [route(step.namespace) for step in steps],
        "token": [step.token for step in steps],
        "kind": [END if step.document_id is None else CHANGE for step in steps],
        "operation": [step.operation for step in steps],
        "documentId": [step.document_id for step in steps],
        "text": [step.text for step in steps],
        "clusterTime": _cluster_times([step.cluster_time for step in steps]),
        "message": [None] * len(steps),
    }
    return pa.Table.from_pydict(columns, schema=CHANGE_ROWS_SCHEMA)


def _cluster_times(times: list[Mapping[str, int] | None]) -> pa.StructArray:
    """The steps' cluster times as their column, built from its two halves (pyarrow's
    conversion of a list of dicts looks up every field of every row)."""
    mask = pa.array([time is None for time in times]) if None in times else None
    halves = [
        pa.array([0 if time is None else time[half] for time in times], pa.int64())
        for half in ("t", "i")
    ]
    return pa.StructArray.from_arrays(halves, fields=list(CLUSTER_TIME_TYPE), mask=mask)


def _final_rows(source: pa.Table) -> pa.Table:
    """The documents' final state (the preparation's MERGE source) as rows, kept in Arrow:
    one row per touched document, no Python object per row."""
    count = source.num_rows
    gone = pc.fill_null(source[DELETE], False)
    columns = [
        pc.binary_join_element_wise(source["db"], source["coll"], _SEPARATOR),
        pc.fill_null(source["_id"], ""),  # a deletion's row carries no token
        pa.repeat(pa.scalar(FINAL, pa.int8()), count),
        pa.nulls(count, pa.string()),
        source["_documentId"],
        pc.if_else(gone, pa.scalar(None, pa.string()), source["fullDocument"]),
        source["clusterTime"].cast(CLUSTER_TIME_TYPE),
        pa.nulls(count, pa.binary()),
    ]
    return pa.Table.from_arrays(columns, schema=CHANGE_ROWS_SCHEMA)


def message_rows(payload: bytes) -> pa.Table:
    """One row carrying a state task's message to the driver's commit."""
    values: dict[str, list[Any]] = {name: [None] for name in CHANGE_ROWS_SCHEMA.names}
    values.update({ROUTE: [""], "token": [""], "kind": [MESSAGE], "message": [payload]})
    return pa.Table.from_pydict(values, schema=CHANGE_ROWS_SCHEMA)


def namespace_rows(rows: pa.Table) -> tuple[dict[Namespace, CollectionShare], list[bytes]]:
    """A collection task's rows as each collection's share (its changes in stream order,
    one of each collection end; its final rows by ``_id``), and the messages among them."""
    # The documents a rename moved share its token: by _id, whatever task said them. One
    # chunk first: the shuffle hands over many small ones, which a sort reads more slowly.
    keys = (ROUTE, "token", "kind", "documentId")
    ordered = rows.combine_chunks().sort_by([(key, "ascending") for key in keys])
    found: dict[Namespace, CollectionShare] = {}
    messages: list[bytes] = []
    start = 0
    # Sorted by route, each route's rows are one run, in the order value_counts meets them:
    # first the messages' (""), then one per collection; slices, not copies.
    for run in pc.value_counts(ordered[ROUTE]).to_pylist():
        part = ordered.slice(start, run["counts"])
        start += run["counts"]
        if run["values"]:
            db, _, coll = run["values"].partition(_SEPARATOR)
            found[(db, coll)] = _share(part)
        else:
            messages = part["message"].to_pylist()
    return found, messages


def _share(rows: pa.Table) -> CollectionShare:
    """One collection's rows (in token order) as its share, a column at a time."""
    is_final = pc.equal(rows["kind"], FINAL)
    steps = rows.filter(pc.invert(is_final))
    changes = list(map(Change, *_columns(steps, _CHANGE_FIELDS)))
    if pc.any(pc.equal(steps["kind"], END)).as_py():
        changes = _ends_said_once(changes, steps["kind"].to_pylist())
    finals = rows.filter(is_final).sort_by("documentId")
    if not finals.num_rows:
        return CollectionShare(changes, None)
    return CollectionShare(changes, list(map(FinalRow, *_columns(finals, _FINAL_FIELDS))))


# The row columns that make a Change's and a FinalRow's fields, in their order.
_CHANGE_FIELDS: Final = ("token", "operation", "documentId", "text", "clusterTime")
_FINAL_FIELDS: Final = ("documentId", "text", "token", "clusterTime")


def _columns(rows: pa.Table, names: tuple[str, ...]) -> list[list[Any]]:
    return [rows[name].to_pylist() for name in names]


def _ends_said_once(changes: list[Change], kinds: list[int]) -> list[Change]:
    """``changes`` with each collection end once: every state task that knew the
    collection says it."""
    seen: set[str] = set()
    kept: list[Change] = []
    for change, kind in zip(changes, kinds, strict=True):
        if kind == END:
            if change.token in seen:
                continue
            seen.add(change.token)
        kept.append(change)
    return kept
