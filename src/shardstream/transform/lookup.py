"""Interface: the documents a change stream fetches besides the oplog.

``fullDocument: updateLookup`` reads the current document by its documentKey
(through mongos); pre-images (``fullDocumentBeforeChange``, and the base of
``whenAvailable`` / ``required`` post-images) come from the shard's
``config.system.preimages``, keyed by collection UUID, entry ts and applyOps index.
The live source implements this against a cluster; tests use a dict-backed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from bson.timestamp import Timestamp


class DocumentLookup(Protocol):
    """What the image stages need from a cluster."""

    def current_document(
        self, db: str, coll: str, document_key: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """Return the document with ``document_key`` as it is now, or None if gone."""

    def pre_image(
        self, collection_uuid: Any, ts: Timestamp, apply_ops_index: int
    ) -> Mapping[str, Any] | None:
        """Return the pre-image stored for that write, or None if there is none."""


@runtime_checkable
class PerShardLookup(Protocol):
    """A lookup that hands each shard its own view (pre-images live on the shard)."""

    def for_shard(self, shard: str) -> DocumentLookup:
        """The lookup shard ``shard``'s pipeline uses."""
