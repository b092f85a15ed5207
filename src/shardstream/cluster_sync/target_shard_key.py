"""Sync: writes addressed by the target's own shard key, where its owner sharded it otherwise.

An insert or replace is written as an upsert by the event's ``documentKey`` (``_id`` and the
*source's* shard key), an update and a delete by it.  A target collection sharded on fields
that key lacks (a replica set synced into a sharded cluster, or a collection its owner
sharded on another key) is not addressed by it before feature compatibility version 7.1
(``updateOneWithoutShardKey``): mongos refuses an upsert whose query lacks the target's
whole shard key ("Failed to target upsert by query", code 61), and a shard refuses an
update that changes the document's key value by such a query (31025).  From 7.1 mongos
finds the document by its query first and takes both.  What a cluster does is not asked
(``getParameter`` of the feature compatibility version is undefined on mongos): the sync
starts with the ``documentKey`` and, at the first refusal, reads the target's shard keys
from its ``config.collections`` and addresses every write that needs it from then on
(again after each DDL event that can change them, and at a refusal with code 61: its
owner sharded a collection meanwhile).

Addressed, an upsert goes by ``_id`` and the target key's values, taken from the new
document (null where it has none, as its shard key value then is), each as ``$eq``.  With
the value in the query the upsert misses a copy of the document that still holds another
value for those fields (a copy written before the source changed them, or by an event
replayed after a restart), so the new version would land beside it (another shard) or fail
on its ``_id`` (the same one); so each such upsert is preceded by a delete of the copy by
``_id`` whose key value differs: a ``DeleteOne``, which mongos takes by its exact ``_id``
(sent to every shard), not a ``DeleteMany``, which would make pymongo send the bulk write
as not retryable.  pymongo sends an ordered bulk write as one command per run of one kind
of write, so the deletes of a run of writes to distinct documents go first, together.

An update refused for changing the key goes again with the document's current key values
(which the event does not carry), read from the target by ``_id`` where the write stands:
after the writes before it in a bulk write; inside a transaction, in the transaction, just
before each update of an addressed collection.  Sent as a retryable write or in a
transaction, it lets mongos move the document to the shard owning its new value.  A
target user who may not read ``config`` (error 13) gets the refusal.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from pymongo import MongoClient
from pymongo.errors import OperationFailure
from pymongo.operations import DeleteOne, ReplaceOne, UpdateOne

from shardstream.cluster_sync.apply_rules import CrudWrite, WriteModel, model_of
from shardstream.cluster_sync.namespace_map import Namespace
from shardstream.cluster_sync.shard_target import catalog_collections
from shardstream.cluster_sync.write_statements import REPLACE, UPDATE, statement_parts

SHARD_KEY_NOT_FOUND: Final = 61
KEY_UPDATE_WITHOUT_KEY: Final = 31025
UNAUTHORIZED: Final = 13
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
    """The target's shard keys that writes must carry once the target refused one without
    them, kept current, and the key values read for refused updates (shared by lanes: a
    refresh swaps the whole map; a pin is one document's, on its own lane)."""

    def __init__(self, target: MongoClient[Any]) -> None:
        """Address nothing until :meth:`tighten`."""
        self._target = target
        self._fields: ShardKeys = {}
        self._strict = False
        self._pinned: dict[Namespace, Pinned] = {}

    @property
    def strict(self) -> bool:
        """Whether the target refused a write for its shard key (it is below FCV 7.1)."""
        return self._strict

    def tighten(self) -> None:
        """From now on address writes by the target's keys (read here)."""
        self._fields = target_shard_keys(self._target) or {}
        self._strict = True

    def refresh(self) -> None:
        """Read the keys again, if they are in use."""
        if self._strict:
            self._fields = target_shard_keys(self._target) or {}

    def fields(self, ns: Namespace) -> tuple[str, ...]:
        """The fields of ``ns``'s shard key on the target that its writes must carry."""
        return self._fields.get(ns, ())

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
    collection: Any, write: CrudWrite, fields: tuple[str, ...], session: Any = None
) -> dict[str, Any] | None:
    """The target key values of ``write``'s document as the target holds it (None: none),
    read in ``session`` (a transaction sees its own writes)."""
    projection = dict.fromkeys(fields, 1)
    found = collection.find_one({"_id": write.key.get("_id")}, projection, session=session)
    return None if found is None else key_values(found, fields)


def transaction_segments(
    writes: Sequence[CrudWrite], fields: tuple[str, ...]
) -> Iterator[tuple[int, Sequence[CrudWrite], bool]]:
    """``writes`` of one collection in a transaction, cut for addressing: ``(offset,
    writes, read)``, ``read`` for an update alone, whose key values are read first."""
    start = 0
    for n, write in enumerate(writes):
        if fields and write.kind == UPDATE:
            if n > start:
                yield start, writes[start:n], False
            yield n, writes[n : n + 1], True
            start = n + 1
    if start < len(writes):
        yield start, writes[start:], False


def addressed_update(write: CrudWrite, values: Mapping[str, Any] | None) -> WriteModel:
    """``write`` (an update) by ``_id`` and the key ``values`` (None: as planned)."""
    if values is None or write.kind != UPDATE:
        return write.model
    key, update = statement_parts(write.statement)
    return UpdateOne(key_query(key.get("_id"), values), update, upsert=False)


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


def key_query(document_id: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """The query of a document by ``_id`` and its target key ``values`` (``$eq`` each: a
    value may be a document whose field names start with ``$``); the source's own, maybe
    dotted, key fields stay out of it."""
    return {"_id": document_id, **{path: {"$eq": v} for path, v in values.items()}}


def _addressed(
    write: CrudWrite, fields: tuple[str, ...], pinned: dict[str, Any] | None
) -> tuple[WriteModel | None, WriteModel]:
    """The stale copy's delete (if the write needs one) and the write itself."""
    if write.kind == UPDATE and pinned is not None:
        return None, addressed_update(write, pinned)
    key, document = statement_parts(write.statement)
    if write.kind != REPLACE or all(path in key for path in fields):
        return None, model_of(write.kind, key, document)
    values = key_values(document, fields)
    differs = [{path: {"$ne": v}} for path, v in values.items()]
    stale = {"_id": key.get("_id"), **(differs[0] if len(differs) == 1 else {"$or": differs})}
    return DeleteOne(stale), ReplaceOne(key_query(key.get("_id"), values), document, upsert=True)
