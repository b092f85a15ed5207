"""Sync: each change event as the idempotent write that reproduces it on the target.

* insert and replace -> replace the document by its key (``_id`` and shard key), upsert;
* update -> the oplog's own ``$v: 2`` diff as an update pipeline (:mod:`.diff_to_pipeline`),
  upsert off (a document the target lacks is written whole by a later insert or replace,
  or was deleted); a pre-5.0 modifier update is sent as the modifiers it is;
* delete -> delete by key;
* DDL events are applied in order by :mod:`.ddl_apply`, behind a barrier.

A rename across the edge of the scope (``--db``, ``--include`` / ``--exclude``): out of it,
it is applied as a drop of the old name (the target holds the scope's image, and the new
name is outside it); into it, the sync stops with an error (mongosync, too, refuses some
renames across its filter): the collection's documents were never copied, and the stream
brings only its later changes, so the target would silently lack them.

Replaying any of these after it was applied changes nothing, which is what makes a restart
from the last checkpoint, and the initial copy overlapping the stream, safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.objectid import ObjectId
from pymongo.operations import DeleteOne, ReplaceOne, UpdateOne

from shardstream.cluster_sync.diff_to_pipeline import diff_to_pipeline
from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.cluster_sync.write_statements import (
    DELETE,
    REPLACE,
    UPDATE,
    statement_of,
    statement_parts,
)
from shardstream.errors import ConfigurationError, OplogError

CRUD_TYPES: Final = frozenset({"insert", "replace", "update", "delete"})
DDL_TYPES: Final = frozenset(
    {
        "create",
        "createIndexes",
        "dropIndexes",
        "modify",
        "drop",
        "rename",
        "dropDatabase",
        "shardCollection",
    }
)
# Events about the cluster's placement, not its data: nothing to apply on a target.
IGNORED_TYPES: Final = frozenset(
    {
        "migrateLastChunkFromShard",
        "migrateChunkToNewShard",
        "refineCollectionShardKey",
        "reshardCollection",
        "reshardBegin",
        "reshardDoneCatchUp",
        "endOfTransaction",
    }
)
WriteModel = ReplaceOne[Any] | UpdateOne | DeleteOne


# Not frozen: one is built per event, and a frozen dataclass's __init__ sets each field
# through object.__setattr__.
@dataclasses.dataclass(slots=True)
class CrudWrite:
    """One document write.

    Attributes:
        target: the target namespace.
        route: the document's key bytes; with ``target`` it picks the writer, so one
            document's writes stay in order.
        statement: the write as its command's statement, in BSON (:mod:`.write_statements`).
        kind: :data:`~.write_statements.REPLACE`, ``UPDATE`` or ``DELETE``.
        token: the event's resume token (named in conflict reports).
        transaction: ``(lsid bytes, txnNumber)`` of the event's transaction, or None.

    The statement's parts (``key``, ``document``) and the pymongo ``model`` are decoded
    from it when asked: only a write addressed by the target's own shard key
    (:mod:`.target_shard_key`) or met by a conflict needs them.
    """

    target: Namespace
    route: bytes
    statement: bytes
    kind: int
    token: Mapping[str, Any]
    transaction: tuple[bytes, int] | None

    @property
    def deletes(self) -> bool:
        """Whether the write is a delete (sent in a ``delete`` command)."""
        return self.kind == DELETE

    @property
    def key(self) -> dict[str, Any]:
        """The event's ``documentKey``."""
        return statement_parts(self.statement)[0]

    @property
    def document(self) -> Mapping[str, Any] | None:
        """An insert's or replace's ``fullDocument``; else None."""
        return statement_parts(self.statement)[1] if self.kind == REPLACE else None

    @property
    def model(self) -> WriteModel:
        """The write as pymongo's model of it."""
        return model_of(self.kind, *statement_parts(self.statement))


def model_of(kind: int, key: Mapping[str, Any], body: Any) -> WriteModel:
    """pymongo's model of a write of ``kind`` to ``key`` (``body``: the document or update)."""
    if kind == REPLACE:
        return ReplaceOne(key, body, upsert=True)
    if kind == UPDATE:
        return UpdateOne(key, body, upsert=False)
    return DeleteOne(key)


@dataclasses.dataclass(frozen=True, slots=True)
class DdlChange:
    """One DDL event, applied alone once every earlier write is acknowledged."""

    event: Mapping[str, Any]


def plan_event(event: Mapping[str, Any], namespaces: NamespaceMap) -> CrudWrite | DdlChange | None:
    """The write for ``event``, or None when it has nothing to apply (out of scope, or a
    placement event).

    Raises:
        OplogError: an event type the sync does not know (it never guesses), or a CRUD
            event without the fields its rule needs.
    """
    kind = event.get("operationType")
    ns = event.get("ns") or {}
    db, coll = ns.get("db"), ns.get("coll")
    if kind in CRUD_TYPES and type(db) is str and type(coll) is str:
        # The common case first: a document write, its namespace's verdict remembered.
        target = namespaces.crud_target(db, coll)
        if target is None:
            return None
    else:
        if kind == "rename" and isinstance(db, str) and not namespaces.in_scope(db, coll):
            _refuse_rename_into_scope(event, namespaces)
        if kind in IGNORED_TYPES or not isinstance(db, str) or not namespaces.in_scope(db, coll):
            return None
        if kind in DDL_TYPES:
            return DdlChange(event)
        raise OplogError(
            f"expected a CRUD or DDL change event to apply, got operationType {kind!r} "
            f"(token {event.get('_id')!r})"
        )
    key = _required(event, "documentKey")
    if kind in ("insert", "replace"):
        write_kind, body = REPLACE, _required(event, "fullDocument")
    elif kind == "update":
        write_kind, body = UPDATE, update_of(event)
    else:
        write_kind, body = DELETE, None
    statement = statement_of(write_kind, key, body)
    token, transaction = event["_id"], transaction_of(event)
    return CrudWrite(target, route_of(key), statement, write_kind, token, transaction)


def route_of(key: Mapping[str, Any]) -> bytes:
    """A document's identity among its namespace's writes, from its ``_id``: an ObjectId's
    bytes behind a tag (no encoding's first byte, its length, is 7 at 13 bytes), else
    the BSON of ``{_id: value}``."""
    value = key.get("_id")
    if type(value) is ObjectId:
        return b"\x07" + value.binary
    return bson.encode({"_id": value})


def update_of(event: Mapping[str, Any]) -> Any:
    """The target update for an update event: its diff as a pipeline, or its modifiers."""
    raw = event.get("rawUpdateDescription")
    if not isinstance(raw, Mapping):
        raise OplogError(
            "expected an update event with rawUpdateDescription (the sync opens its stream "
            f"with show_raw_update_description), got keys {list(event)} "
            f"(token {event.get('_id')!r})"
        )
    if "$v" in raw and raw["$v"] == 2:
        return diff_to_pipeline(raw)
    return {name: value for name, value in raw.items() if name != "$v"}


def in_transaction(event: Mapping[str, Any]) -> bool:
    """Whether the event belongs to a transaction (without encoding its lsid)."""
    return event.get("lsid") is not None and event.get("txnNumber") is not None


def transaction_of(event: Mapping[str, Any]) -> tuple[bytes, int] | None:
    """The event's transaction as ``(lsid bytes, txnNumber)``, or None outside one."""
    if not in_transaction(event):
        return None
    return bson.encode(dict(event["lsid"])), int(event["txnNumber"])


def _refuse_rename_into_scope(event: Mapping[str, Any], namespaces: NamespaceMap) -> None:
    """Stop on a rename from outside the scope into it (module docstring); else return."""
    to = event.get("to")
    if not isinstance(to, Mapping) or not namespaces.in_scope(str(to.get("db")), to.get("coll")):
        return
    ns = event["ns"]
    raise ConfigurationError(
        f"expected renames to stay inside the sync's scope or leave it, got "
        f"{ns.get('db')}.{ns.get('coll')} (out of scope) renamed to {to.get('db')}."
        f"{to.get('coll')} (in scope) at token {event.get('_id')!r}: its documents were never "
        "copied, so the target cannot follow; sync again with --restart and a scope that "
        "holds both names, or neither"
    )


def _required(event: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = event.get(name)
    if type(value) is not dict and not isinstance(value, Mapping):  # dict: no ABC check
        raise OplogError(
            f"expected a {event.get('operationType')} event with a document {name!r}, got "
            f"{value!r:.100} (token {event.get('_id')!r})"
        )
    return value
