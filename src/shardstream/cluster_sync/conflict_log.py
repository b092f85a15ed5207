"""Sync: every write a conflict policy skipped or overwrote, recorded in the target.

Under ``--on-conflict skip`` or ``overwrite`` a write the target refuses for a duplicate
key (a unique index the source does not have, or a document another write put there)
is dropped, or the document holding the key is deleted first. Counting them is not enough
for a migration's sign-off: each one is stored in ``shardstream_sync.conflicts`` on the
target (write concern majority) before the policy acts, one document per refused write::

    {_id: {syncId, ns, key, token, documentId},    # the same conflict replayed: one record
     syncId, ns: "db.coll" (the target's), key: <the duplicate key's value>,
     policy: "skip" | "overwrite", phase: "copy" | "stream",
     token: <the event's resume token> | null (a copied document),
     write: {op: "insert" | "replace" | "update" | "delete" | "copy", documentKey,
             document?, update?},
     met: <the target's document holding the key, as it was> | null,
     recorded: <date>}

so under ``overwrite``, ``met`` is exactly what was replaced. A record is keyed by what
identifies the refused write, so a batch replayed after a restart stores it once.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Mapping
from typing import Any, Final

from pymongo import MongoClient
from pymongo.write_concern import WriteConcern

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.namespace_map import CHECKPOINT_DB, Namespace
from shardstream.cluster_sync.target_retry import DEFAULT_RETRY_FOR_S, retrying
from shardstream.cluster_sync.write_statements import KINDS, REPLACE, statement_parts

CONFLICTS_COLLECTION: Final = "conflicts"


def write_description(write: CrudWrite) -> dict[str, Any]:
    """A stream write as a record names it: its op, ``documentKey`` and content."""
    key, body = statement_parts(write.statement)
    described: dict[str, Any] = {"op": KINDS[write.kind], "documentKey": dict(key)}
    if body is not None:
        described["document" if write.kind == REPLACE else "update"] = body
    return described


class ConflictLog:
    """Records one sync's conflicts in the target and counts them (thread-safe)."""

    def __init__(
        self,
        client: MongoClient[Any],
        sync_id: str,
        policy: str,
        *,
        retry_for_s: float = DEFAULT_RETRY_FOR_S,
    ) -> None:
        """Args: the target client, the sync's id, the policy, and how long a record's
        write is retried while the target is away."""
        database = client.get_database(CHECKPOINT_DB, write_concern=WriteConcern("majority"))
        self._collection = database[CONFLICTS_COLLECTION]
        self._sync_id = sync_id
        self._policy = policy
        self._retry_for_s = retry_for_s
        self._lock = threading.Lock()
        self.count = 0

    def record(
        self,
        namespace: Namespace,
        key: Mapping[str, Any],
        *,
        token: Mapping[str, Any] | None,
        write: Mapping[str, Any],
        met: Mapping[str, Any] | None,
    ) -> None:
        """Store one conflict (before the policy acts on it) and count it."""
        ns = f"{namespace[0]}.{namespace[1]}"
        document_key = write.get("documentKey") or {}
        document_id = (write.get("document") or document_key).get("_id")
        data = None if token is None else token.get("_data")
        identity = {
            "syncId": self._sync_id,
            "ns": ns,
            "key": dict(key),
            "token": data,
            "documentId": document_id,
        }
        record = {
            "_id": identity,
            "syncId": self._sync_id,
            "ns": ns,
            "key": dict(key),
            "policy": self._policy,
            "phase": "copy" if token is None else "stream",
            "token": None if token is None else dict(token),
            "write": dict(write),
            "met": None if met is None else dict(met),
            "recorded": datetime.datetime.now(datetime.UTC),
        }
        retrying(
            lambda: self._collection.replace_one({"_id": identity}, record, upsert=True),
            self._retry_for_s,
        )
        with self._lock:
            self.count += 1
