"""A batch's changes to each collection, in stream order: the history's input.

The state's preparation (:mod:`shardstream.spark.delta.mirror.prepare`) says what each event
did to the documents: an insert or replace sets one, a delete removes one, an update left
one version per document it changed (``PreparedBatch.versions``), and a rename moved every
document of its collection (versions too).  :func:`change_steps` lines those up with the
events in token order, and adds a step without a document for each collection a drop,
rename or dropDatabase ends (its open versions close there).  A step holds the document's
canonical Extended JSON text: in a Spark task the steps travel to the collection's task as
text (:mod:`~shardstream.spark.delta.typed.change_rows`), and the collection's task
decodes them once (:func:`collection_changes`).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.mirror.keys import Namespace, document_id
from shardstream.spark.delta.mirror.state import SET_OPERATIONS
from shardstream.spark.delta.typed.history import Change
from shardstream.spark.delta.typed.paths import HISTORY_DIR, MIRROR_DIR, collections_of

_EVENT_COLUMNS: Final = ("_id", "operationType", "clusterTime", "db", "coll", "documentKey")
ENDING_OPERATIONS: Final = ("drop", "rename", "dropDatabase")


@dataclasses.dataclass(frozen=True, slots=True)
class ChangeStep:
    """One step of one collection (a :class:`~shardstream.spark.delta.typed.history.Change`
    whose document is still its text).

    Attributes:
        namespace: the collection.
        token: the change's resume token ``_data``.
        operation: its operationType.
        document_id: the document's ``_id`` as canonical Extended JSON (None: the step ends
            the whole collection).
        text: the document after the change, canonical Extended JSON (None: none).
        cluster_time: the change's cluster time.
    """

    namespace: Namespace
    token: str
    operation: str
    document_id: str | None
    text: str | None
    cluster_time: Mapping[str, int] | None


def change_steps(root: Path, fresh: pa.Table, versions: pa.Table | None) -> list[ChangeStep]:
    """The steps of ``fresh`` (the state's event columns, token order) whose preparation
    recorded ``versions``; the tables under ``root`` say which collections a dropDatabase
    ends besides those the batch itself named."""
    recorded: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in versions.to_pylist() if versions is not None else ():
        recorded[row["_id"]].append(row)
    steps: list[ChangeStep] = []
    named: set[Namespace] = set()
    seen_ddl: set[str] = set()
    texts = fresh["fullDocument"].to_pylist()
    targets = fresh["to"].to_pylist()

    def add(step: ChangeStep) -> None:
        steps.append(step)
        named.add(step.namespace)

    def add_recorded(token: str, operation: str, time: Any) -> None:
        for row in recorded.get(token, ()):  # none: an update of an unknown document
            namespace = (row["db"], row["coll"])
            add(
                ChangeStep(
                    namespace, token, operation, row["_documentId"], row["fullDocument"], time
                )
            )

    # Read column by column: a dict per event would cost more than the loop below.
    columns = (fresh[name].to_pylist() for name in _EVENT_COLUMNS)
    events = zip(*columns, strict=True)
    for index, (token, operation, time, db, coll, document_key) in enumerate(events):
        namespace = (db, coll)
        if operation in SET_OPERATIONS or operation == "delete":
            text = texts[index] if operation != "delete" else None
            key = document_id(document_key)
            add(ChangeStep(namespace, token, operation, key, text, time))
        elif operation == "update":
            add_recorded(token, operation, time)
        elif operation in ENDING_OPERATIONS and token not in seen_ddl:
            seen_ddl.add(token)  # mongos passes on a DDL event once per shard that saw it
            for name in ended_collections(root, operation, namespace, targets[index], named):
                add(ChangeStep(name, token, operation, None, None, time))
            add_recorded(token, operation, time)  # the documents a rename moved
    return steps


def collection_changes(
    root: Path,
    fresh: pa.Table,
    versions: pa.Table | None,
) -> dict[Namespace, list[Change]]:
    """Each namespace's changes in stream order."""
    changes: dict[Namespace, list[Change]] = defaultdict(list)
    for step in change_steps(root, fresh, versions):
        changes[step.namespace].append(history_change(step))
    return dict(changes)


def history_change(step: ChangeStep) -> Change:
    """``step`` as the history's :class:`Change`."""
    return Change(step.token, step.operation, step.document_id, step.text, step.cluster_time)


def ended_collections(
    root: Path,
    operation: str,
    namespace: Namespace,
    target: str | None,
    named: Collection[Namespace],
) -> list[Namespace]:
    """The collections a drop, rename or dropDatabase ends: a dropDatabase, every one of
    its database that ``named`` holds (the batch's so far) or that has a table."""
    if operation == "drop":
        return [namespace]
    if operation == "rename":
        to = loads(target or "{}")
        return [namespace, (str(to.get("db")), str(to.get("coll")))]
    db = namespace[0]
    known: set[Namespace] = {name for name in named if name[0] == db}
    for kind in (MIRROR_DIR, HISTORY_DIR):
        known.update(collections_of(root, kind, db))
    return sorted(known)
