"""Sync: DDL events applied to the target, each idempotent, in the stream's order.

A sharded source logs a collection's DDL on every shard that owns it, so the merged
stream may carry the same ``create`` or ``createIndexes`` more than once; each rule
therefore accepts "already so" (``NamespaceExists``, an index that exists, a drop of
something gone), and a replayed ``createIndexes`` that meets its index's name or key in
another shape (a later ``collMod``, or a name reused) builds nothing, since the later
events that shaped it are replayed too. A rename onto a name the target already holds (the
copy, read after T0, found the collection renamed) drops the old name's replayed remains
instead; a rename that dropped its target on the source, if it falls before the copy's
read, still replaces the newer copy with the replayed collection (noted in docs/sync.md).
After a kill, a DDL event is replayed only onto the target as it was just before or just
after it: the batch applier stores a checkpoint on each side of every DDL event.

The scope's filter decides what a cross-namespace event touches: a dropDatabase drops the
target database only when the scope holds every collection of it (else the drops of its
collections in scope, which the server logs before it, have done the work, and the
target's other collections are not the sync's to drop); a rename whose new name is out of
scope drops the old name, since the renamed collection left the scope
(:mod:`.apply_rules` refuses the converse).

``shardCollection`` is applied only with ``--shard-target``: a target whose collections
stay unsharded is the default, since its topology is the user's choice
(:mod:`~shardstream.cluster_sync.shard_target`, which also shards what was sharded at T0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import OperationFailure

from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.shard_target import shard_collection
from shardstream.cluster_sync.view_mapping import mapped_view_options
from shardstream.errors import OplogError

NAMESPACE_EXISTS: Final = 48
NAMESPACE_NOT_FOUND: Final = 26
INDEX_NOT_FOUND: Final = 27
INDEX_OPTIONS_CONFLICT: Final = 85
INDEX_KEY_SPECS_CONFLICT: Final = 86
# Options of `create` that describe the collection rather than configure it.
_NOT_OPTIONS: Final = frozenset({"idIndex"})
_ALREADY_SO: Final = frozenset({NAMESPACE_EXISTS, NAMESPACE_NOT_FOUND, INDEX_NOT_FOUND})


def apply_ddl(
    client: MongoClient[Any],
    event: Mapping[str, Any],
    namespaces: NamespaceMap,
    *,
    shard_target: bool = False,
) -> None:
    """Apply one DDL change event to the target behind ``client``.

    Raises:
        OperationFailure: the target refused it for another reason than "already so".
        OplogError: the event lacks what its rule needs.
        ShardingRefused: the target would not shard a collection as the event says.
    """
    kind = event["operationType"]
    db, coll = event["ns"]["db"], event["ns"].get("coll")
    description: Mapping[str, Any] = event.get("operationDescription") or {}
    try:
        if kind == "dropDatabase":
            if not namespaces.whole_database(db):
                return
            client.drop_database(namespaces.target_db(db))
            # Collections a rule sent elsewhere were in the dropped database too.
            for source, target in namespaces.rules:
                if "." in source and source.partition(".")[0] == db:
                    target_db, _, target_coll = target.partition(".")
                    client[target_db].drop_collection(target_coll)
            return
        target_db, target_coll = namespaces.target(db, coll)
        database = client[target_db]
        if kind == "create":
            options = {k: v for k, v in description.items() if k not in _NOT_OPTIONS}
            options = mapped_view_options(namespaces, db, coll, options)
            database.command({"create": target_coll, **options})
        elif kind == "createIndexes":
            for spec in description.get("indexes", []):
                _create_index(database, target_coll, _index_spec(spec))
        elif kind == "dropIndexes":
            for spec in description.get("indexes", []):
                database.command({"dropIndexes": target_coll, "index": spec["name"]})
        elif kind == "modify":
            changes = mapped_view_options(namespaces, db, coll, description)
            database.command({"collMod": target_coll, **changes})
        elif kind == "drop":
            database.drop_collection(target_coll)
        elif kind == "rename":
            to = event.get("to") or description.get("to")
            if not isinstance(to, Mapping):
                raise OplogError(f"expected a rename event with 'to', got {event!r:.200}")
            if not namespaces.in_scope(to["db"], to["coll"]):
                database.drop_collection(target_coll)  # renamed out of the scope
                return
            _rename(
                client,
                (target_db, target_coll),
                namespaces.target(to["db"], to["coll"]),
                drop_target=bool(description.get("dropTarget")),
            )
        elif kind == "shardCollection" and shard_target:
            unique = bool(description.get("unique", False))
            shard_collection(
                client, (target_db, target_coll), description["shardKey"], unique=unique
            )
    except OperationFailure as exc:
        if exc.code not in _ALREADY_SO:
            raise


def _rename(
    client: MongoClient[Any], old: tuple[str, str], new: tuple[str, str], *, drop_target: bool
) -> None:
    try:
        client.admin.command(
            {
                "renameCollection": ".".join(old),
                "to": ".".join(new),
                "dropTarget": drop_target,
            }
        )
    except OperationFailure as exc:
        if exc.code != NAMESPACE_EXISTS or drop_target:
            raise
        # The source renamed onto a free name, so the new name exists here only because the
        # copy (read after T0, after this rename) or an earlier run of this sync already
        # holds the renamed collection, newer than this event. The old name holds only the
        # events replayed since T0 for a collection that was renamed away: drop it.
        client[old[0]].drop_collection(old[1])


def _create_index(database: Database[Any], coll: str, spec: Mapping[str, Any]) -> None:
    # One index per command, so that one index skipped below does not keep the others of
    # the event from being built.
    try:
        database.command({"createIndexes": coll, "indexes": [spec]})
    except OperationFailure as exc:
        if exc.code not in (INDEX_OPTIONS_CONFLICT, INDEX_KEY_SPECS_CONFLICT):
            raise
        # The name (or key) is taken by an index of another shape: a replay (from a
        # checkpoint, or from T0 over a copy read later) meets the index as a later event
        # left it, e.g. a TTL index whose expireAfterSeconds a collMod changed, or a name
        # dropped and reused for another key. Those later events are replayed too and
        # leave it as on the source; failing here would stop the sync for good.


def _index_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    # The index version is the target's choice; everything else is the index itself.
    return {name: value for name, value in spec.items() if name != "v"}
