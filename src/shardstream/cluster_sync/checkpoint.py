"""Sync: where a sync stands, kept in the target so a restart (kill -9 too) carries on.

One document per sync id in ``shardstream_sync.checkpoints``, written with write concern
majority after each acknowledged batch::

    {_id: <sync id>, phase: "copy" | "stream" | "committed", t0: Timestamp,
     token: {_data: ...} | null, reverse_from: Timestamp | null,
     source: <redacted URI>, source_id: <the source's identity>,
     scope: {db, coll, include, exclude, map}, updated: <date>}

``t0`` is the cluster time the initial copy started from; ``token`` is the merged stream's
resume token after the last applied batch: one token, not per-shard times, because the
merged stream resumes from one token on every shard.  A restart in the copy phase copies
again from the same ``t0``; in the stream phase it resumes after ``token`` (or at ``t0``
when no batch was applied yet).  Replaying what was already applied is harmless because
every write the sync makes is idempotent.  ``source_id`` (``cluster_identity``) ties the
checkpoint to its source: a rerun against another source is refused, naming both.
``scope`` (``NamespaceMap.described``) ties it to its namespaces, as mongosync ties a
migration to its filter: a rerun with another ``--db``/``--coll``/``--include``/``--exclude``
/``--map`` is refused, naming both (a collection let in would lack its copy, one left out
would keep a stale image). A checkpoint without one (an earlier version's) is taken as it is.
``committed``: the sync was committed (the cutover); ``reverse_from`` is the target's
majority time read once the target was found equal and before it was declared writable,
where a reverse sync (target to source) starts: everything on the target before it is the
sync's own writes.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.write_concern import WriteConcern

from shardstream.cluster_sync.cluster_identity import SyncRefused
from shardstream.cluster_sync.namespace_map import CHECKPOINT_DB
from shardstream.cluster_sync.target_retry import DEFAULT_RETRY_FOR_S, retrying
from shardstream.errors import ConfigurationError

CHECKPOINT_COLLECTION: Final = "checkpoints"
PHASES: Final = ("copy", "stream", "committed")


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """A sync's stored position.

    Attributes:
        phase: ``copy`` (the initial copy had not finished) or ``stream``.
        t0: the copy's start time, where the stream starts when ``token`` is None.
        token: the resume token after the last applied batch.
        reverse_from: (``committed``) where a reverse sync reads the target from.
    """

    phase: str
    t0: Timestamp
    token: Mapping[str, Any] | None = None
    reverse_from: Timestamp | None = None


class CheckpointStore:
    """Reads and writes one sync's checkpoint in the target."""

    def __init__(
        self,
        client: MongoClient[Any],
        sync_id: str,
        *,
        source: str,
        source_id: str | None = None,
        scope: Mapping[str, Any] | None = None,
        retry_for_s: float = DEFAULT_RETRY_FOR_S,
    ) -> None:
        """Args: the target client, the sync's id, the source as shown (redacted), its
        identity (None: unread), the namespaces it syncs (``NamespaceMap.described``; None:
        not compared), and how long a save is retried while the target is away."""
        database = client.get_database(CHECKPOINT_DB, write_concern=WriteConcern("majority"))
        self._collection = database[CHECKPOINT_COLLECTION]
        self.sync_id = sync_id
        self._source = source
        self._source_id = source_id
        self._scope = None if scope is None else dict(scope)
        self.retry_for_s = retry_for_s

    def load(self) -> Checkpoint | None:
        """The stored checkpoint, or None for a new sync.

        Raises:
            ConfigurationError: the stored document is not a checkpoint this version wrote.
            SyncRefused: it was written for another source (by its identity).
        """
        document = self._collection.find_one({"_id": self.sync_id})
        if document is None:
            return None
        stored_id = document.get("source_id")
        if stored_id is not None and self._source_id is not None and stored_id != self._source_id:
            raise SyncRefused(
                f"expected checkpoint {self.sync_id!r} ({CHECKPOINT_DB}.{CHECKPOINT_COLLECTION} "
                f"on the target) to be this source's, got one written for {stored_id} "
                f"({document.get('source')}), while --source {self._source} is {self._source_id}; "
                "pass another --sync-id, or --restart to forget it"
            )
        stored_scope = document.get("scope")
        if stored_scope is not None and self._scope is not None and stored_scope != self._scope:
            raise SyncRefused(
                f"expected checkpoint {self.sync_id!r} to have been written for the same "
                f"namespaces, got {_shown(stored_scope)} there, while this run has "
                f"{_shown(self._scope)}: run with the same --db/--coll/--include/--exclude/"
                "--map, or --restart to copy again for the new scope (another --sync-id "
                "starts a second sync beside it)"
            )
        phase, t0, token = document.get("phase"), document.get("t0"), document.get("token")
        if phase not in PHASES or not isinstance(t0, Timestamp):
            raise ConfigurationError(
                f"expected {CHECKPOINT_DB}.{CHECKPOINT_COLLECTION} {self.sync_id!r} to hold "
                f"phase in {PHASES} and a Timestamp t0, got phase {phase!r}, t0 {t0!r}"
            )
        if token is not None and not isinstance(token, Mapping):
            raise ConfigurationError(f"expected a resume token document, got {token!r:.100}")
        reverse_from = document.get("reverse_from")
        if phase == "committed" and not isinstance(reverse_from, Timestamp):
            raise ConfigurationError(
                f"expected committed checkpoint {self.sync_id!r} to hold a Timestamp "
                f"reverse_from, got {reverse_from!r:.100}"
            )
        return Checkpoint(phase, t0, token, reverse_from)

    def save(self, checkpoint: Checkpoint) -> None:
        """Store ``checkpoint`` (acknowledged by a majority before this returns).

        Retried while the target is away, as the batch's writes were: a batch applied but
        not checkpointed would only be applied again on restart, but the sync would stop.
        """
        retrying(partial(self._replace, checkpoint), self.retry_for_s)

    def _replace(self, checkpoint: Checkpoint) -> None:
        self._collection.replace_one(
            {"_id": self.sync_id},
            {
                "_id": self.sync_id,
                "phase": checkpoint.phase,
                "t0": checkpoint.t0,
                "token": None if checkpoint.token is None else dict(checkpoint.token),
                "reverse_from": checkpoint.reverse_from,
                "source": self._source,
                "source_id": self._source_id,
                "scope": self._scope,
                "updated": datetime.datetime.now(datetime.UTC),
            },
            upsert=True,
        )

    def clear(self) -> None:
        """Forget the sync (the next run starts with a new initial copy)."""
        self._collection.delete_one({"_id": self.sync_id})


def _shown(scope: Mapping[str, Any]) -> str:
    """A stored scope as its options read, e.g. ``--include 'shop.*' --map a=b``."""
    flags = [f"--db {scope['db']}"] if scope.get("db") else []
    flags += [f"--coll {scope['coll']}"] if scope.get("coll") else []
    for flag in ("include", "exclude", "map"):
        flags += [f"--{flag} {value!r}" for value in scope.get(flag) or ()]
    return " ".join(flags) or "every namespace (no --db/--include/--exclude/--map)"
