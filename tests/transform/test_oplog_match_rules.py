"""Oplog filter and transaction unwind rules, each checked against the server source.

Sources: change_stream_filter_helpers.cpp (7.x/8.0 line 07d58b89; 6.x copy with the
legacy hook), change_stream_helpers_legacy.cpp (06447495) and
document_source_change_stream_unwind_transaction.cpp (8.x 0168edae; 6.x/7.0 copy).

The streams run on both paths (the ``path`` fixture, tests/paths.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from shardstream.transform.stages.oplog_match import OplogMatch
from tests import factories as make
from tests.paths import OnPath

T = [Timestamp(1700000000, i) for i in range(20)]
COLL = ChangeStreamOptions(db="db", coll="coll")
UUID_VALUE = make.COLLECTION_UUID


def _run(
    path: OnPath, entries: list[dict[str, Any]], options: ChangeStreamOptions = COLL
) -> list[ChangeEvent]:
    return path.transform(entries, options)


def _other_ns_apply_ops(prev_op_time: Any) -> dict[str, Any]:
    entry = make.apply_ops(T[2], [make.inner(make.insert(T[0], {"_id": 1}, ns="db.other"))])
    entry["prevOpTime"] = prev_op_time
    return entry


# filter_helpers 07d58b89, buildTransactionFilter: {prevOpTime: {$ne: OpTime().toBSON()}} compares
# the embedded document field by field, in order, and numbers by value.
@pytest.mark.parametrize(
    ("prev_op_time", "matches"),
    [
        ({"ts": Timestamp(0, 0), "t": Int64(-1)}, False),
        ({"ts": Timestamp(0, 0), "t": -1.0}, False),
        ({"t": Int64(-1), "ts": Timestamp(0, 0)}, True),
        ([{"ts": Timestamp(0, 0), "t": Int64(-1)}], False),
        ({"ts": Timestamp(0, 0), "t": Int64(-1), "x": 1}, True),
    ],
)
def test_null_prev_op_time_is_compared_as_an_ordered_document(
    prev_op_time: Any, matches: bool
) -> None:
    assert OplogMatch(COLL)(_other_ns_apply_ops(prev_op_time)) is matches


# filter_helpers 07d58b89: {op: "c", "o.commitTransaction": 1} matches 1 of any numeric type.
@pytest.mark.parametrize("one", [1, Int64(1), 1.0, Decimal128("1"), Decimal128("1.0"), [5, 1]])
def test_commit_transaction_equals_one_of_any_numeric_type(path: OnPath, one: Any) -> None:
    prepare = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))], prepare=True)
    commit = make.commit(T[3], T[1], T[2])
    commit["o"]["commitTransaction"] = one
    assert [e.operation_type for e in _run(path, [prepare, commit])] == ["insert"]


def test_commit_transaction_true_is_not_one(path: OnPath) -> None:
    prepare = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))], prepare=True)
    commit = make.commit(T[3], T[1], T[2])
    commit["o"]["commitTransaction"] = True
    assert _run(path, [prepare, commit]) == []


# filter_helpers 07d58b89: {"o.prepare": {$not: {$eq: true}}}; $eq matches an array holding true.
def test_prepare_flag_inside_an_array_counts_as_prepared(path: OnPath) -> None:
    entry = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))])
    entry["o"]["prepare"] = [True]
    assert _run(path, [entry]) == []


# filter_helpers 07d58b89, buildNotFromMigrateFilter: {fromMigrate: {$ne: true}}.
def test_from_migrate_inside_an_array_counts_as_from_migrate(path: OnPath) -> None:
    assert _run(path, [make.insert(T[1], {"_id": 1}, fromMigrate=[True])]) == []
    assert len(_run(path, [make.insert(T[1], {"_id": 1}, fromMigrate=[False])])) == 1


# filter_helpers 07d58b89 has the {op: "n", o2.endOfTransaction: nsRegex} arm; the 6.x filter does
# not, and the arm postdates the 7.0 branch.
@pytest.mark.parametrize(("version", "matches"), [((6, 0), False), ((7, 0), False), ((8, 0), True)])
def test_end_of_transaction_noop_is_matched_from_7_1(
    version: tuple[int, int], matches: bool
) -> None:
    noop = make.noop(
        T[1], {"endOfTransaction": "db.coll", "lsid": make.LSID, "txnNumber": Int64(1)}
    )
    options = COLL.with_options(show_expanded_events=True, server_version=version)
    assert OplogMatch(options)(noop) is matches


def _legacy_noop(kind: str, **fields: Any) -> dict[str, Any]:
    return make.noop(T[1], {"type": kind, **fields}, ns="db.coll")


# change_stream_helpers_legacy.cpp 06447495, populateInternalOperationFilter and
# convertFromLegacyOplogFormat: 6.x reads pre-6.0 {o2.type: <event>} no-ops.
def test_legacy_o2_type_reshard_noop_becomes_an_event_on_6_x(path: OnPath) -> None:
    resharding_uuid = make.COLLECTION_UUID
    noop = _legacy_noop("reshardBegin", reshardingUUID=resharding_uuid)
    options = COLL.with_options(
        show_migration_events=True, show_expanded_events=True, server_version=(6, 0)
    )
    [event] = _run(path, [noop], options)
    assert list(event.document) == [
        "reshardingUUID",
        "_id",
        "operationType",
        "clusterTime",
        "collectionUUID",
        "wallTime",
        "ns",
        "operationDescription",
    ]
    assert event.document["operationType"] == "reshardBegin"
    assert event.document["reshardingUUID"] == resharding_uuid
    # o2 minus type, minus the appended {reshardBegin: <ns>}.
    assert event.document["operationDescription"] == {"reshardingUUID": resharding_uuid}
    assert _run(path, [noop], options.with_options(server_version=(7, 0))) == []


def test_legacy_o2_type_new_shard_noop_needs_a_merged_stream(path: OnPath) -> None:
    noop = _legacy_noop("migrateChunkToNewShard", fromShardId="a", toShardId="b")
    merged = ChangeStreamOptions(merged_by_router=True, server_version=(6, 0))
    [event] = _run(path, [noop], merged)
    assert event.operation_type == "kNewShardDetected"
    assert _run(path, [noop], ChangeStreamOptions(server_version=(6, 0))) == []
    assert _run(path, [noop], merged.with_options(server_version=(7, 0))) == []


def test_legacy_o2_type_must_equal_a_listed_event(path: OnPath) -> None:
    options = COLL.with_options(show_expanded_events=True, server_version=(6, 0))
    assert _run(path, [_legacy_noop("shardCollection", shardKey={"a": 1})], options) == []


# unwind_transaction 0168edae: a commitTransaction with no prevOpTime chain leaves nothing to
# read, which the server asserts (5543804) rather than emitting nothing.
def test_commit_transaction_without_a_chain_fails(path: OnPath) -> None:
    commit = make.commit(T[3], T[1], T[2])
    commit["prevOpTime"] = make.NULL_OPTIME
    with pytest.raises(TransformError) as caught:
        _run(path, [commit])
    assert caught.value.code == 5543804


# unwind_transaction 0168edae, _lookUpOplogEntryByOpTime: a lost chain entry is
# ChangeStreamHistoryLost (286).
def test_missing_chain_entry_is_change_stream_history_lost(path: OnPath) -> None:
    last = make.apply_ops(T[3], [make.inner(make.insert(T[0], {"_id": 1}))], prev=T[2])
    with pytest.raises(TransformError) as caught:
        _run(path, [last])
    assert caught.value.code == 286


def _vectored_insert(txn_number: Any = None, multi_op_type: Any = 1) -> dict[str, Any]:
    ops = [make.inner(make.insert(T[0], {"_id": n})) for n in (1, 2)]
    entry = make.apply_ops(T[3], ops, prev=T[1])
    entry["multiOpType"] = multi_op_type
    if txn_number is not None:
        entry["txnNumber"] = txn_number
    return entry


# unwind_transaction 0168edae reads multiOpType (8.0+): kApplyOpsAppliedSeparately drops the
# lsid/txnNumber and does not follow prevOpTime; the 6.x/7.0 unwinder never looks at it.
def test_multi_op_type_is_read_from_8_0_only(path: OnPath) -> None:
    events = _run(path, [_vectored_insert()], COLL.with_options(server_version=(8, 0)))
    assert [next(iter(e.document)) for e in events] == ["_id", "_id"]
    with pytest.raises(TransformError) as caught:  # 7.0 follows prevOpTime to a lost entry
        _run(path, [_vectored_insert()], COLL.with_options(server_version=(7, 0)))
    assert caught.value.code == 286


# unwind_transaction 0168edae: checkValueTypeOrMissing(multiOpType, NumberInt) (40532).
@pytest.mark.parametrize("multi_op_type", [Int64(1), 1.0, True])
def test_multi_op_type_must_be_an_int32(path: OnPath, multi_op_type: Any) -> None:
    with pytest.raises(TransformError) as caught:
        _run(path, [_vectored_insert(multi_op_type=multi_op_type)])
    assert caught.value.code == 40532


# unwind_transaction (all lines): checkValueTypeOrMissing(lsid, Object) / (txnNumber, NumberLong).
def test_transaction_txn_number_must_be_an_int64(path: OnPath) -> None:
    entry = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))])
    entry["txnNumber"] = 1
    with pytest.raises(TransformError) as caught:
        _run(path, [entry])
    assert caught.value.code == 40532


# unwind_transaction (all lines), _assertExpectedTransactionEventFormat: op must be a string
# (5543808) and never "n" (5543809), checked before the op filter.
@pytest.mark.parametrize(("op", "code"), [(5, 5543808), ("n", 5543809)])
def test_inner_op_must_be_a_string_and_not_a_noop(path: OnPath, op: Any, code: int) -> None:
    bad = {"op": op, "ns": "db.other", "o": {"msg": "x"}}
    entry = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1})), bad])
    with pytest.raises(TransformError) as caught:
        _run(path, [entry])
    assert caught.value.code == code


# filter_helpers (6.x copy) gates refineCollectionShardKey and reshardCollection behind
# featureFlagChangeStreamsFurtherEnrichedEvents (6.1+); the manual says reshardCollection events
# are "also available in 6.0.14", so the newest 6.0 matches that one only.
@pytest.mark.parametrize(
    ("key", "version", "matches"),
    [
        ("reshardCollection", (6, 0), True),
        ("refineCollectionShardKey", (6, 0), False),
        ("refineCollectionShardKey", (7, 0), True),
    ],
)
def test_shard_key_change_noops_by_version(
    key: str, version: tuple[int, int], matches: bool
) -> None:
    noop = make.noop(T[1], {key: "db.coll", "shardKey": {"a": 1}}, ns="db.coll")
    options = COLL.with_options(show_expanded_events=True, server_version=version)
    assert OplogMatch(options)(noop) is matches
