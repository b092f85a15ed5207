"""Part of the transform stage: what a command or no-op entry is as an event.

Emulates the ``kCommand`` and ``kNoop`` branches of
``ChangeStreamDefaultEventTransformation::applyTransformation``
(change_stream_event_transform.cpp): the operation type, the namespace, the
``operationDescription`` (which also goes into the resume token, so it must be
byte-exact), ``stateBeforeChange``, and the fields the server writes before ``_id``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from shardstream.errors import TransformError
from shardstream.transform import fields as f
from shardstream.transform.stages.legacy_formats import convert_legacy_noop_o2

# First matching field of `o` decides the command (order as in the server).
_COMMANDS: Final = (
    "drop",
    "renameCollection",
    "dropDatabase",
    "create",
    "createIndexes",
    "commitIndexBuild",
    "dropIndexes",
    "collMod",
)
# First matching field of `o2` decides the no-op event.
_NOOPS: Final = (
    ("shardCollection", f.SHARD_COLLECTION),
    ("migrateLastChunkFromShard", f.MIGRATE_LAST_CHUNK_FROM_SHARD),
    ("refineCollectionShardKey", f.REFINE_COLLECTION_SHARD_KEY),
    ("reshardCollection", f.RESHARD_COLLECTION),
    ("migrateChunkToNewShard", f.NEW_SHARD_DETECTED),
    ("reshardBegin", f.RESHARD_BEGIN),
    ("reshardDoneCatchUp", f.RESHARD_DONE_CATCH_UP),
    ("endOfTransaction", f.END_OF_TRANSACTION),
)


@dataclasses.dataclass(slots=True)
class DdlEvent:
    """The parts of a DDL or internal event that depend on the entry's payload.

    ``coll`` None means "the namespace has no collection" (dropDatabase); ``db`` None
    means the event has no ``ns`` at all (endOfTransaction).
    """

    operation_type: str
    db: str | None
    coll: str | None
    description: Any = None
    state_before_change: Any = None
    leading: dict[str, Any] = dataclasses.field(default_factory=dict)


def without(document: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """Copy ``document`` minus ``names``, keeping the order of the rest."""
    return {key: value for key, value in document.items() if key not in names}


def namespace_field(db: str, coll: str | None) -> dict[str, Any]:
    """The ``{db, coll}`` document of an event; ``coll`` left out when empty."""
    return {"db": db, "coll": coll} if coll else {"db": db}


def split_namespace(namespace: str) -> tuple[str, str]:
    """Split ``db.coll`` at the first dot (collection names may hold dots)."""
    db, _, coll = namespace.partition(".")
    return db, coll


def describe_command(db: str, o: Mapping[str, Any], o2: Any) -> DdlEvent:
    """Describe an ``op: c`` entry whose ``o`` is ``o`` and whose namespace db is ``db``."""
    name = next((name for name in _COMMANDS if name in o), None)
    if name is None:
        raise TransformError(
            f"expected a command change streams report ({', '.join(_COMMANDS)}), got "
            f"o with fields {list(o)!r}",
            code=6654400,
        )
    target = o[name]
    if name == "renameCollection":
        return _describe_rename(o)
    if name == "dropDatabase":
        return DdlEvent(f.DROP_DATABASE, db, None)
    coll = _string(target, f"o.{name}")
    if name == "drop":
        return DdlEvent(f.DROP, db, coll)
    if name == "create":
        return DdlEvent(f.CREATE, db, coll, without(o, "create"))
    if name == "createIndexes":
        return DdlEvent(f.CREATE_INDEXES, db, coll, {"indexes": [without(o, "createIndexes")]})
    if name == "commitIndexBuild":
        # {indexes: o.indexes}: a missing o.indexes leaves the field out, never null.
        indexes = {"indexes": o["indexes"]} if "indexes" in o else {}
        return DdlEvent(f.CREATE_INDEXES, db, coll, indexes)
    o2_document = o2 if isinstance(o2, Mapping) else {}
    if name == "dropIndexes":
        spec = without(o2_document, "dropIndexes")
        return DdlEvent(f.DROP_INDEXES, db, coll, {"indexes": [spec]})
    state: dict[str, Any] = {}
    for key, source in (
        ("collectionOptions", "collectionOptions_old"),
        ("indexOptions", "indexOptions_old"),
    ):
        if source in o2_document:
            state[key] = o2_document[source]
    return DdlEvent(f.MODIFY, db, coll, without(o, "collMod"), state)


def _describe_rename(o: Mapping[str, Any]) -> DdlEvent:
    source_db, source_coll = split_namespace(_string(o["renameCollection"], "o.renameCollection"))
    target = namespace_field(*split_namespace(_string(o.get("to"), "o.to")))
    description = without(o, "renameCollection", "stayTemp")
    # `to` is replaced where it stands (or appended), as MutableDocument::setField does.
    description[f.TO] = target
    return DdlEvent(f.RENAME, source_db, source_coll, description, leading={f.TO: target})


def describe_noop(
    namespace: str, o2: Any, *, new_shard_name: str, reads_legacy_type: bool
) -> DdlEvent:
    """Describe an ``op: n`` entry from its ``o2``.

    ``new_shard_name`` is the operationType of a ``migrateChunkToNewShard`` no-op;
    ``reads_legacy_type`` (6.x) first rewrites a pre-6.0 ``o2: {type: ...}``.
    """
    if not isinstance(o2, Mapping):
        raise TransformError(f"expected a no-op entry's o2 to be a document, got {o2!r:.100}")
    if reads_legacy_type:
        o2 = convert_legacy_noop_o2(o2, namespace)
    found = next(((key, op) for key, op in _NOOPS if key in o2), None)
    if found is None:
        raise TransformError(
            f"expected a no-op change streams report (o2 with one of "
            f"{[key for key, _ in _NOOPS]}), got o2 fields {list(o2)!r}",
            code=5052201,
        )
    key, operation_type = found
    if operation_type == f.NEW_SHARD_DETECTED:
        operation_type = new_shard_name
    db, coll = split_namespace(namespace)
    event = DdlEvent(operation_type, db, coll, without(o2, key))
    if operation_type in (f.RESHARD_BEGIN, f.RESHARD_DONE_CATCH_UP) and "reshardingUUID" in o2:
        event.leading[f.RESHARDING_UUID] = o2["reshardingUUID"]
    elif operation_type == f.END_OF_TRANSACTION:
        event.db = None
        for name in (f.TXN_NUMBER, f.LSID):
            if name in o2:
                event.leading[name] = o2[name]
    return event


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise TransformError(f"expected {where} to be a namespace string, got {value!r:.100}")
    return value
