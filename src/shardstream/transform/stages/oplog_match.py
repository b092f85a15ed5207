"""Stage 1: which oplog entries a shard's change stream looks at.

Emulates ``DocumentSourceChangeStreamOplogMatch`` and the predicates of
change_stream_filter_helpers.cpp: ``ts >= start AND notFromMigrate AND (operation OR
invalidation OR transaction OR internalOp OR viewDefinition)``, with the server's own
namespace regexes.  Entries it rejects still advance a shard's position; they just
produce no event.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.decimal128 import Decimal128
from bson.timestamp import Timestamp

from shardstream.transform.options import ChangeStreamOptions, StreamScope

_REGEX_SPECIALS: Final = frozenset("*+|()^?[].\\/$")
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
_NULL_OPTIME_TS: Final = Timestamp(0, 0)


def _escape_regex(text: str) -> str:
    """Escape ``text`` the way the server does before putting it in a regex."""
    return "".join("\\" + ch if ch in _REGEX_SPECIALS else ch for ch in text)


def _matches(value: Any, pattern: re.Pattern[str]) -> bool:
    # A $regex predicate only ever matches string values.
    return isinstance(value, str) and pattern.search(value) is not None


class OplogMatch:
    """The shard-side oplog filter of one stream.  O(1) regex searches per entry."""

    __slots__ = (
        "_cmd_ns",
        "_coll",
        "_invalidating_ns",
        "_ns",
        "_options",
        "_start",
        "_view_ns",
    )

    def __init__(self, options: ChangeStreamOptions) -> None:
        self._options = options
        scope = options.scope
        all_colls = _ALL_COLLECTIONS_SYSTEM if options.show_system_events else _ALL_COLLECTIONS
        db = _escape_regex(options.db) if options.db is not None else ""
        if scope is StreamScope.COLLECTION:
            assert options.coll is not None
            coll = _escape_regex(options.coll)
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
        if self._options.show_migration_events or not _mql_eq(entry.get("fromMigrate"), _is_true):
            return True
        if not self._options.show_system_events or not _matches(entry.get("ns"), self._cmd_ns):
            return False
        o = entry.get("o")
        return isinstance(o, Mapping) and (
            _matches(o.get("create"), self._coll) or _matches(o.get("createIndexes"), self._coll)
        )

    def operation(self, entry: Mapping[str, Any]) -> bool:
        """CRUD on a watched namespace, or a DDL command on one."""
        op = entry.get("op")
        if op not in ("n", "c"):
            return _matches(entry.get("ns"), self._ns)
        if op == "n" or not _matches(entry.get("ns"), self._cmd_ns):
            return False
        o = entry.get("o")
        if not isinstance(o, Mapping):
            return False
        if any(_matches(o.get(name), self._coll) for name in _COLLECTION_COMMANDS):
            return True
        if _matches(o.get("renameCollection"), self._ns):
            return True
        if "renameCollection" in o and _matches(o.get("to"), self._ns):
            return True
        return self._options.scope is not StreamScope.COLLECTION and "dropDatabase" in o

    def _invalidation(self, entry: Mapping[str, Any]) -> bool:
        scope = self._options.scope
        if scope is StreamScope.CLUSTER or entry.get("op") != "c":
            return False
        if entry.get("ns") != f"{self._options.db}.$cmd":
            return False
        o = entry.get("o")
        if not isinstance(o, Mapping):
            return False
        if scope is StreamScope.DATABASE:
            return "dropDatabase" in o
        return (
            o.get("drop") == self._options.coll
            or o.get("renameCollection") == self._invalidating_ns
            or ("renameCollection" in o and o.get("to") == self._invalidating_ns)
        )

    def _transaction(self, entry: Mapping[str, Any]) -> bool:
        op = entry.get("op")
        o = entry.get("o")
        if op == "n":
            # endOfTransaction no-ops arrived after the 7.0 branch (the 6.x filter has no such arm).
            o2 = entry.get("o2")
            return (
                self._options.at_least(7, 1)
                and isinstance(o2, Mapping)
                and _matches(o2.get("endOfTransaction"), self._ns)
            )
        if op != "c" or not isinstance(o, Mapping):
            return False
        # {o.commitTransaction: 1} compares numbers by value (1, 1.0, 1L, 1 decimal), never bools.
        if _mql_eq(o.get("commitTransaction"), _is_one):
            return True
        ops = o.get("applyOps")
        if not isinstance(ops, list):
            return False
        if _mql_eq(o.get("prepare"), _is_true) or _mql_eq(o.get("partialTxn"), _is_true):
            return False
        # {prevOpTime: {$ne: OpTime()}}: a missing prevOpTime is "not equal" too.
        if not _mql_eq(entry.get("prevOpTime"), _is_null_optime):
            return True
        for inner in ops:
            if not isinstance(inner, Mapping):
                continue
            if _matches(inner.get("ns"), self._ns):
                return True
            inner_o = inner.get("o")
            if (
                _matches(inner.get("ns"), self._cmd_ns)
                and isinstance(inner_o, Mapping)
                and (
                    _matches(inner_o.get("create"), self._coll)
                    or _matches(inner_o.get("createIndexes"), self._coll)
                )
            ):
                return True
        return False

    def _internal_op(self, entry: Mapping[str, Any]) -> bool:
        if entry.get("op") != "n" or not _matches(entry.get("ns"), self._ns):
            return False
        o2 = entry.get("o2")
        if not isinstance(o2, Mapping):
            return False
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
        return _mql_eq(o2.get("type"), lambda value: isinstance(value, str) and value in legacy)

    def _view_definition(self, entry: Mapping[str, Any]) -> bool:
        if not self._options.show_expanded_events:
            return False
        if self._options.scope is StreamScope.COLLECTION or entry.get("op") in ("n", "c"):
            return False
        return _matches(entry.get("ns"), self._view_ns)


def _mql_eq(value: Any, predicate: Callable[[Any], bool]) -> bool:
    """An ``$eq`` against a scalar: true if the value, or any element of an array value, matches."""
    if isinstance(value, list):
        return any(predicate(element) for element in value)
    return predicate(value)


def _is_true(value: Any) -> bool:
    return value is True


def _number_equals(value: Any, target: int) -> bool:
    # Numbers compare by value across int32, int64, double and decimal; bool is not a number.
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == target
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return number.is_finite() and number == target
    return False


def _is_one(value: Any) -> bool:
    return _number_equals(value, 1)


def _is_null_optime(optime: Any) -> bool:
    """Whether ``optime`` equals the null optime ``{ts: Timestamp(0, 0), t: -1}``.

    Embedded documents compare field by field in order, so ``{t, ts}`` is a different value.
    """
    if not isinstance(optime, Mapping) or list(optime) != ["ts", "t"]:
        return False
    ts = optime["ts"]
    return isinstance(ts, Timestamp) and ts == _NULL_OPTIME_TS and _number_equals(optime["t"], -1)
