"""Sync: writes addressed by the target's own shard key, where its owner sharded it otherwise.

An insert or replace is written as an upsert by the event's ``documentKey`` (``_id`` and the
*source's* shard key).  A target collection sharded on fields that key lacks (a replica
set synced into a sharded cluster, or a collection its owner sharded on another key) is
not addressed by it: mongos before 7.1 refuses an upsert whose query lacks the target's
whole shard key ("Failed to target upsert by query", code 61).  So the target's shard keys
are read from its ``config.collections`` and the missing fields' values, taken from the
new document (null where it has none, as its shard key value then is), join the query.

With the value in the query the upsert misses a copy of the document that still holds
another value for those fields: a copy written before the source changed them, or by an
event replayed after a restart, so the new version would land beside it (another shard)
or fail on its ``_id`` (the same one).  So each such upsert is preceded by a delete of the
copy by ``_id`` whose target key value differs: a ``DeleteOne`` (exact ``_id``, which mongos
takes without the shard key and sends to every shard), not a ``DeleteMany``, which would
make pymongo send the whole bulk write as not retryable.  That delete goes to every shard:
the price of a target sharded unlike its source, paid by inserts and replaces only.

The keys are read when the sync's writers start, again after every DDL event applied
(``--shard-target`` applies ``shardCollection``), and when the target refuses an upsert
with code 61 (its owner sharded a collection meanwhile).  A target user who may not read
the ``config`` database (error 13) gets the ``documentKey`` as before.

Left as before: an update that changes the target key's value, which mongos before 7.1
takes only with that key's old value in the query; the event does not carry it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pymongo import MongoClient
from pymongo.errors import OperationFailure
from pymongo.operations import DeleteOne, ReplaceOne

from shardstream.cluster_sync.apply_rules import CrudWrite, WriteModel
from shardstream.cluster_sync.namespace_map import Namespace
from shardstream.cluster_sync.shard_target import catalog_collections

SHARD_KEY_NOT_FOUND: Final = 61
UNAUTHORIZED: Final = 13


def target_shard_keys(target: MongoClient[Any]) -> dict[Namespace, tuple[str, ...]]:
    """The fields of each sharded target collection's shard key, by namespace (none on a
    replica set, or for a user who may not read ``config``)."""
    try:
        return {c.ns: tuple(c.key) for c in catalog_collections(target)}
    except OperationFailure as exc:
        if exc.code != UNAUTHORIZED:
            raise
        return {}


def key_values(document: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """The values of the (dotted) ``fields`` in ``document``; a missing one is null, as the
    shard key value of a document without it is."""
    found: dict[str, Any] = {}
    for path in fields:
        value: Any = document
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        found[path] = value
    return found


class TargetShardKeys:
    """The target's shard keys, kept current, and the writes they address."""

    def __init__(self, target: MongoClient[Any]) -> None:
        """Keep the keys of ``target``; they are read by the first :meth:`refresh`."""
        self._target = target
        self._fields: dict[Namespace, tuple[str, ...]] | None = None

    @property
    def read(self) -> bool:
        """Whether the keys were read yet."""
        return self._fields is not None

    def refresh(self) -> None:
        """Read the keys (again)."""
        self._fields = target_shard_keys(self._target)

    def fields(self, ns: Namespace) -> tuple[str, ...]:
        """The fields of ``ns``'s shard key on the target (none: unsharded there)."""
        assert self._fields is not None, "refresh() reads the keys before the first write"
        return self._fields.get(ns, ())


def addressed_models(
    writes: Sequence[CrudWrite], fields: tuple[str, ...]
) -> tuple[list[WriteModel], list[int]]:
    """The pymongo writes for ``writes`` into a collection sharded on ``fields`` on the
    target, and the index in ``writes`` of each one's write."""
    if not fields:
        return [w.model for w in writes], list(range(len(writes)))
    models: list[WriteModel] = []
    owners: list[int] = []
    for n, write in enumerate(writes):
        addressed = _addressed(write, fields)
        models.extend(addressed)
        owners.extend([n] * len(addressed))
    return models, owners


def _addressed(write: CrudWrite, fields: tuple[str, ...]) -> list[WriteModel]:
    if write.replaced is None:
        return [write.model]
    key, document = write.replaced
    missing = [path for path in fields if path not in key]
    if not missing:
        return [write.model]
    values = key_values(document, missing)
    differs = [{path: {"$ne": value}} for path, value in values.items()]
    return [
        DeleteOne({"_id": key.get("_id"), "$or": differs}),
        ReplaceOne({**key, **values}, document, upsert=True),
    ]
