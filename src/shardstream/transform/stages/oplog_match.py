"""Stage 1: which oplog entries a shard's change stream looks at.

Emulates ``DocumentSourceChangeStreamOplogMatch`` and the predicates of
change_stream_filter_helpers.cpp: ``ts >= start AND notFromMigrate AND (operation OR
invalidation OR transaction OR internalOp OR viewDefinition)``, with the server's own
namespace regexes.  Entries it rejects still advance a shard's position; they just
produce no event.

The stream's ``--include`` / ``--exclude`` filter is pushed down here, as the server
rewrites a user's ``$match`` on ``ns`` into the oplog filter: an entry whose every event
the filter would drop is rejected before it is unwound or transformed (the fast path's
templates ask :meth:`OplogMatch.operation` too).  The check errs on the side of keeping:
what it keeps, ``ShardPipeline`` filters exactly by the event (``selects_event``); an
entry whose namespace is not a string is kept for the transform to judge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.transform.namespace_filter import NamespaceFilter
from shardstream.transform.options import ChangeStreamOptions, StreamScope
from shardstream.transform.stages.mql_predicates import (
    documents,
    escape_regex,
    is_null_optime,
    is_one,
    is_true,
    matches,
    mql_eq,
    op_is,
)

_ALL_COLLECTIONS: Final = r"(?!(\$|system\.))"
# With showSystemEvents a few system collections are let through.
_ALL_COLLECTIONS_SYSTEM: Final = r"(?!(\$|system\.(?!(js$|resharding\.|buckets\.|views$))))"
_ALL_DATABASES: Final = r"^(?!(admin|config|local)\.)[^.]+"
_COLLECTION_COMMANDS: Final = (
    "drop",
    "create",
    "createIndexes",
    "commitIndexBuild",
    "dropIndexes",
    "collMod",
)
# reshardCollection events are "new in 6.1, also available in 6.0.14" (the manual); a
# (major, minor) version stands for its newest patch, so 6.0 matches them too.
_INTERNAL_NOOPS_ALWAYS: Final = (
    "reshardBegin",
    "reshardDoneCatchUp",
    "shardCollection",
    "reshardCollection",
)
_INTERNAL_NOOPS_SINCE_6_1: Final = ("refineCollectionShardKey",)
# 6.x also matched no-ops written before 6.0, whose kind is o2.type (change_stream_helpers_legacy).
_LEGACY_NOOP_TYPES: Final = ("reshardBegin", "reshardDoneCatchUp")
# The merger follows a new shard through this no-op: the namespace filter never drops it.
_NEW_SHARD_NOOP: Final = "migrateChunkToNewShard"


class OplogMatch:
    """The shard-side oplog filter of one stream.  O(1) regex searches per entry."""

    __slots__ = (
        "_cmd_ns",
        "_coll",
        "_filter",
        "_invalidating_ns",
        "_ns",
        "_options",
        "_start",
        "_view_ns",
    )

    def __init__(self, options: ChangeStreamOptions) -> None:
        self._options = options
        self._filter: NamespaceFilter | None = options.namespace_filter
        scope = options.scope
        all_colls = _ALL_COLLECTIONS_SYSTEM if options.show_system_events else _ALL_COLLECTIONS
        db = escape_regex(options.db) if options.db is not None else ""
        if scope is StreamScope.COLLECTION:
            assert options.coll is not None
            coll = escape_regex(options.coll)
            ns, coll_regex, cmd_ns = rf"^{db}\.{coll}$", rf"^{coll}$", rf"^{db}\.\$cmd$"
        elif scope is StreamScope.DATABASE:
            ns, coll_regex, cmd_ns = rf"^{db}\." + all_colls, "^" + all_colls, rf"^{db}\.\$cmd$"
        else:
            ns = _ALL_DATABASES + r"\." + all_colls
            coll_regex, cmd_ns = "^" + all_colls, _ALL_DATABASES + r"\.\$cmd$"
        self._ns = re.compile(ns)
        self._coll = re.compile(coll_regex)
        self._cmd_ns = re.compile(cmd_ns)
        views = rf"^{db}\.system\.views$" if options.db else _ALL_DATABASES + r"\.system\.views$"
        self._view_ns = re.compile(views)
        self._invalidating_ns = f"{options.db}.{options.coll}"
        start = options.resume_token
        self._start: Timestamp | None = (
            start.cluster_time if start is not None else options.start_at_operation_time
        )

    def __call__(self, entry: Mapping[str, Any]) -> bool:
        """Return whether the stream looks at ``entry`` (a top-level oplog entry)."""
        if self._start is not None:
            ts = entry.get("ts")
            if not isinstance(ts, Timestamp) or ts < self._start:
                return False
        if not self.not_from_migrate(entry):
            return False
        return (
            self.operation(entry)
            or self._invalidation(entry)
            or self._transaction(entry)
            or self._internal_op(entry)
            or self._view_definition(entry)
        )

    def matches_inner_op(self, op: Mapping[str, Any]) -> bool:
        """The filter for one op inside ``applyOps``: operation AND notFromMigrate."""
        return self.not_from_migrate(op) and self.operation(op)

    def not_from_migrate(self, entry: Mapping[str, Any]) -> bool:
        """Drop internal writes (chunk migrations, orphan cleanup) unless asked for."""
        # {fromMigrate: {$ne: true}}: an array holding true counts as true, as $eq reads arrays.
        if self._options.show_migration_events or not mql_eq(entry.get("fromMigrate"), is_true):
            return True
        if not self._options.show_system_events or not matches(entry.get("ns"), self._cmd_ns):
            return False
        return any(
            matches(o.get("create"), self._coll) or matches(o.get("createIndexes"), self._coll)
            for o in documents(entry.get("o"))
        )

    def operation(self, entry: Mapping[str, Any]) -> bool:
        """CRUD on a watched namespace, or a DDL command on one."""
        op = entry.get("op")
        is_command = op_is(op, "c")
        if not is_command and not op_is(op, "n"):
            ns = entry.get("ns")
            return matches(ns, self._ns) and self._selects(ns)
        ns = entry.get("ns")
        if not is_command or not matches(ns, self._cmd_ns):
            return False
        db = ns.partition(".")[0] if isinstance(ns, str) else None
        # "o.<command>" looks into each document of an array o too (MQL's array traversal):
        # such an entry is matched, and then refused by the transform, as on the server.
        return any(self._command_on_watched(o, db) for o in documents(entry.get("o")))

    def _selects(self, namespace: Any, db: str | None = None) -> bool:
        """The filter's verdict on ``db.namespace`` (or on ``namespace`` whole, db None);
        a value that is no string is kept: the transform judges it."""
        if self._filter is None or not isinstance(namespace, str):
            return True
        if db is None:
            return self._filter.selects_namespace(namespace)
        return self._filter.selects(db, namespace)

    def _command_on_watched(self, o: Mapping[str, Any], db: str | None) -> bool:
        in_db = db is not None
        if any(
            matches(o.get(name), self._coll) and (not in_db or self._selects(o.get(name), db))
            for name in _COLLECTION_COMMANDS
        ):
            return True
        renamed, to = o.get("renameCollection"), o.get("to")
        if matches(renamed, self._ns) or ("renameCollection" in o and matches(to, self._ns)):
            # Either name selected keeps a rename (namespace_filter's rule).
            return self._selects(renamed) or self._selects(to)
        if self._options.scope is StreamScope.COLLECTION or "dropDatabase" not in o:
            return False
        return self._filter is None or db is None or self._filter.may_select_database(db)

    def _invalidation(self, entry: Mapping[str, Any]) -> bool:
        scope = self._options.scope
        if scope is StreamScope.CLUSTER or not op_is(entry.get("op"), "c"):
            return False
        if entry.get("ns") != f"{self._options.db}.$cmd":
            return False
        return any(self._invalidates(o, scope) for o in documents(entry.get("o")))

    def _invalidates(self, o: Mapping[str, Any], scope: StreamScope) -> bool:
        if scope is StreamScope.DATABASE:
            return "dropDatabase" in o
        return (
            o.get("drop") == self._options.coll
            or o.get("renameCollection") == self._invalidating_ns
            or ("renameCollection" in o and o.get("to") == self._invalidating_ns)
        )

    def _transaction(self, entry: Mapping[str, Any]) -> bool:
        op = entry.get("op")
        if op_is(op, "n"):
            # endOfTransaction no-ops arrived after the 7.0 branch (the 6.x filter has no such arm).
            return self._options.at_least(7, 1) and any(
                matches(o2.get("endOfTransaction"), self._ns)
                and self._selects(o2.get("endOfTransaction"))
                for o2 in documents(entry.get("o2"))
            )
        return op_is(op, "c") and any(
            self._transaction_command(entry, o) for o in documents(entry.get("o"))
        )

    def _transaction_command(self, entry: Mapping[str, Any], o: Mapping[str, Any]) -> bool:
        # {o.commitTransaction: 1} compares numbers by value (1, 1.0, 1L, 1 decimal), never bools.
        if mql_eq(o.get("commitTransaction"), is_one):
            return True
        ops = o.get("applyOps")
        if not isinstance(ops, list):
            return False
        if mql_eq(o.get("prepare"), is_true) or mql_eq(o.get("partialTxn"), is_true):
            return False
        # {prevOpTime: {$ne: OpTime()}}: a missing prevOpTime is "not equal" too.
        if not mql_eq(entry.get("prevOpTime"), is_null_optime):
            return True
        for inner in ops:
            if not isinstance(inner, Mapping):
                continue
            inner_ns = inner.get("ns")
            if matches(inner_ns, self._ns) and self._selects(inner_ns):
                return True
            inner_o = inner.get("o")
            if (
                matches(inner_ns, self._cmd_ns)
                and isinstance(inner_o, Mapping)
                and any(
                    matches(inner_o.get(name), self._coll)
                    and (
                        not isinstance(inner_ns, str)
                        or self._selects(inner_o.get(name), inner_ns.partition(".")[0])
                    )
                    for name in ("create", "createIndexes")
                )
            ):
                return True
        return False

    def _internal_op(self, entry: Mapping[str, Any]) -> bool:
        if not op_is(entry.get("op"), "n") or not matches(entry.get("ns"), self._ns):
            return False
        o2s = documents(entry.get("o2"))
        if not any(self._internal_noop(o2) for o2 in o2s):
            return False
        return self._selects(entry.get("ns")) or any(
            _NEW_SHARD_NOOP in o2 or o2.get("type") == _NEW_SHARD_NOOP for o2 in o2s
        )

    def _internal_noop(self, o2: Mapping[str, Any]) -> bool:
        names: list[str] = list(_INTERNAL_NOOPS_ALWAYS)
        if self._options.at_least(6, 1):
            names += _INTERNAL_NOOPS_SINCE_6_1
        if self._options.merged_by_router:
            names.append("migrateChunkToNewShard")
        if self._options.show_system_events:
            names.append("migrateLastChunkFromShard")
        if any(name in o2 for name in names):
            return True
        if self._options.at_least(7, 0):
            return False
        # 6.x: {o2.type: <name>} for reshardBegin, reshardDoneCatchUp and (merged streams only)
        # migrateChunkToNewShard (populateInternalOperationFilter, change_stream_helpers_legacy).
        legacy = list(_LEGACY_NOOP_TYPES)
        if self._options.merged_by_router:
            legacy.append("migrateChunkToNewShard")
        return mql_eq(o2.get("type"), lambda value: isinstance(value, str) and value in legacy)

    def _view_definition(self, entry: Mapping[str, Any]) -> bool:
        if not self._options.show_expanded_events:
            return False
        op = entry.get("op")
        if self._options.scope is StreamScope.COLLECTION or op_is(op, "n") or op_is(op, "c"):
            return False
        return matches(entry.get("ns"), self._view_ns)
