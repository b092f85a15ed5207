"""Sync: writes addressed by the target's own shard key, where its owner sharded it otherwise.

An insert or replace is written as an upsert by the event's ``documentKey`` (``_id`` and the
*source's* shard key).  A target collection sharded on fields that key lacks (a replica
set synced into a sharded cluster, or a collection its owner sharded on another key) is
not addressed by it: mongos refuses an upsert whose query lacks the target's whole shard
key ("Failed to target upsert by query", code 61) until feature compatibility version
7.1, where it finds the document by its query first (``updateOneWithoutShardKey``).  So
below 7.1 the target's shard keys are read from its ``config.collections`` and such an
upsert is addressed by ``_id`` and the target key's values, taken from the new document
(null where it has none, as its shard key value then is), each as ``$eq``.

With the value in the query the upsert misses a copy of the document that still holds
another value for those fields: a copy written before the source changed them, or by an
event replayed after a restart, so the new version would land beside it (another shard)
or fail on its ``_id`` (the same one).  So each such upsert is preceded by a delete of the
copy by ``_id`` whose target key value differs: a ``DeleteOne``, which mongos takes by its
exact ``_id`` (sent to every shard), not a ``DeleteMany``, which would make pymongo send
the bulk write as not retryable.  pymongo sends an ordered bulk write as one command per
run of one kind of write, so the deletes of a run of writes to distinct documents go
first, together: two commands per run rather than two per document.

The keys are read when the sync's writers start, after every DDL event that can change
them, and when the target refuses an upsert with code 61 (its owner sharded a collection
meanwhile).  A target user who may not read ``config`` (error 13) gets the ``documentKey``
as before; one who may not read the feature compatibility version is taken to be below 7.1.

An update that changes the target key's value is refused by a shard before 7.1 (error
31025) unless its query holds that key's whole old value, which the event does not carry:
the document's current key values are then read from the target by ``_id`` and the update
is sent again with them (as a retryable write or in a transaction, where mongos moves the
document to the shard owning its new value).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pymongo import MongoClient
from pymongo.errors import OperationFailure
from pymongo.operations import DeleteOne, ReplaceOne, UpdateOne

from shardstream.cluster_sync.apply_rules import CrudWrite, WriteModel
from shardstream.cluster_sync.namespace_map import Namespace
from shardstream.cluster_sync.shard_target import catalog_collections

SHARD_KEY_NOT_FOUND: Final = 61
KEY_UPDATE_WITHOUT_KEY: Final = 31025
UNAUTHORIZED: Final = 13
FIRST_FCV_WITHOUT_KEY: Final = (7, 1)
ShardKeys = dict[Namespace, tuple[str, ...]]
Pinned = dict[tuple[bytes, str], dict[str, Any]]
"""Current target key values, by (route, token ``_data``) of the update that needs them."""


def target_shard_keys(target: MongoClient[Any]) -> ShardKeys | None:
    """The fields of each sharded target collection's shard key, by namespace (none on a
    replica set); None for a user who may not read ``config``."""
    try:
        return {c.ns: tuple(c.key) for c in catalog_collections(target)}
    except OperationFailure as exc:
        if exc.code != UNAUTHORIZED:
            raise
        return None


def upserts_need_the_key(target: MongoClient[Any]) -> bool:
    """Whether mongos refuses an upsert without the whole shard key: below FCV 7.1."""
    try:
        reply = target.admin.command({"getParameter": 1, "featureCompatibilityVersion": 1})
    except OperationFailure:
        return True  # not allowed to ask: assume the stricter rule
    version = str((reply.get("featureCompatibilityVersion") or {}).get("version", "0.0"))
    major, _, minor = version.partition(".")
    release = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else (0, 0)
    return release < FIRST_FCV_WITHOUT_KEY


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
    """The target's shard keys that writes must carry, kept current, and the key values
    read for updates refused without them (shared by lanes: a refresh swaps the whole map;
    a pin is one document's, on its own lane)."""

    def __init__(self, target: MongoClient[Any]) -> None:
        """Keep the keys of ``target``; they are read by the first :meth:`refresh`."""
        self._target = target
        self._fields: ShardKeys | None = None
        self._pinned: dict[Namespace, Pinned] = {}

    @property
    def read(self) -> bool:
        """Whether the keys were read yet."""
        return self._fields is not None

    def refresh(self) -> None:
        """Read the keys (again): none from FCV 7.1, where mongos needs none."""
        keys = target_shard_keys(self._target) or {}
        self._fields = keys if keys and upserts_need_the_key(self._target) else {}

    def fields(self, ns: Namespace) -> tuple[str, ...]:
        """The fields of ``ns``'s shard key on the target that its writes must carry."""
        return (self._fields or {}).get(ns, ())

    def pinned(self, ns: Namespace) -> Pinned:
        """The key values read for ``ns``'s refused updates."""
        return self._pinned.get(ns, {})

    def pin(self, ns: Namespace, write: CrudWrite, values: dict[str, Any]) -> bool:
        """Keep ``values`` for ``write``; False if it had some (they did not help)."""
        pins = self._pinned.setdefault(ns, {})
        if _pin(write) in pins:
            return False
        pins[_pin(write)] = values
        return True

    def unpin(self, ns: Namespace, writes: Sequence[CrudWrite]) -> None:
        """Forget the values of ``writes``, applied."""
        pins = self._pinned.get(ns)
        if pins:
            for write in writes:
                pins.pop(_pin(write), None)


def current_key_values(
    collection: Any, write: CrudWrite, fields: tuple[str, ...]
) -> dict[str, Any] | None:
    """The target key values of ``write``'s document as the target holds it (None: none)."""
    found = collection.find_one({"_id": write.key.get("_id")}, dict.fromkeys(fields, 1))
    return None if found is None else key_values(found, fields)


def addressed_models(
    writes: Sequence[CrudWrite], fields: tuple[str, ...], pinned: Pinned | None = None
) -> tuple[list[WriteModel], list[int]]:
    """The pymongo writes for ``writes`` into a collection sharded on ``fields`` on the
    target, and for each one the index in ``writes`` to go on from if it fails (its own
    write's; a delete moved ahead of its run, the run's first write's)."""
    if not fields:
        return [w.model for w in writes], list(range(len(writes)))
    models: list[WriteModel] = []
    owners: list[int] = []
    deletes: list[WriteModel] = []
    rest: list[tuple[WriteModel, int]] = []
    documents: set[bytes] = set()  # those of the current run: each once
    for n, write in enumerate(writes):
        if write.route in documents:  # one document's writes keep their order
            _flush(models, owners, deletes, rest)
            documents.clear()
        documents.add(write.route)
        stale, model = _addressed(write, fields, (pinned or {}).get(_pin(write)))
        if stale is not None:
            deletes.append(stale)
        rest.append((model, n))
    _flush(models, owners, deletes, rest)
    return models, owners


def _flush(
    models: list[WriteModel],
    owners: list[int],
    deletes: list[WriteModel],
    rest: list[tuple[WriteModel, int]],
) -> None:
    if rest:
        models.extend(deletes)
        owners.extend([rest[0][1]] * len(deletes))
        models.extend(model for model, _ in rest)
        owners.extend(n for _, n in rest)
    deletes.clear()
    rest.clear()


def _pin(write: CrudWrite) -> tuple[bytes, str]:
    return write.route, str(write.token.get("_data"))


def _by_key(write: CrudWrite, values: Mapping[str, Any]) -> dict[str, Any]:
    # _id and the target key's own paths: the source's (maybe dotted) fields stay out.
    return {"_id": write.key.get("_id"), **{path: {"$eq": v} for path, v in values.items()}}


def _addressed(
    write: CrudWrite, fields: tuple[str, ...], pinned: dict[str, Any] | None
) -> tuple[WriteModel | None, WriteModel]:
    """The stale copy's delete (if the write needs one) and the write itself."""
    if write.update is not None and pinned is not None:
        return None, UpdateOne(_by_key(write, pinned), write.update, upsert=False)
    if write.document is None or all(path in write.key for path in fields):
        return None, write.model
    values = key_values(write.document, fields)
    differs = [{path: {"$ne": v}} for path, v in values.items()]
    stale = {"_id": write.key.get("_id"), **(differs[0] if len(differs) == 1 else {"$or": differs})}
    return DeleteOne(stale), ReplaceOne(_by_key(write, values), write.document, upsert=True)
