"""Sync: DDL events applied to the target, each idempotent, in the stream's order.

A sharded source logs a collection's DDL on every shard that owns it, so the merged
stream may carry the same ``create`` or ``createIndexes`` more than once; each rule
therefore accepts "already so" (``NamespaceExists``, an index that exists, a drop of
something gone). ``shardCollection`` is applied only with ``--shard-target``: a target
whose collections stay unsharded is the default, since its topology is the user's choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pymongo import MongoClient
from pymongo.errors import OperationFailure

from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.errors import OplogError

NAMESPACE_EXISTS: Final = 48
NAMESPACE_NOT_FOUND: Final = 26
INDEX_NOT_FOUND: Final = 27
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
    """
    kind = event["operationType"]
    db, coll = event["ns"]["db"], event["ns"].get("coll")
    description: Mapping[str, Any] = event.get("operationDescription") or {}
    try:
        if kind == "dropDatabase":
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
            database.command({"create": target_coll, **options})
        elif kind == "createIndexes":
            indexes = [_index_spec(spec) for spec in description.get("indexes", [])]
            database.command({"createIndexes": target_coll, "indexes": indexes})
        elif kind == "dropIndexes":
            for spec in description.get("indexes", []):
                database.command({"dropIndexes": target_coll, "index": spec["name"]})
        elif kind == "modify":
            database.command({"collMod": target_coll, **description})
        elif kind == "drop":
            database.drop_collection(target_coll)
        elif kind == "rename":
            to = event.get("to") or description.get("to")
            if not isinstance(to, Mapping):
                raise OplogError(f"expected a rename event with 'to', got {event!r:.200}")
            new_db, new_coll = namespaces.target(to["db"], to["coll"])
            client.admin.command(
                {
                    "renameCollection": f"{target_db}.{target_coll}",
                    "to": f"{new_db}.{new_coll}",
                    "dropTarget": bool(description.get("dropTarget")),
                }
            )
        elif kind == "shardCollection" and shard_target:
            client.admin.command(
                {
                    "shardCollection": f"{target_db}.{target_coll}",
                    "key": description["shardKey"],
                    "unique": bool(description.get("unique", False)),
                }
            )
    except OperationFailure as exc:
        if exc.code not in _ALREADY_SO:
            raise


def _index_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    # The index version is the target's choice; everything else is the index itself.
    return {name: value for name, value in spec.items() if name != "v"}
