"""Sync phase 1's writes: each batch of copied documents inserted into the target.

A batch goes as one unordered bulk insert.  A document already on the target (copied
before a restart) is replaced by ``_id`` and the target's shard key (its own, read from its
catalog after the copy sharded what it shards: the source's with ``shard_target``,
whatever its owner chose without).  On a sharded target that is not enough when the
source changed the document's shard key value since: its old copy keeps the old value, so
the new version lands in another chunk, where the insert succeeds beside it (another
shard) or the upsert by the new key misses it and hits its ``_id`` (the same shard).  So
where the target held documents before the copy began, each batch first looks its
``_id``s up on every shard and deletes by ``_id`` alone the copies whose key value
differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import bson
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient
from pymongo.errors import BulkWriteError
from pymongo.operations import ReplaceOne

from shardstream.cluster_sync.conflict_log import ConflictLog
from shardstream.cluster_sync.namespace_map import Namespace
from shardstream.cluster_sync.refused_writes import DUPLICATE_KEY, SyncConflict
from shardstream.cluster_sync.target_retry import retrying
from shardstream.cluster_sync.target_shard_key import key_query, key_values


def retried_insert(
    writer: Any,
    batch: list[RawBSONDocument],
    *,
    on_conflict: str,
    retry_for_s: float,
    shard_key: tuple[str, ...],
    remove_moved: bool,
    conflicts: ConflictLog | None = None,
) -> None:
    """Insert ``batch`` through ``writer`` (a target collection), retried while the
    target is away; a conflict the policy skips or overwrites is recorded in
    ``conflicts``."""
    insert = partial(_insert, writer, batch, on_conflict, shard_key, remove_moved, conflicts)
    retrying(insert, retry_for_s)


def holds_documents(target: MongoClient[Any], ns: Namespace) -> bool:
    return target[ns[0]][ns[1]].find_one({}, {"_id": 1}) is not None


def movable(shard_key: tuple[str, ...]) -> bool:
    """Whether a document's shard key value can change (``_id`` never does)."""
    return any(path.split(".")[0] != "_id" for path in shard_key)


def _by_key(document: RawBSONDocument, shard_key: tuple[str, ...]) -> dict[str, Any]:
    """``_id`` and the shard key's values: mongos refuses an upsert without the whole key."""
    return key_query(document["_id"], key_values(document, shard_key))


def _remove_moved(writer: Any, batch: list[RawBSONDocument], shard_key: tuple[str, ...]) -> None:
    """Delete the target's copies of ``batch`` whose shard key value is not the batch's.

    By ``_id`` alone mongos asks every shard (and takes a multi delete without the shard
    key), where the insert or the upsert by the new value reaches one chunk only.  Values
    are compared as BSON, stricter than the server: at worst an equal key is rewritten.
    """

    def key_of(document: Mapping[str, Any]) -> bytes:
        return bson.encode(key_values(document, shard_key))

    wanted = {bson.encode({"_id": d["_id"]}): key_of(d) for d in batch}
    ids = {"_id": {"$in": [d["_id"] for d in batch]}}
    fields = dict.fromkeys((path.split(".")[0] for path in shard_key), 1)
    stale = [
        copy["_id"]
        for copy in writer.find(ids, fields)
        if wanted.get(bson.encode({"_id": copy["_id"]})) != key_of(copy)
    ]
    if stale:
        writer.delete_many({"_id": {"$in": stale}})


def _insert(
    writer: Any,
    batch: list[RawBSONDocument],
    on_conflict: str,
    shard_key: tuple[str, ...],
    remove_moved: bool,
    conflicts: ConflictLog | None,
) -> None:
    if remove_moved:
        _remove_moved(writer, batch, shard_key)
    try:
        writer.insert_many(batch, ordered=False)
    except BulkWriteError as exc:
        again: list[ReplaceOne[Any]] = []
        for error in exc.details["writeErrors"]:
            key_pattern = error.get("keyPattern") or {}
            key = error.get("keyValue") or {}
            document = batch[int(error["index"])]
            if error.get("code") != DUPLICATE_KEY:
                raise SyncConflict(
                    f"the target refused a copied document of {writer.full_name}: error "
                    f"{error.get('code')} ({error.get('errmsg')})"
                ) from exc
            if list(key_pattern) != ["_id"]:
                # A unique index the source does not have: the conflict policy decides.
                if on_conflict == "fail":
                    raise SyncConflict(
                        f"the target refused a copied document of {writer.full_name}: "
                        f"duplicate key {key!r}; pass --on-conflict overwrite or skip to go on"
                    ) from exc
                if conflicts is not None:
                    namespace = (writer.database.name, writer.name)
                    write = {"op": "copy", "documentKey": {"_id": document["_id"]}}
                    write["document"] = document
                    met = writer.find_one(key)
                    conflicts.record(namespace, key, token=None, write=write, met=met)
                if on_conflict == "skip":
                    continue
                writer.delete_many(key)
            # Copied before a restart with the same shard key value (another one was
            # removed above), sent again after a lost reply, or its key holder just
            # removed: write this copy's version, as new as the stream's start or newer.
            again.append(ReplaceOne(_by_key(document, shard_key), document, upsert=True))
        if again:
            writer.bulk_write(again, ordered=False)
