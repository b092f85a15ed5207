"""The documents a live change stream reads besides the oplog.

Implements :class:`~shardstream.transform.DocumentLookup` against a cluster:
``updateLookup`` reads the current document by its documentKey through mongos (the
key holds the shard key, so mongos targets one shard), and pre-images are read from
the shard that wrote the change, in its ``config.system.preimages`` collection,
by ``{nsUUID, ts, applyOpsIndex}`` as the server stores them.  Failures become
:class:`OplogError` naming the shard, never a silent null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson.int64 import Int64
from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.errors import OplogError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.oplog.redaction import redact_text


class LiveDocumentLookup:
    """Reads current documents through mongos and pre-images from each shard.

    Args:
        mongos: a client connected to mongos (used for updateLookup).
        shard_uris: shard name -> connection string (pre-images live on the shard).
        client_options: extra options for the shard clients.
        owns_mongos: close ``mongos`` in :meth:`close` (the lookup created it).
    """

    def __init__(
        self,
        mongos: MongoClient[Any],
        shard_uris: Mapping[str, str],
        client_options: Mapping[str, Any] | None = None,
        *,
        owns_mongos: bool = False,
    ) -> None:
        self._mongos = mongos
        self._owns_mongos = owns_mongos
        self._shard_uris = dict(shard_uris)
        self._options = dict(client_options or {})
        self._clients: dict[str, MongoClient[Any]] = {}

    def add_shard(self, shard: str, uri: str) -> None:
        """Make a shard that joined mid-stream known (its pre-images live on it)."""
        self._shard_uris.setdefault(shard, uri)

    def for_shard(self, shard: str) -> ShardDocumentLookup:
        """The lookup one shard's pipeline uses (its pre-images are on that shard)."""
        return ShardDocumentLookup(self, shard)

    def current_document(
        self, db: str, coll: str, document_key: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """The document with ``document_key`` as it is now, or None if it is gone."""
        collection = self._mongos.get_database(db, codec_options=OPLOG_CODEC_OPTIONS)[coll]
        try:
            found: Mapping[str, Any] | None = collection.find_one(dict(document_key))
        except PyMongoError as exc:
            raise OplogError(
                f"fullDocument lookup of {dict(document_key)!r} in {db}.{coll} through mongos "
                f"failed: {redact_text(str(exc))}"
            ) from exc
        return found

    def pre_image(
        self, shard: str, collection_uuid: Any, ts: Timestamp, apply_ops_index: int
    ) -> Mapping[str, Any] | None:
        """The pre-image ``shard`` stored for that write, or None."""
        key = {"nsUUID": collection_uuid, "ts": ts, "applyOpsIndex": Int64(apply_ops_index)}
        preimages = self._client(shard).get_database("config", codec_options=OPLOG_CODEC_OPTIONS)
        try:
            found = preimages["system.preimages"].find_one({"_id": key})
        except PyMongoError as exc:
            raise OplogError(
                f"pre-image lookup on shard {shard!r} ({redact_text(self._shard_uris[shard])}) "
                f"failed: {redact_text(str(exc))}"
            ) from exc
        return None if found is None else found.get("preImage")

    def _client(self, shard: str) -> MongoClient[Any]:
        client = self._clients.get(shard)
        if client is None:
            if shard not in self._shard_uris:
                raise OplogError(f"expected a known shard for a pre-image lookup, got {shard!r}")
            client = MongoClient(self._shard_uris[shard], **self._options)
            self._clients[shard] = client
        return client

    def close(self) -> None:
        """Close the shard clients, and the mongos client if this lookup opened it."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self._owns_mongos:
            self._mongos.close()


class ShardDocumentLookup:
    """One shard's view of a :class:`LiveDocumentLookup`."""

    def __init__(self, lookup: LiveDocumentLookup, shard: str) -> None:
        self._lookup = lookup
        self._shard = shard

    def current_document(
        self, db: str, coll: str, document_key: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """See :meth:`LiveDocumentLookup.current_document`."""
        return self._lookup.current_document(db, coll, document_key)

    def pre_image(
        self, collection_uuid: Any, ts: Timestamp, apply_ops_index: int
    ) -> Mapping[str, Any] | None:
        """See :meth:`LiveDocumentLookup.pre_image`, on this shard."""
        return self._lookup.pre_image(self._shard, collection_uuid, ts, apply_ops_index)
