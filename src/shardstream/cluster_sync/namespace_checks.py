"""Sync: the scope checked against the source's catalog before anything is written.

:class:`~shardstream.cluster_sync.namespace_map.NamespaceMap` refuses what the rules alone
show (malformed rules, two rules onto one target, the server's databases); what depends on
the source's databases is checked here:

- every ``--map`` source must exist on the source (for a new sync): a misspelled rule
  would not rename anything, and the database it was meant for would be copied under its
  own name, mixed into whatever the target holds there, with no sign of the mistake.
  Refused rather than warned, as a DBA expects of a copy tool: a warning scrolls past,
  and undoing a copy into the wrong place is a job of its own. (On a resumed sync a rule
  whose source was dropped since is normal, and is not checked.)
- no two source namespaces land on one target namespace, and no two source databases on
  one target database (``--map a=b`` while the source also holds ``b``): the target would
  merge them, and a ``dropDatabase`` of one would drop both.
"""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient

from shardstream.cluster_sync.cluster_identity import SyncRefused
from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap


def refuse_unsafe_scope(
    source: MongoClient[Any], namespaces: NamespaceMap, *, new_sync: bool
) -> None:
    """Check the rules and the scope against the source's databases and collections.

    Raises:
        SyncRefused: a rule names a namespace the source lacks (new sync), or two source
            namespaces or databases would land on one.
    """
    databases = source.list_database_names()
    if new_sync:
        _refuse_missing_sources(source, namespaces, databases)
    catalog = {
        db: set(source[db].list_collection_names()) for db in databases if namespaces.in_scope(db)
    }
    landed_dbs: dict[str, str] = {}
    landed: dict[Namespace, Namespace] = {}
    for db in sorted(catalog):
        target_db = namespaces.target_db(db)
        if target_db in landed_dbs and landed_dbs[target_db] != db:
            raise SyncRefused(
                f"expected each source database to land apart, got {landed_dbs[target_db]} "
                f"and {db} both landing in database {target_db} (check the --map rules)"
            )
        landed_dbs[target_db] = db
        for coll in sorted(catalog[db]):
            if not namespaces.in_scope(db, coll):
                continue
            target = namespaces.target(db, coll)
            if target in landed:
                first = ".".join(landed[target])
                raise SyncRefused(
                    f"expected each source namespace to land apart, got {first} and "
                    f"{db}.{coll} both landing on {'.'.join(target)} (check the --map rules)"
                )
            landed[target] = (db, coll)


def _refuse_missing_sources(
    source: MongoClient[Any], namespaces: NamespaceMap, databases: list[str]
) -> None:
    # Any rule, in scope or not: one naming nothing is a mistake either way.
    for rule_source, rule_target in namespaces.rules:
        db, dot, coll = rule_source.partition(".")
        if db not in databases:
            held = ", ".join(sorted(d for d in databases if namespaces.in_scope(d))) or "none"
            raise SyncRefused(
                f"expected --map {rule_source}={rule_target} to name a database the source "
                f"holds, got {db}, which it does not (its user databases: {held})"
            )
        if dot and coll not in source[db].list_collection_names():
            raise SyncRefused(
                f"expected --map {rule_source}={rule_target} to name a collection the source "
                f"holds, got {rule_source}, which it does not"
            )
